"""Result tables written as CSV that a spreadsheet opens safely (no formula injection).

A spreadsheet runs a cell that begins with ``=``, ``+``, ``-`` or ``@`` (also tab and carriage
return) as a formula: an op or device named ``=HYPERLINK(...)`` in an exported table would run when
the CSV is opened. Following OWASP's advice ("CSV Injection"), such text cells and column names are
written with a leading single quote, which spreadsheets show but do not evaluate. Numbers are left
alone, also negative ones: ``-3.5`` is a number, not a formula, in a numeric column or as text.

>>> import pandas as pd
>>> df = pd.DataFrame({"op": ["=cmd|' /C calc'!A0", "relu", "-2.5", "@SUM(A1)"], "delta_s": [-1.5, 2.0, 0.0, 1.0]})
>>> csv_safe(df)["op"].tolist()
["'=cmd|' /C calc'!A0", 'relu', '-2.5', "'@SUM(A1)"]
>>> print(to_csv_safe(df.head(1)), end="")
op,delta_s
'=cmd|' /C calc'!A0,-1.5
"""

from __future__ import annotations

import re
from typing import Any

import pandas as pd

__all__ = ["csv_safe", "csv_cell", "to_csv_safe"]

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def csv_cell(value: Any) -> Any:
    """One cell made safe: text a spreadsheet would run as a formula gets a leading ``'``.

    >>> csv_cell("=1+1"), csv_cell("-7"), csv_cell(-7), csv_cell("\\tx"), csv_cell(None)
    ("'=1+1", '-7', -7, "'\\tx", None)
    """
    if value is None or isinstance(value, (bool, int, float, complex)) or hasattr(value, "dtype"):
        return value  # numbers (numpy scalars too) and missing values are data, never formulas
    text = value if isinstance(value, str) else str(value)
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return value


def _safe_series(s: pd.Series) -> pd.Series:
    if pd.api.types.is_numeric_dtype(s.dtype) or pd.api.types.is_bool_dtype(s.dtype):
        return s
    if pd.api.types.is_datetime64_any_dtype(s.dtype) or pd.api.types.is_timedelta64_dtype(s.dtype):
        return s
    return s.astype(object).map(csv_cell)


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``frame`` whose text cells, column names and index are safe to open in a spreadsheet.

    Use it before any ``to_csv`` of a table that may hold user-chosen names (ops, tensors, devices,
    sweep parameters); :func:`to_csv_safe` does both.
    """
    out = frame.copy()
    for i in range(out.shape[1]):
        out.isetitem(i, _safe_series(out.iloc[:, i]))
    out.columns = [csv_cell(c) if isinstance(c, str) else c for c in out.columns]
    if not isinstance(out.index, pd.MultiIndex) and not pd.api.types.is_numeric_dtype(out.index.dtype):
        out.index = pd.Index(_safe_series(out.index.to_series()).to_numpy(), name=out.index.name)
    return out


def to_csv_safe(frame: pd.DataFrame, path_or_buf: Any = None, *, index: bool = False, **kwargs: Any) -> str | None:
    """``csv_safe(frame).to_csv(...)``; ``index`` defaults to False (hetsched tables carry no index).

    Returns the text when ``path_or_buf`` is None, like ``DataFrame.to_csv``.
    """
    return csv_safe(frame).to_csv(path_or_buf, index=index, **kwargs)
