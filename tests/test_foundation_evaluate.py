"""`evaluate` on hand-made 1-4 op graphs, every number worked out by hand.

The hand system: host ``h`` and devices ``a``, ``b``. Links move 1e6 B/s with no latency, so a
1000-byte tensor takes exactly 1 ms per hop; device ``a`` and ``b`` run 1e12 FLOP/s and have
memory bandwidth so high (1e15 B/s) that every op here is compute-bound: an op of ``k * 1e9`` flops
takes ``k`` ms. Nothing is launched with overhead.
"""

from __future__ import annotations

import pytest

from hetsched.errors import CapacityError, GraphError, HetschedError, UnknownNameError, UnsupportedOpError
from hetsched.evaluate import Placement, evaluate, resident_weight_bytes
from hetsched.graph import OpGraph
from hetsched.system import Device, Link, SupportTable, System
from hetsched.timeline import check_timeline

MS = 1e-3
approx = lambda x: pytest.approx(x, rel=1e-9, abs=1e-15)  # noqa: E731


def hand_system(*, mem_a=10**9, mem_b=10**9, topology="star", support=None, duplex=True):
    devs = [
        Device("h", "cpu", {"default": 1e9}, memory_bytes=10**12, mem_bandwidth_Bps=1e15, power_W=100, idle_power_W=10),
        Device("a", "gpu", {"default": 1e12}, memory_bytes=mem_a, mem_bandwidth_Bps=1e15, power_W=200, idle_power_W=20),
        Device("b", "fpga", {"default": 1e12}, memory_bytes=mem_b, mem_bandwidth_Bps=1e15, power_W=50, idle_power_W=5),
    ]
    if topology == "star":  # a <-> b goes through the host
        links = [Link("h", "a", 1e6, duplex=duplex), Link("h", "b", 1e6, duplex=duplex)]
    elif topology == "line":  # h - a - b: h <-> b goes through a
        links = [Link("h", "a", 1e6), Link("a", "b", 1e6)]
    else:
        raise ValueError(topology)
    sup = support or SupportTable({"a": {"*": 1}, "b": {"*": 1}, "h": {"*": 2}})
    return System(devs, links, host="h", support=sup, name="hand")


def one_op(weight_bytes=0):
    g = OpGraph("one")
    g.add_op("m", "MatMul", flops=2e9, weight_bytes=weight_bytes)
    g.add_tensor("x", 1000, consumers=["m"])
    g.add_tensor("y", 1000, producer="m", is_output=True)
    return g


def two_chain():
    g = OpGraph("two")
    g.add_op("m1", "MatMul", flops=2e9)
    g.add_op("m2", "Relu", flops=1e9)
    g.add_tensor("x", 1000, consumers=["m1"])
    g.add_tensor("t", 1000, producer="m1", consumers=["m2"])
    g.add_tensor("y", 1000, producer="m2", is_output=True)
    return g


def rows(ev, kind):
    tl = ev.timeline
    return tl[tl["kind"] == kind].reset_index(drop=True)


def check(ev, g, s):
    check_timeline(ev.timeline, g, capacity_bytes={d: dv.memory_bytes for d, dv in s.devices.items() if d != s.host})


# ------------------------------------------------------------------ basic numbers


