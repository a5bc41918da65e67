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
  ``module.parameters()``); a weight read by several ops (tied embeddings, ALBERT's shared layers,
  a joint program's backward ops re-reading the forward's weights) is **one** weight: its first
  reader owns it, later readers carry the bytes they read and say so (``shares_weights_with``,
  ``shared_weight_bytes``), and ``OpGraph.total_weight_bytes`` counts it once;
* FLOPs from :mod:`hetsched.io.flops` (a MAC = 2 FLOPs) using the fake shapes;
  ``scaled_dot_product_attention`` counts its two matrix products and its softmax;
* outputs that share storage with an input (per torch's fake tensors: ``view``, ``permute``,
  ``expand``, ``slice``, a ``reshape`` of a contiguous tensor...) have ``alias_of`` that input; a
  view-type op that has to copy (``reshape`` of a non-contiguous tensor) gets
  ``attrs["copies"] = True`` and is priced as the copy it is; an in-place op (``relu_``, ``add_``)
  writes its input's storage (``alias_of`` it) and gets ``attrs["inplace"] = True``: it does its
  work, it is no view;
* run-time assertions, shape queries and mode switches are dropped (:data:`DROPPED`, with the
  reason in ``meta["dropped_ops"]``); ATen ops with no rule are kept as ``aten.<name>`` with
  ``flops=0`` and one warning lists them;
* a model whose config has ``use_cache`` is exported with the cache off; outputs torch.export cannot
  return are left out; a model on the ``meta`` device is traced with fake tensors (no memory);
  ``training=True`` imports the joint forward + backward program;
* a mixture of experts' router, top-k selection and grouped expert products are tagged
  (``attrs["moe"]``), the products counting the FLOPs of the experts that run;
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

import math
import operator
import sys
import warnings
from math import prod
from typing import Any, Mapping, Sequence

from ..errors import FormatError
from ..graph import OpGraph
from .flops import ELEMENTWISE_FLOPS, MAC_OPS, ZERO_FLOP_OPS

__all__ = ["load_torch", "load_pt2", "ATEN_TO_TYPE", "DROPPED", "MAC_TYPES"]

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
    **dict.fromkeys(["expand", "expand_as", "meshgrid"], "Expand"),
    **dict.fromkeys(["slice", "select", "narrow"], "Slice"),
    **dict.fromkeys(["split", "split_with_sizes", "chunk", "unbind"], "Split"),
    **dict.fromkeys(["cat", "concat", "stack"], "Concat"),
    **dict.fromkeys(["embedding"], "Gather"), "index_select": "Gather",
    **dict.fromkeys(["dropout", "dropout_", "native_dropout"], "Dropout"),
    **dict.fromkeys(["clone", "contiguous", "to", "_to_copy", "type_as"], "Identity"),
    "pad": "Pad", "constant_pad_nd": "Pad", "repeat": "Tile",
}

