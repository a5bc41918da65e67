"""Figures for operator ordering (the memory-ordering patent): memory curves of several orders, tensor lifetimes.

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

from .core import GROUP_PALETTE, PALETTE, bytes_unit, figure_from_dicts, hline, memory_curve, title_text

__all__ = ["order_curves", "lifetime_chart", "live_bars", "walk_curves", "CURRENT_COLOR", "HIGHLIGHT_COLOR", "FONT_PX"]

#: the order being walked is drawn thick in this colour; overlays take the group palette
CURRENT_COLOR = PALETTE[0]
#: what the current step is about (the tensor a fine-tune move tries, the peak marker)
HIGHLIGHT_COLOR = "#D55E00"
#: figure text size (projector-friendly, issue 22)
FONT_PX = 14


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
    layout = dict(xaxis=dict(title=title_text("step")), yaxis=dict(title=title_text("tensor"), autorange="reversed"),
                  height=max(250, 14 * len(a) + 80), margin=dict(l=10, r=10, t=40 if title else 20, b=40))
    layout["title"] = title_text(title)
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


def live_bars(live: pd.DataFrame, *, top: int = 20, title: str | None = None,
              highlight: Sequence[str] = ()) -> go.Figure:
    """Horizontal bars of the tensors live at a step (:func:`hetsched.memory.live_at` /
    :func:`~hetsched.memory.live_at_peak`), largest first, the largest ``top`` shown; the tensors
    named in ``highlight`` (e.g. the one a fine-tune move tries) stand out in another colour.

    >>> from hetsched.io.generators import fork_join
    >>> from hetsched.memory import live_at_peak
    >>> g = fork_join(3, 2); _, live = live_at_peak(g, g.topological_order())
    >>> list(live_bars(live, top=2).data[0].y) == live["tensor"].head(2).tolist()
    True
    """
    shown = live.head(max(1, int(top)))
    hl = {str(t) for t in highlight}
    unit, f = bytes_unit(float(shown["bytes"].max()) if len(shown) else 0.0)
    total = int(live["bytes"].sum()) if len(live) else 0
    bar = dict(
        type="bar", orientation="h", x=(shown["bytes"].astype(float) * f).tolist(), y=shown["tensor"].astype(str).tolist(),
        # one colour per bar, always a list: a step that highlights another tensor patches colours only
        marker=dict(color=[HIGHLIGHT_COLOR if t in hl else CURRENT_COLOR for t in shown["tensor"].astype(str)]),
        hovertext=[f"{t}: {_fmt(b)}, live steps {a}-{e}" for t, b, a, e in
                   zip(shown["tensor"], shown["bytes"], shown["alloc_step"], shown["free_step"])],
        hoverinfo="text")
    layout = dict(title=title_text(title or f"tensors live at the peak ({len(live)} tensors, {_fmt(total)}; "
                                       f"largest {len(shown)} shown)"),
                  xaxis=dict(title=title_text(f"size ({unit})")), yaxis=dict(autorange="reversed", type="category"),
                  height=max(260, 60 + 22 * len(shown)), margin=dict(l=10, r=10, t=50, b=40), font=dict(size=FONT_PX))
    return figure_from_dicts([bar], layout)


def walk_curves(state: Mapping[str, Any], *, overlays: Mapping[str, Any] | None = None,
                lower_bound: float | None = None, label: str = "order", title: str | None = None,
                colors: Mapping[str, str] | None = None, height: int = 400) -> go.Figure:
    """The memory curve a step walker shows: ``state`` from :func:`hetsched.memory.walk_state`.

    The current order (a traversal's prefix while it is being built) is drawn thick, each overlay
    (``{name: OrderResult}``) thin in its colour (``colors[name]``, else the group palette), the
    lower bound dashed, the peak step marked, and the steps a fine-tune move changed shaded.

    The traces are the same from step to step (the overlays, the current order, the peak marker,
    empty while a traversal has placed no op yet), so a walker's step click patches arrays and
    names instead of rebuilding the figure.

    >>> from hetsched.io.generators import fork_join
    >>> from hetsched.memory import order_bfs, walk_state
    >>> g = fork_join(2, 2); r = order_bfs(g)
    >>> fig = walk_curves(walk_state(g, r, 3), overlays={"bfs": r}, lower_bound=r.lower_bound_bytes)
    >>> [t.name.split(" ")[0] for t in fig.data]
    ['bfs', 'order', 'peak']
    """
    overlays = dict(overlays or {})
    colors = dict(colors or {})
    cur = state["curve"]
    what = f"{label} so far" if state.get("partial") else label
    cur_name = f"{what} (peak {_fmt(state['peak_bytes'])})" if len(cur) else f"{what} (no op placed yet)"
    # one unit for everything drawn (overlays too: it does not jump between steps while they are shown)
    ymax = max([float(r.peak_bytes) for r in overlays.values()] + [float(state["peak_bytes"])])
    unit, f = bytes_unit(ymax)
    # plain dicts, one figure built at the end: validating each edit of a built figure cost more than
    # the walk itself on every step click
    data = []
    for i, (name, res) in enumerate(overlays.items()):
        data.append(_step_line(res.curve, f"{name} (peak {_fmt(res.peak_bytes)})", f, unit,
                               color=colors.get(name, GROUP_PALETTE[i % len(GROUP_PALETTE)]), width=2, opacity=0.85))
    data.append(_step_line(cur, cur_name, f, unit, color=CURRENT_COLOR, width=4))
    p = int(state["peak_step"])
    has = len(cur) > 0
    data.append(dict(
        type="scatter", x=[p] if has else [], y=[state["peak_bytes"] * f] if has else [], mode="markers",
        marker=dict(size=14, symbol="x", color=HIGHLIGHT_COLOR), name="peak",
        hovertext=[f"peak {_fmt(state['peak_bytes'])} at step {p} ({state['order'][p]})"] if has else [],
        hoverinfo="text"))
    shapes, notes = [], []
    if lower_bound is not None:
        sh, an = hline(float(lower_bound) * f, dict(color="#009E73", dash="dash"),
                        f"lower bound {float(lower_bound) * f:.3g} {unit}")
        shapes.append(sh)
        notes.append(an)
    ch = state.get("changed")
    if ch:  # what fig.add_vrect(..., annotation_text=..., annotation_position="top left") makes
        step = state.get("step")
        kept = step is None or step.accepted
        shapes.append(dict(type="rect", xref="x", x0=ch[0] - 0.5, x1=ch[1] + 0.5, yref="y domain", y0=0, y1=1,
                           fillcolor="#F0E442" if kept else "#BDBDBD", opacity=0.25, line=dict(width=0)))
        # a refused move leaves the order (and the curve) as it was: say so where it would have acted
        notes.append(dict(showarrow=False, text="changed by this move" if kept else "the refused move would change these steps",
                          x=ch[0] - 0.5, xanchor="left", xref="x", y=1, yanchor="top", yref="y domain"))
    layout = dict(xaxis=dict(title=title_text("step")), yaxis=dict(title=title_text(f"live memory ({unit})")),
                  title=title_text(title), height=height, font=dict(size=FONT_PX), shapes=shapes, annotations=notes,
                  legend=dict(orientation="h", yanchor="top", y=-0.18, x=0),
                  margin=dict(l=10, r=10, t=50 if title else 20, b=60))
    return figure_from_dicts(data, layout)


def _step_line(curve: pd.DataFrame, name: str, f: float, unit: str, *, color: str, width: float,
               opacity: float = 1.0) -> dict:
    """One order's live bytes per step as a step line (the level holds from each step to the next)."""
    return dict(type="scatter", x=curve["step"].to_numpy(float), y=curve["bytes"].to_numpy(float) * f, mode="lines",
                name=name, opacity=opacity, line=dict(color=color, width=width, shape="hv"),
                hovertemplate=f"step %{{x:.0f}}<br>%{{y:.4g}} {unit}<extra>{name}</extra>")
