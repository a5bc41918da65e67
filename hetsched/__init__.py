"""hetsched: see, compare and teach how deep-learning work is scheduled on heterogeneous hardware.

The core is pure Python (no Jupyter imports). Data flows one way::

    io -> OpGraph + System (+ CostModel) -> algorithm -> Result -> plot -> widget

>>> import hetsched as hs
>>> g = hs.io.generators.chain(4)
>>> s = hs.toy_system()
>>> ev = hs.evaluate(g, s, {op: "gpu0" for op in g})
>>> ev.metrics["makespan_s"] > 0
True
"""

from __future__ import annotations

from . import errors, io
from .cost import CostModel, RooflineCost, TableCost
from .errors import HetschedError
from .evaluate import Evaluation, Placement, evaluate
from .graph import Op, OpGraph, Tensor
from .io import load_graph, load_system, save_graph, toy_system
from .results import Result, Step
from .system import Device, Link, SupportTable, System
from .timeline import check_timeline, make_timeline, to_chrome_trace

__version__ = "0.1.0"

__all__ = [
    "errors",
    "io",
    "HetschedError",
    "Op",
    "OpGraph",
    "Tensor",
    "Device",
    "Link",
    "System",
    "SupportTable",
    "CostModel",
    "RooflineCost",
    "TableCost",
    "Placement",
    "Evaluation",
    "evaluate",
    "Result",
    "Step",
    "check_timeline",
    "make_timeline",
    "to_chrome_trace",
    "load_graph",
    "save_graph",
    "load_system",
    "toy_system",
]
