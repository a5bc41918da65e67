"""A zoo of real architectures, built from their published layer shapes.

Every builder takes a batch size and an input size and returns an :class:`~hetsched.graph.OpGraph`
with ONNX-style op types (``Conv``, ``BatchNormalization``, ``Relu``, ``MatMul``...), FLOPs from
:mod:`hetsched.io.flops` (a MAC = 2 FLOPs), weights on the ops that own them (``weight_bytes``) and
tensor shapes in ``attrs["shape"]``. ``training=True`` returns :func:`training_graph` of it
(forward, loss, backward with gradient tensors and saved activations, weight gradients).

``graph.meta`` records ``params`` (trainable parameters, counted per op as
``weight_bytes / dtype_bytes``, weights shared between ops counted once), ``macs`` (MACs of the
Conv/Gemm/MatMul ops for the whole batch), ``macs_per_sample``, ``batch``, the input size and the
``source`` (paper and layer-shape reference). Totals match the published figures (see
``data/README.md`` and ``tests/test_zoo_models.py``):

================  ===============  ===============  ==================================================
model             params           MACs / sample    published
================  ===============  ===============  ==================================================
resnet50          25,557,032       4.09 G (224)     25.6M, 4.1 GFLOPs(MAC): He 2016 tab. 1; torchvision
vgg16             138,357,544      15.47 G (224)    138M: Simonyan 2015 tab. 2; torchvision 15.47
mobilenet_v2      3,504,872        0.30 G (224)     3.4-3.5M, 300M: Sandler 2018 tab. 3; torchvision
inception_v3      23,834,568       5.7 G (299)      23.8M: Szegedy 2016; torchvision 27.16M w/ aux
bert_base         109,482,240      11.2 G (seq 128) 110M: Devlin 2019; HF bert-base-uncased
gpt2_small        124,439,808      -                124M: Radford 2019; HF gpt2 card
randwire_ws       ~5.6 M (C=78)    ~0.58 G          5.6M, 583M: Xie 2019 tab. 2 (small regime)
================  ===============  ===============  ==================================================

Not modelled: dropout (identity at inference; its mask would add one saved tensor per dropout
in training), BatchNorm running statistics (buffers, not parameters) and Inception-v3's auxiliary
classifier (used only in training; torchvision's 27.2M count includes it).

>>> g = resnet50()
>>> g.meta["params"], round(g.meta["macs"] / 1e9, 2)
(25557032, 4.09)
>>> sorted(ZOO)[:3]
['bert_base', 'gpt2_small', 'inception_v3']
"""

from __future__ import annotations

import math
from math import prod
from typing import Any, Callable, Sequence

from ..errors import HetschedError
from ..graph import OpGraph
from .flops import ELEMENTWISE_FLOPS, MAC_OPS
from .training import training_graph

__all__ = [
    "ZOO",
    "build",
    "count_params",
    "count_macs",
    "training_graph",
    "resnet50",
    "vgg16",
    "mobilenet_v2",
    "inception_v3",
    "bert_base",
    "gpt2_small",
    "randwire_ws",
]

_DTYPES = {4: "float32", 2: "float16", 8: "float64", 1: "int8"}


