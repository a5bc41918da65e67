"""Regression tests for every loader defect issue 20 lists: one named error (naming the culprit) each.

Graph JSON, system YAML and ONNX inputs that raised raw TypeError/OverflowError/RecursionError/
IndexError, or were silently accepted (truncated, duplicated, inf), before.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import yaml

from hetsched.errors import FormatError, GraphError, HetschedError, SystemError_
from hetsched.graph import OpGraph
from hetsched.io import DATA_DIR, graph_from_dict, load_graph, load_system, system_from_dict
from hetsched.limits import MAX_BYTES


def tiny() -> dict:
    return {"format": "hetsched.graph", "version": 1, "name": "tiny",
            "ops": [{"name": "a", "op_type": "Relu"}, {"name": "b", "op_type": "Relu"}],
            "tensors": [{"name": "x", "size_bytes": 8, "consumers": ["a"]},
                        {"name": "t", "size_bytes": 8, "producer": "a", "consumers": ["b"]},
                        {"name": "y", "size_bytes": 8, "producer": "b", "is_output": True}]}


def graph_case(mutate):
    d = tiny()
    mutate(d)
    return d


GRAPH_CASES = {
    # name: (mutation, error type, expected culprit attributes)
    "tensor name int": (lambda d: d["tensors"][0].update(name=5), FormatError, {"field": "tensors[0].name"}),
    "tensor name list": (lambda d: d["tensors"][0].update(name=["x"]), FormatError, {"field": "tensors[0].name"}),
    "op name dict": (lambda d: d["ops"][0].update(name={}), FormatError, {"field": "ops[0].name"}),
    "size above 2^63": (lambda d: d["tensors"][1].update(size_bytes=2**64), GraphError, {"tensor": "t", "field": "size_bytes"}),
    "size just above the limit": (lambda d: d["tensors"][1].update(size_bytes=MAX_BYTES + 1), GraphError, {"tensor": "t"}),
    "two 2^62 tensors": (lambda d: [t.update(size_bytes=2**62) for t in d["tensors"][:2]], GraphError, {"field": "size_bytes"}),
    "sum above the limit": (lambda d: [t.update(size_bytes=MAX_BYTES // 2 + 1) for t in d["tensors"][:2]], GraphError,
                            {"field": "size_bytes"}),
    "weights 2^70": (lambda d: d["ops"][0].update(weight_bytes=2**70), GraphError, {"op": "a", "field": "weight_bytes"}),
    "flops 10^400": (lambda d: d["ops"][0].update(flops=10**400), GraphError, {"op": "a", "field": "flops"}),
    "flops 1e308": (lambda d: d["ops"][0].update(flops=1e308), GraphError, {"op": "a", "field": "flops"}),
    "fractional bytes": (lambda d: d["tensors"][0].update(size_bytes=8.5), FormatError, {"tensor": "x", "field": "size_bytes"}),
    "bool bytes": (lambda d: d["tensors"][0].update(size_bytes=True), FormatError, {"tensor": "x", "field": "size_bytes"}),
    "self alias": (lambda d: d["tensors"][1].update(alias_of="t"), GraphError, {"tensor": "t", "field": "alias_of"}),
    "alias loop": (lambda d: (d["tensors"][1].update(alias_of="y"), d["tensors"][2].update(alias_of="t")), GraphError,
                   {"field": "alias_of"}),
    "attrs list": (lambda d: d["ops"][0].update(attrs=[["k", 1]]), FormatError, {"op": "a", "field": "attrs"}),
    "meta list": (lambda d: d.update(meta=[1]), FormatError, {"field": "meta"}),
    "attrs nested 100 deep": (lambda d: d["tensors"][0].update(attrs={"v": json.loads("[" * 100 + "]" * 100)}), FormatError,
                              {"tensor": "x", "field": "attrs"}),
    "version true": (lambda d: d.update(version=True), FormatError, {"field": "version"}),
}


@pytest.mark.parametrize("case", list(GRAPH_CASES))
def test_graph_json_defects_get_named_errors(case):
    mutate, exc, culprit = GRAPH_CASES[case]
    with pytest.raises(exc) as e:
        graph_from_dict(graph_case(mutate))
    for k, v in culprit.items():
        assert getattr(e.value, k) == v, (k, getattr(e.value, k), str(e.value))


def test_a_graph_at_the_limit_is_accepted_and_sums_stay_exact():
    d = graph_case(lambda d: [t.update(size_bytes=MAX_BYTES // 4) for t in d["tensors"]])
    g = graph_from_dict(d)
    assert sum(t.size_bytes for t in g.tensors.values()) <= MAX_BYTES
    assert float(sum(t.size_bytes for t in g.tensors.values())) == 3 * (MAX_BYTES // 4)  # exact in a float64
    assert all(isinstance(t.size_bytes, int) for t in g.tensors.values())
    assert graph_from_dict(graph_case(lambda d: d["tensors"][0].update(size_bytes=8.0))).tensor("x").size_bytes == 8


def test_validate_catches_what_code_builds_too():
    g = OpGraph()
    g.add_op("a", "Relu", flops=10**400)
    with pytest.raises(GraphError, match="401 digits") as e:
        g.validate()  # was OverflowError in math.isfinite
    assert e.value.op == "a"
    g = OpGraph()
    g.add_op("a", "Relu")
    g.add_tensor(7, 8, producer="a", is_output=True)
    with pytest.raises(GraphError) as e:
        g.validate()
    assert e.value.field == "name"


def test_graph_paths_that_are_no_readable_file(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(FormatError, match="directory") as e:
        load_graph(tmp_path / "dir.json")
    assert e.value.field == "path"
    (tmp_path / "latin1.json").write_bytes('{"name": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(FormatError, match="UTF-8") as e:
        load_graph(tmp_path / "latin1.json")
    assert e.value.field == "<encoding>"


# ---------------------------------------------------------------------------------- system YAML
def base_system() -> dict:
    return yaml.safe_load((DATA_DIR / "systems" / "cpu_gpu_fpga.yaml").read_text())


SYSTEM_CASES = {
    "inf bandwidth": (lambda d: d["links"][0].update(bandwidth_Bps=float("inf")), {"field": "bandwidth_Bps", "device": "cpu0"}),
    "inf latency": (lambda d: d["links"][0].update(latency_s=float("inf")), {"field": "latency_s", "device": "cpu0"}),
    "nan latency": (lambda d: d["links"][0].update(latency_s=float("nan")), {"field": "latency_s"}),
    "inf launch": (lambda d: d["devices"][1].update(launch_overhead_s=float("inf")), {"field": "launch_overhead_s", "device": "gpu0"}),
    "inf memory": (lambda d: d["devices"][1].update(memory_bytes=float("inf")), {"field": "memory_bytes", "device": "gpu0"}),
    "huge memory": (lambda d: d["devices"][1].update(memory_bytes=10**400), {"field": "memory_bytes", "device": "gpu0"}),
    "memory above the limit": (lambda d: d["devices"][1].update(memory_bytes=2**60), {"field": "memory_bytes", "device": "gpu0"}),
    "huge peak": (lambda d: d["devices"][1].update(peak_flops=10**400), {"device": "gpu0"}),
    "inf peak": (lambda d: d["devices"][1]["peak_flops"].update(default=float("inf")), {"device": "gpu0"}),
    "fractional memory": (lambda d: d["devices"][1].update(memory_bytes=1000.5), {"field": "memory_bytes", "device": "gpu0"}),
    "bool memory": (lambda d: d["devices"][1].update(memory_bytes=True), {"field": "memory_bytes", "device": "gpu0"}),
    "bool bandwidth": (lambda d: d["links"][0].update(bandwidth_Bps=True), {"field": "bandwidth_Bps"}),
    "bool peak": (lambda d: d["devices"][1].update(peak_flops=True), {"device": "gpu0"}),
    "quoted number": (lambda d: d["links"][0].update(bandwidth_Bps="1e9"), {"field": "bandwidth_Bps"}),
    "fractional priority": (lambda d: d["support"]["gpu0"].update({"*": 1.5}), {"device": "gpu0", "field": "*"}),
    "duplicate link": (lambda d: d["links"].append(dict(d["links"][0])), {"field": "links", "device": "cpu0"}),
    "reversed duplicate link": (lambda d: d["links"].append(dict(d["links"][0], src="gpu0", dst="cpu0")), {"field": "links"}),
    "self link": (lambda d: d["links"].append(dict(d["links"][0], dst="cpu0")), {"field": "links"}),
    "devices: 5": (lambda d: d.update(devices=5), {"field": "devices"}),
    "devices as a map": (lambda d: d.update(devices={"gpu0": {}}), {"field": "devices"}),
    "links as a map": (lambda d: d.update(links={"a": 1}), {"field": "links"}),
    "host list": (lambda d: d.update(host=["cpu0"]), {"field": "host"}),
    "attrs list": (lambda d: d["devices"][1].update(attrs=[["model", "x"]]), {"field": "attrs", "device": "gpu0"}),
    "meta list": (lambda d: d.update(meta=["x"]), {"field": "meta"}),
    "link attrs list": (lambda d: d["links"][0].update(attrs=[1]), {"field": "attrs"}),
    "support row list": (lambda d: d["support"].update(gpu0=[1]), {"field": "support", "device": "gpu0"}),
    "device name int": (lambda d: d["devices"][1].update(name=7), {"field": "name"}),
    "kind list": (lambda d: d["devices"][1].update(kind=["gpu"]), {"field": "kind", "device": "gpu0"}),
    "deep meta": (lambda d: d.update(meta={"a": json.loads("[" * 60 + "]" * 60)}), {"field": "meta"}),
    "version true": (lambda d: d.update(version=True), {"field": "version"}),
}


@pytest.mark.parametrize("case", list(SYSTEM_CASES))
def test_system_yaml_defects_get_named_errors(case):
    mutate, culprit = SYSTEM_CASES[case]
    d = base_system()
    mutate(d)
    with pytest.raises((FormatError, SystemError_)) as e:
        system_from_dict(d)
    for k, v in culprit.items():
        assert getattr(e.value, k) == v, (k, getattr(e.value, k), str(e.value))


def test_system_yaml_reads_1e9_as_a_number_and_whole_floats_as_bytes(tmp_path):
    d = base_system()
    d["devices"][1]["memory_bytes"] = 8.0e10
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d).replace("bandwidth_Bps: 31500000000.0", "bandwidth_Bps: 3e9"))
    s = load_system(p)
    assert s.link("cpu0", "gpu0").bandwidth_Bps == 3e9
    assert s.device("gpu0").memory_bytes == 80_000_000_000 and isinstance(s.device("gpu0").memory_bytes, int)


GRAPH_HEAD = b'{"format": "hetsched.graph", "version": 1, '
RAW_ERROR_FILES = [
    ("g.json", GRAPH_HEAD + b'"meta": ' + b"[" * 3000 + b"]" * 3000 + b', "ops": [], "tensors": []}', "<json>"),
    ("g.json", GRAPH_HEAD + b'"ops": [], "tensors": [{"name": "t", "size_bytes": ' + b"9" * 5000 + b"}]}", "<json>"),
    ("g.json", GRAPH_HEAD + b'"ops": [{"name": "a", "op_type": "Relu", "flops": NaN}], "tensors": []}', "flops"),
    ("g.json", GRAPH_HEAD + b'"ops": [{"name": "a", "op_type": "Relu", "flops": 1e999}], "tensors": []}', "flops"),
    ("s.yaml", b"meta: " + b"[" * 3000 + b"]" * 3000 + b"\n", "<yaml>"),
    ("s.yaml", b"name: caf\xe9\n", "<encoding>"),
    ("s.yaml", b"devices: [{name: a, memory_bytes: " + b"9" * 5000 + b"}]\n", "<yaml>"),
    ("s.yaml", b"devices: [[1, 2]]\n", "name"),
]


@pytest.mark.parametrize("name,content,field", RAW_ERROR_FILES)
def test_files_that_used_to_raise_raw_errors(tmp_path, name, content, field):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(HetschedError) as e:
        (load_graph if name.endswith(".json") else load_system)(p)
    assert e.value.field == field


def test_system_path_that_is_a_directory(tmp_path):
    (tmp_path / "d.yaml").mkdir()
    with pytest.raises(FormatError, match="directory"):
        load_system(tmp_path / "d.yaml")


def test_yaml_alias_bomb_is_checked_in_linear_time(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]"
              for i in range(1, 9)]
    text = "meta:\n" + "\n".join("  " + ln for ln in lines) + "\ndevices: [{name: cpu0}]\n"
    p = tmp_path / "bomb.yaml"
    p.write_text(text)
    s = load_system(p)  # 9**9 leaves if expanded; the depth check visits each node once
    assert s.device_names == ["cpu0"]


# ---------------------------------------------------------------------------------- ONNX
onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the dev install and of CI")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hetsched.io.onnx import load_onnx  # noqa: E402


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _init(name, shape):
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


def _model(nodes, inputs, outputs, inits=()):
    return helper.make_model(helper.make_graph(nodes, "t", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", 17)])


def _set_attr(node, name, value):
    for a in node.attribute:
        if a.name == name:
            a.CopyFrom(helper.make_attribute(name, value))


def _lstm(op="LSTM", x_shape=(5, 1, 3), **attr_over):
    g = 4 if op == "LSTM" else 3
    n = helper.make_node(op, ["x", "W", "R"], ["y"], name="rnn", hidden_size=4, direction="forward")
    for k, v in attr_over.items():
        _set_attr(n, k, v)
    return _model([n], [_vi("x", list(x_shape))], [_vi("y", None)], [_init("W", [1, g * 4, 3]), _init("R", [1, g * 4, 4])])


ONNX_CASES = {
    "rank-0 Gemm input": (lambda: _model([helper.make_node("Gemm", ["a", "b"], ["y"], name="fc")], [_vi("a", []), _vi("b", [])],
                                          [_vi("y", [])]), {"op": "fc", "tensor": "a", "field": "shape"}),
    "rank-0 MatMul input": (lambda: _model([helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")],
                                           [_vi("a", []), _vi("b", [])], [_vi("y", [])]), {"op": "mm", "tensor": "a"}),
    "rank-2 LSTM input": (lambda: _lstm("LSTM", (5, 3)), {"op": "rnn", "tensor": "x", "field": "shape"}),
    "rank-2 GRU input": (lambda: _lstm("GRU", (5, 3)), {"op": "rnn", "tensor": "x", "field": "shape"}),
    "hidden_size as a string": (lambda: _lstm(hidden_size="four"), {"op": "rnn", "field": "hidden_size"}),
    "direction as an int": (lambda: _lstm(direction=3), {"op": "rnn", "field": "direction"}),
    "kernel_shape as a float": (lambda: _model([_with(helper.make_node("MaxPool", ["x"], ["y"], name="pool", kernel_shape=[2, 2]),
                                                      "kernel_shape", 2.5)], [_vi("x", [1, 1, 4, 4])], [_vi("y", None)]),
                                {"op": "pool", "field": "kernel_shape"}),
    "never-produced output": (lambda: _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", [2])],
                                             [_vi("y", None), _vi("ghost", [2])]), {"tensor": "ghost", "field": "output"}),
}


def _with(node, name, value):
    _set_attr(node, name, value)
    return node


@pytest.mark.parametrize("case", list(ONNX_CASES))
def test_onnx_defects_get_named_errors(case):
    build, culprit = ONNX_CASES[case]
    with pytest.raises(FormatError) as e:
        load_onnx(build())
    for k, v in culprit.items():
        assert getattr(e.value, k) == v, (k, getattr(e.value, k), str(e.value))


def test_onnx_gemm_with_a_string_typed_trans_attribute():
    n = helper.make_node("Gemm", ["a", "b"], ["y"], name="fc", transA=1)
    n.attribute[0].type = onnx.AttributeProto.STRING  # a corrupted file: the type says string, the value an int
    with pytest.raises(FormatError) as e:
        load_onnx(_model([n], [_vi("a", [3, 2]), _vi("b", [3, 4])], [_vi("y", None)]))
    assert (e.value.op, e.value.field) == ("fc", "transA")
    good = copy.deepcopy(n)
    good.attribute[0].type = onnx.AttributeProto.INT
    assert load_onnx(_model([good], [_vi("a", [3, 2]), _vi("b", [3, 4])], [_vi("y", None)])).op("fc").flops == 2 * 2 * 4 * 3


def test_the_byte_limit_keeps_peak_memory_positive():
    """Two 2**62-byte tensors gave a negative int64 peak; at the limit (two 2**52) the peak is exact."""
    from hetsched import memory

    def two_big(size):
        return graph_case(lambda d: [t.update(size_bytes=size) for t in d["tensors"][:2]] + [d["tensors"][2].update(size_bytes=0)])

    with pytest.raises(GraphError):
        graph_from_dict(two_big(2**62))
    g = graph_from_dict(two_big(2**52))
    r = memory.optimize_order(g, method="heuristic")
    assert r.metrics["peak_bytes"] == 2**53  # both live while op a runs
