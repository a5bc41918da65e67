"""The result contract, checked over every family's results (issue 21).

Every algorithm returns a frozen result with ``metrics`` (numbers), ``params``, ``steps`` (a
replayable decision log) and a ``timeline`` in the one format, non-empty where the family has a
schedule: in seconds, or, for a memory order (which has no duration of its own), in steps, which
the frame says (``attrs["time_unit"] == "step"``) and which are checked as steps. One case per public result-returning function; each check is its own test,
so a failure names the family and the broken promise. Nothing here is skipped: a family that does
not conform yet fails here until its owner fixes it.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import pickle
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import pytest

from hetsched.cost import RooflineCost
from hetsched.io.generators import chain, fork_join, layered
from hetsched.io.systems import toy_system
from hetsched.results import LazySteps, Result
from hetsched.timeline import check_timeline


@dataclasses.dataclass
class Case:
    """How to make one family's result and what its replay and timeline promise."""

    make: Callable[[], Result]
    graph: Any = None  # for check_timeline's dependency check (op rows)
    deps: Callable[[Result], Sequence] | None = None  # or pairs on the op column
    schedule: bool = True  # the family has a schedule: its timeline is not empty
    times: Callable[[Result], None] | None = None  # how its times are checked (default: seconds, makespan_s)
    rerun: Callable[[Result], None] | None = None  # replay(k) equals re-running the algorithm up to k


def _merge_graph():
    from hetsched.partition.examples import merge_outcomes

    return merge_outcomes()


MG, MS = _merge_graph()
LG = layered(3, 3, seed=4)
TS = toy_system()


# ---------------------------------------------------------------- per-family "re-run to k" checks
def _mapping_rerun(r):
    from hetsched.mapping import map_compute_first

    st = r.replay(r.n_steps - 1)
    assert st["device"] == dict(r.placement.device)
    assert set(st["weights_resident"]) == set(r.placement.weights_resident)
    assert set(st["tensors_resident"]) == set(r.placement.tensors_resident)
    if r.phase == "h2h":  # running only the first phase gives the state at that phase's last step
        _, last = r.phase_bounds()["compute_first"]
        cf = map_compute_first(r.graph, r.system)
        assert r.replay(last)["device"] == dict(cf.placement.device)


def _partition_rerun(r):
    from hetsched.partition import partition_by_support

    n = r.graph.n_ops  # one marking step per op comes first
    unmerged = partition_by_support(r.graph, MS, merge=None)
    st = r.replay(n - 1)
    assert st["backend"] == dict(unmerged.assignment) and all(k == v for k, v in st["group"].items())
    end = r.replay(r.n_steps - 1)
    assert end["backend"] == dict(r.assignment)
    blocks: dict[str, set] = {}
    for op, rep in end["group"].items():
        blocks.setdefault(rep, set()).add(op)
    assert sorted(map(sorted, blocks.values())) == sorted(sorted(v) for v in r.groups.values())


def _buffered_rerun(r):
    for k, s in enumerate(r.steps):
        st = r.replay(k)
        assert st["time_s"] == s.data["start_s"] and st["running"][s.data["backend"]] == (s.subject, s.data["input"])


def _memory_rerun(r):
    assert tuple(r.replay(r.n_steps - 1)["order"]) == tuple(r.order)


def _exact_rerun(r):
    """The exact search's log is its questions "is there an order within B bytes?": the accepted ones
    lower the best order, so replaying them ends at the proven order, and a refused one is answered."""
    _memory_rerun(r)
    assert r.status == "optimal" and r.peak_bytes == r.bound_bytes
    kept = [s for s in r.steps if s.accepted]
    assert all(s.after < s.before for s in kept)
    assert all(int(s.data["budget_bytes"]) < r.peak_bytes for s in r.steps if not s.accepted)


def _ilp_rerun(r):
    """An order ILP proven optimal: the order is the log's end state and its peak meets the bound."""
    _memory_rerun(r)
    assert r.status == "optimal" and r.peak_bytes == pytest.approx(r.bound_bytes)


def _map_ilp_rerun(r):
    """A tiny MILP is solved to optimality: the warm start, then the solve that (at worst) keeps it."""
    _mapping_rerun(r)
    assert r.status == "optimal" and r.ilp.proven
    assert [s.action for s in r.steps][:2] == ["warm_start", "solve"] and r.steps[1].after <= r.steps[1].before


