"""Interactive panels over hetsched results (installed as ``hetsched.widgets``).

Panels hold no algorithm logic: they call the core and replay ``result.steps``.
"""

from .base import Panel, Session, download_link, figure_widget, update_figure
from .graph_panel import GraphPanel

__all__ = ["Panel", "Session", "GraphPanel", "download_link", "figure_widget", "update_figure"]
