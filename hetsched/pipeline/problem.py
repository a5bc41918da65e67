"""One schedule-synthesis instance compiled to arrays, and the lower bound on its makespan.

A synthesis instance is ``p`` ranks, ``v`` stages per rank placed ``loop`` or ``v``, ``m``
micro-batches, the per-stage costs, and the link model. :class:`Problem` lists every action once
(``F``, and ``B`` or ``I`` + ``W``, per stage and micro-batch) and prices each of them with the
simulator's own pricing (:func:`~hetsched.pipeline.simulate.price_actions`), so that what a search
orders and what :func:`~hetsched.pipeline.simulate` reports are one model of time. An *order* is,
per rank, a list of action ids; :meth:`Problem.evaluate` times it with the simulator's list walk
(:func:`~hetsched.pipeline.deps.walk`).

Actions of one *class* (same stage, same kind) run in micro-batch order in every order this
package builds. This loses nothing: micro-batches are interchangeable, and relabelling the
``k``-th action of every class as micro-batch ``k`` keeps every dependency satisfied at the same
times (the ``k``-th forward of stage ``s`` starts after ``k`` forwards of stage ``s - 1`` have ended
and their messages crossed, so after the ``k``-th of them; the same for input gradients and
weight gradients) and the memory held at every instant (it counts actions, not labels). So the
best first-in-first-out order is a best order; the exhaustive search
(:func:`~hetsched.pipeline.exhaustive_synthesis`) does not assume it and the tests compare them.

:func:`lower_bound` is the bound every gap is measured against.

Examples
--------
>>> pb = Problem.build({"F": 1.0, "B": 2.0}, p=2, v=1, m=2, split_backward=False)
>>> pb.n, pb.kinds, lower_bound({"F": 1.0, "B": 2.0}, p=2, v=1, m=2, split_backward=False)
(8, ('F', 'B'), 9.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import CapacityError, ScheduleError
from .costs import P2P, StageCosts
from .deps import walk
from .ir import B, F, I, KINDS, W, Schedule, stage_to_rank_map
from .simulate import price_actions

__all__ = ["Problem", "lower_bound", "bound_terms", "resolve_placement", "PLACEMENTS"]

PLACEMENTS = ("loop", "v")
#: relative tolerance on times (makespans compare equal within it)
TOL = 1e-9


def resolve_placement(costs: StageCosts, p: int, v: int, placement: str | None) -> str:
    """The stage placement: the one the costs were priced for, else ``placement``, else ``"loop"``.

    >>> resolve_placement(StageCosts(placement=(0, 1, 1, 0)), 2, 2, None)
    'v'
    """
    if placement is not None and placement not in PLACEMENTS:
        raise ScheduleError(f"placement must be one of {PLACEMENTS}, got {placement!r}", field="placement")
    if costs.placement is None:
        return placement or "loop"
    got = [int(x) for x in costs.placement]
    if len(got) != p * v:
        raise ScheduleError(f"the costs were priced for {len(got)} stages, but p * v = {p} * {v} = {p * v}", field="costs")
    for style in PLACEMENTS:
        if stage_to_rank_map(p, v, style).tolist() == got:
            if placement is not None and placement != style:
                raise ScheduleError(f"the costs were priced for the {style!r} placement {got}, not {placement!r}", field="placement")
            return style
    raise ScheduleError(f"the costs were priced for stage -> rank {got}, which is neither the looped nor the V placement "
                        f"of p={p}, v={v}", field="costs")


def _check_int(name: str, val: Any) -> int:
    if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
        raise ScheduleError(f"{name} must be a positive integer, got {val!r}", field=name)
    return int(val)


@dataclass(frozen=True, eq=False)
class Problem:
    """Every action of a synthesis instance, once, with its price (see the module docstring).

    Action ``a`` (an id) is flat action ``a`` of :attr:`canonical`, a valid-looking list of every
    action (per rank: forwards by stage, then backwards, then weight gradients) that is only used
    to price them; ``dep[a]`` is the id producing its input (``-1``: none), ``dur[a]`` its time,
    ``delay[a]`` the transfer time before it when its input crosses ranks, ``mem[a]`` the bytes it
    allocates (``+`` for ``F``) or frees (``-`` for ``B`` or ``W``). ``classes[c]`` lists the ids
    of class ``c`` (one stage, one kind) by micro-batch; ``rank_classes[r]`` the classes of rank ``r``.
    """

    p: int
    v: int
    m: int
    placement: str
    split: bool
    costs: StageCosts
    comm: P2P
    canonical: Schedule
    rank: np.ndarray
    stage: np.ndarray
    kind: np.ndarray
    mb: np.ndarray
    dep: np.ndarray
    dur: np.ndarray
    delay: np.ndarray
    mem: np.ndarray
    cls: np.ndarray
    classes: tuple
    rank_classes: tuple
    cap: np.ndarray

    @property
    def n(self) -> int:
        return len(self.dur)

    @property
    def n_stages(self) -> int:
        return self.p * self.v

    @property
    def kinds(self) -> tuple[str, ...]:
        return ("F", "I", "W") if self.split else ("F", "B")

    @classmethod
    def build(cls, costs: Any, *, p: int, v: int, m: int, placement: str | None = None, split_backward: bool = True,
              comm: Any = None, memory_cap_bytes: Any = None) -> "Problem":
        """Compile an instance (checks its inputs; see :func:`~hetsched.pipeline.synthesize` for them).

        >>> pb = Problem.build({"F": 1.0, "B": 2.0}, p=2, v=2, m=1, placement="v")
        >>> pb.canonical.to_text()
        ['0F0 3F0 3I0 0I0 3W0 0W0', '1F0 2F0 2I0 1I0 2W0 1W0']
        """
        p, v, m = _check_int("p", p), _check_int("v", v), _check_int("m", m)
        cost = StageCosts.coerce(costs)
        link = P2P.coerce(comm)
        if link.lockstep:
            raise ScheduleError("schedule synthesis targets non-blocking p2p (isend/irecv, as torch's runtime runs): "
                                "lock-step exchanges are not supported", field="comm")
        style = resolve_placement(cost, p, v, placement)
        S = p * v
        c = cost.arrays(S, v)
        if ("send" in c or "grad_send" in c) and link.priced:
            raise ScheduleError("the costs carry link times priced from a system; do not also give comm latency/bandwidth", field="comm")
        where = stage_to_rank_map(p, v, style)
        split = bool(split_backward)
        bkind = I if split else B
        per = []
        for r in range(p):
            mine = sorted(np.flatnonzero(where == r).tolist())
            st, kd, mb = [], [], []
            for stage_list, k in ((mine, F), (mine[::-1], bkind)) + (((mine[::-1], W),) if split else ()):
                for s in stage_list:
                    st += [s] * m
                    kd += [k] * m
                    mb += list(range(m))
            per.append((st, kd, mb))
        canon = Schedule.from_arrays(p, v, m, "canonical", per, style=style)
        dep, dur, _src, dst, _nb, tt = price_actions(canon, c, link)
        delay = np.zeros(canon.n_actions)
        delay[dst] = tt
        st64 = canon.stage.astype(np.int64)
        held = c["held"][st64]
        kd = canon.kind
        mem = np.where(kd == F, held, np.where((kd == B) | (kd == W), -held, 0.0))
        K = 3 if split else 2
        slot = np.select([kd == F, kd == bkind, kd == W], [0, 1, 2])
        cl = st64 * K + slot
        classes = [np.flatnonzero(cl == k) for k in range(S * K)]
        # within a class the canonical list is already in micro-batch order
        rank = canon.rank
        rank_classes = tuple(tuple(k for k in range(S * K) if len(classes[k]) and rank[classes[k][0]] == r) for r in range(p))
        cap = _caps(memory_cap_bytes, p)
        pb = cls(p, v, m, style, split, cost, link, canon, rank, canon.stage.astype(np.int64), kd.astype(np.int64),
                 canon.microbatch.astype(np.int64), dep.astype(np.int64), dur, delay, mem, cl,
                 tuple(classes), rank_classes, cap)
        pb._check_cap()
        return pb

    def _check_cap(self) -> None:
        """A rank must hold one micro-batch of every stage it owns (the first micro-batch's forward
        reaches its last stage before any backward there can free anything)."""
        for r in range(self.p):
            need = float(sum(self.mem[self.classes[k][0]] for k in self.rank_classes[r] if self.kind[self.classes[k][0]] == F))
            if need > self.cap[r] * (1 + TOL) + 1e-9:
                raise CapacityError(
                    f"rank {r} cannot run any schedule within its memory cap of {self.cap[r]:.6g} B: one micro-batch through "
                    f"its {self.v} stage(s) holds {need:.6g} B of activations", field="memory_cap_bytes", rank=r,
                    need_bytes=need, capacity_bytes=float(self.cap[r]))

    # ---- orders ---------------------------------------------------------------------------------
    def schedule(self, orders: Sequence[Sequence[int]], name: str = "synthesized", meta: dict | None = None) -> Schedule:
        """The :class:`Schedule` of per-rank id lists."""
        per = []
        for o in orders:
            ids = np.asarray(o, np.int64)
            per.append((self.stage[ids], self.kind[ids], self.mb[ids]))
        return Schedule.from_arrays(self.p, self.v, self.m, name, per, style=self.placement, meta=meta)

    def orders_of(self, schedule: Schedule) -> list[list[int]]:
        """Per-rank id lists of a schedule with exactly this instance's actions (``ScheduleError`` otherwise)."""
        s = schedule
        if (s.p, s.v, s.m) != (self.p, self.v, self.m) or s.style != self.placement:
            raise ScheduleError(f"schedule {s.name!r} is p={s.p}, v={s.v}, m={s.m}, {s.style}; the instance is "
                                f"p={self.p}, v={self.v}, m={self.m}, {self.placement}", field="schedule")
        K = 3 if self.split else 2
        key = np.full(self.n_stages * 4 * self.m, -1, np.int64)
        key[(self.stage * 4 + self.kind) * self.m + self.mb] = np.arange(self.n)
        ids = key[(s.stage.astype(np.int64) * 4 + s.kind) * self.m + s.microbatch]
        if (ids < 0).any() or s.n_actions != self.n or len(np.unique(ids)) != self.n:
            want = "I and W" if K == 3 else "B"
            raise ScheduleError(f"schedule {s.name!r} does not hold exactly this instance's actions (F and {want} for every stage "
                                "and micro-batch)", field="schedule")
        return [ids[s.rank_slice(r)].tolist() for r in range(self.p)]

    def fifo(self, orders: Sequence[Sequence[int]]) -> list[list[int]]:
        """Relabel so that every class runs in micro-batch order (never slower: module docstring)."""
        out = []
        for o in orders:
            o = list(o)
            seen: dict[int, int] = {}
            new = []
            for a in o:
                k = int(self.cls[a])
                j = seen.get(k, 0)
                seen[k] = j + 1
                new.append(int(self.classes[k][j]))
            out.append(new)
        return out

    def peaks(self, orders: Sequence[Sequence[int]]) -> np.ndarray:
        """Per rank, the activation bytes held at the peak in list order (:func:`~hetsched.pipeline.peak_in_flight`'s)."""
        out = np.zeros(self.p)
        for r, o in enumerate(orders):
            if len(o):
                out[r] = max(0.0, float(np.cumsum(self.mem[np.asarray(o, np.int64)]).max()))
        return out

    def fits(self, orders: Sequence[Sequence[int]]) -> bool:
        """Whether every rank's peak is within its cap."""
        return bool((self.peaks(orders) <= self.cap * (1 + TOL) + 1e-9).all())

    def rank_fits(self, r: int, order: Sequence[int]) -> bool:
        """Whether rank ``r``'s peak under ``order`` is within its cap."""
        if not np.isfinite(self.cap[r]) or not len(order):
            return True
        return float(np.cumsum(self.mem[np.asarray(order, np.int64)]).max()) <= self.cap[r] * (1 + TOL) + 1e-9

    def evaluate(self, orders: Sequence[Sequence[int]]) -> tuple[float, np.ndarray, np.ndarray]:
        """``(makespan_s, start, end)`` of an order by the simulator's walk; start/end indexed by id.

        Raises the walk's ``deadlock`` :class:`~hetsched.errors.ScheduleError` when ranks would wait
        on each other forever.
        """
        s = self.schedule(orders)
        flat = np.concatenate([np.asarray(o, np.int64) for o in orders]) if self.p else np.zeros(0, np.int64)
        pos = np.empty(self.n, np.int64)
        pos[flat] = np.arange(len(flat))
        d = self.dep[flat]
        depf = np.where(d >= 0, pos[np.maximum(d, 0)], -1)
        st, en = walk(s, depf, self.dur[flat], self.delay[flat])
        start = np.empty(self.n)
        end = np.empty(self.n)
        start[flat] = st
        end[flat] = en
        return (float(en.max()) if len(en) else 0.0), start, end

    # ---- bound ingredients ------------------------------------------------------------------------
    def stage_arrays(self) -> dict[str, np.ndarray]:
        """Per stage: forward, backward (``B`` or ``I``) and ``W`` durations and the delays into them."""
        S = self.n_stages
        bk = I if self.split else B
        out = {k: np.zeros(S) for k in ("f", "b", "w", "fdelay", "bdelay")}
        for k in range(len(self.classes)):
            a = int(self.classes[k][0])
            s, kd = int(self.stage[a]), int(self.kind[a])
            if kd == F:
                out["f"][s], out["fdelay"][s] = self.dur[a], self.delay[a]
            elif kd == bk:
                out["b"][s], out["bdelay"][s] = self.dur[a], self.delay[a]
            else:
                out["w"][s] = self.dur[a]
        return out

    def tails(self) -> np.ndarray:
        """Per id, the longest path from its start to the end of the dependency DAG (no rank limits)."""
        n = self.n
        tail = self.dur.copy()
        kids: list[list[int]] = [[] for _ in range(n)]
        for a, d in enumerate(self.dep.tolist()):
            if d >= 0:
                kids[d].append(a)
        for a in self.topo()[::-1].tolist():
            if kids[a]:
                tail[a] = self.dur[a] + max(self.delay[c] + tail[c] for c in kids[a])
        return tail

    def topo(self) -> np.ndarray:
        """Ids in an order every dependency respects: forwards by stage, backwards down, then ``W``."""
        bk = I if self.split else B
        key = np.where(self.kind == F, self.stage, np.where(self.kind == bk, 2 * self.n_stages - self.stage, 3 * self.n_stages))
        return np.lexsort((self.mb, key))


