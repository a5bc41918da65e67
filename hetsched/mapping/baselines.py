"""Simple and exact baselines.

* :func:`fastest_single_device` — everything on the one device that runs the graph fastest (ops
  it cannot run go to their fastest supporting device).
* :func:`brute_force` — every placement (each op on each device that supports it), each with its
  residency decided by one rule, timed by the same model; exact over placements for the
  evaluator's default op order. ``objective="total_latency"`` uses a depth-first branch and bound
  on the additive terms (so 10-op graphs on 4 devices stay fast); both objectives enumerate one
  placement per orbit of interchangeable devices (:func:`interchangeable_devices`), so 9 devices
  of which 4, 2 and 2 are identical cost what about 4 distinct ones do.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> from hetsched.mapping import h2h
>>> g, s = chain(4, seed=2), toy_system()
>>> bf = brute_force(g, s, objective="total_latency")
>>> bf.metrics["total_latency_s"] <= h2h(g, s).metrics["total_latency_s"] * (1 + 1e-9)
True
"""

from __future__ import annotations

import time
from typing import Callable

from ..cost import CostModel
from ..errors import HetschedError, Infeasible
from ..graph import OpGraph
from ..results import NullLog, StepLog
from ..system import System
from .engine import EMPTY_STATE, Ctx, State, best_residency, keep_on_chip, plan_budget, require_objective
from .result import MappingResult, finish

__all__ = ["fastest_single_device", "brute_force", "single_device_states", "interchangeable_devices", "with_locality"]


def with_locality(ctx: Ctx, device: dict[str, str], threshold: float = 0.9) -> State:
    """A placement with the greedy occupancy-threshold residency (:func:`~hetsched.mapping.engine.keep_on_chip`)."""
    st = State(dict(device))
    # brute force prices thousands of states: their locality decisions are not its steps
    keep_on_chip(ctx, st, NullLog(), threshold, "greedy", 0.0)
    return st


def single_device_states(ctx: Ctx, locality: bool = True, threshold: float = 0.9):
    """``(device, placement, state)`` for each compute device: every op there (ops it cannot run go to
    their fastest supporting device), with the greedy locality pass unless ``locality=False``."""
    ctx.require_support()
    for d in ctx.system.compute_devices:
        dev = {}
        for o in ctx.order:
            c = ctx.servable(o)
            dev[o] = d if d in c else min(c, key=lambda x: (ctx.comp(o, x), c.index(x)))
        yield d, dev, (with_locality(ctx, dev, threshold) if locality else State(dict(dev)))


def fastest_single_device(graph: OpGraph, system: System, *, cost: CostModel | None = None, locality: bool = True,
                          occupancy_threshold: float = 0.9, objective: str = "makespan") -> MappingResult:
    """Everything on one device: try each compute device, keep the best on ``objective``.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> r = fastest_single_device(chain(3), toy_system())
    >>> len(set(r.placement.device.values()))
    1

    Raises
    ------
    Infeasible
        When no device of the system runs any op (an empty support table): there is no device to choose.
    """
    require_objective(objective)
    ctx = Ctx(graph, system, cost)
    if not system.compute_devices:
        ctx.require_support()  # an op no device runs is named first
        raise Infeasible(f"system {system.name!r} has no device that runs any op (its support table is empty): "
                         "there is no single device to choose", field="system")
    log = StepLog()
    best = None
    for d, dev, st in single_device_states(ctx, locality, occupancy_threshold):
        v = ctx.score(st, objective)
        better = best is None or v < best[0]
        log.add("try_device", d, best[0] if best else None, v, better,
                f"{objective.replace('_', ' ')} {v * 1e3:.4g} ms" + (" (best so far)" if better else ""),
                {"device": dev}, data={"phase": "single_device", "metric": objective})
        if better:
            best = (v, d, dev)
    v, d, dev = best
    st = State(dict(dev))
    if locality:
        keep_on_chip(ctx, st, log, occupancy_threshold)
    return finish(ctx, st, log, phase="fastest_single_device",
                  params={"device": d, "objective": objective, "locality": locality}, initial_state=EMPTY_STATE)


