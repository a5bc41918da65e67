"""Generate golden per-rank compute orders from torch.distributed.pipelining (the torch oracle).

Run with the project venv (torch is an optional extra, pinned below)::

    .venv/bin/python scripts/gen_torch_golden.py     # writes tests/data/pipeline_torch_golden.json.gz
                                                     # and the CSV dumps tests/data/torch_dump_*.csv
    .venv/bin/python scripts/gen_torch_golden.py --synth   # only torch's lowering of a synthesized schedule

Every schedule class of torch 2.13 is built over the whole grid p = 2..8, v = 1..4, m = 1..24
(``v`` only where the class takes it: the single-stage classes have one stage per rank, the V
classes two). Each class is constructed with *mock stages* (plain objects carrying the attributes
the constructors read: ``group_size``, ``group_rank``, ``num_stages``, ``stage_index``,
``submod``...), so no process group, no GPU and no model are needed. The multi-stage constructors
run torch's own lowering and validation (``_prepare_schedule_with_comms``), so an entry here is a
schedule torch accepts; what torch refuses is recorded under ``"refused"`` with torch's message.

What is dumped is ``pipeline_order`` (the compute IR, per rank) with the ``None`` padding removed,
each action in torch's own text (``"2F0"``, ``"(0F5;5B2)OVERLAP_F_B"``, ``"0REDUCE_GRAD"``): the
tests compare compute orders (an ``OVERLAP_F_B`` is its sub-actions in order) and check the rest.

Known torch 2.13 quirk, kept as torch has it: ``Schedule1F1B``'s IR numbers the last rank's
forwards from micro-batch 1 (its steady loop increments before the first use); its runtime
(``_step_microbatches``) runs micro-batch 0 first. The test says exactly that.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from pathlib import Path
from types import SimpleNamespace

TORCH_VERSION = "2.13.0"
DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
OUT = DATA / "pipeline_torch_golden.json.gz"

P_RANGE = range(2, 9)
V_RANGE = range(1, 5)
M_RANGE = range(1, 25)
# class name -> how its stages sit on rank 0: "loop" (v stages r, r + p, ...), "v" (2 stages r, 2p-1-r), "single"
CLASSES = {
    "ScheduleGPipe": "single",
    "Schedule1F1B": "single",
    "ScheduleInterleaved1F1B": "loop",
    "ScheduleLoopedBFS": "loop",
    "ScheduleInterleavedZeroBubble": "loop",
    "ScheduleZBVZeroBubble": "v",
    "ScheduleDualPipeV": "v",
}


def _mock_stages(p: int, stage_ids: list[int], n: int) -> list[SimpleNamespace]:
    return [
        SimpleNamespace(group_size=p, group_rank=0, num_stages=n, stage_index=s, is_first=s == 0, is_last=s == n - 1,
                        submod=None, stage_index_to_group_rank={})
        for s in stage_ids
    ]


def _order(sched) -> list[str]:
    # one space-separated string per rank keeps the file small and diffable
    return [" ".join(str(a) for a in sched.pipeline_order[r] if a is not None) for r in sorted(sched.pipeline_order)]


def build(S, cls_name: str, p: int, v: int, m: int):
    cls = getattr(S, cls_name)
    style = CLASSES[cls_name]
    if style == "single":
        return cls(_mock_stages(p, [0], p)[0], m)
    if style == "v":
        return cls(_mock_stages(p, [0, 2 * p - 1], 2 * p), m)
    return cls(_mock_stages(p, [c * p for c in range(v)], p * v), m)


def _write_csv(path: Path, rows) -> None:
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def main() -> int:
    import torch
    from torch.distributed.pipelining import schedules as S

    if not torch.__version__.startswith(TORCH_VERSION):
        print(f"torch {torch.__version__} found; the golden file is pinned to {TORCH_VERSION}", file=sys.stderr)
        return 1
    cases: list[dict] = []
    refused: list[dict] = []
    for cls_name, style in CLASSES.items():
        vs = {"single": [1], "v": [2]}.get(style, list(V_RANGE))
        for p in P_RANGE:
            for v in vs:
                for m in M_RANGE:
                    try:
                        sched = build(S, cls_name, p, v, m)
                    except (ValueError, AssertionError, RuntimeError) as exc:
                        refused.append({"schedule": cls_name, "p": p, "v": v, "m": m, "error": str(exc).splitlines()[0]})
                        continue
                    cases.append({"schedule": cls_name, "p": p, "v": v, "m": m, "order": _order(sched)})
    doc = {
        "generator": "scripts/gen_torch_golden.py",
        "torch_version": torch.__version__,
        "grid": {"p": [P_RANGE.start, P_RANGE.stop - 1], "v": [V_RANGE.start, V_RANGE.stop - 1], "m": [M_RANGE.start, M_RANGE.stop - 1]},
        "note": "per-rank pipeline_order (None padding removed) of torch.distributed.pipelining schedules, torch's action text",
        "cases": cases,
        "refused": refused,
    }
    DATA.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same torch gives the same bytes
    with gzip.GzipFile(OUT, "wb", mtime=0) as f:
        f.write((json.dumps(doc, separators=(",", ":")) + "\n").encode())
    # torch's own CSV dumps, as torch writes them (csv.writer rows of actions), for the reader tests
    g = build(S, "ScheduleGPipe", 3, 1, 4)
    _write_csv(DATA / "torch_dump_gpipe_p3_m4.csv", [g.pipeline_order[r] for r in sorted(g.pipeline_order)])
    one = build(S, "Schedule1F1B", 3, 1, 5)
    _write_csv(DATA / "torch_dump_1f1b_p3_m5.csv", [one.pipeline_order[r] for r in sorted(one.pipeline_order)])
    il = build(S, "ScheduleInterleaved1F1B", 2, 2, 4)
    il._dump_csv(str(DATA / "torch_dump_interleaved_p2_v2_m4_comms.csv"), format="compute_comms")
    dp = build(S, "ScheduleDualPipeV", 3, 2, 7)
    dp._dump_csv(str(DATA / "torch_dump_dualpipev_p3_m7.csv"), format="compute_only")
    print(f"wrote {len(cases)} cases, {len(refused)} refused -> {OUT} ({OUT.stat().st_size:,} bytes)")
    synth_dump(S)
    return 0


#: the synthesized schedule whose torch lowering is dumped: heterogeneous stages, 1F1B's memory
SYNTH = {"costs": {"f_s": [1.0, 1.5, 0.7, 1.2], "b_s": [2.0, 3.5, 1.5, 2.5], "w_s": [0.8, 1.5, 0.5, 1.0], "activation_bytes": 1.0},
         "p": 4, "m": 8, "memory_cap_bytes": "1f1b", "method": "heuristic"}


def synth_dump(S) -> None:
    """torch's lowering (sends, receives, gradient reductions) of a schedule hetsched synthesized:
    ``torch_dump_synth_p4_m8_comms.csv``, and the instance in ``torch_dump_synth_p4_m8.json``."""
    import tempfile

    sys.path.insert(0, str(DATA.parents[1]))
    from hetsched.pipeline import StageCosts, synthesize, to_torch_csv

    kw = {k: v for k, v in SYNTH.items() if k != "costs"}
    r = synthesize(StageCosts(**SYNTH["costs"]), **kw)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "synth.csv"
        to_torch_csv(r, path)
        rt = S._PipelineScheduleRuntime(_mock_stages(SYNTH["p"], [0], SYNTH["p"]), SYNTH["m"])
        rt._load_csv(str(path), format="compute_only")   # torch's validation and lowering
    rt._dump_csv(str(DATA / "torch_dump_synth_p4_m8_comms.csv"), format="compute_comms")
    (DATA / "torch_dump_synth_p4_m8.json").write_text(json.dumps(SYNTH, indent=1) + "\n")
    print(f"wrote torch's lowering of the synthesized schedule ({r.metrics['makespan_s']:.4g} s) -> torch_dump_synth_p4_m8_comms.csv")


if __name__ == "__main__":
    if "--synth" in sys.argv:
        from torch.distributed.pipelining import schedules as _S

        synth_dump(_S)
        raise SystemExit(0)
    raise SystemExit(main())
