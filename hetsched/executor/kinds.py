"""Operator classes of the executor: which ops are asynchronous and which block the host.

The seed-004 patent (``../shared/seeds/004_a60aed1db7e14913.txt``, claims 1-5; PaddlePaddle's
standalone executor) schedules by one bit of "operator information": an op is **asynchronous**
(the host launches a kernel onto a stream and returns at once) or **synchronous** (the host thread
is busy or blocked until the op's work is done). hetsched refines that bit into five kinds:

=============  ======  ============================================================================
kind           async?  what the host thread does
=============  ======  ============================================================================
``gpu_async``  yes     dispatches the op and launches its kernel on a device stream, then moves on
``copy_h2d``   yes     enqueues a host-to-device copy on a stream (pinned memory: it returns at once)
``gpu_sync``   no      launches a kernel and then waits for it (data-dependent output shapes:
                       ``NonZero``, ``Unique``, ``MaskedSelect``... must read a size back)
``copy_d2h``   no      enqueues a device-to-host copy and blocks until the bytes have arrived
``cpu_sync``   no      runs the op on the host CPU itself (pre/post-processing, ``Print``...)
=============  ======  ============================================================================

The kind comes, by precedence, from ``rules`` (op name beats op type), the op's
``attrs["exec_kind"]``, the op type in :data:`DEFAULT_RULES`, and finally the placement: an op
placed on a CPU device is ``cpu_sync``, anything else ``gpu_async``.

>>> from hetsched.graph import OpGraph
>>> g = OpGraph(); _ = [g.add_op(n, t) for n, t in [("h2d", "MemcpyH2D"), ("conv", "Conv"), ("nz", "NonZero")]]
>>> classify(g)
{'h2d': 'copy_h2d', 'conv': 'gpu_async', 'nz': 'gpu_sync'}
>>> classify(g, rules={"conv": "cpu_sync"})["conv"]
'cpu_sync'
"""

from __future__ import annotations

from typing import Mapping

from ..errors import HetschedError, UnknownNameError
from ..graph import OpGraph

__all__ = [
    "OP_KINDS",
    "ASYNC_KINDS",
    "SYNC_KINDS",
    "DEVICE_KINDS",
    "DEFAULT_RULES",
    "classify",
    "is_async",
    "device_of_ops",
]

OP_KINDS = ("gpu_async", "gpu_sync", "cpu_sync", "copy_h2d", "copy_d2h")
#: kinds whose host call returns before the work is done (the patent's 异步算子)
ASYNC_KINDS = frozenset({"gpu_async", "copy_h2d"})
#: kinds that keep their host thread until the work is done (the patent's 同步算子)
SYNC_KINDS = frozenset({"gpu_sync", "copy_d2h", "cpu_sync"})
#: kinds that put work on a device stream
DEVICE_KINDS = frozenset({"gpu_async", "gpu_sync", "copy_h2d", "copy_d2h"})

# Op types whose kind does not follow from placement alone. Spellings of ONNX, PaddlePaddle
# (memcpy_h2d / memcpy_d2h, feed / fetch) and hetsched's own builders are listed.
DEFAULT_RULES: dict[str, str] = {
    **{t: "copy_h2d" for t in ("MemcpyH2D", "memcpy_h2d", "CopyH2D", "H2D")},
    **{t: "copy_d2h" for t in ("MemcpyD2H", "memcpy_d2h", "CopyD2H", "D2H", "Fetch", "fetch")},
    # host-only ops: input pipelines, printing, post-processing that frameworks run on the CPU
    **{t: "cpu_sync" for t in ("Feed", "feed", "Print", "print", "Assert", "Save", "Load", "Decode",
                               "Tokenize", "PostProcess", "HostOp")},
    # data-dependent output shapes: the host must read the element count back before going on
    **{t: "gpu_sync" for t in ("NonZero", "Unique", "MaskedSelect", "masked_select", "NonMaxSuppression",
                               "nonzero", "unique")},
}


def is_async(kind: str) -> bool:
    """Whether an op kind returns to the host before its work is done.

    >>> is_async("gpu_async"), is_async("copy_d2h")
    (True, False)
    """
    return kind in ASYNC_KINDS


