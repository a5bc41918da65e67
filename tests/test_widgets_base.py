"""The panel pattern (base), GraphPanel and the Dashboard, headless."""

from __future__ import annotations

import base64
import json
import re

import pytest
import traitlets

import hetsched as hs
from hetsched.errors import HetschedError
from hetsched.io import save_graph
from hetsched.io.generators import chain, fork_join
from hetsched.widgets import Dashboard, GraphPanel, Panel, Session, StepWalker, download_link
from hetsched.params import Param, ParamSpec
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


def test_a_view_change_after_a_failed_recompute_keeps_its_message():
    """The inputs on screen still fail: redrawing the last good (greyed) result for a view change
    must not clear the reason; the next successful recompute does."""
    p = _P(_S())
    p.state.n = -1
    assert "n must be" in p.message.value and p.stale and p.result == 2
    p.state.view = 5                         # a view change: the old result redrawn
    assert p.drawn == (2, 5) and "n must be" in p.message.value
    p.state.n = 3                            # inputs that compute again
    assert p.result == 6 and p.message.value == "" and not p.stale


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


def test_a_bug_is_labelled_an_internal_error_not_an_input_problem():
    """Issue 20: the safety net names the exception's type as the CLI's catch-all does, as a bug."""
    p = _P(_S())
    p.state.n = 99  # compute raises ZeroDivisionError
    msg = p.message.value
    assert msg.startswith('<div class="hetsched-error"') and "internal error: ZeroDivisionError: a bug" in msg
    assert "a bug in hetsched" in msg and "not in your input" in msg and p.result == 2
    assert isinstance(p.last_internal_error, ZeroDivisionError)  # kept, with its traceback, for debugging
    p.state.n = 3
    assert p.message.value == "" and p.result == 6

    class R(_P):  # the same in render and in a download
        def render(self, result):
            if result == 8:
                raise KeyError("k")

        def download_items(self, result):
            raise ValueError("no table")

    r = R(_S())
    r.state.n = 4
    assert "internal error: KeyError: &#x27;k&#x27;" in r.message.value and "a bug in hetsched" in r.message.value
    r.state.n = 1
    r.download_button.click()
    assert "download not available: internal error: ValueError: no table" in r.downloads.value


class _Checked(_P):
    def check_inputs(self):
        if self.state.n > 50:
            raise HetschedError(f"n = {self.state.n} refused: at most 50", field="n")
        if self.state.view > 9:
            raise HetschedError(f"view {self.state.view} refused", field="view")


def test_a_refused_value_is_taken_back_and_the_message_cleared_by_the_next_valid_action():
    """Issue 20: the control shows the value in effect; the last good result stays; no recompute."""
    p = _Checked(_S())
    p.state.n = 3
    c = p.n_computes
    p.state.n = 51
    assert p.state.n == 3 and p.result == 6 and "n = 51 refused" in p.message.value
    assert p.n_computes == c and not p.stale  # nothing recomputed: what is on screen is what is in effect
    p.state.view = 12  # a view trait too
    assert p.state.view == 0 and "view 12 refused" in p.message.value and p.drawn == (6, 0)
    p.state.view = 2
    assert p.message.value == "" and p.drawn == (6, 2)
    with p.hold():  # several changes refused together: all of them are taken back
        p.state.n = 7
        p.state.n = 60
        p.state.view = 4
    assert (p.state.n, p.state.view, p.result) == (3, 2, 6) and "n = 60 refused" in p.message.value
    p.state.n = -1  # an error of the compute (not a refused value) is shown, the value stays
    assert p.state.n == -1 and "n must be" in p.message.value and p.stale
    p.state.n = 5
    assert p.message.value == "" and p.result == 10 and not p.stale


def test_a_hidden_panel_takes_back_refused_values_when_shown():
    p = _Checked(_S(), active=False)
    p.state.n = 70
    assert p.result is None and p.stale
    assert not p.refresh() and p.state.n == 1 and "n = 70 refused" in p.message.value
    assert p.activate() and p.result == 2 and p.message.value == ""


