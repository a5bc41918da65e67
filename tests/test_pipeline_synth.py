"""Schedule synthesis (issue 31): the lower bound, the heuristic, the MILP, exhaustive enumeration,
memory caps, the decision log and the comparison table."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetsched.errors import CapacityError, ScheduleError
from hetsched.pipeline import (
    PipelineResult,
    Schedule,
    StageCosts,
    bound_terms,
    compare_synthesis,
    exhaustive_synthesis,
    lower_bound,
    model_costs,
    named_schedules,
    one_f_one_b,
    peak_in_flight,
    simulate,
    synthesize,
    validate,
    zb_h2,
)
from hetsched.pipeline.problem import Problem
from hetsched.pipeline.synth_milp import solve_milp
from hetsched.results import SolverRun, compare_results


def _costs(rng, S, *, held=True):
    f = rng.uniform(0.2, 2.0, S)
    b = f * rng.uniform(1.0, 3.0, S)
    w = b * rng.uniform(0.1, 0.7, S)
    return StageCosts(f_s=f, b_s=b, w_s=w, activation_bytes=1e6, held_bytes=rng.uniform(1, 3, S) * 1e6 if held else None)


# ---- the lower bound ------------------------------------------------------------------------------

def test_lower_bound_is_the_textbook_makespan_where_that_is_optimal():
    assert lower_bound({"F": 1.0, "B": 2.0}, p=4, m=8, split_backward=False) == (8 + 4 - 1) * 3.0
    # ZB-H2 reaches m (tF + tI + tW) + (p - 1) tF, the bound (Qi et al.)
    c = {"F": 1.0, "I": 1.0, "W": 1.0}
    lb = lower_bound(c, p=4, m=8)
    assert lb == 8 * 3.0 + 3 * 1.0 == simulate(zb_h2(4, 8), costs=c).metrics["makespan_s"]
    # the link is part of the fill and the drain
    assert lower_bound({"F": 1.0, "B": 2.0, "activation_bytes": 1.0}, p=2, m=4, split_backward=False, comm={"latency_s": 0.5}) == 12 + 1 + 0.5 + 2 + 0.5


def test_bound_terms_name_the_critical_rank():
    t = bound_terms({"F": [1.0, 3.0, 1.0], "B": [2.0, 6.0, 2.0]}, p=3, m=4, split_backward=False)
    assert t["bound_s"].idxmax() == 1 and t.loc[1, "busy_s"] == 4 * 9.0
    assert t.loc[1, "head_s"] == 1.0 and t.loc[1, "tail_s"] == 2.0


@settings(max_examples=30)
@given(st.integers(2, 4), st.integers(1, 8), st.integers(0, 10_000), st.booleans())
def test_no_named_schedule_beats_the_lower_bound(p, m, seed, split):
    c = _costs(np.random.default_rng(seed), p)
    lb = lower_bound(c, p=p, m=m, split_backward=split)
    for s in named_schedules(p, 1, m, split_backward=split).values():
        assert simulate(s, costs=c, timeline=False).metrics["makespan_s"] >= lb * (1 - 1e-12)


# ---- the heuristic ----------------------------------------------------------------------------------

def test_synthesis_returns_a_simulated_schedule_never_slower_than_the_named_ones():
    c = StageCosts(f_s=[1.0, 1.5, 1.0, 1.0], b_s=[2.0, 3.0, 2.0, 2.0])
    r = synthesize(c, p=4, m=8, method="heuristic")
    assert isinstance(r, PipelineResult) and r.method == "heuristic"
    validate(r.schedule)
    again = simulate(r.schedule, costs=c)
    assert again.metrics["makespan_s"] == r.metrics["makespan_s"] == r.timeline["end_s"].max()
    named = {name: simulate(s, costs=c).metrics["makespan_s"] for name, s in named_schedules(4, 1, 8).items()}
    assert r.metrics["makespan_s"] <= min(named.values())
    assert r.metrics["best_named_makespan_s"] == min(named.values())
    assert sorted(r.named["label"]) == sorted(named)
    # it meets the lower bound here, so it is proven optimal without a solver
    assert r.status == "optimal" and r.gap == pytest.approx(0.0, abs=1e-12) and r.solver is None and r.milp is None
    assert isinstance(r.bound, float) and isinstance(r.gap, float) and isinstance(r.status, str)


def test_synthesis_beats_every_named_schedule_on_a_heterogeneous_split():
    """Stages slower at the front: 1F1B's fixed warm-up starves the fast back ranks; the search
    lets them run ahead and reaches the lower bound (4% faster than 1F1B)."""
    c = StageCosts(f_s=[2.0, 1.0, 1.0, 0.5], b_s=[4.0, 2.0, 2.0, 1.0])
    r = synthesize(c, p=4, m=8, split_backward=False, method="heuristic")
    assert r.metrics["gain_vs_best_named"] > 0.035
    assert r.status == "optimal" and r.metrics["makespan_s"] == r.bound


def test_v_placement_and_interleaved_instances():
    rng = np.random.default_rng(7)
    for placement in ("v", "loop"):
        c = _costs(rng, 6)
        r = synthesize(c, p=3, v=2, m=6, placement=placement, method="heuristic")
        assert r.schedule.style == placement and r.schedule.v == 2
        validate(r.schedule)
        assert r.metrics["makespan_s"] <= r.metrics["best_named_makespan_s"]
        assert r.metrics["makespan_s"] >= lower_bound(c, p=3, v=2, m=6, placement=placement) * (1 - 1e-12)


def test_graph_priced_costs_fix_the_placement():
    c = model_costs(p=2, v=2, m=4, placement="v")
    r = synthesize(c, p=2, v=2, m=4, method="heuristic")
    assert r.schedule.style == "v" and sorted(r.named["label"]) == ["dualpipev", "zbv"]
    with pytest.raises(ScheduleError, match="priced for the 'v' placement"):
        synthesize(c, p=2, v=2, m=4, placement="loop")


def test_without_split_backward_only_full_backwards():
    r = synthesize({"F": [1.0, 2.0, 1.0], "B": [2.0, 4.0, 3.0]}, p=3, m=5, split_backward=False, method="heuristic")
    assert set(r.schedule.kind.tolist()) <= {0, 1}
    assert sorted(r.named["label"]) == ["1f1b", "gpipe"]


# ---- memory caps --------------------------------------------------------------------------------------

def test_under_1f1b_memory_never_above_the_cap_never_slower_than_1f1b():
    c = StageCosts(f_s=[1.0, 1.6, 0.8, 1.1], b_s=[2.0, 3.5, 1.5, 2.5], w_s=[0.8, 1.5, 0.5, 1.0], activation_bytes=1e6,
                   held_bytes=[2e6, 3e6, 1e6, 2e6])
    base = simulate(one_f_one_b(4, 8), costs=c)
    cap = base.per_rank["peak_activation_bytes"].to_numpy()
    r = synthesize(c, p=4, m=8, memory_cap_bytes=cap, method="heuristic")
    held = c.arrays(4)["held"]
    peaks = peak_in_flight(r.schedule, held_bytes=held)
    assert (peaks <= cap * (1 + 1e-9)).all()
    assert np.allclose(peaks, r.per_rank["peak_activation_bytes"])   # the simulator's peak is the list-order peak
    assert r.metrics["makespan_s"] < base.metrics["makespan_s"]
    # the same cap by name
    again = synthesize(c, p=4, m=8, memory_cap_bytes="1f1b", method="heuristic")
    assert again.schedule == r.schedule
    assert not r.named.set_index("label").loc["zb_h2", "fits"]


def test_a_cap_below_one_micro_batch_is_refused_naming_the_rank():
    c = StageCosts(f_s=1.0, b_s=2.0, activation_bytes=1.0, held_bytes=[1.0, 5.0])
    with pytest.raises(CapacityError, match="rank 1") as e:
        synthesize(c, p=2, m=4, memory_cap_bytes=[10.0, 4.0])
    assert e.value.details["rank"] == 1


def test_bad_inputs_are_refused():
    with pytest.raises(ScheduleError, match="lock-step"):
        synthesize({"F": 1.0}, p=2, m=2, comm={"lockstep": True})
    with pytest.raises(ScheduleError, match="unknown synthesis method"):
        synthesize({"F": 1.0}, p=2, m=2, method="genetic")
    with pytest.raises(ScheduleError, match="time_limit_s"):
        synthesize({"F": 1.0}, p=2, m=2, time_limit_s=0)
    with pytest.raises(ScheduleError, match="one per rank"):
        synthesize({"F": 1.0}, p=2, m=2, memory_cap_bytes=[1.0, 2.0, 3.0])
    with pytest.raises(ScheduleError, match="memory_cap_bytes='zb_h2'.*v=1"):
        synthesize({"F": 1.0}, p=2, v=2, m=2, memory_cap_bytes="zb_h2")
    with pytest.raises(ScheduleError, match="m must be a positive integer"):
        synthesize({"F": 1.0}, p=2, m=0)


# ---- exact: MILP and exhaustive enumeration ------------------------------------------------------------

TINY = [(2, 1, 2, True, "loop"), (2, 1, 3, False, "loop"), (3, 1, 2, False, "loop"), (2, 2, 1, True, "v"), (3, 1, 2, True, "loop")]


@pytest.mark.parametrize("case", range(8))
def test_milp_equals_exhaustive_enumeration_on_tiny_instances(case):
    """Every valid order of every rank (no micro-batch-order assumption) against the MILP, with and
    without memory caps and link latency."""
    rng = np.random.default_rng(100 + case)
    p, v, m, split, placement = TINY[case % len(TINY)]
    c = _costs(rng, p * v)
    cap = float(np.asarray(c.held_bytes).max() * v * rng.uniform(1.0, 2.0)) if case % 2 else None
    comm = {"latency_s": 0.3} if case % 3 == 0 else None
    ex = exhaustive_synthesis(c, p=p, v=v, m=m, split_backward=split, memory_cap_bytes=cap, comm=comm, placement=placement)
    r = synthesize(c, p=p, v=v, m=m, split_backward=split, memory_cap_bytes=cap, comm=comm, placement=placement,
                   method="milp", time_limit_s=30)
    assert ex.status == r.status == "optimal"
    assert r.metrics["makespan_s"] == pytest.approx(ex.metrics["makespan_s"], rel=1e-6)


def test_milp_proves_the_optimum_and_its_times_agree_with_the_simulator():
    c = {"F": [1.0, 1.2, 0.8], "B": 2.0, "activation_bytes": 1.0}
    r = synthesize(c, p=3, m=4, memory_cap_bytes="1f1b", method="milp", time_limit_s=30)
    assert r.status == "optimal" and r.solver == "highs" and r.gap == pytest.approx(0.0, abs=1e-6)
    assert r.metrics["makespan_s"] < r.metrics["best_named_makespan_s"]
    assert isinstance(r.milp, SolverRun) and r.milp.proven and r.milp.solver == "highs" and r.milp.model == "disjunctive"
    assert r.metrics["milp_binaries"] > 0 and r.milp.n_vars > r.metrics["milp_binaries"] and r.milp.n_constraints > 0
    assert r.milp.incumbent == r.metrics["makespan_s"] and r.milp.solve_s > 0
    assert r.bound <= r.metrics["makespan_s"] * (1 + 1e-9)


def test_milp_improves_a_poor_warm_start_and_agrees_with_the_simulator():
    """Started from 1F1B only, the solver finds the optimum itself; its own makespan (its time
    variables) equals the simulator's on the order it returns."""
    c = StageCosts(f_s=[1.0, 1.6, 0.8], b_s=[2.0, 3.5, 1.5], w_s=[0.8, 1.5, 0.5])
    pb = Problem.build(c, p=3, v=1, m=4)
    warm = pb.orders_of(pb.schedule(pb.fifo(pb.orders_of(_split_1f1b(3, 4))), "1f1b"))
    ub, _, _ = pb.evaluate(warm)
    out = solve_milp(pb, warm, ub, lower_bound(problem=pb, p=3, m=4), time_limit_s=30)
    assert out["status"] == "optimal"
    mk, _, _ = pb.evaluate(out["orders"])
    assert mk < ub * 0.98
    assert mk == pytest.approx(out["objective"], rel=1e-6)
    best = synthesize(c, p=3, m=4, method="heuristic")
    assert mk == pytest.approx(best.metrics["makespan_s"], rel=1e-6)


