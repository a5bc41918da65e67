"""Simulated vs measured: per-op ratio scatter, the two runs as Gantt lanes, efficiency curves.

Inputs are the tidy frames of :func:`hetsched.calibrate.compare` (``ops``: ``op, op_type,
measured_s, predicted_s, ratio``; the measured and predicted timelines) and of
:func:`hetsched.calibrate` (``points``: ``source, op_type, work_s, efficiency``; the fitted curves).

>>> import pandas as pd
>>> ops = pd.DataFrame({"op": ["a", "b"], "op_type": ["Conv", "Relu"], "measured_s": [1e-3, 2e-5],
...                     "predicted_s": [1.1e-3, 1e-5]})
>>> fig = ratio_scatter(ops)
>>> [t.name for t in fig.data], fig.layout.yaxis.type
(['Conv', 'Relu'], 'log')
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..errors import HetschedError
from .core import PALETTE, color_map, esc, figure_from_dicts, gantt_parts, time_unit, title_text

__all__ = ["ratio_scatter", "measured_vs_predicted", "efficiency_curves"]

#: the per-op band issue 19 sets as the target (p10 >= 0.7, p90 <= 1.4)
BAND = (0.7, 1.4)


def ratio_scatter(ops: pd.DataFrame, *, band: tuple[float, float] = BAND, title: str | None = None,
                  highlight: str | None = None) -> go.Figure:
    """Predicted / measured per op against its measured time (both axes log), one colour per op type.

    Parameters
    ----------
    ops : DataFrame
        ``op, op_type, measured_s, predicted_s`` (``ratio`` is computed when absent).
    band : (low, high)
        Shaded ratio band (the issue's per-op target), with the ``1.0`` line.
    highlight : str, optional
        An op drawn with a large outlined marker.
    """
    need = {"op", "op_type", "measured_s", "predicted_s"}
    if not need <= set(ops.columns):
        raise HetschedError(f"ratio_scatter needs columns {sorted(need)}; have {list(ops.columns)}", field="ops")
    df = ops.copy()
    if "ratio" not in df:
        df["ratio"] = df["predicted_s"] / df["measured_s"]
    df = df[np.isfinite(df["ratio"].astype(float)) & (df["ratio"] > 0) & (df["measured_s"] > 0)]
    unit, f = time_unit(float(df["measured_s"].max()) if len(df) else 0.0)
    types = list(dict.fromkeys(df["op_type"].astype(str)))
    cmap = color_map(types)
    data: list[dict] = []
    for t in types:
        sub = df[df["op_type"].astype(str) == t]
        hover = [f"<b>{esc(o)}</b> ({esc(t)})<br>measured {m * f:.4g} {unit}<br>predicted {p * f:.4g} {unit}<br>ratio {r:.3f}"
                 for o, m, p, r in zip(sub["op"], sub["measured_s"], sub["predicted_s"], sub["ratio"])]
        data.append(dict(type="scatter", mode="markers", name=esc(t), x=sub["measured_s"].to_numpy(float) * f,
                         y=sub["ratio"].to_numpy(float), marker=dict(color=cmap[t], size=7, opacity=0.8),
                         hovertext=hover, hoverinfo="text"))
    if highlight is not None and highlight in set(df["op"]):
        row = df[df["op"] == highlight].iloc[0]
        data.append(dict(type="scatter", mode="markers", name=esc(highlight), x=[float(row["measured_s"]) * f],
                         y=[float(row["ratio"])], showlegend=False, hoverinfo="skip",
                         marker=dict(size=16, color="rgba(0,0,0,0)", line=dict(color="#D00000", width=3))))
    lo, hi = band
    shapes = [dict(type="rect", xref="x domain", x0=0, x1=1, yref="y", y0=lo, y1=hi, fillcolor="#009E73",
                   opacity=0.08, line=dict(width=0), layer="below"),
              dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=1, y1=1,
                   line=dict(color="#444444", dash="dash", width=1))]
    med = float(df["ratio"].median()) if len(df) else float("nan")
    layout = dict(xaxis=dict(type="log", title=title_text(f"measured time ({unit})")),
                  yaxis=dict(type="log", title=title_text("predicted / measured")), shapes=shapes,
                  legend=dict(title=title_text("op type")), height=380,
                  margin=dict(l=10, r=10, t=40, b=40),
                  title=title_text(title or f"per-op ratio: median {med:.3f}, band {lo}-{hi} shaded"))
    return figure_from_dicts(data, layout)


def measured_vs_predicted(measured: pd.DataFrame, predicted: pd.DataFrame, *, op_types: Mapping[str, str] | None = None,
                          title: str | None = None, highlight: str | None = None) -> go.Figure:
    """The measured and the predicted run as Gantt lanes on one time axis, coloured by op type.

    Each timeline keeps its lanes, prefixed ``measured`` / ``predicted``; only ``compute`` rows are
    drawn. ``op_types`` (``{op: op_type}``) colours the bars (default: by op name's type column if
    present, else by ``kind``).
    """
    def part(tl: pd.DataFrame, who: str) -> pd.DataFrame:
        tl = tl[tl["kind"] == "compute"] if "kind" in tl else tl
        out = tl.assign(lane=[f"{who} {ln}" for ln in tl["lane"].astype(str)])
        if op_types is not None:
            out = out.assign(op_type=[op_types.get(o, "?") for o in out["op"]])
        return out

    both = pd.concat([part(measured, "measured"), part(predicted, "predicted")], ignore_index=True)
    color_by = "op_type" if "op_type" in both else "kind"
    lanes = list(dict.fromkeys(both["lane"]))
    data, layout = gantt_parts(both, color_by=color_by, lanes=lanes, title=title,
                                highlight=[highlight] if highlight else None, height=120 + 40 * len(lanes))
    for d in data:  # one legend entry per op type, the two lanes share it
        d["legendgroup"] = d.get("name")
    return figure_from_dicts(data, layout)


def efficiency_curves(points: pd.DataFrame, curves: Mapping[str, Any], *, keys: list[str] | None = None,
                      title: str | None = None) -> go.Figure:
    """Measured efficiencies (workload points filled, sweep points hollow) and the fitted curves.

    Parameters
    ----------
    points : DataFrame
        ``source, op_type, key, work_s, efficiency`` (``Calibration.points``).
    curves : dict
        ``{key: EfficiencyCurve}`` (``Calibration.cost.devices[dev]["curves"]``).
    keys : list of str, optional
        Which curves to draw (default: every key that has points, ``default`` last).
    """
    pts = points[np.isfinite(points["efficiency"].astype(float)) & (points["efficiency"] > 0)]
    if keys is None:
        keys = [k for k in dict.fromkeys(pts.get("key", pd.Series(dtype=object)).dropna()) if k in curves]
    unknown = [k for k in keys if k not in curves]
    if unknown:
        raise HetschedError(f"no fitted curve {unknown[0]!r}; have {sorted(curves)}", field="keys")
    cmap = color_map(keys, base={k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)})
    data: list[dict] = []
    for k in keys:
        sub = pts[pts["key"] == k] if "key" in pts else pts.iloc[0:0]
        for sweep in (False, True):
            s = sub[sub["source"].isin(("sweep", "sweep_warm")) == sweep]
            if not len(s):
                continue
            data.append(dict(type="scatter", mode="markers", name=f"{k} ({'sweep' if sweep else 'in model'})",
                             legendgroup=k, x=s["work_s"].to_numpy(float) * 1e6, y=s["efficiency"].to_numpy(float),
                             marker=dict(color=cmap[k], size=6, symbol="circle-open" if sweep else "circle"),
                             hovertext=[f"{esc(o)} ({esc(t)})" for o, t in zip(s["op"], s["op_type"])], hoverinfo="text+x+y"))
        c = curves[k]
        xs = np.logspace(np.log10(min(c.work_s)) - 0.3, np.log10(max(c.work_s)) + 0.3, 60)
        data.append(dict(type="scatter", mode="lines", name=f"{k} curve", legendgroup=k, x=xs * 1e6,
                         y=[c(float(w)) for w in xs], line=dict(color=cmap[k], width=2)))
    layout = dict(xaxis=dict(type="log", title=title_text("work: roofline time at the measured peaks (us)")),
                  yaxis=dict(type="log", title=title_text("efficiency (work / measured time)")), height=400,
                  margin=dict(l=10, r=10, t=40 if title else 20, b=40), title=title_text(title))
    return figure_from_dicts(data, layout)
