"""Figures for seed 003 (partitioning by support, aggregated ops, buffered backends).

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

from typing import Iterable, Mapping

import plotly.graph_objects as go

from .core import _text, color_map, figure_from_dicts, graph_view, time_unit

__all__ = ["partition_view", "buffer_occupancy", "quotient_view"]


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
    layout = dict(title=_text(title or ("aggregated ops (the quotient graph)" if step is None
                                        else f"the quotient graph after step {step}")),
                  xaxis=dict(title=_text("launch order (topological generation)"), showgrid=False, zeroline=False),
                  yaxis=dict(showgrid=False, zeroline=False, showticklabels=False),
                  height=height or 360, legend=dict(title=_text("backend")))
    return figure_from_dicts(data, layout)


def buffer_occupancy(result, *, buffers: Iterable[str] | None = None, title: str | None = None,
                     height: int | None = None, at_s: float | None = None) -> go.Figure:
    """Items held in each cross-backend buffer over time (steps), with the buffer depth as a line.

    Parameters
    ----------
    result : BufferedResult
    buffers : iterable of str, optional
        Buffer names (``"<src group>-><dst group>"``) to show; default all.
    at_s : float, optional
        Draw a cursor at this time (a step walker passes ``result.replay(k)["time_s"]``).
    """
    occ = result.occupancy
    depth = result.params.get("buffer_depth", 0)
    names = list(dict.fromkeys(occ["buffer"])) if len(occ) else []
    if buffers is not None:
        keep = set(buffers)
        names = [n for n in names if n in keep]
    span = float(result.metrics.get("makespan_s", 0.0))
    unit, f = time_unit(span)
    cmap = color_map(names)
    data = []
    for n in names:
        sub = occ[occ["buffer"] == n]
        # the state holds until the next change; start at 0 and run to the end of the simulation
        xs = [0.0] + list(sub["time_s"] * f) + [span * f]
        ys = [0] + list(sub["items"]) + [int(sub["items"].iloc[-1])]
        data.append(dict(type="scatter", x=xs, y=ys, mode="lines", line=dict(shape="hv", color=cmap[n]), name=n))
    if depth:
        data.append(dict(type="scatter", x=[0, span * f], y=[depth, depth], mode="lines", name=f"depth {depth}",
                         line=dict(color="#D55E00", dash="dash")))
    if at_s is not None:
        top = max([depth, 1] + [int(v) for v in occ["items"]]) if len(occ) else max(depth, 1)
        data.append(dict(type="scatter", x=[at_s * f, at_s * f], y=[0, top], mode="lines", name="now",
                         line=dict(color="#333333", width=1)))
    layout = dict(title=_text(title or "buffer occupancy (items held: producer start -> consumer end)"),
                  xaxis=dict(title=_text(f"time ({unit})")), yaxis=dict(title=_text("items in buffer")),
                  height=height or 320, legend=dict(title=_text("buffer")))
    return figure_from_dicts(data, layout)
