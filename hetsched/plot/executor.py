"""Figures of the executor family (seed 004): Gantt with host threads over streams, policy bars.

Pure functions: they read an :class:`~hetsched.executor.ExecutorResult` (or a comparison) and
return a new ``go.Figure``; they never change their input.

>>> import hetsched.executor as ex
>>> r = ex.simulate(ex.graphs.d2h_branch_graph(8, 4), streams="patent", threads="patent")
>>> fig = executor_gantt(r)
>>> list(fig.layout.yaxis.categoryarray)[-1]
'thread0'
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from .core import _gantt_parts, _text, compare, figure_from_dicts, time_unit

__all__ = ["executor_lanes", "executor_gantt", "policy_bars", "ordering_bars", "rule_bars"]


def executor_lanes(timeline: pd.DataFrame) -> list[str]:
    """Lane order top to bottom (:func:`hetsched.executor.trace.lane_order`): threads, then streams.

    >>> from hetsched.timeline import make_timeline
    >>> tl = make_timeline([dict(lane=l, group=g, name="x", kind="idle", start_s=0, end_s=1)
    ...                     for l, g in [("gpu0:s1", "gpu0"), ("thread1", "host")]])
    >>> executor_lanes(tl)
    ['thread1', 'gpu0:s1']
    """
    from ..executor.trace import lane_order

    return lane_order(timeline)


def executor_gantt(result: Any, *, title: str | None = None, arrows: bool | None = None,
                   color_by: str = "kind", max_arrows: int = 80, step: int | None = None) -> go.Figure:
    """Host-thread lanes (launch, compute, blocked, idle) above stream lanes (kernels, copies, waits).

    ``arrows`` draws launch -> kernel arrows (the timeline's ``flow`` ids) as annotations; by
    default only when there are at most ``max_arrows`` of them. ``step`` (a dispatch step index,
    what a step walker is on) outlines that op's bars and draws a cursor at the time it was
    dispatched.

    >>> import hetsched.executor as ex
    >>> r = ex.simulate(ex.graphs.inception_graph(1))
    >>> len(executor_gantt(r).layout.annotations)
    9
    >>> len(executor_gantt(r, step=3).layout.shapes)
    1
    """
    tl = result.timeline
    hl, cursor = None, None
    if step is not None:
        s = result.steps[step]
        hl, cursor = [s.subject], float(s.data.get("time_s", 0.0))
    data, layout = _gantt_parts(tl, color_by=color_by, lanes=executor_lanes(tl), highlight=hl, cursor_s=cursor,
                                title=title or f"executor: {result.params.get('streams')} streams, "
                                               f"{result.params.get('threads')} threads")
    flows = tl[tl["flow"].notna()]
    n_flow = flows["flow"].nunique()
    if arrows is None:
        arrows = n_flow <= max_arrows
    if arrows and n_flow:
        unit, f = time_unit(float(tl["end_s"].max()))
        notes = []
        for fid, sub in flows.groupby("flow", sort=False):
            launch = sub[sub["kind"] == "launch"]
            work = sub[sub["kind"] != "launch"]
            if len(launch) != 1 or len(work) != 1:
                continue
            notes.append(dict(x=float(work["start_s"].iat[0]) * f, y=str(work["lane"].iat[0]),
                              ax=float(launch["end_s"].iat[0]) * f, ay=str(launch["lane"].iat[0]),
                              xref="x", yref="y", axref="x", ayref="y", showarrow=True, arrowhead=2,
                              arrowsize=0.8, arrowwidth=0.8, arrowcolor="rgba(60,60,60,0.45)", text=""))
        if notes:
            layout["annotations"] = notes
    return figure_from_dicts(data, layout)


def policy_bars(comparison: Any, metric: str = "makespan_s") -> go.Figure:
    """One bar per executor policy (a :class:`~hetsched.executor.PolicyComparison` or its frame).

    >>> import hetsched.executor as ex
    >>> len(policy_bars(ex.compare_policies(ex.graphs.inception_graph(1))).data[0].x)
    6
    """
    frame = comparison.frame if hasattr(comparison, "frame") else comparison
    return compare(frame, metric, by="policy", title=f"{metric} by executor policy", highlight="patent")


def ordering_bars(result: Any) -> go.Figure:
    """How many data edges each mechanism orders (stream, event, host, implied, race).

    >>> import hetsched.executor as ex
    >>> fig = ordering_bars(ex.simulate(ex.graphs.inception_graph(1), streams="nimble"))
    >>> sorted(fig.data[0].x)
    ['event: stream wait', 'stream']
    """
    counts = result.ordering["mechanism"].value_counts().sort_index()
    colors = ["#D55E00" if m == "race" else "#0072B2" for m in counts.index]
    return figure_from_dicts(
        [dict(type="bar", x=list(counts.index), y=counts.tolist(), marker=dict(color=colors),
              hovertemplate="%{x}: %{y} edges<extra></extra>")],
        dict(title=_text("what orders each data edge"), yaxis=dict(title=_text("edges")),
             margin=dict(l=10, r=10, t=40, b=40), height=300))


def rule_bars(result: Any) -> go.Figure:
    """How often each dispatch rule decided (:func:`hetsched.executor.rules_fired`); fallbacks in red.

    >>> import hetsched.executor as ex
    >>> r = ex.simulate(ex.graphs.thread_rules_graph(), streams="patent", threads="patent", pool_size=2)
    >>> fig = rule_bars(r); "claim1-sync-sync-other-fallback" in fig.data[0].x
    True
    """
    from ..executor.simulate import rules_fired

    f = rules_fired(result)
    colors = ["#D55E00" if fb else "#0072B2" for fb in f["fallback"]]
    return figure_from_dicts(
        [dict(type="bar", x=f["rule"].tolist(), y=f["count"].tolist(), marker=dict(color=colors),
              hovertext=[f"{c}: {m}" for c, m in zip(f["claim"], f["meaning"])], hoverinfo="text+y")],
        dict(title=_text("which rule placed each op (red: the rule could not be met)"), yaxis=dict(title=_text("ops")),
             margin=dict(l=10, r=10, t=40, b=40), height=300))
