"""The one clock (hetsched.clock): the evaluator's model of time, shared by evaluate and the mapping engine.

Expected values are worked out by hand from the model statement (hetsched/evaluate.py docstring,
seed-000 patent claims 5-6), not read off the code's output.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsched.clock import COMPUTE, COPY, FETCH, OUTPUT, Clock, copy_source
from hetsched.evaluate import Placement, evaluate
from hetsched.graph import OpGraph
from hetsched.io.systems import toy_system
from hetsched.system import Device, Link, System
from hetsched.timeline import TimelineBuilder, check_timeline
from strategies import small_dags


def two_devices(duplex: bool = True) -> System:
    """Host h and device d: 1 GFLOP/s and 1 TFLOP/s, one 1 MB/s link, no latency (round numbers)."""
    return System([Device("h", "cpu", {"default": 1e9}, mem_bandwidth_Bps=1e15),
                   Device("d", "gpu", {"default": 1e12}, mem_bandwidth_Bps=1e15)],
                  [Link("h", "d", 1e6, duplex=duplex)], host="h")


def pair_graph() -> OpGraph:
    """a -> (y) -> b, input x to a, y is 1000 bytes; b writes the 1000-byte graph output z."""
    g = OpGraph("pair")
    g.add_op("a", "MatMul", flops=1e9)
    g.add_op("b", "MatMul", flops=1e9)
    g.add_tensor("x", 1000, consumers=["a"])
    g.add_tensor("y", 1000, producer="a", consumers=["b"])
    g.add_tensor("z", 1000, producer="b", is_output=True)
    return g


def test_round_trip_through_host_when_not_kept():
    # x in 1 ms, a 1 ms, y out 1 ms and back in 1 ms (patent: intermediate results in host memory), b 1 ms, z out 1 ms
    g, s = pair_graph(), two_devices()
    mk, end = Clock(g, s).run({"a": "d", "b": "d"}, set(), set())
    assert end == pytest.approx({"a": 0.002, "b": 0.005})
    assert mk == pytest.approx(0.006)


def test_kept_tensor_is_read_in_place():
    g, s = pair_graph(), two_devices()
    log: list = []
    mk, end = Clock(g, s).run({"a": "d", "b": "d"}, set(), {"y"}, log=log)
    assert end["b"] == pytest.approx(0.003) and mk == pytest.approx(0.004)
    copies = [e[1] for e in log if e[0] == COPY]
    assert copies == ["x"]  # y never moves
    outputs = {e[1]: e[7] for e in log if e[0] == OUTPUT}
    assert outputs["y"] is None and outputs["z"] is not None  # only the graph output is written back


def test_host_ops_move_nothing():
    g, s = pair_graph(), two_devices()
    log: list = []
    mk, end = Clock(g, s).run({"a": "h", "b": "h"}, set(), set(), log=log)
    assert [e[0] for e in log].count(COPY) == 0 and mk == pytest.approx(2.0)  # 1 GFLOP at 1 GFLOP/s, twice


def test_weights_are_fetched_unless_resident():
    g = OpGraph()
    g.add_op("a", "MatMul", flops=0, weight_bytes=2000)
    s = two_devices()
    log: list = []
    mk, _ = Clock(g, s).run({"a": "d"}, set(), set(), log=log)
    assert [e[0] for e in log] == [FETCH, COMPUTE] and mk == pytest.approx(0.002)
    mk2, _ = Clock(g, s).run({"a": "d"}, {"a"}, set())
    assert mk2 < 1e-9  # only the on-chip memory traffic of the roofline


def test_half_duplex_link_serialises_both_directions():
    # two independent ops, one on each side: h's output goes to d while d's goes to h at the same time
    g = OpGraph()
    for n in ("p", "q", "r", "t"):
        g.add_op(n, "MatMul", flops=0)
    g.add_tensor("u", 1000, producer="p", consumers=["r"])
    g.add_tensor("v", 1000, producer="q", consumers=["t"])
    place = {"p": "h", "q": "d", "r": "d", "t": "h"}
    full, _ = Clock(g, two_devices(True)).run(place, set(), set())
    half, _ = Clock(g, two_devices(False)).run(place, set(), set())
    assert full == pytest.approx(0.001)  # v -> host and u -> d overlap, one lane per direction
    assert half == pytest.approx(0.002)  # one shared lane: one after the other
    free, _ = Clock(g, two_devices(False), contention=False).run(place, set(), set())
    assert free == pytest.approx(0.001)
    assert two_devices(False).lane("h", "d") == two_devices(False).lane("d", "h") == "d<->h"
    assert two_devices(True).lane("d", "h") == "d->h"


def test_copy_source_rules():
    # a kept tensor comes straight from its producer's device; anything else from host memory
    assert copy_source({"h"}, "f", False, "h") == "h"
    assert copy_source({"f"}, "f", True, "h") == "f"
    assert copy_source({"h"}, None, True, "h") == "h"  # a kept graph input starts on the host


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags(max_ops=25), st.integers(0, 10_000), st.booleans())
def test_additive_terms_equal_the_evaluators_total_and_the_clock_its_makespan(g, seed, contention):
    rng = random.Random(seed)
    s = toy_system()
    clk = Clock(g, s, contention=contention)
    dev = {o: rng.choice(s.candidates(g.op(o).op_type)) for o in g}
    w = {o for o in g if rng.random() < 0.5}
    kept = {t for t in g.tensors if rng.random() < 0.5}
    ev = evaluate(g, s, Placement(dev, w, kept), check_memory=False, contention=contention)
    total = sum(clk.op_busy_s(o, dev[o], o in w) for o in g) + sum(clk.tensor_busy_s(t, dev, t in kept) for t in g.tensors)
    assert total == pytest.approx(ev.metrics["total_latency_s"], rel=1e-9)
    mk, end = clk.run(dev, w, kept)
    assert mk == ev.metrics["makespan_s"] and end == ev.op_end_s
    check_timeline(ev.timeline, g)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags(min_ops=4, max_ops=30), st.integers(0, 10_000), st.integers(1, 5))
def test_resuming_from_a_snapshot_equals_a_full_run(g, seed, every):
    """Claim 6: after a change at op k only the suffix from the last checkpoint before k is re-timed."""
    rng = random.Random(seed)
    s = toy_system()
    clk = Clock(g, s)
    dev = {o: rng.choice(s.candidates(g.op(o).op_type)) for o in g}
    kept = {t for t in g.tensors if rng.random() < 0.5}
    snaps: dict = {}
    clk.run(dev, set(), kept, checkpoints=snaps, every=every)
    k = rng.randrange(len(clk.order))
    dev[clk.order[k]] = rng.choice(s.candidates(g.op(clk.order[k]).op_type))
    base = (k // every) * every
    fast, fast_end = clk.run(dev, set(), kept, start=base, snap=snaps[base])
    full, full_end = clk.run(dev, set(), kept)
    assert fast == full
    assert all(fast_end[o] == full_end[o] for o in fast_end)


def test_timeline_builder_joins_growing_flow_lists():
    tb = TimelineBuilder()
    f: list[str] = []
    tb.add("gpu0", "gpu0", "a", "compute", 0.0, 1.0, op="a", device="gpu0", flow=f)
    tb.add("l", "links", "x", "transfer", 1.0, 2.0, tensor="x", bytes=8.0, flow="x>b")
    f += ["x>b", "x>c", "x>b"]
    tl = tb.build()
    assert len(tb) == 2 and list(tl["flow"]) == ["x>b,x>c", "x>b"]
    assert tl["op"].iloc[0] == "a" and tl["bytes"].iloc[1] == 8.0
    check_timeline(tl)
    assert len(TimelineBuilder().build()) == 0


def test_keep_tensors_resident_switches_off_the_host_round_trip():
    """Issue 22: the all-on-one-device placement need not send every activation to the host and back."""
    from hetsched.io.generators import layered

    g, s = layered(4, 3, seed=1), toy_system()
    place = {o: "gpu0" for o in g}
    base = evaluate(g, s, place)
    kept = evaluate(g, s, place, keep_tensors_resident=True)
    same = evaluate(g, s, Placement(place, tensors_resident=set(g.tensors)))
    assert kept.metrics == same.metrics and kept.placement.tensors_resident == frozenset(g.tensors)
    assert kept.metrics["bytes_moved"] < base.metrics["bytes_moved"]
    assert kept.metrics["makespan_s"] < base.metrics["makespan_s"]
    # what still moves: graph inputs in (once per device) and graph outputs back to the host
    moved = kept.timeline[kept.timeline.kind == "transfer"]
    assert set(moved["tensor"].dropna()) <= set(g.graph_inputs()) | set(g.graph_outputs())  # (and weights)
    check_timeline(kept.timeline, g, capacity_bytes={"gpu0": float(s.device("gpu0").memory_bytes)})
