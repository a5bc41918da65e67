"""Aggregation (the partition patent, paragraphs 46-47): merge same-backend ops into aggregated ops, never a cycle.

The merge passes share a :class:`Merger` (the quotient graph, the op names, the step log). Every
decision is one logged step: merged, or refused (different backend, would create a cycle, not
adjacent); ``data["outcome"]`` names it (``merged``, ``cycle``, ``different_backend``,
``not_adjacent``) and a cycle refusal's ``data["via"]`` the group the path runs through.
Strategies are the house's registry (:mod:`hetsched.registry`): :data:`MERGE_STRATEGIES` maps a
name to a callable ``f(ctx)`` on a :class:`MergeContext`, and a strategy of one's own is a callable
of the same shape, called the same way; ``min_group_size`` islands go back to the fallback in
:func:`send_small_groups_back`.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from ..errors import HetschedError, UnknownNameError
from ..results import StepLog
from .quotient import Quotient

__all__ = ["MERGE_STRATEGIES", "MergeContext", "send_small_groups_back"]


def _merged_step(subject: str, n_before: int, backend: str, ra: str, rb: str, survivor: str, lost: str,
                 data: dict) -> tuple:
    """The step tuple of an accepted merge (every merge pass logs it through here)."""
    data["outcome"] = "merged"
    return ("merge", subject, float(n_before), float(n_before - 1), True,
            f"merged the {backend} groups of {ra!r} and {rb!r}: one launch instead of two",
            {"merge": (survivor, lost)}, data)


def _cycle_step(subject: str, n_alive: int, ra: str, rb: str, via_backend: str, via: str, data: dict) -> tuple:
    """The step tuple of a merge refused because it would close a cycle through ``via``."""
    data["via"] = via
    data["outcome"] = "cycle"
    n = float(n_alive)
    return ("merge", subject, n, n, False,
            f"would create a cycle: a path leaves the group of {ra!r} through the {via_backend} group of"
            f" {via!r} and comes back into the group of {rb!r}", {}, data)


class Merger:
    """What the merge passes share: the quotient, the op names, the step log."""

    __slots__ = ("q", "names", "steps", "max_tries", "last_via", "n_merged", "n_cycle")

    def __init__(self, q: Quotient, names: list[str], steps: StepLog, max_tries: int) -> None:
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


def _adjacent_pass(ctx: Merger, pred_lists: list[list[int]]) -> None:
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
                        {}, {"edge": (np_, nv), "backends": (bp, bv), "mode": "adjacent", "outcome": "different_backend"},
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


def log_not_adjacent(ctx: Merger) -> None:
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
                {}, {"groups": (names[first[b]], names[x]), "backend": b, "mode": "adjacent", "outcome": "not_adjacent"},
            )
        )


def _global_pass(ctx: Merger, backends: Iterable[str] | None) -> None:
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
    >>> from hetsched.partition import partition_by_support
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

    def __init__(self, ctx: Merger, idx) -> None:
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


def merge_none(ctx: MergeContext) -> None:
    """One launch per op: no aggregation at all (the baseline the patent improves on)."""


def merge_adjacent(ctx: MergeContext) -> None:
    """Adjacent (the patent): merge connected same-backend ops in topological order, never across
    another backend's op nor into a cycle (paragraph 47's minimal-neighbourhood rule).

    Then one ``not_adjacent`` step per same-backend group left apart with no neighbour of its backend.
    """
    _adjacent_pass(ctx._ctx, ctx._idx.preds)
    log_not_adjacent(ctx._ctx)


def merge_global(ctx: MergeContext) -> None:
    """Global: adjacent merging, then non-adjacent same-backend groups join when no cycle results.

    Groups are visited in the order of their first op; each tries the ``max_tries`` most recent open groups
    of its backend (newest first) and joins the first one that creates no cycle. Greedy: finding
    the fewest acyclic groups is a hard combinatorial problem; this is what torch.fx and TVM do too.
    """
    _adjacent_pass(ctx._ctx, ctx._idx.preds)
    _global_pass(ctx._ctx, None)


#: name -> strategy ``f(ctx)`` on a :class:`MergeContext` (:func:`hetsched.registry.lookup`): a
#: callable of the same shape may be passed wherever a name is
MERGE_STRATEGIES: dict[str, Callable[[MergeContext], None]] = {
    "adjacent": merge_adjacent,
    "global": merge_global,
    "none": merge_none,
}


def send_small_groups_back(m: "Merger", strategy: Callable[[MergeContext], None], fallback: str,
                           min_group_size: int) -> int:
    """``min_group_size``: groups of fewer ops go to the fallback (Torch-TensorRT's ``min_block_size``),
    then the fallback's groups merge again under the same ``strategy`` (with their neighbours; a
    global strategy also across). Returns how many groups moved."""
    q, names, steps = m.q, m.names, m.steps
    n_fallback_groups = 0
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
    if moved and strategy is not merge_none:
        for x0 in moved:
            x = q.owner[x0]
            for y0 in list(q.pred[x]) + list(q.succ[x]):
                # node ids are op indices: owner[] finds where a neighbour went after merges
                x, y = q.owner[x0], q.owner[y0]
                if y == x or q.backend[y] != fallback:
                    continue
                m.attempt(x, y, f"{names[x]}+{names[y]}", "after-fallback")
        if strategy is merge_global:
            _global_pass(m, [fallback])
    return n_fallback_groups
