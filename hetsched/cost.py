"""Cost models: how long an op takes on a device, and a transfer over the links.

Every algorithm prices work through a :class:`CostModel`; none has a formula of its own. A cost
model is *bound* to a graph (to know each op's input/output bytes) and a system.

Residency (the seed-000 patent, claim 11, prices an op "with device memory cleared": weights and
inputs in host memory) is modelled additively: bytes that are not resident on the device are
streamed from the host over the host route, so

``compute_s(op, d, weights_resident=False, inputs_resident=False)
= compute_s(op, d) + transfer_s(weight_bytes, host, d) + transfer_s(input_bytes, host, d)``.

``evaluate`` always asks for the resident price and emits the transfers as their own timeline rows,
so nothing is counted twice.

Examples
--------
>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> g, s = chain(3, seed=0), toy_system()
>>> c = RooflineCost(s).bind(g)
>>> op = g.op(g.topological_order()[0])
>>> c.compute_s(op, "gpu0") < c.compute_s(op, "gpu0", weights_resident=False, inputs_resident=False)
True
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Mapping, Protocol, runtime_checkable

from .errors import FormatError, HetschedError
from .graph import Op, OpGraph
from .system import Device, System

__all__ = ["CostModel", "RooflineCost", "TableCost", "resolve_cost"]


@runtime_checkable
class CostModel(Protocol):
    """What every algorithm needs to price work."""

    system: System

    def compute_s(
        self, op: Op | str, device: Device | str, *, weights_resident: bool = True, inputs_resident: bool = True
    ) -> float: ...

    def transfer_s(self, nbytes: float, src: str, dst: str) -> float: ...

    def bind(self, graph: OpGraph) -> "CostModel": ...


class RooflineCost:
    """The default model: ``launch + max(flops / peak, bytes / mem_bandwidth)`` plus host streaming.

    ``bytes`` is the op's on-device traffic: its input and output tensors and its weights.

    Parameters
    ----------
    system : System
    graph : OpGraph, optional
        Bind now, or later with :meth:`bind`.
    efficiency : float
        Fraction of the quoted peak FLOP/s that kernels reach (datasheet peaks are rarely met).
    """

    def __init__(self, system: System, graph: OpGraph | None = None, *, efficiency: float = 1.0) -> None:
        if not (0 < efficiency <= 1):
            raise HetschedError(f"efficiency must be in (0, 1], got {efficiency!r}", field="efficiency")
        self.system = system
        self.efficiency = efficiency
        self.graph = graph
        self._io: dict[str, tuple[float, float]] = {}

    def bind(self, graph: OpGraph) -> "RooflineCost":
        """A copy of this model that knows ``graph``'s tensor sizes."""
        c = self.__class__.__new__(self.__class__)
        c.__dict__.update(self.__dict__)
        c.graph = graph
        c._io = {}
        return c

    # -- helpers -------------------------------------------------------------
    def _op(self, op: Op | str) -> Op:
        if isinstance(op, Op):
            return op
        if self.graph is None:
            raise HetschedError(f"cost model is not bound to a graph; cannot look up op {op!r}", op=str(op))
        return self.graph.op(op)

    def _dev(self, device: Device | str) -> Device:
        return device if isinstance(device, Device) else self.system.device(device)

    def io_bytes(self, op: Op | str) -> tuple[float, float]:
        """``(input_bytes, output_bytes)`` of an op (0, 0 when unbound)."""
        o = self._op(op)
        hit = self._io.get(o.name)
        if hit is None:
            g = self.graph
            if g is None or o.name not in g:
                hit = (float(o.attrs.get("input_bytes", 0)), float(o.attrs.get("output_bytes", 0)))
            else:
                ts = g._tensors  # hot path: unchecked access (the op is known to be in g)
                hit = (
                    float(sum([ts[t].size_bytes for t in g._inputs.get(o.name, ())])),
                    float(sum([ts[t].size_bytes for t in g._outputs.get(o.name, ())])),
                )
            self._io[o.name] = hit
        return hit

    def _resident_s(self, o: Op, d: Device) -> float:
        inb, outb = self.io_bytes(o)
        t_compute = o.flops / (d.peak_flops_for(o.op_type) * self.efficiency)
        t_memory = (inb + outb + o.weight_bytes) / d.mem_bandwidth_Bps
        return d.launch_overhead_s + max(t_compute, t_memory)

    # -- the protocol --------------------------------------------------------
    def compute_s(
        self, op: Op | str, device: Device | str, *, weights_resident: bool = True, inputs_resident: bool = True
    ) -> float:
        """Latency of ``op`` on ``device``; non-resident weights/inputs stream from the host first."""
        o, d = self._op(op), self._dev(device)
        t = self._resident_s(o, d)
        host = self.system.host
        if not weights_resident and o.weight_bytes:
            t += self.transfer_s(o.weight_bytes, host, d.name)
        if not inputs_resident:
            inb, _ = self.io_bytes(o)
            t += self.transfer_s(inb, host, d.name)
        return t

    def transfer_s(self, nbytes: float, src: str, dst: str) -> float:
        """Store-and-forward time over the route: sum of ``latency + bytes / bandwidth`` per hop."""
        if nbytes <= 0 or src == dst:
            return 0.0
        return sum(ln.latency_s + nbytes / ln.bandwidth_Bps for ln in self.system.route(src, dst))


