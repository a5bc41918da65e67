"""Synthesized schedules run by torch: exported as CSV, loaded by ``_PipelineScheduleRuntime`` and run
on 2 and 4 local gloo ranks; each rank runs exactly the synthesized order, and the gradients equal
torch's own GPipe run (and the whole model's, computed in one process)."""

from __future__ import annotations

import pytest

from hetsched.pipeline import StageCosts, synthesize, to_torch_csv

torch = pytest.importorskip("torch", reason="torch is an optional extra (pip install hetsched[torch])")

import torch_pipeline_run as tpr  # noqa: E402  (tests/ is on sys.path: the spawned ranks import it too)

# heterogeneous stages, so that the synthesized order is none of the named ones
COSTS2 = StageCosts(f_s=[1.0, 2.0], b_s=[2.0, 5.0], w_s=[0.5, 2.0], activation_bytes=1.0)
COSTS_V = StageCosts(f_s=[1.0, 0.5, 1.5, 1.0], b_s=[2.0, 1.0, 3.0, 2.0], activation_bytes=1.0)
COSTS4 = StageCosts(f_s=[1.0, 1.5, 0.7, 1.2], b_s=[2.0, 3.5, 1.5, 2.5], w_s=[0.8, 1.5, 0.5, 1.0], activation_bytes=1.0)


def _job(tmp_path, name, r, placement):
    path = tmp_path / f"{name}.csv"
    to_torch_csv(r, path)
    return {"name": name, "kind": "csv", "csv": str(path), "placement": placement, "m": r.schedule.m}


def _check(out, r, ref, gpipe=None):
    want = {k: row.split() for k, row in enumerate(r.schedule.to_text())}
    assert out["order"] == want  # each rank ran exactly the synthesized order
    for s, gs in ref.items():
        for got, exp in zip(out["grads"][s], gs):
            torch.testing.assert_close(got, exp)
        if gpipe is not None:
            for got, exp in zip(out["grads"][s], gpipe["grads"][s]):
                torch.testing.assert_close(got, exp)


def test_synthesized_schedules_run_on_two_gloo_ranks(tmp_path):
    m = 4
    r = synthesize(COSTS2, p=2, m=m, method="heuristic")                   # split backward: I and W
    rv = synthesize(COSTS_V, p=2, v=2, m=m, placement="v", method="heuristic")  # two stages per rank in a V
    assert {"I", "W"} <= {a[1] for row in r.schedule.to_text() for a in row.split()}
    jobs = [_job(tmp_path, "synth", r, [0, 1]), _job(tmp_path, "synth_v", rv, [0, 1, 1, 0]),
            {"name": "gpipe", "kind": "gpipe", "placement": [0, 1], "m": m}]
    res = tpr.run(jobs, world=2)
    _check(res["synth"], r, tpr.reference_grads(2, m), gpipe=res["gpipe"])
    _check(res["synth_v"], rv, tpr.reference_grads(4, m))


def test_synthesized_schedule_under_a_memory_cap_runs_on_four_gloo_ranks(tmp_path):
    m = 8
    r = synthesize(COSTS4, p=4, m=m, memory_cap_bytes="1f1b", method="heuristic")
    assert r.metrics["makespan_s"] < r.named.set_index("label").loc["1f1b", "makespan_s"]
    jobs = [_job(tmp_path, "synth", r, [0, 1, 2, 3]), {"name": "gpipe", "kind": "gpipe", "placement": [0, 1, 2, 3], "m": m}]
    res = tpr.run(jobs, world=4)
    _check(res["synth"], r, tpr.reference_grads(4, m), gpipe=res["gpipe"])
