"""Ground truth for pipelines: local processes talking over ``torch.distributed`` (gloo), measured.

The pipeline family simulates ranks that send activations and gradients to each other. This module
measures, on this machine, what those messages and a real pipelined run cost:

* :func:`run_ranks` starts ``world`` local processes in one gloo process group (a file store in a
  temporary directory, no network set-up) and runs a function on each: the harness of the rest;
* :func:`measure_p2p` measures a **ping-pong** (one message there and back, for the one-way time of
  a lone message) and a **stream** (``k`` messages sent back to back, for what each further message
  in flight adds) over a sweep of message sizes, and :func:`fit_link` fits
  ``time = latency + bytes / bandwidth`` to each (least squares on the relative error, so that a
  4-byte message counts as much as a 64 MiB one). The ping-pong fit is the link (its latency, its
  bandwidth); the stream's intercept is the **per-message overhead** -- set-up every message pays
  even when others are in flight. :meth:`P2PCalibration.p2p` is the pipeline simulator's
  :class:`~hetsched.pipeline.P2P` (a lone message costs the ping-pong time: ``latency_s`` is the
  rest of the one-way intercept, ``overhead_s`` the per-message part), :meth:`P2PCalibration.link`
  the :class:`~hetsched.system.Link` a system YAML carries (``attrs["overhead_s"]``);
* :func:`measure_pipeline` runs a real ``torch.distributed.pipelining`` schedule (GPipe, 1F1B,
  interleaved 1F1B, the zero-bubble schedules torch runs on CPU) of a model split into stages on
  ``p`` local ranks and returns the measured step time, each stage's forward and backward time
  measured alone, the per-action runtime overhead of torch's schedule loop, and torch's own action
  order (:func:`schedule_of`): what :func:`predict_pipeline` feeds the simulator with, so that the
  simulated makespan and the real one can be set side by side (``bench/bench_calibration.py
  --only pipeline``).

Every rank runs ``threads`` torch threads (default 1). Ranks beyond the machine's cores share them:
the measured run then includes that sharing; :func:`predict_pipeline` says so (``cores``).

>>> lat, bw = fit_link([1e3, 1e6], [2e-5 + 1e3 / 1e9, 2e-5 + 1e6 / 1e9])
>>> round(lat * 1e6, 6), round(bw / 1e9, 6)
(20.0, 1.0)
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .errors import HetschedError
from .results import Result, StepLog
from .system import Link
from .timeline import make_timeline

__all__ = ["run_ranks", "measure_p2p", "fit_link", "P2PCalibration", "DEFAULT_P2P_SIZES",
           "measure_pipeline", "PipelineRun", "predict_pipeline", "shared_cores_makespan", "schedule_of", "TORCH_SCHEDULES",
           "mlp_stages"]

#: Message sizes of the sweep: 4 B to 16 MiB, every power of 4.
DEFAULT_P2P_SIZES: tuple[int, ...] = tuple(4 ** k for k in range(1, 13))


# ---------------------------------------------------------------------------- the harness
def _entry(rank: int, world: int, tmp: str, fn: Callable, args: tuple, threads: int) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=rank, world_size=world)
    try:
        try:
            out = fn(rank, world, *args)
        except BaseException:  # the whole chain (torch wraps a stage's error): what the caller reports
            import traceback

            Path(tmp, f"rank{rank}.err").write_text(traceback.format_exc())
            raise
        dist.barrier()
    finally:
        dist.destroy_process_group()
    Path(tmp, f"rank{rank}.json").write_text(json.dumps(out))


def run_ranks(fn: Callable, world: int, *args: Any, threads: int = 1, timeout_s: float = 600) -> list[Any]:
    """Run ``fn(rank, world, *args)`` in ``world`` local processes of one gloo group; their results.

    ``fn`` must be importable (a module-level function: the processes are spawned) and return
    something JSON can hold. A rank that raises makes this raise a
    :class:`~hetsched.errors.HetschedError` carrying the rank's error.
    """
    import torch.multiprocessing as mp

    if isinstance(world, bool) or not isinstance(world, int) or world < 1:
        raise HetschedError(f"world must be a positive integer, got {world!r}", field="world")
    with tempfile.TemporaryDirectory(prefix="hetsched-dist-") as tmp:
        ctx = mp.start_processes(_entry, args=(world, tmp, fn, tuple(args), int(threads)), nprocs=world, join=False,
                                 start_method="spawn")
        t0 = time.monotonic()
        try:
            while not ctx.join(timeout=1.0):
                if time.monotonic() - t0 > timeout_s:
                    raise HetschedError(f"{world} ranks did not finish within {timeout_s:g} s", field="timeout_s")
        except mp.ProcessRaisedException as e:
            lines = str(e).strip().splitlines()
            # the exception line of the rank's traceback (its message may go on over more lines)
            i = max((k for k, ln in enumerate(lines) if ln and not ln[0].isspace() and ("Error" in ln or "Exception" in ln)),
                    default=len(lines) - 1)
            errs = sorted(Path(tmp).glob("rank*.err"))
            detail = errs[0].read_text().strip() if errs else ""
            raise HetschedError(f"a rank failed: {' '.join(x.strip() for x in lines[i:i + 3])}", field="ranks",
                                traceback=detail) from None
        except mp.ProcessExitedException as e:
            raise HetschedError(f"a rank exited without a result ({e}); a script that starts ranks must guard its "
                                "top level with if __name__ == '__main__' (the ranks are spawned and import it)",
                                field="ranks") from None
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.terminate()
        return [json.loads(Path(tmp, f"rank{r}.json").read_text()) for r in range(world)]


# ---------------------------------------------------------------------------- the link
def _p2p_worker(rank: int, world: int, sizes: Sequence[int], repeats: int, stream: int) -> dict:
    import torch
    import torch.distributed as dist

    peer = 1 - rank
    out: dict[str, list[float]] = {"pingpong": [], "stream": []}
    ack = torch.zeros(1, dtype=torch.uint8)
    for n in sizes:
        x = torch.zeros(int(n), dtype=torch.uint8)
        rtt = []
        for i in range(repeats + 2):  # two warm-ups: first-use buffers, connection set-up
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0:
                dist.send(x, peer)
                dist.recv(x, peer)
            else:
                dist.recv(x, peer)
                dist.send(x, peer)
            if i >= 2:
                rtt.append(time.perf_counter() - t0)
        out["pingpong"].append(statistics.median(rtt) / 2)
        bufs = [torch.zeros(int(n), dtype=torch.uint8) for _ in range(stream)]
        per = []
        for i in range(max(3, repeats // 2) + 1):
            dist.barrier()
            t0 = time.perf_counter()
            if rank == 0:
                works = [dist.isend(b, peer) for b in bufs]
                for w in works:
                    w.wait()
                dist.recv(ack, peer)
            else:
                works = [dist.irecv(b, peer) for b in bufs]
                for w in works:
                    w.wait()
                dist.send(ack, peer)
            if i >= 1:
                per.append(time.perf_counter() - t0)
        # k messages back to back plus one 1-byte acknowledgement (about the smallest ping-pong)
        out["stream"].append(max(0.0, statistics.median(per) - out["pingpong"][0]) / stream)
    return out


def fit_link(sizes: Sequence[float], times: Sequence[float]) -> tuple[float, float]:
    """``(latency_s, bandwidth_Bps)`` of ``time = latency + bytes / bandwidth``, least squares on the
    relative error (both >= 0; a flat curve gives an unbounded bandwidth, returned as ``inf``).

    >>> lat, bw = fit_link([4, 4096, 1 << 20], [1e-5, 1e-5 + 4096 / 2e9, 1e-5 + (1 << 20) / 2e9])
    >>> round(lat * 1e6, 3), round(bw / 1e9, 3)
    (10.0, 2.0)
    """
    n = np.asarray(sizes, float)
    t = np.asarray(times, float)
    ok = (t > 0) & np.isfinite(t)
    if ok.sum() < 2:
        raise HetschedError("fit_link needs at least two positive times", field="times")
    n, t = n[ok], t[ok]
    a = np.column_stack([1 / t, n / t])
    (lat, inv_bw), *_ = np.linalg.lstsq(a, np.ones_like(t), rcond=None)
    if inv_bw * n.max() <= 1e-9 * float(np.median(t)):  # no measurable size dependence: the latency alone
        return float(np.median(t)), math.inf
    if lat < 0:  # the intercept is below 0: the bandwidth alone through the origin
        return 0.0, float(np.sum(n * n / t**2) / np.sum(n / t))
    return float(lat), float(1 / inv_bw)


@dataclass(frozen=True, kw_only=True, eq=False)
class P2PCalibration(Result):
    """What :func:`measure_p2p` measured and fitted.

    Attributes
    ----------
    points : DataFrame
        ``size_bytes``, ``pingpong_s`` (one-way time of a lone message: half the round trip),
        ``stream_s`` (what each message adds when ``stream`` are sent back to back),
        ``fitted_pingpong_s``, ``fitted_stream_s``.
    metrics : dict
        ``latency_s``, ``bandwidth_Bps`` (the ping-pong fit), ``overhead_s`` (the stream's
        intercept, at most the latency), ``stream_bandwidth_Bps``, ``max_rel_error`` (of the
        ping-pong fit over the sweep), ``threads``, ``load_1min``.
    """

    points: pd.DataFrame = field(default_factory=pd.DataFrame)

    def link(self, src: str = "rank0", dst: str = "rank1") -> Link:
        """The measured link between two devices (``attrs``: ``overhead_s`` and where it came from)."""
        m = self.metrics
        bw = m["bandwidth_Bps"] if math.isfinite(m["bandwidth_Bps"]) else 1e18
        return Link(src, dst, bw, m["latency_s"], attrs={"overhead_s": m["overhead_s"],
                                                        "source": "hetsched.distributed.measure_p2p (gloo ping-pong)"})

    def p2p(self, *, lockstep: bool = False):
        """The pipeline simulator's :class:`~hetsched.pipeline.P2P`: a lone message costs the fitted
        ping-pong time, of which ``overhead_s`` is the per-message part."""
        from .pipeline import P2P

        m = self.metrics
        return P2P(latency_s=max(0.0, m["latency_s"] - m["overhead_s"]), bandwidth_Bps=m["bandwidth_Bps"],
                   overhead_s=m["overhead_s"], lockstep=lockstep)


def measure_p2p(sizes: Sequence[int] = DEFAULT_P2P_SIZES, *, repeats: int = 20, stream: int = 8, threads: int = 1,
                timeout_s: float = 600) -> P2PCalibration:
    """Measure the gloo link between two local processes (see the module notes).

    >>> c = measure_p2p([4, 4096, 65536], repeats=3, stream=2)
    >>> c.metrics["latency_s"] > 0 and c.metrics["bandwidth_Bps"] > 0, len(c.points)
    (True, 3)
    """
    sizes = [int(s) for s in sizes]
    if len(sizes) < 2 or any(s < 1 for s in sizes):
        raise HetschedError(f"sizes must be at least two positive byte counts, got {sizes!r}", field="sizes")
    if repeats < 1 or stream < 1:
        raise HetschedError("repeats and stream must be >= 1", field="repeats")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    t0 = time.perf_counter()
    res = run_ranks(_p2p_worker, 2, sizes, repeats, stream, threads=threads, timeout_s=timeout_s)[0]
    pp, st = np.asarray(res["pingpong"]), np.asarray(res["stream"])
    lat, bw = fit_link(sizes, pp)
    ok = st > 0
    s_lat, s_bw = fit_link(np.asarray(sizes)[ok], st[ok]) if ok.sum() >= 2 else (0.0, bw)
    over = min(s_lat, lat)
    n = np.asarray(sizes, float)
    fitted = lat + n / bw
    points = pd.DataFrame({"size_bytes": sizes, "pingpong_s": pp, "stream_s": st, "fitted_pingpong_s": fitted,
                           "fitted_stream_s": s_lat + n / s_bw})
    err = float(np.max(np.abs(fitted / pp - 1)))
    steps = StepLog()
    steps.add("pingpong", f"{len(sizes)} sizes", after=lat, accepted=True,
              reason=f"ping-pong over gloo, {sizes[0]} B to {sizes[-1] / 2**20:.3g} MiB: latency {lat * 1e6:.1f} us, "
                     f"bandwidth {bw / 1e9:.2f} GB/s (worst fit error {err:.0%})")
    steps.add("stream", f"{stream} messages back to back", after=over, accepted=True,
              reason=f"stream of {stream}: per-message overhead {over * 1e6:.1f} us, bandwidth {s_bw / 1e9:.2f} GB/s")
    metrics = {"latency_s": lat, "bandwidth_Bps": bw, "overhead_s": over, "stream_bandwidth_Bps": s_bw,
               "max_rel_error": err, "threads": float(threads), "load_1min": load,
               "duration_s": time.perf_counter() - t0}
    return P2PCalibration(points=points, metrics=metrics, steps=steps, timeline=make_timeline([]),
                          params={"sizes": sizes, "repeats": repeats, "stream": stream, "threads": threads})


# ---------------------------------------------------------------------------- real pipelines
#: hetsched schedule name -> (torch class name, stage style, split backward): the schedules torch
#: 2.13 runs with gloo on a CPU (``zbv`` is torch's ScheduleZBVZeroBubble, V-shaped stages).
TORCH_SCHEDULES: Mapping[str, tuple[str, str, bool]] = {
    "gpipe": ("ScheduleGPipe", "loop", False),
    "1f1b": ("Schedule1F1B", "loop", False),
    "interleaved_1f1b": ("ScheduleInterleaved1F1B", "loop", False),
    "interleaved_zero_bubble": ("ScheduleInterleavedZeroBubble", "loop", True),
    "zbv": ("ScheduleZBVZeroBubble", "v", True),
}


def mlp_stages(n_stages: int, *, layers: int = 16, width: int = 512, seed: int = 0) -> list[Any]:
    """A ``layers``-block MLP (``Linear(width, width)`` + ``ReLU`` each) split into ``n_stages``
    contiguous stages of equal depth (``layers`` must be a multiple of ``n_stages``): the model of
    :func:`measure_pipeline` (every rank builds the same weights from ``seed``)."""
    import torch

    if layers % n_stages:
        raise HetschedError(f"{layers} layers do not split into {n_stages} equal stages", field="layers")
    torch.manual_seed(seed)
    blocks = [torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU()) for _ in range(layers)]
    k = layers // n_stages
    return [torch.nn.Sequential(*blocks[s * k:(s + 1) * k]) for s in range(n_stages)]


def _stage_ids(rank: int, p: int, v: int, style: str) -> list[int]:
    if style == "v":
        return [rank, 2 * p - 1 - rank] if v == 2 else [rank]
    return [rank + c * p for c in range(v)]


def _loss(out, target):
    import torch

    return torch.nn.functional.mse_loss(out, target)


def _time_stage(mod: Any, x: Any, last: bool, repeats: int) -> dict[str, float]:
    """Forward, full backward and input-gradient time of one stage alone (medians); the weight
    gradient's is the rest of the backward."""
    import torch

    params = [p for p in mod.parameters()]
    f, b, i_ = [], [], []
    for k in range(repeats + 1):
        xi = x.detach().requires_grad_(True)
        t0 = time.perf_counter()
        out = mod(xi)
        if last:
            out = _loss(out, torch.zeros_like(out))
        t1 = time.perf_counter()
        g = None if last else torch.ones_like(out)
        torch.autograd.backward(out, g)
        t2 = time.perf_counter()
        out = mod(xi)
        if last:
            out = _loss(out, torch.zeros_like(out))
        t3 = time.perf_counter()
        torch.autograd.grad(out, [xi], g)
        t4 = time.perf_counter()
        if k:
            f.append(t1 - t0), b.append(t2 - t1), i_.append(t4 - t3)
        for q in params:
            q.grad = None
    # the weight gradient alone (autograd.grad over the parameters) recomputes the input gradients it
    # needs on the way: what a split backward's W adds is the full backward less its I
    fb, fi = statistics.median(b), statistics.median(i_)
    return {"f_s": statistics.median(f), "b_s": fb, "i_s": min(fi, fb), "w_s": max(fb - fi, 0.0)}


