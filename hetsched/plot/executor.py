"""Figures of the executor family: Gantt with host threads over streams, policy, rule and ordering bars.

Pure functions: they read an :class:`~hetsched.executor.ExecutorResult` (or a comparison) and
return a new ``go.Figure``; they never change their input. The plain words a screen shows for the
executor's keys live here too (:data:`RULE_LABELS`, :data:`KIND_WORDS`, :data:`METRIC_WORDS`), so
that no rule id or metric key reaches a figure or a panel (issue 22).

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

from ..errors import HetschedError
from .core import (NEUTRAL, PALETTE, gantt_parts, title_text, title_margin_px, compare, figure_from_dicts, fit_title,
                   group_colors, time_unit)

__all__ = ["executor_lanes", "executor_gantt", "executor_gantt_at", "policy_bars", "ordering_bars", "rule_bars",
           "rule_bars_at", "RULE_LABELS",
           "KIND_WORDS", "METRIC_WORDS", "rule_label", "rule_claim", "FONT"]

#: every figure of this module uses at least this font size (projector-friendly, issue 22)
FONT = dict(size=14)
_FALLBACK_COLOR = "#D55E00"
_CURRENT = "#D55E00"

#: a rule id of :data:`hetsched.executor.THREAD_RULES` in a few plain words (button and axis labels)
RULE_LABELS: dict[str, str] = {
    "claim4-async-root": "async start op → async thread",
    "claim4-sync-root": "sync start op → sync thread",
    "claim5-async-async": "async → async stays",
    "claim5-async-sync": "async → sync to another thread",
    "claim1-sync-sync-keep": "sync → one sync successor stays",
    "claim1-sync-sync-other": "sync → other sync successors elsewhere",
    "claim1-sync-async": "sync → async to the async thread",
    "claim1-sync-sync-other-fallback": "fallback: no other sync thread",
    "claim4-sync-root-fallback": "fallback: one thread (sync start op)",
    "claim5-async-sync-fallback": "fallback: one thread (async → sync)",
    "claim1-sync-async-fallback": "fallback: one thread (sync → async)",
    "single": "one thread: first ready, first run",
    "tf-root": "TensorFlow: start op to the pool",
    "tf-inline": "TensorFlow: first ready runs inline",
    "tf-pool": "TensorFlow: others to the pool",
}

#: what each op kind of :data:`hetsched.executor.OP_KINDS` means, in words
KIND_WORDS: dict[str, str] = {
    "gpu_async": "async kernel",
    "gpu_sync": "sync kernel (host waits)",
    "cpu_sync": "host op (runs on the CPU)",
    "copy_h2d": "async copy to the device",
    "copy_d2h": "sync copy to the host",
    "copy_h2d_sync": "sync copy to the device",
}

#: metric key -> (plain label, factor, unit) for the executor's comparison; ``None`` factor: a time
#: (the unit follows the values)
METRIC_WORDS: dict[str, tuple[str, float | None, str]] = {
    "makespan_s": ("makespan", None, ""),
    "host_blocked_s": ("host time blocked", None, ""),
    "device_busy_frac": ("device busy", 100.0, "% of the makespan"),
    "gap_to_lb": ("gap to the lower bound", 100.0, "%"),
    "n_events": ("events recorded", 1.0, ""),
    "n_handoffs": ("hand-offs between threads", 1.0, ""),
    "n_stream_waits": ("stream waits", 1.0, ""),
    "n_host_syncs": ("host waits", 1.0, ""),
}


def _wrap(text: str, width: int = 22) -> str:
    """``text`` broken into lines of about ``width`` characters (``<br>``), for upright tick labels."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines)


def rule_label(rule: Any) -> str:
    """A rule id in plain words (an unknown id as it is, ``None`` as "no rule").

    >>> rule_label("claim1-sync-sync-other"), rule_label(None)
    ('sync → other sync successors elsewhere', 'no rule')
    """
    if rule is None:
        return "no rule"
    return RULE_LABELS.get(str(rule), str(rule))


def rule_claim(rule: Any) -> str:
    """The patent's claim behind a rule id (``""`` for a rule of another executor).

    >>> rule_claim("claim1-sync-sync-other"), rule_claim("tf-inline")
    ('claim 1', '')
    """
    from ..executor import THREAD_RULES

    claim = THREAD_RULES.get(str(rule), ("-", ""))[0]
    return "" if claim == "-" else claim


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