#: ATen op (overload packet name) -> ONNX-style op type, for the ops the importer knows beyond
#: :data:`ATEN_TO_TYPE`'s first block: comparisons and logic, creation ops, indexing and scatter,
#: sorting and selection, losses, mixture-of-experts grouped products. Backward ops of a joint
#: program (``<op>_backward``) take their forward op's type plus ``_grad``.
ATEN_TO_TYPE = {
    **ATEN_TO_TYPE,
    **dict.fromkeys(["gelu_"], "Gelu"), **dict.fromkeys(["silu_"], "Sigmoid"),
    **dict.fromkeys(["hardswish_"], "HardSwish"), **dict.fromkeys(["hardsigmoid", "hardsigmoid_"], "HardSigmoid"),
    **dict.fromkeys(["sigmoid_", "tanh_", "exp_", "sqrt_", "neg_", "abs_", "log_"], None),  # filled below
    "mish": "Mish", "softplus": "Softplus", "elu_": "Elu", "leaky_relu_": "LeakyRelu", "clamp_": "Clip",
    "clamp_min_": "Clip", "clamp_max_": "Clip", "relu6": "Clip", "glu": "Glu", "logit": "Log",
    "cos": "Cos", "sin": "Sin", "tan": "Tan", "atan": "Atan", "exp2": "Exp", "log2": "Log", "log1p": "Log",
    "expm1": "Exp", "floor": "Floor", "ceil": "Ceil", "round": "Round", "sign": "Sign", "trunc": "Floor",
    "square": "Mul", "erfinv": "Erf", "lerp": "Add", "addcmul": "Mul", "addcdiv": "Div", "pow_": "Pow",
    **dict.fromkeys(["eq", "eq_"], "Equal"), **dict.fromkeys(["ne", "ne_"], "NotEqual"),
    **dict.fromkeys(["gt", "gt_", "greater"], "Greater"), **dict.fromkeys(["ge", "ge_"], "GreaterOrEqual"),
    **dict.fromkeys(["lt", "lt_", "less"], "Less"), **dict.fromkeys(["le", "le_"], "LessOrEqual"),
    **dict.fromkeys(["__and__", "bitwise_and", "bitwise_and_", "logical_and", "logical_and_", "__iand__"], "And"),
    **dict.fromkeys(["__or__", "bitwise_or", "bitwise_or_", "logical_or", "logical_or_", "__ior__"], "Or"),
    **dict.fromkeys(["bitwise_not", "logical_not", "logical_not_", "__invert__"], "Not"),
    **dict.fromkeys(["__xor__", "bitwise_xor", "logical_xor"], "Xor"),
    "isnan": "IsNaN", "isinf": "IsInf", "isfinite": "IsInf", "isin": "Equal",
    **dict.fromkeys(["floor_divide", "floor_divide_", "div_floor"], "Div"),
    **dict.fromkeys(["remainder", "fmod", "remainder_"], "Mod"),
    **dict.fromkeys(["where_", "masked_fill_", "masked_scatter"], "Where"),
    **dict.fromkeys(["cumsum", "cumsum_", "cumprod"], "CumSum"), "diff": "Sub",
    # reductions (the overload decides for min/max: .dim and .default reduce, .other is element-wise)
    **dict.fromkeys(["prod"], "ReduceProd"), "logsumexp": "ReduceLogSumExp", "norm": "ReduceL2",
    **dict.fromkeys(["linalg_vector_norm"], "ReduceL2"), **dict.fromkeys(["var", "std", "var_mean", "std_mean"], "ReduceVariance"),
    "any": "ReduceMax", "all": "ReduceMin", "argmax": "ArgMax", "argmin": "ArgMin", "count_nonzero": "ReduceSum",
    **dict.fromkeys(["min", "max"], "ReduceMin"),  # resolved by overload in _op_type
    "einsum": "Einsum", "bilinear": "Gemm", "outer": "MatMul", "dot": "MatMul", "vdot": "MatMul", "mv": "MatMul",
    "addmv": "Gemm", "addbmm": "MatMul", "tensordot": "MatMul",
    "_scaled_dot_product_flash_attention_for_cpu": "Attention", "_scaled_dot_product_flash_attention": "Attention",
    "_scaled_dot_product_efficient_attention": "Attention", "_scaled_dot_product_cudnn_attention": "Attention",
    "_scaled_dot_product_attention_math": "Attention",
    # mixture of experts: one product per group of rows (each token-expert pair by its expert's weights)
    **dict.fromkeys(["_grouped_mm", "grouped_mm", "grouped_mm_fallback"], "GroupedMatMul"),
    **dict.fromkeys(["topk"], "TopK"), **dict.fromkeys(["sort", "argsort", "msort"], "Sort"),
    **dict.fromkeys(["histc", "bincount"], "Histogram"),
    # creation: write their output, read nothing
    "arange": "Range", "linspace": "Range",
    **dict.fromkeys(["zeros", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
                     "new_full", "empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided",
                     "empty_permuted", "scalar_tensor", "fill", "fill_", "zero_", "tril_indices", "triu_indices",
                     "eye", "lift_fresh_copy_", "tensor"], "ConstantOfShape"),
    **dict.fromkeys(["rand", "randn", "rand_like", "randn_like", "randint", "randint_like", "bernoulli", "bernoulli_",
                     "uniform_", "normal_", "randperm", "multinomial"], "RandomUniform"),
    "lift_fresh_copy": "Identity", "copy": "Identity", "copy_": "Identity", "clone_": "Identity",
    "resize_": "Identity", "_unsafe_index": "Gather",
    # indexing, gathering, scattering, moving data
    **dict.fromkeys(["index", "take", "take_along_dim", "masked_select"], "Gather"),
    **dict.fromkeys(["gather"], "GatherElements"),
    **dict.fromkeys(["index_put", "index_put_", "_unsafe_index_put", "index_copy", "index_copy_", "index_fill",
                     "index_fill_", "slice_scatter", "select_scatter", "diagonal_scatter", "as_strided_scatter",
                     "masked_scatter_"], "ScatterND"),
    **dict.fromkeys(["scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_",
                     "index_add", "index_add_", "index_reduce"], "ScatterElements"),
    **dict.fromkeys(["roll", "flip", "rot90"], "Roll"), "one_hot": "OneHot",
    **dict.fromkeys(["tril", "triu", "tril_", "triu_"], "Trilu"),
    **dict.fromkeys(["repeat_interleave", "tile", "expand_copy"], "Tile"),
    **dict.fromkeys(["numpy_T", "matrix_H"], "Transpose"),
    **dict.fromkeys(["view_as", "reshape_as", "as_strided", "unfold", "movedim", "moveaxis", "diagonal", "view_as_real",
                     "view_as_complex", "squeeze_copy", "_reshape_alias", "view_copy", "unsqueeze_copy",
                     "permute_copy", "transpose_copy", "t_copy", "slice_copy", "select_copy", "split_copy",
                     "alias_copy", "detach_", "detach_copy", "mT", "mH", "adjoint", "ravel", "hsplit", "vsplit",
                     "tensor_split", "unsafe_split", "unsafe_chunk", "pixel_shuffle", "pixel_unshuffle",
                     "channel_shuffle", "native_channel_shuffle", "im2col", "col2im"], "Reshape"),
    **dict.fromkeys(["upsample_nearest2d", "upsample_bilinear2d", "upsample_nearest1d", "upsample_bicubic2d",
                     "_upsample_bilinear2d_aa", "upsample_nearest3d", "upsample_trilinear3d", "_upsample_nearest_exact2d",
                     "interpolate", "grid_sampler", "grid_sampler_2d", "affine_grid_generator"], "Resize"),
    **dict.fromkeys(["adaptive_max_pool2d", "adaptive_max_pool1d", "max_pool3d_with_indices"], "MaxPool"),
    **dict.fromkeys(["adaptive_avg_pool3d", "_adaptive_avg_pool3d"], "GlobalAveragePool"),
    **dict.fromkeys(["reflection_pad1d", "reflection_pad2d", "replication_pad1d", "replication_pad2d",
                     "replication_pad3d", "circular_pad"], "Pad"),
    **dict.fromkeys(["rms_norm", "_fused_rms_norm"], "RMSNormalization"), "local_response_norm": "LRN",
    "native_group_norm": "GroupNormalization", "_weight_norm": "Mul",
    # losses
    **dict.fromkeys(["cross_entropy_loss"], "SoftmaxCrossEntropyLoss"),
    **dict.fromkeys(["nll_loss", "nll_loss_forward", "nll_loss2d_forward", "nll_loss_nd", "nll_loss2d"],
                    "NegativeLogLikelihoodLoss"),
    **dict.fromkeys(["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"], "MSELoss"),
    **dict.fromkeys(["binary_cross_entropy_with_logits", "binary_cross_entropy"], "BCELoss"),
    **dict.fromkeys(["native_dropout_backward"], "Dropout_grad"),
}
for _k, _t in (("sigmoid_", "Sigmoid"), ("tanh_", "Tanh"), ("exp_", "Exp"), ("sqrt_", "Sqrt"), ("neg_", "Neg"),
               ("abs_", "Abs"), ("log_", "Log")):
    ATEN_TO_TYPE[_k] = _t

#: ATen ops that become no op at all, with the reason (recorded per graph in ``meta["dropped_ops"]``).
DROPPED: Mapping[str, str] = {
    **dict.fromkeys(["_assert_tensor_metadata", "_assert_scalar", "_assert_async", "_functional_assert_async",
                     "_functional_assert_scalar", "_assert_tensor_metadata_", "check_tensor"],
                    "a run-time assertion: checks dtype, shape or a condition, computes and allocates nothing"),
    **dict.fromkeys(["sym_constrain_range", "sym_constrain_range_for_size", "_functional_sym_constrain_range",
                     "_functional_sym_constrain_range_for_size", "_check_is_size"],
                    "a constraint on a symbolic size for the tracer: no work at run time"),
    **dict.fromkeys(["sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride", "dim", "numel"],
                    "a shape query: returns a Python integer, no tensor"),
    **dict.fromkeys(["_local_scalar_dense", "item"], "reads one number back to Python: no tensor is produced"),
    **dict.fromkeys(["_set_grad_enabled", "record_stream", "_print", "profiler._record_function_enter_new",
                     "profiler._record_function_exit"],
                    "a mode switch or profiler marker: no tensor, no work"),
}

#: Op types whose MACs are summed into ``meta["macs"]`` (the published-figure convention, plus
#: the fused attention, ``einsum`` and the experts' grouped products).
MAC_TYPES = frozenset(MAC_OPS | {"Attention", "Einsum", "GroupedMatMul", "Conv_grad", "ConvTranspose_grad",
                                 "Attention_grad", "GroupedMatMul_grad"})

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


