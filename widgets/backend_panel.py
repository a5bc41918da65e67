"""BackendPanel: split a graph across backends by operator support, one decision at a time.

The backend family (the patent ``003``, *multi-backend mapping of a computation graph*) in three
steps, each one a phase of the walk this panel offers:

1. **marking** (claim 1; paragraph 61): every op gets the switched-on backend of best priority that
   supports it, from the mapping list (the priority grid: op type x backend, 1 = best, 0 = not
   supported; a cell may come from the backend's ``*`` row);
2. **merging** (claim 2; paragraph 47): neighbouring ops of one backend become one *aggregated op*,
   launched once (each launch costs the backend's start-up time, the patent's reason for merging),
   never across another backend's op, and never when the merge would create a cycle (the guard of
   torch.fx and TVM BYOC, which the patent does not have);
3. **buffering** (claim 3; paragraph 50): buffers between backends let them work on different
   inputs at once; the serial run (no buffers) and the buffered run are drawn on one time axis.

The panel calls :func:`hetsched.partition.partition_by_support` and
:func:`hetsched.partition.simulate_buffered`; the :class:`~hetsched.widgets.walker.DecisionWalker`
walks their logs (``result.steps``) without re-running them: the graph and the quotient graph are
drawn after each decision (:meth:`~hetsched.partition.PartitionResult.quotient_at`), the buffered
run at each dispatch (:meth:`~hetsched.partition.BufferedResult.replay`). Graphs above the Graph
tab's threshold are drawn by blocks (layers, stages; "draw: auto / blocks / every op"), each in the
colour of its backend (grey until marked, lighter while partly marked, outlined when on several),
the decision's blocks ringed; a click opens a block into its ops
(:func:`hetsched.plot.partition.marked_blocks`).

The default set-up is a seven-op example where everything happens (a merge, a merge refused
because it would create a cycle, copies between backends, buffers beating the serial run); loading
a graph (or picking the loaded one) shows that instead.

>>> p = BackendPanel()
>>> len(p.result.partition.groups), sorted(set(p.result.partition.assignment.values()))
(5, ['fpga0', 'gpu0'])
>>> p.jump_to_outcome("cycle", -1), "would create a cycle" in p.step_text.value
(True, True)
>>> p.toggle("fpga0", False); sorted(set(p.result.partition.assignment.values()))
['gpu0']
>>> p.state.n_inputs = 0; "number of inputs" in p.message.value
True
"""

from __future__ import annotations

import html
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import ipywidgets as W
import traitlets
from ipywidgets.widgets.widget_string import HTMLStyle, TextStyle

import hetsched as hs
import hetsched.partition as pt
from hetsched.errors import HetschedError
from hetsched.io import csv_safe
from hetsched.plot import color_map, format_time_range, format_value, group_colors, time_unit
from hetsched.plot.partition import (buffer_occupancy, marked_blocks, marked_graph_view, quotient_walk_view, runs_gantt,
                                     with_cursor)
from hetsched.registry import label as plain_name
from hetsched.results import Step

from .base import Panel, Session, link_clamped, small_terms
from .blocks import BlockDrawing
from .walker import DecisionWalker, chain

__all__ = ["BackendPanel", "BackendState", "BackendView", "describe_step"]

SETUPS = {
    "example": "example: 7 ops, merges, a merge refused for a cycle, buffers",
    "loaded": "the loaded graph and machine (the machine bar above)",
}
MERGES = [(plain_name(f), k) for k, f in pt.MERGE_STRATEGIES.items()]  # the core's names for its strategies
#: the inputs' bounds and words, declared in the core: a value outside them is refused with the spec's message
_SPEC = pt.PARAMS
_PRIORITY = _SPEC["priority"]
OUTCOMES = {"merged": "merged", "cycle": "refused: would create a cycle", "different_backend": "different backends",
            "not_adjacent": "not adjacent"}
_PHASE = {"mark": "marking", "merge": "merging", "fallback": "fallback", "dispatch": "buffering"}


def _phase_of(step: Any) -> str:
    """A decision's phase in the walker: marking, merging, fallback (the partition) or buffering (the run)."""
    return _PHASE.get(step.action, step.action)


def _backend_of(step: Any) -> Any:
    """The backend a decision is about: the one an op is marked for or falls back to, else its own."""
    d = step.data
    return d.get("choice") if step.action == "mark" else d.get("to") if step.action == "fallback" else d.get("backend")
_CSS = """<style>
.hetsched-backend-panel .hetsched-prio input[type="text"] { text-align: center; }
.hetsched-backend-panel .hetsched-prio-exact input[type="text"] { font-weight: 600; background: #FFFFFF !important; }
.hetsched-backend-panel .hetsched-prio-wildcard input[type="text"] { font-style: italic; background: #EAF2FB !important; }
.hetsched-backend-panel .hetsched-prio-excluded input[type="text"] { font-weight: 600; color: #B00020 !important;
  background: #FBE9E7 !important; }
.hetsched-backend-panel .hetsched-prio-absent input[type="text"] { background: #F0F0F0 !important; }
.hetsched-backend-panel .hetsched-step { font-size: 15px; line-height: 1.45; }
</style>"""
_GRID_LEGEND = (
    "<div style='margin:4px 0'>"
    "<span class='hetsched-prio-exact' style='font-weight:600'>2</span> listed for this op type &nbsp;·&nbsp; "
    "<i style='background:#EAF2FB'>&nbsp;1 (*)&nbsp;</i> from the backend's * row &nbsp;·&nbsp; "
    "<b style='color:#B00020;background:#FBE9E7'>&nbsp;0&nbsp;</b> not supported (beats the * row) &nbsp;·&nbsp; "
    "<span style='background:#F0F0F0'>&nbsp;–&nbsp;</span> not listed: not supported. "
    "Type a priority (1 = best), 0 to exclude, or clear a cell to take its entry out.</div>"
)


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _t(x: float | None) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    u, f = time_unit(x)
    return f"{x * f:.3g} {u}"


