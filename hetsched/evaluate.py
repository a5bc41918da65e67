"""The one evaluator: a placement in, a timeline and metrics out.

Every mapping algorithm and baseline is priced by :func:`evaluate`, so their numbers compare.

Model (that of H2H, Zhang et al., DAC 2022, and of the seed-000 patent):

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

The patent is ``../shared/seeds/000_023dd0683ad424ca.txt``; H2H is arXiv:2204.13852.

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

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from .cost import CostModel, resolve_cost
from .errors import CapacityError, GraphError, UnknownNameError, UnsupportedOpError, name_list
from .graph import OpGraph
from .system import System
from .timeline import make_timeline

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
    """

    device: Mapping[str, str]
    weights_resident: frozenset[str] = field(default_factory=frozenset)
    tensors_resident: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
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
        out[placement.device[o]] += ops[o].weight_bytes
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
    >>> g = OpGraph(); _ = g.add_op("a", "MatMul", flops=2e9)
    >>> _ = g.add_tensor("x", 1000, consumers=["a"]); _ = g.add_tensor("y", 1000, producer="a", is_output=True)
    >>> s = System([Device("h", "cpu", {"default": 1e9}, mem_bandwidth_Bps=1e12),
    ...             Device("d", "gpu", {"default": 1e12}, mem_bandwidth_Bps=1e12)],
    ...            [Link("h", "d", 1e6)], host="h")
    >>> ev = evaluate(g, s, {"a": "d"})
    >>> round(ev.metrics["makespan_s"], 6)  # 1 ms in, 2 ms compute, 1 ms out
    0.004
    """
    pl = Placement.coerce(placement)
    cost = resolve_cost(cost, graph, system)
    order = graph.topological_order() if order is None else _check_order(graph, order)
    devs = system.devices
    ops_map = graph.ops
    tens = graph.tensors
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

    host = system.host
    route = system.route
    inputs_of = graph._inputs  # hot loop: skip the checked accessors
    outputs_of = graph._outputs
    w_res = pl.weights_resident
    t_res = pl.tensors_resident
    transfer_s = cost.transfer_s

    # timeline rows, column by column (a dict per row is the slow part at 10k ops)
    c_lane: list[str] = []
    c_group: list[str] = []
    c_name: list[str] = []
    c_kind: list[str] = []
    c_start: list[float] = []
    c_end: list[float] = []
    c_op: list[str | None] = []
    c_tensor: list[str | None] = []
    c_dev: list[str] = []
    c_bytes: list[float | None] = []
    c_flow: list[list[str]] = []  # one list per row; rows of one transfer share it, so appends reach every hop

    lane_free: dict[str, list[float]] = {}
    dev_free: dict[str, float] = defaultdict(float)
    busy_compute: dict[str, float] = defaultdict(float)
    busy_xfer: dict[str, float] = defaultdict(float)
    n_ops: dict[str, int] = defaultdict(int)
    bytes_moved = 0.0
    n_xfer = 0
    # where each tensor is available: device -> time
    loc: dict[str, dict[str, float]] = {}
    # (tensor, device) -> flow lists of the rows that brought the tensor there (producer, write-back, copy)
    via: dict[tuple[str, str], list[list[str]]] = {}
    for t in graph.graph_inputs():
        loc[t] = {host: 0.0}
        via[(t, host)] = []
    # memory: [device, label, bytes, start, end]; host memory is not tracked
    allocs: list[list[Any]] = []
    kept: dict[tuple[str, str], list[Any]] = {}  # (tensor, device) -> its alloc, for copies that stay
    op_start: dict[str, float] = {}
    op_end: dict[str, float] = {}

    hop_cache: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    xfer_cache: dict[tuple[float, str, str], float] = {}

    def lane_name(a: str, b: str) -> str:
        ln = system.link(a, b)
        if ln is not None and not ln.duplex:
            x, y = sorted((a, b))
            return f"{x}<->{y}"
        return f"{a}->{b}"

    def alloc(dev: str, label: str, nbytes: float, start: float, end: float) -> list[Any]:
        a = [dev, label, nbytes, start, end]
        if dev != host:
            allocs.append(a)
        return a

    def transfer(nbytes: float, src: str, dst: str, earliest: float, label: str, op: str | None,
                 tensor: str | None, account: str, flow: list[str]) -> tuple[float, float, float, list, list]:
        """Move ``nbytes`` hop by hop.

        Returns (first hop start, first hop end, arrival, the flow list of each hop row, and
        ``(node, time)`` for each node the data reaches). Each hop row gets its own flow list
        (starting as a copy of ``flow``) so later readers can be chained through some hops only.
        """
        nonlocal bytes_moved, n_xfer
        t = earliest
        first_s = first_e = None
        hop_flows: list[list[str]] = []
        stops: list[tuple[str, float]] = []
        hops = hop_cache.get((src, dst))
        if hops is None:
            hops = []
            a = src
            for ln in route(src, dst):
                b = ln.dst if ln.src == a else ln.src
                hops.append((a, b, lane_name(a, b)))
                a = b
            hop_cache[(src, dst)] = hops
        prev_start = None
        for a, b, lane in hops:
            slots = lane_free.get(lane)
            if slots is None:
                slots = lane_free[lane] = [0.0]
            k = 0
            if contention:
                s = t if t > slots[0] else slots[0]
            else:
                k = next((i for i, f in enumerate(slots) if f <= t), -1)
                if k < 0:
                    slots.append(0.0)
                    k = len(slots) - 1
                s = t
            key = (nbytes, a, b)
            dur = xfer_cache.get(key)
            if dur is None:  # a tensor is written back and read by several ops: price each size once
                dur = xfer_cache[key] = transfer_s(nbytes, a, b)
            e = s + dur
            slots[k] = e
            c_lane.append(lane if k == 0 else f"{lane}#{k}")
            c_group.append("links")
            c_name.append(label)
            c_kind.append("transfer")
            c_start.append(s)
            c_end.append(e)
            c_op.append(op)
            c_tensor.append(tensor)
            c_dev.append(account)
            c_bytes.append(nbytes)
            hf = list(flow)
            c_flow.append(hf)
            hop_flows.append(hf)
            stops.append((b, e))
            busy_xfer[account] += dur
            bytes_moved += nbytes
            n_xfer += 1
            if first_s is None:
                first_s, first_e = s, e
            else:  # store and forward: the intermediate device holds the data between its two hops
                alloc(a, tensor if tensor is not None else f"weights:{op}", nbytes, prev_start, e)
            prev_start = s
            t = e
        if first_s is None:
            return earliest, earliest, earliest, hop_flows, stops
        return first_s, first_e, t, hop_flows, stops

    for o in order:
        d = place[o]
        op = ops_map[o]
        ready = dev_free[d]
        staging: list[list[Any]] = []
        in_flows: list[str] = []
        if op.weight_bytes and o not in w_res and d != host:
            s0, _e1, e0, _f, _st = transfer(op.weight_bytes, host, d, dev_free[d], f"weights {o}", o, None, d, [])
            ready = max(ready, e0)
            staging.append(alloc(d, f"weights:{o}", op.weight_bytes, s0, 0.0))
        for t in inputs_of.get(o, ()):
            tloc = loc.get(t)
            if tloc is None:  # only reachable for a tensor whose producer has not run: order was checked
                tloc = loc[t] = {host: 0.0}
                via[(t, host)] = []
            tt = tens[t]
            p = tt.producer
            pd_ = place.get(p) if p is not None else None
            fid = f"{t}>{o}"
            if d in tloc:
                ready = max(ready, tloc[d])
                k = kept.get((t, d))
                if k is not None:
                    staging.append(k)  # its end is pushed to this op's end below
                if pd_ is not None and pd_ != d:  # arrive from another device: draw the arrow
                    for f in via[(t, d)]:
                        f.append(fid)
                    in_flows.append(fid)
                continue
            if t in t_res and pd_ is not None and pd_ in tloc:
                src = pd_
            elif host in tloc:
                src = host
            else:  # pragma: no cover - every tensor is on the host or on its producer's device
                src = min(tloc, key=tloc.get)
            for f in via[(t, src)]:
                f.append(fid)
            in_flows.append(fid)
            s0, e1, e0, hop_flows, _stops = transfer(tt.size_bytes, src, d, tloc[src], t, o, t, d, [fid])
            ready = max(ready, e0)
            ks = kept.get((t, src))
            if ks is not None and e1 > ks[4]:
                ks[4] = e1  # the source copy lives until its first hop has left
            a = alloc(d, t, tt.size_bytes, s0, e0)
            if t in t_res:
                tloc[d] = e0  # a kept copy serves later consumers on this device
                via[(t, d)] = via[(t, src)] + hop_flows
                kept[(t, d)] = a
            staging.append(a)
        dur = cost.compute_s(op, d)
        start, end = ready, ready + dur
        op_start[o], op_end[o] = start, end
        dev_free[d] = end
        busy_compute[d] += dur
        n_ops[d] += 1
        comp_flow = in_flows
        c_lane.append(d)
        c_group.append(d)
        c_name.append(o)
        c_kind.append("compute")
        c_start.append(start)
        c_end.append(end)
        c_op.append(o)
        c_tensor.append(None)
        c_dev.append(d)
        c_bytes.append(None)
        c_flow.append(comp_flow)
        for a in staging:
            if end > a[4]:
                a[4] = end
        for t in outputs_of.get(o, ()):
            tt = tens[t]
            if d == host:
                loc[t] = {host: end}
                via[(t, host)] = [comp_flow]
                continue
            a = alloc(d, t, tt.size_bytes, start, end)
            resident = t in t_res
            if resident:
                loc[t] = {d: end}
                via[(t, d)] = [comp_flow]
                kept[(t, d)] = a
                if not tt.is_output:
                    continue
            fid = f"{t}>host"
            comp_flow.append(fid)
            _s0, e1, e0, wb, _st = transfer(tt.size_bytes, d, host, end, f"{t} -> host", None, t, d, [fid])
            if resident:
                loc[t][host] = e0
            else:  # the device copy is freed: every reader, even on this device, reads the host's
                loc[t] = {host: e0}
            via[(t, host)] = [comp_flow, *wb]
            if e1 > a[4]:
                a[4] = e1  # the device copy is freed once written back (kept ones live on)

    makespan = max(c_end, default=0.0)
    # resident weights live the whole run (graph order, not set order: deterministic rows)
    for o in ops_map:
        if o in w_res and ops_map[o].weight_bytes:
            alloc(place[o], f"weights:{o}", ops_map[o].weight_bytes, 0.0, makespan)
    n_alloc = len(allocs)
    tl = make_timeline(
        {
            "lane": c_lane + [f"{a[0]}:mem" for a in allocs],
            "group": c_group + [a[0] for a in allocs],
            "name": c_name + [a[1] for a in allocs],
            "kind": c_kind + ["alloc"] * n_alloc,
            "start_s": c_start + [a[3] for a in allocs],
            "end_s": c_end + [a[4] for a in allocs],
            "op": c_op + [None] * n_alloc,
            "tensor": c_tensor + [None if a[1].startswith("weights:") else a[1] for a in allocs],
            "device": c_dev + [a[0] for a in allocs],
            "bytes": c_bytes + [a[2] for a in allocs],
            "flow": [",".join(dict.fromkeys(f)) or None for f in c_flow] + [None] * n_alloc,
        }
    )

    # memory peak per device: the same function check_timeline uses, so both agree
    from .timeline import peak_memory_by_device

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
        if peak > dev.memory_bytes * (1 + 1e-9) and name != host:
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
        "bytes_moved": float(bytes_moved),
        "n_transfers": float(n_xfer),
        "peak_mem_frac": float(worst_frac),
    }
    return Evaluation(pl, tl, metrics, per_device, op_start, op_end)