def _schema_alias(node: Any, i: int, tensor_of: Mapping[str, str | None], in_acts: Sequence[str]) -> str | None:
    """The input tensor output ``i`` of ``node`` shares storage with by the op's ATen schema (a view's
    ``Tensor(a) self -> Tensor(a)``, an in-place op's ``Tensor(a!) self -> Tensor(a!)``): for a program
    loaded from a ``.pt2`` archive, whose fake tensors no longer share storage. A ``reshape`` that
    copies is taken for a view here (the schema cannot tell)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None or i >= len(schema.returns):
        return None
    ret = schema.returns[i].alias_info
    if ret is None:
        return None
    for j, arg in enumerate(schema.arguments):
        a = arg.alias_info
        if a is None or not (set(a.before_set) & set(ret.before_set)):
            continue
        x = node.args[j] if j < len(node.args) else node.kwargs.get(arg.name)
        name = getattr(x, "name", None)
        if name in in_acts:
            return tensor_of.get(name)
    return None


def _order_writes(g: OpGraph) -> int:
    """Order the readers of a storage after the in-place ops that write it, and those writes after
    its earlier readers, with 0-byte ``order`` tensors (``attrs["kind"] = "order"``); returns how many.

    A program's data edges miss these: ``m[:2, :2] = 1`` writes the base through a view (``slice``,
    ``fill_``), and a later ``x + m`` reads the base, not the ``fill_``; a schedule free to run the
    add first (HEFT did, in Swin's attention mask) reads the wrong values. The graph's op order is
    the program's, so every edge added here goes forward (no cycle).
    """
    def root(t: str) -> str:
        seen = set()
        while g.tensors[t].alias_of is not None and t not in seen:
            seen.add(t)
            t = g.tensors[t].alias_of
        return t

    def through(t: str, op: str) -> bool:  # t is an output of op, or a view of one
        while t is not None:
            if g.tensors[t].producer == op:
                return True
            t = g.tensors[t].alias_of
        return False

    last_write: dict[str, str] = {}
    readers: dict[str, list[str]] = {}
    edges: list[tuple[str, str]] = []
    for v in list(g.ops):
        ins, outs = g.inputs_of(v), g.outputs_of(v)
        inplace = bool(g.ops[v].attrs.get("inplace")) and bool(outs) and g.tensors[outs[0]].alias_of is not None
        if not inplace and outs and all(g.tensors[t].alias_of is not None for t in outs):
            continue  # a view reads nothing and writes nothing: its readers do
        by_root: dict[str, list[str]] = {}
        for t in ins:
            by_root.setdefault(root(t), []).append(t)
        for r, ts in by_root.items():
            w = last_write.get(r)
            if w is not None and w != v and not any(through(t, w) for t in ts):
                edges.append((w, v))  # read after write
        if inplace:
            r = root(outs[0])
            edges += [(u, v) for u in dict.fromkeys(readers.get(r, ()))  # write after read
                      if u != v and not any(through(t, u) for t in ins)]
            last_write[r], readers[r] = v, []
        for r in by_root:
            readers.setdefault(r, []).append(v)
    for u, v in dict.fromkeys(edges):
        g.add_tensor(f"{u}:order:{v}", 0, producer=u, consumers=[v], attrs={"kind": "order"})
    return len(dict.fromkeys(edges))


def _nbytes(v: Any) -> int:
    s = _shape(v)
    return 0 if s is None else prod(s) * v.element_size()


def _op_type(node, packet: str) -> tuple[str | None, str | None]:
    """``(op type, reason to drop)`` of an ATen node; ``(None, None)`` when no rule knows it."""
    if packet in DROPPED:
        return None, DROPPED[packet]
    overload = getattr(node.target, "_overloadname", "default")
    if packet in ("min", "max"):
        if overload in ("other", "binary"):
            return ("Min" if packet == "min" else "Max"), None
        return ("ReduceMin" if packet == "min" else "ReduceMax"), None
    typ = ATEN_TO_TYPE.get(packet)
    if typ is not None:
        return typ, None
    for suffix in ("_backward_data", "_backward_input", "_backward_weight", "_backward"):
        if packet.endswith(suffix):  # a joint program's backward op: its forward op's type, "_grad"
            base = packet[: -len(suffix)]
            fwd = ATEN_TO_TYPE.get(base) or ATEN_TO_TYPE.get(base.lstrip("_")) or _BACKWARD_BASE.get(base.lstrip("_"))
            if fwd is not None:
                return f"{fwd}_grad", None
    tags = getattr(node.target, "tags", ()) or ()
    try:
        import torch

        if torch.Tag.pointwise in tags:  # torch's own tag: one value per output element
            return "".join(w.capitalize() for w in packet.strip("_").split("_")) or packet, None
    except Exception:  # pragma: no cover - a target without torch tags
        pass
    return None, None


#: forward types of backward ops whose name is not an ATen forward op's
_BACKWARD_BASE: Mapping[str, str] = {
    "threshold": "Relu", "convolution": "Conv", "native_layer_norm": "LayerNormalization",
    "native_batch_norm": "BatchNormalization", "embedding_dense": "Gather", "embedding": "Gather",
    "max_pool2d_with_indices": "MaxPool", "max_pool3d_with_indices": "MaxPool", "native_group_norm": "GroupNormalization",
    "grouped_mm_fallback": "GroupedMatMul", "select": "Slice", "slice": "Slice", "index": "Gather",
    "_fused_rms_norm": "RMSNormalization", "fused_rms_norm": "RMSNormalization",
}


def _flops(packet: str, typ: str, node, out_vals: list) -> tuple[float, int]:
    """FLOPs and MACs of one ATen node from fake-tensor shapes (a MAC = 2 FLOPs)."""
    args = node.args
    out = _shape(out_vals[0]) if out_vals else None
    n_out = prod(out) if out is not None else 0

    def arg_shape(i):
        return _shape(args[i].meta.get("val")) if i < len(args) and hasattr(args[i], "meta") else None

    def n_in(i=0):
        x = arg_shape(i)
        return prod(x) if x else 0

    has_bias = False
    if typ in ("Conv", "ConvTranspose"):
        transposed = packet in ("convolution", "_convolution") and len(args) > 6 and bool(args[6])
        w, x = arg_shape(1), arg_shape(0)
        if w is None or x is None:
            return 0.0, 0
        macs = prod(x) * prod(w[1:]) if (typ == "ConvTranspose" or transposed) else n_out * prod(w[1:])
        has_bias = len(args) > 2 and args[2] is not None
        return 2.0 * macs + (n_out if has_bias else 0), int(macs)
    if typ in ("Conv_grad", "ConvTranspose_grad"):
        # convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation, transposed,
        # output_padding, groups, output_mask): each of grad_input and grad_weight repeats the forward MACs
        go, x, w = arg_shape(0), arg_shape(1), arg_shape(2)
        if not (go and x and w):
            return 0.0, 0
        transposed = len(args) > 7 and bool(args[7])
        fwd = prod(x) * prod(w[1:]) if transposed else prod(go) * prod(w[1:])
        mask = list(args[10]) if len(args) > 10 else [True, True, True]
        macs = fwd * (int(bool(mask[0])) + int(bool(mask[1])))
        return 2.0 * macs + (prod(go) if len(mask) > 2 and mask[2] else 0), int(macs)
    if packet == "linear" or packet == "bilinear":
        w = arg_shape(1)
        if w is None:
            return 0.0, 0
        macs = n_out * w[-1] * (prod(w[2:-1]) if packet == "bilinear" else 1)
        has_bias = len(args) > 2 and args[2] is not None
        return 2.0 * macs + (n_out if has_bias else 0), int(macs)
    if packet in ("addmm", "baddbmm", "addmv", "addbmm"):
        a = arg_shape(1)
        if packet == "addbmm" and a:
            macs = n_out * a[-1] * a[0]
        else:
            macs = n_out * a[-1] if a else 0
        return 2.0 * macs + n_out, int(macs)
    if typ in ("MatMul", "GroupedMatMul"):
        # grouped: every row of the (tokens x top-k) input is multiplied by its own expert's weights,
        # so the MACs are those of the experts that run, whatever the number of experts
        a = arg_shape(0)
        macs = n_out * a[-1] if a else 0
        if packet == "outer":
            macs = n_out
        return 2.0 * macs, int(macs)
    if typ == "GroupedMatMul_grad":  # grad of input and of weight: the forward's MACs twice
        x, go = arg_shape(0), arg_shape(3) if len(args) > 3 else None
        macs = 2 * prod(go) * x[-1] if (x and go) else 0
        return 2.0 * macs, int(macs)
    if typ == "Einsum":
        return _einsum_flops(node, n_out)
    if typ in ("Attention", "Attention_grad"):
        first = 1 if typ == "Attention_grad" else 0  # backward: (grad_out, q, k, v, ...)
        q, k, v = arg_shape(first), arg_shape(first + 1), arg_shape(first + 2)
        if not (q and k and v):
            return 0.0, 0
        b, L, E, S, Ev = prod(q[:-2]), q[-2], q[-1], k[-2], v[-1]
        macs = b * L * S * E + b * L * S * Ev
        if typ == "Attention_grad":  # four products: dV, dP, dQ, dK (torch's flop counter counts the same)
            macs *= 2
        return 2.0 * macs + 5.0 * b * L * S, int(macs)
    if typ in ("MaxPool", "AveragePool"):
        k = args[1] if len(args) > 1 else 1
        k = [k] if isinstance(k, int) else list(k)
        return float(n_out * prod(k)), 0
    if typ.startswith("Reduce") or typ in ("GlobalAveragePool", "ArgMax", "ArgMin", "CumSum", "Histogram"):
        return float(n_in(0)), 0
    if typ == "TopK":  # a heap of k per row: n log2 k comparisons, at least one per element
        k = args[1] if len(args) > 1 and isinstance(args[1], int) else 1
        return float(n_in(0)) * max(1.0, math.log2(max(k, 1))), 0
    if typ == "Sort":  # n log2 n comparisons per sorted row
        x = arg_shape(0)
        if not x:
            return 0.0, 0
        dim = args[1] if len(args) > 1 and isinstance(args[1], int) else -1
        row = x[dim] if x else 1
        return float(prod(x)) * max(1.0, math.log2(max(row, 1))), 0
    if typ == "ScatterElements" and ("add" in packet or "reduce" in packet):
        src = _shape(args[-1].meta.get("val")) if args and hasattr(args[-1], "meta") else None
        return float(prod(src) if src else n_out), 0
    if typ in ("SoftmaxCrossEntropyLoss", "BCELoss"):
        return 5.0 * n_in(0), 0
    if typ in ("NegativeLogLikelihoodLoss", "MSELoss"):
        return float(n_in(1) or n_in(0)), 0
    if typ.endswith("_grad"):  # element-wise backward: the forward's work per element of the gradient
        return ELEMENTWISE_FLOPS.get(typ[: -len("_grad")], 1.0) * n_out, 0
    if typ in ELEMENTWISE_FLOPS:
        return ELEMENTWISE_FLOPS[typ] * n_out, 0
    if typ in ZERO_FLOP_OPS or typ in _DATA_TYPES or "." in typ:  # "aten.x": no rule known, flops 0
        return 0.0, 0
    return float(n_out), 0  # a pointwise op named by torch's tag: one op per output element


#: op types that only move, create or select data (no arithmetic)
_DATA_TYPES = frozenset(["Range", "ConstantOfShape", "RandomUniform", "GatherElements", "ScatterND", "ScatterElements",
                         "Roll", "OneHot", "Resize", "Cast"])


def _einsum_flops(node, n_out: int) -> tuple[float, int]:
    """MACs of an ``einsum``: the product of every index's size for a contraction of two or more
    operands (what torch evaluates as batched products), one op per output element otherwise."""
    args = node.args
    eq = args[0] if args and isinstance(args[0], str) else None
    ops = args[1] if len(args) > 1 else []
    shapes = [_shape(o.meta.get("val")) if hasattr(o, "meta") else None for o in (ops or [])]
    if eq is None or not shapes or any(s is None for s in shapes):
        return float(n_out), 0
    lhs = eq.replace(" ", "").split("->")[0].split(",")
    size: dict[str, int] = {}
    for term, sh in zip(lhs, shapes):
        letters = [c for c in term if c.isalpha()]
        if "..." in term:  # a broadcast prefix: its dims count once, under a private name per position
            k = len(sh) - len(letters)
            for i in range(k):
                size[f"...{i}"] = max(size.get(f"...{i}", 1), sh[i])
            sh = sh[k:]
        for c, d in zip(letters, sh):
            size[c] = max(size.get(c, 1), d)
    if len(shapes) < 2:
        return float(prod(shapes[0])), 0
    macs = prod(size.values()) * (len(shapes) - 1)
    return 2.0 * macs, int(macs)


def _tensors_out(module):
    """A module that returns only the tensors of ``module``'s output (its pytree leaves): caches and
    other objects torch.export cannot return are left out (their tensors stay inside the graph)."""
    import torch
    from torch.utils import _pytree

    class TensorsOut(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *args, **kwargs):
            return tuple(x for x in _pytree.tree_leaves(self.m(*args, **kwargs)) if isinstance(x, torch.Tensor))

    return TensorsOut(module)


def default_loss(out):
    """What a joint training export differentiates when no loss is given: the model's own loss
    where its output carries one (a transformers model given ``labels``), else the mean square of
    its first tensor output (a regression to zero: it reads every output element once)."""
    import torch
    from torch.utils import _pytree

    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, dict):
        loss = out.get("loss")
    if isinstance(loss, torch.Tensor):
        return loss
    first = next((x for x in _pytree.tree_leaves(out) if isinstance(x, torch.Tensor) and x.is_floating_point()), None)
    if first is None:
        raise FormatError("the model returns no floating-point tensor to take a loss of", field="loss")
    return first.float().pow(2).mean()


_SKIPPED_FAKE_KERNELS: list[str] = []


def import_torchvision():
    """Import torchvision even where its C ops cannot load (PyPI's wheel beside torch's CPU wheel).

    Registrations of fake kernels for ops that do not exist are skipped (listed in one warning);
    the models are pure torch and unaffected. Returns the module; ``None`` if torchvision is not
    installed.

    >>> tv = import_torchvision()
    >>> tv is None or hasattr(tv, "models")
    True
    """
    if "torchvision" in sys.modules and hasattr(sys.modules["torchvision"], "models"):
        return sys.modules["torchvision"]
    import importlib.util

    if importlib.util.find_spec("torchvision") is None:
        return None
    import torch.library

    orig = torch.library.register_fake

    def tolerant(op, func=None, /, **kw):
        def register(fn):
            try:
                return orig(op, fn, **kw)
            except RuntimeError as e:  # only "operator X does not exist": the op's library did not load
                if "does not exist" not in str(e):
                    raise
                _SKIPPED_FAKE_KERNELS.append(str(op))
                return fn

        return register if func is None else register(func)

    torch.library.register_fake = tolerant
    try:
        import torchvision
    finally:
        torch.library.register_fake = orig
    if _SKIPPED_FAKE_KERNELS:
        warnings.warn(f"torchvision's C ops did not load (a wheel built for another torch); skipped fake kernels "
                      f"for {', '.join(sorted(set(_SKIPPED_FAKE_KERNELS)))} (detection ops, unused by the models)",
                      UserWarning, stacklevel=2)
    return torchvision


def with_loss(module, loss):
    """``module`` wrapped so that its forward returns ``loss`` of its output (:func:`default_loss`
    when ``loss`` is None): what a joint forward + backward export differentiates."""
    import torch

    class WithLoss(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, *args, **kwargs):
            return (loss or default_loss)(self.m(*args, **kwargs))

    return WithLoss(module)


class _Fakified:
    """Swap a module's meta-device parameters and buffers (and meta inputs) for fake CPU tensors
    while it is traced, and put them back afterwards. Why: torch.export traces meta tensors, but
    some meta kernels drop autograd (``nll_loss`` on meta returns no gradient, so a joint training
    export of a meta model fails), and fake tensors trace every op as the CPU would, with no memory.
    Tied parameters stay tied (one fake tensor per original)."""

    def __init__(self, module, args, kwargs):
        self.module, self.args, self.kwargs = module, args, kwargs
        self.swapped: list[tuple[Any, str, str, Any]] = []

    def needed(self) -> bool:
        import torch
        from torch.utils import _pytree

        ts = [*self.module.parameters(), *self.module.buffers(), *(
            x for x in _pytree.tree_leaves((self.args, self.kwargs)) if isinstance(x, torch.Tensor))]
        return any(t.device.type == "meta" for t in ts)

    def __enter__(self):
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.utils import _pytree

        mode = FakeTensorMode(allow_non_fake_inputs=True)
        memo: dict[int, Any] = {}  # id(meta tensor) -> its fake twin: tied tensors stay one tensor

        def fake(t, param: bool = False):
            if id(t) not in memo:
                with mode:
                    f = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="cpu")
                memo[id(t)] = torch.nn.Parameter(f, requires_grad=t.requires_grad) if param else f
            return memo[id(t)]

        for mod in self.module.modules():
            for kind in ("_parameters", "_buffers"):
                d = getattr(mod, kind)
                for k, t in list(d.items()):
                    if t is not None and t.device.type == "meta":
                        self.swapped.append((mod, kind, k, t))
                        d[k] = fake(t, kind == "_parameters")
        conv = lambda x: fake(x) if isinstance(x, torch.Tensor) and x.device.type == "meta" else x  # noqa: E731
        return _pytree.tree_map(conv, self.args), _pytree.tree_map(conv, self.kwargs)

    def __exit__(self, *exc):
        for mod, kind, k, t in reversed(self.swapped):
            getattr(mod, kind)[k] = t
        return False


def _export(module, args: tuple, kwargs: dict, strict: bool, training: bool, loss, label: str):
    """torch.export of ``module`` (and its joint forward + backward program with ``training``):
    caches off, non-tensor outputs dropped, meta tensors traced as fake ones."""
    import contextlib

    import torch

    cfg = getattr(module, "config", None)
    cache_was = getattr(cfg, "use_cache", None)
    notes: dict[str, Any] = {}
    fakes = _Fakified(module, args, kwargs)
    with contextlib.ExitStack() as stack:
        if cache_was:  # a key/value cache is an output torch.export cannot return, and no work of the step
            cfg.use_cache = False
            stack.callback(setattr, cfg, "use_cache", cache_was)
            notes["use_cache"] = "turned off for the export (the model's config said use_cache=True)"
        if fakes.needed():
            args, kwargs = stack.enter_context(fakes)
            notes["fake"] = "meta tensors traced as fake CPU tensors (no memory)"
        target = with_loss(module, loss) if training else module
        try:
            ep = _try_export(torch, target, args, kwargs, strict)
        except _NonTensorOutput:
            target = _tensors_out(target)
            ep = _try_export(torch, target, args, kwargs, strict)
            notes["outputs"] = "non-tensor outputs (caches, Python objects) left out"
        except Exception as e:
            raise FormatError(f"torch.export could not trace {label}: {_first_line(e)}", field="module") from None
        if training:
            from torch.export.experimental import _export_forward_backward

            unused = drop_unused_inputs(ep)
            if unused:
                notes["unused_weights"] = unused
            try:
                ep = _export_forward_backward(ep)
            except Exception as e:
                raise FormatError(f"the joint forward + backward program of {label} could not be built: "
                                  f"{_first_line(e)}", field="module") from None
    return ep, notes


def drop_unused_inputs(ep: Any) -> dict[str, list]:
    """Remove the program's parameter and buffer inputs that no node reads, before the joint export
    (whose autograd requires a gradient for every parameter input): a tied parameter lifted twice
    (every use goes to one of its names) and parameters the forward never touches (a BERT pooler
    under an LM head). Returns ``{target: [kind, elements, bytes]}`` of those that are no other
    input's tensor (truly unused), so the graph's parameter count stays the module's."""
    specs = ep.graph_signature.input_specs
    unused = {n.name for n in ep.graph.nodes if n.op == "placeholder" and not n.users}
    drop = [sp for sp in specs if getattr(sp.arg, "name", None) in unused and sp.kind.name in ("PARAMETER", "BUFFER")]
    if not drop:
        return {}
    kept_objs = {id(ep.state_dict.get(sp.target)) for sp in specs if sp not in drop and sp.target in ep.state_dict}
    out: dict[str, list] = {}
    for sp in drop:
        t = ep.state_dict.get(sp.target)
        if t is not None and id(t) not in kept_objs:
            out[sp.target] = [sp.kind.name.lower(), int(t.numel()), int(t.numel() * t.element_size())]
    names = {sp.arg.name for sp in drop}
    for n in list(ep.graph.nodes):
        if n.op == "placeholder" and n.name in names:
            ep.graph.erase_node(n)
    specs[:] = [sp for sp in specs if sp not in drop]
    ep.graph_module.recompile()
    return out


class _NonTensorOutput(Exception):
    pass


def _first_line(e: BaseException, limit: int = 300) -> str:
    line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return line if len(line) <= limit else line[: limit - 3] + "..."  # torch's can run to pages (a data-dependent shape)


def _try_export(torch, target, args, kwargs, strict):
    try:
        return torch.export.export(target, tuple(args), kwargs=dict(kwargs or {}), strict=strict)
    except Exception as e:
        if "which is not a known type" in str(e) or "register a pytree" in str(e):
            raise _NonTensorOutput() from None
        raise


def load_torch(module: Any, example_inputs: Sequence[Any] = (), *, kwargs: Mapping[str, Any] | None = None,
               name: str | None = None, strict: bool = False, training: bool = False, loss: Any = None,
               workspace: Mapping[str, int] | None = None) -> OpGraph:
    """Export ``module`` with ``torch.export`` and import the result as an OpGraph.

    Parameters
    ----------
    module : torch.nn.Module or torch.export.ExportedProgram
        The model (put it in ``eval()`` mode for an inference graph), or an already exported
        program (a joint forward + backward one too). A module on the ``meta`` device (or with meta
        inputs) is traced with fake tensors: no memory, any size.
    example_inputs : sequence of tensors
        Positional example inputs; their shapes fix the graph's shapes.
    kwargs : dict, optional
        Keyword example inputs (``input_ids=...``, ``labels=...``).
    name : str, optional
        Graph name (default: the module's class name).
    strict : bool
        Passed to ``torch.export.export`` (non-strict tracing by default, as PyTorch recommends).
    training : bool
        Import the joint forward + backward program (``torch.export.experimental._export_forward_backward``)
        of ``loss(module(*inputs))``: every gradient op, weight gradients as graph outputs.
    loss : callable, optional
        ``loss(output) -> scalar tensor`` for ``training``; default: the output's ``loss`` (a
        transformers model given ``labels``), else the mean square of the first float output.
    workspace : dict, optional
        ``{fx node name: bytes}`` of scratch memory per op (see the module notes); names that are
        not ops of the graph are an error.

    Returns
    -------
    OpGraph
        ``meta``: ``params`` (parameter elements, a tied parameter once), ``param_bytes``,
        ``buffer_bytes``, ``constant_bytes``, ``weight_bytes`` (their sum, = ``total_weight_bytes``),
        ``macs``, ``flops``, ``torch_version``, ``dropped_ops`` (what was left out and why),
        ``moe`` for a mixture of experts, ``unknown_op_types`` when some op had no rule.

    Raises
    ------
    FormatError
        When ``torch.export`` cannot trace the module (the message carries torch's reason).

    Examples
    --------
    >>> import torch
    >>> load_torch(torch.nn.Conv2d(3, 8, 3), (torch.randn(1, 3, 10, 10),)).meta["macs"]
    13824
    >>> g = load_torch(torch.nn.Linear(4, 2), (torch.randn(3, 4),), training=True)
    >>> g.meta["training"], g.graph_outputs()       # the loss, then the bias and weight gradients
    (True, ['mean', 'view', 'permute_3'])
    """
    from ..optional import require

    torch = require("torch", "importing a PyTorch model")
    notes: dict[str, Any] = {}
    if isinstance(module, torch.export.ExportedProgram):
        if training:
            raise FormatError("training=True needs a module, not an exported program (export its joint program "
                              "with torch.export.experimental._export_forward_backward)", field="training")
        ep = module
        label = name or "exported_program"
    else:
        label = name or type(module).__name__
        ep, notes = _export(module, tuple(example_inputs), dict(kwargs or {}), strict, training, loss, label)
    return _import_program(ep, label, notes, workspace)


def _import_program(ep: Any, label: str, notes: Mapping[str, Any], workspace: Mapping[str, int] | None, *,
                    storage: bool = True) -> OpGraph:
    """The OpGraph of ``ep``. ``storage``: its fake tensors share storage as the program's tensors
    do (a program exported in this process); a program loaded from a ``.pt2`` archive has lost that,
    and its aliases come from the ATen schemas (:func:`_schema_alias`)."""
    import torch
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
                             "source": f"torch.export of {label}", **({"export_notes": dict(notes)} if notes else {})})
    # weights: one entry per distinct tensor (tied parameters are one tensor under two names)
    weight_of: dict[str, tuple[str, ...]] = {}  # fx node name -> the weights it is (a view of)
    wbytes: dict[str, int] = {}  # weight key -> bytes
    wkind: dict[str, str] = {}
    key_by_obj: dict[Any, str] = {}
    owner: dict[str, str] = {}  # weight key -> the op that carries its bytes (its first reader)
    tensor_of: dict[str, str | None] = {}  # fx node name -> tensor name (None: not a tensor)
    params = 0
    total_macs = 0
    unknown: list[str] = []
    dropped: dict[str, dict[str, Any]] = {}
    shapes_w: dict[str, list[int]] = {}
    kinds = {InputKind.PARAMETER: "parameter", InputKind.BUFFER: "buffer", InputKind.CONSTANT_TENSOR: "constant"}

    def state(argname):
        t = target_of.get(argname)
        if t is None:
            return None
        return ep.state_dict.get(t) if t in ep.state_dict else ep.constants.get(t)

    for node in ep.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            k = kind_of.get(node.name)
            if k in kinds:
                obj = state(node.name)
                ident = _identity(obj)
                key = key_by_obj.get(ident) if obj is not None else None
                if key is None:
                    key = target_of.get(node.name, node.name)
                    if obj is not None:
                        key_by_obj[ident] = key
                    wbytes[key] = _nbytes(val)
                    wkind[key] = kinds[k]
                    shapes_w[key] = _shape(val) or []
                    if k == InputKind.PARAMETER and _shape(val) is not None:
                        params += prod(_shape(val))
                weight_of[node.name] = (key,)
                continue
            if _shape(val) is None:
                continue  # non-tensor user input (an int, a symbolic size)
            g.add_tensor(node.name, _nbytes(val), attrs={"shape": _shape(val), "dtype": _dtype(val), "kind": "input"})
            tensor_of[node.name] = node.name
            continue
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            parent, idx = node.args[0], node.args[1]
            tensor_of[node.name] = f"{parent.name}:{idx}"
            if parent.name in weight_of:
                weight_of[node.name] = weight_of[parent.name]
            continue
        packet = _packet(node.target)
        typ, reason = _op_type(node, packet)
        val = node.meta.get("val")
        out_vals = list(val) if isinstance(val, (list, tuple)) else [val]
        if reason is not None or (typ is None and not any(isinstance(v, torch.Tensor) for v in out_vals)):
            d = dropped.setdefault(packet, {"count": 0, "reason": reason or "returns no tensor: no data for any op"})
            d["count"] += 1
            continue
        in_nodes = list(dict.fromkeys(_tensors_in((node.args, node.kwargs))))
        in_weights = [n.name for n in in_nodes if n.name in weight_of]
        in_acts = [n.name for n in in_nodes if n.name not in weight_of and tensor_of.get(n.name) in g.tensors]
        if not in_acts and in_weights and (packet in _VIEWS or typ in ("Identity", "Reshape", "Transpose", "Slice",
                                                                          "Squeeze", "Unsqueeze", "Expand", "Split")):
            # a view (or a copy) of a weight is still that weight
            weight_of[node.name] = tuple(dict.fromkeys(w for n in in_weights for w in weight_of[n]))
            continue
        if typ is None:
            ns = getattr(node.target, "namespace", None) or "aten"
            typ = f"{ns}.{packet}"
            if typ not in unknown:
                unknown.append(typ)
        elif typ == "Identity" and packet in ("to", "_to_copy", "type_as") and out_vals and in_acts:
            iv = next((n.meta.get("val") for n in in_nodes if n.name in in_acts), None)
            if isinstance(iv, torch.Tensor) and isinstance(out_vals[0], torch.Tensor) and iv.dtype != out_vals[0].dtype:
                typ = "Cast"
        flops, macs = _flops(packet, typ, node, out_vals)
        if typ in MAC_TYPES:
            total_macs += macs
        keys = list(dict.fromkeys(w for n in in_weights for w in weight_of[n]))
        own = [w for w in keys if w not in owner]
        shared = [w for w in keys if w in owner]
        attrs: dict[str, Any] = {"aten": str(node.target)}
        if packet.endswith("_") and not packet.startswith("_") and packet[:-1] not in _VIEWS and typ != "Dropout":
            # relu_, add_, hardswish_: the output is the input's storage, but the op reads and writes it
            attrs["inplace"] = True
        if macs:
            attrs["macs"] = int(macs)
        if keys:
            attrs["weights"] = keys
        if shared:
            # one weight read by several ops (tied embeddings, a layer's weights shared by all layers,
            # a backward op re-reading its forward op's weights): its first reader owns it
            attrs["shares_weights_with"] = owner[shared[0]]
            attrs["shared_weight_bytes"] = int(sum(wbytes[w] for w in shared))
        if typ in ("Conv", "ConvTranspose", "Conv_grad", "ConvTranspose_grad"):
            # a grouped (depthwise) convolution runs far below a dense one of the same work: the cost
            # models price it by a curve of its own (hetsched.cost.curve_type)
            gi = {"convolution": 8, "_convolution": 8, "convolution_backward": 9}.get(packet, 6)
            groups = node.args[gi] if len(node.args) > gi else node.kwargs.get("groups", 1)
            if isinstance(groups, int) and groups > 1:
                attrs["groups"] = groups
                # and its kernel: torch's CPU backward of a depthwise 3x3 has a path of its own, a
                # 5x5 or 7x7 one runs 2-6x below it at the same work (hetsched.cost.curve_type)
                wi = 2 if typ.endswith("_grad") else 1
                wv = node.args[wi].meta.get("val") if len(node.args) > wi and hasattr(node.args[wi], "meta") else None
                if isinstance(wv, torch.Tensor) and wv.dim() >= 3:
                    attrs["kernel"] = [int(k) for k in wv.shape[2:]]
        if typ == "Dropout":
            train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", packet == "native_dropout")
            attrs["training"] = bool(train) if isinstance(train, bool) else True
        if typ in ("GroupedMatMul", "GroupedMatMul_grad") and keys:
            attrs["n_experts"] = int(shapes_w[keys[0]][0]) if shapes_w.get(keys[0]) else None
        if typ == "TopK":
            attrs["k"] = int(node.args[1]) if len(node.args) > 1 and isinstance(node.args[1], int) else None
        if typ == "Gather" and len(keys) == 1 and len(shapes_w.get(keys[0]) or []) == 3:
            ws, os_ = shapes_w[keys[0]], _shape(out_vals[0]) if out_vals else None
            if os_ and len(os_) == 3 and list(os_[1:]) == list(ws[1:]):
                attrs["gathers_experts"] = int(ws[0])  # whole matrices of an expert-stacked weight (batched MoE)
        for w in own:
            owner[w] = node.name
        # an op carries every weight byte it reads (the cost models price reading them); the bytes
        # another op already reads are also in shared_weight_bytes, so memory counts them once
        g.add_op(node.name, typ, flops=float(flops), weight_bytes=int(sum(wbytes[w] for w in keys)), attrs=attrs)
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
            alias = _alias_of(v, in_vals, packet) if storage else _schema_alias(node, i, tensor_of, in_acts)
            copies = copies or (packet in _VIEWS and alias is None)
            g.add_tensor(tname, _nbytes(v), producer=node.name, alias_of=alias,
                         attrs={"shape": _shape(v), "dtype": _dtype(v), "kind": "activation"})
        if copies:
            # e.g. reshape/flatten of a non-contiguous tensor: torch materialises a copy, not a view
            g.set_op(node.name, attrs={**attrs, "copies": True})
        if not multi:
            tensor_of[node.name] = node.name if _shape(val) is not None else None

    n_order = _order_writes(g)
    if n_order:
        g.meta["write_order_edges"] = n_order
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
    _tag_moe(g)
    for target, (kind, numel, nbytes) in dict(notes.get("unused_weights") or {}).items():
        if kind == "parameter":  # in the module, read by no op (left out of a joint program's inputs)
            params += numel
    unread = {w: b for w, b in wbytes.items() if w not in owner}
    unread.update({t: v[2] for t, v in dict(notes.get("unused_weights") or {}).items()})
    by_kind = {k: sum(b for w, b in wbytes.items() if wkind[w] == k) for k in ("parameter", "buffer", "constant")}
    by_kind["parameter"] += sum(v[2] for v in dict(notes.get("unused_weights") or {}).values() if v[0] == "parameter")
    g.meta.update(params=int(params), macs=int(total_macs), flops=g.total_flops,
                  param_bytes=int(by_kind["parameter"]), buffer_bytes=int(by_kind["buffer"]),
                  constant_bytes=int(by_kind["constant"]),
                  weight_bytes=int(sum(wbytes[w] for w in owner)), shared_weights=_tied(g))
    if unread:  # weights of the module no op reads: no op carries them, so not in total_weight_bytes
        g.meta["unread_weight_bytes"] = int(sum(unread.values()))
    if dropped:
        g.meta["dropped_ops"] = dropped
    if unknown:
        warnings.warn(f"{label}: no FLOP rule for ATen op(s) {', '.join(unknown)}: kept with flops=0",
                      UserWarning, stacklevel=3)
        g.meta["unknown_op_types"] = unknown
    g.validate()
    return g


