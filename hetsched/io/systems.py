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

import os
import re
import sys
from dataclasses import dataclass, field
from importlib.resources import as_file
from pathlib import Path
from typing import Any, Mapping

import yaml

from .. import resources
from ..errors import FormatError, HetschedError
from ..limits import MAX_NESTING, show_number, too_deep
from ..system import Device, Link, SupportTable, System, next_device_name
from .files import check_fields, check_text, read_text

__all__ = ["load_system", "save_system", "system_from_dict", "system_to_dict", "system_to_yaml", "toy_system",
           "bundled_systems", "YamlLoader", "FastYamlLoader", "parse_yaml", "DeviceSpec", "device_specs", "add_device",
           "system_from_yaml"]

SYSTEM_FORMAT = "hetsched.system"
SYSTEM_VERSION = 1
_DEVICE_FIELDS = {
    "name", "kind", "peak_flops", "memory_bytes", "mem_bandwidth_Bps", "launch_overhead_s", "power_W",
    "idle_power_W", "attrs",
}
_LINK_FIELDS = {"src", "dst", "bandwidth_Bps", "latency_s", "duplex", "attrs"}
_TOP_FIELDS = {"format", "version", "name", "host", "devices", "links", "support", "meta"}


class YamlLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that reads ``1e9`` as the number (YAML 1.1 wants ``1.0e9`` and else gives a string)."""


_SCI_FLOAT = re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")
YamlLoader.add_implicit_resolver("tag:yaml.org,2002:float", _SCI_FLOAT, list("-+0123456789"))


class FastYamlLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """:class:`YamlLoader` on libyaml's parser where PyYAML has it (same numbers; a 2k-line cost file
    reads in a fraction of the pure-Python time)."""


FastYamlLoader.add_implicit_resolver("tag:yaml.org,2002:float", _SCI_FLOAT, list("-+0123456789"))


def parse_yaml(text: str, source: str, *, fast: bool = False) -> Any:
    """``text`` read by :class:`YamlLoader` (``fast``: :class:`FastYamlLoader`); every way it fails to
    read is a ``FormatError`` naming ``source`` (``field="<yaml>"``).

    >>> parse_yaml("peak: 1.0e12", "s.yaml", fast=True)
    {'peak': 1000000000000.0}
    >>> parse_yaml("x: " + "9" * 5000, "s.yaml")
    Traceback (most recent call last):
    ...
    hetsched.errors.FormatError: s.yaml: not readable YAML: an integer literal of more than 4300 digits
    """
    try:
        return yaml.load(text, Loader=FastYamlLoader if fast else YamlLoader)
    except yaml.YAMLError as e:
        raise FormatError(f"{source}: not valid YAML: {e}", field="<yaml>") from None
    except RecursionError:
        raise FormatError(f"{source}: YAML nested too deeply to read", field="<yaml>") from None
    except ValueError as e:  # an integer literal beyond Python's digit limit
        detail = ("an integer literal of more than 4300 digits" if "digits" in str(e) else str(e))
        raise FormatError(f"{source}: not readable YAML: {detail}", field="<yaml>") from None


def _num(v: Any, where: str, field: str, *, whole: bool = False, **culprit: str) -> float | int:
    """A number as YAML wrote it: not a bool, not a string, finite; ``whole`` for byte counts (no truncation)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        hint = " (a quoted number is text: write it unquoted)" if isinstance(v, str) else ""
        raise FormatError(f"{where}: field {field!r} must be a number, got {v!r}{hint}", field=field, **culprit)
    if not _finite(v):
        raise FormatError(f"{where}: field {field!r} must be a finite number, got {show_number(v)}", field=field, **culprit)
    if whole:
        if not float(v).is_integer():  # 1000.5 bytes was truncated to 1000
            raise FormatError(f"{where}: field {field!r} must be a whole number, got {v!r}", field=field, **culprit)
        return int(v)
    return float(v)


def _finite(v: int | float) -> bool:
    return -sys.float_info.max <= v <= sys.float_info.max  # False for NaN, inf and ints beyond any float


def _name(v: Any, where: str, field: str, *, what: str | None = None, **culprit: str) -> str:
    if not isinstance(v, str) or not v:
        raise FormatError(f"{where}: {what or field} must be a non-empty string (quote it in YAML), got {v!r}",
                          field=field, **culprit)
    return check_text(v, where, field, what=what, **culprit)


def _list(v: Any, where: str, field: str) -> list:
    if v is None:
        return []
    if not isinstance(v, list):
        raise FormatError(f"{where}: {field} must be a list, got {type(v).__name__} {_short(v)}", field=field)
    return v


def _map(v: Any, where: str, field: str, **culprit: str) -> dict:
    """A free-form map (``attrs``, ``meta``) or nothing, nested at most MAX_NESTING deep."""
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise FormatError(f"{where}: {field} must be a map, got {type(v).__name__} {_short(v)}", field=field, **culprit)
    if too_deep(v, MAX_NESTING):
        raise FormatError(f"{where}: {field} nests deeper than {MAX_NESTING} levels", field=field, **culprit)
    return dict(v)


