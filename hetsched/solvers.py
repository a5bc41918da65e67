"""Which MILP solver runs: HiGHS through highspy when it is installed, else PuLP's bundled CBC.

The house rule (``pulp>=3.3`` with ``highspy``): prefer HiGHS, fall back to CBC. One function
says it, so every MILP of the package picks and names its solver the same way.

>>> pick_solver(None), pick_solver("cbc")
('highs', 'cbc')
>>> pick_solver("gurobi")
Traceback (most recent call last):
...
hetsched.errors.HetschedError: unknown solver 'gurobi'; choose one of ('highs', 'cbc')
"""

from __future__ import annotations

from .errors import HetschedError

__all__ = ["SOLVERS", "pick_solver"]

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
