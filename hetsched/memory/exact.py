"""The exact optimum: dynamic programming over executed sets (Serenity, MLSys 2020).

``order_exact`` splits the graph at cut vertices, then runs the layer-by-layer DP of
:mod:`hetsched.memory._search` on each segment under a rising budget ("soft budgeting"): a run
under budget ``B`` that ends with no state proves the optimum is above ``B``; the first budget
under which a state survives gives the exact optimum. The budgets climb from the lower bound to
the peak of the best heuristic order, which is optimal when the last run (budget = its peak - 1)
fails. A time-out returns the best order known with the proven bound.
"""

from __future__ import annotations

import time

from ..graph import OpGraph
from ._search import _Timeout, cut_segments, search
from .model import OrderResult, _compile, _make_result, lower_bound

__all__ = ["order_exact"]


def order_exact(graph: OpGraph, *, time_limit_s: float = 60.0, upper_bound: OrderResult | None = None) -> OrderResult:
    """A minimum-peak order, proven optimal, or the best known one when time runs out.

    Parameters
    ----------
    graph : OpGraph
    time_limit_s : float
        Wall-clock limit; past it the result has ``status="timeout"``, the best order known (the
        heuristic's) and ``bound_bytes`` = the highest budget proven infeasible + 1.
    upper_bound : OrderResult, optional
        A known order (default: ``optimize_order(graph, method="heuristic")``).

    Returns
    -------
    OrderResult
        ``status="optimal"`` and ``bound_bytes == peak_bytes`` when proven.

    Notes
    -----
    Ahn, Lee, Lee, Esmaeilzadeh, "Ordering Chaos: Memory-Aware Scheduling of Irregularly Wired
    Neural Networks for Edge Devices", MLSys 2020 (DP over zero-indegree sets, divide and conquer
    at cut vertices, adaptive soft budgeting). The state space is exponential in the graph's width.

    >>> from hetsched.io.generators import fork_join
    >>> r = order_exact(fork_join(3, 2))
    >>> r.status, r.peak_bytes == r.bound_bytes
    ('optimal', True)
    """
    t0 = time.perf_counter()
    deadline = t0 + time_limit_s
    m = _compile(graph)
    lb = lower_bound(graph)
    if upper_bound is None:
        from .optimize import optimize_order

        upper_bound = optimize_order(graph, method="heuristic")
    ub_arr = m.to_idx(upper_bound.order).tolist()
    ub = m.peak(__import__("numpy").asarray(ub_arr, dtype="int64"))
    params = {"time_limit_s": time_limit_s}
    if m.n == 0 or ub <= lb:
        return _make_result(m, ub_arr, method="exact", status="optimal", t0=t0, bound=float(ub), lb=lb, params=params,
                            why="the heuristic order meets the lower bound: optimal without search")
    segs = cut_segments(m)
    budgets = sorted({lb + int((ub - lb) * f) for f in (0.0, 0.02, 0.05, 0.1, 0.2, 0.4)} | {ub - 1})
    budgets = [b for b in budgets if lb <= b < ub]
    proven = lb  # every order has peak >= proven
    try:
        for B in budgets:
            found = _solve_segments(m, segs, B, deadline)
            if found is None:
                proven = B + 1
                continue
            pk, arr = found
            return _make_result(m, arr, method="exact", status="optimal", t0=t0, bound=float(pk), lb=lb, params=params,
                                why=f"DP over executed sets on {len(segs)} segment(s) split at cut vertices; "
                                    f"every order peaks above {proven - 1} bytes; this one reaches {pk}",
                                extra={"n_segments": float(len(segs)), "budget_bytes": float(B)})
    except _Timeout:
        return _make_result(m, ub_arr, method="exact", status="timeout", t0=t0, bound=float(proven), lb=lb,
                            params=params,
                            why=f"time limit {time_limit_s:g} s reached; best known order returned, optimum proven "
                                f">= {proven} bytes", extra={"n_segments": float(len(segs))})
    return _make_result(m, ub_arr, method="exact", status="optimal", t0=t0, bound=float(ub), lb=lb, params=params,
                        why=f"DP proves every order peaks at {ub} bytes or more: the heuristic order is optimal",
                        extra={"n_segments": float(len(segs))})


def _solve_segments(m, segs: list[list[int]], budget: int, deadline: float):
    """Each segment's DP under ``budget``; ``None`` when one of them cannot stay under it."""
    done = 0
    order: list[int] = []
    peak = 0
    for seg in segs:
        res = search(m, start=done, n_steps=len(seg), budget=budget, deadline=deadline, lookahead=True)
        if res is None:
            return None
        pk, ops = res
        peak = max(peak, pk)
        order.extend(ops)
        for v in seg:
            done |= 1 << v
    return peak, order
