"""BackendPanel driven headlessly: the walk through marking, merging and buffering; the grid; bad input.

Expectations come from the patent (003: marking by priority, merging same-backend neighbours into
aggregated ops launched once, buffers between backends) and from the example graph's design
(``hetsched.partition.examples.merge_outcomes``): ``a -> c`` on the gpu with ``a -> d -> c`` through
the fpga must be refused (a cycle), ``stem -> a`` and ``e -> f`` merged, buffers beat the serial run.
"""

from __future__ import annotations

import re

import pytest

import hetsched as hs
import hetsched.partition as pt
from hetsched.graph import OpGraph
from hetsched.io.generators import chain, resnet_like
from hetsched.partition.examples import merge_outcomes
from hetsched.plot import color_map
from hetsched.plot.core import GROUP_PALETTE
from hetsched.system import Device, Link, SupportTable, System
from hetsched.widgets import BackendPanel, Session
from hetsched.widgets.figure import _weight
from panel_testing import check_auto_blocks
from panel_testing import prepared_downloads as _prepared_downloads


@pytest.fixture()
def panel():
    return BackendPanel()  # the default set-up: the example where every merge outcome happens


def _trace(fw, name):
    return next(t for t in fw.data if t.name == name)


def _visible_text(p) -> str:
    """Every text a user reads: HTML values (tags stripped), labels, titles of figures and accordions."""
    out, stack = [], [p]
    while stack:
        w = stack.pop()
        stack.extend(getattr(w, "children", ()))
        for attr in ("value", "description", "placeholder"):
            v = getattr(w, attr, None)
            if isinstance(v, str):
                out.append(re.sub(r"<[^>]+>", " ", v))
        out.extend(str(t) for t in getattr(w, "titles", ()) or ())
        for o in getattr(w, "options", ()) or ():
            out.append(str(o[0] if isinstance(o, tuple) else o))
    for f in p.figures.values():
        out.append(str(f.layout.title.text or ""))
        out.extend(str(getattr(getattr(f.layout, ax).title, "text", "") or "") for ax in ("xaxis", "yaxis"))
        out.extend(str(t.name or "") for t in f.data)
    return "\n".join(out)


# -- the default tells a story ------------------------------------------------------------
def test_default_is_the_example_with_every_outcome(panel):
    v = panel.result
    g, s = merge_outcomes()
    direct = pt.partition_by_support(g, s)
    assert dict(v.partition.groups) == dict(direct.groups)
    assert len(v.partition.groups) > 1 and len(set(v.partition.assignment.values())) == 2
    outcomes = {st.data.get("outcome") for st in v.partition.steps if st.action == "merge"}
    assert outcomes == {"merged", "cycle", "different_backend", "not_adjacent"}
    assert v.buffered.metrics["throughput_per_s"] > v.serial.metrics["throughput_per_s"]  # buffers pay off
    assert "refused for a cycle" in panel.summary.value and "aggregated ops" in panel.summary.value


def test_plain_labels_no_seed_numbers_no_raw_keys(panel):
    for k in (0, 3, 11, panel.result.n_steps):
        panel.state.step = k
        text = _visible_text(panel)
        for bad in ("seed", "003", "makespan_s", "throughput_per_s", "n_inputs", "buffer_depth", "_s ", "Bps"):
            assert bad not in text, (bad, k)


# -- the walk --------------------------------------------------------------------------------
def test_walker_covers_marking_merging_buffering(panel):
    v = panel.result
    n_part, n_buf = v.partition.n_steps, v.buffered.n_steps
    assert len(panel.walker.steps) == n_part + n_buf  # the whole log, nothing re-run
    phases = [o[1] for o in panel.walker.phases.options]
    assert phases == ["start", "marking", "merging", "buffering", "final"]
    assert panel.state.step == n_part  # opens with the partition done
    panel.walker.jump("phase", value="marking")
    assert panel.state.step == 1 and "marking" in panel.step_text.value and "stem" in panel.step_text.value
    assert "can run on gpu0 (priority 1), cpu0 (priority 3)" in panel.step_text.value
    panel.walker.jump("phase", value="buffering")
    assert panel.state.step == n_part + 1 and "buffering" in panel.step_text.value
    assert "input 0" in panel.step_text.value and "claim 3" in panel.step_text.value


