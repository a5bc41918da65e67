"""Builders of the executor's bundled graphs (``data/graphs/executor_*.json``).

Five graphs show the sides of the executor patent (:func:`thread_rules_graph`: every thread rule
fires; :func:`multi_device_graph`: kernels on several devices and a synchronous copy engine; and
the two below):

* :func:`d2h_branch_graph` -- a GPU trunk of convolutions with *side branches* that copy an
  intermediate result to the host (a blocking device-to-host copy) and post-process it on the CPU
  (logging a metric, decoding detections), as detectors and training loops with host-side metrics
  do. One host thread stalls on each branch and starves the GPU; the patent's thread rules move
  the blocking work to a sync thread and keep launching kernels.
* :func:`inception_graph` and :func:`randwire_gpu_graph` -- all-GPU graphs with many independent
  kernels (GoogLeNet-style cells, Szegedy et al. CVPR 2015; randomly wired networks, Xie et al.
  ICCV 2019): nothing blocks the host, so the patent's threads change nothing, and its single
  async stream serializes independent kernels; Nimble's streams (Kwon et al. 2020) run them
  concurrently.

FLOPs are chosen so that kernels take tens of microseconds on the default executor system
(:func:`~hetsched.executor.costs.executor_system`: 80 TFLOP/s for convolutions), i.e. a few times
the ~8 us the host needs to dispatch and launch one, as in the small-batch inference Nimble targets.

Regenerate the bundled files (deterministic) with
``python -c "from hetsched.executor.graphs import write_bundled; write_bundled()"``.

>>> g = d2h_branch_graph(n_layers=8, branch_every=4); g.validate()
>>> sorted({o.op_type for o in g.ops.values()})
['Conv', 'MemcpyD2H', 'MemcpyH2D', 'PostProcess']
"""

from __future__ import annotations

import random
from pathlib import Path

from ..errors import HetschedError
from ..graph import OpGraph

__all__ = ["d2h_branch_graph", "inception_graph", "randwire_gpu_graph", "thread_rules_graph", "multi_device_graph",
           "BUNDLED", "write_bundled"]

MiB = 1 << 20


def _pos(**kw) -> None:
    for k, v in kw.items():
        if not isinstance(v, int) or v < 1:
            raise HetschedError(f"{k} must be a positive integer, got {v!r}", field=k)


def d2h_branch_graph(
    n_layers: int = 16,
    branch_every: int = 4,
    *,
    conv_flops: float = 4e9,
    branch_bytes: int = 256 * 1024,
    host_flops: float = 1.5e8,
    act_bytes: int = 2 * MiB,
    seed: int = 0,
    name: str | None = None,
) -> OpGraph:
    """A GPU trunk with blocking D2H + CPU post-processing side branches.

    Parameters
    ----------
    n_layers : int
        Convolutions in the trunk (``conv_flops`` each, jittered +-20% by ``seed``).
    branch_every : int
        A side branch leaves after every ``branch_every``-th layer: ``MemcpyD2H`` of
        ``branch_bytes`` then a ``PostProcess`` CPU op of ``host_flops`` (150 us at 1 TFLOP/s).
    act_bytes : int
        Activation size along the trunk; the input arrives by ``MemcpyH2D`` and the result
        leaves by a final ``MemcpyD2H``.

    >>> [n for n in d2h_branch_graph(4, 2).ops if not n.startswith("conv")]
    ['h2d_input', 'd2h1', 'post1', 'fetch']
    """
    _pos(n_layers=n_layers, branch_every=branch_every)
    rng = random.Random(seed)
    g = OpGraph(name or f"executor-d2h-branch-{n_layers}x{branch_every}",
                meta={"builder": "hetsched.executor.graphs.d2h_branch_graph",
                      "params": {"n_layers": n_layers, "branch_every": branch_every, "conv_flops": conv_flops,
                                 "branch_bytes": branch_bytes, "host_flops": host_flops, "seed": seed},
                      "purpose": "the executor patent: blocking host work beside a GPU trunk"})
    g.add_op("h2d_input", "MemcpyH2D")
    g.add_tensor("input", act_bytes, consumers=["h2d_input"])
    g.add_tensor("input_dev", act_bytes, producer="h2d_input")
    prev = "input_dev"
    for i in range(n_layers):
        op = f"conv{i}"
        g.add_op(op, "Conv", flops=conv_flops * rng.uniform(0.8, 1.2), weight_bytes=MiB)
        g.add_consumer(prev, op)
        prev = f"{op}:out"
        g.add_tensor(prev, act_bytes, producer=op)
        if (i + 1) % branch_every == 0 and i + 1 < n_layers:
            d, p = f"d2h{i}", f"post{i}"
            g.add_op(d, "MemcpyD2H")
            g.add_op(p, "PostProcess", flops=host_flops * rng.uniform(0.8, 1.2))
            g.add_consumer(prev, d)
            g.add_tensor(f"{d}:out", branch_bytes, producer=d, consumers=[p])
            g.add_tensor(f"{p}:out", 1024, producer=p, is_output=True)
    g.add_op("fetch", "MemcpyD2H")
    g.add_consumer(prev, "fetch")
    g.add_tensor("output", act_bytes, producer="fetch", is_output=True)
    return g