def test_hold_recomputes_once():
    p = _P(_S())
    c = p.n_computes
    with p.hold():
        p.state.n = 2
        p.state.n = 3
        p.state.view = 1
    assert p.n_computes == c + 1 and p.drawn == (6, 1)


def test_download_link_payloads():
    import pandas as pd

    html = download_link(pd.DataFrame({"a": [1]}), "t.csv")
    data = base64.b64decode(re.search(r"base64,([^\"]+)", html).group(1)).decode()
    assert "text/csv" in html and data.splitlines() == ["a", "1"]
    html = download_link({"traceEvents": []}, "t.json")
    assert json.loads(base64.b64decode(re.search(r"base64,([^\"]+)", html).group(1))) == {"traceEvents": []}


def test_spec_controls_and_clamped_links():
    spec = ParamSpec([Param("k", "int", 2, min=0, max=5),
                      Param("t_s", "float", 3e-6, min=0.0, max=1e-3, step=1e-6, unit="s", display=(1e6, "us"))])
    st = state_from_spec(spec)
    ctl = controls_from_spec(st, spec)
    assert ctl["t_s"].description == "t s (us)"
    assert ctl["t_s"].value == pytest.approx(3.0) and st.t_s == 3e-6  # no round-trip drift
    ctl["t_s"].value = 7.0
    assert st.t_s == pytest.approx(7e-6)
    st.k = 4
    assert ctl["k"].value == 4
    # no silent clamping: an out-of-range entry reaches the state, where the spec's check refuses it
    ctl["k"].value = 1000
    ctl["t_s"].value = -5.0
    assert st.k == 1000 and st.t_s == pytest.approx(-5e-6)
    with pytest.raises(HetschedError, match="k"):
        spec.check({"k": st.k, "t_s": 3e-6})
    # a parameter that may be empty: a text box, empty is None
    spec2 = [Param("launch_s", "float", None, min=0.0, allow_none=True, unit="s", display=(1e6, "us"))]
    st2 = state_from_spec(spec2)
    box = controls_from_spec(st2, spec2)["launch_s"]
    assert box.value == "" and st2.launch_s is None
    box.value = "3"
    assert st2.launch_s == pytest.approx(3e-6)
    box.value = "abc"
    assert st2.launch_s == pytest.approx(3e-6) and box.value == "3"
    st2.launch_s = None
    assert box.value == ""

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
    n = p.n_updates
    p.upload_bytes(path.read_bytes(), "fj.json")
    assert p.result.n_ops == g.n_ops and p.message.value == ""
    assert p.n_updates - n == 1, "one upload (name, content, source) loads the graph once"
    p.upload_bytes(b"{not json", "bad.json")
    assert "hetsched-error" in p.message.value and p.result.n_ops == g.n_ops
    p.upload_bytes(b"abc", "model.txt")
    assert ".json or .onnx or .pt2" in p.message.value and p.result.n_ops == g.n_ops
    p.upload_bytes(b"\x00\x01garbage", "model.onnx")
    assert "hetsched-error" in p.message.value and p.result.n_ops == g.n_ops
    p.state.color_by = "device"
    assert {t.name for t in p.figures["graph"].data if t.mode == "markers"} <= set(hs.toy_system().device_names)


def test_dashboard_shares_one_session():
    d = Dashboard()
    assert d.titles == ["Graph", "Backends", "Mapping", "Experts", "Pipeline", "Memory", "Executor", "Calibration"]
    assert all(not isinstance(p, type(d.tabs)) for p in d.panels.values())
    for key in ("backends", "mapping", "memory", "executor"):
        assert d.panels[key].session is d.session, key
        assert d.panels[key].message.value == "", key
    gp = d.panels["graph"]
    gp.state.source = "generator"
    gp.state.generator = "fork_join"
    g = d.session.graph
    assert g is gp.result
    # hidden tabs did not compute for the new graph; they are stale until shown
    assert all(d.panels[k].result is None and d.panels[k].stale for k in ("mapping", "backends", "executor", "memory"))
    assert d.show("mapping").result.graph is g and not d.panels["mapping"].stale
    assert set(d.show("backends").result.partition.assignment) == set(g.ops)
    assert set(d.show("executor").result.op_end_s) == set(g.ops)
    assert d.panels["mapping"].active is False  # another tab is shown now
    memory = d.show("memory")
    assert memory.graph is g and set(memory.result.order) == set(g.ops)
    # back on the graph tab, a new graph leaves the memory tab stale, not recomputed
    before = memory.result
    d.show("graph")
    gp.state.generator = "chain"
    assert memory.result is before and memory.stale and all(v.stale for v in memory.figures.values())
    assert set(d.show("memory").result.order) == set(d.session.graph.ops) and not memory.stale


