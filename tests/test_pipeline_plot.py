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
