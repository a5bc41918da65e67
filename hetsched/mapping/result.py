"""The result every mapper returns, and how to look at the state after any of its steps.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> from hetsched.mapping import h2h
>>> r = h2h(chain(4, seed=1), toy_system())
>>> st = r.replay(r.n_steps - 1)
>>> st["device"] == dict(r.placement.device)
True
>>> evaluate_state(r, -1) is None    # nothing is mapped before the first step
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..cost import CostModel
from ..evaluate import Evaluation, Placement, evaluate
from ..graph import OpGraph
from ..results import Result, Step
from ..system import System
from ._core import State

__all__ = ["MappingResult", "evaluate_state", "state_placement"]


@dataclass(frozen=True, kw_only=True, eq=False)
class MappingResult(Result):
    """Outcome of a mapper: where each op runs, what stays on-chip, and the decision log.

    Attributes
    ----------
    placement : Placement
        Final op -> device map with resident weights and kept tensors.
    graph, system, cost
        The inputs (later phases such as :func:`~hetsched.mapping.optimize_locality` start from them).
    order : list of str or None
        Global op order the evaluation used (``None``: the graph's topological order). List
        schedulers (HEFT, CPOP, PEFT) set their own.
    phase : str
        Which function produced it (``compute_first``, ``locality``, ``remap``, ``h2h``, ``heft``...).

    ``initial_state`` is ``{"device": {}, "weights_resident": frozenset(), "tensors_resident": frozenset()}``
    for mappers that start from nothing; ``replay(k)`` rebuilds the state after step ``k`` (apply
    each accepted step's ``delta``); :func:`evaluate_state` times it.
    """

    placement: Placement
    graph: OpGraph
    system: System
    cost: CostModel | None = None
    order: Sequence[str] | None = None
    phase: str = ""

    # replay(k): {"device": {...}, "weights_resident": frozenset, "tensors_resident": frozenset}
    def _replay_start(self) -> State:
        return State.from_dict(self.initial_state)

    def _apply(self, state: State, step: Step) -> None:
        state.apply(step.delta)

    def _replay_end(self, state: State) -> dict[str, Any]:
        return state.as_dict()

    def phase_bounds(self) -> dict[str, tuple[int, int]]:
        """``{phase: (first_step, last_step)}`` from each step's ``data["phase"]``."""
        out: dict[str, tuple[int, int]] = {}
        for s in self.steps:
            ph = s.data.get("phase", "")
            a, _ = out.get(ph, (s.index, s.index))
            out[ph] = (a, s.index)
        return out


def state_placement(state: dict[str, Any]) -> Placement:
    """A :class:`~hetsched.evaluate.Placement` from a replayed state."""
    return Placement(state["device"], state.get("weights_resident", ()), state.get("tensors_resident", ()))


def evaluate_state(result: MappingResult, k: int, **options: Any) -> Evaluation | None:
    """Evaluate the state after step ``k`` (for a step slider's Gantt chart).

    While the compute-first walk is half done only the mapped ops are timed (the subgraph they
    induce); before any op is mapped this returns ``None``. ``options`` go to
    :func:`~hetsched.evaluate.evaluate` (memory is not checked by default: an intermediate state
    may be shown even if a later step repairs it).
    """
    st = result.replay(k)
    dev = st["device"]
    if not dev:
        return None
    g = result.graph
    options.setdefault("check_memory", False)
    if len(dev) < g.n_ops:
        g = g.subgraph([o for o in g.topological_order() if o in dev])
        tres = {t for t in st["tensors_resident"] if t in g.tensors}
        return evaluate(g, result.system, Placement(dev, st["weights_resident"], tres), cost=result.cost, **options)
    order = result.order if result.order is not None and k == len(result.steps) - 1 else None
    return evaluate(g, result.system, state_placement(st), cost=result.cost, order=order, **options)
