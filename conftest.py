"""Repo-root pytest hooks (collection plumbing only; shared fixtures live in tests/conftest.py).

``widgets/`` is installed as ``hetsched.widgets`` (setuptools ``package-dir``). When
``--doctest-modules`` walks ``widgets/``, pytest would import ``widgets/x.py`` a second time as a
top-level package ``widgets.x``: relative imports such as ``from ..plot import gantt`` would fail
and every widget class would exist twice. Aliasing ``widgets.x`` to the already importable
``hetsched.widgets.x`` first makes pytest find the real module (same file, so its path check passes).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

_WIDGETS = Path(__file__).resolve().parent / "widgets"

# `pytest .` with --doctest-modules would import this file as a module named `conftest`, which
# clashes with tests/conftest.py; it has no doctests anyway. notebooks/__init__.py only makes the
# folder installable as hetsched.notebooks (pyproject.toml): no doctests, and no second `notebooks` module.
collect_ignore = ["conftest.py", "notebooks/__init__.py"]


def _alias_widgets_module(path: Path) -> None:
    rel = path.relative_to(_WIDGETS).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    real = ".".join(["hetsched", "widgets", *parts])
    alias = ".".join(["widgets", *parts])
    if alias in sys.modules:
        return
    try:
        mod = importlib.import_module(real)
    except Exception:  # noqa: BLE001 - let pytest import it itself and report the real error
        return
    sys.modules.setdefault("widgets", importlib.import_module("hetsched.widgets"))
    sys.modules[alias] = mod


def pytest_collect_file(file_path: Path, parent):
    if file_path.suffix == ".py" and _WIDGETS in file_path.parents and file_path.name != "conftest.py":
        _alias_widgets_module(file_path)
    return None
