"""PyTorch import through ``torch.export``: an ``nn.Module`` and example inputs as an OpGraph.

``torch.export.export`` traces the module with fake tensors into an ATen-level FX graph
(``ExportedProgram``). ``load_torch`` turns it into an :class:`~hetsched.graph.OpGraph`:

* one op per ``call_function`` node; ``op_type`` is the ONNX-style name of the ATen op
  (:data:`ATEN_TO_TYPE`, e.g. ``aten.conv2d`` -> ``Conv``, ``aten.linear`` -> ``Gemm``); the ATen
  target is kept in ``attrs["aten"]``; ``operator.getitem`` nodes are not ops, they select one output
  of a multi-output op;
* tensor sizes from the fake-tensor metadata (``node.meta["val"]``: shape x element size);
* parameters, buffers and constants are **weights** on the ops that read them (``weight_bytes``),
  as H2H and the ONNX importer do; a view of a weight (``aten.t`` of a linear weight) stays a
  weight; ``meta["params"]`` counts parameter elements (buffers excluded, as ``numel()`` over
  ``module.parameters()``);
* FLOPs from :mod:`hetsched.io.flops` (a MAC = 2 FLOPs) using the fake shapes;
  ``scaled_dot_product_attention`` counts its two matrix products and its softmax;
* outputs that share storage with an input (per torch's fake tensors: ``view``, ``permute``,
  ``expand``, ``slice``, a ``reshape`` of a contiguous tensor...) have ``alias_of`` that input; a
  view-type op that has to copy (``reshape`` of a non-contiguous tensor) gets
  ``attrs["copies"] = True`` and is priced as the copy it is;
* ATen ops with no rule are kept as ``aten.<name>`` with ``flops=0`` and one warning lists them;
* every output of the program is a graph output: the user outputs, and for a joint forward +
  backward program (``torch.export.experimental._export_forward_backward``) the loss and every
  gradient (weight gradients included: they live until the optimizer step, outside the graph);
* ``dropout`` records ``attrs["training"]`` (inference dropout is an identity, priced as a launch);
* an optional per-op **workspace** (scratch memory an op allocates and frees while it runs, e.g.
  a softmax backward's temporaries) becomes an output tensor ``<op>:workspace`` that nobody reads
  (``attrs["kind"] = "workspace"``): every memory model then holds it for the op's step only,
  and the cost models do not count it as traffic. :func:`hetsched.io.profile.load_profile`
  measures it from a ``profile_memory=True`` trace.

torch is imported inside the functions, so this module imports without it (the ``torch`` extra:
``make venv`` installs its CPU build; README, "Install with pip", says how elsewhere).

Examples
--------
>>> import torch
>>> g = load_torch(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
>>> g.op("linear").op_type, g.op("linear").flops, g.meta["params"]
('Gemm', 54.0, 10)
"""

from __future__ import annotations

import operator
import warnings
from math import prod
from typing import Any, Mapping, Sequence

from ..errors import FormatError
from ..graph import OpGraph
from .flops import ELEMENTWISE_FLOPS, MAC_OPS

__all__ = ["load_torch", "ATEN_TO_TYPE"]

