"""Malformed cost files, profiler traces, measurement folders, ONNX files and names (the fz sweep).

Each case is one way a file was found to crash a loader with a raw Python exception (or to load
into a wrong answer); each must now be a ``FormatError`` naming the culprit (file, device, op, field),
plus a few hypothesis runs over mutated cost files and traces.
"""

from __future__ import annotations

import copy
import gzip
import json
import shutil

import pytest
import yaml
from hypothesis import HealthCheck, given, settings

from fuzzing import accepted, mutated, names_culprit
from hetsched.cost import CalibratedCost, EfficiencyCurve, TableCost, load_cost, save_cost
from hetsched.errors import FormatError, HetschedError
from hetsched.evaluate import evaluate
from hetsched.graph import Op
from hetsched.io.generators import chain
from hetsched.io.graph_json import graph_from_dict
from hetsched.io.profile import load_profile
from hetsched.io.systems import system_from_yaml, toy_system

S = toy_system()
HDR = "format: hetsched.cost\nversion: 1\nsystem: toy\n"
CAL = HDR + "kind: calibrated\ndevices:\n  cpu0:\n    peak_flops: 1.0e+12\n    mem_bandwidth_Bps: 1.0e+11\n"
TBL = HDR + "kind: table\nentries:\n"


def raises(fn, *, field=None, **culprit) -> FormatError:
    """``fn()`` raises a FormatError with ``field`` (and other culprit attributes) as given."""
    with pytest.raises(FormatError) as info:
        fn()
    e = info.value
    assert names_culprit(e), e
    if field is not None:
        assert e.field == field, (e.field, str(e))
    for k, v in culprit.items():
        assert getattr(e, k) == v, (k, getattr(e, k), str(e))
    return e


def cost_file(tmp_path, text, name="c.yaml"):
    p = tmp_path / name
    p.write_bytes(text) if isinstance(text, bytes) else p.write_text(text)
    return p


# ------------------------------------------------------------------------------------------ A
def test_a1_a2_a3_unreadable_cost_paths(tmp_path):
    for name in ("adir.yaml", "adir.csv"):
        (tmp_path / name).mkdir()
        e = raises(lambda: load_cost(tmp_path / name, S), field="path")
        assert "is a directory" in str(e)
    for name, data in (("bin.yaml", b"\xff\xfe\x00garbage"), ("bin.csv", b"op,device,latency_s\n\xff\xfe,cpu0,1\n")):
        e = raises(lambda: load_cost(cost_file(tmp_path, data, name), S), field="<encoding>")
        assert name in str(e)
    raises(lambda: load_cost(5, S), field="path")


def test_a4_huge_integer_literal(tmp_path):
    p = cost_file(tmp_path, TBL.replace("entries:\n", "entries: []\n") + "meta: {x: " + "9" * 5000 + "}\n")
    e = raises(lambda: load_cost(p, S), field="<yaml>")
    assert "c.yaml" in str(e) and "4300 digits" in str(e)


@pytest.mark.parametrize("text, field", [
    ("    curves: [1, 2]\n", "curves"),
    ("    curves: abc\n", "curves"),
    ("    cold_curves: [1]\n", "cold_curves"),
    ("    layers: [1, 2]\n", "layers"),
    ("    curves:\n      Conv: {work_s: 5, efficiency: 0.5}\n", "curves"),
    ("    curves:\n      Conv: {work_s: [abc], efficiency: [0.5]}\n", "curves"),
    ("    curves:\n      Conv: {work_s: [[1.0e-3]], efficiency: [0.5]}\n", "curves"),
    ("    curves:\n      Conv: {work_s: {a: 1}, efficiency: {b: 2}}\n", "curves"),
    ("    curves:\n      Conv: {work_s: [1.0e-3], efficiency: [0.5], colour: red}\n", "curves"),
    ("    curves:\n      Conv: {work_s: [1.0e-3], efficiency: [0.5], n_points: many}\n", "curves"),
    ("    curves:\n      Conv: {work_s: [1.0e-3], efficiency: [0.5], n_points: .inf}\n", "curves"),
    ("    curves:\n      Conv: {work_s: [1.0e-3, 2.0e-3], efficiency: [0.5]}\n", "curves"),
    ("    cold_curves:\n      Conv: {work_s: [" + "9" * 400 + "], efficiency: [0.5]}\n", "cold_curves"),
    ("    layers:\n      m: {op1: {op_type: Conv, weight_bytes: .inf, factor: 1.0}}\n", "weight_bytes"),
    ("    layers:\n      m: {op1: [1, 2]}\n", "layers"),
    ("    residuals:\n      conv: {lo: 0.9, hi: 1.1, n: .inf}\n", "n"),
    ("    residuals:\n      conv: abc\n", "residuals"),
    ("    peak_flops_x: 1\n    launch_overhead_s: " + "9" * 400 + "\n", "launch_overhead_s"),
])
def test_a5_to_a12_a21_calibrated_device_fields(tmp_path, text, field):
    """A5-A12, A21: every bad curve/layer/residual names the file and the device (and the curve key)."""
    e = raises(lambda: load_cost(cost_file(tmp_path, CAL + text), S), field=field, device="cpu0")
    assert str(e).startswith("c.yaml: device 'cpu0'"), str(e)
    if "Conv:" in text:
        assert "curves.Conv" in str(e)


