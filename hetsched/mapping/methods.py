"""Every mapper by name (:data:`METHODS`: a plain name, a description and what each optimises) and
the comparison table.

:data:`METHODS` maps a name to a callable, networkx-style: ``METHODS.get(m, m)`` takes a name or a
callable alike; panels read each entry's ``label``, ``description`` and ``optimises`` from here.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> METHODS["heft"].optimises, METHODS["h2h"].optimises, METHODS["h2h"].label
('makespan', 'total_latency', 'h2h (patent)')
>>> compare(chain(3), toy_system(), ["h2h", "search"])[["label", "optimises"]].values.tolist()
[['h2h', 'total_latency'], ['search', 'total_latency']]
>>> r = METHODS["h2h"](chain(3), toy_system())
>>> row = comparison_row(r, "h2h", keep_tensors_resident=True)     # the same mapping, no host round trip
>>> row["total_latency_s"] <= r.metrics["total_latency_s"], row["keep_tensors_resident"]
(True, True)
"""

from __future__ import annotations

import time
from typing import Callable, Sequence

import pandas as pd

from ..cost import CostModel
from ..errors import HetschedError
from ..evaluate import evaluate
from ..graph import OpGraph
from ..results import compare_results
from ..system import System
from .baselines import brute_force, fastest_single_device
from .h2h import h2h, map_compute_first
from .ilp import map_ilp
from .listsched import cpop, heft, peft
from .result import MappingResult
from .search import map_search

__all__ = ["METHODS", "Method", "compare", "comparison_row"]


class Method:
    """A mapper with fixed defaults that passes every other keyword through (and names a bad one).

    ``label`` is its plain name (for a legend or a table), ``optimises`` names the quantity the
    method minimises (``total_latency``, ``makespan``, or ``op_latency`` for compute-first's greedy
    choice); ``description`` says it in one line.

    >>> m = METHODS["h2h_makespan"]
    >>> m.defaults["objective"], "locality" in m.options, m.label
    ('makespan', False, 'h2h, makespan rule')
    """

    def __init__(self, fn: Callable[..., MappingResult], label: str, description: str, optimises: str,
                 **defaults: object) -> None:
        import inspect

        self.fn, self.defaults = fn, defaults
        self.label, self.description, self.optimises = label, description, optimises
        self.options = tuple(p.name for p in inspect.signature(fn).parameters.values()
                             if p.kind is inspect.Parameter.KEYWORD_ONLY)
        self.__name__ = getattr(fn, "__name__", "method")
        self.__doc__ = fn.__doc__

    def __call__(self, graph: OpGraph, system: System, **options: object) -> MappingResult:
        bad = sorted(k for k in options if k not in self.options)
        if bad:
            raise HetschedError(f"{self.__name__} has no option(s) {bad}; it takes {list(self.options)}", field=bad[0])
        return self.fn(graph, system, **{**self.defaults, **options})

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in self.defaults.items())
        return f"<mapping method {self.__name__}{extra}>"


_CLASSIC = ("the makespan of the classic list-scheduling model (data already on the devices, no link "
            "contention); the evaluator then adds the host round trips and contention")

#: name -> mapper ``f(graph, system, *, cost=None, **options)`` (a :class:`Method`); the options are the
#: function's own keyword arguments (an unknown one is an error naming it, never silently dropped).
METHODS: dict[str, Method] = {
    "compute_first": Method(map_compute_first, "compute-first", "the patent's phase 1: each op on the device that "
                            "runs it fastest with device memory cleared (its own latency, greedily)", "op_latency"),
    "h2h": Method(h2h, "h2h (patent)", "the mapping patent (H2H): compute-first, keep data on-chip, one walk of "
                  "single-layer remaps; minimises the system total latency (sum of the devices' busy time)",
                  "total_latency"),
    "h2h_makespan": Method(h2h, "h2h, makespan rule", "h2h with H2H's acceptance rule (both directions): minimises "
                           "the makespan", "makespan", objective="makespan", direction="both"),
    "h2h_plus": Method(h2h, "h2h extended", "h2h extended: remaps in both directions, moves of up to 4 same-device "
                       "layers, repeated walks; system total latency", "total_latency",
                       direction="both", group_size=4, max_passes=None),
    "heft": Method(heft, "HEFT", "HEFT (Topcuoglu 2002): " + _CLASSIC, "makespan"),
    "cpop": Method(cpop, "CPOP", "CPOP (Topcuoglu 2002), critical path on one device: " + _CLASSIC, "makespan"),
    "peft": Method(peft, "PEFT", "PEFT (Arabnejad & Barbosa 2014), optimistic cost table: " + _CLASSIC, "makespan"),
    "fastest_single_device": Method(fastest_single_device, "fastest single device",
                                    "every op on the one device with the lowest makespan", "makespan"),
    "search": Method(map_search, "search", "improvement search from the best of h2h, HEFT and the single devices: "
                     "cluster moves, swaps, residency re-decided after each move, restarts; system total latency",
                     "total_latency"),
    "search_makespan": Method(map_search, "search (makespan)", "the improvement search on the makespan", "makespan",
                              objective="makespan"),
    "ilp": Method(map_ilp, "ILP", "MILP over placement and residency (HiGHS): the optimal system total latency, or "
                  "the best found with a proven bound and gap", "total_latency"),
    "ilp_makespan": Method(map_ilp, "ILP (makespan)", "the MILP on the makespan (the evaluator's op order): optimal, "
                           "or bounded", "makespan", objective="makespan"),
    "brute_force": Method(brute_force, "brute force", "every placement, each with its best residency: the optimal "
                          "system total latency (tiny graphs)", "total_latency", objective="total_latency"),
    "brute_force_makespan": Method(brute_force, "brute force (makespan)", "every placement, simulated: the best "
                                   "makespan over placements (tiny graphs)", "makespan", objective="makespan"),
}

