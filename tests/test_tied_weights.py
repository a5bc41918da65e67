"""Tied weights (one weight read by several ops) are held once per device everywhere weight memory is
summed: the evaluator's resident weights and memory rows, the clock's fetches, the mapping engine's
memory plan and additive terms, a pipeline stage's weights; the zoo and the training-graph builder
say which ops share (issue 28).

The hand system of ``test_foundation_evaluate``: links move 1e6 B/s with no latency (1000 bytes take
1 ms per hop), devices ``a`` and ``b`` run 1e12 FLOP/s.
"""

from __future__ import annotations

import random

import pytest

from hetsched import mapping
from hetsched.evaluate import Placement, evaluate, resident_weight_bytes
from hetsched.graph import OpGraph
from hetsched.io.training import training_graph
from hetsched.io.zoo import gpt2_small
from hetsched.mapping.engine import Ctx, MemoryPlan, Mover, State, plan_budget
from hetsched.weights import TiedWeights, held_weight_bytes

from test_foundation_evaluate import hand_system  # noqa: E402

MS = 1e-3
W = 4000  # bytes of the tied weight: 4 ms per hop


def tied_graph() -> OpGraph:
    """``emb`` owns a weight that ``head`` reads too (GPT-2's tied embedding), ``mid`` between them."""
    g = OpGraph("tied")
    g.add_op("emb", "Gather", flops=1e9, weight_bytes=W)
    g.add_op("mid", "MatMul", flops=1e9, weight_bytes=1000)
    g.add_op("head", "MatMul", flops=1e9, weight_bytes=W, attrs={"shares_weights_with": "emb", "shared_weight_bytes": W})
    g.add_tensor("ids", 1000, consumers=["emb"])
    g.add_tensor("x", 1000, producer="emb", consumers=["mid"])
    g.add_tensor("y", 1000, producer="mid", consumers=["head"])
    g.add_tensor("logits", 1000, producer="head", is_output=True)
    return g


def test_held_fetch_and_marginal_rules():
    g = tied_graph()
    tw = TiedWeights.of(g)
    assert tw.shared == {"head": ("emb", W)} and tw.related["emb"] == ("head",)
    assert tw.held_bytes(["emb", "head"]) == W and tw.held_bytes(["head"]) == W
    assert tw.held_bytes(g.ops) == g.total_weight_bytes == W + 1000
    dev = {o: "a" for o in g.ops}
    assert tw.fetch_bytes("head", "a", dev, {"emb"}) == 0          # the owner keeps it here: read in place
    assert tw.fetch_bytes("emb", "a", dev, {"head"}) == 0          # and the other way round
    assert tw.fetch_bytes("head", "a", {**dev, "emb": "b"}, {"emb"}) == W  # kept on another device: fetched
    assert tw.marginal("head", "a", dev, {"emb"}) == 0 and tw.marginal("head", "a", dev, set()) == W
    assert held_weight_bytes(g, ["mid"]) == 1000


def test_evaluate_holds_a_tied_weight_once_and_reads_it_in_place():
    g, s = tied_graph(), hand_system()
    both = Placement({o: "a" for o in g.ops}, weights_resident={"emb", "head"})
    assert resident_weight_bytes(g, both) == {"a": W}
    ev = evaluate(g, s, both)
    tl = ev.timeline
    w_rows = tl[(tl["kind"] == "alloc") & tl["name"].isin(["weights:emb", "weights:head"])]
    assert w_rows["bytes"].sum() == W  # one copy of the weight, not two
    # only the owner resident: the head reads the weight in place, no fetch row for it
    owner = evaluate(g, s, Placement({o: "a" for o in g.ops}, weights_resident={"emb"}))
    fetch = owner.timeline[(owner.timeline["kind"] == "transfer") & owner.timeline["name"].str.startswith("weights ")]
    assert set(fetch["op"]) == {"mid"}
    # the head on the other device fetches its copy
    apart = evaluate(g, s, Placement({"emb": "a", "mid": "a", "head": "b"}, weights_resident={"emb"}))
    f2 = apart.timeline[(apart.timeline["kind"] == "transfer") & apart.timeline["name"].str.startswith("weights ")]
    assert set(f2["op"]) == {"mid", "head"} and f2[f2["op"] == "head"]["bytes"].iloc[0] == W
    assert apart.metrics["total_latency_s"] > owner.metrics["total_latency_s"]


def _random_states(g, devices, n, seed):
    rng = random.Random(seed)
    ops = list(g.ops)
    for _ in range(n):
        dev = {o: rng.choice(devices) for o in ops}
        yield State(dev, {o for o in ops if rng.random() < 0.5 and g.op(o).weight_bytes}, set())


@pytest.mark.parametrize("graph", ["hand", "gpt2_train"])
def test_engine_terms_and_memory_plan_match_the_evaluator(graph):
    """The additive total latency (claim 5) equals evaluate's, and the memory plan's weights equal
    resident_weight_bytes, for random placements and residencies of graphs with tied weights."""
    if graph == "hand":
        g, s = tied_graph(), hand_system()
        devices = ["a", "b", "h"]
    else:
        g = gpt2_small(seq_len=8, n_layers=1, vocab=512, n_ctx=16, training=True)
        from hetsched.io.systems import toy_system

        s = toy_system()
        devices = ["gpu0", "cpu0"]
    assert TiedWeights.of(g)
    ctx = Ctx(g, s)
    for st in _random_states(g, devices, 12, seed=1):
        ev = evaluate(g, s, Placement(st.device, st.w_res, st.t_res), check_memory=False, check_support=False)
        assert ctx.total_latency(st) == pytest.approx(ev.metrics["total_latency_s"], rel=1e-9)
        plan = MemoryPlan(ctx, st, {})
        want = resident_weight_bytes(g, Placement(st.device, st.w_res, st.t_res))
        assert {d: plan.used[d] for d in want} == pytest.approx({d: float(v) for d, v in want.items()})