def test_marking_steps_colour_ops_as_they_are_marked(panel):
    cmap = color_map(panel.result.system.device_names)
    ops = list(panel.result.partition.graph)
    panel.state.step = 3  # stem, a, d marked
    colors = dict(zip(ops, _trace(panel.figures["graph"], "ops").marker.color))
    assert colors["d"] == cmap["fpga0"] and colors["stem"] == cmap["gpu0"]
    assert colors["tail"] == "#BDBDBD"  # not marked yet: neutral, never a device colour
    assert list(_trace(panel.figures["graph"], "this decision").customdata) == ["d"]
    # hover text lists each op's candidate backends with their priorities (the marked graph)
    hover = dict(zip(ops, panel.figures["graph"].data[3].hovertext))
    assert "fpga0 (1)" in hover["d"] and "gpu0 (2)" in hover["d"] and "cpu0 (3)" in hover["d"]


def test_merge_steps_draw_the_quotient_and_the_refused_cycle(panel):
    steps = panel.result.partition.steps
    merged = next(s.index for s in steps if s.data.get("outcome") == "merged")
    panel.state.step = merged + 1
    q = panel.figures["quotient"]
    assert len(_trace(q, "aggregated ops").x) == 6  # 7 marked ops, one merge done
    assert "merged" in panel.step_text.value and "claim 2" in panel.step_text.value
    assert panel.jump_to_outcome("cycle")
    k = panel.state.step
    assert steps[k - 1].data["outcome"] == "cycle"
    assert "would create a cycle" in panel.step_text.value and "<b>d</b>" in panel.step_text.value
    path = _trace(panel.figures["quotient"], "path that would close a cycle")
    assert len([x for x in path.x if x is None]) == 2  # stem's group -> d -> c: two edges
    assert sorted(_trace(panel.figures["graph"], "this decision").customdata) == ["a", "c", "stem"]
    assert not panel.jump_to_outcome("cycle")  # the only one
    assert panel.jump_to_outcome("merged", -1) and panel.state.step == merged + 1


def test_buffering_steps_move_the_cursors_and_outline_running_groups(panel):
    v = panel.result
    n_part = v.partition.n_steps
    panel.state.step = n_part + 4
    now = v.buffered.replay(3)
    gantt, occ = panel.figures["gantt"], panel.figures["buffers"]
    f = gantt.layout.meta["time_factor"]
    assert gantt.layout.shapes[0].x0 == pytest.approx(now["time_s"] * f)
    assert list(_trace(occ, "now").x)[0] == pytest.approx(now["time_s"] * occ.layout.meta["time_factor"])
    running_ops = {o for g, _i in now["running"].values() for o in v.partition.groups[g]}
    assert set(_trace(panel.figures["graph"], "this decision").customdata) == running_ops
    labels = " ".join(_trace(panel.figures["quotient"], "aggregated ops").text)
    assert "input" in labels


def test_a_step_click_patches_the_figures(panel):
    views = panel.figures
    specs = {n: v.n_sent_specs for n, v in views.items()}
    for k in range(0, panel.result.n_steps + 1, 3):
        panel.walker.stepper.slider.value = k
        assert sum(_weight(v.edits) for v in views.values()) < 100_000
    assert {n: v.n_sent_specs for n, v in views.items()} == specs  # no figure rebuilt by a step


@pytest.fixture(scope="module")
def big():
    """The 1k-op bundled graph on the toy system with gpu0 off: fpga0 runs most, cpu0 the rest."""
    p = BackendPanel(graph=hs.load_graph("randwire_ws_train_b32"), system=hs.toy_system())
    p.toggle("gpu0", False)
    return p


