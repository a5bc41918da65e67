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
from typing import Any, Callable, Mapping

import numpy as np

from ..cost import CostModel
from ..errors import CapacityError, HetschedError
from ..evaluate import Placement, evaluate
from ..graph import OpGraph
from ..results import StepLog
from ..system import System
from ._core import REL_EPS, Ctx, Occupancy, Snapshot, State, decide_tensor, decide_weights, tensor_candidates
from .result import MappingResult

__all__ = [
    "map_compute_first",
    "optimize_locality",
    "remap",
    "h2h",
    "LOCALITY_POLICIES",
    "OBJECTIVES",
    "cleared_price",
    "h2h_state",
    "finish",
]

EMPTY_STATE = {"device": {}, "weights_resident": frozenset(), "tensors_resident": frozenset()}
OBJECTIVES = ("total_latency", "makespan")


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


# ------------------------------------------------------------------------------------------ phase 2
def _knapsack(sizes: list[float], values: list[float], capacity: float, buckets: int = 2048) -> list[bool]:
    """0/1 knapsack by dynamic programming over a size grid (sizes rounded *up*: never overfills)."""
    n = len(sizes)
    if n == 0:
        return []
    if sum(sizes) <= capacity:
        return [True] * n
    if capacity <= 0:
        return [False] * n
    unit = capacity / buckets
    # an item larger than the whole budget never fits; dividing it by the unit of a tiny budget (an
    # occupancy threshold of 1e-300) overflowed to inf and int() raised (issue 20)
    w = [0 if s <= 0 else buckets + 1 if s > capacity else min(buckets, int(np.ceil(s / unit))) for s in sizes]
    best = np.zeros(buckets + 1)
    keep = np.zeros((n, buckets + 1), dtype=bool)
    for i in range(n):
        wi, vi = w[i], values[i]
        if wi > buckets:
            continue
        cand = np.full(buckets + 1, -np.inf)
        cand[wi:] = best[: buckets + 1 - wi] + vi
        better = cand > best
        keep[i] = better
        best = np.where(better, cand, best)
    take = [False] * n
    c = buckets
    for i in range(n - 1, -1, -1):
        if keep[i, c]:
            take[i] = True
            c -= w[i]
    return take


def _locality(ctx: Ctx, st: State, log: StepLog, threshold: float, policy: str | Callable, objective_before: float) -> float:
    """Global locality pass on ``st`` (in place). Returns the running total latency."""
    if not 0 < threshold <= 1:
        raise HetschedError(f"occupancy_threshold must be in (0, 1], got {threshold!r}", field="occupancy_threshold")
    occ = Occupancy(ctx, st)
    host = ctx.host
    total = objective_before
    # the candidates, in layer order: each op's weights (claim 15), then its output tensors (claim 16)
    items: list[tuple[str, str]] = []
    for o in ctx.order:
        if ctx.weight[o] and st.device[o] != host and o not in st.w_res:
            items.append(("w", o))
        for t in tensor_candidates(ctx, st, [t for t in ctx.outputs[o] if t not in st.t_res]):
            items.append(("t", t))
    chosen: dict[tuple[str, str], bool] | None = None
    if callable(policy):
        chosen = {it: bool(v) for it, v in zip(items, policy(ctx, st, items, threshold))}
    elif policy == "knapsack":
        # H2H's variant: per device, pack what saves the most transfer time into the budget
        chosen = {}
        by_dev: dict[str, list[tuple[str, str]]] = {}
        for it in items:
            d = st.device[it[1]] if it[0] == "w" else st.device[ctx.producer[it[1]]]
            by_dev.setdefault(d, []).append(it)
        for d, its in by_dev.items():
            sizes, vals = [], []
            for kind, x in its:
                if kind == "w":
                    sizes.append(ctx.weight[x])
                    vals.append(ctx.xfer(ctx.weight[x], host, d))
                else:
                    sizes.append(ctx.size[x])
                    vals.append(ctx.tensor_gain(x, st.device))
            budget = threshold * ctx.capacity[d] - occ.used[d]
            for it, take in zip(its, _knapsack(sizes, vals, budget)):
                chosen[it] = take
    elif policy != "greedy":
        raise HetschedError(f"unknown locality policy {policy!r}; use one of {sorted(LOCALITY_POLICIES)} or a callable",
                            field="policy")
    for kind, x in items:
        if kind == "w":
            ok, reason, info = decide_weights(ctx, st, occ, x, threshold)
            d = st.device[x]
            gain = ctx.xfer(ctx.weight[x], host, d)
            delta = {"weights_add": [x]}
            action = "keep_weights"
            size = ctx.weight[x]
        else:
            ok, reason, info, gain = decide_tensor(ctx, st, occ, x, threshold)
            d = st.device[ctx.producer[x]]
            delta = {"tensors_add": [x]}
            action = "keep_tensor"
            size = ctx.size[x]
        if chosen is not None and ok and not chosen[(kind, x)]:
            ok, reason = False, f"left out by the {policy if isinstance(policy, str) else 'custom'} policy (saves less per byte)"
        after = total - gain if ok else total
        if ok:
            (st.w_res if kind == "w" else st.t_res).add(x)
            occ.used[d] += size
        log.add(action, x, total, after, ok, reason, delta, data={"phase": "locality", "metric": "total_latency", **info})
        total = after
    return total


