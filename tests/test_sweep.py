"""Sweeps: grid expansion, executors (serial, process, thread, Dask), resumable caches."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from hetsched.errors import FormatError, HetschedError
from hetsched.sweep import SweepCache, expand_grid, sweep

CALLS_FILE = "calls.txt"


def area(w, h):
    return {"area": w * h, "perimeter": 2 * (w + h)}


def flaky(x):
    if x == 2:
        raise ValueError("x=2 is bad")
    return {"y": x * 10}


def counting(x, log):
    with open(log, "a") as f:
        f.write(f"{x}\n")
    return {"y": x + 1}


def evaluate_point(link_Bps, n):
    """A real what-if point: evaluate a chain on a toy system with a given host link."""
    import hetsched as hs
    from hetsched.io.generators import chain

    s = hs.toy_system(host_link_Bps=link_Bps)
    g = chain(n, seed=1)
    return hs.evaluate(g, s, {o: "gpu0" for o in g})


def test_expand_grid_product_and_list():
    assert expand_grid({"a": [1, 2], "b": [3, 4]}) == [{"a": 1, "b": 3}, {"a": 1, "b": 4}, {"a": 2, "b": 3}, {"a": 2, "b": 4}]
    assert expand_grid([{"a": 1}, {"a": 5, "b": 0}]) == [{"a": 1}, {"a": 5, "b": 0}]
    with pytest.raises(HetschedError, match="'a'"):
        expand_grid({"a": 3})


@pytest.mark.parametrize("executor", ["serial", "thread", "process"])
def test_executors_agree(executor):
    df = sweep(area, {"w": [1, 2, 3], "h": [4, 5]}, executor=executor, max_workers=2)
    assert list(df.columns[:4]) == ["w", "h", "area", "perimeter"]
    assert df["area"].tolist() == [4, 5, 8, 10, 12, 15]
    assert df["error"].isna().all()
    assert (df["runtime_s"] >= 0).all()


def test_results_with_metrics_attribute_and_real_evaluation():
    df = sweep(evaluate_point, {"link_Bps": [1e9, 16e9], "n": [4]}, executor="serial")
    slow, fast = df["makespan_s"].tolist()
    assert slow > fast > 0  # a slower host link makes the same mapping slower


def test_failed_point_is_recorded_not_fatal():
    with pytest.warns(UserWarning, match="1 of 3"):
        df = sweep(flaky, {"x": [1, 2, 3]}, executor="serial")
    assert df.loc[1, "error"].startswith("ValueError: x=2 is bad")
    assert df.loc[[0, 2], "y"].tolist() == [10, 30]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_cache_resumes_without_recomputing(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow", reason="parquet caches need pyarrow (installed with the dev extra)")
    log = str(tmp_path / CALLS_FILE)
    cache = tmp_path / f"sweep{suffix}"
    df1 = sweep(counting, {"x": [1, 2], "log": [log]}, executor="serial", cache=cache)
    # an interrupted sweep: a bigger grid later recomputes only the new points
    df2 = sweep(counting, {"x": [1, 2, 3], "log": [log]}, executor="serial", cache=cache)
    assert open(log).read().split() == ["1", "2", "3"]
    assert df2["y"].tolist() == [2, 3, 4]
    assert df1["y"].tolist() == df2["y"].tolist()[:2]
    assert len(SweepCache(cache).load()) == 3


def test_truncated_last_csv_line_is_dropped_and_recomputed(tmp_path):
    log = str(tmp_path / CALLS_FILE)
    cache = tmp_path / "s.csv"
    sweep(counting, {"x": [1, 2], "log": [log]}, executor="serial", cache=cache)
    text = cache.read_text()
    cache.write_text(text[: len(text) - 7])  # the machine died mid-write
    with pytest.warns(UserWarning, match="truncated"):
        df = sweep(counting, {"x": [1, 2], "log": [log]}, executor="serial", cache=cache)
    assert df["y"].tolist() == [2, 3]
    assert open(log).read().split() == ["1", "2", "2"]


def test_corrupted_cache_is_reported_not_trusted(tmp_path):
    log = str(tmp_path / CALLS_FILE)
    cache = tmp_path / "s.csv"
    sweep(counting, {"x": [1, 2, 3], "log": [log]}, executor="serial", cache=cache)
    lines = cache.read_text().splitlines()
    lines[1] = lines[1].replace('"y"": 2', '"y"": 999')  # a silent bit flip in the middle
    cache.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError, match="corrupted"):
        sweep(counting, {"x": [1, 2, 3], "log": [log]}, executor="serial", cache=cache)
    with pytest.warns(UserWarning, match="moved aside"):
        df = sweep(counting, {"x": [1, 2, 3], "log": [log]}, executor="serial", cache=cache, on_corrupt="recompute")
    assert df["y"].tolist() == [2, 3, 4]
    assert (tmp_path / "s.csv.corrupt").exists()


def test_garbage_cache_file(tmp_path):
    cache = tmp_path / "s.csv"
    cache.write_text("hello,world\n1,2\n")
    with pytest.raises(FormatError, match="columns"):
        sweep(area, {"w": [1], "h": [1]}, executor="serial", cache=cache)
    with pytest.raises(FormatError, match="csv or .parquet"):
        sweep(area, {"w": [1], "h": [1]}, executor="serial", cache=tmp_path / "s.txt")


def test_unknown_executor():
    with pytest.raises(HetschedError, match="unknown executor"):
        sweep(area, {"w": [1, 2], "h": [1]}, executor="gpu")


@pytest.mark.slow
def test_dask_local_cluster(tmp_path):
    distributed = pytest.importorskip("distributed", reason="dask[distributed] is part of the dev extra")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            df = sweep(evaluate_point, {"link_Bps": [1e9, 4e9, 16e9], "n": [3, 6]},
                       executor=client.get_executor(), cache=tmp_path / "dask.csv")
    assert len(df) == 6 and df["error"].isna().all()
    ref = sweep(evaluate_point, {"link_Bps": [1e9, 4e9, 16e9], "n": [3, 6]}, executor="serial")
    pd.testing.assert_series_equal(df["makespan_s"], ref["makespan_s"])
