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
  two devices. Any other output is written back to the host and every consumer off the host reads
  it from there (the patent's "intermediate results in host memory"). Graph inputs start on the
  host; graph outputs end on the host.
* Transfers are store-and-forward over each hop of the route and serialised per link direction
  (``contention=False`` gives every transfer its own channel, the classic HEFT assumption).
* Memory: resident weights for the whole run, fetched weights from fetch to op end, tensors from
  allocation to last use on that device (``alloc`` rows of the timeline). Host memory is not
  tracked (taken to be ample).

``total_latency_s`` is the patent's "system total latency" (claim 5): the sum over devices of the
time each spends computing its ops and moving its own data (fetches into it, write-backs from it).

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
    if len(order) != graph.n_ops or set(order) != set(graph.ops):
        missing = [o for o in graph.ops if o not in set(order)]
        extra = [o for o in order if o not in graph.ops]
        raise GraphError(
            f"order must list every op once: missing {name_list(missing)}; unknown {name_list(extra)}",
            op=(missing or extra or [None])[0],
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
        ``metrics``: ``makespan_s``, ``total_latency_s``, ``energy_J``, ``bytes_moved``,
        ``n_transfers``, ``peak_mem_frac`` (worst device peak / capacity).
        ``per_device``: ``device, n_ops, compute_s, transfer_s, busy_s, peak_mem_bytes, capacity_bytes``.
    """
    pl = Placement.coerce(placement)
    cost = resolve_cost(cost, graph, system)
    order = graph.topological_order() if order is None else _check_order(graph, order)
    devs = system.devices
    ops_map = graph.ops
    tens = graph.tensors
    missing = [o for o in order if o not in pl.device]
    if missing:
        raise GraphError(f"placement lacks op(s) {name_list(missing)}", op=missing[0])
    unsupported = []
    for o in order:
        d = pl.device[o]
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

    host = system.host
    route = system.route
    inputs_of = graph._inputs  # hot loop: skip the checked accessors
    outputs_of = graph._outputs
    w_res = pl.weights_resident
    t_res = pl.tensors_resident

    rows: list[dict[str, Any]] = []
    lane_free: dict[str, list[float]] = {}
    dev_free: dict[str, float] = defaultdict(float)
    busy_compute: dict[str, float] = defaultdict(float)
    busy_xfer: dict[str, float] = defaultdict(float)
    n_ops: dict[str, int] = defaultdict(int)
    bytes_moved = 0.0
    n_xfer = 0
    # where each tensor is available: device -> time
    loc: dict[str, dict[str, float]] = {}
    for t in graph.graph_inputs():
        loc[t] = {host: 0.0}
    # memory bookkeeping: (device, tensor/label, bytes, alloc_time) -> end time decided later
    allocs: list[list[Any]] = []  # [device, name, bytes, start, end]
    open_alloc: dict[tuple[str, str], int] = {}  # (tensor, device) -> index into allocs (kept copies)
    op_start: dict[str, float] = {}
    op_end: dict[str, float] = {}
    flows: dict[str, list[str]] = defaultdict(list)
    comp_idx: dict[str, int] = {}

    def lane_name(a: str, b: str) -> str:
        ln = system.link(a, b)
        if ln is not None and not ln.duplex:
            x, y = sorted((a, b))
            return f"{x}<->{y}"
        return f"{a}->{b}"

    def transfer(nbytes: float, src: str, dst: str, earliest: float, label: str, op: str | None, tensor: str | None,
                 account: str, flow: str | None) -> tuple[float, float]:
        nonlocal bytes_moved, n_xfer
        t = earliest
        first = None
        path = route(src, dst)
        a = src
        for ln in path:
            b = ln.dst if ln.src == a else ln.src
            lane = lane_name(a, b)
            slots = lane_free.setdefault(lane, [0.0])
            k = 0
            if contention:
                s = max(t, slots[0])
            else:
                k = next((i for i, f in enumerate(slots) if f <= t), None)
                if k is None:
                    slots.append(0.0)
                    k = len(slots) - 1
                s = t
            dur = cost.transfer_s(nbytes, a, b)
            e = s + dur
            slots[k] = e
            rows.append(
                {
                    "lane": lane if k == 0 else f"{lane}#{k}",
                    "group": "links",
                    "name": label,
                    "kind": "transfer",
                    "start_s": s,
                    "end_s": e,
                    "op": op,
                    "tensor": tensor,
                    "device": account,
                    "bytes": nbytes,
                    "flow": flow,
                }
            )
            busy_xfer[account] += dur
            bytes_moved += nbytes
            n_xfer += 1
            first = s if first is None else first
            t = e
            a = b
        return (earliest if first is None else first), t

    for o in order:
        d = pl.device[o]
        op = ops_map[o]
        ready = dev_free[d]
        staging: list[int] = []
        if op.weight_bytes and o not in w_res and d != host:
            s0, e0 = transfer(op.weight_bytes, host, d, dev_free[d], f"weights {o}", o, None, d, None)
            ready = max(ready, e0)
            allocs.append([d, f"weights:{o}", op.weight_bytes, s0, None])
            staging.append(len(allocs) - 1)
        for t in inputs_of.get(o, ()):
            tloc = loc.get(t)
            if tloc is None:  # produced by an op not yet run: order was checked, so a graph input
                tloc = loc[t] = {host: 0.0}
            if d in tloc:
                ready = max(ready, tloc[d])
                key = (t, d)
                if key in open_alloc:
                    allocs[open_alloc[key]][4] = None  # extended below
                continue
            tt = tens[t]
            p = tt.producer
            pd_ = pl.device.get(p) if p is not None else None
            if t in t_res and pd_ is not None and pd_ in tloc:
                src = pd_
            elif host in tloc:
                src = host
            else:
                src = min(tloc, key=tloc.get)
            fid = f"{t}>{o}"
            flows[t].append(fid)
            flow = fid
            if p is not None and p in comp_idx:
                if src == host and pd_ != host:
                    flow = f"{t}>host,{fid}"  # chain: producer -> write-back -> this read -> consumer
                elif src == pd_:
                    r = rows[comp_idx[p]]
                    r["flow"] = f"{r['flow']},{fid}" if r["flow"] else fid
            s0, e0 = transfer(tt.size_bytes, src, d, tloc[src], t, o, t, d, flow)
            ready = max(ready, e0)
            allocs.append([d, t, tt.size_bytes, s0, None])
            if t in t_res:
                tloc[d] = e0  # a kept copy serves later consumers on this device
                open_alloc[(t, d)] = len(allocs) - 1
            else:
                staging.append(len(allocs) - 1)
        dur = cost.compute_s(op, d)
        start, end = ready, ready + dur
        op_start[o], op_end[o] = start, end
        dev_free[d] = end
        busy_compute[d] += dur
        n_ops[d] += 1
        in_flows = [f for t in inputs_of.get(o, ()) for f in flows.get(t, ()) if f.endswith(f">{o}")]
        out_flows = []
        rows.append(
            {
                "lane": d,
                "group": d,
                "name": o,
                "kind": "compute",
                "start_s": start,
                "end_s": end,
                "op": o,
                "tensor": None,
                "device": d,
                "bytes": None,
                "flow": None,
            }
        )
        comp_row = len(rows) - 1
        comp_idx[o] = comp_row
        for i in staging:
            allocs[i][4] = end
        for t in inputs_of.get(o, ()):
            key = (t, d)
            if key in open_alloc:
                a = allocs[open_alloc[key]]
                a[4] = max(a[4] or 0.0, end)
        for t in outputs_of.get(o, ()):
            tt = tens[t]
            if d == host:
                loc[t] = {host: end}
                continue
            allocs.append([d, t, tt.size_bytes, start, end])
            idx = len(allocs) - 1
            if t in t_res:
                loc[t] = {d: end}
                open_alloc[(t, d)] = idx
                if tt.is_output:
                    fid = f"{t}>host"
                    out_flows.append(fid)
                    s0, e0 = transfer(tt.size_bytes, d, host, end, f"{t} -> host", None, t, d, fid)
                    loc[t][host] = e0
                    allocs[idx][4] = max(allocs[idx][4], e0)
            else:
                fid = f"{t}>host"
                out_flows.append(fid)
                s0, e0 = transfer(tt.size_bytes, d, host, end, f"{t} -> host", None, t, d, fid)
                loc[t] = {host: e0}
                allocs[idx][4] = e0
        rows[comp_row]["flow"] = ",".join(in_flows + out_flows) or None

    # a kept tensor copied out of its producer's device lives there until the copy ends
    for r in rows:
        if r["kind"] == "transfer" and r["tensor"] is not None:
            t = r["tensor"]
            p = tens[t].producer
            if p is not None and t in t_res:
                key = (t, pl.device[p])
                if key in open_alloc:
                    a = allocs[open_alloc[key]]
                    a[4] = max(a[4] or 0.0, r["end_s"])
    makespan = max((r["end_s"] for r in rows), default=0.0)
    # resident weights live the whole run
    for o in w_res:
        if ops_map[o].weight_bytes:
            allocs.append([pl.device[o], f"weights:{o}", ops_map[o].weight_bytes, 0.0, makespan])
    alloc_rows = [
        {
            "lane": f"{dev}:mem",
            "group": dev,
            "name": nm,
            "kind": "alloc",
            "start_s": s,
            "end_s": e if e is not None else s,
            "op": None,
            "tensor": nm if not str(nm).startswith("weights:") else None,
            "device": dev,
            "bytes": b,
            "flow": None,
        }
        for dev, nm, b, s, e in allocs
    ]
    tl = make_timeline(rows + alloc_rows)

    # memory peak per device
    from .timeline import peak_memory_by_device

    peaks = peak_memory_by_device(tl)
    per_dev = []
    energy = 0.0
    worst_frac = 0.0
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
        if check_memory and peak > dev.memory_bytes * (1 + 1e-9) and name != host:
            raise CapacityError(
                f"device {name!r} needs {peak:.4g} bytes at its peak, above its memory of {dev.memory_bytes:.4g} bytes",
                device=name,
                peak_bytes=peak,
                capacity_bytes=dev.memory_bytes,
            )
    per_device = pd.DataFrame(per_dev)
    metrics = {
        "makespan_s": float(makespan),
        "total_latency_s": float(per_device["busy_s"].sum()),
        "energy_J": float(energy),
        "bytes_moved": float(bytes_moved),
        "n_transfers": float(n_xfer),
        "peak_mem_frac": float(worst_frac),
    }
    return Evaluation(pl, tl, metrics, per_device, op_start, op_end)
