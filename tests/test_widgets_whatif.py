"""The what-if a user expects in every tab, and nothing on screen that is wrong (issue 33), headless.

Each test names the point of the issue it guards: the machine in the session and its editor, the
comparison with the previous machine, block views coloured by where the work runs and labelled,
scenario notices that agree with their pictures, the busy state of figures, refused values typed
back, plain words with the patent's terms in small type, the Memory tab's dropped ILP order, the
Calibration tab and what the dashboard's page says.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import ipywidgets as W
import pytest

import hetsched as hs
from hetsched.errors import HetschedError
from hetsched.io.systems import load_system, system_from_yaml
from hetsched.scenarios import DEVICE_WORDS, SCENARIOS
from hetsched.widgets import Dashboard, GraphPanel, MappingPanel, MemoryPanel, Session
from hetsched.widgets.base import PATENT_TERMS

ROOT = Path(__file__).resolve().parents[1]


def _walk(w):
    stack, out = [w], []
    while stack:
        x = stack.pop()
        out.append(x)
        # a hidden tab lays its children out when first shown (issue 32): its full layout is what it will show
        stack.extend(getattr(x, "children", ()) or getattr(x, "_layouts", {}).get("full", ()) or ())
    return out


# ------------------------------------------------------------------ 1. the machine, in the session
@pytest.fixture(scope="module")
def dash():
    return Dashboard()


def test_every_scheduling_tab_shows_a_machine_bar_over_the_one_session(dash):
    for key in ("graph", "backends", "mapping", "experts", "pipeline", "memory", "executor"):
        p = dash.panels[key]
        assert p.MACHINE_BAR and p.machine_bar in _walk(p), key
        assert p.machine_bar.session is dash.session, key
    assert not getattr(dash.panels["calibration"], "MACHINE_BAR", False)


def test_a_machine_picked_in_one_tab_is_every_tabs_machine_and_each_recomputes(dash):
    dash.apply_scenario("")
    mapping = dash.show("mapping")
    before = mapping.result
    assert mapping.machine().name == "h2h_fpga_zoo"  # its own scenario's machine (the U280 cut to 56 MiB)
    assert mapping.machine_bar.pick("gpu_tpu")
    assert dash.session.system.name == "gpu_tpu" and dash.session.previous_system.name == "h2h_fpga_zoo"
    # the tab shown recomputed on the new machine; the hidden ones are stale until shown
    assert mapping.result is not before and mapping.result.system.name == "gpu_tpu"
    assert set(mapping.result.placement.device.values()) <= {"cpu0", "gpu0", "tpu0"}
    for key in ("backends", "executor", "memory", "experts"):
        p = dash.show(key)
        assert p.machine().name == "gpu_tpu" and p.message.value == "", (key, p.message.value)
    # the experts of the tab's own MoE example placed over the picked machine's devices
    assert set(dash.panels["experts"].assignment["device"]) <= {"cpu0", "gpu0", "tpu0"}
    assert dash.panels["backends"].result.system.device_names == ["cpu0", "gpu0", "tpu0"]
    ex_ = dash.panels["executor"]  # device ops on the machine's first accelerator; a copy engine per accelerator
    assert set(ex_.result.timeline["device"].dropna()) <= {"cpu0", "gpu0"} and set(ex_.sync_boxes) == {"gpu0", "tpu0"}
    assert ex_.control_widgets["pcie_Bps"].disabled  # the machine's own links price the copies
    # the pipeline splits GPT-2 over the new machine: the TPU runs no backward op, so no split over its
    # default ranks exists; the ranks go to the GPU instead and the panel says why (a fallback, not a refusal)
    pl = dash.show("pipeline")
    assert pl.machine().name == "gpu_tpu" and pl.message.value == ""
    assert set(pl.result.devices) == {"gpu0"} and "tpu0 cannot run every op of" in pl.result.note
    assert "tpu0 cannot run every op of" in pl.summary.value
    pl.machine_bar.pick("cpu_gpu_fpga")
    pl.machine_bar.remove_device("fpga0")
    assert pl.message.value == "" and pl.result.system_name == "cpu_gpu_fpga (edited)"
    assert set(pl.result.devices) == {"gpu0"}
    # every bar names the machine in effect
    assert all("cpu_gpu_fpga (edited)" in dash.panels[k].machine_bar.title.value for k in ("graph", "mapping", "executor"))
    dash.show("mapping").machine_bar.pick("")  # back to each tab's own
    assert dash.session.system is None and dash.panels["mapping"].machine().name == "h2h_fpga_zoo"


def test_machine_edits_are_checked_by_the_core_and_refusals_name_device_and_field():
    p = GraphPanel()
    bar = p.machine_bar
    assert bar.set_link("cpu0", "gpu0", gbps=2.0)
    m = p.session.system
    assert m.name == "gpu_tpu (edited)" and m.link("cpu0", "gpu0").bandwidth_Bps == 2e9
    # refusals come from the core (hetsched.system), name the device and the field, and change nothing
    for call, words in ((lambda: bar.set_memory("tpu0", 0.0), "device tpu0: memory = 0 GiB is out of range"),
                        (lambda: bar.set_mem_bandwidth("gpu0", float("nan")), "device gpu0: memory bandwidth must be a finite"),
                        (lambda: bar.set_link("cpu0", "gpu0", latency_us=-3.0), "link cpu0->gpu0: link latency = -3 us"),
                        (lambda: bar.set_link("gpu0", "tpu0", gbps=1.0), "no link between gpu0 and tpu0"),
                        (lambda: bar.remove_device("cpu0"), "cpu0 is the host"),
                        (lambda: bar.add_device("a quantum chip"), "no bundled device")):
        assert call() is False
        assert words in html.unescape(bar.message.value), (words, bar.message.value)
        assert p.session.system is m
    with pytest.raises(HetschedError) as e:
        m.with_device_values("gpu0", memory_bytes=-1.0)
    assert e.value.device == "gpu0" and e.value.field == "memory_bytes"
    # add a bundled device, remove one: two GPUs instead of a GPU and a TPU
    assert bar.add_device("NVIDIA A100 80GB PCIe") and bar.remove_device("tpu0")
    assert [d.kind for d in p.session.system.devices.values()] == ["cpu", "gpu", "gpu"]
    # the editor shows a row per device and per link, built when opened
    bar.edit.value = True
    texts = " ".join(getattr(w, "value", "") for w in _walk(bar.editor) if isinstance(w, W.HTML))
    assert "gpu1" in texts and "NVIDIA A100 80GB PCIe" in texts and "cpu0 ↔ gpu1" in texts
    boxes = [w for w in _walk(bar.editor) if isinstance(w, W.FloatText)]
    assert len(boxes) == 2 * 3 + 2 * 2
    next(b for b in boxes if b.value == 512.0).value = 64.0  # cpu0's memory (512 GiB), typed in GiB
    assert p.session.system.device("cpu0").memory_bytes == 64 * 2**30


def test_an_edit_in_the_open_editor_changes_its_values_not_its_widgets():
    """A box typed in the editor sends new values to the open editor's boxes, not a new editor (the browser
    benchmark's row: a whole editor over the websocket per keystroke-Enter); a new device rebuilds it."""
    p = MappingPanel()
    bar = p.machine_bar
    bar.edit.value = True
    grid = bar.editor.children[2]
    box = next(w for w in _walk(grid) if isinstance(w, W.FloatText) and w.value == 512.0)  # cpu0's memory
    box.value = 64.0
    assert p.session.system.device("cpu0").memory_bytes == 64 * 2**30
    assert bar.editor.children[2] is grid and box.value == 64.0  # same widgets, the machine's value
    box.value = -1.0  # refused: the box shows the machine in effect again
    assert "out of range" in bar.message.value and box.value == 64.0 and bar.editor.children[2] is grid
    bar.pick("")  # this tab's own machine: the same boxes show its values
    assert box.value == 512.0 and bar.editor.children[1].value == p.machine().name
    assert bar.add_device("NVIDIA Tesla V100 PCIe 32GB") and bar.editor.children[2] is not grid


