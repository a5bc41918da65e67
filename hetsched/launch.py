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

>>> cmd = app_command(port=8866, open_browser=False, pool=30, max_students=40)
>>> cmd[1:3], cmd[3].endswith("dashboard.ipynb"), "--no-browser" in cmd, "--port=8866" in cmd
(['-m', 'hetsched.widgets.classroom'], True, True, True)
>>> [o for o in cmd if "ClassKernelManager" in o]
['--ClassKernelManager.pool_size=30', '--ClassKernelManager.max_students=40']
>>> [o.split("=")[0] for o in VOILA_OPTIONS]
['--MappingKernelManager.cull_idle_timeout', '--MappingKernelManager.cull_interval', '--VoilaExecutor.iopub_timeout', '--template']
>>> (template_root() / "voila" / "templates" / TEMPLATE / "index.html.j2").is_file()
True

Serving a class
---------------
``hetsched app`` is Voila with a pool of warm kernels (:mod:`hetsched.widgets.classroom`): ``--pool N``
kernels run the dashboard's imports and first computations before anyone arrives, so a page opens
in a second or two, and the pool refills in the background. Each student's page holds one kernel
(:data:`KERNEL_MB` of memory); ``--max-students`` bounds them (past it a page says the class is
full), by default to what fits in 80 % of the memory available at start. A link opens the
dashboard on a scenario, a tab and a layout: ``http://HOST:8866/?scenario=memory&tab=memory&layout=present``.
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

__all__ = ["VOILA_CULL", "VOILA_IOPUB", "VOILA_PAGE", "VOILA_OPTIONS", "TEMPLATE", "template_root", "voila_env", "TOUR",
           "APP_MODULE", "KERNEL_MB", "DEFAULT_POOL", "app_command", "lab_command", "copy_notebooks", "Copied", "app", "lab",
           "auto_max_students", "class_guide"]

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
#: the server ``hetsched app`` runs: Voila with a pool of warm kernels and a bounded class
APP_MODULE = "hetsched.widgets.classroom"
#: memory one student's dashboard kernel holds (proportional set size, MB) after opening the dashboard,
#: stepping a walker and visiting every tab: measured by bench/bench_class.py (docs/benchmarks.md)
KERNEL_MB = 200
#: warm kernels ``hetsched app`` keeps ready by default (``--pool``): a reload is as quick as the first page
DEFAULT_POOL = 2
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


def app_command(*, port: int | None = None, open_browser: bool = True, extra: Sequence[str] = (),
                pool: int = DEFAULT_POOL, max_students: int | None = None, cull_after_s: int | None = None) -> list[str]:
    """The command line of ``hetsched app``: the classroom Voila (:data:`APP_MODULE`) serving the
    dashboard notebook with ``VOILA_OPTIONS``, ``pool`` warm kernels and at most ``max_students``
    pages at once (``None``: :func:`auto_max_students`; 0: no limit). ``cull_after_s`` replaces the
    idle time after which a student's kernel is culled (default 300 s).

    Voila only reads the notebook, so it serves the shipped copy where it lies. ``extra`` are more
    Voila options (``--Voila.ip=0.0.0.0``...); one that sets an option of ours replaces it.

    >>> [o for o in app_command(extra=["--MappingKernelManager.cull_idle_timeout=5"]) if "cull_idle" in o]
    ['--MappingKernelManager.cull_idle_timeout=5']
    """
    nb = resources.notebook_file("dashboard")
    if not isinstance(nb, Path):  # a zipped install: Voila needs a file on disk
        raise HetschedError(f"the dashboard notebook {nb} is not a file on disk", field="notebook")
    if pool < 0 or (max_students is not None and max_students < 0) or (cull_after_s is not None and cull_after_s < 0):
        raise HetschedError("--pool, --max-students and --cull-after take numbers >= 0", field="app")
    students = auto_max_students(pool) if max_students is None else max_students
    options = list(VOILA_OPTIONS)
    if cull_after_s is not None:
        options[0] = f"--MappingKernelManager.cull_idle_timeout={cull_after_s}"
    options += [f"--ClassKernelManager.pool_size={pool}", f"--ClassKernelManager.max_students={students}"]
    # an option given again in extra replaces ours (traitlets refuses an option given twice)
    given = {e.split("=", 1)[0] for e in extra if e.startswith("--")}
    options = [o for o in options if o.split("=", 1)[0] not in given]
    return [sys.executable, "-m", APP_MODULE, str(nb), *_server_options(port, open_browser), *options, *extra]


def _available_bytes() -> int | None:
    """Memory available to new processes (Linux ``MemAvailable``), or ``None`` where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def auto_max_students(pool: int = DEFAULT_POOL, available_bytes: int | None = None) -> int:
    """How many students' kernels fit in 80 % of the memory available now, besides ``pool`` warm
    kernels, at :data:`KERNEL_MB` each (at least 1; 0, no limit, where the memory is unknown).

    >>> auto_max_students(2, available_bytes=100 * KERNEL_MB * 2**20)    # 80 kernels fit, 2 are the pool's
    78
    """
    avail = _available_bytes() if available_bytes is None else available_bytes
    if avail is None:
        return 0
    return max(1, int(0.8 * avail / (KERNEL_MB * 2**20)) - pool)


def class_guide(pool: int = DEFAULT_POOL) -> str:
    """What ``hetsched app --help`` says about serving a class (pool, memory, links)."""
    return (f"Serving a class: --pool N keeps N kernels warm (imports done, the first tab computed), so that "
            f"N students who open the page at once each get one within a second or two; the pool refills in the "
            f"background, one kernel at a time at low priority while students are connected. Each student holds "
            f"one kernel, about {KERNEL_MB} MB of memory (30 students: about {30 * KERNEL_MB / 1000:.0f} GB, "
            f"plus the pool); --max-students bounds them (default: what fits in 80% of the memory available now, "
            f"{auto_max_students(pool)} here); past it a page says the class is full and retries by itself. "
            f"Idle students' kernels are culled after --cull-after seconds. A link opens the dashboard on a "
            f"scenario, a tab and a layout, e.g. http://HOST:8866/?scenario=memory&tab=memory&layout=present "
            f"(scenarios: hetsched.scenarios.SCENARIOS; tabs: graph, backends, mapping, experts, pipeline, memory, "
            f"executor, calibration; layouts: full, present). For a class on other machines, add --Voila.ip=0.0.0.0. "
            f"http://HOST:8866/hetsched/status says how many students are connected and how many kernels are warm.")


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


def app(*, port: int | None = None, open_browser: bool = True, extra: Sequence[str] = (), dry_run: bool = False,
        pool: int = DEFAULT_POOL, max_students: int | None = None, cull_after_s: int | None = None) -> int:
    """``hetsched app``: become the classroom Voila serving the dashboard (``dry_run``: print its command
    line, return 0)."""
    command = app_command(port=port, open_browser=open_browser, extra=extra, pool=pool, max_students=max_students,
                          cull_after_s=cull_after_s)
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
