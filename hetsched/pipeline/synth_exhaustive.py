"""Every valid order of every rank, tried: the optimum of tiny synthesis instances by enumeration.

Nothing is assumed (not even that a class runs in micro-batch order, which :mod:`.problem` argues
loses nothing and the tests check here): each rank's orders are all the orderings of its actions
that keep a forward before its backward, an input gradient before its weight gradient, and a
dependency between two stages of the same rank in order; every combination of the ranks' orders
within the memory caps is timed by the simulator's walk (a deadlock is skipped).

>>> from hetsched.pipeline.problem import Problem
>>> orders, n = exhaustive_orders(Problem.build({"F": 1.0, "B": 2.0}, p=2, v=1, m=2, split_backward=False))
>>> n, [len(o) for o in orders]
(26, [4, 4])
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import ScheduleError
from .ir import F, W
from .problem import TOL, Problem

__all__ = ["exhaustive_orders", "MAX_COMBINATIONS"]

#: The most order combinations :func:`exhaustive_orders` tries (about 1 ms each).
MAX_COMBINATIONS = 200_000


def _rank_orders(pb: Problem, r: int, limit: int) -> list[list[int]]:
    """Every ordering of rank ``r``'s actions that respects its own precedences (topological sorts)."""
    ids = np.flatnonzero(pb.rank == r).tolist()
    mine = set(ids)
    preds: dict[int, set[int]] = {a: set() for a in ids}
    for a in ids:
        d = int(pb.dep[a])
        if d in mine:
            preds[a].add(d)
        if pb.kind[a] != F:  # a backward after its own forward, a W after its I
            k = pb.kind[a]
            same = [b for b in ids if pb.stage[b] == pb.stage[a] and pb.mb[b] == pb.mb[a] and pb.kind[b] != k
                    and (pb.kind[b] == F or (k == W and pb.kind[b] != W))]
            preds[a].update(same)
    out: list[list[int]] = []
    order: list[int] = []
    done: set[int] = set()

    def rec() -> None:
        if len(out) > limit:
            return
        if len(order) == len(ids):
            out.append(list(order))
            return
        for a in ids:
            if a not in done and preds[a] <= done:
                done.add(a)
                order.append(a)
                rec()
                order.pop()
                done.discard(a)

    rec()
    return out


def exhaustive_orders(pb: Problem, *, max_combinations: int = MAX_COMBINATIONS) -> tuple[list[list[int]] | None, int]:
    """The fastest combination of per-rank orders within the caps, and how many were timed.

    Ties go to the combination met first. Returns ``(None, n)`` when none fits the caps.
    Raises :class:`~hetsched.errors.ScheduleError` when there are more than ``max_combinations``.
    """
    per = []
    total = 1
    for r in range(pb.p):
        orders = _rank_orders(pb, r, max_combinations)
        cap = pb.cap[r] * (1 + TOL) + 1e-9
        orders = [o for o in orders if max(0.0, float(np.cumsum(pb.mem[o]).max())) <= cap]
        per.append(orders)
        total *= len(orders)
        if total > max_combinations:
            raise ScheduleError(f"exhaustive synthesis of p={pb.p}, v={pb.v}, m={pb.m} would try more than "
                                f"{max_combinations:,} order combinations; use method='milp' or 'heuristic'", field="method")
    best, best_mk, n = None, math.inf, 0
    for combo in itertools.product(*per):
        orders = [list(o) for o in combo]
        try:
            mk, _, _ = pb.evaluate(orders)
        except ScheduleError:
            continue
        n += 1
        if mk < best_mk - 1e-12 * max(1.0, mk):
            best, best_mk = orders, mk
    return best, n
