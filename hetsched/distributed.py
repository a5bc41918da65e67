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
* the same harness measures a **late receive** (``metrics["late_recv_s"]``): gloo moves a message
  only once its receive is posted (a rendezvous), and torch's GPipe and 1F1B post a receive just
  before the stage needs it, when the sender has long moved on to its next computation; the data
  then waits for the sender's communication thread to get a core that its compute holds. A
  back-to-back ping-pong never sees this; on this 2-core VM it costs about 0.8-1.3 ms per late
  receive on average (2 ms with 4 ranks) against a 55-75 us ping-pong (heavy-tailed: some take the one-way time,
  others several milliseconds);
* :func:`measure_pipeline` runs a real ``torch.distributed.pipelining`` schedule (GPipe, 1F1B,
  interleaved 1F1B, the zero-bubble schedules torch runs on CPU) of a model split into stages on
  ``p`` local ranks and returns the measured step time, each stage's forward and backward time
  measured alone, how fast a rank computes while ``n`` ranks compute at once (:func:`corun_speed`),
  torch's own action order (:func:`schedule_of`), its runtime list with sends and receives
  (where each receive is posted: :func:`receive_posts`) and the CPU the ranks' communication
  threads spend per message (``metrics["comm_cpu_per_message_s"]``: on this VM 20-150 us per
  message end for torch's GPipe and 1F1B, 250-300 us for its multi-stage runtime, against
  15-50 us in a ping-pong; with as many ranks as cores that CPU is taken from the compute): what
  :func:`predict_pipeline` feeds the simulator with, so that the simulated makespan and the real
  one can be set side by side (``bench/bench_calibration.py --only pipeline``); traced (the
  default), each rank's compute actions, posts and waits become the run's ``timeline`` (the measured
  Gantt chart, named as the simulator names its actions) and :func:`trace_metrics`.

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
import re
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
           "mlp_stages", "corun_speed", "receive_posts", "cross_messages"]

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
    from .optional import require

    require("torch", "running ranks over gloo")
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


def _late_worker(rank: int, world: int, sizes: Sequence[int], repeats: int, lag_s: float, busy_s: float) -> list:
    """Late receives between pairs of ranks (0 -> 1, 2 -> 3, ...), all pairs at once: each even rank
    sends and goes on computing for ``busy_s``; its odd peer computes for ``lag_s`` (the message is
    long there) and then receives. gloo moves the data only once the receive is posted (a
    rendezvous), and the sender's communication thread must then get a core its compute holds.
    Returns the odd ranks' block times per size."""
    import torch
    import torch.distributed as dist

    a = torch.randn(128, 128)
    out = []
    peer = rank + 1 if rank % 2 == 0 else rank - 1
    for n in sizes:
        x = torch.zeros(int(n), dtype=torch.uint8)
        blocks = []
        for i in range(repeats + 2):
            dist.barrier()
            if rank % 2 == 0:
                w = dist.isend(x, peer)
                _compute(a, busy_s)
                w.wait()
            else:
                _compute(a, lag_s)
                t0 = time.perf_counter()
                dist.irecv(x, peer).wait()
                if i >= 2:
                    blocks.append(time.perf_counter() - t0)
        out.append(blocks)
    return out


def _compute(a: Any, seconds: float) -> None:
    """Keep a core busy with small matrix products for ``seconds`` (a rank computing, not sleeping)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        a @ a


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
        ping-pong fit over the sweep), ``late_recv_s`` (what a receive posted after a busy sender's
        send blocks on average beyond the fitted one-way time), ``threads``, ``load_1min``.
    late : DataFrame
        Per rank count and size received late: ``ranks``, ``size_bytes``, ``median_s``, ``mean_s``,
        ``p90_s``, ``max_s`` of the receiver's block, ``over_500us`` (the share over 0.5 ms).
    """

    points: pd.DataFrame = field(default_factory=pd.DataFrame)
    late: pd.DataFrame = field(default_factory=pd.DataFrame)

    def link(self, src: str = "rank0", dst: str = "rank1") -> Link:
        """The measured link between two devices (``attrs``: ``overhead_s`` and where it came from)."""
        m = self.metrics
        bw = m["bandwidth_Bps"] if math.isfinite(m["bandwidth_Bps"]) else 1e18
        return Link(src, dst, bw, m["latency_s"], attrs={"overhead_s": m["overhead_s"], "late_recv_s": m.get("late_recv_s", 0.0),
                                                        "source": "hetsched.distributed.measure_p2p (gloo ping-pong)"})

    def late_recv(self, ranks: int = 2) -> float:
        """What a late receive costs with ``ranks`` ranks running: the measurement at the largest
        rank count up to ``ranks`` (``late_recv_s`` for 2).

        >>> c = P2PCalibration(metrics={"late_recv_s": 1e-3, "late_recv_4_s": 3e-3})
        >>> c.late_recv(2), c.late_recv(3), c.late_recv(8)
        (0.001, 0.001, 0.003)
        """
        m = self.metrics
        by = {2: float(m.get("late_recv_s", 0.0))}
        for k, val in m.items():
            if k.startswith("late_recv_") and k.endswith("_s") and k[10:-2].isdigit():
                by[int(k[10:-2])] = float(val)
        fits = [w for w in by if w <= max(2, int(ranks))]
        return by[max(fits)]

    def p2p(self, *, lockstep: bool = False):
        """The pipeline simulator's :class:`~hetsched.pipeline.P2P`: a lone message costs the fitted
        ping-pong time, of which ``overhead_s`` is the per-message part (a late receive's extra,
        ``metrics["late_recv_s"]``, is :func:`predict_pipeline`'s ``late_recv_s``)."""
        from .pipeline import P2P

        m = self.metrics
        return P2P(latency_s=max(0.0, m["latency_s"] - m["overhead_s"]), bandwidth_Bps=m["bandwidth_Bps"],
                   overhead_s=m["overhead_s"], lockstep=lockstep)


