"""ExecutorPanel driven headlessly: set traits, check the core result, the walk, the words and the figures.

Expectations come from the executor family's patent (claims 1, 3, 4, 5: which thread and stream each
kind of op gets) and from the issues (15: walk the decisions; 20: refuse bad values; 22: plain words).
"""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetsched as hs
import hetsched.executor as ex
from hetsched.errors import HetschedError
from hetsched.graph import OpGraph
from hetsched.io.generators import fork_join
from hetsched.widgets import ExecutorPanel, Session
from hetsched.widgets.figure import _weight
from panel_testing import prepared_downloads as _prepared_downloads

PATENT_RULES = {"claim4-async-root", "claim4-sync-root", "claim5-async-async", "claim5-async-sync",
                "claim1-sync-sync-keep", "claim1-sync-sync-other", "claim1-sync-async"}
# what must never reach the screen: metric keys, rule ids, op-kind keys, unit-suffixed parameter names
RAW_KEY = re.compile(r"\b\w+_(s|Bps|J|bytes|frac)\b|\bclaim\d-|\b(gpu|cpu)_(a)?sync\b|copy_(h2d|d2h)|\bpcie Bps\b|inline_one")


@pytest.fixture(scope="module")
def panel():
    return ExecutorPanel()


def _texts(p) -> list[str]:
    """Everything the panel writes on screen: HTML, control labels and options, figure words."""
    p.kind_editor.selected_index = 0  # the op-kind rows are made when the editor is opened
    out = [p.summary.value, p.step_text.value, p.kind_counts.value, p.op_rules_text.value]
    out += [label.value for label, _dd in p._type_controls.values()]
    for w in p.control_widgets.values():
        out.append(str(w.description))
        out += [str(o[0]) if isinstance(o, tuple) else str(o) for o in getattr(w, "options", ())]
    out += [str(o[0]) for o in p.walker.phases.options]
    out += [str(o[0]) for o in p.walker.table.options]
    for v in p.figures.values():
        lay = v.layout
        out += [str(lay.title.text or ""), str(lay.xaxis.title.text or ""), str(lay.yaxis.title.text or "")]
        out += [str(t) for t in (lay.yaxis.ticktext or ()) + (lay.xaxis.ticktext or ())]
        out += [str(t.name or "") for t in v.data if t.showlegend is not False and lay.showlegend is not False]
        out += [str(x) for t in v.data if t.type == "bar" and t.orientation != "h" for x in (t.x if lay.xaxis.ticktext is None else ())]
    return out


def _strip(h: str) -> str:
    return re.sub(r"<[^>]+>", "", h)


# -- the default: something happens ---------------------------------------------------------
def test_default_fires_every_patent_rule_on_four_busy_threads(panel):
    r = panel.result
    assert panel.graph.name == "executor_thread_rules" and panel.message.value == ""
    assert (r.params["streams"], r.params["threads"], r.metrics["n_threads"]) == ("patent", "patent", 4)
    assert r.metrics["n_threads_used"] == 4 and r.metrics["n_events"] > 0
    assert set(panel.figures["rules"].data[0].x) == PATENT_RULES  # every rule of claims 1, 4 and 5 fired
    one = panel.comparison.frame.set_index("label").loc["multi-stream, one thread", "makespan_s"]
    assert r.makespan_s < 0.8 * one  # what the patent buys: blocking host work overlapped
    text = _strip(panel.summary.value)
    for t in range(4):
        assert f"thread {t}" in text
    assert "async thread" in text and "waited" in text and "did nothing" not in text
    # host threads and stream lanes in one Gantt, thread lanes named by their role
    ticks = list(panel.figures["gantt"].layout.yaxis.ticktext)
    assert "thread 0 (async)" in ticks and "thread 1 (sync)" in ticks and any("·" in t for t in ticks)
    # the comparison has every policy and the lower bound (grey), current one highlighted
    bars = panel.figures["compare"].data[0]
    assert list(bars.x) == list(ex.POLICIES) + ["lower bound"]
    assert bars.marker.color[list(bars.x).index("patent")] == "#D55E00"
    assert bars.marker.color[-1] == "#BDBDBD"


