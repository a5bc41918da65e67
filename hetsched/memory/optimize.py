"""``optimize_order``: one entry point that dispatches to every ordering method by name.

The methods themselves are plain functions elsewhere in :mod:`hetsched.memory`:
:func:`~hetsched.memory.order_patent` (the patent's S2 -> S3 -> S4 flow,
``docs/patents.md``), :func:`~hetsched.memory.order_auto` (ours: the
same pieces, the ILP warm-started by the heuristic), :func:`~hetsched.memory.order_portfolio` (our
best bounded-work method), :func:`~hetsched.memory.order_patent_heuristic` (S3 + S4),
:func:`~hetsched.memory.order_exact`, :func:`~hetsched.memory.order_ilp`, the traversals and the
compiler baselines. :data:`METHODS` is the table of them by name (the house's registry idiom,
:mod:`hetsched.registry`); each entry's docstring says what it does in one line.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from ..errors import HetschedError
from ..graph import OpGraph
from ..registry import lookup
from .baselines import BASELINES, order_baseline
from .exact import order_exact
from .heuristics import order_bfs, order_dfs, order_lifetime_greedy
from .ilp import order_ilp
from .model import OrderResult, check_time_limit, compile_graph, make_result
from .patent import ILP_MAX_VARS, order_auto, order_patent
from .portfolio import order_patent_heuristic, order_portfolio

__all__ = ["optimize_order", "METHODS", "SOLVER_METHODS", "ILP_MAX_VARS"]


def optimize_order(
    graph: OpGraph,
    *,
    time_limit_s: float = 10.0,
    method: str | Callable[[OpGraph], OrderResult] = "auto",
    formulation: str | None = None,
    solver: str | None = None,
    beam: int | None = None,
) -> OrderResult:
    """An execution order with a low peak memory, by the method named (a key of :data:`METHODS`).

    Parameters
    ----------
    graph : OpGraph
    time_limit_s : float
        The user's time limit (ILP and exact methods; the heuristics use it as a fine-tune budget).
    method : str or callable
        A key of :data:`METHODS` (``describe(METHODS[name])`` says what it does): ``"patent"`` (the
        patent's flow), ``"auto"`` (ours: the ILP warm-started), ``"heuristic"`` (the portfolio),
        ``"patent-heuristic"``, ``"exact"``, ``"ilp"``, ``"ilp-patent"``, ``"ilp-cumulative"``,
        ``"bfs"``, ``"dfs"``, ``"lifetime-greedy"`` or a compiler baseline. Or a callable
        ``f(graph) -> OrderResult``, whose order is re-simulated.
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
    time_limit_s = check_time_limit(time_limit_s)
    fn = lookup(METHODS, method, what="ordering method", field="method")
    if fn is not METHODS.get(method if isinstance(method, str) else None):
        r = fn(graph)
        if not isinstance(r, OrderResult):
            raise HetschedError(f"method {getattr(method, '__name__', method)!r} returned "
                                f"{type(r).__name__}, not an OrderResult", field="method")
        m = compile_graph(graph)
        arr = m.to_idx(r.order)  # an illegal order raises, naming the op
        if m.peak(arr) == r.peak_bytes:
            return r
        # never trust a peak we did not simulate: re-wrap with the model's own figures
        return make_result(m, arr, method=r.method, status=r.status, t0=t0, ilp=r.ilp, bound=r.bound_bytes,
                            why=f"{r.why} (its reported peak {r.peak_bytes} B was re-simulated)",
                            params=r.params, steps=r.steps)
    return fn(graph, time_limit_s=time_limit_s, formulation=formulation, solver=solver, beam=beam)


# ------------------------------------------------------------------ the methods by name
# Each takes the graph and optimize_order's options (those it has no use for are ignored); the first
# line of its docstring is "plain name: what it does", which is what a panel shows (registry.describe).
def _formulation(method: str, given: str | None, default: str, fixed: bool = False) -> str:
    if fixed and given not in (None, default):
        raise HetschedError(f"method {method!r} names the {default} formulation; formulation={given!r} contradicts it",
                            field="formulation")
    return given or default


def _patent(graph: OpGraph, *, time_limit_s: float, formulation: str | None = None, solver: str | None = None,
            **_: Any) -> OrderResult:
    """The patent's flow: its integer programme gets the time limit; if it does not prove an order optimal
    in time, BFS and DFS run and the lower one is fine-tuned at its peak step (claims 1, 6-9)."""
    return order_patent(graph, time_limit_s=time_limit_s, formulation=_formulation("patent", formulation, "patent"),
                        solver=solver)


def _auto(graph: OpGraph, *, time_limit_s: float, formulation: str | None = None, solver: str | None = None,
          **_: Any) -> OrderResult:
    """Ours, fallback then ILP: the patent's BFS/DFS + fine-tune first, then the cumulative programme started
    from that order within the time limit; the lower order wins."""
    return order_auto(graph, time_limit_s=time_limit_s, formulation=_formulation("auto", formulation, "cumulative"),
                      solver=solver)


def _heuristic(graph: OpGraph, *, time_limit_s: float, beam: int | None = None, **_: Any) -> OrderResult:
    """Portfolio (ours): the patent's traversals, our greedy, every compiler order and a beam search, each
    fine-tuned, then a short exact-search polish."""
    return order_portfolio(graph, time_limit_s=time_limit_s, beam=beam)


def _patent_heuristic(graph: OpGraph, *, time_limit_s: float, **_: Any) -> OrderResult:
    """Patent BFS/DFS + fine-tune: the patent's fallback alone (no ILP), BFS and DFS, the lower one
    fine-tuned at its peak step (claims 6-9)."""
    return order_patent_heuristic(graph, time_limit_s=time_limit_s)


def _exact(graph: OpGraph, *, time_limit_s: float, **_: Any) -> OrderResult:
    """Exact search: the proven optimum, a search over sets of executed ops from both ends (Serenity,
    MLSys 2020), within the time limit."""
    return order_exact(graph, time_limit_s=time_limit_s)


def _ilp(graph: OpGraph, *, time_limit_s: float, formulation: str | None = None, solver: str | None = None,
         **_: Any) -> OrderResult:
    """Integer programme: the cumulative formulation unless formulation= says otherwise, started from our
    portfolio's order."""
    return order_ilp(graph, time_limit_s=time_limit_s, formulation=_formulation("ilp", formulation, "cumulative"),
                     solver=solver)


def _ilp_patent(graph: OpGraph, *, time_limit_s: float, formulation: str | None = None, solver: str | None = None,
                **_: Any) -> OrderResult:
    """The patent's ILP (A/P variables): yes/no variables A[e,t] (tensor e is created at step t) and P[e,t]
    (it is kept at step t), claim 4; the solver starts from our portfolio's order."""
    return order_ilp(graph, time_limit_s=time_limit_s, solver=solver,
                     formulation=_formulation("ilp-patent", formulation, "patent", fixed=True))


def _ilp_cumulative(graph: OpGraph, *, time_limit_s: float, formulation: str | None = None,
                    solver: str | None = None, **_: Any) -> OrderResult:
    """Cumulative ILP (Z variables, ours): an integer programme with Z[v,t] = 'op v has run by step t'.
    Fewer equivalent solutions, so the solver proves optimality sooner; it starts from our portfolio's order."""
    return order_ilp(graph, time_limit_s=time_limit_s, solver=solver,
                     formulation=_formulation("ilp-cumulative", formulation, "cumulative", fixed=True))


def bfs_idx(graph: OpGraph, **_: Any) -> OrderResult:
    """BFS (patent): the patent's tensor-lifetime-aware breadth-first order alone (claim 7)."""
    return order_bfs(graph)


def dfs_idx(graph: OpGraph, **_: Any) -> OrderResult:
    """DFS (patent): the patent's memory-aware depth-first order over chains of ops alone (claim 8)."""
    return order_dfs(graph)


def _lifetime_greedy(graph: OpGraph, **_: Any) -> OrderResult:
    """Lifetime greedy (ours): run next the op that leaves the fewest bytes allocated, lifetimes breaking ties."""
    return order_lifetime_greedy(graph)


def _baseline(name: str) -> Callable[..., OrderResult]:
    def run(graph: OpGraph, **_: Any) -> OrderResult:
        return order_baseline(graph, name)

    run.__name__ = run.__qualname__ = f"_baseline_{name}"
    run.__doc__ = BASELINES[name].__doc__  # the baseline's own "plain name: what it does"
    return run


#: The ordering methods by name (:func:`hetsched.registry.lookup`): each ``f(graph, **options) ->
#: OrderResult``; ``hetsched.registry.describe(METHODS[name])`` is its one line.
METHODS: dict[str, Callable[..., OrderResult]] = {
    "patent": _patent, "ilp-patent": _ilp_patent, "ilp-cumulative": _ilp_cumulative,
    "patent-heuristic": _patent_heuristic, "bfs": bfs_idx, "dfs": dfs_idx, "auto": _auto, "heuristic": _heuristic,
    "lifetime-greedy": _lifetime_greedy, "exact": _exact, "ilp": _ilp,
    **{k: _baseline(k) for k in BASELINES},
}

#: the methods that run a solver or an exact search under ``time_limit_s`` (seconds, not
#: milliseconds: a panel should not recompute them as cheap overlays)
SOLVER_METHODS: tuple[str, ...] = ("patent", "auto", "exact", "ilp", "ilp-patent", "ilp-cumulative")
