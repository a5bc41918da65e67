"""Cost models: how long an op takes on a device, and a transfer over the links.

Every algorithm prices work through a :class:`CostModel`; none has a formula of its own. A cost
model is *bound* to a graph (to know each op's input/output bytes) and a system.

Residency (the compute-first mapping patent, claim 11, prices an op "with device memory cleared": weights and
inputs in host memory) is modelled additively: bytes that are not resident on the device are
streamed from the host over the host route, so

``compute_s(op, d, weights_resident=False, inputs_resident=False)
= compute_s(op, d) + transfer_s(weight_bytes, host, d) + transfer_s(input_bytes, host, d)``.

``evaluate`` always asks for the resident price and emits the transfers as their own timeline rows,
so nothing is counted twice.

What an op moves (:meth:`RooflineCost.traffic_bytes`), measured against real runs (issue 19):

* a **view** (``Reshape``, ``Flatten``, ``Squeeze``, ``Unsqueeze``, or any op whose outputs are all
  aliases: torch's ``permute``/``expand``/``slice``/``split``) and an inference-mode ``Dropout``
  (identity) move nothing: they cost the launch overhead only -- unless the op is marked
  ``attrs["copies"]`` (torch's ``reshape`` of a non-contiguous tensor copies it) or
  ``attrs["inplace"]`` (below);
* an **in-place** op (``attrs["inplace"]``) moves its inputs and weights, not its aliasing outputs:
  the lines it reads it writes back, where an out-of-place op also allocates and fills a new
  output (MobileNetV3's in-place ReLUs and hard-swishes ran at 2.5-3.5x below the price of an
  out-of-place one moving both);
* a **gather** (``Gather``, an embedding lookup) reads the rows it returns, not its whole table:
  ``indices + 2 x output`` bytes, whatever its ``weight_bytes``;
* every other op moves its inputs, its outputs and its weights.

Three models share that rule: :class:`RooflineCost` (datasheet peaks times an efficiency, which may be
given per op type or class and may exceed 1 where a measurement says the chip beats its datasheet),
:class:`TableCost` (measured latencies, refusing to apply one to an op of another size) and
:class:`CalibratedCost` (efficiency as a function of work size per op class, fitted by
:func:`hetsched.calibrate`, read from a cost file with :func:`load_cost`).

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

import bisect
import csv
import io
import math
import numbers
import os
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol, Sequence, runtime_checkable

from .errors import FormatError, HetschedError, ThreadMismatchError
from .graph import Op, OpGraph
from .system import Device, System, op_class

__all__ = [
    "CostModel",
    "RooflineCost",
    "TableCost",
    "CalibratedCost",
    "EfficiencyCurve",
    "model_id",
    "curve_type",
    "resolve_cost",
    "load_cost",
    "save_cost",
    "cost_key",
    "VIEW_OP_TYPES",
    "GATHER_OP_TYPES",
    "COST_FORMAT",
    "COST_VERSION",
    "makespan_range",
    "range_factors",
    "range_metrics",
    "describe_range",
    "RANGE_METRICS",
]

#: The metrics a result priced with a calibrated cost adds (:func:`makespan_range`): the range the
#: measured makespan is expected in, from the calibration's held-out residuals.
RANGE_METRICS = ("makespan_lo_s", "makespan_hi_s")

#: Op types that only reinterpret a tensor's metadata (ONNX and torch semantics): launch cost only.
VIEW_OP_TYPES = frozenset(["Reshape", "Flatten", "Squeeze", "Unsqueeze"])
#: Op types that read only the rows they return from their (weight or data) table.
GATHER_OP_TYPES = frozenset(["Gather", "GatherElements", "Embedding"])
COST_FORMAT = "hetsched.cost"
COST_VERSION = 1


@runtime_checkable
class CostModel(Protocol):
    """What every algorithm needs to price work."""

    system: System

    def compute_s(
        self, op: Op | str, device: Device | str, *, weights_resident: bool = True, inputs_resident: bool = True
    ) -> float: ...

    def transfer_s(self, nbytes: float, src: str, dst: str) -> float: ...

    def bind(self, graph: OpGraph) -> "CostModel": ...


def _check_efficiency(eff: float | Mapping[str, float]) -> dict[str, float]:
    """Efficiencies as ``{key: value}`` (a number becomes ``{"default": value}``); any finite value > 0."""
    items = eff.items() if isinstance(eff, Mapping) else [("default", eff)]
    out: dict[str, float] = {}
    for k, v in items:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < math.inf):
            raise HetschedError(f"efficiency must be a finite number > 0, got {v!r}" + (f" for {k!r}" if k != "default" else ""),
                                field="efficiency")
        out[str(k)] = float(v)
    return out


def _finite(v: Any) -> float | None:
    """``v`` as a float when it is a real number (not a bool) in the float range, else None.

    >>> _finite(2), _finite(True), _finite(float("inf")), _finite(10**400), _finite("1")
    (2.0, None, None, None, None)
    """
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return None
    try:
        f = float(v)
    except (OverflowError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _latency(v: Any, where: str, field: str = "latency_s", **culprit: Any) -> float:
    """A measured latency (or op size): a finite number >= 0, else a ``FormatError`` naming ``field``."""
    f = _finite(v)
    if f is None or f < 0:
        raise FormatError(f"{where}: {field} must be a finite number >= 0, got {v!r}"[:300], field=field, **culprit)
    return f


def _whole(v: Any, where: str, field: str, **culprit: Any) -> int:
    """A count (``n_points``, ``weight_bytes``...): a whole finite number >= 0."""
    f = _finite(v)
    if f is None or f < 0 or not f.is_integer():
        raise FormatError(f"{where}: {field} must be a whole number >= 0, got {v!r}"[:300], field=field, **culprit)
    return int(v)


def _mapping(v: Any, where: str, field: str, **culprit: Any) -> Mapping:
    """An optional mapping field (None or absent: empty)."""
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise FormatError(f"{where}: {field} must be a mapping, got {type(v).__name__}", field=field, **culprit)
    return v


class RooflineCost:
    """The default model: ``launch + max(flops / (peak x eff), bytes / mem_bandwidth)`` plus host streaming.

    ``bytes`` is the op's on-device traffic (:meth:`traffic_bytes`): inputs, outputs and weights;
    views and inference dropout move nothing, gathers only the rows they read.

    Parameters
    ----------
    system : System
    graph : OpGraph, optional
        Bind now, or later with :meth:`bind`.
    efficiency : float or dict
        Fraction of the quoted peak FLOP/s that kernels reach (datasheet peaks are rarely met). A
        dict gives it per op type, op class (:func:`~hetsched.system.op_class`) or ``"default"``
        (looked up in that order, 1.0 when absent). Any finite value > 0: a measured efficiency
        above 1 says the chip beats its datasheet (its clock runs above the quoted one).

    >>> from hetsched.system import Device, System
    >>> s = System([Device("d", "cpu", {"default": 1e9}, mem_bandwidth_Bps=1e12)])
    >>> c = RooflineCost(s, efficiency={"conv": 0.5, "default": 1.25})
    >>> c.compute_s(Op("c", "Conv", flops=1e9), "d"), c.compute_s(Op("m", "MatMul", flops=1e9), "d")
    (2.0, 0.8)
    """

    def __init__(self, system: System, graph: OpGraph | None = None, *,
                 efficiency: float | Mapping[str, float] = 1.0) -> None:
        self.system = system
        self.efficiency = efficiency
        self._eff = _check_efficiency(efficiency)
        self._eff_of: dict[str, float] = {}
        self.graph = graph
        # per-op caches keyed by name, each entry with the Op it was worked out for: an op replaced
        # under the same name (or an unbound model priced with look-alike ops) is worked out afresh
        self._io: dict[str, tuple[Op, tuple[float, float]]] = {}
        self._work: dict[str, tuple[Op, tuple[float, bool]]] = {}
        self._res: dict[tuple[str, str], tuple[Op, Device, float]] = {}
        # a tensor resized in place (set_tensor) keeps every Op object: the graph's version tells
        self._seen = graph.version if graph is not None else None

    def bind(self, graph: OpGraph) -> "RooflineCost":
        """A copy of this model that knows ``graph``'s tensor sizes."""
        c = self.__class__.__new__(self.__class__)
        c.__dict__.update(self.__dict__)
        c.graph = graph
        c._forget()
        return c

    def _forget(self) -> None:
        """Drop what was worked out for the bound graph (it changed, or another graph is bound)."""
        self._io = {}
        self._work = {}
        self._res = {}
        self._seen = self.graph.version if self.graph is not None else None

    def _current(self) -> None:
        g = self.graph
        if g is not None and g._version != self._seen:
            self._forget()

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
        self._current()
        cached = self._io.get(o.name)
        if cached is not None and cached[0] is o:
            return cached[1]
        g = self.graph
        if g is None or o.name not in g:
            hit = (float(o.attrs.get("input_bytes", 0)), float(o.attrs.get("output_bytes", 0)))
        else:
            ts = g._tensors  # hot path: unchecked access (the op is known to be in g)
            hit = (
                float(sum([ts[t].size_bytes for t in g._inputs.get(o.name, ())])),
                # an op's scratch workspace (torch importer) is memory, not traffic
                float(sum([ts[t].size_bytes for t in g._outputs.get(o.name, ())
                           if not (ts[t].attrs and ts[t].attrs.get("kind") == "workspace")])),
            )
        self._io[o.name] = (o, hit)
        return hit

    def traffic_bytes(self, op: Op | str) -> tuple[float, bool]:
        """``(bytes the op moves on its device, launch_only)``; see the module notes.

        >>> g = OpGraph()
        >>> _ = g.add_op("emb", "Gather", weight_bytes=10**8)
        >>> _ = g.add_tensor("ids", 80, consumers=["emb"])
        >>> _ = g.add_tensor("rows", 4000, producer="emb", is_output=True)
        >>> from hetsched.io.systems import toy_system
        >>> RooflineCost(toy_system(), g).traffic_bytes("emb")      # not the 100 MB table
        (8080.0, False)
        """
        o = self._op(op)
        self._current()
        cached = self._work.get(o.name)
        if cached is not None and cached[0] is o:
            return cached[1]
        hit = self._traffic(o)
        self._work[o.name] = (o, hit)
        return hit

    def _traffic(self, o: Op) -> tuple[float, bool]:
        inb, outb = self.io_bytes(o)
        t = o.op_type
        g = self.graph
        bound = g is not None and o.name in g
        if (t in VIEW_OP_TYPES and not o.attrs.get("copies")) or (t == "Dropout" and not o.attrs.get("training", False)):
            return 0.0, True
        if bound:
            ts = g._tensors
            outs = [x for x in g._outputs.get(o.name, ()) if not (ts[x].attrs and ts[x].attrs.get("kind") == "workspace")]
            if outs and all(ts[x].alias_of is not None for x in outs) and not o.attrs.get("inplace"):
                return 0.0, True  # every output shares its input's storage: nothing is copied
            if o.attrs.get("inplace"):
                outb -= float(sum(ts[x].size_bytes for x in outs if ts[x].alias_of is not None))
        if t in GATHER_OP_TYPES:
            if bound and not o.weight_bytes:
                # an activation table: the largest input is the data, read only where indexed
                sizes = [g._tensors[x].size_bytes for x in g._inputs.get(o.name, ())]
                inb = float(sum(sizes) - max(sizes)) if sizes else 0.0
            return inb + 2.0 * outb, False
        return inb + outb + o.weight_bytes, False

    def efficiency_for(self, op_type: str) -> float:
        """The efficiency applied to ``op_type``: its own entry, its class's, ``default``, else 1."""
        hit = self._eff_of.get(op_type)
        if hit is None:  # once per op type (pricing is a hot loop)
            e = self._eff
            hit = e[op_type] if op_type in e else e.get(op_class(op_type), e.get("default", 1.0))
            self._eff_of[op_type] = hit
        return hit

    def roofline_s(self, o: Op, d: Device) -> float:
        """``max(flops / peak, bytes / bandwidth)`` at the device's quoted numbers (no launch, no efficiency)."""
        nbytes, launch_only = self.traffic_bytes(o)
        if launch_only:
            return 0.0
        return max(o.flops / d.peak_flops_for(o.op_type), nbytes / d.mem_bandwidth_Bps)

    def _resident_s(self, o: Op, d: Device) -> float:
        nbytes, launch_only = self.traffic_bytes(o)
        if launch_only:
            return d.launch_overhead_s
        t_compute = o.flops / (d.peak_flops_for(o.op_type) * self.efficiency_for(o.op_type))
        t_memory = nbytes / d.mem_bandwidth_Bps
        return d.launch_overhead_s + max(t_compute, t_memory)

    # -- the protocol --------------------------------------------------------
    def compute_s(
        self, op: Op | str, device: Device | str, *, weights_resident: bool = True, inputs_resident: bool = True
    ) -> float:
        """Latency of ``op`` on ``device``; non-resident weights/inputs stream from the host first."""
        o, d = self._op(op), self._dev(device)
        self._current()
        # the resident time is a pure function of the (op, device) objects: every algorithm sharing this
        # model (a panel's comparison runs six mappers) prices each pair once; an op or device replaced
        # under the same name is priced afresh (as the per-op caches above)
        key = (o.name, d.name)
        hit = self._res.get(key)
        if hit is not None and hit[0] is o and hit[1] is d:
            t = hit[2]
        else:
            t = self._resident_s(o, d)
            self._res[key] = (o, d, t)
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
        return sum(ln.time_s(nbytes) for ln in self.system.route(src, dst))


