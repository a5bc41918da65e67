"""The one timeline format, its validator, and the Chrome/Perfetto trace export.

A timeline is a tidy ``pandas.DataFrame``, one row per interval:

==============  ==========================================================================
column          meaning
==============  ==========================================================================
``lane``        where it runs: a device, a link direction, a stream, a thread, a rank
``group``       what the lane belongs to (a device, "host", "links", a pipeline...)
``name``        label shown on the bar
``kind``        ``compute``, ``transfer``, ``bubble``, ``wait``, ``blocked``, ``idle``,
                ``launch``, ``alloc`` (a memory allocation: ``bytes`` live on ``device``)
``start_s``     start time in seconds
``end_s``       end time in seconds (``>= start_s``)
==============  ==========================================================================

Optional columns (present in every frame :func:`make_timeline` builds, ``None``/NaN when unused):
``op``, ``tensor``, ``device``, ``stage``, ``chunk``, ``microbatch``, ``bytes``, ``flow``.
``flow`` holds comma-separated ids; rows sharing an id are joined by arrows in a trace (a launch and
its kernel, a producer, its transfer and the consumer).

Rows of kind ``alloc`` may overlap on their lane (they are memory, not work); every other kind is
exclusive on its lane.

A frame whose times count something else than seconds says so in ``attrs["time_unit"]``: ``"step"``
for a memory order (:func:`hetsched.memory.order_timeline`: op ``i`` runs from step ``i`` to
``i + 1``); the columns keep their names so that every view and check reads one format.

Examples
--------
>>> tl = make_timeline([
...     dict(lane="gpu0", group="gpu0", name="a", kind="compute", start_s=0.0, end_s=1.0, op="a"),
...     dict(lane="gpu0", group="gpu0", name="b", kind="compute", start_s=1.0, end_s=2.0, op="b"),
... ])
>>> list(tl.columns[:6])
['lane', 'group', 'name', 'kind', 'start_s', 'end_s']
>>> check_timeline(tl)
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from .errors import TimelineViolation

__all__ = [
    "REQUIRED",
    "OPTIONAL",
    "COLUMNS",
    "EXCLUSIVE_EXEMPT",
    "make_timeline",
    "empty_timeline",
    "TimelineBuilder",
    "check_timeline",
    "memory_usage",
    "peak_memory_by_device",
    "to_chrome_trace",
]

REQUIRED = ("lane", "group", "name", "kind", "start_s", "end_s")
OPTIONAL = ("op", "tensor", "device", "stage", "chunk", "microbatch", "bytes", "flow")
COLUMNS = REQUIRED + OPTIONAL
EXCLUSIVE_EXEMPT = frozenset({"alloc"})
_LABELS = ("lane", "group", "name", "kind")
# text columns that may be missing: object dtype with None, whichever builder made the frame
_TEXT = ("op", "tensor", "device", "flow")
_EPS = 1e-12


def make_timeline(rows: Iterable[Mapping[str, Any]] | Mapping[str, list] | pd.DataFrame) -> pd.DataFrame:
    """Build a timeline frame from row dicts (or a dict of columns), with every column present.

    Extra columns are kept after the standard ones. Times are floats; rows keep their order.

    >>> make_timeline([]).shape
    (0, 14)
    """
    if isinstance(rows, pd.DataFrame):
        df = rows.copy()
    elif isinstance(rows, Mapping):
        # label columns end up object dtype: build them so, skipping a round trip through str dtype
        df = pd.DataFrame(
            {k: pd.Series(v, dtype=object) if (k in _LABELS or k in _TEXT) and not isinstance(v, pd.Series) else v
             for k, v in rows.items()}
        )
    else:
        rows = list(rows)
        df = pd.DataFrame.from_records(rows) if rows else pd.DataFrame(columns=list(COLUMNS))
    for c in COLUMNS:
        if c not in df.columns:
            df[c] = None
    extra = [c for c in df.columns if c not in COLUMNS]
    df = df[list(COLUMNS) + extra]
    df["start_s"] = df["start_s"].astype(float)
    df["end_s"] = df["end_s"].astype(float)
    df["bytes"] = pd.to_numeric(df["bytes"], errors="coerce")
    for c in _LABELS:
        if df[c].dtype != object:
            df[c] = df[c].astype(object)
    for c in _TEXT:
        col = df[c]
        if col.dtype != object:
            df[c] = col.astype(object).where(col.notna(), None)
    return df.reset_index(drop=True)


def empty_timeline() -> pd.DataFrame:
    """A timeline with no rows."""
    return make_timeline([])


class TimelineBuilder:
    """Collects timeline rows as they happen; :meth:`build` makes the frame.

    Every simulator records through one of these (the evaluator, the buffered-backend simulator...),
    so a timeline is built one way: column by column (a dict per row is the slow part at 100k
    rows), every column of :data:`COLUMNS` present. ``flow`` may be given as a
    list that the caller keeps extending (a later reader adds its arrow id to the producer's row):
    it is joined with commas, duplicates dropped, when the frame is built. A simulator that
    computes its rows as arrays (the pipeline's million actions) adds them in blocks with
    :meth:`extend`; rows keep the order they were added in.

    >>> tb = TimelineBuilder()
    >>> tb.add("gpu0", "gpu0", "a", "compute", 0.0, 1.0, op="a")
    >>> f = ["x>b"]; tb.add("gpu0->cpu0", "links", "x", "transfer", 1.0, 2.0, tensor="x", bytes=8, flow=f)
    >>> f.append("x>c"); f.append("x>b")
    >>> tl = tb.build(); len(tb), tl["flow"].iloc[1]
    (2, 'x>b,x>c')
    """

    __slots__ = ("_cols", "_append", "_blocks", "_n_blocks")

    def __init__(self) -> None:
        self._cols: list[list] = [[] for _ in COLUMNS]
        self._append = [c.append for c in self._cols]
        # rows added before the current ones, as (column arrays, made of add()ed rows) (see extend)
        self._blocks: list[tuple[list[np.ndarray], bool]] = []
        self._n_blocks = 0

    def add(self, lane: Any, group: Any, name: Any, kind: str, start_s: float, end_s: float, op: Any = None,
            tensor: Any = None, device: Any = None, stage: Any = None, chunk: Any = None, microbatch: Any = None,
            bytes: float | None = None, flow: str | list[str] | None = None) -> None:  # noqa: A002 - the column's name
        """One row (the optional columns by keyword or position, in :data:`COLUMNS` order)."""
        a = self._append
        a[0](lane)
        a[1](group)
        a[2](name)
        a[3](kind)
        a[4](start_s)
        a[5](end_s)
        a[6](op)
        a[7](tensor)
        a[8](device)
        a[9](stage)
        a[10](chunk)
        a[11](microbatch)
        a[12](bytes)
        a[13](flow)

    def appenders(self) -> list:
        """The ``append`` of each column, in :data:`COLUMNS` order, for a loop adding 100k rows.

        Calling them in order for every row adds the row without a method call per row (which is
        most of the cost of :meth:`add` at that scale). Every row must get all of them.
        """
        return list(self._append)

    def extend(self, lane: Any, group: Any, name: Any, kind: Any, start_s: Any, end_s: Any, op: Any = None,
               tensor: Any = None, device: Any = None, stage: Any = None, chunk: Any = None, microbatch: Any = None,
               bytes: Any = None, flow: Any = None) -> None:  # noqa: A002 - the column's name
        """A block of rows at once: ``start_s`` and ``end_s`` are arrays of one length ``k``; every
        other column is an array of length ``k`` or one value for the whole block.

        Numbers stay numeric arrays and text stays object arrays (``None`` where missing; a builder
        with blocks gives object columns, not pandas' inferred strings), so a million rows never
        become Python objects one by one. ``flow`` entries here are final strings (or ``None``).

        >>> tb = TimelineBuilder()
        >>> tb.add("rank 0", "pipeline", "0F0", "compute", 0.0, 1.0)
        >>> tb.extend(np.array(["rank 0", "rank 1"], dtype=object), "pipeline", "bubble", "bubble",
        ...           np.array([1.0, 0.0]), np.array([2.0, 2.0]), stage=np.nan)
        >>> tl = tb.build(); len(tb), tl["lane"].tolist(), int(tl["stage"].isna().sum())
        (3, ['rank 0', 'rank 0', 'rank 1'], 3)
        """
        t0 = np.asarray(start_s, dtype=float)
        t1 = np.asarray(end_s, dtype=float)
        k = len(t0)
        if t1.shape != (k,):
            raise ValueError(f"extend: start_s has {k} rows, end_s {t1.shape}")
        self._flush()
        block = []
        for c, v in zip(COLUMNS, (lane, group, name, kind, t0, t1, op, tensor, device, stage, chunk, microbatch, bytes, flow)):
            if np.ndim(v) == 0:
                # one value for the block: labels (and None) as objects, numbers as numbers
                a = np.full(k, v, dtype=object if v is None or isinstance(v, str) or c in _LABELS else None)
            else:
                a = np.asarray(v)
                if len(a) != k:
                    raise ValueError(f"extend: column {c!r} has {len(a)} rows, not {k}")
                if a.dtype.kind in "US" or (c in _LABELS and a.dtype != object):
                    a = a.astype(object)
            block.append(a)
        self._blocks.append((block, False))
        self._n_blocks += k

    def _flush(self) -> None:
        """Move the rows added one by one into a block (the appenders keep working: same lists).

        Their ``flow`` lists stay lists (a caller may still extend them) until :meth:`build`.
        """
        n = len(self._cols[0])
        if n:
            self._blocks.append((self._row_arrays(), True))
            self._n_blocks += n
            for col in self._cols:
                col.clear()

    def _row_arrays(self) -> list[np.ndarray]:
        # fromiter: numpy never reads a tuple or a flow list as a row of its own
        return [np.asarray(col, dtype=float) if c in ("start_s", "end_s") else np.fromiter(col, dtype=object, count=len(col))
                for c, col in zip(COLUMNS, self._cols)]

    def __len__(self) -> int:
        return self._n_blocks + len(self._cols[0])

    def build(self) -> pd.DataFrame:
        """The rows as a timeline frame (see :func:`make_timeline`)."""
        if not self._blocks:
            cols = dict(zip(COLUMNS, self._cols))
            cols["flow"] = _joined_flows(cols["flow"])
            return make_timeline(cols)
        blocks = list(self._blocks)
        if self._cols[0]:  # rows added one by one after the last block (left where they are)
            blocks.append((self._row_arrays(), True))
        j = COLUMNS.index("flow")
        out = {}
        for i, c in enumerate(COLUMNS):
            parts = [b[i] for b, _ in blocks]
            if i == j:
                parts = [np.fromiter(_joined_flows(list(p)), dtype=object, count=len(p)) if rows else p
                         for p, (_, rows) in zip(parts, blocks)]
            col = np.concatenate(parts)
            # object Series: pandas would otherwise infer (slow, at a million rows) string columns
            out[c] = pd.Series(col, dtype=object) if col.dtype == object else col
        return make_timeline(out)


def _joined_flows(flows: list) -> list:
    """``flow`` entries given as growing lists of ids, joined with commas (duplicates dropped)."""
    if any(isinstance(f, list) for f in flows):
        return [(",".join(dict.fromkeys(f)) or None) if isinstance(f, list) else f for f in flows]
    return flows


def _fail(kind: str, message: str, **details: Any) -> None:
    raise TimelineViolation(message, kind=kind, **details)


def check_timeline(
    tl: pd.DataFrame,
    graph: Any = None,
    *,
    deps: Iterable[tuple[Any, Any]] | None = None,
    capacity_bytes: Mapping[str, float] | None = None,
    tol: float = 1e-9,
) -> None:
    """Validate a timeline; raise :class:`~hetsched.errors.TimelineViolation` on the first problem.

    Checks
    ------
    * the required columns exist, times are finite and ``end_s >= start_s``;
    * no two non-``alloc`` rows overlap on one lane;
    * dependencies: with ``graph`` (an :class:`~hetsched.graph.OpGraph`), every consumer's
      ``compute`` row starts after its producer's ``compute`` row ends, and every ``transfer`` row
      of a tensor lies between them; with ``deps`` (pairs of keys) the same on the ``op`` column.
      Rows are matched per ``microbatch`` when that column is set (one op runs once per input).
    * memory: with ``capacity_bytes`` (device -> bytes), the ``alloc`` rows live at any instant on a
      device never sum above its capacity.

    ``tol`` is a relative tolerance on times (floating-point sums).

    >>> tl = make_timeline([dict(lane="g", group="g", name="a", kind="compute", start_s=0, end_s=2),
    ...                     dict(lane="g", group="g", name="b", kind="compute", start_s=1, end_s=3)])
    >>> check_timeline(tl)
    Traceback (most recent call last):
    ...
    hetsched.errors.TimelineViolation: rows 'a' [0, 2] and 'b' [1, 3] overlap on lane 'g'
    """
    missing = [c for c in REQUIRED if c not in tl.columns]
    if missing:
        _fail("columns", f"timeline lacks column(s) {missing}", columns=missing)
    if len(tl) == 0:
        return
    start = tl["start_s"].to_numpy(dtype=float)
    end = tl["end_s"].to_numpy(dtype=float)
    bad = ~np.isfinite(start) | ~np.isfinite(end)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        _fail("finite", f"row {tl['name'].iat[i]!r} has a non-finite time", row=i)
    scale = max(1.0, float(np.max(np.abs(end))))
    eps = tol * scale
    neg = end < start - eps
    if neg.any():
        i = int(np.flatnonzero(neg)[0])
        _fail(
            "negative",
            f"row {tl['name'].iat[i]!r} on lane {tl['lane'].iat[i]!r} ends ({end[i]:g}) before it starts ({start[i]:g})",
            row=i,
        )

    # 1. exclusivity per lane
    kinds = tl["kind"].to_numpy(dtype=object)
    excl = np.array([k not in EXCLUSIVE_EXEMPT for k in kinds], dtype=bool)
    sub = tl.loc[excl, ["lane", "name", "start_s", "end_s"]]
    if len(sub):
        sub = sub.assign(_d=sub["end_s"] - sub["start_s"]).sort_values(["lane", "start_s", "_d"], kind="stable")
        lanes = sub["lane"].to_numpy(dtype=object)
        s = sub["start_s"].to_numpy(dtype=float)
        e = sub["end_s"].to_numpy(dtype=float)
        names = sub["name"].to_numpy(dtype=object)
        same = lanes[1:] == lanes[:-1]
        # running max of end within each lane, so a long row followed by two short ones is caught
        prev_end = np.empty_like(e)
        cur = -np.inf
        for i in range(len(e)):
            if i == 0 or lanes[i] != lanes[i - 1]:
                cur = -np.inf
            prev_end[i] = cur
            cur = max(cur, e[i])
        over = np.flatnonzero(same & (s[1:] < prev_end[1:] - eps)) + 1
        if len(over):
            i = int(over[0])
            j = i - 1
            while j > 0 and lanes[j] == lanes[i] and e[j] <= s[i] + eps:
                j -= 1
            _fail(
                "overlap",
                f"rows {names[j]!r} [{s[j]:g}, {e[j]:g}] and {names[i]!r} [{s[i]:g}, {e[i]:g}] overlap on lane {lanes[i]!r}",
                lane=lanes[i],
                rows=(names[j], names[i]),
            )

    # 2. dependencies
    pairs: list[tuple[Any, Any]] = []
    tensor_edges: list[tuple[str, str, str]] = []  # (tensor, producer, consumer)
    if graph is not None:
        for t in graph.tensors.values():
            if t.producer is None:
                continue
            for c in t.consumers:
                pairs.append((t.producer, c))
                tensor_edges.append((t.name, t.producer, c))
    if deps is not None:
        pairs.extend(deps)
    if pairs and "op" in tl.columns:
        comp = tl[(tl["kind"] == "compute") & tl["op"].notna()]
        has_mb = "microbatch" in comp.columns and comp["microbatch"].notna().any()
        keys = list(zip(comp["op"], comp["microbatch"])) if has_mb else [(o, None) for o in comp["op"]]
        first_start: dict[Any, float] = {}
        last_end: dict[Any, float] = {}
        for k, s_, e_ in zip(keys, comp["start_s"].to_numpy(float), comp["end_s"].to_numpy(float)):
            first_start[k] = min(first_start.get(k, np.inf), s_)
            last_end[k] = max(last_end.get(k, -np.inf), e_)
        mbs = sorted({k[1] for k in keys}, key=lambda x: (x is None, str(x)))
        for a, b in pairs:
            for mb in mbs:
                ka, kb = (a, mb), (b, mb)
                if ka in last_end and kb in first_start and first_start[kb] < last_end[ka] - eps:
                    _fail(
                        "dependency",
                        f"op {b!r} starts at {first_start[kb]:g} s before its predecessor {a!r} ends at {last_end[ka]:g} s"
                        + (f" (microbatch {mb})" if mb is not None else ""),
                        op=b,
                        pred=a,
                    )
        if tensor_edges and "tensor" in tl.columns:
            tr = tl[(tl["kind"] == "transfer") & tl["tensor"].notna()]
            if len(tr):
                by_tensor: dict[Any, list[tuple[float, float, Any, Any]]] = defaultdict(list)
                mbcol = tr["microbatch"] if has_mb else [None] * len(tr)
                for tname, s_, e_, op_, mb in zip(tr["tensor"], tr["start_s"], tr["end_s"], tr["op"], mbcol):
                    by_tensor[tname].append((s_, e_, op_, mb))
                for tname, prod, cons in tensor_edges:
                    for s_, e_, op_, mb in by_tensor.get(tname, ()):
                        kp = (prod, mb)
                        if kp in last_end and s_ < last_end[kp] - eps:
                            _fail(
                                "dependency",
                                f"transfer of tensor {tname!r} starts at {s_:g} s before its producer {prod!r} ends",
                                tensor=tname,
                                op=prod,
                            )
                        kc = (cons, mb)
                        if op_ == cons and kc in first_start and first_start[kc] < e_ - eps:
                            _fail(
                                "dependency",
                                f"op {cons!r} starts before the transfer of its input {tname!r} ends at {e_:g} s",
                                tensor=tname,
                                op=cons,
                            )

    # 3. memory within capacity
    if capacity_bytes:
        curves = memory_usage(tl)
        for dev, cap in capacity_bytes.items():
            c = curves[curves["device"] == dev]
            if len(c) and c["bytes"].max() > cap * (1 + 1e-9):
                i = int(c["bytes"].to_numpy().argmax())
                _fail(
                    "memory",
                    f"device {dev!r} holds {c['bytes'].iat[i]:.0f} bytes at {c['time_s'].iat[i]:g} s, above its capacity {cap:.0f}",
                    device=dev,
                )


def memory_usage(tl: pd.DataFrame) -> pd.DataFrame:
    """Bytes live per device over time from the ``alloc`` rows: a step curve.

    Returns a frame ``device, time_s, bytes`` where ``bytes`` holds from ``time_s`` until the next
    row of the same device. Events at the same instant are summed (frees before allocations, so a
    buffer handed over at ``t`` is not counted twice).

    >>> tl = make_timeline([dict(lane="m", group="g", name="t", kind="alloc", start_s=0, end_s=2, device="g", bytes=5),
    ...                     dict(lane="m", group="g", name="u", kind="alloc", start_s=1, end_s=3, device="g", bytes=7)])
    >>> memory_usage(tl)["bytes"].tolist()
    [5.0, 12.0, 7.0, 0.0]
    """
    a = tl[tl["kind"] == "alloc"]
    if len(a) == 0:
        return pd.DataFrame({"device": pd.Series([], dtype=object), "time_s": [], "bytes": []})
    dev = a["device"].where(a["device"].notna(), a["group"]).to_numpy(dtype=object)
    b = a["bytes"].fillna(0).to_numpy(dtype=float)
    ev = pd.DataFrame(
        {
            "device": np.concatenate([dev, dev]),
            "time_s": np.concatenate([a["start_s"].to_numpy(float), a["end_s"].to_numpy(float)]),
            "delta": np.concatenate([b, -b]),
        }
    )
    ev = ev.groupby(["device", "time_s"], sort=True, as_index=False)["delta"].sum()
    ev["bytes"] = ev.groupby("device")["delta"].cumsum().clip(lower=0)
    return ev[["device", "time_s", "bytes"]].reset_index(drop=True)


def peak_memory_by_device(tl: pd.DataFrame) -> dict[str, float]:
    """Peak live bytes per device (from the ``alloc`` rows)."""
    m = memory_usage(tl)
    return {str(k): float(v) for k, v in m.groupby("device")["bytes"].max().items()} if len(m) else {}


def to_chrome_trace(tl: pd.DataFrame, path: str | Path | None = None, *, name: str = "hetsched") -> dict:
    """Chrome / Perfetto trace-event JSON of a timeline.

    One process per ``group`` (with a ``process_name`` metadata event), one thread per ``lane``
    (``thread_name``), an ``X`` slice per row (microseconds), a counter track per device for the
    ``alloc`` rows, and flow arrows (``s``/``f`` events) joining rows that share a ``flow`` id.

    Parameters
    ----------
    tl : DataFrame
        A timeline.
    path : path, optional
        Where to write the JSON; the dict is returned either way.

    >>> tl = make_timeline([dict(lane="g", group="gpu", name="a", kind="compute", start_s=0, end_s=1e-3)])
    >>> ev = to_chrome_trace(tl)["traceEvents"]
    >>> [e["ph"] for e in ev]
    ['M', 'M', 'X']
    """
    events: list[dict] = []
    pids: dict[Any, int] = {}
    tids: dict[tuple[int, Any], int] = {}
    work = tl[tl["kind"] != "alloc"]
    # host-ish groups first so pid 0 is the host when there is one
    groups = list(dict.fromkeys(work["group"].tolist() + tl["group"].tolist()))
    groups.sort(key=lambda g: (str(g).lower() not in ("host", "cpu"), ))
    for g in groups:
        if g not in pids:
            pids[g] = len(pids)
            events.append({"ph": "M", "name": "process_name", "pid": pids[g], "tid": 0, "args": {"name": str(g)}})
    flows: dict[str, list[tuple[float, float, int, int, int]]] = defaultdict(list)
    # sort so that enclosing slices come before nested ones (trace viewers expect it)
    order = work.assign(_d=work["end_s"] - work["start_s"]).sort_values(["start_s", "_d"], ascending=[True, False], kind="stable")
    for seq, row in enumerate(order.itertuples(index=False)):
        pid = pids[row.group]
        key = (pid, row.lane)
        if key not in tids:
            tids[key] = len([k for k in tids if k[0] == pid]) + 1
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[key], "args": {"name": str(row.lane)}})
        tid = tids[key]
        ts = row.start_s * 1e6
        dur = max(0.0, (row.end_s - row.start_s) * 1e6)
        args = {k: _jsonable(getattr(row, k)) for k in OPTIONAL if k != "flow" and _present(getattr(row, k))}
        events.append({"ph": "X", "name": str(row.name), "cat": str(row.kind), "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args})
        if _present(row.flow):
            for fid in str(row.flow).split(","):
                if fid:
                    flows[fid].append((ts, ts + dur, seq, dur, pid, tid))
    n = 0
    for fid, pts in flows.items():
        # causal order: by start, then end (a zero-length producer before the transfer it starts)
        pts.sort()
        for (ts0, _e0, _q0, dur0, p0, t0), (ts1, _e1, _q1, _d1, p1, t1) in zip(pts, pts[1:]):
            n += 1
            # the arrow leaves at the end of the earlier slice and lands at the start of the later one
            events.append({"ph": "s", "id": n, "name": fid, "cat": "flow", "pid": p0, "tid": t0, "ts": ts0 + dur0 * 0.999})
            events.append({"ph": "f", "bp": "e", "id": n, "name": fid, "cat": "flow", "pid": p1, "tid": t1, "ts": ts1})
    mem = memory_usage(tl)
    for dev, sub in mem.groupby("device", sort=False):
        pid = pids.get(dev, pids.get(next(iter(pids), 0), 0)) if dev in pids else len(pids)
        if dev not in pids:
            pids[dev] = pid
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": str(dev)}})
        for t, b in zip(sub["time_s"], sub["bytes"]):
            events.append({"ph": "C", "name": "memory_bytes", "pid": pid, "ts": float(t) * 1e6, "args": {"bytes": float(b)}})
    # a frame counting steps is drawn one step per second, and says so
    other = {"generator": name, **({"time_unit": tl.attrs["time_unit"]} if "time_unit" in tl.attrs else {})}
    trace = {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}
    if path is not None:
        Path(path).write_text(json.dumps(trace))
    return trace


def _present(v: Any) -> bool:
    if v is None:
        return False
    try:
        return not (isinstance(v, float) and np.isnan(v)) and not pd.isna(v)
    except (TypeError, ValueError):
        return True


def _jsonable(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (str, int, float, bool)):
        return v
    return str(v)
