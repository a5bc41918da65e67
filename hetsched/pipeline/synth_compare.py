"""Named schedules vs the synthesized one vs the lower bound, on the same costs, with memory per rank.

:func:`compare_synthesis` is the what-if table of :func:`~hetsched.pipeline.synthesize`: one row
per applicable named schedule (run as it is: ``B`` or ``I``/``W``), one for the synthesized
schedule and one for the lower bound, in the house comparison shape
(:func:`hetsched.results.compare_results`, label column ``label``). :func:`model_costs` prices a
real model's heterogeneous split for a placement (:func:`~hetsched.pipeline.split_stages`), the
costs every row then shares.

>>> df = compare_synthesis({"F": [1.0, 2.0], "B": [2.0, 4.0]}, p=2, m=4)
>>> df.set_index("label").loc[["gpipe", "synthesized", "lower bound"], "makespan_s"].tolist()
[27.0, 25.0, 25.0]
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import ScheduleError
from ..results import compare_results
from .costs import StageCosts
from .simulate import simulate
from .synth import SynthesisResult, named_schedules, synthesize

__all__ = ["compare_synthesis", "model_costs", "COLUMNS"]

#: The wide table's columns (then ``peak_bytes_rank<r>`` for every rank).
COLUMNS = ("label", "kind", "makespan_s", "gap", "vs_synthesized", "bubble_fraction", "peak_activation_bytes", "fits_cap")


def model_costs(graph: Any = None, system: Any = None, *, p: int = 4, v: int = 1, m: int | None = None,
                placement: str | None = None, devices: Sequence[str] | None = None, **split_kw: Any) -> StageCosts:
    """A real model's stage costs on a machine, split for a placement (the costs a comparison shares).

    ``graph`` and ``system`` may be names (default: :data:`~hetsched.pipeline.DEFAULT_MODEL`, GPT-2
    small training over the bundled A100/V100/U280 box); ``devices`` defaults to the system's plan.
    The split (:func:`~hetsched.pipeline.split_stages`) checks memory for the placement's reference
    schedule: 1F1B (``v = 1``), interleaved 1F1B (``loop``, ``v > 1``) or ZB-V (``v``).

    >>> c = model_costs(p=2, m=4)
    >>> c.placement, c.meta["devices"]
    ((0, 1), ['gpu0', 'gpu4'])
    """
    from ..graph import OpGraph
    from ..io.resolve import resolve_graph, resolve_system
    from ..system import System
    from .schedules import make_schedule
    from .stages import DEFAULT_MODEL, split_default

    g = graph if isinstance(graph, OpGraph) else resolve_graph(DEFAULT_MODEL["graph"] if graph is None else graph)
    s = system if isinstance(system, System) else resolve_system(DEFAULT_MODEL["system"] if system is None else system)
    m = 4 * p if m is None else m
    style = placement or "loop"
    name = "1f1b" if v == 1 else ("zbv" if style == "v" else "interleaved_1f1b")
    if style == "v" and v != 2:
        raise ScheduleError(f"the V placement holds two stages per rank (v = 2), got v={v}", field="v")
    if style == "v" and v == 1:
        raise ScheduleError("the V placement needs v = 2", field="v")
    sched = make_schedule(name, p, v, m)
    return split_default(g, s, devices=devices, p=p, v=v, schedule=sched, **split_kw).costs


def compare_synthesis(costs: Any = None, *, p: int, v: int = 1, m: int, placement: str | None = None,
                      memory_cap_bytes: Any = None, split_backward: bool = True, comm: Any = None, method: str = "heuristic",
                      time_limit_s: float = 10.0, result: SynthesisResult | None = None, long: bool = False) -> pd.DataFrame:
    """Every applicable named schedule, the synthesized schedule and the lower bound on the same costs.

    Columns (one row per label): ``label``; ``kind`` (``named``, ``synthesized``, ``bound``);
    ``makespan_s``; ``gap`` (``(makespan - bound) / makespan``, with the synthesis's proven
    ``bound``); ``vs_synthesized`` (``makespan / synthesized - 1``); ``bubble_fraction``;
    ``peak_activation_bytes`` (worst rank); ``fits_cap`` (within ``memory_cap_bytes``);
    ``peak_bytes_rank<r>`` (each rank's activation peak: memory per rank). Named schedules run as
    they are (a ``B`` schedule keeps its full backwards; :func:`~hetsched.pipeline.named_schedules`
    says which apply). ``result``: an earlier :func:`~hetsched.pipeline.synthesize` of the same
    instance (not re-run). ``long=True``: the house long form (``label, family, metric, value``).

    >>> df = compare_synthesis({"F": 1.0, "B": 2.0, "activation_bytes": 1e6}, p=4, m=8, memory_cap_bytes="1f1b")
    >>> row = df.set_index("label").loc["synthesized"]
    >>> bool(row["fits_cap"]), float(row["peak_bytes_rank0"]), df["label"].tolist()[-2:]
    (True, 4000000.0, ['synthesized', 'lower bound'])
    """
    r = result if result is not None else synthesize(costs, p=p, v=v, m=m, placement=placement, memory_cap_bytes=memory_cap_bytes,
                                                     split_backward=split_backward, comm=comm, method=method,
                                                     time_limit_s=time_limit_s)
    cost, link = r.params["costs"], r.params["comm"]
    cap = np.asarray(r.params["memory_cap_bytes"], float)
    bound = r.bound
    mk_syn = float(r.metrics["makespan_s"])
    rows: dict[str, dict[str, Any]] = {}

    def row(kind: str, mk: float, bubble: float, peaks: np.ndarray | None) -> dict[str, Any]:
        out = {"kind": kind, "makespan_s": mk, "gap": (mk - bound) / mk if mk > 0 else 0.0,
               "vs_synthesized": mk / mk_syn - 1.0 if mk_syn > 0 else 0.0, "bubble_fraction": bubble,
               "peak_activation_bytes": float(peaks.max()) if peaks is not None else math.nan,
               "fits_cap": bool((peaks <= cap * (1 + 1e-9) + 1e-9).all()) if peaks is not None else None}
        for k in range(r.schedule.p):
            out[f"peak_bytes_rank{k}"] = float(peaks[k]) if peaks is not None else math.nan
        return out

    for name, s in named_schedules(r.schedule.p, r.schedule.v, r.schedule.m, placement=r.schedule.style,
                                   split_backward=True).items():
        sim = simulate(s, costs=cost, comm=link, timeline=False)
        rows[name] = row("named", float(sim.metrics["makespan_s"]), float(sim.metrics["bubble_fraction"]),
                         sim.per_rank["peak_activation_bytes"].to_numpy(float))
    rows["synthesized"] = row("synthesized", mk_syn, float(r.metrics["bubble_fraction"]),
                              r.per_rank["peak_activation_bytes"].to_numpy(float))
    rows["lower bound"] = row("bound", float(bound), 0.0, None)
    frame = compare_results(rows, label="label", wide=True)
    if long:
        return compare_results(frame, label="label", family="pipeline").dropna(subset=["value"]).reset_index(drop=True)
    return frame