@pytest.mark.parametrize("objective", ["total_latency", "makespan"])
def test_mover_keeps_terms_and_plan_exact_through_moves_and_undos(objective):
    g, s = tied_graph(), hand_system()
    ctx = Ctx(g, s)
    st = State({o: "a" for o in g.ops})
    mv = Mover(ctx, st, objective, {"a": 1e9, "b": 1e9})
    mv.redecide()
    # the head reads the embedding's resident copy: nothing to fetch, nothing more to keep
    assert st.w_res == {"emb", "mid"} and mv.plan.used["a"] == MemoryPlan(ctx, st, {}).used["a"]
    assert resident_weight_bytes(g, Placement(st.device, st.w_res)) == {"a": W + 1000}
    assert mv.opterm["head"] == pytest.approx(ctx.comp("head", "a"))
    assert mv.total == pytest.approx(ctx.total_latency(st))
    base = (mv.total, dict(mv.plan.used), set(st.w_res))
    mv.commit()
    recs = [mv.move("head", "b"), mv.move("emb", "b"), mv.move("mid", "b")]
    assert mv.total == pytest.approx(ctx.total_latency(st))
    if objective == "makespan":  # re-timed from the first op the moves touched: the clock's own run
        assert mv.value() == pytest.approx(ctx.simulate(st)[0])
    assert mv.plan.used["b"] == pytest.approx(MemoryPlan(ctx, st, {}).used["b"])
    for rec in reversed(recs):
        mv.undo(rec)
    assert (mv.total, dict(mv.plan.used), set(st.w_res)) == (pytest.approx(base[0]), base[1], base[2])


def test_memory_plan_lets_both_readers_of_a_tied_weight_stay_on_chip():
    """A device with room for the weight once (not twice): the locality phase keeps both readers'
    weights, since the head's copy is the embedding's."""
    g = tied_graph()
    s = hand_system(mem_a=W + 1000 + 3000)
    res = mapping.h2h(g, s, occupancy_threshold=1.0)
    kept = set(res.placement.weights_resident)
    on_a = {o for o, d in res.placement.device.items() if d == "a"}
    if {"emb", "head"} <= on_a:
        assert {"emb", "head"} <= kept
    ev = evaluate(g, s, res.placement)
    assert ev.metrics["peak_mem_frac"] <= 1.0


def test_pipeline_stage_counts_a_tied_weight_once():
    from hetsched.io.systems import toy_system
    from hetsched.pipeline.stages import graph_units, split_stages

    g = gpt2_small(seq_len=8, n_layers=2, vocab=512, n_ctx=16)
    u = graph_units(g, toy_system(), ["gpu0"])
    assert u.tied and int(u.stage_weight_bytes(0, u.n)) == g.total_weight_bytes
    one = split_stages(g, toy_system(), devices=["gpu0"], p=1)
    assert one.per_stage["weight_bytes"].iloc[0] == g.total_weight_bytes
    two = split_stages(g, toy_system(), devices=["gpu0", "gpu0"], p=2)
    wte_head = g.op("wte").weight_bytes
    assert two.per_stage["weight_bytes"].sum() == g.total_weight_bytes + wte_head  # each stage holds its copy


def test_zoo_and_training_graph_mark_shared_weights():
    g = gpt2_small(seq_len=8, n_layers=1, vocab=512, n_ctx=16)
    head = g.op("lm_head")
    assert head.attrs["shares_weights_with"] == "wte" and head.attrs["shared_weight_bytes"] == head.weight_bytes
    t = training_graph(g)
    assert t.total_weight_bytes == g.total_weight_bytes  # backward ops re-read, never add, weights
    assert t.op("lm_head.grad").attrs["shares_weights_with"] == "wte"
    assert t.op("h0.mlp.c_fc.grad").attrs["shares_weights_with"] == "h0.mlp.c_fc"
    for o in t.ops.values():
        if o.attrs.get("phase") == "backward" and o.weight_bytes:
            assert o.attrs["shared_weight_bytes"] == o.weight_bytes, o.name


def test_memory_repair_sends_a_tied_weight_back_with_every_resident_reader_in_one_round(monkeypatch):
    """The embedding's weights are held once for it and the head: evicting only one of the two frees
    nothing (the other then holds the copy), so the repair sends both back in the same round."""
    import hetsched.mapping.result as R
    from hetsched.results import StepLog

    g = tied_graph()
    s = hand_system(mem_a=W + 1000 + 1500)  # the weights fit, but not with the activations staged around them
    ctx = Ctx(g, s)
    st = State({o: "a" for o in g.ops}, {"emb", "mid", "head"}, set())
    calls = []
    monkeypatch.setattr(R, "evaluate", lambda *a, **k: calls.append(1) or evaluate(*a, **k))
    log = StepLog()
    res = R.finish(ctx, st, log, phase="test", params={}, initial_state={})
    evicted = [x.subject for x in res.steps if x.action == "evict"]
    i = evicted.index("emb")
    assert set(evicted[i:i + 2]) == {"emb", "head"}  # together, one step each
    assert res.metrics["peak_mem_frac"] <= 1.0 and len(calls) <= 3 and "emb" not in res.placement.weights_resident