def _pipeline_worker(rank: int, world: int, spec: dict) -> dict:
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining import schedules as S

    p, v, m, mb, width = world, spec["v"], spec["m"], spec["microbatch"], spec["width"]
    cls, style, _ = TORCH_SCHEDULES[spec["schedule"]]
    n_stages = p * v
    mods = mlp_stages(n_stages, layers=spec["layers"], width=width, seed=spec["seed"])
    ids = _stage_ids(rank, p, v, style)
    x = torch.randn(m * mb, width)
    target = torch.zeros(m * mb, width)
    example = torch.randn(mb, width)
    stages = [PipelineStage(mods[s], s, n_stages, torch.device("cpu"))
              for s in ids]
    Sched = getattr(S, cls)
    sched = Sched(stages[0], m, loss_fn=_loss) if v == 1 and cls in ("ScheduleGPipe", "Schedule1F1B") else \
        Sched(stages, m, loss_fn=_loss)
    first, last = 0 in ids, n_stages - 1 in ids

    def step():
        kw = {}
        if last:
            kw["target"] = target
            kw["losses"] = []
        args = (x,) if first else ()
        sched.step(*args, **kw)

    times = []
    for k in range(spec["warmup"] + spec["steps"]):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        dist.barrier()  # the step ends when the last rank is done
        if k >= spec["warmup"]:
            times.append(time.perf_counter() - t0)
    order = None
    # a multi-stage schedule's own order; the single-stage ones (GPipe, 1F1B) are hetsched's equal
    # schedules (torch's golden grid; their ``pipeline_order`` is only a sketch that may name
    # micro-batches beyond m)
    po = getattr(sched, "pipeline_order", None) if isinstance(sched, S.PipelineScheduleMulti) else None
    if po is not None:
        order = [",".join("" if a is None else str(a) for a in po[r]) for r in range(p)]
    stage_times = {}
    for r in range(world):  # one rank at a time: each stage timed alone on the machine, as the simulator prices it
        if r == rank:
            stage_times = {s: _time_stage(mods[s], example, s == n_stages - 1, spec["stage_repeats"]) for s in ids}
        dist.barrier()
    return {"times": times, "order": order, "stage_times": {str(k): v for k, v in stage_times.items()}}


