"""The mapping engine shared by every mapper: the evaluator's clock plus what mappers ask of it.

Why this exists: the H2H remap phase tries thousands of moves; re-running the full evaluator
(which builds a pandas timeline) for each would be quadratic. :class:`Ctx` is the evaluator's own
model (:class:`hetsched.clock.Clock`, the clock :func:`hetsched.evaluate` runs) used in three cheap
ways, with no model of its own:

* **additive terms** for ``total_latency_s`` (the patent's "system total latency", claim 5: the sum
  over devices of the time each spends computing and moving its own data). Every transfer's *route
  and duration* is fixed by the placement and the residency flags alone (never by timing), so the
  total is a sum of one term per op (:meth:`Ctx.op_term`: compute + weight fetch) and one per
  tensor (:meth:`Ctx.tensor_term`: write-back + the reads of its consumers). Moving an op changes
  only its own term and those of the tensors it reads and writes: an O(degree) re-timer.
* **the clock without rows** (:meth:`Ctx.simulate`) for the ``makespan`` objective, re-timing only
  the suffix of the op order from the first op a move can affect (the patent's claim 6: "update the
  schedule times of the specific layer and the layers after it"), from a checkpoint of its state.
* **the locality rule** as a function of one op or tensor, so that a tentative move can re-run
  locality around the moved op only (the patent's claims 4 and 13-16).

Every duration comes from the bound :class:`~hetsched.cost.CostModel` (``compute_s`` and per-hop
``transfer_s``) through the clock's caches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..clock import Clock, Snapshot
from ..cost import CostModel
from ..errors import CapacityError, UnsupportedOpError
from ..graph import OpGraph
from ..system import System

# a move is "better" only when it wins by more than float noise
REL_EPS = 1e-9


class Ctx(Clock):
    """Everything a mapper needs about one (graph, system, cost) triple, precomputed once.

    The clock's prices (:meth:`comp`, :meth:`hops`, :meth:`xfer`) plus the graph as plain dicts
    (``inputs``, ``outputs``, ``succ``, ``pred``, ``pos``...) and the devices' capacities.
    """

    def __init__(self, graph: OpGraph, system: System, cost: CostModel | None = None, *, contention: bool = True,
                 order: Sequence[str] | None = None) -> None:
        graph.validate()  # a negative size or flops would otherwise price into a silent wrong answer
        super().__init__(graph, system, cost, order=order, contention=contention)
        self.pos = {o: i for i, o in enumerate(self.order)}
        self.inputs = {o: list(graph._inputs.get(o, ())) for o in self.order}
        self.outputs = {o: list(graph._outputs.get(o, ())) for o in self.order}
        nxg = graph.nx
        self.succ = {o: sorted(nxg.successors(o), key=self.pos.__getitem__) for o in self.order}
        self.pred = {o: sorted(nxg.predecessors(o), key=self.pos.__getitem__) for o in self.order}
        self.devices = system.devices
        self.capacity = {d: float(dev.memory_bytes) for d, dev in self.devices.items()}
        self._cand: dict[str, list[str]] = {}
        self._servable: dict[str, list[str]] = {}
        self._ws: dict[str, float] = {}

    # ---------------------------------------------------------------- pricing
    def candidates(self, op: str) -> list[str]:
        t = self.ops[op].op_type
        c = self._cand.get(t)
        if c is None:
            c = self._cand[t] = self.system.candidates(t)
        return c

    def require_support(self) -> None:
        """Raise ``UnsupportedOpError`` naming every op (and its op_type) no device runs."""
        types = {self.ops[o].op_type for o in self.order}
        if all(self.candidates_of_type(t) for t in types):
            return
        self.system.require_support([(o, self.ops[o].op_type) for o in self.order])

    def servable(self, op: str) -> list[str]:
        """The candidates of ``op`` whose memory holds its working set (weights, inputs, outputs), in the
        support table's order; none -> :class:`~hetsched.errors.CapacityError` naming the largest.

        What a mapper may place the op on: a placement outside it cannot be evaluated.
        """
        c = self._servable.get(op)
        if c is None:
            c = self._servable[op] = raise_if_unservable(self, op, self.candidates(op))
        return c

    def candidates_of_type(self, op_type: str) -> list[str]:
        c = self._cand.get(op_type)
        if c is None:
            c = self._cand[op_type] = self.system.candidates(op_type)
        return c

    def working_set(self, op: str) -> float:
        """Bytes an op needs on its device while it runs (weights, inputs, outputs)."""
        v = self._ws.get(op)
        if v is None:
            v = self._ws[op] = (self.weight[op] + sum(self.size[t] for t in self.inputs[op])
                                + sum(self.size[t] for t in self.outputs[op]))
        return v

    # ---------------------------------------------------------------- additive total latency
    #: ``op_term(op, dev, w_res)``: compute plus weight fetch (the clock's :meth:`~Clock.op_busy_s`)
    op_term = Clock.op_busy_s
    #: ``tensor_term(t, device, resident)``: write-back plus reads (the clock's :meth:`~Clock.tensor_busy_s`)
    tensor_term = Clock.tensor_busy_s

    def total_latency(self, state: "State") -> float:
        dev = state.device
        s = 0.0
        for o in self.order:
            s += self.op_term(o, dev[o], o in state.w_res)
        for t in self.size:
            s += self.tensor_term(t, dev, t in state.t_res)
        return s

    def tensor_gain(self, t: str, device: Mapping[str, str]) -> float:
        """Total latency saved by keeping ``t`` in its producer's memory (> 0: worth it)."""
        return self.tensor_term(t, device, False) - self.tensor_term(t, device, True)

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
        for o in delta.get("weights_remove", ()):
            self.w_res.discard(o)
        for o in delta.get("weights_add", ()):
            self.w_res.add(o)
        for t in delta.get("tensors_remove", ()):
            self.t_res.discard(t)
        for t in delta.get("tensors_add", ()):
            self.t_res.add(t)


