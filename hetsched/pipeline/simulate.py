"""Simulate a pipeline schedule: timeline, makespan, bubbles, in-flight activations, cache queues.

Model
-----
Each rank runs its action list in order, one action at a time. An action starts when the rank is
free and its input is there: ``F(s, j)`` needs ``F(s-1, j)``'s output, ``B``/``I`` of ``(s, j)`` the
input gradient of stage ``s+1`` (the last stage: its own forward), ``W`` its ``I``. An action lasts
its stage's time plus ``StageCosts.overhead_s``; crossing ranks costs the link time of the message
(:mod:`.costs`: the cost model's ``transfer_s``) plus ``P2P.overhead_s``.

Point-to-point modes:

* ``lockstep=False`` (default): sends are non-blocking and the receiver has a buffer (what torch
  and Megatron do with ``isend``/``irecv``); a transfer starts when its producer ends.
* ``lockstep=True``: PaddlePaddle's blocking exchange after every step, as it runs
  (:mod:`.lockstep`): ``cache=None`` sends right after the producing step and the sender blocks
  until the receiver posts its receive (with the patent's schedule: exactly when ``m % p != 0``);
  ``cache="sender"`` is the patent's cache queue (the interleaved pipeline patent, ``docs/patents.md``,
  claims 6-13): the output waits at the sender and leaves in the exchange that meets the
  receive; ``cache="receiver"`` buffers at the receiver (Megatron), so sends never block.

The simulator's queues (what :meth:`PipelineResult.replay` lists, ``peak_cache_depth``) are the
cache the run actually used: the sender's queue for ``cache="sender"`` under lock-step, the
receiver's buffer for ``cache="receiver"``, none for ``cache=None``. The time a blocked sender
waits is ``blocked_send_s``, reported apart. The patent's own quantities (``r``, first group,
warm-up per rank, send interval, its two queues by its literal rule) are
:meth:`PipelineResult.patent`.

Why a list simulation and not :class:`hetsched.des.Simulator`: every action has at most one input
and a fixed place in its rank's list, so start times are a longest-path over a DAG that one walk
per rank computes exactly, with no event queue (:func:`~hetsched.pipeline.deps.walk`): about a
million actions a second in pure Python. The walk is time-order independent, hence deterministic.

Transfers on one link may be in flight together (latency is pipelined); overlapping ones are drawn
on extra lanes (``p2p 0->1 #2``) so the timeline stays exclusive per lane. Each message is one
``transfer`` row joined to its producer and consumer by a shared ``flow`` id (arrows in Perfetto),
rather than ``send``/``recv`` rows on the rank lanes: a non-blocking send overlaps the sender's
next compute, which would break the one-row-at-a-time rule of :func:`hetsched.check_timeline`.

Examples
--------
>>> from hetsched.pipeline import one_f_one_b
>>> r = simulate(one_f_one_b(4, 8), costs=StageCosts(f_s=1.0, b_s=2.0))
>>> r.metrics["makespan_s"], r.metrics["bubble_ratio"]   # (m + p - 1)(tF + tB); Narayanan's (p - 1) / m
(33.0, 0.375)
>>> round(r.metrics["bubble_fraction"], 4)               # idle / (p * makespan), always in [0, 1]
0.2727
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Mapping

import numpy as np
import pandas as pd

from ..errors import ScheduleError
from ..results import LazySteps, Result, Step
from ..timeline import TimelineBuilder
from .costs import P2P, StageCosts
from .deps import checked_dependencies, walk
from .ir import B, F, I, KINDS, W, Schedule, action_phases

__all__ = ["StageCosts", "P2P", "PipelineResult", "simulate", "price_actions", "timeline_deps", "CACHE_DESIGNS"]

CACHE_DESIGNS = (None, "sender", "receiver")
#: Above this many actions the timeline carries no ``flow`` ids (they cost a string per row).
FLOW_LIMIT = 100_000


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


def _txt(s: Schedule, i: int) -> str:
    return f"{s.stage[i]}{KINDS[s.kind[i]]}{s.microbatch[i]}"


class _Phases:
    """A schedule's :func:`~hetsched.pipeline.action_phases`, computed on first use and kept: a run
    whose steps nobody reads never pays for them (picklable, unlike a cached closure)."""

    __slots__ = ("schedule", "_value")

    def __init__(self, schedule: Schedule) -> None:
        self.schedule, self._value = schedule, None

    def __call__(self) -> tuple[np.ndarray, np.ndarray]:
        if self._value is None:
            self._value = action_phases(self.schedule)
        return self._value


def _start_step(s: Schedule, order: np.ndarray, rank: np.ndarray, start: np.ndarray, end: np.ndarray, dep: np.ndarray,
                ready: np.ndarray, lockstep: bool, phases: Any, in_msg: np.ndarray, held: np.ndarray, k: int) -> Step:
    """Step ``k`` of a run: the ``k``-th action start in time order, and why it started then
    (made on access: a million-action run logs a million starts).

    ``data``: ``rank``, ``start_s``, ``end_s``, ``action`` (the flat action index), the action's
    ``phase`` on its rank (warm-up / steady / cool-down) and patent ``micro_step``
    (:func:`~hetsched.pipeline.action_phases`; ``phases()`` computes them once per run, on first use),
    and ``held_s``: how long the message it consumes waited in the run's cache (``None``: it takes
    none; see :meth:`PipelineResult.messages`).
    """
    i = int(order[k])
    phase, micro = phases()
    r = int(rank[i])
    st, en = float(start[i]), float(end[i])
    prev_end = float(end[i - 1]) if i > s.offsets[r] else 0.0
    d = int(dep[i])
    tol = 1e-12 * max(1.0, en)
    if st > prev_end + tol and d >= 0 and ready[i] >= st - tol:
        why = f"rank {r} idle {st - prev_end:.4g} s waiting for {_txt(s, d)}"
    elif st > prev_end + tol and lockstep:
        why = f"rank {r} idle {st - prev_end:.4g} s blocked in its lock-step exchange"
    elif st > prev_end + tol:
        why = f"rank {r} idle {st - prev_end:.4g} s"
    else:
        why = f"rank {r} runs it as soon as its previous action ends"
    return Step(k, "start", _txt(s, i), before=st, after=en, accepted=True, reason=why,
                data={"rank": r, "start_s": st, "end_s": en, "action": i, "phase": str(phase[i]), "micro_step": int(micro[i]),
                      "held_s": float(held[in_msg[i]]) if in_msg[i] >= 0 else None})


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
        ``rank, busy_s, idle_s, peak_activations_chunks, peak_activation_bytes, peak_cache_depth,
        blocked_send_s``.
    metrics : dict
        ``makespan_s``; ``bubble_fraction`` = idle / (p * makespan), the share of rank-time spent
        idle, always in [0, 1]; ``bubble_ratio`` = idle / busy (Narayanan et al.'s bubble time
        fraction, ``(p - 1) / m`` for 1F1B, can exceed 1); ``peak_activations_chunks`` and
        ``peak_activation_bytes`` (worst rank); ``peak_cache_depth`` (the simulated cache, see
        the module docstring); ``blocked_send_s`` (total time senders were blocked in lock-step
        exchanges); ``n_actions``, ``n_transfers``, ``bytes_moved``.
    steps : sequence of Step
        One per action start, in time order then rank (built lazily); ``data`` holds the rank, the
        flat action index (``action``), its phase and patent micro-step; :meth:`replay` rebuilds
        what each rank runs, holds and has queued at that instant.
    """

    schedule: Schedule
    start_s: np.ndarray
    end_s: np.ndarray
    per_rank: pd.DataFrame
    _order: np.ndarray = field(repr=False)
    _rank: np.ndarray = field(repr=False)
    _dep: np.ndarray = field(repr=False)
    _ready: np.ndarray = field(repr=False)  # when each action's input was there (start if none)
    _msg: dict = field(repr=False)  # per message arrays: src, dst, xs, xe, bytes, blocked_s
    _queue: tuple = field(repr=False)  # (holder rank, t0, t1, item index) of cached items

    @property
    def step_order(self) -> np.ndarray:
        """The flat action index of each step, in step order (start time, then rank): step ``k``
        starts action ``step_order[k]`` (a read-only view).

        >>> from hetsched.pipeline import one_f_one_b
        >>> r = simulate(one_f_one_b(2, 2), costs={"F": 1, "B": 1})
        >>> r.start_s[r.step_order].tolist() == sorted(r.start_s.tolist())
        True
        """
        v = self._order.view()
        v.flags.writeable = False
        return v

    def _replay(self, k: int) -> dict[str, Any]:
        """State at the start of the ``k``-th action (``k = -1``: before anything runs), computed
        from the run's arrays (what runs at an instant is not a fold of earlier steps).

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
        s = self.schedule
        t = -math.inf if k < 0 else float(self.start_s[self._order[k]])
        started = np.zeros(n, bool) if k < 0 else (self.start_s <= t)
        if k >= 0:
            started &= np.isin(np.arange(n), self._order[: k + 1]) | (self.start_s < t)
        running = {int(self._rank[i]): _txt(s, i) for i in np.flatnonzero(started & (self.end_s > t))}
        done = int(np.count_nonzero(started & (self.end_s <= t)))
        kd = s.kind
        rel = (kd == W) | (kd == B)
        held = np.bincount(self._rank[started & (kd == F)], minlength=s.p) - np.bincount(self._rank[started & rel & (self.end_s <= t)], minlength=s.p)
        holder, t0, t1, item = self._queue
        inq = (t0 <= t) & (t < t1)
        queues: dict[int, list[str]] = {r: [] for r in range(s.p)}
        for j in np.flatnonzero(inq)[np.argsort(t0[inq], kind="stable")]:
            queues[int(holder[j])].append(_txt(s, int(item[j])))
        return {"time_s": t if k >= 0 else 0.0, "running": running, "done": done, "in_flight": {r: int(x) for r, x in enumerate(held)}, "queues": queues}

    def messages(self) -> pd.DataFrame:
        """Every cross-rank message: what it carries and when it waited.

        One row per message, in the consumers' flat order. Columns ``item`` (producer action), ``consumer``, ``src``, ``dst`` (ranks), ``bytes``,
        ``produced_s``, ``sent_s`` (transfer start), ``arrived_s``, ``consumed_s``, ``blocked_send_s``
        (lock-step: the sender waiting for the receive to be posted) and ``held_s``: how long it waited
        in the run's cache, by its design (the receive buffer: arrival to consumption; otherwise the
        sender's queue or exchange: production to send).

        >>> from hetsched.pipeline import one_f_one_b
        >>> simulate(one_f_one_b(2, 1), costs={"F": 1, "B": 1}).messages()[["item", "consumer", "src", "dst"]].values.tolist()
        [['1B0', '0B0', 1, 0], ['0F0', '1F0', 0, 1]]
        """
        s, mg = self.schedule, self._msg
        src, dst = mg["src"], mg["dst"]
        return pd.DataFrame({
            "item": [_txt(s, int(i)) for i in src.tolist()], "consumer": [_txt(s, int(i)) for i in dst.tolist()],
            "src": self._rank[src], "dst": self._rank[dst], "bytes": mg["bytes"], "produced_s": self.end_s[src],
            "sent_s": mg["xs"], "arrived_s": mg["xe"], "consumed_s": self.start_s[dst], "blocked_send_s": mg["blocked_s"],
            "held_s": mg["held_s"],
        })

    def queue_trace(self) -> pd.DataFrame:
        """The simulated cache queues over time: ``time_s, rank, direction, queued, sent, depth, items``.

        One row per instant a queue changes (``direction``: ``forward`` for activations,
        ``backward`` for input gradients); empty when the run used no cache. This is the
        simulator's queue; the patent's own (its literal rule, in micro-steps) is
        ``patent()["queues"]``.

        >>> from hetsched.pipeline import interleaved_1f1b
        >>> r = simulate(interleaved_1f1b(4, 2, 10, grouping="paddle"), costs={"F": 1, "B": 1}, comm={"lockstep": True}, cache="sender")
        >>> q = r.queue_trace()
        >>> q.groupby(["rank", "direction"])["depth"].max().to_dict()
        {(0, 'backward'): 2, (3, 'forward'): 2}
        """
        s = self.schedule
        holder, t0, t1, item = self._queue
        cols = ["time_s", "rank", "direction", "queued", "sent", "depth", "items"]
        if not len(holder):
            return pd.DataFrame(columns=cols)
        direction = np.where(s.kind[item] == F, "forward", "backward")
        rows = []
        for (h, d) in sorted(set(zip(holder.tolist(), direction.tolist()))):
            js = np.flatnonzero((holder == h) & (direction == d))
            times = np.unique(np.concatenate([t0[js], t1[js]]))
            for tt in times.tolist():
                q = int(np.count_nonzero(t0[js] == tt))
                sn = int(np.count_nonzero(t1[js] == tt))
                held = js[(t0[js] <= tt) & (tt < t1[js])]
                held = held[np.argsort(t0[held], kind="stable")]
                rows.append((tt, h, d, q, sn, len(held), [_txt(s, int(item[j])) for j in held]))
        return pd.DataFrame(rows, columns=cols).sort_values(["time_s", "rank", "direction"], kind="stable").reset_index(drop=True)

    def patent(self) -> dict[str, Any]:
        """The patent's own quantities for this ``(p, v, m)`` (claims 1-5 and 6-13 of the interleaved pipeline patent).

        Keys: ``applies`` (whether this schedule is the patent's: interleaved 1F1B with the
        ``paddle`` grouping), ``r`` (= ``m mod p``), ``first_group`` (``p + r``), ``groups``,
        ``warmup`` (forwards before the first backward, per rank), ``send_interval``
        (``[r, r + (p + r)(v - 1))`` in the last rank's forward micro-steps), ``n_cached`` and
        ``queues`` (its forward and backward cache queues by its literal rule:
        :func:`~hetsched.pipeline.patent_queues`). With ``m < p`` the patent does not apply and
        only ``applies`` and ``why`` are given.

        >>> from hetsched.pipeline import interleaved_1f1b
        >>> pv = simulate(interleaved_1f1b(4, 2, 10, grouping="paddle")).patent()
        >>> pv["applies"], pv["r"], pv["first_group"], pv["warmup"], pv["send_interval"]
        (True, 2, 6, [12, 10, 8, 6], (2, 8))
        """
        from .cache import patent_parameters, patent_queues
        from .schedules import is_patent_schedule

        s = self.schedule
        if s.m < s.p:
            return {"applies": False, "why": f"the patent groups micro-batches by p: it needs m >= p (m={s.m}, p={s.p})"}
        out = {"applies": is_patent_schedule(s), **patent_parameters(s.p, s.v, s.m)}
        out["queues"] = patent_queues(s.p, s.v, s.m)
        return out

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


def _message_times(s: Schedule, c: dict[str, np.ndarray], link: P2P, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bytes and transfer time of each message (``src`` produces, ``dst`` consumes on another rank)."""
    st = s.stage.astype(np.int64)
    fwd = s.kind[dst] == F
    ps = st[src]
    nbytes = np.where(fwd, c["act"][ps], c["grad"][ps])
    if "send" in c or "grad_send" in c:
        snd = c.get("send", np.zeros(s.n_stages))
        gsnd = c.get("grad_send", np.zeros(s.n_stages))
        tt = np.where(fwd, snd[ps], gsnd[ps])
    else:
        tt = link.time_s(nbytes) if len(nbytes) else np.zeros(0)
    return nbytes, np.asarray(tt, float) + link.overhead_s


def price_actions(s: Schedule, c: dict[str, np.ndarray], link: P2P) -> tuple[np.ndarray, ...]:
    """What every action of ``s`` costs in the simulator's model of time (the one pricing of the house).

    ``c`` is ``StageCosts.arrays(...)`` for ``s``. Returns ``(dep, dur, src, dst, nbytes, tt)``: the
    producer of each action's input (``-1``: none), each action's duration (its stage's time plus
    overhead), and per cross-rank message its producer ``src``, consumer ``dst``, bytes and transfer
    time (link time plus ``P2P.overhead_s``). :func:`simulate` and the schedule synthesis
    (:mod:`.synth`) both price actions here, so they cannot disagree.

    >>> from hetsched.pipeline import one_f_one_b
    >>> s = one_f_one_b(2, 1)
    >>> dep, dur, src, dst, nbytes, tt = price_actions(s, StageCosts(f_s=1, b_s=2, activation_bytes=8).arrays(2), P2P(latency_s=0.5))
    >>> dur.tolist(), dst.tolist(), tt.tolist()
    ([1.0, 2.0, 1.0, 2.0], [1, 2], [0.5, 0.5])
    """
    dep = checked_dependencies(s)
    n = s.n_actions
    st64 = s.stage.astype(np.int64)
    kd = s.kind
    rank = s.rank
    dur = np.select([kd == F, kd == B, kd == I, kd == W], [c["F"][st64], c["B"][st64], c["I"][st64], c["W"][st64]]) + c["overhead"][st64]
    has = dep >= 0
    cross = np.zeros(n, bool)
    cross[has] = rank[dep[has]] != rank[has]
    dst = np.flatnonzero(cross)
    src = dep[dst]
    nbytes, tt = _message_times(s, c, link, src, dst)
    return dep, dur, src, dst, nbytes, tt


def simulate(schedule: Schedule, *, costs: StageCosts | Mapping | None = None, comm: P2P | Mapping | None = None, cache: str | None = None, timeline: bool = True) -> PipelineResult:
    """Simulate ``schedule`` and return a :class:`PipelineResult`.

    Parameters
    ----------
    schedule : Schedule
        Any schedule (it is checked first; a bad one raises ``ScheduleError`` with the grid).
    costs : StageCosts or mapping, optional
        Per-stage (per-chunk) times, sizes and overhead (``{"F": 1, "B": 2}`` works); default
        ``tF = 1, tB = 2``. Costs priced from a graph (:func:`~hetsched.pipeline.stage_costs`)
        carry their link times and the placement they assume.
    comm : P2P or mapping, optional
        Numbers-only link latency/bandwidth, per-message ``overhead_s``, and ``lockstep``; default
        free, non-blocking.
    cache : {None, "sender", "receiver"}
        Under lock-step: where early outputs wait (see the module docstring); ``"sender"`` is the
        patent's. Without lock-step nothing waits at a sender, so only ``"receiver"`` shows a
        queue (the receive buffers).
    timeline : bool
        Build the timeline frame (rows: compute, transfer, bubble); ``False`` saves time on huge runs.

    Raises
    ------
    ScheduleError
        Invalid schedule, bad costs, costs priced for another placement, or a deadlock (including
        one caused by lock-step p2p without a cache).

    >>> from hetsched.pipeline import interleaved_1f1b
    >>> r = simulate(interleaved_1f1b(4, 2, 8), costs={"F": 1, "B": 1})
    >>> r.metrics["makespan_s"] == (2 * 8 + 4 - 1) * 2
    True
    """
    if cache not in CACHE_DESIGNS:
        raise ScheduleError(f"cache must be one of {CACHE_DESIGNS}, got {cache!r}", field="cache")
    cost = StageCosts.coerce(costs)
    c = cost.arrays(schedule.n_stages, schedule.v)
    link = P2P.coerce(comm)
    s = schedule
    if cost.placement is not None and list(cost.placement) != s.stage_to_rank.tolist():
        raise ScheduleError(
            f"the costs were priced with stage -> rank {list(cost.placement)}, but schedule {s.name!r} places stages on "
            f"{s.stage_to_rank.tolist()}: price them for this schedule (stage_costs(..., schedule=...))", field="costs")
    if ("send" in c or "grad_send" in c) and link.priced:
        raise ScheduleError("the costs carry link times priced from a system; do not also give comm latency/bandwidth", field="comm")
    dep, dur, src, dst, nbytes, tt = price_actions(s, c, link)
    n = s.n_actions
    st64 = s.stage.astype(np.int64)
    kd = s.kind
    rank = s.rank
    has = dep >= 0
    blocked = np.zeros(len(src))
    if link.lockstep:
        from .lockstep import lower, run

        prog = lower(s, cache)
        post, start, end, xs, held = run(s, prog, dur, tt)
        blocked_rank = np.bincount(prog.ex_rank, weights=held, minlength=s.p)
        if prog.blocking:
            blocked = np.maximum(post[prog.recv_ex] - post[prog.send_ex], 0.0)
        # lowering orders messages by consumer, as here
        assert np.array_equal(prog.dst, dst)
    else:
        blocked_rank = np.zeros(s.p)
        cdelay = np.zeros(n)
        cdelay[dst] = tt
        start, end = walk(s, dep, dur, cdelay)
        xs = end[src]  # a transfer leaves when its producer ends
    xe = xs + tt
    ready = start.copy()
    ready[has] = end[dep[has]]
    ready[dst] = xe
    makespan = float(end.max()) if n else 0.0
    busy = np.bincount(rank, weights=dur, minlength=s.p)
    idle = makespan - busy

    # in-flight activations: +1 at F start, -1 when B (or W) ends (releases listed first)
    rel = (kd == B) | (kd == W)
    fi = np.flatnonzero(kd == F)
    ri = np.flatnonzero(rel)
    ev_rank = np.concatenate([rank[ri], rank[fi]])
    ev_t = np.concatenate([end[ri], start[fi]])
    actb = c["held"][st64]
    peak_chunks, peak_bytes = _peaks_per_rank(ev_rank, ev_t, [np.concatenate([-np.ones(len(ri)), np.ones(len(fi))]), np.concatenate([-actb[ri], actb[fi]])], s.p)

    # cached items: the patent's sender queue holds [exchange after the producer, exchange that
    # sends); the receiver design holds [arrival, consumer start); no cache, no queue
    if cache == "sender" and link.lockstep:
        moved = prog.send_ex != prog.default_ex
        holder, t0, t1, qi = rank[src[moved]], post[prog.default_ex[moved]], post[prog.send_ex[moved]], src[moved]
    elif cache == "receiver":
        holder, t0, t1, qi = rank[dst], xe, start[dst], src
    else:
        holder, t0, t1, qi = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0), np.zeros(0, np.int64))
    # how long each message waited in the cache its design has: until its consumer started (the
    # receiver's buffer), else until it was sent (the sender's queue, a lock-step exchange)
    held_msg = start[dst] - xe if cache == "receiver" else xs - end[src]
    in_msg = np.full(n, -1, dtype=np.int64)
    in_msg[dst] = np.arange(len(dst))
    waits = t1 > t0 + 1e-12 * max(1.0, makespan)
    qh, q0, q1, qi = holder[waits], t0[waits], t1[waits], qi[waits]
    (peak_cache,) = _peaks_per_rank(np.concatenate([qh, qh]), np.concatenate([q1, q0]), [np.concatenate([-np.ones(len(qh)), np.ones(len(qh))])], s.p)

    per_rank = pd.DataFrame({"rank": np.arange(s.p), "busy_s": busy, "idle_s": idle, "peak_activations_chunks": peak_chunks.astype(int),
                             "peak_activation_bytes": peak_bytes, "peak_cache_depth": peak_cache.astype(int), "blocked_send_s": blocked_rank})
    metrics = {
        "makespan_s": makespan,
        "bubble_fraction": float(idle.sum() / (s.p * makespan)) if makespan > 0 else 0.0,
        "bubble_ratio": float(idle.sum() / busy.sum()) if busy.sum() > 0 else 0.0,
        "peak_activations_chunks": float(peak_chunks.max()) if s.p else 0.0,
        "peak_activation_bytes": float(peak_bytes.max()) if s.p else 0.0,
        "peak_cache_depth": float(peak_cache.max()) if s.p else 0.0,
        "blocked_send_s": float(blocked_rank.sum()),
        "n_actions": float(n),
        "n_transfers": float(len(dst)),
        "bytes_moved": float(nbytes.sum()),
    }
    order = np.lexsort((rank, start))
    tl = _timeline(s, start, end, rank, src, dst, xs, xe, nbytes, makespan) if timeline else TimelineBuilder().build()
    return PipelineResult(
        schedule=s,
        start_s=start,
        end_s=end,
        per_rank=per_rank,
        metrics=metrics,
        timeline=tl,
        params={"schedule": s.name, "p": s.p, "v": s.v, "m": s.m, "costs": cost, "comm": link, "cache": cache, "lockstep": link.lockstep},
        initial_state={"time_s": 0.0},
        steps=LazySteps(n=n, make=partial(_start_step, s, order, rank, start, end, dep, ready, bool(link.lockstep),
                                          _Phases(s), in_msg, held_msg)),
        _order=order,
        _rank=rank,
        _dep=dep,
        _ready=ready,
        _msg={"src": src, "dst": dst, "xs": xs, "xe": xe, "bytes": nbytes, "blocked_s": blocked, "held_s": held_msg},
        _queue=(qh, q0, q1, qi),
    )


