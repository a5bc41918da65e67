"""Models from torchvision, timm and transformers, built offline with random (or no) weights.

What a user brings to :func:`~hetsched.io.torch_import.load_torch` is usually a model of one of
these three libraries. This module builds them the way the libraries' own code does, with no hub
access at run time (``HF_HUB_OFFLINE=1``: a transformers model comes from a config object or a
``model_type`` and overrides, never from a downloaded checkpoint), and with ``device="meta"`` a
model of any size takes no memory: a Llama-3-8B-shaped model is built in a fraction of a second
and :func:`load_torch` traces it with fake tensors.

* :func:`import_torchvision`: PyPI's torchvision wheel carries C ops built for the CUDA build of
  torch; beside torch's CPU wheel they fail to load, and torchvision's import then dies while
  registering fake kernels for ops that do not exist (``RuntimeError: operator torchvision::nms
  does not exist``). transformers and timm import torchvision when it is installed, so the same
  error breaks them too. This function imports torchvision with those registrations skipped (the
  models never call the C ops: they are detection ops such as ``nms`` and ``roi_align``) and
  says which were skipped; every other error is raised as it is.
* :func:`transformers_model`, :func:`torchvision_model`, :func:`timm_model` build a model;
  :func:`example_inputs` gives inputs of the right kind for it (token ids, images, decoder ids).

torch and the three libraries are imported inside the functions: this module imports without them.

>>> m = transformers_model("llama", num_hidden_layers=1, hidden_size=32, num_attention_heads=4,
...                        num_key_value_heads=2, intermediate_size=64, vocab_size=100)
>>> type(m).__name__, m.config.use_cache
('LlamaForCausalLM', False)
>>> args, kwargs = example_inputs(m, seq_len=8)
>>> sorted(kwargs), tuple(kwargs["input_ids"].shape)
(['input_ids'], (1, 8))
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Mapping

from ..errors import HetschedError

from .torch_import import import_torchvision  # noqa: F401  (it lives with the importer, which needs it too)

__all__ = ["import_torchvision", "transformers_model", "torchvision_model", "timm_model", "example_inputs",
           "TASKS", "MIXTRAL_MINI", "mixtral_mini", "write_bundled_moe"]

#: Task name -> the transformers auto class that builds it.
TASKS: Mapping[str, str] = {
    "causal_lm": "AutoModelForCausalLM",
    "seq2seq_lm": "AutoModelForSeq2SeqLM",
    "masked_lm": "AutoModelForMaskedLM",
    "sequence_classification": "AutoModelForSequenceClassification",
    "image_classification": "AutoModelForImageClassification",
    "base": "AutoModel",
}



def _offline() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import_torchvision()  # before transformers: its model modules import torchvision


def _device_ctx(device: str):
    import contextlib

    import torch

    if device not in ("cpu", "meta"):
        raise HetschedError(f"device must be 'cpu' or 'meta', got {device!r}", field="device")
    return torch.device("meta") if device == "meta" else contextlib.nullcontext()


def transformers_model(config: Any, *, task: str | None = None, device: str = "cpu", seed: int = 0,
                       dtype: Any = None, use_cache: bool = False, **overrides: Any):
    """A transformers model from a config object or a ``model_type`` and overrides, offline.

    Parameters
    ----------
    config : transformers.PretrainedConfig or str
        A config, or a ``model_type`` (``"llama"``, ``"gpt2"``, ``"t5"``, ``"mixtral"``...) whose
        default config the overrides change.
    task : str, optional
        A key of :data:`TASKS`; default: a sequence-to-sequence LM where the library has one for this
        model type (an encoder-decoder: T5, BART), else a causal LM, a masked LM, an image classifier,
        else the base model.
    device : {"cpu", "meta"}
        ``"meta"`` builds without memory (shapes only): any size, for :func:`load_torch`.
    seed : int
        Seed of the random weights (``"cpu"``).
    dtype : torch.dtype, optional
        Parameter dtype (default float32).
    use_cache : bool
        Key/value caches are an inference-server concern; off by default so the traced program
        returns tensors only.
    **overrides
        Config fields (``num_hidden_layers=2``, ``hidden_size=64``...).

    Raises
    ------
    HetschedError
        An unknown model type or task, a field the config does not have.
    """
    _offline()
    from ..optional import require

    torch = require("torch", "a transformers model")
    transformers = require("transformers", "a transformers model")
    if isinstance(config, str):
        try:
            cfg = transformers.AutoConfig.for_model(config)
        except (ValueError, KeyError) as e:
            raise HetschedError(f"unknown transformers model type {config!r}: {e}", field="model_type") from None
    else:
        cfg = config.__class__.from_dict(config.to_dict())
    for k in overrides:
        if not hasattr(cfg, k) and k not in cfg.attribute_map:
            raise HetschedError(f"{type(cfg).__name__} has no field {k!r}", field=k)
    if overrides:
        # through the config's constructor, which derives fields from others: set afterwards, a
        # Llama's head_dim stayed hidden_size / heads of the default (128 at hidden 768 with 12
        # heads) and a T5's decoder kept 6 layers under num_layers=2
        try:
            cfg = (transformers.AutoConfig.for_model(config, **overrides) if isinstance(config, str)
                   else config.__class__(**{**_set_fields(config), **overrides}))
        except Exception as e:  # noqa: BLE001 - the library's validators raise their own types
            raise HetschedError(f"{type(cfg).__name__} refuses {overrides}: {_first(e)}", field=next(iter(overrides))) from None
    if hasattr(cfg, "use_cache"):
        cfg.use_cache = use_cache
    auto = _pick_task(cfg, task)
    torch.manual_seed(seed)
    kw = {"dtype": dtype} if dtype is not None else {}
    with _device_ctx(device):
        m = getattr(transformers, TASKS[auto]).from_config(cfg, **kw)
    return m.eval()


def _first(e: BaseException) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def _set_fields(config: Any) -> dict[str, Any]:
    """The fields of ``config`` its constructor would not derive by itself from the others (what a
    user set): rebuilt with overrides, the derived ones (``head_dim``...) follow the overrides."""
    base = config.to_diff_dict()
    base.pop("transformers_version", None)
    kept = {}
    for k, v in base.items():
        try:
            probe = config.__class__(**{kk: vv for kk, vv in base.items() if kk != k})
        except Exception:  # noqa: BLE001 - the others alone are no valid config: k is needed as set
            probe = None
        if probe is None or getattr(probe, k, None) != v:
            kept[k] = v
    return kept


def _pick_task(cfg: Any, task: str | None) -> str:
    from transformers.models.auto import modeling_auto as ma

    names = {"causal_lm": ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, "seq2seq_lm": ma.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES,
             "masked_lm": ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES,
             "sequence_classification": ma.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
             "image_classification": ma.MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES, "base": ma.MODEL_MAPPING_NAMES}
    if task is not None:
        if task not in TASKS:
            raise HetschedError(f"unknown task {task!r}: one of {', '.join(TASKS)}", field="task")
        if cfg.model_type not in names[task]:
            raise HetschedError(f"transformers has no {task} model for {cfg.model_type!r}", field="task")
        return task
    for t in ("seq2seq_lm", "causal_lm", "masked_lm", "image_classification", "base"):
        if cfg.model_type in names[t]:
            return t
    raise HetschedError(f"transformers has no model class for {cfg.model_type!r}", field="model_type")


def torchvision_model(name: str, *, device: str = "cpu", seed: int = 0, **kwargs: Any):
    """A torchvision classification model by name (``resnet50``, ``vit_b_16``...), random weights.

    >>> import_torchvision() is None or torchvision_model("squeezenet1_1").__class__.__name__ == "SqueezeNet"
    True
    """
    tv = import_torchvision()
    if tv is None:
        from ..optional import install_hint, require

        require("torch", "a torchvision model")
        raise HetschedError(f"a torchvision model needs torchvision, which is not installed: {install_hint('torchvision')}",
                            field="torchvision")
    import torch

    try:
        ctor = tv.models.get_model_builder(name)
    except ValueError:
        raise HetschedError(f"unknown torchvision model {name!r}", field="model") from None
    import inspect

    if "weights_backbone" in inspect.signature(ctor).parameters:
        # a segmentation or detection model: random weights for its backbone too (no download)
        kwargs = {"weights_backbone": None, **kwargs}
    torch.manual_seed(seed)
    try:
        with _device_ctx(device):
            return ctor(weights=None, **kwargs).eval()
    except NotImplementedError:
        if device != "meta":
            raise
    # a builder that computes with its tensors while it builds (RegNet's widths): built on the CPU,
    # then moved to the meta device
    torch.manual_seed(seed)
    return ctor(weights=None, **kwargs).eval().to("meta")


def timm_model(name: str, *, device: str = "cpu", seed: int = 0, **kwargs: Any):
    """A timm model by name (``resnet18``, ``vit_tiny_patch16_224``...), random weights, offline.

    >>> timm_model("resnet10t").__class__.__name__
    'ResNet'
    """
    _offline()
    from ..optional import require

    torch = require("torch", "a timm model")
    timm = require("timm", "a timm model")
    if not timm.is_model(name):
        raise HetschedError(f"unknown timm model {name!r}", field="model")
    torch.manual_seed(seed)
    with _device_ctx(device):
        return timm.create_model(name, pretrained=False, **kwargs).eval()


def example_inputs(model: Any, *, batch: int = 1, seq_len: int = 32, image_size: int | None = None,
                   device: str | None = None) -> tuple[tuple, dict]:
    """``(args, kwargs)`` of one call of ``model``: token ids for a language model (and decoder ids
    for an encoder-decoder), an image batch for a vision model; on the model's device.

    ``image_size`` defaults to the size the model was configured for (a transformers or timm
    config), else 224.
    """
    import torch

    if device is None:
        p = next(iter(model.parameters()), None)
        device = p.device.type if p is not None else "cpu"
    cfg = getattr(model, "config", None)
    g = torch.Generator().manual_seed(0)
    if cfg is not None and hasattr(cfg, "to_dict"):  # transformers
        main = getattr(model, "main_input_name", "input_ids")
        if main == "pixel_values":
            size = image_size or _as_int(getattr(cfg, "image_size", None)) or 224
            ch = getattr(cfg, "num_channels", 3)
            return (), {"pixel_values": torch.randn(batch, ch, size, size, generator=g).to(device)}
        vocab = int(getattr(cfg, "vocab_size", 1000) or 1000)
        if main == "input_features" and getattr(cfg, "num_mel_bins", None):
            # a speech encoder's log-mel frames (Whisper: 2 per encoder position, the length it checks)
            frames = 2 * int(getattr(cfg, "max_source_positions", None) or seq_len)
            kw = {"input_features": torch.randn(batch, int(cfg.num_mel_bins), frames, generator=g).to(device)}
        elif main != "input_ids":
            raise HetschedError(f"{type(model).__name__} takes {main!r} first, for which example_inputs has no "
                                "example: pass the inputs yourself", field="inputs")
        else:
            kw = {"input_ids": torch.randint(0, vocab, (batch, seq_len), generator=g).to(device)}
        if getattr(cfg, "is_encoder_decoder", False):
            kw["decoder_input_ids"] = torch.randint(0, vocab, (batch, max(1, seq_len // 2)), generator=g).to(device)
        return (), kw
    pcfg = getattr(model, "pretrained_cfg", None) or {}  # timm
    size = image_size or (pcfg.get("input_size") or (3, 224, 224))[-1]
    ch = (pcfg.get("input_size") or (3,))[0]
    return (torch.randn(batch, ch, size, size, generator=g).to(device),), {}


#: A small Mixtral (Jiang et al., "Mixtral of Experts", 2024; transformers' ``MixtralForCausalLM``):
#: 2 decoder layers, hidden 1024, GQA 8 query / 2 KV heads, 8 experts of intermediate size 3584, top-2
#: routing, vocabulary 32000; the bundled ``mixtral_mini_moe`` graph (batch 4, sequence 512).
MIXTRAL_MINI: Mapping[str, Any] = dict(num_hidden_layers=2, hidden_size=1024, num_attention_heads=8,
                                       num_key_value_heads=2, intermediate_size=3584, vocab_size=32000,
                                       num_local_experts=8, num_experts_per_tok=2)


def mixtral_mini(*, batch: int = 4, seq_len: int = 512, **overrides: Any):
    """The small Mixtral of :data:`MIXTRAL_MINI` (plus ``overrides``), built on the meta device and
    imported with :func:`~hetsched.io.torch_import.load_torch`: an inference graph with 2 MoE layers.

    The bundled ``mixtral_mini_moe`` graph is this, written by :func:`write_bundled_moe`, so that the
    Experts tab's scenario loads without torch.
    """
    import warnings

    from .torch_import import load_torch

    m = transformers_model("mixtral", device="meta", **{**MIXTRAL_MINI, **overrides})
    _, kw = example_inputs(m, seq_len=seq_len, batch=batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = load_torch(m, kwargs=kw, name="mixtral_mini_moe")
    g.meta.update(builder="hetsched.io.torch_models.mixtral_mini",
                  source="Mixtral (Jiang et al. 2024), transformers MixtralForCausalLM, 2 layers, 8 experts, top-2",
                  purpose="expert placement as a mapping question (the Experts tab)", batch=batch, seq_len=seq_len)
    return g


def write_bundled_moe(outdir: Any = None):
    """Write ``mixtral_mini_moe.json`` (default: the checkout's ``data/graphs``); returns its path.

    Needs torch and transformers (``make venv`` installs them); run ``python -m
    hetsched.io.torch_models`` after changing the importer, then ``make data`` to list it.
    """
    from pathlib import Path

    from ..resources import source_dir
    from .graph_json import save_graph_json  # the module, not the package: io's __init__ imports this one

    d = Path(outdir) if outdir is not None else source_dir() / "graphs"
    d.mkdir(parents=True, exist_ok=True)
    p = d / "mixtral_mini_moe.json"
    save_graph_json(mixtral_mini(), p)
    return p


def _as_int(v: Any) -> int | None:
    if isinstance(v, (list, tuple)):
        v = v[0] if v else None
    return int(v) if v else None


if __name__ == "__main__":  # pragma: no cover
    print(write_bundled_moe())
