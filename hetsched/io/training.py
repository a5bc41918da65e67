"""Turn a forward (inference) graph into a training graph: forward, loss, backward, weight gradients.

This is what reverse-mode automatic differentiation records (Griewank & Walther, *Evaluating
Derivatives*, 2008, ch. 3; the PyTorch autograd design, Paszke et al., NeurIPS 2019):

* the **forward** ops are copied unchanged (``attrs["phase"] = "forward"``);
* one **loss** op per forward graph output (type ``Loss``) reads that output and a ``labels`` input
  and writes a 4-byte scalar graph output; its backward op ``Loss_grad`` seeds the gradient;
* for every forward op ``v`` whose outputs reach a loss, in reverse topological order, one
  **backward** op ``<v>.grad`` of type ``<v.op_type>_grad`` reads

  - the gradients of ``v``'s outputs, and
  - the forward tensors ``v``'s derivative needs (:data:`SAVED`): these **saved activations** are
    produced in the forward pass and consumed in the backward pass, so they live across the whole
    middle of the graph (the long lifetimes memory planners fight with);

  and writes one gradient tensor per activation input (``<t>.grad``, ``attrs["kind"]="gradient"``)
  and, for a parametrised op (``weight_bytes > 0``), the weight gradient ``<v>.weight_grad``
  (``kind="weight_grad"``, same bytes as the weights), a graph output: gradients are kept until the
  optimizer step, which is outside the graph; an op whose weights are tied to another op's
  (``attrs["shares_weights_with"]``, e.g. GPT-2's LM head and token embedding) hands its weight
  gradient to the owner's backward op, which accumulates it into the one graph-output gradient;
* a forward tensor read by several ops receives one partial gradient per reader
  (``<t>.grad@<reader>``); a ``Sum`` op ``<t>.grad_sum`` accumulates them into ``<t>.grad``;
* the gradient of a view (a tensor with ``alias_of``, e.g. Flatten/Reshape/Split outputs) is a view
  of the incoming gradient (``alias_of`` set, no allocation), as in PyTorch.

FLOPs of backward ops: a parametrised op costs its forward FLOPs once for the input gradient (dgrad)
and once for the weight gradient (wgrad), so 2x forward, or 1x when its input is a graph input
(no dgrad; the first convolution); a product of two activations (attention ``MatMul``) costs 2x;
every other op costs 1x its forward FLOPs (the usual "backward = 2 x forward" rule for the
matrix products, Kaplan et al. 2020 section 2.1; element-wise backward ops do about the same work
as forward). Gradient tensors have the dtype and shape of the tensor they differentiate.

>>> from hetsched.io.generators import chain
>>> t = training_graph(chain(2))
>>> [o.op_type for o in t.ops.values()]
['Conv', 'Relu', 'Loss', 'Loss_grad', 'Relu_grad', 'Conv_grad']
>>> t.tensor("op1:out").consumers        # saved activation: read by the loss and by two backward ops
('loss0', 'loss0.grad', 'op1.grad')
>>> t.graph_outputs()
['loss0', 'op0.weight_grad']
"""

from __future__ import annotations

from typing import Mapping

from ..errors import GraphError
from ..graph import OpGraph

__all__ = ["training_graph", "SAVED", "saved_kind"]

#: Which forward tensors an op's backward reads: "inputs", "outputs" or "none".
#: Sources: the derivative formulas in PyTorch's ``tools/autograd/derivatives.yaml`` (e.g. relu
#: saves its result, gelu/layer_norm/batch_norm/max_pool save their input, add saves nothing).
SAVED: Mapping[str, str] = {
    **dict.fromkeys(["Conv", "ConvTranspose", "Gemm", "MatMul", "Mul", "Div", "Pow", "Gelu", "LayerNormalization",
                     "BatchNormalization", "InstanceNormalization", "GroupNormalization", "MaxPool", "Gather",
                     "Clip", "Erf", "Sqrt", "Log", "Loss", "LSTM", "GRU"], "inputs"),
    **dict.fromkeys(["Relu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Exp"], "outputs"),
    **dict.fromkeys(["Add", "Sub", "Sum", "Concat", "Split", "Slice", "Reshape", "Flatten", "Transpose",
                     "AveragePool", "GlobalAveragePool", "Identity", "Dropout", "Squeeze", "Unsqueeze",
                     "ReduceMean", "ReduceSum", "Neg"], "none"),
}


