"""Helpers for browser tests (import them: ``from e2e_helpers import wait_for_plots, screenshot``)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
NOTEBOOKS = ROOT / "notebooks"
CHROMIUM = Path(os.environ.get("HETSCHED_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

__all__ = ["ARTIFACTS", "ROOT", "NOTEBOOKS", "CHROMIUM", "CHROMIUM_ARGS", "launch_chromium", "VoilaServer", "start_voila", "start_app", "start_server", "served", "free_port", "WsCounter",
           "settle", "wait_for_plots", "plot_signature", "wait_for_change", "output_errors", "external_requests", "screenshot"]


def launch_chromium(pw, profile: Path, *, timeout_s: float, width: int = 1600, height: int = 1000):
    """Debian's Chromium, headless with ``CHROMIUM_ARGS``, on a fresh profile directory (Playwright takes an
    explicit ``--user-data-dir`` only through a persistent context); ``timeout_s`` is every wait's default."""
    ctx = pw.chromium.launch_persistent_context(str(profile), executable_path=str(CHROMIUM), headless=True,
                                                args=CHROMIUM_ARGS, viewport={"width": width, "height": height})
    ctx.set_default_timeout(timeout_s * 1000)
    return ctx


def wait_for_plots(page, n: int = 1, *, timeout_s: float = 60.0) -> int:
    """Wait until at least ``n`` Plotly figures have drawn their SVG; return how many there are."""
    page.wait_for_function(
        "n => document.querySelectorAll('.js-plotly-plot .main-svg').length >= n",
        arg=n,
        timeout=timeout_s * 1000,
    )
    return page.locator(".js-plotly-plot").count()


def plot_signature(page, index: int = 0) -> str:
    """A string that changes when the ``index``-th Plotly figure is redrawn with other data.

    Compare it before and after an interaction to check that the plot in the page really changed.
    """
    return page.evaluate(
        """i => {
            const el = document.querySelectorAll('.js-plotly-plot')[i];
            if (!el) return null;
            const data = (el.data || []).map(t => [t.type, t.name, t.x && t.x.length, t.y && t.y.length,
                                                    t.base && t.base.length, JSON.stringify(t.marker && t.marker.color)]);
            const svg = el.querySelector('.main-svg');
            return JSON.stringify(data) + '|' + (svg ? svg.innerHTML.length : 0);
        }""",
        index,
    )


def output_errors(page) -> list[str]:
    """Texts of error outputs (tracebacks) in the rendered notebook; [] when every cell ran cleanly."""
    texts = page.locator(
        "[data-mime-type='application/vnd.jupyter.stderr'], .jp-RenderedText[data-mime-type*='error']"
    ).all_inner_texts()
    return [re.sub(r"\s+", " ", t)[:500] for t in texts if "Traceback" in t or "Error" in t]


def screenshot(target, name: str, *, max_height: int = 8000) -> Path:
    """Save a screenshot as ``test-artifacts/<name>.png`` and return its path.

    ``target`` is a page (the whole notebook: Voila scrolls inside ``#rendered_cells``, so the
    viewport is stretched to its height for the shot) or a locator (just that element).
    """
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
    locator = None if hasattr(target, "viewport_size") else target
    page = target.page if locator is not None else target
    size = page.viewport_size
    # what lies below Voila's scrolling container is not painted: stretch the viewport to the
    # content for the shot (an element's shot alone comes out white below the fold)
    height = page.evaluate(
        "() => Math.max(document.documentElement.scrollHeight,"
        " ...Array.from(document.querySelectorAll('#rendered_cells, .jp-Notebook'), e => e.scrollHeight))"
    )
    try:
        if size and height > size["height"]:
            page.set_viewport_size({"width": size["width"], "height": min(int(height) + 40, max_height)})
            page.wait_for_timeout(500)  # plots follow the resize
        if locator is not None:
            locator.screenshot(path=str(path))
        else:
            page.screenshot(path=str(path), full_page=True)
    finally:
        if size:
            page.set_viewport_size(size)
    return path


def wait_for_change(page, before: str, index: int = 0, *, timeout_s: float = 30.0) -> str:
    """Wait until :func:`plot_signature` of figure ``index`` differs from ``before``; return the new one."""
    page.wait_for_function(
        """([i, before]) => {
            const el = document.querySelectorAll('.js-plotly-plot')[i];
            if (!el) return false;
            const data = (el.data || []).map(t => [t.type, t.name, t.x && t.x.length, t.y && t.y.length,
                                                    t.base && t.base.length, JSON.stringify(t.marker && t.marker.color)]);
            const svg = el.querySelector('.main-svg');
            return JSON.stringify(data) + '|' + (svg ? svg.innerHTML.length : 0) !== before;
        }""",
        arg=[index, before],
        timeout=timeout_s * 1000,
    )
    return plot_signature(page, index)