def _split_1f1b(p, m):
    from hetsched.pipeline import split_backward

    return split_backward(one_f_one_b(p, m)).with_name("1f1b")


def test_milp_time_limit_returns_the_best_found_with_its_gap():
    c = model_costs(p=4, v=2, m=8, placement="v")
    # A short limit the solver cannot prove this case in, however loaded the machine: how much it
    # closes in that time depends on the load, so the gap is only required to be stated and in (0, 1).
    r = synthesize(c, p=4, v=2, m=8, method="milp", time_limit_s=1)
    assert r.status == "time_limit" and r.milp.status == "feasible" and not r.milp.proven
    assert 0 < r.gap < 1 and r.bound < r.metrics["makespan_s"]
    # the MILP's dual bound where HiGHS reported one within the limit (on a loaded machine it may not have:
    # then the analytic bound stands, as documented); never a bound below the one the MILP proved
    if r.milp.bound is not None:
        assert r.bound >= min(r.milp.bound, r.metrics["makespan_s"]) - 1e-12
    assert r.metrics["makespan_s"] <= r.metrics["best_named_makespan_s"]
    assert r.steps[-1].data["status"] == "time_limit" and "gap" in r.steps[-1].reason
    assert r.metrics["solve_s"] < 10


# ---- the decision log -----------------------------------------------------------------------------------

