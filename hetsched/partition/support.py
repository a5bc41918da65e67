"""Support tables: which backend runs which op type, with what priority (the patent's "mapping list").

The multi-backend partition patent (``docs/patents.md``, paragraphs 55-61 and its
figure 5) keeps a *mapping list* of ``backend, op type, priority`` (1 = best): "fpga supports d, e,
f, h, k, m; d, e, h, m run faster there than elsewhere (priority 1) while f runs slower than on the
gpu (priority 2)". The list is written by hand from the backends' documentation, or obtained "by
statistics" (paragraph 60): measure or model each op type on each backend and rank them. This
module reads and writes that list (YAML or CSV) and derives priorities from a
:class:`~hetsched.cost.CostModel` (:func:`priorities_from_cost`).

File formats
------------
CSV, one row per entry, header ``backend,op_type,priority``::

    backend,op_type,priority
    fpga0,Conv,1
    gpu0,*,1

YAML, either the nested mapping ``{backend: {op_type: priority}}`` (optionally under a top-level
``support:`` key, as in a system file) or a list of rows ``[{backend, op_type, priority}, ...]``.
``*`` stands for any op type.

Examples
--------
>>> import os, tempfile
>>> p = os.path.join(tempfile.mkdtemp(), "t.csv")
>>> _ = open(p, "w").write("backend,op_type,priority\\nfpga0,Conv,1\\ngpu0,*,2\\n")
>>> load_support_table(p).candidates("Conv")
['fpga0', 'gpu0']
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from ..cost import CostModel, resolve_cost
from ..errors import FormatError, SystemError_
from ..graph import OpGraph
from ..system import SupportTable, System

__all__ = [
    "load_support_table",
    "save_support_table",
    "support_table_from_rows",
    "support_table_frame",
    "rank_backends",
    "priorities_from_cost",
    "edit_support",
]

_ROW_FIELDS = ("backend", "op_type", "priority")


def _priority(v: Any, where: str) -> int:
    """An integer >= 1, or 0 ("not supported": beats the backend's ``*`` row)."""
    bad = f"{where}: priority must be an integer >= 1 (or 0: not supported), got {v!r}"
    if isinstance(v, bool):
        raise FormatError(bad, field="priority")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise FormatError(bad, field="priority") from None
    if f != f or f < 0 or f != int(f):
        raise FormatError(bad, field="priority")
    return int(f)


def support_table_from_rows(rows: Iterable[Mapping[str, Any]], *, source: str = "support table") -> SupportTable:
    """Build a :class:`~hetsched.system.SupportTable` from ``backend, op_type, priority`` rows.

    Errors are :class:`~hetsched.errors.FormatError` naming the row (1-based, as a spreadsheet
    shows it) and the field.

    >>> support_table_from_rows([{"backend": "gpu", "op_type": "*", "priority": 1}]).rows()
    [('gpu', '*', 1)]
    >>> support_table_from_rows([{"backend": "gpu", "op_type": "*", "priority": 1},
    ...                          {"backend": "gpu", "op_type": "Conv", "priority": 0}]).candidates("Conv")
    []
    >>> support_table_from_rows([{"backend": "gpu", "op_type": "Conv", "priority": -1}])
    Traceback (most recent call last):
    ...
    hetsched.errors.FormatError: support table row 1: priority must be an integer >= 1 (or 0: not supported), got -1
    """
    table: dict[str, dict[str, int]] = {}
    for i, row in enumerate(rows, start=1):
        where = f"{source} row {i}"
        if not isinstance(row, Mapping):
            raise FormatError(f"{where}: expected a mapping with {list(_ROW_FIELDS)}, got {row!r}", field="row")
        for fld in _ROW_FIELDS:
            v = row.get(fld)
            if v is None or (isinstance(v, str) and not v.strip()):
                raise FormatError(f"{where}: field {fld!r} is missing or empty", field=fld)
        extra = sorted(set(row) - set(_ROW_FIELDS))
        if extra:
            raise FormatError(f"{where}: unknown field(s) {extra}", field=extra[0])
        backend, op_type = str(row["backend"]).strip(), str(row["op_type"]).strip()
        prio = _priority(row["priority"], where)
        if prio == 0 and op_type == "*":
            raise FormatError(f"{where}: a wildcard '*' needs a priority >= 1 (leave it out to support nothing)",
                              field="priority")
        r = table.setdefault(backend, {})
        if op_type in r:
            raise FormatError(f"{where}: duplicate entry for backend {backend!r} and op_type {op_type!r}", field="op_type")
        r[op_type] = prio
    return SupportTable(table)


def load_support_table(path: str | Path) -> SupportTable:
    """Read a support table (mapping list) from a ``.csv`` or ``.yaml``/``.yml`` file.

    Parameters
    ----------
    path : path
        CSV with columns ``backend, op_type, priority``; or YAML (nested mapping, a ``support:``
        key, or a list of rows).

    Returns
    -------
    SupportTable

    Raises
    ------
    FormatError
        Missing file, bad header, or a bad row: the message names the row and the field.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "t.yaml")
    >>> _ = open(p, "w").write("fpga0: {Conv: 1, Relu: 2}\\ngpu0: {'*': 1}\\n")
    >>> load_support_table(p).candidates("Relu")
    ['gpu0', 'fpga0']
    """
    p = Path(path)
    if not p.exists():
        raise FormatError(f"support table file {str(path)!r} not found", field="path")
    suffix = p.suffix.lower()
    if suffix == ".csv":
        return _from_csv(p.read_text(), p.name)
    if suffix in (".yaml", ".yml"):
        import yaml

        try:
            d = yaml.safe_load(p.read_text())
        except yaml.YAMLError as e:
            raise FormatError(f"{p.name}: not valid YAML: {e}", field="<yaml>") from None
        return _from_yaml(d, p.name)
    raise FormatError(f"{p.name}: unknown support table file type {suffix!r} (expected .csv, .yaml or .yml)", field="path")


def _from_csv(text: str, source: str) -> SupportTable:
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [f for f in _ROW_FIELDS if f not in header]
    if missing:
        raise FormatError(f"{source}: needs columns {list(_ROW_FIELDS)}, has {header}", field=missing[0])
    rows = []
    for row in reader:
        rows.append({k.strip(): (v.strip() if isinstance(v, str) else v) for k, v in row.items() if k is not None})
    # row numbers as a spreadsheet shows them: the header is line 1
    try:
        return support_table_from_rows(rows, source=source)
    except FormatError as e:
        msg = e.message
        # "<source> row i" -> "<source> line i+1"
        prefix = f"{source} row "
        if msg.startswith(prefix):
            num, rest = msg[len(prefix):].split(":", 1)
            msg = f"{source} line {int(num) + 1}:{rest}"
        raise FormatError(msg, field=e.field) from None


def _from_yaml(d: Any, source: str) -> SupportTable:
    if isinstance(d, Mapping) and "support" in d:
        d = d["support"]
    if isinstance(d, list):
        return support_table_from_rows(d, source=source)
    if not isinstance(d, Mapping):
        raise FormatError(f"{source}: expected {{backend: {{op_type: priority}}}} or a list of rows", field="<root>")
    rows = []
    for backend, row in d.items():
        if not isinstance(row, Mapping):
            raise FormatError(f"{source}: backend {backend!r} must map op_type -> priority, got {row!r}", field=str(backend))
        for op_type, prio in row.items():
            rows.append({"backend": backend, "op_type": op_type, "priority": prio})
    return support_table_from_rows(rows, source=source)


def edit_support(table: SupportTable, edits: Mapping[tuple[str, str], int | None]) -> SupportTable:
    """A copy of ``table`` with grid edits applied: ``{(backend, op_type): priority or None}``.

    An integer writes an explicit entry (``0``: "not supported", which beats the backend's ``*``
    row); ``None`` removes the explicit entry, so the cell falls back to the backend's ``*`` row (or
    to "not listed"). This is what a priority grid needs beyond
    :meth:`~hetsched.system.SupportTable.with_priority`, which cannot take an entry back out. A bad
    priority raises :class:`~hetsched.errors.SystemError_` naming the backend and op type.

    >>> t = SupportTable({"gpu": {"*": 1}, "fpga": {"Conv": 1}})
    >>> e = edit_support(t, {("gpu", "Conv"): 0, ("fpga", "Relu"): 2})
    >>> e.lookup("gpu", "Conv"), e.lookup("gpu", "Relu"), e.candidates("Relu")
    ((None, 'excluded'), (1, 'wildcard'), ['gpu', 'fpga'])
    >>> edit_support(e, {("gpu", "Conv"): None}).lookup("gpu", "Conv")   # back to the wildcard
    (1, 'wildcard')
    """
    d = table.as_dict()
    for (backend, op_type), prio in edits.items():
        row = d.setdefault(backend, {})
        if prio is None:
            row.pop(op_type, None)
        else:
            row[op_type] = prio
    return SupportTable(d)


def support_table_frame(table: SupportTable | System) -> pd.DataFrame:
    """The mapping list as a table ``backend, op_type, priority`` (what a widget edits).

    >>> support_table_frame(SupportTable({"gpu": {"*": 1}})).values.tolist()
    [['gpu', '*', 1]]
    """
    t = table.support if isinstance(table, System) else table
    return pd.DataFrame(t.rows(), columns=list(_ROW_FIELDS))


def save_support_table(table: SupportTable | System, path: str | Path) -> None:
    """Write a support table as CSV or YAML (by extension); :func:`load_support_table` reads it back.

    >>> import os, tempfile
    >>> st = SupportTable({"fpga0": {"Conv": 1}, "gpu0": {"*": 2}})
    >>> p = os.path.join(tempfile.mkdtemp(), "t.csv"); save_support_table(st, p)
    >>> load_support_table(p) == st
    True
    """
    t = table.support if isinstance(table, System) else table
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".csv":
        support_table_frame(t).to_csv(p, index=False)
    elif suffix in (".yaml", ".yml"):
        import yaml

        p.write_text(yaml.safe_dump(t.as_dict(), sort_keys=False))
    else:
        raise FormatError(f"{p.name}: unknown support table file type {suffix!r} (expected .csv, .yaml or .yml)", field="path")


def rank_backends(
    graph: OpGraph,
    system: System,
    cost: CostModel | None = None,
    *,
    backends: Iterable[str] | None = None,
    respect_support: bool = True,
) -> pd.DataFrame:
    """Latency of every op type of ``graph`` on every backend, priced by the cost model, ranked.

    Returns a frame ``op_type, backend, n_ops, total_s, mean_s, priority``; ``priority`` is the
    dense rank of ``total_s`` within the op type (1 = fastest; equal times share a priority).

    Parameters
    ----------
    graph, system : the workload and the machine.
    cost : CostModel, optional
        Measured (:class:`~hetsched.cost.TableCost`) or modelled (roofline, the default).
    backends : iterable of str, optional
        Backends to rank (default: the system's compute devices).
    respect_support : bool
        Keep only (op type, backend) pairs that ``system.support`` says are supported: the
        statistics re-rank what a backend *can* run, they do not grant new support.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> f = rank_backends(chain(4), toy_system())
    >>> f[f.op_type == "Conv"].sort_values("priority").backend.tolist()
    ['gpu0', 'fpga0', 'cpu0']
    """
    c = resolve_cost(cost, graph, system)
    names = list(backends) if backends is not None else system.compute_devices
    for b in names:
        system.device(b)
    by_type: dict[str, list] = {}
    for op in graph.ops.values():
        by_type.setdefault(op.op_type, []).append(op)
    rows = []
    for t, ops in by_type.items():
        trows = []
        for b in names:
            if respect_support and not system.support.supports(b, t):
                continue
            total = float(sum(c.compute_s(o, b) for o in ops))
            trows.append([t, b, len(ops), total, total / len(ops)])
        # dense rank with a relative tolerance so float noise does not split equal backends
        trows.sort(key=lambda r: r[3])
        prio, last = 0, None
        for r in trows:
            if last is None or r[3] > last * (1 + 1e-9) + 1e-18:
                prio += 1
                last = r[3]
            rows.append(r + [prio])
    return pd.DataFrame(rows, columns=["op_type", "backend", "n_ops", "total_s", "mean_s", "priority"])


def priorities_from_cost(
    graph: OpGraph,
    system: System,
    cost: CostModel | None = None,
    *,
    backends: Iterable[str] | None = None,
    respect_support: bool = True,
) -> SupportTable:
    """The patent's "statistical" mapping list: rank backends per op type by latency.

    Paragraphs 14, 52-53 and 60 of the partition patent: "if several backends support the same
    op, the one with higher performance gets the higher priority", and the support/priority can be
    obtained "by statistics". Every op of each type in ``graph`` is priced on every backend through
    the cost model (measured or modelled); backends are ranked by the total (dense ranks, 1 =
    fastest). The table has one exact entry per (backend, op type of the graph).

    Parameters
    ----------
    graph, system, cost, backends, respect_support
        As in :func:`rank_backends`.

    Returns
    -------
    SupportTable

    Raises
    ------
    SystemError_
        When an op type of the graph is run by no ranked backend (nothing to rank).

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> st = priorities_from_cost(chain(4), toy_system())
    >>> st.candidates("Conv"), st.priority("fpga0", "Conv")
    (['gpu0', 'fpga0', 'cpu0'], 2)
    """
    f = rank_backends(graph, system, cost, backends=backends, respect_support=respect_support)
    seen = set(f["op_type"])
    missing = [t for t in graph.op_types() if t not in seen]
    if missing:
        raise SystemError_(
            f"no ranked backend runs op type(s) {missing}: cannot derive priorities for them", field=missing[0]
        )
    table: dict[str, dict[str, int]] = {}
    for t, b, p in zip(f["op_type"], f["backend"], f["priority"]):
        table.setdefault(b, {})[t] = int(p)
    # keep the system's backend order so ties resolve as the hand-written table would
    order = [b for b in system.support.backends if b in table] + [b for b in table if b not in system.support.backends]
    return SupportTable({b: table[b] for b in order})