def interchangeable_devices(ctx: Ctx, budget: dict[str, float] | None = None) -> list[list[str]]:
    """Classes of devices that swapping never changes a mapping's cost, on this graph: ``[[d, ...], ...]``.

    Two devices are interchangeable when the swap ``(a b)`` of their names maps every price the
    evaluator's clock reads onto itself, checked on the numbers, not on the names or the specs:
    same support and the same compute time for every op, the same memory (and memory plan), and
    routes that the swap maps onto routes (hop by hop, with the same duration for every weight and
    tensor size of the graph, and lanes that stay shared or separate alike). The clock, the
    additive terms and :func:`~hetsched.mapping.engine.best_residency` only look devices up by name,
    so a placement and its image under the swap have bit-identical makespan and total latency.
    The host is never swapped. Classes are in device order, members in the order every op's
    candidate list gives them (devices listed in different orders by different ops are not grouped);
    a device in no class with another is a class of its own.

    >>> from hetsched.io import load_system
    >>> from hetsched.io.generators import topcuoglu
    >>> ctx = Ctx(topcuoglu(4, seed=0), load_system("pipeline_a100_v100_u280"))
    >>> [c for c in interchangeable_devices(ctx) if len(c) > 1]
    [['gpu0', 'gpu1', 'gpu2', 'gpu3'], ['gpu4', 'gpu5'], ['fpga0', 'fpga1']]
    """
    budget = plan_budget(ctx) if budget is None else budget
    devs = list(ctx.devices)
    sizes = sorted({float(ctx.weight[o]) for o in ctx.order if ctx.weight[o]} | {float(v) for v in ctx.size.values()})
    routes = {(x, y): [(a, b, lane) for a, b, lane in ctx.hops(x, y)] for x in devs for y in devs}

    def swappable(a: str, b: str) -> bool:
        if ctx.host in (a, b) or ctx.capacity[a] != ctx.capacity[b] or budget.get(a) != budget.get(b):
            return False
        for o in ctx.order:
            c = ctx.candidates(o)
            if (a in c) != (b in c) or (a in c and ctx.comp(o, a) != ctx.comp(o, b)):
                return False
        sw = {a: b, b: a}
        lanes: dict[str, str] = {}
        for (x, y), hops in routes.items():
            img = routes[(sw.get(x, x), sw.get(y, y))]
            if len(img) != len(hops):
                return False
            for (h1, h2, lane), (i1, i2, ilane) in zip(hops, img):
                if (sw.get(h1, h1), sw.get(h2, h2)) != (i1, i2) or lanes.setdefault(lane, ilane) != ilane:
                    return False
                if (a in (h1, h2) or b in (h1, h2)) and any(ctx.hop_s(n, h1, h2) != ctx.hop_s(n, i1, i2) for n in sizes):
                    return False
        # a shared lane must stay shared: the lane map is a bijection
        return len(set(lanes.values())) == len(lanes)

    classes: list[list[str]] = []
    for d in devs:
        for cl in classes:
            if swappable(cl[0], d):
                cl.append(d)
                break
        else:
            classes.append([d])
    # enumeration meets a class's members in its candidate lists' order (the support table's
    # priorities, then its listing order): a class stays one only where every list has its members
    # in one order, which becomes the class order, so the first best placement of its orbit is the one
    # full enumeration finds first
    out: list[list[str]] = []
    for cl in classes:
        orders = {tuple(d for d in ctx.candidates(o) if d in cl) for o in ctx.order} - {()} if len(cl) > 1 else set()
        if len(orders) > 1:
            out.extend([d] for d in cl)
        else:
            out.append(list(next(iter(orders))) if orders else cl)
    return out


