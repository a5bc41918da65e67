"""Closing sub-pixel gaps in big Gantt charts (hetsched.plot.core._merge_close) against a plain
interval-union reference, on random bars."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hetsched.plot.core import _merge_close, gantt
from hetsched.timeline import make_timeline


def _reference(keys, lanes, s, e, keep, tol):
    """Per (key, lane): sort by start, merge while the next start is within tol of the run's end."""
    out = []
    groups = {}
    for i in range(len(s)):
        groups.setdefault((keys[i], lanes[i]), []).append(i)
    for idx in groups.values():
        idx.sort(key=lambda i: (s[i], i))
        run = None
        for i in idx:
            if run is not None and not keep[i] and not run[3] and s[i] <= run[1] + tol:
                run[1] = max(run[1], e[i])
                run[2] += 1
            else:
                if run is not None:
                    out.append(tuple(run[:3]))
                run = [s[i], e[i], 1, keep[i]]
        out.append(tuple(run[:3]))
    return sorted(out)


bars = st.lists(st.tuples(st.sampled_from("ab"), st.sampled_from(["l0", "l1"]),
                          st.floats(0, 100, allow_nan=False), st.floats(0, 5, allow_nan=False), st.booleans()),
                min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(bars, st.sampled_from([0.0, 0.5, 2.0]))
def test_merge_matches_the_interval_union(rows, tol):
    keys = [r[0] for r in rows]
    lanes = np.array([r[1] for r in rows])
    s = np.array([r[2] for r in rows])
    e = s + np.array([r[3] for r in rows])
    keep = [r[4] for r in rows]
    rep, ms, me, cnt = _merge_close(keys, lanes, s, e, keep, None, tol)
    got = sorted(zip(ms.tolist(), me.tolist(), cnt))
    assert got == _reference(keys, lanes, s.tolist(), e.tolist(), keep, tol)
    assert sum(cnt) == len(rows)
    # each merged bar keeps its representative's colour and lane
    for i, a in zip(rep, ms.tolist()):
        assert s[i] == a


def test_big_back_to_back_timeline_is_drawn_as_few_svg_bars():
    rows = [dict(lane=f"l{i % 2}", group="g", name=f"n{i}", kind="compute", start_s=i // 2, end_s=i // 2 + 1)
            for i in range(5000)]
    fig = gantt(make_timeline(rows), highlight=["n10"])
    assert {t.type for t in fig.data} == {"bar"}
    assert sum(len(t.x) for t in fig.data) <= 10  # two lanes, the highlighted bar alone
    assert "gaps under" in fig.layout.xaxis.title.text
