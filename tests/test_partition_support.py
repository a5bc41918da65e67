"""Support tables (the patent's mapping list): loaders, writers, and priorities from the cost model."""

from __future__ import annotations

import pytest

from hetsched.cost import TableCost
from hetsched.errors import FormatError, SystemError_
from hetsched.io.generators import chain, transformer_block
from hetsched.io.systems import toy_system
from hetsched.partition import (
    load_support_table,
    priorities_from_cost,
    rank_backends,
    save_support_table,
    support_table_frame,
    support_table_from_rows,
)
from hetsched.system import SupportTable


def test_csv_roundtrip_and_lookup(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("backend,op_type,priority\nfpga0,Conv,1\nfpga0,Relu,2\ngpu0,*,1\n")
    t = load_support_table(p)
    assert t.candidates("Conv") == ["fpga0", "gpu0"]
    assert t.candidates("Relu") == ["gpu0", "fpga0"]
    assert t.candidates("Softmax") == ["gpu0"]
    q = tmp_path / "u.csv"
    save_support_table(t, q)
    assert load_support_table(q) == t
    y = tmp_path / "u.yaml"
    save_support_table(t, y)
    assert load_support_table(y) == t


@pytest.mark.parametrize(
    "text",
    [
        "fpga0: {Conv: 1}\ngpu0: {'*': 2}\n",
        "support:\n  fpga0: {Conv: 1}\n  gpu0: {'*': 2}\n",
        "- {backend: fpga0, op_type: Conv, priority: 1}\n- {backend: gpu0, op_type: '*', priority: 2}\n",
    ],
)
def test_yaml_forms(tmp_path, text):
    p = tmp_path / "t.yaml"
    p.write_text(text)
    assert load_support_table(p) == SupportTable({"fpga0": {"Conv": 1}, "gpu0": {"*": 2}})


def test_csv_errors_name_line_and_field(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("backend,op_type,priority\nfpga0,Conv,1\ngpu0,Relu,high\n")
    with pytest.raises(FormatError) as e:
        load_support_table(p)
    assert e.value.field == "priority" and "line 3" in str(e.value) and "'high'" in str(e.value)
    p.write_text("backend,op_type,priority\nfpga0,,1\n")
    with pytest.raises(FormatError) as e:
        load_support_table(p)
    assert e.value.field == "op_type" and "line 2" in str(e.value)
    p.write_text("backend,op,priority\nfpga0,Conv,1\n")
    with pytest.raises(FormatError) as e:
        load_support_table(p)
    assert e.value.field == "op_type"
    p.write_text("backend,op_type,priority\nfpga0,Conv,1\nfpga0,Conv,2\n")
    with pytest.raises(FormatError, match="duplicate"):
        load_support_table(p)
    p.write_text("backend,op_type,priority\nfpga0,Conv,1.5\n")
    with pytest.raises(FormatError, match="integer"):
        load_support_table(p)


def test_yaml_and_file_errors(tmp_path):
    with pytest.raises(FormatError, match="not found"):
        load_support_table(tmp_path / "nope.csv")
    p = tmp_path / "t.txt"
    p.write_text("x")
    with pytest.raises(FormatError, match="file type"):
        load_support_table(p)
    y = tmp_path / "t.yaml"
    y.write_text("fpga0: [Conv]\n")
    with pytest.raises(FormatError) as e:
        load_support_table(y)
    assert e.value.field == "fpga0"
    y.write_text("- {backend: fpga0, op_type: Conv, priority: -1}\n")
    with pytest.raises(FormatError, match="row 1"):
        load_support_table(y)
    y.write_text("- {backend: fpga0, op_type: Conv, priority: 1, colour: red}\n")
    with pytest.raises(FormatError) as e:
        load_support_table(y)
    assert e.value.field == "colour"
    y.write_text("a: [unclosed\n")
    with pytest.raises(FormatError, match="YAML"):
        load_support_table(y)


def test_rows_and_frame():
    t = support_table_from_rows([{"backend": "b", "op_type": "X", "priority": "2"}])
    assert t.priority("b", "X") == 2
    f = support_table_frame(t)
    assert f.columns.tolist() == ["backend", "op_type", "priority"] and f.values.tolist() == [["b", "X", 2]]
    with pytest.raises(FormatError, match="priority"):
        support_table_from_rows([{"backend": "b", "op_type": "X", "priority": True}])


def test_priorities_from_roofline_rank_by_latency():
    s = toy_system()
    g = chain(6)
    f = rank_backends(g, s)
    # every supported (type, backend) pair is ranked; priorities are dense ranks of total_s
    for t, sub in f.groupby("op_type"):
        sub = sub.sort_values("total_s")
        assert sub["priority"].tolist() == sorted(sub["priority"].tolist())
        assert sub["priority"].iloc[0] == 1
    st = priorities_from_cost(g, s)
    # the GPU is the fastest at everything in the toy system (roofline)
    assert st.candidates("Conv")[0] == "gpu0" and st.candidates("Relu")[0] == "gpu0"
    # support is kept: the FPGA never gains an op type it does not run
    g2 = transformer_block(seq=8, d_model=16, heads=2)
    st2 = priorities_from_cost(g2, s)
    assert "fpga0" not in st2.candidates("Softmax")
    assert "fpga0" in st2.candidates("MatMul")


def test_priorities_from_measured_cost_flip_the_order():
    s = toy_system()
    g = chain(4)
    # measured: the FPGA is 10x faster than the GPU at convolutions
    tc = TableCost(s, {("Conv", "fpga0"): 1e-5, ("Conv", "gpu0"): 1e-4, ("Conv", "cpu0"): 1e-3})
    st = priorities_from_cost(g, s, tc)
    assert st.candidates("Conv") == ["fpga0", "gpu0", "cpu0"]
    assert st.priority("fpga0", "Conv") == 1 and st.priority("gpu0", "Conv") == 2


def test_priorities_from_cost_errors():
    s = toy_system()
    g = transformer_block(seq=8, d_model=16, heads=2)
    with pytest.raises(SystemError_) as e:
        priorities_from_cost(g, s, backends=["fpga0"])
    assert e.value.field in g.op_types()
