"""Beyond the patent: compare partitioning choices in one call, and size the buffers.

The complaint users of real partitioners (ONNX Runtime execution providers, TVM BYOC,
Torch-TensorRT) raise most is that a model split into many small accelerator islands, with a copy
at every border, runs *slower* than without the accelerator. :func:`compare_partitions` puts the
patent's variants side by side with single-backend baselines so that effect is visible, and
:func:`best_buffer_depth` finds the smallest buffer that reaches (almost) the best throughput.

Examples
--------
>>> from hetsched.io.generators import resnet_like
>>> from hetsched.io.systems import load_system
>>> from hetsched.system import SupportTable
>>> s = load_system("cpu_gpu_fpga")
>>> # an accelerator that runs only convolutions: every conv becomes its own island
>>> s = s.with_support(SupportTable({"gpu0": {"Conv": 1}, "cpu0": {"*": 2}}))
>>> cmp = compare_partitions(resnet_like(n_stages=2, blocks_per_stage=1), s, n_inputs=16)
>>> f = cmp.frame.set_index("label")
>>> bool(f.loc["adjacent, serial", "throughput_per_s"] < f.loc["single cpu0", "throughput_per_s"])
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from ..cost import CostModel
from ..errors import HetschedError
from ..graph import OpGraph
from ..results import Comparison, Result, StepLog, compare_results
from ..system import SupportTable, System
from .buffered import BufferedResult, simulate_buffered
from .core import PartitionResult, partition_by_support

__all__ = ["PartitionComparison", "BufferSweepResult", "compare_partitions", "best_buffer_depth"]

_COLUMNS = [
    "label", "merge", "buffer_depth", "n_groups", "n_cross_edges", "n_copies", "bytes_copied", "n_launches",
    "makespan_s", "throughput_per_s", "latency_p50_s", "latency_p99_s", "speedup_vs_best_single",
]


@dataclass(frozen=True, kw_only=True, eq=False)
class PartitionComparison(Comparison):
    """Outcome of :func:`compare_partitions` (a :class:`~hetsched.results.Comparison`).

    Attributes
    ----------
    frame : DataFrame
        One row per variant: ``label, merge, buffer_depth, n_groups, n_cross_edges, n_copies,
        bytes_copied`` (per input), ``n_launches`` (per input), ``makespan_s`` (all inputs),
        ``throughput_per_s, latency_p50_s, latency_p99_s, speedup_vs_best_single``.
    partitions, simulations : mapping
        variant -> its :class:`PartitionResult` / :class:`BufferedResult`.

    ``long()`` gives the numbers in the house's long format (:func:`hetsched.results.compare_results`);
    ``timeline`` is the patent's variant's run (``adjacent, buffered``).
    """

    frame: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_COLUMNS))
    partitions: Mapping[str, PartitionResult] = field(default_factory=dict)
    simulations: Mapping[str, BufferedResult] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "partitions", MappingProxyType(dict(self.partitions)))
        object.__setattr__(self, "simulations", MappingProxyType(dict(self.simulations)))


def _single_backends(graph: OpGraph, table: SupportTable, enabled: Iterable[str] | None) -> list[str]:
    types = graph.op_types()
    en = None if enabled is None else set(enabled)
    return [b for b in table.backends if (en is None or b in en) and all(table.supports(b, t) for t in types)]


def compare_partitions(
    graph: OpGraph,
    system: System,
    *,
    table: SupportTable | None = None,
    n_inputs: int = 32,
    buffer_depth: int = 2,
    cost: CostModel | None = None,
    enabled: Iterable[str] | None = None,
    overrides: Mapping[str, str] | None = None,
    fallback: str | None = None,
    min_group_size: int | None = None,
    launch_s: float | Mapping[str, float] | None = None,
    singles: bool = True,
) -> PartitionComparison:
    """Per-op launch vs the patent's merging, serial vs buffered backends, and single-backend baselines.

    Variants (rows, in this order):

    * ``single <b>`` — every op on backend ``b`` (each enabled backend that supports every op type
      of the graph; ``singles=False`` drops them): no partition borders, no copies.
    * ``per-op, serial`` — the patent's marking with no aggregation: one backend launch per op,
      one input at a time.
    * ``adjacent, serial`` — the minimal-neighbourhood merging, no buffers.
    * ``adjacent, buffered`` — the same with ``buffer_depth`` buffers: backends pipelined.
    * ``global, buffered`` — also non-adjacent regions merged (acyclic).
    * ``global + min_group_size=k, buffered`` — when ``min_group_size`` is given: small islands go
      back to ``fallback`` (default: the best single backend, else the system host).

    Parameters
    ----------
    graph, system : the workload and the machine.
    table : SupportTable, optional
        Mapping list (default ``system.support``).
    n_inputs, buffer_depth, cost, launch_s
        As in :func:`~hetsched.partition.simulate_buffered`.
    enabled, overrides, fallback
        As in :func:`~hetsched.partition.partition_by_support`.
    min_group_size : int, optional
        Adds the ``min_group_size`` row.

    Returns
    -------
    PartitionComparison
        ``metrics``: ``best_throughput_per_s``, ``best_single_throughput_per_s`` (0 without a
        single-backend row), ``n_variants``. ``steps``: one per variant.

    Raises
    ------
    HetschedError
        As the partitioner and the simulator do (unsupported ops without fallback, bad depths...).
    """
    sysx = system if table is None else system.with_support(table)
    tab = sysx.support
    rows: dict[str, dict[str, Any]] = {}
    parts: dict[str, PartitionResult] = {}
    sims: dict[str, BufferedResult] = {}
    steps = StepLog()
    common = dict(enabled=enabled, overrides=overrides, fallback=fallback)

    def run(variant: str, part: PartitionResult, depth: int) -> None:
        sim = simulate_buffered(part, sysx, n_inputs=n_inputs, buffer_depth=depth, cost=cost, launch_s=launch_s)
        parts[variant] = part
        sims[variant] = sim
        pm, sm = part.metrics, sim.metrics
        rows[variant] = {
            "merge": part.params["merge"],
            "buffer_depth": depth,
            **{k: pm[k] for k in ("n_groups", "n_cross_edges", "n_copies", "bytes_copied", "n_launches")},
            **{k: sm[k] for k in ("makespan_s", "throughput_per_s", "latency_p50_s", "latency_p99_s")},
        }
        steps.add("evaluate", variant, None, sm["makespan_s"], True,
                  f"{variant}: {pm['n_groups']} group(s), {pm['n_cross_edges']} cross-backend edge(s),"
                  f" {sm['throughput_per_s']:.4g} inputs/s", data={"throughput_per_s": sm["throughput_per_s"]})

    single_names = _single_backends(graph, tab, enabled) if singles else []
    for b in single_names:
        run(f"single {b}", partition_by_support(graph, sysx, enabled=[b], merge="adjacent"), buffer_depth)
    run("per-op, serial", partition_by_support(graph, sysx, merge=None, **common), 0)
    adj = partition_by_support(graph, sysx, merge="adjacent", **common)
    run("adjacent, serial", adj, 0)
    run("adjacent, buffered", adj, buffer_depth)
    run("global, buffered", partition_by_support(graph, sysx, merge="global", **common), buffer_depth)
    if min_group_size is not None:
        fb = fallback
        if fb is None:
            if single_names:
                fb = max(single_names, key=lambda b: sims[f"single {b}"].metrics["throughput_per_s"])
            else:
                fb = sysx.host
        part = partition_by_support(graph, sysx, merge="global", min_group_size=min_group_size,
                                    enabled=enabled, overrides=overrides, fallback=fb)
        run(f"global + min_group_size={min_group_size}, buffered", part, buffer_depth)
    frame = compare_results(rows, metrics=_COLUMNS[1:-1], wide=True)
    best_single = max((r["throughput_per_s"] for v, r in rows.items() if v.startswith("single ")), default=0.0)
    frame["speedup_vs_best_single"] = frame["throughput_per_s"] / best_single if best_single else float("nan")
    return PartitionComparison(
        metrics={
            "best_throughput_per_s": float(frame["throughput_per_s"].max()),
            "best_single_throughput_per_s": float(best_single),
            "n_variants": len(frame),
        },
        steps=steps,
        params={"n_inputs": n_inputs, "buffer_depth": buffer_depth, "min_group_size": min_group_size, **common},
        frame=frame,
        partitions=parts,
        simulations=sims,
        timeline=_patent_run_timeline,
    )


def _patent_run_timeline(cmp: PartitionComparison) -> pd.DataFrame:
    """The comparison's timeline: the patent's own variant (adjacent merging, buffered backends)."""
    return cmp.simulations["adjacent, buffered"].timeline


@dataclass(frozen=True, kw_only=True, eq=False)
class BufferSweepResult(Result):
    """Outcome of :func:`best_buffer_depth`: ``best_depth`` and the sweep ``frame``; ``timeline``: the
    chosen depth's run (simulated again on first access)."""

    best_depth: int = 0
    frame: pd.DataFrame = field(default_factory=pd.DataFrame)


