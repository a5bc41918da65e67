"""The memory plan and the residency rule shared by :func:`map_search`, :func:`map_ilp` and brute force.

On each device other than the host, the resident weights, the kept tensors it produces and the
copies of kept tensors it reads, all counted for the whole run, plus the largest working set among
the ops that may run there, stay within its memory (:func:`plan_budget`). This is conservative (a
kept tensor really lives only until its last reader), and the final mapping of every mapper is
still checked by :func:`hetsched.evaluate`.

A placement's residency (:func:`best_residency`): every weight and tensor whose keeping saves
transfer time under the evaluator's model (graph inputs and host-produced tensors included: a kept
copy serves every later reader on its device), best saving per byte first, while the plan allows.
With memory to spare every item is decided on its own, so this is the exact optimum of the total
latency for the placement.
"""

from __future__ import annotations

from typing import Any

from ..errors import HetschedError
from ._core import REL_EPS, Ctx, State

__all__ = ["plan_budget", "footprint", "best_residency"]


def plan_budget(ctx: Ctx, memory_fraction: float = 1.0) -> dict[str, float]:
    """Bytes each non-host device may hold for the whole run: its memory (times ``memory_fraction``)
    minus the largest working set (weights, inputs, outputs) of any op that may run on it."""
    out = {}
    for d in ctx.devices:
        if d == ctx.host:
            continue
        ws = [ctx.working_set(o) for o in ctx.order if d in ctx.candidates(o)]
        out[d] = ctx.capacity[d] * memory_fraction - max(ws, default=0.0)
    return out


def footprint(ctx: Ctx, t: str, device: dict[str, str]) -> list[str]:
    """Devices (other than the host) that hold ``t`` for the run when it is kept: its producer's, and
    every other device a consumer reads it on (a kept tensor's copy stays for later readers)."""
    host = ctx.host
    p = ctx.producer[t]
    dp = device[p] if p is not None else host
    out = [dp] if dp != host else []
    for c in ctx.consumers[t]:
        dc = device.get(c)
        if dc is not None and dc != host and dc not in out:
            out.append(dc)
    return out


