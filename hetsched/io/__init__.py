"""Reading and writing graphs and systems, importers, generators and the model zoo.

>>> from hetsched.io import load_graph, save_graph
>>> import tempfile, os
>>> from hetsched.io.generators import chain
>>> p = os.path.join(tempfile.mkdtemp(), "g.json"); save_graph(chain(2), p)
>>> load_graph(p).n_ops
2
"""

from __future__ import annotations

import os
from importlib.resources import as_file
from pathlib import Path

from .. import resources
from ..errors import FormatError
from ..graph import OpGraph
from . import generators
from .graph_json import graph_from_dict, graph_to_dict, load_graph_json, save_graph_json
from .profile import load_profile
from .systems import bundled_systems, load_system, save_system, system_from_dict, system_to_dict, toy_system
from .tables import csv_safe, to_csv_safe

__all__ = [
    "load_graph",
    "save_graph",
    "bundled_graphs",
    "graph_from_dict",
    "graph_to_dict",
    "load_system",
    "save_system",
    "system_from_dict",
    "system_to_dict",
    "toy_system",
    "bundled_systems",
    "csv_safe",
    "to_csv_safe",
    "load_profile",
    "DATA_DIR",
    "GRAPH_SUFFIXES",
]

#: the bundled data folder, as :mod:`hetsched.resources` finds it (``data/`` of a checkout, ``hetsched/data``
#: of a wheel): read files under it with ``/`` and ``.read_text()``
DATA_DIR = resources.data_root()

#: File types :func:`load_graph` reads (the Graph panel's upload and the CLI accept the same).
GRAPH_SUFFIXES: tuple[str, ...] = (".json", ".onnx", ".pt2")


def bundled_graphs() -> list[str]:
    """Names of the graphs shipped in ``data/graphs`` (load them with ``load_graph(name)``)."""
    return resources.bundled("graphs")


def load_graph(path: str | Path, **options) -> OpGraph:
    """Load a graph, dispatching on the extension: ``.json`` (format v1), ``.onnx`` or ``.pt2``
    (a ``torch.export.save`` archive, inference or joint training program; needs torch).

    A bare name (no extension, no such file) loads the bundled ``data/graphs/<name>.json``.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise FormatError(f"a graph path must be a string or a path, got {type(path).__name__}", field="path")
    p = Path(path)
    if not p.exists() and p.suffix == "" and (res := resources.bundled_file("graphs", str(path))) is not None:
        with as_file(res) as bundled:  # the file itself when installed on disk
            return load_graph(bundled, **options)
    suffix = p.suffix.lower()
    if suffix == ".json":
        if options:
            raise FormatError(f"options {sorted(options)} do not apply to JSON graphs", field=sorted(options)[0])
        return load_graph_json(p)
    if suffix == ".onnx":
        from .onnx import load_onnx  # optional extra

        return load_onnx(p, **options)
    if suffix == ".pt2":
        from .torch_import import load_pt2  # torch imported inside

        bad = sorted(set(options) - {"name"})
        if bad:
            raise FormatError(f"options {bad} do not apply to .pt2 graphs (only name)", field=bad[0])
        return load_pt2(p, **options)
    if not p.exists():
        raise FormatError(f"graph file {str(path)!r} not found (and no bundled graph of that name)", field="path")
    raise FormatError(f"{p.name}: unknown graph file type {suffix!r} (expected .json, .onnx or .pt2)", field="path")


def save_graph(g: OpGraph, path: str | Path, *, indent: int | None = None) -> None:
    """Write a graph as JSON format v1."""
    save_graph_json(g, path, indent=indent)
