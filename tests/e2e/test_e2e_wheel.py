"""hetsched as a pip user gets it: the sdist and the wheel built from it, the wheel installed into a
fresh venv outside the checkout, and from there the README's quick start, the CLI, ``hetsched lab``
and ``hetsched app`` (the dashboard drawn in Chromium).

The fresh venv is made cheaply: the dependencies this suite's ``.venv`` already installed are linked
into its site-packages one by one (not hetsched itself: its editable hook is left out), then pip
installs the wheel with ``--no-index``, so pip itself checks that the wheel's declared dependencies
(with the ``lab`` extra) are all there, and nothing is downloaded. No source tree is on ``sys.path``
there, the working directory lies outside the checkout, and the tests check both.
"""

from __future__ import annotations

import email.parser
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import zipfile
from pathlib import Path

import pytest
from e2e_helpers import ROOT, external_requests, free_port, output_errors, start_server, wait_for_plots

import hetsched

VERSION = hetsched.__version__
# what lies in a checkout but must never reach a wheel
NOT_IN_WHEEL = ("tests/", "bench/", "docs/", "scripts/", ".venv", ".ci/", "conftest.py", "test-artifacts/")
# tracked files an sdist leaves out, and the files it adds
NOT_IN_SDIST = {".gitignore"}
SDIST_METADATA = {"PKG-INFO", "setup.cfg"}


