"""Device memory for a partition: every op must fit on the backend it was given.

The patent's marking looks at support and priority only; a backend that runs an op type may still
be too small to hold one op's data. Like the mapping engine's ``working_set`` (seed 000), an op
needs its weights, its inputs and its outputs in its backend's memory while it runs. The host is
taken to have ample memory (as in :func:`hetsched.evaluate`). Buffers between backends are not
counted here.
"""

from __future__ import annotations

from typing import Mapping

from ..errors import CapacityError
from ..graph import OpGraph
from ..system import System

__all__ = ["check_backend_memory"]


def check_backend_memory(graph: OpGraph, assignment: Mapping[str, str], system: System) -> None:
    """Raise :class:`~hetsched.errors.CapacityError` naming the first op (in graph order) whose
    weights + inputs + outputs exceed its backend's ``memory_bytes``.

    >>> from hetsched.graph import OpGraph
    >>> from hetsched.system import Device, System
    >>> g = OpGraph(); _ = g.add_op("big", "MatMul"); _ = g.add_tensor("y", 2**45, producer="big")
    >>> s = System([Device("cpu", "cpu"), Device("acc", "npu", memory_bytes=2**20)], host="cpu")
    >>> check_backend_memory(g, {"big": "acc"}, s)
    Traceback (most recent call last):
    ...
    hetsched.errors.CapacityError: op 'big' needs 3.518e+13 bytes (weights 0 + inputs 0 + outputs 3.518e+13) on backend 'acc', which holds 1.049e+06 bytes
    """
    host = system.host
    caps = {b: float(system.device(b).memory_bytes) for b in set(assignment.values()) if b != host}
    if not caps:
        return
    tensors = graph._tensors.values()
    # no op can need more than every weight and every tensor together: most graphs stop here
    if graph.total_weight_bytes + sum(t.size_bytes for t in tensors) <= min(caps.values()):
        return
    ins: dict[str, float] = {}
    outs: dict[str, float] = {}
    for t in tensors:
        s = float(t.size_bytes)
        if t.producer is not None:
            outs[t.producer] = outs.get(t.producer, 0.0) + s
        for c in t.consumers:
            ins[c] = ins.get(c, 0.0) + s
    for o, op in graph._ops.items():
        cap = caps.get(assignment[o])
        if cap is None:
            continue
        w, i, x = float(op.weight_bytes), ins.get(o, 0.0), outs.get(o, 0.0)
        if w + i + x > cap:
            b = assignment[o]
            raise CapacityError(
                f"op {o!r} needs {w + i + x:.4g} bytes (weights {w:.4g} + inputs {i:.4g} + outputs {x:.4g}) on"
                f" backend {b!r}, which holds {cap:.4g} bytes",
                op=o, device=b, need_bytes=w + i + x, capacity_bytes=cap,
            )
