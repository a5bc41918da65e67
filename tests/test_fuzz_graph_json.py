"""Fuzzing the graph JSON loader: mutated bundled graphs, random documents and random bytes.

Every outcome must be either a ``HetschedError`` naming what is at fault (op/tensor/field), or a
graph that obeys everything ``docs/formats.md`` promises of a loaded graph (the schema, the byte and
flop limits, validation) and round-trips. Nothing else: no raw TypeError/OverflowError/
RecursionError, no silently accepted forbidden input.
"""

from __future__ import annotations

import json
import math

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzing import accepted, json_text, mutated, nasty_values
from hetsched.io import DATA_DIR, graph_from_dict, graph_to_dict, load_graph
from hetsched.io.graph_json import GRAPH_SCHEMA
from hetsched.limits import MAX_BYTES, MAX_FLOPS

BASE = json.loads((DATA_DIR / "graphs" / "executor_d2h_branch.json").read_text())
TINY = {"format": "hetsched.graph", "version": 1, "name": "tiny",
        "ops": [{"name": "a", "op_type": "Relu", "flops": 2.0, "weight_bytes": 4}, {"name": "b", "op_type": "Add"}],
        "tensors": [{"name": "x", "size_bytes": 8, "consumers": ["a", "b"]},
                    {"name": "t", "size_bytes": 8, "producer": "a", "consumers": ["b"], "alias_of": "x"},
                    {"name": "y", "size_bytes": 8, "producer": "b", "is_output": True}]}


def check(d) -> None:
    """The loader's contract on one document."""
    g = accepted(graph_from_dict, d)
    if g is None:
        return
    # accepted: it must be a document the format allows, and a graph every algorithm can trust
    jsonschema.validate(d, GRAPH_SCHEMA)
    total = 0
    for t in g.tensors.values():
        assert isinstance(t.name, str) and t.name
        assert isinstance(t.size_bytes, int) and 0 <= t.size_bytes <= MAX_BYTES
        total += t.size_bytes
    for o in g.ops.values():
        assert isinstance(o.name, str) and o.name and isinstance(o.op_type, str)
        assert isinstance(o.weight_bytes, int) and 0 <= o.weight_bytes <= MAX_BYTES
        assert math.isfinite(o.flops) and 0 <= o.flops <= MAX_FLOPS
        total += o.weight_bytes
    assert total <= MAX_BYTES
    g.validate()
    assert graph_to_dict(graph_from_dict(graph_to_dict(g))) == graph_to_dict(g)


@settings(max_examples=150)
@given(mutated(BASE))
def test_mutated_bundled_graph(d):
    check(d)


@settings(max_examples=150)
@given(mutated(TINY, max_mutations=2))
def test_mutated_tiny_graph(d):
    check(d)


@settings(max_examples=60)
@given(st.one_of(
    nasty_values(),
    st.fixed_dictionaries({"format": st.just("hetsched.graph"), "version": st.just(1)},
                          optional={"ops": st.lists(nasty_values(), max_size=3), "tensors": st.lists(nasty_values(), max_size=3),
                                    "name": nasty_values(), "meta": nasty_values()}),
    st.fixed_dictionaries({"format": st.just("hetsched.graph"), "version": st.just(1),
                           "ops": st.lists(st.fixed_dictionaries({"name": nasty_values(), "op_type": st.just("Relu")},
                                                                 optional={"flops": nasty_values(), "attrs": nasty_values()}),
                                           max_size=3),
                           "tensors": st.lists(st.fixed_dictionaries({"name": st.text(max_size=2), "size_bytes": nasty_values()},
                                                                     optional={"producer": nasty_values(),
                                                                               "consumers": nasty_values(),
                                                                               "alias_of": nasty_values()}), max_size=3)}),
))
def test_random_documents(d):
    check(d)


@settings(max_examples=60)
@given(st.one_of(st.binary(max_size=200), mutated(TINY).map(lambda d: json_text(d).encode()),
                 st.text(max_size=100).map(str.encode)))
def test_random_files(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("g") / "g.json"
    p.write_bytes(data)
    g = accepted(load_graph, p)
    if g is not None:
        g.validate()
