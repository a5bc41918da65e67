"""Training graphs: forward + loss + backward with gradients, saved activations and weight gradients."""

from __future__ import annotations

import time

import pytest
from hypothesis import given

from hetsched.errors import GraphError
from hetsched.graph import OpGraph
from hetsched.io import zoo
from hetsched.io.generators import chain
from hetsched.io.training import saved_kind, training_graph
from strategies import small_dags


def _phase(g, op):
    return g.op(op).attrs["phase"]


def check_training(fwd: OpGraph, t: OpGraph) -> None:
    """Structural invariants every training graph must satisfy."""
    t.validate()
    # forward ops are copied unchanged (type, flops, weights)
    for o in fwd.ops.values():
        assert t.op(o.name).op_type == o.op_type and t.op(o.name).flops == o.flops
        assert t.op(o.name).weight_bytes == o.weight_bytes and _phase(t, o.name) == "forward"
    # ops reaching an output: exactly one backward op each, typed <FwdType>_grad
    reach = set()
    for out in fwd.graph_outputs():
        p = fwd.tensor(out).producer
        if p is not None:
            reach.add(p)
    for v in reversed(fwd.topological_order()):
        if any(s in reach for s in fwd.successors(v)):
            reach.add(v)
    bwd = [o for o in t.ops.values() if o.attrs.get("phase") == "backward" and o.op_type not in ("Sum", "Loss_grad")]
    assert sorted(o.attrs["of"] for o in bwd) == sorted(reach)
    for o in bwd:
        assert o.op_type == f"{fwd.op(o.attrs['of']).op_type}_grad"
        assert o.name == f"{o.attrs['of']}.grad"
    # every op that runs backward comes after every forward op it differentiates (topological order)
    pos = {n: i for i, n in enumerate(t.topological_order())}
    for o in bwd:
        assert pos[o.name] > pos[o.attrs["of"]]
    # weight gradients: one per parametrised op reaching a loss, a graph output the size of the weights
    for v in reach:
        op = fwd.op(v)
        if op.weight_bytes > 0 and not op.attrs.get("shares_weights_with"):
            wg = t.tensor(f"{v}.weight_grad")
            assert wg.is_output and wg.size_bytes == op.weight_bytes and wg.producer == f"{v}.grad"
    # gradient tensors have the size of what they differentiate
    for tt in t.tensors.values():
        if tt.attrs.get("kind") == "gradient":
            assert tt.size_bytes == fwd.tensor(tt.attrs["of"]).size_bytes
    # saved activations: forward tensors read by backward ops follow the SAVED rule
    for o in bwd:
        f = fwd.op(o.attrs["of"])
        kind = saved_kind(f.op_type)
        fwd_ins = [x for x in t.inputs_of(o.name) if x in fwd.tensors]
        expect = fwd.inputs_of(f.name) if kind == "inputs" else fwd.outputs_of(f.name) if kind == "outputs" else []
        assert sorted(fwd_ins) == sorted(expect)
    # one loss per forward output, a 4-byte graph output
    losses = [o for o in t.ops.values() if o.op_type == "Loss"]
    assert len(losses) == len(fwd.graph_outputs())
    for lo in losses:
        assert t.tensor(lo.name).is_output and t.tensor(lo.name).size_bytes == 4
    # forward tensors are no longer graph outputs (only losses and weight grads are)
    assert all(t.tensor(x).attrs.get("kind") in ("loss", "weight_grad") for x in t.graph_outputs())


def test_chain_training_graph_exact():
    g = chain(3, seed=1)
    t = training_graph(g)
    check_training(g, t)
    assert [o.name for o in t.ops.values()] == [
        "op0", "op1", "op2", "loss0", "loss0.grad", "op2.grad", "op1.grad", "op0.grad"]
    # Conv backward (with an activation input): dgrad + wgrad = 2x forward; the first conv reads only
    # the graph input, so it has no dgrad: 1x, and it does not read the weights
    assert t.op("op2.grad").flops == 2 * g.op("op2").flops
    assert t.op("op0.grad").flops == g.op("op0").flops and t.op("op0.grad").weight_bytes == 0
    assert t.op("op2.grad").weight_bytes == g.op("op2").weight_bytes
    # saved activation: op1's output (Relu saves its result) is read by op1.grad AND op2.grad
    # (Conv saves its input): produced in forward, last read in backward
    assert t.tensor("op1:out").consumers == ("op2", "op2.grad", "op1.grad")
    assert t.tensor("op0:out").consumers == ("op1",)  # Relu's input is not saved
    assert t.graph_outputs() == ["loss0", "op2.weight_grad", "op0.weight_grad"]
    # gradient chain
    assert t.tensor("op2:out.grad").producer == "loss0.grad"
    assert t.tensor("op1:out.grad").producer == "op2.grad"
    assert t.tensor("op0:out.grad").producer == "op1.grad"
    assert t.meta["training"] is True and t.meta["n_backward_ops"] == 4


