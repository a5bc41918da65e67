"""torch.distributed.pipelining as an oracle, through the committed golden file and CSV dumps.

``scripts/gen_torch_golden.py`` builds every torch 2.13 schedule class with mock stages over
p = 2..8, v = 1..4, m = 1..24 and dumps each rank's ``pipeline_order``; these tests need no torch.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from hetsched.errors import FormatError, ScheduleError
from hetsched.pipeline import (
    dualpipev,
    from_torch_csv,
    gpipe,
    interleaved_1f1b,
    interleaved_zero_bubble,
    looped_bfs,
    one_f_one_b,
    to_torch_csv,
    validate,
    zb_h1,
    zbv,
)

DATA = Path(__file__).parent / "data"
GOLDEN = json.loads(gzip.decompress((DATA / "pipeline_torch_golden.json.gz").read_bytes()))
CASES = GOLDEN["cases"]
_OVERLAP = re.compile(r"^\((.*)\)OVERLAP_F_B$")


def _cases(name):
    return [c for c in CASES if c["schedule"] == name]


def _refused(name):
    return [c for c in GOLDEN["refused"] if c["schedule"] == name]


def _compute(order):
    """torch's rank strings -> compute actions only (overlapped pairs flattened, REDUCE_GRAD dropped)."""
    out = []
    for row in order:
        acts = []
        for tok in row.split():
            mt = _OVERLAP.match(tok)
            if mt:
                acts += mt.group(1).split(";")
            elif "REDUCE_GRAD" not in tok:
                acts.append(tok)
        out.append(" ".join(acts))
    return out


def test_golden_file_is_pinned_and_covers_the_whole_grid():
    assert GOLDEN["torch_version"].startswith("2.13.0")
    assert GOLDEN["grid"] == {"p": [2, 8], "v": [1, 4], "m": [1, 24]}
    for name, vs in (("ScheduleInterleaved1F1B", range(1, 5)), ("ScheduleInterleavedZeroBubble", range(1, 5)), ("ScheduleLoopedBFS", range(1, 5)),
                     ("ScheduleZBVZeroBubble", [2]), ("ScheduleDualPipeV", [2]), ("ScheduleGPipe", [1]), ("Schedule1F1B", [1])):
        seen = {(c["p"], c["v"], c["m"]) for c in _cases(name)} | {(c["p"], c["v"], c["m"]) for c in _refused(name)}
        assert seen == {(p, v, m) for p in range(2, 9) for v in vs for m in range(1, 25)}, name


def test_torch_grouping_equals_torch_interleaved_1f1b_everywhere_torch_accepts():
    cases = _cases("ScheduleInterleaved1F1B")
    assert len(cases) > 400
    for c in cases:
        assert interleaved_1f1b(c["p"], c["v"], c["m"], grouping="torch").to_text() == c["order"], (c["p"], c["v"], c["m"])


def test_torch_grouping_refuses_exactly_what_torch_refuses():
    for name, make in (("ScheduleInterleaved1F1B", interleaved_1f1b), ("ScheduleInterleavedZeroBubble", interleaved_zero_bubble)):
        refused = _refused(name)
        assert refused
        for r in refused:
            with pytest.raises(ScheduleError, match="multiple of the number of rounds"):
                make(r["p"], r["v"], r["m"], grouping="torch")
    # and the patent's grouping handles the same m
    for r in _refused("ScheduleInterleaved1F1B")[:40]:
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
    assert n > 250


def test_interleaved_zero_bubble_equals_torch_everywhere_torch_accepts():
    cases = _cases("ScheduleInterleavedZeroBubble")
    assert len(cases) > 400
    for c in cases:
        s = interleaved_zero_bubble(c["p"], c["v"], c["m"])
        assert s.to_text() == c["order"], (c["p"], c["v"], c["m"])
        validate(s)
        if c["v"] == 1:  # one chunk: ZB1P is ZB-H1
            assert s.to_text() == zb_h1(c["p"], c["m"]).to_text()


