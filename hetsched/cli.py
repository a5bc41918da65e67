"""The ``hetsched`` command: every algorithm family from a terminal, with reports, traces and sweeps.

Exit codes: 0 ok, 2 bad input (the message names the field/op at fault), 3 infeasible (nothing
fits memory, an op no device supports), 130 interrupted. ``sweep`` exits 0 when every point ran,
3 when the only failed points are infeasible ones (an answer of the what-if, in the
``error_kind`` column), and 2 when any point failed for another reason.

A failure is one line on stderr (``hetsched: error: ...``), never a traceback; warnings are one
line each (``hetsched: warning: ...``). An unexpected exception (a bug) is reported the same way,
naming its type; ``hetsched --debug ...`` or ``HETSCHED_DEBUG=1`` shows its traceback.

A subcommand is a parser in :func:`build_parser` (shared options: ``_graph_args``,
``_system_arg``, ``_out_args``; numbers through the checked types ``_positive_int``...) and a
``_cmd_*`` function in :data:`COMMANDS` that returns an exit code and raises ``HetschedError``.

Examples
--------
>>> main(["pipeline", "--p", "2", "--v", "1", "--m", "4", "--schedule", "1f1b", "--quiet"])
0
>>> main(["map", "no-such-graph", "--system", "toy", "--quiet"])
2
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import math
import numbers
import os
import re
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import yaml

from . import __version__
from .errors import HetschedError, Infeasible, UnsupportedOpError

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERRUPTED = 0, 2, 3, 130
#: environment variable that makes every failure print its traceback (as ``--debug`` does)
DEBUG_ENV = "HETSCHED_DEBUG"


# ---------------------------------------------------------------------------- argument plumbing
class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``hetsched map: error: ...``) and exit code 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {_one_line(message)} (see {self.prog} --help)\n")


def _number_type(kind: type, test, what: str):
    """An argparse ``type=`` that accepts only finite numbers passing ``test`` (NaN/inf never pass)."""

    def convert(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not (math.isfinite(v) and test(v)):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return v

    convert.__name__ = what  # argparse names the type in some messages
    return convert


_positive_int = _number_type(int, lambda v: v > 0, "a positive integer")
_nonneg_int = _number_type(int, lambda v: v >= 0, "an integer >= 0")
_positive_float = _number_type(float, lambda v: v > 0, "a finite number > 0")
_nonneg_float = _number_type(float, lambda v: v >= 0, "a finite number >= 0")
_finite_float = _number_type(float, lambda v: True, "a finite number")
_port = _number_type(int, lambda v: 1 <= v <= 65535, "a port number in 1..65535")


def _graph_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", help="graph file (.json/.onnx/.pt2), bundled graph, zoo model or generator name")
    p.add_argument("--batch", type=_positive_int, default=1, help="batch size for zoo models (default 1)")
    p.add_argument("--training", action="store_true", help="zoo models: build the training graph")
    p.add_argument("--n", type=_positive_int, default=None, help="generators: number of ops (default 40); zoo randwire_ws: nodes")
    p.add_argument("--seed", type=_nonneg_int, default=None, help="generators and zoo randwire_ws: seed (default 0)")


def _system_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--system", default="cpu_gpu_fpga", help="system YAML path or bundled name, or 'toy' (default cpu_gpu_fpga)")


def _out_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--html", metavar="REPORT.html", help="write a self-contained HTML report (opens offline)")
    p.add_argument("--trace", metavar="TRACE.json", help="write a Chrome/Perfetto trace of the timeline")
    p.add_argument("--csv", metavar="PREFIX", help="write the result tables: PREFIX_metrics.csv, PREFIX_timeline.csv, "
                   "PREFIX_steps.csv and the command's own (placement, assignment, curve, ops, per_rank, compare)")
    p.add_argument("--quiet", action="store_true", help="no summary on stdout")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands map, compare, partition, pipeline, order, executor, sweep, zoo, calibrate,
    app, lab).

    >>> build_parser().parse_args(["order", "chain", "--method", "ilp"]).time_limit
    10.0
    """
    ap = _Parser(prog="hetsched", description="Scheduling deep-learning work on heterogeneous hardware.")
    ap.add_argument("--version", action="version", version=f"hetsched {__version__}")
    ap.add_argument("--debug", action="store_true", help=f"show the traceback of a failure (or set {DEBUG_ENV}=1)")
    ap.add_argument("--cost", metavar="FILE", default=None,
                    help="cost file (hetsched calibrate's, or a latency table .csv) every algorithm prices with")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("map", help="map ops to devices (the mapping patent: compute-first, locality, remap; or a baseline)")
    _graph_args(p), _system_arg(p), _out_args(p)
    p.add_argument("--method", default="h2h", help="h2h (default), compute_first, heft, cpop, peft, fastest_single_device, "
                   "search, ilp, brute_force (hetsched.mapping.METHODS)")
    p.add_argument("--objective", choices=["total_latency", "makespan"], default=None, help="h2h remap objective")
    p.add_argument("--direction", choices=["successor", "both"], default=None, help="h2h remap direction")
    p.add_argument("--occupancy-threshold", type=_finite_float, default=None, help="h2h locality: max device occupancy")
    p.add_argument("--policy", choices=["greedy", "knapsack"], default=None, help="h2h locality policy")
    p.add_argument("--time-limit", dest="time_limit_s", type=float, default=None, help="ilp: time limit in seconds (default 60)")

    p = sub.add_parser("compare", help="compare mapping methods on one graph and system")
    _graph_args(p), _system_arg(p), _out_args(p)
    p.add_argument("--methods", default="compute_first,h2h,heft,cpop,peft,fastest_single_device,search",
                   help="comma-separated mapping methods (also ilp, ilp_makespan, search_makespan, h2h_plus...)")

    p = sub.add_parser("partition", help="partition onto backends by support/priority (the partition patent) and pipeline them")
    _graph_args(p), _system_arg(p), _out_args(p)
    p.add_argument("--disable", default="", help="comma-separated backends to switch off")
    p.add_argument("--fallback", default=None, help="backend for ops no enabled backend supports")
    p.add_argument("--merge", choices=["adjacent", "global", "none"], default="adjacent")
    p.add_argument("--min-group-size", type=_positive_int, default=1)
    p.add_argument("--n-inputs", type=_positive_int, default=32)
    p.add_argument("--buffer-depth", type=_positive_int, default=2)
    p.add_argument("--compare", action="store_true", help="also compare the partitioning strategies")

    p = sub.add_parser("pipeline", help="generate, validate and simulate a pipeline schedule (the pipeline patent's and others)")
    _out_args(p)
    p.add_argument("--p", type=_positive_int, required=True, help="pipeline ranks")
    p.add_argument("--v", type=_positive_int, default=None, help="chunks (virtual stages) per rank (default: the schedule's own, 2 where free)")
    p.add_argument("--m", type=_positive_int, required=True, help="micro-batches")
    p.add_argument("--schedule", default="interleaved_1f1b", help="gpipe, 1f1b, looped_bfs, interleaved_1f1b, interleaved_fthenb, "
                                                                 "zb_h1, zb_h2, zbv, interleaved_zero_bubble, dualpipev")
    p.add_argument("--grouping", default=None, help="interleaved grouping: paddle (the patent's, default), balanced, megatron, torch")
    p.add_argument("--f-s", type=_positive_float, default=1.0, help="forward time of one rank's share of the model (s), split over its chunks")
    p.add_argument("--b-s", type=_positive_float, default=2.0, help="backward time of one rank's share of the model (s), split over its chunks")
    p.add_argument("--activation-bytes", type=_nonneg_float, default=0.0, help="activation bytes per chunk and micro-batch")
    p.add_argument("--torch-csv", metavar="OUT.csv", help="write the schedule as a torch.distributed.pipelining CSV")

    p = sub.add_parser("order", help="order ops to minimise peak memory (the memory-ordering patent and others)")
    _graph_args(p), _out_args(p)
    p.add_argument("--method", default="auto", help="patent (the patent's flow: ILP under the time limit, then BFS/DFS and fine-tuning), auto (warm-started ILP), "
                        "heuristic, exact, ilp, ilp-patent, ilp-cumulative, bfs, dfs, inductor_*, xla_*")
    p.add_argument("--time-limit", type=_positive_float, default=10.0, help="ILP/exact time limit in seconds")
    p.add_argument("--compare", action="store_true", help="also compare with the compiler baselines")

    p = sub.add_parser("executor", help="simulate sync/async dispatch with streams and host threads (the executor patent)")
    _graph_args(p), _out_args(p)
    p.add_argument("--streams", default="patent", help="single, patent, nimble")
    p.add_argument("--threads", default="patent", help="single, patent, inline_one")
    p.add_argument("--pool-size", type=_positive_int, default=4)
    p.add_argument("--costs", default="cuda", help="cost preset: cuda, eager, ideal")
    p.add_argument("--compare", action="store_true", help="also compare the policies")

    p = sub.add_parser("sweep", help="run a what-if sweep from a YAML spec")
    p.add_argument("spec", help="YAML: task, fixed, grid, and optional cache, output, workers")
    p.add_argument("-o", "--output", help="CSV of the results (default: the spec's output, else stdout)")
    p.add_argument("--workers", type=_positive_int, default=None, help="processes (default: the spec's, else CPU count)")
    p.add_argument("--cache", help="resumable cache (.csv or .parquet), overrides the spec's")
    p.add_argument("--html", metavar="REPORT.html", help="write a self-contained HTML report (table and a chart per metric)")
    p.add_argument("--quiet", action="store_true")

    p = sub.add_parser("calibrate", help="measure this machine with torch; write a system YAML and a cost file")
    p.add_argument("workloads", nargs="*", default=["resnet50:batch=1", "bert_base:batch=1,seq_len=64"],
                   help="zoo models with a torch twin, name[:option=value,...] (default: resnet50:batch=1 "
                        "bert_base:batch=1,seq_len=64)")
    p.add_argument("--system-out", default="calibrated_system.yaml", metavar="SYSTEM.yaml")
    p.add_argument("--cost-out", default="calibrated_cost.yaml", metavar="COST.yaml")
    p.add_argument("--name", default="local", help="name of the system written (default local)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--runs", type=_positive_int, default=None,
                   help="independent runs of the workloads and the sweep, per-op median (default 3)")
    p.add_argument("--stat", choices=["median", "min", "mean"], default="median")
    p.add_argument("--clock", choices=["wall", "cpu", "profiler"], default="wall")
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--sweep", choices=["full", "quick", "none"], default="full")
    p.add_argument("--holdout", nargs="*", default=None, metavar="MODEL",
                   help="models measured and predicted but not fitted, whose errors per op class become the cost "
                        "file's error range (default: mobilenet_v2:batch=1 gpt2_small:batch=1,seq_len=64,n_layers=2; "
                        "'none': no error range)")
    p.add_argument("--training", nargs="*", default=[], choices=["sgd", "adam"], metavar="OPTIMIZER",
                   help="also time training steps with these optimizers (sgd, adam)")
    p.add_argument("--quiet", action="store_true")

    p = sub.add_parser("zoo", help="list or build zoo models")
    p.add_argument("name", nargs="?", help="model name (omit with --list)")
    p.add_argument("--list", action="store_true", help="list the models")
    p.add_argument("--batch", type=_positive_int, default=1)
    p.add_argument("--training", action="store_true")
    p.add_argument("-o", "--output", metavar="OUT.json", help="save the graph as JSON")
    p.add_argument("--html", metavar="REPORT.html", help="write a self-contained HTML report (summary and graph)")
    p.add_argument("--quiet", action="store_true")

    from .launch import DEFAULT_POOL, class_guide

    p = sub.add_parser("app", help="serve the dashboard as a web app, for one user or a class (Voila; needs hetsched[lab])",
                       description="Serve the dashboard notebook with Voila, with warm kernels ready ahead of demand and "
                                   "the kernels of closed pages culled. Other Voila options (--Voila.ip=0.0.0.0, ...) are "
                                   "passed on.", epilog=class_guide())
    _server_args(p)
    p.add_argument("--pool", type=_nonneg_int, default=DEFAULT_POOL,
                   help=f"warm kernels kept ready for the next pages (default {DEFAULT_POOL}; a class of 30: 30)")
    p.add_argument("--max-students", type=_nonneg_int, default=None,
                   help="most pages served at once; past it a page says the class is full (default: what fits in "
                        "80%% of the memory available; 0: no limit)")
    p.add_argument("--cull-after", dest="cull_after_s", type=_nonneg_int, default=None, metavar="SECONDS",
                   help="an idle student's kernel is shut down after this long (default 300)")

    p = sub.add_parser("lab", help="JupyterLab on a copy of the tour notebooks (needs hetsched[lab])",
                       description="Copy the tour notebooks and the dashboard into FOLDER (created if missing; "
                                   "notebooks already there are kept) and open JupyterLab there on the tour. "
                                   "Other JupyterLab options are passed on.")
    p.add_argument("folder", nargs="?", default=".", help="where the copies go (default: the current folder)")
    p.add_argument("--overwrite", action="store_true", help="replace notebooks already in FOLDER by the shipped ones")
    _server_args(p)
    return ap


