"""What-if building blocks: modified systems, and one picklable "point" function per algorithm family.

Sweeps (:func:`hetsched.sweep.sweep`, ``hetsched sweep spec.yaml``, the what-if notebook) run these
point functions over a grid. Each takes plain values (names, numbers) so it can be shipped to a
process pool or a Dask worker, loads its inputs there (cached per process), and returns a dict of
numbers.

>>> s = with_host_link(toy := __import__("hetsched").toy_system(), 1e9)
>>> s.link("cpu0", "gpu0").bandwidth_Bps
1000000000.0
>>> map_point("chain", "toy", method="compute_first", n=4)["makespan_s"] > 0
True
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .errors import HetschedError
from .graph import OpGraph
from .io.resolve import MAX_GENERATED_OPS, resolve_graph, resolve_system  # re-exported: where they were
from .system import System

__all__ = [
    "MAX_GENERATED_OPS",
    "with_host_link",
    "scale_memory",
    "resolve_graph",
    "resolve_system",
    "run_mapping",
    "map_point",
    "run_pipeline",
    "partition_point",
    "pipeline_point",
    "order_point",
    "executor_point",
    "TASKS",
]


def _positive(v: Any, field: str) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        x = float("nan")
    if not x > 0 or x == float("inf"):
        raise HetschedError(f"{field} must be a positive number, got {v!r}", field=field)
    return x


def with_host_link(system: System, bandwidth_Bps: float | None = None, *, latency_s: float | None = None) -> System:
    """A copy of ``system`` whose links touching the host have a new bandwidth (and/or latency).

    >>> from hetsched.io import toy_system
    >>> with_host_link(toy_system(), "fast")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: host_link_Bps must be a positive number, got 'fast'
    """
    if bandwidth_Bps is not None:
        bandwidth_Bps = _positive(bandwidth_Bps, "host_link_Bps")
    links = []
    for ln in system.links:
        if system.host in (ln.src, ln.dst):
            ln = replace(
                ln,
                bandwidth_Bps=ln.bandwidth_Bps if bandwidth_Bps is None else float(bandwidth_Bps),
                latency_s=ln.latency_s if latency_s is None else float(latency_s),
            )
        links.append(ln)
    return system.with_links(links)


def scale_memory(system: System, factor: float, *, devices: list[str] | None = None) -> System:
    """A copy of ``system`` with device memory scaled by ``factor`` (the host is left alone).

    >>> from hetsched.io import toy_system
    >>> scale_memory(toy_system(), 0.5).device("gpu0").memory_bytes == toy_system().device("gpu0").memory_bytes // 2
    True
    """
    factor = _positive(factor, "memory_scale")
    names = devices or [d for d in system.device_names if d != system.host]
    return system.with_devices({n: replace(system.device(n), memory_bytes=int(system.device(n).memory_bytes * factor)) for n in names})


def run_mapping(graph: OpGraph, system: System, method: str = "h2h", *, cost: Any = None, **options: Any):
    """Run one mapping method by name; its options go to the method, never dropped.

    ``mapping.METHODS`` entries take their function's own keyword options (h2h's objective,
    direction, policy...; HEFT's locality...); an option a method does not take is an error naming
    the option, not a silently ignored setting.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io import toy_system
    >>> run_mapping(chain(4), toy_system(), "h2h", objective="makespan").params["objective"]
    'makespan'
    >>> run_mapping(chain(4), toy_system(), "heft", objective="makespan")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: heft has no option(s) ['objective']; it takes ['cost', 'rank_comm_average', 'locality', 'occupancy_threshold']
    """
    from . import mapping

    fn = mapping.METHODS.get(method)
    if fn is None:
        raise HetschedError(f"unknown mapping method {method!r}; choose from {sorted(mapping.METHODS)}", field="method")
    return fn(graph, system, cost=cost, **options)


def map_point(
    graph: str, system: str, *, method: str = "h2h", host_link_Bps: float | None = None, memory_scale: float = 1.0,
    n: int | None = None, seed: int | None = None, batch: int = 1, training: bool = False, cost: str | None = None,
    **options: Any,
) -> dict[str, float]:
    """Map ``graph`` on a modified ``system`` with one method; the evaluator's metrics.

    ``options`` go to the mapping method (its own keyword options), see :func:`run_mapping`;
    ``cost`` is a cost file the method prices with (default: the roofline).

    >>> slow = map_point("chain", "toy", method="compute_first", n=4, host_link_Bps=1e9)
    >>> fast = map_point("chain", "toy", method="compute_first", n=4, host_link_Bps=16e9)
    >>> slow["makespan_s"] > fast["makespan_s"]
    True
    """
    g = resolve_graph(graph, n, seed, batch, training)
    s = resolve_system(system)
    if host_link_Bps is not None:
        s = with_host_link(s, host_link_Bps)
    if memory_scale != 1.0:
        s = scale_memory(s, memory_scale)
    r = run_mapping(g, s, method, cost=cost, **options)
    out = dict(r.metrics)
    devs = sorted(set(r.placement.device.values()))
    out["n_devices_used"] = float(len(devs))
    return out


def partition_point(
    graph: str, system: str, *, merge: str = "adjacent", buffer_depth: int = 2, n_inputs: int = 32,
    disable: tuple[str, ...] = (), n: int | None = None, seed: int | None = None, batch: int = 1,
    training: bool = False, cost: str | None = None, **options: Any,
) -> dict[str, float]:
    """Partition by support/priority and run the buffered pipeline; partition + simulation metrics
    (``cost``: a cost file the pipeline prices with; default the roofline).

    >>> partition_point("chain", "toy", n=6, n_inputs=4)["makespan_s"] > 0
    True
    """
    from . import partition

    g = resolve_graph(graph, n, seed, batch, training)
    s = resolve_system(system)
    enabled = [b for b in s.support.backends if b not in set(disable)]
    p = partition.partition_by_support(g, s, enabled=enabled, merge=None if merge == "none" else merge, **options)
    sim = partition.simulate_buffered(p, s, n_inputs=n_inputs, buffer_depth=buffer_depth, cost=cost)
    return {**{f"partition_{k}": v for k, v in p.metrics.items()}, **dict(sim.metrics)}


def run_pipeline(p: int, v: int | None, m: int, *, schedule: str = "interleaved_1f1b", grouping: str | None = None,
                 f_s: float = 1.0, b_s: float = 2.0, w_s: float | None = None, activation_bytes: float = 0.0,
                 timeline: bool = True):
    """Generate, validate and simulate one pipeline schedule; ``(schedule, result)``.

    ``f_s``, ``b_s`` (and ``w_s``, the weight-gradient part of ``b_s``) are one rank's share of the
    model, split over the schedule's chunks by :meth:`hetsched.pipeline.StageCosts.per_rank` (the
    one definition the panel uses too), so schedules with different ``v`` price the same model.
    ``v=None`` takes the schedule's own; a ``v`` that a schedule with fixed chunks cannot run is an
    error, as is a ``grouping`` for a schedule without groups (default: the patent's, ``paddle``).

    >>> sch, r = run_pipeline(2, 1, 4, schedule="1f1b"); sch.name, r.metrics["makespan_s"]
    ('1f1b', 15.0)
    >>> run_pipeline(2, 1, 4, schedule="1f1b", grouping="paddle")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: grouping applies to schedule 'interleaved_1f1b' or 'interleaved_zero_bubble', not '1f1b'
    >>> run_pipeline(2, 2, 4, schedule="1f1b")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: schedule '1f1b' runs 1 chunk(s) per rank, not v=2
    """
    from . import pipeline as pp

    takes = [n for n, info in pp.SCHEDULE_INFO.items() if "grouping" in info["options"]]
    if grouping is not None and schedule in pp.SCHEDULE_INFO and schedule not in takes:
        raise HetschedError(f"grouping applies to schedule {' or '.join(repr(x) for x in takes)}, not {schedule!r}", field="grouping")
    fixed = pp.SCHEDULE_INFO.get(schedule, {}).get("v")
    if fixed is not None and v is not None and v != fixed:
        raise HetschedError(f"schedule {schedule!r} runs {fixed} chunk(s) per rank, not v={v}", field="v")
    opts = {"grouping": grouping} if grouping is not None else {}
    sch = pp.make_schedule(schedule, p, v, m, **opts)
    pp.validate(sch)
    costs = pp.StageCosts.per_rank(f_s=f_s, b_s=b_s, w_s=w_s, chunks=sch.v, activation_bytes=activation_bytes)
    r = pp.simulate(sch, costs=costs, timeline=timeline)
    return sch, r


def pipeline_point(
    p: int, v: int | None, m: int, *, schedule: str = "interleaved_1f1b", grouping: str = "paddle", f_s: float = 1.0,
    b_s: float = 2.0, activation_bytes: float = 0.0,
) -> dict[str, float]:
    """Generate, validate and simulate one pipeline schedule (costs: one rank's share, as :func:`run_pipeline`).

    A grid may cross schedules with groupings: ``grouping`` goes only to the schedules that take
    one; a ``v`` a schedule with fixed chunks cannot run is an error point, not a duplicate.

    >>> pipeline_point(2, 1, 4, schedule="1f1b")["makespan_s"]
    15.0
    """
    from .pipeline import SCHEDULE_INFO

    takes = "grouping" in SCHEDULE_INFO.get(schedule, {}).get("options", ())
    _sch, r = run_pipeline(p, v, m, schedule=schedule, grouping=grouping if takes else None,
                           f_s=f_s, b_s=b_s, activation_bytes=activation_bytes, timeline=False)
    return dict(r.metrics)


def order_point(graph: str, *, method: str = "heuristic", time_limit_s: float = 10.0, n: int | None = None, seed: int | None = None,
                batch: int = 1, training: bool = False) -> dict[str, float]:
    """Order ``graph``'s ops to minimise peak memory.

    >>> order_point("chain", n=4)["peak_bytes"] > 0
    True
    """
    from . import memory

    g = resolve_graph(graph, n, seed, batch, training)
    r = memory.optimize_order(g, method=method, time_limit_s=time_limit_s)
    return dict(r.metrics)


def executor_point(graph: str, *, streams: str = "patent", threads: str = "patent", pool_size: int = 4,
                   costs: str = "cuda", n: int | None = None, seed: int | None = None, batch: int = 1,
                   training: bool = False, cost: str | None = None) -> dict[str, float]:
    """Simulate the executor with one stream and thread policy (``cost``: a cost file pricing its
    kernels, copies and CPU ops; default the roofline).

    >>> r = executor_point("executor_d2h_branch"); r["makespan_s"] >= r["lb_s"] > 0
    True
    """
    from . import executor

    g = resolve_graph(graph, n, seed, batch, training)
    r = executor.simulate(g, streams=streams, threads=threads, pool_size=pool_size, costs=costs, cost=cost,
                          record_steps=False)
    return dict(r.metrics)


TASKS = {
    "map": map_point,
    "partition": partition_point,
    "pipeline": pipeline_point,
    "order": order_point,
    "executor": executor_point,
}
