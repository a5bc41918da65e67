"""What a mapping panel can offer its user for :func:`~hetsched.mapping.h2h`, declared as data
(:class:`~hetsched.params.ParamSpec`).

``max_passes`` is the number of remap walks: 1 is the patent's one walk (claim 7), 0 (``None``
to :func:`~hetsched.mapping.h2h`) repeats the walk until it changes nothing. The occupancy
threshold is the share of a device's memory that may hold kept data (claim 4): more than 0, at
most 1.

>>> PARAMS["occupancy_threshold"].bounds_text(), PARAMS.defaults()["max_passes"]
('more than 0 up to 1', 1)
>>> PARAMS.check({"occupancy_threshold": 0.0})
Traceback (most recent call last):
...
hetsched.errors.HetschedError: occupancy threshold = 0 is out of range: allowed more than 0 up to 1
"""

from __future__ import annotations

import inspect

from ..params import Param, ParamSpec
from .engine import LOCALITY_POLICIES, OBJECTIVES
from .h2h import h2h

__all__ = ["PARAMS", "DIRECTIONS"]

#: where a remap may move a layer: towards its successor's device (the patent, claim 3) or also its predecessor's
DIRECTIONS = ("successor", "both")

# the panel starts from h2h's own default (None there: repeat until stable, shown as 0)
_passes = inspect.signature(h2h).parameters["max_passes"].default

PARAMS = ParamSpec([
    Param("objective", "choice", "total_latency", label="objective", options=OBJECTIVES,
          help="what a remap must lower: the system total latency (the patent's, claim 5) or the makespan (H2H's)"),
    Param("occupancy_threshold", "float", 0.9, label="occupancy threshold", min=0.0, min_open=True, max=1.0, step=0.05,
          help="the share of a device's memory that may hold kept data (claim 4)"),
    Param("policy", "choice", "greedy", label="keep on-chip by", options=tuple(LOCALITY_POLICIES),
          help="how weights and tensors are chosen to stay on chip: greedy (the patent's) or knapsack (H2H's)"),
    Param("direction", "choice", "successor", label="remap towards", options=DIRECTIONS,
          help="a remap tries the successor's device (the patent's) or also the predecessor's"),
    Param("max_passes", "int", 0 if _passes is None else int(_passes), label="remap walks", min=0, step=1,
          help="walks over the layers (1: the patent's, claim 7; 0: repeat until stable)"),
])
