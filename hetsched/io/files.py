"""Reading input files with one named error for every way it can fail.

>>> read_text("/no/such/file.json", "graph file")
Traceback (most recent call last):
...
hetsched.errors.FormatError: graph file '/no/such/file.json' not found
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..errors import FormatError

__all__ = ["read_text", "read_json", "check_fields", "check_text"]


def read_text(path: str | os.PathLike, what: str) -> str:
    """The UTF-8 text of ``path``; a missing file, a directory, an unreadable or non-UTF-8 file is a
    ``FormatError`` (``field="path"``, or ``"<encoding>"`` for bytes that are not UTF-8)."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FormatError(f"{what} {str(path)!r} not found", field="path") from None
    except IsADirectoryError:
        raise FormatError(f"{what} {str(path)!r} is a directory, not a file", field="path") from None
    except UnicodeDecodeError as e:
        raise FormatError(f"{p.name}: not UTF-8 text (byte {e.start} is {e.object[e.start:e.start + 1]!r})",
                          field="<encoding>") from None
    except OSError as e:  # permission denied, a FIFO that errors, an I/O error
        raise FormatError(f"{what} {str(path)!r} cannot be read: {e.strerror or e}", field="path") from None


def check_fields(d: Mapping[Any, Any], allowed: Iterable[str], where: str, **culprit: Any) -> None:
    """An unknown key of ``d`` is a ``FormatError`` naming it (``field``; an empty key as ``"<empty>"``).

    >>> check_fields({"name": 1, "colour": 2}, ["name"], "device 'a'")
    Traceback (most recent call last):
    ...
    hetsched.errors.FormatError: device 'a': unknown field(s) ['colour']
    """
    bad = sorted((k for k in d if k not in set(allowed)), key=str)
    if bad:
        raise FormatError(f"{where}: unknown field(s) {bad}", field=str(bad[0]) or "<empty>", **culprit)


def check_text(v: str, where: str, field: str, *, what: str | None = None, **culprit: Any) -> str:
    """``v`` if it is valid Unicode text (no lone surrogate, which JSON's ``"\\ud800"`` and YAML's
    escapes can write and no file, table or plot can), else a ``FormatError`` naming ``field``.

    >>> check_text("\\ud800x", "device", "name")
    Traceback (most recent call last):
    ...
    hetsched.errors.FormatError: device: name '\\ud800x' is not valid Unicode text (a lone surrogate)
    """
    try:
        v.encode("utf-8")
    except UnicodeEncodeError:
        raise FormatError(f"{where}: {what or field} {v!r} is not valid Unicode text (a lone surrogate)", field=field,
                          **culprit) from None
    return v


def read_json(p: Path, *, gz: bool = False) -> Any:
    """The JSON document in file ``p`` (gzip-compressed when ``gz``); every way it is unreadable (a
    directory, a truncated or non-gzip file, bytes that are not UTF-8 JSON, nesting too deep to read)
    is a ``FormatError`` naming the file."""
    try:
        raw = p.read_bytes()
        if gz:
            raw = gzip.decompress(raw)
        return json.loads(raw)
    except FileNotFoundError:
        raise FormatError(f"{p.name}: file not found", field="path") from None
    except IsADirectoryError:
        raise FormatError(f"{p.name}: is a directory, not a file", field="path") from None
    except (OSError, EOFError, zlib.error) as e:  # BadGzipFile, a truncated .gz, permission denied
        raise FormatError(f"{p.name}: cannot be read{' as gzip' if gz else ''}: {e}", field="path") from None
    except RecursionError:
        raise FormatError(f"{p.name}: JSON nested too deeply to read", field="<json>") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, an integer beyond the digit limit
        detail = "an integer of more than 4300 digits" if "digits" in str(e) else str(e)[:200]
        raise FormatError(f"{p.name}: not valid JSON: {detail}", field="<json>") from None
