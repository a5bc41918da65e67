"""Figures for operator ordering (seed 002): memory curves of several orders, tensor lifetimes.

Pure functions returning ``go.Figure``; they never mutate their input.

>>> from hetsched.io.generators import fork_join
>>> from hetsched.memory import order_bfs, order_dfs
>>> g = fork_join(3, 2)
>>> fig = order_curves({"bfs": order_bfs(g), "dfs": order_dfs(g)})
>>> len(fig.data)
2
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .core import PALETTE, _text, bytes_unit, figure_from_dicts, memory_curve

__all__ = ["order_curves", "lifetime_chart", "live_bars", "walk_curves"]


def order_curves(results: Mapping[str, Any] | Sequence[Any], *, capacity: float | None = None,
                 lower_bound: float | None = None, title: str | None = None) -> go.Figure:
    """Live bytes per step of several :class:`~hetsched.memory.OrderResult`, one line each.

    ``results`` maps a label to a result (or is a list: labels are the results' ``method``).
    The lower bound defaults to the first result's ``lower_bound_bytes``.
    """
    items = list(results.items()) if isinstance(results, Mapping) else [(r.method, r) for r in results]
    frames = [r.curve.assign(method=f"{k} ({r.peak_bytes:,} B)") for k, r in items]
    curve = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["step", "bytes", "method"])
    if lower_bound is None and items:
        lower_bound = items[0][1].lower_bound_bytes
    return memory_curve(curve, capacity, x="step", by="method", lower_bound=lower_bound, title=title)


def lifetime_chart(result: Any, *, max_tensors: int = 200, title: str | None = None) -> go.Figure:
    """Each storage as a horizontal bar from its allocation step to its free step (the ``alloc``
    rows of the result's timeline), bar thickness ~ size; the peak step is marked."""
    tl = result.timeline
    a = tl[tl["kind"] == "alloc"].sort_values("bytes", ascending=False, kind="stable").head(max_tensors)
    # the timeline is in seconds: its compute rows (one per step, back to back) map times to steps
    comp = tl[tl["kind"] == "compute"]
    starts, ends = comp["start_s"].to_numpy(float), comp["end_s"].to_numpy(float)
    a = a.assign(start_s=np.searchsorted(starts, a["start_s"].to_numpy(float), side="right") - 1.0,
                 end_s=np.searchsorted(ends, a["end_s"].to_numpy(float), side="left") + 1.0)
    a = a.sort_values(["start_s", "end_s"], kind="stable")
    unit, f = bytes_unit(float(a["bytes"].max()) if len(a) else 0.0)
    bar = dict(
        type="bar", y=a["tensor"].astype(str).tolist(), x=(a["end_s"] - a["start_s"]).to_numpy(float),
        base=a["start_s"].to_numpy(float).tolist(), orientation="h", marker=dict(color=PALETTE[0]),
        customdata=(a["bytes"].to_numpy(float) * f),
        hovertemplate="%{y}: from step %{base:.0f}, %{x:.0f} steps<br>%{customdata:.3g} " + unit + "<extra></extra>",
    )
    layout = dict(xaxis=dict(title=_text("step")), yaxis=dict(title=_text("tensor"), autorange="reversed"),
                  height=max(250, 14 * len(a) + 80), margin=dict(l=10, r=10, t=40 if title else 20, b=40))
    layout["title"] = _text(title)
    if len(result.curve):
        peak_step = int(result.curve["bytes"].to_numpy().argmax())
        # what fig.add_vrect(x0, x1, fillcolor=..., opacity=0.2, line_width=0, annotation_text=...) makes
        layout["shapes"] = [dict(type="rect", xref="x", x0=peak_step, x1=peak_step + 1, yref="y domain", y0=0, y1=1,
                                 fillcolor="#D55E00", opacity=0.2, line=dict(width=0))]
        layout["annotations"] = [dict(showarrow=False, text="peak step", x=peak_step + 1, xanchor="right", xref="x",
                                      y=1, yanchor="top", yref="y domain")]
    return figure_from_dicts([bar], layout)


def _fmt(x: float) -> str:
    unit, f = bytes_unit(x)
    return f"{x * f:.3g} {unit}"


def live_bars(live: pd.DataFrame, *, top: int = 20, title: str | None = None) -> go.Figure:
    """Horizontal bars of the tensors live at a step (:func:`hetsched.memory.live_at` /
    :func:`~hetsched.memory.live_at_peak`), largest first, the largest ``top`` shown.

    >>> from hetsched.io.generators import fork_join
    >>> from hetsched.memory import live_at_peak
    >>> g = fork_join(3, 2); _, live = live_at_peak(g, g.topological_order())
    >>> list(live_bars(live, top=2).data[0].y) == live["tensor"].head(2).tolist()
    True
    """
    shown = live.head(max(1, int(top)))
    unit, f = bytes_unit(float(shown["bytes"].max()) if len(shown) else 0.0)
    total = int(live["bytes"].sum()) if len(live) else 0
    bar = dict(
        type="bar", orientation="h", x=(shown["bytes"].astype(float) * f).tolist(), y=shown["tensor"].astype(str).tolist(),
        marker=dict(color=PALETTE[0]),
        hovertext=[f"{t}: {_fmt(b)}, live steps {a}-{e}" for t, b, a, e in
                   zip(shown["tensor"], shown["bytes"], shown["alloc_step"], shown["free_step"])],
        hoverinfo="text")
    layout = dict(title=_text(title or f"tensors live at the peak ({len(live)} tensors, {_fmt(total)}; "
                                       f"largest {len(shown)} shown)"),
                  xaxis=dict(title=_text(f"size ({unit})")), yaxis=dict(autorange="reversed", type="category"),
                  height=max(260, 60 + 18 * len(shown)), margin=dict(l=10, r=10, t=40, b=40))
    return figure_from_dicts([bar], layout)


def walk_curves(state: Mapping[str, Any], *, overlays: Mapping[str, Any] | None = None,
                lower_bound: float | None = None, label: str = "order", title: str | None = None) -> go.Figure:
    """The memory curve a step walker shows: ``state`` from :func:`hetsched.memory.walk_state`.

    The current order (a traversal's prefix while it is being built) is drawn thick, each overlay
    (``{name: OrderResult}``) thin, the lower bound dashed, the peak step marked, and the steps a
    fine-tune move changed shaded.

    >>> from hetsched.io.generators import fork_join
    >>> from hetsched.memory import order_bfs, walk_state
    >>> g = fork_join(2, 2); r = order_bfs(g)
    >>> fig = walk_curves(walk_state(g, r, 3), overlays={"bfs": r}, lower_bound=r.lower_bound_bytes)
    >>> [t.name.split(" ")[0] for t in fig.data]
    ['bfs', 'order', 'peak']
    """
    frames = []
    for name, res in (overlays or {}).items():
        frames.append(res.curve[["step", "bytes"]].assign(order=f"{name} (peak {_fmt(res.peak_bytes)})"))
    cur = state["curve"]
    what = f"{label} so far" if state.get("partial") else label
    cur_name = f"{what} (peak {_fmt(state['peak_bytes'])})"
    frames.append(cur[["step", "bytes"]].assign(order=cur_name))
    frame = pd.concat(frames, ignore_index=True)
    fig = memory_curve(frame, x="step", by="order", lower_bound=lower_bound, title=title)
    for t in fig.data:
        if t.name == cur_name:
            t.line.width = 4
    unit, f = bytes_unit(max(float(state["peak_bytes"]), float(lower_bound or 0.0)))
    if len(cur):
        p = int(state["peak_step"])
        fig.add_trace(go.Scatter(x=[p], y=[state["peak_bytes"] * f], mode="markers",
                                 marker=dict(size=12, symbol="x", color="#D00000"), name="peak",
                                 hovertext=[f"peak {_fmt(state['peak_bytes'])} at step {p} ({state['order'][p]})"],
                                 hoverinfo="text"))
    ch = state.get("changed")
    if ch:
        fig.add_vrect(x0=ch[0] - 0.5, x1=ch[1] + 0.5, fillcolor="#F0E442", opacity=0.25, line_width=0,
                      annotation_text="changed by this move", annotation_position="top left")
    return fig
