"""Mixture of experts: expert placement as the mapping patent's question.

An imported MoE model (:func:`hetsched.io.torch_import.load_torch` of Mixtral, Qwen-MoE, ...) holds
each MoE layer as a router (``attrs["moe"] = "router"``), a top-k selection (``"select"``) and the
experts' grouped products (``GroupedMatMul``, ``"experts"``): one op for all ``E`` experts, whose
FLOPs are those of the ``k`` experts each token runs (the rows of the token-expert pairs) and whose
weights are all ``E`` experts'. That is the right total, but no mapper can put expert 3 on one
device and expert 5 on another.

:func:`expert_graph` rewrites each MoE layer as the all-to-all it is on a multi-device system
(GShard, Lepikhin et al. 2021; DeepSpeed-MoE, Rajbhandari et al. 2022): a ``ExpertDispatch`` op
sends each expert its share of the routed tokens, ``E`` ``Expert`` ops (each the layer's expert
block for one expert: its FLOPs times the expert's expected share of the token-expert pairs, its
``1/E`` of the weights) run them, and an ``ExpertCombine`` op gathers the results. ``shares`` is the
expected share of each expert (uniform by default: a router trained with a load-balancing loss
aims at it; a measured routing histogram is the what-if). Experts over devices is then exactly
what the mapping patent decides (H2H's compute-first placement, locality and remapping, or HEFT):
:func:`place_experts` runs a mapper on that graph and :func:`expert_assignment` tabulates which
device holds which expert.

>>> from hetsched.io.generators import chain
>>> moe_layers(chain(3))
[]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .errors import GraphError, HetschedError
from .graph import OpGraph
from .params import Param, ParamSpec

__all__ = ["MoELayer", "moe_layers", "expert_shares", "expert_graph", "place_experts", "expert_assignment", "PARAMS"]

#: What an expert-placement view offers (a panel reads its defaults and bounds from here).
PARAMS = ParamSpec([
    Param("method", "choice", "h2h", options=("h2h", "h2h_makespan", "heft", "peft", "search"),
          label="mapper", help="the mapping method that places the experts"),
    Param("skew", "float", 0.0, min=0.0, max=4.0, step=0.25, label="routing skew",
          help="0: every expert gets the same share of tokens; larger: a Zipf-like popularity, expert i gets a "
               "share proportional to 1/(i+1)^skew"),
])


@dataclass(frozen=True)
class MoELayer:
    """One MoE layer of a graph: its ops and sizes."""

    index: int
    router: str | None
    select: str | None
    experts: tuple[str, ...]  # the grouped products, in graph order
    region: tuple[str, ...]  # every op from the first grouped product to the last (the experts' block)
    n_experts: int
    top_k: int | None


def moe_layers(graph: OpGraph) -> list[MoELayer]:
    """The MoE layers of an imported graph, in graph order (forward ops only).

    Each layer's experts are the grouped products that follow one top-k selection; its region is
    every op both downstream of the first and upstream of the last of them.
    """
    order = [o for o in graph.ops if graph.op(o).attrs.get("phase", "forward") == "forward"]
    pos = {o: i for i, o in enumerate(order)}
    selects = [o for o in order if graph.op(o).attrs.get("moe") == "select"]
    grouped = [o for o in order if graph.op(o).attrs.get("moe") == "experts"]
    if not grouped:
        return []
    bounds = [pos[s] for s in selects] + [len(order)]
    layers: list[MoELayer] = []
    for i, s in enumerate(selects or [None]):
        lo = pos[s] if s is not None else -1
        hi = bounds[i + 1] if s is not None else len(order)
        gs = [o for o in grouped if lo < pos[o] < hi]
        if not gs:
            continue
        region = _between(graph, gs[0], gs[-1])
        region |= _expert_weight_feeds(graph, region)
        router = None
        if s is not None:
            router = next((o for o in reversed(order[: pos[s]]) if graph.op(o).attrs.get("moe") == "router"), None)
        n_exp = graph.op(gs[0]).attrs.get("n_experts") or (graph.op(s).attrs.get("n_experts") if s else None)
        if not n_exp:
            raise GraphError(f"MoE layer at {gs[0]!r} does not say how many experts it has", op=gs[0], field="n_experts")
        k = graph.op(s).attrs.get("k") if s is not None else None
        layers.append(MoELayer(len(layers), router, s, tuple(gs), tuple(o for o in order if o in region), int(n_exp), k))
    return layers


def _expert_weight_feeds(graph: OpGraph, region: set[str]) -> set[str]:
    """Ops outside ``region`` that only bring it expert matrices: a gather of an expert-stacked
    weight (``attrs["moe"] == "expert_weights"``) and the views between it and the region."""
    extra: set[str] = set()
    for o in region:
        for t in graph.inputs_of(o):
            chain, p = [], graph.tensor(t).producer
            while p is not None and p not in region and len(chain) < 4:
                chain.append(p)
                if graph.op(p).attrs.get("moe") == "expert_weights":
                    extra.update(chain)
                    break
                ins = graph.inputs_of(p)
                p = graph.tensor(ins[0]).producer if len(ins) == 1 else None
    return extra


def _between(graph: OpGraph, first: str, last: str) -> set[str]:
    down, todo = {first}, [first]
    while todo:
        o = todo.pop()
        for t in graph.outputs_of(o):
            for c in graph.tensor(t).consumers:
                if c not in down:
                    down.add(c)
                    todo.append(c)
    up, todo = {last}, [last]
    while todo:
        o = todo.pop()
        for t in graph.inputs_of(o):
            p = graph.tensor(t).producer
            if p is not None and p not in up:
                up.add(p)
                todo.append(p)
    return down & up


def expert_shares(n_experts: int, shares: Sequence[float] | None = None, *, skew: float = 0.0) -> np.ndarray:
    """Expected share of the token-expert pairs per expert: ``shares`` as given (non-negative, summing
    to 1), else uniform, or Zipf-like with ``skew > 0`` (expert ``i`` proportional to ``1/(i+1)^skew``).

    >>> expert_shares(4).tolist(), expert_shares(2, skew=1.0).round(3).tolist()
    ([0.25, 0.25, 0.25, 0.25], [0.667, 0.333])
    """
    if shares is None:
        w = 1.0 / np.arange(1, n_experts + 1) ** float(skew)
        return w / w.sum()
    s = np.asarray(shares, dtype=float)
    if s.shape != (n_experts,):
        raise HetschedError(f"shares must list {n_experts} experts, got {s.shape[0] if s.ndim == 1 else s.shape}",
                            field="shares")
    if not np.all(np.isfinite(s)) or np.any(s < 0) or abs(s.sum() - 1.0) > 1e-6:
        raise HetschedError(f"shares must be >= 0 and sum to 1, got {s.tolist()}", field="shares")
    return s


def expert_graph(graph: OpGraph, shares: Sequence[float] | None = None, *, skew: float = 0.0,
                 name: str | None = None) -> OpGraph:
    """``graph`` with each MoE layer's experts as ``E`` ops a mapper can place one by one.

    The layer's region (see :func:`moe_layers`) becomes ``<L>.dispatch`` (``ExpertDispatch``:
    reads the region's inputs, writes ``<L>.tokens@<e>``, expert ``e``'s share of them),
    ``<L>.expert<e>`` (``Expert``: ``share_e`` x the region's FLOPs, ``1/E`` of its weights,
    ``attrs`` ``layer``, ``expert``, ``share``) and ``<L>.combine`` (``ExpertCombine``: writes the
    region's outputs under their own names, so the rest of the graph is unchanged). FLOPs and weight
    bytes are kept in total (for the uniform shares, per layer too). Everything else is copied.

    Raises
    ------
    HetschedError
        The graph has no MoE layer, or ``shares`` is not a distribution over the experts.
    """
    layers = moe_layers(graph)
    if not layers:
        raise HetschedError(f"graph {graph.name!r} has no mixture-of-experts layer (no experts' products)",
                            field="graph")
    in_region = {o: L for L in layers for o in L.region}
    g = OpGraph(name or f"{graph.name}-experts", meta={**graph.meta, "experts_split": True})
    plans = {L.index: _plan(graph, L, expert_shares(L.n_experts, shares, skew=skew)) for L in layers}
    # ops first (a layer's dispatch, experts and combine where its first op was), then every tensor
    # with its producer and consumers: a tensor may name ops of a layer placed later in the order
    done: set[int] = set()
    for o in graph.topological_order():
        L = in_region.get(o)
        if L is None:
            op = graph.op(o)
            g.add_op(o, op.op_type, flops=op.flops, weight_bytes=op.weight_bytes, attrs=dict(op.attrs))
        elif L.index not in done:
            done.add(L.index)
            for name, typ, flops, wb, attrs in plans[L.index]["ops"]:
                g.add_op(name, typ, flops=flops, weight_bytes=wb, attrs=attrs)
    kept: set[str] = set()
    for t, tt in graph.tensors.items():
        L = in_region.get(tt.producer) if tt.producer else None
        if L is not None and t not in plans[L.index]["outs"]:
            continue  # inside an experts' block: replaced by the experts' own tensors
        producer = plans[L.index]["combine"] if L is not None else tt.producer
        consumers = [c for c in tt.consumers if c not in in_region]
        for c in tt.consumers:  # a tensor entering a block goes to its dispatch
            d = plans[in_region[c].index]["dispatch"] if c in in_region else None
            if d is not None and in_region.get(tt.producer) is not in_region[c] and d not in consumers:
                consumers.append(d)
        alias = tt.alias_of if tt.alias_of in kept else None
        g.add_tensor(t, tt.size_bytes, producer=producer, consumers=consumers, is_output=tt.is_output, alias_of=alias,
                     attrs=dict(tt.attrs))
        kept.add(t)
    for plan in plans.values():
        for t, nbytes, prod_, cons, attrs in plan["tensors"]:
            g.add_tensor(t, nbytes, producer=prod_, consumers=cons, attrs=attrs)
    g.validate()
    return g


def _plan(src: OpGraph, L: MoELayer, shares: np.ndarray) -> dict[str, Any]:
    """The ops and tensors that replace one layer's experts' block."""
    region = set(L.region)
    ins = list(dict.fromkeys(t for o in L.region for t in src.inputs_of(o) if src.tensor(t).producer not in region))
    outs = [t for o in L.region for t in src.outputs_of(o)
            if src.tensor(t).is_output or any(c not in region for c in src.tensor(t).consumers)]
    flops = sum(src.op(o).flops for o in L.region)
    weights = sum(src.op(o).weight_bytes for o in L.region)
    in_bytes = sum(src.tensor(t).size_bytes for t in ins)
    out_bytes = sum(src.tensor(t).size_bytes for t in outs)
    p = f"moe{L.index}"
    base = {"layer": L.index, "n_experts": L.n_experts, "top_k": L.top_k, "phase": "forward"}
    dispatch, combine = f"{p}.dispatch", f"{p}.combine"
    ops = [(dispatch, "ExpertDispatch", 0.0, 0, {**base, "moe": "dispatch"})]
    tensors = []
    for e, s in enumerate(shares):
        x, y, op = f"{p}.tokens@{e}", f"{p}.out@{e}", f"{p}.expert{e}"
        ops.append((op, "Expert", float(flops * s), int(weights // L.n_experts),
                    {**base, "moe": "expert", "expert": e, "share": float(s), "ops": list(L.region)}))
        tensors.append((x, int(round(in_bytes * s)), dispatch, [op], {"kind": "activation", "expert": e}))
        tensors.append((y, int(round(out_bytes * s)), op, [combine], {"kind": "activation", "expert": e}))
    # data movement: the weighted sum of the k results stays where the source graph had it
    ops.append((combine, "ExpertCombine", 0.0, 0, {**base, "moe": "combine"}))
    return {"ops": ops, "tensors": tensors, "outs": set(outs), "dispatch": dispatch, "combine": combine}


def place_experts(graph: OpGraph, system: Any, *, method: str = "h2h", shares: Sequence[float] | None = None,
                  skew: float = 0.0, cost: Any = None, **options: Any):
    """Place a MoE model's experts over the devices of ``system`` with a mapper of the mapping family.

    ``graph`` is an imported MoE graph (its experts are split first with :func:`expert_graph`) or
    an already split one. ``method`` names a mapper of :data:`hetsched.mapping.METHODS` (default
    the patent's ``h2h``); ``options`` go to it. Returns its :class:`~hetsched.mapping.MappingResult`
    (steps, timeline, metrics): read the experts' devices with :func:`expert_assignment`.
    """
    from .mapping.methods import METHODS

    if method not in METHODS:
        raise HetschedError(f"unknown mapping method {method!r}: one of {', '.join(METHODS)}", field="method")
    g = graph if graph.meta.get("experts_split") else expert_graph(graph, shares, skew=skew)
    m = METHODS[method]
    return m.fn(g, system, cost=cost, **{**m.defaults, **options})


def expert_assignment(result: Any) -> pd.DataFrame:
    """One row per expert of a :func:`place_experts` result: ``layer, expert, device, share, flops,
    weight_bytes``, sorted by layer and expert.
    """
    g = result.graph
    rows = []
    for name, op in g.ops.items():
        if op.attrs.get("moe") != "expert":
            continue
        rows.append({"layer": op.attrs["layer"], "expert": op.attrs["expert"], "op": name,
                     "device": result.placement.device[name], "share": op.attrs["share"], "flops": op.flops,
                     "weight_bytes": op.weight_bytes})
    cols = ["layer", "expert", "op", "device", "share", "flops", "weight_bytes"]
    return pd.DataFrame(rows, columns=cols).sort_values(["layer", "expert"], ignore_index=True)
