"""The corpus of real models the importer is checked on: torchvision, timm and transformers, built
by the libraries' own code with random weights and small configs (so the whole corpus imports in
seconds). Shared by ``tests/test_torch_corpus.py`` and ``bench/bench_io.py``.

Each entry: ``name -> (family, build)`` where ``build()`` returns ``(module, args, kwargs)``.
"""

from __future__ import annotations

from typing import Any, Callable

from hetsched.io import torch_models as tm

#: a small decoder: 2 layers, GQA (4 query heads, 2 KV heads), RoPE where the model type has it
_DEC = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
            vocab_size=512, max_position_embeddings=128)
_MOE = dict(_DEC, num_local_experts=4, num_experts_per_tok=2)
_ENC = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=512,
            max_position_embeddings=128)
_IMG = 64


def _hf(model_type: str, task: str | None = None, seq_len: int = 16, **cfg: Any) -> Callable:
    def build():
        m = tm.transformers_model(model_type, task=task, **cfg)
        args, kwargs = tm.example_inputs(m, seq_len=seq_len)
        return m, args, kwargs

    return build


def _tv(name: str, size: int = _IMG, **kw: Any) -> Callable:
    def build():
        import torch

        m = tm.torchvision_model(name, **kw)
        return m, (torch.randn(1, 3, size, size),), {}

    return build


def _timm(name: str, size: int = _IMG, **kw: Any) -> Callable:
    def build():
        m = tm.timm_model(name, **kw)
        args, kwargs = tm.example_inputs(m, image_size=size)
        return m, args, kwargs

    return build


CORPUS: dict[str, tuple[str, Callable]] = {
    # torchvision CNNs and transformers
    "tv_resnet18": ("cnn", _tv("resnet18")),
    "tv_mobilenet_v3_small": ("cnn", _tv("mobilenet_v3_small")),
    "tv_efficientnet_b0": ("cnn", _tv("efficientnet_b0")),
    "tv_squeezenet1_1": ("cnn", _tv("squeezenet1_1")),
    "tv_shufflenet_v2_x0_5": ("cnn", _tv("shufflenet_v2_x0_5")),
    "tv_densenet121": ("cnn", _tv("densenet121")),
    "tv_regnet_y_400mf": ("cnn", _tv("regnet_y_400mf")),
    "tv_convnext_tiny": ("cnn", _tv("convnext_tiny")),
    "tv_swin_t": ("vit", _tv("swin_t")),
    "tv_vit_b_32": ("vit", _tv("vit_b_32", image_size=_IMG)),  # nn.MultiheadAttention
    # timm
    "timm_vit_tiny": ("vit", _timm("vit_tiny_patch16_224", img_size=_IMG)),
    "timm_deit_tiny_distilled": ("vit", _timm("deit_tiny_distilled_patch16_224", img_size=_IMG)),
    "timm_convnext_atto": ("cnn", _timm("convnext_atto")),
    "timm_mobilenetv3_small_050": ("cnn", _timm("mobilenetv3_small_050")),
    "timm_ghostnet_100": ("cnn", _timm("ghostnet_100")),
    "timm_mixer_s16": ("vit", _timm("mixer_s16_224", img_size=_IMG)),
    "timm_resnet10t": ("cnn", _timm("resnet10t")),
    # transformers: encoder-only, decoder-only (GQA, RoPE), encoder-decoder, MoE, vision
    "hf_bert": ("encoder", _hf("bert", **_ENC)),
    "hf_albert": ("encoder", _hf("albert", embedding_size=32, **_ENC)),  # one layer's weights shared by all layers
    "hf_roberta": ("encoder", _hf("roberta", **dict(_ENC, max_position_embeddings=130))),
    "hf_gpt2": ("decoder", _hf("gpt2", n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=128)),
    "hf_llama": ("decoder", _hf("llama", **_DEC)),
    "hf_mistral": ("decoder", _hf("mistral", **_DEC)),
    "hf_qwen2": ("decoder", _hf("qwen2", **_DEC)),
    "hf_gemma": ("decoder", _hf("gemma", head_dim=16, **_DEC)),
    "hf_phi3": ("decoder", _hf("phi3", pad_token_id=0, **_DEC)),
    "hf_t5": ("encoder-decoder", _hf("t5", num_layers=2, d_model=64, d_kv=16, d_ff=128, num_heads=4, vocab_size=512)),
    "hf_bart": ("encoder-decoder", _hf("bart", encoder_layers=2, decoder_layers=2, d_model=64, encoder_attention_heads=4,
                                       decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                       vocab_size=512, max_position_embeddings=128)),
    "hf_mixtral": ("moe", _hf("mixtral", **_MOE)),
    "hf_qwen2_moe": ("moe", _hf("qwen2_moe", **dict(_DEC, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                                                    shared_expert_intermediate_size=64))),
    "hf_vit": ("vit", _hf("vit", image_size=32, patch_size=8, num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                          intermediate_size=128)),
}
