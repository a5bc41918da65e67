"""PipelinePanel in a real browser: move m, both Gantts redraw with more micro-batches; the
Chrome trace of the result on screen downloads after one click on "prepare downloads"."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from e2e_helpers import output_errors, screenshot, wait_for_plots
from panel_helpers import _TITLE_JS, figure_title, panel_figure_indexes, step_click, wait_for_title_change

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
    # a time-step click moves the cursor of both Gantts: a patch far below 100 KB, not new figures
    page.wait_for_function(f"() => ({_TITLE_JS})({a_i}).includes('m=16')", timeout=90_000)  # all six moves drawn
    cursor = "() => Array.from(document.querySelectorAll('.hetsched-panel')).pop().innerText"
    for _ in range(2):
        nbytes, before, after = step_click(page, panel, "next ▶")
        assert before != after and nbytes < 100_000, f"one time-step click sent {nbytes} bytes"
    assert "action 3 of" in page.evaluate(cursor)
    # downloads are built on demand (not on every recompute): one click, then the links
    assert panel.locator("a[download]").count() == 0
    panel.get_by_role("button", name=re.compile("prepare downloads")).click()
    link = panel.locator('a[download="pipeline_A_trace.json"]')
    link.wait_for(timeout=60_000)
    with page.expect_download(timeout=60_000) as dl:
        link.click()
    trace = json.loads(Path(dl.value.path()).read_text())
    mbs = [int(m.group(1)) for e in trace["traceEvents"] if (m := re.fullmatch(r"\d+F(\d+)", str(e.get("name", ""))))]
    assert mbs and max(mbs) >= 10  # micro-batch 10 exists only after m moved past 10: the result on screen
    for name in ("pipeline_B_trace.json", "pipeline_A_timeline.csv", "pipeline_metrics.csv"):
        assert panel.locator(f'a[download="{name}"]').count() == 1
    assert output_errors(page) == []
    screenshot(panel, "e2e_pipeline_panel_downloads_ready")
