"""The executor's inputs declared as data, for panels and CLIs (no UI code here).

:data:`PARAMETERS` is a :class:`~hetsched.params.ParamSpec` (the one format every family declares
its panel inputs in): each :class:`~hetsched.params.Param` has a kind, default, options or bounds,
unit, a label in plain words, how a person reads it (``display``: seconds in microseconds) and a
line of help. A widget builds its controls from it, refuses values outside it with
:func:`check_values` (``PARAMETERS.check``) and passes the values to
:func:`~hetsched.executor.simulate` (``costs`` overrides go in a dict).

The stream and thread defaults are a panel's (the patent's policies, what it walks through), not
:func:`~hetsched.executor.simulate`'s (``single``: the baseline a caller compares against).

>>> [p.name for p in PARAMETERS][:3]
['streams', 'threads', 'pool_size']
>>> simulate_kwargs({"streams": "nimble", "dispatch_s": 1e-5})["costs"]["dispatch_s"]
1e-05
>>> check_values({"dispatch_s": 1.0})
Traceback (most recent call last):
...
hetsched.errors.HetschedError: dispatch per op = 1e+06 us is out of range: allowed 0 to 50 us
"""

from __future__ import annotations

from typing import Any, Mapping

from ..params import Param, ParamSpec
from .costs import PRESETS
from .streams import STREAM_POLICIES
from .threads import THREAD_POLICIES

__all__ = ["PARAMETERS", "PARAMS", "simulate_kwargs", "check_values"]

_C = PRESETS["cuda"]
_US = (1e6, "us")

PARAMETERS = ParamSpec([
    Param("streams", "choice", "patent", label="streams", options=list(STREAM_POLICIES),
          help="stream policy: one stream, the patent's async/sync/copy streams, or Nimble's chains"),
    Param("threads", "choice", "patent", label="host threads policy", options=list(THREAD_POLICIES),
          help="host-thread policy: one thread, the patent's rules, or TensorFlow's inline-one"),
    Param("pool_size", "int", 4, label="host threads", min=1, max=16, step=1, unit="threads",
          help="host threads (the patent's thread 0 launches async ops, the others form the sync pool)"),
    Param("max_streams", "int", 0, label="max streams per device (0: no limit)", min=0, max=64, step=1, unit="streams",
          help="fold Nimble's chains onto this many streams (0: no limit)"),
    Param("dispatch_s", "float", _C.dispatch_s, label="dispatch per op", display=_US, min=0.0, max=50e-6, step=1e-6,
          unit="s", help="host time to dispatch one op (interpreter overhead)"),
    Param("launch_s", "float", _C.launch_s, label="kernel launch", display=_US, min=0.0, max=20e-6, step=1e-6,
          unit="s", help="host time of one kernel launch"),
    Param("wakeup_s", "float", _C.wakeup_s, label="thread wake-up", display=_US, min=0.0, max=50e-6, step=1e-6,
          unit="s", help="time to wake a sleeping thread on a hand-off"),
    Param("max_kernels", "int", _C.max_kernels, label="kernels at once", min=1, max=32, step=1, unit="kernels",
          help="kernels a device runs at once"),
    Param("pcie_Bps", "float", _C.pcie_Bps, label="PCIe bandwidth", display=(1e-9, "GB/s"), min=1e9, max=64e9, step=1e9,
          unit="B/s", help="host <-> device copy bandwidth"),
])
#: the same spec under the name every other family uses
PARAMS = PARAMETERS

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


def check_values(values: Mapping[str, Any]) -> None:
    """Refuse any value of :data:`PARAMETERS` that is not a finite number, not whole where a count is
    asked, not one of the options, or outside the entry's ``min``..``max`` (``PARAMETERS.check``).

    A panel calls this before simulating, so a bad entry is reported with its value and the
    allowed range instead of being clamped to the nearest allowed value (issue 20: a dispatch cost
    of 1 s silently became 50 us).

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
    hetsched.errors.HetschedError: kernel launch must be a finite number, got nan; allowed 0 to 20 us
    """
    PARAMETERS.check(values)
