"""Simulate a pipeline schedule: timeline, makespan, bubbles, in-flight activations, cache depth.

Model
-----
Each rank runs its action list in order, one action at a time. An action starts when the rank is
free and its input is there: ``F(s, j)`` needs ``F(s-1, j)``'s output, ``B``/``I`` of ``(s, j)`` the
input gradient of stage ``s+1`` (the last stage: its own forward), ``W`` its ``I``. Crossing ranks
costs ``latency_s + bytes / bandwidth_Bps`` (:class:`P2P`); ``bytes`` is the stage's activation (or
gradient) size from :class:`StageCosts`.

Point-to-point modes:

* ``lockstep=False`` (default): sends are non-blocking and the receiver has a buffer (what torch
  and Megatron do with ``isend``/``irecv``); a transfer starts when its producer ends.
* ``lockstep=True`` (PaddlePaddle's ring exchange): a transfer is a rendezvous; it starts only
  when the receiver has reached the action that consumes it. With ``cache=None`` the sender blocks
  until then: plain 1F1B survives this (slower), interleaved schedules deadlock, which is why
  Paddle insists on its cache. ``cache="sender"`` is the patent's design
  (``../shared/seeds/001_8da0d43036ed1fd9.txt``): the output waits in the sender's cache queue and
  the sender goes on; ``cache="receiver"`` is Megatron's receive buffers (the transfer starts at
  once and waits at the receiver).

Why a list simulation and not :class:`hetsched.des.Simulator`: every action has at most one input
and a fixed place in its rank's list, so start times are a longest-path over a DAG that one walk
per rank computes exactly, with no event queue: about a million actions a second in pure Python,
where a heap of events costs several times that. The walk is time-order independent, hence
deterministic; it doubles as the deadlock check of :func:`~hetsched.pipeline.validate`.

Transfers on one link may be in flight together (latency is pipelined); overlapping ones are drawn
on extra lanes (``p2p 0->1 #2``) so the timeline stays exclusive per lane.

Send/recv: each message is one ``transfer`` row on its link lane (``p2p src->dst``), joined to the
sending and the receiving compute rows by a shared ``flow`` id (arrows in Perfetto), rather than a
``send`` row on the sender's lane and a ``recv`` row on the receiver's: the shared timeline format
has no such kinds, and a non-blocking send overlaps the sender's next compute, which would break
the one-row-at-a-time rule that :func:`hetsched.check_timeline` enforces on rank lanes.

Examples
--------
>>> from hetsched.pipeline import one_f_one_b
>>> r = simulate(one_f_one_b(4, 8), costs=StageCosts(f_s=1.0, b_s=2.0))
>>> r.metrics["makespan_s"], round(r.metrics["bubble_fraction"], 4)  # (m + p - 1)(tF + tB), (p-1)/m
(33.0, 0.375)
"""

from __future__ import annotations

import math
from collections.abc import Sequence as _SeqABC
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..errors import ScheduleError
from ..results import Result, Step
from ..timeline import make_timeline
from .ir import B, F, I, KINDS, W, Schedule
from .validate import _static_checks, _deadlock_error, dependencies

__all__ = ["StageCosts", "P2P", "PipelineResult", "simulate", "timeline_deps", "CACHE_DESIGNS"]

CACHE_DESIGNS = (None, "sender", "receiver")
#: Above this many actions the timeline carries no ``flow`` ids (they cost a string per row).
FLOW_LIMIT = 100_000