def _tied(g: OpGraph) -> dict[str, list[str]]:
    """``{weight: [ops reading it]}`` for weights read by more than one forward op (tied weights)."""
    readers: dict[str, list[str]] = {}
    for name, op in g.ops.items():
        if op.attrs.get("phase", "forward") != "forward":
            continue
        for w in op.attrs.get("weights") or ():
            readers.setdefault(w, []).append(name)
    return {w: ops for w, ops in readers.items() if len(ops) > 1}


def _expert_products(g: OpGraph) -> dict[str, int | None]:
    """The experts' products and how many experts each spans: grouped products (``GroupedMatMul``),
    and batched products reading whole expert matrices gathered from an expert-stacked weight (the
    ``batched_mm`` formulation: ``weight[expert_ids] @ x``) within a few views of the gather."""
    out: dict[str, int | None] = {o: op.attrs.get("n_experts") for o, op in g.ops.items()
                                  if op.op_type == "GroupedMatMul"}
    for o, op in g.ops.items():
        if not op.attrs.get("gathers_experts"):
            continue
        todo = [o]
        for _ in range(4):
            nxt = []
            for x in todo:
                for t in g.outputs_of(x):
                    for c in g.tensor(t).consumers:
                        typ = g.op(c).op_type
                        if typ in ("MatMul", "Gemm"):
                            out[c] = op.attrs["gathers_experts"]
                        elif typ in ("Transpose", "Reshape", "Expand", "Slice", "Identity", "Cast", "Unsqueeze"):
                            nxt.append(c)
            todo = nxt
    return out


