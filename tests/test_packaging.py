"""Packaging stays consistent: every subpackage is shipped, widgets/, data/ and notebooks/ install
inside the package, environment.yml mirrors pyproject.toml (the single source of dependencies), the
version lives in one place, the metadata is what an index shows, the Makefile's venv stamp and
targets behave as the README says, and CI runs exactly the README's commands.

The wheel itself, installed in a fresh venv and used from there: tests/e2e/test_e2e_wheel.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
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
CONDA_NAMES = {"dask": ["dask", "distributed"], "torch": ["pytorch-cpu"]}
# top-level folders installed inside the package (setuptools package-dir), design card layout
MAPPED = {"hetsched.widgets": "widgets", "hetsched.data": "data", "hetsched.notebooks": "notebooks"}
MAKEFILE = (ROOT / "Makefile").read_text()
SOURCE_URL = PYPROJECT["project"]["urls"]["Source"]


def _packages_on_disk() -> set[str]:
    found = set()
    bases = [(ROOT / "hetsched", "hetsched"), *((ROOT / d, pkg) for pkg, d in MAPPED.items())]
    for base, prefix in bases:
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base).parts
            if "__pycache__" in rel:
                continue
            found.add(".".join((prefix, *rel)))
    # data folders inside data/ (graphs, systems) ship as its subpackages, files only
    for sub in (ROOT / "data").iterdir():
        if sub.is_dir() and sub.name != "__pycache__":
            found.add(f"hetsched.data.{sub.name}")
    return found


def test_every_package_directory_is_listed():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    on_disk = _packages_on_disk()
    assert on_disk - listed == set(), f"add to [tool.setuptools] packages: {sorted(on_disk - listed)}"
    assert listed - on_disk == set(), f"listed but missing on disk: {sorted(listed - on_disk)}"


def test_widgets_data_and_notebooks_install_inside_the_package():
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == MAPPED
    import hetsched.widgets
    from hetsched import resources

    assert Path(hetsched.widgets.__file__).resolve().parent == ROOT / "widgets"
    # in a checkout (editable install) the resolver finds the top-level folders themselves
    assert Path(str(resources.data_root())).resolve() == ROOT / "data"
    assert Path(str(resources.notebooks_root())).resolve() == ROOT / "notebooks"
    # every bundled file is package data: what data/ and notebooks/ hold is what the patterns take
    taken = {p for pkg, pats in PYPROJECT["tool"]["setuptools"]["package-data"].items()
             if pkg.startswith(("hetsched.data", "hetsched.notebooks")) for pat in pats for p in _pkg_dir(pkg).glob(pat)}
    files = {p for d in ("data", "notebooks") for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix not in (".py", ".pyc") and not {"__pycache__", ".ipynb_checkpoints"} & set(p.parts)}
    assert files - taken == set(), f"files of data/ or notebooks/ the wheel would leave out: {sorted(files - taken)}"


def _pkg_dir(pkg: str) -> Path:
    """The source folder of package ``pkg`` under the package-dir mapping."""
    top = max((m for m in MAPPED if pkg == m or pkg.startswith(m + ".")), key=len, default=None)
    if top is None:
        return ROOT.joinpath(*pkg.split("."))
    return ROOT.joinpath(MAPPED[top], *pkg[len(top):].split(".")[1:])


def test_nothing_finds_bundled_files_by_a_path_of_its_own():
    """One resolver (hetsched.resources, importlib.resources) finds the bundled files: a path built from
    ``__file__`` (``Path(__file__).parents[2] / "data"``) works in a checkout and breaks in a wheel."""
    offenders = [f"{py.relative_to(ROOT)}:{i}" for py in [*(ROOT / "hetsched").rglob("*.py"), *(ROOT / "widgets").rglob("*.py")]
                 for i, line in enumerate(py.read_text().splitlines(), 1)
                 if "__file__" in line and re.search(r"\.parents?\b|os\.path\.dirname", line)]
    assert offenders == []


def _make_extras() -> list[str]:
    """The extras `make venv` installs (the Makefile's EXTRAS)."""
    m = re.search(r"^EXTRAS \?= (\S+)$", MAKEFILE, re.M)
    assert m, "the Makefile must say which extras .venv gets (EXTRAS ?= ...)"
    return m.group(1).split(",")


def _venv_requirements() -> list[Requirement]:
    """Core dependencies plus every extra `make venv` installs (``dev`` expanded recursively, ``torch``)."""
    extras = PYPROJECT["project"]["optional-dependencies"]
    reqs = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    todo, seen = list(_make_extras()), set()
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
    assert {"lab", "onnx", "test", "torch"} <= seen, "make venv must install the lab, onnx, test (dev) and torch extras"
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
    assert pip == [f"-e .[{','.join(_make_extras())}]"]
    expected = {}
    for r in _venv_requirements():
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
    # `pip install hetsched[dev]` anywhere must not pull CUDA torch: torch is its own extra
    assert "torch" not in str(PYPROJECT["project"]["optional-dependencies"]["dev"])


def test_venv_gets_torch_cpu_build_through_the_constraints():
    """`make venv` installs the torch extra with constraints.txt: pip's newest allowed torch on a machine
    like CI's is a multi-GB CUDA build, the pin takes the CPU build its find-links carry."""
    pins = {Requirement(line).name: Requirement(line) for line in (ROOT / "constraints.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    assert str(pins["torch"].specifier).startswith("==")
    torch_req = next(Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["torch"])
    assert torch_req.specifier.contains(str(pins["torch"].specifier)[2:]), "the pin must satisfy the torch extra"
    assert re.search(r"pip install --constraint constraints\.txt -e '\.\[\$\(EXTRAS\)\]'", MAKEFILE)
    assert re.search(r"^\$\(STAMP\): pyproject\.toml constraints\.txt$", MAKEFILE, re.M)
    if os.environ.get("CI"):  # what CI installed is the CPU build, not several GB of CUDA
        torch = pytest.importorskip("torch")
        assert torch.version.cuda is None, f"CI's .venv has a CUDA build of torch: {torch.__version__}"


# --- version and metadata: one version, what an index shows -------------------------------------------

def test_one_version_in_one_place():
    """Written once; the built wheel's METADATA carries it (tests/e2e/test_e2e_wheel.py)."""
    import hetsched

    assert "version" not in PYPROJECT["project"] and PYPROJECT["project"]["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "hetsched.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", hetsched.__version__)
    assert f"## {hetsched.__version__}" in (ROOT / "CHANGELOG.md").read_text(), "CHANGELOG.md has no entry for it"
    hits = [f"{p.relative_to(ROOT)}" for p in [*(ROOT / "hetsched").rglob("*.py"), *(ROOT / "widgets").rglob("*.py")]
            if re.search(rf"[\"']{re.escape(hetsched.__version__)}[\"']", p.read_text()) and p.name != "__init__.py"]
    assert hits == [], f"the version is written again in {hits}"


def test_classifiers_and_urls():
    from trove_classifiers import classifiers

    meta = PYPROJECT["project"]
    bad = [c for c in meta["classifiers"] if c not in classifiers]
    assert bad == [], f"not trove classifiers (an index refuses the upload): {bad}"
    assert f"Programming Language :: Python :: {meta['requires-python'].lstrip('>=')}" in meta["classifiers"]
    assert {"Homepage", "Source", "Issues", "Changelog", "Documentation"} <= set(meta["urls"])
    assert all(u.startswith(SOURCE_URL) for u in meta["urls"].values())
    assert meta["license"] == "Apache-2.0" and (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)[^)]*\)|^\s*\[[^\]]+\]:\s*(\S+)|<img[^>]+src=[\"']([^\"']+)", re.M)


def _links(markdown: str) -> list[str]:
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)  # code blocks hold no links
    return [next(g for g in m.groups() if g) for m in _LINK.finditer(text)]


