"""The budgeted searches behind ``order_exact``: differential tests against brute force and the
previous layer-by-layer DP, segments, bounds that never exceed the optimum, and the step log."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import small_dags

from hetsched.graph import OpGraph
from hetsched.io import generators as gen
from hetsched.memory import order_baseline, order_exact, peak_memory
from hetsched.memory.feasible import atables, decide, feasible, feasible_back
from hetsched.memory.search import cut_segments, search
from hetsched.memory.exact import _order_exact_dp
from hetsched.memory.model import compile_graph, lower_bound
from hetsched.timeline import check_timeline


def brute(g: OpGraph) -> int:
    return min(peak_memory(g, o) for o in nx.all_topological_sorts(g.nx))


def dp_optimum(g: OpGraph) -> int:
    """The plain DP over executed sets (no budget, no bound, no free move): the oracle."""
    m = compile_graph(g)
    return search(m)[0]


def seg_peak(m, start: int, ops: list[int]) -> int:
    from hetsched.memory.exact import _seg_peak
    from hetsched.memory.feasible import atables

    return _seg_peak(atables(m), start, ops)


def check_fits(m, start, seg_mask, ops, B):
    assert sorted(ops) == [v for v in range(m.n) if (seg_mask >> v) & 1]
    done = start
    for v in ops:  # topological within the segment
        assert not (atables(m).pred_mask[v] & ~done), "op before its predecessor"
        done |= 1 << v
    assert seg_peak(m, start, ops) <= B


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags(max_ops=9))
def test_searches_decide_exactly_at_the_optimum(g):
    """Both directions (and their alternation) say no at opt - 1 and yes at opt, on the whole
    graph and on each cut-vertex segment."""
    assume(g.n_ops <= 9)
    opt = brute(g)
    m = compile_graph(g)
    assert dp_optimum(g) == opt
    for fn in (feasible, feasible_back, decide):
        assert fn(m, opt - 1) is None
        ops = fn(m, opt)
        assert ops is not None
        assert m.peak(np.asarray(ops, dtype=np.int64)) <= opt
    # per segment: the segment's own optimum (DP from the segment's start) is decided exactly
    done = 0
    for seg in cut_segments(m):
        mask = sum(1 << v for v in seg)
        sopt = search(m, start=done, n_steps=len(seg))[0]
        for fn in (feasible, feasible_back, decide):
            assert fn(m, sopt - 1, start=done, seg_mask=mask) is None
            ops = fn(m, sopt, start=done, seg_mask=mask)
            check_fits(m, done, mask, ops, sopt)
        done |= mask


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags(min_ops=8, max_ops=24), st.floats(0.0, 1.0))
def test_decide_agrees_with_the_dp_at_any_budget(g, frac):
    """On graphs too big for brute force: the plain DP's optimum is the threshold of ``decide``."""
    assume(g.n_ops <= 24)
    m = compile_graph(g)
    opt = dp_optimum(g)
    lb = lower_bound(g)
    B = int(lb + frac * (1.2 * opt - lb))
    ops = decide(m, B)
    if B < opt:
        assert ops is None
    else:
        assert ops is not None and m.peak(np.asarray(ops, dtype=np.int64)) <= B
    assert decide(m, opt - 1) is None and decide(m, opt) is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags(max_ops=30))
def test_new_search_equals_old_dp(g):
    """``order_exact`` == the previous engine (kept as ``_order_exact_dp``) whenever that proves."""
    assume(g.n_ops <= 30)
    old = _order_exact_dp(g, time_limit_s=20)
    assume(old.status == "optimal")
    new = order_exact(g, time_limit_s=20)
    assert new.status == "optimal"
    assert new.peak_bytes == old.peak_bytes == new.bound_bytes
    assert new.peak_bytes == peak_memory(g, new.order)
    check_timeline(new.timeline, g)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags(min_ops=4, max_ops=24), st.sampled_from(["kahn", "inductor_bfs", "xla_post_order"]))
def test_a_poor_upper_bound_is_improved_to_the_optimum(g, base):
    """Started from a compiler baseline's order, the search must find the better orders itself;
    every accepted step replays to the order it announces."""
    assume(g.n_ops <= 24)
    opt = dp_optimum(g)
    ub = order_baseline(g, base)
    r = order_exact(g, time_limit_s=30, upper_bound=ub)
    assert r.status == "optimal" and r.peak_bytes == opt == r.bound_bytes
    assert r.replay(-1)["order"] == ub.order
    assert r.replay(r.n_steps - 1)["order"] == r.order
    for s in r.steps:
        if s.accepted:
            assert peak_memory(g, s.delta["order"]) == s.after <= s.before
        else:
            assert s.after is None or s.after == s.before


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags(min_ops=4, max_ops=24), st.floats(0.0, 0.02))
def test_a_proven_bound_never_exceeds_the_optimum(g, limit):
    """Whatever the time limit (timeouts included), lower bound <= proven bound <= optimum <= peak."""
    assume(g.n_ops <= 24)
    opt = dp_optimum(g)
    r = order_exact(g, time_limit_s=max(limit, 1e-6), upper_bound=order_baseline(g, "kahn"))
    assert r.status in ("optimal", "timeout")
    assert r.lower_bound_bytes <= r.bound_bytes <= opt <= r.peak_bytes
    if r.status == "optimal":
        assert r.peak_bytes == opt
    assert r.peak_bytes == peak_memory(g, r.order)


