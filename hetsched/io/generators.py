"""Seeded graph generators: random DAGs for property tests and benchmarks, and model-shaped graphs.

All generators are deterministic functions of their arguments (``seed`` included).

* :func:`topcuoglu` — the random DAGs of Topcuoglu, Hariri & Wu (IEEE TPDS 2002, section 5.1):
  ``n`` tasks, shape ``alpha`` (height ~ sqrt(n)/alpha levels, width ~ sqrt(n)*alpha), mean
  out-degree, communication-to-computation ratio ``ccr``; :func:`topcuoglu_costs` adds the
  heterogeneity ``beta`` as unrelated per-op x per-device costs.
* :func:`chain`, :func:`layered`, :func:`fork_join` — shapes that stress one thing at a time.
* :func:`transformer_block`, :func:`resnet_like`, :func:`randwire_ws` — model-shaped graphs with
  FLOPs and tensor sizes computed from layer shapes (fp32 unless ``dtype_bytes`` says otherwise).

>>> g = topcuoglu(50, seed=3); g.validate(); g.n_ops
50
>>> topcuoglu(50, seed=3).summary() == g.summary()
True
"""

from __future__ import annotations

import math
import random
from typing import Callable, NamedTuple

from ..errors import HetschedError
from ..graph import OpGraph
from ..params import Param, ParamSpec

__all__ = [
    "topcuoglu",
    "topcuoglu_costs",
    "chain",
    "layered",
    "fork_join",
    "transformer_block",
    "resnet_like",
    "randwire_ws",
    "GENERATORS",
    "DEFAULT_N",
    "Sizing",
    "SIZINGS",
    "PARAMS",
    "generate",
]

# reference hardware used to turn Topcuoglu's abstract "time units" into flops and bytes
REF_FLOPS = 1e12  # FLOP/s: one time unit of computation = REF_FLOPS * UNIT_S flops
REF_BPS = 1e10  # B/s: one time unit of communication = REF_BPS * UNIT_S bytes
UNIT_S = 1e-4

_RANDOM_TYPES = (("Conv", 0.35), ("MatMul", 0.25), ("Relu", 0.2), ("Add", 0.1), ("Softmax", 0.1))


def _check_pos(**kw: float) -> None:
    for k, v in kw.items():
        if v is None or v <= 0:
            raise HetschedError(f"generator parameter {k} must be positive, got {v!r}", field=k)


def _pick_type(rng: random.Random) -> str:
    x = rng.random()
    acc = 0.0
    for t, p in _RANDOM_TYPES:
        acc += p
        if x < acc:
            return t
    return _RANDOM_TYPES[-1][0]


