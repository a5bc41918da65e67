"""Figures for the multi-backend partition patent (partitioning by support, aggregated ops, buffered backends).

Pure functions of core results returning ``plotly.graph_objects.Figure``; they never mutate input.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> from hetsched.partition import partition_by_support, simulate_buffered
>>> s = toy_system(); s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
>>> r = partition_by_support(chain(4), s)
>>> fig = partition_view(r)
>>> sorted(t.name for t in fig.data if t.mode == "markers")
['fpga0', 'gpu0']
>>> occ = buffer_occupancy(simulate_buffered(r, s, n_inputs=4, buffer_depth=2))
>>> len(occ.data)   # three buffers (fpga -> gpu -> fpga -> gpu) and the depth line
4
"""

from __future__ import annotations

import html
import weakref
from collections import Counter
from typing import Any, Iterable, Mapping

import networkx as nx
import numpy as np
import plotly.graph_objects as go

from .core import (IDLE, NEUTRAL, BlockLayout, gantt_parts, layered_layout, lighten, title_text, block_axes, block_colors,
                   block_layout, block_legend, block_node_trace, block_ring_trace, color_map, edge_xy, figure_from_dicts,
                   graph_view, group_colors, legend_below, legend_height_px, time_unit)

__all__ = ["partition_view", "buffer_occupancy", "quotient_view", "marked_graph_view", "marked_blocks", "quotient_walk_view",
           "decision_focus", "runs_gantt", "with_cursor", "FONT"]

#: figure font: readable on a projector (issue 22)
FONT = dict(size=14)
#: the outline of whatever the current decision is about
FOCUS = "#D00000"
#: edges that would close a cycle if the refused merge were made
CYCLE = "#B00020"
#: edges between two backends: each one is a copy per input
CROSS = "#D55E00"


def partition_view(result, *, colors: Mapping[str, str] | None = None, by: str = "backend", title: str | None = None,
                   height: int | None = None) -> go.Figure:
    """The graph coloured by backend (``by="backend"``) or by aggregated op (``by="group"``), with
    the op edges that cross backends drawn thick: every one is a copy per input.

    Parameters
    ----------
    result : PartitionResult
    colors : dict, optional
        Colour per backend (``color_map(system.device_names)`` keeps colours consistent).
    by : {"backend", "group"}
    """
    g = result.graph
    label = dict(result.assignment) if by == "backend" else dict(result.group_of)
    cross = [(u, v) for u, v in g.nx.edges if result.assignment[u] != result.assignment[v]]
    m = result.metrics
    t = title or (f"{m['n_groups']} aggregated op(s) on {m['n_backends_used']} backend(s),"
                  f" {len(cross)} op edge(s) crossing backends")
    return graph_view(g, color_by=label, colors=colors, edge_highlight=cross, title=t, height=height,
                      legend_title=by)


def quotient_view(result, *, colors: Mapping[str, str] | None = None, title: str | None = None,
                  height: int | None = None, step: int | None = None) -> go.Figure:
    """The quotient graph: one node per aggregated op (size ~ its ops), edges labelled by bytes.

    Drawn left to right by topological generation of the quotient (a DAG by construction).
    ``step``: the quotient after that step of the log (:meth:`PartitionResult.quotient_at`; groups
    named by their first op), what a step walker shows for a merge decision.

    >>> from hetsched.partition.examples import merge_outcomes
    >>> from hetsched.partition import partition_by_support
    >>> r = partition_by_support(*merge_outcomes())
    >>> sum(len(t.x) for t in quotient_view(r, step=7).data if t.mode == "markers+text")  # one merge done
    6
    """
    import networkx as nx

    if step is None:
        Q = result.quotient
    else:
        Q = result.quotient_at(step)
        for n in Q:
            Q.nodes[n]["n_ops"] = len(Q.nodes[n]["ops"])
        for u, v in Q.edges:
            Q.edges[u, v]["cross"] = Q.nodes[u]["backend"] != Q.nodes[v]["backend"]

    gens = list(nx.topological_generations(Q))
    pos = {}
    for x, gen in enumerate(gens):
        for y, n in enumerate(gen):
            pos[n] = (x, y - (len(gen) - 1) / 2)
    cmap = color_map(list(dict.fromkeys(result.group_backend.values())), base=colors)
    data = []
    for cross in (False, True):
        ex, ey = [], []
        for u, v, d in Q.edges(data=True):
            if d["cross"] == cross:
                ex += [pos[u][0], pos[v][0], None]
                ey += [pos[u][1], pos[v][1], None]
        data.append(dict(type="scatter", x=ex, y=ey, mode="lines", hoverinfo="skip",
                         line=dict(color="#D55E00" if cross else "#BBBBBB", width=2.5 if cross else 1.2),
                         name="copy between backends" if cross else "same backend"))
    for b in dict.fromkeys(result.group_backend.values()):
        nodes = [n for n in Q if Q.nodes[n]["backend"] == b]
        data.append(dict(
            type="scatter", x=[pos[n][0] for n in nodes], y=[pos[n][1] for n in nodes], mode="markers+text", name=b,
            text=nodes, textposition="top center",
            marker=dict(color=cmap[b], size=[10 + 3 * min(Q.nodes[n]["n_ops"], 20) for n in nodes],
                        line=dict(color="#333333", width=0.5)),
            hovertext=[f"<b>{n}</b><br>{Q.nodes[n]['n_ops']} op(s)" for n in nodes], hoverinfo="text",
        ))
    layout = dict(title=title_text(title or ("aggregated ops (the quotient graph)" if step is None
                                        else f"the quotient graph after step {step}")),
                  xaxis=dict(title=title_text("launch order (topological generation)"), showgrid=False, zeroline=False),
                  yaxis=dict(showgrid=False, zeroline=False, showticklabels=False),
                  height=height or 360, legend=dict(title=title_text("backend")))
    return figure_from_dicts(data, layout)


