"""GraphPanel: load a graph (bundled, generated, or uploaded JSON/ONNX/.pt2), see it and its summary.

>>> p = GraphPanel()
>>> p.state.source = "generator"; p.state.generator = "chain"; p.state.n = 5
>>> p.result.n_ops
5
>>> p.upload_bytes(b"not json", "bad.json"); "not valid JSON" in p.message.value, p.result.n_ops
(True, 5)
"""

from __future__ import annotations

import html
import os
import tempfile
from typing import Any

import ipywidgets as W
import traitlets

import hetsched as hs
from hetsched.errors import FormatError, HetschedError
from hetsched.io import GRAPH_SUFFIXES, bundled_graphs, load_graph
from hetsched.io.generators import PARAMS as GENERATOR_PARAMS
from hetsched.io.generators import generate
from hetsched.plot import bytes_unit, color_map, graph_view
from hetsched.plot.core import block_view

from .base import Panel, Session, link_clamped, webgl_sized
from .blocks import BlockDrawing

_KINDS = " or ".join(GRAPH_SUFFIXES)

__all__ = ["GraphPanel", "GraphState"]

class GraphState(traitlets.HasTraits):
    source = traitlets.Enum(["bundled", "generator", "upload"], default_value="generator")
    bundled = traitlets.Unicode("")
    generator = traitlets.Enum(list(GENERATOR_PARAMS["generator"].options), default_value=GENERATOR_PARAMS["generator"].default)
    n = traitlets.Int(GENERATOR_PARAMS["n"].default)
    seed = traitlets.Int(GENERATOR_PARAMS["seed"].default)
    color_by = traitlets.Enum(["op_type", "device"], default_value="op_type")
    # "auto": blocks (layers, stages) beyond BlockDrawing.BLOCKS_ABOVE ops, else every op
    view = traitlets.Enum(["auto", "blocks", "ops"], default_value="auto")
    expanded = traitlets.Tuple()  # blocks shown op by op
    upload_name = traitlets.Unicode("")
    upload_content = traitlets.Bytes(b"")


def _safe_file_name(name: str) -> str:
    """The uploaded file's name as the temporary copy's name: its last part, without characters no file
    name may hold (a NUL byte raised ValueError) and short enough for any file system (messages name it).

    >>> _safe_file_name("../../a" + chr(0) + "b.json"), len(_safe_file_name("x" * 1000 + ".onnx"))
    ('ab.json', 105)
    """
    base = os.path.basename(name.replace("\\", "/"))
    base = "".join(c for c in base if c.isprintable() and c not in "/\x00") or "upload"
    stem, suffix = os.path.splitext(base)
    return stem[:100] + suffix[:10] if len(base) > 110 else base