def external_requests(page) -> list[str]:
    """URLs the page asked for off this machine (refused by the fixture; CI has no internet). Voila's own
    lab page links Font Awesome from a CDN; hetsched's page leaves it out (:mod:`hetsched.launch`)."""
    local = re.compile(r"^(https?|wss?)://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?/|^(data|blob|about|chrome):")
    return [u for u in getattr(page, "requested_urls", []) if not local.match(u)]


# ---------------------------------------------------------------- Voila and the websocket
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


class VoilaServer:
    """A running Voila process serving a directory; ``url(name)`` renders one notebook."""

    def __init__(self, proc: subprocess.Popen, base_url: str, root: Path, log: Path):
        self.proc, self.base_url, self.root, self.log = proc, base_url, root, log

    def status(self) -> dict:
        """``/hetsched/status`` of a classroom server (:func:`start_app`): students, pool ready and warming."""
        import json

        with urllib.request.urlopen(self.base_url + "/hetsched/status", timeout=60) as r:
            return json.load(r)

    def url(self, notebook: str) -> str:
        name = notebook if notebook.endswith(".ipynb") else f"{notebook}.ipynb"
        if not (self.root / name).exists():
            raise FileNotFoundError(f"notebook {name!r} is not in {NOTEBOOKS} (served copy: {self.root})")
        return f"{self.base_url}/voila/render/{name}"

    def log_tail(self, n: int = 40) -> str:
        return _tail(self.log, n)

    def kernel_pids(self) -> list[int]:
        """Process ids of the kernels Voila runs now (its ``ipykernel`` children)."""
        import psutil

        try:
            kids = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        out = []
        for k in kids:
            try:
                if "ipykernel" in " ".join(k.cmdline()):
                    out.append(k.pid)
            except psutil.Error:
                pass
        return out

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=15)


def start_voila(work: Path, *, timeout_s: float = 60.0, page_timeout_s: float = 120.0,
                extra_args: list[str] | None = None) -> VoilaServer:
    """Voila serving a copy of ``notebooks/`` (in ``work``) on a free localhost port.

    The options are ``hetsched app``'s (``hetsched.launch.VOILA_IOPUB``: a cell's outputs that reach
    nbclient late on a busy machine are kept, not dropped with "Timeout waiting for IOPub output");
    ``extra_args`` are added to Voila's command line (e.g. the kernel culling options of ``make app``).
    Raises ``RuntimeError`` (with the log tail) when Voila does not come up.
    """
    from hetsched.launch import VOILA_IOPUB, VOILA_PAGE, voila_env

    root = work / "notebooks"
    # the notebooks alone, as a wheel ships them: they find their data through hetsched.resources
    shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.py"))
    port = free_port()
    voila = Path(sys.executable).with_name("voila")
    cmd = [
        str(voila) if voila.exists() else "voila",
        str(root),
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
        "--show_tracebacks=True",
        f"--VoilaExecutor.timeout={int(page_timeout_s)}",
        *([] if any("iopub_timeout" in a for a in extra_args or []) else VOILA_IOPUB),
        *VOILA_PAGE,  # hetsched's page: nothing asked of another host (issue 33)
        *(extra_args or []),
    ]
    return start_server(cmd, root, work, f"http://127.0.0.1:{port}", timeout_s=timeout_s, env=voila_env())


def served(start):
    """A fixture's body: ``yield from served(lambda: start_voila(...))`` yields the started server and
    stops it afterwards; a server that does not come up fails the test with its log, not a traceback."""
    import pytest

    try:
        server = start()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


