"""The flows that start with the ILP (the memory-ordering patent's S2): the patent's own, and ours warm-started.

The memory-ordering patent (``docs/patents.md``, claim 1, S1-S4): turn the ordering task into an
integer linear programme and solve it; *if the solve finishes within the user's time limit*, output
its order; otherwise run the tensor-lifetime-aware BFS and the memory-aware DFS (S3), take the one
with the lower peak and fine-tune it at the peak step (S4).

* :func:`order_patent` is that flow, in that order: the ILP (the patent's ``A[e,t]``/``P[e,t]``
  formulation by default) gets the whole time limit, without a warm start; a proof of optimality
  ends the flow, anything else (time-out, an unproven incumbent, a solver failure) goes on to S3
  and S4, which run after the limit, as in the patent. One departure: a programme above
  ``ILP_MAX_VARS`` variables is not built (building it alone would outlast any sensible limit
  and exhaust memory); the step log says so.
* :func:`order_auto` is ours: S3 + S4 first, then the ILP warm-started with that order (which
  also bounds the peak from above) within what is left of the limit; the lower of the two wins.
  It never returns an order worse than the patent heuristic's and proves optimality more often.

This module sits above :mod:`~hetsched.memory.ilp` and :mod:`~hetsched.memory.portfolio` (the ILP
warm-starts from the portfolio), so nothing in the memory family imports in a circle.

>>> from hetsched.io.generators import fork_join
>>> r = order_patent(fork_join(2, 2), time_limit_s=20)
>>> r.status, r.steps[0].action, r.ilp.status
('optimal', 'ilp', 'optimal')
"""

from __future__ import annotations

import time
from typing import Any

from ..graph import OpGraph
from ..results import SolverRun, StepLog
from .ilp import FORMULATIONS, order_ilp
from .model import Mem, OrderResult, check_time_limit, compile_graph, lower_bound, make_result
from .portfolio import patent_s3_s4, stop_at_bound

__all__ = ["order_patent", "order_auto", "ILP_MAX_VARS", "ilp_vars"]

ILP_MAX_VARS = 400_000  # above this many ILP variables the flows skip the solver (it could not finish)


def ilp_vars(graph: OpGraph, formulation: str = "patent") -> int:
    """Variables the ILP of ``formulation`` has: the peak, and per step ``n`` op variables plus
    ``S`` residency variables, plus (patent) one creation variable per produced storage.

    >>> from hetsched.io.generators import chain
    >>> ilp_vars(chain(3), "patent"), ilp_vars(chain(3), "cumulative")
    (31, 22)
    """
    return _ilp_vars(compile_graph(graph), formulation)


def _ilp_vars(m: Mem, formulation: str) -> int:
    made = int((m.prod >= 0).sum()) if formulation == "patent" else 0
    return m.n * (m.n + m.S + made) + 1


def _ilp_step(run: SolverRun, order: tuple[str, ...] = ()) -> dict[str, Any]:
    """The S2 step's fields (``log.add(**fields)``): what the ILP attempt said (``data["ilp"]``), or why it
    was skipped; the numbers stay in the one :class:`~hetsched.results.SolverRun`."""
    form, lim = run.model, run.time_limit_s
    found = run.status in ("optimal", "feasible")
    if run.status == "skipped":
        reason = f"S2 skipped: {run.note}"
    elif run.proven:
        reason = f"S2: the {form} ILP finished within {lim:g} s and proved its order optimal"
    else:
        reason = f"S2: the {form} ILP did not finish within {lim:g} s ({_STATUS_WORDS.get(run.status, run.status)}): go on to S3"
    return dict(action="ilp", subject=f"ILP ({form})", before=None, after=run.incumbent if found else None,
                accepted=run.proven, reason=reason, delta={"order": tuple(order)} if run.proven else {},
                data={"phase": "S2", "ilp": run})


#: a solver run's status in the words of the patent's flow (why S2 did not end it)
_STATUS_WORDS = {"feasible": "time limit (incumbent not proven)", "killed": "time limit (process killed)",
                 "no solution": "no solution", "failed": "solver failed"}


