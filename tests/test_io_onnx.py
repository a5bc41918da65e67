"""ONNX import: small models built with onnx.helper, every number checked by hand."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the onnx extra is part of the dev install and of CI")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hetsched.errors import FormatError  # noqa: E402
from hetsched.io import load_graph  # noqa: E402
from hetsched.io.flops import gru_flops, lstm_flops  # noqa: E402
from hetsched.io.onnx import load_onnx  # noqa: E402

F = TensorProto.FLOAT


def init(name, shape, dtype=np.float32):
    return numpy_helper.from_array(np.zeros(shape, dtype=dtype), name)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "test", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


@pytest.fixture
def cnn():
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "Wfc", "Bfc"], ["logits"], name="fc"),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax"),
    ]
    inits = [init("W", [4, 3, 3, 3]), init("B", [4]), init("s", [4]), init("b", [4]), init("m", [4]), init("v", [4]),
             init("Wfc", [4, 10]), init("Bfc", [10])]
    return model(nodes, [vi("x", ["N", 3, 8, 8])], [vi("y", ["N", 10])], inits)


def test_cnn_every_number(cnn):
    g = load_onnx(cnn, dims={"N": 2})
    assert list(g.ops) == ["conv", "bn", "relu", "pool", "gap", "flatten", "fc", "softmax"]
    # tensor sizes: dtype (4 bytes) x shape
    sizes = {"x": 2 * 3 * 8 * 8, "c": 2 * 4 * 8 * 8, "bn": 512, "r": 512, "p": 2 * 4 * 4 * 4, "gap": 8, "flat": 8,
             "logits": 20, "y": 20}
    for t, n in sizes.items():
        assert g.tensor(t).size_bytes == 4 * n, t
    assert g.tensor("c").attrs["shape"] == [2, 4, 8, 8] and g.tensor("c").attrs["dtype"] == "float"
    # weights from initializers: never tensors
    assert "W" not in g.tensors and "Wfc" not in g.tensors
    assert g.op("conv").weight_bytes == (4 * 3 * 3 * 3 + 4) * 4
    assert g.op("bn").weight_bytes == 4 * 4 * 4
    assert g.op("fc").weight_bytes == (40 + 10) * 4
    assert g.op("relu").weight_bytes == 0
    # flops per op type (MAC = 2)
    assert g.op("conv").flops == 2 * 512 * 27 + 512 and g.op("conv").attrs["macs"] == 512 * 27
    assert g.op("bn").flops == 2 * 512
    assert g.op("relu").flops == 512
    assert g.op("pool").flops == 128 * 4
    assert g.op("gap").flops == 128
    assert g.op("flatten").flops == 0
    assert g.op("fc").flops == 2 * 2 * 4 * 10 + 20
    assert g.op("softmax").flops == 5 * 20
    # structure
    assert g.graph_inputs() == ["x"] and g.graph_outputs() == ["y"]
    assert g.tensor("flat").alias_of == "gap"  # Flatten is a view
    assert g.topological_order() == list(g.ops)
    assert g.meta["params"] == 108 + 4 + 16 + 50
    assert g.meta["macs"] == 512 * 27 + 80
    assert g.meta["dims"] == {"N": 2}


def test_batch_dim_scales(cnn):
    g1, g8 = load_onnx(cnn, dims={"N": 1}), load_onnx(cnn, dims={"N": 8})
    for t in g1.tensors:
        assert g8.tensor(t).size_bytes == 8 * g1.tensor(t).size_bytes
    assert g8.total_flops == pytest.approx(8 * g1.total_flops)


def test_unbound_dim_names_input_and_dim(cnn):
    with pytest.raises(FormatError) as e:
        load_onnx(cnn)
    assert e.value.tensor == "x" and e.value.field == "N"
    assert "'x'" in str(e.value) and "'N'" in str(e.value) and "dims=" in str(e.value)


def test_bad_dims(cnn):
    with pytest.raises(FormatError) as e:
        load_onnx(cnn, dims={"N": 2, "seq": 4})
    assert e.value.field == "seq"
    with pytest.raises(FormatError) as e:
        load_onnx(cnn, dims={"N": 0})
    assert e.value.field == "N"
    # dims as strings: a named error, not dict()'s ValueError (issue 29)
    for bad in ("N=2", ["N", 2]):
        with pytest.raises(FormatError) as e:
            load_onnx(cnn, dims=bad)
        assert e.value.field == "dims" and "{'batch': 8}" in str(e.value)
    with pytest.raises(FormatError) as e:
        load_onnx(cnn, dims={"N": "2"})
    assert e.value.field == "N" and "'2'" in str(e.value)
    no_shape = model([helper.make_node("Relu", ["x"], ["y"])], [helper.make_tensor_value_info("x", F, None)],
                     [vi("y", None)])
    with pytest.raises(FormatError) as e:
        load_onnx(no_shape)
    assert e.value.tensor == "x"


def test_unnamed_dynamic_dim():
    x = vi("x", [None, 4])
    m = model([helper.make_node("Relu", ["x"], ["y"])], [x], [vi("y", None)])
    with pytest.raises(FormatError) as e:
        load_onnx(m)
    assert e.value.tensor == "x" and "axis 0" in str(e.value)


def test_attention_decomposition():
    B, S, D, H = 2, 5, 8, 2
    dh = D // H
    nodes = [
        helper.make_node("MatMul", ["x", "Wq"], ["q"], name="q"),
        helper.make_node("MatMul", ["x", "Wk"], ["k"], name="k"),
        helper.make_node("MatMul", ["x", "Wv"], ["v"], name="v"),
        helper.make_node("Reshape", ["q", "shp"], ["q4"], name="q_split"),
        helper.make_node("Transpose", ["q4"], ["qh"], name="q_t", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["k", "shp"], ["k4"], name="k_split"),
        helper.make_node("Transpose", ["k4"], ["kh"], name="k_t", perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["v", "shp"], ["v4"], name="v_split"),
        helper.make_node("Transpose", ["v4"], ["vh"], name="v_t", perm=[0, 2, 1, 3]),
        helper.make_node("MatMul", ["qh", "kh"], ["sc"], name="scores"),
        helper.make_node("Div", ["sc", "scale"], ["scd"], name="scale"),
        helper.make_node("Where", ["mask", "scd", "neg"], ["scm"], name="mask"),
        helper.make_node("Softmax", ["scm"], ["pr"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["pr", "vh"], ["ctx"], name="context"),
        helper.make_node("Transpose", ["ctx"], ["ctxt"], name="merge_t", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctxt", "shp3"], ["ctx3"], name="merge"),
        helper.make_node("Add", ["ctx3", "x"], ["res"], name="residual"),
        helper.make_node("LayerNormalization", ["res", "g", "beta"], ["ln"], name="ln", axis=-1),
        helper.make_node("Mul", ["ln", "half"], ["h1"], name="gelu_mul"),
        helper.make_node("Erf", ["ln"], ["h2"], name="gelu_erf"),
        helper.make_node("ReduceMean", ["h2"], ["rm"], name="rmean", axes=[-1]),
        helper.make_node("Sqrt", ["h1"], ["y"], name="sqrt"),
    ]
    inits = [init("Wq", [D, D]), init("Wk", [D, D]), init("Wv", [D, D]),
             numpy_helper.from_array(np.array([0, 0, H, dh], dtype=np.int64), "shp"),
             numpy_helper.from_array(np.array([0, 0, D], dtype=np.int64), "shp3"),
             init("scale", []), init("neg", []), init("g", [D]), init("beta", [D]), init("half", [])]
    m = model(nodes, [vi("x", ["batch", "seq", D]), vi("mask", [1, 1, "seq", "seq"], TensorProto.BOOL)],
              [vi("y", ["batch", "seq", D]), vi("rm", None)], inits)
    g = load_onnx(m, dims={"batch": B, "seq": S})
    assert g.op("q").flops == 2 * B * S * D * D and g.op("q").weight_bytes == D * D * 4
    assert g.tensor("qh").attrs["shape"] == [B, H, S, dh]
    assert g.tensor("kh").attrs["shape"] == [B, H, dh, S]
    assert g.op("scores").flops == 2 * B * H * S * S * dh and g.op("scores").weight_bytes == 0
    assert g.op("scale").flops == B * H * S * S and g.op("scale").weight_bytes == 4
    assert g.op("mask").flops == B * H * S * S
    assert g.op("softmax").flops == 5 * B * H * S * S
    assert g.op("context").flops == 2 * B * H * S * S * dh
    assert g.op("merge").flops == 0 and g.tensor("ctx3").attrs["shape"] == [B, S, D]
    assert g.op("q_split").weight_bytes == 4 * 8  # the int64 shape initializer
    assert g.op("ln").flops == 5 * B * S * D and g.op("ln").weight_bytes == 2 * D * 4
    assert g.op("gelu_erf").flops == B * S * D and g.op("sqrt").flops == B * S * D
    assert g.op("rmean").flops == B * S * D and g.tensor("rm").attrs["shape"] == [B, S, 1]
    assert g.tensor("mask").size_bytes == S * S  # bool: 1 byte
    assert g.tensor("q4").alias_of == "q" and g.tensor("qh").alias_of is None  # Reshape views, Transpose copies
    assert sorted(g.tensor("x").consumers) == ["k", "q", "residual", "v"]  # one tensor, four readers
    assert g.meta["macs"] == 3 * B * S * D * D + 2 * B * H * S * S * dh


def test_lstm_gru():
    S, B, I, Hd = 5, 2, 3, 4
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "Bb"], ["Y", "Yh"], name="lstm", hidden_size=Hd),
        helper.make_node("GRU", ["x", "Wg", "Rg", "Bg"], ["Yg"], name="gru", hidden_size=Hd, direction="bidirectional"),
    ]
    inits = [init("W", [1, 4 * Hd, I]), init("R", [1, 4 * Hd, Hd]), init("Bb", [1, 8 * Hd]),
             init("Wg", [2, 3 * Hd, I]), init("Rg", [2, 3 * Hd, Hd]), init("Bg", [2, 6 * Hd])]
    m = model(nodes, [vi("x", [S, B, I])], [vi("Y", None), vi("Yh", None), vi("Yg", None)], inits)
    g = load_onnx(m)
    assert g.op("lstm").flops == lstm_flops(S, B, I, Hd) == 2 * S * B * 4 * Hd * (I + Hd) + 2 * S * B * 4 * Hd + 8 * S * B * Hd
    assert g.op("gru").flops == gru_flops(S, B, I, Hd, 2)
    assert g.tensor("Y").size_bytes == S * 1 * B * Hd * 4 and g.tensor("Yh").size_bytes == B * Hd * 4
    assert g.tensor("Yg").attrs["shape"] == [S, 2, B, Hd]
    assert g.op("lstm").weight_bytes == (4 * Hd * I + 4 * Hd * Hd + 8 * Hd) * 4


def test_convtranspose_and_gemm_trans():
    nodes = [
        helper.make_node("ConvTranspose", ["x", "W"], ["y"], name="up", strides=[2, 2], kernel_shape=[3, 3]),
        helper.make_node("Gemm", ["a", "Wt"], ["z"], name="gemm", transA=1),
    ]
    m = model(nodes, [vi("x", [1, 2, 4, 4]), vi("a", [6, 3])], [vi("y", None), vi("z", None)],
              [init("W", [2, 3, 3, 3]), init("Wt", [6, 5])])
    g = load_onnx(m)
    assert g.tensor("y").attrs["shape"] == [1, 3, 9, 9]
    assert g.op("up").flops == 2 * (1 * 2 * 4 * 4) * (3 * 3 * 3)
    assert g.tensor("z").attrs["shape"] == [3, 5]
    assert g.op("gemm").flops == 2 * 3 * 5 * 6  # K = 6 with transA


def test_unknown_ops_one_warning_listing_them():
    nodes = [
        helper.make_node("CumSum", ["x", "axis"], ["c"], name="cumsum"),
        helper.make_node("TopK", ["c", "k"], ["vals", "idx"], name="topk"),
        helper.make_node("CumSum", ["vals", "axis"], ["y"], name="cumsum2"),
        helper.make_node("Relu", ["y"], ["z"], name="relu"),
    ]
    inits = [numpy_helper.from_array(np.array(0, dtype=np.int64), "axis"),
             numpy_helper.from_array(np.array([2], dtype=np.int64), "k")]
    m = model(nodes, [vi("x", [3, 4])], [vi("z", None), helper.make_empty_tensor_value_info("idx")], inits)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = load_onnx(m)
    msgs = [str(x.message) for x in w if "FLOP rule" in str(x.message)]
    assert len(msgs) == 1
    assert "CumSum" in msgs[0] and "TopK" in msgs[0] and "Relu" not in msgs[0]
    assert g.op("cumsum").flops == 0 and g.op("topk").flops == 0 and g.op("cumsum").op_type == "CumSum"
    assert g.op("relu").flops == 3 * 2
    assert g.tensor("idx").size_bytes == 3 * 2 * 8  # int64 indices
    assert g.meta["unknown_op_types"] == ["CumSum", "TopK"]


def test_constant_nodes_are_weights_and_unnamed_nodes_get_names():
    c = helper.make_tensor("cv", F, [3], [1.0, 2.0, 3.0])
    nodes = [
        helper.make_node("Constant", [], ["k"], value=c),
        helper.make_node("Mul", ["x", "k"], ["m"]),
        helper.make_node("Mul", ["m", "k"], ["y"]),
    ]
    g = load_onnx(model(nodes, [vi("x", [2, 3])], [vi("y", None)]))
    assert list(g.ops) == ["Mul_1", "Mul_2"]
    assert g.op("Mul_1").weight_bytes == 12 and g.op("Mul_1").flops == 6
    assert "k" not in g.tensors


def test_unknown_shape_warns_and_sizes_zero():
    nodes = [helper.make_node("Custom", ["x"], ["y"], name="c", domain="my.domain"),
             helper.make_node("Relu", ["y"], ["z"], name="r")]
    m = helper.make_model(helper.make_graph(nodes, "g", [vi("x", [2])], [vi("z", None)]),
                          opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.domain", 1)])
    with pytest.warns(UserWarning) as rec:
        g = load_onnx(m)
    text = " | ".join(str(r.message) for r in rec)
    assert "Custom" in text and "without a shape" in text
    assert g.tensor("y").size_bytes == 0 and g.tensor("y").attrs["shape"] is None
    assert g.op("c").attrs["domain"] == "my.domain"


def test_load_graph_dispatches_onnx(tmp_path, cnn):
    p = tmp_path / "cnn.onnx"
    onnx.save(cnn, str(p))
    g = load_graph(p, dims={"N": 3})
    assert g.tensor("x").size_bytes == 3 * 3 * 8 * 8 * 4
    assert g.meta["source"] == "cnn.onnx"
    g2 = load_onnx(p.read_bytes(), dims={"N": 3})
    assert [o.flops for o in g2.ops.values()] == [o.flops for o in g.ops.values()]
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model at all \x00\x01")
    with pytest.raises(FormatError):
        load_graph(bad)
    with pytest.raises(FormatError) as e:
        load_onnx(tmp_path / "missing.onnx")
    assert e.value.field == "path"


def test_onnx_matches_zoo_conventions():
    """The same layer gives the same numbers through the ONNX importer and the zoo builder."""
    from hetsched.io import zoo

    z = zoo.resnet50(image_size=224)
    nodes = [helper.make_node("Conv", ["x", "W"], ["y"], name="conv1", pads=[3, 3, 3, 3], strides=[2, 2],
                              kernel_shape=[7, 7])]
    g = load_onnx(model(nodes, [vi("x", [1, 3, 224, 224])], [vi("y", None)], [init("W", [64, 3, 7, 7])]))
    assert g.op("conv1").flops == z.op("conv1").flops
    assert g.op("conv1").weight_bytes == z.op("conv1").weight_bytes
    assert g.tensor("y").size_bytes == z.tensor("conv1:out").size_bytes == math.prod([1, 64, 112, 112]) * 4


# ---------------------------------------------------------------- real exporter output (torch -> ONNX)
def _torch_or_skip():
    return pytest.importorskip("torch")


def _export(m, args, **kw):
    import io

    torch = _torch_or_skip()
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(m, args, f, dynamo=False, **kw)
    return f.getvalue()


def test_torch_exported_resnet50_matches_zoo():
    torch = _torch_or_skip()
    from test_io_torch import ResNet50

    from hetsched.io import zoo

    m = ResNet50().eval()
    torch.manual_seed(0)
    with torch.no_grad():  # distinct BN statistics: the exporter would merge identical folded biases
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.normal_()
                mod.bias.normal_()
    data = _export(m, (torch.randn(1, 3, 224, 224),), input_names=["image"],
                   dynamic_axes={"image": {0: "batch"}})
    g = load_onnx(data, dims={"batch": 2})
    z = zoo.resnet50(batch=2)
    assert g.meta["macs"] == z.meta["macs"]  # 2 x 4,089,184,256
    # the exporter folds each BatchNorm into its conv (eval mode): BN's gamma/beta go, conv biases come
    n_bn_params = sum(o.weight_bytes // 4 for o in z.ops.values() if o.op_type == "BatchNormalization")
    n_conv_bias = sum(z.tensor(f"{o.name}:out").attrs["shape"][1] for o in z.ops.values() if o.op_type == "Conv")
    assert g.meta["params"] == z.meta["params"] - n_bn_params + n_conv_bias
    assert sum(1 for o in g.ops.values() if o.op_type == "Conv") == 53
    assert g.tensor("image").size_bytes == 2 * 3 * 224 * 224 * 4
    assert max(t.size_bytes for t in g.tensors.values()) == max(t.size_bytes for t in z.tensors.values())


def test_torch_exported_gpt2_shapes_resolved_and_macs_match_zoo():
    torch = _torch_or_skip()
    from test_io_torch import GPT2

    from hetsched.io import zoo

    S, V = 16, 1000
    data = _export(GPT2(n_layers=1, vocab=V).eval(), (torch.zeros(1, S, dtype=torch.long), torch.arange(S).unsqueeze(0)),
                   input_names=["ids", "pos"], dynamic_axes={"ids": {0: "batch", 1: "seq"}, "pos": {1: "seq"}})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = load_onnx(data, dims={"batch": 2, "seq": S})
    assert not [x for x in w if "without a shape" in str(x.message)]  # shape arithmetic was folded
    assert not [o for o in g.ops.values() if o.op_type in ("Shape", "Concat", "Cast")]
    z = zoo.gpt2_small(batch=2, seq_len=S, n_layers=1, vocab=V)
    assert g.meta["macs"] == z.meta["macs"]
    assert all(t.attrs["shape"] is not None for t in g.tensors.values())
    scores = [o for o in g.ops.values() if o.op_type == "MatMul" and o.weight_bytes == 0]
    assert sorted(o.attrs["macs"] for o in scores) == [2 * 12 * S * S * 64] * 2


def test_imported_graph_trains(cnn):
    from hetsched.io.training import training_graph

    g = load_onnx(cnn, dims={"N": 2})
    t = training_graph(g)
    t.validate()
    assert t.op("conv.grad").op_type == "Conv_grad" and t.op("conv.grad").flops == g.op("conv").flops  # no dgrad
    assert t.op("fc.grad").flops == 2 * g.op("fc").flops
    assert t.tensor("flat.grad").alias_of is None and t.tensor("gap.grad").alias_of == "flat.grad"
    assert t.tensor("conv.weight_grad").size_bytes == g.op("conv").weight_bytes


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=25)
@given(widths=st.lists(st.integers(1, 64), min_size=2, max_size=6), batch=st.integers(1, 16),
       act=st.sampled_from(["Relu", "Sigmoid", "Tanh", "Gelu", "Softmax"]))
def test_random_mlp_property(widths, batch, act):
    """An MLP of random widths: every size and every FLOP follows the formulas."""
    nodes, inits, x = [], [], "x"
    for i, (a, b) in enumerate(zip(widths, widths[1:])):
        inits += [init(f"W{i}", [a, b]), init(f"b{i}", [b])]
        nodes += [helper.make_node("MatMul", [x, f"W{i}"], [f"mm{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"add{i}"], name=f"add{i}"),
                  helper.make_node(act, [f"add{i}"], [f"act{i}"], name=f"act{i}")]
        x = f"act{i}"
    opset = 20 if act == "Gelu" else 17
    g = load_onnx(model(nodes, [vi("x", ["B", widths[0]])], [vi(x, None)], inits, opset=opset), dims={"B": batch})
    per = {"Relu": 1, "Sigmoid": 1, "Tanh": 1, "Gelu": 8, "Softmax": 5}[act]
    expect = sum(2 * batch * a * b + batch * b + per * batch * b for a, b in zip(widths, widths[1:]))
    assert g.total_flops == expect
    assert g.meta["params"] == sum(a * b + b for a, b in zip(widths, widths[1:]))
    assert g.meta["macs"] == sum(batch * a * b for a, b in zip(widths, widths[1:]))
    for i, b in enumerate(widths[1:]):
        assert g.tensor(f"mm{i}").size_bytes == g.tensor(f"act{i}").size_bytes == 4 * batch * b
    assert g.topological_order() == list(g.ops)


def test_grouped_conv_records_groups_and_kernel_as_the_torch_importer_does():
    """An ONNX depthwise convolution is priced as one (``groups``, ``kernel``: hetsched.cost.curve_type),
    not as a dense convolution of the same FLOPs."""
    from hetsched.cost import curve_type

    nodes = [helper.make_node("Conv", ["x", "W3"], ["a"], name="dw3", group=4, pads=[1] * 4, kernel_shape=[3, 3]),
             helper.make_node("Conv", ["a", "W5"], ["b"], name="dw5", group=4, pads=[2] * 4),  # kernel from W
             helper.make_node("Conv", ["b", "W1"], ["y"], name="pw")]
    m = model(nodes, [vi("x", [1, 4, 6, 6])], [vi("y", None)],
              [init("W3", [4, 1, 3, 3]), init("W5", [4, 1, 5, 5]), init("W1", [2, 4, 1, 1])])
    g = load_onnx(m)
    assert [g.op(n).attrs.get("groups") for n in ("dw3", "dw5", "pw")] == [4, 4, None]
    assert [g.op(n).attrs.get("kernel") for n in ("dw3", "dw5", "pw")] == [[3, 3], [5, 5], None]
    assert [curve_type(g.op(n)) for n in ("dw3", "dw5", "pw")] == ["DepthwiseConv", "DepthwiseConvWide", "Conv"]
    assert g.op("dw5").flops == 2 * 4 * 36 * 25
