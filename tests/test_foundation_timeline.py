"""check_timeline catches each kind of violation; to_chrome_trace obeys the trace-event rules."""

from __future__ import annotations

import json
import math
from collections import defaultdict

import numpy as np
import pytest

from hetsched.errors import TimelineViolation
from hetsched.evaluate import Placement, evaluate
from hetsched.graph import OpGraph
from hetsched.io import generators as gen
from hetsched.io.systems import toy_system
from hetsched.timeline import (
    COLUMNS,
    check_timeline,
    empty_timeline,
    make_timeline,
    memory_usage,
    peak_memory_by_device,
    to_chrome_trace,
)


def row(name, start, end, lane="g", kind="compute", **kw):
    return dict(lane=lane, group=kw.pop("group", lane), name=name, kind=kind, start_s=start, end_s=end, **kw)


def violation(tl, **kw):
    with pytest.raises(TimelineViolation) as e:
        check_timeline(tl, **kw)
    return e.value


def test_make_timeline_columns():
    tl = make_timeline([row("a", 0, 1, extra=3)])
    assert list(tl.columns) == list(COLUMNS) + ["extra"]
    assert tl["start_s"].dtype == float and tl["op"].isna().all()
    assert empty_timeline().shape == (0, len(COLUMNS))
    check_timeline(empty_timeline())
    cols = make_timeline({"lane": ["g"], "group": ["g"], "name": ["a"], "kind": ["compute"], "start_s": [0], "end_s": [1]})
    assert cols.shape == (1, len(COLUMNS))


def test_missing_columns():
    import pandas as pd

    v = violation(pd.DataFrame({"lane": ["g"], "start_s": [0.0]}))
    assert v.details["kind"] == "columns" and "end_s" in v.details["columns"]


def test_valid_timelines_pass():
    check_timeline(make_timeline([row("a", 0, 1), row("b", 1, 2), row("c", 0, 5, lane="h")]))
    # zero-length rows touching others, and alloc rows that overlap, are fine
    check_timeline(make_timeline([row("a", 0, 1), row("z", 1, 1), row("b", 1, 2),
                                  row("m1", 0, 2, lane="g:mem", kind="alloc", device="g", bytes=5),
                                  row("m2", 1, 3, lane="g:mem", kind="alloc", device="g", bytes=5)]),
                   capacity_bytes={"g": 10})


def test_overlap_adjacent():
    v = violation(make_timeline([row("a", 0, 2), row("b", 1, 3)]))
    assert v.details["kind"] == "overlap" and v.details["lane"] == "g" and v.details["rows"] == ("a", "b")


def test_overlap_long_row_over_two_later_short_ones():
    # c and d do not overlap each other, but both lie inside a; the second short one must be caught too
    tl = make_timeline([row("a", 0, 10), row("c", 1, 2), row("d", 3, 4), row("x", 0, 1, lane="other")])
    v = violation(tl)
    assert v.details["kind"] == "overlap" and v.details["rows"][0] == "a"
    # only the second short row overlaps the long one: still caught, and named with the long one
    tl2 = make_timeline([row("a", 0, 10), row("c", 11, 12), row("b", -5, 1)])
    v2 = violation(tl2)
    assert set(v2.details["rows"]) == {"a", "b"}
    tl3 = make_timeline([row("long", 0, 10), row("s1", 0, 1, lane="h"), row("s2", 9, 9.5)])
    assert violation(tl3).details["rows"] == ("long", "s2")


def test_negative_duration_and_non_finite():
    v = violation(make_timeline([row("a", 2, 1)]))
    assert v.details["kind"] == "negative" and "'a'" in str(v)
    for bad in (math.nan, math.inf):
        assert violation(make_timeline([row("a", 0, bad)])).details["kind"] == "finite"
        assert violation(make_timeline([row("a", bad, 1)])).details["kind"] == "finite"


def two_op_graph():
    g = OpGraph()
    g.add_op("p", "Relu")
    g.add_op("c", "Relu")
    g.add_tensor("t", 8, producer="p", consumers=["c"])
    return g


