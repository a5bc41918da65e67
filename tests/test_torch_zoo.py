"""The plain-torch twins of the zoo: torch's own parameter count equals the zoo's published-shape
graphs (small input sizes and few layers keep it fast; MACs: tests/test_io_profile.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from hetsched.errors import HetschedError  # noqa: E402
from hetsched.io import zoo  # noqa: E402
from hetsched.io.torch_zoo import TORCH_ZOO, torch_model  # noqa: E402

CASES = {
    "resnet50": {"image_size": 64},
    "vgg16": {"image_size": 32},
    "mobilenet_v2": {"image_size": 64},
    "inception_v3": {"image_size": 75},
    "bert_base": {"seq_len": 16, "n_layers": 2},
    "gpt2_small": {"seq_len": 16, "n_layers": 2},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_twin_has_the_zoo_parameter_count(name):
    # the importer's MACs are checked against the zoo in tests/test_io_profile.py (one export per twin)
    m, _ = torch_model(name, batch=2, **CASES[name])
    assert sum(p.numel() for p in m.parameters()) == zoo.build(name, batch=2, **CASES[name]).meta["params"]


def test_every_zoo_model_but_generated_ones_has_a_twin():
    assert set(zoo.ZOO) - set(TORCH_ZOO) == {"randwire_ws", "mmmt"}


def test_errors_name_the_field():
    with pytest.raises(HetschedError) as e:
        torch_model("resnet50", batch=0)
    assert e.value.field == "batch"
    with pytest.raises(HetschedError) as e:
        torch_model("resnet50", seq_len=3)
    assert e.value.field == "seq_len"
    with pytest.raises(HetschedError) as e:
        torch_model("bert_base", seq_len=600)
    assert e.value.field == "seq_len"


def test_seeded_weights():
    a, _ = torch_model("bert_base", seq_len=8, n_layers=1, seed=3)
    b, _ = torch_model("bert_base", seq_len=8, n_layers=1, seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
