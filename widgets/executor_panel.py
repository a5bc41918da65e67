"""ExecutorPanel (seed 004): stream and thread policies, pool size and host costs -> one Gantt.

Host-thread lanes (launch, compute, blocked, idle) sit above the device's stream lanes (kernels,
copies, stream waits) in one Gantt, so a sync wait on the host lines up with the kernel it waits
for. Below it, the policy comparison of :func:`hetsched.executor.compare_policies` (serial,
multi-stream one thread, the patent, TF inline, Nimble streams + patent, the lower bound) with the
current policy highlighted. The panel calls :func:`hetsched.executor.simulate`; it holds no
scheduling logic (the patent: ``../shared/seeds/004_a60aed1db7e14913.txt``).

>>> p = ExecutorPanel()
>>> p.state.streams, p.state.threads
('patent', 'patent')
>>> before = p.result.makespan_s
>>> p.state.threads = "single"
>>> p.result.makespan_s > before          # the patent overlaps blocking host work
True
>>> p.state.pool_size = 0; "pool_size" in p.message.value, p.result.params["threads"]
(True, 'single')
"""

from __future__ import annotations

import dataclasses
import html
from typing import Any

import ipywidgets as W
import pandas as pd
import traitlets

import hetsched.executor as ex
from hetsched.errors import HetschedError
from hetsched.plot import compare, time_unit
from hetsched.plot.executor import executor_gantt, ordering_bars

from .base import Panel, Session, controls_from_spec, state_from_spec

__all__ = ["ExecutorPanel", "executor_state"]

_COST_FIELDS = ("dispatch_s", "launch_s", "wakeup_s", "max_kernels", "pcie_Bps")
_SCALE = {"dispatch_s": (1e6, "us"), "launch_s": (1e6, "us"), "wakeup_s": (1e6, "us"), "pcie_Bps": (1e-9, "GB/s")}
_METRICS = ["makespan_s", "host_blocked_s", "device_busy_frac", "gap_to_lb", "n_events", "n_handoffs"]


def _n(x: float, word: str) -> str:
    return f"{x:.0f} {word}{'' if x == 1 else 's'}"


def executor_state() -> traitlets.HasTraits:
    """The panel's inputs: :data:`hetsched.executor.PARAMETERS` plus the cost preset and view choices."""
    return state_from_spec(
        ex.PARAMETERS,
        "ExecutorState",
        preset=traitlets.Enum(list(ex.PRESETS), default_value="cuda"),
        metric=traitlets.Enum(_METRICS, default_value="makespan_s"),
        color_by=traitlets.Enum(["kind", "device", "op"], default_value="kind"),
    )


