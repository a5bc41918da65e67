"""The one memory model every ordering method is judged on, the lower bound, and ``OrderResult``.

The model (the memory-ordering patent, ``docs/patents.md``; the same one PyTorch Inductor's
``estimate_peak_memory``, XLA's heap simulator and MODeL/OLLA use): ops run one per step, in a
topological order; step ``i`` runs ``order[i]``.

* While an op runs, all its inputs are live and all its outputs are allocated.
* A tensor is allocated at the start of its producer's step and freed right after the step of its
  last consumer. A tensor nobody reads lives during its producer's step only.
* Graph outputs are never freed (live until the end of the last step).
* Graph inputs are resident from step 0 until their last use (an unused graph input is never
  counted; one marked ``is_output`` lives throughout).
* A view/alias tensor (``Tensor.alias_of``) allocates nothing: its readers, its producer and its
  ``is_output`` flag extend the life of its base storage (chains of aliases resolve to the root).
* Op weights (``Op.weight_bytes``) are excluded: under this model they do not depend on the order,
  so they only shift every curve by a constant (``weight_bytes`` is reported in the metrics).

Every result of :mod:`hetsched.memory` re-simulates its order with :func:`peak_memory` /
:func:`memory_curve`: a solver's objective value is never trusted.

>>> from hetsched.io.generators import chain
>>> g = chain(3, act_bytes=100, seed=0)
>>> peak_memory(g, g.topological_order()) == max(memory_curve(g, g.topological_order())["bytes"])
True
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import GraphError, HetschedError, ScheduleError, UnknownNameError, name_list
from ..graph import OpGraph
from ..results import Result, SolverRun, Step, StepLog
from ..timeline import TimelineBuilder

__all__ = [
    "OrderResult",
    "peak_memory",
    "memory_curve",
    "prefix_curve",
    "lifetimes",
    "live_at",
    "live_at_peak",
    "walk_state",
    "order_timeline",
    "lower_bound",
    "lower_bound_detail",
    "check_order",
]

# above this many ops the O(n^2/64) ancestor bitsets of the crossing bound are skipped
CROSSING_MAX_OPS = 4000


class Mem:
    """The graph compiled to integer arrays: ops ``0..n-1`` (insertion order) and storages.

    A storage is a root tensor (not an alias) that occupies memory; its ``users`` are every op that
    reads it or one of its aliases (and the producers of those aliases).
    """

    def __init__(self, graph: OpGraph) -> None:
        graph.validate()  # cycles, unknown names, negative sizes -> GraphError naming the culprit
        self.graph = graph
        self.names: list[str] = list(graph.ops)
        self.idx: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        n = self.n = len(self.names)
        tensors = graph.tensors

        def root_of(t: str) -> str:
            seen = [t]
            while tensors[t].alias_of is not None:
                t = tensors[t].alias_of
                if t in seen:
                    raise GraphError(f"alias chain through {name_list(seen)} loops", tensor=seen[0])
                seen.append(t)
            return t

        idx = self.idx
        has_alias = any(t.alias_of is not None for t in tensors.values())
        extra_users: dict[str, list[int]] = {}
        extra_out: dict[str, bool] = {}
        self.alias_root: dict[str, str] = {}
        if has_alias:
            for t in tensors.values():
                if t.alias_of is None:
                    continue
                r = root_of(t.name)
                self.alias_root[t.name] = r
                lst = extra_users.setdefault(r, [])
                lst.extend(idx[c] for c in t.consumers)
                if t.producer is not None:
                    lst.append(idx[t.producer])
                extra_out[r] = extra_out.get(r, False) or bool(t.is_output)
        s_names, s_size, s_prod, s_users, s_out = [], [], [], [], []
        for t in tensors.values():
            if t.alias_of is not None:
                continue
            p = -1 if t.producer is None else idx[t.producer]
            if t.name in extra_users:
                u = sorted(set(idx[c] for c in t.consumers) | set(extra_users[t.name]))
                u = [x for x in u if x != p]
            else:
                u = sorted(idx[c] for c in t.consumers)
            o = bool(t.is_output) or extra_out.get(t.name, False)
            if p < 0 and not u and not o:
                continue  # an unused graph input is never resident
            s_names.append(t.name)
            s_size.append(int(t.size_bytes))
            s_prod.append(p)
            s_users.append(u)
            s_out.append(o)
        self.s_names = s_names
        self.s_index = {s: i for i, s in enumerate(s_names)}
        self.S = len(s_names)
        self.size = np.asarray(s_size, dtype=np.int64)
        self.prod = np.asarray(s_prod, dtype=np.int64)
        self.is_out = np.asarray(s_out, dtype=bool)
        self.users = s_users
        lens = np.asarray([len(u) for u in s_users], dtype=np.int64)
        self.has_users = lens > 0
        self.u_flat = np.fromiter(itertools.chain.from_iterable(s_users), dtype=np.int64, count=int(lens.sum()))
        self.u_start = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64) if self.S else np.zeros(0, np.int64)
        self.u_start_nz = self.u_start[self.has_users]
        # per-op views
        self.op_out: list[list[int]] = [[] for _ in range(n)]
        self.op_in: list[list[int]] = [[] for _ in range(n)]
        for s in range(self.S):
            if s_prod[s] >= 0:
                self.op_out[s_prod[s]].append(s)
            for u in s_users[s]:
                self.op_in[u].append(s)
        # precedence: graph edges plus storage producer -> every user (aliases keep their base)
        G = graph.nx
        self.preds: list[list[int]] = [sorted(idx[a] for a in G.pred[v]) for v in self.names]
        if has_alias:
            for s in range(self.S):
                p = s_prod[s]
                if p >= 0:
                    for u in s_users[s]:
                        if p not in self.preds[u]:
                            self.preds[u] = sorted(self.preds[u] + [p])
        succ: list[list[int]] = [[] for _ in range(n)]
        for v in range(n):
            for p in self.preds[v]:
                succ[p].append(v)
        self.succs = succ
        plen = np.fromiter((len(p) for p in self.preds), dtype=np.int64, count=n)
        self.e_src = np.fromiter(itertools.chain.from_iterable(self.preds), dtype=np.int64, count=int(plen.sum()))
        self.e_dst = np.repeat(np.arange(n, dtype=np.int64), plen)
        # memory an op allocates during its step, and the part of it that stays after the step
        self.out_all = np.zeros(n, dtype=np.int64)
        self.out_kept = np.zeros(n, dtype=np.int64)
        for s in range(self.S):
            p = s_prod[s]
            if p >= 0:
                self.out_all[p] += s_size[s]
                if s_users[s] or s_out[s]:
                    self.out_kept[p] += s_size[s]
        self.input_bytes = int(sum(s_size[s] for s in range(self.S) if s_prod[s] < 0))
        self.output_bytes = int(self.size[self.is_out].sum()) if self.S else 0
        self._topo: list[int] | None = None
        self._memo: dict[str, Any] = {}

    def memo(self, key: str, make: Callable[["Mem"], Any]) -> Any:
        """``make(self)``, made once per compiled graph: the tables and bounds the methods share."""
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = make(self)
        return hit

    # -------------------------------------------------------------- orders
    def topo(self) -> list[int]:
        if self._topo is None:
            self._topo = [self.idx[o] for o in self.graph.topological_order()]
        return list(self._topo)

    def to_idx(self, order: Iterable[str], *, partial: bool = False) -> np.ndarray:
        """Order by names -> index array; unknown, missing (unless ``partial``: the first ops of an
        order), repeated or out-of-order ops raise."""
        order = list(order)
        bad = [o for o in order if o not in self.idx]
        if bad:
            raise UnknownNameError(f"order names unknown op(s) {name_list(bad)}", op=bad[0])
        arr = np.fromiter((self.idx[o] for o in order), dtype=np.int64, count=len(order))
        if partial:
            self.check_prefix(arr)
        else:
            self.check_idx(arr)
        return arr

    def check_idx(self, arr: np.ndarray) -> None:
        n = self.n
        if len(arr) != n or (n and np.bincount(arr, minlength=n).max() != 1):
            counts = np.bincount(arr, minlength=n) if len(arr) else np.zeros(n, np.int64)
            missing = [self.names[i] for i in np.flatnonzero(counts == 0)]
            twice = [self.names[i] for i in np.flatnonzero(counts > 1)]
            what = (f"misses {name_list(missing)}" if missing else "") + (
                (" and " if missing and twice else "") + (f"repeats {name_list(twice)}" if twice else "")
            )
            raise ScheduleError(f"an order must run every op exactly once; this one {what}",
                                op=(missing or twice or [None])[0])
        pos = np.empty(n, dtype=np.int64)
        pos[arr] = np.arange(n)
        if len(self.e_src):
            bad = np.flatnonzero(pos[self.e_src] >= pos[self.e_dst])
            if len(bad):
                a, b = self.names[self.e_src[bad[0]]], self.names[self.e_dst[bad[0]]]
                raise ScheduleError(f"op {b!r} runs before its predecessor {a!r}", op=b, pred=a)

    # -------------------------------------------------------------- evaluation
    def spans(self, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Allocation and free step (inclusive) of every storage under the order ``arr``."""
        n = self.n
        pos = np.empty(n, dtype=np.int64)
        pos[arr] = np.arange(n)
        alloc = np.where(self.prod >= 0, pos[np.maximum(self.prod, 0)], 0) if self.S else np.zeros(0, np.int64)
        last = alloc.copy()
        if len(self.u_flat):
            last[self.has_users] = np.maximum.reduceat(pos[self.u_flat], self.u_start_nz)
        free = np.maximum(last, alloc)
        free[self.is_out] = n - 1
        return alloc, free

    def curve(self, arr: np.ndarray) -> np.ndarray:
        """Live bytes during each step (int64, length n)."""
        n = self.n
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        alloc, free = self.spans(arr)
        w = self.size.astype(np.float64)
        d = np.bincount(alloc, weights=w, minlength=n + 1) - np.bincount(free + 1, weights=w, minlength=n + 1)
        return np.rint(np.cumsum(d[:n])).astype(np.int64)

    def peak(self, arr: np.ndarray) -> int:
        c = self.curve(arr)
        return int(c.max()) if len(c) else 0

    def prefix_spans(self, arr: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(alloc, free, resident)`` of every storage after the first ``k = len(arr)`` steps.

        A storage is resident when it exists by step ``k - 1`` (a graph input with readers, or a
        produced tensor whose producer ran); it is freed after its last reader when every reader
        ran, else (still needed, or a graph output) it is live through step ``k - 1``. For a
        complete order this is :meth:`spans`.
        """
        k = len(arr)
        pos = np.full(self.n + 1, k, dtype=np.int64)  # ops not run yet sit at k (index n: "no producer")
        pos[arr] = np.arange(k)
        prod = np.where(self.prod >= 0, self.prod, self.n)
        alloc = np.where(self.prod >= 0, pos[prod], 0)
        resident = alloc < k
        last = alloc.copy()
        if len(self.u_flat):
            last[self.has_users] = np.maximum.reduceat(pos[self.u_flat], self.u_start_nz)
        free = np.maximum(last, alloc)
        free[self.is_out | (free >= k)] = k - 1
        return alloc, free, resident

    def prefix_curve(self, arr: np.ndarray) -> np.ndarray:
        """Live bytes during each of the first ``len(arr)`` steps of a partial order (exact: a
        step's live bytes depend only on the ops run so far)."""
        k = len(arr)
        if k == 0:
            return np.zeros(0, dtype=np.int64)
        alloc, free, res = self.prefix_spans(arr)
        w = np.where(res, self.size, 0).astype(np.float64)
        a = np.minimum(alloc, k)
        d = np.bincount(a, weights=w, minlength=k + 1) - np.bincount(np.minimum(free + 1, k), weights=w, minlength=k + 1)
        return np.rint(np.cumsum(d[:k])).astype(np.int64)

    def check_prefix(self, arr: np.ndarray) -> None:
        """Raise unless ``arr`` runs distinct ops, each after all its predecessors."""
        n = self.n
        if len(arr) > n or (len(arr) and np.bincount(arr, minlength=n).max() > 1):
            twice = [self.names[i] for i in np.flatnonzero(np.bincount(arr, minlength=n) > 1)]
            raise ScheduleError(f"a partial order must run each op at most once; this one repeats {name_list(twice)}",
                                op=twice[0] if twice else None)
        pos = np.full(n, len(arr), dtype=np.int64)
        pos[arr] = np.arange(len(arr))
        ran = np.zeros(n, dtype=bool)
        ran[arr] = True
        if len(self.e_src):
            bad = np.flatnonzero(ran[self.e_dst] & (pos[self.e_src] >= pos[self.e_dst]))
            if len(bad):
                a, b = self.names[self.e_src[bad[0]]], self.names[self.e_dst[bad[0]]]
                raise ScheduleError(f"op {b!r} runs before its predecessor {a!r}", op=b, pred=a)


_CACHE_KEY = "hetsched.memory.Mem"


def compile_graph(graph: OpGraph) -> Mem:
    """Compile once per graph version (the graph's own cache is cleared on every mutation)."""
    cache = graph._cache  # noqa: SLF001 - shared cache, invalidated by every mutation
    m = cache.get(_CACHE_KEY)
    if m is None:
        m = Mem(graph)
        cache[_CACHE_KEY] = m
    return m


def check_order(graph: OpGraph, order: Sequence[str]) -> None:
    """Raise unless ``order`` runs every op of ``graph`` once, after all its predecessors.

    >>> from hetsched.io.generators import chain
    >>> check_order(chain(2), ["op1", "op0"])
    Traceback (most recent call last):
    ...
    hetsched.errors.ScheduleError: op 'op1' runs before its predecessor 'op0'
    """
    compile_graph(graph).to_idx(order)


def peak_memory(graph: OpGraph, order: Sequence[str]) -> int:
    """Peak live bytes when ``graph`` runs in ``order`` (see the module docstring for the model).

    >>> from hetsched.graph import OpGraph
    >>> g = OpGraph(); _ = [g.add_op(n, "Relu") for n in "ab"]
    >>> _ = g.add_tensor("x", 10, consumers=["a"]); _ = g.add_tensor("t", 20, producer="a", consumers=["b"])
    >>> _ = g.add_tensor("y", 5, producer="b", is_output=True)
    >>> peak_memory(g, ["a", "b"])   # step a: x + t; step b: t + y
    30
    """
    m = compile_graph(graph)
    return m.peak(m.to_idx(order))


def memory_curve(graph: OpGraph, order: Sequence[str]) -> pd.DataFrame:
    """Live bytes during each step: a frame ``step, op, bytes``.

    >>> from hetsched.io.generators import chain
    >>> g = chain(3, act_bytes=100)
    >>> memory_curve(g, g.topological_order()).columns.tolist()
    ['step', 'op', 'bytes']
    """
    m = compile_graph(graph)
    arr = m.to_idx(order)
    return _curve_frame(m, arr, m.curve(arr))


def _curve_frame(m: Mem, arr: np.ndarray, curve: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"step": np.arange(len(arr)), "op": [m.names[i] for i in arr], "bytes": curve})


def lifetimes(graph: OpGraph, order: Sequence[str]) -> pd.DataFrame:
    """Every resident storage's life: ``tensor, bytes, alloc_step, free_step`` (inclusive steps).

    >>> from hetsched.io.generators import chain
    >>> g = chain(2, act_bytes=100)
    >>> lifetimes(g, ["op0", "op1"])["tensor"].tolist()
    ['input', 'op0:out', 'op1:out']
    """
    m = compile_graph(graph)
    arr = m.to_idx(order)
    a, f = m.spans(arr)
    return pd.DataFrame({"tensor": m.s_names, "bytes": m.size, "alloc_step": a, "free_step": f})


def prefix_curve(graph: OpGraph, prefix: Sequence[str]) -> pd.DataFrame:
    """Live bytes during each step of a partial order (the first ops of an order): ``step, op, bytes``.

    What a walker draws while a traversal (BFS/DFS, claim 6) is still building its order: a tensor
    whose readers have not all run yet is live through the last step so far. For a complete order
    it equals :func:`memory_curve`.

    >>> from hetsched.io.generators import chain
    >>> g = chain(3, act_bytes=100)
    >>> prefix_curve(g, ["op0"])["bytes"].tolist() == memory_curve(g, g.topological_order())["bytes"].tolist()[:1]
    True
    """
    m = compile_graph(graph)
    arr = m.to_idx(prefix, partial=True)
    return _curve_frame(m, arr, m.prefix_curve(arr))


def live_at(graph: OpGraph, order: Sequence[str], step: int) -> pd.DataFrame:
    """Storages live during ``step`` of ``order`` (complete or partial): ``tensor, bytes, alloc_step,
    free_step, producer``, largest first (name breaks ties).

    >>> from hetsched.io.generators import chain
    >>> g = chain(3, act_bytes=100)
    >>> sorted(live_at(g, g.topological_order(), 1)["tensor"])    # op1 reads op0:out, writes op1:out
    ['op0:out', 'op1:out']
    """
    m = compile_graph(graph)
    arr = m.to_idx(order, partial=True)
    k = len(arr)
    if not 0 <= step < max(k, 1) or k == 0:
        if k == 0:
            return pd.DataFrame({"tensor": [], "bytes": [], "alloc_step": [], "free_step": [], "producer": []})
        raise HetschedError(f"step {step} is outside 0..{k - 1}", field="step")
    a, f, res = m.prefix_spans(arr)
    sel = np.flatnonzero(res & (a <= step) & (f >= step))
    df = pd.DataFrame({
        "tensor": [m.s_names[i] for i in sel],
        "bytes": m.size[sel],
        "alloc_step": a[sel],
        "free_step": f[sel],
        "producer": [m.names[p] if p >= 0 else None for p in m.prod[sel].tolist()],
    })
    return df.sort_values(["bytes", "tensor"], ascending=[False, True], kind="stable").reset_index(drop=True)


def live_at_peak(graph: OpGraph, order: Sequence[str]) -> tuple[int, pd.DataFrame]:
    """The peak step of ``order`` (the first step reaching the peak) and the storages live there
    (:func:`live_at`): what the fine-tune (claim 9) walks.

    >>> from hetsched.io.generators import fork_join
    >>> g = fork_join(2, 1)
    >>> step, live = live_at_peak(g, g.topological_order())
    >>> int(live["bytes"].sum()) == peak_memory(g, g.topological_order())
    True
    """
    m = compile_graph(graph)
    arr = m.to_idx(order, partial=True)
    if len(arr) == 0:
        return 0, live_at(graph, (), 0)
    step = int(np.argmax(m.prefix_curve(arr)))
    return step, live_at(graph, order, step)


def walk_state(graph: OpGraph, result: "OrderResult", k: int) -> dict[str, Any]:
    """What a step walker draws after step ``k`` of ``result`` (``k = -1``: before any step).

    Returns a dict: ``step`` (the :class:`~hetsched.results.Step` or ``None``), ``phase``,
    ``order`` (the order so far: a traversal's prefix during its ``pick``/``push``/``pop`` steps,
    else the complete current order), ``partial`` (whether ``order`` is a prefix), ``curve``
    (:func:`prefix_curve` / :func:`memory_curve` of it), ``peak_bytes``, ``peak_step``, ``live``
    (:func:`live_at` the peak step) and ``changed`` (a fine-tune move's ``(first, last)`` changed
    step, else ``None``). Nothing is re-run: the order comes from :meth:`OrderResult.replay`.

    >>> from hetsched.io.generators import fork_join
    >>> from hetsched.memory import order_bfs
    >>> g = fork_join(2, 2); r = order_bfs(g)
    >>> w = walk_state(g, r, 2); w["partial"], list(w["order"]), len(w["curve"])
    (True, ['fork', 'b0_0', 'b1_0'], 3)
    >>> from hetsched.memory import order_dfs
    >>> d = order_dfs(g); d.steps[0].action, walk_state(g, d, 0)["order"]   # pushed, nothing popped yet
    ('push', ())
    """
    state = result.replay(k)
    step = result.steps[k] if k >= 0 else None
    phase = (step.data or {}).get("phase") if step is not None else None
    key = {"S31": "bfs_order", "S32": "dfs_order"}.get(phase or "")
    # during a traversal its prefix is what is drawn, even while still empty (the DFS pushes
    # windows before its first pop): the complete "order" then is another method's order
    order = tuple(state.get(key) or ()) if key else None
    partial = order is not None and len(order) < len(result.order)
    if not partial:
        order = state.get("order") or result.order
    m = compile_graph(graph)
    arr = m.to_idx(order, partial=True)
    c = m.prefix_curve(arr)
    peak_step = int(np.argmax(c)) if len(c) else 0
    return {
        "step": step, "phase": phase, "order": tuple(order), "partial": partial, "curve": _curve_frame(m, arr, c),
        "peak_bytes": int(c.max()) if len(c) else 0, "peak_step": peak_step,
        "live": live_at(graph, order, peak_step) if len(c) else live_at(graph, (), 0),
        "changed": (step.data or {}).get("curve_changed") if step is not None else None,
    }


def check_time_limit(time_limit_s: Any) -> float:
    """A positive, finite number of seconds, else a :class:`HetschedError` naming ``time_limit_s``.

    >>> check_time_limit(2)
    2.0
    """
    try:
        x = float(time_limit_s)
    except (TypeError, ValueError):
        x = float("nan")
    if not (0.0 < x < float("inf")):
        raise HetschedError(f"time_limit_s must be a positive number of seconds, got {time_limit_s!r}",
                            field="time_limit_s")
    return x


# ---------------------------------------------------------------------------- lower bound
def ancestor_bitsets(m: Mem) -> tuple[list[int], list[int]]:
    """Ancestor and descendant bitsets (Python ints) of every op."""
    anc = [0] * m.n
    topo = m.topo()
    for v in topo:
        a = 0
        for p in m.preds[v]:
            a |= anc[p] | (1 << p)
        anc[v] = a
    desc = [0] * m.n
    for v in reversed(topo):
        d = 0
        for s in m.succs[v]:
            d |= desc[s] | (1 << s)
        desc[v] = d
    return anc, desc


def lower_bound_detail(graph: OpGraph) -> dict[str, Any]:
    """The four lower bounds on the peak of any order, and the op that attains each.

    * ``op_io``: while op ``v`` runs its inputs and outputs are live (max over ops);
    * ``io``: all graph inputs are live at step 0 and all graph outputs at the last step;
    * ``crossing``: a tensor produced by an ancestor of ``v`` (or a graph input) and read by a
      descendant of ``v`` (or a graph output produced by an ancestor) is live while ``v`` runs, in
      every order; skipped (``None``) above ``CROSSING_MAX_OPS`` ops;
    * ``last``: the op that runs last sees every graph output plus its own inputs and outputs
      (min over the ops no other op reads from).

    >>> from hetsched.io.generators import fork_join
    >>> d = lower_bound_detail(fork_join(3, 2))
    >>> d["lower_bound"] == max(d["op_io"], d["io"], d["crossing"], d["last"])
    True
    """
    return dict(compile_graph(graph).memo("lower_bound_detail", _lower_bound_detail))


def _lower_bound_detail(m: Mem) -> dict[str, Any]:
    n = m.n
    io_v = np.zeros(n, dtype=np.int64)
    for v in range(n):
        io_v[v] = int(m.size[m.op_in[v]].sum()) + int(m.out_all[v])
    op_io = int(io_v.max()) if n else 0
    op_io_at = m.names[int(io_v.argmax())] if n else None
    io_b = max(m.input_bytes, m.output_bytes)
    cross, cross_at = None, None
    if 0 < n <= CROSSING_MAX_OPS:
        anc, desc = ancestor_bitsets(m)
        nbytes = (n + 7) // 8
        tot = io_v.astype(np.float64).copy()
        full = (1 << n) - 1
        for s in range(m.S):
            p = int(m.prod[s])
            prod_desc = full if p < 0 else desc[p]
            reach = 0
            for u in m.users[s]:
                reach |= anc[u]
            if m.is_out[s]:
                reach = full  # never freed: live at every op after its producer
            mask = prod_desc & reach
            # the ops that already count s in io_v must not count it twice
            for u in m.users[s]:
                mask &= ~(1 << u)
            if p >= 0:
                mask &= ~(1 << p)
            if mask:
                bits = np.unpackbits(np.frombuffer(mask.to_bytes(nbytes, "little"), dtype=np.uint8), bitorder="little")[:n]
                tot += bits * float(m.size[s])
        cross = int(round(tot.max()))
        cross_at = m.names[int(tot.argmax())]
    last, last_at = _last_step_bound(m)
    lb = max(op_io, io_b, cross or 0, last)
    return {"lower_bound": lb, "op_io": op_io, "op_io_at": op_io_at, "io": io_b, "crossing": cross,
            "crossing_at": cross_at, "last": last, "last_at": last_at}


def _last_step_bound(m: Mem) -> tuple[int, str | None]:
    """The ``last`` bound: the lowest live bytes any op can see when it runs last.

    Every order ends with an op ``v`` that no other op reads from. While it runs, every other op
    has run, so what is live is exactly: the graph outputs (never freed), ``v``'s inputs, and
    ``v``'s outputs. The minimum over such ``v`` bounds every order; it is tight when graph
    outputs pile up at the end (training graphs, layered graphs with many sinks).
    """
    if m.n == 0:
        return 0, None
    size = m.size
    out_bytes = m.output_bytes
    best, best_v = None, None
    for v in range(m.n):
        if m.succs[v]:
            continue
        own = set(m.op_in[v]) | set(m.op_out[v])
        live = out_bytes - int(sum(int(size[s]) for s in own if m.is_out[s]))
        live += int(sum(int(size[s]) for s in set(m.op_in[v]))) + int(m.out_all[v])
        if best is None or live < best:
            best, best_v = live, v
    return int(best or 0), (m.names[best_v] if best_v is not None else None)


def lower_bound(graph: OpGraph) -> int:
    """A lower bound on the peak memory of every order of ``graph`` (bytes).

    The largest of: the inputs plus outputs of any single op, the graph inputs or the graph
    outputs, the "crossing" bound and the "last step" bound of :func:`lower_bound_detail`.

    >>> from hetsched.io.generators import chain
    >>> g = chain(4, act_bytes=100)
    >>> lower_bound(g) <= peak_memory(g, g.topological_order())
    True
    """
    return int(lower_bound_detail(graph)["lower_bound"])


# ---------------------------------------------------------------------------- result
@dataclass(frozen=True, kw_only=True, eq=False)
class OrderResult(Result):
    """An execution order and its memory, from any method of :mod:`hetsched.memory`.

    Attributes
    ----------
    order : tuple of str
        The ops, one per step.
    curve : DataFrame
        ``step, op, bytes``: live bytes during each step.
    method : str
        Which method produced the order (``"ilp-cumulative"``, ``"bfs+fine_tune"``...).
    status : str
        ``"optimal"`` (proven), ``"feasible"`` (a solver's incumbent, not proven), ``"heuristic"``,
        ``"fallback"`` (the solver did not answer in time: a heuristic order is returned),
        ``"timeout"`` (the exact search ran out of time: its best order and proven bound).
    why : str
        Which path ran and why, in plain words.
    ilp : SolverRun or None
        What the integer programme said, for every method that ran (or skipped) one: ``status``,
        ``bound``, ``gap``, ``incumbent``, size and solve time (:class:`~hetsched.results.SolverRun`).
    metrics : dict
        The order's numbers, each stored once: ``peak_bytes`` (re-simulated with
        :func:`peak_memory`, never a solver's objective), ``lower_bound_bytes``
        (:func:`lower_bound`), ``bound_bytes`` (a proven lower bound on the optimum from a solver
        or the exact search, when one is known), ``gap`` (``(peak - best bound) / best bound``
        where best bound = max(lower bound, proven bound)), ``runtime_s`` (wall-clock time of the
        call), ``n_ops``, ``weight_bytes``, and a method's own counts. ``peak_bytes``,
        ``lower_bound_bytes``, ``bound_bytes``, ``gap`` and ``runtime_s`` read as attributes too.

    The timeline counts steps, as the memory model does (claim 2: one op per step): one
    ``compute`` row per op from step ``i`` to ``i + 1`` and one ``alloc`` row per storage from its
    allocation step to the end of its free step, so :func:`~hetsched.timeline.memory_usage` peaks
    at ``peak_bytes``; the frame says so in ``attrs["time_unit"] == "step"``. An order has no
    duration of its own (it changes when memory is live, not how long the ops take):
    :func:`order_timeline` prices one in seconds on a device the caller names. ``steps`` are the
    decisions, each with ``data["phase"]`` (``S2``, ``S31``, ``S32``, ``S4-pick``, ``S4``,
    ``portfolio``, ``polish``, ``exact``): the ILP attempt (``data["ilp"]``: its
    :class:`~hetsched.results.SolverRun`); the traversals' ``pick`` (BFS) and ``push``/``pop``
    (DFS) steps; one ``candidate`` step per order a portfolio tried (accepted when it beats the
    best so far) and a ``pick`` step (the order that goes to the fine-tune); one ``free_earlier``
    / ``create_later`` step per fine-tune move tried.

    State (:meth:`replay`): ``order`` (the current complete order; ``replay(-1)["order"]`` is the
    start, ``replay(n_steps - 1)["order"]`` the result) and, while a traversal builds one, its
    prefix ``bfs_order`` / ``dfs_order``. A delta key ending in ``+`` appends to that list (a
    traversal's pick), any other key replaces the value.
    """

    order: tuple[str, ...] = ()
    curve: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["step", "op", "bytes"]))
    method: str = ""
    status: str = "heuristic"
    why: str = ""
    ilp: SolverRun | None = None

    # the numbers are stored once, in metrics; these read them as typed attributes
    peak_bytes = property(lambda self: int(self.metrics.get("peak_bytes", 0)), doc="Peak live bytes of the order.")
    lower_bound_bytes = property(lambda self: int(self.metrics.get("lower_bound_bytes", 0)),
                                 doc=":func:`lower_bound` of the graph.")
    bound_bytes = property(lambda self: self.metrics.get("bound_bytes"),
                           doc="A proven lower bound on the optimum (a solver's, the exact search's), else ``None``.")
    gap = property(lambda self: float(self.metrics.get("gap", 0.0)), doc="``(peak - best bound) / best bound``.")
    runtime_s = property(lambda self: float(self.metrics.get("runtime_s", 0.0)), doc="Wall-clock time of the call.")

    @property
    def solver(self) -> str | None:
        """The ILP solver that ran (``ilp.solver``), if any."""
        return self.ilp.solver if self.ilp is not None else None

    def _apply(self, state: dict[str, Any], step: Step) -> None:
        for k, v in step.delta.items():
            if k.endswith("+"):
                key = k[:-1]
                cur = state.get(key)
                if not isinstance(cur, list):  # first append: a fresh list, never the initial tuple
                    cur = state[key] = list(cur or ())
                cur.extend(v)
            else:
                state[k] = v