def _per_stage(x: Any, S: int, name: str, v: int | None = None) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim == 0:
        a = np.full(S, float(a))
    elif v is not None and a.shape == (v,) and S != v:
        a = np.repeat(a, S // v)  # one value per chunk: stage c*p + r gets chunk c's
    if a.shape != (S,):
        raise ScheduleError(f"cost {name!r} needs a scalar, one value per global stage ({S}) or one per chunk ({v}), got shape {a.shape}", field=name)
    if not np.all(np.isfinite(a)) or (a < 0).any():
        raise ScheduleError(f"cost {name!r} must be finite and non-negative", field=name)
    return a


@dataclass(frozen=True)
class StageCosts:
    """Per-stage compute times (scalar, or one value per global stage) and tensor sizes.

    Attributes
    ----------
    f_s, b_s : float or sequence
        Forward and full-backward times (seconds): a scalar, one value per global stage, or one
        per chunk (length ``v``: every rank's chunk ``c`` costs the same).
    i_s, w_s : float or sequence, optional
        Input- and weight-gradient times for split backwards; default ``b_s / 2`` each.
    activation_bytes : float or sequence
        Output activation of a stage for one micro-batch: what a forward sends, and what a rank
        holds per in-flight micro-batch per chunk.
    grad_bytes : float or sequence, optional
        Input gradient a backward sends (default: ``activation_bytes``).

    >>> StageCosts(f_s=1, b_s=2).arrays(2)["I"].tolist()
    [1.0, 1.0]
    """

    f_s: Any = 1.0
    b_s: Any = 2.0
    i_s: Any = None
    w_s: Any = None
    activation_bytes: Any = 0.0
    grad_bytes: Any = None

    def arrays(self, S: int, v: int | None = None) -> dict[str, np.ndarray]:
        """Per-global-stage arrays (``S`` stages; a length-``v`` input is one value per chunk).

        >>> StageCosts(f_s=[1, 2]).arrays(4, v=2)["F"].tolist()   # chunk c -> stages c*p + r
        [1.0, 1.0, 2.0, 2.0]
        """
        b = _per_stage(self.b_s, S, "b_s", v)
        i = b / 2 if self.i_s is None else _per_stage(self.i_s, S, "i_s", v)
        w = b - i if self.w_s is None else _per_stage(self.w_s, S, "w_s", v)
        act = _per_stage(self.activation_bytes, S, "activation_bytes", v)
        grad = act if self.grad_bytes is None else _per_stage(self.grad_bytes, S, "grad_bytes", v)
        return {"F": _per_stage(self.f_s, S, "f_s", v), "B": b, "I": i, "W": np.maximum(w, 0.0), "act": act, "grad": grad}

    @classmethod
    def coerce(cls, costs: Any) -> "StageCosts":
        """``None`` (defaults), a ``StageCosts``, or a mapping (``F``/``B``/``I``/``W`` alias the ``_s`` fields).

        >>> StageCosts.coerce({"F": 1, "B": 3}).b_s
        3
        """
        if costs is None:
            return cls()
        if isinstance(costs, cls):
            return costs
        if isinstance(costs, Mapping):
            alias = {"F": "f_s", "B": "b_s", "I": "i_s", "W": "w_s"}
            kw = {alias.get(k, k): v for k, v in costs.items()}
            unknown = set(kw) - {"f_s", "b_s", "i_s", "w_s", "activation_bytes", "grad_bytes"}
            if unknown:
                raise ScheduleError(f"unknown cost field(s) {sorted(unknown)}", field="costs")
            return cls(**kw)
        raise ScheduleError(f"costs must be StageCosts or a mapping, got {type(costs).__name__}", field="costs")


@dataclass(frozen=True)
class P2P:
    """Point-to-point link model between ranks (one model for every pair).

    >>> P2P(latency_s=1e-5, bandwidth_Bps=1e9).time_s(1e6)
    0.00101
    """

    latency_s: float = 0.0
    bandwidth_Bps: float = math.inf
    lockstep: bool = False

    def __post_init__(self) -> None:
        if not self.latency_s >= 0 or not self.bandwidth_Bps > 0:
            raise ScheduleError("P2P needs latency_s >= 0 and bandwidth_Bps > 0", field="comm")

    def time_s(self, nbytes: Any) -> Any:
        """Transfer time of ``nbytes`` (scalar or array): ``latency_s + nbytes / bandwidth_Bps``.

        >>> P2P(latency_s=1.0, bandwidth_Bps=2.0).time_s([0, 4]).tolist()
        [1.0, 3.0]
        """
        return self.latency_s + np.asarray(nbytes, float) / self.bandwidth_Bps if np.ndim(nbytes) else self.latency_s + float(nbytes) / self.bandwidth_Bps

    @classmethod
    def coerce(cls, comm: Any) -> "P2P":
        """``None`` (free, non-blocking), a ``P2P``, or a mapping of its fields.

        >>> P2P.coerce({"latency_s": 2e-6}).latency_s
        2e-06
        """
        if comm is None:
            return cls()
        if isinstance(comm, cls):
            return comm
        if isinstance(comm, Mapping):
            unknown = sorted(set(comm) - {"latency_s", "bandwidth_Bps", "lockstep"})
            if unknown:
                raise ScheduleError(f"unknown comm field(s) {unknown}; use latency_s, bandwidth_Bps, lockstep", field="comm")
            return cls(**comm)
        raise ScheduleError(f"comm must be P2P or a mapping, got {type(comm).__name__}", field="comm")


def _walk(s: Schedule, dep: np.ndarray, dur: np.ndarray, cdelay: np.ndarray, *, rendezvous: np.ndarray | None = None, blk: np.ndarray | None = None, csend: np.ndarray | None = None):
    """Start/end of every action and the start of its incoming transfer; raises on deadlock.

    ``rendezvous`` (bool per action): that action's cross-rank input transfer starts no earlier
    than the receiver is free (lock-step).
    ``blk[i] >= 0``: action ``i`` (the one after a send) also waits for the receiver to reach the
    consumer (``blk`` = the consumer's predecessor) plus the send time ``csend[i]`` (sender blocks).
    """
    if rendezvous is None and blk is None:
        return _walk_plain(s, dep, dur, cdelay)
    n = s.n_actions
    depl = dep.tolist()
    durl = dur.tolist()
    crossl = rendezvous.tolist() if rendezvous is not None else None
    cl = cdelay.tolist()
    blkl = blk.tolist() if blk is not None else None
    csl = csend.tolist() if csend is not None else None
    fin = [-1.0] * n
    start = [0.0] * n
    xs = [0.0] * n
    # waiter[i]: the rank blocked until action i ends (a rank is woken only when it can progress,
    # so the walk costs one visit per block, not one sweep over all ranks per step)
    waiter = [-1] * n
    waiter2 = [-1] * n if blkl is not None else None
    offs = s.offsets.tolist()
    ptr = offs[:-1]
    ends = offs[1:]
    free = [0.0] * s.p
    waits_on = [-1] * s.p
    stack = [r for r in range(s.p - 1, -1, -1) if ptr[r] < ends[r]]
    while stack:
        r = stack.pop()
        i = ptr[r]
        e = ends[r]
        t = free[r]
        while i < e:
            d = depl[i]
            ready = 0.0
            if d >= 0:
                fd = fin[d]
                if fd < 0.0:
                    waiter[d] = r
                    waits_on[r] = d
                    break
                c = cl[i]
                x = t if (crossl is not None and crossl[i] and fd < t) else fd
                ready = x + c
                xs[i] = x
            if blkl is not None:
                b = blkl[i]
                if b >= -1:
                    fb = fin[b] if b >= 0 else 0.0
                    if fb < 0.0:
                        waiter2[b] = r
                        waits_on[r] = b
                        break
                    # the previous action's output leaves only when its receiver is ready
                    u = (fb if fb > t else t) + csl[i]
                    if u > t:
                        t = u
            st = t if t > ready else ready
            start[i] = st
            t = st + durl[i]
            fin[i] = t
            w = waiter[i]
            if w >= 0:
                stack.append(w)
            if waiter2 is not None and waiter2[i] >= 0:
                stack.append(waiter2[i])
            i += 1
        ptr[r] = i
        free[r] = t
    if any(ptr[r] < ends[r] for r in range(s.p)):
        raise _deadlock_error(s, ptr, waits_on, lockstep=blkl is not None)
    return np.asarray(start), np.asarray(fin), np.asarray(xs)


def _walk_plain(s: Schedule, dep: np.ndarray, dur: np.ndarray, cdelay: np.ndarray):
    """:func:`_walk` without lock-step options: the hot loop of validation and simulation."""
    n = s.n_actions
    depl = dep.tolist()
    durl = dur.tolist()
    cl = cdelay.tolist()
    fin = [-1.0] * n
    start = [0.0] * n
    waiter = [-1] * n
    waits_on = [-1] * s.p
    offs = s.offsets.tolist()
    ptr = offs[:-1]
    ends = offs[1:]
    free = [0.0] * s.p
    stack = [r for r in range(s.p - 1, -1, -1) if ptr[r] < ends[r]]
    pop, push = stack.pop, stack.append
    while stack:
        r = pop()
        i = ptr[r]
        e = ends[r]
        t = free[r]
        while i < e:
            d = depl[i]
            if d >= 0:
                fd = fin[d]
                if fd < 0.0:
                    waiter[d] = r
                    waits_on[r] = d
                    break
                fd += cl[i]
                if fd > t:
                    t = fd
            start[i] = t
            t += durl[i]
            fin[i] = t
            w = waiter[i]
            if w >= 0:
                push(w)
            i += 1
        ptr[r] = i
        free[r] = t
    if any(ptr[r] < ends[r] for r in range(s.p)):
        raise _deadlock_error(s, ptr, waits_on)
    fin_a = np.asarray(fin)
    # without lock-step a transfer leaves when its producer ends
    xs = np.where(dep >= 0, fin_a[np.maximum(dep, 0)], 0.0)
    return np.asarray(start), fin_a, xs


def timeline_deps(schedule: Schedule) -> list[tuple[str, str]]:
    """``deps`` pairs on the timeline ``op`` column (``"2F"``...) for :func:`hetsched.check_timeline`.

    >>> timeline_deps(Schedule.from_text(["0F0 0B0", "1F0 1B0"]))
    [('0F', '1F'), ('1F', '1B'), ('1B', '0B'), ('0F', '0B')]
    """
    S = schedule.n_stages
    split = bool(np.isin(schedule.kind, [I, W]).any())
    g = "I" if split else "B"
    pairs = [(f"{s}F", f"{s + 1}F") for s in range(S - 1)]
    pairs.append((f"{S - 1}F", f"{S - 1}{g}"))
    pairs += [(f"{s + 1}{g}", f"{s}{g}") for s in range(S - 1)]
    pairs += [(f"{s}F", f"{s}{g}") for s in range(S - 1)]
    if split:
        pairs += [(f"{s}I", f"{s}W") for s in range(S)]
    return pairs


class _LazySteps(_SeqABC):
    """``steps`` built on demand: one :class:`Step` per action start, in time order."""

    def __init__(self, res: "PipelineResult") -> None:
        self._r = res

    def __len__(self) -> int:
        return len(self._r._order)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        r = self._r
        i = int(r._order[k])
        s = r.schedule
        a = f"{s.stage[i]}{KINDS[s.kind[i]]}{s.microbatch[i]}"
        rank = int(r._rank[i])
        st, en = float(r.start_s[i]), float(r.end_s[i])
        prev_end = float(r.end_s[i - 1]) if i > s.offsets[rank] else 0.0
        d = int(r._dep[i])
        if st > prev_end + 1e-12 and d >= 0:
            why = f"rank {rank} idle {st - prev_end:.4g} s waiting for {s.stage[d]}{KINDS[s.kind[d]]}{s.microbatch[d]}"
        else:
            why = f"rank {rank} runs it as soon as its previous action ends"
        return Step(k, "start", a, before=st, after=en, accepted=True, reason=why, data={"rank": rank, "start_s": st, "end_s": en})


@dataclass(frozen=True, kw_only=True, eq=False)
class PipelineResult(Result):
    """Outcome of :func:`simulate`.

    Attributes
    ----------
    schedule : Schedule
        What was simulated.
    start_s, end_s : ndarray
        Start and end of every flat action (index as in ``schedule.stage``...).
    per_rank : DataFrame
        ``rank, busy_s, idle_s, peak_activations_chunks, peak_activation_bytes, peak_cache_depth``.
    metrics : dict
        ``makespan_s``, ``bubble_fraction`` (idle / busy, Narayanan et al.'s definition),
        ``idle_fraction`` (idle / (p * makespan)), ``peak_activations_chunks`` and
        ``peak_activation_bytes`` (worst rank), ``peak_cache_depth``, ``n_actions``,
        ``n_transfers``, ``bytes_moved``.
    steps : sequence of Step
        One per action start, in time order (built lazily); :meth:`replay` rebuilds what each rank
        runs, holds and has queued at that instant.
    """

    schedule: Schedule
    start_s: np.ndarray
    end_s: np.ndarray
    per_rank: pd.DataFrame
    _order: np.ndarray = field(repr=False)
    _rank: np.ndarray = field(repr=False)
    _dep: np.ndarray = field(repr=False)
    _queue: tuple = field(repr=False)  # (holder rank, t0, t1, item index) of cached items

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "initial_state", MappingProxyType(dict(self.initial_state)))
        if self.steps == ():
            object.__setattr__(self, "steps", _LazySteps(self))

    def replay(self, k: int) -> dict[str, Any]:
        """State at the start of the ``k``-th action (``k = -1``: before anything runs).

        Keys: ``time_s``, ``running`` (rank -> action text), ``done`` (actions finished),
        ``in_flight`` (rank -> activations held, chunk units), ``queues`` (rank -> cached items,
        oldest first, under the simulated cache design).

        >>> from hetsched.pipeline import one_f_one_b
        >>> r = simulate(one_f_one_b(2, 2), costs={"F": 1, "B": 1})
        >>> st = r.replay(2)
        >>> st["time_s"], st["running"], st["in_flight"]
        (1.0, {0: '0F1', 1: '1F0'}, {0: 2, 1: 1})
        """
        n = len(self._order)
        if not -1 <= k < n:
            raise IndexError(f"step {k} is outside -1..{n - 1}")
        s = self.schedule
        t = -math.inf if k < 0 else float(self.start_s[self._order[k]])
        txt = lambda i: f"{s.stage[i]}{KINDS[s.kind[i]]}{s.microbatch[i]}"  # noqa: E731
        started = np.zeros(n, bool) if k < 0 else (self.start_s <= t)
        if k >= 0:
            started &= np.isin(np.arange(n), self._order[: k + 1]) | (self.start_s < t)
        running = {int(self._rank[i]): txt(i) for i in np.flatnonzero(started & (self.end_s > t))}
        done = int(np.count_nonzero(started & (self.end_s <= t)))
        kd = s.kind
        rel = (kd == W) | ((kd == B))
        f_started = started & (kd == F)
        held = np.bincount(self._rank[f_started], minlength=s.p) - np.bincount(self._rank[started & rel & (self.end_s <= t)], minlength=s.p)
        holder, t0, t1, item = self._queue
        inq = (t0 <= t) & (t < t1)
        queues: dict[int, list[str]] = {r: [] for r in range(s.p)}
        for j in np.flatnonzero(inq)[np.argsort(t0[inq], kind="stable")]:
            queues[int(holder[j])].append(txt(int(item[j])))
        return {"time_s": t if k >= 0 else 0.0, "running": running, "done": done, "in_flight": {r: int(x) for r, x in enumerate(held)}, "queues": queues}

    def __repr__(self) -> str:
        return f"PipelineResult({self.schedule.name}, p={self.schedule.p}, v={self.schedule.v}, m={self.schedule.m}; makespan_s={self.metrics['makespan_s']:.4g}, bubble_fraction={self.metrics['bubble_fraction']:.4g})"