def test_steps_replay_the_incumbent_and_every_list_choice():
    c = StageCosts(f_s=[1.0, 2.0, 1.0, 0.5], b_s=[2.0, 5.0, 1.5, 1.0], w_s=[0.5, 2.0, 0.5, 0.2])
    r = synthesize(c, p=4, m=8, method="heuristic")
    actions = [s.action for s in r.steps]
    assert actions[0] == "bound" and actions[-1] == "result"
    assert {"warm_start", "list", "choose"} <= set(actions)
    assert actions.count("choose") == r.schedule.n_actions   # the winning rule's choices, one per action
    tried = [s for s in r.steps if s.action in ("swap", "move", "fill")]
    assert tried and all(s.reason and s.before is not None for s in tried)
    assert r.replay(r.n_steps - 1)["orders"] == r.schedule.to_text()
    # every state the log passes through is a real schedule with the makespan the log says
    for k, s in enumerate(r.steps):
        if s.accepted and s.after is not None and s.action not in ("bound", "choose", "list"):
            st = r.replay(k)
            if all(st["orders"]):
                sched = Schedule.from_text(st["orders"], p=4, v=1, m=8)
                assert simulate(sched, costs=c, timeline=False).metrics["makespan_s"] == pytest.approx(st["makespan_s"])
    # the list scheduler's choices, replayed, build the winning list schedule
    last_choice = max(k for k, a in enumerate(actions) if a == "choose")
    built = r.replay(last_choice)["building"]
    assert all(len(b) == 3 * 8 for b in built)


