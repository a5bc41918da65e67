"""The one evaluator: a placement in, a timeline and metrics out.

Every mapping algorithm and baseline is priced by :func:`evaluate`, so their numbers compare.
The timing is :class:`hetsched.clock.Clock`'s (the same clock the mapping engine re-times remap
trials with); this module turns the clock's event log into timeline rows, memory and metrics.

Model (that of H2H, Zhang et al., DAC 2022, and of the compute-first mapping patent):

* Each op runs on its device; a device runs its ops one at a time, in ``order`` (default: the
  graph's topological order).
* Weights live in host memory unless the op is in ``weights_resident``; then they sit in the
  device's memory for the whole run. Non-resident weights are fetched over the host route just
  before the op (the device is idle meanwhile; no prefetch).
* An output tensor listed in ``tensors_resident`` stays in its producer's device memory; a consumer
  on the same device reads it in place, a consumer elsewhere copies it over the route between the
  two devices (one copy per device, kept there for later readers; each such copy goes the whole
  route from the producer's device, even when an earlier copy passed through the host, so keeping
  a tensor read on several devices can move more bytes than writing it back once). Any other output is written back
  to the host and every consumer not on the host, the producer's own device included, reads it
  back from there (the patent's "intermediate results in host memory"). Graph inputs start on the
  host; graph outputs end on the host (a kept graph output is written back as well).
  ``evaluate(..., keep_tensors_resident=True)`` switches the round trip off: every tensor is kept.
* Transfers are store-and-forward over each hop of the route and serialised per link direction
  (``contention=False`` gives every transfer its own channel, the classic HEFT assumption).
* Memory (``alloc`` rows of the timeline, lane ``<device>:mem``): resident weights for the whole
  run; fetched weights from the start of their fetch to the op's end; an op's outputs from the
  op's start until written back (the end of the first hop out), or, when kept, until the last
  consumer on that device ends and the last copy out of it has left; a copied-in input from the
  start of its copy to the end of the op that reads it (a kept copy: to its last reader there);
  a device in the middle of a multi-hop route holds the data from the start of the hop in to the
  end of the hop out. Host memory is not tracked (taken to be ample): no ``alloc`` rows on it.
  A view (``alias_of``) is counted as a buffer of its own: conservative, never an underestimate.
* Flow ids (``flow`` column, comma-separated): ``"<tensor>><consumer>"`` joins the producer's
  compute row, the write-back (when the tensor went through the host), every hop of the copy and
  the consumer's compute row; ``"<tensor>>host"`` joins a producer and its write-back. Consumers on
  the producer's own device get no arrow.

``total_latency_s`` is the patent's "system total latency" (claim 5): the sum over devices of the
time each spends computing its ops and moving its own data (weight fetches and input copies into
it, every hop of them, and write-backs from it). ``bytes_moved`` and ``n_transfers`` count every
hop: a 2-hop copy of 1 kB moves 2 kB over the links.

The patent is listed in ``docs/patents.md``; H2H is arXiv:2204.13852.

Examples
--------
>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> g, s = chain(4, seed=1), toy_system()
>>> ev = evaluate(g, s, {op: "gpu0" for op in g})
>>> bool(abs(ev.metrics["makespan_s"] - ev.timeline["end_s"].max()) < 1e-12)
True
>>> ev2 = evaluate(g, s, Placement({op: "gpu0" for op in g}, tensors_resident=set(g.tensors)))
>>> ev2.metrics["bytes_moved"] < ev.metrics["bytes_moved"]
True
"""

from __future__ import annotations

import gc
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Collection, Iterable, Mapping, Sequence

import pandas as pd

from .clock import COMPUTE, COPY, LOCAL, OUTPUT, Clock
from .cost import CostModel, resolve_cost
from .errors import CapacityError, GraphError, HetschedError, UnknownNameError, UnsupportedOpError, name_list
from .graph import OpGraph
from .system import System
from .timeline import TimelineBuilder, peak_memory_by_device

__all__ = ["Placement", "Evaluation", "evaluate", "resident_weight_bytes"]