@pytest.mark.parametrize("view", ["ops", "auto"])
def test_large_graph_step_is_a_patch_and_the_quotient_is_focused(big, view):
    p = big
    p.state.expanded = ()
    p.state.view = view
    assert p.blocks_shown() == (view == "auto")  # 973 ops: auto draws blocks
    v = p.result
    assert len(v.partition.groups) > 20
    specs = {n: w.n_sent_specs for n, w in p.figures.items()}
    cyc = next(s.index for s in v.partition.steps if s.data.get("outcome") == "cycle")
    for k in (5, 6, cyc + 1, v.partition.n_steps + 10):
        p.state.step = k
        assert sum(_weight(w.edits) for w in p.figures.values()) < 100_000, k
    assert {n: w.n_sent_specs for n, w in p.figures.items()} == specs
    p.state.step = cyc + 1
    assert "around this decision" in p.figures["quotient"].layout.title.text
    assert len(_trace(p.figures["quotient"], "aggregated ops").x) <= 60
    p.state.view = "auto"


# -- big graphs by blocks (issue 22) -----------------------------------------------------------
def _blocks_of(p):
    from hetsched.blocks import op_blocks

    return op_blocks(p.result.partition.graph)


def test_auto_draws_blocks_above_the_graph_tabs_threshold(panel, big, monkeypatch):
    check_auto_blocks(panel, big, monkeypatch)
    assert "by blocks" in big.figures["graph"].layout.title.text


def test_blocks_take_their_backend_lighter_while_partly_marked_outlined_when_mixed(big):
    from hetsched.plot.core import lighten

    v = big.result
    part = v.partition
    g = part.graph
    blocks = _blocks_of(big)
    cmap = color_map(v.system.device_names)
    big.state.view, big.state.expanded, big.state.color_by = "auto", (), "backend"
    fw = big.figures["graph"]
    marks = [s for s in part.steps if s.action == "mark"]
    # every op marked: each block in the backend holding most of its FLOPs, outlined if its ops are on several
    big.state.step = len(marks)
    t = _trace(fw, "blocks")
    got = {c[len("block:"):]: (col, lc, lw) for c, col, lc, lw in
           zip(t.customdata, t.marker.color, t.marker.line.color, t.marker.line.width)}
    want: dict[str, dict[str, float]] = {}
    for s in marks:
        b = want.setdefault(blocks[s.subject], {})
        b[s.data["choice"]] = b.get(s.data["choice"], 0.0) + float(g.op(s.subject).flops)
    n_mixed = 0
    for b, flops in want.items():
        ranked = sorted(flops, key=flops.get, reverse=True)
        col, lc, lw = got[b]
        assert col == cmap[ranked[0]], b
        if len(ranked) > 1:
            n_mixed += 1
            assert lw >= 3 and lc == cmap[ranked[1]], b
        else:
            assert lw < 1, b
    assert 1 <= n_mixed < len(want)
    # half-way through the marking: marked blocks full, the block being marked lighter, the rest grey
    k = len(marks) // 2
    big.state.step = k
    marked = {s.subject for s in marks[:k]}
    t = _trace(fw, "blocks")
    for c, col in zip(t.customdata, t.marker.color):
        ops = [o for o, b in blocks.items() if b == c[len("block:"):]]
        done = [o for o in ops if o in marked]
        if not done:
            assert col == "#BDBDBD", c
        elif len(done) < len(ops):
            assert col.lower() in {lighten(x, 0.55) for x in cmap.values()}, c
    legend = [x.name for x in fw.data if x.hoverinfo == "skip" and x.mode == "markers"]
    assert "not marked yet" in legend and "lighter: partly marked" in legend
    assert any("several backends" in x for x in legend)
    hover = " ".join(t.hovertext)
    assert "marked fpga0" in hover and "not marked yet" in hover and "GFLOPs" in hover


