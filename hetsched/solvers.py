"""Which MILP solver runs: HiGHS through highspy when it is installed, else PuLP's bundled CBC.

The house rule (``pulp>=3.3`` with ``highspy``): prefer HiGHS, fall back to CBC. One function
says it, so every MILP of the package picks and names its solver the same way; :func:`quiet_stdout`
keeps a solver library's banner off the process's stdout.

>>> pick_solver(None), pick_solver("cbc")
('highs', 'cbc')
>>> pick_solver("gurobi")
Traceback (most recent call last):
...
hetsched.errors.HetschedError: unknown solver 'gurobi'; choose one of ('highs', 'cbc')
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator

from .errors import HetschedError

__all__ = ["SOLVERS", "pick_solver", "quiet_stdout"]

SOLVERS = ("highs", "cbc")


def pick_solver(solver: str | None, *, error: type[HetschedError] = HetschedError) -> str:
    """``solver`` checked against :data:`SOLVERS`, or the default: ``"highs"`` if highspy imports, else ``"cbc"``."""
    if solver is None:
        try:
            import highspy  # noqa: F401

            return "highs"
        except ImportError:  # pragma: no cover - highspy is a dependency
            return "cbc"
    if solver not in SOLVERS:
        raise error(f"unknown solver {solver!r}; choose one of {SOLVERS}", field="solver")
    return solver


@contextmanager
def quiet_stdout() -> Iterator[None]:
    """Silence what a solver library prints on the process's stdout (HiGHS' banner), at the fd level.

    >>> with quiet_stdout():
    ...     pass
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # pragma: no cover - a captured stdout without an fd
        yield
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)
