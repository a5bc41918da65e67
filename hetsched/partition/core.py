"""Seed 003: mark every op with a backend by support and priority, then merge into aggregated ops.

The patent (``../shared/seeds/003_9a492ad1d4867370.txt``) describes three steps:

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
"""

from __future__ import annotations

import gc
import heapq
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, Sequence

import networkx as nx
import pandas as pd

from ..errors import HetschedError, UnknownNameError, UnsupportedOpError, name_list
from ..graph import OpGraph
from ..results import Result, Step
from ..system import SupportTable, System
from ..timeline import empty_timeline
from ._quotient import Quotient, graph_index

_EMPTY_TL = empty_timeline()  # a partition has no timeline; building an empty frame costs ms

__all__ = ["PartitionResult", "GroupEdge", "MergeContext", "partition_by_support", "MERGE_STRATEGIES", "find_cycle_merge"]


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

    ``steps``: one ``mark`` step per op (its candidates with priorities, the choice), one ``merge``
    step per merge decision (merged, or why not: different backend, would create a cycle, not
    adjacent), one ``fallback`` step per group sent back by ``min_group_size``. ``replay(k)``
    returns ``{"backend": {op: backend}, "group": {op: representative op}}`` after step ``k``.
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
        steps = self.steps
        object.__setattr__(self, "steps", ())
        super().__post_init__()
        object.__setattr__(self, "steps", steps if isinstance(steps, _LazySteps) else tuple(steps))
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
    def replay(self, k: int) -> dict[str, Any]:
        """State after steps ``0..k``: ``{"backend": {op: b}, "group": {op: representative op}}``.

        An op is its own group once marked; an accepted merge relabels the smaller side's ops to
        the survivor's representative; a ``fallback`` step moves a whole group to the fallback.
        """
        if not -1 <= k < len(self.steps):
            raise IndexError(f"step {k} is outside -1..{len(self.steps) - 1}")
        backend: dict[str, str] = dict(self.initial_state.get("backend", {}))
        group: dict[str, str] = {}
        members: dict[str, list[str]] = {}
        for o in backend:
            group[o] = o
            members[o] = [o]
        raw = self.steps.raw() if isinstance(self.steps, _LazySteps) else [
            (s.action, s.subject, s.before, s.after, s.accepted, s.reason, s.delta, s.data) for s in self.steps
        ]
        for r in raw[: k + 1]:
            if not r[4]:
                continue
            d = r[6]
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
        return {"backend": backend, "group": group}


# ---------------------------------------------------------------------------- merging strategies