def _check_links(links: list[str], where: str, allowed_local=()) -> None:
    """Every link works where the text is read away from the checkout (a package index, a copy of a
    notebook): absolute, or an anchor; and a link into this project names a file that exists."""
    for link in links:
        if link.startswith("#") or link in allowed_local:
            continue
        assert re.match(r"https?://", link), f"{where}: relative link {link!r} breaks on a package index or in a copy"
        if link.startswith(SOURCE_URL + "/blob/main/"):
            path = link[len(SOURCE_URL + "/blob/main/"):].split("#")[0]
            assert (ROOT / path).is_file(), f"{where}: {link} names {path}, which does not exist"


def test_readme_renders_on_a_package_index():
    """The README is the long description: Markdown, links that work away from the repository."""
    assert PYPROJECT["project"]["readme"] == "README.md"  # setuptools: text/markdown (checked in the wheel's METADATA)
    readme = (ROOT / "README.md").read_text()
    links = _links(readme)
    assert len(links) >= 5
    _check_links(links, "README.md")
    assert "](http" in readme and "<script" not in readme


def test_notebook_links_work_in_a_copy():
    """`hetsched lab` opens copies away from docs/: their links must be absolute (or to another notebook)."""
    names = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        _check_links(_links(text), nb.name, allowed_local=names)


