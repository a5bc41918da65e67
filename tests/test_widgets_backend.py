"""BackendPanel driven headlessly: toggles and priority edits re-partition and re-simulate."""

from __future__ import annotations

import pytest

import hetsched as hs
import hetsched.partition as pt
from hetsched.io.generators import chain, resnet_like
from hetsched.widgets import BackendPanel
from panel_testing import prepared_downloads as _prepared_downloads



@pytest.fixture()
def panel():
    return BackendPanel(graph=resnet_like(blocks_per_stage=1), system=hs.toy_system())


def _labels(fw):
    return {t.name for t in fw.data if t.mode == "markers"}


def test_default_is_the_core_partition(panel):
    v = panel.result
    direct = pt.partition_by_support(panel.graph, hs.toy_system())
    assert dict(v.partition.groups) == dict(direct.groups)
    assert set(panel.checkboxes) == {"gpu0", "fpga0", "cpu0"}
    assert _labels(panel.figures["graph"]) == {"gpu0"}
    assert "throughput" in panel.figures["gantt"].layout.title.text


def test_toggle_backend_recolours_and_resimulates(panel):
    before_tp = panel.result.buffered.metrics["throughput_per_s"]
    panel.checkboxes["gpu0"].value = False  # what a click does
    v = panel.result
    assert "gpu0" not in v.partition.assignment.values()
    assert _labels(panel.figures["graph"]) == {"cpu0", "fpga0"}
    # cross-backend edges drawn thick, same count as the partition's
    hl = [t for t in panel.figures["graph"].data if t.name == "highlighted edges"][0]
    n_cross = sum(1 for u, w in panel.graph.nx.edges if v.partition.assignment[u] != v.partition.assignment[w])
    assert n_cross > 0 and len(hl.x) == 3 * n_cross
    assert v.buffered.metrics["throughput_per_s"] != before_tp
    assert {t.name for t in panel.figures["gantt"].data} >= {"cpu0", "fpga0"}
    assert "fpga0" in panel.groups_html.value


def test_priority_grid_edit_moves_ops(panel):
    panel.toggle("gpu0", False)
    n_fpga = sum(1 for b in panel.result.partition.assignment.values() if b == "fpga0")
    panel.grid_cells[("fpga0", "Conv")].value = 0  # FPGA no longer runs convolutions
    a = panel.result.partition.assignment
    assert all(a[o] != "fpga0" for o in panel.graph if panel.graph.op(o).op_type == "Conv")
    assert sum(1 for b in a.values() if b == "fpga0") < n_fpga
    panel.set_priority("cpu0", "Relu", 1)  # the CPU now beats the FPGA (2) on Relu
    a = panel.result.partition.assignment
    assert all(a[o] == "cpu0" for o in panel.graph if panel.graph.op(o).op_type == "Relu")
    assert panel.grid_cells[("cpu0", "Relu")].value == 1


def test_merge_min_group_and_buffers(panel):
    panel.toggle("gpu0", False)
    adjacent = len(panel.result.partition.groups)
    panel.state.merge = "none"
    assert len(panel.result.partition.groups) == panel.graph.n_ops > adjacent
    panel.state.merge = "adjacent"
    panel.state.buffer_depth = 0
    serial = panel.result.buffered.metrics["throughput_per_s"]
    panel.state.buffer_depth = 4
    assert panel.result.buffered.metrics["throughput_per_s"] >= serial
    panel.state.n_inputs = 3
    assert panel.result.buffered.metrics["n_inputs"] == 3


def test_bad_inputs_show_messages_and_recover(panel):
    good = panel.result
    panel.toggle("gpu0", False)
    panel.toggle("cpu0", False)  # the FPGA alone cannot run GlobalAveragePool
    assert "no enabled backend" in panel.message.value and "gap" in panel.message.value
    panel.state.min_group_size = 3  # still broken; then a fallback fixes both
    panel.state.fallback = "cpu0"
    assert panel.message.value == ""
    assert panel.result.partition.fallback_ops
    panel.state.n_inputs = 0
    assert "inputs" in panel.message.value
    panel.state.n_inputs = 8
    assert panel.message.value == "" and panel.result is not good


def test_follows_the_session_and_rebuilds_the_grid():
    p = BackendPanel()
    p.load(chain(4))
    assert {t for (_b, t) in p.grid_cells} == {"Conv", "Relu"}
    assert set(p.result.partition.assignment) == {"op0", "op1", "op2", "op3"}
    links = _prepared_downloads(p)
    for name in ("partition_trace.json", "partition_groups.csv", "support_table.csv"):
        assert f'download="{name}"' in links