def _short(v: Any) -> str:
    text = repr(v) if not isinstance(v, (list, dict)) or len(v) < 8 else f"of {len(v)} items"
    return text if len(text) <= 60 else text[:57] + "..."


def system_from_dict(d: Mapping[str, Any], *, source: str = "system") -> System:
    """Build a :class:`~hetsched.system.System` from the YAML structure; errors name the field and device.

    >>> system_from_dict({"devices": [{"name": "cpu0", "memory_bytes": 1000.5}]})
    Traceback (most recent call last):
    ...
    hetsched.errors.FormatError: system: device 'cpu0': field 'memory_bytes' must be a whole number, got 1000.5
    """
    if not isinstance(d, Mapping):
        raise FormatError(f"{source}: expected a mapping at the top level", field="<root>")
    fmt = d.get("format", SYSTEM_FORMAT)
    if fmt != SYSTEM_FORMAT:
        raise FormatError(f"{source}: format is {fmt!r}, expected {SYSTEM_FORMAT!r}", field="format")
    ver = d.get("version", SYSTEM_VERSION)
    if ver != SYSTEM_VERSION or isinstance(ver, bool):
        raise FormatError(f"{source}: unsupported system version {ver!r} (this hetsched reads {SYSTEM_VERSION})", field="version")
    check_fields(d, _TOP_FIELDS, source)
    name = _name(d.get("name", source), source, "name")
    host = None if d.get("host") is None else _name(d["host"], source, "host")
    meta = _map(d.get("meta"), source, "meta")
    devices = [_device(dv, f"{source}: devices[{i}]", source) for i, dv in enumerate(_list(d.get("devices"), source, "devices"))]
    links = [_link(ln, f"{source}: links[{i}]") for i, ln in enumerate(_list(d.get("links"), source, "links"))]
    sup = d.get("support")
    support = None
    if sup is not None:
        if not isinstance(sup, Mapping):
            raise FormatError(f"{source}: support must map backend -> {{op_type: priority}}", field="support")
        table = {}
        for b, row in sup.items():
            b = _name(b, f"{source}: support", "support", what="a backend name", device=str(b))
            if row is not None and not isinstance(row, Mapping):
                raise FormatError(f"{source}: support of {b!r} must map op_type -> priority, got {_short(row)}",
                                  field="support", device=b)
            table[b] = {_name(k, f"{source}: support of {b!r}", "support", what="an op type", device=b): v for k, v in (row or {}).items()}
        support = SupportTable(table)
    return System(devices, links, host=host, support=support, name=name, meta=meta)


