"""Schedule validation: completeness, ordering, placement and deadlock freedom.

:func:`validate` checks that every ``(stage, micro-batch)`` has exactly one ``F`` and either one
``B`` or one ``I`` and one ``W``; ``F`` comes before ``B``/``I`` and ``I`` before ``W`` on the rank; each
stage lives on exactly one rank; and that the ranks can run their lists without a deadlock (a rank
waiting for an input that a rank waiting on it would produce). An error carries the step x rank
grid around the offending step, in torch's ``_format_pipeline_order`` layout.

The static checks are vectorised over flat numpy arrays; the deadlock check is the dependency pass
of :func:`hetsched.pipeline.simulate` run with unit times (one list walk per rank).

Examples
--------
>>> from hetsched.pipeline import Schedule
>>> validate(Schedule.from_text(["0F0 0B0", "1F0 1B0"]))
>>> validate(Schedule.from_text(["0F0 0B0", "1B0 1F0"]))
Traceback (most recent call last):
...
hetsched.errors.ScheduleError: rank 1, step 0: 1B0 runs before its forward 1F0 ...
"""

from __future__ import annotations

import numpy as np

from ..errors import ScheduleError
from .ir import B, F, I, KINDS, W, Action, Schedule, format_grid

__all__ = ["validate", "dependencies", "DEADLOCK"]

DEADLOCK = "deadlock"


def _act(s: Schedule, idx: int) -> Action:
    return Action(int(s.stage[idx]), KINDS[int(s.kind[idx])], int(s.microbatch[idx]))


def _where(s: Schedule, idx: int) -> tuple[int, int]:
    r = int(np.searchsorted(s.offsets, idx, side="right") - 1)
    return r, int(idx - s.offsets[r])


def _fail(s: Schedule, idx: int, what: str, kind: str, **details) -> None:
    r, k = _where(s, idx)
    a = _act(s, idx)
    raise ScheduleError(
        f"rank {r}, step {k}: {what}\n\n{format_grid(s, around=k, rank=r)}",
        field=kind,
        rank=r,
        step=k,
        action=str(a),
        **details,
    )


def dependencies(s: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Per flat action: index of the action producing its input (``-1``: none), and ``pos`` lookup.

    ``F(s, j)`` needs ``F(s-1, j)``; ``B``/``I`` of ``(s, j)`` need the input gradient from stage
    ``s+1`` (its ``B`` or ``I``) or, on the last stage, their own ``F``; ``W`` needs its ``I``.
    Returns ``(dep, pos)`` where ``pos[(stage*4 + kind)*m + mb]`` is the flat index (``-1``: absent).
    Assumes the static checks of :func:`validate` passed.

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
    isf = kd == F
    sel = isf & (st > 0)
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


def _static_checks(s: Schedule) -> None:
    S, m = s.n_stages, s.m
    n = s.n_actions
    st, kd, mb = s.stage, s.kind, s.microbatch
    bad = np.flatnonzero((st < 0) | (st >= S) | (mb < 0) | (mb >= m) | (kd < 0) | (kd > 3))
    if len(bad):
        i = int(bad[0])
        _fail(s, i, f"{_act(s, i)} is out of range (stages 0..{S - 1}, micro-batches 0..{m - 1})", "range")
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
        k = int(dup[0])
        i = int(np.flatnonzero(key == k)[1])
        _fail(s, i, f"{_act(s, i)} appears more than once", "duplicate")
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
            field="missing",
            stage=sg,
            microbatch=j,
        )
    # ordering within a rank: F before B/I, I before W
    pos = np.full(S * 4 * m, -1, np.int64)
    pos[key] = np.arange(n)
    fpos = pos[(st.astype(np.int64) * 4 + F) * m + mb]
    isg = (kd == B) | (kd == I)
    early = np.flatnonzero(isg & (fpos > np.arange(n)))
    if len(early):
        i = int(early[0])
        _fail(s, i, f"{_act(s, i)} runs before its forward {st[i]}F{mb[i]}", "order")
    ipos = pos[(st.astype(np.int64) * 4 + I) * m + mb]
    earlyw = np.flatnonzero((kd == W) & (ipos > np.arange(n)))
    if len(earlyw):
        i = int(earlyw[0])
        _fail(s, i, f"{_act(s, i)} runs before its input gradient {st[i]}I{mb[i]}", "order")


def validate(schedule: Schedule) -> None:
    """Raise :class:`~hetsched.errors.ScheduleError` if ``schedule`` breaks a rule; return ``None`` if valid.

    The error's ``details`` carry ``rank``, ``step`` and ``action`` (or ``stage``/``microbatch`` for a
    missing action), and its message the step x rank grid around the offending step.

    >>> from hetsched.pipeline import interleaved_1f1b
    >>> validate(interleaved_1f1b(4, 2, 10, grouping="paddle"))
    """
    from .simulate import _walk  # the dependency pass lives with the simulator

    _static_checks(schedule)
    dep, _ = dependencies(schedule)
    dur = np.ones(schedule.n_actions)
    _walk(schedule, dep, dur, np.zeros(schedule.n_actions))
    # the arrays are read-only, so simulate() may skip the static checks it would repeat
    schedule.meta["_validated"] = True
    schedule.meta["_dep"] = dep


def _deadlock_error(s: Schedule, ptr: list[int], waits_on: list[int], *, lockstep: bool = False) -> ScheduleError:
    """Build the error for a stuck walk: the first rank whose next action waits forever."""
    stuck = [(r, ptr[r]) for r in range(s.p) if ptr[r] < s.offsets[r + 1]]
    r, idx = stuck[0]
    k = int(idx - s.offsets[r])
    d = int(waits_on[r])
    dr, dk = _where(s, d)
    waits = ", ".join(f"rank {rr} at {_act(s, ii)}" for rr, ii in stuck[:6])
    if lockstep and not _is_input_of(s, d, idx):
        why = f"cannot start: its previous output is handed over only when rank {dr} has finished {_act(s, d)} and posts the receive (lock-step p2p without a cache)"
    else:
        why = f"waits for {_act(s, d)} (rank {dr}, step {dk}), which never runs"
    return ScheduleError(
        f"deadlock: rank {r}, step {k}: {_act(s, idx)} {why}; stuck: {waits}\n\n{format_grid(s, around=k, rank=r)}",
        field=DEADLOCK,
        rank=r,
        step=k,
        action=str(_act(s, idx)),
        waits_for=str(_act(s, d)),
    )


def _is_input_of(s: Schedule, d: int, idx: int) -> bool:
    """Whether action ``d`` produces the input of action ``idx`` (else it is a lock-step hand-over)."""
    dep, _ = dependencies(s)
    return int(dep[idx]) == d
