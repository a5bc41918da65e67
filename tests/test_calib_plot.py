"""The simulated-vs-measured figure builders: valid Plotly (equal to their validated copy, as
tests/test_plot_validation.py requires of every builder) and showing the numbers they are given."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from hetsched.cost import EfficiencyCurve
from hetsched.errors import HetschedError
from hetsched.plot.calibration import efficiency_curves, measured_vs_predicted, ratio_scatter
from hetsched.timeline import make_timeline

OPS = pd.DataFrame({"op": ["c1", "c2", "r1", "v"], "op_type": ["Conv", "Conv", "Relu", "Reshape"],
                    "measured_s": [1e-3, 2e-3, 3e-5, 2e-6], "predicted_s": [1.1e-3, 1.6e-3, 6e-5, 2e-6]})


def _tl(scale):
    rows, t = [], 0.0
    for o, d in zip(OPS["op"], OPS["measured_s"] * scale):
        rows.append(dict(lane="cpu0", group="cpu0", name=o, kind="compute", start_s=t, end_s=t + d, op=o))
        t += d
    return make_timeline(rows)


PTS = pd.DataFrame({"source": ["m", "m", "sweep", "m"], "op": ["c1", "c2", "s", "r1"], "op_type": ["Conv", "Conv", "Conv", "Relu"],
                    "key": ["Conv", "Conv", "Conv", "elementwise"], "work_s": [1e-4, 1e-3, 1e-2, 1e-6],
                    "efficiency": [0.5, 0.8, 0.9, 0.2]})
CURVES = {"Conv": EfficiencyCurve([1e-4, 1e-3, 1e-2], [0.5, 0.8, 0.9]), "elementwise": EfficiencyCurve([1e-6], [0.2])}

CASES = [
    ("ratio_scatter", lambda: ratio_scatter(OPS)),
    ("ratio_scatter highlight", lambda: ratio_scatter(OPS.assign(ratio=OPS.predicted_s / OPS.measured_s), highlight="c2",
                                                      title="t")),
    ("measured_vs_predicted", lambda: measured_vs_predicted(_tl(1.0), _tl(0.9),
                                                            op_types=dict(zip(OPS["op"], OPS["op_type"])), highlight="r1")),
    ("measured_vs_predicted by kind", lambda: measured_vs_predicted(_tl(1.0), _tl(1.2))),
    ("efficiency_curves", lambda: efficiency_curves(PTS, CURVES, title="c")),
    ("efficiency_curves one key", lambda: efficiency_curves(PTS, CURVES, keys=["Conv"])),
]


@pytest.mark.parametrize("name,build", CASES, ids=[n for n, _ in CASES])
def test_valid_plotly(name, build):
    from test_plot_validation import _json  # the one comparison every builder is held to

    fig = build()
    raw = {"data": [t.to_plotly_json() for t in fig.data], "layout": fig.layout.to_plotly_json()}
    assert _json(go.Figure(raw)) == _json(fig), name


def test_ratio_scatter_numbers():
    fig = ratio_scatter(OPS)
    conv = next(t for t in fig.data if t.name == "Conv")
    assert list(np.round(conv.y, 6)) == [1.1, 0.8]
    assert list(conv.x) == [1.0, 2.0]  # ms
    assert "median 1.050" in fig.layout.title.text  # of 1.1, 0.8, 2.0, 1.0
    assert fig.layout.shapes[0].y0 == 0.7 and fig.layout.shapes[0].y1 == 1.4
    with pytest.raises(HetschedError):
        ratio_scatter(OPS.drop(columns="predicted_s"))


def test_two_lanes_one_axis():
    fig = measured_vs_predicted(_tl(1.0), _tl(0.5), op_types=dict(zip(OPS["op"], OPS["op_type"])))
    lanes = {y for t in fig.data for y in t.y}
    assert lanes == {"measured cpu0", "predicted cpu0"}
    assert {t.name for t in fig.data} == {"Conv", "Relu", "Reshape"}


def test_curves_error():
    with pytest.raises(HetschedError) as e:
        efficiency_curves(PTS, CURVES, keys=["Gemm"])
    assert e.value.field == "keys"