def test_a_tab_first_shown_after_a_load_shows_the_loaded_graph():
    """The dashboard builds a tab's panel on its first show: a tab built after the user loaded a graph
    must start on it, as a tab built before followed it (the Backends tab used to open on its example)."""
    d = Dashboard()
    gp = d.panels["graph"]
    gp.state.source = "generator"
    gp.state.generator = "fork_join"
    g = d.session.graph
    assert d.panels.built("backends") is None and d.panels.built("mapping") is None
    backends = d.show("backends")
    assert backends.state.setup == "loaded" and backends.graph is g
    assert set(backends.result.partition.assignment) == set(g.ops)
    assert d.show("mapping").result.graph is g
    assert set(d.show("executor").result.op_end_s) == set(g.ops)
    assert set(d.show("memory").result.order) == set(g.ops)
    # with nothing loaded, a tab opens on its own example, as before
    fresh = Dashboard()
    assert fresh.show("backends").state.setup == "example"


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


def test_downloads_are_built_on_demand_and_cleared_by_a_new_result():
    class P(_P):
        def download_items(self, r):
            if r == 14:
                raise ValueError("cannot export 14")
            self.n_exports = getattr(self, "n_exports", 0) + 1
            return [({"result": r}, "r.json")]

    p = P(_S())
    assert p.downloads.value == "" and getattr(p, "n_exports", 0) == 0  # a recompute builds nothing
    assert p.download_area.children == (p.download_button, p.downloads)
    p.download_button.click()
    uri = re.search(r'download="r.json" href="data:application/json;base64,([^"]+)"', p.downloads.value).group(1)
    assert json.loads(base64.b64decode(uri)) == {"result": 2} and p.n_exports == 1
    assert p.download_button.description.startswith("downloads ready") and p.last_downloads_s > 0
    p.state.view = 2  # a redraw of the same result keeps the links
    assert 'download="r.json"' in p.downloads.value
    p.state.n = -1  # a failed recompute keeps the result on screen, and its links
    assert 'download="r.json"' in p.downloads.value
    p.state.n = 3  # a new result: links to the old one go away
    assert p.downloads.value == "" and p.download_button.description.startswith("prepare") and p.n_exports == 1
    assert p.prepare_downloads()
    uri = re.search(r'base64,([^"]+)"', p.downloads.value).group(1)
    assert json.loads(base64.b64decode(uri)) == {"result": 6}
    p.state.n = 7  # an export that fails shows why, and the panel keeps working
    assert not p.prepare_downloads() and "cannot export 14" in p.downloads.value
    p.state.n = 1
    assert p.prepare_downloads() and p.message.value == ""


def test_redraw_patches_the_same_view():
    """A redraw keeps each view and sends only what changed (a title here), never a new widget."""
    from hetsched.plot import gantt
    from hetsched.timeline import make_timeline
    from hetsched.widgets.base import figure_widget

    tl = make_timeline([dict(lane="l", group="g", name="a", kind="compute", start_s=0, end_s=1e-3)])

    class P(_P):
        def render(self, result):
            super().render(result)
            for k in ("a", "b"):
                self.show_figure(k, gantt(tl, title=f"{k} {result}"))

    p = P(_S())
    p.children = [p.status, p.figures["a"], p.figures["b"], p.download_area]
    old = dict(p.figures)
    specs = p.figures["a"].n_sent_specs
    p.state.n = 4
    assert p.figures == old  # the same widgets
    assert list(p.children) == [p.status, p.figures["a"], p.figures["b"], p.download_area]
    assert p.figures["a"].layout.title.text == "a 8"
    assert p.figures["a"].n_sent_specs == specs and p.figures["a"].edits["layout"] == {"title.text": "a 8"}
    assert figure_widget(gantt(tl)).data[0].type == "bar"


