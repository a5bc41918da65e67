"""``hetsched app`` and ``hetsched lab``: the dashboard and the tour notebooks of an installed hetsched.

``make app`` and ``make lab`` run these same commands. Each builds the command line of Voila or
JupyterLab run by this interpreter (``python -m voila``, ``python -m jupyterlab``: the environment
hetsched is installed in, so the notebook kernels import this same hetsched) and then becomes that
server (``os.execv``): Ctrl-C, exit codes and a supervisor's signals reach the server itself. Nothing
here imports Jupyter, so the core stays importable without it (tests/test_import_hygiene.py).

hetsched's pages ask nothing of other hosts (issue 33): Voila's "lab" page links two Font Awesome
stylesheets from ``cdn.jsdelivr.net``, so on a closed network (a classroom, CI) every page logged
two failed requests. hetsched ships a Voila template, ``hetsched``
(``data/voila/templates/hetsched``: the lab page without those links; Voila's own bundle
carries Font Awesome already). Whoever starts Voila (``hetsched app``, the browser tests, the
benchmark, ``scripts/screenshots.py``) passes ``VOILA_OPTIONS`` and runs it in :func:`voila_env`,
which puts the bundled data folder, where the template lies, on ``JUPYTER_PATH``. The other half
of a quiet page is in ``pyproject.toml``: a widget front end built against the same JupyterLab core
as Voila's page (no "Unsatisfied version" warnings).

>>> cmd = app_command(port=8866, open_browser=False)
>>> cmd[1:3], cmd[3].endswith("dashboard.ipynb"), "--no-browser" in cmd, "--port=8866" in cmd
(['-m', 'voila'], True, True, True)
>>> [o.split("=")[0] for o in VOILA_OPTIONS]
['--MappingKernelManager.cull_idle_timeout', '--MappingKernelManager.cull_interval', '--VoilaExecutor.iopub_timeout', '--template']
>>> (template_root() / "voila" / "templates" / TEMPLATE / "index.html.j2").is_file()
True
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from importlib.resources import as_file
from pathlib import Path
from typing import Mapping, Sequence

from . import resources
from .errors import HetschedError

__all__ = ["VOILA_CULL", "VOILA_IOPUB", "VOILA_PAGE", "VOILA_OPTIONS", "TEMPLATE", "template_root", "voila_env", "TOUR", "app_command", "lab_command", "copy_notebooks",
           "Copied", "app", "lab"]

#: Every page load starts a kernel (~230 MB); a class reloading pages would pile them up. Voila culls
#: the kernels whose page is gone once idle this long (seconds), checking this often.
VOILA_CULL = ("--MappingKernelManager.cull_idle_timeout=300", "--MappingKernelManager.cull_interval=60")
#: Voila runs the notebook before it sends the page; nbclient drops a cell's outputs (the dashboard
#: itself) when they reach it more than ``iopub_timeout`` seconds after the cell finished (default 4 s),
#: which a busy server (kernels starting and being culled, a class loading pages) exceeds.
VOILA_IOPUB = ("--VoilaExecutor.iopub_timeout=60",)
#: hetsched's Voila template (what ``--template`` names): the lab page without its CDN stylesheets
TEMPLATE = "hetsched"
#: the page's options (run Voila in :func:`voila_env`, which finds the template)
VOILA_PAGE = (f"--template={TEMPLATE}",)
#: the Voila options of ``hetsched app`` (and so of ``make app``, the browser tests and the benchmark)
VOILA_OPTIONS = VOILA_CULL + VOILA_IOPUB + VOILA_PAGE
#: the notebook ``hetsched lab`` opens
TOUR = "00_tour"
_LAB_EXTRA = "pip install 'hetsched[lab]'"


def _require(module: str, command: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise HetschedError(f"`hetsched {command}` needs {module}, which is not installed here: {_LAB_EXTRA}",
                            field=module)


def template_root() -> Path:
    """The folder to put on ``JUPYTER_PATH`` for Voila to find ``voila/templates/hetsched``: the bundled
    data folder (``data/`` of a checkout, ``hetsched/data`` of a wheel)."""
    root = resources.data_root()
    if isinstance(root, Path) and (root / "voila" / "templates" / TEMPLATE / "index.html.j2").is_file():
        return root
    raise HetschedError(f"hetsched's Voila template is missing from {root}: reinstall hetsched ({_LAB_EXTRA})",
                        field="template")


def voila_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with ``JUPYTER_PATH`` leading to hetsched's Voila template."""
    env = dict(os.environ if base is None else base)
    root = str(template_root())
    paths = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["JUPYTER_PATH"] = os.pathsep.join([root, *paths])
    return env


def _server_options(port: int | None, open_browser: bool) -> list[str]:
    return [*([] if open_browser else ["--no-browser"]), *([] if port is None else [f"--port={port}"])]


