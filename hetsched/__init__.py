"""hetsched: see, compare and teach how deep-learning work is scheduled on heterogeneous hardware.

The core is pure Python (no Jupyter imports). Data flows one way::

    io -> OpGraph + System (+ CostModel) -> algorithm -> Result -> plot -> widget

>>> import hetsched as hs
>>> g = hs.io.generators.chain(4)
>>> s = hs.toy_system()
>>> ev = hs.evaluate(g, s, {op: "gpu0" for op in g})
>>> ev.metrics["makespan_s"] > 0
True
>>> hs.pipeline.interleaved_1f1b(2, 2, 4).p  # families load on first use
2
>>> hs.compare_results({"a": ev.metrics}).metric.tolist()[:1]  # any results side by side, one long table
['makespan_s']
"""

from __future__ import annotations

from . import errors, io
from .cost import CostModel, RooflineCost, TableCost
from .errors import HetschedError
from .evaluate import Evaluation, Placement, evaluate
from .graph import Op, OpGraph, Tensor
from .io import load_graph, load_system, save_graph, toy_system
from .results import Result, Step, compare_results
from .system import Device, Link, SupportTable, System
from .timeline import check_timeline, make_timeline, to_chrome_trace

#: the one place the version is written (pyproject.toml reads it; CHANGELOG.md says what each one changed)
__version__ = "0.2.0"

# Algorithm families and heavier helpers load on first use (PEP 562): `import hetsched` stays fast
# and `hetsched.mapping.h2h(...)` works without a separate import.
_LAZY = {
    "mapping": "hetsched.mapping",
    "partition": "hetsched.partition",
    "pipeline": "hetsched.pipeline",
    "memory": "hetsched.memory",
    "executor": "hetsched.executor",
    "plot": "hetsched.plot",
    "whatif": "hetsched.whatif",
    "report": "hetsched.report",
    "des": "hetsched.des",
    "timeline": "hetsched.timeline",
    "sweep": "hetsched.sweep",
    "calibrate": "hetsched.calibrate",  # a callable module: hetsched.calibrate(...) runs the calibration
    "scenarios": "hetsched.scenarios",
    "blocks": "hetsched.blocks",
    "moe": "hetsched.moe",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return importlib.import_module(_LAZY[name])
    raise AttributeError(f"module 'hetsched' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    "mapping",
    "partition",
    "pipeline",
    "memory",
    "executor",
    "plot",
    "sweep",
    "calibrate",
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
    "compare_results",
    "check_timeline",
    "make_timeline",
    "to_chrome_trace",
    "load_graph",
    "save_graph",
    "load_system",
    "toy_system",
]
