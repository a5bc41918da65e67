"""A small graph on which every decision of the partition patent happens at least once (for panels, notebooks, tests).

The patent's own figure 3/4 (gpu ops ``a, b`` and ``f, g`` kept apart by the fpga op ``d``) shows
merging and the minimal-neighbourhood rule; it never shows the cycle guard or what buffers buy.
:func:`merge_outcomes` adds both:

* **merged**: ``stem -> a`` (both gpu) become one aggregated op;
* **refused, would create a cycle**: ``a -> c`` are both gpu and adjacent, but ``a -> d -> c``
  runs through the fpga op ``d``: one group ``{a, c}`` would both feed and read ``d``;
* **different backend**: every gpu <-> fpga edge (``a -> d``, ``d -> c``, ``c -> e``...);
* **not adjacent**: the gpu groups of ``c`` and ``tail`` are separated by the fpga ops (the
  patent's figure; ``merge="global"`` tries them, and refuses: each pair would close a cycle
  through the fpga ops);
* **buffered vs serial**: the gpu and fpga groups alternate along the graph, so with buffers
  (``buffer_depth >= 1``) the backends work on different inputs at once and the throughput beats
  the serial run (``buffer_depth=0``).

The support table (the patent's mapping list) gives the fpga priority 1 on convolutions, the gpu
priority 1 on everything else (its ``*`` row) and 2 on convolutions, the host cpu 3 on everything.

>>> from hetsched.partition import partition_by_support, simulate_buffered
>>> g, s = merge_outcomes()
>>> r = partition_by_support(g, s)
>>> sorted({st.data["outcome"] for st in r.steps if st.action == "merge"})
['cycle', 'different_backend', 'merged', 'not_adjacent']
"""

from __future__ import annotations

from ..graph import OpGraph
from ..io.systems import toy_system
from ..system import SupportTable, System

__all__ = ["merge_outcomes"]

MiB = 2**20


def merge_outcomes() -> tuple[OpGraph, System]:
    """The graph and system of the module docstring: ``(graph, system)``.

    >>> g, s = merge_outcomes()
    >>> g.n_ops, sorted(s.support.candidates("Conv"))
    (7, ['cpu0', 'fpga0', 'gpu0'])
    """
    g = OpGraph("merge_outcomes")
    # op, type, GFLOP: sizes chosen so the fpga and gpu groups take comparable time (a pipeline)
    for name, op_type, gflop in [("stem", "Gelu", 2), ("a", "Gelu", 2), ("d", "Conv", 20), ("c", "Gelu", 2),
                                 ("e", "Conv", 20), ("f", "Conv", 20), ("tail", "Gelu", 2)]:
        g.add_op(name, op_type, flops=gflop * 1e9, weight_bytes=MiB)
    g.add_tensor("x", 4 * MiB, consumers=["stem"])
    for u, v in [("stem", "a"), ("a", "d"), ("d", "c"), ("c", "e"), ("e", "f"), ("f", "tail")]:
        g.connect(u, v, 4 * MiB)
    g.connect("a", "c", 4 * MiB, name="a:skip")  # the skip edge that makes merging a and c cyclic
    g.add_tensor("y", 4 * MiB, producer="tail", is_output=True)
    table = SupportTable({"fpga0": {"Conv": 1}, "gpu0": {"*": 1, "Conv": 2}, "cpu0": {"*": 3}})
    s = toy_system().with_support(table)
    return g, s
