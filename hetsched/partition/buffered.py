"""Buffered backends: a stream of inputs through the aggregated ops, backends as a pipeline.

Paragraph 50 and figure 5 of the multi-backend partition patent (``docs/patents.md``):
after aggregation, "buffers are added between the backends so that the backends run as a
pipeline" instead of one after another (the prior art of paragraph 3: "devices can only run
serially"). :func:`simulate_buffered` measures what that buys, on the one discrete-event core
(:class:`hetsched.des.Simulator`) that the executor simulator also uses.

The model
---------
* Every backend is a server that runs one aggregated op (group) at a time; every group handles
  the inputs in order ``0, 1, 2...``. A free backend starts the ready group job with the lowest
  input index (ties: topological order of the groups).
* A job costs the backend's *launch* overhead (``launch_s``; once per aggregated op per input, the
  cost the patent merges ops to avoid) plus the sum of its ops' latencies from the cost model
  (kernel launches included there).
* Every cross-backend quotient edge has a bounded buffer of ``buffer_depth`` slots. A producer
  writes its output into a slot while it computes and the consumer reads it while it computes, so a
  slot is held from the producer's start to the consumer's end; a producer whose output buffer is
  full does not start (it is *blocked on full*) and its backend runs other ready groups meanwhile.
  (A producer that held its backend while waiting could deadlock two backends that feed each other
  both ways; this rule cannot, by induction on the input index.) ``buffer_depth=2`` is classic
  double buffering.
* Between backends the tensors of an edge are copied as one transfer priced by the cost model
  (``transfer_s(bytes, src, dst)``) on a channel per ordered backend pair (transfers on one channel
  are serialised, FIFO). Same-backend edges (groups the cycle guard kept apart) cost nothing.
  A tensor read by two groups of one backend is copied once per group here (the metric
  ``bytes_copied`` of :class:`~hetsched.partition.PartitionResult` counts it once per backend).
* ``buffer_depth=0`` means no buffers: one input at a time goes through the whole graph (serial
  backends, the prior art); independent groups of that input may still overlap.
* Graph inputs are taken to be on the backend that first reads them and outputs stay where they
  are produced: the model compares partitions by the copies *between* backends.

Timeline: ``compute`` and ``launch`` rows on backend lanes (``op`` = group name, or the op names
with ``rows="op"``), ``transfer`` rows on ``"<src>-><dst>"`` lanes (group ``links``), and the idle
time of a backend that still has work as ``blocked`` (a ready group waits for a free output slot)
or ``wait`` (waiting for an input: an empty buffer). ``microbatch`` is the input index.

Examples
--------
>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> from hetsched.partition import partition_by_support
>>> s = toy_system()
>>> s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))   # the fpga now wins convs
>>> r = partition_by_support(chain(6), s)
>>> serial = simulate_buffered(r, s, n_inputs=20, buffer_depth=0)
>>> piped = simulate_buffered(r, s, n_inputs=20, buffer_depth=2)
>>> piped.metrics["throughput_per_s"] > serial.metrics["throughput_per_s"]
True
"""

from __future__ import annotations

import gc
import heapq
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..cost import CostModel, range_factors, range_metrics, resolve_cost
from ..des import Simulator
from ..errors import HetschedError
from ..results import Result, StepLog
from ..system import System
from ..timeline import TimelineBuilder
from .capacity import check_backend_memory
from .result import PartitionResult

__all__ = ["BufferedResult", "simulate_buffered", "group_deps", "serial_timeline"]


