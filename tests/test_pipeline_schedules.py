"""Generators and grouping policies: shapes, documented errors and fallbacks, validity."""

from __future__ import annotations

import pytest

from hetsched.errors import ScheduleError
from hetsched.pipeline import (
    SCHEDULES,
    balanced_groups,
    gpipe,
    groups,
    interleaved_1f1b,
    interleaved_fthenb,
    looped_bfs,
    make_schedule,
    megatron_groups,
    one_f_one_b,
    paddle_groups,
    peak_in_flight,
    torch_groups,
    validate,
    zb_h1,
    zb_h2,
    zbv,
)


def test_groupings_by_hand():
    assert paddle_groups(4, 11) == [7, 4]  # r = 3: first group p + r
    assert paddle_groups(4, 16) == [4, 4, 4, 4]
    assert balanced_groups(4, 11) == [6, 5]
    assert balanced_groups(4, 19) == [5, 5, 5, 4]
    assert torch_groups(4, 10) == [5, 5]
    assert torch_groups(4, 3) == [3]
    assert megatron_groups(4, 11) == [6, 5]  # N = 4, 5 leave remainders 3, 1 < p
    assert megatron_groups(4, 16) == [4, 4, 4, 4]
    assert megatron_groups(4, 10, 10) == [10]
    for p, m in [(4, 3), (5, 1)]:  # m < p: one group of m, for every policy
        assert paddle_groups(p, m) == balanced_groups(p, m) == megatron_groups(p, m) == [m]


@pytest.mark.parametrize("p", range(2, 9))
def test_balanced_and_paddle_cover_every_m(p):
    for m in range(p, 6 * p):
        b, pd_ = balanced_groups(p, m), paddle_groups(p, m)
        assert sum(b) == sum(pd_) == m
        assert min(b) >= p and min(pd_) >= p
        assert max(b) - min(b) <= 1 and b == sorted(b, reverse=True)
        assert len(b) == m // p
        assert b[0] <= pd_[0]


def test_grouping_errors():
    with pytest.raises(ScheduleError, match="multiple of the number of rounds"):
        interleaved_1f1b(4, 2, 10 + 1, grouping="torch")
    with pytest.raises(ScheduleError, match="m % N = 2 < p = 4"):
        megatron_groups(4, 10, 4)
    with pytest.raises(ScheduleError, match=r"must lie in \[p=4, m=10\]"):
        megatron_groups(4, 10, 3)
    with pytest.raises(ScheduleError, match="unknown grouping"):
        interleaved_1f1b(4, 2, 8, grouping="zigzag")
    with pytest.raises(ScheduleError, match="sum to m"):
        groups(4, 8, [4, 3])
    with pytest.raises(ScheduleError, match="only applies"):
        interleaved_1f1b(4, 2, 8, grouping="paddle", group_size=4)
    with pytest.raises(ScheduleError, match="positive integer"):
        interleaved_1f1b(0, 2, 8)
    with pytest.raises(ScheduleError, match="unknown schedule"):
        make_schedule("pipedream", 2, 1, 2)


def test_custom_grouping_list_and_callable():
    a = interleaved_1f1b(3, 2, 9, grouping=[5, 4])
    b = interleaved_1f1b(3, 2, 9, grouping=lambda p, m: [5, 4])
    assert a == b and a.meta["groups"] == [5, 4]
    validate(a)


def test_interleaved_structure_by_hand():
    # p=2, v=2, m=4, torch grouping [2, 2]: rank 1 warm-up = 2*0 + 1*2 = 2 forwards
    s = interleaved_1f1b(2, 2, 4, grouping="torch")
    assert s.to_text()[1] == "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3"
    assert s.to_text()[0].split()[:6] == ["0F0", "0F1", "2F0", "2F1", "0F2", "2B0"]


def test_classics_by_hand():
    assert gpipe(2, 3).to_text() == ["0F0 0F1 0F2 0B0 0B1 0B2", "1F0 1F1 1F2 1B0 1B1 1B2"]
    assert one_f_one_b(3, 4).to_text()[0] == "0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3"
    assert one_f_one_b(3, 4).to_text()[2] == "2F0 2B0 2F1 2B1 2F2 2B2 2F3 2B3"
    assert interleaved_fthenb(3, 2, 4).to_text()[1] == "1F0 1F1 1F2 1F3 4F0 4F1 4F2 4F3 4B0 4B1 4B2 4B3 1B0 1B1 1B2 1B3"
    assert peak_in_flight(interleaved_fthenb(3, 2, 4)).tolist() == [8, 8, 8]


