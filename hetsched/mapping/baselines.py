"""Simple and exact baselines.

* :func:`fastest_single_device` — everything on the one device that runs the graph fastest (ops
  it cannot run go to their fastest supporting device).
* :func:`brute_force` — every placement (each op on each device that supports it), each with its
  residency decided by one rule, timed by the same model; exact over placements for the
  evaluator's default op order. ``objective="total_latency"`` uses a depth-first branch and bound
  on the additive terms (so 10-op graphs on 4 devices stay fast).

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> from hetsched.mapping import h2h
>>> g, s = chain(4, seed=2), toy_system()
>>> bf = brute_force(g, s, objective="total_latency")
>>> bf.metrics["total_latency_s"] <= h2h(g, s).metrics["total_latency_s"] * (1 + 1e-9)
True
"""

from __future__ import annotations

import itertools
import time
from typing import Callable

from ..cost import CostModel
from ..errors import HetschedError, Infeasible
from ..graph import OpGraph
from ..results import NullLog, StepLog
from ..system import System
from ._core import Ctx, State
from ._plan import best_residency, plan_budget
from .h2h import EMPTY_STATE, OBJECTIVES, _locality, finish
from .result import MappingResult

__all__ = ["fastest_single_device", "brute_force", "single_device_states"]


def _with_locality(ctx: Ctx, device: dict[str, str], threshold: float) -> State:
    st = State(dict(device))
    # brute force prices thousands of states: their locality decisions are not its steps
    _locality(ctx, st, NullLog(), threshold, "greedy", 0.0)
    return st


def _score(ctx: Ctx, st: State, objective: str) -> float:
    return ctx.total_latency(st) if objective == "total_latency" else ctx.simulate(st)[0]


def single_device_states(ctx: Ctx, locality: bool = True, threshold: float = 0.9):
    """``(device, placement, state)`` for each compute device: every op there (ops it cannot run go to
    their fastest supporting device), with the greedy locality pass unless ``locality=False``."""
    ctx.require_support()
    for d in ctx.system.compute_devices:
        dev = {}
        for o in ctx.order:
            c = ctx.candidates(o)
            dev[o] = d if d in c else min(c, key=lambda x: (ctx.comp(o, x), c.index(x)))
        yield d, dev, (_with_locality(ctx, dev, threshold) if locality else State(dict(dev)))


def fastest_single_device(graph: OpGraph, system: System, *, cost: CostModel | None = None, locality: bool = True,
                          occupancy_threshold: float = 0.9, objective: str = "makespan") -> MappingResult:
    """Everything on one device: try each compute device, keep the best on ``objective``.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> r = fastest_single_device(chain(3), toy_system())
    >>> len(set(r.placement.device.values()))
    1
    """
    if objective not in OBJECTIVES:
        raise HetschedError(f"unknown objective {objective!r}; choose from {list(OBJECTIVES)}", field="objective")
    ctx = Ctx(graph, system, cost)
    log = StepLog()
    best = None
    for d, dev, st in single_device_states(ctx, locality, occupancy_threshold):
        v = _score(ctx, st, objective)
        better = best is None or v < best[0]
        log.add("try_device", d, best[0] if best else None, v, better,
                f"{objective.replace('_', ' ')} {v * 1e3:.4g} ms" + (" (best so far)" if better else ""),
                {"device": dev}, data={"phase": "single_device", "metric": objective})
        if better:
            best = (v, d, dev)
    v, d, dev = best
    st = State(dict(dev))
    if locality:
        _locality(ctx, st, log, occupancy_threshold, "greedy", ctx.total_latency(st))
    return finish(ctx, st, log, phase="fastest_single_device",
                  params={"device": d, "objective": objective, "locality": locality}, initial_state=EMPTY_STATE)


