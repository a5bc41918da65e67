"""Result / Step (frozen, replay, steps_frame) and the discrete-event core."""

from __future__ import annotations

import dataclasses
import math

import pytest

from hetsched.des import Simulator
from hetsched.errors import HetschedError
from hetsched.results import Result, Step


def log():
    return [
        Step(0, "move", "a", before=3.0, after=2.0, accepted=True, reason="better", delta={"a": "gpu"}),
        Step(1, "move", "b", before=2.0, after=2.5, accepted=False, reason="not better", delta={"b": "fpga"}),
        Step(2, "move", "b", before=2.0, after=1.0, accepted=True, reason="better", delta={"b": "gpu"}),
    ]


def test_replay_applies_accepted_deltas_only():
    r = Result(metrics={"cost": 1.0}, steps=log(), initial_state={"a": "cpu", "b": "cpu"})
    assert r.replay(-1) == {"a": "cpu", "b": "cpu"}
    assert r.replay(0) == {"a": "gpu", "b": "cpu"}
    assert r.replay(1) == {"a": "gpu", "b": "cpu"}  # rejected step changes nothing
    assert r.replay(2) == {"a": "gpu", "b": "gpu"}
    r.replay(2)["a"] = "x"
    assert r.replay(2)["a"] == "gpu"  # replay hands out fresh state
    for k in (-2, 3):
        with pytest.raises(IndexError):
            r.replay(k)
    assert r.n_steps == 3


def test_steps_frame():
    f = Result(steps=log()).steps_frame()
    assert list(f.columns) == ["index", "action", "subject", "before", "after", "accepted", "reason"]
    assert f["accepted"].tolist() == [True, False, True] and f["reason"].iat[1] == "not better"
    assert Result().steps_frame().shape == (0, 7)


def test_frozen():
    r = Result(metrics={"m": 1.0}, params={"p": 1}, steps=[log()[0]])
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.metrics = {}
    with pytest.raises(TypeError):
        r.metrics["m"] = 2.0
    with pytest.raises(TypeError):
        r.params["p"] = 2
    assert isinstance(r.steps, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.steps[0].accepted = False
    with pytest.raises(TypeError):
        Result({"m": 1.0})  # keyword-only


def test_subclass_and_custom_apply():
    @dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
    class CountResult(Result):
        answer: int = 0

        def _apply(self, state, step):
            state["n"] = state.get("n", 0) + step.delta.get("inc", 0)

    r = CountResult(answer=42, steps=[Step(0, "inc", "n", delta={"inc": 2}), Step(1, "inc", "n", delta={"inc": 3})],
                    initial_state={"n": 1})
    assert r.replay(1) == {"n": 6} and r.answer == 42
    assert r.summary()["result"] == "CountResult"
    assert "CountResult" in repr(r) and "answer" in repr(r)


# ------------------------------------------------------------------ DES


def test_ordering_by_time_priority_then_seq():
    sim = Simulator()
    out = []
    sim.at(2.0, out.append, "t2-first-scheduled")
    sim.at(1.0, out.append, "t1")
    sim.at(2.0, out.append, "t2-prio-1", priority=-1)
    sim.at(2.0, out.append, "t2-second-scheduled")
    sim.after(0.5, out.append, "t0.5")
    assert sim.run() == 2.0
    assert out == ["t0.5", "t1", "t2-prio-1", "t2-first-scheduled", "t2-second-scheduled"]
    assert sim.n_events == 5 and len(sim) == 0


def test_callbacks_schedule_more_and_cancel():
    sim = Simulator()
    out = []

    def tick(n):
        out.append((sim.now, n))
        if n < 3:
            sim.after(1.0, tick, n + 1)

    sim.at(0.0, tick, 0)
    dropped = sim.at(1.5, out.append, "never")
    dropped.cancel()
    assert len(sim) == 1
    sim.run()
    assert out == [(0.0, 0), (1.0, 1), (2.0, 2), (3.0, 3)]


def test_run_until_and_step():
    sim = Simulator()
    out = []
    for t in (1.0, 2.0, 3.0):
        sim.at(t, out.append, t)
    assert sim.run(until=2.5) == 2.5 and out == [1.0, 2.0]
    assert sim.peek() == 3.0
    assert sim.step() and out[-1] == 3.0 and not sim.step()
    assert sim.peek() == math.inf


def test_errors():
    sim = Simulator(start_s=5.0)
    with pytest.raises(HetschedError) as e:
        sim.at(1.0, print)
    assert e.value.field == "time"
    with pytest.raises(HetschedError):
        sim.at(math.nan, print)
    with pytest.raises(HetschedError) as e:
        sim.after(-1.0, print)
    assert e.value.field == "delay"

    def forever():
        sim.after(0.0, forever)

    sim.at(5.0, forever)
    with pytest.raises(HetschedError):
        sim.run(max_events=100)


def test_determinism():
    def trace():
        sim = Simulator()
        out = []
        for i in range(50):
            sim.at((i * 7) % 5, out.append, i, priority=i % 3)
        sim.run()
        return out

    a = trace()
    assert a == trace()
    assert a[:3] == [0, 15, 30]  # time 0, then priority 0,0,... by seq