@dataclass(frozen=True)
class Placement:
    """Where each op runs and what stays in device memory.

    Parameters
    ----------
    device : dict
        op name -> device name.
    weights_resident : set of str
        Ops whose weights live in their device's memory for the whole run.
    tensors_resident : set of str
        Tensors kept in their producer's device memory (not written back to the host).

    >>> p = Placement({"a": "gpu0"}).moved("a", "fpga0")
    >>> p.device["a"]
    'fpga0'
    >>> Placement(["gpu0", "fpga0"])
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: a placement maps op names to devices (a dict, or a Placement), not a list: ['gpu0', 'fpga0']
    """

    device: Mapping[str, str]
    weights_resident: frozenset[str] = field(default_factory=frozenset)
    tensors_resident: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not isinstance(self.device, Mapping):
            shown = repr(self.device)
            raise HetschedError(f"a placement maps op names to devices (a dict, or a Placement), not a "
                                f"{type(self.device).__name__}: {shown if len(shown) <= 80 else shown[:77] + '...'}",
                                field="placement")
        object.__setattr__(self, "device", dict(self.device))
        object.__setattr__(self, "weights_resident", frozenset(self.weights_resident))
        object.__setattr__(self, "tensors_resident", frozenset(self.tensors_resident))

    def moved(self, op: str, device: str) -> "Placement":
        """A copy with ``op`` on ``device`` (residency flags kept)."""
        d = dict(self.device)
        d[op] = device
        return Placement(d, self.weights_resident, self.tensors_resident)

    def with_residency(
        self, weights_resident: Iterable[str] | None = None, tensors_resident: Iterable[str] | None = None
    ) -> "Placement":
        return Placement(
            self.device,
            self.weights_resident if weights_resident is None else frozenset(weights_resident),
            self.tensors_resident if tensors_resident is None else frozenset(tensors_resident),
        )

    @classmethod
    def coerce(cls, p: "Placement | Mapping[str, str]") -> "Placement":
        return p if isinstance(p, Placement) else cls(p)


@dataclass(frozen=True, eq=False)
class Evaluation:
    """What :func:`evaluate` returns: the timeline, metrics and per-device figures of a placement."""

    placement: Placement
    timeline: pd.DataFrame
    metrics: Mapping[str, float]
    per_device: pd.DataFrame
    op_start_s: Mapping[str, float]
    op_end_s: Mapping[str, float]


def resident_weight_bytes(graph: OpGraph, placement: Placement) -> dict[str, int]:
    """Bytes of resident weights per device.

    >>> from hetsched.io.generators import chain
    >>> g = chain(2, seed=0)
    >>> resident_weight_bytes(g, Placement({o: "gpu0" for o in g}, weights_resident=set(g)))["gpu0"] > 0
    True
    """
    out: dict[str, int] = defaultdict(int)
    ops = graph.ops
    for o in placement.weights_resident:
        op = ops[o]
        owner = op.attrs.get("shares_weights_with")
        shared = int(op.attrs.get("shared_weight_bytes", 0) or 0)
        # a weight another resident op on this device already holds is held once (tied weights)
        held = shared if (owner in placement.weights_resident and placement.device.get(owner) == placement.device[o]) else 0
        out[placement.device[o]] += op.weight_bytes - held
    return dict(out)


def _check_order(graph: OpGraph, order: Sequence[str]) -> list[str]:
    order = list(order)
    seen = set(order)
    if len(order) != graph.n_ops or seen != set(graph.ops):
        missing = [o for o in graph.ops if o not in seen]
        extra = [o for o in order if o not in graph.ops]
        twice = sorted({o for o in order if order.count(o) > 1}) if len(seen) != len(order) else []
        raise GraphError(
            f"order must list every op once: missing {name_list(missing)}; unknown {name_list(extra)}"
            + (f"; listed twice {name_list(twice)}" if twice else ""),
            op=(missing or extra or twice or [None])[0],
        )
    pos = {o: i for i, o in enumerate(order)}
    for u, v in graph.nx.edges:
        if pos[u] > pos[v]:
            raise GraphError(f"order runs op {v!r} before its predecessor {u!r}", op=v)
    return order


