"""Mapping ops to devices: the seed-000 patent (H2H) and the list-scheduling baselines.

* :func:`map_compute_first`, :func:`optimize_locality`, :func:`remap`, :func:`h2h` — the patent's
  three phases (``../shared/seeds/000_023dd0683ad424ca.txt``; H2H, Zhang et al., DAC 2022).
* :func:`heft`, :func:`cpop`, :func:`peft` — Topcuoglu, Hariri & Wu (TPDS 2002); Arabnejad &
  Barbosa (TPDS 2014); built from reusable parts (:data:`PRIORITIES`, :data:`SELECTORS`).
* :func:`fastest_single_device`, :func:`brute_force`, :func:`compare`.

Every mapper returns a :class:`MappingResult` priced by :func:`hetsched.evaluate`.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> r = h2h(chain(4, seed=0), toy_system())
>>> r.phase, len(r.placement.device)
('h2h', 4)
"""

from .h2h import LOCALITY_POLICIES, OBJECTIVES, h2h, map_compute_first, optimize_locality, remap
from .baselines import METHODS, brute_force, compare, fastest_single_device
from .listsched import PRIORITIES, SELECTORS, cpop, downward_rank, heft, list_schedule, optimistic_cost_table, peft, upward_rank
from .result import MappingResult, Trial, evaluate_state, evaluate_trial, state_placement

__all__ = [
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
    "fastest_single_device",
    "brute_force",
    "compare",
    "METHODS",
]
