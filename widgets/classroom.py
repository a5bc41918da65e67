"""``hetsched app`` for a class: Voila with warm kernels ready ahead of demand and a bounded class.

Plain Voila starts a kernel for every page and runs the dashboard notebook in it (imports, panels,
the first tab's result: ~3 s of CPU on this 2-core machine), so thirty students who open the page
at once wait for thirty of those, one after another (issue 32). This module is Voila with three
additions, run by ``hetsched app`` as ``python -m hetsched.widgets.classroom NOTEBOOK [options]``:

* **A pool of warm kernels** (:class:`ClassKernelManager`, ``--ClassKernelManager.pool_size``): each
  is started before any student arrives and runs :data:`WARM_CODE` (the imports and
  :func:`hetsched.widgets.dashboard.prepare`: a dashboard with its first tab computed). A page
  takes one (the notebook's ``Dashboard.prepared()`` then hands it out at once) and the pool
  refills in the background, one kernel at a time and at low CPU priority while students are
  connected (all cores while nobody is), so refilling does not slow the class's clicks.
* **A bounded class** (``--ClassKernelManager.max_students``): past it, a page gets a plain
  "the class is full, try again" answer (HTTP 503 with ``Retry-After``, a page that retries by
  itself) instead of a kernel the machine has no memory or CPU for.
* **Culling kept**: idle students' kernels are culled as Voila's options say; warm kernels waiting
  in the pool never are.

The notebook itself is unchanged Voila: a kernel the pool cannot provide (pool empty, or a notebook
other than the pool's) is started and warmed on demand. The page's query string (``?scenario=...``)
reaches the dashboard through the page itself (:class:`hetsched.widgets.address.PageAddress`),
because a pooled kernel was started before the request existed.

This module imports Voila and Jupyter Server; the core never imports it (only its name is in
:mod:`hetsched.launch`).
"""

from __future__ import annotations

import asyncio
import contextvars
import html
import json
import os
import time
import uuid
from typing import Any

from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
from jupyter_server.utils import url_path_join
from tornado import web
from traitlets import Float, Int, Unicode
from jinja2.bccache import Bucket, BytecodeCache
from voila import notebook_renderer as voila_renderer
from voila.app import Voila
from voila.exporter import VoilaExporter
from voila.tornado.handler import TornadoVoilaHandler

from .figure import FIGURE_URL_ENV, PLOTLY_URL_ENV

__all__ = ["ClassKernelManager", "ClassroomVoila", "WARM_CODE", "full_page", "plotly_url", "figure_url", "early_plotly", "main"]

#: what a warm kernel runs before any student arrives. pandas imports pyarrow when it is installed
#: (the ``dask`` extra) and keeps ~60 MB of it per kernel for nothing the dashboard uses: a dashboard
#: kernel runs without it, as a ``hetsched[lab]`` install does.
WARM_CODE = """\
import sys
sys.modules.setdefault("pyarrow", None)
from hetsched.widgets.dashboard import prepare as _hetsched_prepare
_hetsched_prepare()
del _hetsched_prepare
"""

#: JupyterLab extensions the dashboard's page does without (``hetsched app`` serving the dashboard)
DASHBOARD_DENYLIST: tuple[str, ...] = ("jupyterlab-plotly",)

#: the page a request being served sets, so that start_kernel knows which page wants a kernel
_REQUEST: contextvars.ContextVar[dict | None] = contextvars.ContextVar("hetsched_request", default=None)


