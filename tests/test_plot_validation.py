"""Every figure builder's output is valid Plotly and equals its validated copy.

The builders of :mod:`hetsched.plot` construct figures without Plotly's per-property validation
(:func:`hetsched.plot.core.figure_from_dicts`: it was most of a panel's redraw time). These tests
keep that fast path honest: each builder's output, re-built with full validation, must not raise
and must serialise to the same JSON, so no invalid property, un-normalised value (a string title
instead of ``{"text": ...}``, a named colour scale plotly.js does not know) or wrong type can ship.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import pytest

import hetsched.executor as ex
import hetsched.mapping as mp
import hetsched.memory as mem
import hetsched.pipeline as pp
from hetsched.io.generators import chain, fork_join, layered, resnet_like
from hetsched.io.systems import toy_system
from hetsched.partition import partition_by_support, simulate_buffered
from hetsched.plot import MAX_BARS, compare, gantt, graph_view, memory_curve
from hetsched.plot.core import block_layout, block_view, figure_from_dicts
from hetsched.plot.executor import executor_gantt, ordering_bars, policy_bars, rule_bars
from hetsched.plot.mapping import busy_bars, mapping_gantt, method_bars, placement_blocks, placement_graph
from hetsched.plot.memory import lifetime_chart, order_curves
from hetsched.plot.partition import (buffer_occupancy, marked_blocks, marked_graph_view, partition_view,
                                     quotient_view, quotient_walk_view, runs_gantt)
from hetsched.plot.pipeline import (cache_depth, rank_memory_figure, schedule_gantt, schedule_grid, stage_costs_figure,
                                    synthesis_bars)
from hetsched.timeline import make_timeline


def _rows(n: int) -> list[dict]:
    return [dict(lane=f"l{i % 3}", group="g", name=f"n{i}", kind=("compute", "transfer", "wait")[i % 3],
                 start_s=i * 1e-6, end_s=i * 1e-6 + 5e-7, op=(f"o{i}" if i % 2 else None),
                 bytes=(1000.0 * i if i % 4 else None), microbatch=(i if i % 5 else None)) for i in range(n)]


def _big_runs(s):
    """Serial and buffered runs of many small groups: beyond MAX_BARS rows, coloured by backend."""
    p = partition_by_support(chain(30), s, merge=None)
    return runs_gantt(simulate_buffered(p, s, n_inputs=12, buffer_depth=0), simulate_buffered(p, s, n_inputs=12, buffer_depth=2))


def _figures():
    """(name, builder call) pairs covering every builder and its branches."""
    s = toy_system()
    g = layered(12, 3, seed=1)
    h2h = mp.h2h(g, s)
    small = make_timeline(_rows(30))
    s2 = s.with_support(s.support.with_priority("gpu0", "Conv", 2))
    part = partition_by_support(resnet_like(n_stages=2, blocks_per_stage=1, channels=8, hw=8), s2)
    fj = fork_join(3, 2)
    bfs, dfs = mem.order_bfs(fj), mem.order_dfs(fj)
    sched = pp.interleaved_1f1b(4, 2, 8)
    ev = pd.DataFrame({"time_s": [0, 1e-3, 1e-3, 2e-3], "delta_bytes": [10, -5, 7, 3], "device": ["a", "a", "b", "b"]})
    frame = pd.DataFrame({"label": ["heft", "h2h", "cpop"], "makespan_s": [2e-3, 1e-3, 3e-3],
                          "bytes_moved": [1e6, 2e6, 3e5], "n": [1, 2, 3], "grp": ["a", "b", "a"]})
    inc = ex.graphs.inception_graph(1)
    rn = resnet_like(n_stages=2, blocks_per_stage=2)
    rn_h2h = mp.h2h(rn, s)
    long = chain(310)  # every op of one open block: beyond 300 points, WebGL
    long_open = block_layout(long, {o: "all" for o in long.ops}, expanded=["all"])
    long_part = partition_by_support(long, s2)
    return [
        ("gantt bars, highlight, labels", lambda: gantt(small, highlight=["n3", "o5"], lanes=["l2", "l1", "l0"], title="t")),
        ("gantt scattergl", lambda: gantt(make_timeline(_rows(MAX_BARS + 1)), color_by="microbatch")),
        ("gantt by device, cursor", lambda: gantt(h2h.timeline, color_by="device", colors={"gpu0": "#123456"},
                                                  cursor_s=1e-4, height=300)),
        ("gantt empty", lambda: gantt(make_timeline([]))),
        ("gantt pipeline", lambda: gantt(pp.simulate(sched, costs={"F": 1e-3, "B": 2e-3}).timeline, color_by="kind")),
        ("gantt labelled, shaded", lambda: gantt(pp.simulate(sched, costs={"F": 1e-3, "B": 2e-3}).timeline, color_by="kind",
                                                 label_by=["stage", "kind", "microbatch"], shade_by="chunk")),
        ("memory_curve deltas by device", lambda: memory_curve(ev, capacity={"a": 20, "b": 30}, lower_bound=12, title="m")),
        ("memory_curve one line", lambda: memory_curve(ev.drop(columns="device"), capacity=np.int64(20))),
        ("memory_curve levels per step", lambda: memory_curve(pd.DataFrame({"step": [0, 1, 2], "bytes": [5, 3 * 2**20, 2]}))),
        ("graph_view op types", lambda: graph_view(g, highlight=[next(iter(g.ops))], title="x")),
        ("graph_view devices", lambda: graph_view(g, color_by=dict(h2h.placement.device), colors={"gpu0": "#111111"},
                                                  edge_highlight=list(g.nx.edges)[:4], legend_title="device")),
        ("graph_view chain", lambda: graph_view(chain(3))),
        ("block_view, one block open", lambda: block_view(resnet_like(n_stages=2, blocks_per_stage=2), expanded=["s0b1"],
                                                          color_by={"stem": "gpu0"}, title="b")),
        ("graph_view large (WebGL markers)", lambda: graph_view(layered(MAX_BARS // 4 + 1, 4, seed=0))),
        ("compare highlight", lambda: compare(frame, "makespan_s", highlight="h2h", title="c")),
        ("compare grouped bytes", lambda: compare(frame, "bytes_moved", color="grp")),
        ("compare plain", lambda: compare(frame, "n")),
        ("executor_gantt arrows", lambda: executor_gantt(ex.simulate(inc))),
        ("executor_gantt by device", lambda: executor_gantt(ex.simulate(inc, streams="patent", threads="patent"),
                                                           color_by="device", arrows=False)),
        ("policy_bars", lambda: policy_bars(ex.compare_policies(inc))),
        ("ordering_bars", lambda: ordering_bars(ex.simulate(inc, streams="nimble"))),
        ("schedule_grid labelled", lambda: schedule_grid(pp.one_f_one_b(2, 2))),
        ("schedule_grid", lambda: schedule_grid(sched)),
        ("cache_depth", lambda: cache_depth(pp.cache_trace(pp.interleaved_1f1b(4, 2, 10, grouping="paddle")))),
        ("cache_depth empty", lambda: cache_depth(pd.DataFrame(columns=["rank", "direction", "step", "depth", "items"]))),
        ("schedule_gantt labelled, cursor", lambda: schedule_gantt(pp.simulate(pp.interleaved_1f1b(2, 2, 4)), cursor_s=2.0)),
        ("schedule_gantt split backward, shared axis", lambda: schedule_gantt(pp.simulate(pp.zbv(2, 4)), t_max_s=100.0, labels="microbatch")),
        ("cache_depth simulated, small multiples", lambda: cache_depth(pp.simulate(pp.interleaved_1f1b(4, 2, 10), costs={"F": 1, "B": 1}, comm={"lockstep": True},
                                                                                   cache="sender").queue_trace(), small_multiples=True)),
        ("stage_costs_figure", lambda: stage_costs_figure(pp.split_stages(chain(8), s, devices=["gpu0", "cpu0"], p=2))),
        ("synthesis_bars under a cap", lambda: synthesis_bars(pp.compare_synthesis(
            {"F": [1.0, 1.5], "B": 2.0, "activation_bytes": 1e6}, p=2, m=4, memory_cap_bytes="1f1b"), title="s")),
        ("rank_memory_figure with a cap", lambda: rank_memory_figure(pp.compare_synthesis(
            {"F": 1.0, "B": 2.0, "activation_bytes": 1e6}, p=2, m=4, memory_cap_bytes="1f1b"), cap_bytes=[2e6, 1e6])),
        ("rank_memory_figure without a cap", lambda: rank_memory_figure(pp.compare_synthesis({"F": 1.0, "B": 2.0}, p=2, m=4))),
        ("partition_view", lambda: partition_view(part)),
        ("partition_view groups", lambda: partition_view(part, by="group", title="T")),
        ("quotient_view", lambda: quotient_view(part)),
        ("quotient_view at a step", lambda: quotient_view(part, step=part.n_steps // 2)),
        ("buffer_occupancy", lambda: buffer_occupancy(simulate_buffered(part, s2, n_inputs=5, buffer_depth=3))),
        ("buffer_occupancy with a cursor", lambda: buffer_occupancy(simulate_buffered(part, s2, n_inputs=5, buffer_depth=3),
                                                                    at_s=1e-4)),
        ("marked_graph_view, marking", lambda: marked_graph_view(part, 3)),
        ("marked_graph_view by group, merging", lambda: marked_graph_view(part, part.n_steps - 2, by="group")),
        ("marked_graph_view before the first decision", lambda: marked_graph_view(part, -1)),
        ("quotient_walk_view focused", lambda: quotient_walk_view(part, part.n_steps // 2, max_nodes=5)),
        ("quotient_walk_view running", lambda: quotient_walk_view(part, running={next(iter(part.groups)): 2})),
        ("runs_gantt", lambda: runs_gantt(simulate_buffered(part, s2, n_inputs=3, buffer_depth=0),
                                          simulate_buffered(part, s2, n_inputs=3, buffer_depth=2), cursor_s=1e-4)),
        ("runs_gantt WebGL, by backend", lambda: _big_runs(s2)),
        ("order_curves", lambda: order_curves({"bfs": bfs, "dfs": dfs}, capacity=1e6)),
        ("lifetime_chart", lambda: lifetime_chart(bfs)),
        ("executor_gantt step walk, by op", lambda: executor_gantt(ex.simulate(ex.graphs.thread_rules_graph(), streams="patent",
                                                                               threads="patent"), step=5, color_by="op")),
        ("executor_gantt walk, no step", lambda: executor_gantt(ex.simulate(inc), walk=True)),
        ("rule_bars current", lambda: rule_bars(ex.simulate(ex.graphs.thread_rules_graph(), streams="patent", threads="patent",
                                                            pool_size=2), current="claim5-async-async")),
        ("policy_bars share", lambda: policy_bars(ex.compare_policies(inc), "device_busy_frac", current="serial")),
        ("placement_graph partial, highlights", lambda: placement_graph(g, dict(list(h2h.placement.device.items())[:5]),
                                                                        s.device_names, moved=["L0_0"], residency=["L0_1"],
                                                                        title="p")),
        ("mapping_gantt trial", lambda: mapping_gantt(mp.evaluate_trial(h2h, h2h.n_steps - 1).after.timeline, s.device_names,
                                                      highlight=["L0_0"], title="g", webgl=True)),
        ("mapping_gantt empty", lambda: mapping_gantt(make_timeline([]), s.device_names)),
        ("busy_bars", lambda: busy_bars(mp.evaluate_trial(h2h, h2h.n_steps - 1).busy, s.device_names, title="b")),
        ("method_bars", lambda: method_bars(frame.assign(optimises=["makespan", "total_latency", "makespan"]), "makespan_s",
                                            highlight="h2h", title="m")),
        ("placement_blocks partial, one block open, highlights",
         lambda: placement_blocks(rn, dict(list(rn_h2h.placement.device.items())[:9]), s.device_names, moved=["s0b1.conv1"],
                                  residency=["s1b0.conv1", "s1b1.conv1"], expanded=["s1b1"], title="p")),
        ("placement_blocks mapped, mixed blocks", lambda: placement_blocks(rn, dict(rn_h2h.placement.device), s.device_names)),
        ("placement_blocks every op open (WebGL)", lambda: placement_blocks(long, {list(long.ops)[0]: "gpu0"}, s.device_names,
                                                                            layout=long_open)),
        ("marked_blocks marking", lambda: marked_blocks(part, 3)),
        ("marked_blocks by group, merging, one open", lambda: marked_blocks(part, part.n_steps - 2, by="group",
                                                                            expanded=["s0b0"], title="T")),
        ("marked_blocks before the first decision", lambda: marked_blocks(part, -1)),
        ("marked_blocks running, every op open (WebGL)", lambda: marked_blocks(long_part, long_part.n_steps - 1,
                                                                              focus_ops=list(long.ops)[3:5], focus_edge=(),
                                                                              layout=long_open)),
    ]


_CASES = _figures()


def _plain(x):
    """JSON-comparable: NaN made equal to itself; an empty title (``title=None``) dropped."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items() if not (k == "title" and v == {})}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return "NaN"
    return x


