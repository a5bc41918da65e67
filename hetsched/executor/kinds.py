"""Operator classes of the executor: which ops are asynchronous and which block the host.

The operator-scheduling patent (``docs/patents.md``, claims 1-5; PaddlePaddle's
standalone executor) schedules by one bit of "operator information": an op is **asynchronous**
(the host launches a kernel onto a stream and returns at once) or **synchronous** (the host thread
is busy or blocked until the op's work is done). hetsched refines that bit into six kinds:

==================  ======  ======================================================================
kind                async?  what the host thread does
==================  ======  ======================================================================
``gpu_async``       yes     dispatches the op and launches its kernel on a device stream, then
                            moves on
``copy_h2d``        yes     enqueues a host-to-device copy on a stream (pinned memory: it returns
                            at once)
``gpu_sync``        no      launches a kernel and then waits for it (data-dependent output shapes:
                            ``NonZero``, ``Unique``, ``MaskedSelect``... must read a size back)
``copy_d2h``        no      enqueues a device-to-host copy and blocks until the bytes have arrived
``copy_h2d_sync``   no      a host-to-device copy to a device whose copy engine is *synchronous*
                            (the patent's devices differ in their execution mechanism: some
                            runtimes' memcpy blocks, as does any copy from pageable memory)
``cpu_sync``        no      runs the op on the host CPU itself (pre/post-processing, ``Print``...)
==================  ======  ======================================================================

The kind comes, by precedence, from ``rules`` (op name beats op type: the documented override
mapping every executor function accepts), the chosen kernel's ``kind``, a kernel chosen on the
host (``cpu_sync``), the op's ``attrs["exec_kind"]``, the op type in :data:`DEFAULT_RULES`, and
finally the placement: an op placed on a CPU device is ``cpu_sync``, anything else ``gpu_async``.
A ``copy_h2d`` to a device with a synchronous copy engine (``sync_copy_devices``, or the system
device's ``attrs["sync_copies"]``) becomes ``copy_h2d_sync``.

**Kernel tables** (the patent, description of fig. 1: "an operator may include several kernels,
each the concrete implementation on one hardware device ... the executor calls a different
kernel according to the current device type"): ``op.attrs["kernels"]`` (or the ``kernels``
argument, ``{op: [...]}``) lists the devices the op has kernels for, each a device name
(``"fpga0"``), a device kind (``"gpu"``, ``"cpu"``) or ``{"device": ..., "kind": <op kind>}``.
The op runs on its placement (default: the host for host op types, else the first accelerator)
when it has a kernel there;
otherwise on its first listed kernel whose device the system has (PaddlePaddle falls back to the
CPU kernel the same way), a *kernel fallback* that :func:`resolve_ops` reports. Ops placed on
different devices run on those devices' own streams, side by side. :func:`kind_table` lists
every op's kind, device, kernels and where its kind came from.

>>> from hetsched.graph import OpGraph
>>> g = OpGraph(); _ = [g.add_op(n, t) for n, t in [("h2d", "MemcpyH2D"), ("conv", "Conv"), ("nz", "NonZero")]]
>>> classify(g)
{'h2d': 'copy_h2d', 'conv': 'gpu_async', 'nz': 'gpu_sync'}
>>> classify(g, rules={"conv": "cpu_sync"})["conv"]
'cpu_sync'
>>> g.ops["conv"].attrs["kernels"] = ["fpga", "cpu"]      # no GPU kernel: falls back to the FPGA one
>>> resolve_ops(g).devices["conv"], resolve_ops(g).kernel_fallbacks["conv"][:24]
('fpga0', 'no kernel for gpu0 (gpu)')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pandas as pd

from ..errors import HetschedError, UnknownNameError
from ..graph import OpGraph

__all__ = [
    "OP_KINDS",
    "ASYNC_KINDS",
    "SYNC_KINDS",
    "DEVICE_KINDS",
    "DEFAULT_RULES",
    "COPY_KINDS",
    "classify",
    "is_async",
    "device_of_ops",
    "ResolvedOps",
    "resolve_ops",
    "kind_table",
]

OP_KINDS = ("gpu_async", "gpu_sync", "cpu_sync", "copy_h2d", "copy_d2h", "copy_h2d_sync")
#: kinds whose host call returns before the work is done (the patent's 异步算子)
ASYNC_KINDS = frozenset({"gpu_async", "copy_h2d"})
#: kinds that keep their host thread until the work is done (the patent's 同步算子)
SYNC_KINDS = frozenset({"gpu_sync", "copy_d2h", "cpu_sync", "copy_h2d_sync"})
#: kinds that put work on a device stream
DEVICE_KINDS = frozenset({"gpu_async", "gpu_sync", "copy_h2d", "copy_d2h", "copy_h2d_sync"})
#: copies, and the copy engine (direction) each uses
COPY_KINDS = {"copy_h2d": "copy_h2d", "copy_h2d_sync": "copy_h2d", "copy_d2h": "copy_d2h"}

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
    kernels: Mapping[str, Sequence[Any]] | None = None,
    sync_copy_devices: Sequence[str] | None = None,
) -> dict[str, str]:
    """The kind of every op (``gpu_async``, ``gpu_sync``, ``cpu_sync``, ``copy_h2d``, ``copy_d2h``,
    ``copy_h2d_sync``): :attr:`ResolvedOps.kinds` of :func:`resolve_ops`.

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
        Used to look up device kinds of ``placement`` and of kernel tables.
    kernels, sync_copy_devices : optional
        See :func:`resolve_ops`.

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
    return resolve_ops(graph, rules=rules, placement=placement, system=system, kernels=kernels,
                       sync_copy_devices=sync_copy_devices).kinds