def order_patent(
    graph: OpGraph,
    *,
    time_limit_s: float = 10.0,
    formulation: str = "patent",
    solver: str | None = None,
    ilp: bool = True,
) -> OrderResult:
    """The patent's flow: S2 (the ILP within the time limit), else S3 + S4, exactly in the patent's order.

    Parameters
    ----------
    graph : OpGraph
    time_limit_s : float
        The user's limit on the ILP (S2). S3 and S4 run after it; S4's fine-tune gets the same limit
        again (the patent sets none; a bound keeps large graphs from fine-tuning for minutes).
    formulation : {"patent", "cumulative"}
        The ILP; the patent's ``A[e,t]``/``P[e,t]`` model by default.
    solver : {"highs", "cbc"}, optional
    ilp : bool
        ``False`` skips S2 (the patent's heuristic path alone, ``method="patent-heuristic"``).

    Returns
    -------
    OrderResult
        ``status="optimal"`` when the ILP proved its order, else ``"heuristic"``; ``ilp`` is what
        the ILP said (:class:`~hetsched.results.SolverRun`: status, bound, gap, size, solve time;
        ``"skipped"`` above ``ILP_MAX_VARS``). Step 0 is the ILP attempt (``data["ilp"]``, the
        same object), then the BFS picks, the DFS pushes and pops, the pick of the lower order and
        the fine-tune moves.

    >>> from hetsched.io.generators import layered
    >>> r = order_patent(layered(6, 3, seed=0), time_limit_s=0.2)   # too short to prove anything
    >>> r.status, r.steps[0].accepted, r.steps[-1].data["phase"] in ("S4", "S4-pick")
    ('heuristic', False, True)
    """
    t0 = time.perf_counter()
    time_limit_s = check_time_limit(time_limit_s)
    m = compile_graph(graph)
    params = {"time_limit_s": time_limit_s, "formulation": formulation, "solver": solver, "ilp": ilp}
    # S4 has no limit in the patent; here it gets the user's limit again (after S2 spent its own),
    # so a large graph cannot fine-tune for minutes
    if not ilp:
        return patent_s3_s4(m, t0, params=params, time_limit_s=time_limit_s)
    if formulation not in FORMULATIONS:
        from ..errors import HetschedError

        raise HetschedError(f"unknown ILP formulation {formulation!r}; choose one of {FORMULATIONS}", field="formulation")
    nv = _ilp_vars(m, formulation)
    if nv > ILP_MAX_VARS:
        why = (f"the {formulation} ILP would have {nv} variables (> {ILP_MAX_VARS}); building it alone would "
               f"outlast the {time_limit_s:g} s limit")
        run = SolverRun("skipped", model=formulation, time_limit_s=time_limit_s, n_vars=nv, note=why)
        lead = StepLog()
        lead.add(**_ilp_step(run))
        return patent_s3_s4(m, t0, why_prefix=f"S2 skipped: {why}; ", lead_steps=lead, params=params, ilp=run,
                             time_limit_s=time_limit_s)
    r = order_ilp(graph, time_limit_s=time_limit_s, formulation=formulation, solver=solver, warm_start=None)
    lead = StepLog()
    lead.add(**_ilp_step(r.ilp, r.order))
    if r.status == "optimal":
        return make_result(m, m.to_idx(r.order), method=f"patent:ilp-{formulation}", status="optimal", t0=t0,
                            ilp=r.ilp, bound=r.bound_bytes, steps=lead, initial=m.topo(), params=params,
                            why=f"S2: the ILP finished within {time_limit_s:g} s and proved optimality")
    said = _STATUS_WORDS.get(r.ilp.status, r.ilp.status)
    return patent_s3_s4(m, t0, why_prefix=f"S2: {said} after {time_limit_s:g} s; ", lead_steps=lead,
                         params=params, ilp=r.ilp, bound=r.bound_bytes if r.status != "fallback" else None,
                         time_limit_s=time_limit_s)