@dataclass(frozen=True, kw_only=True, eq=False)
class PipelineRun(Result):
    """A real ``torch.distributed.pipelining`` run (:func:`measure_pipeline`).

    Attributes
    ----------
    step_s : tuple of float
        Each measured step, from a barrier before it to one after it.
    stages : DataFrame
        Per global stage: ``stage, rank, f_s, b_s, i_s, w_s`` measured alone on its rank (median).
    order : list of str or None
        torch's own action order per rank (compute-only CSV rows), when the schedule has one.
    metrics : dict
        ``step_s`` (median), ``step_min_s``, ``step_max_s``, ``p``, ``v``, ``m``, ``activation_bytes``,
        ``threads``, ``load_1min``, ``cores`` (of this machine).
    """

    step_s: tuple = ()
    stages: pd.DataFrame = field(default_factory=pd.DataFrame)
    order: Any = None

    def schedule(self):
        """The hetsched :class:`~hetsched.pipeline.Schedule` of this run (torch's own order)."""
        return schedule_of(self.params["schedule"], self.metrics["p"], self.metrics["v"], self.metrics["m"], self.order)


def schedule_of(name: str, p: int, v: int, m: int, order: Sequence[str] | None = None):
    """The hetsched schedule torch ran: torch's own per-rank order when given (compute-only CSV
    rows, :func:`~hetsched.pipeline.export.from_torch_csv`), else hetsched's schedule of that name
    (GPipe and 1F1B, equal to torch's on its golden grid)."""
    from .pipeline import make_schedule
    from .pipeline.export import from_torch_csv

    if order:
        return from_torch_csv("\n".join(order) + "\n", name=name, v=v, m=m)
    return make_schedule(name, p, v, m)


