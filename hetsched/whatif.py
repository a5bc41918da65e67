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
from functools import lru_cache
from typing import Any

from .errors import HetschedError
from .graph import OpGraph
from .system import Link, System

__all__ = [
    "with_host_link",
    "scale_memory",
    "resolve_graph",
    "resolve_system",
    "map_point",
    "partition_point",
    "pipeline_point",
    "order_point",
    "executor_point",
    "TASKS",
]


def with_host_link(system: System, bandwidth_Bps: float | None = None, *, latency_s: float | None = None) -> System:
    """A copy of ``system`` whose links touching the host have a new bandwidth (and/or latency)."""
    if bandwidth_Bps is not None and not bandwidth_Bps > 0:
        raise HetschedError(f"host link bandwidth must be positive, got {bandwidth_Bps!r}", field="host_link_Bps")
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
    """A copy of ``system`` with device memory scaled by ``factor`` (the host is left alone)."""
    if not factor > 0:
        raise HetschedError(f"memory scale must be positive, got {factor!r}", field="memory_scale")
    names = devices or [d for d in system.device_names if d != system.host]
    return system.with_devices({n: replace(system.device(n), memory_bytes=int(system.device(n).memory_bytes * factor)) for n in names})


@lru_cache(maxsize=32)
def resolve_graph(name: str, n: int = 40, seed: int = 0, batch: int = 1, training: bool = False) -> OpGraph:
    """A graph by name: a file path, a bundled graph, a zoo model, or a generator (``n``, ``seed``)."""
    import os

    from .io import bundled_graphs, load_graph
    from .io import generators as gen

    if os.path.exists(name) or name in bundled_graphs():
        return load_graph(name)
    from .io import zoo

    if name in zoo.ZOO:
        return zoo.ZOO[name](batch=batch, training=training)
    if name in gen.GENERATORS:
        fn = gen.GENERATORS[name]
        if name in ("topcuoglu", "chain"):
            return fn(n, seed=seed)
        if name == "randwire_ws":
            return fn(n, seed=seed)
        if name == "layered":
            return fn(max(1, n // 4), 4, seed=seed)
        if name == "fork_join":
            return fn(4, max(1, n // 4), seed=seed)
        return fn()
    raise HetschedError(
        f"unknown graph {name!r}: not a file, a bundled graph, a zoo model ({', '.join(zoo.ZOO)}) or a generator",
        field="graph",
    )


@lru_cache(maxsize=16)
def resolve_system(name: str) -> System:
    """A system by name: ``toy``, a YAML path, or a bundled system."""
    from .io import load_system, toy_system

    return toy_system() if name == "toy" else load_system(name)


def map_point(
    graph: str, system: str, *, method: str = "h2h", host_link_Bps: float | None = None, memory_scale: float = 1.0,
    n: int = 40, seed: int = 0, batch: int = 1, **options: Any,
) -> dict[str, float]:
    """Map ``graph`` on a modified ``system`` with one method; the evaluator's metrics."""
    from . import mapping

    g = resolve_graph(graph, n, seed, batch)
    s = resolve_system(system)
    if host_link_Bps is not None:
        s = with_host_link(s, host_link_Bps)
    if memory_scale != 1.0:
        s = scale_memory(s, memory_scale)
    fn = mapping.METHODS.get(method)
    if fn is None:
        raise HetschedError(f"unknown mapping method {method!r}; choose from {sorted(mapping.METHODS)}", field="method")
    r = fn(g, s, **options) if options else fn(g, s)
    out = dict(r.metrics)
    devs = sorted(set(r.placement.device.values()))
    out["n_devices_used"] = float(len(devs))
    return out


def partition_point(
    graph: str, system: str, *, merge: str = "adjacent", buffer_depth: int = 2, n_inputs: int = 32,
    disable: tuple[str, ...] = (), n: int = 40, seed: int = 0, **options: Any,
) -> dict[str, float]:
    """Partition by support/priority and run the buffered pipeline; partition + simulation metrics."""
    from . import partition

    g = resolve_graph(graph, n, seed)
    s = resolve_system(system)
    enabled = [b for b in s.support.backends if b not in set(disable)]
    p = partition.partition_by_support(g, s, enabled=enabled, merge=None if merge == "none" else merge, **options)
    sim = partition.simulate_buffered(p, s, n_inputs=n_inputs, buffer_depth=buffer_depth)
    return {**{f"partition_{k}": v for k, v in p.metrics.items()}, **dict(sim.metrics)}


def pipeline_point(
    p: int, v: int, m: int, *, schedule: str = "interleaved_1f1b", grouping: str = "balanced", f_s: float = 1.0,
    b_s: float = 2.0, activation_bytes: float = 0.0,
) -> dict[str, float]:
    """Generate, validate and simulate one pipeline schedule."""
    from . import pipeline as pp

    opts = {"grouping": grouping} if schedule == "interleaved_1f1b" else {}
    sch = pp.make_schedule(schedule, p, v, m, **opts)
    pp.validate(sch)
    r = pp.simulate(sch, costs=pp.StageCosts(f_s=f_s, b_s=b_s, activation_bytes=activation_bytes), timeline=False)
    return dict(r.metrics)


def order_point(graph: str, *, method: str = "heuristic", time_limit_s: float = 10.0, n: int = 40, seed: int = 0,
                batch: int = 1, training: bool = False) -> dict[str, float]:
    """Order ``graph``'s ops to minimise peak memory."""
    from . import memory

    g = resolve_graph(graph, n, seed, batch, training)
    r = memory.optimize_order(g, method=method, time_limit_s=time_limit_s)
    return dict(r.metrics)


def executor_point(graph: str, *, streams: str = "patent", threads: str = "patent", pool_size: int = 4,
                   costs: str = "cuda", n: int = 40, seed: int = 0) -> dict[str, float]:
    """Simulate the executor with one stream and thread policy."""
    from . import executor

    g = resolve_graph(graph, n, seed)
    r = executor.simulate(g, streams=streams, threads=threads, pool_size=pool_size, costs=costs, record_steps=False)
    return dict(r.metrics)


TASKS = {
    "map": map_point,
    "partition": partition_point,
    "pipeline": pipeline_point,
    "order": order_point,
    "executor": executor_point,
}
