"""MappingPanel: walk the mapping patent's decisions (compute-first, locality, remap) one at a time.

The panel runs :func:`hetsched.mapping.h2h` (the mapping patent, Inspur 2023; its public twin is
H2H, Zhang et al., DAC 2022) with the chosen objective, occupancy threshold, locality policy,
remap direction and number of remap walks, and walks ``result.steps`` with the house's
:class:`~hetsched.widgets.walker.DecisionWalker`: prev/next, jumps to a phase (compute-first,
locality, remap, the memory re-optimisation after a kept remap), to the next kept decision or
the next decision about one device, and a filterable list.

Each decision is told in plain words (what was tried, its own metric before and after, kept or
refused and why, which claim decided it) and *drawn*: :func:`hetsched.mapping.evaluate_trial`
gives the placement the decision tried (refused remap trials included) against the state before
it, shown as the graph coloured by that placement, its Gantt chart, each device's busy time
before and after, and the residency changes the trial made (claim 4). The walker never re-runs
the mapper. A step redraw keeps every figure's traces and changes a few arrays (issue 14).
Graphs above the Graph tab's threshold are drawn by blocks (layers, stages; "draw: auto / blocks /
every op"): each block in the colour of the device holding most of its FLOPs, outlined when its
layers sit on several devices, the tried layer's block ringed; a click opens a block into its
layers (:func:`hetsched.plot.mapping.placement_blocks`).

Below, the comparison: compute-first, HEFT, CPOP, PEFT and the fastest single device beside this
panel's h2h, and on request (at once for small graphs) the search and the ILP that answer "how far
is the patent from the best mapping?"; each bar is coloured by what its mapper minimises, and the
numbers that surprise (h2h several times HEFT's time; the host round trip) are explained on
screen, with a "keep tensors resident" what-if.

Shown alone, the panel maps CASIA-SURF (three backbones fused, :func:`hetsched.io.mmmt.mmmt`) onto
the H2H FPGA zoo with the U280 card's memory cut to 56 MiB, so every phase acts: remaps kept and
refused, and claim 6's memory re-optimisation after a kept remap (:func:`mapping_scenario`).

>>> from hetsched.io.generators import fork_join
>>> p = MappingPanel(graph=fork_join(3, 2, seed=0))
>>> p.state.step == p.result.n_steps          # starts at the final mapping
True
>>> p.state.step = 1; "map layer" in p.step_text.value
True
>>> p.state.occupancy_threshold = 1.5; "occupancy threshold" in p.message.value
True
"""

from __future__ import annotations

import html
import re
from collections import Counter, OrderedDict
from typing import Any, Sequence

import ipywidgets as W
import pandas as pd
import traitlets

import hetsched as hs
import hetsched.mapping as mp
from hetsched.cost import cost_key, resolve_cost
from hetsched.errors import HetschedError
from hetsched.io.tables import csv_safe
from hetsched.plot import color_map, format_time_range, format_value, time_unit
from hetsched.plot.mapping import (GANTT_WEBGL_BARS, METHOD_LABELS, busy_bars, mapping_gantt, method_bars,
                                   placement_blocks, placement_graph)
from hetsched.results import Step

from .base import Panel, Session, link_clamped, small_terms, term
from .blocks import BlockDrawing
from .walker import DecisionWalker

__all__ = ["MappingPanel", "MappingState", "describe_step", "mapping_scenario", "stage_of", "decided_by"]

#: mappers beside h2h, always computed (fast: list scheduling and greedy)
BASELINES = ["compute_first", "heft", "cpop", "peft", "fastest_single_device"]
#: mappers that look for the best mapping, per objective (the search, then the ILP)
BEST = {"total_latency": ["h2h_plus", "search", "ilp"], "makespan": ["search_makespan", "ilp_makespan"]}
#: the ILP's wall-time budget when asked for (the button)
ILP_TIME_LIMIT_S = 10.0
#: graphs up to this size get the search and the ILP at once (objective total latency); bigger ones on request
AUTO_BEST_OPS = 100
#: the ILP's budget when it runs unasked (a graph shown for the first time must not wait long)
AUTO_ILP_LIMIT_S = 5.0
#: graphs up to this size get the other mappers (BASELINES) at once; bigger ones on request (an 8k-op LLM
#: training graph: five list schedulers and baselines take most of a minute, the tab must show in seconds)
AUTO_BASELINE_OPS = 2500
#: the row of this panel's own result in the comparison
THIS = "this_panel"
_METRICS = [("total busy time of all devices", "total_latency_s"), ("makespan", "makespan_s"), ("energy", "energy_J"),
            ("data moved", "bytes_moved")]
_OBJ_WORDS = {"total_latency": "total busy time of all devices", "makespan": "makespan",
              "op_latency": "this layer's latency with memory cleared"}
#: the inputs' defaults, bounds and words, declared in the core (``max_passes``: h2h's own default, 0 = until stable)
_SPEC = mp.PARAMS


class MappingState(traitlets.HasTraits):
    objective = traitlets.Enum(list(_SPEC["objective"].options), default_value=_SPEC["objective"].default)
    occupancy_threshold = traitlets.Float(_SPEC["occupancy_threshold"].default)
    policy = traitlets.Enum(list(_SPEC["policy"].options), default_value=_SPEC["policy"].default)
    direction = traitlets.Enum(list(_SPEC["direction"].options), default_value=_SPEC["direction"].default)
    max_passes = traitlets.Int(_SPEC["max_passes"].default)  # 0: repeat the remap walk until stable (beyond the patent)
    step = traitlets.Int(0)  # view: 0 = before the first decision, k = after decision k-1
    metric = traitlets.Enum([k for _l, k in _METRICS], default_value="total_latency_s")  # view
    keep_resident = traitlets.Bool(False)  # view: the comparison re-timed without the host round trip
    # view: "auto" draws the graph by blocks (layers, stages) beyond the Graph tab's threshold
    view = traitlets.Enum(["auto", "blocks", "ops"], default_value="auto")
    expanded = traitlets.Tuple()  # view: blocks shown op by op


