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

import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from ..cost import CostModel
from ..errors import CapacityError
from ..evaluate import Evaluation, Placement, evaluate
from ..graph import OpGraph
from ..results import Result, SolverRun, Step, StepLog
from ..system import System
from .engine import Ctx, State

__all__ = ["MappingResult", "Trial", "evaluate_state", "evaluate_trial", "state_placement", "finish"]


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
    status : str
        What the result claims about its mapping, for a mapper that ran a solver
        (:func:`~hetsched.mapping.map_ilp`: ``optimal``, ``feasible`` or ``fallback``); ``""`` otherwise.
    ilp : SolverRun or None
        What the solver said, for a mapper that ran one (:class:`~hetsched.results.SolverRun`:
        status, bound, gap, the solver's own objective, size, build and solve time).

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
    status: str = ""
    ilp: SolverRun | None = None

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


@dataclass(frozen=True, eq=False)
class Trial:
    """What one step tried, drawn against the state it started from (see :func:`evaluate_trial`).

    Attributes
    ----------
    step : Step
        The step (accepted or refused).
    before, after : Evaluation or None
        The state before the step and the state the step tried (for an accepted step: the state
        after it). ``before`` is ``None`` while nothing is mapped; ``after`` is ``None`` when the
        step was refused before anything was tried (an unsupported op, a working set that does not
        fit): ``why`` then says so.
    busy : pandas.DataFrame
        Per device: ``device, busy_before_s, busy_after_s, compute_before_s, compute_after_s,
        transfer_before_s, transfer_after_s`` (empty when either side is missing).
    moved : dict
        ``{op: (from_device, to_device)}`` the trial moved.
    residency : dict
        The residency changes it made: ``weights_add``, ``weights_remove``, ``tensors_add``,
        ``tensors_remove`` (claim 4: the moved layer's data in the new device's memory).
    why : str
        The step's reason.
    """

    step: Step
    before: Evaluation | None
    after: Evaluation | None
    busy: Any
    moved: dict[str, tuple[str | None, str]]
    residency: dict[str, list[str]]
    why: str


def _evaluate_dict(result: MappingResult, st: dict[str, Any], order: Sequence[str] | None, options: dict) -> Evaluation | None:
    dev = st["device"]
    if not dev:
        return None
    g = result.graph
    if len(dev) < g.n_ops:  # half-way through compute-first: time the ops mapped so far
        g = g.subgraph([o for o in g.topological_order() if o in dev])
        tres = {t for t in st["tensors_resident"] if t in g.tensors}
        return evaluate(g, result.system, Placement(dev, st["weights_resident"], tres), cost=result.cost, **options)
    return evaluate(g, result.system, state_placement(st), cost=result.cost, order=order, **options)


def evaluate_trial(result: MappingResult, k: int, *, before: Evaluation | None = None, after: Evaluation | None = None,
                   **options: Any) -> Trial:
    """The placement step ``k`` tried, evaluated, beside the state before it (for drawing a trial).

    A refused remap trial is logged with the placement it tried and the residency changes it made
    (its ``delta``), so the trial can be drawn although it was not kept: graph colours and the Gantt
    chart of ``after``, per-device busy time before and after (``busy``). For an accepted step
    ``after`` is the state after it; a trial refused before it was priced has no ``after`` and its
    ``busy`` shows the state before twice (the decision changed nothing). ``options`` go to :func:`~hetsched.evaluate.evaluate` (memory
    is not checked by default, as in :func:`evaluate_state`).

    ``before``, ``after``: evaluations the caller already has, each saving one evaluation (a walker
    stepping one decision at a time holds the neighbouring trial): ``before`` of the state before
    step ``k`` (the previous trial's ``after`` when that step was kept, its ``before`` when it was
    refused); ``after`` of the state after step ``k``, used only when step ``k`` was kept (then it is
    the next trial's ``before``). Each must be that state's evaluation with the same options.

    >>> from hetsched.io.generators import layered
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.mapping import h2h
    >>> r = h2h(layered(4, 4, seed=1), toy_system(), direction="both")
    >>> k = next(s.index for s in r.steps if s.action == "remap" and not s.accepted and s.after is not None)
    >>> t = evaluate_trial(r, k)
    >>> bool(abs(t.after.metrics["total_latency_s"] - r.steps[k].after) <= 1e-9 * r.steps[k].after)
    True
    >>> sorted(t.busy.columns)[:2], list(t.moved.values())[0][1] == r.steps[k].data["target"]
    (['busy_after_s', 'busy_before_s'], True)
    >>> t2 = evaluate_trial(r, k + 1, before=t.before)    # step k was refused: the state did not change
    >>> t2.busy.equals(evaluate_trial(r, k + 1).busy)
    True
    """
    if not 0 <= k < len(result.steps):
        raise IndexError(f"step {k} is outside 0..{len(result.steps) - 1}")
    step = result.steps[k]
    options.setdefault("check_memory", False)
    prev = result.replay(k - 1)
    if before is None:
        before = _evaluate_dict(result, prev, None, options)
    delta = step.delta or {}
    moved = {o: (prev["device"].get(o), d) for o, d in dict(delta.get("device", {})).items() if prev["device"].get(o) != d}
    residency = {key: list(delta.get(key, ())) for key in ("weights_add", "weights_remove", "tensors_add", "tensors_remove")}
    if not step.accepted:
        after = None  # a refused trial's placement is no state of the walk: never given
    if after is None and (step.accepted or step.after is not None):
        st = State.from_dict(prev)
        st.apply(delta)
        last = k == len(result.steps) - 1 and step.accepted
        after = _evaluate_dict(result, st.as_dict(), result.order if last else None, options)
    busy = pd.DataFrame()
    if before is not None:
        # a decision that priced nothing leaves the state as it was: its "after" column is the before
        b = before.per_device.set_index("device")
        a = (after if after is not None else before).per_device.set_index("device")
        busy = pd.DataFrame({
            "busy_before_s": b["busy_s"], "busy_after_s": a["busy_s"],
            "compute_before_s": b["compute_s"], "compute_after_s": a["compute_s"],
            "transfer_before_s": b["transfer_s"], "transfer_after_s": a["transfer_s"],
        }).fillna(0.0).rename_axis("device").reset_index()
    return Trial(step, before, after, busy, moved, residency, step.reason)


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
    options.setdefault("check_memory", False)
    order = result.order if result.order is not None and k == len(result.steps) - 1 else None
    return _evaluate_dict(result, result.replay(k), order, options)


def finish(ctx: Ctx, st: State, log: StepLog, *, phase: str, params: Mapping[str, Any],
           initial_state: Mapping[str, Any], order: Sequence[str] | None = None, check_memory: bool = True,
           extra_metrics: Mapping[str, float] | None = None) -> MappingResult:
    """Evaluate a mapper's final state with :func:`hetsched.evaluate` and wrap it; repair memory overflow first.

    The memory plans are conservative, but the evaluator's true peak also counts staged inputs; if a
    device still overflows, the kept tensors it holds a copy of, then the weights resident on it,
    go back to the host (largest first), one logged ``evict`` step each, until it fits. A device
    that overflows with nothing resident raises :class:`~hetsched.errors.CapacityError` naming it.
    """
    t0 = time.perf_counter()
    while True:
        try:
            ev = evaluate(ctx.graph, ctx.system, Placement(st.device, st.w_res, st.t_res), cost=ctx.cost, order=order,
                          contention=ctx.contention, check_memory=check_memory)
            break
        except CapacityError as err:
            d = err.device
            kept = sorted((t for t in st.t_res if d in ctx.footprint(t, st.device)), key=lambda t: (-ctx.size[t], t))
            wts = sorted((o for o in st.w_res if st.device[o] == d), key=lambda o: (-ctx.weight[o], o))
            if kept:
                x, kind, delta = kept[0], "tensor", {"tensors_remove": [kept[0]]}
                st.t_res.discard(x)
            elif wts:
                x, kind, delta = wts[0], "weights", {"weights_remove": [wts[0]]}
                st.w_res.discard(x)
            else:
                raise
            log.add("evict", x, None, None, True, f"device {d} overflows its memory at its peak: {kind} {x!r} goes back to host",
                    delta, data={"phase": "memory_repair", "device": d})
    metrics = {**ev.metrics, **(extra_metrics or {}), "evaluate_s": time.perf_counter() - t0}
    return MappingResult(
        placement=ev.placement, graph=ctx.graph, system=ctx.system, cost=ctx.cost, order=order, phase=phase,
        metrics=metrics, timeline=ev.timeline, steps=log, params=dict(params), initial_state=initial_state,
    )
