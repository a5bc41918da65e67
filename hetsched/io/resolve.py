"""Graphs and systems by name: what the CLI, the what-if sweeps and the model-driven pipeline
run (:func:`hetsched.pipeline.simulate_model`) accept instead of objects.

A name is a file path, a bundled graph or system, a zoo model or a generator; a setting the named
graph cannot use is an error naming it. Built objects are cached per process (files by
modification time), and every call returns its own copy of a graph.

>>> resolve_graph("chain", 3).n_ops, resolve_system("toy").host
(3, 'cpu0')
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..errors import HetschedError
from ..graph import OpGraph
from ..system import System

__all__ = ["MAX_GENERATED_OPS", "resolve_graph", "resolve_system"]

#: Largest ``n`` (ops of a generated graph, nodes of ``randwire_ws``) a name resolves to.
MAX_GENERATED_OPS = 1_000_000


def resolve_graph(name: str, n: int | None = None, seed: int | None = None, batch: int = 1,
                  training: bool = False) -> OpGraph:
    """A graph by name: a file path, a bundled graph, a zoo model, or a generator.

    ``n`` (ops, default 40, sized by :data:`hetsched.io.generators.SIZINGS` as the Graph panel sizes
    them; or the random-wiring node count of the zoo's ``randwire_ws``, which the name means here)
    and ``seed`` apply to the generators and to the zoo's ``randwire_ws``; ``batch`` and
    ``training`` to zoo models (and ``batch`` to the generators that take one). A setting the named graph cannot use is an error naming it, never
    silently ignored. Built graphs are cached per process (files by modification time) and each
    call returns its own copy, so a caller that changes it cannot change the next caller's.

    >>> resolve_graph("chain", 5).n_ops, resolve_graph("transformer_block", 45).n_ops
    (5, 45)
    >>> resolve_graph("randwire_ws", 8).n_ops < resolve_graph("randwire_ws").n_ops
    True
    >>> resolve_graph("resnet50", 8)
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: n does not apply to zoo model 'resnet50'
    """
    import os

    if not isinstance(name, str) or not name:
        raise HetschedError(f"graph must be a name or a path, got {name!r}", field="graph")
    import numbers

    for field, v in (("n", n), ("seed", seed), ("batch", batch)):  # numpy integers from np.arange grids are fine
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral)):
            raise HetschedError(f"{field} must be an integer, got {v!r}", field=field)
    n, seed = (None if n is None else int(n)), (None if seed is None else int(seed))
    if n is not None and not 0 < n <= MAX_GENERATED_OPS:  # a typo of 10**8 ops would take the machine's memory
        raise HetschedError(f"n must be in 1..{MAX_GENERATED_OPS}, got {n}", field="n")
    stamp = os.stat(name).st_mtime_ns if os.path.isfile(name) else None
    return _build_graph(name, n, seed, int(batch), bool(training), stamp).copy()


@lru_cache(maxsize=32)
def _build_graph(name: str, n: int | None, seed: int | None, batch: int, training: bool, _stamp: int | None) -> OpGraph:
    import inspect
    import os

    from . import bundled_graphs, load_graph, zoo
    from . import generators as gen

    def unused(what: str, **given: Any) -> None:
        bad = [k for k, v in given.items() if v]
        if bad:
            raise HetschedError(f"{bad[0]} does not apply to {what}", field=bad[0])

    if os.path.exists(name) or name in bundled_graphs():
        unused(f"graph file {name!r}", n=n is not None, seed=seed is not None, batch=batch != 1, training=training)
        return load_graph(name)
    if name in zoo.ZOO:
        fn = zoo.ZOO[name]
        params = inspect.signature(fn).parameters
        kw: dict[str, Any] = {"batch": batch, "training": training}
        if n is not None:
            if "nodes" not in params:
                unused(f"zoo model {name!r}", n=True)
            kw["nodes"] = n
        if seed is not None:
            if "seed" not in params:
                unused(f"zoo model {name!r}", seed=True)
            kw["seed"] = seed
        return fn(**kw)
    if name in gen.SIZINGS:
        # the one sizing table, shared with the Graph panel: the same (name, n, seed) is the same graph
        sz = gen.SIZINGS[name]
        unused(f"generator {name!r}", training=training, seed=seed is not None and not sz.seed,
               batch=batch != 1 and not sz.batch)
        return gen.generate(name, gen.DEFAULT_N if n is None else n, 0 if seed is None else seed, batch)
    raise HetschedError(
        f"unknown graph {name!r}: not a file, a bundled graph, a zoo model ({', '.join(zoo.ZOO)}) or a generator",
        field="graph",
    )


def resolve_system(name: str) -> System:
    """A system by name: ``toy``, a YAML path, or a bundled system (cached; files by modification time).

    >>> resolve_system("toy").host
    'cpu0'
    """
    import os

    if not isinstance(name, str) or not name:  # os.path.isfile(5) would look at file descriptor 5
        raise HetschedError(f"system must be a name or a path, got {name!r}", field="system")
    return _build_system(name, os.stat(name).st_mtime_ns if os.path.isfile(name) else None)


@lru_cache(maxsize=16)
def _build_system(name: str, _stamp: int | None) -> System:
    from . import load_system, toy_system

    return toy_system() if name == "toy" else load_system(name)