class _Orbits:
    """One placement per orbit of the interchangeable devices: the members of a class are taken into
    use in class order (op by op, a member is allowed only if every earlier member is in use already).

    Since a swap of interchangeable devices changes no cost, every placement has the same value as
    the one member of its orbit enumerated; and since every candidate list has a class's members in
    class order (:func:`interchangeable_devices` makes it so), that member is the first of its orbit
    in enumeration order, so the first best placement found is the one full enumeration finds.
    """

    def __init__(self, classes: list[list[str]]) -> None:
        self.cls = {d: k for k, c in enumerate(classes) for d in c}
        self.idx = {d: i for c in classes for i, d in enumerate(c)}
        self.used = [0] * len(classes)

    def enter(self, d: str) -> int:
        """-1: ``d`` is not the representative of its orbit here; else 1 if it takes a new member into use."""
        k, i = self.cls[d], self.idx[d]
        u = self.used[k]
        if i > u:
            return -1
        if i == u:
            self.used[k] = u + 1
            return 1
        return 0

    def leave(self, d: str, new: int) -> None:
        if new == 1:
            self.used[self.cls[d]] -= 1

    def count(self, cands: list[list[str]]) -> int:
        """How many placements the enumeration visits (a count over the members in use per class)."""
        states = {tuple(self.used): 1}
        for c in cands:
            nxt: dict[tuple, int] = {}
            for st, n in states.items():
                for d in c:
                    k, i = self.cls[d], self.idx[d]
                    if i > st[k]:
                        continue
                    key = st if i < st[k] else st[:k] + (st[k] + 1,) + st[k + 1:]
                    nxt[key] = nxt.get(key, 0) + n
            states = nxt
        return sum(states.values())

    def product(self, cands: list[list[str]]):
        """The placements visited, as tuples in the order of ``itertools.product`` over ``cands``."""
        combo: list[str] = []

        def rec(i: int):
            if i == len(cands):
                yield tuple(combo)
                return
            for d in cands[i]:
                new = self.enter(d)
                if new < 0:
                    continue
                combo.append(d)
                yield from rec(i + 1)
                combo.pop()
                self.leave(d, new)

        return rec(0)


def brute_force(graph: OpGraph, system: System, *, objective: str = "makespan", cost: CostModel | None = None,
                residency: str = "best", occupancy_threshold: float = 0.9, max_placements: int = 200_000) -> MappingResult:
    """The best placement over all placements, each with its residency decided by one rule.

    **What it optimises:** ``objective`` exactly over placements (the evaluator's default op order).
    ``residency="best"`` (default) gives each placement the residency of
    :func:`~hetsched.mapping.engine.best_residency` (every weight and tensor whose keeping saves
    transfer time, while the memory plan allows): with memory to spare this is the optimum of the
    total latency over placements *and* residency, the reference :func:`map_ilp` and
    :func:`map_search` are measured against. ``residency="patent"`` gives each placement the
    patent's greedy locality pass (threshold ``occupancy_threshold``) instead. For ``makespan`` the
    residency is chosen by the same rule (by transfer time saved), so the result is exact over
    placements only.

    With ``residency="best"``, placements that differ only by a swap of interchangeable devices
    (:func:`interchangeable_devices`: e.g. four identical GPUs on identical links) have the same
    value, so only one per orbit is visited (``params["n_canonical"]`` of ``n_placements``); the
    value and the placement returned are those of the full enumeration.

    ``objective="total_latency"`` runs a depth-first branch and bound on the additive terms; a
    ``makespan`` search simulates every placement visited and raises
    :class:`~hetsched.errors.Infeasible` naming the count above ``max_placements``. Steps log each
    new best.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> brute_force(chain(3), toy_system()).params["n_evaluated"] > 0
    True
    """
    require_objective(objective)
    if residency not in ("best", "patent"):
        raise HetschedError(f"unknown residency rule {residency!r}; use 'best' or 'patent'", field="residency")
    t0 = time.perf_counter()
    ctx = Ctx(graph, system, cost)
    ctx.require_support()
    order = ctx.order
    # a device too small for an op's working set cannot take it, whatever the residency (exactness
    # under a binding capacity: such a placement has no value, the evaluator refuses it)
    cands = [ctx.servable(o) for o in order]
    log = StepLog()
    n_total = 1
    for c in cands:
        n_total *= len(c)
    best: list = [float("inf"), None]
    n_eval = 0
    budget = plan_budget(ctx)
    # the patent's locality pass is not checked for swap symmetry: it enumerates every placement
    classes = interchangeable_devices(ctx, budget) if residency == "best" else [[d] for d in ctx.devices]
    orbits = _Orbits(classes)
    n_canon = orbits.count(cands)

    def resident(dev: dict[str, str]) -> State:
        return best_residency(ctx, dev, budget) if residency == "best" else with_locality(ctx, dev, occupancy_threshold)

    if objective == "makespan":
        if n_canon > max_placements:
            raise Infeasible(f"brute force would simulate {n_canon} placements, above max_placements={max_placements}",
                             field="max_placements", n_placements=n_canon)
        for combo in orbits.product(cands):
            dev = dict(zip(order, combo))
            v = ctx.simulate(resident(dev))[0]
            n_eval += 1
            if v < best[0]:
                log.add("best", f"#{n_eval}", best[0] if best[1] else None, v, True, "new best placement",
                        {"device": dev}, data={"phase": "brute_force", "metric": objective})
                best = [v, dev]
    else:
        n_eval = _bnb_total(ctx, cands, resident, best, log, orbits)
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
        keep_on_chip(ctx, st, log, occupancy_threshold)
    return finish(ctx, st, log, phase="brute_force",
                  params={"objective": objective, "residency": residency, "n_placements": n_total,
                          "n_canonical": n_canon, "n_evaluated": n_eval,
                          "interchangeable": [list(c) for c in classes if len(c) > 1]},
                  initial_state=EMPTY_STATE, extra_metrics={"search_s": time.perf_counter() - t0})