def test_a_block_step_rings_the_decisions_blocks_and_sends_little(big):
    v = big.result
    part = v.partition
    blocks = _blocks_of(big)
    big.state.view, big.state.expanded, big.state.color_by = "auto", (), "backend"
    fw = big.figures["graph"]
    ring = lambda: set(_trace(fw, "this decision").customdata)  # noqa: E731
    big.state.step = 0
    specs = fw.n_sent_specs
    for k in (1, 2, 40):  # marking: the op's block
        colours = list(_trace(fw, "blocks").marker.color)
        big.state.step = k
        s = part.steps[k - 1]
        assert s.action == "mark" and ring() == {f"block:{blocks[s.subject]}"}
        assert sum(_weight(w.edits) for w in big.figures.values()) < 100_000
        if k == 1:
            assert list(_trace(fw, "blocks").marker.color) != colours
    cyc = next(s for s in part.steps if s.data.get("outcome") == "cycle")
    merged = next(s for s in part.steps if s.data.get("outcome") == "merged"
                  and blocks[s.data["edge"][0]] != blocks[s.data["edge"][1]])
    for s in (cyc, merged):  # merging: both ends of the edge tried
        big.state.step = s.index + 1
        a, b = s.data["edge"]
        assert ring() == {f"block:{blocks[a]}", f"block:{blocks[b]}"}, s
        assert sum(_weight(w.edits) for w in big.figures.values()) < 100_000
    tried = _trace(fw, "edge tried")
    assert len(tried.x) == 2  # the two blocks joined
    # the buffered run: the blocks of the aggregated ops running now
    n_part = part.n_steps
    for j in (3, 10):
        big.state.step = n_part + j + 1
        now = v.buffered.replay(j)
        assert ring() == {f"block:{blocks[o]}" for g, _i in now["running"].values() for o in part.groups[g]}
        assert sum(_weight(w.edits) for w in big.figures.values()) < 100_000
    assert fw.n_sent_specs == specs  # steps never rebuilt the figure
    # copies between backends: block edges carrying an op edge from one backend to another
    big.state.step = n_part
    assert len(_trace(fw, "copies between backends").x) > 0


def test_clicking_a_block_expands_it_and_again_collapses(big):
    v = big.result
    blocks = _blocks_of(big)
    big.state.view, big.state.expanded = "auto", ()
    big.state.step = v.partition.n_steps
    fw = big.figures["graph"]
    t_i = next(i for i, t in enumerate(fw.data) if t.name == "blocks")
    cds = list(fw.data[t_i].customdata)
    fw._on_front_end_msg(None, {"type": "click", "trace": t_i, "point": cds.index("block:conv3")}, [])
    assert big.state.expanded == ("conv3",)
    cds = list(fw.data[t_i].customdata)
    ops = [o for o, b in blocks.items() if b == "conv3"]
    assert "block:conv3" not in cds and {f"op:{o}" for o in ops} <= set(cds)
    cmap = color_map(v.system.device_names)
    cols = dict(zip(cds, fw.data[t_i].marker.color))
    assert all(cols[f"op:{o}"] == cmap[v.partition.assignment[o]] for o in ops)
    # a step keeps the opened block (a patch)
    specs = fw.n_sent_specs
    big.state.step -= 1
    assert fw.n_sent_specs == specs and list(fw.data[t_i].customdata) == cds
    # a click on one of its ops closes it again
    fw._on_front_end_msg(None, {"type": "click", "trace": t_i, "point": cds.index(f"op:{ops[0]}")}, [])
    assert big.state.expanded == () and "block:conv3" in fw.data[t_i].customdata
    # colour by aggregated op works by blocks too (its own legend words)
    big.state.color_by = "group"
    legend = [x.name for x in fw.data if x.hoverinfo == "skip" and x.mode == "markers"]
    assert "lighter: still merging" in legend and any("several aggregated ops" in x for x in legend)
    big.state.color_by = "backend"


# -- the mapping list ------------------------------------------------------------------------
def test_grid_shows_explicit_wildcard_zero_and_absent_apart(panel):
    cells = panel.grid_cells
    kinds = {}
    for (b, t), box in cells.items():
        kinds[(b, t)] = [c for c in box._dom_classes if c.startswith("hetsched-prio-")]
    assert kinds[("fpga0", "Conv")] == ["hetsched-prio-exact"] and cells[("fpga0", "Conv")].value == "1"
    assert kinds[("gpu0", "Gelu")] == ["hetsched-prio-wildcard"] and cells[("gpu0", "Gelu")].placeholder == "1 (*)"
    assert kinds[("fpga0", "Gelu")] == ["hetsched-prio-absent"] and cells[("fpga0", "Gelu")].placeholder == "–"
    assert cells[("gpu0", "Gelu")].value == ""  # the derived value is shown as a hint, not as an entry


