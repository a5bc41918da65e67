"""Search over executed sets: the exact dynamic programme and its bounded (beam) variant.

A state is the set ``S`` of ops already executed (a bitmask). Under the memory model of
:mod:`hetsched.memory.model` the live bytes after ``S`` depend on ``S`` only, so every order
reaching ``S`` can be merged into the one with the lowest peak so far: this is the dynamic
programme of Serenity (Ahn et al., "Ordering Chaos: Memory-Aware Scheduling of Irregularly Wired
Neural Networks for Edge Devices", MLSys 2020). Its states are the downward-closed sets, one layer
per step. With a ``budget``, states whose peak exceeds it are dropped (Serenity's "soft budgeting");
a run that ends with no state proves that the optimum is above the budget. With ``beam``, only the
``beam`` best states of a layer are kept: polynomial, no proof.

A dominance rule shrinks the frontier further: if a ready op ``v`` does not raise the peak so far
and does not increase the live bytes (it frees at least what it keeps), some optimal completion
runs ``v`` first, so it is the only move tried. (Moving ``v`` earlier in any completion only
lowers the live bytes of the states in between, since the bytes ``v`` frees can only grow with
``S``.)
"""

from __future__ import annotations

import heapq
import time
from typing import Iterable

import numpy as np

from .model import Mem


class SearchTimeout(Exception):
    pass


def bit_set(items: Iterable[int]) -> int:
    """The set of small integers ``items`` as one Python int (bit ``i`` set for each ``i``).

    >>> bin(bit_set([0, 3]))
    '0b1001'
    """
    x = 0
    for i in items:
        x |= 1 << i
    return x


class _Tables:
    """Bitmasks of a compiled graph (cached on the ``Mem``)."""

    def __init__(self, m: Mem) -> None:
        self.pred_mask = [bit_set(ps) for ps in m.preds]
        self.users_mask = [bit_set(us) for us in m.users]
        size = m.size.tolist()
        out = m.is_out.tolist()
        # storages an op may free: the ones it reads that are not graph outputs
        self.freeable = [[(self.users_mask[s], size[s]) for s in m.op_in[v] if not out[s]] for v in range(m.n)]
        self.freeable_ids = [[s for s in m.op_in[v] if not out[s]] for v in range(m.n)]
        self.out_all = m.out_all.tolist()
        self.out_kept = m.out_kept.tolist()
        self.size = size
        self.prod = m.prod.tolist()
        self.out = out


def _tables(m: Mem) -> _Tables:
    return m.memo("search_tables", _Tables)


