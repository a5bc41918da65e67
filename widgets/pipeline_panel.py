"""PipelinePanel (pipeline parallelism, the interleaved pipeline patent): a model split over a machine, two schedules side by
side, the patent's cache queues, and a walk through the schedule one action at a time.

Where the costs come from (``source``):

* ``"model"`` (default): a training graph is cut into ``p * v`` contiguous stages over the ranks
  of a machine and each stage is priced on its rank's device (:func:`hetsched.pipeline.simulate_model`:
  :func:`~hetsched.pipeline.split_stages`, then :func:`~hetsched.pipeline.simulate`); the link
  times come from the system. The model is the dashboard's graph when it is a training graph,
  else the bundled :data:`hetsched.pipeline.DEFAULT_MODEL` (GPT-2 small over four A100s, two V100s
  and two Alveo U280s), and the panel says which and why. The split and each stage's F, I, W and
  send times are shown.
* ``"numbers"``: the textbook setting of the Zero Bubble playground: one rank's share of the model
  takes ``F``, ``B`` (and ``W`` of it for split backwards) milliseconds, divided over the
  schedule's chunks (:meth:`hetsched.pipeline.StageCosts.per_rank`), one link latency.

Schedules A and B (:data:`hetsched.pipeline.SCHEDULES`: GPipe, 1F1B, interleaved 1F1B with the
patent's grouping by default, ZB-H1/H2/V, interleaved zero bubble, DualPipeV...) run on the same
model and are drawn on one time axis (labelled cells ``0F3``, later chunks lighter, F/B/I/W in
distinct colours). Controls a schedule does not use are disabled (``v`` for a schedule with fixed
chunks, grouping, the W time) and a line says which schedule each applies to.

The patent's view (the interleaved pipeline patent, ``docs/patents.md``, claims 1-13), shown when A or B
is the patent's schedule: ``r = m mod p``, the first group of ``p + r`` micro-batches, the warm-up
forwards per rank, the send interval, and its forward/backward cache queues by its literal rule
(:meth:`~hetsched.pipeline.PipelineResult.patent`); beside them the simulator's queues as the run
used them (``queue_trace``: the sender's cache under lock-step p2p, the receive buffers with
``cache="receiver"``), the time senders were blocked, and the messages that waited.

The best schedule for this split (:func:`hetsched.pipeline.synthesize`, on the *synthesize* button): a
search of each rank's order of F, B (or I and W) for schedule A's instance (its split's costs, p, v, m and
placement), under a memory cap (none, what A holds on each rank, or bytes), compared with every named
schedule that applies and with the lower bound (:func:`~hetsched.pipeline.compare_synthesis`): makespan
bars with the bound as a line, activation memory per rank with the cap, and the table. A second walker
steps through the synthesis's decisions (``result.steps``: the bound, each named schedule tried, each
list-scheduling rule and the winning rule's choices, the local search's moves, the MILP, the result) and
draws the best schedule so far (``replay``). Once asked for, the synthesis follows the inputs while the
search is the heuristic (a fraction of a second); an exact search (``milp``, ``auto``) runs on a click
only. *export for torch (CSV)* downloads the synthesized schedule as torch's compute-only CSV
(:func:`~hetsched.pipeline.to_torch_csv`), which ``_PipelineScheduleRuntime`` loads and runs.

A :class:`~hetsched.widgets.walker.DecisionWalker` walks schedule A's action starts in time order
(``result.steps``): step ``k`` shows the instant action ``k - 1`` starts, in words (who starts
what, why it waited, what entered or left a cache queue, the patent's rule at that micro-step),
a per-rank table for A and B under the Gantts (:meth:`~hetsched.pipeline.PipelineResult.replay`)
and a cursor on both Gantts and on the queue chart. It jumps to warm-up / steady / cool-down, to the next action
of a rank, and to the next cache-queue change. A step changes only the cursor shapes and the text.

>>> p = PipelinePanel(source="numbers")
>>> p.state.schedule, p.state.schedule_b, p.state.grouping
('interleaved_1f1b', '1f1b', 'paddle')
>>> bubble = p.result.a.metrics["bubble_fraction"]
>>> p.state.m = 16; p.result.a.metrics["bubble_fraction"] < bubble     # more micro-batches, fewer bubbles
True
>>> p.state.m = 0; "m (micro-batches) = 0 is out of range: allowed 1 to 256" in p.message.value
True
"""

from __future__ import annotations

import html
import math
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import ipywidgets as W
import numpy as np
import pandas as pd
import traitlets

import hetsched.pipeline as pp
from hetsched.cost import cost_key
from hetsched.errors import HetschedError
from hetsched.plot import format_time_range, format_value
from hetsched.plot.core import gantt, wrap_title
from hetsched.plot.pipeline import (cache_depth, patent_queue_figure, rank_memory_figure, schedule_gantt, stage_costs_figure,
                                    synthesis_bars)
from hetsched.registry import label
from hetsched.results import Step, compare_results

from .base import Panel, Session, busy_html, download_link, error_html, link_clamped
from .walker import DecisionWalker

__all__ = ["PipelinePanel", "PipelineState", "PipelineView", "SynthesisView", "schedule_name"]

_SCHEDULES = sorted(pp.SCHEDULES)
_CACHES = ["sender", "receiver", "none"]
#: title characters per line of a figure in half the panel (hetsched.plot.core.TITLE_CHARS is for full width)
HALF_TITLE_CHARS = 55
_P = pp.PARAMS
#: the model choice that follows the dashboard's loaded graph
SESSION = "session"
_KIND_WORDS = {"F": "forward", "B": "backward", "I": "input-gradient backward", "W": "weight-gradient backward"}
#: the panel's number boxes in the units typed (ms, MiB) -> the core's parameter (:data:`hetsched.pipeline.PARAMS`,
#: seconds and bytes) and the factor from one to the other
_TYPED = {"f_ms": ("f_s", 1e-3), "b_ms": ("b_s", 1e-3), "w_ms": ("w_s", 1e-3), "latency_ms": ("latency_s", 1e-3),
          "activation_MiB": ("activation_bytes", 2.0**20), "overhead_ms": ("overhead_s", 1e-3)}
_TYPED["memory_cap_MiB"] = ("memory_cap_bytes", 2.0**20)
#: the synthesis's memory-cap choices on screen (the core's None is "none" in the trait, as a dropdown needs a value)
_CAPS = [("no cap", "none"), ("what schedule A holds, per rank", "schedule_a"), ("the same on every rank", "bytes")]
#: the synthesis's phases (``data["phase"]``) in words, for the walker's jumps
_SYNTH_PHASES = {"start": "start", "bound": "lower bound", "warm_start": "named schedules", "list": "list scheduling",
                 "search": "local search", "milp": "MILP", "result": "result", "final": "end"}
#: a synthesis step's action in words (the walker's list)
_SYNTH_ACTIONS = {"warm_start": "named schedule", "list": "list rule", "choose": "choose", "bound": "lower bound",
                  "fill": "fill a gap", "milp": "MILP", "search": "search ends", "restart": "restart"}
_SYNTH_FIGURES = ("synth_bars", "synth_memory", "synth_gantt")


def _bundled_training_graphs() -> list[str]:
    """Bundled graphs a pipeline can split: the zoo's training graphs (``*_train_b*``)."""
    from hetsched.io import bundled_graphs

    return [n for n in bundled_graphs() if "_train_b" in n]


def _bundled_systems() -> list[str]:
    from hetsched.io.systems import bundled_systems

    names = bundled_systems()
    default = pp.DEFAULT_MODEL["system"]
    return [default] + [n for n in names if n != default]


def schedule_name(key: str) -> str:
    """A schedule's name in plain words, from the core (:func:`hetsched.registry.label`).

    >>> schedule_name("interleaved_1f1b[paddle]")
    'Interleaved 1F1B'
    """
    key = key.split("[")[0]
    return label(pp.SCHEDULES[key]) if key in pp.SCHEDULES else key



_SCHEDULE_KEY = re.compile(r"\b([a-z0-9][a-z0-9_]*)(?:\[(\w+)\])?")
_LIST_RULE = re.compile(r"\blist\[([^\]]*)\]")


def _plain_schedules(text: str) -> str:
    """Schedule keys and list-scheduling rules in a synthesis's words, as a person reads them.

    >>> _plain_schedules("zb_h1 (named schedule): not better than interleaved_1f1b[paddle] or 1f1b")
    'ZB-H1 (named schedule): not better than Interleaved 1F1B (paddle) or 1F1B'
    """
    text = _LIST_RULE.sub(lambda mt: f"list scheduling ({mt.group(1).replace('_', ' ')})", text)
    return _SCHEDULE_KEY.sub(lambda mt: (schedule_name(mt.group(1)) + (f" ({mt.group(2)})" if mt.group(2) else ""))
                             if mt.group(1) in pp.SCHEDULES else mt.group(0), text)


def _is_training(graph: Any) -> bool:
    """A training graph has backward ops (``attrs["phase"] == "backward"``, as the zoo writes them)."""
    return any(o.attrs.get("phase") == "backward" for o in graph.ops.values())


