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
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import ipywidgets as W
import numpy as np
import pandas as pd
import traitlets

import hetsched.pipeline as pp
from hetsched.cost import cost_key
from hetsched.errors import HetschedError
from hetsched.plot import format_value
from hetsched.plot.core import wrap_title
from hetsched.plot.pipeline import cache_depth, patent_queue_figure, schedule_gantt, stage_costs_figure
from hetsched.registry import label
from hetsched.results import Step, compare_results

from .base import Panel, Session, link_clamped
from .walker import DecisionWalker

__all__ = ["PipelinePanel", "PipelineState", "PipelineView", "schedule_name"]

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
        The dashboard's session: the panel splits its graph when it is a training graph (the
        machine is the panel's own choice: each rank needs a device, and the session's system is
        a mapping target).
    source : {"model", "numbers"}, optional
        Where the costs come from (default ``pp.PARAMS["source"]``).
    """

    TAB = "pipeline"
    #: the presentation layout shows both schedules, A over B: the tab compares them
    MAIN_FIGURES = ("gantt_a", "gantt_b")
    VIEW_TRAITS = ("step",)

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
        system = W.Dropdown(options=self._systems, description="machine", style=style, layout=W.Layout(width="340px"))
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
                          (act, "activation_MiB"), (ovh, "overhead_ms"), (model, "model"), (system, "system")):
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
        self.controls = W.VBox([W.HBox([src, model, system], layout=W.Layout(flex_flow="row wrap")),
                                W.HBox([sched, sched_b, grouping], layout=W.Layout(flex_flow="row wrap")),
                                W.HBox([p, v, m], layout=W.Layout(flex_flow="row wrap")),
                                W.HBox([f, b, w, lat, act, ovh], layout=W.Layout(flex_flow="row wrap")),
                                W.HBox([lock, cache], layout=W.Layout(flex_flow="row wrap", align_items="center")),
                                self.applies])
        self.control_widgets = {"source": src, "model": model, "system": system, "schedule": sched, "schedule_b": sched_b,
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
        self.children = [self.controls, self.status, self.summary, self.walker, self.step_text,
                         self.figure_view("gantt_a"), self.figure_view("gantt_b"), self.rank_text, self.patent_box,
                         self.split_box, self.download_area]
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
        want = {"model": not numbers, "system": not numbers, "v": bool(uses_v), "grouping": bool(uses_g),
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
            run = pp.simulate_model(graph, system, devices=pp.default_devices(system, st.p), p=st.p, v=v, m=st.m, schedule=name,
                                    grouping=opts.get("grouping"), comm={"lockstep": st.lockstep}, cache=cache,
                                    overhead_s=st.overhead_ms * 1e-3, cost=self.cost)
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

    # -- Panel ------------------------------------------------------------------------------
    def _on_session(self, change) -> None:
        # only the graph (while the panel splits the dashboard's graph) and the cost (while it prices a model)
        if self.state.source == "model" and (change["name"] == "cost" or change["name"] == "graph" and self.state.model == SESSION):
            super()._on_session(change)

    def compute(self) -> PipelineView:
        st = self.state
        if st.source == "numbers":
            return PipelineView(self._numbers_run(st.schedule), self._numbers_run(st.schedule_b))
        from hetsched.whatif import resolve_system

        graph, note = self._model_graph()
        system = resolve_system(st.system)
        ra, rb = self._model_run(st.schedule, graph, system), self._model_run(st.schedule_b, graph, system)
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
                f"makespan {format_value(m['makespan_s'], '_s')}, idle {m['bubble_fraction']:.0%} of rank-time")

    def _show(self, name: str, fig: Any, fresh: bool) -> None:
        """Show ``fig``; a new result sends a new base, so a later time step's patch is the cursor alone
        (a patch is always against the base: after a few input changes it could otherwise carry
        most of a figure on every step click)."""
        self.figure_view(name).show(fig, force_spec=fresh)

    def render(self, r: PipelineView) -> None:
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
        return items

