"""Fuzzing the system YAML loader: mutated bundled systems (as data and as text), random documents, bytes.

Every outcome is a ``HetschedError`` naming the field/device at fault, or a system that keeps
every rule ``docs/formats.md`` states (finite numbers, whole byte counts within the limit, one
link per device pair, integer priorities) and round-trips through ``system_to_dict``.
"""

from __future__ import annotations

import math

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from fuzzing import accepted, mutated, nasty_values, text_edits
from hetsched.io import DATA_DIR, load_system, system_from_dict, system_to_dict
from hetsched.limits import MAX_BYTES

TEXT = (DATA_DIR / "systems" / "h2h_fpga_zoo.yaml").read_text()
BASE = yaml.safe_load(TEXT)


def check_system(s) -> None:
    for d in s.devices.values():
        assert isinstance(d.name, str) and d.name and isinstance(d.kind, str)
        assert isinstance(d.memory_bytes, int) and 0 <= d.memory_bytes <= MAX_BYTES
        for v in (d.mem_bandwidth_Bps, d.launch_overhead_s, d.power_W, d.idle_power_W):
            assert not isinstance(v, bool) and math.isfinite(v) and v >= 0
        assert d.mem_bandwidth_Bps > 0
        assert all(isinstance(k, str) and math.isfinite(v) and v > 0 for k, v in d.peak_flops.items())
    pairs = set()
    for ln in s.links:
        assert math.isfinite(ln.bandwidth_Bps) and ln.bandwidth_Bps > 0 and math.isfinite(ln.latency_s) and ln.latency_s >= 0
        pair = frozenset((ln.src, ln.dst))
        assert len(pair) == 2 and pair not in pairs  # one link per pair of devices
        pairs.add(pair)
    assert all(isinstance(p, int) and p >= 1 for _, _, p in s.support.rows())
    assert isinstance(s.host, str) and s.host in s.devices
    d = system_to_dict(s)
    assert system_to_dict(system_from_dict(d)) == d


def check(d) -> None:
    s = accepted(system_from_dict, d)
    if s is not None:
        check_system(s)


@settings(max_examples=150)
@given(mutated(BASE))
def test_mutated_bundled_system(d):
    check(d)


@settings(max_examples=60)
@given(st.one_of(
    nasty_values(),
    st.fixed_dictionaries({}, optional={"devices": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["a", "b"])},
                                                                                  optional={"memory_bytes": nasty_values(),
                                                                                            "peak_flops": nasty_values(),
                                                                                            "attrs": nasty_values()}),
                                                            max_size=3),
                                        "links": st.lists(st.fixed_dictionaries({"src": st.sampled_from(["a", "b"]),
                                                                                 "dst": st.sampled_from(["a", "b"]),
                                                                                 "bandwidth_Bps": nasty_values()}), max_size=3),
                                        "host": nasty_values(), "support": nasty_values(), "meta": nasty_values(),
                                        "version": nasty_values()}),
))
def test_random_documents(d):
    check(d)


@settings(max_examples=80)
@given(st.one_of(text_edits(TEXT).map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary(max_size=200)))
def test_damaged_files(tmp_path_factory, data):
    p = tmp_path_factory.mktemp("s") / "s.yaml"
    p.write_bytes(data)
    s = accepted(load_system, p)
    if s is not None:
        check_system(s)
