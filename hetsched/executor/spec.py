"""The executor's inputs declared as data, for panels and CLIs (no UI code here).

Each entry: ``name``, ``kind`` (``choice``, ``int``, ``float``), ``default``, ``options`` or
``min``/``max``/``step``, ``unit``, ``label`` (plain words for a screen), ``display`` (``(factor,
unit)``: how a person reads the value, e.g. seconds in microseconds) and ``help``. A widget builds
its controls from this list, refuses values outside it with :func:`check_values` and passes the
values to :func:`~hetsched.executor.simulate` (``costs`` overrides go in a dict).

>>> [p["name"] for p in PARAMETERS][:3]
['streams', 'threads', 'pool_size']
>>> simulate_kwargs({"streams": "nimble", "dispatch_s": 1e-5})["costs"]["dispatch_s"]
1e-05
>>> check_values({"dispatch_s": 1.0})
Traceback (most recent call last):
...
hetsched.errors.HetschedError: dispatch per op = 1e+06 us is out of range: allowed 0 to 50 us
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from ..errors import HetschedError
from .costs import PRESETS
from .streams import STREAM_POLICIES
from .threads import THREAD_POLICIES

__all__ = ["PARAMETERS", "simulate_kwargs", "check_values"]

_C = PRESETS["cuda"]

PARAMETERS: list[dict[str, Any]] = [
    {"name": "streams", "label": "streams", "kind": "choice", "options": list(STREAM_POLICIES), "default": "patent",
     "help": "stream policy: one stream, the patent's async/sync/copy streams, or Nimble's chains"},
    {"name": "threads", "label": "host threads policy", "kind": "choice", "options": list(THREAD_POLICIES), "default": "patent",
     "help": "host-thread policy: one thread, the patent's rules, or TensorFlow's inline-one"},
    {"name": "pool_size", "label": "host threads", "kind": "int", "min": 1, "max": 16, "step": 1, "default": 4, "unit": "threads",
     "help": "host threads (the patent's thread 0 launches async ops, the others form the sync pool)"},
    {"name": "max_streams", "label": "max streams per device (0: no limit)", "kind": "int", "min": 0, "max": 64, "step": 1, "default": 0, "unit": "streams",
     "help": "fold Nimble's chains onto this many streams (0: no limit)"},
    {"name": "dispatch_s", "label": "dispatch per op", "display": (1e6, "us"), "kind": "float", "min": 0.0, "max": 50e-6, "step": 1e-6, "default": _C.dispatch_s,
     "unit": "s", "help": "host time to dispatch one op (interpreter overhead)"},
    {"name": "launch_s", "label": "kernel launch", "display": (1e6, "us"), "kind": "float", "min": 0.0, "max": 20e-6, "step": 1e-6, "default": _C.launch_s,
     "unit": "s", "help": "host time of one kernel launch"},
    {"name": "wakeup_s", "label": "thread wake-up", "display": (1e6, "us"), "kind": "float", "min": 0.0, "max": 50e-6, "step": 1e-6, "default": _C.wakeup_s,
     "unit": "s", "help": "time to wake a sleeping thread on a hand-off"},
    {"name": "max_kernels", "label": "kernels at once", "kind": "int", "min": 1, "max": 32, "step": 1, "default": _C.max_kernels,
     "unit": "kernels", "help": "kernels a device runs at once"},
    {"name": "pcie_Bps", "label": "PCIe bandwidth", "display": (1e-9, "GB/s"), "kind": "float", "min": 1e9, "max": 64e9, "step": 1e9, "default": _C.pcie_Bps,
     "unit": "B/s", "help": "host <-> device copy bandwidth"},
]

_COST_FIELDS = ("dispatch_s", "launch_s", "wakeup_s", "max_kernels", "pcie_Bps")


def simulate_kwargs(values: Mapping[str, Any]) -> dict[str, Any]:
    """Turn panel values (names of :data:`PARAMETERS`) into keyword arguments of ``simulate``.

    >>> simulate_kwargs({"max_streams": 0})
    {'max_streams': None}
    """
    out: dict[str, Any] = {}
    costs = {k: values[k] for k in _COST_FIELDS if k in values}
    for k, v in values.items():
        if k in _COST_FIELDS:
            continue
        out[k] = (v or None) if k == "max_streams" else v
    if costs:
        out["costs"] = costs
    return out


def _shown(p: Mapping[str, Any], v: float) -> str:
    f, unit = p.get("display", (1.0, p.get("unit", "")))
    return f"{v * f:.4g} {unit}".strip()


def check_values(values: Mapping[str, Any]) -> None:
    """Refuse any value of :data:`PARAMETERS` that is not a finite number, not whole where a count is
    asked, not one of the options, or outside the entry's ``min``..``max``.

    A panel calls this before simulating, so a bad entry is reported with its value and the
    allowed range instead of being clamped to the nearest allowed value (issue 20: a dispatch cost
    of 1 s silently became 50 us). Names not in :data:`PARAMETERS` are ignored.

    Raises
    ------
    HetschedError
        Naming the parameter (``field``), the value refused and why.

    >>> check_values({"pool_size": 4, "pcie_Bps": 12e9, "streams": "patent"})
    >>> check_values({"pcie_Bps": 0})
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: PCIe bandwidth = 0 GB/s is out of range: allowed 1 to 64 GB/s
    >>> check_values({"launch_s": float("nan")})
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: kernel launch must be a finite number, got nan
    """
    spec = {p["name"]: p for p in PARAMETERS}
    for name, v in values.items():
        p = spec.get(name)
        if p is None:
            continue
        label = p.get("label", name)
        if p["kind"] == "choice":
            if v not in p["options"]:
                raise HetschedError(f"{label}: unknown choice {v!r}; choose from {list(p['options'])}", field=name)
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise HetschedError(f"{label} must be a number, got {v!r}", field=name)
        if not math.isfinite(v):
            raise HetschedError(f"{label} must be a finite number, got {v!r}", field=name)
        if p["kind"] == "int" and int(v) != v:
            raise HetschedError(f"{label} must be a whole number, got {v!r}", field=name)
        lo, hi = p.get("min"), p.get("max")
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            f, unit = p.get("display", (1.0, p.get("unit", "")))
            raise HetschedError(f"{label} = {_shown(p, v)} is out of range: allowed {lo * f:.4g} to {hi * f:.4g} {unit}".rstrip(),
                                field=name)
