"""OpGraph: structure, every validation error (type + culprit), graph JSON v1 and its schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from hetsched.errors import CycleError, FormatError, GraphError, HetschedError, UnknownNameError
from hetsched.graph import OpGraph
from hetsched.io import DATA_DIR, bundled_graphs, load_graph, save_graph
from hetsched.io import generators as gen
from hetsched.io.graph_json import GRAPH_SCHEMA, graph_from_dict, graph_to_dict

ROOT = Path(__file__).resolve().parents[1]


def diamond():
    g = OpGraph("diamond", meta={"source": "test"})
    for n, t in (("a", "Conv"), ("b", "Relu"), ("c", "MatMul"), ("d", "Add")):
        g.add_op(n, t, flops=10, weight_bytes=4 if t == "Conv" else 0, attrs={"layer": n})
    g.add_tensor("x", 8, consumers=["a"])
    g.add_tensor("ta", 16, producer="a", consumers=["b", "c"], attrs={"shape": [2, 2]})
    g.add_tensor("tb", 16, producer="b", consumers=["d"])
    g.add_tensor("tc", 16, producer="c", consumers=["d"])
    g.add_tensor("y", 16, producer="d", is_output=True)
    return g


# ------------------------------------------------------------------ structure


def test_structure_and_accessors():
    g = diamond()
    g.validate()
    assert g.topological_order() == ["a", "b", "c", "d"]
    assert g.generations() == [["a"], ["b", "c"], ["d"]]
    assert g.predecessors("d") == ["b", "c"] and g.successors("a") == ["b", "c"]
    assert g.edge_tensors("a", "b") == ["ta"] and g.edge_tensors("b", "c") == []
    assert g.inputs_of("d") == ["tb", "tc"] and g.outputs_of("a") == ["ta"]
    assert g.graph_inputs() == ["x"] and g.graph_outputs() == ["y"]
    assert g.tensor("ta").consumers == ("b", "c")  # one tensor, two readers
    assert g.n_ops == 4 and g.n_tensors == 5 and len(g) == 4 and "a" in g and list(g) == ["a", "b", "c", "d"]
    assert g.total_flops == 40 and g.total_weight_bytes == 4
    s = g.summary()
    assert s["n_ops"] == 4 and s["largest_tensor_bytes"] == 16 and s["op_types"]["Conv"] == 1
    assert g.op_types() == ["Conv", "Relu", "MatMul", "Add"]
    with pytest.raises(TypeError):
        g.ops["z"] = None  # read-only view


def test_caches_follow_mutations():
    g = diamond()
    assert g.successors("b") == ["d"]
    g.add_op("e", "Relu")
    g.add_consumer("tb", "e")
    assert g.successors("b") == ["d", "e"]
    assert g.topological_order()[-1] in ("d", "e") and len(g.topological_order()) == 5
    g.set_tensor("ta", size_bytes=99)
    assert g.tensor("ta").size_bytes == 99
    g.set_op("a", flops=7.0)
    assert g.op("a").flops == 7.0
    with pytest.raises(GraphError) as e:
        g.set_tensor("ta", producer="b")
    assert e.value.tensor == "ta"


def test_subgraph_and_copy():
    g = diamond()
    s = g.subgraph(["b", "c", "d"])
    assert s.graph_inputs() == ["ta"] and s.graph_outputs() == ["y"]
    s.validate()
    s2 = g.subgraph(["a", "b"])
    assert set(s2.graph_outputs()) == {"ta", "tb"}  # read outside -> outputs of the subgraph
    with pytest.raises(UnknownNameError) as e:
        g.subgraph(["a", "nope"])
    assert e.value.op == "nope"
    c = g.copy()
    c.add_op("z", "Relu")
    assert "z" not in g and c.n_ops == 5


def test_unknown_names():
    g = diamond()
    with pytest.raises(UnknownNameError) as e:
        g.op("nope")
    assert e.value.op == "nope" and isinstance(e.value, KeyError) and "nope" in str(e.value)
    with pytest.raises(UnknownNameError) as e:
        g.tensor("nope")
    assert e.value.tensor == "nope"
    with pytest.raises(UnknownNameError):
        g.inputs_of("nope")


# ------------------------------------------------------------------ validation errors


def test_cycle_names_the_ops_on_it():
    g = OpGraph("cyc")
    for n in "pabc":
        g.add_op(n, "Relu")
    g.add_tensor("x", 1, consumers=["p"])
    g.connect("p", "a", 1)
    g.add_tensor("ab", 1, producer="a", consumers=["b"])
    g.add_tensor("bc", 1, producer="b", consumers=["c"])
    g.add_tensor("ca", 1, producer="c", consumers=["a"])
    with pytest.raises(CycleError) as e:
        g.validate()
    assert set(e.value.cycle) == {"a", "b", "c"} and len(e.value.cycle) == 3
    assert e.value.op in {"a", "b", "c"}
    for n in "abc":
        assert f"{n} ->" in str(e.value) or f"-> {n}" in str(e.value)
    assert "p" not in e.value.cycle
    with pytest.raises(CycleError):
        g.topological_order()
    assert not g.is_acyclic()


def test_self_loop_is_a_cycle():
    g = OpGraph()
    g.add_op("a", "Relu")
    g.add_tensor("t", 1, producer="a", consumers=["a"])
    with pytest.raises(CycleError) as e:
        g.validate()
    assert (e.value.op, e.value.tensor, e.value.cycle) == ("a", "t", ["a"])


@pytest.mark.parametrize("where", ["producer", "consumer"])
def test_dangling_producer_or_consumer(where):
    g = OpGraph()
    g.add_op("a", "Relu")
    if where == "producer":
        g.add_tensor("t", 1, producer="ghost", consumers=["a"])
    else:
        g.add_tensor("t", 1, producer="a", consumers=["ghost"])
    with pytest.raises(GraphError) as e:
        g.validate()
    assert (e.value.tensor, e.value.op) == ("t", "ghost")
    assert "ghost" in str(e.value)


@pytest.mark.parametrize("size", [-4, float("nan"), float("inf"), "8"])
def test_bad_tensor_size(size):
    g = OpGraph()
    g.add_op("a", "Relu")
    g.add_tensor("t", size, producer="a", is_output=True)
    with pytest.raises(GraphError) as e:
        g.validate()
    assert (e.value.tensor, e.value.field) == ("t", "size_bytes")


@pytest.mark.parametrize("field,value", [("flops", -1.0), ("flops", float("nan")), ("flops", float("inf")),
                                         ("weight_bytes", -8)])
def test_bad_op_numbers(field, value):
    g = OpGraph()
    g.add_op("a", "Relu", **{field: value})
    with pytest.raises(GraphError) as e:
        g.validate()
    assert (e.value.op, e.value.field) == ("a", field)


def test_duplicate_names():
    g = OpGraph()
    g.add_op("a", "Relu")
    with pytest.raises(GraphError) as e:
        g.add_op("a", "Conv")
    assert e.value.op == "a"
    g.add_tensor("t", 1, producer="a")
    with pytest.raises(GraphError) as e:
        g.add_tensor("t", 2)
    assert e.value.tensor == "t"
    g.add_op("b", "Relu")
    g.add_tensor("u", 1, consumers=["b", "b"])
    with pytest.raises(GraphError) as e:
        g.validate()
    assert e.value.tensor == "u"


def test_bad_alias_and_empty_name():
    g = OpGraph()
    g.add_op("a", "Reshape")
    g.add_tensor("v", 1, producer="a", alias_of="ghost", is_output=True)
    with pytest.raises(GraphError) as e:
        g.validate()
    assert (e.value.tensor, e.value.field) == ("v", "alias_of")
    g2 = OpGraph()
    g2.add_op("", "Relu")
    with pytest.raises(GraphError):
        g2.validate()


# ------------------------------------------------------------------ graph JSON v1


def all_generated():
    return [
        diamond(),
        gen.topcuoglu(30, seed=1),
        gen.chain(5, seed=2),
        gen.layered(3, 4, seed=3),
        gen.fork_join(3, 2, seed=4),
        gen.transformer_block(seq=8, d_model=32, heads=4),
        gen.resnet_like(n_stages=2, blocks_per_stage=1, channels=8, hw=8),
        gen.randwire_ws(12, seed=5, channels=4, hw=4),
    ]


@pytest.mark.parametrize("g", all_generated(), ids=lambda g: g.name)
def test_json_round_trip_exact(g, tmp_path):
    d = graph_to_dict(g)
    g2 = graph_from_dict(json.loads(json.dumps(d)))
    assert graph_to_dict(g2) == d
    p = tmp_path / "g.json"
    save_graph(g, p)
    g3 = load_graph(p)
    assert graph_to_dict(g3) == d
    assert g3.topological_order() == g.topological_order()
    assert list(g3.tensors) == list(g.tensors) and g3.meta == g.meta
    save_graph(g3, tmp_path / "g2.json")
    assert (tmp_path / "g2.json").read_text() == p.read_text()  # byte for byte
    save_graph(g, tmp_path / "pretty.json", indent=2)
    assert graph_to_dict(load_graph(tmp_path / "pretty.json")) == d


@pytest.mark.parametrize("g", all_generated(), ids=lambda g: g.name)
def test_generated_graphs_obey_the_schema(g):
    jsonschema.validate(graph_to_dict(g), GRAPH_SCHEMA)


@pytest.mark.parametrize("name", bundled_graphs())
def test_bundled_graphs_obey_the_schema(name):
    d = json.loads((DATA_DIR / "graphs" / f"{name}.json").read_text())
    jsonschema.validate(d, GRAPH_SCHEMA)
    assert graph_to_dict(graph_from_dict(d)) == d


def test_schema_in_docs_equals_code():
    text = (ROOT / "docs" / "formats.md").read_text()
    m = re.search(r"<!-- GRAPH_SCHEMA -->\s*```json\n(.*?)```", text, re.S)
    assert m, "docs/formats.md lacks the rendered GRAPH_SCHEMA block"
    assert json.loads(m.group(1)) == GRAPH_SCHEMA
    jsonschema.Draft202012Validator.check_schema(GRAPH_SCHEMA)


def test_schema_file_shipped_equals_code():
    """data/graph.schema.json (in the wheel: hetsched/data/) is the code's schema, byte for byte as make data writes it."""
    from hetsched.io.make_data import SCHEMA_FILE, schema_text
    from hetsched.resources import data_root

    assert (data_root() / SCHEMA_FILE).read_text() == schema_text(), "rerun `make data`"


