"""PipelinePanel (seed 001): two pipeline schedules side by side, a time-step slider, the cache queues.

The panel builds two schedules with :func:`hetsched.pipeline.make_schedule` (the patent
``../shared/seeds/001_8da0d43036ed1fd9.txt``: interleaved scheduling with cache queues for any
number of micro-batches; PaddlePaddle ``PipelineParallelWithInterleave``; and GPipe, 1F1B,
looped BFS, interleaved FthenB, ZB-H1/H2/V to compare with) on the same ``p``, ``v``, ``m`` and
costs (forward/backward time of one rank's share of the model, split over its ``v`` chunks), simulates both (:func:`hetsched.pipeline.simulate`) and draws each as a rank x
time Gantt (F/B/I/W coloured, micro-batch labels, bubbles grey). The time-step slider walks the
actions of the first schedule in start order; at that instant both Gantts show a cursor, and a
table says what each rank runs, how many activations it holds and what waits in its cache queue
(:meth:`hetsched.pipeline.PipelineResult.replay`). Bubble fraction and per-rank peak activation
memory are in the summary; the cache-queue depth over the schedule's unit steps is below.

>>> p = PipelinePanel()
>>> p.state.schedule, p.state.schedule_b
('interleaved_1f1b', '1f1b')
>>> bubble = p.result.a.metrics["bubble_fraction"]
>>> p.state.m = 16; p.result.a.metrics["bubble_fraction"] < bubble     # more micro-batches, fewer bubbles
True
>>> p.state.m = 0; "m" in p.message.value
True
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import ipywidgets as W
import numpy as np
import pandas as pd
import traitlets

import hetsched.pipeline as pp
from hetsched.errors import HetschedError
from hetsched.plot import gantt, time_unit
from hetsched.plot.pipeline import cache_depth

from .base import Panel, Session, StepWalker, link_clamped

__all__ = ["PipelinePanel", "PipelineState", "PipelineView"]

_SCHEDULES = sorted(pp.SCHEDULES)
_CACHES = ["sender", "receiver", "none"]


class PipelineState(traitlets.HasTraits):
    schedule = traitlets.Enum(_SCHEDULES, default_value="interleaved_1f1b")
    schedule_b = traitlets.Enum(_SCHEDULES, default_value="1f1b")
    p = traitlets.Int(4)
    v = traitlets.Int(2)
    m = traitlets.Int(10)
    grouping = traitlets.Enum(sorted(pp.GROUPINGS), default_value="balanced")
    f_ms = traitlets.Float(1.0)  # forward time of one rank's share of the model (all its chunks), ms
    b_ms = traitlets.Float(2.0)  # backward time of one rank's share, ms
    latency_ms = traitlets.Float(0.0)  # p2p latency, ms
    lockstep = traitlets.Bool(True)  # blocking p2p: early outputs wait in the cache queues
    cache = traitlets.Enum(_CACHES, default_value="sender")
    activation_MiB = traitlets.Float(64.0)  # one stage output for one micro-batch
    step = traitlets.Int(0)  # view: action index of schedule A in start order


@dataclass(frozen=True)
class PipelineView:
    """What the panel shows: schedule A's and B's simulations."""

    a: pp.PipelineResult
    b: pp.PipelineResult


def _gantt_frame(r: pp.PipelineResult) -> pd.DataFrame:
    """Rank lanes only, with an ``action`` column (F/B/I/W, or the row kind) to colour by."""
    tl = r.timeline
    tl = tl[tl["lane"].astype(str).str.startswith("rank")].copy()
    act = tl["name"].astype(str).str.extract(r"^\d+([FBIW])\d+$")[0]
    tl["action"] = act.where(tl["kind"] == "compute", tl["kind"]).fillna(tl["kind"])
    # cells labelled as torch's visualiser writes them ("0F3": stage 0, forward, micro-batch 3)
    tl["label"] = tl["name"].where(tl["kind"] == "compute", "")
    return tl


class PipelinePanel(Panel):
    """Two schedules of one pipeline, compared and stepped through.

    Parameters
    ----------
    session : Session, optional
        Unused (pipeline schedules depend only on numbers); accepted so the dashboard can pass it.
    """

    VIEW_TRAITS = ("step",)

    def __init__(self, session: Session | None = None, **kw: Any) -> None:
        state = PipelineState()
        style = {"description_width": "initial"}
        P = pp.PARAMS
        sched = W.Dropdown(options=_SCHEDULES, description="schedule A", style=style)
        sched_b = W.Dropdown(options=_SCHEDULES, description="schedule B", style=style)
        p = W.BoundedIntText(min=-1, max=P["p"]["max"], description="p (ranks)", style=style, layout=W.Layout(width="150px"))
        v = W.BoundedIntText(min=-1, max=P["v"]["max"], description="v (chunks)", style=style, layout=W.Layout(width="150px"))
        m = W.IntSlider(min=1, max=P["m"]["max"], description="m (micro-batches)", style=style, continuous_update=False)
        grouping = W.Dropdown(options=sorted(pp.GROUPINGS), description="grouping", style=style, layout=W.Layout(width="200px"))
        f = W.BoundedFloatText(min=-1, max=1e6, step=0.1, description="forward per rank (ms)", style=style, layout=W.Layout(width="260px"))
        b = W.BoundedFloatText(min=-1, max=1e6, step=0.1, description="backward per rank (ms)", style=style, layout=W.Layout(width="270px"))
        lat = W.BoundedFloatText(min=-1, max=1e6, step=0.05, description="p2p latency (ms)", style=style, layout=W.Layout(width="190px"))
        act = W.BoundedFloatText(min=0, max=1e9, description="activation (MiB)", style=style, layout=W.Layout(width="190px"))
        lock = W.Checkbox(description="lock-step p2p", indent=False)
        cache = W.ToggleButtons(options=_CACHES, description="cache queue", style=style)
        for ctl, name in ((sched, "schedule"), (sched_b, "schedule_b"), (p, "p"), (v, "v"), (grouping, "grouping"),
                          (f, "f_ms"), (b, "b_ms"), (lat, "latency_ms"), (act, "activation_MiB"), (lock, "lockstep"),
                          (cache, "cache")):
            W.link((state, name), (ctl, "value"))
        # the slider clamps to 1..max; values outside reach the trait only from code (and show a message)
        link_clamped(state, "m", m)
        self.walker = StepWalker(state, "step", description="time step")
        self.step_text = W.HTML()
        self.summary = W.HTML()
        self.controls = W.VBox([W.HBox([sched, sched_b, grouping]), W.HBox([p, v, m]),
                                W.HBox([f, b, lat, act]), W.HBox([lock, cache])])
        self.control_widgets = {"schedule": sched, "schedule_b": sched_b, "p": p, "v": v, "m": m, "grouping": grouping,
                                "f_ms": f, "b_ms": b, "latency_ms": lat, "activation_MiB": act, "lockstep": lock,
                                "cache": cache}
        super().__init__(state, session=session, autostart=False, **kw)
        self.children = [self.controls, self.status, self.summary, self.walker, self.step_text,
                         self.figure_view("gantt_a"), self.figure_view("gantt_b"), self.figure_view("cache"),
                         self.download_area]
        self._start()

    # -- Panel -------------------------------------------------------------------
    def _run(self, name: str) -> pp.PipelineResult:
        st = self.state
        opts = {"grouping": st.grouping} if name == "interleaved_1f1b" else {}
        sched = pp.make_schedule(name, st.p, st.v, st.m, **opts)
        cache = None if st.cache == "none" else st.cache
        # the times are one rank's share of the model; a schedule with v chunks per rank cuts
        # that share into v stages, so both schedules run the same model and compare fairly
        v = max(1, sched.n_stages // sched.p)
        return pp.simulate(sched, costs={"F": st.f_ms * 1e-3 / v, "B": st.b_ms * 1e-3 / v,
                                         "activation_bytes": st.activation_MiB * 2**20},
                           comm={"latency_s": st.latency_ms * 1e-3, "lockstep": st.lockstep}, cache=cache)

    def compute(self) -> PipelineView:
        st = self.state
        for name, val, lo in (("p", st.p, 1), ("v", st.v, 1), ("m", st.m, 1)):
            if val < lo:
                raise HetschedError(f"{name} must be at least {lo}, got {val}", field=name)
        for name, val in (("forward time", st.f_ms), ("backward time", st.b_ms), ("p2p latency", st.latency_ms)):
            if val < 0:
                raise HetschedError(f"{name} must be >= 0 ms, got {val}", field=name)
        return PipelineView(self._run(st.schedule), self._run(st.schedule_b))

    def on_result(self, r: PipelineView) -> None:
        n = int(r.a.metrics["n_actions"])
        self._starts_b = np.sort(np.asarray(r.b.start_s, float))
        # view traits set here do not redraw on their own (Panel.on_result)
        self.walker.set_count(n - 1)

    def moment(self) -> tuple[float, dict, dict]:
        """``(time_s, state of A, state of B)`` at the current time step (``replay`` of each result)."""
        r = self.result
        k = min(self.state.step, int(r.a.metrics["n_actions"]) - 1)
        sa = r.a.replay(k)
        t = sa["time_s"]
        kb = int(np.searchsorted(self._starts_b, t, side="right")) - 1
        sb = r.b.replay(max(-1, min(kb, len(self._starts_b) - 1)))
        return t, sa, sb

    def _gantt(self, r: pp.PipelineResult, label: str, t: float | None = None):
        s = r.schedule
        m = r.metrics
        fig = gantt(_gantt_frame(r), color_by="action", label_by="label", shade_by="chunk" if s.v > 1 else None,
                    title=f"{label}: {s.name} (p={s.p}, v={s.v}, m={s.m}): makespan {_ms(m['makespan_s'])}, "
                          f"bubble {m['bubble_fraction']:.1%}", height=110 + 34 * s.p, cursor_s=t)
        return fig

    def _cache_fig(self, r: PipelineView):
        design = "sender" if self.state.cache == "none" else self.state.cache
        fig = cache_depth(pp.cache_trace(r.a.schedule, design),
                          title=f"A: {design} cache-queue depth per unit step (items held)")
        return fig

    def _render_text(self, r: PipelineView) -> None:
        rows = []
        for lab, res in (("A", r.a), ("B", r.b)):
            pr = res.per_rank
            peak = ", ".join(f"r{int(a)}: {b / 2**20:.3g}" for a, b in zip(pr["rank"], pr["peak_activation_bytes"]))
            m = res.metrics
            rows.append(f"<tr><td><b>{lab}</b> {html.escape(res.schedule.name)}</td><td>{_ms(m['makespan_s'])}</td>"
                        f"<td>{m['bubble_fraction']:.1%}</td><td>{m['peak_cache_depth']:.0f}</td><td>{peak}</td></tr>")
        self.summary.value = ("<table><tr><th>schedule</th><th>makespan</th><th>bubble fraction</th>"
                              "<th>peak cache depth</th><th>peak activation memory per rank (MiB)</th></tr>"
                              + "".join(rows) + "</table>")
        t, sa, sb = self.moment()
        p = r.a.schedule.p

        def cells(s, rk):
            q = s["queues"].get(rk, [])
            return (f"<td>{html.escape(s['running'].get(rk, 'idle'))}</td><td>{s['in_flight'].get(rk, 0)}</td>"
                    f"<td>{html.escape(', '.join(q)) or '–'}</td>")

        body = "".join(f"<tr><td>rank {rk}</td>{cells(sa, rk)}{cells(sb, rk) if rk < r.b.schedule.p else ''}</tr>"
                       for rk in range(p))
        self.step_text.value = (
            f"<b>t = {_ms(t)}</b> (start of A's action {self.state.step + 1} of {int(r.a.metrics['n_actions'])}; "
            f"{sa['done']} of A's actions done, {sb['done']} of B's)"
            "<table><tr><th></th><th>A runs</th><th>A activations held</th><th>A cache queue</th>"
            "<th>B runs</th><th>B activations held</th><th>B cache queue</th></tr>" + body + "</table>"
        )

    def render(self, r: PipelineView) -> None:
        t = self.moment()[0]
        self.show_figure("gantt_a", self._gantt(r.a, "A", t))
        self.show_figure("gantt_b", self._gantt(r.b, "B", t))
        key = (id(r), self.state.cache)
        if key != getattr(self, "_cache_key", None):  # a time step leaves the queue-depth chart as it is
            self.show_figure("cache", self._cache_fig(r))
            self._cache_key = key
        self._render_text(r)

    def download_items(self, r: PipelineView):
        both = pd.concat([pd.DataFrame([{"schedule": r.a.schedule.name, **r.a.metrics}]),
                          pd.DataFrame([{"schedule": r.b.schedule.name, **r.b.metrics}])], ignore_index=True)
        return [(pp.to_chrome_trace(r.a), "pipeline_A_trace.json"), (pp.to_chrome_trace(r.b), "pipeline_B_trace.json"),
                (r.a.timeline, "pipeline_A_timeline.csv"), (r.b.timeline, "pipeline_B_timeline.csv"),
                (both, "pipeline_metrics.csv"), (pp.to_torch_csv(r.a.schedule), "pipeline_A_torch.csv")]


def _ms(x: float) -> str:
    u, f = time_unit(x)
    return f"{x * f:.4g} {u}"
