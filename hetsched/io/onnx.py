"""ONNX import: an ``onnx.ModelProto`` (or a ``.onnx`` file) as an :class:`~hetsched.graph.OpGraph`.

``load_onnx`` binds the model's symbolic input dims (``dims={"batch": 8}``), runs ONNX shape
inference (with data propagation, so ``Reshape`` targets computed from ``Shape`` resolve), and
builds one op per node and one tensor per value:

* tensor ``size_bytes`` = element size of its dtype x product of its inferred shape
  (``attrs["shape"]``, ``attrs["dtype"]``);
* initializers (and ``Constant`` node values) are **weights**, not tensors: an op's
  ``weight_bytes`` is the sum of the initializer bytes it reads (H2H keeps weights on the op);
* FLOPs per op follow :mod:`hetsched.io.flops` (a multiply-accumulate is 2 FLOPs): Conv,
  ConvTranspose, Gemm, MatMul, element-wise ops, pooling, BatchNormalization,
  LayerNormalization, Softmax, reductions, LSTM, GRU, and the ops attention decomposes into
  (MatMul, Transpose, Reshape, Div/Mul, Add, Softmax, Where, Sqrt, Pow, ReduceMean, Erf);
* outputs of ``Reshape``/``Flatten``/``Squeeze``/``Unsqueeze``/``Identity`` are views
  (``alias_of`` their data input), as runtimes execute them;
* op types this module does not know are kept with ``flops=0`` and reported in **one** warning;
* shape arithmetic (``Shape -> Gather -> Div -> Cast -> Concat -> Reshape``, as exporters emit) is
  constant-folded once the dims are bound, so every tensor gets a static shape; the folded
  nodes become small int64 initializers and do not appear as ops (what onnx-simplifier does).

``graph.meta`` records the source, opset, bound dims, ``params`` (elements of float initializers)
and ``macs`` (of the Conv/ConvTranspose/Gemm/MatMul ops, and LSTM/GRU gate products).

Control-flow ops (``If``, ``Loop``, ``Scan``) are kept as single ops with no FLOP rule (so they are
listed in the warning); their bodies are not expanded.

Examples
--------
>>> from onnx import helper, TensorProto
>>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
>>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])
>>> w = helper.make_tensor("w", TensorProto.FLOAT, [4, 2], [0.0] * 8)
>>> node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
>>> model = helper.make_model(helper.make_graph([node], "g", [x], [y], [w]))
>>> g = load_onnx(model, dims={"batch": 3})
>>> g.op("mm").flops, g.op("mm").weight_bytes, g.tensor("y").size_bytes
(48.0, 32, 24)
"""

from __future__ import annotations

import os
import warnings
from math import prod
from pathlib import Path
from typing import Any, Mapping

from ..errors import FormatError, HetschedError
from ..graph import OpGraph
from ..limits import MAX_BYTES
from .flops import ELEMENTWISE_FLOPS, MAC_OPS, ZERO_FLOP_OPS, gru_flops, lstm_flops

__all__ = ["load_onnx", "onnx_op_flops", "KNOWN_OPS"]