def _timeline(s: Schedule, start, end, rank, src, dst, xs, xe, nbytes, makespan) -> pd.DataFrame:
    n = s.n_actions
    names = np.array([f"{a}{KINDS[k]}{j}" for a, k, j in zip(s.stage.tolist(), s.kind.tolist(), s.microbatch.tolist())], dtype=object)
    opcode = s.stage.astype(np.int64) * 4 + s.kind
    op_cats = np.array([f"{q // 4}{KINDS[q % 4]}" for q in range(s.n_stages * 4)], dtype=object)
    lane_names = np.array([f"rank {r}" for r in range(s.p)], dtype=object)
    stage64 = s.stage.astype(np.int64)
    tb = TimelineBuilder()  # rows in blocks of arrays: compute, transfers, bubbles
    flow = None
    if len(dst) and n <= FLOW_LIMIT:
        # arrows in Perfetto: producer -> transfer -> consumer share the producer's action text
        fl = [""] * n
        for a, b in zip(src.tolist(), dst.tolist()):
            fl[a] = names[a] if not fl[a] else fl[a] + "," + names[a]
            fl[b] = names[a] if not fl[b] else fl[b] + "," + names[a]
        flow = np.array([f or None for f in fl], dtype=object)
    tb.extend(lane_names[rank], "pipeline", names, "compute", start, end, op=op_cats[opcode], stage=stage64.astype(float),
              chunk=(stage64 // s.p).astype(float), microbatch=s.microbatch.astype(float), bytes=np.nan, flow=flow)

    # transfers: one row per cross-rank input, on its link lane (extra lanes when they overlap)
    if len(dst):
        pi = src
        rs, rd = rank[src], rank[dst]
        ts, te = xs, xe
        link = rs * s.p + rd
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
        tb.extend(lane_lab[inv], "p2p", names[pi], "transfer", ts, te, stage=stage64[pi].astype(float),
                  chunk=(stage64[pi] // s.p).astype(float), microbatch=s.microbatch[pi].astype(float),
                  bytes=np.asarray(nbytes, float), flow=names[pi] if flow is not None else None)
    # bubbles: idle gaps on each rank lane, from 0 to the makespan
    nan = np.nan
    prev_end = np.concatenate([[0.0], end[:-1]]) if n else np.zeros(0)
    first = np.zeros(n, bool)
    first[s.offsets[:-1][np.diff(s.offsets) > 0]] = True
    prev_end[first] = 0.0
    tol = 1e-9 * max(1.0, makespan)
    g = np.flatnonzero(start - prev_end > tol)
    if len(g):
        tb.extend(lane_names[rank[g]], "pipeline", "bubble", "bubble", prev_end[g], start[g], stage=nan, chunk=nan, microbatch=nan, bytes=nan)
    last = s.offsets[1:][np.diff(s.offsets) > 0] - 1
    tail = last[makespan - end[last] > tol]
    if len(tail):
        tb.extend(lane_names[rank[tail]], "pipeline", "bubble", "bubble", end[tail], np.full(len(tail), makespan),
                  stage=nan, chunk=nan, microbatch=nan, bytes=nan)
    idle_ranks = np.flatnonzero(np.diff(s.offsets) == 0)
    if len(idle_ranks) and makespan > 0:
        tb.extend(lane_names[idle_ranks], "pipeline", "bubble", "bubble", np.zeros(len(idle_ranks)), np.full(len(idle_ranks), makespan),
                  stage=nan, chunk=nan, microbatch=nan, bytes=nan)
    return tb.build()
