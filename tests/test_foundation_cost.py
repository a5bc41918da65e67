"""Cost models checked by hand on a tiny example (roofline, transfers, residency, tables)."""

from __future__ import annotations

import pytest

from hetsched.cost import CostModel, RooflineCost, TableCost, resolve_cost
from hetsched.errors import FormatError, HetschedError, UnknownNameError
from hetsched.graph import Op, OpGraph
from hetsched.system import Device, Link, System, op_class

approx = lambda x: pytest.approx(x, rel=1e-12, abs=1e-18)  # noqa: E731


@pytest.fixture
def sg():
    devs = [
        Device("h", "cpu", {"default": 1e9}, mem_bandwidth_Bps=1e9),
        Device("a", "gpu", {"default": 1e12, "matmul": 4e12}, mem_bandwidth_Bps=1e9, launch_overhead_s=1e-6),
        Device("b", "fpga", {"default": 1e12, "Relu": 2e12}, mem_bandwidth_Bps=1e9),
    ]
    s = System(devs, [Link("h", "a", 1e6, 1e-3), Link("h", "b", 2e6, 2e-3)], host="h", name="tiny")
    g = OpGraph("tiny")
    g.add_op("mm", "MatMul", flops=8e9, weight_bytes=2000)
    g.add_op("r", "Relu", flops=1e3)
    g.add_tensor("x", 1000, consumers=["mm"])
    g.add_tensor("y", 3000, producer="mm", consumers=["r"])
    g.add_tensor("z", 5000, producer="r", is_output=True)
    return s, g


def test_protocol(sg):
    s, g = sg
    assert isinstance(RooflineCost(s), CostModel)
    assert isinstance(TableCost(s, {}), CostModel)


def test_roofline_compute_bound(sg):
    s, g = sg
    c = RooflineCost(s, g)
    # 8e9 flops / 4e12 (matmul class) = 2 ms >> 6000 bytes / 1e9 = 6 us; plus 1 us launch
    assert c.compute_s("mm", "a") == approx(2e-3 + 1e-6)
    assert c.io_bytes("mm") == (1000.0, 3000.0)
    half = RooflineCost(s, g, efficiency=0.5)
    assert half.compute_s("mm", "a") == approx(4e-3 + 1e-6)


def test_roofline_memory_bound(sg):
    s, g = sg
    c = RooflineCost(s, g)
    # 1e3 flops / 1e12 = 1 ns << (3000 + 5000) bytes / 1e9 = 8 us
    assert c.compute_s("r", "a") == approx(8e-6 + 1e-6)
    assert c.compute_s(g.op("r"), s.device("b")) == approx(8e-6)


def test_transfer_single_and_two_hops(sg):
    s, _ = sg
    c = RooflineCost(s)
    assert c.transfer_s(1000, "h", "a") == approx(1e-3 + 1e-3)
    # a -> h -> b: (1 ms + 1000/1e6) + (2 ms + 1000/2e6)
    assert c.transfer_s(1000, "a", "b") == approx(2e-3 + 2.5e-3)
    assert c.transfer_s(0, "a", "b") == 0.0
    assert c.transfer_s(1000, "a", "a") == 0.0


def test_residency_is_additive(sg):
    s, g = sg
    c = RooflineCost(s, g)
    base = c.compute_s("mm", "a")
    w = c.transfer_s(2000, "h", "a")
    i = c.transfer_s(1000, "h", "a")
    assert w == approx(3e-3) and i == approx(2e-3)
    assert c.compute_s("mm", "a", weights_resident=False) == approx(base + w)
    assert c.compute_s("mm", "a", inputs_resident=False) == approx(base + i)
    assert c.compute_s("mm", "a", weights_resident=False, inputs_resident=False) == approx(base + w + i)
    # on the host nothing has to move
    assert c.compute_s("mm", "h", weights_resident=False, inputs_resident=False) == approx(c.compute_s("mm", "h"))


def test_peak_lookup_order():
    d = Device("d", "gpu", {"MatMul": 5.0, "matmul": 4.0, "default": 1.0})
    assert d.peak_flops_for("MatMul") == 5.0  # exact type
    assert d.peak_flops_for("Gemm") == 4.0  # class
    assert d.peak_flops_for("Relu") == 1.0  # default
    assert Device("e", "gpu", {"conv": 3.0, "matmul": 7.0}).peak_flops_for("Relu") == 7.0  # max quoted
    assert [op_class(t) for t in ("Conv", "LSTM", "Add", "Softmax", "MatMulBackward", "Custom")] == [
        "conv", "matmul", "elementwise", "reduce", "matmul", "other"]


def test_unbound_model_with_op_name_names_the_op(sg):
    s, _ = sg
    with pytest.raises(HetschedError) as e:
        RooflineCost(s).compute_s("mm", "a")
    assert e.value.op == "mm"
    # an Op object works unbound: sizes come from attrs (input_bytes/output_bytes) or are 0
    op = Op("free", "Relu", flops=0.0, attrs={"input_bytes": 1000})
    assert RooflineCost(s).compute_s(op, "b") == approx(1000 / 1e9)
    with pytest.raises(HetschedError) as e:
        RooflineCost(s, efficiency=0)
    assert e.value.field == "efficiency"
    with pytest.raises(UnknownNameError) as e:
        RooflineCost(s).compute_s(op, "nope")
    assert e.value.device == "nope"


def test_bind_copies(sg):
    s, g = sg
    c = RooflineCost(s)
    b = c.bind(g)
    assert b is not c and b.graph is g and c.graph is None


