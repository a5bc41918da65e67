"""Exports: torch compute-only CSV (read by torch's own loader), Chrome trace."""

from __future__ import annotations

import json

import pytest

from pathlib import Path

from hetsched.pipeline import (
    StageCosts,
    from_torch_csv,
    interleaved_1f1b,
    simulate,
    split_backward,
    synthesize,
    to_chrome_trace,
    to_torch_csv,
    zbv,
)

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("padded", [False, True])
def test_csv_round_trip(tmp_path, padded):
    s = interleaved_1f1b(3, 2, 7, grouping="paddle")
    path = tmp_path / "sched.csv"
    text = to_torch_csv(s, path, padded=padded)
    assert path.read_text() == text and len(text.splitlines()) == 3
    back = from_torch_csv(path, v=2, m=7)
    assert back.to_text() == s.to_text()
    if padded:
        assert ",," in text  # idle steps are empty cells, as in torch's pipeline_order


@pytest.mark.parametrize("make", [lambda: zbv(1, 3), lambda: zbv(2, 4)])
def test_csv_round_trip_of_v_placed_schedules(make):
    """A V-placed schedule comes back equal; on one rank its CSV cannot tell the V from the loop
    placement (every stage is on rank 0), and the two are the same schedule."""
    s = make()
    assert from_torch_csv(to_torch_csv(s), m=s.m) == s


def _torch_loader():
    torch = pytest.importorskip("torch")
    from torch.distributed.pipelining import schedules as S

    return torch, S


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("make", [lambda: interleaved_1f1b(4, 2, 10, grouping="paddle"), lambda: split_backward(interleaved_1f1b(3, 2, 5)), lambda: zbv(3, 5),
                                  lambda: synthesize({"F": [1.0, 2.0, 1.5], "B": [2.0, 5.0, 3.0]}, p=3, m=5, method="heuristic").schedule,
                                  lambda: synthesize({"F": [1.0, 0.5, 1.5, 1.0]}, p=2, v=2, m=3, placement="v", method="heuristic").schedule])
def test_torch_compute_only_loader_reads_our_csv(tmp_path, padded, make):
    """torch 2.13 PipelineScheduleMulti._load_csv(format="compute_only") accepts and validates it."""
    _, S = _torch_loader()
    s = make()
    path = tmp_path / "s.csv"
    to_torch_csv(s, path, padded=padded)
    sched = object.__new__(S.PipelineScheduleMulti)
    # the attributes _load_csv and its validation read (no process group, no stages needed)
    sched.pipeline_order = {}
    sched.pp_group_size = s.p
    sched._num_stages = s.n_stages
    sched._n_microbatches = s.m
    sched._stages = []
    sched._load_csv(str(path), format="compute_only")
    got = [[str(a) for a in sched.pipeline_order[r] if a is not None] for r in range(s.p)]
    assert got == [t.split() for t in s.to_text()]
    assert sched.stage_index_to_group_rank == {i: int(r) for i, r in enumerate(s.stage_to_rank)}


def test_chrome_trace(tmp_path):
    s = interleaved_1f1b(2, 2, 4)
    r = simulate(s, costs={"F": 1e-3, "B": 2e-3}, comm={"latency_s": 1e-4})
    out = tmp_path / "trace.json"
    tr = to_chrome_trace(r, out)
    assert json.loads(out.read_text()) == tr
    xs = [e for e in tr["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(r.timeline)
    names = {e["args"]["name"] for e in tr["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"rank 0", "rank 1", "p2p 0->1", "p2p 1->0"} <= names
    comp = [e for e in xs if e["cat"] == "compute"]
    assert {"stage", "chunk", "microbatch"} <= set(comp[0]["args"])


def test_chrome_trace_has_flow_arrows_producer_transfer_consumer():
    s = interleaved_1f1b(2, 1, 2)
    r = simulate(s, costs={"F": 1e-3, "B": 1e-3}, comm={"latency_s": 1e-4})
    tl = r.timeline
    rows = tl[tl["flow"].fillna("").str.split(",").apply(lambda xs: "0F0" in xs)]
    assert sorted(rows["kind"].tolist()) == ["compute", "compute", "transfer"]
    assert set(rows.loc[rows.kind == "compute", "name"]) == {"0F0", "1F0"}
    ev = to_chrome_trace(r)["traceEvents"]
    arrows = [e for e in ev if e["ph"] in ("s", "f") and e["name"] == "0F0"]
    assert [e["ph"] for e in arrows] == ["s", "f", "s", "f"]


def _synth_instance():
    doc = json.loads((DATA / "torch_dump_synth_p4_m8.json").read_text())
    kw = {k: v for k, v in doc.items() if k != "costs"}
    return synthesize(StageCosts(**doc["costs"]), **kw)


def test_reads_torchs_lowering_of_a_synthesized_schedule():
    """torch 2.13 lowered a synthesized schedule to sends, receives and gradient reductions
    (``scripts/gen_torch_golden.py --synth``; rerun it when the synthesis changes its answer): the
    compute order is the synthesized one and every torch action agrees with it."""
    dump = from_torch_csv(DATA / "torch_dump_synth_p4_m8_comms.csv")
    r = _synth_instance()
    assert dump.to_text() == r.schedule.to_text()
    kinds = {a.rstrip("0123456789").lstrip("0123456789") for row in dump.meta["torch_actions"] for _, a in row}
    assert {"SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD"} <= kinds


def test_a_result_exports_its_schedule():
    r = synthesize({"F": 1.0, "B": 2.0}, p=2, m=2, method="heuristic")
    assert to_torch_csv(r) == to_torch_csv(r.schedule)
    with pytest.raises(Exception, match="needs a Schedule"):
        to_torch_csv("0F0,0B0")