class Occupancy:
    """Planned bytes of resident weights and kept tensors per device (the patent's occupancy rate).

    Kept tensors are counted as if they lived the whole run, so the plan is conservative: the
    evaluator's true peak (kept tensors die after their last reader) is checked at the end.
    """

    def __init__(self, ctx: Ctx, state: State) -> None:
        self.ctx = ctx
        self.used: dict[str, float] = {d: 0.0 for d in ctx.devices}
        for o in state.w_res:
            self.used[state.device[o]] += ctx.weight[o]
        for t in state.t_res:
            self.used[state.device[ctx.producer[t]]] += ctx.size[t]

    def frac(self, dev: str, extra: float = 0.0) -> float:
        cap = self.ctx.capacity[dev]
        return (self.used[dev] + extra) / cap if cap else float("inf")


def keep_reason_tensor(ctx: Ctx, t: str, device: Mapping[str, str]) -> str:
    dp = device[ctx.producer[t]]
    if not ctx.is_output[t] and any(device.get(c) == dp for c in ctx.consumers[t]):
        return "a consumer runs on the same device and reads it in place (patent claim 16)"
    return "a direct copy to the consumer's device beats the round trip through host memory"


def decide_weights(ctx: Ctx, state: State, occ: Occupancy, op: str, threshold: float) -> tuple[bool, str, dict]:
    """The patent's rule (claims 13-15): keep weights while the device stays under the threshold."""
    d = state.device[op]
    w = ctx.weight[op]
    before = occ.frac(d)
    after = occ.frac(d, w)
    info = {"device": d, "bytes": w, "occupancy_before": before, "occupancy_after": after, "threshold": threshold}
    if after <= threshold:
        return True, f"occupancy of {d} stays at {after:.0%} <= {threshold:.0%}: weights kept on-chip", info
    return False, f"occupancy of {d} would reach {after:.0%} > {threshold:.0%}: weights stay in host memory", info


def decide_tensor(ctx: Ctx, state: State, occ: Occupancy, t: str, threshold: float,
                  gain: float | None = None) -> tuple[bool, str, dict, float]:
    d = state.device[ctx.producer[t]]
    if gain is None:
        gain = ctx.tensor_gain(t, state.device)
    s = ctx.size[t]
    after = occ.frac(d, s)
    info = {"device": d, "bytes": s, "occupancy_before": occ.frac(d), "occupancy_after": after,
            "threshold": threshold, "saved_s": gain}
    if after > threshold:
        return False, f"occupancy of {d} would reach {after:.0%} > {threshold:.0%}: tensor goes back to host", info, gain
    return True, keep_reason_tensor(ctx, t, state.device), info, gain


def tensor_candidates(ctx: Ctx, state: State, tensors: Iterable[str]) -> list[str]:
    """Produced on a non-host device and cheaper kept on-chip."""
    host = ctx.host
    out = []
    for t in tensors:
        p = ctx.producer[t]
        if p is None or state.device.get(p) in (None, host):
            continue
        if ctx.tensor_gain(t, state.device) > 0:
            out.append(t)
    return out


def check_fits(ctx: Ctx, op: str, dev: str) -> bool:
    return ctx.working_set(op) <= ctx.capacity[dev] or dev == ctx.host


def raise_if_unservable(ctx: Ctx, op: str, cands: list[str]) -> list[str]:
    """Candidates whose memory can hold the op's working set; none -> CapacityError naming the device."""
    ok = [d for d in cands if check_fits(ctx, op, d)]
    if not ok:
        big = max(cands, key=lambda d: ctx.capacity[d])
        need = ctx.working_set(op)
        raise CapacityError(
            f"op {op!r} needs {need:.4g} bytes (weights {ctx.weight[op]:.4g} + activations) on-chip, more than"
            f" device {big!r} (the largest that runs it) holds ({ctx.capacity[big]:.4g} bytes)",
            op=op, device=big, need_bytes=need, capacity_bytes=ctx.capacity[big],
        )
    return ok


__all__ = ["Ctx", "State", "Snapshot", "Occupancy", "REL_EPS", "UnsupportedOpError"]
