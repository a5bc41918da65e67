"""The compute-first mapping patent's three phases (compute-first mapping, memory-aware communication
optimisation, remapping) and their composition ``h2h``.

Source: the compute-first mapping patent (``docs/patents.md``; Inspur, "模型调度方法、装置、计算系统、设备及可读存储介质",
2023), whose public twin is H2H (Zhang et al., "H2H: Heterogeneous Model to Heterogeneous System
Mapping with Computation and Communication Awareness", DAC 2022).

Citations are claim numbers throughout. The published claim text breaks off inside claim 11; the
description states every claim as one paragraph, claim ``n`` in paragraph ``[0005 + n]`` (claim 1 is
[0006], claim 11 is [0016], claim 19 is [0024]), and claims 12-19 are read from there.

1. :func:`map_compute_first` (claims 8-11): walk the graph in groups of ops whose predecessors are
   all mapped (claim 9); price every device able to run the op (claim 10) *with its memory
   cleared*: weights and inputs come from host memory and the output goes back there (claim 11);
   map the op to the fastest (claim 8).
2. :func:`optimize_locality` (claims 12-17): after compute-first (claim 12), write a layer's data
   into its device's memory (claim 13) while the device's occupancy stays under a threshold
   (claim 14): its weights (claim 15), and its intermediate result when the successor runs on the
   same device (claim 16); re-time everything (claim 17).
3. :func:`remap` (claims 1-7): walk the layers in order; a "specific layer" is one whose successor
   runs on another accelerator (claim 2); tentatively move it to the successor's accelerator
   (claim 3) with its intermediate results in that accelerator's memory (claim 4), and keep the
   move when the system total latency (the sum over devices of each device's latency, claim 5)
   drops; after a kept move the memory optimisation runs again on the new mapping (claim 6); a
   move that does not pay is skipped and the walk goes on to the next specific layer, once
   (claim 7).

Examples
--------
>>> from hetsched.io.generators import fork_join
>>> from hetsched.io.systems import toy_system
>>> g, s = fork_join(3, 2, seed=0), toy_system()
>>> cf = map_compute_first(g, s)
>>> final = h2h(g, s)
>>> final.metrics["total_latency_s"] <= cf.metrics["total_latency_s"]
True
"""

from __future__ import annotations

import time
from bisect import bisect_right, insort
from typing import Any, Callable

from ..cost import CostModel
from ..errors import HetschedError
from ..graph import OpGraph
from ..results import StepLog
from ..system import System
from .engine import EMPTY_STATE, REL_EPS, Ctx, Mover, State, diff, keep_on_chip, occupancy_limit, require_objective
from .result import MappingResult, finish

__all__ = ["map_compute_first", "optimize_locality", "remap", "h2h", "cleared_price", "h2h_state"]


# ------------------------------------------------------------------------------------------ phase 1
def cleared_price(ctx: Ctx, op: str, dev: str) -> tuple[float, dict[str, float]]:
    """Claim 11's latency of ``op`` on ``dev`` with the device's memory cleared, and its parts.

    All weights and intermediate results live in host memory, so the op streams its weights and
    inputs in from the host (the cost model's non-resident price) and writes each output back to
    the host (``transfer_s`` per hop, as the evaluator charges it).
    """
    total = float(ctx.cost.compute_s(ctx.ops[op], dev, weights_resident=False, inputs_resident=False))
    wb = 0.0
    if dev != ctx.host:
        for t in ctx.outputs[op]:
            wb += ctx.xfer(ctx.size[t], dev, ctx.host)
    return total + wb, {"streamed_in_and_compute_s": total, "writeback_s": wb}


