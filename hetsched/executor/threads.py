"""Host-thread policies: which host thread dispatches each op, decided as the ops become ready.

An executor runs ops on a small pool of host threads. When a thread finishes an op (for an async op:
as soon as its kernel is launched), the op's successors whose inputs are now all produced become
*ready*, and a thread policy decides for each: run it next on this thread ("inline"), or hand it
to another thread (a cross-thread hand-off, which may have to wake that thread up).

Policies (``THREAD_POLICIES``, or pass a :class:`ThreadRule`):

* ``"single"`` -- one host thread runs everything, ready ops in first-ready-first-run order.
* ``"patent"`` -- seed-004 (``../shared/seeds/004_a60aed1db7e14913.txt``). Thread 0 is the
  *async thread* (claim 4: asynchronous ops are assigned to a first thread), threads
  ``1..pool_size-1`` form the *sync pool* (claim 4: synchronous ops to a second thread).

  - claim 5: current op async, successor async -> keep it in the current thread;
  - claim 5: current op async, successor sync -> a thread other than the current one;
  - claim 1: current op sync, sync successors -> exactly one stays in the current thread, the
    others go to other threads ("fourth threads");
  - claim 1: current op sync, async successor -> a thread different from the current one and from
    those fourth threads ("fifth thread"): the async thread.

  So a blocking host op (a D2H copy, CPU post-processing) never holds up the thread that keeps
  launching kernels. With ``pool_size=1`` everything degrades to ``"single"``.
* ``"inline_one"`` -- TensorFlow's ``ExecutorState::ScheduleReady`` (Abadi et al., OSDI 2016; the
  TF executor source): of the ops made ready by one op, the first runs inline on the same thread,
  the rest are pushed to the pool (an idle thread if there is one). Kinds are ignored.

"Another thread" is chosen deterministically: an idle thread with nothing queued (lowest index),
else the candidate with the fewest queued ops (lowest index on ties).

>>> plan = assign_threads(None, "patent", pool_size=3)
>>> plan.n_threads, plan.rule.root("a", "gpu_async", _Ctx(3))[0]
(3, 0)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import HetschedError
from .kinds import ASYNC_KINDS

__all__ = [
    "THREAD_POLICIES",
    "ThreadPlan",
    "ThreadRule",
    "SingleThread",
    "PatentThreads",
    "InlineOne",
    "assign_threads",
]


class _Ctx:
    """What a rule may look at when it picks a thread: who is idle and how long the queues are."""

    __slots__ = ("n_threads", "busy", "queued")

    def __init__(self, n_threads: int) -> None:
        self.n_threads = n_threads
        self.busy = [False] * n_threads
        self.queued = [0] * n_threads

    def pick(self, candidates: Sequence[int]) -> int:
        """An idle candidate with nothing queued (lowest index), else the shortest queue."""
        best = None
        for t in candidates:
            if not self.busy[t] and self.queued[t] == 0:
                return t
            key = (self.queued[t] + (1 if self.busy[t] else 0), t)
            if best is None or key < best:
                best = key
        if best is None:
            raise HetschedError("no candidate thread to pick from", field="threads")
        return best[1]


class ThreadRule:
    """Base of thread policies.

    ``root(op, kind, ctx) -> (thread, reason)`` places an op that is ready at the start;
    ``route(op, kind, thread, ready, ctx) -> [(succ, thread, inline, reason)]`` places the
    successors ``ready`` (a list of ``(op, kind)``) made ready when ``op`` finished on ``thread``:
    ``inline=True`` (only with the current thread) runs it next, before anything queued; otherwise
    it joins the back of ``thread``'s queue. A rule may bump ``ctx.queued[t]`` so that later picks
    in the same batch see the op it just queued.
    """

    name = "custom"

    def root(self, op: str, kind: str, ctx: _Ctx) -> tuple[int, str]:  # pragma: no cover - interface
        raise NotImplementedError

    def route(self, op: str, kind: str, thread: int, ready: list[tuple[str, str]], ctx: _Ctx) -> list[tuple[str, int, bool, str]]:  # pragma: no cover
        raise NotImplementedError


class SingleThread(ThreadRule):
    """Everything on thread 0, in first-ready-first-run order."""

    name = "single"

    def root(self, op, kind, ctx):
        return 0, "one host thread: queued in program order"

    def route(self, op, kind, thread, ready, ctx):
        return [(s, 0, False, "one host thread: queued behind the ops already ready") for s, _k in ready]


class PatentThreads(ThreadRule):
    """Seed-004 claims 1, 4 and 5 (see the module docstring)."""

    name = "patent"

    def __init__(self, pool_size: int) -> None:
        self.pool_size = pool_size
        self.sync_threads = list(range(1, pool_size)) or [0]

    def root(self, op, kind, ctx):
        if kind in ASYNC_KINDS or self.pool_size == 1:
            return 0, "claim 4: an asynchronous op goes to the first (async) thread"
        t = ctx.pick(self.sync_threads)
        return t, f"claim 4: a synchronous op goes to a sync-pool thread (thread {t})"

    def route(self, op, kind, thread, ready, ctx):
        out: list[tuple[str, int, bool, str]] = []
        if self.pool_size == 1:
            return [(s, 0, False, "pool of one thread: queued on the only thread") for s, _k in ready]
        others = [t for t in self.sync_threads if t != thread]
        if kind in ASYNC_KINDS:
            for s, k in ready:
                if k in ASYNC_KINDS:
                    out.append((s, thread, True, "claim 5: async -> async successor stays in the current thread"))
                else:
                    t = ctx.pick(others or self.sync_threads)
                    ctx.queued[t] += 1  # later picks see it
                    out.append((s, t, False, f"claim 5: async -> sync successor goes to another thread (thread {t})"))
            return out
        kept = False
        for s, k in ready:
            if k in ASYNC_KINDS:
                out.append((s, 0, False, "claim 1: sync -> async successor goes to the async thread (not the current "
                                  "one, not the sync threads)"))
            elif not kept:
                kept = True
                out.append((s, thread, True, "claim 1: sync -> sync successor: one stays in the current thread"))
            else:
                cand = others if others else [thread]
                t = ctx.pick(cand)
                ctx.queued[t] += 1
                why = ("claim 1: sync -> further sync successors go to other threads"
                       if t != thread else "claim 1 wants another thread, but the sync pool has only this one")
                out.append((s, t, False, f"{why} (thread {t})"))
        return out


class InlineOne(ThreadRule):
    """TensorFlow's executor: one ready successor inline, the rest to the pool."""

    name = "inline_one"

    def __init__(self, pool_size: int) -> None:
        self.pool_size = pool_size

    def root(self, op, kind, ctx):
        t = ctx.pick(range(self.pool_size))
        ctx.queued[t] += 1
        return t, f"ready at the start: pushed to the pool (thread {t})"

    def route(self, op, kind, thread, ready, ctx):
        out: list[tuple[str, int, bool, str]] = []
        for i, (s, _k) in enumerate(ready):
            if i == 0:
                out.append((s, thread, True, "TF inline: the first ready successor runs inline"))
                continue
            cand = [t for t in range(self.pool_size) if t != thread] or [thread]
            t = ctx.pick(cand)
            ctx.queued[t] += 1
            out.append((s, t, False, f"TF inline: other ready successors go to the pool (thread {t})"))
        return out