def buffer_occupancy(result, *, buffers: Iterable[str] | None = None, title: str | None = None,
                     height: int | None = None, at_s: float | None = None, max_buffers: int | None = 12) -> go.Figure:
    """Items held in each cross-backend buffer over time (steps), with the buffer depth as a line.

    Parameters
    ----------
    result : BufferedResult
    buffers : iterable of str, optional
        Buffer names (``"<src group>-><dst group>"``) to show; default all.
    at_s : float, optional
        Draw a cursor at this time (a step walker passes ``result.replay(k)["time_s"]``).
    max_buffers : int, optional
        Draw at most this many buffers, those holding the most items longest (hundreds of lines
        are unreadable); the title says how many of how many. ``None``: all.
    """
    import pandas as pd

    occ = result.occupancy
    depth = result.params.get("buffer_depth", 0)
    names = list(dict.fromkeys(occ["buffer"])) if len(occ) else []
    if buffers is not None:
        keep = set(buffers)
        names = [n for n in names if n in keep]
    span = float(result.metrics.get("makespan_s", 0.0))
    unit, f = time_unit(span)
    by = {n: sub for n, sub in occ.groupby("buffer", sort=False)} if len(occ) else {}
    n_all = len(names)
    if max_buffers is not None and n_all > max_buffers:
        def held(n: str) -> float:  # item-seconds held: how much the buffer was used
            sub = by[n]
            t = np.append(sub["time_s"].to_numpy(float), span)
            return float((sub["items"].to_numpy(float) * np.diff(t)).sum())

        best = set(sorted(names, key=held, reverse=True)[:max_buffers])
        names = [n for n in names if n in best]
    cmap = group_colors(names)  # a buffer is no device: never a device's colour
    data = []
    for n in names:
        sub = by.get(n, pd.DataFrame({"time_s": [], "items": []}))
        # the state holds until the next change; start at 0 and run to the end of the simulation
        xs = np.concatenate([[0.0], sub["time_s"].to_numpy(float) * f, [span * f]])
        it = sub["items"].to_numpy(float)
        ys = np.concatenate([[0.0], it, [it[-1] if len(it) else 0.0]])
        data.append(dict(type="scatter", x=xs, y=ys, mode="lines", line=dict(shape="hv", color=cmap[n]),
                         name=n))
    if depth:
        data.append(dict(type="scatter", x=[0, span * f], y=[depth, depth], mode="lines", name=f"depth {depth}",
                         line=dict(color="#D55E00", dash="dash")))
    if at_s is not None:
        top = max([depth, 1] + [int(v) for v in occ["items"]]) if len(occ) else max(depth, 1)
        data.append(dict(type="scatter", x=[at_s * f, at_s * f], y=[0, top], mode="lines", name="now",
                         line=dict(color="#333333", width=1)))
    shown = f" ({len(names)} of {n_all} buffers: the most used)" if len(names) < n_all else ""
    layout = dict(title=title_text((title or "buffer occupancy (items held: producer start -> consumer end)") + shown),
                  font=FONT, meta={"time_factor": f},
                  xaxis=dict(title=title_text(f"time ({unit})")), yaxis=dict(title=title_text("items in buffer")),
                  height=height or 320 + legend_height_px([d["name"] for d in data], title="buffer"),
                  legend=legend_below("buffer"))  # beside the plot, a dozen buffers scrolled
    return figure_from_dicts(data, layout)


# ---------------------------------------------------------------------------- the walk, step by step
# What a step walker draws for decision ``step`` of a PartitionResult's log (``step`` = -1: before the
# first decision; the Result convention of ``replay``). The figures keep one trace structure for the
# whole log (a fixed node trace with per-point colours, a focus trace, legend-only traces), so that a
# step changes a few arrays, never the traces: the widget sends a patch, not a figure (issue 14).

_STATIC: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def _edge_points(p: tuple[float, float], q: tuple[float, float]) -> tuple[list[float], list[float]]:
    """Three points of an edge: straight between neighbouring generations, an arc over the ones it skips.

    Why: in a layered drawing a skip edge (``a -> c`` beside ``a -> d -> c``) would run straight
    over the ops in between and vanish into the chain, and it is exactly the edge that makes a merge
    cyclic.
    """
    span = q[0] - p[0]
    lift = 0.0 if abs(span) <= 1 else min(0.3 * abs(span), 1.2)
    return [p[0], (p[0] + q[0]) / 2, q[0]], [p[1], (p[1] + q[1]) / 2 + lift, q[1]]


def _height(widest: int, base: int) -> int:
    """A figure height for a drawing whose widest generation has ``widest`` nodes (no empty band)."""
    return int(min(base, 240 + 40 * max(1, widest)))


