"""Run pipeline schedules on local gloo ranks with torch.distributed.pipelining (a test harness).

``run(jobs, world)`` spawns ``world`` processes (torch.multiprocessing, gloo on 127.0.0.1 with a
free port); every process runs every job in turn: a tiny model of ``S`` stages (``Linear`` +
``Tanh``, seeded, so every job starts from the same weights), either loaded from a compute-only
CSV into ``_PipelineScheduleRuntime`` (``_load_csv(path, format="compute_only")``: torch lowers it
to sends and receives) or run by torch's own ``ScheduleGPipe``. Each rank records the compute
actions its stages actually ran (``F``; ``B`` for a full backward, ``I`` for an input-gradient
backward; ``W``), in order, and the gradients of its stages' parameters; ``run`` returns, per job,
``{"order": {rank: [...]}, "grads": {stage: [tensors]}}``. :func:`reference_grads` is the same model
run in one process on the whole batch.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

D = 8  # width of every layer
BATCH_PER_MB = 2


def _model(S: int):
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(D, D), nn.Tanh()) for _ in range(S)]


def _data(m: int):
    import torch

    g = torch.Generator().manual_seed(1)
    return torch.randn(m * BATCH_PER_MB, D, generator=g), torch.randn(m * BATCH_PER_MB, D, generator=g)


def reference_grads(S: int, m: int) -> dict[int, list]:
    """Gradients of the whole model on the whole batch (mean squared error): what every schedule must give."""
    import torch.nn as nn

    mods = _model(S)
    x, y = _data(m)
    h = x
    for mod in mods:
        h = mod(h)
    nn.MSELoss()(h, y).backward()
    return {s: [q.grad.clone() for q in mod.parameters()] for s, mod in enumerate(mods)}


def _worker(rank: int, world: int, port: int, jobs: list[dict], out: str) -> None:
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import ScheduleGPipe, _PipelineScheduleRuntime

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    results = {}
    try:
        for job in jobs:
            placement, m = job["placement"], job["m"]
            S = len(placement)
            mods = _model(S)
            mine = [s for s in range(S) if placement[s] == rank]
            stages = [PipelineStage(mods[s], s, S, torch.device("cpu")) for s in mine]
            if job["kind"] == "gpipe":
                sched = ScheduleGPipe(stages[0], m, loss_fn=nn.MSELoss())
            else:
                sched = _PipelineScheduleRuntime(stages, m, loss_fn=nn.MSELoss())
                sched._load_csv(job["csv"], format="compute_only")
            done: list[str] = []
            for st in stages:  # record what actually runs, in order
                f0, b0, w0 = st.forward_one_chunk, st.backward_one_chunk, st.backward_weight_one_chunk

                def fwd(mb, *a, _s=st.stage_index, _f=f0, **k):
                    done.append(f"{_s}F{mb}")
                    return _f(mb, *a, **k)

                def bwd(mb, *a, _s=st.stage_index, _f=b0, **k):
                    done.append(f"{_s}{'B' if k.get('full_backward', True) else 'I'}{mb}")
                    return _f(mb, *a, **k)

                def wgt(mb, *a, _s=st.stage_index, _f=w0, **k):
                    done.append(f"{_s}W{mb}")
                    return _f(mb, *a, **k)

                st.forward_one_chunk, st.backward_one_chunk, st.backward_weight_one_chunk = fwd, bwd, wgt
            x, y = _data(m)
            first, last = 0 in mine, S - 1 in mine
            if first and last:
                sched.step(x, target=y)
            elif first:
                sched.step(x)
            elif last:
                sched.step(target=y)
            else:
                sched.step()
            results[job["name"]] = {"order": done, "grads": {s: [q.grad.clone() for q in mods[s].parameters()] for s in mine}}
            dist.barrier()
        torch.save(results, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(jobs: list[dict], world: int) -> dict[str, dict]:
    """Run ``jobs`` on ``world`` local ranks; per job name: ``order`` per rank and ``grads`` per stage."""
    import torch
    import torch.multiprocessing as tmp

    with tempfile.TemporaryDirectory() as out:
        tmp.spawn(_worker, args=(world, _free_port(), jobs, out), nprocs=world, join=True)
        per_rank = [torch.load(Path(out) / f"rank{r}.pt") for r in range(world)]
    res: dict[str, dict] = {}
    for job in jobs:
        order = {r: per_rank[r][job["name"]]["order"] for r in range(world)}
        grads = {s: g for r in range(world) for s, g in per_rank[r][job["name"]]["grads"].items()}
        res[job["name"]] = {"order": order, "grads": grads}
    return res
