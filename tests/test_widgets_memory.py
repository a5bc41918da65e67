"""MemoryPanel driven headlessly: the decision walker over the patent's flow (ILP, BFS picks, DFS
windows, fine-tune moves), the ILP's status/bound/gap beside the curve, plain words, refused inputs.

Expected values come from the patent's text (claim 1: the ILP first, its order only when proven
within the time limit; claim 7: ASAP/ALAP priority among ready ops; claim 8: windows pushed by
priority and popped into the order; claim 9: a move is kept only when the peak drops) and from the
core's step log, never from the panel's own output.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

import hetsched as hs
import hetsched.memory as mem
from hetsched.io.generators import fork_join, layered, randwire_ws
from hetsched.plot.memory import HIGHLIGHT_COLOR
from hetsched.widgets import MemoryPanel
from hetsched.registry import describe
from hetsched.widgets.memory_panel import PHASES, list_label, method_name, plain
from panel_testing import prepared_downloads as _prepared_downloads

# a raw byte count, a patent step code or a metric key in visible text is a defect (issue 22)
RAW = re.compile(r"\d{5,} ?(B\b|bytes)|\bS[234]\d?\b|S4-pick|_bytes|_s\b|seed 00\d|patent S\d")


@pytest.fixture(scope="module")
def default():
    """The panel as it starts alone: the scenario (patent flow, 2 s, layered 6x4)."""
    return MemoryPanel()


@pytest.fixture()
def walk():
    """The patent's fallback on the scenario graph: the same BFS/DFS/fine-tune log, no solver (fast)."""
    return MemoryPanel(graph=layered(6, 4, seed=0), method="patent-heuristic")


def _current(panel):
    """The thick trace: the order being walked."""
    return max(panel.figures["curves"].data[:-1], key=lambda t: t.line.width or 0)


def _visible(panel) -> str:
    fig = panel.figures["curves"]
    return " ".join([panel.summary.value, panel.ilp_box.value, panel.step_text.value, panel.step_table.value,
                     fig.layout.title.text or "", *(t.name or "" for t in fig.data),
                     panel.figures["live"].layout.title.text or "", panel.method_help.value,
                     *(lbl for lbl, _v in panel.walker.phases.options)])


def _first(r, phase, action=None, accepted=None):
    return next(s for s in r.steps if s.data.get("phase") == phase and (action is None or s.action == action)
                and (accepted is None or s.accepted == accepted))


# ----------------------------------------------------------------------------- the default
def test_default_is_a_scenario_where_something_happens(default):
    r = default.result
    assert default.graph.name == "layered-6x4-s0" and default.state.method == "patent"
    assert default.state.time_limit_s == 2.0 and default.state.overlay == ("kahn", "bfs", "dfs", "heuristic")
    # claim 1: the ILP comes first; on this graph it does not prove an order within 2 s
    assert r.steps[0].data["phase"] == "S2" and not r.steps[0].accepted and r.status != "optimal"
    assert r.gap > 0.1  # a visible gap, not "every order equals the bound"
    names = [t.name for t in default.figures["curves"].data]
    assert [n.split(" (peak")[0] for n in names[:4]] == ["Kahn's order", "BFS (patent)", "DFS (patent)", "Portfolio (ours)"]
    portfolio = mem.optimize_order(default.graph, method="heuristic", time_limit_s=2)
    assert portfolio.peak_bytes == r.lower_bound_bytes < r.peak_bytes  # ours reaches the bound, the patent not
    # the ILP's status, bound and gap beside the curve, the gap defined on screen
    box = default.ilp_box.value
    assert "A/P" in box and "time limit reached" in box and "bound it proved" in box
    assert r.steps[0].data["ilp"] is r.ilp  # the step and the box read the one SolverRun
    if r.ilp.gap is not None:
        assert f"{r.ilp.gap:.1%}" in box
    assert f"{r.gap:.1%}" in box and f"{r.gap:.1%}" in default.summary.value
    assert "gap = (peak − best bound) ÷ best bound" in box
    # beside the curve: one row holds both
    row = next(c for c in default.children if default.ilp_box in getattr(c, "children", ()))
    assert default.figures["curves"] in row.children[0].children
    assert not RAW.search(_visible(default)), RAW.search(_visible(default))


def test_phase_buttons_are_named_in_plain_words(default):
    labels = [lbl for lbl, _v in default.walker.phases.options]
    assert labels == ["start", "ILP", "BFS", "DFS", "pick the lower", "fine-tune", "end"]
    assert default.state.step == default.result.n_steps  # starts at the method's answer


