"""Property tests of the executor simulator on random graphs (tests/strategies.small_dags)."""

from __future__ import annotations

import random

import networkx as nx
from hypothesis import given
from hypothesis import strategies as st

import hetsched.executor as ex
from hetsched.timeline import check_timeline
from strategies import small_dags

KINDS = ex.OP_KINDS


def random_kinds(g, seed):
    rng = random.Random(seed)
    # mostly GPU kernels, as in real models, with every other kind present often enough
    return {n: rng.choices(KINDS, weights=[6, 1, 2, 1, 1, 1])[0] for n in g.ops}


@given(g=small_dags(), seed=st.integers(0, 1000),
       sp=st.sampled_from(["single", "patent", "nimble"]),
       tp=st.sampled_from(["single", "patent", "inline_one"]),
       pool=st.integers(1, 4),
       costs=st.sampled_from(["cuda", "ideal", "eager"]),
       max_kernels=st.integers(1, 4))
def test_every_policy_gives_a_valid_race_free_run(g, seed, sp, tp, pool, costs, max_kernels):
    kinds = random_kinds(g, seed)
    c = ex.resolve_exec_costs(costs)
    c = ex.ExecCosts(**{**c.__dict__, "max_kernels": max_kernels})
    r = ex.simulate(g, streams=sp, threads=tp, pool_size=pool, costs=c, kinds=kinds)
    check_timeline(r.timeline, g)
    assert r.metrics["n_unordered_edges"] == 0
    assert r.violations(g) == []
    ex.check_races(g, kinds=kinds, streams=r.streams, events=r.events)
    # every op ran once, on the lane its kind says
    tl = r.timeline
    work = tl[tl["kind"].isin(["compute", "transfer"]) & tl["op"].notna()]
    assert sorted(work["op"]) == sorted(g.ops)
    for op, lane in zip(work["op"], work["lane"]):
        if kinds[op] == "cpu_sync":
            assert lane.startswith("thread")
        else:
            assert lane == r.streams[op]
    # bounds
    m = r.metrics
    assert m["makespan_s"] >= m["lb_s"] * (1 - 1e-9)
    assert 0 <= m["device_busy_frac"] <= 1 + 1e-9
    assert len(r.steps) == g.n_ops and set(r.thread_of) == set(g.ops)
    assert all(0 <= t < m["n_threads"] for t in r.thread_of.values())
    # events only where needed: an async producer and a consumer on the host or another stream
    for u, v in r.events:
        assert kinds[u] in ex.ASYNC_KINDS
        assert kinds[v] == "cpu_sync" or r.streams[u] != r.streams[v]


@given(g=small_dags(), seed=st.integers(0, 1000))
def test_nimble_streams_are_chains(g, seed):
    kinds = random_kinds(g, seed)
    s = ex.assign_streams(g, "nimble", kinds=kinds)
    closure = nx.transitive_closure_dag(g.nx)
    by: dict[str, list[str]] = {}
    for n, st_ in s.items():
        by.setdefault(st_, []).append(n)
    for ops in by.values():
        for i, a in enumerate(ops):
            for b in ops[i + 1:]:
                assert closure.has_edge(a, b) or closure.has_edge(b, a)


@given(g=small_dags(), seed=st.integers(0, 1000))
def test_more_device_concurrency_never_hurts_nimble_on_ideal_host(g, seed):
    # with zero host overheads and one thread, only the device limits matter
    kinds = {n: "gpu_async" for n in g.ops}
    one = ex.simulate(g, streams="nimble", kinds=kinds, costs={"dispatch_s": 0, "launch_s": 0, "event_record_s": 0,
                                                               "event_wait_s": 0, "event_sync_s": 0, "wakeup_s": 0,
                                                               "max_kernels": 1})
    many = ex.simulate(g, streams="nimble", kinds=kinds, costs={"dispatch_s": 0, "launch_s": 0, "event_record_s": 0,
                                                                "event_wait_s": 0, "event_sync_s": 0, "wakeup_s": 0,
                                                                "max_kernels": 64})
    # one kernel at a time: exactly the total work; unbounded: exactly the critical path
    assert abs(one.makespan_s - sum(one.durations_s.values())) <= 1e-9 * one.makespan_s + 1e-15
    assert abs(many.makespan_s - many.metrics["lb_critical_path_s"]) <= 1e-9 * many.makespan_s + 1e-15
