"""Calibrate costs on the local machine: measure the device, fit efficiency curves, compare with runs.

``hetsched.calibrate(...)`` (this module is callable) and ``hetsched calibrate`` measure, with torch:

1. the device's real **peak FLOP/s** (a large single-precision matrix product), **memory
   bandwidth** (a copy far larger than the caches) and **launch overhead** (what the profiler
   reports for a view op, which does no work);
2. the **workloads** -- zoo models built in torch (:mod:`hetsched.io.torch_zoo`) or your own
   modules -- run eagerly under ``torch.profiler``; :func:`hetsched.io.profile.load_profile` matches
   every ATen call to an op of the imported graph, so each op gives one point
   ``(work, measured time)``;
3. a **sweep** of generic sizes per op type seen in the workloads (element-wise ops from 4 K to 6 M
   elements, matrix products from 16 to 4096 rows, convolutions of four ResNet-like shapes at
   three batch sizes...): fixed sizes, independent of any target graph, so that work sizes beyond
   the workloads' are measured rather than extrapolated (caches fill, matrix kernels warm up).

The fit is **shape-aware**: an op's *work* is its roofline time at the measured peak and bandwidth,
``max(flops / peak, bytes / bandwidth)`` (bytes by the rules of :mod:`hetsched.cost`: views move
nothing, gathers only their rows), and its *efficiency* is work over measured time, launch excluded.
Per op type (op class when a type has too few points) the points are binned in ``log10(work)``
and the median efficiency of each bin becomes a knot of a piecewise-linear
:class:`~hetsched.cost.EfficiencyCurve`. A latency measured at batch 1 is thereby never reused at
batch 8; the efficiency of the batch-8 op's work size is, which is why one calibration predicts
other batch sizes and sequence lengths (``bench/bench_calibration.py`` measures how well).

The workloads fit the caches (ResNet-50 at batch 1 touches 21 MiB around its largest op), so their
memory-bound ops run from the caches: up to twice the DRAM copy rate, and a layer's speed depends
on what its neighbours left in them. A bigger graph (ResNet-50 at batch 8: 172 MiB) streams those
ops from memory. The sweep times each point as a model would run it -- caches evicted (weights and
older tensors come from memory), then the op's activation input rewritten, as its producer would
just have written it -- and gives per op type a **cold curve**
(:func:`fit_cold_curves`); with the cache sizes of the CPU (Linux sysfs) the cost file prices such
ops by it (the "cold ops" of :class:`~hetsched.cost.CalibratedCost`).

Timings are order statistics over ``repeats`` calls (``stat``: ``"median"`` by default; on a machine
shared with other jobs ``"min"`` is the better estimate of the uncontended time, as contention only
ever adds). Contention also comes and goes over seconds, shifting a whole run: the workloads and the
sweep run ``runs`` times (3 by default), each op's time is the median over the runs
(:func:`median_runs`) and its layer factor is shrunk toward 1 when it is within the run-to-run
noise (:func:`robust_layer_factors`). Torch threads are pinned for the whole run (``threads``) and
recorded.

The result writes a **system YAML** (one ``cpu0`` device with the measured numbers; a ``gpu0`` and
its host link when CUDA is present) and a **cost file** (``docs/formats.md``, section 5) that
``evaluate``, every algorithm (``cost=path``), the CLI (``hetsched --cost FILE ...``) and the
calibration panel accept.

:func:`compare` sets a prediction against a measured profile: per-op ratios, the end-to-end ratio
and both timelines (what :mod:`hetsched.plot.calibration` draws).

>>> import hetsched
>>> callable(hetsched.calibrate)
True
"""

from __future__ import annotations

import copy
import datetime as _dt
from dataclasses import replace as _replace
import math
from collections import Counter
import os
import platform
import statistics
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .cost import CalibratedCost, CostModel, EfficiencyCurve, RooflineCost, curve_type, model_id, resolve_cost, save_cost
from .errors import HetschedError
from .graph import OpGraph
from .results import LazySteps, Result, StepLog
from .system import Device, Link, System, op_class
from .timeline import make_timeline

__all__ = ["calibrate", "Calibration", "compare", "Comparison", "fit_curves", "fit_cold_curves", "DEFAULT_WORKLOADS",
           "DEFAULT_HOLDOUT", "holdout_residuals", "RESIDUAL_MARGIN",
           "median_runs", "robust_layer_factors", "DEFAULT_RUNS", "gpu_device", "timed_calls",
           "sweep_graph", "thread_speedup",
           "parse_workload",
           "warm_allocator", "measure_peak_flops", "measure_bandwidth", "measure_launch"]

#: The workloads ``hetsched calibrate`` runs by default: ResNet-50 at batch 1 and BERT-base at
#: sequence length 64 (convolutions, normalisations, pooling; matrix products, attention, GELU).
DEFAULT_WORKLOADS: tuple[tuple[str, dict], ...] = (("resnet50", {"batch": 1}), ("bert_base", {"batch": 1, "seq_len": 64}))
#: Models ``hetsched calibrate`` measures and predicts but never fits (a depthwise CNN and a small
#: decoder): their residuals per op class are the calibration's error range (:func:`holdout_residuals`).
DEFAULT_HOLDOUT: tuple[tuple[str, dict], ...] = (("mobilenet_v2", {"batch": 1}),
                                                 ("gpt2_small", {"batch": 1, "seq_len": 64, "n_layers": 2}))
#: Widening of the held-out range: what one measured run differs from the next on a quiet machine
#: (1-3 %), which the few held-out runs cannot show on their own.
RESIDUAL_MARGIN = 0.03
#: A class enters the residuals of a held-out run only with at least this share of its predicted time.
RESIDUAL_MIN_SHARE = 0.02
#: Independent runs of the workloads and the sweep ``calibrate`` takes the per-op median of (see
#: :func:`median_runs`): three ignore one run spoiled by other jobs; ~25 s each for the defaults.
DEFAULT_RUNS = 3
MIN_POINTS_PER_TYPE = 4  # fewer points of one op type: its op class's curve prices it
WORK = "sum"  # compute and traffic do not overlap on a CPU core (see CalibratedCost)
MONOTONE = frozenset({"conv", "matmul"})  # op classes whose curves are non-decreasing in work
BIN_DECADES = 0.25  # knot spacing of an efficiency curve, in decades of work
# fewer workload ops of a type in one graph at one size (single layers) with sweep points: the sweep's curve
MIN_LAYERS_FOR_LEVEL = 2


# ---------------------------------------------------------------------------- results
@dataclass(frozen=True, kw_only=True, eq=False)
class Calibration(Result):
    """What :func:`calibrate` measured and fitted.

    Attributes
    ----------
    system : System
        The measured device(s), ready to save (:meth:`save`).
    cost : CalibratedCost
        Efficiency curves per device and op type/class.
    points : DataFrame
        Every measurement the fit used: ``source`` (workload name or ``sweep``), ``op``, ``op_type``,
        ``key`` (the curve it went to), ``flops``, ``bytes``, ``work_s``, ``measured_s``,
        ``efficiency``, ``predicted_s`` (by the fitted model) and ``ratio`` (predicted / measured).
    profiles : dict
        ``{workload: Profile}`` of the workload runs.
    graphs : dict
        ``{workload: OpGraph}`` imported from each workload (held-out ones and training steps too).
    holdout : DataFrame
        Every op of the held-out runs, predicted and measured (median of the runs): ``model, op,
        op_type, op_class, measured_s, predicted_s, ratio`` (predicted / measured, as :func:`compare`).
    residuals : DataFrame
        Per held-out run and op class (``all``: end to end): ``model, run, op_class, measured_s,
        predicted_s, measured_over_predicted, share`` (the class's share of the predicted time) --
        what the cost file's ``residuals`` were taken from (:func:`holdout_residuals`).
    holdout_profiles : dict
        ``{held-out workload: Profile}`` (each op's median over the runs).
    metrics : dict
        ``peak_flops``, ``mem_bandwidth_Bps``, ``launch_overhead_s``, ``n_points``, ``n_curves``,
        ``fit_median_ratio``, ``fit_p10_ratio``, ``fit_p90_ratio`` (on the calibration points),
        ``threads``, ``duration_s``, ``load_1min`` (the machine's load when it started),
        ``thread_speedup`` (with more than one thread on a CPU: :func:`thread_speedup` when it
        started); with
        held-out workloads ``holdout_e2e_median_ratio`` / ``_min_`` / ``_max_`` (measured / predicted
        end to end) and ``n_holdout``.
    timeline : DataFrame
        The first workload's measured run.
    steps : tuple
        One per measurement and per fitted curve (what was measured, the numbers, why a curve is
        keyed by type or by class).
    """

    system: System
    cost: CalibratedCost
    points: pd.DataFrame = field(default_factory=pd.DataFrame)
    profiles: Mapping[str, Any] = field(default_factory=dict)
    graphs: Mapping[str, OpGraph] = field(default_factory=dict)
    holdout: pd.DataFrame = field(default_factory=pd.DataFrame)
    residuals: pd.DataFrame = field(default_factory=pd.DataFrame)
    holdout_profiles: Mapping[str, Any] = field(default_factory=dict)

    def save(self, system_path: str | Path | None = None, cost_path: str | Path | None = None) -> None:
        """Write the system YAML and/or the cost file."""
        from .io.systems import save_system

        if system_path is not None:
            save_system(self.system, system_path)
        if cost_path is not None:
            save_cost(self.cost, cost_path)


@dataclass(frozen=True, kw_only=True, eq=False)
class Comparison(Result):
    """A prediction set against a measured profile (see :func:`compare`).

    Attributes
    ----------
    ops : DataFrame
        ``op, op_type, measured_s, predicted_s, ratio`` (predicted / measured) per matched op.
    measured : DataFrame
        The measured timeline (the profile's).
    predicted : DataFrame
        The predicted timeline (``evaluate`` with every op on ``device``).
    metrics : dict
        ``measured_s`` (end to end: the profile's median iteration, or ``wall_s`` when given),
        ``predicted_s``, ``e2e_ratio``, ``median_ratio``, ``p10_ratio``, ``p90_ratio``, ``n_ops``;
        with a cost that kept held-out residuals also ``predicted_lo_s``, ``predicted_hi_s`` (the
        stated range) and ``in_range`` (1.0 when the measured time fell in it).
    """

    ops: pd.DataFrame = field(default_factory=pd.DataFrame)
    measured: pd.DataFrame = field(default_factory=make_timeline)
    predicted: pd.DataFrame = field(default_factory=make_timeline)

    def trace(self, path: str | Path | None = None) -> dict:
        """One Perfetto/Chrome trace with both runs: a ``measured`` and a ``predicted`` process."""
        from .timeline import to_chrome_trace

        both = pd.concat([self.measured.assign(group="measured", lane="measured " + self.measured["lane"].astype(str)),
                          self.predicted.assign(group="predicted", lane="predicted " + self.predicted["lane"].astype(str))],
                         ignore_index=True)
        return to_chrome_trace(make_timeline(both), path, name="hetsched calibration")


# ---------------------------------------------------------------------------- measuring
def _torch():
    from .optional import require

    return require("torch", "calibration")


def _stat_fn(stat: str) -> Callable[[Sequence[float]], float]:
    fns = {"median": statistics.median, "min": min, "mean": statistics.fmean}
    if stat not in fns:
        raise HetschedError(f"stat must be one of {sorted(fns)}, got {stat!r}", field="stat")
    return fns[stat]


def _sync(dev: str) -> None:
    if dev == "cuda":
        _torch().cuda.synchronize()


CLOCKS = ("profiler", "wall", "cpu")


def _now(clock: str) -> Callable[[], float]:
    if clock not in CLOCKS:
        raise HetschedError(f"clock must be one of {', '.join(CLOCKS)}, got {clock!r}", field="clock")
    return time.thread_time if clock == "cpu" else time.perf_counter


