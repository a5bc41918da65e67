"""Mapping ops to devices: the compute-first mapping patent (H2H), the list-scheduling baselines, and the optimum.

* :func:`map_compute_first`, :func:`optimize_locality`, :func:`remap`, :func:`h2h` — the patent's
  three phases (``docs/patents.md``: Inspur 2023; H2H, Zhang et al., DAC 2022). They minimise the *system
  total latency* (claim 5: the sum of the devices' busy time).
* :func:`heft`, :func:`cpop`, :func:`peft` — Topcuoglu, Hariri & Wu (TPDS 2002); Arabnejad &
  Barbosa (TPDS 2014); built from reusable parts (:data:`PRIORITIES`, :data:`SELECTORS`). They
  minimise the makespan of their own classic model.
* :func:`map_search` (cluster moves, swaps, restarts) and :func:`map_ilp` (a MILP: the optimum, or a
  mapping with a proven bound and gap) — beyond the patent, on either objective.
* :func:`fastest_single_device`, :func:`brute_force`, :func:`compare`; :data:`METHODS` names every
  mapper with what it optimises.

Every mapper returns a :class:`MappingResult` priced by :func:`hetsched.evaluate`. An empty graph
gives an empty mapping with zero metrics.

Where each part lives: the engine every mapper runs on (the clock's prices, may-this-op-run-here,
the memory plan, one move/undo with residency re-decision, the step delta, the occupancy-threshold
residency pass) in :mod:`~hetsched.mapping.engine`; the patent's three phases in
:mod:`~hetsched.mapping.h2h`; the result, its replay and the final evaluation in
:mod:`~hetsched.mapping.result`; the table of mappers by name in :mod:`~hetsched.mapping.methods`.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> r = h2h(chain(4, seed=0), toy_system())
>>> r.phase, len(r.placement.device)
('h2h', 4)
"""

from .engine import LOCALITY_POLICIES, OBJECTIVES
from .h2h import h2h, map_compute_first, optimize_locality, remap
from .baselines import brute_force, fastest_single_device
from .listsched import PRIORITIES, SELECTORS, cpop, downward_rank, heft, list_schedule, optimistic_cost_table, peft, upward_rank
from .search import map_search
from .ilp import map_ilp
from .methods import METHODS, compare, comparison_row
from .result import MappingResult, Trial, evaluate_state, evaluate_trial, state_placement
from .params import PARAMS  # what a panel can offer the user, declared as data (a ParamSpec)

__all__ = [
    "PARAMS",
    "MappingResult",
    "evaluate_state",
    "evaluate_trial",
    "Trial",
    "state_placement",
    "map_compute_first",
    "optimize_locality",
    "remap",
    "h2h",
    "LOCALITY_POLICIES",
    "OBJECTIVES",
    "heft",
    "cpop",
    "peft",
    "list_schedule",
    "upward_rank",
    "downward_rank",
    "optimistic_cost_table",
    "PRIORITIES",
    "SELECTORS",
    "map_search",
    "map_ilp",
    "fastest_single_device",
    "brute_force",
    "compare",
    "comparison_row",
    "METHODS",
]
