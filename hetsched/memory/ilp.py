"""The patent's integer linear programme (the memory-ordering patent, S2, claims 2-5) and a cumulative variant.

Both minimise the peak of the one memory model of :mod:`hetsched.memory.model` over orders with
one op per step (``T = {t_1..t_N}``, ``N`` = number of ops, claim 2). Tensors here are *storages*
(an alias is folded into its base), so the ILP and the evaluator agree byte for byte.

``formulation="patent"`` (claim 4): binaries ``A[e,t]`` (tensor ``e`` is allocated - created - at
step ``t``) and ``P[e,t]`` (``e`` is kept resident at ``t`` from an earlier step), plus the op-step
binaries ``R[v,t]`` the patent's "one op per time stamp" needs. ``formulation="cumulative"``:
binaries ``Z[v,t]`` (op ``v`` has run by step ``t``), live indicators derived from them; far fewer
symmetric solutions, so open-source solvers close it much faster (the form of Checkmate's and
MODeL's schedules).

Measured pitfalls handled here: PuLP maps a time-limited HiGHS/CBC run that found only a feasible
point to ``LpStatusOptimal``, so the proof is read from ``sol_status``; CBC overshoots its own
time limit 2-3x, so the solve runs in a child process that is killed at the user's limit; the
solver's objective is never trusted (the order is re-simulated), and the heuristic order (the warm
start) is always kept as the fallback.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import shutil
import tempfile
import time
import warnings
from functools import partial, reduce
from typing import Any

import numpy as np

from ..errors import HetschedError
from ..graph import OpGraph
from ..results import SolverRun
from ..solvers import SOLVERS, pick_solver
from .model import Mem, OrderResult, check_time_limit, compile_graph, lower_bound, make_result
from .portfolio import order_portfolio

__all__ = ["order_ilp", "build_ilp", "FORMULATIONS", "SOLVERS"]

FORMULATIONS = ("patent", "cumulative")
GRACE_S = 0.3  # time to ship the answer back once the solver's own limit has passed


def _payload(m: Mem) -> dict[str, Any]:
    sizes = [int(x) for x in m.size.tolist()]
    nz = [s for s in sizes if s > 0]
    g = reduce(math.gcd, nz) if nz else 1
    scale = float(max(nz)) if nz else 1.0
    return {
        "n": m.n,
        "S": m.S,
        "w": [s / scale for s in sizes],  # scaled sizes keep the LP numerically tame
        "scale": scale,
        "gcd": g,
        "prod": m.prod.tolist(),
        "users": [list(u) for u in m.users],
        "out": m.is_out.tolist(),
        "preds": [list(p) for p in m.preds],
    }


def build_ilp(graph: OpGraph, formulation: str = "cumulative", *, upper_bound_bytes: float | None = None):
    """The PuLP problem for ``graph`` and a function turning a solved problem into an order.

    Returns ``(prob, extract)``; ``extract()`` gives op indices in step order.

    >>> from hetsched.io.generators import chain
    >>> prob, _ = build_ilp(chain(3), "patent")
    >>> prob.numVariables() > 0 and prob.numConstraints() > 0
    True
    """
    return _build(_payload(compile_graph(graph)), formulation, upper_bound_bytes)


def _build(d: dict[str, Any], formulation: str, ub_bytes: float | None):
    import pulp

    if formulation not in FORMULATIONS:
        raise HetschedError(f"unknown ILP formulation {formulation!r}; choose one of {FORMULATIONS}", field="formulation")
    n, S, w = d["n"], d["S"], d["w"]
    prod, users, out, preds = d["prod"], d["users"], d["out"], d["preds"]
    T = range(n)
    prob = pulp.LpProblem(f"peak_memory_{formulation}", pulp.LpMinimize)
    # M: the peak, in units of the largest storage
    M = prob.add_variable("M", lowBound=0)
    prob += M
    if ub_bytes is not None:
        # a known order reaches this peak: no better solution lies above it (prunes the search)
        prob += M <= ub_bytes / d["scale"] + 1e-9, "known_order_bound"

    if formulation == "patent":
        # R[v,t] = 1 iff op v runs at step t (claim 2: one op per time stamp)
        R = [[prob.add_variable(f"R_{v}_{t}", cat="Binary") for t in T] for v in range(n)]
        # A[e,t] = 1 iff tensor e is allocated (created) at step t (claim 4); inputs have none
        A = {e: [prob.add_variable(f"A_{e}_{t}", cat="Binary") for t in T] for e in range(S) if prod[e] >= 0}
        # P[e,t] = 1 iff tensor e is kept resident at step t, created at an earlier step (claim 4)
        P = [[prob.add_variable(f"P_{e}_{t}", cat="Binary") for t in T] for e in range(S)]
        # each op runs at exactly one step
        for v in range(n):
            prob += pulp.lpSum(R[v]) == 1, f"once_{v}"
        # each step runs exactly one op
        for t in T:
            prob += pulp.lpSum(R[v][t] for v in range(n)) == 1, f"one_op_{t}"
        # a tensor is created exactly when its producer runs
        for e, Ae in A.items():
            for t in T:
                prob += Ae[t] == R[prod[e]][t], f"create_{e}_{t}"
        # a tensor can be resident only if it was resident or created at the step before;
        # graph inputs are resident at step 0
        for e in range(S):
            for t in T:
                prev = (P[e][t - 1] + (A[e][t - 1] if e in A else 0)) if t > 0 else (1 if prod[e] < 0 else 0)
                prob += P[e][t] <= prev, f"keep_{e}_{t}"
                if out[e]:
                    # graph outputs are never freed
                    prob += P[e][t] >= prev, f"never_free_{e}_{t}"
        # a reader runs only while the tensor it reads is resident (this also orders producer < reader)
        for e in range(S):
            for u in users[e]:
                for t in T:
                    prob += R[u][t] <= P[e][t], f"read_{e}_{u}_{t}"
        # precedence edges no tensor carries (alias producers): run strictly after the predecessor
        carried = {(prod[e], u) for e in range(S) if prod[e] >= 0 for u in users[e]}
        for v in range(n):
            for p in preds[v]:
                if (p, v) not in carried:
                    for t in T:
                        prob += R[v][t] <= pulp.lpSum(R[p][k] for k in range(t)), f"prec_{p}_{v}_{t}"
        # the peak covers the tensors created and the tensors resident at every step
        for t in T:
            prob += M >= pulp.lpSum(w[e] * P[e][t] for e in range(S)) + pulp.lpSum(w[e] * A[e][t] for e in A), f"peak_{t}"

        def extract() -> list[int]:
            step = [max(T, key=lambda t: R[v][t].varValue or 0.0) for v in range(n)]
            return sorted(range(n), key=lambda v: (step[v], v))

        return prob, extract

    # cumulative
    # Z[v,t] = 1 iff op v has run at step t or before
    Z = [[prob.add_variable(f"Z_{v}_{t}", cat="Binary") for t in T] for v in range(n)]
    # L[e,t] >= 1 when tensor e is live during step t (continuous: minimisation keeps it at 0 or 1)
    L = [[prob.add_variable(f"L_{e}_{t}", lowBound=0, upBound=1) for t in T] for e in range(S)]

    def z(v: int, t: int):
        return Z[v][t] if t >= 0 else 0

    # once run, an op stays run
    for v in range(n):
        for t in range(1, n):
            prob += Z[v][t] >= Z[v][t - 1], f"mono_{v}_{t}"
    # exactly t+1 ops have run by step t (one op per step)
    for t in T:
        prob += pulp.lpSum(Z[v][t] for v in range(n)) == t + 1, f"count_{t}"
    # an op runs only at a step after all its predecessors have run
    for v in range(n):
        for p in preds[v]:
            for t in T:
                prob += Z[v][t] <= z(p, t - 1), f"prec_{p}_{v}_{t}"
    # liveness: produced by step t and some reader not done before t; outputs: produced by t;
    # inputs: some reader not done before t; unread tensors: produced exactly at t
    for e in range(S):
        p = prod[e]
        for t in T:
            made = Z[p][t] if p >= 0 else 1
            if out[e]:
                prob += L[e][t] >= made, f"live_out_{e}_{t}"
            elif users[e]:
                for u in users[e]:
                    prob += L[e][t] >= made - z(u, t - 1), f"live_{e}_{u}_{t}"
            elif p >= 0:
                prob += L[e][t] >= Z[p][t] - z(p, t - 1), f"live_tmp_{e}_{t}"
    # the peak covers the live bytes of every step
    for t in T:
        prob += M >= pulp.lpSum(w[e] * L[e][t] for e in range(S)), f"peak_{t}"

    def extract() -> list[int]:
        step = [next((t for t in T if (Z[v][t].varValue or 0.0) > 0.5), n) for v in range(n)]
        return sorted(range(n), key=lambda v: (step[v], v))

    return prob, extract


def highs_warm_class():
    """PuLP's HiGHS interface, plus the warm start it does not pass on (PuLP 3.3 hands starts to
    CBC, CPLEX, Gurobi and Xpress only).

    The start goes in as a sparse partial solution (``Highs.setSolution(n, index, value)``, HiGHS
    >= 1.8): the op-step variables of the known order; HiGHS completes the rest itself and, when
    the completion is feasible, starts its branch and bound with that incumbent.
    """
    import pulp

    class HiGHSWarm(pulp.HiGHS):
        warm_status = None  # what HiGHS answered to the start: its HighsStatus name
        warm_entries = 0

        def actualSolve(self, lp):
            self.createAndConfigureSolver(lp)
            self.buildSolverModel(lp)
            start = [(v.index, float(v.varValue)) for v in lp.variables() if v.varValue is not None]
            if start:
                idx = np.fromiter((i for i, _ in start), dtype=np.int32, count=len(start))
                val = np.fromiter((x for _, x in start), dtype=np.float64, count=len(start))
                self.warm_status = lp.solverModel.setSolution(len(start), idx, val).name
                self.warm_entries = len(start)
            self.callSolver(lp)
            status, sol_status = self.findSolutionValues(lp)
            for var in lp.variables():
                var.modified = False
            for constraint in lp._constraints.values():
                constraint.modifier = False
            lp.assignStatus(status, sol_status)
            return status

    return HiGHSWarm


def _solver(name: str, time_limit_s: float, gap_abs: float, warm: bool):
    import pulp

    if name == "highs":
        cls = highs_warm_class() if warm else pulp.HiGHS
        return cls(msg=False, timeLimit=time_limit_s, gapRel=0.0, gapAbs=gap_abs, threads=1)
    if name == "cbc":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, gapRel=0.0, gapAbs=gap_abs, warmStart=warm, threads=1)
    raise HetschedError(f"unknown solver {name!r}; choose one of {SOLVERS}", field="solver")


def _child(conn, d: dict[str, Any], formulation: str, solver: str, time_limit_s: float, warm_order, ub_bytes,
           tmp_dir: str | None = None) -> None:
    """Runs in a child process: build, solve, send back the order and what the solver said."""
    try:
        # own process group, so that killing it also stops a CBC executable it started
        os.setpgid(0, 0)
    except OSError:  # pragma: no cover
        pass
    try:
        # HiGHS prints its banner from C even with msg=False: keep the user's output clean
        # (answers and errors go back through the pipe)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:  # pragma: no cover
        pass
    try:
        t0 = time.perf_counter()
        prob, extract = _build(d, formulation, ub_bytes)
        if warm_order is not None:
            _set_warm(prob, d, formulation, warm_order)
        t_build = time.perf_counter() - t0
        gap_abs = 0.5 * d["gcd"] / d["scale"]  # two distinct peaks differ by at least the gcd of the sizes
        slv = _solver(solver, max(0.05, time_limit_s - t_build), gap_abs, warm_order is not None)
        if tmp_dir is not None and hasattr(slv, "tmpDir"):
            # CBC's model and start files (7 MB on a 10x8 layered graph) go where the parent can remove
            # them: a child killed at the time limit never reaches pulp's own clean-up
            slv.tmpDir = tmp_dir
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            prob.solve(slv)
        info: dict[str, Any] = {
            "status": int(prob.status),
            "sol_status": int(prob.sol_status),
            "objective": None if prob.objective.value() is None else float(prob.objective.value()) * d["scale"],
            "n_vars": prob.numVariables(),
            "n_constraints": prob.numConstraints(),
            "build_s": t_build,
            "solve_s": time.perf_counter() - t0 - t_build,
            "bound": None,
            "solver_gap": None,
            "warm_status": getattr(slv, "warm_status", None),
            "warm_entries": getattr(slv, "warm_entries", 0),
        }
        if solver == "highs" and getattr(prob, "solverModel", None) is not None:
            try:
                hi = prob.solverModel.getInfo()
                info["bound"] = float(hi.mip_dual_bound) * d["scale"]
                info["solver_gap"] = float(hi.mip_gap)
            except Exception:  # pragma: no cover - older highspy
                pass
        import pulp

        has_sol = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
        info["order"] = extract() if has_sol else None
        conn.send(info)
    except Exception as exc:  # pragma: no cover - reported to the parent as a solver failure
        conn.send({"error": f"{type(exc).__name__}: {exc}"})
    finally:
        conn.close()


def _set_warm(prob, d, formulation, order) -> None:
    n = d["n"]
    pos = {v: i for i, v in enumerate(order)}
    var = prob.variablesDict()
    if formulation == "cumulative":
        for v in range(n):
            for t in range(n):
                x = var.get(f"Z_{v}_{t}")
                if x is not None:
                    x.setInitialValue(1 if pos[v] <= t else 0)
    else:
        for v in range(n):
            for t in range(n):
                x = var.get(f"R_{v}_{t}")
                if x is not None:
                    x.setInitialValue(1 if pos[v] == t else 0)


def order_ilp(
    graph: OpGraph,
    *,
    time_limit_s: float = 10.0,
    formulation: str = "patent",
    solver: str | None = None,
    warm_start: OrderResult | str | None = "heuristic",
) -> OrderResult:
    """Minimum-peak order by integer linear programming, within a hard wall-clock limit.

    Parameters
    ----------
    graph : OpGraph
    time_limit_s : float
        The user's limit (patent S2). The solver gets it as its own limit and runs in a child
        process that is killed ``GRACE_S`` after it, since CBC overshoots.
    formulation : {"patent", "cumulative"}
        The patent's ``A[e,t]``/``P[e,t]`` model, or the cumulative ``Z[v,t]`` model.
    solver : {"highs", "cbc"}, optional
        HiGHS (highspy) by default; PuLP's bundled CBC otherwise or when highspy is missing.
    warm_start : OrderResult, "heuristic" or None
        A known order: it bounds the peak variable from above, is handed to the solver as a start
        (CBC through PuLP; HiGHS as a sparse partial solution, which PuLP alone would drop), and is
        returned (``status="fallback"``) when the solver gives no better order in time.

    Returns
    -------
    OrderResult
        ``status`` is ``"optimal"`` only when the solver proved it (``sol_status`` optimal);
        ``"feasible"`` for an unproven incumbent; ``"fallback"`` when the warm start is returned
        (``why`` says why). ``ilp`` holds what the solver said (:class:`~hetsched.results.SolverRun`:
        status, proven bound, gap with HiGHS, size, solve time).

    >>> from hetsched.io.generators import fork_join
    >>> r = order_ilp(fork_join(2, 2), time_limit_s=20, formulation="cumulative")
    >>> r.status, r.solver
    ('optimal', 'highs')
    """
    t0 = time.perf_counter()
    m = compile_graph(graph)
    if formulation not in FORMULATIONS:
        raise HetschedError(f"unknown ILP formulation {formulation!r}; choose one of {FORMULATIONS}", field="formulation")
    solver = pick_solver(solver)
    time_limit_s = check_time_limit(time_limit_s)  # NaN/None/inf would reach the solver and the poll
    lb = lower_bound(graph)
    if isinstance(warm_start, str):
        if warm_start != "heuristic":
            raise HetschedError(f"warm_start must be an OrderResult, 'heuristic' or None, got {warm_start!r}", field="warm_start")
        warm_start = order_portfolio(graph)
    warm_arr = m.to_idx(warm_start.order).tolist() if warm_start is not None else None
    warm_peak = m.peak(np.asarray(warm_arr)) if warm_arr is not None else None
    fallback = warm_arr if warm_arr is not None else m.topo()
    fb_name = warm_start.method if warm_start is not None else "given"
    params = {"time_limit_s": time_limit_s, "formulation": formulation, "solver": solver,
              "warm_start": None if warm_start is None else warm_start.method}
    method = f"ilp-{formulation}"
    run = partial(SolverRun, solver=solver, model=formulation, time_limit_s=time_limit_s,
                  warm_start=None if warm_start is None else warm_start.method)
    if m.n == 0:
        return make_result(m, [], method=method, status="optimal", t0=t0, lb=lb, params=params, bound=0.0,
                            ilp=run("optimal", bound=0.0, incumbent=0.0), why="empty graph")

    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    tmp_dir = tempfile.mkdtemp(prefix="hetsched-ilp-")
    proc = ctx.Process(target=_child, args=(send, _payload(m), formulation, solver, time_limit_s, warm_arr,
                                            None if warm_peak is None else float(warm_peak), tmp_dir), daemon=True)
    info, killed = None, False
    try:
        proc.start()
        send.close()
        remaining = time_limit_s + GRACE_S - (time.perf_counter() - t0)
        if recv.poll(max(0.0, remaining)):
            try:
                info = recv.recv()
            except EOFError:
                info = None
    finally:
        # also on an interrupt (a notebook's stop button during a long solve): no solver left
        # running, no CBC files left behind
        killed = proc.is_alive()
        if killed:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the child and any solver executable it started
            except (ProcessLookupError, PermissionError):
                proc.kill()
        if proc.pid is not None:
            proc.join(1.0)
        recv.close()
        shutil.rmtree(tmp_dir, ignore_errors=True)

    def fallback_result(ilp: SolverRun, why: str, bound: float | None = None) -> OrderResult:
        return make_result(m, fallback, method=f"{method}->fallback:{fb_name}", status="fallback", t0=t0, lb=lb,
                            params=params, ilp=ilp, bound=bound, why=why, extra=extra)

    extra: dict[str, float] = {}
    if info is None or "error" in info:
        note = ("the solver did not answer within the limit (process killed)" if killed else
                "the solver process ended without an answer" if info is None else f"the solver failed ({info['error']})")
        return fallback_result(run("killed" if killed else "failed", note=note),
                               f"{note}; returning the {fb_name} order")
    import pulp

    if info.get("warm_entries"):
        extra["warm_start_entries"] = float(info["warm_entries"])
        params = {**params, "warm_start_status": info.get("warm_status")}
    facts = dict(gap=info.get("solver_gap"), build_s=info.get("build_s"), solve_s=info.get("solve_s"), n_vars=info.get("n_vars"),
                 n_constraints=info.get("n_constraints"))
    proven = info["sol_status"] == pulp.LpSolutionOptimal
    bound = info.get("bound")
    if info["order"] is None:
        note = (f"solver status {pulp.LpStatus[info['status']]} with no solution (sol_status {info['sol_status']})")
        return fallback_result(run("no solution", bound=bound, note=note, **facts),
                               f"{note}; returning the {fb_name} order", bound=bound)
    arr = info["order"]
    try:
        m.check_idx(np.asarray(arr, dtype=np.int64))
        pk = m.peak(np.asarray(arr, dtype=np.int64))
    except HetschedError as exc:  # a solver answer that is not a legal order is not trusted
        return fallback_result(run("failed", note=f"solver order rejected ({exc})", **facts),
                               f"solver order rejected ({exc}); returning {fb_name}")
    if proven:
        bound = float(pk) if bound is None else max(min(bound, float(pk)), 0.0)
    ilp = run("optimal" if proven else "feasible", bound=bound, incumbent=float(pk), **facts)
    if warm_peak is not None and warm_peak < pk:
        # an unproven incumbent worse than the warm start: keep the warm start
        return fallback_result(ilp, f"the solver's incumbent ({pk} B) is worse than the {fb_name} order ({warm_peak} B)",
                               bound=bound)
    why = ("solver proved optimality (sol_status optimal); order re-simulated" if proven else
           "time limit reached with a feasible, unproven solution (PuLP status says "
           f"{pulp.LpStatus[info['status']]}, sol_status says integer-feasible)")
    return make_result(m, arr, method=method, status=ilp.status, t0=t0, lb=lb, params=params, ilp=ilp, bound=bound,
                        why=why, extra=extra)
