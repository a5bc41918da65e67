"""Exact methods: DP == ILP (both formulations) == brute force; ILP time-out fallback."""

from __future__ import annotations

import tempfile
import time

import networkx as nx
import pytest
from hypothesis import assume, given, settings
from strategies import small_dags

from hetsched.graph import OpGraph
from hetsched.io import generators as gen
from hetsched.memory import build_ilp, optimize_order, order_exact, order_ilp, peak_memory
from hetsched.timeline import check_timeline


def brute(g: OpGraph) -> int:
    return min(peak_memory(g, o) for o in nx.all_topological_sorts(g.nx))


@settings(max_examples=40)
@given(small_dags(max_ops=7))
def test_dp_equals_brute_force(g):
    assume(g.n_ops <= 7)  # brute force over every topological order
    r = order_exact(g, time_limit_s=30)
    assert r.status == "optimal"
    assert r.peak_bytes == brute(g) == r.bound_bytes
    check_timeline(r.timeline, g)


TINY = [gen.topcuoglu(7, seed=s) for s in range(3)] + [gen.fork_join(2, 2, seed=1), gen.randwire_ws(6, seed=2, channels=4, hw=4)]


@pytest.mark.parametrize("formulation", ["patent", "cumulative"])
@pytest.mark.parametrize("gi", range(len(TINY)))
def test_ilp_equals_dp_and_brute_force(formulation, gi):
    g = TINY[gi]
    # no warm start: the solver must find the optimum by itself
    r = order_ilp(g, time_limit_s=60, formulation=formulation, warm_start=None)
    assert r.status == "optimal", r.why
    opt = brute(g)
    assert r.peak_bytes == opt == order_exact(g).peak_bytes
    assert r.solver == "highs"
    assert r.ilp.n_vars > 0 and r.ilp.n_constraints > 0 and r.ilp.status == "optimal" and r.ilp.incumbent == r.peak_bytes
    check_timeline(r.timeline, g)


def test_ilp_with_cbc():
    g = TINY[0]
    r = order_ilp(g, time_limit_s=60, formulation="cumulative", solver="cbc", warm_start=None)
    assert r.solver == "cbc"
    assert r.status == "optimal"
    assert r.peak_bytes == brute(g)


def test_ilp_timeout_falls_back_within_the_limit():
    g = gen.layered(8, 8, seed=3)  # far too big to prove in 1 s
    t0 = time.perf_counter()
    r = order_ilp(g, time_limit_s=1.0, formulation="patent")
    took = time.perf_counter() - t0 - r.metrics.get("warm_s", 0.0)
    heur = optimize_order(g, method="heuristic")
    assert r.status in ("fallback", "feasible")
    assert r.status != "optimal"
    assert r.peak_bytes <= heur.peak_bytes  # never worse than the heuristic it started from
    assert "limit" in r.why or "feasible" in r.why or "incumbent" in r.why
    assert took < 1.0 + 4.0  # warm-start heuristic + 1 s limit + grace, even on a loaded machine


def test_cbc_overshoot_is_cut_by_the_parent(tmp_path, monkeypatch):
    # pulp puts CBC's files in $TMPDIR; the fix puts them in a directory of its own under it
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("TMP", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    g = gen.layered(10, 8, seed=4)
    t0 = time.perf_counter()
    h = optimize_order(g, method="heuristic")
    t_h = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = order_ilp(g, time_limit_s=0.5, formulation="patent", solver="cbc", warm_start=h)
    took = time.perf_counter() - t0
    assert took < 0.5 + 2.5, took
    assert r.status in ("fallback", "feasible")
    assert r.peak_bytes <= h.peak_bytes
    assert t_h >= 0
    # the killed CBC's model and start files (7 MB each) are gone with it
    assert list(tmp_path.iterdir()) == []


def test_auto_reports_its_path():
    small = gen.layered(3, 3, seed=4)  # the heuristic stays above the lower bound: the ILP runs and proves
    r = optimize_order(small, time_limit_s=30)
    assert r.status == "optimal" and "S2" in r.why and r.steps[-1].action == "ilp"
    big = gen.topcuoglu(300, seed=0)
    r = optimize_order(big, time_limit_s=2)
    assert r.status == "heuristic" and "S3" in r.why and "S2" in r.why
    assert r.n_steps >= 3  # two candidates, the pick, then fine-tune moves
    assert r.replay(r.n_steps - 1)["order"] == r.order


def test_exact_timeout_returns_best_known_with_bound():
    g = gen.layered(12, 8, seed=0)
    r = order_exact(g, time_limit_s=1.0)
    assert r.status in ("timeout", "optimal")
    if r.status == "timeout":
        assert r.lower_bound_bytes <= r.bound_bytes <= r.peak_bytes
    assert r.runtime_s < 1.0 + 10.0  # includes the heuristic upper bound


def test_build_ilp_sizes():
    g = gen.chain(4)
    p1, _ = build_ilp(g, "patent")
    p2, _ = build_ilp(g, "cumulative")
    assert p1.numVariables() > 0 and p2.numVariables() > 0
    from hetsched.errors import HetschedError

    with pytest.raises(HetschedError):
        build_ilp(g, "nope")
    with pytest.raises(HetschedError):
        order_ilp(g, solver="gurobi-please")
    with pytest.raises(HetschedError):
        order_ilp(g, time_limit_s=0)


def alias_graph() -> OpGraph:
    """x -> a -> base; view1 = view(base); view2 = view(view1); readers of the views keep base alive."""
    g = OpGraph("alias")
    for n in ("a", "v1", "v2", "r1", "r2", "b", "c"):
        g.add_op(n, "Relu")
    g.add_tensor("x", 5, consumers=["a", "b"])
    g.add_tensor("base", 100, producer="a", consumers=["v1"])
    g.add_tensor("view1", 100, producer="v1", consumers=["v2", "r1"], alias_of="base")
    g.add_tensor("view2", 100, producer="v2", consumers=["r2"], alias_of="view1")
    g.add_tensor("o1", 10, producer="r1", consumers=["c"])
    g.add_tensor("o2", 10, producer="r2", consumers=["c"])
    g.add_tensor("tb", 60, producer="b", consumers=["c"])
    g.add_tensor("y", 1, producer="c", is_output=True)
    return g


@pytest.mark.parametrize("formulation", ["patent", "cumulative"])
def test_alias_graph_all_methods_agree(formulation):
    g = alias_graph()
    opt = brute(g)
    assert order_exact(g).peak_bytes == opt
    assert order_ilp(g, time_limit_s=30, formulation=formulation, warm_start=None).peak_bytes == opt
    h = optimize_order(g, method="heuristic")
    assert h.peak_bytes == opt
    check_timeline(h.timeline, g)


def test_an_interrupted_solve_leaves_no_solver_and_no_files(tmp_path, monkeypatch):
    """A notebook's stop button during a long ILP: the solver process is killed and its files go."""
    import multiprocessing as mp
    from multiprocessing.connection import Connection

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("TMP", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def interrupted(self, timeout=0.0):
        raise KeyboardInterrupt

    monkeypatch.setattr(Connection, "poll", interrupted)
    g = gen.layered(10, 8, seed=4)
    with pytest.raises(KeyboardInterrupt):
        order_ilp(g, time_limit_s=30, formulation="patent", solver="cbc")
    assert list(tmp_path.iterdir()) == []
    assert not [p for p in mp.active_children() if p.is_alive()]