#: ATen op (overload packet name) -> ONNX-style op type.
ATEN_TO_TYPE: Mapping[str, str] = {
    **dict.fromkeys(["conv1d", "conv2d", "conv3d", "convolution", "_convolution"], "Conv"),
    **dict.fromkeys(["conv_transpose1d", "conv_transpose2d", "conv_transpose3d"], "ConvTranspose"),
    **dict.fromkeys(["linear", "addmm"], "Gemm"),
    **dict.fromkeys(["mm", "bmm", "matmul", "baddbmm"], "MatMul"),
    "scaled_dot_product_attention": "Attention",
    **dict.fromkeys(["relu", "relu_"], "Relu"),
    **dict.fromkeys(["hardtanh", "hardtanh_", "clamp", "clamp_min", "clamp_max"], "Clip"),
    "gelu": "Gelu", "sigmoid": "Sigmoid", "tanh": "Tanh", "silu": "Sigmoid", "hardswish": "HardSwish",
    "leaky_relu": "LeakyRelu", "elu": "Elu", "erf": "Erf", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
    "rsqrt": "Reciprocal", "reciprocal": "Reciprocal", "neg": "Neg", "abs": "Abs", "pow": "Pow",
    **dict.fromkeys(["add", "add_"], "Add"), **dict.fromkeys(["sub", "sub_", "rsub"], "Sub"),
    **dict.fromkeys(["mul", "mul_"], "Mul"), **dict.fromkeys(["div", "div_"], "Div"),
    "maximum": "Max", "minimum": "Min", "where": "Where", "masked_fill": "Where",
    **dict.fromkeys(["batch_norm", "native_batch_norm", "_native_batch_norm_legit_no_training",
                     "_native_batch_norm_legit", "_native_batch_norm_legit_functional"], "BatchNormalization"),
    **dict.fromkeys(["layer_norm", "native_layer_norm"], "LayerNormalization"),
    "group_norm": "GroupNormalization", "instance_norm": "InstanceNormalization",
    **dict.fromkeys(["softmax", "_softmax"], "Softmax"),
    **dict.fromkeys(["log_softmax", "_log_softmax"], "LogSoftmax"),
    **dict.fromkeys(["max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices"], "MaxPool"),
    **dict.fromkeys(["avg_pool1d", "avg_pool2d", "avg_pool3d"], "AveragePool"),
    **dict.fromkeys(["adaptive_avg_pool1d", "adaptive_avg_pool2d", "_adaptive_avg_pool2d"], "GlobalAveragePool"),
    "mean": "ReduceMean", "sum": "ReduceSum", "amax": "ReduceMax", "amin": "ReduceMin",
    **dict.fromkeys(["view", "_unsafe_view", "reshape", "flatten", "unflatten", "alias", "detach"], "Reshape"),
    **dict.fromkeys(["unsqueeze", "unsqueeze_"], "Unsqueeze"), **dict.fromkeys(["squeeze", "squeeze_"], "Squeeze"),
    **dict.fromkeys(["permute", "transpose", "t", "swapaxes"], "Transpose"),
    **dict.fromkeys(["expand", "expand_as"], "Expand"),
    **dict.fromkeys(["slice", "select", "narrow"], "Slice"),
    **dict.fromkeys(["split", "split_with_sizes", "chunk", "unbind"], "Split"),
    **dict.fromkeys(["cat", "concat", "stack"], "Concat"),
    **dict.fromkeys(["embedding"], "Gather"), "index_select": "Gather",
    **dict.fromkeys(["dropout", "dropout_", "native_dropout"], "Dropout"),
    **dict.fromkeys(["clone", "contiguous", "to", "_to_copy", "type_as"], "Identity"),
    "pad": "Pad", "constant_pad_nd": "Pad", "repeat": "Tile",
}

#: ATen ops whose outputs share storage with their first input (no allocation).
_VIEWS = frozenset(["view", "_unsafe_view", "reshape", "flatten", "unflatten", "alias", "detach", "unsqueeze",
                    "squeeze", "permute", "transpose", "t", "swapaxes", "expand", "expand_as", "slice", "select",
                    "narrow", "split", "split_with_sizes", "chunk", "unbind"])


