"""Plain-PyTorch twins of the zoo models (no torchvision or transformers needed).

:mod:`hetsched.io.zoo` builds OpGraphs straight from published layer shapes; this module builds the
same architectures as ``torch.nn.Module`` objects, so they can be *run*: exported with
:func:`~hetsched.io.torch_import.load_torch`, profiled with ``torch.profiler`` and timed by
:func:`hetsched.calibrate`. The layouts copy torchvision's (ResNet-50, VGG-16, MobileNetV2,
Inception-v3 without the auxiliary classifier) and Hugging Face's (BERT-base, GPT-2 small), so the
parameter counts equal the zoo's (``tests/test_torch_zoo.py`` checks them, and the importer's
MACs against the zoo's).

Attention is written out (``Q K^T``, softmax, ``P V``) as the zoo models it, rather than fused into
``scaled_dot_product_attention``; dropout layers are left out (identity at inference, as the zoo).

torch is imported inside the functions: this module imports without it.

>>> import torch
>>> m, x = torch_model("resnet50", batch=1, image_size=64)
>>> sum(p.numel() for p in m.parameters())
25557032
>>> sorted(TORCH_ZOO)
['bert_base', 'gpt2_small', 'inception_v3', 'mobilenet_v2', 'resnet50', 'vgg16']
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..errors import HetschedError

__all__ = ["TORCH_ZOO", "torch_model"]


def _nn():
    import torch
    from torch import nn

    return torch, nn


def _resnet50(batch: int = 1, image_size: int = 224, num_classes: int = 1000):
    torch, nn = _nn()
    F = torch.nn.functional

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.conv3, self.bn3 = nn.Conv2d(width, width * 4, 1, bias=False), nn.BatchNorm2d(width * 4)
            self.downsample = None
            if stride != 1 or cin != width * 4:
                self.downsample = nn.Sequential(nn.Conv2d(cin, width * 4, 1, stride, bias=False),
                                                nn.BatchNorm2d(width * 4))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = torch.relu(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return torch.relu(y + (self.downsample(x) if self.downsample is not None else x))

    class ResNet50(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
            blocks, cin = [], 64
            for i, (n, w) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
                for b in range(n):
                    blocks.append(Bottleneck(cin, w, 2 if (b == 0 and i > 0) else 1))
                    cin = w * 4
            self.layers = nn.Sequential(*blocks)
            self.fc = nn.Linear(2048, num_classes)

        def forward(self, x):
            x = F.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 3, 2, 1)
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.layers(x), 1), 1))

    return ResNet50(), (torch.randn(batch, 3, image_size, image_size),)


def _vgg16(batch: int = 1, image_size: int = 224, num_classes: int = 1000):
    torch, nn = _nn()
    F = torch.nn.functional
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]

    class VGG16(nn.Module):
        def __init__(self):
            super().__init__()
            layers, cin = [], 3
            for c in cfg:
                if c == "M":
                    layers.append(nn.MaxPool2d(2, 2))
                else:
                    layers += [nn.Conv2d(cin, c, 3, padding=1), nn.ReLU()]
                    cin = c
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Sequential(nn.Linear(512 * 49, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                                            nn.Linear(4096, num_classes))

        def forward(self, x):
            x = self.features(x)
            if x.shape[-1] != 7:  # torchvision's adaptive pool; identity at 224
                x = F.adaptive_avg_pool2d(x, 7)
            return self.classifier(torch.flatten(x, 1))

    return VGG16(), (torch.randn(batch, 3, image_size, image_size),)


def _mobilenet_v2(batch: int = 1, image_size: int = 224, num_classes: int = 1000):
    torch, nn = _nn()
    F = torch.nn.functional

    def cbr(cin, cout, k, stride=1, groups=1, act=True):
        layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, *([nn.ReLU6()] if act else []))

    class Inverted(nn.Module):
        def __init__(self, cin, cout, stride, t):
            super().__init__()
            hidden = cin * t
            self.res = stride == 1 and cin == cout
            self.body = nn.Sequential(*([cbr(cin, hidden, 1)] if t != 1 else []), cbr(hidden, hidden, 3, stride, hidden),
                                      cbr(hidden, cout, 1, act=False))

        def forward(self, x):
            return x + self.body(x) if self.res else self.body(x)

    class MobileNetV2(nn.Module):
        def __init__(self):
            super().__init__()
            layers, cin = [cbr(3, 32, 3, 2)], 32
            for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                               (6, 160, 3, 2), (6, 320, 1, 1)]:
                for r in range(n):
                    layers.append(Inverted(cin, c, s if r == 0 else 1, t))
                    cin = c
            layers.append(cbr(cin, 1280, 1))
            self.features = nn.Sequential(*layers)
            self.classifier = nn.Linear(1280, num_classes)

        def forward(self, x):
            return self.classifier(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))

    return MobileNetV2(), (torch.randn(batch, 3, image_size, image_size),)


def _inception_v3(batch: int = 1, image_size: int = 299, num_classes: int = 1000):
    torch, nn = _nn()
    F = torch.nn.functional

    class C(nn.Module):  # torchvision's BasicConv2d: conv (no bias) + BN (eps 1e-3) + ReLU
        def __init__(self, cin, cout, k, stride=1, pad=0):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(cin, cout, k, stride, pad, bias=False), nn.BatchNorm2d(cout, eps=1e-3)

        def forward(self, x):
            return torch.relu(self.bn(self.conv(x)))

    class A(nn.Module):
        def __init__(self, cin, pool):
            super().__init__()
            self.b1 = C(cin, 64, 1)
            self.b5 = nn.Sequential(C(cin, 48, 1), C(48, 64, 5, pad=2))
            self.b3 = nn.Sequential(C(cin, 64, 1), C(64, 96, 3, pad=1), C(96, 96, 3, pad=1))
            self.bp = C(cin, pool, 1)

        def forward(self, x):
            return torch.cat([self.b1(x), self.b5(x), self.b3(x), self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)

    class B(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.b3 = C(cin, 384, 3, 2)
            self.bd = nn.Sequential(C(cin, 64, 1), C(64, 96, 3, pad=1), C(96, 96, 3, 2))

        def forward(self, x):
            return torch.cat([self.b3(x), self.bd(x), F.max_pool2d(x, 3, 2)], 1)

    class Cc(nn.Module):
        def __init__(self, cin, c7):
            super().__init__()
            self.b1 = C(cin, 192, 1)
            self.b7 = nn.Sequential(C(cin, c7, 1), C(c7, c7, (1, 7), pad=(0, 3)), C(c7, 192, (7, 1), pad=(3, 0)))
            self.bd = nn.Sequential(C(cin, c7, 1), C(c7, c7, (7, 1), pad=(3, 0)), C(c7, c7, (1, 7), pad=(0, 3)),
                                    C(c7, c7, (7, 1), pad=(3, 0)), C(c7, 192, (1, 7), pad=(0, 3)))
            self.bp = C(cin, 192, 1)

        def forward(self, x):
            return torch.cat([self.b1(x), self.b7(x), self.bd(x), self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)

    class D(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.b3 = nn.Sequential(C(cin, 192, 1), C(192, 320, 3, 2))
            self.b7 = nn.Sequential(C(cin, 192, 1), C(192, 192, (1, 7), pad=(0, 3)), C(192, 192, (7, 1), pad=(3, 0)),
                                    C(192, 192, 3, 2))

        def forward(self, x):
            return torch.cat([self.b3(x), self.b7(x), F.max_pool2d(x, 3, 2)], 1)

    class E(nn.Module):
        def __init__(self, cin):
            super().__init__()
            self.b1 = C(cin, 320, 1)
            self.b3_1, self.b3_2a, self.b3_2b = C(cin, 384, 1), C(384, 384, (1, 3), pad=(0, 1)), C(384, 384, (3, 1), pad=(1, 0))
            self.bd_1, self.bd_2 = C(cin, 448, 1), C(448, 384, 3, pad=1)
            self.bd_3a, self.bd_3b = C(384, 384, (1, 3), pad=(0, 1)), C(384, 384, (3, 1), pad=(1, 0))
            self.bp = C(cin, 192, 1)

        def forward(self, x):
            b3 = self.b3_1(x)
            b3 = torch.cat([self.b3_2a(b3), self.b3_2b(b3)], 1)
            bd = self.bd_2(self.bd_1(x))
            bd = torch.cat([self.bd_3a(bd), self.bd_3b(bd)], 1)
            return torch.cat([self.b1(x), b3, bd, self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)

    class InceptionV3(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem1 = nn.Sequential(C(3, 32, 3, 2), C(32, 32, 3), C(32, 64, 3, pad=1))
            self.stem2 = nn.Sequential(C(64, 80, 1), C(80, 192, 3))
            self.mixed = nn.Sequential(A(192, 32), A(256, 64), A(288, 64), B(288), Cc(768, 128), Cc(768, 160),
                                       Cc(768, 160), Cc(768, 192), D(768), E(1280), E(2048))
            self.fc = nn.Linear(2048, num_classes)

        def forward(self, x):
            x = F.max_pool2d(self.stem1(x), 3, 2)
            x = F.max_pool2d(self.stem2(x), 3, 2)
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.mixed(x), 1), 1))

    return InceptionV3(), (torch.randn(batch, 3, image_size, image_size),)


def _attention(torch, q, k, v, heads: int, causal: bool):
    B, S, D = q.shape
    q, k, v = (t.view(B, S, heads, D // heads).transpose(1, 2) for t in (q, k, v))
    scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(D // heads)
    if causal:
        mask = torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, -1), v).transpose(1, 2).reshape(B, S, D)


def _bert_base(batch: int = 1, seq_len: int = 128, n_layers: int = 12, d_model: int = 768, heads: int = 12,
               d_ff: int = 3072, vocab: int = 30522, max_position: int = 512):
    torch, nn = _nn()
    F = torch.nn.functional
    D = d_model

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.attn_out = (nn.Linear(D, D) for _ in range(4))
            self.ln1, self.ln2 = nn.LayerNorm(D, eps=1e-12), nn.LayerNorm(D, eps=1e-12)
            self.ffn1, self.ffn2 = nn.Linear(D, d_ff), nn.Linear(d_ff, D)

        def forward(self, x):
            a = self.attn_out(_attention(torch, self.q(x), self.k(x), self.v(x), heads, causal=False))
            x = self.ln1(a + x)
            return self.ln2(self.ffn2(F.gelu(self.ffn1(x))) + x)

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            self.word, self.position, self.token_type = nn.Embedding(vocab, D), nn.Embedding(max_position, D), nn.Embedding(2, D)
            self.ln = nn.LayerNorm(D, eps=1e-12)
            self.layers = nn.ModuleList(Layer() for _ in range(n_layers))
            self.pooler = nn.Linear(D, D)

        def forward(self, input_ids, token_type_ids, position_ids):
            x = self.ln(self.word(input_ids) + self.position(position_ids) + self.token_type(token_type_ids))
            for layer in self.layers:
                x = layer(x)
            return x, torch.tanh(self.pooler(x[:, 0]))

    if seq_len > max_position:
        raise HetschedError(f"seq_len {seq_len} exceeds max_position {max_position}", field="seq_len")
    ids = torch.randint(0, vocab, (batch, seq_len))
    return Bert(), (ids, torch.zeros_like(ids), torch.arange(seq_len).unsqueeze(0))


def _gpt2_small(batch: int = 1, seq_len: int = 1024, n_layers: int = 12, d_model: int = 768, heads: int = 12,
                vocab: int = 50257, n_ctx: int = 1024):
    torch, nn = _nn()
    F = torch.nn.functional
    D = d_model

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(D), nn.LayerNorm(D)
            self.c_attn, self.c_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.c_fc, self.mlp_proj = nn.Linear(D, 4 * D), nn.Linear(4 * D, D)

        def forward(self, x):
            q, k, v = self.c_attn(self.ln_1(x)).split(D, dim=2)
            x = x + self.c_proj(_attention(torch, q, k, v, heads, causal=True))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, D), nn.Embedding(n_ctx, D)
            self.h = nn.ModuleList(Block() for _ in range(n_layers))
            self.ln_f = nn.LayerNorm(D)

        def forward(self, input_ids, position_ids):
            x = self.wte(input_ids) + self.wpe(position_ids)
            for blk in self.h:
                x = blk(x)
            return F.linear(self.ln_f(x), self.wte.weight)  # the LM head is tied to the token embedding

    if seq_len > n_ctx:
        raise HetschedError(f"seq_len {seq_len} exceeds the context length {n_ctx}", field="seq_len")
    return GPT2(), (torch.randint(0, vocab, (batch, seq_len)), torch.arange(seq_len).unsqueeze(0))


#: zoo name -> builder ``(batch=..., <size options>) -> (module, example_inputs)``.
TORCH_ZOO: dict[str, Callable[..., tuple[Any, tuple]]] = {
    "resnet50": _resnet50,
    "vgg16": _vgg16,
    "mobilenet_v2": _mobilenet_v2,
    "inception_v3": _inception_v3,
    "bert_base": _bert_base,
    "gpt2_small": _gpt2_small,
}


def torch_model(name: str, *, batch: int = 1, seed: int = 0, **options: Any) -> tuple[Any, tuple]:
    """The torch twin of zoo model ``name`` in eval mode, and example inputs of batch ``batch``.

    ``options`` are the builder's size options (``image_size``, ``seq_len``, ``n_layers``...).
    Weights are initialised from ``seed`` (timings do not depend on their values).

    >>> torch_model("alexnet")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: no torch twin of zoo model 'alexnet'; known: bert_base, gpt2_small, inception_v3, mobilenet_v2, resnet50, vgg16
    """
    fn = TORCH_ZOO.get(name)
    if fn is None:
        raise HetschedError(f"no torch twin of zoo model {name!r}; known: {', '.join(sorted(TORCH_ZOO))}", field="name")
    if not isinstance(batch, int) or batch < 1:
        raise HetschedError(f"batch must be a positive integer, got {batch!r}", field="batch")
    import inspect

    from ..optional import require

    torch = require("torch", "a zoo model's torch twin")
    bad = sorted(set(options) - set(inspect.signature(fn).parameters))
    if bad:
        raise HetschedError(f"zoo model {name!r} has no option {bad[0]!r}", field=bad[0])
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        m, x = fn(batch=batch, **options)
    return m.eval(), x