def test_an_edited_machine_is_saved_as_system_yaml_and_loads_back():
    p = GraphPanel()
    bar = p.machine_bar
    bar.add_device("Google Cloud TPU v4 (one chip)")
    link = bar.prepare_download()
    assert 'download="gpu_tpu_(edited).yaml"' in link
    import base64

    text = base64.b64decode(re.search(r"base64,([^\"]+)", link).group(1)).decode()
    back = system_from_yaml(text)
    assert back.device_names == p.session.system.device_names and back.support == p.session.system.support
    # a loaded YAML is offered in every bar's picker; a bad one is refused with the field it names
    q = GraphPanel()
    assert q.machine_bar.load_yaml(text.replace("name: gpu_tpu (edited)", "name: from a file").encode(), "m.yaml")
    assert q.session.system.name == "from a file" and "from a file" in [v for _l, v in q.machine_bar.picker.options]
    assert not q.machine_bar.load_yaml(b"devices: [{name: x, memory_bytes: -1}]", "bad.yaml")
    assert "memory_bytes" in q.machine_bar.message.value and q.session.system.name == "from a file"


def test_mapping_memory_executor_compare_with_the_previous_machine():
    s = Session()
    mp_, mem_ = MappingPanel(session=s), MemoryPanel(session=s)
    from hetsched.widgets import ExecutorPanel

    ex_ = ExecutorPanel(session=s)
    assert all(p.machine_compare.value == "" for p in (mp_, mem_, ex_))  # no previous machine yet
    mp_.machine_bar.use(load_system("h2h_fpga_zoo").with_device_values("fpga_cnn1", memory_bytes=8 * 2**20))
    for p in (mp_, mem_, ex_):
        text = p.machine_compare.value
        assert "This machine against the previous one" in text and "previous:" in text, type(p).__name__
        assert p.machine_compare in _walk(p)
    assert "total busy time of all devices" in mp_.machine_compare.value and "layers per device" in mp_.machine_compare.value
    assert "devices whose memory holds it" in mem_.machine_compare.value
    assert "makespan" in ex_.machine_compare.value
    # the numbers are the same run on the previous machine
    prev = mp_.machine_metrics(s.previous_system)
    assert prev["makespan (when the last layer ends)"][0] > 0
    mp_.machine_bar.compare.value = False  # unticked: hidden
    assert mp_.machine_compare.value == ""


