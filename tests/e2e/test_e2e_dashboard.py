"""Dashboard and GraphPanel in a real browser: recolour and reload the graph, then switch tabs."""

from __future__ import annotations

import pytest
from e2e_helpers import output_errors, plot_signature, screenshot, wait_for_change, wait_for_plots

NOTEBOOK = "dashboard"

_FIRST_PANEL_PLOT = """() => { const all = Array.from(document.querySelectorAll('.js-plotly-plot'));
    const p = document.querySelector('.hetsched-panel'); const el = p && p.querySelector('.js-plotly-plot');
    return el ? all.indexOf(el) : -1; }"""


@pytest.mark.e2e
def test_dashboard_graph_panel_and_tabs(voila_page):
    page = voila_page(NOTEBOOK)
    wait_for_plots(page, 1)
    assert output_errors(page) == []
    graph = page.locator(".hetsched-panel").first
    graph.wait_for()
    i = page.evaluate(_FIRST_PANEL_PLOT)
    assert i >= 0
    before = plot_signature(page, i)

    # GraphPanel: colour by the device the support table prefers -> legend names become devices
    graph.get_by_role("button", name="device", exact=True).click()
    by_device = wait_for_change(page, before, i, timeout_s=90)
    assert "gpu0" in by_device and "gpu0" not in before

    # ... and load a bundled model instead of the generated graph -> another graph is drawn
    graph.get_by_role("button", name="bundled", exact=True).click()
    wait_for_change(page, by_device, i, timeout_s=90)
    assert "ops" in graph.inner_text()  # the summary line follows the new graph
    screenshot(graph, "e2e_graph_panel_bundled_by_device")

    # Dashboard: another tab draws its own figures from the same session
    page.locator(".lm-TabBar-tab", has_text="Executor").first.click()
    # the executor's policy chart becomes visible (hidden tabs have no layout box)
    page.wait_for_function(
        """() => Array.from(document.querySelectorAll('.js-plotly-plot')).some(el => el.offsetParent !== null
              && el.layout && el.layout.title && String(el.layout.title.text || '').includes('executor policy'))""",
        timeout=90_000,
    )
    assert output_errors(page) == []
    screenshot(page, "e2e_dashboard_executor_tab")
