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

Case 4 (issue 31, ``--synth-only`` runs just this one and splices it into the page): schedule
synthesis. Exact: every case of a small grid (p 2..4, m p..8, random heterogeneous costs and the
real models' splits, with and without 1F1B's memory) proven optimal within 60 s, and equal to
exhaustive enumeration on tiny cases. Heuristic: GPT-2 and BERT over 4 and 8 ranks at m = p..4p,
never slower than the best named schedule, within 3% of the optimum where known (closing at least
half of the best named schedule's gap), p = 8, m = 32 in < 5 s, and under 1F1B's per-rank memory
never above it and never slower than 1F1B.
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


# ---- schedule synthesis (issue 31) --------------------------------------------------------------

SYNTH_HEADING = "## Schedule synthesis: the best schedule for this model on this machine (issue 31)"


def _random_costs(p, seed):
    import numpy as np

    from hetsched.pipeline import StageCosts

    rng = np.random.default_rng(seed)
    f = rng.uniform(0.5, 2.0, p)
    b = f * rng.uniform(1.5, 2.5, p)
    return StageCosts(f_s=f, b_s=b, w_s=b * rng.uniform(0.3, 0.6, p), activation_bytes=1e6, held_bytes=rng.uniform(1, 3, p) * 1e6)


def synth_exact():
    """The small grid: p 2..4, m p..8, split or not, no cap or 1F1B's, random heterogeneous costs and
    the real models' splits; every case solved by synthesize(method="milp", time_limit_s=60)."""
    import time as _t

    from hetsched.pipeline import exhaustive_synthesis, model_costs, synthesize

    cases = []  # (costs label, costs, p, v, placement, m, splits, caps)
    for p in (2, 3, 4):
        for m in sorted({p, 2 * p, 8} & set(range(p, 9))):
            cases.append((f"random(seed {p})", _random_costs(p, p), p, 1, "loop", m, (False, True), (None, "1f1b")))
    for name in MODELS:
        for m in (4, 8):
            cases.append((name.split("_train")[0], model_costs(name, SYSTEM, p=4, m=m), 4, 1, "loop", m, (False, True), (None, "1f1b")))
    # two stages per rank, looped and in a V (zero-bubble space), capped at the reference schedule's memory
    for p in (2, 3, 4):
        for m in sorted({p, 2 * p} - {8}):
            for placement, ref in (("loop", "interleaved_1f1b"), ("v", "zbv")):
                cases.append((f"random(seed {10 + p})", _random_costs(2 * p, 10 + p), p, 2, placement, m, (True,), (None, ref)))
    rows, ok = [], True
    for label, c, p, v, placement, m, splits, caps in cases:
        for split in splits:
            for cap in caps:
                t0 = _t.perf_counter()
                r = synthesize(c, p=p, v=v, m=m, placement=placement, split_backward=split, memory_cap_bytes=cap, method="milp",
                               time_limit_s=60)
                dt = _t.perf_counter() - t0
                by = "MILP" if r.solver else "bound met"
                proven = r.status == "optimal" and dt < 60
                ok &= proven
                rows.append([label, p, v, placement, m, "I/W" if split else "B", cap or "-", r.schedule.n_actions,
                             f"{r.metrics.get('milp_binaries', 0):.0f}", r.status, by, benchlib.fmt_s(dt),
                             f"{r.metrics['makespan_s'] / r.metrics['best_named_makespan_s'] - 1:+.2%}"])
    # against exhaustive enumeration of every order (no micro-batch-order assumption), where it is possible
    ex_rows, ex_ok = [], True
    for p, m, split in ((2, 2, True), (2, 3, False), (3, 2, False), (3, 2, True)):
        for seed in range(3):
            c = _random_costs(p, 100 + seed)
            for cap in (None, "1f1b"):
                e = exhaustive_synthesis(c, p=p, m=m, split_backward=split, memory_cap_bytes=cap)
                r = synthesize(c, p=p, m=m, split_backward=split, memory_cap_bytes=cap, method="milp", time_limit_s=60)
                same = abs(e.metrics["makespan_s"] - r.metrics["makespan_s"]) <= 1e-6 * e.metrics["makespan_s"]
                ex_ok &= same
                ex_rows.append([p, m, "I/W" if split else "B", seed, cap or "-", f"{e.metrics['n_evaluations']:.0f}",
                                f"{e.metrics['makespan_s']:.6g}", f"{r.metrics['makespan_s']:.6g}", "equal" if same else "DIFFERENT"])
    return rows, ok, ex_rows, ex_ok


def synth_models():
    """Heuristic targets on GPT-2 and BERT over 4 and 8 heterogeneous ranks, m = p..4p, with and without 1F1B's memory."""
    import time as _t

    from hetsched.pipeline import model_costs, synthesize

    rows, named_rows = [], []
    ok = {"never_worse": True, "near_opt": True, "closes_half": True, "fast": True, "cap": True}
    fast = None
    for name in MODELS:
        short = name.split("_train")[0]
        for p in (4, 8):
            c = model_costs(name, SYSTEM, p=p, m=4 * p)
            for m in (p, 2 * p, 3 * p, 4 * p):
                for cap in (None, "1f1b"):
                    t = benchlib.timeit(lambda: synthesize(c, p=p, m=m, memory_cap_bytes=cap, method="heuristic"), repeat=3, warmup=0)
                    h = t.result
                    mk = h.metrics["makespan_s"]
                    nm = h.named.set_index("label")
                    fitting = nm[nm["fits"]]["makespan_s"]
                    best_named = float(fitting.min())
                    # the exact optimum: met bound, else the MILP within 60 s
                    if h.status == "optimal":
                        opt, how = mk, "bound met"
                    else:
                        x = synthesize(c, p=p, m=m, memory_cap_bytes=cap, method="milp", time_limit_s=60)
                        opt, how = (x.metrics["makespan_s"], "MILP") if x.status == "optimal" else (None, f"unknown (MILP bound {x.bound * 1e3:.2f} ms)")
                        bound = x.bound
                    ok["never_worse"] &= mk <= best_named * (1 + 1e-12)
                    if cap:
                        one = float(nm.loc["1f1b", "makespan_s"])
                        caps = h.params["memory_cap_bytes"]
                        ok["cap"] &= mk <= one * (1 + 1e-12) and all(
                            pk <= cp * (1 + 1e-9) for pk, cp in zip(h.per_rank["peak_activation_bytes"], caps))
                    if opt is not None:
                        near = mk <= opt * 1.03
                        closed = 1.0 if best_named <= opt * (1 + 1e-12) else (best_named - mk) / (best_named - opt)
                        ok["near_opt"] &= near
                        ok["closes_half"] &= closed >= 0.5
                        vs_opt, closed_s = f"{mk / opt - 1:+.2%}", f"{closed:.0%}"
                    else:
                        vs_opt, closed_s = f"<= {mk / bound - 1:+.2%} (vs bound)", "-"
                    if p == 8 and m == 32:
                        ok["fast"] &= t.median_s < 5.0
                        fast = t.median_s if fast is None else max(fast, t.median_s)
                    ref = opt if opt is not None else bound
                    rows.append([short, p, m, cap or "-", benchlib.fmt_s(t.median_s), f"{mk * 1e3:.2f}", how,
                                 f"{opt * 1e3:.2f}" if opt is not None else "-", vs_opt,
                                 f"{best_named * 1e3:.2f} ({fitting.idxmin()})", f"{best_named / ref - 1:+.2%}", closed_s])
                    named_rows.append([short, p, m, cap or "-"] + [
                        (f"{nm.loc[k, 'makespan_s'] / ref - 1:+.1%}" + ("" if nm.loc[k, "fits"] else " (over cap)")) if k in nm.index else "-"
                        for k in ("gpipe", "1f1b", "zb_h1", "zb_h2")])
    return rows, named_rows, ok, fast


def synth_section() -> list[str]:
    import time as _t

    t0 = _t.perf_counter()
    rows, ok_exact, ex_rows, ex_ok = synth_exact()
    t_exact = _t.perf_counter() - t0
    mrows, nrows, ok, fast = synth_models()
    t_models = _t.perf_counter() - t0 - t_exact
    load = os.getloadavg()
    lines = [
        "",
        SYNTH_HEADING,
        "",
        "Command: `.venv/bin/python bench/bench_pipeline.py --synth-only` (this section; the full run writes it too).  ",
        f"Machine: {benchlib.machine_line()}; load average at the end {', '.join(f'{x:.1f}' for x in load)} "
        "(shared machine: times are wall clock under that load).  ",
        f"Sections took {t_exact:.0f} s (exact) and {t_models:.0f} s (models).",
        "",
        "`synthesize(costs, p=, v=, m=, memory_cap_bytes=, split_backward=, method=)` searches per-rank orders of the Action IR with "
        "the simulator as its evaluator; the lower bound is `pipeline.lower_bound` (busiest rank's busy time + unavoidable fill and "
        "drain); gaps are `(makespan - reference) / reference`. `1f1b` cap: each rank's cap is 1F1B's per-rank activation peak.",
        "",
        "### Exact: the small grid (MILP, 60 s limit each)",
        "",
        "Caps: `1f1b`, `interleaved_1f1b`, `zbv`: each rank's cap is that schedule's per-rank peak on the same costs.",
        "",
        benchlib.table(["costs", "p", "v", "placement", "m", "backward", "cap", "actions", "binaries", "status", "proved by", "time",
                        "vs best named"], rows),
        "",
        f"- Proven optimal on every case of the small grid within 60 s each: {benchlib.verdict(ok_exact)}",
        "",
        "Against exhaustive enumeration of every valid order of every rank (no micro-batch-order assumption):",
        "",
        benchlib.table(["p", "m", "backward", "seed", "cap", "orders timed", "exhaustive", "MILP", ""], ex_rows),
        "",
        f"- Equals exhaustive enumeration wherever it is possible: {benchlib.verdict(ex_ok)}",
        "",
        f"### Heuristic on GPT-2 and BERT over 4 and 8 heterogeneous ranks (`{SYSTEM}`, the system's rank plan, v = 1, I/W)",
        "",
        "Optimum: the makespan when it meets the lower bound, else `method=\"milp\"` (60 s). Time: median of 3 heuristic runs.",
        "",
        benchlib.table(["model", "p", "m", "cap", "time", "heuristic (ms)", "optimum by", "optimum (ms)", "heuristic vs optimum",
                        "best named (ms)", "best named vs optimum", "gap closed"], mrows),
        "",
        "Every named schedule's gap to the optimum (to the bound where the optimum is unknown):",
        "",
        benchlib.table(["model", "p", "m", "cap", "gpipe", "1f1b", "zb_h1", "zb_h2"], nrows),
        "",
        f"- Makespan <= the best named schedule on every case: {benchlib.verdict(ok['never_worse'])}",
        f"- Within 3% of the exact optimum where known: {benchlib.verdict(ok['near_opt'])}",
        f"- Closes at least half of the best named schedule's gap to it: {benchlib.verdict(ok['closes_half'])}",
        f"- p = 8, m = 32 in < 5 s: {benchlib.verdict(ok['fast'])} (slowest median {fast:.2f} s)",
        f"- Under 1F1B's per-rank memory: never above the cap, never slower than 1F1B: {benchlib.verdict(ok['cap'])}",
    ]
    return lines, ok_exact and ex_ok and all(ok.values())


def fmt(d):
    return f"{d['median_s']:.3f} s (min {d['min_s']:.3f}, cpu {d['cpu_median_s']:.3f}, {d['runs']} runs)"


def main() -> int:
    quick = "--quick" in sys.argv
    if "--synth-only" in sys.argv:  # just the synthesis section, spliced into the existing page
        lines, ok = synth_section()
        old = OUT.read_text() if OUT.exists() else ""
        head = old.split("\n" + SYNTH_HEADING)[0].rstrip("\n") if old else "# Pipeline schedules"
        OUT.write_text(head + "\n" + "\n".join(lines) + "\n")
        print("\n".join(lines))
        return 0 if ok else 1
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
    synth_lines, synth_ok = synth_section()
    lines += synth_lines
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if synth_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
