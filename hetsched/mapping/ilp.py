"""``map_ilp``: the optimal mapping as a mixed-integer linear programme (beyond the patent).

Decides, together, where each op runs and what stays in device memory (each op's weights, each
tensor kept on-chip), under the support table, the op working sets and the memory plan of
:mod:`hetsched.mapping.engine` (:func:`~hetsched.mapping.engine.plan_budget`), for one of two objectives, each exactly as :func:`hetsched.evaluate`
computes it:

* ``"total_latency"`` (the patent's system total latency, claim 5): a sum of one term per op and
  one per tensor (see :class:`~hetsched.mapping.engine.Ctx`), linear in the decisions below.
* ``"makespan"``: the evaluator's clock in its default op order (the graph's topological order):
  each device runs its ops in that order, transfers go hop by hop, each link direction serves its
  transfers in the order they are issued. Given the decisions, every time is a maximum of sums, so
  ">=" constraints whose minimum is the evaluator's schedule model it exactly; big-M terms switch
  them on with the transfers the decisions imply.

Binary variables are the placement ``x``, weight residency ``wr`` and tensor residency ``k``;
every other variable is continuous and pinned to its logical value by its constraints once the
binaries are integral. The model is solved with HiGHS through PuLP (CBC, bundled with PuLP, when
highspy is missing), warm-started from :func:`~hetsched.mapping.map_search`'s mapping (the best
heuristic), which is also returned should the solver find nothing better in time.

The result's ``status``: ``"optimal"`` only when the solver proved it (``sol_status`` optimal:
PuLP reports a time-limited run's incumbent as "Optimal", so its ``status`` is not trusted);
``"feasible"``: the time limit came first, ``ilp.bound`` and ``ilp.gap`` say how far the optimum can
be; ``"fallback"``: the solver gave nothing better than the warm start, which is returned. What the
solver said is the result's ``ilp`` (:class:`~hetsched.results.SolverRun`). The objective in
``metrics`` is always what :func:`hetsched.evaluate` says for the mapping returned (the solver's own
figure is ``ilp.incumbent``; they agree when the status is optimal).

"Optimal" is over the mappings whose planned residency fits the memory plan
(``metrics["memory_plan_binds"]`` says whether the plan could bind at all; when it cannot, the
optimum is unconditional). For ``makespan`` it is the optimum in the evaluator's default op order.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> r = map_ilp(chain(4, seed=1), toy_system(), time_limit_s=20)
>>> r.status, r.ilp.solver, r.ilp.gap
('optimal', 'highs', 0.0)
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace
from typing import Any

from ..cost import CostModel
from ..errors import HetschedError
from ..graph import OpGraph
from ..results import SolverRun, StepLog
from ..solvers import pick_solver, quiet_stdout
from ..system import System
from .baselines import single_device_states
from .engine import EMPTY_STATE, Ctx, MemoryPlan, State, best_residency, diff, plan_budget, require_objective
from .result import MappingResult, finish
from .search import map_search

__all__ = ["map_ilp", "SOLVERS", "build_mapping_ilp"]

class _Model:
    """The PuLP problem and its variables, indexed by op / tensor / device names."""

    def __init__(self, ctx: Ctx, objective: str, budget: dict[str, float], unit: float, ub: float) -> None:
        import pulp

        self.pulp = pulp
        self.ctx, self.objective, self.unit = ctx, objective, unit
        self.prob = pulp.LpProblem("mapping", pulp.LpMinimize)
        self.n = 0
        host = ctx.host
        self.oi = {o: i for i, o in enumerate(ctx.order)}
        self.ti = {t: i for i, t in enumerate(ctx.size)}
        # devices each op may run on: supported and able to hold its working set
        self.C = {o: ctx.servable(o) for o in ctx.order}
        add = self.prob.add_variable
        # x[o, d]: op o runs on device d (binary)
        self.x = {(o, d): add(f"x_{self.oi[o]}_{d}", cat="Binary") for o in ctx.order for d in self.C[o]}
        # wr[o, d]: o runs on d and its weights stay in d's memory for the run (binary; not on the host)
        self.wr = {(o, d): add(f"wr_{self.oi[o]}_{d}", cat="Binary")
                   for o in ctx.order if ctx.weight[o] > 0 for d in self.C[o] if d != host}
        # k[t]: tensor t is kept (in its producer's memory, and its copies where it is read) (binary)
        self.k = {t: add(f"k_{self.ti[t]}", cat="Binary") for t in ctx.size if self._can_matter(t)}
        for o in ctx.order:
            self.prob += pulp.lpSum(self.x[o, d] for d in self.C[o]) == 1, f"place_{self.oi[o]}"
            for d in self.C[o]:
                if (o, d) in self.wr:
                    self.prob += self.wr[o, d] <= self.x[o, d], f"wr_on_{self.oi[o]}_{d}"
        self.A: dict[str, list[str]] = {}  # devices the tensor can be produced on
        self.q: dict[tuple[str, str], Any] = {}
        self.r: dict[tuple[str, str, str], Any] = {}
        self.y: dict[tuple[str, str], Any] = {}
        self.v: dict[tuple[str, str, str], Any] = {}
        self.cons_sorted = {t: sorted(ctx.consumers[t], key=self.oi.__getitem__) for t in ctx.size}
        for t in ctx.size:
            self._tensor_vars(t)
        self._memory(budget)
        self.terms: list = []
        if objective == "total_latency":
            self._total_latency()
        else:
            self._makespan(ub)

    # ------------------------------------------------------------------ helpers
    def _xp(self, t: str, a: str):
        """1 when the producer of t runs on a (the host for a graph input)."""
        p = self.ctx.producer[t]
        if p is None:
            return 1 if a == self.ctx.host else 0
        return self.x.get((p, a), 0)

    def _can_matter(self, t: str) -> bool:
        # a zero-byte transfer costs no time but still holds its lane's place in the issue order (it
        # can move the lane's clock forward), so under makespan every tensor that moves is modelled
        moves = bool(self.ctx.consumers[t]) or self.ctx.producer[t] is not None
        return moves and (self.ctx.size[t] > 0 or self.objective == "makespan")

    def _tensor_vars(self, t: str) -> None:
        pulp, ctx, prob = self.pulp, self.ctx, self.prob
        host = ctx.host
        ti = self.ti[t]
        p = ctx.producer[t]
        self.A[t] = list(self.C[p]) if p is not None else [host]
        if t not in self.k:
            return
        k = self.k[t]
        # q[t, a]: t is kept and produced on a (continuous; = x[p, a] AND k[t] once those are integral)
        for a in self.A[t]:
            self.q[t, a] = self.prob.add_variable(f"q_{ti}_{a}", 0, 1)
            prob += self.q[t, a] <= self._xp(t, a), f"q_on_{ti}_{a}"
        prob += pulp.lpSum(self.q[t, a] for a in self.A[t]) == k, f"q_sum_{ti}"
        # r[t, c, b]: t is not kept and consumer c runs on b (continuous; = x[c, b] AND NOT k[t])
        for c in self.cons_sorted[t]:
            ci = self.oi[c]
            for b in self.C[c]:
                self.r[t, c, b] = prob.add_variable(f"r_{ti}_{ci}_{b}", 0, 1)
                prob += self.r[t, c, b] <= self.x[c, b], f"r_on_{ti}_{ci}_{b}"
            prob += pulp.lpSum(self.r[t, c, b] for b in self.C[c]) == 1 - k, f"r_sum_{ti}_{ci}"
        # y[t, b]: t is kept and some consumer reads it on b (continuous, >= each kept reader on b)
        for b in sorted({b for c in self.cons_sorted[t] for b in self.C[c]}):
            if b == host and ctx.is_output[t]:
                continue  # a kept graph output is written back anyway: readers on the host need no copy
            self.y[t, b] = yb = prob.add_variable(f"y_{ti}_{b}", 0, 1)
            prob += yb <= k, f"y_le_k_{ti}_{b}"
            for c in self.cons_sorted[t]:
                if b in self.C[c]:
                    prob += yb >= self.x[c, b] - self.r[t, c, b], f"y_ge_{ti}_{self.oi[c]}_{b}"
            # v[t, a, b]: the copy on b comes from the producer's device a (a transportation form:
            # the copies sum to y and each is at most q, so v = q[t, a] AND y[t, b] when integral)
            for a in self.A[t]:
                self.v[t, a, b] = prob.add_variable(f"v_{ti}_{a}_{b}", 0, 1)
                prob += self.v[t, a, b] <= self.q[t, a], f"v_le_q_{ti}_{a}_{b}"
            prob += pulp.lpSum(self.v[t, a, b] for a in self.A[t]) == yb, f"v_sum_{ti}_{b}"

    def _memory(self, budget: dict[str, float]) -> None:
        """The memory plan: resident weights + kept tensors + kept copies within each device's budget."""
        pulp, ctx = self.pulp, self.ctx
        for d, cap in budget.items():
            terms = [ctx.weight[o] * v for (o, dd), v in self.wr.items() if dd == d]
            for (t, a), q in self.q.items():
                if a == d:
                    terms.append(ctx.size[t] * q)
            for (t, a, b), v in self.v.items():
                if b == d and a != d:
                    terms.append(ctx.size[t] * v)
            if terms:
                self.prob += pulp.lpSum(terms) <= max(cap, 0.0), f"memory_{d}"

    # ------------------------------------------------------------------ total latency
    def _total_latency(self) -> None:
        pulp, ctx = self.pulp, self.ctx
        host = ctx.host
        xf = ctx.xfer
        u = self.unit
        T = []
        for (o, d), x in self.x.items():
            T.append(ctx.comp(o, d) / u * x)
            if (o, d) in self.wr:
                c = xf(ctx.weight[o], host, d) / u
                T.append(c * x - c * self.wr[o, d])
        for t in ctx.size:
            s = ctx.size[t]
            if s <= 0:
                continue
            if t not in self.k:  # produced, never read, size > 0: only a write-back
                continue
            for a in self.A[t]:
                if a == host:
                    continue
                wb = xf(s, a, host) / u
                # written back when not kept; a kept graph output is written back as well
                T.append(wb * (self._xp(t, a) if ctx.is_output[t] else self._xp(t, a) - self.q[t, a]))
            for (tt, c, b), r in self.r.items():
                if tt == t and b != host:
                    T.append(xf(s, host, b) / u * r)  # not kept: every reader off the host copies for itself
            for (tt, a, b), v in self.v.items():
                if tt == t and a != b:
                    T.append(xf(s, a, b) / u * v)  # kept: one copy per reading device, from the producer's
        self.prob += pulp.lpSum(T), "total_latency"
        self.obj_expr = pulp.lpSum(T)

    # ------------------------------------------------------------------ makespan
    def _makespan(self, ub: float) -> None:
        pulp, ctx, prob = self.pulp, self.ctx, self.prob
        host = ctx.host
        u = self.unit
        tr = ctx.cost.transfer_s
        horizon = ub / u * 1.001 + 1e-6
        # big-M: any time plus the longest transfer that fits under the horizon (an inactive transfer's
        # hops may sit anywhere below it, so the terms they switch off must stay slack even then);
        # a transfer longer than the horizon can never happen in a mapping this good: it is ruled out
        bigm = 2 * horizon + 1
        add = prob.add_variable
        devices = list(ctx.devices)
        cnt = [0]

        def var(prefix: str):
            cnt[0] += 1
            return add(f"{prefix}_{cnt[0]}", 0, horizon)

        C = var("makespan")
        S = {o: var("S") for o in ctx.order}
        E = {o: S[o] + pulp.lpSum(ctx.comp(o, d) / u * self.x[o, d] for d in self.C[o]) for o in ctx.order}
        lane_last: dict[str, Any] = {}
        lane_load: dict[str, list] = {}

        def job(hops: list[tuple[str, str, str]], nbytes: float, release, act) -> Any:
            """One transfer: its hops on their lanes, issued now; returns the arrival (an expression)."""
            if sum(tr(nbytes, a, b) for a, b, _ in hops) / u > horizon:
                prob.addConstraint(act <= 0)
                return 0
            t_prev = None
            for a, b, lane in hops:
                dur = tr(nbytes, a, b) / u
                T = var("T")
                if t_prev is None:
                    if release is not None:
                        prob.addConstraint(T >= release - bigm * (1 - act))
                else:
                    prob.addConstraint(T >= t_prev - bigm * (1 - act))
                lane_load.setdefault(lane, []).append(dur * act)
                if ctx.contention:
                    L0 = lane_last.get(lane)
                    L1 = var("L")
                    if L0 is not None:
                        prob.addConstraint(T >= L0 - bigm * (1 - act))
                        prob.addConstraint(L1 >= L0)
                    prob.addConstraint(L1 >= T + dur - bigm * (1 - act))
                    lane_last[lane] = L1
                prob.addConstraint(C >= T + dur - bigm * (1 - act))
                t_prev = T + dur
            return t_prev

        # F[d]: device d's free time after the ops processed so far (a chain, one link per op)
        F = {d: None for d in devices}
        H: dict[str, Any] = {}  # time each tensor is on the host (written back, or produced there)
        Cache: dict[tuple[str, str], Any] = {}  # time a kept copy reached device b
        for t in ctx.size:
            if ctx.producer[t] is None:
                H[t] = 0
        for o in ctx.order:
            oi = self.oi[o]
            for d in self.C[o]:
                if F[d] is not None:
                    prob += S[o] >= F[d] - bigm * (1 - self.x[o, d]), f"queue_{oi}_{d}"
            # weight fetch, released when the device is free (no prefetch)
            for d in self.C[o]:
                if (o, d) in self.wr or (ctx.weight[o] > 0 and d != host):
                    act = self.x[o, d] - self.wr[o, d] if (o, d) in self.wr else self.x[o, d]
                    arr = job(ctx.hops(host, d), ctx.weight[o], F[d], act)
                    prob += S[o] >= arr - bigm * (1 - act)
            for t in ctx.inputs[o]:
                p = ctx.producer[t]
                if p is not None:
                    prob += S[o] >= E[p], f"dep_{self.ti[t]}_{oi}"
                if t not in self.k:  # size 0: nothing moves
                    continue
                s = ctx.size[t]
                earlier = [c for c in self.cons_sorted[t] if self.oi[c] < oi]
                for b in self.C[o]:
                    r = self.r[t, o, b]
                    sk = self.x[o, b] - r  # kept and read on b
                    if b == host:
                        # not kept (or a kept graph output): read the host's copy once it is there
                        if p is not None:
                            prob += S[o] >= H.setdefault(t, var("H")) - bigm * (1 - (r if not ctx.is_output[t] else self.x[o, b]))
                    else:
                        # not kept: copy host -> b, for this reader alone, once the host has it
                        rel = H.setdefault(t, var("H")) if p is not None else 0
                        arr = job(ctx.hops(host, b), s, rel, r)
                        prob += S[o] >= arr - bigm * (1 - r)
                    if b == host and ctx.is_output[t]:
                        continue
                    # kept: the first reader on b copies from the producer's device, later ones wait for it
                    f = add(f"f_{self.ti[t]}_{oi}_{b}", 0, 1)
                    prob += f <= sk
                    for c2 in earlier:
                        if b in self.C[c2]:
                            prob += f <= 1 - (self.x[c2, b] - self.r[t, c2, b])
                    prob += f >= sk - pulp.lpSum(self.x[c2, b] - self.r[t, c2, b] for c2 in earlier if b in self.C[c2])
                    cache = Cache.setdefault((t, b), var("K"))
                    prob += S[o] >= cache - bigm * (1 - (sk - f))
                    for a in self.A[t]:
                        if a == b:
                            continue
                        e = add(f"e_{self.ti[t]}_{oi}_{a}_{b}", 0, 1)
                        prob += e >= self.q[t, a] + f - 1
                        prob += e <= self.q[t, a]
                        prob += e <= f
                        rel = E[p] if p is not None else 0
                        arr = job(ctx.hops(a, b), s, rel, e)
                        prob += S[o] >= arr - bigm * (1 - e)
                        prob += cache >= arr - bigm * (1 - e)
            for d in self.C[o]:
                nf = var("F")
                if F[d] is not None:
                    prob += nf >= F[d]
                prob += nf >= E[o] - bigm * (1 - self.x[o, d])
                F[d] = nf
            prob += C >= E[o]
            for t in ctx.outputs[o]:
                if t not in self.k:
                    continue
                Ht = H.setdefault(t, var("H"))
                for a in self.C[o]:
                    if a == host:
                        prob += Ht >= E[o] - bigm * (1 - self.x[o, a])
                        continue
                    act = self.x[o, a] if ctx.is_output[t] else self.x[o, a] - self.q[t, a]
                    arr = job(ctx.hops(a, host), ctx.size[t], E[o], act)
                    prob += Ht >= arr - bigm * (1 - act)
        # valid inequalities that tighten the relaxation: a device runs its ops (and waits for their
        # weights) one after the other, and a link direction carries its transfers one at a time
        for d in devices:
            load = [ctx.comp(o, d) / u * self.x[o, d] for o in ctx.order if d in self.C[o]]
            load += [ctx.xfer(ctx.weight[o], host, d) / u * (self.x[o, d] - self.wr[o, d])
                     for o in ctx.order if (o, d) in self.wr]
            if load:
                prob += C >= pulp.lpSum(load), f"device_load_{d}"
        if ctx.contention:
            for i, load in enumerate(lane_load.values()):
                prob += C >= pulp.lpSum(load), f"lane_load_{i}"
        prob += C, "makespan"
        self.obj_expr = C

    # ------------------------------------------------------------------ warm start and solution
    def set_start(self, st: State) -> None:
        for (o, d), x in self.x.items():
            x.setInitialValue(1 if st.device[o] == d else 0)
        for (o, d), w in self.wr.items():
            w.setInitialValue(1 if st.device[o] == d and o in st.w_res else 0)
        for t, k in self.k.items():
            k.setInitialValue(1 if t in st.t_res else 0)

    def solution(self) -> State:
        st = State()
        for (o, d), x in self.x.items():
            if (x.varValue or 0) > 0.5:
                st.device[o] = d
        for (o, d), w in self.wr.items():
            if (w.varValue or 0) > 0.5 and st.device.get(o) == d:
                st.w_res.add(o)
        for t, k in self.k.items():
            if (k.varValue or 0) > 0.5:
                st.t_res.add(t)
        return st


