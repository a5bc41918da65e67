"""BackendPanel in a real browser: switch a backend off, the graph recolours and the Gantt redraws."""

from __future__ import annotations

import pytest
from e2e_helpers import output_errors, plot_signature, screenshot, wait_for_change, wait_for_plots
from panel_helpers import figure_title, panel_figure_indexes, wait_for_title_change

NOTEBOOK = "02_partition"


@pytest.mark.e2e
def test_backend_panel_toggle_backend(voila_page):
    page = voila_page(NOTEBOOK)
    wait_for_plots(page, 2)
    panel = page.locator(".hetsched-panel").last
    panel.wait_for()
    graph_i, gantt_i = panel_figure_indexes(page, 2)
    assert output_errors(page) == []
    graph_before = plot_signature(page, graph_i)
    gantt_title = figure_title(page, gantt_i)
    assert "fpga0" in graph_before  # the FPGA-first list puts convolutions on the FPGA
    panel.get_by_role("checkbox", name="fpga0").click()
    after = wait_for_change(page, graph_before, graph_i, timeout_s=90)
    assert "fpga0" not in after  # recoloured: nothing left on the FPGA
    try:
        wait_for_title_change(page, gantt_title, gantt_i, timeout_s=90)  # new throughput in the title
    except Exception:
        raise AssertionError(f"gantt title stayed {figure_title(page, gantt_i)!r}; figures {panel_figure_indexes(page, 2)}, "
                             f"was {gantt_title!r} at {gantt_i}")
    screenshot(panel, "e2e_backend_panel_fpga_off")
