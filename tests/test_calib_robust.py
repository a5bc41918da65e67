"""Robustness of the calibration to run-to-run noise (issue 19, ResNet-50 batch 8 on a shared machine).

No timing here: synthetic latencies with a known efficiency, multiplicative noise and one spoiled
run go through the fitting functions, and the fitted efficiency must stay within a band of the
true one; the spoiled run must not move it. The numbers come from the rules in the docstrings of
``median_runs`` and ``robust_layer_factors`` (median over runs; shrinkage ``L^3 / (L^2 + s^2)`` in
log space), not from the code's output."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from hetsched.calibrate import fit_curves, median_runs, robust_layer_factors, sweep_graph

LAUNCH = 0.0


def _true_eff(work_s: float) -> float:
    """A made-up efficiency rising from 0.3 at 1 us of work to 1.2 at 10 ms (linear in log10 work)."""
    return 0.3 + 0.9 * (math.log10(work_s) + 6) / 4


def _ops(n: int = 60, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {f"op{i}": float(10 ** rng.uniform(-6, -2)) for i in range(n)}  # op -> work in seconds


def _run(work: dict[str, float], sigma: float, seed: int, slow: float = 1.0) -> dict[str, float]:
    """Measured times of one run: work / efficiency, times lognormal noise, times ``slow`` (contention)."""
    rng = np.random.default_rng(seed)
    return {o: w / _true_eff(w) * float(np.exp(rng.normal(0, sigma))) * slow for o, w in work.items()}


def _points(work: dict[str, float], lat: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"source": "model", "op": list(work), "op_type": "Relu", "work_s": list(work.values()),
                         "efficiency": [work[o] / (lat[o] - LAUNCH) for o in work]})


def _fitted_error(curves, work: dict[str, float]) -> float:
    """The largest relative error of the fitted curve against the true efficiency, over the ops' work sizes
    (away from the two ends, where a bin holds few points)."""
    ws = sorted(work.values())[5:-5]
    return max(abs(curves["Relu"](w) / _true_eff(w) - 1) for w in ws)


def test_median_of_runs_fits_within_the_noise_band():
    work = _ops()
    runs = [_run(work, 0.10, seed) for seed in (1, 2, 3)]
    curves, _, _ = fit_curves(_points(work, median_runs(runs)))
    # 10 % noise per op, the median of 3 runs and of each bin's points: well within 15 %
    assert _fitted_error(curves, work) < 0.15


def test_a_spoiled_run_does_not_move_the_fit():
    work = _ops()
    clean = [_run(work, 0.05, seed) for seed in (1, 2)]
    spoiled = _run(work, 0.05, 3, slow=2.0)  # another job took the memory bus: every op twice as slow
    curves_clean, _, _ = fit_curves(_points(work, median_runs(clean + [_run(work, 0.05, 4)])))
    curves_spoiled, _, _ = fit_curves(_points(work, median_runs(clean + [spoiled])))
    # a single run with the spoiled one in it would be off by up to 2x; the median ignores it
    assert _fitted_error(curves_spoiled, work) < 0.12
    for w in sorted(work.values())[5:-5]:
        assert curves_spoiled["Relu"](w) == pytest.approx(curves_clean["Relu"](w), rel=0.12)
    one_run, _, _ = fit_curves(_points(work, spoiled))
    assert _fitted_error(one_run, work) > 0.4  # what the median protects from


def test_median_runs_takes_each_ops_median_and_tolerates_missing_ops():
    assert median_runs([{"a": 1.0, "b": 4.0}, {"a": 3.0}, {"a": 2.0, "b": 2.0}]) == {"a": 2.0, "b": 3.0}
    assert median_runs([]) == {}


def test_layer_factor_kept_when_consistent_shrunk_when_noise():
    rng = np.random.default_rng(7)
    factors, groups = {}, {}
    # 20 convolutions whose factors are real (a layer 30 % slower than its class, in every run, 2 % noise)
    for i in range(20):
        factors[f"conv{i}"] = list(1.3 * np.exp(rng.normal(0, 0.02, 3)))
        groups[f"conv{i}"] = "Conv"
    # 20 ReLUs whose factors are noise (no real effect, 25 % run-to-run noise)
    for i in range(20):
        factors[f"relu{i}"] = list(np.exp(rng.normal(0, 0.25, 3)))
        groups[f"relu{i}"] = "Relu"
    out = robust_layer_factors(factors, groups)
    for i in range(20):
        assert out[f"conv{i}"][0] == pytest.approx(1.3, rel=0.05)
    relu_logs = np.abs([math.log(out[f"relu{i}"][0]) for i in range(20)])
    raw_logs = np.abs([math.log(float(np.median(factors[f"relu{i}"]))) for i in range(20)])
    # shrinkage: every ReLU factor is pulled toward 1, and on the whole by more than half
    assert (relu_logs <= raw_logs + 1e-12).all() and relu_logs.sum() < 0.5 * raw_logs.sum()
    # the spread reported is the group's noise at least
    assert all(out[f"relu{i}"][1] >= 0.1 for i in range(20))


def test_layer_factor_ignores_an_outlier_run_and_keeps_a_single_run():
    out = robust_layer_factors({"conv": [1.3, 1.31, 4.0], "other": [1.29, 1.3, 1.31]},
                               {"conv": "Conv", "other": "Conv"})
    assert out["conv"][0] == pytest.approx(1.3, rel=0.02)  # not pulled toward 4.0
    single = robust_layer_factors({"x": [0.6]})
    assert single["x"] == (pytest.approx(0.6), 0.0)  # one run: nothing to judge the noise by
    # non-positive or infinite factors are not evidence
    assert robust_layer_factors({"y": [float("inf"), 0.0]}) == {}


def test_sweep_batch_norm_covers_the_planes_of_a_cnn():
    g, specs = sweep_graph(["BatchNormalization", "Conv"])
    bn = {n: sp for n, sp in specs.items() if sp["kind"] == "bn"}
    planes = {sp["h"] for sp in bn.values()}
    assert {7, 14, 28, 56} <= planes and {1, 4, 8} <= {sp["b"] for sp in bn.values()}
    # the 4x-wide planes of a bottleneck, for batch norms and 1x1 convolutions both ways
    assert {(256, 56), (2048, 7)} <= {(sp["c"], sp["h"]) for sp in bn.values()}
    convs = [sp for sp in specs.values() if sp["kind"] == "conv"]
    assert any(sp["co"] == 4 * sp["c"] for sp in convs) and any(4 * sp["co"] == sp["c"] for sp in convs)
    # no tensor of 32 MiB or more: glibc maps those afresh on every call (page faults no model pays)
    assert max(g.tensor(t).size_bytes for t in g.tensors) < 32 << 20
    for n, sp in bn.items():  # elements and weights by the shape: 2 FLOPs an element, 4 vectors of c
        elems = sp["b"] * sp["c"] * sp["h"] ** 2
        op = g.op(n)
        assert op.weight_bytes == 4 * sp["c"] * 4
        assert g.tensor(f"{n}:in0").size_bytes == elems * 4


def test_sweep_fits_wide_depthwise_kernels_apart():
    """The sweep's depthwise 5x5 points (forward and backward) land in curves of their own, each with
    enough points to be fitted (``MIN_POINTS_PER_TYPE``), quick sweep too; a cost fitted before the
    split prices a wide one by the depthwise curve."""
    from collections import Counter

    from hetsched.calibrate import MIN_POINTS_PER_TYPE
    from hetsched.cost import CalibratedCost, curve_type
    from hetsched.graph import Op
    from hetsched.system import Device, System

    for quick in (False, True):
        g, _ = sweep_graph(["Conv", "Conv_grad"], quick=quick)
        n = Counter(curve_type(o) for o in g.ops.values())
        for t in ("DepthwiseConv", "DepthwiseConvWide", "DepthwiseConv_grad", "DepthwiseConvWide_grad"):
            assert n[t] >= MIN_POINTS_PER_TYPE, (quick, t, n)
    s = System([Device("cpu0", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)])
    old = CalibratedCost(s, {"cpu0": {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10, "curves": {
        "DepthwiseConv_grad": {"work_s": [1e-6, 1e-3], "efficiency": [0.1, 0.1]},
        "conv": {"work_s": [1e-6, 1e-3], "efficiency": [0.5, 0.5]}}}})
    wide = Op("dw", "Conv_grad", flops=1e6, attrs={"groups": 8, "kernel": [5, 5]})
    assert old.curve_for("cpu0", curve_type(wide))[0] == "DepthwiseConv_grad"


def test_matrix_vector_products_have_a_curve_of_their_own():
    """A Gemm of fewer than ``GEMV_ROWS`` rows is ``Gemv`` (by its FLOPs per weight byte, any
    importer), the sweep times enough of them for a curve, their slow points leave the Gemm curve's
    level alone, and a cost fitted before the split prices them by ``Gemm``."""
    from collections import Counter

    from hetsched.calibrate import MIN_POINTS_PER_TYPE, fit_curves
    from hetsched.cost import GEMV_ROWS, CalibratedCost, curve_type
    from hetsched.graph import Op
    from hetsched.system import Device, System

    def gemm(rows, k=768, n=768, wbytes=4):
        return Op(f"g{rows}", "Gemm", flops=2.0 * rows * k * n + rows * n, weight_bytes=wbytes * (k * n + n))

    assert [curve_type(gemm(r)) for r in (1, GEMV_ROWS - 1, GEMV_ROWS, 64)] == ["Gemv", "Gemv", "Gemm", "Gemm"]
    assert curve_type(gemm(GEMV_ROWS // 2, wbytes=2)) == "Gemm"  # 16-bit weights: half the rows
    assert curve_type(Op("mm", "Gemm", flops=1e6)) == "Gemm"  # no weights: two activations
    for quick in (False, True):
        g, _ = sweep_graph(["Gemm"], quick=quick)
        n = Counter(curve_type(o) for o in g.ops.values())
        assert n["Gemv"] >= (MIN_POINTS_PER_TYPE if not quick else 1) and n["Gemm"] >= 3, (quick, n)
    # a classifier's matrix-vector product at 0.55 beside 64-row projections at 0.95
    pts = pd.DataFrame({"source": ["m"] * 8, "op": [f"o{i}" for i in range(8)],
                        "op_type": ["Gemv"] * 4 + ["Gemm"] * 4,
                        "work_s": [8e-5, 9e-5, 2.6e-4, 2.7e-4, 8e-4, 8.2e-4, 3e-3, 3.1e-3],
                        "efficiency": [0.55] * 4 + [0.95] * 4})
    curves = fit_curves(pts)[0]
    assert curves["Gemm"](1e-4) == pytest.approx(0.95) and curves["Gemv"](1e-4) == pytest.approx(0.55)
    assert curves["matmul"](1e-4) < 0.95  # the class keeps every point
    s = System([Device("cpu0", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)])
    old = CalibratedCost(s, {"cpu0": {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10, "curves": {
        "Gemm": {"work_s": [1e-6, 1e-3], "efficiency": [0.9, 0.9]},
        "matmul": {"work_s": [1e-6, 1e-3], "efficiency": [0.5, 0.5]}}}})
    assert old.curve_for("cpu0", curve_type(gemm(1)), "matmul")[0] == "Gemm"


def test_sweep_produce_rewrites_the_input_without_changing_it():
    torch = pytest.importorskip("torch")
    from hetsched.calibrate import _sweep_callable

    for sp in ({"kind": "unary", "fn": "relu", "n": 64}, {"kind": "binary", "fn": "add", "n": 64},
               {"kind": "bn", "b": 1, "c": 4, "h": 3}, {"kind": "conv", "b": 1, "c": 4, "h": 5, "k": 3},
               {"kind": "bmm", "b": 2, "s": 4, "d": 8}, {"kind": "mean", "n": 1536},
               {"kind": "sdpa", "b": 2, "s": 4, "d": 8}):
        run, produce = _sweep_callable(sp, "cpu")
        before = run().clone()
        produce()  # what the op's producer would have written: the same values, just written again
        assert torch.equal(run(), before), sp


def test_every_sweep_point_has_a_tiny_code_warming_twin():
    """Between the eviction and the timed call the sweep runs the same kind of op on a few KB
    (code_warm_spec): every kind of point must have one that runs and is small."""
    torch = pytest.importorskip("torch")
    from hetsched.calibrate import _sweep_callable, code_warm_spec, sweep_graph

    g, specs = sweep_graph(["Relu", "Add", "BatchNormalization", "LayerNormalization", "Softmax", "MaxPool",
                            "GlobalAveragePool", "Gemm", "MatMul", "Conv", "Conv_grad", "ReduceMean"], quick=True)
    kinds = set()
    with torch.no_grad():
        for name, sp in specs.items():
            tiny = code_warm_spec(sp)
            assert tiny["kind"] == sp["kind"] and tiny.get("groups", 1) > 1 if sp.get("groups", 1) > 1 else True
            out = _sweep_callable(tiny, "cpu")[0]()
            first = out[0] if isinstance(out, tuple) else out
            assert first.numel() * first.element_size() <= 64 << 10, (name, tiny)
            kinds.add(sp["kind"])
    assert kinds >= {"unary", "binary", "bn", "ln", "softmax", "maxpool", "gap", "linear", "bmm", "conv", "conv_grad",
                     "mean", "sdpa"}


def test_curve_times_never_fall_as_work_grows():
    import numpy as np

    from hetsched.calibrate import fit_curves

    # a bin of small ops timed slow (right after a large op) between faster smaller and larger ones
    pts = pd.DataFrame({"source": ["m"] * 9, "op_type": ["Relu"] * 9,
                        "work_s": [1e-8] * 3 + [1e-7] * 3 + [1e-6] * 3,
                        "efficiency": [1e-8 / 3e-6] * 3 + [1e-7 / 13e-6] * 3 + [1e-6 / 4e-6] * 3})
    curve = fit_curves(pts, min_points=3)[0]["Relu"]
    ws = np.logspace(-9, -5, 60)
    ts = [curve.time_s(w) for w in ws]
    assert all(b >= a * (1 - 1e-9) for a, b in zip(ts, ts[1:])), ts
    assert curve.time_s(1e-7) == pytest.approx(4e-6) and curve.time_s(1e-8) == pytest.approx(3e-6)


def test_a_type_seen_in_one_layer_takes_the_sweeps_curve():
    from hetsched.calibrate import fit_curves

    # ResNet-50's only global average pool, timed slow in its model (three sources: one op), and a sweep
    pts = pd.DataFrame({"source": ["resnet50", "resnet50 train sgd", "resnet50 train adam"] + ["sweep"] * 3,
                        "op": ["gap"] * 3 + ["s1", "s2", "s3"], "op_type": ["GlobalAveragePool"] * 6,
                        "work_s": [1e-5] * 3 + [1e-6, 1e-5, 1e-4], "efficiency": [0.15] * 3 + [0.1, 0.9, 1.5]})
    curves, steps, _ = fit_curves(pts, min_points=3)
    assert curves["GlobalAveragePool"](1e-5) == pytest.approx(0.9)
    assert "sweep points" in next(s for s in steps if s.subject == "GlobalAveragePool").reason
    # a second layer of one graph at the same size: the workloads set the level again
    two = pd.concat([pts, pts.iloc[:1].assign(op="gap2", work_s=1.2e-5)], ignore_index=True)
    curves, steps, _ = fit_curves(two, min_points=3)
    assert curves["GlobalAveragePool"](1.1e-5) == pytest.approx(0.15, rel=0.15)  # not the sweep's 0.9
    assert "workload points" in next(s for s in steps if s.subject == "GlobalAveragePool").reason
    # two layers of one graph at sizes apart (a training step's loss mean and ResNet-50's pool as a
    # mean), or one per graph: single layers, each in its own place -- the sweep's curve
    apart = pd.concat([pts, pts.iloc[:1].assign(op="loss_mean", work_s=1e-7)], ignore_index=True)
    curves, steps, _ = fit_curves(apart, min_points=3)
    assert curves["GlobalAveragePool"](1e-5) == pytest.approx(0.9)
    assert "at most 1 op(s)" in next(s for s in steps if s.subject == "GlobalAveragePool").reason


def test_an_edge_bin_of_one_layer_does_not_set_the_level_beyond_it():
    """ResNet-50's first 1x1 convolution (one layer, in its inference and both training graphs) was
    the Conv curve's smallest bin: with a sweep to carry the trend, the next bin sets the level below;
    a bin of two layers of one graph keeps its knot, and without a sweep the single layer stays."""
    from hetsched.calibrate import fit_curves

    srcs = ["resnet50", "resnet50 train sgd", "resnet50 train adam"]
    one = pd.DataFrame({"source": srcs + ["resnet50"] * 4, "op": ["c1", "conv_1", "conv_1", "c2", "c3", "c4", "c5"],
                        "op_type": ["Conv"] * 7, "work_s": [3e-4] * 3 + [1.1e-3] * 4,
                        "efficiency": [0.72] * 3 + [1.0] * 4})
    sweep = pd.DataFrame({"source": ["sweep"] * 3, "op": ["s1", "s2", "s3"], "op_type": ["Conv"] * 3,
                          "work_s": [1e-4, 3e-4, 1.1e-3], "efficiency": [0.8, 0.9, 1.0]})
    curves, steps, _ = fit_curves(pd.concat([one, sweep], ignore_index=True), min_points=3)
    assert curves["Conv"](3e-4) == pytest.approx(0.9, rel=0.02)  # the level 1.0 scaled by the sweep's trend
    assert curves["Conv"](1e-4) == pytest.approx(0.8, rel=0.02)
    assert fit_curves(one, min_points=3)[0]["Conv"](3e-4) == pytest.approx(0.72)  # no sweep: nothing better
    # points that do not name their ops: no layers to count, every bin is kept
    unnamed = pd.concat([one, sweep], ignore_index=True).drop(columns="op")
    assert fit_curves(unnamed, min_points=3)[0]["Conv"](3e-4) == pytest.approx(0.72)
    two = pd.concat([one, one.iloc[:1].assign(op="c0", work_s=3.1e-4), sweep], ignore_index=True)
    assert fit_curves(two, min_points=3)[0]["Conv"](3e-4) == pytest.approx(0.72, rel=0.01)


def test_below_the_workloads_the_trend_is_the_code_warm_sweeps():
    """A mobile network's small convolutions run a few microseconds after the op before them: below
    the workloads' smallest knot the level is scaled by the code-warm sweep's trend, not the plain
    eviction's (which priced MobileNetV3's 1x1s 1.2-1.6x); above it the plain sweep's stays."""
    from hetsched.calibrate import fit_curves

    pts = pd.DataFrame({
        "source": ["m"] * 2 + ["sweep"] * 3 + ["sweep_warm"] * 3, "op": ["c1", "c2"] + [f"s{i}" for i in range(6)],
        "op_type": ["Conv"] * 8, "work_s": [1e-3, 1.1e-3] + [1e-5, 1e-3, 1e-1] * 2,
        "efficiency": [1.0, 1.0] + [0.1, 1.0, 2.0] + [0.5, 1.0, 4.0]})
    curve = fit_curves(pts, min_points=3)[0]["Conv"]
    assert curve(1e-5) == pytest.approx(0.5, rel=0.05)
    above = 1e-1 / (1.05e-3 / 1.0 + 1e-1 / 2.0 - 1.05e-3 / 1.0)  # the plain sweep's added time
    assert curve(1e-1) == pytest.approx(above, rel=0.05)
    plain = fit_curves(pts[pts["source"] != "sweep_warm"], min_points=3)[0]["Conv"]
    assert plain(1e-5) == pytest.approx(0.25, rel=0.05)  # 0.1 / 1.0 clamped to 4x


