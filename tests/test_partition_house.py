"""Seed 003 in the house: every merge outcome fires, steps carry what a panel shows, a real timeline,
device memory checked, buffered replay, the empty graph, a zeroed wildcard cell (issues 15, 20, 21)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from hetsched.errors import CapacityError
from hetsched.graph import OpGraph
from hetsched.io.generators import chain, layered
from hetsched.io.systems import toy_system
from hetsched.partition import partition_by_support, serial_timeline, simulate_buffered
from hetsched.partition.examples import merge_outcomes
from hetsched.system import Device, Link, SupportTable, System
from hetsched.timeline import check_timeline
from strategies import small_dags


def test_every_merge_outcome_fires_on_the_bundled_example():
    g, s = merge_outcomes()
    r = partition_by_support(g, s)
    outcomes = {}
    for st in r.steps:
        if st.action == "merge":
            outcomes.setdefault(st.data["outcome"], []).append(st)
    assert set(outcomes) == {"merged", "cycle", "different_backend", "not_adjacent"}
    cyc = outcomes["cycle"][0]
    assert cyc.subject == "a->c" and not cyc.accepted and st_via_backend(r, cyc) == "fpga0"
    assert all(st.accepted for st in outcomes["merged"]) and not any(st.accepted for st in outcomes["not_adjacent"])
    # the patent's point: buffers let the backends work on different inputs at once
    serial = simulate_buffered(r, s, n_inputs=8, buffer_depth=0).metrics["throughput_per_s"]
    piped = simulate_buffered(r, s, n_inputs=8, buffer_depth=2).metrics["throughput_per_s"]
    assert piped > 1.5 * serial


def st_via_backend(r, step) -> str:
    return r.replay(step.index)["backend"][step.data["via"]]


def test_marking_steps_carry_candidates_and_priorities():
    g, s = merge_outcomes()
    r = partition_by_support(g, s)
    d = next(st for st in r.steps if st.action == "mark" and st.subject == "d")
    assert d.data["candidates"] == (("fpga0", 1), ("gpu0", 2), ("cpu0", 3)) and d.data["choice"] == "fpga0"
    r2 = partition_by_support(g, s, enabled=["gpu0", "cpu0"])
    d2 = next(st for st in r2.steps if st.action == "mark" and st.subject == "d")
    assert d2.data["disabled"] == (("fpga0", 1),) and d2.data["choice"] == "gpu0"


def test_quotient_after_each_step():
    g, s = merge_outcomes()
    r = partition_by_support(g, s)
    n_marks = g.n_ops
    q0 = r.quotient_at(n_marks - 1)
    assert q0.number_of_nodes() == g.n_ops and q0.number_of_edges() == g.nx.number_of_edges()
    merged = next(st for st in r.steps if st.data.get("outcome") == "merged")
    q1 = r.quotient_at(merged.index)
    assert q1.number_of_nodes() == g.n_ops - 1
    assert sorted(q1.nodes["stem"]["ops"]) == ["a", "stem"]
    final = r.quotient_at(r.n_steps - 1)
    assert final.number_of_nodes() == r.metrics["n_groups"] == r.quotient.number_of_nodes()
    assert sorted(sorted(final.nodes[n]["ops"]) for n in final) == sorted(sorted(v) for v in r.groups.values())


def test_replay_after_marking_equals_a_run_without_merging():
    g, s = layered(4, 3, seed=2), toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    r = partition_by_support(g, s)
    none = partition_by_support(g, s, merge=None)
    st = r.replay(g.n_ops - 1)  # the marking steps come first, one per op
    assert st["backend"] == dict(none.assignment)
    assert sorted(st["group"].items()) == sorted((o, o) for o in g.ops)


def test_partition_timeline_is_a_serial_run_in_seconds():
    g, s = merge_outcomes()
    r = partition_by_support(g, s)
    assert callable(r.__dict__["_timeline_value"])  # not built until someone looks
    tl = r.timeline
    assert len(tl) and set(tl.loc[tl.kind == "compute", "op"]) == set(g.ops)
    check_timeline(tl, g)
    assert tl.equals(serial_timeline(r, system=s))
    # one input through 5 groups one after the other: at least the sum of the ops' compute rows
    comp = tl[tl.kind == "compute"]
    assert tl["end_s"].max() >= (comp["end_s"] - comp["start_s"]).sum()
    assert partition_by_support(g, s.support).timeline.empty  # a bare table prices nothing


def tiny_device_system() -> System:
    return System([Device("cpu0", "cpu"), Device("acc", "npu", memory_bytes=2**20)], [Link("cpu0", "acc", 1e9)],
                  host="cpu0", support=SupportTable({"acc": {"*": 1}, "cpu0": {"*": 2}}))


def test_partition_checks_device_memory():
    """Issue 20: a 2^45-byte tensor on a 1 MB device is a named capacity error, not a throughput."""
    g = OpGraph("huge")
    g.add_op("p", "MatMul", flops=1e9)
    g.add_op("q", "MatMul", flops=1e9)
    g.connect("p", "q", 2**45)
    s = tiny_device_system()
    with pytest.raises(CapacityError) as e:
        partition_by_support(g, s)
    assert e.value.op == "p" and e.value.device == "acc"
    # made from the bare table (no memory known), then simulated on the small system: refused there too
    r = partition_by_support(g, s.support)
    with pytest.raises(CapacityError) as e:
        simulate_buffered(r, s, n_inputs=2, buffer_depth=1)
    assert e.value.device == "acc"
    # on the host (ample memory, as in evaluate) it is fine
    ok = partition_by_support(g, s, enabled=["cpu0"])
    assert ok.metrics["n_groups"] == 1


def test_simulate_buffered_on_an_empty_graph_is_documented():
    s = toy_system()
    r = partition_by_support(OpGraph("empty"), s)
    b = simulate_buffered(r, s, n_inputs=4, buffer_depth=2)
    m = b.metrics
    assert m["makespan_s"] == 0.0 and m["throughput_per_s"] == 0.0 and m["latency_p99_s"] == 0.0
    assert b.timeline.empty and b.n_steps == 0 and b.replay(-1)["running"] == {}


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_buffered_replay_shows_jobs_and_buffer_occupancy(depth):
    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    r = partition_by_support(chain(6), s)
    b = simulate_buffered(r, s, n_inputs=5, buffer_depth=depth)
    cross = {f"{e.src}->{e.dst}" for e in r.edges if e.cross}
    st0 = b.replay(-1)
    assert st0["time_s"] == 0.0 and st0["occupancy"] == dict.fromkeys(cross, 0) and not st0["running"]
    prev_done = 0
    for k, step in enumerate(b.steps):
        st = b.replay(k)
        assert st["time_s"] == step.data["start_s"]
        assert st["running"][step.data["backend"]] == (step.subject, step.data["input"])
        assert set(st["occupancy"]) == cross
        # a producer takes a slot when it starts: never more items than slots (buffers exist when depth >= 1)
        assert all(0 <= v <= max(depth, 1) for v in st["occupancy"].values())
        n_done = sum(st["done"].values())
        assert prev_done <= n_done <= k
        prev_done = n_done
    with pytest.raises(IndexError):
        b.replay(b.n_steps)


def test_zeroed_wildcard_cell_moves_the_ops():
    """Issue 15: priority 0 on gpu0 (whose support comes from '*') must take Conv off gpu0."""
    s = toy_system()
    g = chain(5)
    before = partition_by_support(g, s)
    assert {before.assignment[o] for o in g if g.op(o).op_type == "Conv"} == {"gpu0"}
    s0 = s.with_support(s.support.with_priority("gpu0", "Conv", 0))
    after = partition_by_support(g, s0)
    assert {after.assignment[o] for o in g if g.op(o).op_type == "Conv"} == {"fpga0"}
    assert s0.support.lookup("gpu0", "Conv") == (None, "excluded")
    assert s0.support.lookup("gpu0", "Relu") == (1, "wildcard")


@settings(max_examples=20, deadline=None)
@given(small_dags(max_ops=30))
def test_working_set_is_weights_plus_inputs_plus_outputs(g):
    from hetsched.partition.quotient import graph_index

    idx = graph_index(g)
    ws = idx.working_set()
    for i, o in enumerate(idx.names):
        need = (g.op(o).weight_bytes + sum(g.tensor(t).size_bytes for t in g.inputs_of(o))
                + sum(g.tensor(t).size_bytes for t in g.outputs_of(o)))
        assert ws[i] == need