def test_single_op_in_compute_out():
    g, s = one_op(), hand_system()
    ev = evaluate(g, s, {"m": "a"})
    m = ev.metrics
    # 1 ms in (h->a), 2 ms compute, 1 ms write-back (a->h)
    assert m["makespan_s"] == approx(4 * MS)
    assert ev.op_start_s["m"] == approx(1 * MS) and ev.op_end_s["m"] == approx(3 * MS)
    # device a is busy computing 2 ms and moving its own data 2 ms; the host does nothing
    assert m["total_latency_s"] == approx(4 * MS)
    assert m["bytes_moved"] == 2000 and m["n_transfers"] == 2
    tr = rows(ev, "transfer")
    assert tr["lane"].tolist() == ["h->a", "a->h"]
    assert tr["start_s"].tolist() == [approx(0), approx(3 * MS)]
    pd_ = ev.per_device.set_index("device")
    assert pd_.loc["a", "compute_s"] == approx(2 * MS) and pd_.loc["a", "transfer_s"] == approx(2 * MS)
    assert pd_.loc["h", "busy_s"] == 0 and pd_.loc["b", "n_ops"] == 0
    # energy: a busy 2 ms at 200 W + idle 2 ms at 20 W; h and b idle 4 ms at 10 W and 5 W
    assert m["energy_J"] == approx(2 * MS * 200 + 2 * MS * 20 + 4 * MS * 10 + 4 * MS * 5)
    # memory on a: input [0, 3 ms], output [1 ms, 4 ms] -> 2000 B peak; nothing tracked on the host
    assert pd_.loc["a", "peak_mem_bytes"] == 2000
    assert m["peak_mem_frac"] == approx(2000 / 10**9)
    assert (ev.timeline.loc[ev.timeline["kind"] == "alloc", "device"] != "h").all()
    check(ev, g, s)


def test_makespan_is_last_row_end():
    g, s = two_chain(), hand_system()
    ev = evaluate(g, s, {"m1": "a", "m2": "b"})
    assert ev.metrics["makespan_s"] == approx(ev.timeline["end_s"].max())


def test_weights_fetched_versus_resident():
    g, s = one_op(weight_bytes=3000), hand_system()
    fetched = evaluate(g, s, {"m": "a"})
    # weights 3 ms then the input 1 ms on the same link (serialised), compute [4, 6], out [6, 7]
    assert fetched.metrics["makespan_s"] == approx(7 * MS)
    tr = rows(fetched, "transfer")
    assert tr["name"].tolist() == ["weights m", "x", "y -> host"]
    assert tr["start_s"].tolist() == [approx(0), approx(3 * MS), approx(6 * MS)]
    assert fetched.metrics["bytes_moved"] == 5000
    # fetched weights [0, 6], input [3, 6], output [4, 7]: peak 5000 B during [4, 6]
    assert fetched.per_device.set_index("device").loc["a", "peak_mem_bytes"] == 5000

    resident = evaluate(g, s, Placement({"m": "a"}, weights_resident={"m"}))
    assert resident.metrics["makespan_s"] == approx(4 * MS)
    assert resident.metrics["bytes_moved"] == 2000
    al = rows(resident, "alloc").set_index("name")
    assert al.loc["weights:m", "start_s"] == 0 and al.loc["weights:m", "end_s"] == approx(4 * MS)
    assert al.loc["weights:m", "bytes"] == 3000
    assert resident_weight_bytes(g, resident.placement) == {"a": 3000}
    check(fetched, g, s)
    check(resident, g, s)


def test_write_back_versus_resident_intermediate():
    g, s = two_chain(), hand_system()
    wb = evaluate(g, s, {"m1": "a", "m2": "a"})
    # x [0,1], m1 [1,3], t written back [3,4] and read again [4,5], m2 [5,6], y back [6,7]
    assert wb.metrics["makespan_s"] == approx(7 * MS)
    assert wb.metrics["bytes_moved"] == 4000
    assert wb.op_start_s["m2"] == approx(5 * MS)
    kept = evaluate(g, s, Placement({"m1": "a", "m2": "a"}, tensors_resident={"t"}))
    # t stays on a: m2 runs right after m1 [3,4], y back [4,5]
    assert kept.metrics["makespan_s"] == approx(5 * MS)
    assert kept.metrics["bytes_moved"] == 2000
    al = rows(kept, "alloc").set_index("name")
    assert al.loc["t", "start_s"] == approx(1 * MS) and al.loc["t", "end_s"] == approx(4 * MS)
    assert kept.metrics["total_latency_s"] == approx(3 * MS + 2 * MS)
    check(wb, g, s)
    check(kept, g, s)


