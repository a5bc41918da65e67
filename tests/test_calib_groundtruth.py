"""Issue 30 in the core: thread counts recorded and refused, held-out residuals and the error range
every result priced with a calibrated cost states, and training steps timed and predicted.

Measurements here are tiny (an MLP, a small CNN); bench/bench_calibration.py holds the targets."""

from __future__ import annotations

import math
import warnings

import pytest

import hetsched as hs
from hetsched.cost import CalibratedCost, EfficiencyCurve, describe_range, load_cost, makespan_range, save_cost
from hetsched.errors import FormatError, HetschedError, ThreadMismatchError
from hetsched.io.generators import chain
from hetsched.system import Device, System

RES = {"conv": {"lo": 0.9, "hi": 1.2, "n": 3}, "all": {"lo": 0.8, "hi": 1.1, "n": 5}}


def _system(threads=1, name="t"):
    return System([Device("cpu0", "cpu", {"default": 1e11}, 2**34, 1e10, 2e-6, attrs={"threads": threads})], name=name)


def _cost(system, residuals=RES, threads=1):
    spec = {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10, "launch_overhead_s": 2e-6, "work": "sum",
            "curves": {"default": EfficiencyCurve([1e-6, 1e-3], [0.3, 0.8])}, "threads": threads}
    if residuals:
        spec["residuals"] = residuals
    return CalibratedCost(system, {"cpu0": spec})


# ---------------------------------------------------------------------------- threads
def test_thread_count_is_recorded_and_a_mismatch_is_refused(tmp_path):
    s1 = _system(1)
    c = _cost(s1)
    g = chain(4)
    hs.evaluate(g, s1, {o: "cpu0" for o in g}, cost=c)  # same count: priced
    save_cost(c, tmp_path / "c.yaml")
    back = load_cost(tmp_path / "c.yaml", s1)
    assert back.threads("cpu0") == 1 and back.devices["cpu0"]["residuals"] == RES
    # the system says the device runs 2 threads (a what-if copy, or a system calibrated at 2)
    s2 = s1.with_devices({"cpu0": Device("cpu0", "cpu", {"default": 1e11}, 2**34, 1e10, 2e-6, attrs={"threads": 2})})
    with pytest.raises(ThreadMismatchError) as e:
        hs.evaluate(g, s2, {o: "cpu0" for o in g}, cost=back)
    assert e.value.device == "cpu0" and e.value.field == "threads"
    assert e.value.details == {"calibrated": 1, "requested": 2} and "calibrate at 2 thread(s)" in str(e.value)
    with pytest.raises(ThreadMismatchError):
        back.check_threads(2)
    # a device without a recorded count (an older file) is not checked
    hs.evaluate(g, s2, {o: "cpu0" for o in g}, cost=_cost(s2, threads=None))


def test_bad_threads_and_residuals_in_a_cost_file(tmp_path):
    s = _system()
    for bad, field in [({"threads": 0}, "threads"), ({"threads": "two"}, "threads"),
                       ({"residuals": {"conv": {"lo": 1.2, "hi": 0.9}}}, "residuals"),
                       ({"residuals": {"conv": {"lo": "x", "hi": 1}}}, "residuals"),
                       ({"residuals": [1, 2]}, "residuals")]:
        with pytest.raises(FormatError) as e:
            CalibratedCost(s, {"cpu0": {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10, **bad}})
        assert e.value.field == field and e.value.device == "cpu0", bad


# ---------------------------------------------------------------------------- error range
def test_error_range_weights_each_class_by_its_predicted_time():
    c = _cost(_system())
    lo, hi = c.error_range([("Conv", "cpu0", 3.0), ("Relu", "cpu0", 1.0)])
    assert (lo, hi) == pytest.approx(((3 * 0.9 + 0.8) / 4, (3 * 1.2 + 1.1) / 4))
    # rows on an uncalibrated device count at face value; none at all: no statement
    assert c.error_range([("Conv", "gpu9", 1.0)]) is None
    assert _cost(_system(), residuals=None).error_range([("Conv", "cpu0", 1.0)]) is None
    assert makespan_range(_cost(_system(), residuals=None), iter(()), 1.0) == {}


