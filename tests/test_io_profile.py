"""Profile import (issue 19): real torch.profiler traces of the zoo's torch twins are matched to the
imported graphs op for op (by FX-node annotation and, for an eager run, by op type and order);
hetsched's own traces round-trip; unmatched events and ops are reported; a GPU trace's kernels
are joined to their launches; a profile is a size-checked cost model."""

from __future__ import annotations

import gzip
import json
import warnings

import pytest

from hetsched import evaluate
from hetsched.errors import FormatError, HetschedError
from hetsched.graph import OpGraph
from hetsched.io.generators import chain
from hetsched.io.profile import event_key, load_profile, op_key
from hetsched.io.systems import toy_system
from hetsched.system import Device, System
from hetsched.timeline import to_chrome_trace

CPU = System([Device("cpu0", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)], name="cpu")


def test_own_trace_round_trip(tmp_path):
    g = chain(5, seed=1)
    s = toy_system()
    ev = evaluate(g, s, {o: ("gpu0" if i % 2 else "cpu0") for i, o in enumerate(g)})
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(to_chrome_trace(ev.timeline)).encode()))
    p = load_profile(path, g, device="gpu0")
    comp = ev.timeline[ev.timeline["kind"] == "compute"].set_index("op")
    assert p.metrics["match_rate"] == 1.0 and p.unmatched_ops == ()
    for o in g:
        assert p.latency_s[o] == pytest.approx(comp.loc[o, "end_s"] - comp.loc[o, "start_s"], abs=1e-9)
        assert p.matched_by[o] == "name"
    assert p.n_iterations == 1 and p.timeline["op"].tolist() == list(g)


def _kineto(events, **extra):
    return {"schemaVersion": 1, "traceEvents": events, **extra}


def _op(name, ts, dur, tid=1, cat="cpu_op", **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _small_graph():
    g = OpGraph("small")
    for name, typ in [("conv", "Conv"), ("bn", "BatchNormalization"), ("relu", "Relu"), ("fc", "Gemm")]:
        g.add_op(name, typ, flops=1e6)
    g.add_tensor("x", 100, consumers=["conv"])
    for a, b in [("conv", "bn"), ("bn", "relu"), ("relu", "fc")]:
        g.add_tensor(a + ":out", 100, producer=a, consumers=[b])
    g.add_tensor("fc:out", 100, producer="fc", is_output=True)
    return g


def test_order_matching_with_iterations_extra_and_missing_events():
    g = _small_graph()
    evs, t = [], 0.0
    for it in range(3):
        seq = [("aten::conv2d", 50), ("aten::batch_norm", 10), ("aten::empty", 1), ("aten::relu", 5), ("aten::linear", 20)]
        for name, d in seq:
            evs.append(_op(name, t, d + it))
            # a nested child is not an op of its own
            evs.append(_op("aten::mkldnn_convolution", t + 0.5, d - 1)) if name == "aten::conv2d" else None
            t += d + 5
    p = load_profile(_kineto(evs), g)
    assert p.metrics["match_rate"] == 1.0 and p.n_iterations == 3
    assert p.samples["conv"] == pytest.approx((50e-6, 51e-6, 52e-6)) and p.latency_s["conv"] == pytest.approx(51e-6)
    assert set(p.matched_by.values()) == {"order"}
    ue = p.unmatched_events.set_index("name")
    assert ue.loc["aten::empty", "count"] == 3 and "aten::mkldnn_convolution" not in ue.index
    assert load_profile(_kineto(evs), g, stat="min").latency_s["relu"] == pytest.approx(5e-6)
    # an op the trace never ran is reported, the rest still match
    g.add_op("extra", "Softmax")
    g.add_tensor("fc:out2", 10, producer="extra", is_output=True)
    p = load_profile(_kineto(evs), g)
    assert p.unmatched_ops == ("extra",) and p.metrics["n_matched"] == 4
    assert any(s.action == "unmatched_ops" and not s.accepted for s in p.steps)


def test_profiler_steps_split_iterations():
    g = _small_graph()
    evs = []
    for it in range(2):
        base = it * 1000
        evs.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{it}", "pid": 1, "tid": 1, "ts": base,
                    "dur": 500})
        for k, name in enumerate(["aten::conv2d", "aten::batch_norm", "aten::relu", "aten::addmm"]):
            evs.append(_op(name, base + 10 + 100 * k, 50))
    p = load_profile(_kineto(evs), g)
    assert p.n_iterations == 2 and p.metrics["match_rate"] == 1.0
    assert p.metrics["iteration_s"] == pytest.approx(350e-6)


def test_gpu_kernels_joined_to_launches():
    g = _small_graph()
    evs = []
    for k, name in enumerate(["aten::conv2d", "aten::batch_norm", "aten::relu", "aten::linear"]):
        t = 100.0 * k
        evs.append(_op(name, t, 20))
        evs.append(_op("cudaLaunchKernel", t + 5, 3, cat="cuda_runtime", correlation=k))
        evs.append({"ph": "X", "cat": "kernel", "name": f"k{k}", "pid": 0, "tid": 7, "ts": t + 30, "dur": 40 + k,
                    "args": {"correlation": k}})
    p = load_profile(_kineto(evs), g, device="gpu0")
    assert p.params["gpu"] is True
    assert [round(p.latency_s[o] * 1e6) for o in ["conv", "bn", "relu", "fc"]] == [40, 41, 42, 43]
    cpu_side = load_profile(_kineto(evs), g, gpu=False)
    assert cpu_side.latency_s["conv"] == pytest.approx(20e-6)