class GraphPanel(BlockDrawing, Panel):
    """Pick a graph, see it coloured by op type or by the device the support table prefers.

    Parameters
    ----------
    session : Session, optional
        Shared with the other panels of a dashboard; the loaded graph is published there.
    """

    TAB = "graph"
    VIEW_TRAITS = ("color_by", "view", "expanded")  # never reloads (a bad upload stays rejected)

    def __init__(self, session: Session | None = None, **kw: Any) -> None:
        self.session = session or Session()
        state = GraphState()
        names = bundled_graphs()
        if names:
            state.bundled = names[0]
        # the tab starts on its scenario's graph, which other tabs do not follow: only a graph the
        # user picks (or load()) is published to the session
        self._user = False
        self._scenario_state(state, names)
        src = W.ToggleButtons(options=[("bundled", "bundled"), ("generator", "generator"), ("upload", "upload")],
                              description="source")
        bundled = W.Dropdown(options=names or [""], description="graph")
        gp = GENERATOR_PARAMS
        gen = W.Dropdown(options=list(gp["generator"].options), description="generator")
        # the core's bounds (hetsched.io.generators.PARAMS): a value outside them is refused, not clamped
        n = W.BoundedIntText(min=gp["n"].min, max=gp["n"].max, description="size", tooltip=gp["n"].help)
        seed = W.BoundedIntText(min=gp["seed"].min, max=gp["seed"].max, description="seed", tooltip=gp["seed"].help)
        color = W.ToggleButtons(options=[("op type", "op_type"), ("preferred device", "device")], description="colour by",
                                tooltips=["the kind of each op", "the backend the system's support table prefers for it"])
        view = self.view_control(state)
        for ctl, name in ((src, "source"), (gen, "generator"), (color, "color_by")):
            W.link((state, name), (ctl, "value"))  # state first: it holds the defaults
        # the trait wins: a size or seed outside the box's range, or a name the dropdown lacks, is
        # refused and taken back (a plain link clamped the box or raised "Invalid selection")
        for ctl, name in ((bundled, "bundled"), (n, "n"), (seed, "seed")):
            link_clamped(state, name, ctl)
        self._names = names
        self.upload = W.FileUpload(accept=",".join(GRAPH_SUFFIXES), multiple=False, description="upload")
        self.upload.observe(self._on_upload, names="value")
        self.summary = W.HTML()
        self.controls = W.VBox([src, W.HBox([bundled, self.upload]), W.HBox([gen, n, seed]), W.HBox([color, view])])
        super().__init__(state, autostart=False, session=self.session, **kw)
        self.children = [self.controls, self.status, self.summary, self.figure_view("graph")]
        self.watch_clicks(self.figures["graph"])
        self._start()

    def _scenario_state(self, state: GraphState, names: list[str]) -> None:
        """Set the controls to this tab's scenario (its bundled graph, its settings)."""
        sc = self.own_scenario()
        if sc.bundled in names:
            state.source, state.bundled = "bundled", sc.bundled
        for k, v in sc.settings.items():
            setattr(state, k, v)

    def show_scenario(self) -> bool:
        """Back to this tab's own example (what the dashboard does when its picker is reset)."""
        self._user = False
        with self.hold():
            self._scenario_state(self.state, bundled_graphs())
        return self.refresh()

    def _on_change(self, change) -> None:
        if change["name"] not in self.VIEW_TRAITS and not self._in_refresh:
            self._user = True  # the user picked a graph: every tab schedules it from now on
        super()._on_change(change)

    # -- public API -------------------------------------------------------------
    def load(self, graph: hs.OpGraph, system: hs.System | None = None) -> None:
        """Show a graph (and optionally a system) built elsewhere; every tab follows it."""
        graph.validate()
        self._user = True
        if system is not None:
            self.session.system = system
        self._in_refresh = True  # on_result's view changes draw once, below
        try:
            self.on_result(graph)
        finally:
            self._in_refresh = False
        self.result = graph
        self._render_guarded(graph)

    def upload_bytes(self, content: bytes, filename: str) -> None:
        """What the upload button does (also the headless-test entry point)."""
        with self.hold():  # three traits, one load (traitlets' own hold still notifies once per trait)
            self.state.upload_name = filename
            self.state.upload_content = bytes(content)
            self.state.source = "upload"

    # -- Panel -------------------------------------------------------------------
    def check_inputs(self) -> None:
        """Refuse a generator size or seed outside the boxes' ranges and an unknown bundled graph (taken back)."""
        st = self.state
        self.check_params(GENERATOR_PARAMS, {"n": st.n, "seed": st.seed})
        if st.bundled and st.bundled not in self._names:
            raise HetschedError(f"bundled graph {st.bundled!r} refused: not one of the bundled graphs", field="bundled")

    def _on_upload(self, change: dict) -> None:
        files = change["new"]
        if files:
            f = files[0]
            self.upload_bytes(bytes(f["content"]), f["name"])

    def compute(self) -> hs.OpGraph:
        st = self.state
        if st.source == "bundled":
            if not st.bundled:
                raise FormatError("no bundled graphs in data/graphs (run `make data`)", field="bundled")
            return load_graph(st.bundled)
        if st.source == "upload":
            if not st.upload_name:
                raise FormatError(f"choose a {_KINDS} file to upload", field="upload")
            suffix = os.path.splitext(st.upload_name)[1].lower()
            if suffix not in GRAPH_SUFFIXES:
                raise FormatError(f"{st.upload_name}: expected a {_KINDS} file", field="upload")
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, _safe_file_name(st.upload_name))
                with open(path, "wb") as fh:
                    fh.write(st.upload_content)
                return load_graph(path)
        return generate(st.generator, st.n, st.seed)  # the core's sizing table: the CLI builds the same graph

    def drawn_graph(self) -> hs.OpGraph | None:
        return self.result

    def _expects_webgl(self) -> bool:
        # the graph drawn here is the one every tab is about to follow (the session still holds the
        # previous one: it is published after drawing)
        return webgl_sized(self.result)

    def _figure(self, g: hs.OpGraph):
        sysm = self._session_system()
        colors, legend = None, "op type"
        color_by: Any = "op_type"
        if self.state.color_by == "device" and sysm is not None:
            color_by = {o: (sysm.candidates(g.op(o).op_type) or ["(unsupported)"])[0] for o in g}
            colors, legend = color_map(sysm.device_names), "preferred device"
        if self.blocks_shown(g):
            blocks = self.op_blocks_of(g)
            n_blocks = len(set(blocks.values()))
            return block_view(g, blocks, expanded=list(self.open_blocks(g)),
                              color_by=color_by, colors=colors, legend_title=legend,
                              title=f"{html.escape(g.name)}: {g.n_ops} ops in {n_blocks} blocks (click a block to open it)")
        return graph_view(g, color_by=color_by, colors=colors, legend_title=legend, title=f"{html.escape(g.name)}: {g.n_ops} ops")

    def on_result(self, g: hs.OpGraph) -> None:
        self.forget_blocks(g)

    def render(self, g: hs.OpGraph) -> None:
        self.show_figure("graph", self._figure(g))
        self._render_summary(g)
        if self._user:
            self.session.graph = g

    def _render_summary(self, g: hs.OpGraph) -> None:
        s = g.summary()
        bu, bf = bytes_unit(s["total_weight_bytes"])
        lu, lf = bytes_unit(s["largest_tensor_bytes"])
        self.summary.value = (
            f"<b>{html.escape(s['name'])}</b>: {s['n_ops']} ops, {s['n_tensors']} tensors, "
            f"{s['total_flops'] / 1e9:.3g} GFLOPs, weights {s['total_weight_bytes'] * bf:.3g} {bu}, "
            f"largest tensor <code>{html.escape(str(s['largest_tensor']))}</code> ({s['largest_tensor_bytes'] * lf:.3g} {lu})"
        )