def _check_kind(kind: object, op: str | None, where: str) -> str:
    if kind not in OP_KINDS:
        raise HetschedError(f"{where}: unknown op kind {kind!r} for {op!r}; expected one of {list(OP_KINDS)}",
                            op=op, field="kind")
    return str(kind)


def _device_kind(dev: str, system) -> str:
    if system is not None:
        return system.device(dev).kind
    # without a system, a device name says what it is (cpu0, gpu1, ...)
    return "cpu" if str(dev).lower().startswith(("cpu", "host")) else "gpu"


def classify(
    graph: OpGraph,
    *,
    rules: Mapping[str, str] | None = None,
    placement: Mapping[str, str] | None = None,
    system=None,
) -> dict[str, str]:
    """The kind of every op (``gpu_async``, ``gpu_sync``, ``cpu_sync``, ``copy_h2d``, ``copy_d2h``).

    Parameters
    ----------
    graph : OpGraph
    rules : dict, optional
        Overrides ``{op name or op type: kind}``; an op name beats an op type. Patent claim 1's
        "operator information" (算子信息) made explicit and editable.
    placement : dict, optional
        ``{op: device}``; ops placed on a CPU device (by ``system`` device kind, else by a name
        starting with ``cpu``/``host``) are ``cpu_sync`` unless a rule says otherwise.
    system : System, optional
        Used to look up device kinds of ``placement``.

    Returns
    -------
    dict
        ``{op: kind}`` in the graph's op order.

    Raises
    ------
    UnknownNameError
        ``placement`` names an op the graph lacks.
    HetschedError
        A rule or ``exec_kind`` attribute names an unknown kind.

    >>> from hetsched.io.generators import chain
    >>> set(classify(chain(3), placement={"op1": "cpu0"}).values()) == {"gpu_async", "cpu_sync"}
    True
    """
    rules = dict(rules or {})
    for k, v in rules.items():
        _check_kind(v, k, "rules")
    placement = dict(placement or {})
    unknown = [o for o in placement if o not in graph]
    if unknown:
        raise UnknownNameError(f"placement names unknown op {unknown[0]!r}", op=unknown[0])
    out: dict[str, str] = {}
    dev_kind_cache: dict[str, str] = {}
    for name, op in graph.ops.items():
        if name in rules:
            out[name] = rules[name]
            continue
        if op.op_type in rules:
            out[name] = rules[op.op_type]
            continue
        ek = op.attrs.get("exec_kind") if op.attrs else None
        if ek is not None:
            out[name] = _check_kind(ek, name, "attrs['exec_kind']")
            continue
        k = DEFAULT_RULES.get(op.op_type)
        if k is None:
            dev = placement.get(name)
            if dev is not None:
                dk = dev_kind_cache.get(dev)
                if dk is None:
                    dk = dev_kind_cache[dev] = _device_kind(dev, system)
                k = "cpu_sync" if dk == "cpu" else "gpu_async"
            else:
                k = "gpu_async"
        out[name] = k
    return out


def device_of_ops(
    graph: OpGraph,
    kinds: Mapping[str, str],
    *,
    placement: Mapping[str, str] | None = None,
    device: str = "gpu0",
    host: str = "cpu0",
) -> dict[str, str]:
    """The device each op's work runs on: ``host`` for ``cpu_sync`` ops, else its placement or ``device``.

    A copy runs on the device end of the copy (its placement, else ``device``); a device op placed
    on the host (a rule made it ``gpu_async``) goes to ``device``.

    >>> from hetsched.io.generators import chain
    >>> g = chain(2); device_of_ops(g, {"op0": "gpu_async", "op1": "cpu_sync"})
    {'op0': 'gpu0', 'op1': 'cpu0'}
    """
    placement = placement or {}
    out: dict[str, str] = {}
    for name in graph.ops:
        k = kinds[name]
        if k == "cpu_sync":
            out[name] = host
        else:
            d = placement.get(name)
            out[name] = d if (d is not None and d != host) else device
    return out