def _search_rerun(r):
    """Every kept search move lowers the objective, so the log's values fall to the result's."""
    _mapping_rerun(r)
    kept = [s.after for s in r.steps if s.accepted and s.action in ("move", "swap", "restart")]
    assert all(b < a for a, b in zip(kept, kept[1:])) or len(kept) < 2


def _executor_rerun(r):
    assert set(r.replay(r.n_steps - 1)) == set(r.kinds)


def _pipeline_rerun(r):
    last = r.replay(r.n_steps - 1)
    assert last["time_s"] == max(float(x) for x in r.start_s)
    assert r.replay(-1)["done"] == 0
    # the state at step k is the run at the k-th start: every earlier start has happened
    k = r.n_steps // 2
    st = r.replay(k)
    assert st["time_s"] == r.steps[k].before and st["done"] <= k


def _synth_rerun(r):
    """The log ends at the schedule returned; until the search first restarts, every state it keeps
    is no slower than the one before; the solver facts are typed fields."""
    assert r.replay(r.n_steps - 1)["orders"] == r.schedule.to_text()
    assert r.status == "optimal" and r.solver == "highs" and isinstance(r.bound, float) and r.gap == pytest.approx(0.0, abs=1e-6)
    kept = []
    for s in r.steps:
        if s.action == "restart":
            break
        if s.accepted and s.action in ("warm_start", "list", "swap", "move", "fill"):
            kept.append(s.after)
    assert kept and all(b <= a * (1 + 1e-12) for a, b in zip(kept, kept[1:]))


def _split_rerun(r):
    # one step per stage in cut order: its units are exactly the cut's
    assert [s.data["first_unit"] for s in r.steps] + [r.steps[-1].data["last_unit"] + 1] == list(r.cuts)


# ---------------------------------------------------------------- per-family checks of the times
def _priced_by_the_cost_model(r):
    """A partition's serial run: every op's row lasts what the cost model prices it at."""
    cost = RooflineCost(MS, r.graph)
    comp = r.timeline[r.timeline.kind == "compute"]
    assert len(comp)
    for op, dev, s, e in zip(comp["op"], comp["device"], comp["start_s"], comp["end_s"]):
        assert e - s == pytest.approx(cost.compute_s(op, dev), rel=1e-9)


def _comparison_seconds(r):
    best = r.simulations["adjacent, buffered"]
    assert r.timeline["end_s"].max() == pytest.approx(best.metrics["makespan_s"])


def _policy_seconds(r):
    assert r.timeline["end_s"].max() == pytest.approx(r.results["patent"].metrics["makespan_s"])


def _split_seconds(r):
    """One micro-batch through a split: each compute row lasts its stage's priced F or B time, and the
    rows run back to back (so the span is their sum)."""
    tl, ps = r.timeline, r.per_stage.set_index("stage")
    comp = tl[tl.kind == "compute"]
    for op, st, s, e in zip(comp["op"], comp["stage"], comp["start_s"], comp["end_s"]):
        assert e - s == pytest.approx(ps.loc[st, "f_s" if op.endswith("F") else "b_s"], rel=1e-12)
    assert tl["end_s"].max() > 0
    assert tl["end_s"].max() == pytest.approx((tl["end_s"] - tl["start_s"]).sum(), rel=1e-12)


def _order_steps(r):
    """A memory order counts steps: op i runs from step i to i + 1, the frame says so, and no
    seconds are claimed (no makespan_s: every order of a graph would have the same one)."""
    from hetsched.timeline import memory_usage

    tl = r.timeline
    assert tl.attrs.get("time_unit") == "step" and "makespan_s" not in r.metrics
    comp = tl[tl.kind == "compute"]
    assert comp["op"].tolist() == list(r.order)
    assert comp["start_s"].tolist() == list(range(len(r.order))) and (comp["end_s"] - comp["start_s"] == 1.0).all()
    assert float(tl["end_s"].max()) == r.metrics["n_ops"]
    assert int(memory_usage(tl)["bytes"].max()) == r.peak_bytes


def _sweep_seconds(r):
    assert r.timeline["end_s"].max() > 0 and len(r.timeline[r.timeline.kind == "compute"])


