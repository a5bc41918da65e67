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
    assert d.panels["memory"].children[0] is d.panels["memory"].controls and d.page_style.value == ""


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

    server = start_app(tmp_path, pool=1, max_students=1, wait_pool_s=240,
                       extra_args=["--MappingKernelManager.cull_idle_timeout=4", "--MappingKernelManager.cull_interval=1"])
    try:
        assert server.status()["pool_ready"] == 1
        t = time.monotonic()
        code, _h, body = _get(server.base_url + "/")
        page_s = time.monotonic() - t
        assert code == 200 and b'"kernelId"' in body, server.log_tail()
        assert "page served by warm kernel" in server.log_tail(80)
        assert page_s < 30  # the warm kernel's notebook only hands out its prepared dashboard
        st = server.status()
        assert st["students"] == 1
        code, headers, body = _get(server.base_url + "/")
        assert code == 503 and b"The class is full" in body and headers.get("Retry-After") == "30"
        # plotly.js from the server, cacheable and compressed, instead of through each kernel
        code, headers, js = _get(server.base_url + "/hetsched/plotly.min.js?v=1")
        assert code == 200 and headers.get("Content-Encoding") == "gzip" and "immutable" in headers["Cache-Control"]
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
