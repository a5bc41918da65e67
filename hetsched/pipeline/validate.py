"""Schedule validation: completeness, ordering, placement and deadlock freedom.

:func:`validate` checks that every ``(stage, micro-batch)`` has exactly one ``F`` and either one
``B`` or one ``I`` and one ``W``; ``F`` comes before ``B``/``I`` and ``I`` before ``W`` on the rank; each
stage lives on exactly one rank; and that the ranks can run their lists without a deadlock (a rank
waiting for an input that a rank waiting on it would produce). An error carries the step x rank
grid around the offending step, in torch's ``_format_pipeline_order`` layout.

The static checks are vectorised over flat numpy arrays; the deadlock check is the list walk of
:mod:`.deps` run with unit times (the walk :func:`~hetsched.pipeline.simulate` runs with real ones).

Examples
--------
>>> from hetsched.pipeline import Schedule
>>> validate(Schedule.from_text(["0F0 0B0", "1F0 1B0"]))
>>> validate(Schedule.from_text(["0F0 0B0", "1B0 1F0"]))
Traceback (most recent call last):
...
hetsched.errors.ScheduleError: rank 1, step 0: 1B0 runs before its forward 1F0 ...
"""

from __future__ import annotations

import numpy as np

from .deps import DEADLOCK, checked_dependencies, dependencies, walk
from .ir import Schedule

__all__ = ["validate", "dependencies", "DEADLOCK"]


def validate(schedule: Schedule) -> None:
    """Raise :class:`~hetsched.errors.ScheduleError` if ``schedule`` breaks a rule; return ``None`` if valid.

    The error's ``details`` carry ``rank``, ``step`` and ``action`` (or ``stage``/``microbatch`` for a
    missing action), and its message the step x rank grid around the offending step. The schedule
    is not modified.

    >>> from hetsched.pipeline import interleaved_1f1b
    >>> validate(interleaved_1f1b(4, 2, 10, grouping="paddle"))
    """
    dep = checked_dependencies(schedule)
    walk(schedule, dep, np.ones(schedule.n_actions), np.zeros(schedule.n_actions))
