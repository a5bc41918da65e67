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

from .core import (IDLE, KIND_COLORS, MAX_BARS, NEUTRAL, PALETTE, bytes_unit, figure_from_dicts, legend_below, legend_height_px,
                   time_unit, title_text)

__all__ = ["schedule_grid", "cache_depth", "patent_queue_figure", "schedule_gantt", "stage_costs_figure", "synthesis_bars",
           "rank_memory_figure", "ACTION_COLORS", "MAX_SEGMENTS", "SYNTH_COLOR"]

#: The synthesized schedule's colour in a comparison (the house's highlight, vermillion).
SYNTH_COLOR = "#D55E00"

#: One colour per action kind, the house's (:data:`hetsched.plot.core.KIND_COLORS`, far apart): forward
#: blue, full backward vermillion, input gradient wine, weight gradient bluish green; idle time is the
#: neutral grey every view uses for idle.
ACTION_COLORS = {**{k: KIND_COLORS[k] for k in "FBIW"}, "idle": IDLE}


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
        yaxis=dict(autorange="reversed", title=title_text("rank"), tickmode="array", tickvals=list(range(schedule.p))),
        xaxis=dict(title=title_text("step")),
        title=title_text(title or f"{schedule.name}: p={schedule.p}, v={schedule.v}, m={schedule.m} "
                             "(colour: chunk; lighter half-steps: backward)"),
        height=120 + 30 * schedule.p, margin=dict(l=50, r=20, t=50, b=40))
    return figure_from_dicts([heat], layout)


_SHORT = {"forward": "fwd", "backward": "bwd"}


def _depth_heatmap(groups: list, xcol: str, f: float, unit: str, *, bins: int = 600) -> tuple[list[dict], dict]:
    """Many queues at once: one row per queue, time in ``bins`` columns, colour = most items held in the bin.

    Exact per bin: the depth carried in at the bin's start and every depth reached inside it.
    """
    t_end = max(float(g[xcol].max()) for _, g in groups) or 1.0
    w = t_end / bins
    edges = np.arange(bins) * w
    z = np.zeros((len(groups), bins))
    for row, (_k, g) in enumerate(groups):
        t = g[xcol].to_numpy(float)
        d = g["depth"].to_numpy(float)
        at = np.searchsorted(t, edges, side="right") - 1
        z[row] = np.where(at >= 0, d[np.maximum(at, 0)], 0.0)
        np.maximum.at(z[row], np.minimum((t / w).astype(np.int64), bins - 1), d)
    names = [f"r{r} {_SHORT[d]}" for (r, d), _ in groups]
    blues = [[i / (len(sequential.Blues) - 1), c] for i, c in enumerate(sequential.Blues)]
    data = [dict(type="heatmap", z=z, x=(edges + w / 2) * f, y=list(range(len(groups))), colorscale=blues, zmin=0,
                 colorbar=dict(title=title_text("items held")), customdata=np.array(names, dtype=object)[:, None].repeat(bins, 1),
                 hovertemplate="%{customdata} at %{x:.4g} " + unit + ": up to %{z} held<extra></extra>")]
    layout = dict(yaxis=dict(tickmode="array", tickvals=list(range(len(groups))), ticktext=names, autorange="reversed",
                             title=title_text("queue (rank, direction)")),
                  height=max(320, min(900, 14 * len(groups) + 120)))
    return data, layout