def op_signature(cost: RooflineCost, op: Op) -> tuple[float, float]:
    """What identifies an op's size for a measured latency: ``(flops, input + output bytes)``."""
    inb, outb = cost.io_bytes(op)
    return float(op.flops), float(inb + outb)


def _same_size(a: tuple[float, float], b: tuple[float, float], rtol: float = 1e-6) -> bool:
    return all(abs(x - y) <= rtol * max(abs(x), abs(y), 1.0) for x, y in zip(a, b))


class TableCost(RooflineCost):
    """Measured latencies per (op or op_type) x device, falling back to the roofline.

    A latency measured for one op *size* does not hold for another: an entry keyed by op name
    remembers the size it was measured at (its ``(flops, input + output bytes)``, from ``shapes``,
    from the ``flops``/``bytes`` columns of a CSV, or from ``graph`` when one is given here). Pricing
    an op of that name whose size differs (the batch-1 table applied to a batch-8 graph) is refused
    (``on_mismatch="error"``, the default: a :class:`~hetsched.errors.HetschedError` naming the op),
    or warned about once and priced by the roofline (``"roofline"``), or used anyway
    (``"ignore"``). An op-name entry with no recorded size is applied as is, with one warning per
    model the first time it prices an op. Op-type entries (``"Conv"``) are per-type constants by
    design and are used for every size.

    Parameters
    ----------
    system : System
    table : dict
        ``{(op_name_or_type, device): latency_s}`` with data resident; an op name beats its type.
    graph : OpGraph, optional
        Bind now; also records the size of every op-name entry found in it.
    shapes : dict, optional
        ``{op_name: (flops, input + output bytes)}`` at measurement time.
    on_mismatch : {"error", "roofline", "ignore"}

    >>> from hetsched.io.systems import toy_system
    >>> s = toy_system()
    >>> tc = TableCost(s, {("Conv", "gpu0"): 1e-3})
    >>> tc.compute_s(Op("c1", "Conv"), "gpu0")
    0.001
    >>> tc = TableCost(s, {("c1", "gpu0"): 1e-3}, shapes={"c1": (1e9, 4e6)})
    >>> tc.compute_s(Op("c1", "Conv", flops=8e9), "gpu0")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: TableCost: op 'c1' was measured at 1e+09 FLOPs, 4e+06 bytes but is priced at 8e+09 FLOPs, 0 bytes (another batch or shape?): recalibrate (hetsched.calibrate) or pass on_mismatch='roofline'
    """

    def __init__(self, system: System, table: Mapping[tuple[str, str], float], graph: OpGraph | None = None, *,
                 shapes: Mapping[str, tuple[float, float]] | None = None, on_mismatch: str = "error") -> None:
        super().__init__(system, graph)
        if on_mismatch not in ("error", "roofline", "ignore"):
            raise HetschedError(f"on_mismatch must be 'error', 'roofline' or 'ignore', got {on_mismatch!r}",
                                field="on_mismatch")
        self.on_mismatch = on_mismatch
        self.table = {}
        for (key, dev), v in table.items():
            system.device(dev)
            self.table[(key, dev)] = _latency(v, f"measured latency of {key!r} on {dev!r}", op=key, device=dev)
        self.shapes: dict[str, tuple[float, float]] = {}
        if graph is not None:
            for key, _dev in self.table:
                if key in graph.ops:
                    self.shapes[key] = op_signature(self, graph.op(key))
        for k, v in (shapes or {}).items():
            try:
                fl, nb = ((),) if isinstance(v, (str, bytes)) else v
            except (TypeError, ValueError):
                raise FormatError(f"the size of {k!r} must be (flops, bytes), got {v!r}"[:300], op=str(k),
                                  field="shapes") from None
            where = f"the size of {k!r}"
            self.shapes[str(k)] = (_latency(fl, where, "flops", op=str(k)), _latency(nb, where, "bytes", op=str(k)))
        self._warned: set[str] = set()  # shared by every bound copy: one warning per model

    @classmethod
    def from_csv(cls, path: str | Path, system: System, *, on_mismatch: str = "error") -> "TableCost":
        """Read a CSV with columns ``op`` (name or type), ``device``, ``latency_s`` and optionally
        ``flops`` and ``bytes`` (the op's size when measured; see the class notes)."""
        from .io.files import read_text

        name = Path(path).name
        table: dict[tuple[str, str], float] = {}
        shapes: dict[str, tuple[float, float]] = {}
        try:
            reader = csv.DictReader(io.StringIO(read_text(path, "cost table"), newline=""))
            need = {"op", "device", "latency_s"}
            if not need <= set(reader.fieldnames or []):
                raise FormatError(
                    f"{name}: needs columns {sorted(need)}, has {reader.fieldnames}", field="columns"
                )
            sized = {"flops", "bytes"} <= set(reader.fieldnames or [])
            for i, row in enumerate(reader, start=2):
                vals: dict[str, float | None] = {}
                for col in ("op", "device", "latency_s", "flops", "bytes") if sized else ("op", "device", "latency_s"):
                    v = row.get(col)
                    if v is None:  # a row shorter than the header
                        raise FormatError(f"{name}:{i}: {col} missing", field=col)
                    if col in ("op", "device"):
                        continue
                    if col != "latency_s" and v.strip() == "":
                        vals[col] = None
                        continue
                    try:
                        num = float(v)
                    except ValueError:
                        raise FormatError(f"{name}:{i}: {col} {v[:60]!r} is not a number", field=col) from None
                    vals[col] = _latency(num, f"{name}:{i}", col, op=row["op"])
                table[(row["op"], row["device"])] = vals["latency_s"]
                if sized and vals["flops"] is not None and vals["bytes"] is not None:
                    shapes[row["op"]] = (vals["flops"], vals["bytes"])
        except csv.Error as e:  # a field above the csv module's size limit, a NUL byte...
            raise FormatError(f"{name}: not a readable CSV: {e}", field="<csv>") from None
        return cls(system, table, shapes=shapes, on_mismatch=on_mismatch)

    def _resident_s(self, o: Op, d: Device) -> float:
        hit = self.table.get((o.name, d.name))
        if hit is not None:
            rec = self.shapes.get(o.name)
            if rec is None:
                if "<unsized>" not in self._warned:
                    self._warned.add("<unsized>")
                    warnings.warn(f"TableCost: the latency of op {o.name!r} has no recorded size (flops/bytes), so it is "
                                  "applied whatever the op's size; record sizes (shapes=, CSV columns flops and bytes, "
                                  "or build the table with its graph) to have another batch or shape caught",
                                  UserWarning, stacklevel=4)
            elif self.on_mismatch != "ignore":
                now = op_signature(self, o)
                if not _same_size(rec, now):
                    msg = (f"TableCost: op {o.name!r} was measured at {rec[0]:.3g} FLOPs, {rec[1]:.3g} bytes but is priced "
                           f"at {now[0]:.3g} FLOPs, {now[1]:.3g} bytes (another batch or shape?)")
                    if self.on_mismatch == "error":
                        raise HetschedError(msg + ": recalibrate (hetsched.calibrate) or pass on_mismatch='roofline'",
                                            op=o.name, device=d.name, field="shape")
                    if o.name not in self._warned:
                        self._warned.add(o.name)
                        warnings.warn(msg + ": priced by the roofline instead", UserWarning, stacklevel=4)
                    return super()._resident_s(o, d)
            return hit
        hit = self.table.get((o.op_type, d.name))
        return hit if hit is not None else super()._resident_s(o, d)


