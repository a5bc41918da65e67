"""Who feeds whom: action dependencies, the static rules, and the one list walk that times actions.

Shared by :func:`~hetsched.pipeline.validate` (deadlock check with unit times),
:func:`~hetsched.pipeline.simulate` (real times) and :mod:`.cache` (the unit-step grid), so none of
them imports another's private helpers.

An action's *input* comes from exactly one other action: ``F(s, j)`` from ``F(s-1, j)``; ``B`` or
``I`` of ``(s, j)`` from the backward of stage ``s+1`` (its ``B`` or ``I``), or on the last stage
from their own ``F``; ``W`` from its ``I``. Each rank runs its list in order, so start times are a
longest path over a DAG that one walk per rank computes exactly (:func:`walk`).

Examples
--------
>>> from hetsched.pipeline.ir import Schedule
>>> s = Schedule.from_text(["0F0 0B0", "1F0 1B0"])
>>> dep = checked_dependencies(s)
>>> dep.tolist()
[-1, 3, 0, 2]
>>> start, end = walk(s, dep, [1.0, 2.0, 1.0, 2.0], [0.0] * 4)
>>> start.tolist(), end.tolist()
([0.0, 4.0, 1.0, 2.0], [1.0, 6.0, 2.0, 4.0])
"""

from __future__ import annotations

import weakref
from typing import Sequence

import numpy as np

from ..errors import ScheduleError
from .ir import B, F, I, KINDS, W, Action, Schedule, format_grid

__all__ = ["DEADLOCK", "dependencies", "static_checks", "checked_dependencies", "walk", "unit_steps",
           "deadlock_error", "action_at", "where"]

DEADLOCK = "deadlock"

# Schedules are frozen (read-only arrays), so their dependency array never changes: keep it per
# object, outside the object (a frozen Schedule's ``meta`` is not a cache), dropped with the object.
_CHECKED: dict[int, tuple[weakref.ref, np.ndarray]] = {}


def action_at(s: Schedule, idx: int) -> Action:
    """The action at flat index ``idx``.

    >>> action_at(Schedule.from_text(["0F0 0B0"]), 1)
    Action(stage=0, kind='B', microbatch=0)
    """
    return Action(int(s.stage[idx]), KINDS[int(s.kind[idx])], int(s.microbatch[idx]))


def where(s: Schedule, idx: int) -> tuple[int, int]:
    """``(rank, step)`` of flat action ``idx`` (step: position in the rank's list).

    >>> where(Schedule.from_text(["0F0 0B0", "1F0 1B0"]), 2)
    (1, 0)
    """
    r = int(np.searchsorted(s.offsets, idx, side="right") - 1)
    return r, int(idx - s.offsets[r])


def _fail(s: Schedule, idx: int, what: str, kind: str, **details) -> None:
    r, k = where(s, idx)
    raise ScheduleError(
        f"rank {r}, step {k}: {what}\n\n{format_grid(s, around=k, rank=r)}",
        field=kind, rank=r, step=k, action=str(action_at(s, idx)), **details,
    )


