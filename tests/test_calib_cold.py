"""Cold ops of the calibrated cost model (issue 19, ResNet-50 batch 8): a memory-bound op that
moves more than the private cache, in a graph whose working set exceeds the last-level cache, is
priced by the flushed sweep's (cold) curve and without its layer factor; everything else keeps the
workload curve and the layer factor. Numbers worked out by hand from the rule in
``CalibratedCost``'s notes and ``docs/formats.md`` section 8."""

from __future__ import annotations

import pandas as pd
import pytest

from hetsched.calibrate import _cache_bytes, fit_cold_curves
from hetsched.cost import CalibratedCost, EfficiencyCurve, load_cost, save_cost
from hetsched.errors import FormatError
from hetsched.graph import OpGraph
from hetsched.system import Device, System

PEAK, BW = 1e9, 1e9  # FLOP/s, B/s: work in seconds is flops / 1e9 and bytes / 1e9


@pytest.fixture
def sys1():
    return System([Device("d", "cpu", {"default": PEAK}, mem_bandwidth_Bps=BW, launch_overhead_s=0.0)], name="one")


def _spec(**extra):
    return {"d": {"peak_flops": PEAK, "mem_bandwidth_Bps": BW, "launch_overhead_s": 0.0,
                  # in the calibration model ReLUs ran at twice the DRAM rate (in cache) ...
                  "curves": {"Relu": EfficiencyCurve([1e-6], [2.0]), "default": EfficiencyCurve([1e-6], [1.0])},
                  # ... the flushed sweep at half of it
                  "cold_curves": {"Relu": EfficiencyCurve([1e-6], [0.5]), "MatMul": EfficiencyCurve([1e-6], [0.1])},
                  "cache_bytes": {"private": 1000, "last_level": 5000},
                  "layers": {"g": {"r2": {"op_type": "Relu", "weight_bytes": 0, "factor": 0.5}}}, **extra}}


def _chain(name: str, nbytes: int) -> OpGraph:
    """x -> r1 -> y -> r2 -> z (ReLUs of nbytes in and out), t -> r3 -> u (100 B), z -> mm (1 MFLOP)."""
    g = OpGraph(name)
    for o in ("r1", "r2", "r3"):
        g.add_op(o, "Relu")
    g.add_op("mm", "MatMul", flops=1e6)
    g.add_tensor("x", nbytes, consumers=["r1"])
    g.add_tensor("y", nbytes, producer="r1", consumers=["r2"])
    g.add_tensor("z", nbytes, producer="r2", consumers=["mm"])
    g.add_tensor("w", 100, producer="mm", is_output=True)
    g.add_tensor("t", 50, consumers=["r3"])
    g.add_tensor("u", 50, producer="r3", is_output=True)
    return g


def test_a_graph_that_fits_the_last_level_cache_keeps_curves_and_layer_factors(sys1):
    c = CalibratedCost(sys1, _spec()).bind(_chain("g(batch=1)", 1000))
    # r2 moves 2000 B (> the 1000 B private cache) but r1 + r2 move 4000 B <= 5000 B: in cache
    assert c.working_set_bytes() == 2000 + 2000  # r2 and its producer r1 (mm and r2: 1100 + 2000)
    assert c.compute_s("r2", "d") == pytest.approx(2e-6 / 2.0 * 0.5)
    assert c.cold_curve(c.graph.op("r2"), "d") is None


def test_a_graph_beyond_the_last_level_cache_prices_memory_bound_ops_cold(sys1):
    c = CalibratedCost(sys1, _spec()).bind(_chain("g(batch=8)", 2000))
    assert c.working_set_bytes() == 4000 + 4000  # r2 and r1: more than the 5000 B last-level cache
    # r2 moves 4000 B: the cold curve (0.5), and no layer factor (it was the calibration's cache state)
    assert c.compute_s("r2", "d") == pytest.approx(4e-6 / 0.5)
    assert c.compute_s("r1", "d") == pytest.approx(4e-6 / 0.5)
    # r3 moves 100 B: it stays in the private cache, the workload curve prices it
    assert c.compute_s("r3", "d") == pytest.approx(1e-7 / 2.0)
    # mm is compute bound (1 ms of FLOPs, 2.1 us of bytes): never cold, whatever its cold curve says
    assert c.compute_s("mm", "d") == pytest.approx(1e-3 / 1.0)


def test_without_cache_sizes_nothing_is_cold(sys1):
    spec = _spec()
    del spec["d"]["cache_bytes"]
    c = CalibratedCost(sys1, spec).bind(_chain("g(batch=8)", 2000))
    assert c.compute_s("r2", "d") == pytest.approx(4e-6 / 2.0 * 0.5)


def test_cold_fields_round_trip_and_errors(sys1, tmp_path):
    g = _chain("g(batch=8)", 2000)
    c = CalibratedCost(sys1, _spec())
    p = tmp_path / "cost.yaml"
    save_cost(c, p)
    text = p.read_text()
    assert "cache_bytes" in text and "cold_curves" in text
    back = load_cost(p, sys1).bind(g)
    for o in g.ops:
        assert back.compute_s(o, "d") == pytest.approx(c.bind(g).compute_s(o, "d"))
    for bad in ({"private": 1000}, {"private": -1, "last_level": 5000}, {"private": True, "last_level": 5000}):
        with pytest.raises(FormatError) as e:
            CalibratedCost(sys1, _spec(cache_bytes=bad))
        assert e.value.field == "cache_bytes"
    p.write_text("format: hetsched.cost\nversion: 1\nkind: calibrated\ndevices: {d: {peak_flops: 1, "
                 "mem_bandwidth_Bps: 1, curves: {}, cold_curves: {Relu: {work_s: [1]}}}}\n")
    with pytest.raises(FormatError) as e:
        load_cost(p, sys1)
    assert e.value.field == "cold_curves"


def test_cold_curves_come_from_the_sweep_points_only():
    pts = pd.DataFrame({"source": ["sweep", "sweep", "sweep", "resnet50", "resnet50"],
                        "op_type": ["Relu", "Relu", "Add", "Relu", "Add"],
                        "work_s": [1e-5, 1e-3, 1e-4, 1e-4, 1e-4], "efficiency": [0.2, 0.9, 0.7, 2.0, 1.5]})
    cold = fit_cold_curves(pts)
    assert sorted(cold) == ["Add", "Relu"]
    assert cold["Relu"](1e-5) == pytest.approx(0.2) and cold["Relu"](1e-3) == pytest.approx(0.9)
    assert cold["Relu"](1e-4) == pytest.approx(0.55)  # half way in log10(work), not the workload's 2.0
    assert cold["Add"](1.0) == pytest.approx(0.7)


def test_cache_sizes_from_sysfs():
    cache = _cache_bytes()
    if not cache:  # not Linux, or a sysfs that does not describe the caches: the rule is off
        assert cache == {}
        return
    assert set(cache) == {"private", "last_level"}
    assert 0 < cache["private"] <= cache["last_level"]