def measure_pipeline(schedule: str = "1f1b", p: int = 2, *, v: int = 1, m: int = 8, microbatch: int = 32,
                     width: int = 512, layers: int = 16, steps: int = 5, warmup: int = 2, stage_repeats: int = 5,
                     threads: int = 1, seed: int = 0, timeout_s: float = 600) -> PipelineRun:
    """Run ``schedule`` for real on ``p`` local ranks (gloo) and measure it (see the module notes).

    The model is :func:`mlp_stages` split into ``p * v`` stages; each step pushes ``m``
    micro-batches of ``microbatch`` rows through it (MSE loss) and back.
    """
    if schedule not in TORCH_SCHEDULES:
        raise HetschedError(f"schedule must be one of {', '.join(TORCH_SCHEDULES)}, got {schedule!r}", field="schedule")
    if TORCH_SCHEDULES[schedule][0] in ("ScheduleGPipe", "Schedule1F1B") and v != 1:
        raise HetschedError(f"{schedule} runs one stage per rank (v=1), not v={v}", field="v")
    if TORCH_SCHEDULES[schedule][1] == "v" and v != 2:
        raise HetschedError(f"{schedule} runs two stages per rank in a V (v=2), not v={v}", field="v")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    spec = {"schedule": schedule, "v": v, "m": m, "microbatch": microbatch, "width": width, "layers": layers,
            "steps": steps, "warmup": warmup, "stage_repeats": stage_repeats, "seed": seed}
    res = run_ranks(_pipeline_worker, p, spec, threads=threads, timeout_s=timeout_s)
    steps_s = [max(r["times"][k] for r in res) for k in range(steps)]
    rows = [{"stage": int(s), "rank": r, **t} for r, out in enumerate(res) for s, t in out["stage_times"].items()]
    stages = pd.DataFrame(rows).sort_values("stage", ignore_index=True)
    metrics = {"step_s": float(statistics.median(steps_s)), "step_min_s": float(min(steps_s)),
               "step_max_s": float(max(steps_s)), "p": p, "v": v, "m": m, "activation_bytes": float(microbatch * width * 4),
               "threads": float(threads), "load_1min": load, "cores": float(os.cpu_count() or 1)}
    steps_log = StepLog()
    steps_log.add("run", f"{schedule} p={p} v={v} m={m}", after=metrics["step_s"], accepted=True,
                  reason=f"torch.distributed.pipelining {TORCH_SCHEDULES[schedule][0]} on {p} gloo ranks: step "
                         f"{metrics['step_s'] * 1e3:.1f} ms (median of {steps}; {min(steps_s) * 1e3:.1f}-{max(steps_s) * 1e3:.1f})")
    return PipelineRun(step_s=tuple(steps_s), stages=stages, order=res[0]["order"], metrics=metrics, steps=steps_log,
                       timeline=make_timeline([]), params={**spec, "p": p, "threads": threads})