def _cases() -> dict[str, Case]:
    from hetsched import executor as ex
    from hetsched import mapping as mp
    from hetsched import memory as mem
    from hetsched import partition as pa
    from hetsched import pipeline as pp

    g_map = chain(6, seed=2)
    part = pa.partition_by_support(MG, MS)
    fj = fork_join(3, 2, seed=1)
    sched = pp.interleaved_1f1b(4, 2, 8)
    return {
        "mapping.h2h": Case(lambda: mp.h2h(g_map, TS), graph=g_map, rerun=_mapping_rerun),
        "mapping.heft": Case(lambda: mp.heft(LG, TS), graph=LG, rerun=_mapping_rerun),
        "mapping.cpop": Case(lambda: mp.cpop(LG, TS), graph=LG, rerun=_mapping_rerun),
        "mapping.peft": Case(lambda: mp.peft(LG, TS), graph=LG, rerun=_mapping_rerun),
        "mapping.map_search": Case(lambda: mp.map_search(LG, TS, max_evals=200, seed=1), graph=LG,
                                   rerun=_search_rerun),
        "mapping.map_ilp": Case(lambda: mp.map_ilp(chain(4, seed=1), TS, time_limit_s=20), graph=chain(4, seed=1),
                                rerun=_map_ilp_rerun),
        "mapping.remap": Case(lambda: mp.remap(mp.map_compute_first(g_map, TS)), graph=g_map, rerun=_mapping_rerun),
        "mapping.brute_force": Case(lambda: mp.brute_force(chain(4, seed=1), TS), graph=chain(4, seed=1),
                                    rerun=_mapping_rerun),
        "partition.partition_by_support": Case(lambda: pa.partition_by_support(MG, MS), graph=MG,
                                               times=_priced_by_the_cost_model, rerun=_partition_rerun),
        "partition.simulate_buffered": Case(lambda: pa.simulate_buffered(part, MS, n_inputs=4, buffer_depth=2, rows="op"),
                                            graph=MG, rerun=_buffered_rerun),
        "partition.compare_partitions": Case(lambda: pa.compare_partitions(MG, MS, n_inputs=4), times=_comparison_seconds),
        "partition.best_buffer_depth": Case(lambda: pa.best_buffer_depth(part, MS, n_inputs=6, depths=(1, 2)),
                                            times=_sweep_seconds),
        "pipeline.simulate": Case(lambda: pp.simulate(sched, costs={"F": 1e-3, "B": 2e-3}),
                                  deps=lambda r: pp.timeline_deps(r.schedule), rerun=_pipeline_rerun),
        "pipeline.simulate[lockstep, sender cache]": Case(
            lambda: pp.simulate(pp.interleaved_1f1b(4, 2, 10), costs={"F": 1e-3, "B": 2e-3, "activation_bytes": 1e6},
                                comm={"latency_s": 1e-4, "bandwidth_Bps": 1e9, "lockstep": True}, cache="sender"),
            deps=lambda r: pp.timeline_deps(r.schedule), rerun=_pipeline_rerun),
        "pipeline.synthesize": Case(
            lambda: pp.synthesize({"F": [1e-3, 1.2e-3, 0.8e-3], "B": 2e-3, "activation_bytes": 1.0}, p=3, m=4,
                                  memory_cap_bytes="1f1b", method="milp", time_limit_s=20),
            deps=lambda r: pp.timeline_deps(r.schedule), rerun=_synth_rerun),
        "pipeline.split_stages": Case(lambda: pp.split_stages(chain(8, seed=1), TS, devices=["gpu0", "cpu0"], p=2),
                                      # one micro-batch: forward down the stages, backward back up
                                      deps=lambda r: pp.timeline_deps(pp.one_f_one_b(len(r.cuts) - 1, 1)),
                                      times=_split_seconds, rerun=_split_rerun),
        "memory.order_bfs": Case(lambda: mem.order_bfs(LG), rerun=_memory_rerun, times=_order_steps),
        "memory.order_patent": Case(lambda: mem.order_patent(LG), rerun=_memory_rerun, times=_order_steps),
        "memory.optimize_order": Case(lambda: mem.optimize_order(LG, method="heuristic"), rerun=_memory_rerun,
                                      times=_order_steps),
        "memory.order_exact": Case(lambda: mem.order_exact(LG, time_limit_s=20), rerun=_exact_rerun, times=_order_steps),
        "memory.order_ilp": Case(lambda: mem.order_ilp(chain(5, seed=1), time_limit_s=20), rerun=_ilp_rerun,
                                 times=_order_steps),
        "executor.simulate": Case(lambda: ex.simulate(fj, streams="patent", threads="patent", pool_size=2),
                                  graph=fj, rerun=_executor_rerun),
        "executor.compare_policies": Case(lambda: ex.compare_policies(fj), times=_policy_seconds),
    }


CASES = _cases()
_MADE: dict[str, Result] = {}


def result(name: str) -> Result:
    if name not in _MADE:
        _MADE[name] = CASES[name].make()
    return _MADE[name]