def test_no_raw_keys_on_screen_and_figures_take_the_full_width(panel):
    found = [t for t in _texts(panel) if RAW_KEY.search(_strip(t))]
    assert found == []
    for name, v in panel.figures.items():
        assert v.layout.width is None, name  # the view takes its panel's width
        assert (v.layout.font.size or 0) >= 14, name
    # no fixed-width side-by-side grid: the figures are stacked
    assert not any(type(c).__name__ == "GridBox" for c in panel.children)
    assert list(panel.figures) == ["gantt", "rules", "compare", "ordering"]


def test_colours_mean_one_thing():
    p = ExecutorPanel(graph=ex.graphs.d2h_branch_graph(8, 4))
    for by in ("kind", "device", "op"):
        p.state.color_by = by
        data = p.figures["gantt"].data
        names = {t.name for t in data}
        assert "idle" in names  # idle time is its own neutral trace under every colouring
        idle = next(t for t in data if t.name == "idle")
        assert idle.marker.color == "#E4E4E4"
        colours = {c for t in data if t.name != "this decision (outlined)"
                   for c in ([t.marker.color] if isinstance(t.marker.color, str) else t.marker.color)}
        assert "#000000" not in colours and "black" not in colours, by  # launch bars are never black
    p.state.color_by = "kind"
    launch = next(t for t in p.figures["gantt"].data if t.name == "launch")
    assert launch.marker.color not in ("#000000", "#0072B2")  # not black, not the kernels' blue


# -- walking the decisions --------------------------------------------------------------------
def test_every_step_says_which_op_thread_stream_and_claim(panel):
    r = panel.result
    structure = [(t.type, t.name) for t in panel.figures["gantt"].data]
    texts = set()
    for k in range(r.n_steps + 1):
        panel.state.step = k
        assert [(t.type, t.name) for t in panel.figures["gantt"].data] == structure  # stable traces
        text = _strip(panel.step_text.value)
        texts.add(text)
        outline = panel.figures["gantt"].data[-1]
        if k == 0:
            assert "before the first decision" in text and len(outline.y) == 0
            assert not panel.figures["gantt"].layout.shapes
            continue
        s = r.steps[k - 1]
        claim = ex.THREAD_RULES[s.data["rule"]][0]
        assert s.subject in text and f"thread {s.data['thread']}" in text and claim in text
        if s.data["stream"] is not None:
            assert s.data["stream"] in text
        # the outline covers the op's launch (or host run) on its thread and its work on its stream
        assert f"thread{s.data['thread']}" in outline.y
        if s.data["stream"] is not None:
            assert s.data["stream"] in outline.y
        cursor = panel.figures["gantt"].layout.shapes[0]
        assert cursor.x0 == pytest.approx(s.data["time_s"] * 1e6)
        assert s.subject in panel.figures["gantt"].layout.title.text
        # the rule bars outline the rule of this decision
        bars = panel.figures["rules"].data[0]
        assert dict(zip(bars.x, bars.marker.line.width))[s.data["rule"]] == 4
    assert len(texts) == r.n_steps + 1


def test_sync_waits_are_told_and_outlined(panel):
    r = panel.result
    k = next(i for i, s in enumerate(r.steps) if s.subject == "nms")  # a sync kernel: its thread waits
    panel.state.step = k + 1
    text = _strip(panel.step_text.value)
    assert "claim 5" in text and "another thread" in text and "waits" in text and "gpu0:sync" in text
    assert "claim 3" in text  # the sync kernel goes to the patent's second stream
    outline = panel.figures["gantt"].data[-1]
    assert len(outline.y) == 3  # launch, kernel, and the thread's wait for it


