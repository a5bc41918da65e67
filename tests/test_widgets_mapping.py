"""MappingPanel driven headlessly: the step slider replays the core's decision log."""

from __future__ import annotations

import pytest

import hetsched as hs
import hetsched.mapping as mp
from hetsched.io.generators import fork_join, resnet_like
from hetsched.widgets import MappingPanel
from panel_testing import prepared_downloads as _prepared_downloads



@pytest.fixture(scope="module")
def panel():
    return MappingPanel(graph=resnet_like(blocks_per_stage=1), system=hs.toy_system())


def _marker_devices(fw):
    """{op: legend label} from the graph view's marker traces."""
    return {op: t.name for t in fw.data if t.mode == "markers" and t.customdata is not None for op in t.customdata}


def test_result_is_the_core_h2h(panel):
    r = panel.result
    direct = mp.h2h(panel.graph, panel.system)
    assert r.n_steps == direct.n_steps
    assert dict(r.placement.device) == dict(direct.placement.device)
    assert r.metrics["total_latency_s"] == pytest.approx(direct.metrics["total_latency_s"])
    assert panel.state.step == r.n_steps and panel.walker.slider.max == r.n_steps


def test_step_walks_the_log_and_redraws(panel):
    r = panel.result
    panel.state.step = 0
    assert "nothing mapped yet" in panel.step_text.value
    assert set(_marker_devices(panel.figures["graph"]).values()) == {"(unassigned)"}
    panel.walker.next.click()
    s0 = r.steps[0]
    assert panel.state.step == 1 and s0.subject in panel.step_text.value and "accepted" in panel.step_text.value
    # the graph view colours the one mapped op by its device; the Gantt shows just that op
    devs = _marker_devices(panel.figures["graph"])
    assert devs[s0.subject] == s0.data["device"]
    assert sum(1 for d in devs.values() if d != "(unassigned)") == 1
    bars = [n for t in panel.figures["gantt"].data for n in (t.hovertext or ())]
    assert bars and all(s0.subject in h for h in bars if "compute" in h)
    # highlighted layer: bigger marker with a red outline
    hl = [t for t in panel.figures["graph"].data if t.mode == "markers" and s0.subject in (t.customdata or ())][0]
    i = list(hl.customdata).index(s0.subject)
    assert hl.marker.line.color[i] == "#D00000"


def test_state_after_each_step_matches_replay(panel):
    r = panel.result
    a, _b = r.phase_bounds()["remap"]
    for k in (a + 1, r.n_steps):
        panel.state.step = k
        want = r.replay(k - 1)["device"]
        got = _marker_devices(panel.figures["graph"])
        assert got == {o: want.get(o, "(unassigned)") for o in panel.graph}
        ev = mp.evaluate_state(r, k - 1)
        assert panel.figures["gantt"].layout.title.text.startswith(f"state after step {k}")
        assert f"{ev.metrics['makespan_s'] * 1e6:.4g} us" in panel.figures["gantt"].layout.title.text or \
            f"{ev.metrics['makespan_s'] * 1e3:.4g} ms" in panel.figures["gantt"].layout.title.text


def test_rejected_remap_says_why(panel):
    r = panel.result
    rej = next(i for i, s in enumerate(r.steps) if s.action == "remap" and not s.accepted)
    panel.state.step = rej + 1
    assert "rejected" in panel.step_text.value and "→" in panel.step_text.value


def test_phase_buttons_jump(panel):
    panel.phase_buttons.value = "remap"
    assert panel.result.steps[panel.state.step - 1].data["phase"] == "remap"
    panel.phase_buttons.value = "start"
    assert panel.state.step == 0
    panel.phase_buttons.value = "final"
    assert panel.state.step == panel.result.n_steps


def test_comparison_has_the_baselines_and_follows_the_metric(panel):
    bars = panel.figures["compare"].data[0]
    assert list(bars.x) == ["compute_first", "heft", "cpop", "peft", "fastest_single_device", "h2h (this panel)"]
    assert bars.y[-1] == pytest.approx(panel.result.metrics["total_latency_s"] * 1e6, rel=1e-6) or \
        bars.y[-1] == pytest.approx(panel.result.metrics["total_latency_s"] * 1e3, rel=1e-6)
    panel.state.metric = "makespan_s"
    assert "makespan" in panel.figures["compare"].layout.yaxis.title.text
    panel.state.metric = "total_latency_s"


def test_objective_change_recomputes(panel):
    n_before = panel.n_updates
    panel.state.objective = "makespan"
    assert panel.result.params["objective"] == "makespan"
    assert panel.n_updates > n_before and panel.state.step == panel.result.n_steps
    panel.state.objective = "total_latency"


def test_bad_threshold_keeps_the_last_result(panel):
    good = panel.result
    panel.state.occupancy_threshold = 1.5
    assert "occupancy_threshold must be in (0, 1]" in panel.message.value and panel.result is good
    panel.state.occupancy_threshold = 0.2
    assert panel.message.value == "" and panel.result.params["occupancy_threshold"] == 0.2
    panel.state.occupancy_threshold = 0.9


def test_unsupported_op_names_it():
    s = hs.toy_system()
    p = MappingPanel(graph=fork_join(2, 2), system=s)
    good = p.result
    # a system whose only device cannot run the graph: the panel names the op, keeps its result
    fpga_only = s.with_support(hs.SupportTable({"fpga0": {"Conv": 1}}))
    p._fixed_system = fpga_only
    assert not p.refresh()
    assert "hetsched-error" in p.message.value and p.result is good
    p._fixed_system = s
    assert p.refresh() and p.message.value == ""


def test_downloads(panel):
    links = _prepared_downloads(panel)
    for name in ("mapping_trace.json", "mapping_timeline.csv", "mapping_steps.csv", "mapping_placement.csv",
                 "mapping_comparison.csv"):
        assert f'download="{name}"' in links
    k = panel.state.step
    panel.state.step = 1  # walking the steps keeps the links (they belong to the result, not the step)
    assert panel.downloads.value == links
    panel.state.step = k
