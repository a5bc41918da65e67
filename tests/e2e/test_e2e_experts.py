"""The Experts tab in a real browser: a MoE model's experts over four GPUs, the layer x expert grid by
device, a step back to the last decision about an expert (light: a few arrays), the mapper changed."""

from __future__ import annotations

import pytest
from e2e_helpers import output_errors, screenshot, wait_for_plots
from panel_helpers import figure_title, step_click, wait_for_title_change

NOTEBOOK = "dashboard"

_VISIBLE = "Array.from(document.querySelectorAll('.hetsched-panel')).find(e => e.offsetParent !== null)"
_PLOTS = f"""() => {{ const all = Array.from(document.querySelectorAll('.js-plotly-plot')); const p = {_VISIBLE};
    return p ? Array.from(p.querySelectorAll('.js-plotly-plot')).map(el => all.indexOf(el)) : []; }}"""


@pytest.mark.e2e
def test_experts_tab_walks_expert_decisions(voila_page):
    page = voila_page(NOTEBOOK)
    wait_for_plots(page, 1)
    page.locator(".lm-TabBar-tab", has_text="Experts").first.click()
    page.wait_for_function(f"""() => {{ const p = {_VISIBLE};
        return p && p.querySelectorAll('.js-plotly-plot .main-svg').length >= 2 && !p.querySelector('.hetsched-busy-badge')
               && /devices holding experts/.test(p.innerText); }}""", timeout=180_000)
    assert output_errors(page) == []
    panel = page.locator(".hetsched-panel:visible").first
    grid, gantt = page.evaluate(_PLOTS)[:2]
    text = panel.inner_text().replace("\xa0", " ")
    assert "mixtral_mini_moe" in text and "on 4 device(s)" in text and "What to notice" in text
    assert figure_title(page, grid).startswith("HEFT: where each expert runs")
    # the grid's legend: one entry per GPU, each expert a square in its device's colour
    names = page.evaluate("i => document.querySelectorAll('.js-plotly-plot')[i].data.map(t => t.name)", grid)
    assert {"gpu0", "gpu1", "gpu4", "gpu5"} <= set(names)

    # back to the last decision about an expert: the grid shows the experts placed so far, one ringed
    title = figure_title(page, grid)
    nbytes, before, after = step_click(page, panel, "◀ expert")
    assert after != before and "of MoE layer" in after
    title = wait_for_title_change(page, title, grid, timeout_s=90)
    assert "placed so far" in title
    assert nbytes < 100_000, f"one step click sent {nbytes} bytes"

    # another mapper: the patent's h2h keeps every expert on one GPU
    pick = panel.locator(".widget-dropdown", has_text="mapper").locator("select").first
    # ipywidgets writes option labels with non-breaking spaces
    pick.select_option(label=next(o for o in pick.locator("option").all_inner_texts() if o.replace("\xa0", " ") == "h2h (patent)"))
    page.wait_for_function(f"() => /on 1 device\\(s\\)/.test(({_VISIBLE}).innerText)", timeout=120_000)
    wait_for_title_change(page, title, grid, timeout_s=90)
    assert output_errors(page) == []
    screenshot(panel, "e2e_experts_tab")
