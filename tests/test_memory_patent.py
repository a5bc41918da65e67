"""Seed 002 as the patent text says it (issue 16), and what a walker needs from the step logs (issue 15).

Written from ``../shared/seeds/002_1bc531f15903fea6.txt``: S2 (the ILP within the user's time limit,
output directly when it finishes), S31 (ASAP/ALAP, estimated tensor lifetimes, an op priority, the
highest-priority op among the executable ones), S32 (DFS windows pushed on a traversal stack,
popped into the order), S4 / claim 9 (every tensor held at the peak: release earlier or create
later, kept when the simulated peak drops), and from hand-worked examples.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from strategies import small_dags

import hetsched.memory as mem
from hetsched.graph import OpGraph
from hetsched.io import generators as gen
from hetsched.memory.heuristics import _asap_alap, _held
from hetsched.memory.model import compile_graph
from hetsched.timeline import check_timeline


# ---------------------------------------------------------------------------- S4 / claim 9
def big_inputs_graph(n_big: int = 25, big: int = 1000) -> OpGraph:
    """Hand-worked: ``n_big`` graph inputs of ``big`` bytes held until the sink, and a small corner.

    Given order a, b, rb, ra, sink (B = n_big * big, all live throughout):
      a: B+10 | b: B+60 | rb: B+61 (peak: x, z, rb:out) | ra: B+12 | sink.
    Creating x later (a after rb) gives b: B+50 | rb: B+51 | a: B+11 | ra: B+12: peak B+51, the
    optimum (a, ra, b, rb peaks at B+52). x is the 27th largest tensor at the peak.
    """
    g = OpGraph("big-inputs")
    for n in ("a", "b", "ra", "rb", "sink"):
        g.add_op(n, "Relu")
    bigs = [f"big{i}" for i in range(n_big)]
    for t in bigs:
        g.add_tensor(t, big, consumers=["sink"])
    g.add_tensor("x", 10, producer="a", consumers=["ra"])
    g.add_tensor("z", 50, producer="b", consumers=["rb"])
    g.add_tensor("ra:out", 1, producer="ra", consumers=["sink"])
    g.add_tensor("rb:out", 1, producer="rb", consumers=["sink"])
    g.add_tensor("y", 1, producer="sink", is_output=True)
    g.validate()
    return g


def test_fine_tune_tries_every_tensor_live_at_the_peak():
    g = big_inputs_graph()
    B = 25 * 1000
    start = ["a", "b", "rb", "ra", "sink"]
    assert mem.peak_memory(g, start) == B + 61
    capped = mem.fine_tune(g, start, max_tensors=24)  # the old default: only the 24 largest (all inputs)
    assert capped.peak_bytes == B + 61 and capped.metrics["n_moves_kept"] == 0
    r = mem.fine_tune(g, start)
    assert r.peak_bytes == B + 51 == mem.order_exact(g).peak_bytes
    kept = [s for s in r.steps if s.accepted]
    assert [(s.action, s.subject) for s in kept][0] == ("create_later", "x")
    s = kept[0]
    assert s.before == B + 61 and s.after == B + 51 and s.data["peak_step"] == 2
    # the move touched steps 0..2 of the curve only: a moved from step 0 to step 2
    before = mem.memory_curve(g, start)["bytes"].to_numpy()
    after = mem.memory_curve(g, r.replay(s.index)["order"])["bytes"].to_numpy()
    changed = np.flatnonzero(before != after)
    assert s.data["curve_changed"] == (int(changed[0]), int(changed[-1]))


@settings(max_examples=25, deadline=None)
@given(small_dags(max_ops=30))
def test_fine_tune_on_all_tensors_is_never_worse_than_the_capped_one(g):
    o = mem.order_bfs(g)
    full, capped = mem.fine_tune(g, o), mem.fine_tune(g, o, max_tensors=24)
    assert full.peak_bytes <= o.peak_bytes
    # claim 9 stops when no single move lowers the peak: every tensor at the peak was tried
    m = compile_graph(g)
    step, live = mem.live_at_peak(g, full.order)
    assert int(live["bytes"].sum()) == full.peak_bytes
    assert capped.peak_bytes <= o.peak_bytes
    for s in full.steps:  # each recorded move names a tensor live at its peak step
        assert s.data["phase"] == "S4" and s.subject in m.s_names


# ---------------------------------------------------------------------------- S31 / claim 7
def test_patent_bfs_is_breadth_first_where_the_greedy_goes_deep():
    g = gen.fork_join(2, 2, seed=0)
    bfs = mem.order_bfs(g)
    assert bfs.order == ("fork", "b0_0", "b1_0", "b0_1", "b1_1", "join")
    assert mem.order_lifetime_greedy(g).order == ("fork", "b0_0", "b0_1", "b1_0", "b1_1", "join")
    # ASAP = number of ancestors, ALAP = n - 1 - number of descendants (6 ops)
    picks = {s.subject: s.data for s in bfs.steps}
    assert (picks["fork"]["asap"], picks["fork"]["alap"]) == (0, 0)
    assert (picks["b0_0"]["asap"], picks["b0_0"]["alap"]) == (1, 3)
    assert (picks["b0_1"]["asap"], picks["b0_1"]["alap"]) == (2, 4)
    assert (picks["join"]["asap"], picks["join"]["alap"]) == (5, 5)
    # after b0_0 the frontier is {b1_0 (ALAP 3), b0_1 (ALAP 4)}: b1_0 has the higher priority
    assert picks["b1_0"]["frontier"] == 2 and picks["b1_0"]["runner_up"]["op"] == "b0_1"


@settings(max_examples=30, deadline=None)
@given(small_dags(max_ops=35))
def test_each_bfs_pick_is_the_highest_priority_executable_op(g):
    """S31: "在当前可执行的算子中选择优先级最高的算子执行" - recomputed from the order itself."""
    r = mem.order_bfs(g)
    m = compile_graph(g)
    asap, alap = _asap_alap(m)
    held = _held(m, asap, alap)
    prio = {m.names[v]: (int(alap[v]), held[v], int(asap[v]), v) for v in range(m.n)}
    done: set[str] = set()
    for k, op in enumerate(r.order):
        ready = [v for v in g.ops if v not in done and all(p in done for p in g.nx.predecessors(v))]
        assert op == min(ready, key=prio.__getitem__)
        s = r.steps[k]
        assert s.subject == op and s.data["frontier"] == len(ready) and s.data["phase"] == "S31"
        assert s.data["priority"] == [prio[op][0], prio[op][1], prio[op][2]]
        done.add(op)
    assert r.replay(r.n_steps - 1)["order"] == r.order
    if r.n_steps > 1:
        assert list(r.replay(1)["bfs_order"]) == list(r.order[:2])


@settings(max_examples=30, deadline=None)
@given(small_dags(max_ops=35))
def test_pick_steps_carry_the_curve_of_the_order_so_far(g):
    r = mem.order_bfs(g)
    curve = r.curve["bytes"].tolist()
    assert [s.after for s in r.steps] == curve  # live bytes during each pick's step
    for k in (0, len(curve) // 2, len(curve) - 1):
        assert mem.prefix_curve(g, r.order[: k + 1])["bytes"].tolist() == curve[: k + 1]


# ---------------------------------------------------------------------------- S32 / claim 8
@settings(max_examples=30, deadline=None)
@given(small_dags(max_ops=35))
def test_dfs_windows_go_through_the_stack_once(g):
    r = mem.order_dfs(g)
    pushes = [s for s in r.steps if s.action == "push"]
    pops = [s for s in r.steps if s.action == "pop"]
    assert sorted(s.data["window"] for s in pushes) == sorted(s.data["window"] for s in pops)
    assert len({s.data["window"] for s in pushes}) == len(pushes)
    # popping the stack in order gives the ops' order
    assert tuple(op for s in pops for op in s.data["ops"]) == r.order
    # the recorded stack is the traversal stack: a push adds its window on top, a pop removes it
    stack: list[int] = []
    for s in r.steps:
        assert s.subject == f"window {s.data['window']}"
        if s.action == "push":
            stack.append(s.data["window"])
        else:
            assert stack[-1] == s.data["window"]
            stack.pop()
        assert list(s.data["stack"]) == stack[-64:] and s.data["stack_depth"] == len(stack)
    assert r.replay(r.n_steps - 1)["order"] == r.order
    assert tuple(r.replay(r.n_steps - 1)["dfs_order"]) == r.order


# ---------------------------------------------------------------------------- S2 -> S3 -> S4
def test_patent_flow_output_is_the_ilp_order_when_the_ilp_finishes():
    g = gen.fork_join(2, 2, seed=0)
    r = mem.optimize_order(g, method="patent", time_limit_s=20)
    assert r.status == "optimal" and r.method == "patent:ilp-patent"
    assert [s.action for s in r.steps] == ["ilp"] and r.steps[0].data["ilp"] is r.ilp and r.ilp.model == "patent"
    assert r.ilp.proven and r.peak_bytes == mem.order_exact(g).peak_bytes
    assert not any(k.startswith("ilp_") for k in r.metrics)  # the solver's facts are the typed field, once
    assert r.replay(0)["order"] == r.order


def test_patent_flow_runs_s3_then_s4_when_the_ilp_does_not_finish():
    g = gen.layered(6, 3, seed=0)
    r = mem.optimize_order(g, method="patent", time_limit_s=0.2)
    phases = [s.data["phase"] for s in r.steps]
    assert phases[0] == "S2" and not r.steps[0].accepted
    # in the patent's order: the ILP, the BFS, the DFS, the pick of the lower, the fine-tune
    firsts = [phases.index(p) for p in ("S2", "S31", "S32", "S4-pick")]
    assert firsts == sorted(firsts) and all(p == "S4" for p in phases[firsts[-1] + 1:])
    assert not r.ilp.proven and r.ilp.n_vars == mem.patent.ilp_vars(g, "patent") and r.steps[0].data["ilp"] is r.ilp
    # whatever the solver's incumbent, the output is S3 + S4's order (the patent does not keep it)
    assert r.order == mem.order_patent(g, ilp=False).order == mem.order_patent_heuristic(g).order
    assert r.replay(r.n_steps - 1)["order"] == r.order
    check_timeline(r.timeline, g)


def test_auto_is_ours_heuristic_first_then_the_warm_started_ilp():
    g = gen.layered(3, 3, seed=4)  # the heuristic stays above the lower bound (else the ILP is skipped)
    r = mem.optimize_order(g, method="auto", time_limit_s=20)
    assert r.steps[0].data["phase"] == "S31" and r.steps[-1].action == "ilp"
    assert r.status == "optimal" and r.ilp.proven and r.steps[-1].data["ilp"] is r.ilp
    assert r.replay(r.n_steps - 1)["order"] == r.order


@pytest.mark.parametrize("method,form", [("ilp-patent", "patent"), ("ilp-cumulative", "cumulative")])
def test_each_ilp_formulation_is_selectable_by_name(method, form):
    g = gen.fork_join(2, 2, seed=0)
    r = mem.optimize_order(g, method=method, time_limit_s=20)
    assert r.method == f"ilp-{form}" and r.params["formulation"] == form
    assert r.ilp.n_vars == mem.patent.ilp_vars(g, form) and r.ilp.model == form
    assert r.status == "optimal" and r.metrics["bound_bytes"] == r.peak_bytes and r.gap >= 0
    with pytest.raises(mem.optimize.HetschedError, match="contradicts"):
        mem.optimize_order(g, method=method, formulation="cumulative" if form == "patent" else "patent")


def test_portfolio_keeps_the_lifetime_greedy_and_both_traversals():
    g = gen.topcuoglu(40, seed=2)
    names = [s.subject for s in mem.order_portfolio(g).steps if s.action == "candidate"]
    assert {"bfs", "dfs", "lifetime-greedy"} <= set(names)


# ---------------------------------------------------------------------------- what a walker reads
def test_live_at_peak_and_live_at():
    g = big_inputs_graph(3, 100)
    order = ["a", "b", "rb", "ra", "sink"]
    step, live = mem.live_at_peak(g, order)
    assert step == 2 and int(live["bytes"].sum()) == mem.peak_memory(g, order)
    assert set(live["tensor"]) == {"big0", "big1", "big2", "x", "z", "rb:out"}
    assert live["bytes"].tolist() == sorted(live["bytes"], reverse=True)
    # a partial order: z has been read by rb, x still waits for ra
    assert set(mem.live_at(g, order[:3], 2)["tensor"]) == {"big0", "big1", "big2", "x", "z", "rb:out"}
    with pytest.raises(mem.model.HetschedError, match="step 5"):
        mem.live_at(g, order, 5)
    with pytest.raises(mem.model.ScheduleError):
        mem.prefix_curve(g, ["ra"])  # ra before its producer a


def test_memory_family_has_no_import_cycle():
    """Issue 21: ilp/exact no longer import the dispatcher; every import, even inside a function."""
    root = Path(mem.__file__).parent
    edges: dict[str, set[str]] = {}
    for f in root.glob("*.py"):
        mod = f.stem
        edges[mod] = set()
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    edges[mod].add(node.module.split(".")[0])
                else:
                    edges[mod].update(a.name for a in node.names)
    edges.pop("__init__")
    for e in edges.values():
        e.discard("__init__")
    state: dict[str, int] = {}

    def visit(v: str, path: list[str]) -> None:
        state[v] = 1
        for w in sorted(edges.get(v, ())):
            if state.get(w) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(path + [v, w])}")
            if w not in state:
                visit(w, path + [v])
        state[v] = 2

    for v in sorted(edges):
        if v not in state:
            visit(v, [])
    assert "optimize" not in edges["ilp"] | edges["exact"]


@settings(max_examples=20, deadline=None)
@given(small_dags(max_ops=30))
def test_walk_state_follows_the_log_without_rerunning(g):
    """Issue 15: each step of the patent flow can be drawn from the result alone."""
    r = mem.optimize_order(g, method="patent-heuristic")
    for k in sorted({-1, 0, r.n_steps // 3, r.n_steps // 2, r.n_steps - 1}):
        w = mem.walk_state(g, r, k)
        if w["partial"]:
            assert w["phase"] in ("S31", "S32") and len(w["order"]) < g.n_ops
        assert w["curve"]["bytes"].tolist() == mem.prefix_curve(g, w["order"])["bytes"].tolist()
        assert w["peak_bytes"] == (int(w["curve"]["bytes"].max()) if len(w["curve"]) else 0)
        assert int(w["live"]["bytes"].sum()) == w["peak_bytes"]
    last = mem.walk_state(g, r, r.n_steps - 1)
    assert not last["partial"] and last["order"] == r.order and last["peak_bytes"] == r.peak_bytes


def test_lifetime_chart_draws_steps_from_the_seconds_timeline():
    from hetsched.plot.memory import lifetime_chart, live_bars, walk_curves

    g = gen.fork_join(3, 2, seed=0)
    r = mem.order_bfs(g)
    lt = mem.lifetimes(g, r.order).set_index("tensor")
    bars = lifetime_chart(r).data[0]
    for t, base, width in zip(bars.y, bars.base, bars.x):
        assert base == lt.loc[t, "alloc_step"] and base + width == lt.loc[t, "free_step"] + 1
    step, live = mem.live_at_peak(g, r.order)
    assert list(live_bars(live, top=3).data[0].y) == live["tensor"].head(3).tolist()
    g2 = gen.topcuoglu(30, seed=1)
    ft = mem.fine_tune(g2, mem.order_baseline(g2, "kahn"))
    moved = next(s for s in ft.steps if s.accepted)  # this order has 8 kept moves
    w = mem.walk_state(g2, ft, moved.index)
    assert w["changed"] == moved.data["curve_changed"] and w["peak_bytes"] == moved.after
    fig = walk_curves(w, lower_bound=ft.lower_bound_bytes)
    assert fig.layout.shapes[-1].x0 == moved.data["curve_changed"][0] - 0.5  # the changed steps, shaded


def test_solver_methods_are_named_for_panels():
    assert set(mem.SOLVER_METHODS) <= set(mem.METHODS)
    assert {"patent", "auto", "ilp-patent"} <= set(mem.SOLVER_METHODS) and "bfs" not in mem.SOLVER_METHODS
