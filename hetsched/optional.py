"""Optional dependencies: which extra installs each, and one clear error where one is missing.

The core needs none of them. torch (its CPU build is enough) prices real models, calibrates and runs
real pipelines; torchvision, transformers and timm build real models to import; onnx reads ONNX
files; the lab extra draws the panels.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import HetschedError

#: module -> the extra of ``pip install 'hetsched[EXTRA]'`` that installs it
EXTRAS: dict[str, str] = {"torch": "torch", "torchvision": "models", "transformers": "models", "timm": "models",
                          "onnx": "onnx", "ipywidgets": "lab", "anywidget": "lab", "IPython": "lab", "traitlets": "lab"}

#: on Linux, PyPI's torch is a CUDA build of several GB; the CPU build is all hetsched needs
TORCH_CPU = "--extra-index-url https://download.pytorch.org/whl/cpu"


def install_hint(module: str) -> str:
    """The command that installs ``module`` for hetsched.

    >>> install_hint("onnx")
    "pip install 'hetsched[onnx]'"
    >>> install_hint("transformers").split(" --")[0]
    "pip install 'hetsched[models]'"
    """
    cmd = f"pip install 'hetsched[{EXTRAS.get(module, module)}]'"
    return f"{cmd} {TORCH_CPU}" if EXTRAS.get(module) in ("torch", "models") else cmd


def require(module: str, purpose: str) -> ModuleType:
    """``module``, imported; a :class:`~hetsched.errors.HetschedError` naming what needs it and how
    to install it (``field`` the module) when it is not installed.

    >>> require("json", "reading JSON").__name__
    'json'
    >>> try:
    ...     require("no_such_module_xyz", "this example")
    ... except HetschedError as e:
    ...     print(e.field, "|", str(e).split(":")[0])
    no_such_module_xyz | this example needs no_such_module_xyz, which is not installed
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        if e.name is not None and e.name != module and not module.startswith(e.name + "."):
            raise  # the module is there but one of its own imports failed: torch's message says which
        raise HetschedError(f"{purpose} needs {module}, which is not installed: {install_hint(module)}",
                            field=module) from None