def topcuoglu(
    n: int,
    *,
    alpha: float = 1.0,
    out_degree: float = 3.0,
    ccr: float = 1.0,
    w_dag: float = 50.0,
    weight_frac: float = 0.5,
    seed: int = 0,
) -> OpGraph:
    """A Topcuoglu-style random DAG.

    Parameters
    ----------
    n : int
        Number of ops.
    alpha : float
        Shape: levels ~ sqrt(n)/alpha, ops per level ~ uniform around sqrt(n)*alpha.
    out_degree : float
        Mean out-degree (edges go to later levels).
    ccr : float
        Communication-to-computation ratio on the reference hardware.
    w_dag : float
        Mean computation cost in time units (flops = cost * REF_FLOPS * UNIT_S).
    weight_frac : float
        Weight bytes of an op as a fraction of its output bytes (so locality matters).
    seed : int

    Each op gets ``attrs["w_bar"]`` (its mean cost in time units), used by :func:`topcuoglu_costs`.
    """
    _check_pos(n=n, alpha=alpha, out_degree=out_degree, ccr=ccr, w_dag=w_dag)
    rng = random.Random(seed)
    g = OpGraph(f"topcuoglu-n{n}-a{alpha}-d{out_degree}-ccr{ccr}-s{seed}", meta={"generator": "topcuoglu", "seed": seed})
    height = max(1, round(math.sqrt(n) / alpha))
    mean_w = max(1.0, math.sqrt(n) * alpha)
    sizes = []
    left = n
    for lvl in range(height):
        if lvl == height - 1:
            k = left
        else:
            k = max(1, min(left - (height - lvl - 1), round(rng.uniform(0.5, 1.5) * mean_w)))
        sizes.append(k)
        left -= k
        if left <= 0:
            break
    if left > 0:
        sizes[-1] += left
    levels: list[list[str]] = []
    idx = 0
    for k in sizes:
        lvl_ops = []
        for _ in range(k):
            name = f"t{idx}"
            w = rng.uniform(0, 2 * w_dag) or w_dag
            g.add_op(name, _pick_type(rng), flops=w * REF_FLOPS * UNIT_S, weight_bytes=0, w_bar=w)
            lvl_ops.append(name)
            idx += 1
        levels.append(lvl_ops)
    mean_c = ccr * w_dag
    # each op writes one tensor read by its children (one tensor, many consumers)
    children: dict[str, list[str]] = {}
    for li, lvl_ops in enumerate(levels[:-1]):
        later = [o for lv in levels[li + 1 :] for o in lv]
        nxt = levels[li + 1]
        for o in lvl_ops:
            deg = max(1, min(len(later), round(rng.uniform(0, 2 * out_degree))))
            ch = {rng.choice(nxt)}  # keep the levels connected
            while len(ch) < deg:
                ch.add(rng.choice(later))
            children[o] = sorted(ch, key=lambda s: int(s[1:]))
    has_parent = {c for cs in children.values() for c in cs}
    for li, lvl_ops in enumerate(levels[1:], start=1):
        for o in lvl_ops:
            if o not in has_parent:
                p = rng.choice(levels[li - 1])
                children.setdefault(p, []).append(o)
                has_parent.add(o)
    for lvl_ops in levels:
        for o in lvl_ops:
            c = rng.uniform(0, 2 * mean_c)
            nbytes = int(max(1, c * REF_BPS * UNIT_S))
            if o not in has_parent:
                g.add_tensor(f"{o}:in", nbytes, producer=None, consumers=[o])
            cs = children.get(o, [])
            g.add_tensor(f"{o}:out", nbytes, producer=o, consumers=cs, is_output=not cs)
            g.set_op(o, weight_bytes=int(nbytes * weight_frac))
    return g


def topcuoglu_costs(graph: OpGraph, system, *, beta: float = 0.5, seed: int = 0):
    """Unrelated per-op x per-device costs with heterogeneity ``beta`` (Topcuoglu 2002).

    Cost of op i on device j is ``w_bar_i * U(1 - beta/2, 1 + beta/2)`` time units, as a
    :class:`~hetsched.cost.TableCost` keyed by op name (devices that cannot run the op are skipped).

    >>> from hetsched.io.systems import toy_system
    >>> g = topcuoglu(10, seed=1); c = topcuoglu_costs(g, toy_system(), seed=1)
    >>> len(c.table) > 0
    True
    """
    from ..cost import TableCost

    if not 0 <= beta <= 2:
        raise HetschedError(f"beta must be in [0, 2], got {beta!r}", field="beta")
    rng = random.Random(seed)
    table = {}
    for o in graph.ops.values():
        w = float(o.attrs.get("w_bar", o.flops / (REF_FLOPS * UNIT_S)))
        for d in system.compute_devices:
            factor = rng.uniform(1 - beta / 2, 1 + beta / 2)
            if system.support.supports(d, o.op_type):
                table[(o.name, d)] = w * factor * UNIT_S
    return TableCost(system, table, graph)