_VIEW_OPS = frozenset(["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"])
_POOL_OPS = frozenset(["MaxPool", "AveragePool", "LpPool"])
_GLOBAL_OPS = frozenset(["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
_REDUCE_OPS = frozenset(["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2",
                         "ReduceL1", "ReduceSumSquare", "ReduceLogSumExp", "ArgMax", "ArgMin"])
#: Op types with a FLOP rule here (everything else gets flops=0 and is listed in the warning).
KNOWN_OPS: frozenset[str] = frozenset(
    set(ELEMENTWISE_FLOPS) | set(ZERO_FLOP_OPS) | MAC_OPS | _POOL_OPS | _GLOBAL_OPS | _REDUCE_OPS
    | {"LSTM", "GRU", "Cast", "Constant"}
)


def _dtype_bytes(elem_type: int) -> int:
    from onnx import TensorProto, helper

    if elem_type in (TensorProto.BFLOAT16, TensorProto.FLOAT16):
        return 2
    if elem_type == TensorProto.STRING or elem_type == TensorProto.UNDEFINED:
        return 0
    try:
        return int(helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except Exception:  # float8 and int4 variants: one byte is the closest whole size
        return 1


def _dtype_name(elem_type: int) -> str:
    from onnx import TensorProto

    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"onnx_dtype_{elem_type}"


def _read_model(path_or_model: Any):
    try:
        import onnx
    except ImportError:
        raise FormatError("reading ONNX needs the onnx package: pip install 'hetsched[onnx]'", field="<onnx>") from None

    if isinstance(path_or_model, onnx.ModelProto):
        return path_or_model, "model"
    if isinstance(path_or_model, (bytes, bytearray)):
        try:
            return onnx.load_from_string(bytes(path_or_model)), "model"
        except Exception as e:  # DecodeError and friends
            raise FormatError(f"bytes are not an ONNX model: {e}", field="<onnx>") from None
    if not isinstance(path_or_model, (str, os.PathLike)):
        raise FormatError(f"load_onnx reads a path, bytes or an onnx.ModelProto, not {type(path_or_model).__name__}",
                          field="path")
    p = Path(path_or_model)
    if not p.exists():
        raise FormatError(f"ONNX file {str(p)!r} not found", field="path")
    if p.is_file() and p.stat().st_size == 0:  # protobuf reads no bytes as an empty model
        raise FormatError(f"{p.name}: empty file, not an ONNX model", field="<onnx>")
    try:
        return onnx.load(str(p)), p.name
    except Exception as e:
        raise FormatError(f"{p.name}: not a readable ONNX model: {e}", field="<onnx>") from None


def _check_names(model, source: str) -> None:
    """Every name and op type is text (a damaged file can hold bytes that are not UTF-8 there)."""
    g = model.graph
    texts = [g.name, *(v.name for v in (*g.input, *g.output, *g.value_info, *g.initializer))]
    for n in g.node:
        texts += [n.name, n.op_type, n.domain, *n.input, *n.output, *(a.name for a in n.attribute)]
    bad = next((t for t in texts if not isinstance(t, str)), None)
    if bad is not None:
        raise FormatError(f"{source}: name {bad!r} is not UTF-8 text (a damaged file?)", field="<onnx>")


def _check_initializers(model, source: str) -> None:
    """Weights with a negative dim or no element type (a damaged file) are named, not summed as bytes."""
    from onnx import TensorProto

    known = set(TensorProto.DataType.values()) - {TensorProto.UNDEFINED}
    for init in model.graph.initializer:
        if any(d < 0 for d in init.dims):
            raise FormatError(f"{source}: initializer {init.name!r} has negative dims {list(init.dims)}",
                              tensor=init.name or "<unnamed>", field="dims")
        if init.data_type not in known:
            raise FormatError(f"{source}: initializer {init.name!r} has no valid element type ({init.data_type})",
                              tensor=init.name or "<unnamed>", field="data_type")


def _to_array(t, source: str, **culprit: str):
    """``numpy_helper.to_array`` whose failure (data that does not fill the dims...) names the tensor."""
    from onnx import numpy_helper

    try:
        return numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001 - ValueError, TypeError, DecodeError... of a damaged tensor
        raise FormatError(f"{source}: tensor {t.name!r} holds unreadable data: {e}", tensor=t.name or "<unnamed>",
                          field="data", **culprit) from None


def _bind_dims(model, dims: Mapping[str, int], source: str):
    """A data-free skeleton of ``model`` with every symbolic input dim replaced by its value.

    Large initializers (weights) become typed graph inputs: shape inference needs their dims, not
    their bytes, and copying or serialising hundreds of MB of weights would dominate the import.
    Returns ``(skeleton, big)`` with ``big = {name: (dims, elem_type)}`` of the initializers left out.
    """
    import onnx
    from onnx import helper

    m = onnx.ModelProto()
    m.ir_version = model.ir_version
    m.opset_import.extend(model.opset_import)
    m.functions.extend(model.functions)
    m.graph.name = model.graph.name
    m.graph.node.extend(model.graph.node)
    m.graph.input.extend(model.graph.input)
    m.graph.output.extend(model.graph.output)
    m.graph.value_info.extend(model.graph.value_info)
    declared_inputs = {vi.name for vi in model.graph.input}
    big: dict[str, tuple[list[int], int]] = {}
    for init in model.graph.initializer:
        if prod(init.dims) <= _FOLD_MAX_ELEMENTS:
            m.graph.initializer.append(init)
            continue
        big[init.name] = ([int(d) for d in init.dims], init.data_type)
        if init.name not in declared_inputs:
            m.graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, big[init.name][0]))
    init_names = {i.name for i in m.graph.initializer} | set(big)
    used: set[str] = set()
    for vi in m.graph.input:
        if vi.name in init_names or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            raise FormatError(f"{source}: graph input {vi.name!r} has no shape; ONNX import needs input shapes",
                              tensor=vi.name, field="shape")
        for ax, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value > 0:
                continue
            if d.HasField("dim_value"):  # a concrete 0 or -1: not a symbol that dims= could bind
                raise FormatError(f"{source}: graph input {vi.name!r} has dim {d.dim_value} at axis {ax}; a dim must be "
                                  "positive (export the model with a fixed or a named dim)",
                                  tensor=vi.name, field=f"axis{ax}", axis=ax)
            sym = d.dim_param if d.HasField("dim_param") else ""
            if sym and sym in dims:
                used.add(sym)
                d.Clear()
                d.dim_value = int(dims[sym])
                continue
            label = repr(sym) if sym else f"axis {ax} (unnamed)"
            raise FormatError(
                f"{source}: graph input {vi.name!r} has symbolic dim {label} at axis {ax}; "
                f"bind it with load_onnx(..., dims={{{sym or 'name'!r}: value}})",
                tensor=vi.name, field=sym or f"axis{ax}", dim=sym, axis=ax,
            )
    # intermediate shapes recorded by the exporter may carry its own symbols (``Reshape_dim_0``...)
    # that no binding reaches and that inference would keep: drop them and infer afresh
    del m.graph.value_info[:]
    # outputs declared with the same symbols: bind them too so inference agrees
    for vi in list(m.graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            for d in vi.type.tensor_type.shape.dim:
                sym = d.dim_param if d.HasField("dim_param") else ""
                if sym in dims:
                    d.Clear()
                    d.dim_value = int(dims[sym])
    unknown = sorted(set(dims) - used)
    if unknown:
        raise FormatError(f"{source}: dims {unknown} name no symbolic dim of a graph input", field=unknown[0])
    return m, big


#: Ops evaluated at import time when all their inputs are known constants (shape arithmetic).
_FOLDABLE = frozenset(["Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Div", "Mul", "Add", "Sub",
                       "Slice", "Equal", "Where", "Expand", "ConstantOfShape", "Reshape", "Identity", "Range", "Floor",
                       "Ceil", "Sqrt", "Neg", "Min", "Max", "ReduceProd", "Not", "Less", "Greater", "Mod"])
_FOLD_MAX_ELEMENTS = 4096  # never materialise a weight-sized tensor while folding


def _infer(model, source: str):
    from onnx import shape_inference

    try:
        return shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception as e:
        raise FormatError(f"{source}: ONNX shape inference failed: {e}", field="<onnx>") from None


def _fold_shape_subgraphs(model, source: str):
    """Shape inference, plus constant folding of the shape computations it cannot see through.

    Exporters compute ``Reshape`` targets at run time (``Shape -> Gather -> Div -> Cast ->
    Concat``); ONNX data propagation stops at ops like ``Div``/``Cast``, leaving the reshaped
    tensors without shapes. Once the input dims are bound these are constants: each pass evaluates
    (with ``onnx.reference``) every :data:`_FOLDABLE` node whose inputs are all known and which
    descends from a ``Shape``/``Size`` node (so weights are never copied or re-counted), turns
    its outputs into initializers and drops the node, as onnx-simplifier does, then re-infers.
    Folded nodes do not appear as ops.
    """
    import numpy as np
    import onnx
    from onnx import numpy_helper

    m = model
    declared = {o.name for o in model.graph.output}
    derived: set[str] = set()  # values computed from Shape/Size: the only ones folded
    for _ in range(16):
        inferred = _infer(m, source)
        shapes: dict[str, list[int]] = {}
        for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
            tt = vi.type.tensor_type
            if vi.type.HasField("tensor_type") and tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                shapes[vi.name] = [int(d.dim_value) for d in tt.shape.dim]
        consts: dict[str, Any] = {}
        for init in m.graph.initializer:
            if prod(init.dims) <= _FOLD_MAX_ELEMENTS:
                consts[init.name] = _to_array(init, source)
        folded: dict[str, Any] = {}
        drop: set[int] = set()
        for i, node in enumerate(m.graph.node):
            if node.op_type == "Constant" and node.output:
                val = _attr(node, "value", None, "tensor")
                if val is not None and prod(val.dims) <= _FOLD_MAX_ELEMENTS:
                    consts[node.output[0]] = _to_array(val, source, op=node.name or node.op_type)
                continue
            if (node.op_type not in _FOLDABLE or node.domain not in ("", "ai.onnx")
                    or any(o in declared for o in node.output)):
                continue
            ins = [x for x in node.input if x]
            try:
                if node.op_type in ("Shape", "Size"):
                    if not ins or ins[0] not in shapes:
                        continue
                    shp = shapes[ins[0]]
                    if node.op_type == "Size":
                        outs = [np.array(prod(shp), dtype=np.int64)]
                    else:
                        start, end = _attr(node, "start", 0), _attr(node, "end", None)
                        outs = [np.array(shp[start:end], dtype=np.int64)]
                else:
                    if not ins or any(x not in consts for x in ins) or not any(x in derived for x in ins):
                        continue
                    outs = _eval_node(node, {x: consts[x] for x in ins}, m.opset_import)
            except Exception:
                continue  # leave it to shape inference
            if any(np.asarray(o).size > _FOLD_MAX_ELEMENTS for o in outs):
                continue
            for name, val in zip([o for o in node.output if o], outs):
                folded[name] = np.asarray(val)
                consts[name] = folded[name]
                derived.add(name)
            drop.add(i)
        if not drop:
            return inferred
        nm = onnx.ModelProto()
        nm.CopyFrom(m)
        del nm.graph.node[:]
        nm.graph.node.extend(n for i, n in enumerate(m.graph.node) if i not in drop)
        for name, val in folded.items():
            nm.graph.initializer.append(numpy_helper.from_array(val, name))
        del nm.graph.value_info[:]
        m = nm
    return _infer(m, source)


def _eval_node(node, feeds: dict[str, Any], opsets) -> list:
    """Evaluate one node on numpy inputs with the ONNX reference implementation."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
           for k, v in feeds.items()]
    outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    g = helper.make_graph([node], "fold", ins, outs)
    m = helper.make_model(g, opset_imports=list(opsets))
    return list(ReferenceEvaluator(m).run(None, feeds))


#: AttributeProto type numbers of the kinds of attribute read here
_ATTR_KINDS = {"int": 2, "string": 3, "tensor": 4, "floats": 6, "ints": 7}


def _attr(node, name: str, default: Any = None, kind: str | None = None) -> Any:
    """The value of attribute ``name`` (``default`` when absent).

    With ``kind`` the attribute must have that type: a corrupted model (``hidden_size`` stored as a
    string, ``kernel_shape`` as a float) is a ``FormatError`` naming the node and the attribute,
    not a TypeError deep in a FLOP formula.
    """
    from onnx import helper

    for a in node.attribute:
        if a.name == name:
            if kind is not None and a.type != _ATTR_KINDS[kind]:
                raise _node_error(node, f"attribute {name!r} must be of type {kind}, got type number {a.type}", field=name)
            try:
                return helper.get_attribute_value(a)
            except Exception as e:  # noqa: BLE001 - an undefined attribute type
                raise _node_error(node, f"attribute {name!r} is unreadable: {e}", field=name) from None
    return default


def _node_error(node, message: str, **culprit: Any) -> FormatError:
    op = node.name or node.op_type
    return FormatError(f"node {op!r} ({node.op_type}): {message}", op=op, **culprit)


def _rank(node, shapes: list, i: int, rank: int | None = None, *, at_least: int = 0) -> None:
    """Input ``i`` of ``node``, when its shape is known, must have rank ``rank`` (or at least ``at_least``)."""
    shp = shapes[i] if i < len(shapes) else None
    if shp is None or (len(shp) == rank if rank is not None else len(shp) >= at_least):
        return
    want = str(rank) if rank is not None else f"at least {at_least}"
    name = node.input[i] if i < len(node.input) else f"input {i}"
    raise _node_error(node, f"input {name!r} has rank {len(shp)} (shape {shp}); {node.op_type} needs rank {want}",
                      tensor=name, field="shape")


def onnx_op_flops(node, in_shapes: list, out_shapes: list) -> tuple[float, int] | None:
    """``(flops, macs)`` of one ONNX node from its input/output shapes; ``None`` for unknown types.

    A shape that is unknown (``None``) gives 0 FLOPs for the terms that need it.

    >>> from onnx import helper
    >>> n = helper.make_node("Conv", ["x", "w", "b"], ["y"])
    >>> onnx_op_flops(n, [[1, 3, 8, 8], [16, 3, 3, 3], [16]], [[1, 16, 6, 6]])
    (31680.0, 15552)
    """
    t = node.op_type
    out = out_shapes[0] if out_shapes else None
    n_out = prod(out) if out is not None else 0

    def shp(i):
        return in_shapes[i] if i < len(in_shapes) else None

    if t == "Conv":
        w = shp(1)
        if w is None or out is None:
            return 0.0, 0
        macs = n_out * prod(w[1:])
        return 2.0 * macs + (n_out if len(in_shapes) > 2 and shp(2) is not None else 0), int(macs)
    if t == "ConvTranspose":
        x, w = shp(0), shp(1)
        if w is None or x is None:
            return 0.0, 0
        macs = prod(x) * prod(w[1:])
        return 2.0 * macs + (n_out if len(in_shapes) > 2 and shp(2) is not None else 0), int(macs)
    if t == "Gemm":
        _rank(node, in_shapes, 0, 2)
        _rank(node, in_shapes, 1, 2)
        a = shp(0)
        if a is None or out is None:
            return 0.0, 0
        k = a[0] if _attr(node, "transA", 0, "int") else a[-1]
        macs = n_out * k
        return 2.0 * macs + (n_out if len(in_shapes) > 2 and shp(2) is not None else 0), int(macs)
    if t == "MatMul":
        _rank(node, in_shapes, 0, at_least=1)
        _rank(node, in_shapes, 1, at_least=1)
        a = shp(0)
        if a is None or out is None:
            return 0.0, 0
        macs = n_out * a[-1]
        return 2.0 * macs, int(macs)
    if t in ("LSTM", "GRU"):
        _rank(node, in_shapes, 0, 3)
        x = shp(0)
        hidden = _attr(node, "hidden_size", None, "int")
        if x is None or hidden is None:
            return 0.0, 0
        d = 2 if _attr(node, "direction", b"forward", "string") in (b"bidirectional", "bidirectional") else 1
        s, b = (x[1], x[0]) if _attr(node, "layout", 0, "int") == 1 else (x[0], x[1])
        f = (lstm_flops if t == "LSTM" else gru_flops)(s, b, x[2], hidden, d)
        g = 4 if t == "LSTM" else 3
        return f, int(d * s * b * g * hidden * (x[2] + hidden))
    if t in _POOL_OPS:
        k = _attr(node, "kernel_shape", [], "ints")
        return float(n_out * prod(k)), 0
    if t in _GLOBAL_OPS or t in _REDUCE_OPS:
        x = shp(0)
        return float(prod(x)) if x is not None else 0.0, 0
    if t in ELEMENTWISE_FLOPS:
        return ELEMENTWISE_FLOPS[t] * n_out, 0
    if t in KNOWN_OPS:
        return 0.0, 0
    return None


def load_onnx(path_or_model: Any, *, dims: Mapping[str, int] | None = None, name: str | None = None) -> OpGraph:
    """Import an ONNX model as an OpGraph (see the module docstring for what each field holds).

    Parameters
    ----------
    path_or_model : str, Path, bytes or onnx.ModelProto
        The model.
    dims : dict, optional
        Values of the symbolic dims of the graph inputs (``{"batch": 8, "seq": 128}``). An unbound
        symbolic dim raises :class:`~hetsched.errors.FormatError` naming the input and the dim; a
        name that is not a symbolic dim of any input is an error too.
    name : str, optional
        Graph name (default: the ONNX graph's name).

    Returns
    -------
    OpGraph

    Raises
    ------
    FormatError
        Unreadable model, missing input shape, unbound or unknown dim, failed shape inference.

    Warns
    -----
    UserWarning
        Once, listing the op types with no FLOP rule (kept with ``flops=0``), and once listing
        tensors whose shape inference could not determine (kept with ``size_bytes=0``).

    Examples
    --------
    >>> from onnx import helper, TensorProto
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    >>> m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]))
    >>> load_onnx(m)
    Traceback (most recent call last):
    ...
    hetsched.errors.FormatError: model: graph input 'x' has symbolic dim 'n' at axis 0; bind it with load_onnx(..., dims={'n': value})
    >>> load_onnx(m, dims={"n": 2}).tensor("y").size_bytes
    64
    """
    model, source = _read_model(path_or_model)  # first: it names the missing onnx package
    if not model.HasField("graph"):  # what protobuf makes of bytes that happen to parse (or of none)
        raise FormatError(f"{source}: not an ONNX model (it has no graph)", field="<onnx>")
    if dims is not None and not isinstance(dims, Mapping):
        raise FormatError(f"{source}: dims map each symbolic dim's name to its value (a dict such as "
                          f"{{'batch': 8}}), not a {type(dims).__name__}: {dims!r}"[:300], field="dims")
    dims = dict(dims or {})
    for k, v in dims.items():
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise FormatError(f"{source}: dim {k!r} must be a positive integer, got {v!r}", field=k)
        if v > MAX_BYTES:  # protobuf's int64 and any real tensor end long before
            raise FormatError(f"{source}: dim {k!r} is {v}, above hetsched's limit of 2**53", field=k)
    try:
        return _import(model, source, dims, name)
    except UnicodeDecodeError:  # protobuf decodes a string field only when it is read
        raise FormatError(f"{source}: a name or string in the model is not UTF-8 text (a damaged file?)",
                          field="<onnx>") from None


def _import(model, source: str, dims: dict[str, int], name: str | None) -> OpGraph:
    import onnx

    _check_names(model, source)
    _check_initializers(model, source)
    skeleton, big = _bind_dims(model, dims, source)
    inferred = _fold_shape_subgraphs(skeleton, source)
    graph = inferred.graph

    # ---- shapes and dtypes of every value
    info: dict[str, tuple[int, list[int] | None]] = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        if not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        shape: list[int] | None = None
        if tt.HasField("shape"):
            shape = []
            for d in tt.shape.dim:
                if d.HasField("dim_value"):
                    shape.append(int(d.dim_value))
                else:
                    shape = None
                    break
        prev = info.get(vi.name)
        if prev is None or (prev[1] is None and shape is not None):
            info[vi.name] = (tt.elem_type, shape)

    # ---- weights: initializers and Constant nodes
    weights: dict[str, tuple[int, list[int], int]] = {}  # name -> (bytes, shape, elem_type)
    for init in graph.initializer:
        shape = [int(d) for d in init.dims]
        weights[init.name] = (prod(shape) * _dtype_bytes(init.data_type), shape, init.data_type)
    for wname, (shape, et) in big.items():
        weights[wname] = (prod(shape) * _dtype_bytes(et), shape, et)
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            val = _attr(node, "value", None, "tensor")
            if val is not None:
                shape = [int(d) for d in val.dims]
                weights[node.output[0]] = (prod(shape) * _dtype_bytes(val.data_type), shape, val.data_type)
            else:  # value_float(s) / value_int(s): a scalar or a short list
                floats = _attr(node, "value_floats", None, "floats")
                v = floats or _attr(node, "value_ints", None, "ints")
                nbytes = 4 * len(v) if floats else 8 * len(v) if v else 8
                shape = [len(v)] if v else []
                weights[node.output[0]] = (nbytes, shape, onnx.TensorProto.INT64)

    g = OpGraph(name or graph.name or source, meta={
        "source": source if source != "model" else "onnx.ModelProto",
        "importer": "hetsched.io.onnx.load_onnx",
        "opset": {o.domain or "ai.onnx": int(o.version) for o in model.opset_import},
        "producer": model.producer_name or None,
        "dims": dims,
    })
    unknown_types: list[str] = []
    unknown_shapes: list[str] = []
    used_names: set[str] = set()
    op_of_output: dict[str, str] = {}
    pending: list[tuple[str, Any]] = []
    float_types = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16}
    # parameters: elements of the model's float initializers (not Constant nodes, not folded shapes)
    params = sum(prod(i.dims) for i in model.graph.initializer if i.data_type in float_types)
    total_macs = 0

    for i, node in enumerate(graph.node):
        if node.op_type == "Constant":
            continue
        base = node.name or f"{node.op_type}_{i}"
        nm, k = base, 1
        while nm in used_names:
            nm, k = f"{base}_{k}", k + 1
        used_names.add(nm)
        ins = [x for x in node.input if x]
        in_shapes = [weights[x][1] if x in weights else info.get(x, (0, None))[1] for x in ins]
        out_shapes = [info.get(x, (0, None))[1] for x in node.output if x]
        try:
            fm = onnx_op_flops(node, in_shapes, out_shapes)
        except FormatError as e:
            raise FormatError(f"{source}: {e}", op=nm, tensor=e.tensor, field=e.field) from None
        if fm is None:
            if node.op_type not in unknown_types:
                unknown_types.append(node.op_type)
            fm = (0.0, 0)
        flops, macs = fm
        if node.op_type in MAC_OPS or node.op_type in ("LSTM", "GRU"):
            total_macs += macs
        attrs: dict[str, Any] = {}
        if macs:
            attrs["macs"] = macs
        if node.domain:
            attrs["domain"] = node.domain
        if node.op_type in ("Conv", "ConvTranspose"):
            # a grouped (depthwise) convolution and its kernel, as the torch importer records them: a
            # calibrated cost prices it by a curve of its own (hetsched.cost.curve_type)
            group = _attr(node, "group", 1, "int")
            if group > 1:
                attrs["groups"] = int(group)
                w = in_shapes[1] if len(in_shapes) > 1 else None
                kernel = _attr(node, "kernel_shape", [], "ints") or (list(w[2:]) if w is not None else [])
                if kernel and all(isinstance(k, int) and k > 0 for k in kernel):
                    attrs["kernel"] = [int(k) for k in kernel]
        wb = sum(weights[x][0] for x in dict.fromkeys(ins) if x in weights)
        g.add_op(nm, node.op_type, flops=float(flops), weight_bytes=int(wb), attrs=attrs)
        pending.append((nm, node))
        for o in node.output:
            if o:
                op_of_output[o] = nm

    graph_inputs = [vi.name for vi in graph.input if vi.name not in weights]
    graph_outputs = [vi.name for vi in graph.output]

    def size_of(tname: str) -> tuple[int, dict[str, Any]]:
        et, shape = info.get(tname, (0, None))
        if shape is None:
            unknown_shapes.append(tname)
            return 0, {"shape": None, "dtype": _dtype_name(et) if et else None}
        return prod(shape) * _dtype_bytes(et), {"shape": shape, "dtype": _dtype_name(et)}

    readers: dict[str, list[str]] = {}
    for nm, node in pending:
        for x in dict.fromkeys(x for x in node.input if x):
            if x not in weights:
                readers.setdefault(x, []).append(nm)
    for x in graph_inputs:
        size, a = size_of(x)
        g.add_tensor(x, size, consumers=readers.get(x, []), is_output=x in graph_outputs, attrs={**a, "kind": "input"})
    for nm, node in pending:
        data_in = node.input[0] if node.input else ""
        for o in node.output:
            if not o:
                continue
            if o in g.tensors:
                raise FormatError(f"{source}: value {o!r} is produced twice", tensor=o)
            size, a = size_of(o)
            alias = data_in if (node.op_type in _VIEW_OPS and data_in and data_in not in weights) else None
            g.add_tensor(o, size, producer=nm, consumers=readers.get(o, []), is_output=o in graph_outputs,
                         alias_of=alias, attrs={**a, "kind": "activation"})
    missing = [x for x in readers if x not in g.tensors]
    if missing:
        raise FormatError(f"{source}: values {missing[:5]} are read but never produced", tensor=missing[0])
    missing = [x for x in graph_outputs if x not in g.tensors and x not in weights]
    if missing:
        raise FormatError(f"{source}: graph output(s) {missing[:5]} are produced by no node and are no input",
                          tensor=missing[0], field="output")

    g.meta.update(params=int(params), macs=int(total_macs), flops=g.total_flops)
    if unknown_types:
        warnings.warn(f"{source}: no FLOP rule for op type(s) {', '.join(unknown_types)}: kept with flops=0",
                      UserWarning, stacklevel=2)
        g.meta["unknown_op_types"] = unknown_types
    if unknown_shapes:
        warnings.warn(f"{source}: shape inference left {len(unknown_shapes)} tensor(s) without a shape "
                      f"({', '.join(unknown_shapes[:5])}{'...' if len(unknown_shapes) > 5 else ''}): size_bytes=0",
                      UserWarning, stacklevel=2)
    try:
        g.validate()
    except HetschedError as e:  # a negative or overflowing size, a cycle...: name what the graph names
        raise FormatError(f"{source}: imported graph is invalid: {e}", field=e.field or "<onnx>", op=e.op,
                          tensor=e.tensor) from None
    return g
