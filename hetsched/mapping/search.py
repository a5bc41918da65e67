"""``map_search``: a fast improvement search that escapes the patent's stall (beyond the patent).

The compute-first mapping patent's remap (claims 1-7) moves one layer at a time, only to its successor's device,
and keeps a move only if it pays on its own: a chain of layers that pays only when moved whole stays
where compute-first put it. This search starts from the best of the usual mappers on the same input
(h2h, HEFT, every single-device mapping) and improves it with

* **cluster moves**: a layer moved together with up to ``cluster_size - 1`` connected layers that
  share its device (grown greedily along the heaviest edges), to any device that runs them all;
* **swaps** of two adjacent layers on different devices;
* **residency re-decision after every move**: the moved layers' weights and every tensor they read
  or write are re-decided (kept on-chip when that saves transfer time and the memory plan allows,
  best saving per byte first), including graph inputs and host-produced tensors, whose kept copies
  serve every later reader on a device;
* **restarts** (iterated local search): at a local optimum, a random cluster is moved at random and
  the descent resumes from there; the best mapping found is kept.

Everything is priced by the same additive model as the evaluator (:class:`~hetsched.mapping.engine.Ctx`),
so a move costs O(degree) for ``objective="total_latency"``; ``"makespan"`` re-simulates the
graph per trial (O(ops): for graphs of up to a few thousand ops). The search is deterministic for a
``seed`` (its budget is a number of trials, not a time), and never returns anything worse than its
start on the objective (so never worse than h2h, HEFT or the fastest single device; for
``makespan`` in the evaluator's default op order).

Memory plan (shared with :func:`~hetsched.mapping.map_ilp`): on each device other than the host,
the resident weights, the kept tensors it produces and the copies of kept tensors it reads, all
counted for the whole run, plus the largest working set among the ops that may run there, stay
within its memory. The final mapping is checked by :func:`hetsched.evaluate` (and repaired, one
logged ``evict`` step each, should the peak still overflow).

>>> from hetsched.io.generators import topcuoglu
>>> from hetsched.io.systems import toy_system
>>> from hetsched.mapping import h2h
>>> g, s = topcuoglu(12, seed=3), toy_system()
>>> r = map_search(g, s, seed=0, max_evals=2000)
>>> r.metrics["total_latency_s"] <= h2h(g, s).metrics["total_latency_s"] * (1 + 1e-9)
True
"""

from __future__ import annotations

import random
import time
from typing import Callable, Sequence

from ..cost import CostModel
from ..errors import HetschedError
from ..graph import OpGraph
from ..results import NullLog, StepLog
from ..system import System
from .baselines import single_device_states
from .engine import EMPTY_STATE, REL_EPS, Ctx, Mover, State, diff, keep_on_chip, plan_budget, require_objective
from .h2h import h2h_state
from .listsched import list_state
from .result import MappingResult, finish

__all__ = ["map_search", "START_MAPPERS"]


def _start_h2h(ctx: Ctx, objective: str) -> list[tuple[str, State]]:
    return [("h2h", h2h_state(ctx, NullLog(), objective=objective)[0])]


def _start_heft(ctx: Ctx, objective: str) -> list[tuple[str, State]]:
    st, _, _ = list_state(ctx, NullLog(), name="heft")
    keep_on_chip(ctx, st, NullLog())
    return [("heft", st)]


def _start_single(ctx: Ctx, objective: str) -> list[tuple[str, State]]:
    return [(f"single:{d}", st) for d, _, st in single_device_states(ctx)]


#: name -> ``f(ctx, objective) -> [(label, state), ...]``: the mappers a search may start from (their
#: own decisions are not the search's steps)
START_MAPPERS: dict[str, Callable[[Ctx, str], list[tuple[str, State]]]] = {
    "h2h": _start_h2h, "heft": _start_heft, "single": _start_single}


