"""Fuzzing the ``.pt2`` reader (``torch.export.save`` archives through ``load_graph``): truncated and
garbage files, flipped bytes, and archives whose program JSON is mutated as the JSON fuzzers mutate
graphs. Every outcome is a ``HetschedError`` naming its field, or a graph that validates.
"""

from __future__ import annotations

import io
import json
import warnings
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="optional extra: CI installs torch==2.13.0 (CPU)")

from fuzzing import accepted, mutated  # noqa: E402
from hetsched.errors import FormatError  # noqa: E402
from hetsched.io import load_graph  # noqa: E402


def _archive() -> bytes:
    m = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(16, 3))
    buf = io.BytesIO()
    torch.export.save(torch.export.export(m.eval(), (torch.randn(1, 2, 4, 4),)), buf)
    return buf.getvalue()


BASE = _archive()


def _model_json(data: bytes) -> tuple[str, dict]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        name = next(n for n in z.namelist() if n.endswith("models/model.json"))
        return name, json.loads(z.read(name))


def _rezip(data: bytes, member: str, content: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info, content if info.filename == member else src.read(info.filename))
    return out.getvalue()


def _load(tmp_path, data: bytes):
    p = tmp_path / "m.pt2"
    p.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = accepted(load_graph, p)
    if g is not None:
        g.validate()
    return g


def test_valid_archive_loads(tmp_path):
    g = _load(tmp_path, BASE)
    assert g is not None and [o.op_type for o in g.ops.values()] == ["Conv", "Relu", "Reshape", "Gemm"]


@pytest.mark.parametrize("data", [b"", b"PK\x03\x04", b"not a zip at all", BASE[: len(BASE) // 2], BASE[:-30]])
def test_truncated_and_garbage_are_format_errors(tmp_path, data):
    p = tmp_path / "bad.pt2"
    p.write_bytes(data)
    with pytest.raises(FormatError) as e:
        load_graph(p)
    assert e.value.field == "<pt2>"


def test_missing_and_directory(tmp_path):
    with pytest.raises(FormatError) as e:
        load_graph(tmp_path / "nope.pt2")
    assert e.value.field == "path"
    (tmp_path / "d.pt2").mkdir()
    with pytest.raises(FormatError) as e:
        load_graph(tmp_path / "d.pt2")
    assert e.value.field == "path"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, len(BASE)), flips=st.lists(st.tuples(st.integers(0, len(BASE) - 1), st.integers(1, 255)),
                                                    max_size=4))
def test_cut_and_flipped_bytes(tmp_path, cut, flips):
    data = bytearray(BASE[:cut] if cut < len(BASE) else BASE)
    for i, x in flips:
        if i < len(data):
            data[i] ^= x
    _load(tmp_path, bytes(data))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_program_json(tmp_path, data):
    member, doc = _model_json(BASE)
    bad = data.draw(mutated(doc, max_mutations=3))
    _load(tmp_path, _rezip(BASE, member, json.dumps(bad).encode()))
