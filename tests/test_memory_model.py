"""The memory model, the lower bound, OrderResult's timeline, and bad input (hetsched.memory)."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import assume, given, settings
from strategies import small_dags

from hetsched.errors import CycleError, GraphError, ScheduleError, UnknownNameError
from hetsched.graph import OpGraph
from hetsched.io import generators as gen
from hetsched.memory import (
    check_order,
    lifetimes,
    lower_bound,
    lower_bound_detail,
    memory_curve,
    optimize_order,
    order_bfs,
    peak_memory,
)
from hetsched.timeline import check_timeline, memory_usage


def diamond() -> OpGraph:
    """x -> a -> (b, c) -> d; a's output read by b and c."""
    g = OpGraph("diamond")
    for n in "abcd":
        g.add_op(n, "Relu", weight_bytes=1000)
    g.add_tensor("x", 10, consumers=["a"])
    g.add_tensor("ta", 100, producer="a", consumers=["b", "c"])
    g.add_tensor("tb", 20, producer="b", consumers=["d"])
    g.add_tensor("tc", 30, producer="c", consumers=["d"])
    g.add_tensor("y", 5, producer="d", is_output=True)
    return g


def test_curve_by_hand():
    g = diamond()
    c = memory_curve(g, ["a", "b", "c", "d"])["bytes"].tolist()
    # a: x + ta; b: ta + tb; c: ta(last use) + tb + tc; d: tb + tc + y
    assert c == [110, 120, 150, 55]
    assert peak_memory(g, ["a", "c", "b", "d"]) == 150
    lt = lifetimes(g, ["a", "b", "c", "d"]).set_index("tensor")
    assert lt.loc["ta", "alloc_step"] == 0 and lt.loc["ta", "free_step"] == 2
    assert lt.loc["y", "free_step"] == 3  # graph outputs are never freed


def test_weights_are_excluded_and_reported():
    g = diamond()
    r = optimize_order(g, method="kahn")
    assert r.peak_bytes == 150
    assert r.metrics["weight_bytes"] == 4000


def test_unread_tensor_lives_one_step_and_unused_input_never():
    g = OpGraph()
    g.add_op("a", "Relu")
    g.add_op("b", "Relu")
    g.add_tensor("x", 10, consumers=["a"])
    g.add_tensor("unused_in", 10_000)  # never read: never resident
    g.add_tensor("tmp", 50, producer="a")  # nobody reads it
    g.add_tensor("t", 7, producer="a", consumers=["b"])
    g.add_tensor("y", 3, producer="b", is_output=True)
    assert memory_curve(g, ["a", "b"])["bytes"].tolist() == [10 + 50 + 7, 7 + 3]


def test_alias_allocates_nothing_and_extends_base():
    g = OpGraph()
    for n in ("a", "view", "b", "c"):
        g.add_op(n, "Relu")
    g.add_tensor("x", 1, consumers=["a"])
    g.add_tensor("base", 100, producer="a", consumers=["view"])
    g.add_tensor("v", 100, producer="view", consumers=["c"], alias_of="base")
    g.add_tensor("tb", 10, producer="b", consumers=["c"])
    g.add_tensor("y", 1, producer="c", is_output=True)
    _ = g.add_tensor("xb", 1, consumers=["b"])
    # base stays live until c (the reader of its view); the view itself adds nothing
    c = memory_curve(g, ["a", "view", "b", "c"])["bytes"].tolist()
    assert c == [1 + 1 + 100, 1 + 100, 1 + 100 + 10, 100 + 10 + 1]
    # b first: step a holds x, tb and the base; the view at step "view" still adds nothing
    assert memory_curve(g, ["b", "a", "view", "c"])["bytes"].tolist() == [1 + 1 + 10, 1 + 10 + 100, 10 + 100, 100 + 10 + 1]


def test_graph_input_marked_output_lives_throughout():
    g = OpGraph()
    g.add_op("a", "Relu")
    g.add_tensor("x", 10, consumers=["a"], is_output=True)
    g.add_tensor("y", 1, producer="a", is_output=True)
    assert memory_curve(g, ["a"])["bytes"].tolist() == [11]


@pytest.mark.parametrize(
    "order, err",
    [
        (["a", "b", "c"], ScheduleError),  # misses d
        (["a", "b", "c", "d", "d"], ScheduleError),
        (["a", "d", "b", "c"], ScheduleError),  # d before its predecessors
        (["a", "b", "c", "zz"], UnknownNameError),
    ],
)
def test_bad_orders_raise(order, err):
    with pytest.raises(err) as ei:
        peak_memory(diamond(), order)
    assert ei.value.op is not None


def test_cycle_negative_size_and_unknown_op_raise():
    g = diamond()
    g.add_tensor("back", 4, producer="d", consumers=["a"])
    with pytest.raises(CycleError) as ei:
        optimize_order(g, method="heuristic")
    assert set(ei.value.cycle) <= set("abcd")
    g = diamond()
    g.set_tensor("tb", size_bytes=-5)
    with pytest.raises(GraphError) as ei:
        order_bfs(g)
    assert ei.value.tensor == "tb"
    g = diamond()
    g.add_tensor("ghost", 4, producer="nobody", consumers=["a"])
    with pytest.raises(GraphError) as ei:
        lower_bound(g)
    assert ei.value.op == "nobody"
    with pytest.raises(ScheduleError):
        check_order(diamond(), ["d", "a", "b", "c"])


