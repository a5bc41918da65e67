"""List-scheduling baselines built from reusable parts: HEFT, CPOP, PEFT.

* HEFT and CPOP: Topcuoglu, Hariri & Wu, "Performance-effective and low-complexity task
  scheduling for heterogeneous computing", IEEE TPDS 13(3), 2002.
* PEFT: Arabnejad & Barbosa, "List scheduling algorithm for heterogeneous systems by an optimistic
  cost table", IEEE TPDS 25(3), 2014.

Parts (SAGA style, so they compose): a *priority* (:data:`PRIORITIES`: ``upward``, ``cpop``,
``oct``), a *selector* choosing the device (:data:`SELECTORS`: ``eft``, ``oeft``, ``critical_path``)
on top of one *insertion policy* (the earliest idle gap that fits, :meth:`_Schedule.est`), and a
*loop* (static sorted list or ready queue).

The schedulers' own model is the classic one: computation ``cost.compute_s(op, device)`` (data
resident), communication ``cost.transfer_s`` per hop of the route (the clock's ``xfer``, as
:func:`hetsched.evaluate` prices it) per edge tensor when the two ops sit on different devices, no
link contention. ``rank_comm_average`` picks how the ranks are computed:
``"pairs"`` (the papers: communication averaged over ordered pairs of distinct devices) or
``"saga"`` (as the SAGA library 2.x computes them: communication averaged over its undirected
network edges, self-links included, which cost 0; and, for CPOP, SAGA's downward rank
(:func:`saga_downward_rank`) and its ``numpy.isclose`` test for the critical path), so that HEFT and
CPOP reproduce SAGA's schedules (``tests/data/mapping_saga_golden.json``).

**What they optimise:** the makespan *of their own model* (``metrics["schedule_makespan_s"]``):
data already on the devices, no link contention, no host round trips. The result is then priced
like every other mapper by :func:`hetsched.evaluate` (with the greedy locality pass unless
``locality=False``, and the scheduler's start-time order), whose ``makespan_s`` and
``total_latency_s`` can differ a lot from that figure. An empty graph gives an empty mapping with
zero metrics.

>>> from hetsched.io.generators import topcuoglu, topcuoglu_costs
>>> from hetsched.io.systems import toy_system
>>> g, s = topcuoglu(20, seed=1), toy_system()
>>> r = heft(g, s, cost=topcuoglu_costs(g, s, seed=1))
>>> r.metrics["schedule_makespan_s"] > 0 and len(r.placement.device) == 20
True
"""

from __future__ import annotations

import heapq
import time
from bisect import bisect_left
from typing import Any, Callable, Mapping

from ..cost import CostModel
from ..errors import HetschedError
from ..graph import OpGraph
from ..registry import lookup
from ..results import StepLog
from ..system import System
from .engine import EMPTY_STATE, Ctx, State, keep_on_chip
from .result import MappingResult, finish

__all__ = ["heft", "cpop", "peft", "list_schedule", "PRIORITIES", "SELECTORS", "upward_rank", "downward_rank",
           "saga_downward_rank", "optimistic_cost_table", "schedule_parts", "Parts"]


