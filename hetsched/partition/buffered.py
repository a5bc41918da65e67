"""Buffered backends: a stream of inputs through the aggregated ops, backends as a pipeline.

Paragraph 50 and figure 5 of the seed-003 patent (``../shared/seeds/003_9a492ad1d4867370.txt``):
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

from ..cost import CostModel, resolve_cost
from ..des import Simulator
from ..errors import HetschedError
from ..results import Result, Step
from ..system import System
from ..timeline import make_timeline
from .core import PartitionResult

__all__ = ["BufferedResult", "simulate_buffered", "group_deps"]


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
    holds the wait before it), in the order they started.
    """

    partition: PartitionResult
    occupancy: pd.DataFrame = field(default_factory=pd.DataFrame)
    latency_s: tuple[float, ...] = ()
    utilisation: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "utilisation", MappingProxyType(dict(self.utilisation)))
        object.__setattr__(self, "latency_s", tuple(self.latency_s))


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
    graph = partition.graph
    c = resolve_cost(cost, graph, system)
    gnames = list(partition.groups)
    G = len(gnames)
    gidx = {g: i for i, g in enumerate(gnames)}
    gback = [partition.group_backend[g] for g in gnames]
    backends = list(dict.fromkeys(gback))
    for b in backends:
        system.device(b)
    launch = _launch_table(launch_s, system, backends)
    # per-op and per-group compute prices (resident: the copies are modelled as transfers)
    op_s: list[list[tuple[str, float]]] = []
    dur = []
    for g in gnames:
        b = partition.group_backend[g]
        lst = [(o, float(c.compute_s(graph.op(o), b))) for o in partition.groups[g]]
        op_s.append(lst)
        dur.append(sum(t for _, t in lst))
    # edges
    E = len(partition.edges)
    e_src = [gidx[e.src] for e in partition.edges]
    e_dst = [gidx[e.dst] for e in partition.edges]
    e_cross = [e.cross for e in partition.edges]
    e_bytes = [e.bytes for e in partition.edges]
    e_lane = [f"{e.src_backend}->{e.dst_backend}" if e.cross else "" for e in partition.edges]
    e_dt = [float(c.transfer_s(e.bytes, e.src_backend, e.dst_backend)) if e.cross else 0.0 for e in partition.edges]
    e_name = [f"{e.src}->{e.dst}" for e in partition.edges]
    in_e: list[list[int]] = [[] for _ in range(G)]
    out_x: list[list[int]] = [[] for _ in range(G)]  # cross out-edges (need a slot)
    out_e: list[list[int]] = [[] for _ in range(G)]
    in_x: list[list[int]] = [[] for _ in range(G)]  # cross in-edges (free a slot)
    for k in range(E):
        in_e[e_dst[k]].append(k)
        out_e[e_src[k]].append(k)
        if e_cross[k]:
            out_x[e_src[k]].append(k)
            in_x[e_dst[k]].append(k)
    groups_of: dict[str, list[int]] = {b: [] for b in backends}
    for i, b in enumerate(gback):
        groups_of[b].append(i)

    N = n_inputs
    D = buffer_depth
    serial = D == 0
    sim = Simulator()
    next_i = [0] * G
    running = [False] * G
    arrived = [0] * E
    occ = [0] * E
    busy = dict.fromkeys(backends, False)
    heap: dict[str, list] = {b: [] for b in backends}
    blocked: dict[str, set] = {b: set() for b in backends}
    remaining = {b: len(groups_of[b]) * N for b in backends}
    idle_kind: dict[str, str | None] = dict.fromkeys(backends)
    idle_since = dict.fromkeys(backends, 0.0)
    done_count = [0] * N
    first_start = [math.inf] * N
    last_end = [0.0] * N
    admit = [1 if serial else N]
    busy_s = dict.fromkeys(backends, 0.0)
    lane_q: dict[str, list] = {}
    lane_busy: dict[str, bool] = {}
    steps: list[Step] = []
    # timeline columns
    T: dict[str, list] = {k: [] for k in ("lane", "group", "name", "kind", "start_s", "end_s", "op", "device", "stage", "microbatch", "bytes")}
    occ_t: list[float] = []
    occ_b: list[str] = []
    occ_n: list[int] = []

    def row(lane, grp, name, kind, s, e, op=None, dev=None, stage=None, mb=None, nbytes=None):
        T["lane"].append(lane)
        T["group"].append(grp)
        T["name"].append(name)
        T["kind"].append(kind)
        T["start_s"].append(s)
        T["end_s"].append(e)
        T["op"].append(op)
        T["device"].append(dev)
        T["stage"].append(stage)
        T["microbatch"].append(mb)
        T["bytes"].append(nbytes)

    def set_idle(b: str) -> None:
        """Keep the backend's idle row (blocked / wait) in step with its state."""
        if busy[b]:
            kind = None
        elif blocked[b]:
            kind = "blocked"
        elif remaining[b] > 0:
            kind = "wait"
        else:
            kind = None
        cur = idle_kind[b]
        if kind == cur:
            return
        now = sim.now
        if cur is not None and now > idle_since[b]:
            row(b, b, "blocked on full buffer" if cur == "blocked" else "waiting for input", cur, idle_since[b], now, dev=b)
        idle_kind[b] = kind
        idle_since[b] = now

    def recheck(g: int) -> None:
        """Queue group ``g``'s next job on its backend if it can start; track blocked-on-full."""
        b = gback[g]
        i = next_i[g]
        if running[g] or i >= N or i >= admit[0]:
            blocked[b].discard(g)
            return
        for k in in_e[g]:
            if arrived[k] <= i:
                blocked[b].discard(g)
                return
        if not serial:
            for k in out_x[g]:
                if occ[k] >= D:
                    blocked[b].add(g)
                    return
        blocked[b].discard(g)
        heapq.heappush(heap[b], (i, g))

    def dispatch(b: str) -> None:
        if not busy[b]:
            h = heap[b]
            while h:
                i, g = heapq.heappop(h)
                if running[g] or next_i[g] != i:
                    continue  # stale entry
                start(g, i)
                break
        set_idle(b)

    def start(g: int, i: int) -> None:
        b = gback[g]
        now = sim.now
        busy[b] = True
        running[g] = True
        next_i[g] = i + 1
        remaining[b] -= 1
        if now < first_start[i]:
            first_start[i] = now
        set_idle(b)
        for k in out_x[g]:
            occ[k] += 1
            occ_t.append(now)
            occ_b.append(e_name[k])
            occ_n.append(occ[k])
        L = launch[b]
        gname = gnames[g]
        if L > 0:
            row(b, b, f"launch {gname}", "launch", now, now + L, op=None, dev=b, stage=g, mb=i)
        t = now + L
        if rows == "op":
            for o, d in op_s[g]:
                row(b, b, o, "compute", t, t + d, op=o, dev=b, stage=g, mb=i)
                t += d
            end = t
        else:
            end = t + dur[g]
            row(b, b, gname, "compute", t, end, op=gname, dev=b, stage=g, mb=i)
        busy_s[b] += end - now
        steps.append(
            Step(len(steps), "dispatch", gname, None, end, True,
                 f"{b} starts {gname} for input {i}", {}, {"input": i, "start_s": now, "end_s": end, "backend": b})
        )
        sim.at(end, finish, g, i)

    def finish(g: int, i: int) -> None:
        b = gback[g]
        now = sim.now
        busy[b] = False
        running[g] = False
        if now > last_end[i]:
            last_end[i] = now
        touched = {b}
        # the consumer has read its inputs: free their slots (the producers may unblock)
        for k in in_x[g]:
            occ[k] -= 1
            occ_t.append(now)
            occ_b.append(e_name[k])
            occ_n.append(occ[k])
            p = e_src[k]
            recheck(p)
            touched.add(gback[p])
        for k in out_e[g]:
            if e_cross[k]:
                lane = e_lane[k]
                lane_q.setdefault(lane, []).append((k, i))
                if not lane_busy.get(lane):
                    start_transfer(lane)
            else:
                arrived[k] += 1
                d = e_dst[k]
                recheck(d)
                touched.add(gback[d])
        recheck(g)
        done_count[i] += 1
        if done_count[i] == G and serial and i + 1 < N:
            admit[0] = i + 2
            for h in range(G):
                recheck(h)
            touched.update(backends)
        for bb in backends:
            if bb in touched:
                dispatch(bb)

    def start_transfer(lane: str) -> None:
        q = lane_q[lane]
        k, i = q.pop(0)
        lane_busy[lane] = True
        now = sim.now
        end = now + e_dt[k]
        row(lane, "links", e_name[k], "transfer", now, end, op=None, dev=None, stage=None, mb=i, nbytes=e_bytes[k])
        sim.at(end, transfer_done, lane, k, i)

    def transfer_done(lane: str, k: int, i: int) -> None:
        lane_busy[lane] = False
        arrived[k] += 1
        d = e_dst[k]
        recheck(d)
        if lane_q[lane]:
            start_transfer(lane)
        dispatch(gback[d])

    def boot() -> None:
        for g in range(G):
            recheck(g)
        for b in backends:
            dispatch(b)

    sim.at(0.0, boot)
    sim.run()
    makespan = sim.now
    for b in backends:
        set_idle(b)  # closes nothing unless something is left (it cannot be: see the docstring)
        if idle_kind[b] is not None:  # pragma: no cover - guarded by the deadlock-freedom argument
            raise HetschedError(f"buffered simulation stalled on backend {b!r}", device=b)
    if any(n < G for n in done_count):  # pragma: no cover
        raise HetschedError("buffered simulation ended with unfinished inputs", field="buffer_depth")

    tl = make_timeline(T)
    lat = np.array([last_end[i] - first_start[i] for i in range(N)], dtype=float)
    occupancy = pd.DataFrame({"time_s": occ_t, "buffer": occ_b, "items": occ_n})
    util = {b: (busy_s[b] / makespan if makespan > 0 else 0.0) for b in backends}
    kinds = tl["kind"].to_numpy(dtype=object)
    span = (tl["end_s"] - tl["start_s"]).to_numpy(dtype=float)
    metrics: dict[str, float] = {
        "makespan_s": makespan,
        "throughput_per_s": N / makespan if makespan > 0 else math.inf,
        "latency_p50_s": float(np.percentile(lat, 50)),
        "latency_p99_s": float(np.percentile(lat, 99)),
        "latency_mean_s": float(lat.mean()),
        "n_inputs": N,
        "buffer_depth": D,
        "n_groups": G,
        "n_launches": G * N,
        "n_transfers": int(sum(e_cross)) * N,
        "bytes_copied": float(sum(e_bytes[k] for k in range(E) if e_cross[k])) * N,
        "blocked_s": float(span[kinds == "blocked"].sum()),
        "wait_s": float(span[kinds == "wait"].sum()),
        "max_occupancy": int(max(occ_n, default=0)),
        "n_events": sim.n_events,
    }
    for b in backends:
        metrics[f"util.{b}"] = util[b]
    return BufferedResult(
        metrics=metrics,
        timeline=tl,
        steps=steps,
        params={"n_inputs": N, "buffer_depth": D, "launch_s": dict(launch), "rows": rows},
        partition=partition,
        occupancy=occupancy,
        latency_s=tuple(float(x) for x in lat),
        utilisation=util,
    )
