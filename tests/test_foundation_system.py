"""Devices, links, support tables, systems, system YAML, and the bundled datasheet systems."""

from __future__ import annotations

import re

import pytest
import yaml

from hetsched.errors import FormatError, SystemError_, UnknownNameError, UnsupportedOpError
from hetsched.evaluate import Placement, evaluate
from hetsched.io import bundled_systems, load_system, save_system, system_from_dict, system_to_dict, toy_system
from hetsched.io import generators as gen
from hetsched.resources import bundled_file
from hetsched.system import Device, Link, SupportTable, System
from hetsched.timeline import check_timeline

BUNDLED = ["cpu_gpu_fpga", "gpu_tpu", "h2h_fpga_zoo"]


# ------------------------------------------------------------------ devices and links


@pytest.mark.parametrize(
    "kwargs,field",
    [
        (dict(peak_flops={}), "peak_flops"),
        (dict(peak_flops={"default": 0}), "peak_flops"),
        (dict(peak_flops={"default": float("nan")}), "peak_flops"),
        (dict(peak_flops={"default": "fast"}), "peak_flops"),
        (dict(memory_bytes=-1), "memory_bytes"),
        (dict(mem_bandwidth_Bps=float("nan")), "mem_bandwidth_Bps"),
        (dict(mem_bandwidth_Bps=0), "mem_bandwidth_Bps"),
        (dict(launch_overhead_s=-1e-6), "launch_overhead_s"),
        (dict(power_W=-1), "power_W"),
        (dict(idle_power_W=float("nan")), "idle_power_W"),
    ],
)
def test_device_errors(kwargs, field):
    with pytest.raises(SystemError_) as e:
        Device("d0", "gpu", **kwargs)
    assert (e.value.device, e.value.field) == ("d0", field)


@pytest.mark.parametrize("kwargs,field", [(dict(bandwidth_Bps=0), "bandwidth_Bps"),
                                          (dict(bandwidth_Bps=float("nan")), "bandwidth_Bps"),
                                          (dict(bandwidth_Bps=1.0, latency_s=-1), "latency_s"),
                                          (dict(bandwidth_Bps=1.0, latency_s=float("nan")), "latency_s")])
def test_link_errors(kwargs, field):
    with pytest.raises(SystemError_) as e:
        Link("a", "b", **kwargs)
    assert (e.value.device, e.value.field) == ("a", field)


# ------------------------------------------------------------------ support table


def test_support_table():
    st = SupportTable({"fpga": {"Conv": 1, "Relu": 2}, "gpu": {"*": 2, "Conv": 4}, "cpu": {"*": 3}})
    assert st.candidates("Conv") == ["fpga", "cpu", "gpu"]  # exact beats wildcard: gpu Conv is 4
    assert st.candidates("Relu") == ["fpga", "gpu", "cpu"]
    assert st.candidates("Softmax") == ["gpu", "cpu"]
    assert st.candidates("Relu", enabled=["cpu", "gpu"]) == ["gpu", "cpu"]
    assert st.priority("gpu", "Conv") == 4 and st.priority("fpga", "Softmax") is None
    assert st.priority("nope", "Conv") is None and not st.supports("fpga", "Softmax")
    st2 = st.with_priority("fpga", "Softmax", 1).with_priority("fpga", "Conv", None)
    assert st2.candidates("Softmax")[0] == "fpga" and "fpga" not in st2.candidates("Conv")
    assert st.supports("fpga", "Conv")  # the original is untouched
    assert ("fpga", "Conv", 1) in st.rows() and len(st.rows()) == 5
    assert SupportTable(st.as_dict()) == st and st != st2
    ties = SupportTable({"x": {"*": 1}, "y": {"*": 1}})
    assert ties.candidates("Conv") == ["x", "y"]  # ties in table order