def _bnb_total(ctx: Ctx, cands: list[list[str]], resident: Callable[[dict[str, str]], State], best: list, log: StepLog,
               orbits: _Orbits) -> int:
    """Depth-first branch and bound on the additive total latency (placements in op order).

    With memory to spare the residency rule keeps every weight and every tensor that pays, so a
    tensor's term is ``min(kept, not kept)`` and an op's term is its compute time. The bound counts,
    for every tensor with a placed endpoint, that minimum over the readers placed so far (the op
    order is topological, so its producer is placed before any reader): a tensor's busy time only
    grows as readers are added (each reader either reads in place or adds a copy), so the partial
    term never overestimates. Unplaced ops count their fastest compute. Each leaf is re-scored with
    the residency rule itself (exact under a binding capacity too).
    """
    order = ctx.order
    n = len(order)
    host = ctx.host
    # optimistic op term: compute with weights resident (device != host) or fetched on the host (free)
    opt = [min(ctx.comp(o, d) for d in c) for o, c in zip(order, cands)]
    suffix = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + opt[i]
    pos = ctx.pos
    # tensors no op of the order touches (an unread graph input) are priced once, up front
    touched = [list(dict.fromkeys(ctx.inputs[o] + ctx.outputs[o])) for o in order]
    seen = {t for ts in touched for t in ts}
    base = sum(ctx.tensor_term(t, {}, False) for t in ctx.size if t not in seen)
    for t in seen:
        p = ctx.producer[t]
        if p is not None and p in pos and any(pos[c] < pos[p] for c in ctx.consumers[t] if c in pos):
            raise HetschedError(f"internal: op order not topological at tensor {t!r}")  # pragma: no cover
    part = dict.fromkeys(seen, 0.0)
    dev: dict[str, str] = {}
    count = [0]
    term = ctx.tensor_term

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
        ts = touched[i]
        old = [part[t] for t in ts]
        for d in cands[i]:
            new = orbits.enter(d)
            if new < 0:
                continue
            dev[o] = d
            add = ctx.op_term(o, d, d != host)
            for t in ts:
                # kept or not, whichever is cheaper: a lower bound under any residency rule
                v = term(t, dev, False)
                k = term(t, dev, True)
                v = k if k < v else v
                add += v - part[t]
                part[t] = v
            rec(i + 1, acc + add)
            for t, v in zip(ts, old):
                part[t] = v
            orbits.leave(d, new)
        del dev[o]

    rec(0, base)
    return count[0]