def test_the_central_step_claim_1_other_sync_successor_on_another_thread(panel):
    """Claim 1: a sync op with several sync successors keeps one on its thread, the others go elsewhere."""
    r = panel.result
    assert panel.jump_to_rule("claim1-sync-sync-other")
    s = panel.current_step()
    assert s.data["rule"] == "claim1-sync-sync-other"
    assert s is not None and s.data["trigger"] == "nms"
    nms_thread = r.thread_of["nms"]
    kept = next(x for x in r.steps if x.data["trigger"] == "nms" and x.data["rule"] == "claim1-sync-sync-keep")
    assert kept.data["thread"] == nms_thread and s.data["thread"] != nms_thread and s.data["thread"] != 0
    text = _strip(panel.step_text.value)
    assert "claim 1" in text and "another thread" in text and "nms" in text
    # the walker's phase buttons are the rules in words, in the order they first fire
    labels = [o[0] for o in panel.walker.phases.options]
    assert labels[0] == "start" and labels[-1] == "final" and len(labels) == len(PATENT_RULES) + 2


def test_jumps_by_thread_and_the_decision_list(panel):
    r = panel.result
    panel.state.step = 0
    panel.walker.group.value = "3"
    assert panel.walker.jump("group", +1, "3")
    assert panel.current_step().data["thread"] == 3
    assert not panel.walker.jump("group", +1, "3")  # thread 3 takes one op
    panel.walker.filter_text.value = "thread 2"
    listed = [v for _l, v in panel.walker.table.options]
    assert listed and all(r.steps[v - 1].data["thread"] == 2 for v in listed)
    panel.walker.table.value = listed[-1]
    assert panel.state.step == listed[-1]
    panel.walker.filter_text.value = ""
    # "accepted" jumps mean nothing for dispatches: hidden
    assert panel.walker.next_acc.layout.display == "none"


def test_fallbacks_with_two_threads_are_explained_and_jumped_to():
    p = ExecutorPanel(graph=hs.load_graph("executor_thread_rules"))
    p.state.pool_size = 2
    r = p.result
    assert r.metrics["n_rule_fallbacks"] == 2
    text = _strip(p.summary.value)
    assert "2 decisions could not follow the rule" in text and "sync pool has no other thread" in text
    p.state.step = 0
    assert p.jump_to_fallback(+1)
    first = p.state.step
    assert r.steps[first - 1].data["fallback"]
    assert "could not be met" in _strip(p.step_text.value)
    assert p.jump_to_fallback(+1) and p.state.step > first
    assert not p.jump_to_fallback(+1)
    assert p.jump_to_fallback(-1) and p.state.step == first
    bars = p.figures["rules"].data[0]
    assert dict(zip(bars.x, bars.y))["claim1-sync-sync-other-fallback"] == 2
    assert dict(zip(bars.x, bars.marker.color))["claim1-sync-sync-other-fallback"] == "#D55E00"


def test_a_step_click_sends_a_small_patch_on_the_1k_op_graph():
    g = hs.load_graph("randwire_ws_train_b32")
    p = ExecutorPanel(graph=g)
    assert p.result.n_steps == g.n_ops
    sent = {n: v.n_sent_specs for n, v in p.figures.items()}
    for _ in range(3):
        p.walker.stepper.prev.click()
        assert sum(_weight(v.edits) for v in p.figures.values()) < 20_000
    assert {n: v.n_sent_specs for n, v in p.figures.items()} == sent  # no figure rebuilt by a step
    assert "threads 1, 2, 3: did nothing" in _strip(p.summary.value) and "make some sync" in p.summary.value


