"""Hypothesis strategies shared by every property test: random graphs on the shared generators."""

from __future__ import annotations

from hypothesis import strategies as st

from hetsched.io import generators as gen


@st.composite
def small_dags(draw, min_ops: int = 2, max_ops: int = 40):
    """Topcuoglu random DAGs, layered graphs, fork-joins and RandWire graphs of a few dozen ops."""
    kind = draw(st.sampled_from(["topcuoglu", "layered", "fork_join", "randwire", "chain"]))
    seed = draw(st.integers(0, 10_000))
    if kind == "topcuoglu":
        n = draw(st.integers(min_ops, max_ops))
        return gen.topcuoglu(
            n,
            alpha=draw(st.sampled_from([0.5, 1.0, 2.0])),
            out_degree=draw(st.sampled_from([1.0, 2.0, 4.0])),
            ccr=draw(st.sampled_from([0.1, 1.0, 10.0])),
            seed=seed,
        )
    if kind == "layered":
        return gen.layered(draw(st.integers(1, 6)), draw(st.integers(1, 6)), seed=seed)
    if kind == "fork_join":
        return gen.fork_join(draw(st.integers(1, 5)), draw(st.integers(1, 5)), seed=seed)
    if kind == "randwire":
        n = draw(st.integers(6, max(6, min(max_ops, 30))))
        return gen.randwire_ws(n, k=4, p=draw(st.sampled_from([0.25, 0.75])), channels=8, hw=8, seed=seed)
    return gen.chain(draw(st.integers(min_ops, max_ops)), seed=seed)