def inception_graph(
    n_cells: int = 4,
    *,
    conv_flops: float = 2.5e9,
    act_bytes: int = 2 * MiB,
    seed: int = 0,
    name: str | None = None,
) -> OpGraph:
    """GoogLeNet-style cells: four parallel branches (1x1; 1x1-3x3; 1x1-3x3-3x3; pool-1x1), a Concat.

    All ops run on the GPU; nothing blocks the host.

    >>> inception_graph(2).n_ops
    18
    """
    _pos(n_cells=n_cells)
    rng = random.Random(seed)
    g = OpGraph(name or f"executor-inception-{n_cells}",
                meta={"builder": "hetsched.executor.graphs.inception_graph",
                      "params": {"n_cells": n_cells, "conv_flops": conv_flops, "seed": seed},
                      "purpose": "the executor patent: independent kernels the patent's one async stream serializes"})
    g.add_tensor("input", act_bytes, consumers=[])
    prev = "input"
    branches = [["1x1"], ["1x1r", "3x3"], ["1x1r", "3x3a", "3x3b"], ["pool", "proj"]]
    for c in range(n_cells):
        ends = []
        for b, chain in enumerate(branches):
            src = prev
            for step in chain:
                op = f"c{c}_b{b}_{step}"
                typ = "MaxPool" if step == "pool" else "Conv"
                fl = conv_flops * (0.3 if "1x1" in step or step == "proj" else 1.0) * rng.uniform(0.8, 1.2)
                g.add_op(op, typ, flops=fl if typ == "Conv" else 0.0, weight_bytes=MiB if typ == "Conv" else 0)
                g.add_consumer(src, op)
                src = f"{op}:out"
                g.add_tensor(src, act_bytes // 4, producer=op)
            ends.append(src)
        cat = f"c{c}_concat"
        g.add_op(cat, "Concat")
        for e in ends:
            g.add_consumer(e, cat)
        prev = f"{cat}:out"
        g.add_tensor(prev, act_bytes, producer=cat)
    g.set_tensor(prev, is_output=True)
    return g


def randwire_gpu_graph(n: int = 32, *, channels: int = 128, hw: int = 56, batch: int = 8, seed: int = 0,
                       name: str | None = None) -> OpGraph:
    """A randomly wired network (:func:`hetsched.io.generators.randwire_ws`, WS(n, 4, 0.75)), all on GPU.

    The default stage (128 channels at 56x56, batch 8) gives kernels of ~30-60 us on the default
    executor system, several times the host's ~8 us per launch.

    >>> randwire_gpu_graph(12).n_ops > 12
    True
    """
    from ..io.generators import randwire_ws

    _pos(n=n)
    g = randwire_ws(n, k=4, p=0.75, channels=channels, hw=hw, batch=batch, seed=seed)
    g.name = name or f"executor-randwire-{n}"
    g.meta = {**g.meta, "builder": "hetsched.executor.graphs.randwire_gpu_graph", "params": {"n": n, "channels": channels, "hw": hw, "batch": batch, "seed": seed},
              "purpose": "the executor patent: branchy all-GPU graph (Nimble's case)"}
    return g


def thread_rules_graph(
    *,
    conv_flops: float = 3e9,
    act_bytes: int = 2 * MiB,
    det_bytes: int = 512 * 1024,
    host_flops: float = 1e8,
    seed: int = 0,
    name: str | None = None,
) -> OpGraph:
    """A detector's tail that fires every thread rule of the executor patent (claims 1, 3, 4 and 5).

    * ``load_labels`` (host ``Load``) is a **sync root** (claim 4: to a sync-pool thread), and
      ``h2d_image`` an async root (claim 4: to the async thread);
    * ``backbone0 -> backbone1 -> head`` keep async successors in the current thread (claim 5);
    * ``backbone1 -> nms``: an async op's sync successor goes to another thread (claim 5), and
      ``nms`` (``NonMaxSuppression``: it must read its output size back) is a sync kernel on the
      patent's **second stream** (claim 3);
    * ``nms`` has **several sync successors** (``d2h_boxes``, ``d2h_scores``, ``count``): one stays
      in its thread, the others go to other threads (claim 1, "fourth threads"); and an **async
      successor** ``gather``, which goes to the async thread (claim 1, "fifth thread");
    * ``d2h_boxes -> draw`` and ``d2h_scores -> log_scores`` run host post-processing on the sync
      threads, so with four host threads three are busy with sync waits at once. With two host
      threads claim 1's "other threads" do not exist: the result counts the rule fallbacks.

    >>> g = thread_rules_graph(); g.validate(); g.n_ops
    14
    """
    rng = random.Random(seed)
    g = OpGraph(name or "executor-thread-rules",
                meta={"builder": "hetsched.executor.graphs.thread_rules_graph",
                      "params": {"conv_flops": conv_flops, "act_bytes": act_bytes, "det_bytes": det_bytes,
                                 "host_flops": host_flops, "seed": seed},
                      "purpose": "the executor patent: every thread rule (claims 1, 4, 5) and the sync stream (claim 3) fire"})

    def conv(n: str, src: str) -> str:
        g.add_op(n, "Conv", flops=conv_flops * rng.uniform(0.8, 1.2), weight_bytes=MiB)
        g.add_consumer(src, n)
        g.add_tensor(f"{n}:out", act_bytes, producer=n)
        return f"{n}:out"

    g.add_op("load_labels", "Load", flops=host_flops * rng.uniform(0.8, 1.2))
    g.add_tensor("labels_file", 64 * 1024, consumers=["load_labels"])
    g.add_tensor("labels", 64 * 1024, producer="load_labels")
    g.add_op("h2d_image", "MemcpyH2D")
    g.add_tensor("image", act_bytes, consumers=["h2d_image"])
    g.add_tensor("image_dev", act_bytes, producer="h2d_image")
    x = conv("backbone0", "image_dev")
    x = conv("backbone1", x)
    y = conv("head", x)
    g.add_op("nms", "NonMaxSuppression", flops=0.3 * conv_flops)
    g.add_consumer(x, "nms")
    g.add_tensor("dets", det_bytes, producer="nms")
    for d, t in (("d2h_boxes", "boxes"), ("d2h_scores", "scores")):
        g.add_op(d, "MemcpyD2H")
        g.add_consumer("dets", d)
        g.add_tensor(t, det_bytes // 2, producer=d)
    g.add_op("count", "NonZero", flops=0.05 * conv_flops)
    g.add_consumer("dets", "count")
    g.add_tensor("n_dets", 8, producer="count", is_output=True)
    g.add_op("gather", "Gather", flops=0.1 * conv_flops)
    g.add_consumer("dets", "gather")
    g.add_consumer(y, "gather")
    g.add_tensor("crops", act_bytes // 2, producer="gather")
    z = conv("refine", "crops")
    g.add_op("draw", "PostProcess", flops=host_flops * rng.uniform(0.8, 1.2))
    g.add_consumer("boxes", "draw")
    g.add_consumer("labels", "draw")
    g.add_tensor("picture", 1024, producer="draw", is_output=True)
    g.add_op("log_scores", "Print", flops=0.5 * host_flops)
    g.add_consumer("scores", "log_scores")
    g.add_tensor("log", 64, producer="log_scores", is_output=True)
    g.add_op("fetch", "MemcpyD2H")
    g.add_consumer(z, "fetch")
    g.add_tensor("output", act_bytes // 2, producer="fetch", is_output=True)
    return g


def multi_device_graph(
    n_layers: int = 6,
    *,
    conv_flops: float = 2e9,
    act_bytes: int = 1 * MiB,
    seed: int = 0,
    name: str | None = None,
) -> OpGraph:
    """Ops with kernels for several devices (the executor patent's description of fig. 1), on a GPU and an FPGA.

    Each op lists its kernels in ``attrs["kernels"]``: the trunk has GPU and FPGA kernels (runs on
    the GPU, the executor's device); a side branch of ``Resample`` ops has an FPGA kernel only (it
    runs on the FPGA: a kernel fallback, counted), fed by its own host-to-device copy to the FPGA
    (``fpga_in``: synchronous when the FPGA's copy engine is, ``sync_copy_devices=["fpga0"]``);
    ``tokenize`` has a CPU kernel only (a host op). The GPU and FPGA streams run side by side.

    >>> g = multi_device_graph(4); g.validate()
    >>> g.ops["tokenize"].attrs["kernels"], g.ops["conv0"].attrs["kernels"]
    (['cpu'], ['gpu', 'fpga'])
    """
    _pos(n_layers=n_layers)
    rng = random.Random(seed)
    g = OpGraph(name or f"executor-multi-device-{n_layers}",
                meta={"builder": "hetsched.executor.graphs.multi_device_graph",
                      "params": {"n_layers": n_layers, "conv_flops": conv_flops, "act_bytes": act_bytes, "seed": seed},
                      "purpose": "the executor patent: ops whose kernels run on several devices; a synchronous copy engine"})
    g.add_op("tokenize", "Tokenize", flops=5e7, attrs={"kernels": ["cpu"]})
    g.add_tensor("raw", 256 * 1024, consumers=["tokenize"])
    g.add_tensor("tokens", act_bytes, producer="tokenize")
    g.add_op("gpu_in", "MemcpyH2D", attrs={"kernels": ["gpu"]})
    g.add_consumer("tokens", "gpu_in")
    g.add_tensor("x_gpu", act_bytes, producer="gpu_in")
    g.add_op("fpga_in", "MemcpyH2D", attrs={"kernels": ["fpga0"]})
    g.add_consumer("tokens", "fpga_in")
    g.add_tensor("x_fpga", act_bytes, producer="fpga_in")
    a, b = "x_gpu", "x_fpga"
    for i in range(n_layers):
        g.add_op(f"conv{i}", "Conv", flops=conv_flops * rng.uniform(0.8, 1.2), weight_bytes=MiB,
                 attrs={"kernels": ["gpu", "fpga"]})
        g.add_consumer(a, f"conv{i}")
        a = f"conv{i}:out"
        g.add_tensor(a, act_bytes, producer=f"conv{i}")
        g.add_op(f"resample{i}", "Resample", flops=0.05 * conv_flops * rng.uniform(0.8, 1.2),
                 attrs={"kernels": [{"device": "fpga", "kind": "gpu_async"}]})
        g.add_consumer(b, f"resample{i}")
        b = f"resample{i}:out"
        g.add_tensor(b, act_bytes, producer=f"resample{i}")
    for d, t in (("fetch_gpu", a), ("fetch_fpga", b)):
        g.add_op(d, "MemcpyD2H", attrs={"kernels": ["gpu"] if d == "fetch_gpu" else ["fpga"]})
        g.add_consumer(t, d)
        g.add_tensor(f"{d}:out", act_bytes, producer=d, is_output=True)
    return g


#: bundled file name -> builder call
BUNDLED = {
    "executor_d2h_branch": lambda: d2h_branch_graph(16, 4, name="executor_d2h_branch"),
    "executor_inception": lambda: inception_graph(4, name="executor_inception"),
    "executor_randwire": lambda: randwire_gpu_graph(32, name="executor_randwire"),
    "executor_thread_rules": lambda: thread_rules_graph(name="executor_thread_rules"),
    "executor_multi_device": lambda: multi_device_graph(6, name="executor_multi_device"),
}


def write_bundled(outdir: str | Path | None = None) -> list[Path]:
    """Write the bundled executor graphs (default: the checkout's ``data/graphs``); returns the paths.

    >>> import tempfile
    >>> [p.name for p in write_bundled(tempfile.mkdtemp())][:3]
    ['executor_d2h_branch.json', 'executor_inception.json', 'executor_randwire.json']
    """
    from ..io import save_graph
    from ..resources import source_dir

    d = Path(outdir) if outdir is not None else source_dir() / "graphs"
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for nm, build in BUNDLED.items():
        p = d / f"{nm}.json"
        save_graph(build(), p, indent=1)
        out.append(p)
    return out


if __name__ == "__main__":  # pragma: no cover
    for p in write_bundled():
        print(p)