def _peaks_per_rank(rank: np.ndarray, t: np.ndarray, deltas: list[np.ndarray], p: int) -> list[np.ndarray]:
    """Peak of running sums of each ``delta`` per rank; callers list decrements first so that, the
    sort being stable, a release at the same instant as an allocation counts first."""
    if len(t) == 0:
        return [np.zeros(p) for _ in deltas]
    o = np.lexsort((t, rank))
    rk = rank[o]
    first = np.searchsorted(rk, np.arange(p))
    counts = np.diff(np.append(first, len(rk)))
    outs = []
    for delta in deltas:
        cs = np.cumsum(delta[o])
        base = np.where(first > 0, cs[np.maximum(first - 1, 0)], 0.0)
        level = cs - np.repeat(base, counts)
        out = np.full(p, -np.inf)
        np.maximum.at(out, rk, level)
        outs.append(np.maximum(out, 0.0))
    return outs


def simulate(schedule: Schedule, *, costs: StageCosts | Mapping | None = None, comm: P2P | Mapping | None = None, cache: str | None = None, timeline: bool = True) -> PipelineResult:
    """Simulate ``schedule`` and return a :class:`PipelineResult`.

    Parameters
    ----------
    schedule : Schedule
        Any schedule (it is validated first; a bad one raises ``ScheduleError`` with the grid).
    costs : StageCosts or mapping, optional
        Per-stage times and sizes (``{"F": 1, "B": 2}`` works); default ``tF = 1, tB = 2``.
    comm : P2P or mapping, optional
        Link latency/bandwidth and ``lockstep``; default free, non-blocking.
    cache : {None, "sender", "receiver"}
        With ``lockstep``: where early outputs wait (see the module docstring). Also chooses which
        queue ``peak_cache_depth`` and :meth:`PipelineResult.replay` report (``None``: receiver).
    timeline : bool
        Build the timeline frame (rows: compute, transfer, bubble); ``False`` saves time on huge runs.

    Raises
    ------
    ScheduleError
        Invalid schedule, bad costs, or a deadlock (including one caused by lock-step p2p).

    >>> from hetsched.pipeline import interleaved_1f1b
    >>> r = simulate(interleaved_1f1b(4, 2, 8), costs={"F": 1, "B": 1})
    >>> r.metrics["makespan_s"] == (2 * 8 + 4 - 1) * 2
    True
    """
    if cache not in CACHE_DESIGNS:
        raise ScheduleError(f"cache must be one of {CACHE_DESIGNS}, got {cache!r}", field="cache")
    c = StageCosts.coerce(costs).arrays(schedule.n_stages, schedule.v)
    link = P2P.coerce(comm)
    s = schedule
    if not s.meta.get("_validated"):
        _static_checks(s)
    dep = s.meta.get("_dep")
    if dep is None:
        dep, _ = dependencies(s)
    n = s.n_actions
    st64 = s.stage.astype(np.int64)
    kd = s.kind
    rank = s.rank
    dur = np.select([kd == F, kd == B, kd == I, kd == W], [c["F"][st64], c["B"][st64], c["I"][st64], c["W"][st64]])
    has = dep >= 0
    cross = np.zeros(n, bool)
    cross[has] = rank[dep[has]] != rank[has]
    # bytes carried into each action: activation of the producing stage for F, gradient for B/I
    nbytes = np.zeros(n)
    dsel = np.flatnonzero(cross)
    prod_stage = st64[dep[dsel]]
    nbytes[dsel] = np.where(kd[dsel] == F, c["act"][prod_stage], c["grad"][prod_stage])
    cdelay = np.where(cross, link.latency_s + nbytes / link.bandwidth_Bps, 0.0)
    blk = csend = None
    if link.lockstep and cache is None:
        # the action after a send waits for the send's rendezvous (the sender blocks)
        cons = np.full(n, -1, np.int64)
        cons[dep[dsel]] = dsel
        blk = np.full(n, -2, np.int64)
        csend = np.zeros(n)
        first_of_rank = np.zeros(n, bool)
        first_of_rank[s.offsets[:-1][np.diff(s.offsets) > 0]] = True
        x = np.flatnonzero(cons >= 0)
        nxt = x + 1
        ok = nxt < n
        x, nxt = x[ok], nxt[ok]
        ok = ~first_of_rank[nxt]  # the next action is on the same rank
        x, nxt = x[ok], nxt[ok]
        y = cons[x]
        blk[nxt] = np.where(first_of_rank[y], -1, y - 1)
        csend[nxt] = cdelay[y]
    rendezvous = cross if (link.lockstep and cache != "receiver") else None
    start, end, xs = _walk(s, dep, dur, cdelay, rendezvous=rendezvous, blk=blk, csend=csend)
    xe = xs + cdelay
    makespan = float(end.max()) if n else 0.0
    busy = np.bincount(rank, weights=dur, minlength=s.p)
    idle = makespan - busy

    # in-flight activations: +1 at F start, -1 when B (or W) ends (releases listed first)
    rel = (kd == B) | (kd == W)
    fi = np.flatnonzero(kd == F)
    ri = np.flatnonzero(rel)
    ev_rank = np.concatenate([rank[ri], rank[fi]])
    ev_t = np.concatenate([end[ri], start[fi]])
    actb = c["act"][st64]
    peak_chunks, peak_bytes = _peaks_per_rank(ev_rank, ev_t, [np.concatenate([-np.ones(len(ri)), np.ones(len(fi))]), np.concatenate([-actb[ri], actb[fi]])], s.p)

    # cached items: sender design holds [producer end, transfer start) at the sender,
    # receiver design [transfer end, consumer start) at the receiver
    if cache == "sender":
        holder, t0, t1 = rank[dep[dsel]], end[dep[dsel]], xs[dsel]
    else:
        holder, t0, t1 = rank[dsel], xe[dsel], start[dsel]
    waits = t1 > t0 + 1e-12 * max(1.0, makespan)
    qh, q0, q1, qi = holder[waits], t0[waits], t1[waits], dep[dsel][waits]
    (peak_cache,) = _peaks_per_rank(np.concatenate([qh, qh]), np.concatenate([q1, q0]), [np.concatenate([-np.ones(len(qh)), np.ones(len(qh))])], s.p)

    per_rank = pd.DataFrame({"rank": np.arange(s.p), "busy_s": busy, "idle_s": idle, "peak_activations_chunks": peak_chunks.astype(int),
                             "peak_activation_bytes": peak_bytes, "peak_cache_depth": peak_cache.astype(int)})
    metrics = {
        "makespan_s": makespan,
        "bubble_fraction": float(idle.sum() / busy.sum()) if busy.sum() > 0 else 0.0,
        "idle_fraction": float(idle.sum() / (s.p * makespan)) if makespan > 0 else 0.0,
        "peak_activations_chunks": float(peak_chunks.max()) if s.p else 0.0,
        "peak_activation_bytes": float(peak_bytes.max()) if s.p else 0.0,
        "peak_cache_depth": float(peak_cache.max()) if s.p else 0.0,
        "n_actions": float(n),
        "n_transfers": float(len(dsel)),
        "bytes_moved": float(nbytes.sum()),
    }
    order = np.lexsort((rank, start))
    tl = _timeline(s, start, end, rank, dep, dsel, xs, xe, nbytes, makespan) if timeline else make_timeline([])
    return PipelineResult(
        schedule=s,
        start_s=start,
        end_s=end,
        per_rank=per_rank,
        metrics=metrics,
        timeline=tl,
        params={"schedule": s.name, "p": s.p, "v": s.v, "m": s.m, "costs": StageCosts.coerce(costs), "comm": link, "cache": cache},
        initial_state={"time_s": 0.0},
        _order=order,
        _rank=rank,
        _dep=dep,
        _queue=(qh, q0, q1, qi),
    )