@dataclass(frozen=True)
class ResolvedOps:
    """What :func:`resolve_ops` decided for every op.

    Attributes
    ----------
    kinds : dict
        ``{op: kind}``.
    devices : dict
        ``{op: device}`` its work runs on (the host for ``cpu_sync``).
    sources : dict
        ``{op: where the kind came from}`` (``"rule for the op"``, ``"rule for Conv"``, ``"kernel"``,
        ``"kernel on the host"``, ``"attrs['exec_kind']"``, ``"op type"``, ``"placement"``,
        ``"default"``; ``" + synchronous copy engine"`` appended for ``copy_h2d_sync``).
    kernels : dict
        ``{op: [device specs]}`` for the ops that have a kernel table.
    kernel_fallbacks : dict
        ``{op: why}`` for ops that run on another device than their placement because they have
        no kernel there.
    """

    kinds: dict
    devices: dict
    sources: dict
    kernels: dict
    kernel_fallbacks: dict


def _device_kind_of(name: str, system) -> str:
    try:
        return system.device(name).kind
    except Exception:  # noqa: BLE001 - a name the system lacks: tell by its spelling
        return _device_kind(name, None)


def _kernel_entries(op: str, table: Any) -> list[tuple[str, str | None]]:
    """``[(device spec, kind or None)]`` of a kernel table; a malformed one raises, naming the op."""
    if isinstance(table, (str, Mapping)) or not isinstance(table, Sequence) or not table:
        raise HetschedError(f"op {op!r}: kernels must be a non-empty list of device names, device kinds or "
                            f"{{'device': ..., 'kind': ...}} entries, got {table!r}", op=op, field="kernels")
    out = []
    for e in table:
        if isinstance(e, str) and e:
            out.append((e, None))
        elif isinstance(e, Mapping) and isinstance(e.get("device"), str) and e.get("device"):
            k = e.get("kind")
            if k is not None:
                _check_kind(k, op, "kernels")
            unknown = sorted(set(e) - {"device", "kind"})
            if unknown:
                raise HetschedError(f"op {op!r}: kernel entry {dict(e)!r} has unknown field(s) {unknown}",
                                    op=op, field="kernels")
            out.append((e["device"], k))
        else:
            raise HetschedError(f"op {op!r}: kernel entry {e!r} is neither a device name/kind nor a "
                                f"{{'device': ..., 'kind': ...}} mapping", op=op, field="kernels")
    return out


