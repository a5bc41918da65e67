"""compare_partitions and best_buffer_depth: the "too many partitions" effect, buffer sizing."""

from __future__ import annotations

import pytest

from hetsched.cost import TableCost
from hetsched.errors import HetschedError
from hetsched.graph import OpGraph
from hetsched.io import load_graph
from hetsched.io.generators import resnet_like
from hetsched.io.systems import load_system
from hetsched.partition import best_buffer_depth, compare_partitions, partition_by_support
from hetsched.system import Device, Link, SupportTable, System

VARIANTS = ["per-op, serial", "adjacent, serial", "adjacent, buffered", "global, buffered"]


def conv_only_accelerator():
    """The bundled Xeon + A100 + U280 server, with the GPU's provider running only convolutions
    and GEMMs (the situation of an execution provider with patchy op coverage)."""
    s = load_system("cpu_gpu_fpga")
    return s.with_support(SupportTable({"gpu0": {"Conv": 1, "Gemm": 1}, "cpu0": {"*": 2}}))


def test_too_many_partitions_make_the_accelerated_model_slower():
    g = load_graph("mobilenet_v2_b1")  # a real model, bundled
    s = conv_only_accelerator()
    cmp = compare_partitions(g, s, n_inputs=16, min_group_size=3)
    f = cmp.frame.set_index("label")
    assert list(f.index) == ["single cpu0"] + VARIANTS + ["global + min_group_size=3, buffered"]
    cpu_only = f.loc["single cpu0", "throughput_per_s"]
    # every conv is an island: dozens of partitions and a copy at every border ...
    assert f.loc["adjacent, serial", "n_groups"] > 50
    assert f.loc["adjacent, serial", "n_cross_edges"] > 50
    assert f.loc["adjacent, serial", "bytes_copied"] > 0
    # ... so the "accelerated" model is slower than not accelerating at all, even pipelined
    for v in VARIANTS:
        assert f.loc[v, "throughput_per_s"] < cpu_only, v
        assert f.loc[v, "speedup_vs_best_single"] < 1
    # merging and buffers help, but do not close the gap
    assert f.loc["adjacent, serial", "n_launches"] < f.loc["per-op, serial", "n_launches"]
    assert f.loc["adjacent, buffered", "throughput_per_s"] > f.loc["adjacent, serial", "throughput_per_s"]
    # Torch-TensorRT's fix: islands below min_block_size go back to the fallback
    assert f.loc["global + min_group_size=3, buffered", "throughput_per_s"] >= cpu_only * 0.99
    assert cmp.metrics["best_single_throughput_per_s"] == pytest.approx(cpu_only)
    assert set(cmp.partitions) == set(cmp.simulations) == set(f.index)
    assert [s.subject for s in cmp.steps] == list(f.index)


def test_a_well_covered_accelerator_wins():
    """Control: when the accelerator runs every op type, one launch and no copies: it wins."""
    g = load_graph("resnet50_b1")
    s = load_system("cpu_gpu_fpga")
    cmp = compare_partitions(g, s, n_inputs=8, enabled=["gpu0", "cpu0"])
    f = cmp.frame.set_index("label")
    # the patent's point: one backend launch per op costs a lot, aggregation removes it
    assert f.loc["per-op, serial", "n_launches"] == g.n_ops
    assert f.loc["per-op, serial", "throughput_per_s"] < 0.8 * f.loc["adjacent, serial", "throughput_per_s"]
    assert f.loc["adjacent, buffered", "n_groups"] == 1
    assert f.loc["adjacent, buffered", "bytes_copied"] == 0
    assert f.loc["single gpu0", "throughput_per_s"] > f.loc["single cpu0", "throughput_per_s"]
    assert cmp.metrics["best_throughput_per_s"] == pytest.approx(f["throughput_per_s"].max())


def test_compare_with_explicit_table_and_singles_off():
    g = resnet_like(n_stages=1, blocks_per_stage=1, channels=8, hw=8)
    s = load_system("cpu_gpu_fpga")
    t = SupportTable({"fpga0": {"Conv": 1, "Relu": 1, "Add": 1}, "cpu0": {"*": 2}})
    cmp = compare_partitions(g, s, table=t, n_inputs=4, singles=False, min_group_size=2, fallback="cpu0")
    assert list(cmp.frame["label"]) == VARIANTS + ["global + min_group_size=2, buffered"]
    assert cmp.frame["speedup_vs_best_single"].isna().all()
    assert set(cmp.partitions["global, buffered"].assignment.values()) == {"fpga0", "cpu0"}


def _two_stage():
    g = OpGraph("two")
    g.add_op("x", "X")
    g.add_op("y", "Y")
    g.add_tensor("t", 0, producer="x", consumers=["y"])
    g.add_tensor("o", 8, producer="y", is_output=True)
    s = System([Device("A", "cpu"), Device("B", "gpu")], [Link("A", "B", 1e30)], host="A",
               support=SupportTable({"A": {"X": 1}, "B": {"Y": 1}}))
    return g, s, TableCost(s, {("X", "A"): 1.0, ("Y", "B"): 1.0})


def test_best_buffer_depth_is_double_buffering_for_a_balanced_pipeline():
    g, s, cost = _two_stage()
    r = best_buffer_depth(partition_by_support(g, s), s, n_inputs=50, depths=(1, 2, 3, 4), cost=cost, launch_s=0.0)
    assert r.best_depth == 2
    f = r.frame.set_index("buffer_depth")
    assert f.loc[1, "throughput_per_s"] == pytest.approx(50 / 100)
    assert f.loc[2, "throughput_per_s"] == pytest.approx(50 / 51)
    assert list(f["within_tol"]) == [False, True, True, True]
    assert [s.accepted for s in r.steps] == [False, True, True, True]


def test_best_buffer_depth_is_the_smallest_within_tolerance():
    s = load_system("cpu_gpu_fpga")
    s = s.with_support(SupportTable({"fpga0": {"Conv": 1}, "cpu0": {"*": 2}}))
    part = partition_by_support(resnet_like(n_stages=2, blocks_per_stage=1, channels=16, hw=16), s)
    r = best_buffer_depth(part, s, n_inputs=24, depths=(4, 1, 2, 3, 6))
    f = r.frame
    best = f["throughput_per_s"].max()
    ok = f[f["throughput_per_s"] >= 0.99 * best]
    assert r.best_depth == ok["buffer_depth"].min()
    assert list(f["buffer_depth"]) == [1, 2, 3, 4, 6]
    with pytest.raises(HetschedError):
        best_buffer_depth(part, s, depths=())
    with pytest.raises(HetschedError):
        best_buffer_depth(part, s, tol=1.5)
