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


def test_map_h2h_options_are_used_or_rejected(monkeypatch, capsys):
    import hetsched.mapping as mapping

    seen = []
    real = mapping.h2h

    def spy(g, s, **kw):
        seen.append(kw)
        return real(g, s, **kw)

    monkeypatch.setattr(mapping.METHODS["h2h"], "fn", spy)  # what `map --method h2h` runs
    assert main(["map", "chain", "--n", "6", "--system", "toy", "--objective", "makespan", "--direction", "both",
                 "--policy", "knapsack", "--occupancy-threshold", "0.5", "--quiet"]) == EXIT_OK
    assert seen and {k: seen[-1][k] for k in ("objective", "direction", "policy", "occupancy_threshold")} == \
        {"objective": "makespan", "direction": "both", "policy": "knapsack", "occupancy_threshold": 0.5}
    from hetsched.whatif import map_point

    map_point("chain", "toy", n=6, objective="makespan")
    assert seen[-1]["objective"] == "makespan"  # sweeps pass h2h options through too
    # an option the method cannot use is an error naming the flag, not silently dropped
    assert main(["map", "chain", "--n", "6", "--system", "toy", "--method", "heft", "--policy", "greedy"]) == EXIT_BAD_INPUT
    assert "--policy" in capsys.readouterr().err


def test_compare_flag_errors_come_before_the_work(capsys):
    assert main(["compare", "chain", "--system", "toy", "--methods", " , "]) == EXIT_BAD_INPUT
    assert "--methods" in capsys.readouterr().err
    assert main(["compare", "chain", "--system", "toy", "--trace", "t.json"]) == EXIT_BAD_INPUT
    assert "--trace" in capsys.readouterr().err


def _headings(path) -> tuple[list[str], int]:
    import re

    html = Path(path).read_text()
    assert 'src="https://cdn' not in html
    return re.findall(r"<h2>(.*?)</h2>", html), html.count("Plotly.newPlot")


@pytest.mark.parametrize(
    "argv, must",
    [
        (["map", "resnet_like", "--system", "toy"], ["Graph", "Gantt", "Device memory"]),
        (["compare", "chain", "--n", "6", "--system", "toy", "--methods", "compute_first,heft"],
         ["makespan_s", "Graph", "Gantt"]),
        (["partition", "resnet_like", "--system", "toy", "--compare"], ["Graph", "Gantt", "makespan_s by strategy"]),
        (["pipeline", "--p", "2", "--v", "2", "--m", "4", "--activation-bytes", "1e6"],
         ["Gantt", "Schedule", "Peak activation memory"]),
        (["order", "randwire_ws", "--n", "12", "--method", "heuristic", "--compare"],
         ["Memory curve", "Graph", "Peak memory by method"]),
        (["executor", "executor_d2h_branch", "--compare"], ["Graph", "Gantt", "Makespan by policy"]),
        (["zoo", "mobilenet_v2"], ["Graph"]),
    ],
)
def test_every_subcommand_report_has_its_charts(tmp_path, argv, must):
    out = tmp_path / "r.html"
    assert main([*argv, "--html", str(out), "--quiet"]) == EXIT_OK
    heads, n_figs = _headings(out)
    for m in must:
        assert any(h.startswith(m) for h in heads), (m, heads)
    assert n_figs >= len(must)
    assert " ".join(argv) in out.read_text()  # the report records the command that made it


def _spec(tmp_path, text: str) -> str:
    p = tmp_path / "spec.yaml"
    p.write_text(text)
    return str(p)


def test_sweep_spec_reads_1e9_as_a_number_and_writes_a_report(tmp_path):
    spec = _spec(tmp_path, "task: map\nfixed: {graph: chain, system: toy, n: 4, method: compute_first}\n"
                           "grid: {host_link_Bps: [1e9, 16e9]}\nworkers: 1\n")
    out, html = tmp_path / "o.csv", tmp_path / "s.html"
    assert main(["sweep", spec, "-o", str(out), "--html", str(html), "--quiet"]) == EXIT_OK
    df = pd.read_csv(out)
    assert df["error"].isna().all() and df["host_link_Bps"].tolist() == [1e9, 16e9]
    slow, fast = df["makespan_s"]
    assert slow > fast
    heads, n_figs = _headings(html)
    assert "Results" in heads and n_figs >= 1


