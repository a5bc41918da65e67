"""Hardware: devices joined by links, a host, and which backend runs which op type.

Examples
--------
>>> from hetsched.system import Device, Link, System, SupportTable
>>> cpu = Device("cpu", "cpu", peak_flops={"default": 1e12}, memory_bytes=64 * 2**30,
...              mem_bandwidth_Bps=100e9)
>>> gpu = Device("gpu", "gpu", peak_flops={"default": 20e12, "matmul": 150e12},
...              memory_bytes=40 * 2**30, mem_bandwidth_Bps=1.5e12, launch_overhead_s=5e-6)
>>> sys_ = System([cpu, gpu], [Link("cpu", "gpu", 25e9, 1e-6)], host="cpu",
...               support=SupportTable({"gpu": {"*": 1}, "cpu": {"*": 2}}))
>>> sys_.device("gpu").peak_flops_for("MatMul")
150000000000000.0
>>> sys_.candidates("Conv")
['gpu', 'cpu']
"""

from __future__ import annotations

import math
import numbers
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .errors import HetschedError, SystemError_, UnknownNameError, UnsupportedOpError, name_list
from .limits import MAX_BYTES, show_number
from .params import Param, ParamSpec

__all__ = ["Device", "Link", "System", "SupportTable", "op_class", "OP_CLASSES", "MACHINE_PARAMS", "next_device_name"]

# Op types grouped by the hardware unit that runs them: a device may quote a peak per class
# (tensor cores for matmul/conv, vector units for the rest). Lower-case op types.
OP_CLASSES: dict[str, str] = {
    **{t: "conv" for t in ("conv", "conv2d", "conv1d", "conv3d", "convtranspose", "depthwiseconv", "depthwiseconvwide", "convolution")},
    **{
        t: "matmul"
        for t in ("matmul", "gemm", "gemv", "linear", "fc", "dense", "bmm", "addmm", "mm", "attention", "einsum", "lstm", "gru")
    },
    **{
        t: "elementwise"
        for t in (
            "relu", "gelu", "silu", "sigmoid", "tanh", "add", "sub", "mul", "div", "clip", "relu6", "hardswish",
            "dropout", "erf", "pow", "sqrt", "exp", "neg", "cast", "where",
        )
    },
    **{
        t: "reduce"
        for t in (
            "softmax", "layernorm", "layernormalization", "batchnorm", "batchnormalization", "maxpool", "averagepool",
            "avgpool", "globalaveragepool", "reducemean", "reducesum", "rmsnorm", "pool",
        )
    },
}


def op_class(op_type: str) -> str:
    """The hardware class of an op type: ``conv``, ``matmul``, ``elementwise``, ``reduce`` or ``other``.

    Backward ops (``Conv_grad``, ``MatMulBackward``) count as their forward class.

    >>> op_class("Gemm"), op_class("Relu"), op_class("Conv_grad"), op_class("Foo")
    ('matmul', 'elementwise', 'conv', 'other')
    """
    hit = _CLASS_CACHE.get(op_type)
    if hit is not None:  # called once per op per pricing: keep it a dict lookup
        return hit
    t = op_type.lower()
    for suffix in ("_grad", "backward", "_bwd", "grad"):
        if t.endswith(suffix) and t[: -len(suffix)]:
            t = t[: -len(suffix)].rstrip("_")
            break
    hit = _CLASS_CACHE[op_type] = OP_CLASSES.get(t, "other")
    return hit


_CLASS_CACHE: dict[str, str] = {}