def _compute_first(ctx: Ctx, log: StepLog) -> State:
    ctx.require_support()
    st = State()
    groups = ctx.graph.generations()
    for gi, group in enumerate(groups):  # claim 9: groups of layers whose predecessors are mapped
        for o in sorted(group, key=ctx.pos.__getitem__):
            cands = ctx.servable(o)  # claim 10: every device able to run it (and hold its working set)
            priced = {d: cleared_price(ctx, o, d) for d in cands}
            lat = {d: p[0] for d, p in priced.items()}
            best = min(cands, key=lambda d: (lat[d], cands.index(d)))  # claim 8: the fastest
            st.device[o] = best
            others = ", ".join(f"{d} {lat[d] * 1e3:.3g} ms" for d in cands if d != best)
            log.add("map", o, None, lat[best], True,
                    f"fastest with memory cleared (weights and inputs from host memory, output back to it): "
                    f"{best} {lat[best] * 1e3:.3g} ms" + (f" (vs {others})" if others else ""),
                    {"device": {o: best}}, data={"phase": "compute_first", "metric": "op_latency", "group": gi,
                                                 "candidates": lat, "parts": {d: p[1] for d, p in priced.items()},
                                                 "device": best})
    return st


# ------------------------------------------------------------------------------------------ phase 3
class _Waiting:
    """Claim 6's index: the weights and intermediate results not in device memory, per device they
    would occupy, sorted by size, so that the memory a kept move frees is offered to exactly those
    that can now fit. An entry may be stale (kept since, or moved elsewhere): checked when offered."""

    def __init__(self, ctx: Ctx, st: State) -> None:
        self.ctx, self.st = ctx, st
        self.out_idx = {t: j for o in ctx.order for j, t in enumerate(ctx.outputs[o])}
        self.items: dict[str, list[tuple]] = {d: [] for d in ctx.devices}
        self.listed: set[tuple] = set()
        for o in ctx.order:
            self.list_op(o, sort=False)
        for lst in self.items.values():
            lst.sort()

    def devices_of(self, kind: str, x: str) -> list[str]:
        """The devices an item not kept would occupy if kept (none: it is not a candidate)."""
        ctx, st = self.ctx, self.st
        if kind == "w":
            d = st.device[x]
            return [] if d == ctx.host or not ctx.weight[x] or x in st.w_res else [d]
        p = ctx.producer[x]
        if p is None or st.device[p] == ctx.host or x in st.t_res:
            return []
        return ctx.footprint(x, st.device)

    def _list(self, kind: str, x: str, sort: bool) -> None:
        ctx = self.ctx
        devs = self.devices_of(kind, x)
        if not devs:
            return
        if kind == "w":
            key = (ctx.weight[x], ctx.pos[x], 0, 0, "w", x)
        else:
            key = (ctx.size[x], ctx.pos[ctx.producer[x]], 1, self.out_idx[x], "t", x)
        for d in devs:
            if (key, d) in self.listed:
                continue
            self.listed.add((key, d))
            if sort:
                insort(self.items[d], key)
            else:
                self.items[d].append(key)

    def list_op(self, op: str, sort: bool = True) -> None:
        """(Re-)list what a moved op left outside device memory: its weights and the tensors it touches."""
        self._list("w", op, sort)
        for t in self.ctx.touch[op]:
            self._list("t", t, sort)

    def fitting(self, dev: str, free: float) -> list[tuple]:
        """The entries waiting on ``dev`` no larger than ``free`` bytes, in layer order."""
        lst = self.items[dev]
        return sorted(lst[:bisect_right(lst, (free, float("inf")))], key=lambda x: x[1:4])

    def drop(self, dev: str, done: set[tuple]) -> None:
        if done:
            self.items[dev] = [key for key in self.items[dev] if key not in done]
            self.listed.difference_update((key, dev) for key in done)


