"""The executor simulator: host threads dispatch ops, device streams run kernels, events order them.

Model (all on the shared discrete-event core :class:`hetsched.des.Simulator`)
--------------------------------------------------------------------------------
* **Readiness.** An op is ready once every predecessor has *finished on the host*: an async op
  (``gpu_async``, ``copy_h2d``) as soon as its kernel is launched, a sync op (``gpu_sync``,
  ``copy_d2h``, ``cpu_sync``) once its work is done. This is how PaddlePaddle's InterpreterCore
  and TensorFlow's executor count dependencies.
* **Host threads.** The thread policy (:mod:`~hetsched.executor.threads`) places each ready op on
  a thread: inline (next on the current thread) or on another thread's queue (a *hand-off*; a
  sleeping thread pays ``wakeup_s`` to wake up). A thread then, for the op:

  - device op: pays ``dispatch_s`` + ``event_wait_s`` per stream wait + ``launch_s`` (+
    ``event_record_s`` when a successor needs an event), a ``launch`` row; the kernel joins its
    stream at the end of that row. An async op lets the thread go on; a sync one (``gpu_sync``,
    ``copy_d2h``) keeps it ``blocked`` until the work is done, plus ``event_sync_s``;
  - host op (``cpu_sync``): first blocks on the events of its device inputs (a *host sync*,
    ``cudaEventSynchronize``), then runs ``dispatch_s`` + its CPU time (a ``compute`` row).

* **Streams** run their items in FIFO order: a *stream wait* item holds the stream until the
  event it waits on fires (a ``wait`` row), a kernel needs one of the device's ``max_kernels``
  slots, a copy needs a copy engine of its direction (``copy_engines`` per direction).
* **Events** are those of :func:`~hetsched.executor.events.plan_events` unless given: pass
  ``events=()`` to see what a broken executor does (the race checker names the edge, and the
  timeline shows the consumer starting before its producer ends).

Ties are broken by the simulator's ``(time, priority, seq)`` heap, so runs are deterministic.

>>> from hetsched.io.generators import fork_join
>>> r = simulate(fork_join(3, 2), streams="nimble", threads="patent", pool_size=2)
>>> r.metrics["n_stream_waits"], r.metrics["n_unordered_edges"]
(4, 0)
>>> r.makespan_s < simulate(fork_join(3, 2)).makespan_s
True
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import pandas as pd

from ..cost import range_factors, range_metrics, resolve_cost
from ..des import Simulator
from ..errors import HetschedError, UnknownNameError
from ..graph import OpGraph
from ..results import Result, StepLog
from ..timeline import TimelineBuilder
from .costs import ExecCosts, executor_system, op_durations, resolve_exec_costs
from .events import edge_ordering, plan_events
from .kinds import ASYNC_KINDS, COPY_KINDS, DEVICE_KINDS, OP_KINDS, SYNC_KINDS, resolve_ops
from .streams import assign_streams, reduction_of, validate_streams
from .threads import THREAD_RULES, ThreadContext, ThreadPlan, assign_threads, is_fallback

__all__ = ["ExecutorResult", "simulate", "lower_bound", "rules_fired", "dispatch_frame", "thread_summary"]


@dataclass(frozen=True, kw_only=True, eq=False)
class ExecutorResult(Result):
    """What :func:`simulate` returns.

    Attributes
    ----------
    kinds, streams : dict
        Op kind of every op; stream of every device op.
    thread_of : dict
        Host thread index that dispatched each op.
    events : tuple of (src, dst)
        Edges that got an event.
    ordering : DataFrame
        ``src, dst, mechanism`` for every data edge (see :mod:`~hetsched.executor.events`).
    op_start_s, op_end_s : dict
        When each op's work (kernel, copy or CPU run) started and ended.
    launch_end_s : dict
        When the host finished dispatching each op.
    durations_s : dict
        Work time of each op from the cost model.
    costs : ExecCosts
    """

    kinds: Mapping[str, str] = field(default_factory=dict)
    streams: Mapping[str, str] = field(default_factory=dict)
    thread_of: Mapping[str, int] = field(default_factory=dict)
    events: tuple = ()
    ordering: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["src", "dst", "mechanism"]))
    op_start_s: Mapping[str, float] = field(default_factory=dict)
    op_end_s: Mapping[str, float] = field(default_factory=dict)
    launch_end_s: Mapping[str, float] = field(default_factory=dict)
    durations_s: Mapping[str, float] = field(default_factory=dict)
    costs: ExecCosts | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("kinds", "streams", "thread_of", "op_start_s", "op_end_s", "launch_end_s", "durations_s"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        object.__setattr__(self, "events", tuple(self.events))

    @property
    def makespan_s(self) -> float:
        return float(self.metrics.get("makespan_s", 0.0))

    def races(self) -> pd.DataFrame:
        """The data edges nothing orders (empty for every built-in policy).

        >>> from hetsched.io.generators import fork_join
        >>> len(simulate(fork_join(2, 1), streams="nimble", events=()).races())
        2
        """
        return self.ordering[self.ordering["mechanism"] == "race"].reset_index(drop=True)

    def violations(self, graph: OpGraph) -> list[tuple[str, str]]:
        """Edges ``(u, v)`` whose consumer's work started before the producer's ended (races that hit).

        >>> from hetsched.io.generators import fork_join
        >>> g = fork_join(2, 1); simulate(g, streams="nimble").violations(g)
        []
        """
        eps = 1e-12 * max(1.0, self.makespan_s)
        return [(u, v) for u, v in graph.nx.edges if self.op_start_s[v] < self.op_end_s[u] - eps]


def lower_bound(
    graph: OpGraph,
    kinds: Mapping[str, str],
    durations: Mapping[str, float],
    devices: Mapping[str, str],
    costs: ExecCosts,
    n_threads: int,
) -> dict[str, float]:
    """A lower bound on any executor's makespan, and its three parts.

    * ``lb_critical_path_s``: the longest dependency path of work (a host op also pays its dispatch);
    * ``lb_device_work_s``: per device, kernel time / ``max_kernels``, and copy time per direction /
      ``copy_engines``; the largest;
    * ``lb_host_work_s``: the least host time (dispatch + launch; a host op's run; a sync device op
      holds its thread for its work too) divided by ``n_threads``.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.executor.costs import PRESETS
    >>> g = chain(2); k = {"op0": "gpu_async", "op1": "gpu_async"}
    >>> lb = lower_bound(g, k, {"op0": 1.0, "op1": 2.0}, {"op0": "g", "op1": "g"}, PRESETS["ideal"], 1)
    >>> lb["lb_s"], lb["lb_critical_path_s"], lb["lb_device_work_s"]
    (3.0, 3.0, 0.375)
    """
    c = costs
    longest: dict[str, float] = {}
    G = graph.nx
    for n in graph.topological_order():
        w = durations[n] + (c.dispatch_s if kinds[n] == "cpu_sync" else 0.0)
        longest[n] = w + max((longest[p] for p in G.predecessors(n)), default=0.0)
    cp = max(longest.values(), default=0.0)
    work: dict[tuple[str, str], float] = {}
    host = 0.0
    for n, k in kinds.items():
        d = durations[n]
        if k == "cpu_sync":
            host += c.dispatch_s + d
            continue
        res = COPY_KINDS.get(k, "kernel")
        work[(devices[n], res)] = work.get((devices[n], res), 0.0) + d
        host += c.dispatch_s + c.launch_s + ((d + c.event_sync_s) if k in SYNC_KINDS else 0.0)
    dev = max((w / (c.max_kernels if r == "kernel" else c.copy_engines) for (_d, r), w in work.items()), default=0.0)
    hw = host / max(1, n_threads)
    return {"lb_s": max(cp, dev, hw), "lb_critical_path_s": cp, "lb_device_work_s": dev, "lb_host_work_s": hw}


_PATENT_STREAM_WHY = {
    "gpu_async": "claim 3: kernels of asynchronous ops go to a first stream",
    "gpu_sync": "claim 3: kernels of synchronous ops go to a second stream",
    "copy_h2d": "host-to-device copies on their own stream (as PaddlePaddle does)",
    "copy_h2d_sync": "host-to-device copies on their own stream (as PaddlePaddle does)",
    "copy_d2h": "device-to-host copies on their own stream (as PaddlePaddle does)",
}


def _stream_reasons(streams: Mapping[str, str], kinds: Mapping[str, str], policy: Any) -> dict[str, str]:
    """Why each device op's work went to its stream, in words (claim 3 for the patent's policy)."""
    if policy == "patent":
        return {n: _PATENT_STREAM_WHY[kinds[n]] for n in streams}
    if policy == "nimble":
        return {n: "Nimble: one stream per chain of the matching" for n in streams}
    if policy == "single":
        return {n: "one stream per device" for n in streams}
    return {n: "stream given" for n in streams}


class _Run:
    """One simulation (internal): state plus the callbacks the event loop calls."""

    def __init__(self, graph, kinds, streams, plan: ThreadPlan, costs: ExecCosts, durations, devices, events, host,
                 record_steps: bool, stream_policy: Any = None, kernel_fallbacks: Mapping[str, str] | None = None) -> None:
        self.g = graph
        self.kind = kinds
        self.stream = streams
        self.plan = plan
        self.rule = plan.rule
        self.c = costs
        self.dur = durations
        self.dev = devices
        self.host = host
        self.record_steps = record_steps
        self.sim = Simulator()
        G = graph.nx
        self.succs = {n: list(G.successors(n)) for n in graph.ops}
        self.npred = {n: G.in_degree(n) for n in graph.ops}
        self.events_in: dict[str, list[str]] = {}
        self.records: set[str] = set()
        for u, v in events:
            self.events_in.setdefault(v, []).append(u)
            self.records.add(u)
        nt = plan.n_threads
        self.nt = nt
        self.ctx = ThreadContext(nt)
        self.queue = [deque() for _ in range(nt)]
        self.tname = [plan.thread_name(t) for t in range(nt)]
        # device side
        self.sq: dict[str, deque] = {}
        self.sbusy: dict[str, bool] = {}
        self.swait_start: dict[str, float] = {}
        self.res_free: dict[tuple[str, str], int] = {}
        self.res_q: dict[tuple[str, str], deque] = {}
        self.done: dict[str, float] = {}
        self.sdev: dict[str, str] = {}
        for n, st in streams.items():
            self.sdev.setdefault(st, devices[n])
        self.waiters: dict[str, list[Callable[[float], None]]] = {}
        # outputs
        self.tb = TimelineBuilder()
        self.end_s = 0.0  # the latest row end (the makespan)
        self.thread_rows: list[list[tuple[float, float]]] = [[] for _ in range(nt)]
        self.host_busy = [0.0] * nt
        self.steps = StepLog()
        self.step_data: dict[str, dict[str, Any]] = {}  # op -> its dispatch step's data (its sync wait is filled in later)
        self.thread_of: dict[str, int] = {}
        self.op_start: dict[str, float] = {}
        self.op_end: dict[str, float] = {}
        self.launch_end: dict[str, float] = {}
        self.n_handoffs = 0
        self.n_fallbacks = 0
        self.kernel_fallbacks: dict[str, str] = dict(kernel_fallbacks or {})
        self.stream_why: dict[str, str] = _stream_reasons(streams, kinds, stream_policy) if record_steps else {}
        self.n_host_syncs = 0
        self.n_stream_waits = 0
        self.blocked_s = 0.0
        self.flow_id: dict[str, str] = {n: str(i) for i, n in enumerate(graph.ops)}

    # ------------------------------------------------------------------ rows
    def _row(self, lane, group, name, kind, s, e, op=None, device=None, flow=None, tensor=None):
        self.tb.add(lane, group, name, kind, s, e, op=op, tensor=tensor, device=device, flow=flow)
        if e > self.end_s:
            self.end_s = e

    def _host_row(self, t, name, kind, s, e, op=None, flow=None):
        self._row(self.tname[t], "host", name, kind, s, e, op, self.host, flow)
        self.thread_rows[t].append((s, e))
        if kind in ("launch", "compute"):
            self.host_busy[t] += e - s

    # ------------------------------------------------------------------ host threads
    def _step(self, op, t, inline, reason, trigger, handoff, rule=None):
        self.thread_of[op] = t
        fb = is_fallback(rule)
        self.n_fallbacks += fb
        if self.record_steps:
            st = self.stream.get(op)
            claim = THREAD_RULES.get(rule, (None,))[0] if rule is not None else None
            where = (f"; its kernel goes to {st} ({self.stream_why[op]})" if st is not None
                     else f"; runs on the host ({self.host})")
            kfb = self.kernel_fallbacks.get(op)
            data = self.step_data[op] = {
                "time_s": self.sim.now, "thread": t, "inline": inline, "trigger": trigger,
                "trigger_kind": self.kind.get(trigger) if trigger is not None else None,
                "handoff": handoff, "kind": self.kind[op], "rule": rule, "claim": claim,
                "fallback": fb, "stream": st, "stream_rule": self.stream_why.get(op),
                "device": self.dev[op], "kernel_fallback": kfb, "sync_wait": None, "sync_wait_s": 0.0,
                "sync_on": None}
            self.steps.add(
                "dispatch", op, accepted=True,
                reason=(f"RULE FALLBACK: " if fb else "") + reason + where + (f"; kernel fallback: {kfb}" if kfb else ""),
                delta={op: self.tname[t]}, data=data)

    def _note_wait(self, op: str, how: str, wait_s: float, on: str) -> None:
        """The sync wait an op costs its thread, on its dispatch step: ``"after"`` its launch (a sync
        op's work) or ``"before"`` it runs (event synchronizes on its inputs, ``sync_on`` names them)."""
        d = self.step_data.get(op)
        if d is not None and wait_s > 0:
            d.update(sync_wait=how, sync_wait_s=wait_s, sync_on=on)

    def _check_thread(self, t, op):
        if not isinstance(t, int) or not 0 <= t < self.nt:
            raise HetschedError(f"thread policy {self.plan.name!r} sent op {op!r} to thread {t!r}, "
                                f"outside 0..{self.nt - 1}", op=op, field="threads")

    def start(self) -> None:
        roots = [n for n in self.g.topological_order() if self.npred[n] == 0]
        for v in roots:
            t, reason, *rule = self.rule.root(v, self.kind[v], self.ctx)
            self._check_thread(t, v)
            self.queue[t].append(v)
            self.ctx.queued[t] = len(self.queue[t])
            self._step(v, t, False, reason, None, False, rule[0] if rule else None)
        for t in range(self.nt):
            if self.queue[t]:
                self.ctx.busy[t] = True
                self.sim.at(0.0, self._run_next, t)

    def _wake(self, t: int, handoff: bool) -> None:
        self.ctx.busy[t] = True
        now = self.sim.now
        w = self.c.wakeup_s if handoff else 0.0
        if w > 0:
            self._host_row(t, "wake-up", "wait", now, now + w)
        self.sim.at(now + w, self._run_next, t)

    def _run_next(self, t: int) -> None:
        q = self.queue[t]
        if not q:
            self.ctx.busy[t] = False
            return
        v = q.popleft()
        self.ctx.queued[t] = len(q)
        if self.kind[v] == "cpu_sync":
            self._start_host_op(t, v)
        else:
            self._start_device_op(t, v)

    def _host_done(self, v: str, t: int) -> None:
        ready = []
        npred = self.npred
        for s in self.succs[v]:
            npred[s] -= 1
            if npred[s] == 0:
                ready.append(s)
        if ready:
            kind = self.kind
            decisions = self.rule.route(v, kind[v], t, [(s, kind[s]) for s in ready], self.ctx)
            if len(decisions) != len(ready) or {d[0] for d in decisions} != set(ready):
                raise HetschedError(f"thread policy {self.plan.name!r} did not place every op made ready by {v!r}",
                                    op=v, field="threads")
            inline = []
            for s, th, inl, reason, *rule in decisions:
                self._check_thread(th, s)
                rid = rule[0] if rule else None
                if inl and th == t:
                    inline.append(s)
                    self._step(s, t, True, reason, v, False, rid)
                    continue
                handoff = th != t
                self.n_handoffs += handoff
                self.queue[th].append(s)
                self._step(s, th, False, reason, v, handoff, rid)
                if not self.ctx.busy[th]:
                    self._wake(th, handoff)
            q = self.queue[t]
            for s in reversed(inline):
                q.appendleft(s)
            for th in range(self.nt):
                self.ctx.queued[th] = len(self.queue[th])
        self._run_next(t)

    def _when_done(self, ops: list[str], fn: Callable[[float], None]) -> None:
        """Call ``fn(latest end)`` once every op in ``ops`` has finished its device work."""
        pending = [u for u in ops if u not in self.done]
        if not pending:
            fn(max((self.done[u] for u in ops), default=self.sim.now))
            return
        left = [len(pending)]

        def one(_t: float) -> None:
            left[0] -= 1
            if left[0] == 0:
                fn(max(self.done[u] for u in ops))

        for u in pending:
            self.waiters.setdefault(u, []).append(one)

    def _start_host_op(self, t: int, v: str) -> None:
        now = self.sim.now
        evs = self.events_in.get(v)
        if not evs:
            self._run_host_op(t, v, now)
            return
        self.n_host_syncs += len(evs)
        start = now

        def resume(t_done: float) -> None:
            end = max(start + self.c.event_sync_s * len(evs), t_done + self.c.event_sync_s)
            if end > start:
                self._host_row(t, f"sync {', '.join(evs)}", "blocked", start, end, op=None)
                self.blocked_s += end - start
                self._note_wait(v, "before", end - start, ", ".join(evs))
            self.sim.at(end, self._run_host_op, t, v, end)

        self._when_done(evs, resume)

    def _run_host_op(self, t: int, v: str, c0: float) -> None:
        c1 = c0 + self.c.dispatch_s + self.dur[v]
        self._host_row(t, v, "compute", c0, c1, op=v)
        self.op_start[v] = c0
        self.op_end[v] = c1
        self.launch_end[v] = c0 + self.c.dispatch_s
        self.sim.at(c1, self._finish_host_op, t, v)

    def _finish_host_op(self, t: int, v: str) -> None:
        self.done[v] = self.sim.now
        self._host_done(v, t)

    def _start_device_op(self, t: int, v: str) -> None:
        now = self.sim.now
        c = self.c
        evs = self.events_in.get(v, ())
        h = c.dispatch_s + c.event_wait_s * len(evs) + c.launch_s + (c.event_record_s if v in self.records else 0.0)
        self._host_row(t, v, "launch", now, now + h, op=v, flow=self.flow_id[v])
        self.sim.at(now + h, self._launched, t, v)

    def _launched(self, t: int, v: str) -> None:
        now = self.sim.now
        self.launch_end[v] = now
        s = self.stream[v]
        for u in self.events_in.get(v, ()):
            self.n_stream_waits += 1
            self._enqueue(s, ("wait", u))
        self._enqueue(s, ("op", v))
        if self.kind[v] in ASYNC_KINDS:
            self._host_done(v, t)
            return

        def resume(t_done: float) -> None:
            end = t_done + self.c.event_sync_s
            self.n_host_syncs += 1
            self._host_row(t, f"wait {v}", "blocked", now, end)
            self.blocked_s += end - now
            self._note_wait(v, "after", end - now, v)
            self.sim.at(end, self._host_done, v, t)

        self._when_done([v], resume)

    # ------------------------------------------------------------------ device streams
    def _enqueue(self, s: str, item: tuple[str, str]) -> None:
        q = self.sq.get(s)
        if q is None:
            q = self.sq[s] = deque()
            self.sbusy[s] = False
        q.append(item)
        if not self.sbusy[s]:
            self._advance(s)

    def _resource(self, v: str) -> tuple[str, str]:
        # kernels share the device's slots; a copy needs the copy engine of its direction
        return (self.dev[v], COPY_KINDS.get(self.kind[v], "kernel"))

    def _advance(self, s: str) -> None:
        q = self.sq[s]
        now = self.sim.now
        while q:
            what, x = q[0]
            if what == "wait":
                if x in self.done:
                    q.popleft()
                    t0 = self.swait_start.pop(s, None)
                    if t0 is not None and now > t0:
                        self._row(s, self.sdev[s], f"wait {x}", "wait", t0, now, device=self.sdev[s])
                    continue
                self.swait_start.setdefault(s, now)
                self.sbusy[s] = True
                self.waiters.setdefault(x, []).append(lambda _t, s=s: self._unblock(s))
                return
            r = self._resource(x)
            free = self.res_free.get(r)
            if free is None:
                free = self.res_free[r] = self.c.max_kernels if r[1] == "kernel" else self.c.copy_engines
                self.res_q[r] = deque()
            if free <= 0:
                self.sbusy[s] = True
                self.res_q[r].append(s)
                return
            self.res_free[r] = free - 1
            q.popleft()
            self.sbusy[s] = True
            end = now + self.dur[x]
            k = self.kind[x]
            dev = self.dev[x]
            if k in COPY_KINDS:
                ins = self.g.inputs_of(x)
                self._row(s, dev, x, "transfer", now, end, op=x, device=dev, flow=self.flow_id[x],
                          tensor=ins[0] if ins else None)
            else:
                self._row(s, dev, x, "compute", now, end, op=x, device=dev, flow=self.flow_id[x])
            self.op_start[x] = now
            self.op_end[x] = end
            self.sim.at(end, self._kernel_end, s, x, r)
            return
        self.sbusy[s] = False

    def _unblock(self, s: str) -> None:
        self.sbusy[s] = False
        self._advance(s)

    def _kernel_end(self, s: str, v: str, r: tuple[str, str]) -> None:
        self.res_free[r] += 1
        self.done[v] = self.sim.now
        rq = self.res_q[r]
        if rq:
            s2 = rq.popleft()
            self.sbusy[s2] = False
            self._advance(s2)
        self.sbusy[s] = False
        self._advance(s)
        for fn in self.waiters.pop(v, ()):
            fn(self.sim.now)

    # ------------------------------------------------------------------ run
    def run(self) -> float:
        self.start()
        n_ops = self.g.n_ops
        self.sim.run(max_events=50 * n_ops + 1000)
        if len(self.done) != n_ops:
            stuck = [n for n in self.g.ops if n not in self.done]
            raise HetschedError(f"executor stalled: {len(stuck)} op(s) never ran, first {stuck[0]!r}", op=stuck[0])
        return self.sim.now


def _resolve_streams(graph, streams, kinds, devices, max_streams):
    if streams is None:
        streams = "single"
    if isinstance(streams, str) or callable(streams):
        return assign_streams(graph, streams, kinds=kinds, devices=devices, max_streams=max_streams)
    out = dict(streams)
    validate_streams(graph, kinds, out)
    return out


def simulate(
    graph: OpGraph,
    *,
    streams: str | Callable | Mapping[str, str] | None = "single",
    threads: str | ThreadPlan | Any = "single",
    costs: str | ExecCosts | Mapping[str, Any] | None = "cuda",
    pool_size: int = 4,
    max_streams: int | None = None,
    kinds: Mapping[str, str] | None = None,
    rules: Mapping[str, str] | None = None,
    placement: Mapping[str, str] | None = None,
    kernels: Mapping[str, Any] | None = None,
    sync_copy_devices: Any = None,
    system=None,
    cost=None,
    events: Any = None,
    prune_events: bool = True,
    record_steps: bool = True,
) -> ExecutorResult:
    """Simulate an executor running ``graph`` once: host threads, device streams and events.

    Parameters
    ----------
    graph : OpGraph
    streams : {"single", "patent", "nimble"}, callable or dict
        A stream policy (see :func:`~hetsched.executor.assign_streams`) or ``{op: stream}``.
    threads : {"single", "patent", "inline_one"}, ThreadPlan or ThreadRule
        A thread policy (see :func:`~hetsched.executor.assign_threads`).
    costs : str, ExecCosts or dict
        Host overheads and device limits: a preset (``"cuda"``, ``"eager"``, ``"ideal"``), an
        :class:`~hetsched.executor.costs.ExecCosts` or overrides of ``"cuda"``.
    pool_size : int
        Host threads for the multi-threaded policies.
    max_streams : int, optional
        Fold Nimble's streams onto this many per device.
    kinds : dict, optional
        Every op's kind (complete); ``rules`` is the partial form.
    rules : dict, optional
        ``{op name or op type: kind}``: the documented way to edit op kinds (the patent's
        "operator information"); an op name beats an op type. See :func:`~hetsched.executor.kind_table`.
    placement, kernels, sync_copy_devices : optional
        Where ops run, their kernel tables (an op may have kernels for several devices) and the
        devices whose copy engines are synchronous: see :func:`~hetsched.executor.resolve_ops`.
    system, cost : optional
        The system and :class:`~hetsched.cost.CostModel` pricing kernels, copies and CPU ops
        (default: :func:`~hetsched.executor.costs.executor_system` with the roofline model).
    events : iterable of (src, dst), optional
        Edges that get an event; default :func:`~hetsched.executor.plan_events`. Passing fewer
        makes a broken executor on purpose (``metrics['n_unordered_edges']`` counts the races).
    prune_events : bool
        Skip events on edges ordered through a path (default).
    record_steps : bool
        Keep one :class:`~hetsched.results.Step` per dispatch decision.

    Returns
    -------
    ExecutorResult
        ``metrics``: ``makespan_s``; the lower bound ``lb_s`` and its parts
        ``lb_critical_path_s``, ``lb_device_work_s``, ``lb_host_work_s`` (see :func:`lower_bound`)
        and ``gap_to_lb`` (makespan / bound - 1); ``device_busy_frac`` (time the busiest device
        has work running / makespan); ``host_blocked_s`` (sum over threads); ``host_busy_max_s``
        (launch + compute time of the busiest thread); ``n_events``, ``n_stream_waits``,
        ``n_host_syncs`` (event synchronizes and waits on sync ops), ``n_handoffs`` (ops placed
        on another thread than the one that made them ready), ``n_rule_fallbacks`` (decisions where
        the thread rule could not be met, e.g. claim 1's "another thread" with two host threads),
        ``n_kernel_fallbacks`` (ops run off their placement for want of a kernel there),
        ``n_threads``, ``n_threads_used``, ``n_streams``, ``n_unordered_edges`` (races),
        ``n_sim_events``. ``steps``: one ``dispatch`` step per op, in decision order; its
        ``reason`` names the claim that decided the thread and the stream, ``data`` holds
        ``rule`` (an id of :data:`~hetsched.executor.THREAD_RULES`), ``claim``, ``fallback``,
        ``trigger`` (the op whose end made it ready) and its kind, ``thread``, ``inline``,
        ``handoff``, ``stream``, ``stream_rule``, ``device``, ``kernel_fallback``, ``time_s``, and the
        sync wait the op costs its thread: ``sync_wait`` (``"after"`` its launch, a sync op's work;
        ``"before"`` it runs, event synchronizes on its inputs; ``None``: none), ``sync_wait_s``,
        ``sync_on`` (what it waited for);
        ``replay(k)`` maps the ops dispatched so far to their threads. :func:`rules_fired`
        counts the rules.

    Raises
    ------
    HetschedError
        Unknown policy or preset, bad ``pool_size``, a stream map that misses a device op, a thread
        rule that sends an op to a thread that does not exist. ``GraphError`` (``CycleError``...)
        for a malformed graph.
    """
    prep = prepare_run(graph, costs=costs, kinds=kinds, rules=rules, placement=placement, system=system, cost=cost,
                    kernels=kernels, sync_copy_devices=sync_copy_devices)
    return simulate_prepared(graph, prep, streams=streams, threads=threads, pool_size=pool_size,
                              max_streams=max_streams, events=events, prune_events=prune_events,
                              record_steps=record_steps)


@dataclass(frozen=True, eq=False)
class Prepared:
    """What a simulation needs that does not depend on the stream and thread policies.

    :func:`~hetsched.executor.compare_policies` prepares once and simulates every policy on it
    (validating the graph and pricing every op was a fifth of each of its runs).
    """

    costs: ExecCosts
    kinds: Mapping[str, str]
    host: str
    devices: Mapping[str, str]
    durations: Mapping[str, float]
    reduction: Any
    kernel_fallbacks: Mapping[str, str] = field(default_factory=dict)
    #: the calibrated cost's error range of the priced ops (:func:`hetsched.cost.range_factors`), or None
    range_factors: tuple[float, float] | None = None
    # stream maps, event plans, edge orderings and bounds already computed on these inputs, keyed
    # by what they depend on (several policies share a stream policy or a thread count)
    memo: dict = field(default_factory=dict)

    def cached(self, key: Any, make: Callable[[], Any]) -> Any:
        if key is None:
            return make()
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]


