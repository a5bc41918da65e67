"""Multi-modal multi-task (MMMT) models in the style of H2H's benchmark.

H2H (Zhang et al., "H2H: Heterogeneous Model to Heterogeneous System Mapping with Computation and
Communication Awareness", DAC 2022) maps *heterogeneous models*: several backbones, one per input
modality, whose features fuse and feed several task heads. These builders compose such models at
layer granularity (one op per convolution with its batch-norm and ReLU folded in, as accelerators
run them; one op per fully-connected layer, attention matmul, pooling, residual add, concat), with
every layer shape taken from the backbone's original paper:

* ResNet-18 / ResNet-34 style stages — He, Zhang, Ren & Sun, "Deep Residual Learning for Image
  Recognition", CVPR 2016, Table 1 (7x7/2 stem with 64 channels, 3x3 max-pool, stages of 64, 128,
  256, 512 channels with two 3x3 convs per basic block, 1x1/2 projection shortcuts).
* VGGish — Hershey et al., "CNN Architectures for Large-Scale Audio Classification", ICASSP 2017:
  96x64 log-mel patch, conv 64, pool, conv 128, pool, conv 256 x2, pool, conv 512 x2, pool,
  FC 4096, FC 4096, FC 128 embedding.
* BERT-base encoder layers — Devlin et al., "BERT", NAACL 2019: hidden 768, 12 heads, FFN 3072,
  here 128 tokens.
* CASIA-SURF fusion — Zhang et al., "A Dataset and Benchmark for Large-scale Multi-modal Face
  Anti-spoofing", CVPR 2019: three ResNet-18 streams (RGB, depth, IR) at 112x112, squeeze-and-excitation
  re-weighting of each stream's res3 features (Hu et al., CVPR 2018, reduction 16), concatenation,
  a shared res4 stage and a 2-way classifier.
* PointNet — Qi et al., "PointNet", CVPR 2017: shared MLP 64, 64, 64, 128, 1024 over N points,
  max-pool (the LiDAR branch of the driving model).

FLOPs count 2 per multiply-accumulate; tensors and weights are fp32 (4 bytes) unless ``dtype_bytes``
says otherwise. ``training=True`` appends a backward pass (each op's ``<type>_grad`` twin with twice
its FLOPs, reading the saved activations and the incoming gradient; Rumelhart et al. 1986).

>>> g = mmmt("av_emotion"); g.validate(); g.meta["modalities"]
['video', 'audio']
>>> sorted(MMMT_MODELS)
['av_emotion', 'casia_surf', 'driving_mt', 'vqa_mt']
>>> mmmt("casia_surf", training=True).n_ops > 2 * mmmt("casia_surf").n_ops - 1
True
"""

from __future__ import annotations

from typing import Callable

from ..errors import HetschedError
from ..graph import OpGraph

__all__ = ["mmmt", "MMMT_MODELS"]