def cache_depth(trace: pd.DataFrame, *, title: str | None = None, small_multiples: bool = False, cursor_s: float | None = None,
                max_panels: int = 12) -> go.Figure:
    """Depth of each ``(rank, direction)`` queue over time.

    ``trace`` is :func:`~hetsched.pipeline.cache_trace` (x: unit steps) or
    :meth:`~hetsched.pipeline.PipelineResult.queue_trace` (x: seconds). Only queues that ever hold
    something are drawn. ``small_multiples=True`` draws one small panel per queue, stacked with a
    shared x axis; beyond ``max_panels`` queues (a receive buffer per rank at ``p = 64``) it draws
    one heatmap row per queue instead, so the chart stays readable. ``cursor_s`` (seconds, with a
    queue trace) marks an instant by a vertical line.

    >>> from hetsched.pipeline import cache_trace, one_f_one_b
    >>> len(cache_depth(cache_trace(one_f_one_b(3, 4))).data) >= 1
    True
    >>> cache_depth(cache_trace(one_f_one_b(3, 4)), small_multiples=True).layout.grid.rows
    2
    >>> cache_depth(cache_trace(one_f_one_b(3, 4)), small_multiples=True, max_panels=1).data[0].type
    'heatmap'
    """
    xcol = "step" if "step" in trace.columns else "time_s"
    unit, f = ("step", 1.0) if xcol == "step" else time_unit(float(trace[xcol].max()) if len(trace) else 0.0)
    groups = [(k, g) for k, g in trace.groupby(["rank", "direction"], sort=True) if g["depth"].max() > 0]
    xtitle = "step" if xcol == "step" else f"time ({unit})"
    layout = dict(title=title_text(title or "cache queue depth"), xaxis=dict(title=title_text(xtitle)),
                  yaxis=dict(title=title_text("items held")), height=320, margin=dict(l=10, r=10, t=50, b=40))
    if small_multiples and len(groups) > max_panels:
        data, extra = _depth_heatmap(groups, xcol, f, unit)
        layout.update(extra)
    else:
        data = []
        for i, ((r, d), g) in enumerate(groups):
            axis = {} if not small_multiples else dict(xaxis="x", yaxis="y" if i == 0 else f"y{i + 1}")
            # activations in the forward colour, gradients in the backward one (as in the Gantt)
            data.append(dict(type="scatter", x=g[xcol].to_numpy() * f, y=g["depth"].to_numpy(), mode="lines+markers",
                             line=dict(shape="hv", color=ACTION_COLORS["F" if d == "forward" else "B"]), name=f"rank {r} {d}",
                             hovertext=[", ".join(i_) for i_ in g["items"]],
                             hovertemplate="%{x}: depth %{y}<br>%{hovertext}<extra></extra>", **axis))
        if not data:
            data.append(dict(type="scatter", x=[], y=[], mode="lines", name="no queue ever holds an output"))
        if small_multiples and len(groups) > 1:
            n = len(groups)
            layout.update(grid=dict(rows=n, columns=1, pattern="coupled"), height=max(320, 90 * n + 80), showlegend=False)
            for i, ((r, d), _) in enumerate(groups):
                key = "yaxis" if i == 0 else f"yaxis{i + 1}"
                layout[key] = dict(title=title_text(f"r{r} {_SHORT[d]}"), rangemode="tozero")
    if cursor_s is not None and xcol == "time_s":
        layout["shapes"] = [dict(type="line", xref="x", x0=cursor_s * f, x1=cursor_s * f, yref="paper", y0=0, y1=1,
                                 line=dict(color="#D00000", width=2, dash="dot"))]
    return figure_from_dicts(data, layout)