def prepare_run(graph: OpGraph, *, costs: Any = "cuda", kinds: Mapping[str, str] | None = None,
             rules: Mapping[str, str] | None = None, placement: Mapping[str, str] | None = None,
             system=None, cost=None, kernels: Mapping[str, Any] | None = None,
             sync_copy_devices: Any = None) -> Prepared:
    graph.validate()  # a cycle, a dangling name or a negative size raises a GraphError naming it
    c = resolve_exec_costs(costs)
    if kinds is not None:
        # a complete kind map: each op's kind as a rule for that op (kernels still pick devices)
        for n in kinds:
            if n not in graph:
                raise UnknownNameError(f"kinds names unknown op {n!r}", op=n)
        for n in graph.ops:
            if kinds.get(n) not in OP_KINDS:
                raise HetschedError(f"op {n!r} has kind {kinds.get(n)!r}; expected one of {list(OP_KINDS)}", op=n, field="kinds")
        rules = {**dict(rules or {}), **dict(kinds)}
    if system is None:
        system = getattr(cost, "system", None) or executor_system(c)  # a cost file is read against the executor's
    host = system.host
    res = resolve_ops(graph, rules=rules, placement=placement, system=system, kernels=kernels,
                      sync_copy_devices=sync_copy_devices)
    durations = op_durations(graph, res.kinds, res.devices, cost=cost, system=system, host=host)
    rf = None
    if cost is not None:  # the roofline states no range: skip the pass over the ops
        cm = resolve_cost(cost, graph, system)
        rf = range_factors(cm, ((graph.op(n).op_type, host if k == "cpu_sync" else res.devices[n], durations[n])
                                for n, k in res.kinds.items() if k in ("cpu_sync", "gpu_async", "gpu_sync")))
    return Prepared(costs=c, kinds=res.kinds, host=host, devices=res.devices, durations=durations,
                     reduction=reduction_of(graph), kernel_fallbacks=res.kernel_fallbacks, range_factors=rf)


