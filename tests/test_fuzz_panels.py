"""Fuzzing the panels' public controls (issue 20, Panels; "Done when": property-based fuzz tests).

Hypothesis drives each panel's controls (its state traits, the text boxes and the methods a
control calls) with hostile values: NaN, infinities, negatives, huge numbers, odd and empty names,
markup in names, hostile uploaded bytes. After every action the panel must either show a result or
say why not in a hetsched error's words, and then:

* no raw Python exception text in the message line (``ZeroDivisionError``, ``TraitError``,
  ``Traceback``, an "internal error", i.e. a bug);
* the last good result stays on screen after a refusal or a failure (``panel.result`` unchanged);
* a refused value never stays in the state: the panel's own :meth:`check_inputs` accepts what
  is left in it (a refused control is taken back to its last good value, issue 20);
* no markup gets into the panel's HTML unescaped;
* the next valid action clears the message.

Bounded: few examples, no deadline, valid numbers drawn small (a valid 64-rank, 8-chunk, 256
micro-batch pipeline takes seconds); the file runs in well under a minute on a loaded 2-core box.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import hetsched as hs
import hetsched.pipeline as pp
from fuzzing import mutated
from hetsched.io import graph_to_dict
from hetsched.io.generators import chain, fork_join, randwire_ws
from hetsched.widgets import BackendPanel, CalibrationPanel, GraphPanel, MappingPanel, MemoryPanel, PipelinePanel

EVIL = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(1)</script>"
#: exception names and the words of a caught bug: none may reach a message line
RAW = re.compile(r"Traceback|TraitError|Broken link|Invalid selection|internal error|"
                 r"\b(?:ZeroDivision|Index|Key|Type|Value|Attribute|Overflow|Recursion|UnicodeDecode|JSONDecode|"
                 r"Assertion|NotImplemented|Runtime|Lookup|OS|FileNotFound|IsADirectory)Error\b")

#: examples per test: small in the suite; HETSCHED_FUZZ_EXAMPLES=500 for a deeper run by hand
FUZZ = settings(max_examples=int(os.environ.get("HETSCHED_FUZZ_EXAMPLES", "25")), deadline=None,
                suppress_health_check=list(HealthCheck))

NAN, INF = math.nan, math.inf
hostile_floats = st.one_of(
    st.sampled_from([NAN, INF, -INF, -1.0, 0.0, -0.0, 1e308, -1e308, 5e-324, 1e30, 2.0**63]),
    st.floats(allow_nan=True, allow_infinity=True))
hostile_ints = st.one_of(st.sampled_from([-1, 0, -(2**63), 2**63, 10**9, 10**30]), st.integers(-10**6, 10**6))
hostile_names = st.one_of(
    st.sampled_from(["", " ", EVIL, SCRIPT, "=cmd|' /C calc'!A0", "a|b", "|", "\x00", "é", "../../etc/passwd",
                     "/", "nan", "1e9", "-1", "session"]),
    st.text(max_size=8))


# ----------------------------------------------------------------------------- the checks
def cached(build: Callable[[], Any]) -> Callable[[], Any]:
    """One panel per test module, built on first use (not a fixture: hypothesis would print its repr)."""
    made: list = []

    def get():
        if not made:
            made.append(build())
        return made[0]

    return get



def _words(h: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", h))


def _html_values(panel) -> list[str]:
    """Every HTML widget's value in the panel (what the browser renders as markup)."""
    import ipywidgets as W

    out, stack, seen = [], [panel], set()
    while stack:
        w = stack.pop()
        if id(w) in seen:
            continue
        seen.add(id(w))
        if isinstance(w, W.HTML):
            out.append(w.value)
        stack.extend(getattr(w, "children", ()) or ())
    return out


def _figure_strings(panel) -> list[str]:
    """Every string a figure shows (texts, hover texts, names, titles, annotations, tick labels)."""
    from hetsched.widgets.figure import figure_dicts

    out: list[str] = []

    def walk(x: Any, key: str = "") -> None:
        if key in ("customdata", "meta", "ids", "uid"):
            return  # never rendered
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(v, k)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v, key)
        elif hasattr(x, "tolist") and getattr(x, "dtype", None) is not None and x.dtype == object:
            walk(x.tolist(), key)

    for view in panel.figures.values():
        data, layout = figure_dicts(view.figure)
        walk(data)
        walk(layout)
    return out