def test_graph_output_written_back_even_when_resident():
    g, s = one_op(), hand_system()
    ev = evaluate(g, s, Placement({"m": "a"}, tensors_resident={"y"}))
    tr = rows(ev, "transfer")
    assert tr["name"].tolist() == ["x", "y -> host"]
    al = rows(ev, "alloc").set_index("name")
    assert al.loc["y", "end_s"] == approx(4 * MS)  # lives until its write-back has left


def test_cross_device_resident_copy_goes_two_hops_through_host():
    g, s = two_chain(), hand_system()
    ev = evaluate(g, s, Placement({"m1": "a", "m2": "b"}, tensors_resident={"t"}))
    tr = rows(ev, "transfer")
    # x h->a [0,1]; m1 [1,3]; t a->h [3,4], h->b [4,5]; m2 [5,6]; y b->h [6,7]
    assert tr["lane"].tolist() == ["h->a", "a->h", "h->b", "b->h"]
    assert tr["start_s"].tolist() == [approx(0), approx(3 * MS), approx(4 * MS), approx(6 * MS)]
    assert ev.metrics["makespan_s"] == approx(7 * MS)
    assert ev.metrics["bytes_moved"] == 4000  # bytes count once per hop
    assert ev.metrics["n_transfers"] == 4
    # both hops of the copy are b's data movement (the consumer pays for its reads)
    pd_ = ev.per_device.set_index("device")
    assert pd_.loc["b", "transfer_s"] == approx(3 * MS) and pd_.loc["a", "transfer_s"] == approx(1 * MS)
    al = rows(ev, "alloc")
    t_on_a = al[(al["name"] == "t") & (al["device"] == "a")].iloc[0]
    assert t_on_a["end_s"] == approx(4 * MS)  # freed when the first hop has left a
    t_on_b = al[(al["name"] == "t") & (al["device"] == "b")].iloc[0]
    assert (t_on_b["start_s"], t_on_b["end_s"]) == (approx(3 * MS), approx(6 * MS))
    check(ev, g, s)


def test_intermediate_device_of_a_route_holds_the_data():
    s = hand_system(topology="line")  # h - a - b
    g = OpGraph("far")
    g.add_op("m", "MatMul", flops=1e9)
    g.add_tensor("x", 1000, consumers=["m"])
    g.add_tensor("y", 0, producer="m", is_output=True)
    ev = evaluate(g, s, {"m": "b"})
    tr = rows(ev, "transfer")
    assert tr["lane"].tolist()[:2] == ["h->a", "a->b"]
    al = rows(ev, "alloc")
    on_a = al[(al["device"] == "a") & (al["name"] == "x")]
    assert len(on_a) == 1  # forwarded through a: held from the hop in to the end of the hop out
    assert (on_a["start_s"].iat[0], on_a["end_s"].iat[0], on_a["bytes"].iat[0]) == (0, approx(2 * MS), 1000)
    assert ev.op_start_s["m"] == approx(2 * MS)
    check(ev, g, s)
    # fetched weights forwarded through a are held there too, labelled as weights
    g.set_op("m", weight_bytes=2000)
    ev = evaluate(g, s, {"m": "b"})
    al = rows(ev, "alloc")
    w_on_a = al[(al["device"] == "a") & (al["name"] == "weights:m")]
    assert len(w_on_a) == 1 and w_on_a["tensor"].isna().all() and w_on_a["bytes"].iat[0] == 2000
    assert (w_on_a["start_s"].iat[0], w_on_a["end_s"].iat[0]) == (0, approx(4 * MS))
    check(ev, g, s)


