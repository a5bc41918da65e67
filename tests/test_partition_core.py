"""partition_by_support: marking, the minimal-neighbourhood merge, global merging, min_group_size."""

from __future__ import annotations

import os
import subprocess
import sys

import networkx as nx
import pytest

from hetsched.errors import HetschedError, UnknownNameError, UnsupportedOpError
from hetsched.graph import OpGraph
from hetsched.io.generators import chain, layered, resnet_like, topcuoglu
from hetsched.io.systems import load_system, toy_system
from hetsched.partition import find_cycle_merge, partition_by_support
from hetsched.system import SupportTable

PATENT_TABLE = SupportTable({"fpga": {"Conv": 1}, "gpu": {"*": 2}, "cpu": {"*": 3}})


def _graph(nodes, edges, name="g"):
    g = OpGraph(name)
    for n, t in nodes:
        g.add_op(n, t, flops=1e6)
    for u, v in edges:
        g.connect(u, v, 1024, name=f"{u}:out")
    for n, _ in nodes:
        if not g.outputs_of(n):
            g.add_tensor(f"{n}:y", 8, producer=n, is_output=True)
    return g


def test_patent_figure_minimal_neighbourhood():
    # figure 3 of the patent: a, b and f, g are gpu ops separated by the fpga op d
    g = _graph([("a", "Gelu"), ("b", "Gelu"), ("d", "Conv"), ("f", "Gelu"), ("g", "Gelu")],
               [("a", "b"), ("b", "d"), ("d", "f"), ("f", "g")])
    r = partition_by_support(g, PATENT_TABLE)
    assert dict(r.groups) == {"gpu#0": ("a", "b"), "fpga#0": ("d",), "gpu#1": ("f", "g")}
    # "the whole computation starts the gpu backend twice and the fpga once"
    assert r.metrics["n_launches"] == 3
    # and the non-adjacent gpu regions are left apart with a reason
    na = [s for s in r.steps if s.action == "merge" and not s.accepted and s.reason.startswith("not adjacent")]
    assert len(na) == 1 and na[0].data["backend"] == "gpu"
    # global merging cannot join them either: that would be a cycle gpu -> fpga -> gpu
    rg = partition_by_support(g, PATENT_TABLE, merge="global")
    assert rg.metrics["n_groups"] == 3
    assert any("cycle" in s.reason for s in rg.steps if s.action == "merge" and not s.accepted)


def test_mark_steps_record_candidates_and_choice():
    g = _graph([("c", "Conv"), ("r", "Relu")], [("c", "r")])
    r = partition_by_support(g, PATENT_TABLE, merge=None)
    marks = [s for s in r.steps if s.action == "mark"]
    assert [s.subject for s in marks] == ["c", "r"]
    assert marks[0].data["candidates"] == (("fpga", 1), ("gpu", 2), ("cpu", 3))
    assert marks[0].data["choice"] == "fpga" and marks[1].data["choice"] == "gpu"
    assert "fpga" in marks[0].reason and "priority (1)" in marks[0].reason
    r2 = partition_by_support(g, PATENT_TABLE, merge=None, enabled=["gpu", "cpu"])
    m0 = r2.steps[0]
    assert m0.data["choice"] == "gpu" and m0.data["disabled"] == (("fpga", 1),)


def test_adjacent_merge_refuses_a_cycle():
    # a -> c directly and a -> d -> c: a and c are adjacent gpu ops but d (fpga) sits on another path
    g = _graph([("a", "Gelu"), ("d", "Conv"), ("c", "Gelu")], [("a", "d"), ("d", "c"), ("a", "c")])
    r = partition_by_support(g, PATENT_TABLE)
    assert r.metrics["n_groups"] == 3
    assert nx.is_directed_acyclic_graph(r.quotient)
    rej = [s for s in r.steps if s.action == "merge" and not s.accepted and "via" in s.data]
    assert len(rej) == 1 and rej[0].data["via"] == "d" and "cycle" in rej[0].reason
    assert r.metrics["n_cycle_rejections"] == 1


