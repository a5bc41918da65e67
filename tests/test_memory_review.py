"""Review tests for hetsched.memory: an independent naive simulator on random graphs with aliases,
brute force vs the DP and the lower bound, and the time-limit / callable-method input checks."""

from __future__ import annotations

import dataclasses
import random

import networkx as nx
import pytest

from hetsched.errors import HetschedError, ScheduleError
from hetsched.graph import OpGraph
from hetsched.io import generators as gen
from hetsched.memory import lower_bound, optimize_order, order_exact, order_ilp, peak_memory
from hetsched.memory.model import compile_graph


def _rand_graph(seed: int) -> OpGraph:
    """A tiny DAG with multi-output ops, extra reads, graph outputs and alias chains."""
    r = random.Random(seed)
    n = r.randint(2, 7)
    g = OpGraph(f"rev{seed}")
    names = [f"o{i}" for i in range(n)]
    for o in names:
        g.add_op(o, "Relu")
    made: list[tuple[str, str | None]] = [("in", None)]
    g.add_tensor("in", r.randint(1, 50), consumers=[names[0]])
    for i, o in enumerate(names):
        for j in range(r.randint(1, 2)):
            later = names[i + 1:]
            cons = r.sample(later, min(len(later), r.randint(0, 2)))
            cand = [t for t, p in made if p is not None and names.index(p) < i]
            alias = r.choice(cand) if cand and r.random() < 0.25 else None
            g.add_tensor(f"{o}:{j}", 0 if alias else r.randint(1, 50), producer=o, consumers=cons,
                         is_output=not cons and r.random() < 0.5, alias_of=alias)
            made.append((f"{o}:{j}", o))
        if i > 0 and r.random() < 0.5:
            t = r.choice([t for t, p in made if p != o])
            if o not in g.tensor(t).consumers:
                g.add_consumer(t, o)
    g.validate()
    return g


def _naive_peak(g: OpGraph, order) -> int:
    """The issue's model, written out step by step, independently of the numpy evaluator."""
    pos = {o: i for i, o in enumerate(order)}
    n = len(order)

    def root(t: str) -> str:
        while g.tensor(t).alias_of is not None:
            t = g.tensor(t).alias_of
        return t

    touch: dict[str, list[int]] = {}
    for t in g.tensors.values():
        steps = [pos[c] for c in t.consumers]
        if t.producer is not None:
            steps.append(pos[t.producer])
        if t.is_output:
            steps.append(n - 1)
        touch.setdefault(root(t.name), []).extend(steps)
    live = [0] * n
    for r, steps in touch.items():
        if not steps:
            continue  # an unused graph input
        base = g.tensor(r)
        start = pos[base.producer] if base.producer is not None else 0
        for s in range(start, max(steps) + 1):
            live[s] += base.size_bytes
    return max(live)


def _as_result(g: OpGraph, order):
    from hetsched.memory.model import make_result

    m = compile_graph(g)
    return make_result(m, m.to_idx(order), method="given", status="heuristic", t0=0.0, why="test order")


def _all_orders(g: OpGraph):
    m = compile_graph(g)
    d = nx.DiGraph()
    d.add_nodes_from(m.names)
    d.add_edges_from((m.names[p], m.names[v]) for v in range(m.n) for p in m.preds[v])
    return list(nx.all_topological_sorts(d))


@pytest.mark.parametrize("seed", range(60))
def test_model_dp_and_bound_against_brute_force_with_aliases(seed):
    g = _rand_graph(seed)
    peaks = []
    for o in _all_orders(g):
        p = peak_memory(g, o)
        assert p == _naive_peak(g, o), o
        peaks.append(p)
    best = min(peaks)
    assert lower_bound(g) <= best
    assert order_exact(g, time_limit_s=5).peak_bytes == best
    # a poor upper bound makes the first DP run (budget = its peak - 1) find the optimum itself
    worst = max(peaks)
    poor = next(o for o in _all_orders(g) if peak_memory(g, o) == worst)
    r = order_exact(g, time_limit_s=5, upper_bound=optimize_order(g, method=lambda _g: _as_result(_g, poor)))
    assert r.status == "optimal" and r.peak_bytes == best == r.bound_bytes
    assert optimize_order(g, method="heuristic", time_limit_s=1).peak_bytes >= best


