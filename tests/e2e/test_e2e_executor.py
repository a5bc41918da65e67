"""ExecutorPanel in a real browser: walk the dispatch decisions, then switch the thread policy.

Notebook 05 ends with the panel opened on the patent's central step (claim 1: a sync op's other sync
successors go to other threads). Each step click must change the words and the Gantt (its title, the
outlined op) and send less than 100 KB to the browser (issue 14).
"""

from __future__ import annotations

import pytest
from e2e_helpers import ARTIFACTS, output_errors, wait_for_plots
from panel_helpers import figure_title, panel_figure_indexes, step_click, wait_for_title_change

NOTEBOOK = "05_executor"
N_PANEL_FIGURES = 4  # Gantt, rule bars, policy comparison, edge ordering

_OUTLINE_JS = """i => { const el = document.querySelectorAll('.js-plotly-plot')[i];
    const t = el.data[el.data.length - 1]; return [t.name, Array.from(t.y || [])]; }"""


def _viewport_shot(page, selector: str, name: str) -> None:
    """What a person sees with the last ``selector`` element at the top of the window (Voila scrolls
    inside its own container, so an element shot of a tall panel comes out blank in places)."""
    page.evaluate("s => Array.from(document.querySelectorAll(s)).pop().scrollIntoView({block: 'start'})", selector)
    page.wait_for_timeout(800)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


@pytest.mark.e2e
def test_executor_panel_walks_the_dispatch_decisions(voila_page):
    page = voila_page(NOTEBOOK)
    wait_for_plots(page, N_PANEL_FIGURES)
    panel = page.locator(".hetsched-panel").last
    panel.wait_for()
    gantt = panel_figure_indexes(page, N_PANEL_FIGURES)[0]
    assert output_errors(page) == []
    step_text = panel.locator(".hetsched-step-text")
    # opened on claim 1's several-sync-successors decision: d2h_scores leaves nms's thread
    assert "claim 1" in step_text.inner_text() and "another thread" in step_text.inner_text()
    assert "decision 8 of 14" in figure_title(page, gantt)
    name, lanes = page.evaluate(_OUTLINE_JS, gantt)
    assert name == "this decision (outlined)" and "thread1" in lanes and "gpu0:d2h" in lanes

    # step clicks: the words and the Gantt change, each click a small patch
    seen = {step_text.inner_text()}
    for button in ("next ▶", "next ▶", "◀ prev", "◀ prev"):
        title = figure_title(page, gantt)
        nbytes, before, after = step_click(page, panel, button)
        assert after != before
        new_title = wait_for_title_change(page, title, gantt, timeout_s=90)
        assert "decision" in new_title
        assert nbytes < 100_000, f"one step click ({button}) sent {nbytes} bytes"
        seen.add(step_text.inner_text())
    assert len(seen) >= 3
    name, lanes = page.evaluate(_OUTLINE_JS, gantt)
    assert "decision 8 of 14" in figure_title(page, gantt) and "thread1" in lanes

    # jump to the first use of claim 5's "async -> sync to another thread": nms goes to a sync thread
    title = figure_title(page, gantt)
    panel.get_by_role("button", name="async → sync to another thread", exact=True).click()  # the claim: its tooltip
    wait_for_title_change(page, title, gantt, timeout_s=90)
    assert "nms" in step_text.inner_text() and "claim 5" in step_text.inner_text()
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.wait_for_timeout(1500)  # the figures follow the wider panel
    # ... and keep their height: the Gantt and the rule bars were patched by the steps above (a
    # patched plot used to collapse to 0 px on the next resize)
    heights = page.evaluate("""() => Array.from(Array.from(document.querySelectorAll('.hetsched-panel')).pop()
        .querySelectorAll('.js-plotly-plot')).map(el => el.getBoundingClientRect().height)""")
    assert min(heights) > 200, heights
    _viewport_shot(page, ".hetsched-panel", "e2e_executor_panel_1600x1000")
    _viewport_shot(page, ".hetsched-step-text", "e2e_executor_walk_1600x1000")

    # another thread policy: the whole run changes, the comparison highlights it
    summary = panel.locator(".hetsched-summary")
    summary_before = summary.inner_text()
    threads = panel.locator(".widget-dropdown", has_text="threads").locator("select").first
    threads.select_option(label="One host thread")
    page.wait_for_function(
        "i => document.querySelectorAll('.js-plotly-plot')[i].layout.title.text.includes('multi-stream, one thread')",
        arg=gantt + 2, timeout=90_000)
    page.wait_for_function("([el, old]) => el.innerText !== old", arg=[summary.element_handle(), summary_before],
                           timeout=90_000)
    assert "makespan" in summary.inner_text() and "One host thread" in summary.inner_text()
    assert "thread 0" in figure_title(page, gantt) or "1 host thread" in figure_title(page, gantt)
    assert output_errors(page) == []