def test_global_joins_parallel_regions():
    # two independent branches x1->x2 (gpu) with fpga ops in between: global joins the gpu islands
    g = _graph(
        [("s", "Conv"), ("x1", "Gelu"), ("y1", "Gelu"), ("j", "Conv")],
        [("s", "x1"), ("s", "y1"), ("x1", "j"), ("y1", "j")],
    )
    ra = partition_by_support(g, PATENT_TABLE)
    rg = partition_by_support(g, PATENT_TABLE, merge="global")
    assert ra.metrics["n_groups"] == 4
    assert rg.metrics["n_groups"] == 3
    assert rg.group_of["x1"] == rg.group_of["y1"]
    acc = [s for s in rg.steps if s.action == "merge" and s.accepted and s.data.get("mode") == "global"]
    assert len(acc) == 1
    assert find_cycle_merge(rg) is None


def test_unsupported_error_lists_every_op():
    table = SupportTable({"fpga": {"Conv": 1}})
    g = _graph([("c", "Conv"), ("s1", "Softmax"), ("t", "Transpose"), ("s2", "Softmax")],
               [("c", "s1"), ("s1", "t"), ("t", "s2")])
    with pytest.raises(UnsupportedOpError) as e:
        partition_by_support(g, table)
    assert sorted(e.value.ops) == [("s1", "Softmax"), ("s2", "Softmax"), ("t", "Transpose")]
    for name in ("'s1'", "'s2'", "'t'", "Softmax", "Transpose"):
        assert name in str(e.value)
    # a disabled backend counts as unsupported too
    with pytest.raises(UnsupportedOpError) as e:
        partition_by_support(g, PATENT_TABLE, enabled=["fpga"])
    assert len(e.value.ops) == 3
    # with a fallback nothing fails, and the fallback ops are reported
    r = partition_by_support(g, table, fallback="fpga")
    assert r.metrics["n_fallback_ops"] == 3 and set(r.assignment.values()) == {"fpga"}
    assert sorted(r.fallback_ops) == [("s1", "Softmax"), ("s2", "Softmax"), ("t", "Transpose")]
    s = toy_system()
    r2 = partition_by_support(transformer_graph := _graph([("m", "MatMul"), ("x", "Softmax")], [("m", "x")]),
                              s, enabled=["fpga0"], fallback="cpu0")
    assert r2.assignment["x"] == "cpu0" and r2.assignment["m"] == "fpga0"
    mark = [st for st in r2.steps if st.subject == "x"][0]
    assert mark.data["rule"] == "fallback" and "disabled" in mark.reason
    assert transformer_graph.n_ops == 2


def test_bad_arguments_are_named():
    g = chain(4)
    s = toy_system()
    with pytest.raises(UnknownNameError) as e:
        partition_by_support(g, s, enabled=["tpu9"])
    assert e.value.device == "tpu9"
    with pytest.raises(UnknownNameError) as e:
        partition_by_support(g, s, fallback="tpu9")
    assert e.value.device == "tpu9"
    with pytest.raises(UnknownNameError) as e:
        partition_by_support(g, s, overrides={"nope": "gpu0"})
    assert e.value.op == "nope"
    with pytest.raises(UnsupportedOpError) as e:
        partition_by_support(_graph([("x", "Softmax")], []), s, overrides={"x": "fpga0"})
    assert e.value.op == "x" and e.value.device == "fpga0"
    with pytest.raises(HetschedError) as e:
        partition_by_support(g, s, merge="sideways")
    assert e.value.field == "merge"
    with pytest.raises(HetschedError) as e:
        partition_by_support(g, s, min_group_size=3)
    assert e.value.field == "fallback"
    with pytest.raises(HetschedError) as e:
        partition_by_support(g, s, min_group_size=0, fallback="cpu0")
    assert e.value.field == "min_group_size"
    with pytest.raises(HetschedError) as e:
        partition_by_support(g, {"gpu0": {"*": 1}})
    assert e.value.field == "table_or_system"
    bad = chain(3)
    bad.add_tensor("loop", 4, producer="op2", consumers=["op0"])
    with pytest.raises(HetschedError):
        partition_by_support(bad, s)


def test_overrides_pin_ops():
    s = toy_system()
    r = partition_by_support(chain(4), s, overrides={"op1": "fpga0"})
    assert r.assignment["op1"] == "fpga0"
    mark = [st for st in r.steps if st.subject == "op1"][0]
    assert mark.data["rule"] == "override"