class EfficiencyCurve:
    """Achieved efficiency as a function of work size, piecewise linear in ``log10(work_s)``.

    ``work_s`` is an op's roofline time at the reference peak and bandwidth (``max(flops / peak,
    bytes / bandwidth)``): one axis for compute- and memory-bound ops alike. Efficiency is the
    roofline time over the measured time (launch excluded). Outside the measured range the curve
    is flat (the nearest measured efficiency: no extrapolated trend).

    >>> c = EfficiencyCurve([1e-5, 1e-3], [0.2, 0.8])
    >>> c(1e-5), round(c(1e-4), 6), c(1.0), c(1e-9)
    (0.2, 0.5, 0.8, 0.2)
    """

    __slots__ = ("work_s", "efficiency", "_x", "n_points")

    def __init__(self, work_s: Sequence[float], efficiency: Sequence[float], *, n_points: int | None = None) -> None:
        work_s, efficiency = _points(work_s, "work_s"), _points(efficiency, "efficiency")
        if len(work_s) != len(efficiency) or not work_s:
            raise FormatError(f"an efficiency curve needs as many work_s as efficiency values, at least one (got "
                              f"{len(work_s)} and {len(efficiency)})", field="curves")
        pts = sorted(zip(work_s, efficiency))
        for w, e in pts:
            if not (w > 0 and math.isfinite(w)) or not (e > 0 and math.isfinite(e)):
                raise FormatError(f"efficiency curve point ({w!r}, {e!r}): work_s and efficiency must be finite and > 0",
                                  field="curves")
        self.work_s = [w for w, _ in pts]
        self.efficiency = [e for _, e in pts]
        self._x = [math.log10(w) for w in self.work_s]
        self.n_points = len(pts) if n_points is None else _whole(n_points, "efficiency curve", "n_points")

    def __call__(self, work_s: float) -> float:
        x, e = self._x, self.efficiency
        if work_s <= 0:
            return e[0]
        lx = math.log10(work_s)
        if lx <= x[0]:
            return e[0]
        if lx >= x[-1]:
            return e[-1]
        i = bisect.bisect_right(x, lx)
        f = (lx - x[i - 1]) / (x[i] - x[i - 1])
        return e[i - 1] + f * (e[i] - e[i - 1])

    def time_s(self, work_s: float) -> float:
        """Time of ``work_s`` of work (launch excluded): ``work_s / self(work_s)``, but never below the
        time of the knot to its left.

        Why: efficiency rising steeply between two knots (a few bytes all launch, then a kernel
        that streams) makes ``work / efficiency`` dip between them -- 8 KB priced below 1 KB.
        Between knots ``log(work / efficiency)`` is convex in ``log(work)``, so holding it at the
        left knot's time makes it non-decreasing wherever the knots' own times are
        (:func:`hetsched.calibrate.fit_curves` makes them so).

        >>> c = EfficiencyCurve([1e-8, 2e-7], [1e-8 / 2e-6, 2e-7 / 2e-6])   # both knots take 2 us
        >>> round(1e-7 / c(1e-7) * 1e6, 2), round(c.time_s(1e-7) * 1e6, 2)
        (1.28, 2.0)
        """
        t = work_s / self(work_s)
        if work_s <= 0:
            return t
        i = bisect.bisect_right(self.work_s, work_s) - 1
        if 0 <= i < len(self.work_s) - 1:
            t = max(t, self.work_s[i] / self.efficiency[i])
        return t

    def to_dict(self) -> dict[str, Any]:
        return {"work_s": list(self.work_s), "efficiency": list(self.efficiency), "n_points": self.n_points}

    def __repr__(self) -> str:
        return f"EfficiencyCurve({len(self.work_s)} knots, {self.n_points} points, eff {min(self.efficiency):.3g}..{max(self.efficiency):.3g})"