def map_search(graph: OpGraph, system: System, *, objective: str = "total_latency", cost: CostModel | None = None,
               seed: int = 0, cluster_size: int = 4, max_evals: int | None = None, patience: int = 60,
               time_limit_s: float | None = None, memory_fraction: float = 1.0,
               starts: Sequence[str] = START_MAPPERS, contention: bool = True) -> MappingResult:
    """Improve the best of h2h, HEFT and the single-device mappings by cluster moves, swaps and restarts.

    **What it optimises:** ``objective`` as :func:`hetsched.evaluate` reports it:
    ``"total_latency"`` (the patent's system total latency, the default) or ``"makespan"``.

    Parameters
    ----------
    seed : int
        Seeds the sweep order and the restarts: same inputs and seed, same result.
    cluster_size : int
        Largest cluster moved at once (1: single-layer moves, as the patent's remap).
    max_evals : int, optional
        Budget of priced trials; default ``max(20_000, 2 * ops * devices)`` (10k ops on 4 devices: ~10 s).
    patience : int
        Stop after this many restarts in a row that find nothing better.
    time_limit_s : float, optional
        Also stop after this wall time (then the result depends on the machine's speed).
    memory_fraction : float
        Share of each device's memory the plan may use (see the module docstring).
    starts : sequence of {"h2h", "heft", "single"}
        The mappers whose best mapping the search starts from (``"single"``: every single-device
        mapping); the result is never worse than any of them.

    Steps: ``start`` (one per start mapping, the best accepted), ``residency`` (a global re-decision),
    ``move``/``swap`` (each improving move of the first descent, with the moved ops, source, target
    and residency changes in ``delta``), ``restart`` (each restart that found a better mapping: the
    net change from the previous best). ``metrics`` add ``start_<objective>_s``, ``search_evals``,
    ``search_restarts``, ``search_runtime_s``.
    """
    t0 = time.perf_counter()
    require_objective(objective)
    if cluster_size < 1:
        raise HetschedError(f"cluster_size must be >= 1, got {cluster_size!r}", field="cluster_size")
    if not 0 < memory_fraction <= 1:
        raise HetschedError(f"memory_fraction must be in (0, 1], got {memory_fraction!r}", field="memory_fraction")
    ctx = Ctx(graph, system, cost, contention=contention)
    ctx.require_support()
    log = StepLog()
    params = {"objective": objective, "seed": seed, "cluster_size": cluster_size, "max_evals": max_evals,
              "starts": list(starts),
              "patience": patience, "time_limit_s": time_limit_s, "memory_fraction": memory_fraction,
              "contention": contention}
    if not ctx.order:
        return finish(ctx, State(), log, phase="search", params=params, initial_state=EMPTY_STATE)
    n_dev = len(system.compute_devices)
    budget_evals = max_evals if max_evals is not None else max(20_000, 2 * len(ctx.order) * n_dev)
    deadline = None if time_limit_s is None else t0 + time_limit_s

    # ---- start: the best of the usual mappers on this input (never worse than any of them)
    bad = [x for x in starts if x not in START_MAPPERS]
    if bad or not starts:
        raise HetschedError(f"unknown start mapper(s) {bad}; choose from {list(START_MAPPERS)}", field="starts")
    begin = [x for name, start_fn in START_MAPPERS.items() if name in starts for x in start_fn(ctx, objective)]
    scored = [(ctx.score(st, objective), i, name, st) for i, (name, st) in enumerate(begin)]
    best_v, _, best_name, start = min(scored, key=lambda x: (x[0], x[1]))
    for v, i, name, st in scored:
        chosen = name == best_name
        log.add("start", name, None, v, chosen,
                f"{'best start' if chosen else 'start candidate'}: {name} at {v * 1e3:.4g} ms",
                diff(State(), st) if chosen else {}, data={"phase": "search", "metric": objective})
    mv = Mover(ctx, start.copy(), objective, plan_budget(ctx, memory_fraction))
    start_v = best_v
    cur = mv.value()

    def step_residency(label: str) -> None:
        nonlocal cur
        snap = mv.snapshot()
        mv.redecide()
        v = mv.value()
        if v < cur * (1 - REL_EPS):
            mv.commit()
            log.add("residency", label, cur, v, True, "weights and tensors re-decided for the current placement",
                    diff(snap[0], mv.st), data={"phase": "search", "metric": objective})
            cur = v
        else:
            mv.restore(snap)

    step_residency("all")

    rng = random.Random(seed)
    nbrs: dict[str, dict[str, float]] = {o: {} for o in ctx.order}
    for t, p in ctx.producer.items():
        if p is None:
            continue
        for c in ctx.consumers[t]:
            if c != p:
                nbrs[p][c] = nbrs[p].get(c, 0.0) + ctx.size[t]
                nbrs[c][p] = nbrs[c].get(p, 0.0) + ctx.size[t]
    nbr_list = {o: sorted(v, key=ctx.pos.__getitem__) for o, v in nbrs.items()}
    devices = system.compute_devices
    can = ctx.can
    dev = mv.st.device

    def out_of_budget() -> bool:
        return mv.n_evals >= budget_evals or (deadline is not None and time.perf_counter() > deadline)

    def try_cluster(o: str, dst: str) -> tuple[bool, list, list[str], float]:
        """Move ``o`` and then its heaviest same-device neighbours to ``dst``; keep the best prefix."""
        src = dev[o]
        recs = [mv.move(o, dst)]
        vals = [mv.value()]
        cluster = [o]
        conn: dict[str, float] = {}
        while len(cluster) < cluster_size:
            for n, b in nbrs[cluster[-1]].items():
                if n not in cluster and dev[n] == src:
                    conn[n] = conn.get(n, 0.0) + b
            pick = None
            for n in sorted(conn, key=lambda n: (-conn[n], ctx.pos[n])):
                if can(n, dst):
                    pick = n
                    break
            if pick is None:
                break
            del conn[pick]
            recs.append(mv.move(pick, dst))
            cluster.append(pick)
            vals.append(mv.value())
        k = min(range(len(vals)), key=lambda i: (vals[i], i))
        ok = vals[k] < cur * (1 - REL_EPS)
        keep = k + 1 if ok else 0
        for rec in reversed(recs[keep:]):
            mv.undo(rec)
        if ok:
            mv.commit()
        return ok, recs[:keep], cluster[:keep], vals[k]

    def try_swap(a: str, b: str) -> tuple[bool, list, float]:
        da, db = dev[a], dev[b]
        recs = [mv.move(a, db), mv.move(b, da)]
        v = mv.value()
        if v < cur * (1 - REL_EPS):
            mv.commit()
            return True, recs, v
        for rec in reversed(recs):
            mv.undo(rec)
        return False, [], v

    def descend(logging: bool) -> bool:
        """First-improvement sweeps until a sweep changes nothing (or the budget ends)."""
        nonlocal cur
        improved_any = False
        while not out_of_budget():
            improved = False
            order = list(ctx.order)
            rng.shuffle(order)
            for o in order:
                if out_of_budget():
                    break
                src = dev[o]
                for dst in devices:
                    if dst == src or not can(o, dst):
                        continue
                    ok, recs, cluster, v = try_cluster(o, dst)
                    if ok:
                        if logging:
                            log.add("move", o, cur, v, True,
                                    f"moving {len(cluster)} connected layer(s) {src} -> {dst}: {objective.replace('_', ' ')} "
                                    f"{cur * 1e3:.4g} -> {v * 1e3:.4g} ms", mv.delta(recs),
                                    data={"phase": "search", "metric": objective, "ops": cluster, "source": src,
                                          "target": dst})
                        cur = v
                        improved = True
                        break
                if dev[o] != src:
                    continue
                for n in nbr_list[o]:
                    dn = dev[n]
                    if dn == src or not can(o, dn) or not can(n, src):
                        continue
                    ok, recs, v = try_swap(o, n)
                    if ok:
                        if logging:
                            log.add("swap", o, cur, v, True,
                                    f"swapping {o} ({src}) and {n} ({dn}): {objective.replace('_', ' ')} "
                                    f"{cur * 1e3:.4g} -> {v * 1e3:.4g} ms", mv.delta(recs),
                                    data={"phase": "search", "metric": objective, "ops": [o, n], "source": src,
                                          "target": dn})
                        cur = v
                        improved = True
                        break
            if not improved:
                break
            improved_any = True
        return improved_any

    descend(logging=True)
    step_residency("all")
    best = mv.snapshot()
    best_v = cur
    restarts = improving = 0
    stale = 0
    ops_list = list(ctx.order)
    while not out_of_budget() and stale < patience:
        restarts += 1
        # perturb: a random cluster to a random other device that runs it, whatever it costs
        o = rng.choice(ops_list)
        src = dev[o]
        dsts = [d for d in devices if d != src and can(o, d)]
        if not dsts:
            stale += 1
            continue
        dst = rng.choice(dsts)
        size = rng.randint(1, cluster_size)
        moved = [o]
        mv.move(o, dst)
        frontier = [n for n in nbr_list[o] if dev[n] == src]
        while len(moved) < size and frontier:
            n = frontier.pop(rng.randrange(len(frontier)))
            if n in moved or dev[n] != src or not can(n, dst):
                continue
            mv.move(n, dst)
            moved.append(n)
            frontier += [m for m in nbr_list[n] if dev[m] == src and m not in moved]
        cur = mv.value()
        descend(logging=False)
        mv.redecide()
        cur = mv.value()
        if cur < best_v * (1 - REL_EPS):
            mv.commit()
            snap = mv.snapshot()
            log.add("restart", o, best_v, cur, True,
                    f"restart {restarts}: moved {len(moved)} layer(s) at random to {dst}, then improved: "
                    f"{objective.replace('_', ' ')} {best_v * 1e3:.4g} -> {cur * 1e3:.4g} ms", diff(best[0], snap[0]),
                    data={"phase": "search", "metric": objective, "ops": moved, "target": dst})
            best, best_v = snap, cur
            improving += 1
            stale = 0
        else:
            mv.restore(best)
            cur = best_v
            stale += 1
    mv.restore(best)
    final = mv.st
    extra = {f"start_{objective}_s": start_v, "search_evals": float(mv.n_evals), "search_restarts": float(restarts),
             "search_improving_restarts": float(improving), "search_runtime_s": time.perf_counter() - t0}
    return finish(ctx, final, log, phase="search", params={**params, "start": best_name}, initial_state=EMPTY_STATE,
                  extra_metrics=extra)
