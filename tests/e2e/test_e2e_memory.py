"""MemoryPanel in a real browser: walk the patent's flow (fine-tune, BFS, DFS), text and curve change per step."""

from __future__ import annotations

import re

import pytest
from e2e_helpers import output_errors, plot_signature, screenshot, wait_for_change
from panel_helpers import panel_figure_indexes, panel_text, step_click

NOTEBOOK = "04_memory"
# raw byte counts, step codes or metric keys must not reach the screen (issue 22)
RAW = re.compile(r"\d{5,} ?(B\b|bytes)|\bS[234]\d?\b|_bytes\b")


def _click_and_redraw(page, panel, button: str, index: int) -> tuple[int, str]:
    """Click ``button`` of the panel; the text and the curve must change. Returns (bytes, new text)."""
    sig = plot_signature(page, index)
    nbytes, before, after = step_click(page, panel, button)
    assert after != before
    wait_for_change(page, sig, index, timeout_s=90)
    assert nbytes < 100_000, f"{button}: one click sent {nbytes} bytes"
    return nbytes, after


@pytest.mark.e2e
def test_memory_panel_walks_the_patent_flow(voila_page):
    page = voila_page(NOTEBOOK)
    panel = page.locator(".hetsched-panel").last
    panel.wait_for()
    curves_i, _live_i = panel_figure_indexes(page, 2)
    assert output_errors(page) == []
    text = panel_text(page)
    # the notebook opens the panel on the fine-tune move that lowers the peak
    assert "claim 9" in text and "kept" in text and "the peak drops" in text
    # the ILP's status, bound and gap beside the curve; the gap defined on screen
    assert "A/P" in text and "bound it proved" in text and "gap = (peak" in text
    assert not RAW.search(text), RAW.search(text)

    # one move back: the refused move before it, the curve redraws as a patch
    _n, text = _click_and_redraw(page, panel, "◀ prev", curves_i)
    assert "refused" in text or "kept" in text
    # the BFS phase: a pick with its ASAP/ALAP, the prefix curve
    _n, text = _click_and_redraw(page, panel, "BFS", curves_i)
    assert "claim 7" in text and "ASAP" in text and "runner-up" in text
    _n, text = _click_and_redraw(page, panel, "next ▶", curves_i)
    assert "claim 7" in text
    # the DFS phase: a window pushed, the stack shown
    nbytes, before, text = step_click(page, panel, "DFS")
    assert nbytes < 100_000 and "claim 8" in text and "Stack (top last)" in text
    _n, text = _click_and_redraw(page, panel, "fine-tune", curves_i)
    assert "claim 9" in text
    assert not RAW.search(text), RAW.search(text)
    # the viewport is left alone: after a resize PlotlyView's plots lose their height (plotly sizes an
    # autosized plot to 100% of its auto-height div: 0 px), which would spoil the picture
    panel.scroll_into_view_if_needed()
    screenshot(panel, "e2e_memory_panel_walk")