# -- op kinds ----------------------------------------------------------------------------------
def test_kind_edits_drive_the_core_through_rules():
    g = hs.load_graph("executor_thread_rules")
    p = ExecutorPanel(graph=g)
    assert p._type_controls == {} and p.kind_rows.children == ()  # made when the editor is first opened
    p.kind_editor.selected_index = 0
    label, dd = p._type_controls["NonMaxSuppression"]
    assert "sync kernel" in label.value
    dd.value = "gpu_async"  # the patent's claim 1 info edited: NMS no longer holds its thread
    assert p.state.rules == {"NonMaxSuppression": "gpu_async"}
    r = p.result
    assert r.kinds["nms"] == "gpu_async" and p.kinds.set_index("op").loc["nms", "source"] == "rule for NonMaxSuppression"
    direct = ex.simulate(g, streams="patent", threads="patent", rules={"NonMaxSuppression": "gpu_async"})
    assert r.makespan_s == pytest.approx(direct.makespan_s)
    assert p.comparison.results["patent"].kinds["nms"] == "gpu_async"  # the comparison follows too
    assert "as the graph says" in label.value
    # one op by name; an unknown op is refused with a message, the last result kept
    assert p.set_op_kind("count", "cpu_sync") and p.result.kinds["count"] == "cpu_sync"
    assert "count" in p.op_rules_text.value
    good = p.result
    assert not p.set_op_kind("no_such_op", "gpu_sync")
    assert "no_such_op" in p.message.value and p.result is good
    p.op_kind.value = "gpu_sync"
    p.op_name.value = "draw"
    p.op_set.click()
    assert p.result.kinds["draw"] == "gpu_sync" and p.message.value == ""
    p.op_clear.click()
    assert p.state.rules == {"NonMaxSuppression": "gpu_async"}
    dd.value = ""
    assert p.state.rules == {} and p.result.kinds["nms"] == "gpu_sync"
    # a synchronous copy engine on the GPU: the host-to-device copy now holds its thread
    p.sync_boxes["gpu0"].value = True
    assert p.state.sync_copy_devices == ("gpu0",) and p.result.kinds["h2d_image"] == "copy_h2d_sync"
    p.state.sync_copy_devices = ()
    assert not p.sync_boxes["gpu0"].value  # the editor follows the state


def test_kind_rules_set_on_the_state_show_in_the_editor():
    p = ExecutorPanel(graph=hs.load_graph("executor_thread_rules"))
    p.kind_editor.selected_index = 0
    p.state.rules = {"MemcpyD2H": "gpu_async", "draw": "gpu_async"}
    assert p._type_controls["MemcpyD2H"][1].value == "gpu_async"
    assert "draw" in p.op_rules_text.value
    p.state.rules = {"Conv": "bogus"}  # a bad kind is named by the core; last result kept
    assert "bogus" in p.message.value
    p.state.rules = {}
    assert p.message.value == ""


# -- bad values (issue 20) ------------------------------------------------------------------------
@pytest.mark.parametrize("name,bad,shown", [("dispatch_s", 1.0, "1e+06 us"), ("pcie_Bps", 0.0, "0 GB/s"),
                                            ("launch_s", -1e-6, "-1 us"), ("wakeup_s", 1e-3, "1000 us")])
def test_out_of_range_values_are_refused_not_clamped(name, bad, shown):
    p = ExecutorPanel()
    good, before = p.result, getattr(p.state, name)
    setattr(p.state, name, bad)
    msg = _strip(p.message.value)
    assert "out of range" in msg and shown in msg and "last good" in msg  # the value refused, not clamped
    # taken back: the state (and its box) show the value in effect, not the refused one nor a bound
    assert getattr(p.state, name) == before and p.result is good and not p.figures["gantt"].stale
    p.state.pool_size = 3  # the next valid action clears the message
    assert p.message.value == "" and p.result is not good


def test_nan_and_typed_values_never_escape():
    p = ExecutorPanel()
    good = p.result
    launch = p.state.launch_s
    p.state.launch_s = float("nan")  # used to recurse forever between the trait and its text box
    assert "finite" in p.message.value and p.result is good and p.state.launch_s == launch
    p.state.launch_s = float("inf")
    assert "finite" in p.message.value and p.state.launch_s == launch
    p.state.launch_s = launch + 1e-6
    assert p.message.value == ""
    # typed into the boxes: shown in display units, refused rather than clamped
    box = p.control_widgets["dispatch_s"]
    assert box.value == pytest.approx(3.0) and "(us)" in box.description
    box.value = 4.0
    assert p.state.dispatch_s == pytest.approx(4e-6) and p.result.costs.dispatch_s == pytest.approx(4e-6)
    pool = p.control_widgets["pool_size"]
    pool_before = p.state.pool_size
    pool.value = 100
    assert "host threads = 100" in p.message.value  # the value typed is named, not clamped ...
    assert p.state.pool_size == pool_before and pool.value == pool_before  # ... and taken back
    pool.value = 0
    assert "out of range" in p.message.value and pool.value == pool_before
    pool.value = 3
    assert p.message.value == "" and p.result.metrics["n_threads"] == 3
    p.control_widgets["pcie_Bps"].value = 0
    assert "PCIe bandwidth = 0 GB/s" in _strip(p.message.value)
    assert p.state.pcie_Bps > 0 and p.control_widgets["pcie_Bps"].value == pytest.approx(p.state.pcie_Bps / 1e9)
    p.control_widgets["pcie_Bps"].value = 16
    assert p.message.value == "" and p.result.costs.pcie_Bps == pytest.approx(16e9)


