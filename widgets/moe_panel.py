"""ExpertsPanel: a mixture of experts' experts over devices, the mapping patent's question (issue 28).

A MoE layer's experts are independent blocks of work whose weights must live somewhere: which
device holds which expert is exactly what the compute-first mapping patent (and H2H, HEFT, PEFT)
decides for layers. The panel splits each MoE layer of the graph (:func:`hetsched.moe.moe_layers`)
into one op per expert with its expected share of the routed tokens (uniform, or Zipf-like with
the routing skew of :data:`hetsched.moe.PARAMS`), runs the chosen mapper on it
(:func:`hetsched.moe.place_experts`) and shows

* the layer x expert grid coloured by device (:func:`hetsched.moe.expert_assignment`,
  :func:`hetsched.plot.moe.expert_grid`), at any decision of the mapper's log: the experts placed
  so far coloured, the one the decision is about ringed;
* the mapper's decisions, walked with the house's :class:`~hetsched.widgets.walker.DecisionWalker`
  over ``result.steps`` as they are, plus jumps to the previous/next decision about an expert;
* the final mapping's Gantt chart (the expert of the decision on screen marked);
* a table of every mapper on the same split: makespan, total busy time of all devices, how the experts spread.

A graph without MoE layers (or nothing loaded) shows the tab's own scenario: a small Mixtral
(:func:`hetsched.io.torch_models.mixtral_mini`, bundled) on two A100s and two V100s.

>>> p = ExpertsPanel()
>>> p.graph.name, sorted(set(p.assignment.device))
('mixtral_mini_moe', ['gpu0', 'gpu1', 'gpu4', 'gpu5'])
>>> p.state.step == p.result.n_steps           # starts at the final placement
True
>>> p.jump_expert(-1) and "expert" in p.step_text.value
True
"""

from __future__ import annotations

import html
from typing import Any

import ipywidgets as W
import pandas as pd
import traitlets

import hetsched as hs
from hetsched.cost import cost_key
from hetsched.errors import HetschedError
from hetsched.io.tables import csv_safe
from hetsched.moe import PARAMS, expert_assignment, moe_layers, place_experts
from hetsched.plot import color_map, format_value
from hetsched.plot.mapping import GANTT_WEBGL_BARS, METHOD_LABELS, mapping_gantt
from hetsched.plot.moe import expert_grid

from .base import Panel, Session, link_clamped, small_terms, state_from_spec, term
from .mapping_panel import decided_by, stage_of
from .walker import DecisionWalker

__all__ = ["ExpertsPanel", "describe_expert_step"]

#: the phases of the patent's own mapper (their decisions cite its claims)
_H2H_PHASES = {"compute_first", "locality", "remap", "memory_repair"}


def _e(x: Any) -> str:
    return html.escape(str(x))


def _t(x: float | None) -> str:
    return format_value(x, "_s")


def _device_of(step: Any) -> str | None:
    """The device a decision is about: where it maps or keeps data, or where a remap tries to move."""
    d = step.data or {}
    return d.get("target") if step.action in ("remap", "remap_group") else d.get("device")


def _subject_words(graph: hs.OpGraph, name: str) -> str:
    op = graph.ops.get(name)
    a = op.attrs if op is not None else {}
    if a.get("moe") == "expert":
        return f"expert {a['expert']} of MoE layer {a['layer']} (share {a['share']:.1%} of the routed tokens)"
    return f"op {name}"


