"""ExecutorPanel: walk the executor's dispatch decisions, one op at a time, with the claim that decided each.

The panel runs :func:`hetsched.executor.simulate` (PaddlePaddle's standalone executor as the
executor family's patent describes it: asynchronous and synchronous ops, streams and host threads)
and walks ``result.steps`` with the shared :class:`~hetsched.widgets.walker.DecisionWalker`: one
decision per op, told in words (which op, which host thread and stream, which rule and claim decided
it, whether the thread then waits for the op), the Gantt of host threads over device streams with
a cursor at that decision and its op outlined, and how often each rule fired. Jumps go to the
first decision of each rule, to the previous/next decision on one thread, and to fallbacks (a rule
that could not be met, e.g. with two host threads). The walker never re-runs the simulation.

Op kinds (the patent's "operator information": async ops let the host thread go on, sync ops hold
it) are editable per op type and per op, and devices may get a synchronous copy engine; the edits
reach the core as ``rules=`` and ``sync_copy_devices=``. Below, the policy comparison of
:func:`hetsched.executor.compare_policies` and what orders each data edge.

Shown alone, the panel runs the bundled ``executor_thread_rules`` graph on four host threads, where
every thread rule fires; in a dashboard it follows the session's graph.

>>> p = ExecutorPanel()
>>> p.graph.name, p.result.metrics["n_threads_used"]
('executor_thread_rules', 4)
>>> p.jump_to_rule("claim1-sync-sync-other"), "claim 1" in p.step_text.value
(True, True)
>>> p.state.dispatch_s = 1.0                     # refused, not clamped: the last good result stays
>>> "out of range" in p.message.value, p.result.costs.dispatch_s
(True, 3e-06)
"""

from __future__ import annotations

import dataclasses
import html
import math
from typing import Any

import ipywidgets as W
import pandas as pd
import traitlets

import hetsched.executor as ex
from hetsched.cost import cost_key
from hetsched.errors import HetschedError
from hetsched.io import csv_safe
from hetsched.plot import format_time_range, format_value
from hetsched.plot.executor import (KIND_WORDS, METRIC_WORDS, RULE_LABELS, executor_gantt, executor_gantt_at, ordering_bars,
                                    policy_bars, rule_bars, rule_bars_at, rule_claim, rule_label)
from hetsched.registry import label
from hetsched.results import Step

from .base import Panel, Session, keep_typed, small_terms, state_from_spec, term
from .walker import DecisionWalker

__all__ = ["ExecutorPanel", "executor_state", "describe_decision", "DEFAULT_GRAPH"]

#: what the panel runs when shown alone (every thread rule fires on it)
DEFAULT_GRAPH = "executor_thread_rules"
_COST_FIELDS = ("dispatch_s", "launch_s", "wakeup_s", "max_kernels", "pcie_Bps")
_METRICS = ["makespan_s", "host_blocked_s", "device_busy_frac", "gap_to_lb", "n_events", "n_handoffs"]
_PRESET_WORDS = {"cuda": "CUDA (3 us dispatch)", "eager": "eager framework (20 us dispatch)",
                 "ideal": "ideal (no host cost)"}
_ERR = "#B00020"


def _t(x: float | None) -> str:
    return format_value(x, "time_s")


def _n(x: float, word: str) -> str:
    return f"{x:.0f} {word}{'' if x == 1 else 's'}"


def _names(ops, k: int = 4) -> str:
    ops = list(ops)
    shown = ", ".join(html.escape(str(o)) for o in ops[:k])
    return shown + (f" and {len(ops) - k} more" if len(ops) > k else "")


def executor_state() -> traitlets.HasTraits:
    """The panel's inputs: :data:`hetsched.executor.PARAMETERS`, the cost preset, op-kind edits and view choices."""
    return state_from_spec(
        ex.PARAMETERS,
        "ExecutorState",
        preset=traitlets.Enum(list(ex.PRESETS), default_value="cuda"),
        rules=traitlets.Dict(),  # {op name or op type: kind}, given to the core as rules=
        sync_copy_devices=traitlets.Tuple(),
        step=traitlets.Int(0),  # view: 0 = before the first decision, k = after decision k - 1
        metric=traitlets.Enum(_METRICS, default_value="makespan_s"),
        color_by=traitlets.Enum(["kind", "device", "op"], default_value="kind"),
    )


