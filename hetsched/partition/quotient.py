"""Internal: an integer index of a graph, cached per graph version, and a quotient DAG that merges.

Why a dynamic topological order: every merge must keep the quotient graph acyclic (the guard of
torch.fx's ``CapabilityBasedPartitioner`` and of TVM's ``MergeCompilerRegions``). Asking "does a path
leave group A and come back into group B?" is a graph search; bounding that search by a topological
order of the quotient graph (nodes outside ``(ord[A], ord[B])`` cannot lie on such a path) keeps
merging near-linear on model-shaped graphs. The order is kept valid across contractions the way
Pearce & Kelly (ACM JEA 2006) keep a dynamic topological order valid across edge insertions:
only the nodes between the two merged ones are renumbered. Usually fewer still: the ancestors of
the later node that lie above the earlier node's first successor sink into free slots below it
(``Quotient._sink``), so the earlier node's descendants, most of a random DAG, are never searched;
slots start 2**32 apart and moved nodes are spread over the free interval to keep room.
"""

from __future__ import annotations

import weakref
from itertools import chain
from typing import Any

import numpy as np

from ..graph import OpGraph

__all__ = ["GraphIndex", "graph_index", "Quotient"]


class GraphIndex:
    """Ops numbered by their (deterministic) topological position, with int adjacency."""

    __slots__ = ("names", "pos", "types", "preds", "succs", "tensors", "loose", "weights", "_ws", "nx_ref", "__weakref__")

    def __init__(self, graph: OpGraph) -> None:
        graph.validate()
        # the graph's cache token: replaced whenever the graph changes (its caches are cleared)
        self.nx_ref = graph._cache.setdefault("partition.token", object())
        names = graph.topological_order()
        pos = {n: i for i, n in enumerate(names)}
        ops = graph.ops
        self.names = names
        self.pos = pos
        self.types = [ops[n].op_type for n in names]
        self.weights = [ops[n].weight_bytes for n in names]
        gs, gp = graph._adjacency()  # plain lists, same order as graph.nx, no DiGraph needed
        at = pos.__getitem__  # map() keeps the lookups in C: a few hundred thousand edges at 100k ops
        self.preds = [list(map(at, gp[n])) for n in names]
        self.succs = [list(map(at, gs[n])) for n in names]
        # (tensor name, size, producer idx, consumer idxs) for tensors with a producer and a reader;
        # validate() above refused any op reading its own output, so no consumer is the producer
        tl = []
        loose = []  # (size, op idxs) of graph inputs (their readers) and unread outputs (their producer)
        for t in graph.tensors.values():
            p = t.producer
            if p is None or not t.consumers:
                loose.append((t.size_bytes, list(map(at, t.consumers)) if p is None else [pos[p]]))
                continue
            tl.append((t.name, float(t.size_bytes), pos[p], list(map(at, t.consumers))))
        self.tensors = tl
        self.loose = loose
        self._ws = None

    def working_set(self) -> np.ndarray:
        """Bytes each op needs on its device while it runs (weights + inputs + outputs), by op index.

        Built once per graph version with a few array passes (a loop over 100k ops and their
        300k input edges would cost a third of a 100k-op partition).
        """
        if self._ws is None:
            n = len(self.names)
            tl = self.tensors
            sizes = np.fromiter((t[1] for t in tl), float, len(tl))
            prods = np.fromiter((t[2] for t in tl), np.int64, len(tl))
            counts = np.fromiter(map(len, (t[3] for t in tl)), np.int64, len(tl))
            readers = np.fromiter(chain.from_iterable(t[3] for t in tl), np.int64, int(counts.sum()))
            ws = np.asarray(self.weights, dtype=float)
            ws = ws + np.bincount(prods, sizes, n) + np.bincount(readers, np.repeat(sizes, counts), n)
            for size, idxs in self.loose:
                for i in idxs:
                    ws[i] += size
            self._ws = ws
        return self._ws


_INDEX: "weakref.WeakKeyDictionary[OpGraph, GraphIndex]" = weakref.WeakKeyDictionary()


