"""Shared test configuration: hypothesis profiles and common fixtures."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings

# CI runs the whole suite in one process on 2 cores within its time budget: keep examples modest
# by default and let tests that must see thousands of graphs ask for them explicitly.
settings.register_profile(
    "default",
    max_examples=int(os.environ.get("HETSCHED_HYPOTHESIS_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,
    # No "explain" phase: after a failure (or a pytest-timeout inside an example) it re-runs the
    # failing example under a line tracer, which made one slow property test run for 30+ minutes
    # past its timeout. Shrinking still happens and Hypothesis caps it at 5 minutes.
    phases=[p for p in Phase if p is not Phase.explain],
)
settings.load_profile("default")


@pytest.fixture
def toy():
    """The built-in toy CPU + GPU + FPGA system."""
    from hetsched.io.systems import toy_system

    return toy_system()