def _points(v: Any, field: str) -> list[float]:
    """A curve's ``work_s`` or ``efficiency``: a list of numbers (NaN and inf are the caller's check)."""
    if isinstance(v, (str, bytes, Mapping)) or not hasattr(v, "__iter__"):
        raise FormatError(f"an efficiency curve's {field} must be a list of numbers, got {v!r}"[:300], field="curves")
    out = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise FormatError(f"an efficiency curve's {field} must be a list of numbers, holds {x!r}"[:300],
                              field="curves")
        try:
            out.append(float(x))
        except OverflowError:
            raise FormatError(f"an efficiency curve's {field} holds {x!r}, beyond any float"[:300],
                              field="curves") from None
    return out


_CURVE_FIELDS = ("work_s", "efficiency", "n_points")


def _curve(c: Any, where: str, dev: str, fld: str) -> EfficiencyCurve:
    """A curve of a cost file's device (``where`` names the file, device and curve key in errors)."""
    if isinstance(c, EfficiencyCurve):
        return c
    if not isinstance(c, Mapping) or not {"work_s", "efficiency"} <= set(c):
        raise FormatError(f"{where} needs work_s and efficiency", device=dev, field=fld)
    extra = sorted((k for k in c if k not in _CURVE_FIELDS), key=str)
    if extra:
        raise FormatError(f"{where}: unknown field(s) {extra}", device=dev, field=fld)
    try:
        return EfficiencyCurve(c["work_s"], c["efficiency"], n_points=c.get("n_points"))
    except FormatError as e:
        raise FormatError(f"{where}: {e.message}", device=dev, field=fld) from None


# a Gemm with fewer rows than this is a matrix-vector product (see curve_type)
GEMV_ROWS = 8


def curve_type(op: Op) -> str:
    """The op type a calibration fits and prices ``op`` under: its type, except that a grouped
    (depthwise) convolution (``attrs["groups"] > 1``, which the importers record) is
    ``DepthwiseConv`` (``DepthwiseConv_grad`` for its backward): at the same work it runs several
    times below a dense convolution (one filter per channel: no reuse across input channels), so the
    two never share a curve. One with a kernel wider than 3x3 (``attrs["kernel"]``: MobileNetV3's and
    EfficientNet's 5x5, ConvNeXt's 7x7) is ``DepthwiseConvWide`` (``DepthwiseConvWide_grad``): torch's
    CPU kernels for a depthwise 3x3 are specialised, and on this project's 2-core EPYC the backward of
    a 5x5 or 7x7 runs at 5-7 GFLOP/s against 12-30 for a 3x3 of the same shape, while its forward
    runs about 2x *above* the 3x3's rate (both measured with ``aten.convolution_backward`` and
    ``Conv2d``, 1 thread). Fitted together, one curve priced MobileNetV3-S's 5x5 backward at 0.4x
    its time. Its class stays ``conv``; a cost without the wide curve prices it by the depthwise one
    (:func:`curve_chain`).

    A ``Gemm`` with weights and fewer than ``GEMV_ROWS`` rows (by ``flops / weight_bytes``: ``2 rows``
    FLOPs per 4-byte weight; half the rows with 16-bit weights) is a matrix-vector product,
    ``Gemv``: it streams its weights once with no reuse across rows, so its efficiency at a given
    work is not a GEMM's. The calibration models' only ones (ResNet-50's classifier, BERT's
    pooler; 1 row, in-model efficiency 0.54-0.64) were the Gemm curve's smallest knots, and priced
    an unseen T5's 64-row projections (16-34 MFLOP, measured at 0.86 of the reference roofline)
    1.3-1.4x slow. A cost without the ``Gemv`` curve prices it by ``Gemm`` (:func:`curve_chain`).

    >>> curve_type(Op("c", "Conv", attrs={"groups": 32})), curve_type(Op("c", "Conv_grad", attrs={"groups": 8}))
    ('DepthwiseConv', 'DepthwiseConv_grad')
    >>> curve_type(Op("c", "Conv_grad", attrs={"groups": 8, "kernel": [5, 5]}))
    'DepthwiseConvWide_grad'
    >>> curve_type(Op("c", "Conv")), curve_type(Op("r", "Relu", attrs={"groups": 2}))
    ('Conv', 'Relu')
    >>> fc = Op("fc", "Gemm", flops=2 * 2048 * 1000, weight_bytes=4 * 2048 * 1000)   # one row
    >>> curve_type(fc), curve_type(Op("q", "Gemm", flops=2 * 64 * 512 * 512, weight_bytes=4 * 512 * 512))
    ('Gemv', 'Gemm')
    """
    t = op.op_type
    # 2 rows FLOPs per 4-byte weight; the half row keeps 8 rows (bias bytes: just under 4) a Gemm
    if t == "Gemm" and op.weight_bytes > 0 and op.flops < (GEMV_ROWS - 0.5) / 2 * op.weight_bytes:
        return "Gemv"
    if t in ("Conv", "Conv_grad") and op.attrs and (op.attrs.get("groups") or 1) > 1:
        kernel = op.attrs.get("kernel") or ()
        wide = math.prod(int(k) for k in kernel) > 9 if kernel else False
        return ("DepthwiseConvWide" if wide else "DepthwiseConv") + t[4:]
    return t


def curve_chain(op_type: str, cls: str | None = None) -> tuple[str, ...]:
    """The curves that may price a curve type, first found first: the type, its parent type (a
    wide depthwise convolution's is the depthwise one, for a cost file fitted before the split),
    its class (``cls`` when given), ``default``.

    >>> curve_chain("DepthwiseConvWide_grad")
    ('DepthwiseConvWide_grad', 'DepthwiseConv_grad', 'conv', 'default')
    >>> curve_chain("Relu"), curve_chain("Gemv", "matmul")
    (('Relu', 'elementwise', 'default'), ('Gemv', 'Gemm', 'matmul', 'default'))
    """
    parent = (("DepthwiseConv" + op_type[len("DepthwiseConvWide"):],) if op_type.startswith("DepthwiseConvWide")
              else ("Gemm",) if op_type == "Gemv" else ())
    return tuple(dict.fromkeys((op_type, *parent, cls or op_class(op_type), "default")))


def model_id(graph: OpGraph | None) -> str | None:
    """Which model a graph is, for layer factors: ``meta["model"]``, else its name up to ``(``.

    >>> model_id(OpGraph("resnet50(batch=8)")), model_id(OpGraph("g", meta={"model": "bert_base"}))
    ('resnet50', 'bert_base')
    """
    if graph is None:
        return None
    return str(graph.meta.get("model") or graph.name.split("(")[0]).strip() or None


