"""simulate(): timelines that pass check_timeline, comm models, lock-step and caches, steps/replay."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetsched import check_timeline
from hetsched.errors import ScheduleError
from hetsched.pipeline import (
    P2P,
    SCHEDULES,
    StageCosts,
    interleaved_1f1b,
    make_schedule,
    one_f_one_b,
    peak_in_flight,
    simulate,
    timeline_deps,
    zb_h1,
)


@settings(max_examples=25)
@given(st.sampled_from(sorted(SCHEDULES)), st.integers(2, 5), st.integers(1, 12), st.floats(0.0, 0.5), st.floats(0.5, 2.0))
def test_timeline_passes_check_timeline_with_pipeline_deps(name, p, m, lat, tb):
    try:
        s = make_schedule(name, p, 2, m)
    except ScheduleError as exc:  # torch's own refusals (dualpipev m < 2p, torch rounds)
        assert "torch raises the same" in str(exc)
        return
    r = simulate(s, costs=StageCosts(f_s=1.0, b_s=tb, activation_bytes=1e6), comm=P2P(latency_s=lat, bandwidth_Bps=1e9))
    tl = r.timeline
    check_timeline(tl, deps=timeline_deps(s))
    comp = tl[tl.kind == "compute"]
    assert len(comp) == s.n_actions
    assert set(tl.kind) <= {"compute", "transfer", "bubble"}
    assert tl.end_s.max() == pytest.approx(r.metrics["makespan_s"])
    # per rank: compute + bubble tile [0, makespan]
    for lane, g in tl[tl.lane.str.startswith("rank")].groupby("lane"):
        assert (g.end_s - g.start_s).sum() == pytest.approx(r.metrics["makespan_s"])
    n_tr = int((tl.kind == "transfer").sum())
    assert n_tr == r.metrics["n_transfers"]
    assert r.metrics["bytes_moved"] == pytest.approx(1e6 * n_tr)
    # consumers start after the transfer arrives
    if lat > 0 and n_tr:
        assert r.metrics["makespan_s"] >= simulate(s, costs={"F": 1.0, "B": tb}, timeline=False).metrics["makespan_s"]


def test_communication_latency_by_hand():
    # 2 ranks, 1 micro-batch: F0, (send), F1, B1, (send), B0; a send of 1 MB over 0.5 s + 1 MB / (2 MB/s)
    s = one_f_one_b(2, 1)
    r = simulate(s, costs={"F": 1.0, "B": 2.0, "activation_bytes": 1e6}, comm={"latency_s": 0.5, "bandwidth_Bps": 2e6})
    assert r.metrics["makespan_s"] == pytest.approx(1 + 1.0 + 1 + 2 + 1.0 + 2)
    tr = r.timeline[r.timeline.kind == "transfer"].sort_values("start_s")
    assert tr.name.tolist() == ["0F0", "1B0"] and tr.lane.tolist() == ["p2p 0->1", "p2p 1->0"]
    assert tr.start_s.tolist() == [1.0, 5.0]
    # the cost model's rule: a message of 0 bytes is free, whatever the latency
    assert simulate(s, costs={"F": 1.0, "B": 2.0}, comm={"latency_s": 0.5}).metrics["makespan_s"] == 6.0
    # a per-message set-up overhead applies to every message
    assert simulate(s, costs={"F": 1.0, "B": 2.0}, comm={"overhead_s": 0.25}).metrics["makespan_s"] == 6.5


def test_per_stage_costs_and_bytes():
    s = interleaved_1f1b(2, 2, 4)
    r = simulate(s, costs=StageCosts(f_s=[1, 1, 1, 3], b_s=2, activation_bytes=[10, 20, 30, 40]))
    assert r.per_rank.busy_s.tolist() == [4 * (1 + 2) * 2, 4 * (1 + 3) + 4 * 2 * 2]
    assert r.per_rank.peak_activation_bytes.tolist()[0] > 0
    per_chunk = simulate(s, costs=StageCosts(f_s=[1, 3], b_s=2))
    assert per_chunk.per_rank.busy_s.tolist() == [4 * (1 + 3) + 4 * 2 * 2] * 2
    with pytest.raises(ScheduleError, match="one value per global stage"):
        simulate(s, costs=StageCosts(f_s=[1, 2, 3]))
    with pytest.raises(ScheduleError, match="non-negative"):
        simulate(s, costs={"F": -1})
    with pytest.raises(ScheduleError, match="unknown cost"):
        simulate(s, costs={"Q": 1})
    with pytest.raises(ScheduleError, match="cache must be"):
        simulate(s, cache="both")
    with pytest.raises(ScheduleError, match="bandwidth"):
        P2P(bandwidth_Bps=0)


def test_time_peak_activations_match_order_peak_with_unit_costs():
    for s in (interleaved_1f1b(4, 2, 10), one_f_one_b(4, 8), zb_h1(3, 6)):
        r = simulate(s, costs={"F": 1, "B": 1, "I": 1, "W": 1})
        assert r.per_rank.peak_activations_chunks.tolist() == peak_in_flight(s).tolist()


def test_lockstep_needs_a_cache():
    """The patent's point: a lock-step exchange cannot run interleaved 1F1B without a cache."""
    p, v, m = 4, 2, 10  # r = 2
    s = interleaved_1f1b(p, v, m, grouping="paddle")
    ideal = (v * m + p - 1) * 2.0
    assert simulate(s, costs={"F": 1, "B": 1}).metrics["makespan_s"] == ideal
    with pytest.raises(ScheduleError, match="lock-step p2p without a cache") as ei:
        simulate(s, costs={"F": 1, "B": 1}, comm=P2P(lockstep=True))
    assert ei.value.field == "deadlock"
    cached = simulate(s, costs={"F": 1, "B": 1}, comm=P2P(lockstep=True), cache="sender")
    recv = simulate(s, costs={"F": 1, "B": 1}, comm=P2P(lockstep=True), cache="receiver")
    assert cached.metrics["makespan_s"] == ideal == recv.metrics["makespan_s"]
    # the last rank's forward cache holds r = m % p outputs at its peak
    assert cached.per_rank.peak_cache_depth.iloc[-1] == m % p
    check_timeline(cached.timeline, deps=timeline_deps(s))
    # plain 1F1B survives a blocking exchange, but pays for it
    s1 = one_f_one_b(4, 8)
    c1 = {"F": 1, "B": 1, "activation_bytes": 1.0}
    blocked = simulate(s1, costs=c1, comm=P2P(latency_s=0.25, lockstep=True))
    assert blocked.metrics["makespan_s"] > simulate(s1, costs=c1, comm=P2P(latency_s=0.25)).metrics["makespan_s"]
    check_timeline(blocked.timeline, deps=timeline_deps(s1))