class _Net:
    """Small graph builder that tracks shapes, parameters and MACs (internal)."""

    def __init__(self, name: str, *, batch: int, dtype_bytes: int, meta: dict[str, Any]) -> None:
        if not isinstance(batch, int) or batch <= 0:
            raise HetschedError(f"batch must be a positive integer, got {batch!r}", field="batch")
        if dtype_bytes not in _DTYPES:
            raise HetschedError(f"dtype_bytes must be one of {sorted(_DTYPES)}, got {dtype_bytes!r}", field="dtype_bytes")
        self.g = OpGraph(name, meta={**meta, "batch": batch, "dtype": _DTYPES[dtype_bytes]})
        self.B = batch
        self.db = dtype_bytes
        self.dtype = _DTYPES[dtype_bytes]
        self.shape: dict[str, tuple[int, ...]] = {}
        self.params = 0
        self.macs = 0

    # -------------------------------------------------------------- primitives
    def input(self, name: str, shape: Sequence[int], *, dtype_bytes: int | None = None, kind: str = "input") -> str:
        db = dtype_bytes or self.db
        self.g.add_tensor(name, prod(shape) * db, attrs={"shape": list(shape), "dtype": _DTYPES.get(db, "int64") if kind != "index" else "int64", "kind": kind})
        self.shape[name] = tuple(shape)
        return name

    def op(self, name: str, op_type: str, ins: Sequence[str], out_shape: Sequence[int], *, macs: int = 0,
           flops: float | None = None, params: int = 0, shared: str | None = None, alias: str | None = None,
           attrs: dict[str, Any] | None = None) -> str:
        """Add an op with one output ``<name>:out``; returns the output tensor name."""
        if flops is None:
            flops = 2.0 * macs if macs else ELEMENTWISE_FLOPS.get(op_type, 0.0) * prod(out_shape)
        a = dict(attrs or {})
        if macs:
            a["macs"] = int(macs)
        if params:
            a["params"] = int(params)
        if shared:
            # a tied weight: this op reads the bytes ``shared`` owns (counted once in memory)
            a["shares_weights_with"] = shared
            a["shared_weight_bytes"] = int(params) * self.db
        self.g.add_op(name, op_type, flops=float(flops), weight_bytes=int(params) * self.db, attrs=a)
        for t in ins:
            self.g.add_consumer(t, name)
        out = f"{name}:out"
        nbytes = prod(out_shape) * self.db
        self.g.add_tensor(out, nbytes, producer=name, alias_of=alias,
                          attrs={"shape": list(out_shape), "dtype": self.dtype, "kind": "activation"})
        self.shape[out] = tuple(out_shape)
        if op_type in MAC_OPS:
            self.macs += int(macs)
        if not shared:
            self.params += int(params)
        return out

    def multi(self, name: str, op_type: str, ins: Sequence[str], out_shapes: Sequence[Sequence[int]], *,
              alias: str | None = None) -> list[str]:
        """A zero-FLOP op with several outputs (Split)."""
        self.g.add_op(name, op_type, flops=0.0)
        for t in ins:
            self.g.add_consumer(t, name)
        outs = []
        for i, s in enumerate(out_shapes):
            out = f"{name}:{i}"
            self.g.add_tensor(out, prod(s) * self.db, producer=name, alias_of=alias,
                              attrs={"shape": list(s), "dtype": self.dtype, "kind": "activation"})
            self.shape[out] = tuple(s)
            outs.append(out)
        return outs

    # -------------------------------------------------------------- CNN layers (NCHW)
    def conv(self, name: str, x: str, cout: int, k: int | tuple[int, int], *, stride: int = 1,
             pad: int | tuple[int, int] = 0, groups: int = 1, bias: bool = False) -> str:
        n, cin, h, w = self.shape[x]
        kh, kw = (k, k) if isinstance(k, int) else k
        ph, pw = (pad, pad) if isinstance(pad, int) else pad
        ho, wo = (h + 2 * ph - kh) // stride + 1, (w + 2 * pw - kw) // stride + 1
        if ho <= 0 or wo <= 0:
            raise HetschedError(f"input too small: {name} would output {ho}x{wo}", op=name, field="input_size")
        macs = n * cout * ho * wo * (cin // groups) * kh * kw
        params = cout * (cin // groups) * kh * kw + (cout if bias else 0)
        flops = 2.0 * macs + (n * cout * ho * wo if bias else 0)
        return self.op(name, "Conv", [x], (n, cout, ho, wo), macs=macs, flops=flops, params=params,
                       attrs={"kernel": [kh, kw], "stride": stride, "pad": [ph, pw], "group": groups})

    def bn(self, name: str, x: str) -> str:
        c = self.shape[x][1]
        return self.op(name, "BatchNormalization", [x], self.shape[x], params=2 * c)

    def act(self, name: str, x: str, op_type: str = "Relu") -> str:
        return self.op(name, op_type, [x], self.shape[x])

    def conv_bn(self, name: str, x: str, cout: int, k, *, stride=1, pad=0, groups=1, act: str | None = "Relu") -> str:
        y = self.bn(f"{name}.bn", self.conv(name, x, cout, k, stride=stride, pad=pad, groups=groups))
        return self.act(f"{name}.{act.lower()}", y, act) if act else y

    def pool(self, name: str, x: str, op_type: str, k: int, stride: int, pad: int = 0) -> str:
        n, c, h, w = self.shape[x]
        ho, wo = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
        return self.op(name, op_type, [x], (n, c, ho, wo), flops=float(n * c * ho * wo * k * k),
                       attrs={"kernel": [k, k], "stride": stride, "pad": [pad, pad]})

    def gap(self, name: str, x: str) -> str:
        n, c, h, w = self.shape[x]
        return self.op(name, "GlobalAveragePool", [x], (n, c, 1, 1), flops=float(n * c * h * w))

    def flatten(self, name: str, x: str) -> str:
        s = self.shape[x]
        return self.op(name, "Flatten", [x], (s[0], prod(s[1:])), alias=x)

    def add(self, name: str, *xs: str) -> str:
        s = self.shape[xs[0]]
        return self.op(name, "Add", list(xs), s, flops=float(prod(s) * (len(xs) - 1)))

    def concat(self, name: str, xs: Sequence[str], axis: int = 1) -> str:
        s = list(self.shape[xs[0]])
        s[axis] = sum(self.shape[x][axis] for x in xs)
        return self.op(name, "Concat", list(xs), s, attrs={"axis": axis})

    def linear(self, name: str, x: str, nout: int, *, bias: bool = True, op_type: str = "Gemm",
               shared: str | None = None) -> str:
        s = self.shape[x]
        nin, rows = s[-1], prod(s[:-1])
        macs = rows * nin * nout
        flops = 2.0 * macs + (rows * nout if bias else 0)
        return self.op(name, op_type, [x], (*s[:-1], nout), macs=macs, flops=flops,
                       params=nin * nout + (nout if bias else 0), shared=shared)

    # -------------------------------------------------------------- finish
    def finish(self, out: str | Sequence[str], *, training: bool, source: str, published: dict[str, Any]) -> OpGraph:
        for o in [out] if isinstance(out, str) else out:
            self.g.set_tensor(o, is_output=True)
        self.g.meta.update(
            params=self.params, macs=self.macs, macs_per_sample=self.macs / self.B, flops=self.g.total_flops,
            source=source, published=published, weight_bytes=self.params * self.db,
        )
        self.g.validate()
        return training_graph(self.g) if training else self.g


def count_params(graph: OpGraph, dtype_bytes: int | None = None) -> int:
    """Trainable parameters: ``weight_bytes / dtype_bytes`` over forward ops, shared weights once.

    >>> count_params(vgg16())
    138357544
    """
    db = dtype_bytes or {v: k for k, v in _DTYPES.items()}.get(graph.meta.get("dtype", "float32"), 4)
    total = 0
    for o in graph.ops.values():
        if o.attrs.get("phase", "forward") != "forward" or o.attrs.get("shares_weights_with"):
            continue
        total += o.weight_bytes // db
    return int(total)


def count_macs(graph: OpGraph) -> int:
    """MACs of the forward Conv/ConvTranspose/Gemm/MatMul ops (the published-figure convention).

    >>> count_macs(vgg16()) == vgg16().meta["macs"]
    True
    """
    return int(sum(o.attrs.get("macs", 0) for o in graph.ops.values()
                   if o.op_type in MAC_OPS and o.attrs.get("phase", "forward") == "forward"))


def _check_size(name: str, size: int, minimum: int) -> None:
    if not isinstance(size, int) or size < minimum:
        raise HetschedError(f"{name} must be an integer >= {minimum}, got {size!r}", field=name)


# ====================================================================== CNNs
def resnet50(*, batch: int = 1, image_size: int = 224, num_classes: int = 1000, training: bool = False,
             dtype_bytes: int = 4) -> OpGraph:
    """ResNet-50 (He et al., CVPR 2016, table 1), torchvision's v1.5 layout (stride in the 3x3 conv).

    Bottleneck blocks [3, 4, 6, 3] of widths 64..512 (expansion 4), convs without bias, each
    followed by BatchNormalization; 1x1 projection shortcuts where the shape changes.

    >>> g = resnet50(batch=2, image_size=64); g.meta["batch"], g.meta["params"]
    (2, 25557032)
    """
    _check_size("image_size", image_size, 32)
    n = _Net(f"resnet50-b{batch}-{image_size}", batch=batch, dtype_bytes=dtype_bytes,
             meta={"model": "resnet50", "image_size": image_size})
    x = n.input("image", (batch, 3, image_size, image_size))
    x = n.conv_bn("conv1", x, 64, 7, stride=2, pad=3)
    x = n.pool("maxpool", x, "MaxPool", 3, 2, 1)
    cin = 64
    for li, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512)), start=1):
        for b in range(blocks):
            p = f"layer{li}.{b}"
            stride = 2 if (b == 0 and li > 1) else 1
            y = n.conv_bn(f"{p}.conv1", x, width, 1)
            y = n.conv_bn(f"{p}.conv2", y, width, 3, stride=stride, pad=1)
            y = n.conv_bn(f"{p}.conv3", y, width * 4, 1, act=None)
            sc = n.conv_bn(f"{p}.downsample", x, width * 4, 1, stride=stride, act=None) if b == 0 else x
            x = n.act(f"{p}.relu", n.add(f"{p}.add", y, sc))
            cin = width * 4
    x = n.flatten("flatten", n.gap("avgpool", x))
    x = n.linear("fc", x, num_classes)
    return n.finish(x, training=training,
                    source="He et al., Deep Residual Learning, CVPR 2016, table 1; torchvision resnet50 (v1.5)",
                    published={"params": 25_557_032, "macs_per_sample": 4.09e9, "at": 224,
                               "refs": "torchvision ResNet50_Weights.IMAGENET1K_V1: 25,557,032 params, 4.09 GFLOPS(MAC)"})


