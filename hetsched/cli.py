"""The ``hetsched`` command: every algorithm family from a terminal, with reports, traces and sweeps.

Exit codes: 0 ok, 2 bad input (the message names the field/op at fault), 3 infeasible (nothing
fits memory, an op no device supports). ``sweep`` exits 0 when every point ran, 3 when the only
failed points are infeasible ones (an answer of the what-if, in the ``error_kind`` column), and 2
when any point failed for another reason.

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
import re
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import pandas as pd
import yaml

from . import __version__
from .errors import HetschedError, Infeasible, UnsupportedOpError

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE = 0, 2, 3


# ---------------------------------------------------------------------------- argument plumbing
def _graph_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", help="graph file (.json/.onnx), bundled graph, zoo model or generator name")
    p.add_argument("--batch", type=int, default=1, help="batch size for zoo models (default 1)")
    p.add_argument("--training", action="store_true", help="zoo models: build the training graph")
    p.add_argument("--n", type=int, default=None, help="generators: number of ops (default 40); zoo randwire_ws: nodes")
    p.add_argument("--seed", type=int, default=None, help="generators and zoo randwire_ws: seed (default 0)")


def _system_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--system", default="cpu_gpu_fpga", help="system YAML path or bundled name, or 'toy' (default cpu_gpu_fpga)")


def _out_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--html", metavar="REPORT.html", help="write a self-contained HTML report (opens offline)")
    p.add_argument("--trace", metavar="TRACE.json", help="write a Chrome/Perfetto trace of the timeline")
    p.add_argument("--csv", metavar="PREFIX", help="write the result tables: PREFIX_metrics.csv, PREFIX_timeline.csv, "
                   "PREFIX_steps.csv and the command's own (placement, assignment, curve, ops, per_rank, compare)")
    p.add_argument("--quiet", action="store_true", help="no summary on stdout")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands map, compare, partition, pipeline, order, executor, sweep, zoo).

    >>> build_parser().parse_args(["order", "chain", "--method", "ilp"]).time_limit
    10.0
    """
    ap = argparse.ArgumentParser(prog="hetsched", description="Scheduling deep-learning work on heterogeneous hardware.")
    ap.add_argument("--version", action="version", version=f"hetsched {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("map", help="map ops to devices (seed 000: compute-first, locality, remap; or a baseline)")
    _graph_args(p), _system_arg(p), _out_args(p)
    p.add_argument("--method", default="h2h", help="h2h (default), compute_first, heft, cpop, peft, fastest_single_device, "
                   "search, ilp, brute_force (hetsched.mapping.METHODS)")
    p.add_argument("--objective", choices=["total_latency", "makespan"], default=None, help="h2h remap objective")
    p.add_argument("--direction", choices=["successor", "both"], default=None, help="h2h remap direction")
    p.add_argument("--occupancy-threshold", type=float, default=None, help="h2h locality: max device occupancy")
    p.add_argument("--policy", choices=["greedy", "knapsack"], default=None, help="h2h locality policy")
    p.add_argument("--time-limit", dest="time_limit_s", type=float, default=None, help="ilp: time limit in seconds (default 60)")

    p = sub.add_parser("compare", help="compare mapping methods on one graph and system")
    _graph_args(p), _system_arg(p), _out_args(p)
    p.add_argument("--methods", default="compute_first,h2h,heft,cpop,peft,fastest_single_device,search",
                   help="comma-separated mapping methods (also ilp, ilp_makespan, search_makespan, h2h_plus...)")

    p = sub.add_parser("partition", help="partition onto backends by support/priority (seed 003) and pipeline them")
    _graph_args(p), _system_arg(p), _out_args(p)
    p.add_argument("--disable", default="", help="comma-separated backends to switch off")
    p.add_argument("--fallback", default=None, help="backend for ops no enabled backend supports")
    p.add_argument("--merge", choices=["adjacent", "global", "none"], default="adjacent")
    p.add_argument("--min-group-size", type=int, default=1)
    p.add_argument("--n-inputs", type=int, default=32)
    p.add_argument("--buffer-depth", type=int, default=2)
    p.add_argument("--compare", action="store_true", help="also compare the partitioning strategies")

    p = sub.add_parser("pipeline", help="generate, validate and simulate a pipeline schedule (seed 001)")
    _out_args(p)
    p.add_argument("--p", type=int, required=True, help="pipeline ranks")
    p.add_argument("--v", type=int, default=1, help="chunks (virtual stages) per rank")
    p.add_argument("--m", type=int, required=True, help="micro-batches")
    p.add_argument("--schedule", default="interleaved_1f1b", help="gpipe, 1f1b, looped_bfs, interleaved_1f1b, interleaved_fthenb, zb_h1, zb_h2, zbv")
    p.add_argument("--grouping", default=None, help="interleaved_1f1b grouping: balanced (default), paddle, megatron, torch")
    p.add_argument("--f-s", type=float, default=1.0, help="forward time per chunk (s)")
    p.add_argument("--b-s", type=float, default=2.0, help="backward time per chunk (s)")
    p.add_argument("--activation-bytes", type=float, default=0.0, help="activation bytes per chunk and micro-batch")
    p.add_argument("--torch-csv", metavar="OUT.csv", help="write the schedule as a torch.distributed.pipelining CSV")

    p = sub.add_parser("order", help="order ops to minimise peak memory (seed 002)")
    _graph_args(p), _out_args(p)
    p.add_argument("--method", default="auto", help="auto (the patent's flow), heuristic, exact, ilp, bfs, dfs, inductor_*, xla_*")
    p.add_argument("--time-limit", type=float, default=10.0, help="ILP/exact time limit in seconds")
    p.add_argument("--compare", action="store_true", help="also compare with the compiler baselines")

    p = sub.add_parser("executor", help="simulate sync/async dispatch with streams and host threads (seed 004)")
    _graph_args(p), _out_args(p)
    p.add_argument("--streams", default="patent", help="single, patent, nimble")
    p.add_argument("--threads", default="patent", help="single, patent, inline_one")
    p.add_argument("--pool-size", type=int, default=4)
    p.add_argument("--costs", default="cuda", help="cost preset: cuda, eager, ideal")
    p.add_argument("--compare", action="store_true", help="also compare the policies")

    p = sub.add_parser("sweep", help="run a what-if sweep from a YAML spec")
    p.add_argument("spec", help="YAML: task, fixed, grid, and optional cache, output, workers")
    p.add_argument("-o", "--output", help="CSV of the results (default: the spec's output, else stdout)")
    p.add_argument("--workers", type=int, default=None, help="processes (default: the spec's, else CPU count)")
    p.add_argument("--cache", help="resumable cache (.csv or .parquet), overrides the spec's")
    p.add_argument("--html", metavar="REPORT.html", help="write a self-contained HTML report (table and a chart per metric)")
    p.add_argument("--quiet", action="store_true")

    p = sub.add_parser("zoo", help="list or build zoo models")
    p.add_argument("name", nargs="?", help="model name (omit with --list)")
    p.add_argument("--list", action="store_true", help="list the models")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--training", action="store_true")
    p.add_argument("-o", "--output", metavar="OUT.json", help="save the graph as JSON")
    p.add_argument("--html", metavar="REPORT.html", help="write a self-contained HTML report (summary and graph)")
    p.add_argument("--quiet", action="store_true")
    return ap


# ---------------------------------------------------------------------------- helpers
def _graph(a: argparse.Namespace):
    from .whatif import resolve_graph

    return resolve_graph(a.graph, a.n, a.seed, a.batch, a.training)


def _system(a: argparse.Namespace):
    from .whatif import resolve_system

    return resolve_system(a.system)


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
        for name, df in tables.items():
            df.to_csv(f"{a.csv}_{name}.csv", index=False)
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
            r = run_mapping(g, s, a.method, **opts)
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
    with _working(a, f"compare: {len(methods)} methods"):
        df = mapping.compare(g, s, methods)
    _print(a, f"mapping methods on {g.name} ({g.n_ops} ops) / {s.name}", df)
    sections: list[tuple[str, Any]] = []
    if a.html:
        sections = [("Comparison", df)] + [(m, plot.compare(df, m)) for m in ("makespan_s", "total_latency_s", "energy_J") if m in df]
        best = str(df.loc[df["makespan_s"].astype(float).idxmin(), "method"]) if len(df) and "makespan_s" in df else None
        if best in mapping.METHODS:  # the winner's mapping, drawn like `hetsched map` draws it
            sections += _map_sections(g, s, run_mapping(g, s, best), f"best makespan: {best}")
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
    with _working(a, "partition"):
        p = partition.partition_by_support(g, s, enabled=enabled, fallback=a.fallback, merge=None if a.merge == "none" else a.merge,
                                           min_group_size=a.min_group_size)
        sim = partition.simulate_buffered(p, s, n_inputs=a.n_inputs, buffer_depth=a.buffer_depth)
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
            cmp = partition.compare_partitions(g, s, enabled=enabled, fallback=a.fallback, n_inputs=a.n_inputs, buffer_depth=a.buffer_depth)
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
        if e.field == "grouping":
            raise HetschedError(f"--grouping applies to --schedule interleaved_1f1b only, not {a.schedule!r}",
                                field="--grouping") from None
        raise
    per_rank = getattr(r, "per_rank", None)
    frames = [_metrics_frame(r.metrics)] + ([per_rank] if isinstance(per_rank, pd.DataFrame) else [])
    _print(a, f"{sch.name}: p={a.p} v={a.v} m={a.m}", *frames)
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
    limited = a.method in ("auto", "exact", "ilp")
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
    with _working(a, "executor"):
        r = executor.simulate(g, streams=a.streams, threads=a.threads, pool_size=a.pool_size, costs=a.costs)
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
            cmp = executor.compare_policies(g, costs=a.costs, pool_size=a.pool_size)
        frames.append(cmp.frame)
        tables["compare"] = cmp.frame
        sections += [("Policies", cmp.frame), ("Makespan by policy", policy_bars(cmp))]
    _print(a, f"executor on {g.name} ({g.n_ops} ops): streams={a.streams} threads={a.threads}", *frames)
    if a.trace:
        executor.executor_trace(r, a.trace)
        a.trace = None
    _outputs(a, "hetsched executor", r, sections, tables)
    return EXIT_OK


class _SpecLoader(yaml.SafeLoader):
    """YAML 1.1 reads ``1e9`` as a string (it wants ``1.0e9``); in a sweep spec it means the number."""


_SpecLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def _load_spec(path: Path) -> dict:
    from .errors import FormatError

    if not path.exists():
        raise FormatError(f"sweep spec {str(path)!r} not found", field="spec")
    try:
        spec = yaml.load(path.read_text(), Loader=_SpecLoader) or {}
    except yaml.YAMLError as e:
        raise FormatError(f"{path.name}: not valid YAML: {e}", field="spec") from None
    if not isinstance(spec, dict):
        raise FormatError(f"{path.name}: expected a mapping with task, grid, fixed", field="spec")
    return spec


def _cmd_sweep(a: argparse.Namespace) -> int:
    from . import plot
    from .errors import FormatError
    from .sweep import expand_grid, sweep
    from .whatif import TASKS

    path = Path(a.spec)
    spec = _load_spec(path)
    unknown = sorted(set(spec) - {"task", "grid", "fixed", "cache", "output", "workers"})
    if unknown:
        raise FormatError(f"{path.name}: unknown field(s) {unknown}; a spec has task, grid, fixed, cache, output, workers",
                          field=unknown[0])
    task = spec.get("task")
    if task not in TASKS:
        raise FormatError(f"{path.name}: task must be one of {sorted(TASKS)}, got {task!r}", field="task")
    grid = spec.get("grid") or {}
    fixed = spec.get("fixed") or {}
    if not isinstance(grid, dict) or not grid:
        raise FormatError(f"{path.name}: grid must map parameter -> list of values", field="grid")
    if not isinstance(fixed, dict):
        raise FormatError(f"{path.name}: fixed must map parameter -> one value, got {fixed!r}", field="fixed")
    methods = [fixed["method"]] if "method" in fixed else list(grid.get("method") or ["h2h"])
    _check_task_params(path.name, task, [*fixed, *grid], methods=methods)
    points = [{**fixed, **p} for p in expand_grid(grid)]
    workers = a.workers if a.workers is not None else spec.get("workers")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise FormatError(f"workers must be a positive integer, got {workers!r}", field="workers")
    # sweep's own pool (fork-server workers: safe in a process that runs threads); 1 worker = in process
    executor = "serial" if workers == 1 else None
    df = sweep(_SweepTask(task), points, executor=executor, max_workers=workers, cache=a.cache or spec.get("cache"),
               progress=False if a.quiet else None)
    out = a.output or spec.get("output")
    if out:
        df.to_csv(out, index=False)
    if not a.quiet and not out:
        print(df.to_csv(index=False), end="")
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
        sections: list[tuple[str, Any]] = [("Spec", path.read_text()), ("Results", df)]
        sections += [(f"{m} by grid point ({', '.join(varying)})", plot.compare(framed, m, by="point")) for m in metrics]
        write_report(a.html, f"hetsched sweep: {path.name}", sections, meta={"command": "hetsched " + " ".join(a.argv)})
    kinds = set(df["error_kind"].dropna())
    if not kinds:
        return EXIT_OK
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


COMMANDS = {
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
    try:
        a = parser.parse_args(argv)
    except SystemExit as e:  # argparse: 2 for usage errors, 0 for --help/--version
        return int(e.code or 0)
    a.argv = argv  # the report records the command that made it
    try:
        return COMMANDS[a.command](a)
    except BrokenPipeError:  # `hetsched ... | head`: the reader left; not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (Infeasible, UnsupportedOpError) as e:
        print(f"hetsched: infeasible: {e}", file=sys.stderr)
        return EXIT_INFEASIBLE
    except HetschedError as e:
        print(f"hetsched: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (OSError, ValueError) as e:  # unreadable/unwritable paths and similar plain input errors
        print(f"hetsched: error: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT


def entry() -> None:  # pragma: no cover - console script wrapper
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    entry()