def test_code_warm_sweep_points_set_only_sweep_level_curves():
    from hetsched.calibrate import fit_curves

    pts = pd.DataFrame({
        "source": ["m"] * 4 + ["sweep"] * 3 + ["sweep_warm"] * 3 + ["sweep"] * 3 + ["sweep_warm"] * 3,
        "op": [f"c{i}" for i in range(4)] + [f"s{i}" for i in range(12)],
        "op_type": ["Conv"] * 10 + ["DepthwiseConv"] * 6,
        "work_s": [1e-5, 1.2e-5, 1e-4, 1.2e-4] + [1e-4, 1e-3, 1e-2] * 4,
        "efficiency": [0.2, 0.2, 0.4, 0.4] + [0.8, 1.6, 1.6] + [9.0, 9.0, 9.0] + [0.1, 0.2, 0.4] + [0.2, 0.4, 0.8]})
    curves, steps, key = fit_curves(pts, min_points=3)
    # a type with workload points: level from them, trend from the plain sweep; the warm points unused
    assert [round(curves["Conv"](w), 3) for w in (1.1e-5, 1e-3)] == [0.2, 1.304]
    # a sweep-only type: the code-warm timing
    assert curves["DepthwiseConv"](1e-3) == pytest.approx(0.4)
    assert "code warm" in next(s for s in steps if s.subject == "DepthwiseConv").reason
    assert key[pts["source"] == "sweep_warm"].isna().all()


