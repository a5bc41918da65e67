"""CalibrationPanel (issue 19): a prediction set against a measured run, op by op.

Pick a measured run (a :class:`~hetsched.io.profile.Profile`: a ``torch.profiler`` trace read by
:func:`hetsched.io.load_profile`, or :func:`hetsched.io.profile.time_torch`) and a cost model (the
calibrated cost file :func:`hetsched.calibrate` wrote, or the plain roofline for contrast). The
panel calls :func:`hetsched.calibrate.compare` and shows the per-op ratio scatter
(predicted / measured against the measured time), the two runs as Gantt lanes on one time axis, and
the fitted efficiency curves with the points they came from. Picking an op outlines it in the
scatter and the Gantt. The download is one Perfetto trace holding both runs.

>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> from hetsched.io.profile import load_profile
>>> from hetsched import evaluate
>>> from hetsched.timeline import to_chrome_trace
>>> g, s = chain(4), toy_system()
>>> prof = load_profile(to_chrome_trace(evaluate(g, s, {o: "gpu0" for o in g}).timeline), g, device="gpu0")
>>> p = CalibrationPanel({"chain": prof}, system=s)
>>> round(p.result.metrics["median_ratio"], 6)
1.0
>>> p.state.run = "nope"; "nope" in p.message.value
True
"""

from __future__ import annotations

import html
from typing import Any, Mapping

import ipywidgets as W
import traitlets

from hetsched.calibrate import Comparison, compare
from hetsched.cost import RooflineCost, load_cost
from hetsched.errors import HetschedError
from hetsched.plot import format_time_range, time_unit
from hetsched.plot.calibration import efficiency_curves, measured_vs_predicted, ratio_scatter

from .base import Panel, Session, figure_widget

__all__ = ["CalibrationPanel", "CalibrationState"]


def _link_choice(state: traitlets.HasTraits, name: str, ctl: W.Dropdown) -> None:
    """Link a dropdown to a trait; a trait value the dropdown does not offer is left for the panel to
    report (a plain link would raise inside the dropdown instead)."""

    def to_ctl(change):
        if change["new"] in ctl.options and ctl.value != change["new"]:
            ctl.value = change["new"]

    def to_state(change):
        if getattr(state, name) != change["new"]:
            setattr(state, name, change["new"])

    to_ctl({"new": getattr(state, name)})
    state.observe(to_ctl, names=name)
    ctl.observe(to_state, names="value")


class CalibrationState(traitlets.HasTraits):
    run = traitlets.Unicode("")  # which measured run
    model = traitlets.Enum(["calibrated", "roofline"], default_value="calibrated")
    op = traitlets.Unicode("")  # view: the op outlined in the scatter and the Gantt