COLUMNS = ["label", "makespan_s", "total_latency_s", "energy_J", "bytes_moved", "runtime_s", "optimises", "status"]


def compare(graph: OpGraph, system: System, methods: Sequence[str | Callable] | None = None, *,
            cost: CostModel | None = None, keep_tensors_resident: bool = False, long: bool = False) -> pd.DataFrame:
    """Run several mappers on one instance, one row each.

    Columns: ``label, makespan_s, total_latency_s, energy_J, bytes_moved, runtime_s`` (all from
    :func:`hetsched.evaluate`), ``optimises`` (the quantity the method minimises, from
    :data:`METHODS`; empty for a callable) and ``status`` (the ILP's ``optimal``/``feasible``/
    ``fallback``, else empty). ``methods`` are names from :data:`METHODS` or callables
    ``f(graph, system, cost=...)`` returning a :class:`MappingResult`. Default: compute-first, h2h,
    HEFT, CPOP, PEFT, fastest single device, the search, and brute force when the graph has at most
    8 ops. An empty graph gives one row of zeros per method. ``keep_tensors_resident=True`` re-times
    each mapping without the host round trip (see :func:`comparison_row`). ``long=True`` gives the
    numbers in the house's long format instead (:func:`hetsched.results.compare_results`:
    ``label, family, metric, value``). A method name given twice (two callables of one name) gets
    a ``#2`` suffix, so every run keeps its row.

    Examples
    --------
    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> compare(chain(3), toy_system(), ["heft", "heft"])["label"].tolist()
    ['heft', 'heft#2']
    >>> sorted(set(compare(chain(3), toy_system(), ["heft"], long=True).metric))[:2]
    ['bytes_moved', 'energy_J']
    """
    if methods is None:
        methods = ["compute_first", "h2h", "heft", "cpop", "peft", "fastest_single_device", "search"]
        if graph.n_ops <= 8:
            methods.append("brute_force")
    rows: dict[str, dict] = {}
    for m in methods:
        f = METHODS.get(m, m)
        if not callable(f):
            raise HetschedError(f"unknown method {m!r}; use one of {sorted(METHODS)} or a callable", field="methods")
        name = m if isinstance(m, str) else getattr(m, "__name__", "custom")
        opt = getattr(f, "optimises", "")
        t0 = time.perf_counter()
        r = f(graph, system, cost=cost)
        label, k = name, 1
        while label in rows:
            k += 1
            label = f"{name}#{k}"
        rows[label] = comparison_row(r, label, optimises=opt, runtime_s=time.perf_counter() - t0,
                                     keep_tensors_resident=keep_tensors_resident)
    frame = compare_results(rows, metrics=COLUMNS[1:], wide=True)
    if long:
        return compare_results(frame, family="mapping").dropna(subset=["value"]).reset_index(drop=True)
    return frame


def comparison_row(result: MappingResult, label: str, *, optimises: str = "", runtime_s: float = float("nan"),
                   keep_tensors_resident: bool = False) -> dict:
    """One row of :func:`compare` for a mapping already computed (the columns of ``COLUMNS``, and more).

    ``keep_tensors_resident=True`` re-times the *same* mapping with the host round trip switched off
    (:func:`hetsched.evaluate`'s option: every tensor stays in its device's memory): a what-if on
    the evaluator's model, not a new mapping (each mapper decided under the round-trip model).
    Memory is not checked in that what-if (kept tensors hold device memory until their last
    reader); ``peak_mem_frac`` (> 1: the mapping would not fit) says whether it would fit.
    Extra keys: ``peak_mem_frac``, ``keep_tensors_resident`` and, for a mapper that ran a solver (the
    ILP), ``bound_s`` and ``gap`` (its :class:`~hetsched.results.SolverRun`'s ``bound`` and ``gap``;
    NaN when it has none).
    """
    m = result.metrics
    if keep_tensors_resident:
        m = evaluate(result.graph, result.system, result.placement, cost=result.cost, order=result.order,
                     contention=result.params.get("contention", True), check_memory=False,
                     keep_tensors_resident=True).metrics
    row = {"label": label, "makespan_s": m["makespan_s"], "total_latency_s": m["total_latency_s"],
           "energy_J": m["energy_J"], "bytes_moved": m["bytes_moved"], "runtime_s": runtime_s, "optimises": optimises,
           "status": result.status, "peak_mem_frac": m.get("peak_mem_frac", float("nan")),
           "keep_tensors_resident": keep_tensors_resident}
    if result.ilp is not None:  # what the solver proved, for the mapping as it returned it
        row["bound_s"] = result.ilp.bound if result.ilp.bound is not None else float("nan")
        row["gap"] = result.ilp.gap if result.ilp.gap is not None else float("nan")
    return row