def best_buffer_depth(
    partition: PartitionResult,
    system: System,
    *,
    n_inputs: int = 64,
    depths: Sequence[int] = (1, 2, 3, 4, 6, 8),
    tol: float = 0.01,
    cost: CostModel | None = None,
    launch_s: float | Mapping[str, float] | None = None,
) -> BufferSweepResult:
    """The smallest buffer depth whose throughput is within ``tol`` (1%) of the best in ``depths``.

    Deeper buffers hold more inputs in flight (memory, latency) for no gain once the slowest
    backend or link is saturated; this finds where that happens.

    Parameters
    ----------
    partition, system, n_inputs, cost, launch_s
        As in :func:`~hetsched.partition.simulate_buffered`.
    depths : sequence of int
        Depths to try (each >= 0; 0 = serial).
    tol : float
        Relative tolerance on throughput.

    Returns
    -------
    BufferSweepResult
        ``frame``: ``buffer_depth, throughput_per_s, makespan_s, latency_p50_s, latency_p99_s,
        max_occupancy, within_tol``; ``metrics``: ``best_depth``, ``best_throughput_per_s``,
        ``chosen_throughput_per_s``. ``steps``: one per depth (accepted = within tolerance).

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.partition import partition_by_support
    >>> s = toy_system(); s = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    >>> r = best_buffer_depth(partition_by_support(chain(6), s), s, n_inputs=16)
    >>> r.best_depth in (1, 2, 3, 4, 6, 8)
    True
    """
    ds = sorted(dict.fromkeys(int(d) for d in depths))
    if not ds:
        raise HetschedError("depths is empty", field="depths")
    if not (0 <= tol < 1):
        raise HetschedError(f"tol must be in [0, 1), got {tol!r}", field="tol")
    recs = []
    for d in ds:
        m = simulate_buffered(partition, system, n_inputs=n_inputs, buffer_depth=d, cost=cost, launch_s=launch_s).metrics
        recs.append((d, m["throughput_per_s"], m["makespan_s"], m["latency_p50_s"], m["latency_p99_s"], m["max_occupancy"]))
    frame = pd.DataFrame(recs, columns=["buffer_depth", "throughput_per_s", "makespan_s", "latency_p50_s", "latency_p99_s", "max_occupancy"])
    best = float(frame["throughput_per_s"].max())
    frame["within_tol"] = frame["throughput_per_s"] >= best * (1 - tol)
    chosen = int(frame.loc[frame["within_tol"], "buffer_depth"].min())
    steps = StepLog()
    for d, tp, ok in zip(frame["buffer_depth"], frame["throughput_per_s"], frame["within_tol"]):
        steps.add("try_depth", str(d), None, float(tp), bool(ok),
                  f"depth {d}: {tp:.4g} inputs/s, {'within' if ok else 'more than'} {tol:.0%} of the best {best:.4g}")
    return BufferSweepResult(
        # the chosen depth's run, simulated again only when someone looks at it
        timeline=partial(_depth_timeline, partition=partition, system=system, n_inputs=n_inputs, depth=chosen,
                         cost=cost, launch_s=launch_s),
        metrics={
            "best_depth": chosen,
            "best_throughput_per_s": best,
            "chosen_throughput_per_s": float(frame.loc[frame["buffer_depth"] == chosen, "throughput_per_s"].iloc[0]),
        },
        steps=steps,
        params={"n_inputs": n_inputs, "depths": tuple(ds), "tol": tol},
        best_depth=chosen,
        frame=frame,
    )


def _depth_timeline(_sweep: BufferSweepResult, *, partition: PartitionResult, system: System, n_inputs: int,
                    depth: int, cost: CostModel | None, launch_s: Any) -> pd.DataFrame:
    return simulate_buffered(partition, system, n_inputs=n_inputs, buffer_depth=depth, cost=cost,
                             launch_s=launch_s).timeline