def _lists(x):
    """Plotly's base64 typed arrays (``{"dtype", "bdata"}``) as plain lists, NaN as in :func:`_plain`."""
    if isinstance(x, dict):
        if "bdata" in x and "dtype" in x:
            import base64

            a = np.frombuffer(base64.b64decode(x["bdata"]), dtype=np.dtype(x["dtype"]))
            return _plain(a.reshape(x["shape"]).tolist() if "shape" in x else a.tolist())
        return {k: _lists(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_lists(v) for v in x]
    return x


def _nan_as_null(x):
    """NaN and null are both gaps to plotly.js (short JSON lists carry NaN as null)."""
    if isinstance(x, dict):
        return {k: _nan_as_null(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_nan_as_null(v) for v in x]
    return None if x == "NaN" else x


def _json(fig) -> dict:
    return _plain(json.loads(pio.to_json(fig, validate=False)))


@pytest.mark.parametrize("name,build", _CASES, ids=[n for n, _ in _CASES])
def test_builder_output_equals_its_validated_copy(name, build):
    fig = build()
    assert isinstance(fig, go.Figure)
    raw = {"data": [t.to_plotly_json() for t in fig.data], "layout": fig.layout.to_plotly_json()}
    checked = go.Figure(raw)  # full validation: raises on any invalid property or value
    assert _json(checked) == _json(fig), name
    assert fig.layout.template.layout.to_plotly_json(), "every figure carries a template"


@pytest.mark.parametrize("name,build", _CASES[:3] + _CASES[8:10], ids=[n for n, _ in _CASES[:3] + _CASES[8:10]])
def test_figure_widget_keeps_the_content(name, build):
    from hetsched.widgets.base import figure_widget

    from hetsched.widgets.figure import decode_wire

    fig = build()
    fw = figure_widget(fig)
    assert _json(fw.figure) == _json(fig)
    # what the browser receives decodes to the same figure, but for the texts kept for hovering
    # and the fixed width (figures take their panel's width)
    want = _lists(_json(fig))
    want["layout"].pop("width", None)
    want["layout"]["autosize"] = True
    for i, t in enumerate(want["data"]):
        if i in fw._hover:
            assert t.pop("hovertext") == list(fw._hover[i])
            t["hoverinfo"] = "none"
            t["meta"] = {"hetschedHover": True}
    got = _nan_as_null(_plain(decode_wire(fw.spec)))
    got.pop("rev")
    assert got == _nan_as_null(want)


def test_fast_figures_validate_later_edits_and_units_stay():
    fig = gantt(make_timeline(_rows(5)))
    with pytest.raises(ValueError):
        fig.update_layout(xaxis_titel="x")
    with pytest.raises(ValueError):
        fig.data[0].marker.colour = "red"
    fig.update_layout(width=500)
    assert fig.layout.width == 500 and fig.layout.xaxis.title.text == "time (us)"
    assert all("lane" in h and "us" in h for h in fig.data[0].hovertext)


def test_figure_from_dicts_respects_a_given_or_default_template():
    assert figure_from_dicts([], {"template": pio.templates["plotly_dark"].to_plotly_json()}).layout.template \
        .layout.paper_bgcolor == pio.templates["plotly_dark"].layout.paper_bgcolor
    default = pio.templates[pio.templates.default].layout.paper_bgcolor
    assert figure_from_dicts([], {}, template=None).layout.template.layout.paper_bgcolor == default


def test_big_graph_walks_draw_the_graph_in_webgl_and_small_ones_in_svg():
    """A step re-plots every trace of the walk's graph: beyond 300 ops its edges and nodes are WebGL
    (a step's redraw of the 973-op graph: 30-40 ms against 130-150 ms in SVG, headless Chromium),
    the focus and legend traces stay SVG; small graphs stay SVG (their first draw is cheaper)."""
    from hetsched.plot.partition import marked_graph_view

    def types(n_ops):
        g = chain(n_ops)
        part = partition_by_support(g, toy_system())
        fig = marked_graph_view(part, part.n_steps - 1)
        return {t.name: t.type for t in fig.data}

    small, big = types(40), types(400)
    assert set(small.values()) == {"scatter"}
    assert big["ops"] == big["edges"] == "scattergl" and big["this decision"] == "scatter"


def test_mapping_gantt_hover_points_are_one_invisible_line_in_svg_and_markers_in_webgl():
    """Hover finds a bar at its middle either way; in SVG the points are one invisible path (a 1k-op
    step redrew one SVG element per invisible marker), in WebGL markers cost nothing extra."""
    from hetsched.timeline import make_timeline

    tl = make_timeline([dict(lane="gpu0", group="gpu0", name=f"op{i}", kind="compute", start_s=i * 1e-3,
                             end_s=(i + 1) * 1e-3, op=f"op{i}", device="gpu0") for i in range(3)])
    svg = {t.name: t for t in mapping_gantt(tl, ["cpu0", "gpu0"], webgl=False).data}["bars"]
    gl = {t.name: t for t in mapping_gantt(tl, ["cpu0", "gpu0"], webgl=True).data}["bars"]
    assert (svg.type, svg.mode, svg.line.width) == ("scatter", "lines", 0)
    assert (gl.type, gl.mode) == ("scattergl", "markers")
    for t in (svg, gl):
        assert list(t.x) == pytest.approx([0.5, 1.5, 2.5]) and t.hoverinfo == "text" and "op1" in t.hovertext[1]


def test_graph_view_of_a_small_graph_is_svg_throughout():
    """A page showing a small graph never needs WebGL (its set-up costs a context and, without a GPU,
    hundreds of ms of software GL); beyond MAX_BARS ops, edges and markers go WebGL together."""
    small = {t.type for t in graph_view(chain(40)).data}
    assert small == {"scatter"}
    big = graph_view(layered(MAX_BARS // 4 + 1, 4, seed=0))
    assert {t.type for t in big.data if t.name == "edges"} == {"scattergl"}
    assert {t.type for t in big.data if t.mode == "markers"} == {"scattergl"}