def _relocality(mv: Mover, wait: _Waiting, dev: str, log: StepLog, moved: list[str], threshold: float) -> None:
    """Claim 6: after a kept move, run the memory optimisation again on the new mapping.

    Only the source device's memory was freed (the destination only filled up, and on every other
    device occupancy and the transfer each item saves are unchanged: the moved ops' own weights and
    tensors were re-decided with the move), so the pass re-offers, in layer order, the items
    waiting on ``dev`` that fit under the threshold now. Items too large for the freed memory
    would be refused by the threshold rule and get no step. Under ``total_latency`` every kept item
    lowers the objective; under ``makespan`` an item is kept only if the makespan does not rise
    (re-timed from the item's layer on, claim 6), so this never makes things worse.
    """
    plan = mv.plan
    done: set[tuple] = set()
    for key in wait.fitting(dev, plan.limit[dev] - plan.used[dev]):
        kind, x = key[4], key[5]
        devs = wait.devices_of(kind, x)
        if dev not in devs:  # kept or moved since it was listed
            done.add(key)
            continue
        ok, info = plan.check(devs, key[0])
        before = mv.value()
        rec = mv.offer(kind, x) if ok else None
        if rec is None:
            continue
        reason = plan.why(ok, kind, x, info, threshold)
        info = {**info, "threshold": threshold, **({"saved_s": rec[3][0][2] - mv.tterm[x]} if kind == "t" else {})}
        action, delta = ("keep_weights", {"weights_add": [x]}) if kind == "w" else ("keep_tensor", {"tensors_add": [x]})
        after = mv.value(bound=True)
        if mv.objective == "makespan" and (mv.pruned or after > before * (1 + REL_EPS)):
            mv.undo(rec)
            log.add(action, x, before, after, False,
                    f"claim 6: memory freed on {dev}, but keeping it would raise the makespan "
                    f"{before * 1e3:.4g} -> {after * 1e3:.4g} ms", delta,
                    data={"phase": "remap", "metric": "makespan", "relocality": True, "after_move": list(moved),
                          "bound_only": mv.pruned, **info})
            continue
        mv.commit()
        done.add(key)
        log.add(action, x, before, after, True, f"claim 6: the remap of {', '.join(moved)} freed memory on {dev}; {reason}",
                delta, data={"phase": "remap", "metric": mv.objective, "relocality": True, "after_move": list(moved),
                             **info})
    wait.drop(dev, done)


def _remap(ctx: Ctx, st: State, log: StepLog, objective: str, direction: str, max_passes: int | None,
           threshold: float, group_size: int = 1) -> float:
    require_objective(objective)
    if direction not in ("successor", "both"):
        raise HetschedError(f"unknown direction {direction!r}; use 'successor' or 'both'", field="direction")
    if max_passes is not None and max_passes < 1:
        raise HetschedError(f"max_passes must be >= 1 or None, got {max_passes!r}", field="max_passes")
    if group_size < 1:
        raise HetschedError(f"group_size must be >= 1, got {group_size!r}", field="group_size")
    # claim 4: the moved layer's data goes to the new device's memory while it stays under the threshold
    mv = Mover(ctx, st, objective, occupancy_limit(ctx, threshold), keep="patent")
    wait = _Waiting(ctx, st)
    name = objective.replace("_", " ")

    def trial(group: list[str], dst: str) -> tuple[bool, float, float, dict[str, Any]]:
        before = mv.value()
        recs = [mv.move(x, dst) for x in group]
        after = mv.value(bound=True)
        delta = mv.delta(recs)
        if after < before * (1 - REL_EPS):
            mv.commit()
            return True, before, after, delta
        for r in reversed(recs):
            mv.undo(r)
        return False, before, after, delta

    def kept(src: str, group: list[str]) -> None:
        for x in group:
            wait.list_op(x)
        _relocality(mv, wait, src, log, group, threshold)  # claim 6

    def fail_reason(before: float, after: float, k: int = 1) -> str:
        if mv.pruned:
            return (f"not better: one device alone would be busy {after * 1e3:.4g} ms >= the makespan "
                    f"{before * 1e3:.4g} ms (lower bound, not simulated)")
        return f"not better{f' with {k} layers' if k > 1 else ''}: {name} {before * 1e3:.4g} -> {after * 1e3:.4g} ms"

    passes = 0
    while True:
        passes += 1
        improved = False
        for o in ctx.order:
            d = st.device[o]
            targets: list[tuple[str, str]] = []
            for s_ in ctx.succ[o]:
                ds = st.device[s_]
                if ds != d and all(ds != x for x, _ in targets):
                    targets.append((ds, "successor"))
            if direction == "both":
                for p_ in ctx.pred[o]:
                    dp = st.device[p_]
                    if dp != d and all(dp != x for x, _ in targets):
                        targets.append((dp, "predecessor"))
            for dst, why in targets:
                base = dict(phase="remap", pass_=passes, source=d, target=dst, via=why, objective=objective,
                            metric=objective)
                why_not = ctx.refusal(o, dst)
                if why_not is not None:
                    log.add("remap", o, mv.value(), None, False, why_not, {"device": {o: dst}}, data={**base})
                    continue
                ok, before, after, delta = trial([o], dst)
                log.add("remap", o, before, after, ok,
                        f"{name} drops {before * 1e3:.4g} -> {after * 1e3:.4g} ms" if ok else fail_reason(before, after),
                        delta, data={**base, "bound_only": mv.pruned})
                if ok:
                    improved = True
                    kept(d, [o])
                    break
                # beyond the patent: move the layer together with the run of predecessors it shares
                # its device with (a single move cannot cross a chain of same-device layers)
                group = [o]
                while len(group) < group_size:
                    nxt = next((p_ for p_ in reversed(ctx.pred[group[-1]])
                                if st.device[p_] == d and p_ not in group and ctx.refusal(p_, dst) is None), None)
                    if nxt is None:
                        break
                    group.append(nxt)
                    ok, before, after, delta = trial(list(group), dst)
                    log.add("remap_group", o, before, after, ok,
                            (f"moving {len(group)} layers together: {name} drops {before * 1e3:.4g} -> {after * 1e3:.4g} ms"
                             if ok else fail_reason(before, after, len(group))),
                            delta, data={**base, "ops": list(group), "bound_only": mv.pruned})
                    if ok:
                        improved = True
                        kept(d, group)
                        break
                if improved and st.device[o] != d:
                    break
        if not improved or (max_passes is not None and passes >= max_passes):
            break
    return mv.value()