class CalibratedCost(RooflineCost):
    """Shape-aware measured costs: per op class, efficiency as a function of work size.

    For an op on a calibrated device: ``(launch + work_here / efficiency(work_ref)) * layer``:

    * ``work`` is the op's roofline time, ``flops / peak`` and ``bytes / bandwidth`` combined by
      ``max`` (compute and traffic overlap) or ``sum`` (they do not: what :func:`hetsched.calibrate`
      fits on a CPU, whose cores stream a layer's weights and then compute, so a matrix product
      with big weights and few rows runs below its compute peak). ``work_ref`` uses the reference
      peak and bandwidth of the calibration, ``work_here`` the system's device numbers: with the
      system :func:`hetsched.calibrate` wrote they are equal; a what-if copy of the device (twice
      the peak) scales the time by the roofline, as :class:`RooflineCost` does;
    * the efficiency curve of an op is looked up by op type, then op class, then ``default``;
      views and inference dropout cost the launch only (``launch_by_type`` when measured);
    * ``layer`` (default 1) is a **layer factor**: an op of a calibrated model (same
      :func:`model_id`, op name, op type and weight bytes as an op of a calibration workload, e.g.
      the same zoo twin at another batch size) keeps what it measured relative to the curves
      (``measured / predicted`` at the calibration size). It carries what the curves of a class
      cannot know about one layer (a 1x1 convolution with 64 input channels runs below the 3x3
      convolutions of the same work), and is applied at the op's new size, through the curves;
    * **cold ops** (when ``cache_bytes`` and ``cold_curves`` are given): a memory-bound op
      (``bytes / bandwidth > flops / peak``) that moves more than the core's private cache
      (``cache_bytes["private"]``) in a graph whose working set (:meth:`working_set_bytes`)
      exceeds the last-level cache (``cache_bytes["last_level"]``) is priced by its type's *cold*
      curve (the sweep's, each point timed after the caches were evicted and its input rewritten,
      as its producer would have), without layer factor.
      Why: the workload curves and layer factors are measured in calibration models whose
      activations stay in the caches (ResNet-50 at batch 1 keeps a layer's tensors in L2/L3, and
      whether a 200 KB ReLU follows a 1x1 or a 3x3 convolution halves or doubles its time), so
      their efficiencies (up to twice the DRAM copy rate) and per-layer differences describe cache
      states a larger graph does not have: at batch 8 the same layers stream from memory, at the
      sweep's efficiency, and layers of one shape cost about the same.

    Devices without curves are priced by the roofline.

    **Threads.** A device calibrated with ``threads`` torch threads (the cost file records it) prices
    only runs with that many: when the system's device says another count (``attrs["threads"]``,
    which :func:`hetsched.calibrate` writes) pricing raises
    :class:`~hetsched.errors.ThreadMismatchError`, as a latency table refuses an op of another
    size; :meth:`check_threads` is the same check for a run whose thread count the caller knows.

    **Error range.** ``residuals`` (what :func:`hetsched.calibrate` measured on held-out models,
    never fitted) give per op class (or type; ``all`` for the rest) the range ``[lo, hi]`` of the
    ratio *measured / predicted* of one class's summed time in one held-out model run.
    :meth:`error_range` propagates them to a total: each op's predicted time is scaled by its
    class's ``lo`` and by its ``hi`` and the scaled times are summed (errors of a class are taken
    to move together, in the same direction across classes: the conservative, comonotone
    sum), so a run whose time is 70 % convolutions gets mostly the convolutions' range. Results
    priced with such a cost carry ``makespan_lo_s`` / ``makespan_hi_s`` (:func:`makespan_range`).

    Parameters
    ----------
    system : System
    devices : dict
        ``{device: {"peak_flops": float, "mem_bandwidth_Bps": float, "launch_overhead_s": float,
        "curves": {key: EfficiencyCurve}, "launch_by_type": {op_type: seconds}, "work": "max"|"sum",
        "layers": {model: {op: {"op_type": str, "weight_bytes": int, "factor": float}}},
        "cache_bytes": {"private": int, "last_level": int}, "cold_curves": {key: EfficiencyCurve}}}``
        (what :func:`load_cost` reads); ``launch_by_type``, ``work`` (default ``max``), ``layers``,
        ``cache_bytes`` and ``cold_curves`` (by op type or op class) are optional.
    graph : OpGraph, optional
    meta : dict, optional
        Provenance (machine, torch version, threads, workloads, date).

    >>> from hetsched.system import Device, System
    >>> s = System([Device("cpu0", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10, launch_overhead_s=0)])
    >>> curve = EfficiencyCurve([1e-6, 1e-3], [0.1, 0.5])
    >>> c = CalibratedCost(s, {"cpu0": {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10, "launch_overhead_s": 2e-6,
    ...                                 "curves": {"conv": curve}}})
    >>> round(c.compute_s(Op("c", "Conv", flops=1e8), "cpu0"), 9)    # 1 ms of roofline work at 50 %
    0.002002
    """

    def __init__(self, system: System, devices: Mapping[str, Mapping[str, Any]], graph: OpGraph | None = None, *,
                 meta: Mapping[str, Any] | None = None, source: str = "calibration") -> None:
        super().__init__(system, graph)
        self.devices: dict[str, dict[str, Any]] = {}
        for dev, spec in devices.items():
            if dev not in system.device_names:
                raise HetschedError(f"{source}: device {dev!r} is not in system {system.name!r} "
                                    f"(it has {', '.join(system.device_names)})", device=dev, field="devices")
            if not isinstance(spec, Mapping):
                raise FormatError(f"{source}: devices.{dev} must be a mapping", device=str(dev), field="devices")
            clean: dict[str, Any] = {}
            for k in ("peak_flops", "mem_bandwidth_Bps"):
                v = spec.get(k)
                if (_finite(v) or 0) <= 0:
                    raise FormatError(f"{source}: device {dev!r}: {k} must be a number > 0, got {v!r}", device=dev, field=k)
                clean[k] = float(v)
            lo = spec.get("launch_overhead_s", 0.0)
            if _finite(lo) is None or lo < 0:
                raise FormatError(f"{source}: device {dev!r}: launch_overhead_s must be a number >= 0, got {lo!r}",
                                  device=dev, field="launch_overhead_s")
            clean["launch_overhead_s"] = float(lo)
            by_type = spec.get("launch_by_type") or {}
            if not isinstance(by_type, Mapping) or not all(_finite(v) is not None and v >= 0 for v in by_type.values()):
                raise FormatError(f"{source}: device {dev!r}: launch_by_type must map op types to seconds >= 0",
                                  device=dev, field="launch_by_type")
            clean["launch_by_type"] = {str(k): float(v) for k, v in by_type.items()}
            work = spec.get("work", "max")
            if work not in ("max", "sum"):
                raise FormatError(f"{source}: device {dev!r}: work must be 'max' or 'sum', got {work!r}", device=dev,
                                  field="work")
            clean["work"] = work
            layers: dict[str, dict[str, tuple[str, int, float]]] = {}
            where = f"{source}: device {dev!r}"
            for model, ops in _mapping(spec.get("layers"), where, "layers", device=dev).items():
                if not isinstance(ops, Mapping):
                    raise FormatError(f"{source}: device {dev!r}: layers.{model} must map op names to factors",
                                      device=dev, field="layers")
                rows = {}
                for op_name, row in ops.items():
                    if not isinstance(row, Mapping) or "op_type" not in row or _finite(row.get("factor")) is None:
                        raise FormatError(f"{source}: device {dev!r}: layers.{model}.{op_name} needs op_type and a "
                                          "numeric factor", device=dev, op=str(op_name), field="layers")
                    f = float(row["factor"])
                    wb = _whole(row.get("weight_bytes", 0), f"{where}: layers.{model}.{op_name}", "weight_bytes",
                                device=dev, op=str(op_name))
                    rows[str(op_name)] = (str(row["op_type"]), wb, f)
                    if not (0 < f < math.inf):
                        raise FormatError(f"{source}: device {dev!r}: layer factor of {op_name!r} must be > 0, got {f!r}",
                                          device=dev, op=str(op_name), field="layers")
                layers[str(model)] = rows
            clean["layers"] = layers
            clean["curves"] = {str(k): _curve(c, f"{where}: curves.{k}", dev, "curves")
                               for k, c in _mapping(spec.get("curves"), where, "curves", device=dev).items()}
            cache = spec.get("cache_bytes") or {}
            if not isinstance(cache, Mapping) or (cache and set(cache) != {"private", "last_level"}) or not all(
                    (_finite(v) or 0) > 0 for v in cache.values()):
                raise FormatError(f"{source}: device {dev!r}: cache_bytes must map private and last_level to bytes > 0, "
                                  f"got {cache!r}", device=dev, field="cache_bytes")
            clean["cache_bytes"] = {str(k): float(v) for k, v in cache.items()}
            clean["cold_curves"] = {str(k): _curve(c, f"{where}: cold_curves.{k}", dev, "cold_curves")
                                    for k, c in _mapping(spec.get("cold_curves"), where, "cold_curves", device=dev).items()}
            threads = spec.get("threads")
            if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
                raise FormatError(f"{source}: device {dev!r}: threads must be a positive integer, got {threads!r}",
                                  device=dev, field="threads")
            clean["threads"] = threads
            clean["residuals"] = _check_residuals(spec.get("residuals") or {}, source, dev)
            self.devices[dev] = clean
        self.meta = dict(_mapping(meta, source, "meta"))
        self._model = model_id(graph)
        self._ws: float | None = None

    def _forget(self) -> None:
        super()._forget()
        self._model = model_id(self.graph)
        self._ws = None

    def working_set_bytes(self) -> float:
        """The most bytes one op and the ops producing its inputs move, in the bound graph (0 unbound).

        What the caches must hold for the op to find its inputs where their producers left them.

        >>> from hetsched.system import Device, System
        >>> g = OpGraph()
        >>> _ = g.add_op("a", "Relu"); _ = g.add_op("b", "Relu")
        >>> _ = g.add_tensor("x", 100, consumers=["a"]); _ = g.add_tensor("y", 200, producer="a", consumers=["b"])
        >>> _ = g.add_tensor("z", 400, producer="b", is_output=True)
        >>> s = System([Device("cpu0", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)])
        >>> CalibratedCost(s, {"cpu0": {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10}}).bind(g).working_set_bytes()
        900.0
        """
        self._current()
        if self._ws is None:
            g, ws = self.graph, 0.0
            if g is not None:
                for name in g.ops:
                    ws = max(ws, self.traffic_bytes(name)[0] + sum(self.traffic_bytes(p)[0] for p in g.predecessors(name)))
            self._ws = ws
        return self._ws

    def cold_curve(self, o: Op, device: str) -> EfficiencyCurve | None:
        """The cold curve pricing ``o`` on ``device`` if ``o`` is a cold op (see the class notes), else None."""
        spec = self.devices.get(device)
        if not spec or not spec["cache_bytes"] or not spec["cold_curves"]:
            return None
        t = curve_type(o)
        curve = next((spec["cold_curves"][k] for k in curve_chain(t)[:-1] if k in spec["cold_curves"]), None)
        if curve is None:
            return None
        nbytes, launch_only = self.traffic_bytes(o)
        if launch_only or nbytes / spec["mem_bandwidth_Bps"] <= o.flops / spec["peak_flops"]:
            return None  # a compute-bound op's time is not its traffic's
        cache = spec["cache_bytes"]
        if nbytes <= cache["private"] or self.working_set_bytes() <= cache["last_level"]:
            return None
        return curve

    def curve_for(self, device: str, op_type: str, cls: str | None = None) -> tuple[str, EfficiencyCurve] | None:
        """``(key, curve)`` pricing ``op_type`` on ``device`` (type, class -- ``cls`` when given --,
        ``default``), or None."""
        hits = self._curves(device, op_type, cls)
        return hits[0] if hits else None

    def _curves(self, device: str, op_type: str, cls: str | None = None) -> list[tuple[str, EfficiencyCurve]]:
        spec = self.devices.get(device)
        if spec is None:
            return []
        curves = spec["curves"]
        return [(k, curves[k]) for k in curve_chain(op_type, cls) if k in curves]

    def pricing_class(self, o: Op, device: str) -> str:
        """The class whose curve prices ``o`` when its type has none: its op class, except that a
        memory-bound op of class ``other`` (``zeros``, ``where``, ``arange``, an index copy: a type
        the calibration never saw) is priced as ``elementwise`` -- one pass over its bytes."""
        c = op_class(o.op_type)
        spec = self.devices.get(device)
        if c != "other" or spec is None:
            return c
        nbytes, _ = self.traffic_bytes(o)
        return "elementwise" if nbytes / spec["mem_bandwidth_Bps"] >= o.flops / spec["peak_flops"] else c

    def layer_factor(self, o: Op, device: str) -> float:
        """The layer factor of ``o`` on ``device`` (1 when the op is not a calibrated layer)."""
        spec = self.devices.get(device)
        rows = spec["layers"].get(self._model) if spec and self._model else None
        hit = rows.get(o.name) if rows else None
        if hit is None or hit[0] != o.op_type or hit[1] != int(o.weight_bytes):
            return 1.0
        return hit[2]

    def curve_s(self, o: Op, d: Device) -> float:
        """The op's time by the curves alone (no layer factor)."""
        spec = self.devices[d.name]
        nbytes, launch_only = self.traffic_bytes(o)
        launch = spec["launch_overhead_s"]
        if launch_only:  # what a no-work op of this type measured, else the device's launch
            return spec["launch_by_type"].get(o.op_type, launch)
        cold = self.cold_curve(o, d.name)
        hits = [("cold", cold)] if cold is not None else self._curves(d.name, curve_type(o), self.pricing_class(o, d.name))
        if not hits:
            return super()._resident_s(o, d)
        comb = sum if spec["work"] == "sum" else max
        work_ref = comb((o.flops / spec["peak_flops"], nbytes / spec["mem_bandwidth_Bps"]))
        if work_ref <= 0:
            return launch
        here = comb((o.flops / d.peak_flops_for(o.op_type), nbytes / d.mem_bandwidth_Bps))
        return launch + here / work_ref * _extrapolated_s(work_ref, hits)

    def threads(self, device: str) -> int | None:
        """The torch thread count ``device`` was calibrated with (None: not recorded)."""
        spec = self.devices.get(device)
        return spec["threads"] if spec else None

    def check_threads(self, threads: int, device: str | None = None) -> None:
        """Refuse a run with ``threads`` torch threads on a device calibrated with another count.

        ``device``: one device, else every calibrated device that recorded its count.

        >>> from hetsched.system import Device, System
        >>> s = System([Device("cpu0", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)])
        >>> c = CalibratedCost(s, {"cpu0": {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10, "threads": 1}})
        >>> c.check_threads(1)
        >>> c.check_threads(2)
        Traceback (most recent call last):
        ...
        hetsched.errors.ThreadMismatchError: device 'cpu0' was calibrated with 1 torch thread(s), not 2: calibrate at 2 thread(s) (hetsched calibrate --threads 2) and price with that cost file
        """
        for dev in ([device] if device is not None else list(self.devices)):
            cal = self.threads(dev)
            if cal is not None and int(threads) != cal:
                raise ThreadMismatchError(
                    f"device {dev!r} was calibrated with {cal} torch thread(s), not {int(threads)}: calibrate at "
                    f"{int(threads)} thread(s) (hetsched calibrate --threads {int(threads)}) and price with that cost file",
                    device=dev, field="threads", calibrated=cal, requested=int(threads))

    @property
    def has_residuals(self) -> bool:
        """Whether any device kept held-out residuals (so results get an error range)."""
        return any(spec["residuals"] for spec in self.devices.values())

    def residual_for(self, device: str, op_type: str) -> tuple[float, float] | None:
        """``(lo, hi)`` of measured / predicted for ``op_type`` on ``device``: its type's, its class's,
        else ``all``; None when the calibration kept no residuals."""
        spec = self.devices.get(device)
        res = spec["residuals"] if spec else None
        if not res:
            return None
        for key in (op_type, op_class(op_type), "all"):
            r = res.get(key)
            if r is not None:
                return r["lo"], r["hi"]
        return None

    def error_range(self, busy: Iterable[tuple[str, str, float]]) -> tuple[float, float] | None:
        """``(lo, hi)`` factors of a total made of ``busy`` = ``(op_type, device, predicted seconds)``
        rows (see the class notes); None when no row is on a device with residuals. Rows on other
        devices count with factor 1 (no statement about them).

        >>> from hetsched.system import Device, System
        >>> s = System([Device("cpu0", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)])
        >>> c = CalibratedCost(s, {"cpu0": {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10,
        ...     "residuals": {"conv": {"lo": 0.9, "hi": 1.2, "n": 4}, "all": {"lo": 0.8, "hi": 1.0, "n": 9}}}})
        >>> [round(f, 3) for f in c.error_range([("Conv", "cpu0", 3.0), ("Relu", "cpu0", 1.0)])]
        [0.875, 1.15]
        """
        tot = lo = hi = 0.0
        covered = False
        for op_type, dev, t in busy:
            r = self.residual_for(dev, op_type)
            tot += t
            if r is None:
                lo += t
                hi += t
            else:
                covered = True
                lo += t * r[0]
                hi += t * r[1]
        if not covered or tot <= 0:
            return None
        return lo / tot, hi / tot

    def _resident_s(self, o: Op, d: Device) -> float:
        if d.name not in self.devices:
            return super()._resident_s(o, d)
        want = d.attrs.get("threads") if d.attrs else None
        if want is not None:
            if isinstance(want, bool) or not isinstance(want, numbers.Integral) or want < 1:
                raise FormatError(f"device {d.name!r}: attrs.threads must be a positive integer, got {want!r}"[:300],
                                  device=d.name, field="threads")
            self.check_threads(int(want), d.name)
        # a cold op's layer factor is the calibration's cache state, which it no longer has
        factor = 1.0 if self.cold_curve(o, d.name) is not None else self.layer_factor(o, d.name)
        return self.curve_s(o, d) * factor