class TableCost(RooflineCost):
    """Measured latencies per (op or op_type) x device, falling back to the roofline.

    Parameters
    ----------
    system : System
    table : dict
        ``{(op_name_or_type, device): latency_s}`` with data resident; an op name beats its type.

    >>> from hetsched.io.systems import toy_system
    >>> s = toy_system()
    >>> tc = TableCost(s, {("Conv", "gpu0"): 1e-3})
    >>> from hetsched.graph import Op
    >>> tc.compute_s(Op("c1", "Conv"), "gpu0")
    0.001
    """

    def __init__(self, system: System, table: Mapping[tuple[str, str], float], graph: OpGraph | None = None) -> None:
        super().__init__(system, graph)
        self.table = {}
        for (key, dev), v in table.items():
            system.device(dev)
            if not (v >= 0):
                raise FormatError(f"measured latency of {key!r} on {dev!r} is negative or NaN: {v!r}", op=key, device=dev)
            self.table[(key, dev)] = float(v)

    @classmethod
    def from_csv(cls, path: str | Path, system: System) -> "TableCost":
        """Read a CSV with columns ``op`` (name or type), ``device``, ``latency_s``."""
        table: dict[tuple[str, str], float] = {}
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            need = {"op", "device", "latency_s"}
            if not need <= set(reader.fieldnames or []):
                raise FormatError(
                    f"{path}: needs columns {sorted(need)}, has {reader.fieldnames}", field="columns"
                )
            for i, row in enumerate(reader, start=2):
                try:
                    table[(row["op"], row["device"])] = float(row["latency_s"])
                except ValueError:
                    raise FormatError(f"{path}:{i}: latency_s {row['latency_s']!r} is not a number", field="latency_s") from None
        return cls(system, table)

    def _resident_s(self, o: Op, d: Device) -> float:
        hit = self.table.get((o.name, d.name))
        if hit is None:
            hit = self.table.get((o.op_type, d.name))
        return hit if hit is not None else super()._resident_s(o, d)


def resolve_cost(cost: CostModel | None, graph: OpGraph, system: System) -> CostModel:
    """The cost model an algorithm should use: the given one bound to ``graph``, else a roofline.

    A roofline/table model built for another version of the same system (same name, e.g. a
    ``with_devices`` what-if copy) is rebound to ``system``; a model for a differently named
    system is an error.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> resolve_cost(None, chain(2), toy_system()).graph.n_ops
    2
    """
    if cost is None:
        return RooflineCost(system, graph)
    if cost.system is not system and cost.system.name != system.name:
        raise HetschedError(
            f"cost model was built for system {cost.system.name!r}, not {system.name!r}", field="cost"
        )
    if cost.system is not system and isinstance(cost, RooflineCost):
        # a what-if copy of the system (``with_devices``...): price with the devices and links of the
        # system being evaluated, never silently with the ones the model was built on
        c = cost.bind(graph)
        c.system = system
        return c
    return cost.bind(graph) if getattr(cost, "graph", None) is not graph else cost
