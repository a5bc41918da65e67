"""MappingPanel in a real browser: step back through the remap log, the Gantt and graph redraw."""

from __future__ import annotations

import pytest
from e2e_helpers import output_errors, screenshot, wait_for_plots
from panel_helpers import figure_title, panel_figure_indexes, panel_text, step_click, wait_for_title_change

NOTEBOOK = "01_mapping"
N_PANEL_FIGURES = 3  # graph view, Gantt, comparison


@pytest.mark.e2e
def test_mapping_panel_step_through_remap(voila_page):
    page = voila_page(NOTEBOOK)
    wait_for_plots(page, N_PANEL_FIGURES)
    panel = page.locator(".hetsched-panel").last
    panel.wait_for()
    first = panel_figure_indexes(page, N_PANEL_FIGURES)[0]
    assert output_errors(page) == []
    graph_before = figure_title(page, first)
    title_before = figure_title(page, first + 1)
    assert title_before.startswith("state after step")
    text_before = panel_text(page)
    # one decision back with the prev button: the Gantt shows the state after the previous step
    panel.get_by_role("button", name="◀ prev").click()
    after_prev = wait_for_title_change(page, title_before, first + 1, timeout_s=90)
    # the graph view redrew for that step too (its title names the step; the layer is highlighted)
    assert figure_title(page, first) != graph_before and "after step" in figure_title(page, first)
    # jump to the first decision of the compute-first walk: one layer mapped, told in words
    panel.get_by_role("button", name="compute_first").click()
    wait_for_title_change(page, after_prev, first + 1, timeout_s=90)
    assert "(compute_first)" in panel_text(page) and panel_text(page) != text_before
    assert figure_title(page, first + 1).startswith("state after step 1:")
    # a step click patches the plots in place: a few arrays and a title, far below 100 KB
    nbytes, text_before, text_after = step_click(page, panel, "next ▶")
    assert text_after != text_before and "step 2" in text_after
    assert figure_title(page, first + 1).startswith("state after step 2:")
    assert nbytes < 100_000, f"one step click sent {nbytes} bytes"
    screenshot(panel, "e2e_mapping_panel_stepped")