def assert_escaped(panel, what: Any = "", figures: bool = False) -> None:
    texts = _html_values(panel) + (_figure_strings(panel) if figures else [])
    for t in texts:
        assert "<img" not in t and "<script" not in t, (what, t[:300])


def check(panel, before: Any, what: Any, figures: bool = False) -> None:
    """After one action: a result, or the reason in a hetsched error's words and the last good result kept."""
    msg = panel.message.value
    if msg:
        assert msg.startswith('<div class="hetsched-error"'), (what, msg)
        words = _words(msg)
        assert not RAW.search(words), (what, words)
        assert panel.result is before, (what, words)  # the last good result stays on screen
    else:
        assert panel.result is not None, what
    panel.check_inputs()  # a refused value never stays in the state (it is taken back)
    assert_escaped(panel, what, figures)


def drive(panel, actions: list, act: Callable[[Any, Any], None], valid: Callable[[Any], None], *,
          figures: bool = False) -> None:
    """From a good state (``valid``: every fuzzed control to a good value, one of them changed), apply each
    action, checking after each; then one valid action must clear the message."""
    valid(panel)
    assert panel.message.value == "", _words(panel.message.value)
    for a in actions:
        before = panel.result
        act(panel, a)
        check(panel, before, a, figures)
        event(f"{a[0]}: {'refused or failed' if panel.message.value else 'shown'}")  # --hypothesis-show-statistics
    valid(panel)
    assert panel.message.value == "", (actions, _words(panel.message.value))
    assert panel.result is not None and not panel.stale


def set_trait(panel, a) -> None:
    name, value = a
    setattr(panel.state, name, value)


# ----------------------------------------------------------------------------- Mapping
@cached
def mapping():
    return MappingPanel(graph=fork_join(2, 2, seed=0), system=hs.toy_system())


mapping_actions = st.one_of(
    st.tuples(st.just("occupancy_threshold"), hostile_floats),
    st.tuples(st.just("max_passes"), st.one_of(hostile_ints.filter(lambda x: x < 0 or x > 10**6), st.integers(0, 3))),
    st.tuples(st.just("step"), hostile_ints),
    st.tuples(st.just("objective"), st.sampled_from(["total_latency", "makespan"])),
    st.tuples(st.just("policy"), st.sampled_from(["greedy", "knapsack"])),
    st.tuples(st.just("direction"), st.sampled_from(["successor", "both"])),
    st.tuples(st.just("keep_resident"), st.booleans()),
)


def _mapping_valid(p) -> None:
    with p.hold():
        p.state.occupancy_threshold = 0.9 if p.state.occupancy_threshold != 0.9 else 0.8
        p.state.max_passes = 1
        p.state.objective, p.state.policy, p.state.direction = "total_latency", "greedy", "successor"


# ----------------------------------------------------------------------------- Memory
@cached
def memory():
    return MemoryPanel(graph=randwire_ws(10, seed=0), method="patent-heuristic", overlay=("kahn",))


_CHEAP_METHODS = ["patent-heuristic", "bfs", "dfs", "lifetime-greedy", "given", "kahn", "inductor_lpmf", "xla_list"]
memory_actions = st.one_of(
    # a valid time limit only changes how long a solver may run: the cheap methods below run none
    st.tuples(st.just("time_limit_s"), hostile_floats),
    st.tuples(st.just("overlay"), st.lists(st.one_of(st.sampled_from(["kahn", "bfs", "patent", "ilp-patent", "exact"]),
                                                     hostile_names), max_size=3).map(tuple)),
    st.tuples(st.just("top"), hostile_ints),
    st.tuples(st.just("step"), hostile_ints),
    st.tuples(st.just("method"), st.sampled_from(_CHEAP_METHODS)),
)


def _memory_valid(p) -> None:
    with p.hold():
        p.state.method = "bfs" if p.state.method != "bfs" else "dfs"
        p.state.time_limit_s = 2.0
        p.state.overlay = ("kahn",)
        p.state.top = 20


# ----------------------------------------------------------------------------- Pipeline
@cached
def pipeline():
    return PipelinePanel(source="numbers")


def _small_or_hostile(lo: int, hi: int):
    """A small valid value (the simulation stays fast) or one outside ``lo..hi``."""
    return st.one_of(st.integers(lo, min(hi, lo + 4)), hostile_ints.filter(lambda x: not lo <= x <= hi))