def test_gradient_accumulation_sum():
    g = OpGraph("diamond")
    g.add_op("a", "Conv", flops=10, weight_bytes=8)
    g.add_op("b", "Relu", flops=2)
    g.add_op("c", "Relu", flops=2)
    g.add_op("d", "Add", flops=2)
    g.add_tensor("x", 16, consumers=["a"])
    g.add_tensor("a:out", 16, producer="a", consumers=["b", "c"])
    g.add_tensor("b:out", 16, producer="b", consumers=["d"])
    g.add_tensor("c:out", 16, producer="c", consumers=["d"])
    g.add_tensor("d:out", 16, producer="d", is_output=True)
    t = training_graph(g)
    check_training(g, t)
    s = t.op("a:out.grad_sum")
    assert s.op_type == "Sum" and s.flops == 4  # 16 bytes = 4 fp32 elements, one add
    assert sorted(t.inputs_of("a:out.grad_sum")) == ["a:out.grad@b", "a:out.grad@c"]
    assert t.inputs_of("a.grad") == ["a:out.grad", "x"]
    assert t.tensor("a.weight_grad").size_bytes == 8


def test_output_that_is_also_read_gets_summed_gradient():
    g = OpGraph("two-outputs")
    g.add_op("a", "Relu", flops=1)
    g.add_op("b", "Relu", flops=1)
    g.add_tensor("x", 4, consumers=["a"])
    g.add_tensor("a:out", 4, producer="a", consumers=["b"], is_output=True)
    g.add_tensor("b:out", 4, producer="b", is_output=True)
    t = training_graph(g)
    check_training(g, t)
    assert sorted(t.inputs_of("a:out.grad_sum")) == ["a:out.grad@b", "a:out.grad@loss0"]


def test_view_gradient_is_alias():
    t = zoo.resnet50(training=True, image_size=64)
    # Flatten is a view: its input gradient aliases the incoming gradient
    assert t.tensor("avgpool:out.grad").alias_of == "flatten:out.grad"


def test_tied_weights_accumulate_into_owner():
    t = zoo.gpt2_small(training=True, seq_len=16, n_layers=1)
    wg = t.tensor("lm_head.weight_grad")
    assert not wg.is_output and wg.consumers == ("wte.grad",)
    assert t.tensor("wte.weight_grad").is_output
    n_out = sum(1 for x in t.graph_outputs() if t.tensor(x).attrs.get("kind") == "weight_grad")
    assert n_out == sum(1 for o in t.ops.values() if o.attrs.get("phase") == "forward" and o.weight_bytes
                        and not o.attrs.get("shares_weights_with"))


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2", "vgg16", "inception_v3", "bert_base", "gpt2_small", "randwire_ws"])
def test_zoo_training_graphs(name):
    kw = {"seq_len": 32} if name in ("bert_base", "gpt2_small") else {"image_size": 299 if name == "inception_v3" else 224}
    f = zoo.ZOO[name](batch=2, **kw)
    t = zoo.ZOO[name](batch=2, training=True, **kw)
    check_training(f, t)
    assert t.meta["params"] == f.meta["params"] and t.meta["batch"] == 2
    # backward costs about twice the forward (Kaplan et al. 2020 sec. 2.1): total ~3x forward
    ratio = t.total_flops / f.total_flops
    assert 2.8 < ratio < 3.1, ratio
    # saved activations exist: forward tensors whose last reader is a backward op
    saved = [x for x in t.tensors.values() if x.producer and _phase(t, x.producer) == "forward"
             and any(_phase(t, c) == "backward" for c in x.consumers)]
    assert len(saved) > f.n_ops // 4


def test_training_with_labels_per_token():
    t = zoo.gpt2_small(batch=2, seq_len=8, n_layers=1, training=True)
    assert t.tensor("labels").size_bytes == 2 * 8 * 8  # one int64 label per token
    r = zoo.resnet50(batch=3, image_size=64, training=True)
    assert r.tensor("labels").size_bytes == 3 * 8


def test_no_outputs_is_an_error():
    g = OpGraph("noout")
    g.add_op("a", "Relu")
    g.add_tensor("x", 4, consumers=["a"])
    with pytest.raises(GraphError):
        training_graph(g)


def test_gpt2_training_build_is_fast():
    # the hard target (2 s) is checked by bench/bench_io.py; this is a loose guard against regressions
    t0 = time.perf_counter()
    zoo.gpt2_small(training=True)
    assert time.perf_counter() - t0 < 10


@given(small_dags())
def test_training_graph_property(g):
    t = training_graph(g)
    check_training(g, t)
    assert t.n_ops >= g.n_ops + 2