def test_host_as_compute_device():
    g, s = two_chain(), hand_system()
    ev = evaluate(g, s, {"m1": "h", "m2": "h"})
    # host peak 1e9 FLOP/s: 2 s + 1 s, no transfer at all, nothing allocated
    assert ev.metrics["makespan_s"] == approx(3.0)
    assert ev.metrics["bytes_moved"] == 0 and len(rows(ev, "alloc")) == 0
    mixed = evaluate(g, s, {"m1": "h", "m2": "a"})
    # m1 on h [0, 2 s]; t read by a [2 s, 2 s + 1 ms]; m2 1 ms; y back 1 ms
    assert mixed.metrics["makespan_s"] == approx(2.0 + 3 * MS)
    tr = rows(mixed, "transfer")
    assert tr["lane"].tolist() == ["h->a", "a->h"]
    back = evaluate(g, s, {"m1": "a", "m2": "h"})
    # t written back once and read in place by the host consumer (no read transfer)
    tr = rows(back, "transfer")
    assert tr["name"].tolist() == ["x", "t -> host"]
    assert back.op_start_s["m2"] == approx(4 * MS)
    for e in (ev, mixed, back):
        check(e, g, s)


def fan_out():
    g = OpGraph("fan")
    g.add_op("p", "MatMul", flops=1e9)
    g.add_op("c1", "MatMul", flops=1e9)
    g.add_op("c2", "MatMul", flops=1e9)
    g.add_tensor("x", 0, consumers=["p"])
    g.add_tensor("t", 1000, producer="p", consumers=["c1", "c2"])
    g.add_tensor("y1", 0, producer="c1", is_output=True)
    g.add_tensor("y2", 0, producer="c2", is_output=True)
    return g


def test_one_tensor_several_consumers_on_several_devices():
    g, s = fan_out(), hand_system()
    pl = {"p": "a", "c1": "b", "c2": "a"}
    wb = evaluate(g, s, pl)
    # p [0,1]; t written back once a->h [1,2]; c1 on b reads it h->b [2,3]; c2 on a reads h->a [2,3]
    tr = rows(wb, "transfer")
    t_rows = tr[tr["tensor"] == "t"]
    assert t_rows["lane"].tolist() == ["a->h", "h->b", "h->a"]
    assert wb.op_start_s["c1"] == approx(3 * MS) and wb.op_start_s["c2"] == approx(3 * MS)
    assert wb.metrics["bytes_moved"] == 3000
    kept = evaluate(g, s, Placement(pl, tensors_resident={"t"}))
    tr = rows(kept, "transfer")
    t_rows = tr[tr["tensor"] == "t"]
    # c2 reads t in place; c1 gets a copy a->h->b
    assert t_rows["lane"].tolist() == ["a->h", "h->b"]
    assert kept.op_start_s["c2"] == approx(1 * MS) and kept.op_start_s["c1"] == approx(3 * MS)
    al = rows(kept, "alloc")
    t_a = al[(al["name"] == "t") & (al["device"] == "a")].iloc[0]
    assert t_a["end_s"] == approx(2 * MS)  # max(c2 ends at 2 ms, copy's first hop leaves at 2 ms)
    for e in (wb, kept):
        check(e, g, s)


def test_several_consumers_on_one_device_share_a_kept_copy():
    g, s = fan_out(), hand_system()
    ev = evaluate(g, s, Placement({"p": "a", "c1": "b", "c2": "b"}, tensors_resident={"t"}))
    tr = rows(ev, "transfer")
    assert tr[tr["tensor"] == "t"]["lane"].tolist() == ["a->h", "h->b"]  # one copy serves both
    al = rows(ev, "alloc")
    t_b = al[(al["name"] == "t") & (al["device"] == "b")].iloc[0]
    assert t_b["end_s"] == approx(ev.op_end_s["c2"])  # kept until the last reader on b ends
    check(ev, g, s)


def parallel_reads():
    g = OpGraph("par")
    for i in (2, 3):
        g.add_op(f"o{i}", "MatMul", flops=1e8)  # 0.1 ms each
        g.add_tensor(f"x{i}", 1000, consumers=[f"o{i}"])
        g.add_tensor(f"y{i}", 0, producer=f"o{i}", is_output=True)
    return g