class PipelineState(traitlets.HasTraits):
    source = traitlets.Enum(list(_P["source"].options), default_value=_P["source"].default)
    model = traitlets.Unicode(SESSION)  # SESSION: the dashboard's graph; else a bundled training graph
    system = traitlets.Unicode(_P["system"].default)
    schedule = traitlets.Enum(_SCHEDULES, default_value=_P["schedule"].default)
    schedule_b = traitlets.Enum(_SCHEDULES, default_value="1f1b")
    p = traitlets.Int(_P["p"].default)
    v = traitlets.Int(_P["v"].default)
    m = traitlets.Int(_P["m"].default)
    grouping = traitlets.Enum(list(_P["grouping"].options), default_value=_P["grouping"].default)  # the patent's
    # numbers only: one rank's share of the model, in ms (the playground's F, B, W; W is part of B)
    f_ms = traitlets.Float(_P["f_s"].default / _TYPED["f_ms"][1])
    b_ms = traitlets.Float(_P["b_s"].default / _TYPED["b_ms"][1])
    w_ms = traitlets.Float(_P["w_s"].default / _TYPED["w_ms"][1])
    latency_ms = traitlets.Float(_P["latency_s"].default / _TYPED["latency_ms"][1])
    activation_MiB = traitlets.Float(_P["activation_bytes"].default / _TYPED["activation_MiB"][1])  # one stage output, one micro-batch
    overhead_ms = traitlets.Float(_P["overhead_s"].default / _TYPED["overhead_ms"][1])  # added to every compute action
    # PaddlePaddle's blocking exchange, as the patent runs: early outputs wait in the cache queues
    lockstep = traitlets.Bool(_P["lockstep"].default)
    cache = traitlets.Enum(_CACHES, default_value=_P["cache"].default or "none")
    step = traitlets.Int(0)  # view: 0 = before anything runs, k = the start of A's action k - 1 (time order)
    # schedule synthesis (pp.synthesize) of A's instance, asked for with the "synthesize" button: these only
    # redraw (VIEW_TRAITS); A and B are not recomputed
    synthesis = traitlets.Bool(False)  # on: the section shows a synthesis, re-run on changes while the search is the heuristic
    method = traitlets.Enum(list(_P["method"].options), default_value=_P["method"].default)
    memory_cap = traitlets.Enum([v for _w, v in _CAPS], default_value=_P["memory_cap"].default or "none")
    memory_cap_MiB = traitlets.Float(_P["memory_cap_bytes"].default / _TYPED["memory_cap_MiB"][1])
    time_limit_s = traitlets.Float(_P["time_limit_s"].default)
    split_backward = traitlets.Bool(_P["split_backward"].default)
    synth_step = traitlets.Int(0)  # view: 0 = before the first decision, k = after the synthesis's decision k - 1


@dataclass(frozen=True)
class PipelineView:
    """What the panel shows: schedule A's and B's simulations (and their splits in model mode)."""

    a: pp.PipelineResult
    b: pp.PipelineResult
    split_a: Any = None  # StageSplit, model mode
    split_b: Any = None
    graph_name: str = ""
    system_name: str = ""
    devices: tuple = ()
    note: str = ""  # which model and why (plain text)

    @property
    def t_max_s(self) -> float:
        return max(self.a.metrics["makespan_s"], self.b.metrics["makespan_s"])

    @cached_property
    def patents(self) -> dict[str, dict]:
        """``{"A": a.patent(), "B": b.patent()}``, computed once (a step reads them again)."""
        return {"A": self.a.patent(), "B": self.b.patent()}

    def patent_result(self) -> tuple[str, pp.PipelineResult] | None:
        """``("A", result)`` or ``("B", result)``: the run of the patent's schedule (A first), else ``None``."""
        for lab, r in (("A", self.a), ("B", self.b)):
            if self.patents[lab]["applies"]:
                return lab, r
        return None


@dataclass(frozen=True)
class SynthesisView:
    """A synthesis the panel shows: the core's result for A's instance, its comparison, what it was asked."""

    result: pp.SynthesisResult
    table: pd.DataFrame  # pp.compare_synthesis(result=...): named rows, the synthesized row, the bound row
    view: Any  # the PipelineView whose schedule A's instance it searched
    key: tuple  # the synthesis settings it answers
    cap_bytes: Any  # what the cap was, per rank (None: no cap)
    elapsed_s: float
    t_max_s: float  # the time axis of the walker's Gantt: the slowest incumbent of the walk
    runs: OrderedDict = field(default_factory=OrderedDict, compare=False, repr=False)  # orders -> simulation (the walk)

    @cached_property
    def result_orders(self) -> tuple:
        return tuple(self.result.schedule.to_text())

    def run_of(self, orders: tuple) -> pp.PipelineResult:
        """The simulated run of an incumbent's per-rank orders (a few kept: stepping revisits them)."""
        if orders == self.result_orders:
            return self.result  # the result is the simulator's run of its own schedule already
        run = self.runs.get(orders)
        if run is None:
            r = self.result
            s = r.schedule
            sched = pp.Schedule.from_text(list(orders), p=s.p, v=s.v, m=s.m, style=s.style)
            run = self.runs[orders] = pp.simulate(sched, costs=r.params["costs"], comm=r.params["comm"])
            while len(self.runs) > 8:
                self.runs.popitem(last=False)
        else:
            self.runs.move_to_end(orders)
        return run


class _Walk:
    """Cursors for walking schedule A's steps (the core's ``result.steps``: action starts by start time, then
    rank): each step's start time, and the walker positions at which a cache queue changed."""

    def __init__(self, r: pp.PipelineResult) -> None:
        #: the core's steps, walked as they are (data: rank, action, phase, micro_step)
        self.steps = r.steps
        self.starts = np.asarray(r.start_s, float)[r.step_order]
        # walker positions (k + 1) at which a cache queue has changed: the first start at or after each change
        qt = r.queue_trace()
        ev = np.unique(qt["time_s"].to_numpy(float)) if len(qt) else np.zeros(0)
        self.queue_trace = qt
        n = len(self.starts)
        self.queue_steps = sorted({int(min(j, n - 1)) + 1 for j in np.searchsorted(self.starts, ev, side="left")}) if n else []


