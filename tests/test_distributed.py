"""hetsched.distributed: the gloo link fit, processor sharing of ranks, and one tiny real pipeline run
(the measured verdicts are in bench/bench_calibration.py --only comm pipeline)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetsched.distributed import fit_link, shared_cores_makespan
from hetsched.errors import HetschedError
from hetsched.pipeline import P2P, StageCosts, gpipe, interleaved_1f1b, one_f_one_b, simulate


def test_fit_link_recovers_latency_and_bandwidth_and_weighs_sizes_alike():
    n = np.array([4, 64, 1024, 16384, 262144, 4194304], float)
    t = 3e-5 + n / 2.5e9
    lat, bw = fit_link(n, t * (1 + 0.01 * np.array([1, -1, 1, -1, 1, -1])))
    assert lat == pytest.approx(3e-5, rel=0.05) and bw == pytest.approx(2.5e9, rel=0.05)
    assert fit_link([4, 8], [1e-5, 1e-5]) == (1e-5, math.inf)  # flat: no size dependence
    with pytest.raises(HetschedError):
        fit_link([4], [1e-5])


@settings(max_examples=25, deadline=None)
@given(p=st.integers(2, 4), m=st.integers(1, 6), kind=st.sampled_from(["gpipe", "1f1b", "i1f1b"]),
       f=st.floats(0.5, 2.0), b=st.floats(0.5, 3.0), lat=st.floats(0.0, 0.5))
def test_shared_cores_equals_the_simulator_with_a_core_per_rank(p, m, kind, f, b, lat):
    s = {"gpipe": lambda: gpipe(p, m), "1f1b": lambda: one_f_one_b(p, m),
         "i1f1b": lambda: interleaved_1f1b(p, 2, max(m, p))}[kind]()
    c = StageCosts(f_s=f, b_s=b, activation_bytes=8.0, overhead_s=0.01)
    comm = P2P(latency_s=lat)
    full = simulate(s, costs=c, comm=comm).metrics["makespan_s"]
    assert shared_cores_makespan(s, c, comm, p) == pytest.approx(full, rel=1e-9)
    # fewer cores: never faster, never slower than all the work on the cores with no overlap lost
    one = shared_cores_makespan(s, c, comm, 1)
    work = sum(float(x) for x in (c.arrays(s.n_stages, s.v)["F"] + c.arrays(s.n_stages, s.v)["B"]
                                  + 2 * c.arrays(s.n_stages, s.v)["overhead"])) * s.m
    assert one >= full - 1e-9 and one >= work - 1e-9
    assert shared_cores_makespan(s, c, comm, 1) <= work + full + 1e-9


def test_a_measured_link_as_the_simulator_and_a_system_take_it():
    from hetsched.distributed import P2PCalibration

    c = P2PCalibration(metrics={"latency_s": 5e-5, "bandwidth_Bps": 2e9, "overhead_s": 2e-5})
    p2p = c.p2p()
    # a lone message costs the fitted ping-pong time; 2e-5 of it is paid by every message in flight
    assert p2p.time_s(1e6) + p2p.overhead_s == pytest.approx(5e-5 + 1e6 / 2e9)
    assert (p2p.latency_s, p2p.overhead_s) == pytest.approx((3e-5, 2e-5))
    ln = c.link("cpu0", "cpu1")
    assert (ln.latency_s, ln.bandwidth_Bps, ln.attrs["overhead_s"]) == (5e-5, 2e9, 2e-5)
    # the simulator charges it on every cross-rank message
    s = one_f_one_b(2, 2)
    free = simulate(s, costs=StageCosts(f_s=1e-3, b_s=2e-3, activation_bytes=1e6)).metrics["makespan_s"]
    priced = simulate(s, costs=StageCosts(f_s=1e-3, b_s=2e-3, activation_bytes=1e6), comm=p2p).metrics["makespan_s"]
    assert priced > free


def test_one_core_serialises_the_work():
    s, c = gpipe(4, 3), StageCosts(f_s=1.0, b_s=2.0)
    assert shared_cores_makespan(s, c, None, 1) == pytest.approx(4 * 3 * 3.0)
    # two cores: the fill and drain run at full speed, the middle shares
    two = shared_cores_makespan(s, c, None, 2)
    assert simulate(s, costs=c).metrics["makespan_s"] < two < 36.0


torch = pytest.importorskip("torch")


def test_a_real_pipeline_run_and_its_prediction():
    """Two gloo ranks run torch's GPipe for real; the simulator takes the measured stages."""
    from hetsched.distributed import measure_pipeline, predict_pipeline

    run = measure_pipeline("interleaved_1f1b", 2, v=2, m=2, microbatch=4, width=32, layers=4, steps=2, warmup=1,
                           stage_repeats=2, timeout_s=300)
    assert run.metrics["p"] == 2 and len(run.step_s) == 2 and run.metrics["step_s"] > 0
    assert list(run.stages["stage"]) == [0, 1, 2, 3] and list(run.stages["rank"]) == [0, 1, 0, 1]
    assert (run.stages[["f_s", "b_s", "i_s"]] > 0).all().all()
    # W = B - I, measured apart: on layers this small timing noise can make I reach B, and W is then 0, never negative
    assert (run.stages["w_s"] >= 0).all()
    assert np.allclose(run.stages["i_s"] + run.stages["w_s"], run.stages["b_s"])
    sched = run.schedule()
    assert (sched.p, sched.v, sched.m) == (2, 2, 2)  # torch's own order, read back
    pred = predict_pipeline(run, comm=P2P(latency_s=1e-4), overhead_s=1e-4)
    assert pred["makespan_s"] > 0 and pred["model"].startswith("simulate")
    with pytest.raises(HetschedError) as e:
        measure_pipeline("1f1b", 2, v=2)
    assert e.value.field == "v"