def test_dependency_compute():
    g = two_op_graph()
    ok = make_timeline([row("p", 0, 1, op="p"), row("c", 1, 2, lane="h", op="c")])
    check_timeline(ok, g)
    bad = make_timeline([row("p", 0, 1, op="p"), row("c", 0.5, 2, lane="h", op="c")])
    v = violation(bad, graph=g)
    assert v.details["kind"] == "dependency" and v.op == "c" and v.details["pred"] == "p"
    v = violation(bad, deps=[("p", "c")])
    assert v.details["kind"] == "dependency"
    # per microbatch: c of mb 1 may start before p of mb 0... ends; but not before p of mb 1
    mb_ok = make_timeline([row("p", 0, 1, op="p", microbatch=0), row("p", 1, 2, op="p", microbatch=1),
                           row("c", 1, 2, lane="h", op="c", microbatch=0), row("c", 2, 3, lane="h", op="c", microbatch=1)])
    check_timeline(mb_ok, g)
    mb_bad = make_timeline([row("p", 0, 1, op="p", microbatch=0), row("p", 1, 2, op="p", microbatch=1),
                            row("c", 1.5, 2.5, lane="h", op="c", microbatch=1), row("c", 1, 1.5, lane="h", op="c", microbatch=0)])
    assert violation(mb_bad, graph=g).details["kind"] == "dependency"


def test_transfer_before_producer_and_consumer_before_transfer():
    g = two_op_graph()
    early = make_timeline([row("p", 0, 2, op="p"), row("t", 1, 3, lane="g->h", kind="transfer", tensor="t", op="c"),
                           row("c", 3, 4, lane="h", op="c")])
    v = violation(early, graph=g)
    assert v.details["kind"] == "dependency" and v.tensor == "t" and v.op == "p"
    late = make_timeline([row("p", 0, 1, op="p"), row("t", 1, 3, lane="g->h", kind="transfer", tensor="t", op="c"),
                          row("c", 2, 4, lane="h", op="c")])
    v = violation(late, graph=g)
    assert v.details["kind"] == "dependency" and v.tensor == "t" and v.op == "c"


def test_memory_over_capacity():
    tl = make_timeline([row("a", 0, 2, lane="g:mem", kind="alloc", device="g", bytes=6),
                        row("b", 1, 3, lane="g:mem", kind="alloc", device="g", bytes=6)])
    v = violation(tl, capacity_bytes={"g": 10})
    assert v.details["kind"] == "memory" and v.device == "g"
    check_timeline(tl, capacity_bytes={"g": 12})
    # handed over at t=2: free then allocate, not both
    handover = make_timeline([row("a", 0, 2, lane="g:mem", kind="alloc", device="g", bytes=6),
                              row("b", 2, 3, lane="g:mem", kind="alloc", device="g", bytes=6)])
    check_timeline(handover, capacity_bytes={"g": 6})
    assert memory_usage(tl)["bytes"].tolist() == [6.0, 12.0, 6.0, 0.0]
    assert peak_memory_by_device(tl) == {"g": 12.0}
    assert peak_memory_by_device(empty_timeline()) == {}


# ------------------------------------------------------------------ Chrome / Perfetto trace