def _static(result) -> dict:
    """What does not change along the log (positions, hover texts, candidates), once per result."""
    st = _STATIC.get(result)
    if st is not None:
        return st
    g = result.graph
    pos = layered_layout(g)
    ops = list(g)
    marks: dict[str, Any] = {}
    used: dict[str, None] = {}
    for s in result.steps:
        if s.action == "mark":
            marks[s.subject] = s.data
            used[s.data.get("choice")] = None
    for b in result.assignment.values():
        used[b] = None
    used.pop(None, None)
    backends = [b for b in dict.fromkeys([*result.support.backends, *used]) if b in used]
    hover = []
    for o in ops:
        op = g.op(o)
        d = marks.get(o, {})
        cands = ", ".join(f"{html.escape(str(b))} ({p})" for b, p in d.get("candidates", ()))
        off = ", ".join(f"{html.escape(str(b))} ({p})" for b, p in d.get("disabled", ()))
        hover.append(f"<b>{html.escape(o)}</b> ({html.escape(op.op_type)})<br>can run on: {cands or 'no backend switched on'}"
                     + (f"<br>switched off: {off}" if off else "")
                     + f"<br>ends in {html.escape(str(result.group_of.get(o, '–')))} on "
                       f"{html.escape(str(result.assignment.get(o, '–')))}")
    edges = list(g.nx.edges)
    geom = {(u, v): _edge_points(pos[u], pos[v]) for u, v in edges}
    ex = np.full(4 * len(edges), np.nan, dtype=np.float32)
    ey = np.full(4 * len(edges), np.nan, dtype=np.float32)
    for i, e in enumerate(edges):
        ex[4 * i:4 * i + 3], ey[4 * i:4 * i + 3] = geom[e]
    gens = g.generations()
    st = {
        "ops": ops, "pos": pos, "edges": edges, "geom": geom, "ex": ex, "ey": ey, "hover": hover, "marks": marks,
        "widest": max((len(x) for x in gens), default=1),
        "backends": backends, "x": np.array([pos[o][0] for o in ops], dtype=np.float32),
        "y": np.array([pos[o][1] for o in ops], dtype=np.float32), "n_gen": len(gens),
        "group_colors": group_colors(list(result.groups)), "group_size": {k: len(v) for k, v in result.groups.items()},
    }
    _STATIC[result] = st
    return st


def _groups_of(Q: nx.DiGraph) -> tuple[dict[str, str], dict[str, str]]:
    """op -> representative of its group, op -> backend, from a quotient of ``quotient_at``."""
    group: dict[str, str] = {}
    backend: dict[str, str] = {}
    for n, d in Q.nodes(data=True):
        for o in d["ops"]:
            group[o] = n
            backend[o] = d["backend"]
    return group, backend


def _group_label(result, rep: str, n_ops: int) -> str:
    """A group's name on screen: its final name once it holds all its ops, else its first op (+ how many)."""
    final = result.group_of.get(rep)
    if final is not None and len(result.groups[final]) == n_ops:
        return final
    return rep if n_ops == 1 else f"{rep} +{n_ops - 1}"


def _cycle_path(Q: nx.DiGraph, a: str, b: str, via: str) -> list[tuple[str, str]]:
    """Edges of a path from one group through ``via`` into the other (what a refused merge would close)."""
    for x, y in ((a, b), (b, a)):
        if x in Q and y in Q and via in Q and nx.has_path(Q, x, via) and nx.has_path(Q, via, y):
            nodes = nx.shortest_path(Q, x, via) + nx.shortest_path(Q, via, y)[1:]
            return list(zip(nodes[:-1], nodes[1:]))
    return []


def decision_focus(result, step: int | None, quotient: nx.DiGraph | None = None) -> dict[str, Any]:
    """What decision ``step`` of a partition log is about, for the walk's figures and words.

    Returns ``{"ops", "groups", "edge", "via", "path", "outcome"}``: the ops to outline, the groups
    (named by their representative op, as :meth:`PartitionResult.quotient_at` names them) after the
    step, the op edge that was tried, the group a cycle would run through and the quotient edges of
    that path. ``step=None`` or ``-1``: nothing in focus.

    >>> from hetsched.partition.examples import merge_outcomes
    >>> from hetsched.partition import partition_by_support
    >>> r = partition_by_support(*merge_outcomes())
    >>> k = next(s.index for s in r.steps if s.data.get("outcome") == "cycle")
    >>> f = decision_focus(r, k)
    >>> f["outcome"], f["groups"], f["via"], f["path"]
    ('cycle', ['stem', 'c'], 'd', [('stem', 'd'), ('d', 'c')])
    """
    out: dict[str, Any] = {"ops": [], "groups": [], "edge": None, "via": None, "path": [], "outcome": None}
    if step is None or step < 0:
        return out
    s = result.steps[step]
    d = s.data or {}
    Q = result.quotient_at(step) if quotient is None else quotient
    group, _backend = _groups_of(Q)
    edge = d.get("edge")
    if s.action == "mark":
        groups = [s.subject]
    elif s.action == "fallback":
        groups = [s.subject]
    elif d.get("outcome") == "merged":
        groups = [s.delta["merge"][0]]
    elif "groups" in d:
        groups = list(d["groups"])
    elif edge is not None:
        groups = list(dict.fromkeys(group[o] for o in edge if o in group))
    else:
        groups = [group[s.subject]] if s.subject in group else []
    groups = [x for x in groups if x in Q]
    members = set(groups)
    out.update(groups=groups, edge=tuple(edge) if edge else None, outcome=d.get("outcome", s.action),
               ops=[o for o in result.graph if group.get(o) in members])
    if d.get("outcome") == "cycle" and d.get("via") is not None:
        out["via"] = d["via"]
        out["path"] = _cycle_path(Q, groups[0], groups[-1], d["via"]) if len(groups) == 2 else []
    return out