class PipelinePanel(Panel):
    """A model's pipeline over a machine, two schedules compared, the patent's queues, one step at a time.

    Parameters
    ----------
    session : Session, optional
        The dashboard's session: the panel splits its graph when it is a training graph, over the
        session's machine (the machine bar; without one, this tab's own, ``state.system``: each rank
        takes a device of it, :func:`hetsched.pipeline.default_devices`).
    source : {"model", "numbers"}, optional
        Where the costs come from (default ``pp.PARAMS["source"]``).
    """

    TAB = "pipeline"
    #: the presentation layout shows both schedules, A over B: the tab compares them
    MAIN_FIGURES = ("gantt_a", "gantt_b")
    VIEW_TRAITS = ("step", "synthesis", "method", "memory_cap", "memory_cap_MiB", "time_limit_s", "split_backward", "synth_step")
    MACHINE_BAR = True

    def __init__(self, session: Session | None = None, *, source: str | None = None, **kw: Any) -> None:
        state = PipelineState()
        if source is not None:
            state.source = source
        style = {"description_width": "initial"}
        self._graphs: dict[str, Any] = {}
        self._runs: OrderedDict = OrderedDict()  # small LRU of ModelRuns (switching A back and forth)
        self._models = models = _bundled_training_graphs()
        src = W.ToggleButtons(options=[("a model on a machine", "model"), ("numbers only", "numbers")],
                              description="costs from", style=style)
        model = W.Dropdown(options=[("the dashboard's graph (if training)", SESSION)] + [(n, n) for n in models],
                           description="model", style=style, layout=W.Layout(width="420px"))
        self._systems = _bundled_systems()
        sched_opts = [(schedule_name(n), n) for n in _SCHEDULES]
        sched = W.Dropdown(options=sched_opts, description="schedule A", style=style)
        sched_b = W.Dropdown(options=sched_opts, description="schedule B", style=style)
        grouping = W.Dropdown(options=[("paddle (the patent's)", "paddle")] + [(g, g) for g in sorted(pp.GROUPINGS) if g != "paddle"],
                              description="grouping", style=style, layout=W.Layout(width="260px"))
        # plain text boxes: any value the user types reaches the checks and is refused with a reason
        p = W.IntText(description=_P["p"].words, style=style, layout=W.Layout(width="150px"), tooltip=_P["p"].help)
        v = W.IntText(description=_P["v"].words, style=style, layout=W.Layout(width="170px"), tooltip=_P["v"].help)
        m = W.IntSlider(min=_P["m"].min, max=_P["m"].max, description=_P["m"].words, style=style, continuous_update=False)
        f = W.FloatText(step=0.1, description="F per rank (ms)", style=style, layout=W.Layout(width="190px"))
        b = W.FloatText(step=0.1, description="B per rank (ms)", style=style, layout=W.Layout(width="190px"))
        w = W.FloatText(step=0.1, description="W of B (ms)", style=style, layout=W.Layout(width="170px"))
        lat = W.FloatText(step=0.05, description="p2p latency (ms)", style=style, layout=W.Layout(width="190px"))
        act = W.FloatText(description="activation (MiB)", style=style, layout=W.Layout(width="190px"))
        ovh = W.FloatText(step=0.1, description="overhead per action (ms)", style=style, layout=W.Layout(width="230px"))
        lock = W.Checkbox(description="lock-step p2p (PaddlePaddle's blocking exchange)", indent=False, layout=W.Layout(width="auto"))
        cache = W.ToggleButtons(options=[("sender (the patent's)", "sender"), ("receiver", "receiver"), ("none", "none")],
                                description="cache queue", style=style)
        for ctl, name in ((src, "source"), (sched, "schedule"), (sched_b, "schedule_b"),
                          (grouping, "grouping"), (lock, "lockstep"), (cache, "cache")):
            W.link((state, name), (ctl, "value"))
        # numbers and names: the trait wins, so NaN, an out-of-range value or a name the dropdown lacks is
        # reported and taken back, never clamped or looped back (a plain link raised "Invalid selection")
        for ctl, name in ((p, "p"), (v, "v"), (m, "m"), (f, "f_ms"), (b, "b_ms"), (w, "w_ms"), (lat, "latency_ms"),
                          (act, "activation_MiB"), (ovh, "overhead_ms"), (model, "model")):
            link_clamped(state, name, ctl)
        self.applies = W.HTML()
        self.walker = DecisionWalker(state, "step", description="time step", group=lambda s: s.data["rank"],
                                     group_label="rank", label=self._step_label, accepted_jumps=False)
        # every action start is "accepted": those jumps mean nothing here; queue changes do
        self.prev_queue, self.next_queue = self.walker.add_jumps(
            "cache change", "step at which a cache queue changed", self.jump_to_cache)
        self.step_text = W.HTML(layout=W.Layout(min_height="3em"))  # the step in plain words
        self.rank_text = W.HTML()  # what each rank runs, holds and has cached at that instant
        self.summary = W.HTML()
        self.patent_text = W.HTML()
        self.messages_text = W.HTML()
        self.split_text = W.HTML()
        self.controls = W.VBox([W.HBox([src, model], layout=W.Layout(flex_flow="row wrap")),
                                W.HBox([sched, sched_b, grouping], layout=W.Layout(flex_flow="row wrap")),
                                W.HBox([p, v, m], layout=W.Layout(flex_flow="row wrap")),
                                W.HBox([f, b, w, lat, act, ovh], layout=W.Layout(flex_flow="row wrap")),
                                W.HBox([lock, cache], layout=W.Layout(flex_flow="row wrap", align_items="center")),
                                self.applies])
        self.control_widgets = {"source": src, "model": model, "schedule": sched, "schedule_b": sched_b,
                                "grouping": grouping, "p": p, "v": v, "m": m, "f_ms": f, "b_ms": b, "w_ms": w,
                                "latency_ms": lat, "activation_MiB": act, "overhead_ms": ovh, "lockstep": lock, "cache": cache}
        state.observe(lambda _c: self._sync_controls(), names=["source", "schedule", "schedule_b", "lockstep", "cache"])
        super().__init__(state, session=session, follow_session=True, autostart=False, **kw)
        self.patent_box = W.VBox([W.HTML("<h4 style='margin:0.6em 0 0.2em'>The patent's cache queues</h4>"), self.patent_text,
                                  W.HBox([W.Box([self.figure_view(n)], layout=W.Layout(width="50%", min_width="0"))
                                          for n in ("patent", "queues")], layout=W.Layout(width="100%")),
                                  self.messages_text])
        self.split_box = W.VBox([W.HTML("<h4 style='margin:0.6em 0 0.2em'>The split: stages and their costs</h4>"),
                                 self.figure_view("stages"), self.split_text])
        self.children = [self.machine_bar, self.controls, self.status, self.summary, self.walker, self.step_text,
                         self.figure_view("gantt_a"), self.figure_view("gantt_b"), self.rank_text, self.patent_box,
                         self.split_box, self.download_area]
        self._build_synthesis(style)
        self._sync_controls()
        self._start()

    # -- controls that apply ----------------------------------------------------------
    def _sync_controls(self) -> None:
        """Disable what the chosen schedules and source do not use, and say so in one line."""
        st, c = self.state, self.control_widgets
        info = {lab: pp.SCHEDULE_INFO[n] for lab, n in (("A", st.schedule), ("B", st.schedule_b))}
        names = {"A": schedule_name(st.schedule), "B": schedule_name(st.schedule_b)}
        uses_v = [lab for lab, i in info.items() if i["v"] is None]
        uses_g = [lab for lab, i in info.items() if "grouping" in i["options"]]
        uses_w = [lab for lab, i in info.items() if i["split_backward"]]
        numbers = st.source == "numbers"
        want = {"model": not numbers, "v": bool(uses_v), "grouping": bool(uses_g),
                "f_ms": numbers, "b_ms": numbers, "w_ms": numbers and bool(uses_w), "latency_ms": numbers,
                "activation_MiB": numbers}
        for name, on in want.items():
            if c[name].disabled == on:
                c[name].disabled = not on

        def who(labs: list[str]) -> str:
            return " and ".join(f"{lab} ({html.escape(names[lab])})" for lab in labs) if labs else "neither schedule"

        fixed = list(dict.fromkeys(f"{html.escape(names[lab])} runs {i['v']} chunk{'s' if i['v'] > 1 else ''} per rank"
                                   for lab, i in info.items() if i["v"] is not None))
        parts = [f"v applies to {who(uses_v)}" + (f" ({'; '.join(fixed)})" if fixed else ""),
                 f"grouping to {who(uses_g)}"]
        if numbers:
            parts.append(f"W to {who(uses_w)} (split backward: B = I + W)" if uses_w else "W to neither (no split backward)")
        else:
            parts.append("F, B, W, latency and activation come from the model and the machine")
        if not st.lockstep and st.cache == "sender":
            parts.append("the sender's cache only holds outputs under lock-step p2p")
        self.applies.value = "<span style='color:#444'>" + "; ".join(parts) + ".</span>"

    # -- inputs ---------------------------------------------------------------------------
    def check_inputs(self) -> None:
        """Refuse out-of-range inputs with the reason: the value is taken back, the last good result stays."""
        st = self.state
        uses_v = any(pp.SCHEDULE_INFO[n]["v"] is None for n in (st.schedule, st.schedule_b))
        # the static part: the core's bounds (v only where a schedule uses it; the typed costs only with numbers)
        values = {"p": st.p, **({"v": st.v} if uses_v else {}), "m": st.m}
        typed = ["overhead_ms"] + (["f_ms", "b_ms", "w_ms", "latency_ms", "activation_MiB"] if st.source == "numbers" else [])
        values.update({_TYPED[t][0]: getattr(st, t) * _TYPED[t][1] for t in typed})
        self.check_params(pp.PARAMS, values, fields={_TYPED[t][0]: t for t in typed})
        if st.source == "numbers" and st.w_ms > st.b_ms and any(pp.SCHEDULE_INFO[n]["split_backward"] for n in (st.schedule, st.schedule_b)):
            raise HetschedError(f"the weight-gradient time W ({st.w_ms:g} ms) is part of the backward B ({st.b_ms:g} ms) "
                                "and cannot exceed it", field="w_ms")
        if st.model != SESSION and st.model not in self._models:
            raise HetschedError(f"unknown model {st.model!r}: pick a bundled training graph", field="model")
        if st.system not in self._systems:
            raise HetschedError(f"unknown machine {st.system!r}: pick a bundled system", field="system")
        self._check_step(len(self._walk.steps) if self.result is not None else None)
        self._check_synthesis()

    def _model_graph(self) -> tuple[Any, str]:
        """The graph to split and, in words, why that one."""
        from hetsched.whatif import resolve_graph

        st = self.state
        name = st.model
        if name == SESSION:
            g = self.session.graph
            if g is not None and _is_training(g):
                return g, f"the dashboard's graph {g.name}"
            name = pp.DEFAULT_MODEL["graph"]
            why = ("no graph is loaded" if g is None else
                   f"the dashboard's graph {g.name} has no backward ops (it is not a training graph)")
            note = f"{why}, so the bundled {name} is split; load a training graph (*_train_*) or pick a model to split another"
        else:
            note = f"the bundled training graph {name}"
        if name not in self._graphs:
            self._graphs[name] = resolve_graph(name)
        return self._graphs[name], note

    def _options(self, name: str) -> tuple[int | None, dict]:
        st = self.state
        info = pp.SCHEDULE_INFO[name]
        v = None if info["v"] is not None else st.v
        return v, ({"grouping": st.grouping} if "grouping" in info["options"] else {})

    def _model_run(self, name: str, graph: Any, system: Any):
        st = self.state
        v, opts = self._options(name)
        cache = None if st.cache == "none" else st.cache
        # the graph and system themselves (a freed id can come back, a what-if copy keeps the name), the
        # graph's version (edits in place) and the session's cost (a new one prices the stages anew)
        key = (graph, graph.version, system, cost_key(self.cost), name, st.p, v, st.m, opts.get("grouping"), st.lockstep, cache, st.overhead_ms)
        run = self._runs.get(key)
        if run is None:
            run = pp.simulate_model(graph, system, p=st.p, v=v, m=st.m, schedule=name,
                                    grouping=opts.get("grouping"), comm={"lockstep": st.lockstep}, cache=cache,
                                    overhead_s=st.overhead_ms * 1e-3, cost=self.cost, fit_memory=False)
            self._runs[key] = run
            while len(self._runs) > 6:
                self._runs.popitem(last=False)
        return run

    def _numbers_run(self, name: str) -> pp.PipelineResult:
        st = self.state
        v, opts = self._options(name)
        sched = pp.make_schedule(name, st.p, v, st.m, **opts)
        split = pp.SCHEDULE_INFO[name]["split_backward"]
        costs = pp.StageCosts.per_rank(f_s=st.f_ms * 1e-3, b_s=st.b_ms * 1e-3, w_s=st.w_ms * 1e-3 if split else None,
                                       chunks=sched.v, activation_bytes=st.activation_MiB * 2**20, overhead_s=st.overhead_ms * 1e-3)
        return pp.simulate(sched, costs=costs, comm={"latency_s": st.latency_ms * 1e-3, "lockstep": st.lockstep},
                           cache=None if st.cache == "none" else st.cache)

    # -- the machine ---------------------------------------------------------------------------
    def machine(self):
        """The session's machine (the machine bar), else this tab's own (``state.system``, a bundled machine)."""
        if self.session.system is not None:
            return self.session.system
        from hetsched.whatif import resolve_system

        own = self.__dict__.get("_own_machine")
        if own is None or own[0] != self.state.system:
            own = self._own_machine = (self.state.system, resolve_system(self.state.system))
        return own[1]

    def own_machine_name(self) -> str:
        return self.state.system

    # -- Panel ------------------------------------------------------------------------------
    def _on_session(self, change) -> None:
        # the graph (while the panel splits the dashboard's graph), the machine and the cost (while it prices a model)
        name = change["name"]
        if self.state.source == "model" and (name in ("cost", "system") or name == "graph" and self.state.model == SESSION):
            super()._on_session(change)

    def compute(self) -> PipelineView:
        st = self.state
        if st.source == "numbers":
            return PipelineView(self._numbers_run(st.schedule), self._numbers_run(st.schedule_b))
        graph, note = self._model_graph()
        system = self.machine()
        ra, rb = self._model_run(st.schedule, graph, system), self._model_run(st.schedule_b, graph, system)
        moved = ra.split.params.get("devices_note")
        if moved:  # a machine with a device that runs only some ops: the ranks went elsewhere (not a refusal)
            note += f". Ranks moved: {moved}"
        over = ra.split.params.get("over_memory") or rb.split.params.get("over_memory")
        if over:  # a model too big for the machine: its fastest split, over memory, and why (not nothing)
            note += f". No split fits memory, so the fastest is shown anyway: {over}"
        return PipelineView(ra.result, rb.result, ra.split, rb.split, graph.name, system.name,
                            tuple(ra.split.params["devices"]), note)

    def on_result(self, r: PipelineView) -> None:
        self._walk = _Walk(r.a)
        self._starts_b = np.sort(np.asarray(r.b.start_s, float))
        # view traits set here do not redraw on their own (Panel.on_result)
        self.walker.set_steps(self._walk.steps)
        on = bool(self._walk.queue_steps)
        self.prev_queue.disabled = self.next_queue.disabled = not on

    def jump_to_cache(self, direction: int = +1) -> bool:
        """Move to the next (``+1``) or previous (``-1``) step at which a cache queue changed."""
        qs = self._walk.queue_steps if self.result is not None else []
        k = self.state.step
        target = next((j for j in qs if j > k), None) if direction > 0 else next((j for j in reversed(qs) if j < k), None)
        if target is None:
            return False
        self.state.step = target
        return True

    def moment(self) -> tuple[float, dict, dict]:
        """``(time_s, state of A, state of B)`` at the current step (``replay`` of each result)."""
        r = self.result
        n = len(self._walk.steps)
        k = min(max(self.state.step, 0), n) - 1  # the action whose start is shown (-1: before anything)
        sa = r.a.replay(k)
        t = sa["time_s"]
        if k < 0:
            return t, sa, r.b.replay(-1)
        kb = int(np.searchsorted(self._starts_b, t, side="right")) - 1
        return t, sa, r.b.replay(max(-1, min(kb, len(self._starts_b) - 1)))

    def _step_label(self, s: Step) -> str:
        """One line of the step list."""
        return f"· {s.subject} on rank {s.data['rank']} at {format_value(s.before, '_s')} · {s.data['phase']}"

    # -- drawing ------------------------------------------------------------------------------
    def _title(self, r: PipelineView, lab: str) -> str:
        res = r.a if lab == "A" else r.b
        s, m = res.schedule, res.metrics
        patent = " (the patent's)" if r.patents[lab]["applies"] else ""
        return (f"{lab}: {schedule_name(s.name)}{patent} (p={s.p}, v={s.v}, m={s.m}): "
                f"makespan {format_time_range(m)}, idle {m['bubble_fraction']:.0%} of rank-time")

    def _show(self, name: str, fig: Any, fresh: bool) -> None:
        """Show ``fig``; a new result sends a new base, so a later time step's patch is the cursor alone
        (a patch is always against the base: after a few input changes it could otherwise carry
        most of a figure on every step click)."""
        self.figure_view(name).show(fig, force_spec=fresh)

    def render(self, r: PipelineView) -> None:
        if getattr(self, "_drawn", None) is r and self.state.step == getattr(self, "_drawn_step", None):
            self._render_synthesis_step()  # a synthesis setting or its walker moved: A and B stay as they are
            return
        t = self.moment()[0]
        cursor = t if self.state.step > 0 else None
        fresh = getattr(self, "_drawn", None) is not r
        self._show("gantt_a", schedule_gantt(r.a, t_max_s=r.t_max_s, cursor_s=cursor, title=self._title(r, "A")), fresh)
        self._show("gantt_b", schedule_gantt(r.b, t_max_s=r.t_max_s, cursor_s=cursor, title=self._title(r, "B")), fresh)
        if fresh:  # a time step leaves these as they are
            self._render_result(r)
            self._drawn = r
        self._render_queues(r, cursor, fresh)
        self._render_step(r)
        self._drawn_step = self.state.step
        self._render_synthesis_step()

    def _render_result(self, r: PipelineView) -> None:
        self._render_summary(r)
        self._render_patent(r)
        self._render_split(r)

    def _render_summary(self, r: PipelineView) -> None:
        st = self.state
        if r.split_a is not None:
            devs = ", ".join(f"rank {i}: {html.escape(str(d))}" for i, d in enumerate(r.devices))
            head = (f"<b>{html.escape(r.graph_name)}</b> split over <b>{html.escape(r.system_name)}</b> ({devs}); "
                    f"<span style='color:#444'>{html.escape(r.note)}</span>")
        else:
            head = (f"<b>numbers only</b>: each rank's share of the model takes F = {st.f_ms:g} ms forward and "
                    f"B = {st.b_ms:g} ms backward (W = {st.w_ms:g} ms of it for split backwards), divided over its chunks; "
                    f"p2p latency {st.latency_ms:g} ms")
        cols = [("makespan_s", "makespan"), ("bubble_fraction", "idle share of rank-time (bubble)"),
                ("peak_activation_bytes", "peak activation memory (worst rank)"), ("blocked_send_s", "senders blocked (total)"),
                ("peak_cache_depth", "most outputs cached at once")]
        rows = []
        for lab, res, split in (("A", r.a, r.split_a), ("B", r.b, r.split_b)):
            m = res.metrics
            cells = "".join(f"<td>{format_value(m[k], k) if k != 'peak_cache_depth' else int(m[k])}</td>" for k, _ in cols)
            extra = f"<td>{format_value(split.metrics['bottleneck_s'], '_s')}</td>" if split is not None else ""
            rows.append(f"<tr><td><b>{lab}</b> {html.escape(schedule_name(res.schedule.name))}</td>"
                        f"{cells}{extra}</tr>")
        th = "".join(f"<th>{html.escape(h)}</th>" for _k, h in cols) + ("<th>slowest stage or link</th>" if r.split_a is not None else "")
        ma, mb = r.a.metrics["makespan_s"], r.b.metrics["makespan_s"]
        faster = "A" if ma < mb else "B"
        gain = abs(ma - mb) / max(ma, mb) if max(ma, mb) > 0 else 0.0
        notice = (f"What to notice: {faster} finishes {gain:.0%} sooner." if gain >= 0.005 else
                  "What to notice: A and B finish together.")
        notice += (" Bubble = idle time / (p × makespan), the share of all ranks' time spent waiting; it is always "
                   "between 0 and 100%.")
        if st.lockstep:
            notice += (f" Under lock-step p2p a send waits for its receive: senders were blocked "
                       f"{format_value(r.a.metrics['blocked_send_s'], '_s')} (A) and {format_value(r.b.metrics['blocked_send_s'], '_s')} (B).")
        self.summary.value = (f"<div>{head}</div><table class='hetsched-table'><tr><th>schedule</th>{th}</tr>{''.join(rows)}</table>"
                              f"<div style='color:#333'>{notice}</div>")

    def _render_patent(self, r: PipelineView) -> None:
        pr = r.patent_result()
        if pr is None:
            why = r.patents["A"].get("why") or (
                "neither A nor B is the patent's schedule (interleaved 1F1B with the paddle grouping [p + r, p, ..., p])")
            self.patent_text.value = (f"<i>{html.escape(why)}: choose interleaved 1F1B with the paddle grouping as schedule A "
                                      "(and m ≥ p) to see the patent's quantities.</i>")
            self.show_figure("patent", patent_queue_figure(pd.DataFrame(columns=["micro_step", "rank", "direction", "queued", "sent",
                                                                                  "depth", "item_in", "item_out"]),
                                                           title="the patent does not apply to these schedules"))
            self.messages_text.value = ""
            return
        lab, res = pr
        pv = r.patents[lab]
        s = res.schedule
        lo, hi = pv["send_interval"]
        warm = ", ".join(f"r{k}: {x}" for k, x in enumerate(pv["warmup"]))
        if s.p > 16:
            warm = ", ".join(f"r{k}: {x}" for k, x in list(enumerate(pv["warmup"]))[:4]) + f", …, r{s.p - 1}: {pv['warmup'][-1]}"
        groups = pv["groups"]
        shown_groups = groups if len(groups) <= 8 else [*groups[:6], "…"]
        r_expl = ("m is a multiple of p: the first group has p micro-batches and nothing waits (every output passes straight through)"
                  if pv["r"] == 0 else
                  f"the last rank finishes chunk c of a micro-batch r = {pv['r']} steps before rank 0 can start chunk c + 1 of it, "
                  f"so {pv['n_cached']} outputs pass through each cache queue, at most r = {pv['r']} at once")
        self.patent_text.value = (
            f"<div><b>{lab}</b> is the patent's schedule. Its quantities for p = {s.p}, v = {s.v}, m = {s.m}:</div><ul style='margin:0.2em 0'>"
            f"<li>r = m mod p = {s.m} mod {s.p} = <b>{pv['r']}</b>; first group p + r = <b>{pv['first_group']}</b> micro-batches "
            f"(groups {', '.join(map(str, shown_groups))}), {pv['first_group_steps']} micro-steps</li>"
            f"<li>warm-up forwards per rank (2 (p − 1 − k) + (v − 1)(p + r)): {warm}</li>"
            f"<li>send interval [r, r + (p + r)(v − 1)) = <b>[{lo}, {hi})</b>: the last rank sends the head of its forward "
            f"cache queue only at these forward micro-steps (rank 0 mirrors it with its backward queue)</li>"
            f"<li>{html.escape(r_expl)}</li></ul>")
        self.show_figure("patent", patent_queue_figure(pv["queues"], send_interval=(lo, hi), first_group_steps=pv["first_group_steps"]))
        self._render_messages(res)

    def _cache_words(self, res: pp.PipelineResult) -> str:
        """What the simulated run's queue is (the cache it actually used)."""
        cache, lock = res.params.get("cache"), res.params.get("lockstep")
        if cache == "sender" and lock:
            return "sender's cache queue (the patent's)"
        if cache == "receiver":
            return "receive buffer"
        return ""

    def _render_messages(self, res: pp.PipelineResult) -> None:
        msg = res.messages()  # held_s: how long each waited in the run's cache (the core defines it per design)
        tol = 1e-12 * max(1.0, res.metrics["makespan_s"])
        interesting = msg[(msg["held_s"] > tol) | (msg["blocked_send_s"] > tol)]
        words = self._cache_words(res) or "cache"
        if not len(interesting):
            self.messages_text.value = (f"<div style='color:#444'>No message waited in a {html.escape(words)} and no sender was blocked "
                                        f"({len(msg)} messages).</div>")
            return
        top = interesting.sort_values(["held_s", "blocked_send_s"], ascending=False, kind="stable").head(8)
        rows = "".join(
            f"<tr><td>{html.escape(a)} → {html.escape(c)}</td><td>rank {int(s)} → {int(d)}</td>"
            f"<td>{format_value(pr_, '_s')}</td><td>{format_value(h, '_s')}</td><td>{format_value(bl, '_s')}</td></tr>"
            for a, c, s, d, pr_, h, bl in zip(top["item"], top["consumer"], top["src"], top["dst"], top["produced_s"], top["held_s"],
                                             top["blocked_send_s"]))
        self.messages_text.value = (
            f"<div>In the simulation, {len(interesting)} of {len(msg)} messages waited in the {html.escape(words)} or blocked their "
            f"sender (senders blocked {format_value(res.metrics['blocked_send_s'], '_s')} in total); the longest:</div>"
            "<table class='hetsched-table'><tr><th>output → its consumer</th><th>from → to</th><th>produced at</th>"
            f"<th>held in the {html.escape(words)}</th><th>sender blocked</th></tr>{rows}</table>")

    def _render_queues(self, r: PipelineView, cursor: float | None, fresh: bool) -> None:
        pr = r.patent_result()
        lab, res = pr if pr is not None else ("A", r.a)
        words = self._cache_words(res)
        if words:
            title = f"{lab} simulated: {words} depth per rank over time"
        elif res.params.get("cache") == "sender":
            title = f"{lab} simulated: no cache holds anything without lock-step p2p (sends never wait at the sender)"
        else:
            title = f"{lab} simulated without a cache: senders block instead (see 'senders blocked')"
        qt = self._walk.queue_trace if res is r.a else res.queue_trace()
        # half the panel's width (beside the patent's queues): a long title would run off it
        self._show("queues", cache_depth(qt, small_multiples=True, cursor_s=cursor if res is r.a else None,
                                         title=wrap_title(title, HALF_TITLE_CHARS)), fresh)

    def _render_split(self, r: PipelineView) -> None:
        if r.split_a is None:
            self.split_box.layout.display = "none"
            return
        self.split_box.layout.display = None
        sp = r.split_a
        self.show_figure("stages", stage_costs_figure(sp, title=f"A's split of {r.graph_name}: {sp.n_stages} stages, "
                                                                f"slowest stage or link {format_value(sp.metrics['bottleneck_s'], '_s')}"))
        cols = [("stage", "stage"), ("device", "device"), ("first", "first op"), ("last", "last op"), ("f_s", "F"), ("b_s", "B"),
                ("w_s", "W (of B)"), ("send_s", "send to next"), ("memory_bytes", "memory"), ("capacity_bytes", "capacity")]
        ps = sp.per_stage[[c for c, _ in cols]]
        body = "".join("<tr>" + "".join(f"<td>{html.escape(format_value(v, c) if c.endswith(('_s', '_bytes')) else str(v))}</td>"
                                        for c, v in zip(ps.columns, row)) + "</tr>"
                       for row in ps.itertuples(index=False))
        self.split_text.value = ("<div style='max-height:320px;overflow:auto'><table class='hetsched-table'><tr>"
                                 + "".join(f"<th>{html.escape(h)}</th>" for _c, h in cols) + "</tr>" + body + "</table></div>"
                                 "<div style='color:#444'>Memory: weights and their gradients plus the saved activations of "
                                 "every micro-batch the schedule keeps in flight on that stage.</div>")

    def _render_step(self, r: PipelineView) -> None:
        t, sa, sb = self.moment()
        walk = self._walk
        n = len(walk.steps)
        j = min(max(self.state.step, 0), n)
        if j == 0:
            line = (f"<b>step 0 of {n}</b>: before anything runs. A has {n} actions on {r.a.schedule.p} ranks; step through "
                    f"them in the order they start, or jump to a phase (warm-up, steady 1F1B, cool-down), a rank or a cache change.")
        else:
            line = self._step_line(r, j)
        self._line = line
        self.step_text.value = f"<div>{line}</div>"
        self.rank_text.value = self._rank_table(r, sa, sb)

    def describe_step(self) -> str:
        """The current step in plain words (the line above the per-rank table, as text).

        >>> p = PipelinePanel(source="numbers"); p.state.step = 1
        >>> p.describe_step().startswith("step 1 of 160 · t = 0 us: rank 0 starts 0F0")
        True
        """
        return html.unescape(re.sub(r"<[^>]+>", "", self._line.replace("<br>", "\n")))

    def _step_line(self, r: PipelineView, j: int) -> str:
        walk = self._walk
        res = r.a
        s = res.schedule
        core = walk.steps[j - 1]  # the core's step: which action, its phase, and why it started then
        i = int(core.data["action"])
        rank = int(s.rank[i])
        kind = pp.KINDS[int(s.kind[i])]
        stage, mb = int(s.stage[i]), int(s.microbatch[i])
        start, end = float(res.start_s[i]), float(res.end_s[i])
        reason = re.sub(r"idle ([0-9.eE+-]+) s", lambda mt: "idle " + format_value(float(mt.group(1)), "_s"), core.reason)
        line = (f"<b>step {j} of {len(walk.steps)}</b> · t = {format_value(start, '_s')}: <b>rank {rank}</b> starts "
                f"<b>{html.escape(core.subject)}</b>, the {_KIND_WORDS[kind]} of stage {stage} (chunk {stage // s.p}) on micro-batch "
                f"{mb}, in its {core.data['phase']} phase; it ends at {format_value(end, '_s')}. Why now: {html.escape(reason)}.")
        # what entered or left a cache queue since the previous step
        qt = walk.queue_trace
        if len(qt):
            t_prev = float(walk.starts[j - 2]) if j >= 2 else -math.inf
            ev = qt[(qt["time_s"] > t_prev) & (qt["time_s"] <= start)]
            words = self._cache_words(res)
            for row in ev.itertuples(index=False):
                moved = ", ".join(x for x in (f"{row.queued} in" if row.queued else "", f"{row.sent} out" if row.sent else "") if x)
                line += (f"<br>▸ {html.escape(words)} of rank {row.rank} ({row.direction}): {moved}; it now holds "
                         f"{html.escape(', '.join(row.items)) or 'nothing'}.")
        pv = r.patents["A"]
        if pv.get("applies"):
            d = ("forward", s.p - 1) if kind == "F" and rank == s.p - 1 else ("backward", 0) if kind in "BI" and rank == 0 else None
            if d is not None:
                q = pv["queues"]
                k = int(core.data["micro_step"])
                row = q[(q["direction"] == d[0]) & (q["micro_step"] == k)]
                if len(row):
                    row = row.iloc[0]
                    lo, hi = pv["send_interval"]
                    acts = []
                    if isinstance(row["item_in"], str):
                        acts.append(f"pushes {row['item_in']} into its {d[0]} cache queue")
                    if isinstance(row["item_out"], str):
                        acts.append(f"sends {row['item_out']}")
                    where = "inside" if lo <= k < hi else "outside"
                    line += (f"<br>▸ the patent's rule: this is {'the last' if d[0] == 'forward' else 'the first'} rank's {d[0]} "
                             f"micro-step {k}, {where} the send interval [{lo}, {hi}): it {' and '.join(acts) or 'sends nothing'}; "
                             f"the queue then holds {int(row['depth'])}.")
        return line

    def _rank_table(self, r: PipelineView, sa: dict, sb: dict) -> str:
        wa, wb = self._cache_words(r.a), self._cache_words(r.b)

        def cells(s: dict, rk: int, words: str) -> str:
            out = f"<td>{html.escape(s['running'].get(rk, 'idle'))}</td><td>{s['in_flight'].get(rk, 0)}</td>"
            if words:
                out += f"<td>{html.escape(', '.join(s['queues'].get(rk, []))) or '–'}</td>"
            return out

        head = "<th>A runs</th><th>A activations held</th>" + (f"<th>A: {html.escape(wa)}</th>" if wa else "")
        head += "<th>B runs</th><th>B activations held</th>" + (f"<th>B: {html.escape(wb)}</th>" if wb else "")
        p_b = r.b.schedule.p
        body = "".join(f"<tr><td>rank {rk}</td>{cells(sa, rk, wa)}{cells(sb, rk, wb) if rk < p_b else ''}</tr>"
                       for rk in range(r.a.schedule.p))
        return (f"<div style='color:#444'>At t = {format_value(sa['time_s'], '_s')}:</div>"
                "<div style='max-height:300px;overflow:auto'><table class='hetsched-table'><tr><th></th>" + head + "</tr>"
                + body + "</table></div>")

    # -- schedule synthesis: named schedules vs the synthesized one vs the lower bound ---------------------
    def _build_synthesis(self, style: dict) -> None:
        """The synthesis section: its controls (the core's :data:`~hetsched.pipeline.PARAMS`), a button, and
        the comparison, the memory per rank and a walker of the synthesis's decisions once it ran."""
        st = self.state
        self.synth_button = W.Button(description="synthesize", icon="search", button_style="primary",
                                     tooltip="search the best order of F, B (or I and W) on each rank for A's split, "
                                             "memory cap and p, v, m; then compare it with every named schedule")
        self.synth_button.on_click(lambda _b: self.synthesize())
        method = W.Dropdown(options=[("heuristic (about a second)", "heuristic"), ("auto (exact on small instances)", "auto"),
                                     ("MILP (exact, up to the time limit)", "milp")],
                            description=_P["method"].words, style=style, layout=W.Layout(width="330px"), tooltip=_P["method"].help)
        cap = W.Dropdown(options=_CAPS, description=_P["memory_cap"].words, style=style, layout=W.Layout(width="400px"),
                         tooltip=_P["memory_cap"].help)
        cap_mib = W.FloatText(description=f"{_P['memory_cap_bytes'].words} ({_P['memory_cap_bytes'].shown_unit})", style=style,
                              layout=W.Layout(width="200px"), tooltip=_P["memory_cap_bytes"].help)
        limit = W.FloatText(description=f"{_P['time_limit_s'].words} ({_P['time_limit_s'].unit})", style=style,
                            layout=W.Layout(width="170px"), tooltip=_P["time_limit_s"].help)
        split = W.Checkbox(description=_P["split_backward"].words, indent=False, layout=W.Layout(width="auto"),
                           tooltip=_P["split_backward"].help)
        for ctl, name in ((method, "method"), (cap, "memory_cap"), (split, "split_backward")):
            W.link((st, name), (ctl, "value"))
        for ctl, name in ((cap_mib, "memory_cap_MiB"), (limit, "time_limit_s")):
            link_clamped(st, name, ctl)
        self.control_widgets.update({"method": method, "memory_cap": cap, "memory_cap_MiB": cap_mib, "time_limit_s": limit,
                                     "split_backward": split})

        def sync(_c=None) -> None:
            cap_mib.disabled = st.memory_cap != "bytes"
        st.observe(sync, names=["memory_cap"])
        sync()
        self.synth_message = W.HTML()  # the search's refusals (a cap below one micro-batch...), under its controls
        self.synth_summary = W.HTML("<div style='color:#444'>Every named schedule is a fixed pattern made for stages "
                                    "that all cost the same. <b>synthesize</b> searches the order of each rank's actions "
                                    "for A's split (its p, v, m and placement) and compares it with every named "
                                    "schedule and with a lower bound no schedule can beat.</div>")
        self.synth_walker = DecisionWalker(st, "synth_step", description="decision", phase_labels=_SYNTH_PHASES,
                                           group=lambda s: (s.data or {}).get("rank"), group_label="rank",
                                           label=self._synth_step_label)
        self.synth_text = W.HTML(layout=W.Layout(min_height="3em"))
        self.synth_table = W.HTML()
        self.synth_export_button = W.Button(description="export for torch (CSV)", icon="download", layout=W.Layout(width="auto"),
                                            tooltip="the synthesized schedule as torch.distributed.pipelining's compute-only "
                                                    "CSV (_PipelineScheduleRuntime._load_csv)")
        self.synth_export_button.on_click(lambda _b: self.export_synthesis())
        self.synth_export = W.HTML()
        # filled at the first synthesis: a page that never asks for one draws no empty plots
        self.synth_results = W.VBox([])
        self.synth_box = W.VBox([W.HTML("<h4 style='margin:0.6em 0 0.2em'>The best schedule for this split: synthesis "
                                        "against the named schedules</h4>"),
                                 W.HBox([self.synth_button, method, cap, cap_mib, limit, split],
                                        layout=W.Layout(flex_flow="row wrap", align_items="center")),
                                 self.synth_message, self.synth_summary, self.synth_results])
        self.synth_box.add_class("hetsched-synthesis")
        self._synth: SynthesisView | None = None
        self._synth_asked = self._synth_ok = False
        self._synth_drawn: tuple | None = None
        kids = list(self.children)
        kids.insert(kids.index(self.patent_box), self.synth_box)
        self.children = kids

    def _check_synthesis(self) -> None:
        """The synthesis's settings (the core's bounds) and its walker's step."""
        st = self.state
        values = {"method": st.method, "memory_cap": None if st.memory_cap == "none" else st.memory_cap,
                  "time_limit_s": st.time_limit_s, "split_backward": st.split_backward}
        if st.memory_cap == "bytes":
            values["memory_cap_bytes"] = st.memory_cap_MiB * _TYPED["memory_cap_MiB"][1]
        self.check_params(pp.PARAMS, values, fields={"memory_cap_bytes": "memory_cap_MiB"})
        self._check_step(len(self._synth.result.steps) if self._synth is not None else None, "synth_step")

    def _synth_key(self) -> tuple:
        """The synthesis settings a synthesis answers (with the view: A's split, p, v, m, costs)."""
        st = self.state
        return (st.method, st.memory_cap, st.memory_cap_MiB if st.memory_cap == "bytes" else None, st.time_limit_s,
                st.split_backward)

    def synthesis_view(self) -> SynthesisView | None:
        """The synthesis on screen when it answers the inputs shown (``None``: none yet, or out of date)."""
        sv = self._synth
        return sv if sv is not None and sv.view is self.result and sv.key == self._synth_key() else None

    def synthesize(self) -> bool:
        """What the *synthesize* button does: synthesize A's instance with the chosen search, cap and time limit,
        compare it with every named schedule and the lower bound, and walk its decisions (returns whether it
        succeeded). From then on the section follows the inputs while the search is the heuristic and answers
        within :data:`hetsched.pipeline.params.SYNTH_FOLLOW_MAX_S`; an exact search, or a longer one, waits for the next click.

        >>> p = PipelinePanel(source="numbers"); p.synthesize()
        True
        >>> sv = p.synthesis_view(); sv.result.metrics["makespan_s"] <= sv.result.metrics["best_named_makespan_s"]
        True
        """
        self._synth_asked, self._synth_ok = True, False
        try:
            if self.state.synthesis:
                self.redraw()  # asked again: searched anew even for the same inputs
            else:
                self.state.synthesis = True  # a view trait: redraw, then after_render runs the search
        finally:
            self._synth_asked = False
        return self._synth_ok

    def after_render(self, r: PipelineView) -> None:
        # the search runs after A's and B's figures have left: the browser draws those meanwhile
        st = self.state
        if not st.synthesis or (self.synthesis_view() is not None and not self._synth_asked):
            return
        last = self._synth.elapsed_s if self._synth is not None else 0.0
        if self._synth_asked or (st.method == "heuristic" and last <= pp.params.SYNTH_FOLLOW_MAX_S):
            self._synth_ok = self._run_synthesis(r)
        else:
            why = (f"the last search took {format_value(last, '_s')}" if st.method == "heuristic" else
                   f"the {'MILP' if st.method == 'milp' else 'auto'} search runs up to {st.time_limit_s:g} s")
            self.synth_message.value = (f"<div style='color:#8a5a00'>The inputs changed since the last synthesis ({why}): "
                                        f"click <b>synthesize</b> to run it again.</div>")
            self._grey_synthesis()

    def _grey_synthesis(self) -> None:
        self.synth_export.value = ""  # a link to a schedule of other inputs must not stay
        for n in _SYNTH_FIGURES:
            if n in self.figures and not self.figures[n].stale:
                self.figures[n].stale = True

    def _set_stale(self, stale: bool) -> None:
        super()._set_stale(stale)
        if not stale and self._synth is not None and self.synthesis_view() is None:
            self._grey_synthesis()  # a synthesis of earlier inputs stays greyed until it is run again

    def _synthesis_inputs(self, r: PipelineView) -> dict:
        """``synthesize``'s arguments for A's instance: A's split costs (or the typed numbers), p, v, m, placement."""
        st = self.state
        s = r.a.schedule
        kw: dict[str, Any] = {"p": s.p, "v": s.v, "m": s.m, "placement": s.style, "method": st.method,
                              "time_limit_s": st.time_limit_s, "split_backward": st.split_backward}
        if r.split_a is not None:
            kw["costs"] = r.split_a.costs  # priced on the machine: stage times, link times, activation sizes
        else:
            kw["costs"] = pp.StageCosts.per_rank(f_s=st.f_ms * 1e-3, b_s=st.b_ms * 1e-3, w_s=st.w_ms * 1e-3, chunks=s.v,
                                                 activation_bytes=st.activation_MiB * 2**20, overhead_s=st.overhead_ms * 1e-3)
            kw["comm"] = {"latency_s": st.latency_ms * 1e-3}
        if st.memory_cap == "schedule_a":
            kw["memory_cap_bytes"] = r.a.per_rank["peak_activation_bytes"].astype(float).tolist()
        elif st.memory_cap == "bytes":
            kw["memory_cap_bytes"] = st.memory_cap_MiB * _TYPED["memory_cap_MiB"][1]
        return kw

    def _run_synthesis(self, r: PipelineView) -> bool:
        st = self.state
        t0 = time.perf_counter()
        busy = self.busy.value
        self.busy.value = busy_html("synthesizing")
        self.synth_button.disabled = True
        try:
            kw = self._synthesis_inputs(r)
            res = pp.synthesize(**kw)
            table = pp.compare_synthesis(result=res, p=kw["p"], v=kw["v"], m=kw["m"])
        except HetschedError as e:
            self.synth_message.value = error_html(e)
            self._grey_synthesis()
            return False
        except Exception as e:  # a bug: said plainly, the panel keeps working
            self.synth_message.value = error_html(self._internal(e))
            self._grey_synthesis()
            return False
        finally:
            self.busy.value = busy
            self.synth_button.disabled = False
        n = len(res.steps)
        # the walker's time axis: the slowest incumbent it shows (the first named schedule tried, or a restart)
        t_max = max([float(s.delta["makespan_s"]) for s in res.steps.views() if s.delta and "orders" in s.delta] or [0.0])
        self._synth = SynthesisView(res, table, r, self._synth_key(), kw.get("memory_cap_bytes"), time.perf_counter() - t0,
                                    max(t_max, float(res.metrics["makespan_s"])))
        self.synth_message.value = ""
        self.synth_export.value = ""
        self.synth_walker.set_steps(res.steps)
        # the walk opens on its last decision (the result); a view trait set here must not redraw by itself
        quiet, self._in_refresh = self._in_refresh, True
        try:
            st.synth_step = n
        finally:
            self._in_refresh = quiet
        views = [self.figure_view(n) for n in _SYNTH_FIGURES]
        with views[0].hold_sync(), views[1].hold_sync(), views[2].hold_sync():
            self._render_synthesis(self._synth)
            self._synth_drawn = None
            self._render_synthesis_step()
        for v in views:
            v.stale = False
        if not self.synth_results.children:
            # shown once they hold their figures: the browser draws each once, not empty first
            half = W.Layout(width="50%", min_width="0")
            self.synth_results.children = [
                W.HBox([W.Box([views[0]], layout=half), W.Box([views[1]], layout=half)], layout=W.Layout(width="100%")),
                self.synth_table, self.synth_walker, self.synth_text, views[2],
                W.HBox([self.synth_export_button, self.synth_export], layout=W.Layout(align_items="center"))]
        self.last_synthesis_s = time.perf_counter() - t0
        return True

    @staticmethod
    def _synth_label(key: str) -> str:
        """A schedule or search step the synthesis names, in words: ``interleaved_1f1b[paddle]`` ->
        ``Interleaved 1F1B (paddle)``, ``list[critical_path, W fill, ...]`` -> ``list scheduling (critical path, W fill, ...)``.

        >>> PipelinePanel._synth_label("local search from list[oldest_first, W eager, in-flight 2x]")
        'local search from list scheduling (oldest first, W eager, in-flight 2x)'
        """
        return _plain_schedules(key)

    def _render_synthesis(self, sv: SynthesisView) -> None:
        """The comparison: bars with the bound, memory per rank, the table, and the verdict in words."""
        res, table = sv.result, sv.table.copy()
        table["label"] = [self._synth_label(k) for k in table["label"]]
        s = res.schedule
        self.show_figure("synth_bars", synthesis_bars(table, title=wrap_title(
            f"p={s.p}, v={s.v}, m={s.m}: every schedule on A's costs, non-blocking p2p", HALF_TITLE_CHARS)))
        self.show_figure("synth_memory", rank_memory_figure(table, cap_bytes=sv.cap_bytes, title=wrap_title(
            "memory per rank: the most activations each rank holds at once"
            + (", and the cap" if sv.cap_bytes is not None else ""), HALF_TITLE_CHARS)))
        m = res.metrics
        mk = m["makespan_s"]
        named = table[table["kind"] == "named"]
        fit = named[named["fits_cap"].astype(bool)] if len(named) else named
        best = fit.loc[fit["makespan_s"].idxmin()] if len(fit) else None
        status = {"optimal": "<b>proven optimal</b>",
                  "time_limit": f"the MILP stopped at its time limit: gap {res.gap:.1%} to its bound",
                  "heuristic": f"not proven optimal: gap {res.gap:.1%} to the lower bound"}[res.status]
        solver = f", {res.milp.solver} on a MILP of {int(m.get('milp_binaries', 0))} binaries" if res.milp is not None else ""
        head = (f"<b>Synthesized</b> ({html.escape(res.method)}{html.escape(solver)}, {format_value(sv.elapsed_s, '_s')}, "
                f"{int(m['n_evaluations'])} orders timed): makespan <b>{format_value(mk, '_s')}</b>, {status}; lower bound "
                f"{format_value(res.bound, '_s')}.")
        if best is not None:
            gain = 1.0 - mk / best["makespan_s"] if best["makespan_s"] > 0 else 0.0
            head += (f" What to notice: it finishes <b>{gain:.1%}</b> sooner than the fastest named schedule"
                     f"{' that fits the cap' if sv.cap_bytes is not None else ''}, {html.escape(best['label'])} "
                     f"({format_value(best['makespan_s'], '_s')})" if gain >= 0.0005 else
                     f" What to notice: no order beats {html.escape(best['label'])} "
                     f"({format_value(best['makespan_s'], '_s')}) here")
            head += "."
            syn_peak = float(table.loc[table["kind"] == "synthesized", "peak_activation_bytes"].iloc[0])
            head += (f" It holds up to {format_value(syn_peak, '_bytes')} of activations on a rank, "
                     f"{html.escape(best['label'])} {format_value(best['peak_activation_bytes'], '_bytes')}"
                     + ("" if sv.cap_bytes is not None or syn_peak <= best["peak_activation_bytes"] * 1.01 else
                        ": choose a memory cap to see what the search finds within less") + ".")
        over = named[~named["fits_cap"].astype(bool)]["label"].tolist() if len(named) else []
        if over:
            head += f" Above the cap (grey): {html.escape(', '.join(over))}."
        if self.state.lockstep:
            head += (" The search and this comparison send without blocking (as torch's runtime does): with lock-step p2p "
                     "on, A's and B's times above differ from their rows here.")
        self.synth_summary.value = f"<div>{head}</div>"
        ranks = [c for c in table.columns if str(c).startswith("peak_bytes_rank")][:16]
        cols = [("makespan_s", "makespan"), ("vs_synthesized", "vs synthesized"), ("gap", "gap to the bound"),
                ("bubble_fraction", "idle share"), ("peak_activation_bytes", "activation memory (worst rank)")]
        if sv.cap_bytes is not None:
            cols.append(("fits_cap", "fits the cap"))

        def cell(k: str, v: Any, kind: str) -> str:
            if kind == "bound" and k != "makespan_s" and k != "vs_synthesized":
                return "–"
            if k == "fits_cap":
                return "" if v is None or (isinstance(v, float) and math.isnan(v)) else ("yes" if v else "<b>no</b>")
            if isinstance(v, float) and math.isnan(v):
                return "–"
            if k in ("vs_synthesized",):
                return f"{v:+.1%}"
            if k in ("gap", "bubble_fraction"):
                return f"{v:.1%}"
            return html.escape(format_value(v, k))

        order = table.assign(_k=(table["kind"] == "bound").astype(int)).sort_values(["_k", "makespan_s"], kind="stable")
        body = "".join(
            "<tr" + (" style='font-weight:600;background:#FDF0E6'" if row["kind"] == "synthesized" else "") + ">"
            f"<td>{html.escape(row['label'])}</td>" + "".join(f"<td>{cell(k, row[k], row['kind'])}</td>" for k, _h in cols)
            + "".join(f"<td>{cell('peak_bytes', row[c], row['kind'])}</td>" for c in ranks) + "</tr>"
            for _i, row in order.iterrows())
        head_row = ("<th>schedule</th>" + "".join(f"<th>{html.escape(h)}</th>" for _k, h in cols)
                    + "".join(f"<th>rank {str(c)[15:]}</th>" for c in ranks))
        more = (f"<div style='color:#444'>Memory of the first {len(ranks)} ranks; the chart shows every rank.</div>"
                if s.p > len(ranks) else "")
        self.synth_table.value = ("<div style='max-height:340px;overflow:auto'><table class='hetsched-table'><tr>" + head_row
                                  + "</tr>" + body + "</table></div>" + more)

    def _render_synthesis_step(self) -> None:
        """The synthesis's state after the walked decision: its words, and the incumbent's Gantt."""
        sv = self.synthesis_view()
        if sv is None or not self.state.synthesis:
            return
        k = min(max(self.state.synth_step, 0), len(sv.result.steps))
        if self._synth_drawn == (id(sv), k):
            return
        res = sv.result
        n = len(res.steps)
        state = res.replay(k - 1)
        orders = tuple(state["orders"])
        if k == 0:
            line = (f"<b>decision 0 of {n}</b>: before the search. Step through its decisions: the lower bound, each "
                    f"named schedule tried, each list-scheduling rule and the winning rule's choices, the local search's "
                    f"moves (kept or undone), then the result.")
        else:
            line = self._synth_step_line(res, k, state)
        self.synth_text.value = f"<div>{line}</div>"
        if all(orders):
            run = sv.run_of(orders)
            mk = run.metrics["makespan_s"]
            src = self._synth_label(state["source"]) if state["source"] else ""
            title = (f"decision {k} of {n}: the best schedule so far" + (f", from {src}" if src else "")
                     + f": makespan {format_value(mk, '_s')}, idle {run.metrics['bubble_fraction']:.0%} of rank-time")
            if k == n:
                title = f"the synthesized schedule: makespan {format_value(mk, '_s')} ({res.status.replace('_', ' ')})"
            fig = schedule_gantt(run, t_max_s=sv.t_max_s, title=title)
        else:
            from hetsched.timeline import make_timeline

            fig = gantt(make_timeline([]), title=f"decision {k} of {n}: no schedule yet (the named schedules come next)")
        self.figure_view("synth_gantt").show(fig, force_spec=self._synth_drawn is None or self._synth_drawn[0] != id(sv))
        self._synth_drawn = (id(sv), k)

    def _synth_step_label(self, s: Any) -> str:
        """One line of the synthesis's decision list."""
        ok = "✓" if s.accepted else "✗"
        words = _SYNTH_ACTIONS.get(s.action, s.action)
        subject = self._synth_label(s.subject) if s.action == "warm_start" else s.subject
        t = lambda x: format_value(float(x), "_s") if isinstance(x, (int, float)) else "–"  # noqa: E731
        cost = f": {t(s.before)} → {t(s.after)}" if s.before is not None or s.after is not None else ""
        return f"{ok} {words} {subject}{cost}"

    def _synth_step_line(self, res: pp.SynthesisResult, k: int, state: dict) -> str:
        """Decision ``k`` (the log's step ``k - 1``) in words, from its reason, its data and the replayed state."""
        step = res.steps[k - 1]
        data = step.data or {}
        phase = _SYNTH_PHASES.get(data.get("phase", ""), data.get("phase", ""))
        # times and sizes in the reason as a person reads them
        why = re.sub(r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?) s\b", lambda mt: format_value(float(mt.group(1)), "_s"),
                     _plain_schedules(step.reason))
        why = re.sub(r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?) B\b", lambda mt: format_value(float(mt.group(1)), "_bytes"), why)
        verdict = "" if step.action in ("bound", "choose", "result") else (" <b>kept</b>" if step.accepted else " <b>not kept</b>")
        what = _SYNTH_ACTIONS.get(step.action, step.action)
        what = "" if what == phase else f" · {html.escape(what)}"
        line = f"<b>decision {k} of {len(res.steps)}</b> · {html.escape(phase)}{what}{verdict}: {html.escape(why)}."
        if state["makespan_s"] is not None:
            src = self._synth_label(state["source"]) if state["source"] else "?"
            line += f"<br>▸ the best schedule so far: {html.escape(src)}, makespan {format_value(state['makespan_s'], '_s')}."
        if step.action == "choose" and "rank" in data:
            built = state["building"][int(data["rank"])]
            shown = " ".join(built[-12:])
            line += (f"<br>▸ rank {int(data['rank'])}'s order built so far ({len(built)} actions): "
                     f"{'… ' if len(built) > 12 else ''}{html.escape(shown)}")
        elif step.action in ("swap", "move", "fill") and "rank" in data:
            line += (f"<br>▸ on rank {int(data['rank'])}: the action at position {int(data['from'])} goes to position "
                     f"{int(data['to'])}.")
        return line

    def export_synthesis(self) -> bool:
        """What *export for torch (CSV)* does: a download link of the synthesized schedule as torch's compute-only
        CSV (:func:`~hetsched.pipeline.to_torch_csv`), which ``_PipelineScheduleRuntime._load_csv`` loads and runs."""
        sv = self.synthesis_view()
        if sv is None:
            self.synth_export.value = "<i>synthesize first: there is no schedule for these inputs yet</i>"
            return False
        s = sv.result.schedule
        self.synth_export.value = download_link(pp.to_torch_csv(sv.result), f"synthesized_p{s.p}_v{s.v}_m{s.m}_torch.csv",
                                                "synthesized schedule for torch (CSV)")
        return True

    def download_items(self, r: PipelineView):
        both = compare_results({f"A: {r.a.schedule.name}": r.a, f"B: {r.b.schedule.name}": r.b}, wide=True)
        items = [(pp.to_chrome_trace(r.a), "pipeline_A_trace.json"), (pp.to_chrome_trace(r.b), "pipeline_B_trace.json"),
                 (r.a.timeline, "pipeline_A_timeline.csv"), (r.b.timeline, "pipeline_B_timeline.csv"),
                 (both, "pipeline_metrics.csv"), (pp.to_torch_csv(r.a.schedule), "pipeline_A_torch.csv")]
        if r.split_a is not None:
            items.append((r.split_a.per_stage, "pipeline_A_stages.csv"))
        pr = r.patent_result()
        if pr is not None:
            items.append((r.patents[pr[0]]["queues"], "pipeline_patent_queues.csv"))
        sv = self.synthesis_view()
        if sv is not None:
            items += [(pp.to_torch_csv(sv.result), "pipeline_synthesized_torch.csv"), (sv.table, "pipeline_synthesis_compare.csv")]
        return items

