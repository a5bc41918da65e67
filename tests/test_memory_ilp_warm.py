"""HiGHS gets the warm start (PuLP 3.3 alone passes starts to CBC, CPLEX, Gurobi, Xpress only)."""

from __future__ import annotations

import pytest

pytest.importorskip("highspy")

from hetsched.io import generators as gen  # noqa: E402
from hetsched.memory import order_exact, order_ilp  # noqa: E402
from hetsched.memory.baselines import order_baseline  # noqa: E402


def test_highs_accepts_the_start_as_a_partial_solution():
    g = gen.layered(5, 3, seed=2)
    start = order_baseline(g, "kahn")
    r = order_ilp(g, time_limit_s=20, formulation="cumulative", warm_start=start)
    # every op-step variable of the start was handed over, and HiGHS took it without complaint
    assert r.metrics["warm_start_entries"] == g.n_ops * g.n_ops
    assert r.params["warm_start_status"] == "kOk"
    assert r.status == "optimal" and r.peak_bytes == order_exact(g, time_limit_s=20).peak_bytes


def test_patent_formulation_start_and_no_start():
    g = gen.fork_join(2, 3)
    warm = order_ilp(g, time_limit_s=20, formulation="patent", warm_start="heuristic")
    assert warm.params["warm_start_status"] == "kOk" and warm.metrics["warm_start_entries"] > 0
    cold = order_ilp(g, time_limit_s=20, formulation="patent", warm_start=None)
    assert "warm_start_status" not in cold.params and "warm_start_entries" not in cold.metrics
    assert warm.status == cold.status == "optimal" and warm.peak_bytes == cold.peak_bytes
