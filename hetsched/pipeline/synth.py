"""Schedule synthesis: the best per-rank order of F, B (or I/W) for these stage costs and memory caps.

Every named schedule (1F1B, interleaved, ZB-H1/H2, ZB-V, DualPipeV) is a fixed pattern designed
for equal stage costs; on a heterogeneous split it leaves bubbles a search can fill.
:func:`synthesize` searches the orders of the Action IR itself, with the simulator as its only
model of time (:class:`~hetsched.pipeline.problem.Problem` prices every action with
:func:`~hetsched.pipeline.simulate.price_actions` and times an order with the simulator's walk),
and returns a :class:`SynthesisResult`, a :class:`~hetsched.pipeline.PipelineResult` of the
schedule it found, re-simulated by :func:`~hetsched.pipeline.simulate`.

Method
------
1. **Warm starts.** Every named schedule that applies to ``(p, v, m)`` and the placement
   (:func:`named_schedules`) is priced; those within the memory cap are candidates. So the
   result is never worse than the best of them.
2. **List scheduling** (Graham's list scheduling with critical-path priorities, as in HEFT,
   Topcuoglu et al. 2002, here on the pipeline's action graph): the rank that can start something
   earliest commits one of the actions it can start then, chosen by a priority rule; a portfolio
   of rules (critical path first or backward first; weight gradients eager, in idle time only,
   or only where they fit before the next known input: *memory-aware W deferral*, since a
   deferred ``W`` keeps its activation; a cap on in-flight micro-batches per rank) is run and
   each schedule priced. Forwards that would exceed the memory cap are not eligible.
3. **Local search** from the best candidates: moves on the *critical path* (the chain of actions
   and waits that sets the makespan): swap the first two or last two actions of a run of
   critical actions on one rank (the N5 neighbourhood of job-shop search, Nowicki and Smutnicki
   1996), move an action of such a run to its start or end, and move a later action of another
   class into an idle gap of a critical rank. A move is kept when it lowers the makespan, or keeps
   it and lowers the sum of the ranks' finishing times (a plateau move that still goes downhill);
   every try is a logged step.
4. **Exact** (``method="milp"``, or ``"auto"`` on small instances): the MILP of
   :mod:`.synth_milp`, warm-started from step 3's schedule, proves the optimum or returns the
   best found with its bound and gap when its time limit ends.

Weight gradients and activations: a rank's activation memory is what
:func:`~hetsched.pipeline.peak_in_flight` counts in bytes (a forward holds its stage's
``held_bytes`` until the ``B`` or the ``W`` of that micro-batch ends), the same peak the simulator
reports; ``memory_cap_bytes`` bounds it per rank.

Examples
--------
>>> from hetsched.pipeline import synthesize
>>> r = synthesize({"F": [1.0, 1.5, 1.0, 1.0], "B": [2.0, 3.0, 2.0, 2.0]}, p=4, v=1, m=8, method="heuristic")
>>> r.metrics["makespan_s"] <= r.metrics["best_named_makespan_s"], r.status, r.metrics["makespan_s"] >= r.bound
(True, 'optimal', True)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import CapacityError, ScheduleError
from ..results import Result, SolverRun, StepLog
from .ir import B, F, I, KINDS, W, Schedule, split_backward as _split, merge_backward as _merge
from .problem import TOL, Problem, bound_terms, lower_bound
from .simulate import PipelineResult, simulate

__all__ = ["synthesize", "SynthesisResult", "named_schedules", "exhaustive_synthesis", "METHODS", "STATUSES",
           "LIST_POLICIES"]

METHODS = ("auto", "heuristic", "milp", "exhaustive")
#: ``optimal``: proven (the MILP proved it, or the makespan meets the lower bound); ``time_limit``:
#: the MILP stopped at its limit (the best schedule found is returned with its gap); ``heuristic``:
#: no proof was sought, the gap to :func:`~hetsched.pipeline.lower_bound` is stated.
STATUSES = ("optimal", "time_limit", "heuristic")

#: Instances ``method="auto"`` hands to the MILP: at most this many ranks, micro-batches and actions.
AUTO_MILP = {"p": 4, "m": 8, "n": 200}

#: The list-scheduling portfolio: (priority, weight-gradient rule, in-flight factor).
LIST_POLICIES: tuple[tuple[str, str, float], ...] = tuple(
    (prio, w, lim) for prio in ("critical_path", "backward_first", "oldest_first") for w in ("eager", "fill", "fit")
    for lim in (1.0, 1.5, 2.0, math.inf))


# ---- candidates -----------------------------------------------------------------------------------

def named_schedules(p: int, v: int, m: int, *, placement: str = "loop", split_backward: bool = True) -> dict[str, Schedule]:
    """The named schedules that apply to ``(p, v, m)`` on a placement: the warm starts and the lineup
    every synthesis is compared with.

    ``loop``, ``v == 1``: GPipe, 1F1B, and with a split backward ZB-H1 and ZB-H2. ``loop``,
    ``v > 1``: looped BFS, interleaved FthenB, interleaved 1F1B under every grouping that accepts
    ``m`` and, split, interleaved zero bubble (same). ``v`` placement (``v == 2``): ZB-V and, for
    ``m >= 2p``, DualPipeV (split backward only: both run ``I``/``W``). Without a split backward a
    schedule that runs ``I``/``W`` is left out (it is not in the space searched).

    >>> sorted(named_schedules(4, 1, 8))
    ['1f1b', 'gpipe', 'zb_h1', 'zb_h2']
    >>> sorted(named_schedules(2, 2, 4, placement="v"))
    ['dualpipev', 'zbv']
    """
    from .schedules import GROUPINGS, make_schedule

    out: dict[str, Schedule] = {}

    def add(name: str, **kw: Any) -> None:
        try:
            s = make_schedule(name, p, v, m, **kw)
        except ScheduleError:  # a grouping or a schedule that refuses this m (torch's own rules)
            return
        if s.v == v and s.style == placement and s.name not in out:
            out[s.name] = s

    if placement == "loop" and v == 1:
        for name in ("gpipe", "1f1b") + (("zb_h1", "zb_h2") if split_backward else ()):
            add(name)
    elif placement == "loop":
        add("looped_bfs")
        add("interleaved_fthenb")
        for g in sorted(GROUPINGS):
            add("interleaved_1f1b", grouping=g)
            if split_backward:
                add("interleaved_zero_bubble", grouping=g)
    elif placement == "v" and v == 2 and split_backward:
        add("zbv")
        add("dualpipev")
    return out


def _as_instance(pb: Problem, s: Schedule) -> Schedule:
    """A named schedule in the instance's action set: ``B`` split into ``I`` then ``W`` in place,
    or ``I`` and ``W`` merged into one ``B`` (at the ``I``), as the instance asks."""
    has_b = bool((s.kind == B).any())
    has_iw = bool(((s.kind == I) | (s.kind == W)).any())
    if pb.split and has_b:
        # only the B's: DualPipeV mixes B with I/W
        per = []
        for r in range(s.p):
            sl = s.rank_slice(r)
            st, kd, mb = s.stage[sl], s.kind[sl], s.microbatch[sl]
            rep = np.where(kd == B, 2, 1)
            st2, mb2, kd2 = np.repeat(st, rep), np.repeat(mb, rep), np.repeat(kd, rep).astype(np.int8)
            last = np.cumsum(rep) - 1
            kd2[last[kd == B] - 1] = I
            kd2[last[kd == B]] = W
            per.append((st2, kd2, mb2))
        return Schedule.from_arrays(s.p, s.v, s.m, s.name, per, style=s.style)
    if not pb.split and has_iw:
        return _merge(s).with_name(s.name)
    return s


@dataclass
class _Best:
    """The search's incumbent: orders, makespan, secondary key, where it came from."""

    orders: list
    makespan: float
    key2: float
    label: str


