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

from .core import PALETTE, _text, bytes_unit, figure_from_dicts, memory_curve

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
    bar = dict(
        type="bar", y=a["tensor"].astype(str).tolist(), x=(a["end_s"] - a["start_s"]).to_numpy(float),
        base=a["start_s"].to_numpy(float).tolist(), orientation="h", marker=dict(color=PALETTE[0]),
        customdata=(a["bytes"].to_numpy(float) * f),
        hovertemplate="%{y}: steps %{base:.0f}-%{x:.0f}<br>%{customdata:.3g} " + unit + "<extra></extra>",
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
