"""Exports: torch.distributed.pipelining compute-only CSV, and Chrome/Perfetto traces.

The CSV has one row per rank, one cell per action in torch's text form (``"2F0"``), the format
``PipelineScheduleMulti._load_csv(path, format="compute_only")`` reads (checked against torch 2.13:
``csv.reader`` rows, ``_Action.from_str`` per cell, empty cells are idle steps). So a schedule made
here can run on a real torch runtime (``_PipelineScheduleRuntime._load_csv`` lowers it to
send/recv actions itself).

Examples
--------
>>> from hetsched.pipeline import interleaved_1f1b
>>> text = to_torch_csv(interleaved_1f1b(2, 1, 2))
>>> text.splitlines()
['0F0,0F1,0B0,0B1', '1F0,1B0,1F1,1B1']
>>> from_torch_csv(text) == interleaved_1f1b(2, 1, 2)
True
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from ..errors import FormatError, ScheduleError
from ..timeline import to_chrome_trace as _trace
from .deps import unit_steps
from .ir import Action, Schedule, stage_to_rank_map

__all__ = ["to_torch_csv", "from_torch_csv", "to_chrome_trace"]


def to_torch_csv(schedule: Schedule | Any, path: str | Path | None = None, *, padded: bool = False) -> str:
    """Compute-only CSV (one row per rank); written to ``path`` when given, returned either way.

    ``schedule`` may also be a result holding one (a :class:`~hetsched.pipeline.PipelineResult`, e.g.
    :func:`~hetsched.pipeline.synthesize`'s): torch's ``_PipelineScheduleRuntime._load_csv`` loads
    it, lowers it to sends and receives and runs it (``tests/test_pipeline_synth_torch.py`` runs
    synthesized schedules on 2 and 4 gloo ranks).

    ``padded=True`` inserts empty cells so that column ``t`` is the unit-step grid step ``t`` (as
    torch's own ``pipeline_order`` does); torch reads both. Overlapped pairs
    (``meta["overlap"]``, e.g. :func:`~hetsched.pipeline.dualpipev`) are written as torch's
    ``(<F>;<B>)OVERLAP_F_B`` cells unless ``padded``.

    >>> from hetsched.pipeline import one_f_one_b
    >>> to_torch_csv(one_f_one_b(2, 2), padded=True).splitlines()
    ['0F0,0F1,,0B0,,0B1', ',1F0,1B0,1F1,1B1']
    """
    if not isinstance(schedule, Schedule) and isinstance(getattr(schedule, "schedule", None), Schedule):
        schedule = schedule.schedule
    if not isinstance(schedule, Schedule):
        raise ScheduleError(f"to_torch_csv needs a Schedule or a result holding one, got {type(schedule).__name__}", field="schedule")
    rows = []
    if padded:
        steps, _ = unit_steps(schedule)
    overlap = schedule.meta.get("overlap") if not padded else None
    for r, acts in enumerate(schedule.actions):
        cells = [str(a) for a in acts]
        if overlap:  # torch's overlapped pair: one cell "(<F>;<B>)OVERLAP_F_B"
            for i in sorted(overlap[r], reverse=True):
                cells[i : i + 2] = [f"({cells[i]};{cells[i + 1]})OVERLAP_F_B"]
        if padded:
            sl = schedule.rank_slice(r)
            st = steps[sl]
            row = [""] * (int(st.max()) + 1 if len(st) else 0)
            for c, t in zip(cells, st.tolist()):
                row[t] = c
            cells = row
        rows.append(cells)
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    text = buf.getvalue()
    if path is not None:
        Path(path).write_text(text)
    return text


#: torch's action text: ``<stage><type>[<micro-batch>]`` (``2F0``, ``1SEND_F3``, ``0REDUCE_GRAD``).
_TORCH_ACTION = re.compile(r"^(\d+)(F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)(\d*)$")
_COMPUTE = {"F", "B", "I", "W"}


def _parse_cell(cell: str, rank: int, col: int) -> list[tuple[int, str, int | None]]:
    """One CSV cell -> its actions (an ``OVERLAP_F_B`` cell holds several); raises FormatError."""
    text = cell.strip()
    if text.startswith("(") and text.endswith(")OVERLAP_F_B"):
        subs = [x.strip() for x in text[1 : -len(")OVERLAP_F_B")].split(";") if x.strip()]
        out = [a for x in subs for a in _parse_cell(x, rank, col)]
        if not out or any(k not in _COMPUTE or mb is None for _, k, mb in out):
            raise FormatError(f"rank {rank}, column {col}: an OVERLAP_F_B cell must hold compute actions, got {cell!r}", field="action", rank=rank, column=col)
        return out
    mt = _TORCH_ACTION.match(text)
    if not mt:
        raise FormatError(f"rank {rank}, column {col}: cannot read torch action {cell!r} (expected e.g. 2F0, 1SEND_F3, 0REDUCE_GRAD or (0F1;1B0)OVERLAP_F_B)",
                          field="action", rank=rank, column=col)
    stage, kind, mb = int(mt.group(1)), mt.group(2), mt.group(3)
    if kind != "UNSHARD" and kind != "RESHARD" and kind != "REDUCE_GRAD" and mb == "":
        raise FormatError(f"rank {rank}, column {col}: {kind} needs a micro-batch index, got {cell!r}", field="action", rank=rank, column=col)
    return [(stage, kind, int(mb) if mb != "" else None)]


def from_torch_csv(source: str | Path, *, name: str = "csv", v: int | None = None, m: int | None = None, style: str | None = None) -> Schedule:
    """Read a torch schedule CSV (text or a path) into a :class:`Schedule`; empty cells are idle steps.

    Reads every cell torch 2.13 writes: compute actions (``F``, ``B``, ``I``, ``W``), overlapped
    pairs (``(0F5;5B2)OVERLAP_F_B``, read as their sub-actions in order, positions kept in
    ``meta["overlap"]``) and the actions of a ``compute_comms`` dump or of the single-stage IR
    (``SEND_F``, ``RECV_F``, ``SEND_B``, ``RECV_B``, ``UNSHARD``, ``RESHARD``, ``REDUCE_GRAD``),
    which are kept in ``meta["torch_actions"]`` (per rank: ``(compute actions before it, text)``)
    after checking they are consistent with the compute order (a send after the action it sends,
    a receive before the action it feeds, on the rank that holds the stage; a gradient reduction
    after the stage's last backward). ``style`` (``"loop"`` or ``"v"``) is inferred when omitted.

    >>> from_torch_csv("0F0,,0B0,0REDUCE_GRAD" + chr(10) + "1F0,1B0,1REDUCE_GRAD" + chr(10)).to_text()
    ['0F0 0B0', '1F0 1B0']
    >>> s = from_torch_csv("0F0,0SEND_F0,0RECV_B0,0B0" + chr(10) + "1RECV_F0,1F0,1B0,1SEND_B0" + chr(10))
    >>> s.meta["torch_actions"][1]
    [(0, '1RECV_F0'), (2, '1SEND_B0')]
    """
    text = str(source)
    if isinstance(source, Path):
        text = source.read_text()
    elif "\n" not in text and "," not in text and Path(text).exists():
        text = Path(text).read_text()
    rows = list(csv.reader(io.StringIO(text)))
    compute: list[list[Action]] = []
    extra: list[list[tuple[int, str]]] = []
    overlap: list[list[int]] = []
    for r, row in enumerate(rows):
        acts: list[Action] = []
        ex: list[tuple[int, str]] = []
        ov: list[int] = []
        for col, cell in enumerate(row):
            if not cell.strip():
                continue
            parsed = _parse_cell(cell, r, col)
            if len(parsed) > 1:
                ov.append(len(acts))
            for stage, kind, mb in parsed:
                if kind in _COMPUTE:
                    acts.append(Action(stage, kind, mb))
                else:
                    ex.append((len(acts), cell.strip()))
        compute.append(acts)
        extra.append(ex)
        overlap.append(ov)
    p = len(compute)
    smax = max((a.stage for acts in compute for a in acts), default=-1)
    if v is None:
        v = max(1, -(-(smax + 1) // max(p, 1)))
    if style is None:
        style = _infer_style(compute, p, v)
    s = Schedule.from_actions(compute, p=p, v=v, m=m, name=name, style=style)
    _check_torch_actions(s, compute, extra)
    meta = dict(s.meta)
    if any(extra):
        meta["torch_actions"] = extra
    if any(overlap):
        meta["overlap"] = overlap
    return Schedule(s.p, s.v, s.m, s.name, s.stage, s.kind, s.microbatch, s.offsets, s.style, meta)


def _infer_style(compute: list[list[Action]], p: int, v: int) -> str:
    for style in ("loop", "v"):
        try:
            where = stage_to_rank_map(p, v, style)
        except ScheduleError:
            continue
        if all(a.stage < len(where) and where[a.stage] == r for r, acts in enumerate(compute) for a in acts):
            return style
    return "loop"  # validate() names the stage that sits on no consistent rank


def _check_torch_actions(s: Schedule, compute: list[list[Action]], extra: list[list[tuple[int, str]]]) -> None:
    """The non-compute actions must agree with the compute order they were dumped with."""
    for r, ex in enumerate(extra):
        pos = {(a.stage, a.kind, a.microbatch): i for i, a in enumerate(compute[r])}
        for before, cell in ex:
            stage, kind, mb = _parse_cell(cell, r, before)[0]
            bad = None
            if stage >= s.n_stages or int(s.stage_to_rank[stage]) != r:
                bad = f"stage {stage} does not run on rank {r}"
            elif kind in ("SEND_F", "RECV_F", "SEND_B", "RECV_B"):
                fwd = kind.endswith("_F")
                own = [pos.get((stage, k, mb)) for k in (("F",) if fwd else ("B", "I"))]
                own = [i for i in own if i is not None]
                if not own:
                    bad = f"no {stage}{'F' if fwd else 'B/I'}{mb} on rank {r} to {'send from' if kind.startswith('SEND') else 'receive for'}"
                elif kind.startswith("SEND") and before <= own[0]:
                    bad = f"sent before {stage}{'F' if fwd else 'B/I'}{mb} runs"
                elif kind.startswith("RECV") and before > own[0]:
                    bad = f"received after {stage}{'F' if fwd else 'B/I'}{mb} needs it"
            elif kind == "REDUCE_GRAD":
                last = max((i for (st_, k, _), i in pos.items() if st_ == stage and k in ("B", "W")), default=None)
                if last is None or before <= last:
                    bad = f"the gradient of stage {stage} is reduced before its last backward"
            if bad:
                raise FormatError(f"rank {r}: torch action {cell!r}: {bad}", field="action", rank=r, action=cell)


def to_chrome_trace(result, path: str | Path | None = None) -> dict:
    """Chrome/Perfetto trace JSON of a :class:`~hetsched.pipeline.PipelineResult` (via :func:`hetsched.timeline.to_chrome_trace`).

    One thread per rank and per link; flow arrows join a producer, its transfer and its consumer.

    >>> from hetsched.pipeline import one_f_one_b, simulate
    >>> tr = to_chrome_trace(simulate(one_f_one_b(2, 1), costs={"F": 1e-3, "B": 1e-3}))
    >>> sorted({e["cat"] for e in tr["traceEvents"] if e["ph"] == "X"})
    ['bubble', 'compute', 'transfer']
    """
    return _trace(result.timeline, path, name=f"hetsched.pipeline:{result.schedule.name}")