def order_auto(
    graph: OpGraph,
    *,
    time_limit_s: float = 10.0,
    formulation: str = "cumulative",
    solver: str | None = None,
) -> OrderResult:
    """Ours, fallback then ILP: the patent's S3 + S4 first, then the ILP warm-started with that order, within the limit.

    When the heuristic order already reaches :func:`~hetsched.memory.lower_bound` it is optimal and
    the ILP is skipped (a ``stop`` step says so; ``ilp.status == "skipped"``). Otherwise the
    heuristic order bounds the ILP's peak from above and is handed to the solver as a start;
    when the solver proves optimality its order is returned (``status="optimal"``), else the lower
    of the solver's incumbent and the heuristic order. Above ``ILP_MAX_VARS`` variables the ILP is
    skipped (``why`` says so). ``ilp`` is what the solver said, as in :func:`order_patent`.

    >>> from hetsched.io.generators import fork_join
    >>> order_auto(fork_join(2, 2), time_limit_s=20).status
    'optimal'
    """
    t0 = time.perf_counter()
    time_limit_s = check_time_limit(time_limit_s)
    m = compile_graph(graph)
    params = {"time_limit_s": time_limit_s, "formulation": formulation, "solver": solver}
    nv = _ilp_vars(m, formulation)
    if nv > ILP_MAX_VARS:
        note = f"the {formulation} ILP would have {nv} variables (> {ILP_MAX_VARS}), it cannot finish in {time_limit_s:g} s"
        return patent_s3_s4(m, t0, why_prefix=f"S2 skipped: {note}; ", time_limit_s=time_limit_s, params=params,
                             ilp=SolverRun("skipped", model=formulation, time_limit_s=time_limit_s, n_vars=nv, note=note))
    heur = patent_s3_s4(m, t0)
    lb = lower_bound(graph)
    if heur.peak_bytes <= lb:  # issue 28: already optimal, the solver could only spend the time limit
        note = f"the heuristic order reaches the lower bound ({lb} B): it is optimal, the ILP cannot improve it"
        return stop_at_bound(m, t0, StepLog(heur.steps), heur.method, list(m.to_idx(heur.order)), lb,
                              m.to_idx(heur.initial_state["order"]).tolist(), skipped="the ILP", params=params,
                              why=f"S3/S4: {heur.why}; {note}",
                              ilp=SolverRun("skipped", model=formulation, time_limit_s=time_limit_s, note=note))
    r = order_ilp(graph, time_limit_s=max(0.05, time_limit_s - (time.perf_counter() - t0)), formulation=formulation,
                  solver=solver, warm_start=heur)
    better = r.status == "optimal" or (r.status == "feasible" and r.peak_bytes < heur.peak_bytes)
    s = _ilp_step(r.ilp)
    # the ILP ran after the heuristic here: its step closes the log and, when it wins, sets the order
    reason = (s["reason"].replace("go on to S3", "the heuristic order stays") if not better else
              s["reason"] if r.status == "optimal" else
              f"S2: the warm-started ILP's incumbent ({r.peak_bytes} B) is below the heuristic's ({heur.peak_bytes} B)")
    steps = StepLog(heur.steps)
    steps.add(**{**s, "accepted": better, "reason": reason, "delta": {"order": tuple(r.order)} if better else {}})
    initial = m.to_idx(heur.initial_state["order"]).tolist()
    if r.status == "optimal":
        return make_result(m, m.to_idx(r.order), method=r.method, status="optimal", t0=t0, ilp=r.ilp,
                            bound=r.bound_bytes, why=f"S2: the warm-started ILP finished within {time_limit_s:g} s and "
                                                     f"proved optimality", params=params, steps=steps, initial=initial)
    pick = r if better else heur
    return make_result(
        m, m.to_idx(pick.order), method=pick.method, status=pick.status, t0=t0, ilp=r.ilp, bound=r.bound_bytes,
        steps=steps, initial=initial,
        why=f"S2: the ILP did not finish within {time_limit_s:g} s ({r.why}); S3/S4: {heur.why}"
            + ("; the solver's incumbent was lower and is kept" if better else ""),
        params=params,
    )
