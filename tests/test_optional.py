"""A function that needs an optional dependency the install lacks says which extra installs it."""

from __future__ import annotations

import sys

import pytest

from hetsched.errors import HetschedError


@pytest.fixture
def no_torch(monkeypatch):
    for name in ("torch", "torch.multiprocessing", "transformers", "timm", "torchvision"):
        monkeypatch.setitem(sys.modules, name, None)  # `import torch` raises ImportError(name="torch")


@pytest.mark.parametrize("call", [
    lambda: __import__("hetsched.io.torch_import", fromlist=["load_torch"]).load_torch(object()),
    lambda: __import__("hetsched.io.torch_zoo", fromlist=["torch_model"]).torch_model("resnet50"),
    lambda: __import__("hetsched.io.torch_models", fromlist=["x"]).transformers_model("llama"),
    lambda: __import__("hetsched.io.torch_models", fromlist=["x"]).timm_model("resnet10t"),
    lambda: __import__("hetsched.io.torch_models", fromlist=["x"]).torchvision_model("resnet18"),
    lambda: __import__("hetsched.distributed", fromlist=["x"]).mlp_stages(2),
    lambda: __import__("hetsched.distributed", fromlist=["x"]).run_ranks(print, 2),
    lambda: __import__("hetsched.calibrate", fromlist=["x"])._torch(),
])
def test_missing_torch_names_the_extra(no_torch, call):
    with pytest.raises(HetschedError) as e:
        call()
    assert e.value.field == "torch" and "pip install 'hetsched[torch]'" in str(e.value) and "whl/cpu" in str(e.value)


def test_a_broken_install_is_not_taken_for_a_missing_one(monkeypatch):
    """``require`` reports a missing module; an import error inside an installed one goes through."""
    from hetsched.optional import require

    class Broken:
        def find_spec(self, name, path=None, target=None):
            if name == "brokenmod_xyz":
                raise ImportError("libfoo.so: cannot open shared object file", name="libfoo")
            return None

    monkeypatch.setattr(sys, "meta_path", [Broken(), *sys.meta_path])
    with pytest.raises(ImportError, match="libfoo"):
        require("brokenmod_xyz", "this test")


def test_panels_without_the_lab_extra_say_how_to_install_it(monkeypatch):
    import hetsched.widgets as hw

    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    for name in [n for n in list(sys.modules) if n.startswith("hetsched.widgets.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delitem(hw.__dict__, "MappingPanel", raising=False)
    with pytest.raises(ImportError, match=r"pip install 'hetsched\[lab\]'"):
        hw.MappingPanel
