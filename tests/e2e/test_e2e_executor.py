"""ExecutorPanel in a real browser: switch the thread policy, the Gantt redraws in the page."""

from __future__ import annotations

import pytest
from e2e_helpers import output_errors, plot_signature, screenshot, wait_for_change, wait_for_plots
from panel_helpers import panel_figure_indexes

NOTEBOOK = "05_executor"


@pytest.mark.e2e
def test_executor_panel_switch_thread_policy(voila_page):
    page = voila_page(NOTEBOOK)
    wait_for_plots(page, 3)
    panel = page.locator(".hetsched-panel").last
    panel.wait_for()
    gantt_index = panel_figure_indexes(page, 3)[0]  # Gantt, policy comparison, ordering
    assert output_errors(page) == []
    before = plot_signature(page, gantt_index)
    summary = panel.locator(".hetsched-summary")
    summary_before = summary.inner_text()
    threads = panel.locator("select").nth(1)  # streams, threads, ...
    assert "single" in threads.inner_text()
    threads.select_option("single")
    after = wait_for_change(page, before, gantt_index, timeout_s=90)
    assert after != before
    # the comparison chart highlights the new current policy in its title
    page.wait_for_function(
        "i => document.querySelectorAll('.js-plotly-plot')[i].layout.title.text.includes('multi-stream, one thread')",
        arg=gantt_index + 1, timeout=90_000)
    # the summary line follows too (one host thread blocks on every D2H: a longer makespan)
    page.wait_for_function("([el, old]) => el.innerText !== old", arg=[summary.element_handle(), summary_before],
                           timeout=90_000)
    assert "makespan" in summary.inner_text() and summary.inner_text() != summary_before
    screenshot(panel, "e2e_executor_panel_single_thread")
