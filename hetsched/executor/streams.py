"""Stream assignment: which device stream each kernel and copy is enqueued on.

Policies (``STREAM_POLICIES``, or pass a callable ``f(graph, kinds, devices) -> {op: stream}``):

* ``"single"`` -- one stream per device: every kernel and copy in one FIFO (the old executor).
* ``"patent"`` -- claim 3 of the operator-scheduling (executor) patent (``docs/patents.md``): kernels of
  asynchronous ops go to a first stream, kernels of synchronous ops to a second one; copies go
  to their own H2D / D2H streams, as PaddlePaddle's InterpreterCore does. Independent async
  kernels still share one stream, so they never run concurrently.
* ``"nimble"`` -- Kwon, Yu, Jeong & Chun, "Nimble: Lightweight and Parallel GPU Task Scheduling for
  Deep Learning", NeurIPS 2020, section 4.2: take the transitive reduction (the "minimum
  equivalent graph") of the DAG, build the bipartite graph with an edge ``(u_left, v_right)`` per
  reduced edge, find a maximum matching, and put ``u`` and ``v`` on the same stream for every
  matched edge. Every stream is a chain of the DAG, so two independent ops never share a stream
  (maximum logical concurrency), and the number of streams ``n - |matching|`` is the fewest such
  chains, which keeps the cross-stream synchronizations to a minimum. ``max_streams`` folds the
  chains onto fewer streams (round robin), trading false dependencies for fewer streams.

Stream names are ``"<device>:<name>"`` (``gpu0:compute``, ``gpu0:s3``); ``cpu_sync`` ops have none.

>>> from hetsched.io.generators import fork_join
>>> g = fork_join(3, 2)
>>> len(set(assign_streams(g, "nimble").values()))
3
>>> set(assign_streams(g, "patent").values())
{'gpu0:compute'}
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Mapping

from ..errors import HetschedError, UnknownNameError
from ..graph import OpGraph
from ..registry import lookup
from .kinds import DEVICE_KINDS, classify, device_of_ops

__all__ = [
    "STREAM_POLICIES",
    "assign_streams",
    "transitive_reduction_edges",
    "reduction_of",
    "max_bipartite_matching",
    "single_streams",
    "patent_streams",
    "nimble_streams",
]


def transitive_reduction_edges(graph: OpGraph) -> list[tuple[str, str]]:
    """Edges of the transitive reduction of ``graph`` (in topological order of their source).

    An edge ``u -> v`` is redundant when ``v`` is also reachable through another successor of
    ``u``. Reachability sets are Python integers used as bitsets, so 10k-op graphs take well under
    a second.

    >>> from hetsched.graph import OpGraph
    >>> g = OpGraph(); _ = [g.add_op(n, "Relu") for n in "abc"]
    >>> _ = g.add_tensor("x", 4, producer="a", consumers=["b", "c"]); _ = g.connect("b", "c", 4)
    >>> transitive_reduction_edges(g)
    [('a', 'b'), ('b', 'c')]
    """
    order = graph.topological_order()
    idx = {n: i for i, n in enumerate(order)}
    G = graph.nx
    reach: list[int] = [0] * len(order)  # strict descendants
    keep: dict[str, list[str]] = {}
    for n in reversed(order):
        succ = list(G.successors(n))
        below = 0
        for s in succ:
            below |= reach[idx[s]]
        keep[n] = [s for s in succ if not (below >> idx[s]) & 1]
        r = below
        for s in succ:
            r |= 1 << idx[s]
        reach[idx[n]] = r
    return [(u, v) for u in order for v in keep[u]]


def reduction_of(graph: OpGraph) -> list[tuple[str, str]]:
    """:func:`transitive_reduction_edges`, cached in the graph's own cache (cleared on mutation).

    >>> from hetsched.io.generators import chain
    >>> reduction_of(chain(3))
    [('op0', 'op1'), ('op1', 'op2')]
    """
    cache = getattr(graph, "_cache", None)
    if cache is None:
        return transitive_reduction_edges(graph)
    # OpGraph clears _cache on every mutation, so a cached reduction is never stale
    red = cache.get("executor.reduction")
    if red is None:
        red = cache["executor.reduction"] = transitive_reduction_edges(graph)
    return list(red)


def max_bipartite_matching(left: list, adj: Mapping[object, list]) -> dict:
    """A maximum matching ``{left: right}`` by Hopcroft-Karp (deterministic: follows list order).

    >>> max_bipartite_matching(["a", "b"], {"a": [1, 2], "b": [1]})
    {'a': 2, 'b': 1}
    """
    INF = float("inf")
    match_l: dict = {u: None for u in left}
    match_r: dict = {}
    # greedy start: most vertices of a DAG's reduction match on the first try
    for u in left:
        for v in adj.get(u, ()):
            if v not in match_r:
                match_l[u] = v
                match_r[v] = u
                break
    while True:
        dist: dict = {}
        q: deque = deque()
        for u in left:
            if match_l[u] is None:
                dist[u] = 0
                q.append(u)
        found = False
        while q:
            u = q.popleft()
            for v in adj.get(u, ()):
                w = match_r.get(v)
                if w is None:
                    found = True
                elif w not in dist:
                    dist[w] = dist[u] + 1
                    q.append(w)
        if not found:
            break
        # iterative DFS along the BFS layers
        it = {u: 0 for u in dist}
        for root in left:
            if match_l[root] is not None or dist.get(root) != 0:
                continue
            stack = [root]
            path_v: list = []
            while stack:
                u = stack[-1]
                nbrs = adj.get(u, ())
                advanced = False
                while it[u] < len(nbrs):
                    v = nbrs[it[u]]
                    it[u] += 1
                    w = match_r.get(v)
                    if w is None:
                        path_v.append(v)
                        # augment along the stack
                        for uu, vv in zip(stack, path_v):
                            match_l[uu] = vv
                            match_r[vv] = uu
                        stack = []
                        advanced = True
                        break
                    if dist.get(w, INF) == dist[u] + 1:
                        path_v.append(v)
                        stack.append(w)
                        advanced = True
                        break
                if not advanced:
                    dist[u] = INF  # dead end: prune it for this phase
                    stack.pop()
                    if path_v:
                        path_v.pop()
    return {u: v for u, v in match_l.items() if v is not None}


def single_streams(graph: OpGraph, kinds: Mapping[str, str], devices: Mapping[str, str]) -> dict[str, str]:
    """One stream per device: all of a device's kernels and copies go to it.

    >>> from hetsched.io.generators import chain
    >>> single_streams(chain(2), {"op0": "gpu_async", "op1": "copy_d2h"}, {"op0": "gpu0", "op1": "gpu0"})
    {'op0': 'gpu0:s0', 'op1': 'gpu0:s0'}
    """
    return {n: f"{devices[n]}:s0" for n in graph.ops if kinds[n] in DEVICE_KINDS}


_PATENT_STREAM = {"gpu_async": "compute", "gpu_sync": "sync", "copy_h2d": "h2d", "copy_h2d_sync": "h2d", "copy_d2h": "d2h"}


def patent_streams(graph: OpGraph, kinds: Mapping[str, str], devices: Mapping[str, str]) -> dict[str, str]:
    """The patent's streams (async / sync / copies): claim 3 of the executor patent, async kernels on a first
    stream, sync kernels on a second, copies on their own.

    >>> from hetsched.io.generators import chain
    >>> patent_streams(chain(2), {"op0": "gpu_async", "op1": "gpu_sync"}, {"op0": "gpu0", "op1": "gpu0"})
    {'op0': 'gpu0:compute', 'op1': 'gpu0:sync'}
    """
    return {n: f"{devices[n]}:{_PATENT_STREAM[kinds[n]]}" for n in graph.ops if kinds[n] in DEVICE_KINDS}


def nimble_streams(
    graph: OpGraph, kinds: Mapping[str, str], devices: Mapping[str, str], *, max_streams: int | None = None
) -> dict[str, str]:
    """Nimble's streams (one per chain): Nimble's assignment (Kwon et al., NeurIPS 2020), chains from a maximum matching.

    Only edges of the transitive reduction between two device ops of the same device are matched,
    so every stream is a chain of dependent ops. ``max_streams`` (per device) folds the chains
    round robin, in the order of their first op.

    >>> from hetsched.io.generators import fork_join
    >>> g = fork_join(2, 1); k = {n: "gpu_async" for n in g.ops}
    >>> nimble_streams(g, k, {n: "gpu0" for n in g.ops})
    {'fork': 'gpu0:s0', 'join': 'gpu0:s0', 'b0_0': 'gpu0:s0', 'b1_0': 'gpu0:s1'}
    """
    dev_ops = [n for n in graph.topological_order() if kinds[n] in DEVICE_KINDS]
    is_dev = set(dev_ops)
    adj: dict[str, list[str]] = {n: [] for n in dev_ops}
    for u, v in reduction_of(graph):
        if u in is_dev and v in is_dev and devices[u] == devices[v]:
            adj[u].append(v)
    match = max_bipartite_matching(dev_ops, adj)
    has_pred = set(match.values())
    out: dict[str, str] = {}
    n_chain: dict[str, int] = {}
    for n in dev_ops:  # topological order: chain heads are numbered by their first op
        if n in has_pred:
            continue
        d = devices[n]
        k = n_chain.get(d, 0)
        n_chain[d] = k + 1
        sid = k % max_streams if max_streams else k
        cur: str | None = n
        while cur is not None:
            out[cur] = f"{d}:s{sid}"
            cur = match.get(cur)
    return {n: out[n] for n in graph.ops if n in out}


STREAM_POLICIES: dict[str, Callable[..., dict[str, str]]] = {
    "single": single_streams,
    "patent": patent_streams,
    "nimble": nimble_streams,
}


def assign_streams(
    graph: OpGraph,
    policy: str | Callable[..., Mapping[str, str]] = "single",
    *,
    kinds: Mapping[str, str] | None = None,
    devices: Mapping[str, str] | None = None,
    max_streams: int | None = None,
) -> dict[str, str]:
    """The stream of every device op (kernels and copies), by a named policy or a callable.

    Parameters
    ----------
    graph : OpGraph
    policy : {"single", "patent", "nimble"} or callable
        A callable gets ``(graph, kinds, devices)`` and returns ``{op: stream}``.
    kinds : dict, optional
        Op kinds (default :func:`~hetsched.executor.kinds.classify`).
    devices : dict, optional
        The device of every op (default: device ops on ``gpu0``, host ops on ``cpu0``).
    max_streams : int, optional
        Only for ``"nimble"``: fold its chains onto at most this many streams per device.

    Returns
    -------
    dict
        ``{op: "<device>:<stream>"}`` for every op whose kind puts work on a device.

    Raises
    ------
    HetschedError
        Unknown policy name (``field="policy"``), a callable that leaves a device op without a
        stream or gives one to a ``cpu_sync`` op, a non-positive ``max_streams``.

    >>> from hetsched.io.generators import chain
    >>> assign_streams(chain(2), "single")
    {'op0': 'gpu0:s0', 'op1': 'gpu0:s0'}
    """
    kinds = dict(kinds) if kinds is not None else classify(graph)
    for n in graph.ops:
        if n not in kinds:
            raise HetschedError(f"op {n!r} has no kind", op=n, field="kinds")
    devices = dict(devices) if devices is not None else device_of_ops(graph, kinds)
    if max_streams is not None and (not isinstance(max_streams, int) or max_streams < 1):
        raise HetschedError(f"max_streams must be a positive integer, got {max_streams!r}", field="max_streams")
    if callable(policy):
        out = dict(policy(graph, kinds, devices))
    else:
        fn = lookup(STREAM_POLICIES, policy, what="stream policy")
        out = fn(graph, kinds, devices, max_streams=max_streams) if fn is nimble_streams else fn(graph, kinds, devices)
    validate_streams(graph, kinds, out)
    return out


def validate_streams(graph: OpGraph, kinds: Mapping[str, str], streams: Mapping[str, str]) -> None:
    """Every device op has a stream, no host op has one, every name is an op.

    >>> from hetsched.io.generators import chain
    >>> validate_streams(chain(2), {"op0": "gpu_async", "op1": "gpu_async"}, {"op0": "gpu0:s0"})
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: device op 'op1' (gpu_async) has no stream
    """
    for n in streams:
        if n not in graph:
            raise UnknownNameError(f"stream assignment names unknown op {n!r}", op=n)
    for n in graph.ops:
        k = kinds[n]
        if k in DEVICE_KINDS and not streams.get(n):
            raise HetschedError(f"device op {n!r} ({k}) has no stream", op=n, field="streams")
        if k == "cpu_sync" and streams.get(n):
            raise HetschedError(f"host op {n!r} (cpu_sync) cannot be put on stream {streams[n]!r}", op=n,
                                field="streams")
