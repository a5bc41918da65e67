"""The computation graph: ops as nodes, tensors as edges with one producer and many consumers.

A tensor read by three ops is *one* tensor (freed after its last reader), never three edges with
three sizes. The op->op ``networkx.DiGraph`` view is derived from the tensors and cached; every
mutation invalidates the caches, so algorithms can freely ask for topological orders.

Examples
--------
>>> from hetsched.graph import OpGraph
>>> g = OpGraph("tiny")
>>> _ = g.add_op("a", "Conv", flops=2e9, weight_bytes=4096)
>>> _ = g.add_op("b", "Relu", flops=1e6)
>>> _ = g.add_tensor("x", 1024, producer=None, consumers=["a"])
>>> _ = g.add_tensor("a_out", 2048, producer="a", consumers=["b"])
>>> _ = g.add_tensor("y", 2048, producer="b", is_output=True)
>>> g.validate()
>>> g.topological_order()
['a', 'b']
>>> g.edge_tensors("a", "b")
['a_out']
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Mapping

import networkx as nx

from .errors import CycleError, GraphError, UnknownNameError, name_list
from .limits import MAX_BYTES, MAX_FLOPS, show_number

__all__ = ["Op", "Tensor", "OpGraph"]


@dataclass(frozen=True, slots=True)
class Op:
    """One operator.

    Attributes
    ----------
    name : str
        Unique name.
    op_type : str
        Operator type as frameworks spell it (``Conv``, ``MatMul``, ``Relu``...).
    flops : float
        Floating-point operations of one execution (a multiply-accumulate counts as 2).
    weight_bytes : int
        Bytes of parameters the op reads (kept on the op, not as tensors, as H2H does).
    attrs : dict
        Free-form attributes (shapes, dtype, layer index, modality...).
    """

    name: str
    op_type: str
    flops: float = 0.0
    weight_bytes: int = 0
    attrs: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True)
class Tensor:
    """One tensor: a value produced once and read by any number of ops.

    Attributes
    ----------
    name : str
        Unique name.
    size_bytes : int
        Bytes the tensor occupies.
    producer : str or None
        Op that writes it; ``None`` for a graph input (lives in host memory at the start).
    consumers : tuple of str
        Ops that read it, in the order they were declared.
    is_output : bool
        A graph output is never freed and goes back to the host at the end.
    alias_of : str or None
        For view/alias ops: the base tensor this one shares storage with (allocates nothing).
    attrs : dict
        Shape, dtype, kind (``activation``, ``gradient``, ``weight``...), anything else.
    """

    name: str
    size_bytes: int
    producer: str | None = None
    consumers: tuple[str, ...] = ()
    is_output: bool = False
    alias_of: str | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)


class OpGraph:
    """A computation graph: ops (nodes) and tensors (hyper-edges producer -> consumers).

    Parameters
    ----------
    name : str
        A label for views and files.
    meta : dict, optional
        Provenance and anything else carried along (source paper, batch size...).

    Notes
    -----
    Ops and tensors keep insertion order; every order this class returns is deterministic and
    independent of ``PYTHONHASHSEED``.
    """

    def __init__(self, name: str = "graph", meta: Mapping[str, Any] | None = None) -> None:
        self.name = name
        self.meta: dict[str, Any] = dict(meta or {})
        self._ops: dict[str, Op] = {}
        self._tensors: dict[str, Tensor] = {}
        self._inputs: dict[str, list[str]] = {}  # op -> tensors it reads
        self._outputs: dict[str, list[str]] = {}  # op -> tensors it writes
        self._cache: dict[str, Any] = {}
        self._version = 0

    def __getstate__(self) -> dict[str, Any]:
        # the cache holds derived tables (networkx view, compiled memory model, search tables with
        # local functions): a copy in another process rebuilds what it needs
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    # ------------------------------------------------------------------ building
    def add_op(
        self,
        name: str,
        op_type: str,
        *,
        flops: float = 0.0,
        weight_bytes: int = 0,
        attrs: Mapping[str, Any] | None = None,
        **more_attrs: Any,
    ) -> Op:
        """Add an op; names must be unique.

        >>> g = OpGraph(); g.add_op("mm", "MatMul", flops=10).flops
        10
        """
        if name in self._ops:
            raise GraphError(f"duplicate op name {name!r}", op=name)
        op = Op(name, str(op_type), flops, weight_bytes, {**(attrs or {}), **more_attrs})
        self._ops[name] = op
        self._inputs.setdefault(name, [])
        self._outputs.setdefault(name, [])
        self._changed()
        return op

    def add_tensor(
        self,
        name: str,
        size_bytes: int,
        *,
        producer: str | None = None,
        consumers: Iterable[str] = (),
        is_output: bool = False,
        alias_of: str | None = None,
        attrs: Mapping[str, Any] | None = None,
        **more_attrs: Any,
    ) -> Tensor:
        """Add a tensor. Producer/consumers may name ops added later; ``validate()`` checks them.

        >>> g = OpGraph(); _ = g.add_op("a", "Relu")
        >>> g.add_tensor("t", 8, producer="a", is_output=True).is_output
        True
        """
        if name in self._tensors:
            raise GraphError(f"duplicate tensor name {name!r}", tensor=name)
        t = Tensor(
            name,
            size_bytes,
            producer,
            tuple(consumers),
            bool(is_output),
            alias_of,
            {**(attrs or {}), **more_attrs},
        )
        self._tensors[name] = t
        if producer is not None:
            self._outputs.setdefault(producer, []).append(name)
        for c in t.consumers:
            self._inputs.setdefault(c, []).append(name)
        self._changed()
        return t

    def add_consumer(self, tensor: str, op: str) -> None:
        """Make ``op`` read an existing ``tensor`` as well.

        >>> g = OpGraph(); _ = g.add_op("a", "Relu"); _ = g.add_op("b", "Relu")
        >>> _ = g.add_tensor("t", 8, consumers=["a"]); g.add_consumer("t", "b")
        >>> g.tensor("t").consumers
        ('a', 'b')
        """
        t = self.tensor(tensor)
        if op in t.consumers:
            return
        self._tensors[tensor] = replace(t, consumers=t.consumers + (op,))
        self._inputs.setdefault(op, []).append(tensor)
        self._changed()

    def connect(self, src: str, dst: str, size_bytes: int, *, name: str | None = None, **attrs: Any) -> Tensor:
        """Shortcut: a tensor from ``src`` to ``dst``; reuses ``src``'s output named ``name`` if it exists.

        >>> g = OpGraph(); _ = g.add_op("a", "Relu"); _ = g.add_op("b", "Relu")
        >>> g.connect("a", "b", 64).name
        'a:0'
        """
        tname = name or f"{src}:{len(self._outputs.get(src, []))}"
        if tname in self._tensors:
            self.add_consumer(tname, dst)
            return self._tensors[tname]
        return self.add_tensor(tname, size_bytes, producer=src, consumers=[dst], attrs=attrs)

    def set_op(self, name: str, **changes: Any) -> Op:
        """Replace fields of an op (``flops``, ``weight_bytes``, ``attrs``, ``op_type``)."""
        op = replace(self.op(name), **changes)
        self._ops[name] = op
        self._changed()
        return op

    def set_tensor(self, name: str, **changes: Any) -> Tensor:
        """Replace fields of a tensor other than its producer/consumers (``size_bytes``, ``is_output``...)."""
        if "producer" in changes or "consumers" in changes:
            raise GraphError("change producer/consumers by rebuilding the tensor", tensor=name)
        t = replace(self.tensor(name), **changes)
        self._tensors[name] = t
        self._changed()
        return t

    # ------------------------------------------------------------------ access
    @property
    def ops(self) -> Mapping[str, Op]:
        """Ops by name, in insertion order (read-only view)."""
        return _ReadOnly(self._ops)

    @property
    def tensors(self) -> Mapping[str, Tensor]:
        """Tensors by name, in insertion order (read-only view)."""
        return _ReadOnly(self._tensors)

    def op(self, name: str) -> Op:
        """The op called ``name``; an unknown name raises ``UnknownNameError`` naming it."""
        try:
            return self._ops[name]
        except KeyError:
            raise UnknownNameError(f"unknown op {name!r} in graph {self.name!r}", op=name) from None

    def tensor(self, name: str) -> Tensor:
        """The tensor called ``name``; an unknown name raises ``UnknownNameError`` naming it."""
        try:
            return self._tensors[name]
        except KeyError:
            raise UnknownNameError(f"unknown tensor {name!r} in graph {self.name!r}", tensor=name) from None

    def inputs_of(self, op: str) -> list[str]:
        """Names of the tensors ``op`` reads."""
        self.op(op)
        return list(self._inputs.get(op, []))

    def outputs_of(self, op: str) -> list[str]:
        """Names of the tensors ``op`` writes."""
        self.op(op)
        return list(self._outputs.get(op, []))

    def __len__(self) -> int:
        return len(self._ops)

    def __contains__(self, name: object) -> bool:
        return name in self._ops

    def __iter__(self) -> Iterator[str]:
        return iter(self._ops)

    def __repr__(self) -> str:
        return f"OpGraph({self.name!r}, n_ops={self.n_ops}, n_tensors={self.n_tensors})"

    def _changed(self) -> None:
        self._cache.clear()
        self._version += 1

    @property
    def version(self) -> int:
        """A number that grows with every change to the graph (an op or tensor added or edited).

        Whoever keeps something computed from a graph keys it by ``(graph, graph.version)``: an edit in
        place (``set_tensor``, ``add_consumer``...) keeps the object and its op count but not its version.

        >>> g = OpGraph(); _ = g.add_op("a", "Relu"); v = g.version
        >>> _ = g.add_tensor("x", 10, consumers=["a"]); g.version > v
        True
        """
        return self._version

    @property
    def n_ops(self) -> int:
        return len(self._ops)

    @property
    def n_tensors(self) -> int:
        return len(self._tensors)

    @property
    def total_flops(self) -> float:
        return float(sum(o.flops for o in self._ops.values()))

    @property
    def total_weight_bytes(self) -> int:
        """Bytes of distinct weights: an op's ``attrs["shared_weight_bytes"]`` (weights another op
        owns, e.g. a tied LM head, a backward op re-reading its forward op's weights) count once."""
        return int(sum(o.weight_bytes - int(o.attrs.get("shared_weight_bytes", 0) or 0) for o in self._ops.values()))

    def graph_inputs(self) -> list[str]:
        """Tensors with no producer."""
        return [t.name for t in self._tensors.values() if t.producer is None]

    def graph_outputs(self) -> list[str]:
        """Tensors marked ``is_output``."""
        return [t.name for t in self._tensors.values() if t.is_output]

    # ------------------------------------------------------------------ structure
    @property
    def nx(self) -> nx.DiGraph:
        """The op->op ``DiGraph`` (edge attribute ``tensors``: names carried). Cached; do not mutate."""
        G = self._cache.get("nx")
        if G is None:
            # Collect edges in a plain dict first, then hand them to networkx in one call: per-edge
            # has_edge/add_edge dominated at 100k ops (1.6 s -> ~0.5 s).
            edges: dict[tuple[str, str], list[str]] = {}
            for t in self._tensors.values():
                p = t.producer
                if p is None:
                    continue
                for c in t.consumers:
                    if c == p:
                        continue  # a self-loop is reported by validate(), not silently kept
                    key = (p, c)
                    lst = edges.get(key)
                    if lst is None:
                        edges[key] = [t.name]
                    else:
                        lst.append(t.name)
            G = nx.DiGraph(name=self.name)
            G.add_nodes_from(self._ops)
            G.add_edges_from((p, c, {"tensors": ts}) for (p, c), ts in edges.items())
            self._cache["nx"] = G
        return G

    def _adjacency(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """``(successors, predecessors)`` of every op as plain lists (cached).

        Same contents and order as ``self.nx`` (first occurrence in tensor order), but built without
        networkx: the topological order and ``validate()`` at 100k ops need no DiGraph.
        """
        adj = self._cache.get("adj")
        if adj is None:
            succ: dict[str, list[str]] = {n: [] for n in self._ops}
            pred: dict[str, list[str]] = {n: [] for n in self._ops}
            seen: set[tuple[str, str]] = set()
            for t in self._tensors.values():
                p = t.producer
                if p is None or p not in succ:
                    continue
                for c in t.consumers:
                    if c == p or c not in pred or (p, c) in seen:
                        continue
                    seen.add((p, c))
                    succ[p].append(c)
                    pred[c].append(p)
            adj = self._cache["adj"] = (succ, pred)
        return adj

    def predecessors(self, op: str) -> list[str]:
        """Ops whose outputs ``op`` reads (deduplicated, deterministic order)."""
        self.op(op)
        return list(self._adjacency()[1][op])

    def successors(self, op: str) -> list[str]:
        """Ops that read an output of ``op`` (deduplicated, deterministic order)."""
        self.op(op)
        return list(self._adjacency()[0][op])

    def edge_tensors(self, src: str, dst: str) -> list[str]:
        """Tensors carried from ``src`` to ``dst`` (empty when not adjacent)."""
        data = self.nx.get_edge_data(src, dst)
        return list(data["tensors"]) if data else []

    def topological_order(self) -> list[str]:
        """A deterministic topological order (Kahn's algorithm, ties broken by insertion order).

        A cycle raises ``CycleError`` naming the ops on it.
        """
        order = self._cache.get("topo")
        if order is None:
            succ, pred = self._adjacency()
            indeg = {n: len(ps) for n, ps in pred.items()}
            pos = {n: i for i, n in enumerate(self._ops)}
            import heapq

            ready = [(pos[n], n) for n, d in indeg.items() if d == 0]
            heapq.heapify(ready)
            order = []
            while ready:
                _, n = heapq.heappop(ready)
                order.append(n)
                for s in succ[n]:
                    indeg[s] -= 1
                    if indeg[s] == 0:
                        heapq.heappush(ready, (pos[s], s))
            if len(order) != len(indeg):
                self._raise_cycle()
            self._cache["topo"] = order
        return list(order)

    def generations(self) -> list[list[str]]:
        """Ops grouped by depth: generation k holds ops whose longest path from an input has k edges.

        These are the patent-000 "groups of layers whose predecessors are all mapped".
        """
        gens = self._cache.get("gens")
        if gens is None:
            depth: dict[str, int] = {}
            for n in self.topological_order():
                preds = self._adjacency()[1][n]
                depth[n] = 1 + max((depth[p] for p in preds), default=-1)
            n_gen = 1 + max(depth.values(), default=-1)
            gens = [[] for _ in range(n_gen)]
            for n in self.topological_order():
                gens[depth[n]].append(n)
            self._cache["gens"] = gens
        return [list(g) for g in gens]

    def is_acyclic(self) -> bool:
        return nx.is_directed_acyclic_graph(self.nx)

    def _raise_cycle(self) -> None:
        try:
            edges = nx.find_cycle(self.nx)
        except nx.NetworkXNoCycle:  # pragma: no cover - only reached on inconsistent caches
            edges = []
        cycle = [u for u, _ in edges]
        raise CycleError(
            f"graph {self.name!r} has a cycle through ops {' -> '.join(cycle + cycle[:1])}",
            op=cycle[0] if cycle else None,
            cycle=cycle,
        )

    def validate(self) -> None:
        """Check the graph; raise a ``GraphError`` naming every offending op/tensor.

        Checks: names are non-empty strings; every producer/consumer names an op; no negative,
        non-finite or too large size, flops or weight bytes (limits in :mod:`hetsched.limits`: each
        byte count and the graph's total at most 2**53, each op's flops at most 1e30); no op reads its
        own output; alias bases exist and no tensor aliases itself, directly or through a loop; acyclic.

        >>> g = OpGraph(); _ = g.add_op("a", "Relu")
        >>> _ = g.add_tensor("t", -1, producer="a", is_output=True)
        >>> g.validate()
        Traceback (most recent call last):
        ...
        hetsched.errors.GraphError: tensor 't' has negative size_bytes -1
        """
        if self._cache.get("valid"):  # checked since the last change (every algorithm validates its input)
            return
        total = 0
        for op in self._ops.values():
            if not isinstance(op.name, str) or not op.name:
                raise GraphError(f"op name must be a non-empty string, got {op.name!r}", op=str(op.name), field="name")
            for fld, limit in (("flops", MAX_FLOPS), ("weight_bytes", MAX_BYTES)):
                why = _bad_amount(getattr(op, fld), limit)
                if why:
                    raise GraphError(f"op {op.name!r} has invalid {fld} {show_number(getattr(op, fld))}: {why}",
                                     op=op.name, field=fld)
            total += op.weight_bytes
        for t in self._tensors.values():
            if not isinstance(t.name, str) or not t.name:
                raise GraphError(f"tensor name must be a non-empty string, got {t.name!r}", tensor=str(t.name), field="name")
            why = _bad_amount(t.size_bytes, MAX_BYTES)
            if why == "negative":
                raise GraphError(
                    f"tensor {t.name!r} has negative size_bytes {t.size_bytes}", tensor=t.name, field="size_bytes"
                )
            if why:
                raise GraphError(
                    f"tensor {t.name!r} has invalid size_bytes {show_number(t.size_bytes)}: {why}", tensor=t.name,
                    field="size_bytes",
                )
            total += t.size_bytes
            if t.producer is not None and t.producer not in self._ops:
                raise GraphError(
                    f"tensor {t.name!r} names unknown producer op {t.producer!r}", tensor=t.name, op=t.producer
                )
            missing = [c for c in t.consumers if c not in self._ops]
            if missing:
                raise GraphError(
                    f"tensor {t.name!r} names unknown consumer op(s) {name_list(missing)}",
                    tensor=t.name,
                    op=missing[0],
                )
            if t.producer is not None and t.producer in t.consumers:
                raise CycleError(
                    f"op {t.producer!r} reads its own output tensor {t.name!r}",
                    op=t.producer,
                    tensor=t.name,
                    cycle=[t.producer],
                )
            if len(set(t.consumers)) != len(t.consumers):
                raise GraphError(f"tensor {t.name!r} lists a consumer twice", tensor=t.name)
            if t.alias_of is not None and t.alias_of not in self._tensors:
                raise GraphError(
                    f"tensor {t.name!r} aliases unknown tensor {t.alias_of!r}", tensor=t.name, field="alias_of"
                )
        if total > MAX_BYTES:  # sums of int64 byte counts must never wrap round (a negative peak)
            big = max(self._tensors.values(), key=lambda t: t.size_bytes, default=None)
            raise GraphError(
                f"graph {self.name!r} holds {total} bytes of tensors and weights, above hetsched's limit of 2**53",
                tensor=big.name if big else None, field="size_bytes",
            )
        self._check_aliases()
        self.topological_order()
        self._cache["valid"] = True

    def _check_aliases(self) -> None:
        """No tensor aliases itself, directly or through a chain of views that comes back to it."""
        base = {t.name: t.alias_of for t in self._tensors.values() if t.alias_of is not None}
        done: set[str] = set()
        for start in base:
            path: list[str] = []
            on_path: set[str] = set()
            cur: str | None = start
            while cur in base and cur not in done:
                if cur in on_path:
                    loop = path[path.index(cur):] + [cur]
                    what = f"tensor {cur!r} aliases itself" if len(loop) == 2 else "tensors alias each other in a loop"
                    raise GraphError(f"{what}: {' -> '.join(map(repr, loop))}", tensor=cur, field="alias_of", loop=loop)
                on_path.add(cur)
                path.append(cur)
                cur = base[cur]
            done.update(path)

    # ------------------------------------------------------------------ derived graphs
    def subgraph(self, ops: Iterable[str], name: str | None = None) -> "OpGraph":
        """The graph induced by ``ops``.

        Tensors entering from outside become graph inputs; tensors leaving (read outside, or graph
        outputs) become outputs of the subgraph.

        >>> g = OpGraph(); [g.add_op(n, "Relu") and None for n in "abc"]
        [None, None, None]
        >>> _ = g.connect("a", "b", 4); _ = g.connect("b", "c", 4)
        >>> s = g.subgraph(["b", "c"]); s.graph_inputs()
        ['a:0']
        """
        ops = list(ops)  # may be a generator: read it once
        want = set(ops)
        keep = [o for o in self._ops if o in want]
        keep_set = set(keep)
        unknown = want - set(self._ops)
        if unknown:
            raise UnknownNameError(f"unknown op(s) {name_list(sorted(unknown))}", op=sorted(unknown)[0])
        sub = OpGraph(name or f"{self.name}[sub]", self.meta)
        for o in keep:
            op = self._ops[o]
            sub._ops[o] = op
            sub._inputs[o] = []
            sub._outputs[o] = []
        for t in self._tensors.values():
            prod_in = t.producer in keep_set
            cons = tuple(c for c in t.consumers if c in keep_set)
            if not prod_in and not cons:
                continue
            leaves = t.is_output or any(c not in keep_set for c in t.consumers)
            sub._tensors[t.name] = replace(
                t,
                producer=t.producer if prod_in else None,
                consumers=cons,
                is_output=bool(prod_in and leaves),
                alias_of=t.alias_of if (t.alias_of in self._tensors and t.alias_of is not None) else None,
            )
            if prod_in:
                sub._outputs[t.producer].append(t.name)
            for c in cons:
                sub._inputs[c].append(t.name)
        # an alias whose base was dropped would dangle
        for t in list(sub._tensors.values()):
            if t.alias_of is not None and t.alias_of not in sub._tensors:
                sub._tensors[t.name] = replace(t, alias_of=None)
        return sub

    def copy(self, name: str | None = None) -> "OpGraph":
        """An independent copy."""
        g = OpGraph(name or self.name, self.meta)
        g._ops = dict(self._ops)
        g._tensors = dict(self._tensors)
        g._inputs = {k: list(v) for k, v in self._inputs.items()}
        g._outputs = {k: list(v) for k, v in self._outputs.items()}
        return g

    def summary(self) -> dict[str, Any]:
        """Counts and totals for a panel or a report.

        >>> g = OpGraph(); _ = g.add_op("a", "Relu", flops=3); g.summary()["n_ops"]
        1
        """
        largest = max(self._tensors.values(), key=lambda t: t.size_bytes, default=None)
        return {
            "name": self.name,
            "n_ops": self.n_ops,
            "n_tensors": self.n_tensors,
            "total_flops": self.total_flops,
            "total_weight_bytes": self.total_weight_bytes,
            "largest_tensor": largest.name if largest else None,
            "largest_tensor_bytes": int(largest.size_bytes) if largest else 0,
            "op_types": dict(sorted(_count(o.op_type for o in self._ops.values()).items())),
        }

    def op_types(self) -> list[str]:
        """Distinct op types in first-seen order."""
        return list(dict.fromkeys(o.op_type for o in self._ops.values()))


def _bad_amount(v: Any, limit: float) -> str | None:
    """Why ``v`` is no valid amount in ``[0, limit]`` (``"negative"``, ...), or None when it is one.

    Compares before any float conversion: ``math.isfinite(10**400)`` would raise OverflowError.
    """
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        return "not a number"
    if v != v:
        return "not a number (NaN)"
    if v < 0:
        return "negative"
    if isinstance(v, float) and math.isinf(v):
        return "not finite"
    if v > limit:
        return f"above hetsched's limit of {'2**53' if limit == MAX_BYTES else f'{limit:g}'}"
    return None


def _count(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


class _ReadOnly(Mapping):
    """A read-only live view of a dict (cheap: no copy at 100k ops)."""

    __slots__ = ("_d",)

    def __init__(self, d: dict) -> None:
        self._d = d

    def __getitem__(self, k):
        return self._d[k]

    def __iter__(self):
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, k) -> bool:
        return k in self._d

    def __repr__(self) -> str:
        return f"ReadOnly({len(self._d)} items)"