def test_zero_on_a_wildcard_cell_moves_the_ops(panel):
    gelu = [o for o in panel.graph if panel.graph.op(o).op_type == "Gelu"]
    assert {panel.result.partition.assignment[o] for o in gelu} == {"gpu0"}
    assert panel.cell_source("gpu0", "Gelu") == "wildcard"
    panel.grid_cells[("gpu0", "Gelu")].value = "0"  # what typing 0 in the cell does
    assert panel.message.value == ""
    assert {panel.result.partition.assignment[o] for o in gelu} == {"cpu0"}  # cpu0's * row (3) takes them
    box = panel.grid_cells[("gpu0", "Gelu")]
    assert "hetsched-prio-excluded" in box._dom_classes and box.value == "0"
    assert panel.cell_source("gpu0", "Gelu") == "excluded"
    box.value = ""  # clearing the cell takes the entry out: back to the * row
    assert panel.cell_source("gpu0", "Gelu") == "wildcard"
    assert {panel.result.partition.assignment[o] for o in gelu} == {"gpu0"}


def test_priority_edits_move_ops_and_bad_cells_are_refused(panel):
    conv = [o for o in panel.graph if panel.graph.op(o).op_type == "Conv"]
    panel.set_priority("fpga0", "Conv", 3)  # the gpu (2) now beats the fpga on convolutions
    assert {panel.result.partition.assignment[o] for o in conv} == {"gpu0"}
    assert panel.grid_cells[("fpga0", "Conv")].value == "3"
    good = panel.result
    for bad in ("abc", "-1", "1000", "1.5"):
        panel.grid_cells[("cpu0", "Conv")].value = bad
        assert "refused" in panel.message.value and "priority of Conv on cpu0" in panel.message.value
        assert panel.result is good  # nothing recomputed
        assert panel.grid_cells[("cpu0", "Conv")].value == ""  # the cell shows the list in use again
    panel.grid_cells[("gpu0", "Conv")].value = "0"
    assert panel.message.value == ""  # cleared by the next success
    assert {panel.result.partition.assignment[o] for o in conv} == {"fpga0"}
    assert not panel.set_priority("gpu0", "NoSuchType", 1) and "no cell" in panel.message.value


# -- controls ----------------------------------------------------------------------------------
def test_toggle_backend_recolours_and_resimulates(panel):
    before_tp = panel.result.buffered.metrics["throughput_per_s"]
    panel.checkboxes["fpga0"].value = False  # what a click does
    v = panel.result
    assert set(v.partition.assignment.values()) == {"gpu0"}
    cmap = color_map(v.system.device_names)
    assert set(_trace(panel.figures["graph"], "ops").marker.color) == {cmap["gpu0"]}
    assert v.buffered.metrics["throughput_per_s"] != before_tp
    panel.toggle("fpga0", True)
    assert "fpga0" in set(panel.result.partition.assignment.values())


def test_launch_cost_is_the_reason_to_merge(panel):
    panel.launch_text.value = "200"  # us per aggregated-op launch
    assert panel.state.launch_s == pytest.approx(200e-6)
    merged = panel.result.buffered.metrics["throughput_per_s"]
    assert "200 us each" in panel.summary.value
    panel.state.merge = "none"  # one launch per op: 7 launches per input instead of 5
    per_op = panel.result.buffered.metrics["throughput_per_s"]
    assert len(panel.result.partition.groups) == 7 and per_op < merged
    panel.launch_text.value = ""  # each backend's own again
    assert panel.state.launch_s is None


def test_serial_and_buffered_runs_share_one_axis_with_group_colours(panel):
    fig = panel.figures["gantt"]
    lanes = list(fig.layout.yaxis.categoryarray)
    assert any(x.startswith("serial · ") for x in lanes) and any(x.startswith("buffered · ") for x in lanes)
    groups = set(panel.result.partition.groups)
    compute = [t for t in fig.data if t.name in groups]
    assert {t.name for t in compute} == groups
    devs = set(color_map(panel.result.system.device_names).values())
    for t in compute:
        assert t.marker.color in GROUP_PALETTE and t.marker.color not in devs  # a group never wears a device colour
    table = panel.groups_html.value
    assert all(c in table for c in (t.marker.color for t in compute))