def base():
    return graph_to_dict(diamond())


def mutate(fn):
    d = base()
    fn(d)
    return d


BAD_DOCS = {
    "version": (lambda d: d.update(version=2), FormatError, {"field": "version"}),
    "format": (lambda d: d.update(format="onnx"), FormatError, {"field": "format"}),
    "top_field": (lambda d: d.update(extra=1), FormatError, {"field": "extra"}),
    "op_field": (lambda d: d["ops"][1].update(colour="red"), FormatError, {"field": "colour", "op": "b"}),
    "tensor_field": (lambda d: d["tensors"][0].update(dtype="f32"), FormatError, {"field": "dtype", "tensor": "x"}),
    "ops_not_list": (lambda d: d.update(ops={}), FormatError, {"field": "ops"}),
    "op_no_type": (lambda d: d["ops"][0].pop("op_type"), FormatError, {"field": "ops[0]"}),
    "flops_str": (lambda d: d["ops"][0].update(flops="10"), FormatError, {"field": "flops", "op": "a"}),
    "weight_frac": (lambda d: d["ops"][0].update(weight_bytes=4.5), FormatError, {"field": "weight_bytes", "op": "a"}),
    "size_frac": (lambda d: d["tensors"][0].update(size_bytes=8.5), FormatError, {"field": "size_bytes", "tensor": "x"}),
    "size_neg": (lambda d: d["tensors"][0].update(size_bytes=-8), GraphError, {"field": "size_bytes", "tensor": "x"}),
    "consumers": (lambda d: d["tensors"][0].update(consumers=[1]), FormatError, {"field": "consumers", "tensor": "x"}),
    "producer": (lambda d: d["tensors"][1].update(producer=3), FormatError, {"field": "producer", "tensor": "ta"}),
    "is_output": (lambda d: d["tensors"][1].update(is_output="yes"), FormatError, {"field": "is_output"}),
    "meta": (lambda d: d.update(meta=[1]), FormatError, {"field": "meta"}),
    "attrs": (lambda d: d["ops"][0].update(attrs=[1]), FormatError, {"field": "attrs", "op": "a"}),
    "dangling": (lambda d: d["tensors"][1].update(consumers=["ghost"]), GraphError, {"tensor": "ta", "op": "ghost"}),
    "duplicate_op": (lambda d: d["ops"].append(dict(d["ops"][0])), GraphError, {"op": "a"}),
    "duplicate_tensor": (lambda d: d["tensors"].append(dict(d["tensors"][0])), GraphError, {"tensor": "x"}),
    "cycle": (lambda d: d["tensors"][4].update(consumers=["a"]), CycleError, {}),
}


