"""The patent's cache queues (seed 001): send interval, queue depth r, empty at the end."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetsched.errors import ScheduleError
from hetsched.pipeline import cache_trace, interleaved_1f1b, make_schedule, one_f_one_b, send_interval
from hetsched.pipeline.cache import unit_steps

COLUMNS = ["step", "rank", "direction", "queued", "sent", "depth"]


def test_send_interval_formula():
    assert send_interval(4, 2, 10) == (2, 8)  # r = 2, (p + r)(v - 1) = 6
    assert send_interval(4, 3, 8) == (0, 8)
    assert send_interval(3, 4, 11) == (2, 17)


@settings(max_examples=40)
@given(st.integers(2, 7), st.integers(2, 4), st.data())
def test_paddle_last_rank_forward_queue_is_the_patents(p, v, data):
    """Last rank: caches (p+r)(v-1) outputs, depth r, sends only at forward micro-steps in the interval."""
    m = data.draw(st.integers(p, 4 * p))
    r = m % p
    s = interleaved_1f1b(p, v, m, grouping="paddle")
    tr = cache_trace(s, design="sender")
    assert list(tr.columns[:6]) == COLUMNS
    last = tr[(tr["rank"] == p - 1) & (tr["direction"] == "forward")]
    assert int(last["depth"].max()) == r
    assert int(last["queued"].sum()) == int(last["sent"].sum()) == m * (v - 1)
    assert int(last["depth"].iloc[-1]) == 0
    # which outputs had to wait, and at which forward micro-step of the last rank they left
    step, dep = unit_steps(s)
    rank = s.rank
    y = np.flatnonzero(dep >= 0)
    x = dep[y]
    wrap = (rank[x] == p - 1) & (rank[y] == 0)
    x, y = x[wrap], y[wrap]
    waited = step[y] - 1 > step[x]
    assert int(waited.sum()) == ((p + r) * (v - 1) if r else 0)
    if r:
        assert set(s.microbatch[x[waited]].tolist()) == set(range(p + r))  # the first group only
        lsl = s.rank_slice(p - 1)
        fsteps = step[lsl][s.kind[lsl] == 0]
        k_send = np.searchsorted(fsteps, step[y[waited]] - 1, side="right") - 1
        lo, hi = send_interval(p, v, m)
        assert lo <= k_send.min() and k_send.max() < hi


@pytest.mark.parametrize("design", ["sender", "receiver"])
@pytest.mark.parametrize("name", ["interleaved_1f1b", "zbv", "zb_h2", "gpipe", "looped_bfs"])
def test_every_queue_ends_empty(design, name):
    s = make_schedule(name, 4, 2, 11)
    tr = cache_trace(s, design=design)
    assert (tr["depth"] >= 0).all()
    ends = tr.groupby(["rank", "direction"])["depth"].last()
    assert (ends == 0).all()
    assert tr["queued"].sum() == tr["sent"].sum()
    # depth is the running balance of queued and sent
    for _, g in tr.groupby(["rank", "direction"]):
        assert (g["queued"].cumsum() - g["sent"].cumsum()).tolist() == g["depth"].tolist()
        assert [len(i) for i in g["items"]] == g["depth"].tolist()


def test_receiver_design_holds_every_message_at_least_one_step():
    s = interleaved_1f1b(4, 2, 10, grouping="paddle")
    snd = cache_trace(s, design="sender")
    rcv = cache_trace(s, design="receiver")
    # same messages; a receiver buffer holds each one from arrival to use
    assert snd["queued"].sum() == rcv["queued"].sum()
    assert rcv["depth"].max() >= snd["depth"].max()
    first = rcv[(rcv["rank"] == 0) & (rcv["direction"] == "forward")]
    assert first["peer"].unique().tolist() == [3]


def test_balanced_needs_smaller_queue_than_paddle():
    p, v, m = 4, 2, 11  # r = 3: paddle first group 7, balanced [6, 5]
    d = {g: int(cache_trace(interleaved_1f1b(p, v, m, grouping=g)).query("rank == 3 and direction == 'forward'")["depth"].max()) for g in ("paddle", "balanced")}
    assert d == {"paddle": 3, "balanced": 2}


def test_bad_design():
    with pytest.raises(ScheduleError, match="design must be"):
        cache_trace(one_f_one_b(2, 2), design="both")


@pytest.mark.parametrize("p", range(2, 7))
def test_patent_queues_rule_matches_the_schedule(p):
    """The patent's literal rule (queue before the send interval, FIFO) hands the receiver its inputs in
    exactly the order the paddle schedule consumes them, holds at most r, and ends empty."""
    from hetsched.pipeline import patent_queues

    for v in (2, 3):
        for m in range(p, 4 * p + 1):
            r = m % p
            s = interleaved_1f1b(p, v, m, grouping="paddle")
            step, _ = unit_steps(s)
            pos = {a: i for i, a in enumerate(" ".join(s.to_text()).split())}
            q = patent_queues(p, v, m)
            for direction, kind in (("forward", "F"), ("backward", "B")):
                g = q[q["direction"] == direction]
                assert int(g["depth"].max()) == r and int(g["depth"].iloc[-1]) == 0
                first = g[g["micro_step"] < (p + r) * v]
                assert int(first["queued"].sum()) == (p + r) * (v - 1)
                lo, hi = send_interval(p, v, m)
                assert first.loc[first["sent"] == 1, "micro_step"].between(lo, hi - 1).all()
                # consumers of the sent items, in sending order, run in increasing step order (FIFO works)
                cons = []
                for item in g.loc[g["sent"] == 1, "item_out"]:
                    st_, mb = item.split(kind)
                    nxt = int(st_) + (1 if kind == "F" else -1)
                    cons.append(step[pos[f"{nxt}{kind}{mb}"]])
                assert cons == sorted(cons), (p, v, m, direction)
    with pytest.raises(ScheduleError, match="m >= p"):
        patent_queues(4, 2, 3)


def test_patent_parameters():
    from hetsched.pipeline import patent_parameters

    d = patent_parameters(4, 3, 11)  # r = 3
    assert d["r"] == 3 and d["first_group"] == 7 and d["groups"] == [7, 4] and d["first_group_steps"] == 21
    assert d["send_interval"] == (3, 3 + 7 * 2) and d["n_cached"] == 14
    s = interleaved_1f1b(4, 3, 11, grouping="paddle")
    # the warm-up counts are the forwards each rank runs before its steady (F, B) pairs
    for k, w in enumerate(d["warmup"]):
        kinds = s.kind[s.rank_slice(k)].tolist()
        assert kinds.index(1) == (w + 1 if w < 11 * 3 else w)  # warm-up, then one F before the first B
    assert patent_parameters(4, 2, 8)["n_cached"] == 0
    with pytest.raises(ScheduleError):
        patent_parameters(4, 2, 3)
