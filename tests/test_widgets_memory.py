"""MemoryPanel driven headlessly: methods, overlaid curves with the lower bound, moves, tensors at the peak."""

from __future__ import annotations

import pytest

import hetsched.memory as mem
from hetsched.io.generators import randwire_ws
from hetsched.widgets import MemoryPanel
from panel_testing import prepared_downloads as _prepared_downloads



@pytest.fixture()
def panel():
    return MemoryPanel(graph=randwire_ws(20, seed=0))


def _curve(panel, prefix):
    return next(t for t in panel.figures["curves"].data if t.name.startswith(prefix))


def test_default_matches_the_core_and_overlays(panel):
    r = panel.result
    direct = mem.optimize_order(panel.graph, method="patent-heuristic")
    assert r.peak_bytes == direct.peak_bytes and tuple(r.order) == tuple(direct.order)
    names = [t.name for t in panel.figures["curves"].data]
    assert [n.split(" ")[0] for n in names[:3]] == ["kahn", "bfs", "dfs"]
    # the lower bound is drawn as a line
    assert any("lower bound" in (a.text or "") for a in panel.figures["curves"].layout.annotations)
    assert panel.state.step == r.n_steps > 0


def test_step_slider_replays_moves(panel):
    r = panel.result
    panel.state.step = 0
    order0 = panel.order_at()
    peak0 = mem.peak_memory(panel.graph, order0)
    assert "move 0" in panel.step_text.value
    assert f"after 0 of {r.n_steps} moves" in panel.figures["curves"].data[3].name
    panel.walker.next.click()
    s = r.steps[0]
    assert panel.state.step == 1 and str(s.subject) in panel.step_text.value
    assert ("kept" in panel.step_text.value)
    panel.state.step = r.n_steps
    assert mem.peak_memory(panel.graph, panel.order_at()) == r.peak_bytes <= peak0


def test_live_at_peak_sums_to_the_peak(panel):
    live = panel.live_at_peak(tuple(panel.result.order))
    assert int(live["bytes"].sum()) == panel.result.peak_bytes
    bars = panel.figures["live"].data[0]
    assert list(bars.y) == live["tensor"].head(panel.state.top).tolist()
    panel.state.top = 3
    assert len(panel.figures["live"].data[0].y) == min(3, len(live))


def test_switch_method_and_overlay(panel):
    panel.state.method = "kahn"  # a baseline: no moves (the DFS now logs its window pushes and pops)
    assert panel.result.method == "kahn" and "no moves" in panel.step_text.value
    dfs_peak = panel.result.peak_bytes
    panel.state.method = "ilp"
    assert panel.result.status in ("optimal", "feasible", "fallback")
    assert panel.result.peak_bytes <= dfs_peak
    panel.state.overlay = ("xla_dfs",)
    assert [t.name.split(" ")[0] for t in panel.figures["curves"].data][0] == "xla_dfs"


def test_bad_time_limit(panel):
    good = panel.result
    panel.state.time_limit_s = 0
    assert "time limit" in panel.message.value and panel.result is good
    panel.state.time_limit_s = 2.0
    assert panel.message.value == ""


def test_follows_session_and_downloads():
    p = MemoryPanel()
    p.load(randwire_ws(10, seed=3, channels=4, hw=4))
    assert p.result.lower_bound_bytes == mem.lower_bound(p.graph)
    links = _prepared_downloads(p)
    for name in ("memory_order.csv", "memory_curve.csv", "memory_live_at_peak.csv", "memory_moves.csv"):
        assert f'download="{name}"' in links
