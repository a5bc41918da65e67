"""Graph JSON, format version 1 (schema in ``docs/formats.md``).

::

    {"format": "hetsched.graph", "version": 1, "name": "...", "meta": {...},
     "ops": [{"name", "op_type", "flops", "weight_bytes", "attrs"}],
     "tensors": [{"name", "size_bytes", "producer", "consumers", "is_output", "alias_of", "attrs"}]}

``load_graph``/``save_graph`` round-trip exactly (ops and tensors keep their order). Unknown
versions and unknown fields are errors naming the field; the loaded graph is validated.

>>> from hetsched.io.generators import chain
>>> g = chain(3)
>>> g2 = graph_from_dict(graph_to_dict(g))
>>> graph_to_dict(g2) == graph_to_dict(g)
True
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from ..errors import FormatError
from ..graph import OpGraph
from ..limits import MAX_BYTES, MAX_FLOPS, MAX_NESTING, too_deep
from .files import check_fields, check_text, read_text

__all__ = ["GRAPH_FORMAT", "GRAPH_VERSION", "GRAPH_SCHEMA", "graph_to_dict", "graph_from_dict", "save_graph_json", "load_graph_json"]

GRAPH_FORMAT = "hetsched.graph"
GRAPH_VERSION = 1
_TOP = {"format", "version", "name", "meta", "ops", "tensors"}
_OP = {"name", "op_type", "flops", "weight_bytes", "attrs"}
_TENSOR = {"name", "size_bytes", "producer", "consumers", "is_output", "alias_of", "attrs"}

GRAPH_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "hetsched graph, version 1",
    "type": "object",
    "required": ["format", "version", "ops", "tensors"],
    "additionalProperties": False,
    "properties": {
        "format": {"const": GRAPH_FORMAT},
        "version": {"const": GRAPH_VERSION},
        "name": {"type": "string"},
        "meta": {"type": "object"},
        "ops": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "op_type"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "op_type": {"type": "string"},
                    "flops": {"type": "number", "minimum": 0, "maximum": MAX_FLOPS},
                    "weight_bytes": {"type": "integer", "minimum": 0, "maximum": MAX_BYTES},
                    "attrs": {"type": "object"},
                },
            },
        },
        "tensors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "size_bytes"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "size_bytes": {"type": "integer", "minimum": 0, "maximum": MAX_BYTES},
                    "producer": {"type": ["string", "null"]},
                    "consumers": {"type": "array", "items": {"type": "string"}},
                    "is_output": {"type": "boolean"},
                    "alias_of": {"type": ["string", "null"]},
                    "attrs": {"type": "object"},
                },
            },
        },
    },
}


def graph_to_dict(g: OpGraph) -> dict[str, Any]:
    """The JSON structure of a graph."""
    ops = []
    for o in g.ops.values():
        flops = o.flops if isinstance(o.flops, (int, float)) else float(o.flops)  # numpy scalars -> JSON numbers
        d: dict[str, Any] = {"name": o.name, "op_type": o.op_type, "flops": flops, "weight_bytes": int(o.weight_bytes)}
        if o.attrs:
            d["attrs"] = dict(o.attrs)
        ops.append(d)
    tensors = []
    for t in g.tensors.values():
        d = {"name": t.name, "size_bytes": int(t.size_bytes), "producer": t.producer, "consumers": list(t.consumers)}
        if t.is_output:
            d["is_output"] = True
        if t.alias_of is not None:
            d["alias_of"] = t.alias_of
        if t.attrs:
            d["attrs"] = dict(t.attrs)
        tensors.append(d)
    out: dict[str, Any] = {"format": GRAPH_FORMAT, "version": GRAPH_VERSION, "name": g.name}
    if g.meta:
        out["meta"] = dict(g.meta)
    out["ops"] = ops
    out["tensors"] = tensors
    return out


def graph_from_dict(d: Mapping[str, Any], *, source: str = "graph") -> OpGraph:
    """Build and validate a graph from its JSON structure; every error names the field at fault.

    >>> graph_from_dict({"format": "hetsched.graph", "version": 1, "ops": [],
    ...                  "tensors": [{"name": "t", "size_bytes": 2**60}]})
    Traceback (most recent call last):
    ...
    hetsched.errors.GraphError: tensor 't' has invalid size_bytes 1152921504606846976: above hetsched's limit of 2**53
    """
    if not isinstance(d, Mapping):
        raise FormatError(f"{source}: expected a JSON object at the top level", field="<root>")
    if d.get("format") != GRAPH_FORMAT:
        raise FormatError(f"{source}: 'format' must be {GRAPH_FORMAT!r}, got {d.get('format')!r}", field="format")
    if d.get("version") != GRAPH_VERSION or isinstance(d.get("version"), bool):
        raise FormatError(
            f"{source}: unsupported graph version {d.get('version')!r}; this hetsched reads version {GRAPH_VERSION}",
            field="version",
        )
    check_fields(d, _TOP, source)
    for key in ("ops", "tensors"):
        if not isinstance(d.get(key), list):
            raise FormatError(f"{source}: {key!r} must be a list", field=key)
    if "name" in d and not isinstance(d["name"], str):
        raise FormatError(f"{source}: 'name' must be a string, got {d['name']!r}", field="name")
    if "name" in d:
        check_text(d["name"], source, "name")
    _free_form(d.get("meta", {}), f"{source}: 'meta'", field="meta")
    g = OpGraph(str(d.get("name", source)), meta=d.get("meta") or {})
    for i, o in enumerate(d["ops"]):
        if not isinstance(o, Mapping) or "name" not in o or "op_type" not in o:
            raise FormatError(f"{source}: ops[{i}] needs 'name' and 'op_type'", field=f"ops[{i}]")
        name = _name(o["name"], f"{source}: ops[{i}]", f"ops[{i}].name")
        where = f"{source}: op {name!r}"
        check_fields(o, _OP, where, op=name)
        if not isinstance(o["op_type"], str):
            raise FormatError(f"{where} op_type must be a string, got {o['op_type']!r}", field="op_type", op=name)
        check_text(o["op_type"], where, "op_type", op=name)
        flops = _number(o.get("flops", 0), where, "flops", op=name)
        weight = _number(o.get("weight_bytes", 0), where, "weight_bytes", whole=True, op=name)
        _free_form(o.get("attrs", {}), f"{where} attrs", field="attrs", op=name)
        g.add_op(name, o["op_type"], flops=flops, weight_bytes=weight, attrs=o.get("attrs") or {})
    for i, t in enumerate(d["tensors"]):
        if not isinstance(t, Mapping) or "name" not in t or "size_bytes" not in t:
            raise FormatError(f"{source}: tensors[{i}] needs 'name' and 'size_bytes'", field=f"tensors[{i}]")
        name = _name(t["name"], f"{source}: tensors[{i}]", f"tensors[{i}].name")
        where = f"{source}: tensor {name!r}"
        check_fields(t, _TENSOR, where, tensor=name)
        size = _number(t["size_bytes"], where, "size_bytes", whole=True, tensor=name)
        cons = t.get("consumers", [])
        if not isinstance(cons, list) or not all(isinstance(c, str) for c in cons):
            raise FormatError(f"{where} consumers must be a list of op names", field="consumers", tensor=name)
        for c in cons:
            check_text(c, where, "consumers", tensor=name)
        for f in ("producer", "alias_of"):
            if t.get(f) is not None and not isinstance(t.get(f), str):
                raise FormatError(f"{where} {f} must be a string or null, got {t.get(f)!r}", field=f, tensor=name)
            if t.get(f) is not None:
                check_text(t[f], where, f, tensor=name)
        if not isinstance(t.get("is_output", False), bool):
            raise FormatError(f"{where} is_output must be true or false", field="is_output", tensor=name)
        _free_form(t.get("attrs", {}), f"{where} attrs", field="attrs", tensor=name)
        g.add_tensor(
            name, size, producer=t.get("producer"), consumers=cons, is_output=bool(t.get("is_output", False)),
            alias_of=t.get("alias_of"), attrs=t.get("attrs") or {},
        )
    g.validate()
    return g


def _name(v: Any, where: str, field: str) -> str:
    if not isinstance(v, str) or not v:
        raise FormatError(f"{where}: 'name' must be a non-empty string, got {v!r}", field=field)
    return check_text(v, where, field, what="name")


def _number(v: Any, where: str, field: str, *, whole: bool = False, **culprit: str) -> Any:
    """A JSON number (byte counts whole: ``8.0`` reads as ``8``); its range is ``OpGraph.validate``'s check."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise FormatError(f"{where} field {field!r} must be a number, got {v!r}", field=field, **culprit)
    if whole:
        if not _whole(v):
            raise FormatError(f"{where} {field} must be a whole number, got {v!r}", field=field, **culprit)
        return int(v)
    return v


