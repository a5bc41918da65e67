"""PipelinePanel in a real browser (notebook 03's last cell): the walker stands on the patent's
central step; step clicks move the cursor of both Gantts and the text, each sending < 100 KB;
jumps (cache change, phase) land where they say; moving m redraws both schedules; a refused value
shows why and clears on the next valid one; the Chrome trace of the result on screen downloads; *synthesize*
shows the comparison with the lower bound, its walker steps through the search's decisions, and the
synthesized schedule downloads as torch's CSV."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from e2e_helpers import ARTIFACTS, output_errors, screenshot
from panel_helpers import _TITLE_JS, figure_title, panel_figure_indexes, panel_text, step_click, wait_for_title_change

NOTEBOOK = "03_pipeline"
#: x of the last shape (the step cursor) of the i-th figure, as plotly.js drew it
_CURSOR_JS = """i => { const el = document.querySelectorAll('.js-plotly-plot')[i];
    const s = (el && el.layout && el.layout.shapes) || []; return s.length ? s[s.length - 1].x0 : null; }"""


def _wait_text(page, words: str, timeout_s: float = 90.0) -> None:
    page.wait_for_function("w => Array.from(document.querySelectorAll('.hetsched-panel')).pop().innerText.includes(w)",
                           arg=words, timeout=timeout_s * 1000)


@pytest.mark.e2e
def test_pipeline_panel_walks_the_patents_cache_queue(voila_page):
    page = voila_page(NOTEBOOK)
    panel = page.locator(".hetsched-panel").last
    panel.wait_for()
    a_i, b_i, patent_i, queues_i, stages_i = panel_figure_indexes(page, 5)
    assert output_errors(page) == []
    # the notebook left the walker on the last rank's forward micro-step r = 2: the send interval opens
    text = panel_text(page)
    assert "r = m mod p = 10 mod 4 = 2" in text and "send interval [r, r + (p + r)(v − 1)) = [2, 8)" in text
    # (which step that is depends on the priced stage times: the notebook finds it by its action)
    assert re.search(r"step \d+ of 160", text) and "inside the send interval [2, 8): it pushes 3F2" in text
    title_a = figure_title(page, a_i)
    assert "m=10" in title_a and "the patent's" in title_a and "m=10" in figure_title(page, b_i)
    assert "split" in figure_title(page, stages_i) and "patent" in figure_title(page, patent_i)
    for key in ("makespan_s", "bubble_fraction", "[paddle]"):
        assert key not in text

    # what a user sees at 1600 x 1000 with the panel scrolled to its top, then the whole panel
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.wait_for_timeout(800)
    panel.evaluate("el => el.scrollIntoView()")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e_pipeline_panel_1600x1000.png"))
    panel.locator("h4", has_text="The patent's cache queues").evaluate("el => el.scrollIntoView()")
    page.wait_for_timeout(300)
    page.screenshot(path=str(ARTIFACTS / "e2e_pipeline_panel_patent_1600x1000.png"))

    # step clicks: the text changes at each, the cursor of both Gantts as soon as the next action starts
    # later (several ranks may start at one instant); only a patch travels
    cur, clicks = page.evaluate(_CURSOR_JS, a_i), 0
    first = int(re.search(r"step (\d+) of 160", panel_text(page)).group(1))
    while clicks < 6:
        nbytes, before, after = step_click(page, panel, "next ▶")
        clicks += 1
        assert before != after and nbytes < 100_000, f"one time-step click sent {nbytes} bytes"
        assert f"step {first + clicks} of 160" in after
        page.wait_for_timeout(300)
        if page.evaluate(_CURSOR_JS, a_i) != cur:
            break
    assert page.evaluate(_CURSOR_JS, a_i) != cur, "the cursor never moved"
    assert page.evaluate(_CURSOR_JS, a_i) == page.evaluate(_CURSOR_JS, b_i)  # one instant on the shared axis
    # jumps: the next change of a cache queue, then the first steady-phase action
    nbytes, before, after = step_click(page, panel, "cache change ▶")
    assert nbytes < 100_000 and "cache queue (the patent's) of rank" in after
    panel.get_by_role("button", name="steady", exact=True).click()
    _wait_text(page, "in its steady phase")

    # move m: both schedules redraw (r = m mod p = 0 at m = 16: nothing waits)
    slider = panel.locator(".widget-slider").filter(has_text="m (micro-batches)").locator(".noUi-handle, .ui-slider-handle").first
    slider.focus()
    for _ in range(6):
        page.keyboard.press("ArrowRight")  # m 10 -> 16, one step per key press
    wait_for_title_change(page, title_a, a_i, timeout_s=90)
    page.wait_for_function(f"() => ({_TITLE_JS})({a_i}).includes('m=16')", timeout=90_000)  # all six moves drawn
    _wait_text(page, "r = m mod p = 16 mod 4 = 0")

    # a refused value: said why, the figures kept; the next valid value clears it
    box = panel.locator(".widget-text").filter(has_text="p (ranks)").locator("input")
    box.fill("100000")
    box.press("Enter")
    _wait_text(page, "p (ranks) = 100000 is out of range: allowed 2 to 64")
    assert "m=16" in figure_title(page, a_i)
    box.fill("8")
    box.press("Enter")
    page.wait_for_function(f"() => ({_TITLE_JS})({a_i}).includes('p=8')", timeout=90_000)
    assert "is out of range" not in panel_text(page)

    # downloads are built on demand: one click, then the trace of the result on screen
    assert panel.locator("a[download]").count() == 0
    panel.get_by_role("button", name=re.compile("prepare downloads")).click()
    link = panel.locator('a[download="pipeline_A_trace.json"]')
    link.wait_for(timeout=60_000)
    with page.expect_download(timeout=60_000) as dl:
        link.click()
    trace = json.loads(Path(dl.value.path()).read_text())
    stages = {int(m.group(1)) for e in trace["traceEvents"] if (m := re.fullmatch(r"(\d+)F\d+", str(e.get("name", ""))))}
    assert max(stages) == 15  # p = 8 ranks x v = 2 chunks: the result on screen

    # the best schedule for this split: synthesize, the comparison with the bound, a step through its decisions
    synth = panel.locator(".hetsched-synthesis")
    synth.get_by_role("button", name=re.compile(r"synthesize$")).click()  # (the icon's glyph is part of the name)
    page.wait_for_function("el => el.querySelectorAll('.js-plotly-plot .main-svg').length >= 3 && "
                           "el.innerText.includes('Synthesized (heuristic')", arg=synth.element_handle(), timeout=120_000)
    bars = page.evaluate("el => { const l = el.querySelector('.js-plotly-plot').layout;"
                         " return [l.annotations.map(a => a.text), l.shapes.map(s => s.line.dash), el.innerText]; }",
                         synth.element_handle())
    assert any(t.startswith("lower bound") for t in bars[0]) and "dash" in bars[1]
    assert re.search(r"makespan [\d.]+ m?s, (proven optimal|not proven optimal: gap [\d.]+% to the lower bound)", bars[2])
    for row in ("synthesized", "lower bound", "Interleaved 1F1B (paddle)"):
        assert row in bars[2]
    n = int(re.search(r"decision (\d+) of \1\b", bars[2]).group(1))  # the walk opens on the result
    nbytes, _before, after = step_click(page, synth, "◀ prev")
    assert f"decision {n - 1} of {n}" in after and nbytes < 100_000, f"one synthesis step sent {nbytes} bytes"
    synth.get_by_role("button", name="named schedules", exact=True).click()
    page.wait_for_function("el => /decision 2 of \\d+ · named schedules/.test(el.innerText)", arg=synth.element_handle(),
                           timeout=60_000)
    synth.get_by_role("button", name=re.compile(r"export for torch")).click()
    with page.expect_download(timeout=60_000) as dl:
        synth.locator('a[download$="_torch.csv"]').click()
    rows = Path(dl.value.path()).read_text().splitlines()
    assert len(rows) == 8 and all(re.fullmatch(r"(\d+[FIWB]\d+,)*\d+[FIWB]\d+", r) for r in rows)
    screenshot(synth, "e2e_pipeline_synthesis")
    assert output_errors(page) == []
