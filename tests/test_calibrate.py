"""hetsched.calibrate on a tiny model with few repeats (the full ResNet-50 / BERT run is
bench/bench_calibration.py): what it measures, the curves it fits, the files it writes and that
evaluate, the algorithms, the CLI (--cost) and compare() accept them."""

from __future__ import annotations

import math
import warnings

import pandas as pd
import pytest

import hetsched as hs
from hetsched.calibrate import fit_curves, parse_workload
from hetsched.cost import CalibratedCost, EfficiencyCurve, load_cost
from hetsched.errors import HetschedError

torch = pytest.importorskip("torch")

from hetsched.io.profile import time_torch  # noqa: E402
from hetsched.io.torch_import import load_torch  # noqa: E402


def _mlp(batch):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                            torch.nn.Flatten(), torch.nn.Linear(512, 10)).eval()
    return m, (torch.randn(batch, 256),)


@pytest.fixture(scope="module")
def cal(tmp_path_factory):
    d = tmp_path_factory.mktemp("cal")
    m, x = _mlp(8)
    torch.manual_seed(1)
    other = torch.nn.Sequential(torch.nn.Linear(128, 384), torch.nn.ReLU(), torch.nn.Linear(384, 10)).eval()
    r = hs.calibrate([(m, x, "mlp(batch=8)")], holdout=[(other, (torch.randn(16, 128),), "other")],
                     repeats=3, runs=1, warmup=1, threads=1, clock="cpu", sweep="quick",
                     system_name="t-local", system_path=d / "sys.yaml", cost_path=d / "cost.yaml")
    return r, d


def test_measures_and_fits(cal):
    r, _ = cal
    m = r.metrics
    assert m["peak_flops"] > 1e8 and m["mem_bandwidth_Bps"] > 1e8 and 0 < m["launch_overhead_s"] < 1e-3
    assert m["threads"] == 1 and m["n_points"] == len(r.points) > 0
    dev = r.system.device("cpu0")
    assert dev.peak_flops_for("Gemm") == m["peak_flops"] and dev.mem_bandwidth_Bps == m["mem_bandwidth_Bps"]
    assert dev.attrs["threads"] == 1 and "torch" in dev.attrs
    spec = r.cost.devices["cpu0"]
    assert {"Gemm", "default"} <= set(spec["curves"]) and spec["work"] == "sum"
    # every workload op was timed and every non-view op is a point of the fit
    prof = r.profiles["mlp(batch=8)"]
    g = r.graphs["mlp(batch=8)"]
    assert prof.metrics["match_rate"] == 1.0
    assert set(r.points.loc[r.points.source == "mlp(batch=8)", "op"]) == {o for o in g.ops if g.op(o).op_type != "Reshape"}
    assert set(r.points.source) == {"mlp(batch=8)", "sweep", "sweep_warm"}
    actions = [s.action for s in r.steps]
    for a in ("measure_peak_flops", "measure_bandwidth", "measure_launch", "profile_workload", "sweep", "fit_curve",
              "layer_factors"):
        assert a in actions
    # the efficiencies are the roofline work over the measured time, launch excluded
    p = r.points.iloc[0]
    assert p.efficiency == pytest.approx(p.work_s / (p.measured_s - m["launch_overhead_s"]))


def test_layer_factors_reproduce_the_calibration_run(cal):
    # one run: no run-to-run spread to shrink the factors by, so they reproduce the run exactly
    r, _ = cal
    prof = r.profiles["mlp(batch=8)"]
    c = hs.calibrate.compare(prof, r.cost, r.system)
    assert c.ops["ratio"].to_numpy() == pytest.approx(1.0, rel=1e-9)
    # without them the curves alone still price every op
    curves_only = CalibratedCost(r.system, {"cpu0": {**r.cost.devices["cpu0"], "layers": {}}})
    c2 = hs.calibrate.compare(prof, curves_only, r.system)
    assert c2.ops["ratio"].notna().all() and c2.metrics["n_ops"] == r.graphs["mlp(batch=8)"].n_ops