_MIN_STEP_S = 1e-9  # a step the cost model prices at 0 s still lasts 1 ns, so its memory stays visible


def _durations(m: Mem, device: str, system=None, cost=None) -> np.ndarray:
    """Seconds each op takes on ``device`` (index order), priced by the cost model."""
    from ..cost import resolve_cost

    system = system if system is not None else getattr(cost, "system", None)
    if system is None:
        raise HetschedError(f"pricing an order on {device!r} needs the system (or a cost model) it belongs to",
                            device=device, field="system")
    system.device(device)  # an unknown device raises, naming it
    cm = resolve_cost(cost, m.graph, system)
    ops = m.graph.ops
    dur = np.fromiter((cm.compute_s(ops[n], device) for n in m.names), dtype=np.float64, count=m.n)
    bad = np.flatnonzero(~(dur >= 0) | ~np.isfinite(dur))
    if len(bad):
        raise HetschedError(f"cost model gave op {m.names[bad[0]]!r} an invalid duration {dur[bad[0]]!r}",
                            op=m.names[bad[0]], device=device)
    return np.maximum(dur, _MIN_STEP_S)


def _timeline(m: Mem, arr: np.ndarray, dur: np.ndarray | None = None, device: str | None = None) -> pd.DataFrame:
    """The order's rows: in steps (``dur=None``), or in seconds with each op's ``dur`` on ``device``."""
    n = m.n
    names = np.array(m.names + [None], dtype=object)  # index -1 (no producer: a graph input) -> None
    a, f = m.spans(arr) if n else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    ends = (np.cumsum(dur[arr]) if dur is not None else np.arange(1, n + 1, dtype=np.float64)) if n else np.zeros(0)
    # exactly the previous end, so a free and the next allocation meet at one instant
    starts = np.concatenate([[0.0], ends[:-1]]) if n else np.zeros(0)
    lane = device if device is not None else "order"
    tb = TimelineBuilder()
    ops = names[arr]
    tb.extend(lane, lane, ops, "compute", starts, ends, op=ops, device=device, bytes=np.nan)
    # a storage lives from the start of its allocation step to the end of its free step
    s_names = np.array(m.s_names, dtype=object)
    tb.extend(f"{lane} memory", lane, s_names, "alloc", starts[a] if n else np.zeros(0), ends[f] if n else np.zeros(0),
              op=names[m.prod], tensor=s_names, device=device, bytes=m.size.astype(float))
    tl = tb.build()
    if dur is None:
        tl.attrs["time_unit"] = "step"
    return tl


