"""The one declarative format for UI parameters (issue 21): :mod:`hetsched.params` and the family specs.

Written from the issue's contract, not from the code's output: a value is accepted exactly when it
is one of a choice's options, or a finite real number (never a bool) inside the declared bounds,
whole where a count is asked; ``None`` only where it is allowed. Every family declares its panel
parameters with it in the core, and no widget keeps its own range constants for them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hetsched.executor as ex
import hetsched.mapping as mp
import hetsched.memory as mem
import hetsched.partition as pt
import hetsched.pipeline as pp
from hetsched.errors import HetschedError
from hetsched.io import generators as gen
from hetsched.params import Param, ParamSpec

ROOT = Path(__file__).resolve().parents[1]

#: every family's panel parameters, declared in the core
FAMILY_SPECS = {
    "pipeline": pp.PARAMS,
    "executor": ex.PARAMETERS,
    "mapping": mp.PARAMS,
    "memory": mem.PARAMS,
    "partition": pt.PARAMS,
    "generators": gen.PARAMS,
}


# ------------------------------------------------------------------------------------ units
def test_a_param_refuses_an_impossible_declaration():
    with pytest.raises(HetschedError, match="kind 'number'"):
        Param("x", "number", 1)
    with pytest.raises(HetschedError, match="needs options"):
        Param("x", "choice", "a")
    with pytest.raises(HetschedError, match="min 5 is above max 1"):
        Param("x", "int", 1, min=5, max=1)
    with pytest.raises(HetschedError, match="declared twice"):
        ParamSpec([Param("x", "bool", True), Param("x", "bool", False)])


def test_a_spec_is_ordered_immutable_and_looked_up_by_name():
    a, b = Param("b_s", "float", 1.0, min=0.0), Param("a", "choice", "x", options=["x", "y"])
    spec = ParamSpec([a, b])
    assert [p.name for p in spec] == ["b_s", "a"] and spec.names == ("b_s", "a") and len(spec) == 2
    assert spec["a"] is b and "a" in spec and "z" not in spec
    assert spec.defaults() == {"b_s": 1.0, "a": "x"}
    assert b.options == ("x", "y")  # a list given is kept as a tuple: nobody can append to it
    spec.defaults()["a"] = "y"
    assert spec["a"].default == "x"
    with pytest.raises(KeyError, match="no parameter 'z'"):
        spec["z"]
    with pytest.raises(AttributeError):
        spec._params = ()
    with pytest.raises(Exception):
        a.min = -1.0  # a frozen dataclass
    assert spec.only("a").names == ("a",)
    assert a.but(default=2.0).default == 2.0 and a.default == 1.0


def test_messages_name_the_value_and_what_is_allowed_in_plain_words():
    spec = ParamSpec([
        Param("launch_s", "float", 5e-6, label="kernel launch", min=0.0, max=20e-6, unit="s", display=(1e6, "us")),
        Param("ranks", "int", 4, min=2, max=64),
        Param("limit_s", "float", 2.0, label="time limit", min=0.0, min_open=True, unit="s"),
        Param("cache", "choice", "sender", options=("sender", "receiver", None)),
        Param("launch2_s", "float", None, label="launch", min=0.0, max=1.0, unit="s", display=(1e6, "us"), allow_none=True),
    ])
    cases = [
        ({"launch_s": 1e-3}, "kernel launch = 1000 us is out of range: allowed 0 to 20 us"),
        ({"launch_s": math.nan}, "kernel launch must be a finite number, got nan; allowed 0 to 20 us"),
        ({"launch_s": -math.inf}, "kernel launch must be a finite number, got -inf"),
        ({"launch_s": True}, "kernel launch must be a number, got True"),
        ({"launch_s": "3"}, "kernel launch must be a number, got '3'"),
        ({"ranks": 2.5}, "ranks must be a whole number, got 2.5; allowed 2 to 64"),
        ({"ranks": 65}, "ranks = 65 is out of range: allowed 2 to 64"),
        ({"ranks": None}, "ranks is empty; allowed 2 to 64"),
        ({"limit_s": 0.0}, "time limit = 0 s is out of range: allowed more than 0 s"),
        ({"cache": "both"}, "cache: unknown choice 'both'; choose from sender, receiver, none"),
        ({"launch2_s": 2.0}, "launch = 2e+06 us is out of range: allowed 0 to 1000000 us, or empty"),
        ({"nope": 1}, "unknown parameter 'nope'"),
    ]
    for values, words in cases:
        with pytest.raises(HetschedError) as e:
            spec.check(values)
        assert str(e.value).startswith(words), (values, str(e.value))
        assert e.value.field == next(iter(values))
    spec.check({"cache": None, "launch2_s": None, "ranks": 64, "limit_s": 1e-9, "launch_s": 0.0})
    # the caller's own name for a value (a panel's trait) is the error's field
    with pytest.raises(HetschedError) as e:
        spec.check({"ranks": 1}, fields={"ranks": "p"})
    assert e.value.field == "p"


def test_numpy_values_are_numbers_and_numpy_bools_are_not():
    p = Param("n", "int", 4, min=1, max=8)
    p.check(np.int64(3))
    p.check(np.float64(3.0))  # a whole float is a count
    for bad in (np.bool_(True), True, False):
        with pytest.raises(HetschedError, match="must be a number"):
            p.check(bad)
    flag = Param("on", "bool", False)
    flag.check(np.bool_(True))
    with pytest.raises(HetschedError, match="yes or no"):
        flag.check(1)


def test_a_choice_of_booleans_is_not_satisfied_by_numbers():
    p = Param("lockstep", "choice", False, options=(False, True))
    p.check(True)
    for bad in (0, 1, 1.0, "True"):
        assert not p.allows(bad)


# ------------------------------------------------------------------------- the property
_bounds = st.one_of(st.none(), st.integers(-1000, 1000))


@st.composite
def numeric_params(draw):
    kind = draw(st.sampled_from(["int", "float"]))
    lo, hi = draw(_bounds), draw(_bounds)
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    if kind == "float":
        lo = None if lo is None else lo / 8
        hi = None if hi is None else hi / 8
    return Param("x", kind, None, min=lo, max=hi, min_open=draw(st.booleans()) and lo is not None,
                 allow_none=draw(st.booleans()))


_values = st.one_of(st.none(), st.booleans(), st.integers(-2000, 2000), st.floats(allow_nan=True, allow_infinity=True),
                    st.floats(-200, 200).map(lambda x: round(x * 8) / 8), st.text(max_size=3),
                    st.integers(-2000, 2000).map(np.int64))


def _inside(p: Param, v) -> bool:
    """The contract, stated independently of the implementation."""
    if v is None:
        return p.allow_none
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return False
    if not math.isfinite(v):
        return False
    if p.kind == "int" and v != int(v):
        return False
    if p.min is not None and (v <= p.min if p.min_open else v < p.min):
        return False
    return p.max is None or v <= p.max


@settings(max_examples=300, deadline=None)
@given(p=numeric_params(), v=_values)
def test_check_accepts_exactly_the_numbers_inside_the_declared_bounds(p, v):
    assert p.allows(v) == _inside(p, v)
    if not p.allows(v):
        with pytest.raises(HetschedError) as e:
            ParamSpec([p]).check({"x": v})
        assert e.value.field == "x" and str(e.value)


_atoms = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b", "sender", ""]))


@settings(max_examples=200, deadline=None)
@given(options=st.lists(_atoms, min_size=1, max_size=5), v=_atoms)
def test_check_accepts_exactly_the_declared_options(options, v):
    p = Param("c", "choice", options[0], options=options)
    same = any(v is o or (type(v) is type(o) and v == o) for o in options)
    assert p.allows(v) == same


@pytest.mark.parametrize("family", sorted(FAMILY_SPECS))
def test_every_family_spec_is_one_format_and_its_defaults_pass_its_own_check(family):
    spec = FAMILY_SPECS[family]
    assert isinstance(spec, ParamSpec) and len(spec) > 0
    spec.check(spec.defaults())
    for p in spec:
        assert p.label, f"{family}.{p.name} has no label in plain words"
        assert "_" not in p.words or p.words == p.name.replace("_", " ")
        if p.kind in ("int", "float") and p.display:
            assert p.unit, f"{family}.{p.name} is displayed in {p.display[1]} but declares no unit"


def test_the_family_specs_match_what_the_core_accepts():
    # choices are the core's own tables, not copies that could drift
    assert set(pp.PARAMS["schedule"].options) == set(pp.SCHEDULES)
    assert set(pp.PARAMS["grouping"].options) == set(pp.GROUPINGS)
    assert set(mp.PARAMS["objective"].options) == set(mp.OBJECTIVES)
    assert set(mp.PARAMS["policy"].options) == set(mp.LOCALITY_POLICIES)
    assert set(mem.PARAMS["method"].options) == set(mem.METHODS)
    assert set(pt.PARAMS["merge"].options) == set(pt.MERGE_STRATEGIES)
    assert set(gen.PARAMS["generator"].options) == set(gen.SIZINGS)
    # the defaults run: each spec's defaults are accepted by the function they are for
    g = gen.generate(gen.PARAMS["generator"].default, 20, gen.PARAMS["seed"].default)
    d = mp.PARAMS.defaults()
    mp.h2h(g, __import__("hetsched").toy_system(), occupancy_threshold=d["occupancy_threshold"], policy=d["policy"],
           objective=d["objective"], direction=d["direction"], max_passes=d["max_passes"] or None)
    dp = pp.PARAMS.defaults()
    s = pp.make_schedule(dp["schedule"], dp["p"], dp["v"], dp["m"], grouping=dp["grouping"])
    pp.simulate(s, costs=pp.StageCosts.per_rank(f_s=dp["f_s"], b_s=dp["b_s"], chunks=s.v),
                comm={"latency_s": dp["latency_s"], "lockstep": dp["lockstep"]}, cache=dp["cache"])


# ------------------------------------------------------------- no range constants in widgets
#: names the widgets used for bounds the core now declares (issue 21): none may come back
OLD_NAMES = ["SIZE_RANGE", "SEED_RANGE", "LIMITS", "MAX_PRIORITY", "MAX_LAUNCH_S", "_INT_INPUTS", "_FLOAT_INPUTS",
             "_passes_default", "_CORE_PASSES"]
#: panel-only constants that look like bounds but are not a parameter a family declares
NOT_PARAMETERS = {"HOVER_INLINE_MAX", "_MIN_BINARY", "MAX_LISTED", "ILP_TIME_LIMIT_S", "AUTO_ILP_LIMIT_S"}


def _widget_sources() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((ROOT / "widgets").glob("*.py"))}


def test_no_widget_defines_its_own_range_constants_for_a_declared_parameter():
    declared = {p.name for spec in FAMILY_SPECS.values() for p in spec}
    const = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(?::[^=\n]+)?=\s*(.+)$", re.M)
    for fname, src in _widget_sources().items():
        for old in OLD_NAMES:
            assert not re.search(rf"\b{old}\b", src), f"widgets/{fname} still has {old}"
        for name, value in const.findall(src):
            if name in NOT_PARAMETERS or not re.search(r"RANGE|LIMIT|MAX|MIN|BOUND", name, re.I):
                continue
            assert False, f"widgets/{fname}: module constant {name} = {value[:40]} looks like a bound; declare it in the core"
        # a literal (lo, hi) pair keyed by a declared parameter's name: a LIMITS table under another name
        for pname in declared:
            hit = re.search(rf"""["']{re.escape(pname)}["']\s*:\s*\(\s*-?[\d.]+(?:e\d+)?\s*,\s*-?[\d.*]+""", src)
            assert not hit, f"widgets/{fname}: a range for {pname!r} written by hand ({hit.group(0)})"
