"""Device memory for a partition: every op must fit on the backend it was given.

The patent's marking looks at support and priority only; a backend that runs an op type may still
be too small to hold one op's data. Like the mapping engine's ``working_set`` (the mapping patent), an op
needs its weights, its inputs and its outputs in its backend's memory while it runs. The host is
taken to have ample memory (as in :func:`hetsched.evaluate`). Buffers between backends are not
counted here.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from ..errors import CapacityError
from ..graph import OpGraph
from ..system import System
from .quotient import graph_index

__all__ = ["check_backend_memory"]


def check_backend_memory(graph: OpGraph, assignment: Mapping[str, str], system: System) -> None:
    """Raise :class:`~hetsched.errors.CapacityError` naming the first op (in topological order)
    whose weights + inputs + outputs exceed its backend's ``memory_bytes``.

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
    idx = graph_index(graph)  # cached per graph version: partitioning built it already
    ws = idx.working_set()
    cap_of = np.array([caps.get(assignment[o], np.inf) for o in idx.names], dtype=float)
    over = np.flatnonzero(ws > cap_of)
    if not len(over):
        return
    i = int(over.min())  # first in topological order
    o, b = idx.names[i], assignment[idx.names[i]]
    op = graph._ops[o]
    ins = sum(graph._tensors[t].size_bytes for t in graph._inputs.get(o, ()))
    outs = sum(graph._tensors[t].size_bytes for t in graph._outputs.get(o, ()))
    need = float(ws[i])
    raise CapacityError(
        f"op {o!r} needs {need:.4g} bytes (weights {op.weight_bytes:.4g} + inputs {ins:.4g} + outputs {outs:.4g})"
        f" on backend {b!r}, which holds {caps[b]:.4g} bytes",
        op=o, device=b, need_bytes=need, capacity_bytes=caps[b],
    )
