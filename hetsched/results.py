"""Decision logs and the frozen result every algorithm returns.

Each algorithm returns a subclass of :class:`Result`: its outcome, ``metrics`` (numbers),
``timeline`` (the shared format), ``params`` (what it was called with) and ``steps`` — a replayable
log of every decision. A step may carry ``delta``: the state changes it makes when accepted.
``replay(k)`` applies the deltas of the accepted steps ``0..k`` to ``initial_state``; this is what a
widget's step slider walks.

Examples
--------
>>> r = Result(metrics={"cost": 3.0}, initial_state={"a": "cpu"}, steps=[
...     Step(0, "move", "a", before=3.0, after=2.0, accepted=True, reason="better", delta={"a": "gpu"}),
...     Step(1, "move", "a", before=2.0, after=2.5, accepted=False, reason="not better", delta={"a": "fpga"}),
... ])
>>> r.replay(1)
{'a': 'gpu'}
>>> r.steps_frame()[["action", "subject", "accepted"]].values.tolist()
[['move', 'a', True], ['move', 'a', False]]
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping, Sequence

import pandas as pd

from .timeline import empty_timeline

__all__ = ["Step", "Result"]


@dataclass(frozen=True, slots=True)
class Step:
    """One decision an algorithm made.

    Attributes
    ----------
    index : int
        Position in the log.
    action : str
        What was tried (``map``, ``keep_weights``, ``remap``, ``merge``, ``dispatch``...).
    subject : str
        What it was tried on (an op, tensor, group, micro-batch...).
    before, after : float or None
        Cost before and after (the algorithm's objective), when it has one.
    accepted : bool
        Whether the change was kept.
    reason : str
        Why, in words a student can read.
    delta : dict
        State changes applied when accepted (see :meth:`Result.replay`).
    data : dict
        Anything else worth showing: candidates and their costs, the tensors involved...
    """

    index: int
    action: str
    subject: str
    before: float | None = None
    after: float | None = None
    accepted: bool = True
    reason: str = ""
    delta: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, eq=False)
class Result:
    """Base of every algorithm's result (frozen; compare results by their fields, not identity).

    Subclasses add their outcome fields (``placement``, ``order``, ``schedule``...).
    """

    metrics: Mapping[str, float] = field(default_factory=dict)
    timeline: pd.DataFrame = field(default_factory=empty_timeline)
    steps: Sequence[Step] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    initial_state: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Frozen means frozen all the way down for the cheap containers.
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "initial_state", MappingProxyType(dict(self.initial_state)))

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def steps_frame(self) -> pd.DataFrame:
        """The decision log as a table: ``index, action, subject, before, after, accepted, reason``."""
        cols = ["index", "action", "subject", "before", "after", "accepted", "reason"]
        return pd.DataFrame([[getattr(s, c) for c in cols] for s in self.steps], columns=cols)

    def _apply(self, state: dict[str, Any], step: Step) -> None:
        """Apply one accepted step to ``state``; families with richer state override this."""
        state.update(step.delta)

    def replay(self, k: int) -> dict[str, Any]:
        """The state after steps ``0..k`` (``k = -1``: the initial state).

        Raises ``IndexError`` for ``k`` outside ``-1..n_steps-1``.
        """
        if not -1 <= k < len(self.steps):
            raise IndexError(f"step {k} is outside -1..{len(self.steps) - 1}")
        state = dict(self.initial_state)
        for s in self.steps[: k + 1]:
            if s.accepted:
                self._apply(state, s)
        return state

    def summary(self) -> dict[str, Any]:
        """Metrics plus the class name, for tables and reports."""
        return {"result": type(self).__name__, **dict(self.metrics)}

    def __repr__(self) -> str:
        extra = [f.name for f in fields(self) if f.name not in {"metrics", "timeline", "steps", "params", "initial_state"}]
        m = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in list(self.metrics.items())[:4])
        return f"{type(self).__name__}({m}; {len(self.steps)} steps; fields: {', '.join(extra)})"