def test_files_round_trip_and_every_entry_point(cal, capsys):
    r, d = cal
    s = hs.load_system(d / "sys.yaml")
    assert s.name == "t-local" and s.device("cpu0").mem_bandwidth_Bps == r.system.device("cpu0").mem_bandwidth_Bps
    cost = load_cost(d / "cost.yaml", s)
    assert isinstance(cost, CalibratedCost) and cost.meta["threads"] == 1 and cost.meta["clock"] == "cpu"
    m, x = _mlp(32)  # another batch size of the same model: its layer factors apply
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = load_torch(m, x, name="mlp(batch=32)")
    pl = {o: "cpu0" for o in g.ops}
    ev = hs.evaluate(g, s, pl, cost=str(d / "cost.yaml"))
    assert ev.metrics["makespan_s"] == pytest.approx(sum(cost.bind(g).compute_s(o, "cpu0") for o in g.ops))
    assert cost.bind(g).layer_factor(g.op("linear"), "cpu0") == r.cost.devices["cpu0"]["layers"]["mlp"]["linear"][2]
    # a mapping algorithm takes the path too
    res = hs.mapping.METHODS["heft"](g, s, cost=str(d / "cost.yaml"))
    assert res.metrics["makespan_s"] == pytest.approx(ev.metrics["makespan_s"])
    # and the CLI's global --cost
    from hetsched.cli import main

    gpath = d / "g.json"
    hs.save_graph(g, gpath)
    assert main(["--cost", str(d / "cost.yaml"), "map", str(gpath), "--system", str(d / "sys.yaml"), "--method", "heft",
                 "--csv", str(d / "out")]) == 0
    got = pd.read_csv(d / "out_metrics.csv").set_index("metric")["value"]
    assert got["makespan_s"] == pytest.approx(ev.metrics["makespan_s"])
    assert main(["map", str(gpath), "--system", str(d / "sys.yaml"), "--method", "heft", "--csv", str(d / "roof")]) == 0
    roof = pd.read_csv(d / "roof_metrics.csv").set_index("metric")["value"]
    assert roof["makespan_s"] != pytest.approx(got["makespan_s"])
    assert main(["--cost", str(d / "cost.yaml"), "map", str(gpath), "--system", "toy", "--quiet"]) == 2
    assert "made for system 't-local'" in capsys.readouterr().err
    assert main(["--cost", str(d / "cost.yaml"), "order", str(gpath), "--quiet"]) == 2
    # a sweep's points each read the file against their own system (no process-wide default to inherit)
    spec = d / "spec.yaml"
    spec.write_text(f"task: map\ngrid: {{method: [heft]}}\nfixed: {{graph: '{gpath}', system: '{d / 'sys.yaml'}'}}\n")
    assert main(["--cost", str(d / "cost.yaml"), "sweep", str(spec), "--workers", "1", "--output", str(d / "sw.csv"),
                 "--quiet"]) == 0
    assert pd.read_csv(d / "sw.csv")["makespan_s"].item() == pytest.approx(ev.metrics["makespan_s"])
    spec.write_text("task: pipeline\ngrid: {m: [4]}\nfixed: {p: 2, v: 1}\n")
    assert main(["--cost", str(d / "cost.yaml"), "sweep", str(spec), "--quiet"]) == 2
    assert "--cost applies to sweep tasks" in capsys.readouterr().err