def timed_calls(fn: Callable[[], Any], repeats: int, dev: str = "cpu", clock: str = "wall",
                before: Callable[[], Any] | None = None) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn`` (after one untimed call), ``before()`` run
    untimed ahead of each.

    On ``dev="cuda"`` each call is bracketed by two CUDA events recorded on the current stream: the
    device's own time for the call's kernels, from the first kernel's start to the last one's end
    (``Event.elapsed_time``), read once after every call ran (one synchronisation, none between
    calls); on the CPU by ``clock`` (``wall``: ``time.perf_counter``, ``cpu``: the thread's time).

    >>> ts = timed_calls(lambda: sum(range(1000)), 3)
    >>> len(ts), all(t > 0 for t in ts)
    (3, True)
    """
    fn()
    _sync(dev)
    if dev == "cuda":
        cuda = _torch().cuda
        marks = []
        for _ in range(repeats):
            if before is not None:
                before()
            e0, e1 = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            marks.append((e0, e1))
        cuda.synchronize()
        return [e0.elapsed_time(e1) * 1e-3 for e0, e1 in marks]  # milliseconds
    now = _now(clock)
    ts = []
    for _ in range(repeats):
        if before is not None:
            before()
        t0 = now()
        fn()
        ts.append(now() - t0)
    return ts


def _time(fn: Callable[[], Any], repeats: int, stat: Callable, dev: str = "cpu", clock: str = "wall") -> float:
    return float(stat(timed_calls(fn, repeats, dev, clock)))


def measure_peak_flops(dev: str = "cpu", *, n: int | None = None, repeats: int = 5, stat: str = "median",
                       clock: str = "wall") -> float:
    """FLOP/s of an ``n x n`` single-precision matrix product (what vendors quote as peak); ``n``
    defaults to 2048 on a CPU, 8192 on a GPU (timed by CUDA events: the device's own peak).

    >>> measure_peak_flops(n=64, repeats=1) > 0
    True
    """
    torch = _torch()
    n = n or (8192 if dev == "cuda" else 2048)
    a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
    return 2.0 * n ** 3 / _time(lambda: a @ b, repeats, _stat_fn(stat), dev, clock)


def measure_bandwidth(dev: str = "cpu", *, nbytes: int | None = None, repeats: int = 5, stat: str = "median",
                      clock: str = "wall") -> float:
    """Bytes/s of a copy of ``nbytes`` (read + write), far larger than the caches (STREAM's copy):
    128 MiB on a CPU, 1 GiB on a GPU (whose last-level cache is tens of MiB).

    >>> measure_bandwidth(nbytes=1 << 16, repeats=1) > 0
    True
    """
    torch = _torch()
    nbytes = nbytes or (1 << 30 if dev == "cuda" else 1 << 27)
    x = torch.ones(nbytes // 4, device=dev)
    y = torch.empty_like(x)
    return 2.0 * x.numel() * 4 / _time(lambda: y.copy_(x), repeats, _stat_fn(stat), dev, clock)


def measure_launch(dev: str = "cpu", *, calls: int = 200, stat: str = "median", clock: str = "wall") -> float:
    """Seconds of an op that does no work (a ``view``): the launch overhead, by the profiler or a clock.

    On a GPU: an 8-element kernel between two CUDA events (the device's time from one launch to the
    next while the host keeps it fed).

    >>> 0 < measure_launch(calls=10) < 1e-3
    True
    """
    torch = _torch()
    x = torch.ones(8, device=dev)
    if dev == "cuda":
        return float(_stat_fn(stat)(timed_calls(lambda: x.add_(0.0), calls, "cuda")))
    if clock != "profiler":
        now = _now(clock)
        ts = []
        with torch.no_grad():
            for _ in range(calls):
                t0 = now()
                x.view(2, 4)
                ts.append(now() - t0)
        return float(_stat_fn(stat)(ts))
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            x.view(2, 4)
    durs = [e.cpu_time_total for e in prof.events() if e.name == "aten::view"]
    if not durs:  # pragma: no cover - the profiler always records aten::view
        return 0.0
    return float(_stat_fn(stat)(durs)) * 1e-6


def warm_allocator() -> bool:
    """Keep glibc's allocator from returning freed memory to the OS (Linux/glibc; else a no-op).

    With its defaults glibc unmaps (or trims) large freed blocks and the next allocation of that
    size page-faults again: a ResNet-50 forward at batch 8 takes ~40 000 minor page faults on the
    machine of ``bench/results/calibration.md`` (about 10 % of its time, none at batch 1), a cost
    of the allocator's state, not of the ops, that no per-op model predicts. jemalloc and tcmalloc
    (what PyTorch's CPU performance guide recommends) and GPU caching allocators keep the memory;
    this sets glibc to do the same (``M_MMAP_THRESHOLD`` 32 MiB, ``M_TRIM_THRESHOLD`` 1 GiB) for
    the calling process, for good. ``hetsched calibrate`` and the calibration benchmark call it
    before measuring; call it in the process whose runs you compare with a calibrated prediction.

    Returns whether the settings were applied.
    """
    import ctypes
    import ctypes.util

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # glibc malloc.h
        return bool(libc.mallopt(m_mmap_threshold, 32 << 20)) and bool(libc.mallopt(m_trim_threshold, 1 << 30))
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False


def thread_speedup(threads: int, *, n: int = 512, repeats: int = 20) -> float:
    """How much faster ``threads`` torch threads run an ``n x n`` float32 matrix product than one
    thread, now (median of ``repeats`` each; torch's thread count is restored).

    A calibration at several threads is only as good as the cores the machine gives it, and a
    virtual machine's cores come and go with its host's load: on the 2-vCPU VM of
    ``bench/results/`` two threads ran this product 1.9-2.0x faster than one in one hour and
    MobileNetV3 gained nothing from the second thread in another. :func:`calibrate` records the
    value (``metrics["thread_speedup"]``, the cost file's ``meta``); a measurement that probes it
    again can tell an error of the cost model from a machine that no longer delivers its cores.

    >>> thread_speedup(1)   # one thread against itself: nothing to measure
    1.0
    >>> 0.1 < thread_speedup(2, n=64, repeats=3) < 4.0
    True
    """
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise HetschedError(f"threads must be a positive integer, got {threads!r}", field="threads")
    if n < 1 or repeats < 1:
        raise HetschedError(f"n and repeats must be positive, got n={n!r}, repeats={repeats!r}", field="n")
    if threads == 1:
        return 1.0
    torch = _torch()
    prev = torch.get_num_threads()
    try:
        rate = {}
        for t in (1, threads):
            torch.set_num_threads(t)
            rate[t] = measure_peak_flops(n=n, repeats=repeats)
    finally:
        torch.set_num_threads(prev)
    return rate[threads] / rate[1]


# ---------------------------------------------------------------------------- the sweep
def _sweep_specs(types_seen: Iterable[str], quick: bool = False) -> list[tuple[str, str, dict]]:
    """``(name, op_type, spec)`` of the generic sweep points for the op types seen (fixed sizes);
    ``quick``: the smaller half of each range (for tests and demos)."""
    seen = set(types_seen)
    out: list[tuple[str, str, dict]] = []
    # 4 K .. 6 M elements: from 32 MiB on glibc maps every allocation afresh (page faults on each call,
    # also under warm_allocator, whose M_MMAP_THRESHOLD is 32 MiB and applies to requests >= it), which
    # no model with a warm allocator pays; an 8 M-element (32 MiB) output did, and its knot priced the
    # largest ops of ResNet-50 at batch 8 two to three times too slow
    sizes = [1 << k for k in (12, 14, 16, 18)] if quick else [1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, 3 << 21]
    # rows 1 and 4 are matrix-vector products, a curve of their own (cost.curve_type: Gemv): a batch-1
    # classifier, an LLM's decode step
    rows, ks, seqs = ((1, 16, 64, 256), (768,), (16, 32, 64)) if quick else ((1, 4, 16, 64, 256, 1024, 4096), (768, 2048),
                                                                              (16, 32, 64, 128, 256, 512))
    conv_shapes, batches = (((128, 28), (512, 7)), (1,)) if quick else (((64, 56), (128, 28), (256, 14), (512, 7)), (1, 4, 16))
    # a CNN's bottleneck widens and narrows its channels 4x with 1x1 convolutions: their activations
    # (4 c planes) leave the caches at batch sizes where a c -> c convolution's still fit, and such a
    # convolution gains nothing from a larger batch (ResNet-50's measure the same per image at batch
    # 8 as at batch 1) while a 3x3 one gains 10-40 %; batches up to 8: the 4 c planes of 64 x 56 x 56
    # at batch 16 are 51 MB, beyond the 32 MiB the allocator maps afresh (see sizes)
    wide_batches = (1,) if quick else (1, 4, 8)
    bn_shapes = tuple((m * c, h) for c, h in conv_shapes for m in (1, 4))
    unary = {"Relu": "relu", "Gelu": "gelu", "Tanh": "tanh", "Sigmoid": "sigmoid", "Erf": "erf", "Exp": "exp",
             "Neg": "neg", "Clip": "relu6"}
    binary = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
    for t, fn in unary.items():
        if t in seen:
            out += [(f"sweep/{t}/{n}", t, {"kind": "unary", "fn": fn, "n": n}) for n in sizes]
    for t, fn in binary.items():
        if t in seen:
            out += [(f"sweep/{t}/{n}", t, {"kind": "binary", "fn": fn, "n": n}) for n in sizes]
    if "BatchNormalization" in seen:
        # an inference batch norm loops over (image, channel) planes: its speed depends on the plane's
        # size, not only on the bytes (512 channels of 7x7 run at half the rate of 64 of 56x56), so it
        # is swept over the plane shapes of a CNN, like the convolutions, not over one long plane
        out += [(f"sweep/BatchNormalization/{c}x{h}/b{b}", "BatchNormalization", {"kind": "bn", "b": b, "c": c, "h": h})
                for c, h in bn_shapes for b in wide_batches]
    if "LayerNormalization" in seen:
        out += [(f"sweep/LayerNormalization/{n}", "LayerNormalization", {"kind": "ln", "n": n}) for n in sizes]
    if "Softmax" in seen:
        out += [(f"sweep/Softmax/{n}", "Softmax", {"kind": "softmax", "n": n}) for n in sizes]
    if "ReduceMean" in seen:
        # over the last dimension (a transformer's RMSNorm); the workloads' means are a training
        # step's loss and ResNet's pool, one each per graph (see fit_curves)
        out += [(f"sweep/ReduceMean/{n}", "ReduceMean", {"kind": "mean", "n": n}) for n in sizes]
    if "MaxPool" in seen:
        out += [(f"sweep/MaxPool/{n}", "MaxPool", {"kind": "maxpool", "n": n}) for n in sizes]
    if "GlobalAveragePool" in seen:
        out += [(f"sweep/GlobalAveragePool/{n}", "GlobalAveragePool", {"kind": "gap", "n": n}) for n in sizes]
    if "Gemm" in seen:
        out += [(f"sweep/Gemm/{m}x{k}", "Gemm", {"kind": "linear", "m": m, "k": k, "n": k}) for k in ks for m in rows]
    if "MatMul" in seen:
        out += [(f"sweep/MatMul/{s}", "MatMul", {"kind": "bmm", "b": 12, "s": s, "d": 64}) for s in seqs]
    if "MatMul" in seen or "Attention" in seen:
        # torch's fused attention (scaled_dot_product_attention: every transformers model, torchvision's
        # ViT): a workload that writes attention as matrix products and a softmax (the zoo's BERT) has
        # none, and the matmul class curve priced the SDPA of an unseen ViT, Llama and T5 at 0.79-0.81
        # of its time (1 thread; 0.62-0.72 at 2; with this curve 0.89-0.97 and 0.83-0.86)
        out += [(f"sweep/Attention/{s}", "Attention", {"kind": "sdpa", "b": 12, "s": s, "d": 64}) for s in seqs]
    if "Conv" in seen:
        out += [(f"sweep/Conv/{c}x{h}x{k}/b{b}", "Conv", {"kind": "conv", "b": b, "c": c, "h": h, "k": k, "co": c})
                for c, h in conv_shapes for k in (1, 3) for b in batches]
        # below a ResNet's smallest convolution (25 MFLOP): a mobile network's narrow ones (1-15 MFLOP,
        # 16-384 channels, 1x1 expansions by 6), where the curve would otherwise hold the efficiency of
        # the workloads' smallest flat: at 2 threads MobileNetV3's run at half of ResNet-50's
        if not quick:
            out += [(f"sweep/Conv/{ci}-{co}x{h}x{k}/b1", "Conv", {"kind": "conv", "b": 1, "c": ci, "h": h, "k": k, "co": co})
                    for c, h in ((16, 56), (32, 28), (64, 14)) for ci, co, k in ((c, c, 1), (c, c, 3), (c, 6 * c, 1), (6 * c, c, 1))]
        out += [(f"sweep/Conv/{ci}-{co}x{h}x1/b{b}", "Conv", {"kind": "conv", "b": b, "c": ci, "h": h, "k": 1, "co": co})
                for c, h in conv_shapes for ci, co in ((c, 4 * c), (4 * c, c)) for b in wide_batches]
        # depthwise 3x3 and 5x5 (one filter per channel, MobileNet's): a curve of their own (curve_type);
        # the wide planes of an inverted bottleneck (6 c channels), each activation under the 32 MiB the
        # allocator maps afresh (see sizes: 384 x 56 x 56 at batch 8 is 38.5 MB)
        out += [(f"sweep/DepthwiseConv/{m * c}x{h}x{k}/b{b}", "Conv",
                 {"kind": "conv", "b": b, "c": m * c, "h": h, "k": k, "co": m * c, "groups": m * c})
                for c, h in conv_shapes for m in (1, 6) for k in (3, 5) for b in wide_batches
                if 4 * b * m * c * h * h < 32 << 20]
    if "Conv_grad" in seen:
        # a training step's convolution backward (input and weight gradients), dense and depthwise: the
        # depthwise one has no workload points in a dense CNN, and the dense curve prices it 1.5x fast
        out += [(f"sweep/Conv_grad/{c}x{h}x{k}/b{b}", "Conv_grad", {"kind": "conv_grad", "b": b, "c": c, "h": h, "k": k,
                                                                     "co": c})
                for c, h in conv_shapes for k in (1, 3) for b in batches[:2]]
        out += [(f"sweep/DepthwiseConv_grad/{m * c}x{h}x{k}/b{b}", "Conv_grad",
                 {"kind": "conv_grad", "b": b, "c": m * c, "h": h, "k": k, "co": m * c, "groups": m * c})
                for c, h in conv_shapes for m in (1, 6) for k in (3, 5) for b in batches[:2]]
    return out


def sweep_graph(types_seen: Iterable[str], quick: bool = False) -> tuple[OpGraph, dict[str, dict]]:
    """The sweep as an OpGraph of independent ops (sizes, FLOPs and weights by the importer's rules)
    and the specs to run them; its op names are the annotations :func:`load_profile` matches.

    >>> g, specs = sweep_graph(["Relu", "Gemm"])
    >>> g.op("sweep/Relu/4096").flops, g.op("sweep/Gemm/16x768").flops
    (4096.0, 18886656.0)
    """
    from .io.flops import ELEMENTWISE_FLOPS

    g = OpGraph("calibration-sweep")
    specs: dict[str, dict] = {}
    for name, t, sp in _sweep_specs(types_seen, quick):
        kind, f4 = sp["kind"], 4
        w = 0
        if kind == "bn":
            n = sp["b"] * sp["c"] * sp["h"] ** 2
            ins, outs = [n], [n]
            flops = ELEMENTWISE_FLOPS.get(t, 1.0) * n
            w = 4 * sp["c"] * f4
        elif kind in ("unary", "binary", "ln", "softmax", "mean"):
            n = sp["n"]
            ins, outs = ([n, n] if kind == "binary" else [n]), [max(1, n // 768) if kind == "mean" else n]
            flops = ELEMENTWISE_FLOPS.get(t, 1.0) * n
            w = {"ln": 2 * 768}.get(kind, 0) * f4
        elif kind == "maxpool":
            n = sp["n"]
            hw = max(4, int(math.sqrt(n / 64)))
            ins, outs = [64 * hw * hw], [64 * ((hw + 1) // 2) ** 2]
            flops = 9.0 * outs[0]
            sp = {**sp, "hw": hw}
        elif kind == "gap":
            n = sp["n"]
            hw = max(1, int(math.sqrt(n / 256)))
            ins, outs = [256 * hw * hw], [256]
            flops = float(ins[0])
            sp = {**sp, "hw": hw}
        elif kind == "linear":
            m, k, nn = sp["m"], sp["k"], sp["n"]
            ins, outs = [m * k], [m * nn]
            flops = 2.0 * m * k * nn + m * nn
            w = (k * nn + nn) * f4
        elif kind == "bmm":
            b, s, d = sp["b"], sp["s"], sp["d"]
            ins, outs = [b * s * d, b * d * s], [b * s * s]
            flops = 2.0 * b * s * s * d
        elif kind == "sdpa":  # q, k, v in, the attended values out; FLOPs as the importer counts them
            b, s, d = sp["b"], sp["s"], sp["d"]
            ins, outs = [b * s * d] * 3, [b * s * d]
            flops = 4.0 * b * s * s * d + 5.0 * b * s * s
        elif kind == "conv":
            b, c, h, k, co, grp = sp["b"], sp["c"], sp["h"], sp["k"], sp.get("co", sp["c"]), sp.get("groups", 1)
            ins, outs = [b * c * h * h], [b * co * h * h]
            flops = 2.0 * b * co * h * h * (c // grp) * k * k
            w = (c // grp) * co * k * k * f4
        elif kind == "conv_grad":  # as the importer counts convolution_backward: input and weight gradient
            b, c, h, k, co, grp = sp["b"], sp["c"], sp["h"], sp["k"], sp["co"], sp.get("groups", 1)
            ins, outs = [b * co * h * h, b * c * h * h], [b * c * h * h, (c // grp) * co * k * k]
            flops = 2.0 * 2 * b * co * h * h * (c // grp) * k * k
            w = (c // grp) * co * k * k * f4
        else:  # pragma: no cover - every kind is listed above
            raise HetschedError(f"unknown sweep kind {kind!r}")
        g.add_op(name, t, flops=float(flops), weight_bytes=int(w),
                 attrs={"sweep": True, **({"groups": sp["groups"], "kernel": [sp["k"], sp["k"]]} if sp.get("groups", 1) > 1 else {})})
        for i, n_in in enumerate(ins):
            g.add_tensor(f"{name}:in{i}", n_in * f4, consumers=[name])
        for i, n_out in enumerate(outs):
            g.add_tensor(f"{name}:out{i}", n_out * f4, producer=name, is_output=True)
        specs[name] = sp
    return g, specs


def code_warm_spec(sp: Mapping[str, Any]) -> dict:
    """The sweep point ``sp``'s kind of op on a tiny input (a few KB): what the code-warm sweep
    (:func:`_profile_sweep` with ``warm_code``) runs between evicting the caches and rewriting the
    timed op's input, so that the kernel's code, the dispatcher's tables and the pages they sit on
    are back in the caches and TLB while the op's data is not.

    Why: in a small model the op before is another kernel a few microseconds earlier, so this path
    is warm; after the 64 MiB eviction alone a depthwise 3x3 convolution of 184 x 14 x 14 took 168 us
    against 70 us warm and 92 us with a tiny convolution run in between (1 thread, this project's
    EPYC), which priced MobileNetV3's depthwise convolutions 2x slow. :func:`fit_curves` takes the
    code-warm points for curves whose level is the sweep's; the trend beyond workload points and
    the cold curves keep the plain eviction (in a graph beyond the caches the neighbours of an op do
    evict its code: ResNet-50 at batch 8 was priced 15 % fast per op with code-warm cold curves).

    >>> code_warm_spec({"kind": "conv", "b": 8, "c": 384, "h": 56, "k": 5, "co": 384, "groups": 384})
    {'kind': 'conv', 'b': 1, 'c': 8, 'h': 5, 'k': 5, 'co': 8, 'groups': 8}
    >>> code_warm_spec({"kind": "linear", "m": 64, "k": 3072, "n": 768})
    {'kind': 'linear', 'm': 4, 'k': 64, 'n': 64}
    """
    out = dict(sp)
    kind = out["kind"]
    if kind in ("unary", "binary"):
        out["n"] = 256
    elif kind in ("ln", "mean"):
        out["n"] = 768
    elif kind == "softmax":
        out["n"] = 128
    elif kind in ("maxpool", "gap"):
        out["hw"] = 4
    elif kind == "bn":
        out.update(b=1, c=8, h=4)
    elif kind == "linear":
        out.update(m=min(out["m"], 4), k=64, n=64)
    elif kind in ("bmm", "sdpa"):
        out.update(b=1, s=8)
    elif kind in ("conv", "conv_grad"):
        depthwise = out.get("groups", 1) > 1
        out.update(b=1, c=8, h=max(4, out["k"]), co=8)
        if depthwise:
            out["groups"] = 8
    return out


def _sweep_callable(sp: dict, dev: str) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """``(run, produce)`` of a sweep point: ``run`` times the op; ``produce`` rewrites, in place, the
    input a model's previous op would just have written (the activation; not the weights, nor the
    second operand of a binary op, which in a model was written earlier: a residual branch)."""
    torch = _torch()
    F = torch.nn.functional
    kind = sp["kind"]

    def rewrite(x):
        return lambda: x.mul_(1.0)  # a write of every element, values (and so the op's speed) unchanged

    if kind == "unary":
        x = torch.randn(sp["n"], device=dev)
        fn = {"relu6": F.relu6, "gelu": F.gelu}.get(sp["fn"]) or getattr(torch, sp["fn"])
        return (lambda: fn(x)), rewrite(x)
    if kind == "binary":
        x, y = torch.randn(sp["n"], device=dev), torch.rand(sp["n"], device=dev) + 0.5
        fn = getattr(torch, sp["fn"])
        return (lambda: fn(x, y)), rewrite(x)
    if kind == "bn":
        x = torch.randn(sp["b"], sp["c"], sp["h"], sp["h"], device=dev)
        rm, rv, w, b = (torch.rand(sp["c"], device=dev) + 0.5 for _ in range(4))
        return (lambda: F.batch_norm(x, rm, rv, w, b, False)), rewrite(x)
    if kind == "ln":
        x = torch.randn(max(1, sp["n"] // 768), 768, device=dev)
        w, b = torch.ones(768, device=dev), torch.zeros(768, device=dev)
        return (lambda: F.layer_norm(x, (768,), w, b)), rewrite(x)
    if kind == "mean":
        x = torch.randn(max(1, sp["n"] // 768), 768, device=dev)
        return (lambda: x.mean(-1, keepdim=True)), rewrite(x)
    if kind == "softmax":
        x = torch.randn(max(1, sp["n"] // 128), 128, device=dev)
        return (lambda: torch.softmax(x, -1)), rewrite(x)
    if kind == "maxpool":
        x = torch.randn(1, 64, sp["hw"], sp["hw"], device=dev)
        return (lambda: F.max_pool2d(x, 3, 2, 1)), rewrite(x)
    if kind == "gap":
        x = torch.randn(1, 256, sp["hw"], sp["hw"], device=dev)
        return (lambda: F.adaptive_avg_pool2d(x, 1)), rewrite(x)
    if kind == "linear":
        x = torch.randn(sp["m"], sp["k"], device=dev)
        lin = torch.nn.Linear(sp["k"], sp["n"]).to(dev)
        return (lambda: lin(x)), rewrite(x)
    if kind == "bmm":
        q = torch.randn(1, sp["b"], sp["s"], sp["d"], device=dev)
        k = torch.randn(1, sp["b"], sp["d"], sp["s"], device=dev)
        return (lambda: torch.matmul(q, k)), (lambda: (q.mul_(1.0), k.mul_(1.0)))  # both are a model's activations
    if kind == "sdpa":
        q, k, v = (torch.randn(1, sp["b"], sp["s"], sp["d"], device=dev) for _ in range(3))
        return (lambda: F.scaled_dot_product_attention(q, k, v)), (lambda: (q.mul_(1.0), k.mul_(1.0), v.mul_(1.0)))
    if kind == "conv":
        x = torch.randn(sp["b"], sp["c"], sp["h"], sp["h"], device=dev)
        conv = torch.nn.Conv2d(sp["c"], sp.get("co", sp["c"]), sp["k"], padding=sp["k"] // 2, bias=False,
                               groups=sp.get("groups", 1)).to(dev).eval()
        return (lambda: conv(x)), rewrite(x)
    if kind == "conv_grad":
        grp = sp.get("groups", 1)
        x = torch.randn(sp["b"], sp["c"], sp["h"], sp["h"], device=dev)
        w = torch.randn(sp["co"], sp["c"] // grp, sp["k"], sp["k"], device=dev)
        go = torch.randn(sp["b"], sp["co"], sp["h"], sp["h"], device=dev)
        pad = [sp["k"] // 2] * 2
        return (lambda: torch.ops.aten.convolution_backward(go, x, w, None, [1, 1], pad, [1, 1], False, [0, 0], grp,
                                                            [True, True, False])), rewrite(go)
    raise HetschedError(f"unknown sweep kind {kind!r}")  # pragma: no cover


def _profile_sweep(g: OpGraph, specs: Mapping[str, dict], dev: str, repeats: int, stat: str,
                   clock: str = "profiler", warm_code: bool = False) -> dict[str, float]:
    """``{sweep op: seconds}``: by the profiler (annotations matched by :func:`load_profile`) or a clock;
    ``warm_code``: with a tiny op of each point's kind between the eviction and the timed call
    (:func:`code_warm_spec`)."""
    torch = _torch()
    from torch.profiler import ProfilerActivity, profile, record_function

    from .io.profile import load_profile

    calls = {name: _sweep_callable(sp, dev) for name, sp in specs.items()}
    warm = {name: _sweep_callable(code_warm_spec(sp), dev)[0] for name, sp in specs.items()} if warm_code else {}
    # in a model an op reads what the previous op wrote, not what it read itself a moment ago: before
    # each timed call evict the caches (no warm re-reads, weights come from memory) and then rewrite
    # the op's activation input, as its producer would have: as much of it as the caches hold is
    # found there, the rest streams from memory. Flushing alone timed every input from DRAM, which
    # priced the ReLUs of ResNet-50 at batch 8 (3-13 MB, read right after their batch norm wrote them)
    # 1.4x too slow and made batch-1 convolutions look slower than in a model (a cold input), hence
    # a too-steep gain with batch. The eviction *reads* 64 MiB: writing them would leave the caches
    # full of dirty lines whose write-back the timed op would pay (a cost no op in a model pays).
    # With warm_code a tiny op of the same kind runs between the two and brings the kernel's code back
    buf = torch.ones(1 << 24, device=dev)

    def prepare(name: str, produce: Callable[[], Any]) -> None:
        buf.sum()
        if warm_code:
            warm[name]()
        produce()

    if clock != "profiler":
        fn_stat = _stat_fn(stat)
        with torch.no_grad():
            return {name: float(fn_stat(timed_calls(fn, repeats, dev, clock,
                                                    before=lambda n=name, pr=produce: prepare(n, pr))))
                    for name, (fn, produce) in calls.items()}
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    with torch.no_grad():
        for fn, _ in calls.values():
            fn()
        with profile(activities=acts) as prof:
            for _ in range(repeats):
                for name, (fn, produce) in calls.items():
                    prepare(name, produce)
                    with record_function(name):
                        fn()
                _sync(dev)
        doc = _trace_of(prof)
    return dict(load_profile(doc, g, device=dev, stat=stat).latency_s)


def _trace_of(prof) -> dict:
    import json
    import tempfile

    fd, tmp = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(tmp)
        return json.loads(Path(tmp).read_text())
    finally:
        os.unlink(tmp)


# ---------------------------------------------------------------------------- fitting
def _bins(lw_sorted: np.ndarray, bin_decades: float) -> list[tuple[int, int]]:
    """``[(i, j), ...]``: the bins of ``bin_decades`` over sorted log10 works, from the smallest up."""
    out, i = [], 0
    while i < len(lw_sorted):
        j = i + 1
        while j < len(lw_sorted) and lw_sorted[j] - lw_sorted[i] < bin_decades:
            j += 1
        out.append((i, j))
        i = j
    return out


def _bin_layers(lw: np.ndarray, layers: np.ndarray, bin_decades: float, presorted: bool = False) -> list[int]:
    """Per bin (as :func:`_knots` bins), the most distinct ops one graph has in it; ``layers`` holds a
    ``(graph, op)`` pair per point.

    >>> _bin_layers(np.log10([1e-5, 1e-5, 1e-3]), np.array([("m", "a"), ("m train", "a"), ("m", "b")]), 0.25)
    [1, 1]
    """
    if not presorted:
        order = np.argsort(lw, kind="stable")
        lw, layers = lw[order], layers[order]
    return [max(Counter(src for src, _ in {tuple(x) for x in layers[i:j].tolist()}).values())
            for i, j in _bins(lw, bin_decades)]


def _knots(lw: np.ndarray, eff: np.ndarray, bin_decades: float, monotone: bool = False,
           layers: np.ndarray | None = None, min_edge_layers: int = 1) -> tuple[list[float], list[float]]:
    """Median efficiency per bin of ``bin_decades`` in log10(work), from the smallest work up;
    ``monotone``: made non-decreasing (pool-adjacent-violators, bins weighted by their points).
    ``layers`` (one ``(graph, op)`` pair per point) with ``min_edge_layers``: the smallest and the
    largest bins are dropped while no graph has that many ops in them and another bin is left (see
    :func:`fit_curves`).

    >>> lw = np.log10([3e-4, 3e-4, 1e-3, 1.1e-3, 1e-3])
    >>> ids = np.array([("m", "a"), ("m train", "a1"), ("m", "b"), ("m", "c"), ("m train", "b1")])
    >>> _knots(lw, np.array([0.7, 0.7, 1.0, 1.0, 1.1]), 0.25, layers=ids, min_edge_layers=2)[1]
    [1.0]
    """
    order = np.argsort(lw, kind="stable")
    lw, eff = lw[order], eff[order]
    ws, es, ns = [], [], []
    for i, j in _bins(lw, bin_decades):
        ws.append(float(10 ** np.mean(lw[i:j])))
        es.append(float(np.median(eff[i:j])))
        ns.append(j - i)
    nl = _bin_layers(lw, layers[order], bin_decades, presorted=True) if layers is not None else list(ns)
    while len(ws) > 1 and nl[0] < min_edge_layers:
        del ws[0], es[0], ns[0], nl[0]
    while len(ws) > 1 and nl[-1] < min_edge_layers:
        del ws[-1], es[-1], ns[-1], nl[-1]
    if monotone:
        es = _isotonic(es, ns)
    return ws, es


def _isotonic(y: Sequence[float], w: Sequence[float]) -> list[float]:
    """Weighted least-squares non-decreasing fit (pool adjacent violators).

    >>> [round(v, 4) for v in _isotonic([0.3, 0.7, 0.5, 0.2, 0.6], [1, 1, 1, 1, 1])]
    [0.3, 0.4667, 0.4667, 0.4667, 0.6]
    """
    blocks: list[list[float]] = []  # [mean, weight, count]
    for v, wt in zip(y, w):
        blocks.append([float(v), float(wt), 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            m2, w2, c2 = blocks.pop()
            m1, w1, c1 = blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, c1 + c2])
    return [m for m, _, c in blocks for _ in range(c)]


def _monotone_time(knots: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Knots ``(work_s, efficiency)`` (sorted by work) whose times ``work / efficiency`` never fall
    as work grows: a knot timed above a larger one gets the larger one's time.

    Why: more work of one op type does not take less time; a bin that does is a few ops the curve
    cannot tell apart (small ops right after a large one, whose kernel code and pages it evicted).
    Kept, the elementwise class of a ResNet-50 + BERT calibration priced an 8 KB op at 13 us where
    its neighbours of 0.1x and 1.5x its work measured 2-3 us, and every 1-8 KB hard sigmoid of an
    unseen MobileNetV3 at 11-18 us (measured 4 us).

    >>> [(w, round(e, 3)) for w, e in _monotone_time([(1e-6, 0.1), (2e-6, 0.1), (4e-6, 1.0)])]
    [(1e-06, 0.25), (2e-06, 0.5), (4e-06, 1.0)]
    """
    out = list(knots)
    for i in range(len(out) - 2, -1, -1):
        w, e = out[i]
        t_next = out[i + 1][0] / out[i + 1][1]
        if w / e > t_next:
            out[i] = (w, w / t_next)
    return out


def fit_curves(points: pd.DataFrame, *, min_points: int = MIN_POINTS_PER_TYPE,
               bin_decades: float = BIN_DECADES) -> tuple[dict[str, EfficiencyCurve], LazySteps, pd.Series]:
    """Efficiency curves from points ``(source, op_type, work_s, efficiency)``.

    One curve per op type with at least ``min_points`` points, one per op class over every point
    of the class (what prices a type of that class the calibration did not see, or saw too
    rarely), and a ``default`` over every point but optimizer updates. Within a curve the workload points (``source != "sweep"``: ops
    timed inside real models) set the level where they exist -- their median per bin of
    ``bin_decades`` decades of work is a knot; beyond the workloads' range of work the generic
    sweep sets the *trend*: above the largest workload knot ``(w1, e1)`` a sweep knot at work ``w``
    takes the workload's time at ``w1`` plus the time the sweep adds from ``w1`` to ``w``,
    ``w / (w1 / e1 + w / e_sweep(w) - w1 / e_sweep(w1))``; below the smallest it scales the
    efficiency by the code-warm sweep's ratio (``source == "sweep_warm"``, see
    :func:`code_warm_spec`; the plain sweep's without it), clamped to 4x either way. Isolated
    micro-benchmarks run with warm caches and fixed arguments (a division by a tensor, not by a
    Python number), so their absolute efficiency is not the in-model one, but what more work
    costs is. With a sweep to carry the trend, the smallest and the largest workload bins that hold
    no more than one op of any one graph are left out (one layer in one place of its model does
    not set the level of every smaller op). A curve with no workload point is the sweep's, and so
    is one whose workloads never ran two of its ops in one graph at one size (single layers, such
    as ResNet-50's one pool in its inference and training graphs): one layer's time is its place in
    its model, which its layer factor keeps. Such a curve takes the code-warm sweep's points when
    there are any.

    Returns ``(curves, steps, key)``: one ``fit_curve`` step per curve (a read-only step log), the
    curve key each point went to in ``key``.

    >>> pts = pd.DataFrame({"source": ["m"] * 4 + ["sweep"] * 3 + ["m"],
    ...                     "op_type": ["Conv"] * 7 + ["Relu"],
    ...                     "work_s": [1e-5, 1.2e-5, 1e-4, 1.2e-4, 1e-4, 1e-3, 1e-2, 1e-6],
    ...                     "efficiency": [0.2, 0.2, 0.4, 0.4, 0.8, 1.6, 1.6, 0.5]})
    >>> curves, steps, key = fit_curves(pts)
    >>> sorted(curves), key.tolist()[-2:]
    (['Conv', 'conv', 'default', 'elementwise'], ['Conv', 'elementwise'])
    >>> [round(curves["Conv"](w), 3) for w in (1.1e-5, 1.1e-4, 1e-3, 1.0)]   # past 1e-4 the sweep's added time
    [0.2, 0.402, 1.304, 1.564]
    """
    pts = points[(points["work_s"] > 0) & (points["efficiency"] > 0) & np.isfinite(points["efficiency"])]
    if "source" not in pts:
        pts = pts.assign(source="workload")
    # the sweep timed with the kernel's code warm sets only curves whose level is the sweep's
    warm_pts = pts[pts["source"] == "sweep_warm"]
    pts = pts[pts["source"] != "sweep_warm"]
    counts = pts["op_type"].value_counts()
    key = pts["op_type"].where(pts["op_type"].map(counts) >= min_points, pts["op_type"].map(op_class))
    curves: dict[str, EfficiencyCurve] = {}
    steps = StepLog()
    # a class's curve takes every point of the class (it prices the class's types the calibration
    # never saw, not only its rare ones); the default leaves out optimizer updates, Python loops over
    # a parameter's few tensors whose fixed cost would price an unknown kernel 10-100x too slow
    cls = pts["op_type"].map(op_class)
    from .io.train_step import UPDATE_TYPES

    own = [k for k in counts.index if counts[k] >= min_points]
    updates = set(UPDATE_TYPES.values())

    def members(frame: pd.DataFrame, k: str) -> pd.DataFrame:
        """The points of ``frame`` that curve ``k`` is fitted over."""
        if k in own:
            return frame[frame["op_type"] == k]
        if k == "default":
            kernels = frame[~frame["op_type"].isin(updates)]
            return kernels if len(kernels) else frame
        return frame[frame["op_type"].map(op_class) == k]

    keys = [*own, *(c for c in dict.fromkeys(cls) if c not in own), "default"]
    for k in keys:
        sub = members(pts, k)
        if not len(sub):
            continue
        is_sweep = (sub["source"] == "sweep").to_numpy()
        lw = np.log10(sub["work_s"].to_numpy(float))
        eff = sub["efficiency"].to_numpy(float)
        # a compute-bound kernel does not get less efficient with more work; a drop across a class's
        # bins comes from mixing shapes (a 3x3 convolution on a 2x2 image), which layer factors carry
        mono = k in MONOTONE or op_class(k) in MONOTONE
        sw, se = _knots(lw[is_sweep], eff[is_sweep], bin_decades, mono) if is_sweep.any() else ([], [])
        # with a sweep to carry the trend, an edge bin that holds one layer of each graph does not
        # set the level beyond it: ResNet-50's first 1x1 convolution (64 -> 64 at 56x56, right after
        # the max pool) ran at 0.72-0.84 of the reference roofline where the sweep's same shape ran
        # at 0.93 and its other 1x1s at 1.0-1.1; as the Conv curve's smallest knot it priced every
        # smaller convolution, MobileNetV3's 1x1s (1.0-1.2), 1.3-1.6x slow
        ids = (sub.loc[~is_sweep, ["source", "op"]].astype(str).to_numpy() if "op" in sub and "source" in sub
               else None)
        ww, we = (_knots(lw[~is_sweep], eff[~is_sweep], bin_decades, mono, ids,
                         MIN_LAYERS_FOR_LEVEL if len(sw) >= 2 and ids is not None else 1)
                  if (~is_sweep).any() else ([], []))
        how = "workload points" if ww else "sweep points"
        # the most ops one graph ran of the type at one size: 1 when its points are single layers,
        # each in its own place (a training step's loss mean, ResNet-50's pool as a mean: 28-83 us
        # for 4-400 KB, which priced T5's and Llama's RMSNorm means 2-3x)
        n_layers = (max(_bin_layers(lw[~is_sweep], ids, bin_decades)) if ids is not None and len(ids)
                    else int((~is_sweep).sum()))
        if ww and len(sw) >= 2 and k in own and n_layers < MIN_LAYERS_FOR_LEVEL:
            # a type's only layer is its place in its model (ResNet-50's one global average pool
            # runs after 2.4 MB convolutions evicted its code: 86 us in the model, 15 us alone and
            # in a MobileNet's squeeze-excite blocks); its layer factor keeps that for its model,
            # the sweep's curve prices the type elsewhere
            ww, we = [], []
            how = (f"sweep points (the workloads had at most {n_layers} op(s) of this type in one graph at one "
                   f"size, fewer than {MIN_LAYERS_FOR_LEVEL})")
        wsub = members(warm_pts, k) if len(warm_pts) else warm_pts
        bw, be = (_knots(np.log10(wsub["work_s"].to_numpy(float)), wsub["efficiency"].to_numpy(float), bin_decades,
                         mono) if len(wsub) else ([], []))
        if not ww and bw:
            # a level from the sweep: its code-warm timing, as an op a few microseconds after
            # another kernel runs in a model (the trend above workload knots and the cold curves
            # stay with the plain eviction: their neighbours in a large graph do evict)
            sw, se = bw, be
            how += ", timed with the kernel's code warm"
        if ww and len(sw) >= 2:
            trend = EfficiencyCurve(sw, se)
            lo, hi = ww[0], ww[-1]
            t_hi = hi / we[-1]
            above = []
            for w in sw:
                if w > hi * 10 ** bin_decades:
                    # the workload's time at its largest size plus the time the sweep adds from there
                    t = t_hi + w / trend(w) - hi / trend(hi)
                    if t > t_hi:
                        above.append((w, w / t))
            # below the workloads' range the trend is the code-warm sweep's: there an op is small,
            # a few microseconds after the op before it (MobileNetV3's 1-15 MFLOP convolutions ran
            # at ResNet-50's in-model level, where the plain eviction's trend priced them 1.2-1.6x)
            low, low_w = (EfficiencyCurve(bw, be), bw) if len(bw) >= 2 else (trend, sw)
            below = [(w, we[0] * min(4.0, max(0.25, low(w) / low(lo)))) for w in low_w if w < lo / 10 ** bin_decades]
            if above or below:
                how = f"workload points, the sweep's trend beyond them ({len(below)} knot(s) below, {len(above)} above)"
            knots = [*below, *zip(ww, we), *above]
        elif ww:
            knots = list(zip(ww, we))
        else:
            knots = list(zip(sw, se))
        knots = _monotone_time(knots)
        curves[k] = EfficiencyCurve([w for w, _ in knots], [e for _, e in knots], n_points=len(sub))
        why = ("its own curve: enough points of this op type" if k in own
               else "the default: every point but optimizer updates" if k == "default"
               else f"op class {k!r}: every point of the class (types without a curve of their own)")
        es = [e for _, e in knots]
        steps.add("fit_curve", k, after=float(np.median(eff)), accepted=True,
                  reason=f"{len(sub)} point(s) ({int((~is_sweep).sum())} in workloads) -> {len(knots)} knot(s), "
                         f"efficiency {min(es):.3g}..{max(es):.3g}; {why}; level from {how}",
                  data={"work_s": [w for w, _ in knots], "efficiency": es, "types": sorted(set(sub["op_type"]))})
    full_key = pd.Series(pd.NA, index=points.index, dtype=object)
    full_key.loc[key.index] = key
    return curves, steps.freeze(), full_key


def median_runs(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per op, the median of its times over independent runs (an op missing from a run: over the others).

    On a machine shared with other jobs, contention comes and goes over seconds: one run of a model
    or of the sweep can be 20 % slower across all its memory-bound ops. The median of three
    independent runs ignores one such run whole, which an order statistic within a run (whose
    repeats share the contention) cannot.

    >>> median_runs([{"a": 1.0, "b": 2.0}, {"a": 1.2, "b": 9.0}, {"a": 0.9}])
    {'a': 1.0, 'b': 5.5}
    """
    ops: dict[str, list[float]] = {}
    for run in runs:
        for o, t in run.items():
            ops.setdefault(o, []).append(float(t))
    return {o: float(statistics.median(ts)) for o, ts in ops.items()}


def robust_layer_factors(factors: Mapping[str, Sequence[float]], groups: Mapping[str, str] | None = None
                         ) -> dict[str, tuple[float, float]]:
    """``{op: (factor, spread)}``: per op, its layer factors of independent runs combined and shrunk toward 1.

    ``factors`` gives each op's factor (measured / curves) in each run; ``groups`` (e.g. the op
    types) pools the noise estimate. In log space, the op's factor is the median ``L`` over the
    runs and its noise ``s`` the larger of its own spread over the runs (1.4826 x the median
    absolute deviation from ``L``) and the median spread of its group; the factor kept is
    ``exp(L * L^2 / (L^2 + s^2))``: a factor well above the run-to-run noise (a 1x1 convolution
    that runs 30 % below its class, in every run) is kept, one within the noise (a ReLU 10 % off in
    one run and 10 % the other way in the next) goes to 1 (shrinkage, as of a James-Stein
    estimator). With one run there is no spread to judge by and the factor is kept as measured.

    >>> fs = robust_layer_factors({"conv": [1.30, 1.31, 1.29], "relu": [1.15, 0.87, 1.02],
    ...                            "add": [1.0, 1.02, 3.0]}, {"conv": "Conv", "relu": "Relu", "add": "Add"})
    >>> {o: round(f, 3) for o, (f, _) in fs.items()}   # the run at 3.0 does not count
    {'conv': 1.299, 'relu': 1.0, 'add': 1.006}
    >>> robust_layer_factors({"x": [0.5]})["x"]
    (0.5, 0.0)
    """
    logs = {o: np.log(np.asarray([f for f in fs if f > 0 and math.isfinite(f)], float)) for o, fs in factors.items()}
    logs = {o: v for o, v in logs.items() if len(v)}
    med = {o: float(np.median(v)) for o, v in logs.items()}
    own = {o: 1.4826 * float(np.median(np.abs(v - med[o]))) if len(v) > 1 else float("nan") for o, v in logs.items()}
    grp = groups or {}
    pooled: dict[str, list[float]] = {}
    for o, sp in own.items():
        if math.isfinite(sp):
            pooled.setdefault(grp.get(o, ""), []).append(sp)
    pool = {k: float(np.median(v)) for k, v in pooled.items()}
    out = {}
    for o, L in med.items():
        sp = own[o]
        if not math.isfinite(sp):  # one run: nothing to judge the noise by
            out[o] = (float(math.exp(L)), 0.0)
            continue
        s = max(sp, pool.get(grp.get(o, ""), 0.0))
        w = L * L / (L * L + s * s) if L * L + s * s > 0 else 1.0
        out[o] = (float(math.exp(w * L)), s)
    return out


def fit_cold_curves(points: pd.DataFrame, *, bin_decades: float = BIN_DECADES) -> dict[str, EfficiencyCurve]:
    """Per op type, the efficiency curve of the sweep points alone (``source == "sweep"``).

    Every sweep point is timed after the caches were evicted and its activation input rewritten
    (not the code-warm points, ``source == "sweep_warm"``: in a graph beyond the caches an op's
    neighbours evict its code too), so these curves are what an op achieves when only what its producer just wrote can be in the
    caches (all of it for a small op, the tail of it for one beyond the last-level cache; weights
    and older tensors from memory): :class:`~hetsched.cost.CalibratedCost` prices a
    memory-bound op with them once its graph no longer fits the caches (its "cold ops"), where the
    workload curves, measured in models that fit, would carry their in-cache efficiency.

    >>> pts = pd.DataFrame({"source": ["sweep"] * 2 + ["m"], "op_type": ["Relu"] * 3,
    ...                     "work_s": [1e-5, 1e-3, 1e-4], "efficiency": [0.3, 0.9, 2.0]})
    >>> c = fit_cold_curves(pts)["Relu"]
    >>> c.work_s, c.efficiency
    ([1e-05, 0.001], [0.3, 0.9])
    """
    pts = points[(points["source"] == "sweep") & (points["work_s"] > 0) & (points["efficiency"] > 0)
                 & np.isfinite(points["efficiency"])]
    out: dict[str, EfficiencyCurve] = {}
    for t, sub in pts.groupby("op_type"):
        ws, es = _knots(np.log10(sub["work_s"].to_numpy(float)), sub["efficiency"].to_numpy(float), bin_decades)
        out[str(t)] = EfficiencyCurve(ws, es, n_points=len(sub))
    return out


def _cache_bytes() -> dict[str, float]:
    """``{"private": bytes, "last_level": bytes}`` of cpu0 from Linux sysfs (the level-2 cache, else
    the level-1 data cache; the highest level), or ``{}`` where sysfs does not say."""
    sizes: dict[int, int] = {}
    try:
        for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
            if (d / "type").read_text().strip() == "Instruction":
                continue
            txt = (d / "size").read_text().strip().upper()
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(txt[-1:], 1)
            sizes[int((d / "level").read_text())] = int(txt.rstrip("KMG")) * mult
    except (OSError, ValueError):
        return {}
    if len(sizes) < 2:
        return {}
    private = sizes.get(2, sizes[min(sizes)])
    return {"private": float(private), "last_level": float(sizes[max(sizes)])}


def _work(op, nbytes: float, dev: Device, combine: str) -> float:
    a, b = op.flops / dev.peak_flops_for(op.op_type), nbytes / dev.mem_bandwidth_Bps
    return a + b if combine == "sum" else max(a, b)


def _points(graph: OpGraph, latency: Mapping[str, float], ref: RooflineCost, dev: Device, launch_s: float,
            source: str, combine: str = WORK) -> list[dict]:
    rows = []
    for o, t in latency.items():
        op = graph.op(o)
        nbytes, launch_only = ref.traffic_bytes(op)
        if launch_only:
            continue
        work = _work(op, nbytes, dev, combine)
        eff = work / (t - launch_s) if t > launch_s and work > 0 else float("nan")
        rows.append({"source": source, "op": o, "op_type": curve_type(op), "flops": op.flops, "bytes": nbytes,
                     "work_s": work, "measured_s": t, "efficiency": eff})
    return rows


# ---------------------------------------------------------------------------- the entry point
def _workload(w: Any) -> tuple[str, Any, tuple]:
    """``(label, module, inputs)`` of a workload spec: a zoo name, ``(name, options)``, or ``(module, inputs)``."""
    from .io.torch_zoo import torch_model

    if isinstance(w, str):
        w = (w, {})
    if isinstance(w, (tuple, list)) and len(w) == 2 and isinstance(w[0], str) and isinstance(w[1], Mapping):
        name, opts = w
        opts = dict(opts)
        m, x = torch_model(name, **opts)
        size = ",".join(f"{k}={v}" for k, v in opts.items())
        return (f"{name}({size})" if size else name), m, x
    if isinstance(w, (tuple, list)) and len(w) in (2, 3):
        label = w[2] if len(w) == 3 else type(w[0]).__name__
        return str(label), w[0], tuple(w[1])
    raise HetschedError(f"a workload is a zoo name, (name, options) or (module, inputs[, label]); got {w!r}",
                        field="workloads")


def parse_workload(spec: str) -> tuple[str, dict]:
    """A workload from the command line: ``name[:option=value,...]`` (a zoo model with a torch twin).

    >>> parse_workload("bert_base:seq_len=64,batch=1")
    ('bert_base', {'seq_len': 64, 'batch': 1})
    >>> parse_workload("resnet50:batch")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: workload 'resnet50:batch': options are option=integer, separated by commas
    """
    name, _, rest = spec.partition(":")
    opts: dict[str, int] = {}
    for part in filter(None, rest.split(",")):
        k, eq, v = part.partition("=")
        try:
            if not eq:
                raise ValueError
            opts[k.strip()] = int(v)
        except ValueError:
            raise HetschedError(f"workload {spec!r}: options are option=integer, separated by commas",
                                field="workloads") from None
    return name.strip(), opts


def calibrate(workloads: Sequence[Any] = DEFAULT_WORKLOADS, *, holdout: Sequence[Any] = DEFAULT_HOLDOUT,
              training: Sequence[str] = (), device: str = "cpu", repeats: int = 7,
              runs: int = DEFAULT_RUNS, warmup: int = 2, stat: str = "median", clock: str = "wall", threads: int | None = None,
              sweep: bool | str = True,
              system_name: str = "local", system_path: str | Path | None = None,
              cost_path: str | Path | None = None, progress: Callable[[str], None] | None = None) -> Calibration:
    """Measure this machine and fit a shape-aware cost model (see the module notes).

    Parameters
    ----------
    workloads : sequence
        Zoo names (``"resnet50"``), ``(name, options)`` (``("bert_base", {"seq_len": 64})``) or
        ``(module, example_inputs[, label])`` of your own (an ``nn.Module`` in eval mode).
    holdout : sequence
        Workloads (same forms) measured in every run but never fitted (default
        :data:`DEFAULT_HOLDOUT`): the cost predicts them and keeps what it got wrong per op class,
        the error range every result priced with it states (:func:`holdout_residuals`; the cost
        file's ``residuals``). ``()``: no error range.
    training : sequence of str
        Optimizers (``"sgd"``, ``"adam"``): every workload and held-out workload is also measured
        as a training step with each (:mod:`hetsched.io.train_step`: the joint forward + backward
        program and the optimizer's update of every parameter), so backward ops, training-mode
        batch norms and parameter updates get their own curves, and training steps their residuals.
    device : {"cpu", "cuda"}
        ``cuda`` also calibrates the host CPU's peaks and the host link (both devices in the system);
        the workloads run on the GPU.
    repeats, warmup : int
        Profiled and unprofiled runs per workload and per sweep point.
    runs : int
        Independent runs of every workload and of the sweep (default :data:`DEFAULT_RUNS`); each op's
        time is the median over the runs (:func:`median_runs`) and its layer factor is shrunk toward
        1 by its run-to-run spread (:func:`robust_layer_factors`). ``runs=1``: one run, the factors
        as measured.
    stat : {"median", "min", "mean"}
        Over the repeats (``min`` on a shared, loaded machine).
    clock : {"wall", "cpu", "profiler"}
        How ops are timed: ``wall`` -- each FX node of the workload's program timed as it runs
        (:func:`hetsched.io.profile.time_torch`); ``cpu`` -- the same with the thread's CPU time,
        which ignores time spent waiting for a core on a loaded machine (needs ``threads=1``);
        ``profiler`` -- the eager module under ``torch.profiler``, events matched to the ops by
        :func:`~hetsched.io.profile.load_profile` (wall clock; the only one for CUDA kernels).
    threads : int, optional
        Torch intra-op threads for the whole run (default: torch's current setting); restored after.
    sweep : bool or "quick"
        Add the generic size sweep to the workloads' points (``"quick"``: its smaller half, for
        tests and demos).
    system_name : str
        The name of the system written (the cost file is made for it).
    system_path, cost_path : path, optional
        Where to write the system YAML and the cost file.
    progress : callable, optional
        Called with a line of text at each stage (the CLI prints them).

    Returns
    -------
    Calibration

    Examples
    --------
    >>> import torch
    >>> r = calibrate([(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()).eval(), (torch.randn(4, 64),), "mlp")],
    ...               holdout=(), repeats=2, warmup=1, threads=1, sweep=False, system_name="doc")
    >>> r.system.device_names, sorted(r.profiles), r.metrics["n_points"]
    (['cpu0'], ['mlp'], 2.0)
    """
    torch = _torch()
    t_start = time.perf_counter()
    if device not in ("cpu", "cuda"):
        raise HetschedError(f"device must be 'cpu' or 'cuda', got {device!r}", field="device")
    if device == "cuda" and not torch.cuda.is_available():
        raise HetschedError("device='cuda' but torch sees no CUDA device", field="device")
    if not isinstance(repeats, int) or repeats < 1:
        raise HetschedError(f"repeats must be a positive integer, got {repeats!r}", field="repeats")
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise HetschedError(f"runs must be a positive integer, got {runs!r}", field="runs")
    _stat_fn(stat)
    _now(clock)
    if device == "cuda" and clock == "cpu":
        raise HetschedError("device='cuda' times kernels with CUDA events (clock='wall') or the profiler, not the "
                            "host thread's CPU time", field="clock")
    if sweep not in (True, False, "quick"):
        raise HetschedError(f"sweep must be True, False or 'quick', got {sweep!r}", field="sweep")
    if not workloads and not sweep:
        raise HetschedError("nothing to measure: give workloads or keep the sweep", field="workloads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise HetschedError(f"threads must be a positive integer, got {threads!r}", field="threads")
    if clock == "cpu" and (threads if threads is not None else torch.get_num_threads()) != 1:
        raise HetschedError(f"clock='cpu' times one thread: calibrate with threads=1, not "
                            f"{threads if threads is not None else torch.get_num_threads()}", field="threads")
    say = progress or (lambda _m: None)
    resolved = [_workload(w) for w in workloads]  # bad specs fail before minutes of measuring
    resolved_holdout = [_workload(w) for w in holdout]
    labels = [r[0] for r in resolved + resolved_holdout]
    if len(set(labels)) != len(labels):
        dup = next(x for x in labels if labels.count(x) > 1)
        raise HetschedError(f"workload {dup!r} is given twice (a held-out workload must not be a calibration one)",
                            field="holdout")
    training = tuple(training)
    from .io.train_step import OPTIMIZERS

    bad = [o for o in training if o not in OPTIMIZERS]
    if bad:
        raise HetschedError(f"training names unknown optimizer {bad[0]!r}; known: {', '.join(OPTIMIZERS)}", field="training")

    prev_threads = torch.get_num_threads()
    if threads is not None:
        if not isinstance(threads, int) or threads < 1:
            raise HetschedError(f"threads must be a positive integer, got {threads!r}", field="threads")
        torch.set_num_threads(threads)
    try:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        steps = StepLog()
        n_threads = torch.get_num_threads()
        if clock == "cpu" and n_threads != 1:
            raise HetschedError(f"clock='cpu' times one thread: calibrate with threads=1, not {n_threads}", field="threads")
        # what the machine's cores deliver at this moment (a later measurement can probe it again)
        speedup = thread_speedup(n_threads) if device == "cpu" and n_threads > 1 else None
        dev_t = device
        mclock = "wall" if clock == "profiler" else clock

        def step(action: str, subject: str, value: float, reason: str) -> None:
            steps.add(action, subject, after=float(value), accepted=True, reason=reason)
            say(reason)

        say(f"calibrating {device} with {n_threads} torch thread(s), {clock} clock, 1-min load {load:.1f}")
        peak = measure_peak_flops(dev_t, repeats=repeats, stat=stat, clock=mclock)
        n_mm = 8192 if device == "cuda" else 2048
        step("measure_peak_flops", dev_t, peak, f"peak: {peak / 1e9:.1f} GFLOP/s ({n_mm}^3 single-precision matrix product"
             + (", CUDA events)" if device == "cuda" else ")"))
        bw = measure_bandwidth(dev_t, repeats=repeats, stat=stat, clock=mclock)
        step("measure_bandwidth", dev_t, bw, f"memory bandwidth: {bw / 1e9:.1f} GB/s "
             f"({'1 GiB' if device == 'cuda' else '128 MiB'} copy, read + write)")
        launch = measure_launch(dev_t, stat=stat, clock=clock)
        step("measure_launch", dev_t, launch, f"launch overhead: {launch * 1e6:.2f} us "
             + ("(an 8-element kernel, CUDA events)" if device == "cuda" else f"(a view op, no work; {clock} clock)"))

        devices, links = [], []
        mem_bytes = _ram_bytes()
        host_attrs = {"cpu": _cpu_name(), "threads": n_threads, "torch": str(torch.__version__),
                      "calibrated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                      "source": "hetsched.calibrate: measured peak (sgemm), copy bandwidth, launch of a view op"}
        name = "gpu0" if device == "cuda" else "cpu0"
        if device == "cuda":
            hp, hb = measure_peak_flops("cpu", repeats=repeats, stat=stat), measure_bandwidth("cpu", repeats=repeats, stat=stat)
            devices.append(Device("cpu0", "cpu", {"default": hp}, mem_bytes, hb, measure_launch("cpu", stat=stat),
                                  attrs=host_attrs))
            devices.append(gpu_device(torch.cuda.get_device_properties(0), peak, bw, launch,
                                      torch_version=str(torch.__version__), calibrated=host_attrs["calibrated"]))
            pcie, lat = _measure_h2d(repeats, stat)
            links.append(Link("cpu0", "gpu0", pcie, lat, attrs={"source": "hetsched.calibrate: pinned host-to-device copies "
                                                                           "(64 MiB for the bandwidth, 4 KiB for the latency)"}))
            step("measure_link", "cpu0->gpu0", pcie, f"host link: {pcie / 1e9:.1f} GB/s, latency {lat * 1e6:.1f} us "
                                                     "(pinned copies, CUDA events)")
        else:
            devices.append(Device("cpu0", "cpu", {"default": peak}, mem_bytes, bw, launch, attrs=host_attrs))
        system = System(devices, links, host="cpu0", name=system_name,
                        meta={"source": "hetsched.calibrate", "load_1min": load})
        dev = system.device(name)
        ref = RooflineCost(system)

        rows: list[dict] = []
        profiles: dict[str, Any] = {}
        graphs: dict[str, OpGraph] = {}
        runs_of: dict[str, list[Any]] = {}  # every run's Profile per workload
        holdout_runs: dict[str, list[Any]] = {}  # every run's Profile per held-out workload
        sweep_runs: list[dict[str, float]] = []
        warm_runs: list[dict[str, float]] = []
        types_seen: set[str] = set()
        view_times: dict[str, list[float]] = {}
        from .io.profile import load_profile, profile_torch, time_torch
        from .io.torch_import import load_torch

        # every job: (label, role, module, inputs, optimizer); "fit" jobs give the points, "holdout"
        # jobs are only predicted (their residuals are the calibration's error range)
        jobs = [(label, "fit", module, inputs, None) for label, module, inputs in resolved]
        jobs += [(label, "holdout", module, inputs, None) for label, module, inputs in resolved_holdout]
        for opt in training:
            # a training step trains its own copy of the model (train mode, parameters updated)
            jobs += [(f"{label} train {opt}", role, copy.deepcopy(module), inputs, opt)
                     for label, role, module, inputs, _ in jobs[:len(resolved) + len(resolved_holdout)]]
        if device == "cuda":
            jobs = [(label, role, module.to("cuda"), tuple(x.to("cuda") if hasattr(x, "to") else x for x in inputs), opt)
                    for label, role, module, inputs, opt in jobs]
        steps_of: dict[str, Any] = {}  # a training job's TrainingStep, built on its first run

        def measure(label: str, module: Any, inputs: tuple, opt: str | None):
            if opt is not None:
                from .io.train_step import time_training_step, training_step

                if label not in steps_of:
                    steps_of[label] = training_step(module, inputs, optimizer=opt, name=label.split(" train ")[0])
                    graphs[label] = steps_of[label].graph
                return time_training_step(steps_of[label], repeats=repeats, warmup=warmup, stat=stat, device=name,
                                          clock="cuda" if device == "cuda" else "wall" if clock == "profiler" else clock)
            module.eval()
            if label not in graphs:
                import warnings

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # ATen ops without a FLOP rule: priced as memory-bound
                    graphs[label] = load_torch(module, inputs, name=label)
            g = graphs[label]
            if clock == "profiler":
                doc = profile_torch(module, inputs, repeats=repeats, warmup=warmup, annotate=False)
                return load_profile(doc, g, device=name, stat=stat)
            return time_torch(module, inputs, g, repeats=repeats, warmup=warmup, stat=stat, device=name,
                              clock="cuda" if device == "cuda" else clock)

        sg, specs = None, {}  # the sweep is built after the first run, once the op types are known
        for run in range(runs):
            # run by run (workloads, then the sweep), so that a spell of contention from other jobs
            # spoils one run of each, which the median over the runs then ignores
            for label, role, module, inputs, opt in jobs:
                t0 = time.perf_counter()
                prof = measure(label, module, inputs, opt)
                g = graphs[label]
                (runs_of if role == "fit" else holdout_runs).setdefault(label, []).append(prof)
                if role == "fit":
                    types_seen |= {g.op(o).op_type for o in prof.latency_s}
                step("profile_workload" if role == "fit" else "profile_holdout", f"{label} run {run + 1}",
                     prof.metrics["match_rate"],
                     f"{label}{' (held out: predicted, not fitted)' if role == 'holdout' else ''}"
                     f"{f' (run {run + 1} of {runs})' if runs > 1 else ''}: {g.n_ops} ops, "
                     f"{prof.metrics['match_rate']:.0%} matched, {'step' if opt else 'iteration'} "
                     f"{prof.metrics['iteration_s'] * 1e3:.1f} ms ({time.perf_counter() - t0:.1f} s)")
            if sweep:
                if run == 0:  # the op types are known once every workload ran
                    sg, specs = sweep_graph(types_seen or {"Relu", "Add", "Gemm", "MatMul", "Conv"},
                                            quick=sweep == "quick")
                if specs:
                    t0 = time.perf_counter()
                    sweep_runs.append(_profile_sweep(sg, specs, dev_t, repeats, stat, clock))
                    warm_runs.append(_profile_sweep(sg, specs, dev_t, repeats, stat, clock, warm_code=True))
                    step("sweep", f"generic sizes run {run + 1}", float(len(sweep_runs[-1])),
                         f"sweep{f' (run {run + 1} of {runs})' if runs > 1 else ''}: {len(sweep_runs[-1])} size(s) "
                         f"({time.perf_counter() - t0:.1f} s)")
        for label, ps in runs_of.items():
            g = graphs[label]
            lat = median_runs([p.latency_s for p in ps])
            its = [p.metrics["iteration_s"] for p in ps]
            prof = _replace(ps[0], latency_s=lat,
                            samples={o: tuple(t for p in ps for t in p.samples.get(o, ())) for o in lat},
                            metrics={**ps[0].metrics, "iteration_s": float(statistics.median(its)),
                                     "total_s": float(sum(lat.values())), "n_runs": float(len(ps))})
            profiles[label] = prof
            bound = ref.bind(g)
            for o, t in lat.items():
                if bound.traffic_bytes(g.op(o))[1]:
                    view_times.setdefault(g.op(o).op_type, []).append(t)
            new = _points(g, lat, bound, dev, launch, label)
            rows += new
            if runs > 1:
                spread = [max(v) / min(v) - 1 for v in (
                    [p.latency_s[o] for p in ps if o in p.latency_s] for o in lat) if len(v) > 1 and min(v) > 0]
                step("combine_runs", label, float(statistics.median(spread)) if spread else 0.0,
                     f"{label}: per-op median of {len(ps)} runs -> {len(new)} point(s); iterations "
                     + ", ".join(f"{t * 1e3:.1f}" for t in its) + " ms; an op's max/min over the runs: median "
                     f"{(statistics.median(spread) if spread else 0.0):+.1%}")
        all_views = [t for ts in view_times.values() for t in ts]
        launch_by_type = {t: float(statistics.median(ts)) for t, ts in view_times.items() if len(ts) >= 3}
        if len(all_views) >= 5:
            # the views of the workloads cost what a launch costs *inside a model* (dispatch, no work)
            launch = float(statistics.median(all_views))
            step("measure_launch", "workload views", launch,
                 f"launch overhead: {launch * 1e6:.2f} us (median of {len(all_views)} view ops of the workloads; "
                 + ", ".join(f"{t} {v * 1e6:.2f} us" for t, v in sorted(launch_by_type.items())) + ")")
            for r in rows:
                t = r["measured_s"]
                r["efficiency"] = r["work_s"] / (t - launch) if t > launch and r["work_s"] > 0 else float("nan")
            system = system.with_devices({name: _replace(system.device(name), launch_overhead_s=launch)})
            dev = system.device(name)
        if sweep_runs:
            new = _points(sg, median_runs(sweep_runs), ref.bind(sg), dev, launch, "sweep")
            rows += new + _points(sg, median_runs(warm_runs), ref.bind(sg), dev, launch, "sweep_warm")
            step("sweep", "generic sizes", float(len(new)),
                 f"sweep: {len(new)} point(s) over {len({r['op_type'] for r in new})} op type(s)"
                 + (f", per-size median of {len(sweep_runs)} runs" if len(sweep_runs) > 1 else ""))
        points = pd.DataFrame(rows, columns=["source", "op", "op_type", "flops", "bytes", "work_s", "measured_s", "efficiency"])
        curves, fit_steps, key = fit_curves(points)
        if not curves:
            raise HetschedError("no measurement above the launch overhead: nothing to fit", field="workloads")
        steps.extend(fit_steps)
        spec = {"peak_flops": peak, "mem_bandwidth_Bps": bw, "launch_overhead_s": launch,
                "launch_by_type": launch_by_type, "curves": curves, "work": WORK}
        cold, cache = fit_cold_curves(points), _cache_bytes()
        if cold and cache and device == "cpu":
            # the caches of the calibrated CPU (sysfs), and what its op types achieve beyond them
            spec.update(cache_bytes=cache, cold_curves=cold)
            step("cold_curves", "sweep", float(len(cold)),
                 f"cold curves: {len(cold)} op type(s) from the sweep (caches evicted, input rewritten), "
                 "for memory-bound ops beyond the "
                 f"{cache['private'] / 2**20:.3g} MiB private cache in graphs beyond the "
                 f"{cache['last_level'] / 2**20:.3g} MiB last-level cache")
        curve_only = CalibratedCost(system, {name: spec})
        layers: dict[str, dict[str, dict]] = {}
        n_shrunk, n_layers = 0, 0
        for label in runs_of:
            g = graphs[label]
            bound, model = curve_only.bind(g), model_id(g)
            rows_l = layers.setdefault(model, {})
            per_run: dict[str, list[float]] = {}
            for o in profiles[label].latency_s:
                op = g.op(o)
                pred_o = bound.curve_s(op, dev)
                if pred_o > 0:
                    per_run[o] = [p.latency_s[o] / pred_o for p in runs_of[label] if p.latency_s.get(o, 0) > 0]
            robust = robust_layer_factors(per_run, {o: g.op(o).op_type for o in per_run})
            for o, (f, _) in robust.items():
                op = g.op(o)
                rows_l[o] = {"op_type": op.op_type, "weight_bytes": int(op.weight_bytes), "factor": f}
                raw = float(np.median(per_run[o]))
                n_layers += 1
                n_shrunk += abs(math.log(f)) < 0.5 * abs(math.log(raw)) if raw > 0 else 0
        step("layer_factors", "workloads", float(n_layers),
             f"layer factors: {n_layers} op(s) of {len(layers)} model(s) keep what they measured relative to the "
             "curves (applied to the same layers at other sizes)"
             + (f"; the median of {runs} runs, shrunk toward 1 by their run-to-run spread ({n_shrunk} op(s) to less "
                "than half their log factor: within the noise)" if runs > 1 else ""))
        meta = {"machine": _cpu_name(), "platform": platform.platform(), "threads": n_threads,
                "torch": str(torch.__version__), "stat": stat, "clock": clock, "repeats": repeats,
                "runs": runs, "load_1min": load, "workloads": list(profiles), "holdout": list(holdout_runs),
                "training": list(training), "sweep": sweep,
                "date": host_attrs["calibrated"], "python": sys.version.split()[0]}
        if speedup is not None:
            meta["thread_speedup"] = round(float(speedup), 3)
        spec = {**spec, "layers": layers, "threads": n_threads if device == "cpu" else None}
        cost = CalibratedCost(system, {name: spec}, meta=meta)
        holdout_ops, holdout_frame, residuals = holdout_residuals(cost, name, holdout_runs)
        if residuals:
            cost = CalibratedCost(system, {name: {**spec, "residuals": residuals}}, meta=meta)
            step("residuals", "held-out models", float(len(holdout_frame)),
                 f"error range: {len(holdout_runs)} held-out run(s) predicted, not fitted; measured / predicted per op "
                 "class " + ", ".join(f"{k} {r['lo']:.2f}-{r['hi']:.2f}" for k, r in residuals.items())
                 + f" (the largest miss either way, widened by {RESIDUAL_MARGIN:.0%})")
        points["key"] = key
        pred = []
        for r in points.itertuples():  # by the curves alone: how well they fit (layer factors make it exact)
            hit = cost.curve_for(name, r.op_type)
            pred.append(launch + r.work_s / hit[1](r.work_s) if hit else float("nan"))
        points["predicted_s"] = pred
        points["ratio"] = points["predicted_s"] / points["measured_s"]
        ratios = points["ratio"].dropna()
        q = ratios.quantile([0.1, 0.5, 0.9]) if len(ratios) else pd.Series([float("nan")] * 3, index=[0.1, 0.5, 0.9])
        duration = time.perf_counter() - t_start
        metrics = {"peak_flops": peak, "mem_bandwidth_Bps": bw, "launch_overhead_s": launch, "n_points": float(len(points)),
                   "n_curves": float(len(curves)), "fit_median_ratio": float(q[0.5]), "fit_p10_ratio": float(q[0.1]),
                   "fit_p90_ratio": float(q[0.9]), "threads": float(n_threads), "duration_s": duration, "load_1min": load, "runs": float(runs)}
        if speedup is not None:
            metrics["thread_speedup"] = float(speedup)
        if len(holdout_frame):
            e2e = holdout_frame[holdout_frame["op_class"] == "all"]["measured_over_predicted"]
            metrics.update(holdout_e2e_median_ratio=float(e2e.median()), holdout_e2e_min_ratio=float(e2e.min()),
                           holdout_e2e_max_ratio=float(e2e.max()), n_holdout=float(len(holdout_runs)))
        first = next(iter(profiles.values()), None)
        result = Calibration(system=system, cost=cost, points=points, profiles=profiles, graphs=graphs, metrics=metrics,
                             holdout=holdout_ops, residuals=holdout_frame,
                             holdout_profiles={k: _combined(v) for k, v in holdout_runs.items()},
                             timeline=first.timeline if first is not None else make_timeline([]), steps=steps,
                             params={"workloads": list(profiles), "device": device, "repeats": repeats, "runs": runs, "warmup": warmup,
                                     "stat": stat, "clock": clock, "threads": n_threads, "sweep": sweep, "system_name": system_name})
        result.save(system_path, cost_path)
        say(f"done in {duration:.1f} s: {len(curves)} curve(s) from {len(points)} point(s)")
        return result
    finally:
        torch.set_num_threads(prev_threads)


def _combined(ps: Sequence[Any]) -> Any:
    """One Profile of several runs of a workload: each op's median over the runs (:func:`median_runs`),
    the median iteration."""
    lat = median_runs([p.latency_s for p in ps])
    its = [p.metrics["iteration_s"] for p in ps]
    return _replace(ps[0], latency_s=lat,
                    samples={o: tuple(t for p in ps for t in p.samples.get(o, ())) for o in lat},
                    metrics={**ps[0].metrics, "iteration_s": float(statistics.median(its)),
                             "total_s": float(sum(lat.values())), "n_runs": float(len(ps))})


def holdout_residuals(cost: CalibratedCost, device: str, runs: Mapping[str, Sequence[Any]], *,
                      margin: float = RESIDUAL_MARGIN, min_share: float = RESIDUAL_MIN_SHARE
                      ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, dict[str, float]]]:
    """Predict held-out runs with ``cost`` and keep what it got wrong, per op class.

    ``runs``: ``{model: [Profile, ...]}`` -- independent measured runs of models the cost was not
    fitted on. For each run and op class, ``measured / predicted`` of the class's summed time, the
    measured per-op times scaled by the run's end-to-end time over their sum (so that the classes
    together give the end-to-end ratio, class ``all``); a class below ``min_share`` of the
    predicted time is left out of that run (its few ops are noise). Per class the range kept is
    symmetric in log space: ``[1 / f, f]`` with ``f = (1 + margin) x max(r, 1 / r)`` over the runs'
    ratios ``r`` -- the largest miss either way, stated both ways: a held-out model's bias shows
    how far the curves can be off, not that an unseen model is off in the same direction.

    Returns ``(ops, frame, residuals)``: the per-op table (each op's median over the runs), the
    per-run-and-class table, and ``{class: {"lo", "hi", "n"}}`` (the cost file's ``residuals``).

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.profile import load_profile
    >>> from hetsched.system import Device, System
    >>> from hetsched.timeline import to_chrome_trace
    >>> from hetsched import evaluate
    >>> s = System([Device("cpu0", "cpu", {"default": 1e11}, mem_bandwidth_Bps=1e10)])
    >>> c = CalibratedCost(s, {"cpu0": {"peak_flops": 1e11, "mem_bandwidth_Bps": 1e10}})
    >>> g = chain(3)
    >>> p = load_profile(to_chrome_trace(evaluate(g, s, {o: "cpu0" for o in g}, cost=c).timeline), g, device="cpu0")
    >>> ops, frame, res = holdout_residuals(c, "cpu0", {"chain": [p]}, margin=0.0)
    >>> res["all"]["lo"] == res["all"]["hi"] == 1.0, sorted(res)
    (True, ['all', 'conv'])
    """
    op_rows, rows = [], []
    for label, ps in runs.items():
        if not ps:
            continue
        g = ps[0].graph
        bound = cost.bind(g)
        pred = {o: float(bound.compute_s(g.op(o), device)) for o in g.ops}
        total_pred = sum(pred.values())
        cls = {o: op_class(g.op(o).op_type) for o in g.ops}
        for o, t in median_runs([p.latency_s for p in ps]).items():
            op_rows.append({"model": label, "op": o, "op_type": g.op(o).op_type, "op_class": cls[o], "measured_s": t,
                            "predicted_s": pred[o], "ratio": pred[o] / t if t > 0 else float("nan")})
        for i, p in enumerate(ps):
            lat = p.latency_s
            tot = sum(lat.values())
            e2e = float(p.metrics.get("iteration_s", tot))
            scale = e2e / tot if tot > 0 else 1.0
            meas_k: dict[str, float] = {}
            pred_k: dict[str, float] = {}
            for o, t in lat.items():
                meas_k[cls[o]] = meas_k.get(cls[o], 0.0) + t * scale
                pred_k[cls[o]] = pred_k.get(cls[o], 0.0) + pred[o]
            for k in sorted(pred_k):
                share = pred_k[k] / total_pred if total_pred > 0 else 0.0
                if share >= min_share and pred_k[k] > 0:
                    rows.append({"model": label, "run": i + 1, "op_class": k, "measured_s": meas_k[k],
                                 "predicted_s": pred_k[k], "measured_over_predicted": meas_k[k] / pred_k[k],
                                 "share": share})
            if total_pred > 0:
                rows.append({"model": label, "run": i + 1, "op_class": "all", "measured_s": e2e, "predicted_s": total_pred,
                             "measured_over_predicted": e2e / total_pred, "share": 1.0})
    ops = pd.DataFrame(op_rows, columns=["model", "op", "op_type", "op_class", "measured_s", "predicted_s", "ratio"])
    frame = pd.DataFrame(rows, columns=["model", "run", "op_class", "measured_s", "predicted_s", "measured_over_predicted",
                                        "share"])
    res = {}
    for k, sub in frame.groupby("op_class", sort=True):
        r = sub["measured_over_predicted"].to_numpy(float)
        # symmetric in log space: the largest miss either way, both ways (a held-out model's bias says
        # how far the curves can be off, not that an unseen model is off in the same direction)
        w = float(np.max(np.abs(np.log(r)))) + math.log1p(margin)
        res[str(k)] = {"lo": math.exp(-w), "hi": math.exp(w), "n": int(len(r))}
    return ops, frame, res


def gpu_device(props: Any, peak_flops: float, bandwidth_Bps: float, launch_s: float, *, torch_version: str = "",
               calibrated: str = "", name: str = "gpu0") -> Device:
    """The calibrated GPU as the system file carries it: its measured peak, bandwidth and launch, its
    memory and identity from ``torch.cuda.get_device_properties`` (``props``).

    >>> from types import SimpleNamespace
    >>> p = SimpleNamespace(name="H200", total_memory=141 * 2**30, multi_processor_count=132, major=9, minor=0)
    >>> d = gpu_device(p, 5e13, 4e12, 5e-6)
    >>> d.kind, d.memory_bytes == 141 * 2**30, d.attrs["gpu"], d.attrs["compute_capability"]
    ('gpu', True, 'H200', '9.0')
    """
    attrs = {"gpu": str(props.name), "torch": torch_version, "calibrated": calibrated,
             "source": "hetsched.calibrate: CUDA events around a large sgemm, a 1 GiB copy and an 8-element kernel"}
    if hasattr(props, "multi_processor_count"):
        attrs["sm_count"] = int(props.multi_processor_count)
    if hasattr(props, "major"):
        attrs["compute_capability"] = f"{props.major}.{props.minor}"
    return Device(name, "gpu", {"default": float(peak_flops)}, int(props.total_memory), float(bandwidth_Bps),
                  float(launch_s), attrs=attrs)


def _measure_h2d(repeats: int, stat: str) -> tuple[float, float]:  # pragma: no cover - needs a GPU
    """``(bandwidth_Bps, latency_s)`` of pinned host-to-device copies (64 MiB; 4 KiB), CUDA events."""
    torch = _torch()
    big, small = torch.ones(1 << 24).pin_memory(), torch.ones(1 << 10).pin_memory()
    st = _stat_fn(stat)
    lat = _time(lambda: small.to("cuda", non_blocking=True), repeats, st, "cuda")
    t = _time(lambda: big.to("cuda", non_blocking=True), repeats, st, "cuda")
    return big.numel() * 4 / max(t - lat, 1e-12), lat


def _ram_bytes() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 2**34


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # pragma: no cover
        pass
    return platform.processor() or platform.machine()


# ---------------------------------------------------------------------------- simulated vs measured
def compare(profile, cost: CostModel | str | Path | None, system: System, *, device: str | None = None,
            wall_s: float | None = None) -> Comparison:
    """Predict the profiled graph with ``cost`` on ``system`` and set it against the measurement.

    Every op runs on ``device`` (default: the profile's) in the measured order; the prediction is
    :func:`hetsched.evaluate`'s timeline. ``wall_s`` (an unprofiled end-to-end time) replaces the
    profile's median iteration as the measured end-to-end time when given. A profile measured with
    another torch thread count than ``cost`` was calibrated with is refused
    (:class:`~hetsched.errors.ThreadMismatchError`).

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.io.profile import load_profile
    >>> from hetsched import evaluate
    >>> from hetsched.timeline import to_chrome_trace
    >>> g, s = chain(4), toy_system()
    >>> p = load_profile(to_chrome_trace(evaluate(g, s, {o: "gpu0" for o in g}).timeline), g, device="gpu0")
    >>> c = compare(p, None, s)
    >>> round(c.metrics["median_ratio"], 6), c.metrics["n_ops"]
    (1.0, 4.0)
    """
    from .evaluate import evaluate

    g = profile.graph
    dev = device or profile.device
    system.device(dev)
    cm = resolve_cost(cost, g, system)
    threads = (profile.params or {}).get("threads")
    if threads is not None and isinstance(cm, CalibratedCost):
        cm.check_threads(int(threads), dev)  # a 2-thread run is not what a 1-thread calibration predicts
    order = [o for o in profile.timeline.sort_values("start_s")["op"]] if len(profile.timeline) else list(g.ops)
    order += [o for o in g.topological_order() if o not in set(order)]
    try:
        ev = evaluate(g, system, {o: dev for o in g.ops}, cost=cost, order=order, check_memory=False, check_support=False)
    except HetschedError:
        ev = evaluate(g, system, {o: dev for o in g.ops}, cost=cost, check_memory=False, check_support=False)
    pred_tl = ev.timeline
    comp = pred_tl[pred_tl["kind"] == "compute"]
    pred = dict(zip(comp["op"], comp["end_s"] - comp["start_s"]))
    rows = [{"op": o, "op_type": g.op(o).op_type, "measured_s": t, "predicted_s": pred.get(o, float("nan"))}
            for o, t in profile.latency_s.items()]
    ops = pd.DataFrame(rows, columns=["op", "op_type", "measured_s", "predicted_s"])
    ops["ratio"] = ops["predicted_s"] / ops["measured_s"]
    r = ops["ratio"].replace([np.inf, -np.inf], np.nan).dropna()
    q = r.quantile([0.1, 0.5, 0.9]) if len(r) else pd.Series([float("nan")] * 3, index=[0.1, 0.5, 0.9])
    measured = float(wall_s) if wall_s is not None else float(profile.metrics.get("iteration_s", float("nan")))
    predicted = float(ev.metrics["makespan_s"])
    metrics = {"measured_s": measured, "predicted_s": predicted, "e2e_ratio": predicted / measured if measured else float("nan"),
               "median_ratio": float(q[0.5]), "p10_ratio": float(q[0.1]), "p90_ratio": float(q[0.9]),
               "n_ops": float(len(ops))}
    if "makespan_lo_s" in ev.metrics:  # the calibration's stated range, and whether the measurement fell in it
        lo, hi = ev.metrics["makespan_lo_s"], ev.metrics["makespan_hi_s"]
        metrics.update(predicted_lo_s=lo, predicted_hi_s=hi, in_range=float(lo <= measured <= hi))
    return Comparison(ops=ops, measured=profile.timeline, predicted=pred_tl, metrics=metrics, timeline=pred_tl,
                      params={"device": dev, "cost": type(cm).__name__, "graph": g.name})


class _CallableModule(types.ModuleType):
    """``hetsched.calibrate(...)`` calls :func:`calibrate`; ``hetsched.calibrate.compare`` etc. stay reachable."""

    def __call__(self, *args: Any, **kwargs: Any) -> Calibration:
        return calibrate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
