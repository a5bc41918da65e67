"""Beyond the patent: the executor policies side by side, with the lower bound.

=============================  ==================  =============  ==================================
policy                         streams             threads        what it shows
=============================  ==================  =============  ==================================
``serial``                     one per device      one            the baseline
``multi-stream, one thread``   patent (claim 3)    one            streams alone: blocking host work
                                                                  still stalls the only thread
``patent``                     patent (claim 3)    patent         the patent: blocking work moves off
                                                                  the launching thread (overlap)
``TF inline``                  patent (claim 3)    inline_one     TensorFlow's executor: one ready
                                                                  successor inline, rest to the pool
``Nimble streams + patent``    nimble              patent         independent kernels run together
``lower bound``                --                  --             max(critical path, device work,
                                                                  host work / threads)
=============================  ==================  =============  ==================================

TF's GPU device uses one compute stream plus copy streams, which is what the patent's stream
policy produces for graphs without sync kernels, so the TF row reuses it. Only Nimble's stream
assignment is modelled; its ahead-of-time capture and replay of launches (Kwon et al. 2020,
section 4.1), which removes most host overhead, is not.

>>> from hetsched.executor.graphs import inception_graph
>>> cmp = compare_policies(inception_graph(2))
>>> list(cmp.frame["label"])
['serial', 'multi-stream, one thread', 'patent', 'TF inline', 'Nimble streams + patent', 'lower bound']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..graph import OpGraph
from ..results import Comparison, compare_results
from .simulate import ExecutorResult, prepare_run, simulate_prepared

_PREPARE_OPTIONS = ("kinds", "rules", "placement", "system", "cost", "kernels", "sync_copy_devices")

__all__ = ["POLICIES", "PolicyComparison", "compare_policies"]

#: policy label -> (stream policy, thread policy)
POLICIES: dict[str, tuple[str, str]] = {
    "serial": ("single", "single"),
    "multi-stream, one thread": ("patent", "single"),
    "patent": ("patent", "patent"),
    "TF inline": ("patent", "inline_one"),
    "Nimble streams + patent": ("nimble", "patent"),
}

_COLUMNS = ["label", "streams", "threads", "makespan_s", "lb_s", "gap_to_lb", "device_busy_frac", "host_blocked_s",
            "n_events", "n_stream_waits", "n_host_syncs", "n_handoffs", "n_streams", "n_threads"]


@dataclass(frozen=True, kw_only=True, eq=False)
class PolicyComparison(Comparison):
    """What :func:`compare_policies` returns (a :class:`~hetsched.results.Comparison`): ``frame`` (one row
    per policy, its ``label``) and the runs.

    ``metrics`` holds the speed-ups that matter: ``patent_vs_one_thread`` (makespan of
    multi-stream one thread / patent) and ``nimble_vs_patent`` (patent / Nimble + patent). Draw it
    with :func:`hetsched.plot.executor.policy_bars` (the figure lives with the views, not here).
    ``long()`` gives the frame's numbers in the house's long format
    (:func:`hetsched.results.compare_results`; the ``lower bound`` row has only its times, so it
    has no rows for the counts).

    >>> from hetsched.executor.graphs import d2h_branch_graph
    >>> lf = compare_policies(d2h_branch_graph(8, 4)).long()
    >>> lf[lf.label == "lower bound"]["metric"].tolist()
    ['makespan_s', 'lb_s', 'gap_to_lb']
    """

    results: Mapping[str, ExecutorResult] = field(default_factory=dict)


def _speedup(slow_s: float, fast_s: float) -> float:
    """``slow / fast``; 1.0 when both are 0 s (an empty graph: no policy is faster), inf when only
    the faster one is."""
    if fast_s > 0:
        return slow_s / fast_s
    return 1.0 if slow_s <= 0 else float("inf")


def compare_policies(
    graph: OpGraph,
    *,
    policies: Mapping[str, tuple[str, str]] | None = None,
    costs: Any = "cuda",
    pool_size: int = 4,
    max_streams: int | None = None,
    **options: Any,
) -> PolicyComparison:
    """Simulate ``graph`` under each executor policy; one frame, one bar chart, and the lower bound.

    Parameters
    ----------
    graph : OpGraph
    policies : dict, optional
        ``{label: (stream policy, thread policy)}``; default :data:`POLICIES`.
    costs, pool_size, max_streams, **options
        Passed to :func:`~hetsched.executor.simulate` (``rules``, ``placement``, ``system``, ``cost``...).

    Returns
    -------
    PolicyComparison
        An empty graph is a documented result, not an error: every run takes 0 s, the lower
        bound is 0 s and every speed-up is 1.0.

    >>> from hetsched.executor.graphs import d2h_branch_graph
    >>> f = compare_policies(d2h_branch_graph(8, 4)).frame.set_index("label")
    >>> bool(f.loc["patent", "makespan_s"] < f.loc["serial", "makespan_s"])
    True
    >>> from hetsched.graph import OpGraph
    >>> compare_policies(OpGraph("empty")).metrics["patent_vs_serial"]
    1.0
    """
    policies = dict(policies or POLICIES)
    results: dict[str, ExecutorResult] = {}
    rows: dict[str, dict[str, Any]] = {}
    # validating the graph and pricing its ops do not depend on the policy: once for all runs
    shared = {k: options.pop(k) for k in _PREPARE_OPTIONS if k in options}
    prep = prepare_run(graph, costs=costs, **shared) if policies else None
    for label, (sp, tp) in policies.items():
        r = simulate_prepared(graph, prep, streams=sp, threads=tp, pool_size=pool_size, max_streams=max_streams,
                               **options)
        results[label] = r
        m = r.metrics
        rows[label] = {"streams": sp, "threads": tp, **{k: m[k] for k in _COLUMNS[3:]}}
    # each run's bound depends only on its thread count; the smallest one bounds every run
    lb = min((r.metrics["lb_s"] for r in results.values()), default=0.0)
    rows["lower bound"] = {"streams": "-", "threads": "-", "makespan_s": lb, "lb_s": lb, "gap_to_lb": 0.0}
    frame = compare_results(rows, metrics=_COLUMNS[1:], wide=True)
    mk = {k: r["makespan_s"] for k, r in rows.items()}
    metrics: dict[str, float] = {f"makespan_s[{k}]": v for k, v in mk.items()}
    for key, slow, fast in (("patent_vs_one_thread", "multi-stream, one thread", "patent"),
                            ("nimble_vs_patent", "patent", "Nimble streams + patent"),
                            ("patent_vs_serial", "serial", "patent")):
        if slow in mk and fast in mk:
            metrics[key] = _speedup(mk[slow], mk[fast])
    return PolicyComparison(
        metrics=metrics,
        frame=frame,
        results=results,
        params={"policies": {k: list(v) for k, v in policies.items()}, "pool_size": pool_size,
                "costs": costs if isinstance(costs, str) else "custom", "max_streams": max_streams},
        **({"timeline": results["patent"].timeline} if "patent" in results else {}),
    )
