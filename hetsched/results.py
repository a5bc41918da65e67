"""Decision logs and the frozen result every algorithm returns.

Each algorithm returns a subclass of :class:`Result`: its outcome, ``metrics`` (numbers),
``timeline`` (the shared format), ``params`` (what it was called with) and ``steps`` — a replayable
log of every decision. A step may carry ``delta``: the state changes it makes when accepted.
``replay(k)`` applies the deltas of the accepted steps ``0..k`` to ``initial_state``; this is what a
widget's step slider walks.

One log for every family: an algorithm writes its decisions into a :class:`StepLog` while it runs
(``log.add(...)``, or ``log.append(tuple)`` in a hot loop) and passes the log as ``steps``; the
result holds it as :class:`LazySteps`, a sequence that makes a :class:`Step` only when one is read
(a 100k-op partition logs ~400k decisions). A family whose steps are a view of its own arrays passes
``LazySteps(n=..., make=...)``. A family's state after a step is defined by three hooks
(:meth:`Result._replay_start`, :meth:`Result._apply`, :meth:`Result._replay_end`) or, for a state
computed directly rather than folded, :meth:`Result._replay`; nobody overrides :meth:`Result.replay`.
A ``timeline`` may be given as a function of the result that builds it, called on first access.

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

import numbers
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

import pandas as pd

from .timeline import empty_timeline

__all__ = ["Step", "StepView", "StepLog", "NullLog", "LazySteps", "Result", "SolverRun", "Comparison", "compare_results"]


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


class StepLog:
    """Where an algorithm writes its decisions while it runs; pass it as a result's ``steps``.

    A step is stored as the tuple ``(action, subject, before, after, accepted, reason, delta,
    data)`` (the fields of :class:`Step` after ``index``: a step's index is its position, nobody
    keeps one by hand); :meth:`append` takes that tuple as is, for loops that log hundreds of
    thousands of decisions. ``StepLog(steps)`` goes on from an earlier log (a later phase of the same
    algorithm, a result's ``steps``), :meth:`extend` appends another log after this one.

    >>> log = StepLog()
    >>> log.add("mark", "a", reason="only gpu0 runs it", delta={"a": "gpu0"})
    0
    >>> log.append(("merge", "a+b", 2.0, 1.0, True, "one launch", {}, {}))
    >>> len(log), log.freeze()[1].action
    (2, 'merge')
    >>> more = StepLog(log.freeze()); more.extend(log); [s.index for s in more.freeze()]
    [0, 1, 2, 3]
    """

    __slots__ = ("_raw", "append")

    def __init__(self, steps: Iterable[Any] = ()) -> None:
        self._raw: list[tuple] = []
        #: append one raw step tuple (the hot-loop form of :meth:`add`)
        self.append = self._raw.append
        if steps:
            self.extend(steps)

    def add(self, action: str, subject: str, before: float | None = None, after: float | None = None,
            accepted: bool = True, reason: str = "", delta: Mapping[str, Any] | None = None,
            data: Mapping[str, Any] | None = None) -> int:
        """Log one decision; returns its index."""
        raw = self._raw
        raw.append((action, subject, before, after, accepted, reason, {} if delta is None else delta,
                    {} if data is None else data))
        return len(raw) - 1

    def extend(self, steps: Iterable[Any]) -> None:
        """Append every step of another log (a :class:`StepLog`, :class:`LazySteps` or Steps), renumbered."""
        raw = steps._raw if isinstance(steps, StepLog) else steps.raw() if isinstance(steps, LazySteps) else None
        if raw is not None:
            self._raw.extend(raw)
        else:
            self._raw.extend((s.action, s.subject, s.before, s.after, s.accepted, s.reason, s.delta, s.data)
                             for s in steps)

    def __len__(self) -> int:
        return len(self._raw)

    def freeze(self) -> "LazySteps":
        """The log as the read-only sequence a result holds (no copy: stop writing to it)."""
        return LazySteps(self._raw)


class NullLog(StepLog):
    """A log that keeps nothing: for inner runs whose decisions are not the caller's steps
    (a search's start mappers, a brute force pricing thousands of states).

    >>> log = NullLog()
    >>> log.add("map", "a")
    -1
    >>> log.append(("map", "b", None, None, True, "", {}, {})); len(log), len(log.freeze())
    (0, 0)
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__()
        self.append = _ignore

    def add(self, *args: Any, **kwargs: Any) -> int:
        """Keep nothing; ``-1``: the decision has no index."""
        return -1


def _ignore(_step: tuple) -> None:
    return None


class LazySteps(Sequence):
    """A decision log that makes :class:`Step` objects only when they are read.

    Either over raw step tuples (what :class:`StepLog` collects) or, with ``n`` and ``make``, over
    a function ``make(index) -> Step`` (a family whose steps are a view of its own arrays).

    >>> steps = LazySteps([("move", "a", 3.0, 2.0, True, "better", {"a": "gpu"}, {})])
    >>> steps[0].subject, steps[-1].index, len(steps)
    ('a', 0, 1)
    >>> LazySteps(n=3, make=lambda i: Step(i, "tick", str(i)))[2].subject
    '2'
    """

    __slots__ = ("_raw", "_n", "_make")

    def __init__(self, raw: list[tuple] | None = None, *, n: int | None = None,
                 make: Callable[[int], Step] | None = None) -> None:
        if (raw is None) == (make is None):
            raise TypeError("LazySteps takes raw step tuples or n and make, not both")
        self._raw = raw
        self._make = make
        self._n = len(raw) if raw is not None else int(n or 0)

    def __len__(self) -> int:
        return len(self._raw) if self._raw is not None else self._n

    def _one(self, i: int) -> Step:
        return Step(i, *self._raw[i]) if self._raw is not None else self._make(i)

    def __getitem__(self, i):
        n = len(self)
        if isinstance(i, slice):
            return [self._one(j) for j in range(*i.indices(n))]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"step {i} out of range")
        return self._one(i)

    def __iter__(self) -> Iterator[Step]:
        for j in range(len(self)):
            yield self._one(j)

    def raw(self) -> list[tuple] | None:
        """The raw step tuples (no copies), or ``None`` for a function-built log."""
        return self._raw

    def views(self) -> Iterator[Any]:
        """Every step in order, as cheaply as the log allows: a read-only :class:`StepView` per raw
        tuple (what a walker scans for phases and groups), else the made :class:`Step`.

        >>> [v.subject for v in LazySteps([("a", "x", None, None, True, "", {}, {})]).views()]
        ['x']
        """
        raw = self._raw
        if raw is not None:
            new = tuple.__new__
            for j, r in enumerate(raw):
                yield new(StepView, (j, *r))
        else:
            for j in range(self._n):
                yield self._make(j)

    def accepted(self, k: int) -> Iterator[Any]:
        """Every accepted step among ``0..k``, as a read-only :class:`StepView` for a raw log.

        A view has the attributes of :class:`Step` and costs a fifth of one to make, which is what
        lets :meth:`Result.replay` fold a few hundred thousand steps.
        """
        raw = self._raw
        if raw is not None:
            new = tuple.__new__
            for j in range(min(k + 1, len(raw))):
                r = raw[j]
                if r[4]:
                    yield new(StepView, (j, *r))
        else:
            for j in range(k + 1):
                s = self._make(j)
                if s.accepted:
                    yield s

    def __repr__(self) -> str:
        return f"<{len(self)} steps>"


class StepView(NamedTuple):
    """A read-only :class:`Step` made from a raw log tuple (what the replay hooks receive)."""

    index: int
    action: str
    subject: str
    before: float | None
    after: float | None
    accepted: bool
    reason: str
    delta: Mapping[str, Any]
    data: Mapping[str, Any]


@dataclass(frozen=True)
class SolverRun:
    """What one solver run said: the typed field of every result that ran a solver.

    One place for a solver's facts, whichever family ran it and whether its order was kept: the
    result's own numbers (its peak, makespan...) stay in ``metrics``, the attempt's here.

    Attributes
    ----------
    status : str
        ``"optimal"`` (proven), ``"feasible"`` (an incumbent, not proven), ``"no solution"`` (it
        answered without one), ``"killed"`` (no answer by the time limit: the process was stopped),
        ``"failed"`` (an error, or an answer that was not a legal solution), ``"skipped"`` (not run:
        ``note`` says why).
    bound : float or None
        The bound on the objective the solver proved (HiGHS reports ``-inf`` until it has one).
    gap : float or None
        The relative gap to ``bound``, when there is one: the solver's ``(incumbent - bound) /
        incumbent`` (memory), or the returned mapping's ``(value - bound) / value`` (mapping).
    incumbent : float or None
        The objective of the best solution it found: memory re-simulates the solver's order (its
        peak); the mapping ILP keeps the solver's own figure (the result's objective, in its
        ``metrics``, is always the evaluator's, and equals it when proven).
    solver : str or None
        ``"highs"`` or ``"cbc"``.
    model : str
        Which formulation ran (memory: ``"patent"``/``"cumulative"``; mapping: the objective).
    time_limit_s, build_s, solve_s : float or None
        The limit the solver had, the time building the programme took and the time its solve took.
    n_vars, n_constraints : int or None
        The size of the programme.
    warm_start : str or None
        What it was started from (a method's order), if anything.
    note : str
        Why it was skipped or failed, in plain words.

    >>> SolverRun("feasible", bound=4.0, incumbent=5.0, gap=0.2).proven
    False
    """

    status: str
    bound: float | None = None
    gap: float | None = None
    incumbent: float | None = None
    solver: str | None = None
    model: str = ""
    time_limit_s: float | None = None
    build_s: float | None = None
    solve_s: float | None = None
    n_vars: int | None = None
    n_constraints: int | None = None
    warm_start: str | None = None
    note: str = ""

    @property
    def proven(self) -> bool:
        """Whether the solver proved its solution optimal."""
        return self.status == "optimal"


class _LazyTimeline:
    """The ``timeline`` field: a frame, or a function of the result building one on first access (then kept)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = f"_{name}_value"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return None  # the dataclass default: no timeline given
        v = obj.__dict__[self.key]
        if callable(v) and not isinstance(v, pd.DataFrame):
            v = v(obj)
            obj.__dict__[self.key] = v
        return v

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.key] = empty_timeline() if value is None else value


@dataclass(frozen=True, kw_only=True, eq=False)
class Result:
    """Base of every algorithm's result (frozen; compare results by their fields, not identity).

    Subclasses add their outcome fields (``placement``, ``order``, ``schedule``...).
    """

    metrics: Mapping[str, float] = field(default_factory=dict)
    #: a frame, or a function ``f(result)`` that builds it (called on first access, then kept)
    timeline: pd.DataFrame = _LazyTimeline()  # type: ignore[assignment]
    steps: Sequence[Step] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    initial_state: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Frozen means frozen all the way down for the cheap containers.
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        steps = self.steps
        if isinstance(steps, StepLog):
            steps = steps.freeze()
        elif not isinstance(steps, LazySteps) and not steps:
            steps = LazySteps([])  # no decisions: still the one log type
        object.__setattr__(self, "steps", steps if isinstance(steps, LazySteps) else tuple(steps))
        object.__setattr__(self, "initial_state", MappingProxyType(dict(self.initial_state)))

    # ---------------------------------------------------------------- pickling
    # A result travels between processes (a sweep's workers, a cache on disk): its read-only
    # mappings go as dicts and come back read-only; a lazily built timeline or step log (which may
    # close over a local function) goes as what it builds.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        proxies = [k for k, v in state.items() if isinstance(v, MappingProxyType)]
        for k in proxies:
            state[k] = dict(state[k])
        if "_timeline_value" in state:
            state["_timeline_value"] = self.timeline
        steps = state.get("steps")
        if isinstance(steps, LazySteps) and steps._raw is None:
            state["steps"] = LazySteps([tuple(dict(v) if isinstance(v, MappingProxyType) else v
                                              for v in (s.action, s.subject, s.before, s.after, s.accepted, s.reason,
                                                        s.delta, s.data)) for s in steps])
        state["__proxies__"] = proxies
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        for k in state.pop("__proxies__", ()):
            state[k] = MappingProxyType(state[k])
        self.__dict__.update(state)

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def steps_frame(self) -> pd.DataFrame:
        """The decision log as a table: ``index, action, subject, before, after, accepted, reason``."""
        cols = ["index", "action", "subject", "before", "after", "accepted", "reason"]
        return pd.DataFrame([[getattr(s, c) for c in cols] for s in self.steps], columns=cols)

    # ---------------------------------------------------------------- replay: the hooks a family fills in
    def _replay_start(self) -> dict[str, Any]:
        """The state before the first step (default: a copy of ``initial_state``)."""
        return dict(self.initial_state)

    def _apply(self, state: dict[str, Any], step: Step) -> None:
        """Apply one accepted step to ``state`` (default: ``state.update(step.delta)``).

        ``step`` is a :class:`Step` or a :class:`StepView` (same attributes, read-only).
        """
        state.update(step.delta)

    def _replay_end(self, state: dict[str, Any]) -> dict[str, Any]:
        """What :meth:`replay` returns from the folded state (default: the state itself)."""
        return state

    def _replay(self, k: int) -> dict[str, Any]:
        """The state after step ``k`` (``k`` checked); override for a state computed directly."""
        state = self._replay_start()
        steps = self.steps
        apply = self._apply
        for s in (steps.accepted(k) if isinstance(steps, LazySteps) else (s for s in steps[: k + 1] if s.accepted)):
            apply(state, s)
        return self._replay_end(state)

    def replay(self, k: int) -> dict[str, Any]:
        """The state after steps ``0..k`` (``k = -1``: the initial state).

        Raises ``IndexError`` for ``k`` outside ``-1..n_steps-1``. Families define the state
        through the ``_replay_start`` / ``_apply`` / ``_replay_end`` hooks (or ``_replay``).
        """
        if not -1 <= k < len(self.steps):
            raise IndexError(f"step {k} is outside -1..{len(self.steps) - 1}")
        return self._replay(k)

    def summary(self) -> dict[str, Any]:
        """Metrics plus the class name, for tables and reports."""
        return {"result": type(self).__name__, **dict(self.metrics)}

    def __repr__(self) -> str:
        extra = [f.name for f in fields(self) if f.name not in {"metrics", "timeline", "steps", "params", "initial_state"}]
        m = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in list(self.metrics.items())[:4])
        return f"{type(self).__name__}({m}; {len(self.steps)} steps; fields: {', '.join(extra)})"


def _family(obj: Any) -> str:
    mod = type(obj).__module__.split(".")
    return mod[1] if len(mod) > 2 and mod[0] == "hetsched" else ""


@dataclass(frozen=True, kw_only=True, eq=False)
class Comparison(Result):
    """A comparison that is also a result (its runs, its log): ``frame`` is the wide table, one row
    per ``label``, like every family's compare table; :meth:`long` (or ``compare_results(cmp)``)
    gives the long form."""

    frame: pd.DataFrame = field(default_factory=pd.DataFrame)

    def long(self) -> pd.DataFrame:
        """``label, family, metric, value``: the frame's numbers in the house's long format."""
        return compare_results(self)


def compare_results(results: Any, *, metrics: Sequence[str] | None = None, label: str | None = None,
                    family: str | None = None, wide: bool = False) -> pd.DataFrame:
    """Several results (or tables of them) as one long table: ``label, family, metric, value``.

    The one comparison format of the house: every family's compare function builds its rows here,
    and views (bars, sweeps, reports) read this long form whatever the family.

    Parameters
    ----------
    results : mapping, sequence of pairs, DataFrame, Comparison, or a list of those
        ``{label: Result}`` (its ``metrics``), ``{label: {metric: value}}``, ``[(label, ...), ...]``,
        a wide frame with one row per label (its label column: ``label``, else its first column)
        or a :class:`Comparison` (its ``frame``). A list of several of these is concatenated.
    metrics : sequence of str, optional
        Which metrics, in this order (default: every one, in first-seen order).
    label : str, optional
        The label column of a wide input frame, and the name of the label column of a wide output.
    family : str, optional
        Family of every row (default: the result's package, ``mapping``, ``partition``..., or ``""``).
    wide : bool
        One row per label and one column per metric instead (non-numeric values such as a status
        are kept here; the long table holds numbers only, and no row for a missing (NaN) one).

    Examples
    --------
    >>> long = compare_results({"a": {"makespan_s": 2.0, "n_ops": 3}, "b": {"makespan_s": 1.0, "status": "ok"}})
    >>> long.values.tolist()
    [['a', '', 'makespan_s', 2.0], ['a', '', 'n_ops', 3.0], ['b', '', 'makespan_s', 1.0]]
    >>> compare_results(long, wide=True).to_dict("list")
    {'label': ['a', 'b'], 'makespan_s': [2.0, 1.0], 'n_ops': [3.0, nan]}
    """
    recs: list[tuple[str, str, dict[str, Any]]] = []  # (label, family, {metric: value})

    def take(obj: Any, fam: str = "") -> None:
        if isinstance(obj, Comparison):  # its table, in its family
            take(obj.frame, _family(obj))
            return
        if isinstance(obj, pd.DataFrame):
            if {"label", "metric", "value"} <= set(obj.columns):  # already long
                fam = obj["family"] if "family" in obj.columns else [family or ""] * len(obj)
                for lab, fa, m, v in zip(obj["label"], fam, obj["metric"], obj["value"]):
                    _row(str(lab), family or fa).update({m: v})
                return
            col = label if label is not None and label in obj.columns else "label" if "label" in obj.columns else obj.columns[0]
            for rec in obj.to_dict("records"):
                lab = rec.pop(col)
                _row(str(lab), family or fam).update(rec)
            return
        items = obj.items() if isinstance(obj, Mapping) else obj
        for lab, r in items:
            if isinstance(r, Result):
                _row(str(lab), family or _family(r)).update(r.metrics)
            else:
                _row(str(lab), family or "").update(r)

    index: dict[tuple[str, str], dict[str, Any]] = {}

    def _row(lab: str, fam: str) -> dict[str, Any]:
        d = index.get((lab, fam))
        if d is None:
            d = index[(lab, fam)] = {}
            recs.append((lab, fam, d))
        return d

    if isinstance(results, list) and results and all(isinstance(x, (pd.DataFrame, Mapping, Comparison)) for x in results):
        for part in results:
            take(part)
    else:
        take(results)
    names = list(metrics) if metrics is not None else list(dict.fromkeys(m for _, _, d in recs for m in d))
    if wide:
        lab_col = label or "label"
        return pd.DataFrame([{lab_col: lab, **{m: d.get(m, float("nan")) for m in names}} for lab, _, d in recs],
                            columns=[lab_col, *names])
    # a NaN cell of a wide table is a missing number (a refused schedule, the bound's counts): no row
    rows = [(lab, fam, m, float(d[m])) for lab, fam, d in recs for m in names
            if m in d and isinstance(d[m], numbers.Real) and not isinstance(d[m], bool) and d[m] == d[m]]
    return pd.DataFrame(rows, columns=["label", "family", "metric", "value"])
