"""MemoryPanel in a real browser: switch the ordering method, the memory curves redraw."""

from __future__ import annotations

import pytest
from e2e_helpers import output_errors, plot_signature, screenshot, wait_for_change, wait_for_plots
from panel_helpers import panel_figure_indexes, panel_text, step_click

NOTEBOOK = "04_memory"


@pytest.mark.e2e
def test_memory_panel_switch_method(voila_page):
    page = voila_page(NOTEBOOK)
    wait_for_plots(page, 2)
    panel = page.locator(".hetsched-panel").last
    panel.wait_for()
    curves_i, live_i = panel_figure_indexes(page, 2)
    assert output_errors(page) == []
    # a step back through the fine-tune moves redraws the curve: a patch far below 100 KB
    sig = plot_signature(page, curves_i)
    nbytes, text_before, text_after = step_click(page, panel, "◀ prev")
    assert text_after != text_before and nbytes < 100_000, f"one step click sent {nbytes} bytes"
    wait_for_change(page, sig, curves_i, timeout_s=90)
    before = plot_signature(page, curves_i)
    assert "patent:" in before  # the patent's BFS/DFS + fine-tune order is drawn
    panel.locator("select").first.select_option("dfs")
    after = wait_for_change(page, before, curves_i, timeout_s=90)
    assert '"dfs (peak' in after.replace("\\", "")
    page.wait_for_function("() => Array.from(document.querySelectorAll('.hetsched-panel')).pop()"
                           ".innerText.includes('makes no moves')", timeout=90_000)
    assert "dfs" in panel_text(page)
    screenshot(panel, "e2e_memory_panel_dfs")
