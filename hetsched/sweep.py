"""What-if sweeps: run a function over a parameter grid, in parallel, resumably.

``sweep(fn, grid)`` returns a tidy frame, one row per grid point: its parameters, the metrics ``fn``
returned, ``runtime_s`` and ``error``. Any ``concurrent.futures.Executor`` runs the points: a local
process pool by default, or a Dask cluster (``distributed.Client(...).get_executor()``) for users
who outgrow one machine.

With ``cache="sweep.csv"`` (or ``.parquet``, or ``.sqlite``) every finished point is committed to a
SQLite store as it completes (``sweep.csv.sqlite``, see :class:`SweepCache`); the CSV/Parquet file
is an export of the store, rewritten when the sweep ends. An interrupted or killed sweep resumes
without recomputing and loses nothing; several processes may sweep into one store at once (a
Dask sweep writes through its client, the process that called ``sweep``). A corrupted store is
reported, not trusted.

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
import itertools
import json
import os
import pickle
import random
import select
import sqlite3
import sys
import threading
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

_LEGACY_COLUMNS = ["_key", "_record", "_crc"]  # the CSV/Parquet cache format before the SQLite store
_TAIL = ["error", "error_kind", "runtime_s"]
_STORE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
_EXPORT_SUFFIXES = (".csv", ".parquet")
#: ``PRAGMA application_id`` of a sweep store ("HSSW"): a database of anything else is never written to
_APP_ID = 0x48535357
#: seconds a writer waits for another writer's transaction (a long export) before giving up
BUSY_TIMEOUT_S = 300.0
_SCHEMA = """
CREATE TABLE IF NOT EXISTS points (
    key    TEXT PRIMARY KEY NOT NULL,  -- the point's parameters, canonical JSON (sorted keys)
    record TEXT NOT NULL,              -- parameters, metrics and runtime_s as JSON
    crc    INTEGER NOT NULL            -- CRC-32 of key and record: a flipped byte in either is caught
)
"""


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
    except (TypeError, ValueError) as e:  # default=str makes this rare (a dict with mixed key types)
        raise HetschedError(f"grid point {params!r} cannot be keyed: {e}") from None


def _crc(key: str, record: str) -> int:
    return zlib.crc32(record.encode(), zlib.crc32(key.encode() + b"\0"))


class SweepCache:
    """The finished points of sweeps, in a SQLite store (one row per point, its key the primary key).

    ``path`` ending in ``.sqlite``/``.sqlite3``/``.db`` is the store itself. A ``.csv`` or
    ``.parquet`` path is an **export**: the store lives beside it (``sweep.csv`` ->
    ``sweep.csv.sqlite``) and :meth:`export` rewrites the file from the store (``sweep`` does so
    when it ends, also after an error or Ctrl-C). The store, not the export, is what resumes.

    SQLite does what a hand-written file format cannot: each point is committed in its own
    transaction (WAL journal, ``synchronous=FULL``), so several processes may write one store at
    once (they wait for each other, up to :data:`BUSY_TIMEOUT_S`), nothing is lost or written
    twice, and a ``kill -9`` at any moment leaves a readable store. On open, ``PRAGMA
    integrity_check`` must pass and every row must match its CRC-32 (a bit flip in a key would
    otherwise make resume silently skip a point); ``on_corrupt`` says what happens if not.

    >>> import tempfile, os
    >>> c = SweepCache(os.path.join(tempfile.mkdtemp(), "s.csv"))
    >>> c.add({"a": 1}, {"a": 1, "y": 2.5}); SweepCache(c.path).load()
    {'{"a": 1}': {'a': 1, 'y': 2.5}}
    >>> c.export().name, c.store_path.name
    ('s.csv', 's.csv.sqlite')
    """

    def __init__(self, path: str | os.PathLike, *, on_corrupt: str = "raise") -> None:
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        if suffix in _STORE_SUFFIXES:
            self.format, self.store_path, self.export_path = "sqlite", self.path, None
        elif suffix in _EXPORT_SUFFIXES:
            self.format, self.export_path = suffix[1:], self.path
            self.store_path = self.path.with_name(self.path.name + ".sqlite")
        else:
            raise FormatError(f"sweep cache {self.path.name!r} must end in .csv, .parquet or .sqlite", field="cache")
        if on_corrupt not in ("raise", "recompute"):
            raise HetschedError(f"on_corrupt must be 'raise' or 'recompute', got {on_corrupt!r}", field="on_corrupt")
        self.on_corrupt = on_corrupt
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()  # one connection, used from whichever thread finishes a point

    # ------------------------------------------------------------------ opening
    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        if self.store_path.is_dir():
            raise FormatError(f"sweep store {str(self.store_path)!r} is a directory", field="cache")
        new = not self.store_path.exists() or self.store_path.stat().st_size == 0
        legacy = self._read_export_for_adoption() if new else []
        try:
            self.store_path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise HetschedError(f"cannot create the folder of sweep store {str(self.store_path)!r}: {e}", field="cache") from None
        try:
            conn = self._open()
        except _Corrupt as e:
            conn = self._corrupt_store(str(e))
        self._conn = conn
        if legacy:
            self._insert_many(legacy)
        return conn

    def _open(self) -> sqlite3.Connection:
        """Open (and on first use create) the store; retried while another process is creating it.

        Two processes opening a new store at once can meet SQLite's lock-upgrade deadlock (one
        switches the file to WAL while the other reads it): SQLite then answers "database is
        locked" at once instead of waiting, so the whole open is retried within the busy timeout.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        while True:
            try:
                return self._open_once()
            except _Busy as e:
                if time.monotonic() > deadline:
                    raise self._busy(e.error) from None
                time.sleep(0.05 + 0.1 * random.random())

    def _open_once(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.store_path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise HetschedError(f"cannot open sweep store {str(self.store_path)!r}: {e}", field="cache") from None
        try:
            bad = [r[0] for r in conn.execute("PRAGMA integrity_check")]
            if bad != ["ok"]:
                raise _Corrupt(f"integrity check: {'; '.join(map(str, bad[:3]))}")
            self._check_ours(conn)  # before the first write: another program's database stays untouched
            if conn.execute("PRAGMA journal_mode=WAL").fetchall()[0][0].lower() != "wal":
                raise HetschedError(f"sweep store {str(self.store_path)!r}: SQLite refused WAL mode", field="cache")
            conn.execute("PRAGMA synchronous=FULL")  # a committed point survives a power cut too
            conn.execute("BEGIN IMMEDIATE")
            try:
                if self._check_ours(conn):  # still new now that we hold the write lock: create it
                    conn.execute(_SCHEMA)
                    conn.execute(f"PRAGMA application_id={_APP_ID}")
                cols = [r[1] for r in conn.execute("PRAGMA table_info(points)")]
                if cols != ["key", "record", "crc"]:
                    raise _Corrupt(f"table points has columns {cols}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as e:
            conn.close()
            if "locked" in str(e) or "busy" in str(e):
                raise _Busy(e) from None
            raise self._busy(e) from None
        except sqlite3.DatabaseError as e:  # "file is not a database", "database disk image is malformed"
            conn.close()
            raise _Corrupt(str(e)) from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_ours(self, conn: sqlite3.Connection) -> bool:
        """True for an empty database (a new store); a database of anything else is a ``FormatError``.

        The id and the tables are read in one read transaction: read apart, another process creating
        the store can commit in between, and the id of the empty file beside the new table looked
        like someone else's database (seen once in CI with two writers opening one new store).
        """
        outer = conn.in_transaction
        if not outer:
            conn.execute("BEGIN")
        try:
            app = conn.execute("PRAGMA application_id").fetchall()[0][0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            if not outer:
                conn.execute("COMMIT")
        if app == 0 and not tables:
            return True
        if app != _APP_ID or "points" not in tables:
            raise FormatError(f"{str(self.store_path)!r} is an SQLite database but not a hetsched sweep store; "
                              "not writing to it", field="cache")
        return False

    def _busy(self, e: sqlite3.OperationalError) -> HetschedError:
        if "locked" in str(e) or "busy" in str(e):
            return HetschedError(f"sweep store {self.store_path.name}: another writer held it for over "
                                 f"{BUSY_TIMEOUT_S:.0f} s ({e})", field="cache")
        if "malformed" in str(e) or "not a database" in str(e):
            return FormatError(f"sweep store {str(self.store_path)!r} is corrupted ({e})", field="cache")
        return HetschedError(f"sweep store {str(self.store_path)!r}: {e}", field="cache")

    def _corrupt_store(self, why: str) -> sqlite3.Connection:
        """``on_corrupt``: raise, or move the store aside (with its journal files) and start a new one."""
        msg = f"sweep store {str(self.store_path)!r} is corrupted ({why}); not trusting it"
        if self.on_corrupt == "raise":
            raise FormatError(msg + ": delete it or pass on_corrupt='recompute'", field="cache")
        for extra in ("", "-wal", "-shm"):
            src = Path(str(self.store_path) + extra)
            if src.exists():
                os.replace(src, Path(str(self.store_path) + ".corrupt" + extra))
        warnings.warn(msg + f"; moved aside to {self.store_path.name}.corrupt and recomputing", stacklevel=4)
        return self._open()

    def _read_export_for_adoption(self) -> list[tuple[str, str]]:
        """An export with no store beside it: records of a legacy cache to import, or nothing.

        A file that is neither a legacy cache nor an export of a sweep is someone else's: it is
        never overwritten.
        """
        p = self.export_path
        if p is None or not p.exists() or (p.is_file() and p.stat().st_size == 0):
            return []
        if p.is_dir():
            raise FormatError(f"sweep cache {str(p)!r} is a directory", field="cache")
        try:
            if self.format == "csv":
                df = pd.read_csv(p, dtype=str, keep_default_na=False)
            else:
                df = pd.read_parquet(p)
        except ImportError as e:
            raise HetschedError(f"reading {p.name} needs pyarrow: {e}", field="cache") from None
        except Exception as e:  # noqa: BLE001 - any parse failure: the file is not ours to overwrite
            raise FormatError(f"sweep cache {str(p)!r} exists but is unreadable ({type(e).__name__}); "
                              "not overwriting it: delete it or choose another path", field="cache") from None
        cols = [str(c) for c in df.columns]
        if cols[-len(_TAIL):] == _TAIL:  # an export whose store was deleted: start afresh, rewrite it
            warnings.warn(f"sweep cache {p.name}: its store {self.store_path.name} is missing; "
                          "recomputing, the export will be rewritten", stacklevel=4)
            return []
        if cols != _LEGACY_COLUMNS:
            raise FormatError(f"sweep cache {str(p)!r} has columns {cols[:6]}: it is neither a sweep export nor a "
                              "legacy cache; not overwriting it: delete it or choose another path", field="cache")
        out, bad = [], []
        for i, (k, rec, crc) in enumerate(df[_LEGACY_COLUMNS].itertuples(index=False)):
            ok = all(isinstance(x, str) for x in (k, rec, crc)) and f"{zlib.crc32(rec.encode()):08x}" == crc
            try:
                ok = ok and isinstance(json.loads(rec), dict) and isinstance(json.loads(k), dict)
            except ValueError:
                ok = False
            (out if ok else bad).append((k, rec) if ok else i)
        if bad:
            msg = f"legacy sweep cache {p.name}: record(s) {bad[:5]} fail their checksum"
            if self.on_corrupt == "raise":
                raise FormatError(msg + ": delete it or pass on_corrupt='recompute'", field="cache")
            warnings.warn(msg + "; recomputing them", stacklevel=4)
        return out

    # ------------------------------------------------------------------ reading and writing
    def _rows(self) -> tuple[list[tuple[str, dict]], list[tuple[int, str]]]:
        """``(good, bad)``: verified ``(key, record)`` rows in insertion order, and ``(rowid, key)`` of bad ones."""
        conn = self._connect()
        try:
            rows = conn.execute("SELECT rowid, key, record, crc FROM points ORDER BY rowid").fetchall()
        except sqlite3.OperationalError as e:
            raise self._busy(e) from None
        except sqlite3.DatabaseError as e:
            raise FormatError(f"sweep store {str(self.store_path)!r} is corrupted ({e})", field="cache") from None
        good, bad = [], []
        for rowid, key, text, crc in rows:
            rec = None
            if isinstance(key, str) and isinstance(text, str) and crc == _crc(key, text):
                try:
                    rec = json.loads(text)
                    if not isinstance(json.loads(key), dict):
                        rec = None
                except ValueError:
                    rec = None
            if isinstance(rec, dict):
                good.append((key, rec))
            else:
                bad.append((rowid, key))
        return good, bad

    def load(self) -> dict[str, dict[str, Any]]:
        """Finished records by key. Rows failing their CRC raise ``FormatError`` naming them, or
        (``on_corrupt="recompute"``) are deleted with a warning so their points run again."""
        with self._lock:
            good, bad = self._rows()
            if bad:
                what = ", ".join(f"row {r} (key {k!r:.60})" for r, k in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
                msg = f"sweep store {str(self.store_path)!r}: {len(bad)} record(s) fail their checksum: {what}"
                if self.on_corrupt == "raise":
                    raise FormatError(msg + ": delete the store or pass on_corrupt='recompute'", field="cache")
                self._write("DELETE FROM points WHERE rowid = ?", [(r,) for r, _ in bad])
                warnings.warn(msg + "; deleted, their points run again", stacklevel=3)
            return dict(good)

    def _write(self, sql: str, rows: list[tuple]) -> None:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(sql, rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as e:
            raise self._busy(e) from None

    def _insert_many(self, rows: list[tuple[str, str]]) -> None:
        # the first record of a point wins: a second writer of the same point adds no duplicate
        self._write("INSERT OR IGNORE INTO points (key, record, crc) VALUES (?, ?, ?)",
                    [(k, r, _crc(k, r)) for k, r in rows])

    def add(self, params: Mapping[str, Any], record: Mapping[str, Any]) -> None:
        """Record one finished point, in its own transaction (committed when this returns)."""
        text = json.dumps(record, sort_keys=False, default=_json_default)
        with self._lock:
            self._insert_many([(_key(params), text)])

    def frame(self) -> pd.DataFrame:
        """Every stored record as a tidy frame: parameters, metrics, then ``error``, ``error_kind``, ``runtime_s``."""
        with self._lock:
            good, bad = self._rows()
        if bad and self.on_corrupt == "raise":
            raise FormatError(f"sweep store {str(self.store_path)!r}: {len(bad)} record(s) fail their checksum", field="cache")
        return _frame([rec for _, rec in good], _param_names(good))

    def export(self) -> Path | None:
        """Rewrite the CSV/Parquet export from the store (atomically); the path written, or None for a bare store.

        The export is written while holding the store's write lock, so exports by several writers
        happen one after another, each holding every record committed before it: the file written
        last is complete. Text cells that a spreadsheet would run as formulas are quoted
        (:func:`hetsched.io.csv_safe`).
        """
        if self.export_path is None:
            return None
        conn = self._connect()
        with self._lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                raise self._busy(e) from None
            try:
                good, _bad = self._rows()
                df = _frame([rec for _, rec in good], _param_names(good))
                self._write_export(df)
            finally:
                conn.execute("COMMIT")  # read-only: nothing to roll back
        return self.export_path

    def _write_export(self, df: pd.DataFrame) -> None:
        import tempfile

        from .io.tables import to_csv_safe

        p = self.export_path
        fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")  # private per writer
        os.close(fd)
        try:
            if self.format == "csv":
                to_csv_safe(df, tmp)
            else:
                try:
                    df.to_parquet(tmp, index=False)
                except ImportError as e:
                    raise HetschedError(f"writing {p.name} needs pyarrow: {e}", field="cache") from None
            os.replace(tmp, p)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def close(self) -> None:
        """Close the store's connection (a later call reopens it)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "SweepCache":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _Busy(Exception):
    """SQLite said "locked" while the store was being opened (retried, see ``SweepCache._open``)."""

    def __init__(self, error: sqlite3.OperationalError) -> None:
        super().__init__(str(error))
        self.error = error


class _Corrupt(Exception):
    """Internal: the store failed a check when opened (handled by ``on_corrupt``)."""


def _param_names(good: list[tuple[str, dict]]) -> list[str]:
    """Parameter names of stored records, in the order the grids gave them (records keep it; keys sort)."""
    names: dict[str, None] = {}
    for key, rec in good:
        params = json.loads(key)
        names.update(dict.fromkeys([k for k in rec if k in params] + list(params)))
    return list(names)


def _frame(rows: list[Mapping[str, Any]], params: list[str]) -> pd.DataFrame:
    """Tidy frame: parameter columns, then metrics, then ``error``, ``error_kind``, ``runtime_s``."""
    df = pd.DataFrame(list(rows))
    for c in _TAIL:
        if c not in df.columns:
            df[c] = None
    for c in params:
        if c not in df.columns:
            df[c] = None
    rest = [c for c in df.columns if c not in params and c not in _TAIL]
    return df[params + rest + _TAIL]


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


def _die_with(pid: int) -> None:
    """Pool-worker initializer: exit as soon as process ``pid`` (the sweep's) is gone, ``kill -9`` included.

    A worker's parent is the fork server, not the sweep's process, and the fork server, the
    resource tracker and idle workers hold each other's pipes open: after a ``kill -9`` of the
    sweep none of them would ever see end-of-file, and all would live on. Once the workers leave,
    the fork server and the resource tracker see their pipes close and exit too.
    """
    import threading

    def watch() -> None:
        try:
            fd = os.pidfd_open(pid)  # Linux >= 5.3: becomes readable when the process has exited
        except ProcessLookupError:
            os._exit(1)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            select.select([fd], [], [])
            os._exit(1)
        parent = os.getppid()
        while True:  # elsewhere: poll (a reused pid is caught when we were forked from it)
            time.sleep(0.5)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:
                pass
            if parent == pid and os.getppid() != pid:
                os._exit(1)

    threading.Thread(target=watch, name="hetsched-sweep-parent-watch", daemon=True).start()


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
        ``.sqlite`` (a store), or ``.csv``/``.parquet`` (an export, its store beside it: see
        :class:`SweepCache`); finished points are skipped, new ones committed as they finish.
    on_corrupt : ``"raise"`` (default) or ``"recompute"``
        For a store that fails its integrity check: move it aside, warn and start over; for rows
        that fail their checksum: delete them, warn and run their points again.
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
    try:
        done = store.load() if store is not None else {}
    except BaseException:
        if store is not None:
            store.close()
        raise
    try:
        results = _run_all(fn, points, done, store, executor=executor, progress=progress, max_workers=max_workers)
    except BaseException:
        if store is not None:
            _export_and_close(store, failing=True)
        raise
    if store is not None:
        _export_and_close(store, failing=False)
    # every parameter first, also of uneven point lists
    df = _frame([results[_key(p)] for p in points], list(dict.fromkeys(k for p in points for k in p)))
    n_bad = int(df["error"].notna().sum())
    if n_bad:
        warnings.warn(f"{n_bad} of {len(df)} sweep points failed; see the 'error' column", stacklevel=2)
    return df


def _export_and_close(store: SweepCache, *, failing: bool) -> None:
    """Rewrite the export from the store; after a failure (Ctrl-C...) a failed export only warns."""
    try:
        store.export()
    except Exception as e:  # noqa: BLE001 - never hide the error that ended the sweep
        if not failing:
            raise
        warnings.warn(f"sweep: could not rewrite {store.path.name} ({e}); the store {store.store_path.name} "
                      "holds every finished point", stacklevel=3)
    finally:
        store.close()


def _run_all(fn: Callable[..., Any], points: list[dict[str, Any]], done: dict[str, dict[str, Any]],
             store: SweepCache | None, *, executor: Any, progress: bool | None,
             max_workers: int | None) -> dict[str, dict[str, Any]]:
    """Run the points not in ``done``, recording each in ``store`` as it finishes; every record by key."""
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
                                                  mp_context=_process_context(fn), initializer=_die_with,
                                                  initargs=(os.getpid(),))
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
    return results


class _CallableModule(types.ModuleType):
    """Lets ``hetsched.sweep(fn, grid)`` call :func:`sweep` while ``hetsched.sweep`` stays a module."""

    def __call__(self, *args: Any, **kwargs: Any) -> pd.DataFrame:
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
