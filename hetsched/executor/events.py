"""Events between streams and the race checker.

A data edge ``u -> v`` is safe when something guarantees that ``v``'s work starts after ``u``'s
work ends. Four things can, in an executor that only dispatches ``v`` after ``u`` was dispatched:

* ``host``   -- ``u`` is synchronous (``cpu_sync``, ``gpu_sync``, ``copy_d2h``): its host thread only
  lets go of it once the work is done, so anything dispatched afterwards comes later;
* ``stream`` -- ``u`` and ``v`` are on the same stream: a stream runs its work in FIFO order;
* ``event``  -- ``u`` is asynchronous and ``v`` elsewhere: the host records an event after ``u``
  (``cudaEventRecord``) and either the host blocks on it before a host op ``v``
  (``cudaEventSynchronize``: a *host sync*) or ``v``'s stream waits on it (``cudaStreamWaitEvent``:
  a *stream wait*). This is the executor patent's cross-stream synchronization
  (``docs/patents.md``: kernels of async and sync ops on different
  streams need events between them);
* ``implied`` -- ``u -> v`` is not in the transitive reduction: another path ``u -> w -> ... -> v``
  orders them, because every edge of the reduction is ordered by one of the above (induction).

:func:`plan_events` puts events only where they are needed: on edges of the transitive reduction
that leave an async device op for another stream or for the host. :func:`check_races` proves that a
plan orders every edge and names the first one it does not (a *race*).

>>> from hetsched.io.generators import fork_join
>>> from hetsched.executor import classify, assign_streams
>>> g = fork_join(2, 1); k = classify(g); s = assign_streams(g, "nimble", kinds=k)
>>> ev = plan_events(g, k, s); len(ev)
2
>>> sorted(check_races(g, kinds=k, streams=s, events=ev)["mechanism"])
['event: stream wait', 'event: stream wait', 'stream', 'stream']
>>> check_races(g, kinds=k, streams=s, events=[])
Traceback (most recent call last):
...
hetsched.errors.ScheduleError: race: nothing orders 'b1_0' after 'fork' (async gpu_async on gpu0:s0, consumer gpu_async on gpu0:s1, no event)
"""

from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd

from ..errors import ScheduleError
from ..graph import OpGraph
from .kinds import ASYNC_KINDS, DEVICE_KINDS
from .streams import reduction_of

__all__ = ["needs_event", "plan_events", "edge_ordering", "check_races"]


def needs_event(u_kind: str, v_kind: str, u_stream: str | None, v_stream: str | None) -> bool:
    """Whether the edge ``u -> v`` needs an event: ``u`` async, and ``v`` on the host or another stream.

    >>> needs_event("gpu_async", "cpu_sync", "gpu0:s0", None), needs_event("gpu_async", "gpu_async", "a", "a")
    (True, False)
    """
    if u_kind not in ASYNC_KINDS:
        return False
    if v_kind not in DEVICE_KINDS:
        return True
    return u_stream != v_stream


def plan_events(
    graph: OpGraph,
    kinds: Mapping[str, str],
    streams: Mapping[str, str],
    *,
    prune: bool = True,
    reduction: list[tuple[str, str]] | None = None,
) -> tuple[tuple[str, str], ...]:
    """The edges that get an event, in topological order of their source.

    With ``prune`` (default) only edges of the transitive reduction are considered: the others are
    ordered through a path (Nimble, Kwon et al. 2020, section 4.2, synchronizes only the edges of the
    minimum equivalent graph). ``prune=False`` puts an event on every cross-stream edge.
    ``reduction`` reuses already computed :func:`transitive_reduction_edges`.

    >>> from hetsched.io.generators import chain
    >>> g = chain(3); k = {"op0": "gpu_async", "op1": "gpu_async", "op2": "cpu_sync"}
    >>> plan_events(g, k, {"op0": "gpu0:s0", "op1": "gpu0:s0"})
    (('op1', 'op2'),)
    """
    if prune and reduction is None:
        reduction = reduction_of(graph)
    edges = reduction if prune else [
        (u, v) for u in graph.topological_order() for v in graph.nx.successors(u)
    ]
    return tuple((u, v) for u, v in edges if needs_event(kinds[u], kinds[v], streams.get(u), streams.get(v)))


def edge_ordering(
    graph: OpGraph,
    *,
    kinds: Mapping[str, str],
    streams: Mapping[str, str],
    events: Iterable[tuple[str, str]],
    reduction: list[tuple[str, str]] | None = None,
) -> pd.DataFrame:
    """What orders each data edge: a frame ``src, dst, mechanism`` (``race`` when nothing does).

    >>> from hetsched.io.generators import chain
    >>> g = chain(3); k = {"op0": "gpu_async", "op1": "gpu_async", "op2": "cpu_sync"}
    >>> edge_ordering(g, kinds=k, streams={"op0": "s", "op1": "s"}, events=[("op1", "op2")])["mechanism"].tolist()
    ['stream', 'event: host sync']
    """
    ev = {tuple(e) for e in events}
    red = set(reduction if reduction is not None else reduction_of(graph))
    src: list[str] = []
    dst: list[str] = []
    mech: list[str] = []
    succ = graph.nx.succ
    for u in graph.topological_order():
        ku = kinds[u]
        su = streams.get(u)
        for v in succ[u]:
            kv = kinds[v]
            if ku not in ASYNC_KINDS:
                m = "host"
            elif kv in DEVICE_KINDS and su == streams.get(v):
                m = "stream"
            elif (u, v) in ev:
                m = "event: stream wait" if kv in DEVICE_KINDS else "event: host sync"
            elif (u, v) not in red:
                m = "implied"
            else:
                m = "race"
            src.append(u)
            dst.append(v)
            mech.append(m)
    return pd.DataFrame({"src": pd.Series(src, dtype=object), "dst": pd.Series(dst, dtype=object),
                         "mechanism": pd.Series(mech, dtype=object)})


def check_races(
    graph: OpGraph,
    *,
    kinds: Mapping[str, str],
    streams: Mapping[str, str],
    events: Iterable[tuple[str, str]],
) -> pd.DataFrame:
    """Prove every data edge is ordered by a stream, an event, a host sync or a path of those.

    Returns the :func:`edge_ordering` frame; raises :class:`~hetsched.errors.ScheduleError`
    (``op`` = the consumer, ``details['pred']`` = the producer) on the first unordered edge.
    """
    df = edge_ordering(graph, kinds=kinds, streams=streams, events=events)
    bad = df[df["mechanism"] == "race"]
    if len(bad):
        u, v = bad["src"].iat[0], bad["dst"].iat[0]
        kv = kinds[v]
        where_v = f"on {streams.get(v)}" if kv in DEVICE_KINDS else "on the host"
        raise ScheduleError(
            f"race: nothing orders {v!r} after {u!r} (async {kinds[u]} on {streams.get(u)}, consumer {kv} {where_v}, no event)",
            op=v,
            pred=u,
            n_races=int(len(bad)),
        )
    return df