def test_held_out_range_is_the_largest_miss_stated_both_ways():
    """A held-out model 25 % slower than predicted and another 10 % faster: the range is
    [1 / (1.25 x 1.03), 1.25 x 1.03] -- symmetric in log space, not the observed [0.9, 1.25]."""
    from hetsched.calibrate import RESIDUAL_MARGIN, holdout_residuals
    from hetsched.io.profile import load_profile
    from hetsched.timeline import to_chrome_trace

    s = System([Device("cpu0", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)])
    c = CalibratedCost(s, {"cpu0": {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10}})

    def measured(g, factor):  # the "measured" run: the same ops, each ``factor`` times the prediction
        s2 = System([Device("cpu0", "cpu", {"default": 1e11 / factor}, mem_bandwidth_Bps=1e10 / factor)])
        slow = CalibratedCost(s2, {"cpu0": {"peak_flops": 1e11 / factor, "mem_bandwidth_Bps": 1e10 / factor}})
        tl = hs.evaluate(g, s2, {o: "cpu0" for o in g}, cost=slow).timeline
        return load_profile(to_chrome_trace(tl), g, device="cpu0")

    g1, g2 = chain(3), chain(4)
    ops, frame, res = holdout_residuals(c, "cpu0", {"slow": [measured(g1, 1.25)], "fast": [measured(g2, 0.9)]})
    r = frame[frame["op_class"] == "all"].set_index("model")["measured_over_predicted"]
    assert r["slow"] == pytest.approx(1.25, rel=1e-3) and r["fast"] == pytest.approx(0.9, rel=1e-3)
    f = 1.25 * (1 + RESIDUAL_MARGIN)
    for k in ("all", "conv"):
        assert res[k]["hi"] == pytest.approx(f, rel=1e-3) and res[k]["lo"] == pytest.approx(1 / f, rel=1e-3)
        assert res[k]["n"] == 2
    # a model only ever faster than predicted still gets a range above 1 (its bias is not a direction)
    _, _, res = holdout_residuals(c, "cpu0", {"fast": [measured(g2, 0.8)]}, margin=0.0)
    assert res["all"]["lo"] == pytest.approx(0.8, rel=1e-3) and res["all"]["hi"] == pytest.approx(1.25, rel=1e-3)


def test_every_family_states_the_range_with_a_calibrated_cost():
    s = _system()
    c = _cost(s)
    g = chain(6)
    ev = hs.evaluate(g, s, {o: "cpu0" for o in g}, cost=c)
    m = ev.metrics
    assert m["makespan_lo_s"] < m["makespan_s"] < m["makespan_hi_s"]
    busy = [(g.op(o).op_type, "cpu0", c.bind(g).compute_s(o, "cpu0")) for o in g.ops]
    lo, hi = c.error_range(busy)
    assert m["makespan_lo_s"] == pytest.approx(lo * m["makespan_s"]) and m["makespan_hi_s"] == pytest.approx(hi * m["makespan_s"])
    # a mapping result carries evaluate's metrics
    r = hs.mapping.METHODS["heft"](g, s, cost=c)
    assert r.metrics["makespan_lo_s"] == pytest.approx(m["makespan_lo_s"])
    # the roofline states nothing
    assert "makespan_lo_s" not in hs.evaluate(g, s, {o: "cpu0" for o in g}).metrics
    # the pipeline: stage costs priced with the calibration carry the factors to the simulation
    from hetsched.io.training import training_graph
    from hetsched.pipeline import one_f_one_b, simulate, stage_costs

    st = stage_costs(training_graph(g), s, devices=["cpu0", "cpu0"], p=2)
    assert st.meta["error_range"] is None  # roofline
    st = stage_costs(training_graph(g), s, devices=["cpu0", "cpu0"], p=2, cost=c)
    pr = simulate(one_f_one_b(2, 4), costs=st)
    lo, hi = st.meta["error_range"]
    assert pr.metrics["makespan_lo_s"] == pytest.approx(lo * pr.metrics["makespan_s"])
    # the executor and the partition's buffered run
    from hetsched.executor import simulate as ex_simulate
    from hetsched.partition import partition_by_support, simulate_buffered

    ex = ex_simulate(g, system=s, cost=c, kinds={o: "cpu_sync" for o in g})
    assert ex.metrics["makespan_lo_s"] < ex.metrics["makespan_s"] < ex.metrics["makespan_hi_s"]
    part = partition_by_support(g, s)
    b = simulate_buffered(part, s, n_inputs=2, buffer_depth=1, cost=c)
    assert b.metrics["makespan_lo_s"] < b.metrics["makespan_s"] < b.metrics["makespan_hi_s"]


