"""Hypothesis strategies for fuzzing inputs: hostile values, mutations of valid documents, checks.

Used by ``tests/test_fuzz_*.py``. Mutating a valid bundled file finds far more than random
structure does (a random document rarely gets past the first field); both are used.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

from hetsched.errors import HetschedError

NAN, INF = float("nan"), float("inf")


def deep(n: int, leaf: Any = 1) -> Any:
    """``n`` nested lists around ``leaf`` (built iteratively: no recursion)."""
    v = leaf
    for _ in range(n):
        v = [v]
    return v


#: values that broke a loader at least once (issue 20): huge, non-finite, wrong-typed, deep
NASTY: list[Any] = [
    None, True, False, 0, -1, 1.5, 8.5, 2**53, 2**53 + 1, 2**62, 2**63, 2**64, -(2**63), 10**400,
    NAN, INF, -INF, 1e308, 5e-324, "", "x", "=cmd|' /C calc'!A0", "1e9", "nan", [], {}, [1, 2], {"a": 1},
    [["k", "v"]], deep(40), deep(300), {"d": deep(50)},
]


def nasty_values() -> st.SearchStrategy:
    return st.one_of(
        st.sampled_from(NASTY).map(copy.deepcopy),  # a mutation must never edit the shared originals
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
        st.lists(st.integers(-3, 3), max_size=3),
        st.dictionaries(st.text(max_size=3), st.integers(-3, 3), max_size=2),
    )


def _paths(tree: Any) -> list[tuple]:
    """Every location in a JSON-like tree (root included), breadth first, as key/index paths."""
    out: list[tuple] = [()]
    queue = [((), tree)]
    while queue:
        path, node = queue.pop(0)
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append(path + (k,))
            queue.append((path + (k,), v))
    return out


def _get(tree: Any, path: tuple) -> Any:
    for k in path:
        tree = tree[k]
    return tree


@st.composite
def mutated(draw, tree: Any, max_mutations: int = 3) -> Any:
    """A copy of ``tree`` with 1..``max_mutations`` edits: replace a value, delete, add a key,
    duplicate a list item, wrap a value in a list, or swap two values of the same parent."""
    t = copy.deepcopy(tree)
    for _ in range(draw(st.integers(1, max_mutations))):
        paths = [p for p in _paths(t) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _get(t, path[:-1]), path[-1]
        op = draw(st.sampled_from(["replace", "replace", "delete", "add_key", "duplicate", "wrap", "swap"]))
        if op == "replace":
            parent[key] = draw(nasty_values())
        elif op == "delete":
            del parent[key]
        elif op == "add_key" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["extra", "name", "size_bytes", "alias_of", "consumers", "host", "links"]))] = \
                draw(nasty_values())
        elif op == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        elif op == "wrap":
            parent[key] = [parent[key]]
        elif op == "swap" and len(parent) > 1:
            keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
            other = draw(st.sampled_from(keys))
            parent[key], parent[other] = parent[other], parent[key]
    return t


@st.composite
def text_edits(draw, text: str, max_edits: int = 4) -> str:
    """``text`` with a few characters inserted, deleted or replaced (YAML/JSON syntax damage)."""
    chars = list(text)
    alphabet = st.sampled_from(list(":{}[],-#&*!|>'\"\n\t .0123456789einfaNx\\") + ["\u00e9", "\ufeff", "\x00"])
    for _ in range(draw(st.integers(1, max_edits))):
        i = draw(st.integers(0, max(0, len(chars) - 1)))
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        if op == "insert":
            chars.insert(i, draw(alphabet))
        elif op == "delete" and chars:
            del chars[i]
        elif chars:
            chars[i] = draw(alphabet)
    return "".join(chars)


def accepted(load, *args: Any, **kwargs: Any) -> Any:
    """``load(*args)``'s result, or None when it raised a ``HetschedError`` naming its culprit.

    Any other exception propagates (and fails the test): that is what fuzzing looks for.
    """
    try:
        return load(*args, **kwargs)
    except HetschedError as e:
        assert names_culprit(e), f"{type(e).__name__} names no culprit: {e}"
        return None


def names_culprit(e: HetschedError) -> bool:
    """The error says what is at fault, as attributes (not only in prose)."""
    return any(getattr(e, k, None) not in (None, "") for k in ("op", "tensor", "device", "field"))


def json_text(d: Any) -> str:
    """JSON as Python writes it (NaN and Infinity included, as a careless exporter would)."""
    return json.dumps(d, allow_nan=True)