def _lookahead_tables(m: Mem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``C[s, v]``: bytes of storage ``s`` that op ``v`` must see live if ``s`` is live before ``v``
    runs (a reader of ``s`` descends from ``v``, or ``s`` is a graph output), ``s`` not one of ``v``'s
    own tensors; ``io[v]``: ``v``'s own bytes; ``C_out[v]``: the rows of ``v``'s kept outputs summed."""
    from .model import ancestor_bitsets

    T = _tables(m)
    anc, _desc = ancestor_bitsets(m)
    n = m.n
    nbytes = (n + 7) // 8
    C = np.zeros((m.S, n))
    for s in range(m.S):
        if T.out[s]:
            row = np.ones(n, dtype=bool)
        else:
            reach = 0
            for u in m.users[s]:
                reach |= anc[u]
            row = np.unpackbits(np.frombuffer(reach.to_bytes(nbytes, "little"), dtype=np.uint8), bitorder="little")[:n].astype(bool)
        C[s, row] = T.size[s]
    io = np.zeros(n)
    for v in range(n):
        for s in m.op_in[v] + m.op_out[v]:
            C[s, v] = 0.0
        io[v] = sum(T.size[s] for s in m.op_in[v]) + T.out_all[v]
    C_out = np.zeros((n, n))
    for v in range(n):
        for s in m.op_out[v]:
            if T.out[s] or m.users[s]:
                C_out[v] += C[s]
    return C, io, C_out


def mem_after(m: Mem, S: int) -> int:
    """Live bytes once exactly the ops of ``S`` have run."""
    T = _tables(m)
    tot = 0
    for s in range(m.S):
        p = T.prod[s]
        if p >= 0 and not (S >> p) & 1:
            continue
        if T.out[s] or (T.users_mask[s] & ~S):
            tot += T.size[s]
    return tot


def search(
    m: Mem,
    *,
    start: int = 0,
    n_steps: int | None = None,
    budget: int | None = None,
    beam: int | None = None,
    deadline: float | None = None,
    lookahead: bool = False,
    stats: list | None = None,
) -> tuple[int, list[int]] | None:
    """Lowest-peak completion from the executed set ``start`` over ``n_steps`` steps.

    Returns ``(peak, ops)`` or ``None`` when every state exceeded ``budget``. Raises ``SearchTimeout``
    past ``deadline`` (a ``time.perf_counter()`` value).

    With ``lookahead`` (and a budget), a state is also dropped when some op still to run must see
    more than the budget: its own inputs and outputs plus every tensor live now that one of its
    descendants (or the graph output) still needs (the crossing bound, specialised to the state).
    """
    T = _tables(m)
    pred_mask, out_all, out_kept, freeable, succs = T.pred_mask, T.out_all, T.out_kept, T.freeable, m.succs
    freeable_ids = T.freeable_ids
    if n_steps is None:
        n_steps = m.n - bin(start).count("1")
    ready0 = tuple(v for v in range(m.n) if not (start >> v) & 1 and not (pred_mask[v] & ~start))
    # record: (peak, mem, ready, parent record, op)
    layer: dict[int, tuple] = {start: (0, mem_after(m, start), ready0, None, -1)}
    look = lookahead and budget is not None and m.n > 0
    if look:
        C, io, C_out = m.memo("lookahead", _lookahead_tables)
        acc0 = np.zeros(m.n)
        for s in range(m.S):
            p = T.prod[s]
            if (p < 0 or (start >> p) & 1) and (T.out[s] or (T.users_mask[s] & ~start)):
                acc0 += C[s]
        rem0 = np.ones(m.n, dtype=bool)
        for v in range(m.n):
            if (start >> v) & 1:
                rem0[v] = False
        aux: dict[int, tuple] = {start: (acc0, rem0)}
    work = 0
    for _k in range(n_steps):
        new: dict[int, tuple] = {}
        new_aux: dict[int, tuple] = {}
        for S, rec in layer.items():
            pk, mem, ready = rec[0], rec[1], rec[2]
            moves = ready
            for v in ready:  # dominance: a free, non-growing move is the only one needed
                if mem + out_all[v] <= pk and out_kept[v] <= 0:
                    moves = (v,)
                    break
                if mem + out_all[v] <= pk:
                    S2 = S | (1 << v)
                    fr = 0
                    for um, sz in freeable[v]:
                        if not (um & ~S2):
                            fr += sz
                    if out_kept[v] <= fr:
                        moves = (v,)
                        break
            for v in moves:
                step = mem + out_all[v]
                npk = pk if pk >= step else step
                if budget is not None and npk > budget:
                    continue
                S2 = S | (1 << v)
                ex = new.get(S2)
                if ex is not None and ex[0] <= npk:
                    continue
                fr = 0
                freed_s = []
                for s_, (um, sz) in zip(freeable_ids[v], freeable[v]):
                    if not (um & ~S2):
                        fr += sz
                        freed_s.append(s_)
                if look:
                    acc, rem = aux[S]
                    acc = acc + C_out[v]
                    for s_ in freed_s:
                        acc -= C[s_]
                    rem = rem.copy()
                    rem[v] = False
                    if rem.any() and float((acc + io)[rem].max()) > budget + 0.5:
                        continue
                    new_aux[S2] = (acc, rem)
                nr = [w for w in ready if w != v]
                for w in succs[v]:
                    if not (pred_mask[w] & ~S2):
                        nr.append(w)
                new[S2] = (npk, mem + out_kept[v] - fr, tuple(nr), rec, v)
            work += len(moves)
            if deadline is not None and work > 300:
                work = 0
                if time.perf_counter() > deadline:
                    raise SearchTimeout
        if not new:
            return None
        if look:
            aux = new_aux
        if stats is not None:
            stats.append(len(new))
        if beam is not None and len(new) > beam:
            keep = heapq.nsmallest(beam, new.items(), key=lambda kv: (kv[1][0], kv[1][1], kv[0]))
            new = dict(keep)
        layer = new
    best = min(layer.values(), key=lambda r: (r[0], r[1]))
    ops: list[int] = []
    r = best
    while r is not None and r[4] >= 0:
        ops.append(r[4])
        r = r[3]
    ops.reverse()
    return best[0], ops


def cut_segments(m: Mem) -> list[list[int]]:
    """Split the ops at cut vertices (ops every other op is an ancestor or a descendant of).

    Every topological order runs the segments one after the other, and the live bytes at a cut
    vertex do not depend on the order, so each segment can be ordered on its own (Serenity's
    divide and conquer). Returns the segments (ops in topological order) in execution order.
    """
    from .model import ancestor_bitsets

    n = m.n
    if n == 0:
        return []
    anc, desc = ancestor_bitsets(m)
    topo = m.topo()
    cuts = [v for v in topo if anc[v].bit_count() + desc[v].bit_count() == n - 1]
    segs: list[list[int]] = []
    done = 0
    for c in cuts:
        seg_mask = (anc[c] | (1 << c)) & ~done
        segs.append([v for v in topo if (seg_mask >> v) & 1])
        done |= seg_mask
    rest = [v for v in topo if not (done >> v) & 1]
    if rest:
        segs.append(rest)
    return segs
