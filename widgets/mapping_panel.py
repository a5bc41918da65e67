"""MappingPanel (seed 000): walk the compute-first -> locality -> remap decision log step by step.

The panel runs :func:`hetsched.mapping.h2h` (the patent ``../shared/seeds/000_023dd0683ad424ca.txt``;
H2H, Zhang et al., DAC 2022) with the chosen objective, occupancy threshold, locality policy and
remap direction. A step slider with prev/next buttons walks ``result.steps``: each step is told in
words (layer, from -> to, objective before/after, accepted or why not), the layer is highlighted in
the graph view (coloured by the device of each op after that step), and the Gantt shows the state
after that step (:func:`hetsched.mapping.evaluate_state`, which replays ``result.steps``). A bar
chart compares the final mapping with compute-first, HEFT, CPOP, PEFT and the fastest single device
(:func:`hetsched.mapping.compare`; computed once per graph and system).

>>> from hetsched.io.generators import fork_join
>>> p = MappingPanel(graph=fork_join(3, 2, seed=0))
>>> p.state.step == p.result.n_steps          # starts at the final mapping
True
>>> p.state.step = 1; "map" in p.step_text.value
True
>>> p.state.occupancy_threshold = 1.5; "occupancy" in p.message.value
True
"""

from __future__ import annotations

import html
from collections import OrderedDict
from typing import Any

import ipywidgets as W
import pandas as pd
import traitlets

import hetsched as hs
import hetsched.mapping as mp
from hetsched.errors import HetschedError
from hetsched.plot import color_map, compare, gantt, graph_view, time_unit

from .base import Panel, Session, StepWalker

__all__ = ["MappingPanel", "MappingState", "describe_step"]

BASELINES = ["compute_first", "heft", "cpop", "peft", "fastest_single_device"]
_METRICS = ["total_latency_s", "makespan_s", "energy_J", "bytes_moved"]


class MappingState(traitlets.HasTraits):
    objective = traitlets.Enum(list(mp.OBJECTIVES), default_value="total_latency")
    occupancy_threshold = traitlets.Float(0.9)
    policy = traitlets.Enum(list(mp.LOCALITY_POLICIES), default_value="greedy")
    direction = traitlets.Enum(["successor", "both"], default_value="successor")
    max_passes = traitlets.Int(1)  # 1: the patent's one walk (claim 7, the default); 0: repeat until stable
    step = traitlets.Int(0)  # view: 0 = before the first decision, k = after step k-1
    metric = traitlets.Enum(_METRICS, default_value="total_latency_s")  # view


def _fmt_s(x: float | None) -> str:
    if x is None:
        return "–"
    u, f = time_unit(x)
    return f"{x * f:.4g} {u}"


def describe_step(step: hs.results.Step) -> str:
    """One decision of the mapping log in plain words (HTML).

    >>> from hetsched.results import Step
    >>> s = Step(index=3, action="remap", subject="conv1", before=2e-3, after=1e-3, accepted=True,
    ...          reason="total latency drops", data={"phase": "remap", "source": "gpu0", "target": "fpga0"})
    >>> "gpu0 → fpga0" in describe_step(s)
    True
    """
    d = step.data or {}
    phase = d.get("phase", "")
    subject = html.escape(str(step.subject))
    if step.action == "map":
        what = f"map layer <b>{subject}</b> to <b>{html.escape(str(d.get('device', '?')))}</b>"
    elif step.action == "remap":
        what = (f"try moving layer <b>{subject}</b>: {html.escape(str(d.get('source', '?')))} → "
                f"{html.escape(str(d.get('target', '?')))}")
    elif step.action == "keep_weights":
        what = f"keep the weights of <b>{subject}</b> on {html.escape(str(d.get('device', '?')))}"
    elif step.action == "keep_tensor":
        what = f"keep tensor <b>{subject}</b> on-chip ({html.escape(str(d.get('device', '?')))})"
    else:
        what = f"{html.escape(step.action)} <b>{subject}</b>"
    obj = ""
    if step.before is not None or step.after is not None:
        obj = f"; objective {_fmt_s(step.before)} → {_fmt_s(step.after)}"
    verdict = ("<span style='color:#1B5E20'>accepted</span>" if step.accepted
               else "<span style='color:#B00020'>rejected</span>")
    return (f"<b>step {step.index + 1}</b> <i>({html.escape(phase)})</i>: {what}{obj} — {verdict}: "
            f"{html.escape(step.reason)}")


