"""What a memory-ordering panel can offer its user for :func:`~hetsched.memory.optimize_order`,
declared as data (:class:`~hetsched.params.ParamSpec`).

``method`` is a key of :data:`~hetsched.memory.METHODS` (the patent's flow by default, claims 1
and 6-9); ``time_limit_s`` is the budget of the methods that run a solver or an exact search
(:data:`~hetsched.memory.SOLVER_METHODS`): any positive number of seconds.

The defaults are a panel's, not :func:`~hetsched.memory.optimize_order`'s (``method="auto"``,
``time_limit_s=10``): a panel opens on the patent's own flow, the thing it teaches, and keeps a
click answering within a couple of seconds.

>>> PARAMS["time_limit_s"].bounds_text()
'more than 0 s'
>>> PARAMS.check({"time_limit_s": 0})
Traceback (most recent call last):
...
hetsched.errors.HetschedError: ILP time limit = 0 s is out of range: allowed more than 0 s
"""

from __future__ import annotations

from ..params import Param, ParamSpec
from .optimize import METHODS

__all__ = ["PARAMS"]

PARAMS = ParamSpec([
    Param("method", "choice", "patent", label="method", options=tuple(METHODS),
          help="how the execution order is chosen (the patent's flow: ILP, else BFS/DFS + fine-tune)"),
    Param("time_limit_s", "float", 2.0, label="ILP time limit", min=0.0, min_open=True, step=0.5, unit="s",
          help="wall-time budget of a solver or an exact search"),
])
