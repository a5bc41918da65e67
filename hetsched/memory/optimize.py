"""``optimize_order``: one entry point that dispatches to every ordering method by name.

The methods themselves are plain functions elsewhere in :mod:`hetsched.memory`:
:func:`~hetsched.memory.order_patent` (the patent's S2 -> S3 -> S4 flow,
``docs/patents.md``), :func:`~hetsched.memory.order_auto` (ours: the
same pieces, the ILP warm-started by the heuristic), :func:`~hetsched.memory.order_portfolio` (our
best bounded-work method), :func:`~hetsched.memory.order_patent_heuristic` (S3 + S4),
:func:`~hetsched.memory.order_exact`, :func:`~hetsched.memory.order_ilp`, the traversals and the
compiler baselines. :data:`STRATEGIES` describes each name in one line.
"""

from __future__ import annotations

import time
from typing import Callable

from ..errors import HetschedError
from ..graph import OpGraph
from .baselines import BASELINES
from .heuristics import _greedy
from .model import OrderResult, _check_time_limit, _compile, _make_result

__all__ = ["optimize_order", "STRATEGIES", "SOLVER_METHODS", "ILP_MAX_VARS"]

from .patent import ILP_MAX_VARS  # noqa: E402  (re-exported: where callers found it before)

#: the ILP formulation each ILP-running method uses when ``formulation`` is not given
_DEFAULT_FORMULATION = {"patent": "patent", "auto": "cumulative", "ilp": "cumulative",
                        "ilp-patent": "patent", "ilp-cumulative": "cumulative"}


def optimize_order(
    graph: OpGraph,
    *,
    time_limit_s: float = 10.0,
    method: str | Callable[[OpGraph], OrderResult] = "auto",
    formulation: str | None = None,
    solver: str | None = None,
    beam: int | None = None,
) -> OrderResult:
    """An execution order with a low peak memory, by the method named (see :data:`STRATEGIES`).

    Parameters
    ----------
    graph : OpGraph
    time_limit_s : float
        The user's time limit (ILP and exact methods; the heuristics use it as a fine-tune budget).
    method : str or callable
        ``"patent"`` — the patent's flow in its order (:func:`~hetsched.memory.order_patent`): the
        ILP within the limit, else BFS and DFS, the lower one fine-tuned. ``"auto"`` — ours
        (:func:`~hetsched.memory.order_auto`): BFS/DFS + fine-tune first, then the ILP
        warm-started with that order. ``"heuristic"`` — the portfolio
        (:func:`~hetsched.memory.order_portfolio`). ``"patent-heuristic"`` — S3+S4 only.
        ``"exact"`` — :func:`~hetsched.memory.order_exact`. ``"ilp"``, ``"ilp-patent"``,
        ``"ilp-cumulative"`` — :func:`~hetsched.memory.order_ilp` (the last two name the
        formulation). ``"bfs"``, ``"dfs"``, ``"lifetime-greedy"`` or a name of ``BASELINES``.
        Or a callable ``f(graph) -> OrderResult``.
    formulation : {"patent", "cumulative"}, optional
        The ILP of ``patent``, ``auto`` and ``ilp``; default: the patent's for ``"patent"``, the
        cumulative one for ``"auto"`` and ``"ilp"``.
    beam : int, optional
        Beam width of the portfolio's executed-set search (see :func:`~hetsched.memory.order_portfolio`).

    >>> from hetsched.io.generators import randwire_ws
    >>> g = randwire_ws(10, seed=3, channels=4, hw=4)
    >>> r = optimize_order(g, method="heuristic")
    >>> r.peak_bytes <= optimize_order(g, method="kahn").peak_bytes
    True
    """
    t0 = time.perf_counter()
    time_limit_s = _check_time_limit(time_limit_s)
    if callable(method):
        r = method(graph)
        if not isinstance(r, OrderResult):
            raise HetschedError(f"method {getattr(method, '__name__', method)!r} returned "
                                f"{type(r).__name__}, not an OrderResult", field="method")
        m = _compile(graph)
        arr = m.to_idx(r.order)  # an illegal order raises, naming the op
        if m.peak(arr) == r.peak_bytes:
            return r
        # never trust a peak we did not simulate: re-wrap with the model's own figures
        return _make_result(m, arr, method=r.method, status=r.status, t0=t0, solver=r.solver, bound=r.bound_bytes,
                            why=f"{r.why} (its reported peak {r.peak_bytes} B was re-simulated)",
                            params=r.params, steps=r.steps)
    m = _compile(graph)
    if method not in STRATEGIES:
        raise HetschedError(f"unknown ordering method {method!r}; choose one of {sorted(STRATEGIES)}", field="method")
    form = formulation or _DEFAULT_FORMULATION.get(method, "cumulative")
    named = _DEFAULT_FORMULATION[method] if method in ("ilp-patent", "ilp-cumulative") else form
    if named != form:
        raise HetschedError(f"method {method!r} names the {named} formulation; formulation={formulation!r} contradicts it",
                            field="formulation")
    if method == "patent":
        from .patent import order_patent

        return order_patent(graph, time_limit_s=time_limit_s, formulation=form, solver=solver)
    if method == "auto":
        from .patent import order_auto

        return order_auto(graph, time_limit_s=time_limit_s, formulation=form, solver=solver)
    if method == "heuristic":
        from .portfolio import _portfolio

        return _portfolio(m, t0, time_limit_s=time_limit_s, beam=beam)
    if method == "patent-heuristic":
        from .portfolio import order_patent_heuristic

        return order_patent_heuristic(graph, time_limit_s=time_limit_s)
    if method == "exact":
        from .exact import order_exact

        return order_exact(graph, time_limit_s=time_limit_s)
    if method in ("ilp", "ilp-patent", "ilp-cumulative"):
        from .ilp import order_ilp

        return order_ilp(graph, time_limit_s=time_limit_s, formulation=form, solver=solver)
    if method == "bfs":
        from .heuristics import order_bfs

        return order_bfs(graph)
    if method == "dfs":
        from .heuristics import order_dfs

        return order_dfs(graph)
    if method == "lifetime-greedy":
        return _make_result(m, _greedy(m), method=method, status="heuristic", t0=t0,
                            why="ours: greedy on bytes kept minus freed, lifetimes breaking ties")
    return _make_result(m, BASELINES[method](m), method=method, status="heuristic", t0=t0, why=f"baseline {method}")


