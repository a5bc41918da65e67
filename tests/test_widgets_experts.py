"""ExpertsPanel driven headlessly: a MoE model's experts over devices, the mapping patent's question
(issue 28). The panel shows what hetsched.moe computes; it never re-runs a mapper to walk its log."""

from __future__ import annotations

import math
import re

import pytest

import hetsched as hs
from hetsched.io import load_graph
from hetsched.io.generators import chain
from hetsched.moe import expert_assignment, expert_shares, place_experts
from hetsched.plot.moe import UNPLACED
from hetsched.scenarios import four_gpus, scenario
from hetsched.widgets import Dashboard, ExpertsPanel, Session
from panel_testing import prepared_downloads


def _words(h: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", h)).strip()


@pytest.fixture(scope="module")
def panel():
    return ExpertsPanel()


def test_own_scenario_shows_what_place_experts_computes(panel):
    sc = scenario("experts")
    assert panel.uses_own_scenario() and panel.graph.name == "mixtral_mini_moe"
    assert (panel.state.method, panel.state.skew) == (sc.settings["method"], sc.settings["skew"])
    direct = place_experts(panel.graph, four_gpus(), method="heft", skew=1.5)
    assert panel.result.metrics["makespan_s"] == pytest.approx(direct.metrics["makespan_s"])
    tab = expert_assignment(direct)
    assert panel.assignment[["layer", "expert", "device"]].equals(tab[["layer", "expert", "device"]])
    # the grid: one square per (layer, expert), in its device's trace
    grid = panel.figures["grid"]
    by_dev = {t.name: len(t.x) for t in grid.data if t.name not in (UNPLACED, "this decision")}
    assert by_dev == {d: int((tab.device == d).sum()) for d in four_gpus().device_names}
    assert sum(by_dev.values()) == 16 and len(next(t for t in grid.data if t.name == UNPLACED).x) == 0
    # the two most popular experts of each layer sit on the A100s (the scenario's point)
    top = tab[tab.expert < 2]
    assert set(top.device) <= {"gpu0", "gpu1"}
    s = _words(panel.summary.value)
    assert "2 MoE layer(s) × 8 experts, top-2" in s and "on 4 device(s)" in s
    assert "What to notice" in panel.scenario_note.value
    # every mapper on the same split: h2h keeps the experts on one device, HEFT spreads them
    cmp = panel.comparison.set_index("method")
    assert cmp.loc["h2h", "n_devices"] == 1 and cmp.loc["heft", "n_devices"] == 4
    assert cmp.loc["h2h", "makespan_s"] == pytest.approx(place_experts(panel.graph, four_gpus(), method="h2h",
                                                                      skew=1.5).metrics["makespan_s"])
    assert "h2h (patent)" in _words(panel.table.value) and panel.message.value == ""


def test_walking_the_log_replays_it(panel):
    r = panel.result
    assert panel.state.step == r.n_steps and len(panel.walker.steps) == r.n_steps
    n = panel.n_updates
    assert panel.jump_expert(-1)  # back to the last decision about an expert
    k = panel.state.step
    step = r.steps[k - 1]
    assert step.subject in set(panel.assignment.op) and panel.n_updates == n + 1
    assert "expert" in _words(panel.step_text.value) and f"decision {k} of {r.n_steps}" in _words(panel.step_text.value)
    ring = next(t for t in panel.figures["grid"].data if t.name == "this decision")
    row = panel.assignment.set_index("op").loc[step.subject]
    assert (list(ring.x), list(ring.y)) == ([row.expert], [row.layer])
    # the first decision about an expert: every other expert is not placed yet
    panel.state.step = 0
    assert panel.jump_expert(+1)
    unplaced = next(t for t in panel.figures["grid"].data if t.name == UNPLACED)
    assert len(unplaced.x) == 15
    assert "before the first decision" in _words(panel.figures["grid"].layout.title.text) or \
        "placed so far" in panel.figures["grid"].layout.title.text
    placed = r.replay(panel.state.step - 1)["device"]
    first = r.steps[panel.state.step - 1]
    assert placed[first.subject] == first.data["device"]
    panel.state.step = r.n_steps


def test_skew_and_method_recompute_and_bad_values_are_refused(panel):
    panel.state.skew = 0.0
    assert panel.assignment["share"].tolist() == pytest.approx([1 / 8] * 16)
    panel.state.skew = 1.0
    assert panel.assignment[panel.assignment.layer == 0]["share"].tolist() == pytest.approx(expert_shares(8, skew=1.0).tolist())
    good = panel.result
    for bad in (-1.0, 9.0, math.nan):
        panel.state.skew = bad
        assert "routing skew" in _words(panel.message.value) and panel.state.skew == 1.0 and panel.result is good
    panel.state.method = "h2h"
    assert panel.message.value == "" and set(panel.assignment.device) == {"gpu0"}
    assert "compute-first" in [lab for lab, _v in panel.walker.phases.options]
    # an h2h decision cites the patent's claim that decided it
    panel.state.step = 0
    panel.jump_expert(+1)
    assert "claims 8-11" in _words(panel.step_text.value)
    with panel.hold():
        panel.state.method, panel.state.skew = "heft", 1.5


def test_a_loaded_moe_graph_is_followed_and_one_without_moe_falls_back():
    s = Session()
    p = ExpertsPanel(session=s)
    g = load_graph("mixtral_mini_moe")
    with s.hold_trait_notifications():
        s.graph, s.system = g, hs.toy_system()
    assert not p.uses_own_scenario() and p.result.graph.meta.get("experts_split")
    assert set(p.result.system.device_names) == set(hs.toy_system().device_names)
    s.graph = chain(4)  # no MoE layer: the tab's own example, said so, on the session's machine (issue 33)
    assert p.uses_own_scenario() and p.result.system.name == "toy"
    s.system = None  # no machine picked: the example's own
    assert p.result.system.name == "four_gpus"
    assert "has no mixture-of-experts layer" in _words(p.summary.value) and p.message.value == ""
    assert "chain" in _words(p.summary.value)


def test_downloads_and_the_dashboard_tab():
    p = ExpertsPanel(graph=load_graph("mixtral_mini_moe"), system=four_gpus())
    links = prepared_downloads(p)
    assert 'download="expert_placement.csv"' in links and 'download="experts_trace.json"' in links
    d = Dashboard(tabs=("graph", "experts"))
    assert d.titles == ["Graph", "Experts"] and d.panels["experts"].result is None  # hidden: nothing computed
    assert d.show("experts").result is not None