# ---- property: random stage costs ------------------------------------------------------------------------

@settings(max_examples=40)
@given(st.integers(2, 4), st.sampled_from([(1, "loop"), (2, "loop"), (2, "v")]), st.integers(1, 8), st.integers(0, 10_000),
       st.booleans(), st.sampled_from([None, "1f1b", "tight"]))
def test_random_costs_valid_within_cap_between_bound_and_best_named(p, vp, m, seed, split, cap):
    v, placement = vp
    if placement == "v" and not split:
        split = True
    rng = np.random.default_rng(seed)
    c = _costs(rng, p * v)
    if cap == "1f1b" and v != 1:
        cap = None
    if cap == "tight":  # a little more than one micro-batch through the rank's stages
        held = c.arrays(p * v, v)["held"]
        r2s = Schedule.from_actions([[]] * p, p=p, v=v, m=m, style=placement).stage_to_rank
        cap = [float(held[r2s == r].sum() * 1.3) for r in range(p)]
    r = synthesize(c, p=p, v=v, m=m, split_backward=split, placement=placement, memory_cap_bytes=cap,
                   method="heuristic", max_evals=300)
    validate(r.schedule)
    mk = r.metrics["makespan_s"]
    assert mk >= lower_bound(c, p=p, v=v, m=m, split_backward=split, placement=placement) * (1 - 1e-12)
    caps = np.asarray(r.params["memory_cap_bytes"])
    assert (peak_in_flight(r.schedule, held_bytes=c.arrays(p * v, v)["held"]) <= caps * (1 + 1e-9) + 1e-9).all()
    fitting = r.named[r.named["fits"]]
    if len(fitting):
        assert mk <= fitting["makespan_s"].min() * (1 + 1e-12)


# ---- the comparison ---------------------------------------------------------------------------------------

def test_compare_synthesis_is_the_house_comparison_with_memory_per_rank():
    c = StageCosts(f_s=[1.0, 2.0, 1.0, 0.5], b_s=[2.0, 5.0, 1.5, 1.0], activation_bytes=1e6)
    r = synthesize(c, p=4, m=8, method="heuristic")
    df = compare_synthesis(c, p=4, m=8, result=r)
    assert df.columns[0] == "label"
    assert df["label"].tolist() == sorted(named_schedules(4, 1, 8)) [:0] + list(named_schedules(4, 1, 8)) + ["synthesized", "lower bound"]
    assert {f"peak_bytes_rank{k}" for k in range(4)} <= set(df.columns)
    row = df.set_index("label")
    assert row.loc["synthesized", "makespan_s"] == r.metrics["makespan_s"]
    assert row.loc["lower bound", "makespan_s"] == r.bound
    assert (row.loc[row["kind"] == "named", "vs_synthesized"] >= -1e-12).all()
    assert row.loc["gpipe", "peak_bytes_rank0"] == 8e6 and row.loc["1f1b", "peak_bytes_rank0"] == 4e6
    long = compare_synthesis(c, p=4, m=8, result=r, long=True)
    assert list(long.columns) == ["label", "family", "metric", "value"] and set(long["family"]) == {"pipeline"}
    assert compare_results(df, label="label").shape[1] == 4