def app_command(*, port: int | None = None, open_browser: bool = True, extra: Sequence[str] = ()) -> list[str]:
    """The command line of ``hetsched app``: Voila serving the dashboard notebook (``VOILA_OPTIONS``).

    Voila only reads the notebook, so it serves the shipped copy where it lies. ``extra`` are more
    Voila options (``--Voila.ip=0.0.0.0``...), given after ours so that they win.
    """
    nb = resources.notebook_file("dashboard")
    if not isinstance(nb, Path):  # a zipped install: Voila needs a file on disk
        raise HetschedError(f"the dashboard notebook {nb} is not a file on disk", field="notebook")
    return [sys.executable, "-m", "voila", str(nb), *_server_options(port, open_browser), *VOILA_OPTIONS, *extra]


@dataclass(frozen=True)
class Copied:
    """What :func:`copy_notebooks` did: the folder, the notebooks copied and those already there (kept)."""

    folder: Path
    copied: tuple[str, ...]
    kept: tuple[str, ...]
    in_place: bool = False  # the checkout's own notebooks (make lab): nothing to copy

    def summary(self) -> str:
        if self.in_place:
            return f"opening the checkout's own notebooks in {self.folder} (not copies)"
        parts = [f"{len(self.copied)} notebook(s) copied into {self.folder}"]
        if self.kept:
            parts.append(f"{len(self.kept)} already there kept as they are ({', '.join(self.kept)}; --overwrite replaces them)")
        return "; ".join(parts)


def copy_notebooks(folder: str | Path, *, overwrite: bool = False) -> Copied:
    """Copy every shipped notebook (the tour and the dashboard) into ``folder`` (created if missing).

    A notebook already in ``folder`` is kept (it may hold the user's edits) unless ``overwrite``.
    ``folder`` may be the checkout's own ``notebooks/`` (``make lab``): they are opened in place. An
    installed package folder (site-packages) is refused: hetsched never writes there.

    >>> import tempfile
    >>> c = copy_notebooks(tempfile.mkdtemp())
    >>> "00_tour.ipynb" in c.copied, c.kept
    (True, ())
    """
    names = [f"{n}.ipynb" for n in resources.notebooks()]
    src = resources.notebooks_root()
    dest = Path(folder).expanduser().resolve()
    if isinstance(src, Path) and src.resolve() == dest:
        resources.outside_site_packages(dest, "the notebooks of an installed hetsched")
        return Copied(dest, (), tuple(names), in_place=True)
    resources.outside_site_packages(dest, "hetsched lab's folder")
    if dest.exists() and not dest.is_dir():
        raise HetschedError(f"hetsched lab: {dest} is a file, not a folder", field="folder")
    dest.mkdir(parents=True, exist_ok=True)
    copied, kept = [], []
    for name in names:
        target = dest / name
        if target.exists() and not overwrite:
            kept.append(name)
            continue
        with as_file(src / name) as f:
            shutil.copyfile(f, target)
        copied.append(name)
    return Copied(dest, tuple(copied), tuple(kept))


def lab_command(folder: str | Path, *, port: int | None = None, open_browser: bool = True,
                allow_root: bool | None = None, extra: Sequence[str] = ()) -> list[str]:
    """The command line of ``hetsched lab``: JupyterLab rooted at ``folder``, opening the tour notebook.

    ``allow_root`` (default: whether this process runs as root) adds ``--allow-root``, without which
    JupyterLab refuses to start as root (containers, CI).
    """
    root = os.geteuid() == 0 if allow_root is None and hasattr(os, "geteuid") else bool(allow_root)
    tour = Path(folder).expanduser().resolve() / f"{TOUR}.ipynb"
    return [sys.executable, "-m", "jupyterlab", str(tour), *_server_options(port, open_browser),
            *(["--allow-root"] if root else []), *extra]


def app(*, port: int | None = None, open_browser: bool = True, extra: Sequence[str] = (), dry_run: bool = False) -> int:
    """``hetsched app``: become Voila serving the dashboard (``dry_run``: print its command line, return 0)."""
    command = app_command(port=port, open_browser=open_browser, extra=extra)
    if not dry_run:
        _require("voila", "app")
    return _run(command, dry_run, env=None if dry_run else voila_env())


def lab(folder: str | Path = ".", *, port: int | None = None, open_browser: bool = True, overwrite: bool = False,
        extra: Sequence[str] = (), dry_run: bool = False) -> int:
    """``hetsched lab``: copy the notebooks into ``folder`` (:func:`copy_notebooks`), then become JupyterLab there.

    ``dry_run`` copies nothing and prints the command line.
    """
    if not dry_run:
        _require("jupyterlab", "lab")
        print(f"hetsched lab: {copy_notebooks(folder, overwrite=overwrite).summary()}", file=sys.stderr)
    return _run(lab_command(folder, port=port, open_browser=open_browser, extra=extra), dry_run)


def _run(command: list[str], dry_run: bool, *, env: dict[str, str] | None = None) -> int:
    if dry_run:
        print(shlex.join(command))
        return 0
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name != "posix":  # pragma: no cover - no exec that keeps the console on Windows
        import subprocess

        return subprocess.call(command, env=env)
    if env is not None:
        os.execve(command[0], command, env)
    os.execv(command[0], command)
    raise AssertionError("unreachable")  # pragma: no cover
