"""The partition patent: operator-support/priority marking, acyclic merging into aggregated ops, buffered backends.

The patent (``docs/patents.md``) maps a computation graph onto several
backends (cpu, gpu, fpga...) in three steps: mark each op with the highest-priority backend that
supports it (a *mapping list* of backend, op type, priority), merge same-backend neighbours into
*aggregated ops* so each backend is launched fewer times, and put buffers between the backends so
they run as a pipeline. This package implements it and what ONNX Runtime's execution providers,
TVM BYOC and Torch-TensorRT add (fallback backend, cycle-safe global merging, minimum block size),
and a buffered-pipeline simulator on the shared discrete-event core.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> from hetsched.partition import partition_by_support, simulate_buffered
>>> g, s = chain(6), toy_system()
>>> r = partition_by_support(g, s)
>>> sim = simulate_buffered(r, s, n_inputs=8, buffer_depth=2)
>>> sim.metrics["throughput_per_s"] > 0
True
"""

from .buffered import BufferedResult, group_deps, serial_timeline, simulate_buffered
from .compare import BufferSweepResult, PartitionComparison, best_buffer_depth, compare_partitions
from .core import MERGE_STRATEGIES, GroupEdge, MergeContext, PartitionResult, find_cycle_merge, partition_by_support
from .params import PARAMS  # what a panel can offer the user, declared as data (a ParamSpec)
from .support import (
    edit_support,
    load_support_table,
    priorities_from_cost,
    rank_backends,
    save_support_table,
    support_table_frame,
    support_table_from_rows,
)

__all__ = [
    "PARAMS",
    "BufferSweepResult",
    "PartitionComparison",
    "best_buffer_depth",
    "compare_partitions",
    "BufferedResult",
    "group_deps",
    "simulate_buffered",
    "serial_timeline",
    "MERGE_STRATEGIES",
    "GroupEdge",
    "MergeContext",
    "PartitionResult",
    "find_cycle_merge",
    "partition_by_support",
    "load_support_table",
    "save_support_table",
    "support_table_frame",
    "support_table_from_rows",
    "edit_support",
    "rank_backends",
    "priorities_from_cost",
]
