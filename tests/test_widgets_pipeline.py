"""PipelinePanel driven headlessly (issues 14, 15, 18, 20, 22): a model split over a machine, two
schedules on one time axis, the patent's quantities, a walk through the schedule, bad inputs.

Expected values come from the core (``simulate_model``, ``simulate``, ``replay``) and from the
patent's own formulas (r = m mod p, first group p + r, warm-up 2 (p - 1 - k) + (v - 1)(p + r), send
interval [r, r + (p + r)(v - 1))), never from the panel's output.
"""

from __future__ import annotations

import base64
import json
import math
import re

import numpy as np
import pytest

import hetsched.pipeline as pp
from hetsched.widgets import PipelinePanel
from hetsched.widgets.base import Session
from hetsched.plot import format_value
from hetsched.widgets.figure import _weight
from hetsched.whatif import resolve_graph, resolve_system
from panel_testing import prepared_downloads as _prepared_downloads


@pytest.fixture(scope="module")
def model_panel():
    """The default panel: the bundled GPT-2 small training graph over A100s, V100s and U280s."""
    return PipelinePanel()


@pytest.fixture()
def panel():
    return PipelinePanel(source="numbers")


def _text(html_text: str) -> str:
    return re.sub(r"<[^>]+>", "", html_text).replace("&#x27;", "'")


# ---- issue 18: a model on a machine, and the numbers-only mode ------------------------------------

def test_default_splits_a_training_graph_over_a_heterogeneous_machine(model_panel):
    p = model_panel
    r = p.result
    assert p.message.value == "" and p.state.source == "model"
    system = resolve_system(pp.DEFAULT_MODEL["system"])
    devices = pp.default_devices(system, 4)
    assert len({system.device(d).attrs.get("model") for d in devices}) >= 3  # A100, V100 and U280 ranks
    want = pp.simulate_model(resolve_graph(pp.DEFAULT_MODEL["graph"]), system, devices=devices, p=4, v=2, m=10,
                             schedule="interleaved_1f1b", grouping="paddle", comm={"lockstep": True}, cache="sender")
    assert r.a.metrics["makespan_s"] == pytest.approx(want.result.metrics["makespan_s"])
    assert r.split_a.cuts == want.split.cuts
    # which model and why, in words (no graph loaded in a panel of its own)
    assert "no graph is loaded" in p.summary.value and pp.DEFAULT_MODEL["graph"] in p.summary.value
    # the split and each stage's costs: a chart with one bar per stage and a readable table
    stages = p.figures["stages"]
    assert len(stages.data[0].x) == r.split_a.n_stages == 8
    table = _text(p.split_text.value)
    for dev in devices:
        assert dev in table
    assert "ms" in table and "GiB" in table and "f_s" not in table and "memory_bytes" not in table


def test_follows_the_dashboards_graph_when_it_is_a_training_graph():
    session = Session()
    session.graph = resolve_graph("chain", 6)  # an inference graph: the panel says why it splits another
    p = PipelinePanel(session=session)
    assert "not a training graph" in p.summary.value and pp.DEFAULT_MODEL["graph"] in p.summary.value
    bert = resolve_graph("bert_base_train_b8_s128")
    session.graph = bert
    assert p.result.graph_name == bert.name and "the dashboard's graph" in _text(p.summary.value)
    # a bundled model chosen by hand: the dashboard's graph no longer matters
    p.state.model = "vgg16_train_b32"
    n = p.n_updates
    session.graph = resolve_graph("chain", 6)
    assert p.n_updates == n and p.result.graph_name == resolve_graph("vgg16_train_b32").name


