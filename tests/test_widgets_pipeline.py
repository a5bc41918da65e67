"""PipelinePanel driven headlessly: two schedules, the time step, the cache queues."""

from __future__ import annotations

import base64
import json
import re

import pytest

import hetsched.pipeline as pp
from hetsched.widgets import PipelinePanel
from panel_testing import prepared_downloads as _prepared_downloads



@pytest.fixture()
def panel():
    return PipelinePanel()


def test_two_schedules_match_the_core(panel):
    r = panel.result
    a = pp.simulate(pp.interleaved_1f1b(4, 2, 10, grouping="balanced"),
                    costs={"F": 0.5e-3, "B": 1e-3, "activation_bytes": 64 * 2**20},  # v=2 halves
                    comm={"latency_s": 0.0, "lockstep": True}, cache="sender")
    assert r.a.metrics["makespan_s"] == pytest.approx(a.metrics["makespan_s"])
    assert r.b.schedule.name.lower().startswith("1f1b")
    # same model on both: the same total work per rank whatever v is
    assert r.a.per_rank["busy_s"].iloc[0] == pytest.approx(r.b.per_rank["busy_s"].iloc[0])
    lanes = {y for t in panel.figures["gantt_a"].data for y in t.y}
    assert lanes == {f"rank {i}" for i in range(4)}
    assert {t.name for t in panel.figures["gantt_a"].data} >= {"F", "B"}
    assert "bubble" in panel.figures["gantt_a"].layout.title.text


def test_moving_m_changes_bubbles_and_bars(panel):
    bubble = panel.result.a.metrics["bubble_fraction"]
    n_bars = sum(len(t.x) for t in panel.figures["gantt_a"].data)
    panel.control_widgets["m"].value = 20  # the slider, as a user moves it
    assert panel.state.m == 20 and panel.result.a.schedule.m == 20
    assert panel.result.a.metrics["bubble_fraction"] < bubble
    assert sum(len(t.x) for t in panel.figures["gantt_a"].data) > n_bars
    assert panel.walker.slider.max == int(panel.result.a.metrics["n_actions"]) - 1


def test_time_step_shows_ranks_and_queues(panel):
    k = 40
    panel.state.step = k
    st = panel.result.a.replay(k)
    assert f"action {k + 1} of" in panel.step_text.value
    for rank, act in st["running"].items():
        assert f"<td>{act}</td>" in panel.step_text.value
    for items in st["queues"].values():
        for it in items:
            assert it in panel.step_text.value
    # the cursor sits at that time on both Gantts
    for key in ("gantt_a", "gantt_b"):
        shapes = panel.figures[key].layout.shapes
        assert len(shapes) == 1 and shapes[0].x0 == pytest.approx(st["time_s"] * 1e3)
    # some step has a non-empty cache queue under lock-step p2p (what the patent's queues hold)
    assert any(any(panel.result.a.replay(j)["queues"].values()) for j in range(int(panel.result.a.metrics["n_actions"])))


def test_switch_schedule_b_and_cache(panel):
    panel.state.schedule_b = "zbv"
    assert panel.result.b.schedule.name.lower().startswith("zb")
    assert {t.name for t in panel.figures["gantt_b"].data} & {"I", "W"}
    before = panel.figures["cache"].layout.title.text
    panel.state.cache = "receiver"
    assert panel.figures["cache"].layout.title.text != before and "receiver" in panel.figures["cache"].layout.title.text


def test_bad_inputs(panel):
    good = panel.result
    panel.state.m = 0
    assert "m must be at least 1" in panel.message.value and panel.result is good
    panel.state.m = 10
    panel.state.f_ms = -1
    assert "forward" in panel.message.value
    panel.state.f_ms = 1.0
    assert panel.message.value == ""


def test_downloads(panel):
    links = _prepared_downloads(panel)
    for name in ("pipeline_A_trace.json", "pipeline_B_trace.json", "pipeline_metrics.csv", "pipeline_A_torch.csv"):
        assert f'download="{name}"' in links
    # the trace offered is the one of the result on screen
    uri = re.search(r'download="pipeline_A_trace.json" href="data:application/json;base64,([^"]+)"', links).group(1)
    assert json.loads(base64.b64decode(uri)) == json.loads(json.dumps(pp.to_chrome_trace(panel.result.a)))
    panel.state.m += 1  # a new result: links to the old one disappear until asked for again
    assert panel.downloads.value == "" and panel.download_button.description.startswith("prepare")
    assert 'download="pipeline_A_trace.json"' in _prepared_downloads(panel)
