"""Repo-root pytest hooks (collection plumbing only; shared fixtures live in tests/conftest.py).

``widgets/`` is installed as ``hetsched.widgets`` (setuptools ``package-dir``). When
``--doctest-modules`` walks ``widgets/``, pytest would import ``widgets/x.py`` a second time as a
top-level package ``widgets.x``: relative imports such as ``from ..plot import gantt`` would fail
and every widget class would exist twice. Aliasing ``widgets.x`` to the already importable
``hetsched.widgets.x`` first makes pytest find the real module (same file, so its path check passes).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest

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


# --- torch, the one extra a user may leave out -------------------------------------------------------
# `make venv` installs torch's CPU build (the `torch` extra). Built without it (EXTRAS=dev), what needs
# torch (the calibration and import tests, the doctests of hetsched/io/torch_import.py, io/profile.py and
# calibrate.py, notebooks/07_calibration.ipynb) is SKIPPED with the reason below and counted in a banner
# at the end, never failed. Under CI the run then fails (after every other test ran): CI must run them.
TORCH_MISSING = importlib.util.find_spec("torch") is None
TORCH_REASON = ("torch is not installed: `make venv` installs its CPU build (this .venv was built without it, "
                "EXTRAS=dev); elsewhere pip install torch --index-url https://download.pytorch.org/whl/cpu")
# how a doctest, a notebook cell or an importorskip says that it needed torch
_NEEDED_TORCH = re.compile(r"No module named '?torch\b|could not import '?torch\b|needs torch|calibration needs torch|"
                           r"torch is not installed")
_SKIPPED_FOR_TORCH: list[str] = []


def _judge_torch(rep, nodeid: str, path: str, lineno: int):
    """A report that failed or skipped because torch is missing: a loud skip (under CI the run fails at the end)."""
    if not TORCH_MISSING or rep.passed or not _NEEDED_TORCH.search(str(rep.longrepr)):
        return rep
    rep.outcome = "skipped"
    rep.longrepr = (path, lineno, f"TORCH NOT INSTALLED: {TORCH_REASON}")
    if nodeid not in _SKIPPED_FOR_TORCH:
        _SKIPPED_FOR_TORCH.append(nodeid)
    return rep


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Doctests, notebook cells and tests that stopped at a missing torch."""
    rep = yield
    return _judge_torch(rep, item.nodeid, str(item.path), item.location[1] or 0)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """Test modules that skip themselves at import (``pytest.importorskip("torch")``)."""
    rep = yield
    return _judge_torch(rep, collector.nodeid, str(getattr(collector, "path", "")), 0)


def pytest_terminal_summary(terminalreporter):
    if _SKIPPED_FOR_TORCH:
        ci = " [CI is set, so this fails the run]" if os.environ.get("CI") else ""
        terminalreporter.section("torch not installed", sep="!", red=True, bold=True)
        terminalreporter.write_line(f"{len(_SKIPPED_FOR_TORCH)} test modules, tests, doctests and notebooks that need "
                                    f"torch were SKIPPED, not run: {TORCH_REASON}{ci}", red=True, bold=True)


def pytest_sessionfinish(session, exitstatus):
    # every other test still runs and reports; CI then fails, since it must run these too
    if _SKIPPED_FOR_TORCH and os.environ.get("CI") and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
