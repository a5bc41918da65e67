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

import inspect
import time
from typing import Callable

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
    given = {"time_limit_s": time_limit_s, "formulation": formulation, "solver": solver, "beam": beam}
    takes = inspect.signature(fn).parameters  # each method gets the options it has (None: its own default)
    return fn(graph, **{k: v for k, v in given.items() if k in takes and (v is not None or k == "time_limit_s")})


# ------------------------------------------------------------------ the methods by name
# Each is f(graph, **options) whose docstring starts "plain name: what it does" (registry.label and
# describe: what a panel shows); the public functions are registered as they are, the ILP's named
# formulations and the compiler baselines through small adapters.
def _ilp(formulation: str, fixed: bool, doc: str) -> Callable[..., OrderResult]:
    def run(graph: OpGraph, *, time_limit_s: float = 10.0, formulation: str | None = None,
            solver: str | None = None) -> OrderResult:
        if fixed and formulation not in (None, default):
            raise HetschedError(f"method 'ilp-{default}' names the {default} formulation; formulation={formulation!r} "
                                f"contradicts it", field="formulation")
        return order_ilp(graph, time_limit_s=time_limit_s, formulation=formulation or default, solver=solver)

    default = formulation
    run.__doc__ = doc
    return run


def _baseline(name: str) -> Callable[..., OrderResult]:
    def run(graph: OpGraph) -> OrderResult:
        return order_baseline(graph, name)

    run.__doc__ = BASELINES[name].__doc__  # the baseline's own "plain name: what it does"
    return run


#: The ordering methods by name (:func:`hetsched.registry.lookup`): each ``f(graph, **options) ->
#: OrderResult`` (``optimize_order`` passes the options it takes); ``registry.describe`` is its one line.
METHODS: dict[str, Callable[..., OrderResult]] = {
    "patent": order_patent,
    "ilp-patent": _ilp("patent", True, "Integer programme as the patent writes it: yes/no variables A[e,t] (tensor e "
                                       "is created at step t) and P[e,t] (it is kept at step t), the patent's A/P "
                                       "variables (claim 4); the solver starts from our portfolio's order."),
    "ilp-cumulative": _ilp("cumulative", True, "Integer programme, cumulative (ours): variables Z[v,t] = "
                                               "'op v has run by step t'. Fewer equivalent solutions, so the solver "
                                               "proves optimality sooner; it starts from our portfolio's order."),
    "patent-heuristic": order_patent_heuristic, "bfs": order_bfs, "dfs": order_dfs, "auto": order_auto,
    "heuristic": order_portfolio, "lifetime-greedy": order_lifetime_greedy, "exact": order_exact,
    "ilp": _ilp("cumulative", False, "Integer programme: the cumulative formulation unless formulation= says "
                                     "otherwise, started from our portfolio's order."),
    **{k: _baseline(k) for k in BASELINES},
}

#: the methods that run a solver or an exact search under ``time_limit_s`` (seconds, not
#: milliseconds: a panel should not recompute them as cheap overlays)
SOLVER_METHODS: tuple[str, ...] = ("patent", "auto", "exact", "ilp", "ilp-patent", "ilp-cumulative")