_NUMS = ["dispatch_s", "launch_s", "wakeup_s", "pcie_Bps", "pool_size", "max_streams", "max_kernels"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(_NUMS), value=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6)))
def test_fuzzed_numbers_give_a_result_or_a_message(panel, name, value):
    spec = ex.PARAMETERS[name]
    before = panel.result
    try:
        setattr(panel.state, name, value)
    except Exception as e:  # an Int trait refuses a float itself: traitlets' own error, nothing changed
        assert spec.kind == "int" and type(e).__name__ == "TraitError"
        return
    try:
        ex.check_values({name: value})
        ok = True
    except HetschedError:
        ok = False
    old = getattr(panel.state, name) if not ok else None
    if ok:
        assert panel.message.value == "" and not panel.figures["gantt"].stale
    else:
        assert "hetsched-error" in panel.message.value and panel.result is before
        assert "internal error" not in panel.message.value
    setattr(panel.state, name, spec.default if name not in ("dispatch_s", "launch_s", "wakeup_s", "pcie_Bps", "max_kernels")
            else getattr(ex.PRESETS["cuda"], name))
    if not ok and getattr(panel.state, name) == old:  # the refused value was taken back: no change, no action
        panel.state.color_by = "device" if panel.state.color_by != "device" else "kind"  # a valid action
    assert panel.message.value == ""


def test_names_from_user_files_are_escaped():
    g = OpGraph("<b>evil</b>")
    g.add_op("<img src=x onerror=alert(1)>", "<script>T", flops=1e9)
    g.add_tensor("in", 1024, consumers=["<img src=x onerror=alert(1)>"])
    g.add_op("post", "PostProcess", flops=1e6)
    g.add_tensor("mid", 1024, producer="<img src=x onerror=alert(1)>", consumers=["post"])
    p = ExecutorPanel(graph=g)
    p.kind_editor.selected_index = 0
    assert p.message.value == ""
    p.state.step = 1
    for html_text in (p.summary.value, p.step_text.value, *[lbl.value for lbl, _ in p._type_controls.values()]):
        assert "<img" not in html_text and "<script" not in html_text and "<b>evil" not in html_text
    assert "&lt;img" in p.step_text.value
    p.set_op_kind("<img src=x onerror=alert(1)>", "gpu_sync")
    assert "<img" not in p.op_rules_text.value and "&lt;img" in p.op_rules_text.value
    assert not p.set_op_kind("<svg onload=x>", "gpu_sync")
    assert "<svg" not in p.message.value


# -- policies, presets, views ---------------------------------------------------------------------
def test_switching_threads_resimulates_and_redraws(panel):
    panel.state.step = panel.result.n_steps
    before_mk = panel.result.makespan_s
    panel.state.threads = "single"
    r = panel.result
    assert r.params["threads"] == "single"
    direct = ex.simulate(panel.graph, streams="patent", threads="single", costs="cuda", pool_size=4)
    assert r.makespan_s == pytest.approx(direct.makespan_s) and r.makespan_s > before_mk
    assert list(panel.figures["gantt"].layout.yaxis.ticktext)[-1] == "thread 0"
    bars = panel.figures["compare"].data[0]
    assert bars.marker.color[list(bars.x).index("multi-stream, one thread")] == "#D55E00"
    assert "executor policy" in panel.figures["compare"].layout.title.text
    panel.state.threads = "patent"


def test_pair_outside_the_table_gets_its_own_bar(panel):
    panel.state.streams = "nimble"
    panel.state.threads = "inline_one"
    assert list(panel.figures["compare"].data[0].x)[-1] == "nimble streams + inline_one threads"
    assert panel.result.params["streams"] == "nimble"
    with panel.hold():
        panel.state.streams = "patent"
        panel.state.threads = "patent"