def _caps(memory_cap_bytes: Any, p: int) -> np.ndarray:
    if memory_cap_bytes is None:
        return np.full(p, np.inf)
    a = np.asarray(memory_cap_bytes, float)
    if a.ndim == 0:
        a = np.full(p, float(a))
    if a.shape != (p,):
        raise ScheduleError(f"memory_cap_bytes needs a number or one per rank ({p}), got shape {a.shape}", field="memory_cap_bytes")
    if np.isnan(a).any() or (a < 0).any():
        raise ScheduleError("memory_cap_bytes must be non-negative", field="memory_cap_bytes")
    return a


def bound_terms(costs: Any = None, *, p: int, v: int = 1, m: int, placement: str | None = None, split_backward: bool = True,
                comm: Any = None, problem: Problem | None = None) -> pd.DataFrame:
    """Each rank's share of :func:`lower_bound`: ``rank, head_s, busy_s, tail_s, w_s, bound_s``.

    For rank ``r`` with lowest stage ``s`` (its first action is ``F(s, 0)`` and its last backward
    the backward of ``s``: a backward of a lower stage of the same rank would follow it):

    * ``head_s``: the forward chain from stage 0 to ``s`` (forwards of stages ``< s`` and the
      transfers between ranks), before which the rank can start nothing;
    * ``busy_s``: every action the rank runs, for every micro-batch;
    * ``tail_s``: the backward chain from ``s`` down to stage 0 (and stage 0's weight gradient)
      that must follow the rank's last backward;
    * ``w_s``: the weight-gradient time the rank may run during that tail (its ``W``, none
      without a split backward).

    ``bound_s = head_s + busy_s + max(0, tail_s - w_s)``: if ``X`` seconds of weight gradients
    run after the last backward ends at ``t``, then ``t >= head + busy - X`` and the makespan is at
    least ``t + max(X, tail)``; the least over ``0 <= X <= w_s`` is the bound.

    >>> bound_terms({"F": 1.0, "B": 2.0}, p=2, m=4, split_backward=False)[["rank", "head_s", "busy_s", "tail_s", "bound_s"]].values.tolist()
    [[0.0, 0.0, 12.0, 0.0, 12.0], [1.0, 1.0, 12.0, 2.0, 15.0]]
    """
    pb = problem if problem is not None else Problem.build(costs, p=p, v=v, m=m, placement=placement,
                                                           split_backward=split_backward, comm=comm)
    a = pb.stage_arrays()
    S = pb.n_stages
    head = np.concatenate([[0.0], np.cumsum(a["f"][:-1] + a["fdelay"][1:])]) if S else np.zeros(0)
    # tail after the backward of stage s ends: backwards of stages < s and the transfers into them
    back = np.concatenate([[0.0], np.cumsum(a["bdelay"][:-1] + a["b"][:-1])])
    where = stage_to_rank_map(pb.p, pb.v, pb.placement)
    rows = []
    for r in range(pb.p):
        s = int(np.flatnonzero(where == r).min())
        busy = float(pb.dur[pb.rank == r].sum())
        tail = float(back[s] + (a["w"][0] if pb.split and s > 0 else 0.0))
        wsum = float(pb.dur[(pb.rank == r) & (pb.kind == W)].sum())
        rows.append((r, float(head[s]), busy, tail, wsum, float(head[s]) + busy + max(0.0, tail - wsum)))
    return pd.DataFrame(rows, columns=["rank", "head_s", "busy_s", "tail_s", "w_s", "bound_s"])


