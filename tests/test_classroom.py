"""A class on one server (issue 32): ``hetsched app``'s options, the dashboard's links and layouts
(headless), and the classroom server itself (warm pool, a bounded class, culling), without a browser."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from hetsched.launch import DEFAULT_POOL, KERNEL_MB, app_command, auto_max_students, class_guide

E2E = Path(__file__).resolve().parent / "e2e"


# ------------------------------------------------------------------------- hetsched app's options
def test_app_command_sets_the_pool_the_class_and_the_culling():
    cmd = app_command(open_browser=False, pool=30, max_students=40, cull_after_s=120, extra=["--Voila.ip=0.0.0.0"])
    assert cmd[1:3] == ["-m", "hetsched.widgets.classroom"]
    assert "--ClassKernelManager.pool_size=30" in cmd and "--ClassKernelManager.max_students=40" in cmd
    assert "--MappingKernelManager.cull_idle_timeout=120" in cmd and cmd[-1] == "--Voila.ip=0.0.0.0"
    default = app_command(open_browser=False)
    assert f"--ClassKernelManager.pool_size={DEFAULT_POOL}" in default
    assert any(re.fullmatch(r"--ClassKernelManager\.max_students=\d+", o) for o in default)
    from hetsched.errors import HetschedError

    with pytest.raises(HetschedError):
        app_command(pool=-1)


def _run_async(main):
    """``asyncio.run(main())`` in a thread of its own (its result): in the whole suite the browser tests'
    Playwright (sync API, a session fixture) keeps an event loop running in the main thread."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, main()).result()


def test_the_class_size_follows_the_memory_and_the_help_says_how_to_serve_a_class():
    gb = 2**30
    assert auto_max_students(2, available_bytes=8 * gb) == int(0.8 * 8 * gb / (KERNEL_MB * 2**20)) - 2
    assert auto_max_students(2, available_bytes=100 * 2**20) == 1  # never 0: 0 means no limit
    guide = class_guide()
    for words in ("--pool", f"{KERNEL_MB} MB", "--max-students", "?scenario=memory&tab=memory", "full", "/hetsched/status"):
        assert words in guide


