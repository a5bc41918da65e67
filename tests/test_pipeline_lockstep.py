"""Paddle's blocking p2p as it runs (seed 001, claims 1 and 6-13): exchanges, the patent's queues, waiting.

Expected values come from the patent text (``r = m % p``, first group ``p + r``, send interval
``[r, r + (p + r)(v - 1))``, queue put/get rule) and from hand-worked examples, not from the code.
"""

from __future__ import annotations

import numpy as np
import pytest

from hetsched.errors import ScheduleError
from hetsched.pipeline import P2P, StageCosts, interleaved_1f1b, one_f_one_b, patent_queues, simulate
from hetsched.pipeline.lockstep import paddle_steps

UNIT = {"F": 1.0, "B": 1.0}
LOCK = P2P(lockstep=True)


def _depth_at(trace, rank, direction, times):
    """Queue depth after everything that happened at or before each time."""
    g = trace[(trace["rank"] == rank) & (trace["direction"] == direction)]
    t, d = g["time_s"].to_numpy(float), g["depth"].to_numpy(int)
    k = np.searchsorted(t, np.asarray(times) + 1e-9, side="right") - 1
    return np.where(k >= 0, d[np.maximum(k, 0)] if len(d) else 0, 0).tolist()


def _micro_step_ends(r, rank, kind):
    """End of the step holding each of ``rank``'s ``kind`` actions (when its exchange is posted)."""
    s = r.schedule
    step = paddle_steps(s)
    sl = s.rank_slice(rank)
    idx = np.arange(sl.start, sl.stop)
    ends = {}
    for a in idx.tolist():
        ends[int(step[a])] = float(r.end_s[a])  # the step's last action ends last
    return [ends[int(step[a])] for a in idx[s.kind[sl] == kind].tolist()]


def _grid():
    """The torch/Paddle golden grid where the patent's interleaving applies: p 2..8, v 2..4 and
    m from p (the patent's first group needs m >= p) to 24."""
    for p in range(2, 9):
        for v in (2, 3, 4):
            for m in range(p, 25):
                yield p, v, m


def test_hand_worked_p4_v2_m10():
    """r = 2: the last rank keeps 3F0 and 3F1 (micro-steps 0 and 1), sends the head from micro-step 2."""
    s = interleaved_1f1b(4, 2, 10, grouping="paddle")
    r = simulate(s, costs=UNIT, comm=LOCK, cache="sender")
    assert r.metrics["makespan_s"] == (2 * 10 + 4 - 1) * 2  # the cache costs nothing: ideal makespan
    q = r.queue_trace()
    last = q[(q["rank"] == 3) & (q["direction"] == "forward")]
    assert last["items"].tolist()[:3] == [["3F0"], ["3F0", "3F1"], ["3F1", "3F2"]]
    assert int(last["depth"].max()) == 2 and int(last["depth"].iloc[-1]) == 0
    first = q[(q["rank"] == 0) & (q["direction"] == "backward")]
    assert int(first["depth"].max()) == 2 and first["items"].tolist()[0] == ["4B0"]  # chunk-1 gradients wait
    assert set(q["rank"]) == {0, 3}  # only the two queues the patent has
    pv = r.patent()
    assert (pv["r"], pv["first_group"], pv["send_interval"], pv["warmup"]) == (2, 6, (2, 8), [12, 10, 8, 6])


@pytest.mark.slow
def test_simulated_queue_depths_equal_patent_queues_on_the_grid():
    n = 0
    for p, v, m in _grid():
        s = interleaved_1f1b(p, v, m, grouping="paddle")
        r = simulate(s, costs=UNIT, comm=LOCK, cache="sender", timeline=False)
        tr = r.queue_trace()
        pq = patent_queues(p, v, m)
        for rank, kind, direction in ((p - 1, 1 - 1, "forward"), (0, 1, "backward")):
            ends = _micro_step_ends(r, rank, kind)
            want = pq[pq["direction"] == direction]["depth"].tolist()
            got = _depth_at(tr, rank, direction, ends)
            assert got == want, (p, v, m, direction)
        # no other rank ever caches, and nothing waits at a blocked send because of the queue
        assert set(tr["rank"]) <= {0, p - 1}
        assert r.metrics["makespan_s"] == pytest.approx((v * m + p - 1) * 2)
        n += 1
    assert n > 150


@pytest.mark.slow
def test_waiting_without_the_cache_appears_exactly_when_m_mod_p_is_not_zero():
    for p, v, m in _grid():
        s = interleaved_1f1b(p, v, m, grouping="paddle")
        cached = simulate(s, costs=UNIT, comm=LOCK, cache="sender", timeline=False)
        try:
            bare = simulate(s, costs=UNIT, comm=LOCK, cache=None, timeline=False)
        except ScheduleError as e:
            assert m % p != 0 and e.field == "deadlock", (p, v, m)
            assert "without a cache" in str(e)
            continue
        if m % p == 0:  # the queue passes every tensor straight through: the same run
            assert np.array_equal(bare.start_s, cached.start_s), (p, v, m)
            assert bare.metrics["peak_cache_depth"] == cached.metrics["peak_cache_depth"] == 0
        else:
            assert (bare.metrics["blocked_send_s"] > cached.metrics["blocked_send_s"]
                    or bare.metrics["makespan_s"] > cached.metrics["makespan_s"]), (p, v, m)


