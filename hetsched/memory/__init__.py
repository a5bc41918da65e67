"""Operator ordering that minimises peak memory (the memory-ordering patent).

Implements the memory-ordering patent (``docs/patents.md``: an ILP with ``A[e,t]``/``P[e,t]`` under a
user time limit, else a tensor-lifetime-aware BFS and a memory-aware DFS, the lower one fine-tuned
at the peak step: :func:`order_patent`), our portfolio (:func:`order_portfolio`), the exact search
of Serenity (MLSys 2020), the orders PyTorch Inductor and XLA ship, and a lower bound, all judged
by one memory model (:mod:`hetsched.memory.model`).

Modules, bottom up (no module imports one above it): ``model`` (the memory model, the result),
``heuristics`` / ``baselines`` / ``search`` / ``feasible`` (orders), ``portfolio``
(:func:`order_portfolio`, :func:`order_patent_heuristic`), ``ilp`` / ``exact`` (warm-started by the
portfolio), ``patent`` (:func:`order_patent`, :func:`order_auto`: the flows that begin with the
ILP), ``compare`` and ``optimize`` (the by-name dispatcher).

>>> from hetsched.io.generators import randwire_ws
>>> from hetsched.memory import optimize_order, lower_bound
>>> g = randwire_ws(12, seed=0, channels=4, hw=4)
>>> r = optimize_order(g, method="heuristic")
>>> lower_bound(g) <= r.peak_bytes
True
"""

from . import model
from .baselines import BASELINES, inductor_order, order_baseline, xla_order
from .compare import compare_orders
from .exact import order_exact
from .heuristics import asap_alap, fine_tune, order_bfs, order_dfs, order_lifetime_greedy
from .ilp import build_ilp, order_ilp
from .model import *  # noqa: F403 - the memory model, its bound and OrderResult (model.__all__)
from .optimize import METHODS, SOLVER_METHODS, optimize_order
from .patent import order_auto, order_patent
from .portfolio import order_patent_heuristic, order_portfolio
from .params import PARAMS  # what a panel can offer the user, declared as data (a ParamSpec)

__all__ = ["PARAMS", *model.__all__, "order_bfs", "order_dfs", "order_lifetime_greedy", "fine_tune", "asap_alap",
           "order_ilp", "build_ilp", "order_exact", "optimize_order", "order_portfolio", "order_patent",
           "order_patent_heuristic", "order_auto", "METHODS", "SOLVER_METHODS", "BASELINES", "order_baseline",
           "inductor_order", "xla_order", "compare_orders"]
