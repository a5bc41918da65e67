"""The executor patent: sync/async operators, streams, host threads, and a discrete-event executor simulator.

The patent (``docs/patents.md``, Baidu, "调度算子的方法和装置";
PaddlePaddle's standalone executor) schedules a model's operators by whether each is
**asynchronous** (the host launches a kernel and moves on) or **synchronous** (the host must wait:
a CPU op, a blocking device-to-host copy). Kernels of async and sync ops go to different streams
(claim 3), and host threads follow four rules (claims 1, 4, 5): async -> async successor stays in
the current thread; async -> sync successor goes to another thread; a sync op keeps one sync
successor and hands the others out; an async successor of a sync op goes to yet another thread.

This package turns that into plain functions over an :class:`~hetsched.graph.OpGraph`:

* :func:`classify` / :func:`resolve_ops` / :func:`kind_table` -- the kind and device of every op
  (``gpu_async``, ``gpu_sync``, ``cpu_sync``, ``copy_h2d``, ``copy_d2h``, ``copy_h2d_sync``): rules
  (the editable "operator information"), kernel tables (an op may have kernels for several
  devices) and synchronous copy engines;
* :func:`assign_streams` -- ``single``, ``patent`` or ``nimble`` (Kwon et al., NeurIPS 2020);
* :func:`assign_threads` -- ``single``, ``patent`` or ``inline_one`` (TensorFlow's executor);
* :func:`plan_events` / :func:`check_races` -- events only where needed, and a proof that every
  data edge is ordered;
* :func:`simulate` -- host threads, streams, kernel slots and copy engines on the shared
  discrete-event core, returning an :class:`ExecutorResult` (timeline, metrics, dispatch steps);
* :func:`compare_policies` -- serial, multi-stream one thread, the patent, TF inline, Nimble
  streams + patent threads, and the lower bound.

>>> import hetsched.executor as ex
>>> g = ex.graphs.d2h_branch_graph()
>>> cmp = ex.compare_policies(g)
>>> cmp.metrics["patent_vs_one_thread"] > 1.5   # the patent overlaps blocking host work
True
"""

from . import graphs
from .compare import POLICIES, PolicyComparison, compare_policies
from .costs import PRESETS, ExecCosts, executor_system, op_durations, resolve_exec_costs
from .events import check_races, edge_ordering, needs_event, plan_events
from .kinds import (
    ASYNC_KINDS,
    COPY_KINDS,
    DEFAULT_RULES,
    DEVICE_KINDS,
    OP_KINDS,
    SYNC_KINDS,
    ResolvedOps,
    classify,
    device_of_ops,
    is_async,
    kind_table,
    resolve_ops,
)
from .simulate import ExecutorResult, dispatch_frame, lower_bound, rules_fired, simulate, thread_summary
from .spec import PARAMETERS, PARAMS, check_values, simulate_kwargs
from .trace import executor_trace, lane_order
from .streams import STREAM_POLICIES, assign_streams, transitive_reduction_edges
from .threads import (
    THREAD_POLICIES,
    THREAD_RULES,
    InlineOne,
    PatentThreads,
    SingleThread,
    ThreadPlan,
    ThreadRule,
    assign_threads,
    is_fallback,
)

__all__ = [
    "graphs",
    "POLICIES",
    "PolicyComparison",
    "compare_policies",
    "PRESETS",
    "ExecCosts",
    "executor_system",
    "op_durations",
    "resolve_exec_costs",
    "check_races",
    "edge_ordering",
    "needs_event",
    "plan_events",
    "ASYNC_KINDS",
    "COPY_KINDS",
    "DEFAULT_RULES",
    "DEVICE_KINDS",
    "OP_KINDS",
    "SYNC_KINDS",
    "classify",
    "device_of_ops",
    "is_async",
    "kind_table",
    "resolve_ops",
    "ResolvedOps",
    "ExecutorResult",
    "lower_bound",
    "simulate",
    "rules_fired",
    "dispatch_frame",
    "thread_summary",
    "PARAMETERS",
    "PARAMS",
    "check_values",
    "executor_trace",
    "lane_order",
    "simulate_kwargs",
    "STREAM_POLICIES",
    "assign_streams",
    "transitive_reduction_edges",
    "THREAD_POLICIES",
    "THREAD_RULES",
    "is_fallback",
    "InlineOne",
    "PatentThreads",
    "SingleThread",
    "ThreadPlan",
    "ThreadRule",
    "assign_threads",
]