# ------------------------------------------------------------------ 2. block views and scenario pictures
def _block_labels(fig):
    """``{block: colour}`` and ``{colour: legend name}`` of a block view."""
    nodes = next(t for t in fig.data if t.name == "blocks")
    colours = dict(zip(nodes.customdata, nodes.marker.color))
    legend = {t.marker.color: t.name for t in fig.data if t.showlegend and t.x == (None,)}
    return colours, legend, dict(zip(nodes.customdata, nodes.text or ()))


def test_block_views_are_coloured_by_where_the_work_runs_and_labelled():
    p = GraphPanel()  # the tour: ResNet-50 on the GPU + TPU machine, coloured by preferred device
    colours, legend, text = _block_labels(p.figures["graph"].figure)
    by_device = {b[6:]: legend[c] for b, c in colours.items()}
    assert by_device["layer3"] == "tpu0" and by_device["maxpool"] == "gpu0"  # 19 of 62 ops are convs, 99.7% of the FLOPs
    assert text["block:layer3"] == "layer3<br>62 ops"
    # BERT's 14 blocks: each named, with its op count
    p.state.source, p.state.bundled = "bundled", "bert_base_b1_s128"
    _c, _l, text = _block_labels(p.figures["graph"].figure)
    assert len(text) == 14 and all(re.fullmatch(r"[\w.]+( \(backward\))?<br>\d+ ops?", t) for t in text.values()), text


@pytest.mark.parametrize("key", [k for k, sc in SCENARIOS.items() if sc.claims])
def test_each_scenario_notice_agrees_with_its_picture(key):
    """The device a notice names holds most of the work of the blocks (or op types) it names, in the
    picture the tab draws: the Graph tab's block colours, the Mapping tab's final mapping."""
    sc = SCENARIOS[key]
    d = Dashboard(tabs=("graph", "backends", "mapping"))
    d.apply_scenario(key)
    g, s = d.session.graph, d.session.system
    for claim in sc.claims:
        if claim.view == "preferred":
            gp = d.show("graph")
            assert gp.state.color_by == "device"
            colours, legend, _t = _block_labels(gp.figures["graph"].figure)
            for b in claim.blocks:
                assert legend[colours[f"block:{b}"]] == claim.device, (key, b, claim)
            placement = claim.placement(g, s)
        elif claim.view == "marked":
            placement = dict(d.show("backends").result.partition.assignment)  # what the tab colours by backend
        else:
            mp_ = d.show("mapping")
            placement = dict(mp_.result.placement.device)  # the final mapping the tab draws
        assert claim.check(g, placement) == [], (key, claim)
        assert claim.words in sc.notice and claim.device in s.device_names