class Parts:
    """Per-instance numbers the parts share: execution times, edge bytes, average communication."""

    def __init__(self, ctx: Ctx, rank_comm_average: str) -> None:
        if rank_comm_average not in ("pairs", "saga"):
            raise HetschedError(f"rank_comm_average must be 'pairs' or 'saga', got {rank_comm_average!r}",
                                field="rank_comm_average")
        self.ctx = ctx
        ctx.require_support()
        self.devices = ctx.system.compute_devices
        self.exec: dict[str, dict[str, float]] = {}
        for o in ctx.order:
            # only devices that can hold the op's working set (a placement elsewhere cannot be evaluated)
            self.exec[o] = {d: ctx.comp(o, d) for d in ctx.servable(o)}
        # bytes each op->op edge carries (one entry per tensor), keyed for caching by the byte tuple
        acc: dict[tuple[str, str], list[float]] = {}
        for t, p in ctx.producer.items():
            if p is None:
                continue
            for c in ctx.consumers[t]:
                acc.setdefault((p, c), []).append(ctx.size[t])
        self.edge_bytes: dict[tuple[str, str], tuple[float, ...]] = {k: tuple(v) for k, v in acc.items()}
        self.mode = rank_comm_average
        # the clock's per-hop pricing, so a list schedule and evaluate() charge a routed transfer alike
        self._tr = ctx.xfer
        self._avg: dict[tuple[float, ...], float] = {}
        self._pair: dict[tuple[tuple[float, ...], str, str], float] = {}

    def comm(self, u: str, v: str, du: str, dv: str) -> float:
        """Communication time of edge ``u -> v`` between two devices: the clock's transfer time
        (:meth:`hetsched.clock.Clock.xfer`, the cost model's ``transfer_s`` per hop of the route) of
        each tensor the edge carries (0 on the same device), cached per byte tuple and device pair."""
        if du == dv:
            return 0.0
        bs = self.edge_bytes[(u, v)]
        k = (bs, du, dv)
        c = self._pair.get(k)
        if c is None:
            tr = self._tr
            c = self._pair[k] = tr(bs[0], du, dv) if len(bs) == 1 else sum(tr(b, du, dv) for b in bs)
        return c

    def avg_comm(self, u: str, v: str) -> float:
        k = self.edge_bytes[(u, v)]
        a = self._avg.get(k)
        if a is None:
            devs = self.devices
            n = len(devs)
            if n < 2:
                a = 0.0
            elif self.mode == "pairs":
                a = sum(self.comm(u, v, x, y) for x in devs for y in devs if x != y) / (n * (n - 1))
            else:
                vals = [0.5 * (self.comm(u, v, devs[i], devs[j]) + self.comm(u, v, devs[j], devs[i]))
                        for i in range(n) for j in range(i, n)]
                a = sum(vals) / len(vals)
            self._avg[k] = a
        return a

    def avg_exec(self, o: str) -> float:
        e = self.exec[o]
        return sum(e.values()) / len(e)


# ------------------------------------------------------------------------------------------ priorities
def upward_rank(parts: Parts) -> dict[str, float]:
    """``rank_u(i) = avg_w(i) + max_j (avg_c(i, j) + rank_u(j))`` (Topcuoglu 2002, eq. 5)."""
    ctx = parts.ctx
    r: dict[str, float] = {}
    for o in reversed(ctx.order):
        m = 0.0
        for s in ctx.succ[o]:
            v = r[s] + parts.avg_comm(o, s)
            if v > m:
                m = v
        r[o] = parts.avg_exec(o) + m
    return r


def downward_rank(parts: Parts) -> dict[str, float]:
    """``rank_d(i) = max_p (rank_d(p) + avg_w(p) + avg_c(p, i))`` (Topcuoglu 2002, eq. 6)."""
    ctx = parts.ctx
    r: dict[str, float] = {}
    for o in ctx.order:
        m = 0.0
        for p in ctx.pred[o]:
            v = r[p] + parts.avg_exec(p) + parts.avg_comm(p, o)
            if v > m:
                m = v
        r[o] = m
    return r


def optimistic_cost_table(parts: Parts) -> dict[str, dict[str, float]]:
    """PEFT's OCT (Arabnejad & Barbosa 2014, eq. 4): the optimistic remaining time if ``i`` runs on ``p``."""
    ctx = parts.ctx
    oct_: dict[str, dict[str, float]] = {}
    for o in reversed(ctx.order):
        row = {}
        for p in parts.exec[o]:
            m = 0.0
            for s in ctx.succ[o]:
                c = parts.avg_comm(o, s)
                best = min(oct_[s][q] + parts.exec[s][q] + (0.0 if q == p else c) for q in parts.exec[s])
                if best > m:
                    m = best
            row[p] = m
        oct_[o] = row
    return oct_


def _prio_upward(parts: Parts) -> dict[str, Any]:
    return {"priority": upward_rank(parts)}


