"""System descriptions: YAML files (``data/systems/*.yaml``) and a small built-in toy system.

YAML format (``format: hetsched.system``, ``version: 1``)::

    format: hetsched.system
    version: 1
    name: a100-server
    host: cpu0
    devices:
      - name: cpu0
        kind: cpu
        peak_flops: {default: 3.0e12}      # source in a comment, per number
        memory_bytes: 5.49e11
        mem_bandwidth_Bps: 3.07e11
        launch_overhead_s: 1.0e-6
        power_W: 350
    links:
      - {src: cpu0, dst: gpu0, bandwidth_Bps: 3.2e10, latency_s: 2.0e-6}
    support:                                # backend -> {op_type: priority}, "*" = any
      gpu0: {"*": 1}
      cpu0: {"*": 2}

Examples
--------
>>> s = toy_system()
>>> s.device_names
['cpu0', 'gpu0', 'fpga0']
>>> s2 = system_from_dict(system_to_dict(s))
>>> s2.support == s.support and s2.device_names == s.device_names
True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import yaml

from ..errors import FormatError, HetschedError, SystemError_
from ..system import Device, Link, SupportTable, System

__all__ = ["load_system", "save_system", "system_from_dict", "system_to_dict", "toy_system", "bundled_systems"]

SYSTEM_FORMAT = "hetsched.system"
SYSTEM_VERSION = 1
_DEVICE_FIELDS = {
    "name", "kind", "peak_flops", "memory_bytes", "mem_bandwidth_Bps", "launch_overhead_s", "power_W",
    "idle_power_W", "attrs",
}
_LINK_FIELDS = {"src", "dst", "bandwidth_Bps", "latency_s", "duplex", "attrs"}
_TOP_FIELDS = {"format", "version", "name", "host", "devices", "links", "support", "meta"}


def _num(v: Any, where: str, field: str) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        raise FormatError(f"{where}: field {field!r} must be a number, got {v!r}", field=field) from None


def system_from_dict(d: Mapping[str, Any], *, source: str = "system") -> System:
    """Build a :class:`~hetsched.system.System` from the YAML structure; errors name the field."""
    if not isinstance(d, Mapping):
        raise FormatError(f"{source}: expected a mapping at the top level", field="<root>")
    fmt = d.get("format", SYSTEM_FORMAT)
    if fmt != SYSTEM_FORMAT:
        raise FormatError(f"{source}: format is {fmt!r}, expected {SYSTEM_FORMAT!r}", field="format")
    ver = d.get("version", SYSTEM_VERSION)
    if ver != SYSTEM_VERSION:
        raise FormatError(f"{source}: unsupported system version {ver!r} (this hetsched reads {SYSTEM_VERSION})", field="version")
    unknown = set(d) - _TOP_FIELDS
    if unknown:
        raise FormatError(f"{source}: unknown field(s) {sorted(unknown)}", field=sorted(unknown)[0])
    devices = []
    for i, dv in enumerate(d.get("devices") or []):
        where = f"{source}: devices[{i}]"
        if not isinstance(dv, Mapping) or "name" not in dv:
            raise FormatError(f"{where}: a device needs a name", field="name")
        bad = set(dv) - _DEVICE_FIELDS
        if bad:
            raise FormatError(f"{where} ({dv['name']!r}): unknown field(s) {sorted(bad)}", field=sorted(bad)[0], device=dv["name"])
        pf = dv.get("peak_flops", {"default": 1e12})
        if not isinstance(pf, Mapping):
            pf = {"default": pf}
        try:
            devices.append(
                Device(
                    name=str(dv["name"]),
                    kind=str(dv.get("kind", "cpu")),
                    peak_flops={str(k): _num(v, where, f"peak_flops.{k}") for k, v in pf.items()},
                    memory_bytes=int(_num(dv.get("memory_bytes", 2**34), where, "memory_bytes")),
                    mem_bandwidth_Bps=_num(dv.get("mem_bandwidth_Bps", 1e11), where, "mem_bandwidth_Bps"),
                    launch_overhead_s=_num(dv.get("launch_overhead_s", 0.0), where, "launch_overhead_s"),
                    power_W=_num(dv.get("power_W", 0.0), where, "power_W"),
                    idle_power_W=_num(dv.get("idle_power_W", 0.0), where, "idle_power_W"),
                    attrs=dict(dv.get("attrs") or {}),
                )
            )
        except SystemError_:
            raise
    links = []
    for i, ln in enumerate(d.get("links") or []):
        where = f"{source}: links[{i}]"
        if not isinstance(ln, Mapping) or "src" not in ln or "dst" not in ln or "bandwidth_Bps" not in ln:
            raise FormatError(f"{where}: a link needs src, dst and bandwidth_Bps", field="links")
        bad = set(ln) - _LINK_FIELDS
        if bad:
            raise FormatError(f"{where}: unknown field(s) {sorted(bad)}", field=sorted(bad)[0])
        if not isinstance(ln.get("duplex", True), bool):
            raise FormatError(f"{where}: duplex must be true or false, got {ln['duplex']!r}", field="duplex")
        links.append(
            Link(
                str(ln["src"]),
                str(ln["dst"]),
                _num(ln["bandwidth_Bps"], where, "bandwidth_Bps"),
                _num(ln.get("latency_s", 0.0), where, "latency_s"),
                bool(ln.get("duplex", True)),
                dict(ln.get("attrs") or {}),
            )
        )
    sup = d.get("support")
    support = None
    if sup is not None:
        if not isinstance(sup, Mapping):
            raise FormatError(f"{source}: support must map backend -> {{op_type: priority}}", field="support")
        support = SupportTable({str(b): {str(k): v for k, v in (row or {}).items()} for b, row in sup.items()})
    return System(devices, links, host=d.get("host"), support=support, name=str(d.get("name", source)), meta=d.get("meta") or {})


def system_to_dict(s: System) -> dict[str, Any]:
    """The YAML structure of a system (round-trips through :func:`system_from_dict`)."""
    return {
        "format": SYSTEM_FORMAT,
        "version": SYSTEM_VERSION,
        "name": s.name,
        "host": s.host,
        "devices": [
            {
                "name": d.name,
                "kind": d.kind,
                "peak_flops": dict(d.peak_flops),
                "memory_bytes": int(d.memory_bytes),
                "mem_bandwidth_Bps": float(d.mem_bandwidth_Bps),
                "launch_overhead_s": float(d.launch_overhead_s),
                "power_W": float(d.power_W),
                "idle_power_W": float(d.idle_power_W),
                **({"attrs": dict(d.attrs)} if d.attrs else {}),
            }
            for d in s.devices.values()
        ],
        "links": [
            {
                "src": ln.src,
                "dst": ln.dst,
                "bandwidth_Bps": float(ln.bandwidth_Bps),
                "latency_s": float(ln.latency_s),
                "duplex": ln.duplex,
                **({"attrs": dict(ln.attrs)} if ln.attrs else {}),
            }
            for ln in s.links
        ],
        "support": s.support.as_dict(),
        **({"meta": dict(s.meta)} if s.meta else {}),
    }


def load_system(path: str | Path) -> System:
    """Read a system YAML file; a bare name loads ``data/systems/<name>.yaml`` from the repository.

    >>> load_system("cpu_gpu_fpga").host
    'cpu0'
    """
    p = Path(path)
    if not p.exists() and p.suffix == "" and (_data_dir() / f"{path}.yaml").exists():
        p = _data_dir() / f"{path}.yaml"
    if not p.exists():
        raise FormatError(f"system file {str(path)!r} not found", field="path")
    try:
        d = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise FormatError(f"{p.name}: not valid YAML: {e}", field="<yaml>") from None
    return system_from_dict(d, source=p.name)


def save_system(s: System, path: str | Path) -> None:
    """Write a system as YAML."""
    Path(path).write_text(yaml.safe_dump(system_to_dict(s), sort_keys=False))


def _data_dir() -> Path:
    return Path(__file__).resolve().parents[2] / "data" / "systems"


def bundled_systems() -> list[str]:
    """Names of the systems in ``data/systems``."""
    d = _data_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.exists() else []


def toy_system(*, host_link_Bps: float = 16e9) -> System:
    """A small CPU + GPU + FPGA system with round numbers, for examples and tests.

    The FPGA runs only convolutions, matmuls and a few elementwise ops (as real FPGA overlays do);
    the CPU is the host and runs everything slowly.
    """
    if host_link_Bps <= 0:
        raise HetschedError(f"host_link_Bps must be positive, got {host_link_Bps!r}", field="host_link_Bps")
    GiB = 2**30
    devices = [
        Device("cpu0", "cpu", {"default": 1e12}, 256 * GiB, 100e9, 2e-6, power_W=200, idle_power_W=60),
        Device("gpu0", "gpu", {"default": 20e12, "matmul": 100e12, "conv": 80e12}, 16 * GiB, 900e9, 5e-6, power_W=300, idle_power_W=50),
        Device("fpga0", "fpga", {"default": 2e12, "conv": 30e12, "matmul": 20e12}, 4 * GiB, 77e9, 1e-6, power_W=75, idle_power_W=20),
    ]
    links = [
        Link("cpu0", "gpu0", host_link_Bps, 5e-6),
        Link("cpu0", "fpga0", host_link_Bps, 5e-6),
    ]
    support = SupportTable(
        {
            "gpu0": {"*": 1},
            "fpga0": {"Conv": 1, "MatMul": 1, "Gemm": 1, "Relu": 2, "Add": 2, "MaxPool": 2},
            "cpu0": {"*": 3},
        }
    )
    return System(devices, links, host="cpu0", support=support, name="toy")