@pytest.mark.parametrize("prio", [-1, "1", True, None, 1.5])
def test_support_table_bad_priority(prio):
    with pytest.raises(SystemError_) as e:
        SupportTable({"gpu": {"Conv": prio}})
    assert (e.value.device, e.value.field) == ("gpu", "Conv")
    with pytest.raises(SystemError_):
        SupportTable({"gpu": {"*": 0}})  # a wildcard of 0 says nothing


def test_zero_excludes_an_op_type_a_wildcard_covers():
    """Issue 15: a grid cell set to 0 on a backend whose support comes from '*' must stop it running that type."""
    st = SupportTable({"gpu0": {"*": 1}, "cpu0": {"*": 2}})
    assert st.lookup("gpu0", "Conv") == (1, "wildcard")
    z = st.with_priority("gpu0", "Conv", 0)
    assert z.candidates("Conv") == ["cpu0"] and z.candidates("Relu") == ["gpu0", "cpu0"]
    assert z.lookup("gpu0", "Conv") == (None, "excluded")  # told apart from "absent"
    assert z.lookup("fpga0", "Conv") == (None, "absent")
    assert st.with_priority("gpu0", "Conv", None) == z
    assert SupportTable(z.as_dict()) == z and ("gpu0", "Conv", 0) in z.rows()  # saved and loaded as 0
    assert z.with_priority("gpu0", "Conv", 3).lookup("gpu0", "Conv") == (3, "exact")


# ------------------------------------------------------------------ systems


def test_system_errors():
    d = [Device("h", "cpu"), Device("g", "gpu")]
    with pytest.raises(SystemError_) as e:
        System([Device("h", "cpu"), Device("h", "gpu")])
    assert e.value.device == "h"
    with pytest.raises(SystemError_):
        System([])
    with pytest.raises(SystemError_) as e:
        System(d, host="zz")
    assert (e.value.device, e.value.field) == ("zz", "host")
    with pytest.raises(SystemError_) as e:
        System(d, [Link("h", "zz", 1.0)])
    assert e.value.device == "zz"
    with pytest.raises(SystemError_) as e:
        System(d, support=SupportTable({"zz": {"*": 1}}))
    assert (e.value.device, e.value.field) == ("zz", "support")
    s = System(d, host="h")
    with pytest.raises(SystemError_) as e:
        s.route("h", "g")  # no link at all
    assert e.value.device == "h" and e.value.details["dst"] == "g"
    with pytest.raises(UnknownNameError) as e:
        s.device("zz")
    assert e.value.device == "zz"


def test_system_routes_and_candidates():
    devs = [Device(n, "cpu" if n == "h" else "gpu") for n in ("h", "a", "b", "c")]
    s = System(devs, [Link("h", "a", 1.0), Link("h", "b", 1.0), Link("b", "c", 1.0)], host="h")
    assert s.route("a", "a") == ()
    assert [ (l.src, l.dst) for l in s.route("a", "h")] == [("h", "a")]
    assert [(l.src, l.dst) for l in s.route("a", "b")] == [("h", "a"), ("h", "b")]  # via the host
    assert [(l.src, l.dst) for l in s.route("a", "c")] == [("h", "a"), ("h", "b"), ("b", "c")]  # fewest hops
    assert s.link("a", "h") is s.link("h", "a")
    assert s.compute_devices == ["h", "a", "b", "c"]
    host_kind = System([Device("h", "host"), Device("g", "gpu")], [Link("h", "g", 1.0)], host="h")
    assert host_kind.compute_devices == ["g"]  # a "host"-kind device runs nothing by default
    t = toy_system()
    assert t.candidates("Conv") == ["gpu0", "fpga0", "cpu0"] and t.candidates("Softmax") == ["gpu0", "cpu0"]
    with pytest.raises(UnsupportedOpError) as e:
        t.require_support([("s1", "Softmax"), ("c1", "Conv")], enabled=["fpga0"])
    assert e.value.op == "s1" and e.value.ops == [("s1", "Softmax")]
    t.require_support([("c1", "Conv")], enabled=["fpga0"])