def marked_graph_view(result, step: int | None = None, *, by: str = "backend", colors: Mapping[str, str] | None = None,
                      quotient: nx.DiGraph | None = None, focus_ops: Iterable[str] | None = None,
                      focus_edge: tuple[str, str] | None = None, title: str | None = None,
                      height: int | None = None) -> go.Figure:
    """The op graph after decision ``step`` of the log: each marked op in its backend's colour (or its
    aggregated op's), ops not marked yet grey, the decision's ops outlined, cross-backend edges thick.

    The hover text of an op lists the backends that can run it with their priorities (the marking
    of claim 1) and the switched-off ones. ``by="group"``: each op in the colour of the aggregated op
    it ends up in (:func:`~hetsched.plot.core.group_colors`, never a device colour), pale while that
    aggregated op is still being merged. The trace structure is the same for every step.

    Parameters
    ----------
    result : PartitionResult
    step : int, optional
        Log index (``-1``: before the first decision; default: the last).
    by : {"backend", "group"}
    quotient : nx.DiGraph, optional
        ``result.quotient_at(step)`` when the caller has it already.
    focus_ops, focus_edge : optional
        What to outline instead of the decision's own ops and edge (e.g. the groups running now).

    >>> from hetsched.partition.examples import merge_outcomes
    >>> from hetsched.partition import partition_by_support
    >>> r = partition_by_support(*merge_outcomes())
    >>> fig = marked_graph_view(r, 2)          # three ops marked
    >>> [t.name for t in fig.data][:5]
    ['edges', 'copies between backends', 'edge tried', 'ops', 'this decision']
    >>> list(fig.data[4].customdata)           # the op the third decision marked
    ['d']
    """
    st = _static(result)
    n_steps = len(result.steps)
    k = n_steps - 1 if step is None else int(step)
    Q = result.quotient_at(k) if quotient is None else quotient
    group, backend = _groups_of(Q)
    ops, pos = st["ops"], st["pos"]
    cmap = color_map(st["backends"], base=colors)
    if by == "group":
        gcol, gsize = st["group_colors"], st["group_size"]
        size_now = Counter(group.values())
        final = result.group_of
        col = [NEUTRAL if o not in group else
               (gcol[final[o]] if size_now[group[o]] >= gsize[final[o]] else lighten(gcol[final[o]], 0.65))
               for o in ops]
        legend = list(result.groups) if len(result.groups) <= 12 else []
        legend_colors = {x: gcol[x] for x in legend}
        legend_title = "aggregated op (pale: still merging)"
    else:
        col = [cmap[backend[o]] if o in backend else NEUTRAL for o in ops]
        legend = st["backends"]
        legend_colors = cmap
        legend_title = "backend"
    if focus_ops is None or focus_edge is None:
        f = decision_focus(result, k, Q)
        focus_ops = f["ops"] if focus_ops is None else focus_ops
        focus_edge = f["edge"] if focus_edge is None else focus_edge
    focus_ops = [o for o in focus_ops if o in pos]
    cx: list = []
    cy: list = []
    geom = st["geom"]
    for u, v in st["edges"]:
        bu, bv = backend.get(u), backend.get(v)
        if bu is not None and bv is not None and bu != bv:
            xs, ys = geom[u, v]
            cx += [*xs, None]
            cy += [*ys, None]
    n = len(ops)
    size = 16 if n <= 40 else (12 if n <= 120 else (7 if n <= 600 else 4))
    # the big traces in WebGL beyond 300 ops, as the mapping's placement graph: a step re-plots every
    # trace, and in headless Chromium (software GL) redrawing the 973-op graph took 130-150 ms in SVG
    # and 30-40 ms in WebGL (its first draw costs ~100-200 ms more); all of them together: a WebGL
    # canvas lies above the SVG traces and would grey SVG copies over with its edges
    big = "scattergl" if n > 300 or len(st["edges"]) > 600 else "scatter"
    marker_type = big
    fe = tuple(focus_edge) if focus_edge else None
    ex_, ey_ = geom[fe] if fe in geom else ([], [])
    data = [
        dict(type=big, x=st["ex"], y=st["ey"], mode="lines",
             line=dict(color="#BBBBBB", width=1 if n > 200 else 1.5), hoverinfo="skip", showlegend=False, name="edges"),
        dict(type=big, x=np.asarray(cx, dtype=np.float32) if cx else [], y=np.asarray(cy, dtype=np.float32) if cy else [],
             mode="lines", line=dict(color=CROSS if n <= 300 else "rgba(213, 94, 0, 0.45)", width=3 if n <= 300 else 1.2),
             name="copies between backends", hoverinfo="skip"),
        dict(type="scatter", x=ex_, y=ey_, mode="lines", line=dict(color=FOCUS, width=5), name="edge tried",
             hoverinfo="skip", showlegend=False),
        dict(type=marker_type, x=st["x"], y=st["y"], mode="markers+text" if n <= 40 else "markers", name="ops",
             text=[html.escape(o) for o in ops] if n <= 40 else None, textposition="top center",
             marker=dict(color=col, size=size, line=dict(color="#333333", width=0.5)),
             hovertext=st["hover"], hoverinfo="text", customdata=ops, showlegend=False),
        dict(type="scatter", x=[pos[o][0] for o in focus_ops], y=[pos[o][1] for o in focus_ops], mode="markers",
             name="this decision", customdata=focus_ops, hoverinfo="skip",
             marker=dict(symbol="circle-open", color=FOCUS, size=size + 10, line=dict(color=FOCUS, width=3))),
        dict(type="scatter", x=[None], y=[None], mode="markers", name="not marked yet", hoverinfo="skip",
             marker=dict(color=NEUTRAL, size=12)),
    ]
    if data[3]["text"] is None:
        del data[3]["text"]
    for lab in legend:
        data.append(dict(type="scatter", x=[None], y=[None], mode="markers", name=html.escape(str(lab)), hoverinfo="skip",
                         marker=dict(color=legend_colors[lab], size=12)))
    layout = dict(
        showlegend=True, legend=dict(title=title_text(legend_title)), font=FONT,
        xaxis=dict(title=title_text("topological generation"), showgrid=False, zeroline=False,
                   range=[-0.5, max(0.5, st["n_gen"] - 0.5)]),
        yaxis=dict(showgrid=False, zeroline=False, showticklabels=False),
        height=height or _height(st["widest"], 440), margin=dict(l=10, r=10, t=50, b=40),
        title=title_text(title or f"the graph after decision {k + 1} of {n_steps}"),
    )
    return figure_from_dicts(data, layout)