# ----------------------------------------------------------------------------- the walker
def test_ilp_step_says_why_the_patent_falls_back():
    p = MemoryPanel(graph=layered(6, 4, seed=0), time_limit_s=0.3, overlay=("kahn",))
    s = p.result.steps[0]
    assert s.data["phase"] == "S2" and not s.accepted
    assert p.walker.jump("phase", value="S2") and p.state.step == 1
    assert "claims 1-5" in p.step_text.value and "0.3 s" in p.step_text.value
    assert "goes on to the BFS and DFS" in p.step_text.value
    assert "proven bound" in p.step_table.value
    assert "given order" in _current(p).name  # the ILP gave no order: the curve is still the start


def test_bfs_pick_shows_asap_alap_priority_and_runner_up(walk):
    r = walk.result
    s = _first(r, "S31")
    before = walk.step_text.value
    walk.walker.jump("phase", value="S31")
    d = s.data
    text, table = walk.step_text.value, walk.step_table.value
    assert text != before and "claim 7" in text and s.subject in text
    assert f"at step {d['asap']} at the earliest" in text and f"must run by step {d['alap']}" in text
    assert f"of the {d['frontier']} op(s) ready" in text
    assert "runner-up" in table and d["runner_up"]["op"] in table
    # claim 7: the picked op has the highest priority (the smallest key) among the ready ops
    assert tuple(d["priority"]) <= tuple(d["runner_up"]["priority"])
    cur = _current(walk)
    assert cur.name.startswith("BFS order so far") and len(cur.x) == 1  # the prefix: one op placed
    walk.walker.stepper.next.click()
    assert len(_current(walk).x) == 2 and walk.step_text.value != text


def test_dfs_steps_show_the_window_and_the_stack(walk):
    r = walk.result
    push = _first(r, "S32", "push")
    walk.walker.jump("phase", value="S32")
    assert walk.state.step == push.index + 1
    assert "claim 8" in walk.step_text.value and f"window {push.data['window']}" in walk.step_text.value
    stack = ", ".join(str(x) for x in push.data["stack"])
    assert f"Stack (top last): {stack}" in walk.step_text.value
    assert "cone needs" in walk.step_table.value and "stack (top last)" in walk.step_table.value
    # nothing popped yet: the DFS order so far is empty (not the BFS order left in the state)
    assert len(_current(walk).x) == 0 and "no op placed yet" in _current(walk).name
    pop = _first(r, "S32", "pop")
    walk.state.step = pop.index + 1
    assert "leaves the stack" in walk.step_text.value
    assert list(_current(walk).x) == list(range(len(pop.data["ops"])))  # its ops are the first of the order


def test_fine_tune_move_redraws_the_curve_and_marks_the_tensor(walk):
    r = walk.result
    kept = _first(r, "S4", accepted=True)
    refused = _first(r, "S4", accepted=False)
    assert kept.after < kept.before  # claim 9: kept because the peak drops
    walk.state.step = kept.index + 1
    assert "claim 9" in walk.step_text.value and "kept" in walk.step_text.value
    cur = _current(walk)
    peak = walk.figures["curves"].data[-1]
    unit = 2**20  # the curve is in MiB here
    assert math.isclose(float(np.max(cur.y)) * unit, kept.after) and math.isclose(float(peak.y[0]) * unit, kept.after)
    first, last = kept.data["curve_changed"]
    assert walk.figures["curves"].layout.shapes[-1].x0 == first - 0.5  # the steps the move changed, shaded
    walk.state.step = refused.index + 1
    assert "refused" in walk.step_text.value and "the peak would not drop" in walk.step_text.value
    assert walk.figures["curves"].layout.annotations[-1].text == "the refused move would change these steps"
    bars = walk.figures["live"].data[0]
    colours = dict(zip(bars.y, bars.marker.color))
    if refused.subject in colours:
        assert colours[refused.subject] == HIGHLIGHT_COLOR
    # the state after the move comes from the log: the order drawn is replay's, never a re-run
    assert walk.order_at() == tuple(r.replay(refused.index)["order"])