class _B:
    """A tiny layer-level graph builder (shapes are (channels, height, width) or (tokens, dim))."""

    def __init__(self, g: OpGraph, batch: int, dtype_bytes: int) -> None:
        self.g, self.B, self.db = g, batch, dtype_bytes

    def _op(self, name: str, typ: str, ins: list[str], out_elems: int, flops: float, weight_elems: int = 0,
            **attrs) -> str:
        g = self.g
        g.add_op(name, typ, flops=float(flops), weight_bytes=int(weight_elems * self.db), attrs=attrs)
        for t in ins:
            g.add_consumer(t, name)
        out = f"{name}:out"
        g.add_tensor(out, int(self.B * out_elems * self.db), producer=name, attrs={"elems": out_elems})
        return out

    def input(self, name: str, elems: int, modality: str) -> str:
        self.g.add_tensor(name, int(self.B * elems * self.db), attrs={"modality": modality})
        return name

    def conv(self, name, x, cin, cout, hw_out, k, *, modality, groups=1):
        h, w = hw_out
        macs = self.B * cout * h * w * (cin // groups) * k * k
        return self._op(name, "Conv", [x], cout * h * w, 2 * macs, cout * (cin // groups) * k * k + 2 * cout,
                        modality=modality, kernel=k, cin=cin, cout=cout, out_hw=[h, w])

    def pool(self, name, x, c, hw_out, k, *, modality, typ="MaxPool"):
        h, w = hw_out
        return self._op(name, typ, [x], c * h * w, self.B * c * h * w * k * k, modality=modality)

    def gap(self, name, x, c, hw_in, *, modality):
        return self._op(name, "GlobalAveragePool", [x], c, self.B * c * hw_in[0] * hw_in[1], modality=modality)

    def add(self, name, xs, elems, *, modality):
        return self._op(name, "Add", xs, elems, self.B * elems * (len(xs) - 1), modality=modality)

    def fc(self, name, x, din, dout, *, modality, tokens=1, typ="Gemm"):
        return self._op(name, typ, [x], tokens * dout, 2 * self.B * tokens * din * dout, din * dout + dout,
                        modality=modality, din=din, dout=dout)

    def ew(self, name, typ, xs, elems, *, modality, flops_per=1):
        return self._op(name, typ, xs, elems, self.B * elems * flops_per, modality=modality)

    def concat(self, name, xs, elems, *, modality="fusion"):
        return self._op(name, "Concat", xs, elems, 0.0, modality=modality)


def _resnet_basic(b: _B, p: str, x: str, *, modality: str, hw: int, stages=(64, 128, 256, 512), blocks=(2, 2, 2, 2),
                  cin: int = 3, upto: int | None = None, start_stage: int = 0, start_c: int | None = None,
                  start_hw: int | None = None) -> tuple[str, int, int]:
    """ResNet basic-block stages (He et al. 2016, Table 1). Returns (tensor, channels, spatial size)."""
    if start_stage == 0:
        s = hw // 2
        x = b.conv(f"{p}conv1", x, cin, 64, (s, s), 7, modality=modality)
        s //= 2
        x = b.pool(f"{p}pool1", x, 64, (s, s), 3, modality=modality)
        c = 64
    else:
        c, s = start_c, start_hw
    last = len(stages) if upto is None else upto
    for si in range(start_stage, last):
        cout = stages[si]
        for bi in range(blocks[si]):
            down = si > 0 and bi == 0
            so = s // 2 if down else s
            q = f"{p}res{si + 2}{chr(97 + bi)}."
            y = b.conv(q + "conv_a", x, c, cout, (so, so), 3, modality=modality)
            y = b.conv(q + "conv_b", y, cout, cout, (so, so), 3, modality=modality)
            sc = b.conv(q + "proj", x, c, cout, (so, so), 1, modality=modality) if (down or c != cout) else x
            x = b.add(q + "add", [y, sc], cout * so * so, modality=modality)
            c, s = cout, so
    return x, c, s


def _vggish(b: _B, p: str, x: str) -> str:
    """VGGish (Hershey et al. 2017) on one 96x64 log-mel patch -> 128-d embedding."""
    m = "audio"
    h, w = 96, 64
    x = b.conv(f"{p}conv1", x, 1, 64, (h, w), 3, modality=m)
    h, w = h // 2, w // 2
    x = b.pool(f"{p}pool1", x, 64, (h, w), 2, modality=m)
    x = b.conv(f"{p}conv2", x, 64, 128, (h, w), 3, modality=m)
    h, w = h // 2, w // 2
    x = b.pool(f"{p}pool2", x, 128, (h, w), 2, modality=m)
    x = b.conv(f"{p}conv3_1", x, 128, 256, (h, w), 3, modality=m)
    x = b.conv(f"{p}conv3_2", x, 256, 256, (h, w), 3, modality=m)
    h, w = h // 2, w // 2
    x = b.pool(f"{p}pool3", x, 256, (h, w), 2, modality=m)
    x = b.conv(f"{p}conv4_1", x, 256, 512, (h, w), 3, modality=m)
    x = b.conv(f"{p}conv4_2", x, 512, 512, (h, w), 3, modality=m)
    h, w = h // 2, w // 2
    x = b.pool(f"{p}pool4", x, 512, (h, w), 2, modality=m)
    x = b.fc(f"{p}fc1", x, 512 * h * w, 4096, modality=m)
    x = b.fc(f"{p}fc2", x, 4096, 4096, modality=m)
    return b.fc(f"{p}embed", x, 4096, 128, modality=m)


def _bert_layers(b: _B, p: str, x: str, n_layers: int, *, seq: int = 128, d: int = 768, heads: int = 12,
                 ff: int = 3072) -> str:
    """BERT-base encoder layers (Devlin et al. 2019), post-LN as in the paper."""
    m = "text"
    dh = d // heads
    for L in range(n_layers):
        q = f"{p}l{L}."
        qq = b.fc(q + "query", x, d, d, modality=m, tokens=seq, typ="MatMul")
        kk = b.fc(q + "key", x, d, d, modality=m, tokens=seq, typ="MatMul")
        vv = b.fc(q + "value", x, d, d, modality=m, tokens=seq, typ="MatMul")
        sc = b._op(q + "scores", "MatMul", [qq, kk], heads * seq * seq, 2 * b.B * heads * seq * seq * dh, modality=m)
        sm = b.ew(q + "softmax", "Softmax", [sc], heads * seq * seq, modality=m, flops_per=5)
        ctx = b._op(q + "context", "MatMul", [sm, vv], seq * d, 2 * b.B * heads * seq * seq * dh, modality=m)
        o = b.fc(q + "attn_out", ctx, d, d, modality=m, tokens=seq, typ="MatMul")
        r = b.add(q + "attn_res", [x, o], seq * d, modality=m)
        ln = b._op(q + "attn_ln", "LayerNormalization", [r], seq * d, 5 * b.B * seq * d, 2 * d, modality=m)
        f1 = b.fc(q + "ffn1", ln, d, ff, modality=m, tokens=seq, typ="MatMul")
        ge = b.ew(q + "gelu", "Gelu", [f1], seq * ff, modality=m, flops_per=8)
        f2 = b.fc(q + "ffn2", ge, ff, d, modality=m, tokens=seq, typ="MatMul")
        r2 = b.add(q + "ffn_res", [ln, f2], seq * d, modality=m)
        x = b._op(q + "ffn_ln", "LayerNormalization", [r2], seq * d, 5 * b.B * seq * d, 2 * d, modality=m)
    return x


def _pointnet(b: _B, p: str, x: str, n_points: int = 4096) -> str:
    """PointNet shared MLP (Qi et al. 2017): 3 -> 64 -> 64 -> 64 -> 128 -> 1024, then max over points."""
    m = "lidar"
    dims = [3, 64, 64, 64, 128, 1024]
    for i in range(1, len(dims)):
        x = b.fc(f"{p}mlp{i}", x, dims[i - 1], dims[i], modality=m, tokens=n_points, typ="MatMul")
    return b._op(f"{p}maxpool", "ReduceMax", [x], 1024, b.B * n_points * 1024, modality=m)


def _av_emotion(b: _B) -> list[str]:
    """Audio-visual emotion: ResNet-18 on a 224x224 face frame + VGGish on the audio; two task heads."""
    img = b.input("frame", 3 * 224 * 224, "video")
    aud = b.input("logmel", 96 * 64, "audio")
    v, c, s = _resnet_basic(b, "vid.", img, modality="video", hw=224)
    v = b.gap("vid.gap", v, c, (s, s), modality="video")
    a = _vggish(b, "aud.", aud)
    f = b.concat("fuse.concat", [v, a], c + 128)
    f = b.fc("fuse.fc", f, c + 128, 256, modality="fusion")
    f = b.ew("fuse.relu", "Relu", [f], 256, modality="fusion")
    emo = b.fc("head.emotion", f, 256, 7, modality="task")  # 7 basic emotions
    val = b.fc("head.valence", f, 256, 2, modality="task")  # valence / arousal regression
    return [emo, val]


def _casia_surf(b: _B) -> list[str]:
    """CASIA-SURF multi-modal anti-spoofing (Zhang et al. 2019): RGB, depth, IR ResNet-18 streams to res3."""
    feats = []
    for m, cin in (("rgb", 3), ("depth", 1), ("ir", 1)):
        x = b.input(f"{m}_face", cin * 112 * 112, m)
        y, c, s = _resnet_basic(b, f"{m}.", x, modality=m, hw=112, cin=cin, upto=3)
        # squeeze-and-excitation re-weighting (Hu et al. 2018, reduction 16)
        z = b.gap(f"{m}.se_squeeze", y, c, (s, s), modality=m)
        z = b.fc(f"{m}.se_fc1", z, c, c // 16, modality=m)
        z = b.fc(f"{m}.se_fc2", z, c // 16, c, modality=m)
        z = b.ew(f"{m}.se_sigmoid", "Sigmoid", [z], c, modality=m)
        y = b.ew(f"{m}.se_scale", "Mul", [y, z], c * s * s, modality=m)
        feats.append((y, c, s))
    c3, s3 = feats[0][1], feats[0][2]
    x = b.concat("fuse.concat", [f[0] for f in feats], 3 * c3 * s3 * s3)
    x, c, s = _resnet_basic(b, "fuse.", x, modality="fusion", hw=0, start_stage=3, start_c=3 * c3, start_hw=s3)
    x = b.gap("fuse.gap", x, c, (s, s), modality="fusion")
    live = b.fc("head.liveness", x, c, 2, modality="task")
    return [live]


def _vqa_mt(b: _B) -> list[str]:
    """Vision-and-language multi-task: ResNet-34 image stream + 2 BERT-base layers; VQA + image-text matching."""
    img = b.input("image", 3 * 224 * 224, "image")
    txt = b.input("tokens_emb", 128 * 768, "text")
    v, c, s = _resnet_basic(b, "img.", img, modality="image", hw=224, blocks=(3, 4, 6, 3))
    v = b.gap("img.gap", v, c, (s, s), modality="image")
    v = b.fc("img.proj", v, c, 768, modality="image")
    t = _bert_layers(b, "txt.", txt, 2)
    cls = b._op("txt.cls", "Gather", [t], 768, 0.0, modality="text")
    f = b.ew("fuse.mul", "Mul", [v, cls], 768, modality="fusion")  # element-wise fusion (Antol et al. 2015)
    f = b.fc("fuse.fc", f, 768, 1024, modality="fusion")
    f = b.ew("fuse.relu", "Relu", [f], 1024, modality="fusion")
    ans = b.fc("head.vqa", f, 1024, 3129, modality="task")  # VQA v2 answer vocabulary (Goyal et al. 2017)
    itm = b.fc("head.match", f, 1024, 2, modality="task")
    return [ans, itm]


def _driving_mt(b: _B) -> list[str]:
    """Driving perception: camera ResNet-18 + LiDAR PointNet; fused for steering, speed and scene class."""
    cam = b.input("camera", 3 * 224 * 224, "camera")
    pts = b.input("points", 4096 * 3, "lidar")
    v, c, s = _resnet_basic(b, "cam.", cam, modality="camera", hw=224)
    v = b.gap("cam.gap", v, c, (s, s), modality="camera")
    p = _pointnet(b, "lidar.", pts)
    f = b.concat("fuse.concat", [v, p], c + 1024)
    f = b.fc("fuse.fc1", f, c + 1024, 512, modality="fusion")
    f = b.ew("fuse.relu", "Relu", [f], 512, modality="fusion")
    return [b.fc("head.steer", f, 512, 1, modality="task"), b.fc("head.speed", f, 512, 1, modality="task"),
            b.fc("head.scene", f, 512, 10, modality="task")]


MMMT_MODELS: dict[str, tuple[Callable[[_B], list[str]], list[str], str]] = {
    "av_emotion": (_av_emotion, ["video", "audio"], "ResNet-18 (He 2016) + VGGish (Hershey 2017)"),
    "casia_surf": (_casia_surf, ["rgb", "depth", "ir"], "CASIA-SURF (Zhang 2019): 3x ResNet-18 + SE fusion"),
    "vqa_mt": (_vqa_mt, ["image", "text"], "ResNet-34 (He 2016) + BERT-base x2 (Devlin 2019)"),
    "driving_mt": (_driving_mt, ["camera", "lidar"], "ResNet-18 (He 2016) + PointNet (Qi 2017)"),
}


def _add_backward(g: OpGraph) -> None:
    fwd = g.topological_order()
    grad_of: dict[str, str] = {}
    for t in g.graph_outputs():
        grad_of[t] = f"{t}.grad"
        g.add_tensor(grad_of[t], g.tensor(t).size_bytes, attrs={"kind": "gradient"})
    for o in reversed(fwd):
        op = g.op(o)
        outs = [t for t in g.outputs_of(o) if t in grad_of]
        if not outs:
            continue
        name = f"{o}.bwd"
        g.add_op(name, f"{op.op_type}_grad", flops=2 * op.flops, weight_bytes=op.weight_bytes,
                 attrs={**dict(op.attrs), "forward": o})
        for t in outs:
            g.add_consumer(grad_of[t], name)
        for t in g.inputs_of(o):
            if not t.endswith(".grad"):
                g.add_consumer(t, name)  # saved activation
        made = False
        for t in g.inputs_of(o):
            if t.endswith(".grad") or g.tensor(t).producer is None:
                continue
            gt = f"{t}.grad@{o}"
            g.add_tensor(gt, g.tensor(t).size_bytes, producer=name, attrs={"kind": "gradient"})
            made = True
            # several readers of one activation: their gradients are summed by the producer's backward op
            grad_of.setdefault(t, gt)
            if grad_of[t] != gt:
                s_name = f"{t}.gradsum@{o}"
                g.add_op(s_name, "Add", flops=g.tensor(t).size_bytes / 4, attrs={"forward": o})
                g.add_consumer(grad_of[t], s_name)
                g.add_consumer(gt, s_name)
                grad_of[t] = f"{s_name}:out"
                g.add_tensor(grad_of[t], g.tensor(t).size_bytes, producer=s_name, attrs={"kind": "gradient"})
        if not made:  # first layers: the weight gradient leaves for the optimizer on the host
            g.add_tensor(f"{name}:wgrad", max(op.weight_bytes, 4), producer=name, is_output=True,
                         attrs={"kind": "gradient"})
    for t in g.tensors.values():
        if t.producer is not None and not t.consumers and not t.is_output:
            g.set_tensor(t.name, is_output=True)


def mmmt(name: str = "av_emotion", *, batch: int = 1, training: bool = False, dtype_bytes: int = 4) -> OpGraph:
    """Build one multi-modal multi-task model (see :data:`MMMT_MODELS`).

    Parameters
    ----------
    name : str
        ``av_emotion``, ``casia_surf``, ``vqa_mt`` or ``driving_mt``.
    batch : int
    training : bool
        Append the backward pass.
    dtype_bytes : int

    >>> g = mmmt("driving_mt", batch=2); g.meta["batch"], g.n_ops > 20
    (2, True)
    """
    if name not in MMMT_MODELS:
        raise HetschedError(f"unknown MMMT model {name!r}; choose from {sorted(MMMT_MODELS)}", field="name")
    if batch < 1 or dtype_bytes < 1:
        raise HetschedError(f"batch and dtype_bytes must be >= 1, got {batch}, {dtype_bytes}", field="batch")
    build, modalities, source = MMMT_MODELS[name]
    g = OpGraph(f"mmmt_{name}" + ("_train" if training else "") + (f"_b{batch}" if batch != 1 else ""),
                meta={"generator": "mmmt", "model": name, "modalities": modalities, "batch": batch,
                      "training": training, "source": source,
                      "style": "H2H multi-modal multi-task benchmark (Zhang et al., DAC 2022)"})
    b = _B(g, batch, dtype_bytes)
    for t in build(b):
        g.set_tensor(t, is_output=True)
    if training:
        _add_backward(g)
    g.validate()
    return g
