"""Zoo builders against published parameter and MAC figures (sources cited per case).

MACs are the published convention: multiply-accumulates of Conv/Gemm/MatMul, one image/sequence.
"""

from __future__ import annotations

import math

import pytest

from hetsched.errors import HetschedError
from hetsched.io import zoo
from hetsched.io.graph_json import graph_from_dict, graph_to_dict

# (builder kwargs, published params, published MACs per sample or None, tolerance, source)
PUBLISHED = {
    # torchvision ResNet50_Weights.IMAGENET1K_V1 docs: num_params 25,557,032, GFLOPS 4.09 (fvcore MACs);
    # He et al. CVPR 2016 table 1 (25.6M params in the usual citation).
    "resnet50": ({}, 25_557_032, 4.09e9, 0.01, "torchvision resnet50 card; He et al. 2016 table 1"),
    # torchvision VGG16_Weights.IMAGENET1K_V1: 138,357,544 params, 15.47 GFLOPS; Simonyan & Zisserman 2015 table 2: 138M.
    "vgg16": ({}, 138_357_544, 15.47e9, 0.01, "torchvision vgg16 card; Simonyan & Zisserman 2015 table 2"),
    # Sandler et al. CVPR 2018 table 3: 300M multiply-adds; torchvision MobileNet_V2_Weights: 3,504,872 params, 0.30 GFLOPS.
    "mobilenet_v2": ({}, 3_504_872, 300e6, 0.01, "torchvision mobilenet_v2 card; Sandler et al. 2018 table 3"),
    # torchvision Inception_V3_Weights: 27,161,264 params incl. AuxLogits (3,326,696) -> 23,834,568; 5.71 GFLOPS at 299.
    "inception_v3": ({}, 23_834_568, 5.71e9, 0.01, "torchvision inception_v3 card (minus AuxLogits); Szegedy et al. 2016"),
    # Devlin et al. NAACL 2019: BERT-base 110M; HF bert-base-uncased BertModel: 109,482,240.
    "bert_base": ({}, 109_482_240, None, 0.01, "Devlin et al. 2019; HF bert-base-uncased"),
    # HF gpt2 model card: 124M params; GPT2LMHeadModel with tied embeddings: 124,439,808.
    "gpt2_small": ({"seq_len": 128}, 124_439_808, None, 0.01, "HF gpt2 card; Radford et al. 2019"),
    # Xie et al. ICCV 2019 table 2, RandWire-WS small regime C=78: 583M FLOPs (mult-adds), 5.6M params.
    "randwire_ws": ({"seed": 0}, 5.6e6, 583e6, 0.01, "Xie et al. 2019 table 2 (small regime)"),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_params_and_macs_match_published(name):
    kw, params, macs, tol, source = PUBLISHED[name]
    g = zoo.ZOO[name](**kw)
    g.validate()
    assert abs(g.meta["params"] - params) / params <= tol, (name, g.meta["params"], source)
    assert zoo.count_params(g) == g.meta["params"]
    assert zoo.count_macs(g) == g.meta["macs"]
    if macs is not None:
        assert abs(g.meta["macs_per_sample"] - macs) / macs <= tol, (name, g.meta["macs_per_sample"], source)
    # the published figure is recorded in meta with its reference
    assert g.meta["published"]["params"] == params
    assert "refs" in g.meta["published"]


def test_exact_torchvision_counts():
    # these layouts copy torchvision's, so the parameter counts are exact, not just within 1%
    assert zoo.resnet50().meta["params"] == 25_557_032
    assert zoo.vgg16().meta["params"] == 138_357_544
    assert zoo.mobilenet_v2().meta["params"] == 3_504_872
    assert zoo.inception_v3().meta["params"] == 23_834_568
    assert zoo.bert_base().meta["params"] == 109_482_240
    assert zoo.gpt2_small().meta["params"] == 124_439_808


def test_resnet50_macs_exact_value():
    # sum over the 53 convs and the fc; 4.0892 G agrees with fvcore/torchvision's rounded 4.09
    g = zoo.resnet50()
    assert g.meta["macs"] == 4_089_184_256
    assert sum(1 for o in g.ops.values() if o.op_type == "Conv") == 53
    assert g.total_flops >= 2 * g.meta["macs"]


def test_bert_macs_formula():
    # per layer: S*(4*D*D + 2*D*F) projection MACs + 2*S*S*D attention MACs; plus the pooler D*D
    S, D, F = 128, 768, 3072
    per_layer = S * (4 * D * D + 2 * D * F) + 2 * S * S * D
    assert zoo.bert_base(seq_len=S).meta["macs"] == 12 * per_layer + D * D


def test_gpt2_macs_formula_and_tied_head():
    S, D, V = 64, 768, 50257
    g = zoo.gpt2_small(seq_len=S)
    per_layer = S * (3 * D * D + D * D + 8 * D * D) + 2 * S * S * D
    assert g.meta["macs"] == 12 * per_layer + S * D * V
    head = g.op("lm_head")
    assert head.attrs["shares_weights_with"] == "wte"
    assert head.weight_bytes == g.op("wte").weight_bytes == V * D * 4
    # without the tie rule the LM head would be counted twice
    assert sum(o.weight_bytes for o in g.ops.values()) // 4 == g.meta["params"] + V * D


def test_randwire_seeds_average_near_published():
    # the paper reports figures of random graph instances; average over seeds must also be close
    ps, ms = [], []
    for s in range(5):
        g = zoo.randwire_ws(seed=s)
        ps.append(g.meta["params"])
        ms.append(g.meta["macs_per_sample"])
    assert abs(sum(ps) / 5 - 5.6e6) / 5.6e6 < 0.02
    assert abs(sum(ms) / 5 - 583e6) / 583e6 < 0.02
    assert len(set(ms)) > 1  # different seeds, different wiring


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2", "vgg16", "inception_v3", "randwire_ws"])
def test_batch_scales_sizes_and_macs(name):
    g1, g4 = zoo.ZOO[name](batch=1), zoo.ZOO[name](batch=4)
    assert g4.meta["batch"] == 4 and g4.meta["params"] == g1.meta["params"]
    assert g4.meta["macs"] == 4 * g1.meta["macs"]
    assert g4.meta["macs_per_sample"] == g1.meta["macs_per_sample"]
    for t in g1.tensors:
        assert g4.tensor(t).size_bytes == 4 * g1.tensor(t).size_bytes
    assert [o.weight_bytes for o in g4.ops.values()] == [o.weight_bytes for o in g1.ops.values()]


def test_tensor_sizes_are_shape_times_dtype():
    for name in ["resnet50", "bert_base"]:
        g = zoo.ZOO[name](batch=2)
        for t in g.tensors.values():
            assert t.size_bytes == math.prod(t.attrs["shape"]) * (8 if t.attrs["dtype"] == "int64" else 4), t.name


def test_input_size_changes_macs_not_params():
    a, b = zoo.resnet50(image_size=224), zoo.resnet50(image_size=448)
    assert a.meta["params"] == b.meta["params"]
    # conv MACs scale with the number of pixels (x4); only the fc does not
    fc = 2048 * 1000
    assert b.meta["macs"] - fc == pytest.approx(4 * (a.meta["macs"] - fc), rel=1e-3)
    assert zoo.resnet50(image_size=224).tensor("image").attrs["shape"] == [1, 3, 224, 224]
    assert zoo.inception_v3(image_size=299).tensor("Mixed_7c.concat:out").attrs["shape"] == [1, 2048, 8, 8]
    assert zoo.bert_base(seq_len=64).tensor("layer0.ffn1:out").attrs["shape"] == [1, 64, 3072]
    assert zoo.vgg16(image_size=64).meta["params"] == 138_357_544


def test_shapes_of_known_layers():
    g = zoo.resnet50()
    assert g.tensor("conv1:out").attrs["shape"] == [1, 64, 112, 112]
    assert g.tensor("maxpool:out").attrs["shape"] == [1, 64, 56, 56]
    assert g.tensor("layer4.2.relu:out").attrs["shape"] == [1, 2048, 7, 7]
    # the first conv: 7x7x3x64 weights, 118M MACs at 224 (He et al. table 1 conv1)
    assert g.op("conv1").weight_bytes == 7 * 7 * 3 * 64 * 4
    assert g.op("conv1").flops == 2 * 118_013_952
    m = zoo.mobilenet_v2()
    assert m.tensor("features.18.clip:out").attrs["shape"] == [1, 1280, 7, 7]
    assert m.op("features.2.dw").attrs["group"] == 96


def test_views_are_aliases():
    g = zoo.resnet50()
    assert g.tensor("flatten:out").alias_of == "avgpool:out"
    gp = zoo.gpt2_small(seq_len=16, n_layers=1)
    assert [gp.tensor(f"h0.split:{i}").alias_of for i in range(3)] == ["h0.c_attn:out"] * 3


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: zoo.resnet50(batch=0), "batch"),
        (lambda: zoo.resnet50(batch=1.5), "batch"),
        (lambda: zoo.resnet50(image_size=8), "image_size"),
        (lambda: zoo.bert_base(seq_len=513), "seq_len"),
        (lambda: zoo.gpt2_small(seq_len=2048), "seq_len"),
        (lambda: zoo.randwire_ws(p=1.5), "p"),
        (lambda: zoo.randwire_ws(k=40), "k"),
        (lambda: zoo.resnet50(dtype_bytes=3), "dtype_bytes"),
        (lambda: zoo.build("alexnet"), "name"),
    ],
)
def test_bad_arguments_raise_named_errors(call, field):
    with pytest.raises(HetschedError) as e:
        call()
    assert e.value.field == field


def test_deterministic_and_round_trips():
    for name in ["randwire_ws", "inception_v3", "gpt2_small"]:
        a, b = graph_to_dict(zoo.ZOO[name]()), graph_to_dict(zoo.ZOO[name]())
        assert a == b
        assert graph_to_dict(graph_from_dict(a)) == a
    assert graph_to_dict(zoo.randwire_ws(seed=1)) != graph_to_dict(zoo.randwire_ws(seed=2))


def test_fp16_halves_bytes():
    a, h = zoo.mobilenet_v2(), zoo.mobilenet_v2(dtype_bytes=2)
    assert h.meta["dtype"] == "float16" and h.meta["params"] == a.meta["params"]
    assert h.total_weight_bytes * 2 == a.total_weight_bytes
    assert zoo.count_params(h) == a.meta["params"]


def test_mmmt_registered_lazily():
    assert "mmmt" in zoo.ZOO
    mmmt = pytest.importorskip("hetsched.io.mmmt", reason="hetsched/io/mmmt.py is written by the mapping helper")
    g = zoo.build("mmmt")
    g.validate()
    assert g.n_ops > 0
    assert mmmt.MMMT_MODELS
