"""Interactive panels over hetsched results (installed as ``hetsched.widgets``).

Panels hold no algorithm logic: they call the core and replay ``result.steps``.
"""

from .base import Panel, Session, StepWalker, download_link, figure_widget
from .graph_panel import GraphPanel
from .executor_panel import ExecutorPanel
from .backend_panel import BackendPanel
from .mapping_panel import MappingPanel
from .pipeline_panel import PipelinePanel
from .memory_panel import MemoryPanel
from .calibration_panel import CalibrationPanel
from .dashboard import Dashboard

__all__ = ["Panel", "Session", "StepWalker", "GraphPanel", "ExecutorPanel", "BackendPanel", "MappingPanel", "PipelinePanel", "MemoryPanel", "CalibrationPanel", "Dashboard", "download_link", "figure_widget"]