def test_describe_range_for_people():
    assert describe_range(0.0124, 0.0124 * 0.94, 0.0124 * 1.06) == "12.4 ms +/- 6%"
    assert describe_range(0.0124, 0.0124 * 0.96, 0.0124 * 1.08) == "12.4 ms -4%/+8%"
    assert describe_range(3e-5) == "30 us" and describe_range(0.5, math.nan, 1.0) == "500 ms"


# ---------------------------------------------------------------------------- training steps
torch = pytest.importorskip("torch")


class _CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.bn, self.c2 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.Conv2d(8, 8, 3)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.bn(self.c1(x)))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(self.c2(x), 1).flatten(1))


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_training_step_graph_has_eager_kernels_and_one_update_per_parameter(opt):
    from hetsched.io.train_step import STATE_COPIES, UPDATE_TYPES, time_training_step, training_step

    torch.manual_seed(0)
    m = _CNN()
    step = training_step(m, (torch.randn(2, 3, 12, 12),), optimizer=opt, name="cnn")
    g = step.graph
    types = {o.op_type for o in g.ops.values()}
    # eager autograd's kernels, not their decompositions
    assert {"Conv_grad", "BatchNormalization_grad", "Relu_grad", "BatchNormalizationTraining"} <= types
    assert "BatchNormalization" not in types
    params = dict(m.named_parameters())
    ups = [o for o in g.ops.values() if o.attrs.get("phase") == "optimizer"]
    assert {o.attrs["param"] for o in ups} == set(params)
    for o in ups:
        p = params[o.attrs["param"]]
        assert o.op_type == UPDATE_TYPES[opt] and o.weight_bytes == (1 + STATE_COPIES[opt]) * p.numel() * 4
        (grad,) = g.inputs_of(o.name)
        assert g.tensor(grad).size_bytes == p.numel() * 4  # it reads the parameter's gradient
    assert g.meta["model"] == "cnn:train"
    g.validate()
    prof = time_training_step(step, repeats=2, warmup=1, clock="cpu", threads=1)
    assert prof.metrics["match_rate"] == 1.0 and prof.params["threads"] == 1
    # the per-op sum stands for the eager step (a loose band: CI machines are shared)
    assert 0.3 < prof.metrics["program_s"] / prof.metrics["iteration_s"] < 3


def test_training_step_of_a_model_with_tied_weights():
    """A weight shared by two modules (GPT-2's, BERT's and T5's embedding and LM head) gets one
    gradient and one update, named as ``named_parameters()`` names it; torch's joint export refused
    the tied name no node reads."""
    from hetsched.io.train_step import time_training_step, training_step

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.head = torch.nn.Embedding(10, 8), torch.nn.Linear(8, 10, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, ids):
            return self.head(torch.relu(self.emb(ids)))

    torch.manual_seed(0)
    m = Tied()
    step = training_step(m, (torch.randint(0, 10, (2, 3)),), optimizer="adam")
    ups = [o for o in step.graph.ops.values() if o.attrs.get("phase") == "optimizer"]
    assert [o.attrs["param"] for o in ups] == ["emb.weight"] and ups[0].attrs["numel"] == 80
    prof = time_training_step(step, repeats=1, warmup=1, clock="cpu", threads=1)
    assert prof.metrics["match_rate"] == 1.0


