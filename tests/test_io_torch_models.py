"""What a user brings to load_torch: caches, non-tensor outputs, tied weights, buffers, meta-device
models, joint training programs, .pt2 files, mixtures of experts and their placement."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="optional extra: CI installs torch==2.13.0 (CPU)")
from hetsched.io.torch_models import import_torchvision  # noqa: E402

import_torchvision()
pytest.importorskip("transformers", reason="the test extra installs transformers")

from hetsched import moe  # noqa: E402
from hetsched.errors import FormatError, HetschedError  # noqa: E402
from hetsched.io import load_graph  # noqa: E402
from hetsched.io import torch_models as tm  # noqa: E402
from hetsched.io.resolve import resolve_system  # noqa: E402
from hetsched.io.torch_import import load_torch  # noqa: E402

nn = torch.nn
TINY = dict(num_hidden_layers=1, hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64,
            vocab_size=128)


def test_cache_on_by_default_still_imports():
    """A transformers model whose config says use_cache=True returns a DynamicCache: the import turns
    it off for the export (and puts the config back)."""
    m = tm.transformers_model("llama", use_cache=True, **TINY)
    assert m.config.use_cache is True
    args, kw = tm.example_inputs(m, seq_len=8)
    g = load_torch(m, args, kwargs=kw)
    assert m.config.use_cache is True and "use_cache" in g.meta["export_notes"]
    assert g.meta["params"] == sum(p.numel() for p in m.parameters())


def test_non_tensor_outputs_left_out():
    class Box:  # an object torch.export cannot return
        def __init__(self, t):
            self.t = t

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            y = self.fc(x)
            return y.relu(), Box(y), 3

    g = load_torch(M(), (torch.randn(2, 4),))
    assert g.graph_outputs() == ["relu"] and "outputs" in g.meta["export_notes"]


def test_tied_weights_one_weight_several_readers():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(10, 8)
            self.head = nn.Linear(8, 10, bias=False)
            self.head.weight = self.emb.weight
            self.register_buffer("scale", torch.ones(8))

        def forward(self, ids):
            return self.head(self.emb(ids) * self.scale)

    m = Tied()
    g = load_torch(m, (torch.randint(0, 10, (2, 3)),))
    emb, head = g.op("embedding"), g.op("linear")
    assert emb.weight_bytes == head.weight_bytes == 10 * 8 * 4  # both read the table (the cost models price it)
    assert head.attrs["shares_weights_with"] == "embedding" and head.attrs["shared_weight_bytes"] == 320
    assert g.meta["params"] == 80 and g.meta["param_bytes"] == 320 and g.meta["buffer_bytes"] == 32
    assert g.total_weight_bytes == g.meta["weight_bytes"] == 320 + 32
    assert g.meta["shared_weights"] == {"emb.weight": ["embedding", "linear"]}
    t = load_torch(m, (torch.randint(0, 10, (2, 3)),), training=True)
    assert t.meta["params"] == 80 and t.total_weight_bytes == 352


def test_dropped_ops_recorded_with_reason():
    m = tm.transformers_model("gpt2", n_layer=1, n_embd=32, n_head=4, vocab_size=64, n_positions=32)
    g = load_torch(m, kwargs=tm.example_inputs(m, seq_len=8)[1])
    d = g.meta["dropped_ops"]["_assert_tensor_metadata"]
    assert d["count"] >= 1 and "assertion" in d["reason"]
    assert not any(o.attrs["aten"].startswith("aten._assert") for o in g.ops.values())


def test_meta_model_imports_without_memory():
    """A model on the meta device (no storage) is traced with fake tensors, inference and training."""
    m = tm.transformers_model("llama", device="meta", **dict(TINY, num_hidden_layers=2))
    assert next(m.parameters()).device.type == "meta"
    args, kw = tm.example_inputs(m, seq_len=8)
    assert kw["input_ids"].device.type == "meta"
    g = load_torch(m, args, kwargs=kw)
    ref = load_torch(tm.transformers_model("llama", **dict(TINY, num_hidden_layers=2)), args,
                     kwargs={"input_ids": torch.zeros(1, 8, dtype=torch.long)})
    assert g.meta["params"] == ref.meta["params"] and g.meta["macs"] == ref.meta["macs"] and g.n_ops == ref.n_ops
    t = load_torch(m, args, kwargs={**kw, "labels": kw["input_ids"]}, training=True)
    assert t.meta["training"] and next(m.parameters()).device.type == "meta"  # the module is left as it was


def test_transformers_model_errors():
    with pytest.raises(HetschedError) as e:
        tm.transformers_model("no_such_model")
    assert e.value.field == "model_type"
    with pytest.raises(HetschedError) as e:
        tm.transformers_model("llama", not_a_field=3)
    assert e.value.field == "not_a_field"
    with pytest.raises(HetschedError) as e:
        tm.transformers_model("bert", task="seq2seq_lm")
    assert e.value.field == "task"
    with pytest.raises(HetschedError):
        tm.transformers_model("llama", device="cuda")


def test_config_object_and_tasks():
    import transformers

    cfg = transformers.T5Config(num_layers=1, d_model=32, d_kv=8, d_ff=64, num_heads=4, vocab_size=64)
    m = tm.transformers_model(cfg)
    assert type(m).__name__ == "T5ForConditionalGeneration"
    _, kw = tm.example_inputs(m, seq_len=8)
    assert sorted(kw) == ["decoder_input_ids", "input_ids"] and kw["decoder_input_ids"].shape == (1, 4)
    assert type(tm.transformers_model("bert", task="base", **{k: v for k, v in TINY.items() if k != "num_key_value_heads"})
                ).__name__ == "BertModel"


def test_overrides_go_through_the_config_constructor():
    """Overrides build the model they describe: fields a config derives from others (a Llama's
    head_dim, a T5's decoder depth) follow them; set afterwards they kept the defaults' values."""
    import transformers

    m = tm.transformers_model("llama", num_hidden_layers=1, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                              intermediate_size=96, vocab_size=100)
    assert m.config.head_dim == 16 and m.model.layers[0].self_attn.q_proj.weight.shape == (64, 64)
    t = tm.transformers_model("t5", num_layers=2, d_model=32, d_kv=8, d_ff=64, num_heads=4, vocab_size=64)
    assert len(t.encoder.block) == len(t.decoder.block) == 2
    # a config object: what it set stays, what it derived follows the overrides
    cfg = transformers.AutoConfig.for_model("llama", hidden_size=64, num_attention_heads=4, num_hidden_layers=1,
                                            intermediate_size=96, vocab_size=100)
    assert tm.transformers_model(cfg, hidden_size=128).config.head_dim == 32
    cfg.head_dim = 8
    assert tm.transformers_model(cfg, num_hidden_layers=2).config.head_dim == 8
    with pytest.raises(HetschedError) as e:
        tm.transformers_model("llama", hidden_size=100, num_attention_heads=12)  # not a multiple: the library says so
    assert e.value.field == "hidden_size"


def test_example_inputs_of_a_speech_model():
    import transformers

    cfg = transformers.AutoConfig.for_model("whisper", d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                            decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=100,
                                            num_mel_bins=8, max_source_positions=8, max_target_positions=16,
                                            pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    m = tm.transformers_model(cfg, task="base")
    _, kw = tm.example_inputs(m, seq_len=8)
    assert kw["input_features"].shape == (1, 8, 16) and kw["decoder_input_ids"].shape == (1, 4)
    g = load_torch(m, kwargs=kw)
    assert g.n_ops > 10


def test_pt2_joint_training_program(tmp_path):
    from torch.export.experimental import _export_forward_backward

    from hetsched.io.torch_import import with_loss

    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    ep = _export_forward_backward(torch.export.export(with_loss(m, None), (torch.randn(3, 4),)))
    torch.export.save(ep, tmp_path / "joint.pt2")
    g = load_graph(tmp_path / "joint.pt2")
    direct = load_torch(m, (torch.randn(3, 4),), training=True)
    assert g.meta["training"] and g.name == "joint" and g.meta["params"] == 58
    assert g.n_ops == direct.n_ops and g.total_flops == direct.total_flops
    assert {o.attrs["phase"] for o in g.ops.values()} == {"forward", "backward"}
    with pytest.raises(FormatError) as e:
        load_graph(tmp_path / "joint.pt2", bogus=1)
    assert e.value.field == "bogus"


def _mixtral(**kw):
    m = tm.transformers_model("mixtral", **dict(TINY, num_local_experts=4, num_experts_per_tok=2, **kw))
    return m, tm.example_inputs(m, seq_len=16)[1]


def test_moe_flops_of_the_experts_that_run():
    m, kw = _mixtral()
    g = load_torch(m, kwargs=kw)
    grouped = [o for o in g.ops.values() if o.op_type == "GroupedMatMul"]
    assert len(grouped) == 2 and all(o.attrs["n_experts"] == 4 and o.attrs["k"] == 2 for o in grouped)
    up = grouped[0]  # tokens x k rows, each times its own expert's (2I x H) weights: k of E experts
    assert up.attrs["macs"] == 16 * 2 * (2 * 64) * 32
    assert up.weight_bytes == 4 * 2 * 64 * 32 * 4  # the weights of all E experts
    sel = next(o for o in g.ops.values() if o.op_type == "TopK")
    assert sel.attrs["moe"] == "select" and sel.attrs["k"] == 2
    router = next(o for o in g.ops.values() if o.attrs.get("moe") == "router")
    assert router.op_type == "Gemm" and router.weight_bytes == 4 * 32 * 4


def test_expert_graph_and_placement():
    m, kw = _mixtral(num_hidden_layers=2)
    g = load_torch(m, kwargs=kw)
    layers = moe.moe_layers(g)
    assert [L.n_experts for L in layers] == [4, 4] and all(L.top_k == 2 for L in layers)
    eg = moe.expert_graph(g)
    experts = [o for o in eg.ops.values() if o.op_type == "Expert"]
    assert len(experts) == 8
    assert eg.total_flops == pytest.approx(g.total_flops) and eg.total_weight_bytes == g.total_weight_bytes
    region = sum(g.op(o).flops for o in layers[0].region)
    assert [o.flops for o in experts[:4]] == pytest.approx([region / 4] * 4)
    skewed = moe.expert_graph(g, [0.7, 0.1, 0.1, 0.1])
    assert skewed.op("moe0.expert0").flops == pytest.approx(0.7 * region)
    assert skewed.tensor("moe0.tokens@0").size_bytes > skewed.tensor("moe0.tokens@1").size_bytes
    with pytest.raises(HetschedError) as e:
        moe.expert_graph(g, [0.5, 0.5])
    assert e.value.field == "shares"
    with pytest.raises(HetschedError):
        moe.expert_graph(g, [0.5, 0.5, 0.5, -0.5])
    s = resolve_system("gpu_tpu")
    r = moe.place_experts(g, s, method="heft", skew=1.0)
    tab = moe.expert_assignment(r)
    assert len(tab) == 8 and set(tab.device) <= set(s.devices) and np.isclose(tab.share.sum(), 2.0)
    assert r.metrics["makespan_s"] > 0 and len(r.steps) > 0
    with pytest.raises(HetschedError):
        moe.place_experts(g, s, method="nope")
    with pytest.raises(HetschedError):
        moe.expert_graph(load_torch(nn.Linear(2, 2), (torch.randn(1, 2),)))


def test_torchvision_import_tolerates_missing_c_ops():
    tv = import_torchvision()
    assert tv is not None and hasattr(tv.models, "resnet18")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = load_torch(tm.torchvision_model("squeezenet1_1"), (torch.randn(1, 3, 32, 32),))
    assert g.meta["params"] == 1_235_496  # torchvision's published count


def test_graph_panel_uploads_pt2(tmp_path):
    """The Graph panel's upload takes a .pt2 archive (the loading is the core's load_graph); a damaged
    one is shown as an error and the panel keeps its graph."""
    pytest.importorskip("ipywidgets")
    import io

    from hetsched.widgets import GraphPanel

    buf = io.BytesIO()
    torch.export.save(torch.export.export(nn.Sequential(nn.Linear(4, 4), nn.ReLU()), (torch.randn(2, 4),)), buf)
    p = GraphPanel()
    p.upload_bytes(buf.getvalue(), "mlp.pt2")
    assert p.message.value == "" and [o.op_type for o in p.result.ops.values()] == ["Gemm", "Relu"]
    p.upload_bytes(buf.getvalue()[:100], "cut.pt2")
    assert "hetsched-error" in p.message.value and p.result.n_ops == 2


def test_pt2_of_a_transformers_model_in_a_fresh_process(tmp_path):
    """A saved transformers program names its output class (a ModelOutput pytree): a fresh process
    that never imported transformers still loads it, and the tied parameters (two tensors sharing
    storage after loading) are one weight."""
    import subprocess
    import sys

    m = tm.transformers_model("gpt2", n_layer=1, n_embd=32, n_head=4, vocab_size=64, n_positions=32)
    torch.export.save(torch.export.export(m, (), kwargs=tm.example_inputs(m, seq_len=8)[1]), tmp_path / "gpt2.pt2")
    code = ("import warnings; warnings.simplefilter('ignore'); from hetsched.io import load_graph; "
            f"g = load_graph({str(tmp_path / 'gpt2.pt2')!r}); print(g.meta['params'], g.total_weight_bytes)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    n = sum(p.numel() for p in m.parameters())
    assert r.stdout.split()[-2:] == [str(n), str(4 * n)]


def test_batched_experts_formulation_is_a_moe_too():
    """transformers' batched_mm experts gather each token's expert matrices (weight[expert_ids]) and
    multiply batch by batch: the same FLOPs, and the same MoE layers to place."""
    m, kw = _mixtral()
    grouped = load_torch(m, kwargs=kw)
    m.set_experts_implementation("batched_mm")
    g = load_torch(m, kwargs=kw)
    assert not any(o.op_type == "GroupedMatMul" for o in g.ops.values())
    assert g.meta["moe"]["layers"] == 1 and g.meta["moe"]["experts"] == 4 and g.meta["moe"]["top_k"] == 2
    assert g.meta["macs"] == grouped.meta["macs"] and g.meta["params"] == grouped.meta["params"]
    kinds = {o.attrs.get("moe") for o in g.ops.values()}
    assert {"router", "select", "experts", "expert_weights"} <= kinds
    eg = moe.expert_graph(g)
    experts = [o for o in eg.ops.values() if o.op_type == "Expert"]
    assert len(experts) == 4 and all(o.weight_bytes == 2 * 64 * 32 * 4 + 32 * 64 * 4 for o in experts)
    assert eg.total_flops == pytest.approx(g.total_flops)


def test_torchvision_builders_download_nothing_and_build_on_meta(tmp_path, monkeypatch):
    """A segmentation model's backbone gets random weights too (its builder's default downloaded
    ImageNet weights); a builder that computes while it builds (RegNet) still gives a meta model."""
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    m = tm.torchvision_model("lraspp_mobilenet_v3_large")
    assert sum(p.numel() for p in m.parameters()) > 0 and not any(tmp_path.iterdir())
    r = tm.torchvision_model("regnet_x_400mf", device="meta")
    assert all(p.is_meta for p in r.parameters())


def test_grid_sample_and_meshgrid_are_typed():
    """RAFT's ops: ``grid_sampler`` (what export leaves of ``F.grid_sample``) and ``meshgrid``."""
    import torch.nn.functional as F

    class Flow(torch.nn.Module):
        def forward(self, x):
            ys, xs = torch.meshgrid(torch.linspace(-1, 1, 4), torch.linspace(-1, 1, 4), indexing="ij")
            grid = torch.stack([xs, ys], -1).unsqueeze(0)
            return F.grid_sample(x, grid, align_corners=False)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an unknown op would warn
        g = load_torch(Flow().eval(), (torch.randn(1, 2, 4, 4),))
    assert "unknown_op_types" not in g.meta
    assert "Resize" in {o.op_type for o in g.ops.values()}