@pytest.mark.parametrize(
    "text, field",
    [
        ("task: pipeline\nfixed: [1, 2]\ngrid: {p: [2]}\n", "fixed"),
        ("task: pipeline\nfixed: {v: 1, m: 4}\ngrid: {p: [2], pp: [3]}\n", "pp"),
        ("task: pipeline\nfixed: {v: 1, m: 4}\ngrid: {p: [2]}\nworkers: two\n", "workers"),
        ("task: pipeline\nfixed: {v: 1, m: 4}\ngrid: {p: [2]}\nworkers: 0\n", "workers"),
        ("task: pipeline\nfixed: {v: 1, m: 4}\ngrid: {p: 2}\n", "'p'"),
        ("task: map\nfixed: {graph: chain, system: toy}\ngrid: {objectiv: [makespan]}\n", "objectiv"),
    ],
)
def test_sweep_spec_bad_fields_are_named(tmp_path, capsys, text, field):
    assert main(["sweep", _spec(tmp_path, text), "--quiet"]) == EXIT_BAD_INPUT
    assert field in capsys.readouterr().err


class _FakeTTY:
    def __init__(self) -> None:
        import io

        self.buf = io.StringIO()

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> int:
        return self.buf.write(s)

    def flush(self) -> None:
        pass


def test_long_single_commands_show_progress_on_a_terminal_only(monkeypatch, capsys):
    import hetsched.cli as cli

    monkeypatch.setattr(cli, "PROGRESS_DELAY_S", 0.0)
    tty = _FakeTTY()
    monkeypatch.setattr(sys, "stderr", tty)
    assert main(["order", "randwire_ws", "--n", "12", "--method", "exact", "--time-limit", "5"]) == EXIT_OK
    assert "order: exact" in tty.buf.getvalue() and "limit" in tty.buf.getvalue()
    monkeypatch.undo()
    assert main(["order", "randwire_ws", "--n", "12", "--method", "heuristic"]) == EXIT_OK
    assert "order: heuristic" not in capsys.readouterr().err  # piped: quiet