class ClassKernelManager(AsyncMappingKernelManager):
    """Jupyter Server's kernel manager with a pool of warm kernels and a bound on students' kernels.

    A *student kernel* is one serving a page; *pool kernels* are warming or ready. The pool refills
    while fewer than ``pool_size`` are ready or warming and the kernels alive number fewer than
    ``max_students + pool_size`` (the most this server ever runs: what its memory must hold).
    """

    pool_size = Int(0, config=True, help="warm kernels kept ready for the next pages (0: none, Voila as usual)")
    max_students = Int(0, config=True, help="most kernels serving pages at once; past it a page says the class "
                                            "is full (0: no limit)")
    warm_code = Unicode(WARM_CODE, config=True, help="code a kernel runs before it serves a page")
    warm_timeout = Float(180.0, config=True, help="seconds a kernel may take to start and run warm_code")
    fill_delay = Float(1.0, config=True, help="seconds between a page taking a warm kernel and the pool "
                                              "starting another")
    disconnect_grace_s = Float(30.0, config=True, help="a student's kernel with no page connected this long is shut "
                                                       "down (a closed tab, a reload); 0: only the idle culler")
    fill_nice = Int(10, config=True, help="nice value of kernels warming while students are connected (they get "
                                          "the server's own back when a page takes them; where the OS does not "
                                          "allow that, kernels warm at the server's priority)")

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._ready: list[str] = []          # warm, waiting for a page (oldest first)
        self._warming: set[str] = set()      # pool kernels starting or running warm_code
        self._admitting = 0                  # pages admitted that have no kernel yet
        self._wake: asyncio.Event | None = None
        self._filler: asyncio.Task | None = None
        self.pool_path = ""                  # API path of the pooled notebook's folder (the kernels' cwd)
        self.pool_notebook: str | None = None  # the notebook pooled kernels are warmed for (None: any)
        self.pool_kernel_name = "python3"
        self.kernel_env: dict[str, str] = {}  # more environment of every kernel (where the page loads plotly.js)
        self.warm_seconds: list[float] = []  # how long each warm-up took (the log and the benchmark say)
        self._base_nice = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else 0
        self._can_renice = _can_raise_priority(self._base_nice + self.fill_nice, self._base_nice)

    # -- counts -----------------------------------------------------------------------------
    def pool_ids(self) -> set[str]:
        return set(self._ready) | self._warming

    def students(self) -> int:
        """Kernels serving pages now (every kernel that is not in the pool)."""
        return len([k for k in self.list_kernel_ids() if k not in self._ready and k not in self._warming])

    def full(self) -> bool:
        """Whether another page would take the class past ``max_students``."""
        return self.max_students > 0 and self.students() + self._admitting >= self.max_students

    def status(self) -> dict[str, Any]:
        """What the pool and the class look like now (``/hetsched/status`` serves it as JSON)."""
        return {"students": self.students(), "max_students": self.max_students, "pool_ready": len(self._ready),
                "pool_warming": len(self._warming), "pool_size": self.pool_size, "admitting": self._admitting,
                "kernels": len(self.list_kernel_ids()),
                "warm_s_median": sorted(self.warm_seconds)[len(self.warm_seconds) // 2] if self.warm_seconds else None}

    # -- admission (the page handler) --------------------------------------------------------------
    def admit(self, notebook: str | None) -> contextvars.Token:
        """A page is admitted: count it until it gets its kernel (so that a burst of pages cannot
        take the class past ``max_students`` between the check and the kernel start)."""
        self._admitting += 1
        return _REQUEST.set({"notebook": notebook, "counted": True})

    def finish_admission(self, token: contextvars.Token) -> None:
        req = _REQUEST.get()
        if req is not None and req.get("counted"):
            req["counted"] = False
            self._admitting -= 1
        _REQUEST.reset(token)

    def _took_kernel(self) -> None:
        req = _REQUEST.get()
        if req is not None and req.get("counted"):
            req["counted"] = False
            self._admitting -= 1

    # -- kernels --------------------------------------------------------------------------------
    async def start_kernel(self, *, kernel_id: str | None = None, path: str | None = None, **kwargs: Any) -> str:
        """A kernel for a page: a warm one from the pool when there is one for this notebook, else one
        started and warmed now."""
        req = _REQUEST.get()
        pooled_page = req is not None and (self.pool_notebook is None or req.get("notebook") == self.pool_notebook)
        name = kwargs.get("kernel_name") or self.pool_kernel_name
        if kernel_id is None and pooled_page and self._ready and name == self.pool_kernel_name:
            kid = self._ready.pop(0)
            self._took_kernel()
            self._renice(kid, self._base_nice)
            kernel = self.get_kernel(kid)
            kernel.last_activity = _utcnow()  # the culler counts idleness from the page, not from the warm-up
            self.log.info("hetsched: page served by warm kernel %s (%s)", kid, self.status())
            self._refill()
            return kid
        kwargs["env"] = {**(kwargs.get("env") or os.environ), **self.kernel_env}
        kid = await super().start_kernel(kernel_id=kernel_id, path=path, **kwargs)
        self._took_kernel()
        if pooled_page:
            # a kernel for the pooled notebook, started now: warmed the same way, so the notebook's
            # Dashboard.prepared() finds its dashboard; at the server's priority (a student waits)
            await self._warm(kid)
            self._refill()
        return kid

    async def shutdown_kernel(self, kernel_id: str, now: bool = False, restart: bool = False) -> None:
        if kernel_id in self._ready:
            self._ready.remove(kernel_id)
        await super().shutdown_kernel(kernel_id, now=now, restart=restart)
        self._refill()  # a student left: there may be room for the pool again

    def notify_disconnect(self, kernel_id: str) -> None:
        """A page's websocket closed: if no page is connected ``disconnect_grace_s`` later (a closed tab,
        a reload: not a network blip, which reconnects), its place in the class is freed. Voila's page
        asks for this itself when it closes, but that request is not always made (or is refused), and
        the idle culler waits minutes: a class that reloads would fill up with kernels nobody sees."""
        super().notify_disconnect(kernel_id)
        if self.disconnect_grace_s > 0 and self._kernel_connections.get(kernel_id, 0) <= 0:
            asyncio.get_event_loop().call_later(self.disconnect_grace_s,
                                                lambda: asyncio.ensure_future(self._shutdown_if_gone(kernel_id)))

    async def _shutdown_if_gone(self, kernel_id: str) -> None:
        if kernel_id in self.list_kernel_ids() and kernel_id not in self.pool_ids() \
                and self._kernel_connections.get(kernel_id, 0) <= 0:
            self.log.info("hetsched: no page connected to kernel %s for %.0f s: shut down", kernel_id,
                          self.disconnect_grace_s)
            await self.shutdown_kernel(kernel_id)

    async def cull_kernel_if_idle(self, kernel_id: str) -> None:
        if kernel_id in self._ready or kernel_id in self._warming:
            return  # waiting in the pool is not idleness
        await super().cull_kernel_if_idle(kernel_id)

    # -- the pool -------------------------------------------------------------------------------
    def start_pool(self) -> None:
        """Start filling the pool (the app calls it once the event loop runs)."""
        if self.pool_size <= 0 or self._filler is not None:
            return
        self._wake = asyncio.Event()
        self._filler = asyncio.ensure_future(self._fill_forever())
        self.log.info("hetsched: warming a pool of %d kernel(s) for %s (at most %s students)", self.pool_size,
                      self.pool_notebook or "every notebook", self.max_students or "any number of")
        if not self._can_renice:
            self.log.info("hetsched: the OS does not let this server give a kernel its priority back, so pool "
                          "kernels warm at normal priority (one at a time while students are connected)")

    def _refill(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _pool_short(self, in_flight: int) -> bool:
        """Whether the pool should warm one more kernel, ``in_flight`` being warmed already."""
        room = self.max_students <= 0 or self.students() + len(self._ready) + in_flight < self.max_students + self.pool_size
        return len(self._ready) + in_flight < self.pool_size and room

    async def _fill_forever(self) -> None:
        assert self._wake is not None
        tasks: set[asyncio.Task] = set()
        while True:
            self._wake.clear()
            # nobody connected: warm as many at once as there are cores; a class connected: one at a
            # time, at low priority, a little after a page took one (pages arriving together share it)
            quiet = self.students() == 0
            parallel = (os.cpu_count() or 1) if quiet else 1
            if self._pool_short(len(tasks)) and len(tasks) < parallel:
                if not quiet:
                    await asyncio.sleep(self.fill_delay)
                while self._pool_short(len(tasks)) and len(tasks) < parallel:
                    t = asyncio.ensure_future(self._add_warm_kernel(low_priority=not quiet))
                    tasks.add(t)
                    t.add_done_callback(lambda t: (tasks.discard(t), self._refill()))
            await self._wake.wait()

    async def _add_warm_kernel(self, *, low_priority: bool) -> None:
        kid = str(uuid.uuid4())
        self._warming.add(kid)  # before it exists: a starting pool kernel is never counted as a student
        try:
            await super().start_kernel(kernel_id=kid, path=self.pool_path, kernel_name=self.pool_kernel_name,
                                       env={**os.environ, **self.kernel_env, "HETSCHED_POOL_KERNEL": "1"})
            if low_priority:
                self._renice(kid, self._base_nice + self.fill_nice)
            if not await self._warm(kid):
                raise RuntimeError("warm-up failed")
            self._warming.discard(kid)
            if kid in self.list_kernel_ids():
                self._ready.append(kid)
                self.log.info("hetsched: warm kernel %s ready (%s)", kid, self.status())
        except Exception as e:  # noqa: BLE001 - a kernel that would not warm must not stop the pool
            self.log.warning("hetsched: a pool kernel did not warm (%s: %s); trying again in 10 s", type(e).__name__, e)
            self._warming.discard(kid)
            if kid in self.list_kernel_ids():
                await super().shutdown_kernel(kid, now=True)
            await asyncio.sleep(10)

    async def _warm(self, kernel_id: str) -> bool:
        """Run ``warm_code`` in the kernel (the imports and a prepared dashboard); returns whether it ran."""
        t0 = time.monotonic()
        client = self.get_kernel(kernel_id).client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=self.warm_timeout)
            msg_id = client.execute(self.warm_code, store_history=False, allow_stdin=False)
            deadline = time.monotonic() + self.warm_timeout
            while True:
                msg = await client.get_shell_msg(timeout=max(1.0, deadline - time.monotonic()))
                if msg.get("parent_header", {}).get("msg_id") == msg_id:
                    break
            content = msg.get("content", {})
            if content.get("status") != "ok":
                self.log.warning("hetsched: warm-up of kernel %s failed: %s: %s", kernel_id, content.get("ename"),
                                 content.get("evalue"))
                return False
            self.warm_seconds.append(time.monotonic() - t0)
            return True
        except Exception as e:  # noqa: BLE001 - said, and the kernel is treated as not warmed
            self.log.warning("hetsched: warm-up of kernel %s did not finish: %s: %s", kernel_id, type(e).__name__, e)
            return False
        finally:
            client.stop_channels()

    def _renice(self, kernel_id: str, nice: int) -> None:
        if not self._can_renice:
            return
        try:
            km = self.get_kernel(kernel_id)
            pid = getattr(km.provisioner, "pid", None) or getattr(getattr(km.provisioner, "process", None), "pid", None)
            if pid:
                os.setpriority(os.PRIO_PROCESS, pid, nice)
        except (OSError, KeyError, AttributeError) as e:
            self.log.debug("hetsched: could not set the priority of kernel %s: %s", kernel_id, e)


def _can_raise_priority(low: int, back_to: int) -> bool:
    """Whether this process may give a process at nice ``low`` the nice ``back_to`` again (root,
    CAP_SYS_NICE, or an RLIMIT_NICE that allows it)."""
    if not hasattr(os, "setpriority"):
        return False
    if os.geteuid() == 0:
        return True
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NICE)
    except (ImportError, OSError, AttributeError):
        return False
    return soft == resource.RLIM_INFINITY or 20 - soft <= back_to


def _utcnow():
    from jupyter_server._tz import utcnow

    return utcnow()


def full_page(students: int, retry_s: int = 30) -> str:
    """The page a student gets when the class is full: what happened and what to do, in plain words.

    >>> "try again" in full_page(30)
    True
    """
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="{retry_s}">
<title>The class is full</title></head>
<body style="font-family:sans-serif;max-width:40em;margin:4em auto;line-height:1.5">
<h1>The class is full</h1>
<p>This server runs at most <b>{students}</b> dashboards at once, so that every student's clicks stay quick,
and all {students} are in use.</p>
<p>Please try again in a minute: this page tries again by itself every {retry_s} seconds. If a classmate closes
a dashboard tab, or one stays idle, a place frees up.</p>
<p style="color:#555">(For the teacher: <code>hetsched app --max-students N</code> sets the limit;
<code>hetsched app --help</code> says how much memory each student takes.)</p>
</body></html>"""


class ClassVoilaHandler(TornadoVoilaHandler):
    """Voila's page handler, which first asks the kernel manager whether the class has room."""

    RETRY_S = 30

    @web.authenticated
    async def get(self, path: str | None = None) -> None:
        km = self.kernel_manager
        if not isinstance(km, ClassKernelManager):
            return await super().get(path)
        if km.full():
            self.set_status(503)
            self.set_header("Retry-After", str(self.RETRY_S))
            self.set_header("Content-Type", "text/html; charset=utf-8")
            self.set_header("Cache-Control", "no-store")
            self.log.warning("hetsched: the class is full (%s): a page was turned away", km.status())
            self.finish(full_page(km.max_students, self.RETRY_S))
            return
        # Voila's page asks to shut its kernel down when it closes (a POST that must carry the _xsrf
        # cookie, which a page served from a warm kernel was not given): set it now
        _ = self.xsrf_token
        notebook = self.notebook_path or path
        token = km.admit(notebook)
        self._head_done = False
        try:
            await super().get(path)
        finally:
            km.finish_admission(token)

    def write(self, chunk: Any) -> None:
        # the page's <head> gets plotly.js on its way at once (see early_plotly); Voila streams the page,
        # and the head is in its first chunk
        if not getattr(self, "_head_done", True) and isinstance(chunk, str) and "</head>" in chunk:
            self._head_done = True
            url = plotly_url(self.base_url)
            # the figure module too: compiled before the first figure asks for it (figure_esm)
            module = html.escape(figure_url(self.base_url), quote=True)
            chunk = chunk.replace("</head>", early_plotly(url) + f'<link rel="modulepreload" href="{module}">' + "</head>", 1)
        super().write(chunk)


def early_plotly(url: str) -> str:
    """A script for the page's head that fetches and runs plotly.js at once, from ``url``.

    Left to the first figure, plotly.js is asked for once the page has loaded its scripts, talked to
    its kernel and rendered the widgets (~1.4 s into a page on this 2-core machine), and then takes
    ~0.5 s to fetch and evaluate before the first draw. Fetched from the head (a preload) and run
    once the page's own scripts have loaded, it is evaluated while the page waits for its kernel;
    the figure widget takes the same promise
    (``globalThis.__hetschedPlotlyEarly``) and falls back to its own ways if it fails.

    >>> "__hetschedPlotlyEarly" in early_plotly("/hetsched/plotly.min.js?v=1")
    True
    """
    src = html.escape(url, quote=True)
    return (f'<link rel="preload" href="{src}" as="script">'
            "<script>(function () { const g = globalThis;"
            " g.__hetschedPlotlyEarly = new Promise(function (resolve, reject) {"
            " const s = document.createElement('script'); s.async = true;"
            # a UMD bundle: with an AMD loader on the page it would register itself there instead of as a global
            " s.onload = function () { g.Plotly && g.Plotly.react ? resolve(g.Plotly) : reject(new Error('no Plotly')); };"
            " s.onerror = function () { reject(new Error('plotly.js did not load')); };"
            f" s.src = {json.dumps(url)};"
            " const run = function () { const d = g.define; g.define = undefined; document.head.appendChild(s);"
            " const back = function () { if (g.define === undefined) g.define = d; };"
            " s.addEventListener('load', back); s.addEventListener('error', back); };"
            # run once the page's own scripts have (they draw the page): then the page waits for its kernel
            " if (document.readyState === 'complete') run(); else g.addEventListener('load', run); });"
            " g.__hetschedPlotlyEarly.catch(function () {}); })();</script>")


class PlotlyHandler(web.RequestHandler):
    """``/hetsched/plotly.min.js?v=VERSION``: plotly.js for the page's figures, gzip-compressed once and
    cached by the browser (the URL names the version), so that a reload takes it, compiled, from the
    browser's cache and no kernel sends it over its websocket (:data:`~hetsched.widgets.figure.PLOTLY_URL_ENV`)."""

    _gz: bytes | None = None

    def get(self) -> None:
        from hetsched.widgets.figure import plotly_js_gz

        self.set_header("Content-Type", "text/javascript; charset=utf-8")
        self.set_header("Cache-Control", "public, max-age=31536000, immutable")
        if "gzip" in self.request.headers.get("Accept-Encoding", ""):
            if PlotlyHandler._gz is None:
                PlotlyHandler._gz = plotly_js_gz(True)
            self.set_header("Content-Encoding", "gzip")
            self.set_header("Vary", "Accept-Encoding")
            self.finish(PlotlyHandler._gz)
        else:
            self.finish(plotly_js_gz(False))


class FigureModuleHandler(web.RequestHandler):
    """``/hetsched/figure.js?v=HASH``: the figure widget's front-end module, fetched and compiled once
    per page instead of once per figure (:func:`hetsched.widgets.figure.figure_esm`)."""

    def get(self) -> None:
        from hetsched.widgets.figure import figure_js

        self.set_header("Content-Type", "text/javascript; charset=utf-8")
        self.set_header("Cache-Control", "public, max-age=31536000, immutable")
        self.finish(figure_js())


def figure_url(base_url: str) -> str:
    """The URL (on the page's server) a page of ``hetsched app`` loads the figure module from.

    >>> figure_url("/").startswith("/hetsched/figure.js?v=")
    True
    """
    from hetsched.widgets.figure import figure_js_version

    return url_path_join(base_url, "hetsched", "figure.js") + f"?v={figure_js_version()}"


def plotly_url(base_url: str) -> str:
    """The URL (on the page's server) a page of ``hetsched app`` loads plotly.js from.

    >>> plotly_url("/").startswith("/hetsched/plotly.min.js?v=")
    True
    """
    import plotly

    return url_path_join(base_url, "hetsched", "plotly.min.js") + f"?v={plotly.__version__}"


class StatusHandler(web.RequestHandler):
    """``/hetsched/status``: the pool and the class as JSON (students, pool ready and warming...)."""

    def initialize(self, kernel_manager: ClassKernelManager) -> None:
        self.km = kernel_manager

    def get(self) -> None:
        self.set_header("Cache-Control", "no-store")
        self.finish(self.km.status())


class PageKernelClient(AsyncKernelClient):
    """The kernel client Voila's page renderer connects to a student's kernel with.

    jupyter_client's ``wait_for_ready`` ends by draining the kernel's IOPub messages until none
    arrived for 0.2 s: every page waited 0.2 s in the server for nothing before its notebook ran
    (a warm kernel is idle; its page's first bytes came 0.2 s late, issue 32). This one asks for
    the kernel's info as jupyter_client does, takes the kernel's IOPub status for that request as
    proof that IOPub is connected, and drains what is already queued with a short quiet period.
    Replies are matched to their requests by message id, so a late stray message is ignored
    wherever it arrives.
    """

    #: how long IOPub must stay silent for the drain to end (the socket is local)
    iopub_quiet_s = 0.02

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (60.0 if timeout is None else timeout)
        while True:
            request = self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                reply = None
            if reply is not None and reply.get("parent_header", {}).get("msg_id") == request:
                try:
                    await self.iopub_channel.get_msg(timeout=0.2)  # IOPub connected (else ask again)
                except Empty:
                    pass
                else:
                    self._handle_kernel_info_reply(reply)
                    break
            if not await self.is_alive():
                raise RuntimeError("the kernel died before it answered kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the kernel did not answer kernel_info within {timeout} s")
        while True:
            try:
                await self.iopub_channel.get_msg(timeout=self.iopub_quiet_s)
            except Empty:
                return


class SharedTemplateCode(BytecodeCache):
    """Compiled page templates kept across a server's requests.

    Voila builds a new exporter, and with it a new Jinja environment, for every page, so each page
    compiled its 14 templates again: ~0.1 s of the server's one core per page, the largest part of
    what thirty pages at once cost the server (measured with cProfile, issue 32). The code is keyed
    by template and by sync/async compilation, and used only while the template's source is
    unchanged (its checksum).
    """

    def __init__(self) -> None:
        self._code: dict[tuple[str, bool], tuple[str, Any]] = {}

    def load_bytecode(self, bucket: Bucket) -> None:
        got = self._code.get((bucket.key, bucket.environment.is_async))
        if got is not None and got[0] == bucket.checksum:
            bucket.code = got[1]

    def dump_bytecode(self, bucket: Bucket) -> None:
        self._code[(bucket.key, bucket.environment.is_async)] = (bucket.checksum, bucket.code)


_TEMPLATE_CODE = SharedTemplateCode()


class _PageExporter(VoilaExporter):
    """Voila's exporter whose Jinja environment shares :class:`SharedTemplateCode`."""

    def _create_environment(self):
        env = super()._create_environment()
        env.bytecode_cache = _TEMPLATE_CODE
        return env


class ClassroomVoila(Voila):
    """Voila with :class:`ClassKernelManager` as its kernel manager and the class-full check on its pages."""

    description = "hetsched app: the dashboard for a class (Voila with a pool of warm kernels and a bounded class)"
    aliases = {**Voila.aliases, "pool": "ClassKernelManager.pool_size",
               "max-students": "ClassKernelManager.max_students"}
    pool_notebook = Unicode("", config=True, help="the notebook the pool warms kernels for (default: the notebook "
                                                  "served, or dashboard.ipynb when serving a folder)")

    def initialize(self, argv: Any = None) -> None:
        super().initialize(argv)
        # the pages' renderer builds its exporter by this name (voila 0.5): one shared template cache
        voila_renderer.VoilaExporter = _PageExporter
        vc = self.voila_configuration
        if "client_class" not in self.config.get("KernelManager", {}):
            # every kernel manager of this server (the pool's and the pages') connects with it
            self.config.KernelManager.client_class = f"{__name__}.PageKernelClient"
        if "multi_kernel_manager_class" not in self.config.get("VoilaConfiguration", {}):
            vc.multi_kernel_manager_class = ClassKernelManager
        if (os.path.basename(self.notebook_path or "") == "dashboard.ipynb" and not vc.extension_denylist
                and not vc.extension_allowlist):
            # the dashboard draws with its own figure widget (hetsched.widgets.figure), never with plotly's
            # JupyterLab extension, whose 4.8 MB bundle (plotly.js again) every page fetched and ran
            vc.extension_denylist = list(DASHBOARD_DENYLIST)

    def init_settings(self) -> dict:
        settings = super().init_settings()
        km = self.kernel_manager
        if isinstance(km, ClassKernelManager):
            if self.notebook_path:
                nb = os.path.relpath(self.notebook_path, self.root_dir)
            else:
                nb = self.pool_notebook or "dashboard.ipynb"
            km.pool_notebook = nb
            km.pool_path = os.path.dirname(nb)
            km.kernel_env = {PLOTLY_URL_ENV: plotly_url(self.base_url), FIGURE_URL_ENV: figure_url(self.base_url)}
            from tornado.ioloop import IOLoop

            IOLoop.current().add_callback(km.start_pool)
        return settings

    def init_handlers(self) -> list:
        handlers = [(h[0], ClassVoilaHandler, *h[2:]) if len(h) > 1 and h[1] is TornadoVoilaHandler else h
                    for h in super().init_handlers()]
        if isinstance(self.kernel_manager, ClassKernelManager):
            # before Voila's catch-all page route
            handlers[0:0] = [(url_path_join(self.server_url, r"/hetsched/status"), StatusHandler,
                              {"kernel_manager": self.kernel_manager}),
                             (url_path_join(self.server_url, r"/hetsched/plotly\.min\.js"), PlotlyHandler),
                             (url_path_join(self.server_url, r"/hetsched/figure\.js"), FigureModuleHandler)]
        return handlers


main = ClassroomVoila.launch_instance

if __name__ == "__main__":
    main()
