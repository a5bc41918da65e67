"""Figure builders (pure functions returning ``plotly.graph_objects.Figure``).

The shared builders live in :mod:`hetsched.plot.core`; family-specific ones in
``hetsched.plot.<family>``.

>>> from hetsched import plot
>>> callable(plot.gantt) and callable(plot.memory_curve)
True
"""

from .core import (
    GROUP_PALETTE,
    IDLE,
    KIND_COLORS,
    MAX_BARS,
    NEUTRAL,
    PALETTE,
    bytes_unit,
    color_map,
    compare,
    figure_from_dicts,
    format_time_range,
    format_value,
    metrics_table,
    gantt,
    graph_view,
    group_colors,
    memory_curve,
    metric_label,
    time_unit,
)

__all__ = [
    "GROUP_PALETTE",
    "IDLE",
    "NEUTRAL",
    "format_time_range",
    "format_value",
    "metrics_table",
    "group_colors",
    "metric_label",
    "KIND_COLORS",
    "MAX_BARS",
    "PALETTE",
    "bytes_unit",
    "color_map",
    "compare",
    "figure_from_dicts",
    "gantt",
    "graph_view",
    "memory_curve",
    "time_unit",
]
