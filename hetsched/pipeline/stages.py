"""Pipelines of real models on heterogeneous machines: stage costs from a graph, and the best split.

A training graph (the zoo's, an imported one; an inference graph is turned into one with
:func:`hetsched.io.training.training_graph`) is cut into ``S = p * v`` *contiguous* stages along
the topological order of its forward ops. Every backward op goes with the forward op it
differentiates (``attrs["of"]``), a loss with the op whose output it reads, a gradient sum with
the producer of the tensor it sums. Stage ``s`` runs on the device of its rank (``devices[rank]``,
rank from the schedule's placement: looped or V), and each of its ops is priced there by the cost
model (:mod:`hetsched.cost`; one op an unsupported device cannot run makes that placement
impossible):

* ``F`` = its forward (and loss) ops, ``B`` = its backward ops; ``W`` = the weight-gradient share
  of ``B``: a parametrised op's backward does its forward FLOPs once for the input gradient and
  once for the weight gradient (:mod:`hetsched.io.training`), so half its time (all of it when its
  input is a graph input); ``I = B - W``;
* the activation a stage sends (and the gradient coming back) is the sum of the forward tensors
  crossing its cut: produced at or before it, read after it (a skip connection is relayed through
  every stage it crosses); its time is the cost model's ``transfer_s`` between the two ranks'
  devices;
* memory on a rank: the weights of its stages times ``weight_copies`` (2: weights and their
  gradients; 4 adds Adam's two moments) plus, per in-flight micro-batch, the forward tensors its
  backward ops read (saved activations), the number in flight taken from the schedule.

:func:`split_stages` finds the cut points that minimise the *bottleneck*: the slowest stage
(``F + B`` on its device) or link (the activation or gradient transfer across a cut), which bounds
the steady-state throughput of any 1F1B-like schedule. It is the dynamic program over cut points
of PipeDream's planner (Narayanan et al., SOSP 2019, section 3.1): ``best[s][j]`` = the smallest
bottleneck of the first ``j`` units cut into ``s + 1`` stages, each stage priced on its own
rank's device, a stage that does not fit its rank's memory never chosen. With ``v > 1`` each
chunk must fit an equal share (``1 / v``) of its rank's memory (a rank's chunks are far apart in
the cut order, so the DP cannot couple them); the exact per-rank peak is then reported from the
schedule. When no split fits, a :class:`~hetsched.errors.CapacityError` names the rank, device and
bytes.

Examples
--------
>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> sp = split_stages(chain(8), toy_system(), devices=["gpu0", "cpu0"], p=2)
>>> sp.n_stages, bool(sp.metrics["bottleneck_s"] == max(sp.per_stage["time_s"].max(), sp.per_stage["send_s"].max()))
(2, True)
>>> c = stage_costs(chain(8), toy_system(), devices=["gpu0", "cpu0"], p=2)
>>> c.placement, len(c.f_s)
((0, 1), 2)
"""

from __future__ import annotations

import itertools
import math
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..cost import CostModel, range_factors, resolve_cost
from ..errors import CapacityError, HetschedError, ScheduleError, UnsupportedOpError
from ..graph import OpGraph
from ..results import Result, StepLog
from ..system import System
from ..timeline import TimelineBuilder
from .costs import StageCosts
from .ir import Schedule

__all__ = ["split_stages", "stage_costs", "exhaustive_split", "StageSplit", "GraphUnits", "graph_units",
           "DEFAULT_MODEL", "default_devices", "simulate_model", "ModelRun"]

#: The bundled what-if a panel or notebook starts from: a training graph and a mixed machine.
DEFAULT_MODEL = {"graph": "gpt2_small_train_b8_s1024", "system": "pipeline_a100_v100_u280"}


# ---- the graph as a chain of units -------------------------------------------------------------

@dataclass(frozen=True)
class GraphUnits:
    """A training graph as a chain of cuttable units, priced on each device.

    Attributes
    ----------
    names : list of str
        Each unit's label (its forward op, or layer with ``units="layer"``).
    ops : list of list of str
        Every op of each unit: forward ops, their backward ops, losses, gradient sums.
    time_s : dict
        Per device: arrays ``F``, ``B``, ``W`` (seconds per unit) and ``unsupported`` (ops the
        device cannot run).
    weight_bytes : ndarray
        Parameter bytes per unit (a weight several of its forward ops read, tied weights, once).
    ops_per_unit : int
        Consecutive forward units merged into one (1 unless the chain was longer than ``max_units``).
    tied : tuple of (int, int, float)
        ``(a, b, bytes)``: units ``a < b`` read the same ``bytes`` of tied weights (GPT-2's LM head
        and token embedding): a stage holding both holds them once (:meth:`stage_weight_bytes`).
    cross_bytes : ndarray
        ``cross_bytes[j]``: bytes of forward tensors crossing the cut before unit ``j`` (length
        ``n + 1``; the ends are 0).
    saved : list of list of (str, float)
        Per unit: the forward tensors its backward ops read, with their bytes.
    forward : list of list of str
        Per unit: its forward ops.
    """

    graph_name: str
    names: list
    ops: list
    forward: list
    time_s: dict
    weight_bytes: np.ndarray
    cross_bytes: np.ndarray
    saved: list
    tied: tuple = ()
    ops_per_unit: int = 1

    @property
    def n(self) -> int:
        return len(self.names)

    def stage_weight_bytes(self, i, j, wpre: np.ndarray | None = None):
        """Weight bytes of units ``i..j-1`` (scalars or arrays), each tied weight once.

        >>> from hetsched.io.zoo import gpt2_small
        >>> from hetsched.io.systems import toy_system
        >>> g = gpt2_small(seq_len=8, n_layers=1)
        >>> u = graph_units(g, toy_system(), ["gpu0"])
        >>> int(u.stage_weight_bytes(0, u.n)) == g.total_weight_bytes
        True
        """
        if wpre is None:
            wpre = np.concatenate([[0.0], np.cumsum(self.weight_bytes)])
        w = wpre[j] - wpre[i]
        for a, b, nbytes in self.tied:
            w = w - nbytes * ((np.asarray(i) <= a) & (np.asarray(j) > b))
        return w


