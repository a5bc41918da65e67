"""The partition patent: mark every op with a backend by support and priority, then merge into aggregated ops.

The patent (``docs/patents.md``) describes three steps:

1. **Marking** (claims 1-2, paragraphs 39-44, 61): walk the computation graph and give every op the
   highest-priority backend that supports it, from the mapping list ``backend, op type,
   priority`` (1 = best).
2. **Aggregation** (paragraphs 46-47, figure 3/4): "starting a backend for every op is very
   time-consuming", so ops marked with the same backend are merged into *aggregated ops*, following
   the *minimal-neighbourhood principle*: never merge across an op of another backend. In the
   patent's figure, ``a, b`` and ``f, g`` (all gpu) are not merged because the fpga op ``d`` lies
   between them; the graph then launches the gpu twice and the fpga once.
3. **Buffers** between the backends of aggregated ops, so backends run as a pipeline (paragraph
   50): see :func:`hetsched.partition.simulate_buffered`.

What real partitioners add, and this module implements:

* ``merge="global"`` also joins *non-adjacent* same-backend regions when no path leaves one and
  re-enters the other (the cycle guard of torch.fx's ``CapabilityBasedPartitioner`` and of TVM
  BYOC's ``MergeCompilerRegions``): fewer launches than the patent's rule.
* Even the patent's adjacent rule needs that guard: with ``a -> c`` and ``a -> d -> c`` where
  ``a, c`` run on the gpu and ``d`` on the fpga, merging ``a`` and ``c`` (they are adjacent) makes
  the quotient graph cyclic. Every merge here is checked; the quotient graph is always a DAG.
* ``min_group_size=k`` sends groups of fewer than ``k`` ops back to the ``fallback`` backend, as
  Torch-TensorRT's ``min_block_size`` does (tiny accelerator islands cost more in launches and
  copies than they save), then merges the fallback ops again.
* ``fallback`` plays ONNX Runtime's CPU execution provider: it takes every op no enabled backend
  supports instead of failing.

Examples
--------
>>> from hetsched.graph import OpGraph
>>> from hetsched.system import SupportTable
>>> g = OpGraph("patent-fig3")
>>> for n, t in [("a", "Gelu"), ("b", "Gelu"), ("d", "Conv"), ("f", "Gelu"), ("g", "Gelu")]:
...     _ = g.add_op(n, t)
>>> for u, v in [("a", "b"), ("b", "d"), ("d", "f"), ("f", "g")]:
...     _ = g.connect(u, v, 8)
>>> table = SupportTable({"fpga": {"Conv": 1}, "gpu": {"*": 2}})
>>> r = partition_by_support(g, table)
>>> dict(r.groups)
{'gpu#0': ('a', 'b'), 'fpga#0': ('d',), 'gpu#1': ('f', 'g')}
>>> r.metrics["n_launches"], r.metrics["n_cross_edges"]
(3, 2)
>>> r.timeline.empty   # a bare support table prices nothing: no timeline
True

The parts: :mod:`~hetsched.partition.marking` (step 1), :mod:`~hetsched.partition.merging` (step 2,
the strategies and ``min_group_size``), :mod:`~hetsched.partition.quotient` (the quotient DAG and
its cycle guard), :mod:`~hetsched.partition.capacity` (device memory), this module (arguments,
naming the groups, metrics) and :mod:`~hetsched.partition.result` (the result and its replay).
"""

from __future__ import annotations

import gc
import heapq
from functools import partial
from typing import Any, Iterable, Mapping

from ..errors import HetschedError, UnknownNameError, name_list
from ..graph import OpGraph
from ..registry import lookup
from ..results import StepLog
from ..system import SupportTable, System
from .quotient import Quotient, graph_index
from .buffered import serial_timeline
from .capacity import check_backend_memory
from .marking import check_overrides, mark, resolve_table
from .merging import MERGE_STRATEGIES, MergeContext, Merger, send_small_groups_back
from .result import GroupEdge, PartitionResult, find_cycle_merge

__all__ = ["PartitionResult", "GroupEdge", "MergeContext", "partition_by_support", "MERGE_STRATEGIES", "find_cycle_merge"]