NAMES = sorted(CASES)


# ---------------------------------------------------------------- shape
@pytest.mark.parametrize("name", NAMES)
def test_shape(name):
    r = result(name)
    assert isinstance(r, Result)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.metrics = {}
    with pytest.raises(TypeError):
        r.metrics["x"] = 1.0
    bad = {k: v for k, v in r.metrics.items()
           if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v))}
    assert not bad, f"metrics that are not finite numbers: {bad}"
    assert isinstance(r.params, Mapping) and isinstance(r.initial_state, Mapping)
    assert isinstance(r.steps, Sequence)
    n = len(r.steps)
    for k in sorted({0, n // 2, n - 1}) if n else ():
        s = r.steps[k]
        assert s.index == k and isinstance(s.action, str) and isinstance(s.reason, str) and s.reason
    assert r.steps_frame().shape == (n, 7)


@pytest.mark.parametrize("name", NAMES)
def test_pickles(name):
    """A result crosses processes (a sweep's workers, a cache on disk) and comes back the same and
    still frozen: metrics, params, timeline, steps and the replayed state."""
    r = CASES[name].make()  # fresh: its timeline and steps may still be lazy
    # a graph whose caches hold the memory searches' tables (local functions) pickles all the same
    from hetsched.memory.feasible import atables
    from hetsched.memory.model import compile_graph

    if CASES[name].graph is not None:
        atables(compile_graph(CASES[name].graph))
    q = pickle.loads(pickle.dumps(r))
    assert type(q) is type(r)
    assert dict(q.metrics) == dict(r.metrics) and q.params == r.params
    with pytest.raises(TypeError):
        q.metrics["x"] = 1.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.metrics = {}
    pd.testing.assert_frame_equal(q.timeline, r.timeline)
    assert q.n_steps == r.n_steps and q.steps_frame()[["action", "subject", "accepted"]].equals(
        r.steps_frame()[["action", "subject", "accepted"]])
    for k in sorted({-1, q.n_steps // 2, q.n_steps - 1}):
        if k < q.n_steps:
            assert q.replay(k) == r.replay(k)


# ---------------------------------------------------------------- one log, one replay
@pytest.mark.parametrize("name", NAMES)
def test_uses_the_shared_step_log_and_replay_hooks(name):
    """Steps are the shared LazySteps (written through a StepLog, or a view ``LazySteps(n=, make=)``),
    never a hand-numbered list; the state comes from the replay hooks (``_replay_start``/``_apply``/
    ``_replay_end`` or ``_replay``), never an override of ``replay``."""
    r = result(name)
    assert isinstance(r.steps, LazySteps), f"steps are a {type(r.steps).__name__}, not the shared log"
    assert type(r).replay is Result.replay, f"{type(r).__name__} overrides replay() instead of its hooks"


# ---------------------------------------------------------------- replay
@pytest.mark.parametrize("name", NAMES)
def test_replay(name):
    r = result(name)
    n = r.n_steps
    for k in (-2, n):
        with pytest.raises(IndexError):
            r.replay(k)
    for k in sorted({-1, 0, n // 3, n // 2, n - 1}):
        if k < n:
            st = r.replay(k)
            assert isinstance(st, dict)
            assert r.replay(k) == st  # a pure function of the log
    # re-running the algorithm logs the same decisions, so its replay(k) is the same state
    again = CASES[name].make()
    assert again.n_steps == n
    for k in sorted({-1, n // 2, n - 1}):
        if k < n:
            assert again.replay(k) == r.replay(k)
    if CASES[name].rerun is not None:
        CASES[name].rerun(r)


# ---------------------------------------------------------------- timeline
@pytest.mark.parametrize("name", NAMES)
def test_timeline(name):
    case = CASES[name]
    r = result(name)
    tl = r.timeline
    if case.deps is not None:
        check_timeline(tl, deps=case.deps(r))
    else:
        check_timeline(tl, case.graph)
    if not case.schedule:
        return
    assert len(tl), "the family has a schedule but its timeline is empty"
    if case.times is not None:
        case.times(r)
        return
    # times are seconds: the timeline ends at the makespan the metrics report in seconds
    assert "makespan_s" in r.metrics, "a timeline in seconds comes with metrics['makespan_s']"
    work = tl[tl.kind != "alloc"]
    assert float(work["end_s"].max()) == pytest.approx(r.metrics["makespan_s"], rel=1e-9)
    assert not np.allclose(work["end_s"] - work["start_s"], 1.0), "every row lasts exactly 1: step units, not seconds"