def _is_training(g: OpGraph) -> bool:
    return any(o.attrs.get("phase") == "backward" for o in g.ops.values())


#: at most this many units by default: a longer chain (an LLM's thousands of forward ops) merges runs of
#: consecutive units, so the O(S n^2) split stays interactive; a cut then falls between runs only, and a
#: stage's cost is off by at most one run's cost (under 0.1 % of the total here)
MAX_UNITS = 1024


#: the last few graph_units answers (and their saved-activation matrices): a split is asked for several
#: times of one graph (a dashboard tab compares two schedules, a sweep tries many p), and pricing every
#: unit of a 1k-op graph costs ~50 ms each time
_UNITS_CACHE: "OrderedDict[Any, GraphUnits]" = OrderedDict()
_SAVED_CACHE: "OrderedDict[int, tuple[GraphUnits, np.ndarray]]" = OrderedDict()
_CACHE_SIZE = 4


def graph_units(graph: OpGraph, system: System, devices: Sequence[str], *, cost: CostModel | None = None, units: str = "op",
                max_units: int | None = MAX_UNITS) -> GraphUnits:
    """Cut ``graph`` into a chain of units and price every unit on every device in ``devices``.

    The answer is remembered for the same graph (and version: an edit in place is a new one),
    system, devices, cost and units; it is read-only.

    ``units="op"``: one unit per forward op (topological order); ``"layer"``: consecutive forward
    ops sharing a name prefix (``h3.attn.scores`` -> ``h3``) form one unit (coarser, for exhaustive
    checks and quick plans).

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> u = graph_units(chain(4), toy_system(), ["gpu0"])
    >>> u.n, u.ops[0]
    (4, ['op0', 'op0.grad'])
    """
    from ..cost import cost_key

    try:
        key = (graph, getattr(graph, "version", None), system, tuple(devices), cost_key(cost), units, max_units)
        hash(key)
    except TypeError:  # something unhashable (a cost made on the fly): not remembered
        key = None
    if key is not None and key in _UNITS_CACHE:
        _UNITS_CACHE.move_to_end(key)
        return _UNITS_CACHE[key]
    u = _graph_units(graph, system, devices, cost=cost, units=units, max_units=max_units)
    if key is not None:
        _UNITS_CACHE[key] = u
        while len(_UNITS_CACHE) > _CACHE_SIZE:
            _UNITS_CACHE.popitem(last=False)
    return u