def test_a_steps_top_margin_only_grows_within_one_base():
    """A step whose title wraps onto a second line widens the top margin; a later one-line title
    keeps it: the plot does not jump, and the browser does not lay the figure out again per click."""
    from hetsched.widgets.figure import PlotlyView

    def fig(title, top):
        return {"data": [{"type": "bar", "x": [1], "y": ["a"]}], "layout": {"title": {"text": title}, "margin": {"t": top}}}

    v = PlotlyView(fig("one line", 40))
    assert v.show(fig("two<br>lines", 70)) == "edits" and v.edits["layout"]["margin.t"] == 70
    assert v.show(fig("short", 40)) == "edits"
    assert "margin.t" in v.edits["layout"] and v.edits["layout"]["margin.t"] == 70   # kept, not back to 40
    v.show(fig("new base", 40), force_spec=True)
    assert v.spec["layout"]["margin"]["t"] == 40                                      # a new base starts afresh


def test_first_panel_freezes_startup_objects_once(monkeypatch):
    import gc

    from hetsched.widgets import base

    monkeypatch.setattr(base, "_GC_FROZEN", False)
    monkeypatch.setenv("HETSCHED_GC_FREEZE", "0")
    assert base._freeze_startup_objects() is False  # opted out: nothing frozen
    monkeypatch.delenv("HETSCHED_GC_FREEZE")
    assert base._freeze_startup_objects() is True
    # the front-end stack was imported before freezing, so its objects are out of every full collection
    assert gc.get_freeze_count() > 50_000
    assert base._freeze_startup_objects() is False  # once per process


def test_a_long_session_creates_no_widgets_and_keeps_memory_flat():
    """Every redraw patches the panel's views: after start-up no widget is created (each new
    widget would ship its front end again), and a long session's memory stays flat."""
    import gc
    import tracemalloc

    import ipywidgets as W

    from hetsched.io.generators import chain
    from hetsched.widgets import MemoryPanel

    p = MemoryPanel(graph=chain(12))
    views = dict(p.figures)

    def flip(n):
        for _ in range(n):
            p.state.method = "dfs" if p.state.method != "dfs" else "bfs"  # a recompute
            p.state.step = max(0, p.state.step - 1)  # a redraw

    flip(5)
    gc.collect()
    n_widgets = len(W.Widget.widgets)
    tracemalloc.start()
    flip(20)
    gc.collect()
    first, _ = tracemalloc.get_traced_memory()
    flip(60)
    gc.collect()
    second, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert p.figures == views and len(W.Widget.widgets) == n_widgets
    assert second - first < 2_000_000, f"memory grew by {second - first} bytes over 60 interactions"
    assert len(str(p.figures["curves"]._esm)) < 20_000  # the front end is ours, not plotly's bundle


def test_graph_panel_draws_big_graphs_as_blocks_and_expands_on_click():
    from hetsched.widgets import GraphPanel

    p = GraphPanel()
    p.load(hs.load_graph("resnet50_b1"))
    assert p.blocks_shown() and "blocks" in p.figures["graph"].layout.title.text
    cds = [c for t in p.figures["graph"].data if t.customdata is not None for c in t.customdata]
    assert "block:layer3" in cds and not any(c.startswith("op:") for c in cds)
    trace = next(i for i, t in enumerate(p.figures["graph"].data) if t.customdata is not None and "block:layer3" in t.customdata)
    point = list(p.figures["graph"].data[trace].customdata).index("block:layer3")
    # what a click in the browser sends: the view calls the panel back with the point's customdata
    p.figures["graph"]._on_front_end_msg(None, {"type": "click", "trace": trace, "point": point}, [])
    cds = [c for t in p.figures["graph"].data if t.customdata is not None for c in t.customdata]
    assert p.state.expanded == ("layer3",) and "block:layer3" not in cds and "op:layer3.0.conv1" in cds
    p.toggle_block("layer3")
    assert p.state.expanded == ()
    p.state.view = "ops"  # every op: one marker each, customdata = op names
    assert sum(len(t.x) for t in p.figures["graph"].data if t.mode == "markers") == 175
    p.load(hs.load_graph("bert_base_b1_s128"))  # a new graph starts closed
    assert p.state.expanded == ()