def mapping_scenario(memory_MiB: float | None = 56.0) -> tuple[hs.OpGraph, hs.System]:
    """The panel's own instance (:func:`hetsched.scenarios.mapping_instance`).

    >>> g, s = mapping_scenario()
    >>> g.n_ops
    91
    """
    from hetsched.scenarios import mapping_instance

    return mapping_instance(memory_MiB)


# ------------------------------------------------------------------------------------------ words
def _t(x: float | None) -> str:
    return format_value(x, "_s")


def _t5(x: float) -> str:
    """A time with five significant digits (a remap may change the total by a few parts in 10^4)."""
    u, f = time_unit(x)
    return f"{x * f:.5g} {u}"


def _e(x: Any) -> str:
    return html.escape(str(x))


def stage_of(step: Step) -> str:
    """The phase of a decision in plain words (what the jump-to-phase buttons show).

    >>> stage_of(Step(0, "keep_weights", "c1", data={"phase": "remap", "relocality": True}))
    'locality again'
    """
    d = step.data or {}
    if d.get("relocality"):
        return "locality again"
    return {"compute_first": "compute-first", "locality": "locality", "remap": "remap",
            "memory_repair": "memory repair"}.get(str(d.get("phase", "")), str(d.get("phase", "")) or "other")


def _about(step: Step) -> str | None:
    """The device a decision is about: where it maps, keeps data, or tries to move a layer."""
    d = step.data or {}
    return d.get("target") if step.action in ("remap", "remap_group") else d.get("device")


def _metric_words(step: Step) -> str:
    d = step.data or {}
    if d.get("bound_only"):
        return "makespan (lower bound, not simulated)"
    return _OBJ_WORDS.get(str(d.get("metric", "")), str(d.get("metric", "")).replace("_", " ") or "objective")


#: the phases the walker jumps to, with the patent's claim in their tooltips
PHASE_TIPS = {"compute-first": "each layer to its fastest device with its memory cleared (claims 8-11)",
              "locality": "keep weights and outputs on-chip where memory allows (claims 13-16)",
              "remap": "move a layer next to its successor when the total busy time drops (claims 3-5, 7)",
              "locality again": "after a kept remap, the memory it freed goes to data that waited (claim 6)",
              "memory repair": "beyond the patent: a device that overflowed sends data back to host memory"}


def decided_by(step: Step) -> tuple[str, str]:
    """What decided a step, in plain words, and the patent's claim (or "beyond the patent") for it.

    >>> decided_by(Step(0, "remap", "a", 2.0, 1.0, True, data={"metric": "total_latency"}))
    ('the total busy time of all devices dropped, so the move is kept', "claim 5: the patent's system total latency")
    >>> decided_by(Step(0, "keep_weights", "a", data={"phase": "remap", "relocality": True}))[1]
    'claim 6'
    """
    d = step.data or {}
    a = step.action
    if d.get("relocality"):
        return "after a kept move, the memory optimisation runs again on the new mapping", "claim 6"
    if a == "map":
        return "each candidate device is priced with its memory cleared, and the fastest wins", "claims 8-11"
    if a == "keep_weights":
        return "weights stay on-chip while the device's occupancy stays under the threshold", "claims 13-15"
    if a == "keep_tensor":
        return "an output stays on-chip when its successor can read it there", "claim 16"
    if a in ("remap", "remap_group"):
        extra = " (a group move: beyond the patent)" if a == "remap_group" else ""
        if step.after is None:
            return "not tried: the target cannot run this layer or hold it" + extra, ""
        if d.get("metric") == "makespan":
            rule = "H2H's makespan rule, an option"
            return ((f"{rule}: kept" if step.accepted else f"{rule}: not better, skipped; the walk goes on") + extra,
                    "the patent judges by its system total latency, claim 5; claim 7")
        if step.accepted:
            return "the total busy time of all devices dropped, so the move is kept" + extra, \
                "claim 5: the patent's system total latency"
        return ("the total busy time of all devices would not drop, so the move is skipped and the walk goes on" + extra,
                "claim 5: the patent's system total latency; claim 7: the walk goes on")
    if a == "evict":
        return "memory repair, beyond the patent: the device overflowed at its peak", ""
    if a == "revert":
        return "safety net, beyond the patent: never worse than compute-first", ""
    return "", ""


def _what(step: Step) -> str:
    d = step.data or {}
    subj = f"<b>{_e(step.subject)}</b>"
    a = step.action
    if a == "map":
        return f"map layer {subj} to <b>{_e(d.get('device', '?'))}</b>"
    if a in ("remap", "remap_group"):
        via = {"successor": "its successor's device", "predecessor": "its predecessor's device"}.get(str(d.get("via")), "")
        grp = f" with {len(d.get('ops', ())) - 1} predecessor(s)" if a == "remap_group" else ""
        return (f"try moving layer {subj}{grp} from {_e(d.get('source', '?'))} to <b>{_e(d.get('target', '?'))}</b>"
                + (f" ({via})" if via else ""))
    if a == "keep_weights":
        return f"keep the weights of {subj} in {_e(d.get('device', '?'))}'s memory"
    if a == "keep_tensor":
        return f"keep the output {subj} on-chip on {_e(d.get('device', '?'))}"
    if a == "evict":
        return f"send {subj} back to host memory from {_e(d.get('device', '?'))}"
    if a == "revert":
        return "go back to the compute-first mapping"
    return f"{_e(a)} {subj}"