LOCALITY_POLICIES = {"greedy": "greedy", "knapsack": "knapsack"}


# ------------------------------------------------------------------------------------------ phase 3
class _Mover:
    """Tentative moves with local re-locality and an incremental objective.

    ``apply`` moves one op, re-runs locality around it and updates the running total latency from
    the terms the move touches (the op's own term and those of the tensors it reads and writes);
    ``value_after`` gives the objective of the current state (for ``makespan``: a simulation from the
    last checkpoint before the first op the moves can affect); ``commit`` makes it the new base.
    """

    def __init__(self, ctx: Ctx, st: State, objective: str, threshold: float, total: float | None = None) -> None:
        self.ctx, self.st, self.objective, self.threshold = ctx, st, objective, threshold
        self.occ = Occupancy(ctx, st)
        self.total = ctx.total_latency(st) if total is None else total
        self.tcache: dict[str, float] = {}  # each touched tensor's current term (valid: only moves change it)
        self.every = 0
        self.checkpoints: dict[int, Snapshot] = {}
        self.makespan = 0.0
        if objective == "makespan":
            n = len(ctx.order)
            self.every = max(8, int(n**0.5))
            # a device runs its ops one after the other, each after its own weight fetch: the sum of
            # those terms on any device bounds the makespan from below (prunes hopeless trials)
            self.load = {d: 0.0 for d in ctx.devices}
            for o in ctx.order:
                self.load[st.device[o]] += ctx.op_term(o, st.device[o], o in st.w_res)
            self.makespan, _ = ctx.simulate(st, checkpoints=self.checkpoints, every=self.every)
        # claim 6: the items that are not in device memory, per device, sorted by size, so that the
        # memory a kept move frees is offered to exactly those that can now fit
        self.out_idx = {t: j for o in ctx.order for j, t in enumerate(ctx.outputs[o])}
        self.waiting: dict[str, list[tuple]] = {d: [] for d in ctx.devices}
        self.listed: set[tuple] = set()
        for o in ctx.order:
            self.list_op(o, sort=False)
        for lst in self.waiting.values():
            lst.sort()

    def value(self) -> float:
        return self.total if self.objective == "total_latency" else self.makespan

    # ------------------------------------------------------------ claim 6: memory optimisation again
    def _list(self, kind: str, x: str, sort: bool = True) -> None:
        ctx, st = self.ctx, self.st
        if kind == "w":
            d = st.device[x]
            if d == ctx.host or not ctx.weight[x] or x in st.w_res:
                return
            key = (ctx.weight[x], ctx.pos[x], 0, 0, "w", x)
        else:
            p = ctx.producer[x]
            if p is None:
                return
            d = st.device[p]
            if d == ctx.host or x in st.t_res:
                return
            key = (ctx.size[x], ctx.pos[p], 1, self.out_idx[x], "t", x)
        if (key, d) in self.listed:
            return
        self.listed.add((key, d))
        if sort:
            insort(self.waiting[d], key)
        else:
            self.waiting[d].append(key)

    def list_op(self, op: str, sort: bool = True) -> None:
        """(Re-)list what a moved op left outside device memory: its weights and the tensors it touches."""
        self._list("w", op, sort)
        for t in self.ctx.inputs[op]:
            self._list("t", t, sort)
        for t in self.ctx.outputs[op]:
            self._list("t", t, sort)

    def relocality(self, dev: str, log: StepLog, moved: list[str]) -> None:
        """Claim 6: after a kept move, run the memory optimisation again on the new mapping.

        Only the source device's memory was freed (the destination only filled up, and on every
        other device occupancy and the transfer each item saves are unchanged: the moved ops' own
        weights and tensors were re-decided with the move), so the pass re-offers, in layer order,
        the items waiting on ``dev`` that fit under the threshold now. Items too large for the freed
        memory would be refused by the threshold rule and get no step. Under ``total_latency`` every
        kept item lowers the objective; under ``makespan`` an item is kept only if the makespan does
        not rise (re-timed from the item's layer on, claim 6), so this never makes things worse.
        """
        ctx, st, occ, thr = self.ctx, self.st, self.occ, self.threshold
        lst = self.waiting[dev]
        free = thr * ctx.capacity[dev] - occ.used[dev]
        k = bisect_right(lst, (free, float("inf")))
        if k == 0:
            return
        host = ctx.host
        done: set[tuple] = set()
        for key in sorted(lst[:k], key=lambda x: x[1:4]):
            kind, x = key[4], key[5]
            if kind == "w":
                stale = st.device[x] != dev or x in st.w_res
            else:
                stale = st.device[ctx.producer[x]] != dev or x in st.t_res
            if stale:
                done.add(key)
                continue
            before = self.value()
            if kind == "w":
                ok, reason, info = decide_weights(ctx, st, occ, x, thr)
                if not ok:
                    continue
                gain = ctx.xfer(ctx.weight[x], host, dev)
                size, first, delta, action = ctx.weight[x], ctx.pos[x], {"weights_add": [x]}, "keep_weights"
                st.w_res.add(x)
                if self.objective == "makespan":
                    self.load[dev] -= gain
            else:
                gain = ctx.tensor_gain(x, st.device)
                if gain <= 0:
                    continue
                ok, reason, info, gain = decide_tensor(ctx, st, occ, x, thr, gain=gain)
                if not ok:
                    continue
                size, first, delta, action = ctx.size[x], ctx.pos[ctx.producer[x]], {"tensors_add": [x]}, "keep_tensor"
                st.t_res.add(x)
                self.tcache[x] = ctx.tensor_term(x, st.device, True)
            occ.used[dev] += size
            self.total -= gain
            after = self.total
            if self.objective == "makespan":
                after = self.value_after(first)
                if self.pruned or after > before * (1 + REL_EPS):
                    (st.w_res if kind == "w" else st.t_res).discard(x)
                    occ.used[dev] -= size
                    self.total += gain
                    if kind == "w":
                        self.load[dev] += gain
                    else:
                        self.tcache[x] = ctx.tensor_term(x, st.device, False)
                    log.add(action, x, before, after, False,
                            f"claim 6: memory freed on {dev}, but keeping it would raise the makespan "
                            f"{before * 1e3:.4g} -> {after * 1e3:.4g} ms", delta,
                            data={"phase": "remap", "metric": "makespan", "relocality": True,
                                  "after_move": list(moved), "bound_only": self.pruned, **info})
                    continue
                self.commit(first, after)
            done.add(key)
            log.add(action, x, before, after, True,
                    f"claim 6: the remap of {', '.join(moved)} freed memory on {dev}; {reason}", delta,
                    data={"phase": "remap", "metric": self.objective, "relocality": True, "after_move": list(moved),
                          **info})
        if done:
            self.waiting[dev] = [key for key in lst if key not in done]
            self.listed.difference_update((key, dev) for key in done)

    def apply(self, op: str, dst: str) -> tuple[dict[str, Any], Callable[[], None], int]:
        ctx, st, occ = self.ctx, self.st, self.occ
        dev = st.device
        host = ctx.host
        src = dev[op]
        tensors = list(dict.fromkeys(ctx.inputs[op] + ctx.outputs[op]))
        old_w = op in st.w_res
        old_t = [t for t in tensors if t in st.t_res]
        tc = self.tcache
        old_terms = []
        old_op_term = ctx.op_term(op, src, old_w)
        before = old_op_term
        for t in tensors:
            v = tc.get(t)
            if v is None:
                v = ctx.tensor_term(t, dev, t in st.t_res)
            old_terms.append(v)
            before += v
        # take the op's data off the old device's plan
        if old_w:
            st.w_res.discard(op)
            occ.used[src] -= ctx.weight[op]
        for t in old_t:
            st.t_res.discard(t)
            occ.used[dev[ctx.producer[t]]] -= ctx.size[t]
        dev[op] = dst
        # re-run locality around the moved layer (claim 4: its results go to the new device's memory)
        new_w = False
        if ctx.weight[op] and dst != host:
            ok, _, _ = decide_weights(ctx, st, occ, op, self.threshold)
            if ok:
                st.w_res.add(op)
                occ.used[dst] += ctx.weight[op]
                new_w = True
        new_op_term = ctx.op_term(op, dst, new_w)
        after = new_op_term
        if self.objective == "makespan":
            self.load[src] -= old_op_term
            self.load[dst] += new_op_term
        new_t = []
        for t in tensors:
            nr = ctx.tensor_term(t, dev, False)
            p = ctx.producer[t]
            if p is not None and dev[p] != host:
                r = ctx.tensor_term(t, dev, True)
                if r < nr and decide_tensor(ctx, st, occ, t, self.threshold, gain=nr - r)[0]:
                    st.t_res.add(t)
                    occ.used[dev[p]] += ctx.size[t]
                    new_t.append(t)
                    after += r
                    tc[t] = r
                    continue
            after += nr
            tc[t] = nr
        old_total = self.total
        self.total = old_total - before + after
        changed = set(old_t) ^ set(new_t)
        first = min([ctx.pos[op]] + [ctx.pos[ctx.producer[t]] for t in changed if ctx.producer[t] is not None])
        delta = {
            "device": {op: dst},
            "weights_remove": [op] if old_w and not new_w else [],
            "weights_add": [op] if new_w and not old_w else [],
            "tensors_remove": [t for t in old_t if t not in new_t],
            "tensors_add": [t for t in new_t if t not in old_t],
        }

        def undo() -> None:
            for t in new_t:
                st.t_res.discard(t)
                occ.used[dev[ctx.producer[t]]] -= ctx.size[t]
            if new_w:
                st.w_res.discard(op)
                occ.used[dst] -= ctx.weight[op]
            dev[op] = src
            if old_w:
                st.w_res.add(op)
                occ.used[src] += ctx.weight[op]
            for t in old_t:
                st.t_res.add(t)
                occ.used[dev[ctx.producer[t]]] += ctx.size[t]
            for t, v in zip(tensors, old_terms):
                tc[t] = v
            self.total = old_total
            if self.objective == "makespan":
                self.load[src] += old_op_term
                self.load[dst] -= new_op_term

        return delta, undo, first

    def value_after(self, first: int) -> float:
        """The objective after the applied moves (``self.pruned``: only a lower bound was needed)."""
        self.pruned = False
        if self.objective == "total_latency":
            return self.total
        bound = max(self.load.values())
        self.pruned = bound >= self.makespan
        if self.pruned:
            return bound  # a lower bound that cannot beat the current makespan: no need to simulate
        k = (first // self.every) * self.every
        snap = self.checkpoints.get(k)
        return self.ctx.simulate(self.st, start=k if snap is not None else 0, snap=snap)[0]

    def commit(self, first: int, after: float) -> None:
        if self.objective == "makespan":
            self.makespan = after
            k = (first // self.every) * self.every
            for j in [j for j in self.checkpoints if j > k]:
                del self.checkpoints[j]
            snap = self.checkpoints.get(k)
            self.ctx.simulate(self.st, start=k if snap is not None else 0, snap=snap, checkpoints=self.checkpoints,
                              every=self.every)


def _merge(deltas: list[dict[str, Any]]) -> dict[str, Any]:
    """One delta equivalent to applying ``deltas`` in order."""
    out_dev: dict[str, str] = {}
    sets = {"weights": (set(), set()), "tensors": (set(), set())}  # (net adds, net removes)
    for d in deltas:
        out_dev.update(d["device"])
        for kind in ("weights", "tensors"):
            add, rem = sets[kind]
            for x in d[f"{kind}_remove"]:
                if x in add:
                    add.discard(x)
                else:
                    rem.add(x)
            for x in d[f"{kind}_add"]:
                if x in rem:
                    rem.discard(x)
                else:
                    add.add(x)
    return {"device": out_dev, "weights_remove": sorted(sets["weights"][1]), "weights_add": sorted(sets["weights"][0]),
            "tensors_remove": sorted(sets["tensors"][1]), "tensors_add": sorted(sets["tensors"][0])}


def _remap(ctx: Ctx, st: State, log: StepLog, objective: str, direction: str, max_passes: int | None,
           threshold: float, group_size: int = 1, total: float | None = None) -> float:
    if objective not in OBJECTIVES:
        raise HetschedError(f"unknown objective {objective!r}; use one of {list(OBJECTIVES)}", field="objective")
    if direction not in ("successor", "both"):
        raise HetschedError(f"unknown direction {direction!r}; use 'successor' or 'both'", field="direction")
    if max_passes is not None and max_passes < 1:
        raise HetschedError(f"max_passes must be >= 1 or None, got {max_passes!r}", field="max_passes")
    if group_size < 1:
        raise HetschedError(f"group_size must be >= 1, got {group_size!r}", field="group_size")
    mv = _Mover(ctx, st, objective, threshold, total)
    supports = ctx.system.support.supports
    ops = ctx.ops
    host = ctx.host
    name = objective.replace("_", " ")

    def movable(x: str, dst: str) -> str | None:
        if not supports(dst, ops[x].op_type):
            return f"{dst} does not support {ops[x].op_type}"
        if dst != host and ctx.working_set(x) > ctx.capacity[dst]:
            return f"does not fit in the memory of {dst}"
        return None

    def trial(group: list[str], dst: str) -> tuple[bool, float, float, dict[str, Any]]:
        before = mv.value()
        deltas, undos, firsts = [], [], []
        for x in group:
            d_, u_, f_ = mv.apply(x, dst)
            deltas.append(d_)
            undos.append(u_)
            firsts.append(f_)
        first = min(firsts)
        after = mv.value_after(first)
        delta = deltas[0] if len(deltas) == 1 else _merge(deltas)
        if after < before * (1 - REL_EPS):
            mv.commit(first, after)
            return True, before, after, delta
        for u_ in reversed(undos):
            u_()
        return False, before, after, delta

    def fail_reason(before: float, after: float, k: int = 1) -> str:
        if mv.pruned:
            return (f"not better: one device alone would be busy {after * 1e3:.4g} ms >= the makespan "
                    f"{before * 1e3:.4g} ms (lower bound, not simulated)")
        return f"not better{f' with {k} layers' if k > 1 else ''}: {name} {before * 1e3:.4g} -> {after * 1e3:.4g} ms"

    def kept(src: str, group: list[str]) -> None:
        for x in group:
            mv.list_op(x)
        mv.relocality(src, log, group)  # claim 6

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
                why_not = movable(o, dst)
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
                                if st.device[p_] == d and p_ not in group and movable(p_, dst) is None), None)
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
def finish(ctx: Ctx, st: State, log: StepLog, *, phase: str, params: Mapping[str, Any], initial_state: Mapping[str, Any],
           order=None, check_memory: bool = True, extra_metrics: Mapping[str, float] | None = None) -> MappingResult:
    """Evaluate a state with :func:`hetsched.evaluate` and wrap it; repair memory overflow first.

    The locality plan is conservative, but the evaluator's true peak also counts staged inputs; if a
    device still overflows, kept tensors then resident weights on it are evicted (largest first),
    one logged step each, until it fits. A device that overflows with nothing resident raises
    :class:`~hetsched.errors.CapacityError` naming it.
    """
    t0 = time.perf_counter()
    while True:
        pl = Placement(st.device, st.w_res, st.t_res)
        try:
            ev = evaluate(ctx.graph, ctx.system, pl, cost=ctx.cost, order=order, contention=ctx.contention,
                          check_memory=check_memory)
            break
        except CapacityError as err:
            d = err.device
            kept = sorted((t for t in st.t_res if st.device[ctx.producer[t]] == d), key=lambda t: (-ctx.size[t], t))
            wts = sorted((o for o in st.w_res if st.device[o] == d), key=lambda o: (-ctx.weight[o], o))
            if kept:
                x, kind = kept[0], "tensor"
                st.t_res.discard(x)
                delta = {"tensors_remove": [x]}
            elif wts:
                x, kind = wts[0], "weights"
                st.w_res.discard(x)
                delta = {"weights_remove": [x]}
            else:
                raise
            log.add("evict", x, None, None, True, f"device {d} overflows its memory at its peak: {kind} {x!r} goes back to host",
                    delta, data={"phase": "memory_repair", "device": d})
    metrics = dict(ev.metrics)
    metrics.update(extra_metrics or {})
    metrics["evaluate_s"] = time.perf_counter() - t0
    return MappingResult(
        placement=ev.placement, graph=ctx.graph, system=ctx.system, cost=ctx.cost, order=order, phase=phase,
        metrics=metrics, timeline=ev.timeline, steps=log, params=dict(params), initial_state=initial_state,
    )


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
    _locality(ctx, st, log, occupancy_threshold, policy, ctx.total_latency(st))
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
    if objective not in OBJECTIVES:
        raise HetschedError(f"unknown objective {objective!r}; use one of {list(OBJECTIVES)}", field="objective")
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
    # the running totals are exact sums of the terms each decision changes (no re-timing needed)
    total = _locality(ctx, st, log, occupancy_threshold, policy, cf_total)
    t2 = time.perf_counter()
    final = _remap(ctx, st, log, objective, direction, max_passes, occupancy_threshold, group_size, total)
    t3 = time.perf_counter()
    if final > cf_obj * (1 + REL_EPS):
        changed = {o: d for o, d in cf_state.device.items() if st.device[o] != d}
        delta = {"device": changed, "weights_remove": sorted(st.w_res), "tensors_remove": sorted(st.t_res)}
        st = cf_state
        log.add("revert", "all", final, cf_obj, True, "the optimised mapping is worse than compute-first: keep compute-first",
                delta, data={"phase": "remap", "metric": objective})
    return st, {f"compute_first_{objective}_s": cf_obj, "compute_first_runtime_s": t1 - t0,
                "locality_runtime_s": t2 - t1, "remap_runtime_s": t3 - t2}
