"""Simple and exact baselines, and the comparison table.

* :func:`fastest_single_device` — everything on the one device that runs the graph fastest (ops
  it cannot run go to their fastest supporting device).
* :func:`brute_force` — every placement (each op on each device that supports it), each with the
  same greedy locality pass as the heuristics, timed by the same model; exact over placements for
  the evaluator's default op order. ``objective="total_latency"`` uses a depth-first branch and
  bound on the additive terms (so 10-op graphs on 4 devices stay fast).
* :func:`compare` — one tidy row per method.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> g, s = chain(4, seed=2), toy_system()
>>> bf = brute_force(g, s, objective="total_latency")
>>> bf.metrics["total_latency_s"] <= h2h(g, s).metrics["total_latency_s"] * (1 + 1e-9)
True
"""

from __future__ import annotations

import itertools
import time
from typing import Callable, Sequence

import pandas as pd

from ..cost import CostModel
from ..errors import HetschedError, Infeasible
from ..graph import OpGraph
from ..system import System
from ._core import Ctx, State
from .h2h import EMPTY_STATE, OBJECTIVES, _Log, _locality, finish, h2h, map_compute_first
from .listsched import cpop, heft, peft
from .result import MappingResult

__all__ = ["fastest_single_device", "brute_force", "compare", "METHODS"]


class _NullLog(_Log):
    def add(self, *a, **k) -> None:  # brute force times thousands of states: log nothing
        pass


def _with_locality(ctx: Ctx, device: dict[str, str], threshold: float) -> State:
    st = State(dict(device))
    _locality(ctx, st, _NullLog(), threshold, "greedy", 0.0)
    return st


def _score(ctx: Ctx, st: State, objective: str) -> float:
    return ctx.total_latency(st) if objective == "total_latency" else ctx.simulate(st)[0]


def fastest_single_device(graph: OpGraph, system: System, *, cost: CostModel | None = None, locality: bool = True,
                          occupancy_threshold: float = 0.9, objective: str = "makespan") -> MappingResult:
    """Everything on one device: try each compute device, keep the best on ``objective``.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> r = fastest_single_device(chain(3), toy_system())
    >>> len(set(r.placement.device.values()))
    1
    """
    if objective not in OBJECTIVES:
        raise HetschedError(f"unknown objective {objective!r}; choose from {list(OBJECTIVES)}", field="objective")
    ctx = Ctx(graph, system, cost)
    ctx.require_support()
    log = _Log()
    best = None
    for d in system.compute_devices:
        dev = {}
        for o in ctx.order:
            c = ctx.candidates(o)
            dev[o] = d if d in c else min(c, key=lambda x: (ctx.comp(o, x), c.index(x)))
        st = _with_locality(ctx, dev, occupancy_threshold) if locality else State(dev)
        v = _score(ctx, st, objective)
        better = best is None or v < best[0]
        log.add("try_device", d, best[0] if best else None, v, better,
                f"{objective.replace('_', ' ')} {v * 1e3:.4g} ms" + (" (best so far)" if better else ""),
                {"device": dev}, phase="single_device")
        if better:
            best = (v, d, dev)
    v, d, dev = best
    st = State(dict(dev))
    if locality:
        _locality(ctx, st, log, occupancy_threshold, "greedy", ctx.total_latency(st))
    return finish(ctx, st, log, phase="fastest_single_device",
                  params={"device": d, "objective": objective, "locality": locality}, initial_state=EMPTY_STATE)


def brute_force(graph: OpGraph, system: System, *, objective: str = "makespan", cost: CostModel | None = None,
                occupancy_threshold: float = 0.9, max_placements: int = 200_000) -> MappingResult:
    """The best placement over all placements (each with the greedy locality pass).

    Raises :class:`~hetsched.errors.Infeasible` naming the count when ``makespan`` would need more
    than ``max_placements`` simulations. Steps log each new best.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> brute_force(chain(3), toy_system()).params["n_evaluated"] > 0
    True
    """
    if objective not in OBJECTIVES:
        raise HetschedError(f"unknown objective {objective!r}; use one of {list(OBJECTIVES)}", field="objective")
    t0 = time.perf_counter()
    ctx = Ctx(graph, system, cost)
    ctx.require_support()
    order = ctx.order
    cands = [ctx.candidates(o) for o in order]
    log = _Log()
    n_total = 1
    for c in cands:
        n_total *= len(c)
    best: list = [float("inf"), None]
    n_eval = 0
    if objective == "makespan":
        if n_total > max_placements:
            raise Infeasible(f"brute force would simulate {n_total} placements, above max_placements={max_placements}",
                             field="max_placements", n_placements=n_total)
        for combo in itertools.product(*cands):
            dev = dict(zip(order, combo))
            st = _with_locality(ctx, dev, occupancy_threshold)
            v = ctx.simulate(st)[0]
            n_eval += 1
            if v < best[0]:
                log.add("best", f"#{n_eval}", best[0] if best[1] else None, v, True, "new best placement",
                        {"device": dev}, phase="brute_force")
                best = [v, dev]
    else:
        n_eval = _bnb_total(ctx, cands, occupancy_threshold, best, log)
    st = State(dict(best[1]))
    log.add("choose", "best", None, best[0], True, f"best of {n_eval} evaluated placements", {}, phase="brute_force")
    _locality(ctx, st, log, occupancy_threshold, "greedy", ctx.total_latency(st))
    return finish(ctx, st, log, phase="brute_force",
                  params={"objective": objective, "n_placements": n_total, "n_evaluated": n_eval},
                  initial_state=EMPTY_STATE, extra_metrics={"search_s": time.perf_counter() - t0})