def _server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=_port, default=None, help="port to serve on (default: the server's, 8866/8888)")
    p.add_argument("--no-browser", dest="open_browser", action="store_false", help="do not open a browser")
    p.add_argument("--dry-run", action="store_true", help="print the server's command line instead of running it")


# ---------------------------------------------------------------------------- helpers
def _graph(a: argparse.Namespace):
    from .whatif import resolve_graph

    return resolve_graph(a.graph, a.n, a.seed, a.batch, a.training)


def _system(a: argparse.Namespace):
    from .whatif import resolve_system

    return resolve_system(a.system)


def _cost(a: argparse.Namespace, system):
    """``--cost FILE`` read once against the command's system (``None``: the roofline)."""
    from .cost import load_cost

    return load_cost(a.cost, system) if a.cost else None


#: seconds of work before a progress bar appears (fast commands never flash one)
PROGRESS_DELAY_S = 0.5


@contextlib.contextmanager
def _working(a: argparse.Namespace, desc: str, *, limit_s: float | None = None):
    """A tqdm bar on a terminal while one long computation runs (quiet when piped or ``--quiet``).

    The algorithms run in one call, so the bar counts elapsed seconds: against ``limit_s`` (an
    ILP/exact time limit) when there is one, else as a plain timer.
    """
    if getattr(a, "quiet", False) or not sys.stderr.isatty():
        yield
        return
    import threading

    from tqdm import tqdm

    fmt = ("{desc}: {bar}| {elapsed} of a {total:.0f} s limit" if limit_s else "{desc}: working, {elapsed} elapsed")
    bar = tqdm(total=limit_s, desc=desc, bar_format=fmt, delay=PROGRESS_DELAY_S, leave=False, file=sys.stderr)
    stop = threading.Event()

    def tick() -> None:
        t0 = time.monotonic()
        while not stop.wait(0.2):
            now = time.monotonic()
            bar.update(min(now - t0, max(0.0, (limit_s or float("inf")) - bar.n)))
            t0 = now
            bar.refresh()

    th = threading.Thread(target=tick, daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()
        bar.close()


def _metrics_frame(metrics: Any) -> pd.DataFrame:
    """The metrics as a table; a NaN or infinite metric is an error, never a result printed with exit 0."""
    bad = [k for k, v in metrics.items()
           if isinstance(v, numbers.Real) and not isinstance(v, numbers.Integral) and not math.isfinite(v)]
    if bad:
        raise HetschedError(f"metric(s) {bad} came out {metrics[bad[0]]}: these inputs give no finite answer (check "
                            "the graph's and the system's numbers; if they are sound, this is a bug)", field=bad[0])
    return pd.DataFrame({"metric": list(metrics), "value": [metrics[k] for k in metrics]})


def _print(a: argparse.Namespace, title: str, *frames: pd.DataFrame) -> None:
    if getattr(a, "quiet", False):
        return
    print(title)
    for f in frames:
        with pd.option_context("display.max_rows", 60, "display.width", 160, "display.float_format", "{:.6g}".format):
            print(f.to_string(index=False))
        print()


def _outputs(a: argparse.Namespace, title: str, result: Any, sections: list[tuple[str, Any]], tables: dict[str, pd.DataFrame]) -> None:
    from .timeline import to_chrome_trace

    tl = getattr(result, "timeline", None)
    if getattr(a, "trace", None):
        if tl is None or len(tl) == 0:
            raise HetschedError("this command has no timeline to trace", field="--trace")
        to_chrome_trace(tl, a.trace)
    if getattr(a, "csv", None):
        from .io.tables import to_csv_safe

        for name, df in tables.items():
            to_csv_safe(df, f"{a.csv}_{name}.csv")  # names (ops, devices) can never run as spreadsheet formulas
    if getattr(a, "html", None):
        from .report import write_report

        write_report(a.html, title, sections, meta={"command": "hetsched " + " ".join(a.argv)})


def _base_tables(result: Any) -> dict[str, pd.DataFrame]:
    tables = {"metrics": _metrics_frame(result.metrics)}
    if getattr(result, "timeline", None) is not None and len(result.timeline):
        tables["timeline"] = result.timeline
    if getattr(result, "steps", None):
        tables["steps"] = result.steps_frame()
    return tables


# ---------------------------------------------------------------------------- commands
_H2H_FLAGS = {"objective": "--objective", "direction": "--direction", "occupancy_threshold": "--occupancy-threshold",
              "policy": "--policy", "time_limit_s": "--time-limit"}


def _map_sections(g, s, r, label: str) -> list[tuple[str, Any]]:
    """Graph coloured by device, Gantt, and device memory against each device's capacity."""
    from . import plot
    from .timeline import memory_usage

    colors = plot.color_map(s.device_names)
    sections: list[tuple[str, Any]] = [
        (f"Graph, coloured by device ({label})", plot.graph_view(g, color_by=r.placement.device, colors=colors)),
        (f"Gantt ({label})", plot.gantt(r.timeline, color_by="device", colors=colors)),
    ]
    mem = memory_usage(r.timeline)
    if len(mem):
        used = list(dict.fromkeys(mem["device"].astype(str))) if "device" in mem else []
        caps = {d: s.device(d).memory_bytes for d in used if d in s.device_names}
        sections.append((f"Device memory ({label})", plot.memory_curve(mem, capacity=caps or None)))
    return sections


def _cmd_map(a: argparse.Namespace) -> int:
    from .whatif import run_mapping

    g, s = _graph(a), _system(a)
    opts = {k: getattr(a, k) for k in _H2H_FLAGS if getattr(a, k) is not None}
    try:
        with _working(a, f"map: {a.method}"):
            r = run_mapping(g, s, a.method, cost=_cost(a, s), **opts)
    except HetschedError as e:  # an option the method does not take (or rejects): name the flag
        flag = _H2H_FLAGS.get(getattr(e, "field", None) or "")
        if flag is None or flag.lstrip("-").replace("-", "_") not in opts:
            raise
        raise HetschedError(f"{flag}: {e}", field=flag) from None
    per_dev = pd.Series(r.placement.device).value_counts().rename_axis("device").reset_index(name="n_ops")
    _print(a, f"{a.method} on {g.name} ({g.n_ops} ops) / {s.name}", _metrics_frame(r.metrics), per_dev)
    if a.html:
        sections = [("Metrics", _metrics_frame(r.metrics)), ("Ops per device", per_dev), *_map_sections(g, s, r, a.method)]
        if r.steps:
            sections.append(("Decision log", r.steps_frame()))
    else:
        sections = []
    placement = pd.DataFrame({"op": list(r.placement.device), "device": list(r.placement.device.values())})
    _outputs(a, f"hetsched map: {a.method}", r, sections, {**_base_tables(r), "placement": placement})
    return EXIT_OK


def _cmd_compare(a: argparse.Namespace) -> int:
    from . import mapping, plot
    from .whatif import run_mapping

    if a.trace:  # checked before the work, not after it
        raise HetschedError("compare has no single timeline; use `hetsched map --trace`", field="--trace")
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    if not methods:
        raise HetschedError(f"--methods names no method; choose from {', '.join(mapping.METHODS)}", field="--methods")
    unknown = [m for m in methods if m not in mapping.METHODS]
    if unknown:
        raise HetschedError(f"unknown mapping method(s) {unknown}; choose from {', '.join(mapping.METHODS)}", field="--methods")
    g, s = _graph(a), _system(a)
    cost = _cost(a, s)
    with _working(a, f"compare: {len(methods)} methods"):
        df = mapping.compare(g, s, methods, cost=cost)
    _print(a, f"mapping methods on {g.name} ({g.n_ops} ops) / {s.name}", df)
    sections: list[tuple[str, Any]] = []
    if a.html:
        sections = [("Comparison", df)] + [(m, plot.compare(df, m)) for m in ("makespan_s", "total_latency_s", "energy_J") if m in df]
        best = str(df.loc[df["makespan_s"].astype(float).idxmin(), "label"]) if len(df) and "makespan_s" in df else None
        if best in mapping.METHODS:  # the winner's mapping, drawn like `hetsched map` draws it
            sections += _map_sections(g, s, run_mapping(g, s, best, cost=cost), f"best makespan: {best}")
    _outputs(a, "hetsched compare", None, sections, {"compare": df})
    return EXIT_OK


def _cmd_partition(a: argparse.Namespace) -> int:
    from . import partition, plot

    g, s = _graph(a), _system(a)
    off = {b.strip() for b in a.disable.split(",") if b.strip()}
    unknown = sorted(off - set(s.support.backends))
    if unknown:
        raise HetschedError(f"--disable names unknown backend(s) {unknown}; the system has {s.support.backends}", field="--disable", device=unknown[0])
    enabled = [b for b in s.support.backends if b not in off]
    cost = _cost(a, s)
    with _working(a, "partition"):
        p = partition.partition_by_support(g, s, enabled=enabled, fallback=a.fallback, merge=None if a.merge == "none" else a.merge,
                                           min_group_size=a.min_group_size)
        sim = partition.simulate_buffered(p, s, n_inputs=a.n_inputs, buffer_depth=a.buffer_depth, cost=cost)
    frames = [_metrics_frame(p.metrics), _metrics_frame(sim.metrics)]
    sections: list[tuple[str, Any]] = [
        ("Partition", _metrics_frame(p.metrics)),
        ("Graph, coloured by backend", plot.graph_view(g, color_by=p.assignment, colors=plot.color_map(s.device_names),
                                                       legend_title="backend")),
        ("Buffered pipeline", _metrics_frame(sim.metrics)),
        ("Gantt", plot.gantt(sim.timeline, color_by="kind")),
    ]
    tables = {**_base_tables(sim), "partition_metrics": _metrics_frame(p.metrics), "partition_steps": p.steps_frame(),
              "assignment": pd.DataFrame({"op": list(p.assignment), "backend": list(p.assignment.values())})}
    if a.compare:
        with _working(a, "partition: comparing strategies"):
            cmp = partition.compare_partitions(g, s, enabled=enabled, fallback=a.fallback, n_inputs=a.n_inputs,
                                               buffer_depth=a.buffer_depth, cost=cost)
        frame = getattr(cmp, "frame", cmp)
        frames.append(frame)
        sections.append(("Strategies", frame))
        sections += [(f"{m} by strategy", plot.compare(frame, m)) for m in ("makespan_s", "throughput_per_s") if m in frame]
        tables["compare"] = frame
    _print(a, f"partition of {g.name} ({g.n_ops} ops) on {', '.join(enabled)}", *frames)
    _outputs(a, "hetsched partition", sim, sections, tables)
    return EXIT_OK


def _cmd_pipeline(a: argparse.Namespace) -> int:
    from . import pipeline as pp
    from . import plot
    from .plot.pipeline import schedule_grid

    from .whatif import run_pipeline

    try:
        sch, r = run_pipeline(a.p, a.v, a.m, schedule=a.schedule, grouping=a.grouping, f_s=a.f_s, b_s=a.b_s,
                              activation_bytes=a.activation_bytes)
    except HetschedError as e:
        if e.field in ("grouping", "v"):
            raise HetschedError(f"--{e.field}: {e}", field=f"--{e.field}") from None
        raise
    per_rank = getattr(r, "per_rank", None)
    frames = [_metrics_frame(r.metrics)] + ([per_rank] if isinstance(per_rank, pd.DataFrame) else [])
    _print(a, f"{sch.name}: p={sch.p} v={sch.v} m={sch.m}", *frames)
    if a.torch_csv:
        pp.to_torch_csv(sch, a.torch_csv)
    sections: list[tuple[str, Any]] = [("Metrics", _metrics_frame(r.metrics)), ("Gantt", plot.gantt(r.timeline, color_by="kind")),
                                       ("Schedule", schedule_grid(sch))]
    tables = _base_tables(r)
    if isinstance(per_rank, pd.DataFrame):
        sections.append(("Per rank", per_rank))
        tables["per_rank"] = per_rank
        if a.activation_bytes > 0 and "peak_activation_bytes" in per_rank:
            sections.append(("Peak activation memory per rank",
                             plot.compare(per_rank.assign(rank=per_rank["rank"].astype(str)), "peak_activation_bytes", by="rank")))
    _outputs(a, f"hetsched pipeline: {sch.name}", r, sections, tables)
    return EXIT_OK


def _cmd_order(a: argparse.Namespace) -> int:
    from . import memory, plot

    g = _graph(a)
    from .memory import SOLVER_METHODS

    limited = a.method in SOLVER_METHODS
    with _working(a, f"order: {a.method}", limit_s=a.time_limit if limited else None):
        r = memory.optimize_order(g, method=a.method, time_limit_s=a.time_limit)
    frames = [_metrics_frame(r.metrics)]
    curves = [r.curve.assign(method=r.method)] if isinstance(r.curve, pd.DataFrame) else []
    tables = _base_tables(r)
    if curves:
        tables["curve"] = r.curve  # the order itself, step by step, with live bytes
    sections: list[tuple[str, Any]] = [("Result", _metrics_frame(r.metrics)), ("Why", getattr(r, "why", ""))]
    if a.compare:
        with _working(a, "order: compiler baselines"):
            df = memory.compare_orders(g)
        frames.append(df)
        tables["compare"] = df
        sections.append(("Compared with compiler orders", df))
        if "peak_bytes" in df:
            sections.append(("Peak memory by method", plot.compare(df, "peak_bytes")))
    if curves:
        sections.insert(1, ("Memory curve", plot.memory_curve(pd.concat(curves), lower_bound=r.lower_bound_bytes)))
        cur = curves[0]
        peak_op = [str(cur.loc[cur["bytes"].idxmax(), "op"])] if len(cur) and {"bytes", "op"} <= set(cur.columns) else []
        sections.insert(2, ("Graph (outlined: the op at the memory peak)", plot.graph_view(g, highlight=peak_op)))
    _print(a, f"order {g.name} ({g.n_ops} ops): {r.method}", *frames)
    _outputs(a, "hetsched order", r, sections, tables)
    return EXIT_OK


def _cmd_executor(a: argparse.Namespace) -> int:
    from . import executor, plot
    from .plot.executor import executor_gantt, ordering_bars, policy_bars

    g = _graph(a)
    cost = _cost(a, executor.executor_system(executor.PRESETS[a.costs])) if a.cost else None
    with _working(a, "executor"):
        r = executor.simulate(g, streams=a.streams, threads=a.threads, pool_size=a.pool_size, costs=a.costs, cost=cost)
    frames = [_metrics_frame(r.metrics)]
    sections: list[tuple[str, Any]] = [
        ("Metrics", _metrics_frame(r.metrics)),
        ("Graph, coloured by op kind", plot.graph_view(g, color_by=dict(r.kinds), legend_title="op kind")),
        ("Gantt: host threads over device streams", executor_gantt(r)),
        ("What orders each data edge", ordering_bars(r)),
    ]
    tables = {**_base_tables(r), "ops": pd.DataFrame({
        "op": list(r.kinds), "kind": list(r.kinds.values()), "stream": [r.streams.get(o) for o in r.kinds],
        "thread": [r.thread_of.get(o) for o in r.kinds], "start_s": [r.op_start_s.get(o) for o in r.kinds],
        "end_s": [r.op_end_s.get(o) for o in r.kinds]})}
    if a.compare:
        with _working(a, "executor: comparing policies"):
            cmp = executor.compare_policies(g, costs=a.costs, pool_size=a.pool_size, cost=cost)
        frames.append(cmp.frame)
        tables["compare"] = cmp.frame
        sections += [("Policies", cmp.frame), ("Makespan by policy", policy_bars(cmp))]
    _print(a, f"executor on {g.name} ({g.n_ops} ops): streams={a.streams} threads={a.threads}", *frames)
    if a.trace:
        executor.executor_trace(r, a.trace)
        a.trace = None
    _outputs(a, "hetsched executor", r, sections, tables)
    return EXIT_OK


def _load_spec(path: Path) -> dict:
    from .errors import FormatError
    from .io.files import read_text
    from .io.systems import YamlLoader  # reads 1e9 as a number, as a spec means it

    text = read_text(path, "sweep spec")
    try:
        spec = yaml.load(text, Loader=YamlLoader) or {}
    except yaml.YAMLError as e:
        raise FormatError(f"{path.name}: not valid YAML: {e}", field="spec") from None
    except (RecursionError, ValueError) as e:  # 3000-deep nesting; an integer beyond Python's digit limit
        raise FormatError(f"{path.name}: not readable YAML ({type(e).__name__})", field="spec") from None
    if not isinstance(spec, dict):
        raise FormatError(f"{path.name}: expected a mapping with task, grid, fixed", field="spec")
    return spec


def _cmd_sweep(a: argparse.Namespace) -> int:
    from . import plot
    from .errors import FormatError
    from .io.tables import to_csv_safe
    from .sweep import expand_grid, sweep
    from .whatif import TASKS

    path = Path(a.spec)
    spec = _load_spec(path)
    unknown = sorted(set(spec) - {"task", "grid", "fixed", "cache", "output", "workers"})
    if unknown:
        raise FormatError(f"{path.name}: unknown field(s) {unknown}; a spec has task, grid, fixed, cache, output, workers",
                          field=unknown[0])
    task = spec.get("task")
    if not isinstance(task, str) or task not in TASKS:
        raise FormatError(f"{path.name}: task must be one of {sorted(TASKS)}, got {task!r}", field="task")
    grid = spec.get("grid") or {}
    fixed = spec.get("fixed") or {}
    if not isinstance(grid, dict) or not grid:
        raise FormatError(f"{path.name}: grid must map parameter -> list of values", field="grid")
    if not isinstance(fixed, dict):
        raise FormatError(f"{path.name}: fixed must map parameter -> one value, got {fixed!r}", field="fixed")
    for k, v in [*grid.items(), *fixed.items()]:
        if not isinstance(k, str):
            raise FormatError(f"{path.name}: parameter names are strings, got {k!r}", field=str(k))
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise FormatError(f"{path.name}: grid value of {k!r} must be a non-empty list, got {v!r}", field=k)
    for k in ("cache", "output"):
        if spec.get(k) is not None and not isinstance(spec[k], str):
            raise FormatError(f"{path.name}: {k} must be a file path, got {spec[k]!r}", field=k)
    if a.cost:  # every point prices with the file: the task reads it against the point's system
        if "cost" not in inspect.signature(TASKS[task]).parameters:
            raise HetschedError(f"--cost applies to sweep tasks that price ops with a cost model "
                                f"({', '.join(t for t, f in TASKS.items() if 'cost' in inspect.signature(f).parameters)}), "
                                f"not {task!r}", field="--cost")
        fixed = {**fixed, "cost": str(Path(a.cost).resolve())}
    methods = [fixed["method"]] if "method" in fixed else list(grid.get("method") or ["h2h"])
    _check_task_params(path.name, task, [*fixed, *grid], methods=methods)
    points = [{**fixed, **p} for p in expand_grid(grid)]
    workers = a.workers if a.workers is not None else spec.get("workers")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise FormatError(f"workers must be a positive integer, got {workers!r}", field="workers")
    # sweep's own pool (fork-server workers: safe in a process that runs threads); 1 worker = in process
    executor = "serial" if workers == 1 else None
    out = a.output or spec.get("output")
    if out and not a.output:
        a.output = out
        _check_output_paths(a)  # the spec's output path, before the work
    with warnings.catch_warnings():  # failed points are summed up below, in one line
        warnings.filterwarnings("ignore", message=r".* sweep points failed", category=UserWarning)
        df = sweep(_SweepTask(task), points, executor=executor, max_workers=workers, cache=a.cache or spec.get("cache"),
                   progress=False if a.quiet else None)
    if out:
        to_csv_safe(df, out)
    if not a.quiet and not out:
        print(to_csv_safe(df), end="")
    elif not a.quiet:
        n_inf = int((df["error_kind"] == "infeasible").sum())
        print(f"{len(df)} points, {int(df['error'].notna().sum())} failed ({n_inf} infeasible) -> {out}")
    if a.html:
        from .report import write_report

        varying = [k for k in grid if len(grid[k]) > 1] or list(grid)
        label = df[varying].astype(str).agg(", ".join, axis=1) if varying else pd.Series(["all"] * len(df))
        framed = df.assign(point=label.to_numpy())
        params = set(fixed) | set(grid) | {"error", "error_kind", "runtime_s"}
        metrics = [c for c in df.columns if c not in params and pd.api.types.is_numeric_dtype(df[c])][:4]
        sections: list[tuple[str, Any]] = [("Spec", yaml.safe_dump(spec, sort_keys=False)), ("Results", df)]
        sections += [(f"{m} by grid point ({', '.join(varying)})", plot.compare(framed, m, by="point")) for m in metrics]
        write_report(a.html, f"hetsched sweep: {path.name}", sections, meta={"command": "hetsched " + " ".join(a.argv)})
    kinds = set(df["error_kind"].dropna())
    if not kinds:
        return EXIT_OK
    n_bad, n_inf = int(df["error"].notna().sum()), int((df["error_kind"] == "infeasible").sum())
    first = str(df.loc[df["error_kind"] != "infeasible", "error"].dropna().head(1).squeeze()) if kinds != {"infeasible"} else ""
    where = f" (see the error column of {out})" if out else " (see the error column)"
    print(f"hetsched: {'infeasible' if kinds == {'infeasible'} else 'error'}: {n_bad} of {len(df)} sweep points failed, "
          f"{n_inf} infeasible{where}" + (f"; first error: {_one_line(first, 300)}" if first else ""), file=sys.stderr)
    return EXIT_INFEASIBLE if kinds == {"infeasible"} else EXIT_BAD_INPUT


def _check_task_params(where: str, task: str, names: list[str], methods: list[str] = ()) -> None:
    """Every parameter a spec sets must be one the task takes (else every point would fail alike).

    A ``map`` task's extra options are those of the mapping method(s) the spec names.
    """
    from . import mapping
    from .errors import FormatError
    from .whatif import TASKS

    sig = inspect.signature(TASKS[task])
    known = [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    missing = [n for n, p in sig.parameters.items() if n in known and p.default is p.empty and n not in names]
    if missing:
        raise FormatError(f"{where}: task {task!r} needs parameter {missing[0]!r} in fixed or grid", field=missing[0])
    if any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values()):
        if task == "map":
            known += sorted({o for m in methods if m in mapping.METHODS for o in mapping.METHODS[m].options} - {"cost"})
        else:
            return  # open-ended options: the task itself names a bad one
    bad = [n for n in names if n not in known]
    if bad:
        raise FormatError(f"{where}: task {task!r} has no parameter {bad[0]!r}; it takes {known}", field=bad[0])


class _SweepTask:
    """A picklable call of a what-if task by name."""

    def __init__(self, task: str) -> None:
        self.task = task

    def __call__(self, **params: Any) -> dict:
        from .whatif import TASKS

        fn = TASKS[self.task]
        sig = inspect.signature(fn)
        pos = [n for n, p in sig.parameters.items() if p.kind == p.POSITIONAL_OR_KEYWORD]
        args = [params.pop(n) for n in pos if n in params]
        return fn(*args, **params)


def _cmd_zoo(a: argparse.Namespace) -> int:
    from .io import save_graph, zoo

    if a.list or not a.name:
        rows = [{"model": n} for n in zoo.ZOO]
        _print(a, "zoo models", pd.DataFrame(rows))
        return EXIT_OK
    if a.name not in zoo.ZOO:
        raise HetschedError(f"unknown zoo model {a.name!r}; choose from {', '.join(zoo.ZOO)}", field="name")
    with _working(a, f"zoo: building {a.name}"):
        g = zoo.ZOO[a.name](batch=a.batch, training=a.training)
        g.validate()  # a huge --batch must meet the byte limits, as a loaded graph does
    s = g.summary()
    _print(a, f"{a.name}", pd.DataFrame({"field": list(s)[:6], "value": [s[k] for k in list(s)[:6]]}))
    if a.output:
        save_graph(g, a.output)
    if a.html:
        from . import plot
        from .report import write_report

        summary = pd.DataFrame({"field": list(s), "value": [str(s[k]) for k in s]})
        write_report(a.html, f"hetsched zoo: {a.name}", [("Summary", summary), ("Graph", plot.graph_view(g))],
                     meta={"command": "hetsched " + " ".join(a.argv)})
    return EXIT_OK


def _cmd_calibrate(a: argparse.Namespace) -> int:
    from .calibrate import calibrate, parse_workload, warm_allocator

    warm_allocator()  # no page faults that one run pays and another does not (see its docstring)
    say = None if a.quiet else (lambda line: print(line, flush=True))
    runs = {} if a.runs is None else {"runs": a.runs}
    holdout = {} if a.holdout is None else {"holdout": [parse_workload(w) for w in a.holdout if w != "none"]}
    r = calibrate([parse_workload(w) for w in a.workloads], device=a.device, repeats=a.repeats, stat=a.stat, **runs,
                  **holdout, training=a.training,
                  clock=a.clock, threads=a.threads, sweep={"full": True, "quick": "quick", "none": False}[a.sweep],
                  system_name=a.name, system_path=a.system_out, cost_path=a.cost_out, progress=say)
    _print(a, f"calibrated {a.name}: {a.system_out}, {a.cost_out}", _metrics_frame(r.metrics))
    return EXIT_OK


#: commands whose algorithms price ops with a CostModel (what ``--cost`` reaches)
_PRICED = frozenset({"map", "compare", "partition", "executor", "sweep"})

def _cmd_app(a: argparse.Namespace) -> int:
    from .launch import app

    return app(port=a.port, open_browser=a.open_browser, extra=a.server_args, dry_run=a.dry_run, pool=a.pool,
               max_students=a.max_students, cull_after_s=a.cull_after_s)


def _cmd_lab(a: argparse.Namespace) -> int:
    from .launch import lab

    return lab(a.folder, port=a.port, open_browser=a.open_browser, overwrite=a.overwrite, extra=a.server_args,
               dry_run=a.dry_run)


#: commands that pass the options they do not know on to the server they start
_PASS_ON = {"app", "lab"}

COMMANDS = {
    "app": _cmd_app,
    "lab": _cmd_lab,
    "calibrate": _cmd_calibrate,
    "map": _cmd_map,
    "compare": _cmd_compare,
    "partition": _cmd_partition,
    "pipeline": _cmd_pipeline,
    "order": _cmd_order,
    "executor": _cmd_executor,
    "sweep": _cmd_sweep,
    "zoo": _cmd_zoo,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return the exit code (``python -m hetsched`` and the console script exit with it)."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    with _one_line_warnings():
        try:
            a, rest = parser.parse_known_args(argv)
            if rest and a.command not in _PASS_ON:
                parser.error(f"unrecognized arguments: {' '.join(rest)}")
            a.server_args = rest
        except SystemExit as e:  # argparse: 2 for usage errors, 0 for --help/--version
            return e.code if isinstance(e.code, int) else EXIT_BAD_INPUT
        a.argv = argv  # the report records the command that made it
        debug = a.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
        try:
            _check_output_paths(a)
            # each command reads the file once against its system and passes it as cost= (_cost)
            if a.cost and a.command not in _PRICED:
                raise HetschedError(f"--cost applies to {', '.join(sorted(_PRICED))}; `{a.command}` does not price "
                                    "ops with a cost model", field="--cost")
            return COMMANDS[a.command](a)
        except BrokenPipeError:  # `hetsched ... | head`: the reader left; not an error of ours
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_OK
        except KeyboardInterrupt:
            return _fail("interrupted", EXIT_INTERRUPTED, debug)
        except (Infeasible, UnsupportedOpError) as e:
            return _fail(f"infeasible: {e}", EXIT_INFEASIBLE, debug)
        except HetschedError as e:
            return _fail(f"error: {e}", EXIT_BAD_INPUT, debug)
        except (OSError, ValueError) as e:  # unreadable/unwritable paths and similar plain input errors
            return _fail(f"error: {type(e).__name__}: {e}", EXIT_BAD_INPUT, debug)
        except Exception as e:  # noqa: BLE001 - a bug: still one line, the traceback on request
            text = " ".join(str(e).split())
            text = text if len(text) <= 300 else text[:297] + "..."  # one line, not a printed array
            return _fail(f"internal error: {type(e).__name__}: {text} (a bug in hetsched; rerun with --debug or "
                         f"{DEBUG_ENV}=1 for the traceback)", EXIT_BAD_INPUT, debug)


def _fail(message: str, code: int, debug: bool) -> int:
    if debug:
        import traceback

        traceback.print_exc(file=sys.stderr)
    print(f"hetsched: {_one_line(message)}", file=sys.stderr)
    return code


def _one_line(text: str, limit: int = 2000) -> str:
    """A message on one line (YAML errors and others span several), cut at ``limit`` characters."""
    flat = re.sub(r"\s*\n\s*", " | ", str(text).strip())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


@contextlib.contextmanager
def _one_line_warnings():
    """Warnings print as ``hetsched: warning: ...``, one line each, not Python's two-line form."""

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"hetsched: warning: {_one_line(str(message))}", file=sys.stderr if file is None else file)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield


#: options that name a file the command writes: (attribute, flag)
_OUTPUT_FLAGS = (("html", "--html"), ("trace", "--trace"), ("torch_csv", "--torch-csv"), ("output", "--output"),
                 ("system_out", "--system-out"), ("cost_out", "--cost-out"))


def _check_output_paths(a: argparse.Namespace) -> None:
    """Every output path must be writable as a file: checked before the work, not after it."""
    paths = [(getattr(a, attr, None), flag) for attr, flag in _OUTPUT_FLAGS]
    if getattr(a, "csv", None):
        paths.append((f"{a.csv}_metrics.csv", "--csv"))
    for value, flag in paths:
        if not value:
            continue
        p = Path(value)
        if p.is_dir():
            raise HetschedError(f"{flag}: {value!r} is a directory; give a file name", field=flag)
        parent = p.parent if str(p.parent) else Path(".")
        if not parent.is_dir():
            raise HetschedError(f"{flag}: folder {str(parent)!r} of {value!r} does not exist", field=flag)
        if not os.access(parent, os.W_OK):
            raise HetschedError(f"{flag}: folder {str(parent)!r} is not writable", field=flag)


def entry() -> None:  # pragma: no cover - console script wrapper
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()