def _key2(pb: Problem, orders: Sequence[Sequence[int]], end: np.ndarray) -> float:
    """Secondary objective: the sum of the ranks' finishing times (lower = the work ends earlier)."""
    return float(sum(end[o[-1]] for o in orders if len(o)))


def _text(pb: Problem, a: int) -> str:
    return f"{pb.stage[a]}{KINDS[pb.kind[a]]}{pb.mb[a]}"


def _orders_text(pb: Problem, orders: Sequence[Sequence[int]]) -> list[str]:
    return [" ".join(_text(pb, a) for a in o) for o in orders]


# ---- list scheduling ------------------------------------------------------------------------------

class _Lister:
    """Graham-style list scheduling on the action graph (see the module docstring, step 2)."""

    def __init__(self, pb: Problem) -> None:
        self.pb = pb
        self.tail = pb.tails().tolist()
        self.dep = pb.dep.tolist()
        self.dur = pb.dur.tolist()
        self.delay = pb.delay.tolist()
        self.mem = pb.mem.tolist()
        self.kind = pb.kind.tolist()
        self.classes = [c.tolist() for c in pb.classes]
        self.mb = pb.mb.tolist()
        self.stage = pb.stage.tolist()
        self.cap = pb.cap.tolist()
        where = pb.canonical.stage_to_rank
        S = pb.n_stages
        self.first = [int(np.flatnonzero(where == r).min()) for r in range(pb.p)]
        # micro-batches a rank may hold at once with factor 1: 1F1B's count (one per stage from its first to the last)
        self.depth = [(S - f) / pb.v for f in self.first]
        held = pb.costs.arrays(S, pb.v)["held"]
        # what one micro-batch holds on a rank once it has run through all the rank's stages
        self.footprint = [float(held[where == r].sum()) for r in range(pb.p)]

    def run(self, priority: str, wrule: str, factor: float, log: list | None = None, reserve: bool = False) -> list[list[int]] | None:
        """One list schedule (``None``: the rule deadlocks under the memory caps).

        A rank *admits* a micro-batch with the forward of its first stage: at most ``factor`` times
        1F1B's count of micro-batches are admitted and not yet released, and with ``reserve`` the
        rank admits one only if its whole footprint (all the rank's stages) fits beside what it
        holds and has reserved: then no admitted micro-batch ever waits for memory (the oldest one
        always progresses, so the rule cannot deadlock), at the price of idle memory.
        """
        pb = self.pb
        p, m, v = pb.p, pb.m, pb.v
        dep, dur, delay, mem, kind, tail = self.dep, self.dur, self.delay, self.mem, self.kind, self.tail
        classes = self.classes
        rank_classes = pb.rank_classes
        nxt = [0] * len(classes)
        endt = [-1.0] * pb.n
        free = [0.0] * p
        held = [0.0] * p
        resv = [0.0] * p
        flight = [0] * p
        released = [[0] * m for _ in range(p)]
        first, foot = self.first, self.footprint
        limit = [math.inf if math.isinf(factor) else max(1, math.ceil(factor * d)) for d in self.depth]
        cap = [c * (1 + TOL) + 1e-9 for c in self.cap]
        orders: list[list[int]] = [[] for _ in range(p)]
        left = pb.n
        back_first = priority == "backward_first"
        oldest = priority == "oldest_first"
        mbs, stage = self.mb, self.stage
        while left:
            best = None  # (start, rank, action, candidates)
            for r in range(p):
                cands = []
                for c in rank_classes[r]:
                    j = nxt[c]
                    if j >= m:
                        continue
                    a = classes[c][j]
                    d = dep[a]
                    if d >= 0:
                        e = endt[d]
                        if e < 0.0:
                            continue
                        rdy = e + delay[a]
                    else:
                        rdy = 0.0
                    if kind[a] == F:
                        if stage[a] == first[r]:  # admits a micro-batch
                            if flight[r] >= limit[r] or held[r] + resv[r] + (foot[r] if reserve else mem[a]) > cap[r]:
                                continue
                        elif not reserve and held[r] + mem[a] > cap[r]:
                            continue
                    cands.append((rdy if rdy > free[r] else free[r], a, rdy))
                if not cands:
                    continue
                t0 = min(x[0] for x in cands)
                now = [x for x in cands if x[0] <= t0 + 1e-12 * max(1.0, t0)]
                if wrule != "eager":
                    nonw = [x for x in now if kind[x[1]] != W]
                    if nonw:
                        now = nonw
                    elif wrule == "fit":
                        # a W now would delay a non-W input known to arrive before it ends: wait for that one
                        later = [x for x in cands if kind[x[1]] != W]
                        if later:
                            soon = min(later)
                            if soon[0] < t0 + dur[now[0][1]]:
                                now = [soon]
                                t0 = soon[0]
                if back_first:
                    pick = max(now, key=lambda x: (kind[x[1]] != F and kind[x[1]] != W if wrule != "eager" else kind[x[1]] != F,
                                                   tail[x[1]], -x[1]))
                elif oldest:
                    # depth first: the oldest micro-batch, backward before forward, the deeper stage first
                    pick = max(now, key=lambda x: (kind[x[1]] == W if wrule == "eager" else kind[x[1]] != W,
                                                   -mbs[x[1]], kind[x[1]] != F, stage[x[1]] if kind[x[1]] == F else -stage[x[1]]))
                else:
                    pick = max(now, key=lambda x: (kind[x[1]] == W if wrule == "eager" else False, tail[x[1]], -x[1]))
                if best is None or t0 < best[0] - 1e-12 * max(1.0, t0):
                    best = (t0, r, pick[1], cands)
            if best is None:
                return None  # every rank waits for memory another rank must free: this rule deadlocks here
            t0, r, a, cands = best
            if log is not None:
                log.append((r, a, t0, [(x[1], x[0]) for x in cands]))
            orders[r].append(a)
            nxt[pb.cls[a]] += 1
            endt[a] = t0 + dur[a]
            free[r] = endt[a]
            held[r] += mem[a]
            if kind[a] == F:
                if stage[a] == first[r]:
                    flight[r] += 1
                    if reserve:
                        resv[r] += foot[r] - mem[a]
                elif reserve:
                    resv[r] -= mem[a]
            elif kind[a] == B or kind[a] == W:
                released[r][mbs[a]] += 1
                if released[r][mbs[a]] == v:
                    flight[r] -= 1
            left -= 1
        return orders