_FLOATS = ["f_ms", "b_ms", "w_ms", "latency_ms", "activation_MiB", "overhead_ms"]
pipeline_actions = st.one_of(
    st.tuples(st.just("p"), _small_or_hostile(2, 64)),
    st.tuples(st.just("v"), _small_or_hostile(1, 8)),
    st.tuples(st.just("m"), _small_or_hostile(1, 256)),
    st.tuples(st.sampled_from(_FLOATS), st.one_of(hostile_floats, st.floats(0, 5))),
    st.tuples(st.sampled_from(["model", "system"]), hostile_names),
    st.tuples(st.sampled_from(["schedule", "schedule_b"]), st.sampled_from(sorted(pp.SCHEDULES))),
    st.tuples(st.just("cache"), st.sampled_from(["sender", "receiver", "none"])),
    st.tuples(st.just("lockstep"), st.booleans()),
    st.tuples(st.just("step"), hostile_ints),
)


def _pipeline_valid(p) -> None:
    with p.hold():
        for k, v in {"p": 4, "v": 2, "f_ms": 1.0, "b_ms": 2.0, "w_ms": 1.0, "latency_ms": 0.0, "activation_MiB": 64.0,
                     "overhead_ms": 0.0, "model": "session", "system": pp.DEFAULT_MODEL["system"],
                     "schedule": "interleaved_1f1b", "schedule_b": "1f1b", "cache": "sender", "lockstep": True}.items():
            setattr(p.state, k, v)
        p.state.m = 8 if p.state.m != 8 else 9


# ----------------------------------------------------------------------------- Backends
@cached
def backends():
    return BackendPanel()  # the example set-up: 7 ops, three backends


def _backend_act(p, a) -> None:
    kind, x, y = a
    if kind == "trait":
        setattr(p.state, x, y)
    elif kind == "launch_text":
        p.launch_text.value = y
    elif kind == "cell":
        cells = sorted(p.grid_cells)
        p.grid_cells[cells[x % len(cells)]].value = y
    elif kind == "set_priority":  # what a cell calls: a cell of the grid or any names, any value
        cells = sorted(p.grid_cells)
        b, t = cells[x % len(cells)] if isinstance(x, int) else x
        p.set_priority(b, t, y)
    elif kind == "checkbox":
        names = sorted(p.checkboxes)
        p.checkboxes[names[x % len(names)]].value = y
    elif kind == "outcome":
        p.jump_to_outcome(y, x)


_cell_text = st.one_of(st.sampled_from(["", " ", "1", "0", "-1", "999", "1000", "nan", "1e3", "2.5", EVIL, "٣", "0x1"]),
                       st.text(max_size=6))
backend_actions = st.one_of(
    st.tuples(st.just("trait"), st.sampled_from(["n_inputs", "buffer_depth", "min_group_size"]),
              st.one_of(st.integers(0, 6), hostile_ints)),
    st.tuples(st.just("trait"), st.just("launch_s"), st.one_of(st.none(), hostile_floats, st.floats(0, 1e-4))),
    st.tuples(st.just("trait"), st.just("fallback"), st.one_of(st.sampled_from(["", "cpu0", "gpu0"]), hostile_names)),
    st.tuples(st.just("trait"), st.just("enabled"), st.lists(st.one_of(st.sampled_from(["cpu0", "gpu0", "fpga0"]),
                                                                       hostile_names), max_size=3)),
    st.tuples(st.just("trait"), st.just("priorities"),
              st.dictionaries(st.one_of(st.sampled_from(["gpu0|Conv", "cpu0|*", "fpga0|Add"]), hostile_names),
                              st.one_of(st.none(), st.integers(-2, 1000), st.booleans(), hostile_floats), max_size=2)),
    st.tuples(st.just("trait"), st.just("merge"), st.sampled_from(["adjacent", "global", "none"])),
    st.tuples(st.just("trait"), st.just("step"), hostile_ints),
    st.tuples(st.just("launch_text"), st.none(), st.one_of(_cell_text, st.sampled_from(["50", "1e7", "-3", "inf"]))),
    st.tuples(st.just("cell"), st.integers(0, 50), _cell_text),
    st.tuples(st.just("set_priority"), st.one_of(st.integers(0, 50), st.tuples(hostile_names, hostile_names)),
              st.one_of(st.none(), st.integers(-5, 2000), hostile_floats, st.booleans(), hostile_names)),
    st.tuples(st.just("checkbox"), st.integers(0, 5), st.booleans()),
    st.tuples(st.just("outcome"), st.sampled_from([-1, 1]), st.one_of(st.sampled_from(["merged", "cycle"]), hostile_names)),
)


