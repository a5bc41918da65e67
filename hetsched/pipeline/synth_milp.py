"""The exact schedule synthesis: a disjunctive MILP over per-rank orders (PuLP + HiGHS, CBC fallback).

Each rank runs one action at a time; which of two actions of a rank comes first is a binary
decision, every time is a continuous variable, and the constraints are the simulator's model: an
action starts after its input arrives (its producer's end plus the transfer, non-blocking p2p) and
after the action before it on its rank ends. The minimum over these constraints is exactly the
simulator's walk of the order the binaries encode, so the optimum of the MILP is the optimal
schedule; its schedule is re-simulated anyway, and the simulator's makespan is what is reported.

Model (times scaled by ``unit`` so that the upper bound is 100: keeps the big-M rows tame):

* ``S[a]``: start of action ``a``; ``C``: the makespan.
* ``x[a, b]`` (``a < b``, same rank): 1 when ``a`` runs before ``b``. Only pairs whose order is
  not already implied get one: a class runs in micro-batch order (no loss, :mod:`.problem`),
  a forward before its backward, ``I`` before ``W``, any pair joined by a chain of dependencies,
  and any pair whose time windows (earliest start from the dependencies, latest start from the
  upper bound and the work that must follow) leave one order only.
* Rows, one family each: dependencies; fixed orders; the disjunction of each ``x`` (big-M from the
  time windows); monotone ``x`` within two classes (if ``P_j`` precedes ``Q_k`` it precedes
  ``Q_{k+1}``); the makespan after every action's dependency tail; per-rank *energy* (an action
  starts after the rank's head plus every action of the rank before it, and the makespan follows
  it by every action after it); the memory cap at every forward; the analytic lower bound.

``solve_milp`` returns the solver's order, status, bound and gap. Proven optimality is read from
PuLP's ``sol_status`` (its ``status`` calls a time-limited incumbent "Optimal").
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any, Sequence

import networkx as nx
import numpy as np

from ..errors import ScheduleError
from ..solvers import SOLVERS, pick_solver, quiet_stdout
from .ir import B, F, I, W
from .problem import TOL, Problem

__all__ = ["build_milp", "solve_milp", "SOLVERS"]

#: relative optimality gap the solver is asked for: "optimal" means within it
GAP_REL = 1e-7


def _same_rank_closure(pb: Problem, ub: float) -> tuple[dict, np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Which same-rank pairs have a forced order, and each action's time window.

    Returns ``(before, est, lst, chain)``: ``before[(a, b)]`` is True when ``a`` must precede ``b``
    (for every same-rank pair with a forced order, both keys present); ``est``/``lst`` the earliest
    and latest start of every action in a schedule of makespan at most ``ub``; ``chain`` the fixed
    edges the model writes as rows (class order, forward before backward, I before W).
    """
    n = pb.n
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    w: dict[tuple[int, int], float] = {}
    for a in range(n):
        d = int(pb.dep[a])
        if d >= 0:
            g.add_edge(d, a)
            w[(d, a)] = float(pb.dur[d] + pb.delay[a])
    chain: list[tuple[int, int]] = []
    for ids in pb.classes:
        for a, b in zip(ids[:-1].tolist(), ids[1:].tolist()):
            chain.append((a, b))
    key = {(int(pb.stage[a]), int(pb.kind[a]), int(pb.mb[a])): a for a in range(n)}
    bk = I if pb.split else B
    for (s, k, j), a in key.items():
        if k == F:
            chain.append((a, key[(s, bk, j)]))
        elif k == I:
            chain.append((a, key[(s, W, j)]))
    for a, b in chain:
        g.add_edge(a, b)
        w[(a, b)] = max(w.get((a, b), 0.0), float(pb.dur[a]))
    order = list(nx.topological_sort(g))
    reach = [0] * n  # bitset of descendants
    for a in reversed(order):
        bits = 0
        for b in g.successors(a):
            bits |= reach[b] | (1 << b)
        reach[a] = bits
    est = np.zeros(n)
    for a in order:
        for b in g.successors(a):
            est[b] = max(est[b], est[a] + w[(a, b)])
    tail = pb.dur.astype(float).copy()
    for a in reversed(order):
        for b in g.successors(a):
            tail[a] = max(tail[a], w[(a, b)] + tail[b])
    before: dict[tuple[int, int], bool] = {}
    ranks = [np.flatnonzero(pb.rank == r).tolist() for r in range(pb.p)]
    for ids in ranks:
        # the rank's own energy: its head, and the work that must precede / follow each action
        head = min(est[a] for a in ids)
        for a in ids:
            pre = sum(pb.dur[b] for b in ids if (reach[b] >> a) & 1)
            post = sum(pb.dur[b] for b in ids if (reach[a] >> b) & 1)
            est[a] = max(est[a], head + pre)
            tail[a] = max(tail[a], pb.dur[a] + post)
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                if (reach[a] >> b) & 1:
                    before[(a, b)], before[(b, a)] = True, False
                elif (reach[b] >> a) & 1:
                    before[(a, b)], before[(b, a)] = False, True
    lst = ub - tail
    # time windows: b cannot precede a when b's earliest end is after a's latest start
    for ids in ranks:
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                if (a, b) in before:
                    continue
                b_first = est[b] + pb.dur[b] <= lst[a] + 1e-9 * max(1.0, ub)
                a_first = est[a] + pb.dur[a] <= lst[b] + 1e-9 * max(1.0, ub)
                if a_first and not b_first:
                    before[(a, b)], before[(b, a)] = True, False
                    chain.append((a, b))
                elif b_first and not a_first:
                    before[(a, b)], before[(b, a)] = False, True
                    chain.append((b, a))
    return before, est, lst, chain


