"""CalibrationPanel driven headlessly (no torch needed): measured runs from hetsched traces, a
calibrated cost model built by hand; the panel shows what hetsched.calibrate.compare computes."""

from __future__ import annotations

import base64
import json
import re

import pandas as pd
import pytest

from hetsched import evaluate
from hetsched.calibrate import Calibration, compare
from hetsched.cost import CalibratedCost, EfficiencyCurve, save_cost
from hetsched.io.generators import chain, layered
from hetsched.io.profile import load_profile
from hetsched.system import Device, System
from hetsched.timeline import to_chrome_trace
from hetsched.widgets import CalibrationPanel
from panel_testing import prepared_downloads

SYS = System([Device("cpu0", "cpu", {"default": 5e10}, mem_bandwidth_Bps=2e10, launch_overhead_s=2e-6)], name="panel-cpu")


def _profile(g, slow: float = 1.0):
    """A 'measured' run: the roofline at 80 % of the peak, scaled by ``slow``."""
    from hetsched.cost import RooflineCost

    ev = evaluate(g, SYS, {o: "cpu0" for o in g}, cost=RooflineCost(SYS, efficiency=0.8 / slow))
    return load_profile(to_chrome_trace(ev.timeline), g)


def _cost():
    return CalibratedCost(SYS, {"cpu0": {"peak_flops": 5e10, "mem_bandwidth_Bps": 2e10, "launch_overhead_s": 2e-6,
                                         "curves": {"default": EfficiencyCurve([1e-6, 1e-2], [0.5, 0.9])}}})


@pytest.fixture
def runs():
    return {"chain": _profile(chain(6, seed=2)), "layered": _profile(layered(4, 3, seed=1), slow=1.5)}


def test_shows_what_compare_computes(runs):
    p = CalibrationPanel(runs, system=SYS, cost=_cost())
    direct = compare(runs["chain"], _cost(), SYS)
    assert p.result.metrics == pytest.approx(dict(direct.metrics))
    assert set(p.figures) == {"ratio", "gantt"}
    # every matched op is one scatter point; the Gantt has a measured and a predicted lane
    assert sum(len(t.x) for t in p.figures["ratio"].data) == len(direct.ops)
    lanes = {y for t in p.figures["gantt"].data for y in t.y}
    assert lanes == {"measured cpu0", "predicted cpu0"}
    assert "end to end predicted" in p.summary.value and p.message.value == ""


def test_switching_run_and_model_recomputes(runs, tmp_path):
    path = tmp_path / "c.yaml"
    save_cost(_cost(), path)
    p = CalibrationPanel(runs, system=SYS, cost=path)  # a cost file works too
    cal = p.result.metrics["median_ratio"]
    p.state.model = "roofline"
    assert p.result.metrics["median_ratio"] == pytest.approx(compare(runs["chain"], None, SYS).metrics["median_ratio"])
    assert p.result.metrics["median_ratio"] != pytest.approx(cal)
    p.state.run = "layered"
    assert p.result.params["graph"] == runs["layered"].graph.name
    assert p.result.metrics["median_ratio"] == pytest.approx(0.8 / 1.5, rel=0.05)  # roofline at 100 %, measured at 53 %


def test_outlining_an_op_redraws_only(runs):
    p = CalibrationPanel(runs, system=SYS, cost=_cost())
    r, n = p.result, p.n_updates
    op = p.op_picker.options[1]  # the slowest op
    p.state.op = op
    assert p.result is r and p.n_updates == n + 1
    assert any(t.name == op for t in p.figures["ratio"].data)  # the outline marker
    widths = [w for t in p.figures["gantt"].data for w in (t.marker.line.width or ())]
    assert 3 in widths


def test_bad_inputs_are_reported_and_the_panel_keeps_working(runs):
    p = CalibrationPanel(runs, system=SYS)  # no calibrated model: roofline only
    assert p.state.model == "roofline"
    good = p.result
    p.state.model = "calibrated"
    assert "no calibrated cost model" in p.message.value and p.result is good
    assert p.state.model == "roofline" == p.control_widgets["model"].value  # taken back
    run = p.state.run
    p.state.run = "missing"
    assert "missing" in p.message.value and p.result is good
    assert p.state.run == run == p.control_widgets["run"].value  # taken back
    p.state.op = good.ops["op"].iloc[0]  # the next valid action clears the message
    assert p.message.value == ""
    with pytest.raises(Exception):
        CalibrationPanel({}, system=SYS)


def test_download_is_one_trace_with_both_runs(runs):
    p = CalibrationPanel(runs, system=SYS, cost=_cost())
    links = prepared_downloads(p)
    b64 = re.search(r'download="measured_vs_predicted_trace.json" href="data:application/json;base64,([^"]+)"', links)
    trace = json.loads(base64.b64decode(b64.group(1)))
    procs = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    assert {"measured", "predicted"} <= procs
    assert "measured_vs_predicted_ops.csv" in links


