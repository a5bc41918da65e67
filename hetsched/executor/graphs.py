"""Builders of the executor's bundled graphs (``data/graphs/executor_*.json``).

Two shapes show the two sides of the seed-004 patent:

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

__all__ = ["d2h_branch_graph", "inception_graph", "randwire_gpu_graph", "BUNDLED", "write_bundled"]

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
                      "purpose": "seed-004: blocking host work beside a GPU trunk"})
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
                      "purpose": "seed-004: independent kernels the patent's one async stream serializes"})
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
              "purpose": "seed-004: branchy all-GPU graph (Nimble's case)"}
    return g


#: bundled file name -> builder call
BUNDLED = {
    "executor_d2h_branch": lambda: d2h_branch_graph(16, 4, name="executor_d2h_branch"),
    "executor_inception": lambda: inception_graph(4, name="executor_inception"),
    "executor_randwire": lambda: randwire_gpu_graph(32, name="executor_randwire"),
}


def write_bundled(outdir: str | Path | None = None) -> list[Path]:
    """Write the bundled executor graphs (default ``data/graphs``); returns the paths.

    >>> import tempfile
    >>> [p.name for p in write_bundled(tempfile.mkdtemp())]
    ['executor_d2h_branch.json', 'executor_inception.json', 'executor_randwire.json']
    """
    from ..io import DATA_DIR, save_graph

    d = Path(outdir) if outdir is not None else DATA_DIR / "graphs"
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
