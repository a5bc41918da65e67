"""Figures of the mapping family: a placement on the graph, a mapping's Gantt chart, per-device
busy time, and the comparison of mappers.

The step views of a mapping log (one figure redrawn for each decision a user steps to) keep the
same traces from one decision to the next, so a redraw changes a few arrays, not the structure
(issue 14: a step click must stay far below 100 KB on a 1k-op graph):

* :func:`placement_graph` draws every op in **one** marker trace whose colours are a per-point
  array of device indices (a discrete colour scale), plus one legend-only trace per device;
  what a step changes is that index array and two small highlight traces.
* :func:`mapping_gantt` draws one line trace per device (each bar a thick segment, the lane fixed
  by ``y0``), one trace for every transfer (a neutral grey: a link lane is not a device) and one
  marker trace that carries the hover texts.

Colours: a device keeps its :func:`~hetsched.plot.core.color_map` colour in every view;
"unassigned" is :data:`~hetsched.plot.core.NEUTRAL`; transfers are :data:`TRANSFER_COLOR`.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> from hetsched.mapping import h2h
>>> g, s = chain(4, seed=0), toy_system()
>>> r = h2h(g, s)
>>> fig = placement_graph(g, dict(r.placement.device), s.device_names)
>>> [t.name for t in fig.data][:3]
['edges', 'ops', 'tried layer']
>>> fig2 = placement_graph(g, {}, s.device_names)            # nothing mapped: same traces
>>> [t.type for t in fig2.data] == [t.type for t in fig.data]
True
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..mapping.methods import METHODS
from .core import (GROUP_PALETTE, MAX_BARS, NEUTRAL, BlockLayout, fmt_bytes, layered_layout, lighten, title_text, block_axes,
                   block_colors, block_layout, block_legend, block_node_trace, block_ring_trace, bytes_unit, color_map,
                   edge_xy, figure_from_dicts, legend_below, legend_height_px, metric_label, time_unit)

__all__ = ["TRANSFER_COLOR", "GANTT_WEBGL_BARS", "GRAPH_WEBGL_NODES", "UNASSIGNED", "placement_graph", "placement_blocks", "mapping_gantt", "busy_bars", "method_bars",
           "METHOD_LABELS", "OPTIMISES_LABELS"]

#: Transfers on links: a dark grey, so a link lane never borrows a device's colour (issue 22).
TRANSFER_COLOR = "#6E6E6E"
#: The label of an op not mapped yet (drawn :data:`~hetsched.plot.core.NEUTRAL`).
UNASSIGNED = "(unassigned)"
#: Plain names of the mappers, read from :data:`hetsched.mapping.METHODS` (each entry's ``label``).
METHOD_LABELS = {k: m.label for k, m in METHODS.items()}
#: What a mapper minimises, in words (the ``optimises`` column of :func:`hetsched.mapping.compare`).
OPTIMISES_LABELS = {
    "total_latency": "minimises the total busy time of all devices",
    "makespan": "minimises the makespan",
    "op_latency": "each layer's own latency, greedily",
}


def _device_scale(labels: Sequence[str], colors: Mapping[str, str]) -> list[list]:
    """A stepwise colour scale: value ``i`` (with ``cmin=-0.5``, ``cmax=n-0.5``) gets ``labels[i]``'s colour."""
    n = max(1, len(labels))
    scale: list[list] = []
    for i, lab in enumerate(labels):
        scale.append([i / n, colors[lab]])
        scale.append([(i + 1) / n, colors[lab]])
    return scale


