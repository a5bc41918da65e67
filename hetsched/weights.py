"""Tied weights: one weight read by several ops, held once on a device (issue 28).

An imported model may read one weight from several ops: GPT-2's and T5's LM head read the token
embedding, ALBERT's layers one set of weights, and a joint training program's backward ops
re-read their forward op's weights. Each reader keeps every byte it reads in ``weight_bytes``
(the cost models price the read); a later reader says whose weights it reads,
``attrs["shares_weights_with"]`` (the *owner*, the first reader) and ``attrs["shared_weight_bytes"]``
(how many of its bytes are the owner's). :class:`TiedWeights` is the one reading of those two
attributes that every place summing weight memory asks:

* :meth:`TiedWeights.held_bytes`: the bytes a set of ops on one device holds, each tied weight
  once (the evaluator's resident weights, the mapping engine's memory plan, a pipeline stage);
* :meth:`TiedWeights.fetch_bytes`: what a non-resident op fetches from the host when another
  reader of the same weight keeps it resident on its device (the clock);
* :meth:`TiedWeights.marginal`: the bytes one more resident op adds to its device (the memory
  plan's running sum, the evaluator's memory rows).

The rule, per device: a sharer's own part (``weight_bytes - shared_weight_bytes``) always counts;
the shared part counts once per owner, not at all when the owner itself is resident there (its
weights include it), else as the largest shared part among the resident sharers. A sharer whose
``shares_weights_with`` names a known op but gives no ``shared_weight_bytes`` shares all its bytes
(the zoo's convention before the attribute existed). An op reading weights of two owners names the
first (the torch importer's rule): its shared bytes are then all counted against that owner.

>>> from hetsched.graph import OpGraph
>>> g = OpGraph()
>>> _ = g.add_op("wte", "Gather", weight_bytes=100)
>>> _ = g.add_op("head", "MatMul", weight_bytes=100, attrs={"shares_weights_with": "wte", "shared_weight_bytes": 100})
>>> tw = TiedWeights.of(g)
>>> tw.held_bytes(["wte", "head"]), tw.held_bytes(["head"])
(100, 100)
>>> tw.fetch_bytes("head", "gpu0", {"wte": "gpu0", "head": "gpu0"}, {"wte"})   # read in place
0
>>> tw.marginal("head", "gpu0", {"wte": "gpu0", "head": "gpu0"}, {"wte"})
0
"""

from __future__ import annotations

from typing import Collection, Iterable, Mapping

from .graph import OpGraph

__all__ = ["TiedWeights", "held_weight_bytes"]


class TiedWeights:
    """Who shares whose weights in one graph (see the module).

    Attributes
    ----------
    shared : dict
        Sharer -> ``(owner, bytes)``: the bytes of its ``weight_bytes`` that are the owner's.
    sharers : dict
        Owner -> its sharers (graph order).
    related : dict
        Op -> the other ops of its tie groups (its owner, the owner's other sharers, its own
        sharers): whose residency changes what it fetches or holds. Ops in no group are absent.
    """

    def __init__(self, graph: OpGraph) -> None:
        ops = graph.ops
        self.weight = {o: int(op.weight_bytes) for o, op in ops.items()}
        self.shared: dict[str, tuple[str, int]] = {}
        self.sharers: dict[str, list[str]] = {}
        for o, op in ops.items():
            owner = op.attrs.get("shares_weights_with")
            if not owner or owner == o or owner not in ops or not op.weight_bytes:
                continue
            b = op.attrs.get("shared_weight_bytes")
            b = int(op.weight_bytes) if b is None else min(int(b or 0), int(op.weight_bytes))
            if b <= 0:
                continue
            self.shared[o] = (owner, b)
            self.sharers.setdefault(owner, []).append(o)
        rel: dict[str, set[str]] = {}
        for owner, ss in self.sharers.items():
            group = [owner, *ss]
            for m in group:
                rel.setdefault(m, set()).update(x for x in group if x != m)
        self.related: dict[str, tuple[str, ...]] = {o: tuple(sorted(r)) for o, r in rel.items()}

    @classmethod
    def of(cls, graph: OpGraph) -> "TiedWeights":
        """The graph's tie groups, computed once per graph version."""
        cache = graph._cache
        tw = cache.get("tied_weights")
        if tw is None:
            tw = cache["tied_weights"] = cls(graph)
        return tw

    def __bool__(self) -> bool:
        return bool(self.shared)

    # ------------------------------------------------------------------ memory
    def held_bytes(self, ops: Iterable[str]) -> int:
        """Bytes of weights the ops of one device hold, each tied weight once.

        >>> from hetsched.io.zoo import gpt2_small
        >>> g = gpt2_small(seq_len=8, n_layers=1)
        >>> tw = TiedWeights.of(g)
        >>> tw.held_bytes(g.ops) == g.total_weight_bytes
        True
        """
        S = set(ops)
        total = 0
        groups: dict[str, int] = {}
        w, shared = self.weight, self.shared
        for o in S:
            sh = shared.get(o)
            if sh is None:
                total += w[o]
            else:
                total += w[o] - sh[1]
                if sh[1] > groups.get(sh[0], 0):
                    groups[sh[0]] = sh[1]
        for owner, b in groups.items():
            if owner not in S:
                total += b
        return total

    def _on(self, ops: Iterable[str], d: str, device: Mapping[str, str], resident: Collection[str]) -> list[str]:
        return [m for m in ops if m in resident and device.get(m) == d]

    def fetch_bytes(self, o: str, d: str, device: Mapping[str, str], resident: Collection[str]) -> int:
        """Bytes a non-resident op ``o`` on ``d`` fetches from the host: its weights less the part another
        reader of the same weights keeps resident on ``d`` (read in place)."""
        w = self.weight[o]
        if o not in self.related:
            return w
        cover = 0
        sh = self.shared.get(o)
        if sh is not None:
            owner, b = sh
            if owner in resident and device.get(owner) == d:
                cover += b
            else:
                sib = self._on(self.sharers[owner], d, device, resident)
                cover += min(b, max((self.shared[s][1] for s in sib if s != o), default=0))
        mine = self.sharers.get(o)
        if mine:
            own = w - (sh[1] if sh is not None else 0)
            cover += min(own, max((self.shared[s][1] for s in self._on(mine, d, device, resident)), default=0))
        return max(0, w - cover)

    def marginal(self, o: str, d: str, device: Mapping[str, str], resident: Collection[str]) -> int:
        """Bytes op ``o`` adds to ``d`` when its weights become resident there (``o`` not counted in
        ``resident``): ``held(R + o) - held(R)`` over the resident ops ``R`` of ``o``'s tie groups on ``d``."""
        if o not in self.related:
            return self.weight[o]
        rel = [m for m in self._on(self.related[o], d, device, resident) if m != o]
        return max(0, self.held_bytes([*rel, o]) - self.held_bytes(rel))


def held_weight_bytes(graph: OpGraph, ops: Iterable[str]) -> int:
    """Bytes of weights ``ops`` (on one device, or one pipeline stage) hold, each tied weight once.

    >>> from hetsched.io.generators import chain
    >>> g = chain(3, seed=0)
    >>> held_weight_bytes(g, g.ops) == g.total_weight_bytes
    True
    """
    return TiedWeights.of(graph).held_bytes(ops)