def _tensors_in(x: Any):
    """fx Nodes inside nested args/kwargs, in order."""
    import torch.fx

    if isinstance(x, torch.fx.Node):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors_in(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from _tensors_in(y)


def _shape(v: Any) -> list[int] | None:
    import torch

    if isinstance(v, torch.Tensor):
        try:
            return [int(s) for s in v.shape]
        except Exception:  # symbolic (dynamic) sizes
            return None
    return None


def _alias_of(out: Any, in_vals: list[tuple[str, Any]], packet: str) -> str | None:
    """The input tensor ``out`` shares storage with, from the fake tensors' aliasing (exact: a
    ``reshape`` of a non-contiguous tensor copies, ``contiguous`` of a contiguous one does not);
    the view-op list when torch cannot tell."""
    import torch

    check = getattr(torch._C, "_is_alias_of", None)
    if check is not None and isinstance(out, torch.Tensor) and in_vals:
        try:
            for name, v in in_vals:
                if isinstance(v, torch.Tensor) and check(out, v):
                    return name
            return None
        except Exception:  # pragma: no cover - tensors without storage (sparse, symbolic)
            pass
    return in_vals[0][0] if (packet in _VIEWS and in_vals) else None


def _nbytes(v: Any) -> int:
    s = _shape(v)
    return 0 if s is None else prod(s) * v.element_size()


def _flops(packet: str, typ: str, node, out_vals: list) -> tuple[float, int]:
    """FLOPs and MACs of one ATen node from fake-tensor shapes."""
    args = node.args
    out = _shape(out_vals[0]) if out_vals else None
    n_out = prod(out) if out is not None else 0

    def arg_shape(i):
        return _shape(args[i].meta.get("val")) if i < len(args) and hasattr(args[i], "meta") else None

    has_bias = False
    if typ in ("Conv", "ConvTranspose"):
        transposed = packet in ("convolution", "_convolution") and len(args) > 6 and bool(args[6])
        w, x = arg_shape(1), arg_shape(0)
        if w is None or x is None:
            return 0.0, 0
        macs = prod(x) * prod(w[1:]) if (typ == "ConvTranspose" or transposed) else n_out * prod(w[1:])
        has_bias = len(args) > 2 and args[2] is not None
        return 2.0 * macs + (n_out if has_bias else 0), int(macs)
    if packet == "linear":
        w = arg_shape(1)
        if w is None:
            return 0.0, 0
        macs = n_out * w[-1]
        has_bias = len(args) > 2 and args[2] is not None
        return 2.0 * macs + (n_out if has_bias else 0), int(macs)
    if packet in ("addmm", "baddbmm"):
        a = arg_shape(1)
        macs = n_out * a[-1] if a else 0
        return 2.0 * macs + n_out, int(macs)
    if typ == "MatMul":
        a = arg_shape(0)
        macs = n_out * a[-1] if a else 0
        return 2.0 * macs, int(macs)
    if typ == "Attention":
        q, k, v = arg_shape(0), arg_shape(1), arg_shape(2)
        if not (q and k and v):
            return 0.0, 0
        b, L, E, S, Ev = prod(q[:-2]), q[-2], q[-1], k[-2], v[-1]
        macs = b * L * S * E + b * L * S * Ev
        return 2.0 * macs + 5.0 * b * L * S, int(macs)
    if typ in ("MaxPool", "AveragePool"):
        k = args[1] if len(args) > 1 else 1
        k = [k] if isinstance(k, int) else list(k)
        return float(n_out * prod(k)), 0
    if typ in ("GlobalAveragePool", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"):
        x = arg_shape(0)
        return float(prod(x)) if x else 0.0, 0
    return ELEMENTWISE_FLOPS.get(typ, 0.0) * n_out, 0


def load_torch(module: Any, example_inputs: Sequence[Any] = (), *, kwargs: Mapping[str, Any] | None = None,
               name: str | None = None, strict: bool = False,
               workspace: Mapping[str, int] | None = None) -> OpGraph:
    """Export ``module`` with ``torch.export`` and import the result as an OpGraph.

    Parameters
    ----------
    module : torch.nn.Module or torch.export.ExportedProgram
        The model (put it in ``eval()`` mode for an inference graph), or an already exported program.
    example_inputs : sequence of tensors
        Positional example inputs; their shapes fix the graph's shapes.
    kwargs : dict, optional
        Keyword example inputs.
    name : str, optional
        Graph name (default: the module's class name).
    strict : bool
        Passed to ``torch.export.export`` (non-strict tracing by default, as PyTorch recommends).
    workspace : dict, optional
        ``{fx node name: bytes}`` of scratch memory per op (see the module notes); names that are
        not ops of the graph are an error.

    Returns
    -------
    OpGraph
        ``meta``: ``params`` (parameter elements), ``macs``, ``flops``, ``torch_version``.

    Raises
    ------
    FormatError
        When ``torch.export`` cannot trace the module (the message carries torch's reason).

    Examples
    --------
    >>> import torch
    >>> load_torch(torch.nn.Conv2d(3, 8, 3), (torch.randn(1, 3, 10, 10),)).meta["macs"]
    13824
    """
    import torch

    if isinstance(module, torch.export.ExportedProgram):
        ep = module
        label = name or "exported_program"
    else:
        label = name or type(module).__name__
        try:
            ep = torch.export.export(module, tuple(example_inputs), kwargs=dict(kwargs or {}), strict=strict)
        except Exception as e:
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise FormatError(f"torch.export could not trace {label}: {msg}", field="module") from None
    from torch.export.graph_signature import InputKind

    kind_of: dict[str, Any] = {}
    target_of: dict[str, str] = {}
    for spec in ep.graph_signature.input_specs:
        argname = getattr(spec.arg, "name", None)
        if argname is not None:
            kind_of[argname] = spec.kind
            if spec.target:
                target_of[argname] = spec.target
    # every output the program returns stays live to the end: user outputs, a loss, gradients (a
    # joint forward+backward program returns the weight gradients), mutated buffers
    program_outputs = [getattr(s.arg, "name", None) for s in ep.graph_signature.output_specs]

    g = OpGraph(label, meta={"importer": "hetsched.io.torch_import.load_torch", "torch_version": torch.__version__,
                             "source": f"torch.export of {label}"})
    weight_bytes: dict[str, int] = {}  # fx node name -> bytes, for weights and views of weights
    tensor_of: dict[str, str | None] = {}  # fx node name -> tensor name (None: not a tensor)
    params = 0
    total_macs = 0
    unknown: list[str] = []

    for node in ep.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            k = kind_of.get(node.name)
            if k in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                weight_bytes[node.name] = _nbytes(val)
                if k == InputKind.PARAMETER and _shape(val) is not None:
                    params += prod(_shape(val))
                continue
            if _shape(val) is None:
                continue  # non-tensor user input (an int, a symbolic size)
            g.add_tensor(node.name, _nbytes(val), attrs={"shape": _shape(val), "dtype": str(val.dtype).replace("torch.", ""),
                                                          "kind": "input"})
            tensor_of[node.name] = node.name
            continue
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            parent, idx = node.args[0], node.args[1]
            tensor_of[node.name] = f"{parent.name}:{idx}"
            if parent.name in weight_bytes:
                weight_bytes[node.name] = weight_bytes[parent.name]
            continue
        packet = getattr(getattr(node.target, "_overloadpacket", None), "__name__", None) or getattr(node.target, "__name__", str(node.target))
        typ = ATEN_TO_TYPE.get(packet)
        in_nodes = list(dict.fromkeys(_tensors_in((node.args, node.kwargs))))
        in_weights = [n.name for n in in_nodes if n.name in weight_bytes]
        in_acts = [n.name for n in in_nodes if n.name not in weight_bytes and tensor_of.get(n.name) in g.tensors]
        if not in_acts and in_weights and (packet in _VIEWS or typ == "Identity"):
            weight_bytes[node.name] = weight_bytes[in_weights[0]]  # a view of a weight is still a weight
            continue
        if typ is None:
            aten = f"aten.{packet}"
            if aten not in unknown:
                unknown.append(aten)
            typ = aten
        val = node.meta.get("val")
        out_vals = list(val) if isinstance(val, (list, tuple)) else [val]
        flops, macs = _flops(packet, typ, node, out_vals)
        if typ in MAC_OPS or typ == "Attention":
            total_macs += macs
        wb = sum(weight_bytes[w] for w in in_weights)
        attrs: dict[str, Any] = {"aten": str(node.target)}
        if macs:
            attrs["macs"] = int(macs)
        if typ == "Dropout":
            train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", packet == "native_dropout")
            attrs["training"] = bool(train) if isinstance(train, bool) else True
        g.add_op(node.name, typ, flops=float(flops), weight_bytes=int(wb), attrs=attrs)
        ins = [tensor_of[n] for n in in_acts]
        for t in dict.fromkeys(ins):
            g.add_consumer(t, node.name)
        multi = isinstance(val, (list, tuple))
        in_vals = [(tensor_of[n.name], n.meta.get("val")) for n in in_nodes if n.name in in_acts]
        copies = False
        for i, v in enumerate(out_vals):
            if _shape(v) is None:
                continue
            tname = f"{node.name}:{i}" if multi else node.name
            alias = _alias_of(v, in_vals, packet)
            copies = copies or (packet in _VIEWS and alias is None)
            g.add_tensor(tname, _nbytes(v), producer=node.name, alias_of=alias,
                         attrs={"shape": _shape(v), "dtype": str(v.dtype).replace("torch.", ""), "kind": "activation"})
        if copies:
            # e.g. reshape/flatten of a non-contiguous tensor: torch materialises a copy, not a view
            g.set_op(node.name, attrs={**attrs, "copies": True})
        if not multi:
            tensor_of[node.name] = node.name if _shape(val) is not None else None

    for o in program_outputs:
        t = tensor_of.get(o) if o else None
        if t is not None and t in g.tensors:
            g.set_tensor(t, is_output=True)
    for op_name, nbytes in (workspace or {}).items():
        if op_name not in g.ops:
            raise FormatError(f"workspace names {op_name!r}, which is not an op of {label}", op=op_name, field="workspace")
        if not nbytes >= 0:
            raise FormatError(f"workspace of op {op_name!r} must be >= 0 bytes, got {nbytes!r}", op=op_name,
                              field="workspace")
        if nbytes:
            g.add_tensor(f"{op_name}:workspace", int(nbytes), producer=op_name, attrs={"kind": "workspace"})
    _tag_joint_phases(g, ep, tensor_of)
    # values a getitem selected that nobody else created (e.g. unused outputs) are fine; consumers of
    # getitem results were wired through tensor_of above.
    g.meta.update(params=int(params), macs=int(total_macs), flops=g.total_flops,
                  weight_bytes=int(sum(v for k, v in weight_bytes.items() if k in kind_of)))
    if unknown:
        warnings.warn(f"{label}: no FLOP rule for ATen op(s) {', '.join(unknown)}: kept with flops=0",
                      UserWarning, stacklevel=2)
        g.meta["unknown_op_types"] = unknown
    g.validate()
    return g


def _tag_joint_phases(g: OpGraph, ep: Any, tensor_of: Mapping[str, str | None]) -> None:
    """Tag the ops of a joint forward + backward program with ``attrs["phase"]``, as
    :func:`hetsched.io.training.training_graph` tags its own: what the loss (or, without one, the
    user outputs) depends on is ``"forward"``, every other op ``"backward"``. A graph without
    gradient outputs (an inference program) is left as it is. Why: the pipeline's stage splitter
    and the memory views read the phase; untagged, a joint graph would be taken for inference and
    get a second backward pass built on top of it."""
    kinds = {getattr(sp.arg, "name", None): sp.kind.name for sp in ep.graph_signature.output_specs}
    if not any(k in ("GRADIENT_TO_PARAMETER", "GRADIENT_TO_USER_INPUT") for k in kinds.values()):
        return
    heads = [n for n, k in kinds.items() if k == "LOSS_OUTPUT"] or [n for n, k in kinds.items() if k == "USER_OUTPUT"]
    forward: set[str] = set()
    todo = [g.tensor(t).producer for n in heads if (t := tensor_of.get(n)) and t in g.tensors]
    while todo:
        o = todo.pop()
        if o is None or o in forward:
            continue
        forward.add(o)
        todo.extend(g.tensor(t).producer for t in g.inputs_of(o))
    for name, op in list(g.ops.items()):
        g.set_op(name, attrs={**op.attrs, "phase": "forward" if name in forward else "backward"})
    g.meta["training"] = True
    g.meta["n_backward_ops"] = sum(1 for o in g.ops if o not in forward)
