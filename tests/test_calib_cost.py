"""Cost-model fixes of issue 19, checked by hand: views and eval dropout cost a launch, gathers pay
for the rows read, per-class efficiency (above 1 allowed), size-checked latency tables, the
calibrated (efficiency-curve) model and its cost file, and the default cost the CLI sets."""

from __future__ import annotations

import math
import warnings

import pytest

from hetsched import evaluate
from hetsched.cost import (CalibratedCost, EfficiencyCurve, RooflineCost, TableCost, cost_key, load_cost,
                           resolve_cost, save_cost)
from hetsched.errors import FormatError, HetschedError
from hetsched.graph import Op, OpGraph
from hetsched.io import zoo
from hetsched.system import Device, System

approx = lambda x: pytest.approx(x, rel=1e-9, abs=1e-15)  # noqa: E731


@pytest.fixture
def sys1():
    return System([Device("d", "cpu", {"default": 1e9}, mem_bandwidth_Bps=1e9, launch_overhead_s=1e-6)], name="one")


def _graph():
    g = OpGraph("g")
    g.add_op("mm", "MatMul", flops=2e6, weight_bytes=4000)
    g.add_op("view", "Reshape")
    g.add_op("perm", "Transpose")  # a torch permute: its output is an alias
    g.add_op("copyT", "Transpose")  # an ONNX transpose: a real copy
    g.add_op("drop", "Dropout")
    g.add_op("drop_t", "Dropout", attrs={"training": True})
    g.add_op("emb", "Gather", weight_bytes=100_000_000)
    g.add_tensor("x", 1000, consumers=["mm"])
    g.add_tensor("y", 2000, producer="mm", consumers=["view", "perm", "copyT"])
    g.add_tensor("v", 2000, producer="view", alias_of="y", consumers=["drop", "drop_t"])
    g.add_tensor("p", 2000, producer="perm", alias_of="y", is_output=True)
    g.add_tensor("c", 2000, producer="copyT", is_output=True)
    g.add_tensor("d", 2000, producer="drop", alias_of="v", is_output=True)
    g.add_tensor("dt", 2000, producer="drop_t", is_output=True)
    g.add_tensor("ids", 80, consumers=["emb"])
    g.add_tensor("rows", 4000, producer="emb", is_output=True)
    return g


def test_views_and_eval_dropout_cost_a_launch_only(sys1):
    c = RooflineCost(sys1, _graph())
    for op in ("view", "perm", "drop"):
        assert c.compute_s(op, "d") == approx(1e-6), op
    # a transpose that writes a new tensor moves 2000 in + 2000 out bytes at 1 GB/s
    assert c.compute_s("copyT", "d") == approx(1e-6 + 4000 / 1e9)
    # training dropout writes its output (and a mask): priced as a copy
    assert c.compute_s("drop_t", "d") == approx(1e-6 + 4000 / 1e9)


def test_gather_pays_for_rows_read_not_table(sys1):
    c = RooflineCost(sys1, _graph())
    # indices (80) + rows read (4000) + rows written (4000); the 100 MB table does not count
    assert c.traffic_bytes("emb") == (8080.0, False)
    assert c.compute_s("emb", "d") == approx(1e-6 + 8080 / 1e9)


def test_gather_on_activation_table(sys1):
    g = OpGraph()
    g.add_op("ga", "Gather")
    g.add_tensor("table", 10**6, consumers=["ga"])
    g.add_tensor("idx", 64, consumers=["ga"])
    g.add_tensor("out", 512, producer="ga", is_output=True)
    assert RooflineCost(sys1, g).traffic_bytes("ga") == (64 + 2 * 512, False)


def test_zoo_bert_embedding_priced_by_rows():
    s = System([Device("d", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)])
    g = zoo.bert_base(seq_len=64)
    op = g.op("embeddings.word")
    assert op.weight_bytes > 90e6  # the 94 MB table the issue names
    t = RooflineCost(s, g).compute_s(op, "d")
    assert t == approx((64 * 8 + 2 * 64 * 768 * 4) / 1e10)