def measure_p2p(sizes: Sequence[int] = DEFAULT_P2P_SIZES, *, repeats: int = 20, stream: int = 8, threads: int = 1,
                late_sizes: Sequence[int] = (4096, 65536, 1 << 20), late_repeats: int = 60, lag_s: float = 1e-3,
                busy_s: float = 4e-3, late_worlds: Sequence[int] = (2,), timeout_s: float = 600) -> P2PCalibration:
    """Measure the gloo link between two local processes (see the module notes).

    Besides the ping-pong and the stream, each of ``late_sizes`` is received ``late_repeats`` times
    **late**: the sender sends and goes on computing for ``busy_s``; the receiver computes for
    ``lag_s`` and only then receives, as torch's GPipe and 1F1B do (a receive is posted just before
    the stage needs it). gloo moves the data only once the receive is posted, and then the sender's
    communication thread needs a core that its own compute holds: the receiver's **mean** block
    less the fitted one-way time is ``metrics["late_recv_s"]``. It is heavy-tailed (on this VM:
    some receives take the one-way time, others a few milliseconds, when the scheduler leaves that
    thread behind the compute), so a pipeline pays it on average, not at the median. Each even
    count in ``late_worlds`` beyond 2 repeats it with that many ranks, in pairs at once
    (``metrics["late_recv_<n>_s"]``): with more ranks than cores it grows (:meth:`P2PCalibration.late_recv`).

    >>> c = measure_p2p([4, 4096, 65536], repeats=3, stream=2, late_sizes=[4096], late_repeats=3)
    >>> c.metrics["latency_s"] >= 0 and c.metrics["bandwidth_Bps"] > 0, len(c.points)
    (True, 3)
    >>> c.metrics["late_recv_s"] >= 0, list(c.late["size_bytes"])
    (True, [4096])

    (With three sizes of three repeats, noise can put the fitted intercept below zero; ``fit_link``
    then fits the bandwidth through the origin and the latency is 0.)
    """
    sizes = [int(s) for s in sizes]
    if len(sizes) < 2 or any(s < 1 for s in sizes):
        raise HetschedError(f"sizes must be at least two positive byte counts, got {sizes!r}", field="sizes")
    if repeats < 1 or stream < 1:
        raise HetschedError("repeats and stream must be >= 1", field="repeats")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    t0 = time.perf_counter()
    late_sizes = [int(b) for b in late_sizes]
    if any(b < 1 for b in late_sizes) or (late_sizes and late_repeats < 1) or not (0 <= lag_s < 1 and 0 <= busy_s < 1):
        raise HetschedError("late_sizes must be positive byte counts, late_repeats >= 1, 0 <= lag_s, busy_s < 1",
                            field="late_sizes")
    worlds = sorted({2, *(int(w) for w in late_worlds)})
    if any(w < 2 or w % 2 for w in worlds):
        raise HetschedError(f"late_worlds must be even rank counts >= 2, got {list(late_worlds)!r}", field="late_worlds")
    res = run_ranks(_p2p_worker, 2, sizes, repeats, stream, threads=threads, timeout_s=timeout_s)[0]
    lates = {}
    for w in worlds if late_sizes else ():
        per_rank = run_ranks(_late_worker, w, late_sizes, int(late_repeats), float(lag_s), float(busy_s), threads=threads,
                             timeout_s=timeout_s)
        lates[w] = [np.concatenate([np.asarray(per_rank[r][k], float) for r in range(1, w, 2)])
                    for k in range(len(late_sizes))]
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
    late_by = {w: max(0.0, float(np.mean([float(np.mean(d)) - (lat + b / bw) for b, d in zip(late_sizes, ds)])))
               for w, ds in lates.items()}
    late_recv = late_by.get(2, 0.0)
    steps = StepLog()
    steps.add("pingpong", f"{len(sizes)} sizes", after=lat, accepted=True,
              reason=f"ping-pong over gloo, {sizes[0]} B to {sizes[-1] / 2**20:.3g} MiB: latency {lat * 1e6:.1f} us, "
                     f"bandwidth {bw / 1e9:.2f} GB/s (worst fit error {err:.0%})")
    steps.add("stream", f"{stream} messages back to back", after=over, accepted=True,
              reason=f"stream of {stream}: per-message overhead {over * 1e6:.1f} us, bandwidth {s_bw / 1e9:.2f} GB/s")
    for w, ds in lates.items():
        alll = np.concatenate(ds)
        steps.add("late", f"{len(late_sizes)} sizes x {late_repeats} received late from a busy sender, {w} ranks",
                  after=late_by[w], accepted=True,
                  reason=f"with {w} ranks a late receive blocks {late_by[w] * 1e6:.0f} us beyond the fitted one-way "
                         f"time on average (median {float(np.median(alll)) * 1e6:.0f} us, mean "
                         f"{float(np.mean(alll)) * 1e6:.0f} us, {float(np.mean(alll > 5e-4)):.0%} over 0.5 ms)")
    late_pts = pd.DataFrame([{"ranks": w, "size_bytes": b, "median_s": float(np.median(d)), "mean_s": float(np.mean(d)),
                              "p90_s": float(np.quantile(d, 0.9)), "max_s": float(np.max(d)),
                              "over_500us": float(np.mean(d > 5e-4))}
                             for w, ds in lates.items() for b, d in zip(late_sizes, ds)],
                            columns=["ranks", "size_bytes", "median_s", "mean_s", "p90_s", "max_s", "over_500us"])
    metrics = {"latency_s": lat, "bandwidth_Bps": bw, "overhead_s": over, "stream_bandwidth_Bps": s_bw,
               "max_rel_error": err, "late_recv_s": late_recv,
               **{f"late_recv_{w}_s": v for w, v in late_by.items() if w != 2},
               "threads": float(threads), "load_1min": load,
               "duration_s": time.perf_counter() - t0}
    return P2PCalibration(points=points, late=late_pts, metrics=metrics, steps=steps, timeline=make_timeline([]),
                          params={"sizes": sizes, "repeats": repeats, "stream": stream, "threads": threads,
                                  "late_sizes": late_sizes, "late_repeats": late_repeats, "lag_s": lag_s,
                                  "busy_s": busy_s, "late_worlds": worlds})


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
    from .optional import require

    torch = require("torch", "a pipeline's stages")

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


