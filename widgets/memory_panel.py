"""MemoryPanel (seed 002): operator orders and their memory curves, the peak, the fine-tune moves.

The panel calls :func:`hetsched.memory.optimize_order` (the patent
``../shared/seeds/002_1bc531f15903fea6.txt``: an ILP under the user's time limit, else a
tensor-lifetime-aware BFS and a memory-aware DFS, the lower one fine-tuned at the peak step; plus
the exact DP of Serenity, MLSys 2020, and the PyTorch Inductor / XLA orders as baselines). It
overlays the memory curves of several orders with the lower bound
(:func:`hetsched.memory.lower_bound`), lists the tensors live at the peak step
(:func:`hetsched.memory.lifetimes`), and a step slider walks the method's moves (``result.steps``:
the candidates S3 compares, then the fine-tune moves of S4), redrawing the curve of the order
after each move (``result.replay(k)["order"]``).

>>> from hetsched.io.generators import randwire_ws
>>> p = MemoryPanel(graph=randwire_ws(20, seed=0))
>>> p.state.method
'patent-heuristic'
>>> p.result.peak_bytes >= p.result.lower_bound_bytes
True
>>> p.state.time_limit_s = -1; "time limit" in p.message.value
True
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as W
import pandas as pd
import plotly.graph_objects as go
import traitlets

import hetsched as hs
import hetsched.memory as mem
from hetsched.errors import HetschedError
from hetsched.plot import bytes_unit, memory_curve

from .base import Panel, Session, StepWalker

__all__ = ["MemoryPanel", "MemoryState"]

_METHODS = list(mem.STRATEGIES)
_DEFAULT_OVERLAY = ("kahn", "bfs", "dfs")


class MemoryState(traitlets.HasTraits):
    method = traitlets.Enum(_METHODS, default_value="patent-heuristic")
    time_limit_s = traitlets.Float(2.0)
    overlay = traitlets.Tuple(default_value=_DEFAULT_OVERLAY)  # other orders drawn for comparison
    step = traitlets.Int(0)  # view: moves applied (0 = the method's first order)
    top = traitlets.Int(20)  # view: tensors listed at the peak


class MemoryPanel(Panel):
    """Seed 002 on the session's graph.

    Parameters
    ----------
    session : Session, optional
    graph : OpGraph, optional
        Fix the panel to this graph instead of following the session.
    """

    VIEW_TRAITS = ("step", "top")

    def __init__(self, session: Session | None = None, *, graph=None, **kw: Any) -> None:
        state = MemoryState()
        style = {"description_width": "initial"}
        method = W.Dropdown(options=_METHODS, description="method", style=style)
        limit = W.FloatText(description="ILP time limit (s)", style=style, layout=W.Layout(width="200px"))
        overlay = W.SelectMultiple(options=[m for m in _METHODS if m not in ("auto", "ilp", "exact")],
                                   description="overlay orders", style=style, rows=5)
        for ctl, name in ((method, "method"), (limit, "time_limit_s"), (overlay, "overlay")):
            W.link((state, name), (ctl, "value"))
        self.method_help = W.HTML()
        self.walker = StepWalker(state, "step", description="move")
        self.step_text = W.HTML()
        self.summary = W.HTML()
        self.controls = W.HBox([W.VBox([method, limit, self.method_help]), overlay])
        self.control_widgets = {"method": method, "time_limit_s": limit, "overlay": overlay}
        self._fixed_graph = graph
        self._overlay_cache: dict[tuple, mem.OrderResult] = {}
        super().__init__(state, session=session, follow_session=graph is None, autostart=False, **kw)
        self.children = [self.controls, self.status, self.summary, self.walker, self.step_text,
                         self.figure_view("curves"), self.figure_view("live"), self.download_area]
        self._start()

    @property
    def graph(self) -> hs.OpGraph:
        from hetsched.io.generators import randwire_ws

        return self._session_graph(lambda: randwire_ws(20, seed=0))

    # -- Panel -------------------------------------------------------------------
    def compute(self) -> mem.OrderResult:
        st = self.state
        if not st.time_limit_s > 0:
            raise HetschedError(f"the ILP time limit must be positive (seconds), got {st.time_limit_s}",
                                field="time_limit_s")
        return mem.optimize_order(self.graph, method=st.method, time_limit_s=st.time_limit_s)

    def on_result(self, r: mem.OrderResult) -> None:
        self.walker.set_count(r.n_steps)
        self.method_help.value = f"<i>{html.escape(mem.STRATEGIES.get(self.state.method, ''))}</i>"
        # view traits set here do not redraw on their own (Panel.on_result)
        self.state.step = r.n_steps

    def overlays(self) -> dict[str, mem.OrderResult]:
        """The overlay orders' results (cached per graph)."""
        g = self.graph
        out = {}
        for m in self.state.overlay:
            key = (id(g), g.n_ops, m)
            if key not in self._overlay_cache:
                self._overlay_cache[key] = mem.optimize_order(g, method=m, time_limit_s=self.state.time_limit_s)
            out[m] = self._overlay_cache[key]
        return out

    def order_at(self, k: int | None = None) -> tuple[str, ...]:
        """The order after the first ``k`` moves (``k = 0``: before any move: the graph's order)."""
        r = self.result
        k = self.state.step if k is None else k
        if k >= r.n_steps:
            return tuple(r.order)
        st = r.replay(k - 1)
        order = st.get("order")
        return tuple(order) if order else tuple(self.graph.topological_order())

    def _curves_fig(self, r: mem.OrderResult):
        g = self.graph
        k = self.state.step
        frames = []
        for m, res in self.overlays().items():
            c = res.curve[["step", "bytes"]].copy()
            c["order"] = f"{m} (peak {_b(res.peak_bytes)})"
            frames.append(c)
        order = self.order_at(k)
        cur = mem.memory_curve(g, order)
        peak = int(cur["bytes"].max()) if len(cur) else 0
        label = r.method if k >= r.n_steps else f"{r.method} after {k} of {r.n_steps} moves"
        c = cur[["step", "bytes"]].copy()
        c["order"] = f"{label} (peak {_b(peak)})"
        frames.append(c)
        frame = pd.concat(frames, ignore_index=True)
        fig = memory_curve(frame, x="step", by="order", lower_bound=r.lower_bound_bytes,
                           title=f"{g.name}: live memory per step of each order")
        # the panel's own order drawn thicker, its peak step marked
        for t in fig.data:
            if t.name == c["order"].iat[0]:
                t.line.width = 4
        if len(cur):
            pstep = int(cur["bytes"].to_numpy().argmax())
            unit, f = bytes_unit(max(peak, r.lower_bound_bytes))
            fig.add_trace(go.Scatter(x=[pstep], y=[peak * f], mode="markers", marker=dict(size=12, symbol="x", color="#D00000"),
                                     name="peak", hovertext=[f"peak {_b(peak)} at step {pstep} ({order[pstep]})"],
                                     hoverinfo="text"))
        fig.update_layout(height=380)
        return fig

    def live_at_peak(self, order: tuple[str, ...] | None = None) -> pd.DataFrame:
        """Tensors live at the peak step of ``order``: ``tensor, bytes, alloc_step, free_step`` (largest first)."""
        g = self.graph
        order = self.order_at() if order is None else order
        cur = mem.memory_curve(g, order)
        if not len(cur):
            return pd.DataFrame(columns=["tensor", "bytes", "alloc_step", "free_step"])
        pstep = int(cur["bytes"].to_numpy().argmax())
        lt = mem.lifetimes(g, order)
        live = lt[(lt["alloc_step"] <= pstep) & (lt["free_step"] >= pstep)]
        return live.sort_values(["bytes", "tensor"], ascending=[False, True], kind="stable").reset_index(drop=True)

    def _live_fig(self, r: mem.OrderResult):
        live = self.live_at_peak()
        top = live.head(max(1, self.state.top))
        unit, f = bytes_unit(float(top["bytes"].max()) if len(top) else 0)
        fig = go.Figure(go.Bar(
            x=(top["bytes"].astype(float) * f).tolist(), y=top["tensor"].astype(str).tolist(), orientation="h",
            marker_color="#0072B2",
            hovertext=[f"{t}: {_b(b)}, live steps {a}–{e}" for t, b, a, e in
                       zip(top["tensor"], top["bytes"], top["alloc_step"], top["free_step"])],
            hoverinfo="text"))
        fig.update_layout(title=f"tensors live at the peak ({len(live)} tensors, {_b(int(live['bytes'].sum()))}; "
                                f"largest {len(top)} shown)",
                          xaxis_title=f"size ({unit})", yaxis=dict(autorange="reversed", type="category"),
                          template="plotly_white", height=max(260, 60 + 18 * len(top)),
                          margin=dict(l=10, r=10, t=40, b=40))
        return fig

    def _render_text(self, r: mem.OrderResult) -> None:
        self.summary.value = (
            f"<b>{html.escape(self.graph.name)}</b> ({self.graph.n_ops} ops): <b>{html.escape(r.method)}</b> peak "
            f"<b>{_b(r.peak_bytes)}</b>, lower bound {_b(r.lower_bound_bytes)} (gap {r.gap:.1%}); status {r.status}"
            f"{f', solver {html.escape(r.solver)}' if r.solver else ''}; {r.runtime_s * 1e3:.3g} ms. "
            f"<i>{html.escape(r.why)}</i>"
        )
        k = self.state.step
        if r.n_steps == 0:
            self.step_text.value = "this method makes no moves to step through (its order is final at once)"
        elif k == 0:
            self.step_text.value = f"<b>move 0</b>: before any move; {r.n_steps} follow"
        else:
            s = r.steps[k - 1]
            verdict = ("<span style='color:#1B5E20'>kept</span>" if s.accepted
                       else "<span style='color:#B00020'>not kept</span>")
            ba = (f"; peak {_b(s.before)} → {_b(s.after)}" if s.before is not None and s.after is not None else "")
            self.step_text.value = (f"<b>move {k} of {r.n_steps}</b> ({html.escape(s.action)} "
                                    f"<code>{html.escape(str(s.subject))}</code>){ba} — {verdict}: {html.escape(s.reason)}")

    def render(self, r: mem.OrderResult) -> None:
        self.show_figure("curves", self._curves_fig(r))
        self.show_figure("live", self._live_fig(r))
        self._render_text(r)

    def download_items(self, r: mem.OrderResult):
        return [(pd.DataFrame({"step": range(len(r.order)), "op": list(r.order)}), "memory_order.csv"),
                (r.curve, "memory_curve.csv"), (self.live_at_peak(tuple(r.order)), "memory_live_at_peak.csv"),
                (r.steps_frame(), "memory_moves.csv"), (hs.timeline.to_chrome_trace(r.timeline), "memory_trace.json")]


def _b(x: float | None) -> str:
    if x is None:
        return "–"
    u, f = bytes_unit(x)
    return f"{x * f:.3g} {u}"
