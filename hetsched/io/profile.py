"""Measured runs as data: read a profiler trace, match its events to a graph's ops, and make one.

:func:`load_profile` reads a Chrome-trace JSON written by ``torch.profiler`` (Kineto's
``export_chrome_trace``, ``.json`` or ``.json.gz``) or by :func:`hetsched.timeline.to_chrome_trace`,
and matches its events to the ops of an :class:`~hetsched.graph.OpGraph`:

1. **by name** -- an event named like an op (a ``record_function`` annotation, as
   :func:`profile_torch` writes one per FX node; or a row of hetsched's own trace, whose ``args.op``
   names the op). The op's latency is the summed duration of the ``cpu_op`` events directly inside
   the annotation (the ATen calls, without the annotating interpreter's overhead), else the
   annotation's own duration;
2. **by op type and order** -- the remaining top-level ``aten::*`` events (an eager ``model(x)``
   under the profiler) are aligned with the remaining ops in graph order, both sides spelled as
   the op types of :data:`~hetsched.io.torch_import.ATEN_TO_TYPE` (``Gemm`` and ``MatMul`` are one
   key, views one other), with :class:`difflib.SequenceMatcher`; several iterations in one trace are
   aligned against the op sequence repeated, or split at ``ProfilerStep#N`` annotations.

Every op keeps one sample per iteration; its latency is their median (``stat=``). Events that match
no op are reported (``Profile.unmatched_events``), as are ops no event matched.

On a GPU trace (Kineto ``kernel`` events), an op's latency is the summed duration of the kernels
its CPU-side call launched (joined through ``cuda_runtime`` events and their ``correlation`` id);
the CPU-side duration is only the launch.

With ``profile_memory=True`` the trace also carries the allocator's ``[memory]`` events: the
profile's ``memory`` curve, its allocator ``peak_bytes`` (allocated during the trace, above what
was allocated before it began) and, for ops matched by name, each op's **workspace** (bytes it
allocated and freed again while running), which :func:`~hetsched.io.torch_import.load_torch`
accepts.

:func:`profile_torch` makes such a trace for a torch module: it exports it, runs the program node
by node under ``torch.profiler`` with one annotation per node (or the eager module, unannotated),
optionally in a given op order.

:func:`time_torch` measures the same without a trace, with a clock of your choice: each FX node
timed as it runs in the program, and the eager module end to end. Its ``"cpu"`` clock (the
calling thread's CPU time, with torch pinned to one thread) does not count the time the thread
waits for a core, so it measures a machine shared with other jobs as if it were quiet.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> from hetsched import evaluate
>>> from hetsched.timeline import to_chrome_trace
>>> g = chain(3)
>>> ev = evaluate(g, toy_system(), {o: "gpu0" for o in g})
>>> p = load_profile(to_chrome_trace(ev.timeline), g)
>>> p.metrics["match_rate"], p.matched_by["op1"]
(1.0, 'name')
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from ..errors import FormatError, HetschedError
from ..graph import OpGraph
from ..results import Result, StepLog
from ..timeline import make_timeline
from .files import read_json

__all__ = ["Profile", "load_profile", "profile_torch", "time_torch", "node_timer", "timed_profile", "timing", "op_key", "event_key"]

# one key for op types a trace cannot tell apart (a torch linear is a Gemm, the zoo may call it MatMul)
_CANON = {"Gemm": "MatMul", "Flatten": "Reshape", "Squeeze": "Reshape", "Unsqueeze": "Reshape",
          "Identity": "Copy", "Cast": "Copy", "Attention": "Attention"}
_STATS = {"median": statistics.median, "min": min, "mean": statistics.fmean}


def op_key(op) -> str:
    """The matching key of a graph op: its ATen target's type when it has one, else its op type.

    >>> from hetsched.graph import Op
    >>> op_key(Op("fc", "Gemm")), op_key(Op("q", "MatMul")), op_key(Op("f", "Flatten"))
    ('MatMul', 'MatMul', 'Reshape')
    """
    aten = op.attrs.get("aten") if op.attrs else None
    if aten:
        return event_key("aten::" + str(aten).split(".")[1] if str(aten).startswith("aten.") else str(aten))
    return _CANON.get(op.op_type, op.op_type)


def event_key(name: str) -> str:
    """The matching key of a trace event (``aten::linear`` -> ``MatMul``).

    >>> event_key("aten::conv2d"), event_key("aten::linear"), event_key("aten::kthvalue")
    ('Conv', 'MatMul', 'aten.kthvalue')
    """
    from .torch_import import ATEN_TO_TYPE

    packet = name[len("aten::"):] if name.startswith("aten::") else name
    typ = ATEN_TO_TYPE.get(packet, f"aten.{packet}")
    return _CANON.get(typ, typ)


@dataclass(frozen=True, kw_only=True, eq=False)
class Profile(Result):
    """Measured latencies of a graph's ops, read from a trace by :func:`load_profile`.

    Attributes
    ----------
    graph : OpGraph
    device : str
        The device name the latencies are for (a name of your system, ``cpu0`` by default).
    latency_s : dict
        ``{op: seconds}``, the ``stat`` of its samples, for every matched op.
    samples : dict
        ``{op: (seconds, ...)}``, one per iteration found in the trace.
    matched_by : dict
        ``{op: "name" | "order"}``.
    unmatched_ops : tuple
        Ops no event matched.
    unmatched_events : DataFrame
        ``name, count, total_s`` of the events (top level) that matched no op.
    n_iterations : int
    memory : DataFrame
        ``time_s, bytes`` allocated (above the trace's start) after each allocator event; empty
        without ``profile_memory``.
    peak_bytes : float or None
        The allocator's peak over the trace, above what was allocated before it (None without
        memory events).
    workspace_bytes : dict
        ``{op: bytes}`` allocated and freed again inside the op (name-matched ops with memory events).
    timeline : DataFrame
        The measured run (the iteration of median length) in the shared timeline format.
    metrics : dict
        ``n_ops, n_matched, match_rate, n_unmatched_events, n_iterations, total_s`` (sum of the
        latencies), ``iteration_s`` (median iteration span) and ``peak_bytes``.
    """

    graph: OpGraph
    device: str = "cpu0"
    latency_s: Mapping[str, float] = field(default_factory=dict)
    samples: Mapping[str, tuple] = field(default_factory=dict)
    matched_by: Mapping[str, str] = field(default_factory=dict)
    unmatched_ops: tuple = ()
    unmatched_events: pd.DataFrame = field(default_factory=pd.DataFrame)
    n_iterations: int = 0
    memory: pd.DataFrame = field(default_factory=pd.DataFrame)
    peak_bytes: float | None = None
    workspace_bytes: Mapping[str, int] = field(default_factory=dict)
    source: str = ""

    def cost_model(self, system, device: str | None = None, *, on_mismatch: str = "error"):
        """A :class:`~hetsched.cost.TableCost` of the measured latencies on ``device`` (default: the
        profile's), each entry remembering the op size it was measured at: pricing the same op at
        another batch is refused (or re-priced, see ``on_mismatch``) rather than silently reused."""
        from ..cost import TableCost, op_signature

        dev = device or self.device
        system.device(dev)
        tc = TableCost(system, {(o, dev): t for o, t in self.latency_s.items()}, on_mismatch=on_mismatch)
        probe = tc.bind(self.graph)
        tc.shapes.update({o: op_signature(probe, self.graph.op(o)) for o in self.latency_s})
        return tc

    def frame(self) -> pd.DataFrame:
        """One row per op: ``op, op_type, latency_s, n_samples, matched_by`` (NaN when unmatched)."""
        rows = [{"op": o, "op_type": op.op_type, "latency_s": self.latency_s.get(o, float("nan")),
                 "n_samples": len(self.samples.get(o, ())), "matched_by": self.matched_by.get(o)}
                for o, op in self.graph.ops.items()]
        return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- reading traces
def _read(trace: str | Path | Mapping[str, Any]) -> tuple[dict, str]:
    if isinstance(trace, Mapping):
        return dict(trace), "<trace dict>"
    if not isinstance(trace, (str, os.PathLike)):
        raise FormatError(f"a trace must be a path or a dict, got {type(trace).__name__}", field="path")
    p = Path(trace)
    if not p.exists():
        raise FormatError(f"profile {str(trace)!r} not found", field="path")
    if p.is_dir():
        raise FormatError(f"profile {str(trace)!r} is a directory, not a file", field="path")
    doc = read_json(p, gz=p.suffix == ".gz")
    if isinstance(doc, list):  # the JSON array form of the trace-event format
        doc = {"traceEvents": doc}
    return doc, p.name


def _events(doc: Mapping[str, Any], where: str) -> list[dict]:
    ev = doc.get("traceEvents") if isinstance(doc, Mapping) else None
    if not isinstance(ev, list):
        raise FormatError(f"{where}: no traceEvents list (not a Chrome/Perfetto trace)", field="traceEvents")
    out = []
    for i, e in enumerate(ev):
        if isinstance(e, dict):
            _check_event(e, i, where)
            out.append(e)
    return out


def _check_event(e: dict, i: int, where: str) -> None:
    """The fields of a trace event the matching reads have the types it reads them as: ``name`` text,
    ``ts`` and ``dur`` finite numbers >= 0, ``args`` an object, a kernel's ``correlation`` an id, a
    ``[memory]`` event's byte counts numbers; a ``cpu_op`` has a name and a duration."""
    name = e.get("name")

    def bad(what: str, fld: str) -> FormatError:
        label = f"traceEvents[{i}]" + (f" ({name!r})" if isinstance(name, str) else "")
        return FormatError(f"{where}: {label}: {what}"[:300], field=fld, event=i)

    if name is not None and not isinstance(name, str):
        raise bad(f"name must be text, got {name!r}", "name")
    cat = e.get("cat")
    for key in ("ts", "dur"):
        if key in e:
            v = e[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 <= v <= _MAX_NUMBER):
                raise bad(f"{key} must be a finite number >= 0 (microseconds), got {v!r}", key)
        elif key == "dur" and cat == "cpu_op":
            raise bad("a cpu_op event needs dur", "dur")
    if cat == "cpu_op" and name is None:
        raise bad("a cpu_op event needs a name", "name")
    for key in ("pid", "tid"):
        v = e.get(key)
        if v is not None and not isinstance(v, (int, float, str)):
            raise bad(f"{key} must be a number or text, got {v!r}", key)
    args = e.get("args")
    if args is None:
        return
    if not isinstance(args, Mapping):
        raise bad(f"args must be an object, got {type(args).__name__}", "args")
    corr = args.get("correlation")
    if corr is not None and (isinstance(corr, bool) or not isinstance(corr, (int, str))):
        raise bad(f"args.correlation must be an id (a number or text), got {corr!r}", "correlation")
    op = args.get("op")
    if op is not None and not isinstance(op, str):
        raise bad(f"args.op must be an op name, got {op!r}", "op")
    if name == "[memory]":
        if "ts" not in e:
            raise bad("a [memory] event needs ts", "ts")
        for key in ("Total Allocated", "Bytes"):
            v = args.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not abs(v) <= _MAX_NUMBER):
                raise bad(f"args[{key!r}] must be a number of bytes, got {v!r}", key)


