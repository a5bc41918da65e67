"""The ``hetsched`` command: every algorithm family from a terminal, with reports, traces and sweeps.

Exit codes: 0 ok, 2 bad input (the message names the field/op at fault), 3 infeasible (nothing
fits memory, an op no device supports).

Examples
--------
>>> main(["pipeline", "--p", "2", "--v", "1", "--m", "4", "--schedule", "1f1b", "--quiet"])
0
>>> main(["map", "no-such-graph", "--system", "toy", "--quiet"])
2
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from . import __version__
from .errors import HetschedError, Infeasible, UnsupportedOpError

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE = 0, 2, 3


# ---------------------------------------------------------------------------- argument plumbing
def _graph_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("graph", help="graph file (.json/.onnx), bundled graph, zoo model or generator name")
    p.add_argument("--batch", type=int, default=1, help="batch size for zoo models (default 1)")
    p.add_argument("--training", action="store_true", help="zoo models: build the training graph")
    p.add_argument("--n", type=int, default=40, help="generators: number of ops (default 40)")
    p.add_argument("--seed", type=int, default=0, help="generators: seed (default 0)")


def _system_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--system", default="cpu_gpu_fpga", help="system YAML path or bundled name, or 'toy' (default cpu_gpu_fpga)")


def _out_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--html", metavar="REPORT.html", help="write a self-contained HTML report (opens offline)")
    p.add_argument("--trace", metavar="TRACE.json", help="write a Chrome/Perfetto trace of the timeline")
    p.add_argument("--csv", metavar="PREFIX", help="write PREFIX_metrics.csv, PREFIX_timeline.csv, PREFIX_steps.csv ...")
    p.add_argument("--quiet", action="store_true", help="no summary on stdout")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (subcommands map, compare, partition, pipeline, order, executor, sweep, zoo)."""
    ap = argparse.ArgumentParser(prog="hetsched", description="Scheduling deep-learning work on heterogeneous hardware.")
    ap.add_argument("--version", action="version", version=f"hetsched {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("map", help="map ops to devices (seed 000: compute-first, locality, remap; or a baseline)")
    _graph_args(p), _system_arg(p), _out_args(p)
    p.add_argument("--method", default="h2h", help="h2h (default), compute_first, heft, cpop, peft, fastest_single_device, brute_force")
    p.add_argument("--objective", choices=["total_latency", "makespan"], default=None, help="h2h remap objective")
    p.add_argument("--direction", choices=["successor", "both"], default=None, help="h2h remap direction")
    p.add_argument("--occupancy-threshold", type=float, default=None, help="h2h locality: max device occupancy")
    p.add_argument("--policy", choices=["greedy", "knapsack"], default=None, help="h2h locality policy")

    p = sub.add_parser("compare", help="compare mapping methods on one graph and system")
    _graph_args(p), _system_arg(p), _out_args(p)
    p.add_argument("--methods", default="compute_first,h2h,heft,cpop,peft,fastest_single_device",
                   help="comma-separated mapping methods")

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
    p.add_argument("--grouping", default="balanced", help="interleaved grouping: balanced, paddle, megatron, torch")
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
    p.add_argument("--quiet", action="store_true")

    p = sub.add_parser("zoo", help="list or build zoo models")
    p.add_argument("name", nargs="?", help="model name (omit with --list)")
    p.add_argument("--list", action="store_true", help="list the models")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--training", action="store_true")
    p.add_argument("-o", "--output", metavar="OUT.json", help="save the graph as JSON")
    p.add_argument("--quiet", action="store_true")
    return ap


# ---------------------------------------------------------------------------- helpers
def _graph(a: argparse.Namespace):
    from .whatif import resolve_graph

    return resolve_graph(a.graph, a.n, a.seed, a.batch, a.training)


def _system(a: argparse.Namespace):
    from .whatif import resolve_system

    return resolve_system(a.system)


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

        write_report(a.html, title, sections, meta={"command": "hetsched " + " ".join(sys.argv[1:]) if sys.argv else ""})


def _base_tables(result: Any) -> dict[str, pd.DataFrame]:
    tables = {"metrics": _metrics_frame(result.metrics)}
    if getattr(result, "timeline", None) is not None and len(result.timeline):
        tables["timeline"] = result.timeline
    if getattr(result, "steps", None):
        tables["steps"] = result.steps_frame()
    return tables


# ---------------------------------------------------------------------------- commands
def _cmd_map(a: argparse.Namespace) -> int:
    from . import mapping, plot
    from .timeline import memory_usage

    g, s = _graph(a), _system(a)
    fn = mapping.METHODS.get(a.method)
    if fn is None:
        raise HetschedError(f"unknown mapping method {a.method!r}; choose from {', '.join(mapping.METHODS)}", field="--method")
    opts = {k: v for k, v in dict(objective=a.objective, direction=a.direction, occupancy_threshold=a.occupancy_threshold,
                                  policy=a.policy).items() if v is not None}
    r = fn(g, s, **opts)
    per_dev = pd.Series(r.placement.device).value_counts().rename_axis("device").reset_index(name="n_ops")
    _print(a, f"{a.method} on {g.name} ({g.n_ops} ops) / {s.name}", _metrics_frame(r.metrics), per_dev)
    colors = plot.color_map(s.device_names)
    sections = [
        ("Metrics", _metrics_frame(r.metrics)),
        ("Graph, coloured by device", plot.graph_view(g, color_by=r.placement.device, colors=colors)),
        ("Gantt", plot.gantt(r.timeline, color_by="device", colors=colors)),
        ("Device memory", plot.memory_curve(memory_usage(r.timeline))),
    ]
    if r.steps:
        sections.append(("Decision log", r.steps_frame()))
    _outputs(a, f"hetsched map: {a.method}", r, sections, _base_tables(r))
    return EXIT_OK


def _cmd_compare(a: argparse.Namespace) -> int:
    from . import mapping, plot

    g, s = _graph(a), _system(a)
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in mapping.METHODS]
    if unknown:
        raise HetschedError(f"unknown mapping method(s) {unknown}; choose from {', '.join(mapping.METHODS)}", field="--methods")
    df = mapping.compare(g, s, methods)
    _print(a, f"mapping methods on {g.name} ({g.n_ops} ops) / {s.name}", df)
    sections = [("Comparison", df)] + [(m, plot.compare(df, m)) for m in ("makespan_s", "total_latency_s", "energy_J") if m in df]
    if a.trace:
        raise HetschedError("compare has no single timeline; use `hetsched map --trace`", field="--trace")
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
    p = partition.partition_by_support(g, s, enabled=enabled, fallback=a.fallback, merge=None if a.merge == "none" else a.merge,
                                       min_group_size=a.min_group_size)
    sim = partition.simulate_buffered(p, s, n_inputs=a.n_inputs, buffer_depth=a.buffer_depth)
    frames = [_metrics_frame(p.metrics), _metrics_frame(sim.metrics)]
    sections: list[tuple[str, Any]] = [
        ("Partition", _metrics_frame(p.metrics)),
        ("Graph, coloured by backend", plot.graph_view(g, color_by=p.assignment, colors=plot.color_map(s.device_names))),
        ("Buffered pipeline", _metrics_frame(sim.metrics)),
        ("Gantt", plot.gantt(sim.timeline, color_by="kind")),
    ]
    tables = {**_base_tables(sim), "partition_metrics": _metrics_frame(p.metrics), "partition_steps": p.steps_frame()}
    if a.compare:
        cmp = partition.compare_partitions(g, s, enabled=enabled, fallback=a.fallback, n_inputs=a.n_inputs, buffer_depth=a.buffer_depth)
        frame = getattr(cmp, "frame", cmp)
        frames.append(frame)
        sections.append(("Strategies", frame))
        tables["compare"] = frame
    _print(a, f"partition of {g.name} ({g.n_ops} ops) on {', '.join(enabled)}", *frames)
    _outputs(a, "hetsched partition", sim, sections, tables)
    return EXIT_OK