def test_step_clicks_patch_the_figures(monkeypatch):
    """Issue 14: a step click on the 1k-op bundled graph sends a patch far below 100 KB."""
    import comm

    sent = [0]

    def publish(self, msg_type, data=None, metadata=None, buffers=None, **k):
        sent[0] += len(json.dumps(data, default=str)) + sum(memoryview(b).nbytes for b in (buffers or []))

    monkeypatch.setattr(comm.DummyComm, "publish_msg", publish)
    g = hs.io.load_graph("randwire_ws_train_b32")
    p = MemoryPanel(graph=g, method="patent-heuristic", overlay=("kahn", "dfs"))
    specs = {k: v.n_sent_specs for k, v in p.figures.items()}
    worst = 0
    for act in [lambda: p.walker.stepper.prev.click()] * 3 + [lambda: p.walker.jump("phase", value="S31"),
                                                               lambda: p.walker.stepper.next.click(),
                                                               lambda: p.walker.jump("phase", value="S32"),
                                                               lambda: p.walker.stepper.next.click(),
                                                               lambda: p.walker.jump("phase", value="final")]:
        sent[0] = 0
        before = p.step_text.value
        act()
        assert p.step_text.value != before
        worst = max(worst, sent[0])
    assert worst < 100_000, worst
    assert {k: v.n_sent_specs for k, v in p.figures.items()} == specs  # patches only, never a new figure


def test_every_step_is_told_in_plain_words(walk):
    r = walk.result
    for k in sorted({1, *(s.index + 1 for s in r.steps if s.data["phase"] in ("S4-pick", "S4"))} |
                    {_first(r, "S32", "pop").index + 1, _first(r, "S31").index + 1}):
        walk.state.step = k
        assert not RAW.search(_visible(walk)), (k, RAW.search(_visible(walk)))
    labels = [list_label(s) for s in r.steps]
    assert not any(RAW.search(x) for x in labels)
    assert all(str(s.subject).lower() in lbl.lower() for s, lbl in zip(r.steps, labels))


# ----------------------------------------------------------------------------- methods
def test_method_chooser_offers_both_ilps_by_plain_names():
    p = MemoryPanel(graph=fork_join(3, 2), method="bfs", overlay=())
    opts = dict(p.control_widgets["method"].options)
    # plain words in the chooser; the patent's term (A/P variables) in the method's description (issue 33)
    assert opts["Integer programme as the patent writes it"] == "ilp-patent"
    assert opts["Integer programme, cumulative (ours)"] == "ilp-cumulative"
    # the names and descriptions are the core's: one table, mem.METHODS
    assert "ilp" not in opts.values() and set(opts.values()) == set(mem.METHODS) - {"ilp"}
    assert all(lbl == method_name(k) for lbl, k in opts.items())
    assert not any(re.fullmatch(r"[a-z_-]+", lbl) and "_" in lbl for lbl in opts)  # no raw keys as labels
    for m, word in (("ilp-patent", "A/P"), ("ilp-cumulative", "cumulative formulation")):
        p.state.method = m
        r = p.result
        assert r.method == m and r.status == "optimal"  # a 6-op graph: proven at once
        assert plain(describe(mem.METHODS[m])) in re.sub(r"<[^>]+>", "", html_unescape(p.method_help.value))
        assert word in p.ilp_box.value and "finished: order proven optimal" in p.ilp_box.value
        assert "(proven optimal)" in p.ilp_box.value and "no decisions to step through" in p.step_text.value
    # overlays never include a method that spends the time limit
    assert not set(dict(p.control_widgets["overlay"].options).values()) & set(mem.SOLVER_METHODS)


def html_unescape(s: str) -> str:
    import html

    return html.unescape(s)


def test_switch_method_and_overlay(walk):
    walk.state.method = "kahn"  # a baseline: one order, nothing to walk
    assert walk.result.method == "kahn" and "no decisions to step through" in walk.step_text.value
    assert "runs none" in walk.ilp_box.value
    walk.control_widgets["overlay"].value = ("xla_dfs",)
    assert walk.state.overlay == ("xla_dfs",)
    assert [t.name.split(" (peak")[0] for t in walk.figures["curves"].data][0] == "XLA DFS"


# ----------------------------------------------------------------------------- bad input (issue 20)
def test_a_bad_overlay_is_refused_and_does_not_stick(walk):
    good, r = walk.state.overlay, walk.result
    for bad in (("nope",), ("ilp-patent",), ("kahn", "patent")):
        walk.state.overlay = bad
        assert "overlay refused" in walk.message.value and walk.state.overlay == good
        assert walk.control_widgets["overlay"].value == good and walk.result is r
    assert "runs a solver" in walk.message.value
    walk.state.method = "dfs"  # the next recompute works and clears the message
    assert walk.result.method == "dfs" and walk.message.value == ""


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf")])
def test_a_bad_time_limit_is_refused_keeping_the_last_good_state(walk, bad):
    r = walk.result
    walk.control_widgets["time_limit_s"].value = bad  # typed in the box: no TraitError, no broken link
    assert "ILP time limit" in walk.message.value and "refused" in walk.message.value
    assert walk.state.time_limit_s == 2.0 and walk.control_widgets["time_limit_s"].value == 2.0
    assert walk.result is r and not walk.stale
    walk.state.time_limit_s = 1.5
    assert walk.message.value == "" and walk.result is not r