def vgg16(*, batch: int = 1, image_size: int = 224, num_classes: int = 1000, training: bool = False,
          dtype_bytes: int = 4) -> OpGraph:
    """VGG-16, configuration D (Simonyan & Zisserman, ICLR 2015, table 1), torchvision layout.

    The classifier expects 7x7x512 features; at sizes other than 224 an adaptive ``AveragePool``
    (as torchvision's) maps the last feature map to 7x7, so the parameter count does not change.

    >>> vgg16(image_size=64).meta["params"] == vgg16().meta["params"]
    True
    """
    _check_size("image_size", image_size, 32)
    n = _Net(f"vgg16-b{batch}-{image_size}", batch=batch, dtype_bytes=dtype_bytes,
             meta={"model": "vgg16", "image_size": image_size})
    x = n.input("image", (batch, 3, image_size, image_size))
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    i = 0
    for c in cfg:
        if c == "M":
            x = n.pool(f"pool{i}", x, "MaxPool", 2, 2)
        else:
            x = n.act(f"conv{i}.relu", n.conv(f"conv{i}", x, c, 3, pad=1, bias=True))
        i += 1
    # adaptive average pool to 7x7: identity at 224; a real AveragePool otherwise
    N, Cc, s, _ = n.shape[x]
    if s != 7:
        win = max(1, math.ceil(s / 7))
        x = n.op("avgpool", "AveragePool", [x], (N, Cc, 7, 7), flops=float(N * Cc * 49 * win * win),
                 attrs={"adaptive": True, "output_size": [7, 7]})
    x = n.flatten("flatten", x)
    x = n.act("fc1.relu", n.linear("fc1", x, 4096))
    x = n.act("fc2.relu", n.linear("fc2", x, 4096))
    x = n.linear("fc3", x, num_classes)
    return n.finish(x, training=training,
                    source="Simonyan & Zisserman, Very Deep Convolutional Networks, ICLR 2015, table 1 (D); torchvision vgg16",
                    published={"params": 138_357_544, "macs_per_sample": 15.47e9, "at": 224,
                               "refs": "torchvision VGG16_Weights.IMAGENET1K_V1: 138,357,544 params, 15.47 GFLOPS(MAC)"})