def predict_pipeline(run: PipelineRun, *, comm: Any = None, overhead_s: float = 0.0, stage_times: pd.DataFrame | None = None,
                     cores: int | None = None) -> dict[str, Any]:
    """The simulated makespan of ``run``'s schedule (torch's own order), to set against
    ``run.metrics["step_s"]``.

    Stages take their measured times (or ``stage_times``, e.g. priced by a calibrated cost), every
    compute action ``overhead_s`` more (torch's schedule loop), messages ``comm`` (a
    :class:`~hetsched.pipeline.P2P`, e.g. :meth:`P2PCalibration.p2p`). With no more ranks than
    ``cores`` (default: this machine's cores over the run's threads per rank) the answer is
    :func:`hetsched.pipeline.simulate`'s, a rank per core. With more ranks than cores -- 4 ranks on
    this 2-core machine -- the ranks share the cores: :func:`shared_cores_makespan` runs the same
    priced actions with every running action slowed to ``cores / running`` of its speed.

    Returns ``{"makespan_s", "model", "result"}`` (``result``: the ``PipelineResult`` of the
    simulator, also given when the cores are shared, for its timeline at full speed).
    """
    from .pipeline import StageCosts, simulate

    st = (stage_times if stage_times is not None else run.stages).sort_values("stage")
    split = TORCH_SCHEDULES[run.params["schedule"]][2]
    costs = StageCosts(f_s=st["f_s"].to_numpy(), b_s=(st["i_s"] + st["w_s"]).to_numpy() if split else st["b_s"].to_numpy(),
                       i_s=st["i_s"].to_numpy() if split else None, w_s=st["w_s"].to_numpy() if split else None,
                       activation_bytes=run.metrics["activation_bytes"], overhead_s=overhead_s,
                       meta={"source": "hetsched.distributed.measure_pipeline"})
    sched = run.schedule()
    res = simulate(sched, costs=costs, comm=comm)
    if cores is None:
        cores = max(1, int(run.metrics.get("cores", os.cpu_count() or 1)) // max(1, int(run.metrics.get("threads", 1))))
    if run.metrics["p"] <= cores:
        return {"makespan_s": float(res.metrics["makespan_s"]), "model": "simulate (a core per rank)", "result": res}
    mk = shared_cores_makespan(sched, costs, comm, cores)
    return {"makespan_s": mk, "model": f"{run.metrics['p']} ranks sharing {cores} core(s)", "result": res}


def shared_cores_makespan(schedule: Any, costs: Any, comm: Any, cores: int) -> float:
    """Makespan of ``schedule`` when its ranks share ``cores`` processors (processor sharing).

    The actions are priced as :func:`hetsched.pipeline.simulate` prices them
    (:func:`~hetsched.pipeline.simulate.price_actions`: durations, message times); each rank runs its
    actions in order, an action starts once its rank is free and its input has arrived, and while
    ``n`` actions run each progresses at ``min(1, cores / n)`` of its full speed (what the
    operating system's fair scheduler gives ``n`` single-threaded ranks on ``cores`` cores; a rank
    waiting for a message takes no core). With ``cores >= p`` it equals the simulator's makespan.

    >>> from hetsched.pipeline import StageCosts, gpipe, simulate
    >>> s, c = gpipe(2, 2), StageCosts(f_s=1.0, b_s=2.0)
    >>> shared_cores_makespan(s, c, None, 2) == simulate(s, costs=c).metrics["makespan_s"]
    True
    >>> shared_cores_makespan(s, c, None, 1)   # one core: all the work, one action at a time
    12.0
    """
    from .pipeline import P2P
    from .pipeline.simulate import price_actions

    link = P2P.coerce(comm)
    c = costs.arrays(schedule.n_stages, schedule.v)
    dep, dur, src, dst, _, tt = price_actions(schedule, c, link)
    delay = np.zeros(schedule.n_actions)  # message time from the producer's end to the consumer
    delay[dst] = tt
    p = schedule.p
    nxt = [int(schedule.offsets[r]) for r in range(p)]
    end_of = [int(schedule.offsets[r + 1]) for r in range(p)]
    done = np.full(schedule.n_actions, np.nan)
    running: dict[int, float] = {}  # action -> remaining full-speed seconds
    now = 0.0
    cores = max(1, int(cores))
    while any(nxt[r] < end_of[r] for r in range(p)) or running:
        busy = {int(schedule.rank[a]) for a in running}
        arrivals = []
        for r in range(p):  # start what can start now
            if r in busy or nxt[r] >= end_of[r]:
                continue
            a = nxt[r]
            d = dep[a]
            if d >= 0 and np.isnan(done[d]):
                continue  # its producer has not run yet
            at = 0.0 if d < 0 else done[d] + delay[a]
            if at <= now + 1e-15:
                running[a] = float(dur[a])
                nxt[r] += 1
            else:
                arrivals.append(at)
        if not running:
            if not arrivals:
                raise HetschedError("the schedule deadlocks under processor sharing", field="schedule")
            now = min(arrivals)
            continue
        rate = min(1.0, cores / len(running))
        dt = min(rem / rate for rem in running.values())
        if arrivals:
            dt = min(dt, min(arrivals) - now)
        now += dt
        for a in list(running):
            running[a] -= dt * rate
            if running[a] <= 1e-12:
                done[a] = now
                del running[a]
    return float(np.nanmax(done)) if schedule.n_actions else 0.0
