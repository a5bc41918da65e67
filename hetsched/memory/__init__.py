"""Operator ordering that minimises peak memory (seed 002).

Implements ``../shared/seeds/002_1bc531f15903fea6.txt`` (an ILP with ``A[e,t]``/``P[e,t]`` under a
user time limit, else a tensor-lifetime-aware BFS and a memory-aware DFS, the lower one fine-tuned
at the peak step), the exact DP of Serenity (MLSys 2020), the orders PyTorch Inductor and XLA ship,
and a lower bound, all judged by one memory model (:mod:`hetsched.memory.model`).

>>> from hetsched.io.generators import randwire_ws
>>> from hetsched.memory import optimize_order, lower_bound
>>> g = randwire_ws(12, seed=0, channels=4, hw=4)
>>> r = optimize_order(g, method="heuristic")
>>> lower_bound(g) <= r.peak_bytes
True
"""

from .baselines import BASELINES, compare_orders, inductor_order, order_baseline, xla_order
from .exact import order_exact
from .heuristics import asap_alap, fine_tune, order_bfs, order_dfs
from .ilp import build_ilp, order_ilp
from .model import OrderResult, check_order, lifetimes, lower_bound, lower_bound_detail, memory_curve, peak_memory
from .optimize import STRATEGIES, optimize_order

__all__ = [
    "OrderResult",
    "peak_memory",
    "memory_curve",
    "lifetimes",
    "check_order",
    "lower_bound",
    "lower_bound_detail",
    "order_bfs",
    "order_dfs",
    "fine_tune",
    "asap_alap",
    "order_ilp",
    "build_ilp",
    "order_exact",
    "optimize_order",
    "STRATEGIES",
    "BASELINES",
    "order_baseline",
    "inductor_order",
    "xla_order",
    "compare_orders",
]