def test_numbers_mode_takes_f_b_w_per_rank_as_the_playground_does(panel):
    st = panel.state
    st.schedule_b = "zbv"
    st.w_ms = 0.5
    r = panel.result
    costs = pp.StageCosts.per_rank(f_s=1e-3, b_s=2e-3, chunks=2, activation_bytes=64 * 2**20)
    a = pp.simulate(pp.interleaved_1f1b(4, 2, 10, grouping="paddle"), costs=costs, comm={"lockstep": True}, cache="sender")
    assert r.a.metrics["makespan_s"] == pytest.approx(a.metrics["makespan_s"])
    # the same model in both: every rank does F + B per micro-batch whatever the chunks
    assert np.allclose(r.a.per_rank["busy_s"], r.b.per_rank["busy_s"]) and r.b.per_rank["busy_s"].iloc[0] == pytest.approx(10 * 3e-3)
    # W is the weight-gradient part of B: the W bars of one rank sum to m * W
    s = r.b.schedule
    w = (s.kind == pp.KINDS.index("W")) & (s.rank == 0)
    assert float((r.b.end_s - r.b.start_s)[w].sum()) == pytest.approx(10 * 0.5e-3)


def test_controls_that_do_not_apply_are_disabled_and_said_so(panel):
    c, st = panel.control_widgets, panel.state
    st.schedule, st.schedule_b = "1f1b", "zbv"
    assert c["v"].disabled and c["grouping"].disabled and not c["w_ms"].disabled
    assert "v applies to neither" in panel.applies.value and "ZB-V runs 2 chunks" in panel.applies.value
    st.schedule = "interleaved_1f1b"
    assert not c["v"].disabled and not c["grouping"].disabled and "grouping to A (Interleaved 1F1B)" in panel.applies.value
    st.schedule_b = "1f1b"
    assert c["w_ms"].disabled and "W to neither" in panel.applies.value
    st.source = "model"
    assert all(c[k].disabled for k in ("f_ms", "b_ms", "w_ms", "latency_ms", "activation_MiB"))
    assert not c["model"].disabled and not c["system"].disabled
    # v is not silently ignored: a schedule with fixed chunks runs them and says so in its title
    st.source, st.schedule_b = "numbers", "zbv"
    assert "v=2" in panel.figures["gantt_b"].layout.title.text


def test_p_64_is_simulated_not_clamped_and_many_queues_stay_readable(panel):
    st = panel.state
    panel.control_widgets["p"].value = 64  # typed into the box
    with panel.hold():
        st.m = 64
        st.cache = "receiver"
        st.lockstep = False
        st.latency_ms = 0.2
    assert panel.message.value == "" and st.p == 64 and panel.result.a.schedule.p == 64
    q = panel.figures["queues"]
    assert q.data[0].type == "heatmap" and q.layout.height <= 900  # one row per queue, not 128 tiny panels
    g = panel.figures["gantt_a"]
    assert g.layout.height < 800 and g.data[0].type == "scattergl"  # 16k actions: WebGL segments


# ---- issue 22: one time axis, labelled cells, shades, distinct colours ----------------------------

def test_a_and_b_share_one_time_axis_with_labelled_shaded_cells(panel):
    panel.state.schedule_b = "zbv"
    a, b = panel.figures["gantt_a"], panel.figures["gantt_b"]
    assert a.layout.xaxis.range == b.layout.xaxis.range and a.layout.xaxis.title.text == b.layout.xaxis.title.text
    assert a.layout.xaxis.range[1] == pytest.approx(panel.result.t_max_s * 1e3)
    texts = sorted(t for d in a.data if d.text is not None for t in d.text)
    assert texts == sorted(panel.result.a.schedule.labels().tolist())  # "0F3" as torch's visualiser writes
    colours = {d.name: d.marker.color for d in b.data}
    assert len({colours["F chunk 0"], colours["I chunk 0"], colours["W chunk 0"], colours["idle"]}) == 4
    assert colours["F chunk 0"] != colours["F chunk 1"]  # later chunks lighter
    panel.state.step = 25
    x_a, x_b = a.layout.shapes[-1].x0, b.layout.shapes[-1].x0
    assert x_a == x_b == pytest.approx(panel.moment()[0] * 1e3)  # the cursor at the same instant in both


def test_no_raw_keys_in_visible_text(model_panel):
    visible = " ".join(_text(w.value) for w in (model_panel.summary, model_panel.patent_text, model_panel.messages_text,
                                                 model_panel.split_text, model_panel.step_text, model_panel.rank_text,
                                                 model_panel.applies))
    visible += " ".join(str(v.layout.title.text) for v in model_panel.figures.values())
    for key in ("makespan_s", "bubble_fraction", "blocked_send_s", "peak_cache_depth", "_bytes", "[paddle]"):
        assert key not in visible, key
    assert "idle share of rank-time" in model_panel.summary.value and "between 0 and 100%" in model_panel.summary.value