class _LazySteps(Sequence):
    """The decision log, stored as plain tuples and turned into :class:`Step` objects on access.

    A 100k-op graph logs a few hundred thousand decisions; building them all as frozen dataclasses
    up front would cost more than the partitioning itself.
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: list[tuple]) -> None:
        self._raw = raw

    def __len__(self) -> int:
        return len(self._raw)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [Step(j, *self._raw[j]) for j in range(*i.indices(len(self._raw)))]
        n = len(self._raw)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"step {i} out of range")
        return Step(i, *self._raw[i])

    def __iter__(self):
        for j, r in enumerate(self._raw):
            yield Step(j, *r)

    def raw(self) -> list[tuple]:
        """``(action, subject, before, after, accepted, reason, delta, data)`` per step (no copies)."""
        return self._raw

    def __repr__(self) -> str:
        return f"<{len(self._raw)} steps>"


def _merged_step(subject: str, n_before: int, backend: str, ra: str, rb: str, survivor: str, lost: str,
                 data: dict) -> tuple:
    """The step tuple of an accepted merge (every merge pass logs it through here)."""
    return ("merge", subject, float(n_before), float(n_before - 1), True,
            f"merged the {backend} groups of {ra!r} and {rb!r}: one launch instead of two",
            {"merge": (survivor, lost)}, data)


def _cycle_step(subject: str, n_alive: int, ra: str, rb: str, via_backend: str, via: str, data: dict) -> tuple:
    """The step tuple of a merge refused because it would close a cycle through ``via``."""
    data["via"] = via
    n = float(n_alive)
    return ("merge", subject, n, n, False,
            f"would create a cycle: a path leaves the group of {ra!r} through the {via_backend} group of"
            f" {via!r} and comes back into the group of {rb!r}", {}, data)


class _Ctx:
    """What the merge passes share: the quotient, the op names, the step log."""

    __slots__ = ("q", "names", "steps", "max_tries", "last_via", "n_merged", "n_cycle")

    def __init__(self, q: Quotient, names: list[str], steps: list[tuple], max_tries: int) -> None:
        self.last_via = -1
        self.q = q
        self.names = names
        self.steps = steps
        self.max_tries = max_tries
        # counted as logged, so the metrics need no pass over a few hundred thousand steps
        self.n_merged = 0
        self.n_cycle = 0

    def attempt(self, a: int, b: int, subject: str, mode: str, extra: Mapping[str, Any] | None = None) -> int | None:
        """Try to merge nodes ``a`` and ``b``; log the decision; return the survivor or ``None``."""
        q, names = self.q, self.names
        before = q.n_alive
        ra, rb = names[a], names[b]
        via, s = q.try_merge(a, b)
        data = {"groups": (ra, rb), "backend": q.backend[a], "mode": mode, **(extra or {})}
        if via is None:
            self.steps.append(_merged_step(subject, before, q.backend[a], ra, rb, names[s], rb if s == a else ra, data))
            self.n_merged += 1
            return s
        self.last_via = via
        self.steps.append(_cycle_step(subject, before, ra, rb, q.backend[via], names[via], data))
        self.n_cycle += 1
        return None

    def refuse(self, a: int, b: int, via: int, subject: str, mode: str, extra: Mapping[str, Any] | None = None) -> None:
        """Log a refused merge of nodes ``a`` and ``b`` (a path through ``via`` would close a cycle)."""
        q, names = self.q, self.names
        ra, rb = names[a], names[b]
        data = {"groups": (ra, rb), "backend": q.backend[a], "mode": mode, **(extra or {})}
        self.steps.append(_cycle_step(subject, q.n_alive, ra, rb, q.backend[via], names[via], data))
        self.n_cycle += 1


def _merge_none(ctx: _Ctx, pred_lists: list[list[int]], backends: list[str] | None) -> None:
    """Per-op launch: no aggregation at all (the baseline the patent improves on)."""


def _merge_adjacent(ctx: _Ctx, pred_lists: list[list[int]], backends: list[str] | None) -> None:
    """The patent's minimal-neighbourhood rule: merge connected same-backend ops, in topological order.

    Each op edge ``p -> v`` is one decision: merged, already together (not logged), different
    backend, or would create a cycle.
    """
    q, names, steps = ctx.q, ctx.names, ctx.steps
    be, owner = q.backend, q.owner
    append, try_merge = steps.append, q.try_merge
    n_merged = n_cycle = 0
    for v, preds in enumerate(pred_lists):
        nv = names[v]
        bv = be[owner[v]]
        refused: dict[tuple[int, int], int] = {}  # (group, group) -> via: nothing changed since
        for p in preds:
            bp = be[owner[p]]
            if bp != bv:
                np_ = names[p]
                n = float(q.n_alive)
                append(
                    ("merge", f"{np_}->{nv}", n, n, False,
                        f"different backend: {np_!r} runs on {bp}, {nv!r} on {bv}",
                        {}, {"edge": (np_, nv), "backends": (bp, bv), "mode": "adjacent"},
                    )
                )
                continue
            a, b = owner[p], owner[v]
            if a == b:
                continue
            np_ = names[p]
            if refused:
                via = refused.get((a, b))
                if via is not None:
                    # same two groups as a refusal a moment ago (another edge between them): same answer
                    ctx.refuse(a, b, via, f"{np_}->{nv}", "adjacent", {"edge": (np_, nv)})
                    continue
            # ctx.attempt() without the method call and the option merging (the hot loop of a 100k-op graph)
            before = q.n_alive
            ra, rb = names[a], names[b]
            via, s = try_merge(a, b)
            data = {"groups": (ra, rb), "backend": be[a], "mode": "adjacent", "edge": (np_, nv)}
            if via is None:
                append(_merged_step(f"{np_}->{nv}", before, be[a], ra, rb, names[s], rb if s == a else ra, data))
                n_merged += 1
                refused.clear()  # a merge changes the quotient: earlier answers may no longer hold
            else:
                ctx.last_via = via
                append(_cycle_step(f"{np_}->{nv}", before, ra, rb, be[via], names[via], data))
                n_cycle += 1
                refused[(a, b)] = via
    ctx.n_merged += n_merged
    ctx.n_cycle += n_cycle


def _log_not_adjacent(ctx: _Ctx) -> None:
    """After the adjacent pass: say why same-backend groups that are not neighbours stay apart."""
    q, names, steps = ctx.q, ctx.names, ctx.steps
    first: dict[str, int] = {}
    for x in q.live_nodes():
        b = q.backend[x]
        if b not in first:
            first[b] = x
            continue
        if any(q.backend[y] == b for y in q.succ[x]) or any(q.backend[y] == b for y in q.pred[x]):
            continue  # a neighbour of the same backend: its cycle rejection is already logged
        steps.append(
            ("merge", names[x], float(q.n_alive), float(q.n_alive), False,
                f"not adjacent: no edge joins the group of {names[x]!r} to another {b} group; the minimal-"
                f"neighbourhood rule never merges across other backends' ops (merge='global' would try)",
                {}, {"groups": (names[first[b]], names[x]), "backend": b, "mode": "adjacent"},
            )
        )


def _merge_global(ctx: _Ctx, pred_lists: list[list[int]], backends: list[str] | None) -> None:
    """Adjacent merging, then join non-adjacent same-backend groups when no cycle results.

    Groups are visited in the order of their first op; each tries the ``max_tries`` most recent open groups
    of its backend (newest first) and joins the first one that creates no cycle. Greedy: finding
    the fewest acyclic groups is a hard combinatorial problem; this is what torch.fx and TVM do too.
    """
    _merge_adjacent(ctx, pred_lists, backends)
    _global_pass(ctx, backends)


def _global_pass(ctx: _Ctx, backends: Iterable[str] | None) -> None:
    q, names = ctx.q, ctx.names
    only = None if backends is None else set(backends)
    open_: dict[str, list[int]] = {}
    # visit groups by their first op (a canonical order, independent of the internal numbering)
    for x in q.live_nodes():
        if not q.members[x]:
            continue
        b = q.backend[x]
        if only is not None and b not in only:
            continue
        lst = open_.setdefault(b, [])
        cur = x
        merged = False
        lo = max(-1, len(lst) - 1 - ctx.max_tries)
        for j in range(len(lst) - 1, lo, -1):
            y = lst[j]
            s = ctx.attempt(y, cur, f"{names[y]}+{names[cur]}", "global")
            if s is not None:
                lst[j] = s
                merged = True
                break
        if not merged:
            lst.append(cur)


class MergeContext:
    """What a user-defined merge strategy sees (``partition_by_support(..., merge=my_strategy)``).

    A strategy is a callable ``f(ctx)`` that asks for merges; every request goes through the same
    cycle guard and is logged as a ``merge`` step, so the quotient graph stays a DAG whatever the
    strategy does.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> def convs_only(ctx):
    ...     for op in ctx.ops:
    ...         for p in ctx.preds(op):
    ...             if ctx.op_type(p) == ctx.op_type(op) == "Conv" and ctx.backend(p) == ctx.backend(op):
    ...                 ctx.merge(p, op)
    >>> r = partition_by_support(chain(4), toy_system(), merge=convs_only)
    >>> r.params["merge"], r.metrics["n_groups"]
    ('convs_only', 4)
    """

    __slots__ = ("_ctx", "_idx")

    def __init__(self, ctx: _Ctx, idx) -> None:
        self._ctx = ctx
        self._idx = idx

    def _at(self, op: str) -> int:
        """The op's index; a name the graph does not have is an error naming it."""
        try:
            return self._idx.pos[op]
        except KeyError:
            raise UnknownNameError(f"merge strategy names unknown op {op!r}", op=op) from None

    @property
    def ops(self) -> list[str]:
        """Op names in the graph's topological order."""
        return list(self._idx.names)

    def preds(self, op: str) -> list[str]:
        names = self._idx.names
        return [names[p] for p in self._idx.preds[self._at(op)]]

    def succs(self, op: str) -> list[str]:
        names = self._idx.names
        return [names[p] for p in self._idx.succs[self._at(op)]]

    def op_type(self, op: str) -> str:
        return self._idx.types[self._at(op)]

    def backend(self, op: str) -> str:
        q = self._ctx.q
        return q.backend[q.owner[self._at(op)]]

    def group(self, op: str) -> str:
        """The representative op of ``op``'s current group."""
        return self._idx.names[self._ctx.q.owner[self._at(op)]]

    def merge(self, op_a: str, op_b: str, *, subject: str | None = None) -> bool:
        """Merge the groups of two ops (same backend) unless that makes a cycle; ``True`` if merged."""
        q = self._ctx.q
        a, b = q.owner[self._at(op_a)], q.owner[self._at(op_b)]
        if a == b:
            return True
        if q.backend[a] != q.backend[b]:
            raise HetschedError(
                f"cannot merge {op_a!r} ({q.backend[a]}) with {op_b!r} ({q.backend[b]}): different backends",
                op=op_b, field="merge",
            )
        return self._ctx.attempt(a, b, subject or f"{op_a}+{op_b}", "custom") is not None