def _graph_units(graph: OpGraph, system: System, devices: Sequence[str], *, cost: CostModel | None, units: str,
                 max_units: int | None) -> GraphUnits:
    if units not in ("op", "layer"):
        raise HetschedError(f"units must be 'op' or 'layer', got {units!r}", field="units")
    if not _is_training(graph):
        from ..io.training import training_graph

        graph = training_graph(graph)
    fwd = [o for o in graph.topological_order() if graph.op(o).attrs.get("phase") == "forward"]
    if not fwd:
        raise HetschedError(f"graph {graph.name!r} has no forward ops to cut into stages", field="graph")
    unit_of: dict[str, int] = {}
    names: list[str] = []
    for o in fwd:
        key = o.split(".")[0] if units == "layer" else o
        if not names or names[-1] != key or units == "op":
            names.append(key)
        unit_of[o] = len(names) - 1
    k_merge = 1
    if max_units is not None and len(names) > max(1, int(max_units)):
        k_merge = -(-len(names) // max(1, int(max_units)))  # consecutive units per run, rounded up
        names = [f"{names[i]} .. {names[min(i + k_merge, len(names)) - 1]}" if k_merge > 1 else names[i]
                 for i in range(0, len(names), k_merge)]
        unit_of = {o: k // k_merge for o, k in unit_of.items()}
    n = len(names)
    members: list[list[str]] = [[] for _ in range(n)]
    for o in fwd:
        members[unit_of[o]].append(o)
    producer = {t: graph.tensor(t).producer for t in graph.tensors}

    def owner(op: str) -> int:
        a = graph.op(op).attrs
        of = a.get("of")
        if of in unit_of:
            return unit_of[of]
        if of in graph.tensors:  # a loss reads a tensor; a gradient sum sums one
            pr = producer.get(of)
            if pr in unit_of:
                return unit_of[pr]
        if of in graph.ops:  # a loss gradient: with its loss
            return owner(of)
        ins = [producer[t] for t in graph.inputs_of(op) if producer.get(t) in unit_of]
        return max((unit_of[x] for x in ins), default=n - 1)

    for o in graph.topological_order():
        if o not in unit_of:
            members[owner(o)].append(o)
    c = resolve_cost(cost, graph, system)
    distinct = list(dict.fromkeys(devices))
    for d in distinct:
        system.device(d)  # names an unknown device
    backward = {o for o in graph.ops if graph.op(o).attrs.get("phase") == "backward"}
    time_s: dict[str, dict[str, np.ndarray]] = {}
    for d in distinct:
        F, B, W, bad = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
        for k, ops in enumerate(members):
            for o in ops:
                op = graph.op(o)
                if not system.support.supports(d, op.op_type):
                    bad[k] += 1
                    continue
                t = c.compute_s(op, d)
                if o in backward:
                    B[k] += t
                    fo = op.attrs.get("of")
                    if op.weight_bytes and fo in graph.ops and op.flops > 0:
                        # wgrad repeats the forward FLOPs once (dgrad is the rest)
                        W[k] += t * min(1.0, graph.op(fo).flops / op.flops)
                    elif fo in graph.ops and graph.op(fo).weight_bytes and not op.weight_bytes:
                        W[k] += t  # first layer: no input gradient, all of it is the weight gradient
                else:
                    F[k] += t
        time_s[d] = {"F": F, "B": B, "W": W, "unsupported": bad}
    from ..weights import TiedWeights

    tw = TiedWeights.of(graph)
    weight = np.array([float(tw.held_bytes(o for o in ms if o in unit_of)) for ms in members])
    tied = _tied_pairs(tw, unit_of)
    # forward tensors crossing each cut: produced in unit a, last read (by a forward op) in unit b > a
    diff = np.zeros(n + 1)
    for t, tens in graph.tensors.items():
        pa = unit_of.get(tens.producer) if tens.producer else None
        if pa is None:
            continue
        readers = [unit_of[x] for x in tens.consumers if x in unit_of]
        if readers and max(readers) > pa:
            diff[pa + 1] += tens.size_bytes
            diff[max(readers) + 1] -= tens.size_bytes
    cross = np.cumsum(diff)
    cross[0] = cross[n] = 0.0
    saved: list[list[tuple[str, float]]] = []
    for ms in members:
        seen: dict[str, float] = {}
        for o in ms:
            if o not in backward:
                continue
            for t in graph.inputs_of(o):
                tens = graph.tensor(t)
                if tens.producer in unit_of:  # a forward activation kept for the backward
                    base = tens.alias_of or t
                    seen.setdefault(base, float(graph.tensor(base).size_bytes))
        saved.append(list(seen.items()))
    fwd_members = [[o for o in ms if o in unit_of] for ms in members]
    return GraphUnits(graph.name, names, members, fwd_members, time_s, weight, cross, saved, tied, k_merge)


def _tied_pairs(tw: Any, unit_of: Mapping[str, int]) -> tuple[tuple[int, int, float], ...]:
    """Tied weights read by forward ops of several units, as pairs of consecutive units of each tie
    group: ``(a, b, bytes)`` with the bytes both hold (the owner's unit holds all of them), so that a
    stage's weights are its units' sums less the pairs it contains (exact when the readers of a
    group share the same bytes, as a tied embedding's do)."""
    pairs = []
    for owner, sharers in tw.sharers.items():
        per_unit: dict[int, float] = {}
        if owner in unit_of:
            per_unit[unit_of[owner]] = math.inf
        for s in sharers:
            if s in unit_of:
                k = unit_of[s]
                per_unit[k] = max(per_unit.get(k, 0.0), float(tw.shared[s][1]))
        ks = sorted(per_unit)
        for a, b in zip(ks, ks[1:]):
            nbytes = min(per_unit[a], per_unit[b])
            if nbytes > 0 and math.isfinite(nbytes):
                pairs.append((a, b, nbytes))
    return tuple(pairs)


# ---- the split as a result -----------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True, eq=False)
class StageSplit(Result):
    """Outcome of :func:`split_stages`.

    Attributes
    ----------
    cuts : tuple of int
        ``S + 1`` unit indices: stage ``s`` holds units ``cuts[s]:cuts[s+1]``.
    stages : list of list of str
        The forward ops of each stage.
    costs : StageCosts
        Per-stage costs for :func:`~hetsched.pipeline.simulate` (with link times and placement).
    per_stage : DataFrame
        ``stage, rank, device, first, last, n_units, f_s, b_s, i_s, w_s, time_s, activation_bytes,
        send_s, weight_bytes, saved_bytes, in_flight, memory_bytes, capacity_bytes``.
    per_rank : DataFrame
        ``rank, device, busy_s`` (F + B of its stages), ``peak_memory_bytes`` (exact, from the
        schedule), ``capacity_bytes``.
    metrics : dict
        ``bottleneck_s``, ``max_stage_s``, ``max_link_s``, ``balance`` (slowest over mean stage
        time), ``peak_memory_fraction`` (worst rank's peak / capacity), ``n_units``, ``n_stages``,
        ``solve_s``.
    steps : LazySteps
        One per stage, in cut order: which units it took and what it costs on its device.
    timeline : DataFrame
        One micro-batch's forward then backward through the stages, on the rank lanes.
    """

    cuts: tuple
    stages: list
    costs: StageCosts
    per_stage: pd.DataFrame
    per_rank: pd.DataFrame
    units: GraphUnits

    @property
    def n_stages(self) -> int:
        return len(self.cuts) - 1


def _in_flight(sched: Schedule) -> np.ndarray:
    """Per global stage: the most micro-batches whose forward ran and whose backward has not, in list order."""
    out = np.zeros(sched.n_stages, np.int64)
    for r in range(sched.p):
        sl = sched.rank_slice(r)
        st, kd = sched.stage[sl], sched.kind[sl]
        for s in np.unique(st).tolist():
            sel = st == s
            delta = np.where(kd[sel] == 0, 1, np.where((kd[sel] == 1) | (kd[sel] == 3), -1, 0))
            out[s] = max(out[s], int(np.cumsum(delta).max()) if len(delta) else 0)
    return out


def _resolve_schedule(schedule: Any, p: int, v: int, m: int | None) -> Schedule:
    from .schedules import make_schedule

    if isinstance(schedule, Schedule):
        if (schedule.p, schedule.v) != (p, v):
            raise ScheduleError(f"the schedule has p={schedule.p}, v={schedule.v}; the split asks for p={p}, v={v}", field="schedule")
        return schedule
    name = schedule or ("1f1b" if v == 1 else "interleaved_1f1b")
    sched = make_schedule(name, p, v, 4 * p if m is None else m)
    if sched.v != v:
        raise ScheduleError(f"schedule {name!r} runs {sched.v} chunk(s) per rank; the split asks for v={v}", field="v")
    return sched


def _saved_matrix(u: GraphUnits) -> np.ndarray:
    """``M[i, j]``: bytes of distinct saved activations of units ``i..j-1`` (one sweep per start;
    remembered with the units, read-only)."""
    hit = _SAVED_CACHE.get(id(u))
    if hit is not None and hit[0] is u:
        return hit[1]
    M = _saved_sweep(u)
    M.flags.writeable = False
    _SAVED_CACHE[id(u)] = (u, M)
    while len(_SAVED_CACHE) > _CACHE_SIZE:
        _SAVED_CACHE.popitem(last=False)
    return M


def _saved_sweep(u: GraphUnits) -> np.ndarray:
    n = u.n
    M = np.zeros((n + 1, n + 1))
    for i in range(n):
        seen: set[str] = set()
        acc = 0.0
        for j in range(i, n):
            for t, b in u.saved[j]:
                if t not in seen:
                    seen.add(t)
                    acc += b
            M[i, j + 1] = acc
    return M


class _Problem:
    """Everything the DP and the exhaustive search price a split with (one definition for both)."""

    def __init__(self, u: GraphUnits, system: System, devices: Sequence[str], p: int, v: int, sched: Schedule,
                 weight_copies: float, cost: CostModel | None, graph: OpGraph) -> None:
        self.u, self.p, self.v, self.S = u, p, v, p * v
        self.rank, self.style = sched.stage_to_rank, sched.style
        self.dev = [devices[int(r)] for r in self.rank]
        self.sched = sched
        self.copies = weight_copies
        n = u.n
        self.pre = {d: {k: np.concatenate([[0.0], np.cumsum(a)]) for k, a in ts.items()} for d, ts in u.time_s.items()}
        self.wpre = np.concatenate([[0.0], np.cumsum(u.weight_bytes)])
        self.saved = _saved_matrix(u)
        self.inflight = _in_flight(sched)
        self.cap = np.array([float(system.device(d).memory_bytes) for d in self.dev]) / (v if v > 1 else 1)
        c = resolve_cost(cost, graph, system)
        # link time across cut j between the devices of stages s-1 and s (the same both ways)
        self._link: dict[tuple[str, str], np.ndarray] = {}
        for s in range(1, self.S):
            key = (self.dev[s - 1], self.dev[s])
            if key not in self._link:
                self._link[key] = np.array([max(c.transfer_s(float(b), key[0], key[1]), c.transfer_s(float(b), key[1], key[0]))
                                            for b in u.cross_bytes])
        self.n = n

    def stage_time(self, s: int, i: np.ndarray | int, j: np.ndarray | int):
        pre = self.pre[self.dev[s]]
        return (pre["F"][j] - pre["F"][i]) + (pre["B"][j] - pre["B"][i])

    def stage_ok(self, s: int, i, j):
        pre = self.pre[self.dev[s]]
        unsupported = (pre["unsupported"][j] - pre["unsupported"][i]) > 0
        mem = self.u.stage_weight_bytes(i, j, self.wpre) * self.copies + self.saved[i, j] * self.inflight[s]
        return ~unsupported & (mem <= self.cap[s])

    def link(self, s: int, j):
        """Time to move the activation across cut ``j`` into stage ``s`` (0 for the first stage)."""
        if s == 0:
            return np.zeros(np.shape(j)) if np.ndim(j) else 0.0
        return self._link[(self.dev[s - 1], self.dev[s])][j]

    def bottleneck(self, cuts: Sequence[int]) -> float:
        worst = 0.0
        for s in range(self.S):
            i, j = cuts[s], cuts[s + 1]
            if j <= i or not bool(self.stage_ok(s, i, j)):
                return math.inf
            worst = max(worst, float(self.stage_time(s, i, j)), float(self.link(s, i)))
        return worst


def _dp(pb: _Problem) -> tuple[float, list[int], int]:
    """Min-max DP over cut points: ``best[s][j]`` = bottleneck of units ``0..j-1`` in stages ``0..s``."""
    n, S = pb.n, pb.S
    INF = math.inf
    best = np.full(n + 1, INF)
    jj = np.arange(n + 1)
    ii = np.arange(n + 1)[:, None]
    valid = ii < jj  # a stage holds at least one unit
    # stage 0 starts at unit 0
    t0 = pb.stage_time(0, 0, jj)
    best = np.where(pb.stage_ok(0, 0, jj) & (jj > 0), t0, INF)
    arg = [np.zeros(n + 1, np.int64)]
    states = n + 1
    for s in range(1, S):
        T = pb.stage_time(s, ii, jj)  # (n+1, n+1): stage s = units i..j-1
        ok = valid & pb.stage_ok(s, ii, jj)
        cand = np.maximum(np.maximum(best[:, None], T), pb.link(s, np.arange(n + 1))[:, None])
        cand = np.where(ok, cand, INF)
        a = np.argmin(cand, axis=0)
        best = cand[a, jj]
        arg.append(a)
        states += (n + 1) ** 2
    if not np.isfinite(best[n]):
        return INF, [], states
    cuts = [n]
    j = n
    for s in range(S - 1, 0, -1):
        j = int(arg[s][j])
        cuts.append(j)
    cuts.append(0)
    return float(best[n]), cuts[::-1], states


def exhaustive_split(graph: OpGraph, system: System, *, devices: Sequence[str], p: int, v: int = 1, schedule: Any = None,
                     m: int | None = None, cost: CostModel | None = None, units: str = "layer", weight_copies: float = 2.0,
                     max_splits: int = 200_000) -> tuple[float, list[int]]:
    """The exact optimum by enumerating every split (the DP's differential check on small cases).

    Returns ``(bottleneck_s, cuts)``; refuses more than ``max_splits`` candidate splits.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> b, cuts = exhaustive_split(chain(6), toy_system(), devices=["gpu0", "cpu0"], p=2, units="op")
    >>> b == split_stages(chain(6), toy_system(), devices=["gpu0", "cpu0"], p=2).metrics["bottleneck_s"]
    True
    """
    pb, _ = _problem(graph, system, devices, p, v, schedule, m, cost, units, weight_copies)
    n, S = pb.n, pb.S
    total = math.comb(n - 1, S - 1) if n >= S else 0
    if total > max_splits:
        raise HetschedError(f"{total:,} splits of {n} units into {S} stages: too many to enumerate (max_splits={max_splits:,})", field="max_splits")
    best, arg = math.inf, []
    for inner in itertools.combinations(range(1, n), S - 1):
        cuts = [0, *inner, n]
        b = pb.bottleneck(cuts)
        if b < best:
            best, arg = b, cuts
    return best, arg


def _problem(graph, system, devices, p, v, schedule, m, cost, units, weight_copies, max_units=MAX_UNITS):
    from .schedules import check_pvm

    check_pvm(p, v, 1)
    devices = list(devices)
    if len(devices) != p:
        raise HetschedError(f"devices names one device per rank: {len(devices)} given for p={p}", field="devices")
    if not (weight_copies >= 0 and math.isfinite(weight_copies)):
        raise HetschedError(f"weight_copies must be finite and >= 0, got {weight_copies!r}", field="weight_copies")
    sched = _resolve_schedule(schedule, p, v, m)
    u = graph_units(graph, system, devices, cost=cost, units=units, max_units=max_units)
    if u.n < p * v:
        raise HetschedError(f"graph {graph.name!r} has {u.n} {units} units, fewer than the {p * v} stages asked for", field="p")
    pb = _Problem(u, system, devices, p, v, sched, weight_copies, cost, graph)
    pb.units = units
    return pb, sched


def split_stages(graph: OpGraph, system: System, *, devices: Sequence[str], p: int, v: int = 1, schedule: Any = None,
                 m: int | None = None, cost: CostModel | None = None, units: str = "op", weight_copies: float = 2.0,
                 overhead_s: float = 0.0, cuts: Sequence[int] | None = None, fit_memory: bool = True,
                 max_units: int | None = MAX_UNITS) -> StageSplit:
    """Split ``graph`` into ``p * v`` contiguous stages minimising the bottleneck on heterogeneous ranks.

    Parameters
    ----------
    graph : OpGraph
        A training graph (an inference graph is turned into one).
    system : System
        Devices, links and the support table.
    devices : sequence of str
        The device of each rank (``p`` names).
    p, v : int
        Ranks and chunks per rank (stages ``S = p * v``).
    schedule : str or Schedule, optional
        Which schedule will run (placement and in-flight micro-batches for the memory check);
        default ``"1f1b"`` (``v = 1``) or ``"interleaved_1f1b"``.
    m : int, optional
        Micro-batches of that schedule (default ``4 p``).
    cost : CostModel, optional
        Default: the roofline model of ``system``.
    units : {"op", "layer"}
        Cut between forward ops (default) or only between layers.
    weight_copies : float
        Bytes kept per weight byte (2: weights and gradients; 4 with Adam's moments).
    overhead_s : float
        Runtime overhead per action, passed to the :class:`StageCosts`.
    cuts : sequence of int, optional
        Evaluate this split (``S + 1`` unit indices from 0 to the number of units) instead of
        searching; a split over memory is priced anyway (``peak_memory_fraction`` > 1 says so).
    max_units : int or None
        Beyond this many units, runs of consecutive units merge into one (:data:`MAX_UNITS`; ``None``: never).
    fit_memory : bool
        When no split fits every rank's memory: raise (default), or return the fastest split with
        memory ignored, ``params["over_memory"]`` saying which rank overflows and by how much (what a
        panel shows for a model too big for the machine, instead of nothing).

    Raises
    ------
    CapacityError
        No split fits every rank's memory (names the rank and device of the fastest split that
        overflows, and by how much).
    UnsupportedOpError
        No split puts every op on a device that runs it.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> sp = split_stages(chain(8), toy_system(), devices=["gpu0", "cpu0"], p=2)
    >>> [len(x) for x in sp.stages], sp.steps[0].action
    ([7, 1], 'cut')
    >>> split_stages(chain(8), toy_system(), devices=["gpu0", "cpu0"], p=2, cuts=[0, 4, 8]).metrics["bottleneck_s"] > sp.metrics["bottleneck_s"]
    True
    """
    t0 = time.perf_counter()
    pb, sched = _problem(graph, system, devices, p, v, schedule, m, cost, units, weight_copies, max_units)
    over = None
    if cuts is not None:
        cuts = [int(x) for x in cuts]
        if len(cuts) != pb.S + 1 or cuts[0] != 0 or cuts[-1] != pb.n or any(b <= a for a, b in zip(cuts, cuts[1:])):
            raise HetschedError(f"cuts must be {pb.S + 1} increasing unit indices from 0 to {pb.n}, got {cuts}", field="cuts")
        cap, pb.cap = pb.cap, np.full_like(pb.cap, np.inf)  # the caller chose the split: price it even over memory
        best = pb.bottleneck(cuts)
        pb.cap = cap
        if not math.isfinite(best):
            raise UnsupportedOpError(f"the cuts {cuts} put an op on a device that cannot run it", field="cuts")
        states = 0
    else:
        best, cuts, states = _dp(pb)
        if not cuts:
            err = _no_fit(pb, devices)
            if fit_memory or not isinstance(err, CapacityError):
                raise err
            cap, pb.cap = pb.cap, np.full_like(pb.cap, np.inf)
            best, cuts, states = _dp(pb)
            pb.cap = cap
            over = str(err)
    solve_s = time.perf_counter() - t0
    return _build(pb, graph, system, list(devices), cuts, best, states, solve_s, cost, overhead_s, over)


def _no_fit(pb: _Problem, devices: Sequence[str]) -> HetschedError:
    """Why no split exists: an op no rank can run, else the fastest split's memory overflow."""
    u = pb.u
    for k in range(u.n):
        runs = [r for r in range(pb.p) if pb.pre[devices[r]]["unsupported"][k + 1] - pb.pre[devices[r]]["unsupported"][k] == 0]
        if not runs:
            return UnsupportedOpError(f"no rank's device runs every op of unit {u.names[k]!r} (ops {u.ops[k][:4]}...): "
                                      f"devices {sorted(set(devices))}; see the system's support table", op=u.ops[k][0], field="devices")
    # relax memory to find the fastest split, then say which rank it overflows
    cap = pb.cap
    pb.cap = np.full_like(cap, np.inf)
    _, cuts, _ = _dp(pb)
    pb.cap = cap
    if not cuts:
        return UnsupportedOpError("no contiguous split puts every op on a device that runs it (each rank's device runs only some op types)", field="devices")
    worst, ws = -math.inf, 0
    for s in range(pb.S):
        i, j = cuts[s], cuts[s + 1]
        mem = pb.u.stage_weight_bytes(i, j, pb.wpre) * pb.copies + pb.saved[i, j] * pb.inflight[s]
        if mem - cap[s] > worst:
            worst, ws = mem - cap[s], s
    r = int(pb.rank[ws])
    i, j = cuts[ws], cuts[ws + 1]
    mem = pb.u.stage_weight_bytes(i, j, pb.wpre) * pb.copies + pb.saved[i, j] * pb.inflight[ws]
    share = f" (its 1/{pb.v} share for one of {pb.v} chunks)" if pb.v > 1 else ""
    return CapacityError(
        f"no split of {u.graph_name!r} into {pb.S} stages fits memory: even the fastest puts {mem / 2**30:.3g} GiB "
        f"(weights x{pb.copies:g} + {pb.inflight[ws]} in-flight micro-batches of saved activations) on rank {r} "
        f"(device {pb.dev[ws]!r}, {cap[ws] / 2**30:.3g} GiB{share}); use more ranks, fewer micro-batches in flight or bigger devices",
        device=pb.dev[ws], field="memory_bytes", rank=r, need_bytes=float(mem), capacity_bytes=float(cap[ws]))


def _build(pb: _Problem, graph: OpGraph, system: System, devices: list[str], cuts: list[int], best: float, states: int,
           solve_s: float, cost: CostModel | None, overhead_s: float, over_memory: str | None = None) -> StageSplit:
    u, S = pb.u, pb.S
    c = resolve_cost(cost, graph, system)
    rows, steps = [], StepLog()
    F, Bk, W, act, held, send, gsend = (np.zeros(S) for _ in range(7))
    for s in range(S):
        i, j = cuts[s], cuts[s + 1]
        pre = pb.pre[pb.dev[s]]
        F[s] = pre["F"][j] - pre["F"][i]
        Bk[s] = pre["B"][j] - pre["B"][i]
        W[s] = min(pre["W"][j] - pre["W"][i], Bk[s])
        act[s] = u.cross_bytes[j] if s < S - 1 else 0.0
        held[s] = pb.saved[i, j]
        if s < S - 1:
            send[s] = c.transfer_s(float(act[s]), pb.dev[s], pb.dev[s + 1])
        if s > 0:
            gsend[s] = c.transfer_s(float(u.cross_bytes[i]), pb.dev[s], pb.dev[s - 1])
        wb = float(pb.u.stage_weight_bytes(i, j, pb.wpre))
        mem = wb * pb.copies + held[s] * pb.inflight[s]
        rows.append({"stage": s, "rank": int(pb.rank[s]), "device": pb.dev[s], "first": u.names[i], "last": u.names[j - 1],
                     "n_units": j - i, "f_s": F[s], "b_s": Bk[s], "i_s": Bk[s] - W[s], "w_s": W[s], "time_s": F[s] + Bk[s],
                     "activation_bytes": act[s], "send_s": send[s], "weight_bytes": wb, "saved_bytes": held[s],
                     "in_flight": int(pb.inflight[s]), "memory_bytes": mem, "capacity_bytes": pb.cap[s]})
        steps.add("cut", f"stage {s}", before=None, after=float(F[s] + Bk[s]), accepted=True,
                  reason=(f"stage {s} on rank {int(pb.rank[s])} ({pb.dev[s]}) takes units {i}..{j - 1} "
                          f"({u.names[i]} .. {u.names[j - 1]}): F + B = {F[s] + Bk[s]:.4g} s, "
                          f"sends {act[s] / 2**20:.3g} MiB in {send[s]:.3g} s; memory {mem / 2**30:.3g} of {pb.cap[s] / 2**30:.3g} GiB"),
                  data={"first_unit": i, "last_unit": j - 1, "rank": int(pb.rank[s]), "device": pb.dev[s]})
    per_stage = pd.DataFrame(rows)
    costs = StageCosts(f_s=F, b_s=Bk, i_s=Bk - W, w_s=W, activation_bytes=act, grad_bytes=np.r_[0.0, u.cross_bytes[cuts[1:-1]]] if S > 1 else np.zeros(1),
                       held_bytes=held, overhead_s=overhead_s, send_s=send, grad_send_s=gsend,
                       placement=tuple(int(r) for r in pb.rank),
                       meta={"graph": u.graph_name, "devices": list(devices), "cuts": list(cuts), "style": pb.style,
                             "stages": [u.names[cuts[s]:cuts[s + 1]] for s in range(S)],
                             # a calibrated cost's error range over the stages' ops: simulate states it
                             "error_range": range_factors(c, ((graph.op(o).op_type, pb.dev[s], c.compute_s(graph.op(o), pb.dev[s]))
                                                              for s in range(S) for k in range(cuts[s], cuts[s + 1])
                                                              for o in u.ops[k]))})
    # exact peak memory per rank: weights of its stages plus the saved activations in flight, in list order
    sched = pb.sched
    peak = np.zeros(pb.p)
    for r in range(pb.p):
        sl = sched.rank_slice(r)
        st, kd = sched.stage[sl], sched.kind[sl]
        delta = np.where(kd == 0, held[st], np.where((kd == 1) | (kd == 3), -held[st], 0.0))
        wsum = sum(pb.u.stage_weight_bytes(cuts[s], cuts[s + 1], pb.wpre) * pb.copies for s in range(S) if pb.rank[s] == r)
        peak[r] = wsum + (float(np.cumsum(delta).max()) if len(delta) else 0.0)
    capr = np.array([float(system.device(d).memory_bytes) for d in devices])
    busy = np.bincount(pb.rank, weights=F + Bk, minlength=pb.p)
    per_rank = pd.DataFrame({"rank": np.arange(pb.p), "device": devices, "busy_s": busy, "peak_memory_bytes": peak, "capacity_bytes": capr})
    times = F + Bk
    links = np.maximum(send, np.r_[gsend[1:], 0.0]) if S > 1 else np.zeros(1)
    metrics = {
        "bottleneck_s": float(best), "max_stage_s": float(times.max()), "max_link_s": float(links.max()),
        "balance": float(times.max() / times.mean()) if times.mean() > 0 else 1.0,
        "peak_memory_fraction": float((peak / capr).max()), "n_units": float(u.n), "ops_per_unit": float(u.ops_per_unit),
        "n_stages": float(S),
        "dp_states": float(states), "solve_s": solve_s,
    }
    tl = _one_microbatch_timeline(pb, F, Bk, send, gsend, act)
    return StageSplit(cuts=tuple(cuts), stages=[[o for k in range(cuts[s], cuts[s + 1]) for o in u.forward[k]] for s in range(S)],
                      costs=costs, per_stage=per_stage, per_rank=per_rank, units=u, metrics=metrics, timeline=tl, steps=steps,
                      params={"graph": u.graph_name, "system": system.name, "devices": list(devices), "p": pb.p, "v": pb.v,
                              "schedule": sched.name, "m": sched.m, "units": pb.units, "weight_copies": pb.copies,
                              **({"over_memory": over_memory} if over_memory else {})},
                      initial_state={})


def _one_microbatch_timeline(pb: _Problem, F, Bk, send, gsend, act) -> pd.DataFrame:
    """One micro-batch through the stages: forward down, backward up (what each stage costs, drawn)."""
    tb, t = TimelineBuilder(), 0.0
    S = pb.S
    for s in range(S):
        rank = int(pb.rank[s])
        tb.add(f"rank {rank}", "pipeline", f"{s}F0", "compute", t, t + F[s], op=f"{s}F", device=pb.dev[s], stage=s, microbatch=0)
        t += F[s]
        if s < S - 1 and pb.rank[s] != pb.rank[s + 1] and send[s] > 0:
            tb.add(f"p2p {rank}->{int(pb.rank[s + 1])}", "p2p", f"{s}F0", "transfer", t, t + send[s], stage=s, microbatch=0,
                   bytes=float(act[s]))
            t += send[s]
    for s in range(S - 1, -1, -1):
        rank = int(pb.rank[s])
        tb.add(f"rank {rank}", "pipeline", f"{s}B0", "compute", t, t + Bk[s], op=f"{s}B", device=pb.dev[s], stage=s, microbatch=0)
        t += Bk[s]
        if s > 0 and pb.rank[s] != pb.rank[s - 1] and gsend[s] > 0:
            tb.add(f"p2p {rank}->{int(pb.rank[s - 1])}", "p2p", f"{s}B0", "transfer", t, t + gsend[s], stage=s, microbatch=0)
            t += gsend[s]
    return tb.build()


def stage_costs(graph: OpGraph, system: System, *, devices: Sequence[str], p: int, v: int = 1, schedule: Any = None,
                m: int | None = None, cuts: Sequence[int] | None = None, cost: CostModel | None = None, units: str = "op",
                weight_copies: float = 2.0, overhead_s: float = 0.0) -> StageCosts:
    """Per-stage costs of ``graph`` split into ``p * v`` stages on ``devices`` (one per rank).

    With ``cuts`` (``S + 1`` unit indices, as :attr:`StageSplit.cuts`) the split is taken as given;
    without, the best split of :func:`split_stages`. The result carries ``F``, ``B``, ``I``, ``W``
    per stage priced on its rank's device, the activation and gradient bytes crossing each cut,
    their link times (the cost model's ``transfer_s``), the saved activations a rank holds per
    in-flight micro-batch, the placement they assume and, in ``meta``, the split.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> c = stage_costs(chain(8), toy_system(), devices=["gpu0", "cpu0"], p=2, cuts=[0, 4, 8])
    >>> c.meta["cuts"], c.placement
    ([0, 4, 8], (0, 1))
    """
    return split_stages(graph, system, devices=devices, p=p, v=v, schedule=schedule, m=m, cost=cost, units=units,
                        weight_copies=weight_copies, overhead_s=overhead_s, cuts=cuts).costs

def default_devices(system: System, p: int, graph: OpGraph | None = None) -> list[str]:
    """The device of each of ``p`` ranks: the system's own plan (``meta["pipeline_ranks"][p]``), else
    its devices other than the host in order, repeated when there are fewer than ``p``.

    With ``graph``, only devices that run every op type of the graph (what :func:`split_default`
    falls back to when no contiguous split exists on the plain answer, e.g. an FPGA that runs
    only convolutions among the ranks of a training graph), as long as some device does; the
    system's own plan is kept only if each of its devices runs them all.

    >>> from hetsched.io.resolve import resolve_system
    >>> default_devices(resolve_system("pipeline_a100_v100_u280"), 4)
    ['gpu0', 'gpu4', 'fpga0', 'gpu1']
    >>> default_devices(resolve_system("toy"), 3)
    ['gpu0', 'fpga0', 'gpu0']
    >>> from hetsched.io.resolve import resolve_graph
    >>> default_devices(resolve_system("toy"), 3, resolve_graph("resnet50_train_b32"))  # the FPGA has no backward ops
    ['gpu0', 'gpu0', 'gpu0']
    """
    types = None if graph is None else {graph.op(o).op_type for o in graph.ops}

    def runs_all(d: str) -> bool:
        return types is None or all(system.support.supports(d, t) for t in types)

    plan = (system.meta or {}).get("pipeline_ranks") or {}
    got = plan.get(p, plan.get(str(p)))
    pool = [d for d in system.compute_devices if d != system.host] or list(system.compute_devices)
    able = [d for d in pool if runs_all(d)] or [d for d in system.compute_devices if runs_all(d)]
    if got and (types is None or all(runs_all(str(d)) for d in got) or not able):
        return [str(d) for d in got]
    pool = able or pool
    return [pool[i % len(pool)] for i in range(p)]


def split_default(graph: OpGraph, system: System, *, devices: Sequence[str] | None = None, p: int, **kw: Any) -> StageSplit:
    """:func:`split_stages` over ``devices``, by default the machine's :func:`default_devices`.

    When the default ranks admit no contiguous split because a device among them cannot run some
    of the graph's ops (a documented fallback, not an error), the ranks go to the devices that run
    every op type instead, and ``params["devices_note"]`` says why in plain words. Given
    ``devices`` are never changed.

    >>> from hetsched.io.resolve import resolve_graph, resolve_system
    >>> s = split_default(resolve_graph("resnet50_train_b32"), resolve_system("toy"), p=2)
    >>> s.params["devices"], s.params["devices_note"][:28]
    (['gpu0', 'gpu0'], 'fpga0 cannot run every op of')
    """
    if devices is not None:
        return split_stages(graph, system, devices=list(devices), p=p, **kw)
    plain = default_devices(system, p)
    try:
        return split_stages(graph, system, devices=plain, p=p, **kw)
    except UnsupportedOpError:
        able = default_devices(system, p, graph)
        if able == plain:
            raise
        split = split_stages(graph, system, devices=able, p=p, **kw)
    left = sorted(set(plain) - set(able))
    types = sorted({graph.op(o).op_type for o in graph.ops})
    missing = {d: [t for t in types if not system.support.supports(d, t)] for d in left}
    why = "; ".join(f"{d} has no {', '.join(ts[:3])}{' ...' if len(ts) > 3 else ''}" for d, ts in missing.items())
    note = (f"{', '.join(left)} cannot run every op of {graph.name} ({why}), so no contiguous split over "
            f"{', '.join(plain)} exists; the ranks are on {', '.join(able)}")
    return replace(split, params={**split.params, "devices_note": note})


@dataclass(frozen=True)
class ModelRun:
    """A model split over a machine and its schedule simulated (:func:`simulate_model`)."""

    split: StageSplit
    result: Any  # PipelineResult


def simulate_model(graph: OpGraph | str | None = None, system: System | str | None = None, *, devices: Sequence[str] | None = None,
                   p: int = 4, v: int | None = None, m: int = 16, schedule: str = "1f1b", grouping: str | None = None,
                   comm: Any = None, cache: str | None = None, units: str = "op", weight_copies: float = 2.0,
                   overhead_s: float = 0.0, cost: CostModel | str | None = None, fit_memory: bool = True) -> ModelRun:
    """Split a model over a machine (:func:`split_stages`, for the schedule that will run it) and simulate.

    ``graph`` and ``system`` may be names (a bundled graph, a zoo model, a bundled system; default
    :data:`DEFAULT_MODEL`); ``devices`` defaults to :func:`default_devices`. ``comm`` gives
    ``lockstep`` / ``overhead_s`` only: link times come from the system. ``cost`` prices the stages
    and their sends (a model or a cost file; default the roofline); ``fit_memory=False`` splits a model too
    big for the machine anyway (see :func:`split_stages`).

    >>> run = simulate_model(p=4, m=8)
    >>> run.split.n_stages, run.result.schedule.name, run.result.metrics["makespan_s"] > 8 * run.split.metrics["max_stage_s"]
    (4, '1f1b', True)
    """
    from ..io.resolve import resolve_graph, resolve_system
    from .schedules import make_schedule
    from .simulate import simulate

    g = resolve_graph(DEFAULT_MODEL["graph"] if graph is None else graph) if not isinstance(graph, OpGraph) else graph
    s = resolve_system(DEFAULT_MODEL["system"] if system is None else system) if not isinstance(system, System) else system
    sched = make_schedule(schedule, p, v, m, **({"grouping": grouping} if grouping is not None else {}))
    split = split_default(g, s, devices=devices, p=p, v=sched.v, schedule=sched, cost=cost, units=units,
                          weight_copies=weight_copies, overhead_s=overhead_s, fit_memory=fit_memory)
    return ModelRun(split, simulate(sched, costs=split.costs, comm=comm, cache=cache))
