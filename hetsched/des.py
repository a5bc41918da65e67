"""The discrete-event core shared by every simulator (buffered backends, executor, pipelines).

One heap ordered by ``(time, priority, seq)`` is the only clock: deterministic (ties broken by
priority, then by the order events were scheduled), small, and with no threads. This is simpy's
design reduced to what hetsched needs: callbacks at times, cancellation, and a run loop.

Examples
--------
>>> sim = Simulator()
>>> log = []
>>> _ = sim.at(2.0, log.append, "b")
>>> _ = sim.at(1.0, log.append, "a")
>>> _ = sim.at(2.0, log.append, "first at 2", priority=-1)
>>> sim.run()
2.0
>>> log
['a', 'first at 2', 'b']
"""

from __future__ import annotations

import heapq
import math
from typing import Any, Callable

from .errors import HetschedError

__all__ = ["Simulator", "Event"]


class Event:
    """A scheduled callback; ``cancel()`` it to drop it without touching the heap."""

    __slots__ = ("time", "priority", "seq", "fn", "args", "cancelled")

    def __init__(self, time: float, priority: int, seq: int, fn: Callable[..., Any], args: tuple) -> None:
        self.time = time
        self.priority = priority
        self.seq = seq
        self.fn = fn
        self.args = args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def __lt__(self, other: "Event") -> bool:
        return (self.time, self.priority, self.seq) < (other.time, other.priority, other.seq)

    def __repr__(self) -> str:
        return f"Event(t={self.time:g}, prio={self.priority}, seq={self.seq}, fn={getattr(self.fn, '__name__', self.fn)})"


class Simulator:
    """A deterministic event loop.

    Attributes
    ----------
    now : float
        Current simulated time (seconds).
    n_events : int
        Events processed so far.
    """

    def __init__(self, start_s: float = 0.0) -> None:
        self.now = float(start_s)
        self._heap: list[Event] = []
        self._seq = 0
        self.n_events = 0

    def at(self, time: float, fn: Callable[..., Any], *args: Any, priority: int = 0) -> Event:
        """Run ``fn(*args)`` at absolute ``time`` (never in the past)."""
        if not (time >= self.now - 1e-15) or math.isnan(time):
            raise HetschedError(f"cannot schedule an event at {time!r} s, before now ({self.now!r} s)", field="time")
        ev = Event(max(time, self.now), priority, self._seq, fn, args)
        self._seq += 1
        heapq.heappush(self._heap, ev)
        return ev

    def after(self, delay: float, fn: Callable[..., Any], *args: Any, priority: int = 0) -> Event:
        """Run ``fn(*args)`` ``delay`` seconds from now.

        >>> sim = Simulator(1.0); ev = sim.after(0.5, print, "ping"); ev.time
        1.5
        >>> sim.after(-1, print)
        Traceback (most recent call last):
        ...
        hetsched.errors.HetschedError: negative delay -1 s
        """
        if delay < 0:
            raise HetschedError(f"negative delay {delay!r} s", field="delay")
        return self.at(self.now + delay, fn, *args, priority=priority)

    def peek(self) -> float:
        """Time of the next live event (``inf`` when none); cancelled events are skipped.

        >>> sim = Simulator(); ev = sim.at(1.0, print); ev.cancel(); sim.peek()
        inf
        """
        while self._heap and self._heap[0].cancelled:
            heapq.heappop(self._heap)
        return self._heap[0].time if self._heap else math.inf

    def step(self) -> bool:
        """Process one event; ``False`` when none is left.

        >>> sim = Simulator(); _ = sim.at(2.0, print, "tick"); sim.step(), sim.now, sim.step()
        tick
        (True, 2.0, False)
        """
        while self._heap:
            ev = heapq.heappop(self._heap)
            if ev.cancelled:
                continue
            self.now = ev.time
            self.n_events += 1
            ev.fn(*ev.args)
            return True
        return False

    def run(self, until: float | None = None, *, max_events: int | None = None) -> float:
        """Process events until none is left (or time ``until``); return the final time.

        ``max_events`` guards against a model that schedules forever (raises ``HetschedError``).
        """
        n = 0
        while True:
            t = self.peek()
            if t == math.inf or (until is not None and t > until):
                break
            self.step()
            n += 1
            if max_events is not None and n > max_events:
                raise HetschedError(f"simulation exceeded {max_events} events at t={self.now:g} s (a livelock?)")
        if until is not None and until > self.now:
            self.now = until
        return self.now

    def __len__(self) -> int:
        return sum(1 for e in self._heap if not e.cancelled)