def dependencies(s: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Per flat action: index of the action producing its input (``-1``: none), and ``pos`` lookup.

    ``F(s, j)`` needs ``F(s-1, j)``; ``B``/``I`` of ``(s, j)`` need the input gradient from stage
    ``s+1`` (its ``B`` or ``I``) or, on the last stage, their own ``F``; ``W`` needs its ``I``.
    Returns ``(dep, pos)`` where ``pos[(stage*4 + kind)*m + mb]`` is the flat index (``-1``: absent).
    Assumes :func:`static_checks` passed.

    >>> s = Schedule.from_text(["0F0 0B0", "1F0 1B0"])
    >>> dependencies(s)[0].tolist()   # 0B0 needs 1B0; 1F0 needs 0F0; 1B0 needs its own 1F0
    [-1, 3, 0, 2]
    """
    S, m = s.n_stages, s.m
    st = s.stage.astype(np.int64)
    kd = s.kind.astype(np.int64)
    mb = s.microbatch.astype(np.int64)
    pos = np.full(S * 4 * m, -1, np.int64)
    pos[(st * 4 + kd) * m + mb] = np.arange(len(st))
    dep = np.full(len(st), -1, np.int64)
    sel = (kd == F) & (st > 0)
    dep[sel] = pos[((st[sel] - 1) * 4 + F) * m + mb[sel]]
    isg = (kd == B) | (kd == I)
    last = isg & (st == S - 1)
    dep[last] = pos[(st[last] * 4 + F) * m + mb[last]]
    mid = isg & (st < S - 1)
    gb = pos[((st[mid] + 1) * 4 + B) * m + mb[mid]]
    gi = pos[((st[mid] + 1) * 4 + I) * m + mb[mid]]
    dep[mid] = np.where(gb >= 0, gb, gi)
    isw = kd == W
    dep[isw] = pos[(st[isw] * 4 + I) * m + mb[isw]]
    return dep, pos


def static_checks(s: Schedule) -> None:
    """Completeness, uniqueness, placement and per-rank ordering (everything but deadlock freedom).

    >>> static_checks(Schedule.from_text(["0F0 0B0"]))
    """
    S, m = s.n_stages, s.m
    n = s.n_actions
    st, kd, mb = s.stage, s.kind, s.microbatch
    bad = np.flatnonzero((st < 0) | (st >= S) | (mb < 0) | (mb >= m) | (kd < 0) | (kd > 3))
    if len(bad):
        i = int(bad[0])
        _fail(s, i, f"{action_at(s, i)} is out of range (stages 0..{S - 1}, micro-batches 0..{m - 1})", "range")
    rank = s.rank
    # each stage on exactly one rank
    lo = np.full(S, np.iinfo(np.int64).max)
    hi = np.full(S, -1)
    np.minimum.at(lo, st, rank)
    np.maximum.at(hi, st, rank)
    split = np.flatnonzero((hi >= 0) & (lo != hi))
    if len(split):
        sg = int(split[0])
        i = int(np.flatnonzero((st == sg) & (rank == hi[sg]))[0])
        _fail(s, i, f"stage {sg} is assigned to both rank {lo[sg]} and rank {hi[sg]}", "placement", stage=sg)
    key = (st.astype(np.int64) * 4 + kd) * m + mb
    cnt = np.bincount(key, minlength=S * 4 * m).reshape(S, 4, m)
    dup = np.flatnonzero(cnt.reshape(-1) > 1)
    if len(dup):
        i = int(np.flatnonzero(key == int(dup[0]))[1])
        _fail(s, i, f"{action_at(s, i)} appears more than once", "duplicate")
    nf, nb, ni, nw = cnt[:, F], cnt[:, B], cnt[:, I], cnt[:, W]
    ok = (nf == 1) & (((nb == 1) & (ni == 0) & (nw == 0)) | ((nb == 0) & (ni == 1) & (nw == 1)))
    if not ok.all():
        sg, j = (int(x[0]) for x in np.nonzero(~ok))
        if nf[sg, j] == 0:
            miss = f"{sg}F{j}"
        elif nb[sg, j] + ni[sg, j] == 0:
            miss = f"{sg}B{j} (or {sg}I{j} + {sg}W{j})"
        elif ni[sg, j] and not nw[sg, j]:
            miss = f"{sg}W{j}"
        elif nw[sg, j] and not ni[sg, j]:
            miss = f"{sg}I{j}"
        else:
            miss = f"exactly one of {sg}B{j} or the pair {sg}I{j} + {sg}W{j}"
        raise ScheduleError(
            f"stage {sg}, micro-batch {j}: missing {miss} (every stage needs one F and one B, or one I and one W, per micro-batch)\n\n{format_grid(s, radius=3, around=0)}",
            field="missing", stage=sg, microbatch=j,
        )
    # ordering within a rank: F before B/I, I before W
    pos = np.full(S * 4 * m, -1, np.int64)
    pos[key] = np.arange(n)
    fpos = pos[(st.astype(np.int64) * 4 + F) * m + mb]
    early = np.flatnonzero(((kd == B) | (kd == I)) & (fpos > np.arange(n)))
    if len(early):
        i = int(early[0])
        _fail(s, i, f"{action_at(s, i)} runs before its forward {st[i]}F{mb[i]}", "order")
    ipos = pos[(st.astype(np.int64) * 4 + I) * m + mb]
    earlyw = np.flatnonzero((kd == W) & (ipos > np.arange(n)))
    if len(earlyw):
        i = int(earlyw[0])
        _fail(s, i, f"{action_at(s, i)} runs before its input gradient {st[i]}I{mb[i]}", "order")


def checked_dependencies(s: Schedule) -> np.ndarray:
    """:func:`static_checks` then :func:`dependencies`, computed once per schedule object.

    >>> checked_dependencies(Schedule.from_text(["0F0 0B0"])).tolist()
    [-1, 0]
    """
    hit = _CHECKED.get(id(s))
    if hit is not None and hit[0]() is s:
        return hit[1]
    static_checks(s)
    dep, _ = dependencies(s)
    dep.setflags(write=False)
    key = id(s)
    _CHECKED[key] = (weakref.ref(s, lambda _r, key=key: _CHECKED.pop(key, None)), dep)
    return dep


def walk(s: Schedule, dep: np.ndarray, dur: Sequence[float], cdelay: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every action: each rank runs its list in order, an action waits for its
    input (producer end + ``cdelay``); raises a ``deadlock`` :class:`ScheduleError` if ranks wait
    on each other forever.

    A rank is woken only when the action it waits for ends, so the walk visits each action once
    (about a million actions a second in pure Python).

    >>> s = Schedule.from_text(["0B0 0F0"], p=1, v=1, m=1)
    >>> walk(s, np.array([1, -1]), [1, 1], [0, 0])
    Traceback (most recent call last):
    ...
    hetsched.errors.ScheduleError: deadlock: rank 0, step 0: 0B0 waits for 0F0 (rank 0, step 1), which never runs; ...
    """
    n = s.n_actions
    depl = dep.tolist()
    durl = np.asarray(dur, float).tolist()
    cl = np.asarray(cdelay, float).tolist()
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
        raise deadlock_error(s, ptr, waits_on)
    return np.asarray(start), np.asarray(fin)


def unit_steps(schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Step (unit-time slot) of every action, and the flat index of its input's producer (``-1``).

    Every action lasts one step and crossing ranks is free: the ``step x rank`` grid of torch's
    ``_format_pipeline_order``.

    >>> from hetsched.pipeline import one_f_one_b
    >>> unit_steps(one_f_one_b(2, 2))[0].tolist()   # rank 0: 0F0 0F1 0B0 0B1, rank 1: 1F0 1B0 1F1 1B1
    [0, 1, 3, 5, 1, 2, 3, 4]
    """
    dep = checked_dependencies(schedule)
    start, _ = walk(schedule, dep, np.ones(schedule.n_actions), np.zeros(schedule.n_actions))
    return np.rint(start).astype(np.int64), dep


def deadlock_error(s: Schedule, ptr: Sequence[int], waits_on: Sequence[int], *, why: dict[int, str] | None = None) -> ScheduleError:
    """The error for a stuck walk: the first rank whose next action waits forever.

    ``why`` (rank -> text) replaces the default reason for ranks stuck on something other than a
    missing input (e.g. a blocked lock-step exchange).
    """
    stuck = [(r, int(ptr[r])) for r in range(s.p) if ptr[r] < s.offsets[r + 1]]
    r, idx = stuck[0]
    k = int(idx - s.offsets[r])
    d = int(waits_on[r])
    waits = ", ".join(f"rank {rr} at {action_at(s, ii)}" for rr, ii in stuck[:6])
    if why and r in why:
        reason = why[r]
    else:
        dr, dk = where(s, d)
        reason = f"waits for {action_at(s, d)} (rank {dr}, step {dk}), which never runs"
    return ScheduleError(
        f"deadlock: rank {r}, step {k}: {action_at(s, idx)} {reason}; stuck: {waits}\n\n{format_grid(s, around=k, rank=r)}",
        field=DEADLOCK, rank=r, step=k, action=str(action_at(s, idx)),
        waits_for=str(action_at(s, d)) if d >= 0 else None,
    )