def test_min_group_size_sends_small_islands_to_fallback():
    s = load_system("cpu_gpu_fpga")
    g = resnet_like(n_stages=2, blocks_per_stage=1, channels=8, hw=8)
    # an accelerator that only runs convolutions: every conv is a one-op island
    s2 = s.with_support(SupportTable({"gpu0": {"Conv": 1}, "cpu0": {"*": 2}}))
    r = partition_by_support(g, s2)
    assert r.metrics["n_groups"] > 5
    r2 = partition_by_support(g, s2, min_group_size=2, fallback="cpu0")
    sizes = {gname: len(ops) for gname, ops in r2.groups.items() if r2.group_backend[gname] != "cpu0"}
    assert all(n >= 2 for n in sizes.values())
    assert r2.metrics["n_fallback_groups"] > 0
    assert r2.metrics["n_groups"] < r.metrics["n_groups"]
    fb = [st for st in r2.steps if st.action == "fallback"]
    assert all("min_group_size=2" in st.reason for st in fb)
    # k = 1 changes nothing
    assert dict(partition_by_support(g, s2, min_group_size=1, fallback="cpu0").groups) == dict(r.groups)


def test_replay_rebuilds_the_partition():
    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    g = layered(5, 4, seed=3)
    for kw in ({"merge": "adjacent"}, {"merge": "global"}, {"merge": "global", "min_group_size": 3, "fallback": "cpu0"}):
        r = partition_by_support(g, s, **kw)
        st = r.replay(len(r.steps) - 1)
        assert st["backend"] == dict(r.assignment)
        # same blocks, whatever the names
        blocks = {}
        for op, rep in st["group"].items():
            blocks.setdefault(rep, set()).add(op)
        assert sorted(map(sorted, blocks.values())) == sorted(map(sorted, (set(v) for v in r.groups.values())))
        assert r.replay(-1) == {"backend": {}, "group": {}}
    n_marks = sum(1 for x in r.steps if x.action == "mark")
    mid = r.replay(n_marks - 1)
    assert len(mid["backend"]) == g.n_ops and len(set(mid["group"].values())) == g.n_ops
    with pytest.raises(IndexError):
        r.replay(len(r.steps))


def test_metrics_count_copies_and_edges():
    g = OpGraph("copies")
    for n, t in [("a", "Gelu"), ("b", "Conv"), ("c", "Conv")]:
        g.add_op(n, t)
    g.add_tensor("x", 100, consumers=["a"])
    g.add_tensor("t", 1000, producer="a", consumers=["b", "c"])  # one tensor, two fpga readers
    g.add_tensor("y", 10, producer="b", is_output=True)
    g.add_tensor("z", 10, producer="c", is_output=True)
    r = partition_by_support(g, PATENT_TABLE)
    # b and c are both fpga but not adjacent to each other: two fpga groups, yet one copy of t
    assert r.metrics["n_copies"] == 1 and r.metrics["bytes_copied"] == 1000
    assert r.metrics["n_cross_edges"] == len(r.cross_edges) == r.metrics["n_groups"] - 1
    ef = r.edges_frame()
    assert ef["bytes"].tolist() == [1000.0] * len(ef)
    gf = r.groups_frame()
    assert gf["n_ops"].sum() == 3
    rg = partition_by_support(g, PATENT_TABLE, merge="global")
    assert rg.metrics["n_groups"] == 2 and rg.metrics["n_cross_edges"] == 1


def test_adjacent_is_maximal_against_networkx():
    """Differential: after adjacent merging, every remaining same-backend quotient edge would
    make a cycle if contracted (checked independently with networkx)."""
    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2).with_priority("fpga0", "Add", 1))
    for seed in range(25):
        g = topcuoglu(12 + seed % 10, seed=seed, out_degree=2.0)
        r = partition_by_support(g, s)
        Q = r.quotient
        assert nx.is_directed_acyclic_graph(Q)
        for u, v in Q.edges:
            if r.group_backend[u] == r.group_backend[v]:
                C = nx.contracted_nodes(Q, u, v, self_loops=False)
                assert not nx.is_directed_acyclic_graph(C), (seed, u, v)
        # every group of the adjacent rule is connected within its backend
        for gname, ops in r.groups.items():
            assert nx.is_weakly_connected(g.nx.subgraph(ops))
        rg = partition_by_support(g, s, merge="global")
        assert rg.metrics["n_groups"] <= r.metrics["n_groups"]
        assert nx.is_directed_acyclic_graph(rg.quotient)


def test_deterministic_across_hash_seeds():
    code = (
        "from hetsched.io.generators import topcuoglu;from hetsched.io.systems import toy_system;"
        "from hetsched.partition import partition_by_support as p;s=toy_system();"
        "s=s.with_support(s.support.with_priority('gpu0','Conv',2));"
        "r=p(topcuoglu(60,seed=5),s,merge='global');print(sorted(r.groups.items()))"
    )
    outs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout)
    assert len(outs) == 1