@dataclass(frozen=True)
class Device:
    """A compute device (or the host).

    Parameters
    ----------
    name : str
    kind : str
        ``cpu``, ``gpu``, ``fpga``, ``tpu``, ``npu``, ``host``...
    peak_flops : dict
        FLOP/s by op type, op class (see :func:`op_class`) or ``"default"`` (looked up in that order).
    memory_bytes : int
        On-device memory capacity.
    mem_bandwidth_Bps : float
        On-device memory bandwidth (bytes/s).
    launch_overhead_s : float
        Fixed cost per kernel/op launch.
    power_W : float
        Power drawn while busy; ``idle_power_W`` while idle.
    attrs : dict
        Sources, model numbers, anything else.
    """

    name: str
    kind: str
    peak_flops: Mapping[str, float] = field(default_factory=lambda: {"default": 1e12})
    memory_bytes: int = 2**34
    mem_bandwidth_Bps: float = 1e11
    launch_overhead_s: float = 0.0
    power_W: float = 0.0
    idle_power_W: float = 0.0
    attrs: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not self.peak_flops:
            raise SystemError_(f"device {self.name!r} has no peak_flops", device=self.name, field="peak_flops")
        for k, v in self.peak_flops.items():
            if not _amount(v) or not v > 0:  # also rejects NaN and inf
                raise SystemError_(
                    f"device {self.name!r} has peak_flops[{k!r}] = {show_number(v)}; it must be a finite number > 0",
                    device=self.name,
                    field="peak_flops",
                )
        for fld in ("memory_bytes", "mem_bandwidth_Bps", "launch_overhead_s", "power_W", "idle_power_W"):
            v = getattr(self, fld)
            if not _amount(v):
                raise SystemError_(f"device {self.name!r} has {fld} {show_number(v)}; it must be a finite number >= 0",
                                   device=self.name, field=fld)
        if self.memory_bytes > MAX_BYTES:
            raise SystemError_(f"device {self.name!r} has memory_bytes {show_number(self.memory_bytes)}, above "
                               "hetsched's limit of 2**53", device=self.name, field="memory_bytes")
        if self.mem_bandwidth_Bps == 0:
            raise SystemError_(
                f"device {self.name!r} has zero mem_bandwidth_Bps", device=self.name, field="mem_bandwidth_Bps"
            )

    def peak_flops_for(self, op_type: str) -> float:
        """Peak FLOP/s for an op type: exact type, then its class, then ``default``, else the max quoted."""
        pf = self.peak_flops
        if op_type in pf:
            return float(pf[op_type])
        cls = op_class(op_type)
        if cls in pf:
            return float(pf[cls])
        if "default" in pf:
            return float(pf["default"])
        return float(max(pf.values()))


@dataclass(frozen=True)
class Link:
    """A link between two devices; full duplex (one lane per direction) unless ``duplex=False``."""

    src: str
    dst: str
    bandwidth_Bps: float
    latency_s: float = 0.0
    duplex: bool = True
    attrs: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not _amount(self.bandwidth_Bps) or not self.bandwidth_Bps > 0:
            raise SystemError_(
                f"link {self.src}->{self.dst} has bandwidth_Bps {show_number(self.bandwidth_Bps)}; it must be a finite number > 0",
                device=self.src,
                field="bandwidth_Bps",
            )
        if not _amount(self.latency_s):  # also rejects NaN and inf (an infinite latency gave inf results)
            raise SystemError_(
                f"link {self.src}->{self.dst} has latency_s {show_number(self.latency_s)}; it must be a finite number >= 0",
                device=self.src,
                field="latency_s",
            )
        if not isinstance(self.duplex, bool):
            raise SystemError_(f"link {self.src}->{self.dst} has duplex {self.duplex!r}; it must be True or False",
                               device=self.src, field="duplex")

    def time_s(self, nbytes: Any) -> Any:
        """``latency + bytes / bandwidth``: one hop of ``nbytes`` (a number or an array) over this link.

        The one hop formula: the cost models' ``transfer_s`` sums it over a route, the pipeline's
        :class:`~hetsched.pipeline.P2P` prices a message with it.

        >>> Link("a", "b", 2e9, 1e-6).time_s(2e3)
        2e-06
        """
        return self.latency_s + nbytes / self.bandwidth_Bps