def test_preset_sets_cost_fields_and_recomputes_once(panel):
    n = panel.n_updates
    panel.state.preset = "ideal"
    assert panel.state.dispatch_s == 0.0 and panel.state.launch_s == 0.0
    assert panel.result.costs.dispatch_s == 0.0 and panel.control_widgets["dispatch_s"].value == 0.0
    assert panel.n_updates - n == 1
    panel.state.preset = "cuda"
    assert panel.state.dispatch_s == ex.PRESETS["cuda"].dispatch_s


def test_view_traits_redraw_without_recompute(panel):
    r = panel.result
    panel.state.metric = "host_blocked_s"
    assert panel.result is r
    assert panel.figures["compare"].layout.yaxis.title.text == "host time blocked (us)"
    panel.state.metric = "device_busy_frac"
    assert panel.figures["compare"].layout.yaxis.title.text == "device busy (% of the makespan)"
    assert max(panel.figures["compare"].data[0].y) <= 100.0
    panel.state.color_by = "device"
    assert panel.figures["gantt"].layout.legend.title.text == "device"
    assert panel.result is r
    panel.state.metric = "makespan_s"
    panel.state.color_by = "kind"


def test_bad_pool_size_keeps_the_last_result_and_clears_on_success(panel):
    good, pool, kernels = panel.result, panel.state.pool_size, panel.state.max_kernels
    panel.state.pool_size = 0
    assert "host threads" in panel.message.value and panel.result is good
    assert panel.state.pool_size == pool  # taken back: the box shows the value in effect
    panel.state.max_kernels = 0  # refused too; its own message
    assert "kernels at once" in panel.message.value and panel.state.max_kernels == kernels
    panel.state.pool_size = pool + 1
    assert panel.message.value == "" and not panel.figures["gantt"].stale
    panel.state.pool_size = pool
    assert panel.result.metrics["makespan_s"] == good.metrics["makespan_s"]  # the same inputs, the same run


def test_downloads_offer_trace_and_formula_safe_tables():
    p = ExecutorPanel(graph=fork_join(2, 1))
    html = _prepared_downloads(p)
    for name in ("executor_trace.json", "executor_timeline.csv", "executor_policies.csv", "executor_dispatch_steps.csv",
                 "executor_threads.csv", "executor_op_kinds.csv"):
        assert f'download="{name}"' in html
    bad = OpGraph("csv")
    bad.add_op("=cmd()", "Conv", flops=1e9)
    bad.add_tensor("t", 1024, consumers=["=cmd()"])
    p.load(bad)
    assert p.graph is bad and p.result.n_steps == 1  # load() on a pinned panel shows the new graph
    import base64
    html = _prepared_downloads(p)
    payload = re.search(r'download="executor_dispatch_steps.csv" href="data:text/csv;base64,([^"]+)"', html).group(1)
    csv = base64.b64decode(payload).decode()
    assert "\n0,=cmd()" not in csv and "'=cmd()" in csv


def test_follows_the_session_graph():
    s = Session()
    p = ExecutorPanel(session=s)
    assert p.graph.name == "executor_thread_rules" and s.graph is None  # the default is not forced on others
    g = fork_join(3, 2)
    p.load(g)
    assert set(p.result.op_end_s) == set(g.ops) and p.graph is g
    assert p.state.step == p.result.n_steps  # a new graph: the walk starts at its end
    assert p._type_controls == {}  # the editor is shut: no rows made for the new graph yet
    p.kind_editor.selected_index = 0
    assert set(p._type_controls) == {o.op_type for o in g.ops.values()}
    assert json.dumps(ex.executor_trace(p.result))  # serialisable trace for the download