def patent_queue_figure(queues: pd.DataFrame, *, send_interval: tuple[int, int] | None = None,
                        first_group_steps: int | None = None, title: str | None = None) -> go.Figure:
    """The patent's two cache queues by its own rule (:func:`~hetsched.pipeline.patent_queues`), one
    panel each: the last rank's forward queue over its forward micro-steps, the first rank's
    backward queue over its backward micro-steps (the pipeline patent, claims 6-13).

    The send interval ``[r, r + (p + r)(v - 1))`` is shaded (the only micro-steps at which the
    queue head leaves) and the end of the first micro-batch group is a dotted line.

    >>> from hetsched.pipeline import patent_queues, send_interval
    >>> fig = patent_queue_figure(patent_queues(4, 2, 10), send_interval=send_interval(4, 2, 10), first_group_steps=12)
    >>> [d.name for d in fig.data], int(max(fig.data[0].y))
    (['forward cache queue (last rank)', 'backward cache queue (first rank)'], 2)
    """
    data, shapes, annotations = [], [], []
    order = [("forward", "forward cache queue (last rank)"), ("backward", "backward cache queue (first rank)")]
    for i, (direction, name) in enumerate(order):
        q = queues[queues["direction"] == direction].sort_values("micro_step", kind="stable")
        held: list[str] = []
        hover = []
        for a, b, ins, out in zip(q["micro_step"].tolist(), q["depth"].tolist(), q["item_in"].tolist(), q["item_out"].tolist()):
            if isinstance(ins, str):
                held.append(ins)
            if isinstance(out, str) and out in held:
                held.remove(out)
            moves = ", ".join(x for x in (f"pushed {ins}" if isinstance(ins, str) else "", f"sent {out}" if isinstance(out, str) else "") if x)
            hover.append(f"micro-step {a}: {moves or 'nothing in or out'}; holds {', '.join(held) or 'nothing'}")
        ax = "" if i == 0 else str(i + 1)
        rank = int(q["rank"].iloc[0]) if len(q) else 0
        data.append(dict(type="scatter", x=q["micro_step"].to_numpy(), y=q["depth"].to_numpy(), mode="lines+markers",
                         line=dict(shape="hv", color=ACTION_COLORS["F" if direction == "forward" else "B"]), name=name,
                         hovertext=hover, hoverinfo="text", xaxis="x", yaxis=f"y{ax}"))
        if send_interval is not None:
            lo, hi = send_interval
            shapes.append(dict(type="rect", xref="x", x0=lo - 0.5, x1=hi - 0.5, yref=f"y{ax} domain", y0=0, y1=1,
                               fillcolor="#009E73", opacity=0.15, line=dict(width=0), layer="below"))
        if first_group_steps is not None:
            shapes.append(dict(type="line", xref="x", x0=first_group_steps - 0.5, x1=first_group_steps - 0.5,
                               yref=f"y{ax} domain", y0=0, y1=1, line=dict(color="#555555", dash="dot")))
        annotations.append(dict(text=f"rank {rank}, {direction}", xref="x domain", x=0.99, xanchor="right",
                                yref=f"y{ax} domain", y=0.95, yanchor="top", showarrow=False, font=dict(size=14)))
    if send_interval is not None:
        lo, hi = send_interval
        annotations.append(dict(text=f"send interval [{lo}, {hi})", xref="x", x=(lo + hi) / 2 - 0.5, yref="paper", y=1.0,
                                yanchor="bottom", showarrow=False, font=dict(size=14, color="#006B4F")))
    layout = dict(grid=dict(rows=2, columns=1, pattern="coupled"), height=340, showlegend=False,
                  title=title_text(title or "the patent's cache queues (its literal rule, in micro-steps)"),
                  xaxis=dict(title=title_text("micro-step (the rank's own forward or backward steps)")),
                  yaxis=dict(title=title_text("held"), rangemode="tozero"), yaxis2=dict(title=title_text("held"), rangemode="tozero"),
                  shapes=shapes, annotations=annotations, margin=dict(l=10, r=10, t=60, b=40))
    return figure_from_dicts(data, layout)


#: Above this many actions :func:`schedule_gantt` draws one heatmap row per rank instead of segments.
MAX_SEGMENTS = 20_000