def marked_blocks(result, step: int | None = None, *, by: str = "backend", colors: Mapping[str, str] | None = None,
                  quotient: nx.DiGraph | None = None, focus_ops: Iterable[str] | None = None,
                  focus_edge: tuple[str, str] | None = None, layout: BlockLayout | None = None,
                  expanded: Iterable[str] = (), title: str | None = None, height: int | None = None) -> go.Figure:
    """:func:`marked_graph_view` for big graphs: the graph by blocks (layers, stages) after decision ``step``.

    Each collapsed block (:func:`hetsched.blocks.op_blocks`) is one square in the colour of the
    backend its marked ops hold most FLOPs on (:func:`~hetsched.plot.core.block_colors`): grey while
    none is marked, lighter while part is, a thick outline in the runner-up's colour when its ops
    are on several backends. ``by="group"``: in the colour of the aggregated op holding most of it,
    lighter while that one is still being merged. The blocks of what the decision is about are
    ringed: a mark, the op's block; a merge, the blocks of both ends of the edge tried (joined by a
    red line when they differ); ``focus_ops`` (the groups running in a buffered run) their blocks.
    Block edges that carry a copy between backends are drawn thick. Expanded blocks (``expanded``,
    or a precomputed ``layout`` of :func:`~hetsched.plot.core.block_layout`) show their ops.

    Trace order is fixed (edges, copies between backends, edge tried, blocks, this decision, then
    legend-only traces), so a step changes arrays only.

    >>> from hetsched.io.generators import resnet_like
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.partition import partition_by_support
    >>> s = toy_system(); s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    >>> r = partition_by_support(resnet_like(n_stages=2, blocks_per_stage=2), s)
    >>> fig = marked_blocks(r, 0)                     # one op marked
    >>> [t.name for t in fig.data][:5]
    ['edges', 'copies between backends', 'edge tried', 'blocks', 'this decision']
    >>> cols = list(fig.data[3].marker.color)
    >>> list(fig.data[4].customdata), cols.count("#BDBDBD") == len(cols) - 1   # the others still grey
    (['block:stem'], True)
    """
    st = _static(result)
    g = result.graph
    n_steps = len(result.steps)
    k = n_steps - 1 if step is None else int(step)
    lay = layout if layout is not None else block_layout(g, None, expanded)
    Q = result.quotient_at(k) if quotient is None else quotient
    group, backend = _groups_of(Q)
    if by == "group":
        size_now = Counter(group.values())
        final, gsize = result.group_of, st["group_size"]
        # an op counts once its aggregated op is complete: blocks stay light while theirs still merge
        label = {o: final[o] for o in group if size_now[group[o]] >= gsize[final[o]]}
        cmap = st["group_colors"]
        col = block_colors(g, lay, label, cmap, on="in", missing="still merging or not marked")
        legend = list(result.groups) if len(result.groups) <= 12 else []
        words = dict(partly="lighter: still merging", mixed="outlined: ops in several aggregated ops (outline: the next one)")
        legend_title = "aggregated op"
    else:
        cmap = color_map(st["backends"], base=colors)
        col = block_colors(g, lay, backend, cmap, on="marked", missing="not marked yet")
        legend = st["backends"]
        words = dict(partly="lighter: partly marked", mixed="outlined: ops on several backends (outline: the next one)")
        legend_title = "backend"
    if focus_ops is None or focus_edge is None:
        f = decision_focus(result, k, Q)
        focus_ops = f["ops"] if focus_ops is None else focus_ops
        focus_edge = f["edge"] if focus_edge is None else focus_edge
    node_of, pos = lay.node_of, lay.pos
    fe = tuple(focus_edge) if focus_edge else None
    if fe is not None and all(o in node_of for o in fe):
        focus = [node_of[o] for o in fe]
    else:
        focus = [node_of[o] for o in focus_ops if o in node_of]
    copies: dict[tuple[str, str], None] = {}
    for u, v in st["edges"]:
        bu, bv = backend.get(u), backend.get(v)
        if bu is not None and bv is not None and bu != bv and node_of[u] != node_of[v]:
            copies[node_of[u], node_of[v]] = None
    cx, cy = edge_xy(list(copies), pos)
    tried = [node_of[o] for o in fe] if fe is not None and all(o in node_of for o in fe) else []
    if len(set(tried)) < 2:
        tried = []
    kind = "scatter" if len(lay.nodes) <= 300 else "scattergl"
    data = [
        dict(type=kind, x=lay.ex, y=lay.ey, mode="lines", line=dict(color="#BBBBBB", width=1.5), hoverinfo="skip",
             showlegend=False, name="edges"),
        dict(type=kind, x=cx, y=cy, mode="lines", line=dict(color=CROSS, width=3), name="copies between backends",
             hoverinfo="skip"),
        dict(type="scatter", x=[pos[n][0] for n in tried], y=[pos[n][1] for n in tried], mode="lines",
             line=dict(color=FOCUS, width=5), name="edge tried", hoverinfo="skip", showlegend=False),
        block_node_trace(lay, col, kind=kind),
        block_ring_trace(lay, focus, name="this decision", color=FOCUS, hover="what this decision is about"),
    ]
    data += block_legend(legend, {x: cmap[x] for x in legend}, none="not marked yet", **words)
    layout_ = block_axes(lay, legend_title, title=title or f"the graph by blocks after decision {k + 1} of {n_steps}",
                         height=height or 440)
    layout_["font"] = FONT
    layout_["margin"] = dict(l=10, r=10, t=50, b=40)
    return figure_from_dicts(data, layout_)


