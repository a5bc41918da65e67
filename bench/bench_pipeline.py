"""Benchmark hetsched.pipeline against torch.distributed.pipelining (same run, same machine).

    .venv/bin/python bench/bench_pipeline.py            # full: includes torch's full constructor once (~minutes)
    .venv/bin/python bench/bench_pipeline.py --quick    # skip torch's full constructor

Case 1 (issue 6): p=64 ranks, v=8 chunks, m=1024 micro-batches (2 * p * v * m = 1,048,576 actions).
Targets: generation < 1 s; validation + simulation < 3 s.

Case 2 (issue 18): GPT-2 small and BERT-base training graphs split over 4 and 8 heterogeneous ranks
of ``data/systems/pipeline_a100_v100_u280.yaml`` (A100, V100, U280 over PCIe). Targets: stage costs
and the best split < 1 s each; the bottleneck within 1 % of the exhaustive optimum where the splits
can be enumerated (layer units). Baselines priced on the same machine: DeepSpeed's
``PipelineModule`` partition methods ``uniform`` (equal layers per stage) and ``parameters`` (equal
parameter bytes per stage), both blind to device speed (written here from DeepSpeed's documented
behaviour).

Case 3: every torch 2.13 schedule equal to torch on its golden grid (p 2..8, v 1..4, m 1..24),
from ``tests/data/pipeline_torch_golden.json.gz``.
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
sys.path.insert(0, str(ROOT / "bench"))

import benchlib  # noqa: E402

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


MODELS = ("gpt2_small_train_b8_s1024", "bert_base_train_b8_s128")
SYSTEM = "pipeline_a100_v100_u280"


def _balanced_cuts(weights, S):
    """Cut points giving each of S contiguous stages about 1/S of ``weights`` (DeepSpeed-style, speed-blind)."""
    import numpy as np

    cum = np.concatenate([[0.0], np.cumsum(weights)])
    n = len(weights)
    cuts = [0]
    for s in range(1, S):
        j = int(np.searchsorted(cum, cum[-1] * s / S))
        cuts.append(min(max(j, cuts[-1] + 1), n - (S - s)))
    return cuts + [n]


def model_splits():
    """Case 2: time of stage costs and of the best split; DP vs exhaustive; speed-blind baselines."""
    from hetsched.pipeline import default_devices, exhaustive_split, split_stages, stage_costs
    from hetsched.whatif import resolve_graph, resolve_system

    sys_ = resolve_system(SYSTEM)
    rows, ok_time, ok_gap = [], True, True
    for name in MODELS:
        g = resolve_graph(name)
        for p in (4, 8):
            devs = default_devices(sys_, p)
            t_split = benchlib.timeit(lambda: split_stages(g, sys_, devices=devs, p=p), repeat=5)
            t_costs = benchlib.timeit(lambda: stage_costs(g, sys_, devices=devs, p=p), repeat=5)
            sp = t_split.result
            units = sp.units
            uniform = split_stages(g, sys_, devices=devs, p=p, cuts=_balanced_cuts([1.0] * units.n, p)).metrics["bottleneck_s"]
            params = split_stages(g, sys_, devices=devs, p=p, cuts=_balanced_cuts(list(units.weight_bytes + 1e-9), p)).metrics["bottleneck_s"]
            lay = split_stages(g, sys_, devices=devs, p=p, units="layer")
            t_ex = time.perf_counter()
            ex, _ = exhaustive_split(g, sys_, devices=devs, p=p, units="layer", max_splits=2_000_000)
            t_ex = time.perf_counter() - t_ex
            gap = lay.metrics["bottleneck_s"] / ex - 1
            ok_time &= t_split.median_s < 1.0 and t_costs.median_s < 1.0
            ok_gap &= gap <= 0.01
            b = sp.metrics["bottleneck_s"]
            rows.append([name.split("_train")[0], p, ", ".join(devs), units.n, benchlib.fmt_s(t_costs.median_s), benchlib.fmt_s(t_split.median_s),
                         f"{b * 1e3:.2f} ms", f"{uniform * 1e3:.2f} ms ({uniform / b:.2f}x)", f"{params * 1e3:.2f} ms ({params / b:.2f}x)",
                         f"{lay.metrics['n_units']:.0f} layers: {lay.metrics['bottleneck_s'] * 1e3:.2f} ms vs {ex * 1e3:.2f} ms ({gap:+.2%}, enumerated in {benchlib.fmt_s(t_ex)})"])
    return rows, ok_time, ok_gap


def torch_grid():
    """Case 3: every case of the golden file compared (the test does the same without timing)."""
    import gzip
    import json
    import re

    from hetsched import pipeline as pp

    doc = json.loads(gzip.decompress((ROOT / "tests" / "data" / "pipeline_torch_golden.json.gz").read_bytes()))
    make = {"ScheduleInterleaved1F1B": lambda c: pp.interleaved_1f1b(c["p"], c["v"], c["m"], grouping="torch"),
            "ScheduleInterleavedZeroBubble": lambda c: pp.interleaved_zero_bubble(c["p"], c["v"], c["m"]),
            "ScheduleLoopedBFS": lambda c: pp.looped_bfs(c["p"], c["v"], c["m"]),
            "ScheduleZBVZeroBubble": lambda c: pp.zbv(c["p"], c["m"]),
            "ScheduleDualPipeV": lambda c: pp.dualpipev(c["p"], c["m"]),
            "ScheduleGPipe": lambda c: pp.gpipe(c["p"], c["m"]),
            "Schedule1F1B": lambda c: pp.one_f_one_b(c["p"], c["m"])}

    def compute(order):
        out = []
        for row in order:
            toks = []
            for tok in row.split():
                mt = re.match(r"^\((.*)\)OVERLAP_F_B$", tok)
                toks += mt.group(1).split(";") if mt else ([] if "REDUCE_GRAD" in tok else [tok])
            out.append(" ".join(toks))
        return out

    counts = {}
    for c in doc["cases"]:
        ours = make[c["schedule"]](c).to_text()
        theirs = compute(c["order"])
        if c["schedule"] == "Schedule1F1B":  # torch's IR numbers the last rank's forwards from 1
            ours[-1] = " ".join(re.sub(r"F(\d+)$", lambda x: f"F{int(x.group(1)) + 1}", a) for a in ours[-1].split())
        same, n = counts.get(c["schedule"], (0, 0))
        counts[c["schedule"]] = (same + (ours == theirs), n + 1)
    return counts, doc["torch_version"]


def fmt(d):
    return f"{d['median_s']:.3f} s (min {d['min_s']:.3f}, cpu {d['cpu_median_s']:.3f}, {d['runs']} runs)"


def main() -> int:
    quick = "--quick" in sys.argv
    if "--models-only" in sys.argv:  # just cases 2 and 3 (quick to re-check)
        rows, ok_time, ok_gap = model_splits()
        print(benchlib.table(["model", "p", "devices", "op units", "stage_costs", "split_stages", "bottleneck", "uniform", "parameters", "vs exhaustive"], rows))
        print(ok_time, ok_gap, torch_grid())
        return 0
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
    split_rows, ok_time, ok_gap = model_splits()
    lines += [
        "",
        "## Real models on heterogeneous ranks (issue 18)",
        "",
        f"System `{SYSTEM}`; ranks get the system's default device plan. Times: medians of 5 runs, the graph loaded once "
        "(pricing every op on every rank's device is inside both times). Baselines are DeepSpeed's speed-blind partition "
        "methods priced on the same machine (ratio: their bottleneck over ours).",
        "",
        benchlib.table(["model", "p", "devices", "op units", "stage_costs", "split_stages", "bottleneck (DP)", "uniform layers",
                        "equal parameters", "DP vs exhaustive (layer units)"], split_rows),
        "",
        f"- Stage costs and the best split under 1 s each: {benchlib.verdict(ok_time)}",
        f"- Bottleneck within 1% of the exhaustive optimum (layer units, every split enumerated): {benchlib.verdict(ok_gap)}",
    ]
    counts, tv = torch_grid()
    grid_ok = all(a == b for a, b in counts.values())
    lines += [
        "",
        f"## Every torch {tv} schedule on its golden grid (p 2..8, v 1..4, m 1..24)",
        "",
        benchlib.table(["torch class", "cases equal / cases torch accepts"], [[k, f"{a} / {b}"] for k, (a, b) in sorted(counts.items())]),
        "",
        "Schedule1F1B is compared with torch's own last-rank numbering quirk applied (its IR numbers that rank's forwards from 1).  ",
        f"- Equal on the whole grid: {benchlib.verdict(grid_ok)}",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
