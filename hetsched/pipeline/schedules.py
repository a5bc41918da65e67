"""Schedule generators: pure functions of numbers returning a :class:`~hetsched.pipeline.ir.Schedule`.

``gpipe``, ``one_f_one_b``, ``looped_bfs``, ``interleaved_1f1b`` (four micro-batch *groupings*,
including the patent's), ``interleaved_fthenb``, zero-bubble ``zb_h1`` / ``zb_h2`` and ``zbv``.

The interleaved family is one algorithm (Narayanan et al., SC 2021, "Efficient large-scale language
model training on GPU clusters using Megatron-LM", section 2.2) parametrised by how the ``m``
micro-batches are cut into consecutive *groups*. Each group runs chunk ``0..v-1`` in turn (forward)
and ``v-1..0`` (backward); rank ``r`` runs ``2 (p - 1 - r) + (v - 1) g0`` warm-up forwards (``g0``:
first group's size), then alternates one forward and one backward, then drains the backwards. The
groupings (see :data:`GROUPINGS`):

``paddle`` (default)
    ``[p + r, p, ..., p]`` with ``r = m % p``: the interleaved pipeline patent (``docs/patents.md``)
    (PaddlePaddle ``PipelineParallelWithInterleave``: "first_chunk_acc = m % p + p"). The first group
    is larger, so the last rank produces forward outputs ``r`` steps before the first rank can use
    them: the patent caches them and sends only inside the send interval (see :mod:`.cache`).
``megatron``
    ``[N, ..., N, m % N]`` (Megatron-LM ``microbatch_group_size_per_vp_stage``; ``p <= N <= m`` and the
    remainder must be 0 or ``>= p``). ``N`` defaults to the smallest feasible value.
``torch``
    ``k = max(1, m // p)`` equal groups (torch 2.x ``ScheduleInterleaved1F1B``; refuses ``m % k != 0``).
``balanced``
    ``floor(m / p)`` groups whose sizes differ by at most one, larger first: works for every
    ``m >= p``, never has a first group larger than paddle's or torch's, so never more warm-up
    activations, and every group has at least ``p`` micro-batches so the pipeline never starves.

For ``m < p`` there is only one possible group, ``[m]``: every grouping uses it (as torch does).
This is the documented fallback (no error): with one group the warm-up ``2 (p - 1 - r) + (v - 1) m``
reaches ``v m`` on every rank with ``m <= 2 (p - 1 - r)``, so those ranks run all forwards then all
backwards (interleaved FthenB), and the last ranks keep a short 1F1B tail. The schedule is valid
(tests check every ``m`` in ``1..4p``) but the pipeline starves between chunks, as with any ``m < p``.

Examples
--------
>>> interleaved_1f1b(2, 2, 3, grouping="paddle").to_text()
['0F0 0F1 0F2 2F0 2F1 2F2 2B0 2B1 2B2 0B0 0B1 0B2', '1F0 1F1 1F2 3F0 3B0 3F1 3B1 3F2 3B2 1B0 1B1 1B2']
>>> groups(4, 11, "paddle"), groups(4, 11, "balanced"), groups(4, 11, "megatron")
([7, 4], [6, 5], [6, 5])
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import ScheduleError
from ..registry import lookup
from .ir import B, F, I, W, Schedule

__all__ = [
    "GROUPINGS",
    "SCHEDULES",
    "groups",
    "paddle_groups",
    "megatron_groups",
    "torch_groups",
    "balanced_groups",
    "gpipe",
    "one_f_one_b",
    "looped_bfs",
    "interleaved_1f1b",
    "interleaved_fthenb",
    "interleaved_from_groups",
    "zb_h1",
    "zb_h2",
    "zbv",
    "interleaved_zero_bubble",
    "dualpipev",
    "make_schedule",
    "is_patent_schedule",
    "SCHEDULE_INFO",
    "schedule_v",
    "MAX_ACTIONS",
]


#: The most actions a generator makes (documented limit): simulating 1 million actions takes about
#: 0.4 GB and 2.5 s on one core, so 4 million stay near 2 GB; beyond that a run would exhaust a
#: laptop (``hetsched pipeline --p 100000 --m 100000`` asked for 2e10 actions).
MAX_ACTIONS = 4_000_000


def check_pvm(p: int, v: int, m: int, *, per: int = 2) -> None:
    """Positive integers, and at most :data:`MAX_ACTIONS` actions (``per`` actions per stage and micro-batch)."""
    for name, val in (("p", p), ("v", v), ("m", m)):
        # bool is an int subclass: True would silently mean 1
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < 1:
            raise ScheduleError(f"{name} must be a positive integer, got {val!r}", field=name)
    n = per * int(p) * int(v) * int(m)
    if n > MAX_ACTIONS:
        raise ScheduleError(f"p={p}, v={v}, m={m} make {n:,} actions, above the limit of {MAX_ACTIONS:,} "
                            "(hetsched.pipeline.MAX_ACTIONS); use fewer ranks, chunks or micro-batches", field="size", actions=n)


# ---- groupings ---------------------------------------------------------------------------------

def paddle_groups(p: int, m: int) -> list[int]:
    """The patent's split: ``r = m % p``; first group ``p + r``, then groups of ``p``.

    >>> paddle_groups(4, 10)
    [6, 4]
    """
    if m < p:
        return [m]
    r = m % p
    return [p + r] + [p] * (m // p - 1)


def megatron_groups(p: int, m: int, group_size: int | None = None) -> list[int]:
    """Megatron-LM's split ``[N, ..., N, m % N]``; ``N`` defaults to the smallest feasible one.

    Feasible: ``p <= N <= m`` and ``m % N`` is 0 or at least ``p`` (a smaller last group would
    starve the pipeline).

    >>> megatron_groups(4, 10), megatron_groups(4, 12, 6)
    ([5, 5], [6, 6])
    """
    if m < p:
        return [m]
    if group_size is None:
        group_size = next(n for n in range(p, m + 1) if m % n == 0 or m % n >= p)
    n = int(group_size)
    if not p <= n <= m:
        raise ScheduleError(f"megatron group size N={n} must lie in [p={p}, m={m}]", field="group_size")
    rem = m % n
    if rem and rem < p:
        raise ScheduleError(f"megatron group size N={n}: the last group would hold m % N = {rem} < p = {p} micro-batches", field="group_size")
    return [n] * (m // n) + ([rem] if rem else [])


def torch_groups(p: int, m: int) -> list[int]:
    """torch 2.x ``ScheduleInterleaved1F1B``: ``k = max(1, m // p)`` rounds of ``m / k``; refuses ``m % k``.

    >>> torch_groups(4, 10)
    [5, 5]
    """
    k = max(1, m // p)
    if m % k:
        raise ScheduleError(
            f"grouping 'torch' needs m to be a multiple of the number of rounds k = max(1, m // p) = {k}, got m={m} (torch raises the same)",
            field="m",
        )
    return [m // k] * k


def balanced_groups(p: int, m: int) -> list[int]:
    """``floor(m / p)`` groups whose sizes differ by at most one, larger first.

    >>> balanced_groups(4, 19)
    [5, 5, 5, 4]
    """
    if m < p:
        return [m]
    k = m // p
    base, extra = divmod(m, k)
    return [base + 1] * extra + [base] * (k - extra)


#: Grouping policies by name: ``f(p, m) -> list of group sizes``.
GROUPINGS: dict[str, Callable[[int, int], list[int]]] = {
    "balanced": balanced_groups,
    "paddle": paddle_groups,
    "megatron": megatron_groups,
    "torch": torch_groups,
}


def groups(p: int, m: int, grouping: str | Sequence[int] | Callable[[int, int], Sequence[int]] = "paddle") -> list[int]:
    """Group sizes for a grouping name, an explicit list, or a callable ``f(p, m)``.

    >>> groups(3, 7, [4, 3])
    [4, 3]
    """
    if isinstance(grouping, str) or callable(grouping):
        g = list(lookup(GROUPINGS, grouping, what="grouping", error=ScheduleError)(p, m))
    else:
        try:
            g = [int(x) for x in grouping]
        except (TypeError, ValueError):
            raise ScheduleError(f"grouping must be a name in {sorted(GROUPINGS)}, a list of group sizes or a callable f(p, m), got {grouping!r}", field="grouping") from None
    if any(x < 1 for x in g) or sum(g) != m:
        raise ScheduleError(f"groups {g} must be positive and sum to m={m}", field="grouping")
    return g


# ---- the interleaved family --------------------------------------------------------------------

def _group_sequence(v: int, sizes: Sequence[int], reverse_chunks: bool) -> tuple[np.ndarray, np.ndarray]:
    """Chunk and micro-batch of each step when each group runs all its chunks in turn."""
    chunks, mbs = [], []
    start = 0
    order = np.arange(v)[::-1] if reverse_chunks else np.arange(v)
    for g in sizes:
        chunks.append(np.repeat(order, g))
        mbs.append(np.tile(np.arange(start, start + g), v))
        start += g
    return np.concatenate(chunks), np.concatenate(mbs)


def interleaved_from_groups(p: int, v: int, m: int, sizes: Sequence[int], *, name: str = "interleaved", warmup: Callable[[int], int] | None = None) -> Schedule:
    """The interleaved 1F1B skeleton for explicit group sizes (what every grouping feeds).

    ``warmup(rank)`` overrides the number of warm-up forwards (default
    ``2 (p - 1 - rank) + (v - 1) * sizes[0]``, capped at ``v * m``).

    >>> interleaved_from_groups(2, 1, 2, [2]).to_text()
    ['0F0 0F1 0B0 0B1', '1F0 1B0 1F1 1B1']
    """
    check_pvm(p, v, m)
    fc, fm = _group_sequence(v, sizes, False)
    bc, bm = _group_sequence(v, sizes, True)
    n = v * m
    per = []
    warm = []
    for r in range(p):
        w = min(n, warmup(r) if warmup else 2 * (p - 1 - r) + (v - 1) * sizes[0])
        warm.append(int(w))
        steady = n - w
        # positions: warm-up forwards, then (F, B) pairs, then the remaining backwards
        src_is_b = np.concatenate([np.zeros(w, bool), np.tile([False, True], steady), np.ones(w, bool)])
        idx = np.empty(2 * n, np.int64)
        idx[~src_is_b] = np.arange(n)
        idx[src_is_b] = np.arange(n)
        chunk = np.where(src_is_b, bc[idx], fc[idx])
        mb = np.where(src_is_b, bm[idx], fm[idx])
        per.append(((chunk * p + r).astype(np.int32), np.where(src_is_b, B, F).astype(np.int8), mb.astype(np.int32)))
    # the warm-up counts tell a lock-step runtime where its steady (forward, backward) steps begin
    return Schedule.from_arrays(p, v, m, name, per, meta={"groups": list(map(int, sizes)), "warmup": warm})


def interleaved_1f1b(p: int, v: int, m: int, grouping: str | Sequence[int] | Callable = "paddle", *, group_size: int | None = None) -> Schedule:
    """Interleaved 1F1B: Narayanan et al. (SC 2021), with a micro-batch grouping policy.

    Parameters
    ----------
    p, v, m : int
        Ranks, chunks per rank, micro-batches (any ``m >= 1``; ``m < p`` uses one group ``[m]``).
    grouping : {"paddle", "balanced", "megatron", "torch"}, list of int, or callable
        How micro-batches are split into consecutive groups (see the module docstring).
        ``"paddle"`` (default) is the patent's (the interleaved pipeline patent, ``docs/patents.md``,
        claim 4: first group ``p + m % p``); the others are extensions.
    group_size : int, optional
        Megatron's ``N`` (``grouping="megatron"`` only; default: smallest feasible).

    Raises
    ------
    ScheduleError
        ``grouping="torch"`` with ``m % max(1, m // p) != 0`` (torch refuses it too), an infeasible
        megatron ``N``, or non-positive ``p, v, m``.

    >>> s = interleaved_1f1b(4, 2, 10, grouping="paddle")
    >>> s.meta["groups"], s.name
    ([6, 4], 'interleaved_1f1b[paddle]')
    """
    check_pvm(p, v, m)
    if grouping == "megatron":
        sizes = megatron_groups(p, m, group_size)
    elif group_size is not None:
        raise ScheduleError("group_size only applies to grouping='megatron'", field="group_size")
    else:
        sizes = groups(p, m, grouping)
    label = grouping if isinstance(grouping, str) else "custom"
    s = interleaved_from_groups(p, v, m, sizes, name=f"interleaved_1f1b[{label}]")
    # Megatron's and Paddle's interleaved runtimes run a steady forward and backward as one step
    # with one exchange (what a lock-step simulation needs to know)
    return Schedule(s.p, s.v, s.m, s.name, s.stage, s.kind, s.microbatch, s.offsets, s.style, {**s.meta, "paired_steps": True})


def interleaved_fthenb(p: int, v: int, m: int) -> Schedule:
    """Interleaved F-then-B: all forwards then all backwards, interleaved; one group of ``m``, chunk-major.

    PaddlePaddle's ``PipelineParallelWithInterleaveFthenB``, the schedule it uses for ``p <= m < 2p``
    where interleaved 1F1B has no steady phase. Accepted for any ``m >= 1`` on purpose, not only
    ``p <= m < 2p``: it is valid and deadlock-free for every ``m`` (all forwards of a chunk precede
    any backward, so no rank ever waits on a rank that waits on it), and outside Paddle's range it
    is a useful what-if (the GPipe of interleaving: lowest makespan sensitivity to ``m``, highest
    memory). The cost is memory: every rank holds all ``v * m`` activations at its peak.

    >>> interleaved_fthenb(2, 2, 2).to_text()[0]
    '0F0 0F1 2F0 2F1 2B0 2B1 0B0 0B1'
    """
    check_pvm(p, v, m)
    return interleaved_from_groups(p, v, m, [m], name="interleaved_fthenb", warmup=lambda r: v * m)


# ---- single-chunk classics ---------------------------------------------------------------------

def gpipe(p: int, m: int) -> Schedule:
    """GPipe: all forwards, then all backwards, one stage per rank (Huang et al., NeurIPS 2019).

    >>> gpipe(2, 2).to_text()
    ['0F0 0F1 0B0 0B1', '1F0 1F1 1B0 1B1']
    """
    check_pvm(p, 1, m)
    per = [(np.full(2 * m, r, np.int32), np.repeat(np.array([F, B], np.int8), m), np.tile(np.arange(m, dtype=np.int32), 2)) for r in range(p)]
    return Schedule.from_arrays(p, 1, m, "gpipe", per)


def one_f_one_b(p: int, m: int) -> Schedule:
    """1F1B: PipeDream-Flush (Narayanan et al., SC 2021), ``p - 1 - r`` warm-up forwards on rank ``r``.

    >>> one_f_one_b(2, 3).to_text()
    ['0F0 0F1 0B0 0F2 0B1 0B2', '1F0 1B0 1F1 1B1 1F2 1B2']
    """
    check_pvm(p, 1, m)
    s = interleaved_from_groups(p, 1, m, [m], name="1f1b", warmup=lambda r: p - 1 - r)
    return s


def looped_bfs(p: int, v: int, m: int) -> Schedule:
    """Looped BFS: breadth-first looping (Lamy-Poirier, 2023), each local stage runs all micro-batches in turn.

    Forwards chunk by chunk (micro-batches in order), then backwards from the last chunk down,
    micro-batches in reverse (the order torch's ``ScheduleLoopedBFS`` uses).

    >>> looped_bfs(2, 2, 2).to_text()[0]
    '0F0 0F1 2F0 2F1 2B1 2B0 0B1 0B0'
    """
    check_pvm(p, v, m)
    per = []
    for r in range(p):
        fst = np.repeat(np.arange(v) * p + r, m)
        bst = fst[::-1]
        per.append((np.concatenate([fst, bst]).astype(np.int32), np.repeat(np.array([F, B], np.int8), v * m),
                    np.concatenate([np.tile(np.arange(m), v), np.tile(np.arange(m)[::-1], v)]).astype(np.int32)))
    return Schedule.from_arrays(p, v, m, "looped_bfs", per)


# ---- zero bubble (Qi et al., ICLR 2024, "Zero Bubble Pipeline Parallelism") ------------------

def _zb_handcrafted(p: int, m: int, warmup: Callable[[int], int], defer: Callable[[int], int], name: str) -> Schedule:
    """1F1B with the backward split into ``I`` and ``W``, weight gradients deferred.

    Rank ``r`` runs ``warmup(r)`` forwards, then ``(F, I)`` pairs, then the remaining ``I``; a ``W``
    (oldest first) follows each ``I`` once ``defer(r)`` steady pairs have passed, and the ``W`` left
    at the end drain last. Deferring ``W`` on the later ranks fills the tail where they would wait
    for rank 0's last input gradients (Qi et al., ICLR 2024, section 3; the construction torch 2.x
    uses for its zero-bubble schedules).
    """
    per = []
    for r in range(p):
        w = min(warmup(r), m)
        acts: list[tuple[int, int, int]] = []
        nf = ni = nw = 0
        for op in range(m + w):
            if op < m:
                acts.append((r, F, nf))
                nf += 1
            if op >= w:
                acts.append((r, I, ni))
                ni += 1
                if op - w >= defer(r):
                    acts.append((r, W, nw))
                    nw += 1
        acts.extend((r, W, j) for j in range(nw, m))
        per.append((np.array([a[0] for a in acts], np.int32), np.array([a[1] for a in acts], np.int8), np.array([a[2] for a in acts], np.int32)))
    return Schedule.from_arrays(p, 1, m, name, per)


def zb_h1(p: int, m: int) -> Schedule:
    """ZB-H1: Qi et al. (ICLR 2024), backward split into I and W; 1F1B's warm-up, ``W`` deferred by ``r``.

    Peak activation memory of the worst rank equals 1F1B's (``p`` micro-batches); with equal
    times and ``m >= p`` the makespan is ``m (tF + tI + tW) + (p - 1)(tF + tI - tW)`` against 1F1B's
    ``(m + p - 1)(tF + tI + tW)`` (fewer micro-batches than ranks leave no ``W`` to fill the bubble).

    >>> zb_h1(2, 2).to_text()
    ['0F0 0F1 0I0 0W0 0I1 0W1', '1F0 1I0 1F1 1I1 1W0 1W1']
    """
    check_pvm(p, 1, m, per=3)
    return _zb_handcrafted(p, m, lambda r: p - 1 - r, lambda r: r, "zb_h1")


def zb_h2(p: int, m: int) -> Schedule:
    """ZB-H2: Qi et al. (ICLR 2024), ``2(p - 1 - r) + 1`` warm-up forwards fill the start-up bubble.

    Rank ``r`` defers its weight gradients by ``2r`` steady pairs (ZB-H1 defers by ``r``), so the
    ``W`` it holds back fill the waits for input gradients in the steady phase and the tail, and
    the makespan is ``m (tF + tI + tW) + (p - 1) tF`` for ``m >= 2p`` (the lower bound of one
    iteration: rank ``p - 1`` cannot start before ``(p - 1) tF``), against ZB-H1's
    ``m (tF + tI + tW) + (p - 1)(tF + tI - tW)``. Deferring only by ``r`` would give exactly ZB-H1's
    makespan with twice its memory. About twice 1F1B's activation memory (``2p`` micro-batches in
    flight on the worst rank).

    >>> zb_h2(2, 3).to_text()[0]
    '0F0 0F1 0F2 0I0 0W0 0I1 0W1 0I2 0W2'
    """
    check_pvm(p, 1, m, per=3)
    return _zb_handcrafted(p, m, lambda r: 2 * (p - 1 - r) + 1, lambda r: 2 * r, "zb_h2")


def zbv(p: int, m: int) -> Schedule:
    """ZB-V: Qi et al. (ICLR 2024, section 6), two chunks per rank in a V (stage ``s >= p`` on rank ``2p-1-s``).

    Rank ``r`` runs ``2(p - r) - 1`` chunk-0 forwards, ``r`` (chunk-1, chunk-0) forward pairs, then
    ``p - r`` rounds of chunk-1 F, I, W; the steady phase alternates chunk 0 (F, I, W) and chunk 1
    (F, I, W); the cool-down interleaves the remaining I's and drains the W's. Built for
    ``max(m, 2p - 1)`` micro-batches, the extra ones dropped (the construction torch 2.x uses).

    >>> zbv(2, 3).to_text()[1]
    '1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1I1 2I2 1I2 1W1 2W2 1W2'
    """
    check_pvm(p, 2, m, per=3)
    n = max(2 * p - 1, m)
    S = 2 * p
    per = []
    for r in range(p):
        s0, s1 = r, S - 1 - r
        acts: list[tuple[int, int, int]] = []
        cnt = {"f0": 0, "f1": 0, "b0": 0, "b1": 0}

        def put(stage: int, kind: int, key: str) -> None:
            acts.append((stage, kind, cnt[key]))
            cnt[key] += 1

        for _ in range(2 * (p - r) - 1):
            put(s0, F, "f0")
        for _ in range(r):
            put(s1, F, "f1")
            put(s0, F, "f0")
        for _ in range(p - r):
            put(s1, F, "f1")
            acts.append((s1, I, cnt["b1"]))
            acts.append((s1, W, cnt["b1"]))
            cnt["b1"] += 1
        while cnt["f1"] < cnt["f0"] or cnt["f0"] < n:
            if cnt["f0"] < n:
                put(s0, F, "f0")
            acts.append((s0, I, cnt["b0"]))
            acts.append((s0, W, cnt["b0"]))
            cnt["b0"] += 1
            put(s1, F, "f1")
            acts.append((s1, I, cnt["b1"]))
            acts.append((s1, W, cnt["b1"]))
            cnt["b1"] += 1
        w0, w1 = cnt["b0"], cnt["b1"]
        for _ in range(r):
            put(s0, I, "b0")
            put(s1, I, "b1")
        for _ in range(p - r):
            put(s0, I, "b0")
            acts.append((s0, W, w0))
            w0 += 1
        acts.extend((s1, W, j) for j in range(w1, cnt["b1"]))
        acts.extend((s0, W, j) for j in range(w0, cnt["b0"]))
        acts = [a for a in acts if a[2] < m]
        per.append((np.array([a[0] for a in acts], np.int32), np.array([a[1] for a in acts], np.int8), np.array([a[2] for a in acts], np.int32)))
    return Schedule.from_arrays(p, 2, m, "zbv", per, style="v")


def is_patent_schedule(s: Schedule) -> bool:
    """Whether ``s`` is the patent's: interleaved 1F1B grouped as ``[p + r, p, ..., p]``.

    >>> from hetsched.pipeline import interleaved_1f1b
    >>> is_patent_schedule(interleaved_1f1b(4, 2, 10, grouping="paddle")), is_patent_schedule(interleaved_1f1b(4, 2, 10, grouping="torch"))
    (True, False)
    """
    if s.m < s.p or s.style != "loop" or s.n_actions != 2 * s.n_stages * s.m or np.isin(s.kind, [I, W]).any():
        return False
    return s == interleaved_1f1b(s.p, s.v, s.m, grouping="paddle")


def interleaved_zero_bubble(p: int, v: int, m: int, grouping: str | Sequence[int] | Callable = "torch") -> Schedule:
    """Interleaved zero bubble: ZB1P (Qi et al., ICLR 2024), interleaved 1F1B with the backward split.

    The order torch 2.13's ``ScheduleInterleavedZeroBubble`` runs: micro-batches in groups
    (torch's equal rounds by default); rank ``r`` runs ``(v - 1) g0 + (p - 1 - r)`` warm-up
    forwards (one per hop from the last rank, where interleaved 1F1B has two: the split backward
    frees the slot), then ``(F, I)`` pairs with chunks in the interleaved order, then the
    remaining ``I``; weight gradients follow their ``I`` in the same order, each deferred by
    ``r`` input gradients, and the deferred ones drain at the end.

    Parameters
    ----------
    grouping : {"torch", "balanced", "paddle", "megatron"}, list of int, or callable
        Micro-batch groups as in :func:`interleaved_1f1b`; ``"torch"`` (default) is torch's
        (and refuses ``m % max(1, m // p) != 0``, as torch does).

    >>> interleaved_zero_bubble(2, 2, 2).to_text()[1]
    '1F0 1F1 3F0 3I0 3F1 3I1 3W0 1I0 3W1 1I1 1W0 1W1'
    """
    check_pvm(p, v, m, per=3)
    sizes = groups(p, m, grouping)
    fc, fm = _group_sequence(v, sizes, False)
    bc, bm = _group_sequence(v, sizes, True)
    n = v * m
    per = []
    for r in range(p):
        w = min(n, (v - 1) * sizes[0] + (p - 1 - r))
        acts: list[tuple[int, int, int]] = []
        nb = nw = 0

        def backward() -> None:
            nonlocal nb, nw
            acts.append((int(bc[nb]) * p + r, I, int(bm[nb])))
            nb += 1
            if nb - 1 >= r:  # the weight gradient of the backward ``r`` places back
                acts.append((int(bc[nw]) * p + r, W, int(bm[nw])))
                nw += 1

        for k in range(n):
            acts.append((int(fc[k]) * p + r, F, int(fm[k])))
            if k >= w:
                backward()
        while nb < n:
            backward()
        acts.extend((int(bc[j]) * p + r, W, int(bm[j])) for j in range(nw, n))
        per.append(tuple(np.array([a[i] for a in acts], dt) for i, dt in ((0, np.int32), (1, np.int8), (2, np.int32))))
    label = grouping if isinstance(grouping, str) else "custom"
    return Schedule.from_arrays(p, v, m, f"interleaved_zero_bubble[{label}]", per,
                                meta={"groups": list(map(int, sizes))})


def dualpipev(p: int, m: int) -> Schedule:
    """DualPipeV: the "cut-in-half" DualPipe (DeepSeek-V3 report, arXiv 2412.19437, section 3.2.1),
    two chunks per rank in a V, forward and backward chunks overlapped in the steady phase.

    The order torch 2.13's ``ScheduleDualPipeV`` runs, for ``m >= 2p`` (torch refuses fewer
    micro-batches than stages). With ``c0`` the rank's first chunk (stage ``r``) and ``c1`` its
    second (stage ``2p - 1 - r``), rank ``r`` runs: ``2 (p - r - 1)`` forwards of ``c0``; ``r + 1``
    pairs ``F c0, F c1``; ``p - r - 1`` rounds of ``I c1, W, F c1`` (zero bubble); the main phase,
    ``m - 2p + r + 1`` rounds of two overlapped pairs ``(F c0 ; B c1)`` and ``(F c1 ; B c0)`` (the last
    rank runs its first ``F c0, B c1`` apart); ``p - r - 1`` rounds of ``B c1`` then ``(F c1 ; B c0)``;
    ``r + 1`` rounds of a ``c1`` then a ``c0`` backward, full until the middle round and split
    (``I``, weight gradient deferred) after it; ``p - r - 1`` rounds of ``W`` then a ``c0``
    backward; and the ``r + 1`` deferred ``W`` (oldest first).

    An overlapped pair is two actions here, forward first (torch's ``OVERLAP_F_B`` runs its two
    sub-actions in that order unless a custom function overlaps them); its positions are in
    ``meta["overlap"]`` (per rank, the index of the pair's forward).

    >>> s = dualpipev(2, 4)
    >>> s.to_text()[0]
    '0F0 0F1 0F2 3F0 3I0 3W0 3F1 0F3 3B1 3F2 0B0 3B2 3F3 0B1 3B3 0I2 0W2 0I3 0W3'
    >>> s.meta["overlap"][0]
    [7, 9, 12]
    """
    check_pvm(p, 2, m, per=3)
    if m < 2 * p:
        raise ScheduleError(f"dualpipev needs at least as many micro-batches as stages (m >= 2p = {2 * p}), got m={m} (torch raises the same)", field="m")
    S = 2 * p
    per, overlaps = [], []
    for r in range(p):
        c0, c1 = r, S - 1 - r
        acts: list[tuple[int, int, int]] = []
        nf = {c0: 0, c1: 0}
        nb = {c0: 0, c1: 0}  # backward (B or I) counters, per stage
        pending: list[tuple[int, int]] = []  # (stage, micro-batch) of I's whose W is not placed
        ov: list[int] = []

        def fwd(stage: int) -> None:
            acts.append((stage, F, nf[stage]))
            nf[stage] += 1

        def bwd(stage: int, split: bool) -> None:
            acts.append((stage, I if split else B, nb[stage]))
            if split:
                pending.append((stage, nb[stage]))
            nb[stage] += 1

        def weight() -> None:
            if pending:
                stage, mb = pending.pop(0)
                acts.append((stage, W, mb))

        def overlapped(f_stage: int, b_stage: int) -> None:
            ov.append(len(acts))
            fwd(f_stage)
            bwd(b_stage, False)

        for _ in range(2 * (p - r - 1)):
            fwd(c0)
        for _ in range(r + 1):
            fwd(c0)
            fwd(c1)
        for _ in range(p - r - 1):
            bwd(c1, True)
            weight()
            fwd(c1)
        for i in range(m - 2 * p + r + 1):
            if i == 0 and r == p - 1:  # not overlapped: a smaller bubble on the last rank
                fwd(c0)
                bwd(c1, False)
            else:
                overlapped(c0, c1)
            overlapped(c1, c0)
        for _ in range(p - r - 1):
            bwd(c1, False)
            overlapped(c1, c0)
        split = False
        half = (r + 1) // 2
        for i in range(r + 1):
            if i == half and r % 2 == 1:
                split = True
            bwd(c1, split)
            if i == half and r % 2 == 0:
                split = True
            bwd(c0, split)
        for _ in range(p - r - 1):
            weight()
            bwd(c0, split)
        for _ in range(r + 1):
            weight()
        per.append(tuple(np.array([a[i] for a in acts], dt) for i, dt in ((0, np.int32), (1, np.int8), (2, np.int32))))
        overlaps.append(ov)
    return Schedule.from_arrays(p, 2, m, "dualpipev", per, style="v", meta={"overlap": overlaps})


def _pvm(gen: Callable[..., Schedule]) -> Callable[..., Schedule]:
    """``gen`` as ``f(p, v, m, **options)``, with its docstring (a schedule of fixed chunks ignores ``v``)."""
    takes_v = "v" in inspect.signature(gen).parameters

    def run(p: int, v: int, m: int, **options: Any) -> Schedule:
        return gen(p, v, m, **options) if takes_v else gen(p, m, **options)

    run.__name__, run.__qualname__, run.__doc__ = gen.__name__, gen.__qualname__, gen.__doc__
    return run


#: Generators by name, each ``f(p, v, m, **options) -> Schedule`` (use :func:`make_schedule`); the
#: registry idiom (:mod:`hetsched.registry`): ``label``/``describe`` give a panel its name and line.
SCHEDULES: dict[str, Callable[..., Schedule]] = {name: _pvm(gen) for name, gen in {
    "gpipe": gpipe, "1f1b": one_f_one_b, "looped_bfs": looped_bfs, "interleaved_1f1b": interleaved_1f1b,
    "interleaved_fthenb": interleaved_fthenb, "zb_h1": zb_h1, "zb_h2": zb_h2, "zbv": zbv,
    "interleaved_zero_bubble": interleaved_zero_bubble, "dualpipev": dualpipev}.items()}

#: What each schedule takes, as data (panels enable their controls from it): ``v`` is the fixed
#: number of chunks per rank (``None``: any), ``options`` the keyword options it accepts,
#: ``split_backward`` whether it runs ``I``/``W`` instead of ``B``, ``placement`` the stage layout,
#: ``torch`` the torch 2.13 class it equals (``None``: none).
SCHEDULE_INFO: dict[str, dict] = {
    "gpipe": {"v": 1, "options": (), "split_backward": False, "placement": "loop", "torch": "ScheduleGPipe"},
    "1f1b": {"v": 1, "options": (), "split_backward": False, "placement": "loop", "torch": "Schedule1F1B"},
    "looped_bfs": {"v": None, "options": (), "split_backward": False, "placement": "loop", "torch": "ScheduleLoopedBFS"},
    "interleaved_1f1b": {"v": None, "options": ("grouping", "group_size"), "split_backward": False, "placement": "loop", "torch": "ScheduleInterleaved1F1B"},
    "interleaved_fthenb": {"v": None, "options": (), "split_backward": False, "placement": "loop", "torch": None},
    "zb_h1": {"v": 1, "options": (), "split_backward": True, "placement": "loop", "torch": None},
    "zb_h2": {"v": 1, "options": (), "split_backward": True, "placement": "loop", "torch": None},
    "zbv": {"v": 2, "options": (), "split_backward": True, "placement": "v", "torch": "ScheduleZBVZeroBubble"},
    "interleaved_zero_bubble": {"v": None, "options": ("grouping",), "split_backward": True, "placement": "loop", "torch": "ScheduleInterleavedZeroBubble"},
    "dualpipev": {"v": 2, "options": (), "split_backward": True, "placement": "v", "torch": "ScheduleDualPipeV"},
}


def schedule_v(name: str, v: int | None = None) -> int:
    """The chunks per rank schedule ``name`` runs: its fixed ``v`` (1 for GPipe, 1F1B, ZB-H1/H2;
    2 for ZB-V and DualPipeV), else ``v`` (default 2).

    >>> schedule_v("1f1b", 4), schedule_v("zbv"), schedule_v("interleaved_1f1b", 3)
    (1, 2, 3)
    """
    if name not in SCHEDULE_INFO:
        raise ScheduleError(f"unknown schedule {name!r}; choose one of {sorted(SCHEDULES)}", field="schedule")
    fixed = SCHEDULE_INFO[name]["v"]
    return fixed if fixed is not None else (2 if v is None else v)


def make_schedule(name: str | Callable[..., Schedule], p: int, v: int | None, m: int, **options) -> Schedule:
    """Build a schedule by name from :data:`SCHEDULES` (or call a generator passed directly).

    ``v=None`` takes the schedule's own (:func:`schedule_v`). A schedule whose chunks per rank are
    fixed (``gpipe``, ``1f1b``, ``zb_h1``, ``zb_h2``: 1; ``zbv``, ``dualpipev``: 2) runs that many
    whatever ``v`` says, and says so: the ``v`` asked for is kept in ``meta["v_requested"]`` (the
    what-if runner and the CLI refuse it instead). An option the schedule does not take is an error.

    >>> make_schedule("interleaved_1f1b", 4, 2, 8, grouping="torch").meta["groups"]
    [4, 4]
    >>> s = make_schedule("1f1b", 4, 2, 8); s.v, s.meta["v_requested"]
    (1, 2)
    """
    gen = lookup(SCHEDULES, name, what="schedule", error=ScheduleError)
    if gen is not SCHEDULES.get(name if isinstance(name, str) else None):
        check_pvm(p, 2 if v is None else v, m)
        return gen(p, v, m, **options)
    info = SCHEDULE_INFO[name]
    unknown = sorted(set(options) - set(info["options"]))
    if unknown:
        takes = ", ".join(info["options"]) or "no options"
        raise ScheduleError(f"schedule {name!r} does not take {', '.join(unknown)} (it takes {takes})", field=unknown[0])
    check_pvm(p, 2 if v is None else v, m)  # v < 1 is bad input even where the schedule fixes it
    s = gen(p, schedule_v(name, v), m, **options)
    if v is not None and v != s.v:
        s = Schedule(s.p, s.v, s.m, s.name, s.stage, s.kind, s.microbatch, s.offsets, s.style, {**s.meta, "v_requested": v})
    return s
