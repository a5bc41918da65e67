"""The patent's two traversals and its peak-step fine-tune (the memory-ordering patent, steps S3 and S4).

The memory-ordering patent (``docs/patents.md``; South China Univ. of Technology, 2024), claims 6-9:

* S31, :func:`order_bfs` — a *tensor-lifetime-aware breadth-first* order: compute each op's
  sequential "earliest executable step" (ASAP: the number of its ancestors) and "latest
  must-execute step" (ALAP: ``n - 1 -`` the number of its descendants), estimate each tensor's
  lifetime from them, give every op a priority, and repeatedly run the ready op of highest priority.
  :func:`order_lifetime_greedy` (ours) re-ranks the ready ops by the bytes each would keep minus
  free; it goes depth-first more often and usually peaks lower, so the portfolio keeps it too.
* S32, :func:`order_dfs` — a *chain(链路)-memory-aware depth-first* order: cut the graph into "DFS
  windows" (maximal chains), compute each window's tensors and priority, push windows on the
  traversal stack in priority order (a post-order DFS from the outputs), and pop the ops in order.
* S4, :func:`fine_tune` — at the peak step, for each tensor resident there (all of them), try to
  free it earlier or create it later; keep a move when the peak drops.

The patent names these steps without formulas; where it is silent, the docstrings say what we
chose and why.
"""

from __future__ import annotations

import heapq
import time
from typing import Any, Sequence

import numpy as np

from ..graph import OpGraph
from ..results import StepLog
from .model import Mem, OrderResult, ancestor_bitsets, compile_graph, make_result

__all__ = ["order_bfs", "order_dfs", "order_lifetime_greedy", "fine_tune", "asap_alap"]

# above this many ops ASAP/ALAP use longest paths instead of exact ancestor counts (O(n^2/64))
SEQ_EXACT_MAX_OPS = 6000


# ---------------------------------------------------------------------------- ASAP / ALAP
def _asap_alap(m: Mem) -> tuple[np.ndarray, np.ndarray]:
    # the BFS, the greedy and their estimated lifetimes all need it: once per compiled graph
    return m.memo("asap_alap", _compute_asap_alap)


def _compute_asap_alap(m: Mem) -> tuple[np.ndarray, np.ndarray]:
    n = m.n
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if n <= SEQ_EXACT_MAX_OPS:
        anc, desc = ancestor_bitsets(m)
        asap = np.array([a.bit_count() for a in anc], dtype=np.int64)
        alap = np.array([n - 1 - d.bit_count() for d in desc], dtype=np.int64)
        return asap, alap
    # large graphs: longest path from the sources / to the sinks (a weaker, linear-time estimate)
    topo = m.topo()
    depth = np.zeros(n, np.int64)
    for v in topo:
        for p in m.preds[v]:
            if depth[p] + 1 > depth[v]:
                depth[v] = depth[p] + 1
    height = np.zeros(n, np.int64)
    for v in reversed(topo):
        for s in m.succs[v]:
            if height[s] + 1 > height[v]:
                height[v] = height[s] + 1
    return depth, n - 1 - height


def asap_alap(graph: OpGraph) -> dict[str, tuple[int, int]]:
    """Each op's sequential ASAP and ALAP step (patent claim 7).

    ASAP is the number of ancestors (no order can run the op earlier), ALAP is ``n - 1`` minus the
    number of descendants (no order can run it later). Above ``SEQ_EXACT_MAX_OPS`` ops, longest
    paths from the sources / to the sinks are used instead (cheaper, looser).

    >>> from hetsched.io.generators import fork_join
    >>> asap_alap(fork_join(2, 1))["b0_0"]
    (1, 2)
    """
    m = compile_graph(graph)
    a, l = _asap_alap(m)
    return {m.names[v]: (int(a[v]), int(l[v])) for v in range(m.n)}