def _numbers(step: Step) -> str:
    if step.before is None and step.after is None:
        return ""
    words = _metric_words(step)
    if step.before is None:
        return f"{words}: {_t(step.after)}"
    if step.after is None:
        return f"{words}: {_t(step.before)} (nothing tried)"
    ch = (step.after / step.before - 1) if step.before else 0.0
    diff = format_value(abs(step.after - step.before), "_s")
    sign = "−" if step.after < step.before else "+"
    return f"{words}: {_t5(step.before)} → {_t5(step.after)} ({sign}{diff}, {ch:+.2%})"


def describe_step(step: Step, *, n_steps: int | None = None) -> str:
    """One decision of the mapping log in plain words (HTML; every name escaped).

    >>> from hetsched.results import Step
    >>> s = Step(index=3, action="remap", subject="conv1", before=2e-3, after=1e-3, accepted=True,
    ...          reason="total latency drops", data={"phase": "remap", "source": "gpu0", "target": "fpga0",
    ...                                              "metric": "total_latency"})
    >>> t = describe_step(s)
    >>> "from gpu0 to <b>fpga0</b>" in t, "2 ms → 1 ms" in t, "claim 5" in t
    (True, True, True)
    """
    of = f" of {n_steps}" if n_steps is not None else ""
    verdict = ("<span style='color:#1B5E20;font-weight:600'>✓ kept</span>" if step.accepted
               else "<span style='color:#B00020;font-weight:600'>✗ refused</span>")
    nums = _numbers(step)
    why, claim = decided_by(step)
    return (f"<div><b>decision {step.index + 1}{of}</b> <i>({_e(stage_of(step))})</i>: {_what(step)}</div>"
            + (f"<div>{_e(nums)}</div>" if nums else "")
            + f"<div>{verdict}: {small_terms(_e(step.reason))}</div>"
            + (f"<div style='color:#444'>{_e(why)} {term(claim) if claim else ''}</div>" if why else ""))


def _label(step: Step) -> str:
    """One line of the decision list (plain text: the list shows text, not HTML)."""
    d = step.data or {}
    a = step.action
    if a == "map":
        what = f"map {step.subject} → {d.get('device', '?')}"
    elif a in ("remap", "remap_group"):
        what = f"try {step.subject} → {d.get('target', '?')}"
    elif a == "keep_weights":
        what = f"keep weights of {step.subject}"
    elif a == "keep_tensor":
        what = f"keep {step.subject} on-chip"
    else:
        what = f"{a} {step.subject}"
    nums = ""
    if step.before is not None and step.after is not None:
        nums = f": {_t(step.before)} → {_t(step.after)}"
    elif step.after is not None:
        nums = f": {_t(step.after)}"
    return f"{'✓' if step.accepted else '✗'} [{stage_of(step)}] {what}{nums}"