def test_dualpipev_equals_torch_everywhere_torch_accepts():
    cases = _cases("ScheduleDualPipeV")
    assert len(cases) > 100
    for c in cases:
        s = dualpipev(c["p"], c["m"])
        assert s.to_text() == _compute(c["order"]), (c["p"], c["m"])
        validate(s)
        # the overlapped pairs sit where torch has them, and write back as torch's cells
        assert to_torch_csv(s).splitlines() == [",".join(row.split()) for row in c["order"]], (c["p"], c["m"])
    for r in _refused("ScheduleDualPipeV"):
        assert r["m"] < 2 * r["p"]
        with pytest.raises(ScheduleError, match="m >= 2p"):
            dualpipev(r["p"], r["m"])


def test_looped_bfs_and_zbv_equal_torch():
    for c in _cases("ScheduleLoopedBFS"):
        assert looped_bfs(c["p"], c["v"], c["m"]).to_text() == c["order"], (c["p"], c["v"], c["m"])
    zc = _cases("ScheduleZBVZeroBubble")
    assert len(zc) > 100
    for c in zc:
        assert zbv(c["p"], c["m"]).to_text() == c["order"], (c["p"], c["m"])


def test_gpipe_equals_torch_and_its_reduce_grad_follows_the_last_backward():
    for c in _cases("ScheduleGPipe"):
        p, m = c["p"], c["m"]
        assert gpipe(p, m).to_text() == _compute(c["order"]), (p, m)
        assert all(row.split()[-1] == f"{r}REDUCE_GRAD" for r, row in enumerate(c["order"]))


def test_1f1b_equals_torch_but_for_torchs_last_rank_numbering():
    """torch 2.13's Schedule1F1B IR numbers the last rank's forwards from 1 (a quirk of its IR only)."""
    for c in _cases("Schedule1F1B"):
        p, m = c["p"], c["m"]
        ours = one_f_one_b(p, m).to_text()
        theirs = _compute(c["order"])
        assert ours[:-1] == theirs[:-1], (p, m)
        shifted = " ".join(re.sub(r"F(\d+)$", lambda x: f"F{int(x.group(1)) + 1}", a) for a in ours[-1].split())
        assert shifted == theirs[-1], (p, m)
    assert all(r["m"] < r["p"] for r in _refused("Schedule1F1B"))


def test_reads_torch_csv_dumps_fully():
    g = from_torch_csv(DATA / "torch_dump_gpipe_p3_m4.csv")
    assert g == gpipe(3, 4) and [x[-1] for x in g.meta["torch_actions"]] == [(8, "0REDUCE_GRAD"), (8, "1REDUCE_GRAD"), (8, "2REDUCE_GRAD")]
    comms = from_torch_csv(DATA / "torch_dump_interleaved_p2_v2_m4_comms.csv")
    assert comms == interleaved_1f1b(2, 2, 4, grouping="torch")
    kinds = {re.sub(r"^\d+|\d+$", "", c) for row in comms.meta["torch_actions"] for _, c in row}
    assert kinds == {"UNSHARD", "RESHARD", "SEND_F", "RECV_F", "SEND_B", "RECV_B", "REDUCE_GRAD"}
    dp = from_torch_csv(DATA / "torch_dump_dualpipev_p3_m7.csv")
    assert dp.style == "v" and dp == dualpipev(3, 7) and dp.meta["overlap"] == dualpipev(3, 7).meta["overlap"]
    # torch's 1F1B IR quirk shows up as what it is: the last rank never runs micro-batch 0's forward
    one = from_torch_csv(DATA / "torch_dump_1f1b_p3_m5.csv")
    assert one.m == 6 and "2F0" not in one.to_text()[2].split() and "2F5" in one.to_text()[2].split()
    with pytest.raises(ScheduleError, match="missing"):
        validate(one)


def test_torch_csv_cells_that_contradict_the_compute_order_are_named():
    with pytest.raises(FormatError, match="1SEND_F0.*sent before 1F0"):
        from_torch_csv("0F0,0SEND_F0,0B0\n1SEND_F0,1F0,1B0\n")
    with pytest.raises(FormatError, match="reduced before its last backward"):
        from_torch_csv("0F0,0REDUCE_GRAD,0B0\n1F0,1B0\n")
    with pytest.raises(FormatError, match="rank 1, column 2: cannot read torch action 'XYZ'"):
        from_torch_csv("0F0,0B0\n1F0,1B0,XYZ\n")
    with pytest.raises(FormatError, match="does not run on rank 0"):
        from_torch_csv("0F0,1RECV_F0,0B0\n1F0,1B0\n")
