"""Helpers for browser tests (import them: ``from e2e_helpers import wait_for_plots, screenshot``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"

__all__ = ["ARTIFACTS", "ROOT", "wait_for_plots", "plot_signature", "wait_for_change", "output_errors", "external_requests", "COSMETIC_EXTERNAL", "screenshot"]


def wait_for_plots(page, n: int = 1, *, timeout_s: float = 60.0) -> int:
    """Wait until at least ``n`` Plotly figures have drawn their SVG; return how many there are."""
    page.wait_for_function(
        "n => document.querySelectorAll('.js-plotly-plot .main-svg').length >= n",
        arg=n,
        timeout=timeout_s * 1000,
    )
    return page.locator(".js-plotly-plot").count()


def plot_signature(page, index: int = 0) -> str:
    """A string that changes when the ``index``-th Plotly figure is redrawn with other data.

    Compare it before and after an interaction to check that the plot in the page really changed.
    """
    return page.evaluate(
        """i => {
            const el = document.querySelectorAll('.js-plotly-plot')[i];
            if (!el) return null;
            const data = (el.data || []).map(t => [t.type, t.name, t.x && t.x.length, t.y && t.y.length,
                                                    t.base && t.base.length, JSON.stringify(t.marker && t.marker.color)]);
            const svg = el.querySelector('.main-svg');
            return JSON.stringify(data) + '|' + (svg ? svg.innerHTML.length : 0);
        }""",
        index,
    )


def output_errors(page) -> list[str]:
    """Texts of error outputs (tracebacks) in the rendered notebook; [] when every cell ran cleanly."""
    texts = page.locator(
        "[data-mime-type='application/vnd.jupyter.stderr'], .jp-RenderedText[data-mime-type*='error']"
    ).all_inner_texts()
    return [re.sub(r"\s+", " ", t)[:500] for t in texts if "Traceback" in t or "Error" in t]


def screenshot(target, name: str, *, max_height: int = 8000) -> Path:
    """Save a screenshot as ``test-artifacts/<name>.png`` and return its path.

    ``target`` is a page (the whole notebook: Voila scrolls inside ``#rendered_cells``, so the
    viewport is stretched to its height for the shot) or a locator (just that element).
    """
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
    if not hasattr(target, "viewport_size"):  # a Locator
        target.screenshot(path=str(path))
        return path
    size = target.viewport_size
    height = target.evaluate(
        "() => Math.max(document.documentElement.scrollHeight,"
        " ...Array.from(document.querySelectorAll('#rendered_cells, .jp-Notebook'), e => e.scrollHeight))"
    )
    try:
        if size and height > size["height"]:
            target.set_viewport_size({"width": size["width"], "height": min(int(height) + 40, max_height)})
        target.screenshot(path=str(path), full_page=True)
    finally:
        if size:
            target.set_viewport_size(size)
    return path


def wait_for_change(page, before: str, index: int = 0, *, timeout_s: float = 30.0) -> str:
    """Wait until :func:`plot_signature` of figure ``index`` differs from ``before``; return the new one."""
    page.wait_for_function(
        """([i, before]) => {
            const el = document.querySelectorAll('.js-plotly-plot')[i];
            if (!el) return false;
            const data = (el.data || []).map(t => [t.type, t.name, t.x && t.x.length, t.y && t.y.length,
                                                    t.base && t.base.length, JSON.stringify(t.marker && t.marker.color)]);
            const svg = el.querySelector('.main-svg');
            return JSON.stringify(data) + '|' + (svg ? svg.innerHTML.length : 0) !== before;
        }""",
        arg=[index, before],
        timeout=timeout_s * 1000,
    )
    return plot_signature(page, index)


# Voila's own page template links Font Awesome CSS from a CDN (icons only); the browser fixture
# refuses it like every off-machine request, and the page works without it.
COSMETIC_EXTERNAL = ("/@fortawesome/fontawesome-free",)


def external_requests(page, *, include_cosmetic: bool = False) -> list[str]:
    """URLs the page asked for off this machine (refused by the fixture; CI has no internet).

    Voila's template icon CSS (``COSMETIC_EXTERNAL``) is left out unless ``include_cosmetic``.
    """
    local = re.compile(r"^(https?|wss?)://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?/|^(data|blob|about|chrome):")
    urls = [u for u in getattr(page, "requested_urls", []) if not local.match(u)]
    if not include_cosmetic:
        urls = [u for u in urls if not any(c in u for c in COSMETIC_EXTERNAL)]
    return urls