def _extrapolated_s(w: float, hits: Sequence[tuple[str, EfficiencyCurve]]) -> float:
    """Time of ``w`` of work (launch excluded) by the first curve of ``hits``.

    Above the curve's largest knot ``w1`` its efficiency is held flat, unless it is below what the
    next curve (the class's, then the default) gives there: then the op's measured time at ``w1``
    is taken as a fixed cost and the rest of the work costs what the next curve says,
    ``w1 / e(w1) + (w - w1) / e_next(w)``. Why: a type measured only small (a ``full_like`` of a
    4-byte loss seed: all launch) has a tiny efficiency; held flat it priced a 16 KiB ``zeros`` of
    an unseen T5 at 28 ms instead of 15 us.

    >>> small = EfficiencyCurve([1e-9], [1e-4])        # one 1e-9 s op measured in 10 us
    >>> wide = EfficiencyCurve([1e-6, 1e-3], [0.5, 0.5])
    >>> round(_extrapolated_s(1e-6, [("t", small), ("elementwise", wide)]) * 1e6, 3)
    11.998
    >>> _extrapolated_s(1e-6, [("default", wide)]) == 1e-6 / 0.5
    True
    """
    curve = hits[0][1]
    w1 = curve.work_s[-1]
    if w <= w1 or len(hits) < 2:
        return curve.time_s(w)
    nxt = hits[1][1]
    if curve(w1) >= nxt(w):
        return w / curve(w1)
    return w1 / curve(w1) + (w - w1) / nxt(w)