def simulate_prepared(graph: OpGraph, prep: Prepared, *, streams: Any = "single", threads: Any = "single",
                       pool_size: int = 4, max_streams: int | None = None, events: Any = None,
                       prune_events: bool = True, record_steps: bool = True) -> ExecutorResult:
    """:func:`simulate` on prepared inputs (each result gets its own copies of the shared maps)."""
    c, host, red = prep.costs, prep.host, prep.reduction
    kinds, devices, durations = dict(prep.kinds), dict(prep.devices), dict(prep.durations)
    # a named stream policy gives the same stream map, events and ordering whatever the threads
    skey = (streams, max_streams) if isinstance(streams, str) else None
    smap = dict(prep.cached(skey and ("streams", *skey),
                            lambda: _resolve_streams(graph, streams, kinds, devices, max_streams)))
    plan = assign_threads(graph, threads, pool_size=pool_size)
    if events is None:
        ev = prep.cached(skey and ("events", *skey, prune_events),
                         lambda: plan_events(graph, kinds, smap, prune=prune_events, reduction=red))
    else:
        ev = tuple((str(u), str(v)) for u, v in events)
        for u, v in ev:
            if u not in graph or v not in graph or not graph.nx.has_edge(u, v):
                raise HetschedError(f"event ({u!r}, {v!r}) is not a data edge of the graph", op=v, field="events")
    run = _Run(graph, kinds, smap, plan, c, durations, devices, ev, host, record_steps,
               stream_policy=streams if isinstance(streams, str) else None, kernel_fallbacks=prep.kernel_fallbacks)
    run.run()

    okey = skey and events is None and ("ordering", *skey, prune_events)
    ordering = prep.cached(okey or None, lambda: edge_ordering(graph, kinds=kinds, streams=smap, events=ev,
                                                               reduction=red)).copy()
    end_all = run.end_s
    # idle rows: the gaps on every host thread's lane
    for t, rows in enumerate(run.thread_rows):
        rows.sort()
        cur = 0.0
        for s, e in rows:
            if s > cur + 1e-15:
                run._row(run.tname[t], "host", "idle", "idle", cur, s, device=host)
            cur = max(cur, e)
        if end_all > cur + 1e-15:
            run._row(run.tname[t], "host", "idle", "idle", cur, end_all, device=host)
    tl = run.tb.build()

    lb = dict(prep.cached(("lb", plan.n_threads), lambda: lower_bound(graph, kinds, durations, devices, c, plan.n_threads)))
    makespan = end_all
    busy = _device_busy(run, devices, kinds)
    metrics = {
        "makespan_s": makespan,
        **range_metrics(prep.range_factors, makespan),
        **lb,
        "gap_to_lb": (makespan / lb["lb_s"] - 1.0) if lb["lb_s"] > 0 else 0.0,
        "device_busy_frac": (busy / makespan) if makespan > 0 else 0.0,
        "host_blocked_s": run.blocked_s,
        "host_busy_max_s": max(run.host_busy),
        "n_events": len(ev),
        "n_stream_waits": run.n_stream_waits,
        "n_host_syncs": run.n_host_syncs,
        "n_handoffs": run.n_handoffs,
        "n_rule_fallbacks": run.n_fallbacks,
        "n_kernel_fallbacks": len(prep.kernel_fallbacks),
        "n_threads_used": len(set(run.thread_of.values())),
        "n_threads": plan.n_threads,
        "n_streams": len(set(smap.values())),
        "n_unordered_edges": int((ordering["mechanism"] == "race").sum()),
        "n_sim_events": run.sim.n_events,
    }
    params = {
        "streams": streams if isinstance(streams, str) else "custom",
        "threads": plan.name,
        "pool_size": plan.n_threads,
        "costs": c.name,
        "max_streams": max_streams,
        "prune_events": prune_events,
        "events": "planned" if events is None else "given",
    }
    return ExecutorResult(
        metrics=metrics,
        timeline=tl,
        steps=run.steps,
        params=params,
        initial_state={},
        kinds=kinds,
        streams=smap,
        thread_of=run.thread_of,
        events=ev,
        ordering=ordering,
        op_start_s=run.op_start,
        op_end_s=run.op_end,
        launch_end_s=run.launch_end,
        durations_s=durations,
        costs=c,
    )