# --- CI runs the README's commands, nothing else ----------------------------------------------------

def test_ci_runs_exactly_the_readme_commands():
    ci = (ROOT / ".ci" / "run").read_text()
    code = "\n".join(line.split("#", 1)[0] for line in ci.splitlines())
    assert set(re.findall(r"\bmake\s+(\w+)", code)) == {"test"}, "CI runs `make test` and no other target"
    assert not re.search(r"\bpip\b|python -m|\.venv/", code), "CI installs nothing Python-side of its own"
    readme = (ROOT / "README.md").read_text()
    for pkg in re.findall(r"apt_pkgs\+=\(([^)]*)\)", code):
        for name in pkg.split():
            assert name in readme, f"CI installs {name} with apt; the README must name it"


# --- Makefile: the venv stamp and the two commands (run in a scratch copy, no real installs) ----------

@pytest.fixture
def scratch_make(tmp_path):
    """A copy of the Makefile, pyproject.toml and constraints.txt with a stand-in .venv whose stamp is fresh."""
    if shutil.which("make") is None:
        pytest.fail("`make` is not installed: the two-command setup needs it (apt-get install make)")
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, tmp_path / name)
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    (bin_ / "python").symlink_to(sys.executable)
    old = time.time() - 100
    for name in ("pyproject.toml", "constraints.txt"):
        os.utime(tmp_path / name, (old, old))
    (tmp_path / ".venv" / ".installed").touch()
    return tmp_path


def _make(cwd, *args):
    return subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_venv_stamp_is_tied_to_pyproject_and_constraints(scratch_make):
    assert _make(scratch_make, "-q", "venv").returncode == 0  # up to date: nothing to do
    for name in ("pyproject.toml", "constraints.txt"):
        os.utime(scratch_make / name)  # edited after the venv was built
        out = _make(scratch_make, "-n", "venv")
        assert "pip install --constraint constraints.txt -e '.[dev,torch]'" in out.stdout, out.stdout
        os.utime(scratch_make / name, (time.time() - 100,) * 2)
    assert "-e '.[dev]'" in _make(scratch_make, "-B", "-n", "venv", "EXTRAS=dev").stdout  # torch left out on purpose
    # A stamp without an interpreter is no stamp either.
    (scratch_make / ".venv" / "bin" / "python").unlink()
    assert "-m venv .venv" in _make(scratch_make, "-n", "venv").stdout


def test_make_lab_and_app_run_the_pip_users_commands(scratch_make):
    assert ".venv/bin/hetsched lab notebooks" in _make(scratch_make, "-n", "lab").stdout
    assert ".venv/bin/hetsched app --no-browser" in _make(scratch_make, "-n", "app").stdout
    assert (ROOT / "notebooks" / "00_tour.ipynb").exists() and (ROOT / "notebooks" / "dashboard.ipynb").exists()