def test_merge_min_group_and_buffers(panel):
    adjacent = len(panel.result.partition.groups)
    panel.state.merge = "none"
    assert len(panel.result.partition.groups) == panel.graph.n_ops > adjacent
    panel.state.merge = "global"  # tries the distant same-backend groups too: here each would close a cycle
    assert len(panel.result.partition.groups) == adjacent
    assert any(s.data.get("mode") == "global" and s.data.get("outcome") == "cycle" for s in panel.result.partition.steps)
    panel.state.merge = "adjacent"
    panel.state.buffer_depth = 0
    assert "no buffers" in panel.summary.value
    panel.state.buffer_depth = 4
    assert panel.result.buffered.metrics["throughput_per_s"] > panel.result.serial.metrics["throughput_per_s"]
    with panel.hold():
        panel.state.fallback = "cpu0"
        panel.state.min_group_size = 3
    assert panel.result.partition.metrics["n_fallback_groups"] > 0
    assert "fallback" in [o[1] for o in panel.walker.phases.options]


@pytest.mark.parametrize("name, bad, words", [
    ("n_inputs", 0, "number of inputs = 0 is out of range: allowed 1 to 1000; refused"),
    ("n_inputs", 100_000, "number of inputs = 100000 is out of range"),
    ("buffer_depth", -1, "buffer depth = -1 is out of range: allowed 0 to 1000"),
    ("min_group_size", 0, "minimum group size = 0 ops is out of range"),
    ("launch_s", float("nan"), "launch cost per aggregated op must be a finite number, got nan"),
    ("launch_s", -1.0, "launch cost per aggregated op = -1e+06 us is out of range: allowed 0 to 1000000 us, or empty"),
])
def test_out_of_range_values_are_refused_and_the_last_result_kept(panel, name, bad, words):
    good, before = panel.result, getattr(panel.state, name)
    setattr(panel.state, name, bad)
    assert words in panel.message.value and panel.result is good
    # taken back: the control shows the value in effect, and the result on screen matches it
    assert getattr(panel.state, name) == before and not panel.stale
    if name != "launch_s":
        assert panel.control_widgets[name].value == before
    panel.state.n_inputs = 5 if name != "n_inputs" else 6  # the next valid action clears the message
    assert panel.message.value == "" and not panel.stale and panel.result is not good


def test_launch_box_refuses_text_and_keeps_the_last_value(panel):
    panel.launch_text.value = "50"
    good = panel.result
    for bad in ("abc", "-3", "nan", "2e9"):
        panel.launch_text.value = bad
        assert "launch cost" in panel.message.value and "refused" in panel.message.value
        assert panel.result is good and panel.launch_text.value == "50"
    panel.state.n_inputs = 9
    assert panel.message.value == ""


def test_names_from_user_files_are_escaped():
    evil = "<img src=x onerror=alert(1)>"
    g = OpGraph(f"g{evil}")
    g.add_op(f"a{evil}", "Conv", flops=1e9)
    g.add_op("b", f"T{evil}", flops=1e9)
    g.add_op("c", "Conv", flops=1e9)
    g.connect(f"a{evil}", "b", 1 << 20)
    g.connect("b", "c", 1 << 20)
    GiB = 2**30
    s = System([Device("cpu0", "cpu", {"default": 1e12}, 64 * GiB, 1e11, 2e-6),
                Device(evil, "fpga", {"default": 1e13}, 64 * GiB, 1e11, 1e-6)],
               [Link("cpu0", evil, 16e9, 5e-6)], host="cpu0",
               support=SupportTable({evil: {"Conv": 1}, "cpu0": {"*": 2}}))
    p = BackendPanel(graph=g, system=s)
    assert p.message.value == "", p.message.value
    assert len(p.result.partition.groups) == 3
    for k in range(p.result.n_steps + 1):
        p.state.step = k
        for html_text in (p.summary.value, p.groups_html.value, p.step_text.value, p.message.value):
            assert "<img" not in html_text, (k, html_text)
    for w in p.grid_box.children[0].children:
        if hasattr(w, "value") and isinstance(w.value, str) and "img" in w.value:
            assert "<img" not in w.value
    for f in p.figures.values():
        for t in f.data:
            for attr in ("text", "hovertext"):
                v = getattr(t, attr, None)
                if v is not None and not isinstance(v, str):
                    assert not any("<img" in str(x) for x in v), (t.name, attr)


