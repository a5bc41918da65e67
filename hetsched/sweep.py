"""What-if sweeps: run a function over a parameter grid, in parallel, resumably.

``sweep(fn, grid)`` returns a tidy frame, one row per grid point: its parameters, the metrics ``fn``
returned, ``runtime_s`` and ``error``. Any ``concurrent.futures.Executor`` runs the points: a local
process pool by default, or a Dask cluster (``distributed.Client(...).get_executor()``) for users
who outgrow one machine.

With ``cache="sweep.csv"`` (or ``.parquet``) every finished point is recorded as it completes; an
interrupted sweep resumes without recomputing and loses nothing. Each cached record carries a
CRC-32 of its content, so a corrupted cache is reported, not trusted.

Examples
--------
>>> def area(w, h):
...     return {"area": w * h}
>>> df = sweep(area, {"w": [1, 2], "h": [10]}, executor="serial")
>>> df[["w", "h", "area"]].values.tolist()
[[1, 10, 10], [2, 10, 20]]
"""

from __future__ import annotations

import concurrent.futures as cf
import csv
import itertools
import json
import os
import pickle
import sys
import time
import traceback
import types
import warnings
import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from .errors import FormatError, HetschedError, Infeasible, UnsupportedOpError

__all__ = ["sweep", "expand_grid", "SweepCache"]

_CACHE_COLUMNS = ["_key", "_record", "_crc"]