def test_a13_meta_must_be_a_mapping(tmp_path):
    for meta in ("[1, 2, 3]", "hello"):
        raises(lambda: load_cost(cost_file(tmp_path, CAL + f"meta: {meta}\n"), S), field="meta")
    raises(lambda: CalibratedCost(S, {}, meta=[1, 2]), field="meta")


def test_a14_unknown_top_level_keys_of_mixed_types(tmp_path):
    e = raises(lambda: load_cost(cost_file(tmp_path, CAL + "1: 2\nnull: 3\n"), S))
    assert "unknown field" in str(e)


@pytest.mark.parametrize("latency", ["9" * 400, ".inf", "-1.0", ".nan", "true", "'1e-3'"])
def test_a15_a18_a19_table_latencies(tmp_path, latency):
    p = cost_file(tmp_path, TBL + f"  - {{op: op0, device: cpu0, latency_s: {latency}}}\n")
    e = raises(lambda: load_cost(p, S), field="latency_s", op="op0")
    assert "entries[0]" in str(e)


def test_a16_a17_a18_csv_tables(tmp_path):
    e = raises(lambda: load_cost(cost_file(tmp_path, "op,device,latency_s\nop0,cpu0\n", "short.csv"), S),
               field="latency_s")
    assert "short.csv:2: latency_s missing" in str(e)
    e = raises(lambda: load_cost(cost_file(tmp_path, "op,device,latency_s\n" + "a" * 200000 + ",cpu0,1\n",
                                           "huge.csv"), S), field="<csv>")
    assert "huge.csv" in str(e)
    for v in ("inf", "-1", "nan"):
        e = raises(lambda: load_cost(cost_file(tmp_path, f"op,device,latency_s\nop0,cpu0,{v}\n", "x.csv"), S),
                   field="latency_s", op="op0")
        assert "x.csv:2" in str(e)
    raises(lambda: TableCost(S, {("op0", "cpu0"): float("inf")}), field="latency_s", op="op0", device="cpu0")
    raises(lambda: TableCost(S, {("op0", "cpu0"): True}), field="latency_s")


def test_a18_no_infinite_makespan_through_the_api(tmp_path):
    """The API path used to return makespan_s = inf; the file is now refused when loaded."""
    p = cost_file(tmp_path, TBL + "  - {op: Relu, device: cpu0, latency_s: .inf}\n")
    raises(lambda: evaluate(chain(3), S, {o: "cpu0" for o in chain(3)}, cost=load_cost(p, S)), field="latency_s")


def test_a19_version_must_be_the_integer_one(tmp_path):
    for v in ("true", "1.0", "'1'"):
        text = TBL.replace("version: 1", f"version: {v}").replace("entries:\n", "entries: []\n")
        raises(lambda: load_cost(cost_file(tmp_path, text), S), field="version")


def test_a20_numbers_parse_as_the_system_loader_reads_them(tmp_path):
    text = CAL.replace("1.0e+12", "1.0e12").replace("1.0e+11", "1e11")
    c = load_cost(cost_file(tmp_path, text), S)
    assert c.devices["cpu0"]["peak_flops"] == 1e12 and c.devices["cpu0"]["mem_bandwidth_Bps"] == 1e11


def test_a21_curve_errors_name_the_curve_and_api_objects_still_work():
    with pytest.raises(FormatError, match=r"got 2 and 1"):
        EfficiencyCurve([1e-3, 2e-3], [0.5])
    import numpy as np

    c = EfficiencyCurve(np.array([1e-6, 1e-3]), np.array([0.1, 0.5], dtype=np.float32), n_points=np.int64(7))
    assert c.n_points == 7 and c.work_s == [1e-6, 1e-3]