def graph_index(graph: OpGraph) -> GraphIndex:
    """The cached index of ``graph``; rebuilt when the graph changed (its cache token is new)."""
    idx = _INDEX.get(graph)
    if idx is None or idx.nx_ref is not graph._cache.get("partition.token"):
        idx = GraphIndex(graph)
        _INDEX[graph] = idx
    return idx


class Quotient:
    """The quotient DAG of a partition under construction.

    Nodes are ints; a node starts as one op (its topological index) and keeps that id when it
    survives a merge, so the first op of a group names it. ``ord`` is a topological order of the
    live nodes (distinct ints, possibly with gaps).
    """

    __slots__ = ("ord", "succ", "pred", "members", "owner", "backend", "n_alive", "_last", "_used", "_reach")

    def __init__(self, index: GraphIndex, backend: list[Any]) -> None:
        n = len(index.names)
        # spaced slots leave room to drop a merged group between two others without renumbering
        self.ord = [i << 32 for i in range(n)]
        self.succ = [dict.fromkeys(s) for s in index.succs]
        self.pred = [dict.fromkeys(p) for p in index.preds]
        self.members = [[i] for i in range(n)]
        self.owner = list(range(n))
        self.backend = list(backend)
        self.n_alive = n
        self._last = -1
        self._used = set(self.ord)  # slots in use: a new slot must be distinct
        # node -> nodes it is known to reach: reachability only grows as groups merge, so a path
        # found once (refusing a merge) answers later questions about the same pair at once
        self._reach: dict[int, set[int]] = {}

    def alive(self, x: int) -> bool:
        return bool(self.members[x])

    def try_merge(self, a: int, b: int) -> tuple[int | None, int]:
        """Merge nodes ``a`` and ``b`` unless that creates a cycle.

        Returns ``(via, survivor)``: ``via`` is ``None`` on success (``survivor`` is the merged
        node), else a node on the path that would close a cycle (``survivor`` is -1).

        With ``ord[a] < ord[b]``, a cycle appears iff a successor ``s`` of ``a`` (other than ``b``)
        reaches a predecessor ``t`` of ``b`` (other than ``a``). Only successors ``S`` ordered
        before ``b`` and predecessors ``T`` ordered after ``a`` can: when either set is empty, or
        every ``S`` comes after every ``T``, no search is needed at all and the merged node simply
        takes a slot that already separates its ancestors from its descendants. Otherwise a
        breadth-first search decides (backwards from ``T`` first, within a budget of ``a``'s
        out-degree, then forwards from ``S`` bounded by ``max ord(T)``), and an accepted merge
        renumbers the region between ``a`` and ``b`` (Pearce & Kelly).
        """
        ord_, succ, pred = self.ord, self.succ, self.pred
        if ord_[a] > ord_[b]:
            a, b = b, a
        oa, ob = ord_[a], ord_[b]
        pb, sa = pred[b], succ[a]
        key = ord_.__getitem__
        bwd: set | None = None  # ancestors of b ordered after a, when a probe found them all
        # S is never listed unless a search or the general renumbering needs its nodes (a large
        # group has thousands of successors): slots are distinct and b is the only successor of a
        # at ob, so min ord over all of a's successors is min ord(S) when below ob, else S is empty
        known = self._reach.get(a)
        if known and not known.isdisjoint(pb):
            # a path found earlier answers at once. A live node a reaches comes after a in the
            # order, so it is in T (and S is not empty): the same answer as scanning T, cheaper
            for x in pb:
                if x in known and x != a:
                    return x, -1
        # build the cheaper set first: when it is empty the other is never needed
        if len(pb) <= len(sa):
            T = [x for x in pb if x != a and ord_[x] > oa]
            if not T:
                # every other predecessor of b precedes a: a's slot separates ancestors from descendants
                self._used.discard(ob)
                self._contract(a, b, oa)
                return None, self._last
            # a large group has many successors: probe backwards from b's side first, spending at
            # most what scanning those successors would cost; the closing path is usually short
            budget = len(sa)
            frontier = T
            seen_b = {x: x for x in T}  # node -> the predecessor of b it leads to
            for x in T:
                if a in pred[x]:
                    self._reach.setdefault(a, set()).add(x)
                    return x, -1
            while frontier and budget > 0:
                nxt = []
                for x in frontier:
                    origin = seen_b[x]
                    for y in pred[x]:
                        if y not in seen_b and ord_[y] > oa:
                            if a in pred[y]:
                                self._reach.setdefault(a, set()).add(origin)
                                return y, -1
                            seen_b[y] = origin
                            nxt.append(y)
                            budget -= 1
                frontier = nxt
            if not frontier:
                # complete: no path from a, and the region to renumber is known
                bwd = set(seen_b)
            smin = min(map(key, sa), default=ob)
            if smin >= ob:
                # S is empty
                self._used.discard(oa)
                self._contract(a, b, ob)
                return None, self._last
        else:
            smin = min(map(key, sa), default=ob)
            if smin >= ob:
                self._used.discard(oa)
                self._contract(a, b, ob)
                return None, self._last
            T = [x for x in pb if x != a and ord_[x] > oa]
            if not T:
                self._used.discard(ob)
                self._contract(a, b, oa)
                return None, self._last
        tmax = max(map(key, T))
        if tmax < smin:
            # nothing of a's side can reach b's side; any slot strictly between works
            mid = (smin + tmax) // 2
            if tmax < mid < smin and mid not in self._used:
                self._used.discard(oa)
                self._used.discard(ob)
                self._used.add(mid)
                self._contract(a, b, mid)
                return None, self._last
        elif bwd is None:
            tset = set(T)
            # breadth first: the path that closes a cycle is usually short (a -> s -> b is common).
            # The members of S ordered up to tmax (< ob, as T precedes b) are a's successors there.
            frontier = [x for x in sa if ord_[x] <= tmax]
            for x in frontier:
                if x in tset:
                    self._reach.setdefault(a, set()).add(x)
                    return x, -1
            seen = set(frontier)
            while frontier:
                nxt = []
                for x in frontier:
                    for y in succ[x]:
                        if y not in seen and ord_[y] <= tmax:
                            if y in tset:
                                self._reach.setdefault(a, set()).add(y)
                                return y, -1
                            seen.add(y)
                            nxt.append(y)
                frontier = nxt
        # accepted: renumber the affected region
        if bwd is None:
            stack = list(T)
            bwd = set(stack)
            while stack:
                x = stack.pop()
                for y in pred[x]:
                    if y not in bwd and ord_[y] > oa:
                        bwd.add(y)
                        stack.append(y)
        # prefer spreading the moved nodes out (_sink) to packing them above a (_one_sided):
        # packed slots leave no room for later moves, which then fall to the general case
        if self._sink(a, b, bwd, smin):
            return None, self._last
        if self._one_sided(a, b, bwd):
            return None, self._last
        # general case (Pearce & Kelly): descendants of a before b, ancestors of b after a
        stack = [x for x in sa if x != b and ord_[x] < ob]
        fwd = set(stack)
        while stack:
            x = stack.pop()
            for y in succ[x]:
                if y not in fwd and ord_[y] < ob:
                    fwd.add(y)
                    stack.append(y)
        B = sorted(bwd, key=key)
        F = sorted(fwd, key=key)
        slots = sorted([ord_[x] for x in B] + [ord_[x] for x in F] + [oa, ob])
        k = 0
        for x in B:
            ord_[x] = slots[k]
            k += 1
        m_slot = slots[k]
        k += 1
        for x in F:
            ord_[x] = slots[k]
            k += 1
        # the slots are a permutation of the region's old ones, minus the one left unused
        self._used.discard(slots[-1] if k < len(slots) else None)
        self._contract(a, b, m_slot)
        return None, self._last

    def _one_sided(self, a: int, b: int, bwd: set) -> bool:
        """Merge ``a`` and ``b`` (``ord[a] < ord[b]``, acyclic) by moving only ``b``'s ancestors.

        ``bwd`` holds every ancestor of ``b`` ordered after ``a``. When the slots just above
        ``a`` are free, those ancestors move there (keeping their order) and the merged node comes
        right after them; ``a``'s descendants do not move. Valid because the ancestors' other
        predecessors come before ``a`` and every other successor (theirs or ``a``'s) lies beyond
        the free interval. Returns ``False`` (nothing changed) when the interval is not free.
        """
        ord_, used = self.ord, self._used
        oa, ob = ord_[a], ord_[b]
        k = len(bwd)
        for j in range(1, k + 2):
            if (oa + j) in used:
                return False
        for j, x in enumerate(sorted(bwd, key=ord_.__getitem__), start=1):
            used.discard(ord_[x])
            ord_[x] = oa + j
            used.add(oa + j)
        used.discard(oa)
        used.discard(ob)
        used.add(oa + k + 1)
        self._contract(a, b, oa + k + 1)
        return True

    def _sink(self, a: int, b: int, bwd: set, smin: int) -> bool:
        """Merge ``a`` and ``b`` (``ord[a] < ord[b]``, acyclic) by moving down only some of ``b``'s ancestors.

        ``bwd`` holds every ancestor of ``b`` ordered after ``a``; ``smin`` is the lowest slot of a
        successor of ``a`` ordered before ``b`` (every descendant of ``a`` in the region comes at
        or after it). The ancestors already below ``smin`` stay; those above it, then the merged
        node, move (keeping their order) into free slots spread over ``(M, smin)``, ``M`` the highest slot
        of ``a`` and of the ancestors that stay. Valid because a moved node only moves down, its
        predecessors are ancestors of ``b`` (in ``bwd``, all below its new slot) or precede ``a``,
        and every descendant of ``a`` lies at or above ``smin``. This avoids searching ``a``'s
        descendants, which on random DAGs is most of the graph. Returns ``False`` (nothing changed)
        when ``(M, smin)`` has too few free slots.
        """
        ord_, used = self.ord, self._used
        oa, ob = ord_[a], ord_[b]
        hi = []
        m = oa
        for x in bwd:
            o = ord_[x]
            if o > smin:
                hi.append(x)
            elif o > m:
                m = o
        k = len(hi) + 1  # slots needed: the moved ancestors and the merged node
        # any free slots of (m, smin) will do: a node ordered there is neither an ancestor of b
        # (it would be in bwd, and below m) nor a descendant of a (it would be at or above smin),
        # so it is unrelated to every node that moves. Spread them out to keep room for later.
        step = (smin - m) // (k + 1)
        if step < 1:
            return False
        picked = []
        for j in range(1, k + 1):
            x = m + j * step
            top = x + step  # stay below the next pick, so the picks stay increasing
            while x in used and x < top:
                x += 1
            if x >= top or x >= smin:
                return False
            picked.append(x)
        hi.sort(key=ord_.__getitem__)
        for x in hi:
            used.discard(ord_[x])
        used.discard(oa)
        used.discard(ob)
        for x, slot in zip(hi, picked):
            ord_[x] = slot
            used.add(slot)
        used.add(picked[-1])
        self._contract(a, b, picked[-1])
        return True

    def _contract(self, a: int, b: int, m_slot: int) -> None:
        succ, pred, members = self.succ, self.pred, self.members
        # the larger group survives so relabelling stays O(n log n) overall; a tie goes to the
        # lower id, so the survivor never depends on the internal (renumbered) order
        la, lb = len(members[a]), len(members[b])
        if la > lb or (la == lb and a < b):
            s, l = a, b
        else:
            s, l = b, a
        ss, sp = succ[s], pred[s]
        for y in succ[l]:
            if y != s:
                py = pred[y]
                del py[l]
                py[s] = None
                ss[y] = None
        for y in pred[l]:
            if y != s:
                sy = succ[y]
                del sy[l]
                sy[s] = None
                sp[y] = None
        ss.pop(l, None)
        sp.pop(l, None)
        succ[l] = {}
        pred[l] = {}
        owner = self.owner
        ml = members[l]
        for o in ml:
            owner[o] = s
        members[s].extend(ml)
        members[l] = []
        lr = self._reach.pop(l, None)
        if lr:
            self._reach.setdefault(s, set()).update(lr)
        self.ord[s] = m_slot
        self.n_alive -= 1
        self._last = s

    def live_nodes(self) -> list[int]:
        """Live nodes ordered by their first op: canonical, whatever the internal renumbering."""
        members = self.members
        firsts = [(min(m), x) for x, m in enumerate(members) if m]
        firsts.sort()
        return [x for _, x in firsts]