def lower_bound(costs: Any = None, *, p: int, v: int = 1, m: int, placement: str | None = None, split_backward: bool = True,
                comm: Any = None, problem: Problem | None = None) -> float:
    """A lower bound on the makespan of every schedule of ``(p, v, m)`` on these costs (seconds).

    The larger of the busiest rank's bound (its busy time plus the fill before it can start and
    the drain after its last backward that it cannot cover with weight gradients:
    :func:`bound_terms`) and one micro-batch's critical path (its forwards down every stage, its
    backwards back up, the transfers between ranks, stage 0's weight gradient). Memory caps are
    ignored, so the bound holds under any cap. For 1F1B-like costs it is tight: ``(m + p - 1)
    (tF + tB)`` without a split backward, ``m (tF + tI + tW) + (p - 1) tF`` with one when
    ``(p - 1) tI + tW <= m tW`` (ZB-H2's makespan, Qi et al., ICLR 2024).

    >>> lower_bound({"F": 1.0, "B": 2.0}, p=4, m=8, split_backward=False)     # (m + p - 1)(tF + tB)
    33.0
    >>> lower_bound({"F": 1.0, "I": 1.0, "W": 1.0}, p=4, m=8)                  # m (tF + tI + tW) + (p - 1) tF
    27.0
    """
    pb = problem if problem is not None else Problem.build(costs, p=p, v=v, m=m, placement=placement,
                                                           split_backward=split_backward, comm=comm)
    terms = bound_terms(problem=pb, p=pb.p, v=pb.v, m=pb.m)
    a = pb.stage_arrays()
    S = pb.n_stages
    chain = float(a["f"].sum() + a["fdelay"].sum() + a["b"].sum() + a["bdelay"].sum() + (a["w"][0] if pb.split else 0.0))
    return max(float(terms["bound_s"].max()) if len(terms) else 0.0, chain if S else 0.0)