@pytest.mark.parametrize("name", sorted(SCHEDULES))
@pytest.mark.parametrize("p,m", [(2, 1), (2, 2), (3, 5), (4, 8), (4, 13)])
def test_every_generator_is_valid(name, p, m):
    v = 2
    try:
        s = make_schedule(name, p, v, m)
    except ScheduleError as exc:  # only the documented torch refusals may happen here
        torch_rule = name == "interleaved_zero_bubble" and m % max(1, m // p) != 0
        if not (torch_rule or (name == "dualpipev" and m < 2 * p)):
            pytest.fail(f"{name} refused p={p} m={m}: {exc}")
        assert "torch raises the same" in str(exc)
        return
    validate(s)
    assert s.m == m and s.p == p


def test_zero_bubble_memory_bounds():
    for p, m in [(3, 6), (4, 8), (5, 12)]:
        assert peak_in_flight(zb_h1(p, m)).max() == p  # 1F1B's worst rank
        assert peak_in_flight(zb_h2(p, m)).max() == 2 * p
        assert peak_in_flight(one_f_one_b(p, m)).max() == p


def test_looped_bfs_and_zbv_shapes():
    s = looped_bfs(2, 2, 3)
    assert s.to_text()[1] == "1F0 1F1 1F2 3F0 3F1 3F2 3B2 3B1 3B0 1B2 1B1 1B0"
    z = zbv(2, 3)
    assert z.v == 2 and sorted(set(z.stage[z.rank_slice(0)].tolist())) == [0, 3]


@pytest.mark.parametrize(
    "call,field",
    [
        (lambda: interleaved_1f1b(True, 2, 4), "p"),
        (lambda: make_schedule("gpipe", 2, 0, 4), "v"),
        (lambda: make_schedule("zb_h1", 2, -1, 4), "v"),
        (lambda: interleaved_1f1b(2, 2, 4, grouping=None), "grouping"),
        (lambda: interleaved_1f1b(2, 2, 4, grouping=["a", "b"]), "grouping"),
    ],
)
def test_bad_inputs_name_the_field(call, field):
    with pytest.raises(ScheduleError) as ei:
        call()
    assert ei.value.field == field


def test_fewer_microbatches_than_ranks_is_the_documented_single_group_fallback():
    """m < p: every grouping uses one group [m]; rank r with m <= 2 (p - 1 - r) runs FthenB."""
    from hetsched.pipeline import validate
    from hetsched.pipeline.ir import F

    for p in range(2, 7):
        for v in range(1, 4):
            for m in range(1, p):
                for g in ("balanced", "paddle", "megatron", "torch"):
                    s = interleaved_1f1b(p, v, m, grouping=g)
                    validate(s)
                    assert s.meta["groups"] == [m]
                    for r in range(p):
                        if m <= 2 * (p - 1 - r):
                            kinds = s.kind[s.rank_slice(r)].tolist()
                            assert kinds == [F] * (v * m) + [kinds[-1]] * (v * m), (p, v, m, g, r)


def test_size_guard_names_the_limit_before_allocating():
    import tracemalloc

    from hetsched.pipeline import MAX_ACTIONS

    tracemalloc.start()
    with pytest.raises(ScheduleError, match="above the limit") as ei:
        make_schedule("interleaved_1f1b", 100_000, 1, 100_000)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert ei.value.field == "size" and ei.value.details["actions"] == 2 * 10**10
    assert peak < 10 * 2**20  # refused from the numbers alone
    with pytest.raises(ScheduleError, match="above the limit"):
        zb_h1(MAX_ACTIONS // 3 + 1, 1)  # three actions per stage and micro-batch
    from hetsched.pipeline.schedules import check_pvm

    check_pvm(2, 1, MAX_ACTIONS // 4)  # exactly at the limit: accepted
    with pytest.raises(ScheduleError, match="above the limit"):
        check_pvm(2, 1, MAX_ACTIONS // 4 + 1)


def test_fixed_chunks_are_said_not_silently_ignored():
    import numpy as np

    from hetsched.pipeline import SCHEDULE_INFO, schedule_v

    for name, info in SCHEDULE_INFO.items():
        s = make_schedule(name, 4, None, 8)
        assert s.v == schedule_v(name) and "v_requested" not in s.meta, name
        assert bool(np.isin(s.kind, [2, 3]).any()) == info["split_backward"], name
        assert s.style == info["placement"], name
        if info["v"] is not None:
            other = 3 if info["v"] != 3 else 4
            t = make_schedule(name, 4, other, 8)
            assert t.v == info["v"] and t.meta["v_requested"] == other
        else:
            assert make_schedule(name, 4, 3, 12).v == 3
    with pytest.raises(ScheduleError, match="does not take grouping") as ei:
        make_schedule("1f1b", 4, 1, 8, grouping="paddle")
    assert ei.value.field == "grouping"


def test_the_patents_grouping_is_the_default():
    s = interleaved_1f1b(4, 2, 10)
    assert s.meta["groups"] == [6, 4] and s.name == "interleaved_1f1b[paddle]"
    from hetsched.pipeline import PARAMS, is_patent_schedule

    assert PARAMS["grouping"].default == "paddle" and is_patent_schedule(s)