def describe_expert_step(step: Any, graph: hs.OpGraph, *, n_steps: int | None = None) -> str:
    """One decision of a mapper's log over an expert split, in plain words (HTML; names escaped).

    >>> from hetsched.results import Step
    >>> from hetsched.graph import OpGraph
    >>> g = OpGraph(); _ = g.add_op("moe0.expert3", "Expert", attrs={"moe": "expert", "expert": 3, "layer": 0, "share": 0.25})
    >>> s = Step(0, "map", "moe0.expert3", after=1e-3, reason="earliest finish on gpu1", data={"phase": "heft", "device": "gpu1"})
    >>> t = describe_expert_step(s, g); "expert 3 of MoE layer 0" in t and "<b>gpu1</b>" in t
    True
    """
    d = step.data or {}
    of = f" of {n_steps}" if n_steps is not None else ""
    who = _e(_subject_words(graph, step.subject))
    a = step.action
    if a == "map":
        what = f"place {who} on <b>{_e(d.get('device', '?'))}</b>"
    elif a in ("remap", "remap_group"):
        what = f"try moving {who} from {_e(d.get('source', '?'))} to <b>{_e(d.get('target', '?'))}</b>"
    elif a == "keep_weights":
        what = f"keep the weights of {who} in {_e(d.get('device', '?'))}'s memory"
    elif a == "keep_tensor":
        what = f"keep {_e(step.subject)} on-chip on {_e(d.get('device', '?'))}"
    else:
        what = f"{_e(a)} {who}"
    verdict = ("<span style='color:#1B5E20;font-weight:600'>✓ kept</span>" if step.accepted
               else "<span style='color:#B00020;font-weight:600'>✗ refused</span>")
    nums = ""
    if step.before is not None and step.after is not None:
        nums = f"{_t(step.before)} → {_t(step.after)}"
    elif step.after is not None:
        nums = _t(step.after)
    why, claim = decided_by(step) if str(d.get("phase", "")) in _H2H_PHASES else ("", "")
    return (f"<div><b>decision {step.index + 1}{of}</b> <i>({_e(stage_of(step))})</i>: {what}"
            + (f" ({_e(nums)})" if nums else "") + "</div>"
            + f"<div>{verdict}: {small_terms(_e(step.reason))}</div>"
            + (f"<div style='color:#444'>{_e(why)} {term(claim) if claim else ''}</div>" if why else ""))