class BackendState(traitlets.HasTraits):
    setup = traitlets.Enum(list(SETUPS), default_value="example")
    enabled = traitlets.List(traitlets.Unicode())  # backends switched on
    # grid edits: "backend|op_type" -> priority (0: not supported) or None (the explicit entry taken out)
    priorities = traitlets.Dict()
    merge = traitlets.Enum([v for _l, v in MERGES], default_value=_SPEC["merge"].default)
    min_group_size = traitlets.Int(_SPEC["min_group_size"].default)
    fallback = traitlets.Unicode("")  # "" = none
    buffer_depth = traitlets.Int(_SPEC["buffer_depth"].default)
    n_inputs = traitlets.Int(_SPEC["n_inputs"].default)
    # per aggregated-op launch; None: each backend's own
    launch_s = traitlets.Float(_SPEC["launch_s"].default, allow_none=True)
    color_by = traitlets.Enum(["backend", "group"], default_value="backend")  # view
    # view: "auto" draws the graph by blocks (layers, stages) beyond the Graph tab's threshold
    view = traitlets.Enum(["auto", "blocks", "ops"], default_value="auto")
    expanded = traitlets.Tuple()  # view: blocks shown op by op
    step = traitlets.Int(0)  # view: 0 = before the first decision, k = after decision k - 1


@dataclass(frozen=True)
class BackendView:
    """What the panel shows: the partition, its buffered and serial runs, and the system used."""

    partition: pt.PartitionResult
    buffered: pt.BufferedResult
    serial: pt.BufferedResult
    system: hs.System

    @property
    def metrics(self) -> dict[str, float]:
        return {**self.buffered.metrics, "n_groups": len(self.partition.groups),
                "serial_throughput_per_s": self.serial.metrics["throughput_per_s"]}

    @property
    def n_steps(self) -> int:
        return self.partition.n_steps + self.buffered.n_steps


def describe_step(v: BackendView, k: int) -> str:
    """Decision ``k`` (0-based, over the partition log then the buffered run's dispatches) in plain
    words (HTML; every name escaped), the patent's claims and paragraphs in small type.

    >>> p = BackendPanel()
    >>> "claim 2" in describe_step(p.result, 7) and "stem" in describe_step(p.result, 7)
    True
    """
    return small_terms(_describe_step(v, k))


def _describe_step(v: BackendView, k: int) -> str:
    part = v.partition
    n_part = part.n_steps
    head = f"<b>decision {k + 1} of {v.n_steps}</b>"
    if k >= n_part:
        return head + " · <i>buffering</i>: " + _describe_dispatch(v, k - n_part)
    s = part.steps[k]
    d = s.data or {}
    ok = "<span style='color:#1B5E20;font-weight:600'>{}</span>"
    no = "<span style='color:#B00020;font-weight:600'>{}</span>"
    if s.action == "mark":
        cands = ", ".join(f"{_esc(b)} (priority {p})" for b, p in d.get("candidates", ()))
        off = ", ".join(f"{_esc(b)} ({p})" for b, p in d.get("disabled", ()))
        rule = d.get("rule")
        why = {"priority": "the best priority among the backends switched on (claim 1; paragraph 61: the "
                           "priority-1 backend first)",
               "fallback": "no backend switched on runs it: the fallback takes it (ONNX Runtime's CPU provider; "
                           "not in the patent)",
               "override": "pinned by an override"}.get(rule, _esc(s.reason))
        return (f"{head} · <i>marking</i>: op <b>{_esc(s.subject)}</b> ({_esc(d.get('op_type', '?'))}) can run on "
                f"{cands or 'no backend switched on'}" + (f"; switched off: {off}" if off else "")
                + f" → marked {ok.format(_esc(d.get('choice')))}: {why}.")
    if s.action == "fallback":
        return f"{head} · <i>fallback</i>: {_esc(s.reason)}."
    n0 = f"{s.before:.0f}" if s.before is not None else "?"
    out = d.get("outcome")
    edge = d.get("edge")
    ga, gb = (_esc(x) for x in (tuple(d.get("groups", ("?", "?"))) + ("?",))[:2])
    be = _esc(d.get("backend"))
    what = f"edge <b>{_esc(edge[0])} → {_esc(edge[1])}</b>" if edge else f"the groups of <b>{ga}</b> and <b>{gb}</b>"
    merging = f"{head} · <i>merging</i>: "
    if out == "merged":
        mode = {"global": " (not neighbours: no path leaves one and comes back into the other; global merging, "
                          "beyond the patent)",
                "after-fallback": " (after the small groups went to the fallback, its groups merge again)",
                }.get(d.get("mode"), "")
        return (f"{merging}{what}, both on {be} → {ok.format('merged')}: the groups of <b>{ga}</b> and <b>{gb}</b> "
                f"become one aggregated op, launched once instead of twice{mode} (claim 2; paragraph 47). Aggregated "
                f"ops so far: {n0} → {s.after:.0f}.")
    if out == "different_backend":
        bp, bv = (_esc(x) for x in d.get("backends", ("?", "?")))
        return (f"{merging}{what}: {_esc(edge[0])} runs on {bp}, {_esc(edge[1])} on {bv} → {no.format('not merged')}: "
                f"only ops of one backend merge (paragraph 47); this edge is a copy between backends for every input.")
    if out == "cycle":
        via = _esc(d.get("via", "?"))
        return (f"{merging}{what}, both on {be} → {no.format('refused')}: merging the group of <b>{ga}</b> with the "
                f"group of <b>{gb}</b> would create a cycle: a path leaves one group, runs through the group of "
                f"<b>{via}</b> on another backend and comes back into the other (red dashes in the aggregated-op "
                f"graph), so the merged op would wait for {via} while {via} waits for it. The cycle guard is what "
                f"torch.fx and TVM BYOC do; the patent does not say.")
    if out == "not_adjacent":
        return (f"{merging}the {be} groups of <b>{ga}</b> and <b>{gb}</b> {no.format('stay apart')}: no edge joins "
                f"them, and the minimal-neighbourhood rule (paragraph 47) never merges across another backend's ops; "
                f"merge 'global' would try.")
    verdict = ok.format("accepted") if s.accepted else no.format("refused")
    return f"{head} · <i>{_esc(_PHASE.get(s.action, s.action))}</i>: {what} → {verdict}: {_esc(s.reason)}."


