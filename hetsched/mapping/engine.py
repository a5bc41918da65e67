"""The mapping engine every mapper runs on: the evaluator's clock, one memory plan, one move/undo.

Why this exists: the H2H remap phase and the search try thousands of moves; re-running the full
evaluator (which builds a pandas timeline) for each would be quadratic. :class:`Ctx` is the
evaluator's own model (:class:`hetsched.clock.Clock`, the clock :func:`hetsched.evaluate` runs)
used in cheap ways, with no model of its own:

* **additive terms** for ``total_latency_s`` (the patent's "system total latency", claim 5: the sum
  over devices of the time each spends computing and moving its own data). Every transfer's *route
  and duration* is fixed by the placement and the residency flags alone (never by timing), so the
  total is a sum of one term per op (:meth:`Ctx.op_term`: compute + weight fetch) and one per
  tensor (:meth:`Ctx.tensor_term`: write-back + the reads of its consumers). Moving an op changes
  only its own term and those of the tensors it reads and writes: an O(degree) re-timer.
* **the clock without rows** (:meth:`Ctx.simulate`) for the ``makespan`` objective, re-timing only
  the suffix of the op order from the first op a move can affect (the patent's claim 6: "update the
  schedule times of the specific layer and the layers after it"), from a checkpoint of its state.

On top of it, the parts every mapper shares, each in one place:

* :meth:`Ctx.servable` / :meth:`Ctx.refusal`: may this op run on this device (supported, and its
  working set fits the device's memory);
* :class:`MemoryPlan`: the bytes each device holds for the whole run, the clock's way: a resident
  weight on its op's device (a weight several resident ops on one device read, tied weights,
  once: :class:`hetsched.weights.TiedWeights`), a kept tensor on *every* device that keeps a copy
  of it (its producer's and each device a consumer reads it on, :meth:`Ctx.footprint`);
* :class:`Mover`: a full mapping with its memory plan and terms: :meth:`Mover.move` moves one op and
  re-decides the residency of what it touches, :meth:`Mover.undo` takes a move back,
  :meth:`Mover.value` prices the objective incrementally, :meth:`Mover.delta` is the step delta;
* :func:`diff`: the one step-delta builder (the net change between two states);
* :func:`keep_on_chip`: the occupancy-threshold residency pass (the patent's memory-aware
  communication optimisation, claims 12-17), which list schedulers and baselines reuse;
* :func:`best_residency`: every weight and tensor whose keeping saves time, best saving per byte
  first, while the plan allows (exact for the total latency when memory does not bind).

Every duration comes from the bound :class:`~hetsched.cost.CostModel` (``compute_s`` and per-hop
``transfer_s``) through the clock's caches.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> ctx = Ctx(chain(3, seed=0), toy_system())
>>> st = State({o: "gpu0" for o in ctx.order})
>>> mv = Mover(ctx, st, "total_latency", plan_budget(ctx))
>>> rec = mv.move("op1", "cpu0")
>>> mv.delta([rec])["device"], mv.value() == ctx.total_latency(mv.st)
({'op1': 'cpu0'}, True)
>>> mv.undo(rec); mv.st.device["op1"]
'gpu0'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

import numpy as np

from ..clock import Clock, Snapshot
from ..cost import CostModel
from ..errors import CapacityError, HetschedError
from ..graph import OpGraph
from ..results import StepLog
from ..system import System

__all__ = ["Ctx", "State", "Snapshot", "MemoryPlan", "Mover", "diff", "keep_on_chip", "best_residency", "plan_budget",
           "require_objective", "saves", "occupancy_limit", "LOCALITY_POLICIES", "OBJECTIVES", "EMPTY_STATE", "REL_EPS"]

# a move is "better" only when it wins by more than float noise
REL_EPS = 1e-9
#: what a mapper may minimise, as :func:`hetsched.evaluate` reports it
OBJECTIVES = ("total_latency", "makespan")
#: the state before any op is mapped (every mapper's ``initial_state`` but the later phases')
EMPTY_STATE = {"device": {}, "weights_resident": frozenset(), "tensors_resident": frozenset()}


def require_objective(objective: str) -> None:
    """A named error for an objective that is not one of :data:`OBJECTIVES`."""
    if objective not in OBJECTIVES:
        raise HetschedError(f"unknown objective {objective!r}; use one of {list(OBJECTIVES)}", field="objective")


def saves(unkept: float, kept: float) -> bool:
    """Whether keeping an item saves time: its kept term is lower by more than float noise."""
    return kept < unkept * (1 - REL_EPS)


class Ctx(Clock):
    """Everything a mapper needs about one (graph, system, cost) triple, precomputed once.

    The clock's prices (:meth:`comp`, :meth:`hops`, :meth:`xfer`) plus the graph as plain dicts
    (``inputs``, ``outputs``, ``touch``, ``succ``, ``pred``, ``pos``...) and the devices' capacities.
    """

    def __init__(self, graph: OpGraph, system: System, cost: CostModel | None = None, *, contention: bool = True,
                 order: Sequence[str] | None = None) -> None:
        graph.validate()  # a negative size or flops would otherwise price into a silent wrong answer
        super().__init__(graph, system, cost, order=order, contention=contention)
        self.pos = {o: i for i, o in enumerate(self.order)}
        self.inputs = {o: list(self._inputs.get(o, ())) for o in self.order}
        self.outputs = {o: list(self._outputs.get(o, ())) for o in self.order}
        #: the tensors an op reads or writes (a move changes their terms), inputs first
        self.touch = {o: list(dict.fromkeys(self.inputs[o] + self.outputs[o])) for o in self.order}
        nxg = graph.nx
        self.succ = {o: sorted(nxg.successors(o), key=self.pos.__getitem__) for o in self.order}
        self.pred = {o: sorted(nxg.predecessors(o), key=self.pos.__getitem__) for o in self.order}
        self.devices = system.devices
        self.capacity = {d: float(dev.memory_bytes) for d, dev in self.devices.items()}
        n = len(self.order)
        # the first op whose timing a change of a tensor's residency can change: its producer, or
        # for a graph input its first reader (a kept copy serves the readers after it)
        self.born = {t: self.pos[p] if p in self.pos else min((self.pos[c] for c in self.consumers[t] if c in self.pos),
                                                              default=n) for t, p in self.producer.items()}
        self._cand: dict[str, list[str]] = {}
        self._servable: dict[str, list[str]] = {}
        self._can: dict[str, frozenset[str]] = {}
        self._ws: dict[str, float] = {}

    # ---------------------------------------------------------------- where an op may run
    def candidates(self, op: str) -> list[str]:
        """The devices the support table lets run ``op``, in its priority order."""
        t = self.ops[op].op_type
        c = self._cand.get(t)
        if c is None:
            c = self._cand[t] = self.system.candidates(t)
        return c

    def require_support(self) -> None:
        """Raise ``UnsupportedOpError`` naming every op (and its op_type) no device runs."""
        ops = [(o, self.ops[o].op_type) for o in self.order]
        if not all(self.candidates(o) for o, _ in ops):
            self.system.require_support(ops)

    def working_set(self, op: str) -> float:
        """Bytes an op needs on its device while it runs (weights, inputs, outputs)."""
        v = self._ws.get(op)
        if v is None:
            v = self._ws[op] = (self.weight[op] + sum(self.size[t] for t in self.inputs[op])
                                + sum(self.size[t] for t in self.outputs[op]))
        return v

    def refusal(self, op: str, dev: str) -> str | None:
        """Why ``op`` may not run on ``dev`` (unsupported, or its working set does not fit), or ``None``.

        The one servability check: :meth:`servable`, the remap, the search and the ILP all ask it.
        """
        if dev not in self.candidates(op):
            return f"{dev} does not support {self.ops[op].op_type}"
        if dev != self.host and self.working_set(op) > self.capacity[dev]:
            return f"does not fit in the memory of {dev}"
        return None

    def servable(self, op: str) -> list[str]:
        """The candidates of ``op`` whose memory holds its working set, in the support table's order;
        none -> :class:`~hetsched.errors.CapacityError` naming the largest.

        What a mapper may place the op on: a placement outside it cannot be evaluated.
        """
        c = self._servable.get(op)
        if c is None:
            cands = self.candidates(op)
            c = self._servable[op] = [d for d in cands if self.refusal(op, d) is None]
            if cands and not c:
                big = max(cands, key=lambda d: self.capacity[d])
                need = self.working_set(op)
                raise CapacityError(
                    f"op {op!r} needs {need:.4g} bytes (weights {self.weight[op]:.4g} + activations) on-chip, more"
                    f" than device {big!r} (the largest that runs it) holds ({self.capacity[big]:.4g} bytes)",
                    op=op, device=big, need_bytes=need, capacity_bytes=self.capacity[big])
        return c

    def can(self, op: str, dev: str) -> bool:
        """``dev in servable(op)``, as a set lookup."""
        s = self._can.get(op)
        if s is None:
            s = self._can[op] = frozenset(self.servable(op))
        return dev in s

    # ---------------------------------------------------------------- the memory plan's footprint
    def footprint(self, t: str, device: Mapping[str, str]) -> list[str]:
        """Devices (other than the host) that hold ``t`` for the run when it is kept: its producer's,
        and every other device a consumer reads it on (a kept tensor's copy stays for later readers,
        as the clock keeps it)."""
        host = self.host
        p = self.producer[t]
        dp = device.get(p, host) if p is not None else host
        out = [dp] if dp != host else []
        for c in self.consumers[t]:
            dc = device.get(c)
            if dc is not None and dc != host and dc not in out:
                out.append(dc)
        return out

    # ---------------------------------------------------------------- additive total latency
    #: ``op_term(op, dev, w_res, device, resident)``: compute plus weight fetch (the clock's
    #: :meth:`~Clock.op_busy_s`; with the placement and the resident ops, tied weights held on ``dev``
    #: by another reader are not fetched)
    op_term = Clock.op_busy_s
    #: ``tensor_term(t, device, resident)``: write-back plus reads (the clock's :meth:`~Clock.tensor_busy_s`)
    tensor_term = Clock.tensor_busy_s

    def total_latency(self, state: "State") -> float:
        dev = state.device
        s = 0.0
        w_res = state.w_res
        for o in self.order:
            s += self.op_term(o, dev[o], o in w_res, dev, w_res)
        for t in self.size:
            s += self.tensor_term(t, dev, t in state.t_res)
        return s

    def weight_bytes_added(self, op: str, device: Mapping[str, str], w_res: Iterable[str]) -> float:
        """Bytes ``op``'s weights add to its device's memory plan when kept there (``op`` not in ``w_res``):
        its weights less the tied weights another resident reader on that device already holds."""
        return float(self.tied.marginal(op, device[op], device, w_res)) if op in self.tied.related else self.weight[op]

    def weight_gain(self, op: str, device: Mapping[str, str], w_res: Collection[str]) -> float:
        """Total latency saved by keeping ``op``'s weights on its device: its own fetch and, for tied
        weights, what the other readers on that device stop fetching."""
        d = device[op]
        if op not in self.tied.related:
            return self.xfer(self.weight[op], self.host, d) if self.weight[op] and d != self.host else 0.0
        after = set(w_res) | {op}
        gain = self.op_term(op, d, False, device, w_res) - self.op_term(op, d, True, device, after)
        for y in self.tied.related[op]:
            if y in device and y not in w_res:
                gain += (self.op_term(y, device[y], False, device, w_res)
                         - self.op_term(y, device[y], False, device, after))
        return gain

    def tensor_gain(self, t: str, device: Mapping[str, str]) -> float:
        """Total latency saved by keeping ``t`` (> 0: worth it)."""
        return self.tensor_term(t, device, False) - self.tensor_term(t, device, True)

    def score(self, state: "State", objective: str) -> float:
        """``objective`` of a full state: the additive total, or the clock's makespan."""
        return self.total_latency(state) if objective == "total_latency" else self.simulate(state)[0]

    # ---------------------------------------------------------------- the clock without rows
    def simulate(self, state: "State", *, start: int = 0, snap: Snapshot | None = None,
                 checkpoints: dict[int, Snapshot] | None = None, every: int = 0) -> tuple[float, dict[str, float]]:
        """The evaluator's clock without its rows: ``(makespan_s, op_end_s)``.

        ``start``/``snap`` resume from a checkpoint taken before op ``order[start]``; with
        ``checkpoints`` and ``every`` the run stores one snapshot every ``every`` ops.
        """
        return self.run(state.device, state.w_res, state.t_res, start=start, snap=snap, checkpoints=checkpoints,
                        every=every)