def chain(n: int, *, act_bytes: int = 1 << 20, flops: float = 1e9, weight_bytes: int = 1 << 20, seed: int = 0) -> OpGraph:
    """A linear chain of ``n`` ops, sizes jittered by ``seed``.

    >>> [o.op_type for o in chain(3).ops.values()]
    ['Conv', 'Relu', 'Conv']
    """
    _check_pos(n=n)
    rng = random.Random(seed)
    g = OpGraph(f"chain-{n}-s{seed}", meta={"generator": "chain", "seed": seed})
    prev = None
    for i in range(n):
        typ = "Conv" if i % 2 == 0 else "Relu"
        f = flops * rng.uniform(0.5, 1.5) if typ == "Conv" else flops * 1e-3
        wb = int(weight_bytes * rng.uniform(0.5, 1.5)) if typ == "Conv" else 0
        g.add_op(f"op{i}", typ, flops=f, weight_bytes=wb)
        size = int(act_bytes * rng.uniform(0.5, 1.5))
        if prev is None:
            g.add_tensor("input", size, consumers=[f"op{i}"])
        else:
            g.connect(prev, f"op{i}", size, name=f"{prev}:out")
        prev = f"op{i}"
    g.add_tensor(f"{prev}:out", act_bytes, producer=prev, is_output=True)
    return g


def layered(n_layers: int, width: int, *, p_edge: float = 0.3, act_bytes: int = 1 << 20, seed: int = 0) -> OpGraph:
    """``n_layers`` layers of ``width`` ops; each op reads 1-3 outputs of the previous layers.

    >>> layered(4, 3, seed=2).n_ops
    12
    """
    _check_pos(n_layers=n_layers, width=width)
    rng = random.Random(seed)
    g = OpGraph(f"layered-{n_layers}x{width}-s{seed}", meta={"generator": "layered", "seed": seed})
    prev: list[str] = []
    for li in range(n_layers):
        cur = []
        for w in range(width):
            name = f"L{li}_{w}"
            typ = _pick_type(rng)
            g.add_op(name, typ, flops=rng.uniform(1e8, 2e9), weight_bytes=int(rng.uniform(0, 4) * act_bytes) if typ in ("Conv", "MatMul") else 0)
            cur.append(name)
        if li == 0:
            g.add_tensor("input", act_bytes, consumers=cur)
        else:
            for name in cur:
                k = 1 + sum(rng.random() < p_edge for _ in range(2))
                for src in rng.sample(prev, min(k, len(prev))):
                    t = f"{src}:out"
                    if t in g.tensors:
                        g.add_consumer(t, name)
                    else:
                        g.add_tensor(t, int(act_bytes * rng.uniform(0.25, 2)), producer=src, consumers=[name])
        prev = cur
    # ops nobody reads produce graph outputs
    for name in list(g.ops):
        if not g.outputs_of(name):
            g.add_tensor(f"{name}:out", int(act_bytes * rng.uniform(0.25, 2)), producer=name, is_output=True)
    for name in prev:
        t = f"{name}:out"
        g.set_tensor(t, is_output=True)
    return g


def fork_join(n_branches: int, depth: int, *, act_bytes: int = 1 << 20, flops: float = 1e9, seed: int = 0) -> OpGraph:
    """A source, ``n_branches`` parallel chains of ``depth`` ops, and a join (a Concat).

    >>> fork_join(3, 2).n_ops
    8
    """
    _check_pos(n_branches=n_branches, depth=depth)
    rng = random.Random(seed)
    g = OpGraph(f"forkjoin-{n_branches}x{depth}-s{seed}", meta={"generator": "fork_join", "seed": seed})
    g.add_op("fork", "Conv", flops=flops, weight_bytes=act_bytes)
    g.add_tensor("input", act_bytes, consumers=["fork"])
    g.add_tensor("fork:out", act_bytes, producer="fork")
    g.add_op("join", "Concat", flops=0.0)
    for b in range(n_branches):
        prev_t = "fork:out"
        for k in range(depth):
            name = f"b{b}_{k}"
            typ = "Conv" if k % 2 == 0 else "Relu"
            g.add_op(name, typ, flops=flops * rng.uniform(0.5, 2) if typ == "Conv" else flops * 1e-3,
                     weight_bytes=int(act_bytes * rng.uniform(0.5, 2)) if typ == "Conv" else 0)
            g.add_consumer(prev_t, name)
            prev_t = f"{name}:out"
            g.add_tensor(prev_t, int(act_bytes * rng.uniform(0.5, 1.5)), producer=name)
        g.add_consumer(prev_t, "join")
    g.add_tensor("join:out", act_bytes * n_branches, producer="join", is_output=True)
    return g


