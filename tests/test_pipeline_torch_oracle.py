"""torch.distributed.pipelining as an oracle, through the committed golden file.

``scripts/gen_torch_golden.py`` builds torch 2.13's schedule classes with mock stages and dumps
each rank's compute order; these tests need no torch. Schedule1F1B is not used (its torch 2.13 IR
has the last rank one micro-batch off).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetsched.errors import ScheduleError
from hetsched.pipeline import interleaved_1f1b, looped_bfs, validate, zbv

GOLDEN = json.loads((Path(__file__).parent / "data" / "pipeline_torch_golden.json").read_text())
CASES = GOLDEN["cases"]


def _cases(name):
    return [c for c in CASES if c["schedule"] == name]


def test_golden_file_is_pinned_and_covers_a_grid():
    assert GOLDEN["torch_version"].startswith("2.13.0")
    inter = _cases("ScheduleInterleaved1F1B")
    assert len(inter) > 220
    assert {c["p"] for c in inter} == set(range(2, 7)) and {c["v"] for c in inter} == set(range(1, 5))
    assert min(c["m"] for c in inter) == 1  # m < p is in the grid


def test_torch_grouping_equals_torch_interleaved_1f1b_everywhere_torch_accepts():
    n = 0
    for c in _cases("ScheduleInterleaved1F1B"):
        ours = interleaved_1f1b(c["p"], c["v"], c["m"], grouping="torch")
        assert ours.to_text() == c["order"], (c["p"], c["v"], c["m"])
        n += 1
    assert n == len(_cases("ScheduleInterleaved1F1B"))


def test_torch_grouping_refuses_exactly_what_torch_refuses():
    refused = [r for r in GOLDEN["refused"] if r["schedule"] == "ScheduleInterleaved1F1B"]
    assert refused, "the grid should include m that torch refuses"
    for r in refused:
        with pytest.raises(ScheduleError, match="multiple of the number of rounds"):
            interleaved_1f1b(r["p"], r["v"], r["m"], grouping="torch")
        # and the patent's grouping handles the same m
        validate(interleaved_1f1b(r["p"], r["v"], r["m"], grouping="paddle"))


def test_paddle_grouping_equals_torch_when_m_divisible_or_small():
    n = 0
    for c in _cases("ScheduleInterleaved1F1B"):
        p, v, m = c["p"], c["v"], c["m"]
        s = interleaved_1f1b(p, v, m, grouping="paddle")
        if m % p == 0 or m < 2 * p:
            assert s.to_text() == c["order"], (p, v, m)
            n += 1
        elif v > 1:
            # torch's rounds are equal, the patent's first group is larger: with v > 1 the orders differ
            assert s.to_text() != c["order"], (p, v, m)
    assert n > 150


def test_looped_bfs_and_zbv_equal_torch():
    for c in _cases("ScheduleLoopedBFS"):
        assert looped_bfs(c["p"], c["v"], c["m"]).to_text() == c["order"], (c["p"], c["v"], c["m"])
    zc = _cases("ScheduleZBVZeroBubble")
    assert len(zc) > 50
    for c in zc:
        assert zbv(c["p"], c["m"]).to_text() == c["order"], (c["p"], c["m"])