@dataclass(frozen=True)
class ThreadPlan:
    """A thread policy with its pool: what :func:`~hetsched.executor.simulate` runs.

    Attributes
    ----------
    name : str
    n_threads : int
    rule : ThreadRule
    """

    name: str
    n_threads: int
    rule: Any

    def thread_name(self, t: int) -> str:
        """Lane name of thread ``t`` (``thread0`` is the async thread under the patent policy).

        >>> assign_threads(None, "patent").thread_name(0)
        'thread0'
        """
        return f"thread{t}"


THREAD_POLICIES = {"single": SingleThread, "patent": PatentThreads, "inline_one": InlineOne}


def assign_threads(graph: Any = None, policy: str | ThreadRule | ThreadPlan = "single", *, pool_size: int = 4) -> ThreadPlan:
    """The thread plan of a named policy (``single``, ``patent``, ``inline_one``) or a custom rule.

    The assignment itself happens while the executor runs (a thread is chosen when an op becomes
    ready, as in Paddle and TensorFlow); the result's ``thread_of`` and ``steps`` record it.

    Parameters
    ----------
    graph : OpGraph or None
        Accepted for symmetry with :func:`~hetsched.executor.assign_streams` (not needed: the
        rules look only at op kinds at run time).
    policy : str, ThreadRule or ThreadPlan
    pool_size : int
        Number of host threads (``"single"`` always uses one).

    Raises
    ------
    HetschedError
        Unknown policy (``field="policy"``) or ``pool_size < 1``.

    >>> assign_threads(None, "single", pool_size=8).n_threads
    1
    >>> assign_threads(None, "inline_one", pool_size=4).n_threads
    4
    """
    if isinstance(policy, ThreadPlan):
        return policy
    if not isinstance(pool_size, int) or pool_size < 1:
        raise HetschedError(f"pool_size must be a positive integer, got {pool_size!r}", field="pool_size")
    if isinstance(policy, ThreadRule):
        n = getattr(policy, "pool_size", pool_size)
        return ThreadPlan(getattr(policy, "name", "custom"), n, policy)
    cls = THREAD_POLICIES.get(policy) if isinstance(policy, str) else None
    if cls is None:
        raise HetschedError(f"unknown thread policy {policy!r}; choose from {sorted(THREAD_POLICIES)}", field="policy")
    if cls is SingleThread:
        return ThreadPlan("single", 1, SingleThread())
    return ThreadPlan(policy, pool_size, cls(pool_size))