def _link_number(state: traitlets.HasTraits, name: str, ctl: W.Widget, factor: float = 1.0) -> None:
    """Show ``state.name * factor`` in a text box; a person's edit goes back divided by ``factor``.

    The trait wins: a value set on the state is shown as it is (never clamped to a range and
    written back), a value the box cannot show (NaN, inf) is left to the error line, and a value
    shown is never echoed back (the NaN ping-pong of a plain pair of links recursed forever).
    """
    syncing = [False]

    def to_ctl(change: dict) -> None:
        v = change["new"]
        if keep_typed(state):
            return  # a refused value typed into the box stays there, marked (Panel._checked)
        if isinstance(v, float) and not math.isfinite(v):
            return  # the message says why it is refused; the box keeps the last number it showed
        syncing[0] = True
        try:
            ctl.value = float(f"{v * factor:.10g}") if isinstance(v, float) else v
        except traitlets.TraitError:
            pass  # a value the box cannot hold: the message line reports it
        finally:
            syncing[0] = False

    def to_state(change: dict) -> None:
        if syncing[0]:
            return
        v = change["new"]
        cur = getattr(state, name)
        if isinstance(cur, float):
            if isinstance(v, (int, float)) and math.isfinite(v) and math.isclose(cur * factor, v, rel_tol=1e-12, abs_tol=0.0):
                return  # the number shown: no ulp-sized recompute
            v = v / factor
        setattr(state, name, v)

    to_ctl({"new": getattr(state, name)})
    state.observe(to_ctl, names=name)
    ctl.observe(to_state, names="value")


def _number_control(name: str) -> W.Widget:
    """An unbounded text box for a number of :data:`~hetsched.executor.PARAMETERS`, labelled in words
    with its unit (the range is checked, and a bad value refused, when the panel recomputes)."""
    p = ex.PARAMETERS[name]
    # a count's unit (threads, streams, kernels) is already in its label; a measure shows its unit
    label = p.words + (f" ({p.shown_unit})" if p.display else "")
    tip = f"{p.help}; allowed {p.bounds_text()}".strip()
    cls = W.IntText if p.kind == "int" else W.FloatText
    return cls(description=label, tooltip=tip, style={"description_width": "initial"}, layout=W.Layout(width="auto"))


def _policy_name(table: Any, key: Any) -> str:
    """A stream or thread policy's plain name, from the core's table (:func:`hetsched.registry.label`)."""
    return label(table[key]) if isinstance(key, str) and key in table else str(key)


def _rule_of(step: Any) -> str:
    """The phase a decision belongs to in the walker: the rule that decided it, in words."""
    return rule_label(step.data.get("rule"))


def describe_decision(result: ex.ExecutorResult, k: int) -> str:
    """Decision ``k`` (0-based) of an executor run in plain words (HTML, every name escaped).

    Which op became ready and why, where it went (thread, inline or handed off), the claim and rule
    that decided it (a fallback in red), the stream its work went to, and the sync wait it costs
    its thread (the step's ``sync_wait``).

    >>> r = ex.simulate(ex.graphs.thread_rules_graph(), streams="patent", threads="patent")
    >>> k = next(i for i, s in enumerate(r.steps) if s.data["rule"] == "claim1-sync-sync-other")
    >>> text = describe_decision(r, k)
    >>> "claim 1" in text and "another thread" in text and "waits" in text
    True
    """
    s = result.steps[k]
    d = s.data or {}
    op = html.escape(s.subject)
    t = d.get("thread")
    kind = d.get("kind")
    when = _t(d.get("time_s"))
    trig = d.get("trigger")
    if trig is None:
        ready = "is ready at the start (no inputs from other ops)"
    else:
        how = "was launched" if d.get("trigger_kind") in ex.ASYNC_KINDS else "finished"
        ready = f"became ready when <b>{html.escape(str(trig))}</b> ({KIND_WORDS.get(d.get('trigger_kind'), '?')}) {how}"
    if d.get("inline"):
        where = f"runs next on the same thread, <b>thread {t}</b>"
    elif d.get("handoff"):
        where = f"is handed to <b>thread {t}</b>, another thread (it wakes up if asleep)"
    else:
        where = f"is queued on <b>thread {t}</b>"
    rule = d.get("rule")
    claim, meaning = ex.THREAD_RULES.get(rule, ("-", rule_label(rule)))
    meaning = meaning.replace("->", "→")
    why = html.escape(meaning) + (f" {term(claim)}" if claim != "-" else "")
    if d.get("fallback"):
        why = f"<span style='color:{_ERR}'>the rule could not be met — {why}</span>"
    st = d.get("stream")
    work = (f"Its work goes to stream <b>{html.escape(str(st))}</b> ({small_terms(html.escape(str(d.get('stream_rule') or '')))})."
            if st is not None else f"It runs on the host CPU ({_t(result.durations_s.get(s.subject))}).")
    if d.get("kernel_fallback"):
        work += f" Kernel fallback: {html.escape(str(d['kernel_fallback']))}."
    # the sync wait it costs its thread: the core's step data, filled in when the wait happened
    if d.get("sync_wait") == "after":
        hold = f" Sync wait: thread {t} then <b>waits {_t(d['sync_wait_s'])}</b> for it."
    elif d.get("sync_wait") == "before":
        hold = (f" Sync wait: before running it, thread {t} <b>waits {_t(d['sync_wait_s'])}</b> "
                f"for its inputs on the device (sync {html.escape(str(d['sync_on']))}).")
    elif kind in ex.ASYNC_KINDS:
        hold = f" It is asynchronous: thread {t} goes on at once."
    else:
        hold = ""
    return (f"<b>decision {k + 1} of {len(result.steps)}</b> at {when}: <b>{op}</b> ({KIND_WORDS.get(kind, kind)}) "
            f"{ready}; it {where}. Why: {why}. {work}{hold}")