def test_steps_are_action_starts_in_time_order_and_replay_shows_state():
    s = interleaved_1f1b(3, 2, 7, grouping="paddle")  # r = 1
    r = simulate(s, costs={"F": 1, "B": 1}, comm=P2P(lockstep=True), cache="sender")
    assert r.n_steps == s.n_actions
    starts = [st_.before for st_ in r.steps]
    assert starts == sorted(starts)
    st0 = r.steps[0]
    assert st0.action == "start" and st0.subject == "0F0" and st0.data["rank"] == 0
    assert "waiting for" in r.steps[5].reason or "as soon as" in r.steps[5].reason
    assert r.steps_frame().shape[0] == s.n_actions
    init = r.replay(-1)
    assert init["running"] == {} and init["done"] == 0
    final = r.replay(r.n_steps - 1)
    assert final["done"] == s.n_actions - len(final["running"])
    # somewhere the last rank's forward cache holds an output
    depths = [len(r.replay(k)["queues"][2]) for k in range(r.n_steps)]
    assert max(depths) >= 1 and depths[-1] == 0
    held = [r.replay(k)["in_flight"][0] for k in range(0, r.n_steps, 7)]
    assert max(held) <= peak_in_flight(s)[0]
    with pytest.raises(IndexError):
        r.replay(r.n_steps)
    assert "makespan_s" in repr(r)