# ------------------------------------------------------------------------------------------ wrapping
def _ctx_of(result: MappingResult) -> Ctx:
    return Ctx(result.graph, result.system, result.cost, contention=result.params.get("contention", True))


def map_compute_first(graph: OpGraph, system: System, *, cost: CostModel | None = None, contention: bool = True) -> MappingResult:
    """Phase 1: map every op to the device that runs it fastest with device memory cleared.

    Walks the graph in groups of ops whose predecessors are all mapped (``graph.generations()``,
    claim 9); for each op prices every device the support table lets run it
    (``system.candidates(op_type)``, claim 10) with the device's memory cleared: weights and inputs
    stream in from host memory and the output is written back to it (claim 11, see
    :func:`cleared_price`); maps it to the minimum (claim 8; ties: the support table's priority).
    One ``map`` step per op with the candidates' latencies in ``data["candidates"]`` and their parts
    (compute with weights and inputs streamed in; output written back) in ``data["parts"]``.

    **What it optimises:** each op's own latency, greedily, one op at a time (no look-ahead).

    Raises
    ------
    UnsupportedOpError
        Naming every op (and op_type) that no device supports.
    CapacityError
        Naming the device when an op's weights and activations fit no device that runs it.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> r = map_compute_first(chain(3, seed=0), toy_system())
    >>> r.steps[0].action, r.steps[0].subject, r.steps[0].accepted
    ('map', 'op0', True)
    """
    ctx = Ctx(graph, system, cost, contention=contention)
    log = StepLog()
    st = _compute_first(ctx, log)
    return finish(ctx, st, log, phase="compute_first", params={"contention": contention}, initial_state=EMPTY_STATE)