def test_what_if_copies():
    s = toy_system()
    big = s.with_devices({"gpu0": Device("gpu0", "gpu", memory_bytes=2**40)})
    assert big.device("gpu0").memory_bytes == 2**40 and s.device("gpu0").memory_bytes == 16 * 2**30
    slow = s.with_links([Link("cpu0", "gpu0", 1e9), Link("cpu0", "fpga0", 1e9)])
    assert slow.link("cpu0", "gpu0").bandwidth_Bps == 1e9 and s.link("cpu0", "gpu0").bandwidth_Bps == 16e9
    only_gpu = s.with_support(SupportTable({"gpu0": {"*": 1}}))
    assert only_gpu.compute_devices == ["gpu0"] and s.compute_devices == ["cpu0", "gpu0", "fpga0"]


# ------------------------------------------------------------------ YAML


@pytest.mark.parametrize("name", BUNDLED + ["toy"])
def test_yaml_round_trip_exact(name, tmp_path):
    s = toy_system() if name == "toy" else load_system(name)
    p = tmp_path / "s.yaml"
    save_system(s, p)
    s2 = load_system(p)
    assert system_to_dict(s2) == system_to_dict(s)
    assert s2.support == s.support and s2.host == s.host and s2.device_names == s.device_names
    assert [d for d in s2.devices.values()] == [d for d in s.devices.values()]
    save_system(s2, tmp_path / "s2.yaml")
    assert (tmp_path / "s2.yaml").read_text() == p.read_text()


def doc():
    return system_to_dict(toy_system())


BAD_YAML = {
    "version": (lambda d: d.update(version=2), FormatError, {"field": "version"}),
    "format": (lambda d: d.update(format="other"), FormatError, {"field": "format"}),
    "top_field": (lambda d: d.update(colour=1), FormatError, {"field": "colour"}),
    "device_field": (lambda d: d["devices"][1].update(tflops=3), FormatError, {"field": "tflops", "device": "gpu0"}),
    "device_no_name": (lambda d: d["devices"][1].pop("name"), FormatError, {"field": "name"}),
    "not_a_number": (lambda d: d["devices"][1].update(memory_bytes="80 GB"), FormatError, {"field": "memory_bytes"}),
    "peak_not_number": (lambda d: d["devices"][1]["peak_flops"].update(conv="x"), FormatError,
                        {"field": "peak_flops.conv"}),
    "negative": (lambda d: d["devices"][1].update(mem_bandwidth_Bps=-1), SystemError_,
                 {"field": "mem_bandwidth_Bps", "device": "gpu0"}),
    "link_field": (lambda d: d["links"][0].update(speed=1), FormatError, {"field": "speed"}),
    "link_missing": (lambda d: d["links"][0].pop("bandwidth_Bps"), FormatError, {"field": "links"}),
    "link_unknown_device": (lambda d: d["links"][0].update(dst="zz"), SystemError_, {"device": "zz"}),
    "support_not_map": (lambda d: d.update(support=[1]), FormatError, {"field": "support"}),
    "support_unknown_device": (lambda d: d["support"].update(zz={"*": 1}), SystemError_, {"device": "zz"}),
    "support_bad_priority": (lambda d: d["support"]["gpu0"].update({"*": 0}), SystemError_,
                             {"device": "gpu0", "field": "*"}),
    "host": (lambda d: d.update(host="zz"), SystemError_, {"field": "host"}),
    "duplex": (lambda d: d["links"][0].update(duplex="no"), FormatError, {"field": "duplex"}),
}


@pytest.mark.parametrize("case", sorted(BAD_YAML))
def test_bad_system_documents(case):
    fn, exc, attrs = BAD_YAML[case]
    d = doc()
    fn(d)
    with pytest.raises(exc) as e:
        system_from_dict(d)
    for k, v in attrs.items():
        assert getattr(e.value, k) == v, (k, getattr(e.value, k))


