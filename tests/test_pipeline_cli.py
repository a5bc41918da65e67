"""The pipeline subcommand: size guard, chunks per rank said or refused, costs per rank (issues 18, 20)."""

from __future__ import annotations

import pytest

from hetsched.cli import main


def test_huge_pipeline_is_refused_by_name_not_killed(capsys):
    assert main(["pipeline", "--p", "100000", "--m", "100000", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "above the limit" in err and "MAX_ACTIONS" in err and len(err.strip().splitlines()) == 1


def test_v_is_refused_where_the_schedule_fixes_it_and_printed_as_run(capsys):
    assert main(["pipeline", "--p", "4", "--v", "2", "--m", "8", "--schedule", "1f1b"]) == 2
    assert "--v" in capsys.readouterr().err
    assert main(["pipeline", "--p", "4", "--m", "8", "--schedule", "zbv"]) == 0  # v: the schedule's own
    assert "p=4 v=2 m=8" in capsys.readouterr().out
    assert main(["pipeline", "--p", "4", "--m", "8", "--schedule", "dualpipev"]) == 0


def test_costs_mean_one_ranks_share_whatever_v():
    from hetsched.whatif import run_pipeline

    one = run_pipeline(4, 1, 8, schedule="interleaved_1f1b", f_s=1.0, b_s=2.0)[1]
    four = run_pipeline(4, 4, 8, schedule="interleaved_1f1b", f_s=1.0, b_s=2.0)[1]
    # the same model: every rank is busy m * (f + b) in both, the interleaved one has fewer bubbles
    assert one.per_rank["busy_s"].tolist() == pytest.approx([8 * 3.0] * 4)
    assert four.per_rank["busy_s"].tolist() == pytest.approx([8 * 3.0] * 4)
    assert four.metrics["makespan_s"] < one.metrics["makespan_s"]
