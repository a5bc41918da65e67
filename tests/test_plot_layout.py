"""Figure layout at a projector's 1280 px (issue 22): long titles wrap instead of running off the
figure, and legends that covered a title or scrolled beside a short chart sit under the plot.

Seen in docs/screenshots at 1280x720: the Mapping comparison's legend covered "(lower is bett…",
the Pipeline queue title was cut on the right, the Pipeline and Backends Gantt legends scrolled.
Plotly does not wrap titles, and a legend in container coordinates pushes the plot up (checked in
Chromium when this was written); these tests pin the layout that does it.
"""

from __future__ import annotations

import json
import re

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import hetsched.executor as ex
import hetsched.pipeline as pp
from hetsched.partition import partition_by_support, simulate_buffered
from hetsched.partition.examples import merge_outcomes
from hetsched.plot.core import TITLE_CHARS, figure_from_dicts, legend_height_px, wrap_title
from hetsched.plot.executor import executor_gantt, executor_gantt_at
from hetsched.plot.mapping import method_bars
from hetsched.plot.partition import buffer_occupancy, runs_gantt
from hetsched.plot.pipeline import schedule_gantt

_TAG = re.compile(r"<[^>]*>")


def _lines(title: str) -> list[str]:
    return [_TAG.sub("", x) for x in title.split("<br>")]


def _below(legend) -> bool:
    """A horizontal legend at the bottom edge of the figure (under the axis titles)."""
    return legend.orientation == "h" and legend.yref == "container" and legend.y == 0 and legend.yanchor == "bottom"


# -- titles ------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="abcdefghij()':", min_size=1, max_size=14), min_size=1, max_size=30),
       st.integers(min_value=15, max_value=120))
def test_wrapped_title_keeps_every_word_and_no_line_is_too_long(words, chars):
    text = " ".join(words)
    out = wrap_title(text, chars)
    assert out.replace("<br>", " ") == text  # only spaces became breaks
    for line in _lines(out):
        assert len(line) <= chars or " " not in line  # a single over-long word stays whole


def test_the_pipeline_queue_title_wraps_at_half_width():
    title = "A simulated: sender's cache queue (the patent's) depth per rank over time"
    out = wrap_title(title, 55)
    assert out.count("<br>") == 1 and all(len(x) <= 55 for x in _lines(out))
    assert wrap_title("short title", 55) == "short title"


def test_a_long_title_gets_lines_and_room_a_short_one_is_left_alone():
    long_title = "decision 244: nothing tried; the state before it " * 4  # ~200 characters
    fig = figure_from_dicts([dict(type="bar", x=[1], y=[1])], dict(title=dict(text=long_title), margin=dict(t=40)))
    lines = _lines(fig.layout.title.text)
    assert len(lines) >= 2 and all(len(x) <= TITLE_CHARS for x in lines)
    assert fig.layout.margin.t >= 24 * len(lines)  # every line above the plot, none on it
    short = figure_from_dicts([dict(type="bar", x=[1], y=[1])], dict(title=dict(text="makespan"), margin=dict(t=40)))
    assert short.layout.title.text == "makespan" and short.layout.margin.t == 40


def test_an_executor_step_title_wraps_as_a_fresh_figure_would():
    r = ex.simulate(ex.graphs.thread_rules_graph(), streams="patent", threads="patent")
    base = executor_gantt(r, walk=True)
    title = "the patent's streams (async / sync / copies), the patent's thread rules (4 host threads, 4 streams) " \
            "— decision 14 of 14: log_scores → thread 1"
    moved = executor_gantt_at(base, r, 5, title=title)
    fresh = executor_gantt(r, step=5, title=title)
    assert "<br>" in moved["layout"]["title"]["text"]
    assert moved["layout"]["title"]["text"] == fresh.layout.title.text
    assert moved["layout"]["margin"]["t"] >= fresh.layout.margin.t


# -- legends -----------------------------------------------------------------------------------
def test_the_mapping_comparison_legend_is_under_the_bars_not_over_the_title():
    f = pd.DataFrame({"label": ["h2h", "compute_first", "heft", "ilp"], "total_latency_s": [3.5e-3, 8e-3, 1.5e-3, 1.2e-3],
                      "optimises": ["total_latency", "op_latency", "makespan", "total_latency"]})
    fig = method_bars(f, "total_latency_s", highlight="h2h", title="system total latency of each mapper (lower is better)")
    assert _below(fig.layout.legend)
    assert fig.layout.height > 340  # the default plot height, plus the legend's row


def _pipeline_pair():
    ra = pp.simulate(pp.interleaved_1f1b(4, 2, 10), costs={"F": 1e-3, "B": 2e-3}, comm={"lockstep": True}, cache="sender")
    rb = pp.simulate(pp.one_f_one_b(4, 10), costs={"F": 1e-3, "B": 2e-3}, comm={"lockstep": True})
    t = max(ra.metrics["makespan_s"], rb.metrics["makespan_s"])
    return schedule_gantt(ra, t_max_s=t), schedule_gantt(rb, t_max_s=t)


def test_pipeline_gantts_have_their_legends_below_so_a_and_b_share_the_axis_width():
    a, b = _pipeline_pair()
    assert _below(a.layout.legend) and _below(b.layout.legend)
    # nothing beside either plot: both span the figure's width, so one instant is at one x in both
    assert a.layout.margin.l == b.layout.margin.l and a.layout.margin.r == b.layout.margin.r
    # the legend's rows are added to the figure, not taken from the lanes: A's chunk shades stack
    # two entries per kind, B has one chunk
    assert a.layout.height - b.layout.height == 26


def test_backends_gantt_and_buffers_legends_are_below_and_get_their_own_room():
    g, s = merge_outcomes()
    r = partition_by_support(g, s)
    ser, buf = (simulate_buffered(r, s, n_inputs=8, buffer_depth=d) for d in (0, 2))
    fig = runs_gantt(ser, buf, cursor_s=0.0)
    assert _below(fig.layout.legend)
    names = list(dict.fromkeys(t.name for t in fig.data if t.showlegend is not False))
    n_lanes = len(fig.layout.yaxis.categoryarray)
    assert fig.layout.height == max(300, 70 + 30 * n_lanes) + legend_height_px(names, title=fig.layout.legend.title.text)
    occ = buffer_occupancy(buf, at_s=0.0)
    assert _below(occ.layout.legend) and occ.layout.height > 320


def test_legend_rows_grow_with_entries_and_stack_by_group():
    one = legend_height_px(["F", "B", "idle"])
    many = legend_height_px([f"aggregated op {i}" for i in range(30)])
    assert one == 34 and many > 3 * 26
    assert legend_height_px(["F chunk 0", "F chunk 1", "idle"], groups=["F", "F", "idle"]) == 2 * 26 + 8
    assert legend_height_px([]) == 0


def test_layout_changes_survive_a_json_round_trip():
    # what the widget sends the browser: the legend's container reference must not be dropped
    a, _ = _pipeline_pair()
    lay = json.loads(a.to_json())["layout"]["legend"]
    assert lay["yref"] == "container" and lay["orientation"] == "h"