#: the largest time or byte count a trace event may hold (inf, NaN and ints beyond a float are not)
_MAX_NUMBER = 1.7976931348623157e308


def _top_level(evs: list[dict]) -> list[dict]:
    """Events not nested inside another of the list on the same thread (sorted by start)."""
    out: list[dict] = []
    end: dict[tuple, float] = {}
    for e in sorted(evs, key=lambda e: (e["ts"], -e.get("dur", 0))):
        key = (e.get("pid"), e.get("tid"))
        if e["ts"] >= end.get(key, float("-inf")) - 1e-6:
            out.append(e)
            end[key] = e["ts"] + e.get("dur", 0)
    return out


def load_profile(trace: str | Path | Mapping[str, Any], graph: OpGraph, *, device: str = "cpu0",
                 stat: str = "median", order: Sequence[str] | None = None, gpu: bool | None = None) -> Profile:
    """Read a profiler trace and match its events to ``graph``'s ops (see the module notes).

    Parameters
    ----------
    trace : path or dict
        A Chrome-trace JSON (``.json``/``.json.gz``) or its parsed dict.
    graph : OpGraph
    device : str
        The device the latencies are for (the name it has in your system).
    stat : {"median", "min", "mean"}
        How an op's samples (one per iteration) become its latency.
    order : sequence of str, optional
        The order the ops ran in, for matching by order (default: the graph's insertion order,
        which is the execution order of a torch-imported graph and of the zoo's).
    gpu : bool, optional
        Use kernel durations (default: when the trace has ``kernel`` events).

    Raises
    ------
    FormatError
        Not a trace; an unknown ``stat``.
    HetschedError
        ``order`` lists names that are not ops of the graph.
    """
    if stat not in _STATS:
        raise FormatError(f"stat must be one of {sorted(_STATS)}, got {stat!r}", field="stat")
    doc, where = _read(trace)
    evs = _events(doc, where)
    if order is not None and (isinstance(order, (str, bytes, Mapping)) or not hasattr(order, "__iter__")):
        raise FormatError(f"order must be a list of op names, got {type(order).__name__}", field="order")
    seq = list(graph.ops) if order is None else list(order)
    if not all(isinstance(o, str) for o in seq):
        raise FormatError(f"order must be a list of op names, holds {next(o for o in seq if not isinstance(o, str))!r}"[:300],
                          field="order")
    bad = [o for o in seq if o not in graph.ops]
    if bad:
        raise HetschedError(f"order names {bad[0]!r}, which is not an op of {graph.name}", op=bad[0], field="order")
    ops = set(graph.ops)
    xs = [e for e in evs if e.get("ph") == "X" and isinstance(e.get("ts"), (int, float))]
    own = (doc.get("otherData") or {}).get("generator") is not None if isinstance(doc.get("otherData"), dict) else False
    kernels = [e for e in xs if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    use_gpu = bool(kernels) if gpu is None else bool(gpu)
    if use_gpu and not kernels:
        raise FormatError(f"{where}: gpu=True but the trace has no kernel events", field="gpu")

    samples: dict[str, list[tuple[float, float, float]]] = defaultdict(list)  # op -> [(start_us, dur_s, iteration)]
    matched_by: dict[str, str] = {}
    steps = StepLog()
    cpu_ops = [e for e in xs if e.get("cat") == "cpu_op"]
    gpu_time = _kernel_time(xs, kernels) if use_gpu else {}

    # 1. by name: annotations (or hetsched's own rows) named after ops
    spans: list[tuple[float, float, Any]] = []
    if own:
        named = [e for e in xs if (e.get("args") or {}).get("op") in ops and e.get("cat") == "compute"]
    else:
        named = [e for e in xs if e.get("name") in ops and e.get("cat") != "cpu_op"]
    by_op: dict[str, list[dict]] = defaultdict(list)
    for e in sorted(named, key=lambda e: e["ts"]):
        by_op[(e.get("args") or {}).get("op") if own else e["name"]].append(e)
    children_of = _children(cpu_ops, named) if named and not own else {}
    for o, lst in by_op.items():
        for it, e in enumerate(lst):
            kids = children_of.get(id(e), [])
            if use_gpu:
                dur = sum(gpu_time.get(id(k), 0.0) for k in kids) if kids else gpu_time.get(id(e), 0.0)
            else:
                dur = sum(k["dur"] for k in kids) if kids else float(e.get("dur", 0.0))
            samples[o].append((float(e["ts"]), float(dur) * 1e-6, it))
            spans.append((e["ts"], e["ts"] + e.get("dur", 0.0), e))
        matched_by[o] = "name"
    if by_op:
        steps.add("match_by_name", "annotations", after=float(len(by_op)), accepted=True,
                  reason=f"{len(by_op)} op(s) have events named after them"
                         + (" (hetsched trace rows)" if own else " (record_function annotations)"))

    # 2. by type and order: the remaining top-level ATen events against the remaining ops
    rest_ops = [o for o in seq if o not in matched_by]
    inside = _inside(cpu_ops, spans) if spans else set()
    top = [e for e in _top_level([e for e in cpu_ops if id(e) not in inside])]
    unmatched: list[dict] = []
    if rest_ops and top and not own:
        keys = [op_key(graph.op(o)) for o in rest_ops]
        groups = _iterations(xs, top)
        matched_events: set[int] = set()
        for gi, grp in enumerate(groups):
            ekeys = [event_key(e["name"]) for e in grp]
            useful = sum(k in set(keys) for k in ekeys)
            reps = max(1, round(useful / max(1, len(keys))))
            sm = difflib.SequenceMatcher(None, keys * reps, ekeys, autojunk=False)
            for a, b, size in sm.get_matching_blocks():
                for d in range(size):
                    i, j = a + d, b + d
                    o, e = rest_ops[i % len(keys)], grp[j]
                    dur = gpu_time.get(id(e), 0.0) if use_gpu else float(e["dur"])
                    samples[o].append((float(e["ts"]), dur * 1e-6, i // len(keys) + gi * reps))
                    matched_by[o] = "order"
                    matched_events.add(id(e))
        unmatched = [e for e in top if id(e) not in matched_events]
        n_order = sum(1 for o in rest_ops if o in matched_by)
        steps.add("match_by_order", "aten events", before=float(len(rest_ops)),
                  after=float(len(rest_ops) - n_order), accepted=n_order > 0,
                  reason=f"aligned {len(top)} top-level ATen event(s) in {len(groups)} group(s) with "
                         f"{len(rest_ops)} op(s) by type and order: {n_order} op(s) matched")
    elif not own:
        unmatched = top

    fn = _STATS[stat]
    latency = {o: float(fn([d for _, d, _ in s])) for o, s in samples.items() if s}
    n_iter = max((len(s) for s in samples.values()), default=0)
    un_ops = tuple(o for o in graph.ops if o not in latency)
    ue = pd.DataFrame([{"name": e["name"], "dur_s": e.get("dur", 0.0) * 1e-6} for e in unmatched])
    if len(ue):
        ue = ue.groupby("name", sort=False).agg(count=("dur_s", "size"), total_s=("dur_s", "sum")).reset_index()
    else:
        ue = pd.DataFrame(columns=["name", "count", "total_s"])
    mem, peak, work = _memory(evs, by_op, use_gpu)
    tl, it_s = _timeline(graph, samples, device)
    metrics = {
        "n_ops": float(graph.n_ops), "n_matched": float(len(latency)),
        "match_rate": len(latency) / graph.n_ops if graph.n_ops else 1.0,
        "n_unmatched_events": float(len(unmatched)), "n_iterations": float(n_iter),
        "total_s": float(sum(latency.values())), "iteration_s": it_s,
        "peak_bytes": float("nan") if peak is None else float(peak),
    }
    if un_ops:
        steps.add("unmatched_ops", un_ops[0], after=float(len(un_ops)), accepted=False,
                  reason=f"{len(un_ops)} op(s) matched no event: {', '.join(un_ops[:5])}"
                         + (" ..." if len(un_ops) > 5 else ""))
    return Profile(graph=graph, device=device, latency_s=latency, samples={o: tuple(d for _, d, _ in s) for o, s in samples.items()},
                   matched_by=matched_by, unmatched_ops=un_ops, unmatched_events=ue, n_iterations=n_iter, memory=mem,
                   peak_bytes=peak, workspace_bytes=work, source=where, metrics=metrics, timeline=tl, steps=steps,
                   params={"device": device, "stat": stat, "gpu": use_gpu, "source": where})


def _children(cpu_ops: list[dict], named: list[dict]) -> dict[int, list[dict]]:
    """For each annotation, the top-level ``cpu_op`` events inside it (same thread)."""
    out: dict[int, list[dict]] = {}
    by_thread: dict[tuple, list[dict]] = defaultdict(list)
    for e in cpu_ops:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    for lst in by_thread.values():
        lst.sort(key=lambda e: e["ts"])
    import bisect

    starts = {k: [e["ts"] for e in v] for k, v in by_thread.items()}
    for a in named:
        k = (a.get("pid"), a.get("tid"))
        lst, st = by_thread.get(k, []), starts.get(k, [])
        i = bisect.bisect_left(st, a["ts"] - 1e-6)
        end = a["ts"] + a.get("dur", 0.0)
        inner = []
        while i < len(lst) and lst[i]["ts"] <= end + 1e-6:
            if lst[i]["ts"] + lst[i].get("dur", 0.0) <= end + 1e-3:
                inner.append(lst[i])
            i += 1
        out[id(a)] = _top_level(inner)
    return out


def _inside(cpu_ops: list[dict], spans: list[tuple[float, float, Any]]) -> set[int]:
    """ids of cpu_op events lying within a name-matched span (their time is already counted)."""
    spans = sorted(spans, key=lambda s: s[0])
    import bisect

    st = [s[0] for s in spans]
    out = set()
    for e in cpu_ops:
        i = bisect.bisect_right(st, e["ts"] + 1e-6) - 1
        if i >= 0:
            a, b, ann = spans[i]
            if e["ts"] + e.get("dur", 0.0) <= b + 1e-3 and (ann.get("pid"), ann.get("tid")) == (e.get("pid"), e.get("tid")):
                out.add(id(e))
    return out


def _iterations(xs: list[dict], top: list[dict]) -> list[list[dict]]:
    """Split top-level events at ``ProfilerStep#N`` annotations (one group when there are none)."""
    stepsx = sorted([e for e in xs if str(e.get("name", "")).startswith("ProfilerStep#")], key=lambda e: e["ts"])
    if not stepsx:
        return [top]
    groups: list[list[dict]] = [[] for _ in stepsx]
    starts = [s["ts"] for s in stepsx]
    import bisect

    for e in top:
        i = bisect.bisect_right(starts, e["ts"] + 1e-6) - 1
        if i >= 0 and e["ts"] <= stepsx[i]["ts"] + stepsx[i].get("dur", 0.0) + 1e-3:
            groups[i].append(e)
    return [g for g in groups if g]


def _kernel_time(xs: list[dict], kernels: list[dict]) -> dict[int, float]:
    """GPU microseconds per CPU event: kernels joined to their launch (``cuda_runtime``) by ``correlation``,
    launches to the cpu_op / annotation events that contain them."""
    by_corr: dict[Any, float] = defaultdict(float)
    for k in kernels:
        c = (k.get("args") or {}).get("correlation")
        if c is not None:
            by_corr[c] += float(k.get("dur", 0.0))
    runtime = [e for e in xs if e.get("cat") in ("cuda_runtime", "cuda_driver") and (e.get("args") or {}).get("correlation") in by_corr]
    hosts = [e for e in xs if e.get("cat") in ("cpu_op", "user_annotation", "python_function")]
    out: dict[int, float] = defaultdict(float)
    by_thread: dict[tuple, list[dict]] = defaultdict(list)
    for h in hosts:
        by_thread[(h.get("pid"), h.get("tid"))].append(h)
    for r in runtime:
        t = by_corr[(r.get("args") or {})["correlation"]]
        for h in by_thread.get((r.get("pid"), r.get("tid")), ()):
            if h["ts"] - 1e-6 <= r["ts"] and r["ts"] + r.get("dur", 0.0) <= h["ts"] + h.get("dur", 0.0) + 1e-3:
                out[id(h)] += t  # every enclosing event (annotation and its ATen calls) gets the time
    return out


def _memory(evs: list[dict], by_op: Mapping[str, list[dict]], gpu: bool) -> tuple[pd.DataFrame, float | None, dict[str, int]]:
    dev_type = 1 if gpu else 0
    mem = sorted([e for e in evs if e.get("name") == "[memory]" and (e.get("args") or {}).get("Device Type", 0) == dev_type
                  and "Total Allocated" in (e.get("args") or {})], key=lambda e: e["ts"])
    if not mem:
        return pd.DataFrame(columns=["time_s", "bytes"]), None, {}
    first = mem[0]["args"]
    base = float(first["Total Allocated"]) - float(first.get("Bytes", 0))
    t0 = mem[0]["ts"]
    ts = [e["ts"] for e in mem]
    tot = [float(e["args"]["Total Allocated"]) - base for e in mem]
    frame = pd.DataFrame({"time_s": [(t - t0) * 1e-6 for t in ts], "bytes": tot})
    work: dict[str, int] = {}
    import bisect

    for o, lst in by_op.items():
        ws = []
        for a in lst:
            i, j = bisect.bisect_left(ts, a["ts"]), bisect.bisect_right(ts, a["ts"] + a.get("dur", 0.0))
            if j > i:
                before = tot[i - 1] if i > 0 else 0.0
                ws.append(max(0.0, max(tot[i:j]) - max(before, tot[j - 1])))
        if ws and max(ws) > 0:
            work[o] = int(statistics.median(ws))
    return frame, max(0.0, max(tot)), work


def _timeline(graph: OpGraph, samples: Mapping[str, list], device: str) -> tuple[pd.DataFrame, float]:
    """The measured run of the iteration of median span, times from its first op."""
    by_it: dict[float, list[tuple[str, float, float]]] = defaultdict(list)
    for o, s in samples.items():
        for ts, dur, it in s:
            by_it[it].append((o, ts, dur))
    if not by_it:
        return make_timeline([]), float("nan")
    spans = {it: (min(t for _, t, _ in rows), max(t + d * 1e6 for _, t, d in rows)) for it, rows in by_it.items()}
    full = [it for it, rows in by_it.items() if len(rows) == max(len(r) for r in by_it.values())]
    lengths = sorted(full, key=lambda it: spans[it][1] - spans[it][0])
    pick = lengths[len(lengths) // 2]
    t0 = spans[pick][0]
    rows = []
    for o, ts, dur in sorted(by_it[pick], key=lambda r: r[1]):
        rows.append(dict(lane=device, group=device, name=o, kind="compute", start_s=(ts - t0) * 1e-6,
                         end_s=(ts - t0) * 1e-6 + dur, op=o, device=device))
    # matched events can overlap when the trace nests (an op's kernels summed): keep lanes exclusive
    tl = make_timeline(rows)
    for i in range(1, len(tl)):
        if tl.at[i, "start_s"] < tl.at[i - 1, "end_s"]:
            d = tl.at[i, "end_s"] - tl.at[i, "start_s"]
            tl.at[i, "start_s"] = tl.at[i - 1, "end_s"]
            tl.at[i, "end_s"] = tl.at[i, "start_s"] + d
    its = [b - a for a, b in spans.values()]
    return tl, float(statistics.median(its)) * 1e-6


# ---------------------------------------------------------------------------- making traces
def profile_torch(model: Any, example_inputs: Sequence[Any] = (), path: str | Path | None = None, *,
                  repeats: int = 3, warmup: int = 1, annotate: bool = True, memory: bool = False,
                  order: Sequence[str] | None = None, threads: int | None = None) -> dict:
    """Run ``model`` under ``torch.profiler`` and return (and write) its Chrome trace.

    Parameters
    ----------
    model : torch.nn.Module, torch.export.ExportedProgram or torch.fx.GraphModule
    example_inputs : sequence
        Inputs of one call (for a GraphModule: every placeholder, parameters first).
    path : path, optional
        Where to write the trace JSON.
    repeats, warmup : int
        Profiled and unprofiled calls.
    annotate : bool
        Export the module and run its program node by node with a ``record_function`` named after
        each FX node (what :func:`load_profile` matches by name); ``False`` runs the eager module
        as is (matched by type and order).
    memory : bool
        ``profile_memory=True`` (allocator events: peak and per-op workspace).
    order : sequence of str, optional
        Run the program's ops in this order (a topological order of the FX nodes' names; what
        :func:`hetsched.memory.optimize_order` returns for the imported graph). Needs ``annotate``.
    threads : int, optional
        ``torch.set_num_threads`` for the run (restored afterwards).

    Runs under ``torch.no_grad()``: a joint forward + backward program computes its gradients as
    ordinary ops, and autograd must not keep its own copies of their inputs alive.

    >>> import torch
    >>> m, x = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), (torch.randn(2, 4),)
    >>> from hetsched.io.torch_import import load_torch
    >>> p = load_profile(profile_torch(m, x, repeats=2), load_torch(m, x))
    >>> p.metrics["match_rate"], p.n_iterations, sorted(set(p.matched_by.values()))
    (1.0, 2, ['name'])
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if repeats < 1 or warmup < 0:
        raise HetschedError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}", field="repeats")
    if order is not None and not annotate:
        raise HetschedError("order= needs annotate=True (the program is run node by node)", field="order")
    prev = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        run = _runner(model, tuple(example_inputs), annotate, order, record_function)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        with torch.no_grad():
            for _ in range(warmup):
                run()
            with profile(activities=acts, profile_memory=memory) as prof:
                for i in range(repeats):
                    with record_function(f"ProfilerStep#{i}"):
                        run()
                    if torch.cuda.is_available():
                        torch.cuda.synchronize()
        import os
        import tempfile

        fd, tmp = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(tmp)
            doc = json.loads(Path(tmp).read_text())
        finally:
            os.unlink(tmp)
    finally:
        torch.set_num_threads(prev)
    if path is not None:
        Path(path).write_text(json.dumps(doc))
    return doc


def program_inputs(model: Any, example_inputs: tuple):
    """``(graph_module, flat_inputs)`` of a module/program: parameters and buffers first, then the inputs."""
    import torch

    if isinstance(model, torch.fx.GraphModule):
        return model, example_inputs  # a bare program: the caller passes every placeholder
    ep = model if isinstance(model, torch.export.ExportedProgram) else torch.export.export(model, example_inputs)
    sd = {**ep.state_dict, **getattr(ep, "constants", {})}
    flat = []
    user = iter(torch.utils._pytree.tree_leaves(example_inputs))
    for spec in ep.graph_signature.input_specs:
        if spec.target is not None and spec.target in sd:
            flat.append(sd[spec.target])
        else:
            flat.append(next(user))
    return ep.graph_module, tuple(flat)


def _runner(model: Any, example_inputs: tuple, annotate: bool, order: Sequence[str] | None, record_function):
    import torch

    if not annotate:
        return lambda: model(*example_inputs)
    gm, flat = program_inputs(model, example_inputs)
    graph = gm.graph
    if order is not None:
        graph = _reordered(gm.graph, order)

    class _Annotated(torch.fx.Interpreter):
        def run_node(self, n):
            if n.op != "call_function":
                return super().run_node(n)
            with record_function(n.name):
                return super().run_node(n)

    interp = _Annotated(gm, graph=graph)
    return lambda: interp.run(*flat)


def _reordered(graph, order: Sequence[str]):
    """A copy of an FX graph whose call nodes run in ``order`` (the others keep their places).

    Nodes ``order`` does not name (``getitem`` selectors, weight views folded into weights) run
    right after their last input, so the order of the named ops is the only thing that changes.
    """
    import torch

    nodes = {n.name: n for n in graph.nodes}
    bad = [o for o in order if o not in nodes]
    if bad:
        raise HetschedError(f"order names {bad[0]!r}, which is not a node of the program", op=bad[0], field="order")
    pos = {o: i for i, o in enumerate(order)}
    # placeholders, then the named ops in ``order``; an unnamed node (a ``getitem`` selecting one
    # output of a multi-output op, a view of a weight) runs as soon as its inputs exist. Deferring a
    # ``getitem`` would keep its producer's whole output tuple alive until then.
    placed: set[str] = set()
    seq: list = []

    def place(n) -> None:
        if n.name in placed:
            return
        for a in n.all_input_nodes:
            place(a)
        if n.name in pos and any(pos.get(a.name, -1) > pos[n.name] for a in n.all_input_nodes):
            raise HetschedError(f"order runs {n.name!r} before one of its inputs", op=n.name, field="order")
        placed.add(n.name)
        seq.append(n)
        for u in n.users:
            if u.op != "output" and u.name not in pos and u.name not in placed \
                    and all(a.name in placed for a in u.all_input_nodes):
                place(u)

    for n in graph.nodes:
        if n.op == "placeholder":
            place(n)
    for o in order:
        place(nodes[o])
    out = None
    for n in graph.nodes:
        if n.op == "output":
            out = n
        elif n.name not in placed:
            place(n)
    new = torch.fx.Graph()
    env: dict = {}
    for n in seq:
        env[n] = new.node_copy(n, lambda a: env[a])
    new.node_copy(out, lambda a: env[a])
    return new


def time_torch(model: Any, example_inputs: Sequence[Any] = (), graph: OpGraph | None = None, *, repeats: int = 5,
               warmup: int = 1, clock: str = "wall", stat: str = "median", device: str = "cpu0",
               threads: int | None = None) -> Profile:
    """Time every op of ``model`` as it runs in its exported program, and the eager module end to end.

    Parameters
    ----------
    model : torch.nn.Module or torch.export.ExportedProgram
    example_inputs : sequence
    graph : OpGraph, optional
        The imported graph (default: ``load_torch`` of the same export); its op names are the FX
        node names.
    repeats, warmup : int
    clock : {"wall", "cpu", "cuda"}
        ``wall``: ``time.perf_counter``. ``cpu``: ``time.thread_time`` (the thread's CPU time, which
        excludes waiting for a core on a loaded machine); needs one torch thread (``threads=1``),
        since work done by other threads would not count. ``cuda``: CUDA events around each node
        and around the eager call (a model and inputs on the GPU; see :func:`node_timer`).
    stat : {"median", "min", "mean"}
    threads : int, optional
        ``torch.set_num_threads`` for the run (restored afterwards).

    Returns
    -------
    Profile
        Every op matched (``matched_by`` = ``"node"``); ``metrics["iteration_s"]`` is the eager
        module's end-to-end time (``stat`` of ``repeats`` calls, same clock), ``metrics["program_s"]``
        the sum of the timed nodes.

    >>> import torch
    >>> p = time_torch(torch.nn.Linear(4, 4), (torch.randn(2, 4),), repeats=2, clock="cpu", threads=1)
    >>> list(p.latency_s), p.matched_by["linear"], p.metrics["iteration_s"] > 0
    (['linear'], 'node', True)
    """
    import torch

    with timing(clock, stat, repeats, warmup, threads) as (now, n_threads):
        ep = model if isinstance(model, torch.export.ExportedProgram) else torch.export.export(model, tuple(example_inputs))
        if graph is None:
            import warnings

            from .torch_import import load_torch

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                graph = load_torch(ep)
        gm, flat = program_inputs(ep, tuple(example_inputs))
        timed = node_timer(gm, set(graph.ops), now)
        eager = model.module() if isinstance(model, torch.export.ExportedProgram) else model
        e2e: list[float] = []
        with torch.no_grad():
            for _ in range(warmup):
                timed.run(*flat)
                eager(*example_inputs)
            for _ in range(repeats):
                timed.run(*flat)
                e2e.append(call_s(lambda: eager(*example_inputs), now))
    return timed_profile(graph, timed.times, e2e, warmup=warmup, repeats=repeats, clock=clock, stat=stat, device=device,
                         threads=n_threads)


@contextlib.contextmanager
def timing(clock: str, stat: str, repeats: int, warmup: int, threads: int | None):
    """Check the timing arguments, pin torch to ``threads`` (restored on exit) and give
    ``(now, thread count)``: ``now`` is ``time.perf_counter`` (``wall``) or ``time.thread_time``
    (``cpu``, which needs one thread: work of other threads would not count); ``None`` for
    ``cuda`` (CUDA events, see :func:`node_timer`)."""
    import time

    import torch

    if clock not in ("wall", "cpu", "cuda"):
        raise HetschedError(f"clock must be 'wall', 'cpu' or 'cuda', got {clock!r}", field="clock")
    if clock == "cuda" and not torch.cuda.is_available():
        raise HetschedError("clock='cuda' (CUDA events) but torch sees no CUDA device", field="clock")
    if stat not in _STATS:
        raise FormatError(f"stat must be one of {sorted(_STATS)}, got {stat!r}", field="stat")
    if repeats < 1 or warmup < 0:
        raise HetschedError(f"repeats must be >= 1 and warmup >= 0, got {repeats}, {warmup}", field="repeats")
    prev = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    try:
        n = torch.get_num_threads()
        if clock == "cpu" and n != 1:
            raise HetschedError(f"clock='cpu' times the calling thread only: pin torch to one thread (threads=1), "
                                f"not {n}", field="threads")
        yield (None if clock == "cuda" else time.thread_time if clock == "cpu" else time.perf_counter), n
    finally:
        torch.set_num_threads(prev)


def node_timer(gm: Any, targets: set[str], now: Any):
    """An FX interpreter of ``gm`` that times every call node named in ``targets`` as it runs (its
    ``times``: ``{node: [seconds per run]}``); what :func:`time_torch` and the training-step timer
    (:mod:`hetsched.io.train_step`) run.

    ``now=None`` times with CUDA events instead (a pair recorded on the current stream around each
    node: the device's time for its kernels, host launch gaps included); they are read, with one
    synchronisation, when a run ends (:meth:`run` returns only then), so timing adds no
    synchronisation between nodes.
    """
    import torch

    times: dict[str, list[float]] = defaultdict(list)
    marks: list[tuple[str, Any, Any]] = []

    class _Timed(torch.fx.Interpreter):
        def call_function(self, target, args, kwargs):
            name = self._node.name
            if name not in targets:
                return target(*args, **kwargs)
            if now is None:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                out = target(*args, **kwargs)
                e1.record()
                marks.append((name, e0, e1))
                return out
            t0 = now()
            out = target(*args, **kwargs)
            times[name].append(now() - t0)
            return out

        def run_node(self, n):
            self._node = n
            return super().run_node(n)

        def run(self, *args, **kwargs):
            out = super().run(*args, **kwargs)
            if marks:
                torch.cuda.synchronize()
                for name, e0, e1 in marks:
                    times[name].append(e0.elapsed_time(e1) * 1e-3)  # milliseconds
                marks.clear()
            return out

    interp = _Timed(gm)
    interp.times = times
    return interp


def call_s(fn: Any, now: Any) -> float:
    """Seconds of one call of ``fn``: by ``now``, or between two CUDA events (``now=None``)."""
    if now is not None:
        t0 = now()
        fn()
        return now() - t0
    import torch

    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    fn()
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) * 1e-3


def timed_profile(graph: OpGraph, times: Mapping[str, Sequence[float]], e2e: Sequence[float], *, warmup: int, repeats: int,
                  clock: str, stat: str, device: str, threads: int, source: str | None = None,
                  extra_metrics: Mapping[str, float] | None = None) -> "Profile":
    """The :class:`Profile` of per-op samples ``times`` (the first ``warmup`` of each dropped) and
    end-to-end samples ``e2e``, measured with ``threads`` torch threads (``params["threads"]``)."""
    fn = _STATS[stat]
    ops = [o for o in graph.ops if o in times]
    latency = {o: float(fn(list(times[o][warmup:]) or list(times[o]))) for o in ops}
    samples = {o: tuple(times[o][warmup:]) for o in ops}
    rows, t = [], 0.0
    for o in ops:  # the program's order, each op its latency long
        rows.append(dict(lane=device, group=device, name=o, kind="compute", start_s=t, end_s=t + latency[o], op=o,
                         device=device))
        t += latency[o]
    un_ops = tuple(o for o in graph.ops if o not in latency)
    steps = StepLog()
    steps.add("time_nodes", graph.name, after=float(len(latency)), accepted=True,
              reason=f"timed {len(latency)} FX node(s) x {repeats} run(s) with the {clock} clock; "
                     f"eager module end to end {fn(e2e) * 1e3:.2f} ms")
    metrics = {"n_ops": float(graph.n_ops), "n_matched": float(len(latency)),
               "match_rate": len(latency) / graph.n_ops if graph.n_ops else 1.0, "n_unmatched_events": 0.0,
               "n_iterations": float(repeats), "total_s": float(sum(latency.values())),
               "iteration_s": float(fn(e2e)), "program_s": t, "peak_bytes": float("nan"),
               "threads": float(threads), **dict(extra_metrics or {})}
    return Profile(graph=graph, device=device, latency_s=latency, samples=samples,
                   matched_by={o: "node" for o in latency}, unmatched_ops=un_ops,
                   unmatched_events=pd.DataFrame(columns=["name", "count", "total_s"]), n_iterations=repeats,
                   source=source or f"time_torch({clock} clock)", metrics=metrics, timeline=make_timeline(rows),
                   steps=steps,
                   params={"device": device, "stat": stat, "clock": clock, "repeats": repeats, "threads": int(threads)})