def _lane_text(lane: str, threads: Any) -> str:
    """A lane's tick label: the patent's thread roles named, streams as ``device · stream``."""
    if lane.startswith("thread") and lane[6:].isdigit():
        t = int(lane[6:])
        role = {"patent": " (async)" if t == 0 else " (sync)", "single": ""}.get(str(threads), "")
        return f"thread {t}{role}"
    dev, _, st = lane.partition(":")
    return f"{dev} · {st}" if st else lane


#: timeline kinds that are not work: they keep their kind's colour whatever the Gantt is coloured by
_NOT_WORK = ("idle", "blocked", "wait")


def _step_rows(tl: pd.DataFrame, op: str) -> pd.DataFrame:
    """The rows of one op: its launch (or host run), its kernel or copy, and the sync wait for it."""
    return tl[(tl["op"] == op) | ((tl["name"] == f"wait {op}") & (tl["group"] == "host"))]


def _walk_parts(result: Any, step: int | None) -> tuple[float | None, dict]:
    """The cursor time and the outline trace of decision ``step`` (``None``: before the first)."""
    tl = result.timeline
    n_steps = len(result.steps)
    if step is not None and not (isinstance(step, int) and not isinstance(step, bool) and 0 <= step < n_steps):
        raise HetschedError(f"step {step!r} is outside 0..{n_steps - 1} (the dispatch decisions of this run)",
                            field="step")
    cursor, rows = None, tl.iloc[:0]
    if step is not None:
        s = result.steps[step]
        cursor = float((s.data or {}).get("time_s", 0.0))
        rows = _step_rows(tl, s.subject)
    _u, f = time_unit(float(tl["end_s"].max()) if len(tl) else 0.0)
    s0 = rows["start_s"].to_numpy(float) * f
    e0 = rows["end_s"].to_numpy(float) * f
    trace = dict(type="bar", orientation="h", y=rows["lane"].astype(str).tolist(), x=(e0 - s0).tolist(),
                 base=s0.tolist(), name="this decision (outlined)", showlegend=True, hoverinfo="skip",
                 marker=dict(color="rgba(0,0,0,0)", line=dict(color="#111111", width=[3] * len(rows))))
    return cursor, trace


def executor_gantt_at(fig: Any, result: Any, step: int | None, *, title: str | None = None) -> dict:
    """A Gantt of :func:`executor_gantt` (drawn with ``walk=True``) moved to decision ``step``.

    Returns a ``{"data", "layout"}`` figure dict that shares every trace with ``fig`` but the
    outline, with the cursor at ``step``'s dispatch (none for ``step=None``, before the first
    decision) and ``title`` if given. A step walker draws the Gantt once per result and calls this
    per click: nothing but the outline's few points, the cursor and the title differ.

    >>> import hetsched.executor as ex
    >>> r = ex.simulate(ex.graphs.thread_rules_graph(), streams="patent", threads="patent")
    >>> base = executor_gantt(r, walk=True)
    >>> moved = executor_gantt_at(base, r, 5)
    >>> moved["data"][-1]["y"], moved["layout"]["shapes"][0]["x0"] > 0
    (['thread2', 'gpu0:sync', 'thread2'], True)
    >>> import json; same = lambda a, b: json.loads(a.to_json()) == json.loads(b.to_json())
    >>> same(go.Figure(moved), executor_gantt(r, step=5, title=base.layout.title.text))
    True
    """
    data = [t._props for t in fig.data] if isinstance(fig, go.Figure) else list(fig["data"])
    layout = dict(fig.layout._props if isinstance(fig, go.Figure) else fig["layout"])
    if not data or data[-1].get("name") != "this decision (outlined)":
        raise HetschedError("the Gantt was not drawn for walking: draw it with executor_gantt(..., walk=True)",
                            field="fig")
    cursor, trace = _walk_parts(result, step)
    f = time_unit(float(result.timeline["end_s"].max()) if len(result.timeline) else 0.0)[1]
    layout.pop("shapes", None)
    if cursor is not None:
        layout["shapes"] = [dict(type="line", xref="x", x0=cursor * f, x1=cursor * f, yref="y domain", y0=0, y1=1,
                                 line=dict(color="#D00000", width=2, dash="dot"))]
    if title is not None:
        layout["title"] = title_text(title)
        fit_title(layout)  # as figure_from_dicts does for a fresh figure: a long step title wraps
    return {"data": data[:-1] + [trace], "layout": layout}