def quotient_walk_view(result, step: int | None = None, *, colors: Mapping[str, str] | None = None,
                       quotient: nx.DiGraph | None = None, running: Mapping[str, int] | None = None,
                       max_nodes: int = 60, max_focus: int = 24, title: str | None = None,
                       height: int | None = None) -> go.Figure:
    """The quotient graph (one node per aggregated op so far) after decision ``step``, the decision's
    groups outlined and, for a merge refused because it would create a cycle, the path that would
    close it drawn in red.

    A group is named by its final name (``gpu0#1``) once it holds all its ops, else by its first op
    (``a +2``: two more ops). Above ``max_nodes`` groups only the decision's groups, the cycle path and
    some of their neighbours (``max_focus`` nodes in all) are drawn (the title says how many of how many). ``running``: ``{final group
    name: input}`` of jobs running in a buffered run (outlined and labelled with the input).
    The trace structure is the same for every step.

    >>> from hetsched.partition.examples import merge_outcomes
    >>> from hetsched.partition import partition_by_support
    >>> r = partition_by_support(*merge_outcomes())
    >>> k = next(s.index for s in r.steps if s.data.get("outcome") == "cycle")
    >>> fig = quotient_walk_view(r, k)
    >>> fig.data[2].name, len([x for x in fig.data[2].x if x is None])   # two edges: stem -> d -> c
    ('path that would close a cycle', 2)
    """
    st = _static(result)
    n_steps = len(result.steps)
    k = n_steps - 1 if step is None else int(step)
    Q = result.quotient_at(k) if quotient is None else quotient
    if running:
        by_final = {result.group_of.get(n): n for n in Q}
        focus = {"groups": [by_final[g] for g in running if g in by_final], "path": [], "via": None}
    else:
        focus = decision_focus(result, k, Q)
    keep = list(dict.fromkeys([*focus["groups"], *(x for e in focus["path"] for x in e),
                               *([focus["via"]] if focus["via"] else [])]))
    keep = [x for x in keep if x in Q]
    total = Q.number_of_nodes()
    if total > max_nodes:
        near = [y for x in keep for y in (*Q.predecessors(x), *Q.successors(x))]
        # a hub's hundred neighbours would hide the decision: a few of each side
        shown = list(dict.fromkeys([*keep, *near]))[:max(len(keep), min(max_nodes, max_focus))]
        if not shown:  # nothing in focus (before the first decision): the first groups
            shown = list(Q)[:max_nodes]
        H = Q.subgraph(shown)
    else:
        H = Q
    gens = list(nx.topological_generations(H)) if H.number_of_nodes() else []
    pos: dict[str, tuple[float, float]] = {}
    for x, gen in enumerate(gens):
        for y, n in enumerate(sorted(gen)):
            pos[n] = (float(x), y - (len(gen) - 1) / 2)
    cmap = color_map(st["backends"], base=colors)
    path = set(focus["path"])
    lines: dict[str, tuple[list, list]] = {"same": ([], []), "cross": ([], []), "path": ([], [])}
    for u, v in H.edges:
        kind = "path" if (u, v) in path else ("cross" if Q.nodes[u]["backend"] != Q.nodes[v]["backend"] else "same")
        xs, ys = lines[kind]
        px, py = _edge_points(pos[u], pos[v])
        xs += [*px, None]
        ys += [*py, None]
    nodes = list(H)
    n_ops = {n: len(Q.nodes[n]["ops"]) for n in nodes}
    labels = {n: _group_label(result, n, n_ops[n]) for n in nodes}
    if running:
        for g, i in running.items():
            for n in nodes:
                if result.group_of.get(n) == g:
                    labels[n] = f"{labels[n]} · input {i}"
    many = len(nodes) > 30
    focus_nodes = [n for n in keep if n in pos and (n != focus["via"] or not path)]
    data = [
        dict(type="scatter", x=lines["same"][0], y=lines["same"][1], mode="lines", hoverinfo="skip",
             line=dict(color="#BBBBBB", width=1.5), name="same backend"),
        dict(type="scatter", x=lines["cross"][0], y=lines["cross"][1], mode="lines", hoverinfo="skip",
             line=dict(color=CROSS, width=3), name="copy between backends"),
        dict(type="scatter", x=lines["path"][0], y=lines["path"][1], mode="lines", hoverinfo="skip",
             line=dict(color=CYCLE, width=5, dash="dash"), name="path that would close a cycle"),
        dict(type="scatter", x=[pos[n][0] for n in nodes], y=[pos[n][1] for n in nodes],
             mode="markers" if many else "markers+text", text=[html.escape(labels[n]) for n in nodes],
             textposition="top center", name="aggregated ops", showlegend=False, customdata=nodes,
             marker=dict(color=[cmap.get(Q.nodes[n]["backend"], NEUTRAL) for n in nodes],
                         size=[14 + 3 * min(n_ops[n], 20) for n in nodes], line=dict(color="#333333", width=0.5)),
             hovertext=[f"<b>{html.escape(labels[n])}</b> on {html.escape(str(Q.nodes[n]['backend']))}<br>{n_ops[n]} op(s): "
                        + html.escape(", ".join(Q.nodes[n]["ops"][:6])) + (" …" if n_ops[n] > 6 else "") for n in nodes],
             hoverinfo="text"),
        dict(type="scatter", x=[pos[n][0] for n in focus_nodes], y=[pos[n][1] for n in focus_nodes], mode="markers",
             name="this decision", hoverinfo="skip",
             marker=dict(symbol="circle-open", color=FOCUS, size=[24 + 3 * min(n_ops[n], 20) for n in focus_nodes],
                         line=dict(color=FOCUS, width=3))),
    ]
    for b in st["backends"]:
        data.append(dict(type="scatter", x=[None], y=[None], mode="markers", name=html.escape(str(b)), hoverinfo="skip",
                         marker=dict(color=cmap[b], size=12)))
    shown_note = "" if H is Q else f" ({len(nodes)} of {total} shown: around this decision)"
    layout = dict(title=title_text(title or f"aggregated ops after decision {k + 1} of {n_steps}{shown_note}"), font=FONT,
                  xaxis=dict(title=title_text("launch order (topological generation)"), showgrid=False, zeroline=False,
                             dtick=1),
                  yaxis=dict(showgrid=False, zeroline=False, showticklabels=False),
                  height=height or _height(max((len(x) for x in gens), default=1), 400),
                  margin=dict(l=10, r=10, t=50, b=40), legend=dict(title=title_text("backend")))
    return figure_from_dicts(data, layout)