def saga_downward_rank(parts: Parts) -> dict[str, float]:
    """SAGA 2.x's downward rank, for reproducing its CPOP: ``max_p (rank_d(p) + avg_c(p, i))`` plus the
    op's *own* cost over the mean device speed (the harmonic mean of its execution times), where
    Topcuoglu's eq. 6 adds the *predecessor's* mean execution time. Entry ops get 0."""
    ctx = parts.ctx
    r: dict[str, float] = {}
    for o in ctx.order:
        if not ctx.pred[o]:
            r[o] = 0.0
            continue
        m = max(r[p] + parts.avg_comm(p, o) for p in ctx.pred[o])
        e = parts.exec[o].values()
        r[o] = m + len(e) / sum(1.0 / x if x > 0 else float("inf") for x in e)
    return r


def _prio_cpop(parts: Parts) -> dict[str, Any]:
    up = upward_rank(parts)
    down = saga_downward_rank(parts) if parts.mode == "saga" else downward_rank(parts)
    return {"priority": {o: up[o] + down[o] for o in up}, "upward": up}


def _prio_oct(parts: Parts) -> dict[str, Any]:
    oct_ = optimistic_cost_table(parts)
    return {"priority": {o: sum(r.values()) / len(r) for o, r in oct_.items()}, "oct": oct_}


PRIORITIES: dict[str, Callable[[Parts], dict[str, Any]]] = {"upward": _prio_upward, "cpop": _prio_cpop, "oct": _prio_oct}