def _backend_valid(p) -> None:
    with p.hold():
        p.state.enabled = sorted(p.checkboxes)
        p.state.priorities = {}
        p.state.fallback = ""
        p.state.launch_s = None
        p.state.merge = "adjacent"
        p.state.buffer_depth = 2
        p.state.min_group_size = 1
        p.state.n_inputs = 8 if p.state.n_inputs != 8 else 7


# ----------------------------------------------------------------------------- Graph
@cached
def graph_panel():
    p = GraphPanel()
    p.state.source = "generator"
    return p


_TINY = graph_to_dict(chain(3, seed=0))
_EVIL_GRAPH = {**_TINY, "name": EVIL}


@st.composite
def uploads(draw):
    """Hostile bytes under a hostile file name: mutated JSON, markup names, raw bytes, deep nesting."""
    kind = draw(st.sampled_from(["mutated", "mutated", "evil", "valid", "bytes", "text", "deep"]))
    if kind == "valid":  # a good graph under any name
        body = json.dumps({**_TINY, "name": draw(hostile_names)}).encode()
    elif kind == "mutated":
        body = json.dumps(draw(mutated(_TINY, max_mutations=3)), allow_nan=True).encode()
    elif kind == "evil":
        d = json.loads(json.dumps(_TINY))
        d["ops"][0]["name"] = EVIL
        d["ops"][1]["op_type"] = SCRIPT
        for t in d["tensors"]:
            t["consumers"] = [EVIL if c == _TINY["ops"][0]["name"] else c for c in t.get("consumers", [])]
            if t.get("producer") == _TINY["ops"][0]["name"]:
                t["producer"] = EVIL
        body = json.dumps({**d, "name": EVIL}).encode()
    elif kind == "bytes":
        body = draw(st.binary(max_size=64))
    elif kind == "text":
        body = draw(st.sampled_from([b"", b"{", b"null", b"[]", b"{}", b"\xff\xfe{}", b"NaN", b'{"format": 5}',
                                     b"\xef\xbb\xbf{}", b"<html>" + EVIL.encode()]))
    else:
        body = b"[" * 3000 + b"]" * 3000
    name = draw(st.one_of(st.just("g.json"), st.sampled_from(["g.json", "G.JSON", "g.onnx", "g.txt", "", ".json", "../../x.json",
                                           f"{EVIL}.json", "a\x00b.json", "dir/.json", "g.json.exe"]),
                          st.text(max_size=6).map(lambda s: s + ".json")))
    return body, name


graph_actions = st.one_of(
    st.tuples(st.just("upload"), uploads()),
    st.tuples(st.just("trait"), st.tuples(st.sampled_from(["n", "seed"]), st.one_of(st.integers(2, 40), hostile_ints))),
    st.tuples(st.just("trait"), st.tuples(st.just("generator"), st.sampled_from(["chain", "fork_join", "topcuoglu",
                                                                                 "layered", "randwire_ws"]))),
    st.tuples(st.just("trait"), st.tuples(st.just("bundled"), hostile_names)),
    st.tuples(st.just("trait"), st.tuples(st.just("source"), st.sampled_from(["generator", "upload", "bundled"]))),
    st.tuples(st.just("trait"), st.tuples(st.just("view"), st.sampled_from(["auto", "blocks", "ops"]))),
)


def _graph_act(p, a) -> None:
    kind, x = a
    if kind == "upload":
        p.upload_bytes(*x)
    else:
        set_trait(p, x)


def _graph_valid(p) -> None:
    with p.hold():
        p.state.generator = "chain"
        p.state.seed = 0
        p.state.source = "generator"
        p.state.n = 5 if p.state.n != 5 else 6


# ----------------------------------------------------------------------------- Calibration
@cached
def calibration():
    from hetsched import evaluate
    from hetsched.cost import RooflineCost
    from hetsched.io.profile import load_profile
    from hetsched.system import Device, System
    from hetsched.timeline import to_chrome_trace

    s = System([Device("cpu0", "cpu", {"default": 5e10}, mem_bandwidth_Bps=2e10, launch_overhead_s=2e-6)], name="cpu")
    runs = {}
    for label, g in (("chain", chain(5, seed=1)), (EVIL, _evil_chain())):
        ev = evaluate(g, s, {o: "cpu0" for o in g}, cost=RooflineCost(s, efficiency=0.7))
        runs[label] = load_profile(to_chrome_trace(ev.timeline), g)
    return CalibrationPanel(runs, system=s)


