"""UI parameters declared as data: one format for every family's panel inputs (issue 21).

A family lists what a panel (or a CLI) may offer its user as a :class:`ParamSpec` of :class:`Param`
entries, next to its algorithms in the core: the kind of value, its default, its choices or
bounds, its unit, a label in plain words, how a person reads it (``display``: seconds shown in
microseconds) and a line of help. A widget builds its controls' bounds from the spec and refuses
what :meth:`ParamSpec.check` refuses, so a bound is written once, in the core, and a refusal reads
the same in every panel ("dispatch per op = 1e+06 us is out of range: allowed 0 to 50 us").

Only static facts belong here. A choice that depends on data (a graph's op names, the cells of a
support table, a step index bounded by a result) stays a check of the panel that has the data.

Examples
--------
>>> spec = ParamSpec([
...     Param("pool_size", "int", 4, label="host threads", min=1, max=16, unit="threads"),
...     Param("launch_s", "float", 5e-6, label="kernel launch", min=0.0, max=20e-6, unit="s", display=(1e6, "us")),
...     Param("streams", "choice", "patent", options=("single", "patent")),
... ])
>>> spec.defaults()
{'pool_size': 4, 'launch_s': 5e-06, 'streams': 'patent'}
>>> spec.check({"pool_size": 8, "streams": "single"})
>>> spec.check({"launch_s": 1.0})
Traceback (most recent call last):
...
hetsched.errors.HetschedError: kernel launch = 1e+06 us is out of range: allowed 0 to 20 us
>>> spec["pool_size"].bounds_text()
'1 to 16 threads'
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Iterable, Iterator, Mapping

from .errors import HetschedError

__all__ = ["Param", "ParamSpec", "KINDS"]

#: the kinds of value a parameter may hold
KINDS = ("choice", "int", "float", "bool", "text")


def _same(v: Any, o: Any) -> bool:
    """``v`` is the option ``o`` (``True`` is not the option ``1``, nor ``0`` the option ``False``)."""
    if v is o:
        return True
    if isinstance(v, bool) != isinstance(o, bool):
        return False
    try:
        return bool(v == o)
    except Exception:  # an odd object whose == raises or returns an array: not an option
        return False


def _num(x: float, whole: bool) -> str:
    """A bound or value as a person reads it: counts and round bounds in full (20000 and 1000000 us,
    not 2e+04), other measures to 4 digits."""
    if whole and float(x).is_integer() and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.4g}"


@dataclass(frozen=True)
class Param:
    """One input a panel offers, declared as data.

    Parameters
    ----------
    name : str
        The keyword it is passed as (units in the name: ``launch_s``, ``pcie_Bps``).
    kind : {"choice", "int", "float", "bool", "text"}
        What it holds.
    default : Any
        The value a panel starts from (must pass :meth:`check`; the family specs' tests check it).
    label : str
        What it is called on screen, in plain words (default: the name with spaces).
    options : tuple
        The choices of a ``choice`` (``None`` may be one: "no cache").
    min, max : float, optional
        Bounds of a number, inclusive (``None``: unbounded), in the unit of the name.
    min_open : bool
        The lower bound is excluded (a time limit must be more than 0 s).
    step : float, optional
        A control's increment, in the unit of the name.
    unit : str
        The unit of the value (``"s"``, ``"B/s"``, ``"threads"``).
    display : (float, str), optional
        How a person reads the value: multiply by the factor, show the unit (``(1e6, "us")``).
        Default ``(1, unit)``.
    help : str
        One line for a tooltip.
    allow_none : bool
        ``None`` is accepted (an empty box meaning "each backend's own").

    Examples
    --------
    >>> p = Param("dispatch_s", "float", 3e-6, label="dispatch per op", min=0.0, max=50e-6, unit="s",
    ...           display=(1e6, "us"))
    >>> p.shown(3e-6), p.bounds_text(), p.display_bounds()
    ('3 us', '0 to 50 us', (0.0, 50.0, None))
    >>> p.check(-1e-6)
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: dispatch per op = -1 us is out of range: allowed 0 to 50 us
    """

    name: str
    kind: str
    default: Any
    label: str = ""
    options: tuple = ()
    min: float | None = None
    max: float | None = None
    min_open: bool = False
    step: float | None = None
    unit: str = ""
    display: tuple[float, str] | None = None
    help: str = ""
    allow_none: bool = False
    # how the spec's check names the value when the label is empty (set in __post_init__)
    _label: str = field(default="", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise HetschedError(f"parameter {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}",
                                field=self.name)
        object.__setattr__(self, "options", tuple(self.options))
        if self.kind == "choice" and not self.options:
            raise HetschedError(f"parameter {self.name!r}: a choice needs options", field=self.name)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise HetschedError(f"parameter {self.name!r}: min {self.min} is above max {self.max}", field=self.name)
        object.__setattr__(self, "_label", self.label or self.name.replace("_", " "))

    # -- how a person reads it --------------------------------------------------------------
    @property
    def words(self) -> str:
        """The label, or the name in words when none was given."""
        return self._label

    @property
    def factor(self) -> float:
        """What a value is multiplied by to be shown (``display[0]``, default 1)."""
        return self.display[0] if self.display else 1.0

    @property
    def shown_unit(self) -> str:
        """The unit a value is shown in (``display[1]``, default :attr:`unit`)."""
        return self.display[1] if self.display else self.unit

    def shown(self, value: Any) -> str:
        """``value`` as a person reads it, with its unit (``3e-06`` -> ``'3 us'``)."""
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
            return f"{_num(value * self.factor, self.kind == 'int')} {self.shown_unit}".strip()
        return f"{value!r} {self.shown_unit}".strip() if isinstance(value, numbers.Real) else repr(value)

    def display_bounds(self) -> tuple[float | None, float | None, float | None]:
        """``(min, max, step)`` in the shown unit (for a slider or a bounded box; ``None``: unbounded)."""
        f = self.factor
        return tuple(None if x is None else x * f for x in (self.min, self.max, self.step))  # type: ignore[return-value]

    def bounds_text(self) -> str:
        """The allowed values in plain words: ``'0 to 50 us'``, ``'more than 0 s'``, ``'one of a, b'``."""
        if self.kind == "choice":
            return "one of " + ", ".join("none" if o is None else str(o) for o in self.options)
        if self.kind == "bool":
            return "yes or no"
        if self.kind == "text":
            return "a text"
        f, unit = self.factor, self.shown_unit
        # a bound is a round number a person typed: shown in full when it is whole
        lo = None if self.min is None else _num(self.min * f, True)
        hi = None if self.max is None else _num(self.max * f, True)
        u = f" {unit}" if unit else ""
        if lo is not None and hi is not None:
            text = f"more than {lo} up to {hi}{u}" if self.min_open else f"{lo} to {hi}{u}"
        elif lo is not None:
            text = f"more than {lo}{u}" if self.min_open else f"{lo}{u} or more"
        elif hi is not None:
            text = f"up to {hi}{u}"
        else:
            text = ("any whole number" if self.kind == "int" else "any finite number") + (f" of {unit}" if unit else "")
        return text + (", or empty" if self.allow_none else "")

    # -- refusing what is not allowed -----------------------------------------------------------
    def check(self, value: Any, *, field: str | None = None) -> None:
        """Refuse ``value`` unless it is allowed: a choice among the options, a finite number inside the
        bounds (whole for an ``int``; never a bool), a bool, a text, or ``None`` where that is allowed.

        Raises
        ------
        HetschedError
            Naming the parameter (``field``: ``field`` if given, else :attr:`name`), the value
            refused and what is allowed, in plain words.

        >>> Param("p", "int", 4, label="ranks", min=2, max=64).check(2.5)
        Traceback (most recent call last):
        ...
        hetsched.errors.HetschedError: ranks must be a whole number, got 2.5; allowed 2 to 64
        """
        fld = field or self.name
        label = self.words
        if value is None:
            if self.allow_none or (self.kind == "choice" and any(o is None for o in self.options)):
                return
            raise HetschedError(f"{label} is empty; allowed {self.bounds_text()}", field=fld)
        if self.kind == "choice":
            if not any(_same(value, o) for o in self.options):
                opts = ", ".join("none" if o is None else str(o) for o in self.options)
                raise HetschedError(f"{label}: unknown choice {value!r}; choose from {opts}", field=fld)
            return
        if self.kind == "bool":
            if not isinstance(value, (bool, _np_bool())):
                raise HetschedError(f"{label} must be yes or no (True or False), got {value!r}", field=fld)
            return
        if self.kind == "text":
            if not isinstance(value, str):
                raise HetschedError(f"{label} must be a text, got {value!r}", field=fld)
            return
        if isinstance(value, (bool, _np_bool())) or not isinstance(value, numbers.Real):
            raise HetschedError(f"{label} must be a number, got {value!r}", field=fld)
        if not math.isfinite(value):
            raise HetschedError(f"{label} must be a finite number, got {value!r}; allowed {self.bounds_text()}", field=fld)
        if self.kind == "int" and int(value) != value:
            raise HetschedError(f"{label} must be a whole number, got {value!r}; allowed {self.bounds_text()}", field=fld)
        lo, hi = self.min, self.max
        if (lo is not None and (value <= lo if self.min_open else value < lo)) or (hi is not None and value > hi):
            raise HetschedError(f"{label} = {self.shown(value)} is out of range: allowed {self.bounds_text()}", field=fld)

    def allows(self, value: Any) -> bool:
        """Whether :meth:`check` accepts ``value``.

        >>> Param("t_s", "float", 1.0, min=0.0, min_open=True).allows(0.0)
        False
        """
        try:
            self.check(value)
        except HetschedError:
            return False
        return True

    def but(self, **changes: Any) -> "Param":
        """A copy with some fields changed (a panel's own default, a narrower bound).

        >>> Param("m", "int", 10, min=1, max=256).but(default=12).default
        12
        """
        return replace(self, **changes)


def _np_bool() -> type:
    """numpy's bool type when numpy is loaded (it is not a Python bool, nor a ``numbers.Real``)."""
    import sys

    np = sys.modules.get("numpy")
    return np.bool_ if np is not None else bool


class ParamSpec:
    """An ordered, immutable collection of :class:`Param`, looked up by name.

    Parameters
    ----------
    params : iterable of Param
        In the order a panel lays them out; names must be unique.

    Examples
    --------
    >>> spec = ParamSpec([Param("m", "int", 10, label="micro-batches", min=1, max=256),
    ...                   Param("cache", "choice", "sender", options=("sender", "receiver", None))])
    >>> [p.name for p in spec], "m" in spec, len(spec)
    (['m', 'cache'], True, 2)
    >>> spec["m"].max
    256
    >>> spec.check({"m": 0})
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: micro-batches = 0 is out of range: allowed 1 to 256
    >>> try:
    ...     spec.check({"m": 0}, fields={"m": "micro_batches"})
    ... except HetschedError as e:
    ...     e.field
    'micro_batches'
    """

    __slots__ = ("_params", "_by_name")

    def __init__(self, params: Iterable[Param]) -> None:
        ps = tuple(params)
        by: dict[str, Param] = {}
        for p in ps:
            if not isinstance(p, Param):
                raise TypeError(f"a ParamSpec holds Param entries, got {type(p).__name__}")
            if p.name in by:
                raise HetschedError(f"parameter {p.name!r} declared twice", field=p.name)
            by[p.name] = p
        self._params = ps
        self._by_name = MappingProxyType(by)

    def __setattr__(self, name: str, value: Any) -> None:
        if hasattr(self, "_by_name"):
            raise AttributeError("a ParamSpec is immutable: build a new one (ParamSpec([... , p.but(...)]))")
        object.__setattr__(self, name, value)

    def __iter__(self) -> Iterator[Param]:
        return iter(self._params)

    def __len__(self) -> int:
        return len(self._params)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> Param:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no parameter {name!r}; declared: {', '.join(self._by_name)}") from None

    def __repr__(self) -> str:
        return f"ParamSpec([{', '.join(p.name for p in self._params)}])"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ParamSpec) and self._params == other._params

    def __hash__(self) -> int:
        return hash(self._params)

    @property
    def names(self) -> tuple[str, ...]:
        """The parameters' names, in order."""
        return tuple(self._by_name)

    def defaults(self) -> dict[str, Any]:
        """``{name: default}`` in order (a new dict each call)."""
        return {p.name: p.default for p in self._params}

    def only(self, *names: str) -> "ParamSpec":
        """The parameters named, in this spec's order.

        >>> ParamSpec([Param("a", "bool", True), Param("b", "bool", False)]).only("b").names
        ('b',)
        """
        unknown = [n for n in names if n not in self._by_name]
        if unknown:
            self[unknown[0]]  # raises, naming it
        return ParamSpec(p for p in self._params if p.name in names)

    def check(self, values: Mapping[str, Any], *, fields: Mapping[str, str] | None = None) -> None:
        """Refuse the first value that is not allowed (see :meth:`Param.check`), in ``values``' order.

        ``fields`` maps a parameter's name to the name the caller knows it by (a panel's trait
        ``f_ms`` for the parameter ``f_s``): the error's ``field`` is that name. A name this spec
        does not declare is an error too (a misspelt key must not pass unchecked).

        Raises
        ------
        HetschedError
            Naming the value, the parameter (``field``) and what is allowed.

        >>> ParamSpec([Param("a", "bool", True)]).check({"b": 1})
        Traceback (most recent call last):
        ...
        hetsched.errors.HetschedError: unknown parameter 'b'; declared: a
        """
        fields = fields or {}
        for name, v in values.items():
            p = self._by_name.get(name)
            if p is None:
                raise HetschedError(f"unknown parameter {name!r}; declared: {', '.join(self._by_name)}", field=str(name))
            p.check(v, field=fields.get(name))