def test_predicts_another_batch_and_trace(cal):
    r, _ = cal
    m, x = _mlp(32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = load_torch(m, x, name="mlp(batch=32)")
    prof = time_torch(m, x, g, repeats=3, clock="cpu", threads=1)
    c = hs.calibrate.compare(prof, r.cost, r.system)
    # a sanity band on a shared CI machine; bench/bench_calibration.py holds the real targets
    assert 0.2 < c.metrics["median_ratio"] < 5 and 0.2 < c.metrics["e2e_ratio"] < 5
    assert set(c.ops.columns) >= {"op", "op_type", "measured_s", "predicted_s", "ratio"}
    tr = c.trace()
    names = {e["args"]["name"] for e in tr["traceEvents"] if e.get("name") == "process_name"}
    assert {"measured", "predicted"} <= names
    hs.check_timeline(c.predicted)
    hs.check_timeline(c.measured)


def test_argument_errors():
    cases = [({"repeats": 0}, "repeats"), ({"stat": "p50"}, "stat"), ({"clock": "tsc"}, "clock"),
             ({"device": "tpu"}, "device"), ({"sweep": "some"}, "sweep"), ({"threads": 0}, "threads"),
             ({"clock": "cpu", "threads": 2}, "threads"), ({"runs": 0}, "runs"), ({"runs": True}, "runs")]
    for kw, field in cases:
        with pytest.raises(HetschedError) as e:
            hs.calibrate([("resnet50", {"image_size": 32})], **kw)
        assert e.value.field == field, kw
    with pytest.raises(HetschedError) as e:
        hs.calibrate([42])
    assert e.value.field == "workloads"
    if not torch.cuda.is_available():
        with pytest.raises(HetschedError) as e:
            hs.calibrate(device="cuda", clock="profiler")
        assert e.value.field == "device"
    assert parse_workload("resnet50") == ("resnet50", {})


def test_fit_curves_level_and_trend():
    # workload points set the level; the sweep only adds what more work costs beyond them
    pts = pd.DataFrame({
        "source": ["w"] * 6 + ["sweep"] * 4,
        "op_type": ["Relu"] * 10,
        "work_s": [1e-6, 1e-6, 1e-5, 1e-5, 1e-5, 1e-5, 1e-5, 1e-4, 1e-3, 1e-2],
        "efficiency": [0.1, 0.3, 0.5, 0.5, 0.6, 0.4, 2.0, 2.0, 1.0, 1.0],
    })
    curves, steps, key = fit_curves(pts)
    c = curves["Relu"]
    assert c(1e-6) == pytest.approx(0.2) and c(1e-5) == pytest.approx(0.5)  # medians of the workload bins
    # at 1e-3 the sweep adds 1e-3/1.0 - 1e-5/2.0 of time to the workload's 1e-5/0.5
    assert c(1e-3) == pytest.approx(1e-3 / (1e-5 / 0.5 + 1e-3 / 1.0 - 1e-5 / 2.0))
    assert key.tolist() == ["Relu"] * 10
    assert any("sweep's trend" in s.reason for s in steps)
    # few points of a type: its class's curve
    pts2 = pd.DataFrame({"source": ["w"] * 2, "op_type": ["Tanh"] * 2, "work_s": [1e-6, 1e-5], "efficiency": [0.5, 0.5]})
    assert set(fit_curves(pts2)[0]) == {"elementwise", "default"}
    # negative or missing efficiencies are left out
    pts3 = pts2.assign(efficiency=[float("nan"), -1.0])
    assert fit_curves(pts3)[0] == {}
    assert isinstance(c, EfficiencyCurve) and math.isfinite(c(1.0))


def test_compute_curves_do_not_drop_with_work():
    # a 3x3 convolution on a 2x2 image (large work, low efficiency) must not drag the class curve
    # down at large work: conv and matmul curves are non-decreasing (the layer factor keeps the outlier)
    pts = pd.DataFrame({"source": ["w"] * 8, "op_type": ["Conv"] * 4 + ["Relu"] * 4,
                        "work_s": [1e-5, 1e-4, 1e-3, 1e-2] * 2, "efficiency": [0.3, 0.8, 0.9, 0.2, 0.3, 0.8, 0.9, 0.2]})
    curves, _, _ = fit_curves(pts)
    conv = curves["Conv"]
    assert conv.efficiency == sorted(conv.efficiency) and conv(1e-2) == pytest.approx((0.8 + 0.9 + 0.2) / 3)
    assert curves["Relu"](1e-2) == pytest.approx(0.2)  # memory-bound: leaving the cache may cost efficiency


def test_callable_module():
    import importlib

    mod = importlib.import_module("hetsched.calibrate")
    assert hs.calibrate is mod and callable(mod) and mod.DEFAULT_WORKLOADS[0][0] == "resnet50"


def test_the_calibrate_command_writes_files_the_other_commands_take(tmp_path, capsys):
    """``hetsched calibrate`` end to end on a small workload (issue 19): a system YAML and a cost file
    that ``map --cost`` then prices a zoo model with; a bad workload is one line and exit 2."""
    from hetsched.cli import main

    sys_out, cost_out = tmp_path / "sys.yaml", tmp_path / "cost.yaml"
    rc = main(["calibrate", "resnet50:batch=1,image_size=32", "--sweep", "none", "--repeats", "1", "--runs", "2",
               "--threads", "1", "--holdout", "mobilenet_v2:batch=1,image_size=32",
               "--clock", "cpu", "--name", "cli-local", "--system-out", str(sys_out), "--cost-out", str(cost_out),
               "--quiet"])
    assert rc == 0 and sys_out.exists() and cost_out.exists()
    s = hs.load_system(sys_out)
    assert s.name == "cli-local" and s.device("cpu0").peak_flops_for("Conv") > 0
    cost = load_cost(cost_out, s)
    assert isinstance(cost, CalibratedCost) and cost.meta["runs"] == 2
    assert cost.threads("cpu0") == 1 and cost.has_residuals  # the held-out MobileNet gave an error range
    from hetsched.io.torch_zoo import torch_model

    m, x = torch_model("resnet50", batch=2, image_size=32)  # another batch: the fit is shape-aware
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = load_torch(m, x, name="resnet50-32")
    gpath = tmp_path / "g.json"
    hs.save_graph(g, gpath)
    assert main(["--cost", str(cost_out), "map", str(gpath), "--system", str(sys_out), "--method", "heft",
                 "--csv", str(tmp_path / "out")]) == 0
    got = pd.read_csv(tmp_path / "out_metrics.csv").set_index("metric")["value"]
    assert got["makespan_s"] > 0
    capsys.readouterr()
    assert main(["calibrate", "resnet50:batch", "--quiet", "--system-out", str(tmp_path / "x.yaml"),
                 "--cost-out", str(tmp_path / "y.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "option=integer" in err[0] and not (tmp_path / "x.yaml").exists()
