"""``optimize_order``: the patent's flow, our best polynomial method, and the strategy table.

The patent's flow (seed 002, S1-S4; ``../shared/seeds/002_1bc531f15903fea6.txt``): solve the ILP
within the user's time limit; if it does not finish, run the lifetime-aware BFS and the
memory-aware DFS, keep the order with the lower peak, and fine-tune it at the peak step.

``method="heuristic"`` is our best bounded-work method: a portfolio (the patent's BFS and DFS,
every compiler baseline, and a beam search over executed sets — the Serenity DP with at most
``beam`` states per step), each fine-tuned at the peak step, keeping the lowest; then, up to
``POLISH_MAX_OPS`` ops, a polish: the exact engine's depth-first feasibility searches
(:mod:`hetsched.memory._feasible`) asked for an order below the best peak, each capped at a fixed
number of moves (deterministic, whatever the machine's load), repeated while they find one.
Because the compiler baselines are in the portfolio, it is never above the best of them.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from ..errors import HetschedError
from ..graph import OpGraph
from ..results import Step
from ._search import search
from .baselines import BASELINES
from .heuristics import _bfs, _dfs, _fine_tune, _steps_from
from .model import OrderResult, _check_time_limit, _compile, _make_result, _Mem, lower_bound

__all__ = ["optimize_order", "STRATEGIES", "ILP_MAX_VARS"]

ILP_MAX_VARS = 400_000  # above this many ILP variables the patent flow skips the solver (it could not finish)
BEAM_MAX_OPS = 1000  # the beam search keeps Python-int bitsets of n bits: skipped above this size
BEAM_WORK = 40_000  # beam width ~ BEAM_WORK / n states per step
POLISH_MAX_OPS = 300  # the polish's feasibility searches keep (tensors x ops) tables: skipped above this size
POLISH_MOVES = 32_768  # moves per feasibility search at <= 128 ops (scaled down above: a move costs O(n))
POLISH_QUESTIONS = 8  # at most this many "is there an order below the best?" questions


# LPMF scans every ready op at every step (O(n * width)); above this size it leaves the portfolio
QUADRATIC = ("inductor_lpmf",)
QUADRATIC_MAX_OPS = 5_000


def _beam_width(n: int) -> int:
    return int(max(16, min(4000, BEAM_WORK // max(1, n))))


def _polish_moves(m: _Mem) -> int:
    if not 0 < m.n <= POLISH_MAX_OPS:
        return 0
    return max(4096, POLISH_MOVES * 128 // max(m.n, 128))


def _ask_below(m: _Mem, budget: int, moves: int, deadline: float | None) -> tuple[list[int] | None, str]:
    """An order within ``budget`` from the capped backward, then forward, feasibility search.

    Returns ``(order, "backward"|"forward")``, ``(None, "none")`` when a search proved there is
    none, or ``(None, "capped")``.
    """
    from ._feasible import BudgetTimeout, feasible, feasible_back
    for how, fn in (("backward", feasible_back), ("forward", feasible)):
        try:
            found = fn(m, budget, max_moves=moves, deadline=deadline)
        except BudgetTimeout:
            continue
        if found is None:
            return None, "none"
        arr = np.asarray(found, dtype=np.int64)
        m.check_idx(arr)  # never trust a search's order: an illegal one raises, naming the op
        if m.peak(arr) <= budget:
            return list(found), how
    return None, "capped"


def _candidate_steps(m: _Mem, cands: list[tuple[str, list[int], int]], start: list[int]) -> tuple[list[Step], int]:
    """Steps that walk the portfolio: a candidate is accepted when it beats the best so far."""
    steps: list[Step] = []
    best = m.peak(np.asarray(start)) if m.n else 0
    for name, arr, pk in cands:
        ok = pk < best
        steps.append(Step(len(steps), "candidate", name, before=float(best), after=float(pk), accepted=ok,
                          reason=(f"{name} reaches {pk} bytes, below {best}" if ok else f"{name} reaches {pk} bytes, not below {best}"),
                          delta={"order": tuple(m.names[v] for v in arr)} if ok else {}))
        if ok:
            best = pk
    return steps, best


def _renumber(steps: list[Step], offset: int) -> list[Step]:
    return [Step(offset + i, s.action, s.subject, s.before, s.after, s.accepted, s.reason, s.delta, s.data)
            for i, s in enumerate(steps)]


def _heuristic(m: _Mem, t0: float, *, time_limit_s: float | None, beam: int | None) -> OrderResult:
    n = m.n
    start = m.topo()
    cands: list[tuple[str, list[int], int]] = []
    gens: list[tuple[str, Callable[[_Mem], list[int]]]] = [("bfs", _bfs), ("dfs", _dfs)] + [
        (k, f) for k, f in BASELINES.items() if not (k in QUADRATIC and n > QUADRATIC_MAX_OPS)]
    for name, fn in gens:
        arr = fn(m)
        cands.append((name, arr, m.peak(np.asarray(arr, dtype=np.int64))))
    width = beam if beam is not None else (_beam_width(n) if n <= BEAM_MAX_OPS else 0)
    if width and n:
        res = search(m, beam=width)
        assert res is not None
        cands.append((f"beam{width}", res[1], m.peak(np.asarray(res[1], dtype=np.int64))))
    # fine-tune every candidate on small graphs; only the best few on large ones (time)
    ranked = sorted(range(len(cands)), key=lambda i: (cands[i][2], i))
    n_tune = len(cands) if n <= 500 else 3
    # the fine-tune gets what is left of the time limit, and never less than a fifth of it
    budget = None if time_limit_s is None else max(time_limit_s - (time.perf_counter() - t0), 0.2 * time_limit_s)
    t_tune = time.perf_counter()
    tuned: list[tuple[str, list[int], int, list[dict[str, Any]], list[int]]] = []
    seen: set[tuple[int, ...]] = set()
    for i in ranked[:n_tune]:
        name, arr, pk = cands[i]
        key = tuple(arr)
        if key in seen:
            continue
        seen.add(key)
        left = None if budget is None else max(0.0, budget - (time.perf_counter() - t_tune)) / max(1, n_tune)
        new, tried = _fine_tune(m, arr, time_limit_s=left, record=True)
        tuned.append((name, new, m.peak(np.asarray(new, dtype=np.int64)), tried, arr))
    best = min(tuned, key=lambda x: (x[2], x[0]))
    name, arr, pk, tried, before = best
    cand_steps, _ = _candidate_steps(m, [(c[0], c[1], c[2]) for c in cands], start)
    # the winner's pre-fine-tune order becomes the state before its fine-tune moves
    bridge = Step(len(cand_steps), "pick", name, before=None, after=float(m.peak(np.asarray(before))), accepted=True,
                  reason=f"fine-tuning every candidate, {name} ends lowest", delta={"order": tuple(m.names[v] for v in before)})
    steps = cand_steps + [bridge] + _renumber(_steps_from(tried), len(cand_steps) + 1)
    method = f"heuristic:{name}+fine_tune"
    # polish (ours): ask "is there an order within best - 1 bytes?" with the exact engine's
    # depth-first feasibility searches (backward first, where graph outputs pile up, then
    # forward), each capped at a fixed number of moves so the answer does not depend on the
    # machine's load; a "yes" brings a lower order (fine-tuned, then asked again), a "no" proves
    # the order optimal, a capped search ends the polish.
    n_polish, proven = 0, False
    polish = _polish_moves(m) if beam is None or beam > 0 else 0
    if polish:
        for _q in range(POLISH_QUESTIONS):
            deadline = None if time_limit_s is None else t0 + time_limit_s
            found, how = _ask_below(m, pk - 1, polish, deadline)
            if how == "none":
                proven = True
                break
            if found is None:
                break
            new, _tried = _fine_tune(m, found, time_limit_s=None, record=False)
            pk2 = m.peak(np.asarray(new, dtype=np.int64))
            steps.append(Step(len(steps), "polish", how, before=float(pk), after=float(pk2), accepted=True,
                              reason=f"a {how} depth-first search found an order within {pk - 1} bytes: "
                                     f"{pk2} bytes after fine-tuning", delta={"order": tuple(m.names[v] for v in new)}))
            arr, pk = new, pk2
            n_polish += 1
            method = f"heuristic:{name}+fine_tune+polish"
    return _make_result(
        m, arr, method=method, status="heuristic", t0=t0, steps=steps, initial=start,
        why=f"portfolio of {len(cands)} orders (patent BFS/DFS, compiler baselines"
            f"{', beam search' if width else ''}), each fine-tuned; {name} won"
            + (f"; {n_polish} budgeted depth-first search(es) lowered it further" if n_polish else "")
            + ("; a budgeted search proved no order is lower" if proven else ""),
        params={"time_limit_s": time_limit_s, "beam": width, "polish_moves": polish},
        extra={"n_candidates": float(len(cands)), "n_moves_tried": float(len(tried)), "n_polish": float(n_polish),
               "proven_optimal": float(proven)},
    )


def _patent_heuristic(m: _Mem, t0: float, why_prefix: str = "", time_limit_s: float | None = None) -> OrderResult:
    """S3 + S4: BFS and DFS, the lower one fine-tuned."""
    start = m.topo()
    b, d = _bfs(m), _dfs(m)
    pb, pd_ = m.peak(np.asarray(b)), m.peak(np.asarray(d))
    name, arr = ("bfs", b) if pb <= pd_ else ("dfs", d)
    cand_steps, _ = _candidate_steps(m, [("bfs", b, pb), ("dfs", d, pd_)], start)
    bridge = Step(len(cand_steps), "pick", name, before=None, after=float(min(pb, pd_)), accepted=True,
                  reason=f"S4: {name} has the lower peak ({min(pb, pd_)} vs {max(pb, pd_)} bytes)",
                  delta={"order": tuple(m.names[v] for v in arr)})
    new, tried = _fine_tune(m, arr, time_limit_s=time_limit_s)
    steps = cand_steps + [bridge] + _renumber(_steps_from(tried), len(cand_steps) + 1)
    return _make_result(m, new, method=f"patent:{name}+fine_tune", status="heuristic", t0=t0, steps=steps, initial=start,
                        why=why_prefix + f"S3: BFS peak {pb} B, DFS peak {pd_} B; S4: fine-tuned {name} "
                                         f"({sum(1 for t in tried if t['accepted'])} of {len(tried)} moves kept)",
                        extra={"bfs_peak_bytes": float(pb), "dfs_peak_bytes": float(pd_)})


def _ilp_vars(m: _Mem, formulation: str) -> int:
    return m.n * (m.n + (2 * m.S if formulation == "patent" else m.S))


def _auto(graph: OpGraph, m: _Mem, t0: float, *, time_limit_s: float, formulation: str, solver: str | None) -> OrderResult:
    from .ilp import order_ilp

    nv = _ilp_vars(m, formulation)
    if nv > ILP_MAX_VARS:
        return _patent_heuristic(m, t0, why_prefix=f"S2 skipped: the {formulation} ILP would have {nv} variables "
                                                   f"(> {ILP_MAX_VARS}), it cannot finish in {time_limit_s:g} s; ",
                                 time_limit_s=time_limit_s)
    heur = _patent_heuristic(m, t0)
    r = order_ilp(graph, time_limit_s=max(0.05, time_limit_s - (time.perf_counter() - t0)), formulation=formulation,
                  solver=solver, warm_start=heur)
    if r.status == "optimal":
        return _make_result(m, m.to_idx(r.order), method=r.method, status="optimal", t0=t0, solver=r.solver,
                            bound=r.bound_bytes, why=f"S2: the ILP finished within {time_limit_s:g} s and proved optimality",
                            params={"time_limit_s": time_limit_s, "formulation": formulation},
                            extra={k: v for k, v in r.metrics.items() if k in ("n_vars", "n_constraints", "solve_s")})
    better = r.status == "feasible" and r.peak_bytes < heur.peak_bytes
    pick = r if better else heur
    return _make_result(
        m, m.to_idx(pick.order), method=pick.method, status=pick.status, t0=t0, solver=r.solver, bound=r.bound_bytes,
        steps=heur.steps if not better else (),
        initial=m.to_idx(heur.initial_state["order"] if not better else pick.order).tolist(),
        why=f"S2: the ILP did not finish within {time_limit_s:g} s ({r.why}); S3/S4: {heur.why}"
            + ("; the solver's incumbent was lower and is kept" if better else ""),
        params={"time_limit_s": time_limit_s, "formulation": formulation},
    )


def optimize_order(
    graph: OpGraph,
    *,
    time_limit_s: float = 10.0,
    method: str | Callable[[OpGraph], OrderResult] = "auto",
    formulation: str = "cumulative",
    solver: str | None = None,
    beam: int | None = None,
) -> OrderResult:
    """An execution order with a low peak memory.

    Parameters
    ----------
    graph : OpGraph
    time_limit_s : float
        The user's time limit (ILP and exact methods; the heuristic uses it as a fine-tune budget).
    method : str or callable
        ``"auto"`` — the patent's flow: the ILP (``formulation``, ``solver``) within the limit;
        if it does not prove optimality, BFS and DFS, the lower one fine-tuned (the result's
        ``why`` says which path ran and why). ``"heuristic"`` — portfolio + beam search + fine-tune
        + move-capped feasibility-search polish (bounded work). ``"patent-heuristic"`` — S3+S4
        only. ``"exact"`` — :func:`order_exact`. ``"ilp"`` — :func:`order_ilp`. ``"bfs"``, ``"dfs"`` or a baseline name of ``BASELINES``.
        Or a callable ``f(graph) -> OrderResult``.
    beam : int, optional
        Beam width of the heuristic's executed-set search (default ~40000 / n, up to 1000 ops;
        0 disables it and the polish, which otherwise runs up to ``POLISH_MAX_OPS`` ops).

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
    if method == "auto":
        return _auto(graph, m, t0, time_limit_s=time_limit_s, formulation=formulation, solver=solver)
    if method == "heuristic":
        return _heuristic(m, t0, time_limit_s=time_limit_s, beam=beam)
    if method == "patent-heuristic":
        return _patent_heuristic(m, t0, time_limit_s=time_limit_s)
    if method == "exact":
        from .exact import order_exact

        return order_exact(graph, time_limit_s=time_limit_s)
    if method == "ilp":
        from .ilp import order_ilp

        return order_ilp(graph, time_limit_s=time_limit_s, formulation=formulation, solver=solver)
    if method in ("bfs", "dfs"):
        fn = _bfs if method == "bfs" else _dfs
        return _make_result(m, fn(m), method=method, status="heuristic", t0=t0, why=f"patent {method.upper()} only")
    return _make_result(m, BASELINES[method](m), method=method, status="heuristic", t0=t0, why=f"baseline {method}")


STRATEGIES: dict[str, str] = {
    "auto": "patent flow: ILP within the time limit, else BFS/DFS + fine-tune",
    "heuristic": "portfolio (patent BFS/DFS, compiler baselines, beam search), each fine-tuned, "
                 "then a move-capped exact-search polish",
    "patent-heuristic": "patent S3+S4: BFS and DFS, the lower one fine-tuned",
    "exact": "proven optimum: two-ended feasibility search over executed sets (Serenity's state space), split at cut vertices",
    "ilp": "integer linear programme (patent or cumulative formulation)",
    "bfs": "patent S31 only",
    "dfs": "patent S32 only",
    **{k: f"baseline {k}" for k in BASELINES},
}