def _evil_chain() -> hs.OpGraph:
    g = hs.OpGraph(EVIL)
    g.add_op(EVIL, SCRIPT, flops=1e9)
    g.add_op("b", "Relu", flops=1e8)
    g.connect(EVIL, "b", 1 << 16)
    return g


calibration_actions = st.one_of(
    st.tuples(st.just("run"), st.one_of(st.sampled_from(["chain", EVIL]), hostile_names)),
    st.tuples(st.just("model"), st.sampled_from(["calibrated", "roofline"])),
    st.tuples(st.just("op"), st.one_of(st.sampled_from(["", EVIL, "op0", "b"]), hostile_names)),
)


def _calibration_valid(p) -> None:
    p.state.run = "chain" if p.state.run != "chain" else EVIL




def _backend_boxes_follow(p) -> None:
    # the boxes show what is in effect: the checkboxes agree with the state
    assert {b for b, cb in p.checkboxes.items() if cb.value} == set(p.state.enabled)


#: panel -> (the panel, one action, how to apply it, a valid action, check figures too, a last check)
PANELS: dict[str, tuple] = {
    "mapping": (mapping, mapping_actions, set_trait, _mapping_valid, False, None),
    "memory": (memory, memory_actions, set_trait, _memory_valid, False, None),
    "pipeline": (pipeline, pipeline_actions, set_trait, _pipeline_valid, False, None),
    "backends": (backends, backend_actions, _backend_act, _backend_valid, False, _backend_boxes_follow),
    "graph": (graph_panel, graph_actions, _graph_act, _graph_valid, True, None),  # uploads, generator sizes
    "calibration": (calibration, calibration_actions, set_trait, _calibration_valid, True, None),
}


@pytest.mark.parametrize("name", list(PANELS))
@FUZZ
@given(data=st.data())
def test_panel_controls_give_a_result_or_a_reason(name, data):
    build, action, act, valid, figures, last = PANELS[name]
    panel = build()
    drive(panel, data.draw(st.lists(action, min_size=1, max_size=4), label="actions"), act, valid, figures=figures)
    if last is not None:
        last(panel)


# ----------------------------------------------------------------------------- regressions (issue 20)
def test_graph_panel_clears_its_error_after_a_good_upload_and_after_switching_to_a_bundled_graph():
    p = GraphPanel()
    p.upload_bytes(b"{not json", "bad.json")
    assert "hetsched-error" in p.message.value
    p.upload_bytes(json.dumps(_TINY).encode(), "good.json")  # a valid upload after a bad one
    assert p.message.value == "" and p.result.n_ops == 3 and not p.stale
    p.upload_bytes(b'{"format": "hetsched.graph", "version": 1, "ops": 5}', "bad2.json")
    assert "hetsched-error" in p.message.value and p.result.n_ops == 3
    p.state.source = "bundled"  # switching the source to a bundled graph
    assert p.message.value == "" and p.result.n_ops > 3 and not p.stale
    p.upload_bytes(b"\xff\xfe", "bad3.json")
    assert "hetsched-error" in p.message.value
    p.state.source = "generator"
    assert p.message.value == ""


def _evil_system() -> hs.System:
    from hetsched.system import Device, System

    return System([Device(EVIL, "cpu", {"default": 1e12})], host=EVIL, name=SCRIPT)


def test_graph_panel_escapes_names_in_every_html_and_figure():
    p = GraphPanel()
    d = json.loads(json.dumps(_TINY))
    first = d["ops"][0]["name"]
    d["ops"][0]["name"], d["ops"][1]["op_type"] = EVIL, SCRIPT
    for t in d["tensors"]:
        t["consumers"] = [EVIL if c == first else c for c in t.get("consumers", [])]
        if t.get("producer") == first:
            t["producer"], t["name"] = EVIL, EVIL + ":out"
    p.upload_bytes(json.dumps({**d, "name": EVIL}).encode(), f"{EVIL}.json")
    assert p.message.value == "" and EVIL in p.result.ops
    p.session.system = _evil_system()  # devices named with markup too
    for view, colour in (("ops", "op_type"), ("ops", "device"), ("blocks", "op_type"), ("blocks", "device")):
        with p.hold():
            p.state.view, p.state.color_by = view, colour
        assert p.message.value == ""
        assert_escaped(p, (view, colour), figures=True)
    assert "&lt;img src=x onerror=alert(1)&gt;" in p.summary.value
    p.upload_bytes(b"[", f"{EVIL}.json")  # the file name in an error message
    assert "&lt;img src=x onerror=alert(1)&gt;.json" in p.message.value
    assert_escaped(p, "error", figures=True)