def test_table_cost(sg, tmp_path):
    s, g = sg
    tc = TableCost(s, {("mm", "a"): 1e-3, ("MatMul", "a"): 9.0, ("Relu", "b"): 2e-6}, g)
    assert tc.compute_s("mm", "a") == 1e-3  # op name beats op type
    assert tc.compute_s("r", "b") == 2e-6
    assert tc.compute_s("r", "a") == approx(RooflineCost(s, g).compute_s("r", "a"))  # fallback
    # residency still adds the host streaming
    assert tc.compute_s("mm", "a", weights_resident=False) == approx(1e-3 + 3e-3)
    p = tmp_path / "lat.csv"
    p.write_text("op,device,latency_s\nmm,a,0.5\nRelu,b,0.25\n")
    t2 = TableCost.from_csv(p, s).bind(g)
    assert t2.compute_s("mm", "a") == 0.5 and t2.compute_s("r", "b") == 0.25


def test_table_cost_errors(sg, tmp_path):
    s, _ = sg
    with pytest.raises(FormatError) as e:
        TableCost(s, {("mm", "a"): -1.0})
    assert (e.value.op, e.value.device) == ("mm", "a")
    with pytest.raises(UnknownNameError) as e:
        TableCost(s, {("mm", "zz"): 1.0})
    assert e.value.device == "zz"
    bad = tmp_path / "bad.csv"
    bad.write_text("op,dev,latency\nmm,a,1\n")
    with pytest.raises(FormatError) as e:
        TableCost.from_csv(bad, s)
    assert e.value.field == "columns"
    nan = tmp_path / "nan.csv"
    nan.write_text("op,device,latency_s\nmm,a,fast\n")
    with pytest.raises(FormatError) as e:
        TableCost.from_csv(nan, s)
    assert e.value.field == "latency_s"


def test_resolve_cost(sg):
    s, g = sg
    c = resolve_cost(None, g, s)
    assert isinstance(c, RooflineCost) and c.graph is g and c.system is s
    bound = RooflineCost(s, g)
    assert resolve_cost(bound, g, s) is bound
    other = System([Device("h", "cpu")], name="other")
    with pytest.raises(HetschedError) as e:
        resolve_cost(bound, g, other)
    assert e.value.field == "cost"
    # a what-if copy of the same system is priced with ITS devices
    faster = s.with_devices({"a": Device("a", "gpu", {"default": 2e12, "matmul": 8e12}, mem_bandwidth_Bps=1e9,
                                         launch_overhead_s=1e-6)})
    r = resolve_cost(bound, g, faster)
    assert r.system is faster and r.compute_s("mm", "a") == approx(1e-3 + 1e-6)


def test_each_op_device_pair_is_priced_once_and_a_new_op_of_the_same_name_afresh(monkeypatch):
    """A cost model shared by several algorithms (the Mapping panel's comparison) works out an op's
    price on a device once; an op given under a name already priced, but with other numbers, is not
    served the old price."""
    from hetsched.cost import RooflineCost
    from hetsched.graph import Op
    from hetsched.io.generators import chain
    from hetsched.io.systems import toy_system

    g, s = chain(4), toy_system()
    c = RooflineCost(s, g)
    calls = []
    real = RooflineCost._resident_s
    monkeypatch.setattr(RooflineCost, "_resident_s", lambda self, o, d: calls.append((o.name, d.name)) or real(self, o, d))
    dev = s.compute_devices[0]
    first = [c.compute_s(o, dev) for o in g.ops]
    again = [c.compute_s(o, dev, weights_resident=False) for o in g.ops]
    assert len(calls) == g.n_ops and all(b >= a for a, b in zip(first, again))
    op = next(iter(g.ops))
    small, big = Op(op, "Conv", flops=1e9), Op(op, "Conv", flops=4e9)
    assert c.compute_s(big, dev) > c.compute_s(small, dev)
    assert c.compute_s(small, dev) == real(c, small, s.device(dev))
    # an unbound model priced with look-alike ops: the traffic and I/O are worked out per op too
    u = RooflineCost(s)
    light, heavy = Op("x", "Relu", weight_bytes=10), Op("x", "Relu", weight_bytes=10**9)
    assert u.compute_s(light, dev) < u.compute_s(heavy, dev) == RooflineCost(s).compute_s(heavy, dev)
    assert u.traffic_bytes(heavy) == RooflineCost(s).traffic_bytes(heavy)


def test_a_graph_edited_in_place_is_priced_afresh():
    """set_tensor keeps every Op object; the bound model must still see the new sizes (graph.version)."""
    from hetsched.cost import CalibratedCost, RooflineCost
    from hetsched.graph import OpGraph
    from hetsched.io.systems import toy_system

    g = OpGraph()
    g.add_op("r", "Relu")
    g.add_tensor("x", 10**6, consumers=["r"])
    g.add_tensor("y", 10**6, producer="r", is_output=True)
    s = toy_system()
    for c in (RooflineCost(s, g), CalibratedCost(s, {}).bind(g)):
        before = c.compute_s("r", "gpu0")
        v = g.version
        g.set_tensor("x", size_bytes=10**9)
        assert g.version > v
        fresh = type(c)(s, g) if type(c) is RooflineCost else CalibratedCost(s, {}).bind(g)
        assert c.compute_s("r", "gpu0") == fresh.compute_s("r", "gpu0") > before
        assert c.io_bytes("r") == (10**9, 10**6)
        g.set_tensor("x", size_bytes=10**6)
