"""BackendPanel (seed 003): toggle backends, edit the priority grid, see groups and the buffered pipeline.

The panel calls :func:`hetsched.partition.partition_by_support` (the patent
``../shared/seeds/003_9a492ad1d4867370.txt``: mark each op with the best-priority enabled backend
that supports it, merge same-backend neighbours into aggregated ops) and
:func:`hetsched.partition.simulate_buffered` (buffers between backends so they run as a pipeline).
A checkbox per backend switches it on or off; the grid (op type x backend) edits the mapping
list's priorities (1 = best, 0 = not supported); merge mode, minimum group size (with a fallback
backend), buffer depth and number of inputs are inputs too. On every change the graph view
recolours by backend with the cross-backend edges drawn thick, the group table, the buffered
Gantt and the throughput update.

>>> p = BackendPanel()
>>> sorted(set(p.result.partition.assignment.values()))
['gpu0']
>>> p.toggle("gpu0", False)
>>> sorted(set(p.result.partition.assignment.values()))
['cpu0', 'fpga0']
>>> p.toggle("cpu0", False); "Softmax" in p.message.value or "no enabled backend" in p.message.value
True
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import ipywidgets as W
import pandas as pd
import traitlets

import hetsched as hs
import hetsched.partition as pt
from hetsched.errors import HetschedError
from hetsched.plot import color_map, gantt, graph_view, time_unit

from .base import Panel, Session

__all__ = ["BackendPanel", "BackendState", "BackendView"]

MERGES = ["adjacent", "global", "none"]


class BackendState(traitlets.HasTraits):
    enabled = traitlets.List(traitlets.Unicode())  # backends switched on (empty list at start: all)
    priorities = traitlets.Dict()  # "backend|op_type" -> priority edits (0: not supported)
    merge = traitlets.Enum(MERGES, default_value="adjacent")
    min_group_size = traitlets.Int(1)
    fallback = traitlets.Unicode("")  # "" = none
    buffer_depth = traitlets.Int(2)
    n_inputs = traitlets.Int(8)
    color_by = traitlets.Enum(["backend", "group"], default_value="backend")  # view


@dataclass(frozen=True)
class BackendView:
    """What the panel shows: the partition, its buffered simulation and the edited system."""

    partition: pt.PartitionResult
    buffered: pt.BufferedResult
    system: hs.System

    @property
    def metrics(self) -> dict[str, float]:
        return {**self.buffered.metrics, "n_groups": len(self.partition.groups)}


class BackendPanel(Panel):
    """Seed 003 on the session's graph and system.

    Parameters
    ----------
    session : Session, optional
    graph, system : optional
        Fix the panel to these instead of following the session.
    """

    VIEW_TRAITS = ("color_by",)

    def __init__(self, session: Session | None = None, *, graph=None, system=None, **kw: Any) -> None:
        state = BackendState()
        style = {"description_width": "initial"}
        merge = W.ToggleButtons(options=MERGES, description="merge", style=style)
        mgs = W.BoundedIntText(min=0, max=10**6, description="min group size", style=style, layout=W.Layout(width="180px"))
        fallback = W.Dropdown(options=[("none", "")], description="fallback", style=style, layout=W.Layout(width="200px"))
        depth = W.BoundedIntText(min=-1, max=1000, description="buffer depth", style=style, layout=W.Layout(width="170px"))
        n_in = W.BoundedIntText(min=0, max=10**5, description="inputs", style=style, layout=W.Layout(width="150px"))
        color = W.ToggleButtons(options=["backend", "group"], description="colour by", style=style)
        for ctl, name in ((merge, "merge"), (mgs, "min_group_size"), (fallback, "fallback"), (depth, "buffer_depth"),
                          (n_in, "n_inputs"), (color, "color_by")):
            W.link((state, name), (ctl, "value"))
        self.fallback_ctl = fallback
        self.checkboxes: dict[str, W.Checkbox] = {}
        self.checkbox_box = W.HBox()
        self.grid_cells: dict[tuple[str, str], W.BoundedIntText] = {}
        self.grid_box = W.VBox()
        self.groups_html = W.HTML()
        self.summary = W.HTML()
        self.controls = W.VBox([
            W.HBox([W.HTML("<b>backends</b>&nbsp;"), self.checkbox_box]),
            W.HBox([merge, mgs, fallback]), W.HBox([depth, n_in]),
            W.Accordion(children=[self.grid_box], titles=("priority grid (op type x backend; 1 = best, 0 = not supported)",)),
        ])
        self.control_widgets = {"merge": merge, "min_group_size": mgs, "fallback": fallback, "buffer_depth": depth,
                                "n_inputs": n_in, "color_by": color}
        self._fixed_graph, self._fixed_system = graph, system
        self._grid_key = None
        super().__init__(state, session=session, follow_session=graph is None and system is None, autostart=False, **kw)
        self._build_inputs()
        self.children = [self.controls, self.status, self.summary, color, self.figure_view("graph"),
                         self.figure_view("gantt"), self.groups_html, self.download_area]
        self._start()

    # -- inputs ------------------------------------------------------------------
    @property
    def graph(self) -> hs.OpGraph:
        from hetsched.io.generators import resnet_like

        return self._session_graph(lambda: resnet_like(blocks_per_stage=1))

    @property
    def base_system(self) -> hs.System:
        return self._session_system()

    def toggle(self, backend: str, on: bool) -> None:
        """Switch a backend on or off (what its checkbox does)."""
        if backend not in self.checkboxes:
            raise hs.errors.UnknownNameError(f"unknown backend {backend!r}", device=backend)
        self.checkboxes[backend].value = bool(on)

    def set_priority(self, backend: str, op_type: str, priority: int) -> None:
        """Edit one cell of the priority grid (0: not supported)."""
        box = self.grid_cells.get((backend, op_type))
        if box is not None and box.value != priority and 0 <= priority <= box.max:
            box.value = int(priority)  # its observer comes back here with the same value
        pr = dict(self.state.priorities)
        pr[f"{backend}|{op_type}"] = int(priority)
        self.state.priorities = pr

    def _build_inputs(self) -> None:
        """(Re)build the checkboxes and the grid for the current graph's op types and system's backends."""
        g, s = self.graph, self.base_system
        backends = list(s.support.backends) if s.support.backends else list(s.device_names)
        op_types = sorted({g.op(o).op_type for o in g})
        key = (tuple(backends), tuple(op_types), id(s))
        if key == self._grid_key:
            return
        self._grid_key = key
        with self.hold():
            self.state.enabled = list(backends)
            self.state.priorities = {}
            if self.state.fallback not in backends:
                self.state.fallback = ""
        self.fallback_ctl.options = [("none", "")] + [(b, b) for b in backends]
        self.checkboxes = {}
        for b in backends:
            cb = W.Checkbox(value=True, description=b, indent=False, layout=W.Layout(width="110px"))
            cb.observe(lambda ch, b=b: self._on_checkbox(b, ch["new"]), names="value")
            self.checkboxes[b] = cb
        self.checkbox_box.children = list(self.checkboxes.values())
        cmap = color_map(s.device_names)
        header = [W.HTML("<b>op type</b>")] + [W.HTML(f"<b style='color:{cmap.get(b, '#000')}'>{html.escape(b)}</b>")
                                               for b in backends]
        cells: list[W.Widget] = list(header)
        self.grid_cells = {}
        for t in op_types:
            cells.append(W.HTML(html.escape(t)))
            for b in backends:
                pr = s.support.priority(b, t)
                box = W.BoundedIntText(value=pr or 0, min=0, max=99, layout=W.Layout(width="70px"))
                box.observe(lambda ch, b=b, t=t: self.set_priority(b, t, ch["new"]), names="value")
                self.grid_cells[(b, t)] = box
                cells.append(box)
        self.grid_box.children = [W.GridBox(cells, layout=W.Layout(grid_template_columns=f"140px repeat({len(backends)}, 80px)"))]

    def _on_checkbox(self, backend: str, on: bool) -> None:
        en = [b for b in self.checkboxes if (self.checkboxes[b].value if b != backend else on)]
        self.state.enabled = en

    def _on_session(self, change) -> None:
        if change["new"] is not None:
            self._build_inputs()
            super()._on_session(change)

    def system(self) -> hs.System:
        """The session's system with the grid's edits applied to its support table."""
        s = self.base_system
        table = s.support
        for k, p in sorted(self.state.priorities.items()):
            b, t = k.split("|", 1)
            if p < 0:
                raise HetschedError(f"priority of {t} on {b} must be >= 0 (0: not supported), got {p}", device=b, field="priority")
            table = table.with_priority(b, t, p or None)
        return s.with_support(table) if table != s.support else s

    # -- Panel -------------------------------------------------------------------
    def compute(self) -> BackendView:
        st = self.state
        if st.n_inputs < 1:
            raise HetschedError(f"number of inputs must be at least 1, got {st.n_inputs}", field="n_inputs")
        sysm = self.system()
        merge = None if st.merge == "none" else st.merge
        if not st.enabled:
            raise HetschedError("every backend is switched off: switch one on", field="enabled")
        part = pt.partition_by_support(self.graph, sysm, enabled=list(st.enabled), merge=merge,
                                       min_group_size=st.min_group_size, fallback=st.fallback or None)
        buf = pt.simulate_buffered(part, sysm, n_inputs=st.n_inputs, buffer_depth=st.buffer_depth)
        return BackendView(part, buf, sysm)

    def cross_backend_edges(self, v: BackendView) -> list[tuple[str, str]]:
        a = v.partition.assignment
        return [(u, w) for u, w in v.partition.graph.nx.edges if a[u] != a[w]]

    def _graph_fig(self, v: BackendView):
        p = v.partition
        colors = color_map(v.system.device_names)
        if self.state.color_by == "group":
            label, colors = dict(p.group_of), None
        else:
            label = dict(p.assignment)
        fig = graph_view(p.graph, color_by=label, colors=colors, edge_highlight=self.cross_backend_edges(v),
                         title=f"{p.graph.name}: {len(p.groups)} aggregated ops, "
                               f"{len(self.cross_backend_edges(v))} cross-backend edges (thick)", height=380)
        fig.update_layout(legend_title_text=self.state.color_by)
        return fig

    def _gantt_fig(self, v: BackendView):
        m = v.buffered.metrics
        unit, f = time_unit(m["makespan_s"])
        return gantt(v.buffered.timeline, color_by="device", colors=color_map(v.system.device_names),
                     title=f"buffered pipeline: {m['n_inputs']:.0f} inputs, buffer depth {m['buffer_depth']:.0f}: "
                           f"throughput {m['throughput_per_s']:.4g}/s, makespan {m['makespan_s'] * f:.4g} {unit}")

    def _render_text(self, v: BackendView) -> None:
        p, m = v.partition, v.buffered.metrics
        unit, f = time_unit(m["latency_p50_s"])
        util = ", ".join(f"{b} {u:.0%}" for b, u in v.buffered.utilisation.items())
        self.summary.value = (
            f"<b>{len(p.groups)}</b> aggregated ops on {len(set(p.group_backend.values()))} backends; "
            f"throughput <b>{m['throughput_per_s']:.4g} inputs/s</b>; latency p50 {m['latency_p50_s'] * f:.4g} {unit}; "
            f"{m['n_launches']:.0f} launches; {m['bytes_copied'] / 2**20:.3g} MiB copied; utilisation {util}"
            + (f"; {len(p.fallback_ops)} ops on the fallback" if p.fallback_ops else "")
        )
        cmap = color_map(v.system.device_names)
        rows = "".join(
            f"<tr><td>{html.escape(gname)}</td><td style='color:{cmap.get(p.group_backend[gname], '#000')}'>"
            f"{html.escape(p.group_backend[gname])}</td><td>{len(ops)}</td><td>{html.escape(', '.join(ops[:4]))}"
            f"{' …' if len(ops) > 4 else ''}</td></tr>"
            for gname, ops in list(p.groups.items())[:40]
        )
        more = f"<div>… and {len(p.groups) - 40} more groups (download the table)</div>" if len(p.groups) > 40 else ""
        self.groups_html.value = (
            "<table class='hetsched-groups'><tr><th>group</th><th>backend</th><th>ops</th><th>first ops</th></tr>"
            + rows + "</table>" + more
        )

    def render(self, v: BackendView) -> None:
        self.show_figure("graph", self._graph_fig(v))
        self.show_figure("gantt", self._gantt_fig(v))
        self._render_text(v)

    def download_items(self, v: BackendView):
        p = v.partition
        groups = pd.DataFrame([{"group": g, "backend": p.group_backend[g], "n_ops": len(ops), "ops": " ".join(ops)}
                               for g, ops in p.groups.items()])
        return [(hs.timeline.to_chrome_trace(v.buffered.timeline), "partition_trace.json"),
                (v.buffered.timeline, "partition_timeline.csv"), (groups, "partition_groups.csv"),
                (pt.support_table_frame(v.system), "support_table.csv"), (p.steps_frame(), "partition_steps.csv")]