def executor_gantt(result: Any, *, title: str | None = None, arrows: bool | None = None,
                   color_by: str = "kind", max_arrows: int = 80, step: int | None = None,
                   walk: bool = False) -> go.Figure:
    """Host-thread lanes (launch, compute, blocked, idle) above stream lanes (kernels, copies, waits).

    ``arrows`` draws launch -> kernel arrows (the timeline's ``flow`` ids) as annotations; by
    default only when there are at most ``max_arrows`` of them. Idle time, sync waits and stream
    waits keep their neutral or kind colour under any ``color_by`` (they are no device's or op's
    work).

    ``step`` (a dispatch step index, ``0..n_steps-1``) marks that decision: a cursor at the time it
    was dispatched and its op's bars (launch, kernel or copy, and the sync wait for it) outlined by
    one extra trace drawn on top. ``walk=True`` always adds that trace (empty without ``step``), so
    a step walker that goes from "before the first decision" to step ``k`` keeps the same traces
    and only patches the outline's few points, the cursor and the title.

    >>> import hetsched.executor as ex
    >>> r = ex.simulate(ex.graphs.inception_graph(1))
    >>> len(executor_gantt(r).layout.annotations)
    9
    >>> fig = executor_gantt(r, step=3); len(fig.layout.shapes), fig.data[-1].name
    (1, 'this decision (outlined)')
    >>> len(executor_gantt(r, walk=True).data) == len(fig.data)
    True
    """
    tl = result.timeline
    cursor, overlay = _walk_parts(result, step) if (step is not None or walk) else (None, None)
    colors = None
    shown = tl
    if color_by != "kind" and color_by in tl.columns and len(tl):
        shown = tl.copy()
        rest = shown["kind"].isin(_NOT_WORK)
        shown[color_by] = shown[color_by].astype(object).where(~rest, shown["kind"])
        if color_by == "op":  # ops are many and no device: the group palette, never a device's colour
            colors = group_colors(shown.loc[~rest & shown["op"].notna(), "op"].unique())
    lanes = executor_lanes(tl)
    data, layout = gantt_parts(shown, color_by=color_by, colors=colors, lanes=lanes, cursor_s=cursor,
                                title=title or f"executor: {result.params.get('streams')} streams, "
                                               f"{result.params.get('threads')} threads")
    threads = result.params.get("threads")
    # room for the legend (kinds of work, the outline) beside a short Gantt: it must not scroll
    n_legend = len({t.get("legendgroup", t.get("name")) for t in data if t.get("showlegend", True)}) + (overlay is not None)
    layout["height"] = max(layout["height"], 140 + 34 * n_legend)
    layout["yaxis"].update(tickmode="array", tickvals=list(reversed(lanes)),
                           ticktext=[_lane_text(ln, threads) for ln in reversed(lanes)])
    layout["font"] = dict(FONT)
    unit, f = time_unit(float(tl["end_s"].max()) if len(tl) else 0.0)
    if overlay is not None:  # a figure of the walk (or of one step of it)
        data.append(overlay)
        # room for a two-line step title from the start: a top margin that changed from one step to
        # the next would make the browser lay the whole figure out again (a full redraw per click)
        margin = layout.get("margin") or {}
        layout["margin"] = {**margin, "t": max(margin.get("t", 0), title_margin_px(2))}
    flows = tl[tl["flow"].notna()]
    n_flow = flows["flow"].nunique()
    if arrows is None:
        arrows = n_flow <= max_arrows
    if arrows and n_flow:
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


def policy_bars(comparison: Any, metric: str = "makespan_s", *, current: str | None = "patent",
                title: str | None = None) -> go.Figure:
    """One bar per executor policy (a :class:`~hetsched.executor.PolicyComparison` or its frame).

    The ``current`` policy is drawn in the highlight colour and the lower bound in a neutral grey
    (it is a bound, not a policy); the axis says the metric in words with its unit
    (:data:`METRIC_WORDS`: shares in percent, times in a readable unit).

    >>> import hetsched.executor as ex
    >>> fig = policy_bars(ex.compare_policies(ex.graphs.inception_graph(1)), "device_busy_frac")
    >>> len(fig.data[0].x), fig.layout.yaxis.title.text
    (6, 'device busy (% of the makespan)')
    """
    frame = comparison.frame if hasattr(comparison, "frame") else comparison
    label, factor, unit = METRIC_WORDS.get(metric, (metric, None, ""))
    col = metric
    if factor is not None:  # not a time: shown under its plain label, scaled (shares as percent)
        col = f"{label} ({unit})" if unit else label
        frame = frame.assign(**{col: pd.to_numeric(frame[metric], errors="coerce") * factor})
    fig = compare(frame, col, highlight=current,
                  title=title or f"{label} by executor policy" + (f" (current: {current})" if current else ""))
    bars = fig.data[0]
    bars.name = label
    bars.marker.color = [NEUTRAL if p == "lower bound" and p != current else c
                         for p, c in zip(bars.x, bars.marker.color)]
    fig.update_layout(font=FONT)
    return fig


