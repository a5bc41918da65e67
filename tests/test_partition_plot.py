"""Partition figures: pure functions of results (never mutate their input)."""

from __future__ import annotations

from hetsched.graph import OpGraph
from hetsched.io.generators import chain, resnet_like
from hetsched.io.systems import toy_system
from hetsched.partition import partition_by_support, simulate_buffered
from hetsched.plot.partition import buffer_occupancy, partition_view, quotient_view


def _setup():
    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    return s, partition_by_support(resnet_like(n_stages=2, blocks_per_stage=1, channels=8, hw=8), s)


def test_partition_and_quotient_views():
    s, r = _setup()
    fig = partition_view(r)
    markers = {t.name for t in fig.data if t.mode == "markers"}
    assert markers == set(r.assignment.values())
    hl = [t for t in fig.data if t.name == "highlighted edges"]
    assert hl and len([x for x in hl[0].x if x is None]) == sum(
        1 for u, v in r.graph.nx.edges if r.assignment[u] != r.assignment[v])
    figg = partition_view(r, by="group")
    assert {t.name for t in figg.data if t.mode == "markers"} == set(r.groups)
    q = quotient_view(r)
    nodes = [n for t in q.data if t.mode == "markers+text" for n in t.text]
    assert sorted(nodes) == sorted(r.groups)


def test_buffer_occupancy_figure_does_not_mutate():
    s, r = _setup()
    res = simulate_buffered(r, s, n_inputs=5, buffer_depth=3)
    before = res.occupancy.copy()
    fig = buffer_occupancy(res)
    assert res.occupancy.equals(before)
    lines = [t for t in fig.data if t.name.startswith("depth")]
    assert lines and max(lines[0].y) == 3
    one = res.occupancy["buffer"].iloc[0]
    assert [t.name for t in buffer_occupancy(res, buffers=[one]).data] == [one, "depth 3"]


def test_empty_graph_is_fine():
    g = OpGraph("empty")
    r = partition_by_support(g, toy_system())
    assert r.metrics["n_groups"] == 0 and len(r.groups) == 0
    single = partition_by_support(chain(1), toy_system())
    res = simulate_buffered(single, toy_system(), n_inputs=2, buffer_depth=1)
    assert res.metrics["n_launches"] == 2