def optimize_locality(result: MappingResult, *, occupancy_threshold: float = 0.9, policy: str | Callable = "greedy") -> MappingResult:
    """Phase 2: keep weights and intermediate results in device memory where it pays and fits.

    Walks the layers in order. An op's weights stay in its device's memory while the device's
    planned occupancy (resident weights + kept tensors) stays under ``occupancy_threshold``
    (claims 13-15). An output tensor stays on-chip when a consumer runs on the same device
    (claim 16) or when a direct device-to-device copy beats the round trip through host memory.
    **What it optimises:** the system total latency (claim 5), by the transfers each kept item saves.
    ``policy="knapsack"`` instead packs, per device, the items that save the most transfer time
    into the budget (H2H's variant). A callable ``policy(ctx, state, items, threshold)`` returns one
    bool per item. One ``keep_weights``/``keep_tensor`` step per decision, ``before``/``after`` the
    running system total latency. Everything is re-timed with :func:`hetsched.evaluate`.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> cf = map_compute_first(chain(4, seed=0), toy_system())
    >>> loc = optimize_locality(cf)
    >>> loc.metrics["total_latency_s"] < cf.metrics["total_latency_s"]
    True
    """
    ctx = _ctx_of(result)
    st = State(dict(result.placement.device), set(result.placement.weights_resident), set(result.placement.tensors_resident))
    log = StepLog(result.steps)
    keep_on_chip(ctx, st, log, occupancy_threshold, policy)
    params = {**result.params, "occupancy_threshold": occupancy_threshold, "policy": policy if isinstance(policy, str) else "custom"}
    return finish(ctx, st, log, phase="locality", params=params, initial_state=result.initial_state)


def remap(result: MappingResult, *, objective: str = "total_latency", direction: str = "successor",
          max_passes: int | None = 1, occupancy_threshold: float | None = None, group_size: int = 1) -> MappingResult:
    """Phase 3: move "specific layers" to their successor's device when the objective drops.

    Walks the ops in order; an op whose successor runs on another device is a specific layer
    (claim 2). It is tentatively moved to that successor's device (claim 3; ``direction="both"``
    also tries its predecessors' devices), locality is re-run around it (its weights and the
    tensors it reads and writes go to the new device's memory when they fit, claim 4), and the
    move is kept when the objective drops (claim 6). After a kept move the memory optimisation
    runs again (claim 6): the memory the move freed on its source device is offered, in layer
    order, to the weights and tensors waiting there (``keep_weights``/``keep_tensor`` steps with
    ``data["relocality"]``). A move that does not pay is skipped and the walk goes on (claim 7).

    **What it optimises.** ``objective="total_latency"`` (the patent): the system total latency,
    the sum over devices of their busy time (claim 5), re-timed incrementally from the moved op's
    own terms. ``"makespan"`` (H2H's rule): the end-to-end time, re-simulated only from the first op
    the move affects (claim 6), from a checkpoint, unless a lower bound (the busiest device's
    compute plus weight-fetch time, kept incrementally) already rules the move out (such steps
    carry ``data["bound_only"]``; ``after`` is then that bound). A makespan trial costs O(ops after
    the checkpoint), so this objective is for graphs of a few thousand ops. Each step says in
    ``data["metric"]`` which quantity its ``before``/``after`` are.

    ``max_passes=1`` (default) walks the layers once, as the patent does (claim 7);
    ``max_passes=None`` (an extension) repeats the walk until a pass changes nothing.
    ``group_size > 1`` goes beyond the patent: when moving the layer alone does not pay, it is moved
    together with up to ``group_size - 1`` predecessors that share its device (``remap_group``
    steps), which escapes the local minimum of a same-device chain that only pays to move whole.

    One ``remap`` step per candidate with ``data`` = source, target, why it was tried; rejected steps
    say why (not better, does not fit memory, unsupported) and keep in ``delta`` the placement and
    residency changes the trial made (see :func:`~hetsched.mapping.evaluate_trial`). Never worse
    than its input.

    >>> from hetsched.io.generators import fork_join
    >>> from hetsched.io.systems import toy_system
    >>> loc = optimize_locality(map_compute_first(fork_join(2, 2, seed=1), toy_system()))
    >>> rm = remap(loc)
    >>> rm.metrics["total_latency_s"] <= loc.metrics["total_latency_s"] * (1 + 1e-9)
    True
    """
    ctx = _ctx_of(result)
    thr = occupancy_threshold if occupancy_threshold is not None else result.params.get("occupancy_threshold", 0.9)
    st = State(dict(result.placement.device), set(result.placement.weights_resident), set(result.placement.tensors_resident))
    log = StepLog(result.steps)
    _remap(ctx, st, log, objective, direction, max_passes, thr, group_size)
    params = {**result.params, "objective": objective, "direction": direction, "max_passes": max_passes,
              "occupancy_threshold": thr, "group_size": group_size}
    return finish(ctx, st, log, phase="remap", params=params, initial_state=result.initial_state)