def _plain(html_text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", html_text)).replace("  ", " ").strip()


def _residency_words(trial: mp.Trial, placement: dict[str, str], graph: hs.OpGraph, limit: int = 6) -> str:
    """The residency changes a trial made (claim 4), in words (HTML, names escaped)."""
    parts: list[str] = []
    res = trial.residency
    for o in res.get("weights_add", ()):
        parts.append(f"weights of <b>{_e(o)}</b> into {_e(placement.get(o, '?'))}'s memory")
    for o in res.get("weights_remove", ()):
        parts.append(f"weights of <b>{_e(o)}</b> back to host memory")
    for t in res.get("tensors_add", ()):
        p = graph.tensors[t].producer if t in graph.tensors else None
        parts.append(f"output <b>{_e(t)}</b> kept on-chip on {_e(placement.get(p, '?'))}")
    for t in res.get("tensors_remove", ()):
        parts.append(f"output <b>{_e(t)}</b> back to host memory")
    if not parts:
        return ""
    more = f" and {len(parts) - limit} more" if len(parts) > limit else ""
    why = (f": the moved layer's data goes to its new device's memory {term('claim 4')}"
           if trial.step.action in ("remap", "remap_group") else "")
    return f"residency changes{why}: " + "; ".join(parts[:limit]) + more


# ------------------------------------------------------------------------------------------ panel
class MappingPanel(BlockDrawing, Panel):
    """The mapping patent's mapper on the session's graph and system, one decision at a time.

    Parameters
    ----------
    session : Session, optional
        Graph and system to follow (a dashboard's). Without one, and without ``graph``/``system``,
        the panel shows :func:`mapping_scenario`.
    graph, system : optional
        Pin the panel to these instead of following the session.

    Attributes
    ----------
    walker : DecisionWalker
    step_text : ipywidgets.HTML
        The decision on screen in plain words, with the residency changes it made.
    summary, explain : ipywidgets.HTML
        The final result in one line; the comparison's explanations.
    comparison : pandas.DataFrame or None
        The comparison on screen (one row per mapper, plus ``this_panel``).
    """

    TAB = "mapping"
    VIEW_TRAITS = ("step", "metric", "keep_resident", "view", "expanded")
    MACHINE_BAR = True
    COMPARES_MACHINES = True

    def __init__(self, session: Session | None = None, *, graph=None, system=None, **kw: Any) -> None:
        state = MappingState()
        style = {"description_width": "initial"}
        objective = W.ToggleButtons(options=[("total busy time of all devices", "total_latency"), ("makespan", "makespan")],
                                    description="objective", style=style,
                                    tooltips=["the patent's objective, its 'system total latency' (claim 5): the sum "
                                              "over devices of the time each is busy", "H2H's acceptance rule: when the "
                                              "last layer finishes"])
        direction = W.ToggleButtons(options=[("successor (patent)", "successor"), ("successor or predecessor", "both")],
                                    description="remap towards", style=style)
        # plain text boxes: a value outside the range reaches the check and is reported, never clamped
        thr = W.FloatText(step=_SPEC["occupancy_threshold"].step, description="occupancy threshold (0-1)", style=style,
                          layout=W.Layout(width="250px"), tooltip=_SPEC["occupancy_threshold"].help)
        policy = W.Dropdown(options=[("greedy (patent)", "greedy"), ("knapsack (H2H)", "knapsack")],
                            description="keep on-chip by", style=style, layout=W.Layout(width="260px"))
        passes = W.IntText(description=f"remap walks ({_SPEC['max_passes'].default}: the patent's; 0: until stable)", style=style,
                           layout=W.Layout(width="340px"))
        metric = W.Dropdown(options=_METRICS, description="compare by", style=style, layout=W.Layout(width="330px"),
                            tooltip="total busy time of all devices: the patent's 'system total latency' (claim 5)")
        resident = W.Checkbox(description="keep tensors resident (what-if: no round trip through host memory)",
                              indent=False, layout=W.Layout(width="auto"))
        for ctl, name in ((objective, "objective"), (policy, "policy"), (direction, "direction"), (metric, "metric"),
                          (resident, "keep_resident")):
            W.link((state, name), (ctl, "value"))
        # numbers: the trait wins, so NaN or an out-of-range value is reported, never clamped or looped back
        for ctl, name in ((thr, "occupancy_threshold"), (passes, "max_passes")):
            link_clamped(state, name, ctl)
        self.best_button = W.Button(description="find the best mapping (search, then ILP ≤ 10 s)", icon="search",
                                    layout=W.Layout(width="auto"),
                                    tooltip="run the improvement search and the MILP on this graph and system")
        self.best_button.on_click(lambda _b: self.find_best())
        self.baselines_button = W.Button(description="compare with HEFT, CPOP, PEFT and the single devices", icon="balance-scale",
                                         layout=W.Layout(width="auto", display="none"),
                                         tooltip="run the other mappers on this big graph (seconds each)")
        self.baselines_button.on_click(lambda _b: self.compare_baselines())
        self.walker = DecisionWalker(state, "step", description="decision", phase=stage_of, group=_about,
                                     group_label="device", label=_label, phase_tips=PHASE_TIPS)
        self.step_text = W.HTML(layout=W.Layout(min_height="5.5em"))
        self.residency_text = W.HTML(layout=W.Layout(min_height="1.4em"))
        self.summary = W.HTML()
        self.explain = W.HTML()
        self.controls = W.VBox([W.HBox([objective, direction], layout=W.Layout(flex_flow="row wrap")),
                                W.HBox([thr, policy, passes], layout=W.Layout(flex_flow="row wrap"))])
        self.control_widgets = {"objective": objective, "occupancy_threshold": thr, "policy": policy,
                                "direction": direction, "max_passes": passes, "metric": metric,
                                "keep_resident": resident}
        self._fixed_graph, self._fixed_system = graph, system
        self._runs: dict[str, tuple[mp.MappingResult, float]] = {}  # method -> (result, runtime) on _runs_key
        self._runs_key: Any = None
        self._cost: Any = None  # the cost model bound to the graph of _runs_key
        self._rows: dict[tuple, dict] = {}
        self._trials: OrderedDict = OrderedDict()  # (id(result), k) -> Trial, a small LRU
        self._states: OrderedDict = OrderedDict()  # (id(result), i) -> Evaluation of the state before decision i
        self._pos: tuple[Any, dict] | None = None
        self.comparison: pd.DataFrame | None = None
        super().__init__(state, session=session, follow_session=graph is None and system is None,
                         autostart=False, **kw)
        head = lambda t: W.HTML(f"<h4 style='margin:0.7em 0 0.2em'>{t}</h4>")  # noqa: E731
        self.control_widgets["view"] = self.view_control()
        self.watch_clicks(self.figure_view("graph"))
        self.children = [self.machine_bar, self.controls, self.status, self.summary, self.machine_compare,
                         head("The decisions, one at a time"), self.walker,
                         self.step_text, self.residency_text, self.control_widgets["view"], self.figure_view("graph"),
                         self.figure_view("gantt"),
                         self.figure_view("busy"), head("Against other mappers"),
                         W.HBox([metric, resident, self.baselines_button, self.best_button], layout=W.Layout(flex_flow="row wrap",
                                                                                    align_items="center")),
                         self.figure_view("compare"), self.explain, self.download_area]
        self._start()

    # -- inputs ------------------------------------------------------------------
    @property
    def graph(self) -> hs.OpGraph:
        from hetsched.io.generators import resnet_like

        return self._session_graph(lambda: resnet_like(blocks_per_stage=1))

    @property
    def system(self) -> hs.System:
        return self._session_system()

    def check_inputs(self) -> None:
        """Refuse out-of-range values with a message naming them (never clamp: taken back, the last result stays)."""
        st = self.state
        self.check_params(_SPEC, {"occupancy_threshold": st.occupancy_threshold, "max_passes": st.max_passes})
        self._check_step(self.result.n_steps if self.result is not None else None)

    # -- Panel -------------------------------------------------------------------
    def compute(self) -> mp.MappingResult:
        st = self.state
        g, s = self.graph, self.system
        # the session's cost (a notebook pointing the panels at a calibration) is an input too: the
        # comparison's mappers run again with a new one; the objects themselves, not their ids (a
        # freed id can come back), and the graph's version (an edit in place keeps the object)
        key = (g, g.version, s, cost_key(self.cost))
        if key != self._runs_key:
            self._runs, self._rows, self._runs_key, self._pos = {}, {}, key, None
            # one cost model bound to the graph for h2h and every mapper of the comparison: each op's
            # price on each device is worked out once, not once per mapper (the same prices)
            self._cost = resolve_cost(self.cost, g, s)
        return mp.h2h(g, s, occupancy_threshold=st.occupancy_threshold, policy=st.policy, objective=st.objective,
                      direction=st.direction, max_passes=st.max_passes or None, cost=self._cost)

    def machine_metrics(self, system, result=None) -> dict:
        """h2h's numbers on ``system``: the result on screen, or the same graph and settings mapped on
        ``system`` (run once per machine, graph, cost and settings)."""
        r = result
        if r is None:
            p = self.result.params
            g = self.graph
            key = (g, g.version, system, cost_key(self.cost), tuple(sorted((k, str(v)) for k, v in p.items())))
            cache = self.__dict__.setdefault("_other_machine", {})
            if key not in cache:
                cache.clear()  # one previous machine at a time
                st = self.state
                cache[key] = mp.h2h(g, system, occupancy_threshold=st.occupancy_threshold, policy=st.policy,
                                    objective=st.objective, direction=st.direction, max_passes=st.max_passes or None,
                                    cost=resolve_cost(self.cost, g, system))
            r = cache[key]
        m = r.metrics
        split = ", ".join(f"{n} on {d}" for d, n in Counter(r.placement.device.values()).most_common())
        return {"total busy time of all devices": (m["total_latency_s"], "_s"),
                "makespan (when the last layer ends)": (m["makespan_s"], "_s"), "energy": (m["energy_J"], "energy_J"),
                "data moved over links": (m["bytes_moved"], "bytes_moved"), "layers per device": (split, "")}

    def _run_comparison(self, r: mp.MappingResult) -> None:
        """The mappers the comparison shows beside h2h (each run once per graph and system)."""
        if r.graph.n_ops <= AUTO_BASELINE_OPS:
            self._run(BASELINES)
        obj = r.params["objective"]
        if r.graph.n_ops <= AUTO_BEST_OPS and obj == "total_latency":
            self._run(BEST[obj], ilp_limit_s=AUTO_ILP_LIMIT_S)

    def _run(self, methods: Sequence[str], *, ilp_limit_s: float = ILP_TIME_LIMIT_S) -> None:
        import time

        g, s = self.graph, self.system
        for m in methods:
            if m in self._runs:
                continue
            opts = {"time_limit_s": ilp_limit_s} if m.startswith("ilp") else {}
            opts["cost"] = self._cost
            t0 = time.perf_counter()
            self._runs[m] = (mp.METHODS[m](g, s, **opts), time.perf_counter() - t0)

    def compare_baselines(self) -> bool:
        """Run the other mappers of the comparison on a big graph (what the button does); returns success."""
        return self._run_on_request(BASELINES, "comparing")

    def find_best(self) -> bool:
        """Run the search and the ILP for the current objective (what the button does); returns success."""
        return self.result is not None and self._run_on_request(BEST[self.result.params["objective"]], "searching")

    def _run_on_request(self, methods: Sequence[str], doing: str) -> bool:
        if self.result is None:
            return False
        if not self.run_busy(doing, lambda: self._run(methods))[0]:
            return False
        self._compare_key = None
        return self.redraw()

    def drawn_graph(self) -> hs.OpGraph | None:
        return self.result.graph if self.result is not None else None

    def on_result(self, r: mp.MappingResult) -> None:
        self.forget_blocks(r.graph)
        self._trials.clear()
        self._states.clear()
        # rows of earlier results of this panel go (an id may be reused by a new result)
        self._rows = {k: v for k, v in self._rows.items() if k[0] != THIS}
        self._compare_key = None
        # the walker reads each step's plain phase and the device it is about through these functions
        self.walker.set_steps(r.steps)
        self.state.step = r.n_steps  # the final mapping first; walk back from there

    def trial(self, k: int | None = None) -> mp.Trial | None:
        """What decision ``k - 1`` tried, against the state before it (``None`` at step 0)."""
        r = self.result
        k = self.state.step if k is None else k
        if k < 1:
            return None
        key = (id(r), k)
        if key not in self._trials:
            i = k - 1
            # a walker steps one decision at a time: one of the two states a trial is drawn against
            # is a state the neighbouring trial evaluated (one evaluation per prev/next click, not two)
            st = self._states
            kept = r.steps[i].accepted
            tr = mp.evaluate_trial(r, i, before=st.get((id(r), i)), after=st.get((id(r), i + 1)) if kept else None)
            self._trials[key] = tr
            if tr.before is not None:  # S(j): the state after the first j decisions
                st[(id(r), i)] = tr.before
                if i + 1 < r.n_steps:  # the last state is timed in the result's own order: not shared
                    st[(id(r), i + 1)] = tr.after if kept else tr.before
                if i > 0 and not r.steps[i - 1].accepted:
                    st[(id(r), i - 1)] = tr.before  # a refused decision left the state as it was
            for cache in (self._trials, self._states):
                while len(cache) > 8:  # each holds evaluations (timelines): keep few
                    cache.popitem(last=False)
        else:
            self._trials.move_to_end(key)
        return self._trials[key]

    def current_step(self) -> Step | None:
        k = self.state.step
        return self.result.steps[k - 1] if k >= 1 else None

    @property
    def step_plain(self) -> str:
        """The decision on screen as plain text (for notebooks and tests)."""
        return _plain(self.step_text.value + " " + self.residency_text.value)

    def _colors(self) -> dict[str, str]:
        return color_map(self.result.system.device_names)

    def _layout_pos(self, g: hs.OpGraph) -> dict:
        from hetsched.plot.core import layered_layout

        if self._pos is None or self._pos[0] is not g:
            self._pos = (g, layered_layout(g))
        return self._pos[1]

    # -- drawing -------------------------------------------------------------------
    def render(self, r: mp.MappingResult) -> None:
        k = self.state.step
        if not 0 <= k <= r.n_steps:
            raise HetschedError(f"decision {k} refused: the log has decisions 0..{r.n_steps}", field="step")
        step = self.current_step()
        tr = self.trial()
        devices = r.system.device_names
        colors = self._colors()
        g = r.graph
        if step is None:
            self.step_text.value = (f"<b>before the first decision</b>: nothing mapped yet; {r.n_steps} decisions follow ("
                                    + ", ".join(f"{_e(p)}: {n}" for p, n in Counter(stage_of(s) for s in r.steps).items())
                                    + ")")
            self.residency_text.value = ""
            placement: dict[str, str] = {}
        else:
            head = ""
            if k == r.n_steps:  # the final mapping: say where the decisions worth a look are
                remaps = [s for s in r.steps if s.action in ("remap", "remap_group")]
                kept = sum(1 for s in remaps if s.accepted)
                head = (f"<div><b>The final mapping.</b> Of {len(remaps)} remap trials {kept} were kept and "
                        f"{len(remaps) - kept} refused: <i>remap</i> or <i>accepted ▶</i> above walks them. "
                        "The last decision was:</div>")
            self.step_text.value = head + describe_step(step, n_steps=r.n_steps)
            shown = tr.after if tr.after is not None else tr.before
            placement = dict(shown.placement.device) if shown is not None else {}
            self.residency_text.value = _residency_words(tr, placement, g)
        moved = list(tr.moved) if tr is not None else []
        res_ops = []
        if tr is not None:
            res_ops = list(tr.residency.get("weights_add", ())) + list(tr.residency.get("weights_remove", ()))
            for t in list(tr.residency.get("tensors_add", ())) + list(tr.residency.get("tensors_remove", ())):
                p = g.tensors[t].producer if t in g.tensors else None
                if p is not None:
                    res_ops.append(p)
        if step is not None and not moved and step.subject in g.ops and step.action not in ("keep_weights",):
            moved = [step.subject]
        tried = step is not None and not step.accepted and tr is not None and tr.after is not None
        blocks = self.blocks_shown(g)
        what = "each block coloured by the device holding most of its FLOPs" if blocks else "each layer coloured by its device"
        if step is None:
            gtitle = "before the first decision: no layer mapped yet"
        elif tried:
            gtitle = f"decision {k} as tried (refused): {what} in the tried placement"
        else:
            gtitle = f"after decision {k} of {r.n_steps}: {what}"
        if blocks:
            gtitle += " (click a block to open it)"
        if blocks:
            fig = placement_blocks(g, placement, devices, colors=colors, moved=moved, residency=res_ops,
                                   layout=self.block_layout(g), title=gtitle)
        else:
            fig = placement_graph(g, placement, devices, colors=colors, moved=moved, residency=res_ops, title=gtitle,
                                  pos=self._layout_pos(g))
        self.show_figure("graph", fig)
        self.show_figure("gantt", self._gantt_fig(r, step, tr, moved, devices, colors))
        self.show_figure("busy", busy_bars(tr.busy if tr is not None else pd.DataFrame(), devices, colors=colors,
                                           title=("busy time per device, before and after this decision"
                                                  + (" (as tried)" if tried else "")),
                                           before_label="before", after_label="after (as tried)" if tried else "after"))
        self._render_summary(r)

    def after_render(self, r: mp.MappingResult) -> None:
        # the baselines run after the walk's figures have left: the browser draws those meanwhile
        # (a new graph's first view: 0.4 s of mappers on 1k ops), the comparison follows
        compare = self.figure_view("compare")
        missing = any(m not in self._runs for m in BASELINES)
        if missing:
            compare.stale = True
        try:
            self._run_comparison(r)
        finally:
            if missing:
                compare.stale = self.stale
        ckey = (id(r), self.state.metric, self.state.keep_resident, tuple(sorted(self._runs)))
        if ckey != getattr(self, "_compare_key", None):  # a step move leaves the comparison as it is
            with compare.hold_sync():
                self._render_comparison(r)
            self._compare_key = ckey

    def _gantt_fig(self, r, step, tr, moved, devices, colors):
        from hetsched.timeline import make_timeline

        if tr is None:
            return mapping_gantt(make_timeline([]), devices, colors=colors, title="before the first decision: nothing runs yet",
                                 webgl=self._webgl(r))
        ev = tr.after if tr.after is not None else tr.before
        if ev is None:
            return mapping_gantt(make_timeline([]), devices, colors=colors, webgl=self._webgl(r),
                                 title=f"decision {step.index + 1}: nothing tried and nothing mapped yet")
        m = ev.metrics
        nums = f"makespan {format_time_range(m)}, total busy time of all devices {_t(m['total_latency_s'])}"
        if tr.after is None:
            title = f"decision {step.index + 1}: nothing tried; the state before it ({nums})"
        elif not step.accepted:
            title = f"decision {step.index + 1} as tried (refused): {nums}"
        else:
            title = f"after decision {step.index + 1}: {nums}"
        return mapping_gantt(ev.timeline, devices, colors=colors, highlight=moved, title=title, webgl=self._webgl(r))

    @staticmethod
    def _webgl(r: mp.MappingResult) -> bool:
        # fixed per graph (not per state), so every step's Gantt has the same trace types; an op
        # has a compute bar and, often, a transfer: about GANTT_WEBGL_BARS bars from half as many ops
        return r.graph.n_ops > GANTT_WEBGL_BARS // 2

    def _render_summary(self, r: mp.MappingResult) -> None:
        m = r.metrics
        obj = r.params["objective"]
        words = _OBJ_WORDS[obj]
        cf = m.get(f"compute_first_{obj}_s")
        trials = [s for s in r.steps if s.action in ("remap", "remap_group")]
        rel = sum(1 for s in r.steps if s.data.get("relocality") and s.accepted)
        obj_term = " " + term("the patent's system total latency") if obj == "total_latency" else ""
        self.summary.value = (
            f"<b>{_e(r.graph.name)}</b> ({r.graph.n_ops} layers) on {_e(', '.join(r.system.device_names))}: "
            f"{words}{obj_term} "
            f"<b>{_t(m[f'{obj}_s'])}</b> after {r.n_steps} decisions (compute-first alone: {_t(cf)}); "
            f"makespan {format_time_range(m)}; remap trials: {sum(s.accepted for s in trials)} kept, "
            f"{sum(not s.accepted for s in trials)} refused; after kept remaps, {rel} more item(s) kept on-chip "
            f"{term('claim 6')}")

    # -- the comparison --------------------------------------------------------------
    def _row(self, method: str, res: mp.MappingResult, runtime_s: float, keep: bool) -> dict:
        key = (method, id(res), keep)
        if key not in self._rows:
            opt = mp.METHODS[method].optimises if method in mp.METHODS else res.params.get("objective", "total_latency")
            self._rows[key] = mp.comparison_row(res, method, optimises=opt, runtime_s=runtime_s, keep_tensors_resident=keep)
        return self._rows[key]

    def comparison_frame(self, keep_resident: bool | None = None) -> pd.DataFrame:
        """The comparison on screen: this panel's h2h first, then every mapper run so far."""
        r = self.result
        keep = self.state.keep_resident if keep_resident is None else keep_resident
        rows = [self._row(THIS, r, r.metrics.get("h2h_runtime_s", float("nan")), keep)]
        order = BASELINES + [m for ms in BEST.values() for m in ms]
        rows += [self._row(m, *self._runs[m], keep) for m in order if m in self._runs]
        frame = pd.DataFrame(rows)
        frame["text"] = [self._method_label(row) for row in rows]
        return frame

    def _method_label(self, row: dict) -> str:
        m = row["label"]
        if m == THIS:
            return "h2h (this panel)"
        lab = METHOD_LABELS.get(m, m)
        if m.startswith("ilp") and row.get("status"):
            gap = row.get("gap")
            lab += f" ({row['status']}" + (f", gap {gap:.1%}" if row["status"] != "optimal" and gap == gap and gap is not None
                                           else "") + ")"
        return lab

    def _render_comparison(self, r: mp.MappingResult) -> None:
        frame = self.comparison_frame()
        self.comparison = frame
        metric = self.state.metric
        keep = self.state.keep_resident
        title = (f"{dict((k, lab) for lab, k in _METRICS)[metric]} of each mapper (lower is better)"
                 + (": re-timed with every tensor kept on its device" if keep else ""))
        self.show_figure("compare", method_bars(frame, metric, highlight=THIS, title=title))
        self.explain.value = self._explanations(r, frame)
        obj = r.params["objective"]
        have_best = all(m in self._runs for m in BEST[obj])
        self.best_button.disabled = have_best
        self.baselines_button.layout.display = "none" if all(m in self._runs for m in BASELINES) else None
        self.best_button.description = ("search and ILP done" if have_best
                                        else f"find the best mapping (search, then ILP ≤ {ILP_TIME_LIMIT_S:.0f} s)")

    def _explanations(self, r: mp.MappingResult, frame: pd.DataFrame) -> str:
        obj = r.params["objective"]
        okey = f"{obj}_s"
        base = self.comparison_frame(keep_resident=False).set_index("label")
        me = base.loc[THIS]
        lines = [self._best_line(r, base)]
        if any(m not in self._runs for m in BASELINES):
            lines.insert(0, f"<b>Other mappers.</b> On a graph this size ({r.graph.n_ops} ops) HEFT, CPOP, PEFT, "
                            "compute-first and the single devices run on request (seconds each): press <i>compare with "
                            "HEFT, CPOP, PEFT and the single devices</i>.")
        lines.append(
            "<b>What is compared.</b> The <i>total busy time of all devices</i> "
            + term("the patent's objective, its system total latency, claim 5")
            + " is the sum over devices of the time each spends computing and moving its own data; the <i>makespan</i> "
            "is when the last layer finishes. h2h (this panel) minimises "
            + ("the total busy time of all devices" if obj == "total_latency" else "the makespan (H2H's rule)")
            + "; HEFT, CPOP and PEFT minimise the makespan of their own model (data already on the devices, no link "
            "contention); compute-first takes each layer's fastest device alone. Every mapping is then timed by the "
            "same evaluator, so the bars compare, but not every mapper aims at the bar you are looking at.")
        if "heft" in base.index:
            lines.append(self._why_line(r, base, okey))
        moved = me["bytes_moved"]
        tr_share = self._transfer_share(r)
        keep_words = ""
        if self.state.keep_resident:
            now = frame.set_index("label").loc[THIS]
            keep_words = (f" With the round trip off, h2h's {_OBJ_WORDS[obj]} would be {_t(now[okey])} "
                          f"(now {_t(me[okey])}), data moved {format_value(now['bytes_moved'], 'bytes_moved')}; "
                          "the mappers still decided under the round-trip model (memory not checked in this what-if"
                          + (", and h2h's mapping would overflow a device's memory" if now.get("peak_mem_frac", 0) > 1 else "")
                          + ").")
        lines.append(
            "<b>The host round trip.</b> A tensor that is not kept on-chip goes back to host memory and every reader "
            "off the host reads it back, even on the producer's own device (the patent's model: intermediate results "
            f"live in host memory {term('claim 11')}). h2h's mapping moves {format_value(moved, 'bytes_moved')} over the links"
            + (f"; {tr_share:.0%} of the time its devices and links are busy is data transfer" if tr_share is not None else "")
            + ". Tick <i>keep tensors resident</i> to re-time every mapping with all tensors kept on their device."
            + keep_words)
        descr = "".join(f"<li><b>{_e(METHOD_LABELS.get(m, m))}</b>: {small_terms(_e(mp.METHODS[m].description))}</li>"
                        for m in frame["label"] if m in mp.METHODS)
        lines.append(f"<details><summary>What each mapper does</summary><ul>{descr}</ul></details>")
        return "".join(f"<div style='margin:0.3em 0'>{ln}</div>" for ln in lines if ln)

    def _best_line(self, r: mp.MappingResult, base: pd.DataFrame) -> str:
        obj = r.params["objective"]
        okey = f"{obj}_s"
        mine = float(base.loc[THIS, okey])
        cands = [m for m in BEST[obj] if m in base.index]
        if not cands:
            return ("<b>How far is the patent from the best mapping?</b> Press <i>find the best mapping</i> "
                    f"(the improvement search, then the ILP for up to {ILP_TIME_LIMIT_S:.0f} s).")
        best = min(cands, key=lambda m: float(base.loc[m, okey]))
        bval = float(base.loc[best, okey])
        line = (f"<b>How far is the patent from the best mapping?</b> h2h (this panel) {_t(mine)}, best found "
                f"{_t(bval)} ({_e(self._method_label(base.loc[best].to_dict() | {'label': best}))}): "
                + (f"h2h is {mine / bval - 1:.1%} above it" if mine >= bval else f"h2h is {1 - mine / bval:.1%} below it")
                + f" in {_OBJ_WORDS[obj]}")
        ilp = next((m for m in cands if m.startswith("ilp")), None)
        if ilp is not None:
            st = base.loc[ilp, "status"]
            bound = base.loc[ilp].get("bound_s")
            if st == "optimal":
                line += "; the ILP proved that mapping optimal"
            elif bound is not None and bound == bound and bound > 0:
                line += f"; the optimum is at least {_t(bound)} (ILP bound), so h2h is at most {mine / bound - 1:.1%} above it"
        return line + "."

    def _why_line(self, r: mp.MappingResult, base: pd.DataFrame, okey: str) -> str:
        mine, heft = float(base.loc[THIS, okey]), float(base.loc["heft", okey])
        obj = r.params["objective"]
        ratio = mine / heft if heft else float("nan")
        split = lambda res: ", ".join(f"{n} on {_e(d)}" for d, n in Counter(res.placement.device.values()).most_common(3))  # noqa: E731
        heft_res = self._runs["heft"][0]
        trials = [s for s in r.steps if s.action in ("remap", "remap_group")]
        if not ratio > 1.1:
            return (f"<b>h2h against HEFT.</b> Here h2h's {_OBJ_WORDS[obj]} is {ratio:.2f}× HEFT's "
                    f"({_t(mine)} vs {_t(heft)}): on this instance the patent's greedy phases do as well as or better "
                    "than list scheduling on this measure.")
        return (f"<b>Why is h2h {ratio:.1f}× HEFT here</b> ({_t(mine)} vs {_t(heft)} in {_OBJ_WORDS[obj]})? "
                f"Compute-first puts each layer where it alone runs fastest with memory cleared, one layer at a time "
                f"(h2h ends with {split(r)}; HEFT with {split(heft_res)}), so neighbouring layers land on different "
                f"devices and data crosses links (h2h moves {format_value(base.loc[THIS, 'bytes_moved'], 'bytes_moved')}, "
                f"HEFT {format_value(base.loc['heft', 'bytes_moved'], 'bytes_moved')}). The remap walk then moves one "
                f"layer at a time {term('claim 3')} and keeps a move only if it pays alone ({sum(s.accepted for s in trials)} of "
                f"{len(trials)} kept): moving a single layer out of a chain that shares a device adds transfers, so the "
                "walk stops before it reaches the mapping that moves the whole chain.")

    def _transfer_share(self, r: mp.MappingResult) -> float | None:
        tl = r.timeline
        if not len(tl):
            return None
        dur = tl["end_s"] - tl["start_s"]
        busy = float(dur[tl["kind"].isin(["compute", "transfer"])].sum())
        return float(dur[tl["kind"] == "transfer"].sum()) / busy if busy > 0 else None

    def download_items(self, r):
        frame = self.comparison if self.comparison is not None else self.comparison_frame()
        return [(hs.timeline.to_chrome_trace(r.timeline), "mapping_trace.json"), (csv_safe(r.timeline), "mapping_timeline.csv"),
                (csv_safe(r.steps_frame()), "mapping_steps.csv"),
                (csv_safe(pd.DataFrame({"op": list(r.placement.device), "device": list(r.placement.device.values())})),
                 "mapping_placement.csv"),
                (csv_safe(frame), "mapping_comparison.csv")]