def evaluate(
    graph: OpGraph,
    system: System,
    placement: Placement | Mapping[str, str],
    *,
    cost: CostModel | None = None,
    order: Sequence[str] | None = None,
    contention: bool = True,
    check_memory: bool = True,
    check_support: bool = True,
    keep_tensors_resident: bool = False,
) -> Evaluation:
    """Time a placement: compute and transfer rows, memory, and the metrics every method reports.

    Parameters
    ----------
    graph : OpGraph
    system : System
    placement : Placement or dict
        A plain ``{op: device}`` dict means nothing is resident.
    cost : CostModel, optional
        Defaults to :class:`~hetsched.cost.RooflineCost`.
    order : sequence of str, optional
        Global op order (a topological order); each device runs its ops in this order.
    contention : bool
        Serialise transfers per link direction (default) or give each its own channel.
    check_memory : bool
        Raise :class:`~hetsched.errors.CapacityError` naming the device whose peak exceeds its memory.
    check_support : bool
        Raise :class:`~hetsched.errors.UnsupportedOpError` when an op sits on a device whose support
        table entry does not list its op type.
    keep_tensors_resident : bool
        The host round trip off (a what-if). By default every output not listed in the placement's
        ``tensors_resident`` is written back to host memory and every reader off the host reads it
        back from there, even on the producer's own device (the mapping patent's "intermediate
        results in host memory"): an all-on-GPU ResNet-50 then moves every activation over PCIe
        twice. ``True`` keeps *every* tensor in device memory once it is produced or copied there:
        readers on the same device read in place, others get one direct copy per device, and only
        graph outputs go back to the host. Same as listing every tensor in ``tensors_resident``
        (``Evaluation.placement`` shows it so); kept tensors hold device memory until their last
        reader, so ``check_memory`` may now refuse a placement that fitted before.

    Returns
    -------
    Evaluation
        ``metrics``: ``makespan_s``, ``total_latency_s``, ``energy_J``, ``bytes_moved`` (summed over
        every hop), ``n_transfers`` (hop rows), ``peak_mem_frac`` (worst device peak / capacity).
        ``per_device``: ``device, n_ops, compute_s, transfer_s, busy_s, peak_mem_bytes, capacity_bytes``.

    Examples
    --------
    >>> from hetsched.graph import OpGraph
    >>> from hetsched.system import Device, Link, System
    >>> g = OpGraph(); _ = g.add_op("a", "MatMul", flops=2e9); _ = g.add_op("b", "MatMul", flops=2e9)
    >>> _ = g.add_tensor("x", 1000, consumers=["a"]); _ = g.add_tensor("y", 1000, producer="a", consumers=["b"])
    >>> _ = g.add_tensor("z", 1000, producer="b", is_output=True)
    >>> s = System([Device("h", "cpu", {"default": 1e9}, mem_bandwidth_Bps=1e12),
    ...             Device("d", "gpu", {"default": 1e12}, mem_bandwidth_Bps=1e12)],
    ...            [Link("h", "d", 1e6)], host="h")
    >>> ev = evaluate(g, s, {"a": "d", "b": "d"})
    >>> round(ev.metrics["makespan_s"], 6)  # x in 1 ms, a 2 ms, y out and back 2 ms, b 2 ms, z out 1 ms
    0.008
    >>> round(evaluate(g, s, {"a": "d", "b": "d"}, keep_tensors_resident=True).metrics["makespan_s"], 6)
    0.006
    """
    pl = Placement.coerce(placement)
    if keep_tensors_resident:
        pl = pl.with_residency(tensors_resident=graph.tensors)
    cost = resolve_cost(cost, graph, system)
    order = graph.topological_order() if order is None else _check_order(graph, order)
    devs = system.devices
    ops_map = graph.ops
    place = pl.device
    missing = [o for o in order if o not in place]
    if missing:
        raise GraphError(f"placement lacks op(s) {name_list(missing)}", op=missing[0])
    unsupported = []
    for o in order:
        d = place[o]
        if d not in devs:
            raise UnknownNameError(f"op {o!r} is placed on unknown device {d!r}", op=o, device=d)
        if check_support and not system.support.supports(d, ops_map[o].op_type):
            unsupported.append((o, ops_map[o].op_type, d))
    if unsupported:
        o, t, d = unsupported[0]
        raise UnsupportedOpError(
            f"{len(unsupported)} op(s) placed on a device that does not support them, first {o!r} ({t}) on {d!r}",
            op=o,
            device=d,
            ops=[(a, b) for a, b, _ in unsupported],
        )
    unknown_w = [o for o in pl.weights_resident if o not in ops_map]
    if unknown_w:
        unknown_w.sort()
        raise UnknownNameError(
            f"weights_resident names unknown op(s) {name_list(unknown_w)}", op=unknown_w[0], field="weights_resident"
        )

    # the event log and the rows are many small containers and nothing cyclic: keep the cyclic
    # collector out of the loop (its passes over them were a third of the run time at 10k ops)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        log: list = []
        clock = Clock(graph, system, cost, order=order, contention=contention)
        makespan, _ = clock.run(place, pl.weights_resident, pl.tensors_resident, log=log)
        tl, rec = _record(graph, system.host, place, contention, log, pl.weights_resident, makespan)
        del log
    finally:
        if gc_was_enabled:
            gc.enable()
    busy_compute, busy_xfer, n_ops = rec["busy_compute"], rec["busy_xfer"], rec["n_ops"]

    # memory peak per device: the same function check_timeline uses, so both agree
    peaks = peak_memory_by_device(tl)
    per_dev = []
    energy = 0.0
    worst_frac = 0.0
    over: list[tuple[str, float, int]] = []
    for name, dev in devs.items():
        comp = busy_compute.get(name, 0.0)
        xfer = busy_xfer.get(name, 0.0)
        peak = peaks.get(name, 0.0)
        frac = peak / dev.memory_bytes if dev.memory_bytes else 0.0
        worst_frac = max(worst_frac, frac)
        energy += comp * dev.power_W + max(0.0, makespan - comp) * dev.idle_power_W
        per_dev.append(
            {
                "device": name,
                "n_ops": n_ops.get(name, 0),
                "compute_s": comp,
                "transfer_s": xfer,
                "busy_s": comp + xfer,
                "peak_mem_bytes": peak,
                "capacity_bytes": float(dev.memory_bytes),
            }
        )
        if peak > dev.memory_bytes * (1 + 1e-9) and name != system.host:
            over.append((name, peak, dev.memory_bytes))
    if check_memory and over:
        name, peak, cap = over[0]
        raise CapacityError(
            f"device {name!r} needs {peak:.4g} bytes at its peak, above its memory of {cap:.4g} bytes",
            device=name,
            peak_bytes=peak,
            capacity_bytes=cap,
        )
    per_device = pd.DataFrame(per_dev)
    metrics = {
        "makespan_s": float(makespan),
        "total_latency_s": float(sum(r["busy_s"] for r in per_dev)),
        "energy_J": float(energy),
        "bytes_moved": float(rec["bytes_moved"]),
        "n_transfers": float(rec["n_xfer"]),
        "peak_mem_frac": float(worst_frac),
    }
    return Evaluation(pl, tl, metrics, per_device, rec["op_start"], rec["op_end"])