def assert_trace_rules(trace: dict) -> None:
    """The trace-event rules a viewer relies on."""
    ev = trace["traceEvents"]
    json.dumps(trace, allow_nan=False)  # strict JSON: no NaN/Infinity
    procs = {e["pid"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in ev:
        assert e["ph"] in {"M", "X", "s", "f", "C"}
        if e["ph"] == "M":
            assert isinstance(e["args"]["name"], str)
    slices = defaultdict(list)
    for e in ev:
        if e["ph"] == "X":
            assert e["ts"] >= 0 and e["dur"] >= 0 and math.isfinite(e["ts"]) and math.isfinite(e["dur"])
            assert e["pid"] in procs and (e["pid"], e["tid"]) in threads
            assert isinstance(e["name"], str) and isinstance(e["cat"], str)
            slices[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        if e["ph"] == "C":
            assert e["pid"] in procs and e["args"]["bytes"] >= 0
    for key, sl in slices.items():  # on one track: disjoint or properly nested
        sl.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for s, t in sl:
            while stack and stack[-1] <= s + 1e-6:
                stack.pop()
            if stack:
                assert t <= stack[-1] + 1e-6, f"slices cross on {key}"
            stack.append(t)
    starts = defaultdict(list)
    finishes = defaultdict(list)
    for e in ev:
        if e["ph"] == "s":
            starts[e["id"]].append(e)
        elif e["ph"] == "f":
            finishes[e["id"]].append(e)
            assert e.get("bp") == "e"
    assert set(starts) == set(finishes)
    for i in starts:
        (s,), (f,) = starts[i], finishes[i]
        assert s["name"] == f["name"] and s["ts"] <= f["ts"] + 1e-6
        assert (s["pid"], s["tid"]) in threads and (f["pid"], f["tid"]) in threads


def test_trace_of_hand_timeline(tmp_path):
    tl = make_timeline([
        row("a", 0, 1e-3, lane="gpu0", op="a", flow="t>b"),
        row("t", 1e-3, 2e-3, lane="gpu0->cpu0", group="links", kind="transfer", tensor="t", flow="t>b", bytes=8),
        row("b", 2e-3, 3e-3, lane="cpu0", group="host", op="b", flow="t>b"),
        row("k", 0, 0.5e-3, lane="gpu0", group="gpu0", kind="launch"),  # overlapping: a nested parent/child pair
        row("m", 0, 1e-3, lane="gpu0:mem", group="gpu0", kind="alloc", device="gpu0", bytes=8),
    ])
    p = tmp_path / "trace.json"
    tr = to_chrome_trace(tl, p, name="unit")
    assert json.loads(p.read_text()) == tr and tr["otherData"]["generator"] == "unit"
    ev = tr["traceEvents"]
    names = {e["args"]["name"] for e in ev if e["ph"] == "M"}
    assert {"host", "gpu0", "links", "cpu0", "gpu0->cpu0"} <= names
    first_proc = next(e for e in ev if e["ph"] == "M" and e["name"] == "process_name")
    assert first_proc["args"]["name"] == "host" and first_proc["pid"] == 0
    x = [e for e in ev if e["ph"] == "X"]
    assert len(x) == 4 and {e["cat"] for e in x} == {"compute", "transfer", "launch"}
    a = next(e for e in x if e["name"] == "a")
    assert a["ts"] == 0 and a["dur"] == pytest.approx(1000.0) and a["args"]["op"] == "a"
    flows = [e for e in ev if e["ph"] in "sf"]
    assert len(flows) == 4  # a -> t -> b: two arrows
    c = [e for e in ev if e["ph"] == "C"]
    assert [e["args"]["bytes"] for e in c] == [8.0, 0.0]
    assert_trace_rules(tr)


def test_trace_of_evaluations():
    s = toy_system()
    for g in (gen.fork_join(3, 2, seed=1), gen.transformer_block(seq=8, d_model=32, heads=4), gen.topcuoglu(40, seed=2)):
        pl = {o: s.candidates(g.op(o).op_type)[i % len(s.candidates(g.op(o).op_type))] for i, o in enumerate(g)}
        for p in (Placement(pl), Placement(pl, tensors_resident=set(list(g.tensors)[::2]), weights_resident=set(g))):
            ev = evaluate(g, s, p, contention=False)
            check_timeline(ev.timeline, g)
            tr = to_chrome_trace(ev.timeline)
            assert_trace_rules(tr)
            n_x = sum(1 for e in tr["traceEvents"] if e["ph"] == "X")
            assert n_x == int((ev.timeline["kind"] != "alloc").sum())


def test_timeline_builder_blocks_keep_the_row_order_and_late_flows():
    """extend() adds rows as arrays between rows added one by one; a flow list given to add() and
    extended after a block still ends up joined in its row (issue 21: one builder for every family)."""
    from hetsched.timeline import TimelineBuilder

    tb = TimelineBuilder()
    f: list[str] = ["a>b"]
    tb.add("r0", "p", "a", "compute", 0.0, 1.0, op="a", flow=f)
    tb.extend(np.array(["r0", "r1"], dtype=object), "p", np.array(["b", "c"], dtype=object), "compute",
              np.array([1.0, 0.0]), np.array([2.0, 3.0]), stage=np.array([1.0, 2.0]), bytes=4.0)
    f.append("a>c")
    tb.add("r1", "p", "d", "compute", 3.0, 4.0, op="d")
    assert len(tb) == 4
    tl = tb.build()
    check_timeline(tl)
    assert tl["name"].tolist() == ["a", "b", "c", "d"]
    assert tl["flow"].iloc[0] == "a>b,a>c" and tl["flow"].iloc[1] is None
    assert tl["bytes"].tolist()[1:3] == [4.0, 4.0] and np.isnan(tl["bytes"].iloc[0])
    assert tl["op"].tolist() == ["a", None, None, "d"] and tl["op"].dtype == object
    assert tl["stage"].iloc[1:3].tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="column 'name' has 1 rows, not 2"):
        tb.extend("r0", "p", ["x"], "compute", np.zeros(2), np.ones(2))