# ---- issue 15: the patent's quantities, the simulator's queues ------------------------------------

def test_the_patents_quantities_are_on_screen(panel):
    p, v, m = 4, 2, 10
    r = m % p
    txt = _text(panel.patent_text.value)
    assert f"r = m mod p = {m} mod {p} = {r}" in txt and f"first group p + r = {p + r} micro-batches" in txt
    warm = [2 * (p - 1 - k) + (v - 1) * (p + r) for k in range(p)]
    assert ", ".join(f"r{k}: {x}" for k, x in enumerate(warm)) in txt
    assert f"[{r}, {r + (p + r) * (v - 1)})" in txt
    # the patent's two queues by its rule, and beside them the simulated cache (what the run used)
    pq = pp.patent_queues(p, v, m)
    fig = panel.figures["patent"]
    assert [int(x) for x in fig.data[0].y] == pq[pq.direction == "forward"]["depth"].tolist()
    qt = panel.result.a.queue_trace()
    assert sum(len(d.y) for d in panel.figures["queues"].data) == len(qt) and "sender's cache" in panel.figures["queues"].layout.title.text
    assert "messages waited in the sender's cache" in _text(panel.messages_text.value)


def test_the_cache_column_lists_only_a_cache_the_run_used(panel):
    st = panel.state
    with panel.hold():
        st.m, st.cache = 8, "none"  # m % p == 0: no deadlock without a cache, senders simply block
    assert panel.message.value == ""
    panel.state.step = 20
    assert "cache" not in _text(panel.rank_text.value)  # no cache column in the table
    assert "without a cache" in panel.figures["queues"].layout.title.text
    assert "r = m mod p = 8 mod 4 = 0" in _text(panel.patent_text.value) and "nothing waits" in panel.patent_text.value
    st.lockstep = False
    st.cache = "sender"
    assert "no cache holds anything without lock-step" in panel.figures["queues"].layout.title.text
    assert panel.message.value == "" and "No message waited" in panel.messages_text.value


def test_the_patent_view_says_when_it_does_not_apply(panel):
    panel.state.schedule = "1f1b"
    assert "choose interleaved 1F1B" in panel.patent_text.value
    panel.state.schedule = "interleaved_1f1b"
    panel.state.grouping = "torch"
    assert "neither A nor B is the patent's schedule" in _text(panel.patent_text.value)


# ---- issue 15 and 14: the walk ---------------------------------------------------------------------

def test_the_walk_is_the_cores_log_with_the_patents_phases(panel):
    r = panel.result.a
    w = panel.walker
    assert len(w.steps) == len(r.steps) and [s.subject for s in w.steps] == [r.steps[k].subject for k in range(len(r.steps))]
    # warm-up actions per rank are the patent's warm-up forward counts
    pv = r.patent()
    for k in range(4):
        assert sum(1 for s in w.steps if s.data["rank"] == k and s.data["phase"] == "warm-up") == pv["warmup"][k]
    assert w.jump("phase", value="steady")
    first_steady = next(s.index for s in w.steps if s.data["phase"] == "steady")
    assert panel.state.step == first_steady + 1 and "steady phase" in panel.step_text.value
    assert w.jump("group", +1, "2") and w.steps[panel.state.step - 1].data["rank"] == 2
    # 1F1B: rank k warms up with p - 1 - k forwards (Narayanan et al.); GPipe has no steady phase
    panel.state.schedule = "1f1b"
    for k in range(4):
        assert sum(1 for s in panel.walker.steps if s.data["rank"] == k and s.data["phase"] == "warm-up") == 3 - k
    panel.state.schedule = "gpipe"
    assert {s.data["phase"] for s in panel.walker.steps} == {"warm-up", "cool-down"}
    assert [o[0] for o in panel.walker.phases.options] == ["start", "warm-up", "cool-down", "final"]