def _tag_moe(g: OpGraph) -> None:
    """Mark a mixture of experts: each ``TopK`` whose indices reach the experts' products (see
    :func:`_expert_products`) is the top-k selection (``attrs["moe"] = "select"``), the product
    feeding it through a softmax is the router (``"router"``), the products are the experts
    (``"experts"``, with ``n_experts`` and the ``k`` of their selection), gathers of expert-stacked
    weights ``"expert_weights"``; ``meta["moe"]`` counts layers, experts and k."""
    gset = _expert_products(g)
    if not gset:
        return
    layers = 0
    k_of_layer = None
    n_exp = None
    for name, op in list(g.ops.items()):
        if op.op_type != "TopK":
            continue
        reach, todo, seen = None, [name], {name}
        for _ in range(64):  # a bounded walk: the selection feeds its experts within a few ops
            if not todo:
                break
            nxt = []
            for o in todo:
                for t in g.outputs_of(o):
                    for c in g.tensor(t).consumers:
                        if c in gset:
                            reach = reach or c
                        elif c not in seen:
                            seen.add(c)
                            nxt.append(c)
            if reach:
                break
            todo = nxt
        if reach is None:
            continue
        layers += 1
        k_of_layer = op.attrs.get("k")
        n_exp = gset[reach]
        g.set_op(name, attrs={**op.attrs, "moe": "select", "n_experts": n_exp})
        # the router: the matrix product a few ops upstream of the selection (softmax in between)
        todo = [name]
        for _ in range(4):
            ups = [g.tensor(t).producer for o in todo for t in g.inputs_of(o) if g.tensor(t).producer]
            hit = [u for u in ups if g.op(u).op_type in ("Gemm", "MatMul")]
            if hit:
                g.set_op(hit[0], attrs={**g.op(hit[0]).attrs, "moe": "router", "n_experts": n_exp})
                break
            todo = ups
    if not layers:
        return
    for o, n in gset.items():
        g.set_op(o, attrs={**g.op(o).attrs, "moe": "experts", "n_experts": n or n_exp, "k": k_of_layer})
    for o, op in list(g.ops.items()):
        if op.attrs.get("gathers_experts"):
            g.set_op(o, attrs={**op.attrs, "moe": "expert_weights"})
    g.meta["moe"] = {"layers": layers, "experts": n_exp, "top_k": k_of_layer, "expert_ops": len(gset)}