class ExecutorPanel(Panel):
    """Simulate the session's graph on an executor; compare the policies.

    Parameters
    ----------
    session : Session, optional
        The graph comes from ``session.graph`` (default: the executor's D2H-branch example,
        where the patent's thread rules matter). The executor prices work on its own CPU + GPU
        system (:func:`hetsched.executor.executor_system`), so the session's system is not used.

    Notes
    -----
    The comparison depends only on the graph and the costs, so it is cached: switching the
    stream or thread policy re-simulates one run (and reuses the comparison's run when the pair
    is one of :data:`hetsched.executor.POLICIES`).
    """

    VIEW_TRAITS = ("metric", "color_by")

    def __init__(self, session: Session | None = None, *, graph=None, **kw: Any) -> None:
        state = executor_state()
        ctl = controls_from_spec(state, ex.PARAMETERS, scale=_SCALE)
        preset = W.ToggleButtons(options=list(ex.PRESETS), description="cost preset", style={"description_width": "initial"})
        W.link((state, "preset"), (preset, "value"))
        metric = W.Dropdown(options=_METRICS, description="compare by")
        W.link((state, "metric"), (metric, "value"))
        color = W.ToggleButtons(options=["kind", "device", "op"], description="colour by")
        W.link((state, "color_by"), (color, "value"))
        self.controls = W.VBox([
            W.HBox([ctl["streams"], ctl["threads"], ctl["pool_size"], ctl["max_streams"]]),
            preset,
            W.HBox([ctl[k] for k in _COST_FIELDS]),
        ])
        self.control_widgets = {**ctl, "preset": preset, "metric": metric, "color_by": color}
        self.summary = W.HTML()
        self.summary.add_class("hetsched-summary")
        self._default_graph = graph
        self._cmp_key = None
        self._cmp = None
        super().__init__(state, session=session, follow_session=graph is None, autostart=False, **kw)
        state.observe(self._on_preset, names="preset")
        self.children = [self.controls, self.status, self.summary,
                         self.figure_view("gantt"), W.HBox([metric, color]),
                         W.GridBox([self.figure_view("compare"), self.figure_view("ordering")],
                                   layout=W.Layout(grid_template_columns="minmax(0, 2fr) minmax(0, 1fr)", width="100%")),
                         self.download_area]
        self._start()

    # -- inputs --------------------------------------------------------------------
    @property
    def graph(self):
        if self._default_graph is not None:
            return self._default_graph
        return self.session.graph if self.session.graph is not None else ex.graphs.d2h_branch_graph()

    def _on_change(self, change) -> None:
        if change["name"] != "preset":  # the preset acts through the cost fields it sets
            super()._on_change(change)

    def _on_preset(self, change) -> None:
        # a preset sets every cost field at once; one recompute at the end
        c = ex.PRESETS[change["new"]]
        with self.hold():
            for k in _COST_FIELDS:
                setattr(self.state, k, type(getattr(self.state, k))(getattr(c, k)))

    def _costs(self) -> ex.ExecCosts:
        base = ex.PRESETS[self.state.preset]
        return dataclasses.replace(base, name=base.name, **{k: getattr(self.state, k) for k in _COST_FIELDS})

    # -- Panel -----------------------------------------------------------------------
    def compute(self) -> ex.ExecutorResult:
        st = self.state
        if st.pool_size < 1:
            raise HetschedError(f"pool_size must be at least 1 thread, got {st.pool_size}", field="pool_size")
        g = self.graph
        costs = self._costs()
        max_streams = st.max_streams or None
        key = (id(g), g.n_ops, dataclasses.astuple(costs), st.pool_size, max_streams)
        if key != self._cmp_key:
            self._cmp = ex.compare_policies(g, costs=costs, pool_size=st.pool_size, max_streams=max_streams)
            self._cmp_key = key
        for label, pair in ex.POLICIES.items():
            if pair == (st.streams, st.threads):
                return self._cmp.results[label]
        return ex.simulate(g, streams=st.streams, threads=st.threads, costs=costs, pool_size=st.pool_size,
                           max_streams=max_streams)

    @property
    def comparison(self):
        """The cached :class:`~hetsched.executor.PolicyComparison` of the current graph and costs."""
        return self._cmp

    def current_policy(self) -> str | None:
        """The comparison label of the current (streams, threads) pair, if it is one."""
        pair = (self.state.streams, self.state.threads)
        return next((k for k, v in ex.POLICIES.items() if v == pair), None)

    def _gantt(self, r):
        return executor_gantt(r, color_by=self.state.color_by,
                              title=f"{r.params.get('streams')} streams, {r.params.get('threads')} threads "
                                    f"({_n(r.metrics['n_threads'], 'host thread')}, {_n(r.metrics['n_streams'], 'stream')})")

    def _compare_fig(self, r):
        frame = self._cmp.frame.copy()
        label = self.current_policy()
        if label is None:  # a pair outside the table: add it as its own bar
            m = r.metrics
            row = {"policy": f"{self.state.streams} + {self.state.threads}", "streams": self.state.streams,
                   "threads": self.state.threads, **{k: m.get(k) for k in frame.columns if k in m}}
            frame = pd.concat([frame, pd.DataFrame([row])], ignore_index=True)
            label = row["policy"]
        metric = self.state.metric
        fig = compare(frame, metric, by="policy", highlight=label,
                      title=f"{metric} by executor policy (current: {label})")
        return fig.update_layout(width=640)

    def render(self, r: ex.ExecutorResult) -> None:
        self.show_figure("gantt", self._gantt(r))
        self.show_figure("compare", self._compare_fig(r))
        self.show_figure("ordering", ordering_bars(r))
        m = r.metrics
        unit, f = time_unit(m["makespan_s"])
        races = int(m.get("n_unordered_edges", 0))
        self.summary.value = (
            f"<b>{html.escape(self.graph.name)}</b>: makespan <b>{m['makespan_s'] * f:.4g} {unit}</b> "
            f"(lower bound {m['lb_s'] * f:.4g} {unit}, gap {m['gap_to_lb']:.1%}); device busy {m['device_busy_frac']:.0%}; "
            f"host blocked {m['host_blocked_s'] * f:.4g} {unit}; {m['n_events']:.0f} events, "
            f"{m['n_stream_waits']:.0f} stream waits, {m['n_host_syncs']:.0f} host syncs, {m['n_handoffs']:.0f} hand-offs"
            + (f"; <span style='color:#B00020'>{races} unordered edges (races)</span>" if races else "")
        )

    def download_items(self, r):
        return [(ex.executor_trace(r), "executor_trace.json"), (r.timeline, "executor_timeline.csv"),
                (self._cmp.frame, "executor_policies.csv"), (r.steps_frame(), "executor_dispatch_steps.csv")]