def test_the_panels_step_k_is_the_cores_step_k(panel):
    """The walker walks ``result.steps`` itself (no step list of the panel's own): step k on screen is the
    core's step k - 1, with its subject, start and end; its phase is the core's analysis (action_phases)."""
    for sched in ("interleaved_1f1b", "zb_h1"):
        panel.state.schedule = sched
        r = panel.result.a
        assert panel.walker.steps is r.steps  # walked as it is, not copied
        phase, micro = pp.action_phases(r.schedule)
        n = len(r.steps)
        for k in sorted({1, 2, n // 3, n // 2, n - 1, n}):
            panel.state.step = k
            core, shown = r.steps[k - 1], panel.walker.steps[k - 1]
            assert (shown.subject, shown.before, shown.after) == (core.subject, core.before, core.after)
            i = core.data["action"]
            assert r.schedule.labels()[i] == core.subject and core.before == r.start_s[i] and core.after == r.end_s[i]
            assert core.data["phase"] == phase[i] and core.data["micro_step"] == micro[i]
            txt = _text(panel.step_text.value)
            assert f"step {k} of {n}" in txt and f"starts {core.subject}," in txt and f"in its {phase[i]} phase" in txt
        # step k + 1 never starts before step k: start time, then rank
        starts = [s.before for s in r.steps]
        assert starts == sorted(starts)


def test_a_step_line_says_what_starts_why_and_what_the_cache_does(panel):
    r = panel.result.a
    panel.state.step = 0
    assert panel.jump_to_cache(+1)
    k = panel.state.step
    st = r.replay(k - 1)
    held = [it for items in st["queues"].values() for it in items]
    txt = _text(panel.step_text.value)
    assert f"step {k} of {len(r.steps)}" in txt and "cache queue" in txt and held
    for it in held:
        assert it in txt
    for rank, act in st["running"].items():
        assert f"<td>{act}</td>" in panel.rank_text.value
    # the last rank's forward micro-step 3 is inside the send interval [2, 8): the patent sends its queue head
    i = next(j for j, s in enumerate(panel.walker.steps) if s.subject == "3F3")
    panel.state.step = i + 1
    txt = _text(panel.step_text.value)
    assert "forward micro-step 3, inside the send interval [2, 8)" in txt and "sends 3F1" in txt
    assert not panel.jump_to_cache(+1) or panel.state.step > i + 1


def test_a_step_click_sends_only_the_cursor_and_the_text(model_panel):
    p = model_panel
    p.state.step = 10
    specs = {k: v.n_sent_specs for k, v in p.figures.items()}
    edits = {k: v.n_sent_edits for k, v in p.figures.items()}
    text = p.step_text.value + p.rank_text.value
    p.walker.stepper.next.click()
    assert p.state.step == 11 and p.step_text.value + p.rank_text.value != text
    assert {k: v.n_sent_specs for k, v in p.figures.items()} == specs  # no figure rebuilt
    changed = {k for k, v in p.figures.items() if v.n_sent_edits != edits[k]}
    assert changed <= {"gantt_a", "gantt_b", "queues"}
    for k in ("gantt_a", "gantt_b"):
        e = p.figures[k].edits
        assert e["data"] == {} and set(e["layout"]) == {"shapes"}  # the cursor, nothing else
    assert sum(_weight(p.figures[k].edits) for k in changed) + len(p.step_text.value) + len(p.rank_text.value) < 20_000


# ---- issue 20: refused inputs, the last good state, escaped names ------------------------------------

@pytest.mark.parametrize("name,value,words", [
    ("m", 0, "m (micro-batches) = 0 is out of range: allowed 1 to 256; refused"),
    ("p", 100000, "p (ranks) = 100000 is out of range: allowed 2 to 64"),
    ("v", -1, "v (chunks per rank) = -1 is out of range: allowed 1 to 8"),
    ("f_ms", math.nan, "forward time F must be a finite number, got nan; allowed 0 ms or more"),
    ("b_ms", -1.0, "backward time B = -1 ms is out of range: allowed 0 ms or more"),
    ("latency_ms", math.inf, "p2p latency must be a finite number, got inf"),
])
def test_out_of_range_values_are_refused_with_why_and_the_last_good_state_kept(panel, name, value, words):
    good, title, before = panel.result, panel.figures["gantt_a"].layout.title.text, getattr(panel.state, name)
    setattr(panel.state, name, value)
    assert words in _text(panel.message.value).replace("&gt;", ">")
    assert panel.result is good and panel.figures["gantt_a"].layout.title.text == title
    # taken back: the state and its control show the value in effect, which the figures were drawn with
    assert getattr(panel.state, name) == before == panel.control_widgets[name].value and not panel.stale
    panel.state.m = 12  # the next valid action clears the error
    assert panel.message.value == "" and panel.result is not good and not panel.stale


def test_nan_typed_into_a_box_is_refused_not_looped(panel):
    good, f, p = panel.result, panel.state.f_ms, panel.state.p
    panel.control_widgets["f_ms"].value = math.nan  # once raised RecursionError / "Broken link"
    assert "forward time F" in panel.message.value and panel.result is good
    assert panel.state.f_ms == f == panel.control_widgets["f_ms"].value  # taken back, in the box too
    panel.control_widgets["p"].value = 100000
    assert "p (ranks) = 100000" in panel.message.value  # the value typed is named, not clamped to a bound
    assert panel.state.p == p == panel.control_widgets["p"].value
    panel.control_widgets["p"].value = p + 1
    assert panel.message.value == "" and panel.result.a.schedule.p == p + 1


def test_w_larger_than_b_is_refused_only_where_w_applies(panel):
    panel.state.w_ms = 5.0  # no split-backward schedule: W does not apply
    assert panel.message.value == ""
    panel.state.schedule_b = "zb_h1"
    assert "weight-gradient time W (5 ms) is part of the backward B (2 ms)" in panel.message.value
    panel.state.w_ms = 1.0
    assert panel.message.value == ""


def test_names_are_escaped():
    session = Session()
    g = resolve_graph("vgg16_train_b32")
    g.name = "<img src=x onerror=alert(1)>"
    session.graph = g
    p = PipelinePanel(session=session)
    for w in (p.summary, p.split_text, p.step_text, p.rank_text):
        assert "<img" not in w.value
    assert "&lt;img src=x onerror=alert(1)&gt;" in p.summary.value


def test_downloads(panel):
    links = _prepared_downloads(panel)
    for name in ("pipeline_A_trace.json", "pipeline_B_trace.json", "pipeline_metrics.csv", "pipeline_A_torch.csv",
                 "pipeline_patent_queues.csv"):
        assert f'download="{name}"' in links
    uri = re.search(r'download="pipeline_A_trace.json" href="data:application/json;base64,([^"]+)"', links).group(1)
    assert json.loads(base64.b64decode(uri)) == json.loads(json.dumps(pp.to_chrome_trace(panel.result.a)))
    panel.state.m += 1  # a new result: links to the old one disappear until asked for again
    assert panel.downloads.value == "" and panel.download_button.description.startswith("prepare")


def test_a_new_session_cost_prices_the_model_stages_anew():
    """The session's cost (a notebook pointing the panels at a calibration) re-runs the model pipeline."""
    import hetsched.pipeline as pp
    from hetsched.cost import RooflineCost
    from hetsched.whatif import resolve_system
    from hetsched.widgets.pipeline_panel import PipelinePanel

    p = PipelinePanel()
    before = p.result.a.metrics["makespan_s"]
    sysm = resolve_system(p.state.system)
    slow = RooflineCost(sysm, efficiency=0.1)
    p.session.cost = slow  # recomputes at once
    after = p.result.a.metrics["makespan_s"]
    g, _ = p._model_graph()
    st = p.state
    v, opts = p._options(st.schedule)
    fresh = pp.simulate_model(g, sysm, devices=pp.default_devices(sysm, st.p), p=st.p, v=v, m=st.m,
                              schedule=st.schedule, grouping=opts.get("grouping"), comm={"lockstep": st.lockstep},
                              cache=None if st.cache == "none" else st.cache, overhead_s=st.overhead_ms * 1e-3, cost=slow)
    assert after > before and after == pytest.approx(fresh.result.metrics["makespan_s"])
    p.session.cost = None
    assert p.result.a.metrics["makespan_s"] == pytest.approx(before)


# ---- issue 31: the best schedule for this split (synthesis), against the named schedules and the bound ----

@pytest.fixture(scope="module")
def synth_panel():
    """GPT-2 small over A100, V100 and U280 ranks, schedule A = 1F1B (p = 4, m = 8), synthesized once."""
    p = PipelinePanel()
    with p.hold():
        p.state.schedule, p.state.m, p.state.lockstep = "1f1b", 8, False
    assert p.synthesize() and p.synth_message.value == ""
    return p


def test_synthesis_compares_every_named_schedule_the_synthesized_one_and_the_bound(synth_panel):
    p = synth_panel
    sv = p.synthesis_view()
    r, res = p.result, sv.result
    # the core's answer on the same instance: A's split, p, v, m, non-blocking p2p
    want = pp.synthesize(r.split_a.costs, p=4, v=1, m=8, method="heuristic")
    assert res.metrics["makespan_s"] == pytest.approx(want.metrics["makespan_s"]) and res.bound == pytest.approx(want.bound)
    table = pp.compare_synthesis(result=want, p=4, m=8)
    assert sorted(sv.table["label"]) == sorted(table["label"])
    named = table[table["kind"] == "named"]
    assert set(named["label"]) == {"gpipe", "1f1b", "zb_h1", "zb_h2"}
    # heterogeneous stages: the search beats every named schedule
    assert res.metrics["makespan_s"] < named["makespan_s"].min() * 0.99
    # the bars: one per schedule (plain names), the synthesized one first and highlighted, the bound as a line
    bars = p.figures["synth_bars"]
    assert list(bars.data[0].y)[0] == "synthesized" and {"1F1B", "ZB-H1", "ZB-H2", "GPipe"} <= set(bars.data[0].y)
    unit_f = bars.data[0].x[0] / res.metrics["makespan_s"]
    assert bars.layout.shapes[0].x0 == pytest.approx(res.bound * unit_f)
    # memory per rank: a line per schedule over the 4 ranks, the synthesized one's values its per-rank peaks
    mem = {t.name: list(t.y) for t in p.figures["synth_memory"].data}
    assert len(mem["synthesized"]) == 4 and "memory cap" not in mem
    peaks = res.per_rank["peak_activation_bytes"].to_numpy(float)
    assert np.allclose(np.array(mem["synthesized"]) / peaks, mem["synthesized"][0] / peaks[0])
    # the table and the verdict, in words read from the core's numbers
    text = _text(p.synth_table.value)
    for words in ("synthesized", "lower bound", "1F1B", "ZB-H2", "gap to the bound", "rank 3"):
        assert words in text
    summary = _text(p.synth_summary.value)
    best = named.loc[named["makespan_s"].idxmin()]
    gain = 1 - res.metrics["makespan_s"] / best["makespan_s"]
    assert f"finishes {gain:.1%} sooner than the fastest named schedule" in summary
    for raw in ("makespan_s", "zb_h2", "peak_bytes", "warm_start", "critical_path"):
        assert raw not in text + summary + p.synth_text.value


def test_the_synthesis_walker_steps_through_the_cores_decisions(synth_panel):
    p = synth_panel
    res = p.synthesis_view().result
    assert p.synth_walker.steps is res.steps  # the core's log, walked as it is
    assert p.state.synth_step == len(res.steps)  # opens on the result
    assert {"bound", "warm_start", "list", "search", "result"} <= {v for _l, v in p.synth_walker.phases.options}
    assert p.figures["synth_gantt"].layout.title.text.startswith("the synthesized schedule")
    # a list-scheduling choice: the rank, what it ran, the order built so far (replay's "building")
    k = next(i for i, s in enumerate(res.steps) if s.action == "choose" and s.data["rank"] == 2) + 1
    specs = {n: v.n_sent_specs for n, v in p.figures.items()}
    edits = {n: v.n_sent_edits for n, v in p.figures.items()}
    p.state.synth_step = k
    state = res.replay(k - 1)
    txt = _text(p.synth_text.value)
    assert f"decision {k} of {len(res.steps)}" in txt and "list scheduling" in txt
    assert "rank 2's order built so far" in txt and " ".join(state["building"][2]) in txt
    # the Gantt shows the incumbent after that decision: the replayed orders, simulated
    s = res.schedule
    run = pp.simulate(pp.Schedule.from_text(state["orders"], p=s.p, v=s.v, m=s.m, style=s.style),
                      costs=res.params["costs"], comm=res.params["comm"])
    assert format_value(run.metrics["makespan_s"], "_s") in p.figures["synth_gantt"].layout.title.text
    # a step redraws the synthesis's Gantt and text only: schedule A's and B's figures do not move
    assert {n for n, v in p.figures.items() if v.n_sent_edits != edits[n] or v.n_sent_specs != specs[n]} <= {"synth_gantt"}
    assert p.figures["synth_gantt"].n_sent_specs == specs["synth_gantt"]  # a patch of the shown schedule
    # jumps: to a phase, and to the next decision about one rank
    p.synth_walker.jump("phase", value="warm_start")
    assert res.steps[p.state.synth_step - 1].action == "warm_start"
    assert "named schedules" in _text(p.synth_text.value)
    p.synth_walker.group.value = "3"
    assert p.synth_walker.jump("group", +1, "3") and res.steps[p.state.synth_step - 1].data["rank"] == 3
    p.state.synth_step = len(res.steps) + 5  # out of range: refused, the step stays
    assert "step " in p.message.value and p.state.synth_step <= len(res.steps)


def test_the_walker_tells_a_local_search_move_kept_or_undone():
    p = PipelinePanel()  # interleaved 1F1B, v = 2, m = 10: the list schedules leave room for the local search
    p.state.lockstep = False
    assert p.synthesize()
    res = p.synthesis_view().result
    for kept in (True, False):
        k = next(i for i, s in enumerate(res.steps) if s.action in ("swap", "move", "fill") and s.accepted is kept
                 and s.after is not None) + 1
        p.state.synth_step = k
        step, line = res.steps[k - 1], _text(p.synth_text.value)
        assert "local search" in line and ("kept" if kept else "not kept") in line
        assert f"on rank {step.data['rank']}: the action at position {step.data['from']} goes to position {step.data['to']}" in line
        assert format_value(step.after, "_s") in line  # the makespan the move gave, as a person reads it
        mk = res.replay(k - 1)["makespan_s"]
        assert format_value(mk, "_s") in p.figures["synth_gantt"].layout.title.text


def test_a_cap_of_schedule_as_memory_keeps_every_rank_within_it():
    p = PipelinePanel()
    with p.hold():
        p.state.schedule, p.state.schedule_b, p.state.m, p.state.lockstep = "1f1b", "zb_h2", 8, False
        p.state.memory_cap = "schedule_a"
    assert p.synthesize()
    sv = p.synthesis_view()
    cap = p.result.a.per_rank["peak_activation_bytes"].to_numpy(float)
    assert np.allclose(sv.cap_bytes, cap)
    peaks = sv.result.per_rank["peak_activation_bytes"].to_numpy(float)
    assert (peaks <= cap * (1 + 1e-9)).all()
    rows = sv.table.set_index("label")
    assert not rows.loc["zb_h2", "fits_cap"] and rows.loc["1f1b", "fits_cap"]  # ZB-H2 buys its speed with memory
    assert sv.result.metrics["makespan_s"] <= rows.loc["1f1b", "makespan_s"]
    mem = {t.name: list(t.y) for t in p.figures["synth_memory"].data}
    assert np.allclose(np.array(mem["memory cap"]) / cap, mem["memory cap"][0] / cap[0])
    assert "fits the cap" in p.synth_table.value and "Above the cap (grey): " in _text(p.synth_summary.value)
    assert "ZB-H2" in _text(p.synth_summary.value).split("Above the cap")[1]
    # a cap below one micro-batch: the core's refusal, in the section; the last synthesis stays, greyed
    good = p.synthesis_view()
    with p.hold():
        p.state.memory_cap, p.state.memory_cap_MiB = "bytes", 1.0
    assert p.synthesize() is False
    msg = _text(p.synth_message.value)
    assert "cannot run any schedule within its memory cap" in msg and re.search(r"rank \d", msg)
    assert p.message.value == "" and p._synth is good and p.figures["synth_bars"].stale


@pytest.mark.parametrize("name,value,words", [
    ("time_limit_s", 0.0, "time limit = 0 s is out of range: allowed more than 0 up to 600 s"),
    ("time_limit_s", 1e4, "time limit = 1e+04 s is out of range"),
])
def test_out_of_range_synthesis_settings_are_refused(panel, name, value, words):
    before = getattr(panel.state, name)
    setattr(panel.state, name, value)
    assert words in _text(panel.message.value)
    assert getattr(panel.state, name) == before == panel.control_widgets[name].value


def test_a_negative_memory_cap_is_refused_only_when_the_cap_is_bytes(panel):
    panel.state.memory_cap_MiB = -5.0  # not used: no cap
    assert panel.message.value == ""
    panel.state.memory_cap = "bytes"
    assert "memory cap = -5 MiB is out of range" in _text(panel.message.value) and panel.state.memory_cap == "none"


def test_numbers_mode_synthesis_follows_the_inputs_with_the_heuristic_and_waits_for_a_click_with_the_milp(panel):
    with panel.hold():
        panel.state.schedule, panel.state.p, panel.state.m, panel.state.f_ms = "1f1b", 2, 4, 1.5
    assert panel.synthesize()
    st = panel.state
    res = panel.synthesis_view().result
    costs = pp.StageCosts.per_rank(f_s=1.5e-3, b_s=st.b_ms * 1e-3, w_s=st.w_ms * 1e-3, chunks=1,
                                   activation_bytes=st.activation_MiB * 2**20)
    want = pp.synthesize(costs, p=2, m=4, comm={"latency_s": st.latency_ms * 1e-3}, method="heuristic")
    assert res.metrics["makespan_s"] == pytest.approx(want.metrics["makespan_s"])
    panel.state.m = 5  # the heuristic follows the inputs
    assert panel.synthesis_view() is not None and panel.synthesis_view().result.schedule.m == 5
    panel.state.method = "milp"  # an exact search waits for the click: the last one stays, greyed
    assert panel.synthesis_view() is None and "click" in _text(panel.synth_message.value)
    assert panel.figures["synth_bars"].stale
    panel.state.time_limit_s = 20.0
    assert panel.synthesize()
    res = panel.synthesis_view().result
    assert res.milp is not None or res.status == "optimal"  # the MILP ran, or the bound already proved it
    assert res.status == "optimal" and "proven optimal" in _text(panel.synth_summary.value)
    assert not panel.figures["synth_bars"].stale


def test_a_slow_heuristic_stops_following_the_inputs(panel, monkeypatch):
    with panel.hold():
        panel.state.schedule, panel.state.p, panel.state.m = "1f1b", 2, 4
    assert panel.synthesize() and panel.export_synthesis() and "download=" in panel.synth_export.value
    monkeypatch.setattr(pp.params, "SYNTH_FOLLOW_MAX_S", 0.0)  # as if the last search had taken longer than a change may wait
    panel.state.m = 5
    assert panel.synthesis_view() is None and panel.result.a.schedule.m == 5
    assert "the last search took" in _text(panel.synth_message.value) and panel.figures["synth_bars"].stale
    assert panel.synth_export.value == ""  # no link to a schedule of other inputs
    assert panel.synthesize() and panel.synthesis_view().result.schedule.m == 5 and not panel.figures["synth_bars"].stale


def test_the_synthesized_schedule_exports_as_torchs_csv(synth_panel):
    p = synth_panel
    res = p.synthesis_view().result
    assert p.export_synthesis()
    m = re.search(r'download="(synthesized_p4_v1_m8_torch\.csv)" href="data:text/plain;base64,([^"]+)"', p.synth_export.value)
    assert m, p.synth_export.value[:200]
    csv = base64.b64decode(m.group(2)).decode()
    assert csv == pp.to_torch_csv(res)
    # the CSV is the synthesized per-rank order, action for action
    assert [row.split(",") for row in csv.splitlines()] == [[str(a) for a in acts] for acts in res.schedule.actions]
    links = p.downloads.value or (p.download_button.click() or p.downloads.value)
    assert 'download="pipeline_synthesized_torch.csv"' in links and 'download="pipeline_synthesis_compare.csv"' in links