def placement_graph(graph, placement: Mapping[str, str], devices: Sequence[str], *,
                    colors: Mapping[str, str] | None = None, moved: Iterable[str] = (),
                    residency: Iterable[str] = (), title: str | None = None, height: int | None = None,
                    pos: Mapping[str, tuple[float, float]] | None = None) -> go.Figure:
    """The graph coloured by a (possibly partial) placement, with the same traces for any placement.

    Parameters
    ----------
    graph : OpGraph
    placement : dict
        ``op -> device``; ops missing from it are drawn as unassigned (neutral grey).
    devices : sequence of str
        Every device that may appear (the system's), in legend order.
    colors : dict, optional
        Colour per device (default :func:`~hetsched.plot.core.color_map` over ``devices``).
    moved : iterable of str
        Ops a decision moves or maps (large red rings, trace ``tried layer``).
    residency : iterable of str
        Ops whose weights or outputs a decision keeps on-chip or sends back (black diamonds,
        trace ``data kept / released``).
    pos : dict, optional
        Precomputed ``op -> (x, y)`` (default: the layered layout of :func:`~hetsched.plot.graph_view`).

    Notes
    -----
    Trace order is fixed: edges, ops, tried layer, data kept / released, then one legend-only trace
    per device and one for unassigned ops. Only ``marker.color`` of ``ops``, the hover texts and the
    two highlight traces depend on the placement. Beyond 300 ops the edges and ops are WebGL traces:
    redrawing a thousand SVG markers took a browser 100-160 ms per step, WebGL 20-40 ms.
    """
    pos = pos if pos is not None else layered_layout(graph)
    devices = [str(d) for d in devices]
    cmap = color_map(devices, base=colors)
    labels = devices + [UNASSIGNED]
    cmap[UNASSIGNED] = NEUTRAL
    index = {d: i for i, d in enumerate(devices)}
    ops = list(graph.ops)
    n = len(ops)
    code = np.fromiter((index.get(str(placement.get(o)), len(devices)) for o in ops), dtype=np.int32, count=n)
    xs = np.fromiter((pos[o][0] for o in ops), dtype=float, count=n)
    ys = np.fromiter((pos[o][1] for o in ops), dtype=float, count=n)
    edges = list(graph.nx.edges)
    ex, ey = edge_xy(edges, pos)
    size = 12 if n <= 60 else (7 if n <= 600 else 4)
    marker_type = "scatter" if n <= GRAPH_WEBGL_NODES else "scattergl"
    objs = graph.ops
    hover = [f"<b>{o}</b><br>{objs[o].op_type}<br>on {placement.get(o, 'no device yet')}<br>"
             f"{objs[o].flops:.3g} FLOPs, weights {fmt_bytes(objs[o].weight_bytes) or '0 B'}" for o in ops]
    mv = [o for o in dict.fromkeys(moved) if o in pos]
    rs = [o for o in dict.fromkeys(residency) if o in pos and o not in set(mv)]
    data: list[dict] = [
        dict(type=marker_type, x=ex, y=ey, mode="lines",
             line=dict(color="#BBBBBB", width=1 if n > 200 else 1.5), hoverinfo="skip", showlegend=False, name="edges"),
        dict(type=marker_type, x=xs, y=ys, mode="markers", name="ops", showlegend=False, customdata=ops,
             marker=dict(color=code, colorscale=_device_scale(labels, cmap), cmin=-0.5, cmax=len(labels) - 0.5,
                         size=size, line=dict(color="#333333", width=0.5)),
             hovertext=hover, hoverinfo="text"),
        dict(type="scatter", x=[pos[o][0] for o in mv], y=[pos[o][1] for o in mv], mode="markers", name="tried layer",
             marker=dict(symbol="circle-open", size=size * 2.2, color="#D00000", line=dict(width=3)),
             hovertext=[f"<b>{o}</b>: the layer this decision is about" for o in mv], hoverinfo="text", showlegend=True),
        dict(type="scatter", x=[pos[o][0] for o in rs], y=[pos[o][1] for o in rs], mode="markers",
             name="data kept / released", marker=dict(symbol="diamond-open", size=size * 1.8, color="#000000",
                                                       line=dict(width=2)),
             hovertext=[f"<b>{o}</b>: its weights or output change residency" for o in rs], hoverinfo="text",
             showlegend=True),
    ]
    for lab in labels:  # legend entries only: the ops trace carries the colours
        data.append(dict(type="scatter", x=[None], y=[None], mode="markers", name=lab, showlegend=True,
                         marker=dict(color=cmap[lab], size=10), hoverinfo="skip"))
    n_gen = 1 + int(max((p[0] for p in pos.values()), default=0))
    layout = dict(
        showlegend=True, legend=dict(title=title_text("device")),
        xaxis=dict(title=title_text("topological generation"), showgrid=False, zeroline=False,
                   range=[-0.5, max(0.5, n_gen - 0.5)]),
        yaxis=dict(showgrid=False, zeroline=False, showticklabels=False),
        height=height or 400, margin=dict(l=10, r=10, t=40 if title else 20, b=40), font=dict(size=14),
    )
    layout["title"] = title_text(title)
    return figure_from_dicts(data, layout)


