"""Action IR, Schedule container, text round-trips, grid formatting and list->list passes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hetsched.errors import FormatError, ScheduleError
from hetsched.pipeline import (
    KINDS,
    Action,
    Schedule,
    format_grid,
    interleaved_1f1b,
    merge_backward,
    one_f_one_b,
    split_backward,
    validate,
    zbv,
)


@given(st.integers(0, 10_000), st.sampled_from(KINDS), st.integers(0, 10_000))
def test_action_text_round_trips(stage, kind, mb):
    a = Action(stage, kind, mb)
    assert Action.parse(str(a)) == a
    assert str(a) == f"{stage}{kind}{mb}"


@pytest.mark.parametrize("bad", ["", "F0", "2X0", "2F", "a2F0", "2 F 0 1", "-1F0"])
def test_action_parse_rejects_garbage(bad):
    with pytest.raises(FormatError, match="cannot parse pipeline action"):
        Action.parse(bad)


def test_schedule_text_round_trip_and_arrays():
    s = interleaved_1f1b(3, 2, 7, grouping="paddle")
    back = Schedule.from_text(s.to_text(), p=3, v=2, m=7, name=s.name)
    assert back == s
    assert s.n_actions == 2 * 3 * 2 * 7
    assert s.actions[0][0] == Action(0, "F", 0)
    assert s.rank.tolist() == sorted(s.rank.tolist())
    # inference of v and m from the actions
    inferred = Schedule.from_text(s.to_text())
    assert (inferred.p, inferred.v, inferred.m) == (3, 2, 7)


def test_schedule_equality_is_by_content():
    a = one_f_one_b(3, 4)
    b = one_f_one_b(3, 4).with_name("other")
    assert a == b
    assert a != one_f_one_b(3, 5)


def test_v_style_stage_map():
    s = zbv(3, 6)
    assert s.stage_to_rank.tolist() == [0, 1, 2, 2, 1, 0]
    assert s.style == "v"


def test_format_grid_marks_the_step():
    s = Schedule.from_text(["0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"])
    g = format_grid(s, around=2, radius=1, rank=1)
    lines = g.splitlines()
    assert lines[0].split() == ["rank", "0", "rank", "1"]
    assert [ln.split(":")[0] for ln in lines[1:]] == ["step 1", "step 2", "step 3"]
    assert "<-- HERE (rank 1)" in lines[2] and "0B0" in lines[2] and "1F1" in lines[2]


def test_split_and_merge_backward_are_inverse_and_valid():
    s = interleaved_1f1b(3, 2, 6)
    sp = split_backward(s)
    assert sp.n_actions == s.n_actions + s.n_stages * s.m
    validate(sp)
    assert set(np.unique(sp.kind).tolist()) == {0, 2, 3}
    assert merge_backward(sp).to_text() == s.to_text()
    deferred = split_backward(s, defer_w=True)
    validate(deferred)
    for r in range(3):
        k = deferred.kind[deferred.rank_slice(r)]
        w = np.flatnonzero(k == 3)
        assert w.min() > np.flatnonzero(k != 3).max()  # all W at the end of each rank


def test_from_arrays_checks_rank_count():
    with pytest.raises(ScheduleError, match="rank lists"):
        Schedule.from_arrays(3, 1, 1, "x", [(np.array([0]), np.array([0]), np.array([0]))])


# ---------------------------------------------------------------- phases and micro-steps
def test_1f1b_phases_are_megatrons_warmup_steady_cooldown():
    """1F1B (Narayanan et al. 2021): rank r runs p - 1 - r warm-up forwards, then one forward and
    one backward at a time, then p - 1 - r cool-down backwards; its k-th forward (backward) is
    micro-step k."""
    from hetsched.pipeline import KINDS, action_phases, one_f_one_b

    p, m = 4, 8
    s = one_f_one_b(p, m)
    phase, micro = action_phases(s)
    for r in range(p):
        sl = s.rank_slice(r)
        ph, kd, mi = phase[sl].tolist(), s.kind[sl], micro[sl]
        warm = p - 1 - r
        assert ph == ["warm-up"] * warm + ["steady"] * (2 * m - 2 * warm) + ["cool-down"] * warm
        assert all(KINDS[k] == "F" for k in kd[:warm]) and all(KINDS[k] == "B" for k in kd[len(kd) - warm:])
        assert mi[kd == 0].tolist() == list(range(m)) and mi[kd == 1].tolist() == list(range(m))


def test_gpipe_has_no_steady_phase():
    from hetsched.pipeline import action_phases, gpipe

    s = gpipe(3, 4)
    phase, _ = action_phases(s)
    assert set(phase[s.kind == 0]) == {"warm-up"} and set(phase[s.kind != 0]) == {"cool-down"}


def test_patent_schedule_warms_up_with_its_own_forward_count():
    """The patent's interleaved 1F1B: rank k runs 2 (p - 1 - k) + (v - 1)(p + r) warm-up forwards
    (capped at its m v forwards), then its steady one-forward-one-backward steps."""
    from hetsched.pipeline import action_phases, interleaved_1f1b, patent_parameters

    p, v, m = 4, 2, 10
    s = interleaved_1f1b(p, v, m, grouping="paddle")
    phase, _ = action_phases(s)
    warm = patent_parameters(p, v, m)["warmup"]
    for k in range(p):
        ph = phase[s.rank_slice(k)].tolist()
        assert ph.count("warm-up") == warm[k] and ph.index("steady") == warm[k]
        assert ph == sorted(ph, key=["warm-up", "steady", "cool-down"].index)  # one run of each phase, in order


def test_a_weight_gradient_has_the_micro_step_of_its_backward():
    from hetsched.pipeline import KINDS, action_phases, zb_h1

    s = zb_h1(4, 8)
    _, micro = action_phases(s)
    for r in range(4):
        sl = s.rank_slice(r)
        kd, mi = s.kind[sl], micro[sl]
        for j in np.flatnonzero(kd == KINDS.index("W")):
            prev = [i for i in range(j) if kd[i] in (KINDS.index("B"), KINDS.index("I"))]
            assert mi[j] == mi[prev[-1]]