@pytest.mark.parametrize("case", sorted(BAD_DOCS))
def test_bad_graph_documents(case):
    fn, exc, attrs = BAD_DOCS[case]
    d = mutate(fn)
    with pytest.raises(exc) as e:
        graph_from_dict(d)
    for k, v in attrs.items():
        assert getattr(e.value, k) == v, (k, getattr(e.value, k))
    if case == "cycle":
        cyc = e.value.cycle
        assert len(cyc) == 3 and {"a", "d"} <= set(cyc) <= {"a", "b", "c", "d"} and e.value.op in cyc
    if exc is FormatError and case not in {"op_no_type"}:
        # whatever the loader rejects as a format error, the schema rejects too
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(d, GRAPH_SCHEMA)


def test_bad_json_files(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"format": "hetsched.graph", "version": 1, "ops": [')
    with pytest.raises(FormatError) as e:
        load_graph(p)
    assert e.value.field == "<json>" and "bad.json" in str(e.value)
    with pytest.raises(FormatError) as e:
        load_graph(tmp_path / "missing.json")
    assert e.value.field == "path"
    with pytest.raises(FormatError) as e:
        load_graph(tmp_path / "g.txt")
    assert e.value.field == "path"
    with pytest.raises(FormatError) as e:
        load_graph("no_such_bundled_graph_name")
    assert e.value.field == "path"
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(FormatError) as e:
        load_graph(tmp_path / "list.json")
    assert e.value.field == "<root>"
    with pytest.raises(FormatError) as e:
        load_graph(tmp_path / "x.json", onnx_option=1)
    assert e.value.field == "onnx_option"


def test_errors_are_hetsched_errors():
    for exc in (CycleError, FormatError, GraphError, UnknownNameError):
        assert issubclass(exc, HetschedError)


def test_save_converts_numpy_and_refuses_bad_values(tmp_path):
    import numpy as np

    g = OpGraph("np")
    g.add_op("a", "Conv", flops=np.int64(12), weight_bytes=np.int64(4), attrs={"shape": np.array([1, 2]),
                                                                               "k": np.float32(0.5), "s": {"b", "a"}})
    g.add_tensor("y", np.int64(8), producer="a", is_output=True)
    p = tmp_path / "np.json"
    save_graph(g, p)
    g2 = load_graph(p)
    assert g2.op("a").flops == 12 and g2.op("a").attrs == {"shape": [1, 2], "k": 0.5, "s": ["a", "b"]}
    g.set_op("a", attrs={"bad": float("nan")})
    with pytest.raises(FormatError) as e:
        save_graph(g, tmp_path / "nan.json")
    assert e.value.field == "attrs"
    g.set_op("a", attrs={"bad": object()})
    with pytest.raises(FormatError):
        save_graph(g, tmp_path / "obj.json")
    cyc = OpGraph()
    cyc.add_op("a", "Relu")
    cyc.add_tensor("t", 1, producer="a", consumers=["a"])
    with pytest.raises(CycleError):
        save_graph(cyc, tmp_path / "cyc.json")
    assert not (tmp_path / "cyc.json").exists()


def test_subgraph_accepts_a_generator():
    g = diamond()
    s = g.subgraph(o for o in ("b", "c", "d"))
    assert list(s.ops) == ["b", "c", "d"]
    assert s.graph_inputs() == ["ta"]