def _result_timeline(m: Mem, arr: np.ndarray, _result: "OrderResult") -> pd.DataFrame:
    return _timeline(m, arr)


def order_timeline(graph: OpGraph, order: Sequence[str], *, device: str | None = None, system=None,
                   cost=None) -> pd.DataFrame:
    """The order as a timeline: one ``compute`` row per op, back to back (the memory model runs one
    op per step, claim 2), and one ``alloc`` row per storage from the start of its allocation step
    to the end of its free step.

    By default times count steps (op ``i`` runs from ``i`` to ``i + 1``; ``attrs["time_unit"] ==
    "step"``), as every :class:`OrderResult`'s ``timeline`` does. Name a ``device`` (of ``system``,
    or of ``cost``'s system) to price each op on it with the cost model (default the roofline):
    the times are then seconds. Either way the bytes and the peak are the step curve's, so
    ``memory_usage(order_timeline(...))`` peaks at :func:`peak_memory`.

    >>> from hetsched.io.generators import chain
    >>> from hetsched.io.systems import toy_system
    >>> from hetsched.timeline import memory_usage
    >>> g = chain(3, act_bytes=100)
    >>> tl = order_timeline(g, g.topological_order())
    >>> tl.attrs["time_unit"], float(tl["end_s"].max()), int(memory_usage(tl)["bytes"].max()) == peak_memory(g, g.topological_order())
    ('step', 3.0, True)
    >>> bool(order_timeline(g, g.topological_order(), device="gpu0", system=toy_system())["end_s"].max() < 1e-3)
    True
    """
    m = compile_graph(graph)
    arr = m.to_idx(order)
    if device is None:
        if system is not None or cost is not None:
            raise HetschedError("an order is priced on one device: name it (device=...) with the system or cost",
                                field="device")
        return _timeline(m, arr)
    return _timeline(m, arr, _durations(m, device, system, cost), device)


