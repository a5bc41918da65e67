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

import pandas as pd
import plotly.graph_objects as go

from .core import PALETTE, bytes_unit, memory_curve

__all__ = ["order_curves", "lifetime_chart"]


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
    a = a.sort_values(["start_s", "end_s"], kind="stable")
    unit, f = bytes_unit(float(a["bytes"].max()) if len(a) else 0.0)
    fig = go.Figure(go.Bar(
        y=a["tensor"].astype(str), x=(a["end_s"] - a["start_s"]).to_numpy(float), base=a["start_s"].to_numpy(float),
        orientation="h", marker_color=PALETTE[0],
        customdata=(a["bytes"].to_numpy(float) * f),
        hovertemplate="%{y}: steps %{base:.0f}-%{x:.0f}<br>%{customdata:.3g} " + unit + "<extra></extra>",
    ))
    if len(result.curve):
        peak_step = int(result.curve["bytes"].to_numpy().argmax())
        fig.add_vrect(x0=peak_step, x1=peak_step + 1, fillcolor="#D55E00", opacity=0.2, line_width=0,
                      annotation_text="peak step")
    fig.update_layout(title=title, xaxis_title="step", yaxis_title="tensor", template="plotly_white",
                      height=max(250, 14 * len(a) + 80), margin=dict(l=10, r=10, t=40 if title else 20, b=40))
    fig.update_yaxes(autorange="reversed")
    return fig
