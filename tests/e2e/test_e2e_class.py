"""A class on one ``hetsched app`` server in Chromium (issue 32): three students at once on warm
kernels, the "class is full" page, links to a scenario and tab, and the presentation layout (each
tab's figure within the first 300 px of a 1280x720 screen). ``bench/bench_class.py`` measures 1, 10
and 30 students; this keeps 3 in ``make test``."""

from __future__ import annotations

import time

import pytest
from e2e_helpers import output_errors, screenshot, served, start_app

# the visible panel's first figure: its index among the page's plots, and where it starts
_MAIN = """() => {
    const p = Array.from(document.querySelectorAll('.hetsched-panel')).find(e => e.offsetParent !== null);
    const f = p && p.querySelector('.js-plotly-plot');
    if (!f || !f.querySelector('.main-svg')) return null;
    return {index: Array.from(document.querySelectorAll('.js-plotly-plot')).indexOf(f),
            top: f.getBoundingClientRect().top, text: p.innerText.slice(0, 200)};
}"""
TABS = {"graph": "Graph", "backends": "Backends", "mapping": "Mapping", "pipeline": "Pipeline", "memory": "Memory",
        "executor": "Executor"}
STUDENTS = 3


@pytest.fixture(scope="module")
def class_server(tmp_path_factory, browser_context):
    yield from served(lambda: start_app(tmp_path_factory.mktemp("class"), pool=STUDENTS, max_students=STUDENTS,
                                        wait_pool_s=300))


def _main_figure(page, timeout_s: float = 120.0) -> dict:
    """The visible tab's main figure, once drawn. The page can swap tabs between a wait and a reading
    (a link applied after the first tab drew), so both happen in one call in the page."""
    handle = page.wait_for_function(f"() => ({_MAIN})()", timeout=timeout_s * 1000)
    return handle.json_value()


def _students_gone(server, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while server.status()["students"] and time.monotonic() < deadline:
        time.sleep(0.5)


@pytest.mark.e2e
def test_presentation_layout_and_links(class_server, browser_context):
    page = browser_context.new_page()
    page.set_viewport_size({"width": 1280, "height": 720})
    try:
        page.goto(class_server.base_url + "/?scenario=memory&tab=memory&layout=present", wait_until="commit")
        # the link is applied once the page has sent its address: the Memory tab shown, then its figure
        page.wait_for_function("() => { const t = document.querySelector('.lm-TabBar-tab.lm-mod-current');"
                               " return t && t.innerText.trim() === 'Memory'; }", timeout=120_000)
        first = _main_figure(page)
        picker = page.locator(".widget-dropdown", has_text="scenario").locator("select").first
        assert "Orders whose peaks differ" in picker.locator("option:checked").inner_text().replace("\xa0", " ")
        assert page.locator(".lm-TabBar-tab.lm-mod-current").inner_text().strip() == "Memory"
        assert first["top"] < 300, first
        screenshot(page, "e2e_class_present_memory")
        # the link is applied in the kernel while the page draws: a tab clicked before the page is quiet can
        # reach the kernel before the scenario did (the link then names no scenario; known race, see CHANGELOG)
        page.wait_for_function("() => !Array.from(document.querySelectorAll('.hetsched-busy-badge, .hetsched-computing'))"
                               ".some(e => e.offsetParent !== null)", timeout=120_000)
        page.wait_for_timeout(2000)
        for key, title in TABS.items():
            page.locator(".lm-TabBar-tab", has_text=title).first.click()
            page.wait_for_function("k => location.search.includes('tab=' + k)", arg=key, timeout=30_000)
            # every tab schedules on the scenario's machine (issue 33); the Pipeline tab puts its ranks on the
            # devices that run every op of its training graph when the machine's FPGA does not
            fig = _main_figure(page)
            assert fig["top"] < 300, (key, fig)
            assert page.url.endswith(f"?scenario=memory&tab={key}&layout=present"), page.url
        # the switch back to the full layout: the figure moves below the controls and explanations
        page.locator(".lm-TabBar-tab", has_text="Memory").first.click()
        page.get_by_role("button", name="full layout").click()
        page.wait_for_function("() => !location.search.includes('layout=')", timeout=30_000)
        page.wait_for_timeout(1000)
        assert _main_figure(page)["top"] > 300
        assert output_errors(page) == []
    finally:
        page.close(run_before_unload=True)  # the page asks Voila to shut its kernel down
    _students_gone(class_server)


@pytest.mark.e2e
def test_a_class_of_three_on_warm_kernels_and_a_full_class(class_server, browser_context):
    _students_gone(class_server)
    assert class_server.status()["pool_ready"] >= 1
    pages = [browser_context.new_page() for _ in range(STUDENTS)]
    try:
        t0 = time.monotonic()
        for p in pages:  # all three ask at once
            p.goto(class_server.base_url + "/?scenario=memory&tab=memory", wait_until="commit")
        firsts = []
        for p in pages:
            _main_figure(p, timeout_s=180)
            firsts.append(time.monotonic() - t0)
        # three browsers on this machine's cores take seconds each (plotly.js compiled three times): the
        # server's side, for 1, 10 and 30 students, is bench/bench_class.py's to measure
        print(f"first plots after {[round(x, 1) for x in firsts]} s; {class_server.status()}")
        assert class_server.status()["students"] == STUDENTS
        assert "page served by warm kernel" in class_server.log_tail(200)
        # one more student: told plainly, not left waiting
        extra = browser_context.new_page()
        resp = extra.goto(class_server.base_url + "/", wait_until="load")
        assert resp is not None and resp.status == 503 and "The class is full" in extra.inner_text("body")
        extra.close()
        # while three are connected, each one's step clicks redraw its own figures
        for p in pages:
            _main_figure(p)
            draws = p.evaluate("() => window.__hetschedDraws || 0")
            p.locator(".hetsched-panel:visible").first.get_by_role("button", name="◀ prev", exact=True).first.click()
            p.wait_for_function("n => (window.__hetschedDraws || 0) > n", arg=draws, timeout=60_000)
            assert output_errors(p) == []
    finally:
        for p in pages:
            p.close(run_before_unload=True)
    _students_gone(class_server)
