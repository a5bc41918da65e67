"""What a backend-partition panel can offer its user for :func:`~hetsched.partition.partition_by_support`
and :func:`~hetsched.partition.simulate_buffered`, declared as data (:class:`~hetsched.params.ParamSpec`).

``merge="none"`` launches every op on its own; ``launch_s=None`` keeps each backend's own launch
cost; ``priority`` is one cell of a support table (1 = best, 0 = not supported). Which backends
and op types exist is the loaded system's to say (checked where it is known).

>>> PARAMS["launch_s"].bounds_text()
'0 to 1000000 us, or empty'
>>> PARAMS.check({"n_inputs": 0})
Traceback (most recent call last):
...
hetsched.errors.HetschedError: number of inputs = 0 is out of range: allowed 1 to 1000
"""

from __future__ import annotations

from ..params import Param, ParamSpec
from .merging import MERGE_STRATEGIES

__all__ = ["PARAMS"]

PARAMS = ParamSpec([
    Param("merge", "choice", "adjacent", label="merge", options=tuple(MERGE_STRATEGIES),
          help="how ops on one backend are merged into aggregated ops (adjacent: the patent's; none: one launch per op)"),
    Param("min_group_size", "int", 1, label="minimum group size", min=1, max=10**6, step=1, unit="ops",
          help="smaller groups go back to the fallback backend"),
    Param("buffer_depth", "int", 2, label="buffer depth", min=0, max=1000, step=1,
          help="inputs a buffer between two backends holds (0: one input at a time, no overlap)"),
    Param("n_inputs", "int", 8, label="number of inputs", min=1, max=1000, step=1,
          help="inputs run through the aggregated ops"),
    Param("launch_s", "float", None, label="launch cost per aggregated op", min=0.0, max=1.0, unit="s", display=(1e6, "us"),
          allow_none=True, help="host time to launch one aggregated op (empty: each backend's own)"),
    Param("priority", "int", 1, label="priority", min=0, max=999, step=1,
          help="a support-table cell: 1 = best, 0 = not supported"),
])