def _free_form(v: Any, where: str, **culprit: str) -> None:
    """``meta``/``attrs``: an object (null is not one), nested at most :data:`~hetsched.limits.MAX_NESTING` deep."""
    if not isinstance(v, Mapping):
        raise FormatError(f"{where} must be an object, got {'null' if v is None else type(v).__name__}", **culprit)
    if too_deep(v, MAX_NESTING):
        raise FormatError(f"{where} nests deeper than {MAX_NESTING} levels", **culprit)


def _whole(v: Any) -> bool:
    """A byte count: an int, or a float with no fractional part (JSON Schema's ``integer``)."""
    return isinstance(v, int) or (isinstance(v, float) and v.is_integer())


def save_graph_json(g: OpGraph, path: str | Path, *, indent: int | None = None) -> None:
    """Write a graph as JSON (compact by default: bundled graphs reach tens of MB).

    The graph is validated first (a file that ``load_graph`` would reject is never written), and a
    value JSON cannot hold (NaN, an object in ``attrs``) is a ``FormatError``.
    """
    g.validate()
    try:
        text = json.dumps(
            graph_to_dict(g),
            indent=indent,
            separators=(",", ":") if indent is None else None,
            default=_json_default,
            allow_nan=False,
        )
    except ValueError as e:
        raise FormatError(f"graph {g.name!r} holds a value JSON cannot represent: {e}", field="attrs") from None
    Path(path).write_text(text)


def _json_default(v: Any) -> Any:
    """numpy scalars/arrays and tuples/sets in ``attrs`` become JSON values; anything else is an error."""
    if hasattr(v, "item") and getattr(v, "shape", None) == ():
        return v.item()
    if hasattr(v, "tolist"):
        return v.tolist()
    if isinstance(v, (set, frozenset)):
        return sorted(v, key=str)
    raise FormatError(f"cannot write {type(v).__name__} value {v!r} to graph JSON", field="attrs")


def load_graph_json(path: str | Path) -> OpGraph:
    """Read a graph JSON file; every way it can be unreadable is a ``FormatError`` naming why."""
    p = Path(path)
    text = read_text(p, "graph file")
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(f"{p.name}: not valid JSON (line {e.lineno}, column {e.colno}): {e.msg}", field="<json>") from None
    except RecursionError:
        raise FormatError(f"{p.name}: JSON nested too deeply to read", field="<json>") from None
    except ValueError as e:  # an integer literal longer than Python's 4300-digit limit
        raise FormatError(f"{p.name}: not readable JSON: {e}", field="<json>") from None
    return graph_from_dict(d, source=p.name)
