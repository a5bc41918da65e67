"""Pipeline figures: labelled Gantt on a shared axis, small-multiple queues (issues 18, 22).

Each builder's fast-path output is checked against its validated copy in test_plot_validation.
"""

from __future__ import annotations

import hetsched.pipeline as pp
from hetsched.plot.pipeline import ACTION_COLORS, cache_depth, schedule_gantt


def _lock():
    return pp.simulate(pp.interleaved_1f1b(4, 2, 10), costs={"F": 1, "B": 1}, comm={"lockstep": True}, cache="sender")


def test_gantt_cells_carry_torch_labels_and_kinds_have_distinct_colours():
    r = pp.simulate(pp.zbv(2, 4), costs={"F": 1, "B": 2})
    fig = schedule_gantt(r)
    texts = sorted(t for d in fig.data if d.text is not None for t in d.text)
    assert texts == sorted(r.schedule.labels().tolist())  # every action labelled like torch's visualiser
    colours = {d.name.split()[0]: d.marker.color for d in fig.data if d.name != "idle" and d.name.endswith("chunk 0")}
    assert len(set(colours.values())) == len(colours) == 3  # F, I, W
    assert len(set(ACTION_COLORS.values())) == len(ACTION_COLORS)
    # two schedules on one axis: the same range and unit
    a = schedule_gantt(r, t_max_s=40.0)
    b = schedule_gantt(pp.simulate(pp.one_f_one_b(2, 4), costs={"F": 1, "B": 2}), t_max_s=40.0)
    assert a.layout.xaxis.range == b.layout.xaxis.range and a.layout.xaxis.title.text == b.layout.xaxis.title.text


def test_small_multiples_one_panel_per_queue():
    fig = cache_depth(_lock().queue_trace(), small_multiples=True)
    assert fig.layout.grid.rows == len(fig.data) == 2  # the patent's two queues


# ---- large schedules, many queues, the patent's own queues (issues 14, 15, 22) -----------------

import numpy as np  # noqa: E402
import plotly.graph_objects as go  # noqa: E402
import pytest  # noqa: E402
from test_plot_validation import _json  # noqa: E402

from hetsched.plot.pipeline import patent_queue_figure  # noqa: E402


def _validated(fig):
    raw = {"data": [t.to_plotly_json() for t in fig.data], "layout": fig.layout.to_plotly_json()}
    assert _json(go.Figure(raw)) == _json(fig)  # full validation: no invalid property ships


def _interleaved(m):
    return pp.simulate(pp.interleaved_1f1b(4, 2, m), costs={"F": 1e-3, "B": 2e-3})


def test_large_schedules_draw_webgl_segments_then_a_raster_with_the_running_kind():
    r = _interleaved(40)  # 320 actions
    lines = schedule_gantt(r, max_bars=100, cursor_s=0.01)
    _validated(lines)
    seg = [d for d in lines.data if d.mode == "lines"]
    assert {d.type for d in lines.data} == {"scattergl"} and sum(len(d.x) for d in seg) == 3 * r.schedule.n_actions
    assert lines.layout.shapes[-1].x0 == pytest.approx(10.0)  # the cursor is the last shape, in ms
    raster = schedule_gantt(r, max_bars=10, max_segments=100, t_max_s=2 * r.metrics["makespan_s"])
    _validated(raster)
    z = np.asarray(raster.data[0].z, float)
    x = np.asarray(raster.data[0].x, float) / 1e3  # bin centres back in seconds
    # a bin shows the kind its rank runs at the bin's centre, NaN where the rank is idle
    for rank in range(4):
        sl = r.schedule.rank_slice(rank)
        for j in range(0, len(x), 37):
            running = np.flatnonzero((r.start_s[sl] <= x[j]) & (x[j] < r.end_s[sl]))
            want = r.schedule.kind[sl][running[0]] + 0.5 if len(running) else np.nan
            assert (np.isnan(z[rank, j]) and np.isnan(want)) or z[rank, j] == want
    assert {d.name for d in raster.data[1:]} == {"F", "B"}  # legend entries
    assert raster.layout.shapes[0].x0 == pytest.approx(r.metrics["makespan_s"] * 1e3)  # past the end: not idle


def test_lanes_shrink_with_many_ranks_and_light_chunks_get_dark_text():
    small, big = schedule_gantt(_interleaved(8)), schedule_gantt(pp.simulate(pp.interleaved_1f1b(32, 2, 32)))
    # lanes: 34 px each for 4 ranks, at most 9 for 32; the legend under the plot gets its own room
    # (F/B of 2 chunks stacked per kind, and idle: two rows), so the lanes keep their height
    legend_room = 26 * 2 + 8
    assert small.layout.height == 110 + 34 * 4 + legend_room and big.layout.height <= 110 + 9 * 32 + legend_room
    assert small.layout.legend.orientation == "h" and small.layout.legend.yref == "container"
    fonts = {d.name: d.textfont.color for d in small.data if d.text is not None}
    assert fonts["F chunk 0"] == "white" and fonts["F chunk 1"] != "white"


def test_many_queues_become_one_heatmap_row_each_with_the_exact_peak():
    r = pp.simulate(pp.one_f_one_b(16, 32), costs={"F": 1.0, "B": 2.0}, comm={"latency_s": 0.3}, cache="receiver")
    tr = r.queue_trace()
    n_queues = tr.groupby(["rank", "direction"])["depth"].max().gt(0).sum()
    assert n_queues > 12
    fig = cache_depth(tr, small_multiples=True, cursor_s=5.0)
    _validated(fig)
    assert fig.data[0].type == "heatmap" and len(fig.data[0].y) == n_queues
    z = np.asarray(fig.data[0].z)
    peaks = tr.groupby(["rank", "direction"])["depth"].max()
    assert z.max(axis=1).tolist() == [float(v) for v in peaks[peaks > 0].tolist()]  # no peak lost to binning
    assert fig.layout.shapes[0].x0 == pytest.approx(5.0)


def test_the_patent_figure_shows_its_two_queues_and_the_send_interval():
    p, v, m = 4, 3, 13  # r = 1, first group of 5
    q = pp.patent_queues(p, v, m)
    lo, hi = pp.send_interval(p, v, m)
    fig = patent_queue_figure(q, send_interval=(lo, hi), first_group_steps=(p + 1) * v)
    _validated(fig)
    fwd, bwd = fig.data
    assert max(fwd.y) == max(bwd.y) == m % p  # at most r outputs wait (the patent)
    rect = fig.layout.shapes[0]
    assert (rect.x0, rect.x1) == (lo - 0.5, hi - 0.5)
    # the hover lists what the queue holds after each micro-step: as many items as the depth
    for d in (fwd, bwd):
        for depth, txt in zip(d.y, d.hovertext):
            held = txt.split("holds ")[1]
            assert (held == "nothing" and depth == 0) or len(held.split(", ")) == depth
