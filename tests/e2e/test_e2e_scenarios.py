"""Every scenario in a real browser (issue 22): the dashboard's picker loads it, its tab shows a
non-trivial result (more than one group, a non-zero gap, a rule firing...), and no raw key or seed
number is in the visible text or the plots' titles. Screenshots at 1280x720 go to test-artifacts/.

One browser page serves every scenario: that is also what a teacher does in front of a class.
"""

from __future__ import annotations

import re

import pytest
from e2e_helpers import output_errors, screenshot, wait_for_plots

from hetsched.scenarios import SCENARIOS

NOTEBOOK = "dashboard"

#: metric keys and jargon that must never reach the screen (plain words instead)
RAW = re.compile(r"\b(makespan_s|total_latency_s|energy_J|bytes_moved|peak_bytes|bubble_fraction|host_blocked_s|"
                 r"lower_bound_bytes|throughput_per_s|n_launches|pcie_Bps|dispatch_s)\b|seed 00\d|patent S\d|\bS3:")
#: a unit suffix left on an axis or legend title (``time_s``, ``size_bytes``)
RAW_AXIS = re.compile(r"\b\w+_(s|J|Bps|bytes|flops)\b")

_VISIBLE_TEXT = "() => { const p = Array.from(document.querySelectorAll('.hetsched-panel')).find(e => e.offsetParent !== null);" \
                " return p ? p.innerText : ''; }"
_PLOT_TITLES = """() => { const p = Array.from(document.querySelectorAll('.hetsched-panel')).find(e => e.offsetParent !== null);
    if (!p) return [];
    const out = [];
    for (const el of p.querySelectorAll('.js-plotly-plot')) {
        const l = el.layout || {};
        const t = (x) => x ? (typeof x === 'string' ? x : (x.text || '')) : '';
        out.push(t(l.title));
        for (const k of Object.keys(l)) if (/^[xy]axis\\d*$/.test(k)) out.push(t(l[k].title));
        out.push(t(l.legend && l.legend.title));
        for (const tr of (el.data || [])) if (tr.showlegend !== false && tr.name) out.push(String(tr.name));
    }
    return out; }"""
_LEGEND_NAMES = """() => { const p = Array.from(document.querySelectorAll('.hetsched-panel')).find(e => e.offsetParent !== null);
    const out = [];
    for (const el of (p ? p.querySelectorAll('.js-plotly-plot') : [])) for (const tr of (el.data || [])) out.push(String(tr.name || ''));
    return out; }"""


def _quiet(page, quiet_ms: int = 1000, timeout_s: float = 120.0) -> None:
    """Wait until no plot has been drawn for ``quiet_ms`` (every patch of the last action drawn)."""
    import time

    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        now = page.evaluate("() => [window.__hetschedLastDraw || 0, window.__hetschedDraws || 0]")
        if now == last:
            return
        last = now
        page.wait_for_timeout(quiet_ms)


def _check(key: str, text: str, legends: list[str]) -> None:
    """What must be visible for each scenario: the family's point, not a trivial result."""
    low = text.lower()
    if key == "tour":
        assert {"gpu0", "tpu0"} <= set(legends), legends  # colour by preferred device: two devices
        assert "9 blocks" in text
    elif key == "backends":
        m = re.search(r"(\d+) aggregated ops", text)
        assert m and int(m.group(1)) > 1, text[:400]
        assert "cycle" in low
    elif key == "mapping":
        assert "refused" in low or "rejected" in low, text[:400]
        assert re.search(r"\b[1-9]\d* of \d+ remap", text) or "kept" in low, text[:400]
    elif key == "pipeline":
        assert "cache" in low and "bubble" in low
    elif key == "memory":
        gaps = [float(g) for g in re.findall(r"gap (\d+(?:\.\d+)?)%", text)]
        assert gaps and max(gaps) > 0, text[:400]
    elif key == "executor":
        assert "claim 1" in low and re.search(r"thread [1-3]", low), text[:400]


@pytest.mark.e2e
def test_every_scenario_shows_its_point_in_plain_words(voila_page):
    page = voila_page(NOTEBOOK)
    page.set_viewport_size({"width": 1280, "height": 720})
    wait_for_plots(page, 1)
    assert output_errors(page) == []
    picker = page.locator(".widget-dropdown", has_text="scenario").locator("select").first
    for key, sc in SCENARIOS.items():
        # ipywidgets writes option labels with non-breaking spaces
        label = next(o for o in picker.locator("option").all_inner_texts() if o.replace("\xa0", " ").startswith(sc.title))
        picker.select_option(label=label)
        # the scenario's tab is shown, its note is on screen and its plots are drawn
        page.wait_for_function(f"() => ({_VISIBLE_TEXT})().replace(/\\u00a0/g, ' ').includes({sc.title!r})",
                               timeout=180_000)
        page.wait_for_function(
            """() => { const p = Array.from(document.querySelectorAll('.hetsched-panel')).find(e => e.offsetParent !== null);
                       return p && p.querySelector('.js-plotly-plot .main-svg') && !p.querySelector('.hetsched-busy-badge'); }""",
            timeout=180_000)
        _quiet(page)  # the last patches have landed and been drawn
        text = page.evaluate(_VISIBLE_TEXT).replace("\xa0", " ")
        assert not RAW.search(text), f"{key}: raw key on screen: {RAW.search(text).group(0)!r}"
        titles = page.evaluate(_PLOT_TITLES)
        bad = [t for t in titles if RAW.search(t) or RAW_AXIS.search(t)]
        assert not bad, f"{key}: raw keys in plot titles/axes/legends: {bad[:5]}"
        _check(key, text, page.evaluate(_LEGEND_NAMES))
        screenshot(page.locator(".hetsched-panel:visible").first, f"scenario_{key}_1280x720")
    assert output_errors(page) == []