def partition_by_support(
    graph: OpGraph,
    table_or_system: SupportTable | System,
    *,
    enabled: Iterable[str] | None = None,
    overrides: Mapping[str, str] | None = None,
    fallback: str | None = None,
    merge: str | None = "adjacent",
    min_group_size: int = 1,
    max_tries: int = 4,
) -> PartitionResult:
    """Mark each op with its best supporting backend and merge same-backend ops into aggregated ops.

    Implements the multi-backend partition patent (``docs/patents.md``): marking by the
    mapping list (claims 1-2, 4-6), aggregation under the minimal-neighbourhood rule (claim 2,
    paragraph 47), plus the cycle guard, global merging and ``min_block_size`` of real partitioners
    (see the module docstring).

    Parameters
    ----------
    graph : OpGraph
    table_or_system : SupportTable or System
        The mapping list (a system brings its ``support`` table and lets names be checked).
    enabled : iterable of str, optional
        Backends switched on (default: all in the table). A disabled backend is never chosen.
    overrides : dict, optional
        ``{op: backend}`` pins single ops (the backend must be enabled and support the op type).
    fallback : str, optional
        Backend that takes every op no enabled backend supports (assumed to run anything, like
        ONNX Runtime's CPU provider) and the groups sent back by ``min_group_size``. Without it an
        unsupported op raises :class:`~hetsched.errors.UnsupportedOpError`.
    merge : {"adjacent", "global", None} or callable
        A name from :data:`MERGE_STRATEGIES` (``"adjacent"``: the patent's rule; ``"global"``: also
        non-adjacent same-backend regions when acyclic; ``None`` or ``"none"``: one launch per op),
        or a strategy of one's own of the same shape: ``f(ctx)`` gets a :class:`MergeContext` and
        asks for merges itself (each still cycle-checked and logged), as the named ones do.
    min_group_size : int
        Groups with fewer ops go to ``fallback`` (Torch-TensorRT ``min_block_size``); needs
        ``fallback``. Groups already on the fallback are never moved.
    max_tries : int
        ``merge="global"``: open groups of the same backend each group tries before opening its own.

    Returns
    -------
    PartitionResult

    Raises
    ------
    UnsupportedOpError
        Listing every op (with its op type) that no enabled backend supports, when no fallback.
    UnknownNameError
        An unknown backend in ``enabled``/``overrides``/``fallback``, or an unknown op in ``overrides``.
    HetschedError
        A bad ``merge`` (an :class:`~hetsched.errors.UnknownNameError` listing the strategies), ``min_group_size`` < 1 or > 1 without a fallback, an override that
        pins an op to a backend that does not support it or is disabled.
    CapacityError
        Given a :class:`~hetsched.system.System`: an op whose weights + inputs + outputs exceed its
        backend's memory (naming both; the host is taken to have ample memory).

    Examples
    --------
    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> s = toy_system()
    >>> s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))  # the FPGA now wins convs
    >>> r = partition_by_support(chain(5), s)
    >>> [r.group_of[o] for o in ("op0", "op1", "op2", "op3", "op4")]   # Conv, Relu, Conv, Relu, Conv
    ['fpga0#0', 'gpu0#0', 'fpga0#1', 'gpu0#1', 'fpga0#2']
    >>> r.steps[0].reason
    'fpga0 has the best priority (1) among the enabled backends supporting Conv: fpga0:1, gpu0:2, cpu0:3'
    >>> r2 = partition_by_support(chain(5), s, enabled=["gpu0"], overrides={"op2": "fpga0"})
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: overrides pins op 'op2' to backend 'fpga0', which is disabled
    >>> dict(partition_by_support(chain(5), s, overrides={"op1": "fpga0", "op3": "fpga0"}).groups)
    {'fpga0#0': ('op0', 'op1', 'op2', 'op3', 'op4')}
    >>> dict(partition_by_support(chain(5), s, min_group_size=2, fallback="cpu0").groups)
    {'cpu0#0': ('op0', 'op1', 'op2', 'op3', 'op4')}
    """
    # the log allocates many small containers and nothing cyclic: the cyclic collector's passes
    # over a large heap would dominate the run time on 100k-op graphs
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _partition(graph, table_or_system, enabled, overrides, fallback, merge, min_group_size, max_tries)
    finally:
        if gc_was_enabled:
            gc.enable()


def _partition(graph, table_or_system, enabled, overrides, fallback, merge, min_group_size, max_tries) -> PartitionResult:
    table, system = resolve_table(table_or_system)
    known = list(table.backends) + ([d for d in system.device_names if d not in table.backends] if system else [])
    known_set = set(known)
    en_list = None if enabled is None else list(dict.fromkeys(enabled))
    if en_list is not None:
        bad = [b for b in en_list if b not in known_set]
        if bad:
            raise UnknownNameError(f"enabled names unknown backend(s) {name_list(bad)}; known: {name_list(known)}", device=bad[0])
    en_set = None if en_list is None else set(en_list)
    if merge is None:
        merge = "none"
    strategy = lookup(MERGE_STRATEGIES, merge, what="merge strategy", field="merge")
    key = merge if isinstance(merge, str) else getattr(merge, "__name__", "custom")
    if not isinstance(min_group_size, int) or isinstance(min_group_size, bool) or min_group_size < 1:
        raise HetschedError(f"min_group_size must be an integer >= 1, got {min_group_size!r}", field="min_group_size")
    if fallback is not None and fallback not in known_set:
        raise UnknownNameError(f"fallback names unknown backend {fallback!r}; known: {name_list(known)}", device=fallback)
    if min_group_size > 1 and fallback is None:
        raise HetschedError(
            f"min_group_size={min_group_size} sends small groups to a fallback backend: name one with fallback=",
            field="fallback",
        )
    if not isinstance(max_tries, int) or max_tries < 1:
        raise HetschedError(f"max_tries must be an integer >= 1, got {max_tries!r}", field="max_tries")

    idx = graph_index(graph)
    names, types = idx.names, idx.types
    ov = dict(overrides or {})
    check_overrides(ov, idx, graph.name, table, known_set, en_set, fallback)

    # ---- 1. marking (one step per op)
    steps = StepLog()
    backend, unsupported = mark(names, types, table, en_set, fallback, ov, steps)

    # ---- 2. aggregation
    q = Quotient(idx, backend)
    m = Merger(q, names, steps, max_tries)
    strategy(MergeContext(m, idx))

    # ---- 3. min_group_size: small islands back to the fallback, then merge those again
    n_fallback_groups = send_small_groups_back(m, strategy, fallback, min_group_size) if min_group_size > 1 else 0

    params = {
        "merge": key,
        "enabled": None if en_list is None else tuple(en_list),
        "overrides": dict(ov),
        "fallback": fallback,
        "min_group_size": min_group_size,
        "max_tries": max_tries,
    }
    return _assemble(graph, idx, m, n_fallback_groups, table, system, params, unsupported)