class ExecutorPanel(Panel):
    """The executor on the session's graph: policies, host costs and op kinds; its decisions one by one.

    Parameters
    ----------
    session : Session, optional
        The graph comes from ``session.graph`` (when the session has none: the bundled
        ``executor_thread_rules``). Work is priced on the session's machine (the machine bar), else
        on the executor's own CPU + GPU + FPGA system (:func:`hetsched.executor.executor_system`, its
        PCIe link from the host-cost fields).
    graph : OpGraph, optional
        Pin the panel to this graph instead of following the session.

    Notes
    -----
    The comparison depends only on the graph, the costs, the pool and the op kinds, so it is
    cached: switching the stream or thread policy re-simulates one run (and reuses the
    comparison's run when the pair is one of :data:`hetsched.executor.POLICIES`). A step click
    only redraws: the Gantt's outline trace, cursor and title, the rule bars' outline and the text.
    """

    TAB = "executor"
    VIEW_TRAITS = ("step", "metric", "color_by")
    MACHINE_BAR = True
    COMPARES_MACHINES = True

    def __init__(self, session: Session | None = None, *, graph=None, **kw: Any) -> None:
        state = executor_state()
        style = {"description_width": "initial"}
        streams = W.Dropdown(options=[(label(f), k) for k, f in ex.STREAM_POLICIES.items()],
                             description="streams", style=style, layout=W.Layout(width="auto"),
                             tooltip=ex.PARAMETERS["streams"].help)
        threads = W.Dropdown(options=[(label(f), k) for k, f in ex.THREAD_POLICIES.items()],
                             description="threads", style=style, layout=W.Layout(width="auto"),
                             tooltip=ex.PARAMETERS["threads"].help)
        preset = W.ToggleButtons(options=[(_PRESET_WORDS.get(k, k), k) for k in ex.PRESETS], description="host costs",
                                 style={**style, "button_width": "auto"})
        metric = W.Dropdown(options=[(METRIC_WORDS[k][0], k) for k in _METRICS], description="compare by", style=style)
        color = W.ToggleButtons(options=[("what runs", "kind"), ("device", "device"), ("op", "op")],
                                description="colour by", style={**style, "button_width": "auto"})
        for ctl, name in ((streams, "streams"), (threads, "threads"), (preset, "preset"), (metric, "metric"),
                          (color, "color_by")):
            W.link((state, name), (ctl, "value"))
        numbers = {n: _number_control(n) for n in ("pool_size", "max_streams", *_COST_FIELDS)}
        for n, ctl in numbers.items():
            _link_number(state, n, ctl, ex.PARAMETERS[n].factor)
        wrap = W.Layout(flex_flow="row wrap", align_items="center")
        self.controls = W.VBox([
            W.HBox([streams, threads, numbers["pool_size"], numbers["max_streams"]], layout=wrap),
            preset,
            W.HBox([numbers[k] for k in _COST_FIELDS], layout=wrap),
        ])
        self.control_widgets = {"streams": streams, "threads": threads, **numbers, "preset": preset, "metric": metric,
                                "color_by": color}
        self._build_kind_editor()
        self.walker = DecisionWalker(state, "step", description="decision", phase=_rule_of,
                                     group=lambda s: s.data.get("thread"),
                                     group_label="thread", label=self._step_label, accepted_jumps=False,
                                     phase_tips={w: (f"{rule_claim(r)}: " if rule_claim(r) else "")
                                                 + ex.THREAD_RULES.get(r, ("", w))[1].replace("->", "→")
                                                 for r, w in RULE_LABELS.items()})
        self.walker.phases.description = "first use of"
        # every dispatch is "accepted": those jumps mean nothing here; fallbacks do
        self.prev_fallback, self.next_fallback = self.walker.add_jumps(
            "fallback", "decision whose rule could not be met", self.jump_to_fallback)
        self.step_text = W.HTML(layout=W.Layout(min_height="3.2em"))
        self.step_text.add_class("hetsched-step-text")
        self.summary = W.HTML()
        self.summary.add_class("hetsched-summary")
        self._fixed_graph = graph
        self._cmp_key = self._cmp = None
        self._kinds_key = self._kinds = self._default_kinds = None
        self._drawn: dict[str, Any] = {}
        self._gantt_base = self._rules_base = None
        self._graph_shown = None
        super().__init__(state, session=session, follow_session=graph is None, autostart=False, **kw)
        state.observe(self._on_preset, names="preset")
        state.observe(self._sync_kind_editor, names=["rules", "sync_copy_devices"])
        self.children = [self.machine_bar, self.controls, self.kind_editor, self.status, self.summary, self.machine_compare,
                         self.walker, self.step_text,
                         color, self.figure_view("gantt"), self.figure_view("rules"), metric,
                         self.figure_view("compare"), self.figure_view("ordering"), self.download_area]
        self._start()

    # -- inputs --------------------------------------------------------------------
    @property
    def graph(self):
        """The graph shown: one pinned at construction (or by :meth:`load`), else the session's, else
        the executor scenario's ``executor_thread_rules`` (not written into the session: other tabs
        keep theirs)."""
        return self._session_graph(lambda: None)

    def _on_change(self, change) -> None:
        if change["name"] != "preset":  # the preset acts through the cost fields it sets
            super()._on_change(change)

    def _on_preset(self, change) -> None:
        # a preset sets every cost field at once; one recompute at the end
        c = ex.PRESETS[change["new"]]
        with self.hold():
            for k in _COST_FIELDS:
                setattr(self.state, k, type(getattr(self.state, k))(getattr(c, k)))

    def _costs(self) -> ex.ExecCosts:
        base = ex.PRESETS[self.state.preset]
        return dataclasses.replace(base, name=base.name, **{k: getattr(self.state, k) for k in _COST_FIELDS})

    def _rules_for(self, g) -> dict[str, str]:
        """The kind edits that apply to ``g`` (rules for ops or op types it does not have are kept for later graphs)."""
        types = {o.op_type for o in g.ops.values()}
        return {k: v for k, v in self.state.rules.items() if k in g.ops or k in types}

    # -- the kind editor -------------------------------------------------------------
    def _build_kind_editor(self) -> None:
        style = {"description_width": "initial"}
        self.kind_rows = W.VBox()
        self._type_controls: dict[str, tuple[W.HTML, W.Dropdown]] = {}
        self.op_name = W.Combobox(placeholder="op name", description="one op", style=style, layout=W.Layout(width="280px"),
                                  ensure_option=False)
        self.op_kind = W.Dropdown(options=[(w, k) for k, w in KIND_WORDS.items()], layout=W.Layout(width="auto"))
        self.op_set = W.Button(description="set", layout=W.Layout(width="auto"), tooltip="give this op this kind")
        self.op_clear = W.Button(description="clear the op edits", layout=W.Layout(width="auto"),
                                 tooltip="forget every kind set for a single op")
        self.op_set.on_click(lambda _b: self.set_op_kind(self.op_name.value, self.op_kind.value))
        self.op_clear.on_click(lambda _b: self._clear_op_rules())
        self.op_rules_text = W.HTML()
        self.sync_boxes: dict[str, W.Checkbox] = {}
        self.sync_row = W.HBox(layout=W.Layout(flex_flow="row wrap", align_items="center"))
        self._sync_machine: Any = None
        self.kind_counts = W.HTML()
        self._syncing_kinds = False
        box = W.VBox([
            W.HTML("Async ops let their host thread go on at once; sync ops hold it until their work is done "
                   f"(what the patent calls each op's \"operator information\" {term('claim 1')}). Change a kind per op "
                   "type or per op: the run, the comparison and the decisions follow."),
            self.kind_counts,
            self.kind_rows,
            W.HBox([self.op_name, self.op_kind, self.op_set, self.op_clear], layout=W.Layout(flex_flow="row wrap")),
            self.op_rules_text,
            self.sync_row,
        ])
        self.kind_editor = W.Accordion(children=[box], titles=("op kinds: which ops are sync (editable)",))
        # a row per op type (about six widgets each) and a list of every op name: made when the editor is
        # first opened for a graph, not on every graph load (a 1k-op model has dozens of op types, and
        # 150 new widgets cost the tab's first show a few hundred ms in the browser)
        self._rows_pending: Any = None
        self.kind_editor.observe(self._on_kind_editor, names="selected_index")

    def _build_sync_boxes(self, machine) -> None:
        """One box per device of the machine (other than the host's CPUs): its copies block the host."""
        if self._sync_machine is machine:
            return
        self._sync_machine = machine
        self.sync_boxes = {}
        for d, dev in machine.devices.items():
            if dev.kind == "cpu" or d == machine.host:
                continue
            cb = W.Checkbox(description=d, indent=False, layout=W.Layout(width="auto"),
                            value=d in self.state.sync_copy_devices)
            cb.observe(lambda c, d=d: self._set_sync_device(d, c["new"]), names="value")
            self.sync_boxes[d] = cb
        self.sync_row.children = [W.HTML("devices whose host-to-device copies block the host (a synchronous copy "
                                         "engine):&nbsp;"), *self.sync_boxes.values()]

    # -- the machine -------------------------------------------------------------------
    def machine(self):
        """The session's machine, else the executor's own (its PCIe link from the host-cost fields)."""
        if self.session.system is not None:
            return self.session.system
        c = self._costs()
        key = (c.pcie_Bps, c.pcie_latency_s)
        own = self.__dict__.get("_own_machine")
        if own is None or own[0] != key:
            own = self._own_machine = (key, ex.executor_system(c))
        return own[1]

    def own_machine_name(self) -> str:
        return ex.executor_system().name

    def _system_opt(self) -> dict:
        """``system=`` for the core: the session's machine (``{}``: the executor's own, priced from the costs)."""
        return {} if self.session.system is None else {"system": self.session.system}

    def machine_metrics(self, system, result=None) -> dict:
        """The run on screen, or the same graph, policies, costs and kinds on ``system``."""
        r = result
        if r is None:
            st = self.state
            g = self.graph
            sync = [d for d in st.sync_copy_devices if d in system.devices]
            key = (g, g.version, system, cost_key(self.cost), dataclasses.astuple(self._costs()), st.streams, st.threads,
                   st.pool_size, st.max_streams, tuple(sorted(self._rules_for(g).items())), tuple(sync))
            cache = self.__dict__.setdefault("_other_machine", {})
            if key not in cache:
                cache.clear()
                cache[key] = ex.simulate(g, streams=st.streams, threads=st.threads, costs=self._costs(),
                                         pool_size=st.pool_size, max_streams=st.max_streams or None,
                                         rules=self._rules_for(g) or None, sync_copy_devices=sync or None,
                                         cost=self.cost, system=system)
            r = cache[key]
        m = r.metrics
        return {"makespan": (m["makespan_s"], "_s"), "time the host threads waited": (m["host_blocked_s"], "_s"),
                "device busy share": (m["device_busy_frac"], "busy_fraction"),
                "events between streams and threads": (m["n_events"], "n")}

    def _on_kind_editor(self, change: dict | None = None) -> None:
        if self.kind_editor.selected_index is None or self._rows_pending is None:
            return
        g, self._rows_pending = self._rows_pending, None
        self._make_kind_rows(g)
        self._sync_kind_editor()
        if getattr(self, "_kinds", None) is not None:
            self._kind_lines()

    def _fill_kind_rows(self, g) -> None:
        """The editor's rows for a new graph: now if the editor is open, else when it is next opened."""
        self._type_controls = {}
        self.kind_rows.children = ()
        self.op_name.options = ()
        self._rows_pending = g
        self._on_kind_editor()

    def _make_kind_rows(self, g) -> None:
        """One row per op type of a new graph: its op count, its kinds now, and a kind to force."""
        counts = pd.Series([o.op_type for o in g.ops.values()]).value_counts()
        self._type_controls = {}
        rows = []
        for typ, n in counts.items():
            label = W.HTML(layout=W.Layout(width="30em"))
            dd = W.Dropdown(options=[("as the graph says", "")] + [(w, k) for k, w in KIND_WORDS.items()],
                            layout=W.Layout(width="auto"))
            dd.observe(lambda c, typ=typ: self._set_type_rule(typ, c["new"]), names="value")
            self._type_controls[str(typ)] = (label, dd)
            rows.append(W.HBox([label, dd], layout=W.Layout(align_items="center")))
        self.kind_rows.children = rows
        self.op_name.options = tuple(g.ops)[:5000]

    def _sync_kind_editor(self, _change=None) -> None:
        """The editor's controls follow the state (set here or by code), without writing back."""
        self._syncing_kinds = True
        try:
            rules = self.state.rules
            for typ, (_label, dd) in self._type_controls.items():
                v = rules.get(typ, "")
                dd.value = v if v in KIND_WORDS else ""
            for d, cb in self.sync_boxes.items():
                cb.value = d in self.state.sync_copy_devices
            g = self.graph
            ops = {k: v for k, v in rules.items() if k in g.ops}
            self.op_rules_text.value = ("<i>no op edited one by one</i>" if not ops else
                                        "edited ops: " + "; ".join(f"<b>{html.escape(k)}</b> → {KIND_WORDS.get(v, html.escape(str(v)))}"
                                                                   for k, v in ops.items()))
        finally:
            self._syncing_kinds = False

    def _set_type_rule(self, typ: str, kind: str) -> None:
        if self._syncing_kinds:
            return
        rules = {k: v for k, v in self.state.rules.items() if k != typ}
        if kind:
            rules[typ] = kind
        self.state.rules = rules

    def set_op_kind(self, op: str, kind: str | None) -> bool:
        """Give one op a kind (``None``: forget its edit); an unknown op or kind is refused with a message."""
        op = (op or "").strip()
        if op not in self.graph.ops:
            self.show_error(HetschedError(f"no op named {op!r} in {self.graph.name}; pick one from the list", op=op or None))
            return False
        if kind is not None and kind not in ex.OP_KINDS:
            self.show_error(HetschedError(f"unknown op kind {kind!r}; choose from {list(ex.OP_KINDS)}", op=op, field="kind"))
            return False
        rules = {k: v for k, v in self.state.rules.items() if k != op}
        if kind is not None:
            rules[op] = kind
        self.state.rules = rules
        return True

    def _clear_op_rules(self) -> None:
        g = self.graph
        self.state.rules = {k: v for k, v in self.state.rules.items() if k not in g.ops}

    def _set_sync_device(self, dev: str, on: bool) -> None:
        if self._syncing_kinds:
            return
        cur = [d for d in self.state.sync_copy_devices if d != dev]
        self.state.sync_copy_devices = tuple(cur + [dev] if on else cur)

    # -- Panel -----------------------------------------------------------------------
    def check_inputs(self) -> None:
        st = self.state
        self.check_params(ex.PARAMETERS, {p.name: getattr(st, p.name) for p in ex.PARAMETERS})
        self._check_step(self.result.n_steps if self.result is not None else None)

    def compute(self) -> ex.ExecutorResult:
        st = self.state
        g = self.graph
        costs = self._costs()
        max_streams = st.max_streams or None
        rules = self._rules_for(g)
        machine = self.machine()
        self._build_sync_boxes(machine)
        own = self.session.system is None
        pcie = self.control_widgets["pcie_Bps"]
        if pcie.disabled == own:  # the PCIe field prices the executor's own machine only
            pcie.disabled = not own
            pcie.tooltip = (ex.PARAMETERS["pcie_Bps"].help if own else
                            "the machine's own links price the copies (edit them in the machine bar)")
        # copies blocking the host on devices the machine has (another machine may lack some)
        sync = tuple(d for d in st.sync_copy_devices if d in machine.devices)
        opts = {"rules": rules or None, "sync_copy_devices": list(sync) or None, "cost": self.cost, **self._system_opt()}
        key = (g, g.version, machine, cost_key(self.cost), dataclasses.astuple(costs), st.pool_size, max_streams,
               tuple(sorted(rules.items())), sync)
        if key != self._cmp_key:
            self._cmp = ex.compare_policies(g, costs=costs, pool_size=st.pool_size, max_streams=max_streams, **opts)
            self._cmp_key = key
        kkey = (g, g.version, machine, tuple(sorted(rules.items())), sync)
        if kkey != self._kinds_key:
            kw = {"sync_copy_devices": list(sync) or None, **self._system_opt()}
            self._kinds = ex.kind_table(g, rules=rules or None, **kw)
            self._default_kinds = (ex.kind_table(g, **kw) if rules else self._kinds)
            self._kinds_key = kkey
        for label, pair in ex.POLICIES.items():
            if pair == (st.streams, st.threads):
                return self._cmp.results[label]
        return ex.simulate(g, streams=st.streams, threads=st.threads, costs=costs, pool_size=st.pool_size,
                           max_streams=max_streams, **opts)

    @property
    def comparison(self):
        """The cached :class:`~hetsched.executor.PolicyComparison` of the current graph, costs and kinds."""
        return self._cmp

    @property
    def kinds(self) -> pd.DataFrame:
        """The kind table of the run shown (:func:`hetsched.executor.kind_table` with the edits)."""
        return self._kinds

    def current_policy(self) -> str | None:
        """The comparison label of the current (streams, threads) pair, if it is one."""
        pair = (self.state.streams, self.state.threads)
        return next((k for k, v in ex.POLICIES.items() if v == pair), None)

    def on_result(self, r: ex.ExecutorResult) -> None:
        # a decision's phase: the rule that decided it, in words (jump to its first use)
        self.walker.set_steps(r.steps)
        g = self.graph
        if self._graph_shown is not g:  # a new graph: its op types in the editor, the walk at the end
            self._graph_shown = g
            self._fill_kind_rows(g)
            self._sync_kind_editor()
            self.state.step = r.n_steps
        elif self.state.step > r.n_steps:
            self.state.step = r.n_steps

    # -- walking -----------------------------------------------------------------------
    def _step_label(self, s: Step) -> str:
        d = s.data or {}
        return f"{s.subject} → thread {d.get('thread')} · {rule_label(d.get('rule'))}"

    def jump_to_rule(self, rule: str) -> bool:
        """Walk to the first decision made by ``rule`` (an id of :data:`hetsched.executor.THREAD_RULES`)."""
        return self.walker.jump("phase", value=rule_label(rule))

    def jump_to_fallback(self, direction: int = +1) -> bool:
        """Walk to the previous/next decision whose rule could not be met (returns whether it moved)."""
        steps = self.result.steps if self.result is not None else ()
        k = self.state.step
        rng = range(k, len(steps)) if direction > 0 else range(k - 2, -1, -1)
        target = next((i + 1 for i in rng if (steps[i].data or {}).get("fallback")), None)
        if target is None:
            return False
        self.state.step = target
        return True

    def current_step(self) -> Step | None:
        k = self.state.step
        return self.result.steps[k - 1] if self.result is not None and 1 <= k <= self.result.n_steps else None

    # -- drawing -----------------------------------------------------------------------
    def _title(self, r) -> str:
        p = r.params
        m = r.metrics
        return (f"{_policy_name(ex.STREAM_POLICIES, p.get('streams'))}, {_policy_name(ex.THREAD_POLICIES, p.get('threads'))} "
                f"({_n(m['n_threads'], 'host thread')}, {_n(m['n_streams'], 'stream')})")

    def _step_text(self, r) -> str:
        k = self.state.step
        if k == 0:
            return (f"<b>before the first decision</b>: {_n(r.n_steps, 'op')} to dispatch on "
                    f"{_n(r.metrics['n_threads'], 'host thread')}. Step with <b>next ▶</b>, or jump to the first use "
                    f"of a rule below.")
        so_far = pd.Series(r.replay(k - 1)).value_counts()
        tally = ", ".join(f"thread {html.escape(str(t)[6:])}: {_n(c, 'op')}"
                          for t, c in sorted(so_far.items(), key=lambda x: (len(str(x[0])), str(x[0]))))
        return describe_decision(r, k - 1) + f"<br><span style='color:#555'>dispatched so far: {tally}</span>"

    def _gantt(self, r):
        """The Gantt at the current decision: drawn once per result and colouring, then only moved."""
        k = self.state.step
        s = self.current_step()
        head = self._title(r)
        key = (id(r), self.state.color_by)
        if self._gantt_base is None or self._gantt_base[0] != key:
            self._gantt_base = (key, executor_gantt(r, color_by=self.state.color_by, walk=True, title=head))
        title = head if s is None else f"{head} — decision {k} of {r.n_steps}: {s.subject} → thread {s.data.get('thread')}"
        return executor_gantt_at(self._gantt_base[1], r, k - 1 if k >= 1 else None, title=title)

    def _rule_fig(self, r):
        s = self.current_step()
        if self._rules_base is None or self._rules_base[0] != id(r):
            self._rules_base = (id(r), rule_bars(r))
        return rule_bars_at(self._rules_base[1], (s.data or {}).get("rule") if s is not None else None)

    def _compare_fig(self, r):
        frame = self._cmp.frame
        label = self.current_policy()
        if label is None:  # a pair outside the table: add it as its own bar
            m = r.metrics
            label = f"{self.state.streams} streams + {self.state.threads} threads"
            row = {"label": label, "streams": self.state.streams, "threads": self.state.threads,
                   **{c: m.get(c) for c in frame.columns if c in m}}
            frame = pd.concat([frame, pd.DataFrame([row])], ignore_index=True)
        return policy_bars(frame, self.state.metric, current=label)

    def _show_once(self, name: str, key: Any, build) -> None:
        """Draw figure ``name`` only when what it shows changed (a step click leaves it alone)."""
        if self._drawn.get(name) != key:
            self.show_figure(name, build())
            self._drawn[name] = key

    def render(self, r: ex.ExecutorResult) -> None:
        k = self.state.step
        if not 0 <= k <= r.n_steps:
            raise HetschedError(f"decision {k} is outside 0..{r.n_steps}", field="step")
        s = self.current_step()
        self.step_text.value = self._step_text(r)
        self.show_figure("gantt", self._gantt(r))
        self.show_figure("rules", self._rule_fig(r))
        self._show_once("compare", (id(r), id(self._cmp), self.state.metric), lambda: self._compare_fig(r))
        self._show_once("ordering", id(r), lambda: ordering_bars(r))
        if self._drawn.get("summary") != id(r):
            self.summary.value = self._summary(r)
            self._drawn["summary"] = id(r)
        if self._drawn.get("kinds") != (self._kinds_key, id(self._type_controls)):
            self._kind_lines()
            self._drawn["kinds"] = (self._kinds_key, id(self._type_controls))

    # -- words -------------------------------------------------------------------------
    def _kind_lines(self) -> None:
        """The kind editor's words: how many ops of each kind now, and per op type what its ops are."""
        c = self._kinds["kind"].value_counts()
        self.kind_counts.value = "now: " + ", ".join(f"{n} × {KIND_WORDS.get(k, k)}" for k, n in c.items())
        now = pd.crosstab(self._kinds["op_type"], self._kinds["kind"])
        base = pd.crosstab(self._default_kinds["op_type"], self._default_kinds["kind"])
        for typ, (label, _dd) in self._type_controls.items():
            if typ not in now.index:
                continue
            row = now.loc[typ][now.loc[typ] > 0]
            was = base.loc[typ][base.loc[typ] > 0] if typ in base.index else row
            words = ", ".join(KIND_WORDS.get(k, k) if len(row) == 1 else f"{c} {KIND_WORDS.get(k, k)}" for k, c in row.items())
            same = row.to_dict() == was.to_dict()
            label.value = (f"<b>{html.escape(typ)}</b> · {_n(int(row.sum()), 'op')}: {words}"
                           + ("" if same else f" <i>(as the graph says: {', '.join(KIND_WORDS.get(k, k) for k in was.index)})</i>"))

    def _summary(self, r) -> str:
        m = r.metrics
        p = r.params
        threads = p.get("threads")
        one = self._cmp.frame.set_index("label")["makespan_s"].get("multi-stream, one thread")
        vs = (f" (one host thread: {_t(one)})" if one is not None and threads != "single" else "")
        head = (f"<b>{html.escape(self.graph.name)}</b>: makespan <b>{format_time_range(m)}</b>{vs} with "
                f"<i>{html.escape(_policy_name(ex.THREAD_POLICIES, threads))}</i> on {_n(m['n_threads'], 'host thread')} and "
                f"<i>{html.escape(_policy_name(ex.STREAM_POLICIES, p.get('streams')))}</i>; lower bound {_t(m['lb_s'])} "
                f"(gap {format_value(m['gap_to_lb'], 'gap')}), device busy {format_value(m['device_busy_frac'], 'busy_fraction')}; "
                f"{_n(m['n_events'], 'event')}, {_n(m['n_stream_waits'], 'stream wait')}, {_n(m['n_host_syncs'], 'host wait')}, "
                f"{_n(m['n_handoffs'], 'hand-off')} between threads.")
        lines = []
        idle: list[int] = []
        for row in ex.thread_summary(r).itertuples():
            t = row.thread
            role = ""
            if threads == "patent" and m["n_threads"] > 1:
                role = " (the async thread: launches asynchronous ops)" if t == 0 else " (sync pool: takes the ops that wait)"
            if row.n_ops == 0:
                idle.append(t)
                continue
            n_async = row.n_ops - row.n_sync_ops
            what = ", ".join(x for x in (_n(n_async, 'async op') if n_async else "",
                                         _n(row.n_sync_ops, 'sync op') if row.n_sync_ops else "") if x)
            waits = f"waited {_t(row.blocked_s)} on sync work" if row.blocked_s > 0 else "never waited"
            lines.append(f"<b>thread {t}</b>{role}: {what} ({_names(row.ops)}); busy {_t(row.busy_s)}, {waits}.")
        if idle:
            why = (" — no op of this graph holds its thread (all are async); make some sync in the op kinds above"
                   if threads == "patent" and bool(self._kinds["async"].all()) else "")
            who = f"thread {idle[0]}" if len(idle) == 1 else f"threads {', '.join(map(str, idle))}"
            lines.append(f"<b>{who}</b>: did nothing{why}.")
        fb = [s for s in r.steps if (s.data or {}).get("fallback")]
        if fb:
            rules = pd.Series([s.data["rule"] for s in fb]).value_counts()
            why = "; ".join(f"{html.escape(ex.THREAD_RULES.get(rl, ('', rl))[1].replace('->', '→'))} ({_n(c, 'time')})"
                            for rl, c in rules.items())
            lines.append(f"<span style='color:{_ERR}'><b>{_n(len(fb), 'decision')} could not follow the rule</b> "
                         f"({_names(s.subject for s in fb)}): {why}. More host threads give the rule its other threads.</span>")
        races = int(m.get("n_unordered_edges", 0))
        if races:
            lines.append(f"<span style='color:{_ERR}'>{_n(races, 'data edge')} ordered by nothing (races)</span>")
        return head + "<ul style='margin:0.2em 0'>" + "".join(f"<li>{x}</li>" for x in lines) + "</ul>"

    def download_items(self, r):
        threads = ex.thread_summary(r).assign(ops=lambda f: f["ops"].map(", ".join))
        return [(ex.executor_trace(r), "executor_trace.json"), (csv_safe(r.timeline), "executor_timeline.csv"),
                (csv_safe(self._cmp.frame), "executor_policies.csv"), (csv_safe(ex.dispatch_frame(r)), "executor_dispatch_steps.csv"),
                (csv_safe(threads), "executor_threads.csv"), (csv_safe(self._kinds), "executor_op_kinds.csv")]