@dataclass(frozen=True, kw_only=True, eq=False)
class BufferedResult(Result):
    """Outcome of :func:`simulate_buffered`.

    Attributes
    ----------
    partition : PartitionResult
    occupancy : DataFrame
        Buffer occupancy over time: ``time_s, buffer, items`` (items held from that time on).
    latency_s : tuple of float
        Per input: end of its last group minus start of its first.
    utilisation : mapping
        backend -> busy fraction of the makespan (launch + compute).

    ``steps``: one ``dispatch`` step per group job (which group, which input, when; ``data``
    holds its backend, start and end), in the order they started. ``replay(k)`` is the state when
    job ``k`` starts: ``time_s``, ``running`` (backend -> ``(group, input)`` of the job it runs),
    ``done`` (group -> inputs it has finished) and ``occupancy`` (buffer ``"<src>-><dst>"`` ->
    items held, every cross-backend quotient edge listed); ``replay(-1)`` is time 0, nothing run.

    An empty graph (no groups) gives ``makespan_s = 0``, zero latencies and
    ``throughput_per_s = 0`` (no work, nothing measured), no rows and no steps.
    """

    partition: PartitionResult
    occupancy: pd.DataFrame = field(default_factory=pd.DataFrame)
    latency_s: tuple[float, ...] = ()
    utilisation: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "utilisation", MappingProxyType(dict(self.utilisation)))
        object.__setattr__(self, "latency_s", tuple(self.latency_s))

    def _replay(self, k: int) -> dict[str, Any]:
        # computed from the log directly: the jobs started up to k and the occupancy log then
        init = self.initial_state
        occupancy = dict(init.get("occupancy", {}))
        if k < 0:
            return {"time_s": 0.0, "running": {}, "done": {}, "occupancy": occupancy}
        now = self.steps[k]
        t = float(now.data["start_s"])
        running: dict[str, tuple[str, int]] = {}
        done: dict[str, int] = {}
        for s in self.steps[: k + 1]:
            d = s.data
            if d["end_s"] <= t and s.index != k:
                done[s.subject] = done.get(s.subject, 0) + 1
            elif d["start_s"] <= t:
                running[d["backend"]] = (s.subject, d["input"])
        n = now.data["n_occupancy"]
        occ = self.occupancy
        for b, items in zip(occ["buffer"].iloc[:n], occ["items"].iloc[:n]):
            occupancy[b] = int(items)
        return {"time_s": t, "running": running, "done": done, "occupancy": occupancy}


def group_deps(partition: PartitionResult) -> list[tuple[str, str]]:
    """Quotient edges as ``(src group, dst group)`` pairs: the ``deps`` for ``check_timeline``.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.partition import partition_by_support
    >>> group_deps(partition_by_support(chain(3), toy_system(), merge=None))
    [('gpu0#0', 'gpu0#1'), ('gpu0#1', 'gpu0#2')]
    """
    return [(e.src, e.dst) for e in partition.edges]


def _launch_table(launch_s: float | Mapping[str, float] | None, system: System, backends: list[str]) -> dict[str, float]:
    out = {}
    for b in backends:
        if launch_s is None:
            v = system.device(b).launch_overhead_s
        elif isinstance(launch_s, Mapping):
            v = launch_s.get(b, system.device(b).launch_overhead_s)
        else:
            v = launch_s
        if not (v >= 0) or not math.isfinite(v):
            raise HetschedError(f"launch_s for backend {b!r} must be a finite number >= 0, got {v!r}", device=b, field="launch_s")
        out[b] = float(v)
    return out