def test_timeout_keeps_the_best_order_and_a_bound():
    """A graph the search cannot settle in 0.3 s: the status says so, the bound is honest."""
    g = gen.randwire_ws(100, seed=3, channels=8, hw=8)
    r = order_exact(g, time_limit_s=0.3)
    assert r.status in ("timeout", "optimal")
    assert r.lower_bound_bytes <= r.bound_bytes <= r.peak_bytes
    if r.status == "timeout":
        assert "time limit" in r.why and str(int(r.bound_bytes)) in r.why
    assert r.peak_bytes == peak_memory(g, r.order)


@pytest.mark.parametrize("L,w,seed", [(12, 8, 2), (14, 7, 1)])
def test_wide_layered_graphs_are_proven(L, w, seed):
    """Issue #10's exact target shape (seeds that timed out at 60 s with the layer DP, and whose
    optimum lies above every static lower bound, so the search has to prove it)."""
    g = gen.layered(L, w, seed=seed)
    r = order_exact(g, time_limit_s=60)
    assert r.status == "optimal" and r.bound_bytes == r.peak_bytes > lower_bound(g)
    assert r.metrics["n_questions"] >= 1
    check_timeline(r.timeline, g)


def test_gcd_rounds_bounds_up():
    """All tensors the same size: every peak is a multiple of it, and so is the proven bound."""
    g = gen.randwire_ws(20, seed=1, channels=4, hw=4, fuse_aggregation=True)
    r = order_exact(g, time_limit_s=30, upper_bound=order_baseline(g, "kahn"))
    size = 4 * 4 * 4 * 4
    assert r.status == "optimal" and r.peak_bytes % size == 0 and r.bound_bytes % size == 0
    assert r.peak_bytes == dp_optimum(g)


def test_too_large_graphs_are_refused_honestly(monkeypatch):
    import hetsched.memory.exact as ex

    g = gen.layered(6, 4, seed=1)
    monkeypatch.setattr(ex, "EXACT_MAX_CELLS", 10)
    r = order_exact(g, time_limit_s=5)
    assert r.status == "timeout" and "too large" in r.why
    assert r.bound_bytes == r.lower_bound_bytes <= r.peak_bytes


def test_deterministic_and_memo_cap_keeps_answers(monkeypatch):
    """Same graph, same order (work is sliced in moves, not seconds); a tiny memo cap that keeps
    dropping the dead states changes nothing but the work done."""
    import hetsched.memory.feasible as fe

    g = gen.randwire_ws(24, seed=4, channels=4, hw=4, fuse_aggregation=True)
    a = order_exact(g, time_limit_s=30, upper_bound=order_baseline(g, "kahn"))
    b = order_exact(g, time_limit_s=30, upper_bound=order_baseline(g, "kahn"))
    assert a.status == b.status == "optimal" and a.order == b.order
    m = compile_graph(g)
    opt = a.peak_bytes
    monkeypatch.setattr(fe, "DEAD_MAX", 5)
    assert decide(m, opt - 1) is None
    assert m.peak(np.asarray(decide(m, opt), dtype=np.int64)) <= opt


def test_the_ladder_raises_the_bound_when_the_hard_question_gets_no_answer(monkeypatch):
    """Simulate a search that cannot answer near the optimum: the first question (just below
    the best order) and every budget >= opt - q time out, cheaper ones are answered. The result
    must be a time-out whose proven bound climbed above the lower bound but not past opt."""
    import hetsched.memory.exact as ex
    from hetsched.memory.feasible import BudgetTimeout

    g = gen.randwire_ws(20, seed=2, channels=4, hw=4, fuse_aggregation=True)
    q = 4 * 4 * 4 * 4
    opt = dp_optimum(g)
    lb = lower_bound(g)
    assert opt - q > lb  # room for the ladder to climb
    real = ex.decide
    asked = []

    def hard_near_opt(m, B, **kw):
        asked.append(B)
        if B >= opt - q:
            raise BudgetTimeout(0)
        return real(m, B, **kw)

    monkeypatch.setattr(ex, "decide", hard_near_opt)
    r = order_exact(g, time_limit_s=5, upper_bound=order_baseline(g, "kahn"))
    assert r.status == "timeout"
    assert lb < r.bound_bytes <= opt - q  # every budget below opt - q is refuted, no more
    assert r.bound_bytes % q == 0
    assert r.peak_bytes >= opt and r.peak_bytes == peak_memory(g, r.order)
    assert any(B < opt - q for B in asked)
    assert "proven >=" in r.why
    assert [s.accepted for s in r.steps].count(True) == sum(1 for s in r.steps if s.after not in (None, s.before))