class MappingPanel(Panel):
    """The seed-000 mapper on the session's graph and system, one decision at a time.

    Parameters
    ----------
    session : Session, optional
        Graph and system (default graph: a small ResNet-like graph; default system: the toy system).
    graph, system : optional
        Fix the panel to these instead of following the session.
    """

    VIEW_TRAITS = ("step", "metric")

    def __init__(self, session: Session | None = None, *, graph=None, system=None, **kw: Any) -> None:
        state = MappingState()
        style = {"description_width": "initial"}
        objective = W.ToggleButtons(options=list(mp.OBJECTIVES), description="objective", style=style)
        # a plain text box: a value outside 0..1 reaches the core check and shows its message
        thr = W.FloatText(step=0.05, description="occupancy threshold (0-1)", style=style, layout=W.Layout(width="260px"))
        policy = W.Dropdown(options=list(mp.LOCALITY_POLICIES), description="locality policy", style=style)
        direction = W.ToggleButtons(options=["successor", "both"], description="remap direction", style=style)
        passes = W.BoundedIntText(min=0, max=100, description="remap passes (0: until stable)", style=style,
                                  layout=W.Layout(width="260px"))
        metric = W.Dropdown(options=_METRICS, description="compare by")
        for ctl, name in ((objective, "objective"), (thr, "occupancy_threshold"), (policy, "policy"), (direction, "direction"),
                          (passes, "max_passes"), (metric, "metric")):
            W.link((state, name), (ctl, "value"))
        self.walker = StepWalker(state, "step", description="step")
        self.phase_buttons = W.ToggleButtons(options=[], description="jump to", style=style)
        self.phase_buttons.observe(self._on_phase, names="value")
        self.step_text = W.HTML(layout=W.Layout(min_height="2.6em"))
        self.summary = W.HTML()
        self.controls = W.VBox([W.HBox([objective, direction]), W.HBox([thr, policy, passes])])
        self.control_widgets = {"objective": objective, "occupancy_threshold": thr, "policy": policy,
                                "direction": direction, "max_passes": passes, "metric": metric}
        self._fixed_graph, self._fixed_system = graph, system
        self._base_key = None
        self.baselines: pd.DataFrame | None = None
        self._evals: OrderedDict = OrderedDict()  # (id(result), k) -> Evaluation, a small LRU
        super().__init__(state, session=session, follow_session=graph is None and system is None,
                         autostart=False, **kw)
        self.children = [self.controls, self.status, self.summary, self.walker, self.phase_buttons,
                         self.step_text, self.figure_view("graph"), self.figure_view("gantt"), metric,
                         self.figure_view("compare"), self.download_area]
        self._start()

    # -- inputs ------------------------------------------------------------------
    @property
    def graph(self) -> hs.OpGraph:
        from hetsched.io.generators import resnet_like

        return self._session_graph(lambda: resnet_like(blocks_per_stage=1))

    @property
    def system(self) -> hs.System:
        return self._session_system()

    # -- Panel -------------------------------------------------------------------
    def compute(self) -> mp.MappingResult:
        st = self.state
        g, s = self.graph, self.system
        r = mp.h2h(g, s, occupancy_threshold=st.occupancy_threshold, policy=st.policy, objective=st.objective,
                   direction=st.direction, max_passes=st.max_passes or None)
        key = (id(g), g.n_ops, id(s))
        if key != self._base_key:
            self.baselines = mp.compare(g, s, BASELINES)
            self._base_key = key
        return r

    def on_result(self, r: mp.MappingResult) -> None:
        self._evals.clear()
        self.walker.set_count(r.n_steps)
        bounds = r.phase_bounds()
        self._phase_start = {ph: a + 1 for ph, (a, _b) in bounds.items()}
        # view traits set here do not redraw on their own (Panel.on_result)
        self.phase_buttons.options = [("start", "start")] + [(ph, ph) for ph in bounds] + [("final", "final")]
        self.phase_buttons.value = None
        self.state.step = r.n_steps  # the final mapping first; walk back from there

    def _on_phase(self, change) -> None:
        ph = change["new"]
        if ph is None or self.result is None:
            return
        self.state.step = 0 if ph == "start" else (self.result.n_steps if ph == "final" else self._phase_start[ph])

    def evaluation(self, k: int | None = None):
        """The evaluation of the state after the first ``k`` steps (``None`` before any op is mapped)."""
        r = self.result
        k = self.state.step if k is None else k
        key = (id(r), k)
        if key not in self._evals:
            self._evals[key] = mp.evaluate_state(r, k - 1)
            while len(self._evals) > 32:
                self._evals.popitem(last=False)
        return self._evals[key]

    def current_step(self):
        k = self.state.step
        return self.result.steps[k - 1] if k >= 1 else None

    def _highlight(self, step) -> list[str]:
        if step is None:
            return []
        g = self.result.graph
        if step.subject in g.ops:
            return [step.subject]
        if step.subject in g.tensors:
            t = g.tensor(step.subject)
            return [o for o in ([t.producer] if t.producer else []) + list(t.consumers)]
        return []

    def _colors(self) -> dict[str, str]:
        return color_map(self.result.system.device_names)

    def _graph_fig(self, r):
        k = self.state.step
        state = r.replay(k - 1)
        step = self.current_step()
        return graph_view(r.graph, color_by=dict(state["device"]), colors=self._colors(),
                          highlight=self._highlight(step),
                          title=f"{r.graph.name}: device of each op after step {k} of {r.n_steps}", height=380)

    def _gantt_fig(self, r):
        ev = self.evaluation()
        step = self.current_step()
        if ev is None:
            from hetsched.timeline import make_timeline

            fig = gantt(make_timeline([]), title="before the first decision: nothing mapped yet")
            return fig
        m = ev.metrics
        return gantt(ev.timeline, color_by="device", colors=self._colors(), highlight=self._highlight(step),
                     title=f"state after step {self.state.step}: makespan {_fmt_s(m['makespan_s'])}, "
                           f"total latency {_fmt_s(m['total_latency_s'])}")

    def _compare_fig(self, r):
        rows = self.baselines.to_dict("records")
        m = r.metrics
        rows.append({"method": "h2h (this panel)", **{k: m.get(k) for k in _METRICS}})
        frame = pd.DataFrame(rows)
        metric = self.state.metric
        return compare(frame, metric, by="method", highlight="h2h (this panel)",
                       title=f"{metric}: h2h vs compute-first, HEFT, CPOP, PEFT, single device (lower is better)")

    def render(self, r: mp.MappingResult) -> None:
        k = self.state.step
        if not 0 <= k <= r.n_steps:
            raise HetschedError(f"step {k} is outside 0..{r.n_steps}", field="step")
        step = self.current_step()
        self.step_text.value = (describe_step(step) if step is not None else
                                f"<b>step 0</b>: nothing mapped yet; {r.n_steps} decisions follow "
                                f"({', '.join(f'{p}: {b - a + 1}' for p, (a, b) in r.phase_bounds().items())})")
        self.show_figure("graph", self._graph_fig(r))
        self.show_figure("gantt", self._gantt_fig(r))
        ckey = (id(r), id(self.baselines), self.state.metric)
        if ckey != getattr(self, "_compare_key", None):  # a step move leaves the comparison as it is
            self.show_figure("compare", self._compare_fig(r))
            self._compare_key = ckey
        m = r.metrics
        obj = r.params["objective"]
        cf = m.get(f"compute_first_{obj}_s")
        n_acc = sum(1 for s in r.steps if s.accepted and s.data.get("phase") == "remap")
        n_rm = sum(1 for s in r.steps if s.data.get("phase") == "remap")
        self.summary.value = (
            f"<b>{html.escape(r.graph.name)}</b> on {', '.join(r.system.device_names)}: final {obj.replace('_', ' ')} "
            f"<b>{_fmt_s(m[f'{obj}_s'])}</b> (compute-first {_fmt_s(cf)}); makespan {_fmt_s(m['makespan_s'])}; "
            f"{n_acc} of {n_rm} remap moves accepted; {r.n_steps} steps"
        )

    def download_items(self, r):
        return [(hs.timeline.to_chrome_trace(r.timeline), "mapping_trace.json"), (r.timeline, "mapping_timeline.csv"),
                (r.steps_frame(), "mapping_steps.csv"),
                (pd.DataFrame({"op": list(r.placement.device), "device": list(r.placement.device.values())}),
                 "mapping_placement.csv"),
                (self.baselines, "mapping_comparison.csv")]
