"""Interactive panels over hetsched results (installed as ``hetsched.widgets``).

Panels hold no algorithm logic: they call the core and replay ``result.steps``. Each panel's
module is imported on first use (PEP 562), so showing one panel does not import the others.

>>> import hetsched.widgets as hw
>>> hw.GraphPanel.__name__
'GraphPanel'
"""

from __future__ import annotations

import importlib
from typing import Any

#: public name -> module that defines it
_WHERE = {
    "Panel": "base", "Session": "base", "StepWalker": "base", "download_link": "base", "figure_widget": "base",
    "PlotlyView": "figure",
    "GraphPanel": "graph_panel", "ExecutorPanel": "executor_panel", "BackendPanel": "backend_panel",
    "MappingPanel": "mapping_panel", "PipelinePanel": "pipeline_panel", "MemoryPanel": "memory_panel",
    "CalibrationPanel": "calibration_panel", "ExpertsPanel": "moe_panel",
    "Dashboard": "dashboard",
}

__all__ = list(_WHERE)


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(f".{mod}", __name__)
    except ImportError as e:
        from hetsched.optional import EXTRAS, install_hint

        if EXTRAS.get(e.name or "") == "lab":
            raise ImportError(f"hetsched's panels need {e.name}, which is not installed: {install_hint(e.name)}",
                              name=e.name) from None
        raise
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
