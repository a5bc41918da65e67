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
from hetsched.timeline import check_timeline
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


def test_a_late_receive_costs_only_where_the_message_waited_for_it():
    from hetsched.distributed import receive_posts

    s, c = one_f_one_b(3, 4), StageCosts(f_s=[1.0, 1.5, 2.0], b_s=[2.0, 3.0, 4.0], activation_bytes=1e3)
    comm = P2P(latency_s=0.1)
    base = shared_cores_makespan(s, c, comm, 3)
    assert base == pytest.approx(simulate(s, costs=c, comm=comm).metrics["makespan_s"], rel=1e-9)
    late = shared_cores_makespan(s, c, comm, 3, late_recv_s=0.3)
    every = shared_cores_makespan(s, c, comm, 3, late_recv_s=0.3, all_late=True)
    assert base < late < every
    # a receive posted at the step's start is never late: only the slower stages' inputs wait
    early = np.full(s.n_actions, -1)
    assert shared_cores_makespan(s, c, comm, 3, late_recv_s=0.3, posts=early) == pytest.approx(base, rel=1e-9)
    # the default post point is the previous action on the rank
    post = receive_posts(s, None)
    for r in range(s.p):
        lo, hi = int(s.offsets[r]), int(s.offsets[r + 1])
        assert post[lo] == -1 and list(post[lo + 1:hi]) == list(range(lo, hi - 1))
    with pytest.raises(HetschedError) as e:
        shared_cores_makespan(s, c, comm, 3, late_recv_s=-1.0)
    assert e.value.field == "late_recv_s"
    for bad in (post[:-1], post + 1, np.full(s.n_actions, -2), post.astype(float)):  # short, not earlier, below -1, floats
        with pytest.raises(HetschedError) as e:
            shared_cores_makespan(s, c, comm, 3, late_recv_s=0.3, posts=bad)
        assert e.value.field == "posts"
    with pytest.raises(HetschedError) as e:
        shared_cores_makespan(s, c, comm, 3, speed=[1.0, 0.0])
    assert e.value.field == "speed"
    for bad in (-1e-3, math.inf, math.nan):
        with pytest.raises(HetschedError) as e:
            shared_cores_makespan(s, c, comm, 3, post_s=bad)
        assert e.value.field == "post_s"


def test_communication_cpu_takes_the_cores_only_when_they_are_busy():
    from hetsched.distributed import cross_messages

    s, c = gpipe(2, 4), StageCosts(f_s=1.0, b_s=2.0)
    msgs = cross_messages(s)
    assert msgs == 8
    base = shared_cores_makespan(s, c, None, 2)
    cpu = shared_cores_makespan(s, c, None, 2, comm_cpu_s=0.2)
    # more ranks' worth of work than cores: the jobs cost at most their CPU time over the cores
    assert base < cpu <= base + 2 * msgs * 0.2 / 2 + 1e-9
    # one core: every second of communication CPU is a second of the step
    one = shared_cores_makespan(s, c, None, 1)
    assert shared_cores_makespan(s, c, None, 1, comm_cpu_s=0.2) == pytest.approx(one + 2 * msgs * 0.2, rel=1e-9)
    # spare cores run the jobs for free
    assert shared_cores_makespan(s, c, None, 8, comm_cpu_s=0.2) == pytest.approx(base, rel=1e-9)
    with pytest.raises(HetschedError) as e:
        shared_cores_makespan(s, c, None, 2, comm_cpu_s=-1.0)
    assert e.value.field == "comm_cpu_s"


def test_late_receive_rank_counts_are_checked_and_looked_up():
    from hetsched.distributed import P2PCalibration, measure_p2p

    with pytest.raises(HetschedError) as e:
        measure_p2p([4, 64], late_worlds=(3,))
    assert e.value.field == "late_worlds"
    c = P2PCalibration(metrics={"late_recv_s": 1e-3, "late_recv_4_s": 2e-3, "late_recv_8_s": 5e-3})
    assert [c.late_recv(p) for p in (1, 2, 4, 6, 8, 16)] == [1e-3, 1e-3, 2e-3, 2e-3, 5e-3, 5e-3]
    assert P2PCalibration(metrics={}).late_recv(4) == 0.0


