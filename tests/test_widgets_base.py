"""The panel pattern (base), GraphPanel and the Dashboard, headless."""

from __future__ import annotations

import base64
import json
import re

import plotly.graph_objects as go
import pytest
import traitlets

import hetsched as hs
from hetsched.errors import HetschedError
from hetsched.io import save_graph
from hetsched.io.generators import chain, fork_join
from hetsched.widgets import Dashboard, GraphPanel, Panel, Session, StepWalker, download_link, update_figure
from hetsched.widgets.base import controls_from_spec, link_clamped, state_from_spec


class _S(traitlets.HasTraits):
    n = traitlets.Int(1)
    view = traitlets.Int(0)


class _P(Panel):
    VIEW_TRAITS = ("view",)

    def compute(self):
        if self.state.n < 0:
            raise HetschedError("n must be >= 0", field="n")
        if self.state.n == 99:
            raise ZeroDivisionError("a bug")
        self.n_computes = getattr(self, "n_computes", 0) + 1
        return self.state.n * 2

    def render(self, result):
        if self.state.view < 0:
            raise HetschedError("bad view", field="view")
        self.drawn = (result, self.state.view)


def test_panel_loop_errors_and_view_traits():
    p = _P(_S())
    assert p.result == 2 and p.drawn == (2, 0)
    c = p.n_computes
    p.state.view = 3
    assert p.drawn == (2, 3) and p.n_computes == c  # redraw, no recompute
    p.state.n = -1
    assert "n must be" in p.message.value and "field <code>n</code>" in p.message.value and p.result == 2
    p.state.n = 99  # an unexpected exception is shown too, the panel survives
    assert "ZeroDivisionError" in p.message.value
    p.state.n = 5
    assert p.result == 10 and p.message.value == ""
    p.state.view = -1
    assert "bad view" in p.message.value
    p.state.view = 0
    assert p.message.value == "" and p.last_refresh_s > 0


def test_hold_recomputes_once():
    p = _P(_S())
    c = p.n_computes
    with p.hold():
        p.state.n = 2
        p.state.n = 3
        p.state.view = 1
    assert p.n_computes == c + 1 and p.drawn == (6, 1)


def test_update_figure_replaces_traces_and_stale_layout():
    fw = go.FigureWidget(go.Figure(go.Bar(x=[1, 2]), layout=dict(title="a", xaxis_title="t", template="plotly_white")))
    new = go.Figure([go.Scatter(x=[1]), go.Scatter(x=[2])], layout=dict(title="b", template="plotly_white"))
    update_figure(fw, new)
    assert [t.type for t in fw.data] == ["scatter", "scatter"]
    assert fw.layout.title.text == "b" and fw.layout.xaxis.title.text is None
    other = go.Figure(go.Bar(x=[1]), layout=dict(template="plotly_dark"))
    update_figure(fw, other)
    assert fw.layout.template.layout.paper_bgcolor == other.layout.template.layout.paper_bgcolor


def test_download_link_payloads():
    import pandas as pd

    html = download_link(pd.DataFrame({"a": [1]}), "t.csv")
    data = base64.b64decode(re.search(r"base64,([^\"]+)", html).group(1)).decode()
    assert "text/csv" in html and data.splitlines() == ["a", "1"]
    html = download_link({"traceEvents": []}, "t.json")
    assert json.loads(base64.b64decode(re.search(r"base64,([^\"]+)", html).group(1))) == {"traceEvents": []}


def test_spec_controls_and_clamped_links():
    spec = [{"name": "k", "kind": "int", "default": 2, "min": 0, "max": 5},
            {"name": "t_s", "kind": "float", "default": 3e-6, "min": 0.0, "max": 1e-3, "step": 1e-6}]
    st = state_from_spec(spec)
    ctl = controls_from_spec(st, spec, scale={"t_s": (1e6, "us")})
    assert ctl["t_s"].value == pytest.approx(3.0) and st.t_s == 3e-6  # no round-trip drift
    ctl["t_s"].value = 7.0
    assert st.t_s == pytest.approx(7e-6)
    st.k = 4
    assert ctl["k"].value == 4

    class S(traitlets.HasTraits):
        step = traitlets.Int(0)

    s = S()
    w = StepWalker(s)
    w.set_count(2)
    for _ in range(5):
        w.next.click()
    assert s.step == 2
    w.set_count(1)
    assert s.step == 1


def test_graph_panel_sources_and_bad_uploads(tmp_path):
    p = GraphPanel()
    p.state.source = "generator"
    p.state.generator = "chain"
    p.state.n = 6
    assert p.result.n_ops == 6 and p.session.graph is p.result
    g = fork_join(2, 2)
    path = tmp_path / "fj.json"
    save_graph(g, path)
    p.upload_bytes(path.read_bytes(), "fj.json")
    assert p.result.n_ops == g.n_ops and p.message.value == ""
    p.upload_bytes(b"{not json", "bad.json")
    assert "hetsched-error" in p.message.value and p.result.n_ops == g.n_ops
    p.upload_bytes(b"abc", "model.txt")
    assert ".json or .onnx" in p.message.value and p.result.n_ops == g.n_ops
    p.upload_bytes(b"\x00\x01garbage", "model.onnx")
    assert "hetsched-error" in p.message.value and p.result.n_ops == g.n_ops
    p.state.color_by = "device"
    assert {t.name for t in p.figures["graph"].data if t.mode == "markers"} <= set(hs.toy_system().device_names)


def test_dashboard_shares_one_session():
    d = Dashboard()
    assert d.titles == ["Graph", "Backends", "Mapping", "Pipeline", "Memory", "Executor"]
    assert all(not isinstance(p, type(d.tabs)) for p in d.panels.values())
    for key in ("backends", "mapping", "memory", "executor"):
        assert d.panels[key].session is d.session, key
        assert d.panels[key].message.value == "", key
    gp = d.panels["graph"]
    gp.state.source = "generator"
    gp.state.generator = "fork_join"
    g = d.session.graph
    assert g is gp.result
    assert d.panels["mapping"].result.graph is g
    assert set(d.panels["backends"].result.partition.assignment) == set(g.ops)
    assert set(d.panels["executor"].result.op_end_s) == set(g.ops)
    assert d.panels["memory"].graph is g and set(d.panels["memory"].result.order) == set(g.ops)


def test_dashboard_rejects_unknown_tab():
    with pytest.raises(hs.errors.UnknownNameError):
        Dashboard(tabs=["nope"])


def test_session_panels_load_graph_and_system():
    from hetsched.widgets import MappingPanel

    s = Session()
    p = MappingPanel(session=s)
    g = chain(4)
    sysm = hs.toy_system()
    assert p.load(g, sysm)
    assert p.result.graph is g and s.graph is g and s.system is sysm