def test_per_class_efficiency_may_exceed_one(sys1):
    g = OpGraph()
    g.add_op("conv", "Conv", flops=1e9)
    g.add_op("gemm", "Gemm", flops=1e9)
    g.add_op("relu", "Relu", flops=1e9)
    c = RooflineCost(sys1, g, efficiency={"Conv": 0.5, "matmul": 1.25, "default": 0.8})
    assert c.compute_s("conv", "d") == approx(1e-6 + 2.0)  # exact type
    assert c.compute_s("gemm", "d") == approx(1e-6 + 0.8)  # class: measured above the datasheet
    assert c.compute_s("relu", "d") == approx(1e-6 + 1.25)  # default
    for bad in (0, -1, float("nan"), float("inf"), {"conv": 0}):
        with pytest.raises(HetschedError) as e:
            RooflineCost(sys1, efficiency=bad)
        assert e.value.field == "efficiency"


def test_table_refuses_another_batch():
    s = System([Device("d", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)], name="s")
    g1, g8 = zoo.resnet50(batch=1, image_size=64), zoo.resnet50(batch=8, image_size=64)
    table = {(o, "d"): 1e-3 for o in g1.ops}
    tc = TableCost(s, table, g1)  # sizes recorded from the graph it was measured on
    assert evaluate(g1, s, {o: "d" for o in g1.ops}, cost=tc).metrics["makespan_s"] == approx(1e-3 * g1.n_ops)
    with pytest.raises(HetschedError) as e:
        evaluate(g8, s, {o: "d" for o in g8.ops}, cost=tc)
    assert e.value.op == "conv1" and e.value.field == "shape" and "another batch" in str(e.value)
    # documented fallback: warn once, price the mismatching ops by the roofline
    fb = TableCost(s, table, g1, on_mismatch="roofline")
    with pytest.warns(UserWarning, match="priced by the roofline"):
        m8 = evaluate(g8, s, {o: "d" for o in g8.ops}, cost=fb).metrics["makespan_s"]
    assert m8 == approx(evaluate(g8, s, {o: "d" for o in g8.ops}).metrics["makespan_s"])


def test_table_without_sizes_warns_once(tmp_path):
    s = System([Device("d", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)], name="s")
    g = zoo.resnet50(batch=1, image_size=64)
    p = tmp_path / "t.csv"
    p.write_text("op,device,latency_s\nconv1,d,0.5\nfc,d,0.25\n")
    tc = TableCost.from_csv(p, s)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        evaluate(g, s, {o: "d" for o in g.ops}, cost=tc)
        evaluate(g, s, {o: "d" for o in g.ops}, cost=tc)
    assert sum("no recorded size" in str(x.message) for x in w) == 1
    # with the size columns, another size is caught
    p.write_text("op,device,latency_s,flops,bytes\nconv1,d,0.5,1.0,2.0\n")
    with pytest.raises(HetschedError, match="conv1"):
        TableCost.from_csv(p, s).bind(g).compute_s("conv1", "d")
    p.write_text("op,device,latency_s,flops,bytes\nconv1,d,0.5,many,2.0\n")
    with pytest.raises(FormatError) as e:
        TableCost.from_csv(p, s)
    assert e.value.field == "flops"


def test_efficiency_curve_interpolates_in_log_work():
    c = EfficiencyCurve([1e-3, 1e-6, 1e-5], [0.9, 0.1, 0.3])  # unsorted input
    assert c.work_s == [1e-6, 1e-5, 1e-3]
    assert c(1e-6) == 0.1 and c(1e-3) == 0.9
    assert c(10 ** -5.5) == pytest.approx(0.2)  # halfway in log10
    assert c(1e-4) == pytest.approx(0.6)
    assert c(1e-9) == 0.1 and c(5.0) == 0.9  # flat outside
    with pytest.raises(FormatError):
        EfficiencyCurve([1e-6], [0.0])
    with pytest.raises(FormatError):
        EfficiencyCurve([], [])


def _calibrated(system):
    return CalibratedCost(system, {"d": {"peak_flops": 1e9, "mem_bandwidth_Bps": 1e9, "launch_overhead_s": 5e-6,
                                         "curves": {"MatMul": EfficiencyCurve([1e-4, 1e-2], [0.25, 0.5]),
                                                    "default": EfficiencyCurve([1e-6], [0.5])}}},
                          meta={"threads": 1})