def _device(dv: Any, where: str, source: str) -> Device:
    if not isinstance(dv, Mapping) or "name" not in dv:
        raise FormatError(f"{where}: a device is a map with a name, got {_short(dv)}", field="name")
    name = _name(dv["name"], where, "name")
    where = f"{source}: device {name!r}"
    check_fields(dv, _DEVICE_FIELDS, where, device=name)
    attrs = _map(dv.get("attrs"), where, "attrs", device=name)
    threads = attrs.get("threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        # the torch thread count hetsched calibrate ran with (priced against a cost file's ``threads``)
        raise FormatError(f"{where}: attrs.threads must be a positive integer, got {threads!r}", field="threads",
                          device=name)
    pf = dv.get("peak_flops", {"default": 1e12})
    if not isinstance(pf, Mapping):
        pf = {"default": pf}
    peak = {_name(k, where, "peak_flops", what="a peak_flops key", device=name): _num(v, where, f"peak_flops.{k}", device=name) for k, v in pf.items()}
    return Device(
        name=name,
        kind=_name(dv.get("kind", "cpu"), where, "kind", device=name),
        peak_flops=peak,
        memory_bytes=_num(dv.get("memory_bytes", 2**34), where, "memory_bytes", whole=True, device=name),
        mem_bandwidth_Bps=_num(dv.get("mem_bandwidth_Bps", 1e11), where, "mem_bandwidth_Bps", device=name),
        launch_overhead_s=_num(dv.get("launch_overhead_s", 0.0), where, "launch_overhead_s", device=name),
        power_W=_num(dv.get("power_W", 0.0), where, "power_W", device=name),
        idle_power_W=_num(dv.get("idle_power_W", 0.0), where, "idle_power_W", device=name),
        attrs=attrs,
    )


def _link(ln: Any, where: str) -> Link:
    if not isinstance(ln, Mapping) or "src" not in ln or "dst" not in ln or "bandwidth_Bps" not in ln:
        raise FormatError(f"{where}: a link needs src, dst and bandwidth_Bps", field="links")
    src, dst = _name(ln["src"], where, "src"), _name(ln["dst"], where, "dst")
    where = f"{where} ({src}->{dst})"
    check_fields(ln, _LINK_FIELDS, where, device=src)
    if not isinstance(ln.get("duplex", True), bool):
        raise FormatError(f"{where}: duplex must be true or false, got {ln['duplex']!r}", field="duplex", device=src)
    return Link(src, dst, _num(ln["bandwidth_Bps"], where, "bandwidth_Bps", device=src),
                _num(ln.get("latency_s", 0.0), where, "latency_s", device=src), bool(ln.get("duplex", True)),
                _map(ln.get("attrs"), where, "attrs", device=src))


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
    """Read a system YAML file; a bare name loads the bundled ``data/systems/<name>.yaml``.

    >>> load_system("cpu_gpu_fpga").host
    'cpu0'
    """
    if not isinstance(path, (str, os.PathLike)):
        raise FormatError(f"a system path must be a string or a path, got {type(path).__name__}", field="path")
    p = Path(path)
    if not p.exists() and p.suffix == "" and (res := resources.bundled_file("systems", str(path))) is not None:
        with as_file(res) as bundled:  # the file itself when installed on disk
            return load_system(bundled)
    return system_from_yaml(read_text(p, "system file"), source=p.name)


def system_to_yaml(s: System) -> str:
    """The system as YAML text (what :func:`save_system` writes; a panel offers it as a download).

    >>> text = system_to_yaml(toy_system())
    >>> text.splitlines()[0], system_from_yaml(text).device_names
    ('format: hetsched.system', ['cpu0', 'gpu0', 'fpga0'])
    """
    return yaml.safe_dump(system_to_dict(s), sort_keys=False)


def system_from_yaml(text: str | bytes, *, source: str = "system") -> System:
    """A system from YAML text (an uploaded file's content); errors name the file, the field and the device.

    >>> system_from_yaml("devices: [{name: x, memory_bytes: -1}]", source="up.yaml")
    Traceback (most recent call last):
    ...
    hetsched.errors.SystemError_: device 'x' has memory_bytes -1; it must be a finite number >= 0
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"{source}: not UTF-8 text", field="<yaml>") from None
    return system_from_dict(parse_yaml(text, source), source=source)


def save_system(s: System, path: str | Path) -> None:
    """Write a system as YAML."""
    Path(path).write_text(system_to_yaml(s))


def bundled_systems() -> list[str]:
    """Names of the systems in ``data/systems``."""
    return resources.bundled("systems")


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


# ---------------------------------------------------------------- the bundled device catalogue
@dataclass(frozen=True)
class DeviceSpec:
    """One device of a bundled system, as a machine editor offers it to add to another machine.

    Attributes
    ----------
    label : str
        What a picker shows: the device's model (``attrs["model"]``), else its kind and name.
    device : Device
        As bundled (under its name in its own system).
    link : Link or None
        Its link to its system's host (``None`` for a host).
    support : dict
        Its row of its system's support table (``{op_type: priority}``; empty: it runs nothing).
    source : str
        The bundled system it comes from.
    """

    label: str
    device: Device
    link: Link | None
    support: Mapping[str, int] = field(default_factory=dict)
    source: str = ""


_SPECS: dict[str, DeviceSpec] | None = None


def device_specs() -> dict[str, DeviceSpec]:
    """Every device model of the bundled systems, once (the first system listing a model gives it).

    >>> specs = device_specs()
    >>> spec = specs["Google Cloud TPU v4 (one chip)"]
    >>> spec.device.kind, spec.source, spec.support["Conv"]
    ('tpu', 'gpu_tpu', 1)
    """
    global _SPECS
    if _SPECS is None:
        out: dict[str, DeviceSpec] = {}
        for name in bundled_systems():
            s = load_system(name)
            for d in s.devices.values():
                label = str(d.attrs.get("model") or f"{d.kind} {d.name} of {name}")
                if label in out:
                    continue
                ln = s.link(s.host, d.name) if d.name != s.host else None
                out[label] = DeviceSpec(label, d, ln, dict(s.support.as_dict().get(d.name, {})), name)
        _SPECS = out
    return dict(_SPECS)


def add_device(system: System, spec: str | DeviceSpec, *, name: str | None = None) -> System:
    """A copy of ``system`` with one more device of a bundled model (:func:`device_specs`), linked to the host.

    The new device keeps its model's numbers, its support row and the speed of its link to its own
    host; it is named ``<kind><i>`` (the first free one) unless ``name`` is given.

    >>> s = add_device(toy_system(), "Google Cloud TPU v4 (one chip)")
    >>> s.device_names[-1], s.link("cpu0", "tpu0").bandwidth_Bps, s.candidates("Conv")[0]
    ('tpu0', 31500000000.0, 'gpu0')
    >>> add_device(toy_system(), "a quantum chip")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    hetsched.errors.UnknownNameError: no bundled device 'a quantum chip'; choose from 'Intel Xeon Platinum 8480+', ...
    """
    import dataclasses

    from ..errors import UnknownNameError, name_list

    if not isinstance(spec, DeviceSpec):
        specs = device_specs()
        if spec not in specs:
            raise UnknownNameError(f"no bundled device {spec!r}; choose from {name_list(specs, limit=len(specs))}",
                                   field="device")
        spec = specs[spec]
    new = name or next_device_name(system.device_names, spec.device.kind)
    dev = dataclasses.replace(spec.device, name=new)
    bw, lat = (spec.link.bandwidth_Bps, spec.link.latency_s) if spec.link is not None else (16e9, 5e-6)
    return system.with_device(dev, links=[Link(system.host, new, bw, lat)], support=spec.support)