# ------------------------------------------------------------------------------------------ schedule + insertion
class _Schedule:
    """Per-device busy intervals; insertion into the earliest idle gap that fits."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.starts: dict[str, list[float]] = {d: [] for d in parts.devices}
        self.ends: dict[str, list[float]] = {d: [] for d in parts.devices}
        self.dev: dict[str, str] = {}
        self.aft: dict[str, float] = {}
        self.ast: dict[str, float] = {}

    def ready_time(self, o: str, d: str) -> float:
        t = 0.0
        parts = self.parts
        for p in parts.ctx.pred[o]:
            dp = self.dev[p]
            a = self.aft[p] if dp == d else self.aft[p] + parts.comm(p, o, dp, d)
            if a > t:
                t = a
        return t

    def est(self, o: str, d: str, exec_s: float, *, insertion: bool = True) -> float:
        """Earliest start on ``d``: data ready, then the first idle gap long enough (HEFT's insertion)."""
        t = self.ready_time(o, d)
        st, en = self.starts[d], self.ends[d]
        if not st:
            return t
        if not insertion:
            return max(t, en[-1])
        if t + exec_s <= st[0]:
            return t
        # gaps (en[i], st[i+1]); only those whose right end is at least t + exec can fit
        i = max(0, bisect_left(st, t + exec_s) - 1)
        n = len(st)
        while i < n - 1:
            s = t if t > en[i] else en[i]
            if s + exec_s <= st[i + 1]:
                return s
            i += 1
        return t if t > en[-1] else en[-1]

    def place(self, o: str, d: str, finish: float, exec_s: float) -> None:
        start = finish - exec_s  # as SAGA records it, so the schedules agree to the last bit
        st, en = self.starts[d], self.ends[d]
        # keep the intervals sorted by (start, end): a zero-length op starting where another starts
        # goes first, so the ends stay sorted too (est reads the last end as the device's free time)
        i = bisect_left(st, start)
        while i < len(st) and st[i] == start and en[i] < finish:
            i += 1
        st.insert(i, start)
        en.insert(i, finish)
        self.dev[o] = d
        self.aft[o] = finish
        self.ast[o] = start


# ------------------------------------------------------------------------------------------ selectors
def _select_eft(sch: _Schedule, o: str, info: Mapping[str, Any]) -> tuple[str, float, dict[str, float]]:
    ex = sch.parts.exec[o]
    best, best_f = None, float("inf")
    cands = {}
    for d in ex:
        f = sch.est(o, d, ex[d]) + ex[d]
        cands[d] = f
        if f < best_f:
            best, best_f = d, f
    return best, best_f, cands


def _select_oeft(sch: _Schedule, o: str, info: Mapping[str, Any]) -> tuple[str, float, dict[str, float]]:
    ex = sch.parts.exec[o]
    oct_ = info["oct"][o]
    best, best_v, best_f = None, float("inf"), 0.0
    cands = {}
    for d in ex:
        f = sch.est(o, d, ex[d]) + ex[d]
        v = f + oct_[d]
        cands[d] = v
        if v < best_v:
            best, best_v, best_f = d, v, f
    return best, best_f, cands


def _select_cp(sch: _Schedule, o: str, info: Mapping[str, Any]) -> tuple[str, float, dict[str, float]]:
    if o in info["cp_ops"]:
        d = info["cp_device"]
        ex = sch.parts.exec[o][d]
        f = sch.est(o, d, ex) + ex
        return d, f, {d: f}
    return _select_eft(sch, o, info)


SELECTORS: dict[str, Callable] = {"eft": _select_eft, "oeft": _select_oeft, "critical_path": _select_cp}


def _cp_info(parts: Parts, info: dict[str, Any]) -> None:
    """CPOP: ops on the critical path (priority equal to the entry's) and the device fastest on them."""
    prio = info["priority"]
    ctx = parts.ctx
    entries = [o for o in ctx.order if not ctx.pred[o]]
    if not entries:  # an empty graph has no critical path
        info["cp_ops"], info["cp_device"] = set(), None
        return
    cp = max(prio[o] for o in entries)
    # "equal to the entry's priority" up to float noise; SAGA compares with numpy.isclose's defaults
    tol = 1e-8 + 1e-5 * abs(cp) if parts.mode == "saga" else 1e-9 * max(1.0, abs(cp))
    cp_ops = {o for o in ctx.order if abs(prio[o] - cp) <= tol}
    devs = [d for d in parts.devices if all(d in parts.exec[o] for o in cp_ops)]
    if not devs:  # no single device runs the whole critical path: fall back to plain EFT for it
        info["cp_ops"], info["cp_device"] = set(), None
        return
    info["cp_ops"] = cp_ops
    info["cp_device"] = min(devs, key=lambda d: (sum(parts.exec[o][d] for o in cp_ops), parts.devices.index(d)))


# ------------------------------------------------------------------------------------------ the loop
def list_schedule(graph: OpGraph, system: System, *, priority: str | Callable = "upward", selector: str | Callable = "eft",
                  loop: str = "static", cost: CostModel | None = None, rank_comm_average: str = "pairs",
                  locality: bool = True, occupancy_threshold: float = 0.9, name: str = "list") -> MappingResult:
    """Compose a list scheduler from parts and price its mapping with :func:`hetsched.evaluate`.

    ``loop="static"`` schedules in decreasing priority (HEFT); ``"ready"`` pops the highest-priority
    op whose predecessors are all scheduled (CPOP, PEFT). Ties go to the graph's topological order.

    >>> from hetsched.io.generators import fork_join
    >>> from hetsched.io.systems import toy_system
    >>> r = list_schedule(fork_join(2, 2), toy_system(), priority="oct", selector="oeft", loop="ready")
    >>> r.phase
    'list'
    """
    t0 = time.perf_counter()
    lookup(PRIORITIES, priority, what="priority")
    lookup(SELECTORS, selector, what="selector")
    if loop not in ("static", "ready"):
        raise HetschedError(f"unknown loop {loop!r}; use 'static' or 'ready'", field="loop")
    ctx = Ctx(graph, system, cost)
    log = StepLog()
    st, order, sched_makespan = list_state(ctx, log, priority=priority, selector=selector, loop=loop,
                                           rank_comm_average=rank_comm_average, name=name)
    sched_s = time.perf_counter() - t0
    if locality:
        keep_on_chip(ctx, st, log, occupancy_threshold)
    params = {"priority": priority if isinstance(priority, str) else "custom",
              "selector": selector if isinstance(selector, str) else "custom", "loop": loop,
              "rank_comm_average": rank_comm_average, "locality": locality, "occupancy_threshold": occupancy_threshold}
    return finish(ctx, st, log, phase=name, params=params, initial_state=EMPTY_STATE, order=order,
                  extra_metrics={"schedule_makespan_s": sched_makespan, "schedule_runtime_s": sched_s})


def list_state(ctx: Ctx, log: StepLog, *, priority: str | Callable = "upward", selector: str | Callable = "eft",
               loop: str = "static", rank_comm_average: str = "pairs", name: str = "list") -> tuple[State, list[str], float]:
    """The list-scheduling loop on a prepared context: ``(placement state, start-time order, own makespan)``."""
    parts = Parts(ctx, rank_comm_average)
    info = lookup(PRIORITIES, priority, what="priority")(parts)
    sel = lookup(SELECTORS, selector, what="selector")
    if selector == "critical_path":
        _cp_info(parts, info)
    prio = info["priority"]
    pos = ctx.pos
    sch = _Schedule(parts)
    if loop == "static":
        seq = sorted(ctx.order, key=lambda o: (-prio[o], pos[o]))
        it = iter(seq)
        nxt = lambda: next(it, None)  # noqa: E731
        on_done = lambda o: None  # noqa: E731
    else:  # "ready"
        indeg = {o: len(ctx.pred[o]) for o in ctx.order}
        heap = [(-prio[o], pos[o], o) for o in ctx.order if indeg[o] == 0]
        heapq.heapify(heap)

        def nxt():
            return heapq.heappop(heap)[2] if heap else None

        def on_done(o):
            for s in ctx.succ[o]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(heap, (-prio[s], pos[s], s))
    while True:
        o = nxt()
        if o is None:
            break
        d, f, cands = sel(sch, o, info)
        ex = parts.exec[o][d]
        sch.place(o, d, f, ex)
        on_done(o)
        log.add("map", o, None, f, True, f"earliest finish on {d} at {f * 1e3:.4g} ms",
                {"device": {o: d}}, data={"phase": name, "metric": "finish_time", "candidates": cands,
                                          "priority": prio[o], "device": d, "start_s": f - ex})
    sched_makespan = max(sch.aft.values(), default=0.0)
    # a global order for the evaluator: by start time, kept topological
    indeg = {o: len(ctx.pred[o]) for o in ctx.order}
    heap = [(sch.ast[o], pos[o], o) for o in ctx.order if indeg[o] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, _, o = heapq.heappop(heap)
        order.append(o)
        for s in ctx.succ[o]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (sch.ast[s], pos[s], s))
    return State(dict(sch.dev)), order, sched_makespan


def schedule_parts(graph: OpGraph, system: System, *, cost: CostModel | None = None, rank_comm_average: str = "pairs"):
    """The shared numbers (execution table, edge bytes, averaged communication) for custom parts."""
    return Parts(Ctx(graph, system, cost), rank_comm_average)


def _named(name: str, priority: str, selector: str, loop: str, doc: str) -> Callable[..., MappingResult]:
    """A published list scheduler: :func:`list_schedule` with its parts fixed, and only the options
    a user may change (the methods table reads them from the signature)."""

    def run(graph: OpGraph, system: System, *, cost: CostModel | None = None, rank_comm_average: str = "pairs",
            locality: bool = True, occupancy_threshold: float = 0.9) -> MappingResult:
        return list_schedule(graph, system, priority=priority, selector=selector, loop=loop, cost=cost,
                             rank_comm_average=rank_comm_average, locality=locality,
                             occupancy_threshold=occupancy_threshold, name=name)

    run.__name__ = run.__qualname__ = name
    run.__doc__ = doc
    return run


heft = _named("heft", "upward", "eft", "static", """HEFT (Topcuoglu 2002): upward rank, then earliest finish time with insertion.

    **What it optimises:** the makespan of the classic model (see the module docstring), greedily.

    ``rank_comm_average="saga"`` averages communication like SAGA 2.x (self-links included), so the
    schedule (``metrics["schedule_makespan_s"]``) matches SAGA's HEFT on related-machine instances.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> heft(chain(3), toy_system()).phase
    'heft'
    """)

cpop = _named("cpop", "cpop", "critical_path", "ready", """CPOP (Topcuoglu 2002): priority = upward + downward rank; critical-path ops on the one device
    that runs the whole path fastest, others by earliest finish time.

    **What it optimises:** the makespan of the classic model, keeping the critical path on one device.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> cpop(chain(3), toy_system()).phase
    'cpop'
    """)

peft = _named("peft", "oct", "oeft", "ready", """PEFT (Arabnejad & Barbosa 2014): rank = mean optimistic cost; device = min EFT + OCT.

    **What it optimises:** the makespan of the classic model, looking one step ahead with the OCT.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> peft(chain(3), toy_system()).phase
    'peft'
    """)
