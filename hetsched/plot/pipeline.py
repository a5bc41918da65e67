"""Pipeline-schedule figures: the step x rank grid and cache-queue depth (pure, never mutate input).

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

from .core import _text, figure_from_dicts

__all__ = ["schedule_grid", "cache_depth"]

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
    labels = np.array([f"{s}{'FBIW'[k]}{j}" for s, k, j in zip(schedule.stage.tolist(), schedule.kind.tolist(), schedule.microbatch.tolist())], dtype=object)
    text[rank[keep], steps[keep]] = labels[keep]
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


def cache_depth(trace: pd.DataFrame, *, title: str | None = None) -> go.Figure:
    """Depth of each ``(rank, direction)`` queue after every step, from :func:`~hetsched.pipeline.cache_trace`.

    >>> from hetsched.pipeline import cache_trace, one_f_one_b
    >>> len(cache_depth(cache_trace(one_f_one_b(3, 4))).data) >= 1
    True
    """
    data = []
    for (r, d), g in trace.groupby(["rank", "direction"], sort=True):
        if g["depth"].max() == 0:
            continue
        data.append(dict(type="scatter", x=g["step"].to_numpy(), y=g["depth"].to_numpy(), mode="lines+markers",
                         line=dict(shape="hv"), name=f"rank {r} {d}",
                         hovertext=[", ".join(i) for i in g["items"]],
                         hovertemplate="step %{x}: depth %{y}<br>%{hovertext}<extra></extra>"))
    if not data:
        data.append(dict(type="scatter", x=[], y=[], mode="lines", name="no queue ever holds an output"))
    layout = dict(title=_text(title or "cache queue depth"), xaxis=dict(title=_text("step")),
                  yaxis=dict(title=_text("items held")), height=320)
    return figure_from_dicts(data, layout)
