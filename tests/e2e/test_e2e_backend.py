"""BackendPanel in a real browser: walk the decisions (text and plots change, each step click a patch
under 100 KB), jump to the buffered run (the Gantt's cursor moves), switch a backend off (recoloured)."""

from __future__ import annotations

import pytest
from e2e_helpers import ARTIFACTS, output_errors, plot_signature, screenshot, wait_for_change, wait_for_plots
from panel_helpers import figure_title, panel_figure_indexes, step_click, wait_for_title_change

NOTEBOOK = "02_partition"
N_PANEL_FIGURES = 4  # graph, aggregated ops (quotient), serial vs buffered Gantt, buffer occupancy

_CURSOR_JS = """i => { const el = document.querySelectorAll('.js-plotly-plot')[i];
    const s = el && el.layout && el.layout.shapes; return s && s.length ? s[0].x0 : null; }"""


@pytest.mark.e2e
def test_backend_panel_walk_and_toggle(voila_page):
    page = voila_page(NOTEBOOK)
    page.set_viewport_size({"width": 1600, "height": 1000})
    wait_for_plots(page, N_PANEL_FIGURES)
    panel = page.locator(".hetsched-panel").last
    panel.wait_for()
    graph_i, quot_i, gantt_i, _occ_i = panel_figure_indexes(page, N_PANEL_FIGURES)
    assert output_errors(page) == []
    step = panel.locator(".hetsched-step")
    # the notebook opens the walk on the merge refused because it would create a cycle
    assert "would create a cycle" in step.inner_text()
    assert "seed" not in panel.inner_text() and "003" not in panel.inner_text()
    page.wait_for_function(  # the red dashed path that would close the cycle is drawn
        "i => document.querySelectorAll('.js-plotly-plot')[i].data.some(t => t.name === 'path that would close a cycle'"
        " && t.x.filter(x => x === null).length === 2)", arg=quot_i, timeout=60_000)
    graph_title = figure_title(page, graph_i)
    quot_sig = plot_signature(page, quot_i)
    # one step forward: the words, the graph's title and the aggregated-op graph change; a patch, not a figure
    nbytes, before, after = step_click(page, panel, "next ▶")
    assert after != before and "would create a cycle" not in step.inner_text()
    wait_for_title_change(page, graph_title, graph_i, timeout_s=90)
    wait_for_change(page, quot_sig, quot_i, timeout_s=90)
    assert nbytes < 100_000, f"one step click sent {nbytes} bytes"
    nbytes, before, after = step_click(page, panel, "◀ prev")
    assert "would create a cycle" in step.inner_text() and nbytes < 100_000
    # into the buffered run: the Gantt's cursor moves with each step
    panel.get_by_role("button", name="buffering", exact=True).click()
    page.wait_for_function("el => el.innerText.includes('buffering')", arg=step.element_handle(), timeout=90_000)
    x0 = page.evaluate(_CURSOR_JS, gantt_i)
    for _ in range(3):
        nbytes, before, after = step_click(page, panel, "next ▶")
        assert after != before and nbytes < 100_000, f"one step click sent {nbytes} bytes"
    page.wait_for_function(f"([i, x0]) => ({_CURSOR_JS})(i) !== x0", arg=[gantt_i, x0], timeout=90_000)
    assert "buffering" in step.inner_text() and "input" in step.inner_text()
    # what a 1600x1000 screen shows of the panel, and the whole panel (plots below the fold drawn too)
    panel.scroll_into_view_if_needed()
    page.evaluate("el => el.scrollIntoView()", panel.element_handle())
    page.wait_for_timeout(500)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e_backend_panel_1600x1000.png"))
    page.set_viewport_size({"width": 1600, "height": int(panel.bounding_box()["height"]) + 100})
    page.wait_for_timeout(1500)
    screenshot(panel, "e2e_backend_panel_walk")
    page.set_viewport_size({"width": 1600, "height": 1000})
    # switch the FPGA off: everything on the GPU, one aggregated op less story, recoloured
    graph_before = plot_signature(page, graph_i)
    panel.get_by_role("checkbox", name="fpga0").click()
    wait_for_change(page, graph_before, graph_i, timeout_s=90)
    page.wait_for_function("el => el.innerText.includes('0 refused for a cycle')",
                           arg=panel.locator(".hetsched-summary").element_handle(), timeout=90_000)
    assert output_errors(page) == []
