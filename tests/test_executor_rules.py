"""Seed 004's rules as the patent text states them, on the bundled graphs that fire each (issues 15, 16, 20).

From ``../shared/seeds/004_a60aed1db7e14913.txt``: claim 1 (current op sync: one sync successor
stays in the current thread, the others go to "fourth" threads different from it; an async
successor goes to a "fifth" thread different from the current one and the fourth ones), claim 3
(kernels of async ops on a first stream, of sync ops on a second), claim 4 (async ops to a first
thread, sync ops to a second), claim 5 (current op async: an async successor stays, a sync one
goes to another thread); the description of fig. 1 (an op may have several kernels, one per
device; the executor calls the one for the current device) and the devices whose copies block.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import small_dags

import hetsched.executor as ex
from hetsched.errors import HetschedError, UnknownNameError
from hetsched.graph import OpGraph
from hetsched.io import load_graph
from hetsched.io.systems import toy_system
from hetsched.timeline import check_timeline

PATENT_RULES = {"claim4-async-root", "claim4-sync-root", "claim5-async-async", "claim5-async-sync",
                "claim1-sync-sync-keep", "claim1-sync-sync-other", "claim1-sync-async"}


@pytest.fixture(scope="module")
def rules_graph():
    return load_graph("executor_thread_rules")


def run(g, pool=4, **kw):
    return ex.simulate(g, streams="patent", threads="patent", pool_size=pool, **kw)


def test_the_bundled_graph_is_the_builders(rules_graph):
    assert rules_graph.summary() == ex.graphs.thread_rules_graph(name="executor_thread_rules").summary()


def test_every_thread_rule_fires(rules_graph):
    r = run(rules_graph)
    fired = set(ex.rules_fired(r)["rule"])
    assert PATENT_RULES <= fired and r.metrics["n_rule_fallbacks"] == 0
    for s in r.steps:  # every decision names its claim
        assert s.data["claim"] == ex.THREAD_RULES[s.data["rule"]][0] and s.data["claim"] in s.reason
    check_timeline(r.timeline, rules_graph)
    assert r.metrics["n_unordered_edges"] == 0 and r.violations(rules_graph) == []


def test_claim1_on_the_sync_op_with_several_successors(rules_graph):
    r = run(rules_graph)
    th = r.thread_of
    cur = th["nms"]
    assert r.kinds["nms"] == "gpu_sync"
    sync_succ = ["d2h_boxes", "d2h_scores", "count"]
    stay = [s for s in sync_succ if th[s] == cur]
    fourth = {th[s] for s in sync_succ if th[s] != cur}
    assert len(stay) == 1 and len(fourth) == 2  # one stays; the others on other (distinct) threads
    assert th["gather"] != cur and th["gather"] not in fourth  # the fifth thread
    by_op = {s.subject: s for s in r.steps}
    assert by_op["gather"].data["rule"] == "claim1-sync-async" and by_op["gather"].data["trigger"] == "nms"
    # claim 5: the async op that made nms ready sent it to another thread
    assert by_op["nms"].data["rule"] == "claim5-async-sync" and th["nms"] != th[by_op["nms"].data["trigger"]]


def test_claim3_sync_kernels_on_a_second_stream_and_claim4_roots(rules_graph):
    r = run(rules_graph)
    assert r.streams["nms"] == r.streams["count"] == "gpu0:sync"
    assert r.streams["backbone0"] == r.streams["gather"] == "gpu0:compute"
    assert "claim 3" in {s.subject: s for s in r.steps}["nms"].reason
    assert r.thread_of["h2d_image"] == 0 and r.thread_of["load_labels"] != 0  # claim 4: async / sync roots
    # several host threads are busy with sync waits at once (issue 22's default scenario)
    tl = r.timeline
    waits = tl[tl["kind"] == "blocked"]
    assert waits["lane"].nunique() >= 2 and r.metrics["n_threads_used"] == 4


def test_two_threads_cannot_meet_claim1_and_say_so(rules_graph):
    r = run(rules_graph, pool=2)
    fb = [s for s in r.steps if s.data["fallback"]]
    # nms has three sync successors: one may stay, the other two have no other sync thread to go to
    assert r.metrics["n_rule_fallbacks"] == len(fb) == 2
    assert {s.subject for s in fb} <= {"d2h_boxes", "d2h_scores", "count"}
    for s in fb:
        assert s.data["rule"] == "claim1-sync-sync-other-fallback" and s.reason.startswith("RULE FALLBACK")
        assert "no other thread" in s.reason and s.data["thread"] == r.thread_of["nms"]
    f = ex.rules_fired(r).set_index("rule")
    assert bool(f.loc["claim1-sync-sync-other-fallback", "fallback"]) and f["count"].sum() == rules_graph.n_ops


def test_one_thread_falls_back_everywhere_it_must(rules_graph):
    r = run(rules_graph, pool=1)
    assert set(r.thread_of.values()) == {0}
    fired = set(ex.rules_fired(r)["rule"])
    assert {"claim4-sync-root-fallback", "claim5-async-sync-fallback", "claim1-sync-async-fallback"} <= fired
    assert r.metrics["n_rule_fallbacks"] == sum(ex.is_fallback(s.data["rule"]) for s in r.steps) > 0


def test_op_kinds_are_editable_through_rules(rules_graph):
    # the documented override mapping: op name (or type) -> kind, accepted by every executor function
    r = run(rules_graph, rules={"nms": "gpu_async"})
    assert r.kinds["nms"] == "gpu_async" and r.streams["nms"] == "gpu0:compute"
    assert {s.subject: s for s in r.steps}["nms"].data["rule"] == "claim5-async-async"
    t = ex.kind_table(rules_graph, rules={"nms": "gpu_async", "MemcpyD2H": "cpu_sync"}).set_index("op")
    assert t.loc["nms", "source"] == "rule for the op" and t.loc["d2h_boxes", "source"] == "rule for MemcpyD2H"
    assert bool(t.loc["nms", "async"]) and t.loc["d2h_boxes", "device"] == "cpu0"
    cmp = ex.compare_policies(rules_graph, rules={"nms": "gpu_async"})
    assert cmp.results["patent"].kinds["nms"] == "gpu_async"
    with pytest.raises(HetschedError, match="warp"):
        run(rules_graph, rules={"nms": "warp"})


# ---------------------------------------------------------------------------- kernels and copy engines
def test_ops_with_kernels_on_several_devices():
    g = load_graph("executor_multi_device")
    r = ex.simulate(g, streams="patent", threads="patent")
    dev = {n: r.timeline[(r.timeline["op"] == n) & (r.timeline["kind"].isin(["compute", "transfer"]))]["device"].iat[0]
           for n in ("conv0", "resample0", "tokenize")}
    assert dev == {"conv0": "gpu0", "resample0": "fpga0", "tokenize": "cpu0"}
    assert {s.split(":")[0] for s in r.streams.values()} == {"gpu0", "fpga0"}
    # the two devices' kernels run side by side
    gpu = [(r.op_start_s[n], r.op_end_s[n]) for n in r.kinds if r.streams.get(n) == "gpu0:compute"]
    fpga = [(r.op_start_s[n], r.op_end_s[n]) for n in r.kinds if r.streams.get(n) == "fpga0:compute"]
    assert any(a < d and c < b for a, b in gpu for c, d in fpga)
    # resample has an FPGA kernel only: run off the executor's device, counted and said
    assert r.metrics["n_kernel_fallbacks"] == sum(1 for n in g.ops if "gpu" not in g.ops[n].attrs["kernels"]
                                                  and g.ops[n].attrs["kernels"] != ["cpu"])
    step = {s.subject: s for s in r.steps}["resample0"]
    assert "kernel fallback" in step.reason and step.data["device"] == "fpga0"
    check_timeline(r.timeline, g)


def test_placement_picks_the_kernel_and_a_missing_kernel_falls_back():
    g = ex.graphs.multi_device_graph(2)
    res = ex.resolve_ops(g, placement={"conv0": "fpga0", "resample0": "gpu0"})
    assert res.devices["conv0"] == "fpga0" and "conv0" not in res.kernel_fallbacks  # it has an FPGA kernel
    assert res.devices["resample0"] == "fpga0" and "no kernel for gpu0" in res.kernel_fallbacks["resample0"]
    g.ops["conv1"].attrs["kernels"] = ["npu", "xpu"]  # kernels for devices this system lacks
    with pytest.raises(HetschedError, match="conv1"):
        ex.resolve_ops(g)
    with pytest.raises(HetschedError, match="kernels"):
        ex.resolve_ops(g, kernels={"conv1": "gpu"})  # a string, not a list
    with pytest.raises(UnknownNameError):
        ex.resolve_ops(g, kernels={"nope": ["gpu"]})
    res = ex.resolve_ops(g, kernels={"conv1": [{"device": "gpu", "kind": "gpu_sync"}]})
    assert res.kinds["conv1"] == "gpu_sync" and res.sources["conv1"] == "kernel"


def test_a_synchronous_copy_engine_blocks_the_host():
    g = ex.graphs.multi_device_graph(3)
    a = ex.simulate(g, streams="patent", threads="patent")
    b = ex.simulate(g, streams="patent", threads="patent", sync_copy_devices=["fpga0"])
    assert a.kinds["fpga_in"] == "copy_h2d" and b.kinds["fpga_in"] == "copy_h2d_sync"
    assert a.kinds["gpu_in"] == b.kinds["gpu_in"] == "copy_h2d"  # the GPU's copies stay asynchronous
    tl = b.timeline
    t = b.thread_of["fpga_in"]
    blocked = tl[(tl["lane"] == f"thread{t}") & (tl["kind"] == "blocked") & (tl["name"] == "wait fpga_in")]
    assert len(blocked) == 1 and blocked["end_s"].iat[0] >= b.op_end_s["fpga_in"]  # held until the copy ends
    assert b.streams["fpga_in"] == "fpga0:h2d" and not tl[tl["lane"] == "thread0"]["name"].eq("wait fpga_in").any()
    # the same through the system: a device whose attrs say its copies are synchronous
    s = toy_system()
    s = s.with_devices({"fpga0": type(s.device("fpga0"))(**{**s.device("fpga0").__dict__,
                                                              "attrs": {"sync_copies": True}})})
    assert ex.classify(g, system=s)["fpga_in"] == "copy_h2d_sync"
    with pytest.raises(UnknownNameError):
        ex.classify(g, sync_copy_devices=["tpu9"])


def test_compare_policies_on_an_empty_graph_is_a_documented_result():
    cmp = ex.compare_policies(OpGraph("empty"))
    assert list(cmp.frame["label"])[-1] == "lower bound" and (cmp.frame["makespan_s"] == 0).all()
    assert cmp.metrics["patent_vs_one_thread"] == cmp.metrics["nimble_vs_patent"] == cmp.metrics["patent_vs_serial"] == 1.0


@pytest.mark.parametrize("threads", ["single", "patent", "inline_one"])
def test_every_dispatch_step_is_claim_tagged(rules_graph, threads):
    r = ex.simulate(rules_graph, streams="patent", threads=threads, pool_size=3)
    assert all(s.data["rule"] in ex.THREAD_RULES for s in r.steps)
    assert r.replay(r.n_steps - 1) == {n: f"thread{t}" for n, t in r.thread_of.items()}


def test_what_a_dispatch_walker_reads(rules_graph):
    from hetsched.plot.executor import executor_gantt, rule_bars

    r = run(rules_graph, pool=2)
    f = ex.dispatch_frame(r)
    assert len(f) == r.n_steps == rules_graph.n_ops and f["index"].tolist() == list(range(r.n_steps))
    assert f["fallback"].sum() == r.metrics["n_rule_fallbacks"]
    k = int(f.index[f["op"] == "gather"][0])
    fig = executor_gantt(r, step=k)
    assert fig.layout.shapes[0].x0 > 0  # the cursor sits at gather's dispatch time
    outlined = [t for t in fig.data if t.type == "bar" and any(w == 3 for w in t.marker.line.width)]
    assert outlined  # gather's bars are outlined
    bars = rule_bars(r).data[0]
    assert dict(zip(bars.x, bars.y))["claim1-sync-sync-other-fallback"] == 2


_TABLES = [["gpu"], ["fpga"], ["cpu"], ["gpu", "fpga"], ["fpga0", "cpu"], [{"device": "gpu", "kind": "gpu_sync"}],
           [{"device": "fpga", "kind": "gpu_async"}, "gpu"]]


@settings(max_examples=40, deadline=None)
@given(g=small_dags(max_ops=25), seed=st.integers(0, 10_000),
       sp=st.sampled_from(["single", "patent", "nimble"]), tp=st.sampled_from(["single", "patent", "inline_one"]),
       pool=st.integers(1, 4), sync_fpga=st.booleans())
def test_kernel_tables_and_sync_copies_keep_every_run_valid(g, seed, sp, tp, pool, sync_fpga):
    rng = random.Random(seed)
    kernels = {n: rng.choice(_TABLES) for n in g.ops if rng.random() < 0.5}
    rules = {n: "copy_h2d" for n in g.ops if rng.random() < 0.15}
    sc = ["fpga0"] if sync_fpga else None
    res = ex.resolve_ops(g, kernels=kernels, rules=rules, sync_copy_devices=sc)
    r = ex.simulate(g, streams=sp, threads=tp, pool_size=pool, kernels=kernels, rules=rules, sync_copy_devices=sc)
    check_timeline(r.timeline, g)
    assert r.metrics["n_unordered_edges"] == 0 and r.violations(g) == []
    assert dict(r.kinds) == res.kinds and r.metrics["n_kernel_fallbacks"] == len(res.kernel_fallbacks)
    for n, k in r.kinds.items():
        if k == "copy_h2d_sync":
            assert res.devices[n] == "fpga0" and sync_fpga
        if k != "cpu_sync":
            assert r.streams[n].split(":")[0] == res.devices[n]  # the work runs on the chosen kernel's device
    assert r.metrics["n_rule_fallbacks"] == sum(s.data["fallback"] for s in r.steps)