def test_curves_figure_with_a_calibration(runs):
    cost = _cost()
    pts = pd.DataFrame({"source": ["w", "sweep"], "op": ["a", "b"], "op_type": ["Conv", "Conv"], "key": ["default"] * 2,
                        "work_s": [1e-5, 1e-3], "efficiency": [0.6, 0.8]})
    cal = Calibration(system=SYS, cost=cost, points=pts)
    p = CalibrationPanel(runs, system=SYS, cost=cost, calibration=cal)
    names = [t.name for t in p.figures["curves"].data]
    assert names == ["default (in model)", "default (sweep)", "default curve"]


def test_other_panels_price_with_the_session_cost(tmp_path):
    """A notebook points every panel at a calibration through the session's cost (no process-wide default)."""
    from hetsched.cost import RooflineCost, TableCost
    from hetsched.io.systems import toy_system
    from hetsched.widgets import MappingPanel
    from hetsched.widgets.base import Session

    s = toy_system()
    g = chain(4, seed=0)
    slow = TableCost(s, {(t, d): 1.0 for t in {o.op_type for o in g.ops.values()} for d in s.compute_devices})
    first = MappingPanel(graph=g, system=s)
    base = first.result.metrics["makespan_s"]
    p = MappingPanel(graph=g, system=s, session=Session(cost=slow))
    assert p.result.metrics["makespan_s"] >= 4.0 > base  # four ops of 1 s each, in a chain
    # a panel whose session gets a cost re-prices its walk and its comparison with it
    first.session.cost = slow
    assert first.result.metrics["makespan_s"] >= 4.0
    assert all(r.metrics["makespan_s"] >= 4.0 for r, _t in first._runs.values())
    p.session.cost = RooflineCost(SYS)  # made for another system: said in the panel
    assert "panel-cpu" in p.message.value
    # the cost is the session's, not the process's: a fresh panel prices with the roofline
    assert MappingPanel(graph=g, system=s).result.metrics["makespan_s"] == pytest.approx(base)
    first.session.cost = None
    assert first.result.metrics["makespan_s"] == pytest.approx(base)


RANGE = {"all": {"lo": 0.8, "hi": 1.25, "n": 2}}


def _ranged_cost(system, devices):
    return CalibratedCost(system, {d: {"peak_flops": system.device(d).peak_flops_for("default"),
                                       "mem_bandwidth_Bps": system.device(d).mem_bandwidth_Bps, "residuals": RANGE}
                                   for d in devices})


def test_calibration_panel_states_the_range_and_every_model(runs):
    """Predicted vs measured per model (a row per measured run) and the calibration's stated range."""
    cost = _ranged_cost(SYS, ["cpu0"])
    p = CalibrationPanel(runs, system=SYS, cost=cost)
    direct = {k: compare(v, cost, SYS).metrics for k, v in runs.items()}
    m = direct["chain"]
    assert m["predicted_lo_s"] == pytest.approx(0.8 * m["predicted_s"])
    assert "+/- 25%" not in p.summary.value and "-20%/+25%" in p.summary.value  # lopsided: said both ways
    assert ("fell in it" if m["in_range"] else "outside") in p.summary.value
    rows = re.findall(r"<tr>(.*?)</tr>", p.models.value)[1:]
    assert len(rows) == 2 and "chain" in rows[0] and "layered" in rows[1]
    assert p.models.value.count("measured in its stated range") == 1  # the calibrated column only: the roofline states none
    for row, (k, mm) in zip(rows, direct.items()):
        assert f"{mm['e2e_ratio']:.3f}" in row and ("yes" if mm["in_range"] else "<b>no</b>") in row
    # the layered run is 1.5x slower than the chain's: outside a 25 % range
    assert not direct["layered"]["in_range"] and "<b>no</b>" in rows[1]
    # the roofline states no range: the summary says none
    p.state.model = "roofline"
    assert "stated" not in p.summary.value


def test_panels_show_the_makespan_with_its_range():
    """A session cost that kept held-out residuals: the Mapping panel's words give the range."""
    from hetsched.io.systems import toy_system
    from hetsched.plot import format_time_range
    from hetsched.widgets import MappingPanel
    from hetsched.widgets.base import Session

    s = toy_system()
    g = chain(4, seed=0)
    p = MappingPanel(graph=g, system=s, session=Session(cost=_ranged_cost(s, s.compute_devices)))
    m = p.result.metrics
    assert m["makespan_lo_s"] < m["makespan_s"] < m["makespan_hi_s"]
    assert f"makespan {format_time_range(m)}" in p.summary.value and "%" in format_time_range(m)
