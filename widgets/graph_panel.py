"""GraphPanel: load a graph (bundled, generated, or uploaded JSON/ONNX), see it and its summary.

>>> p = GraphPanel()
>>> p.state.source = "generator"; p.state.generator = "chain"; p.state.n = 5
>>> p.result.n_ops
5
>>> p.upload_bytes(b"not json", "bad.json"); "not valid JSON" in p.message.value, p.result.n_ops
(True, 5)
"""

from __future__ import annotations

import html
import inspect
import os
import tempfile
from typing import Any

import ipywidgets as W
import traitlets

import hetsched as hs
from hetsched.errors import FormatError
from hetsched.io import bundled_graphs, load_graph
from hetsched.io.generators import GENERATORS
from hetsched.plot import bytes_unit, color_map, graph_view

from .base import Panel, Session

__all__ = ["GraphPanel", "GraphState"]

_GEN_DEFAULTS = {
    "topcuoglu": lambda n, seed: GENERATORS["topcuoglu"](n, seed=seed),
    "chain": lambda n, seed: GENERATORS["chain"](n, seed=seed),
    "layered": lambda n, seed: GENERATORS["layered"](max(1, n // 4), 4, seed=seed),
    "fork_join": lambda n, seed: GENERATORS["fork_join"](4, max(1, (n - 2) // 4), seed=seed),
    "transformer_block": lambda n, seed: GENERATORS["transformer_block"](n_layers=max(1, n // 15), seq=64, d_model=256, heads=4),
    "resnet_like": lambda n, seed: GENERATORS["resnet_like"](blocks_per_stage=max(1, n // 20)),
    "randwire_ws": lambda n, seed: GENERATORS["randwire_ws"](max(6, n // 2), seed=seed),
}


class GraphState(traitlets.HasTraits):
    source = traitlets.Enum(["bundled", "generator", "upload"], default_value="generator")
    bundled = traitlets.Unicode("")
    generator = traitlets.Enum(list(_GEN_DEFAULTS), default_value="resnet_like")
    n = traitlets.Int(40)
    seed = traitlets.Int(0)
    color_by = traitlets.Enum(["op_type", "device"], default_value="op_type")
    upload_name = traitlets.Unicode("")
    upload_content = traitlets.Bytes(b"")


class GraphPanel(Panel):
    """Pick a graph, see it coloured by op type or by the device the support table prefers.

    Parameters
    ----------
    session : Session, optional
        Shared with the other panels of a dashboard; the loaded graph is published there.
    """

    VIEW_TRAITS = ("color_by",)  # recolouring never reloads (a bad upload stays rejected)

    def __init__(self, session: Session | None = None, **kw: Any) -> None:
        self.session = session or Session()
        if self.session.system is None:
            self.session.system = hs.toy_system()
        state = GraphState()
        names = bundled_graphs()
        if names:
            state.bundled = names[0]
        self._loaded = None  # the graph as built, before colouring
        src = W.ToggleButtons(options=[("bundled", "bundled"), ("generator", "generator"), ("upload", "upload")],
                              description="source")
        bundled = W.Dropdown(options=names or [""], description="graph")
        gen = W.Dropdown(options=list(_GEN_DEFAULTS), description="generator")
        n = W.BoundedIntText(min=2, max=20000, description="size")
        seed = W.BoundedIntText(min=0, max=10**6, description="seed")
        color = W.ToggleButtons(options=["op_type", "device"], description="colour by")
        for ctl, name in ((src, "source"), (bundled, "bundled"), (gen, "generator"), (n, "n"), (seed, "seed"), (color, "color_by")):
            W.link((state, name), (ctl, "value"))  # state first: it holds the defaults
        self.upload = W.FileUpload(accept=".json,.onnx", multiple=False, description="upload")
        self.upload.observe(self._on_upload, names="value")
        self.summary = W.HTML()
        self.controls = W.VBox([src, W.HBox([bundled, self.upload]), W.HBox([gen, n, seed]), color])
        super().__init__(state, autostart=False, session=self.session, **kw)
        self.children = [self.controls, self.status, self.summary, self.figure_view("graph")]
        self._start()

    # -- public API -------------------------------------------------------------
    def load(self, graph: hs.OpGraph, system: hs.System | None = None) -> None:
        """Show a graph (and optionally a system) built elsewhere."""
        graph.validate()
        if system is not None:
            self.session.system = system
        self._loaded = graph
        self.result = graph
        self.render(graph)
        self.message.value = ""

    def upload_bytes(self, content: bytes, filename: str) -> None:
        """What the upload button does (also the headless-test entry point)."""
        with self.state.hold_trait_notifications():
            self.state.upload_name = filename
            self.state.upload_content = bytes(content)
            self.state.source = "upload"

    # -- Panel -------------------------------------------------------------------
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
                raise FormatError("choose a .json or .onnx file to upload", field="upload")
            suffix = os.path.splitext(st.upload_name)[1].lower()
            if suffix not in (".json", ".onnx"):
                raise FormatError(f"{st.upload_name}: expected a .json or .onnx file", field="upload")
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, os.path.basename(st.upload_name))
                with open(path, "wb") as fh:
                    fh.write(st.upload_content)
                return load_graph(path)
        return _GEN_DEFAULTS[st.generator](st.n, st.seed)

    def _figure(self, g: hs.OpGraph):
        sysm = self.session.system
        if self.state.color_by == "device" and sysm is not None:
            pref = {o: (sysm.candidates(g.op(o).op_type) or ["(unsupported)"])[0] for o in g}
            return graph_view(g, color_by=pref, colors=color_map(sysm.device_names), title=g.name)
        return graph_view(g, title=g.name)

    def render(self, g: hs.OpGraph) -> None:
        self.show_figure("graph", self._figure(g))
        self._render_summary(g)
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
