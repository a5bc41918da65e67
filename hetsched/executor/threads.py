"""Host-thread policies: which host thread dispatches each op, decided as the ops become ready.

An executor runs ops on a small pool of host threads. When a thread finishes an op (for an async op:
as soon as its kernel is launched), the op's successors whose inputs are now all produced become
*ready*, and a thread policy decides for each: run it next on this thread ("inline"), or hand it
to another thread (a cross-thread hand-off, which may have to wake that thread up).

Policies (``THREAD_POLICIES``, or pass a :class:`ThreadRule`):

* ``"single"`` -- one host thread runs everything, ready ops in first-ready-first-run order.
* ``"patent"`` -- the operator-scheduling (executor) patent (``docs/patents.md``). Thread 0 is the
  *async thread* (claim 4: asynchronous ops are assigned to a first thread), threads
  ``1..pool_size-1`` form the *sync pool* (claim 4: synchronous ops to a second thread).

  - claim 5: current op async, successor async -> keep it in the current thread;
  - claim 5: current op async, successor sync -> a thread other than the current one;
  - claim 1: current op sync, sync successors -> exactly one stays in the current thread, the
    others go to other threads ("fourth threads");
  - claim 1: current op sync, async successor -> a thread different from the current one and from
    those fourth threads ("fifth thread"): the async thread.

  So a blocking host op (a D2H copy, CPU post-processing) never holds up the thread that keeps
  launching kernels. With ``pool_size=1`` everything degrades to ``"single"``; with
  ``pool_size=2`` the sync pool is one thread, so claim 1's "other sync successors go to a
  different thread" cannot be met: they queue on the current thread. Such decisions carry a
  ``-fallback`` rule id (:data:`THREAD_RULES`), their step says so, and the result counts them
  (``metrics["n_rule_fallbacks"]``).
* ``"inline_one"`` -- TensorFlow's ``ExecutorState::ScheduleReady`` (Abadi et al., OSDI 2016; the
  TF executor source): of the ops made ready by one op, the first runs inline on the same thread,
  the rest are pushed to the pool (an idle thread if there is one). Kinds are ignored.

"Another thread" is chosen deterministically: an idle thread with nothing queued (lowest index),
else the candidate with the fewest queued ops (lowest index on ties).

>>> plan = assign_threads(None, "patent", pool_size=3)
>>> plan.n_threads, plan.rule.root("a", "gpu_async", ThreadContext(3))[::2]
(3, (0, 'claim4-async-root'))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..errors import HetschedError
from ..registry import lookup
from .kinds import ASYNC_KINDS

__all__ = [
    "THREAD_POLICIES",
    "THREAD_RULES",
    "is_fallback",
    "ThreadPlan",
    "ThreadRule",
    "SingleThread",
    "PatentThreads",
    "InlineOne",
    "assign_threads",
]


class ThreadContext:
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


#: every dispatch rule a built-in thread policy applies: ``rule id -> (claim, what it says)``. A rule
#: id ending in ``-fallback`` marks a decision where the policy could not do what its rule asks
#: (too few threads) and did the nearest thing; :func:`~hetsched.executor.simulate` counts them in
#: ``metrics["n_rule_fallbacks"]`` and says so in the step's reason.
THREAD_RULES: dict[str, tuple[str, str]] = {
    "claim4-async-root": ("claim 4", "an asynchronous op ready at the start goes to the first (async) thread"),
    "claim4-sync-root": ("claim 4", "a synchronous op ready at the start goes to a sync-pool thread"),
    "claim5-async-async": ("claim 5", "async op -> async successor: stays in the current thread"),
    "claim5-async-sync": ("claim 5", "async op -> sync successor: goes to another thread"),
    "claim1-sync-sync-keep": ("claim 1", "sync op -> sync successor: one of them stays in the current thread"),
    "claim1-sync-sync-other": ("claim 1", "sync op -> further sync successors: go to other threads (fourth threads)"),
    "claim1-sync-async": ("claim 1", "sync op -> async successor: goes to a thread other than the current one and "
                                     "the fourth threads (fifth thread: the async thread)"),
    "claim1-sync-sync-other-fallback": ("claim 1", "sync op -> further sync successors should go to other threads, "
                                                   "but the sync pool has no other thread: queued on the current one"),
    "claim4-sync-root-fallback": ("claim 4", "a synchronous op should go to a second thread, but there is one "
                                             "thread: queued on it"),
    "claim5-async-sync-fallback": ("claim 5", "async op -> sync successor should go to another thread, but there "
                                              "is one thread: queued on it"),
    "claim1-sync-async-fallback": ("claim 1", "sync op -> async successor should go to another thread, but there "
                                              "is one thread: queued on it"),
    "single": ("-", "one host thread: queued in first-ready-first-run order"),
    "tf-root": ("-", "TensorFlow: an op ready at the start is pushed to the pool"),
    "tf-inline": ("-", "TensorFlow: the first ready successor runs inline"),
    "tf-pool": ("-", "TensorFlow: other ready successors go to the pool"),
}


def is_fallback(rule: str | None) -> bool:
    """Whether a rule id marks a decision the policy could not make as its rule asks.

    >>> is_fallback("claim1-sync-sync-other-fallback"), is_fallback("claim5-async-async")
    (True, False)
    """
    return bool(rule) and str(rule).endswith("-fallback")


class ThreadRule:
    """Base of thread policies.

    ``root(op, kind, ctx) -> (thread, reason[, rule])`` places an op that is ready at the start;
    ``route(op, kind, thread, ready, ctx) -> [(succ, thread, inline, reason[, rule])]`` places the
    successors ``ready`` (a list of ``(op, kind)``) made ready when ``op`` finished on ``thread``:
    ``inline=True`` (only with the current thread) runs it next, before anything queued; otherwise
    it joins the back of ``thread``'s queue. ``rule`` (optional) is an id of :data:`THREAD_RULES`
    or any string naming the rule that decided (``-fallback`` at the end when the rule could not
    be met). A rule may bump ``ctx.queued[t]`` so that later picks in the same batch see the op it
    just queued.
    """

    name = "custom"

    def root(self, op: str, kind: str, ctx: ThreadContext) -> tuple:  # pragma: no cover - interface
        raise NotImplementedError

    def route(self, op: str, kind: str, thread: int, ready: list[tuple[str, str]], ctx: ThreadContext) -> list[tuple]:  # pragma: no cover
        raise NotImplementedError


def _why(rule: str, detail: str = "") -> str:
    claim, text = THREAD_RULES[rule]
    return f"{claim + ': ' if claim != '-' else ''}{text}{detail}"


class SingleThread(ThreadRule):
    """One host thread: everything on thread 0, in first-ready-first-run order."""

    name = "single"

    def root(self, op, kind, ctx):
        return 0, _why("single"), "single"

    def route(self, op, kind, thread, ready, ctx):
        return [(s, 0, False, _why("single"), "single") for s, _k in ready]


class PatentThreads(ThreadRule):
    """The patent's thread rules: claims 1, 4 and 5 of the executor patent (see the module docstring); every
    decision names its rule."""

    name = "patent"

    def __init__(self, pool_size: int) -> None:
        self.pool_size = pool_size
        self.sync_threads = list(range(1, pool_size)) or [0]

    def root(self, op, kind, ctx):
        if kind in ASYNC_KINDS:
            return 0, _why("claim4-async-root"), "claim4-async-root"
        if self.pool_size == 1:
            return 0, _why("claim4-sync-root-fallback"), "claim4-sync-root-fallback"
        t = ctx.pick(self.sync_threads)
        ctx.queued[t] += 1
        return t, _why("claim4-sync-root", f" (thread {t})"), "claim4-sync-root"

    def route(self, op, kind, thread, ready, ctx):
        out: list[tuple] = []
        if self.pool_size == 1:
            for s, k in ready:
                if kind in ASYNC_KINDS:
                    rule = "claim5-async-async" if k in ASYNC_KINDS else "claim5-async-sync-fallback"
                else:
                    rule = "claim1-sync-async-fallback" if k in ASYNC_KINDS else "claim1-sync-sync-keep"
                    if rule == "claim1-sync-sync-keep" and any(o[4] == "claim1-sync-sync-keep" for o in out):
                        rule = "claim1-sync-sync-other-fallback"
                # one thread: everything queues behind what is already there (first ready, first run)
                out.append((s, 0, False, _why(rule, " (thread 0)"), rule))
            return out
        others = [t for t in self.sync_threads if t != thread]
        if kind in ASYNC_KINDS:
            for s, k in ready:
                if k in ASYNC_KINDS:
                    out.append((s, thread, True, _why("claim5-async-async"), "claim5-async-async"))
                else:
                    t = ctx.pick(others or self.sync_threads)
                    ctx.queued[t] += 1  # later picks see it
                    out.append((s, t, False, _why("claim5-async-sync", f" (thread {t})"), "claim5-async-sync"))
            return out
        kept = False
        for s, k in ready:
            if k in ASYNC_KINDS:
                out.append((s, 0, False, _why("claim1-sync-async", " (thread 0)"), "claim1-sync-async"))
            elif not kept:
                kept = True
                out.append((s, thread, True, _why("claim1-sync-sync-keep"), "claim1-sync-sync-keep"))
            elif others:
                t = ctx.pick(others)
                ctx.queued[t] += 1
                out.append((s, t, False, _why("claim1-sync-sync-other", f" (thread {t})"), "claim1-sync-sync-other"))
            else:
                ctx.queued[thread] += 1
                out.append((s, thread, False, _why("claim1-sync-sync-other-fallback", f" (thread {thread}; pool of "
                                                   f"{self.pool_size} threads, one of them the async thread)"),
                            "claim1-sync-sync-other-fallback"))
        return out


class InlineOne(ThreadRule):
    """TensorFlow's inline-one: TensorFlow's executor runs one ready successor inline, the rest go to the pool."""

    name = "inline_one"

    def __init__(self, pool_size: int) -> None:
        self.pool_size = pool_size

    def root(self, op, kind, ctx):
        t = ctx.pick(range(self.pool_size))
        ctx.queued[t] += 1
        return t, _why("tf-root", f" (thread {t})"), "tf-root"

    def route(self, op, kind, thread, ready, ctx):
        out: list[tuple] = []
        for i, (s, _k) in enumerate(ready):
            if i == 0:
                out.append((s, thread, True, _why("tf-inline"), "tf-inline"))
                continue
            cand = [t for t in range(self.pool_size) if t != thread] or [thread]
            t = ctx.pick(cand)
            ctx.queued[t] += 1
            out.append((s, t, False, _why("tf-pool", f" (thread {t})"), "tf-pool"))
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
    cls = lookup(THREAD_POLICIES, policy, what="thread policy")  # a name, or a ThreadRule class of one's own
    if cls is SingleThread:
        return ThreadPlan("single", 1, SingleThread())
    return ThreadPlan(policy if isinstance(policy, str) else cls.__name__, pool_size, cls(pool_size))
