"""The executor's inputs declared as data, for panels and CLIs (no UI code here).

Each entry: ``name``, ``kind`` (``choice``, ``int``, ``float``), ``default``, ``options`` or
``min``/``max``/``step``, ``unit`` and ``help``. A widget builds its controls from this list and
passes the values to :func:`~hetsched.executor.simulate` (``costs`` overrides go in a dict).

>>> [p["name"] for p in PARAMETERS][:3]
['streams', 'threads', 'pool_size']
>>> simulate_kwargs({"streams": "nimble", "dispatch_s": 1e-5})["costs"]["dispatch_s"]
1e-05
"""

from __future__ import annotations

from typing import Any, Mapping

from .costs import PRESETS
from .streams import STREAM_POLICIES
from .threads import THREAD_POLICIES

__all__ = ["PARAMETERS", "simulate_kwargs"]

_C = PRESETS["cuda"]

PARAMETERS: list[dict[str, Any]] = [
    {"name": "streams", "kind": "choice", "options": list(STREAM_POLICIES), "default": "patent",
     "help": "stream policy: one stream, the patent's async/sync/copy streams, or Nimble's chains"},
    {"name": "threads", "kind": "choice", "options": list(THREAD_POLICIES), "default": "patent",
     "help": "host-thread policy: one thread, the patent's rules, or TensorFlow's inline-one"},
    {"name": "pool_size", "kind": "int", "min": 1, "max": 16, "step": 1, "default": 4, "unit": "threads",
     "help": "host threads (the patent's thread 0 launches async ops, the others form the sync pool)"},
    {"name": "max_streams", "kind": "int", "min": 0, "max": 64, "step": 1, "default": 0, "unit": "streams",
     "help": "fold Nimble's chains onto this many streams (0: no limit)"},
    {"name": "dispatch_s", "kind": "float", "min": 0.0, "max": 50e-6, "step": 1e-6, "default": _C.dispatch_s,
     "unit": "s", "help": "host time to dispatch one op (interpreter overhead)"},
    {"name": "launch_s", "kind": "float", "min": 0.0, "max": 20e-6, "step": 1e-6, "default": _C.launch_s,
     "unit": "s", "help": "host time of one kernel launch"},
    {"name": "wakeup_s", "kind": "float", "min": 0.0, "max": 50e-6, "step": 1e-6, "default": _C.wakeup_s,
     "unit": "s", "help": "time to wake a sleeping thread on a hand-off"},
    {"name": "max_kernels", "kind": "int", "min": 1, "max": 32, "step": 1, "default": _C.max_kernels,
     "unit": "kernels", "help": "kernels a device runs at once"},
    {"name": "pcie_Bps", "kind": "float", "min": 1e9, "max": 64e9, "step": 1e9, "default": _C.pcie_Bps,
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
