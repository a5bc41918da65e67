"""Pipeline-schedule figures (pure, never mutate input): the step x rank grid, a labelled Gantt of a
simulation, cache-queue depths and a split's per-stage costs.

>>> from hetsched.pipeline import interleaved_1f1b, cache_trace
>>> fig = schedule_grid(interleaved_1f1b(2, 2, 3))
>>> fig.data[0].type
'heatmap'
>>> cache_depth(cache_trace(interleaved_1f1b(4, 2, 10, grouping="paddle"))).data[0].type
'scatter'
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import sequential

from .core import _text, figure_from_dicts, time_unit

__all__ = ["schedule_grid", "cache_depth", "schedule_gantt", "stage_costs_figure", "ACTION_COLORS"]

#: One colour per action kind, far apart (Okabe & Ito): forward blue, full backward vermillion,
#: input gradient reddish purple, weight gradient bluish green; idle time is a neutral grey.
ACTION_COLORS = {"F": "#0072B2", "B": "#D55E00", "I": "#CC79A7", "W": "#009E73", "idle": "#E5E5E5"}


def _shade(hex_color: str, frac: float) -> str:
    """``hex_color`` mixed with white by ``frac`` (0: itself, 1: white): lighter for later chunks."""
    rgb = [int(hex_color[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * frac):02x}" for c in rgb)

# "Turbo" spelled out the way Plotly's validator expands a named scale (plotly.js has no "Turbo")
_TURBO = [[i / (len(sequential.Turbo) - 1), c] for i, c in enumerate(sequential.Turbo)]


def schedule_grid(schedule, *, steps: np.ndarray | None = None, max_steps: int = 400, title: str | None = None) -> go.Figure:
    """Heatmap of a schedule: rows are ranks, columns unit steps, colour the chunk (backward darker).

    ``steps`` (one per action) defaults to the unit-time grid of :func:`hetsched.pipeline.cache.unit_steps`,
    so idle steps show as gaps, like torch's ``_format_pipeline_order`` table.

    >>> from hetsched.pipeline import one_f_one_b
    >>> schedule_grid(one_f_one_b(2, 2)).data[0].z.shape   # 2 ranks x 6 unit steps (rank 0 ends 0B1 at step 5)
    (2, 6)
    """
    from ..pipeline.cache import unit_steps

    if steps is None:
        steps, _ = unit_steps(schedule)
    n_steps = int(min(max_steps, steps.max() + 1 if len(steps) else 0))
    z = np.full((schedule.p, n_steps), np.nan)
    text = np.full((schedule.p, n_steps), "", dtype=object)
    rank = schedule.rank
    keep = steps < n_steps
    chunk = schedule.stage // schedule.p
    val = chunk + np.where(schedule.kind == 0, 0.0, 0.5)
    z[rank[keep], steps[keep]] = val[keep]
    text[rank[keep], steps[keep]] = schedule.labels()[keep]
    heat = dict(type="heatmap", z=z, text=text, hovertemplate="rank %{y}, step %{x}: %{text}<extra></extra>",
                colorscale=_TURBO, showscale=False, xgap=1, ygap=1)
    if n_steps <= 60:
        heat["texttemplate"] = "%{text}"
    layout = dict(
        yaxis=dict(autorange="reversed", title=_text("rank"), tickmode="array", tickvals=list(range(schedule.p))),
        xaxis=dict(title=_text("step")),
        title=_text(title or f"{schedule.name}: p={schedule.p}, v={schedule.v}, m={schedule.m} "
                             "(colour: chunk; lighter half-steps: backward)"),
        height=120 + 30 * schedule.p, margin=dict(l=50, r=20, t=50, b=40))
    return figure_from_dicts([heat], layout)


def cache_depth(trace: pd.DataFrame, *, title: str | None = None, small_multiples: bool = False) -> go.Figure:
    """Depth of each ``(rank, direction)`` queue over time.

    ``trace`` is :func:`~hetsched.pipeline.cache_trace` (x: unit steps) or
    :meth:`~hetsched.pipeline.PipelineResult.queue_trace` (x: seconds). ``small_multiples=True``
    draws one small panel per queue, stacked with a shared x axis (readable for many ranks).

    >>> from hetsched.pipeline import cache_trace, one_f_one_b
    >>> len(cache_depth(cache_trace(one_f_one_b(3, 4))).data) >= 1
    True
    >>> cache_depth(cache_trace(one_f_one_b(3, 4)), small_multiples=True).layout.grid.rows
    2
    """
    xcol = "step" if "step" in trace.columns else "time_s"
    unit, f = ("step", 1.0) if xcol == "step" else time_unit(float(trace[xcol].max()) if len(trace) else 0.0)
    groups = [(k, g) for k, g in trace.groupby(["rank", "direction"], sort=True) if g["depth"].max() > 0]
    data = []
    for i, ((r, d), g) in enumerate(groups):
        axis = {} if not small_multiples else dict(xaxis="x", yaxis="y" if i == 0 else f"y{i + 1}")
        data.append(dict(type="scatter", x=g[xcol].to_numpy() * f, y=g["depth"].to_numpy(), mode="lines+markers",
                         line=dict(shape="hv"), name=f"rank {r} {d}",
                         hovertext=[", ".join(i_) for i_ in g["items"]],
                         hovertemplate="%{x}: depth %{y}<br>%{hovertext}<extra></extra>", **axis))
    if not data:
        data.append(dict(type="scatter", x=[], y=[], mode="lines", name="no queue ever holds an output"))
    xtitle = "step" if xcol == "step" else f"time ({unit})"
    layout = dict(title=_text(title or "cache queue depth"), xaxis=dict(title=_text(xtitle)),
                  yaxis=dict(title=_text("items held")), height=320)
    if small_multiples and len(groups) > 1:
        n = len(groups)
        layout.update(grid=dict(rows=n, columns=1, pattern="coupled"), height=max(320, 90 * n + 80), showlegend=False)
        for i, ((r, d), _) in enumerate(groups):
            key = "yaxis" if i == 0 else f"yaxis{i + 1}"
            layout[key] = dict(title=_text(f"r{r} {d[:3]}"), rangemode="tozero")
    return figure_from_dicts(data, layout)


def schedule_gantt(result, *, cursor_s: float | None = None, t_max_s: float | None = None, labels: str | None = "torch",
                   max_labels: int = 400, title: str | None = None, height: int | None = None) -> go.Figure:
    """A simulated schedule as a Gantt: one row per rank, every action a bar labelled like torch's
    visualiser (``"0F3"``), coloured by kind (:data:`ACTION_COLORS`, later chunks lighter), idle
    time neutral grey.

    Parameters
    ----------
    result : PipelineResult
    cursor_s : float, optional
        A time marked by a vertical line (the step walker's instant).
    t_max_s : float, optional
        Right end of the time axis: give two figures the larger makespan to share one axis (and one
        unit) when they are compared.
    labels : {"torch", "microbatch", None}
        Cell text (:meth:`~hetsched.pipeline.Schedule.labels`); ``None`` draws none. Labels are
        dropped above ``max_labels`` actions (unreadable).

    >>> from hetsched.pipeline import interleaved_1f1b, simulate
    >>> fig = schedule_gantt(simulate(interleaved_1f1b(2, 2, 2), costs={"F": 1e-3, "B": 2e-3}), t_max_s=0.05)
    >>> fig.data[0].text[0], fig.layout.xaxis.range
    ('0F0', (0.0, 50.0))
    """
    s = result.schedule
    t_end = float(t_max_s if t_max_s is not None else result.metrics["makespan_s"])
    unit, f = time_unit(t_end)
    st, en = np.asarray(result.start_s, float) * f, np.asarray(result.end_s, float) * f
    rank = s.rank
    lanes = np.array([f"rank {r}" for r in range(s.p)], dtype=object)
    text = s.labels(labels) if labels and s.n_actions <= max_labels else None
    chunk = (s.stage // s.p).astype(int)
    data = []
    for k, kind in enumerate("FBIW"):
        for c in range(s.v):
            sel = np.flatnonzero((s.kind == k) & (chunk == c))
            if not len(sel):
                continue
            name = kind if s.v == 1 else f"{kind} chunk {c}"
            bar = dict(type="bar", orientation="h", y=lanes[rank[sel]], x=en[sel] - st[sel], base=st[sel].tolist(), name=name,
                       marker=dict(color=_shade(ACTION_COLORS[kind], 0.55 * c / max(1, s.v - 1)), line=dict(color="#333333", width=0.5)),
                       hovertext=[f"{a}: {b:.4g}-{e:.4g} {unit}" for a, b, e in zip(s.labels()[sel], st[sel], en[sel])],
                       hoverinfo="text", legendgroup=kind)
            if text is not None:
                bar.update(text=text[sel].tolist(), textposition="inside", insidetextanchor="middle", textfont=dict(color="white"))
            data.append(bar)
    gaps = result.timeline[result.timeline["kind"] == "bubble"] if len(result.timeline) else None
    if gaps is not None and len(gaps):
        data.append(dict(type="bar", orientation="h", y=gaps["lane"].astype(str).tolist(), x=((gaps["end_s"] - gaps["start_s"]) * f).tolist(),
                            base=(gaps["start_s"] * f).tolist(), name="idle", marker=dict(color=ACTION_COLORS["idle"]), hoverinfo="skip"))
    m = result.metrics
    layout = dict(barmode="overlay", height=height or 110 + 34 * s.p, margin=dict(l=10, r=10, t=50, b=40),
                  xaxis=dict(title=_text(f"time ({unit})"), range=[0.0, t_end * f]),
                  yaxis=dict(type="category", categoryorder="array", categoryarray=list(reversed(lanes.tolist()))),
                  title=_text(title or f"{s.name} (p={s.p}, v={s.v}, m={s.m}): makespan {m['makespan_s'] * f:.4g} {unit}, "
                                       f"idle {m['bubble_fraction']:.0%} of rank-time"),
                  legend=dict(title=_text("action")))
    if cursor_s is not None:
        layout["shapes"] = [dict(type="line", xref="x", x0=cursor_s * f, x1=cursor_s * f, yref="y domain", y0=0, y1=1,
                                 line=dict(color="#D00000", width=2, dash="dot"))]
    return figure_from_dicts(data, layout)


def stage_costs_figure(split, *, title: str | None = None) -> go.Figure:
    """Per-stage times of a :class:`~hetsched.pipeline.StageSplit`: stacked F, I, W bars per stage
    (labelled with the rank's device), the link time of each cut as a marker, the bottleneck as a line.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.pipeline import split_stages
    >>> fig = stage_costs_figure(split_stages(chain(8), toy_system(), devices=["gpu0", "cpu0"], p=2))
    >>> [d.name for d in fig.data]
    ['F', 'I', 'W', 'send']
    """
    ps = split.per_stage
    span = float(max(ps["time_s"].max(), ps["send_s"].max(), 1e-12))
    unit, f = time_unit(span)
    x = [f"{s} ({d})" for s, d in zip(ps["stage"], ps["device"])]
    data = [dict(type="bar", x=x, y=(ps[col] * f).tolist(), name=kind, marker=dict(color=ACTION_COLORS[kind]),
                 hovertext=[f"{kind}: {v * f:.4g} {unit}; {a} .. {b}" for v, a, b in zip(ps[col], ps["first"], ps["last"])], hoverinfo="text")
            for kind, col in (("F", "f_s"), ("I", "i_s"), ("W", "w_s"))]
    data.append(dict(type="scatter", x=x, y=(ps["send_s"] * f).tolist(), mode="markers", name="send",
                     marker=dict(color="#000000", symbol="diamond", size=9),
                     hovertext=[f"sends {b / 2**20:.3g} MiB in {t * f:.4g} {unit}" for b, t in zip(ps["activation_bytes"], ps["send_s"])],
                     hoverinfo="text"))
    b = split.metrics["bottleneck_s"] * f
    layout = dict(barmode="stack", height=360, xaxis=dict(title=_text("stage (device of its rank)")),
                  yaxis=dict(title=_text(f"time per micro-batch ({unit})")),
                  title=_text(title or f"{split.params.get('graph', '')}: {len(ps)} stages, bottleneck {b:.4g} {unit}"),
                  shapes=[dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=b, y1=b, line=dict(color="#D00000", dash="dot"))])
    return figure_from_dicts(data, layout)