@pytest.mark.parametrize("key", list(SCENARIOS))
def test_every_device_a_notice_names_has_a_checked_claim(key):
    sc = SCENARIOS[key]
    named = {w for w in DEVICE_WORDS if re.search(rf"\b{w}s?\b", sc.notice)}
    assert named <= {c.words for c in sc.claims}, (key, named)


# ------------------------------------------------------------------ 3. while computing; refusals; words
def test_figures_are_busy_while_computing_and_a_new_view_is_a_placeholder():
    from hetsched.widgets.figure import PlotlyView

    seen = []
    p = MemoryPanel(graph=hs.io.generators.chain(5), method="bfs", overlay=())
    orig = p.compute

    def spy():
        seen.append({n: v.busy for n, v in p.figures.items()})
        return orig()

    p.compute = spy
    p.state.method = "dfs"
    assert seen and all(seen[-1].values()) and not any(v.busy for v in p.figures.values())
    assert "hetsched-spinner" in p.busy.value or p.busy.value == ""
    assert PlotlyView().spec["data"] == [] and "hetsched-placeholder" in PlotlyView._esm
    assert "computing" in PlotlyView._esm and "hetsched-computing" in PlotlyView._css


#: emoji that need an emoji font (a box where there is none): Unicode's Emoji_Presentation in the BMP
_EMOJI = re.compile("[\u231a\u231b\u23e9-\u23ec\u23f0\u23f3\u25fd\u25fe\u2614\u2615\u2648-\u2653\u267f\u2693\u26a1"
                    "\u26aa\u26ab\u26bd\u26be\u26c4\u26c5\u26ce\u26d4\u26ea\u26f2\u26f3\u26f5\u26fa\u26fd\u2705\u270a"
                    "\u270b\u2728\u274c\u274e\u2753-\u2755\u2757\u2795-\u2797\u27b0\u27bf\u2b1b\u2b1c\u2b50\u2b55"
                    "\U0001F000-\U0001FAFF]")


def _screen_texts(dash):
    """Every word a dashboard puts on screen: HTML values, control labels and options, figure texts;
    tooltips apart (they may carry the patent's terms)."""
    out = []
    for w in _walk(dash):
        for attr in ("description", "placeholder"):
            v = getattr(w, attr, None)
            if isinstance(v, str) and v:
                out.append(("label", v))
        if isinstance(w, W.HTML):
            out.append(("html", w.value))
        if hasattr(w, "_options_labels"):
            out += [("label", str(x)) for x in w._options_labels]
    for p in dash.panels.values():
        for v in getattr(p, "figures", {}).values():
            lay = v.figure.layout
            out += [("figure", str(x)) for x in (lay.title.text, lay.xaxis.title.text, lay.yaxis.title.text,
                                                  lay.legend.title.text) if x]
            out += [("figure", str(x)) for x in (lay.xaxis.ticktext or ()) + (lay.yaxis.ticktext or ())]
            out += [("figure", str(t.name)) for t in v.data if t.name and t.showlegend is not False]
    return out


def test_labels_are_plain_words_with_the_patent_term_in_small_type(dash):
    """Claims, "A/P variables", "system total latency"... appear only in small type beside plain words
    (or in a tooltip), in every tab and at every phase of every walk."""
    dash.apply_scenario("")
    texts = []
    for key in ("graph", "backends", "mapping", "pipeline", "memory", "executor", "calibration"):
        p = dash.show(key)
        walker = getattr(p, "walker", None)
        if walker is not None:
            for _label, ph in list(walker.phases.options):
                walker.jump("phase", +1, ph)
                texts += _screen_texts(dash)
        texts += _screen_texts(dash)
    small = re.compile(r"<small class='hetsched-term'[^>]*>.*?</small>|<span style='font-size:11px;color:#666'>.*?</span>"
                       r"|title='[^']*'|title=\"[^\"]*\"", re.S)
    bad = sorted({(kind, m.group(0), t[:160]) for kind, t in texts
                  for m in re.finditer(PATENT_TERMS, small.sub("", t))})
    assert not bad, bad[:8]
    emoji = sorted({(kind, t[:80]) for kind, t in texts if _EMOJI.search(t)})
    assert not emoji, emoji[:5]
    # the terms are there, beside plain words: in small type
    assert any("hetsched-term" in t and "claim" in t for _k, t in texts)


def test_no_panel_writes_a_glyph_that_needs_an_emoji_font():
    """The busy badge was an hourglass emoji: an empty box where no emoji font is installed (point 4)."""
    hits = [(f.name, n) for f in sorted((ROOT / "widgets").glob("*.py"))
            for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if _EMOJI.search(line)]
    assert hits == []