def simulate_buffered(
    partition: PartitionResult,
    system: System,
    *,
    n_inputs: int,
    buffer_depth: int,
    cost: CostModel | None = None,
    launch_s: float | Mapping[str, float] | None = None,
    rows: str = "group",
) -> BufferedResult:
    """Run ``n_inputs`` inputs through the aggregated ops with bounded buffers between backends.

    Parameters
    ----------
    partition : PartitionResult
        From :func:`~hetsched.partition.partition_by_support`.
    system : System
        Every backend of the partition must be a device of it.
    n_inputs : int
        Inputs in the stream (all available at time 0).
    buffer_depth : int
        Slots per cross-backend edge; ``0`` = no buffers (serial, one input at a time).
    cost : CostModel, optional
        Prices ops and transfers (default: roofline).
    launch_s : float or dict, optional
        Backend launch overhead per aggregated-op launch (seconds), one number or per backend;
        default: each device's ``launch_overhead_s``.
    rows : {"group", "op"}
        One compute row per group job, or one per op (larger timelines; lets
        ``check_timeline(tl, graph)`` check op-level dependencies).

    Returns
    -------
    BufferedResult
        ``metrics``: ``makespan_s``, ``throughput_per_s``, ``latency_p50_s``, ``latency_p99_s``,
        ``latency_mean_s``, ``util.<backend>``, ``n_launches``, ``bytes_copied``, ``blocked_s``,
        ``wait_s``, ``max_occupancy``, ``n_groups``, ``n_events``.

    Raises
    ------
    HetschedError
        ``n_inputs`` < 1, ``buffer_depth`` < 0, a bad ``rows`` or ``launch_s``.
    UnknownNameError
        A backend of the partition that is not a device of ``system``.
    CapacityError
        An op whose weights + inputs + outputs exceed its backend's memory (naming both).

    Examples
    --------
    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.partition import partition_by_support
    >>> from hetsched.timeline import check_timeline
    >>> s = toy_system(); r = partition_by_support(chain(4), s, merge=None)
    >>> res = simulate_buffered(r, s, n_inputs=3, buffer_depth=1)
    >>> check_timeline(res.timeline, deps=group_deps(r))
    >>> len(res.latency_s), res.metrics["n_launches"]
    (3, 12)
    """
    # many small row containers and nothing cyclic: keep the cyclic collector out of the loop
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _simulate(partition, system, n_inputs, buffer_depth, cost, launch_s, rows)
    finally:
        if gc_was_enabled:
            gc.enable()


def _simulate(partition, system, n_inputs, buffer_depth, cost, launch_s, rows) -> BufferedResult:
    if not isinstance(n_inputs, int) or isinstance(n_inputs, bool) or n_inputs < 1:
        raise HetschedError(f"n_inputs must be an integer >= 1, got {n_inputs!r}", field="n_inputs")
    if not isinstance(buffer_depth, int) or isinstance(buffer_depth, bool) or buffer_depth < 0:
        raise HetschedError(f"buffer_depth must be an integer >= 0, got {buffer_depth!r}", field="buffer_depth")
    if rows not in ("group", "op"):
        raise HetschedError(f"rows must be 'group' or 'op', got {rows!r}", field="rows")
    plan = _Plan(partition, system, cost, launch_s)
    check_backend_memory(partition.graph, partition.assignment, system)
    run = _Run(plan, n_inputs, buffer_depth, rows)
    run.run()
    return run.result(partition)


class _Plan:
    """What the run needs, priced once: groups, backends, job durations, edges and their copies."""

    def __init__(self, partition: PartitionResult, system: System, cost: CostModel | None, launch_s) -> None:
        graph = partition.graph
        c = resolve_cost(cost, graph, system)
        self.gnames = gnames = list(partition.groups)
        self.G = G = len(gnames)
        gidx = {g: i for i, g in enumerate(gnames)}
        self.gback = gback = [partition.group_backend[g] for g in gnames]
        self.backends = backends = list(dict.fromkeys(gback))
        for b in backends:
            system.device(b)
        self.launch = _launch_table(launch_s, system, backends)
        # per-op and per-group compute prices (resident: the copies are modelled as transfers)
        self.op_s: list[list[tuple[str, float]]] = []
        self.dur: list[float] = []
        for g in gnames:
            b = partition.group_backend[g]
            lst = [(o, float(c.compute_s(graph.op(o), b))) for o in partition.groups[g]]
            self.op_s.append(lst)
            self.dur.append(sum(t for _, t in lst))
        # a calibrated cost's error range over the priced ops (None: no statement)
        self.range_f = range_factors(c, ((graph.op(o).op_type, gback[i], t) for i, lst in enumerate(self.op_s)
                                         for o, t in lst))
        edges = partition.edges
        self.E = E = len(edges)
        self.e_src = [gidx[e.src] for e in edges]
        self.e_dst = [gidx[e.dst] for e in edges]
        self.e_cross = [e.cross for e in edges]
        self.e_bytes = [e.bytes for e in edges]
        # a channel per ordered backend pair (the model of the module docstring), not a link lane
        self.e_lane = [f"{e.src_backend}->{e.dst_backend}" if e.cross else "" for e in edges]
        self.e_dt = [float(c.transfer_s(e.bytes, e.src_backend, e.dst_backend)) if e.cross else 0.0 for e in edges]
        self.e_name = [f"{e.src}->{e.dst}" for e in edges]
        self.in_e: list[list[int]] = [[] for _ in range(G)]
        self.out_x: list[list[int]] = [[] for _ in range(G)]  # cross out-edges (need a slot)
        self.out_e: list[list[int]] = [[] for _ in range(G)]
        self.in_x: list[list[int]] = [[] for _ in range(G)]  # cross in-edges (free a slot)
        for k in range(E):
            self.in_e[self.e_dst[k]].append(k)
            self.out_e[self.e_src[k]].append(k)
            if self.e_cross[k]:
                self.out_x[self.e_src[k]].append(k)
                self.in_x[self.e_dst[k]].append(k)
        self.groups_of: dict[str, list[int]] = {b: [] for b in backends}
        for i, b in enumerate(gback):
            self.groups_of[b].append(i)