def test_repartition_after_graph_change_sees_the_change():
    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    g = chain(4)
    r1 = partition_by_support(g, s)
    g.set_op("op1", op_type="Conv")  # the cached index must notice
    r2 = partition_by_support(g, s)
    assert r1.assignment["op1"] == "gpu0" and r2.assignment["op1"] == "fpga0"
    assert r2.metrics["n_groups"] < r1.metrics["n_groups"]


def test_custom_merge_strategy_is_still_cycle_checked():
    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    g = layered(6, 5, seed=2)

    def everything(ctx):
        # ask to merge every pair of same-backend ops: the guard must refuse the cyclic ones
        ops = ctx.ops
        for i, a in enumerate(ops):
            for b in ops[i + 1:]:
                if ctx.backend(a) == ctx.backend(b):
                    ctx.merge(a, b)

    r = partition_by_support(g, s, merge=everything)
    assert r.params["merge"] == "everything"
    assert nx.is_directed_acyclic_graph(r.quotient)
    assert r.metrics["n_groups"] <= partition_by_support(g, s, merge="global").metrics["n_groups"]
    assert any(st.data.get("mode") == "custom" for st in r.steps if st.action == "merge")

    def wrong(ctx):
        a = next(o for o in ctx.ops if ctx.backend(o) == "gpu0")
        b = next(o for o in ctx.ops if ctx.backend(o) == "fpga0")
        ctx.merge(a, b)

    with pytest.raises(HetschedError, match="different backends"):
        partition_by_support(g, s, merge=wrong)


@pytest.mark.parametrize("n,deg,seed", [(200, 3.0, 1), (300, 4.0, 2), (400, 2.0, 3)])
def test_larger_random_graphs_against_networkx(n, deg, seed):
    """Bigger graphs exercise the large-group paths of the cycle guard (backward probe, renumbering)."""
    s = load_system("cpu_gpu_fpga")
    table = SupportTable({"fpga0": {"Conv": 1, "Relu": 1, "Add": 1}, "gpu0": {"MatMul": 1, "Softmax": 1}, "cpu0": {"*": 2}})
    g = topcuoglu(n, seed=seed, out_degree=deg)
    for merge in ("adjacent", "global"):
        r = partition_by_support(g, s.with_support(table), merge=merge)
        Q = r.quotient
        assert nx.is_directed_acyclic_graph(Q)
        if merge == "adjacent":
            for u, v in Q.edges:
                if r.group_backend[u] == r.group_backend[v]:
                    assert not nx.is_directed_acyclic_graph(nx.contracted_nodes(Q, u, v, self_loops=False))


def test_custom_merge_strategy_naming_an_unknown_op_gets_a_named_error():
    def typo(ctx):
        ctx.merge(ctx.ops[0], "no-such-op")

    with pytest.raises(UnknownNameError) as ei:
        partition_by_support(chain(4), toy_system(), merge=typo)
    assert ei.value.op == "no-such-op"


def test_merge_strategies_are_one_registry_and_named_ones_are_called_like_custom_ones():
    """MERGE_STRATEGIES is the house's registry (name -> f(ctx)): a strategy of one's own that calls a
    named one through the same MergeContext gets the very same partition, log and all."""
    from hetsched.partition import MERGE_STRATEGIES
    from hetsched.registry import describe, label

    s = toy_system()
    s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    g = layered(6, 5, seed=2)
    for name, fn in MERGE_STRATEGIES.items():
        def mine(ctx, fn=fn):
            fn(ctx)

        a = partition_by_support(g, s, merge=name, min_group_size=2, fallback="cpu0")
        b = partition_by_support(g, s, merge=fn, min_group_size=2, fallback="cpu0")
        c = partition_by_support(g, s, merge=mine)
        assert dict(a.groups) == dict(b.groups) and b.params["merge"] == fn.__name__
        assert a.steps_frame().equals(b.steps_frame())
        assert dict(c.groups) == dict(partition_by_support(g, s, merge=name).groups)
        assert label(fn) and describe(fn).startswith(label(fn) + ": ")
    assert label(MERGE_STRATEGIES["adjacent"]) == "Adjacent (the patent)"
    with pytest.raises(UnknownNameError, match="choose from adjacent, global, none") as ei:
        partition_by_support(g, s, merge="sideways")
    assert ei.value.field == "merge"
