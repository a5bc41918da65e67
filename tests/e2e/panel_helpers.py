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
