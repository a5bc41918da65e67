"""The largest numbers and the deepest nesting hetsched accepts in graphs and systems.

Limits keep arithmetic exact and finite everywhere downstream: two tensors of 2**62 bytes summed
in a numpy int64 peak-memory curve wrap round to a negative peak, an integer above 2**1024 cannot
become a float, and a 2000-deep list in ``attrs`` overflows Python's recursion limit wherever it is
copied or saved. The loaders (``load_graph``, ``load_system``) and ``OpGraph.validate`` reject
input beyond them with a :class:`~hetsched.errors.HetschedError` naming the field; see
``docs/formats.md``.

>>> MAX_BYTES == 2**53, too_deep({"a": [[1]]}, limit=2), too_deep({"a": [1]}, limit=2)
(True, True, False)
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_BYTES", "MAX_FLOPS", "MAX_NESTING", "too_deep", "show_number"]

#: Largest byte count (a tensor, an op's weights, a device's memory) and largest sum of a graph's
#: tensor and weight bytes: 2**53 bytes (8 PiB). Every sum of them stays exact in a float64 and far
#: from int64 overflow.
MAX_BYTES: int = 2**53

#: Largest FLOP count of one op (1e30; a whole GPT-3 training run is ~3e23): sums over millions of
#: ops stay finite.
MAX_FLOPS: float = 1e30

#: Deepest nesting of lists/objects in free-form ``meta`` and ``attrs`` values.
MAX_NESTING: int = 32


def too_deep(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` nests lists/tuples/dicts more than ``limit`` levels deep (iterative: no recursion).

    Shared sub-objects (YAML aliases) are visited once per depth, so a "billion laughs" document
    is checked in time linear in its size as written, not as expanded.
    """
    stack = [(value, 1)]
    seen: set[tuple[int, int]] = set()
    while stack:
        v, depth = stack.pop()
        if not isinstance(v, (dict, list, tuple)):
            continue
        if depth > limit:
            return True
        if (id(v), depth) in seen:
            continue
        seen.add((id(v), depth))
        stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return False


def show_number(v: Any) -> str:
    """``repr`` of a number for a message; a huge integer is summarised (``repr(10**5000)`` raises).

    >>> show_number(2**60), show_number(10**400), show_number(1.5)
    ('1152921504606846976', 'an integer of 401 digits', '1.5')
    """
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**30:
        return f"an integer of {len(str(abs(v))) if v.bit_length() < 14000 else int(v.bit_length() * 0.30103) + 1} digits"
    return repr(v)