def test_load_on_a_pinned_panel_shows_the_new_graph():
    from hetsched.io.generators import chain
    from hetsched.widgets import MemoryPanel

    p = MemoryPanel(graph=chain(4))
    assert p.load(chain(7)) and p.graph.n_ops == 7 and len(p.result.order) == 7


def test_download_csvs_are_formula_safe():
    """An op named like a spreadsheet formula must not run as one when a panel's CSV is opened."""
    import pandas as pd

    from hetsched.widgets.base import download_link

    link = download_link(pd.DataFrame({"op": ["=HYPERLINK(\"http://x\")", "@SUM(A1)", "conv1"], "t_s": [-1.5, 2.0, 3.0]}),
                         "ops.csv")
    text = base64.b64decode(re.search(r'base64,([^"]+)"', link).group(1)).decode()
    assert "'=HYPERLINK" in text and "'@SUM" in text and "-1.5" in text and "\n=" not in text and "\n@" not in text


def test_figures_ask_for_webgl_set_up_only_when_the_graph_is_big_enough():
    """The page sets WebGL up while idle (issue 14) only when some tab will draw the graph with WebGL."""
    from hetsched.plot.mapping import GRAPH_WEBGL_NODES

    d = Dashboard(tabs=("graph", "memory"))
    gp = d.panels["graph"]
    gp.state.source = "generator"
    gp.state.generator = "chain"
    gp.state.n = 20
    assert gp.figures["graph"].warm_gl is False
    gp.state.n = GRAPH_WEBGL_NODES + 1
    assert d.session.graph.n_ops > GRAPH_WEBGL_NODES and gp.figures["graph"].warm_gl is True
    # another tab drawing the same (session) graph asks too
    assert all(v.warm_gl for v in d.show("memory").figures.values() if v.spec.get("data"))
    d.show("graph")
    gp.state.n = 20
    assert gp.figures["graph"].warm_gl is False


def test_walkers_walk_the_cores_logs_as_they_are():
    """Issue 29: a panel hands its walker result.steps itself (phase, group and label are functions of a
    step), never a copy with keys added; the Backends panel walks its two logs one after the other."""
    from hetsched.results import LazySteps, Step
    from hetsched.widgets import BackendPanel, ExecutorPanel, MappingPanel, MemoryPanel
    from hetsched.widgets.walker import DecisionWalker

    g = fork_join(3, 2)
    for p in (MappingPanel(graph=g, system=hs.toy_system()), ExecutorPanel(graph=g), MemoryPanel(graph=g)):
        assert p.walker.steps is p.result.steps and isinstance(p.result.steps, LazySteps), type(p).__name__
    b = BackendPanel(graph=g)
    logs = b.walker.steps.logs
    assert logs[0] is b.result.partition.steps and logs[1] is b.result.buffered.steps
    # numbered by position: the buffered run's first decision follows the partition's last
    n = b.result.partition.n_steps
    b.walker.filter_text.value = "input 0:"
    assert b.walker.table.options[0][0].startswith(f"{n + 1} ") and b.walker.table.options[0][1] == n + 1

    # a log whose steps are made on access is scanned once for its phases, not copied
    made = []

    def make(i):
        made.append(i)
        return Step(i, "tick", str(i), data={"phase": "even" if i % 2 == 0 else "odd"})

    class S(traitlets.HasTraits):
        step = traitlets.Int(0)

    w = DecisionWalker(S())
    log = LazySteps(n=5000, make=make)
    w.set_steps(log)
    assert w.steps is log and [o[1] for o in w.phases.options] == ["start", "even", "odd", "final"]
    assert len(made) <= 5000 + 400  # one pass for the phases, the first listed decisions
