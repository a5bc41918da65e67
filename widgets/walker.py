"""DecisionWalker: step through any family's decision log (``result.steps``), with jumps and a table.

One walker serves every panel (issue 15): prev/next and a slider, jump-to-phase buttons, jumps to
the previous/next accepted decision and to the previous/next decision about one device, rank or
backend, and a filterable list of the decisions (selecting one jumps to it). It never re-runs the
algorithm: the panel draws the state after the chosen step through ``result.replay(k)``.

It walks the log it is given as it is (issue 29): any sequence of steps (a result's
:class:`~hetsched.results.LazySteps`, or :func:`chain` of two logs), read lazily (a raw log as
cheap read-only views), never copied; what a decision's phase, group and list line are comes
from the panel's functions of a step (``phase``, ``group``, ``label``), not from keys added to
copies of the steps. A decision is numbered by its position in the walk.

The walked trait counts decisions done: 0 is the state before the first decision, ``k`` the state
after decision ``k - 1`` (``steps[k - 1]``).

>>> import traitlets
>>> from hetsched.results import Step
>>> class S(traitlets.HasTraits):
...     step = traitlets.Int(0)
>>> steps = [Step(0, "map", "a", data={"phase": "first", "device": "gpu0"}),
...          Step(1, "map", "b", data={"phase": "first", "device": "cpu0"}),
...          Step(2, "remap", "a", accepted=False, reason="slower", data={"phase": "second", "device": "cpu0"}),
...          Step(3, "remap", "b", data={"phase": "second", "device": "gpu0"})]
>>> by = lambda key: lambda s: s.data.get(key)
>>> s = S(); w = DecisionWalker(s, phase=by("phase"), group=by("device")); w.set_steps(steps)
>>> w.jump("phase", value="second"), s.step      # after the first decision of that phase
(True, 3)
>>> w.jump("accepted", +1), s.step               # the next accepted decision is decision 3
(True, 4)
>>> w.jump("group", -1, "cpu0"), s.step           # back to the last decision about cpu0
(True, 3)
>>> w.filter_text.value = "remap"; [o[1] for o in w.table.options]
[3, 4]
"""

from __future__ import annotations

import html
import itertools
import re
from typing import Any, Callable, Iterator, Mapping, Sequence

import ipywidgets as W
import traitlets

from hetsched.results import LazySteps, Step

from .base import StepWalker

__all__ = ["DecisionWalker", "step_label", "chain", "MAX_LISTED"]

#: at most this many decisions are listed at once (a filter narrows a longer log)
MAX_LISTED = 400

StepFn = Callable[[Any], Any]


def _natural(text: str) -> list:
    """Sort key reading digit runs as numbers (rank 2 before rank 10).

    >>> sorted(["rank 10", "rank 2", "cpu0"], key=_natural)
    ['cpu0', 'rank 2', 'rank 10']
    """
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(text))]


def _num(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) else "–"


def step_label(step: Step, *, group: StepFn | None = None) -> str:
    """One line of the step list (after its number): ``✓/✗ action subject [group]: before → after``.

    >>> from hetsched.results import Step
    >>> step_label(Step(4, "remap", "conv1", before=2.0, after=1.5, data={"device": "gpu0"}),
    ...            group=lambda s: s.data.get("device"))
    '✓ remap conv1 [gpu0]: 2 → 1.5'
    """
    g = group(step) if group is not None else None
    grp = f" [{g}]" if g is not None else ""
    cost = f": {_num(step.before)} → {_num(step.after)}" if step.before is not None or step.after is not None else ""
    return f"{'✓' if step.accepted else '✗'} {step.action} {step.subject}{grp}{cost}"


class chain(Sequence):
    """Two (or more) logs walked one after the other, as one sequence, without copying a step.

    >>> from hetsched.results import Step
    >>> c = chain([Step(0, "mark", "a")], [Step(0, "dispatch", "x"), Step(1, "dispatch", "y")])
    >>> len(c), c[2].subject, [s.subject for s in c]
    (3, 'y', ['a', 'x', 'y'])
    """

    def __init__(self, *logs: Sequence) -> None:
        self.logs = logs
        self._ends = list(itertools.accumulate(len(x) for x in logs))

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        for log, end in zip(self.logs, self._ends):
            if i < end:
                return log[i - end + len(log)]
        raise IndexError(f"step {i} out of range")

    def views(self) -> Iterator[Any]:
        for log in self.logs:
            yield from _views(log)


def _views(steps: Sequence) -> Iterator[Any]:
    """Every step of a log in order, as cheaply as the log allows (read-only views of a raw log)."""
    return steps.views() if isinstance(steps, (LazySteps, chain)) else iter(steps)


