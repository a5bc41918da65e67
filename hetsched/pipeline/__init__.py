"""Pipeline-parallel schedules (the interleaved pipeline patent): Action IR, generators, cache queues, validator, simulator,
and stage costs of real models on heterogeneous machines.

Implements the interleaved pipeline patent (``docs/patents.md``; Baidu, interleaved pipeline scheduling
with cache queues for any number of micro-batches; PaddlePaddle ``PipelineParallelWithInterleave``,
simulated as it runs: :mod:`.lockstep`) and the schedules around it: GPipe, 1F1B, looped BFS,
interleaved 1F1B with four grouping policies (the patent's by default), interleaved FthenB, ZB-H1,
ZB-H2, ZB-V, interleaved zero bubble (ZB1P) and DualPipeV (every torch 2.13 schedule, equal to
torch's order; interleaved 1F1B with ``grouping="torch"``, the patent's grouping differs where ``m``
is no multiple of ``p``). :func:`split_stages` / :func:`stage_costs` price a training graph's stages on the
devices of a system; :func:`simulate_model` runs a schedule on such a split. :func:`synthesize` finds
the best schedule for given stage costs and memory caps (list scheduling, local search, an exact
MILP; never slower than the named schedules), measured against :func:`lower_bound`;
:func:`compare_synthesis` puts it beside every named schedule.

>>> from hetsched import pipeline as pp
>>> s = pp.interleaved_1f1b(4, 2, 10)            # the patent's grouping: [6, 4]
>>> pp.validate(s)
>>> r = pp.simulate(s, costs={"F": 1.0, "B": 1.0})
>>> r.metrics["makespan_s"], round(r.metrics["bubble_fraction"], 3), r.patent()["send_interval"]
(46.0, 0.13, (2, 8))
"""

from ..errors import ScheduleError
from .cache import cache_trace, patent_parameters, patent_queues, peak_in_flight, send_interval
from .compare import compare
from .export import from_torch_csv, to_chrome_trace, to_torch_csv
from .ir import KINDS, PHASES, Action, Schedule, action_phases, format_grid, merge_backward, split_backward
from .schedules import (
    GROUPINGS,
    SCHEDULES,
    balanced_groups,
    gpipe,
    groups,
    interleaved_1f1b,
    interleaved_fthenb,
    interleaved_from_groups,
    looped_bfs,
    make_schedule,
    megatron_groups,
    one_f_one_b,
    paddle_groups,
    torch_groups,
    zb_h1,
    zb_h2,
    zbv,
    interleaved_zero_bubble,
    dualpipev,
    is_patent_schedule,
    SCHEDULE_INFO,
    schedule_v,
    MAX_ACTIONS,
)
from .simulate import P2P, PipelineResult, StageCosts, simulate, timeline_deps
from .stages import DEFAULT_MODEL, ModelRun, StageSplit, default_devices, exhaustive_split, simulate_model, split_default, split_stages, stage_costs
from .validate import dependencies, validate
from .problem import bound_terms, lower_bound
from .synth import SynthesisResult, exhaustive_synthesis, named_schedules, synthesize
from .synth_compare import compare_synthesis, model_costs
from .params import PARAMS  # what a panel can offer the user, declared as data (a ParamSpec)

__all__ = [
    "PARAMS",
    "ScheduleError",
    "KINDS", "PHASES", "Action", "Schedule", "format_grid", "action_phases", "split_backward", "merge_backward",
    "GROUPINGS", "SCHEDULES", "groups", "paddle_groups", "megatron_groups", "torch_groups", "balanced_groups",
    "gpipe", "one_f_one_b", "looped_bfs", "interleaved_1f1b", "interleaved_fthenb", "interleaved_from_groups",
    "zb_h1", "zb_h2", "zbv", "interleaved_zero_bubble", "dualpipev", "make_schedule", "is_patent_schedule",
    "SCHEDULE_INFO", "schedule_v", "MAX_ACTIONS",
    "validate", "dependencies", "simulate", "StageCosts", "P2P", "PipelineResult", "timeline_deps",
    "cache_trace", "patent_parameters", "patent_queues", "compare", "send_interval", "peak_in_flight",
    "to_torch_csv", "from_torch_csv", "to_chrome_trace",
    "stage_costs", "split_stages", "split_default", "exhaustive_split", "StageSplit", "simulate_model", "ModelRun", "default_devices", "DEFAULT_MODEL",
    "synthesize", "SynthesisResult", "exhaustive_synthesis", "named_schedules", "lower_bound", "bound_terms",
    "compare_synthesis", "model_costs",
]