def start_app(work: Path, *, pool: int = 1, max_students: int = 0, extra_args: list[str] | None = None,
              timeout_s: float = 60.0, wait_pool_s: float | None = 180.0) -> VoilaServer:
    """``hetsched app`` (the classroom Voila, :mod:`hetsched.widgets.classroom`, with ``hetsched app``'s
    options) serving a copy of the dashboard notebook (in ``work``) on a free localhost port.

    ``wait_pool_s``: wait until the pool holds ``pool`` warm kernels (``/hetsched/status``), so that a
    page finds a warm kernel (``None``: do not wait). Raises ``RuntimeError`` with the log tail otherwise.
    """
    import json

    from hetsched.launch import app_command, voila_env

    root = work / "notebooks"
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(NOTEBOOKS / "dashboard.ipynb", root / "dashboard.ipynb")
    port = free_port()
    cmd = app_command(port=port, open_browser=False, pool=pool, max_students=max_students,
                      extra=["--Voila.ip=127.0.0.1", "--show_tracebacks=True", *(extra_args or [])])
    cmd[3] = str(root / "dashboard.ipynb")  # the copy, not the checkout's notebook
    # asked for the status, not a page: every page request would start (or take) a kernel
    server = start_server(cmd, root, work, f"http://127.0.0.1:{port}", path="/hetsched/status", timeout_s=timeout_s,
                          env=voila_env())
    deadline = time.monotonic() + (wait_pool_s or 0)
    while wait_pool_s is not None and pool > 0:
        with urllib.request.urlopen(server.base_url + "/hetsched/status", timeout=60) as r:
            status = json.load(r)
        if status["pool_ready"] >= pool:
            break
        if time.monotonic() > deadline or server.proc.poll() is not None:
            server.stop()
            raise RuntimeError(f"the pool did not fill ({status}) within {wait_pool_s:.0f} s:\n{server.log_tail()}")
        time.sleep(0.5)
    return server


def start_server(cmd: list[str], root: Path, work: Path, base_url: str, *, path: str = "/", timeout_s: float = 60.0,
                 env: dict[str, str] | None = None) -> VoilaServer:
    """Run ``cmd`` (a Voila or Jupyter server) in ``root`` and wait until ``base_url + path`` answers 200.

    Its runtime files go to ``work/runtime`` and its output to ``work/voila.log``. Raises
    ``RuntimeError`` (with the log tail) when the server exits or does not answer within ``timeout_s``.
    """
    runtime = work / "runtime"
    runtime.mkdir(exist_ok=True)
    log = work / "voila.log"
    env = dict(os.environ if env is None else env, JUPYTER_RUNTIME_DIR=str(runtime), PYTHONHASHSEED="0")
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=root, stdout=fh, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{Path(cmd[0]).name} exited with code {proc.returncode} before serving:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(base_url + path, timeout=5) as r:
                if r.status == 200:
                    return VoilaServer(proc, base_url, root, log)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{Path(cmd[0]).name} did not answer on {base_url} within {timeout_s:.0f} s:\n{_tail(log)}")
        time.sleep(0.25)


class WsCounter:
    """Bytes the page receives over its websockets (Playwright's ``page.on("websocket")``).

    Attach before the page loads; ``mark()`` starts a new count; ``since_mark`` is the byte count
    since then, ``last_frame_s`` the monotonic time of the last frame received.
    """

    def __init__(self, page) -> None:
        self.total = 0
        self.frames = 0
        self._mark = 0
        self.last_frame_s = time.monotonic()
        page.on("websocket", self._on_ws)

    def _on_ws(self, ws) -> None:
        ws.on("framereceived", self._on_frame)

    def _on_frame(self, payload) -> None:
        n = len(payload) if isinstance(payload, (bytes, bytearray)) else len(payload.encode("utf-8", "replace"))
        self.total += n
        self.frames += 1
        self.last_frame_s = time.monotonic()

    def mark(self) -> None:
        self._mark = self.total

    @property
    def since_mark(self) -> int:
        return self.total - self._mark


def settle(page, ws: WsCounter, t0_js: float, *, quiet_s: float = 0.4, timeout_s: float = 120.0,
           need_draw: bool = True) -> float:
    """Wait until the page is quiet after an action; return the seconds from the action to the
    last thing it caused: a plot draw or, for an action that redraws no plot (a step that only
    changes the text), the last websocket frame.

    ``t0_js`` is ``performance.now()`` in the page at the action. Quiet means no websocket frame and
    no plot draw for ``quiet_s``; with ``need_draw`` a draw after ``t0_js`` is awaited first.
    """
    deadline = time.monotonic() + timeout_s
    if need_draw:
        page.wait_for_function("t0 => (window.__hetschedLastDraw || 0) > t0", arg=t0_js, timeout=timeout_s * 1000)
    last_draw = None
    while time.monotonic() < deadline:
        d = page.evaluate("() => window.__hetschedLastDraw || 0")
        if d == last_draw and time.monotonic() - ws.last_frame_s >= quiet_s:
            break
        last_draw = d
        page.wait_for_timeout(int(quiet_s * 1000))
    # the last frame's time on the page's clock
    now_js, now = page.evaluate("() => performance.now()"), time.monotonic()
    frame_js = now_js - (now - ws.last_frame_s) * 1000
    ends = [e for e in (last_draw or 0, frame_js) if e > t0_js]
    return (max(ends) - t0_js) / 1000 if ends else 0.0