# ---- local search ---------------------------------------------------------------------------------

def _critical_runs(pb: Problem, orders: list[list[int]], pos: dict[int, tuple[int, int]], start: np.ndarray,
                   end: np.ndarray, makespan: float) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """The critical path, as runs of consecutive actions on one rank, and the idle waits on it.

    Walks back from the action that ends last: an action was held up by its rank (it starts as the
    previous action of its rank ends) or by its input (it starts as its input arrives). Returns
    the runs (lists of ids in rank order) and the waits ``(rank, position)`` where a critical
    action started after an idle gap.
    """
    tol = 1e-9 * max(1.0, makespan)
    a = int(np.argmax(end))
    runs: list[list[int]] = [[a]]
    waits: list[tuple[int, int]] = []
    guard = pb.n + 1
    while guard:
        guard -= 1
        r, i = pos[a]
        prev = orders[r][i - 1] if i > 0 else -1
        if prev >= 0 and abs(start[a] - end[prev]) <= tol:
            runs[-1].append(prev)
            a = prev
            continue
        d = int(pb.dep[a])
        if d >= 0 and abs(start[a] - (end[d] + pb.delay[a])) <= tol:
            if prev >= 0 and start[a] > end[prev] + tol:
                waits.append((r, i))
            runs.append([d])
            a = d
            continue
        break
    return [run[::-1] for run in runs], waits


def _movable(pb: Problem, order: list[int], i: int, j: int) -> bool:
    """Whether the action at ``i`` may move to position ``j`` of the same rank (every action it
    passes is of another class and not its own forward, input gradient or weight gradient)."""
    a = order[i]
    ca, sa, ma = pb.cls[a], pb.stage[a], pb.mb[a]
    lo, hi = (j, i) if j < i else (i + 1, j + 1)
    for b in order[lo:hi]:
        if pb.cls[b] == ca or (pb.stage[b] == sa and pb.mb[b] == ma):
            return False
    return True