def test_comparison_runs_equal_single_simulations():
    """The panel's comparison (one shared preparation for every policy) gives exactly what
    ``simulate`` gives for each policy alone: same timeline, metrics, steps and maps."""
    import dataclasses

    import pandas as pd

    g = fork_join(4, 3, seed=1)
    costs = dataclasses.replace(ex.PRESETS["cuda"], dispatch_s=4e-6)
    cmp_ = ex.compare_policies(g, costs=costs, pool_size=3)
    for label, (sp, tp) in ex.POLICIES.items():
        a, b = cmp_.results[label], ex.simulate(g, streams=sp, threads=tp, costs=costs, pool_size=3)
        pd.testing.assert_frame_equal(a.timeline, b.timeline, check_exact=True)
        pd.testing.assert_frame_equal(a.ordering, b.ordering, check_exact=True)
        assert a.metrics == b.metrics and a.params == b.params
        assert [dataclasses.astuple(s) for s in a.steps] == [dataclasses.astuple(s) for s in b.steps]
        assert (a.kinds, a.streams, a.thread_of, a.events, a.durations_s) == (b.kinds, b.streams, b.thread_of, b.events, b.durations_s)
        assert (a.op_start_s, a.op_end_s, a.launch_end_s) == (b.op_start_s, b.op_end_s, b.launch_end_s)
    runs = list(cmp_.results.values())
    assert runs[0].durations_s is not runs[1].durations_s  # each result owns its maps


# -- the core helpers the panel reads ---------------------------------------------------------------
def test_thread_summary_matches_the_timeline_and_the_patent_roles():
    r = ex.simulate(hs.load_graph("executor_thread_rules"), streams="patent", threads="patent", pool_size=4)
    f = ex.thread_summary(r).set_index("thread")
    assert f["n_ops"].sum() == r.n_steps and sorted(sum(f["ops"], [])) == sorted(r.thread_of)
    assert f.loc[0, "n_sync_ops"] == 0 and f.loc[0, "blocked_s"] == 0.0  # claim 4: the async thread never waits
    assert all(f.loc[t, "n_sync_ops"] == f.loc[t, "n_ops"] for t in (1, 2, 3))  # the sync pool
    tl = r.timeline
    for t in range(4):
        lane = tl[tl["lane"] == f"thread{t}"]
        span = float((lane["end_s"] - lane["start_s"]).sum())
        assert f.loc[t, ["busy_s", "blocked_s", "wakeup_s", "idle_s"]].sum() == pytest.approx(span)
        assert span == pytest.approx(r.makespan_s)
    single = ex.thread_summary(ex.simulate(fork_join(2, 1), threads="single"))
    assert len(single) == 1 and single["n_ops"].iat[0] == 4


def test_check_values_names_the_value_and_the_range():
    ex.check_values(ex.PARAMETERS.defaults())
    for vals, words in [({"dispatch_s": 1.0}, "dispatch per op = 1e+06 us"), ({"pool_size": 17}, "host threads = 17"),
                        ({"pool_size": 2.5}, "whole number"), ({"launch_s": math.nan}, "finite"),
                        ({"pcie_Bps": True}, "must be a number"), ({"streams": "x"}, "unknown choice")]:
        with pytest.raises(HetschedError, match=re.escape(words)) as e:
            ex.check_values(vals)
        assert e.value.field == next(iter(vals))


def test_an_empty_graph_is_a_documented_result_not_an_error():
    p = ExecutorPanel(graph=OpGraph("empty"))
    assert p.message.value == "" and p.result.n_steps == 0
    assert "0 ops to dispatch" in p.step_text.value and "did nothing" in p.summary.value
    assert len(p.figures["gantt"].data[-1].y) == 0


def test_kind_edits_for_another_graph_wait_for_it():
    p = ExecutorPanel(graph=hs.load_graph("executor_thread_rules"))
    p.kind_editor.selected_index = 0  # open: a new graph's rows are made at once
    p.state.rules = {"NonMaxSuppression": "gpu_async", "Relu": "gpu_sync"}  # Relu: not in this graph
    assert p.message.value == "" and p.result.kinds["nms"] == "gpu_async"
    p.load(fork_join(2, 1))  # no NMS here; the edits stay in the state for a later graph
    assert p.message.value == "" and p.state.rules == {"NonMaxSuppression": "gpu_async", "Relu": "gpu_sync"}
    assert set(p._type_controls) == {o.op_type for o in p.graph.ops.values()}