def build_milp(pb: Problem, ub: float, lb: float, warm: Sequence[Sequence[int]] | None = None):
    """The PuLP problem for ``pb`` with makespans at most ``ub`` (a known schedule's) and at least ``lb``.

    Returns ``(prob, extract, info)``: ``extract()`` gives the solved per-rank orders; ``info``
    holds ``unit`` (seconds per model time unit) and the counts of variables and binaries.

    >>> from hetsched.pipeline.problem import Problem
    >>> pb = Problem.build({"F": 1.0, "B": 2.0}, p=2, v=1, m=2, split_backward=False)
    >>> prob, extract, info = build_milp(pb, ub=9.0, lb=9.0)
    >>> info["binaries"], prob.numConstraints() > 0
    (1, True)
    """
    import pulp

    n = pb.n
    unit = max(ub, 1e-300) / 100.0
    dur = (pb.dur / unit).tolist()
    delay = (pb.delay / unit).tolist()
    U = ub / unit
    before, est_s, lst_s, chain = _same_rank_closure(pb, ub)
    est = (est_s / unit).tolist()
    lst = (lst_s / unit).tolist()
    slack = 1e-7 * U
    prob = pulp.LpProblem("pipeline_synthesis", pulp.LpMinimize)
    # S[a]: start of action a (model time units), within its time window
    S = [prob.add_variable(f"S_{a}", lowBound=max(0.0, est[a] - slack), upBound=max(est[a], lst[a]) + slack) for a in range(n)]
    # C: the makespan, between the analytic lower bound and the warm start's makespan
    C = prob.add_variable("C", lowBound=max(0.0, lb / unit - slack), upBound=U + slack)
    prob += C
    # x[a, b], a < b on one rank with no forced order: 1 when a runs before b
    x: dict[tuple[int, int], Any] = {}
    ranks = [np.flatnonzero(pb.rank == r).tolist() for r in range(pb.p)]
    for ids in ranks:
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                if (a, b) not in before:
                    x[(a, b)] = prob.add_variable(f"x_{a}_{b}", cat="Binary")

    def prec(a: int, b: int):
        """1 (or its expression) when a runs before b on their rank."""
        if (a, b) in before:
            return 1 if before[(a, b)] else 0
        return x[(a, b)] if a < b else 1 - x[(b, a)]

    # dependencies: an action starts once its input has arrived
    for a in range(n):
        d = int(pb.dep[a])
        if d >= 0:
            prob += S[a] >= S[d] + dur[d] + delay[a], f"dep_{a}"
    # fixed orders on a rank (class order, F before B/I, I before W, time windows)
    for k, (a, b) in enumerate(chain):
        prob += S[b] >= S[a] + dur[a], f"fix_{k}"
    # disjunctions: one of the two orders holds (big-M from the time windows)
    for (a, b), xv in x.items():
        m_ab = max(0.0, lst[a] + dur[a] - est[b]) + slack
        m_ba = max(0.0, lst[b] + dur[b] - est[a]) + slack
        prob += S[b] >= S[a] + dur[a] - m_ab * (1 - xv), f"or_{a}_{b}"
        prob += S[a] >= S[b] + dur[b] - m_ba * xv, f"ro_{a}_{b}"
    # monotone orders between two classes of a rank: P_j before Q_k implies P_j before Q_{k+1}
    # and P_{j-1} before Q_k (the classes run in micro-batch order)
    rank_cls = [[pb.classes[c].tolist() for c in pb.rank_classes[r]] for r in range(pb.p)]
    k = 0
    for cls in rank_cls:
        for P in cls:
            for Q in cls:
                if P is Q:
                    continue
                for j in range(len(P)):
                    for q in range(len(Q) - 1):
                        lo, hi = prec(P[j], Q[q]), prec(P[j], Q[q + 1])
                        if not isinstance(lo, int) or not isinstance(hi, int):
                            prob += hi - lo >= 0, f"mono_{k}"
                            k += 1
    # makespan: after every action and the dependency chain that must follow it
    tail_s = U - np.asarray(lst)
    for a in range(n):
        prob += C >= S[a] + float(tail_s[a]), f"tail_{a}"
    # per-rank energy: the rank's head plus everything before a; everything after a before C
    for ids in ranks:
        head = min(est[a] for a in ids)
        for a in ids:
            pre = [(dur[b], prec(b, a)) for b in ids if b != a]
            prob += S[a] >= head + pulp.lpSum(d * v for d, v in pre), f"erel_{a}"
            post = [(dur[b], prec(a, b)) for b in ids if b != a]
            prob += C >= S[a] + dur[a] + pulp.lpSum(d * v for d, v in post), f"edue_{a}"
    # memory: the bytes a rank holds when each forward starts stay within its cap
    if np.isfinite(pb.cap).any():
        scale = max(float(np.abs(pb.mem).max()), 1.0)
        for r, ids in enumerate(ranks):
            if not np.isfinite(pb.cap[r]):
                continue
            for a in ids:
                if pb.kind[a] != F:
                    continue
                terms = [(pb.mem[b] / scale, prec(b, a)) for b in ids if b != a and pb.mem[b] != 0]
                prob += pulp.lpSum(c * v for c, v in terms) + pb.mem[a] / scale <= pb.cap[r] * (1 + TOL) / scale + 1e-9, f"mem_{a}"

    if warm is not None:
        pos = {a: (r, i) for r, o in enumerate(warm) for i, a in enumerate(o)}
        for (a, b), xv in x.items():
            xv.setInitialValue(1 if pos[a][1] < pos[b][1] else 0)

    def extract() -> list[list[int]]:
        out = []
        for ids in ranks:
            def first(a: int, b: int) -> bool:
                v = prec(a, b)
                return bool(v) if isinstance(v, int) else (pulp.value(v) or 0.0) > 0.5
            count = {a: sum(first(b, a) for b in ids if b != a) for a in ids}
            if sorted(count.values()) == list(range(len(ids))):
                out.append(sorted(ids, key=lambda a: count[a]))
            else:  # an order the binaries do not make total (zero-time actions): by start, then count
                out.append(sorted(ids, key=lambda a: (round((S[a].varValue or 0.0) / max(U, 1e-300), 9), count[a])))
        return out

    info = {"unit": unit, "vars": prob.numVariables(), "binaries": len(x), "constraints": prob.numConstraints()}
    return prob, extract, info


