"""A colour means one thing across the views (issue 22): devices, groups and kinds of work (F/B/I/W,
compute, transfer, wait...) take colours from three disjoint palettes, and no kind colour is one a
device or a group could wear, not even nearly (a compute bar in the first device's blue beside a
graph coloured by device reads as "this runs on that device").

Distances are CIE 1976 L*a*b* distances (sRGB, D65), computed here from the standard formulas.
"""

from __future__ import annotations

import itertools
import math

import pytest

from hetsched.plot.core import GROUP_PALETTE, IDLE, KIND_COLORS, NEUTRAL, NEUTRAL_NAMES, PALETTE, color_map, group_colors
from hetsched.plot.pipeline import ACTION_COLORS

#: the kinds of work proper (the neutral "nothing here" greys are shared on purpose)
KINDS = {k: c for k, c in KIND_COLORS.items() if k not in NEUTRAL_NAMES}
#: distinct enough: more than the device and group palettes keep between their own colours (14.4)
MIN_DELTA_E = 20.0


def _lab(hex_color: str) -> tuple[float, float, float]:
    rgb = [int(hex_color.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb)
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in (x, y, z)]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def _delta_e(a: str, b: str) -> float:
    return math.dist(_lab(a), _lab(b))


def test_lab_conversion_matches_reference_values():
    # white, black and sRGB red (L*a*b* 53.24, 80.09, 67.20)
    assert _lab("#FFFFFF") == pytest.approx((100.0, 0.0, 0.0), abs=0.05)
    assert _lab("#000000") == pytest.approx((0.0, 0.0, 0.0), abs=0.05)
    assert _lab("#FF0000") == pytest.approx((53.24, 80.09, 67.20), abs=0.1)


def test_the_three_palettes_are_disjoint():
    devices, groups = {c.upper() for c in PALETTE}, {c.upper() for c in GROUP_PALETTE}
    kinds = {c.upper() for c in KINDS.values()}
    assert not devices & groups
    assert not kinds & devices, sorted(kinds & devices)
    assert not kinds & groups, sorted(kinds & groups)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_no_kind_colour_looks_like_a_device_group_or_neutral_colour(kind):
    c = KINDS[kind]
    for other in [*PALETTE, *GROUP_PALETTE, NEUTRAL, IDLE]:
        assert _delta_e(c, other) >= MIN_DELTA_E, (kind, c, other, round(_delta_e(c, other), 1))


def test_kinds_that_mean_different_things_look_different():
    assert len({KINDS[k] for k in "FBIW"}) == 4  # forward, backward, input and weight gradients
    distinct = {c.upper(): k for k, c in KINDS.items()}  # compute = F and transfer = send on purpose
    for a, b in itertools.combinations(distinct, 2):
        assert _delta_e(a, b) >= 25, (distinct[a], distinct[b])


def test_pipeline_actions_are_dark_enough_for_white_cell_labels():
    for k in "FBIW":
        assert _lab(ACTION_COLORS[k])[0] <= 55, k


def test_devices_and_groups_handed_out_never_wear_a_kind_colour():
    kinds = {c.upper() for c in KINDS.values()}
    devs = color_map([f"dev{i}" for i in range(len(PALETTE))]).values()
    grps = group_colors([f"group{i}" for i in range(len(GROUP_PALETTE))]).values()
    assert not kinds & {c.upper() for c in devs}
    assert not kinds & {c.upper() for c in grps}