def test_link_serialisation_with_and_without_contention():
    g, s = parallel_reads(), hand_system()
    pl = {"o2": "b", "o3": "b"}
    ser = evaluate(g, s, pl)
    tr = rows(ser, "transfer")
    reads = tr[tr["op"].notna()]
    assert reads["start_s"].tolist() == [approx(0), approx(1 * MS)]  # one after the other on h->b
    assert ser.op_start_s["o3"] == approx(2 * MS)
    assert ser.metrics["makespan_s"] == approx(2.1 * MS)
    free = evaluate(g, s, pl, contention=False)
    tr = rows(free, "transfer")
    reads = tr[tr["op"].notna()]
    assert reads["start_s"].tolist() == [approx(0), approx(0)]  # each on its own channel
    assert reads["lane"].tolist() == ["h->b", "h->b#1"]
    assert free.op_start_s["o3"] == approx(1.1 * MS)
    assert free.metrics["makespan_s"] == approx(1.2 * MS)
    check(ser, g, s)
    check(free, g, s)


def test_half_duplex_link_shares_one_lane_both_ways():
    g, s = one_op(), hand_system(duplex=False)
    ev = evaluate(g, s, {"m": "a"})
    assert set(rows(ev, "transfer")["lane"]) == {"a<->h"}
    check(ev, g, s)


def test_custom_order_changes_device_order():
    g, s = parallel_reads(), hand_system()
    ev = evaluate(g, s, {"o2": "b", "o3": "b"}, order=["o3", "o2"])
    assert ev.op_start_s["o3"] < ev.op_start_s["o2"]
    with pytest.raises(GraphError) as e:
        evaluate(g, s, {"o2": "b", "o3": "b"}, order=["o3"])
    assert e.value.op == "o2"
    with pytest.raises(GraphError) as e:
        evaluate(two_chain(), s, {"m1": "a", "m2": "a"}, order=["m2", "m1"])
    assert e.value.op == "m2"  # the op run before its predecessor
    with pytest.raises(GraphError) as e:
        evaluate(g, s, {"o2": "b", "o3": "b"}, order=["o3", "o3"])
    assert e.value.op == "o2" and "twice" in str(e.value)


# ------------------------------------------------------------------ errors


def test_capacity_error_names_the_device():
    g = one_op(weight_bytes=3000)
    s = hand_system(mem_a=2500)
    with pytest.raises(CapacityError) as e:
        evaluate(g, s, Placement({"m": "a"}, weights_resident={"m"}))
    assert e.value.device == "a"
    assert e.value.details["capacity_bytes"] == 2500 and e.value.details["peak_bytes"] == 5000
    ev = evaluate(g, s, Placement({"m": "a"}, weights_resident={"m"}), check_memory=False)
    assert ev.metrics["peak_mem_frac"] == approx(5000 / 2500)


def test_unsupported_op_error_names_op_and_device():
    sup = SupportTable({"a": {"MatMul": 1}, "b": {"*": 1}, "h": {"*": 2}})
    g, s = two_chain(), hand_system(support=sup)
    with pytest.raises(UnsupportedOpError) as e:
        evaluate(g, s, {"m1": "a", "m2": "a"})
    assert e.value.op == "m2" and e.value.device == "a"
    assert e.value.ops == [("m2", "Relu")]
    assert evaluate(g, s, {"m1": "a", "m2": "a"}, check_support=False).metrics["makespan_s"] > 0


