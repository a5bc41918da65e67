"""Sweeps: grid expansion, executors (serial, process, thread, Dask), resumable caches.

The store itself (SQLite: concurrent writers, kill -9, corruption) is tested in test_sweep_store.py.
"""

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


def test_garbage_cache_file(tmp_path):
    cache = tmp_path / "s.csv"
    cache.write_text("hello,world\n1,2\n")
    with pytest.raises(FormatError, match="not overwriting"):  # someone else's file: never clobbered
        sweep(area, {"w": [1], "h": [1]}, executor="serial", cache=cache)
    with pytest.raises(FormatError, match="csv, .parquet or .sqlite"):
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


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_cache_add_without_load_keeps_existing_records(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow", reason="parquet caches need pyarrow (installed with the dev extra)")
    path = tmp_path / f"c{suffix}"
    SweepCache(path).add({"a": 1}, {"a": 1, "y": 1})
    SweepCache(path).add({"a": 2}, {"a": 2, "y": 4})  # a fresh handle on an existing file
    assert sorted(SweepCache(path).load()) == ['{"a": 1}', '{"a": 2}']


def test_unpicklable_fn_on_a_process_pool_is_a_clear_error(tmp_path):
    cache = tmp_path / "s.csv"
    with pytest.raises(HetschedError, match="picklable") as e:
        sweep(lambda x: {"y": x}, {"x": [1, 2]}, executor="process", max_workers=1, cache=cache)
    assert e.value.field == "executor"
    # a thread pool runs the same callable
    assert sweep(lambda x: {"y": x}, {"x": [1, 2]}, executor="thread", max_workers=1)["y"].tolist() == [1, 2]


def interrupted_at_3(x, log):
    if x == 3 and not os.path.exists(log + ".resumed"):
        raise KeyboardInterrupt  # Ctrl-C (or a killed job) in the middle of the sweep
    return counting(x, log)


@pytest.mark.parametrize("executor", ["serial", "process"])
def test_ctrl_c_mid_sweep_loses_nothing_and_resumes(tmp_path, executor):
    log = str(tmp_path / CALLS_FILE)
    cache = tmp_path / "s.csv"
    with pytest.raises(KeyboardInterrupt):
        sweep(interrupted_at_3, {"x": [1, 2, 3, 4], "log": [log]}, executor=executor, max_workers=1, cache=cache)
    assert len(SweepCache(cache).load()) == 2  # the points that finished are on disk
    open(log + ".resumed", "w").close()
    df = sweep(interrupted_at_3, {"x": [1, 2, 3, 4], "log": [log]}, executor="serial", cache=cache)
    assert df["y"].tolist() == [2, 3, 4, 5]
    calls = open(log).read().split()
    assert calls[:2] == ["1", "2"] and calls.count("1") == calls.count("2") == 1  # finished points never rerun
    if executor == "serial":
        assert calls == ["1", "2", "3", "4"]  # (a pool may also have been running point 4 when Ctrl-C came)


def test_package_level_call_and_parameter_columns_first():
    import hetsched

    with pytest.warns(UserWarning, match="1 of 2"):  # area() takes no 'extra': recorded per point, not fatal
        df = hetsched.sweep(area, [{"w": 1, "h": 2}, {"w": 3, "h": 4, "extra": 0}], executor="serial")
    assert list(df.columns[:3]) == ["w", "h", "extra"]  # every parameter before the metrics
    assert df.loc[0, "area"] == 2 and isinstance(df.loc[1, "error"], str)