def _moves(pb: Problem, orders: list[list[int]], pos: dict[int, tuple[int, int]], start: np.ndarray, end: np.ndarray,
           makespan: float) -> list[tuple[str, int, int, int, str]]:
    """Candidate moves ``(name, rank, from, to, why)`` from the critical path, most promising first."""
    runs, waits = _critical_runs(pb, orders, pos, start, end, makespan)
    out: list[tuple[str, int, int, int, str]] = []
    seen: set[tuple[int, int, int]] = set()

    def add(name: str, r: int, i: int, j: int, why: str) -> None:
        if i != j and (r, i, j) not in seen and 0 <= j < len(orders[r]) and _movable(pb, orders[r], i, j):
            seen.add((r, i, j))
            out.append((name, r, i, j, why))

    for run in runs:
        if len(run) < 2:
            continue
        r, i0 = pos[run[0]]
        i1 = pos[run[-1]][1]
        where = f"rank {r} runs {len(run)} critical actions back to back ({_text(pb, run[0])} .. {_text(pb, run[-1])})"
        add("swap", r, i0, i0 + 1, f"{where}: swap its first two")
        add("swap", r, i1, i1 - 1, f"{where}: swap its last two")
        for k in range(i0 + 1, i1 + 1):
            add("move", r, k, i0, f"{where}: move {_text(pb, orders[r][k])} to its start")
        for k in range(i0, i1):
            add("move", r, k, i1, f"{where}: move {_text(pb, orders[r][k])} to its end")
    for r, i in waits:
        o = orders[r]
        why = f"rank {r} idles before {_text(pb, o[i])} on the critical path"
        # a later action that could run in the gap: the next of each other class on this rank
        seen_cls: set[int] = set()
        for k in range(i + 1, len(o)):
            c = int(pb.cls[o[k]])
            if c in seen_cls:
                continue
            seen_cls.add(c)
            add("fill", r, k, i, f"{why}: run {_text(pb, o[k])} in the gap")
        # or run the waiting action later, letting the rank go on with other work
        add("move", r, i, min(i + 1, len(o) - 1), f"{why}: run it one action later")
    return out


def _apply(orders: list[list[int]], r: int, i: int, j: int) -> list[list[int]]:
    new = list(orders)
    o = list(orders[r])
    a = o.pop(i)
    o.insert(j, a)
    new[r] = o
    return new


def _local_search(pb: Problem, best: _Best, log: StepLog, max_evals: int, deadline: float) -> tuple[_Best, int]:
    """First-improvement descent over critical-path moves (module docstring, step 3)."""
    evals = 0
    mk, start, end = pb.evaluate(best.orders)
    cur = _Best(best.orders, mk, _key2(pb, best.orders, end), best.label)
    tol = 1e-9 * max(1.0, cur.makespan)
    while evals < max_evals and time.perf_counter() < deadline:
        pos = {a: (r, i) for r, o in enumerate(cur.orders) for i, a in enumerate(o)}
        improved = False
        for name, r, i, j, why in _moves(pb, cur.orders, pos, start, end, cur.makespan):
            if evals >= max_evals or time.perf_counter() >= deadline:
                break
            new = _apply(cur.orders, r, i, j)
            act = _text(pb, cur.orders[r][i])
            subject = f"rank {r}: {act} {i} -> {j}"
            if not pb.rank_fits(r, new[r]):
                log.add(name, subject, cur.makespan, None, False, f"{why}; refused: rank {r} would hold more than its memory cap",
                        data={"rank": r, "from": i, "to": j, "phase": "search"})
                continue
            evals += 1
            try:
                mk, st, en = pb.evaluate(new)
            except ScheduleError:
                log.add(name, subject, cur.makespan, None, False, f"{why}; refused: the ranks would deadlock",
                        data={"rank": r, "from": i, "to": j, "phase": "search"})
                continue
            k2 = _key2(pb, new, en)
            better = mk < cur.makespan - tol or (mk <= cur.makespan + tol and k2 < cur.key2 - tol)
            if better:
                verdict = (f"kept: makespan {cur.makespan:.6g} -> {mk:.6g} s" if mk < cur.makespan - tol
                           else f"kept: same makespan, the ranks finish earlier in sum ({cur.key2:.6g} -> {k2:.6g} s)")
            else:
                verdict = f"undone: makespan {mk:.6g} s" + (" (no earlier finish either)" if mk <= cur.makespan + tol else "")
            log.add(name, subject, cur.makespan, mk, better, f"{why}; {verdict}",
                    delta={"rank": r, "order": _orders_text(pb, [new[r]])[0], "makespan_s": mk} if better else None,
                    data={"rank": r, "from": i, "to": j, "action": act, "phase": "search"})
            if better:
                cur = _Best(new, mk, k2, best.label)
                start, end = st, en
                improved = True
                break
        if not improved:
            break
    return cur, evals