def _device_busy(run: _Run, devices, kinds) -> float:
    """Time the busiest device has at least one kernel or copy running (union of intervals)."""
    per: dict[str, list[tuple[float, float]]] = {}
    for n, k in kinds.items():
        if k in DEVICE_KINDS:
            per.setdefault(devices[n], []).append((run.op_start[n], run.op_end[n]))
    best = 0.0
    for iv in per.values():
        iv.sort()
        tot = 0.0
        cs, ce = iv[0]
        for s, e in iv[1:]:
            if s > ce:
                tot += ce - cs
                cs, ce = s, e
            else:
                ce = max(ce, e)
        tot += ce - cs
        best = max(best, tot)
    return best


def rules_fired(result: ExecutorResult) -> pd.DataFrame:
    """How often each dispatch rule decided, from the steps: ``rule, claim, meaning, fallback, count``.

    >>> import hetsched.executor as ex
    >>> r = ex.simulate(ex.graphs.d2h_branch_graph(8, 4), streams="patent", threads="patent", pool_size=2)
    >>> f = rules_fired(r).set_index("rule")
    >>> int(f.loc["claim5-async-async", "count"]) > 0
    True
    """
    counts: dict[str, int] = {}
    for s in result.steps:
        rule = s.data.get("rule") if s.data else None
        if rule is not None:
            counts[rule] = counts.get(rule, 0) + 1
    rows = [{"rule": r, "claim": THREAD_RULES.get(r, ("-", ""))[0], "meaning": THREAD_RULES.get(r, ("-", r))[1],
             "fallback": is_fallback(r), "count": n} for r, n in counts.items()]
    return pd.DataFrame(rows, columns=["rule", "claim", "meaning", "fallback", "count"])