class _Run:
    """The event-driven run on the shared clock (:class:`hetsched.des.Simulator`).

    Handlers: ``recheck`` (can a group's next job start? blocked on a full buffer?), ``dispatch``
    (a free backend starts its ready job of lowest input index), ``start``/``finish`` of a job,
    ``start_transfer``/``transfer_done`` of a copy, and ``set_idle`` (the backend's blocked/wait row).
    """

    def __init__(self, plan: _Plan, n_inputs: int, buffer_depth: int, rows: str) -> None:
        self.p = plan
        self.N = N = n_inputs
        self.D = buffer_depth
        self.serial = buffer_depth == 0
        self.rows = rows
        G, E, backends = plan.G, plan.E, plan.backends
        self.sim = Simulator()
        self.next_i = [0] * G
        self.running = [False] * G
        self.arrived = [0] * E
        self.occ = [0] * E
        self.busy = dict.fromkeys(backends, False)
        self.heap: dict[str, list] = {b: [] for b in backends}
        self.blocked: dict[str, set] = {b: set() for b in backends}
        self.remaining = {b: len(plan.groups_of[b]) * N for b in backends}
        self.idle_kind: dict[str, str | None] = dict.fromkeys(backends)
        self.idle_since = dict.fromkeys(backends, 0.0)
        self.done_count = [0] * N
        self.first_start = [math.inf] * N
        self.last_end = [0.0] * N
        self.admit = 1 if self.serial else N
        self.busy_s = dict.fromkeys(backends, 0.0)
        self.lane_q: dict[str, list] = {}
        self.lane_busy: dict[str, bool] = {}
        self.steps = StepLog()
        self.tb = TimelineBuilder()
        self.occ_t: list[float] = []
        self.occ_b: list[str] = []
        self.occ_n: list[int] = []

    # ------------------------------------------------------------------ recording
    def _occupancy(self, k: int) -> None:
        self.occ_t.append(self.sim.now)
        self.occ_b.append(self.p.e_name[k])
        self.occ_n.append(self.occ[k])

    def set_idle(self, b: str) -> None:
        """Keep the backend's idle row (blocked / wait) in step with its state."""
        if self.busy[b]:
            kind = None
        elif self.blocked[b]:
            kind = "blocked"
        elif self.remaining[b] > 0:
            kind = "wait"
        else:
            kind = None
        cur = self.idle_kind[b]
        if kind == cur:
            return
        now = self.sim.now
        if cur is not None and now > self.idle_since[b]:
            self.tb.add(b, b, "blocked on full buffer" if cur == "blocked" else "waiting for input", cur,
                        self.idle_since[b], now, device=b)
        self.idle_kind[b] = kind
        self.idle_since[b] = now

    # ------------------------------------------------------------------ jobs
    def recheck(self, g: int) -> None:
        """Queue group ``g``'s next job on its backend if it can start; track blocked-on-full."""
        p = self.p
        b = p.gback[g]
        i = self.next_i[g]
        blocked = self.blocked[b]
        if self.running[g] or i >= self.N or i >= self.admit:
            blocked.discard(g)
            return
        arrived = self.arrived
        for k in p.in_e[g]:
            if arrived[k] <= i:
                blocked.discard(g)
                return
        if not self.serial:
            occ, D = self.occ, self.D
            for k in p.out_x[g]:
                if occ[k] >= D:
                    blocked.add(g)
                    return
        blocked.discard(g)
        heapq.heappush(self.heap[b], (i, g))

    def dispatch(self, b: str) -> None:
        if not self.busy[b]:
            h = self.heap[b]
            while h:
                i, g = heapq.heappop(h)
                if self.running[g] or self.next_i[g] != i:
                    continue  # stale entry
                self.start(g, i)
                break
        self.set_idle(b)

    def start(self, g: int, i: int) -> None:
        p = self.p
        b = p.gback[g]
        now = self.sim.now
        self.busy[b] = True
        self.running[g] = True
        self.next_i[g] = i + 1
        self.remaining[b] -= 1
        if now < self.first_start[i]:
            self.first_start[i] = now
        self.set_idle(b)
        for k in p.out_x[g]:
            self.occ[k] += 1
            self._occupancy(k)
        L = p.launch[b]
        gname = p.gnames[g]
        add = self.tb.add
        if L > 0:
            add(b, b, f"launch {gname}", "launch", now, now + L, None, None, b, g, None, i)
        t = now + L
        if self.rows == "op":
            for o, d in p.op_s[g]:
                add(b, b, o, "compute", t, t + d, o, None, b, g, None, i)
                t += d
            end = t
        else:
            end = t + p.dur[g]
            add(b, b, gname, "compute", t, end, gname, None, b, g, None, i)
        self.busy_s[b] += end - now
        # the occupancy log up to here is the buffers' state when this job starts (for replay)
        self.steps.append(("dispatch", gname, None, end, True, f"{b} starts {gname} for input {i}", {},
                           {"input": i, "start_s": now, "end_s": end, "backend": b, "n_occupancy": len(self.occ_t)}))
        self.sim.at(end, self.finish, g, i)

    def finish(self, g: int, i: int) -> None:
        p = self.p
        b = p.gback[g]
        now = self.sim.now
        self.busy[b] = False
        self.running[g] = False
        if now > self.last_end[i]:
            self.last_end[i] = now
        touched = {b}
        # the consumer has read its inputs: free their slots (the producers may unblock)
        for k in p.in_x[g]:
            self.occ[k] -= 1
            self._occupancy(k)
            src = p.e_src[k]
            self.recheck(src)
            touched.add(p.gback[src])
        for k in p.out_e[g]:
            if p.e_cross[k]:
                lane = p.e_lane[k]
                self.lane_q.setdefault(lane, []).append((k, i))
                if not self.lane_busy.get(lane):
                    self.start_transfer(lane)
            else:
                self.arrived[k] += 1
                d = p.e_dst[k]
                self.recheck(d)
                touched.add(p.gback[d])
        self.recheck(g)
        self.done_count[i] += 1
        if self.done_count[i] == p.G and self.serial and i + 1 < self.N:
            self.admit = i + 2
            for h in range(p.G):
                self.recheck(h)
            touched.update(p.backends)
        for bb in p.backends:
            if bb in touched:
                self.dispatch(bb)

    # ------------------------------------------------------------------ copies
    def start_transfer(self, lane: str) -> None:
        p = self.p
        k, i = self.lane_q[lane].pop(0)
        self.lane_busy[lane] = True
        now = self.sim.now
        end = now + p.e_dt[k]
        self.tb.add(lane, "links", p.e_name[k], "transfer", now, end, None, None, None, None, None, i, p.e_bytes[k])
        self.sim.at(end, self.transfer_done, lane, k, i)

    def transfer_done(self, lane: str, k: int, i: int) -> None:
        p = self.p
        self.lane_busy[lane] = False
        self.arrived[k] += 1
        d = p.e_dst[k]
        self.recheck(d)
        if self.lane_q[lane]:
            self.start_transfer(lane)
        self.dispatch(p.gback[d])

    # ------------------------------------------------------------------ the run
    def boot(self) -> None:
        for g in range(self.p.G):
            self.recheck(g)
        for b in self.p.backends:
            self.dispatch(b)

    def run(self) -> None:
        self.sim.at(0.0, self.boot)
        self.sim.run()
        for b in self.p.backends:
            self.set_idle(b)  # closes nothing unless something is left (it cannot be: see the docstring)
            if self.idle_kind[b] is not None:  # pragma: no cover - guarded by the deadlock-freedom argument
                raise HetschedError(f"buffered simulation stalled on backend {b!r}", device=b)
        if any(n < self.p.G for n in self.done_count):  # pragma: no cover
            raise HetschedError("buffered simulation ended with unfinished inputs", field="buffer_depth")

    def result(self, partition: PartitionResult) -> BufferedResult:
        p, N = self.p, self.N
        makespan = self.sim.now
        tl = self.tb.build()
        empty = p.G == 0
        lat = np.array([0.0 if empty else self.last_end[i] - self.first_start[i] for i in range(N)], dtype=float)
        occupancy = pd.DataFrame({"time_s": self.occ_t, "buffer": self.occ_b, "items": self.occ_n})
        util = {b: (self.busy_s[b] / makespan if makespan > 0 else 0.0) for b in p.backends}
        kinds = tl["kind"].to_numpy(dtype=object)
        span = (tl["end_s"] - tl["start_s"]).to_numpy(dtype=float)
        metrics: dict[str, float] = {
            "makespan_s": makespan,
            **range_metrics(p.range_f, makespan),
            # an empty graph does no work: nothing flows, and nothing is measured (0, not inf)
            "throughput_per_s": N / makespan if makespan > 0 else 0.0,
            "latency_p50_s": float(np.percentile(lat, 50)),
            "latency_p99_s": float(np.percentile(lat, 99)),
            "latency_mean_s": float(lat.mean()),
            "n_inputs": N,
            "buffer_depth": self.D,
            "n_groups": p.G,
            "n_launches": p.G * N,
            "n_transfers": int(sum(p.e_cross)) * N,
            "bytes_copied": float(sum(p.e_bytes[k] for k in range(p.E) if p.e_cross[k])) * N,
            "blocked_s": float(span[kinds == "blocked"].sum()),
            "wait_s": float(span[kinds == "wait"].sum()),
            "max_occupancy": int(max(self.occ_n, default=0)),
            "n_events": self.sim.n_events,
        }
        for b in p.backends:
            metrics[f"util.{b}"] = util[b]
        return BufferedResult(
            metrics=metrics,
            timeline=tl,
            steps=self.steps,
            params={"n_inputs": N, "buffer_depth": self.D, "launch_s": dict(p.launch), "rows": self.rows},
            initial_state={"time_s": 0.0, "running": {}, "done": {},
                           "occupancy": {p.e_name[k]: 0 for k in range(p.E) if p.e_cross[k]}},
            partition=partition,
            occupancy=occupancy,
            latency_s=tuple(float(x) for x in lat),
            utilisation=util,
        )


def serial_timeline(partition: PartitionResult, *, system: System, cost: CostModel | None = None) -> pd.DataFrame:
    """One input run serially through the aggregated ops: the timeline of a partition.

    :func:`simulate_buffered` with ``n_inputs=1, buffer_depth=0, rows="op"``: each group's launch,
    its ops one after the other on its backend, the copies between backends; seconds throughout.
    :func:`~hetsched.partition.partition_by_support` gives its result this timeline (built on
    first access) when it is called with a :class:`~hetsched.system.System`.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.partition import partition_by_support
    >>> s = toy_system(); r = partition_by_support(chain(3), s)
    >>> tl = serial_timeline(r, system=s)
    >>> sorted(tl.loc[tl.kind == "compute", "op"]) == sorted(r.graph.ops)
    True
    """
    return simulate_buffered(partition, system, n_inputs=1, buffer_depth=0, cost=cost, rows="op").timeline
