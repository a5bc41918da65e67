"""Marking (the partition patent, claims 1-2, paragraphs 39-44, 61): give every op its best supporting backend.

The mapping list ``backend, op type, priority`` (1 = best) is a :class:`~hetsched.system.SupportTable`;
each op gets the enabled backend of best priority that supports its type, an override pins single
ops, and ``fallback`` (ONNX Runtime's CPU provider) takes what no enabled backend runs. One ``mark``
step per op records its candidates with their priorities, the disabled ones and the rule that chose.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..errors import HetschedError, UnknownNameError, UnsupportedOpError
from ..results import StepLog
from ..system import SupportTable, System

__all__ = ["resolve_table", "check_overrides", "mark"]


def resolve_table(table_or_system: SupportTable | System) -> tuple[SupportTable, System | None]:
    if isinstance(table_or_system, System):
        return table_or_system.support, table_or_system
    if isinstance(table_or_system, SupportTable):
        return table_or_system, None
    raise HetschedError(
        f"expected a SupportTable or a System, got {type(table_or_system).__name__}", field="table_or_system"
    )


def _mark_info(table: SupportTable, op_type: str, enabled: set[str] | None, fallback: str | None):
    """Choice and explanation for one op type (cached per call: every op of a type gets the same)."""
    allc = []
    for i, b in enumerate(table.backends):
        p = table.priority(b, op_type)
        if p is not None:
            allc.append((p, i, b))
    allc.sort()
    cands = [(b, p) for p, _, b in allc if enabled is None or b in enabled]
    disabled = [(b, p) for p, _, b in allc if enabled is not None and b not in enabled]
    shown = ", ".join(f"{b}:{p}" for b, p in cands)
    if cands:
        b, p = cands[0]
        if len(cands) == 1:
            reason = f"only {b} supports {op_type} (priority {p})"
        else:
            reason = f"{b} has the best priority ({p}) among the enabled backends supporting {op_type}: {shown}"
        rule = "priority"
        choice = b
    elif fallback is not None:
        choice = fallback
        why = f"(disabled: {', '.join(b for b, _ in disabled)})" if disabled else "(no backend lists it)"
        reason = f"no enabled backend supports {op_type} {why}: sent to the fallback {fallback}"
        rule = "fallback"
    else:
        choice, reason, rule = None, f"no enabled backend supports {op_type}", "unsupported"
    data = {"op_type": op_type, "candidates": tuple(cands), "disabled": tuple(disabled), "choice": choice, "rule": rule}
    return choice, reason, data


def check_overrides(ov: Mapping[str, str], idx: Any, graph_name: str, table: SupportTable, known_set: set[str],
                    en_set: set[str] | None, fallback: str | None) -> None:
    """Each override names a known op and an enabled backend that runs it (or the fallback)."""
    types = idx.types
    for o, b in ov.items():
        if o not in idx.pos:
            raise UnknownNameError(f"overrides names unknown op {o!r} in graph {graph_name!r}", op=o)
        if b not in known_set:
            raise UnknownNameError(f"overrides pins op {o!r} to unknown backend {b!r}", op=o, device=b)
        if en_set is not None and b not in en_set:
            raise HetschedError(f"overrides pins op {o!r} to backend {b!r}, which is disabled", op=o, device=b, field="overrides")
        t = types[idx.pos[o]]
        if not table.supports(b, t) and b != fallback:
            raise UnsupportedOpError(
                f"overrides pins op {o!r} ({t}) to backend {b!r}, which does not support {t}", op=o, device=b, ops=[(o, t)]
            )


def mark(names: Sequence[str], types: Sequence[str], table: SupportTable, en_set: set[str] | None,
         fallback: str | None, ov: Mapping[str, str], steps: StepLog) -> tuple[list[str], list[tuple[str, str]]]:
    """One ``mark`` step per op; returns the backend of each op (in ``names`` order) and the ops
    no enabled backend supports (``(op, op_type)``; an error naming all of them when no fallback)."""
    info: dict[str, tuple] = {}
    backend: list[str] = []
    unsupported: list[tuple[str, str]] = []
    for name, t in zip(names, types):
        hit = info.get(t)
        if hit is None:
            hit = info[t] = _mark_info(table, t, en_set, fallback)
        choice, reason, data = hit
        if ov and name in ov:
            choice = ov[name]
            reason = f"pinned to {choice} by an override"
            data = {**data, "choice": choice, "rule": "override"}
        elif data["rule"] != "priority":
            unsupported.append((name, t))
            if choice is None:
                continue
        backend.append(choice)
        steps.append(("mark", name, None, None, True, reason, {"backend": {name: choice}}, data))
    if unsupported and fallback is None:
        by_type: dict[str, list[str]] = {}
        for o, t in unsupported:
            by_type.setdefault(t, []).append(o)
        listing = "; ".join(f"{t}: {', '.join(repr(o) for o in os_)}" for t, os_ in by_type.items())
        raise UnsupportedOpError(
            f"no enabled backend supports {len(unsupported)} op(s) — {listing}. Enable a backend that runs them,"
            f" add them to the support table, or name a fallback backend",
            op=unsupported[0][0],
            ops=unsupported,
        )
    return backend, unsupported