def test_cli_passes_the_class_options(capsys):
    from hetsched.cli import main

    assert main(["app", "--pool", "5", "--max-students", "7", "--cull-after", "60", "--no-browser", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "pool_size=5" in out and "max_students=7" in out and "cull_idle_timeout=60" in out
    assert main(["app", "--pool", "-2", "--dry-run"]) == 2
    assert "--pool: must be an integer >= 0" in capsys.readouterr().err


# ------------------------------------------------------------------------- links and layouts
@pytest.fixture(scope="module")
def dashboard():
    from hetsched.widgets import Dashboard

    return Dashboard()


def test_a_link_opens_a_scenario_a_tab_and_a_layout(dashboard):
    d = dashboard
    assert d.apply_query("?scenario=memory&tab=memory&layout=present") == {
        "layout": "present", "scenario": "memory", "tab": "memory"}
    assert d.session.scenario == "memory" and list(d.panels)[d.tabs.selected_index] == "memory"
    assert d.link_query() == "?scenario=memory&tab=memory&layout=present" == d.address.link
    assert "?scenario=memory&amp;tab=memory&amp;layout=present" in d.link.value or \
        "?scenario=memory&tab=memory&layout=present" in d.link.value
    # the address bar follows what is shown
    d.show("executor")
    assert d.address.link == "?scenario=memory&tab=executor&layout=present"
    # the page sends its query when drawn: the same as apply_query
    d.address.query = "?layout=full&tab=Mapping"
    assert d.page_layout == "full" and list(d.panels)[d.tabs.selected_index] == "mapping"
    # what a link asks for that is not there is said, and the rest still applies
    assert d.apply_query("scenario=nope&tab=backends&layout=huge") == {"tab": "backends"}
    assert "no scenario" in d.link_message.value and "no page layout" in d.link_message.value
    assert d.apply_query("") == {} and d.link_message.value == ""


def test_every_tab_has_a_presentation_layout_with_its_figure_first(dashboard):
    from hetsched.widgets.figure import PlotlyView

    d = dashboard
    d.set_page_layout("present")
    for key, panel in d.panels.items():
        d.show(key)  # a hidden tab is laid out when first shown
        kids = list(panel.children)
        first_figure = next(i for i, c in enumerate(kids) if isinstance(c, PlotlyView))
        assert first_figure == 2, (key, [type(c).__name__ for c in kids])  # the controls' row, the settings, the figure
        assert "hetsched-present-bar" in kids[0]._dom_classes
        assert kids[1].layout.display == "none"  # every other control: behind "settings"
        assert "hetsched-present-more" in kids[-1]._dom_classes  # the rest: behind a disclosure
        shown = [w for w in kids if isinstance(w, PlotlyView)]
        assert shown == panel.main_figures()
        # nothing is drawn twice: every widget of the full layout appears once
        from hetsched.widgets.base import _walk

        ids = [id(w) for w in _walk(kids) if isinstance(w, PlotlyView)]
        assert len(ids) == len(set(ids)), key
    assert "What to notice:" in d.panels["memory"].notice_line.value
    assert "<details" in d.panels["memory"].notice_line.value
    assert d.intro.layout.display == "none" and "display: none" in d.page_style.value
    d.set_page_layout("full")
    mem = d.panels["memory"]
    assert list(mem.children[:2]) == [mem.machine_bar, mem.controls] and d.page_style.value == ""  # as built (issue 33's bar first)


def test_a_hidden_tab_builds_no_views_until_shown():
    from hetsched.widgets import Dashboard

    d = Dashboard(tabs=("graph", "executor"))
    assert len(d.panels["graph"].children) > 0 and d.panels["executor"].children == ()
    d.set_page_layout("present")
    assert d.panels["executor"].children == ()  # laid out when shown, in the layout of the moment
    d.show("executor")
    assert "hetsched-present-bar" in d.panels["executor"].children[0]._dom_classes


def test_a_prepared_dashboard_is_handed_out_once():
    from hetsched.widgets.dashboard import Dashboard, prepare

    d = prepare(tabs=("graph",))
    assert Dashboard.prepared(tabs=("graph",)) is d
    assert Dashboard.prepared(tabs=("graph",)) is not d


# ------------------------------------------------------------------------- the classroom server
def _get(url: str, timeout: float = 120) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.mark.slow
def test_warm_pool_bounded_class_and_culling(tmp_path):
    """Pool of 1, at most 1 student: the first page takes the warm kernel at once, the second is told
    plainly that the class is full; an idle student's kernel is culled, a pooled one never is."""
    import sys

    sys.path.insert(0, str(E2E))
    from e2e_helpers import start_app

    from hetsched.widgets.classroom import figure_url

    server = start_app(tmp_path, pool=1, max_students=1, wait_pool_s=240,
                       extra_args=["--MappingKernelManager.cull_idle_timeout=4", "--MappingKernelManager.cull_interval=1"])
    try:
        assert server.status()["pool_ready"] == 1
        t = time.monotonic()
        code, _h, body = _get(server.base_url + "/")
        page_s = time.monotonic() - t
        assert code == 200 and b'"kernelId"' in body, server.log_tail()
        # the head asks for plotly.js at once; the dashboard's page loads no plotly JupyterLab extension
        head = body.split(b"</head>")[0]
        assert b'rel="preload"' in head and b"__hetschedPlotlyEarly" in head and b"/hetsched/plotly.min.js?v=" in head
        assert b"jupyterlab-plotly" not in body and b"anywidget" in body
        assert "page served by warm kernel" in server.log_tail(80)
        assert page_s < 30  # the warm kernel's notebook only hands out its prepared dashboard
        st = server.status()
        assert st["students"] == 1
        code, headers, body = _get(server.base_url + "/")
        assert code == 503 and b"The class is full" in body and headers.get("Retry-After") == "30"
        # plotly.js from the server, cacheable and compressed, instead of through each kernel
        code, headers, js = _get(server.base_url + "/hetsched/plotly.min.js?v=1")
        assert code == 200 and headers.get("Content-Encoding") == "gzip" and "immutable" in headers["Cache-Control"]
        # the figure's front-end module, once per page (each figure carries a two-line import of it)
        from hetsched.widgets.figure import _ESM, figure_esm

        url = figure_url("/")
        code, headers, js = _get(server.base_url + url)
        assert code == 200 and js.decode() == _ESM and "immutable" in headers["Cache-Control"]
        assert url in figure_esm(url) and len(figure_esm(url)) < 300
        # the student (no page connected) goes idle and is culled; the pool kernel is kept
        deadline = time.monotonic() + 90
        while server.status()["students"] and time.monotonic() < deadline:
            time.sleep(1)
        st = server.status()
        assert st["students"] == 0 and st["pool_ready"] + st["pool_warming"] >= 1, st
        # room again: a page is served
        code, _h, _b = _get(server.base_url + "/")
        assert code == 200
    finally:
        server.stop()
    log = server.log.read_text()
    assert "Traceback" not in log, log[-3000:]


# ------------------------------------------------------------------------- the pool's bookkeeping
# ClassKernelManager's decisions (who counts as a student, when the class is full, which page takes a
# warm kernel, when the pool warms another) on fake kernels: no kernel process is started.
class _FakeKernel:
    def __init__(self) -> None:
        self.last_activity = None


@pytest.fixture
def km(monkeypatch):
    """A ClassKernelManager whose kernels are dictionary entries: Jupyter's own start and shutdown are
    replaced by ones that add and remove an entry (and record what was asked)."""
    from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager

    from hetsched.widgets.classroom import ClassKernelManager

    calls: dict[str, list] = {"started": [], "shut": [], "culled": [], "warmed": []}

    async def start(self, *, kernel_id=None, path=None, **kw):
        kid = kernel_id or f"new{len(calls['started'])}"
        self._kernels[kid] = _FakeKernel()
        calls["started"].append((kid, path, kw.get("env", {}).get("HETSCHED_PLOTLY_URL")))
        return kid

    async def shutdown(self, kernel_id, now=False, restart=False):
        self._kernels.pop(kernel_id, None)
        calls["shut"].append(kernel_id)

    async def cull(self, kernel_id):
        calls["culled"].append(kernel_id)

    monkeypatch.setattr(AsyncMappingKernelManager, "start_kernel", start)
    monkeypatch.setattr(AsyncMappingKernelManager, "shutdown_kernel", shutdown)
    monkeypatch.setattr(AsyncMappingKernelManager, "cull_kernel_if_idle", cull)
    m = ClassKernelManager(pool_size=2, max_students=3, fill_delay=0.0)
    m.pool_notebook = "dashboard.ipynb"
    m.kernel_env = {"HETSCHED_PLOTLY_URL": "/hetsched/plotly.min.js?v=1"}

    async def warm(kid):
        calls["warmed"].append(kid)
        return True

    monkeypatch.setattr(m, "_warm", warm)
    monkeypatch.setattr(m, "_renice", lambda kid, nice: None)
    m.calls = calls
    return m


def _pool(m, ready=(), warming=(), students=()):
    for kid in (*ready, *warming, *students):
        m._kernels[kid] = _FakeKernel()
    m._ready[:] = list(ready)
    m._warming = set(warming)


def test_pool_kernels_are_not_students_and_pages_count_before_they_have_a_kernel(km):
    _pool(km, ready=["p1"], warming=["p2"], students=["s1", "s2"])
    assert km.students() == 2 and not km.full()
    token = km.admit("dashboard.ipynb")  # a third page, still being served: it already counts
    assert km._admitting == 1 and km.full()
    km.finish_admission(token)
    assert km._admitting == 0 and not km.full()
    # a page that got its kernel stops counting as admitted once, not twice
    token = km.admit("dashboard.ipynb")
    km._took_kernel()
    km.finish_admission(token)
    assert km._admitting == 0
    st = km.status()
    assert (st["students"], st["pool_ready"], st["pool_warming"], st["kernels"]) == (2, 1, 1, 4)
    km.max_students = 0  # no limit
    _pool(km, students=[f"s{i}" for i in range(50)])
    assert not km.full()


def test_a_page_takes_the_oldest_warm_kernel_and_the_pool_is_asked_to_refill(km):
    import asyncio

    _pool(km, ready=["old", "young"])

    async def page(notebook):
        token = km.admit(notebook)
        try:
            return await km.start_kernel(path="", kernel_name="python3")
        finally:
            km.finish_admission(token)

    async def run():
        km._wake = asyncio.Event()  # what start_pool sets up: the filler waits on it
        kid = await page("dashboard.ipynb")
        assert kid == "old" and km._ready == ["young"] and km._wake.is_set()
        assert km.get_kernel("old").last_activity is not None  # idleness counts from the page
        assert km.calls["started"] == [] and km.students() == 1 and km._admitting == 0
        # another notebook never takes the dashboard's warm kernel: a kernel of its own, not warmed
        other = await page("other.ipynb")
        assert other.startswith("new") and km._ready == ["young"] and km.calls["warmed"] == []
        assert km.calls["started"][-1][2] == "/hetsched/plotly.min.js?v=1"  # every kernel loads plotly.js from the server
        # the dashboard with the pool empty: started now and warmed the same way, so it still finds its dashboard
        await km.shutdown_kernel("young")
        assert km._ready == []
        kid = await page("dashboard.ipynb")
        assert kid in km.calls["warmed"] and km.students() == 3

    _run_async(run)


def test_the_pool_warms_up_to_its_size_within_the_class_bound(km):
    # pool_size 2, max_students 3: at most 5 kernels ever
    _pool(km)
    assert km._pool_short(0) and km._pool_short(1) and not km._pool_short(2)
    _pool(km, ready=["p1"], students=["s1", "s2", "s3"])
    assert km._pool_short(0)  # 3 students + 1 ready < 3 + 2
    assert not km._pool_short(1)  # a fifth kernel is the most this server runs
    _pool(km, ready=["p1", "p2"], students=["s1"])
    assert not km._pool_short(0)
    km.pool_size = 0
    _pool(km)
    assert not km._pool_short(0)


def test_the_filler_fills_the_pool_and_refills_it_after_a_page(km):
    import asyncio

    import itertools

    most, ids = [], itertools.count()

    async def add(*, low_priority):
        kid = f"w{next(ids)}"
        km._warming.add(kid)
        km._kernels[kid] = _FakeKernel()
        await asyncio.sleep(0.01)
        km.calls["warmed"].append((kid, low_priority))
        km._warming.discard(kid)
        km._ready.append(kid)
        most.append(len(km._ready) + len(km._warming))

    km._add_warm_kernel = add

    async def until(cond, s=5.0):
        t = time.monotonic()
        while not cond():
            assert time.monotonic() - t < s, km.status()
            await asyncio.sleep(0.005)

    async def run():
        km.start_pool()
        await until(lambda: len(km._ready) == 2)
        await asyncio.sleep(0.05)
        assert len(km._ready) == 2 and max(most) == 2  # never more than the pool's size
        assert all(not low for _k, low in km.calls["warmed"])  # nobody connected: full priority
        token = km.admit("dashboard.ipynb")
        kid = await km.start_kernel(path="")
        km.finish_admission(token)
        assert km.students() == 1
        await until(lambda: len(km._ready) == 2)
        assert km.calls["warmed"][-1][1] is True  # a class connected: the refill warms at low priority
        km._filler.cancel()

    _run_async(run)


def test_pool_kernels_are_never_culled_and_a_closed_page_frees_its_place(km):
    import asyncio

    _pool(km, ready=["p1"], warming=["p2"], students=["s1"])

    async def run():
        await km.cull_kernel_if_idle("p1")
        await km.cull_kernel_if_idle("p2")
        await km.cull_kernel_if_idle("s1")
        assert km.calls["culled"] == ["s1"]
        # a shut-down warm kernel leaves the pool
        await km.shutdown_kernel("p1")
        assert km._ready == [] and "p1" not in km.list_kernel_ids()
        # a page that closes: its kernel is shut down after the grace time unless a page reconnects
        km.disconnect_grace_s = 0.05
        km._kernel_connections.update({"s1": 1, "s2": 1})
        km._kernels["s2"] = _FakeKernel()
        km.notify_disconnect("s1")
        km.notify_disconnect("s2")
        km._kernel_connections["s2"] += 1  # s2 reloaded in time (a network blip)
        await asyncio.sleep(0.2)
        assert "s1" in km.calls["shut"] and "s2" not in km.calls["shut"] and km.students() == 1

    _run_async(run)


def test_a_kernel_gets_its_priority_back_only_where_the_os_allows(monkeypatch):
    import resource

    from hetsched.widgets import classroom

    monkeypatch.setattr(classroom.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(resource, "getrlimit", lambda _r: (0, 0))  # the usual user: can only lower priority
    assert not classroom._can_raise_priority(10, 0)
    monkeypatch.setattr(resource, "getrlimit", lambda _r: (20, 20))  # RLIMIT_NICE 20: back to nice 0 allowed
    assert classroom._can_raise_priority(10, 0) and not classroom._can_raise_priority(10, -5)
    monkeypatch.setattr(resource, "getrlimit", lambda _r: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert classroom._can_raise_priority(10, -5)
    monkeypatch.setattr(classroom.os, "geteuid", lambda: 0)
    monkeypatch.setattr(resource, "getrlimit", lambda _r: (0, 0))
    assert classroom._can_raise_priority(10, 0)  # root


def test_the_full_page_says_the_limit_and_retries_by_itself():
    from hetsched.widgets.classroom import full_page, plotly_url

    page = full_page(30, retry_s=45)
    assert "<b>30</b>" in page and 'content="45"' in page and "--max-students" in page
    import plotly

    assert plotly_url("/class/") == f"/class/hetsched/plotly.min.js?v={plotly.__version__}"


def test_page_templates_are_compiled_once_per_server_not_once_per_page():
    """Voila builds a Jinja environment per page; the classroom's shares compiled templates (issue 32)."""
    import jinja2

    from hetsched.widgets.classroom import SharedTemplateCode

    cache = SharedTemplateCode()
    source = {"page.html": "{% for x in xs %}<b>{{ x }}</b>{% endfor %}"}

    def env(is_async: bool = False, src: dict = source) -> jinja2.Environment:
        e = jinja2.Environment(loader=jinja2.DictLoader(src), enable_async=is_async, autoescape=True)
        e.bytecode_cache = cache
        return e

    assert env().get_template("page.html").render(xs=[1, 2]) == "<b>1</b><b>2</b>"
    second = env()
    second.compile = None  # a second page's environment must not compile the template again
    assert second.get_template("page.html").render(xs=[3]) == "<b>3</b>"
    # async pages get their own compiled code; an edited template is compiled anew
    assert env(True).get_template("page.html") is not None
    edited = env(src={"page.html": "<i>{{ xs | length }}</i>"})
    assert edited.get_template("page.html").render(xs=[1, 2, 3]) == "<i>3</i>"


def test_pages_connect_to_their_kernel_without_waiting_for_silence():
    """The classroom's kernel client: ready once the kernel answered and IOPub is connected (issue 32)."""
    from jupyter_client.manager import AsyncKernelManager

    from hetsched.widgets.classroom import ClassroomVoila, PageKernelClient

    app = ClassroomVoila()
    app.initialize([str(Path(__file__).resolve().parents[1] / "notebooks" / "dashboard.ipynb"), "--no-browser"])
    assert app.config.KernelManager.client_class == "hetsched.widgets.classroom.PageKernelClient"

    async def run() -> dict:
        km = AsyncKernelManager(client_class="hetsched.widgets.classroom.PageKernelClient")
        await km.start_kernel()
        kc = km.client()
        try:
            assert isinstance(kc, PageKernelClient)
            kc.start_channels()
            await kc.wait_for_ready(timeout=60)
            reply = await kc.execute_interactive("x = 6 * 7", timeout=30)
            return reply["content"]
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    assert _run_async(run)["status"] == "ok"
