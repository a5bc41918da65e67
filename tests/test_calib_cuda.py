"""The CUDA calibration path (issue 30): CUDA events around every timed call, the device's own peak and
bandwidth, the GPU in the system file.

Where no CUDA device exists (the CPU build of torch `make venv` installs, CI) the timing logic is
checked with stand-in events that read the host clock; the end-to-end calibration of a real GPU is
skipped with its reason in the summary (`-ra`): it has NOT been run on such a machine."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

import hetsched as hs

torch = pytest.importorskip("torch")

NO_CUDA = ("NO CUDA DEVICE: hetsched.calibrate(device='cuda') -- CUDA-event timing of real kernels, the GPU's "
           "measured peak/bandwidth/launch and gpu0 + its host link in the system file -- is UNVERIFIED on this machine")


class _FakeEvent:
    """A CUDA event that stamps the host clock when recorded (kernels here run synchronously on the CPU)."""

    def __init__(self, enable_timing=False):
        assert enable_timing
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def elapsed_time(self, end):  # milliseconds, as CUDA's
        assert self.t is not None and end.t is not None, "read before both events were recorded"
        return (end.t - self.t) * 1e3


@pytest.fixture
def fake_cuda(monkeypatch):
    syncs = []
    monkeypatch.setattr(torch.cuda, "Event", _FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: syncs.append(1))
    return syncs


def _say_cuda(monkeypatch):
    """torch says a device exists (after anything that would then try to use it was built)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


def test_timed_calls_brackets_each_call_and_synchronises_once(fake_cuda):
    from hetsched.calibrate import timed_calls

    before = []
    ts = timed_calls(lambda: time.sleep(0.002), 3, dev="cuda", before=lambda: before.append(1))
    assert len(ts) == 3 and all(0.0015 < t < 0.5 for t in ts)
    assert len(before) == 3
    assert len(fake_cuda) == 2  # after the untimed first call, then once after all three


def test_node_timer_with_events_reads_them_once_per_run(fake_cuda):
    from hetsched.io.profile import program_inputs, node_timer

    m, x = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()), (torch.randn(2, 8),)
    ep = torch.export.export(m, x)
    gm, flat = program_inputs(ep, x)
    t = node_timer(gm, {"linear", "relu"}, None)
    t.run(*flat)
    t.run(*flat)
    assert {k: len(v) for k, v in t.times.items()} == {"linear": 2, "relu": 2}
    assert all(v > 0 for vs in t.times.values() for v in vs)
    assert len(fake_cuda) == 2


def test_time_torch_and_training_steps_take_the_cuda_clock(fake_cuda, monkeypatch):
    from hetsched.io.profile import time_torch
    from hetsched.io.train_step import time_training_step, training_step
    from hetsched.io.torch_import import load_torch as _load

    m, x = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval(), (torch.randn(2, 8),)
    g = _load(m, x)
    s = training_step(torch.nn.Sequential(torch.nn.Linear(8, 4)), x, optimizer="sgd")
    _say_cuda(monkeypatch)
    p = time_torch(m, x, g, repeats=2, clock="cuda")
    assert p.params["clock"] == "cuda" and p.metrics["iteration_s"] > 0 and p.metrics["match_rate"] == 1.0
    q = time_training_step(s, repeats=2, clock="cuda")
    assert q.metrics["match_rate"] == 1.0 and q.metrics["iteration_s"] > 0


def test_cuda_clock_is_refused_without_a_device(monkeypatch):
    from hetsched.errors import HetschedError
    from hetsched.io.profile import time_torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(HetschedError) as e:
        time_torch(torch.nn.Linear(2, 2), (torch.randn(1, 2),), clock="cuda")
    assert e.value.field == "clock"
    with pytest.raises(HetschedError) as e:
        hs.calibrate(device="cuda")
    assert e.value.field == "device"


def test_the_gpu_and_its_link_in_a_system_file(tmp_path):
    from hetsched.calibrate import gpu_device
    from hetsched.io.systems import save_system
    from hetsched.system import Device, Link, System

    props = SimpleNamespace(name="NVIDIA H200", total_memory=139 * 2**30, multi_processor_count=132, major=9, minor=0)
    gpu = gpu_device(props, 6.0e13, 4.2e12, 4e-6, torch_version="2.13.0", calibrated="today")
    s = System([Device("cpu0", "cpu", {"default": 1e11}, 2**35, 2e10), gpu], [Link("cpu0", "gpu0", 5e10, 8e-6)],
               host="cpu0", name="local-gpu")
    save_system(s, tmp_path / "s.yaml")
    back = hs.load_system(tmp_path / "s.yaml")
    d = back.device("gpu0")
    assert d.kind == "gpu" and d.peak_flops_for("MatMul") == 6.0e13 and d.mem_bandwidth_Bps == 4.2e12
    assert d.attrs["gpu"] == "NVIDIA H200" and d.attrs["compute_capability"] == "9.0"
    assert back.route("cpu0", "gpu0")[0].latency_s == 8e-6


@pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)
def test_calibrate_a_real_gpu(tmp_path):  # pragma: no cover - needs a GPU
    import warnings

    m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = hs.calibrate([(m, (torch.randn(64, 512),), "mlp")], holdout=(), device="cuda", repeats=5, runs=1,
                         sweep="quick", system_name="gpu-local", system_path=tmp_path / "s.yaml",
                         cost_path=tmp_path / "c.yaml")
    gpu = r.system.device("gpu0")
    assert gpu.kind == "gpu" and gpu.peak_flops_for("Gemm") > 1e12 and gpu.mem_bandwidth_Bps > 1e11
    assert r.system.route("cpu0", "gpu0")[0].bandwidth_Bps > 1e9
    assert "gpu0" in r.cost.devices and r.profiles["mlp"].params["clock"] == "cuda"
    c = hs.calibrate.compare(r.profiles["mlp"], r.cost, r.system)
    assert 0.5 < c.metrics["e2e_ratio"] < 2
