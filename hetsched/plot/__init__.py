"""Figure builders (pure functions returning ``plotly.graph_objects.Figure``).

The shared builders live in :mod:`hetsched.plot.core`; family-specific ones in
``hetsched.plot.<family>``.

>>> from hetsched import plot
>>> callable(plot.gantt) and callable(plot.memory_curve)
True
"""

from .core import (
    KIND_COLORS,
    MAX_BARS,
    PALETTE,
    bytes_unit,
    color_map,
    compare,
    figure_from_dicts,
    gantt,
    graph_view,
    memory_curve,
    time_unit,
)

__all__ = [
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
