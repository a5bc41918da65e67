"""Helpers shared by the panels' browser tests (figure titles, the panel's figures)."""

from __future__ import annotations

_TITLE_JS = """i => { const el = document.querySelectorAll('.js-plotly-plot')[i];
    const t = el && el.layout && el.layout.title; return t ? (typeof t === 'string' ? t : (t.text || '')) : ''; }"""


def figure_title(page, index: int) -> str:
    """The title text of the ``index``-th Plotly figure in the page, as drawn by plotly.js."""
    return page.evaluate(_TITLE_JS, index)


def wait_for_title_change(page, before: str, index: int, *, timeout_s: float = 60.0) -> str:
    """Wait until the ``index``-th figure's title differs from ``before`` (a redraw with new data)."""
    page.wait_for_function(f"([i, before]) => ({_TITLE_JS})(i) !== before", arg=[index, before], timeout=timeout_s * 1000)
    return figure_title(page, index)


def panel_text(page) -> str:
    """Inner text of the last panel on the page."""
    return page.evaluate("() => Array.from(document.querySelectorAll('.hetsched-panel')).pop().innerText")


def panel_figure_indexes(page, n: int, *, timeout_s: float = 120.0) -> list[int]:
    """Global indexes (for ``plot_signature``...) of the last panel's figures, once ``n`` have drawn."""
    page.wait_for_function(
        """n => { const p = Array.from(document.querySelectorAll('.hetsched-panel')).pop();
                  return p && p.querySelectorAll('.js-plotly-plot .main-svg').length >= n; }""",
        arg=n, timeout=timeout_s * 1000)
    return page.evaluate(
        """() => { const all = Array.from(document.querySelectorAll('.js-plotly-plot'));
                   const p = Array.from(document.querySelectorAll('.hetsched-panel')).pop();
                   return Array.from(p.querySelectorAll('.js-plotly-plot')).map(el => all.indexOf(el)); }""")


def step_click(page, panel, button: str = "◀ prev", *, timeout_s: float = 90.0) -> tuple[int, str, str]:
    """Click a step button of ``panel``; return ``(bytes received, panel text before, after)``.

    Waits until the panel's text changed and the page is quiet (no websocket frame and no plot draw
    for 0.4 s), so the byte count covers everything the click caused.
    """
    from e2e_helpers import settle

    before = panel.inner_text()
    page.wait_for_timeout(300)
    page.ws.mark()
    t0 = page.evaluate("() => performance.now()")
    panel.get_by_role("button", name=button, exact=True).first.click()
    page.wait_for_function("([el, before]) => el.innerText !== before", arg=[panel.element_handle(), before],
                           timeout=timeout_s * 1000)
    settle(page, page.ws, t0, timeout_s=timeout_s, need_draw=False)  # a step may change only the text
    return page.ws.since_mark, before, panel.inner_text()