@dataclass
class State:
    """A (possibly partial) mapping: op -> device, and what is resident in device memory."""

    device: dict[str, str] = field(default_factory=dict)
    w_res: set[str] = field(default_factory=set)
    t_res: set[str] = field(default_factory=set)

    def copy(self) -> "State":
        return State(dict(self.device), set(self.w_res), set(self.t_res))

    def as_dict(self) -> dict[str, Any]:
        return {"device": dict(self.device), "weights_resident": frozenset(self.w_res),
                "tensors_resident": frozenset(self.t_res)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "State":
        return cls(dict(d.get("device", {})), set(d.get("weights_resident", ())), set(d.get("tensors_resident", ())))

    def apply(self, delta: Mapping[str, Any]) -> None:
        """Apply a step's ``delta`` (``device``, ``weights_add/remove``, ``tensors_add/remove``)."""
        self.device.update(delta.get("device", {}))
        self.w_res.difference_update(delta.get("weights_remove", ()))
        self.w_res.update(delta.get("weights_add", ()))
        self.t_res.difference_update(delta.get("tensors_remove", ()))
        self.t_res.update(delta.get("tensors_add", ()))


def diff(a: State, b: State, ops: Iterable[str] | None = None, tensors: Iterable[str] | None = None) -> dict[str, Any]:
    """The step delta that turns state ``a`` into ``b`` (the one delta builder of every mapper).

    ``ops``/``tensors`` limit the comparison to what may have changed (O(moved) instead of O(graph)).

    >>> diff(State({"a": "x"}, {"a"}), State({"a": "y"}, set(), {"t"}))
    {'device': {'a': 'y'}, 'weights_add': [], 'weights_remove': ['a'], 'tensors_add': ['t'], 'tensors_remove': []}
    """
    if ops is None:
        ops = list(b.device) + [o for o in a.device if o not in b.device]
        wa, wb = a.w_res, b.w_res
    else:
        ops = list(ops)
        wa, wb = {o for o in ops if o in a.w_res}, {o for o in ops if o in b.w_res}
    if tensors is None:
        ta, tb = a.t_res, b.t_res
    else:
        tensors = list(tensors)
        ta, tb = {t for t in tensors if t in a.t_res}, {t for t in tensors if t in b.t_res}
    return {"device": {o: b.device[o] for o in ops if o in b.device and a.device.get(o) != b.device[o]},
            "weights_add": sorted(wb - wa), "weights_remove": sorted(wa - wb),
            "tensors_add": sorted(tb - ta), "tensors_remove": sorted(ta - tb)}


def plan_budget(ctx: Ctx, memory_fraction: float = 1.0) -> dict[str, float]:
    """Bytes each non-host device may hold for the whole run: its memory (times ``memory_fraction``)
    minus the largest working set (weights, inputs, outputs) of any op that may run on it.

    The budget of :func:`map_search`, :func:`map_ilp` and brute force: what it leaves room for
    is conservative (a kept tensor really lives only until its last reader); the final mapping of
    every mapper is still checked by :func:`hetsched.evaluate`.
    """
    out = {}
    for d in ctx.devices:
        if d == ctx.host:
            continue
        ws = [ctx.working_set(o) for o in ctx.order if d in ctx.candidates(o)]
        out[d] = ctx.capacity[d] * memory_fraction - max(ws, default=0.0)
    return out


class MemoryPlan:
    """Bytes each device holds for the whole run, and the limit per device they must stay within.

    The clock's residency, counted for the whole run: a resident weight on its op's device, a kept
    tensor on every non-host device that keeps a copy (:meth:`Ctx.footprint`). The host is never
    limited. ``limit``: bytes per device (the occupancy threshold times the memory for the patent's
    rule, :func:`plan_budget` for the search and the ILP).
    """

    def __init__(self, ctx: Ctx, state: State, limit: Mapping[str, float]) -> None:
        self.ctx, self.state, self.limit = ctx, state, limit
        self.used: dict[str, float] = {d: 0.0 for d in ctx.devices}
        by_dev: dict[str, list[str]] = {}
        for o in state.w_res:
            by_dev.setdefault(state.device[o], []).append(o)
        for d, os_ in by_dev.items():  # tied weights once per device
            self.used[d] += float(ctx.tied.held_bytes(os_)) if ctx.tied else sum(ctx.weight[o] for o in os_)
        for t in state.t_res:
            for d in ctx.footprint(t, state.device):
                self.used[d] += ctx.size[t]

    def fits(self, d: str, nbytes: float) -> bool:
        return d == self.ctx.host or self.used[d] + nbytes <= self.limit.get(d, 0.0) * (1 + 1e-12)

    def within(self) -> bool:
        """Whether every limited device stays within its limit."""
        return all(self.used[d] <= max(lim, 0.0) * (1 + 1e-9) + 1e-6 for d, lim in self.limit.items() if d != self.ctx.host)

    def frac(self, d: str, extra: float = 0.0) -> float:
        """The device's occupancy (share of its memory) with ``extra`` bytes more."""
        cap = self.ctx.capacity[d]
        return (self.used[d] + extra) / cap if cap else float("inf")

    def check(self, devs: Sequence[str], nbytes: float) -> tuple[bool, dict[str, Any]]:
        """Whether ``nbytes`` more fit on every device of ``devs`` (an item's footprint), and what a
        step shows of it: the device that refuses it (else the first), its occupancy before and after."""
        bad = [d for d in devs if not self.fits(d, nbytes)]
        d = bad[0] if bad else devs[0]
        return not bad, {"device": d, "bytes": nbytes, "occupancy_before": self.frac(d),
                         "occupancy_after": self.frac(d, nbytes)}

    def why(self, ok: bool, kind: str, x: str, info: Mapping[str, Any], threshold: float) -> str:
        """The reason of the occupancy rule's decision on one weight (``kind="w"``) or tensor."""
        d, after = info["device"], info["occupancy_after"]
        if not ok:
            return (f"occupancy of {d} would reach {after:.0%} > {threshold:.0%}: "
                    + ("weights stay in host memory" if kind == "w" else "tensor goes back to host"))
        if kind == "w":
            return f"occupancy of {d} stays at {after:.0%} <= {threshold:.0%}: weights kept on-chip"
        ctx = self.ctx
        if not ctx.is_output[x] and any(self.state.device.get(c) == d for c in ctx.consumers[x]):
            return "a consumer runs on the same device and reads it in place (patent claim 16)"
        return "a direct copy to the consumer's device beats the round trip through host memory"


def occupancy_limit(ctx: Ctx, threshold: float) -> dict[str, float]:
    """The patent's limit (claims 13-14): ``threshold`` of each device's memory."""
    if not 0 < threshold <= 1:
        raise HetschedError(f"occupancy_threshold must be in (0, 1], got {threshold!r}", field="occupancy_threshold")
    return {d: threshold * c for d, c in ctx.capacity.items()}


class Mover:
    """A full mapping (placement + residency) with its memory plan, per-term caches and undo records.

    :meth:`move` moves one op and re-decides the residency of everything it touches (its weights and
    the tensors it reads and writes) under one rule (``keep``):

    * ``"per_byte"`` (the search, the ILP's warm start, brute force): every weight and tensor whose
      keeping saves transfer time (graph inputs and host-produced tensors included: a kept copy
      serves every later reader on a device), best saving per byte first, while the plan allows;
    * ``"patent"`` (the remap, claim 4): the moved layer's weights, then the intermediate results it
      reads and writes (tensors produced on a device), in layer order, while the plan allows.

    The objective is kept incrementally: the total latency from the terms a move touches; the
    makespan re-timed from the last checkpoint before the first op the moves since the last
    :meth:`commit` can affect (with ``value(bound=True)``, a lower bound, the busiest device's
    compute plus weight fetches, may rule a trial out without simulating it: ``pruned``).
    """

    def __init__(self, ctx: Ctx, st: State, objective: str, limit: Mapping[str, float], *, keep: str = "per_byte") -> None:
        self.ctx, self.st, self.objective, self.keep = ctx, st, objective, keep
        self.plan = MemoryPlan(ctx, st, limit)
        dev = st.device
        self.opterm = {o: ctx.op_term(o, dev[o], o in st.w_res, dev, st.w_res) for o in ctx.order}
        self.tterm = {t: ctx.tensor_term(t, dev, t in st.t_res) for t in ctx.size}
        self.total = sum(self.opterm.values()) + sum(self.tterm.values())
        self.n_evals = 0
        self.first: int | None = None  # the first position the moves since the last commit affect
        self.pruned = False
        self.makespan = 0.0
        self.checkpoints: dict[int, Snapshot] = {}
        if objective == "makespan":
            self.every = max(8, int(len(ctx.order) ** 0.5))
            # a device runs its ops one after the other, each after its own weight fetch: the sum of
            # those terms on any device bounds the makespan from below (prunes hopeless trials)
            self.load = {d: 0.0 for d in ctx.devices}
            for o, v in self.opterm.items():
                self.load[dev[o]] += v
            self._retime(0)

    # ---------------------------------------------------------------- objective
    def value(self, *, bound: bool = False) -> float:
        """The objective of the current state (``bound``: a lower bound may answer, see ``pruned``)."""
        self.n_evals += 1
        self.pruned = False
        if self.objective == "total_latency":
            return self.total
        if self.first is None:
            return self.makespan
        if bound:
            b = max(self.load.values())
            if b >= self.makespan:
                self.pruned = True  # a lower bound that cannot beat the committed makespan
                return b
        k = (self.first // self.every) * self.every
        snap = self.checkpoints.get(k)
        return self.ctx.simulate(self.st, start=k if snap is not None else 0, snap=snap)[0]

    def _retime(self, k: int) -> None:
        """Re-time from the checkpoint before op ``k``, storing new checkpoints from there on."""
        for j in [j for j in self.checkpoints if j > k]:
            del self.checkpoints[j]
        snap = self.checkpoints.get(k)
        self.makespan = self.ctx.simulate(self.st, start=k if snap is not None else 0, snap=snap,
                                          checkpoints=self.checkpoints, every=self.every)[0]

    def commit(self) -> None:
        """Make the current state the base the next trials are priced against."""
        if self.objective == "makespan" and self.first is not None:
            self._retime((self.first // self.every) * self.every)
        self.first = None

    def _touched(self, first: int) -> int | None:
        prev = self.first
        self.first = first if prev is None or first < prev else prev
        return prev

    # ---------------------------------------------------------------- moves
    def _use(self, du: dict[str, float], d: str, b: float) -> None:
        self.plan.used[d] += b
        du[d] = du.get(d, 0.0) + b

    def _set_op(self, x: str, v: float) -> None:
        if self.objective == "makespan":
            self.load[self.st.device[x]] += v - self.opterm[x]
        self.opterm[x] = v

    def move(self, x: str, dst: str) -> tuple:
        """Move op ``x`` to ``dst`` and re-decide the residency of everything it touches; an undo record."""
        ctx, st = self.ctx, self.st
        dev = st.device
        src = dev[x]
        ts = ctx.touch[x]
        du: dict[str, float] = {}
        old_w = x in st.w_res
        old_t = [(t, t in st.t_res, self.tterm[t]) for t in ts]
        old_op = self.opterm[x]
        if old_w:
            st.w_res.discard(x)
            self._use(du, src, -ctx.weight_bytes_added(x, dev, st.w_res))
        for t, was, _ in old_t:
            if was:
                st.t_res.discard(t)
                for d in ctx.footprint(t, dev):
                    self._use(du, d, -ctx.size[t])
        if self.objective == "makespan":
            self.load[src] -= old_op
            self.load[dst] += old_op
        dev[x] = dst
        new_sum = self._decide(x, ts, du)
        self.total += new_sum - (old_op + sum(v for _, _, v in old_t))
        first = ctx.pos[x]
        for t, was, _ in old_t:
            if was != (t in st.t_res) and ctx.born[t] < first:
                first = ctx.born[t]
        old_g, first = self._retie(x, first)
        return x, src, old_w, old_t, old_op, du, self._touched(first), old_g

    def _retie(self, x: str, first: int) -> tuple[list[tuple[str, float]], int]:
        """Re-price the ops tied to ``x``'s weights (what they fetch depends on where ``x`` and its
        weights are): their old terms, for :meth:`undo`, and the first position whose timing changed."""
        grp = self.ctx.tied.related.get(x)
        if not grp:
            return [], first
        ctx, st = self.ctx, self.st
        dev = st.device
        old = []
        for y in grp:
            if y not in dev:
                continue
            v = ctx.op_term(y, dev[y], y in st.w_res, dev, st.w_res)
            if v != self.opterm[y]:
                old.append((y, self.opterm[y]))
                self.total += v - self.opterm[y]
                self._set_op(y, v)
                if ctx.pos[y] < first:
                    first = ctx.pos[y]
        return old, first

    def _decide(self, x: str | None, ts: Iterable[str], du: dict[str, float]) -> float:
        """Keep what saves transfer time and fits the plan (see the class); the new terms' sum."""
        ctx, st, plan = self.ctx, self.st, self.plan
        dev = st.device
        host = ctx.host
        patent = self.keep == "patent"
        cands = []
        if x is not None and ctx.weight[x] and dev[x] != host and x not in st.w_res:
            size = ctx.weight_bytes_added(x, dev, st.w_res)
            gain = ctx.weight_gain(x, dev, st.w_res)
            if gain > 0 or x not in ctx.tied.related:  # a tied weight another reader holds here saves nothing
                cands.append((gain / max(size, 1.0), 0, x, size))
        newterm = {}
        for t in ts:
            if t in st.t_res:  # only reached from redecide(): already kept
                newterm[t] = ctx.tensor_term(t, dev, True)
                continue
            newterm[t] = nk = ctx.tensor_term(t, dev, False)
            if patent:
                p = ctx.producer[t]
                if p is None or dev[p] == host:  # the patent keeps a layer's intermediate results only
                    continue
            elif nk <= 0.0:  # nothing moves: nothing to save by keeping it
                continue
            k = ctx.tensor_term(t, dev, True)
            if saves(nk, k):
                cands.append(((nk - k) / max(ctx.size[t], 1.0), 1, t, k))
        if not patent:
            cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        for _, kind, y, k in cands:
            if kind == 0:  # k: the bytes its weights add
                if plan.fits(dev[y], k):
                    st.w_res.add(y)
                    self._use(du, dev[y], k)
            else:
                foot = ctx.footprint(y, dev)
                s = ctx.size[y]
                if all(plan.fits(d, s) for d in foot):
                    st.t_res.add(y)
                    for d in foot:
                        self._use(du, d, s)
                    newterm[y] = k
        total = 0.0
        for t, v in newterm.items():
            self.tterm[t] = v
            total += v
        if x is not None:
            self._set_op(x, ctx.op_term(x, dev[x], x in st.w_res, dev, st.w_res))
            total += self.opterm[x]
        return total

    def undo(self, rec: tuple) -> None:
        """Take back the move (or :meth:`offer`) of record ``rec``: the last one not taken back yet."""
        x, src, old_w, old_t, old_op, du, prev_first, old_g = rec
        st = self.st
        cur = sum(self.tterm[t] for t, _, _ in old_t)
        for y, v in old_g:  # tied readers re-priced by the move: their terms back
            self.total += v - self.opterm[y]
            self._set_op(y, v)
        for d, b in du.items():
            self.plan.used[d] -= b
        if x is not None:
            cur += self.opterm[x]
            if self.objective == "makespan":
                self.load[st.device[x]] -= self.opterm[x]
                self.load[src] += old_op
            st.w_res.discard(x)
            if old_w:
                st.w_res.add(x)
            st.device[x] = src
            self.opterm[x] = old_op
        for t, was, term in old_t:
            if was:
                st.t_res.add(t)
            else:
                st.t_res.discard(t)
            self.tterm[t] = term
        self.total += (old_op if x is not None else 0.0) + sum(v for _, _, v in old_t) - cur
        self.first = prev_first

    def offer(self, kind: str, y: str) -> tuple | None:
        """Keep one more weight (``kind="w"``) or tensor (``"t"``) if it saves time and the plan
        allows: its undo record, or ``None`` (nothing changed)."""
        ctx, st = self.ctx, self.st
        dev = st.device
        du: dict[str, float] = {}
        if kind == "w":
            d = dev[y]
            if y in st.w_res or not ctx.weight[y] or d == ctx.host:
                return None
            size = ctx.weight_bytes_added(y, dev, st.w_res)
            if not self.plan.fits(d, size):
                return None
            old = self.opterm[y]
            st.w_res.add(y)
            self._use(du, d, size)
            self._set_op(y, ctx.op_term(y, d, True, dev, st.w_res))
            self.total += self.opterm[y] - old
            old_g, first = self._retie(y, ctx.pos[y])
            return y, d, False, [], old, du, self._touched(first), old_g
        old = self.tterm[y]
        k = ctx.tensor_term(y, dev, True)
        foot = ctx.footprint(y, dev)
        if y in st.t_res or not saves(old, k) or not all(self.plan.fits(d, ctx.size[y]) for d in foot):
            return None
        st.t_res.add(y)
        for d in foot:
            self._use(du, d, ctx.size[y])
        self.tterm[y] = k
        self.total += k - old
        return None, None, False, [(y, False, old)], 0.0, du, self._touched(ctx.born[y]), []

    def delta(self, recs: Sequence[tuple]) -> dict[str, Any]:
        """The step delta of applied records (O(moved ops and their tensors))."""
        before = State()
        tensors: dict[str, None] = {}
        for x, src, old_w, old_t, *_ in recs:
            if x is not None and x not in before.device:
                before.device[x] = src
                if old_w:
                    before.w_res.add(x)
            for t, was, _ in old_t:
                if t not in tensors:
                    tensors[t] = None
                    if was:
                        before.t_res.add(t)
        return diff(before, self.st, before.device, tensors)

    def redecide(self) -> None:
        """Offer every weight and tensor not kept to the memory plan again (after moves freed memory)."""
        ctx, st = self.ctx, self.st
        host = ctx.host
        du: dict[str, float] = {}
        before = self.total
        for o in ctx.order:
            d = st.device[o]
            if not ctx.weight[o] or d == host or o in st.w_res:
                continue
            size = ctx.weight_bytes_added(o, st.device, st.w_res)
            if self.plan.fits(d, size) and (o not in ctx.tied.related or ctx.weight_gain(o, st.device, st.w_res) > 0):
                st.w_res.add(o)
                self._use(du, d, size)
                self._set_op(o, ctx.op_term(o, d, True, st.device, st.w_res))
        if ctx.tied:  # tied readers fetch less once another reader keeps the weights
            for o in ctx.tied.related:
                if o in st.device:
                    self._set_op(o, ctx.op_term(o, st.device[o], o in st.w_res, st.device, st.w_res))
        self._decide(None, [t for t in ctx.size if t not in st.t_res], du)
        self.total = sum(self.opterm.values()) + sum(self.tterm.values())
        self._touched(0)
        if self.total > before * (1 + REL_EPS):  # pragma: no cover - keeping only lowers terms
            raise HetschedError("internal: residency re-decision raised the total latency")

    # ---------------------------------------------------------------- snapshots
    def snapshot(self) -> tuple:
        """Everything :meth:`restore` needs to come back to the current (committed) state."""
        ms = (self.makespan, dict(self.checkpoints), dict(self.load)) if self.objective == "makespan" else None
        return self.st.copy(), dict(self.plan.used), dict(self.opterm), dict(self.tterm), self.total, ms

    def restore(self, snap: tuple) -> None:
        st, used, opterm, tterm, total, ms = snap
        for mine, saved in ((self.st.device, st.device), (self.st.w_res, st.w_res), (self.st.t_res, st.t_res)):
            mine.clear()  # in place: callers hold the state's containers
            mine.update(saved)
        self.plan.used, self.opterm, self.tterm, self.total = dict(used), dict(opterm), dict(tterm), total
        if ms is not None:
            self.makespan, self.checkpoints, self.load = ms[0], dict(ms[1]), dict(ms[2])
        self.first = None


def best_residency(ctx: Ctx, device: dict[str, str], budget: Mapping[str, float] | None = None) -> State:
    """The residency the search, the ILP's warm start and brute force give a placement: every weight
    and tensor whose keeping saves transfer time, best saving per byte first, while the memory plan
    allows (:func:`plan_budget`; exact for the total latency when memory does not bind)."""
    mv = Mover(ctx, State(dict(device)), "total_latency", plan_budget(ctx) if budget is None else budget)
    mv.redecide()
    return mv.st


# ------------------------------------------------------------------------------------------ the occupancy rule
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


def _greedy(ctx: Ctx, st: State, items: list[tuple[str, str]], threshold: float) -> list[bool]:
    """The patent's rule (claims 13-16): offer every item in layer order; the threshold decides."""
    return [True] * len(items)


def _knapsack_policy(ctx: Ctx, st: State, items: list[tuple[str, str]], threshold: float) -> list[bool]:
    """H2H's variant: per device, pack what saves the most transfer time into the room under the threshold."""
    used = MemoryPlan(ctx, st, {}).used
    by_dev: dict[str, list[int]] = {}
    for i, (kind, x) in enumerate(items):
        d = st.device[x] if kind == "w" else st.device[ctx.producer[x]]
        by_dev.setdefault(d, []).append(i)
    take = [False] * len(items)
    for d, idx in by_dev.items():
        sizes = [ctx.weight_bytes_added(items[i][1], st.device, st.w_res) if items[i][0] == "w" else ctx.size[items[i][1]]
                 for i in idx]
        vals = [ctx.weight_gain(x, st.device, st.w_res) if kind == "w" else ctx.tensor_gain(x, st.device)
                for kind, x in (items[i] for i in idx)]
        for i, ok in zip(idx, _knapsack(sizes, vals, threshold * ctx.capacity[d] - used[d])):
            take[i] = ok
    return take


#: name -> ``policy(ctx, state, items, threshold) -> [bool per item]``: which offered items
#: :func:`keep_on_chip` may keep (the occupancy threshold still decides each); a callable is used as is
LOCALITY_POLICIES: dict[str, Callable[[Ctx, State, list, float], list[bool]]] = {"greedy": _greedy,
                                                                                  "knapsack": _knapsack_policy}


def keep_on_chip(ctx: Ctx, st: State, log: StepLog, threshold: float = 0.9, policy: str | Callable = "greedy",
                 total: float | None = None, phase: str = "locality") -> float:
    """Keep weights and intermediate results in device memory, in layer order (``st`` in place).

    The patent's memory-aware communication optimisation (claims 12-17): each op's weights (claim
    15), then its output tensors produced on a device that are cheaper kept (claim 16: a consumer
    reads it in place; or a direct copy beats the round trip through host memory), are kept while
    every device that would hold them stays under ``threshold`` of its memory (claims 13-14, on the
    :class:`MemoryPlan`). ``policy`` (a name of :data:`LOCALITY_POLICIES` or a callable) may leave
    items out. One ``keep_weights``/``keep_tensor`` step per item, ``before``/``after`` the running
    total latency (from ``total``, default: the state's). Returns the final total latency.
    """
    limit = occupancy_limit(ctx, threshold)
    pick = LOCALITY_POLICIES.get(policy, policy) if isinstance(policy, str) else policy
    if not callable(pick):
        raise HetschedError(f"unknown locality policy {policy!r}; use one of {sorted(LOCALITY_POLICIES)} or a callable",
                            field="policy")
    host = ctx.host
    dev = st.device
    total = ctx.total_latency(st) if total is None else total
    items: list[tuple[str, str]] = []
    for o in ctx.order:
        if ctx.weight[o] and dev[o] != host and o not in st.w_res:
            items.append(("w", o))
        if dev[o] != host:
            items.extend(("t", t) for t in ctx.outputs[o] if t not in st.t_res and ctx.tensor_gain(t, dev) > 0)
    chosen = [bool(v) for v in pick(ctx, st, items, threshold)]
    plan = MemoryPlan(ctx, st, limit)
    for (kind, x), take in zip(items, chosen):
        if kind == "w":
            size, gain, devs = ctx.weight_bytes_added(x, dev, st.w_res), ctx.weight_gain(x, dev, st.w_res), [dev[x]]
            action, delta = "keep_weights", {"weights_add": [x]}
        else:
            size, gain, devs = ctx.size[x], ctx.tensor_gain(x, dev), ctx.footprint(x, dev)
            action, delta = "keep_tensor", {"tensors_add": [x]}
        ok, info = plan.check(devs, size)
        reason = plan.why(ok, kind, x, info, threshold)
        if ok and not take:
            ok, reason = False, f"left out by the {policy if isinstance(policy, str) else 'custom'} policy (saves less per byte)"
        info["threshold"] = threshold
        if kind == "t":
            info["saved_s"] = gain
        after = total - gain if ok else total
        if ok:
            (st.w_res if kind == "w" else st.t_res).add(x)
            for d in devs:
                plan.used[d] += size
        log.add(action, x, total, after, ok, reason, delta, data={"phase": phase, "metric": "total_latency", **info})
        total = after
    return total
