"""Exception types of hetsched.

Every error names what is at fault (an op, a tensor, a device, a field) both in its message and as
attributes, so a widget can highlight the culprit and a test can assert on it without parsing text.

Examples
--------
>>> from hetsched.errors import GraphError, HetschedError
>>> err = GraphError("tensor 't1' has negative size -4", tensor="t1")
>>> isinstance(err, HetschedError), err.tensor
(True, 't1')
"""

from __future__ import annotations

from typing import Any, Iterable

__all__ = [
    "HetschedError",
    "GraphError",
    "CycleError",
    "UnknownNameError",
    "FormatError",
    "SystemError_",
    "UnsupportedOpError",
    "CapacityError",
    "Infeasible",
    "SolverError",
    "ScheduleError",
    "TimelineViolation",
    "ThreadMismatchError",
]


class HetschedError(Exception):
    """Base of every error hetsched raises on purpose.

    Parameters
    ----------
    message : str
        What went wrong, naming the op / tensor / device / field at fault.
    op, tensor, device, field : str, optional
        The culprit, machine-readable.
    **details
        Anything else worth keeping (e.g. ``cycle=[...]``), stored in ``details``.
    """

    def __init__(
        self,
        message: str,
        *,
        op: str | None = None,
        tensor: str | None = None,
        device: str | None = None,
        field: str | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.op = op
        self.tensor = tensor
        self.device = device
        self.field = field
        self.details = details

    def __str__(self) -> str:  # keep the message only: no repr noise in widget panels
        return self.message


class GraphError(HetschedError, ValueError):
    """A computation graph is malformed (dangling reference, negative size, duplicate name...)."""


class CycleError(GraphError):
    """The graph has a cycle; ``details['cycle']`` lists the ops on it, in order."""

    @property
    def cycle(self) -> list[str]:
        return list(self.details.get("cycle", []))


class UnknownNameError(GraphError, KeyError):
    """An op, tensor or device name that does not exist was asked for."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return self.message


class FormatError(HetschedError, ValueError):
    """A file (graph JSON, system YAML, support table, cache) does not follow its format."""


class SystemError_(HetschedError, ValueError):
    """A system description is malformed (unknown device in a link, negative bandwidth...).

    The trailing underscore avoids shadowing the builtin ``SystemError``.
    """


class UnsupportedOpError(HetschedError):
    """Some ops are supported by no (enabled) device/backend.

    ``details['ops']`` is a list of ``(op_name, op_type)`` for every such op.
    """

    @property
    def ops(self) -> list[tuple[str, str]]:
        return list(self.details.get("ops", []))


class Infeasible(HetschedError):
    """The problem has no solution (e.g. nothing can be placed within memory)."""


class CapacityError(Infeasible):
    """A device's memory capacity cannot hold what must live on it; names the device."""


class SolverError(HetschedError):
    """An external solver failed, or hit its time limit without a usable answer."""


class ScheduleError(HetschedError, ValueError):
    """A pipeline or execution schedule breaks a rule (missing action, deadlock...)."""


class ThreadMismatchError(HetschedError):
    """A cost calibrated with one number of torch threads asked to price a run with another.

    Efficiency curves measured on one core say nothing about two (memory-bound ops share the
    memory bandwidth, small ops gain nothing from a second thread): ``details['calibrated']`` and
    ``details['requested']`` are the two thread counts, ``device`` the device.
    """


class TimelineViolation(HetschedError, AssertionError):
    """``check_timeline`` found a timeline that breaks a rule; ``details['kind']`` says which."""


def name_list(names: Iterable[str], limit: int = 10) -> str:
    """Format names for a message: ``'a', 'b' and 3 more``.

    >>> name_list(["a", "b", "c"], limit=2)
    "'a', 'b' and 1 more"
    """
    names = list(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    if len(names) > limit:
        shown += f" and {len(names) - limit} more"
    return shown
