"""The result of partitioning (the partition patent): backends per op, aggregated ops, the quotient graph, the log.

:class:`PartitionResult` is what :func:`~hetsched.partition.partition_by_support` returns; its
``replay(k)`` rebuilds the marking and merging after any step, :meth:`PartitionResult.quotient_at`
the quotient graph a step walker draws, and its ``timeline`` is one input run serially through
the aggregated ops (built on first access; see :func:`~hetsched.partition.serial_timeline`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Mapping

import networkx as nx
import pandas as pd

from ..graph import OpGraph
from ..results import Result
from ..system import SupportTable

__all__ = ["GroupEdge", "PartitionResult", "find_cycle_merge"]


@dataclass(frozen=True, slots=True)
class GroupEdge:
    """An edge of the quotient graph: tensors flowing from one aggregated op to another.

    ``cross`` is true when the two groups run on different backends (the tensors are copied).
    """

    src: str
    dst: str
    src_backend: str
    dst_backend: str
    tensors: tuple[str, ...]
    bytes: float

    @property
    def cross(self) -> bool:
        return self.src_backend != self.dst_backend


@dataclass(frozen=True, kw_only=True, eq=False)
class PartitionResult(Result):
    """Outcome of :func:`partition_by_support`.

    Attributes
    ----------
    graph : OpGraph
        The partitioned graph.
    assignment : mapping
        op -> backend.
    group_of : mapping
        op -> group name (``"<backend>#<k>"``, k counting that backend's groups in topological
        order of the quotient graph).
    groups : mapping
        group name -> its ops in topological order; groups in a topological order of the quotient.
    group_backend : mapping
        group name -> backend.
    edges : tuple of GroupEdge
        Quotient-graph edges with the tensors and bytes they carry (``edge_data`` holds them as
        plain tuples ``src, dst, src_backend, dst_backend, tensors, bytes``).
    fallback_ops : tuple of (op, op_type)
        Ops no enabled backend supports, given to ``fallback``.
    support : SupportTable
        The table that was used.

    ``steps``: one ``mark`` step per op (``data``: its candidates with priorities, the disabled
    ones, the rule that chose), one ``merge`` step per merge decision (merged, or why not: different
    backend, would create a cycle (``data["via"]``: the group the path goes through), not
    adjacent), one ``fallback`` step per group sent back by ``min_group_size``. ``replay(k)``
    returns ``{"backend": {op: backend}, "group": {op: representative op}}`` after step ``k``;
    :meth:`quotient_at` the quotient graph then.

    ``timeline``: one input run serially through the aggregated ops on the system the partition was
    made for (:func:`~hetsched.partition.serial_timeline`, roofline prices; built on first access),
    empty when the partition was made from a bare :class:`~hetsched.system.SupportTable`.
    """

    graph: OpGraph
    assignment: Mapping[str, str] = field(default_factory=dict)
    group_of: Mapping[str, str] = field(default_factory=dict)
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    group_backend: Mapping[str, str] = field(default_factory=dict)
    edge_data: tuple[tuple, ...] = ()
    fallback_ops: tuple[tuple[str, str], ...] = ()
    support: SupportTable = field(default_factory=SupportTable)

    def __post_init__(self) -> None:
        super().__post_init__()
        for f in ("assignment", "group_of", "groups", "group_backend"):
            object.__setattr__(self, f, MappingProxyType(dict(getattr(self, f))))
        object.__setattr__(self, "edge_data", tuple(self.edge_data))

    # ------------------------------------------------------------------ views
    @cached_property
    def edges(self) -> tuple[GroupEdge, ...]:
        """Quotient-graph edges (built on first access from ``edge_data``, kept cheap for widgets)."""
        return tuple(GroupEdge(*r) for r in self.edge_data)

    @cached_property
    def quotient(self) -> nx.DiGraph:
        """The quotient graph (aggregated ops as nodes): always a DAG.

        Node attributes ``backend``, ``n_ops``; edge attributes ``bytes``, ``tensors``, ``cross``.
        """
        Q = nx.DiGraph(name=f"{self.graph.name}[partition]")
        for gname, ops in self.groups.items():
            Q.add_node(gname, backend=self.group_backend[gname], n_ops=len(ops))
        for e in self.edges:
            Q.add_edge(e.src, e.dst, bytes=e.bytes, tensors=list(e.tensors), cross=e.cross)
        return Q

    @property
    def cross_edges(self) -> tuple[GroupEdge, ...]:
        """Quotient edges between groups on different backends (each is a copy per input)."""
        return tuple(e for e in self.edges if e.cross)

    def groups_frame(self) -> pd.DataFrame:
        """One row per aggregated op: ``group, backend, n_ops, ops``."""
        return pd.DataFrame(
            [(g, self.group_backend[g], len(ops), list(ops)) for g, ops in self.groups.items()],
            columns=["group", "backend", "n_ops", "ops"],
        )

    def edges_frame(self) -> pd.DataFrame:
        """One row per quotient edge: ``src, dst, src_backend, dst_backend, cross, bytes, tensors``."""
        return pd.DataFrame(
            [(e.src, e.dst, e.src_backend, e.dst_backend, e.cross, e.bytes, list(e.tensors)) for e in self.edges],
            columns=["src", "dst", "src_backend", "dst_backend", "cross", "bytes", "tensors"],
        )

    def placement(self):
        """The assignment as a :class:`~hetsched.evaluate.Placement`, for :func:`hetsched.evaluate`."""
        from ..evaluate import Placement

        return Placement(dict(self.assignment))

    # ------------------------------------------------------------------ replay
    # State after steps 0..k: {"backend": {op: b}, "group": {op: representative op}}. An op is its
    # own group once marked; an accepted merge relabels the smaller side's ops to the survivor's
    # representative; a ``fallback`` step moves a whole group to the fallback.
    def _replay_start(self) -> dict[str, Any]:
        backend = dict(self.initial_state.get("backend", {}))
        return {"backend": backend, "group": {o: o for o in backend}, "_members": {o: [o] for o in backend}}

    def _apply(self, state: dict[str, Any], step: Any) -> None:
        d = step.delta
        backend, group, members = state["backend"], state["group"], state["_members"]
        for o, b in d.get("backend", {}).items():
            backend[o] = b
            group[o] = o
            members[o] = [o]
        if "merge" in d:
            keep, lose = d["merge"]
            moved = members.pop(lose)
            for o in moved:
                group[o] = keep
            members[keep].extend(moved)
        if "relabel" in d:
            rep, b = d["relabel"]
            for o in members[rep]:
                backend[o] = b

    def _replay_end(self, state: dict[str, Any]) -> dict[str, Any]:
        del state["_members"]
        return state

    def quotient_at(self, k: int) -> nx.DiGraph:
        """The quotient graph after step ``k`` (what a step walker draws for a merge decision).

        Nodes are the groups of :meth:`replay` ``(k)`` named by their representative op, with
        ``backend`` and ``ops``; an edge ``(A, B)`` carries ``bytes`` and ``tensors`` from group A to
        group B. Before the first merge every marked op is its own node.

        >>> from hetsched.io.generators import chain
        >>> from hetsched.io.systems import toy_system
        >>> from hetsched.partition import partition_by_support
        >>> r = partition_by_support(chain(4), toy_system())
        >>> [r.quotient_at(k).number_of_nodes() for k in (3, r.n_steps - 1)]
        [4, 1]
        """
        st = self.replay(k)
        group, backend = st["group"], st["backend"]
        Q = nx.DiGraph(name=f"{self.graph.name}[after step {k}]")
        for o, rep in group.items():
            if rep not in Q:
                Q.add_node(rep, backend=backend[rep], ops=[])
            Q.nodes[rep]["ops"].append(o)
        for t in self.graph.tensors.values():
            gp = group.get(t.producer) if t.producer is not None else None
            if gp is None:
                continue
            for c in t.consumers:
                gc_ = group.get(c)
                if gc_ is None or gc_ == gp:
                    continue
                if Q.has_edge(gp, gc_):
                    e = Q.edges[gp, gc_]
                    if t.name not in e["tensors"]:
                        e["tensors"].append(t.name)
                        e["bytes"] += float(t.size_bytes)
                else:
                    Q.add_edge(gp, gc_, tensors=[t.name], bytes=float(t.size_bytes))
        return Q


def find_cycle_merge(result: PartitionResult) -> list[str] | None:
    """A cycle of the quotient graph as group names, or ``None`` (a checker for tests and users).

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.partition import partition_by_support
    >>> find_cycle_merge(partition_by_support(chain(4), toy_system(), merge="global")) is None
    True
    """
    try:
        cyc = nx.find_cycle(result.quotient)
    except nx.NetworkXNoCycle:
        return None
    return [u for u, _ in cyc]