def test_valid_cost_files_still_round_trip(tmp_path):
    s = S
    cal = CalibratedCost(s, {"cpu0": {"peak_flops": 1e12, "mem_bandwidth_Bps": 1e11, "threads": 2,
                                      "curves": {"conv": {"work_s": [1e-6, 1e-3], "efficiency": [0.1, 0.5],
                                                          "n_points": 4}},
                                      "layers": {"m": {"a": {"op_type": "Conv", "weight_bytes": 8, "factor": 1.5}}},
                                      "residuals": {"all": {"lo": 0.9, "hi": 1.1, "n": 3}}}}, meta={"x": 1})
    p = tmp_path / "c.yaml"
    save_cost(cal, p)
    back = load_cost(p, s)
    assert back.devices["cpu0"]["curves"]["conv"].to_dict() == cal.devices["cpu0"]["curves"]["conv"].to_dict()
    assert back.devices["cpu0"]["layers"] == {"m": {"a": ("Conv", 8, 1.5)}} and back.meta == {"x": 1}
    tbl = TableCost(s, {("op0", "cpu0"): 1e-3, ("Relu", "gpu0"): 0.0}, shapes={"op0": (10, 20)})
    save_cost(tbl, p)
    assert load_cost(p, s).table == tbl.table and load_cost(p, s).shapes == {"op0": (10.0, 20.0)}
    csv = cost_file(tmp_path, "op,device,latency_s,flops,bytes\nop0,cpu0,1e-3,,\nop1,cpu0,2e-3,5,6\n", "t.csv")
    t = load_cost(csv, s)
    assert t.table == {("op0", "cpu0"): 1e-3, ("op1", "cpu0"): 2e-3} and t.shapes == {"op1": (5.0, 6.0)}


_BASE_COST = yaml.safe_load(CAL + "    launch_overhead_s: 2.0e-06\n    curves:\n"
                            "      conv: {work_s: [1.0e-06, 0.001], efficiency: [0.1, 0.5], n_points: 4}\n"
                            "    layers:\n      m: {a: {op_type: Conv, weight_bytes: 8, factor: 1.5}}\n"
                            "    residuals:\n      all: {lo: 0.9, hi: 1.1, n: 3}\n")


@settings(max_examples=120, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mutated(_BASE_COST))
def test_mutated_cost_files(tmp_path, doc):
    """Any mutation of a valid cost file loads, or is a HetschedError naming its culprit."""
    p = tmp_path / "m.yaml"
    try:
        p.write_text(yaml.safe_dump(doc))
    except (yaml.YAMLError, ValueError, RecursionError):
        return  # not writable as YAML: nothing to read back
    c = accepted(load_cost, p, S)
    if c is not None:
        g = chain(3)
        accepted(lambda: evaluate(g, S, {o: "cpu0" for o in g}, cost=c))


# ------------------------------------------------------------------------------------------ B
@pytest.mark.parametrize("threads", ["two", "[1]", "2.5", "0", "-3", "true"])
def test_b_device_threads_attr(threads):
    e = raises(lambda: system_from_yaml(f"name: s\ndevices: [{{name: cpu0, attrs: {{threads: {threads}}}}}]\n"),
               field="threads", device="cpu0")
    assert "attrs.threads" in str(e)


def test_b_threads_attr_of_a_system_built_in_code():
    from hetsched.system import Device, System

    s = System([Device("cpu0", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10, attrs={"threads": "two"})])
    c = CalibratedCost(s, {"cpu0": {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10, "threads": 2}})
    raises(lambda: c.compute_s(Op("r", "Relu", flops=10), "cpu0"), field="threads", device="cpu0")


# ------------------------------------------------------------------------------------------ C
def _ev(**k):
    return {"ph": "X", "ts": 0, "dur": 10, "pid": 0, "tid": 0, **k}


G3 = chain(3)


@pytest.mark.parametrize("event, field", [
    (_ev(name="op0", cat="user_annotation", dur="10"), "dur"),
    (_ev(name="op0", cat="user_annotation", dur=None), "dur"),
    ({"ph": "X", "ts": 0, "dur": 1, "cat": "cpu_op"}, "name"),
    (_ev(name=5, cat="cpu_op"), "name"),
    (_ev(name="aten::relu", cat="cpu_op", dur="x"), "dur"),
    ({"ph": "X", "ts": 0, "name": "aten::relu", "cat": "cpu_op"}, "dur"),
    (_ev(name="op0", cat="user_annotation", ts=float("nan")), "ts"),
    (_ev(name="op0", cat="user_annotation", ts=True), "ts"),
    (_ev(name="op0", cat="user_annotation", ts=10**400), "ts"),
    (_ev(name="op0", cat="user_annotation", dur=-100), "dur"),
    (_ev(name="op0", cat="user_annotation", dur=float("inf")), "dur"),
    (_ev(name="op0", cat="user_annotation", args=[1]), "args"),
    ({"ph": "i", "ts": 1, "name": "[memory]", "args": {"Total Allocated": "lots", "Bytes": 1}}, "Total Allocated"),
    ({"ph": "i", "name": "[memory]", "args": {"Total Allocated": 5}}, "ts"),
    (_ev(name="k", cat="kernel", dur="x", args={"correlation": 1}), "dur"),
    (_ev(name="k", cat="kernel", args={"correlation": [1]}), "correlation"),
    (_ev(name="ProfilerStep#1", cat="user_annotation", dur="x"), "dur"),
])
def test_c_bad_trace_events(tmp_path, event, field):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [_ev(name="op1", cat="user_annotation"), event]}))
    e = raises(lambda: load_profile(p, G3), field=field)
    assert str(e).startswith("t.json: traceEvents[1]") and e.details["event"] == 1, str(e)


