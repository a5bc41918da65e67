"""What a pipeline action costs: :class:`StageCosts` (compute, sizes, overhead) and :class:`P2P` (links).

One meaning everywhere: **a StageCosts value is per global stage, i.e. per chunk**. A schedule with
``v`` chunks per rank runs ``p * v`` stages; ``StageCosts(f_s=1.0)`` makes each of them take 1 s.
What-if knobs that speak of *one rank's share of the model* (the panel's, the CLI's, the sweeps')
go through :meth:`StageCosts.per_rank`, which divides the share over the schedule's chunks, so a
1F1B run and an interleaved run with ``v = 4`` price the same model.

Link times come from the cost model's ``transfer_s`` (:mod:`hetsched.cost`), the one transfer
formula of the house: a graph-priced :class:`StageCosts` (from
:func:`~hetsched.pipeline.stage_costs`) carries the per-stage send times it computed from the
system's links; in the numbers-only mode :class:`P2P` prices a message over one
:class:`~hetsched.system.Link` of its ``latency_s`` / ``bandwidth_Bps`` (:meth:`Link.time_s
<hetsched.system.Link.time_s>`, the hop formula the cost models sum over a route). A message of 0
bytes is free (the cost model's rule).

Runtime overhead (the pipeline family's fidelity issue: a real gloo run was 1.12-1.29x the simulated makespan,
about 1.6-2 ms per action explained it): ``StageCosts.overhead_s`` is added to every compute
action (kernel launch, Python dispatch), ``P2P.overhead_s`` to every cross-rank message (p2p
set-up). Both default to 0.

Examples
--------
>>> StageCosts.per_rank(f_s=4.0, b_s=8.0, chunks=2).arrays(4, v=2)["F"].tolist()
[2.0, 2.0, 2.0, 2.0]
>>> P2P(latency_s=1e-5, bandwidth_Bps=1e9).time_s(1e6)
0.00101
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping

import numpy as np

from ..errors import ScheduleError
from ..system import Link

__all__ = ["StageCosts", "P2P"]

_COST_FIELDS = ("f_s", "b_s", "i_s", "w_s", "activation_bytes", "grad_bytes", "held_bytes", "overhead_s", "send_s", "grad_send_s")


def _per_stage(x: Any, S: int, name: str, v: int | None = None) -> np.ndarray:
    a = np.asarray(x, dtype=float)
    if a.ndim == 0:
        a = np.full(S, float(a))
    elif v is not None and a.shape == (v,) and S != v:
        a = np.repeat(a, S // v)  # one value per chunk: stage c*p + r gets chunk c's
    if a.shape != (S,):
        raise ScheduleError(f"cost {name!r} needs a scalar, one value per global stage ({S}) or one per chunk ({v}), got shape {a.shape}", field=name)
    if not np.all(np.isfinite(a)) or (a < 0).any():
        raise ScheduleError(f"cost {name!r} must be finite and non-negative", field=name)
    return a


@dataclass(frozen=True)
class StageCosts:
    """Per-stage (= per-chunk) compute times, tensor sizes and overheads.

    Attributes
    ----------
    f_s, b_s : float or sequence
        Forward and full-backward time of one stage for one micro-batch (seconds): a scalar, one
        value per global stage, or one per chunk (length ``v``: every rank's chunk ``c`` costs
        the same).
    i_s, w_s : float or sequence, optional
        Input- and weight-gradient times for split backwards; default ``b_s / 2`` each (and
        ``w_s = b_s - i_s`` when only ``i_s`` is given).
    activation_bytes : float or sequence
        Output activation of a stage for one micro-batch: what a forward sends.
    grad_bytes : float or sequence, optional
        Input gradient a backward sends (default: ``activation_bytes``).
    held_bytes : float or sequence, optional
        What a rank holds per in-flight micro-batch of the stage (saved activations) until its
        backward frees it (default: ``activation_bytes``).
    overhead_s : float or sequence
        Runtime overhead added to every compute action of the stage (launch, Python); default 0.
    send_s, grad_send_s : sequence, optional
        Per stage, the time to send its activation to the next stage / its input gradient to the
        previous one, priced from a system's links (:func:`~hetsched.pipeline.stage_costs` fills
        them). When given they replace :class:`P2P`'s latency and bandwidth.
    placement : tuple of int, optional
        Rank of each global stage these prices assume (a graph-priced cost is only valid on the
        same placement; :func:`~hetsched.pipeline.simulate` checks it).
    meta : dict
        Where the numbers came from (the split, devices...); not compared.

    >>> StageCosts(f_s=1, b_s=2).arrays(2)["I"].tolist()
    [1.0, 1.0]
    """

    f_s: Any = 1.0
    b_s: Any = 2.0
    i_s: Any = None
    w_s: Any = None
    activation_bytes: Any = 0.0
    grad_bytes: Any = None
    held_bytes: Any = None
    overhead_s: Any = 0.0
    send_s: Any = None
    grad_send_s: Any = None
    placement: tuple | None = None
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @classmethod
    def per_rank(cls, f_s: float = 1.0, b_s: float = 2.0, *, chunks: int, w_s: float | None = None, **kw: Any) -> "StageCosts":
        """Costs from *one rank's share of the model*, split evenly over its ``chunks`` chunks.

        This is the one place the "per rank" what-if knobs (panel, CLI, sweeps) become per-chunk
        stage costs: ``f_s``, ``b_s`` and ``w_s`` (the weight-gradient part of ``b_s``; default
        half) are divided by ``chunks``; sizes and overheads are per chunk already and pass
        through ``kw``.

        >>> c = StageCosts.per_rank(f_s=1.0, b_s=2.0, w_s=0.5, chunks=2)
        >>> (c.f_s, c.b_s, c.i_s, c.w_s)
        (0.5, 1.0, 0.75, 0.25)
        """
        if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or chunks < 1:
            raise ScheduleError(f"chunks must be a positive integer, got {chunks!r}", field="chunks")
        for name, val in (("f_s", f_s), ("b_s", b_s), ("w_s", w_s)):
            if val is not None and not (np.isfinite(val) and val >= 0):
                raise ScheduleError(f"{name} must be finite and non-negative, got {val!r}", field=name)
        if w_s is not None and w_s > b_s:
            raise ScheduleError(f"w_s = {w_s} is part of the backward and cannot exceed b_s = {b_s}", field="w_s")
        k = int(chunks)
        i = None if w_s is None else (b_s - w_s) / k
        return cls(f_s=f_s / k, b_s=b_s / k, i_s=i, w_s=None if w_s is None else w_s / k, **kw)

    def arrays(self, S: int, v: int | None = None) -> dict[str, np.ndarray]:
        """Per-global-stage arrays (``S`` stages; a length-``v`` input is one value per chunk).

        Keys ``F``, ``B``, ``I``, ``W``, ``act``, ``grad``, ``held``, ``overhead`` and, when priced
        from a system, ``send`` and ``grad_send``.

        >>> StageCosts(f_s=[1, 2]).arrays(4, v=2)["F"].tolist()   # chunk c -> stages c*p + r
        [1.0, 1.0, 2.0, 2.0]
        """
        b = _per_stage(self.b_s, S, "b_s", v)
        if self.i_s is None and self.w_s is not None:
            w = _per_stage(self.w_s, S, "w_s", v)
            if (w > b + 1e-12 * np.maximum(1.0, b)).any():
                raise ScheduleError("w_s (weight-gradient time) cannot exceed b_s", field="w_s")
            i = np.maximum(b - w, 0.0)
        else:
            i = b / 2 if self.i_s is None else _per_stage(self.i_s, S, "i_s", v)
            w = b - i if self.w_s is None else _per_stage(self.w_s, S, "w_s", v)
        act = _per_stage(self.activation_bytes, S, "activation_bytes", v)
        grad = act if self.grad_bytes is None else _per_stage(self.grad_bytes, S, "grad_bytes", v)
        held = act if self.held_bytes is None else _per_stage(self.held_bytes, S, "held_bytes", v)
        out = {"F": _per_stage(self.f_s, S, "f_s", v), "B": b, "I": i, "W": np.maximum(w, 0.0), "act": act, "grad": grad,
               "held": held, "overhead": _per_stage(self.overhead_s, S, "overhead_s", v)}
        for key, name in (("send", "send_s"), ("grad_send", "grad_send_s")):
            val = getattr(self, name)
            if val is not None:
                out[key] = _per_stage(val, S, name, v)
        return out

    @classmethod
    def coerce(cls, costs: Any) -> "StageCosts":
        """``None`` (defaults), a ``StageCosts``, or a mapping (``F``/``B``/``I``/``W`` alias the ``_s`` fields).

        >>> StageCosts.coerce({"F": 1, "B": 3}).b_s
        3
        """
        if costs is None:
            return cls()
        if isinstance(costs, cls):
            return costs
        if isinstance(costs, Mapping):
            alias = {"F": "f_s", "B": "b_s", "I": "i_s", "W": "w_s"}
            kw = {alias.get(k, k): v for k, v in costs.items()}
            unknown = set(kw) - set(_COST_FIELDS)
            if unknown:
                raise ScheduleError(f"unknown cost field(s) {sorted(unknown)}; use {', '.join(_COST_FIELDS)} (or F, B, I, W)", field="costs")
            return cls(**kw)
        raise ScheduleError(f"costs must be StageCosts or a mapping, got {type(costs).__name__}", field="costs")


@dataclass(frozen=True)
class P2P:
    """Point-to-point between ranks in the numbers-only mode, and how sends behave.

    Attributes
    ----------
    latency_s, bandwidth_Bps : float
        One link, the same for every pair of ranks (:attr:`link`), a message priced as the cost
        models price a hop (ignored when the :class:`StageCosts` carry send times priced from a system).
    lockstep : bool
        PaddlePaddle's blocking exchange (see :mod:`hetsched.pipeline.lockstep`) instead of
        non-blocking ``isend``/``irecv``.
    overhead_s : float
        Set-up time added to every cross-rank message (default 0).

    >>> P2P(latency_s=1.0, bandwidth_Bps=2.0).time_s([0, 4]).tolist()   # 0 bytes are free
    [0.0, 3.0]
    """

    latency_s: float = 0.0
    bandwidth_Bps: float = math.inf
    lockstep: bool = False
    overhead_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("latency_s", "overhead_s"):
            val = getattr(self, name)
            if isinstance(val, bool) or not isinstance(val, (int, float, np.floating, np.integer)) or not (0 <= val < math.inf):
                raise ScheduleError(f"P2P needs a finite {name} >= 0, got {val!r}", field=name)
        bw = self.bandwidth_Bps
        if isinstance(bw, bool) or not isinstance(bw, (int, float, np.floating, np.integer)) or not bw > 0:
            raise ScheduleError(f"P2P needs bandwidth_Bps > 0, got {bw!r}", field="bandwidth_Bps")
        if not isinstance(self.lockstep, (bool, np.bool_)):
            raise ScheduleError(f"lockstep must be True or False, got {self.lockstep!r}", field="lockstep")

    @property
    def priced(self) -> bool:
        """Whether the link costs anything (non-default latency or bandwidth)."""
        return self.latency_s > 0 or self.bandwidth_Bps < math.inf

    @cached_property
    def link(self) -> Link:
        """The one link between any two ranks, as a :class:`~hetsched.system.Link` (what prices a message)."""
        # a Link must have a finite bandwidth (issue 20); "no bandwidth limit" is the largest float,
        # whose byte term (<= 1e-290 s) vanishes against any latency
        bw = float(self.bandwidth_Bps) if math.isfinite(self.bandwidth_Bps) else sys.float_info.max
        return Link("rank", "rank'", bw, float(self.latency_s))

    def time_s(self, nbytes: Any) -> Any:
        """Transfer time of ``nbytes`` (scalar or array) between two ranks, without ``overhead_s``:
        the link's ``latency + bytes / bandwidth`` (:meth:`~hetsched.system.Link.time_s`, the hop the
        cost models sum over a route); 0 bytes are free.

        >>> P2P(latency_s=1e-6, bandwidth_Bps=1e9).time_s(1e3)
        2e-06
        """
        if np.ndim(nbytes):
            a = np.asarray(nbytes, float)
            return np.where(a > 0, self.link.time_s(a), 0.0)
        return self.link.time_s(float(nbytes)) if nbytes > 0 else 0.0

    @classmethod
    def coerce(cls, comm: Any) -> "P2P":
        """``None`` (free, non-blocking), a ``P2P``, or a mapping of its fields.

        >>> P2P.coerce({"latency_s": 2e-6}).latency_s
        2e-06
        """
        if comm is None:
            return cls()
        if isinstance(comm, cls):
            return comm
        if isinstance(comm, Mapping):
            unknown = sorted(set(comm) - {"latency_s", "bandwidth_Bps", "lockstep", "overhead_s"})
            if unknown:
                raise ScheduleError(f"unknown comm field(s) {unknown}; use latency_s, bandwidth_Bps, lockstep, overhead_s", field="comm")
            return cls(**comm)
        raise ScheduleError(f"comm must be P2P or a mapping, got {type(comm).__name__}", field="comm")