class ExpertsPanel(Panel):
    """Expert placement of the session's MoE graph (or the tab's own Mixtral), one decision at a time.

    Parameters
    ----------
    session : Session, optional
        Graph and system to follow (a dashboard's); a graph without MoE layers leaves the tab on its
        own scenario.
    graph, system : optional
        Pin the panel to these instead.

    Attributes
    ----------
    walker : DecisionWalker
    assignment : DataFrame
        :func:`hetsched.moe.expert_assignment` of the result on screen.
    comparison : DataFrame or None
        Every mapper of :data:`hetsched.moe.PARAMS` on the same split: ``method, makespan_s,
        total_latency_s, n_devices`` (devices holding experts).
    step_text, summary, table : ipywidgets.HTML
    """

    TAB = "experts"
    MACHINE_BAR = True  # experts over devices: the machine is the question (issue 33)
    VIEW_TRAITS = ("step",)

    def __init__(self, session: Session | None = None, *, graph=None, system=None, **kw: Any) -> None:
        state = state_from_spec(PARAMS, "ExpertsState", step=traitlets.Int(0))
        style = {"description_width": "initial"}
        mp_ = PARAMS["method"]
        method = W.Dropdown(options=[(METHOD_LABELS.get(m, m), m) for m in mp_.options], description=mp_.words,
                            tooltip=mp_.help, style=style, layout=W.Layout(width="260px"))
        link_clamped(state, "method", method)
        sk = PARAMS["skew"]
        # a plain number box: a value outside the spec's range reaches check_inputs and is refused, never clamped
        skew = W.FloatText(step=sk.step, description=sk.words, tooltip=sk.help, style=style, layout=W.Layout(width="200px"))
        link_clamped(state, "skew", skew)
        self.control_widgets = {"method": method, "skew": skew}
        self.controls = W.HBox([method, skew], layout=W.Layout(flex_flow="row wrap", align_items="center"))
        self.walker = DecisionWalker(state, "step", description="decision", phase=stage_of, group=_device_of,
                                     group_label="device")
        self.prev_expert, self.next_expert = self.walker.add_jumps("expert", "decision about an expert", self.jump_expert)
        self.step_text = W.HTML(layout=W.Layout(min_height="3.5em"))
        self.summary = W.HTML()
        self.table = W.HTML()
        self._fixed_graph, self._fixed_system = graph, system
        self._moe: dict[int, tuple[Any, int, bool]] = {}  # id(graph) -> (graph, version, has MoE layers)
        self._experts: frozenset[str] = frozenset()
        self._cmp: tuple[Any, pd.DataFrame] | None = None
        self.assignment = pd.DataFrame()
        self.comparison: pd.DataFrame | None = None
        super().__init__(state, session=session, follow_session=graph is None and system is None, autostart=False, **kw)
        if self.uses_own_scenario():  # open on the scenario's settings (its notice describes them)
            sc = self.own_scenario()
            for name, value in (sc.settings if sc is not None else {}).items():
                if state.has_trait(name):
                    setattr(state, name, value)
            self._unchecked = {}
        head = lambda t: W.HTML(f"<h4 style='margin:0.7em 0 0.2em'>{t}</h4>")  # noqa: E731
        self.children = [self.machine_bar, self.controls, self.status, self.summary, self.figure_view("grid"),
                         head("The mapper's decisions, one at a time"), self.walker, self.step_text,
                         self.figure_view("gantt"), head("Every mapper on the same experts"), self.table,
                         self.download_area]
        self._start()

    # -- inputs ------------------------------------------------------------------
    def has_moe(self, g: Any) -> bool:
        """Whether ``g`` has MoE layers (cached per graph version)."""
        if g is None:
            return False
        hit = self._moe.get(id(g))
        if hit is None or hit[0] is not g or hit[1] != g.version:
            hit = self._moe[id(g)] = (g, g.version, bool(moe_layers(g)))
        return hit[2]

    def uses_own_scenario(self) -> bool:
        """Nothing pinned, and the session's graph is missing or has no MoE layer: the tab's own example."""
        if self._fixed_graph is not None or self.own_scenario() is None:
            return False
        return not self.has_moe(self.session.graph)

    @property
    def graph(self) -> hs.OpGraph:
        if self._fixed_graph is not None:
            return self._fixed_graph
        return self._own_inputs()[0] if self.uses_own_scenario() else self.session.graph

    @property
    def system(self) -> hs.System:
        # the machine the bar shows (issue 33): one picked in any tab, else this tab's own example's
        return self._session_system()

    def check_inputs(self) -> None:
        st = self.state
        self.check_params(PARAMS, {"method": st.method, "skew": st.skew})
        self._check_step(self.result.n_steps if self.result is not None else None)

    # -- Panel -------------------------------------------------------------------
    def compute(self):
        g, s = self.graph, self.system
        if not self.has_moe(g):
            raise HetschedError(f"graph {g.name!r} has no mixture-of-experts layer: nothing to place", field="graph")
        return place_experts(g, s, method=self.state.method, skew=self.state.skew, cost=self.cost)

    def on_result(self, r) -> None:
        self.assignment = expert_assignment(r)
        self._experts = frozenset(self.assignment["op"])
        self.walker.set_steps(r.steps)
        self.state.step = r.n_steps  # the final placement first; walk back from there

    def current_step(self):
        k = self.state.step
        return self.result.steps[k - 1] if k >= 1 else None

    def jump_expert(self, direction: int = +1) -> bool:
        """Go to the previous (-1) or next (+1) decision about an expert; returns whether the step moved."""
        if self.result is None:
            return False
        steps, k = self.result.steps, self.state.step
        rng = range(k, len(steps)) if direction > 0 else range(k - 2, -1, -1)
        target = next((i + 1 for i in rng if steps[i].subject in self._experts), None)
        if target is None:
            return False
        self.state.step = target
        return True

    # -- drawing -------------------------------------------------------------------
    def render(self, r) -> None:
        k = self.state.step
        step = self.current_step()
        devices = r.system.device_names
        colors = color_map(devices)
        tab = self.assignment
        layers = int(tab["layer"].nunique()) if len(tab) else 0
        n_exp = int(tab["expert"].nunique()) if len(tab) else 0
        label = METHOD_LABELS.get(r.method, r.method) if hasattr(r, "method") else METHOD_LABELS.get(self.state.method)
        label = label or self.state.method
        final = k >= r.n_steps
        placed = None if final else r.replay(k - 1)["device"]  # the state after decisions 0..k-1
        subject = step.subject if step is not None and step.subject in self._experts else None
        if final:
            gtitle = f"{label}: where each expert runs (the final placement)"
        elif k == 0:
            gtitle = "before the first decision: no expert placed yet"
        else:
            gtitle = f"after decision {k} of {r.n_steps}: the experts placed so far"
        self.show_figure("grid", expert_grid(tab, devices, colors=colors, placed=placed, highlight=subject, title=gtitle))
        if step is None:
            self.step_text.value = f"<b>before the first decision</b>: {r.n_steps} decisions follow."
        else:
            self.step_text.value = describe_expert_step(step, r.graph, n_steps=r.n_steps)
        m = r.metrics
        gt = (f"{label}'s placement: makespan {_t(m['makespan_s'])}, total busy time of all devices {_t(m['total_latency_s'])}"
              + (f" (ringed: the expert of decision {k})" if subject and not final else ""))
        self.show_figure("gantt", mapping_gantt(r.timeline, devices, colors=colors, highlight=[subject] if subject else [],
                                                title=gt, webgl=r.graph.n_ops > GANTT_WEBGL_BARS // 2))
        self._render_summary(r, label, layers, n_exp)

    def _render_summary(self, r, label: str, layers: int, n_exp: int) -> None:
        tab = self.assignment
        g = self.graph
        spread = tab.groupby("device").size().sort_values(ascending=False) if len(tab) else pd.Series(dtype=int)
        top = tab.sort_values("share", ascending=False).head(1)
        words = ", ".join(f"{_e(d)}: {n}" for d, n in spread.items())
        lead = ""
        if self.uses_own_scenario() and self.session.graph is not None:
            lead = (f"<div><i>The loaded graph <b>{_e(self.session.graph.name)}</b> has no mixture-of-experts layer, so "
                    "this tab shows its own example.</i></div>")
        k = moe_layers(g)[0].top_k if layers else None
        skew = self.state.skew
        share = (f"uniform routing: each expert gets 1/{n_exp} of the token-expert pairs" if skew == 0 else
                 f"routing skew {skew:g}: expert 0 gets {top['share'].iloc[0]:.0%} of a layer's token-expert pairs")
        self.summary.value = (
            lead + f"<b>{_e(g.name)}</b>: {layers} MoE layer(s) × {n_exp} experts"
            + (f", top-{k}" if k else "") + f"; {share}. <b>{_e(label)}</b> on {_e(r.system.name)} puts the "
            f"{len(tab)} experts on {len(spread)} device(s) ({words}): makespan <b>{_t(r.metrics['makespan_s'])}</b>.")

    def after_render(self, r) -> None:
        self._render_comparison(r)

    def compare_mappers(self) -> pd.DataFrame:
        """Every mapper of :data:`hetsched.moe.PARAMS` on this graph, system, skew and cost (computed once each)."""
        g, s = self.graph, self.system
        key = (g, g.version, s, self.state.skew, cost_key(self.cost))
        if self._cmp is not None and self._cmp[0] == key:
            return self._cmp[1]
        rows = []
        for m in PARAMS["method"].options:
            res = self.result if m == self.state.method and self.result is not None else place_experts(
                g, s, method=m, skew=self.state.skew, cost=self.cost)
            tab = expert_assignment(res)
            rows.append({"method": m, "makespan_s": res.metrics["makespan_s"], "total_latency_s": res.metrics["total_latency_s"],
                         "n_devices": int(tab["device"].nunique()),
                         "experts": ", ".join(f"{d}: {n}" for d, n in tab.groupby("device").size().items())})
        frame = pd.DataFrame(rows)
        self._cmp = (key, frame)
        return frame

    def _render_comparison(self, r) -> None:
        frame = self.comparison = self.compare_mappers()
        best = frame["makespan_s"].min()
        rows = []
        for row in frame.itertuples(index=False):
            me = row.method == self.state.method
            style = " style='background:#FFF8E1;font-weight:600'" if me else ""
            tag = " (best makespan)" if row.makespan_s <= best * (1 + 1e-9) else ""
            rows.append(f"<tr{style}><td>{_e(METHOD_LABELS.get(row.method, row.method))}{' ◀ shown' if me else ''}</td>"
                        f"<td>{_t(row.makespan_s)}{tag}</td><td>{_t(row.total_latency_s)}</td><td>{row.n_devices}</td>"
                        f"<td>{_e(row.experts)}</td></tr>")
        self.table.value = ("<table class='hetsched-table' style='border-collapse:collapse'><tr><th>mapper</th><th>makespan</th>"
                            "<th>total busy time of all devices</th><th>devices holding experts</th><th>experts per device</th></tr>"
                            + "".join(rows) + "</table><div style='color:#444'>The makespan is when the last op ends; the "
                            "total busy time of all devices " + term("the patent's system total latency, its objective, claim 5") + " sums every device's busy time, so "
                            "running experts side by side does not lower it.</div>")

    def download_items(self, r):
        return [(csv_safe(self.assignment), "expert_placement.csv"), (csv_safe(r.timeline), "experts_timeline.csv"),
                (csv_safe(r.steps_frame()), "experts_steps.csv"),
                (hs.timeline.to_chrome_trace(r.timeline), "experts_trace.json")]