#: libraries whose output classes a saved program may name (its output's pytree): their modules are
#: imported before loading, so the classes are registered; no other module named in a file is imported
_OUTPUT_TYPE_LIBRARIES = ("transformers", "timm", "torchvision")


def _register_output_types(path: Any) -> None:
    """Import the modules of the output classes a ``.pt2`` program names (a transformers model's
    ``CausalLMOutputWithPast``...): torch.export.load cannot rebuild an output pytree whose node
    type is not registered, and these libraries register their classes when imported."""
    import importlib
    import re
    import zipfile

    with zipfile.ZipFile(path) as z:
        names = [n for n in z.namelist() if n.endswith("models/model.json")]
        text = z.read(names[0]).decode("utf-8", "replace") if names else ""
    pattern = r"\b((?:%s)(?:\.\w+)+)\.\w+" % "|".join(_OUTPUT_TYPE_LIBRARIES)
    modules = sorted(set(re.findall(pattern, text)))
    if modules:
        import_torchvision()  # before transformers and timm, which import it
    for mod in modules:
        try:
            importlib.import_module(mod)
        except Exception:  # not installed, or not a module: the load says what is missing
            pass


def _identity(t: Any) -> Any:
    """What makes two state tensors one weight: the same object, or (a program loaded from a .pt2
    file, where tied parameters come back as two tensors) the same storage, offset, shape and dtype."""
    try:
        if t.device.type not in ("meta",) and not type(t).__name__.startswith("Fake"):
            return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
    except Exception:  # no storage (a subclass, a symbolic tensor)
        pass
    return id(t)


