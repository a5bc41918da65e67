"""Every ordering method on one graph, side by side (the memory-ordering patent and the compilers' orders).

>>> from hetsched.io.generators import fork_join
>>> compare_orders(fork_join(3, 2))["label"].tolist()[:2]
['given', 'kahn']
"""

from __future__ import annotations

from typing import Callable

import pandas as pd

from ..graph import OpGraph
from ..results import compare_results
from .baselines import BASELINES, inductor_order, order_baseline, xla_order
from .heuristics import order_bfs, order_dfs, order_lifetime_greedy
from .model import OrderResult, lower_bound
from .portfolio import order_patent_heuristic, order_portfolio

__all__ = ["compare_orders"]

_COLUMNS = ["label", "peak_bytes", "vs_lower_bound", "vs_best_compiler", "runtime_s", "status", "chose"]


def compare_orders(graph: OpGraph, methods: dict[str, Callable[[OpGraph], OrderResult]] | None = None, *,
                   long: bool = False) -> pd.DataFrame:
    """Every baseline and our methods on one graph: one row per method.

    Columns: ``label`` (the method), ``peak_bytes, vs_lower_bound, vs_best_compiler, runtime_s, status, chose``,
    where ``vs_best_compiler`` is the peak over the best of the Inductor and XLA choices and
    ``chose`` the order a method settled on (a portfolio names its winner). ``long=True`` gives
    the numbers in the house's long format instead (:func:`hetsched.results.compare_results`:
    ``label, family, metric, value``; the text columns are left out).

    >>> from hetsched.io.generators import fork_join
    >>> df = compare_orders(fork_join(3, 2))
    >>> {"kahn", "inductor", "xla", "heuristic"} <= set(df["label"])
    True
    >>> compare_orders(fork_join(3, 2), long=True).query("label == 'kahn'")["metric"].tolist()
    ['peak_bytes', 'vs_lower_bound', 'vs_best_compiler', 'runtime_s']
    """
    runs: dict[str, Callable[[OpGraph], OrderResult]] = {name: (lambda g, nm=name: order_baseline(g, nm)) for name in BASELINES}
    runs["inductor"] = inductor_order
    runs["xla"] = xla_order
    runs["bfs"] = order_bfs
    runs["dfs"] = order_dfs
    runs["lifetime-greedy"] = order_lifetime_greedy
    runs["patent"] = order_patent_heuristic
    runs["heuristic"] = order_portfolio
    runs.update(methods or {})
    lb = lower_bound(graph)
    results = {k: f(graph) for k, f in runs.items()}
    best_comp = min(results["inductor"].peak_bytes, results["xla"].peak_bytes)
    rows = {k: {"peak_bytes": r.peak_bytes,
                "vs_lower_bound": r.peak_bytes / lb if lb else float("nan"),
                "vs_best_compiler": r.peak_bytes / best_comp if best_comp else float("nan"),
                "runtime_s": r.runtime_s,
                "status": r.status,
                "chose": r.method} for k, r in results.items()}
    frame = compare_results(rows, metrics=_COLUMNS[1:], wide=True)
    return compare_results(frame, family="memory") if long else frame
