"""randwire_ws: the op-level default and the node-level ``fuse_aggregation=True`` variant."""

from __future__ import annotations

import networkx as nx
import pytest

from hetsched.errors import HetschedError
from hetsched.io import generators as gen


def _ws_preds(n: int, k: int, p: float, seed: int) -> dict[int, list[int]]:
    ws = nx.connected_watts_strogatz_graph(n, k, p, tries=100, seed=seed)
    return {v: sorted(u for u in ws.neighbors(v) if u < v) for v in range(n)}


@pytest.mark.parametrize("n,seed", [(12, 0), (30, 3), (59, 1), (99, 7)])
def test_fused_is_one_op_per_node_reading_every_predecessor(n, seed):
    g = gen.randwire_ws(n, seed=seed, channels=4, hw=4, fuse_aggregation=True)
    g.validate()
    preds = _ws_preds(n, 4, 0.75, seed)
    assert g.n_ops == n + 1
    assert g.name == f"randwire-ws-n{n}-k4-p0.75-s{seed}-fused"
    assert g.meta["fuse_aggregation"] is True
    for v in range(n):
        op = g.op(f"n{v}")
        assert op.op_type == "Conv"
        want = [f"n{u}:out" for u in preds[v]] or ["input"]
        assert sorted(g.inputs_of(f"n{v}")) == sorted(want)
        assert list(g.outputs_of(f"n{v}")) == [f"n{v}:out"]
    sinks = sorted(f"n{v}:out" for v in range(n) if not any(v in preds[w] for w in range(n)))
    assert sorted(g.inputs_of("output.avg")) == sinks
    assert g.tensor("output").is_output
    # every node output feeds every successor (distribution): consumers == successors in the WS DAG
    for v in range(n):
        succ = sorted(f"n{w}" for w in range(n) if v in preds[w])
        cons = sorted(c for c in g.tensor(f"n{v}:out").consumers if c != "output.avg")
        assert cons == succ


def test_fused_flops_are_aggregation_plus_conv():
    C, S = 8, 8
    g = gen.randwire_ws(20, seed=2, channels=C, hw=S, fuse_aggregation=True)
    op_level = gen.randwire_ws(20, seed=2, channels=C, hw=S)
    conv = 2 * C * S * S * C * 9 / 4
    preds = _ws_preds(20, 4, 0.75, 2)
    for v in range(20):
        n_in = max(1, len(preds[v]))
        assert g.op(f"n{v}").flops == pytest.approx(C * S * S * (n_in - 1) + conv)
    # the fused graph does the same work as the op-level one, in fewer ops
    assert g.total_flops == pytest.approx(op_level.total_flops)
    assert g.total_weight_bytes == op_level.total_weight_bytes
    assert g.n_ops < op_level.n_ops


def test_fused_and_op_level_share_the_ws_graph_and_never_collide():
    f = gen.randwire_ws(40, seed=5, channels=4, hw=4, fuse_aggregation=True)
    o = gen.randwire_ws(40, seed=5, channels=4, hw=4)
    assert f.name != o.name and o.name == "randwire-ws-n40-k4-p0.75-s5"
    assert "fuse_aggregation" not in o.meta
    # contracting each op-level Add into its Conv gives the fused graph's node DAG
    node_of = {name: name.split(".")[0] for name in o.ops}
    contracted = sorted({(node_of[a], node_of[b]) for a, b in o.nx.edges if node_of[a] != node_of[b]})
    fused = sorted((a.split(".")[0], b.split(".")[0]) for a, b in f.nx.edges)
    assert contracted == fused and len(fused) > 40


def test_deterministic_and_named():
    a = gen.randwire_ws(33, seed=4, fuse_aggregation=True)
    b = gen.randwire_ws(33, seed=4, fuse_aggregation=True)
    assert a.summary() == b.summary() and list(a.ops) == list(b.ops)
    assert gen.randwire_ws(33, seed=4, fuse_aggregation=True, name="x").name == "x"
    assert gen.randwire_ws(33, seed=5, fuse_aggregation=True).summary() != a.summary()


def test_default_is_op_level():
    g = gen.randwire_ws(16, seed=1, channels=4, hw=4)
    preds = _ws_preds(16, 4, 0.75, 1)
    n_multi = sum(1 for v in range(16) if len(preds[v]) > 1)
    assert g.n_ops == 16 + n_multi + 1
    assert all(g.op(f"n{v}.conv").op_type == "Conv" for v in range(16))
    assert all(len(g.inputs_of(f"n{v}.conv")) == 1 for v in range(16))


@pytest.mark.parametrize("fused", [False, True])
def test_bad_arguments_raise(fused):
    with pytest.raises(HetschedError, match="p must be"):
        gen.randwire_ws(10, p=1.5, fuse_aggregation=fused)
    with pytest.raises(HetschedError, match="k .* smaller"):
        gen.randwire_ws(4, k=4, fuse_aggregation=fused)