@pytest.mark.parametrize("seed", [0, 7])
def test_cumulative_ilp_matches_brute_force_with_aliases(seed):
    g = _rand_graph(seed)
    best = min(peak_memory(g, o) for o in _all_orders(g))
    r = order_ilp(g, time_limit_s=20, formulation="cumulative")
    assert r.status == "optimal" and r.peak_bytes == best


@pytest.mark.parametrize("bad", [0, -1, None, float("nan"), float("inf"), "soon"])
def test_bad_time_limits_raise(bad):
    g = gen.chain(3)
    for call in (lambda: optimize_order(g, time_limit_s=bad), lambda: order_exact(g, time_limit_s=bad),
                 lambda: order_ilp(g, time_limit_s=bad)):
        with pytest.raises(HetschedError) as ei:
            call()
        assert ei.value.field == "time_limit_s" and "time_limit_s" in str(ei.value)


def test_exact_rejects_a_bad_upper_bound():
    with pytest.raises(HetschedError, match="upper_bound"):
        order_exact(gen.chain(3), upper_bound="kahn")


def test_callable_method_is_re_simulated_and_checked():
    g = gen.fork_join(3, 2, seed=0)
    good = optimize_order(g, method="kahn")
    liar = dataclasses.replace(good, metrics={**good.metrics, "peak_bytes": 1.0})
    r = optimize_order(g, method=lambda _g: liar)
    assert r.peak_bytes == good.peak_bytes and "re-simulated" in r.why
    assert optimize_order(g, method=lambda _g: good) is good
    backwards = dataclasses.replace(good, order=tuple(reversed(good.order)))
    with pytest.raises(ScheduleError):
        optimize_order(g, method=lambda _g: backwards)
    with pytest.raises(HetschedError, match="OrderResult"):
        optimize_order(g, method=lambda _g: list(good.order))


@pytest.mark.parametrize("beam", [-5, 2.5, True, "4"])
def test_a_bad_beam_is_a_named_error(beam):
    """Issue 29: beam=-5 reached an assert deep in the search; now the argument is named."""
    with pytest.raises(HetschedError) as e:
        optimize_order(gen.fork_join(3, 2), method="heuristic", beam=beam)
    assert e.value.field == "beam" and repr(beam) in str(e.value)


def test_an_order_at_the_lower_bound_stops_the_search():
    """Issue 28: once an order reaches the lower bound it is optimal; the default method no longer
    spends the ILP's time limit on it, the portfolio no longer fine-tunes and polishes, and the log
    says why it stopped. The patent's own flow is unchanged (its ILP runs first)."""
    g = gen.resnet_like(blocks_per_stage=1)
    lb = lower_bound(g)
    for method in ("auto", "heuristic"):
        r = optimize_order(g, method=method, time_limit_s=30)
        assert r.peak_bytes == lb and r.status == "optimal" and r.gap == 0.0
        last = r.steps[-1]
        assert last.action == "stop" and "lower bound" in last.reason and last.data["lower_bound_bytes"] == lb
        assert tuple(r.replay(r.n_steps - 1)["order"]) == r.order
    assert r.steps[0].action == "candidate"  # the portfolio stopped at its first candidate at the bound
    auto = optimize_order(g, time_limit_s=30)
    assert auto.ilp.status == "skipped" and "lower bound" in auto.ilp.note and auto.runtime_s < 5
    assert optimize_order(g, method="patent", time_limit_s=30).steps[0].action == "ilp"  # S2 first, as claimed
