"""Checked against the textbook: makespan and bubble formulas (Narayanan et al., SC 2021;
Huang et al., 2019; Qi et al., ICLR 2024) and the memory ordering of the grouping policies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hetsched.errors import ScheduleError
from hetsched.pipeline import (
    gpipe,
    interleaved_1f1b,
    one_f_one_b,
    peak_in_flight,
    simulate,
    validate,
    zb_h1,
    zb_h2,
)


@st.composite
def pvm(draw, v_min=1):
    p = draw(st.integers(2, 8))
    v = draw(st.integers(v_min, 4))
    m = draw(st.integers(1, 5 * p))
    return p, v, m


@settings(max_examples=80)
@given(pvm(), st.sampled_from(["balanced", "paddle", "megatron", "torch"]), st.sampled_from([(1.0, 1.0), (1.0, 2.0), (0.5, 1.5)]))
def test_interleaved_reaches_narayanan_makespan(case, grouping, t):
    p, v, m = case
    tf, tb = t
    try:
        s = interleaved_1f1b(p, v, m, grouping=grouping)
    except ScheduleError:
        assert grouping == "torch" and m % max(1, m // p)
        return
    validate(s)
    r = simulate(s, costs={"F": tf, "B": tb}, timeline=False)
    if min(s.meta["groups"]) >= p:
        assert r.metrics["makespan_s"] == pytest.approx((v * m + p - 1) * (tf + tb))
        # Narayanan's bubble time fraction (idle / busy) and the bounded one (idle / (p * makespan))
        assert r.metrics["bubble_ratio"] == pytest.approx((p - 1) / (v * m))
        assert r.metrics["bubble_fraction"] == pytest.approx((p - 1) / (v * m + p - 1))
    else:  # m < p: one short group; never faster than the ideal
        assert r.metrics["makespan_s"] >= (v * m + p - 1) * (tf + tb) - 1e-9


@settings(max_examples=40)
@given(st.integers(2, 8), st.integers(1, 40), st.floats(0.1, 3.0), st.floats(0.1, 3.0))
def test_gpipe_and_1f1b_textbook(p, m, tf, tb):
    for s in (gpipe(p, m), one_f_one_b(p, m)):
        r = simulate(s, costs={"F": tf, "B": tb}, timeline=False)
        # with tB >= tF both reach (m + p - 1)(tF + tB); otherwise the backward wave still bounds it
        assert r.metrics["makespan_s"] >= (m + p - 1) * (tf + tb) - 1e-9 if tb < tf else r.metrics["makespan_s"] == pytest.approx((m + p - 1) * (tf + tb))
    assert peak_in_flight(gpipe(p, m)).max() == m
    assert peak_in_flight(one_f_one_b(p, m)).max() == min(p, m)


@settings(max_examples=30)
@given(st.integers(2, 8), st.integers(2, 5))
def test_zero_bubble_h1_formula(p, k):
    m = k * p
    tf = ti = tw = 1.0
    r1 = simulate(zb_h1(p, m), costs={"F": tf, "I": ti, "W": tw, "B": ti + tw}, timeline=False)
    assert r1.metrics["makespan_s"] == pytest.approx(m * (tf + ti + tw) + (p - 1) * (tf + ti - tw))
    # 1F1B pays (p - 1)(tF + tB) with tB = tI + tW
    r0 = simulate(one_f_one_b(p, m), costs={"F": tf, "B": ti + tw}, timeline=False)
    assert r0.metrics["makespan_s"] == pytest.approx((m + p - 1) * (tf + ti + tw))
    r2 = simulate(zb_h2(p, m), costs={"F": tf, "I": ti, "W": tw, "B": ti + tw}, timeline=False)
    # nothing beats rank p-1 starting at (p-1) tF and doing all its work back to back
    assert r2.metrics["makespan_s"] == pytest.approx(m * (tf + ti + tw) + (p - 1) * tf)


def test_memory_balanced_never_above_the_others():
    """p in 3..8, v in 2..4, m in 2p..5p: balanced is ideal and never holds more activations."""
    n = 0
    for p in range(3, 9):
        for v in range(2, 5):
            for m in range(2 * p, 5 * p + 1):
                b = interleaved_1f1b(p, v, m, grouping="balanced")
                assert min(b.meta["groups"]) >= p  # hence ideal makespan (previous test, and below)
                pb = peak_in_flight(b).max()
                for g in ("paddle", "megatron", "torch"):
                    try:
                        o = interleaved_1f1b(p, v, m, grouping=g)
                    except ScheduleError:
                        continue
                    assert pb <= peak_in_flight(o).max(), (p, v, m, g)
                    n += 1
    assert n > 700
    # spot-check the ideal makespan on a few of them with unit costs
    for p, v, m in [(3, 2, 7), (5, 3, 17), (8, 4, 33)]:
        r = simulate(interleaved_1f1b(p, v, m), costs={"F": 1, "B": 1}, timeline=False)
        assert r.metrics["makespan_s"] == 2 * (v * m + p - 1)


def test_balanced_strictly_better_than_paddle_somewhere():
    # m = 3p - 1: paddle's first group is 2p - 1, balanced's ceil(m / 2)
    p, v, m = 4, 3, 11
    assert peak_in_flight(interleaved_1f1b(p, v, m, grouping="balanced")).max() < peak_in_flight(interleaved_1f1b(p, v, m, grouping="paddle")).max()


@pytest.mark.parametrize("tf,ti,tw", [(1.0, 2.0, 1.0), (1.0, 1.0, 0.5), (2.0, 1.0, 1.0), (1.0, 1.0, 2.0)])
@pytest.mark.parametrize("p,k", [(3, 2), (4, 3), (6, 2)])
def test_zero_bubble_h2_reaches_the_lower_bound_with_unequal_costs(tf, ti, tw, p, k):
    """ZB-H2 reaches one iteration's lower bound m (tF + tI + tW) + (p - 1) tF, and beats ZB-H1
    whenever tI > tW (Qi et al., ICLR 2024: H2's bubble is (p - 1) tW smaller than H1's)."""
    m = k * p
    c = {"F": tf, "I": ti, "W": tw, "B": ti + tw}
    r2 = simulate(zb_h2(p, m), costs=c, timeline=False)
    r1 = simulate(zb_h1(p, m), costs=c, timeline=False)
    lb = m * (tf + ti + tw) + (p - 1) * tf
    assert r2.metrics["makespan_s"] == pytest.approx(lb)
    assert r1.metrics["makespan_s"] == pytest.approx(m * (tf + ti + tw) + (p - 1) * max(tf, tf + ti - tw))
    if ti > tw:
        assert r2.metrics["makespan_s"] < r1.metrics["makespan_s"]
