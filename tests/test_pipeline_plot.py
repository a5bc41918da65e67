"""Pipeline figures: labelled Gantt on a shared axis, small-multiple queues, per-stage costs (issues 18, 22).

Every builder's fast-path output must equal its fully validated copy (as in test_plot_validation).
"""

from __future__ import annotations

import json
import math

import plotly.graph_objects as go
import plotly.io as pio
import pytest

import hetsched.pipeline as pp
from hetsched.plot.pipeline import ACTION_COLORS, cache_depth, schedule_gantt, schedule_grid, stage_costs_figure


def _split():
    from hetsched.io.generators import chain
    from hetsched.io.systems import toy_system

    return pp.split_stages(chain(8), toy_system(), devices=["gpu0", "cpu0"], p=2)


def _lock():
    return pp.simulate(pp.interleaved_1f1b(4, 2, 10), costs={"F": 1, "B": 1}, comm={"lockstep": True}, cache="sender")


CASES = [
    ("gantt labelled", lambda: schedule_gantt(pp.simulate(pp.interleaved_1f1b(2, 2, 4), costs={"F": 1e-3, "B": 2e-3}), cursor_s=2e-3)),
    ("gantt split backward, shared axis", lambda: schedule_gantt(pp.simulate(pp.zbv(2, 4)), t_max_s=100.0, labels="microbatch")),
    ("gantt no labels", lambda: schedule_gantt(pp.simulate(pp.one_f_one_b(3, 3)), labels=None)),
    ("cache depth sim small multiples", lambda: cache_depth(_lock().queue_trace(), small_multiples=True)),
    ("cache depth sim", lambda: cache_depth(_lock().queue_trace())),
    ("stage costs", lambda: stage_costs_figure(_split())),
    ("grid", lambda: schedule_grid(pp.dualpipev(2, 4))),
]


def _plain(x):
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items() if not (k == "title" and v == {})}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return "NaN"
    return x


@pytest.mark.parametrize("name,build", CASES, ids=[n for n, _ in CASES])
def test_builder_output_equals_its_validated_copy(name, build):
    fig = build()
    raw = {"data": [t.to_plotly_json() for t in fig.data], "layout": fig.layout.to_plotly_json()}
    checked = go.Figure(raw)
    assert _plain(json.loads(pio.to_json(checked, validate=False))) == _plain(json.loads(pio.to_json(fig, validate=False)))


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