def expand_grid(grid: Mapping[str, Sequence[Any]] | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Grid points: the cartesian product of a dict of lists, or an explicit list of dicts.

    >>> expand_grid({"a": [1, 2], "b": ["x"]})
    [{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'x'}]
    """
    if isinstance(grid, Mapping):
        keys = list(grid)
        for k in keys:
            v = grid[k]
            if isinstance(v, (str, bytes)) or not isinstance(v, Iterable):
                raise HetschedError(f"grid value of {k!r} must be a list of values, got {v!r}", field=k)
        return [dict(zip(keys, combo)) for combo in itertools.product(*(list(grid[k]) for k in keys))]
    points = [dict(p) for p in grid]
    for i, p in enumerate(points):
        if not isinstance(p, dict):
            raise HetschedError(f"grid point {i} is not a mapping: {p!r}", field=f"grid[{i}]")
    return points


def _key(params: Mapping[str, Any]) -> str:
    try:
        return json.dumps(params, sort_keys=True, default=str)
    except TypeError as e:  # pragma: no cover - default=str makes this rare
        raise HetschedError(f"grid point {params!r} cannot be keyed: {e}") from None


def _crc(text: str) -> str:
    return f"{zlib.crc32(text.encode()):08x}"


class SweepCache:
    """Records of finished points in a CSV or Parquet file (``_key``, ``_record`` JSON, ``_crc``).

    >>> import tempfile, os
    >>> c = SweepCache(os.path.join(tempfile.mkdtemp(), "s.csv"))
    >>> c.add({"a": 1}, {"a": 1, "y": 2.5}); SweepCache(c.path).load()
    {'{"a": 1}': {'a': 1, 'y': 2.5}}
    """

    def __init__(self, path: str | os.PathLike, *, on_corrupt: str = "raise") -> None:
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix not in (".csv", ".parquet"):
            raise FormatError(f"sweep cache {self.path.name!r} must end in .csv or .parquet", field="cache")
        if on_corrupt not in ("raise", "recompute"):
            raise HetschedError(f"on_corrupt must be 'raise' or 'recompute', got {on_corrupt!r}", field="on_corrupt")
        self.format = suffix[1:]
        self.on_corrupt = on_corrupt
        self._rows: list[dict[str, str]] = []
        self._loaded = False

    def _corrupt(self, why: str) -> dict[str, dict]:
        msg = f"sweep cache {str(self.path)!r} is corrupted ({why}); not trusting it"
        if self.on_corrupt == "raise":
            raise FormatError(msg + ": delete it or pass on_corrupt='recompute'", field="cache")
        aside = self.path.with_name(self.path.name + ".corrupt")
        os.replace(self.path, aside)
        warnings.warn(msg + f"; moved aside to {aside.name} and recomputing", stacklevel=3)
        self._rows = []
        return {}

    def load(self) -> dict[str, dict[str, Any]]:
        """Finished records by key; a bad file raises ``FormatError`` (or is moved aside).

        A CSV cache whose last line was cut short (the machine died mid-write: the line has no
        newline yet) loses only that record, and the file is repaired so later appends stay valid.
        """
        self._loaded = True
        if not self.path.exists():
            self._rows = []
            return {}
        if self.format == "csv":
            return self._load_csv()
        try:
            df = pd.read_parquet(self.path)
        except ImportError as e:
            raise HetschedError(f"reading {self.path.name} needs pyarrow: {e}", field="cache") from None
        except Exception as e:  # any parse failure means the file cannot be trusted
            return self._corrupt(f"unreadable: {type(e).__name__}")
        if list(df.columns) != _CACHE_COLUMNS:
            return self._corrupt(f"columns {list(df.columns)} instead of {_CACHE_COLUMNS}")
        return self._check_rows([[r[c] for c in _CACHE_COLUMNS] for r in df.to_dict("records")], truncated_last=False)

    def _load_csv(self) -> dict[str, dict[str, Any]]:
        # Read line by line rather than with pandas: each record is one physical line (JSON escapes
        # newlines), so a torn last line can be told apart from a corrupted middle one, even when
        # the tear falls inside a quoted field (which makes a whole-file parser give up).
        try:
            text = self.path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            return self._corrupt("not UTF-8 text")
        if not text:
            self._rows = []
            return {}
        complete = text.endswith("\n")
        lines = text.split("\n")
        if complete:
            lines.pop()
        try:
            header = next(csv.reader([lines[0]]))
        except csv.Error:
            header = []
        if header != _CACHE_COLUMNS:
            if not complete and len(lines) == 1 and ",".join(_CACHE_COLUMNS).startswith(lines[0]):
                self._repair([], "a truncated header")  # died while writing the first record
                return {}
            return self._corrupt(f"columns {header} instead of {_CACHE_COLUMNS}")
        rows: list[list[str] | None] = []
        for line in lines[1:]:
            try:
                rows.append(next(csv.reader([line])))
            except (csv.Error, StopIteration):
                rows.append(None)
        return self._check_rows(rows, truncated_last=not complete)

    def _check_rows(self, rows: list, *, truncated_last: bool) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        good: list[dict[str, str]] = []
        for i, r in enumerate(rows):
            ok = (r is not None and len(r) == 3 and all(isinstance(x, str) for x in r) and _crc(r[1]) == r[2])
            rec = None
            if ok:
                try:
                    rec = json.loads(r[1])
                except json.JSONDecodeError:
                    ok = False
            if not ok or not isinstance(rec, dict):
                if truncated_last and i == len(rows) - 1:
                    self._repair(good, "a truncated last record")
                    break
                return self._corrupt(f"record {i} fails its checksum")
            out[r[0]] = rec
            good.append(dict(zip(_CACHE_COLUMNS, r)))
        self._rows = [g for g in good if g["_key"] in out]
        return out

    def _repair(self, good: list[dict[str, str]], what: str) -> None:
        """Rewrite the CSV with its intact records only (atomically), so appends start on a fresh line."""
        warnings.warn(f"sweep cache {self.path.name}: dropping {what} (an interrupted write)", stacklevel=4)
        tmp = self.path.with_name(self.path.name + ".tmp")
        pd.DataFrame(good, columns=_CACHE_COLUMNS).to_csv(tmp, index=False)
        os.replace(tmp, self.path)
        self._rows = list(good)

    def add(self, params: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        """Append one finished point durably (existing records are kept: the file is read first)."""
        if not self._loaded:
            self.load()
        text = json.dumps(record, sort_keys=False, default=_json_default)
        row = {"_key": _key(params), "_record": text, "_crc": _crc(text)}
        self._rows.append(row)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.format == "csv":
            new = not self.path.exists() or self.path.stat().st_size == 0
            with open(self.path, "a", newline="") as f:
                pd.DataFrame([row], columns=_CACHE_COLUMNS).to_csv(f, header=new, index=False)
                f.flush()
                os.fsync(f.fileno())
        else:
            # Parquet cannot append: rewrite atomically so a crash leaves the old file intact
            tmp = self.path.with_name(self.path.name + ".tmp")
            try:
                pd.DataFrame(self._rows, columns=_CACHE_COLUMNS).to_parquet(tmp, index=False)
            except ImportError as e:
                raise HetschedError(f"writing {self.path.name} needs pyarrow: {e}", field="cache") from None
            os.replace(tmp, self.path)


def _json_default(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return str(v)


def _run_point(fn: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
    """Run one point; exceptions become an ``error`` string so one bad point never kills a sweep."""
    t0 = time.perf_counter()
    try:
        out = fn(**params)
        metrics = getattr(out, "metrics", out)
        if not isinstance(metrics, Mapping):
            raise HetschedError(
                f"sweep function returned {type(out).__name__}; expected a dict of metrics or a result with .metrics"
            )
        rec = {**params, **{k: _scalar(v) for k, v in metrics.items()}, "error": None, "error_kind": None}
    except Exception as e:  # noqa: BLE001 - recorded per point, by design
        msg = str(e) if isinstance(e, HetschedError) else f"{type(e).__name__}: {e}"
        if not isinstance(e, HetschedError):
            frames = traceback.extract_tb(e.__traceback__)
            if frames:
                last = frames[-1]
                msg += f" (at {Path(last.filename).name}:{last.lineno} in {last.name})"
        # an infeasible point (nothing fits memory...) is an answer of a what-if sweep, not a fault
        rec = {**params, "error": msg, "error_kind": "infeasible" if isinstance(e, (Infeasible, UnsupportedOpError)) else "error"}
    rec["runtime_s"] = time.perf_counter() - t0
    return rec


def _process_context(fn: Callable[..., Any]):
    """``forkserver`` for an importable ``fn``; ``fork`` only for one defined in ``__main__`` (a notebook).

    Forking a process that runs other threads (Jupyter, Dask, tqdm's monitor) can leave a child
    stuck on a lock some thread held at fork time, and the sweep would hang; a fork server's
    children start from a clean single-threaded process. A function defined in a notebook can
    only reach a worker by ``fork``, so that case keeps it.
    """
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    target = getattr(fn, "func", fn)  # a functools.partial ships its function
    if getattr(target, "__module__", "__main__") == "__main__" and "fork" in methods:
        return mp.get_context("fork")
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


def _executor_error(point: Mapping[str, Any], e: BaseException) -> HetschedError:
    """The executor (not ``fn``) failed on ``point``: an unpicklable ``fn``, a worker that died."""
    return HetschedError(
        f"the executor could not run sweep point {dict(point)!r}: {type(e).__name__}: {e}. A process pool or "
        "Dask needs a picklable fn (a module-level function, not a lambda or a closure); executor='thread' "
        "or 'serial' runs any callable. Points that finished are kept in the cache.",
        field="executor",
    )


def _scalar(v: Any) -> Any:
    if hasattr(v, "item") and callable(v.item):
        try:
            return v.item()
        except (ValueError, TypeError):
            return v
    return v


def sweep(
    fn: Callable[..., Any],
    grid: Mapping[str, Sequence[Any]] | Iterable[Mapping[str, Any]],
    *,
    executor: cf.Executor | str | None = None,
    cache: str | os.PathLike | None = None,
    on_corrupt: str = "raise",
    progress: bool | None = None,
    max_workers: int | None = None,
) -> pd.DataFrame:
    """Run ``fn(**point)`` for every grid point; one tidy row per point.

    Parameters
    ----------
    fn : callable
        Returns a dict of numbers, or a result object with ``.metrics``. With a process pool or
        Dask it must be importable (a module-level function), as ``pickle`` requires.
    grid : dict of lists or list of dicts
        See :func:`expand_grid`.
    executor : Executor, ``"process"``, ``"thread"``, ``"serial"`` or None
        None means a local process pool (``max_workers`` = CPU count). Any
        ``concurrent.futures.Executor`` works, e.g. ``distributed.Client(...).get_executor()``.
        An executor you pass is not shut down. The local pool starts its workers from a fork
        server when ``fn`` lives in an importable module (safe in processes that run threads:
        Jupyter, Dask), so a script that calls ``sweep`` needs the usual
        ``if __name__ == "__main__":`` guard, as on macOS and Windows.
    cache : path, optional
        ``.csv`` or ``.parquet``; finished points are skipped and new ones recorded as they finish.
    on_corrupt : ``"raise"`` (default) or ``"recompute"`` (move the bad cache aside, warn, start over)
    progress : bool, optional
        Show a tqdm bar; by default only when stderr is a terminal.

    Returns
    -------
    DataFrame
        Parameter columns, metric columns, ``error`` (None when fine), ``error_kind`` (None,
        ``"infeasible"`` for a point with no solution: a model that does not fit memory, an op no
        device supports; else ``"error"``) and ``runtime_s``, in grid order.
    """
    points = expand_grid(grid)
    store = SweepCache(cache, on_corrupt=on_corrupt) if cache is not None else None
    done = store.load() if store is not None else {}
    todo = [p for p in points if _key(p) not in done]
    results: dict[str, dict[str, Any]] = dict(done)
    show = (sys.stderr.isatty() if progress is None else progress) and len(todo) > 0
    bar = None
    if show:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(points), initial=len(points) - len(todo), desc="sweep", unit="pt")

    def finish(p: dict[str, Any], rec: dict[str, Any]) -> None:
        results[_key(p)] = rec
        if store is not None and rec.get("error") is None:  # failed points are retried on resume
            store.add(p, rec)
        if bar is not None:
            bar.update(1)

    own = None
    clean = False
    try:
        if executor == "serial" or (executor is None and len(todo) <= 1):
            for p in todo:
                finish(p, _run_point(fn, p))
        else:
            if executor is None or executor == "process":
                try:  # fail here, before any worker starts, rather than inside the pool's feeder thread
                    pickle.dumps(fn)
                except Exception as e:  # noqa: BLE001 - pickling raises many types
                    raise _executor_error(todo[0], e) from e
                own = ex = cf.ProcessPoolExecutor(max_workers=max_workers or os.cpu_count() or 1,
                                                  mp_context=_process_context(fn))
            elif executor == "thread":
                own = ex = cf.ThreadPoolExecutor(max_workers=max_workers or os.cpu_count() or 1)
            elif isinstance(executor, str):
                raise HetschedError(f"unknown executor {executor!r}; use 'process', 'thread', 'serial' or an Executor", field="executor")
            else:
                ex = executor
            futs: dict[Any, dict[str, Any]] = {}
            for p in todo:
                try:
                    futs[ex.submit(_run_point, fn, p)] = p
                except Exception as e:  # noqa: BLE001 - e.g. Dask pickles at submit time
                    raise _executor_error(p, e) from e
            for fut in cf.as_completed(futs):
                p = futs[fut]
                try:
                    rec = fut.result()
                except Exception as e:  # noqa: BLE001 - _run_point catches fn's own errors: the executor failed
                    raise _executor_error(p, e) from e
                finish(p, rec)
        clean = True
    finally:
        if own is not None:
            # after a failure (or Ctrl-C) do not wait, and stop our workers: a wedged one would
            # otherwise hang the caller, or the interpreter's exit, forever
            own.shutdown(wait=clean, cancel_futures=True)
            if not clean:
                for proc in list((getattr(own, "_processes", None) or {}).values()):
                    proc.terminate()
        if bar is not None:
            bar.close()
    rows = [results[_key(p)] for p in points]
    df = pd.DataFrame(rows)
    for c in ("error", "error_kind", "runtime_s"):
        if c not in df.columns:
            df[c] = None
    first = list(dict.fromkeys(k for p in points for k in p))  # every parameter, also of uneven point lists
    tail = ["error", "error_kind", "runtime_s"]
    rest = [c for c in df.columns if c not in first and c not in tail]
    df = df[first + rest + tail]
    n_bad = int(df["error"].notna().sum())
    if n_bad:
        warnings.warn(f"{n_bad} of {len(df)} sweep points failed; see the 'error' column", stacklevel=2)
    return df


class _CallableModule(types.ModuleType):
    """Lets ``hetsched.sweep(fn, grid)`` call :func:`sweep` while ``hetsched.sweep`` stays a module."""

    def __call__(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
