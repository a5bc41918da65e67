"""simulate_buffered: analytic pipelines, buffer bounds, timelines that check, no deadlock."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetsched.cost import TableCost
from hetsched.des import Simulator
from hetsched.errors import HetschedError, UnknownNameError
from hetsched.graph import OpGraph
from hetsched.io.generators import chain, resnet_like
from hetsched.io.systems import toy_system
from hetsched.partition import group_deps, partition_by_support, simulate_buffered
from hetsched.system import Device, Link, SupportTable, System
from hetsched.timeline import check_timeline
from strategies import small_dags


def two_stage(a_s=1.0, b_s=1.0, nbytes=0, bw=1e30, lat=0.0):
    """op x on backend A (a_s seconds) feeding op y on backend B (b_s seconds)."""
    g = OpGraph("two")
    g.add_op("x", "X")
    g.add_op("y", "Y")
    g.add_tensor("in", 8, consumers=["x"])
    g.add_tensor("t", nbytes, producer="x", consumers=["y"])
    g.add_tensor("out", 8, producer="y", is_output=True)
    s = System(
        [Device("A", "cpu"), Device("B", "gpu")],
        [Link("A", "B", bw, lat)],
        host="A",
        support=SupportTable({"A": {"X": 1}, "B": {"Y": 1}}),
    )
    cost = TableCost(s, {("X", "A"): a_s, ("Y", "B"): b_s})
    return g, s, cost


@pytest.mark.parametrize("n", [1, 2, 5, 10])
def test_two_stage_pipeline_is_analytic(n):
    g, s, cost = two_stage(1.0, 1.0)
    r = partition_by_support(g, s)
    mk = lambda d: simulate_buffered(r, s, n_inputs=n, buffer_depth=d, cost=cost, launch_s=0.0).metrics["makespan_s"]
    # no buffers: one input at a time
    assert mk(0) == pytest.approx(2.0 * n)
    # one slot, held from the producer's start to the consumer's end: no overlap either
    assert mk(1) == pytest.approx(2.0 * n)
    # double buffering: the classic pipeline a + b + (n - 1) max(a, b)
    assert mk(2) == pytest.approx(2.0 + (n - 1) * 1.0)
    assert mk(5) == pytest.approx(2.0 + (n - 1) * 1.0)


def test_unbalanced_pipeline_and_transfer_bottleneck():
    g, s, cost = two_stage(1.0, 3.0)
    r = partition_by_support(g, s)
    m = simulate_buffered(r, s, n_inputs=6, buffer_depth=3, cost=cost, launch_s=0.0).metrics
    assert m["makespan_s"] == pytest.approx(1.0 + 3.0 + 5 * 3.0)
    assert m["util.B"] == pytest.approx(18.0 / m["makespan_s"])
    # a slow link becomes the bottleneck: 2 s per copy
    g, s, cost = two_stage(1.0, 1.0, nbytes=2, bw=1.0)
    r = partition_by_support(g, s)
    res = simulate_buffered(r, s, n_inputs=5, buffer_depth=4, cost=cost, launch_s=0.0)
    assert res.metrics["makespan_s"] == pytest.approx(1.0 + 5 * 2.0 + 1.0)
    assert (res.timeline["kind"] == "transfer").sum() == 5
    check_timeline(res.timeline, deps=group_deps(r))


def test_launch_overhead_is_paid_once_per_aggregated_op():
    g, s, cost = two_stage(1.0, 1.0)
    s1 = s.with_support(SupportTable({"A": {"*": 1}}))
    cost = TableCost(s1, {("X", "A"): 1.0, ("Y", "A"): 1.0})
    merged = partition_by_support(g, s1)
    per_op = partition_by_support(g, s1, merge=None)
    assert merged.metrics["n_groups"] == 1 and per_op.metrics["n_groups"] == 2
    m1 = simulate_buffered(merged, s1, n_inputs=4, buffer_depth=2, cost=cost, launch_s=0.5).metrics
    m2 = simulate_buffered(per_op, s1, n_inputs=4, buffer_depth=2, cost=cost, launch_s=0.5).metrics
    assert m1["makespan_s"] == pytest.approx(4 * (0.5 + 2.0))
    assert m2["makespan_s"] == pytest.approx(4 * (2 * 0.5 + 2.0))
    res = simulate_buffered(merged, s1, n_inputs=4, buffer_depth=2, cost=cost, launch_s={"A": 0.25})
    assert (res.timeline["kind"] == "launch").sum() == 4
    assert res.params["launch_s"] == {"A": 0.25}


def test_serial_mode_runs_one_input_at_a_time():
    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    r = partition_by_support(chain(7), s)
    res = simulate_buffered(r, s, n_inputs=6, buffer_depth=0)
    tl = res.timeline
    comp = tl[tl.kind.isin(["compute", "launch", "transfer"])]
    spans = comp.groupby("microbatch").agg(start=("start_s", "min"), end=("end_s", "max")).sort_index()
    assert (spans["start"].to_numpy()[1:] >= spans["end"].to_numpy()[:-1] - 1e-12).all()
    assert res.metrics["latency_p50_s"] == pytest.approx(res.metrics["makespan_s"] / 6)


def test_occupancy_never_exceeds_depth_and_blocked_rows_appear():
    g, s, cost = two_stage(1.0, 4.0)
    r = partition_by_support(g, s)
    for d in (1, 2, 3):
        res = simulate_buffered(r, s, n_inputs=8, buffer_depth=d, cost=cost, launch_s=0.0)
        occ = res.occupancy
        assert occ["items"].max() == d and occ["items"].min() >= 0
        assert res.metrics["max_occupancy"] == d
        # the fast producer fills the buffer, then waits for a free slot
        assert res.metrics["blocked_s"] > 0
        blocked = res.timeline[res.timeline.kind == "blocked"]
        assert set(blocked["lane"]) == {"A"}
        # with one slot the consumer waits for every input (no overlap); with two, for the first only
        assert res.metrics["wait_s"] == pytest.approx(8.0 if d == 1 else 1.0)
        check_timeline(res.timeline, deps=group_deps(r))


def test_latency_and_throughput_metrics():
    g, s, cost = two_stage(1.0, 1.0)
    r = partition_by_support(g, s)
    res = simulate_buffered(r, s, n_inputs=10, buffer_depth=2, cost=cost, launch_s=0.0)
    m = res.metrics
    assert m["throughput_per_s"] == pytest.approx(10 / 11.0)
    assert len(res.latency_s) == 10 and min(res.latency_s) == pytest.approx(2.0)
    assert m["latency_p50_s"] <= m["latency_p99_s"]
    assert m["n_launches"] == 20 and m["n_transfers"] == 10
    # one dispatch step per group job
    assert res.n_steps == 20 and all(st.action == "dispatch" for st in res.steps)


def test_op_rows_check_against_the_graph():
    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    g = resnet_like(n_stages=2, blocks_per_stage=1, channels=8, hw=8)
    r = partition_by_support(g, s)
    res = simulate_buffered(r, s, n_inputs=3, buffer_depth=2, rows="op")
    assert set(res.timeline.loc[res.timeline.kind == "compute", "op"]) == set(g.ops)
    check_timeline(res.timeline, g)
    res_g = simulate_buffered(r, s, n_inputs=3, buffer_depth=2)
    assert res_g.metrics["makespan_s"] == pytest.approx(res.metrics["makespan_s"])


def test_errors():
    g, s, cost = two_stage()
    r = partition_by_support(g, s)
    with pytest.raises(HetschedError) as e:
        simulate_buffered(r, s, n_inputs=0, buffer_depth=1)
    assert e.value.field == "n_inputs"
    with pytest.raises(HetschedError) as e:
        simulate_buffered(r, s, n_inputs=3, buffer_depth=-1)
    assert e.value.field == "buffer_depth"
    with pytest.raises(HetschedError) as e:
        simulate_buffered(r, s, n_inputs=3, buffer_depth=1, rows="tensor")
    assert e.value.field == "rows"
    with pytest.raises(HetschedError) as e:
        simulate_buffered(r, s, n_inputs=3, buffer_depth=1, launch_s=-1.0)
    assert e.value.field == "launch_s"
    other = System([Device("A", "cpu")], host="A")
    with pytest.raises(UnknownNameError) as e:
        simulate_buffered(r, other, n_inputs=3, buffer_depth=1)
    assert e.value.device == "B"


def test_uses_the_shared_event_core(monkeypatch):
    calls = []
    orig = Simulator.run

    def spy(self, *a, **k):
        calls.append(self)
        return orig(self, *a, **k)

    monkeypatch.setattr(Simulator, "run", spy)
    g, s, cost = two_stage()
    res = simulate_buffered(partition_by_support(g, s), s, n_inputs=3, buffer_depth=1, cost=cost)
    assert len(calls) == 1 and res.metrics["n_events"] == calls[0].n_events > 0


def test_deterministic():
    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    r = partition_by_support(resnet_like(n_stages=2, blocks_per_stage=1, channels=8, hw=8), s, merge="global")
    a = simulate_buffered(r, s, n_inputs=5, buffer_depth=2)
    b = simulate_buffered(r, s, n_inputs=5, buffer_depth=2)
    assert a.timeline.equals(b.timeline) and dict(a.metrics) == dict(b.metrics)


BACKENDS = ["cpu0", "gpu0", "fpga0"]


@settings(max_examples=120, deadline=None)
@given(
    g=small_dags(max_ops=24),
    prios=st.lists(st.integers(1, 3), min_size=3, max_size=3),
    merge=st.sampled_from(["adjacent", "global", None]),
    depth=st.integers(0, 3),
    n=st.integers(1, 6),
)
def test_random_graphs_never_deadlock_and_timelines_check(g, prios, merge, depth, n):
    s = toy_system()
    table = SupportTable({
        "gpu0": {"Conv": prios[0], "MatMul": 2, "Softmax": 1},
        "fpga0": {"Conv": prios[1], "Relu": prios[2], "Add": 1, "MatMul": 1},
        "cpu0": {"*": 3},
    })
    s = s.with_support(table)
    r = partition_by_support(g, s, merge=merge)
    res = simulate_buffered(r, s, n_inputs=n, buffer_depth=depth)
    m = res.metrics
    assert m["n_launches"] == r.metrics["n_groups"] * n
    assert len(res.latency_s) == n and math.isfinite(m["makespan_s"])
    tl = res.timeline
    assert (tl.kind == "compute").sum() == r.metrics["n_groups"] * n
    check_timeline(tl, deps=group_deps(r))
    if depth > 0 and len(res.occupancy):
        assert res.occupancy["items"].max() <= depth
    # busy time never exceeds the makespan
    for b in set(r.assignment.values()):
        assert 0 <= m[f"util.{b}"] <= 1 + 1e-9
