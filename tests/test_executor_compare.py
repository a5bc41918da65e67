"""compare_policies on the bundled graphs: what the seed-004 patent buys and what it does not."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

import hetsched.executor as ex
from hetsched.io import load_graph
from hetsched.timeline import check_timeline

BRANCHY = ["executor_inception", "executor_randwire"]


@pytest.fixture(scope="module")
def runs():
    return {name: (load_graph(name), ex.compare_policies(load_graph(name)))
            for name in ["executor_d2h_branch", *BRANCHY]}


def _mk(cmp):
    return cmp.frame.set_index("label")["makespan_s"]


def test_frame_shape_and_lower_bound(runs):
    for name, (g, cmp) in runs.items():
        f = cmp.frame
        assert list(f["label"]) == [*ex.POLICIES, "lower bound"]
        lb = f.set_index("label").loc["lower bound", "makespan_s"]
        assert (f["makespan_s"] >= lb * (1 - 1e-9)).all(), name
        for label, r in cmp.results.items():
            check_timeline(r.timeline, g)
            assert r.metrics["n_unordered_edges"] == 0
            assert not r.violations(g), (name, label)


def test_long_form_is_the_frame_in_the_house_format(runs):
    """Issue 21: the comparison's numbers as ``label, family, metric, value``, read from each run."""
    g, cmp = runs["executor_d2h_branch"]
    long = cmp.long()
    assert list(long.columns) == ["label", "family", "metric", "value"] and set(long["family"]) == {"executor"}
    got = long.set_index(["label", "metric"])["value"]
    for label, r in cmp.results.items():
        for k in ("makespan_s", "lb_s", "n_events", "n_streams"):
            assert got[(label, k)] == float(r.metrics[k])
    assert set(long.loc[long.label == "lower bound", "metric"]) == {"makespan_s", "lb_s", "gap_to_lb"}
    assert long["value"].notna().all()


def test_patent_buys_overlap_of_blocking_host_work(runs):
    g, cmp = runs["executor_d2h_branch"]
    mk = _mk(cmp)
    f = cmp.frame.set_index("label")
    # one thread stalls on every D2H + post-processing branch; the patent's sync thread takes them
    assert mk["patent"] < 0.75 * mk["multi-stream, one thread"]
    assert mk["patent"] < 0.75 * mk["serial"]
    assert f.loc["patent", "device_busy_frac"] > f.loc["multi-stream, one thread", "device_busy_frac"] + 0.1
    assert cmp.metrics["patent_vs_one_thread"] > 1.3
    # the async thread (thread 0) never blocks under the patent: blocking happens on sync threads
    r = cmp.results["patent"]
    tl = r.timeline
    assert not ((tl["lane"] == "thread0") & (tl["kind"] == "blocked")).any()
    assert ((tl["lane"] != "thread0") & (tl["kind"] == "blocked")).any()
    one = cmp.results["multi-stream, one thread"].timeline
    assert ((one["lane"] == "thread0") & (one["kind"] == "blocked")).any()
    # ... and the patent is close to the bound there
    assert f.loc["patent", "gap_to_lb"] < 0.05


@pytest.mark.parametrize("name", BRANCHY)
def test_patent_does_not_buy_kernel_parallelism(runs, name):
    g, cmp = runs[name]
    mk = _mk(cmp)
    # all-GPU: nothing blocks, so the patent's threads change nothing and one async stream
    # serializes independent kernels, exactly like the serial executor
    assert mk["patent"] == pytest.approx(mk["serial"], rel=0.01)
    assert cmp.results["patent"].metrics["n_streams"] == 1
    # Nimble's streams (with the same patent threads) run independent kernels together
    assert mk["Nimble streams + patent"] < 0.8 * mk["patent"]
    assert cmp.metrics["nimble_vs_patent"] > 1.25
    tl = cmp.results["Nimble streams + patent"].timeline
    k = tl[tl["kind"] == "compute"]
    pts = sorted([(s, 1) for s in k.start_s] + [(e, -1) for e in k.end_s])
    cur = peak = 0
    for _t, d in pts:
        cur += d
        peak = max(peak, cur)
    assert peak >= 2  # kernels really overlap


def test_figure_is_one_bar_chart(runs):
    from hetsched.plot.executor import policy_bars

    _g, cmp = runs["executor_d2h_branch"]
    assert not hasattr(cmp, "figure")  # the model does not import the view (issue 21)
    fig = policy_bars(cmp)
    assert isinstance(fig, go.Figure)
    assert len(fig.data) == 1 and list(fig.data[0].x) == list(cmp.frame["label"])


def test_custom_policies_and_options():
    g = ex.graphs.d2h_branch_graph(8, 4)
    cmp = ex.compare_policies(g, policies={"a": ("single", "single"), "b": ("patent", "patent")}, pool_size=2,
                              costs="eager")
    assert list(cmp.frame["label"]) == ["a", "b", "lower bound"]
    assert cmp.results["b"].metrics["n_threads"] == 2
    assert cmp.params["costs"] == "eager"


def test_executor_figures():
    from hetsched.plot.executor import executor_gantt, executor_lanes, ordering_bars, policy_bars

    g = ex.graphs.d2h_branch_graph(8, 4)
    r = ex.simulate(g, streams="patent", threads="patent", pool_size=3)
    before = r.timeline.copy()
    fig = executor_gantt(r)
    lanes = executor_lanes(r.timeline)
    assert lanes[:3] == ["thread0", "thread1", "thread2"] and set(lanes[3:]) == set(r.streams.values())
    n_dev = sum(1 for k in r.kinds.values() if k != "cpu_sync")
    assert len(fig.layout.annotations) == n_dev  # one launch -> kernel arrow per device op
    assert len(executor_gantt(r, arrows=False).layout.annotations) == 0
    assert r.timeline.equals(before)  # figures never mutate their input
    bars = ordering_bars(r)
    assert dict(zip(bars.data[0].x, bars.data[0].y)) == r.ordering["mechanism"].value_counts().to_dict()
    pb = policy_bars(ex.compare_policies(g))
    assert len(pb.data[0].x) == len(ex.POLICIES) + 1


def test_placement_on_the_host_makes_cpu_ops(toy):
    g = ex.graphs.inception_graph(2)
    place = {"c1_b3_pool": "cpu0"}
    r = ex.simulate(g, streams="patent", threads="patent", placement=place, system=toy)
    assert r.kinds["c1_b3_pool"] == "cpu_sync" and "c1_b3_pool" not in r.streams
    # the host op waits on its device input with a host sync, and its device consumer needs no event
    mech = dict(zip(zip(r.ordering.src, r.ordering.dst), r.ordering.mechanism))
    assert mech[("c1_b3_pool", "c1_b3_proj")] == "host"
    assert mech[("c0_concat", "c1_b3_pool")] == "event: host sync"
    assert ("c0_concat", "c1_b3_pool") in r.events
    check_timeline(r.timeline, g)
    assert not r.violations(g)


def test_parameters_drive_simulate():
    vals = ex.PARAMETERS.defaults()
    vals.update(streams="nimble", max_kernels=2, dispatch_s=1e-5)
    r = ex.simulate(ex.graphs.inception_graph(1), **ex.simulate_kwargs(vals))
    assert r.params["streams"] == "nimble" and r.costs.max_kernels == 2 and r.costs.dispatch_s == 1e-5
    ex.PARAMETERS.check(ex.PARAMETERS.defaults())