def make_result(
    m: Mem,
    arr: Sequence[int] | np.ndarray,
    *,
    method: str,
    status: str,
    t0: float,
    why: str,
    params: Mapping[str, Any] | None = None,
    steps: StepLog | Sequence[Step] = (),
    initial: Sequence[int] | None = None,
    ilp: SolverRun | None = None,
    bound: float | None = None,
    extra: Mapping[str, float] | None = None,
    lb: int | None = None,
) -> OrderResult:
    """Re-simulate ``arr`` and wrap it (the single exit of every method)."""
    arr = np.asarray(arr, dtype=np.int64)
    m.check_idx(arr)
    curve = m.curve(arr)
    peak = int(curve.max()) if len(curve) else 0
    if lb is None:
        lb = lower_bound(m.graph)
    best_lb = max(float(lb), float(bound) if bound is not None else 0.0)
    gap = (peak - best_lb) / best_lb if best_lb > 0 else 0.0
    order = tuple(m.names[i] for i in arr)
    metrics = {
        "peak_bytes": float(peak),
        "lower_bound_bytes": float(lb),
        "gap": float(gap),
        "runtime_s": float(time.perf_counter() - t0),
        "n_ops": float(m.n),
        "weight_bytes": float(m.graph.total_weight_bytes),
    }
    if bound is not None:
        metrics["bound_bytes"] = float(bound)
    metrics.update(extra or {})
    init = tuple(m.names[i] for i in initial) if initial is not None else order
    return OrderResult(
        order=order,
        curve=_curve_frame(m, arr, curve),
        method=method,
        status=status,
        ilp=ilp,
        why=why,
        metrics=metrics,
        timeline=partial(_result_timeline, m, arr),  # built on first access: a portfolio makes many results
        steps=steps,
        params=dict(params or {}),
        initial_state={"order": init},
    )