def h2h(graph: OpGraph, system: System, *, cost: CostModel | None = None, occupancy_threshold: float = 0.9,
        policy: str | Callable = "greedy", objective: str = "total_latency", direction: str = "successor",
        max_passes: int | None = 1, group_size: int = 1, contention: bool = True) -> MappingResult:
    """The compute-first mapping patent's mapper: phases 1-3 in one call, with every step, evaluated once at the end.

    **What it optimises:** the patent's *system total latency* (claim 5: the sum over devices of
    the time each spends computing and moving its own data, ``metrics["total_latency_s"]``), not
    the end-to-end makespan; ``objective="makespan"`` switches the remap acceptance to H2H's
    makespan rule. The options are those of :func:`optimize_locality` and :func:`remap`
    (``max_passes=1``: the patent's single walk, claim 7; ``None``: repeat until stable).

    The result's steps start with the compute-first ``map`` steps (``data["phase"] ==
    "compute_first"``), then the locality steps, then the remap steps, so ``replay(k)`` walks from
    the compute-first mapping to the final one. ``metrics`` add ``compute_first_<objective>`` and
    ``h2h_runtime_s``. If the final state were worse than compute-first on the objective (possible
    for ``makespan`` only: a kept tensor may reroute a transfer into a busier link), a ``revert``
    step restores the compute-first mapping, so h2h is never worse than compute-first.

    >>> from hetsched.io.generators import layered
    >>> from hetsched.io.systems import toy_system
    >>> r = h2h(layered(4, 4, seed=1), toy_system())
    >>> sorted(r.phase_bounds())
    ['compute_first', 'locality', 'remap']
    """
    t0 = time.perf_counter()
    require_objective(objective)
    ctx = Ctx(graph, system, cost, contention=contention)
    log = StepLog()
    st, extra = h2h_state(ctx, log, occupancy_threshold=occupancy_threshold, policy=policy, objective=objective,
                          direction=direction, max_passes=max_passes, group_size=group_size)
    params = {"contention": contention, "occupancy_threshold": occupancy_threshold,
              "policy": policy if isinstance(policy, str) else "custom", "objective": objective,
              "direction": direction, "max_passes": max_passes, "group_size": group_size}
    extra["h2h_runtime_s"] = time.perf_counter() - t0
    return finish(ctx, st, log, phase="h2h", params=params, initial_state=EMPTY_STATE, extra_metrics=extra)


def h2h_state(ctx: Ctx, log: StepLog, *, occupancy_threshold: float = 0.9, policy: str | Callable = "greedy",
              objective: str = "total_latency", direction: str = "successor", max_passes: int | None = 1,
              group_size: int = 1) -> tuple[State, dict[str, float]]:
    """The three phases on a prepared context, without the final evaluation: ``(state, metrics)``."""
    t0 = time.perf_counter()
    st = _compute_first(ctx, log)
    t1 = time.perf_counter()
    cf_state = st.copy()
    cf_total = ctx.total_latency(st)
    cf_obj = cf_total if objective == "total_latency" else ctx.simulate(st)[0]
    keep_on_chip(ctx, st, log, occupancy_threshold, policy, cf_total)
    t2 = time.perf_counter()
    final = _remap(ctx, st, log, objective, direction, max_passes, occupancy_threshold, group_size)
    t3 = time.perf_counter()
    if final > cf_obj * (1 + REL_EPS):
        delta = diff(st, cf_state)
        st = cf_state
        log.add("revert", "all", final, cf_obj, True, "the optimised mapping is worse than compute-first: keep compute-first",
                delta, data={"phase": "remap", "metric": objective})
    return st, {f"compute_first_{objective}_s": cf_obj, "compute_first_runtime_s": t1 - t0,
                "locality_runtime_s": t2 - t1, "remap_runtime_s": t3 - t2}
