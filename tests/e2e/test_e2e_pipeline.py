"""PipelinePanel in a real browser: move m, both Gantts redraw with more micro-batches."""

from __future__ import annotations

import pytest
from e2e_helpers import output_errors, screenshot, wait_for_plots
from panel_helpers import figure_title, panel_figure_indexes, wait_for_title_change

NOTEBOOK = "03_pipeline"


@pytest.mark.e2e
def test_pipeline_panel_move_m(voila_page):
    page = voila_page(NOTEBOOK)
    wait_for_plots(page, 3)
    panel = page.locator(".hetsched-panel").last
    panel.wait_for()
    a_i, b_i, _cache_i = panel_figure_indexes(page, 3)
    assert output_errors(page) == []
    title_a, title_b = figure_title(page, a_i), figure_title(page, b_i)
    assert "m=10" in title_a and "m=10" in title_b
    slider = panel.locator(".widget-slider").filter(has_text="m (micro-batches)").locator(".noUi-handle, .ui-slider-handle").first
    slider.focus()
    for _ in range(6):
        page.keyboard.press("ArrowRight")  # m 10 -> 16, one step per key press
    new_a = wait_for_title_change(page, title_a, a_i, timeout_s=90)
    wait_for_title_change(page, title_b, b_i, timeout_s=90)
    assert "m=1" in new_a and "m=10" not in new_a
    screenshot(panel, "e2e_pipeline_panel_more_microbatches")