def _bnb_total(ctx: Ctx, cands: list[list[str]], threshold: float, best: list, log: _Log) -> int:
    """Depth-first branch and bound on the additive total latency (placements in op order).

    With ample memory the greedy locality keeps every weight and every tensor that pays, so a
    tensor's term is ``min(kept, written back)`` once its producer and consumers are placed and an
    op's term is its compute time. Each leaf is re-scored with the real locality pass (exact under a
    binding capacity too); the bound only prunes with the optimistic terms, which never overestimate.
    """
    order = ctx.order
    n = len(order)
    host = ctx.host
    # optimistic op term: compute with weights resident (device != host) or fetched on the host (free)
    opt = [min(ctx.comp(o, d) for d in c) for o, c in zip(order, cands)]
    suffix = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + opt[i]
    # a tensor is complete once its last endpoint (producer or consumer) is placed
    last_pos: dict[str, int] = {}
    pos = ctx.pos
    for t in ctx.size:
        ends = [pos[c] for c in ctx.consumers[t] if c in pos]
        if ctx.producer[t] is not None:
            ends.append(pos[ctx.producer[t]])
        last_pos[t] = max(ends) if ends else -1
    done_at: dict[int, list[str]] = {}
    for t, k in last_pos.items():
        done_at.setdefault(k, []).append(t)
    dev: dict[str, str] = {}
    count = [0]
    base = sum(ctx.tensor_term(t, {}, False) for t in done_at.get(-1, ()))

    def op_opt(o: str, d: str) -> float:
        return ctx.op_term(o, d, d != host)

    def rec(i: int, acc: float) -> None:
        if acc + suffix[i] >= best[0] * (1 - 1e-12):
            return
        if i == n:
            count[0] += 1
            st = _with_locality(ctx, dev, threshold)
            v = ctx.total_latency(st)
            if v < best[0]:
                log.add("best", f"#{count[0]}", best[0] if best[1] else None, v, True, "new best placement",
                        {"device": dict(dev)}, phase="brute_force")
                best[0], best[1] = v, dict(dev)
            return
        o = order[i]
        for d in cands[i]:
            dev[o] = d
            add = op_opt(o, d)
            for t in done_at.get(i, ()):
                add += min(ctx.tensor_term(t, dev, False),
                           ctx.tensor_term(t, dev, True) if ctx.producer[t] is not None and dev.get(ctx.producer[t]) != host else float("inf"))
            rec(i + 1, acc + add)
        del dev[o]

    rec(0, base)
    return count[0]


class _Method:
    """A mapper with fixed defaults that passes every other keyword through (and names a bad one).

    >>> m = METHODS["h2h_makespan"]
    >>> m.defaults["objective"], "locality" in m.options
    ('makespan', False)
    """

    def __init__(self, fn: Callable[..., MappingResult], **defaults: object) -> None:
        import inspect

        self.fn, self.defaults = fn, defaults
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


#: name -> mapper ``f(graph, system, *, cost=None, **options)``; the options are the function's own
#: keyword arguments (an unknown one is an error naming it, never silently dropped).
METHODS: dict[str, Callable[..., MappingResult]] = {
    "compute_first": _Method(map_compute_first),
    "h2h": _Method(h2h),
    "h2h_makespan": _Method(h2h, objective="makespan", direction="both"),
    "h2h_plus": _Method(h2h, direction="both", group_size=4),
    "heft": _Method(heft),
    "cpop": _Method(cpop),
    "peft": _Method(peft),
    "fastest_single_device": _Method(fastest_single_device),
    "brute_force": _Method(brute_force, objective="total_latency"),
    "brute_force_makespan": _Method(brute_force, objective="makespan"),
}


def compare(graph: OpGraph, system: System, methods: Sequence[str | Callable] | None = None, *,
            cost: CostModel | None = None) -> pd.DataFrame:
    """Run several mappers on one instance: ``method, makespan_s, total_latency_s, energy_J, bytes_moved, runtime_s``.

    ``methods`` are names from :data:`METHODS` or callables ``f(graph, system, cost=...)`` returning a
    :class:`MappingResult`. Default: compute-first, h2h, HEFT, CPOP, PEFT, fastest single device, and
    brute force when the graph has at most 8 ops.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> compare(chain(3), toy_system(), ["compute_first", "h2h"])["method"].tolist()
    ['compute_first', 'h2h']
    """
    if methods is None:
        methods = ["compute_first", "h2h", "heft", "cpop", "peft", "fastest_single_device"]
        if graph.n_ops <= 8:
            methods.append("brute_force")
    rows = []
    for m in methods:
        if isinstance(m, str):
            if m not in METHODS:
                raise HetschedError(f"unknown method {m!r}; use one of {sorted(METHODS)} or a callable", field="methods")
            f, name = METHODS[m], m
        else:
            f, name = m, getattr(m, "__name__", "custom")
        t0 = time.perf_counter()
        r = f(graph, system, cost=cost)
        rt = time.perf_counter() - t0
        rows.append({"method": name, "makespan_s": r.metrics["makespan_s"], "total_latency_s": r.metrics["total_latency_s"],
                     "energy_J": r.metrics["energy_J"], "bytes_moved": r.metrics["bytes_moved"], "runtime_s": rt})
    return pd.DataFrame(rows, columns=["method", "makespan_s", "total_latency_s", "energy_J", "bytes_moved", "runtime_s"])