def test_measured_corun_speeds_slow_the_shared_actions():
    from hetsched.distributed import corun_speed

    s, c = gpipe(2, 4), StageCosts(f_s=1.0, b_s=2.0)
    full = shared_cores_makespan(s, c, None, 2)
    assert shared_cores_makespan(s, c, None, 2, speed=[1.0, 1.0]) == pytest.approx(full, rel=1e-9)
    slow = shared_cores_makespan(s, c, None, 2, speed=[1.0, 0.8])
    # only the overlapped part slows: between the ideal and everything at 0.8
    assert full < slow < full / 0.8 + 1e-9
    # beyond the measured counts the last entry's throughput is shared
    four = gpipe(4, 4), StageCosts(f_s=1.0, b_s=2.0)
    assert shared_cores_makespan(*four, None, 4, speed=[1.0, 1.0]) == pytest.approx(shared_cores_makespan(*four, None, 2),
                                                                                    rel=1e-9)
    assert corun_speed([{"1": 1.0}]) == (1.0,)
    assert corun_speed([{"1": 1.0, "2": 2.0, "3": 4.0}, {"1": 1.0, "2": 2.0, "3": 4.0}, {"1": 2.0, "3": 8.0}]) == (1.0, 0.5, 0.25)


torch = pytest.importorskip("torch")


def test_a_real_pipeline_run_and_its_prediction():
    """Two gloo ranks run torch's GPipe for real; the simulator takes the measured stages."""
    from hetsched.distributed import measure_pipeline, predict_pipeline

    run = measure_pipeline("interleaved_1f1b", 2, v=2, m=2, microbatch=4, width=32, layers=4, steps=2, warmup=1,
                           stage_repeats=2, timeout_s=300)
    assert run.metrics["p"] == 2 and len(run.step_s) == 2 and run.metrics["step_s"] > 0
    assert list(run.stages["stage"]) == [0, 1, 2, 3] and list(run.stages["rank"]) == [0, 1, 0, 1]
    assert (run.stages[["f_s", "b_s", "i_s"]] > 0).all().all()
    # the split backward's halves, timed as torch's zero-bubble runtime runs them
    assert (run.stages["w_s"] > 0).all()
    sched = run.schedule()
    assert (sched.p, sched.v, sched.m) == (2, 2, 2)  # torch's own order, read back
    pred = predict_pipeline(run, comm=P2P(latency_s=1e-4), overhead_s=1e-4)
    assert pred["makespan_s"] > 0 and pred["model"].startswith("simulate")
    # how fast a rank computes with 1 and 2 ranks computing, and where torch's runtime posts receives
    assert len(run.speed) == 2 and run.speed[0] == 1.0 and 0 < run.speed[1] <= 10
    assert run.comms is not None and len(run.comms) == 2 and any("RECV_F" in a for a in run.comms[1])
    full = predict_pipeline(run, comm=P2P(latency_s=1e-4), overhead_s=1e-4, speed=run.speed, late_recv_s=1e-3)
    assert full["makespan_s"] > 0 and "co-run" in full["model"] and "receive" in full["model"]
    # the CPU of the ranks' communication threads, per step and per end of each cross-rank message
    assert run.metrics["messages"] == 12  # 3 stage boundaries, 2 micro-batches, forward and backward
    assert run.metrics["comm_cpu_s"] >= 0
    assert run.metrics["comm_cpu_per_message_s"] == pytest.approx(run.metrics["comm_cpu_s"] / 24)
    more = predict_pipeline(run, comm=P2P(latency_s=1e-4), overhead_s=1e-4, speed=run.speed, late_recv_s=1e-3,
                            comm_cpu_s=1e-3)
    assert more["makespan_s"] >= full["makespan_s"] and "communication CPU" in more["model"]
    # the measured step as a timeline: every action torch ran, on its rank, once, between its posts and waits
    tl = run.timeline
    check_timeline(tl)
    comp = tl[tl["kind"] == "compute"]
    want = {(f"rank {int(sched.rank[a])}", f"{int(sched.stage[a])}{'FBIW'[int(sched.kind[a])]}{int(sched.microbatch[a])}")
            for a in range(sched.n_actions)}
    assert set(zip(comp["lane"], comp["name"])) == want and len(comp) == len(want)
    assert set(tl["kind"]) == {"compute", "launch", "wait"} and tl["start_s"].min() >= 0
    for k in ("post_cpu_per_message_s", "compute_in_run_s"):
        assert run.metrics[k] > 0, k
    assert run.metrics["wait_s"] >= 0 and run.metrics["descheduled_s"] >= 0
    assert run.metrics["compute_in_run_s"] <= 2 * max(run.step_s)
    posted = predict_pipeline(run, comm=P2P(latency_s=1e-4), overhead_s=1e-4, speed=run.speed, late_recv_s=1e-3,
                              comm_cpu_s=1e-3, post_s=run.metrics["post_cpu_per_message_s"])
    assert posted["makespan_s"] > more["makespan_s"] and "posting" in posted["model"]
    with pytest.raises(HetschedError) as e:
        measure_pipeline("1f1b", 2, v=2)
    assert e.value.field == "v"