def test_capacity_error_names_op_and_backend():
    g = OpGraph("big")
    g.add_op("huge", "Conv", flops=1e9, weight_bytes=2**40)
    s = hs.toy_system()
    p = BackendPanel(graph=g, system=s.with_support(SupportTable({"fpga0": {"Conv": 1}, "cpu0": {"*": 2}})))
    assert "huge" in p.message.value and "fpga0" in p.message.value
    p.toggle("fpga0", False)  # the host has ample memory
    assert p.message.value == "" and set(p.result.partition.assignment.values()) == {"cpu0"}


def test_unsupported_op_says_which_and_recovers():
    p = BackendPanel(graph=resnet_like(blocks_per_stage=1), system=hs.toy_system())
    p.toggle("gpu0", False)
    p.toggle("cpu0", False)  # the FPGA alone cannot run GlobalAveragePool
    assert "no enabled backend" in p.message.value and "gap" in p.message.value
    p.state.fallback = "cpu0"
    assert p.message.value == "" and p.result.partition.fallback_ops
    p.state.n_inputs = 0
    assert "inputs" in p.message.value and p.state.n_inputs == 8
    p.state.n_inputs = 9
    assert p.message.value == ""


# -- graph and session ------------------------------------------------------------------------
def test_load_on_a_pinned_panel_shows_the_new_graph():
    p = BackendPanel(graph=chain(3), system=hs.toy_system())
    g2 = chain(5)
    assert p.load(g2) is True
    assert p.result.partition.graph is g2 and set(p.result.partition.assignment) == set(g2.ops)
    assert {t for (_b, t) in p.grid_cells} == {"Conv", "Relu"}


def test_follows_the_session_once_a_graph_is_loaded():
    session = Session()
    session.system = hs.toy_system()
    p = BackendPanel(session=session)
    # built after a machine was chosen (a dashboard builds a tab on its first show): it follows the
    # session already, on the example's graph until a graph is loaded
    assert p.state.setup == "loaded" and p.result.partition.graph.name == "merge_outcomes"
    assert p.system().name == "toy"
    assert BackendPanel(session=Session()).state.setup == "example"  # nothing chosen: its own example
    n = p.n_updates
    session.graph = chain(4)
    assert p.state.setup == "loaded" and p.n_updates == n + 1  # one recompute
    assert set(p.result.partition.assignment) == {"op0", "op1", "op2", "op3"}
    assert {t for (_b, t) in p.grid_cells} == {"Conv", "Relu"}
    p.state.setup = "example"
    assert p.result.partition.graph.name == "merge_outcomes"
    links = _prepared_downloads(p)
    for name in ("partition_trace.json", "partition_groups.csv", "support_table.csv", "partition_steps.csv"):
        assert f'download="{name}"' in links


def test_hidden_panel_computes_when_shown():
    session = Session()
    session.system = hs.toy_system()
    p = BackendPanel(session=session, active=False)
    assert p.result is None
    cells = p.grid_cells
    session.graph = chain(4)
    session.graph = chain(5)
    assert p.result is None and p.stale
    assert p.grid_cells is cells  # no widgets built for graphs a hidden tab never showed
    assert p.activate() and set(p.result.partition.assignment) == {f"op{i}" for i in range(5)}
    assert {t for (_b, t) in p.grid_cells} == {"Conv", "Relu"} and p.n_updates == 1


def test_loaded_setup_without_a_graph_says_so():
    p = BackendPanel(session=Session())
    p.state.setup = "loaded"
    assert "no graph is loaded" in p.message.value
    assert p.result.partition.graph.name == "merge_outcomes"  # the last good result stays
