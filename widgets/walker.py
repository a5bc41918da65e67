"""DecisionWalker: step through any family's decision log (``result.steps``), with jumps and a table.

One walker serves every panel (issue 15): prev/next and a slider, jump-to-phase buttons, jumps to
the previous/next accepted decision and to the previous/next decision about one device, rank or
backend, and a filterable list of the decisions (selecting one jumps to it). It never re-runs the
algorithm: the panel draws the state after the chosen step through ``result.replay(k)``.

The walked trait counts decisions done: 0 is the state before the first decision, ``k`` the state
after decision ``k - 1`` (``result.steps[k - 1]``).

>>> import traitlets
>>> from hetsched.results import Step
>>> class S(traitlets.HasTraits):
...     step = traitlets.Int(0)
>>> steps = [Step(0, "map", "a", data={"phase": "first", "device": "gpu0"}),
...          Step(1, "map", "b", data={"phase": "first", "device": "cpu0"}),
...          Step(2, "remap", "a", accepted=False, reason="slower", data={"phase": "second", "device": "cpu0"}),
...          Step(3, "remap", "b", data={"phase": "second", "device": "gpu0"})]
>>> s = S(); w = DecisionWalker(s, group_key="device"); w.set_steps(steps)
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
import re
from typing import Any, Callable, Mapping, Sequence

import ipywidgets as W
import traitlets

from hetsched.results import Step

from .base import StepWalker

__all__ = ["DecisionWalker", "step_label", "MAX_LISTED"]

#: at most this many decisions are listed at once (a filter narrows a longer log)
MAX_LISTED = 400


def _natural(text: str) -> list:
    """Sort key reading digit runs as numbers (rank 2 before rank 10).

    >>> sorted(["rank 10", "rank 2", "cpu0"], key=_natural)
    ['cpu0', 'rank 2', 'rank 10']
    """
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(text))]


def _num(x: Any) -> str:
    return f"{x:.4g}" if isinstance(x, (int, float)) else "–"


def step_label(step: Step, *, group_key: str | None = None) -> str:
    """One line of the step list: ``index ✓/✗ action subject (group): before → after``.

    >>> from hetsched.results import Step
    >>> step_label(Step(4, "remap", "conv1", before=2.0, after=1.5, data={"device": "gpu0"}), group_key="device")
    '5 ✓ remap conv1 [gpu0]: 2 → 1.5'
    """
    d = step.data or {}
    grp = f" [{d[group_key]}]" if group_key and d.get(group_key) is not None else ""
    cost = f": {_num(step.before)} → {_num(step.after)}" if step.before is not None or step.after is not None else ""
    return f"{step.index + 1} {'✓' if step.accepted else '✗'} {step.action} {step.subject}{grp}{cost}"


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
    phase_key : str
        ``step.data`` key naming the phase of a decision (jump-to-phase buttons).
    group_key : str, optional
        ``step.data`` key naming what a decision is about (a device, rank, backend): the
        "on this ..." jumps. ``None`` hides them.
    group_label : str
        What a group is called on screen (``"device"``, ``"rank"``...).
    label : callable, optional
        ``Step -> str`` for the list (default :func:`step_label`).
    phase_labels : dict, optional
        Words shown for phase keys (and for ``start``/``final``) on the jump buttons.
    """

    def __init__(self, state: traitlets.HasTraits, name: str = "step", *, description: str = "decision",
                 phase_key: str = "phase", group_key: str | None = None, group_label: str = "device",
                 label: Callable[[Step], str] | None = None, phase_labels: Mapping[str, str] | None = None) -> None:
        self._state, self._name = state, name
        self.phase_key, self.group_key, self.group_label = phase_key, group_key, group_label
        self.phase_labels = dict(phase_labels or {})
        self._label = label or (lambda s: step_label(s, group_key=group_key))
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
        grp_box = [self.group, self.prev_grp, self.next_grp] if group_key else []
        self.filter_text = W.Text(placeholder="filter: action, subject, reason…", layout=W.Layout(width="260px"))
        self.accepted_only = W.Checkbox(description="accepted only", indent=False, layout=small)
        self.filter_text.observe(lambda _c: self._fill_table(), names="value")
        self.accepted_only.observe(lambda _c: self._fill_table(), names="value")
        self.table = W.Select(options=[], rows=7, layout=W.Layout(width="100%"))
        self.table.observe(self._on_pick, names="value")
        self.table_note = W.HTML()
        self.jumps = W.HBox([self.prev_acc, self.next_acc, *grp_box], layout=W.Layout(flex_flow="row wrap", align_items="center"))
        self.list_box = W.Accordion(children=[W.VBox([W.HBox([self.filter_text, self.accepted_only, self.table_note]),
                                                      self.table])],
                                    titles=("decision list (filter, then pick one to jump to it)",))
        self._syncing = False
        state.observe(self._on_step, names=name)
        super().__init__([self.stepper, self.phases, self.jumps, self.list_box])
        self.add_class("hetsched-walker")

    # -- the log --------------------------------------------------------------------
    def set_steps(self, steps: Sequence[Step]) -> None:
        """A new log (a new result): ranges, phases, groups and the list follow it."""
        self.steps = tuple(steps)
        self.stepper.set_count(len(self.steps))
        first: dict[str, int] = {}
        groups: dict[str, None] = {}
        for s in self.steps:
            d = s.data or {}
            ph = d.get(self.phase_key)
            if ph is not None and str(ph) not in first:
                first[str(ph)] = s.index
            if self.group_key and d.get(self.group_key) is not None:
                groups[str(d[self.group_key])] = None
        self._phase_first = first
        self._syncing = True
        try:
            lab = self.phase_labels
            self.phases.options = [(lab.get(p, p), p) for p in ("start", *first, "final")]
            self.phases.value = None
            if self.group_key:
                self.group.options = sorted(groups, key=_natural)
                self.group.value = self.group.options[0] if self.group.options else None
        finally:
            self._syncing = False
        self._fill_table()

    def jump(self, kind: str, direction: int = +1, value: Any = None) -> bool:
        """Move to another decision: ``kind`` is ``"phase"`` (``value`` a phase, ``start``, ``final``),
        ``"accepted"`` or ``"group"`` (``value`` a group); returns whether the step moved."""
        k = getattr(self._state, self._name)
        n = len(self.steps)
        target = None
        if kind == "phase":
            target = 0 if value == "start" else n if value == "final" else (
                self._phase_first[value] + 1 if value in self._phase_first else None)
        else:
            def hit(s: Step) -> bool:
                if kind == "accepted":
                    return s.accepted
                return str((s.data or {}).get(self.group_key)) == str(value)

            # decision i is shown at step i + 1: search after (or before) the one on screen
            rng = range(k, n) if direction > 0 else range(k - 2, -1, -1)
            target = next((i + 1 for i in rng if hit(self.steps[i])), None)
        if target is None or target == k:
            return False
        setattr(self._state, self._name, target)
        return True

    # -- the list ---------------------------------------------------------------------
    def _fill_table(self) -> None:
        needle = self.filter_text.value.strip().lower()
        acc = self.accepted_only.value
        opts: list[tuple[str, int]] = []
        n_match = 0
        for s in self.steps:
            if acc and not s.accepted:
                continue
            if needle and needle not in f"{s.action} {s.subject} {s.reason} {self._label(s)}".lower():
                continue
            n_match += 1
            if len(opts) < MAX_LISTED:
                opts.append((self._label(s), s.index + 1))
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