def test_c_own_trace_and_bad_arguments(tmp_path):
    doc = {"otherData": {"generator": "hetsched"}, "traceEvents": [_ev(name="op0", cat="compute", args=[1])]}
    raises(lambda: load_profile(doc, G3), field="args")
    doc["traceEvents"] = [_ev(name="op0", cat="compute", args={"op": ["op0"]})]
    raises(lambda: load_profile(doc, G3), field="op")
    raises(lambda: load_profile(5, G3), field="path")
    raises(lambda: load_profile({"traceEvents": []}, G3, order=5), field="order")
    raises(lambda: load_profile({"traceEvents": []}, G3, order=[["op0"]]), field="order")


def test_c_unreadable_trace_files(tmp_path):
    good = gzip.compress(json.dumps({"traceEvents": [_ev(name="op0", cat="user_annotation")]}).encode())
    (tmp_path / "trunc.json.gz").write_bytes(good[: len(good) // 2])
    (tmp_path / "notgz.json.gz").write_bytes(b'{"traceEvents": []}')
    (tmp_path / "deep.json").write_text("[" * 100000 + "]" * 100000)
    (tmp_path / "dir.json").mkdir()
    for name in ("trunc.json.gz", "notgz.json.gz", "deep.json", "dir.json"):
        e = raises(lambda: load_profile(tmp_path / name, G3))
        assert name in str(e)


def test_c_valid_trace_still_loads():
    doc = {"traceEvents": [_ev(name="op0", cat="user_annotation", ts=0, dur=10),
                           _ev(name="aten::relu", cat="cpu_op", ts=1, dur=4),
                           {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "x"}}]}
    p = load_profile(doc, G3)
    assert p.latency_s == {"op0": pytest.approx(4e-6)}


@settings(max_examples=80)
@given(mutated({"traceEvents": [_ev(name="op0", cat="user_annotation"), _ev(name="aten::relu", cat="cpu_op", ts=1, dur=4),
                                _ev(name="aten::add", cat="cpu_op", ts=20, dur=3),
                                {"ph": "i", "ts": 2, "name": "[memory]", "args": {"Total Allocated": 8, "Bytes": 8}}]}))
def test_mutated_traces(doc):
    p = accepted(load_profile, doc, G3)
    if p is not None:
        assert all(t >= 0 and t < float("inf") for t in p.latency_s.values())


# ------------------------------------------------------------------------------------------ D
@pytest.fixture
def measurement(tmp_path):
    from hetsched.io.measured import bundled_measurement_dir

    d = tmp_path / "m"
    shutil.copytree(bundled_measurement_dir(), d)
    return d


def _stem(d):
    return next(d.glob("*.graph.json.gz")).name[: -len(".graph.json.gz")]


@pytest.mark.parametrize("damage, name", [
    (lambda d: (d / "meta.json").write_text("{bad"), "meta.json"),
    (lambda d: (d / "meta.json").write_text("[1]"), "meta.json"),
    (lambda d: (d / "meta.json").write_text('{"runs": [1]}'), "meta.json"),
    (lambda d: (d / "meta.json").write_text('{"workloads": [[1]]}'), "meta.json"),
    (lambda d: (d / f"{_stem(d)}.graph.json.gz").write_bytes(b"{}"), ".graph.json.gz"),
    (lambda d: (d / f"{_stem(d)}.graph.json.gz").write_bytes(
        (d / f"{_stem(d)}.graph.json.gz").read_bytes()[:100]), ".graph.json.gz"),
    (lambda d: (d / f"{_stem(d)}.trace.json.gz").unlink(), ".trace.json.gz"),
    (lambda d: (d / f"{_stem(d)}.trace.json.gz").write_bytes(gzip.compress(b"{bad")), ".trace.json.gz"),
    (lambda d: (d / "points.csv.gz").write_bytes(b"garbage"), "points.csv.gz"),
    (lambda d: (d / "points.csv.gz").write_bytes(gzip.compress(b"")), "points.csv.gz"),
    (lambda d: (d / "x.graph.json.gz").mkdir(), "x.graph.json.gz"),
])
def test_d_damaged_measurement_folders(measurement, damage, name):
    from hetsched.io.measured import load_measurement

    damage(measurement)
    e = raises(lambda: load_measurement(measurement))
    assert name in str(e), str(e)


def test_d_bad_argument():
    from hetsched.io.measured import load_measurement

    raises(lambda: load_measurement(5), field="path")


# ------------------------------------------------------------------------------------------ E
def test_e_onnx_files_and_arguments(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from hetsched.io.onnx import load_onnx

    (tmp_path / "zero.onnx").write_bytes(b"")
    e = raises(lambda: load_onnx(tmp_path / "zero.onnx"), field="<onnx>")
    assert "zero.onnx" in str(e) and "empty" in str(e)
    raises(lambda: load_onnx(onnx.ModelProto()), field="<onnx>")
    raises(lambda: load_onnx(5), field="path")
    raises(lambda: load_onnx(None), field="path")

    def model(shape):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        return helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))

    e = raises(lambda: load_onnx(model(["n", 4]), dims={"n": 10**30}), field="n")
    assert "limit" in str(e)
    for bad in (-1, 0):
        e = raises(lambda: load_onnx(model([bad, 4])), field="axis0", tensor="x")
        assert f"has dim {bad} at axis 0" in str(e) and "symbolic" not in str(e)
    assert load_onnx(model(["n", 4]), dims={"n": 2}).tensor("y").size_bytes == 32