def test_calibration_panel_escapes_names_in_every_html_and_figure():
    p = calibration()
    p.state.run = EVIL  # a run label, op names and op types with markup
    assert p.message.value == "" and "&lt;img" in p.summary.value
    p.state.op = EVIL
    assert p.message.value == ""
    assert_escaped(p, "evil run", figures=True)
    assert any("&lt;img" in t for t in _figure_strings(p))  # shown, escaped
    p.state.op = SCRIPT + "x"  # an op the run lacks: refused, taken back, named escaped
    assert "&lt;script&gt;" in p.message.value and p.state.op == EVIL
    assert_escaped(p, "refused op", figures=True)
    p.state.run = "chain"
    assert p.message.value == ""


def test_refused_choices_are_taken_back_not_left_in_the_state():
    """A name a dropdown lacks used to raise "TraitError: Invalid selection" from the link and stay in the
    state (pipeline model/machine, backends fallback, graph bundled); numbers outside a bounded box were
    clamped in the box but kept in the state (graph size/seed: a 10^9-op generator)."""
    pl = PipelinePanel(source="numbers")
    for name in ("model", "system"):
        good, before = pl.result, getattr(pl.state, name)
        setattr(pl.state, name, EVIL)
        # the machine has no dropdown of its own any more: the machine bar picks it (issue 33)
        assert getattr(pl.state, name) == before == (pl.control_widgets[name].value if name in pl.control_widgets else before)
        assert "unknown" in pl.message.value and "&lt;img" in pl.message.value and pl.result is good
    pl.state.m = 9
    assert pl.message.value == ""

    b = BackendPanel()
    good = b.result
    b.state.fallback = EVIL
    assert b.state.fallback == "" == b.fallback_ctl.value and "fallback" in b.message.value and b.result is good
    b.state.priorities = {"nonsense": 1}
    assert b.state.priorities == {} and "grid edit" in b.message.value
    b.state.priorities = {"gpu0|Conv": True}
    assert b.state.priorities == {} and "grid edit" in b.message.value
    names = sorted(b.checkboxes)
    for n in names:  # switch every backend off, one box at a time: the last one is refused and ticked again
        b.checkboxes[n].value = False
    assert "every backend switched off" in b.message.value
    assert b.state.enabled == [names[-1]] and b.checkboxes[names[-1]].value
    b.checkboxes[names[0]].value = True
    assert b.message.value == "" and set(b.state.enabled) == {names[0], names[-1]}

    g = GraphPanel()
    g.state.source = "generator"
    good = g.result
    for name, bad in (("n", 10**9), ("n", 1), ("seed", -5), ("bundled", "../../etc/passwd")):
        before = getattr(g.state, name)
        setattr(g.state, name, bad)
        assert getattr(g.state, name) == before and "refused" in g.message.value and g.result is good
    g.state.n = 12
    assert g.message.value == "" and g.result.n_ops >= 2


def test_an_upload_whose_name_no_file_may_carry_still_loads():
    p = GraphPanel()
    for name in ("a\x00b.json", "x" * 400 + ".json", "..\\..\\win.json"):
        p.upload_bytes(json.dumps({**_TINY, "name": name[:20]}).encode(), name)
        assert p.message.value == "" and p.result.n_ops == 3, (name, _words(p.message.value))


def test_h2h_knapsack_with_a_tiny_occupancy_threshold_keeps_nothing():
    """A threshold of 1e-300 made the knapsack's size grid overflow (OverflowError from the core)."""
    import hetsched.mapping as mp

    g, s = fork_join(2, 2, seed=0), hs.toy_system()
    for thr in (5e-324, 1e-300):  # nothing fits a budget of 1e-300 bytes: every keep is refused
        r = mp.h2h(g, s, occupancy_threshold=thr, policy="knapsack")
        keeps = [x for x in r.steps if x.data.get("phase") == "locality"]
        assert keeps and not any(x.accepted for x in keeps)
    p = MappingPanel(graph=g, system=s)
    p.state.policy = "knapsack"
    p.state.occupancy_threshold = 1e-300
    assert p.message.value == "" and p.result.params["occupancy_threshold"] == 1e-300