def build_mapping_ilp(graph: OpGraph, system: System, *, objective: str = "total_latency", cost: CostModel | None = None,
                      memory_fraction: float = 1.0, upper_bound_s: float | None = None, contention: bool = True):
    """The PuLP problem :func:`map_ilp` solves (times in seconds), for inspection: ``(problem, model)``.

    ``upper_bound_s`` bounds every time of the makespan model (default: the best single-device
    mapping's makespan); a mapping slower than it is not in the model.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> prob, _ = build_mapping_ilp(chain(3), toy_system())
    >>> prob.numVariables() > 0
    True
    """
    require_objective(objective)
    ctx = Ctx(graph, system, cost, contention=contention)
    ctx.require_support()
    budget = plan_budget(ctx, memory_fraction)
    if upper_bound_s is None:  # the makespan model bounds its times by a known mapping's
        upper_bound_s = min(ctx.simulate(best_residency(ctx, dev, budget))[0]
                            for _, dev, _ in single_device_states(ctx, locality=False)) if ctx.order else 0.0
    m = _Model(ctx, objective, budget, 1.0, upper_bound_s)
    return m.prob, m


def _highs(time_limit_s: float, warm: bool, threads: int):
    import pulp

    from ..memory.ilp import highs_warm_class  # PuLP 3.3 does not hand HiGHS a warm start; this does

    cls = highs_warm_class() if warm else pulp.HiGHS
    # tight tolerances: big-M rows must not be relaxed by a binary's integrality slack
    return cls(msg=False, timeLimit=time_limit_s, gapRel=0.0, gapAbs=1e-7, threads=threads,
               mip_feasibility_tolerance=1e-9, primal_feasibility_tolerance=1e-9)