STRATEGIES: dict[str, str] = {
    "patent": "the patent's flow: the ILP (A/P formulation) within the time limit, else BFS and DFS, "
              "the lower one fine-tuned",
    "auto": "ours: BFS/DFS + fine-tune, then the ILP warm-started with that order within the time limit",
    "heuristic": "portfolio (patent BFS/DFS, our lifetime greedy, compiler baselines, beam search), each "
                 "fine-tuned, then a move-capped exact-search polish",
    "patent-heuristic": "patent S3+S4: BFS and DFS, the lower one fine-tuned",
    "exact": "proven optimum: two-ended feasibility search over executed sets (Serenity's state space), split at cut vertices",
    "ilp": "integer linear programme (cumulative formulation unless formulation= says otherwise)",
    "ilp-patent": "the patent's integer linear programme (A[e,t] created / P[e,t] kept, claim 4)",
    "ilp-cumulative": "cumulative integer linear programme (Z[v,t] = op v has run by step t)",
    "bfs": "patent S31 only: lifetime-aware breadth-first traversal",
    "dfs": "patent S32 only: memory-aware depth-first traversal over windows",
    "lifetime-greedy": "ours: greedy on bytes kept minus freed, lifetimes breaking ties",
    **{k: f"baseline {k}" for k in BASELINES},
}

#: the methods that run a solver or an exact search under ``time_limit_s`` (seconds, not
#: milliseconds: a panel should not recompute them as cheap overlays)
SOLVER_METHODS: tuple[str, ...] = ("patent", "auto", "exact", "ilp", "ilp-patent", "ilp-cumulative")
