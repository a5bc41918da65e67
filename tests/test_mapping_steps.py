"""Mapping decision logs a panel can draw (issue 15): trials, per-step metrics, notebook 01's instance."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsched.io import load_system
from hetsched.io.generators import layered
from hetsched.io.mmmt import mmmt
from hetsched.io.systems import toy_system
from hetsched.mapping import evaluate_trial, h2h, map_compute_first, optimize_locality, remap
from hetsched.system import SupportTable

ROOT = Path(__file__).resolve().parents[1]


def zoo_accelerators():
    zoo = load_system("h2h_fpga_zoo")
    sup = zoo.support.as_dict()
    sup.pop(zoo.host)
    return zoo.with_support(SupportTable(sup))


@pytest.mark.parametrize("objective", ["total_latency", "makespan"])
def test_a_refused_trial_can_be_drawn(objective):
    """Claim 4: the trial moved the layer and put its data in the new device's memory; the refused
    step keeps both, and evaluate_trial times exactly the state the trial was priced on."""
    g, s = mmmt("casia_surf"), zoo_accelerators()
    r = h2h(g, s, objective=objective)
    refused = [x for x in r.steps if x.action == "remap" and not x.accepted and x.after is not None
               and not x.data.get("bound_only")]
    assert refused
    key = f"{objective}_s"
    for x in refused:
        t = evaluate_trial(r, x.index)
        assert x.data["metric"] == objective
        assert t.after.metrics[key] == pytest.approx(x.after, rel=1e-9)
        assert t.before.metrics[key] == pytest.approx(x.before, rel=1e-9)
        assert t.moved == {x.subject: (x.data["source"], x.data["target"])}
        assert t.residency["weights_add"] == list(x.delta["weights_add"])
        assert t.residency["tensors_add"] == list(x.delta["tensors_add"])
        assert set(t.busy["device"]) == set(s.device_names)
        # the busy time of each device before/after is the evaluator's, and a refused trial changes nothing
        assert t.busy["busy_after_s"].sum() == pytest.approx(t.after.metrics["total_latency_s"], rel=1e-9)
        assert r.replay(x.index) == r.replay(x.index - 1)
    ok = next(x for x in r.steps if x.action == "remap" and x.accepted)
    t = evaluate_trial(r, ok.index)
    assert t.after.metrics[key] == pytest.approx(ok.after, rel=1e-9)


def test_a_trial_refused_before_pricing_has_no_after():
    from test_mapping_core import unsupported_target_case

    g, s, cost = unsupported_target_case()
    r = remap(optimize_locality(map_compute_first(g, s, cost=cost)))
    x = next(x for x in r.steps if x.action == "remap" and x.subject == "b")
    t = evaluate_trial(r, x.index)
    assert t.after is None and t.before is not None and "does not support" in t.why
    # nothing priced, nothing changed: the busy chart shows the state as it stays
    assert not t.busy.empty and (t.busy["busy_before_s"] == t.busy["busy_after_s"]).all()
    with pytest.raises(IndexError):
        evaluate_trial(r, r.n_steps)


def test_every_step_says_which_metric_it_reports():
    r = h2h(layered(4, 4, seed=3), toy_system(), objective="makespan", direction="both")
    for x in r.steps:
        if x.data.get("phase") != "memory_repair":
            assert x.data["metric"] in ("op_latency", "total_latency", "makespan")


def notebook_instance():
    """Notebook 01's instance: casia_surf (three backbones, 91 layers) on the H2H zoo's accelerators."""
    return mmmt("casia_surf"), zoo_accelerators()


def test_notebook_01_instance_exercises_every_phase():
    nb = json.loads((ROOT / "notebooks" / "01_mapping.ipynb").read_text())
    src = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert 'mmmt("casia_surf")' in src and "sup.pop(zoo.host)" in src
    g, s = notebook_instance()
    r = h2h(g, s)
    phases = r.phase_bounds()
    assert set(phases) >= {"compute_first", "locality", "remap"}
    loc = [x for x in r.steps if x.data.get("phase") == "locality"]
    rm = [x for x in r.steps if x.action == "remap"]
    assert any(x.accepted for x in loc)
    assert sum(x.accepted for x in rm) >= 2 and sum(not x.accepted for x in rm) >= 2
    assert len(set(r.placement.device.values())) >= 2  # not everything on one accelerator
    assert r.metrics["total_latency_s"] < r.metrics["compute_first_total_latency_s"]