def _cbc(time_limit_s: float, warm: bool, threads: int):
    import pulp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, gapRel=0.0, gapAbs=1e-7, warmStart=warm,
                                 threads=threads)


#: name -> ``f(time_limit_s, warm, threads)``: the PuLP solver :func:`map_ilp` runs
SOLVERS = {"highs": _highs, "cbc": _cbc}


def map_ilp(graph: OpGraph, system: System, *, objective: str = "total_latency", time_limit_s: float = 60.0,
            cost: CostModel | None = None, solver: str | None = None, warm_start: bool = True,
            warm_evals: int = 20_000, memory_fraction: float = 1.0, threads: int = 1,
            contention: bool = True) -> MappingResult:
    """The optimal mapping (placement and residency) by a MILP, or the best found in ``time_limit_s``.

    **What it optimises:** ``objective`` exactly as :func:`hetsched.evaluate` reports it:
    ``"total_latency"`` (the patent's system total latency) or ``"makespan"`` (in the evaluator's
    default op order). See the module docstring for the model.

    Parameters
    ----------
    time_limit_s : float
        Wall-time budget of the whole call (warm start, build and solve).
    solver : {"highs", "cbc"}, optional
        HiGHS (highspy) by default; PuLP's bundled CBC when highspy is missing or asked for.
    warm_start : bool
        Start the solver from :func:`map_search`'s mapping (``warm_evals`` trials) and fall back to it.
    memory_fraction : float
        Share of each device's memory the plan may use.

    Returns
    -------
    MappingResult
        ``status``: ``optimal``, ``feasible`` or ``fallback``. ``ilp`` (:class:`~hetsched.results.SolverRun`):
        the solver's ``status`` (``optimal``, ``feasible``, ``no solution``, ``skipped`` for an
        empty graph), ``bound`` (a proven lower bound on the objective, in seconds, or ``None``),
        ``gap`` (``(value - bound) / value`` for the mapping returned), ``incumbent`` (the solver's
        own figure), ``solver``, ``model`` (the objective), ``time_limit_s`` (what the solver had
        left), ``build_s``, ``solve_s``, ``n_vars``, ``n_constraints``, ``warm_start``, ``note``.
        ``metrics``: the evaluator's, plus ``warm_<objective>_s``, ``ilp_runtime_s`` and
        ``memory_plan_binds`` (1 when the memory plan could cut off a mapping).
        Steps: ``warm_start`` (the heuristic mapping, with its ``delta``), ``solve`` (the change to
        the solver's mapping, accepted when it is better).

    Raises
    ------
    HetschedError
        Unknown objective or solver, or a non-positive time limit.
    UnsupportedOpError, CapacityError
        An op no device runs, or whose working set fits no device that runs it.
    """
    t0 = time.perf_counter()
    require_objective(objective)
    if not time_limit_s or not time_limit_s > 0:
        raise HetschedError(f"time_limit_s must be positive, got {time_limit_s!r}", field="time_limit_s")
    solver = pick_solver(solver)
    ctx = Ctx(graph, system, cost, contention=contention)
    ctx.require_support()
    log = StepLog()
    params: dict[str, Any] = {"objective": objective, "time_limit_s": time_limit_s, "solver": solver,
                              "warm_start": warm_start, "memory_fraction": memory_fraction, "contention": contention}
    if not ctx.order:
        r = finish(ctx, State(), log, phase="ilp", params=params, initial_state=EMPTY_STATE)
        return replace(r, status="optimal", ilp=SolverRun("skipped", solver=solver, model=objective,
                                                          note="empty graph: nothing to solve"))
    budget = plan_budget(ctx, memory_fraction)

    def score(st: State) -> float:
        return ctx.score(st, objective)

    if warm_start:
        w = map_search(graph, system, objective=objective, cost=cost, max_evals=warm_evals, memory_fraction=memory_fraction,
                       contention=contention, time_limit_s=time_limit_s / 4)
        warm = State(dict(w.placement.device), set(w.placement.weights_resident), set(w.placement.tensors_resident))
        name = "map_search"
    else:  # no start for the solver, but a mapping to bound the times by and to fall back to
        warm = min((best_residency(ctx, dev, budget) for _, dev, _ in single_device_states(ctx, locality=False)),
                   key=score)
        name = "fastest_single_device"
    warm_v = score(warm)
    log.add("warm_start", name, None, warm_v, True,
            f"{'warm start' if warm_start else 'fallback (not given to the solver)'}: {name}'s mapping, "
            f"{objective.replace('_', ' ')} {warm_v * 1e3:.4g} ms",
            diff(State(), warm), data={"phase": "ilp", "metric": objective})
    # the solver's start must fit the memory plan: if the heuristic's residency does not, its placement
    # with the plan's residency does (and its objective bounds every time in the makespan model)
    start = warm if MemoryPlan(ctx, warm, budget).within() else best_residency(ctx, warm.device, budget)
    start_v = score(start)
    unit = max(start_v, 1e-15) / 1000.0
    tb = time.perf_counter()
    m = _Model(ctx, objective, budget, unit, start_v)
    if warm_start:
        m.set_start(start)
    build_s = time.perf_counter() - tb
    left = max(1.0, time_limit_s - (time.perf_counter() - t0))
    slv = SOLVERS[solver](left, warm_start, threads)
    import pulp

    ts = time.perf_counter()
    with warnings.catch_warnings(), quiet_stdout():
        warnings.simplefilter("ignore")
        m.prob.solve(slv)
    solve_s = time.perf_counter() - ts
    proven = m.prob.sol_status == pulp.LpSolutionOptimal
    has_sol = m.prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    bound = None
    if solver == "highs" and getattr(m.prob, "solverModel", None) is not None:
        try:
            info = m.prob.solverModel.getInfo()
            if info.mip_dual_bound == info.mip_dual_bound and abs(info.mip_dual_bound) < 1e300:
                bound = max(0.0, float(info.mip_dual_bound) * unit)
        except Exception:  # pragma: no cover - older highspy
            pass
    obj = pulp.value(m.prob.objective) if has_sol else None
    ilp_obj = float(obj) * unit if obj is not None else None
    if proven and bound is None:
        bound = ilp_obj
    st = m.solution() if has_sol else None
    if st is not None and len(st.device) != len(ctx.order):  # pragma: no cover - a partial answer
        st = None
    cands = [(score(x), i, x) for i, x in enumerate((st, start, warm)) if x is not None]
    if not cands:
        raise HetschedError(f"the {solver} solver found no mapping in {left:.3g} s (status "
                            f"{pulp.LpStatus[m.prob.status]}) and there is no warm start", field="time_limit_s")
    value, which, final = min(cands, key=lambda c: (c[0], c[1]))
    if which == 0:
        status = "optimal" if proven else "feasible"
    else:
        status = "fallback"
    said = "optimal" if proven else "feasible" if has_sol else "no solution"
    notes = [] if has_sol else [f"PuLP status {pulp.LpStatus[m.prob.status]}, no solution"]
    if proven and start_v is not None and ilp_obj is not None and ilp_obj > start_v * (1 + 1e-6):
        # a "proof" above a mapping the model admits is numerical trouble: do not claim it
        status, bound, said = "fallback" if which else "feasible", None, "feasible"
        notes.append("its proof lies above the warm start's value (numerical trouble): not trusted")
    if final is warm and start is not warm and bound is not None:
        bound = None  # the heuristic's residency is outside the plan: the solver's bound is not about it
        notes.append("the mapping returned keeps more than the memory plan: the solver's bound is not about it")
    ref = warm
    st_v = score(st) if st is not None else None
    if final is not ref:
        d = diff(ref, final)
        log.add("solve", solver, warm_v, value, True,
                f"{solver}: {status}, {objective.replace('_', ' ')} {value * 1e3:.4g} ms"
                + (f" (bound {bound * 1e3:.4g} ms)" if bound is not None else ""), d,
                data={"phase": "ilp", "metric": objective})
    else:
        log.add("solve", solver, warm_v, st_v, False,
                f"{solver} gave nothing better than the warm start in {left:.3g} s (status "
                f"{pulp.LpStatus[m.prob.status]}): the warm start is returned", {},
                data={"phase": "ilp", "metric": objective})
    binds = any(sum(ctx.weight[o] for o in ctx.order if d in m.C[o]) + sum(ctx.size.values()) > budget[d]
                for d in budget)
    extra = {f"warm_{objective}_s": warm_v, "memory_plan_binds": float(binds), "ilp_runtime_s": time.perf_counter() - t0}
    r = finish(ctx, final, log, phase="ilp", params={**params, "warm_start_in_plan": start is warm},
               initial_state=EMPTY_STATE, extra_metrics=extra)
    if any(s.action == "evict" for s in r.steps) and status == "optimal":  # the evaluator's peak overflowed the plan
        status = "feasible"
    value = r.metrics[f"{objective}_s"]  # after any eviction: the gap is the returned mapping's
    gap = (max(0.0, value - bound) / value if value > 0 else 0.0) if bound is not None else None
    run = SolverRun(said, bound=bound, gap=gap, incumbent=ilp_obj, solver=solver, model=objective, time_limit_s=left,
                    build_s=build_s, solve_s=solve_s, n_vars=m.prob.numVariables(), n_constraints=m.prob.numConstraints(),
                    warm_start=name if warm_start else None, note="; ".join(notes))
    return replace(r, status=status, ilp=run)