def ordering_bars(result: Any) -> go.Figure:
    """How many data edges each mechanism orders (stream, event, host, implied, race).

    >>> import hetsched.executor as ex
    >>> fig = ordering_bars(ex.simulate(ex.graphs.inception_graph(1), streams="nimble"))
    >>> sorted(fig.data[0].x)
    ['event: stream wait', 'stream']
    """
    counts = result.ordering["mechanism"].value_counts().sort_index()
    colors = [_FALLBACK_COLOR if m == "race" else PALETTE[0] for m in counts.index]
    return figure_from_dicts(
        [dict(type="bar", x=list(counts.index), y=counts.tolist(), marker=dict(color=colors),
              hovertemplate="%{x}: %{y} edges<extra></extra>")],
        dict(title=title_text("what orders each data edge (red: nothing, a race)"), yaxis=dict(title=title_text("data edges")),
             margin=dict(l=10, r=10, t=40, b=40), height=300, font=dict(FONT)))


def rule_bars(result: Any, *, current: str | None = None) -> go.Figure:
    """How often each dispatch rule decided (:func:`hetsched.executor.rules_fired`); fallbacks in red.

    The bars stand at the rule ids (``x``) and are labelled in words (:data:`RULE_LABELS`);
    ``current`` (a rule id, what a step walker is on) gets a thick outline, the only property a
    step changes.

    >>> import hetsched.executor as ex
    >>> r = ex.simulate(ex.graphs.thread_rules_graph(), streams="patent", threads="patent", pool_size=2)
    >>> fig = rule_bars(r, current="claim1-sync-sync-other-fallback")
    >>> words = [t.replace("<br>", " ") for t in fig.layout.xaxis.ticktext]
    >>> "claim1-sync-sync-other-fallback" in fig.data[0].x, any(w.startswith("fallback: no other sync thread") for w in words)
    (True, True)
    """
    from ..executor.simulate import rules_fired

    f = rules_fired(result)
    rules = f["rule"].tolist()
    colors = [_FALLBACK_COLOR if fb else PALETTE[0] for fb in f["fallback"]]
    return figure_from_dicts(
        [dict(type="bar", x=rules, y=f["count"].tolist(),
              marker=dict(color=colors, line=dict(color="#111111", width=[4 if r == current else 0 for r in rules])),
              hovertext=[f"{c}: {m}" for c, m in zip(f["claim"], f["meaning"])], hoverinfo="text+y")],
        dict(title=title_text("which rule placed each op (red: the rule could not be met; outlined: this step's)"),
             xaxis=dict(tickmode="array", tickvals=rules, type="category",
                        # the rule in words, the patent's claim under it in small type
                        ticktext=[_wrap(rule_label(r)) + (f"<br><span style='font-size:11px;color:#666'>({rule_claim(r)})"
                                                          "</span>" if rule_claim(r) else "") for r in rules],
                        tickangle=0),
             yaxis=dict(title=title_text("ops placed")), margin=dict(l=10, r=10, t=40, b=40), height=360, font=dict(FONT)))


def rule_bars_at(fig: Any, current: str | None) -> dict:
    """:func:`rule_bars` with another rule outlined, as a ``{"data", "layout"}`` dict sharing the rest.

    >>> import hetsched.executor as ex
    >>> r = ex.simulate(ex.graphs.thread_rules_graph(), streams="patent", threads="patent")
    >>> f = rule_bars_at(rule_bars(r), "claim5-async-async")
    >>> dict(zip(f["data"][0]["x"], f["data"][0]["marker"]["line"]["width"]))["claim5-async-async"]
    4
    """
    bars = dict(fig.data[0]._props if isinstance(fig, go.Figure) else fig["data"][0])
    layout = fig.layout._props if isinstance(fig, go.Figure) else fig["layout"]
    marker = dict(bars["marker"])
    marker["line"] = dict(marker["line"], width=[4 if r == current else 0 for r in bars["x"]])
    bars["marker"] = marker
    return {"data": [bars], "layout": layout}
