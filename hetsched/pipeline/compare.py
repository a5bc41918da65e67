"""Side-by-side what-if: several schedules or groupings, one metrics table.

>>> df = compare(4, 2, 10, costs={"F": 1, "B": 1})
>>> df.loc[df.label == "interleaved_1f1b[balanced]", "makespan_s"].item()
46.0
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import pandas as pd

from ..errors import ScheduleError
from ..results import compare_results
from .cache import peak_in_flight
from .schedules import GROUPINGS, make_schedule
from .simulate import simulate

__all__ = ["compare", "DEFAULT_LINEUP"]

#: (schedule name, options) pairs compared by default: every grouping of interleaved 1F1B.
#: (Costs are per stage, so only schedules with the same ``v`` compare like for like.)
DEFAULT_LINEUP: tuple[tuple[str, dict], ...] = tuple(("interleaved_1f1b", {"grouping": g}) for g in sorted(GROUPINGS))

_COLUMNS = ["label", "makespan_s", "bubble_fraction", "peak_activations_chunks", "peak_activation_bytes", "peak_cache_depth",
            "order_peak", "error"]


def compare(p: int, v: int, m: int, *, lineup: Iterable[tuple[str, Mapping[str, Any]]] = DEFAULT_LINEUP, costs: Any = None,
            comm: Any = None, cache: str | None = None, long: bool = False) -> pd.DataFrame:
    """Simulate each ``(schedule, options)`` on ``(p, v, m)``; one row per schedule.

    Columns: ``label`` (the schedule), ``makespan_s``, ``bubble_fraction``, ``peak_activations_chunks``,
    ``peak_activation_bytes``, ``peak_cache_depth``, ``order_peak`` (worst rank's in-flight count in
    list order) and ``error`` (why a schedule was refused, e.g. torch's divisibility rule). A
    schedule listed twice is one row. ``long=True`` gives the numbers in the house's long format
    instead (:func:`hetsched.results.compare_results`: ``label, family, metric, value``; a refused
    schedule has no numbers, hence no rows).

    >>> df = compare(4, 2, 9, costs={"F": 1, "B": 1})
    >>> df.set_index("label")["error"].notna().to_dict()["interleaved_1f1b[torch]"]  # 9 % 2 != 0
    True
    >>> compare(4, 2, 8, costs={"F": 1, "B": 1}, long=True).query("metric == 'makespan_s'")["value"].tolist()
    [38.0, 38.0, 38.0, 38.0]
    """
    rows: dict[str, dict[str, Any]] = {}
    for name, opts in lineup:
        label = f"{name}[{opts['grouping']}]" if "grouping" in opts else name
        try:
            s = make_schedule(name, p, v, m, **dict(opts))
            if s.name in rows:
                continue
            r = simulate(s, costs=costs, comm=comm, cache=cache, timeline=False)
        except ScheduleError as exc:
            rows.setdefault(label, {"error": str(exc).splitlines()[0]})
            continue
        rows[s.name] = {**{k: r.metrics[k] for k in _COLUMNS[1:-2]}, "order_peak": int(peak_in_flight(s).max()), "error": None}
    frame = compare_results(rows, metrics=_COLUMNS[1:], wide=True)
    return compare_results(frame, family="pipeline") if long else frame
