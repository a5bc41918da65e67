"""validate(): every rule has a clear ScheduleError carrying the step x rank grid."""

from __future__ import annotations

import pytest

from hetsched.errors import ScheduleError
from hetsched.pipeline import SCHEDULES, Schedule, make_schedule, simulate, validate


def _err(rows, **kw):
    with pytest.raises(ScheduleError) as ei:
        validate(Schedule.from_text(rows, **kw))
    return ei.value


def test_valid_schedules_pass():
    for name in SCHEDULES:
        validate(make_schedule(name, 3, 2, 6))


def test_backward_before_forward():
    e = _err(["0F0 0B0", "1B0 1F0"])
    assert e.field == "order" and e.details["rank"] == 1 and e.details["step"] == 0
    assert "1B0 runs before its forward 1F0" in str(e)
    assert "<-- HERE (rank 1)" in str(e) and "rank 0" in str(e).splitlines()[2]


def test_weight_before_input_grad():
    e = _err(["0F0 0W0 0I0"], p=1, v=1, m=1)
    assert e.field == "order" and "0W0 runs before its input gradient 0I0" in str(e)


def test_missing_and_duplicate_actions():
    e = _err(["0F0 0F1 0B0", "1F0 1B0 1F1 1B1"])
    assert e.field == "missing" and e.details == {"stage": 0, "microbatch": 1}
    assert "missing 0B1" in str(e)
    e = _err(["0F0 0F0 0B0", "1F0 1B0"])
    assert e.field == "duplicate" and "0F0 appears more than once" in str(e)
    e = _err(["0F0 0I0 0W0 0B0", "1F0 1B0"])
    assert e.field == "missing" and "exactly one of 0B0 or the pair" in str(e)
    e = _err(["0F0 0I0", "1F0 1B0"])
    assert "missing 0W0" in str(e)


def test_stage_on_two_ranks_and_out_of_range():
    e = _err(["0F0 0B0 1F0", "1B0"])
    assert e.field == "placement" and "stage 1 is assigned to both rank 0 and rank 1" in str(e)
    e = _err(["0F0 0B0", "1F0 1B0 2F0"], p=2, v=1, m=1)
    assert e.field == "range"


def test_deadlock_names_the_waiting_action_and_shows_the_grid():
    # rank 0 wants 0B0 (needs 1B0) before it sends 0F1; rank 1 wants 1F1 before 1B0
    e = _err(["0F0 0B0 0F1 0B1", "1F0 1F1 1B0 1B1"])
    assert e.field == "deadlock"
    msg = str(e)
    assert msg.startswith("deadlock: rank 0, step 1: 0B0 waits for 1B0 (rank 1, step 2)")
    assert "rank 1 at 1F1" in msg and "<-- HERE" in msg
    with pytest.raises(ScheduleError, match="deadlock"):
        simulate(Schedule.from_text(["0F0 0B0 0F1 0B1", "1F0 1F1 1B0 1B1"]))


def test_grid_error_is_windowed_for_big_schedules():
    s = make_schedule("interleaved_1f1b", 4, 2, 40)
    rows = s.to_text()
    rows[2] = rows[2].replace("2B5", "2BX", 1)
    with pytest.raises(Exception) as ei:
        validate(Schedule.from_text(rows))
    assert "2BX" in str(ei.value)  # FormatError from the parser
    acts = [r.split() for r in s.to_text()]
    kf, kb = acts[2].index("6F20"), acts[2].index("6B20")
    acts[2][kf], acts[2][kb] = acts[2][kb], acts[2][kf]
    with pytest.raises(ScheduleError) as ei:
        validate(Schedule.from_actions(acts))
    e = ei.value
    assert e.field == "order" and e.details["step"] == kf and e.details["rank"] == 2
    lines = str(e).splitlines()
    assert len(lines) < 15  # only the neighbourhood of the offending step
    assert any(ln.startswith(f"step {kf}:") and "<-- HERE (rank 2)" in ln for ln in lines)


def test_validate_leaves_the_frozen_schedule_untouched():
    from hetsched.pipeline import interleaved_1f1b, simulate

    s = interleaved_1f1b(4, 2, 10, grouping="paddle")
    meta = dict(s.meta)
    validate(s)
    simulate(s, timeline=False)
    assert s.meta == meta  # no cache written into a frozen object


def test_pipeline_modules_form_no_import_cycle():
    """validate, simulate, cache and lockstep share deps.py instead of importing each other's privates."""
    import ast
    from pathlib import Path

    import networkx as nx

    import hetsched.pipeline as pkg

    root = Path(pkg.__file__).parent
    g = nx.DiGraph()
    for f in root.glob("*.py"):
        mod = f.stem
        g.add_node(mod)
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                g.add_edge(mod, node.module.split(".")[0])
    g.remove_node("__init__")
    cycles = list(nx.simple_cycles(g))
    assert not cycles, cycles
    assert not any(n.startswith("_") for n in ast.walk(ast.parse((root / "validate.py").read_text()))
                   if isinstance(n, ast.alias) for n in [n.name])


def test_pipeline_result_uses_the_base_initialisation():
    from types import MappingProxyType

    from hetsched.pipeline import one_f_one_b, simulate
    from hetsched.results import LazySteps, Result

    r = simulate(one_f_one_b(2, 2))
    assert isinstance(r.metrics, MappingProxyType) and isinstance(r.params, MappingProxyType)
    # the shared lazy log, passed in by simulate: no initialisation or replay of its own (issue 21)
    assert "__post_init__" not in type(r).__dict__ and "replay" not in type(r).__dict__
    assert type(r).__post_init__ is Result.__post_init__
    assert isinstance(r.steps, LazySteps)
    assert len(r.steps) == r.schedule.n_actions and r.steps[0].subject == "0F0"