def test_bad_yaml_files(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("devices: [name: {")
    with pytest.raises(FormatError) as e:
        load_system(p)
    assert e.value.field == "<yaml>"
    with pytest.raises(FormatError) as e:
        load_system(tmp_path / "none.yaml")
    assert e.value.field == "path"
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(FormatError) as e:
        load_system(tmp_path / "list.yaml")
    assert e.value.field == "<root>"


# ------------------------------------------------------------------ bundled systems


def test_bundled_systems_are_listed():
    assert set(BUNDLED) <= set(bundled_systems())


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_system_shape(name):
    s = load_system(name)
    assert s.host == "cpu0" and s.name == name
    assert len(s.devices) >= 3 and len(s.compute_devices) >= 3
    for d in s.device_names:
        if d != s.host:
            assert s.route(s.host, d)  # every device is reachable from the host
    # every op type an ONNX CNN or transformer uses runs somewhere
    s.require_support([(t, t) for t in ("Conv", "MatMul", "Gemm", "Relu", "Add", "Softmax", "LSTM",
                                        "LayerNormalization", "Concat", "MaxPool")])


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_system_numbers_cite_a_source(name):
    """Every numeric field carries a comment on its line or on the lines right after it."""
    lines = bundled_file("systems", name).read_text().splitlines()
    numeric = re.compile(r"(memory_bytes|mem_bandwidth_Bps|launch_overhead_s|power_W|idle_power_W|"
                         r"bandwidth_Bps|peak_flops|conv|matmul|default)\s*:\s*[-0-9.]")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("#") or not numeric.search(line):
            continue
        nxt = lines[i + 1].lstrip() if i + 1 < len(lines) else ""
        assert "#" in line or nxt.startswith("#"), f"{name}.yaml line {i + 1} has no source: {line!r}"
    text = "\n".join(lines)
    assert "Sources" in text and "ASSUMED" in text


def test_bundled_support_tables_differ_per_accelerator():
    s = load_system("h2h_fpga_zoo")
    accs = [d for d in s.device_names if d.startswith("fpga")]
    assert len(accs) >= 3
    tables = [frozenset(s.support.as_dict()[a].items()) for a in accs]
    assert len(set(tables)) == len(tables)
    assert s.candidates("Conv")[0].startswith("fpga_cnn") and s.candidates("LSTM")[0] == "fpga_lstm0"
    assert s.candidates("Softmax")[0] == "fpga_gen0"  # the generic one covers what specialists lack


@pytest.mark.parametrize("name", BUNDLED)
@pytest.mark.parametrize("graph", ["resnet", "transformer", "topcuoglu"])
def test_bundled_system_evaluates_a_generated_graph(name, graph):
    s = load_system(name)
    g = {
        "resnet": lambda: gen.resnet_like(n_stages=2, blocks_per_stage=1, channels=16, hw=16),
        "transformer": lambda: gen.transformer_block(seq=16, d_model=64, heads=4),
        "topcuoglu": lambda: gen.topcuoglu(40, seed=3),
    }[graph]()
    # best-priority device for every op, with weights and intermediates resident
    best = {o: s.candidates(g.op(o).op_type)[0] for o in g}
    ev = evaluate(g, s, Placement(best, weights_resident=set(g), tensors_resident=set(g.tensors)))
    cap = {d: dv.memory_bytes for d, dv in s.devices.items() if d != s.host}
    check_timeline(ev.timeline, g, capacity_bytes=cap)
    m = ev.metrics
    assert m["makespan_s"] > 0 and m["total_latency_s"] > 0 and m["energy_J"] > 0
    host_only = evaluate(g, s, {o: "cpu0" for o in g})
    assert host_only.metrics["bytes_moved"] == 0
    check_timeline(host_only.timeline, g)


def test_systems_doctest_example():
    assert load_system("cpu_gpu_fpga").host == "cpu0"
    y = yaml.safe_load(bundled_file("systems", "cpu_gpu_fpga").read_text())
    assert y["devices"][1]["mem_bandwidth_Bps"] == 1.935e12  # A100 80GB PCIe datasheet
