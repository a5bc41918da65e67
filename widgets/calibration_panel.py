"""CalibrationPanel (issues 19, 33): predictions set against measured runs, op by op and model by model.

Pick a measured run (a :class:`~hetsched.io.profile.Profile`: a ``torch.profiler`` trace read by
:func:`hetsched.io.load_profile`, or :func:`hetsched.io.profile.time_torch`) and a cost model (the
calibrated cost file :func:`hetsched.calibrate` wrote, or the plain roofline for contrast). The
panel calls :func:`hetsched.calibrate.compare` and shows, per measured model, the end-to-end time
measured and predicted by both models (``model_table``); for the run picked, the per-op ratio
scatter (predicted / measured against the measured time), the two runs as Gantt lanes on one time
axis, and the fitted efficiency curves with the points they came from. Picking an op outlines it in
the scatter and the Gantt. The download is one Perfetto trace holding both runs.

Made with no runs (``CalibrationPanel()``: the dashboard's Calibration tab), it opens on the
measurement shipped in ``data/calibration/`` (:func:`hetsched.io.measured.load_measurement`, written
by ``scripts/gen_calibration_data.py``), so it shows something without torch; where torch is
installed, "measure this machine now" runs a short calibration of the machine the kernel runs on and
adds it as a second measurement.

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

import functools
import html
from typing import Any, Mapping

import ipywidgets as W
import pandas as pd
import traitlets

from hetsched.calibrate import Comparison, compare
from hetsched.cost import RooflineCost, load_cost
from hetsched.errors import HetschedError
from hetsched.plot import format_time_range, format_value, time_unit
from hetsched.plot.calibration import efficiency_curves, measured_vs_predicted, ratio_scatter

from .base import Panel, Session, ok_html

__all__ = ["CalibrationPanel", "CalibrationState", "BUNDLED"]

#: the label of the shipped measurement in the measurement picker
BUNDLED = "shipped measurement"
#: the label of a measurement taken by the "measure this machine now" button
LIVE = "this machine, now"


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


@functools.lru_cache(maxsize=1)
def bundled_measurement() -> Any:
    """The shipped measurement, read once per kernel (:func:`hetsched.io.measured.load_measurement`;
    ~0.2 s): the tab reads it, never writes it, so every Calibration tab of a kernel shares it, and
    the dashboard reads it ahead while the page is idle (:func:`hetsched.widgets.dashboard.warm_up`)."""
    from hetsched.io.measured import load_measurement

    return load_measurement()


class CalibrationState(traitlets.HasTraits):
    measurement = traitlets.Unicode("")  # which measurement (the shipped one, this machine now, or the given runs)
    run = traitlets.Unicode("")  # which measured run
    model = traitlets.Enum(["calibrated", "roofline"], default_value="calibrated")
    op = traitlets.Unicode("")  # view: the op outlined in the scatter and the Gantt


class _Given:
    """The runs a caller gave (``CalibrationPanel(profiles, system=, cost=, calibration=)``), as a measurement."""

    def __init__(self, profiles, system, cost, calibration):
        self.profiles, self.system, self.cost = dict(profiles), system, cost
        self.points = getattr(calibration, "points", pd.DataFrame())
        self.meta: dict = {}


class CalibrationPanel(Panel):
    """Simulated vs measured for one or more measured runs.

    Parameters
    ----------
    profiles : dict, optional
        ``{label: Profile}`` of measured runs (default: the shipped measurement, ``data/calibration/``).
    system : System
        The system to price on (the one :func:`hetsched.calibrate` wrote); required with ``profiles``.
    cost : CostModel or path, optional
        The calibrated model or its cost file (default: the roofline, and the ``model`` switch has
        nothing to switch to).
    calibration : Calibration, optional
        Draws its efficiency curves and points as a third figure.
    session : Session, optional
    """

    TAB = "calibration"
    VIEW_TRAITS = ("op",)

    def __init__(self, profiles: Mapping[str, Any] | None = None, *, system=None, cost: Any = None,
                 calibration: Any = None, session: Session | None = None, **kw: Any) -> None:
        self.measurements: dict[str, Any] = {}
        if profiles is None:
            # read when the tab is first shown (a hidden dashboard tab reads nothing: the page loads sooner)
            self.measurements[BUNDLED] = None
        else:
            if not profiles:
                raise HetschedError("CalibrationPanel needs at least one measured run (profiles)", field="profiles")
            if system is None:
                raise HetschedError("CalibrationPanel: give the system the runs were measured on (system=)", field="system")
            if isinstance(cost, (str, bytes)) or hasattr(cost, "__fspath__"):
                cost = load_cost(cost, system)
            self.measurements["the given runs"] = _Given(profiles, system, cost, calibration)
        first = next(iter(self.measurements))
        m = self.measurements[first]
        state = CalibrationState(measurement=first, run=next(iter(m.profiles)) if m is not None else "",
                                 model="calibrated" if m is None or m.cost is not None else "roofline")
        style = {"description_width": "initial"}
        meas = W.Dropdown(options=list(self.measurements), description="measurement", style=style,
                          layout=W.Layout(width="300px"))
        run = W.Dropdown(options=list(m.profiles) if m is not None else [], description="measured run", style=style)
        model = W.ToggleButtons(options=[("calibrated cost file", "calibrated"), ("roofline (datasheet peaks)", "roofline")],
                                description="cost model", style={**style, "button_width": "auto"})
        op = W.Dropdown(options=[""], description="outline op", style=style)
        _link_choice(state, "measurement", meas)
        _link_choice(state, "run", run)
        W.link((state, "model"), (model, "value"))
        self.measurement_picker, self.run_picker, self.op_picker = meas, run, op
        self.measure_button = W.Button(description="measure this machine now (torch)", icon="stopwatch",
                                       layout=W.Layout(width="auto"),
                                       tooltip="a short calibration of the machine this kernel runs on (about a minute)")
        self.measure_button.on_click(lambda _b: self.measure_now())
        self.about = W.HTML()
        self.summary = W.HTML()
        self.models = W.HTML()  # one row per measured model: measured, predicted by each cost model
        self.control_widgets = {"measurement": meas, "run": run, "model": model, "op": op}
        super().__init__(state, session=session, autostart=False, **kw)
        _link_choice(state, "op", op)
        state.observe(self._on_measurement, names="measurement")
        self.controls = W.VBox([W.HBox([meas, run, model], layout=W.Layout(flex_flow="row wrap", align_items="center")),
                                W.HBox([op, self.measure_button], layout=W.Layout(flex_flow="row wrap", align_items="center"))])
        self._show_about()
        figs = [self.figure_view("ratio"), self.figure_view("gantt")]
        if m is None or self._has_curves():  # the shipped measurement has its fit's points
            figs.append(self.figure_view("curves"))
        self.children = [self.controls, self.status, self.about, self.models, self.summary, *figs, self.download_area]
        self._start()

    # -- the measurement ----------------------------------------------------------------
    @property
    def current(self) -> Any:
        """The measurement picked (its ``system``, ``cost``, ``profiles``, ``points``, ``meta``)."""
        self._ensure_loaded()
        return self.measurements[self.state.measurement]

    def _ensure_loaded(self) -> None:
        """Read the shipped measurement the first time it is needed."""
        if self.measurements.get(BUNDLED, False) is not None:
            return
        m = self.measurements[BUNDLED] = bundled_measurement()
        if self.state.measurement == BUNDLED:
            self.run_picker.options = list(m.profiles)
            if self.state.run not in m.profiles:
                self._reverting = True  # not an input change: the run the tab opens on
                try:
                    self.state.run = next(iter(m.profiles))
                finally:
                    self._reverting = False
            self._show_about()

    @property
    def profiles(self) -> dict[str, Any]:
        return dict(self.current.profiles)

    @property
    def system(self) -> Any:
        return self.current.system

    @property
    def calibrated_cost(self) -> Any:
        return self.current.cost

    def _has_curves(self) -> bool:
        m = self.current
        return m.cost is not None and len(getattr(m, "points", ())) > 0 and hasattr(m.cost, "devices")

    def _on_measurement(self, change) -> None:
        if change["new"] == BUNDLED:
            self._ensure_loaded()
        m = self.measurements.get(change["new"])
        if m is None:
            return  # refused by check_inputs
        self.run_picker.options = list(m.profiles)
        with self.hold():
            if self.state.run not in m.profiles:
                self.state.run = next(iter(m.profiles))
        self._show_about()

    def _show_about(self) -> None:
        m = self.measurements.get(self.state.measurement)
        meta = getattr(m, "meta", {}) or {}
        on = meta.get("measured_on", {})
        if meta:
            self.about.value = (
                f"<div style='color:#333'><b>{html.escape(self.state.measurement)}</b>: "
                f"{html.escape(', '.join(meta.get('workloads', [])))} measured with torch {html.escape(str(on.get('torch', '?')))} "
                f"on {html.escape(str(on.get('processor', '?')))} ({html.escape(str(meta.get('date', '?')))}), "
                f"the machine as <code>{html.escape(m.system.name)}</code>. "
                f"<span style='color:#555'>Written by <code>{html.escape(str(meta.get('command', '')))}</code>; "
                "the times are that machine's, not necessarily the one serving this page.</span></div>")
        else:
            self.about.value = ""
        import importlib.util

        # whether torch is there, without importing it (seconds): the button imports it when pressed
        if importlib.util.find_spec("torch") is None:
            self.measure_button.disabled = True
            self.measure_button.tooltip = "needs torch (pip install 'hetsched[torch]'): the shipped measurement is shown"

    def measure_now(self, **options: Any) -> bool:
        """Calibrate the machine the kernel runs on (torch) and add it as the measurement "this machine, now"."""
        try:
            import torch  # noqa: F401
        except ImportError:
            self.show_error(HetschedError("measuring needs torch (pip install 'hetsched[torch]'); the shipped "
                                          "measurement stays", field="measurement"))
            return False
        import hetsched

        kw = {"repeats": 3, "runs": 1, "sweep": "quick", "threads": 2, **options}
        workloads = kw.pop("workloads", [("resnet50", {"batch": 1})])
        ok, cal = self.run_busy("measuring this machine (about a minute)",
                                lambda: hetsched.calibrate(workloads, system_name="this_machine", **kw))
        if not ok:
            return False
        live = _Given(cal.profiles, cal.system, cal.cost, cal)
        live.meta = {"workloads": list(cal.profiles), "measured_on": {"processor": "the machine serving this page",
                                                                      "torch": torch.__version__},
                     "date": "now", "command": "the panel's 'measure this machine now'"}
        self.measurements[LIVE] = live
        self.measurement_picker.options = list(self.measurements)
        self.state.measurement = LIVE
        self.message.value = ok_html(f"measured {', '.join(cal.profiles)} on this machine")
        return True

    # -- Panel -------------------------------------------------------------------
    def check_inputs(self) -> None:
        # refused choices are taken back (Panel.check_inputs): the pickers show what is on screen
        self._ensure_loaded()
        st = self.state
        if st.measurement not in self.measurements:
            raise HetschedError(f"no measurement {st.measurement!r}; have {', '.join(self.measurements)}",
                                field="measurement")
        if st.run not in self.profiles:
            raise HetschedError(f"no measured run {st.run!r}; have {', '.join(self.profiles)}", field="run")
        if st.model == "calibrated" and self.calibrated_cost is None:
            raise HetschedError("no calibrated cost model was given to this panel: pass cost= (a cost file)",
                                field="model")
        if st.op and self.result is not None and st.op not in set(self.result.ops["op"]):
            raise HetschedError(f"outline op {st.op!r} refused: {st.run} has no such op", op=st.op, field="op")

    def _cost_of(self, model: str) -> Any:
        return self.calibrated_cost if model == "calibrated" else RooflineCost(self.system)

    def compute(self) -> Comparison:
        st = self.state
        self.check_inputs()
        return compare(self.profiles[st.run], self._cost_of(st.model), self.system)

    def model_table(self) -> pd.DataFrame:
        """One row per measured run of the measurement: its end-to-end time measured, predicted by the
        calibrated cost file and by the roofline, and each prediction's ratio to the measurement (one
        place to add columns, such as an error range, for every model at once)."""
        cache = self.__dict__.setdefault("_models", {})
        key = self.state.measurement
        if key not in cache:
            rows = []
            for name, prof in self.profiles.items():
                row: dict[str, Any] = {"run": name, "ops": prof.graph.n_ops}
                for model in (["calibrated"] if self.calibrated_cost is not None else []) + ["roofline"]:
                    c = compare(prof, self._cost_of(model), self.system)
                    row["measured_s"] = c.metrics["measured_s"]
                    row[f"{model}_s"] = c.metrics["predicted_s"]
                    row[f"{model}_ratio"] = c.metrics["e2e_ratio"]
                    row[f"{model}_median_op_ratio"] = c.metrics["median_ratio"]
                    if "predicted_lo_s" in c.metrics:  # a cost that kept held-out residuals states a range
                        row[f"{model}_lo_s"] = c.metrics["predicted_lo_s"]
                        row[f"{model}_hi_s"] = c.metrics["predicted_hi_s"]
                        row[f"{model}_in_range"] = bool(c.metrics["in_range"])
                rows.append(row)
            cache[key] = pd.DataFrame(rows)
        return cache[key]

    def on_result(self, r: Comparison) -> None:
        ops = [""] + r.ops.sort_values("measured_s", ascending=False)["op"].tolist()
        if self.state.op not in ops:
            self.state.op = ""  # a view trait: no redraw of its own here
        self.op_picker.options = ops

    def render(self, r: Comparison) -> None:
        self.show_figure("ratio", self._ratio(r))
        self.show_figure("gantt", self._gantt(r))
        if "curves" in self.figures:
            if self._has_curves():
                self.show_figure("curves", self._curves())
        self._render_text(r)
        self._render_models()

    def download_items(self, r: Comparison):
        return [(r.trace(), "measured_vs_predicted_trace.json"), (r.ops, "measured_vs_predicted_ops.csv"),
                (self.model_table(), "measured_vs_predicted_models.csv")]

    # -- figures -----------------------------------------------------------------
    def _ratio(self, r: Comparison):
        return ratio_scatter(r.ops, highlight=self.state.op or None)

    def _gantt(self, r: Comparison):
        g = self.profiles[self.state.run].graph
        return measured_vs_predicted(r.measured, r.predicted, op_types={o: op.op_type for o, op in g.ops.items()},
                                     highlight=self.state.op or None,
                                     title=f"{html.escape(self.state.run)}: measured (top) and predicted ({self.state.model})")

    def _curves(self):
        m = self.current
        dev = next(iter(m.cost.devices))
        return efficiency_curves(m.points, m.cost.devices[dev]["curves"],
                                 title=f"efficiency curves of {dev} (filled: in the workloads; hollow: the sweep)")

    def _render_models(self) -> None:
        t = self.model_table()
        words = {"calibrated": "calibrated cost file", "roofline": "roofline"}
        models = [m for m in words if f"{m}_s" in t.columns]
        ranged = [m for m in models if f"{m}_in_range" in t.columns]
        head = "".join(f"<th>predicted: {words[m]}</th><th>predicted ÷ measured</th>"
                       + ("<th>measured in its stated range</th>" if m in ranged else "") for m in models)
        body = ""
        for row in t.itertuples(index=False):
            d = row._asdict()
            cells = ""
            for m in models:
                pred = {"predicted_s": d[f"{m}_s"]}
                if m in ranged and not pd.isna(d[f"{m}_lo_s"]):
                    pred.update(predicted_lo_s=d[f"{m}_lo_s"], predicted_hi_s=d[f"{m}_hi_s"])
                cells += f"<td>{format_time_range(pred, 'predicted_s')}</td><td>{d[f'{m}_ratio']:.3f}</td>"
                if m in ranged:
                    inr = d[f"{m}_in_range"]
                    cells += "<td>–</td>" if pd.isna(inr) else f"<td>{'yes' if inr else '<b>no</b>'}</td>"
            body += (f"<tr><td><b>{html.escape(d['run'])}</b> ({d['ops']} ops)</td>"
                     f"<td>{format_value(d['measured_s'], '_s')}</td>{cells}</tr>")
        self.models.value = ("<div><b>Measured against predicted, model by model</b> (end to end, every op on "
                             f"{html.escape(self.system.device_names[0])} in the measured order)</div>"
                             f"<table class='hetsched-table'><tr><th>measured run</th><th>measured</th>{head}</tr>"
                             f"{body}</table>")

    def _render_text(self, r: Comparison) -> None:
        m = r.metrics
        unit, f = time_unit(max(m["measured_s"], m["predicted_s"]))
        self.summary.value = (
            f"<b>{html.escape(self.state.run)}</b> ({self.state.model}): end to end predicted "
            f"<b>{m['predicted_s'] * f:.4g} {unit}</b>{_range_words(m)}, measured {m['measured_s'] * f:.4g} {unit} "
            f"(ratio <b>{m['e2e_ratio']:.3f}</b>); per op over {m['n_ops']:.0f} ops: median {m['median_ratio']:.3f}, "
            f"p10 {m['p10_ratio']:.3f}, p90 {m['p90_ratio']:.3f}"
        )


def _range_words(m: Mapping[str, Any]) -> str:
    """`` (-4%/+8% stated; the measurement fell in it)`` for a comparison whose cost stated a range."""
    if "predicted_lo_s" not in m:
        return ""
    txt = format_time_range(m, "predicted_s")
    where = "fell in it" if m.get("in_range") else "fell <b>outside</b> it"
    return f" ({html.escape(txt.split(' ', 2)[-1])} stated; the measurement {where})"
