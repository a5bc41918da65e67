"""Host-side overheads of an executor, and the device durations of every op (via the CostModel).

Kernel, copy and CPU-op durations always come from a :class:`~hetsched.cost.CostModel` (the
roofline default on a CPU + GPU system, or any model you pass). What a cost model does not know is
what the *host* pays to drive the device; :class:`ExecCosts` holds those numbers, with presets:

``"cuda"`` (default), sources:
  * ``dispatch_s = 3 us`` -- per-op interpreter overhead (shape inference, allocation, kernel
    selection). Kwon et al. (Nimble, NeurIPS 2020, fig. 1/table 1) measure framework overheads of
    a few microseconds per op on top of the launch; TF/PyTorch eager are higher (see ``"eager"``).
  * ``launch_s = 5 us`` -- ``cudaLaunchKernel`` host cost, the figure NVIDIA quotes for kernel launch
    overhead (CUDA C++ Best Practices Guide; also Nimble section 2, "a few microseconds").
  * ``event_record_s = event_wait_s = 1 us`` -- ``cudaEventRecord`` / ``cudaStreamWaitEvent`` host
    calls (order of a microsecond: lightweight driver calls).
  * ``event_sync_s = 1 us`` -- returning from ``cudaEventSynchronize`` once the event has fired.
  * ``wakeup_s = 5 us`` -- waking a sleeping worker thread (futex wake + context switch: a few
    microseconds on Linux, e.g. the measurements in "How long does it take to make a context
    switch?", Tsuna 2010).
  * ``pcie_Bps = 12e9`` -- effective pinned-memory PCIe 3.0 x16 bandwidth (15.75 GB/s theoretical,
    ~12 GB/s measured by NVIDIA's ``bandwidthTest``); latency 5 us per copy.
  * ``max_kernels = 8`` -- kernels a device runs at once. Hardware allows up to 128 concurrent
    kernels (compute capability >= 7.0) but small kernels are what overlap in practice; 8 keeps
    the model conservative. ``copy_engines = 1`` per direction (one H2D and one D2H DMA engine).

``"eager"``: like ``"cuda"`` with 20 us dispatch (Python-level eager frameworks).
``"ideal"``: zero host overheads and no wake-ups: only the device work and dependencies remain.

>>> c = resolve_exec_costs("cuda"); c.launch_s
5e-06
>>> resolve_exec_costs({"launch_s": 1e-5}).launch_s
1e-05
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from ..cost import CostModel, resolve_cost
from ..errors import HetschedError
from ..graph import OpGraph

__all__ = ["ExecCosts", "PRESETS", "resolve_exec_costs", "executor_system", "op_durations"]


@dataclass(frozen=True)
class ExecCosts:
    """Host overheads and device limits of an executor (seconds, bytes/s, counts).

    See the module docstring for the sources of the ``"cuda"`` preset.

    >>> ExecCosts(launch_s=-1.0)
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: executor cost launch_s must be a non-negative number, got -1.0
    """

    dispatch_s: float = 3e-6
    launch_s: float = 5e-6
    event_record_s: float = 1e-6
    event_wait_s: float = 1e-6
    event_sync_s: float = 1e-6
    wakeup_s: float = 5e-6
    pcie_Bps: float = 12e9
    pcie_latency_s: float = 5e-6
    max_kernels: int = 8
    copy_engines: int = 1
    name: str = "custom"

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name == "name":
                continue
            v = getattr(self, f.name)
            if not isinstance(v, (int, float)) or v != v or v < 0:
                raise HetschedError(f"executor cost {f.name} must be a non-negative number, got {v!r}", field=f.name)
        for f in ("max_kernels", "copy_engines"):
            v = getattr(self, f)
            if int(v) != v or v < 1:
                raise HetschedError(f"executor cost {f} must be a positive integer, got {v!r}", field=f)
        if self.pcie_Bps <= 0:
            raise HetschedError("pcie_Bps must be positive", field="pcie_Bps")


PRESETS: dict[str, ExecCosts] = {
    "cuda": ExecCosts(name="cuda"),
    "eager": ExecCosts(dispatch_s=20e-6, name="eager"),
    "ideal": ExecCosts(dispatch_s=0.0, launch_s=0.0, event_record_s=0.0, event_wait_s=0.0, event_sync_s=0.0,
                       wakeup_s=0.0, name="ideal"),
}


def resolve_exec_costs(costs: str | ExecCosts | Mapping[str, Any] | None) -> ExecCosts:
    """A preset name, an :class:`ExecCosts`, or a dict of overrides of the ``"cuda"`` preset.

    >>> resolve_exec_costs("nope")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: unknown executor cost preset 'nope'; choose from ['cuda', 'eager', 'ideal']
    """
    if costs is None:
        return PRESETS["cuda"]
    if isinstance(costs, ExecCosts):
        return costs
    if isinstance(costs, str):
        if costs not in PRESETS:
            raise HetschedError(f"unknown executor cost preset {costs!r}; choose from {sorted(PRESETS)}", field="costs")
        return PRESETS[costs]
    if isinstance(costs, Mapping):
        names = {f.name for f in fields(ExecCosts)}
        bad = [k for k in costs if k not in names]
        if bad:
            raise HetschedError(f"unknown executor cost field(s) {bad}; have {sorted(names)}", field=bad[0])
        return replace(PRESETS["cuda"], **dict(costs), name=str(costs.get("name", "custom")))
    raise HetschedError(f"costs must be a preset name, ExecCosts or dict, got {type(costs).__name__}", field="costs")


def executor_system(costs: ExecCosts | None = None):
    """The default system for executor runs: hetsched's toy CPU + GPU with the preset's PCIe link.

    >>> executor_system().route("cpu0", "gpu0")[0].bandwidth_Bps
    12000000000.0
    """
    from ..io.systems import toy_system
    from ..system import Link

    c = costs or PRESETS["cuda"]
    s = toy_system(host_link_Bps=c.pcie_Bps)
    links = [Link(ln.src, ln.dst, ln.bandwidth_Bps, c.pcie_latency_s, ln.duplex) if "gpu0" in (ln.src, ln.dst) else ln
             for ln in s.links]
    return s.with_links(links)


def op_durations(
    graph: OpGraph,
    kinds: Mapping[str, str],
    devices: Mapping[str, str],
    *,
    cost: CostModel | None = None,
    system=None,
    host: str | None = None,
) -> dict[str, float]:
    """Device (or CPU) time of every op, priced by the cost model.

    ``gpu_*``: ``cost.compute_s(op, device)``; ``cpu_sync``: ``cost.compute_s(op, host)``;
    ``copy_h2d`` / ``copy_h2d_sync``: ``cost.transfer_s(bytes, host, device)`` with the bytes the op writes (reads if it
    writes nothing); ``copy_d2h``: ``cost.transfer_s(bytes, device, host)`` with the bytes it reads.

    >>> from hetsched.io.generators import chain
    >>> g = chain(2); k = {"op0": "gpu_async", "op1": "copy_d2h"}
    >>> d = op_durations(g, k, {"op0": "gpu0", "op1": "gpu0"})
    >>> d["op1"] > 5e-6
    True
    """
    if system is None:
        system = getattr(cost, "system", None) or executor_system()  # a cost file is read against the executor's
    cm = resolve_cost(cost, graph, system)
    host = host or system.host
    ts = graph.tensors
    out: dict[str, float] = {}
    for n, op in graph.ops.items():
        k = kinds[n]
        if k == "cpu_sync":
            out[n] = cm.compute_s(op, host)
        elif k in ("gpu_async", "gpu_sync"):
            out[n] = cm.compute_s(op, devices[n])
        else:
            if k in ("copy_h2d", "copy_h2d_sync"):
                nb = sum(ts[t].size_bytes for t in graph.outputs_of(n)) or sum(ts[t].size_bytes for t in graph.inputs_of(n))
                out[n] = cm.transfer_s(nb, host, devices[n])
            else:
                nb = sum(ts[t].size_bytes for t in graph.inputs_of(n)) or sum(ts[t].size_bytes for t in graph.outputs_of(n))
                out[n] = cm.transfer_s(nb, devices[n], host)
        if not (out[n] >= 0):
            raise HetschedError(f"cost model gave op {n!r} an invalid duration {out[n]!r}", op=n)
    return out