def _amount(v: Any) -> bool:
    """A finite real number >= 0 (not a bool). Compares before converting: ``10**400`` cannot be a float."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or v != v or v < 0:
        return False
    return not (isinstance(v, float) and math.isinf(v)) and v <= sys.float_info.max


#: What a machine editor may change, declared as data (:mod:`hetsched.params`): a device's memory and
#: memory bandwidth, a link's speed and latency. Values in SI units (bytes, B/s, s), shown as a person
#: reads them (GiB, GB/s, us). :meth:`System.with_device_values` and :meth:`System.with_link_values`
#: check every edit against it, so a panel and a script refuse the same values in the same words.
MACHINE_PARAMS = ParamSpec([
    Param("memory_bytes", "float", 16 * 2**30, label="memory", min=0.0, min_open=True, max=float(MAX_BYTES), unit="B",
          display=(2.0**-30, "GiB"), help="the device's own memory (weights and tensors it keeps)"),
    Param("mem_bandwidth_Bps", "float", 1e11, label="memory bandwidth", min=0.0, min_open=True, max=1e14, unit="B/s",
          display=(1e-9, "GB/s"), help="how fast the device reads and writes its own memory"),
    Param("bandwidth_Bps", "float", 16e9, label="link speed", min=0.0, min_open=True, max=1e13, unit="B/s",
          display=(1e-9, "GB/s"), help="bytes per second over the link, each direction"),
    Param("latency_s", "float", 5e-6, label="link latency", min=0.0, max=1.0, unit="s", display=(1e6, "us"),
          help="fixed time of every transfer over the link"),
])
_DEVICE_EDITS = ("memory_bytes", "mem_bandwidth_Bps")
_LINK_EDITS = ("bandwidth_Bps", "latency_s")


def _check_edit(values: Mapping[str, Any], allowed: tuple[str, ...], what: str, device: str) -> None:
    """Refuse an edit of a field a machine editor does not offer, or a value :data:`MACHINE_PARAMS` refuses."""
    for k, v in values.items():
        if k not in allowed:
            raise SystemError_(f"{what}: {k!r} cannot be edited; edit {', '.join(allowed)}", device=device, field=k)
        try:
            MACHINE_PARAMS[k].check(v)
        except HetschedError as e:
            raise SystemError_(f"{what}: {e}", device=device, field=k) from None


def next_device_name(names: Iterable[str], kind: str) -> str:
    """The first free name ``<kind><i>`` among ``names`` (``gpu0``, ``gpu1``...).

    >>> next_device_name(["cpu0", "gpu0"], "gpu"), next_device_name([], "tpu")
    ('gpu1', 'tpu0')
    """
    taken = set(names)
    base = "".join(c for c in str(kind).lower() if c.isalnum()) or "dev"
    i = 0
    while f"{base}{i}" in taken:
        i += 1
    return f"{base}{i}"


class SupportTable:
    """Which backend (device) runs which op type, with a priority (1 = best).

    Parameters
    ----------
    table : dict
        ``{backend: {op_type: priority}}``; ``"*"`` is a wildcard for any op type. An exact op-type
        entry beats the wildcard of the same backend, and an exact ``0`` means "does not run this
        op type" even where the backend's wildcard would say it does (the patent's mapping list
        lists what a backend supports; 0 is how a table, a file or a grid cell says it does not).

    >>> st = SupportTable({"fpga": {"Conv": 1}, "gpu": {"*": 2, "Softmax": 0}})
    >>> st.candidates("Conv"), st.candidates("Relu"), st.candidates("Softmax")
    (['fpga', 'gpu'], ['gpu'], [])
    >>> st.priority("gpu", "Conv")
    2
    >>> st.lookup("gpu", "Conv"), st.lookup("gpu", "Softmax"), st.lookup("fpga", "Relu")
    ((2, 'wildcard'), (None, 'excluded'), (None, 'absent'))
    """

    def __init__(self, table: Mapping[str, Mapping[str, int]] | None = None) -> None:
        self._table: dict[str, dict[str, int]] = {}
        for backend, row in (table or {}).items():
            clean: dict[str, int] = {}
            for op_type, prio in row.items():
                # 0 excludes one op type; a wildcard of 0 would say nothing (leave the wildcard out).
                # A fractional priority was silently truncated (1.5 -> 1); 2.0 is the integer 2.
                low = 1 if op_type == "*" else 0
                if (not isinstance(prio, (int, float)) or isinstance(prio, bool) or not prio >= low
                        or (isinstance(prio, float) and not prio.is_integer())):
                    raise SystemError_(
                        f"support table: priority of {op_type!r} on backend {backend!r} must be an integer >= 1"
                        f"{'' if op_type == '*' else ' (or 0: not supported)'}, got {show_number(prio)}",
                        device=backend,
                        field=op_type,
                    )
                clean[str(op_type)] = int(prio)
            self._table[str(backend)] = clean

    @property
    def backends(self) -> list[str]:
        return list(self._table)

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {b: dict(r) for b, r in self._table.items()}

    def priority(self, backend: str, op_type: str) -> int | None:
        """Priority of ``op_type`` on ``backend``; ``None`` when unsupported."""
        row = self._table.get(backend)
        if row is None:
            return None
        p = row[op_type] if op_type in row else row.get("*")
        return p or None  # 0: explicitly not supported

    def lookup(self, backend: str, op_type: str) -> tuple[int | None, str]:
        """``(priority, source)``: where the answer of :meth:`priority` comes from.

        ``source`` is ``"exact"`` (an entry for the op type), ``"wildcard"`` (the backend's ``*``),
        ``"excluded"`` (an explicit 0: not supported, whatever the wildcard says) or ``"absent"``
        (nothing applies: not supported). A grid shows "excluded" and "absent" apart.
        """
        row = self._table.get(backend)
        if row is None:
            return None, "absent"
        if op_type in row:
            p = row[op_type]
            return (p, "exact") if p else (None, "excluded")
        p = row.get("*")
        return (p, "wildcard") if p else (None, "absent")

    def supports(self, backend: str, op_type: str) -> bool:
        return self.priority(backend, op_type) is not None

    def candidates(self, op_type: str, enabled: Iterable[str] | None = None) -> list[str]:
        """Backends that run ``op_type``, best priority first (ties: table order)."""
        en = None if enabled is None else set(enabled)
        rows = []
        for i, b in enumerate(self._table):
            if en is not None and b not in en:
                continue
            p = self.priority(b, op_type)
            if p is not None:
                rows.append((p, i, b))
        return [b for _, _, b in sorted(rows)]

    def with_priority(self, backend: str, op_type: str, priority: int | None) -> "SupportTable":
        """A copy with one entry changed; ``None`` or ``0`` removes support.

        Removing support writes an explicit 0, which beats the backend's ``*`` entry (a grid cell
        set to 0 must stop the backend running that op type even when a wildcard row covers it).

        >>> st = SupportTable({"gpu": {"*": 1}}).with_priority("gpu", "Conv", 0)
        >>> st.supports("gpu", "Conv"), st.supports("gpu", "Relu"), st.lookup("gpu", "Conv")
        (False, True, (None, 'excluded'))
        """
        t = self.as_dict()
        t.setdefault(backend, {})[op_type] = priority or 0
        return SupportTable(t)

    def rows(self) -> list[tuple[str, str, int]]:
        """``(backend, op_type, priority)`` rows, the patent-003 "mapping list" (0: not supported)."""
        return [(b, t, p) for b, row in self._table.items() for t, p in row.items()]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SupportTable) and self._table == other._table

    def __repr__(self) -> str:
        return f"SupportTable({self._table!r})"


class System:
    """Devices, the links between them, the host, and the support table.

    Parameters
    ----------
    devices : iterable of Device
        Every device, the host included.
    links : iterable of Link
    host : str
        Name of the device whose memory holds weights and graph inputs at the start. If the host is
        not meant to run ops, leave it out of ``support`` (or give it kind ``"host"``).
    support : SupportTable, optional
        When omitted, every non-``host``-kind device runs every op type with priority 1.
    name : str
    """

    def __init__(
        self,
        devices: Iterable[Device],
        links: Iterable[Link] = (),
        *,
        host: str | None = None,
        support: SupportTable | None = None,
        name: str = "system",
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.meta = dict(meta or {})
        self._devices: dict[str, Device] = {}
        for d in devices:
            if d.name in self._devices:
                raise SystemError_(f"duplicate device name {d.name!r}", device=d.name)
            self._devices[d.name] = d
        if not self._devices:
            raise SystemError_("a system needs at least one device", field="devices")
        self.host = host if host is not None else next(iter(self._devices))
        if not isinstance(self.host, str) or self.host not in self._devices:
            raise SystemError_(f"host {self.host!r} is not a device of the system", device=self.host, field="host")
        self.links: list[Link] = []
        self._link: dict[tuple[str, str], Link] = {}
        for ln in links:
            for end in (ln.src, ln.dst):
                if end not in self._devices:
                    raise SystemError_(
                        f"link {ln.src}->{ln.dst} names unknown device {end!r}", device=end, field="links"
                    )
            if ln.src == ln.dst:
                raise SystemError_(f"link {ln.src}->{ln.dst} joins a device to itself", device=ln.src, field="links")
            if (ln.src, ln.dst) in self._link:  # a second link of a pair was silently kept (or took over one direction)
                first = self._link[(ln.src, ln.dst)]
                raise SystemError_(
                    f"link {ln.src}->{ln.dst} repeats link {first.src}->{first.dst}: a pair of devices has one link, "
                    "which serves both directions (duplex: false for one lane shared by both)",
                    device=ln.src, field="links",
                )
            self.links.append(ln)
            self._link[(ln.src, ln.dst)] = ln
            self._link.setdefault((ln.dst, ln.src), ln)
        if support is None:
            support = SupportTable({d.name: {"*": 1} for d in self._devices.values() if d.kind != "host"})
        for b in support.backends:
            if b not in self._devices:
                raise SystemError_(f"support table names unknown device {b!r}", device=b, field="support")
        self.support = support
        self._routes: dict[tuple[str, str], tuple[Link, ...]] = {}

    # ---------------------------------------------------------------- access
    @property
    def devices(self) -> Mapping[str, Device]:
        return dict(self._devices)

    @property
    def device_names(self) -> list[str]:
        return list(self._devices)

    @property
    def compute_devices(self) -> list[str]:
        """Devices that the support table lets run at least one op type, in system order."""
        b = set(self.support.backends)
        return [d for d in self._devices if d in b]

    def device(self, name: str) -> Device:
        try:
            return self._devices[name]
        except KeyError:
            raise UnknownNameError(f"unknown device {name!r} in system {self.name!r}", device=name) from None

    def link(self, src: str, dst: str) -> Link | None:
        """The direct link between two devices, if any."""
        return self._link.get((src, dst))

    def lane(self, a: str, b: str) -> str:
        """Timeline lane of the hop ``a -> b``: ``"a->b"``, or ``"x<->y"`` (names sorted) on a half-duplex link.

        A full-duplex link has one lane per direction; a half-duplex link's two directions share one
        lane, so transfers both ways are serialised on it. Every timeline names link lanes this way.

        >>> s = System([Device("h", "cpu"), Device("g", "gpu")], [Link("h", "g", 1e9, duplex=False)], host="h")
        >>> s.lane("h", "g"), s.lane("g", "h")
        ('g<->h', 'g<->h')
        """
        ln = self._link.get((a, b))
        if ln is not None and not ln.duplex:
            x, y = sorted((a, b))
            return f"{x}<->{y}"
        return f"{a}->{b}"

    def route(self, src: str, dst: str) -> tuple[Link, ...]:
        """Links a transfer crosses: the direct link, else through the host, else the fewest hops.

        An empty route means ``src == dst``. No route raises ``SystemError_`` naming both devices.
        """
        key = (src, dst)
        r = self._routes.get(key)
        if r is not None:
            return r
        self.device(src)
        self.device(dst)
        if src == dst:
            r = ()
        elif key in self._link:
            r = (self._link[key],)
        elif (src, self.host) in self._link and (self.host, dst) in self._link:
            r = (self._link[(src, self.host)], self._link[(self.host, dst)])
        else:
            import networkx as nx

            G = nx.Graph()
            G.add_nodes_from(self._devices)
            G.add_edges_from((a, b) for a, b in self._link)
            try:
                path = nx.shortest_path(G, src, dst)
            except nx.NetworkXNoPath:
                raise SystemError_(
                    f"no link path from device {src!r} to device {dst!r}", device=src, dst=dst, field="links"
                ) from None
            r = tuple(self._link[(a, b)] for a, b in zip(path, path[1:]))
        self._routes[key] = r
        return r

    def candidates(self, op_type: str, enabled: Iterable[str] | None = None) -> list[str]:
        """Devices able to run ``op_type``, best priority first."""
        return self.support.candidates(op_type, enabled)

    def require_support(self, ops: Iterable[tuple[str, str]], enabled: Iterable[str] | None = None) -> None:
        """Raise ``UnsupportedOpError`` listing every ``(op, op_type)`` no enabled device runs."""
        enabled = None if enabled is None else list(enabled)
        bad = [(o, t) for o, t in ops if not self.support.candidates(t, enabled)]
        if bad:
            raise UnsupportedOpError(
                f"no device supports {len(bad)} op(s): "
                + ", ".join(f"{o!r} ({t})" for o, t in bad[:10])
                + (f" and {len(bad) - 10} more" if len(bad) > 10 else ""),
                op=bad[0][0],
                ops=bad,
            )

    def with_devices(self, devices: Mapping[str, Device]) -> "System":
        """A copy with some devices replaced (what-if: more memory, a slower chip)."""
        devs = [devices.get(n, d) for n, d in self._devices.items()]
        return System(devs, self.links, host=self.host, support=self.support, name=self.name, meta=self.meta)

    def with_links(self, links: Iterable[Link]) -> "System":
        """A copy with different links (what-if: slow the host link)."""
        return System(self._devices.values(), links, host=self.host, support=self.support, name=self.name, meta=self.meta)

    def with_support(self, support: SupportTable) -> "System":
        return System(self._devices.values(), self.links, host=self.host, support=support, name=self.name, meta=self.meta)

    def renamed(self, name: str) -> "System":
        """A copy under another name (an edited machine is not the bundled one any more)."""
        if not isinstance(name, str) or not name.strip():
            raise SystemError_(f"a machine's name must be a non-empty text, got {name!r}", field="name")
        return System(self._devices.values(), self.links, host=self.host, support=self.support, name=name.strip(),
                      meta=self.meta)

    # ---------------------------------------------------------------- machine edits (checked input)
    def with_device_values(self, device: str, **values: Any) -> "System":
        """A copy with a device's memory (``memory_bytes``) or memory bandwidth (``mem_bandwidth_Bps``) changed.

        Every value is checked against :data:`MACHINE_PARAMS`; a refusal names the device and the field.

        >>> from hetsched.io.systems import toy_system
        >>> toy_system().with_device_values("gpu0", memory_bytes=8 * 2**30).device("gpu0").memory_bytes // 2**30
        8
        >>> toy_system().with_device_values("gpu0", memory_bytes=0)
        Traceback (most recent call last):
        ...
        hetsched.errors.SystemError_: device gpu0: memory = 0 GiB is out of range: allowed more than 0 up to 8388608 GiB
        """
        d = self.device(device)  # an unknown device: a named error
        _check_edit(values, _DEVICE_EDITS, f"device {device}", device)
        if "memory_bytes" in values:
            values = {**values, "memory_bytes": int(round(values["memory_bytes"]))}
        import dataclasses

        return self.with_devices({device: dataclasses.replace(d, **values)})

    def with_link_values(self, src: str, dst: str, **values: Any) -> "System":
        """A copy with the link between ``src`` and ``dst`` (either direction) faster, slower or of another latency.

        >>> from hetsched.io.systems import toy_system
        >>> toy_system().with_link_values("cpu0", "gpu0", bandwidth_Bps=1e9).link("gpu0", "cpu0").bandwidth_Bps
        1000000000.0
        >>> toy_system().with_link_values("gpu0", "fpga0", latency_s=0.0)
        Traceback (most recent call last):
        ...
        hetsched.errors.SystemError_: no link between gpu0 and fpga0 in toy (its links: cpu0->gpu0, cpu0->fpga0)
        """
        ln = self.link(src, dst)
        if ln is None:
            have = ", ".join(f"{x.src}->{x.dst}" for x in self.links) or "none"
            raise SystemError_(f"no link between {src} and {dst} in {self.name} (its links: {have})", device=src,
                               field="links")
        _check_edit(values, _LINK_EDITS, f"link {ln.src}->{ln.dst}", ln.src)
        import dataclasses

        new = dataclasses.replace(ln, **values)
        return self.with_links([new if x is ln else x for x in self.links])

    def with_device(self, device: Device, *, links: Iterable[Link] = (), support: Mapping[str, int] | None = None
                    ) -> "System":
        """A copy with one more device, its links and its row of the support table (``None``: it runs nothing).

        A name already taken, a link to an unknown device or a device no link reaches is refused, naming it.

        >>> from hetsched.io.systems import toy_system
        >>> s = toy_system()
        >>> t = s.with_device(Device("gpu1", "gpu"), links=[Link("cpu0", "gpu1", 16e9)], support={"*": 1})
        >>> t.device_names, t.candidates("Softmax")
        (['cpu0', 'gpu0', 'fpga0', 'gpu1'], ['gpu0', 'gpu1', 'cpu0'])
        """
        table = self.support.as_dict()
        if support is not None:
            table[device.name] = dict(support)
        out = System([*self._devices.values(), device], [*self.links, *links], host=self.host,
                     support=SupportTable(table), name=self.name, meta=self.meta)
        out._check_connected()
        return out

    def without_device(self, name: str) -> "System":
        """A copy without device ``name``, its links and its support row.

        The host (where data starts and ends), the last device that runs ops, and a device whose removal
        cuts others off the host are refused, naming the device.

        >>> from hetsched.io.systems import toy_system
        >>> toy_system().without_device("fpga0").device_names
        ['cpu0', 'gpu0']
        >>> toy_system().without_device("cpu0")
        Traceback (most recent call last):
        ...
        hetsched.errors.SystemError_: cpu0 is the host of toy (graph inputs and weights start in its memory): it cannot be removed
        """
        self.device(name)
        if name == self.host:
            raise SystemError_(f"{name} is the host of {self.name} (graph inputs and weights start in its memory): "
                               "it cannot be removed", device=name, field="devices")
        table = {b: r for b, r in self.support.as_dict().items() if b != name}
        if not table:
            raise SystemError_(f"{name} is the last device of {self.name} that runs ops: keep it, or add another first",
                               device=name, field="devices")
        meta = dict(self.meta)
        if isinstance(meta.get("pipeline_ranks"), Mapping):  # a rank plan naming the device no longer applies
            meta["pipeline_ranks"] = {p: r for p, r in meta["pipeline_ranks"].items() if name not in list(r or ())}
        out = System([d for n, d in self._devices.items() if n != name],
                     [ln for ln in self.links if name not in (ln.src, ln.dst)], host=self.host,
                     support=SupportTable(table), name=self.name, meta=meta)
        out._check_connected(removed=name)
        return out

    def _check_connected(self, removed: str | None = None) -> None:
        """Refuse a machine in which some device has no path of links to the host (nothing could reach it)."""
        import networkx as nx

        G = nx.Graph()
        G.add_nodes_from(self._devices)
        G.add_edges_from((ln.src, ln.dst) for ln in self.links)
        cut = [d for d in self._devices if d not in nx.node_connected_component(G, self.host)]
        if cut:
            why = f"removing {removed} leaves" if removed else "it leaves"
            raise SystemError_(f"{why} {name_list(cut)} with no link path to the host {self.host}", device=cut[0],
                               field="links")

    def __repr__(self) -> str:
        return f"System({self.name!r}, devices={name_list(self._devices)}, host={self.host!r})"