def saved_kind(op_type: str) -> str:
    """What an op type's backward reads; unknown types conservatively save their inputs.

    >>> saved_kind("Relu"), saved_kind("Add"), saved_kind("MyCustomOp")
    ('outputs', 'none', 'inputs')
    """
    return SAVED.get(op_type, "inputs")


def training_graph(forward: OpGraph, *, name: str | None = None, label_bytes: int | None = None) -> OpGraph:
    """The training graph of ``forward`` (see the module docstring for what it contains).

    Parameters
    ----------
    forward : OpGraph
        A validated inference graph; its graph outputs are what the losses read.
    name : str, optional
        Name of the result (default ``<forward.name>-train``).
    label_bytes : int, optional
        Bytes of each ``labels`` input (default: one int64 class id per row of the output, i.e.
        8 x the product of all but the last dim of the output's ``attrs["shape"]``; without a
        shape, 8 x ``forward.meta["batch"]``).

    Returns
    -------
    OpGraph
        ``meta`` copies the forward meta plus ``training=True`` and op/phase counts.

    Examples
    --------
    >>> from hetsched.io.generators import fork_join
    >>> t = training_graph(fork_join(2, 1))
    >>> t.op("fork:out.grad_sum").op_type       # fork:out has two readers: their gradients are summed
    'Sum'
    >>> t.validate()
    """
    forward.validate()
    outs = forward.graph_outputs()
    if not outs:
        raise GraphError(f"graph {forward.name!r} has no outputs: nothing to take a loss of")
    g = forward.copy(name or f"{forward.name}-train")
    g.meta = {**forward.meta, "training": True}
    for o in forward.ops.values():
        g.set_op(o.name, attrs={**o.attrs, "phase": "forward"})
    for t in forward.tensors.values():
        if t.is_output:
            g.set_tensor(t.name, is_output=False)
    batch = int(forward.meta.get("batch", 1) or 1)
    lbytes = label_bytes if label_bytes is not None else 8 * batch

    # gradient producers of each forward tensor: list of (partial tensor name, producer op)
    partial: dict[str, list[str]] = {}
    # which forward tensors reach a loss (get a gradient)
    for i, out in enumerate(outs):
        t = forward.tensor(out)
        lab, loss, lg = f"labels{i}" if len(outs) > 1 else "labels", f"loss{i}", f"loss{i}.grad"
        shape = t.attrs.get("shape")
        nb = lbytes if label_bytes is not None or not shape else 8 * _prod(shape[:-1])
        g.add_tensor(lab, nb, consumers=[], attrs={"kind": "input", "dtype": "int64"})
        g.add_op(loss, "Loss", flops=5.0 * _numel(t), attrs={"phase": "loss", "of": out})
        g.add_consumer(out, loss)
        g.add_consumer(lab, loss)
        g.add_tensor(loss, 4, producer=loss, is_output=True, attrs={"kind": "loss", "shape": [], "dtype": "float32"})
        g.add_op(lg, "Loss_grad", flops=5.0 * _numel(t), attrs={"phase": "backward", "of": loss})
        for x in (loss, out, lab):
            g.add_consumer(x, lg)
        gname = f"{out}.grad@{loss}" if t.consumers else f"{out}.grad"
        g.add_tensor(gname, t.size_bytes, producer=lg, attrs=_grad_attrs(t))
        partial.setdefault(out, []).append(gname)

    def grad_of(tname: str) -> str | None:
        """The full gradient of a forward tensor, summing partials on first use."""
        parts = partial.get(tname)
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        t = forward.tensor(tname)
        op = f"{tname}.grad_sum"
        g.add_op(op, "Sum", flops=float(_numel(t) * (len(parts) - 1)), attrs={"phase": "backward", "of": tname})
        for p in parts:
            g.add_consumer(p, op)
        full = f"{tname}.grad"
        g.add_tensor(full, t.size_bytes, producer=op, attrs=_grad_attrs(t))
        partial[tname] = [full]
        return full

    pending_shared: dict[str, list[str]] = {}  # owner op -> weight-grad tensors of ops sharing its weights
    for v in reversed(forward.topological_order()):
        op = forward.op(v)
        out_grads = [gr for gr in (grad_of(t) for t in forward.outputs_of(v)) if gr is not None]
        if not out_grads:
            continue  # v does not reach a loss: no backward op
        ins = forward.inputs_of(v)
        act_ins = [t for t in ins if forward.tensor(t).producer is not None]
        kind = saved_kind(op.op_type)
        saved = ins if kind == "inputs" else forward.outputs_of(v) if kind == "outputs" else []
        has_w = op.weight_bytes > 0
        n_act = len([t for t in ins if forward.tensor(t).attrs.get("kind") != "index"])
        if has_w:
            mult = 2.0 if act_ins else 1.0
        elif op.op_type in ("MatMul", "Attention") and n_act >= 2:
            mult = 2.0
        else:
            mult = 1.0
        flops = float(op.flops) * mult
        if op.op_type == "Attention" and op.attrs.get("macs"):
            # four products against the forward's two, the softmax's pass once more: as the torch
            # importer counts a joint program's Attention_grad (and torch's flop counter the products)
            flops = float(op.flops) + 2.0 * float(op.attrs["macs"])
        bname = f"{v}.grad"
        battrs: dict = {"phase": "backward", "of": v}
        wb = op.weight_bytes if act_ins else 0
        if wb:
            # the backward op re-reads the forward op's weights: one weight, held once (the owner of a
            # weight v reads entirely from another op, a tied LM head's, is that op)
            owner = op.attrs.get("shares_weights_with")
            full = owner in forward.ops and int(op.attrs.get("shared_weight_bytes", wb) or 0) >= wb
            battrs.update(shares_weights_with=owner if full else v, shared_weight_bytes=int(wb))
        g.add_op(bname, f"{op.op_type}_grad", flops=flops, weight_bytes=wb, attrs=battrs)
        for gr in out_grads:
            g.add_consumer(gr, bname)
        for s in saved:
            g.add_consumer(s, bname)
        for t in act_ins:
            ft = forward.tensor(t)
            if ft.attrs.get("kind") == "index":
                continue  # integer ids: no gradient
            pname = f"{t}.grad@{v}" if len(ft.consumers) + ft.is_output > 1 else f"{t}.grad"
            alias = None
            if forward.tensor(forward.outputs_of(v)[0]).alias_of == t and len(out_grads) == 1 and len(forward.outputs_of(v)) == 1:
                alias = out_grads[0]  # the gradient of a view is a view of the incoming gradient
            g.add_tensor(pname, ft.size_bytes, producer=bname, alias_of=alias, attrs=_grad_attrs(ft))
            partial.setdefault(t, []).append(pname)
        for wg in pending_shared.pop(v, []):
            g.add_consumer(wg, bname)  # tied weights: the owner's gradient accumulates the sharer's
        if has_w:
            owner = op.attrs.get("shares_weights_with")
            shared = owner is not None and owner in forward.ops
            g.add_tensor(f"{v}.weight_grad", op.weight_bytes, producer=bname, is_output=not shared,
                         attrs={"kind": "weight_grad", "of": owner if shared else v})
            if shared:
                pending_shared.setdefault(owner, []).append(f"{v}.weight_grad")
    for wgs in pending_shared.values():  # the owner has no backward op: keep the sharer's gradient
        for wg in wgs:
            g.set_tensor(wg, is_output=True)
    g.meta["n_forward_ops"] = forward.n_ops
    g.meta["n_backward_ops"] = sum(1 for o in g.ops.values() if o.attrs.get("phase") == "backward")
    g.validate()
    return g


def _numel(t) -> int:
    shape = t.attrs.get("shape")
    if shape is not None:
        n = 1
        for s in shape:
            n *= int(s)
        return n
    return max(1, int(t.size_bytes) // 4)


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def _grad_attrs(t) -> dict:
    a = {"kind": "gradient", "of": t.name}
    for k in ("shape", "dtype"):
        if k in t.attrs:
            a[k] = t.attrs[k]
    return a