def test_placement_errors():
    g, s = two_chain(), hand_system()
    with pytest.raises(GraphError) as e:
        evaluate(g, s, {"m1": "a"})
    assert e.value.op == "m2"
    with pytest.raises(UnknownNameError) as e:
        evaluate(g, s, {"m1": "a", "m2": "zz"})
    assert (e.value.op, e.value.device) == ("m2", "zz")
    with pytest.raises(UnknownNameError) as e:
        evaluate(g, s, Placement({"m1": "a", "m2": "a"}, weights_resident={"nope"}))
    assert e.value.op == "nope"
    # a placement given as a list (or a string) is a named error, not dict()'s ValueError (issue 29)
    for bad in (["a", "a"], "a", None):
        with pytest.raises(HetschedError) as e:
            evaluate(g, s, bad)
        assert e.value.field == "placement" and "dict" in str(e.value) and type(bad).__name__ in str(e.value)


def test_placement_helpers():
    p = Placement({"a": "x"}, weights_resident=["a"])
    assert isinstance(p.weights_resident, frozenset)
    q = p.moved("a", "y")
    assert q.device == {"a": "y"} and p.device == {"a": "x"} and q.weights_resident == {"a"}
    r = p.with_residency(tensors_resident=["t"])
    assert r.tensors_resident == {"t"} and r.weights_resident == {"a"}
    assert Placement.coerce(p) is p and Placement.coerce({"a": "x"}).device == {"a": "x"}


# ------------------------------------------------------------------ flows


def flow_ids(ev, **where):
    tl = ev.timeline
    mask = True
    for k, v in where.items():
        mask = mask & (tl[k] == v)
    return [set(str(f).split(",")) if f else set() for f in tl.loc[mask, "flow"].fillna("")]


def test_flows_chain_producer_write_back_read_consumer():
    g, s = fan_out(), hand_system()
    ev = evaluate(g, s, {"p": "a", "c1": "b", "c2": "a"})
    (prod,) = flow_ids(ev, kind="compute", op="p")
    assert {"t>host", "t>c1", "t>c2"} <= prod
    tl = ev.timeline
    wb = tl[(tl["kind"] == "transfer") & (tl["name"] == "t -> host")]["flow"].iat[0].split(",")
    assert set(wb) == {"t>host", "t>c1", "t>c2"}
    (c1,) = flow_ids(ev, kind="compute", op="c1")
    assert "t>c1" in c1 and "t>c2" not in c1
    # no id joins the two reads of different consumers
    reads = tl[(tl["kind"] == "transfer") & (tl["op"].isin(["c1", "c2"]))]
    f1, f2 = (set(f.split(",")) for f in reads["flow"])
    assert not (f1 & f2)


def test_flow_from_a_host_producer():
    g, s = two_chain(), hand_system()
    ev = evaluate(g, s, {"m1": "h", "m2": "a"})
    (prod,) = flow_ids(ev, kind="compute", op="m1")
    assert "t>m2" in prod


def test_resident_copies_each_go_the_whole_route():
    s = hand_system()
    devs = list(s.devices.values()) + [Device("c", "gpu", {"default": 1e12}, mem_bandwidth_Bps=1e15)]
    s3 = System(devs, s.links + [Link("h", "c", 1e6)], host="h")
    g = fan_out()
    pl = {"p": "a", "c1": "b", "c2": "c"}
    kept = evaluate(g, s3, Placement(pl, tensors_resident={"t"}))
    tr = rows(kept, "transfer")
    assert tr[tr["tensor"] == "t"]["lane"].tolist() == ["a->h", "h->b", "a->h", "h->c"]
    assert kept.metrics["bytes_moved"] == 4000  # two 2-hop copies
    wb = evaluate(g, s3, pl)
    assert wb.metrics["bytes_moved"] == 3000  # one write-back, two reads: keeping costs more bytes here
    # each chain has its own id: c2's chain runs through its own two hops only
    t_rows = tr[tr["tensor"] == "t"]
    assert [set(f.split(",")) for f in t_rows["flow"]] == [{"t>c1"}, {"t>c1"}, {"t>c2"}, {"t>c2"}]
    for e in (kept, wb):
        check_timeline(e.timeline, g)