def test_unknown_method_raises():
    from hetsched.errors import HetschedError

    with pytest.raises(HetschedError) as ei:
        optimize_order(diamond(), method="nope")
    assert ei.value.field == "method"


def test_lower_bound_parts():
    g = diamond()
    d = lower_bound_detail(g)
    assert d["op_io"] == 130  # c reads ta and writes tc (b the same with tb: 120; d: 55)
    assert d["op_io_at"] == "c"
    assert d["io"] == 10  # graph inputs 10 B, outputs 5 B
    assert d["crossing"] >= d["op_io"]
    assert lower_bound(g) == max(d["op_io"], d["io"], d["crossing"], d["last"]) <= 150


def brute_force_peak(g: OpGraph) -> int:
    return min(peak_memory(g, o) for o in nx.all_topological_sorts(g.nx))


@settings(max_examples=40)
@given(small_dags(max_ops=7))
def test_lower_bound_never_above_optimum(g):
    assume(g.n_ops <= 7)  # brute force over every topological order
    assert lower_bound(g) <= brute_force_peak(g)


@settings(max_examples=30)
@given(small_dags(max_ops=40))
def test_result_timeline_matches_curve(g):
    r = optimize_order(g, method="patent-heuristic")
    check_timeline(r.timeline, g)
    mu = memory_usage(r.timeline)
    assert int(round(mu["bytes"].max())) == r.peak_bytes == peak_memory(g, r.order)
    assert r.curve["bytes"].max() == r.peak_bytes
    assert r.lower_bound_bytes <= r.peak_bytes
    assert r.gap == pytest.approx((r.peak_bytes - r.lower_bound_bytes) / r.lower_bound_bytes)
    assert len(r.timeline[r.timeline["kind"] == "compute"]) == g.n_ops


def test_capacity_check_on_timeline():
    from hetsched.errors import TimelineViolation
    from hetsched.io.systems import toy_system
    from hetsched.memory import order_timeline

    g = gen.fork_join(3, 2)
    r = optimize_order(g, method="kahn")
    check_timeline(r.timeline, g, capacity_bytes={"order": r.peak_bytes})  # in steps: the order's own lane
    tl = order_timeline(g, r.order, device="gpu0", system=toy_system())  # priced on a device: its capacity
    check_timeline(tl, g, capacity_bytes={"gpu0": r.peak_bytes})
    with pytest.raises(TimelineViolation):
        check_timeline(tl, g, capacity_bytes={"gpu0": r.peak_bytes - 1})


def test_timeline_counts_steps_unless_priced_on_a_named_device():
    """Issue 29: an order has no duration of its own (every order of a graph ran the same ops), so its
    timeline counts steps, and says so; priced on a device the caller names, it is in seconds."""
    from hetsched.cost import RooflineCost
    from hetsched.errors import HetschedError
    from hetsched.io.systems import toy_system
    from hetsched.memory import order_timeline

    g = gen.chain(3, act_bytes=100, seed=0)
    r = optimize_order(g, method="kahn")
    assert r.timeline.attrs["time_unit"] == "step" and "makespan_s" not in r.metrics
    comp = r.timeline[r.timeline["kind"] == "compute"]
    assert comp["start_s"].tolist() == [0.0, 1.0, 2.0] and comp["end_s"].tolist() == [1.0, 2.0, 3.0]
    a = r.timeline[r.timeline["kind"] == "alloc"].set_index("tensor")
    # op0:out is made by op0 (step 0) and last read by op1 (step 1)
    assert (a.loc["op0:out", "start_s"], a.loc["op0:out", "end_s"]) == (0.0, 2.0)
    assert int(memory_usage(r.timeline)["bytes"].max()) == r.peak_bytes
    # on a device: each op priced by the cost model, back to back; the bytes do not change
    s = toy_system()
    cm = RooflineCost(s, g)
    tl = order_timeline(g, r.order, device="gpu0", system=s)
    pc = tl[tl["kind"] == "compute"]
    assert "time_unit" not in tl.attrs
    assert pc["end_s"].to_numpy() - pc["start_s"].to_numpy() == pytest.approx([cm.compute_s(g.ops[o], "gpu0") for o in r.order])
    assert int(memory_usage(tl)["bytes"].max()) == r.peak_bytes
    assert order_timeline(g, r.order, device="cpu0", cost=cm)["end_s"].max() > pc["end_s"].max()
    with pytest.raises(HetschedError):
        order_timeline(g, r.order, device="gpu0")  # which system's gpu0?
    with pytest.raises(HetschedError):
        order_timeline(g, r.order, system=s)  # priced on which device?


def test_empty_graph():
    g = OpGraph("empty")
    assert peak_memory(g, []) == 0
    r = optimize_order(g, method="heuristic")
    assert r.order == () and r.peak_bytes == 0


def test_curve_is_numpy_consistent_on_big_graph():
    g = gen.topcuoglu(400, seed=1)
    o = g.topological_order()
    c = memory_curve(g, o)
    lt = lifetimes(g, o)
    # recompute step 123 from the lifetimes by hand
    i = 123
    live = lt[(lt.alloc_step <= i) & (lt.free_step >= i)]["bytes"].sum()
    assert c["bytes"].iloc[i] == live
    assert np.all(c["step"].to_numpy() == np.arange(g.n_ops))
