"""Figures of expert placement (:mod:`hetsched.moe`): which device holds which expert of which layer.

:func:`expert_grid` draws one square per (MoE layer, expert), in the colour of the device holding
it, its expected share of the routed tokens written inside. A walk through a mapper's decisions
redraws it with the experts placed so far (the rest neutral) and the expert the decision is about
ringed; the traces stay the same from one decision to the next (one per device, one for the
experts not placed yet, one ring), so a step click sends a few small arrays.

>>> import pandas as pd
>>> t = pd.DataFrame({"layer": [0, 0], "expert": [0, 1], "op": ["moe0.expert0", "moe0.expert1"],
...                   "device": ["gpu0", "gpu1"], "share": [0.6, 0.4], "flops": [6e9, 4e9],
...                   "weight_bytes": [1e6, 1e6]})
>>> fig = expert_grid(t, ["gpu0", "gpu1"])
>>> [tr.name for tr in fig.data], list(fig.data[0].x)
(['gpu0', 'gpu1', 'not placed yet', 'this decision'], [0])
>>> [tr.name for tr in expert_grid(t, ["gpu0", "gpu1"], placed={}).data] == [tr.name for tr in fig.data]
True
"""

from __future__ import annotations

import html
from typing import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from .core import NEUTRAL, color_map, figure_from_dicts, fmt_bytes, title_text

__all__ = ["expert_grid", "UNPLACED"]

#: the legend name of experts no decision has placed yet
UNPLACED = "not placed yet"


def expert_grid(assignment: pd.DataFrame, devices: Sequence[str], *, colors: Mapping[str, str] | None = None,
                placed: Mapping[str, str] | None = None, highlight: str | None = None, title: str | None = None,
                height: int | None = None) -> go.Figure:
    """Layer x expert grid coloured by device.

    Parameters
    ----------
    assignment : DataFrame
        :func:`hetsched.moe.expert_assignment` of a result (``layer, expert, op, device, share,
        flops, weight_bytes``).
    devices : sequence of str
        Every device (one legend entry and colour each, used or not: the traces stay the same).
    placed : mapping, optional
        Op -> device at the decision shown (an expert missing from it is drawn neutral); default:
        the final ``device`` column.
    highlight : str, optional
        The expert op a decision is about: ringed.
    """
    devices = [str(d) for d in devices]
    cmap = color_map(devices, base=colors)
    where = dict(zip(assignment["op"], assignment["device"])) if placed is None else dict(placed)
    cells: dict[str, list] = {d: [] for d in [*devices, UNPLACED]}
    ring = None
    for r in assignment.itertuples(index=False):
        d = where.get(r.op)
        key = str(d) if d is not None and str(d) in cells else UNPLACED
        hover = (f"<b>layer {r.layer}, expert {r.expert}</b><br>{html.escape(key)}<br>share of the routed tokens "
                 f"{r.share:.1%}<br>{r.flops / 1e9:.3g} GFLOPs, weights {fmt_bytes(r.weight_bytes) or '0 B'}")
        cells[key].append((r.expert, r.layer, f"{r.share:.0%}", hover))
        if r.op == highlight:
            ring = (r.expert, r.layer)
    n_exp = int(assignment["expert"].max()) + 1 if len(assignment) else 1
    n_lay = int(assignment["layer"].max()) + 1 if len(assignment) else 1
    size = max(14, min(44, int(620 / max(n_exp, 1))))
    data = []
    for name, pts in cells.items():
        color = NEUTRAL if name == UNPLACED else cmap[name]
        data.append(dict(type="scatter", mode="markers+text", name=name, x=[p[0] for p in pts], y=[p[1] for p in pts],
                         text=[p[2] for p in pts], hovertext=[p[3] for p in pts], hoverinfo="text",
                         textfont=dict(size=11, color="#111111"),
                         marker=dict(symbol="square", size=size, color=color, line=dict(color="#555555", width=1)),
                         cliponaxis=False))
    data.append(dict(type="scatter", mode="markers", name="this decision", x=[ring[0]] if ring else [],
                     y=[ring[1]] if ring else [], hoverinfo="skip", showlegend=ring is not None,
                     marker=dict(symbol="square-open", size=size + 10, color="#D50000", line=dict(width=3))))
    layout = dict(
        xaxis=dict(title=title_text("expert (its share of the routed tokens inside)"), tickmode="array",
                   tickvals=list(range(n_exp)), range=[-0.7, n_exp - 0.3], zeroline=False, showgrid=False),
        yaxis=dict(title=title_text("MoE layer"), tickmode="array", tickvals=list(range(n_lay)),
                   range=[n_lay - 0.4, -0.6], zeroline=False, showgrid=False),
        height=height or max(220, 110 + 52 * n_lay), font=dict(size=14), showlegend=True,
        legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"),
        margin=dict(l=10, r=10, t=60 if title else 30, b=40), title=title_text(title))
    return figure_from_dicts(data, layout)