def _check_residuals(res: Any, source: str, dev: str) -> dict[str, dict[str, float]]:
    if not isinstance(res, Mapping):
        raise FormatError(f"{source}: device {dev!r}: residuals must map op classes to {{lo, hi, n}}", device=dev,
                          field="residuals")
    out = {}
    for k, r in res.items():
        if not isinstance(r, Mapping) or _finite(r.get("lo")) is None or _finite(r.get("hi")) is None:
            raise FormatError(f"{source}: device {dev!r}: residuals.{k} needs numeric lo and hi", device=dev,
                              field="residuals")
        lo, hi = float(r["lo"]), float(r["hi"])
        n = _whole(r.get("n", 0), f"{source}: device {dev!r}: residuals.{k}", "n", device=dev)
        if not (0 < lo <= hi < math.inf):
            raise FormatError(f"{source}: device {dev!r}: residuals.{k} needs 0 < lo <= hi, got {lo!r}, {hi!r}",
                              device=dev, field="residuals")
        out[str(k)] = {"lo": lo, "hi": hi, "n": n}
    return out


def makespan_range(cost: Any, busy: Iterable[tuple[str, str, float]], makespan_s: float) -> dict[str, float]:
    """``{"makespan_lo_s", "makespan_hi_s"}``: the range a priced makespan's measurement is expected in.

    ``busy`` are the result's priced ops ``(op_type, device, seconds)``; the makespan is scaled by
    :meth:`CalibratedCost.error_range` of them (the makespan is taken to move as its ops' summed
    time does). Empty when ``cost`` has no residuals (a roofline, a table, a calibration without
    held-out models): no statement is made. Every family that prices with a cost model adds these
    to its metrics (:data:`RANGE_METRICS`).

    >>> makespan_range(None, [("Conv", "cpu0", 1.0)], 1.0)
    {}
    """
    return range_metrics(range_factors(cost, busy), makespan_s)


def range_factors(cost: Any, busy: Iterable[tuple[str, str, float]]) -> tuple[float, float] | None:
    """:meth:`CalibratedCost.error_range` of ``busy`` when ``cost`` kept residuals, else None (``busy``
    is then not iterated: a caller may pass a generator that costs a pass over its ops)."""
    if not getattr(cost, "has_residuals", False):
        return None
    return cost.error_range(busy)


def range_metrics(factors: tuple[float, float] | None, makespan_s: float) -> dict[str, float]:
    """``{"makespan_lo_s", "makespan_hi_s"}`` of a makespan and :func:`range_factors` (empty for None).

    >>> range_metrics((0.9, 1.2), 2.0)
    {'makespan_lo_s': 1.8, 'makespan_hi_s': 2.4}
    """
    if factors is None:
        return {}
    return {"makespan_lo_s": float(makespan_s) * factors[0], "makespan_hi_s": float(makespan_s) * factors[1]}


def describe_range(value_s: float, lo_s: float | None = None, hi_s: float | None = None) -> str:
    """A time and its expected range for people: ``"12.4 ms +/- 6%"`` (``"-4%/+8%"`` when lopsided).

    ``lo_s``/``hi_s`` may be a result's metrics' ``makespan_lo_s``/``makespan_hi_s``; without them
    only the time.

    >>> describe_range(0.0124, 0.01166, 0.01314)
    '12.4 ms +/- 6%'
    >>> describe_range(0.0124, 0.0119, 0.0134), describe_range(2.5)
    ('12.4 ms -4%/+8%', '2.5 s')
    """
    v = float(value_s)
    a = abs(v)
    txt = (f"{v:.3g} s" if a >= 1 else f"{v * 1e3:.3g} ms" if a >= 1e-3 else f"{v * 1e6:.3g} us")
    if lo_s is None or hi_s is None or not v or not (math.isfinite(lo_s) and math.isfinite(hi_s)):
        return txt
    down, up = round((1 - lo_s / v) * 100), round((hi_s / v - 1) * 100)
    if abs(down - up) <= 1:
        return f"{txt} +/- {max(down, up)}%"
    return f"{txt} {-down:+d}%/{up:+d}%"