def _packet(target: Any) -> str:
    return getattr(getattr(target, "_overloadpacket", None), "__name__", None) or getattr(target, "__name__", str(target))


def _dtype(v: Any) -> str:
    return str(v.dtype).replace("torch.", "")


def load_pt2(path: Any, *, name: str | None = None) -> OpGraph:
    """Import a ``.pt2`` file written by ``torch.export.save`` (an inference or a joint training program).

    A file that is not such an archive (truncated, another format, damaged) is a ``FormatError``
    (``field="<pt2>"``); a missing file ``field="path"``.

    >>> import torch, tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "lin.pt2")
    >>> torch.export.save(torch.export.export(torch.nn.Linear(4, 2), (torch.randn(3, 4),)), p)
    >>> load_pt2(p).op("linear").op_type
    'Gemm'
    """
    import os
    from pathlib import Path

    p = Path(path)
    if not p.exists():
        raise FormatError(f"graph file {str(path)!r} not found", field="path")
    if p.is_dir():
        raise FormatError(f"graph file {str(path)!r} is a directory, not a file", field="path")
    try:
        import torch
    except ImportError:
        from ..optional import install_hint

        raise FormatError(f"{p.name}: reading .pt2 files needs torch, which is not installed: {install_hint('torch')}",
                          field="<pt2>") from None
    try:
        import zipfile

        if not zipfile.is_zipfile(p):
            raise ValueError("not a zip archive (torch.export.save writes one)")
        _register_output_types(p)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = torch.export.load(os.fspath(p))
    except Exception as e:  # any damage: torch raises many types (RuntimeError, KeyError, zipfile errors, json...)
        raise FormatError(f"{p.name}: not a readable torch.export archive: {_first_line(e)[:300]}",
                          field="<pt2>") from None
    if not isinstance(ep, torch.export.ExportedProgram):  # pragma: no cover - torch.export.load returns one
        raise FormatError(f"{p.name}: holds no exported program", field="<pt2>")
    try:
        return _import_program(ep, name or p.stem, {}, None, storage=False)
    except FormatError:
        raise
    except Exception as e:  # a program whose graph is inconsistent (a hand-edited archive)
        raise FormatError(f"{p.name}: the exported program cannot be imported: {_first_line(e)[:300]}",
                          field="<pt2>") from None


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