#: colours of what is not an aggregated op's work: a copy as the graphs draw copies, idle time in greys
#: (waiting light, blocked dark), launches in a yellow no group and no early device wears
RUN_COLORS = {"launch": "#F0E442", "copy between backends": CROSS, "waiting for input": IDLE,
              "blocked: output buffer full": "#616161"}
#: what each part of a buffered run is called on screen (the Gantt's legend)
_RUN_PARTS = {"launch": "launch", "transfer": "copy between backends", "wait": "waiting for input",
              "blocked": "blocked: output buffer full"}


def runs_gantt(serial, buffered, *, cursor_s: float | None = None, title: str | None = None,
               height: int | None = None, max_groups: int = 12, colors: Mapping[str, str] | None = None) -> go.Figure:
    """The serial run (``buffer_depth=0``) and the buffered run of the same partition on one time axis.

    Lanes ``serial · gpu0``... above ``buffered · gpu0``...; each aggregated op's work in its group
    colour (:func:`~hetsched.plot.core.group_colors`), launches, copies and waits in their kind's
    colour, every bar labelled with its input. ``cursor_s``: a time marked on the axis (a walker's
    position in the buffered run). Beyond ``max_groups`` aggregated ops the work is coloured by
    backend instead (one legend entry per group would not be read), ``colors`` giving the backends'
    colours (default: :func:`~hetsched.plot.core.color_map` over them).

    >>> from hetsched.partition.examples import merge_outcomes
    >>> from hetsched.partition import partition_by_support, simulate_buffered
    >>> g, s = merge_outcomes(); r = partition_by_support(g, s)
    >>> fig = runs_gantt(simulate_buffered(r, s, n_inputs=3, buffer_depth=0),
    ...                  simulate_buffered(r, s, n_inputs=3, buffer_depth=2), cursor_s=0.0)
    >>> fig.layout.yaxis.categoryarray[-1], fig.layout.shapes[0].x0
    ('serial · gpu0', 0.0)
    """
    import pandas as pd

    frames, lanes = [], []
    for label, res in (("serial", serial), ("buffered", buffered)):
        tl = res.timeline
        tl = tl[tl["kind"] != "alloc"].copy()
        tl["part"] = [(op if k == "compute" and isinstance(op, str) else _RUN_PARTS.get(k, k))
                      for k, op in zip(tl["kind"], tl["op"])]
        # names come from user files (devices, hence groups): escaped for the hover and axis texts
        for col in ("lane", "name", "op"):
            tl[col] = [html.escape(x) if isinstance(x, str) else x for x in tl[col]]
        own = list(dict.fromkeys(tl["lane"].astype(str)))
        devs = [x for x in own if "->" not in x] + [x for x in own if "->" in x]
        tl["lane"] = f"{label} · " + tl["lane"].astype(str)
        lanes += [f"{label} · {x}" for x in devs]
        frames.append(tl)
    tl = pd.concat(frames, ignore_index=True)
    groups = list(buffered.partition.groups)
    by_group = len(groups) <= max_groups
    if not by_group:  # hundreds of legend entries (and traces) help nobody: the backend's colour, named
        tl["part"] = [buffered.partition.group_backend.get(p, p) for p in tl["part"]]
    backends = list(dict.fromkeys(buffered.partition.group_backend.values()))
    colors = {**(group_colors(groups) if by_group else color_map(backends, base=colors)), **RUN_COLORS}
    m_s, m_b = serial.metrics, buffered.metrics
    data, layout = gantt_parts(tl, color_by="part", colors=colors, lanes=lanes, cursor_s=cursor_s,
                                label_by="microbatch", height=height or max(300, 70 + 30 * len(lanes)),
                                title=title or (f"serial {m_s['throughput_per_s']:.4g} inputs/s vs buffered "
                                                f"{m_b['throughput_per_s']:.4g} inputs/s (depth {m_b.get('buffer_depth', 0):.0f})"))
    if any(t["type"] == "scattergl" for t in data):
        # thousands of bars drawn as WebGL segments: lanes as numbers on a labelled axis, times in float32,
        # both binary on the wire (the lane names repeated per point were most of a redraw's bytes)
        cats = list(layout["yaxis"]["categoryarray"])
        at = {c: float(i) for i, c in enumerate(cats)}
        for t in data:
            if t["type"] == "scattergl":
                t["y"] = np.array([at.get(v, np.nan) if v is not None else np.nan for v in t["y"]], dtype=np.float32)
                t["x"] = np.asarray(t["x"], dtype=np.float32)
        layout["yaxis"] = dict(tickmode="array", tickvals=list(range(len(cats))), ticktext=cats,
                               range=[-0.5, len(cats) - 0.5], zeroline=False)
    # under the plot: beside it, the groups and activities scrolled and hid entries
    legend_title = "aggregated op / activity" if by_group else "backend / activity"
    layout["legend"] = legend_below(legend_title)
    if height is None:
        layout["height"] += legend_height_px(dict.fromkeys(t["name"] for t in data if t.get("showlegend", True) is not False),
                                             title=legend_title)
    layout["font"] = FONT
    layout["meta"] = {"time_factor": time_unit(float(tl["end_s"].max()) if len(tl) else 0.0)[1]}
    layout["margin"] = dict(l=10, r=10, t=50, b=40)
    return figure_from_dicts(data, layout)


