"""Property tests: on thousands of random graphs and random support tables the quotient graph is
always a DAG and every op sits in exactly one group, on a backend that supports it."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from hetsched.errors import UnsupportedOpError
from hetsched.partition import partition_by_support
from hetsched.system import SupportTable
from strategies import small_dags

BACKENDS = ["b0", "b1", "b2", "b3"]
TYPES = ["Conv", "MatMul", "Relu", "Add", "Softmax", "Concat", "*"]


@st.composite
def support_tables(draw):
    table = {}
    for b in BACKENDS:
        types = draw(st.lists(st.sampled_from(TYPES), max_size=4, unique=True))
        table[b] = {t: draw(st.integers(1, 3)) for t in types}
    return SupportTable(table)


@settings(max_examples=2000, deadline=None)
@given(
    g=small_dags(max_ops=30),
    table=support_tables(),
    enabled=st.one_of(st.none(), st.lists(st.sampled_from(BACKENDS), min_size=1, max_size=4, unique=True)),
    fallback=st.one_of(st.none(), st.sampled_from(BACKENDS)),
    merge=st.sampled_from(["adjacent", "global", None]),
    k=st.integers(1, 4),
)
def test_quotient_is_a_dag_and_groups_partition_the_ops(g, table, enabled, fallback, merge, k):
    if fallback is None:
        k = 1
    en = None if enabled is None else set(enabled)
    unsupported = sorted((o.name, o.op_type) for o in g.ops.values() if not table.candidates(o.op_type, en))
    try:
        r = partition_by_support(g, table, enabled=enabled, fallback=fallback, merge=merge, min_group_size=k)
    except UnsupportedOpError as e:
        assert fallback is None and unsupported and sorted(e.ops) == unsupported
        return
    assert fallback is not None or not unsupported
    # the quotient graph is a DAG
    Q = r.quotient
    assert nx.is_directed_acyclic_graph(Q)
    # every op in exactly one group; group names, backends and the assignment agree
    seen = [o for ops in r.groups.values() for o in ops]
    assert sorted(seen) == sorted(g.ops) and len(seen) == len(set(seen))
    for gname, ops in r.groups.items():
        b = r.group_backend[gname]
        for o in ops:
            assert r.group_of[o] == gname and r.assignment[o] == b
            t = g.op(o).op_type
            # a backend that supports it (and is enabled), or the fallback
            assert b == fallback or (table.supports(b, t) and (en is None or b in en))
    # marking picks the best enabled backend unless the op went to the fallback
    for o in g.ops.values():
        cands = table.candidates(o.op_type, en)
        if k == 1:
            assert r.assignment[o.name] == (cands[0] if cands else fallback)
    # quotient edges are exactly the cross-group op edges
    expect = {(r.group_of[u], r.group_of[v]) for u, v in g.nx.edges if r.group_of[u] != r.group_of[v]}
    assert set(Q.edges) == expect
    if merge == "adjacent" and k == 1:
        for ops in r.groups.values():
            assert nx.is_weakly_connected(g.nx.subgraph(ops))
    if k > 1:
        for gname, ops in r.groups.items():
            assert r.group_backend[gname] == fallback or len(ops) >= k