def _lane_px(p: int) -> int:
    """Height of one rank's lane: 34 px up to 8 ranks, then shrinking so p = 64 stays on one screen."""
    return 34 if p <= 8 else max(9, 272 // p)


def schedule_gantt(result, *, cursor_s: float | None = None, t_max_s: float | None = None, labels: str | None = "torch",
                   max_labels: int = 400, title: str | None = None, height: int | None = None, max_bars: int = MAX_BARS,
                   max_segments: int = MAX_SEGMENTS) -> go.Figure:
    """A simulated schedule as a Gantt: one row per rank, every action a bar labelled like torch's
    visualiser (``"0F3"``), coloured by kind (:data:`ACTION_COLORS`, later chunks lighter), idle
    time neutral grey.

    Parameters
    ----------
    result : PipelineResult
    cursor_s : float, optional
        A time marked by a vertical line (the step walker's instant). It is the last layout shape,
        so moving it changes one shape and nothing else.
    t_max_s : float, optional
        Right end of the time axis: give two figures the larger makespan to share one axis (and one
        unit) when they are compared.
    labels : {"torch", "microbatch", None}
        Cell text (:meth:`~hetsched.pipeline.Schedule.labels`); ``None`` draws none. Labels are
        dropped above ``max_labels`` actions (unreadable).
    max_bars, max_segments : int
        Up to ``max_bars`` actions: one SVG bar each. Up to ``max_segments``: WebGL line segments
        (thousands of SVG bars freeze a browser), idle time as the grey background. Beyond: one
        heatmap row per rank (the kind running in each of 1200 time bins), so a ``p = 64``,
        ``m = 256`` schedule stays a few hundred KB.

    >>> from hetsched.pipeline import interleaved_1f1b, simulate
    >>> fig = schedule_gantt(simulate(interleaved_1f1b(2, 2, 2), costs={"F": 1e-3, "B": 2e-3}), t_max_s=0.05)
    >>> fig.data[0].text[0], fig.layout.xaxis.range
    ('0F0', (0.0, 50.0))
    >>> r = simulate(interleaved_1f1b(4, 2, 40))
    >>> schedule_gantt(r, max_bars=100).data[0].type, schedule_gantt(r, max_bars=10, max_segments=100).data[0].type
    ('scattergl', 'heatmap')
    """
    s = result.schedule
    m = result.metrics
    makespan = float(m["makespan_s"])
    t_end = max(float(t_max_s if t_max_s is not None else makespan), makespan)
    unit, f = time_unit(t_end)
    n = s.n_actions
    mode = "bars" if n <= max_bars else "lines" if n <= max_segments else "raster"
    st, en = np.asarray(result.start_s, float) * f, np.asarray(result.end_s, float) * f
    rank = s.rank
    chunk = (s.stage // s.p).astype(int)
    lane_px = _lane_px(s.p)
    lanes = np.array([f"rank {r}" for r in range(s.p)], dtype=object)
    data: list[dict] = []
    shapes: list[dict] = []
    text = None
    if mode == "raster":
        bins = 1200
        w = t_end * f / bins
        centres = (np.arange(bins) + 0.5) * w
        z = np.full((s.p, bins), np.nan, dtype=np.float32)
        for r in range(s.p):
            sl = s.rank_slice(r)
            a, b = st[sl], en[sl]
            if not len(a):
                continue
            at = np.searchsorted(a, centres, side="right") - 1
            ok = (at >= 0) & (centres < b[np.maximum(at, 0)])
            z[r, ok] = s.kind[sl][at[ok]] + 0.5
        scale = []
        for k, kind in enumerate("FBIW"):
            scale += [[k / 4, ACTION_COLORS[kind]], [(k + 1) / 4, ACTION_COLORS[kind]]]
        data.append(dict(type="heatmap", z=z, x=centres, y=list(range(s.p)), zmin=0, zmax=4, colorscale=scale, showscale=False,
                         hoverinfo="skip"))
        for kind in "FBIW":  # legend entries (a heatmap has none)
            if (s.kind == "FBIW".index(kind)).any():
                data.append(dict(type="scatter", x=[None], y=[None], mode="markers", name=kind,
                                 marker=dict(color=ACTION_COLORS[kind], symbol="square", size=12)))
    else:
        text = s.labels(labels) if labels and mode == "bars" and n <= max_labels else None
        hover_all = None
        for k, kind in enumerate("FBIW"):
            for c in range(s.v):
                sel = np.flatnonzero((s.kind == k) & (chunk == c))
                if not len(sel):
                    continue
                name = kind if s.v == 1 else f"{kind} chunk {c}"
                frac = 0.55 * c / max(1, s.v - 1)
                color = _shade(ACTION_COLORS[kind], frac)
                if hover_all is None:
                    hover_all = s.labels()
                hover = [f"{a}: {b:.4g}-{e:.4g} {unit}" for a, b, e in zip(hover_all[sel], st[sel], en[sel])]
                if mode == "bars":
                    bar = dict(type="bar", orientation="h", y=lanes[rank[sel]], x=en[sel] - st[sel], base=st[sel].tolist(), name=name,
                               marker=dict(color=color, line=dict(color="#333333", width=0.5)),
                               hovertext=hover, hoverinfo="text", legendgroup=kind)
                    if text is not None:
                        # white on the full colours, dark on the light shades of later chunks
                        bar.update(text=text[sel].tolist(), textposition="inside", insidetextanchor="middle", textangle=0,
                                   textfont=dict(color="white" if frac < 0.3 else "#222222"))
                    data.append(bar)
                else:
                    nan = np.full(len(sel), np.nan, dtype=np.float32)
                    xs = np.column_stack([st[sel], en[sel], nan]).astype(np.float32).ravel()
                    ys = np.column_stack([rank[sel], rank[sel], nan]).astype(np.float32).ravel()
                    data.append(dict(type="scattergl", x=xs, y=ys, mode="lines", name=name, legendgroup=kind,
                                     line=dict(color=color, width=max(2, int(lane_px * 0.7))), hoverinfo="skip"))
                    data.append(dict(type="scattergl", x=((st[sel] + en[sel]) / 2).astype(np.float32), y=rank[sel].astype(np.float32),
                                     mode="markers", marker=dict(color=color, size=3), name=name, legendgroup=kind, showlegend=False,
                                     hovertext=hover, hoverinfo="text"))
    if mode == "bars":
        gaps = result.timeline[result.timeline["kind"] == "bubble"] if len(result.timeline) else None
        if gaps is not None and len(gaps):
            data.append(dict(type="bar", orientation="h", y=gaps["lane"].astype(str).tolist(), x=((gaps["end_s"] - gaps["start_s"]) * f).tolist(),
                             base=(gaps["start_s"] * f).tolist(), name="idle", marker=dict(color=ACTION_COLORS["idle"]), hoverinfo="skip"))
        yaxis = dict(type="category", categoryorder="array", categoryarray=list(reversed(lanes.tolist())))
    else:
        yaxis = dict(tickmode="array", tickvals=list(range(s.p)), ticktext=lanes.tolist(), autorange="reversed",
                     zeroline=False, showgrid=False)
        if t_end > makespan:  # the shared axis runs past this schedule's end: not idle time
            shapes.append(dict(type="rect", xref="x", x0=makespan * f, x1=t_end * f, yref="paper", y0=0, y1=1,
                               fillcolor="#FFFFFF", line=dict(width=0), layer="below"))
    # the legend under the plot: beside it, it scrolled over a few ranks, and two schedules compared
    # on one time axis (A above B) only line up when neither has a legend taking width
    legend_title = "action (lighter: later chunk)" if s.v > 1 else "action"
    entries = {t["name"]: t.get("legendgroup", t["name"]) for t in data if t.get("showlegend", True) is not False and t.get("name")}
    room = legend_height_px(entries, title=legend_title, groups=list(entries.values()))
    layout = dict(barmode="overlay", height=height or 110 + lane_px * s.p + room,
                  margin=dict(l=10, r=10, t=50, b=40),
                  xaxis=dict(title=title_text(f"time ({unit})"), range=[0.0, t_end * f]), yaxis=yaxis,
                  title=title_text(title or f"{s.name} (p={s.p}, v={s.v}, m={s.m}): makespan {makespan * f:.4g} {unit}, "
                                       f"idle {m['bubble_fraction']:.0%} of rank-time"),
                  legend=legend_below(legend_title))
    if mode != "bars":
        layout["plot_bgcolor"] = ACTION_COLORS["idle"]  # gaps between segments read as idle
    if text is not None:
        layout["uniformtext"] = dict(minsize=9, mode="hide")
    if cursor_s is not None:
        shapes.append(dict(type="line", xref="x", x0=cursor_s * f, x1=cursor_s * f, yref="y domain", y0=0, y1=1,
                           line=dict(color="#D00000", width=2, dash="dot")))
    if shapes:
        layout["shapes"] = shapes
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
    layout = dict(barmode="stack", height=360, xaxis=dict(title=title_text("stage (device of its rank)")),
                  yaxis=dict(title=title_text(f"time per micro-batch ({unit})")),
                  title=title_text(title or f"{split.params.get('graph', '')}: {len(ps)} stages, bottleneck {b:.4g} {unit}"),
                  shapes=[dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=b, y1=b, line=dict(color="#D00000", dash="dot"))])
    return figure_from_dicts(data, layout)


def synthesis_bars(table: pd.DataFrame, *, title: str | None = None) -> go.Figure:
    """Makespan of every schedule of a synthesis comparison
    (:func:`~hetsched.pipeline.compare_synthesis`: named rows, the synthesized row, the bound row),
    fastest on top (the synthesized one first among equals), with the lower bound as a dashed line: how far each is from the best possible.

    The synthesized bar is vermillion, named schedules blue, those above the memory cap
    (``fits_cap`` false) grey and marked; each bar says how much slower than the synthesized one it is.

    >>> from hetsched.pipeline import compare_synthesis
    >>> fig = synthesis_bars(compare_synthesis({"F": [1.0, 2.0], "B": [2.0, 4.0]}, p=2, m=4))
    >>> fig.data[0].orientation, list(fig.data[0].y)[:1], fig.layout.shapes[0].line.dash
    ('h', ['synthesized'], 'dash')
    """
    rows = table[table["kind"] != "bound"]
    # fastest first; the synthesized one first among equals (it is the one the others are measured by)
    rows = rows.iloc[np.lexsort(((rows["kind"] != "synthesized").to_numpy(), rows["makespan_s"].to_numpy(float)))]
    bound_row = table[table["kind"] == "bound"]
    bound = float(bound_row["makespan_s"].iloc[0]) if len(bound_row) else None
    span = float(rows["makespan_s"].max()) if len(rows) else (bound or 0.0)
    unit, f = time_unit(span)
    fits = [x is not False and x is not np.False_ for x in rows.get("fits_cap", pd.Series([True] * len(rows), index=rows.index))]
    colors, text, hover = [], [], []
    for kind, ok, vs, mk in zip(rows["kind"], fits, rows["vs_synthesized"], rows["makespan_s"]):
        colors.append(SYNTH_COLOR if kind == "synthesized" else PALETTE[0] if ok else NEUTRAL)
        short = f"{mk * f:.4g} {unit}" + ("" if kind == "synthesized" else f" · {vs:+.1%}") + ("" if ok else " · above the cap")
        text.append(short)
        hover.append(f"{mk * f:.4g} {unit}" + ("" if kind == "synthesized" else f", {vs:+.1%} vs synthesized")
                     + ("" if ok else ", above the memory cap"))
    labels = [str(x) for x in rows["label"]]
    data = [dict(type="bar", orientation="h", y=labels, x=(rows["makespan_s"] * f).tolist(), marker=dict(color=colors),
                 text=text, textposition="inside", insidetextanchor="end", textfont=dict(size=12), name="makespan",
                 showlegend=False, hovertext=[f"{lab}: {t}" for lab, t in zip(labels, hover)], hoverinfo="text")]
    shapes, notes = [], []
    if bound is not None:
        shapes.append(dict(type="line", xref="x", x0=bound * f, x1=bound * f, yref="y domain", y0=0, y1=1,
                           line=dict(color="#000000", dash="dash", width=2)))
        notes.append(dict(showarrow=False, text=f"lower bound {bound * f:.4g} {unit}", x=bound * f, xref="x", xanchor="right",
                          y=1, yref="y domain", yanchor="bottom"))
    layout = dict(height=max(240, 110 + 30 * len(labels)), bargap=0.2, shapes=shapes, annotations=notes,
                  uniformtext=dict(minsize=11, mode="show"),
                  xaxis=dict(title=title_text(f"makespan ({unit})"), rangemode="tozero"),
                  yaxis=dict(autorange="reversed", automargin=True), margin=dict(l=10, r=10, t=60, b=40),
                  title=title_text(title or "every schedule on the same costs, and the lower bound"))
    return figure_from_dicts(data, layout)


def rank_memory_figure(table: pd.DataFrame, *, cap_bytes=None, title: str | None = None) -> go.Figure:
    """Activation memory per rank (``peak_bytes_rank<r>`` of a synthesis comparison): one line per
    schedule (schedules holding the same on every rank share one), the synthesized one thick and
    vermillion, the memory cap per rank dashed.

    >>> from hetsched.pipeline import compare_synthesis
    >>> t = compare_synthesis({"F": 1.0, "B": 2.0, "activation_bytes": 1e6}, p=2, m=4, memory_cap_bytes="1f1b")
    >>> fig = rank_memory_figure(t, cap_bytes=[2e6, 1e6])
    >>> [d.name for d in fig.data][-2:], list(fig.data[-1].x)
    (['synthesized', 'memory cap'], ['rank 0', 'rank 1'])
    """
    cols = sorted((c for c in table.columns if str(c).startswith("peak_bytes_rank")), key=lambda c: int(str(c)[15:]))
    rows = table[table["kind"] != "bound"]
    caps = None if cap_bytes is None else np.broadcast_to(np.asarray(cap_bytes, float), (len(cols),))
    finite_caps = caps[np.isfinite(caps)] if caps is not None else np.zeros(0)
    top = max(float(np.nanmax(rows[cols].to_numpy(float))) if len(rows) and cols else 0.0,
              float(finite_caps.max()) if len(finite_caps) else 0.0)
    unit, f = bytes_unit(top)
    x = [f"rank {str(c)[15:]}" for c in cols]
    data = []
    named = rows[rows["kind"] != "synthesized"]
    # schedules that hold the same memory on every rank (groupings of one schedule) share one line
    same: dict[tuple, list[str]] = {}
    for lab, vals in zip(named["label"], named[cols].to_numpy(float)):
        same.setdefault(tuple(np.round(vals, 6)), []).append(str(lab))
    for i, (vals, labs) in enumerate(same.items()):
        name = labs[0] + (f" (and {len(labs) - 1} more)" if len(labs) > 1 else "")
        data.append(dict(type="scatter", mode="lines+markers", x=x, y=(np.asarray(vals) * f).tolist(), name=name,
                         line=dict(color=PALETTE[(i + 1) % len(PALETTE)], width=1.5), marker=dict(size=6), opacity=0.8,
                         hovertext=[", ".join(labs)] * len(x), hoverinfo="text+y"))
    for lab, vals in zip(rows[rows["kind"] == "synthesized"]["label"], rows[rows["kind"] == "synthesized"][cols].to_numpy(float)):
        data.append(dict(type="scatter", mode="lines+markers", x=x, y=(vals * f).tolist(), name=str(lab),
                         line=dict(color=SYNTH_COLOR, width=4), marker=dict(size=9)))
    if caps is not None and len(finite_caps):
        data.append(dict(type="scatter", mode="lines", x=x, y=[c * f if np.isfinite(c) else None for c in caps], name="memory cap",
                         line=dict(color="#000000", dash="dash", width=2, shape="hvh")))
    names = [d["name"] for d in data]
    layout = dict(height=300 + legend_height_px(names, width_px=600), legend=legend_below(),
                  xaxis=dict(title=title_text("rank")), yaxis=dict(title=title_text(f"activation memory at its peak ({unit})"),
                                                                   rangemode="tozero"),
                  margin=dict(l=10, r=10, t=60, b=20 + legend_height_px(names, width_px=600)),
                  title=title_text(title or "memory per rank: the most activations each rank holds at once"))
    return figure_from_dicts(data, layout)