def test_calibrated_cost_by_hand(sys1):
    g = _graph()
    c = _calibrated(sys1).bind(g)
    # mm: 2e6 flops / 1e9 = 2 ms of roofline work (bytes: 7000 / 1e9 = 7 us); curve at 2e-3
    e = 0.25 + 0.25 * (math.log10(2e-3) + 4) / 2  # linear in log10(work) between the knots 1e-4 and 1e-2
    assert c.compute_s("mm", "d") == pytest.approx(5e-6 + 2e-3 / e)
    assert c.compute_s("view", "d") == approx(5e-6)  # the calibrated launch, no work
    # copyT has no curve of its own: default curve, memory bound 4000 B at 1 GB/s, efficiency 0.5
    assert c.compute_s("copyT", "d") == approx(5e-6 + 4e-6 / 0.5)
    # a what-if copy of the device, twice the peak: compute-bound work halves
    fast = sys1.with_devices({"d": Device("d", "cpu", {"default": 2e9}, mem_bandwidth_Bps=1e9)})
    cf = resolve_cost(c, g, fast)
    assert cf.compute_s("mm", "d") == pytest.approx(5e-6 + 1e-3 / e)


def test_calibrated_cost_rejects_unknown_device(sys1):
    with pytest.raises(HetschedError) as e:
        CalibratedCost(sys1, {"gpu9": {"peak_flops": 1, "mem_bandwidth_Bps": 1, "curves": {}}})
    assert e.value.device == "gpu9"
    with pytest.raises(FormatError) as e:
        CalibratedCost(sys1, {"d": {"peak_flops": -1, "mem_bandwidth_Bps": 1, "curves": {}}})
    assert e.value.field == "peak_flops"


def test_cost_file_round_trip_and_errors(sys1, tmp_path):
    g = _graph()
    c = _calibrated(sys1)
    p = tmp_path / "cost.yaml"
    save_cost(c, p)
    back = load_cost(p, sys1).bind(g)
    assert isinstance(back, CalibratedCost) and back.meta == {"threads": 1}
    for op in g.ops:
        assert back.compute_s(op, "d") == approx(c.bind(g).compute_s(op, "d"))
    # a path is a cost model for every algorithm
    pl = {o: "d" for o in g.ops}
    assert evaluate(g, sys1, pl, cost=str(p)).metrics["makespan_s"] == approx(
        evaluate(g, sys1, pl, cost=c).metrics["makespan_s"])
    # table kind keeps the recorded sizes
    t = TableCost(sys1, {("mm", "d"): 1e-3}, g)
    save_cost(t, tmp_path / "t.yaml")
    t2 = load_cost(tmp_path / "t.yaml", sys1)
    assert t2.shapes["mm"] == t.shapes["mm"]
    other = System([Device("d", "cpu")], name="other")
    with pytest.raises(HetschedError) as e:
        load_cost(p, other)
    assert e.value.field == "system"
    assert isinstance(load_cost(p, other, any_system=True), CalibratedCost)
    bad = tmp_path / "bad.yaml"
    for text, field in [("format: nope\n", "format"), ("format: hetsched.cost\nversion: 9\n", "version"),
                        ("format: hetsched.cost\nversion: 1\nkind: magic\n", "kind"),
                        ("format: hetsched.cost\nversion: 1\nkind: calibrated\n", "devices"),
                        ("format: hetsched.cost\nversion: 1\nkind: calibrated\ndevices: {d: {peak_flops: 1, "
                         "mem_bandwidth_Bps: 1, curves: {Conv: {work_s: [1]}}}}\n", "curves"),
                        ("format: hetsched.cost\nversion: 1\nextra: 1\n", "extra"),
                        ("[1, 2\n", "<yaml>")]:
        bad.write_text(text)
        with pytest.raises(FormatError) as e:
            load_cost(bad, sys1)
        assert e.value.field == field, text
    with pytest.raises(FormatError) as e:
        load_cost(tmp_path / "missing.yaml", sys1)
    assert e.value.field == "path"


def test_a_cost_file_reaches_algorithms_explicitly(sys1, tmp_path):
    g = _graph()
    p = tmp_path / "cost.yaml"
    save_cost(_calibrated(sys1), p)
    pl = {o: "d" for o in g.ops}
    roof = evaluate(g, sys1, pl).metrics["makespan_s"]
    cal = evaluate(g, sys1, pl, cost=p).metrics["makespan_s"]
    assert cal != roof
    other = System([Device("d", "cpu")], name="other")
    with pytest.raises(HetschedError) as e:
        evaluate(g, other, pl, cost=p)  # the file was made for another system: said, not ignored
    assert e.value.field == "system"
    assert evaluate(g, sys1, pl).metrics["makespan_s"] == approx(roof)  # no default left behind
    assert cost_key(p) == cost_key(str(p)) == (str(p.resolve()), p.stat().st_mtime_ns)  # a file: by path and version