def test_out_of_range_step_is_refused(walk):
    n = walk.result.n_steps
    walk.state.step = 3
    walk.state.step = n + 5
    assert "step" in walk.message.value and walk.state.step == 3
    walk.state.step = 4
    assert walk.message.value == ""


def test_names_from_user_files_are_escaped():
    evil = "<img src=x onerror=alert(1)>"
    g = hs.OpGraph(evil)
    formula = "=cmd|' /C calc'!A0"
    for n in ("a", evil, formula):
        g.add_op(n, "Relu")
    g.add_tensor("x", 1000, consumers=["a"])
    g.add_tensor(evil + ":t", 5000, producer="a", consumers=[evil])
    g.add_tensor("u", 7000, producer=evil, consumers=[formula])
    g.add_tensor("y", 100, producer=formula, is_output=True)
    p = MemoryPanel(graph=g, method="patent-heuristic", overlay=("kahn",))
    for k in range(p.result.n_steps + 1):
        p.state.step = k
        for html_text in (p.summary.value, p.step_text.value, p.step_table.value, p.ilp_box.value):
            assert "<img" not in html_text
    links = _prepared_downloads(p)
    import base64

    order_csv = base64.b64decode(re.search(r'download="memory_order.csv" href="data:text/csv;base64,([^"]+)"', links)[1])
    assert b"'=cmd" in order_csv and b",=cmd" not in order_csv  # formula-safe cells (issue 20)


def test_load_on_a_pinned_panel_shows_the_new_graph():
    p = MemoryPanel(graph=fork_join(2, 2), method="bfs", overlay=())
    g2 = randwire_ws(10, seed=3, channels=4, hw=4)
    assert p.load(g2) and p.graph is g2 and set(p.result.order) == set(g2.ops)


def test_follows_session_and_downloads():
    p = MemoryPanel(method="dfs", overlay=("kahn",))
    p.load(randwire_ws(10, seed=3, channels=4, hw=4))
    assert p.result.lower_bound_bytes == mem.lower_bound(p.graph)
    links = _prepared_downloads(p)
    for name in ("memory_order.csv", "memory_curve.csv", "memory_live_at_peak.csv", "memory_moves.csv"):
        assert f'download="{name}"' in links


def test_phase_names_cover_the_core_phases(walk):
    assert {s.data["phase"] for s in walk.result.steps} <= set(PHASES)


def test_walk_figures_are_valid_plotly(walk):
    """The walker's builders skip Plotly's validation while building: their output must equal its validated copy."""
    import plotly.graph_objects as go
    from test_plot_validation import _json

    from hetsched.plot.memory import live_bars, walk_curves

    r = walk.result
    for k in (0, _first(r, "S31").index + 1, _first(r, "S32").index + 1, _first(r, "S4", accepted=True).index + 1):
        w = walk.walk(k)
        for fig in (walk_curves(w, overlays={"Kahn": mem.order_baseline(walk.graph, "kahn")}, lower_bound=1.0,
                                colors={"Kahn": "#123456"}, title="t"),
                    live_bars(w["live"], top=3, highlight=["x"])):
            raw = {"data": [t.to_plotly_json() for t in fig.data], "layout": fig.layout.to_plotly_json()}
            assert _json(go.Figure(raw)) == _json(fig)
            assert fig.layout.font.size >= 14


def test_an_ilp_without_a_bound_yet_is_said_so():
    """HiGHS reports a dual bound of -inf (gap inf) when stopped before proving any: no '-inf GiB' on screen."""
    from hetsched.results import SolverRun, Step
    from hetsched.widgets.memory_panel import describe_step, step_table

    run = SolverRun("feasible", bound=float("-inf"), gap=float("inf"), incumbent=8e6, model="patent", time_limit_s=0.5,
                    n_vars=1753, solve_s=0.5)
    s = Step(0, "ilp", "ILP (patent)", after=8e6, accepted=False, data={"phase": "S2", "ilp": run})
    text, table = describe_step(s), step_table(s)
    assert "proven bound none yet" in text and "unknown (no bound yet)" in table
    assert "inf" not in (text + table).replace("unknown", "")