def _timeline(s: Schedule, start, end, rank, dep, dsel, xs, xe, nbytes, makespan) -> pd.DataFrame:
    n = s.n_actions
    names = np.array([f"{a}{KINDS[k]}{j}" for a, k, j in zip(s.stage.tolist(), s.kind.tolist(), s.microbatch.tolist())], dtype=object)
    opcode = s.stage.astype(np.int64) * 4 + s.kind
    op_cats = np.array([f"{q // 4}{KINDS[q % 4]}" for q in range(s.n_stages * 4)], dtype=object)
    lane_names = np.array([f"rank {r}" for r in range(s.p)], dtype=object)
    stage64 = s.stage.astype(np.int64)
    cols = {
        "lane": [lane_names[rank]], "group": [np.full(n, "pipeline", dtype=object)], "name": [names],
        "kind": [np.full(n, "compute", dtype=object)], "start_s": [start], "end_s": [end], "op": [op_cats[opcode]],
        "stage": [stage64.astype(float)], "chunk": [(stage64 // s.p).astype(float)], "microbatch": [s.microbatch.astype(float)],
        "bytes": [np.full(n, np.nan)],
    }

    def add(lane, group, name, kind, t0, t1, op, stage, chunk, mb, nb):
        k = len(t0)
        for key, val in (("lane", lane), ("group", group), ("name", name), ("kind", kind), ("op", op)):
            cols[key].append(val if isinstance(val, np.ndarray) else np.full(k, val, dtype=object))
        cols["start_s"].append(t0)
        cols["end_s"].append(t1)
        for key, val in (("stage", stage), ("chunk", chunk), ("microbatch", mb), ("bytes", nb)):
            cols[key].append(np.asarray(val, float) if np.ndim(val) else np.full(k, np.nan))

    # transfers: one row per cross-rank input, on its link lane (extra lanes when they overlap)
    if len(dsel):
        pi = dep[dsel]
        src, dst = rank[pi], rank[dsel]
        ts, te = xs[dsel], xe[dsel]
        link = src * s.p + dst
        o = np.lexsort((ts, link))
        lk, a0, a1 = link[o], ts[o], te[o]
        same = np.concatenate([[False], lk[1:] == lk[:-1]])
        sub = np.zeros(len(o), np.int64)
        # overlap test with the running max end inside each link; only overlapping links get a Python pass
        grp_start = np.flatnonzero(~same)
        bounds = np.append(grp_start, len(o))
        for g0, g1 in zip(bounds[:-1], bounds[1:]):
            e_ = a1[g0:g1]
            prev = np.maximum.accumulate(e_)[:-1]
            if len(prev) and (a0[g0 + 1 : g1] < prev - 1e-12).any():
                lane_end: list[float] = []
                for q in range(g0, g1):
                    k = next((j for j, le in enumerate(lane_end) if le <= a0[q] + 1e-12), len(lane_end))
                    if k == len(lane_end):
                        lane_end.append(a1[q])
                    else:
                        lane_end[k] = a1[q]
                    sub[q] = k
        subo = np.empty_like(sub)
        subo[o] = sub
        lane_key = link * 64 + np.minimum(subo, 63)
        uniq, inv = np.unique(lane_key, return_inverse=True)
        lane_lab = np.array([f"p2p {u // 64 // s.p}->{u // 64 % s.p}" + (f" #{u % 64 + 1}" if u % 64 else "") for u in uniq.tolist()], dtype=object)
        add(lane_lab[inv], "p2p", names[pi], "transfer", ts, te, None, stage64[pi], stage64[pi] // s.p, s.microbatch[pi], nbytes[dsel])
    # bubbles: idle gaps on each rank lane, from 0 to the makespan
    prev_end = np.concatenate([[0.0], end[:-1]]) if n else np.zeros(0)
    first = np.zeros(n, bool)
    first[s.offsets[:-1][np.diff(s.offsets) > 0]] = True
    prev_end[first] = 0.0
    tol = 1e-9 * max(1.0, makespan)
    g = np.flatnonzero(start - prev_end > tol)
    if len(g):
        add(lane_names[rank[g]], "pipeline", "bubble", "bubble", prev_end[g], start[g], None, None, None, None, None)
    last = s.offsets[1:][np.diff(s.offsets) > 0] - 1
    tail = last[makespan - end[last] > tol]
    if len(tail):
        add(lane_names[rank[tail]], "pipeline", "bubble", "bubble", end[tail], np.full(len(tail), makespan), None, None, None, None, None)
    idle_ranks = np.flatnonzero(np.diff(s.offsets) == 0)
    if len(idle_ranks) and makespan > 0:
        add(lane_names[idle_ranks], "pipeline", "bubble", "bubble", np.zeros(len(idle_ranks)), np.full(len(idle_ranks), makespan), None, None, None, None, None)
    # object Series keep pandas 3 from inferring (slow) arrow strings that make_timeline would undo
    df = pd.DataFrame({k: (pd.Series(np.concatenate(v), dtype=object) if k in ("lane", "group", "name", "kind", "op") else np.concatenate(v)) for k, v in cols.items()})
    for c in ("tensor", "device"):
        df[c] = None
    df["flow"] = None
    if len(dsel) and n <= FLOW_LIMIT:
        # arrows in Perfetto: producer -> transfer -> consumer share the producer's action text
        flow = [""] * n
        for a, b in zip(dep[dsel].tolist(), dsel.tolist()):
            flow[a] = names[a] if not flow[a] else flow[a] + "," + names[a]
            flow[b] = names[a] if not flow[b] else flow[b] + "," + names[a]
        col = np.full(len(df), None, dtype=object)
        col[:n] = [f or None for f in flow]
        col[n : n + len(dsel)] = names[dep[dsel]]
        df["flow"] = pd.Series(col, dtype=object)
    return make_timeline(df)
