"""The tour notebook served by Voila and opened in a real Chromium: every plot renders, offline."""

from __future__ import annotations

import re

import pytest
from e2e_helpers import external_requests, output_errors, screenshot, wait_for_plots

# The tour shows four figures: the graph, the Gantt, the memory curve and a comparison.
N_TOUR_FIGURES = 4


@pytest.mark.e2e
def test_tour_renders_plotly_figures_in_chromium(voila_page):
    page = voila_page("00_tour")
    n = wait_for_plots(page, N_TOUR_FIGURES)
    assert n == N_TOUR_FIGURES
    assert output_errors(page) == []
    # Plotly drew real marks, not empty frames: markers in the graph view, bars in the Gantt.
    assert page.locator(".js-plotly-plot .scatterlayer .point").count() > 10
    assert page.locator(".js-plotly-plot .barlayer .point").count() > 10
    # plotly.js came from the server (the lab extension), not a CDN: CI has no internet.
    assert external_requests(page) == [] and page.failed_requests == []
    # the tables show numbers as a person reads them (issue 33: no raw 8217632232.0), and the text does not
    # describe code Voila hides
    text = page.locator("#rendered_cells, .jp-Notebook").first.inner_text()
    assert not re.search(r"\b\d{7,}(\.\d+)?\b", text), re.search(r"\b\d{7,}(\.\d+)?\b", text)
    assert "8.22 GFLOP" in text and "97.5 MiB" in text
    assert not re.search(r"the cell below|run the notebook again|keep_tensors_resident=True", text)
    assert screenshot(page, "e2e_tour").stat().st_size > 10_000
    screenshot(page.locator(".js-plotly-plot").nth(1), "e2e_tour_gantt")