def _time_stage(mod: Any, x: Any, last: bool, repeats: int, w_gap: int = 0) -> dict[str, float]:
    """Forward, full backward, and a split backward's input- and weight-gradient halves of one stage
    alone (medians).

    The split is timed with the functions torch's zero-bubble schedules run
    (``stage_backward_input``, then ``stage_backward_weight`` from the saved intermediates): their
    two halves cost more than one full backward (on this MLP, ~25 % more), which a split timed as
    ``autograd.grad`` over the input plus "the rest" would miss. Where that private torch module is
    missing, the input half is ``autograd.grad`` over the input and the weight half the rest.

    The weight gradients accumulate over the repeats, as they do over a step's micro-batches: a
    backward that allocated them afresh each time would time page faults on new memory (for a
    16-layer stage of this MLP, 10.2 ms instead of 7.6 ms per backward) that the pipeline pays once.

    ``w_gap``: the weight half is timed after ``w_gap`` other micro-batches' forward and input
    half, as a zero-bubble schedule runs it (:func:`_w_gap`): by then its saved intermediates are
    out of the caches, and on this MLP a weight half takes 1.2-2x its time right after its input half.
    """
    import torch

    try:
        from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight
    except ImportError:  # an older or newer torch without them: the approximate split
        stage_backward_input = stage_backward_weight = None

    f, b, i_, w_ = [], [], [], []
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
        xi = x.detach().requires_grad_(True)
        out = mod(xi)
        if last:
            out = _loss(out, torch.zeros_like(out))
        t3 = time.perf_counter()
        if stage_backward_input is not None:
            _, groups = stage_backward_input([out], None if g is None else [g], [xi], mod.parameters())
            t4 = time.perf_counter()
            others = []
            for _ in range(w_gap):  # what the schedule runs between this micro-batch's I and its W
                xo = x.detach().clone().requires_grad_(True)
                oo = mod(xo)
                if last:
                    oo = _loss(oo, torch.zeros_like(oo))
                others.append(stage_backward_input([oo], None if g is None else [torch.ones_like(oo)], [xo],
                                                   mod.parameters())[1])
            t4b = time.perf_counter()
            stage_backward_weight(mod.parameters(), groups)
            t5 = time.perf_counter()
            for og in others:
                stage_backward_weight(mod.parameters(), og)
            i_t, w_t = t4 - t3, t5 - t4b  # W alone: from after the others' work to its end
        else:
            torch.autograd.grad(out, [xi], g)
            i_t, w_t = time.perf_counter() - t3, 0.0
        if k:
            f.append(t1 - t0), b.append(t2 - t1), i_.append(i_t), w_.append(w_t)
    fb, fi = statistics.median(b), statistics.median(i_)
    if stage_backward_input is None:
        return {"f_s": statistics.median(f), "b_s": fb, "i_s": min(fi, fb), "w_s": max(fb - fi, 0.0)}
    return {"f_s": statistics.median(f), "b_s": fb, "i_s": fi, "w_s": statistics.median(w_)}