def _describe_dispatch(v: BackendView, j: int) -> str:
    b = v.buffered
    s = b.steps[j]
    d = s.data
    st = b.replay(j)
    depth = int(b.params.get("buffer_depth", 0))
    running = "; ".join(f"{_esc(be)} runs {_esc(g)} (input {i})" for be, (g, i) in sorted(st["running"].items()))
    occ = ", ".join(f"{_esc(n)} {c}/{depth}" for n, c in st["occupancy"].items()) if depth else ""
    why = ("Buffers let the backends work on different inputs at once (claim 3; paragraph 50)" if depth else
           "No buffers: one input at a time goes through the whole graph, the backends wait for each other "
           "(the serial prior art of paragraph 3)")
    return (f"at {_t(d['start_s'])} <b>{_esc(d['backend'])}</b> starts <b>{_esc(s.subject)}</b> for input "
            f"{d['input']} (launch, then its ops; done at {_t(d['end_s'])}). Now: {running or 'nothing running'}"
            + (f"; buffers held: {occ}" if occ else "") + f". {why}.")


class BackendPanel(BlockDrawing, Panel):
    """The backend family on the session's graph and system, one decision at a time.

    Parameters
    ----------
    session : Session, optional
        Shared graph and system. The panel starts on the bundled example (a set-up where a merge is
        refused for a cycle and buffers pay off) and follows the session from the first graph or
        system loaded into it.
    graph, system : optional
        Pin the panel to these (the set-up is then "the given graph and system").
    """

    TAB = "backends"
    VIEW_TRAITS = ("color_by", "step", "view", "expanded")
    MACHINE_BAR = True

    def __init__(self, session: Session | None = None, *, graph=None, system=None, **kw: Any) -> None:
        state = BackendState()
        pinned = graph is not None or system is not None
        if pinned:
            state.setup = "loaded"
        elif session is not None and (session.graph is not None or session.system is not None):
            # built after a graph or machine was loaded (a dashboard builds a tab on its first show):
            # start where a panel built before would have followed to (_on_session)
            state.setup = "loaded"
        style = {"description_width": "initial"}
        setup = W.Dropdown(options=[(("the given graph and system" if pinned and k == "loaded" else t), k)
                                    for k, t in SETUPS.items()],
                           description="set-up", style=style, layout=W.Layout(width="520px"))
        merge = W.ToggleButtons(options=MERGES, description="merge", style={**style, "button_width": "auto"},
                                tooltip="adjacent: the patent's minimal-neighbourhood rule; global: also distant "
                                        "regions of one backend when no cycle results; none: one launch per op")
        mgs = W.IntText(description="min group size", style=style, layout=W.Layout(width="170px"),
                        tooltip="groups with fewer ops go to the fallback (Torch-TensorRT's min_block_size)")
        fallback = W.Dropdown(options=[("none", "")], description="fallback", style=style, layout=W.Layout(width="200px"))
        depth = W.IntText(description="buffer depth", style=style, layout=W.Layout(width="160px"),
                          tooltip="slots per buffer between two backends; 0: no buffers (serial)")
        n_in = W.IntText(description="inputs", style=style, layout=W.Layout(width="140px"),
                         tooltip="how many inputs stream through the aggregated ops")
        self.launch_text = W.Text(description="launch cost per aggregated op (us)", placeholder="each backend's own",
                                  continuous_update=False, style=style, layout=W.Layout(width="380px"),
                                  tooltip="the start-up time every aggregated op pays on every input; empty: each "
                                          "backend's own launch overhead")
        color = W.ToggleButtons(options=[("backend", "backend"), ("aggregated op", "group")], description="colour ops by",
                                style={**style, "button_width": "auto"})
        for ctl, name in ((setup, "setup"), (merge, "merge"), (mgs, "min_group_size"),
                          (depth, "buffer_depth"), (n_in, "n_inputs"), (color, "color_by")):
            W.link((state, name), (ctl, "value"))
        link_clamped(state, "fallback", fallback)  # a name the dropdown lacks is refused, not "Invalid selection"
        self.launch_text.observe(self._on_launch_text, names="value")
        state.observe(self._show_launch, names="launch_s")
        state.observe(self._show_enabled, names="enabled")  # a refused change taken back shows on the boxes
        self.setup_ctl = setup
        self.fallback_ctl = fallback
        self.checkboxes: dict[str, W.Checkbox] = {}
        self.checkbox_box = W.HBox()
        self.grid_cells: dict[tuple[str, str], W.Text] = {}
        self.grid_box = W.VBox()
        self.groups_html = W.HTML()
        self.summary = W.HTML()
        self.summary.add_class("hetsched-summary")
        self.step_text = W.HTML(layout=W.Layout(min_height="3.2em"))
        self.step_text.add_class("hetsched-step")
        grid = W.Accordion(children=[W.VBox([W.HTML(_GRID_LEGEND), self.grid_box])],
                           titles=("mapping list: priority of each op type on each backend (1 = best, 0 = not supported)",))
        self.controls = W.VBox([
            setup,
            W.HBox([W.HTML("<b>backends</b>&nbsp;"), self.checkbox_box], layout=W.Layout(align_items="center")),
            grid,
            W.HBox([merge, mgs, fallback], layout=W.Layout(flex_flow="row wrap", align_items="center")),
            W.HBox([depth, n_in, self.launch_text], layout=W.Layout(flex_flow="row wrap")),
        ])
        self.control_widgets = {"setup": setup, "merge": merge, "min_group_size": mgs, "fallback": fallback,
                                "buffer_depth": depth, "n_inputs": n_in, "launch_s": self.launch_text, "color_by": color}
        self.walker = DecisionWalker(state, "step", description="decision", phase=_phase_of, group=_backend_of,
                                     group_label="backend", label=self._step_label)
        self.outcome = W.Dropdown(options=[(t, k) for k, t in OUTCOMES.items()], value="cycle", description="merges",
                                  style=style, layout=W.Layout(width="330px"))
        self.walker.jumps.children = (*self.walker.jumps.children, self.outcome)
        self.prev_outcome, self.next_outcome = self.walker.add_jumps(
            "such merge", "merge decision with this outcome", lambda d: self.jump_to_outcome(self.outcome.value, d))
        self._fixed_graph, self._fixed_system = graph, system
        self._grid_key: Any = None
        self._grid_table: Any = None
        self._grid_sync = False
        self._graph_shown: Any = None
        self._drawn: dict[str, Any] = {}
        self._quotients: OrderedDict = OrderedDict()
        super().__init__(state, session=session, follow_session=not pinned, autostart=False, **kw)
        self.add_class("hetsched-backend-panel")
        self._build_inputs()
        self.control_widgets["view"] = self.view_control()
        self.watch_clicks(self.figure_view("graph"))
        self.children = [W.HTML(_CSS), self.machine_bar, self.controls, self.status, self.summary, self.walker, self.step_text,
                         W.HBox([color, self.control_widgets["view"]], layout=W.Layout(flex_flow="row wrap")),
                         self.figure_view("graph"), self.figure_view("quotient"), self.figure_view("gantt"),
                         self.figure_view("buffers"), self.groups_html, self.download_area]
        self._start()

    # -- inputs ------------------------------------------------------------------------
    def _example_pair(self) -> tuple:
        """The example set-up: this tab's scenario (``hetsched.scenarios``, "backends")."""
        return self._own_inputs()

    @property
    def graph(self) -> hs.OpGraph:
        """The graph of the current set-up (the example's, or the pinned/session graph)."""
        if self.state.setup == "example":
            return self._example_pair()[0]
        if self._fixed_graph is not None:
            return self._fixed_graph
        if self.session.graph is None and self.session.system is not None:
            return self._example_pair()[0]  # a machine picked, no graph loaded: the example's graph on it
        if self.session.graph is None:
            raise HetschedError("no graph is loaded yet: load one (the Graph tab, or panel.load(graph)) or pick the "
                                "example set-up", field="setup")
        return self.session.graph

    @property
    def base_system(self) -> hs.System:
        """The system of the current set-up, before the grid's edits."""
        if self.state.setup == "example":
            return self._example_pair()[1]
        return self._session_system()

    def machine(self) -> hs.System:
        """The set-up's machine (before the grid's edits of its mapping list)."""
        return self.base_system

    def load(self, graph=None, system=None) -> bool:
        """Show ``graph`` (and/or ``system``), stored in the session; a pinned panel is pinned to them
        (never left on the old graph). Returns whether the panel now shows them (a hidden panel shows
        them when next shown: ``False`` until then; on failure the message says why)."""
        if self._fixed_graph is not None or self._fixed_system is not None:
            if graph is not None:
                self._fixed_graph = graph
            if system is not None:
                self._fixed_system = system
        with self.hold():
            self.state.setup = "loaded"
            with self.session.hold_trait_notifications():
                if system is not None:
                    self.session.system = system
                if graph is not None:
                    self.session.graph = graph
            self._build_inputs()
            self._held.add("compute")  # one recompute when the block ends, whatever changed
        ok = self.result is not None and not self.message.value and not self.stale
        if ok and graph is not None:
            ok = self.result.partition.graph is graph
        if ok and system is not None:
            ok = self.result.system.device_names == system.device_names
        return ok

    def toggle(self, backend: str, on: bool) -> None:
        """Switch a backend on or off (what its checkbox does)."""
        if backend not in self.checkboxes:
            raise hs.errors.UnknownNameError(f"unknown backend {backend!r}", device=backend)
        self.checkboxes[backend].value = bool(on)

    def set_priority(self, backend: str, op_type: str, priority: int | None) -> bool:
        """Edit one cell of the priority grid: an integer (1 = best, 0 = not supported) or ``None`` (take the
        cell's own entry out: back to the backend's ``*`` row, or not listed). A bad value is refused with a
        message and changes nothing; returns whether the edit was taken."""
        if (backend, op_type) not in self.grid_cells:
            self.show_error(HetschedError(f"the grid has no cell for op type {op_type!r} on backend {backend!r}",
                                          device=backend, field="priority"))
            return False
        if priority is not None and (not isinstance(priority, int) or not _PRIORITY.allows(priority)):
            self._refuse_priority(backend, op_type, priority)
            return False
        pr = dict(self.state.priorities)
        pr[f"{backend}|{op_type}"] = priority
        if pr != self.state.priorities:
            self.state.priorities = pr
        elif self.message.value and "priority of" in self.message.value:
            self.message.value = ""
        return True

    def _refuse_priority(self, backend: str, op_type: str, value: Any) -> None:
        self.show_error(HetschedError(
            f"priority of {op_type} on {backend}: {value!r} refused: type a whole number from {_PRIORITY.min} (not supported) "
            f"to {_PRIORITY.max} (1 = best), or clear the cell; the last good mapping list stays", device=backend,
            field="priority"))
        self._sync_grid(force=True)

    def _on_cell(self, backend: str, op_type: str, text: str) -> None:
        if self._grid_sync:
            return
        t = (text or "").strip()
        if t == "":
            _p, how = self._effective_table().lookup(backend, op_type)
            if how in ("exact", "excluded"):
                self.set_priority(backend, op_type, None)
            return
        try:
            v = int(t)
        except ValueError:
            self._refuse_priority(backend, op_type, t)
            return
        self.set_priority(backend, op_type, v)

    def _on_launch_text(self, change: dict) -> None:
        if getattr(self, "_launch_sync", False):
            return
        t = (change["new"] or "").strip()
        if t == "":
            self.state.launch_s = None
            return
        spec = _SPEC["launch_s"]
        try:
            v = float(t) / spec.factor  # typed as shown (us)
            spec.check(v)
        except (ValueError, HetschedError) as e:
            why = e if isinstance(e, HetschedError) else f"{spec.words} {t!r} is not a number"
            self.show_error(HetschedError(f"{why}; refused: type {spec.bounds_text()} (empty: each backend's own); "
                                          f"the last good result stays", field="launch_s"))
            self._show_launch()
            return
        self.state.launch_s = v

    def _show_launch(self, _change: dict | None = None) -> None:
        v = self.state.launch_s
        self._launch_sync = True
        try:
            self.launch_text.value = "" if v is None or not math.isfinite(v) else f"{v * _SPEC['launch_s'].factor:.6g}"
        finally:
            self._launch_sync = False

    def _build_inputs(self) -> None:
        """(Re)build the checkboxes and the grid for the set-up's op types and backends (edits reset)."""
        try:
            g, s = self.graph, self.base_system
        except HetschedError:
            return  # nothing loaded: compute() says so
        backends = list(s.support.backends) if s.support.backends else list(s.device_names)
        op_types = sorted({g.op(o).op_type for o in g})
        key = (tuple(backends), tuple(op_types), id(s))
        if key == self._grid_key:
            return
        self._grid_key = key
        with self.hold():
            self.state.enabled = list(backends)
            self.state.priorities = {}
            if self.state.fallback not in backends:
                self.state.fallback = ""
        self.fallback_ctl.options = [("none", "")] + [(b, b) for b in backends]
        self.checkboxes = {}
        for b in backends:
            cb = W.Checkbox(value=True, description=b, indent=False, layout=W.Layout(width="auto", margin="0 12px 0 0"))
            cb.observe(lambda ch, b=b: self._on_checkbox(b, ch["new"]), names="value")
            self.checkboxes[b] = cb
        self.checkbox_box.children = list(self.checkboxes.values())
        cmap = color_map(s.device_names)  # the colours every figure gives the devices
        cells: list[W.Widget] = [W.HTML("<b>op type</b>")]
        # one layout and one style shared by every cell: each widget's own would travel to the browser
        # (~2 KB a cell: a few hundred KB for the op types of a real model)
        cell_layout, cell_style, label_style, label_layout = W.Layout(width="76px"), TextStyle(), HTMLStyle(), W.Layout()
        cells += [W.HTML(f"<b style='color:{cmap.get(b, '#000')}'>{_esc(b)}</b>", style=label_style, layout=label_layout)
                  for b in backends]
        self.grid_cells = {}
        for t in op_types:
            cells.append(W.HTML(_esc(t), style=label_style, layout=label_layout))
            for b in backends:
                box = W.Text(continuous_update=False, layout=cell_layout, style=cell_style)
                box.add_class("hetsched-prio")
                box.observe(lambda ch, b=b, t=t: self._on_cell(b, t, ch["new"]), names="value")
                self.grid_cells[(b, t)] = box
                cells.append(box)
        self.grid_box.children = [W.GridBox(cells, layout=W.Layout(
            grid_template_columns=f"minmax(140px, max-content) repeat({len(backends)}, 84px)", grid_gap="2px 4px"))]
        self._grid_table = None
        self._sync_grid(force=True)

    def _sync_grid(self, *, force: bool = False) -> None:
        """Show the effective mapping list in the grid: explicit, ``*``-derived, 0 and absent cells apart."""
        try:
            table = self._effective_table()
        except HetschedError:
            return
        if not force and table == self._grid_table:
            return
        self._grid_table = table
        self._grid_sync = True
        try:
            for (b, t), box in self.grid_cells.items():
                p, how = table.lookup(b, t)
                value = {"exact": str(p), "excluded": "0"}.get(how, "")
                if box.value != value:
                    box.value = value
                box.placeholder = f"{p} (*)" if how == "wildcard" else "–"
                box.tooltip = {
                    "exact": f"{b} lists {t} with priority {p}",
                    "wildcard": f"from {b}'s * row (priority {p}); type a number to list {t} on its own, 0 to exclude it",
                    "excluded": f"{b} does not run {t} (an explicit 0, which beats a * row)",
                    "absent": f"{b} does not list {t}: not supported",
                }[how]
                cls = f"hetsched-prio-{how}"
                for c in [c for c in box._dom_classes if c.startswith("hetsched-prio-") and c != cls]:
                    box.remove_class(c)
                if cls not in box._dom_classes:
                    box.add_class(cls)
        finally:
            self._grid_sync = False

    def cell_source(self, backend: str, op_type: str) -> str:
        """Where a grid cell's value comes from: ``exact``, ``wildcard``, ``excluded`` or ``absent``."""
        return self._effective_table().lookup(backend, op_type)[1]

    def _on_checkbox(self, backend: str, on: bool) -> None:
        if getattr(self, "_enabled_sync", False):
            return
        self.state.enabled = [b for b in self.checkboxes if (self.checkboxes[b].value if b != backend else on)]

    def _show_enabled(self, _change: dict | None = None) -> None:
        self._enabled_sync = True
        try:
            for b, cb in self.checkboxes.items():
                if cb.value != (b in self.state.enabled):
                    cb.value = b in self.state.enabled
        finally:
            self._enabled_sync = False

    def _inputs_changed(self) -> None:
        """The set-up's graph or system changed: rebuild the checkboxes and the grid now if the panel is
        shown, else when it is next shown (a hidden tab sends no widgets for graphs nobody looks at)."""
        if self.active:
            self._build_inputs()
        else:
            self._inputs_dirty = True

    def activate(self) -> bool:
        if getattr(self, "_inputs_dirty", False):
            self._inputs_dirty = False
            with self.hold():  # its edits (enabled, priorities) mark the panel stale; activate recomputes once
                self._build_inputs()
        return super().activate()

    def _on_change(self, change) -> None:
        if change["name"] == "setup":
            with self.hold():
                self._inputs_changed()
                super()._on_change(change)
            return
        super()._on_change(change)

    def _on_session(self, change) -> None:
        if change["new"] is None:
            return
        with self.hold():  # the set-up, the grid and the recompute: one recompute at the end
            if self.state.setup != "loaded":
                self.state.setup = "loaded"  # the tab follows what the user loads
            self._inputs_changed()
            self._held.add("compute")

    def _effective_table(self):
        """The mapping list in use: the set-up's, with the grid's edits."""
        s = self.base_system
        edits = {}
        for k, p in self.state.priorities.items():
            b, t = k.split("|", 1)
            edits[(b, t)] = p
        return pt.edit_support(s.support, edits) if edits else s.support

    def system(self) -> hs.System:
        """The set-up's system with the grid's edits applied to its mapping list."""
        s = self.base_system
        table = self._effective_table()
        return s.with_support(table) if table != s.support else s

    def check_inputs(self) -> None:
        """Refuse what the panel cannot use (taken back, the last good result stays): numbers out of range,
        a grid edit outside the grid, every backend switched off, a step outside the log."""
        st = self.state
        self.check_params(_SPEC, {n: getattr(st, n) for n in ("min_group_size", "buffer_depth", "n_inputs", "launch_s")})
        for key, p in st.priorities.items():
            b, _, t = str(key).partition("|")
            if (b, t) not in self.grid_cells or (p is not None and (not isinstance(p, int) or not _PRIORITY.allows(p))):
                raise HetschedError(f"grid edit {key!r}: {p!r} refused: a cell is 'backend|op type' of the grid, its "
                                    f"priority a whole number from {_PRIORITY.min} to {_PRIORITY.max} or empty; the last "
                                    f"good mapping list stays", device=b or None, field="priorities")
        if not st.enabled:
            raise HetschedError("every backend switched off: refused, switch another one on first", field="enabled")
        if st.fallback and st.fallback not in self.checkboxes:
            raise HetschedError(f"fallback {st.fallback!r} refused: the set-up has {', '.join(self.checkboxes)}",
                                device=st.fallback, field="fallback")
        unknown = [b for b in st.enabled if b not in self.checkboxes]
        if unknown:
            raise HetschedError(f"backend {unknown[0]!r} refused: the set-up has {', '.join(self.checkboxes)}",
                                device=str(unknown[0]), field="enabled")
        self._check_step(self.result.n_steps if self.result is not None else None)

    # -- Panel -------------------------------------------------------------------------
    def compute(self) -> BackendView:
        st = self.state
        g = self.graph
        sysm = self.system()
        merge = None if st.merge == "none" else st.merge
        part = pt.partition_by_support(g, sysm, enabled=list(st.enabled), merge=merge,
                                       min_group_size=st.min_group_size, fallback=st.fallback or None)
        kw = dict(n_inputs=st.n_inputs, launch_s=st.launch_s, cost=self.cost)
        buf = pt.simulate_buffered(part, sysm, buffer_depth=st.buffer_depth, **kw)
        ser = buf if st.buffer_depth == 0 else pt.simulate_buffered(part, sysm, buffer_depth=0, **kw)
        return BackendView(part, buf, ser, sysm)

    def drawn_graph(self) -> hs.OpGraph | None:
        return self.result.partition.graph if self.result is not None else None

    def on_result(self, v: BackendView) -> None:
        self.forget_blocks(v.partition.graph)
        self._quotients.clear()
        self._drawn.clear()
        # the partition's log, then the buffered run's: walked as they are, one after the other
        steps = chain(v.partition.steps, v.buffered.steps)
        n = v.partition.n_steps
        self.walker.set_steps(steps)
        g = v.partition.graph
        if self._graph_shown is not g or self.state.step > len(steps):
            # a new graph: start where the partition is done (the buffered run follows)
            self._graph_shown = g
            self.state.step = n
        self._sync_grid()

    # -- walking -----------------------------------------------------------------------
    def _step_label(self, s: Step) -> str:
        d = s.data or {}
        mark = "✓" if s.accepted else "✗"
        if s.action == "mark":
            return f"{mark} mark {s.subject} → {d.get('choice')}"
        if s.action == "dispatch":
            return f"{mark} input {d.get('input')}: {d.get('backend')} runs {s.subject}"
        word = OUTCOMES.get(d.get("outcome"), s.action)
        return f"{mark} {s.action} {s.subject}" + (f" [{d['backend']}]" if d.get("backend") else "") + f": {word}"

    def jump_to_outcome(self, outcome: str, direction: int = +1) -> bool:
        """Walk to the previous/next merge decision with ``outcome`` (``merged``, ``cycle``,
        ``different_backend``, ``not_adjacent``); returns whether the walk moved."""
        if outcome not in OUTCOMES:
            self.show_error(HetschedError(f"unknown merge outcome {outcome!r}; choose from {list(OUTCOMES)}",
                                          field="outcome"))
            return False
        steps = self.result.partition.steps if self.result is not None else ()
        k = self.state.step
        rng = range(k, len(steps)) if direction > 0 else range(min(k, len(steps) + 1) - 2, -1, -1)
        target = next((i + 1 for i in rng if (steps[i].data or {}).get("outcome") == outcome), None)
        if target is None:
            return False
        self.state.step = target
        return True

    def position(self, v: BackendView | None = None) -> tuple[int, int | None]:
        """``(partition log index, buffered log index or None)`` of the walker's position."""
        v = v or self.result
        k, n_part = self.state.step, v.partition.n_steps
        if k <= n_part:
            return k - 1, None
        return n_part - 1, k - n_part - 1

    def _quotient(self, v: BackendView, pk: int):
        key = (id(v), pk)
        Q = self._quotients.get(key)
        if Q is None:
            Q = self._quotients[key] = v.partition.quotient_at(pk)
            while len(self._quotients) > 16:
                self._quotients.popitem(last=False)
        return Q

    # -- drawing -----------------------------------------------------------------------
    def _show_once(self, name: str, key: Any, build) -> Any:
        if self._drawn.get(name, (None,))[0] != key:
            self._drawn[name] = (key, build())
        return self._drawn[name][1]

    def render(self, v: BackendView) -> None:
        k = self.state.step
        if not 0 <= k <= v.n_steps:
            raise HetschedError(f"decision {k} is outside 0..{v.n_steps}", field="step")
        part, buf = v.partition, v.buffered
        pk, bj = self.position(v)
        Q = self._quotient(v, pk)
        cmap = color_map(v.system.device_names)
        running, focus_ops, t = None, None, 0.0
        if bj is not None:
            now = buf.replay(bj)
            t = now["time_s"]
            running = {g: i for _b, (g, i) in now["running"].items()}
            focus_ops = [o for g in running for o in part.groups.get(g, ())]
        if k == 0:
            self.step_text.value = (f"<b>before the first decision</b>: {part.graph.n_ops} ops to mark, then merge, then "
                                    f"{buf.params.get('n_inputs', 0):.0f} inputs through the aggregated ops. Step with "
                                    f"<b>next ▶</b> or jump to a phase.")
        else:
            self.step_text.value = describe_step(v, k - 1)
        phase = "buffered run" if bj is not None else ("marking" if pk < part.graph.n_ops else "merging")
        gtitle = (f"{'the graph' if bj is None else 'running now (outlined)'} after decision {k} of {v.n_steps} "
                  f"({phase})")
        kw = dict(by=self.state.color_by, colors=cmap, quotient=Q, focus_ops=focus_ops,
                  focus_edge=() if bj is not None else None)
        if self.blocks_shown(part.graph):
            fig = marked_blocks(part, pk, layout=self.block_layout(part.graph),
                                title=gtitle + " by blocks (click a block to open it)", **kw)
        else:
            fig = marked_graph_view(part, pk, title=gtitle, **kw)
        self.show_figure("graph", fig)
        self.show_figure("quotient", quotient_walk_view(part, pk, colors=cmap, quotient=Q, running=running))
        gantt = self._show_once("gantt", id(v), lambda: runs_gantt(v.serial, buf, cursor_s=0.0, colors=cmap))
        self.show_figure("gantt", with_cursor(gantt, t))
        occ = self._show_once("buffers", id(v), lambda: buffer_occupancy(
            buf, at_s=0.0, title="items in each buffer between backends (the line: now)" if buf.params.get("buffer_depth")
            else "no buffers (depth 0): nothing held between backends"))
        self.show_figure("buffers", with_cursor(occ, t, trace="now"))
        if self._drawn.get("text", (None,))[0] != id(v):
            self._render_text(v)
            self._drawn["text"] = (id(v), None)

    def _render_text(self, v: BackendView) -> None:
        p, b, s = v.partition, v.buffered, v.serial
        m, ms = b.metrics, s.metrics
        outcomes = [st.data.get("outcome") for st in p.steps if st.action == "merge"]
        per_backend = {}
        for gname, be in p.group_backend.items():
            per_backend[be] = per_backend.get(be, 0) + 1
        n_in = max(1.0, float(m.get("n_inputs", 1)))
        launch_per_input = float(b.timeline.loc[b.timeline["kind"] == "launch", "end_s"].sum()
                                 - b.timeline.loc[b.timeline["kind"] == "launch", "start_s"].sum()) / n_in
        gain = m["throughput_per_s"] / ms["throughput_per_s"] if ms["throughput_per_s"] else float("nan")
        depth = int(b.params.get("buffer_depth", 0))
        self.summary.value = (
            f"<b>{_esc(p.graph.name)}</b>: {p.graph.n_ops} ops → <b>{len(p.groups)} aggregated ops</b> ("
            + ", ".join(f"{_esc(be)} × {c}" for be, c in per_backend.items()) + "); "
            f"{outcomes.count('merged')} merged, {outcomes.count('cycle')} refused for a cycle, "
            f"{p.metrics['n_cross_edges']} edge(s) copying between backends"
            + (f", {len(p.fallback_ops)} op(s) on the fallback" if p.fallback_ops else "") + ".<br>"
            f"Per input: {len(p.groups)} launches costing {_t(launch_per_input)}"
            + ("" if self.state.launch_s is None else f" ({_t(self.state.launch_s)} each)")
            + f"; serial <b>{ms['throughput_per_s']:.4g} inputs/s</b>, "
            + (f"buffered (depth {depth}) <b>{m['throughput_per_s']:.4g} inputs/s</b> (× {gain:.2f}); "
               if depth else "no buffers (depth 0); ")
            + f"latency p50 {_t(m['latency_p50_s'])}; {format_value(m['bytes_copied'], 'bytes_copied_bytes')} copied "
              f"between backends in the run"
            # priced with a calibrated cost that kept held-out residuals: how far to trust the answer
            + (f"; makespan {format_time_range(m)} (the calibration's stated range)." if "makespan_lo_s" in m else ".")
        )
        gcol = group_colors(list(p.groups))
        cmap = color_map(v.system.device_names)
        rows = "".join(
            f"<tr><td><span style='display:inline-block;width:12px;height:12px;background:{gcol[gname]}'></span> "
            f"{_esc(gname)}</td><td style='color:{cmap.get(p.group_backend[gname], '#000')}'>{_esc(p.group_backend[gname])}"
            f"</td><td>{len(ops)}</td><td>{_esc(', '.join(ops[:5]))}{' …' if len(ops) > 5 else ''}</td></tr>"
            for gname, ops in list(p.groups.items())[:20]
        )
        more = f"<div>… and {len(p.groups) - 20} more aggregated ops (prepare the downloads)</div>" if len(p.groups) > 20 else ""
        self.groups_html.value = (
            "<table class='hetsched-groups' style='font-size:14px'><tr><th>aggregated op</th><th>backend</th><th>ops</th>"
            "<th>first ops</th></tr>" + rows + "</table>" + more
        )

    def download_items(self, v: BackendView):
        p = v.partition
        groups = p.groups_frame().assign(ops=lambda f: f["ops"].map(" ".join))
        return [(hs.timeline.to_chrome_trace(v.buffered.timeline), "partition_trace.json"),
                (csv_safe(v.buffered.timeline), "partition_timeline.csv"), (csv_safe(groups), "partition_groups.csv"),
                (csv_safe(pt.support_table_frame(v.system)), "support_table.csv"),
                (csv_safe(p.steps_frame()), "partition_steps.csv")]