# ---------------------------------------------------------------------------- BFS (S31)
def _est_lifetimes(m: Mem, asap: np.ndarray, alap: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each storage's estimated lifetime ``[start, end]`` (steps) from ASAP/ALAP (claim 7).

    A tensor is created no earlier than its producer's ASAP step (graph inputs: step 0) and, in the
    worst case, stays until the latest ALAP step of its readers (graph outputs: the last step; an
    unread tensor: its creation step).
    """
    n = m.n
    start = np.where(m.prod >= 0, asap[np.maximum(m.prod, 0)], 0) if m.S else np.zeros(0, np.int64)
    end = start.copy()
    if len(m.u_flat):
        end[m.has_users] = np.maximum(end[m.has_users], np.maximum.reduceat(alap[m.u_flat], m.u_start_nz))
    end[m.is_out] = max(n - 1, 0)
    return start.astype(np.int64), end.astype(np.int64)


def _held(m: Mem, asap: np.ndarray, alap: np.ndarray) -> list[float]:
    """Byte-steps each op's outputs are expected to be held: size x (estimated end - ASAP of the op)."""
    cached = getattr(m, "_held", None)
    if cached is not None and cached[0] is asap:
        return cached[1]
    held = _compute_held(m, asap, alap)
    m._held = (asap, held)  # type: ignore[attr-defined]
    return held


def _compute_held(m: Mem, asap: np.ndarray, alap: np.ndarray) -> list[float]:
    start, end = _est_lifetimes(m, asap, alap)
    held = [0.0] * m.n
    size = m.size.tolist()
    for s, p in enumerate(m.prod.tolist()):
        if p >= 0:
            held[p] += size[s] * max(0, int(end[s]) - int(start[s]))
    return held


def _live_tracker(m: Mem):
    """Live bytes before and during each step of an order being built one op at a time."""
    remaining = [len(u) for u in m.users]
    out = m.is_out.tolist()
    size = m.size.tolist()
    out_all = m.out_all.tolist()
    out_kept = m.out_kept.tolist()
    live = [int(m.size[m.prod < 0].sum()) if m.S else 0]

    def run(v: int) -> tuple[int, int]:
        before = live[0]
        during = before + out_all[v]
        freed = out_all[v] - out_kept[v]
        for s in m.op_in[v]:
            remaining[s] -= 1
            if remaining[s] == 0 and not out[s]:
                freed += size[s]
        live[0] = during - freed
        return before, during

    return run


def bfs_idx(m: Mem, log: StepLog | None = None) -> tuple[list[int], StepLog | None]:
    """The patent's lifetime-aware BFS; returns the order and ``log`` (one step per pick written into it)."""
    n = m.n
    asap, alap = _asap_alap(m)
    held = _held(m, asap, alap)
    asap_l, alap_l = asap.tolist(), alap.tolist()
    keys = [(alap_l[v], held[v], asap_l[v], v) for v in range(n)]
    indeg = [len(p) for p in m.preds]
    heap = [keys[v] for v in range(n) if indeg[v] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    record = log is not None
    track = _live_tracker(m) if record else None
    names = m.names
    while heap:
        k = heapq.heappop(heap)
        v = k[-1]
        order.append(v)
        if record:
            before, during = track(v)
            runner = heap[0] if heap else None
            last = len(order) == n
            log.add(
                "pick", names[v], before=float(before), after=float(during), accepted=True,
                reason=(f"claim 7: of {len(heap) + 1} ready op(s), {names[v]} has the highest priority: ALAP "
                        f"{alap_l[v]}, outputs held ~{held[v]:.3g} byte-steps"
                        + (f" (next: {names[runner[-1]]}, ALAP {runner[0]})" if runner else "")),
                delta={"bfs_order+": (names[v],), **({"order": tuple(names[x] for x in order)} if last else {})},
                data={"phase": "S31", "asap": asap_l[v], "alap": alap_l[v], "held_byte_steps": held[v],
                      "priority": list(k[:3]), "frontier": len(heap) + 1,
                      "runner_up": None if runner is None else {"op": names[runner[-1]], "priority": list(runner[:3])},
                      "live_bytes": during})
        for w in m.succs[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, keys[w])
    return order, log


def order_bfs(graph: OpGraph) -> OrderResult:
    """BFS (patent): the patent's tensor-lifetime-aware breadth-first order (claim 6, S31; claim 7).

    As the patent's S31 says: compute each op's sequential earliest executable step (ASAP) and
    latest must-execute step (ALAP), estimate every tensor's lifetime from them (from its
    producer's ASAP to the latest ALAP of its readers), give every op a priority, and repeatedly
    run, among the ops that can run now (the frontier), the one of highest priority. The patent
    gives no formula for the priority; ours ranks by ALAP (the op that must run soonest first,
    which keeps the traversal breadth-first), then by the byte-steps its outputs are expected to
    be held (the estimated lifetimes), then ASAP, then insertion order. The priority is fixed
    before the traversal, as S31 computes it before choosing.

    ``steps``: one ``pick`` per op with its ASAP, ALAP, priority, the frontier size and the runner-up,
    and the live bytes before and during the step (``before``/``after``); ``replay(k)["bfs_order"]``
    is the order so far. :func:`order_lifetime_greedy` is the dynamic greedy this method used before.

    >>> from hetsched.io.generators import fork_join
    >>> r = order_bfs(fork_join(2, 2)); r.order      # breadth-first: both branches advance together
    ('fork', 'b0_0', 'b1_0', 'b0_1', 'b1_1', 'join')
    >>> r.steps[1].data["alap"], r.steps[1].data["frontier"]
    (3, 2)
    """
    t0 = time.perf_counter()
    m = compile_graph(graph)
    arr, steps = bfs_idx(m, StepLog())
    return make_result(m, arr, method="bfs", status="heuristic", t0=t0, steps=steps, initial=m.topo(),
                        why="patent S31: tensor-lifetime-aware breadth-first traversal (ALAP, then estimated "
                            "lifetime bytes, as priority within the frontier)")


def greedy_idx(m: Mem) -> list[int]:
    """Lifetime-aware greedy list order (ours); priority (lower first):

    1. ``net``: bytes the op would keep allocated minus bytes it would free if run now (dynamic);
    2. ALAP: the op that must run soonest goes first;
    3. the expected byte-steps its outputs will be held (estimated lifetime x size);
    4. insertion index (determinism).
    """
    n = m.n
    asap, alap = _asap_alap(m)
    held = _held(m, asap, alap)
    size = m.size.tolist()
    out = m.is_out.tolist()
    remaining = [len(u) for u in m.users]
    freed = [0] * n
    for s in range(m.S):
        if not out[s] and remaining[s] == 1:
            freed[m.users[s][0]] += size[s]
    indeg = [len(p) for p in m.preds]
    done = [False] * n
    alap_l = alap.tolist()
    okept = m.out_kept.tolist()

    def key(v: int) -> tuple:
        return (okept[v] - freed[v], alap_l[v], held[v], v)

    heap = [key(v) for v in range(n) if indeg[v] == 0]
    heapq.heapify(heap)
    ready = {v for v in range(n) if indeg[v] == 0}
    order: list[int] = []
    while heap:
        k = heapq.heappop(heap)
        v = k[-1]
        if done[v] or k != key(v):
            continue  # stale entry: the op's priority changed since it was pushed
        done[v] = True
        ready.discard(v)
        order.append(v)
        for s in m.op_in[v]:
            remaining[s] -= 1
            if remaining[s] == 1 and not out[s]:
                for u in m.users[s]:
                    if not done[u]:
                        freed[u] += size[s]
                        if u in ready:
                            heapq.heappush(heap, key(u))
        for w in m.succs[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.add(w)
                heapq.heappush(heap, key(w))
    return order


def order_lifetime_greedy(graph: OpGraph) -> OrderResult:
    """Lifetime greedy (ours): a dynamic lifetime-aware greedy (before 2026-12 this was ``order_bfs``).

    Among the ready ops, run the one that leaves the fewest bytes allocated after it runs (outputs
    kept minus inputs freed, re-evaluated as ops run), then the one whose ALAP step comes first,
    then the one whose outputs are expected to be held for the fewest byte-steps. It often goes
    depth-first, unlike the patent's BFS (:func:`order_bfs`), and usually reaches a lower peak, so
    the portfolio (:func:`~hetsched.memory.order_portfolio`) keeps it.

    >>> from hetsched.io.generators import fork_join
    >>> order_lifetime_greedy(fork_join(2, 2)).order    # finishes a branch before starting the next
    ('fork', 'b0_0', 'b0_1', 'b1_0', 'b1_1', 'join')
    """
    t0 = time.perf_counter()
    m = compile_graph(graph)
    return make_result(m, greedy_idx(m), method="lifetime-greedy", status="heuristic", t0=t0,
                        why="ours: greedy on bytes kept minus freed, ALAP and estimated lifetimes breaking ties")


# ---------------------------------------------------------------------------- DFS (S32)
def _windows(m: Mem) -> tuple[list[list[int]], list[int]]:
    """Maximal chains: ``v`` joins its predecessor's window when it is that op's only successor and
    that op is its only predecessor."""
    n = m.n
    win_of = [-1] * n
    wins: list[list[int]] = []
    for v in m.topo():
        ps = m.preds[v]
        if len(ps) == 1 and len(m.succs[ps[0]]) == 1:
            w = win_of[ps[0]]
            wins[w].append(v)
            win_of[v] = w
        else:
            win_of[v] = len(wins)
            wins.append([v])
    return wins, win_of


STACK_SHOWN = 64  # a recorded DFS step keeps at most this many window ids from the top of the stack
TENSORS_SHOWN = 32  # ... and at most this many of a window's tensors


def dfs_idx(m: Mem, steps: StepLog | None = None) -> tuple[list[int], StepLog | None]:
    """Post-order DFS over windows from the sinks; a window's predecessors are visited in order of
    decreasing priority ``cum_peak - result``: the window whose cone needs the most memory, net of
    what it leaves behind, runs first (Sethi & Ullman's rule for expression trees, JACM 1970).
    With a log ``steps``, one ``push`` and one ``pop`` step per window is written into it."""
    n = m.n
    record = steps is not None
    wins, win_of = _windows(m)
    W = len(wins)
    size = m.size
    wpreds: list[list[int]] = [[] for _ in range(W)]
    wsuccs: list[list[int]] = [[] for _ in range(W)]
    for w, ops in enumerate(wins):
        seen = set()
        for p in m.preds[ops[0]]:
            pw = win_of[p]
            if pw not in seen:
                seen.add(pw)
                wpreds[w].append(pw)
                wsuccs[pw].append(w)
    local_peak = [0] * W
    result = [0] * W
    # a window's tensors (claim 8: "the tensors the current window touches"), kept for the log only
    w_in: list[list[int]] = [[] for _ in range(W)] if record else []
    w_out: list[list[int]] = [[] for _ in range(W)] if record else []
    prod = m.prod.tolist()
    for w, ops in enumerate(wins):
        inside = set(ops)
        pk = 0
        for v in ops:
            pk = max(pk, int(size[m.op_in[v]].sum()) + int(m.out_all[v]))
            for s in m.op_out[v]:
                if m.is_out[s] or any(u not in inside for u in m.users[s]):
                    result[w] += int(size[s])
                    if record:
                        w_out[w].append(s)
            if record:
                w_in[w].extend(s for s in m.op_in[v] if prod[s] not in inside)
        local_peak[w] = pk
    cum = [0] * W
    for w in range(W):  # windows are created in topological order
        cum[w] = max([local_peak[w]] + [cum[p] for p in wpreds[w]])
    prio = [cum[w] - result[w] for w in range(W)]

    def order_key(w: int) -> tuple:
        return (-prio[w], w)

    names = m.names
    out: list[int] = []

    def log(action: str, w: int, stack_ids: list[int], why: str) -> None:
        ops = wins[w]
        t_in = sorted({m.s_names[s] for s in w_in[w]})
        t_out = [m.s_names[s] for s in w_out[w]]
        last = action == "pop" and len(out) == n
        steps.add(
            action, f"window {w}", before=None, after=float(prio[w]), accepted=True, reason=why,
            delta=({"dfs_order+": tuple(names[v] for v in ops), **({"order": tuple(names[v] for v in out)} if last else {})}
                   if action == "pop" else {}),
            data={"phase": "S32", "window": w, "ops": [names[v] for v in ops], "priority": prio[w],
                  "cum_peak_bytes": cum[w], "result_bytes": result[w], "local_peak_bytes": local_peak[w],
                  "tensors_in": t_in[:TENSORS_SHOWN], "tensors_out": t_out[:TENSORS_SHOWN],
                  "n_tensors": len(t_in) + len(t_out), "stack": tuple(stack_ids[-STACK_SHOWN:]),
                  "stack_depth": len(stack_ids)})

    visited = [False] * W
    sinks = sorted((w for w in range(W) if not wsuccs[w]), key=order_key)
    ids: list[int] = []  # the windows on the stack (kept beside it for the log: no copy per step)
    for root in sinks:
        if visited[root]:
            continue
        visited[root] = True
        stack = [(root, iter(sorted(wpreds[root], key=order_key)))]
        if record:
            ids.append(root)
            log("push", root, ids, f"claim 8: output window {root} ({names[wins[root][0]]}...) enters the stack "
                                   f"(priority {prio[root]})")
        while stack:
            w, it = stack[-1]
            nxt = next((p for p in it if not visited[p]), None)
            if nxt is None:
                stack.pop()
                out.extend(wins[w])
                if record:
                    ids.pop()
                    log("pop", w, ids, f"claim 8: window {w} has no unvisited predecessor: "
                                       f"its {len(wins[w])} op(s) leave the stack into the order")
            else:
                visited[nxt] = True
                stack.append((nxt, iter(sorted(wpreds[nxt], key=order_key))))
                if record:
                    ids.append(nxt)
                    log("push", nxt, ids,
                        f"claim 8: of window {w}'s unvisited predecessors, window {nxt} has the highest priority "
                        f"({prio[nxt]} = cone peak {cum[nxt]} - bytes it leaves {result[nxt]})")
    assert len(out) == n
    return out, steps


def order_dfs(graph: OpGraph) -> OrderResult:
    """DFS (patent): the patent's chain-memory-aware depth-first order (claim 6, S32; claim 8).

    DFS windows are the maximal chains of the graph (an op joins its predecessor's window when
    each is the other's only neighbour). A window's tensors are the ones its ops read and write;
    its priority is the peak of its cone (the largest inputs-plus-outputs of an op in it or in a
    window it depends on) minus the bytes it leaves live for later windows. Windows are pushed on
    the traversal stack by a post-order DFS from the output windows, predecessors of highest
    priority first; popping the stack in order gives the ops' order.

    ``steps``: one ``push`` and one ``pop`` per window (subject ``"window <id>"``), with its ops,
    tensors, priority and the stack after the step (window ids, bottom to top, the top 64);
    ``replay(k)["dfs_order"]`` is the order popped so far.

    >>> from hetsched.io.generators import fork_join
    >>> r = order_dfs(fork_join(3, 2)); r.order[0], r.order[-1]
    ('fork', 'join')
    >>> [s.action for s in r.steps][:2]
    ['push', 'push']
    """
    t0 = time.perf_counter()
    m = compile_graph(graph)
    arr, steps = dfs_idx(m, StepLog())
    return make_result(m, arr, method="dfs", status="heuristic", t0=t0, steps=steps, initial=m.topo(),
                        why="patent S32: chain-memory-aware depth-first traversal over DFS windows")


# ---------------------------------------------------------------------------- fine-tune (S4)
class _Evaluator:
    """Peak and curve of index orders (numpy), with validity checks on the precedence edges."""

    def __init__(self, m: Mem) -> None:
        self.m = m

    def eval(self, order: Sequence[int]) -> tuple[np.ndarray, np.ndarray] | None:
        m = self.m
        arr = np.asarray(order, dtype=np.int64)
        pos = np.empty(m.n, dtype=np.int64)
        pos[arr] = np.arange(m.n)
        if len(m.e_src) and not (pos[m.e_src] < pos[m.e_dst]).all():
            return None
        return arr, m.curve(arr)


def _score(curve: np.ndarray) -> tuple[int, int]:
    pk = int(curve.max()) if len(curve) else 0
    return pk, int((curve == pk).sum())


def fine_tune_idx(
    m: Mem,
    order: Sequence[int],
    *,
    max_moves: int | None = None,
    time_limit_s: float | None = None,
    plateau: bool = True,
    max_tensors: int | None = None,
    record: bool = True,
) -> tuple[list[int], list[dict[str, Any]]]:
    """Core of :func:`fine_tune` on index orders; returns the order and the tried moves."""
    n = m.n
    cur = list(order)
    if n < 2:
        return cur, []
    ev = _Evaluator(m)
    res = ev.eval(cur)
    assert res is not None
    curve = res[1]
    score = _score(curve)
    t_end = None if time_limit_s is None else time.perf_counter() + time_limit_s
    tried: list[dict[str, Any]] = []
    n_moves = 0
    size = m.size
    improved = True
    while improved:
        improved = False
        pos = np.empty(n, dtype=np.int64)
        pos[np.asarray(cur)] = np.arange(n)
        alloc, free = m.spans(np.asarray(cur))
        t_star = int(np.argmax(curve))
        live = np.flatnonzero((alloc <= t_star) & (free >= t_star))
        live = sorted(live.tolist(), key=lambda s: (-int(size[s]), s))
        if max_tensors is not None:
            live = live[:max_tensors]
        peak_op = cur[t_star]
        for s in live:
            for action in ("free_earlier", "create_later"):
                moved = _move(m, cur, pos, t_star, peak_op, s, action)
                if moved is None:
                    continue
                new_order, block = moved
                r = ev.eval(new_order)
                if r is None:
                    continue
                new_score = _score(r[1])
                ok = new_score[0] < score[0] or (plateau and new_score < score)
                changed = np.flatnonzero(r[1] != curve)
                entry = {
                    "action": action,
                    "tensor": m.s_names[s],
                    "tensor_bytes": int(size[s]),
                    "step": t_star,
                    "before": score[0],
                    "after": new_score[0],
                    "peak_steps": (score[1], new_score[1]),
                    "curve_changed": (int(changed[0]), int(changed[-1])) if len(changed) else None,
                    "accepted": ok,
                    "moved": [m.names[v] for v in block],
                }
                if ok:
                    if new_score[0] < score[0]:
                        entry["reason"] = f"peak drops from {score[0]} to {new_score[0]} bytes"
                    else:
                        entry["reason"] = (f"peak stays {score[0]} bytes but is reached at {new_score[1]} "
                                           f"steps instead of {score[1]}")
                    entry["order"] = tuple(m.names[v] for v in new_order) if record else None
                else:
                    entry["reason"] = (f"peak would be {new_score[0]} bytes, not below {score[0]}"
                                       if new_score[0] >= score[0] else "no fewer peak steps")
                    entry["order"] = None
                tried.append(entry)
                n_moves += 1
                if ok:
                    cur, curve, score = list(new_order), r[1], new_score
                    improved = True
                if (max_moves is not None and n_moves >= max_moves) or (t_end is not None and time.perf_counter() > t_end):
                    return cur, tried
                if improved:
                    break
            if improved:
                break
    return cur, tried


def _move(m: Mem, cur: list[int], pos: np.ndarray, t_star: int, peak_op: int, s: int, action: str):
    """One candidate move of the fine-tune, or ``None`` when it does not apply.

    ``free_earlier``: the readers of ``s`` still to run after the peak step, with the ancestors they
    need from after the peak step, move (keeping their relative order) to just before the peak op.
    ``create_later``: the producer of ``s``, with its descendants that run between it and the peak
    step, moves to just after the peak op. Moving whole closures (not single ops) keeps every move
    legal; for a single free op it is the patent's "release earlier / create later".
    """
    if action == "free_earlier":
        if m.is_out[s]:
            return None
        late = [u for u in m.users[s] if pos[u] > t_star]
        if not late:
            return None
        block = set(late)
        stack = list(late)
        while stack:
            v = stack.pop()
            for p in m.preds[v]:
                if p == peak_op:
                    return None  # needs the peak op itself: cannot run before it
                if pos[p] > t_star and p not in block:
                    block.add(p)
                    stack.append(p)
        blk = sorted(block, key=lambda v: pos[v])
        new = cur[:t_star] + blk + [v for v in cur[t_star:] if v not in block]
        return new, blk
    p = int(m.prod[s])
    if p < 0 or pos[p] > t_star:
        return None
    if p == peak_op:
        return None
    block = {p}
    stack = [p]
    while stack:
        v = stack.pop()
        for w in m.succs[v]:
            if w == peak_op:
                return None  # the peak op needs it: it cannot move after the peak op
            if pos[w] <= t_star and w not in block:
                block.add(w)
                stack.append(w)
    blk = sorted(block, key=lambda v: pos[v])
    head = [v for v in cur[: t_star + 1] if v not in block]
    new = head + blk + cur[t_star + 1:]
    return new, blk


def log_tried(log: StepLog, tried: list[dict[str, Any]]) -> StepLog:
    """One step per fine-tune move tried (what :func:`fine_tune_idx` returns), appended to ``log``."""
    for e in tried:
        log.add(
            e["action"],
            e["tensor"],
            before=float(e["before"]),
            after=float(e["after"]),
            accepted=bool(e["accepted"]),
            reason=e["reason"],
            delta={"order": e["order"]} if e["accepted"] and e["order"] is not None else {},
            data={"phase": "S4", "peak_step": e["step"], "moved": e["moved"], "tensor_bytes": e["tensor_bytes"],
                  "peak_steps_before": e["peak_steps"][0], "peak_steps_after": e["peak_steps"][1],
                  "curve_changed": e["curve_changed"]},
        )
    return log


def fine_tune(
    graph: OpGraph,
    order: Sequence[str] | OrderResult,
    *,
    max_moves: int | None = None,
    time_limit_s: float | None = None,
    plateau: bool = True,
    max_tensors: int | None = None,
) -> OrderResult:
    """The patent's peak-step fine-tune (claim 9, S4).

    Repeatedly take the first step where the peak is reached; for each tensor resident there
    (largest first; every one, as claim 9 traverses the whole set, unless ``max_tensors`` caps
    it), try to *free it earlier* (run its remaining readers
    before the peak op) and to *create it later* (run its producer after the peak op), simulate
    the move with the one memory model, and keep it when the peak drops. With ``plateau`` (our
    addition) a move that keeps the peak but reaches it at fewer steps is also kept, so graphs with
    several peak steps can still improve; the pair (peak, number of peak steps) strictly decreases,
    so the loop ends. Every move tried is a :class:`~hetsched.results.Step`; an accepted step's
    ``delta`` holds the new order, so ``result.replay(k)["order"]`` rebuilds it.

    Parameters
    ----------
    graph : OpGraph
    order : sequence of op names or OrderResult
        The order to improve.
    max_moves, time_limit_s : optional
        Stop after this many moves tried / this much time.
    max_tensors : int, optional
        Try only the largest this many tensors at each peak (``24`` was the default before
        2026-12; trying all is never worse and costs well under a second on 300 ops).

    Each step's ``data`` holds the peak step, the ops moved, the number of peak steps before and
    after, and ``curve_changed``: the first and last step whose live bytes the move changed (the
    walker redraws the curve of ``replay(k)["order"]``).

    >>> from hetsched.io.generators import randwire_ws
    >>> from hetsched.memory import order_bfs
    >>> g = randwire_ws(12, seed=1, channels=4, hw=4)
    >>> r = fine_tune(g, order_bfs(g))
    >>> r.peak_bytes <= order_bfs(g).peak_bytes
    True
    """
    t0 = time.perf_counter()
    m = compile_graph(graph)
    base_method = order.method if isinstance(order, OrderResult) else "given"
    names = order.order if isinstance(order, OrderResult) else tuple(order)
    arr = m.to_idx(names)
    new, tried = fine_tune_idx(m, arr.tolist(), max_moves=max_moves, time_limit_s=time_limit_s,
                            plateau=plateau, max_tensors=max_tensors)
    steps = log_tried(StepLog(), tried)
    n_acc = sum(1 for e in tried if e["accepted"])
    return make_result(
        m, new, method=f"{base_method}+fine_tune", status="heuristic", t0=t0, steps=steps, initial=arr.tolist(),
        why=f"patent S4: peak-step fine-tune, {len(steps)} moves tried, {n_acc} kept",
        params={"max_moves": max_moves, "time_limit_s": time_limit_s, "plateau": plateau, "max_tensors": max_tensors},
        extra={"n_moves_tried": float(len(steps)), "n_moves_kept": float(n_acc)},
    )