# ---- the result -----------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, eq=False)
class SynthesisResult(PipelineResult):
    """Outcome of :func:`synthesize`: the schedule found, simulated, and how it was found.

    Everything a :class:`~hetsched.pipeline.PipelineResult` has (``schedule``, ``start_s``,
    ``end_s``, ``per_rank``, ``timeline``...: the simulator's run of the schedule found), plus:

    Attributes
    ----------
    status : {"optimal", "time_limit", "heuristic"}
        See :data:`STATUSES`.
    bound, gap : float
        ``metrics["bound_s"]``, a proven lower bound on the makespan (seconds: the MILP's when it
        ran, at least :func:`~hetsched.pipeline.lower_bound`), and ``metrics["gap"]``,
        ``(makespan - bound) / makespan`` (0 when proven optimal), read as typed attributes.
    method : str
        ``"heuristic"``, ``"milp"`` or ``"exhaustive"``.
    milp : SolverRun or None
        What the MILP said when one ran (:class:`~hetsched.results.SolverRun`: status, bound, gap,
        incumbent re-simulated, solver, size, solve time); ``solver`` reads its ``solver``.
    named : DataFrame
        Every named schedule tried as a warm start: ``label, makespan_s, peak_activation_bytes,
        fits`` (within the cap), ``gap`` (to ``bound``).
    steps : LazySteps
        The synthesis's decisions: ``bound``, ``warm_start`` (each named schedule), ``list``
        (each list-scheduling rule), ``choose`` (the winning rule's choices, one per action:
        the rank, the action, its start and the candidates it had), the local search's ``swap``,
        ``move`` and ``fill`` tries (before/after makespan, kept or undone and why), ``milp`` and
        ``result``. :meth:`replay` gives the incumbent after step ``k``: ``orders`` (per rank, in
        action text), ``makespan_s``, ``source`` and the order being built (``building``).

    ``metrics`` adds ``lower_bound_s`` (the analytic bound), ``bound_s``, ``gap``,
    ``best_named_makespan_s``, ``gain_vs_best_named`` (``1 - makespan / best named``),
    ``n_evaluations``, ``solve_s`` (the whole call) and, with the MILP, ``milp_binaries``.
    """

    status: str
    method: str
    milp: SolverRun | None = None
    named: pd.DataFrame = field(default_factory=pd.DataFrame, repr=False)

    # the numbers are stored once, in metrics; these read them as typed attributes
    bound = property(lambda self: float(self.metrics["bound_s"]), doc="A proven lower bound on the makespan (seconds).")
    gap = property(lambda self: float(self.metrics["gap"]), doc="``(makespan - bound) / makespan``.")

    @property
    def solver(self) -> str | None:
        """The MILP's solver (``milp.solver``), if one ran."""
        return self.milp.solver if self.milp is not None else None

    def _replay_start(self) -> dict[str, Any]:
        p = self.schedule.p
        return {"orders": [""] * p, "makespan_s": None, "source": None, "building": [[] for _ in range(p)], "phase": "start"}

    def _apply(self, state: dict[str, Any], step: Any) -> None:
        d = step.delta
        state["phase"] = step.data.get("phase", state["phase"]) if step.data else state["phase"]
        if step.action == "choose":
            state["building"][d["rank"]].append(d["action"])
        elif "orders" in d:
            state["orders"] = list(d["orders"])
            state["makespan_s"] = d["makespan_s"]
            state["source"] = d.get("source", state["source"])
            state["building"] = [[] for _ in state["building"]]
        elif "order" in d:
            state["orders"][d["rank"]] = d["order"]
            state["makespan_s"] = d["makespan_s"]

    def _replay(self, k: int) -> dict[str, Any]:
        return Result._replay(self, k)

    def __repr__(self) -> str:
        return (f"SynthesisResult({self.method}, {self.status}, p={self.schedule.p}, v={self.schedule.v}, m={self.schedule.m}; "
                f"makespan_s={self.metrics['makespan_s']:.4g}, bound={self.bound:.4g}, gap={self.gap:.3g})")


def _cap_of(name: str, costs: Any, p: int, v: int, m: int, placement: str | None, comm: Any) -> list[float]:
    """Per-rank caps equal to what named schedule ``name`` holds at its peak on these costs."""
    from .schedules import SCHEDULES, make_schedule

    if name not in SCHEDULES:
        raise ScheduleError(f"memory_cap_bytes={name!r}: give bytes, or the name of a schedule whose per-rank peak is the cap "
                            f"(one of {sorted(SCHEDULES)})", field="memory_cap_bytes")
    s = make_schedule(name, p, v, m)
    if s.v != v or (placement is not None and s.style != placement):
        raise ScheduleError(f"memory_cap_bytes={name!r}: {name} runs v={s.v} with the {s.style!r} placement, the instance "
                            f"is v={v}" + (f", {placement!r}" if placement else ""), field="memory_cap_bytes")
    return simulate(s, costs=costs, comm=comm, timeline=False).per_rank["peak_activation_bytes"].astype(float).tolist()


def _check_time_limit(t: Any) -> float:
    if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not (t > 0) or not math.isfinite(t):
        raise ScheduleError(f"time_limit_s must be a positive number of seconds, got {t!r}", field="time_limit_s")
    return float(t)


# ---- the entry point ------------------------------------------------------------------------------