def resolve_ops(
    graph: OpGraph,
    *,
    rules: Mapping[str, str] | None = None,
    placement: Mapping[str, str] | None = None,
    system=None,
    kernels: Mapping[str, Sequence[Any]] | None = None,
    sync_copy_devices: Sequence[str] | None = None,
    device: str | None = None,
) -> ResolvedOps:
    """Every op's kind and device: the rules, kernel tables and copy engines of the module docstring.

    Parameters
    ----------
    graph : OpGraph
    rules : dict, optional
        ``{op name or op type: kind}`` overrides (op name first).
    placement : dict, optional
        ``{op: device}``.
    system : System, optional
        Device names and kinds (default :func:`~hetsched.executor.costs.executor_system`: cpu0, gpu0,
        fpga0).
    kernels : dict, optional
        ``{op: kernel table}``, overriding ``op.attrs["kernels"]``.
    sync_copy_devices : sequence of str, optional
        Devices whose host-to-device copies block the host (besides those whose
        ``attrs["sync_copies"]`` is true).
    device : str, optional
        Where unplaced device ops run (default: the system's first non-CPU device).

    Raises
    ------
    UnknownNameError
        ``placement`` or ``kernels`` naming an op the graph lacks (``rules`` may name op types, so
        its keys are not checked), or an unknown device in ``placement`` / ``sync_copy_devices``
        when a system is known.
    HetschedError
        An unknown kind, a malformed kernel table, an op none of whose kernels the system can run.

    >>> from hetsched.io.generators import chain
    >>> r = resolve_ops(chain(2), kernels={"op1": ["cpu"]})
    >>> r.kinds["op1"], r.devices["op1"], r.sources["op1"]
    ('cpu_sync', 'cpu0', 'kernel on the host')
    """
    rules = dict(rules or {})
    for k, v in rules.items():
        _check_kind(v, k, "rules")
    placement = dict(placement or {})
    unknown = [o for o in placement if o not in graph]
    if unknown:
        raise UnknownNameError(f"placement names unknown op {unknown[0]!r}", op=unknown[0])
    kernels = dict(kernels or {})
    unknown = [o for o in kernels if o not in graph]
    if unknown:
        raise UnknownNameError(f"kernels names unknown op {unknown[0]!r}", op=unknown[0])
    has_tables = bool(kernels) or any(op.attrs and "kernels" in op.attrs for op in graph.ops.values())
    sys_ = system
    if sys_ is None and (has_tables or sync_copy_devices):
        from .costs import executor_system

        sys_ = executor_system()
    if sys_ is not None:
        host = sys_.host
        names = list(sys_.device_names)
        for d in list(placement.values()) + list(sync_copy_devices or ()):
            if d not in names:
                raise UnknownNameError(f"unknown device {d!r}; the system has {names}", device=d)
        default = device or next((d for d in names if sys_.device(d).kind != "cpu"), host)
        sync_copy = set(sync_copy_devices or ()) | {d for d in names if (sys_.device(d).attrs or {}).get("sync_copies")}
    else:
        host, names, default, sync_copy = "cpu0", [], device or "gpu0", set(sync_copy_devices or ())
    dev_kind_cache: dict[str, str] = {}

    def dkind(d: str) -> str:
        k = dev_kind_cache.get(d)
        if k is None:
            k = dev_kind_cache[d] = _device_kind_of(d, sys_) if sys_ is not None else _device_kind(d, None)
        return k

    kinds: dict[str, str] = {}
    devices: dict[str, str] = {}
    sources: dict[str, str] = {}
    tables: dict[str, list[str]] = {}
    fallbacks: dict[str, str] = {}
    for name, op in graph.ops.items():
        table = kernels.get(name, (op.attrs or {}).get("kernels"))
        # where the executor wants the op: its placement, else the host for a host op type, else
        # the executor's device (the patent's "current hardware device")
        hosted = (rules.get(name, rules.get(op.op_type, (op.attrs or {}).get("exec_kind", DEFAULT_RULES.get(op.op_type))))
                  == "cpu_sync")
        target = placement.get(name, host if hosted else default)
        chosen: str | None = None
        kkind: str | None = None
        if table is not None:
            entries = _kernel_entries(name, table)
            tables[name] = [e for e, _k in entries]
            for spec, k in entries:
                if spec == target or spec == dkind(target):
                    chosen, kkind = target, k
                    break
            else:
                for spec, k in entries:
                    if spec in names:
                        chosen = spec
                    else:
                        chosen = host if spec == dkind(host) else next((d for d in names if dkind(d) == spec), None)
                    if chosen is not None:
                        kkind = k
                        fallbacks[name] = (f"no kernel for {target} ({dkind(target)}): runs its {spec} kernel on "
                                           f"{chosen}")
                        break
                else:
                    raise HetschedError(f"op {name!r} has kernels for {[e for e, _k in entries]} and the system has "
                                        f"none of them (devices {names})", op=name, field="kernels")
        if name in rules:
            k, src = rules[name], "rule for the op"
        elif op.op_type in rules:
            k, src = rules[op.op_type], f"rule for {op.op_type}"
        elif kkind is not None:
            k, src = kkind, "kernel"
        elif chosen is not None and dkind(chosen) == "cpu":
            k, src = "cpu_sync", "kernel on the host"
        elif op.attrs and op.attrs.get("exec_kind") is not None:
            k, src = _check_kind(op.attrs["exec_kind"], name, "attrs['exec_kind']"), "attrs['exec_kind']"
        elif op.op_type in DEFAULT_RULES:
            k, src = DEFAULT_RULES[op.op_type], "op type"
        elif name in placement:
            k = "cpu_sync" if dkind(placement[name]) == "cpu" else "gpu_async"
            src = "placement"
        else:
            k, src = "gpu_async", "default"
        if k == "cpu_sync":
            d = host
        else:
            d = chosen if (chosen is not None and chosen != host) else placement.get(name)
            if d is None or d == host:
                d = default
        if k == "copy_h2d" and d in sync_copy:
            k, src = "copy_h2d_sync", src + " + synchronous copy engine"
        kinds[name], devices[name], sources[name] = k, d, src
    return ResolvedOps(kinds, devices, sources, tables, fallbacks)