def placement_blocks(graph, placement: Mapping[str, str], devices: Sequence[str], *,
                     colors: Mapping[str, str] | None = None, moved: Iterable[str] = (), residency: Iterable[str] = (),
                     layout: BlockLayout | None = None, blocks: Mapping[str, str] | None = None,
                     expanded: Iterable[str] = (), title: str | None = None, height: int | None = None) -> go.Figure:
    """A big graph's (possibly partial) placement drawn by blocks (layers, stages), the same traces for any placement.

    Each collapsed block (:func:`hetsched.blocks.op_blocks`) is one square coloured by the device
    holding most of its FLOPs (lighter while some of its ops are not mapped yet, grey while none
    is); a block whose ops sit on several devices has a thick outline in the runner-up device's
    colour. The blocks holding the ops a decision moves are ringed red, those whose data changes
    residency black. Expanded blocks (``expanded``, or a precomputed ``layout`` of
    :func:`~hetsched.plot.core.block_layout`) show their ops, each a circle.

    Notes
    -----
    Trace order is fixed: edges, blocks, tried layer, data kept / released, then legend-only traces
    (each device, partly mapped, several devices, unassigned). A step changes the colour, outline and
    hover arrays of ``blocks`` and the two ring traces, nothing else: a patch of a few kilobytes.

    >>> from hetsched.io.generators import resnet_like
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.mapping import h2h
    >>> g, s = resnet_like(n_stages=2, blocks_per_stage=2), toy_system()
    >>> r = h2h(g, s)
    >>> fig = placement_blocks(g, dict(r.placement.device), s.device_names, moved=["s0b1.conv1"])
    >>> [t.name for t in fig.data][:4], list(fig.data[2].customdata)
    (['edges', 'blocks', 'tried layer', 'data kept / released'], ['block:s0b1'])
    >>> fig0 = placement_blocks(g, {}, s.device_names)             # nothing mapped: same traces, all grey
    >>> [t.type for t in fig0.data] == [t.type for t in fig.data], set(fig0.data[1].marker.color)
    (True, {'#BDBDBD'})
    """
    lay = layout if layout is not None else block_layout(graph, blocks, expanded)
    devices = [str(d) for d in devices]
    cmap = color_map(devices, base=colors)
    col = block_colors(graph, lay, placement, cmap, on="on", missing="not mapped yet")
    kind = "scatter" if len(lay.nodes) <= GRAPH_WEBGL_NODES else "scattergl"
    mv = [lay.node_of[o] for o in moved if o in lay.node_of]
    rs = [lay.node_of[o] for o in residency if o in lay.node_of]
    rs = [x for x in dict.fromkeys(rs) if x not in set(mv)]
    data: list[dict] = [
        dict(type=kind, x=lay.ex, y=lay.ey, mode="lines", line=dict(color="#BBBBBB", width=1.5), hoverinfo="skip",
             showlegend=False, name="edges"),
        block_node_trace(lay, col, kind=kind),
        block_ring_trace(lay, mv, name="tried layer", hover="holds the layer this decision is about"),
        block_ring_trace(lay, rs, name="data kept / released", color="#000000", symbol="diamond-open",
                         hover="weights or outputs here change residency"),
    ]
    data += block_legend(devices, cmap, partly="lighter: partly mapped",
                         mixed="outlined: ops on several devices (outline: the next one)", none=UNASSIGNED)
    layout_ = block_axes(lay, "device", title=title, height=height or 400)
    layout_["font"] = dict(size=14)
    return figure_from_dicts(data, layout_)


#: Bars beyond which a mapping Gantt is drawn with WebGL. Measured on the 973-op bundled graph (about
#: 2,300 bars) in headless Chromium on this project's 2-core machine (`bench/bench_browser.py`): in
#: SVG the Mapping tab's first view settles in ~650 ms against ~830 ms with WebGL (a WebGL plot's
#: first draw makes its own context and compiles its shaders, ~230 ms in software GL, even after the
#: page's warm-up), and a step click takes about as long (170-190 ms either way) now that an SVG Gantt
#: finds its bars by one invisible line. WebGL beyond a few thousand bars, where SVG paths get slow.
GANTT_WEBGL_BARS = 2500