def synthesize(costs: Any = None, *, p: int, v: int = 1, m: int, memory_cap_bytes: Any = None, split_backward: bool = True,
               time_limit_s: float = 10.0, method: str = "auto", placement: str | None = None, comm: Any = None,
               max_evals: int = 4000, solver: str | None = None) -> SynthesisResult:
    """The best schedule found for ``(p, v, m)`` on these costs, within the memory caps.

    Parameters
    ----------
    costs : StageCosts or mapping, optional
        Per-stage costs as :func:`~hetsched.pipeline.simulate` takes them (a graph-priced
        :class:`~hetsched.pipeline.StageCosts` from :func:`~hetsched.pipeline.stage_costs` fixes the
        placement and the link times).
    p, v, m : int
        Ranks, stages per rank, micro-batches.
    memory_cap_bytes : float, sequence of float or str, optional
        Per-rank cap on activation memory (one number for every rank, or one per rank), as
        :func:`~hetsched.pipeline.peak_in_flight` counts it with the costs' ``held_bytes``; or the
        name of a schedule (``"1f1b"``): each rank's cap is that schedule's peak on these costs.
    split_backward : bool
        Search orders of ``I`` and ``W`` (zero-bubble style) instead of full ``B``.
    time_limit_s : float
        Wall-clock budget of the whole call (default 10 s): the local search stops at it and the
        MILP gets what is left; when the MILP cannot prove the optimum in time the result is the
        best schedule found, ``status="time_limit"``, with the solver's bound and the gap.
    method : {"auto", "heuristic", "milp", "exhaustive"}
        ``"auto"``: the MILP on small instances (:data:`AUTO_MILP`), else the heuristic.
        ``"exhaustive"``: every order (tiny instances only, :func:`exhaustive_synthesis`).
    placement : {"loop", "v"}, optional
        Stage placement when the costs do not fix it (default ``"loop"``).
    comm : P2P or mapping, optional
        Link model in the numbers-only mode (non-blocking p2p; lock-step is refused).
    max_evals : int
        Local-search evaluations (a budget, so a run is deterministic unless ``time_limit_s`` ends first).
    solver : {"highs", "cbc"}, optional
        MILP solver (HiGHS by default, CBC when highspy is missing).

    Returns
    -------
    SynthesisResult
        A :class:`~hetsched.pipeline.PipelineResult` of the schedule (re-simulated), never
        slower than the best named schedule within the cap, with ``status``, ``bound``, ``gap``.

    Raises
    ------
    ScheduleError
        Bad ``p``, ``v``, ``m``, costs, placement, method or time limit; lock-step ``comm``.
    CapacityError
        A rank's cap is below one micro-batch of its stages, or no schedule found fits the caps.

    Under 1F1B's memory, an order with split backwards proven optimal by the MILP, 15% faster than 1F1B:

    >>> r = synthesize({"F": [1.0, 1.2, 0.8], "B": 2.0, "activation_bytes": 1.0}, p=3, m=4, memory_cap_bytes="1f1b",
    ...                method="milp", time_limit_s=20)
    >>> r.status, round(r.metrics["makespan_s"], 6), round(r.bound, 6), r.solver, round(r.metrics["best_named_makespan_s"], 6)
    ('optimal', 15.4, 15.4, 'highs', 18.2)
    """
    t0 = time.perf_counter()
    if method not in METHODS:
        raise ScheduleError(f"unknown synthesis method {method!r}; choose one of {METHODS}", field="method")
    time_limit_s = _check_time_limit(time_limit_s)
    if isinstance(max_evals, bool) or not isinstance(max_evals, (int, np.integer)) or max_evals < 0:
        raise ScheduleError(f"max_evals must be a non-negative integer, got {max_evals!r}", field="max_evals")
    if isinstance(memory_cap_bytes, str):
        memory_cap_bytes = _cap_of(memory_cap_bytes, costs, p, v, m, placement, comm)
    pb = Problem.build(costs, p=p, v=v, m=m, placement=placement, split_backward=split_backward, comm=comm,
                       memory_cap_bytes=memory_cap_bytes)
    if method == "auto":
        method = "milp" if (pb.p <= AUTO_MILP["p"] and pb.m <= AUTO_MILP["m"] and pb.n <= AUTO_MILP["n"]) else "heuristic"
    deadline = t0 + time_limit_s
    log = StepLog()
    lb = lower_bound(problem=pb, p=pb.p, v=pb.v, m=pb.m)
    terms = bound_terms(problem=pb, p=pb.p, v=pb.v, m=pb.m)
    crit = int(terms["bound_s"].idxmax())
    log.add("bound", "lower bound", None, lb, True,
            f"no schedule is faster than {lb:.6g} s: rank {crit} is busy {terms.loc[crit, 'busy_s']:.6g} s, cannot start before "
            f"{terms.loc[crit, 'head_s']:.6g} s and leaves a drain of {terms.loc[crit, 'tail_s']:.6g} s "
            f"({terms.loc[crit, 'w_s']:.6g} s of weight gradients can run in it), or one micro-batch's critical path",
            data={"phase": "bound", "terms": terms.to_dict("list")})
    best: _Best | None = None
    evals = 0

    def offer(label: str, orders: list[list[int]], action: str, why: str, data: dict | None = None) -> None:
        nonlocal best, evals
        evals += 1
        mk, _st, en = pb.evaluate(orders)
        k2 = _key2(pb, orders, en)
        tol = 1e-9 * max(1.0, mk)
        better = best is None or mk < best.makespan - tol or (mk <= best.makespan + tol and k2 < best.key2 - tol)
        before = None if best is None else best.makespan
        verdict = "the best so far" if better else f"not better than {best.label} ({best.makespan:.6g} s)"
        log.add(action, label, before, mk, better, f"{why}: makespan {mk:.6g} s, {verdict}",
                delta={"orders": _orders_text(pb, orders), "makespan_s": mk, "source": label} if better else None,
                data={"phase": action, **(data or {})})
        if better:
            best = _Best(orders, mk, k2, label)

    # 1. warm starts: the named schedules
    named_rows = []
    for name, s in named_schedules(pb.p, pb.v, pb.m, placement=pb.placement, split_backward=pb.split).items():
        inst = _as_instance(pb, s)
        orders = pb.fifo(pb.orders_of(inst))
        pk = pb.peaks(orders)
        mk_named = float(simulate(s, costs=pb.costs, comm=pb.comm, timeline=False).metrics["makespan_s"])
        fits = bool((pk <= pb.cap * (1 + TOL) + 1e-9).all())
        named_rows.append({"label": name, "makespan_s": mk_named, "peak_activation_bytes": float(pk.max()), "fits": fits})
        if not fits:
            r = int(np.argmax(pk - pb.cap))
            log.add("warm_start", name, None if best is None else best.makespan, mk_named, False,
                    f"{name}: refused, rank {r} would hold {pk[r]:.6g} B of activations, above its cap of {pb.cap[r]:.6g} B",
                    data={"phase": "warm_start", "peak_bytes": pk.tolist()})
            continue
        offer(name, orders, "warm_start", f"{name} (named schedule" + (", as I/W" if inst is not s else "") + ")",
              {"peak_bytes": pk.tolist()})
    named = pd.DataFrame(named_rows, columns=["label", "makespan_s", "peak_activation_bytes", "fits"])
    fitting = named[named["fits"]] if len(named) else named
    best_named = float(fitting["makespan_s"].min()) if len(fitting) else math.nan

    if method == "exhaustive":
        from .synth_exhaustive import exhaustive_orders

        orders, n_tried = exhaustive_orders(pb)
        if orders is None:
            raise CapacityError("no order of this instance fits the memory caps", field="memory_cap_bytes")
        evals += n_tried
        offer("exhaustive", orders, "exhaustive", f"the best of {n_tried} orders (every valid order of every rank)")
    else:
        # 2. list scheduling, every rule of the portfolio
        lister = _Lister(pb)
        runs = []
        reserves = (False, True) if pb.v > 1 and np.isfinite(pb.cap).any() else (False,)
        for (prio, wrule, fac), reserve in ((pol, rs) for rs in reserves for pol in LIST_POLICIES):
            got = lister.run(prio, wrule, fac, reserve=reserve)
            label = (f"list[{prio}, W {wrule}, in-flight {'any' if math.isinf(fac) else f'{fac:g}x'}"
                     + (", memory reserved" if reserve else "") + "]")
            if got is None:
                log.add("list", label, None if best is None else best.makespan, None, False,
                        f"{label}: stuck, every rank waits for memory another must free (the rule deadlocks under this cap)",
                        data={"phase": "list"})
                continue
            mk, _, en = pb.evaluate(got)
            runs.append((mk, _key2(pb, got, en), label, got, (prio, wrule, fac, reserve)))
        runs.sort(key=lambda x: (x[0], x[1]))
        if runs:
            # the winning rule's choices, one step each (re-run with a log: the rules are deterministic)
            choices: list = []
            lister.run(*runs[0][4][:3], log=choices, reserve=runs[0][4][3])
            rule = {"critical_path": "the longest path to the end first", "backward_first": "backward before forward",
                    "oldest_first": "the oldest micro-batch first"}[runs[0][4][0]]
            wrule = {"eager": "W at once", "fill": "W only when nothing else can start",
                     "fit": "W only when it ends before the next known input"}[runs[0][4][1]]
            for r, a, t, cands in choices:
                tol_t = 1e-12 * max(1.0, t)
                now = [_text(pb, c) for c, st in cands if c != a and st <= t + tol_t]
                later = [f"{_text(pb, c)} at {st:.4g} s" for c, st in cands if c != a and st > t + tol_t]
                why = (f"{rule}, {wrule}: it goes before {', '.join(now)}" if now else "the only action it can start then")
                log.add("choose", f"rank {r}: {_text(pb, a)}", None, t + pb.dur[a], True,
                        f"rank {r} is the first rank free to start an action, at {t:.6g} s; it runs {_text(pb, a)} ({why})"
                        + (f"; later: {', '.join(later)}" if later else ""),
                        delta={"rank": r, "action": _text(pb, a)},
                        data={"phase": "list", "rank": r, "start_s": t, "candidates": [_text(pb, c) for c, _ in cands]})
        for mk, k2, label, got, _pol in runs:
            offer(label, got, "list", label)
        if best is None:
            raise CapacityError("no schedule found within the memory caps (every named schedule is above them and every "
                                "list-scheduling rule deadlocks)", field="memory_cap_bytes", cap_bytes=pb.cap.tolist())
        # 3. local search from the incumbent, then from the runner-up starts while budget remains
        starts = [best]
        for mk, k2, label, got, _pol in runs[:3]:
            if label != best.label:
                starts.append(_Best(got, mk, k2, label))
        for k, st in enumerate(starts):
            remaining = max_evals - evals
            if remaining <= 0 or time.perf_counter() >= deadline:
                break
            share = remaining if k == len(starts) - 1 else remaining // (len(starts) - k) if k else remaining * 2 // 3
            if k:
                log.add("restart", st.label, best.makespan, st.makespan, True,
                        f"local search starts again, from {st.label} ({st.makespan:.6g} s)",
                        delta={"orders": _orders_text(pb, st.orders), "makespan_s": st.makespan, "source": st.label},
                        data={"phase": "search"})
            got, used = _local_search(pb, st, log, share, deadline)
            evals += used
            tol = 1e-9 * max(1.0, got.makespan)
            if got.makespan < best.makespan - tol or (got.makespan <= best.makespan + tol and got.key2 < best.key2 - tol):
                label = f"local search from {st.label}"
                log.add("search", label, best.makespan, got.makespan, True,
                        f"local search from {st.label} ends at {got.makespan:.6g} s: the best so far",
                        delta={"orders": _orders_text(pb, got.orders), "makespan_s": got.makespan, "source": label},
                        data={"phase": "search"})
                best = _Best(got.orders, got.makespan, got.key2, label)
            else:
                log.add("search", f"from {st.label}", best.makespan, got.makespan, True,
                        f"local search from {st.label} ends at {got.makespan:.6g} s: not better than {best.label}, "
                        f"which stays the incumbent", delta={"orders": _orders_text(pb, best.orders), "makespan_s": best.makespan,
                                                          "source": best.label}, data={"phase": "search"})

    milp: SolverRun | None = None
    extra: dict[str, float] = {}
    bound = lb
    if method == "exhaustive":
        status, bound = "optimal", best.makespan  # every order was tried
    elif best.makespan <= lb * (1 + 1e-9):
        status = "optimal"  # the makespan meets the lower bound: nothing to prove
    elif method == "milp":
        from .synth_milp import solve_milp

        left = max(0.5, deadline - time.perf_counter())
        out = solve_milp(pb, best.orders, best.makespan, lb, time_limit_s=left, solver=solver)
        extra = {"milp_binaries": float(out["milp_binaries"])}
        facts = {"bound": out.get("bound"), "gap": out.get("solver_gap"), "solver": out["solver"], "model": "disjunctive",
                 "time_limit_s": left, "solve_s": out["milp_solve_s"], "n_vars": out["milp_vars"],
                 "n_constraints": out["milp_constraints"], "warm_start": best.label}
        if out.get("orders") is not None:
            mk, _st, en = pb.evaluate(out["orders"])
            ok = pb.fits(out["orders"])
            better = ok and mk < best.makespan - 1e-9 * max(1.0, mk)
            milp = SolverRun(out["status"] if ok else "failed", incumbent=mk,
                             note="" if ok else "its schedule is above the memory cap", **facts)
            log.add("milp", out["solver"], best.makespan, mk, better,
                    f"{out['why']}; its schedule re-simulated: {mk:.6g} s (the MILP's own figure {out['objective']:.6g} s)"
                    + ("" if ok else ", refused: above the memory cap"),
                    delta={"orders": _orders_text(pb, out["orders"]), "makespan_s": mk, "source": "milp"} if better else None,
                    data={"phase": "milp", "milp": milp, "objective": out["objective"]})
            if better:
                best = _Best(out["orders"], mk, _key2(pb, out["orders"], en), "milp")
        else:
            milp = SolverRun(out["status"], note=out["why"], **facts)
            log.add("milp", out["solver"], best.makespan, None, False, f"{out['why']}; keeping {best.label}",
                    data={"phase": "milp", "milp": milp})
        if out.get("bound") is not None:
            bound = max(lb, min(out["bound"], best.makespan))
        proven = out["status"] == "optimal" or best.makespan <= bound * (1 + 1e-9)
        status = "optimal" if proven else "time_limit"
    else:
        status = "heuristic"
    sched = pb.schedule(best.orders, name=f"synthesized[{method}]", meta={"source": best.label, "status": status})
    run = simulate(sched, costs=pb.costs, comm=pb.comm)
    mk = float(run.metrics["makespan_s"])
    if abs(mk - best.makespan) > 1e-9 * max(1.0, mk):  # one model of time: the walk is the simulator's
        raise AssertionError(f"synthesis evaluated {best.makespan} s but the simulator says {mk} s")
    if status == "optimal":
        bound = min(bound, mk)  # equal up to rounding: a bound never above the optimum it proves
    gap = max(0.0, (mk - bound) / mk) if mk > 0 else 0.0
    if math.isfinite(best_named) and best_named < mk * (1 - 1e-9):
        # only with a per-action overhead: a named B schedule entered the split space with one more
        # overhead per backward, and as it is it is faster
        slow = fitting.loc[fitting["makespan_s"].idxmin(), "label"]
        log.add("note", slow, mk, best_named, False,
                f"{slow} runs in {best_named:.6g} s with full backwards; split into I and W every backward pays the "
                f"per-action overhead twice: synthesize with split_backward=False for this cost model", data={"phase": "result"})
    log.add("result", sched.name, None, mk, True,
            f"{best.label}: makespan {mk:.6g} s, " + (f"proven optimal (bound {bound:.6g} s)" if status == "optimal" else
                                                     f"bound {bound:.6g} s, gap {gap:.2%} ({status})")
            + (f"; best named schedule {best_named:.6g} s" if math.isfinite(best_named) else ""),
            delta={"orders": _orders_text(pb, best.orders), "makespan_s": mk, "source": best.label},
            data={"phase": "result", "status": status, "bound_s": bound, "gap": gap})
    metrics = dict(run.metrics)
    metrics.update({
        "lower_bound_s": lb, "bound_s": bound, "gap": gap,
        "best_named_makespan_s": best_named if math.isfinite(best_named) else mk,
        "gain_vs_best_named": (1.0 - mk / best_named) if math.isfinite(best_named) and best_named > 0 else 0.0,
        "n_evaluations": float(evals), "solve_s": time.perf_counter() - t0, **extra,
    })
    named = named.assign(gap=[(x - bound) / x if x > 0 else 0.0 for x in named["makespan_s"]]) if len(named) else named.assign(gap=[])
    return SynthesisResult(
        schedule=sched, start_s=run.start_s, end_s=run.end_s, per_rank=run.per_rank, metrics=metrics, timeline=run.timeline,
        params={"p": pb.p, "v": pb.v, "m": pb.m, "placement": pb.placement, "split_backward": pb.split,
                "memory_cap_bytes": pb.cap.tolist(), "method": method, "time_limit_s": time_limit_s, "max_evals": max_evals,
                "costs": pb.costs, "comm": pb.comm, "schedule": sched.name, "source": best.label},
        initial_state={}, steps=log,
        _order=run._order, _rank=run._rank, _dep=run._dep, _ready=run._ready, _msg=run._msg, _queue=run._queue,
        status=status, method=method, milp=milp, named=named,
    )


def exhaustive_synthesis(costs: Any = None, *, p: int, v: int = 1, m: int, memory_cap_bytes: Any = None,
                         split_backward: bool = True, placement: str | None = None, comm: Any = None) -> SynthesisResult:
    """The optimum by trying every valid order of every rank (tiny instances: the differential check
    of the MILP and of the first-in-first-out normal form); ``synthesize(..., method="exhaustive")``.

    >>> exhaustive_synthesis({"F": 1.0, "B": 2.0}, p=2, m=2, split_backward=False).metrics["makespan_s"]
    9.0
    """
    return synthesize(costs, p=p, v=v, m=m, memory_cap_bytes=memory_cap_bytes, split_backward=split_backward,
                      placement=placement, comm=comm, method="exhaustive")
