"""The one registry idiom of the house: a table ``{name: callable}``, looked up by ``get(name, name)``.

Every family names its interchangeable algorithms in a plain dict from a name to the callable that
runs it (``memory.METHODS``, ``pipeline.SCHEDULES`` and ``GROUPINGS``, ``executor.STREAM_POLICIES`` and
``THREAD_POLICIES``, ``partition.MERGE_STRATEGIES``), as networkx takes ``weight`` or a layout: where
an argument names an algorithm, a callable of the same shape may be passed instead, and
``table.get(name, name)`` is what runs. :func:`lookup` does that and refuses anything else with the
names on offer; :func:`describe` gives the one line a panel shows for an entry, from the callable's
own docstring (one description per algorithm, written where it is implemented), and :func:`label`
its plain name: a registered callable's docstring starts ``"Plain name: what it does."``.

>>> table = {"double": lambda x: 2 * x}
>>> lookup(table, "double")(3), lookup(table, abs)(-3)
(6, 3)
>>> lookup(table, "triple")
Traceback (most recent call last):
...
hetsched.errors.UnknownNameError: unknown method 'triple'; choose from double
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from .errors import HetschedError, UnknownNameError

__all__ = ["lookup", "describe", "label"]


def lookup(table: Mapping[str, Callable], key: Any, *, what: str = "method", field: str | None = None,
           error: type[HetschedError] = UnknownNameError) -> Callable:
    """``table.get(key, key)`` if it is callable, else ``error`` naming ``key`` and the table's names.

    ``field`` (default ``what`` with spaces as underscores) is the argument the error names.

    >>> lookup({"a": len}, "a") is len
    True
    """
    try:
        fn = table.get(key, key)
    except TypeError:  # an unhashable key (a list...) names nothing
        fn = key
    if callable(fn):
        return fn
    raise error(f"unknown {what} {key!r}; choose from {', '.join(sorted(table))}",
                field=field or what.split()[-1].replace(" ", "_"))


def describe(fn: Callable) -> str:
    """What a panel shows for a registered callable: its ``description`` if it carries one, else the
    first block of its docstring, on one line.

    >>> def f():
    ...     '''Runs the thing,
    ...     in two lines.
    ...
    ...     Details.'''
    >>> describe(f)
    'Runs the thing, in two lines.'
    """
    own = getattr(fn, "description", None)  # an entry that carries its words (a mapper's Method)
    if isinstance(own, str):
        return own
    doc = (getattr(fn, "__doc__", None) or "").strip()
    return " ".join(doc.split("\n\n", 1)[0].split())


def label(fn: Callable) -> str:
    """The plain name of a registered callable: its ``label`` if it carries one, else :func:`describe`
    up to its first ``": "`` (the whole line when it has none).

    >>> def f():
    ...     "Kahn's order: a plain topological order."
    >>> label(f)
    "Kahn's order"
    """
    own = getattr(fn, "label", None)  # an entry that carries its name (a mapper's Method)
    return own if isinstance(own, str) else describe(fn).split(": ", 1)[0]