def _source_files() -> list[str]:
    """The files of the checkout a fresh clone would have, plus new ones not yet committed (not ignored ones)."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.fail(f"git ls-files failed in {ROOT}: {out.stderr.strip()}", pytrace=False)
    return sorted(f for f in out.stdout.splitlines() if (ROOT / f).is_file())


def _build(backend_call: str, cwd: Path, outdir: Path) -> Path:
    """Run setuptools' PEP 517 backend (``build_sdist``/``build_wheel``) in ``cwd``, as ``python -m build
    --no-isolation`` does, with this venv's setuptools (no download of a build environment)."""
    code = f"import setuptools.build_meta as b; print(b.{backend_call}({str(outdir)!r}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{backend_call} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return outdir / out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """(sdist, wheel, source files): the sdist of a copy of the checkout, then the wheel built from the sdist."""
    work = tmp_path_factory.mktemp("dists")
    files = _source_files()
    src = work / "src"
    for f in files:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    dist = work / "dist"
    sdist = _build("build_sdist", src, dist)
    with tarfile.open(sdist) as tf:
        tf.extractall(work / "unpacked", filter="data")
    wheel = _build("build_wheel", work / "unpacked" / f"hetsched-{VERSION}", dist)
    return sdist, wheel, files


def _site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"


@pytest.fixture(scope="module")
def venv(dists, tmp_path_factory):
    """A fresh venv outside the checkout with the wheel installed (``hetsched[lab]``, not editable)."""
    _, wheel, _ = dists
    home = tmp_path_factory.mktemp("wheel-user")
    env_dir = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    site = _site_packages(env_dir)
    outer = Path(sysconfig.get_paths()["purelib"])
    for entry in outer.iterdir():
        name = entry.name.lower()
        if name.startswith(("hetsched", "__editable__", "__editable___")) or name == "__pycache__":
            continue  # this checkout's editable install stays behind
        (site / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    # Jupyter's data (kernel spec, Voila's templates, widget extensions) and config, as pip installs them
    for sub in ("share/jupyter", "etc/jupyter"):
        if (Path(sys.prefix) / sub).is_dir():
            (env_dir / sub).parent.mkdir(parents=True, exist_ok=True)
            (env_dir / sub).symlink_to(Path(sys.prefix) / sub, target_is_directory=True)
    py = env_dir / "bin" / "python"
    out = subprocess.run([str(py), "-m", "pip", "install", "--no-index", "--no-cache-dir", "--disable-pip-version-check",
                          f"{wheel}[lab]"], capture_output=True, text=True, timeout=300, cwd=home, env=_env(env_dir))
    assert out.returncode == 0, f"pip install of the wheel failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return env_dir, home


def _env(env_dir: Path) -> dict[str, str]:
    """A user's shell with the venv activated: no PYTHONPATH, the venv's bin first, no user site."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PIP_"))}
    env.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", VIRTUAL_ENV=str(env_dir),
               PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _run(venv, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env_dir, home = venv
    exe = env_dir / "bin" / argv[0]
    return subprocess.run([str(exe), *argv[1:]], cwd=home, env=_env(env_dir), capture_output=True, text=True,
                          timeout=timeout)


# ------------------------------------------------------------------------------------------ contents
def _expected_wheel_files(files: list[str]) -> set[str]:
    """Every module, data file and notebook of the source, where the package-dir mapping puts it."""
    mapping = {"hetsched/": "hetsched/", "widgets/": "hetsched/widgets/", "data/": "hetsched/data/",
               "notebooks/": "hetsched/notebooks/"}
    out = set()
    for f in files:
        for src, dst in mapping.items():
            if f.startswith(src) and "__pycache__" not in f:
                out.add(dst + f[len(src):])
    info = f"hetsched-{VERSION}.dist-info/"
    return out | {info + n for n in ("METADATA", "WHEEL", "entry_points.txt", "top_level.txt", "RECORD",
                                     "licenses/LICENSE")}


def test_wheel_holds_the_package_its_data_and_notebooks_and_nothing_else(dists):
    _, wheel, files = dists
    assert wheel.name == f"hetsched-{VERSION}-py3-none-any.whl"
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = _expected_wheel_files(files)
    assert names - expected == set(), f"the wheel holds files it should not: {sorted(names - expected)[:20]}"
    assert expected - names == set(), f"the wheel lacks: {sorted(expected - names)[:20]}"
    for must in ("hetsched/data/graphs/resnet50_b1.json", "hetsched/data/systems/cpu_gpu_fpga.yaml",
                 "hetsched/data/graph.schema.json", "hetsched/notebooks/00_tour.ipynb",
                 "hetsched/notebooks/dashboard.ipynb", "hetsched/widgets/dashboard.py", "hetsched/py.typed",
                 "hetsched/data/voila/templates/hetsched/index.html.j2",  # the quiet page (issue 33)
                 "hetsched/data/calibration/system.yaml"):  # the Calibration tab's shipped measurement
        assert must in names
    assert not [n for n in names if n.startswith(NOT_IN_WHEEL) or "/tests/" in n or n.endswith(".pyc")]


def test_sdist_is_the_source(dists):
    sdist, _, files = dists
    assert sdist.name == f"hetsched-{VERSION}.tar.gz"
    with tarfile.open(sdist) as tf:
        names = {m.name.split("/", 1)[1] for m in tf.getmembers() if m.isfile()}
    names = {n for n in names if not n.startswith("hetsched.egg-info/")} - SDIST_METADATA
    assert names == set(files) - NOT_IN_SDIST, (f"sdist extra {sorted(names - set(files))[:10]}, "
                                                f"missing {sorted(set(files) - NOT_IN_SDIST - names)[:10]}")


def test_wheel_metadata_is_what_an_index_shows(dists):
    _, wheel, _ = dists
    with zipfile.ZipFile(wheel) as zf:
        meta = email.parser.Parser().parsestr(zf.read(f"hetsched-{VERSION}.dist-info/METADATA").decode())
        scripts = zf.read(f"hetsched-{VERSION}.dist-info/entry_points.txt").decode()
    assert meta["Name"] == "hetsched" and meta["Version"] == VERSION
    assert meta["License-Expression"] == "Apache-2.0" and meta["License-File"] == "LICENSE"
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload().strip() == (ROOT / "README.md").read_text().strip()  # the long description
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Homepage", "Source", "Issues", "Changelog", "Documentation"} <= set(urls)
    assert len(meta.get_all("Classifier")) >= 5
    extras = set(meta.get_all("Provides-Extra"))
    assert {"lab", "torch", "onnx", "dask", "test", "dev"} <= extras
    assert any(r.startswith("torch") and 'extra == "torch"' in r for r in meta.get_all("Requires-Dist"))
    assert re.search(r"^hetsched = hetsched\.cli:main$", scripts, re.M)


# ------------------------------------------------------------------------------------------ installed
_WHERE = """
import json, sys, importlib.resources as r
import hetsched
print(json.dumps({"file": hetsched.__file__, "version": hetsched.__version__, "path": sys.path,
                  "data": str(r.files("hetsched.data")), "notebooks": str(r.files("hetsched.notebooks"))}))
"""


def test_installed_wheel_is_used_not_the_checkout(venv):
    env_dir, _ = venv
    out = _run(venv, "python", "-c", _WHERE)
    assert out.returncode == 0, out.stderr
    where = json.loads(out.stdout)
    site = _site_packages(env_dir)
    assert where["version"] == VERSION
    for key in ("file", "data", "notebooks"):
        assert Path(where[key]).is_relative_to(site), f"hetsched's {key} comes from {where[key]}, not the wheel"
    # no source tree on sys.path (the checkout, its hetsched/, widgets/ or data/)
    assert not [p for p in where["path"] if p and Path(p).resolve().is_relative_to(ROOT)]


def test_readme_quick_start_runs_from_the_wheel(venv):
    (code,) = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    env_dir, home = venv
    probe = code + "\nassert ev.metrics['makespan_s'] > 0 and len(fig.data) > 0\nprint('QUICK START OK')\n"
    out = _run(venv, "python", "-c", probe)
    assert out.returncode == 0 and "QUICK START OK" in out.stdout, out.stderr[-3000:]
    assert (home / "resnet50_gpu.json").stat().st_size > 1000  # the trace it writes into the working folder


def test_cli_help_and_a_command_on_a_bundled_model(venv):
    out = _run(venv, "hetsched", "--help")
    assert out.returncode == 0 and "app" in out.stdout and "lab" in out.stdout, out.stderr
    assert _run(venv, "hetsched", "--version").stdout.strip() == f"hetsched {VERSION}"
    out = _run(venv, "hetsched", "map", "resnet50_b1", "--system", "cpu_gpu_fpga", "--csv", "r50")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "makespan_s" in out.stdout
    assert (venv[1] / "r50_placement.csv").exists()


def test_lab_copies_the_notebooks_and_serves_them(venv):
    env_dir, home = venv
    shipped = _site_packages(env_dir) / "hetsched" / "notebooks"
    before = sorted(p.name for p in shipped.iterdir())
    # site-packages is never written to
    out = _run(venv, "hetsched", "lab", str(shipped), "--no-browser")
    assert out.returncode == 2 and "site-packages" in out.stderr and "Traceback" not in out.stderr, out.stderr
    port = free_port()
    work = home / "lab-run"
    work.mkdir()
    # JupyterLab in ./my-tour (a folder the user names), serving the copied tour (no token: a test on localhost)
    cmd = [str(env_dir / "bin" / "hetsched"), "lab", "my-tour", "--no-browser", f"--port={port}",
           "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token="]
    server = start_server(cmd, home, work, f"http://127.0.0.1:{port}", path="/api/contents/00_tour.ipynb",
                          timeout_s=120, env=_env(env_dir))
    server.stop()
    copies = home / "my-tour"
    assert sorted(p.name for p in copies.iterdir()) == [n for n in before if n.endswith(".ipynb")]
    assert (copies / "00_tour.ipynb").read_bytes() == (shipped / "00_tour.ipynb").read_bytes()
    assert sorted(p.name for p in shipped.iterdir()) == before


@pytest.mark.e2e
def test_app_serves_the_dashboard_from_the_wheel(venv, browser_context):
    env_dir, home = venv
    dry = _run(venv, "hetsched", "app", "--dry-run")
    assert str(_site_packages(env_dir) / "hetsched" / "notebooks" / "dashboard.ipynb") in dry.stdout, dry.stdout
    port = free_port()
    # a fresh folder per attempt: the flaky-rerun of this test must not fail on the first one's folder
    work = Path(tempfile.mkdtemp(prefix="app-run-", dir=home))
    cmd = [str(env_dir / "bin" / "hetsched"), "app", "--no-browser", f"--port={port}", "--Voila.ip=127.0.0.1"]
    # the status, not a page, tells when the server is up (a page request would take a kernel)
    server = start_server(cmd, home, work, f"http://127.0.0.1:{port}", path="/hetsched/status", timeout_s=120,
                          env=_env(env_dir))
    page = browser_context.new_page()
    page.requested_urls, page.failed_requests = [], []  # type: ignore[attr-defined]
    page.on("request", lambda r: page.requested_urls.append(r.url))
    page.on("requestfailed", lambda r: page.failed_requests.append(f"{r.url} ({r.failure})"))
    try:
        resp = page.goto(server.base_url + "/", wait_until="load")
        assert resp is not None and resp.status == 200
        assert wait_for_plots(page, 1, timeout_s=180) >= 1, server.log_tail()
        assert output_errors(page) == [], server.log_tail()
        # the installed template: a page that asks nothing of another host (issue 33)
        assert external_requests(page) == [] and page.failed_requests == [], (page.requested_urls[:5], page.failed_requests)
    finally:
        page.close()
        server.stop()