def _solver(name: str, time_limit_s: float, warm: bool):
    import pulp

    if name == "highs":
        from ..memory.ilp import highs_warm_class  # PuLP 3.3 does not hand HiGHS a warm start; this does

        cls = highs_warm_class() if warm else pulp.HiGHS
        # tight tolerances: big-M rows must not be relaxed by a binary's integrality slack
        return cls(msg=False, timeLimit=time_limit_s, gapRel=GAP_REL, threads=1,
                   mip_feasibility_tolerance=1e-9, primal_feasibility_tolerance=1e-9)
    if name == "cbc":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, gapRel=GAP_REL, warmStart=warm, threads=1)
    raise ScheduleError(f"unknown solver {name!r}; choose one of {SOLVERS}", field="solver")


def solve_milp(pb: Problem, warm: Sequence[Sequence[int]], ub: float, lb: float, *, time_limit_s: float,
               solver: str | None = None) -> dict[str, Any]:
    """Solve the MILP warm-started from ``warm`` (makespan ``ub``); what the solver says, in seconds.

    Keys: ``solver``, ``status`` (as :class:`~hetsched.results.SolverRun` says it: ``"optimal"``
    when proven, ``"feasible"`` for an incumbent at the time limit, ``"no solution"``),
    ``orders`` (or ``None``), ``objective`` (the solver's makespan), ``bound`` (its proven bound,
    ``None`` if it gives none), ``solver_gap``, ``why``, ``milp_vars``, ``milp_binaries``,
    ``milp_constraints``, ``milp_solve_s``.

    >>> from hetsched.pipeline.problem import Problem
    >>> pb = Problem.build({"F": [1.0, 1.2, 0.8], "B": 2.0, "activation_bytes": 1.0}, p=3, v=1, m=4, memory_cap_bytes=[3, 2, 1])
    >>> from hetsched.pipeline import one_f_one_b, split_backward
    >>> warm = pb.orders_of(split_backward(one_f_one_b(3, 4)))       # 1F1B, backwards split in place
    >>> out = solve_milp(pb, warm, pb.evaluate(warm)[0], 0.0, time_limit_s=20)
    >>> round(pb.evaluate(warm)[0], 6), out["status"], round(out["objective"], 6), pb.fits(out["orders"])  # proven optimal
    (15.4, 'optimal', 15.4, True)
    """
    import pulp

    solver = pick_solver(solver, error=ScheduleError)
    t0 = time.perf_counter()
    prob, extract, info = build_milp(pb, ub, lb, warm)
    left = max(0.2, time_limit_s - (time.perf_counter() - t0))
    slv = _solver(solver, left, True)
    with warnings.catch_warnings(), quiet_stdout():
        warnings.simplefilter("ignore")
        prob.solve(slv)
    solve_s = time.perf_counter() - t0
    unit = info["unit"]
    proven = prob.sol_status == pulp.LpSolutionOptimal
    has = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    bound = None
    gap = None
    if solver == "highs" and getattr(prob, "solverModel", None) is not None:
        try:
            hi = prob.solverModel.getInfo()
            if hi.mip_dual_bound == hi.mip_dual_bound and abs(hi.mip_dual_bound) < 1e300:
                bound = float(hi.mip_dual_bound) * unit
            gap = float(hi.mip_gap)
        except Exception:  # pragma: no cover - older highspy
            pass
    obj = float(pulp.value(prob.objective)) * unit if has and pulp.value(prob.objective) is not None else math.nan
    if proven and bound is None:
        bound = obj * (1 - GAP_REL)
    status = "optimal" if proven else ("feasible" if has else "no solution")
    why = (f"{solver}: proven optimal within a relative gap of {GAP_REL:g} in {solve_s:.3g} s" if proven else
           f"{solver}: stopped at its {left:.3g} s limit" + (f" with an incumbent {obj:.6g} s" if has else " with no solution")
           + (f", bound {bound:.6g} s" if bound is not None else ""))
    return {"solver": solver, "status": status, "orders": extract() if has else None, "objective": obj, "bound": bound,
            "solver_gap": gap, "why": why, "milp_vars": info["vars"], "milp_binaries": info["binaries"],
            "milp_constraints": info["constraints"], "milp_solve_s": solve_s}