def _cmd_pipeline(a: argparse.Namespace) -> int:
    from . import pipeline as pp
    from . import plot

    opts = {"grouping": a.grouping} if a.schedule == "interleaved_1f1b" else {}
    sch = pp.make_schedule(a.schedule, a.p, a.v, a.m, **opts)
    pp.validate(sch)
    r = pp.simulate(sch, costs=pp.StageCosts(f_s=a.f_s, b_s=a.b_s, activation_bytes=a.activation_bytes))
    _print(a, f"{sch.name}: p={a.p} v={a.v} m={a.m}", _metrics_frame(r.metrics))
    if a.torch_csv:
        pp.to_torch_csv(sch, a.torch_csv)
    sections = [("Metrics", _metrics_frame(r.metrics)), ("Gantt", plot.gantt(r.timeline, color_by="kind"))]
    _outputs(a, f"hetsched pipeline: {sch.name}", r, sections, _base_tables(r))
    return EXIT_OK


def _cmd_order(a: argparse.Namespace) -> int:
    from . import memory, plot

    g = _graph(a)
    r = memory.optimize_order(g, method=a.method, time_limit_s=a.time_limit)
    frames = [_metrics_frame(r.metrics)]
    curves = [r.curve.assign(method=r.method)] if isinstance(r.curve, pd.DataFrame) else []
    tables = _base_tables(r)
    sections: list[tuple[str, Any]] = [("Result", _metrics_frame(r.metrics)), ("Why", getattr(r, "why", ""))]
    if a.compare:
        df = memory.compare_orders(g)
        frames.append(df)
        tables["compare"] = df
        sections.append(("Compared with compiler orders", df))
        if "peak_bytes" in df:
            sections.append(("Peak memory by method", plot.compare(df, "peak_bytes")))
    if curves:
        sections.insert(1, ("Memory curve", plot.memory_curve(pd.concat(curves), lower_bound=r.lower_bound_bytes)))
    _print(a, f"order {g.name} ({g.n_ops} ops): {r.method}", *frames)
    _outputs(a, "hetsched order", r, sections, tables)
    return EXIT_OK