def test_simulation_is_deterministic_and_input_untouched():
    s = interleaved_1f1b(4, 3, 13)
    before = s.to_text()
    a = simulate(s, costs={"F": 1.0, "B": 2.0}, comm={"latency_s": 0.1})
    b = simulate(s, costs={"F": 1.0, "B": 2.0}, comm={"latency_s": 0.1})
    assert np.array_equal(a.start_s, b.start_s) and a.timeline.equals(b.timeline)
    assert s.to_text() == before
    assert not s.stage.flags.writeable


def test_overlapping_transfers_get_extra_lanes():
    # latency far above compute time: transfers on one link overlap
    s = one_f_one_b(2, 4)
    r = simulate(s, costs={"F": 0.1, "B": 0.1, "activation_bytes": 1.0}, comm={"latency_s": 5.0})
    lanes = set(r.timeline.lane)
    assert "p2p 0->1" in lanes and "p2p 0->1 #2" in lanes
    check_timeline(r.timeline, deps=timeline_deps(s))


def test_compare_table():
    from hetsched.pipeline import compare

    df = compare(4, 2, 11, costs={"F": 1, "B": 1})
    assert df["label"].tolist()[:4] == ["interleaved_1f1b[balanced]", "interleaved_1f1b[megatron]", "interleaved_1f1b[paddle]", "interleaved_1f1b[torch]"]
    torch_row = df[df.label == "interleaved_1f1b[torch]"].iloc[0]
    assert "multiple of the number of rounds" in torch_row["error"] and pd.isna(torch_row["makespan_s"])
    ok = df[df.error.isna() & df.label.str.startswith("interleaved")]
    assert (ok["makespan_s"] == (2 * 11 + 3) * 2).all()
    assert df.loc[df.label == "interleaved_1f1b[balanced]", "order_peak"].item() <= df.loc[df.label == "interleaved_1f1b[paddle]", "order_peak"].item()
    # the long form (issue 21): the same numbers, label/family/metric/value; a refused schedule has none
    long = compare(4, 2, 11, costs={"F": 1, "B": 1}, long=True)
    assert list(long.columns) == ["label", "family", "metric", "value"] and set(long["family"]) == {"pipeline"}
    assert "interleaved_1f1b[torch]" not in set(long["label"])
    mk = long[long.metric == "makespan_s"].set_index("label")["value"]
    assert mk.to_dict() == ok.set_index("label")["makespan_s"].to_dict()
    # a schedule listed twice is simulated once, one row
    twice = compare(2, 1, 4, lineup=[("1f1b", {}), ("gpipe", {}), ("1f1b", {})], costs={"F": 1, "B": 1})
    assert twice["label"].tolist() == ["1f1b", "gpipe"]


def test_unknown_comm_field_is_a_schedule_error():
    with pytest.raises(ScheduleError) as ei:
        simulate(one_f_one_b(2, 2), comm={"latency": 1e-6})
    assert ei.value.field == "comm" and "latency" in str(ei.value)


def test_how_long_a_message_was_held_is_the_cores_by_cache_design():
    """Issue 29: 'held' is defined once, in the core, per cache design (the receive buffer: arrival to
    consumption; the sender's queue: production to send), in messages() and in the consumer's step."""
    s = interleaved_1f1b(4, 2, 10, grouping="paddle")
    for cache in ("sender", "receiver"):
        r = simulate(s, costs={"F": 1, "B": 1}, comm=P2P(lockstep=True), cache=cache)
        msg = r.messages()
        want = msg["consumed_s"] - msg["arrived_s"] if cache == "receiver" else msg["sent_s"] - msg["produced_s"]
        assert msg["held_s"].tolist() == want.tolist() and (msg["held_s"] > 0).any()
        by_consumer = dict(zip(msg["consumer"], msg["held_s"]))
        for st in r.steps:
            assert st.data["held_s"] == by_consumer.get(st.subject)