def brute_force(graph: OpGraph, system: System, *, objective: str = "makespan", cost: CostModel | None = None,
                residency: str = "best", occupancy_threshold: float = 0.9, max_placements: int = 200_000) -> MappingResult:
    """The best placement over all placements, each with its residency decided by one rule.

    **What it optimises:** ``objective`` exactly over placements (the evaluator's default op order).
    ``residency="best"`` (default) gives each placement the residency of
    :func:`~hetsched.mapping._plan.best_residency` (every weight and tensor whose keeping saves
    transfer time, while the memory plan allows): with memory to spare this is the optimum of the
    total latency over placements *and* residency, the reference :func:`map_ilp` and
    :func:`map_search` are measured against. ``residency="patent"`` gives each placement the
    patent's greedy locality pass (threshold ``occupancy_threshold``) instead. For ``makespan`` the
    residency is chosen by the same rule (by transfer time saved), so the result is exact over
    placements only.

    ``objective="total_latency"`` runs a depth-first branch and bound on the additive terms; a
    ``makespan`` search simulates every placement and raises :class:`~hetsched.errors.Infeasible`
    naming the count above ``max_placements``. Steps log each new best.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> brute_force(chain(3), toy_system()).params["n_evaluated"] > 0
    True
    """
    if objective not in OBJECTIVES:
        raise HetschedError(f"unknown objective {objective!r}; use one of {list(OBJECTIVES)}", field="objective")
    if residency not in ("best", "patent"):
        raise HetschedError(f"unknown residency rule {residency!r}; use 'best' or 'patent'", field="residency")
    t0 = time.perf_counter()
    ctx = Ctx(graph, system, cost)
    ctx.require_support()
    order = ctx.order
    cands = [ctx.candidates(o) for o in order]
    log = StepLog()
    n_total = 1
    for c in cands:
        n_total *= len(c)
    best: list = [float("inf"), None]
    n_eval = 0
    budget = plan_budget(ctx)

    def resident(dev: dict[str, str]) -> State:
        return best_residency(ctx, dev, budget) if residency == "best" else _with_locality(ctx, dev, occupancy_threshold)

    if objective == "makespan":
        if n_total > max_placements:
            raise Infeasible(f"brute force would simulate {n_total} placements, above max_placements={max_placements}",
                             field="max_placements", n_placements=n_total)
        for combo in itertools.product(*cands):
            dev = dict(zip(order, combo))
            v = ctx.simulate(resident(dev))[0]
            n_eval += 1
            if v < best[0]:
                log.add("best", f"#{n_eval}", best[0] if best[1] else None, v, True, "new best placement",
                        {"device": dev}, data={"phase": "brute_force", "metric": objective})
                best = [v, dev]
    else:
        n_eval = _bnb_total(ctx, cands, resident, best, log)
    log.add("choose", "best", None, best[0], True, f"best of {n_eval} evaluated placements", {},
            data={"phase": "brute_force", "metric": objective})
    if residency == "best":
        st = resident(dict(best[1]))
        log.add("residency", "all", None, ctx.total_latency(st), True,
                "each weight and tensor kept where that saves transfer time and the memory plan allows",
                {"weights_add": sorted(st.w_res), "tensors_add": sorted(st.t_res)},
                data={"phase": "brute_force", "metric": "total_latency"})
    else:
        st = State(dict(best[1]))
        _locality(ctx, st, log, occupancy_threshold, "greedy", ctx.total_latency(st))
    return finish(ctx, st, log, phase="brute_force",
                  params={"objective": objective, "residency": residency, "n_placements": n_total, "n_evaluated": n_eval},
                  initial_state=EMPTY_STATE, extra_metrics={"search_s": time.perf_counter() - t0})


def _bnb_total(ctx: Ctx, cands: list[list[str]], resident: Callable[[dict[str, str]], State], best: list, log: StepLog) -> int:
    """Depth-first branch and bound on the additive total latency (placements in op order).

    With memory to spare the residency rule keeps every weight and every tensor that pays, so a
    tensor's term is ``min(kept, not kept)`` once its producer and consumers are placed and an op's
    term is its compute time. Each leaf is re-scored with the residency rule itself (exact under a
    binding capacity too); the bound only prunes with the optimistic terms, which never overestimate.
    """
    order = ctx.order
    n = len(order)
    host = ctx.host
    # optimistic op term: compute with weights resident (device != host) or fetched on the host (free)
    opt = [min(ctx.comp(o, d) for d in c) for o, c in zip(order, cands)]
    suffix = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + opt[i]
    # a tensor is complete once its last endpoint (producer or consumer) is placed
    last_pos: dict[str, int] = {}
    pos = ctx.pos
    for t in ctx.size:
        ends = [pos[c] for c in ctx.consumers[t] if c in pos]
        if ctx.producer[t] is not None:
            ends.append(pos[ctx.producer[t]])
        last_pos[t] = max(ends) if ends else -1
    done_at: dict[int, list[str]] = {}
    for t, k in last_pos.items():
        done_at.setdefault(k, []).append(t)
    dev: dict[str, str] = {}
    count = [0]
    base = sum(ctx.tensor_term(t, {}, False) for t in done_at.get(-1, ()))

    def op_opt(o: str, d: str) -> float:
        return ctx.op_term(o, d, d != host)

    def rec(i: int, acc: float) -> None:
        if acc + suffix[i] >= best[0] * (1 - 1e-12):
            return
        if i == n:
            count[0] += 1
            v = ctx.total_latency(resident(dev))
            if v < best[0]:
                log.add("best", f"#{count[0]}", best[0] if best[1] else None, v, True, "new best placement",
                        {"device": dict(dev)}, data={"phase": "brute_force", "metric": "total_latency"})
                best[0], best[1] = v, dict(dev)
            return
        o = order[i]
        for d in cands[i]:
            dev[o] = d
            add = op_opt(o, d)
            for t in done_at.get(i, ()):
                # kept or not, whichever is cheaper: a lower bound under any residency rule
                add += min(ctx.tensor_term(t, dev, False), ctx.tensor_term(t, dev, True))
            rec(i + 1, acc + add)
        del dev[o]

    rec(0, base)
    return count[0]
