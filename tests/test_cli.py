"""The `hetsched` command: subcommands, outputs (HTML, trace, CSV), exit codes and sweeps from a spec."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from hetsched.cli import EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_OK, main

BIN = Path(sys.executable).with_name("hetsched")


def run(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_console_script_map_writes_report_trace_and_csv(tmp_path):
    r = run("map", "resnet_like", "--system", "toy", "--html", "r.html", "--trace", "t.json", "--csv", "m", cwd=tmp_path)
    assert r.returncode == EXIT_OK, r.stderr
    assert "makespan_s" in r.stdout and "device" in r.stdout
    html = (tmp_path / "r.html").read_text()
    assert "Gantt" in html and 'src="https://cdn' not in html  # self-contained, opens offline
    trace = json.loads((tmp_path / "t.json").read_text())
    assert any(e["ph"] == "X" for e in trace["traceEvents"])
    metrics = pd.read_csv(tmp_path / "m_metrics.csv")
    assert "total_latency_s" in set(metrics["metric"])
    assert (tmp_path / "m_timeline.csv").exists() and (tmp_path / "m_steps.csv").exists()


def test_exit_codes_bad_input_and_infeasible(capsys):
    assert main(["map", "no-such-graph", "--system", "toy", "--quiet"]) == EXIT_BAD_INPUT
    assert "no-such-graph" in capsys.readouterr().err
    assert main(["map", "chain", "--system", "no-such-system"]) == EXIT_BAD_INPUT
    # switching off every backend that runs GlobalAveragePool leaves an op nobody supports
    assert main(["partition", "resnet_like", "--system", "toy", "--disable", "gpu0,cpu0", "--quiet"]) == EXIT_INFEASIBLE
    err = capsys.readouterr().err
    assert "GlobalAveragePool" in err and "'gap'" in err
    assert main(["partition", "chain", "--system", "toy", "--disable", "tpu9"]) == EXIT_BAD_INPUT
    assert main(["pipeline", "--p", "4"]) == 2  # argparse: --m missing


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "chain", "--n", "6", "--system", "toy", "--methods", "compute_first,h2h,heft"],
        ["partition", "resnet_like", "--system", "toy", "--compare"],
        ["pipeline", "--p", "4", "--v", "2", "--m", "8", "--grouping", "paddle"],
        ["order", "randwire_ws", "--n", "12", "--method", "heuristic", "--compare"],
        ["executor", "executor_d2h_branch", "--compare"],
        ["zoo", "--list"],
    ],
)
def test_subcommands_run(argv, capsys):
    assert main(argv) == EXIT_OK
    out = capsys.readouterr().out
    assert len(out.splitlines()) >= 3


def test_pipeline_torch_csv_and_trace(tmp_path):
    csv = tmp_path / "s.csv"
    assert main(["pipeline", "--p", "2", "--v", "2", "--m", "4", "--torch-csv", str(csv), "--trace", str(tmp_path / "p.json"), "--quiet"]) == 0
    rows = csv.read_text().strip().splitlines()
    assert len(rows) == 2  # one row per rank
    assert json.loads((tmp_path / "p.json").read_text())["traceEvents"]


def test_sweep_from_spec_resumes_and_is_quiet_when_piped(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "task: pipeline\n"
        "fixed: {schedule: interleaved_1f1b}\n"
        "grid: {p: [2, 4], v: [2], m: [8], grouping: [balanced, paddle]}\n"
        f"cache: {tmp_path / 'cache.csv'}\n"
        f"output: {tmp_path / 'out.csv'}\n"
        "workers: 2\n"
    )
    r = run("sweep", str(spec))
    assert r.returncode == 0, r.stderr
    assert "sweep" not in r.stderr  # no progress bar when stderr is not a terminal
    df = pd.read_csv(tmp_path / "out.csv")
    assert len(df) == 4 and df["error"].isna().all()
    assert (df["makespan_s"] > 0).all()
    before = (tmp_path / "cache.csv").read_text()
    assert main(["sweep", str(spec), "--quiet"]) == 0  # everything cached: nothing recomputed
    assert (tmp_path / "cache.csv").read_text() == before


def test_sweep_spec_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: teleport\ngrid: {a: [1]}\n")
    assert main(["sweep", str(bad)]) == EXIT_BAD_INPUT
    bad.write_text("task: map\ngrid: {a: [1]}\nextra: 1\n")
    assert main(["sweep", str(bad)]) == EXIT_BAD_INPUT
    assert main(["sweep", str(tmp_path / "missing.yaml")]) == EXIT_BAD_INPUT


def test_python_dash_m():
    r = subprocess.run([sys.executable, "-m", "hetsched", "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("hetsched ")
