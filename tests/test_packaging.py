"""Packaging stays consistent: every subpackage is shipped, widgets installs as hetsched.widgets,
environment.yml mirrors pyproject.toml (the single source of dependencies), and the Makefile's
venv stamp and targets behave as the README says."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
ENV = yaml.safe_load((ROOT / "environment.yml").read_text())

# PyPI requirement -> the conda-forge packages that provide it (same version bound).
CONDA_NAMES = {"dask": ["dask", "distributed"]}


def _packages_on_disk() -> set[str]:
    found = set()
    for base, prefix in ((ROOT / "hetsched", "hetsched"), (ROOT / "widgets", "hetsched.widgets")):
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            if "__pycache__" in rel:
                continue
            found.add(".".join((prefix, *rel)))
    return found


def test_every_package_directory_is_listed():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    on_disk = _packages_on_disk()
    assert on_disk - listed == set(), f"add to [tool.setuptools] packages: {sorted(on_disk - listed)}"
    assert listed - on_disk == set(), f"listed but missing on disk: {sorted(listed - on_disk)}"


def test_widgets_installs_as_hetsched_widgets():
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"hetsched.widgets": "widgets"}
    import hetsched.widgets

    assert Path(hetsched.widgets.__file__).resolve().parent == ROOT / "widgets"


def _dev_requirements() -> list[Requirement]:
    """Core dependencies plus every extra that ``dev`` pulls in (expanded recursively)."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    todo, seen = ["dev"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for r in map(Requirement, extras[name]):
            if r.name == "hetsched":
                todo.extend(sorted(r.extras))
            else:
                reqs.append(r)
    assert {"lab", "onnx", "test"} <= seen, "dev must gather the lab, onnx and test extras (issue 2)"
    return reqs


def _conda_specs() -> tuple[dict[str, str], list[str]]:
    conda, pip = {}, []
    for dep in ENV["dependencies"]:
        if isinstance(dep, dict):
            pip.extend(dep["pip"])
            continue
        r = Requirement(dep.replace("=3.11", "==3.11") if dep.startswith("python=") else dep)
        conda[r.name] = str(r.specifier)
    return conda, pip


def test_environment_yml_mirrors_pyproject():
    assert ENV["channels"] == ["conda-forge"]
    conda, pip = _conda_specs()
    assert conda.pop("python") == "==3.11"
    assert conda.pop("pip") == ""
    assert pip == ["-e .[dev]"]
    expected = {}
    for r in _dev_requirements():
        for name in CONDA_NAMES.get(r.name, [r.name]):
            expected[name] = str(r.specifier)
    assert conda == expected, (
        "environment.yml and pyproject.toml disagree: "
        f"only in environment.yml {sorted(set(conda) - set(expected))}, "
        f"only in pyproject {sorted(set(expected) - set(conda))}, "
        f"different bounds {sorted(k for k in set(conda) & set(expected) if conda[k] != expected[k])}"
    )


def test_core_dependencies_are_the_issue_list():
    names = {Requirement(r).name for r in PYPROJECT["project"]["dependencies"]}
    assert {"networkx", "pandas", "numpy", "plotly", "pulp", "highspy", "pyyaml"} <= names
    # Nothing from the Jupyter layer or the heavy optional stacks in the core.
    assert names.isdisjoint({"ipywidgets", "jupyterlab", "voila", "anywidget", "torch", "onnx", "dask"})
    assert "torch" not in str(PYPROJECT["project"]["optional-dependencies"]["dev"])


# --- Makefile: the venv stamp and the friendly failures (run in a scratch copy, no real installs) ---

@pytest.fixture
def scratch_make(tmp_path):
    """A copy of the Makefile and pyproject.toml with a stand-in .venv whose stamp is fresh."""
    if shutil.which("make") is None:
        pytest.fail("`make` is not installed: the two-command setup needs it (apt-get install make)")
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "notebooks").mkdir()
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").symlink_to(sys.executable)
    old = time.time() - 100
    os.utime(tmp_path / "pyproject.toml", (old, old))
    (tmp_path / ".venv" / ".installed").touch()
    return tmp_path


def _make(cwd, *args):
    return subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_venv_stamp_is_tied_to_pyproject(scratch_make):
    assert _make(scratch_make, "-q", "venv").returncode == 0  # up to date: nothing to do
    os.utime(scratch_make / "pyproject.toml")  # pyproject edited after the venv was built
    out = _make(scratch_make, "-n", "venv")
    assert "pip install -e '.[dev]'" in out.stdout
    # A stamp without an interpreter is no stamp either.
    os.utime(scratch_make / "pyproject.toml", (time.time() - 100,) * 2)
    (scratch_make / ".venv" / "bin" / "python").unlink()
    assert "-m venv .venv" in _make(scratch_make, "-n", "venv").stdout


def test_make_app_without_dashboard_fails_clearly(scratch_make):
    out = _make(scratch_make, "app")
    assert out.returncode != 0
    assert "notebooks/dashboard.ipynb does not exist yet" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_make_lab_opens_the_tour_and_allows_root(scratch_make):
    cmd = _make(scratch_make, "-n", "lab").stdout
    assert "jupyter lab notebooks/00_tour.ipynb" in cmd
    assert ("--allow-root" in cmd) == (os.geteuid() == 0)
    assert (ROOT / "notebooks" / "00_tour.ipynb").exists()


def test_make_app_culls_idle_kernels(scratch_make):
    """Every page load starts a kernel: `make app` must let Voila cull those of closed pages."""
    (scratch_make / "notebooks" / "dashboard.ipynb").write_text("{}")
    cmd = _make(scratch_make, "-n", "app").stdout
    assert "voila notebooks/dashboard.ipynb" in cmd
    assert re.search(r"--MappingKernelManager\.cull_idle_timeout=\d+", cmd)
    assert re.search(r"--MappingKernelManager\.cull_interval=\d+", cmd)
    # outputs that arrive late on a busy server are waited for, not dropped (a page without its dashboard)
    assert (m := re.search(r"--VoilaExecutor\.iopub_timeout=(\d+)", cmd)) and int(m.group(1)) >= 30
    bench = (ROOT / "bench" / "bench_browser.py").read_text()
    assert "--MappingKernelManager.cull_idle_timeout=" in bench  # the benchmark checks the same options work