def with_cursor(fig: go.Figure, cursor_s: float, *, trace: str | None = None) -> dict:
    """``fig`` as a plain ``{"data", "layout"}`` dict with its time cursor moved to ``cursor_s``.

    Moves the cursor of :func:`runs_gantt` (a layout shape) or, with ``trace``, the x of the trace of
    that name (the ``now`` line of :func:`buffer_occupancy`). Nothing else is copied or rebuilt: a
    walker moves the cursor of a figure drawn once per result, and the widget sends only the cursor.

    >>> from hetsched.partition.examples import merge_outcomes
    >>> from hetsched.partition import partition_by_support, simulate_buffered
    >>> g, s = merge_outcomes(); r = partition_by_support(g, s)
    >>> b = simulate_buffered(r, s, n_inputs=3, buffer_depth=2)
    >>> with_cursor(buffer_occupancy(b, at_s=0.0), 1e-3, trace="now")["data"][-1]["x"]
    [1.0, 1.0]
    """
    data = [t._props for t in fig.data]
    layout = fig.layout._props
    meta = layout.get("meta")
    x = float(cursor_s) * float(meta.get("time_factor", 1.0) if isinstance(meta, dict) else 1.0)
    if trace is None:
        shapes = [dict(sh, x0=x, x1=x) for sh in layout.get("shapes", ())]
        return {"data": data, "layout": {**layout, "shapes": shapes}}
    data = [dict(t, x=[x, x]) if t.get("name") == trace else t for t in data]
    return {"data": data, "layout": layout}
