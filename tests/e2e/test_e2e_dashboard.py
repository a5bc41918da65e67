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

    # GraphPanel: it opens on its scenario (ResNet-50 on the GPU + TPU machine, coloured by the device
    # the support table prefers: two devices); colour by op type -> the legend names op types
    assert "gpu0" in before and "tpu0" in before
    graph.get_by_role("button", name="op type", exact=True).click()
    by_type = wait_for_change(page, before, i, timeout_s=90)
    assert "Conv" in by_type and "tpu0" not in by_type

    # ... and load another bundled model: another graph is drawn, drawn as blocks (a big model)
    graph.locator(".widget-dropdown", has_text="graph").locator("select").first.select_option("bert_base_b1_s128")
    wait_for_change(page, by_type, i, timeout_s=90)
    assert "bert" in graph.inner_text() and "blocks" in graph.inner_text()
    screenshot(graph, "e2e_graph_panel_bundled_blocks")

    # Dashboard: another tab draws its own figures from the same session
    page.locator(".lm-TabBar-tab", has_text="Executor").first.click()
    # the hidden tab computes when shown, on the graph the user loaded (not its own example)
    page.wait_for_function(
        """() => { const p = Array.from(document.querySelectorAll('.hetsched-panel')).find(e => e.offsetParent !== null);
                   return p && /bert/i.test(p.innerText) && p.querySelector('.js-plotly-plot .main-svg'); }""",
        timeout=90_000,
    )
    assert output_errors(page) == []
    screenshot(page, "e2e_dashboard_executor_tab")
    # BERT (176 ops) draws without WebGL anywhere: the page has not set it up
    assert page.evaluate("() => globalThis.__hetschedWarmGL === undefined")

    # a model big enough for WebGL Gantts: once the page is idle it sets WebGL up with a throw-away plot,
    # so the first tab that draws with WebGL does not pay for it (issue 14), and removes that plot again
    page.locator(".lm-TabBar-tab", has_text="Graph").first.click()
    graph.locator(".widget-dropdown", has_text="graph").locator("select").first.select_option("inception_v3_train_b32")
    page.wait_for_function("() => /^(done|not needed)/.test(String(globalThis.__hetschedWarmGL || ''))",
                           timeout=90_000)
    assert page.evaluate("() => document.querySelectorAll('body > div[style*=\"-10000px\"]').length") == 0
    assert "inception" in graph.inner_text()