#: Nodes beyond which a placement graph or block view is drawn with WebGL markers.
GRAPH_WEBGL_NODES = 300


def mapping_gantt(timeline: pd.DataFrame, devices: Sequence[str], *, colors: Mapping[str, str] | None = None,
                  highlight: Iterable[str] = (), title: str | None = None, height: int | None = None,
                  unit: tuple[str, float] | None = None, webgl: bool | None = None) -> go.Figure:
    """A mapping's Gantt chart with the same traces for any timeline on these devices.

    One lane per device (every device of ``devices``, used or not, in that order), then one lane
    per link that carries a transfer. Compute bars take their device's colour; transfers are
    :data:`TRANSFER_COLOR`; ``highlight`` ops (the layer a decision moves) get a red core line.

    Parameters
    ----------
    timeline : DataFrame
        The shared timeline format (``alloc`` rows are skipped).
    devices : sequence of str
    unit : (str, float), optional
        The time unit and factor (default: chosen from the timeline's span).
    webgl : bool, optional
        Draw the traces with WebGL (default: beyond :data:`GANTT_WEBGL_BARS` bars). A caller
        stepping through states of one graph fixes it, so the trace types stay the same.

    >>> from hetsched.timeline import make_timeline
    >>> tl = make_timeline([dict(lane="gpu0", group="gpu0", name="a", kind="compute", start_s=0, end_s=2e-3,
    ...                          op="a", device="gpu0")])
    >>> fig = mapping_gantt(tl, ["cpu0", "gpu0"])
    >>> [t.name for t in fig.data], fig.layout.xaxis.title.text
    (['cpu0', 'gpu0', 'data transfer', 'layer in question', 'bars'], 'time (ms)')
    """
    tl = timeline[timeline["kind"] != "alloc"] if len(timeline) and "kind" in timeline.columns else timeline
    devices = [str(d) for d in devices]
    cmap = color_map(devices, base=colors)
    n = len(tl)
    span = float(tl["end_s"].max()) if n else 0.0
    u, f = unit if unit is not None else time_unit(span)
    lanes_all = tl["lane"].astype(str).tolist() if n else []
    kinds = tl["kind"].astype(str).tolist() if n else []
    links = sorted({ln for ln, k in zip(lanes_all, kinds) if ln not in set(devices)})
    lane_y = {d: i for i, d in enumerate(devices + links)}
    s_all = tl["start_s"].to_numpy(float) * f if n else np.zeros(0)
    e_all = tl["end_s"].to_numpy(float) * f if n else np.zeros(0)
    ops = tl["op"].tolist() if n and "op" in tl.columns else [None] * n
    names = tl["name"].astype(str).tolist() if n else []
    nbytes = tl["bytes"].tolist() if n and "bytes" in tl.columns else [None] * n
    y_all = np.fromiter((lane_y[ln] for ln in lanes_all), dtype=float, count=n)

    def segments(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # a bar is a thick line from its start to its end on its lane; NaN ends the segment. float32
        # halves the bytes of a step's update and is exact to 7 digits, far below a pixel.
        x = np.full(3 * len(idx), np.nan, dtype=np.float32)
        x[0::3] = s_all[idx]
        x[1::3] = e_all[idx]
        y = np.full(3 * len(idx), np.nan, dtype=np.float32)
        y[0::3] = y_all[idx]
        y[1::3] = y_all[idx]
        return x, y

    is_dev = np.fromiter((ln in lane_y and lane_y[ln] < len(devices) and k != "transfer"
                          for ln, k in zip(lanes_all, kinds)), dtype=bool, count=n)
    lane_w = 14 if len(lane_y) <= 8 else 8
    webgl = n > GANTT_WEBGL_BARS if webgl is None else webgl
    kind = "scattergl" if webgl else "scatter"
    data: list[dict] = []
    for d in devices:
        x, _y = segments(np.flatnonzero(is_dev & (y_all == lane_y[d])))
        # a device's bars all sit on its lane: y0 with a vanishing step instead of a y array (half
        # the bytes of a step's update; plotly.js reads dy=0 as "unset" and would use 1)
        data.append(dict(type=kind, x=x, y0=lane_y[d], dy=1e-12, mode="lines", name=d, legendgroup=d,
                         line=dict(color=cmap[d], width=lane_w), hoverinfo="skip"))
    x, y = segments(np.flatnonzero(~is_dev))
    data.append(dict(type=kind, x=x, y=y, mode="lines", name="data transfer",
                     line=dict(color=TRANSFER_COLOR, width=lane_w), hoverinfo="skip"))
    hl = set(highlight)
    hix = np.flatnonzero(np.fromiter(((o in hl or nm in hl) for o, nm in zip(ops, names)), dtype=bool, count=n)) \
        if hl and n else np.zeros(0, dtype=np.intp)
    x, y = segments(hix)
    data.append(dict(type=kind, x=x, y=y, mode="lines", name="layer in question",
                     line=dict(color="#D00000", width=max(3, lane_w // 3)), hoverinfo="skip"))
    hover = [f"<b>{nm}</b><br>{ln}<br>{k}: {a:.4g}–{b:.4g} {u}"
             + (f"<br>{fmt_bytes(by)}" if by is not None and by == by else "")
             for nm, ln, k, a, b, by in zip(names, lanes_all, kinds, s_all.tolist(), e_all.tolist(), nbytes)]
    # what the mouse finds: one point at each bar's middle. In SVG an invisible line through them
    # (one path) rather than invisible markers (one SVG element per bar: a 1k-op step redrew ~1k
    # elements); a line's points answer hover as markers do. WebGL draws markers at no such cost.
    hover_pts = (dict(mode="markers", marker=dict(size=6, color="rgba(0,0,0,0)")) if webgl
                 else dict(mode="lines", line=dict(width=0)))
    data.append(dict(type=kind, x=((s_all + e_all) / 2).astype(np.float32), y=y_all.astype(np.float32),
                     name="bars", showlegend=False, hovertext=hover, hoverinfo="text", **hover_pts))
    ticks = devices + links
    layout = dict(
        xaxis=dict(title=title_text(f"time ({u})"), range=[0, max(span * f, 1e-9) * 1.02]),
        # a fixed range: every device has its lane, idle or not (top to bottom in the system's order)
        yaxis=dict(tickmode="array", tickvals=list(range(len(ticks))), ticktext=ticks, range=[len(ticks) - 0.5, -0.5],
                   zeroline=False, showgrid=False),
        legend=dict(title=title_text("lane")), font=dict(size=14),
        height=height or max(260, 70 + 34 * len(ticks)), margin=dict(l=10, r=10, t=40 if title else 20, b=40),
    )
    layout["title"] = title_text(title)
    return figure_from_dicts(data, layout)


def busy_bars(busy: pd.DataFrame, devices: Sequence[str], *, colors: Mapping[str, str] | None = None,
              title: str | None = None, before_label: str = "before", after_label: str = "after",
              height: int = 260) -> go.Figure:
    """Per-device busy time before and after a decision: two bar traces over the same devices.

    ``busy`` has the columns of :attr:`hetsched.mapping.Trial.busy` (``device, busy_before_s,
    busy_after_s``, and optionally the compute and transfer parts); an empty frame draws zeros.
    "Before" bars are the device colour lightened, "after" bars the device colour.

    >>> import pandas as pd
    >>> b = pd.DataFrame({"device": ["gpu0"], "busy_before_s": [2e-3], "busy_after_s": [1e-3]})
    >>> fig = busy_bars(b, ["cpu0", "gpu0"])
    >>> list(fig.data[1].y), fig.layout.yaxis.title.text
    ([0.0, 1.0], 'busy time (ms)')
    """
    devices = [str(d) for d in devices]
    cmap = color_map(devices, base=colors)
    b = busy.set_index("device") if len(busy) else pd.DataFrame(columns=["busy_before_s", "busy_after_s"])

    def col(name: str) -> np.ndarray:
        if name not in b.columns:
            return np.zeros(len(devices))
        return np.array([float(b[name].get(d, 0.0)) if d in b.index else 0.0 for d in devices])

    before, after = col("busy_before_s"), col("busy_after_s")
    u, f = time_unit(float(max(before.max(initial=0.0), after.max(initial=0.0))))

    def hover(which: str) -> list[str]:
        c, t = col(f"compute_{which}_s"), col(f"transfer_{which}_s")
        return [f"<b>{d}</b> {which}: busy {x * f:.4g} {u}<br>compute {a * f:.4g} {u}, transfers {z * f:.4g} {u}"
                for d, x, a, z in zip(devices, col(f"busy_{which}_s"), c, t)]

    data = [
        dict(type="bar", x=devices, y=(before * f).tolist(), name=before_label, hovertext=hover("before"), hoverinfo="text",
             marker=dict(color=[lighten(cmap[d], 0.6) for d in devices], line=dict(color="#555555", width=1))),
        dict(type="bar", x=devices, y=(after * f).tolist(), name=after_label, hovertext=hover("after"), hoverinfo="text",
             marker=dict(color=[cmap[d] for d in devices], line=dict(color="#222222", width=1))),
    ]
    layout = dict(barmode="group", yaxis=dict(title=title_text(f"busy time ({u})")), height=height, font=dict(size=14),
                  legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"),
                  margin=dict(l=10, r=10, t=40 if title else 20, b=40))
    layout["title"] = title_text(title)
    return figure_from_dicts(data, layout)


def method_bars(frame: pd.DataFrame, metric: str, *, highlight: str | None = None, title: str | None = None,
                labels: Mapping[str, str] | None = None, height: int = 340) -> go.Figure:
    """One bar per mapper, coloured by what it minimises (a group colour, never a device colour).

    ``frame`` has ``label`` (the method), ``metric`` and optionally ``optimises`` (as from
    :func:`hetsched.mapping.compare`) and ``text`` (the text under the bar; default
    :data:`METHOD_LABELS`). ``highlight`` (a method) gets a thick outline. One trace per kind of
    objective, so the legend says what each colour means.

    >>> import pandas as pd
    >>> f = pd.DataFrame({"label": ["heft", "h2h"], "makespan_s": [2e-3, 1e-3], "optimises": ["makespan", "total_latency"]})
    >>> fig = method_bars(f, "makespan_s", highlight="h2h")
    >>> [t.name for t in fig.data], fig.layout.yaxis.title.text
    (['minimises the makespan', 'minimises the total busy time of all devices'], 'makespan (ms)')
    """
    labels = {**METHOD_LABELS, **dict(labels or {})}
    vals = frame[metric].astype(float).to_numpy() if len(frame) else np.zeros(0)
    if metric.endswith("_s"):
        u, f = time_unit(float(np.nanmax(np.abs(vals))) if len(vals) else 0.0)
    elif metric.endswith("_bytes") or metric == "bytes_moved":
        u, f = bytes_unit(float(np.nanmax(np.abs(vals))) if len(vals) else 0.0)
    else:
        u, f = None, 1.0
    keys = frame["label"].astype(str).tolist()
    text_of = frame["text"].astype(str).tolist() if "text" in frame.columns else [labels.get(m, m) for m in keys]
    opt = frame["optimises"].fillna("").astype(str).tolist() if "optimises" in frame.columns else [""] * len(frame)
    groups = list(dict.fromkeys(opt))
    data = []
    for gi, grp in enumerate(groups):
        idx = [i for i, o in enumerate(opt) if o == grp]
        color = GROUP_PALETTE[gi % len(GROUP_PALETTE)]
        data.append(dict(
            type="bar", x=[text_of[i] for i in idx], y=[float(vals[i] * f) for i in idx],
            name=OPTIMISES_LABELS.get(grp, grp or "custom"),
            marker=dict(color=color, line=dict(color=["#D00000" if keys[i] == highlight else color for i in idx],
                                               width=[4 if keys[i] == highlight else 0 for i in idx])),
            text=[f"{vals[i] * f:.3g}" for i in idx], textposition="outside", cliponaxis=False,
            hovertemplate="%{x}: %{y:.4g}" + (f" {u}" if u else "") + "<extra></extra>"))
    # the legend under the bars: at the top right it covered the end of the title
    layout = dict(yaxis=dict(title=title_text(metric_label(metric, u))), xaxis=dict(categoryorder="array", categoryarray=text_of),
                  barmode="overlay", showlegend=True, legend=legend_below(),
                  height=height + legend_height_px(d["name"] for d in data), font=dict(size=14),
                  margin=dict(l=10, r=10, t=50 if title else 30, b=40))
    layout["title"] = title_text(title)
    return figure_from_dicts(data, layout)
