"""Fuzzing the ONNX importer: valid small models with corrupted attributes, shapes, wiring and bytes.

Every outcome is a ``HetschedError`` naming the op/tensor/field at fault, or a graph that passes
``validate`` with byte counts within the limits. Issue 20 found IndexError (rank-0 Gemm inputs,
rank-2 LSTM/GRU inputs), TypeError (attributes of the wrong type) and graph outputs no node
produces accepted silently.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the dev install and of CI")
from onnx import AttributeProto, TensorProto, helper, numpy_helper  # noqa: E402

from fuzzing import accepted  # noqa: E402
from hetsched.io.onnx import load_onnx  # noqa: E402
from hetsched.limits import MAX_BYTES  # noqa: E402

F = TensorProto.FLOAT


def _vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def _init(name, shape):
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


def cnn():
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "Wfc"], ["y"], name="fc", transB=0),
    ]
    g = helper.make_graph(nodes, "cnn", [_vi("x", [1, 2, 4, 4])], [_vi("y", [1, 3])], [_init("W", [4, 2, 3, 3]), _init("Wfc", [16, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def rnn():
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R"], ["h"], name="lstm", hidden_size=4, direction="forward"),
        helper.make_node("MatMul", ["x", "M"], ["y"], name="mm"),
    ]
    g = helper.make_graph(nodes, "rnn", [_vi("x", [5, 1, 3])], [_vi("h", None), _vi("y", None)],
                          [_init("W", [1, 16, 3]), _init("R", [1, 16, 4]), _init("M", [3, 2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


BASES = {"cnn": cnn().SerializeToString(), "rnn": rnn().SerializeToString()}
ATTR_VALUES = st.one_of(st.integers(-3, 8), st.floats(-2, 2, allow_nan=False), st.text(max_size=3),
                        st.lists(st.integers(-2, 5), min_size=1, max_size=4), st.lists(st.floats(0, 2), min_size=1, max_size=2))
DIMS = st.one_of(st.integers(-2, 6), st.just(2**40), st.just(0))


@st.composite
def mutated_model(draw):
    m = onnx.ModelProto()
    m.ParseFromString(BASES[draw(st.sampled_from(sorted(BASES)))])
    g = m.graph
    for _ in range(draw(st.integers(1, 3))):
        what = draw(st.sampled_from(["attr_value", "attr_type", "input_rank", "input_dim", "ghost_output",
                                     "rewire", "op_type", "drop_node"]))
        node = g.node[draw(st.integers(0, len(g.node) - 1))] if len(g.node) else None
        if what == "attr_value" and node is not None and len(node.attribute):
            a = node.attribute[draw(st.integers(0, len(node.attribute) - 1))]
            a.CopyFrom(helper.make_attribute(a.name, draw(ATTR_VALUES)))
        elif what == "attr_type" and node is not None and len(node.attribute):
            node.attribute[draw(st.integers(0, len(node.attribute) - 1))].type = draw(
                st.sampled_from([AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.STRING, AttributeProto.INTS,
                                 AttributeProto.FLOATS, AttributeProto.TENSOR]))
        elif what == "input_rank":
            dims = g.input[0].type.tensor_type.shape.dim
            if draw(st.booleans()) and len(dims):
                del dims[len(dims) - 1]
            else:
                dims.add().dim_value = draw(st.integers(1, 4))
        elif what == "input_dim":
            dims = g.input[0].type.tensor_type.shape.dim
            if len(dims):
                d = dims[draw(st.integers(0, len(dims) - 1))]
                v = draw(DIMS)
                d.Clear()
                if v >= 0:
                    d.dim_value = v
                else:
                    d.dim_param = "sym"
        elif what == "ghost_output":
            g.output.append(_vi(draw(st.sampled_from(["ghost", "x", "W", "c"])), None))
        elif what == "rewire" and node is not None and len(node.input):
            node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(["x", "W", "missing", "y", ""]))
        elif what == "op_type" and node is not None:
            node.op_type = draw(st.sampled_from(["Gemm", "MatMul", "LSTM", "GRU", "Conv", "MaxPool", "Frobnicate"]))
        elif what == "drop_node" and node is not None:
            g.node.remove(node)
    return m


def check(model_or_bytes) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown op types and shapes warn by design
        g = accepted(load_onnx, model_or_bytes)
    if g is None:
        return
    g.validate()
    assert sum(t.size_bytes for t in g.tensors.values()) + g.total_weight_bytes <= MAX_BYTES
    assert all(isinstance(t.size_bytes, int) and t.size_bytes >= 0 for t in g.tensors.values())


@settings(max_examples=120)
@given(mutated_model())
def test_mutated_models(m):
    check(m)


@settings(max_examples=60)
@given(st.sampled_from(sorted(BASES)), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
       st.booleans())
def test_damaged_bytes(base, flips, truncate):
    data = bytearray(BASES[base])
    for pos, byte in flips:
        data[pos % len(data)] = byte
    if truncate:
        data = data[: len(data) * 2 // 3]
    check(bytes(data))