@pytest.mark.skipif(not Path("/usr/bin/script").exists(), reason="needs util-linux `script` for a pseudo-terminal")
def test_sweep_shows_a_progress_bar_on_a_real_terminal(tmp_path):
    spec = _spec(tmp_path, "task: pipeline\nfixed: {v: 1, m: 4}\ngrid: {p: [2, 3, 4]}\nworkers: 1\n")
    cmd = f"stty cols 120 rows 40; {BIN} sweep {spec} -o {tmp_path / 'o.csv'}"
    r = subprocess.run(["/usr/bin/script", "-qec", cmd, "/dev/null"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout
    assert "sweep: 100%" in r.stdout and "3/3" in r.stdout


def test_graph_flags_are_used_or_rejected_never_ignored(capsys):
    from hetsched.whatif import resolve_graph

    assert resolve_graph("randwire_ws", 8).n_ops < resolve_graph("randwire_ws").n_ops  # zoo model: --n = nodes
    assert main(["map", "resnet_like", "--seed", "8", "--system", "toy", "--quiet"]) == EXIT_BAD_INPUT
    assert "seed does not apply" in capsys.readouterr().err  # a fixed-wiring generator has no seed
    assert main(["order", "chain", "--training", "--quiet"]) == EXIT_BAD_INPUT
    assert "training" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["topcuoglu", "chain", "layered", "fork_join", "transformer_block", "resnet_like"])
def test_cli_builds_the_generated_graph_the_graph_panel_builds(name):
    """One sizing table (hetsched.io.generators.SIZINGS): `--n N --seed S` on the command line is the
    Graph panel's size N and seed S (``randwire_ws`` is the zoo model on the command line: ``--n`` nodes)."""
    from hetsched.cli import _graph, build_parser
    from hetsched.io.generators import SIZINGS
    from hetsched.widgets import GraphPanel

    p = GraphPanel()
    p.state.source = "generator"
    for n, seed in ((45, 0), (61, 3)):
        with p.hold():
            p.state.generator, p.state.n, p.state.seed = name, n, seed
        flags = ["--n", str(n)] + (["--seed", str(seed)] if SIZINGS[name].seed else [])
        g = _graph(build_parser().parse_args(["map", name, *flags]))
        panel = p.result
        assert panel.name == g.name and dict(panel.ops) == dict(g.ops) and dict(panel.tensors) == dict(g.tensors)
        assert abs(g.n_ops - n) <= max(6, n // 4), (name, n, g.n_ops)  # n is about the number of ops


def test_resolved_graphs_are_private_copies_and_files_are_reread(tmp_path):
    from hetsched.io import save_graph
    from hetsched.io.generators import chain
    from hetsched.whatif import resolve_graph

    g = resolve_graph("chain", 4)
    g.add_op("intruder", "Relu")
    assert "intruder" not in resolve_graph("chain", 4)  # a caller's change never leaks to the next
    path = tmp_path / "g.json"
    save_graph(chain(3), path)
    assert resolve_graph(str(path)).n_ops == 3
    save_graph(chain(5), path)
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    assert resolve_graph(str(path)).n_ops == 5  # an edited file is read again


@pytest.mark.parametrize(
    "argv, table, column",
    [
        (["map", "chain", "--n", "5", "--system", "toy"], "placement", "device"),
        (["partition", "chain", "--n", "5", "--system", "toy"], "assignment", "backend"),
        (["order", "chain", "--n", "5", "--method", "heuristic"], "curve", "bytes"),
        (["executor", "chain", "--n", "5"], "ops", "stream"),
    ],
)
def test_csv_writes_the_per_op_result_not_only_metrics(tmp_path, argv, table, column):
    prefix = tmp_path / "x"
    assert main([*argv, "--csv", str(prefix), "--quiet"]) == EXIT_OK
    df = pd.read_csv(f"{prefix}_{table}.csv")
    assert len(df) == 5 and column in df.columns


def test_pipeline_grouping_for_a_schedule_without_groups_is_an_error(capsys):
    assert main(["pipeline", "--p", "2", "--m", "4", "--schedule", "1f1b", "--grouping", "paddle"]) == EXIT_BAD_INPUT
    assert "--grouping" in capsys.readouterr().err
    assert main(["pipeline", "--p", "2", "--v", "2", "--m", "4", "--grouping", "paddle", "--quiet"]) == EXIT_OK


def test_sweep_exit_code_separates_infeasible_points_from_errors(tmp_path, capsys):
    # disabling every backend leaves ops no device supports: an answer ("infeasible"), exit 3
    spec = _spec(tmp_path, "task: partition\nfixed: {graph: chain, system: toy, n: 4, n_inputs: 2}\n"
                           "grid: {disable: [[], [cpu0, gpu0, fpga0]]}\nworkers: 1\n")
    out = tmp_path / "o.csv"
    assert main(["sweep", spec, "-o", str(out)]) == EXIT_INFEASIBLE
    df = pd.read_csv(out)
    assert df["error_kind"].isna().tolist() == [True, False] and df["error_kind"].iloc[1] == "infeasible"
    assert "1 infeasible" in capsys.readouterr().out
    # a point that fails for another reason (a negative size) still makes the sweep exit 2
    spec = _spec(tmp_path, "task: partition\nfixed: {graph: chain, system: toy, n_inputs: 2}\n"
                           "grid: {n: [4, -1]}\nworkers: 1\n")
    assert main(["sweep", spec, "-o", str(out), "--quiet"]) == EXIT_BAD_INPUT
    df = pd.read_csv(out)
    assert df["error_kind"].tolist()[1] == "error" and df["error"].isna().tolist() == [True, False]


def test_map_options_follow_the_method(tmp_path, capsys):
    # every h2h variant takes h2h's flags, HEFT its own; a flag a method does not take is named
    assert main(["map", "chain", "--n", "4", "--system", "toy", "--method", "h2h_plus", "--objective", "makespan",
                 "--quiet"]) == EXIT_OK
    assert main(["map", "chain", "--n", "4", "--system", "toy", "--method", "heft", "--occupancy-threshold", "0.5",
                 "--quiet"]) == EXIT_OK
    assert main(["map", "chain", "--n", "4", "--system", "toy", "--method", "heft", "--objective", "makespan"]) == EXIT_BAD_INPUT
    assert "--objective" in capsys.readouterr().err
    # a sweep spec may set the options of the method it names
    spec = _spec(tmp_path, "task: map\nfixed: {graph: chain, system: toy, n: 4, method: heft, locality: false}\n"
                           "grid: {host_link_Bps: [1e9]}\nworkers: 1\n")
    assert main(["sweep", spec, "--quiet", "-o", str(tmp_path / "o.csv")]) == EXIT_OK
