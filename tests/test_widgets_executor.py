"""ExecutorPanel driven headlessly: set traits, check the core result and the figures follow."""

from __future__ import annotations

import json

import pytest

import hetsched.executor as ex
from hetsched.io.generators import fork_join
from hetsched.widgets import ExecutorPanel, Session
from panel_testing import prepared_downloads as _prepared_downloads



@pytest.fixture(scope="module")
def panel():
    return ExecutorPanel()


def _gantt_lanes(fw):
    return {y for t in fw.data for y in (t.y if t.y is not None else ()) if y is not None}


def test_default_is_the_patent_on_the_d2h_example(panel):
    r = panel.result
    assert r.params["streams"] == "patent" and r.params["threads"] == "patent"
    assert panel.message.value == ""
    lanes = _gantt_lanes(panel.figures["gantt"])
    # host threads and stream lanes in one Gantt
    assert any(lane.startswith("thread") for lane in lanes) and any(":" in lane for lane in lanes)
    assert r.metrics["n_unordered_edges"] == 0
    # the comparison has every policy and the lower bound, current one highlighted
    bars = panel.figures["compare"].data[0]
    assert list(bars.x) == list(ex.POLICIES) + ["lower bound"]
    assert bars.marker.color[list(bars.x).index("patent")] == "#D55E00"


def test_switching_threads_resimulates_and_redraws(panel):
    before_mk = panel.result.makespan_s
    before_lanes = _gantt_lanes(panel.figures["gantt"])
    panel.state.threads = "single"
    r = panel.result
    assert r.params["threads"] == "single"
    # the core result the panel shows is the same as calling the core directly
    direct = ex.simulate(ex.graphs.d2h_branch_graph(), streams="patent", threads="single", costs="cuda", pool_size=4)
    assert r.makespan_s == pytest.approx(direct.makespan_s)
    assert r.makespan_s > before_mk
    assert _gantt_lanes(panel.figures["gantt"]) != before_lanes  # one host thread left
    bars = panel.figures["compare"].data[0]
    assert bars.marker.color[list(bars.x).index("multi-stream, one thread")] == "#D55E00"
    panel.state.threads = "patent"


def test_pair_outside_the_table_gets_its_own_bar(panel):
    panel.state.streams = "nimble"
    panel.state.threads = "inline_one"
    assert list(panel.figures["compare"].data[0].x)[-1] == "nimble + inline_one"
    assert panel.result.params["streams"] == "nimble"
    with panel.hold():
        panel.state.streams = "patent"
        panel.state.threads = "patent"


def test_preset_sets_cost_fields_and_recomputes_once(panel):
    n = panel.n_updates
    panel.state.preset = "ideal"
    assert panel.state.dispatch_s == 0.0 and panel.state.launch_s == 0.0
    assert panel.result.costs.dispatch_s == 0.0
    assert panel.n_updates - n == 1
    panel.state.preset = "cuda"
    assert panel.state.dispatch_s == ex.PRESETS["cuda"].dispatch_s


def test_cost_field_change_moves_the_makespan(panel):
    base = panel.result.makespan_s
    panel.state.dispatch_s = 40e-6
    assert panel.result.makespan_s > base
    panel.state.dispatch_s = ex.PRESETS["cuda"].dispatch_s
    assert panel.result.makespan_s == pytest.approx(base)


def test_view_traits_redraw_without_recompute(panel):
    r = panel.result
    panel.state.metric = "host_blocked_s"
    assert panel.result is r
    assert "host time blocked" in panel.figures["compare"].layout.yaxis.title.text
    panel.state.color_by = "device"
    assert panel.figures["gantt"].layout.legend.title.text == "device"
    panel.state.metric = "makespan_s"
    panel.state.color_by = "kind"


def test_bad_input_shows_a_message_and_panel_keeps_working(panel):
    good = panel.result
    panel.state.pool_size = 0
    assert "pool_size" in panel.message.value
    assert panel.result is good
    panel.state.max_kernels = 0  # still bad pool size; the message stays
    assert "hetsched-error" in panel.message.value
    panel.state.pool_size = 4
    assert "max_kernels" in panel.message.value  # ExecCosts rejects 0 kernels, named
    panel.state.max_kernels = 8
    assert panel.message.value == "" and panel.result is not good


def test_downloads_offer_trace_and_tables(panel):
    html = _prepared_downloads(panel)
    for name in ("executor_trace.json", "executor_timeline.csv", "executor_policies.csv", "executor_dispatch_steps.csv"):
        assert f'download="{name}"' in html


def test_follows_the_session_graph():
    s = Session()
    p = ExecutorPanel(session=s)
    g = fork_join(3, 2)
    p.load(g)
    assert p.result.params.get("streams") == "patent"
    assert set(p.result.op_end_s) == set(g.ops)
    assert p.graph is g
    assert json.dumps(ex.executor_trace(p.result))  # serialisable trace for the download


def test_comparison_runs_equal_single_simulations():
    """The panel's comparison (one shared preparation for every policy) gives exactly what
    ``simulate`` gives for each policy alone: same timeline, metrics, steps and maps."""
    import dataclasses

    import pandas as pd

    g = fork_join(4, 3, seed=1)
    costs = dataclasses.replace(ex.PRESETS["cuda"], dispatch_s=4e-6)
    cmp_ = ex.compare_policies(g, costs=costs, pool_size=3)
    for label, (sp, tp) in ex.POLICIES.items():
        a, b = cmp_.results[label], ex.simulate(g, streams=sp, threads=tp, costs=costs, pool_size=3)
        pd.testing.assert_frame_equal(a.timeline, b.timeline, check_exact=True)
        pd.testing.assert_frame_equal(a.ordering, b.ordering, check_exact=True)
        assert a.metrics == b.metrics and a.params == b.params
        assert [dataclasses.astuple(s) for s in a.steps] == [dataclasses.astuple(s) for s in b.steps]
        assert (a.kinds, a.streams, a.thread_of, a.events, a.durations_s) == (b.kinds, b.streams, b.thread_of, b.events, b.durations_s)
        assert (a.op_start_s, a.op_end_s, a.launch_end_s) == (b.op_start_s, b.op_end_s, b.launch_end_s)
    runs = list(cmp_.results.values())
    assert runs[0].durations_s is not runs[1].durations_s  # each result owns its maps