def test_fused_attention_is_swept_and_counted_as_the_importer_counts_it():
    """A workload that writes attention as matrix products (the zoo's BERT) still gets torch's fused
    attention swept (what every transformers model and torchvision's ViT run), with the FLOPs and
    bytes the torch importer gives the same call; a curve of its own is fitted from those points."""
    torch = pytest.importorskip("torch")
    from hetsched.calibrate import MIN_POINTS_PER_TYPE
    from hetsched.io.torch_import import load_torch

    g, specs = sweep_graph(["MatMul", "Softmax"], quick=True)
    att = [o for o in g.ops.values() if o.op_type == "Attention"]
    assert len(att) == 3 and {specs[o.name]["kind"] for o in att} == {"sdpa"}
    assert not [o for o in sweep_graph(["Relu", "Conv"])[0].ops.values() if o.op_type == "Attention"]

    class Sdpa(torch.nn.Module):
        def forward(self, q, k, v):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    sp = specs["sweep/Attention/32"]
    q, k, v = (torch.randn(1, sp["b"], sp["s"], sp["d"]) for _ in range(3))
    imported = [o for o in load_torch(Sdpa(), (q, k, v), name="sdpa").ops.values() if o.op_type == "Attention"]
    assert len(imported) == 1 and imported[0].flops == pytest.approx(g.op("sweep/Attention/32").flops)
    # the full sweep's points make an Attention curve (sweep points only: the workloads have none)
    full = [o.name for o in sweep_graph(["MatMul"])[0].ops.values() if o.op_type == "Attention"]
    assert len(full) >= MIN_POINTS_PER_TYPE
    work = [1e-5 * 4 ** i for i in range(len(full))]
    pts = pd.DataFrame({"source": ["sweep"] * len(full) + ["sweep_warm"] * len(full), "op": full * 2,
                        "op_type": ["Attention"] * (2 * len(full)), "work_s": work * 2,
                        "efficiency": [0.3 + 0.1 * i for i in range(len(full))] * 2})
    curves = fit_curves(pts)[0]
    assert "Attention" in curves and curves["Attention"](work[0]) < curves["Attention"](work[-1])
