"""The one clock: the evaluator's model of time and data movement, shared by every caller.

:func:`hetsched.evaluate` (which records every interval as a timeline row) and the mapping
engine's incremental re-timing (:class:`hetsched.mapping.engine.Ctx`: thousands of remap trials,
no rows) both run :meth:`Clock.run`; the additive "system total latency" of the compute-first mapping patent
(claim 5) is :meth:`Clock.op_busy_s` plus :meth:`Clock.tensor_busy_s`, derived from the same
routing rule (:func:`copy_source`) and the same per-hop prices. There is no second copy of the
model to keep in step.

The model (that of H2H, Zhang et al., DAC 2022, and of the compute-first mapping patent; the full statement,
memory included, is in :mod:`hetsched.evaluate`):

* a device runs its ops one at a time, in the global op order;
* an op whose weights are not resident fetches them from the host just before it runs, less the
  part another reader of the same (tied) weights keeps resident on its device
  (:meth:`hetsched.weights.TiedWeights.fetch_bytes`);
* an input not yet on the op's device is copied there (:func:`copy_source` says from where); a
  copy of a *kept* tensor stays for later readers on that device, any other copy serves one reader;
* an output is written back to the host unless it is kept in its producer's memory (a kept graph
  output is written back as well); a tensor written back and not kept lives on the host only;
* transfers are store-and-forward over each hop of the route, serialised per link lane
  (:meth:`hetsched.system.System.lane`) unless ``contention=False``; every hop is priced by the
  cost model's ``transfer_s`` and every op by its ``compute_s``.

Examples
--------
>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> g, s = chain(3, seed=0), toy_system()
>>> clk = Clock(g, s)
>>> makespan, op_end = clk.run({o: "gpu0" for o in g}, set(), set())
>>> makespan == max(op_end.values()) or makespan > max(op_end.values())   # write-backs may end last
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Mapping, Sequence

from .cost import CostModel, resolve_cost
from .graph import OpGraph
from .system import System
from .weights import TiedWeights

__all__ = ["Clock", "Snapshot", "copy_source", "FETCH", "LOCAL", "COPY", "COMPUTE", "OUTPUT"]

# event kinds of :meth:`Clock.run`'s log
FETCH, LOCAL, COPY, COMPUTE, OUTPUT = range(5)


def copy_source(avail: Collection[str], producer_dev: str | None, kept: bool, host: str) -> str:
    """Where a reader whose device lacks a tensor copies it from.

    ``avail``: the devices holding a copy now. A kept tensor is copied from its producer's device
    (a direct device-to-device copy); anything else comes from host memory, where every tensor that
    is not kept was written back (the patent's "intermediate results in host memory"). A reader
    whose device is in ``avail`` reads in place.

    >>> copy_source({"cpu0"}, "fpga0", False, "cpu0")
    'cpu0'
    >>> copy_source({"fpga0"}, "fpga0", True, "cpu0")
    'fpga0'
    """
    if kept and producer_dev is not None and producer_dev in avail:
        return producer_dev
    return host


@dataclass
class Snapshot:
    """Clock state before one op of the order (to re-time only a suffix of the order)."""

    lane_free: dict[str, float]
    dev_free: dict[str, float]
    loc: dict[str, dict[str, float]]
    makespan: float


class Clock:
    """The evaluator's clock for one (graph, system, cost, order) and its per-hop price cache.

    Parameters
    ----------
    graph : OpGraph
    system : System
    cost : CostModel, optional
        Bound to ``graph`` here (default: roofline).
    order : sequence of str, optional
        The global op order (default: the graph's topological order); not checked here.
    contention : bool
        Serialise transfers per link lane (default) or give each its own channel.
    """

    def __init__(self, graph: OpGraph, system: System, cost: CostModel | None = None, *,
                 order: Sequence[str] | None = None, contention: bool = True) -> None:
        self.graph = graph
        self.system = system
        self.cost = resolve_cost(cost, graph, system)
        self.host = system.host
        self.contention = contention
        self.order: list[str] = list(order) if order is not None else graph.topological_order()
        self.ops = graph.ops
        tens = graph.tensors
        self.size = {t: float(tt.size_bytes) for t, tt in tens.items()}
        self.producer = {t: tt.producer for t, tt in tens.items()}
        self.consumers = {t: tt.consumers for t, tt in tens.items()}
        self.is_output = {t: tt.is_output for t, tt in tens.items()}
        ops = self.ops
        self.weight = {o: float(ops[o].weight_bytes) for o in self.order}
        #: tied weights (one weight read by several ops): what a reader fetches depends on the others
        self.tied = TiedWeights.of(graph)
        # unchecked accessors: the hot loop reads them once per op
        self._inputs = graph._inputs
        self._outputs = graph._outputs
        self._comp: dict[tuple[str, str], float] = {}
        self._hops: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
        self._hop_s: dict[tuple[float, str, str], float] = {}
        self._xfer: dict[tuple[float, str, str], float] = {}

    # ---------------------------------------------------------------- prices
    def comp(self, op: str, dev: str) -> float:
        """Compute time of ``op`` on ``dev`` with its data resident (cached)."""
        k = (op, dev)
        v = self._comp.get(k)
        if v is None:
            v = self._comp[k] = float(self.cost.compute_s(self.ops[op], dev))
        return v

    def hops(self, src: str, dst: str) -> list[tuple[str, str, str]]:
        """``(a, b, lane)`` per hop of the route from ``src`` to ``dst`` (cached)."""
        k = (src, dst)
        h = self._hops.get(k)
        if h is None:
            h = []
            a = src
            lane = self.system.lane
            for ln in self.system.route(src, dst):
                b = ln.dst if ln.src == a else ln.src
                h.append((a, b, lane(a, b)))
                a = b
            self._hops[k] = h
        return h

    def hop_s(self, nbytes: float, a: str, b: str) -> float:
        """Duration of one hop, from the cost model (cached: a tensor read by several ops is priced once)."""
        k = (nbytes, a, b)
        v = self._hop_s.get(k)
        if v is None:
            v = self._hop_s[k] = self.cost.transfer_s(nbytes, a, b)
        return v

    def xfer(self, nbytes: float, src: str, dst: str) -> float:
        """Busy time of one transfer: its hops' durations, summed (cached)."""
        k = (nbytes, src, dst)
        v = self._xfer.get(k)
        if v is None:
            hop_s = self.hop_s
            v = self._xfer[k] = sum(hop_s(nbytes, a, b) for a, b, _ in self.hops(src, dst))
        return v

    # ---------------------------------------------------------------- additive busy time (claim 5)
    def op_busy_s(self, op: str, dev: str, w_res: bool, device: Mapping[str, str] | None = None,
                  resident: Collection[str] = ()) -> float:
        """Time ``dev`` spends on ``op``: its compute plus its weight fetch unless ``w_res`` (weights resident).

        ``device`` and ``resident`` (the placement and the ops with resident weights) say which tied
        weights another reader keeps on ``dev`` (then not fetched); without them every byte is fetched.
        """
        t = self.comp(op, dev)
        w = self.weight[op]
        if w and not w_res and dev != self.host:
            if device is not None and op in self.tied.related:
                w = float(self.tied.fetch_bytes(op, dev, device, resident))
            if w:
                t += self.xfer(w, self.host, dev)
        return t

    def tensor_busy_s(self, t: str, device: Mapping[str, str], resident: bool) -> float:
        """Transfer time a tensor causes: its write-back and every copy :meth:`run` makes of it.

        ``resident``: the tensor is kept in its producer's memory (``tensors_resident``).

        Every route and duration depends on the placement and residency alone (never on timing),
        so the sum over ops and tensors is the evaluator's ``total_latency_s``. Readers not yet in
        ``device`` (a partial mapping) are skipped.
        """
        host = self.host
        p = self.producer[t]
        size = self.size[t]
        xfer = self.xfer
        total = 0.0
        dp = device[p] if p is not None else None
        if dp is None or dp == host:
            avail = {host}
        elif resident:
            avail = {dp}
            if self.is_output[t]:
                total += xfer(size, dp, host)
                avail.add(host)
        else:
            # written back and freed: every reader, even on the producer's device, reads the host's copy
            total += xfer(size, dp, host)
            avail = {host}
        src = copy_source(avail, dp, resident, host)  # the same for every reader that lacks it
        for c in self.consumers[t]:
            dc = device.get(c)
            if dc is None or dc in avail:
                continue
            total += xfer(size, src, dc)
            if resident:  # a kept copy serves later readers on that device
                avail.add(dc)
        return total

    # ---------------------------------------------------------------- the clock
    def run(self, device: Mapping[str, str], w_res: Collection[str], t_res: Collection[str], *, start: int = 0,
            snap: Snapshot | None = None, checkpoints: dict[int, Snapshot] | None = None, every: int = 0,
            log: list | None = None) -> tuple[float, dict[str, float]]:
        """Time the ops of the order: ``(makespan_s, op_end_s)`` (ends of the ops run).

        ``start``/``snap`` resume from a checkpoint taken before op ``order[start]``; with
        ``checkpoints`` and ``every`` the run stores one snapshot every ``every`` ops.

        ``log`` (a list, optional) receives one tuple per event, in the order they happen per op
        (``FETCH``? then the inputs, ``COMPUTE``, then the outputs): ``(FETCH, op, dev, nbytes,
        hops)``, ``(LOCAL, tensor, op, dev)`` (read in place), ``(COPY, tensor, op, dev, src, hops,
        kept)``, ``(COMPUTE, op, dev, start, end, dur)``, ``(OUTPUT, tensor, op, dev, start, end,
        kept, hops)``; ``hops`` are ``(a, b, lane, start, end, dur)`` per hop (``None``: nothing
        moved). :func:`hetsched.evaluate` builds its timeline from this log in one pass (flat
        tuples: cheaper than a call per event).
        """
        host = self.host
        contention = self.contention
        size, producer, is_output, weight = self.size, self.producer, self.is_output, self.weight
        tied = self.tied.related
        fetch_bytes = self.tied.fetch_bytes
        inputs, outputs = self._inputs, self._outputs
        hops_of, hop_s, comp = self.hops, self.hop_s, self.comp
        if snap is None:
            lane_free: dict[str, float] = {}
            dev_free: dict[str, float] = {}
            loc: dict[str, dict[str, float]] = {}
            makespan = 0.0
            start = 0
        else:
            # loc values are replaced, never mutated in place below, so a shallow copy suffices
            lane_free, dev_free, loc, makespan = dict(snap.lane_free), dict(snap.dev_free), dict(snap.loc), snap.makespan
        op_end: dict[str, float] = {}
        recording = log is not None
        put = log.append if log is not None else None

        def transfer(nbytes: float, src: str, dst: str, t: float) -> tuple[float, list | None]:
            """Store and forward, hop by hop: the arrival time (and the hops, when recording)."""
            nonlocal makespan
            got: list | None = [] if recording else None
            for a, b, lane in hops_of(src, dst):
                if contention:
                    f = lane_free.get(lane, 0.0)
                    s = t if t > f else f
                else:
                    s = t
                dur = hop_s(nbytes, a, b)
                e = s + dur
                if contention:
                    lane_free[lane] = e
                if e > makespan:
                    makespan = e
                if got is not None:
                    got.append((a, b, lane, s, e, dur))
                t = e
            return t, got

        order = self.order
        for i in range(start, len(order)):
            if checkpoints is not None and every and i % every == 0:
                checkpoints[i] = Snapshot(dict(lane_free), dict(dev_free), dict(loc), makespan)
            o = order[i]
            d = device[o]
            ready = dev_free.get(d, 0.0)
            w = weight[o]
            if w and o not in w_res and d != host and o in tied:
                w = float(fetch_bytes(o, d, device, w_res))  # a tied weight held here is read in place
            if w and o not in w_res and d != host:
                e, hops = transfer(w, host, d, ready)
                if e > ready:
                    ready = e
                if recording:
                    put((FETCH, o, d, w, hops))
            for t in inputs.get(o, ()):
                tloc = loc.get(t)
                if tloc is None:  # a graph input: it starts in host memory
                    tloc = loc[t] = {host: 0.0}
                if d in tloc:
                    a_ = tloc[d]
                    if a_ > ready:
                        ready = a_
                    if recording:
                        put((LOCAL, t, o, d))
                    continue
                p = producer[t]
                kept = t in t_res
                src = copy_source(tloc, device[p] if p is not None else None, kept, host)
                e, hops = transfer(size[t], src, d, tloc[src])
                if e > ready:
                    ready = e
                if kept:
                    tloc = dict(tloc)
                    tloc[d] = e
                    loc[t] = tloc
                if recording:
                    put((COPY, t, o, d, src, hops, kept))
            dur = comp(o, d)
            end = ready + dur
            dev_free[d] = end
            op_end[o] = end
            if end > makespan:
                makespan = end
            if recording:
                put((COMPUTE, o, d, ready, end, dur))
            for t in outputs.get(o, ()):
                hops = None
                if d == host:
                    loc[t] = {host: end}
                    kept = False
                elif t in t_res:
                    kept = True
                    if is_output[t]:  # a kept graph output is written back as well
                        e, hops = transfer(size[t], d, host, end)
                        loc[t] = {d: end, host: e}
                    else:
                        loc[t] = {d: end}
                else:
                    kept = False
                    e, hops = transfer(size[t], d, host, end)
                    loc[t] = {host: e}
                if recording:
                    put((OUTPUT, t, o, d, ready, end, kept, hops))
        return makespan, op_end