def mobilenet_v2(*, batch: int = 1, image_size: int = 224, num_classes: int = 1000, width_mult: float = 1.0,
                 training: bool = False, dtype_bytes: int = 4) -> OpGraph:
    """MobileNetV2 (Sandler et al., CVPR 2018, table 2), torchvision layout.

    Inverted residual blocks (t, c, n, s); ReLU6 is exported as ``Clip``.

    >>> g = mobilenet_v2(); g.meta["params"], round(g.meta["macs"] / 1e6)
    (3504872, 301)
    """
    _check_size("image_size", image_size, 32)

    def div8(v: float) -> int:  # torchvision's _make_divisible(v, 8)
        nv = max(8, int(v + 4) // 8 * 8)
        return nv + 8 if nv < 0.9 * v else nv

    n = _Net(f"mobilenet_v2-b{batch}-{image_size}", batch=batch, dtype_bytes=dtype_bytes,
             meta={"model": "mobilenet_v2", "image_size": image_size, "width_mult": width_mult})
    x = n.input("image", (batch, 3, image_size, image_size))
    cin = div8(32 * width_mult)
    last = div8(1280 * max(1.0, width_mult))
    x = n.conv_bn("features.0", x, cin, 3, stride=2, pad=1, act="Clip")
    settings = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    i = 1
    for t, c, reps, s in settings:
        cout = div8(c * width_mult)
        for r in range(reps):
            stride = s if r == 0 else 1
            p = f"features.{i}"
            hidden = cin * t
            y = x
            if t != 1:
                y = n.conv_bn(f"{p}.expand", y, hidden, 1, act="Clip")
            y = n.conv_bn(f"{p}.dw", y, hidden, 3, stride=stride, pad=1, groups=hidden, act="Clip")
            y = n.conv_bn(f"{p}.project", y, cout, 1, act=None)
            x = n.add(f"{p}.add", x, y) if (stride == 1 and cin == cout) else y
            cin = cout
            i += 1
    x = n.conv_bn(f"features.{i}", x, last, 1, act="Clip")
    x = n.flatten("flatten", n.gap("avgpool", x))
    x = n.linear("classifier", x, num_classes)
    return n.finish(x, training=training,
                    source="Sandler et al., MobileNetV2, CVPR 2018, table 2; torchvision mobilenet_v2",
                    published={"params": 3_504_872, "macs_per_sample": 300e6, "at": 224,
                               "refs": "paper table 3: 3.4M params, 300M multiply-adds; torchvision: 3,504,872 params, 0.30 GFLOPS(MAC)"})


def inception_v3(*, batch: int = 1, image_size: int = 299, num_classes: int = 1000, training: bool = False,
                 dtype_bytes: int = 4) -> OpGraph:
    """Inception-v3 (Szegedy et al., CVPR 2016, table 1 and figures 5-7), torchvision layout.

    BasicConv2d = Conv (no bias) + BatchNormalization + Relu. The auxiliary classifier is not built.

    >>> inception_v3().meta["params"]
    23834568
    """
    _check_size("image_size", image_size, 75)
    n = _Net(f"inception_v3-b{batch}-{image_size}", batch=batch, dtype_bytes=dtype_bytes,
             meta={"model": "inception_v3", "image_size": image_size})
    cb = n.conv_bn
    x = n.input("image", (batch, 3, image_size, image_size))
    x = cb("Conv2d_1a_3x3", x, 32, 3, stride=2)
    x = cb("Conv2d_2a_3x3", x, 32, 3)
    x = cb("Conv2d_2b_3x3", x, 64, 3, pad=1)
    x = n.pool("maxpool1", x, "MaxPool", 3, 2)
    x = cb("Conv2d_3b_1x1", x, 80, 1)
    x = cb("Conv2d_4a_3x3", x, 192, 3)
    x = n.pool("maxpool2", x, "MaxPool", 3, 2)

    def block_a(p, x, pool_features):
        b1 = cb(f"{p}.branch1x1", x, 64, 1)
        b5 = cb(f"{p}.branch5x5_2", cb(f"{p}.branch5x5_1", x, 48, 1), 64, 5, pad=2)
        b3 = cb(f"{p}.branch3x3dbl_1", x, 64, 1)
        b3 = cb(f"{p}.branch3x3dbl_3", cb(f"{p}.branch3x3dbl_2", b3, 96, 3, pad=1), 96, 3, pad=1)
        bp = cb(f"{p}.branch_pool", n.pool(f"{p}.avgpool", x, "AveragePool", 3, 1, 1), pool_features, 1)
        return n.concat(f"{p}.concat", [b1, b5, b3, bp])

    def block_b(p, x):
        b3 = cb(f"{p}.branch3x3", x, 384, 3, stride=2)
        bd = cb(f"{p}.branch3x3dbl_1", x, 64, 1)
        bd = cb(f"{p}.branch3x3dbl_3", cb(f"{p}.branch3x3dbl_2", bd, 96, 3, pad=1), 96, 3, stride=2)
        bp = n.pool(f"{p}.maxpool", x, "MaxPool", 3, 2)
        return n.concat(f"{p}.concat", [b3, bd, bp])

    def block_c(p, x, c7):
        b1 = cb(f"{p}.branch1x1", x, 192, 1)
        b7 = cb(f"{p}.branch7x7_1", x, c7, 1)
        b7 = cb(f"{p}.branch7x7_2", b7, c7, (1, 7), pad=(0, 3))
        b7 = cb(f"{p}.branch7x7_3", b7, 192, (7, 1), pad=(3, 0))
        bd = cb(f"{p}.branch7x7dbl_1", x, c7, 1)
        bd = cb(f"{p}.branch7x7dbl_2", bd, c7, (7, 1), pad=(3, 0))
        bd = cb(f"{p}.branch7x7dbl_3", bd, c7, (1, 7), pad=(0, 3))
        bd = cb(f"{p}.branch7x7dbl_4", bd, c7, (7, 1), pad=(3, 0))
        bd = cb(f"{p}.branch7x7dbl_5", bd, 192, (1, 7), pad=(0, 3))
        bp = cb(f"{p}.branch_pool", n.pool(f"{p}.avgpool", x, "AveragePool", 3, 1, 1), 192, 1)
        return n.concat(f"{p}.concat", [b1, b7, bd, bp])

    def block_d(p, x):
        b3 = cb(f"{p}.branch3x3_2", cb(f"{p}.branch3x3_1", x, 192, 1), 320, 3, stride=2)
        b7 = cb(f"{p}.branch7x7x3_1", x, 192, 1)
        b7 = cb(f"{p}.branch7x7x3_2", b7, 192, (1, 7), pad=(0, 3))
        b7 = cb(f"{p}.branch7x7x3_3", b7, 192, (7, 1), pad=(3, 0))
        b7 = cb(f"{p}.branch7x7x3_4", b7, 192, 3, stride=2)
        bp = n.pool(f"{p}.maxpool", x, "MaxPool", 3, 2)
        return n.concat(f"{p}.concat", [b3, b7, bp])

    def block_e(p, x):
        b1 = cb(f"{p}.branch1x1", x, 320, 1)
        b3 = cb(f"{p}.branch3x3_1", x, 384, 1)
        b3 = n.concat(f"{p}.branch3x3_cat", [cb(f"{p}.branch3x3_2a", b3, 384, (1, 3), pad=(0, 1)),
                                              cb(f"{p}.branch3x3_2b", b3, 384, (3, 1), pad=(1, 0))])
        bd = cb(f"{p}.branch3x3dbl_2", cb(f"{p}.branch3x3dbl_1", x, 448, 1), 384, 3, pad=1)
        bd = n.concat(f"{p}.branch3x3dbl_cat", [cb(f"{p}.branch3x3dbl_3a", bd, 384, (1, 3), pad=(0, 1)),
                                                 cb(f"{p}.branch3x3dbl_3b", bd, 384, (3, 1), pad=(1, 0))])
        bp = cb(f"{p}.branch_pool", n.pool(f"{p}.avgpool", x, "AveragePool", 3, 1, 1), 192, 1)
        return n.concat(f"{p}.concat", [b1, b3, bd, bp])

    x = block_a("Mixed_5b", x, 32)
    x = block_a("Mixed_5c", x, 64)
    x = block_a("Mixed_5d", x, 64)
    x = block_b("Mixed_6a", x)
    for p, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = block_c(p, x, c7)
    x = block_d("Mixed_7a", x)
    x = block_e("Mixed_7b", x)
    x = block_e("Mixed_7c", x)
    x = n.flatten("flatten", n.gap("avgpool", x))
    x = n.linear("fc", x, num_classes)
    return n.finish(x, training=training,
                    source="Szegedy et al., Rethinking the Inception Architecture, CVPR 2016; torchvision inception_v3 (no aux)",
                    published={"params": 23_834_568, "macs_per_sample": 5.71e9, "at": 299,
                               "refs": "torchvision Inception_V3_Weights.IMAGENET1K_V1: 27,161,264 params incl. AuxLogits "
                                       "(3,326,696), 5.71 GFLOPS(MAC)"})


# ====================================================================== transformers
def _attention(n: _Net, p: str, q: str, k: str, v: str, heads: int, *, causal: bool) -> str:
    B, S, D = n.shape[q]
    dh = D // heads
    scores = n.op(f"{p}.scores", "MatMul", [q, k], (B, heads, S, S), macs=B * heads * S * S * dh,
                  attrs={"note": "Q K^T per head; the head split/transposes are views"})
    # scale (and the causal mask) are folded into the Softmax op: 1-2 more element ops
    probs = n.op(f"{p}.softmax", "Softmax", [scores], (B, heads, S, S),
                 flops=(7.0 if causal else 6.0) * B * heads * S * S, attrs={"causal": causal, "scaled": True})
    return n.op(f"{p}.context", "MatMul", [probs, v], (B, S, D), macs=B * heads * S * S * dh)


def bert_base(*, batch: int = 1, seq_len: int = 128, training: bool = False, dtype_bytes: int = 4,
              n_layers: int = 12, d_model: int = 768, heads: int = 12, d_ff: int = 3072, vocab: int = 30522,
              max_position: int = 512) -> OpGraph:
    """BERT-base (Devlin et al., NAACL 2019): 12 post-LN encoder layers, d=768, 12 heads, FFN 3072.

    Embeddings (word, position, token type; ``Gather``), LayerNorm, the encoder, and the pooler
    (``Gemm`` + ``Tanh`` on the first token). Outputs: the sequence output and the pooled output.

    >>> bert_base().meta["params"]
    109482240
    """
    _check_size("seq_len", seq_len, 1)
    if seq_len > max_position:
        raise HetschedError(f"seq_len {seq_len} exceeds max_position {max_position}", field="seq_len")
    n = _Net(f"bert_base-b{batch}-s{seq_len}" + ("" if n_layers == 12 else f"-L{n_layers}"), batch=batch,
             dtype_bytes=dtype_bytes, meta={"model": "bert_base", "seq_len": seq_len, "n_layers": n_layers})
    B, S, D = batch, seq_len, d_model
    ids = n.input("input_ids", (B, S), dtype_bytes=8, kind="index")
    tt = n.input("token_type_ids", (B, S), dtype_bytes=8, kind="index")
    pos = n.input("position_ids", (1, S), dtype_bytes=8, kind="index")
    we = n.op("embeddings.word", "Gather", [ids], (B, S, D), params=vocab * D)
    pe = n.op("embeddings.position", "Gather", [pos], (1, S, D), params=max_position * D)
    te = n.op("embeddings.token_type", "Gather", [tt], (B, S, D), params=2 * D)
    x = n.op("embeddings.add", "Add", [we, pe, te], (B, S, D), flops=2.0 * B * S * D)
    x = n.op("embeddings.ln", "LayerNormalization", [x], (B, S, D), params=2 * D)
    for L in range(n_layers):
        p = f"layer{L}"
        q = n.linear(f"{p}.q", x, D, op_type="MatMul")
        k = n.linear(f"{p}.k", x, D, op_type="MatMul")
        v = n.linear(f"{p}.v", x, D, op_type="MatMul")
        ctx = _attention(n, f"{p}.attn", q, k, v, heads, causal=False)
        a = n.linear(f"{p}.attn_out", ctx, D, op_type="MatMul")
        x = n.op(f"{p}.ln1", "LayerNormalization", [n.add(f"{p}.res1", a, x)], (B, S, D), params=2 * D)
        h = n.act(f"{p}.gelu", n.linear(f"{p}.ffn1", x, d_ff, op_type="MatMul"), "Gelu")
        h = n.linear(f"{p}.ffn2", h, D, op_type="MatMul")
        x = n.op(f"{p}.ln2", "LayerNormalization", [n.add(f"{p}.res2", h, x)], (B, S, D), params=2 * D)
    seq_out = x
    first = n.op("pooler.first_token", "Slice", [x], (B, D))
    pooled = n.act("pooler.tanh", n.linear("pooler.dense", first, D), "Tanh")
    return n.finish([seq_out, pooled], training=training,
                    source="Devlin et al., BERT, NAACL 2019 (BERT-base: L=12, H=768, A=12); HF bert-base-uncased config",
                    published={"params": 109_482_240,
                               "refs": "paper: 110M; HF bert-base-uncased BertModel: 109,482,240 parameters"})


def gpt2_small(*, batch: int = 1, seq_len: int = 1024, training: bool = False, dtype_bytes: int = 4,
               n_layers: int = 12, d_model: int = 768, heads: int = 12, vocab: int = 50257,
               n_ctx: int = 1024) -> OpGraph:
    """GPT-2 small (Radford et al. 2019): 12 pre-LN decoder layers, d=768, 12 heads, causal attention.

    The LM head is tied to the token embedding (``shares_weights_with="wte"``: it reads the same
    weights, counted once in ``params``). ``c_attn`` is one fused QKV ``MatMul`` followed by a
    ``Split`` whose outputs are views.

    >>> gpt2_small(seq_len=64).meta["params"]
    124439808
    """
    _check_size("seq_len", seq_len, 1)
    if seq_len > n_ctx:
        raise HetschedError(f"seq_len {seq_len} exceeds the context length {n_ctx}", field="seq_len")
    n = _Net(f"gpt2_small-b{batch}-s{seq_len}" + ("" if n_layers == 12 else f"-L{n_layers}"), batch=batch,
             dtype_bytes=dtype_bytes, meta={"model": "gpt2_small", "seq_len": seq_len, "n_layers": n_layers})
    B, S, D = batch, seq_len, d_model
    ids = n.input("input_ids", (B, S), dtype_bytes=8, kind="index")
    pos = n.input("position_ids", (1, S), dtype_bytes=8, kind="index")
    we = n.op("wte", "Gather", [ids], (B, S, D), params=vocab * D)
    pe = n.op("wpe", "Gather", [pos], (1, S, D), params=n_ctx * D)
    x = n.add("embed.add", we, pe)
    for L in range(n_layers):
        p = f"h{L}"
        h = n.op(f"{p}.ln_1", "LayerNormalization", [x], (B, S, D), params=2 * D)
        qkv = n.linear(f"{p}.c_attn", h, 3 * D, op_type="MatMul")
        q, k, v = n.multi(f"{p}.split", "Split", [qkv], [(B, S, D)] * 3, alias=qkv)
        ctx = _attention(n, f"{p}.attn", q, k, v, heads, causal=True)
        a = n.linear(f"{p}.attn.c_proj", ctx, D, op_type="MatMul")
        x = n.add(f"{p}.res1", x, a)
        h = n.op(f"{p}.ln_2", "LayerNormalization", [x], (B, S, D), params=2 * D)
        h = n.act(f"{p}.gelu", n.linear(f"{p}.mlp.c_fc", h, 4 * D, op_type="MatMul"), "Gelu")
        h = n.linear(f"{p}.mlp.c_proj", h, D, op_type="MatMul")
        x = n.add(f"{p}.res2", x, h)
    x = n.op("ln_f", "LayerNormalization", [x], (B, S, D), params=2 * D)
    logits = n.linear("lm_head", x, vocab, bias=False, op_type="MatMul", shared="wte")
    return n.finish(logits, training=training,
                    source="Radford et al., Language Models are Unsupervised Multitask Learners, 2019; HF gpt2 config",
                    published={"params": 124_439_808,
                               "refs": "HF gpt2 model card: 124M parameters; GPT2LMHeadModel (tied): 124,439,808"})


# ====================================================================== RandWire
def randwire_ws(*, batch: int = 1, image_size: int = 224, channels: int = 78, nodes: int = 32, k: int = 4,
                p: float = 0.75, seed: int = 0, num_classes: int = 1000, training: bool = False,
                dtype_bytes: int = 4) -> OpGraph:
    """RandWire-WS, small computation regime (Xie et al., ICCV 2019, table 1 and section 3).

    conv1 (3x3 conv, C/2, stride 2, BN) and conv2 (ReLU, 3x3 conv, C, stride 2, BN) are regular;
    conv3-conv5 are randomly wired stages of ``nodes`` nodes from Watts-Strogatz WS(N, K, P) (seeded,
    via networkx, made acyclic by node index) with C, 2C, 4C channels. A node aggregates its inputs by
    a weighted sum (``Add``; the learned sigmoid weights are N scalars) and transforms with
    ReLU, a 3x3 separable convolution (depthwise ``Conv`` + pointwise ``Conv``) and BatchNorm; nodes
    reading the stage input use stride 2; the stage output averages the graph's sink nodes.
    Classifier: 1x1 conv to 1280, global average pool, fully connected.

    Published (table 2, small regime, C=78): 583M FLOPs (multiply-adds), 5.6M params; the exact
    numbers vary with the random graph, see the tests for the tolerance.

    >>> g = randwire_ws(seed=1); g.validate(); 500e6 < g.meta["macs"] < 650e6
    True
    """
    import networkx as nx

    _check_size("image_size", image_size, 64)
    if not 0 <= p <= 1:
        raise HetschedError(f"p must be in [0, 1], got {p!r}", field="p")
    if not 0 < k < nodes:
        raise HetschedError(f"k ({k}) must be in (0, nodes={nodes})", field="k")
    n = _Net(f"randwire_ws-b{batch}-{image_size}-C{channels}-N{nodes}-s{seed}", batch=batch, dtype_bytes=dtype_bytes,
             meta={"model": "randwire_ws", "image_size": image_size, "channels": channels, "nodes": nodes, "k": k,
                   "p": p, "seed": seed})
    C = channels

    def sepconv(name, x, cout, stride):
        y = n.act(f"{name}.relu", x)
        cin = n.shape[y][1]
        y = n.conv(f"{name}.dw", y, cin, 3, stride=stride, pad=1, groups=cin)
        y = n.conv(f"{name}.pw", y, cout, 1)
        return n.bn(f"{name}.bn", y)

    x = n.input("image", (batch, 3, image_size, image_size))
    x = n.conv_bn("conv1", x, C // 2, 3, stride=2, pad=1, act=None)
    x = n.conv_bn("conv2", n.act("conv2.relu", x), C, 3, stride=2, pad=1, act=None)
    for si, (mult, stage) in enumerate(((1, "conv3"), (2, "conv4"), (4, "conv5"))):
        ws = nx.connected_watts_strogatz_graph(nodes, k, p, tries=100, seed=seed * 1000 + si)
        out_of: dict[int, str] = {}
        cout = C * mult
        for v in range(nodes):
            preds = sorted(u for u in ws.neighbors(v) if u < v)
            ins = [out_of[u] for u in preds] or [x]
            stride = 2 if not preds else 1
            if len(ins) > 1:
                s = n.shape[ins[0]]
                agg = n.op(f"{stage}.n{v}.agg", "Add", ins, s, flops=float(prod(s) * (2 * len(ins) - 1)),
                           params=len(ins), attrs={"note": "weighted sum, sigmoid(w) per input edge"})
            else:
                agg = ins[0]
            out_of[v] = sepconv(f"{stage}.n{v}", agg, cout, stride)
        sinks = [out_of[v] for v in range(nodes) if not any(w > v for w in ws.neighbors(v))]
        s = n.shape[sinks[0]]
        x = n.op(f"{stage}.output", "Mean" if len(sinks) > 1 else "Identity", sinks, s,
                 flops=float(prod(s) * len(sinks)) if len(sinks) > 1 else 0.0)
    x = n.conv_bn("classifier.conv", n.act("classifier.relu", x), 1280, 1, act="Relu")
    x = n.flatten("flatten", n.gap("avgpool", x))
    x = n.linear("fc", x, num_classes)
    return n.finish(x, training=training,
                    source="Xie et al., Exploring Randomly Wired Neural Networks for Image Recognition, ICCV 2019, "
                           "table 1 (small regime), section 3; WS graph from networkx",
                    published={"params": 5.6e6, "macs_per_sample": 583e6, "at": 224, "C": 78,
                               "refs": "paper table 2: RandWire-WS small, C=78: 583M FLOPs (mult-adds), 5.6M params"})


# ====================================================================== registry
def _mmmt(**kw: Any) -> OpGraph:
    from . import mmmt  # written by the mapping helper; imported lazily so the zoo works without it

    return mmmt.mmmt(**kw)


#: name -> builder; every builder accepts ``batch=`` and ``training=``.
ZOO: dict[str, Callable[..., OpGraph]] = {
    "resnet50": resnet50,
    "inception_v3": inception_v3,
    "mobilenet_v2": mobilenet_v2,
    "vgg16": vgg16,
    "bert_base": bert_base,
    "gpt2_small": gpt2_small,
    "randwire_ws": randwire_ws,
    "mmmt": _mmmt,
}


def build(name: str, **kwargs: Any) -> OpGraph:
    """Build a zoo model by name (``kwargs`` go to its builder).

    >>> build("mobilenet_v2", batch=2).meta["batch"]
    2
    >>> build("alexnet")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: unknown zoo model 'alexnet'; known: 'resnet50', 'inception_v3', ...
    """
    try:
        fn = ZOO[name]
    except KeyError:
        known = ", ".join(repr(k) for k in ZOO)
        raise HetschedError(f"unknown zoo model {name!r}; known: {known}", field="name") from None
    return fn(**kwargs)
