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
from pathlib import Path


from ..timeline import to_chrome_trace as _trace
from .ir import Schedule

__all__ = ["to_torch_csv", "from_torch_csv", "to_chrome_trace"]


def to_torch_csv(schedule: Schedule, path: str | Path | None = None, *, padded: bool = False) -> str:
    """Compute-only CSV (one row per rank); written to ``path`` when given, returned either way.

    ``padded=True`` inserts empty cells so that column ``t`` is the unit-step grid step ``t`` (as
    torch's own ``pipeline_order`` does); torch reads both.

    >>> from hetsched.pipeline import one_f_one_b
    >>> to_torch_csv(one_f_one_b(2, 2), padded=True).splitlines()
    ['0F0,0F1,,0B0,,0B1', ',1F0,1B0,1F1,1B1']
    """
    rows = []
    if padded:
        from .cache import unit_steps

        steps, _ = unit_steps(schedule)
    for r, acts in enumerate(schedule.actions):
        cells = [str(a) for a in acts]
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


def from_torch_csv(source: str | Path, *, name: str = "csv", v: int | None = None, m: int | None = None, style: str = "loop") -> Schedule:
    """Read a compute-only CSV (text or a path) back into a :class:`Schedule`; empty cells are skipped.

    >>> from_torch_csv("0F0,,0B0" + chr(10) + "1F0,1B0" + chr(10)).to_text()
    ['0F0 0B0', '1F0 1B0']
    """
    text = str(source)
    if "\n" not in text and "," not in text and Path(text).exists():
        text = Path(text).read_text()
    elif isinstance(source, Path):
        text = source.read_text()
    rows = list(csv.reader(io.StringIO(text)))
    return Schedule.from_actions(rows, name=name, v=v, m=m, style=style)


def to_chrome_trace(result, path: str | Path | None = None) -> dict:
    """Chrome/Perfetto trace JSON of a :class:`~hetsched.pipeline.PipelineResult` (via :func:`hetsched.timeline.to_chrome_trace`).

    One thread per rank and per link; flow arrows join a producer, its transfer and its consumer.

    >>> from hetsched.pipeline import one_f_one_b, simulate
    >>> tr = to_chrome_trace(simulate(one_f_one_b(2, 1), costs={"F": 1e-3, "B": 1e-3}))
    >>> sorted({e["cat"] for e in tr["traceEvents"] if e["ph"] == "X"})
    ['bubble', 'compute', 'transfer']
    """
    return _trace(result.timeline, path, name=f"hetsched.pipeline:{result.schedule.name}")