class CalibrationPanel(Panel):
    """Simulated vs measured for one or more measured runs.

    Parameters
    ----------
    profiles : dict
        ``{label: Profile}`` of measured runs.
    system : System
        The system to price on (the one :func:`hetsched.calibrate` wrote).
    cost : CostModel or path, optional
        The calibrated model or its cost file (default: the roofline, and the ``model`` switch has
        nothing to switch to).
    calibration : Calibration, optional
        Draws its efficiency curves and points as a third figure.
    session : Session, optional
    """

    VIEW_TRAITS = ("op",)

    def __init__(self, profiles: Mapping[str, Any], *, system, cost: Any = None, calibration: Any = None,
                 session: Session | None = None, **kw: Any) -> None:
        if not profiles:
            raise HetschedError("CalibrationPanel needs at least one measured run (profiles)", field="profiles")
        self.profiles = dict(profiles)
        self.system = system
        self.calibrated_cost = load_cost(cost, system) if isinstance(cost, (str, bytes)) or hasattr(cost, "__fspath__") else cost
        self.calibration = calibration
        state = CalibrationState(run=next(iter(self.profiles)), model="calibrated" if self.calibrated_cost is not None else "roofline")
        style = {"description_width": "initial"}
        run = W.Dropdown(options=list(self.profiles), description="measured run", style=style)
        model = W.ToggleButtons(options=["calibrated", "roofline"], description="cost model", style=style)
        op = W.Dropdown(options=[""], description="outline op", style=style)
        _link_choice(state, "run", run)
        W.link((state, "model"), (model, "value"))
        self.op_picker = op
        self.summary = W.HTML()
        self.models_table = W.HTML()  # every measured run, predicted vs measured end to end
        self._per_model: dict[tuple[str, str], Comparison] = {}  # (run, cost model) -> its comparison
        self.control_widgets = {"run": run, "model": model, "op": op}
        super().__init__(state, session=session, autostart=False, **kw)
        r = self.compute()
        self.result = r
        self.on_result(r)
        _link_choice(state, "op", op)
        self.figures["ratio"] = figure_widget(self._ratio(r))
        self.figures["gantt"] = figure_widget(self._gantt(r))
        figs = [self.figures["ratio"], self.figures["gantt"]]
        if calibration is not None:
            self.figures["curves"] = figure_widget(self._curves())
            figs.append(self.figures["curves"])
        self.children = [W.HBox([run, model, op]), self.message, self.summary, self.models_table, *figs,
                         self.download_area]
        self._render_text(r)
        self._start()

    # -- Panel -------------------------------------------------------------------
    def check_inputs(self) -> None:
        # refused choices are taken back (Panel.check_inputs): the pickers show what is on screen
        st = self.state
        if st.run not in self.profiles:
            raise HetschedError(f"no measured run {st.run!r}; have {', '.join(self.profiles)}", field="run")
        if st.model == "calibrated" and self.calibrated_cost is None:
            raise HetschedError("no calibrated cost model was given to this panel: pass cost= (a cost file)",
                                field="model")
        if st.op and self.result is not None and st.op not in set(self.result.ops["op"]):
            raise HetschedError(f"outline op {st.op!r} refused: {st.run} has no such op", op=st.op, field="op")

    def compute(self) -> Comparison:
        st = self.state
        self.check_inputs()  # also called directly by __init__ (before the panel's loop starts)
        cost = self.calibrated_cost if st.model == "calibrated" else RooflineCost(self.system)
        for label, prof in self.profiles.items():  # the per-model table: each run compared once per cost model
            if (label, st.model) not in self._per_model:
                self._per_model[(label, st.model)] = compare(prof, cost, self.system)
        return self._per_model[(st.run, st.model)]

    def on_result(self, r: Comparison) -> None:
        ops = [""] + r.ops.sort_values("measured_s", ascending=False)["op"].tolist()
        if self.state.op not in ops:
            self.state.op = ""  # a view trait: no redraw of its own here
        self.op_picker.options = ops

    def render(self, r: Comparison) -> None:
        self.show_figure("ratio", self._ratio(r))
        self.show_figure("gantt", self._gantt(r))
        self._render_text(r)

    def download_items(self, r: Comparison):
        return [(r.trace(), "measured_vs_predicted_trace.json"), (r.ops, "measured_vs_predicted_ops.csv")]

    # -- figures -----------------------------------------------------------------
    def _ratio(self, r: Comparison):
        return ratio_scatter(r.ops, highlight=self.state.op or None)

    def _gantt(self, r: Comparison):
        g = self.profiles[self.state.run].graph
        return measured_vs_predicted(r.measured, r.predicted, op_types={o: op.op_type for o, op in g.ops.items()},
                                     highlight=self.state.op or None,
                                     title=f"{html.escape(self.state.run)}: measured (top) and predicted ({self.state.model})")

    def _curves(self):
        cal = self.calibration
        dev = next(iter(cal.cost.devices))
        return efficiency_curves(cal.points, cal.cost.devices[dev]["curves"],
                                 title=f"efficiency curves of {dev} (filled: in the workloads; hollow: the sweep)")

    def _render_text(self, r: Comparison) -> None:
        m = r.metrics
        unit, f = time_unit(max(m["measured_s"], m["predicted_s"]))
        self.summary.value = (
            f"<b>{html.escape(self.state.run)}</b> ({self.state.model}): end to end predicted "
            f"<b>{m['predicted_s'] * f:.4g} {unit}</b>{_range_words(m)}, measured {m['measured_s'] * f:.4g} {unit} "
            f"(ratio <b>{m['e2e_ratio']:.3f}</b>); per op over {m['n_ops']:.0f} ops: median {m['median_ratio']:.3f}, "
            f"p10 {m['p10_ratio']:.3f}, p90 {m['p90_ratio']:.3f}"
        )
        self.models_table.value = self._models_html()

    def _models_html(self) -> str:
        """Predicted vs measured end to end for every measured run (this cost model), the shown one in bold."""
        st = self.state
        rows = []
        for label in self.profiles:
            c = self._per_model.get((label, st.model))
            if c is None:
                continue
            m = c.metrics
            inr = m.get("in_range")
            cells = [html.escape(label), format_time_range(m, "measured_s"), format_time_range(m, "predicted_s"),
                     f"{m['e2e_ratio']:.3f}", f"{m['median_ratio']:.3f}",
                     "–" if inr is None else ("yes" if inr else "<b>no</b>")]
            tag = "b" if label == st.run else "span"
            rows.append("<tr>" + "".join(f"<td><{tag}>{x}</{tag}></td>" for x in cells) + "</tr>")
        head = "".join(f"<th>{h}</th>" for h in ("measured run", "measured", "predicted (stated range)",
                                                 "end-to-end ratio", "per-op median", "measured in range"))
        return (f"<table style='border-collapse:collapse'><tr>{head}</tr>{''.join(rows)}</table>"
                "<small>ratio = predicted / measured; the range is the calibration's held-out residuals "
                "(only a calibrated cost that kept them states one)</small>")


def _range_words(m: Mapping[str, Any]) -> str:
    """`` (stated range -4%/+8%; the measurement fell in it)`` for a comparison whose cost stated a range."""
    if "predicted_lo_s" not in m:
        return ""
    txt = format_time_range(m, "predicted_s")
    where = "fell in it" if m.get("in_range") else "fell <b>outside</b> it"
    return f" ({html.escape(txt.split(' ', 2)[-1])} stated; the measurement {where})"
