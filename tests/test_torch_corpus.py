"""Real models from torchvision, timm and transformers (``tests/torch_corpus.py``: CNNs, ViTs,
encoder-only, decoder-only with GQA and RoPE, encoder-decoder, mixtures of experts) through
``load_torch``, checked against the module itself and torch's own FLOP counter, then run through
every family: h2h, HEFT, the memory heuristic, a pipeline split and the executor.

* parameters = ``sum(p.numel() for p in module.parameters())`` (a tied parameter once), and the
  graph's weight bytes are the distinct parameters, buffers and constants its ops read;
* matmul/conv FLOPs (``2 x meta["macs"]``) within 2% of ``torch.utils.flop_counter.FlopCounterMode``
  on one eager forward pass (SDPA's math kernel and gradients on, so the counter sees every product;
  for a mixture of experts the eager expert loop, which runs only the experts each token was routed to);
* no op type is ``aten.*`` (no op left without a rule).
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch", reason="optional extra: CI installs torch==2.13.0 (CPU)")
from hetsched.io.torch_models import import_torchvision  # noqa: E402

import_torchvision()  # before timm and transformers, which import it (PyPI's wheel beside the CPU torch)
pytest.importorskip("transformers", reason="the test extra installs transformers, timm and torchvision")
pytest.importorskip("timm", reason="the test extra installs transformers, timm and torchvision")

from torch_corpus import CORPUS  # noqa: E402

from hetsched.io.resolve import resolve_system  # noqa: E402
from hetsched.io.torch_import import load_torch  # noqa: E402
from hetsched.io.training import training_graph  # noqa: E402

FAMILIES = {f for f, _ in CORPUS.values()}
TRAINING = ["tv_resnet18", "hf_gpt2", "hf_llama", "hf_mixtral", "hf_bert"]


def _torch_flops(m, args, kwargs) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    if getattr(getattr(m, "config", None), "_experts_implementation", None) not in (None, "eager"):
        m.set_experts_implementation("eager")  # the counter does not see grouped products; the loop it sees
    fc = FlopCounterMode(display=False)
    # with gradients on: under no_grad nn.MultiheadAttention takes a fused fast path the counter misses
    with fc, torch.enable_grad(), torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH):
        m(*args, **kwargs)
    return fc.get_total_flops()


def _families(g, system):
    """Every family runs on the graph and gives a finite result."""
    import math

    from hetsched import executor, mapping, memory, pipeline

    res = {
        "h2h": mapping.h2h(g, system).metrics["makespan_s"],
        "heft": mapping.heft(g, system).metrics["makespan_s"],
        "memory": memory.order_patent_heuristic(g, time_limit_s=1.0).metrics["peak_bytes"],
        "pipeline": pipeline.split_stages(g, system, devices=["gpu0", "cpu0"], p=2).metrics["bottleneck_s"],
        "executor": executor.simulate(g).metrics["makespan_s"],
    }
    assert all(math.isfinite(v) and v > 0 for v in res.values()), res
    return res


def test_corpus_covers_the_families():
    assert len(CORPUS) >= 25
    assert {"cnn", "vit", "encoder", "decoder", "encoder-decoder", "moe"} <= FAMILIES
    assert {k.split("_")[0] for k in CORPUS} == {"tv", "timm", "hf"}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_model(name):
    family, build = CORPUS[name]
    m, args, kwargs = build()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # an op without a rule warns: none may here
        warnings.filterwarnings("ignore", message=".*(deprecated|TracerWarning|torch.export).*")
        g = load_torch(m, args, kwargs=kwargs, name=name)
    assert not [o.op_type for o in g.ops.values() if o.op_type.startswith("aten.")]
    assert "unknown_op_types" not in g.meta
    params = list(m.parameters())  # torch lists a tied parameter once
    assert g.meta["params"] == sum(p.numel() for p in params)
    assert g.meta["param_bytes"] == sum(p.numel() * p.element_size() for p in params)
    # weight memory: each distinct weight once, whatever number of ops read it
    assert g.total_weight_bytes == g.meta["weight_bytes"]
    assert g.meta["weight_bytes"] + g.meta.get("unread_weight_bytes", 0) == (
        g.meta["param_bytes"] + g.meta["buffer_bytes"] + g.meta["constant_bytes"])
    ref = _torch_flops(m, args, kwargs)
    assert ref > 0 and abs(2 * g.meta["macs"] - ref) <= 0.02 * ref, (2 * g.meta["macs"], ref)
    if family == "moe":
        assert g.meta["moe"]["experts"] == 4 and g.meta["moe"]["top_k"] == 2
        kinds = {o.attrs.get("moe") for o in g.ops.values()}
        assert {"router", "select", "experts"} <= kinds
    _families(g, resolve_system("cpu_gpu_fpga"))


@pytest.mark.parametrize("name", TRAINING)
def test_corpus_training_graph(name):
    """The joint forward + backward program: every op typed, phases tagged, gradients as outputs."""
    _, build = CORPUS[name]
    m, args, kwargs = build()
    inf = load_torch(m, args, kwargs=kwargs)
    g = load_torch(m, args, kwargs=kwargs, training=True)
    assert not [o.op_type for o in g.ops.values() if o.op_type.startswith("aten.")]
    assert g.meta["training"] and g.meta["n_backward_ops"] > 0
    assert g.meta["params"] == inf.meta["params"]
    # the backward re-reads the forward's weights: still counted once
    assert g.total_weight_bytes == g.meta["weight_bytes"] <= inf.meta["param_bytes"] + inf.meta["buffer_bytes"] + \
        inf.meta["constant_bytes"]
    # a training step costs about three forward passes (forward, input and weight gradients)
    assert 2.0 < g.meta["macs"] / inf.meta["macs"] < 3.5
    # the training graph hetsched derives from the forward graph counts the same work as torch's joint
    # program (a fused attention's backward: four products, not two)
    derived = training_graph(inf)
    assert sum(o.flops for o in derived.ops.values()) == pytest.approx(sum(o.flops for o in g.ops.values()), rel=0.02)
    _families(g, resolve_system("cpu_gpu_fpga"))