def _record(graph: OpGraph, host: str, place: Mapping[str, str], contention: bool, log: list,
            w_res: Collection[str], makespan: float) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The timeline and the busy/traffic tallies from the clock's event log (one pass).

    The clock (:meth:`hetsched.clock.Clock.run`) decides every time; this only records: which
    device holds which bytes when (the memory model of the module docstring), which rows an arrow
    joins, and who is busy with what.
    """
    tens = graph._tensors  # unchecked accessors: read once per event
    ops = graph._ops
    tb = TimelineBuilder()
    add = tb.add
    # the hot rows (compute, transfer) go straight to the columns: one call per value, none per row
    a_lane, a_group, a_name, a_kind, a_start, a_end, a_op, a_tensor, a_dev, a_stage, a_chunk, a_mb, a_bytes, a_flow = (
        tb.appenders())
    lane_slots: dict[str, list[float]] = {}  # contention=False: parallel channels of a lane
    busy_compute: dict[str, float] = defaultdict(float)
    busy_xfer: dict[str, float] = defaultdict(float)
    n_ops: dict[str, int] = defaultdict(int)
    op_start: dict[str, float] = {}
    op_end: dict[str, float] = {}
    tally = [0.0, 0]  # bytes moved, hop rows
    # memory: [device, label, bytes, start, end]; host memory is not tracked
    allocs: list[list[Any]] = []
    kept_at: dict[tuple[str, str], list[Any]] = {}  # (tensor, device) -> its alloc, for copies that stay
    # (tensor, device) -> flow lists of the rows that brought the tensor there (producer, write-back, copy)
    via: dict[tuple[str, str], list[list[str]]] = {}
    staging: list[list[Any]] = []  # allocs the current op holds until it ends
    in_flows: list[str] = []
    comp_flow: list[str] = []

    def alloc(dev: str, label: str, nbytes: float, start: float, end: float) -> list[Any]:
        a = [dev, label, nbytes, start, end]
        if dev != host:
            allocs.append(a)
        return a

    def rows(hops: list, nbytes: float, label: str, op: str | None, tensor: str | None, account: str,
             flow: list[str]) -> list[list[str]]:
        """Rows of one transfer; each hop row gets its own flow list (a copy of ``flow``) so later
        readers can be chained through some hops only. Returns those flow lists."""
        hop_flows: list[list[str]] = []
        prev_start = None
        for a, _b, lane, s, e, dur in hops:
            k = 0
            if not contention:
                slots = lane_slots.get(lane)
                if slots is None:
                    slots = lane_slots[lane] = [0.0]
                k = next((i for i, f in enumerate(slots) if f <= s), -1)
                if k < 0:
                    slots.append(0.0)
                    k = len(slots) - 1
                slots[k] = e
            hf = list(flow)
            a_lane(lane if k == 0 else f"{lane}#{k}")
            a_group("links")
            a_name(label)
            a_kind("transfer")
            a_start(s)
            a_end(e)
            a_op(op)
            a_tensor(tensor)
            a_dev(account)
            a_stage(None)
            a_chunk(None)
            a_mb(None)
            a_bytes(nbytes)
            a_flow(hf)
            hop_flows.append(hf)
            busy_xfer[account] += dur
            tally[0] += nbytes
            tally[1] += 1
            if prev_start is not None:  # store and forward: the middle device holds the data between its hops
                alloc(a, tensor if tensor is not None else f"weights:{op}", nbytes, prev_start, e)
            prev_start = s
        return hop_flows

    for ev in log:
        kind = ev[0]
        if kind == COPY:
            _, t, o, d, src, hops, kept = ev
            fid = f"{t}>{o}"
            src_via = via.get((t, src))
            if src_via is None:  # a graph input, on the host from the start
                src_via = via[(t, src)] = []
            for f in src_via:
                f.append(fid)
            in_flows.append(fid)
            nbytes = tens[t].size_bytes
            hop_flows = rows(hops, nbytes, t, o, t, d, [fid])
            ks = kept_at.get((t, src))
            e1 = hops[0][4]
            if ks is not None and e1 > ks[4]:
                ks[4] = e1  # the source copy lives until its first hop has left
            a = alloc(d, t, nbytes, hops[0][3], hops[-1][4])
            if kept:
                via[(t, d)] = src_via + hop_flows
                kept_at[(t, d)] = a
            staging.append(a)
        elif kind == OUTPUT:
            _, t, o, d, start, end, kept, hops = ev
            if d == host:
                via[(t, d)] = [comp_flow]
                continue
            nbytes = tens[t].size_bytes
            a = alloc(d, t, nbytes, start, end)
            if kept:
                via[(t, d)] = [comp_flow]
                kept_at[(t, d)] = a
            if hops is None:
                continue
            fid = f"{t}>host"
            comp_flow.append(fid)
            wb = rows(hops, nbytes, f"{t} -> host", None, t, d, [fid])
            via[(t, host)] = [comp_flow, *wb]
            if hops[0][4] > a[4]:
                a[4] = hops[0][4]  # the device copy is freed once written back (kept ones live on)
        elif kind == COMPUTE:
            _, o, d, start, end, dur = ev
            busy_compute[d] += dur
            n_ops[d] += 1
            op_start[o] = start
            op_end[o] = end
            a_lane(d)
            a_group(d)
            a_name(o)
            a_kind("compute")
            a_start(start)
            a_end(end)
            a_op(o)
            a_tensor(None)
            a_dev(d)
            a_stage(None)
            a_chunk(None)
            a_mb(None)
            a_bytes(None)
            a_flow(in_flows)
            for a in staging:
                if end > a[4]:
                    a[4] = end
            comp_flow = in_flows
            staging = []
            in_flows = []
        elif kind == LOCAL:
            _, t, o, d = ev
            k = kept_at.get((t, d))
            if k is not None:
                staging.append(k)  # its end is pushed to this op's end
            p = tens[t].producer
            if p is not None and place[p] != d:  # arrived from another device: draw the arrow
                fid = f"{t}>{o}"
                for f in via[(t, d)]:
                    f.append(fid)
                in_flows.append(fid)
        else:  # FETCH
            _, o, d, w, hops = ev
            rows(hops, w, f"weights {o}", o, None, d, [])
            staging.append(alloc(d, f"weights:{o}", ops[o].weight_bytes, hops[0][3], 0.0))

    # resident weights live the whole run (graph order, not set order: deterministic rows)
    for o in ops:
        if o in w_res and ops[o].weight_bytes:
            alloc(place[o], f"weights:{o}", ops[o].weight_bytes, 0.0, makespan)
    for dev, label, nbytes, s, e in allocs:
        add(f"{dev}:mem", dev, label, "alloc", s, e, None, None if label.startswith("weights:") else label, dev,
            None, None, None, nbytes, None)
    tallies = {"busy_compute": busy_compute, "busy_xfer": busy_xfer, "n_ops": n_ops, "op_start": op_start,
               "op_end": op_end, "bytes_moved": tally[0], "n_xfer": tally[1]}
    return tb.build(), tallies