def _assemble(graph: OpGraph, idx: Any, m: Merger, n_fallback_groups: int, table: SupportTable,
              system: System | None, params: dict[str, Any], unsupported: list[tuple[str, str]]) -> PartitionResult:
    """Name the groups, collect the quotient edges and the metrics: the result."""
    q, steps = m.q, m.steps
    names = idx.names
    nodes = [x for x in range(len(q.members)) if q.members[x]]
    # name groups in a topological order of the quotient, ties by their first op (reads naturally)
    first = {x: min(q.members[x]) for x in nodes}
    indeg = {x: len(q.pred[x]) for x in nodes}
    ready = [(first[x], x) for x in nodes if indeg[x] == 0]
    heapq.heapify(ready)
    topo: list[int] = []
    while ready:
        _, x = heapq.heappop(ready)
        topo.append(x)
        for y in q.succ[x]:
            indeg[y] -= 1
            if indeg[y] == 0:
                heapq.heappush(ready, (first[y], y))
    if len(topo) != len(nodes):  # pragma: no cover - the merge guard makes this impossible
        raise HetschedError("internal error: the quotient graph has a cycle", field="merge")
    counter: dict[str, int] = {}
    gname: dict[int, str] = {}
    groups: dict[str, tuple[str, ...]] = {}
    gback: dict[str, str] = {}
    for x in topo:
        b = q.backend[x]
        k = counter.get(b, 0)
        counter[b] = k + 1
        nm = f"{b}#{k}"
        gname[x] = nm
        groups[nm] = tuple(map(names.__getitem__, sorted(q.members[x])))
        gback[nm] = b
    owner = q.owner
    be = q.backend
    # owner[i] is the group of op i (ops are numbered in names' order)
    assignment = dict(zip(names, map(be.__getitem__, owner)))
    group_of = dict(zip(names, map(gname.__getitem__, owner)))
    # quotient edges with their tensors; copies counted once per (tensor, destination backend)
    emap: dict[tuple[int, int], dict[str, float]] = {}
    n_copies = 0
    bytes_copied = 0.0
    for tname, size, p, cons in idx.tensors:
        gp = owner[p]
        bp = be[gp]
        dst_b: set[str] | None = None
        for c in cons:
            gc = owner[c]
            if gc != gp:  # (within a group the backend is the same: no copy)
                k = (gp, gc)
                d = emap.get(k)
                if d is None:
                    emap[k] = {tname: size}
                else:
                    d[tname] = size
                bc = be[gc]
                if bc != bp:
                    if dst_b is None:
                        dst_b = {bc}
                    else:
                        dst_b.add(bc)
        if dst_b:  # (adding 0.0 would leave the sum unchanged)
            n_copies += len(dst_b)
            bytes_copied += size * len(dst_b)
    order = {x: i for i, x in enumerate(topo)}
    edges = [
        (gname[a], gname[b], be[a], be[b], tuple(ts), float(sum(ts.values())))
        for (a, b), ts in sorted(emap.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]]))
    ]
    n_cross = sum(1 for e in edges if e[2] != e[3])
    # every accepted merge and every cycle refusal is logged through the merger, which counts them
    n_merged = m.n_merged
    n_cycle = m.n_cycle
    metrics = {
        "n_ops": len(names),
        "n_groups": len(topo),
        "n_launches": len(topo),
        "n_backends_used": len(counter),
        "n_cross_edges": n_cross,
        "n_copies": n_copies,
        "bytes_copied": bytes_copied,
        "n_fallback_ops": len(unsupported),
        "n_merges": n_merged,
        "n_cycle_rejections": n_cycle,
        "n_fallback_groups": n_fallback_groups,
    }
    if system is not None:
        check_backend_memory(graph, assignment, system)
    return PartitionResult(
        metrics=metrics,
        steps=steps,
        params=params,
        # one input run serially through the groups, timed only when someone looks at it
        timeline=None if system is None else partial(serial_timeline, system=system),
        initial_state={"backend": {}, "group": {}},
        graph=graph,
        assignment=assignment,
        group_of=group_of,
        groups=groups,
        group_backend=gback,
        edge_data=tuple(edges),
        fallback_ops=tuple(unsupported),
        support=table,
    )