def test_posting_a_message_lengthens_its_producer_and_its_consumer():
    """``post_s`` is time on the ranks' own threads: with a core per rank and no other term, each
    cross-rank message adds it to the action that sends and to the one that receives."""
    s = one_f_one_b(3, 4)
    c = StageCosts(f_s=[1.0, 1.5, 1.0], b_s=[2.0, 2.5, 2.0])
    base = shared_cores_makespan(s, c, None, 3)
    # the same as pricing every action with its message ends folded into its own time
    from hetsched.pipeline.simulate import price_actions

    _, dur, src, dst, _, _ = price_actions(s, c.arrays(s.n_stages, s.v), P2P.coerce(None))
    ends = np.zeros(s.n_actions)
    np.add.at(ends, src, 1), np.add.at(ends, dst, 1)
    assert ends.sum() == 2 * 2 * 4 * 2  # 2 boundaries x 4 micro-batches x forward and backward, 2 ends each
    with_posts = shared_cores_makespan(s, c, None, 3, post_s=0.1)
    # stage 0 sends each forward and receives each backward's gradient (one end each), stage 1 both
    # receives and sends (two), stage 2 one: the simulator with those ends folded into the stages
    folded = StageCosts(f_s=[1.1, 1.7, 1.1], b_s=[2.1, 2.7, 2.1])
    assert with_posts == pytest.approx(simulate(s, costs=folded).metrics["makespan_s"], rel=1e-12)
    assert base < with_posts and shared_cores_makespan(s, c, None, 3, post_s=0.0) == base


def test_trace_hooks_record_and_come_off_again():
    """The tracing hooks wrap torch's post and wait functions and the stages' compute methods, name
    the actions as the simulator does (a backward without its weight half is ``I``), skip empty
    posts, and leave everything as it was when taken off."""
    from types import SimpleNamespace

    from hetsched.distributed import _trace_hooks

    class Stage:
        stage_index = 3

        def forward_one_chunk(self, mb, *a, **kw):
            return "f"

        def backward_one_chunk(self, mb, loss=None, full_backward=True, last_backward=False):
            return "b"

        def backward_weight_one_chunk(self, mb, last_backward=False):
            return "w"

    def post(ops, desc=None):
        return list(ops)

    def wait(work):
        return None

    S = SimpleNamespace(_batch_p2p=post, _wait_batch_p2p=wait)
    st = Stage()
    events: list = []
    assert _trace_hooks(S, [st], events)
    assert S._batch_p2p(["op"], desc="fwd_send") == ["op"] and S._batch_p2p([], desc="fwd_recv") == []
    S._wait_batch_p2p(["w1", "w2"])
    assert st.forward_one_chunk(2) == "f" and st.backward_one_chunk(2, full_backward=False) == "b"
    assert st.backward_one_chunk(1) == "b" and st.backward_weight_one_chunk(2) == "w"
    assert [e[0] for e in events] == ["post:fwd_send:1", "wait:2", "3F2", "3I2", "3B1", "3W2"]
    assert all(e[1] <= e[2] and e[3] >= 0 for e in events)
    _trace_hooks(S, [st], None)
    assert S._batch_p2p is post and S._wait_batch_p2p is wait and "forward_one_chunk" not in vars(st)
    n = len(events)
    st.forward_one_chunk(0), S._wait_batch_p2p([])
    assert len(events) == n
    # a torch without those functions is run untraced, not traced wrongly
    assert not _trace_hooks(SimpleNamespace(_batch_p2p=post), [st], events)
