"""What a pipeline panel can offer its user, declared as data (:class:`~hetsched.params.ParamSpec`).

``f_s``/``b_s``/``w_s`` are one rank's share of the model (:meth:`StageCosts.per_rank
<hetsched.pipeline.StageCosts.per_rank>` splits them over a schedule's chunks); ``w_s`` is the
weight-gradient part of ``b_s`` (split backwards). ``source="model"`` starts from ``graph`` on
``system`` (:func:`~hetsched.pipeline.simulate_model`). Times are seconds, read in milliseconds.
``lockstep`` defaults to PaddlePaddle's blocking exchange, as the patent runs (outputs that
arrive early wait in its cache queues); ``cache=None`` is no cache. Which of ``v``, ``grouping``
and ``w_s`` a schedule uses is :data:`~hetsched.pipeline.SCHEDULE_INFO`'s to say; ``w_s <= b_s``
is a relation between two values, checked where both are known.

The defaults are a panel's: the patent's interleaved 1F1B with 10 micro-batches (m not a multiple of
p = 4, so the patent's first group of p + r micro-batches shows), where
:func:`~hetsched.pipeline.simulate_model` defaults to plain 1F1B with m = 16.

``method``, ``memory_cap`` (``None``, ``"schedule_a"``: each rank's peak under the panel's schedule
A, or ``"bytes"``: ``memory_cap_bytes`` on every rank), ``time_limit_s`` and ``split_backward`` are
:func:`~hetsched.pipeline.synthesize`'s inputs; ``"exhaustive"`` is not offered (tiny instances only).

>>> PARAMS["m"].bounds_text(), PARAMS["f_s"].shown(PARAMS["f_s"].default)
('1 to 256', '1 ms')
>>> PARAMS.check({"p": 1})
Traceback (most recent call last):
...
hetsched.errors.HetschedError: p (ranks) = 1 is out of range: allowed 2 to 64
"""

from __future__ import annotations

from ..params import Param, ParamSpec
from .schedules import GROUPINGS, SCHEDULES
from .stages import DEFAULT_MODEL

__all__ = ["PARAMS", "SYNTH_FOLLOW_MAX_S"]

#: a panel's synthesis follows each change of its inputs only while the heuristic answered within this
#: many seconds; a longer one (a big p x m) waits for the user's click, so a change never waits on it
SYNTH_FOLLOW_MAX_S = 2.0

_MS = (1e3, "ms")

PARAMS = ParamSpec([
    Param("source", "choice", "model", label="costs from", options=("model", "numbers"),
          help="a model split over a machine, or one rank's F/B/W times typed in"),
    Param("graph", "text", DEFAULT_MODEL["graph"], label="model", help="the training graph split into stages"),
    Param("system", "text", DEFAULT_MODEL["system"], label="machine", help="the machine whose devices are the ranks"),
    Param("schedule", "choice", "interleaved_1f1b", label="schedule", options=sorted(SCHEDULES),
          help="the pipeline schedule"),
    Param("p", "int", 4, label="p (ranks)", min=2, max=64, step=1, help="pipeline ranks"),
    Param("v", "int", 2, label="v (chunks per rank)", min=1, max=8, step=1, help="model chunks per rank (interleaved schedules)"),
    Param("m", "int", 10, label="m (micro-batches)", min=1, max=256, step=1, help="micro-batches per training step"),
    Param("grouping", "choice", "paddle", label="grouping", options=sorted(GROUPINGS),
          help="how interleaved 1F1B groups micro-batches (paddle: the patent's [p + r, p, ..., p])"),
    Param("f_s", "float", 1e-3, label="forward time F", min=0.0, step=1e-4, unit="s", display=_MS,
          help="one rank's share of the forward pass"),
    Param("b_s", "float", 2e-3, label="backward time B", min=0.0, step=1e-4, unit="s", display=_MS,
          help="one rank's share of the backward pass"),
    Param("w_s", "float", 1e-3, label="weight-gradient time W", min=0.0, step=1e-4, unit="s", display=_MS,
          help="the weight-gradient part of B (split-backward schedules)"),
    Param("latency_s", "float", 0.0, label="p2p latency", min=0.0, step=5e-5, unit="s", display=_MS,
          help="time of one send between ranks"),
    Param("activation_bytes", "float", 64 * 2**20, label="activation size", min=0.0, unit="B", display=(2**-20, "MiB"),
          help="one stage's output for one micro-batch"),
    Param("overhead_s", "float", 0.0, label="runtime overhead", min=0.0, step=1e-4, unit="s", display=_MS,
          help="added to every compute action (launch, Python dispatch)"),
    Param("lockstep", "bool", True, label="lock-step p2p",
          help="PaddlePaddle's blocking exchange, as the patent runs: a send waits for its receive"),
    Param("cache", "choice", "sender", label="cache queue", options=("sender", "receiver", None),
          help="where early outputs wait: the sender's cache queue (the patent's), receive buffers, or none"),
    # schedule synthesis (synthesize): the search's own inputs; p, v, m and the costs are the ones above
    Param("method", "choice", "heuristic", label="search", options=("heuristic", "auto", "milp"),
          help="heuristic: list scheduling and local search (about a second); milp: also the exact MILP, which runs "
               "until it proves the optimum or the time limit ends; auto: the MILP on small instances only"),
    Param("memory_cap", "choice", None, label="memory cap per rank", options=(None, "schedule_a", "bytes"),
          help="no cap, what schedule A holds on each rank at its peak, or the same number of bytes on every rank"),
    Param("memory_cap_bytes", "float", 2.0**30, label="memory cap", min=0.0, min_open=True, unit="B", display=(2**-20, "MiB"),
          help="activation memory each rank may hold (memory cap 'bytes')"),
    Param("time_limit_s", "float", 10.0, label="time limit", min=0.0, min_open=True, max=600.0, step=1.0, unit="s",
          help="wall-clock budget of the whole search; the MILP gets what the heuristic leaves"),
    Param("split_backward", "bool", True, label="split backward (I + W)",
          help="search orders of input-gradient (I) and weight-gradient (W) backwards, zero-bubble style, instead of full B"),
])
