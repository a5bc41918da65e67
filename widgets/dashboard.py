"""Dashboard: tabs over every panel, all sharing one :class:`~hetsched.widgets.Session`.

Until the user loads something, every tab shows its own scenario (:mod:`hetsched.scenarios`: a set-up
where that family's point shows, with a line saying what to notice). The Graph tab loads a graph
(bundled, generated or uploaded) into the session, and the scenario picker loads a scenario's graph,
machine and settings; from then on every tab schedules that graph. Every tab that schedules shows a
machine bar (:mod:`hetsched.widgets.machine`): another machine, picked or edited there, is the
session's, and every tab recomputes on it. The Calibration tab sets predictions against measured
runs (the shipped measurement, or this machine measured now). ``make app`` serves
``notebooks/dashboard.ipynb`` (which shows one ``Dashboard()``) with Voila.

>>> d = Dashboard(tabs=("graph", "executor"))
>>> d.titles
['Graph', 'Executor']
>>> d.panels["executor"].session is d.session
True
>>> d.panels["executor"].result is None            # a hidden tab computes when first shown
True
>>> d.show("executor").graph.name                  # its own scenario: nothing was loaded
'executor_thread_rules'
>>> _ = d.apply_scenario("memory"); d.tabs.selected_index, d.session.graph.name
(1, 'layered-6x4-s0')
"""

from __future__ import annotations

import importlib
from typing import Any, Iterable

import ipywidgets as W

import hetsched as hs

from .base import Session, error_html

__all__ = ["Dashboard", "PANELS"]

#: tab key -> (title, module, class); the order of the tabs
PANELS: dict[str, tuple[str, str, str]] = {
    "graph": ("Graph", "graph_panel", "GraphPanel"),
    "backends": ("Backends", "backend_panel", "BackendPanel"),
    "mapping": ("Mapping", "mapping_panel", "MappingPanel"),
    "experts": ("Experts", "moe_panel", "ExpertsPanel"),  # MoE expert placement: a mapping question
    "pipeline": ("Pipeline", "pipeline_panel", "PipelinePanel"),
    "memory": ("Memory", "memory_panel", "MemoryPanel"),
    "executor": ("Executor", "executor_panel", "ExecutorPanel"),
    "calibration": ("Calibration", "calibration_panel", "CalibrationPanel"),
}


class Dashboard(W.VBox):
    """All panels in tabs over one session.

    Parameters
    ----------
    tabs : iterable of str, optional
        Keys of :data:`PANELS` to show (default: all).
    graph, system : optional
        Loaded into the session first (default: the Graph panel's default graph, the toy system).
    cost : CostModel or path, optional
        The session's cost model (a calibration's cost file): every tab prices with it (default:
        the roofline). ``dashboard.session.cost = ...`` changes it later.

    Attributes
    ----------
    session : Session
    panels : dict
        Key -> panel (a tab whose panel could not be built shows why instead).
    """

    def __init__(self, tabs: Iterable[str] | None = None, *, graph: Any = None, system: Any = None,
                 scenario: str | None = None, cost: Any = None, **kw: Any) -> None:
        from hetsched.scenarios import SCENARIOS

        self.session = Session(cost=cost)
        if system is not None:
            self.session.system = system
        keys = list(tabs) if tabs is not None else list(PANELS)
        unknown = [k for k in keys if k not in PANELS]
        if unknown:
            raise hs.errors.UnknownNameError(f"unknown dashboard tab(s) {unknown}; choose from {list(PANELS)}",
                                             field="tabs")
        self.panels: dict[str, Any] = {}
        self.titles: list[str] = []
        children = []
        for i, key in enumerate(keys):
            title, mod, cls = PANELS[key]
            try:
                panel_cls = getattr(importlib.import_module(f".{mod}", __package__), cls)
                # only the first tab computes now; the others when first shown (and when shown again
                # after their inputs changed): loading a graph must not recompute hidden panels
                panel = panel_cls(session=self.session, active=(i == 0))
                if key == "graph" and graph is not None:
                    panel.load(graph)
            except Exception as e:  # one broken tab must not take the app down
                panel = W.HTML(error_html(hs.errors.HetschedError(f"{cls} is not available: {type(e).__name__}: {e}")))
            self.panels[key] = panel
            self.titles.append(title)
            children.append(panel)
        if graph is not None and "graph" not in self.panels:
            self.session.graph = graph
        self.tabs = W.Tab(children=children)
        self.tabs.titles = tuple(PANELS[k][0] for k in keys)
        self.tabs.observe(self._on_tab, names="selected_index")
        options = [("each tab's own example", "")] + [(f"{sc.title} ({PANELS[sc.tab][0]} tab)", k)
                                                      for k, sc in SCENARIOS.items() if sc.tab in self.panels]
        self.scenario = W.Dropdown(options=options, value="", description="scenario",
                                   style={"description_width": "initial"}, layout=W.Layout(width="640px"))
        self.scenario.observe(lambda ch: self.apply_scenario(ch["new"]), names="value")
        intro = W.HTML("<div class='hetsched-intro'>Each tab starts on an example where its algorithm has something "
                       "to show. Pick a scenario, or load your own graph in the Graph tab: every tab then schedules "
                       "it. Each tab's machine bar picks or edits the machine every tab schedules on. A tab computes "
                       "when it is shown.</div>")
        super().__init__([intro, self.scenario, self.tabs], **kw)
        self.add_class("hetsched-dashboard")
        if scenario:
            self.scenario.value = scenario

    def apply_scenario(self, key: str | None) -> Any:
        """Load scenario ``key`` (its graph, machine and settings), show its tab and return its panel;
        ``None`` or ``""`` takes the loaded graph back (each tab shows its own example again)."""
        from hetsched.scenarios import scenario as get

        if not key:
            with self.session.hold_trait_notifications():
                self.session.scenario = None
                self.session.graph = None
                self.session.system = None
            gp = self.panels.get("graph")
            if hasattr(gp, "show_scenario"):
                gp.show_scenario()
            return None
        sc = get(key)
        graph, system = sc.load()
        panel = self.panels.get(sc.tab)
        if hasattr(panel, "state"):
            with panel.hold():
                for name, value in sc.settings.items():
                    if panel.state.has_trait(name):
                        setattr(panel.state, name, value)
        self.session.scenario = key
        gp = self.panels.get("graph")
        if hasattr(gp, "load"):
            gp.load(graph, system)  # shown in the Graph tab and published to every tab
        else:
            with self.session.hold_trait_notifications():
                self.session.system = system
                self.session.graph = graph
        if self.scenario.value != key and key in {v for _l, v in self.scenario.options}:
            self.scenario.value = key
        return self.show(sc.tab) if sc.tab in self.panels else panel

    def _on_tab(self, change: dict) -> None:
        """Show one tab: it recomputes if its inputs changed while hidden; the others stop computing."""
        for i, panel in enumerate(self.tabs.children):
            if not hasattr(panel, "activate"):
                continue
            if i == change["new"]:
                panel.activate()
            else:
                panel.deactivate()

    def show(self, key: str) -> Any:
        """Select the tab ``key`` (what a click on its title does) and return its panel.

        >>> d = Dashboard(tabs=("graph", "memory"))
        >>> d.panels["memory"].result is None          # hidden: nothing computed yet
        True
        >>> d.show("memory").result is not None
        True
        """
        if key not in self.panels:
            raise hs.errors.UnknownNameError(f"no tab {key!r}; have {list(self.panels)}", field="tab")
        self.tabs.selected_index = list(self.panels).index(key)
        return self.panels[key]