# ------------------------------------------------------------------------------------------ F
def test_f_lone_surrogates_in_graph_json_and_system_yaml(tmp_path):
    from hetsched.io.graph_json import load_graph_json
    from hetsched.io.systems import load_system

    base = {"format": "hetsched.graph", "version": 1, "name": "g",
            "ops": [{"name": "a", "op_type": "Relu"}, {"name": "b", "op_type": "Relu"}],
            "tensors": [{"name": "t", "size_bytes": 4, "producer": "a", "consumers": ["b"]}]}
    for path, field in ((("ops", 0, "name"), "ops[0].name"), (("ops", 1, "op_type"), "op_type"),
                        (("tensors", 0, "name"), "tensors[0].name"), (("name",), "name")):
        d = copy.deepcopy(base)
        node = d
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = "\ud800a"
        p = tmp_path / "g.json"
        p.write_text(json.dumps(d))  # ensure_ascii: the file holds the escape "\ud800"
        e = raises(lambda: load_graph_json(p), field=field)
        assert "not valid Unicode" in str(e)
    d = copy.deepcopy(base)
    d["tensors"][0]["consumers"] = ["\ud800"]
    raises(lambda: graph_from_dict(d), field="consumers", tensor="t")
    p = tmp_path / "s.yaml"
    p.write_text('devices: [{name: "\\ud800x"}]\n')
    raises(lambda: load_system(p), field="name")
    p.write_text('devices: [{name: a, kind: "\\udfffk"}]\n')
    raises(lambda: load_system(p), field="kind", device="a")


# ------------------------------------------------------------------------------------------ G
def test_g_cli_cost_errors_and_output_checks(tmp_path, capsys, monkeypatch):
    from hetsched.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "adir").mkdir()
    (tmp_path / "c.yaml").write_text(CAL + "    curves: [1, 2]\n")
    (tmp_path / "short.csv").write_text("op,device,latency_s\nop0,cpu0\n")
    for argv, needle in (
        (["--cost", "c.yaml", "map", "chain", "--system", "toy"], "curves must be a mapping"),
        (["--cost", "short.csv", "map", "chain", "--system", "toy"], "latency_s missing"),
        (["--cost", "adir", "map", "chain", "--system", "toy"], "is a directory"),
        # checked before measuring: the run would otherwise take minutes first
        (["calibrate", "--system-out", "adir"], "--system-out: 'adir' is a directory"),
        (["calibrate", "--cost-out", str(tmp_path / "no" / "c.yaml")], "--cost-out: folder"),
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("hetsched: error: ") and needle in err and "internal error" not in err, err
    for port in ("99999", "0", "65536"):
        assert main(["app", "--dry-run", "--port", port]) == 2
        assert "1..65535" in capsys.readouterr().err
    assert main(["app", "--dry-run", "--port", "65535"]) == 0
    assert "--port=65535" in capsys.readouterr().out
