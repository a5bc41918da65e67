"""The shared result machinery (issue 21): one step log, one lazy-steps class, replay hooks, lazy
timelines, one long-format comparison."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest

from hetsched.io.generators import chain
from hetsched.io.systems import toy_system
from hetsched.results import LazySteps, NullLog, Result, Step, StepLog, StepView, compare_results
from hetsched.timeline import make_timeline


def test_step_log_freezes_into_lazy_steps():
    log = StepLog()
    assert log.add("mark", "a", delta={"a": "gpu0"}) == 0
    log.append(("merge", "a+b", 2.0, 1.0, False, "cycle", {}, {"via": "d"}))
    r = Result(steps=log, initial_state={"a": "cpu0"})
    assert isinstance(r.steps, LazySteps) and len(r.steps) == 2
    assert r.steps[1] == Step(1, "merge", "a+b", 2.0, 1.0, False, "cycle", {}, {"via": "d"})
    assert [s.index for s in r.steps] == [0, 1] and r.steps[-1].index == 1
    assert [s.subject for s in r.steps[0:2]] == ["a", "a+b"]
    assert r.replay(1) == {"a": "gpu0"} and r.replay(-1) == {"a": "cpu0"}
    assert r.steps_frame()["accepted"].tolist() == [True, False]
    with pytest.raises(IndexError):
        r.steps[2]


def test_a_log_goes_on_from_another_and_numbers_by_position():
    first = StepLog()
    first.add("map", "a", delta={"a": "gpu0"})
    r1 = Result(steps=first, initial_state={"a": None})
    # a later phase continues the earlier result's log without touching it
    log = StepLog(r1.steps)
    log.add("map", "b", delta={"b": "cpu0"})
    made = LazySteps(n=2, make=lambda i: Step(7, "tick", str(i), accepted=False))  # a made step's own index is ignored
    log.extend(made)
    log.extend([Step(99, "move", "a", 2.0, 1.0, True, "better", {"a": "cpu0"}, {"why": "x"})])
    r2 = Result(steps=log, initial_state={"a": None})
    assert len(r1.steps) == 1 and len(r2.steps) == 5
    assert [s.index for s in r2.steps] == [0, 1, 2, 3, 4]
    assert [s.subject for s in r2.steps] == ["a", "b", "0", "1", "a"] and r2.steps[4].data == {"why": "x"}
    assert r2.replay(4) == {"a": "cpu0", "b": "cpu0"} and r2.replay(1) == {"a": "gpu0", "b": "cpu0"}
    # a log that keeps nothing, and no steps at all, are still the one log type
    quiet = NullLog()
    assert quiet.add("map", "a") == -1 and len(quiet) == 0
    quiet.append(("map", "a", None, None, True, "", {}, {}))
    assert len(Result(steps=quiet).steps) == 0
    assert isinstance(Result().steps, LazySteps) and Result().replay(-1) == {}


def test_function_built_steps_and_the_apply_hook():
    @dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
    class Counter(Result):
        def _replay_start(self):
            return {"n": 0, "seen": []}

        def _apply(self, state, step):
            state["n"] += step.delta["inc"]
            state["seen"].append(step.index)

        def _replay_end(self, state):
            return {"n": state["n"], "last": state["seen"][-1] if state["seen"] else None}

    steps = LazySteps(n=4, make=lambda i: Step(i, "inc", str(i), accepted=i != 2, delta={"inc": i}))
    r = Counter(steps=steps)
    assert r.replay(3) == {"n": 0 + 1 + 3, "last": 3}
    assert r.replay(-1) == {"n": 0, "last": None}
    # a raw log hands the hook a read-only view with the same attributes
    log = StepLog()
    for i in range(3):
        log.add("inc", str(i), delta={"inc": i})
    views = list(LazySteps(log.freeze().raw()).accepted(2))
    assert all(isinstance(v, StepView) for v in views) and views[2].delta == {"inc": 2} and views[2].index == 2
    assert Counter(steps=log).replay(2) == {"n": 3, "last": 2}


def test_timeline_may_be_built_on_first_access():
    calls = []

    def build(result):
        calls.append(result)
        return make_timeline([dict(lane="x", group="x", name="a", kind="compute", start_s=0.0, end_s=1.0)])

    r = Result(timeline=build)
    assert not calls
    assert len(r.timeline) == 1 and calls == [r]
    assert r.timeline is r.timeline and len(calls) == 1  # built once, then kept
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.timeline = pd.DataFrame()
    assert Result().timeline.empty


def test_compare_results_long_and_wide():
    from hetsched.mapping import h2h, heft
    from hetsched.memory import order_bfs

    g, s = chain(5, seed=1), toy_system()
    res = {"h2h": h2h(g, s), "heft": heft(g, s)}
    long = compare_results(res, metrics=["makespan_s", "total_latency_s"])
    assert list(long.columns) == ["label", "family", "metric", "value"]
    assert long["family"].unique().tolist() == ["mapping"] and len(long) == 4
    assert long.set_index(["label", "metric"]).loc[("heft", "makespan_s"), "value"] == res["heft"].metrics["makespan_s"]
    # results of different families in one table, with a frame from a family compare function
    mem = order_bfs(g)
    frame = pd.DataFrame({"label": ["serial", "patent"], "makespan_s": [2.0, 1.0], "status": ["ok", "ok"]})
    both = compare_results([{"bfs": mem}, frame, res])
    assert set(both["family"]) == {"memory", "", "mapping"}
    assert "status" not in set(both["metric"])  # numbers only in the long form
    wide = compare_results(both, wide=True, metrics=["makespan_s", "peak_bytes"])
    assert wide.set_index("label").loc["patent", "makespan_s"] == 1.0
    assert math.isnan(wide.set_index("label").loc["patent", "peak_bytes"])
    assert wide.set_index("label").loc["bfs", "peak_bytes"] == mem.metrics["peak_bytes"]


def test_partition_comparison_speaks_the_long_format():
    from hetsched.partition import compare_partitions

    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    cmp = compare_partitions(chain(6), s, n_inputs=4)
    long = cmp.long()
    f = cmp.frame.set_index("label")
    for (v, m), val in long.set_index(["label", "metric"])["value"].items():
        assert f.loc[v, m] == pytest.approx(val, nan_ok=True)
    assert set(long["family"]) == {"partition"} and "merge" not in set(long["metric"])
    assert cmp.timeline.equals(cmp.simulations["adjacent, buffered"].timeline)


def test_mapping_compare_speaks_the_long_format_and_keeps_every_run():
    from hetsched.mapping import compare

    g, s = chain(5), toy_system()
    wide = compare(g, s, ["h2h", "heft", "heft"])
    assert wide["label"].tolist() == ["h2h", "heft", "heft#2"]      # a repeated name keeps its own row
    long = compare(g, s, ["h2h", "heft"], long=True)
    f = wide.set_index("label")
    for (lab, m), val in long.set_index(["label", "metric"])["value"].items():
        if m != "runtime_s":                                          # timed per call
            assert f.loc[lab, m] == pytest.approx(val)
    assert set(long["family"]) == {"mapping"} and {"optimises", "status"}.isdisjoint(long["metric"])


def test_list_schedulers_price_a_routed_transfer_as_the_evaluator_does():
    """HEFT's edge cost is the clock's per-hop transfer (issue 21: one transfer formula): with a cost
    model that charges 1 s per ``transfer_s`` call, gpu0 -> fpga0 (two hops via the host) costs 2 s."""
    from hetsched.cost import RooflineCost
    from hetsched.mapping.engine import Ctx
    from hetsched.mapping.listsched import Parts

    class PerCall(RooflineCost):
        def transfer_s(self, nbytes, src, dst):
            return 0.0 if nbytes <= 0 or src == dst else 1.0

    g, s = chain(4), toy_system()
    ctx = Ctx(g, s, PerCall(s))
    parts = Parts(ctx, "pairs")
    (u, v), bs = next(iter(parts.edge_bytes.items()))
    assert len(s.route("gpu0", "fpga0")) == 2
    assert parts.comm(u, v, "gpu0", "fpga0") == pytest.approx(2.0 * len(bs))
    assert parts.comm(u, v, "cpu0", "fpga0") == pytest.approx(1.0 * len(bs))
