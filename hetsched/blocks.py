"""Blocks: a big model seen as its layers or stages, each expandable into its ops (issue 22).

A ResNet-50 training graph has 368 ops and an Inception-v3 one 643; drawn op by op they are a flat
line or a hairball. Real models name their ops hierarchically (``layer3.0.conv1``,
``Mixed_7c.branch_pool``, ``h11.attn.softmax``), so the first part of a name is the block a
reader thinks in (a ResNet stage, an Inception module, a transformer layer); a backward op
(``...grad``) belongs to the backward half of its block. Graphs without such names (generated
ones: ``n12``) are cut into bands of consecutive topological generations.

The block graph is the quotient of the op graph by the blocks: one node per block (ops, FLOPs,
weights summed), an edge where any op of one block feeds an op of another (bytes summed). It may
have cycles when blocks interleave (a residual branch named apart from its stage): it is a view,
never scheduled.

>>> from hetsched.io.generators import resnet_like
>>> g = resnet_like(n_stages=2, blocks_per_stage=2)
>>> b = op_blocks(g)
>>> sorted(set(b.values()))
['fc', 'gap', 's0b0', 's0b1', 's1b0', 's1b1', 'stem', 'stem_relu']
>>> bg = block_graph(g, b)
>>> bg.nodes["s0b0"]["n_ops"] > 1, bg.has_edge("s0b0", "s0b1")
(True, True)
"""

from __future__ import annotations

import re
from typing import Mapping

import networkx as nx

from .graph import OpGraph

__all__ = ["op_blocks", "block_graph", "BACKWARD_MARK"]

#: appended to a block's name for the backward ops of a training graph
BACKWARD_MARK = " (backward)"
_GRAD = re.compile(r"(^|[._/])(grad|bwd|backward)($|[._/])", re.IGNORECASE)
_SPLIT = re.compile(r"[./:]")


def _is_backward(name: str, op) -> bool:
    phase = op.attrs.get("phase") if hasattr(op, "attrs") else None
    return phase == "backward" or bool(_GRAD.search(name))


def op_blocks(graph: OpGraph, *, depth: int = 1, max_blocks: int = 80, bands: int = 24) -> dict[str, str]:
    """The block of every op: the first ``depth`` parts of its dotted name (backward ops apart).

    Falls back to ``bands`` bands of topological generations when names do not group the graph
    (every op its own block, one block for everything, or more than ``max_blocks`` blocks).

    >>> from hetsched.io.generators import chain
    >>> sorted(set(op_blocks(chain(50), bands=5).values()))
    ['gen 0-9', 'gen 10-19', 'gen 20-29', 'gen 30-39', 'gen 40-49']
    """
    if depth < 1:
        from .errors import HetschedError

        raise HetschedError(f"depth must be >= 1, got {depth}", field="depth")
    out: dict[str, str] = {}
    for name, op in graph.ops.items():
        parts = [p for p in _SPLIT.split(name) if p]
        key = ".".join(parts[:depth]) if len(parts) > depth else (parts[0] if parts else name)
        out[name] = key + (BACKWARD_MARK if _is_backward(name, op) else "")
    n = len(set(out.values()))
    if graph.n_ops and (n <= 1 or n > min(max_blocks, max(2, graph.n_ops // 2))):
        return _bands(graph, bands)
    return out


def _bands(graph: OpGraph, bands: int) -> dict[str, str]:
    gens = graph.generations()
    k = max(1, -(-len(gens) // max(1, bands)))  # generations per band, rounded up
    out = {}
    for i in range(0, len(gens), k):
        last = min(len(gens), i + k) - 1
        label = f"gen {i}-{last}" if last > i else f"gen {i}"
        for gi in range(i, last + 1):
            for o in gens[gi]:
                out[o] = label
    return out


def block_graph(graph: OpGraph, blocks: Mapping[str, str]) -> nx.DiGraph:
    """The quotient of ``graph`` by ``blocks``: nodes carry ``n_ops``, ``flops``, ``weight_bytes``,
    ``ops`` (in topological order) and ``first`` (the position of their first op); edges ``bytes``."""
    q = nx.DiGraph()
    order = graph.topological_order()
    for i, o in enumerate(order):
        b = blocks[o]
        op = graph.op(o)
        if b not in q:
            q.add_node(b, n_ops=0, flops=0.0, weight_bytes=0, ops=[], first=i)
        d = q.nodes[b]
        d["n_ops"] += 1
        d["flops"] += float(op.flops)
        d["weight_bytes"] += int(op.weight_bytes)
        d["ops"].append(o)
    for t in graph.tensors.values():
        if t.producer is None:
            continue
        a = blocks[t.producer]
        for c in t.consumers:
            b = blocks[c]
            if a == b:
                continue
            if q.has_edge(a, b):
                q.edges[a, b]["bytes"] += int(t.size_bytes)
            else:
                q.add_edge(a, b, bytes=int(t.size_bytes))
    return q