def test_a_refused_value_typed_back_clears_the_warning():
    """The browser sends the good value again into a control the refusal already put back: traitlets
    drops it as no change; the refusal must go anyway (issue 33, point 5)."""
    p = MemoryPanel(graph=hs.io.generators.chain(5), method="bfs", overlay=())
    box, n = p.control_widgets["time_limit_s"], p.n_updates
    box.set_state({"value": -1.0})  # what the browser sends when a person types -1
    # the state goes back, the box keeps what was typed, marked: typing the good value is then a change
    assert "refused" in p.message.value and p.state.time_limit_s == 2.0 and box.value == -1.0
    assert "hetsched-refused" in box._dom_classes
    box.set_state({"value": 2.0})  # the good value typed back
    assert p.message.value == "" and p.n_updates == n  # cleared, nothing changed to recompute
    assert "hetsched-refused" not in box._dom_classes
    box.set_state({"value": -5.0})
    box.set_state({"value": 3.0})  # another good value: recomputes, which clears the refusal too
    assert p.message.value == "" and p.state.time_limit_s == 3.0 and p.n_updates == n + 1


def test_the_size_box_refuses_with_a_message_instead_of_clamping():
    p = GraphPanel()
    p.state.source = "generator"
    good = p.result
    box = p.control_widgets["n"]
    assert not isinstance(box, W.BoundedIntText)  # a bounded box clamped in the browser, without a word
    box.value = 10**9
    assert "size" in p.message.value and "out of range" in p.message.value and p.result is good
    assert p.state.n == box.value != 10**9


# ------------------------------------------------------------------ 4. the Memory tab's dropped order
def test_memory_tab_says_why_the_patent_drops_its_better_ilp_order_with_both_numbers():
    p = MemoryPanel()  # the memory scenario: the ILP does not prove its 7.24 MiB order in 2 s
    r = p.result
    assert r.ilp.incumbent < r.peak_bytes and not r.ilp.proven
    text = html.unescape(p.summary.value)
    from hetsched.plot import format_value

    assert "Why the patent's order is not the best one found" in text
    assert format_value(r.ilp.incumbent, "peak_bytes") in text and format_value(r.peak_bytes, "peak_bytes") in text
    assert "claim 1" in text and "drops it" in text


# ------------------------------------------------------------------ 5. the Calibration tab; the page
def test_the_dashboard_has_a_calibration_tab_on_the_shipped_measurement(dash):
    p = dash.show("calibration")
    assert "Calibration" in dash.titles and p.message.value == ""
    t = p.model_table()
    assert list(t["run"]) == list(p.profiles) and len(t) >= 2
    assert (t["measured_s"] > 0).all() and (t["calibrated_s"] > 0).all() and (t["roofline_s"] > 0).all()
    assert "Measured against predicted, model by model" in p.models.value and "resnet50" in p.models.value
    assert "torch" in p.about.value and set(p.figures) == {"ratio", "gantt", "curves"}


def test_the_dashboard_intro_inlines_the_patents_instead_of_a_dead_link():
    nb = json.loads((ROOT / "notebooks" / "dashboard.ipynb").read_text())
    intro = "".join(nb["cells"][0]["source"])
    assert "](../docs/patents.md)" not in intro  # a link Voila does not serve
    rows = [ln for ln in (ROOT / "docs" / "patents.md").read_text().splitlines() if ln.startswith("| ") and "---" not in ln]
    assert len(rows) == 6 and all(r in intro for r in rows)  # the table, kept equal to docs/patents.md


def test_measuring_this_machine_now_adds_a_measurement_where_torch_is():
    torch = pytest.importorskip("torch")
    from hetsched.widgets import CalibrationPanel

    p = CalibrationPanel()
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU()).eval()
    # a tiny workload and no sweep: the button runs ResNet-50 and the quick sweep (about a minute)
    assert p.measure_now(workloads=[(mlp, (torch.randn(2, 32),), "mlp")], sweep=False, repeats=2, threads=1)
    assert p.state.measurement == "this machine, now" and list(p.profiles) == ["mlp"]
    assert p.result.params["graph"] == p.profiles["mlp"].graph.name and "measured mlp" in p.message.value
    assert "the machine serving this page" in p.about.value
    p.state.measurement = "shipped measurement"  # the shipped one is still there
    assert p.message.value == "" and "resnet50(batch=1)" in p.profiles