def _cmd_executor(a: argparse.Namespace) -> int:
    from . import executor, plot

    g = _graph(a)
    r = executor.simulate(g, streams=a.streams, threads=a.threads, pool_size=a.pool_size, costs=a.costs)
    frames = [_metrics_frame(r.metrics)]
    sections: list[tuple[str, Any]] = [("Metrics", _metrics_frame(r.metrics)), ("Gantt", plot.gantt(r.timeline, color_by="kind"))]
    tables = _base_tables(r)
    if a.compare:
        cmp = executor.compare_policies(g, costs=a.costs, pool_size=a.pool_size)
        frames.append(cmp.frame)
        tables["compare"] = cmp.frame
        sections += [("Policies", cmp.frame), ("Makespan by policy", cmp.figure())]
    _print(a, f"executor on {g.name} ({g.n_ops} ops): streams={a.streams} threads={a.threads}", *frames)
    if a.trace:
        executor.executor_trace(r, a.trace)
        a.trace = None
    _outputs(a, "hetsched executor", r, sections, tables)
    return EXIT_OK


def _cmd_sweep(a: argparse.Namespace) -> int:
    import yaml

    from .errors import FormatError
    from .sweep import sweep
    from .whatif import TASKS

    path = Path(a.spec)
    if not path.exists():
        raise FormatError(f"sweep spec {a.spec!r} not found", field="spec")
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise FormatError(f"{path.name}: not valid YAML: {e}", field="spec") from None
    if not isinstance(spec, dict):
        raise FormatError(f"{path.name}: expected a mapping with task, grid, fixed", field="spec")
    unknown = set(spec) - {"task", "grid", "fixed", "cache", "output", "workers"}
    if unknown:
        raise FormatError(f"{path.name}: unknown field(s) {sorted(unknown)}", field=sorted(unknown)[0])
    task = spec.get("task")
    if task not in TASKS:
        raise FormatError(f"{path.name}: task must be one of {sorted(TASKS)}, got {task!r}", field="task")
    grid = spec.get("grid") or {}
    fixed = spec.get("fixed") or {}
    if not isinstance(grid, dict) or not grid:
        raise FormatError(f"{path.name}: grid must map parameter -> list of values", field="grid")
    points = [{**fixed, **p} for p in __import__("hetsched.sweep", fromlist=["expand_grid"]).expand_grid(grid)]
    from concurrent.futures import ProcessPoolExecutor

    workers = a.workers or spec.get("workers")
    fn = _SweepTask(task)
    executor = "serial" if workers == 1 else ProcessPoolExecutor(max_workers=workers) if workers else None
    try:
        df = sweep(fn, points, executor=executor, cache=a.cache or spec.get("cache"), progress=None if not a.quiet else False)
    finally:
        if executor not in (None, "serial"):
            executor.shutdown()
    out = a.output or spec.get("output")
    if out:
        df.to_csv(out, index=False)
    if not a.quiet and not out:
        print(df.to_csv(index=False), end="")
    elif not a.quiet:
        print(f"{len(df)} points, {int(df['error'].notna().sum())} failed -> {out}")
    return EXIT_OK if df["error"].isna().all() else EXIT_BAD_INPUT


class _SweepTask:
    """A picklable call of a what-if task by name."""

    def __init__(self, task: str) -> None:
        self.task = task

    def __call__(self, **params: Any) -> dict:
        from .whatif import TASKS

        fn = TASKS[self.task]
        import inspect

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
    g = zoo.ZOO[a.name](batch=a.batch, training=a.training)
    s = g.summary()
    _print(a, f"{a.name}", pd.DataFrame({"field": list(s)[:6], "value": [s[k] for k in list(s)[:6]]}))
    if a.output:
        save_graph(g, a.output)
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
    try:
        a = parser.parse_args(argv)
    except SystemExit as e:  # argparse: 2 for usage errors, 0 for --help/--version
        return int(e.code or 0)
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