MERGE_STRATEGIES: dict[str, Callable[..., None]] = {
    "none": _merge_none,
    "adjacent": _merge_adjacent,
    "global": _merge_global,
}


# ---------------------------------------------------------------------------- marking


def _resolve_table(table_or_system: SupportTable | System) -> tuple[SupportTable, System | None]:
    if isinstance(table_or_system, System):
        return table_or_system.support, table_or_system
    if isinstance(table_or_system, SupportTable):
        return table_or_system, None
    raise HetschedError(
        f"expected a SupportTable or a System, got {type(table_or_system).__name__}", field="table_or_system"
    )


def _mark_info(table: SupportTable, op_type: str, enabled: set[str] | None, fallback: str | None):
    """Choice and explanation for one op type (cached per call: every op of a type gets the same)."""
    allc = []
    for i, b in enumerate(table.backends):
        p = table.priority(b, op_type)
        if p is not None:
            allc.append((p, i, b))
    allc.sort()
    cands = [(b, p) for p, _, b in allc if enabled is None or b in enabled]
    disabled = [(b, p) for p, _, b in allc if enabled is not None and b not in enabled]
    shown = ", ".join(f"{b}:{p}" for b, p in cands)
    if cands:
        b, p = cands[0]
        if len(cands) == 1:
            reason = f"only {b} supports {op_type} (priority {p})"
        else:
            reason = f"{b} has the best priority ({p}) among the enabled backends supporting {op_type}: {shown}"
        rule = "priority"
        choice = b
    elif fallback is not None:
        choice = fallback
        why = f"(disabled: {', '.join(b for b, _ in disabled)})" if disabled else "(no backend lists it)"
        reason = f"no enabled backend supports {op_type} {why}: sent to the fallback {fallback}"
        rule = "fallback"
    else:
        choice, reason, rule = None, f"no enabled backend supports {op_type}", "unsupported"
    data = {"op_type": op_type, "candidates": tuple(cands), "disabled": tuple(disabled), "choice": choice, "rule": rule}
    return choice, reason, data


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

    Implements the seed-003 patent (``../shared/seeds/003_9a492ad1d4867370.txt``): marking by the
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
        ``"adjacent"``: the patent's rule; ``"global"``: also non-adjacent same-backend regions
        when acyclic; ``None`` (or ``"none"``): one launch per op. A callable ``f(ctx)`` gets a
        :class:`MergeContext` and asks for merges itself (each still cycle-checked and logged).
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
        A bad ``merge`` name, ``min_group_size`` < 1 or > 1 without a fallback, an override that
        pins an op to a backend that does not support it or is disabled.

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
    table, system = _resolve_table(table_or_system)
    known = list(table.backends) + ([d for d in system.device_names if d not in table.backends] if system else [])
    known_set = set(known)
    en_list = None if enabled is None else list(dict.fromkeys(enabled))
    if en_list is not None:
        bad = [b for b in en_list if b not in known_set]
        if bad:
            raise UnknownNameError(f"enabled names unknown backend(s) {name_list(bad)}; known: {name_list(known)}", device=bad[0])
    en_set = None if en_list is None else set(en_list)
    custom = callable(merge)
    key = "none" if merge is None else (getattr(merge, "__name__", "custom") if custom else merge)
    if not custom and (not isinstance(key, str) or key not in MERGE_STRATEGIES):
        raise HetschedError(f"unknown merge strategy {merge!r}; choose one of {sorted(MERGE_STRATEGIES)} or None", field="merge")
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
    for o, b in ov.items():
        if o not in idx.pos:
            raise UnknownNameError(f"overrides names unknown op {o!r} in graph {graph.name!r}", op=o)
        if b not in known_set:
            raise UnknownNameError(f"overrides pins op {o!r} to unknown backend {b!r}", op=o, device=b)
        if en_set is not None and b not in en_set:
            raise HetschedError(f"overrides pins op {o!r} to backend {b!r}, which is disabled", op=o, device=b, field="overrides")
        t = types[idx.pos[o]]
        if not table.supports(b, t) and b != fallback:
            raise UnsupportedOpError(
                f"overrides pins op {o!r} ({t}) to backend {b!r}, which does not support {t}", op=o, device=b, ops=[(o, t)]
            )

    # ---- 1. marking (one step per op)
    steps: list[tuple] = []
    info: dict[str, tuple] = {}
    backend: list[str] = []
    unsupported: list[tuple[str, str]] = []
    for name, t in zip(names, types):
        hit = info.get(t)
        if hit is None:
            hit = info[t] = _mark_info(table, t, en_set, fallback)
        choice, reason, data = hit
        if ov and name in ov:
            choice = ov[name]
            reason = f"pinned to {choice} by an override"
            data = {**data, "choice": choice, "rule": "override"}
        elif data["rule"] != "priority":
            unsupported.append((name, t))
            if choice is None:
                continue
        backend.append(choice)
        steps.append(("mark", name, None, None, True, reason, {"backend": {name: choice}}, data))
    if unsupported and fallback is None:
        by_type: dict[str, list[str]] = {}
        for o, t in unsupported:
            by_type.setdefault(t, []).append(o)
        listing = "; ".join(f"{t}: {', '.join(repr(o) for o in os_)}" for t, os_ in by_type.items())
        raise UnsupportedOpError(
            f"no enabled backend supports {len(unsupported)} op(s) — {listing}. Enable a backend that runs them,"
            f" add them to the support table, or name a fallback backend",
            op=unsupported[0][0],
            ops=unsupported,
        )

    # ---- 2. aggregation
    q = Quotient(idx, backend)
    ctx = _Ctx(q, names, steps, max_tries)
    if custom:
        merge(MergeContext(ctx, idx))
    else:
        MERGE_STRATEGIES[key](ctx, idx.preds, None)
    if key == "adjacent":
        _log_not_adjacent(ctx)

    # ---- 3. min_group_size: small islands back to the fallback, then merge those again
    n_fallback_groups = 0
    if min_group_size > 1:
        moved: list[int] = []
        for x in q.live_nodes():
            b = q.backend[x]
            n_x = len(q.members[x])
            if b == fallback or n_x >= min_group_size:
                continue
            q.backend[x] = fallback
            moved.append(x)
            steps.append(
                ("fallback", names[x], float(q.n_alive), float(q.n_alive), True,
                    f"the {b} group of {names[x]!r} has {n_x} op(s), fewer than min_group_size={min_group_size}:"
                    f" sent to the fallback {fallback} (as Torch-TensorRT's min_block_size)",
                    {"relabel": (names[x], fallback)}, {"backend": b, "n_ops": n_x, "to": fallback},
                )
            )
            n_fallback_groups += 1
        if moved and key != "none":
            for x0 in moved:
                x = q.owner[x0]
                for y0 in list(q.pred[x]) + list(q.succ[x]):
                    # node ids are op indices: owner[] finds where a neighbour went after merges
                    x, y = q.owner[x0], q.owner[y0]
                    if y == x or q.backend[y] != fallback:
                        continue
                    ctx.attempt(x, y, f"{names[x]}+{names[y]}", "after-fallback")
            if key == "global":
                _global_pass(ctx, [fallback])

    return _finish(graph, idx, ctx, n_fallback_groups, table, key, en_list, ov, fallback, min_group_size, max_tries, unsupported)


def _finish(graph, idx, ctx: _Ctx, n_fallback_groups, table, key, en_list, ov, fallback, min_group_size, max_tries, unsupported) -> PartitionResult:
    q, steps = ctx.q, ctx.steps
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
    # every accepted merge and every cycle refusal is logged through the context, which counts them
    n_merged = ctx.n_merged
    n_cycle = ctx.n_cycle
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
    params = {
        "merge": key,
        "enabled": None if en_list is None else tuple(en_list),
        "overrides": dict(ov),
        "fallback": fallback,
        "min_group_size": min_group_size,
        "max_tries": max_tries,
    }
    return PartitionResult(
        metrics=metrics,
        steps=_LazySteps(steps),
        params=params,
        timeline=_EMPTY_TL.copy(),
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


def find_cycle_merge(result: PartitionResult) -> list[str] | None:
    """A cycle of the quotient graph as group names, or ``None`` (a checker for tests and users).

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> find_cycle_merge(partition_by_support(chain(4), toy_system(), merge="global")) is None
    True
    """
    try:
        cyc = nx.find_cycle(result.quotient)
    except nx.NetworkXNoCycle:
        return None
    return [u for u, _ in cyc]