def test_lockstep_1f1b_hand_worked():
    """Plain 1F1B p = 2, m = 2, F = B = 1, an exchange after every action (Paddle's 1F1B).

    Rank 0: 0F0 [send 0F0] 0F1 [send 0F1, receive 1B0's gradient] 0B0 [receive 1B1's] 0B1.
    Rank 1: [receive 0F0] 1F0 1B0 [send 1B0's gradient, receive 0F1] 1F1 1B1 [send].
    Rank 0 posts its exchange after 0F1 at t = 2, rank 1 its matching one at t = 3: rank 0 waits
    for the gradient anyway, so no send holds it up; the makespan stays 6."""
    s = one_f_one_b(2, 2)
    r = simulate(s, costs=UNIT, comm=LOCK)
    assert r.start_s.tolist() == [0.0, 1.0, 3.0, 5.0, 1.0, 2.0, 3.0, 4.0]
    assert r.metrics["makespan_s"] == 6.0 and r.metrics["blocked_send_s"] == 0.0
    m = r.messages().set_index("item")
    assert m.loc["0F1", "blocked_send_s"] == 1.0  # posted at 2, received at 3


def test_interleaved_steady_steps_pair_forward_and_backward():
    """Interleaved p = 2, v = 1, m = 3 (warm-up 2 on rank 0): 0F0 | 0F1 | 0F2 0B0 | 0B1 | 0B2."""
    s = interleaved_1f1b(2, 1, 3)
    assert paddle_steps(s)[:6].tolist() == [0, 1, 2, 2, 3, 4]
    r = simulate(s, costs=UNIT, comm=LOCK)
    # rank 0 runs 0F2 and 0B0 back to back: 0B0's gradient came in the exchange before 0F2
    a = {str(x): i for i, x in enumerate(" ".join(s.to_text()).split())}
    assert r.start_s[a["0B0"]] == r.end_s[a["0F2"]]


def test_receiver_buffers_never_block_a_sender():
    s = interleaved_1f1b(4, 2, 11, grouping="paddle")
    r = simulate(s, costs={"F": 1.0, "B": 2.0}, comm=LOCK, cache="receiver", timeline=False)
    assert r.metrics["blocked_send_s"] == 0.0
    msgs = r.messages()
    assert (msgs["blocked_send_s"] == 0).all()


def test_other_schedules_run_with_the_sender_cache():
    from hetsched.pipeline import make_schedule

    for name in ("interleaved_1f1b", "zbv", "gpipe", "1f1b", "zb_h1", "looped_bfs", "dualpipev"):
        v = {"zbv": 2, "dualpipev": 2, "gpipe": 1, "1f1b": 1, "zb_h1": 1}.get(name, 2)
        s = make_schedule(name, 4, v, 9)
        r = simulate(s, costs=UNIT, comm=LOCK, cache="sender", timeline=False)
        assert r.metrics["makespan_s"] >= simulate(s, costs=UNIT, timeline=False).metrics["makespan_s"] - 1e-9


def test_action_overhead_and_message_setup_by_hand():
    s = one_f_one_b(2, 1)  # F0 -> F0 -> B0 -> B0: four actions and two messages in a chain
    base = simulate(s, costs=UNIT).metrics["makespan_s"]
    assert base == 4.0
    assert simulate(s, costs={**UNIT, "overhead_s": 0.5}).metrics["makespan_s"] == 4.0 + 4 * 0.5
    assert simulate(s, costs=UNIT, comm={"overhead_s": 0.25}).metrics["makespan_s"] == 4.0 + 2 * 0.25
    c = StageCosts(f_s=1.0, b_s=1.0, overhead_s=[0.5, 0.0])  # per stage
    assert simulate(s, costs=c).metrics["makespan_s"] == 4.0 + 2 * 0.5


def test_p2p_prices_through_the_cost_model():
    from hetsched.cost import RooflineCost
    from hetsched.system import Device, Link, System

    sys_ = System([Device("a", "gpu"), Device("b", "gpu")], [Link("a", "b", 5e9, 3e-6)])
    want = RooflineCost(sys_).transfer_s(2e6, "a", "b")
    link = P2P(latency_s=3e-6, bandwidth_Bps=5e9).link  # one Link, priced as every cost model prices a hop
    assert isinstance(link, Link) and link.time_s(2e6) == want == P2P(latency_s=3e-6, bandwidth_Bps=5e9).time_s(2e6)
    assert P2P(latency_s=3e-6, bandwidth_Bps=5e9).time_s([0.0, 2e6]).tolist() == [0.0, want]  # 0 bytes are free
    r = simulate(one_f_one_b(2, 1), costs={**UNIT, "activation_bytes": 2e6}, comm={"latency_s": 3e-6, "bandwidth_Bps": 5e9})
    assert r.metrics["makespan_s"] == pytest.approx(4.0 + 2 * want)
    with pytest.raises(ScheduleError, match="do not also give comm"):
        simulate(one_f_one_b(2, 1), costs=StageCosts(send_s=1.0, grad_send_s=1.0), comm={"latency_s": 1e-6})