def transformer_block(
    *, batch: int = 1, seq: int = 128, d_model: int = 768, heads: int = 12, d_ff: int | None = None,
    n_layers: int = 1, dtype_bytes: int = 4, name: str | None = None,
) -> OpGraph:
    """Pre-LN transformer encoder layers (Vaswani et al. 2017) decomposed into ONNX-like ops.

    FLOPs count 2 per multiply-accumulate; weights are the projection matrices and biases.

    >>> g = transformer_block(seq=16, d_model=64, heads=4); g.validate()
    >>> sorted(set(o.op_type for o in g.ops.values()))
    ['Add', 'Gelu', 'LayerNormalization', 'MatMul', 'Softmax', 'Transpose']
    """
    _check_pos(batch=batch, seq=seq, d_model=d_model, heads=heads, n_layers=n_layers)
    if d_model % heads:
        raise HetschedError(f"d_model {d_model} is not divisible by heads {heads}", field="heads")
    d_ff = d_ff or 4 * d_model
    B, S, D, H = batch, seq, d_model, heads
    act = B * S * D * dtype_bytes
    g = OpGraph(name or f"transformer-L{n_layers}-b{B}-s{S}-d{D}", meta={"generator": "transformer_block", "batch": B, "seq": S})
    g.add_tensor("x", act, consumers=[])
    x = "x"

    def op(nm, typ, ins, out_bytes, flops=0.0, wbytes=0):
        g.add_op(nm, typ, flops=flops, weight_bytes=wbytes)
        for t in ins:
            g.add_consumer(t, nm)
        g.add_tensor(f"{nm}:out", out_bytes, producer=nm)
        return f"{nm}:out"

    for L in range(n_layers):
        p = f"l{L}."
        ln1 = op(p + "ln1", "LayerNormalization", [x], act, 5 * B * S * D, 2 * D * dtype_bytes)
        q = op(p + "q", "MatMul", [ln1], act, 2 * B * S * D * D, (D * D + D) * dtype_bytes)
        k = op(p + "k", "MatMul", [ln1], act, 2 * B * S * D * D, (D * D + D) * dtype_bytes)
        v = op(p + "v", "MatMul", [ln1], act, 2 * B * S * D * D, (D * D + D) * dtype_bytes)
        kt = op(p + "kT", "Transpose", [k], act)
        scores_b = B * H * S * S * dtype_bytes
        sc = op(p + "scores", "MatMul", [q, kt], scores_b, 2 * B * H * S * S * (D // H))
        sm = op(p + "softmax", "Softmax", [sc], scores_b, 5 * B * H * S * S)
        ctx = op(p + "context", "MatMul", [sm, v], act, 2 * B * H * S * S * (D // H))
        proj = op(p + "proj", "MatMul", [ctx], act, 2 * B * S * D * D, (D * D + D) * dtype_bytes)
        r1 = op(p + "res1", "Add", [x, proj], act, B * S * D)
        ln2 = op(p + "ln2", "LayerNormalization", [r1], act, 5 * B * S * D, 2 * D * dtype_bytes)
        f1 = op(p + "ff1", "MatMul", [ln2], B * S * d_ff * dtype_bytes, 2 * B * S * D * d_ff, (D * d_ff + d_ff) * dtype_bytes)
        ge = op(p + "gelu", "Gelu", [f1], B * S * d_ff * dtype_bytes, 8 * B * S * d_ff)
        f2 = op(p + "ff2", "MatMul", [ge], act, 2 * B * S * D * d_ff, (D * d_ff + D) * dtype_bytes)
        x = op(p + "res2", "Add", [r1, f2], act, B * S * D)
    g.set_tensor(x, is_output=True)
    return g


def resnet_like(
    *, n_stages: int = 3, blocks_per_stage: int = 2, channels: int = 64, hw: int = 56, batch: int = 1,
    dtype_bytes: int = 4, name: str | None = None,
) -> OpGraph:
    """A ResNet-style CNN (He et al. 2016): basic blocks of two 3x3 convs with identity shortcuts.

    Each stage doubles channels and halves the resolution (a strided conv and a 1x1 projection).

    >>> g = resnet_like(n_stages=2, blocks_per_stage=1, channels=8, hw=8); g.validate(); g.n_ops > 8
    True
    """
    _check_pos(n_stages=n_stages, blocks_per_stage=blocks_per_stage, channels=channels, hw=hw, batch=batch)
    g = OpGraph(name or f"resnet-like-{n_stages}x{blocks_per_stage}-c{channels}-hw{hw}", meta={"generator": "resnet_like", "batch": batch})
    C, HW, B = channels, hw, batch

    def fmap(c, s):
        return B * c * s * s * dtype_bytes

    def conv(nm, ins, cin, cout, s_out, k):
        g.add_op(nm, "Conv", flops=2 * B * cout * s_out * s_out * cin * k * k, weight_bytes=(cout * cin * k * k + cout) * dtype_bytes)
        for t in ins:
            g.add_consumer(t, nm)
        g.add_tensor(f"{nm}:out", fmap(cout, s_out), producer=nm)
        return f"{nm}:out"

    def ew(nm, typ, ins, c, s):
        g.add_op(nm, typ, flops=B * c * s * s * max(1, len(ins) - 1 if typ == "Add" else 1))
        for t in ins:
            g.add_consumer(t, nm)
        g.add_tensor(f"{nm}:out", fmap(c, s), producer=nm)
        return f"{nm}:out"

    g.add_tensor("image", B * 3 * HW * 4 * HW * 4 * dtype_bytes)
    x = conv("stem", ["image"], 3, C, HW, 7)
    x = ew("stem_relu", "Relu", [x], C, HW)
    cin, s = C, HW
    for st in range(n_stages):
        cout = C * 2**st
        for b in range(blocks_per_stage):
            p = f"s{st}b{b}."
            down = st > 0 and b == 0
            s_out = s // 2 if down else s
            y = conv(p + "conv1", [x], cin, cout, s_out, 3)
            y = ew(p + "relu1", "Relu", [y], cout, s_out)
            y = conv(p + "conv2", [y], cout, cout, s_out, 3)
            sc = conv(p + "proj", [x], cin, cout, s_out, 1) if (down or cin != cout) else x
            y = ew(p + "add", "Add", [y, sc], cout, s_out)
            x = ew(p + "relu2", "Relu", [y], cout, s_out)
            cin, s = cout, s_out
    x = ew("gap", "GlobalAveragePool", [x], cin, 1)
    g.add_op("fc", "Gemm", flops=2 * B * cin * 1000, weight_bytes=(cin * 1000 + 1000) * dtype_bytes)
    g.add_consumer(x, "fc")
    g.add_tensor("logits", B * 1000 * dtype_bytes, producer="fc", is_output=True)
    return g


def randwire_ws(
    n: int = 32, *, k: int = 4, p: float = 0.75, channels: int = 64, hw: int = 28, batch: int = 1,
    dtype_bytes: int = 4, seed: int = 0, name: str | None = None, fuse_aggregation: bool = False,
) -> OpGraph:
    """A randomly wired network (Xie, Kirillov, Girshick & He, "Exploring Randomly Wired Neural
    Networks for Image Recognition", ICCV 2019): a Watts-Strogatz graph WS(n, k, p) made acyclic by
    node index, one graph node per WS node, and an ``output.avg`` op averaging the sink nodes.

    The paper's node (section 3.1) does three things: *aggregation* (a weighted sum of every
    predecessor's output), *transformation* (ReLU-conv-BN) and *distribution* (the same output
    tensor goes to every successor); nodes without predecessors read the graph input.

    Parameters
    ----------
    n, k, p : int, int, float
        WS(n, k, p): ``n`` nodes, each joined to its ``k`` nearest ring neighbours, rewired with
        probability ``p`` (``networkx.connected_watts_strogatz_graph``, seeded with ``seed``).
    channels, hw, batch, dtype_bytes : int
        Every node's output is a ``batch x channels x hw x hw`` feature map of ``dtype_bytes``.
    fuse_aggregation : bool
        ``False`` (default): op level — a node with several inputs is an ``Add`` (the aggregation,
        with its own output tensor) followed by a ``Conv``; a node with one input is a ``Conv``.
        ``True``: node level, as the paper draws the graph — each node is ONE ``Conv`` op reading
        every predecessor's output (flops = the aggregation's adds + the conv's), so the graph has
        ``n + 1`` ops; the graph name ends in ``-fused``.

    >>> g = randwire_ws(16, seed=1); g.validate(); g.n_ops >= 16
    True
    >>> f = randwire_ws(16, seed=1, fuse_aggregation=True); f.validate(); f.n_ops, f.name
    (17, 'randwire-ws-n16-k4-p0.75-s1-fused')
    """
    import networkx as nx

    _check_pos(n=n, k=k, channels=channels, hw=hw)
    if not 0 <= p <= 1:
        raise HetschedError(f"p must be in [0, 1], got {p!r}", field="p")
    if k >= n:
        raise HetschedError(f"k ({k}) must be smaller than n ({n})", field="k")
    ws = nx.connected_watts_strogatz_graph(n, k, p, tries=100, seed=seed)
    default_name = f"randwire-ws-n{n}-k{k}-p{p}-s{seed}" + ("-fused" if fuse_aggregation else "")
    meta = {"generator": "randwire_ws", "seed": seed}
    if fuse_aggregation:
        meta["fuse_aggregation"] = True
    g = OpGraph(name or default_name, meta=meta)
    C, S, B = channels, hw, batch
    fmap = B * C * S * S * dtype_bytes
    conv_flops = 2 * B * C * S * S * C * 9 / 4  # depthwise-separable-ish cost, as in RandWire's nodes
    conv_weights = (C * 9 + C * C) * dtype_bytes
    g.add_tensor("input", fmap)
    preds = {v: sorted(u for u in ws.neighbors(v) if u < v) for v in range(n)}
    succs = {v: sorted(w for w in ws.neighbors(v) if w > v) for v in range(n)}
    out_of: dict[int, str] = {}
    for v in range(n):
        ins = [out_of[u] for u in preds[v]] or ["input"]
        add_flops = B * C * S * S * (len(ins) - 1)
        if fuse_aggregation:
            # aggregation + transformation in one op: every predecessor's output is live while it runs
            g.add_op(f"n{v}", "Conv", flops=add_flops + conv_flops, weight_bytes=conv_weights,
                     attrs={"fused": "aggregation+conv", "n_inputs": len(ins)})
            for t in ins:
                g.add_consumer(t, f"n{v}")
            g.add_tensor(f"n{v}:out", fmap, producer=f"n{v}")
            out_of[v] = f"n{v}:out"
            continue
        if len(ins) > 1:
            g.add_op(f"n{v}.agg", "Add", flops=add_flops)
            for t in ins:
                g.add_consumer(t, f"n{v}.agg")
            g.add_tensor(f"n{v}.agg:out", fmap, producer=f"n{v}.agg")
            ins = [f"n{v}.agg:out"]
        g.add_op(f"n{v}.conv", "Conv", flops=conv_flops, weight_bytes=conv_weights)
        g.add_consumer(ins[0], f"n{v}.conv")
        g.add_tensor(f"n{v}.conv:out", fmap, producer=f"n{v}.conv")
        out_of[v] = f"n{v}.conv:out"
    sinks = [out_of[v] for v in range(n) if not succs[v]]
    g.add_op("output.avg", "Add", flops=B * C * S * S * max(1, len(sinks)))
    for t in sinks:
        g.add_consumer(t, "output.avg")
    g.add_tensor("output", fmap, producer="output.avg", is_output=True)
    return g


GENERATORS = {
    "topcuoglu": topcuoglu,
    "chain": chain,
    "layered": layered,
    "fork_join": fork_join,
    "transformer_block": transformer_block,
    "resnet_like": resnet_like,
    "randwire_ws": randwire_ws,
}


#: ops of a generated graph when no size is given
DEFAULT_N = 40


class Sizing(NamedTuple):
    """How a generator builds a graph of about ``n`` ops: ``build(n, seed, batch)``, and which of
    ``seed`` and ``batch`` it uses (a setting a generator does not use is an error where it is given)."""

    build: Callable[[int, int, int], OpGraph]
    seed: bool
    batch: bool


#: The one sizing table of the generators (the Graph panel, :func:`hetsched.io.resolve.resolve_graph`
#: and so the CLI and the what-if sweeps): each shape's own parameter chosen so that ``n`` is about
#: the number of ops (a transformer layer is 15 ops, a ResNet block per stage ~20 with its stage
#: overhead, a RandWire node 1-2 ops).
SIZINGS: dict[str, Sizing] = {
    "topcuoglu": Sizing(lambda n, seed, batch: topcuoglu(n, seed=seed), True, False),
    "chain": Sizing(lambda n, seed, batch: chain(n, seed=seed), True, False),
    "layered": Sizing(lambda n, seed, batch: layered(max(1, n // 4), 4, seed=seed), True, False),
    # a source, 4 branches and a join: 4 * depth + 2 ops
    "fork_join": Sizing(lambda n, seed, batch: fork_join(4, max(1, (n - 2) // 4), seed=seed), True, False),
    # a small width, so that a graph of a few hundred ops stays quick to schedule interactively
    "transformer_block": Sizing(lambda n, seed, batch: transformer_block(n_layers=max(1, n // 15), seq=64, d_model=256,
                                                                         heads=4, batch=batch), False, True),
    "resnet_like": Sizing(lambda n, seed, batch: resnet_like(blocks_per_stage=max(1, n // 20), batch=batch), False, True),
    "randwire_ws": Sizing(lambda n, seed, batch: randwire_ws(max(6, n // 2), seed=seed, batch=batch), True, True),
}


#: What a panel (the Graph tab) offers for :func:`generate`, declared as data: a generator of
#: :data:`SIZINGS`, its size (ops, roughly) and seed. The bounds keep an interactive graph quick to
#: build and draw; the CLI and the core take any positive size.
PARAMS = ParamSpec([
    Param("generator", "choice", "resnet_like", label="generator", options=tuple(SIZINGS),
          help="the shape of the generated graph"),
    Param("n", "int", DEFAULT_N, label="generator size", min=2, max=20000, step=1, unit="ops",
          help="about this many ops"),
    Param("seed", "int", 0, label="seed", min=0, max=10**6, step=1,
          help="the random seed of the generators that take one (the same seed builds the same graph)"),
])


def generate(name: str, n: int = DEFAULT_N, seed: int = 0, batch: int = 1) -> OpGraph:
    """A generated graph of about ``n`` ops, by generator name (the :data:`SIZINGS` table).

    ``seed`` and ``batch`` are passed to the generators that take them and ignored by the others
    (:func:`~hetsched.io.resolve.resolve_graph` rejects them there instead).

    >>> generate("fork_join", 18).n_ops, generate("layered", 12, seed=1).n_ops
    (18, 12)
    >>> generate("transformer_block", 45).n_ops
    45
    >>> generate("nope")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: unknown generator 'nope'; choose one of chain, fork_join, layered, randwire_ws, resnet_like, topcuoglu, transformer_block
    """
    sz = SIZINGS.get(name)
    if sz is None:
        raise HetschedError(f"unknown generator {name!r}; choose one of {', '.join(sorted(SIZINGS))}", field="generator")
    return sz.build(int(n), int(seed), int(batch))
