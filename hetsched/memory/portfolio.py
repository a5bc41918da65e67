"""The portfolio heuristic and the patent's S3 + S4, as plain functions (the memory-ordering patent).

:func:`order_portfolio` is our best bounded-work method: a portfolio (the patent's BFS and DFS,
our lifetime-aware greedy, every compiler baseline, and a beam search over executed sets — the
Serenity DP with at most ``beam`` states per step), each fine-tuned at the peak step, keeping the
lowest; then, up to ``POLISH_MAX_OPS`` ops, a polish: the exact engine's depth-first feasibility
searches (:mod:`hetsched.memory.feasible`) asked for an order below the best peak, each capped at a
fixed number of moves (deterministic, whatever the machine's load), repeated while they find one.
Because the compiler baselines are in the portfolio, it is never above the best of them.

:func:`order_patent_heuristic` is the patent's S3 + S4 (``docs/patents.md``,
claims 6-9): the lifetime-aware BFS and the memory-aware DFS, the lower one fine-tuned at its peak
step. The flows that start with the ILP (S2) live in :mod:`hetsched.memory.patent`, above
:mod:`hetsched.memory.ilp`, which warm-starts from :func:`order_portfolio`: this module imports no
solver, so the memory family has no import cycle.

>>> from hetsched.io.generators import randwire_ws
>>> from hetsched.memory import lower_bound
>>> g = randwire_ws(12, seed=0, channels=4, hw=4)
>>> lower_bound(g) <= order_portfolio(g).peak_bytes <= order_patent_heuristic(g).peak_bytes
True
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import HetschedError
from ..graph import OpGraph
from ..results import SolverRun, Step, StepLog
from .search import search
from .baselines import BASELINES
from .heuristics import bfs_idx, dfs_idx, fine_tune_idx, greedy_idx, log_tried
from .model import Mem, OrderResult, check_time_limit, compile_graph, lower_bound, make_result

__all__ = ["order_portfolio", "order_patent_heuristic", "BEAM_MAX_OPS", "POLISH_MAX_OPS"]

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


def _polish_moves(m: Mem) -> int:
    if not 0 < m.n <= POLISH_MAX_OPS:
        return 0
    return max(4096, POLISH_MOVES * 128 // max(m.n, 128))


def _ask_below(m: Mem, budget: int, moves: int, deadline: float | None) -> tuple[list[int] | None, str]:
    """An order within ``budget`` from the capped backward, then forward, feasibility search.

    Returns ``(order, "backward"|"forward")``, ``(None, "none")`` when a search proved there is
    none, or ``(None, "capped")``.
    """
    from .feasible import BudgetTimeout, feasible, feasible_back
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


def _log_candidates(log: StepLog, m: Mem, cands: list[tuple[str, list[int], int]], start: list[int]) -> int:
    """Steps that walk the portfolio (a candidate is accepted when it beats the best so far); the best peak."""
    best = m.peak(np.asarray(start)) if m.n else 0
    for name, arr, pk in cands:
        ok = pk < best
        log.add("candidate", name, before=float(best), after=float(pk), accepted=ok,
                reason=(f"{name} reaches {pk} bytes, below {best}" if ok else f"{name} reaches {pk} bytes, not below {best}"),
                delta={"order": tuple(m.names[v] for v in arr)} if ok else {},
                data={"phase": "portfolio", "peak_bytes": pk})
        if ok:
            best = pk
    return best


def stop_at_bound(m: Mem, t0: float, steps: StepLog, name: str, arr: list[int], lb: int, start: list[int],
                   skipped: str, **kw: Any) -> OrderResult:
    """An order at the lower bound is optimal: log why the rest is skipped, and return it (proven)."""
    steps.add("stop", name, before=None, after=float(lb), accepted=True,
              reason=f"{name} reaches the lower bound ({lb} B): no order can be lower, so {skipped} are skipped",
              delta={"order": tuple(m.names[v] for v in arr)}, data={"phase": "stop", "lower_bound_bytes": lb})
    return make_result(m, arr, method=name, status="optimal", t0=t0, steps=steps, initial=start, lb=lb, **kw)


def run_portfolio(m: Mem, t0: float, *, time_limit_s: float | None, beam: int | None) -> OrderResult:
    n = m.n
    start = m.topo()
    lb = lower_bound(m.graph)
    width = beam if beam is not None else (_beam_width(n) if n <= BEAM_MAX_OPS else 0)
    params = {"time_limit_s": time_limit_s, "beam": width}
    cands: list[tuple[str, list[int], int]] = []
    gens: list[tuple[str, Callable[[Mem], list[int]]]] = [
        ("bfs", lambda mm: bfs_idx(mm)[0]), ("lifetime-greedy", greedy_idx), ("dfs", lambda mm: dfs_idx(mm)[0])] + [
        (k, f) for k, f in BASELINES.items() if not (k in QUADRATIC and n > QUADRATIC_MAX_OPS)]
    if width and n:
        gens.append((f"beam{width}", lambda mm: search(mm, beam=width)[1]))
    for name, fn in gens:
        arr = fn(m)
        cands.append((name, arr, m.peak(np.asarray(arr, dtype=np.int64))))
        if cands[-1][2] <= lb:  # issue 28: nothing can beat it; the rest would only spend time
            steps = StepLog()
            _log_candidates(steps, m, cands, start)
            return stop_at_bound(m, t0, steps, f"heuristic:{name}", arr, lb, start, params=params,
                                  skipped="the other candidates, the fine-tunes and the polish",
                                  why=f"portfolio: {name} reaches the lower bound, the order is optimal",
                                  extra={"n_candidates": float(len(cands))})
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
        new, tried = fine_tune_idx(m, arr, time_limit_s=left, record=True)
        tuned.append((name, new, m.peak(np.asarray(new, dtype=np.int64)), tried, arr))
    best = min(tuned, key=lambda x: (x[2], x[0]))
    name, arr, pk, tried, before = best
    steps = StepLog()
    _log_candidates(steps, m, [(c[0], c[1], c[2]) for c in cands], start)
    # the winner's pre-fine-tune order becomes the state before its fine-tune moves
    steps.add("pick", name, before=None, after=float(m.peak(np.asarray(before))), accepted=True,
              reason=f"fine-tuning every candidate, {name} ends lowest", delta={"order": tuple(m.names[v] for v in before)},
              data={"phase": "S4-pick"})
    log_tried(steps, tried)
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
            new, _tried = fine_tune_idx(m, found, time_limit_s=None, record=False)
            pk2 = m.peak(np.asarray(new, dtype=np.int64))
            steps.add("polish", how, before=float(pk), after=float(pk2), accepted=True,
                      reason=f"a {how} depth-first search found an order within {pk - 1} bytes: "
                             f"{pk2} bytes after fine-tuning", delta={"order": tuple(m.names[v] for v in new)},
                      data={"phase": "polish", "budget_bytes": pk - 1})
            arr, pk = new, pk2
            n_polish += 1
            method = f"heuristic:{name}+fine_tune+polish"
    return make_result(
        m, arr, method=method, status="optimal" if proven else "heuristic", t0=t0, steps=steps, initial=start, lb=lb,
        why=f"portfolio of {len(cands)} orders (patent BFS/DFS, our lifetime greedy, compiler baselines"
            f"{', beam search' if width else ''}), each fine-tuned; {name} won"
            + (f"; {n_polish} budgeted depth-first search(es) lowered it further" if n_polish else "")
            + ("; a budgeted search proved no order is lower" if proven else ""),
        params={**params, "polish_moves": polish},
        extra={"n_candidates": float(len(cands)), "n_moves_tried": float(len(tried)), "n_polish": float(n_polish)},
    )


def patent_s3_s4(m: Mem, t0: float, *, why_prefix: str = "", time_limit_s: float | None = None,
                  lead_steps: Sequence[Step] = (), method_prefix: str = "patent",
                  params: dict[str, Any] | None = None, bound: float | None = None,
                  ilp: SolverRun | None = None) -> OrderResult:
    """S3 + S4: BFS and DFS (their picks logged), the lower one fine-tuned (its moves logged)."""
    start = m.topo()
    steps = StepLog(lead_steps)
    b, _ = bfs_idx(m, steps)
    d, _ = dfs_idx(m, steps)
    pb, pd_ = m.peak(np.asarray(b, dtype=np.int64)), m.peak(np.asarray(d, dtype=np.int64))
    name, arr = ("bfs", b) if pb <= pd_ else ("dfs", d)
    steps.add("pick", name, before=None, after=float(min(pb, pd_)), accepted=True,
              reason=f"S4: {name} has the lower peak ({min(pb, pd_)} vs {max(pb, pd_)} bytes): it is fine-tuned",
              delta={"order": tuple(m.names[v] for v in arr)},
              data={"phase": "S4-pick", "bfs_peak_bytes": pb, "dfs_peak_bytes": pd_})
    new, tried = fine_tune_idx(m, arr, time_limit_s=time_limit_s)
    log_tried(steps, tried)
    kept = sum(1 for t in tried if t["accepted"])
    return make_result(m, new, method=f"{method_prefix}:{name}+fine_tune", status="heuristic", t0=t0, steps=steps,
                        initial=start, ilp=ilp, bound=bound, params=params,
                        why=why_prefix + f"S3: BFS peak {pb} B, DFS peak {pd_} B; S4: fine-tuned {name} "
                                         f"({kept} of {len(tried)} moves kept)",
                        extra={"bfs_peak_bytes": float(pb), "dfs_peak_bytes": float(pd_),
                               "n_moves_tried": float(len(tried)), "n_moves_kept": float(kept)})


def order_portfolio(graph: OpGraph, *, time_limit_s: float | None = 10.0, beam: int | None = None) -> OrderResult:
    """Portfolio (ours): our best bounded-work order, each candidate fine-tuned, then the polish.

    Parameters
    ----------
    graph : OpGraph
    time_limit_s : float or None
        Budget of the fine-tunes and the polish (the portfolio itself always completes).
    beam : int, optional
        Beam width of the executed-set search (default ~40000 / n, up to ``BEAM_MAX_OPS`` ops;
        0 disables it and the polish, which otherwise runs up to ``POLISH_MAX_OPS`` ops).

    ``steps``: one ``candidate`` per order tried, a ``pick`` (the winner before its fine-tune),
    its fine-tune moves, then one ``polish`` step per lower order a feasibility search found. A
    candidate that reaches :func:`~hetsched.memory.lower_bound` is optimal: the portfolio stops
    there (a ``stop`` step says so, ``status="optimal"``).

    >>> from hetsched.io.generators import randwire_ws
    >>> from hetsched.memory import order_baseline
    >>> g = randwire_ws(10, seed=3, channels=4, hw=4)
    >>> order_portfolio(g).peak_bytes <= order_baseline(g, "kahn").peak_bytes
    True
    """
    t0 = time.perf_counter()
    if time_limit_s is not None:
        time_limit_s = check_time_limit(time_limit_s)
    if beam is not None and (isinstance(beam, bool) or not isinstance(beam, (int, np.integer)) or beam < 0):
        raise HetschedError(f"beam must be a whole number of states >= 0 (0: no beam search), got {beam!r}", field="beam")
    return run_portfolio(compile_graph(graph), t0, time_limit_s=time_limit_s, beam=beam)


def order_patent_heuristic(graph: OpGraph, *, time_limit_s: float | None = None) -> OrderResult:
    """Patent BFS/DFS + fine-tune: the patent's S3 + S4 (claims 6-9), the lower of BFS and DFS fine-tuned at its peak step.

    ``steps``: the BFS picks (phase ``S31``), the DFS pushes and pops (``S32``), the ``pick`` of the
    lower order (``S4-pick``), the fine-tune moves (``S4``). ``time_limit_s`` bounds the fine-tune.

    >>> from hetsched.io.generators import fork_join
    >>> r = order_patent_heuristic(fork_join(3, 2))
    >>> [p for p in ("S31", "S32", "S4-pick") if any(s.data["phase"] == p for s in r.steps)]
    ['S31', 'S32', 'S4-pick']
    """
    t0 = time.perf_counter()
    if time_limit_s is not None:
        time_limit_s = check_time_limit(time_limit_s)
    return patent_s3_s4(compile_graph(graph), t0, time_limit_s=time_limit_s,
                         params={"time_limit_s": time_limit_s})