def _process_cpu_s() -> float:
    """CPU seconds of every thread of this process so far (user + system)."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


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
    events: list[tuple] = []
    traced = spec.get("trace", True) and _trace_hooks(S, stages, events)

    def step():
        kw = {}
        if last:
            kw["target"] = target
            kw["losses"] = []
        args = (x,) if first else ()
        sched.step(*args, **kw)

    times, others, starts, traces, main_cpu = [], [], [], [], []
    for k in range(spec["warmup"] + spec["steps"]):
        dist.barrier()
        events.clear()
        m0 = time.thread_time()
        c0, t0 = _process_cpu_s() - m0, time.perf_counter()
        step()
        m1 = time.thread_time()
        c1 = _process_cpu_s() - m1
        t1 = time.perf_counter()
        dist.barrier()  # the step ends when the last rank is done
        if k >= spec["warmup"]:
            times.append(time.perf_counter() - t0)
            others.append(c1 - c0)
            starts.append(t0)
            main_cpu.append((t1 - t0, m1 - m0))
            traces.append(list(events))
    if traced:
        _trace_hooks(S, stages, None)  # the timing of the stages alone below runs unhooked
    order = None
    # a multi-stage schedule's own order; the single-stage ones (GPipe, 1F1B) are hetsched's equal
    # schedules (torch's golden grid; their ``pipeline_order`` is only a sketch that may name
    # micro-batches beyond m)
    po = getattr(sched, "pipeline_order", None) if isinstance(sched, S.PipelineScheduleMulti) else None
    if po is not None:
        order = [",".join("" if a is None else str(a) for a in po[r]) for r in range(p)]
    # the runtime's own list with its sends and receives (where each receive is posted)
    pc = getattr(sched, "pipeline_order_with_comms", None) or None
    comms = None if pc is None else [str(a) for a in pc.get(rank, [])]
    gap = _w_gap(po[rank]) if po is not None and TORCH_SCHEDULES[spec["schedule"]][2] else 0
    stage_times = {}
    for r in range(world):  # one rank at a time: each stage timed alone on the machine, as the simulator prices it
        if r == rank:
            stage_times = {s: _time_stage(mods[s], example, s == n_stages - 1, spec["stage_repeats"], gap) for s in ids}
        dist.barrier()
    # how fast a rank computes while n ranks compute at once (n = 1 .. world): ranks 0..n-1 run their
    # first stage's forward + backward for the same wall time together, the others wait
    corun = {}
    for n in range(1, world + 1):
        alone = range(world) if n == 1 else [None]
        for r in alone:
            dist.barrier()
            if (n == 1 and r == rank) or (n > 1 and rank < n):
                corun[n] = _fb_loop(mods[ids[0]], example, ids[0] == n_stages - 1, spec["corun_s"])
        dist.barrier()
    return {"times": times, "other_cpu": others, "starts": starts, "traces": traces if traced else None,
            "main": main_cpu, "order": order, "comms": comms,
            "stage_times": {str(k): v for k, v in stage_times.items()},
            "corun": {str(k): v for k, v in corun.items()}}


def _trace_hooks(S: Any, stages: Sequence[Any], events: list | None) -> bool:
    """Record, on this rank, each compute action, each posting of sends and receives and each wait
    on them as ``(what, start, end, main-thread CPU)`` into ``events``; ``events=None`` takes the
    hooks off again. Returns whether the hooks are on.

    torch's schedules post through ``schedules._batch_p2p`` and wait through
    ``schedules._wait_batch_p2p`` (module functions, looked up at each call) and compute through the
    stages' ``forward_one_chunk`` / ``backward_one_chunk`` / ``backward_weight_one_chunk``; a torch
    without them is run untraced rather than wrongly traced.
    """
    names = {"forward_one_chunk": "F", "backward_one_chunk": "B", "backward_weight_one_chunk": "W"}
    if events is None:
        for attr in ("_batch_p2p", "_wait_batch_p2p"):
            # only this function's own wrappers come off (a decorator of torch's keeps its function)
            original = getattr(getattr(S, attr), "_hetsched_original", None)
            if original is not None:
                setattr(S, attr, original)
        for st in stages:
            for name in names:
                st.__dict__.pop(name, None)  # back to the class's method
        return False
    if not all(callable(getattr(S, a, None)) for a in ("_batch_p2p", "_wait_batch_p2p")) or \
            not all(callable(getattr(st, n, None)) for st in stages for n in names):
        return False
    clock, cpu = time.perf_counter, time.thread_time

    def hook(fn: Callable, label: Callable) -> Callable:  # label '' records nothing
        def wrapped(*a, **kw):
            c0, t0 = cpu(), clock()
            out = fn(*a, **kw)
            what = label(a, kw)
            if what:
                events.append((what, t0, clock(), cpu() - c0))
            return out
        wrapped._hetsched_original = fn
        return wrapped

    def post_label(a: tuple, kw: dict) -> str:
        ops = a[0] if a else kw.get("p2p_ops", ())
        desc = a[1] if len(a) > 1 else kw.get("desc")
        # a post of no operations (the first stage has no input to receive) is no message
        return f"post:{desc or ''}:{len(ops)}" if ops else ""

    S._batch_p2p = hook(S._batch_p2p, post_label)
    S._wait_batch_p2p = hook(S._wait_batch_p2p, lambda a, kw: f"wait:{len(a[0]) if a else 0}")

    def label(stage: int, kind: str) -> Callable:
        def name(a: tuple, kw: dict) -> str:
            mb = a[0] if a else kw.get("fwd_chunk_id", kw.get("bwd_chunk_id", 0))
            # a zero-bubble schedule's input-gradient half is a backward without its weight half
            full = a[2] if len(a) > 2 else kw.get("full_backward", True)
            return f"{stage}{'I' if kind == 'B' and not full else kind}{mb}"
        return name

    for st in stages:
        for name, kind in names.items():
            setattr(st, name, hook(getattr(st, name), label(st.stage_index, kind)))
    return True


def _trace_summary(res: Sequence[Mapping[str, Any]], k: int, t_zero: float) -> pd.DataFrame:
    """The measured step ``k`` of every rank as a timeline (:mod:`hetsched.timeline`): lane
    ``rank r``, kinds ``compute`` (torch's actions, with stage and micro-batch), ``launch`` (posting
    sends and receives), ``wait`` (waiting on them); times from ``t_zero``."""
    rows = []
    for r, out in enumerate(res):
        for what, t0, t1, _cpu in out["traces"][k]:
            m = _ACTION.match(what)
            kind = "compute" if m else ("launch" if what.startswith("post:") else "wait")
            rows.append({"lane": f"rank {r}", "group": "pipeline (measured)", "name": what, "kind": kind,
                         "start_s": t0 - t_zero, "end_s": max(t1, t0) - t_zero,
                         "stage": int(m.group(1)) if m else None, "microbatch": int(m.group(3)) if m else None})
    return make_timeline(sorted(rows, key=lambda x: (x["lane"], x["start_s"])))


def trace_metrics(res: Sequence[Mapping[str, Any]], messages: int) -> dict[str, float]:
    """What the traced steps of a run say about its time beyond compute (medians over the steps):

    * ``post_cpu_per_message_s``: the main threads' CPU inside torch's posting of sends and
      receives, per end of a cross-rank message (Python and torch building and posting the
      operations; it runs on the rank's own thread, between its actions);
    * ``wait_s``: the ranks' time blocked waiting on messages, all ranks together;
    * ``descheduled_s``: the ranks' main threads' wall time outside those waits minus their CPU
      time there (time a runnable rank did not get a core: the operating system gave it to
      another rank's or a communication thread);
    * ``compute_in_run_s``: the wall time of the compute actions, all ranks together.

    >>> r = {"traces": [[("0F0", 0.0, 1.0, 0.9), ("post:fwd_send:1", 1.0, 1.1, 0.1), ("wait:1", 1.1, 2.0, 0.0)]],
    ...      "main": [(2.0, 1.0)]}
    >>> m = trace_metrics([r], messages=1)
    >>> {k: round(v, 3) for k, v in m.items()}
    {'post_cpu_per_message_s': 0.05, 'wait_s': 0.9, 'descheduled_s': 0.1, 'compute_in_run_s': 1.0}
    """
    steps = len(res[0]["traces"])
    post, wait, desched, comp = [], [], [], []
    for k in range(steps):
        p = w = d = c = 0.0
        for out in res:
            ev = out["traces"][k]
            wall, cpu = out["main"][k]
            w_wall = sum(t1 - t0 for what, t0, t1, _ in ev if what.startswith("wait:"))
            w_cpu = sum(x for what, _, _, x in ev if what.startswith("wait:"))
            p += sum(x for what, _, _, x in ev if what.startswith("post:"))
            c += sum(t1 - t0 for what, t0, t1, _ in ev if _ACTION.match(what))
            w += w_wall
            d += max(0.0, (wall - w_wall) - (cpu - w_cpu))
        post.append(p / (2 * messages) if messages else 0.0)
        wait.append(w), desched.append(d), comp.append(c)
    med = statistics.median
    return {"post_cpu_per_message_s": med(post), "wait_s": med(wait), "descheduled_s": med(desched),
            "compute_in_run_s": med(comp)}


#: torch's action strings: ``<stage><kind><micro-batch>`` (``1F3``, ``0RECV_B2``)
_ACTION = re.compile(r"^(\d+)(F|I|B|W|SEND_F|RECV_F|SEND_B|RECV_B)(\d+)$")


def _actions(tokens: Sequence[Any]) -> list[tuple[int, str, int]]:
    """``(stage, kind, micro-batch)`` of each of torch's actions (``_Action`` or its string) the
    simulator models; the others (unshard, reduce-grad, ``None`` slots) are left out."""
    return [(int(m.group(1)), m.group(2), int(m.group(3))) for t in tokens
            if t is not None and (m := _ACTION.match(str(t)))]


def _w_gap(actions: Sequence[Any]) -> int:
    """Median number of micro-batches whose input half a rank runs between a micro-batch's input
    half (``I``) and its weight half (``W``), from the rank's action list (torch ``_Action``s or
    strings such as ``"0I3"``); 0 with no split backward.

    >>> _w_gap(["0F0", "0F1", "0I0", "0I1", "0W0", "0I2", "0W1", "0W2"])
    1
    """
    seq = [a for a in _actions(actions) if a[1] in ("F", "I", "W", "B")]
    where_i = {(st, mb): k for k, (st, kind, mb) in enumerate(seq) if kind == "I"}
    gaps = []
    for k, (st, kind, mb) in enumerate(seq):
        if kind == "W" and (st, mb) in where_i:
            gaps.append(sum(1 for _s, kd, _m in seq[where_i[(st, mb)] + 1:k] if kd == "I"))
    return int(statistics.median(gaps)) if gaps else 0


def _fb_loop(mod: Any, x: Any, last: bool, seconds: float) -> float:
    """Forward + backward time of ``mod`` over ``seconds`` of repeats (at least 4), as wall time
    per repeat: with more ranks than cores the operating system slices time, and a median would
    pick the repeats that ran while the others waited."""
    import torch

    n, t_first, end = 0, 0.0, time.perf_counter() + seconds
    while n < 4 or time.perf_counter() < end:
        xi = x.detach().requires_grad_(True)
        out = mod(xi)
        if last:
            out = _loss(out, torch.zeros_like(out))
        torch.autograd.backward(out, None if last else torch.ones_like(out))
        n += 1
        if n == 1:  # the first repeat warms up (and allocates the gradients): not counted
            t_first = time.perf_counter()
    return (time.perf_counter() - t_first) / (n - 1)


def corun_speed(corun: Sequence[Mapping[str, float]]) -> tuple[float, ...]:
    """Speed of a computing rank while ``n`` ranks compute at once, ``n = 1 .. world``: the median
    over the ranks that ran of (time alone / time together); ``corun[r][str(n)]`` is rank ``r``'s
    forward + backward time (wall time per repeat) with ``n`` ranks computing.

    >>> corun_speed([{"1": 1.0, "2": 1.25}, {"1": 2.0, "2": 2.5}])
    (1.0, 0.8)
    """
    world = len(corun)
    out = [1.0]
    for n in range(2, world + 1):
        ratios = [c["1"] / c[str(n)] for c in corun[:n] if c.get(str(n), 0) > 0 and c.get("1", 0) > 0]
        out.append(float(statistics.median(ratios)) if ratios else 1.0)
    return tuple(out)


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
    comms : list of list of str or None
        Per rank, the runtime's action list with its sends and receives (torch's
        ``pipeline_order_with_comms``: where each receive is posted), for the multi-stage schedules.
    speed : tuple of float
        ``speed[n - 1]``: how fast a rank computes while ``n`` ranks compute at once, against
        alone (:func:`corun_speed`; shared caches and memory, and more ranks than cores).
    metrics : dict
        ``step_s`` (median), ``step_min_s``, ``step_max_s``, ``p``, ``v``, ``m``, ``activation_bytes``,
        ``threads``, ``load_1min``, ``cores`` (of this machine); ``comm_cpu_s``: the CPU time the
        ranks' threads other than the one running the schedule (gloo's communication threads) spent
        in a step, all ranks together (median over the steps), ``messages``: the step's cross-rank
        messages, ``comm_cpu_per_message_s``: ``comm_cpu_s`` per end of a message; traced runs
        add :func:`trace_metrics` (``post_cpu_per_message_s``, ``wait_s``, ``descheduled_s``,
        ``compute_in_run_s``).
    timeline : DataFrame
        Traced runs: the median step as measured, per rank (``compute`` actions named as the
        simulator names them, ``launch`` for posting sends and receives, ``wait`` for waiting on
        them); empty when untraced.
    """

    step_s: tuple = ()
    stages: pd.DataFrame = field(default_factory=pd.DataFrame)
    order: Any = None
    speed: tuple = ()
    comms: Any = None

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
                     threads: int = 1, seed: int = 0, corun_s: float = 0.3, timeout_s: float = 600,
                     trace: bool = True) -> PipelineRun:
    """Run ``schedule`` for real on ``p`` local ranks (gloo) and measure it (see the module notes).

    The model is :func:`mlp_stages` split into ``p * v`` stages; each step pushes ``m``
    micro-batches of ``microbatch`` rows through it (MSE loss) and back.

    ``trace`` records every rank's compute actions, its posting of sends and receives and its waits
    on them (hooks on torch's schedule functions, a few microseconds each): the median step becomes
    the run's ``timeline`` (the measured Gantt chart, to set beside the simulated one) and
    :func:`trace_metrics` go into ``metrics``.
    """
    if schedule not in TORCH_SCHEDULES:
        raise HetschedError(f"schedule must be one of {', '.join(TORCH_SCHEDULES)}, got {schedule!r}", field="schedule")
    if TORCH_SCHEDULES[schedule][0] in ("ScheduleGPipe", "Schedule1F1B") and v != 1:
        raise HetschedError(f"{schedule} runs one stage per rank (v=1), not v={v}", field="v")
    if TORCH_SCHEDULES[schedule][1] == "v" and v != 2:
        raise HetschedError(f"{schedule} runs two stages per rank in a V (v=2), not v={v}", field="v")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    spec = {"schedule": schedule, "v": v, "m": m, "microbatch": microbatch, "width": width, "layers": layers,
            "steps": steps, "warmup": warmup, "stage_repeats": stage_repeats, "seed": seed, "corun_s": float(corun_s),
            "trace": bool(trace)}
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
    speed = corun_speed([r["corun"] for r in res])
    comms = [r["comms"] for r in res] if all(r.get("comms") is not None for r in res) else None
    # the CPU the ranks' other threads (gloo's communication threads) spent per step, all ranks
    # together, and per end of a cross-rank message
    other = [sum(r["other_cpu"][k] for r in res) for k in range(steps)]
    metrics["comm_cpu_s"] = float(statistics.median(other))
    sched = schedule_of(schedule, p, v, m, res[0]["order"])
    msgs = cross_messages(sched)
    metrics["messages"] = float(msgs)
    metrics["comm_cpu_per_message_s"] = metrics["comm_cpu_s"] / (2 * msgs) if msgs else 0.0
    timeline = make_timeline([])
    if all(r.get("traces") for r in res):
        metrics.update(trace_metrics(res, msgs))
        k = sorted(range(steps), key=lambda i: steps_s[i])[(steps - 1) // 2]  # the median step
        timeline = _trace_summary(res, k, min(r["starts"][k] for r in res))
        steps_log.add("trace", f"{schedule} p={p}", after=metrics["wait_s"], accepted=True,
                      reason=f"per step, all ranks: {metrics['compute_in_run_s'] * 1e3:.1f} ms computing, "
                             f"{metrics['wait_s'] * 1e3:.1f} ms waiting on messages, {metrics['descheduled_s'] * 1e3:.1f} ms "
                             f"runnable without a core; {metrics['post_cpu_per_message_s'] * 1e6:.0f} us of the ranks' own "
                             "CPU posting each end of a message")
    steps_log.add("comm_cpu", f"{schedule} p={p}", after=metrics["comm_cpu_s"], accepted=True,
                  reason=f"the ranks' communication threads: {metrics['comm_cpu_s'] * 1e3:.1f} ms of CPU a step "
                         f"(median), {metrics['comm_cpu_per_message_s'] * 1e6:.0f} us per end of each of its {msgs} "
                         "cross-rank messages")
    return PipelineRun(step_s=tuple(steps_s), stages=stages, order=res[0]["order"], speed=speed, comms=comms,
                       metrics=metrics,
                       steps=steps_log,
                       timeline=timeline, params={**spec, "p": p, "threads": threads})


def predict_pipeline(run: PipelineRun, *, comm: Any = None, overhead_s: float = 0.0, stage_times: pd.DataFrame | None = None,
                     cores: int | None = None, speed: Sequence[float] | None = None,
                     late_recv_s: float = 0.0, comm_cpu_s: float = 0.0, post_s: float = 0.0) -> dict[str, Any]:
    """The simulated makespan of ``run``'s schedule (torch's own order), to set against
    ``run.metrics["step_s"]``.

    Stages take their measured times (or ``stage_times``, e.g. priced by a calibrated cost), every
    compute action ``overhead_s`` more (torch's schedule loop), messages ``comm`` (a
    :class:`~hetsched.pipeline.P2P`, e.g. :meth:`P2PCalibration.p2p`). With no more ranks than
    ``cores`` (default: this machine's cores over the run's threads per rank) the answer is
    :func:`hetsched.pipeline.simulate`'s, a rank per core. With more ranks than cores -- 4 ranks on
    this 2-core machine -- the ranks share the cores: :func:`shared_cores_makespan` runs the same
    priced actions with every running action slowed to ``cores / running`` of its speed.

    ``speed`` (``speed[n - 1]``: how fast a rank computes while ``n`` compute at once, e.g. the
    run's measured :attr:`PipelineRun.speed`) replaces both: the actions run under
    :func:`shared_cores_makespan` at the measured speeds, which include what ranks sharing caches,
    memory bandwidth and (beyond the cores) the cores themselves cost each other. ``late_recv_s``
    (:attr:`P2PCalibration.metrics`) prices gloo's late receives where torch's runtime posts them
    (:func:`receive_posts`, :func:`shared_cores_makespan`); with more ranks than cores, every
    receive. ``comm_cpu_s`` (e.g. ``comm_cpu_per_message_s`` of a tiny run of the same schedule on
    as many ranks) is the CPU each end of a cross-rank message costs gloo's communication threads,
    taken from the cores the ranks compute on (:func:`shared_cores_makespan`). ``post_s`` (e.g.
    ``post_cpu_per_message_s`` of a traced tiny run of the same schedule on as many ranks) is the
    time the rank itself spends posting each end of a cross-rank message (torch building and
    posting the send or receive, on the rank's own thread: the per-action ``overhead_s``, measured
    on one rank, has no messages).

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
    over = run.metrics["p"] > cores
    late = (f", {'every' if over else 'late'} receive +{late_recv_s * 1e6:.0f} us") if late_recv_s else ""
    if comm_cpu_s:
        late += f", {comm_cpu_s * 1e6:.0f} us of communication CPU per message end"
    if post_s:
        late += f", {post_s * 1e6:.0f} us posting each message end"
    if speed is not None and len(speed):
        mk = shared_cores_makespan(sched, costs, comm, cores, speed=speed, late_recv_s=late_recv_s,
                                   posts=receive_posts(sched, run.comms), all_late=over, comm_cpu_s=comm_cpu_s,
                                   post_s=post_s)
        return {"makespan_s": mk, "model": f"{run.metrics['p']} ranks at the measured co-run speeds "
                f"({', '.join(f'{x:.2f}' for x in speed[1:])}){late}", "result": res}
    if late_recv_s or comm_cpu_s or post_s:
        mk = shared_cores_makespan(sched, costs, comm, cores, late_recv_s=late_recv_s, posts=receive_posts(sched, run.comms),
                                   all_late=over, comm_cpu_s=comm_cpu_s, post_s=post_s)
        return {"makespan_s": mk, "model": f"{run.metrics['p']} ranks sharing {cores} core(s){late}", "result": res}
    if run.metrics["p"] <= cores:
        return {"makespan_s": float(res.metrics["makespan_s"]), "model": "simulate (a core per rank)", "result": res}
    mk = shared_cores_makespan(sched, costs, comm, cores)
    return {"makespan_s": mk, "model": f"{run.metrics['p']} ranks sharing {cores} core(s)", "result": res}


def cross_messages(schedule: Any) -> int:
    """The messages between ranks in one step of ``schedule``: actions whose input another rank's
    action produced (a forward's activation, a backward's gradient).

    >>> from hetsched.pipeline import gpipe
    >>> cross_messages(gpipe(2, 4)), cross_messages(gpipe(4, 4))   # 4 forwards and 4 backwards per boundary
    (8, 24)
    """
    from .pipeline.deps import checked_dependencies

    dep = checked_dependencies(schedule)
    has = dep >= 0
    return int((schedule.rank[dep[has]] != schedule.rank[has]).sum())


def receive_posts(schedule: Any, comms: Sequence[Sequence[str]] | None) -> np.ndarray:
    """For every action, the action on its rank after which its cross-rank input's receive is posted
    (``-1``: at the step's start): the previous action on the rank (torch's GPipe and 1F1B receive
    just before they compute), or where torch's runtime list with comms (:attr:`PipelineRun.comms`,
    one list of action strings such as ``"1RECV_F3"`` per rank) places the ``RECV``.

    >>> from hetsched.pipeline import one_f_one_b
    >>> s = one_f_one_b(2, 2)                     # rank 1: F0 B0 F1 B1
    >>> receive_posts(s, None).tolist()[4:]
    [-1, 4, 5, 6]
    >>> receive_posts(s, [["0F0", "0F1", "0RECV_B0", "0B0", "0RECV_B1", "0B1"],
    ...                  ["1RECV_F0", "1RECV_F1", "1F0", "1B0", "1F1", "1B1"]]).tolist()[4:]
    [-1, 4, -1, 6]
    """
    n = schedule.n_actions
    post = np.arange(n) - 1
    post[np.asarray(schedule.offsets[:-1], np.int64)[np.diff(schedule.offsets) > 0]] = -1
    if not comms:
        return post
    kinds = {"F": 0, "B": 1, "I": 2, "W": 3}
    for r in range(min(schedule.p, len(comms))):
        lo, hi = int(schedule.offsets[r]), int(schedule.offsets[r + 1])
        where = {(int(schedule.kind[a]), int(schedule.stage[a]), int(schedule.microbatch[a])): a for a in range(lo, hi)}
        last = -1
        for st, kind, mb in _actions(comms[r]):
            if kind in kinds:
                last = where.get((kinds[kind], st, mb), last)
            elif kind == "RECV_F" and (0, st, mb) in where:
                post[where[(0, st, mb)]] = last
            elif kind == "RECV_B":
                for k in (1, 2):  # the full backward, or the input-gradient half of a split one
                    if (k, st, mb) in where:
                        post[where[(k, st, mb)]] = last
    return post


def shared_cores_makespan(schedule: Any, costs: Any, comm: Any, cores: int, *, speed: Sequence[float] | None = None,
                          late_recv_s: float = 0.0, posts: np.ndarray | None = None, all_late: bool = False,
                          comm_cpu_s: float = 0.0, post_s: float = 0.0) -> float:
    """Makespan of ``schedule`` when its ranks share ``cores`` processors (processor sharing).

    ``speed`` (``speed[n - 1]`` for ``n`` running actions, measured: :func:`corun_speed`) replaces
    the ideal ``min(1, cores / n)``; beyond its length the last entry's total throughput is shared.

    ``late_recv_s`` models gloo's rendezvous: a receive is posted after the action ``posts[a]``
    (:func:`receive_posts`; default: just before the action that needs the message, as torch's
    GPipe and 1F1B do). When the message was sent before the receive is posted (the sender has
    moved on to computing), it arrives ``late_recv_s`` after the message time counted from the
    post (:attr:`P2PCalibration.metrics` ``late_recv_s``: gloo moves the data only once the
    receive is posted, and the sender's communication thread then waits for a core); when the
    receive was first, it arrives the message time after the send. ``all_late`` charges every
    cross-rank receive ``late_recv_s`` (more ranks than cores: a woken receiver waits for a core as
    well).

    ``comm_cpu_s`` is the CPU time a message costs at each of its two ends (gloo's communication
    threads, :attr:`PipelineRun.metrics` ``comm_cpu_per_message_s``): when a cross-rank message is
    sent, two jobs of that length join the running actions. They hold no rank and gate nothing,
    but they take their share of the cores: on a machine with as many ranks as cores, every
    message slows the compute running at that moment.

    ``post_s`` is the time a rank spends posting each end of a cross-rank message on its own
    thread (:func:`trace_metrics` ``post_cpu_per_message_s``): the producer's action and the
    consumer's action each take that much longer. (torch posts a receive before it waits for the
    message; charging it to the consuming action counts it after the arrival, a few tens of
    microseconds late where the receiver was already waiting.)

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
    >>> shared_cores_makespan(s, c, None, 1, speed=[1.0, 0.5])   # measured: two at once, each at half speed
    12.0
    >>> s, c = gpipe(2, 2), StageCosts(f_s=[1.0, 2.0], b_s=2.0)   # rank 1 receives F1 after rank 0 sent it
    >>> shared_cores_makespan(s, c, None, 2), shared_cores_makespan(s, c, None, 2, late_recv_s=0.5)
    (11.0, 11.5)
    >>> shared_cores_makespan(s, c, None, 2, late_recv_s=0.5, all_late=True)   # all four receives pay it
    13.0
    >>> s, c = gpipe(2, 1), StageCosts(f_s=1.0, b_s=1.0)   # F0 B0 on rank 0, F1 B1 on rank 1: 2 messages
    >>> shared_cores_makespan(s, c, None, 2), shared_cores_makespan(s, c, None, 1, comm_cpu_s=0.25)
    (4.0, 5.0)
    >>> shared_cores_makespan(s, c, None, 2, post_s=0.125)   # four message ends on the critical path
    4.5
    """
    from .pipeline import P2P
    from .pipeline.simulate import price_actions

    link = P2P.coerce(comm)
    c = costs.arrays(schedule.n_stages, schedule.v)
    dep, dur, src, dst, _, tt = price_actions(schedule, c, link)
    delay = np.zeros(schedule.n_actions)  # message time from the producer's end to the consumer
    delay[dst] = tt
    cross = np.zeros(schedule.n_actions, bool)
    cross[dst] = True
    if not (0 <= float(late_recv_s) < math.inf):
        raise HetschedError(f"late_recv_s must be a finite time >= 0, got {late_recv_s!r}", field="late_recv_s")
    if not (0 <= float(comm_cpu_s) < math.inf):
        raise HetschedError(f"comm_cpu_s must be a finite time >= 0, got {comm_cpu_s!r}", field="comm_cpu_s")
    if not (0 <= float(post_s) < math.inf):
        raise HetschedError(f"post_s must be a finite time >= 0, got {post_s!r}", field="post_s")
    if post_s:
        dur = np.asarray(dur, float).copy()
        np.add.at(dur, np.asarray(src, np.int64), float(post_s))
        np.add.at(dur, np.asarray(dst, np.int64), float(post_s))
    sends = set(int(x) for x in src) if comm_cpu_s else set()  # producers of cross-rank messages
    background: list[float] = []  # remaining CPU seconds of the messages' communication jobs
    p = schedule.p
    nxt = [int(schedule.offsets[r]) for r in range(p)]
    end_of = [int(schedule.offsets[r + 1]) for r in range(p)]
    done = np.full(schedule.n_actions, np.nan)
    running: dict[int, float] = {}  # action -> remaining full-speed seconds
    post = receive_posts(schedule, None) if posts is None else np.asarray(posts)
    if post.shape != (schedule.n_actions,) or not np.issubdtype(post.dtype, np.integer) or \
            ((post < -1) | (post >= np.arange(schedule.n_actions))).any():
        raise HetschedError(f"posts must give, for each of the {schedule.n_actions} actions, an earlier action's index "
                            "or -1 (receive_posts)", field="posts")
    now = 0.0
    cores = max(1, int(cores))
    if speed is not None and (not len(speed) or any(not (0 < float(x) <= 10) for x in speed)):
        raise HetschedError(f"speed must be positive factors per number of running ranks, got {list(speed)!r}", field="speed")
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
            if d < 0:
                at = 0.0
            elif cross[a] and late_recv_s and ((t_post := (0.0 if post[a] < 0 else done[post[a]])) > done[d] or all_late):
                at = max(t_post, done[d]) + delay[a] + late_recv_s  # received late: the rendezvous waits for the sender
            else:
                at = done[d] + delay[a]
            if at <= now + 1e-15:
                running[a] = float(dur[a])
                nxt[r] += 1
            else:
                arrivals.append(at)
        if not running:
            if not arrivals:
                raise HetschedError("the schedule deadlocks under processor sharing", field="schedule")
            if background:  # the communication jobs run on while every rank waits
                idle = min(1.0, cores / len(background))
                step = min(arrivals) - now
                background = [rem - step * idle for rem in background if rem - step * idle > 1e-12]
            now = min(arrivals)
            continue
        n_run, n_bg = len(running), len(background)
        if speed:
            k = min(n_run, len(speed))
            rate = float(speed[k - 1]) * k / n_run
        else:
            rate = min(1.0, cores / n_run)
        # the communication jobs take their share of the cores: what a computing rank keeps of the
        # share it had without them (the measured speeds already hold the ranks' own sharing)
        share = min(1.0, cores / (n_run + n_bg))
        rate *= share / min(1.0, cores / n_run)
        dt = min(rem / rate for rem in running.values())
        if background:
            dt = min(dt, min(background) / share)
        if arrivals:
            dt = min(dt, min(arrivals) - now)
        now += dt
        background = [rem - dt * share for rem in background if rem - dt * share > 1e-12]
        for a in list(running):
            running[a] -= dt * rate
            if running[a] <= 1e-12:
                done[a] = now
                del running[a]
                if a in sends:
                    background += [float(comm_cpu_s)] * 2
    return float(np.nanmax(done)) if schedule.n_actions else 0.0
