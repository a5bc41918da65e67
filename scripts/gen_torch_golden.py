"""Generate golden per-rank compute orders from torch.distributed.pipelining (the torch oracle).

Run with the project venv (torch is an optional extra, pinned below)::

    .venv/bin/python scripts/gen_torch_golden.py          # writes tests/data/pipeline_torch_golden.json

Each schedule class is constructed with *mock stages* (plain objects carrying the attributes the
constructors read: ``group_size``, ``group_rank``, ``num_stages``, ``stage_index``, ``submod``...), so
no process group, no GPU and no model are needed. The constructor runs torch's own lowering and
validation (``_prepare_schedule_with_comms``), so an entry here is a schedule torch accepts. What is
dumped is ``pipeline_order`` (compute-only IR, per rank) with the ``None`` padding removed: the compute
*order* of each rank, in torch's text form (``"2F0"``).

torch refuses some ``(p, v, m)`` (Interleaved1F1B needs ``m % max(1, m // p) == 0``); those are
recorded under ``"refused"`` with torch's message, so the tests can assert that hetsched refuses them
too with ``grouping="torch"``.

Schedule1F1B is deliberately not used as an oracle: in torch 2.13 its compute-only IR lists the last
rank one micro-batch off (a known quirk), so it is not a trustworthy reference.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

TORCH_VERSION = "2.13.0"
OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "pipeline_torch_golden.json"

# (class name, stages per rank list, style)
P_RANGE = range(2, 7)
V_RANGE = range(1, 5)


def _mock_stages(p: int, rank: int, stage_ids: list[int]) -> list[SimpleNamespace]:
    n = p * len(stage_ids)
    return [
        SimpleNamespace(
            group_size=p,
            group_rank=rank,
            num_stages=n,
            stage_index=s,
            is_first=s == 0,
            is_last=s == n - 1,
            submod=None,
            stage_index_to_group_rank={},
        )
        for s in stage_ids
    ]


def _order(sched) -> list[str]:
    # one space-separated string per rank keeps the committed file small and diffable
    return [" ".join(str(a) for a in sched.pipeline_order[r] if a is not None) for r in sorted(sched.pipeline_order)]


def main() -> int:
    import torch
    from torch.distributed.pipelining import schedules as S

    if not torch.__version__.startswith(TORCH_VERSION):
        print(f"torch {torch.__version__} found; the golden file is pinned to {TORCH_VERSION}", file=sys.stderr)
        return 1
    cases: list[dict] = []
    refused: list[dict] = []
    for p in P_RANGE:
        for m in range(1, 4 * p + 1):
            for v in V_RANGE:
                # loop-style classes: rank r holds stages r, r + p, ...
                for cls_name in ("ScheduleInterleaved1F1B", "ScheduleLoopedBFS"):
                    if cls_name == "ScheduleLoopedBFS" and v > 2:
                        continue
                    cls = getattr(S, cls_name)
                    try:
                        sched = cls(_mock_stages(p, 0, [c * p for c in range(v)]), m)
                    except (ValueError, AssertionError, RuntimeError) as exc:
                        refused.append({"schedule": cls_name, "p": p, "v": v, "m": m, "error": str(exc).splitlines()[0]})
                        continue
                    cases.append({"schedule": cls_name, "p": p, "v": v, "m": m, "order": _order(sched)})
            # V-style zero bubble: exactly two stages per rank
            try:
                sched = S.ScheduleZBVZeroBubble(_mock_stages(p, 0, [0, 2 * p - 1]), m)
            except (ValueError, AssertionError, RuntimeError) as exc:
                refused.append({"schedule": "ScheduleZBVZeroBubble", "p": p, "v": 2, "m": m, "error": str(exc).splitlines()[0]})
            else:
                cases.append({"schedule": "ScheduleZBVZeroBubble", "p": p, "v": 2, "m": m, "order": _order(sched)})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "generator": "scripts/gen_torch_golden.py",
        "torch_version": torch.__version__,
        "note": "per-rank compute order (pipeline_order without None padding) of torch.distributed.pipelining schedules",
        "cases": cases,
        "refused": refused,
    }
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {len(cases)} cases, {len(refused)} refused -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
