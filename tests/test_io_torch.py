"""PyTorch import via torch.export: every number on a small module, and differential checks against
the zoo (a torch ResNet-50 and a torch GPT-2 give the zoo's parameters, MACs and FLOPs exactly)."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

from hetsched.errors import FormatError

# torch is an optional extra; `make venv` installs its CPU build, so these run (a .venv without it skips them loudly).
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from hetsched.io import zoo  # noqa: E402
from hetsched.io.torch_import import load_torch  # noqa: E402


def test_module_imports_without_torch():
    code = "import sys; sys.modules['torch'] = None; import hetsched.io.torch_import as m; print(m.__name__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "hetsched.io.torch_import"


class Small(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 4)
        self.register_buffer("k", torch.ones(1))

    def forward(self, x):
        y = torch.relu(self.bn(self.c(x)))
        y = F.max_pool2d(y, 2)
        y = y.mean((2, 3))
        a, b = y.split(4, 1)
        return self.fc(y) + self.k, a * b


def test_small_module_every_number():
    g = load_torch(Small().eval(), (torch.randn(2, 3, 8, 8),))
    types = {n: o.op_type for n, o in g.ops.items()}
    assert types == {"conv2d": "Conv", "batch_norm": "BatchNormalization", "relu": "Relu", "max_pool2d": "MaxPool",
                     "mean": "ReduceMean", "split": "Split", "linear": "Gemm", "add": "Add", "mul": "Mul"}
    assert g.op("conv2d").attrs["aten"] == "aten.conv2d.default"
    # tensor sizes from fake-tensor metadata
    assert g.tensor("x").size_bytes == 2 * 3 * 8 * 8 * 4 and g.graph_inputs() == ["x"]
    assert g.tensor("conv2d").size_bytes == 2 * 8 * 8 * 8 * 4 and g.tensor("conv2d").attrs["shape"] == [2, 8, 8, 8]
    assert g.tensor("max_pool2d").attrs["shape"] == [2, 8, 4, 4]
    assert g.tensor("mean").size_bytes == 2 * 8 * 4
    # the split's two outputs are views; getitem is not an op: mul reads the split outputs directly
    assert g.tensor("split:0").alias_of == "mean" and g.tensor("split:1").size_bytes == 2 * 4 * 4
    assert g.inputs_of("mul") == ["split:0", "split:1"]
    assert sorted(g.tensor("mean").consumers) == ["linear", "split"]
    # weights: parameters and buffers on the ops that read them
    assert g.op("conv2d").weight_bytes == (8 * 3 * 9 + 8) * 4
    assert g.op("batch_norm").weight_bytes == 4 * 8 * 4  # gamma, beta, running mean and var
    assert g.op("linear").weight_bytes == (8 * 4 + 4) * 4
    assert g.op("add").weight_bytes == 4  # the buffer k
    # flops (MAC = 2)
    n = 2 * 8 * 8 * 8
    assert g.op("conv2d").flops == 2 * n * 27 + n and g.op("conv2d").attrs["macs"] == n * 27
    assert g.op("batch_norm").flops == 2 * n
    assert g.op("relu").flops == n
    assert g.op("max_pool2d").flops == 2 * 8 * 4 * 4 * 4
    assert g.op("mean").flops == 2 * 8 * 16
    assert g.op("split").flops == 0
    assert g.op("linear").flops == 2 * 2 * 8 * 4 + 8
    assert g.op("add").flops == 8 and g.op("mul").flops == 8
    assert g.graph_outputs() == ["add", "mul"]
    # params = module.parameters() (buffers excluded)
    assert g.meta["params"] == sum(p.numel() for p in Small().parameters()) == 224 + 16 + 36
    assert g.meta["macs"] == n * 27 + 64
    assert g.meta["torch_version"] == torch.__version__


def test_exported_program_accepted():
    ep = torch.export.export(nn.Linear(4, 2), (torch.randn(3, 4),))
    g = load_torch(ep, name="lin")
    assert g.name == "lin" and g.op("linear").flops == 2 * 3 * 2 * 4 + 6 and g.meta["params"] == 10


def test_weight_views_stay_weights():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.zeros(5, 4))

        def forward(self, x):
            return x @ self.w.t()

    g = load_torch(M(), (torch.randn(3, 4),))
    assert list(g.ops) == ["matmul"]  # the transpose of the weight is folded into the weight
    assert g.op("matmul").weight_bytes == 80 and g.op("matmul").flops == 2 * 3 * 5 * 4


def test_unknown_aten_ops_one_warning():
    """An op no rule knows still imports, loudly: one warning lists them, the ops keep their place
    with flops=0 and the namespace in the type (``aten.``, or a custom library's)."""
    @torch.library.custom_op("hs_test::mystery", mutates_args=())
    def mystery(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    mystery.register_fake(lambda x: torch.empty_like(x))

    class M(nn.Module):
        def forward(self, x):
            return torch.relu(torch.ops.hs_test.mystery(torch.kthvalue(x, 2, 0).values))

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        g = load_torch(M(), (torch.randn(3, 4),))
    msgs = [str(x.message) for x in w if "FLOP rule" in str(x.message)]
    assert len(msgs) == 1 and "aten.kthvalue" in msgs[0] and "hs_test.mystery" in msgs[0]
    assert g.op("kthvalue").op_type == "aten.kthvalue" and g.op("kthvalue").flops == 0
    assert g.op("relu").flops == 4
    assert g.meta["unknown_op_types"] == ["aten.kthvalue", "hs_test.mystery"]


def test_export_failure_is_format_error():
    class Bad(nn.Module):
        def forward(self, x):
            if x.sum().item() > 0:  # data-dependent control flow: torch.export refuses it
                return x + 1
            return x - 1

    with pytest.raises(FormatError) as e:
        load_torch(Bad(), (torch.randn(3),))
    assert "Bad" in str(e.value) and e.value.field == "module"


# ---------------------------------------------------------------- differential: zoo vs torch
def ResNet50():
    """torchvision's resnet50 layout, written out in plain torch (torchvision is not a dependency)."""
    from hetsched.io.torch_zoo import torch_model

    return torch_model("resnet50")[0]


def test_resnet50_torch_equals_zoo():
    m = ResNet50().eval()
    assert sum(p.numel() for p in m.parameters()) == 25_557_032  # torchvision's published count
    g = load_torch(m, (torch.randn(1, 3, 224, 224),))
    z = zoo.resnet50()
    assert g.meta["params"] == z.meta["params"] == 25_557_032
    assert g.meta["macs"] == z.meta["macs"]
    assert g.total_flops == z.total_flops
    count = lambda gr: sorted((o.op_type for o in gr.ops.values() if o.op_type not in ("Flatten", "Reshape")))  # noqa: E731
    assert count(g) == count(z)
    # activations: the same multiset of tensor sizes
    assert sorted(t.size_bytes for t in g.tensors.values()) == sorted(t.size_bytes for t in z.tensors.values())


class GPT2(nn.Module):
    """HF GPT-2 layout (pre-LN, fused c_attn, tied LM head) with scaled_dot_product_attention."""

    def __init__(self, n_layers=2, d=768, h=12, vocab=50257, n_ctx=1024):
        super().__init__()
        self.h = h
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(n_ctx, d)
        self.blocks = nn.ModuleList()
        for _ in range(n_layers):
            self.blocks.append(nn.ModuleDict(dict(
                ln_1=nn.LayerNorm(d), c_attn=nn.Linear(d, 3 * d), c_proj=nn.Linear(d, d),
                ln_2=nn.LayerNorm(d), c_fc=nn.Linear(d, 4 * d), mlp_proj=nn.Linear(4 * d, d))))
        self.ln_f = nn.LayerNorm(d)

    def forward(self, ids, pos):
        x = self.wte(ids) + self.wpe(pos)
        B, S, D = x.shape
        for blk in self.blocks:
            q, k, v = blk["c_attn"](blk["ln_1"](x)).split(D, dim=2)
            q, k, v = (t.view(B, S, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, S, D)
            x = x + blk["c_proj"](a)
            x = x + blk["mlp_proj"](F.gelu(blk["c_fc"](blk["ln_2"](x))))
        return F.linear(self.ln_f(x), self.wte.weight)


def test_gpt2_torch_equals_zoo():
    S, L = 32, 2
    m = GPT2(n_layers=L).eval()
    g = load_torch(m, (torch.zeros(1, S, dtype=torch.long), torch.arange(S).unsqueeze(0)))
    z = zoo.gpt2_small(seq_len=S, n_layers=L)
    assert g.meta["params"] == z.meta["params"] == sum(p.numel() for p in m.parameters())
    assert g.meta["macs"] == z.meta["macs"]
    assert g.op("linear_8").weight_bytes == z.op("lm_head").weight_bytes  # the tied head reads wte
    assert g.tensor("linear_8").size_bytes == z.tensor("lm_head:out").size_bytes
    att = [o for o in g.ops.values() if o.op_type == "Attention"]
    assert len(att) == L and att[0].attrs["macs"] == 2 * 12 * S * S * 64


def test_gpt2_full_size_params():
    # 12 layers: the published 124,439,808 (HF gpt2), through torch's own parameter count too
    m = GPT2(n_layers=12)
    assert sum(p.numel() for p in m.parameters()) == zoo.gpt2_small().meta["params"] == 124_439_808


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=6)
@given(widths=st.lists(st.integers(1, 32), min_size=2, max_size=4), batch=st.integers(1, 8), bias=st.booleans())
def test_random_mlp_property(widths, batch, bias):
    """Random MLPs: params equal torch's numel, MACs and FLOPs follow the Gemm formula."""
    layers = []
    for a, b in zip(widths, widths[1:]):
        layers += [nn.Linear(a, b, bias=bias), nn.ReLU()]
    m = nn.Sequential(*layers)
    g = load_torch(m, (torch.randn(batch, widths[0]),))
    assert g.meta["params"] == sum(p.numel() for p in m.parameters())
    pairs = list(zip(widths, widths[1:]))
    assert g.meta["macs"] == sum(batch * a * b for a, b in pairs)
    assert g.total_flops == sum(2 * batch * a * b + (batch * b if bias else 0) + batch * b for a, b in pairs)
    assert [t.size_bytes for t in g.tensors.values()][1:] == [4 * batch * b for _, b in pairs for _ in (0, 1)]


def test_inplace_ops_do_their_work():
    """``relu_``/``add_`` write their input's storage (an alias), but they read and write it: priced
    as the work they do, not as a view's launch (the residual adds and in-place activations of
    MobileNetV3 were predicted at a third of their time)."""
    from hetsched.cost import RooflineCost
    from hetsched.io.systems import toy_system

    class M(nn.Module):
        def forward(self, x, y):
            z = x * 2.0
            z.relu_()
            z += y
            return z.view(-1)

    g = load_torch(M().eval(), (torch.randn(64, 64), torch.randn(64, 64)))
    inplace = {n for n, o in g.ops.items() if o.attrs.get("inplace")}
    assert {g.op(n).op_type for n in inplace} == {"Relu", "Add"}
    assert all(g.tensor(g.outputs_of(n)[0]).alias_of is not None for n in inplace)  # memory: no new buffer
    view = next(n for n, o in g.ops.items() if o.op_type == "Reshape")
    assert not g.op(view).attrs.get("inplace")
    b = RooflineCost(toy_system(), g)
    n = 64 * 64 * 4
    # what each touches: relu_ its one input (read and written back), add_ its two inputs; an
    # out-of-place op also its new output
    moved = {g.op(op).op_type: b.traffic_bytes(op) for op in inplace}
    assert moved == {"Relu": (float(n), False), "Add": (2.0 * n, False)}
    mul = next(n_ for n_, o in g.ops.items() if o.op_type == "Mul")
    assert b.traffic_bytes(mul) == (2.0 * n, False)
    assert b.traffic_bytes(view) == (0.0, True)


def test_depthwise_convolutions_record_groups_and_kernel():
    """A depthwise convolution and its backward record ``groups`` and ``kernel``: a 5x5 one is
    priced by a curve of its own (torch's CPU backward of a depthwise 5x5 runs 2-6x below a 3x3's
    at the same work), a dense one records neither."""
    from hetsched.cost import curve_type
    from hetsched.io.train_step import training_step

    m = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Conv2d(8, 8, 5, padding=2, groups=8),
                      nn.Conv2d(8, 4, 1))
    x = torch.randn(2, 8, 10, 10)
    g = load_torch(m.eval(), (x,))
    convs = [o for o in g.ops.values() if o.op_type == "Conv"]
    assert [o.attrs.get("groups") for o in convs] == [8, 8, None]
    assert [o.attrs.get("kernel") for o in convs] == [[3, 3], [5, 5], None]
    assert [curve_type(o) for o in convs] == ["DepthwiseConv", "DepthwiseConvWide", "Conv"]
    step = training_step(m.train(), (x,), optimizer="sgd")
    grads = sorted(curve_type(o) for o in step.graph.ops.values() if o.op_type == "Conv_grad")
    assert grads == ["Conv_grad", "DepthwiseConvWide_grad", "DepthwiseConv_grad"]


def test_writes_through_a_view_order_the_readers_of_the_base():
    """``m[:2, :2] = 1`` writes ``m`` through a view (``slice``, ``fill_``) and a later ``x + m`` reads
    ``m``: a 0-byte ``order`` tensor runs the read after the write (HEFT ran Swin's attention-mask
    reads before the ``fill_`` ops that build it); and an in-place write runs after the earlier
    readers of what it overwrites."""
    import networkx as nx

    class Mask(nn.Module):
        def forward(self, x):
            m = x.new_zeros(4, 4)
            m[:2, :2] = 1.0
            return x + m

    g = load_torch(Mask().eval(), (torch.randn(4, 4),))
    fill = next(n for n, o in g.ops.items() if str(o.attrs["aten"]).startswith("aten.fill_"))
    add = next(n for n, o in g.ops.items() if o.op_type == "Add")
    order = [t for t in g.tensors.values() if t.attrs.get("kind") == "order"]
    assert [(t.producer, t.consumers, t.size_bytes) for t in order] == [(fill, (add,), 0)]
    assert nx.has_path(g.nx, fill, add) and g.meta["write_order_edges"] == 1

    class Overwrite(nn.Module):
        def forward(self, x):
            y = x * 2.0
            a = y + 1.0     # reads y before ...
            y.add_(3.0)     # ... this overwrites it
            return a * y

    g = load_torch(Overwrite().eval(), (torch.randn(8),))
    write = next(n for n, o in g.ops.items() if o.attrs.get("inplace"))
    read = next(n for n, o in g.ops.items() if o.op_type == "Add" and not o.attrs.get("inplace"))
    assert nx.has_path(g.nx, read, write)
    # a program without writes through views gets no order tensors
    plain = load_torch(nn.Sequential(nn.Linear(4, 4), nn.ReLU(inplace=True), nn.Linear(4, 2)).eval(), (torch.randn(2, 4),))
    assert "write_order_edges" not in plain.meta


def test_a_pt2_archive_keeps_views_and_in_place_ops_as_aliases(tmp_path):
    """A program loaded from ``.pt2`` has fake tensors that no longer share storage: its aliases come
    from the ATen schemas, so its views and in-place ops are still no new memory (they were all
    taken for copies: +80% activation bytes on Swin-T)."""
    from hetsched.io import load_graph

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.fc = nn.Conv2d(3, 4, 3), nn.Linear(4 * 6 * 6, 2)

        def forward(self, x):
            y = torch.relu_(self.conv(x))
            y += 1.0
            return self.fc(y.flatten(1))

    ep = torch.export.export(M().eval(), (torch.randn(1, 3, 8, 8),))
    torch.export.save(ep, tmp_path / "m.pt2")
    mem, disk = load_torch(ep, name="m"), load_graph(tmp_path / "m.pt2")
    aliases = {t: x.alias_of for t, x in mem.tensors.items()}
    assert sum(a is not None for a in aliases.values()) >= 3  # relu_, add_, flatten
    assert {t: x.alias_of for t, x in disk.tensors.items()} == aliases
    assert not [n for n, o in disk.ops.items() if o.attrs.get("copies")]
