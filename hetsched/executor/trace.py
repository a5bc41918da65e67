"""Lane order and the Chrome/Perfetto trace of an executor run.

:func:`hetsched.timeline.to_chrome_trace` already gives one process per ``group`` (the host is
pid 0, each device its own pid), one thread per ``lane`` (host threads, streams) and flow arrows
for shared ``flow`` ids (launch -> kernel). It numbers threads by their first slice, so a pool
thread that starts idle may be listed before ``thread0``; :func:`executor_trace` adds
``thread_sort_index`` metadata so viewers list host threads by index, then each device's streams.

>>> import hetsched.executor as ex
>>> tr = executor_trace(ex.simulate(ex.graphs.d2h_branch_graph(8, 4), streams="patent", threads="patent"))
>>> sorted({e["ph"] for e in tr["traceEvents"]})
['M', 'X', 'f', 's']
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ..timeline import to_chrome_trace

__all__ = ["lane_order", "executor_trace"]


def lane_order(timeline: pd.DataFrame) -> list[str]:
    """Lanes top to bottom: host threads by index, then each device's streams (by number).

    >>> from hetsched.timeline import make_timeline
    >>> tl = make_timeline([dict(lane=l, group=g, name="x", kind="idle", start_s=0, end_s=1)
    ...                     for l, g in [("gpu0:s1", "gpu0"), ("thread10", "host"), ("thread2", "host")]])
    >>> lane_order(tl)
    ['thread2', 'thread10', 'gpu0:s1']
    """
    lanes = list(dict.fromkeys(timeline["lane"].astype(str)))
    host = set(timeline.loc[timeline["group"] == "host", "lane"].astype(str))

    def key(lane: str):
        digits = "".join(ch for ch in lane.rsplit(":", 1)[-1] if ch.isdigit())
        return (lane not in host, lane.split(":", 1)[0] if lane not in host else "", int(digits) if digits else -1, lane)

    return sorted(lanes, key=key)


def executor_trace(result: Any, path: str | Path | None = None, *, name: str = "hetsched.executor") -> dict:
    """The Chrome/Perfetto trace of an :class:`~hetsched.executor.ExecutorResult`, threads in lane order.

    Writes JSON to ``path`` when given; returns the trace dict either way.
    """
    tr = to_chrome_trace(result.timeline, name=name)
    rank = {lane: i for i, lane in enumerate(lane_order(result.timeline))}
    extra = [
        {"ph": "M", "name": "thread_sort_index", "pid": e["pid"], "tid": e["tid"],
         "args": {"sort_index": rank.get(e["args"]["name"], len(rank))}}
        for e in tr["traceEvents"]
        if e.get("ph") == "M" and e.get("name") == "thread_name"
    ]
    tr["traceEvents"].extend(extra)
    if path is not None:
        Path(path).write_text(json.dumps(tr))
    return tr
