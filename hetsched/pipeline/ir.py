"""The pipeline schedule IR: ``Action(stage, kind, microbatch)`` and per-rank ``Schedule`` lists.

One small IR for every schedule, as in ``torch.distributed.pipelining``: a schedule is, for each
rank, the ordered list of compute actions it runs. An action is a forward ``F``, a full backward
``B``, or a backward split into input-gradient ``I`` and weight-gradient ``W`` (zero-bubble
schedules, Qi et al., ICLR 2024). Its text form is ``"<stage><kind><microbatch>"``, e.g. ``"2F0"``,
and parses back.

Notation (used throughout :mod:`hetsched.pipeline`): ``p`` ranks, ``v`` chunks (virtual stages) per
rank, ``m`` micro-batches, ``S = p * v`` global stages, and in the usual *looped* placement global
stage = ``chunk * p + rank``. V-shaped schedules (ZB-V) place chunk 1 in reverse: stage ``s >= p``
lives on rank ``2p - 1 - s``.

Internally a schedule is three flat numpy arrays (``stage``, ``kind``, ``microbatch``) plus per-rank
offsets: a million actions cost a few megabytes and every pass can be vectorised. ``Action`` objects
and ``schedule.actions[r]`` are thin views built on demand.

Examples
--------
>>> a = Action.parse("2F0")
>>> a, str(a), a.kind
(Action(stage=2, kind='F', microbatch=0), '2F0', 'F')
>>> s = Schedule.from_text(["0F0 0F1 0B0 0B1", "1F0 1B0 1F1 1B1"], p=2, v=1, m=2, name="demo")
>>> s.to_text()[1]
'1F0 1B0 1F1 1B1'
>>> s.n_actions, s.stage_to_rank.tolist()
(8, [0, 1])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from ..errors import FormatError, ScheduleError

__all__ = ["KINDS", "PHASES", "Action", "Schedule", "format_grid", "action_phases", "split_backward", "merge_backward",
           "stage_to_rank_map"]

#: Action kinds, in their integer code order (``kind`` array values index this tuple).
KINDS = ("F", "B", "I", "W")
F, B, I, W = 0, 1, 2, 3
_CODE = {k: i for i, k in enumerate(KINDS)}
_RE = re.compile(r"^\s*(\d+)\s*([FBIW])\s*(\d+)\s*$")


class Action(NamedTuple):
    """One compute action: run ``kind`` of global ``stage`` on ``microbatch``.

    >>> str(Action(3, "B", 12))
    '3B12'
    >>> Action.parse(" 3B12 ") == Action(3, "B", 12)
    True
    """

    stage: int
    kind: str
    microbatch: int

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{self.microbatch}"

    @staticmethod
    def parse(text: str) -> "Action":
        """Parse ``"2F0"`` (stage, kind in F/B/I/W, micro-batch); raises ``FormatError`` otherwise."""
        mt = _RE.match(str(text))
        if not mt:
            raise FormatError(f"cannot parse pipeline action {text!r}: expected <stage><F|B|I|W><microbatch>, e.g. '2F0'", field="action")
        return Action(int(mt.group(1)), mt.group(2), int(mt.group(3)))


def stage_to_rank_map(p: int, v: int, style: str = "loop") -> np.ndarray:
    """Rank of every global stage: ``loop`` (stage ``c*p + r`` on rank ``r``) or ``v`` (V shape).

    >>> stage_to_rank_map(2, 2, "v").tolist()
    [0, 1, 1, 0]
    """
    s = np.arange(p * v)
    if style == "loop":
        return s % p
    if style == "v":
        c, r = s // p, s % p
        return np.where(c % 2 == 0, r, p - 1 - r)
    raise ScheduleError(f"unknown stage placement style {style!r} (use 'loop' or 'v')", field="style")


@dataclass(frozen=True, eq=False)
class Schedule:
    """Per-rank ordered compute actions of a pipeline schedule, plus ``p``, ``v``, ``m`` and a name.

    Attributes
    ----------
    p, v, m : int
        Ranks, chunks per rank, micro-batches.
    name : str
        Which generator (and options) made it, e.g. ``"interleaved_1f1b[balanced]"``.
    stage, kind, microbatch : ndarray
        Flat action arrays, rank 0's actions first (``kind`` indexes :data:`KINDS`).
    offsets : ndarray
        ``offsets[r]:offsets[r+1]`` is rank ``r``'s slice of the flat arrays.
    style : str
        Stage placement: ``"loop"`` or ``"v"`` (see :func:`stage_to_rank_map`).
    """

    p: int
    v: int
    m: int
    name: str
    stage: np.ndarray
    kind: np.ndarray
    microbatch: np.ndarray
    offsets: np.ndarray
    style: str = "loop"
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for a in (self.stage, self.kind, self.microbatch, self.offsets):
            if isinstance(a, np.ndarray) and a.flags.writeable:
                a.setflags(write=False)

    # --- construction -------------------------------------------------------------------------
    @classmethod
    def from_arrays(cls, p: int, v: int, m: int, name: str, per_rank: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], *, style: str = "loop", meta: dict | None = None) -> "Schedule":
        """Build from one ``(stage, kind, microbatch)`` array triple per rank (kinds as codes 0..3 = F, B, I, W).

        >>> Schedule.from_arrays(1, 1, 1, "one", [([0, 0], [0, 1], [0, 0])]).to_text()
        ['0F0 0B0']
        """
        if len(per_rank) != p:
            raise ScheduleError(f"schedule {name!r} has {len(per_rank)} rank lists for p={p}", field="p")
        lens = [len(t[0]) for t in per_rank]
        offsets = np.zeros(p + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        cat = (lambda i, dt: np.concatenate([np.asarray(t[i], dtype=dt) for t in per_rank]) if p else np.zeros(0, dt))
        # __post_init__ makes the arrays read-only, so a validated schedule stays valid
        return cls(p, v, m, name, cat(0, np.int32), cat(1, np.int8), cat(2, np.int32), offsets, style, dict(meta or {}))

    @classmethod
    def from_actions(cls, actions: Sequence[Iterable[Action | str | None]], *, p: int | None = None, v: int | None = None, m: int | None = None, name: str = "custom", style: str = "loop") -> "Schedule":
        """Build from per-rank lists of ``Action`` or their text (``None``/``""`` entries are skipped).

        ``p``, ``v``, ``m`` are inferred when omitted (``v`` from the highest stage, ``m`` from the
        highest micro-batch).

        >>> s = Schedule.from_actions([[Action(0, "F", 0), "0B0"], ["1F0", None, "1B0"]])
        >>> s.p, s.v, s.m, s.n_actions
        (2, 1, 1, 4)
        """
        per_rank = []
        for lst in actions:
            acts = [a if isinstance(a, Action) else Action.parse(a) for a in lst if a is not None and a != ""]
            for a in acts:
                if a.kind not in _CODE:
                    raise FormatError(f"unknown action kind {a.kind!r} in {a}", field="kind")
            per_rank.append((np.array([a.stage for a in acts], np.int32), np.array([_CODE[a.kind] for a in acts], np.int8), np.array([a.microbatch for a in acts], np.int32)))
        p = len(per_rank) if p is None else p
        smax = max((int(t[0].max()) for t in per_rank if len(t[0])), default=-1)
        mmax = max((int(t[2].max()) for t in per_rank if len(t[2])), default=-1)
        v = max(1, -(-(smax + 1) // max(p, 1))) if v is None else v
        m = mmax + 1 if m is None else m
        return cls.from_arrays(p, v, m, name, per_rank, style=style)

    @classmethod
    def from_text(cls, rows: Sequence[str], **kw) -> "Schedule":
        """Build from one space- or comma-separated string per rank (``"0F0 0F1 0B0"``).

        >>> Schedule.from_text(["0F0, 0B0"]).actions
        [[Action(stage=0, kind='F', microbatch=0), Action(stage=0, kind='B', microbatch=0)]]
        """
        return cls.from_actions([[t for t in re.split(r"[\s,]+", row.strip()) if t] for row in rows], **kw)

    # --- views --------------------------------------------------------------------------------
    @property
    def n_stages(self) -> int:
        return self.p * self.v

    @property
    def n_actions(self) -> int:
        return int(self.offsets[-1])

    @property
    def stage_to_rank(self) -> np.ndarray:
        """Rank of every global stage under this schedule's placement style."""
        return stage_to_rank_map(self.p, self.v, self.style)

    @property
    def rank(self) -> np.ndarray:
        """Rank of every flat action."""
        return np.repeat(np.arange(self.p), np.diff(self.offsets))

    def rank_slice(self, r: int) -> slice:
        """Slice of rank ``r``'s actions in the flat arrays.

        >>> Schedule.from_text(["0F0 0B0", "1F0 1B0"]).rank_slice(1)
        slice(2, 4, None)
        """
        return slice(int(self.offsets[r]), int(self.offsets[r + 1]))

    @property
    def actions(self) -> list[list[Action]]:
        """Per-rank ``Action`` lists (built on demand: prefer the arrays for big schedules)."""
        out = []
        for r in range(self.p):
            sl = self.rank_slice(r)
            out.append([Action(int(s), KINDS[k], int(mb)) for s, k, mb in zip(self.stage[sl], self.kind[sl], self.microbatch[sl])])
        return out

    def to_text(self, sep: str = " ") -> list[str]:
        """One string per rank, actions in text form.

        >>> Schedule.from_text(["0F0 0B0"]).to_text(sep=",")
        ['0F0,0B0']
        """
        return [sep.join(str(a) for a in acts) for acts in self.actions]

    def labels(self, style: str = "torch") -> np.ndarray:
        """A text label per flat action, for the cells of a grid or a Gantt.

        ``"torch"``: the action text torch's visualiser writes in each cell (``"0F3"``: stage,
        kind, micro-batch); ``"microbatch"``: kind and micro-batch only (``"F3"``, for narrow
        cells where the lane already says the rank and the shade the chunk).

        >>> Schedule.from_text(["0F0 0B0", "1F0 1B0"]).labels().tolist()
        ['0F0', '0B0', '1F0', '1B0']
        >>> Schedule.from_text(["0F0 0B0"]).labels("microbatch").tolist()
        ['F0', 'B0']
        """
        if style not in ("torch", "microbatch"):
            raise ScheduleError(f"label style must be 'torch' or 'microbatch', got {style!r}", field="style")
        kinds = np.array(KINDS, dtype=object)[self.kind]
        mbs = self.microbatch.astype(str).astype(object)
        if style == "microbatch":
            return kinds + mbs
        return self.stage.astype(str).astype(object) + kinds + mbs

    def with_name(self, name: str) -> "Schedule":
        """The same actions under another name.

        >>> Schedule.from_text(["0F0 0B0"]).with_name("mine").name
        'mine'
        """
        return Schedule(self.p, self.v, self.m, name, self.stage, self.kind, self.microbatch, self.offsets, self.style, dict(self.meta))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Schedule):
            return NotImplemented
        return (
            (self.p, self.v, self.m) == (other.p, other.v, other.m)
            # on one rank both placements put every stage there: a CSV cannot tell them apart
            and (self.style == other.style or self.p == 1)
            and np.array_equal(self.offsets, other.offsets)
            and np.array_equal(self.stage, other.stage)
            and np.array_equal(self.kind, other.kind)
            and np.array_equal(self.microbatch, other.microbatch)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Schedule({self.name!r}, p={self.p}, v={self.v}, m={self.m}, {self.n_actions} actions)"

    def grid(self, around: int | None = None, *, radius: int = 4, rank: int | None = None) -> str:
        """The step x rank grid (torch's ``_format_pipeline_order`` layout); see :func:`format_grid`.

        >>> "1B0" in Schedule.from_text(["0F0 0B0", "1F0 1B0"]).grid()
        True
        """
        return format_grid(self, around=around, radius=radius, rank=rank)


def format_grid(schedule: Schedule, around: int | None = None, *, radius: int = 4, rank: int | None = None) -> str:
    """Render actions as a step (row) x rank (column) grid; mark step ``around`` with ``<-- HERE``.

    Step ``k`` of a rank is its ``k``-th action. With ``around``, only steps within ``radius`` of
    it are shown (what an error message needs).

    >>> s = Schedule.from_text(["0F0 0B0", "1F0 1B0"])
    >>> print(format_grid(s, around=1))
             rank 0 rank 1
    step 0:  0F0    1F0
    step 1:  0B0    1B0     <-- HERE
    """
    cols = [[str(a) for a in acts] for acts in schedule.actions]
    n = max((len(c) for c in cols), default=0)
    lo, hi = (0, n) if around is None else (max(0, around - radius), min(n, around + radius + 1))
    labels = [f"step {k}:" for k in range(lo, hi)]
    lw = max([len(x) for x in labels] + [0]) + 1
    widths = [max([len(f"rank {r}")] + [len(x) for x in c[lo:hi]]) for r, c in enumerate(cols)]
    lines = [" " * lw + " " + " ".join(f"rank {r}".ljust(w) for r, w in enumerate(widths))]
    for k, lab in zip(range(lo, hi), labels):
        cells = " ".join((c[k] if k < len(c) else "").ljust(w) for c, w in zip(cols, widths))
        mark = "  <-- HERE" + (f" (rank {rank})" if rank is not None else "") if k == around else ""
        lines.append((lab.ljust(lw) + " " + cells + mark).rstrip() if not mark else lab.ljust(lw) + " " + cells + mark)
    return "\n".join(lines)


#: A rank's phases, in order (:func:`action_phases`).
PHASES = ("warm-up", "steady", "cool-down")


def action_phases(schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Each flat action's phase on its rank and its micro-step: ``(phase, micro_step)``.

    ``phase`` is one of :data:`PHASES`. A rank that interleaves forwards and backwards has a steady
    phase as Megatron-LM counts it (Narayanan et al., SC 2021: warm-up forwards, then one forward
    and one backward at a time, then the remaining backwards): it opens with the forward just
    before the rank's first backward and closes with the backward just after its last forward;
    what comes before is warm-up, what comes after cool-down (1F1B: ``p - 1 - rank`` actions each;
    the interleaved pipeline patent's schedule: its warm-up forwards, :func:`~hetsched.pipeline.patent_parameters`).
    A rank that runs all its forwards before any backward (GPipe) has no steady phase: forwards are
    warm-up, the rest cool-down.
    ``micro_step`` counts per rank: the ``k``-th forward is forward micro-step ``k``, the ``k``-th
    backward (``B`` or ``I``) backward micro-step ``k`` (the "current step" of the micro-batch a
    unit processes in the patent's claims 7 and 11, as :func:`~hetsched.pipeline.patent_queues`
    numbers them); a ``W`` has the micro-step of the backward before it.

    >>> s = Schedule.from_text(["0F0 0F1 0B0 0F2 0B1 0B2", "1F0 1B0 1F1 1B1 1F2 1B2"], p=2, v=1, m=3)
    >>> phase, micro = action_phases(s)
    >>> phase[:6].tolist(), micro[:6].tolist()
    (['warm-up', 'steady', 'steady', 'steady', 'steady', 'cool-down'], [0, 1, 0, 2, 1, 2])
    >>> sorted(set(phase[6:]))    # the last rank is steady from its first action to its last
    ['steady']
    """
    kind = schedule.kind
    n = schedule.n_actions
    phase = np.empty(n, dtype=object)
    micro = np.zeros(n, np.int64)
    for rank in range(schedule.p):
        sl = schedule.rank_slice(rank)
        kd = kind[sl]
        is_f = kd == F
        bw = np.flatnonzero((kd == B) | (kd == I))
        fw = np.flatnonzero(is_f)
        pos = np.arange(len(kd))
        first_b = bw[0] if len(bw) else len(kd)
        if len(fw) and len(bw) and fw[-1] > first_b:
            start = fw[fw < first_b][-1] if (fw < first_b).any() else first_b
            end = bw[bw > fw[-1]][0] if (bw > fw[-1]).any() else len(kd)
            phase[sl] = np.where(pos < start, PHASES[0], np.where(pos > end, PHASES[2], PHASES[1]))
        else:
            phase[sl] = np.where(pos < first_b, PHASES[0], PHASES[2])
        is_b = ~is_f & (kd != W)
        micro[sl] = np.where(is_f, np.cumsum(is_f) - 1, np.cumsum(is_b) - 1)
    return phase, micro


# ---- passes: list -> list ----------------------------------------------------------------------

def split_backward(schedule: Schedule, *, defer_w: bool = False) -> Schedule:
    """Replace every ``B`` by ``I`` then ``W`` (same place); ``defer_w`` moves all ``W`` to the rank's end.

    >>> split_backward(Schedule.from_text(["0F0 0B0"])).to_text()
    ['0F0 0I0 0W0']
    """
    per = []
    for r in range(schedule.p):
        sl = schedule.rank_slice(r)
        st, kd, mb = schedule.stage[sl], schedule.kind[sl], schedule.microbatch[sl]
        isb = kd == B
        rep = np.where(isb, 2, 1)
        st2, mb2 = np.repeat(st, rep), np.repeat(mb, rep)
        kd2 = np.repeat(kd, rep).astype(np.int8)
        pos = np.cumsum(rep) - 1  # last copy of each source action
        kd2[pos[isb] - 1] = I
        kd2[pos[isb]] = W
        if defer_w:
            w = kd2 == W
            keep = np.concatenate([np.flatnonzero(~w), np.flatnonzero(w)])
            st2, kd2, mb2 = st2[keep], kd2[keep], mb2[keep]
        per.append((st2, kd2, mb2))
    return Schedule.from_arrays(schedule.p, schedule.v, schedule.m, schedule.name + "+split", per, style=schedule.style)


def merge_backward(schedule: Schedule) -> Schedule:
    """Replace each ``I`` by a full ``B`` and drop the matching ``W`` (inverse of :func:`split_backward`).

    >>> merge_backward(Schedule.from_text(["0F0 0I0 0W0"])).to_text()
    ['0F0 0B0']
    """
    per = []
    for r in range(schedule.p):
        sl = schedule.rank_slice(r)
        st, kd, mb = schedule.stage[sl], schedule.kind[sl].copy(), schedule.microbatch[sl]
        keep = kd != W
        kd[kd == I] = B
        per.append((st[keep], kd[keep], mb[keep]))
    return Schedule.from_arrays(schedule.p, schedule.v, schedule.m, schedule.name + "+merged", per, style=schedule.style)