def test_calibrate_with_training_and_holdout_keeps_residuals(tmp_path):
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
    other = torch.nn.Sequential(torch.nn.Linear(32, 96), torch.nn.Tanh(), torch.nn.Linear(96, 4)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = hs.calibrate([(mlp, (torch.randn(8, 64),), "mlp")], holdout=[(other, (torch.randn(8, 32),), "other")],
                         training=("sgd",), repeats=2, runs=2, warmup=1, threads=1, clock="cpu", sweep=False,
                         system_name="gt", cost_path=tmp_path / "c.yaml", system_path=tmp_path / "s.yaml")
    assert {"mlp", "mlp train sgd"} <= set(r.profiles) and set(r.holdout_profiles) == {"other", "other train sgd"}
    assert "SGDUpdate" in set(r.points["op_type"])  # the updates were fitted
    assert set(r.holdout["model"]) == {"other", "other train sgd"} and (r.holdout["predicted_s"] > 0).all()
    e2e = r.residuals[r.residuals["op_class"] == "all"]
    assert len(e2e) == 4  # two held-out workloads x two runs
    res = r.cost.devices["cpu0"]["residuals"]
    assert res["all"]["lo"] <= e2e["measured_over_predicted"].min() and res["all"]["hi"] >= e2e["measured_over_predicted"].max()
    assert r.metrics["n_holdout"] == 2 and r.cost.meta["holdout"] == ["other", "other train sgd"]
    c = load_cost(tmp_path / "c.yaml", hs.load_system(tmp_path / "s.yaml"))
    assert c.has_residuals and c.threads("cpu0") == 1
    assert "thread_speedup" not in r.metrics and "thread_speedup" not in c.meta  # one thread: nothing to probe
    # a result priced with it states its range
    g = r.graphs["other"]
    ev = hs.evaluate(g, r.system, {o: "cpu0" for o in g.ops}, cost=c)
    assert ev.metrics["makespan_lo_s"] < ev.metrics["makespan_hi_s"]
    # compare() refuses a run timed with another thread count than the cost's
    prof = r.holdout_profiles["other"]
    from dataclasses import replace

    with pytest.raises(ThreadMismatchError):
        hs.calibrate.compare(replace(prof, params={**prof.params, "threads": 2}), c, r.system)


def test_a_calibration_at_two_threads_records_what_the_cores_delivered(tmp_path):
    """With more than one thread the calibration probes how much faster they run a matrix product
    than one thread and keeps it with the cost (a later measurement can probe it again)."""
    from hetsched.calibrate import thread_speedup

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).eval()
    before = torch.get_num_threads()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = hs.calibrate([(mlp, (torch.randn(8, 64),), "mlp")], holdout=[], repeats=2, runs=1, warmup=1, threads=2,
                         clock="wall", sweep=False, system_name="gt2", cost_path=tmp_path / "c.yaml",
                         system_path=tmp_path / "s.yaml")
    assert torch.get_num_threads() == before
    s = r.metrics["thread_speedup"]
    assert 0.2 < s < 4 and r.cost.meta["thread_speedup"] == round(s, 3)
    back = load_cost(tmp_path / "c.yaml", hs.load_system(tmp_path / "s.yaml"))
    assert back.threads("cpu0") == 2 and back.meta["thread_speedup"] == round(s, 3)
    assert 0.2 < thread_speedup(2, n=128, repeats=3) < 4 and torch.get_num_threads() == before
    for bad in (0, 1.5, True):
        with pytest.raises(HetschedError) as e:
            thread_speedup(bad)
        assert e.value.field == "threads"