class _Planner:
    """A full mapping (placement + residency) with per-term caches, the memory plan and undo records."""

    def __init__(self, ctx: Ctx, st: State, objective: str, budget: dict[str, float]) -> None:
        self.ctx, self.objective, self.budget = ctx, objective, budget
        self.dev = dict(st.device)
        self.w = set(st.w_res)
        self.t = set(st.t_res)
        self.touch = {o: list(dict.fromkeys(ctx.inputs[o] + ctx.outputs[o])) for o in ctx.order}
        self.used = {d: 0.0 for d in budget}
        for o in self.w:
            if self.dev[o] in self.used:
                self.used[self.dev[o]] += ctx.weight[o]
        for t in self.t:
            for d in footprint(ctx, t, self.dev):
                self.used[d] += ctx.size[t]
        self.opterm = {o: ctx.op_term(o, self.dev[o], o in self.w) for o in ctx.order}
        self.tterm = {t: ctx.tensor_term(t, self.dev, t in self.t) for t in ctx.size}
        self.total = sum(self.opterm.values()) + sum(self.tterm.values())
        self.n_evals = 0

    # ---------------------------------------------------------------- objective
    def state(self) -> State:
        return State(self.dev, self.w, self.t)

    def value(self) -> float:
        self.n_evals += 1
        if self.objective == "total_latency":
            return self.total
        return self.ctx.simulate(self.state())[0]

    def exact_total(self) -> float:
        self.total = sum(self.opterm.values()) + sum(self.tterm.values())
        return self.total

    # ---------------------------------------------------------------- moves
    def _addu(self, du: dict[str, float], d: str, b: float) -> None:
        self.used[d] += b
        du[d] = du.get(d, 0.0) + b

    def fits(self, d: str, b: float) -> bool:
        return self.used[d] + b <= self.budget[d] * (1 + 1e-12)

    def move(self, x: str, dst: str) -> tuple:
        """Move op ``x`` to ``dst`` and re-decide the residency of everything it touches; an undo record."""
        ctx, dev = self.ctx, self.dev
        host = ctx.host
        src = dev[x]
        ts = self.touch[x]
        du: dict[str, float] = {}
        old_w = x in self.w
        old_t = [(t, t in self.t, self.tterm[t]) for t in ts]
        old_op = self.opterm[x]
        old_sum = old_op + sum(v for _, _, v in old_t)
        if old_w:
            self.w.discard(x)
            self._addu(du, src, -ctx.weight[x])
        for t, was, _ in old_t:
            if was:
                self.t.discard(t)
                for d in footprint(ctx, t, dev):
                    self._addu(du, d, -ctx.size[t])
        dev[x] = dst
        new_sum = self._decide(x, dst, ts, du)
        self.total += new_sum - old_sum
        return x, src, old_w, old_t, old_op, du

    def _decide(self, x: str | None, dst: str | None, ts: list[str], du: dict[str, float]) -> float:
        """Keep what saves transfer time and fits the plan, best saving per byte first; the new terms' sum."""
        ctx, dev = self.ctx, self.dev
        cands = []
        if x is not None and ctx.weight[x] and dst != ctx.host and x not in self.w:
            gain = ctx.xfer(ctx.weight[x], ctx.host, dst)
            cands.append((gain / ctx.weight[x], 0, x, gain))
        newterm = {}
        for t in ts:
            nk = ctx.tensor_term(t, dev, False)
            newterm[t] = nk
            if t in self.t:  # only reached from redecide(): already kept
                newterm[t] = ctx.tensor_term(t, dev, True)
                continue
            if nk <= 0.0:  # nothing moves: nothing to save by keeping it
                continue
            k = ctx.tensor_term(t, dev, True)
            if k < nk * (1 - REL_EPS):
                cands.append(((nk - k) / max(ctx.size[t], 1.0), 1, t, nk - k))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        for _, kind, y, gain in cands:
            if kind == 0:
                if self.fits(dst, ctx.weight[y]):
                    self.w.add(y)
                    self._addu(du, dst, ctx.weight[y])
            else:
                foot = footprint(ctx, y, dev)
                s = ctx.size[y]
                if all(self.fits(d, s) for d in foot):
                    self.t.add(y)
                    for d in foot:
                        self._addu(du, d, s)
                    newterm[y] -= gain
        total = 0.0
        for t, v in newterm.items():
            self.tterm[t] = v
            total += v
        if x is not None:
            self.opterm[x] = ctx.op_term(x, dev[x], x in self.w)
            total += self.opterm[x]
        return total

    def undo(self, rec: tuple) -> None:
        x, src, old_w, old_t, old_op, du = rec
        cur = self.opterm[x] + sum(self.tterm[t] for t, _, _ in old_t)
        for d, b in du.items():
            self.used[d] -= b
        self.w.discard(x)
        if old_w:
            self.w.add(x)
        for t, was, term in old_t:
            if was:
                self.t.add(t)
            else:
                self.t.discard(t)
            self.tterm[t] = term
        self.dev[x] = src
        self.opterm[x] = old_op
        self.total += old_op + sum(v for _, _, v in old_t) - cur

    def delta_of(self, recs: list[tuple]) -> dict[str, Any]:
        """The step delta of applied moves, from their undo records (O(moved ops and their tensors))."""
        dev_, w0, t0 = {}, {}, {}
        for x, _src, old_w, old_t, _op, _du in recs:
            dev_[x] = self.dev[x]
            w0.setdefault(x, old_w)
            for t, was, _ in old_t:
                t0.setdefault(t, was)
        return {"device": dev_,
                "weights_add": sorted(x for x, was in w0.items() if not was and x in self.w),
                "weights_remove": sorted(x for x, was in w0.items() if was and x not in self.w),
                "tensors_add": sorted(t for t, was in t0.items() if not was and t in self.t),
                "tensors_remove": sorted(t for t, was in t0.items() if was and t not in self.t)}

    def redecide(self) -> None:
        """Offer every weight and tensor not kept to the memory plan again (after moves freed memory)."""
        ctx = self.ctx
        host = ctx.host
        du: dict[str, float] = {}
        before = sum(self.opterm.values()) + sum(self.tterm.values())
        for o in ctx.order:
            d = self.dev[o]
            if ctx.weight[o] and d != host and o not in self.w and self.fits(d, ctx.weight[o]):
                self.w.add(o)
                self._addu(du, d, ctx.weight[o])
                self.opterm[o] = ctx.op_term(o, d, True)
        self._decide(None, None, [t for t in ctx.size if t not in self.t], du)
        self.total = sum(self.opterm.values()) + sum(self.tterm.values())
        if self.total > before:  # pragma: no cover - keeping only lowers terms
            raise HetschedError("internal: residency re-decision raised the total latency")

    # ---------------------------------------------------------------- snapshots
    def snapshot(self) -> tuple:
        return (dict(self.dev), set(self.w), set(self.t), dict(self.used), dict(self.opterm), dict(self.tterm), self.total)

    def restore(self, snap: tuple) -> None:
        dev, w, t, used, opterm, tterm, total = snap
        self.dev, self.w, self.t = dict(dev), set(w), set(t)
        self.used, self.opterm, self.tterm, self.total = dict(used), dict(opterm), dict(tterm), total


def best_residency(ctx: Ctx, device: dict[str, str], budget: dict[str, float] | None = None) -> State:
    """The residency the search and the ILP's warm start use for a placement: every weight and tensor
    whose keeping saves transfer time, best saving per byte first, while the memory plan allows
    (exact for the total latency when memory does not bind)."""
    pl = _Planner(ctx, State(dict(device)), "total_latency", plan_budget(ctx) if budget is None else budget)
    pl.redecide()
    return State(pl.dev, pl.w, pl.t)