# ---------------------------------------------------------------------------- cost files
def save_cost(cost: "CalibratedCost | TableCost", path: str | Path) -> None:
    """Write a cost file (YAML, format ``hetsched.cost`` v1; see ``docs/formats.md``).

    >>> import tempfile, os
    >>> from hetsched.io.systems import toy_system
    >>> p = os.path.join(tempfile.mkdtemp(), "c.yaml")
    >>> save_cost(TableCost(toy_system(), {("Conv", "gpu0"): 1e-3}), p)
    >>> load_cost(p, toy_system()).compute_s(Op("c", "Conv"), "gpu0")
    0.001
    """
    import yaml

    doc: dict[str, Any] = {"format": COST_FORMAT, "version": COST_VERSION, "system": cost.system.name}
    if isinstance(cost, CalibratedCost):
        doc["kind"] = "calibrated"
        doc["devices"] = {
            dev: {"peak_flops": spec["peak_flops"], "mem_bandwidth_Bps": spec["mem_bandwidth_Bps"],
                  "launch_overhead_s": spec["launch_overhead_s"],
                  "work": spec["work"],
                  **({"launch_by_type": dict(spec["launch_by_type"])} if spec["launch_by_type"] else {}),
                  "curves": {k: c.to_dict() for k, c in spec["curves"].items()},
                  **({"layers": {m: {o: {"op_type": t, "weight_bytes": w, "factor": f} for o, (t, w, f) in rows.items()}
                                 for m, rows in spec["layers"].items()}} if spec["layers"] else {}),
                  **({"cache_bytes": {k: int(v) for k, v in spec["cache_bytes"].items()}} if spec["cache_bytes"] else {}),
                  **({"cold_curves": {k: c.to_dict() for k, c in spec["cold_curves"].items()}}
                     if spec["cold_curves"] else {}),
                  **({"threads": int(spec["threads"])} if spec.get("threads") is not None else {}),
                  **({"residuals": {k: dict(r) for k, r in spec["residuals"].items()}} if spec.get("residuals") else {})}
            for dev, spec in cost.devices.items()
        }
        if cost.meta:
            doc["meta"] = _plain(cost.meta)
    elif isinstance(cost, TableCost):
        doc["kind"] = "table"
        rows = []
        for (key, dev), v in cost.table.items():
            row: dict[str, Any] = {"op": key, "device": dev, "latency_s": v}
            if key in cost.shapes:
                row["flops"], row["bytes"] = cost.shapes[key]
            rows.append(row)
        doc["entries"] = rows
    else:
        raise HetschedError(f"save_cost writes a CalibratedCost or a TableCost, not {type(cost).__name__}", field="cost")
    Path(path).write_text(yaml.safe_dump(doc, sort_keys=False))


def _plain(x: Any) -> Any:
    """YAML-safe copy (numpy numbers and tuples become plain Python)."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, (str, bool, int)) or x is None:
        return x
    if isinstance(x, float) or hasattr(x, "__float__"):
        return float(x)
    return str(x)


def load_cost(path: str | Path, system: System, *, any_system: bool = False) -> "CalibratedCost | TableCost":
    """Read a cost file (``.yaml``/``.yml``/``.json``: format ``hetsched.cost``; ``.csv``: a latency table).

    Parameters
    ----------
    path : path
    system : System
        The system to price on. Its name must be the one the file was made for (``system:``),
        unless ``any_system=True``; every device the file names must be in it.

    Raises
    ------
    FormatError
        A missing or malformed file (the message names the field).
    HetschedError
        The file was made for another system, or names a device the system lacks.
    """
    from .io.files import check_fields, read_text
    from .io.systems import parse_yaml

    if not isinstance(path, (str, os.PathLike)):
        raise FormatError(f"a cost file path must be a string or a path, got {type(path).__name__}", field="path")
    p = Path(path)
    if not p.exists():
        raise FormatError(f"cost file {str(path)!r} not found", field="path")
    if p.suffix.lower() == ".csv":
        return TableCost.from_csv(p, system)
    # libyaml's parser where PyYAML has it, with the system loader's numbers (``1.0e12`` is a number): the
    # Calibration tab's shipped cost file (2k lines) read in 0.28 s with the pure-Python one
    doc = parse_yaml(read_text(p, "cost file"), p.name, fast=True)
    if not isinstance(doc, Mapping):
        raise FormatError(f"{p.name}: expected a mapping at the top level", field="<root>")
    if doc.get("format") != COST_FORMAT:
        raise FormatError(f"{p.name}: format is {doc.get('format')!r}, expected {COST_FORMAT!r}", field="format")
    ver = doc.get("version")
    if type(ver) is not int or ver != COST_VERSION:  # not true, not 1.0
        raise FormatError(f"{p.name}: unsupported cost file version {ver!r} (this hetsched reads "
                          f"{COST_VERSION})", field="version")
    check_fields(doc, ("format", "version", "system", "kind", "devices", "entries", "meta"), p.name)
    meta = _mapping(doc.get("meta"), p.name, "meta")
    made_for = doc.get("system")
    if not any_system and made_for is not None and made_for != system.name:
        raise HetschedError(f"{p.name}: cost file was made for system {made_for!r}, not {system.name!r} "
                            "(load it with any_system=True to apply it anyway)", field="system")
    kind = doc.get("kind")
    if kind == "calibrated":
        devs = doc.get("devices")
        if not isinstance(devs, Mapping) or not devs:
            raise FormatError(f"{p.name}: a calibrated cost file needs devices", field="devices")
        for dev, spec in devs.items():
            if not isinstance(spec, Mapping):
                raise FormatError(f"{p.name}: devices.{dev} must be a mapping", device=str(dev), field="devices")
        return CalibratedCost(system, devs, meta=meta, source=p.name)
    if kind == "table":
        rows = doc.get("entries")
        if not isinstance(rows, list):
            raise FormatError(f"{p.name}: a table cost file needs a list of entries", field="entries")
        table: dict[tuple[str, str], float] = {}
        shapes: dict[str, tuple[float, float]] = {}
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping) or not {"op", "device", "latency_s"} <= set(row):
                raise FormatError(f"{p.name}: entries[{i}] needs op, device and latency_s", field="entries")
            op, where = str(row["op"]), f"{p.name}: entries[{i}]"
            table[(op, str(row["device"]))] = _latency(row["latency_s"], where, op=op)
            if "flops" in row and "bytes" in row:
                shapes[op] = (_latency(row["flops"], where, "flops", op=op), _latency(row["bytes"], where, "bytes", op=op))
        return TableCost(system, table, shapes=shapes)
    raise FormatError(f"{p.name}: kind must be 'calibrated' or 'table', got {kind!r}", field="kind")


_LOADED: dict[tuple, CostModel] = {}


def cost_key(cost: "CostModel | str | Path | None") -> Any:
    """A value equal between two calls exactly when ``cost`` prices alike in both.

    ``cost`` itself, except that a cost *file* counts by its resolved path and modification time: a
    calibration written again into the same file is another model. What a caller that reuses
    results (a panel's cache) keeps in its key beside the graph and the system.

    >>> cost_key(None) is None
    True
    >>> import os, tempfile
    >>> f = os.path.join(tempfile.mkdtemp(), "c.yaml"); cost_key(f) == (os.path.realpath(f), None)
    True
    """
    if not isinstance(cost, (str, Path)):
        return cost
    p = Path(cost)
    return str(p.resolve()), p.stat().st_mtime_ns if p.exists() else None


def _from_path(path: str | Path, system: System) -> CostModel:
    p = Path(path)
    key = (*cost_key(p), id(system))
    hit = _LOADED.get(key)
    if hit is None or hit.system is not system:
        hit = load_cost(p, system)
        if len(_LOADED) > 64:
            _LOADED.clear()
        _LOADED[key] = hit
    return hit


def resolve_cost(cost: CostModel | str | Path | None, graph: OpGraph, system: System) -> CostModel:
    """The cost model an algorithm should use: the given one bound to ``graph``, else a roofline.

    ``cost`` may be a cost file path (read with :func:`load_cost` against ``system``, once per
    file version and system). ``None`` is the roofline: there is no process-wide default, a caller
    that prices with a calibration passes it (the CLI's ``--cost``, a panel session's ``cost``, a
    sweep task's ``cost``).

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
    if isinstance(cost, (str, Path)):
        cost = _from_path(cost, system)
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