def _dry(*argv: str) -> str:
    from hetsched.cli import main

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main([*argv, "--dry-run"]) == 0
    return buf.getvalue()


def test_app_culls_idle_kernels_and_waits_for_late_outputs():
    """Every page load starts a kernel: `hetsched app` (so `make app`) lets Voila cull those of closed pages."""
    cmd = _dry("app", "--port", "8867", "--no-browser", "--Voila.ip=0.0.0.0")
    assert re.search(r"-m hetsched\.widgets\.classroom \S+/notebooks/dashboard\.ipynb", cmd)
    assert re.search(r"--MappingKernelManager\.cull_idle_timeout=\d+", cmd)
    assert re.search(r"--MappingKernelManager\.cull_interval=\d+", cmd)
    # outputs that arrive late on a busy server are waited for, not dropped (a page without its dashboard)
    assert (m := re.search(r"--VoilaExecutor\.iopub_timeout=(\d+)", cmd)) and int(m.group(1)) >= 30
    assert "--port=8867" in cmd and "--no-browser" in cmd and cmd.rstrip().endswith("--Voila.ip=0.0.0.0")
    bench = (ROOT / "bench" / "bench_browser.py").read_text()
    assert "--MappingKernelManager.cull_idle_timeout=" in bench  # the benchmark checks the same options work


def test_lab_opens_the_tour_and_allows_root(tmp_path):
    cmd = _dry("lab", str(tmp_path / "tour"))
    assert re.search(rf"-m jupyterlab {re.escape(str(tmp_path))}/tour/00_tour\.ipynb", cmd)
    assert ("--allow-root" in cmd) == (os.geteuid() == 0)
    assert not (tmp_path / "tour").exists()  # a dry run copies nothing


def test_lab_copies_notebooks_keeps_the_users_and_never_writes_site_packages(tmp_path):
    from hetsched import resources
    from hetsched.errors import HetschedError
    from hetsched.launch import copy_notebooks

    shipped = [f"{n}.ipynb" for n in resources.notebooks()]
    first = copy_notebooks(tmp_path / "tour")
    assert sorted(first.copied) == shipped and first.kept == ()
    (tmp_path / "tour" / "00_tour.ipynb").write_text("my edits")
    again = copy_notebooks(tmp_path / "tour")
    assert again.copied == () and "00_tour.ipynb" in again.kept and "--overwrite" in again.summary()
    assert (tmp_path / "tour" / "00_tour.ipynb").read_text() == "my edits"
    assert "00_tour.ipynb" in copy_notebooks(tmp_path / "tour", overwrite=True).copied
    # the checkout's own notebooks (make lab) are opened in place, not copied onto themselves
    in_place = copy_notebooks(ROOT / "notebooks")
    assert in_place.in_place and in_place.copied == () and "not copies" in in_place.summary()
    with pytest.raises(HetschedError, match="site-packages"):
        copy_notebooks(Path(sysconfig.get_paths()["purelib"]) / "hetsched-lab-test")
    with pytest.raises(HetschedError, match="is a file"):
        copy_notebooks(ROOT / "README.md")


def test_make_data_never_rewrites_an_installed_copy(tmp_path, monkeypatch):
    from hetsched import resources
    from hetsched.errors import HetschedError

    assert resources.source_dir() == ROOT / "data"
    monkeypatch.setattr(resources, "_install_dirs", lambda: [ROOT])  # as if this checkout were site-packages
    with pytest.raises(HetschedError, match="site-packages"):
        resources.source_dir()


def test_app_and_lab_without_jupyter_say_what_to_install(monkeypatch, capsys):
    import importlib.util

    from hetsched.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("voila", "jupyterlab") else real(name, *a))
    assert main(["app", "--no-browser"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'hetsched[lab]'" in err and "Traceback" not in err