_DISPATCH_COLUMNS = ["index", "op", "time_s", "thread", "rule", "claim", "fallback", "trigger", "trigger_kind", "kind",
                     "inline", "handoff", "stream", "stream_rule", "device", "kernel_fallback", "reason"]


def dispatch_frame(result: ExecutorResult) -> pd.DataFrame:
    """The dispatch log as a filterable table, one row per step (the columns a step table shows).

    >>> import hetsched.executor as ex
    >>> r = ex.simulate(ex.graphs.thread_rules_graph(), streams="patent", threads="patent")
    >>> f = dispatch_frame(r); f.loc[f["op"] == "nms", ["claim", "stream"]].values.tolist()
    [['claim 5', 'gpu0:sync']]
    """
    rows = [{"index": s.index, "op": s.subject, **{k: (s.data or {}).get(k) for k in _DISPATCH_COLUMNS[2:-1]},
             "reason": s.reason} for s in result.steps]
    return pd.DataFrame(rows, columns=_DISPATCH_COLUMNS)


_THREAD_COLUMNS = ["thread", "lane", "n_ops", "n_sync_ops", "ops", "busy_s", "blocked_s", "wakeup_s", "idle_s"]


def thread_summary(result: ExecutorResult) -> pd.DataFrame:
    """What each host thread did: one row per thread of the pool, used or not.

    ``ops`` lists the ops it dispatched in decision order; ``n_sync_ops`` counts the synchronous
    ones (the ops that hold it: claim 1's sync ops); ``busy_s`` is its launch and compute time,
    ``blocked_s`` its sync waits (a sync op's work, an event synchronize before a host op),
    ``wakeup_s`` the time spent waking up after hand-offs, ``idle_s`` the rest of the makespan.

    >>> import hetsched.executor as ex
    >>> r = ex.simulate(ex.graphs.thread_rules_graph(), streams="patent", threads="patent", pool_size=4)
    >>> f = thread_summary(r).set_index("thread")
    >>> int(f.loc[0, "n_sync_ops"]), int((f["blocked_s"] > 0).sum())   # the async thread never waits; three do
    (0, 3)
    """
    n = int(result.metrics.get("n_threads", 0) or 0)
    lanes = [f"thread{t}" for t in range(n)]
    order: dict[int, list[str]] = {t: [] for t in range(n)}
    for s in result.steps:
        t = (s.data or {}).get("thread")
        if t in order:
            order[t].append(s.subject)
    if not result.steps:  # steps not recorded: the dispatch order is unknown, graph order it is
        for op, t in result.thread_of.items():
            order.setdefault(t, []).append(op)
    tl = result.timeline
    host = tl[tl["group"] == "host"]
    dur = (host["end_s"] - host["start_s"]).groupby([host["lane"], host["kind"]]).sum()

    def total(lane: str, *kinds: str) -> float:
        return float(sum(dur.get((lane, k), 0.0) for k in kinds))

    rows = [{"thread": t, "lane": lanes[t], "n_ops": len(order[t]),
             "n_sync_ops": sum(1 for o in order[t] if result.kinds.get(o) in SYNC_KINDS), "ops": list(order[t]),
             "busy_s": total(lanes[t], "launch", "compute"), "blocked_s": total(lanes[t], "blocked"),
             "wakeup_s": total(lanes[t], "wait"), "idle_s": total(lanes[t], "idle")} for t in range(n)]
    return pd.DataFrame(rows, columns=_THREAD_COLUMNS)
