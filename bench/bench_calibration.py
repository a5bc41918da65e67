"""Benchmark of issue 19: calibrate on this machine, predict other sizes, compare with measured runs.

Calibrate (``hetsched.calibrate``) on ResNet-50 at batch 1 and BERT-base at sequence length 64 (the
zoo's torch twins, :mod:`hetsched.io.torch_zoo`), then predict ResNet-50 at batch 8 and BERT-base at
sequence length 128 and measure them. Targets: end-to-end within 10 % of measured, per-op median
ratio (predicted / measured) within [0.9, 1.1], per-op p10-p90 within [0.7, 1.4], the calibration
run under 3 minutes. Also shown: the uncalibrated roofline (datasheet-style: the measured peak and
bandwidth, 100 % efficiency) on the same runs, what a batch-1 latency table does at batch 8, and
the profile import's match rate on real ``torch.profiler`` traces of both target runs. Memory: the
predicted peak of torch's joint training graph (an MLP and a small branchy CNN) within 5 % of the
profiler's allocator peak, and the order ``optimize_order`` recommends lowers the measured peak.

Run from the repo root::

    .venv/bin/python bench/bench_calibration.py                 # writes bench/results/calibration.md
    .venv/bin/python bench/bench_calibration.py --threads 2 --clock wall --stat median

Measuring on a machine shared with other jobs: by default torch runs on one thread and ops are
timed with that thread's CPU time (``--clock cpu``), which does not count the time the thread
waits for a core; every timing is an order statistic (``--stat``) over ``--repeats`` runs; glibc is
told to keep freed memory (:func:`hetsched.calibrate.warm_allocator`) so that no run pays page
faults another does not. The load at the start is recorded. On a quiet machine ``--clock wall``
gives the same numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import replace as _replace
import time
import warnings

import benchlib as bl

TARGETS = {"e2e": 0.10, "median": (0.9, 1.1), "p10": 0.7, "p90": 1.4, "calibration_s": 180.0, "peak": 0.05}


def _fmt(x: float) -> str:
    return f"{x:.3f}"


def main(argv: list[str] | None = None) -> int:
    from hetsched.cli import _positive_int  # the CLI's checked type: 0 or -1 is refused, never replaced

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--clock", choices=["cpu", "wall", "profiler"], default="cpu",
                    help="how ops are timed (default cpu: thread CPU time; needs --threads 1)")
    ap.add_argument("--stat", choices=["median", "min", "mean"], default="median", help="over the repeats")
    ap.add_argument("--repeats", type=_positive_int, default=10)
    ap.add_argument("--runs", type=_positive_int, default=None,
                    help="independent calibration runs, per-op median (default: hetsched.calibrate.DEFAULT_RUNS)")
    ap.add_argument("--measured-runs", type=_positive_int, default=3,
                    help="independent measured runs of each predicted model; the verdict is on their median")
    ap.add_argument("--no-sweep", action="store_true", help="workload points only")
    ap.add_argument("--out", default=str(bl.RESULTS / "calibration.md"))
    ap.add_argument("--ops-csv", help="also write every predicted op's measured (median of the runs) and predicted time")
    a = ap.parse_args(argv)

    import torch

    import hetsched as hs
    from hetsched.calibrate import DEFAULT_RUNS, compare, median_runs, warm_allocator
    from hetsched.cost import RooflineCost, TableCost
    from hetsched.errors import HetschedError
    from hetsched.io.profile import load_profile, profile_torch, time_torch
    from hetsched.io.torch_import import load_torch
    from hetsched.io.torch_zoo import torch_model

    warnings.simplefilter("ignore")  # ATen ops without a FLOP rule; TableCost's own warnings are shown below
    machine = bl.machine_line()
    load0 = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    warm = warm_allocator()
    torch.set_num_threads(a.threads)
    t0 = time.perf_counter()
    runs = DEFAULT_RUNS if a.runs is None else a.runs
    cal = hs.calibrate([("resnet50", {"batch": 1}), ("bert_base", {"batch": 1, "seq_len": 64})], repeats=a.repeats,
                       runs=runs, stat=a.stat, clock=a.clock, threads=a.threads, sweep=not a.no_sweep, progress=print,
                       system_name="bench-local")
    cal_s = time.perf_counter() - t0
    system, cost = cal.system, cal.cost
    roof = RooflineCost(system)

    rows, base_rows, match_rows, detail, op_frames = [], [], [], [], []
    loads: list[float] = []
    ok_all = True
    for name, kw in [("resnet50", {"batch": 8}), ("bert_base", {"batch": 1, "seq_len": 128})]:
        m, x = torch_model(name, **kw)
        label = f"{name}(" + ",".join(f"{k}={v}" for k, v in kw.items()) + ")"
        g = load_torch(m, x, name=label)  # named like the calibration's graphs: same model, its layer factors apply
        per_run, profs = [], []
        for j in range(a.measured_runs):
            # independent runs, each timed as the calibration times (every op: the stat of --repeats
            # calls); contention from other jobs comes and goes, so one run can be 20 % off in all its
            # memory-bound ops: the verdict is on the median of the runs' numbers, and each is shown
            load_j = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
            loads.append(load_j)
            prof, wall = _measure(m, x, g, a, load_profile, profile_torch, time_torch)
            profs.append(prof)
            mt = compare(prof, cost, system, wall_s=wall).metrics
            per_run.append(mt)
            print(f"{label} run {j + 1}: e2e {mt['e2e_ratio']:.3f} median {mt['median_ratio']:.3f} "
                  f"p10 {mt['p10_ratio']:.3f} p90 {mt['p90_ratio']:.3f} (load {load_j:.1f})", flush=True)
            rows.append([f"{label} run {j + 1}", f"{load_j:.1f}", bl.fmt_s(mt["measured_s"]), bl.fmt_s(mt["predicted_s"]),
                         _fmt(mt["e2e_ratio"]), _fmt(mt["median_ratio"]), _fmt(mt["p10_ratio"]), _fmt(mt["p90_ratio"]),
                         int(mt["n_ops"]), ""])
        med = {k: statistics.median(r[k] for r in per_run) for k in per_run[0]}
        ok = (abs(med["e2e_ratio"] - 1) <= TARGETS["e2e"] and TARGETS["median"][0] <= med["median_ratio"] <= TARGETS["median"][1]
              and med["p10_ratio"] >= TARGETS["p10"] and med["p90_ratio"] <= TARGETS["p90"])
        ok_all &= ok
        rows.append([f"**{label}: median of {len(per_run)}**", "", bl.fmt_s(med["measured_s"]), bl.fmt_s(med["predicted_s"]),
                     _fmt(med["e2e_ratio"]), _fmt(med["median_ratio"]), _fmt(med["p10_ratio"]), _fmt(med["p90_ratio"]),
                     int(med["n_ops"]), bl.verdict(ok)])
        # per op type and the roofline baseline: against each op's median over the measured runs
        prof = _replace(profs[0], latency_s=median_runs([p.latency_s for p in profs]))
        wall = statistics.median(r["measured_s"] for r in per_run)
        c = compare(prof, cost, system, wall_s=wall)
        op_frames.append(c.ops.assign(model=label))
        b = compare(prof, roof, system, wall_s=wall).metrics
        base_rows.append([label, _fmt(b["e2e_ratio"]), _fmt(b["median_ratio"]), _fmt(b["p10_ratio"]), _fmt(b["p90_ratio"])])
        by_type = c.ops.groupby("op_type")["ratio"].agg(["size", "median", lambda r: r.quantile(0.1),
                                                          lambda r: r.quantile(0.9)])
        by_type.columns = ["ops", "median", "p10", "p90"]
        by_type = by_type.sort_values("ops", ascending=False)
        detail.append((label, [[t, int(r["ops"]), _fmt(r["median"]), _fmt(r["p10"]), _fmt(r["p90"])] for t, r in by_type.iterrows()]))
        # the profile import on a real torch.profiler trace of the same run
        pt = load_profile(profile_torch(m, x, repeats=2, warmup=1, annotate=False, threads=a.threads), g)
        match_rows.append([label, g.n_ops, f"{pt.metrics['match_rate']:.0%}", int(pt.metrics["n_unmatched_events"])])

    if a.ops_csv:
        import pandas as pd

        pd.concat(op_frames, ignore_index=True).to_csv(a.ops_csv, index=False)
    # a batch-1 latency table applied at batch 8: refused, not silently wrong
    g1 = cal.graphs["resnet50(batch=1)"]
    table = cal.profiles["resnet50(batch=1)"].cost_model(system)
    try:
        from hetsched import evaluate

        m8, x8 = torch_model("resnet50", batch=8)
        evaluate(load_torch(m8, x8, name="resnet50(batch=8)"), system, {o: "cpu0" for o in g1.ops}, cost=table)
        table_line = "the batch-1 table priced the batch-8 graph (NOT refused)"
        ok_all = False
    except HetschedError as e:
        table_line = f"refused: `{e}`"
    assert isinstance(table, TableCost)

    ok_cal = cal_s < TARGETS["calibration_s"]
    ok_all &= ok_cal
    mem_rows, ok_mem = _memory_rows(a.threads)
    ok_all &= ok_mem
    steps = "\n".join(f"- {s.reason}" for s in cal.steps if s.action != "fit_curve")
    curves = "\n".join(f"- `{s.subject}`: {s.reason}" for s in cal.steps if s.action == "fit_curve")
    lines = [
        "# Calibration: simulated vs measured (issue 19)",
        "",
        f"Command: `{bl.command_line()}`",
        f"Machine: {machine}",
        f"Settings: torch {torch.__version__}, {a.threads} thread(s), clock `{a.clock}`, `{a.stat}` of {a.repeats} calls "
        f"per op, calibration: per-op median of {runs} independent runs, {a.measured_runs} measured runs of each "
        f"predicted model, sweep {'off' if a.no_sweep else 'on'}, allocator kept warm: {'yes' if warm else 'no (not glibc)'}. "
        "The machine is shared with other jobs: the load above is what the other jobs put on its 2 cores; "
        "the CPU clock does not count the time our thread waits for a core, but caches and memory are shared.",
        "",
        f"**Load**: 1-min load {load0:.1f} when the calibration started ({cal.metrics['load_1min']:.1f} by its own "
        f"record), {min(loads):.1f}-{max(loads):.1f} when the measured runs started"
        + (" -- taken under load from other jobs (memory-bound ops run 10-30 % slower and vary run to run)"
           if max(loads + [load0]) >= 1.0 else " -- a quiet machine") + ".",
        "",
        "Calibrated on ResNet-50 batch 1 and BERT-base sequence 64 (zoo torch twins, eval mode); "
        "predicted (`hetsched.calibrate.compare`: `evaluate` with the calibrated cost file, every op on `cpu0`) "
        "and measured ResNet-50 batch 8 and BERT-base sequence 128. Ratio = predicted / measured; end to end "
        "measured = the eager module's forward, per op = each FX node timed as it runs in the exported program. "
        f"Each predicted model is measured in {a.measured_runs} independent runs (load = the 1-min load when the run "
        "started); the verdict is on the median of their numbers. The per-op-type tables and the roofline baseline "
        "use each op's median over the runs.",
        "",
        "## Targets",
        "",
        bl.table(["run", "load", "measured", "predicted", "e2e ratio", "per-op median", "p10", "p90", "ops", "result"], rows),
        "",
        f"Limits: end to end within {TARGETS['e2e']:.0%}, median in [{TARGETS['median'][0]}, {TARGETS['median'][1]}], "
        f"p10 >= {TARGETS['p10']}, p90 <= {TARGETS['p90']}.",
        "",
        f"Calibration run: {bl.fmt_s(cal_s)} (limit {TARGETS['calibration_s']:.0f} s) {bl.verdict(ok_cal)}",
        "",
        "## Without calibration",
        "",
        "The roofline at the *measured* peak and bandwidth, 100 % efficiency, no calibration "
        "(`RooflineCost(system)`), on the same measured runs:",
        "",
        bl.table(["run", "e2e ratio", "per-op median", "p10", "p90"], base_rows),
        "",
        f"A batch-1 latency table (`Profile.cost_model`) asked to price ResNet-50 at batch 8: {table_line}",
        "",
        "## Memory: predicted peak of torch's joint training graph against the allocator",
        "",
        "Training step exported with `torch.export` + `_export_forward_backward` (the loss and every gradient), "
        "imported with `load_torch`; measured = the profiler's allocator peak during the run plus the graph "
        "inputs allocated before it; predicted = `hetsched.memory.peak_memory` in the program's own order. "
        "The CNN's convolution backward allocates scratch buffers: the bare graph misses them; with the "
        "workspace the profiler measured per op (`load_torch(..., workspace=...)`), the model predicts the peak of "
        "any order. Then `optimize_order` recommends an order, and the program is run again in it. "
        f"Target: predicted within {TARGETS['peak']:.0%} of measured, and the recommended order lowers the measured "
        "peak.",
        "",
        bl.table(["model", "measured peak", "predicted (bare)", "ratio", "predicted (with workspace)", "ratio",
                  "recommended order: predicted", "measured", "vs the program's order", "result"], mem_rows),
        "",
        "## Profile import on real torch.profiler traces of the target runs",
        "",
        bl.table(["run", "graph ops", "ops matched", "unmatched events"], match_rows),
        "",
        "## Per op type",
        "",
    ]
    for label, rows_t in detail:
        lines += [f"### {label}", "", bl.table(["op type", "ops", "median", "p10", "p90"], rows_t), ""]
    lines += ["## What the calibration measured", "", steps, "", "Curves:", "", curves, ""]
    path = bl.write_fragment("calibration", "\n".join(lines)) if a.out == str(bl.RESULTS / "calibration.md") else None
    if path is None:
        from pathlib import Path

        Path(a.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines[10:22]))
    return 0 if ok_all else 1


def _measure(m, x, g, a, load_profile, profile_torch, time_torch):
    """``(Profile, end-to-end seconds)`` of one measured run of the eager module ``m``."""
    import torch

    if a.clock == "profiler":
        prof = load_profile(profile_torch(m, x, repeats=a.repeats, warmup=2, annotate=False, threads=a.threads), g,
                            stat=a.stat)
        with torch.no_grad():
            ts = []
            for _ in range(a.repeats):
                s0 = time.perf_counter()
                m(*x)
                ts.append(time.perf_counter() - s0)
        return prof, (sorted(ts)[len(ts) // 2] if a.stat == "median" else min(ts))
    prof = time_torch(m, x, g, repeats=a.repeats, warmup=2, clock=a.clock, stat=a.stat, threads=a.threads)
    return prof, prof.metrics["iteration_s"]


def _memory_rows(threads: int) -> tuple[list[list[str]], bool]:
    """Issue 19's memory target on an MLP and a small branchy CNN (the models of tests/test_calib_memory.py)."""
    import warnings as _w
    from pathlib import Path

    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_calib_memory import BranchCNN, _joint, _measured_peak  # the tests' models: one definition

    from hetsched.io.profile import profile_torch
    from hetsched.io.torch_import import load_torch
    from hetsched.memory import optimize_order, peak_memory

    nn = torch.nn
    rows, ok_all = [], True
    torch.manual_seed(0)
    cases = [("MLP 512-2048-2048-10, batch 256",
              nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10)),
              torch.randn(256, 512)),
             ("branchy CNN, batch 16, 32x32", BranchCNN(), torch.randn(16, 3, 32, 32))]
    mb = lambda b: f"{b / 2**20:.2f} MiB"  # noqa: E731
    for label, model, x in cases:
        ep, g, args = _joint(model, x)
        measured, prof = _measured_peak(g, profile_torch(ep, args, memory=True, repeats=1, threads=threads))
        bare = peak_memory(g, list(g.ops))
        with _w.catch_warnings():
            _w.simplefilter("ignore")
            gw = load_torch(ep, workspace=prof.workspace_bytes) if prof.workspace_bytes else g
        with_ws = peak_memory(gw, list(gw.ops))
        r = optimize_order(gw, method="heuristic", time_limit_s=5)
        measured_opt, _ = _measured_peak(g, profile_torch(ep, args, memory=True, repeats=1, threads=threads,
                                                          order=r.order))
        ok = abs(with_ws / measured - 1) <= TARGETS["peak"] and measured_opt <= measured
        ok_all &= ok
        rows.append([label, mb(measured), mb(bare), _fmt(bare / measured), mb(with_ws), _fmt(with_ws / measured),
                     mb(r.peak_bytes), mb(measured_opt), f"{measured_opt / measured - 1:+.1%}", bl.verdict(ok)])
    return rows, ok_all


if __name__ == "__main__":
    sys.exit(main())