class DecisionWalker(W.VBox):
    """Walk a decision log: prev/next, phases, accepted decisions, one device's decisions, a list.

    Parameters
    ----------
    state : HasTraits
        Holds the walked ``Int`` trait ``name`` (0 = before the first decision).
    name : str
        The trait's name.
    description : str
        The slider's label.
    phase : callable, optional
        ``step -> str or None``: the phase of a decision (jump-to-phase buttons); default: its
        ``data["phase"]``.
    group : callable, optional
        ``step -> str or None``: what a decision is about (a device, rank, backend): the "on
        this ..." jumps. ``None`` hides them.
    group_label : str
        What a group is called on screen (``"device"``, ``"rank"``...).
    label : callable, optional
        ``step -> str``: its line in the list, after its number (default :func:`step_label`).
    accepted_jumps : bool
        Offer the accepted-decision jumps and filter (``False`` for a log whose every step is
        accepted: a run's dispatches or action starts).
    phase_labels : dict, optional
        Words shown for phases (and for ``start``/``final``) on the jump buttons.
    phase_tips : dict, optional
        A tooltip per phase (the patent's claim behind it: labels stay plain words).

    The functions get a :class:`~hetsched.results.Step` or a read-only view with its attributes.
    """

    def __init__(self, state: traitlets.HasTraits, name: str = "step", *, description: str = "decision",
                 phase: StepFn | None = None, group: StepFn | None = None, group_label: str = "device",
                 label: Callable[[Any], str] | None = None, phase_labels: Mapping[str, str] | None = None,
                 accepted_jumps: bool = True, phase_tips: Mapping[str, str] | None = None) -> None:
        self._state, self._name = state, name
        self.phase_tips = dict(phase_tips or {})
        self.phase = phase or (lambda s: (s.data or {}).get("phase"))
        self.group_of, self.group_label = group, group_label
        self.phase_labels = dict(phase_labels or {})
        self._label = label or (lambda s: step_label(s, group=group))
        self.steps: Sequence[Step] = ()
        self._phase_first: dict[str, int] = {}
        self.stepper = StepWalker(state, name, description=description)
        small = W.Layout(width="auto")
        self.phases = W.ToggleButtons(options=[], description="jump to", style={"description_width": "initial",
                                                                              "button_width": "auto"})
        self.phases.observe(self._on_phase, names="value")
        self.prev_acc = W.Button(description="◀ accepted", layout=small, tooltip="the previous accepted decision")
        self.next_acc = W.Button(description="accepted ▶", layout=small, tooltip="the next accepted decision")
        self.prev_acc.on_click(lambda _b: self.jump("accepted", -1))
        self.next_acc.on_click(lambda _b: self.jump("accepted", +1))
        self.group = W.Dropdown(options=[], description=f"on {group_label}", layout=W.Layout(width="220px"),
                                style={"description_width": "initial"})
        self.prev_grp = W.Button(description="◀", layout=W.Layout(width="40px"), tooltip=f"previous decision on this {group_label}")
        self.next_grp = W.Button(description="▶", layout=W.Layout(width="40px"), tooltip=f"next decision on this {group_label}")
        self.prev_grp.on_click(lambda _b: self.jump("group", -1, self.group.value))
        self.next_grp.on_click(lambda _b: self.jump("group", +1, self.group.value))
        grp_box = [self.group, self.prev_grp, self.next_grp] if group else []
        self.filter_text = W.Text(placeholder="filter: action, subject, reason…", layout=W.Layout(width="260px"))
        self.accepted_only = W.Checkbox(description="accepted only", indent=False, layout=small)
        self.filter_text.observe(lambda _c: self._fill_table(), names="value")
        self.accepted_only.observe(lambda _c: self._fill_table(), names="value")
        self.table = W.Select(options=[], rows=7, layout=W.Layout(width="100%"))
        self.table.observe(self._on_pick, names="value")
        self.table_note = W.HTML()
        if not accepted_jumps:
            for wdg in (self.prev_acc, self.next_acc, self.accepted_only):
                wdg.layout.display = "none"
        self.jumps = W.HBox([self.prev_acc, self.next_acc, *grp_box], layout=W.Layout(flex_flow="row wrap", align_items="center"))
        self.list_box = W.Accordion(children=[W.VBox([W.HBox([self.filter_text, self.accepted_only, self.table_note]),
                                                      self.table])],
                                    titles=("decision list (filter, then pick one to jump to it)",))
        self._syncing = False
        state.observe(self._on_step, names=name)
        super().__init__([self.stepper, self.phases, self.jumps, self.list_box])
        self.add_class("hetsched-walker")

    def add_jumps(self, what: str, tooltip: str, jump: Callable[[int], Any]) -> tuple[W.Button, W.Button]:
        """A "◀ what" / "what ▶" pair of buttons after the walker's jumps, calling ``jump(-1)`` / ``jump(+1)``
        (``tooltip``: what they go to, after "the previous" / "the next")."""
        prev = W.Button(description=f"◀ {what}", layout=W.Layout(width="auto"), tooltip=f"the previous {tooltip}")
        nxt = W.Button(description=f"{what} ▶", layout=W.Layout(width="auto"), tooltip=f"the next {tooltip}")
        prev.on_click(lambda _b: jump(-1))
        nxt.on_click(lambda _b: jump(+1))
        self.jumps.children = (*self.jumps.children, prev, nxt)
        return prev, nxt

    # -- the log --------------------------------------------------------------------
    def set_steps(self, steps: Sequence[Step]) -> None:
        """A new log (a new result), walked as it is: ranges, phases, groups and the list follow it."""
        self.steps = steps
        self.stepper.set_count(len(steps))
        first: dict[str, int] = {}
        groups: dict[str, None] = {}
        phase, group = self.phase, self.group_of
        # one pass over cheap views: the first decision of each phase, and the groups on offer
        for i, s in enumerate(_views(steps)):
            ph = phase(s)
            if ph is not None and str(ph) not in first:
                first[str(ph)] = i
            if group is not None:
                g = group(s)
                if g is not None:
                    groups[str(g)] = None
        self._phase_first = first
        self._syncing = True
        try:
            lab = self.phase_labels
            keys = ("start", *first, "final")
            self.phases.options = [(lab.get(p, p), p) for p in keys]
            tips = [self.phase_tips.get(p, {"start": "before the first decision", "final": "after the last decision"}
                                        .get(p, f"the first decision of {lab.get(p, p)}")) for p in keys]
            if list(self.phases.tooltips) != tips:
                self.phases.tooltips = tips
            self.phases.value = None
            if group is not None:
                self.group.options = sorted(groups, key=_natural)
                self.group.value = self.group.options[0] if self.group.options else None
        finally:
            self._syncing = False
        self._fill_table()

    def jump(self, kind: str, direction: int = +1, value: Any = None) -> bool:
        """Move to another decision: ``kind`` is ``"phase"`` (``value`` a phase, ``start``, ``final``),
        ``"accepted"`` or ``"group"`` (``value`` a group); returns whether the step moved."""
        k = getattr(self._state, self._name)
        steps = self.steps
        n = len(steps)
        target = None
        if kind == "phase":
            target = 0 if value == "start" else n if value == "final" else (
                self._phase_first[value] + 1 if value in self._phase_first else None)
        else:
            group = self.group_of
            hit = (lambda s: s.accepted) if kind == "accepted" else (lambda s: str(group(s)) == str(value))
            # decision i is shown at step i + 1: search after (or before) the one on screen, step by step
            rng = range(k, n) if direction > 0 else range(k - 2, -1, -1)
            target = next((i + 1 for i in rng if hit(steps[i])), None)
        if target is None or target == k:
            return False
        setattr(self._state, self._name, target)
        return True

    # -- the list ---------------------------------------------------------------------
    def _fill_table(self) -> None:
        needle = self.filter_text.value.strip().lower()
        acc = self.accepted_only.value
        label = self._label
        if not needle and not acc:  # unfiltered: the first decisions, counted without reading the rest
            n_match = len(self.steps)
            opts = [(f"{i + 1} {label(s)}", i + 1) for i, s in enumerate(itertools.islice(_views(self.steps), MAX_LISTED))]
        else:
            opts, n_match = [], 0
            for i, s in enumerate(_views(self.steps)):
                if (acc and not s.accepted) or (needle and needle not in f"{s.action} {s.subject} {s.reason} {label(s)}".lower()):
                    continue
                n_match += 1
                if len(opts) < MAX_LISTED:
                    opts.append((f"{i + 1} {label(s)}", i + 1))
        self._syncing = True
        try:
            self.table.options = opts
            self._select_current()
        finally:
            self._syncing = False
        shown = f"{len(opts)} of {n_match} shown" if n_match > len(opts) else f"{n_match} decision(s)"
        self.table_note.value = f"<span style='color:#555'>{html.escape(shown)}</span>"

    def _select_current(self) -> None:
        k = getattr(self._state, self._name)
        vals = {v for _l, v in self.table.options}
        self.table.value = k if k in vals else None

    def _on_pick(self, change: dict) -> None:
        if self._syncing or change["new"] is None:
            return
        setattr(self._state, self._name, int(change["new"]))

    def _on_phase(self, change: dict) -> None:
        if self._syncing or change["new"] is None:
            return
        self.jump("phase", +1, change["new"])

    def _on_step(self, _change: dict) -> None:
        self._syncing = True
        try:
            self._select_current()
            if self.phases.value is not None:
                self.phases.value = None  # the phase buttons are jumps, not a mode
        finally:
            self._syncing = False
