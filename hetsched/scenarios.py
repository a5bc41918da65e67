"""Scenarios: named, bundled set-ups (a graph, a machine, settings) in which each family's point shows.

A newcomer who opens a tab should see something happen: several groups, a refused merge, a remap
that is tried and refused, a pipeline cache that fills, orders whose peaks differ, threads that
wait on each other (issue 22). Each scenario names the tab it is about and says in one line what
to notice. The dashboard offers them in a picker, every panel shown alone starts from its tab's
scenario, and the notebooks load theirs with :func:`load_scenario`.

>>> sorted(SCENARIOS)[:3]
['backends', 'executor', 'mapping']
>>> sc = SCENARIOS["memory"]
>>> sc.tab, sc.title
('memory', 'Orders whose peaks differ: the patent flow against the lower bound')
>>> g, s = load_scenario("memory")
>>> g.n_ops, s.name
(24, 'toy')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .errors import UnknownNameError
from .graph import OpGraph
from .system import System

__all__ = ["Scenario", "SCENARIOS", "TAB_SCENARIO", "load_scenario", "mapping_instance", "scenario", "slow_gpu_link"]


@dataclass(frozen=True)
class Scenario:
    """A bundled set-up: what to load, which tab it is about, what to notice there.

    Attributes
    ----------
    key : str
        Short name (``"mapping"``).
    title : str
        One line for a picker.
    tab : str
        The dashboard tab whose point it shows (``graph``, ``backends``, ``mapping``, ``pipeline``,
        ``memory``, ``executor``).
    notice : str
        What to notice, in plain words.
    graph, system : callable
        Build the graph and the system (called on each load: results never share mutable inputs).
    settings : dict
        Panel settings of the tab (state trait name -> value); empty means the panel's defaults.
    bundled : str or None
        The bundled graph's name when the graph is one (what a graph picker selects).
    """

    key: str
    title: str
    tab: str
    notice: str
    graph: Callable[[], OpGraph]
    system: Callable[[], System]
    settings: Mapping[str, Any] = field(default_factory=dict)
    bundled: str | None = None

    def load(self) -> tuple[OpGraph, System]:
        """``(graph, system)`` of the scenario."""
        return self.graph(), self.system()


def _bundled(name: str) -> Callable[[], OpGraph]:
    def build() -> OpGraph:
        from .io import load_graph

        return load_graph(name)

    return build


def _system(name: str) -> Callable[[], System]:
    def build() -> System:
        from .io import load_system, toy_system

        return toy_system() if name == "toy" else load_system(name)

    return build


def _layered() -> OpGraph:
    from .io.generators import layered

    return layered(n_layers=6, width=4, seed=0)


def _merge_graph() -> OpGraph:
    from .partition.examples import merge_outcomes

    return merge_outcomes()[0]


def _merge_system() -> System:
    from .partition.examples import merge_outcomes

    return merge_outcomes()[1]


def mapping_instance(memory_MiB: float | None = 56.0) -> tuple[OpGraph, System]:
    """The mapping tab's instance: CASIA-SURF on the H2H FPGA zoo, the host running no layer (as in H2H).

    ``memory_MiB`` cuts the U280 card's (``fpga_cnn1``) memory so that not every weight fits under
    the occupancy threshold: remaps are then kept and refused, and a kept remap frees memory that
    claim 6's re-optimisation hands to waiting weights and tensors. ``None`` keeps the zoo as it is.

    >>> g, s = mapping_instance()
    >>> g.n_ops, s.devices["fpga_cnn1"].memory_bytes // 2**20
    (91, 56)
    """
    import dataclasses

    from .io import load_system
    from .io.mmmt import mmmt
    from .system import SupportTable

    graph = mmmt("casia_surf")
    zoo = load_system("h2h_fpga_zoo")
    sup = zoo.support.as_dict()
    sup.pop(zoo.host, None)
    system = zoo.with_support(SupportTable(sup))
    if memory_MiB is not None:
        d = system.devices["fpga_cnn1"]
        system = system.with_devices({d.name: dataclasses.replace(d, memory_bytes=int(memory_MiB * 2**20))})
    return graph, system


def _resnet_like() -> OpGraph:
    from .io.generators import resnet_like

    return resnet_like(blocks_per_stage=1)


def slow_gpu_link(gbps: float = 1.0) -> System:
    """The toy CPU + GPU + FPGA system with its CPU-GPU link at ``gbps`` GB/s (the FPGA keeps 16 GB/s).

    The what-if of notebook 06: the compute-first mapper prices each candidate with the transfers to
    and from host memory, so a slower link pushes layers off the GPU.

    >>> [l.bandwidth_Bps / 1e9 for l in slow_gpu_link(0.5).links]
    [0.5, 16.0]
    """
    import dataclasses

    from .errors import HetschedError
    from .io import toy_system

    if not gbps > 0:
        raise HetschedError(f"gbps must be positive, got {gbps!r}", field="gbps")
    base = toy_system()
    return base.with_links([dataclasses.replace(l, bandwidth_Bps=gbps * 1e9) if "gpu0" in (l.src, l.dst) else l
                            for l in base.links])


SCENARIOS: dict[str, Scenario] = {s.key: s for s in [
    Scenario(
        "tour", "ResNet-50 on a GPU + TPU machine", "graph",
        "Colour by preferred device: the TPU's support table claims the convolutions and matrix products, "
        "the GPU the rest. 175 ops are drawn as 9 blocks (the network's stages): click one to open it.",
        _bundled("resnet50_b1"), _system("gpu_tpu"), {"color_by": "device"}, bundled="resnet50_b1"),
    Scenario(
        "backends", "Support, priorities and merging on three backends", "backends",
        "Ops go to their best supported backend; neighbours on one backend merge into groups, but one merge is "
        "refused because it would create a cycle between groups, and the pipelined FPGA group beats running "
        "the groups one after another.",
        _merge_graph, _merge_system),
    Scenario(
        "mapping", "The patent's mapper on the H2H accelerator zoo (CASIA-SURF)", "mapping",
        "Compute-first puts each layer on its fastest accelerator; locality keeps weights on chip where they "
        "fit; the remap pass then tries moving layers next to their successors: some trials are kept, others "
        "refused because the system total latency would rise. The search and the ILP show how far the patent "
        "ends from the best mapping. (The U280 card's memory is cut to 56 MiB so that not every weight fits.)",
        lambda: mapping_instance()[0], lambda: mapping_instance()[1]),
    Scenario(
        "pipeline", "GPT-2 small training over A100, V100 and U280 ranks", "pipeline",
        "The split gives each rank the layers its device can carry. Under PaddlePaddle's lock-step exchange "
        "the patent's cache queue holds outputs whose receiver is not ready yet, but interleaving sends twice "
        "as many messages and its senders block, so here it ends after 1F1B. Untick lock-step p2p (non-blocking "
        "sends, as torch does): interleaving then fills the bubbles 1F1B leaves and finishes first.",
        _bundled("gpt2_small_train_b8_s1024"), _system("pipeline_a100_v100_u280"), bundled="gpt2_small_train_b8_s1024"),
    Scenario(
        "pipeline_synthesis", "The best pipeline schedule for GPT-2 small on A100, V100 and U280 ranks", "pipeline",
        "The ranks' stages do not cost the same, and every named schedule (1F1B, ZB-H1, ZB-H2, GPipe) is a pattern made "
        "for equal stages: each leaves bubbles. The synthesized order reaches the lower bound, so it is proven optimal, "
        "and finishes about a tenth sooner than the fastest named schedule. Step through the search's decisions below the "
        "comparison; then cap each rank's memory at what 1F1B (schedule A) holds: ZB-H1 and ZB-H2 no longer fit, and the "
        "search still finds an order faster than 1F1B within its memory.",
        _bundled("gpt2_small_train_b8_s1024"), _system("pipeline_a100_v100_u280"),
        {"schedule": "1f1b", "schedule_b": "zb_h2", "m": 16, "lockstep": False, "synthesis": True, "method": "heuristic",
         "memory_cap": "none"},
        bundled="gpt2_small_train_b8_s1024"),
    Scenario(
        "memory", "Orders whose peaks differ: the patent flow against the lower bound", "memory",
        "The ILP does not finish in its time limit, so the patent falls back to BFS and DFS; a fine-tune move "
        "lowers the peak, yet the patent's order stays above the lower bound that the portfolio reaches.",
        _layered, _system("toy")),
    Scenario(
        "executor", "Every thread rule of the executor patent fires", "executor",
        "Four host threads: a sync op's other sync successors go to other threads (claim 1), a sync op feeding "
        "an async one keeps its thread, async kernels queue on streams, and threads wait on each other's events.",
        _bundled("executor_thread_rules"), _system("toy"), bundled="executor_thread_rules"),
    Scenario(
        "slow_link", "What if the GPU sits behind a slow link? A small ResNet, CPU-GPU link at 1 GB/s", "mapping",
        "Every GPU candidate now carries its slow transfers to and from host memory, so compute-first sends no "
        "layer to the GPU: convolutions go to the FPGA, the rest stays on the CPU. Notebook 06 sweeps the link "
        "speed and shows the layers leaving the GPU.",
        _resnet_like, slow_gpu_link),
]}

#: the scenario a tab starts from when nothing was loaded: the tab's first (later ones are what-ifs)
TAB_SCENARIO: dict[str, str] = {}
for _sc in SCENARIOS.values():
    TAB_SCENARIO.setdefault(_sc.tab, _sc.key)
del _sc


def scenario(key: str) -> Scenario:
    """The scenario named ``key`` (a named error listing the names otherwise)."""
    try:
        return SCENARIOS[key]
    except KeyError:
        raise UnknownNameError(f"no scenario {key!r}; choose from {sorted(SCENARIOS)}", field="scenario") from None


def load_scenario(key: str) -> tuple[OpGraph, System]:
    """``(graph, system)`` of the scenario named ``key``."""
    return scenario(key).load()