def kind_table(graph: OpGraph, **options: Any) -> pd.DataFrame:
    """One row per op: ``op, op_type, kind, async, device, source, kernels, kernel_fallback``.

    What an editor of the op kinds shows (the patent's "operator information"); edit a kind by
    passing ``rules={op: kind}`` to the executor functions. ``options`` are those of
    :func:`resolve_ops`.

    >>> from hetsched.io.generators import chain
    >>> kind_table(chain(2), rules={"op1": "gpu_sync"})[["op", "kind", "async", "source"]].values.tolist()
    [['op0', 'gpu_async', True, 'default'], ['op1', 'gpu_sync', False, 'rule for the op']]
    """
    r = resolve_ops(graph, **options)
    return pd.DataFrame({
        "op": list(graph.ops),
        "op_type": [o.op_type for o in graph.ops.values()],
        "kind": [r.kinds[n] for n in graph.ops],
        "async": [r.kinds[n] in ASYNC_KINDS for n in graph.ops],
        "device": [r.devices[n] for n in graph.ops],
        "source": [r.sources[n] for n in graph.ops],
        "kernels": [", ".join(r.kernels[n]) if n in r.kernels else "" for n in graph.ops],
        "kernel_fallback": [r.kernel_fallbacks.get(n, "") for n in graph.ops],
    })


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