def test_keys():
    assert event_key("aten::linear") == event_key("aten::mm") == "MatMul"
    assert event_key("aten::view") == "Reshape" and event_key("aten::flatten") == "Reshape"
    from hetsched.graph import Op

    assert op_key(Op("a", "Gemm", attrs={"aten": "aten.addmm.default"})) == "MatMul"
    assert op_key(Op("b", "Flatten")) == "Reshape"


def test_profile_errors(tmp_path):
    g = _small_graph()
    with pytest.raises(FormatError) as e:
        load_profile(tmp_path / "none.json", g)
    assert e.value.field == "path"
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FormatError) as e:
        load_profile(bad, g)
    assert e.value.field == "<json>"
    with pytest.raises(FormatError) as e:
        load_profile({"events": []}, g)
    assert e.value.field == "traceEvents"
    with pytest.raises(FormatError) as e:
        load_profile(_kineto([]), g, stat="p99")
    assert e.value.field == "stat"
    with pytest.raises(HetschedError) as e:
        load_profile(_kineto([]), g, order=["conv", "nope"])
    assert e.value.op == "nope"
    with pytest.raises(FormatError) as e:
        load_profile(_kineto([]), g, gpu=True)
    assert e.value.field == "gpu"


def test_profile_as_cost_model():
    g = _small_graph()
    evs = [_op(n, 100 * k, 10 * (k + 1)) for k, n in enumerate(["aten::conv2d", "aten::batch_norm", "aten::relu",
                                                                  "aten::linear"])]
    p = load_profile(_kineto(evs), g)
    tc = p.cost_model(CPU)
    ev = evaluate(g, CPU, {o: "cpu0" for o in g.ops}, cost=tc)
    assert ev.metrics["makespan_s"] == pytest.approx(p.metrics["total_s"]) == pytest.approx(100e-6)
    big = _small_graph()
    big.set_op("conv", flops=8e6)  # the same op at another size
    with pytest.raises(HetschedError) as e:
        evaluate(big, CPU, {o: "cpu0" for o in big.ops}, cost=tc)
    assert e.value.op == "conv"


# ---------------------------------------------------------------- real torch.profiler traces
torch = pytest.importorskip("torch")

from hetsched.io.profile import profile_torch  # noqa: E402
from hetsched.io.torch_import import load_torch  # noqa: E402
from hetsched.io.torch_zoo import TORCH_ZOO, torch_model  # noqa: E402

SMALL = {
    "resnet50": {"image_size": 32},
    "vgg16": {"image_size": 32},
    "mobilenet_v2": {"image_size": 32},
    "inception_v3": {"image_size": 75},
    "bert_base": {"seq_len": 8, "n_layers": 2, "vocab": 1000},
    "gpt2_small": {"seq_len": 8, "n_layers": 2, "vocab": 1000},
}


@pytest.mark.parametrize("name", sorted(TORCH_ZOO))
def test_zoo_twin_profiles_match_every_op(name, tmp_path):
    m, x = torch_model(name, **SMALL[name])
    ep = torch.export.export(m, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = load_torch(ep)
    from hetsched.io import zoo

    z = zoo.build(name, **SMALL[name])  # the twin is the zoo's architecture
    assert g.meta["macs"] == z.meta["macs"]
    assert sum(o.op_type == "Conv" for o in g.ops.values()) == sum(o.op_type == "Conv" for o in z.ops.values())
    # the eager module, unannotated: matched by op type and order, two iterations
    path = tmp_path / "eager.json"
    profile_torch(m, x, path, repeats=2, annotate=False, threads=1)
    p = load_profile(path, g)
    assert p.metrics["match_rate"] == 1.0, p.unmatched_ops[:5]
    assert p.n_iterations == 2 and p.metrics["n_unmatched_events"] == 0
    assert all(len(s) == 2 and min(s) > 0 for s in p.samples.values())
    # the exported program, one annotation per FX node: matched by name
    q = load_profile(profile_torch(ep, x, repeats=1, threads=1), g)
    assert q.metrics["match_rate"] == 1.0 and set(q.matched_by.values()) == {"name"}
    assert q.unmatched_ops == () and len(q.timeline) == g.n_ops


def test_profile_torch_runs_the_given_order():
    m, x = torch_model("resnet50", image_size=32)
    ep = torch.export.export(m, x)
    g = load_torch(ep)
    order = list(g.ops)
    # swap two independent ops: the first block's downsample conv runs before its main branch
    i, j = order.index("conv2d_1"), order.index("conv2d_4")
    order = order[:i] + [order[j]] + order[i:j] + order[j + 1:]
    q = load_profile(profile_torch(ep, x, repeats=1, order=order), g)
    ran = q.timeline.sort_values("start_s")["op"].tolist()
    assert ran == order
    with pytest.raises(HetschedError) as e:
        profile_torch(ep, x, order=list(reversed(order)))
    assert e.value.field == "order"
    with pytest.raises(HetschedError):
        profile_torch(m, x, annotate=False, order=order)
