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

A link opens the dashboard on a scenario, a tab and a layout (the page sends its query string,
:meth:`Dashboard.apply_query`), and the page's address always links to what is shown:

>>> d = Dashboard(tabs=("graph", "memory", "executor"))
>>> d.apply_query("?scenario=memory&layout=present")
{'layout': 'present', 'scenario': 'memory'}
>>> d.link_query()
'?scenario=memory&tab=memory&layout=present'
"""

from __future__ import annotations

import asyncio
import importlib
import os
from collections.abc import Mapping
from typing import Any, Iterable

import ipywidgets as W

import hetsched as hs

from .address import PageAddress
from .base import PAGE_LAYOUTS, Session, error_html

__all__ = ["Dashboard", "LazyPanels", "PANELS", "prepare", "warm_up"]

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


class LazyPanels(Mapping):
    """The dashboard's tab key -> panel, each panel built when first asked for.

    ``panels[key]`` builds the tab's panel (laid out as the page is), puts it in its tab's holder
    and, if its tab is shown, activates it; iterating, ``in`` and ``len`` build
    nothing; :meth:`built` is the panel if it exists. A tab whose panel cannot be built shows why
    instead (one broken tab must not take the app down).
    """

    def __init__(self, dashboard: "Dashboard", keys: list[str]) -> None:
        self._dashboard = dashboard
        self._keys = list(keys)
        self._built: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        panel = self._built.get(key)
        if panel is None:
            if key not in self._keys:
                raise KeyError(key)
            panel = self._built[key] = self._build(key)
        return panel

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def built(self, key: str) -> Any:
        """The panel of tab ``key`` if it was built, else ``None`` (builds nothing)."""
        return self._built.get(key)

    def _build(self, key: str) -> Any:
        d = self._dashboard
        i = self._keys.index(key)
        title, mod, cls = PANELS[key]
        try:
            panel_cls = getattr(importlib.import_module(f".{mod}", __package__), cls)
            panel = panel_cls(session=d.session, active=False)
            if d.page_layout != "full" and hasattr(panel, "set_page_layout"):
                panel.set_page_layout(d.page_layout)
        except Exception as e:  # noqa: BLE001 - one broken tab must not take the app down
            panel = W.HTML(error_html(hs.errors.HetschedError(f"{cls} is not available: {type(e).__name__}: {e}")))
        # into the tab's holder: the tab bar's children stay as they are (a tab bar given a new child
        # re-selects a tab in the page, which the page then sends back as the selected tab)
        d.tabs.children[i].children = (panel,)
        # computed only once it is in its tab: the page shows "computing ..." where its figures will be
        # while it computes, not an empty tab
        self._built[key] = panel
        if i == (d.tabs.selected_index or 0) and hasattr(panel, "activate"):
            panel.activate()
        return panel


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
    page_layout : {"full", "present"}
        ``present`` lays every tab out for a projector (:meth:`set_page_layout`); the switch in the
        header (and ``?layout=present`` in a link) changes it.

    Attributes
    ----------
    session : Session
    panels : dict
        Key -> panel (a tab whose panel could not be built shows why instead).
    """

    def __init__(self, tabs: Iterable[str] | None = None, *, graph: Any = None, system: Any = None,
                 scenario: str | None = None, cost: Any = None, page_layout: str = "full", **kw: Any) -> None:
        from hetsched.scenarios import SCENARIOS

        self.session = Session(cost=cost)
        if system is not None:
            self.session.system = system
        keys = list(tabs) if tabs is not None else list(PANELS)
        unknown = [k for k in keys if k not in PANELS]
        if unknown:
            raise hs.errors.UnknownNameError(f"unknown dashboard tab(s) {unknown}; choose from {list(PANELS)}",
                                             field="tabs")
        self.titles = [PANELS[k][0] for k in keys]
        self.page_layout = "full"
        # only the first tab's panel is built now; another's when its tab is first shown or it is asked
        # for (``panels[key]``, build_hidden()): a page's first message carries the state of every widget
        # that exists, and the hidden tabs held ~1250 of ~1350 (issue 32)
        self.panels = LazyPanels(self, keys)
        self.tabs = W.Tab(children=[W.VBox(layout=W.Layout(width="100%")) for _ in keys])
        if keys:
            first = self.panels[keys[0]]
            if keys[0] == "graph" and graph is not None and hasattr(first, "load"):
                first.load(graph)
        if graph is not None and "graph" not in self.panels:
            self.session.graph = graph
        self.tabs.titles = tuple(PANELS[k][0] for k in keys)
        self.tabs.observe(self._on_tab, names="selected_index")
        options = [("each tab's own example", "")] + [(f"{sc.title} ({PANELS[sc.tab][0]} tab)", k)
                                                      for k, sc in SCENARIOS.items() if sc.tab in self.panels]
        self.scenario = W.Dropdown(options=options, value="", description="scenario",
                                   style={"description_width": "initial"}, layout=W.Layout(width="640px"))
        self.scenario.observe(lambda ch: self.apply_scenario(ch["new"]), names="value")
        self.intro = W.HTML("<div class='hetsched-intro'>Each tab starts on an example where its algorithm has something "
                            "to show. Pick a scenario, or load your own graph in the Graph tab: every tab then schedules "
                            "it. Each tab's machine bar picks or edits the machine every tab schedules on. A tab computes "
                            "when it is shown.</div>")
        self.layout_switch = W.ToggleButtons(options=[("full layout", "full"), ("presentation", "present")],
                                             value="full", style={"button_width": "110px"},
                                             tooltips=["every control and explanation",
                                                       "for a projector: the figure first, the controls in one row"])
        # presentation in a Voila page: the notebook's own text (its title, its introduction) is hidden too,
        # so that each tab's figure starts near the top of a projector's screen
        self.page_style = W.HTML("")
        self.layout_switch.observe(lambda ch: self.set_page_layout(ch["new"]), names="value")
        # the page's address: a link opens a scenario, tab and layout; the address bar follows the view
        self.address = PageAddress()
        self.address.observe(self._on_page, names="query")
        self.link = W.HTML()
        self.link_message = W.HTML()
        self.header = W.HBox([self.scenario, self.layout_switch, self.link, self.address, self.page_style],
                             layout=W.Layout(flex_flow="row wrap", align_items="center"))
        super().__init__([self.intro, self.header, self.link_message, self.tabs], **kw)
        self.add_class("hetsched-dashboard")
        self.tabs.observe(lambda _ch: self._show_link(), names="selected_index")
        if scenario:
            self.scenario.value = scenario
        if page_layout != "full":
            self.set_page_layout(page_layout)
        self._show_link()

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
        shown = self.show(sc.tab) if sc.tab in self.panels else panel
        self._show_link()
        return shown

    def _on_tab(self, change: dict) -> None:
        """Show one tab (its panel built if it was not): it recomputes if its inputs changed while
        hidden; the others stop computing."""
        keys = list(self.panels)
        new = change["new"]
        if new is not None and 0 <= new < len(keys):
            self.panels[keys[new]]  # noqa: B018 - built (active) on first show
        for i, key in enumerate(keys):
            panel = self.panels.built(key)
            if not hasattr(panel, "activate"):
                continue
            if i == new:
                panel.activate()
            else:
                panel.deactivate()

    def build_hidden(self) -> None:
        """Build the panels of the tabs not shown yet, each inactive (it computes when shown): for a
        notebook that wants every tab ready. The dashboard itself builds a panel when its tab is first
        shown; a class of thirty pages building theirs at once cannot afford more (see ``_on_page``).

        >>> d = Dashboard(tabs=("graph", "memory")); d.panels.built("memory") is None
        True
        >>> d.build_hidden(); d.panels.built("memory").result is None
        True
        """
        for key in self.panels:
            self.panels[key]  # noqa: B018 - builds it

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

    @classmethod
    def prepared(cls, **kw: Any) -> "Dashboard":
        """The dashboard :func:`prepare` built ahead of demand with the same arguments (each is handed
        out once), else a new one: the dashboard notebook's cell, instant in a warm kernel."""
        for i, (args, d) in enumerate(_PREPARED):
            if args == kw:
                del _PREPARED[i]
                return d
        return cls(**kw)

    # -- layouts and links ---------------------------------------------------------------
    def set_page_layout(self, name: str) -> None:
        """Lay every tab out in full (``"full"``) or for a projector (``"present"``: each tab's figure
        first, its controls in one row, the explanations folded; :meth:`Panel.set_page_layout`)."""
        if name not in PAGE_LAYOUTS:
            raise hs.errors.UnknownNameError(f"no page layout {name!r}; choose from {list(PAGE_LAYOUTS)}", field="layout")
        self.page_layout = name  # a panel built later takes it (LazyPanels)
        for key in self.panels:
            panel = self.panels.built(key)
            if hasattr(panel, "set_page_layout"):
                panel.set_page_layout(name)
        self.intro.layout.display = "none" if name == "present" else None
        self.page_style.value = _PRESENT_CSS if name == "present" else ""
        if self.layout_switch.value != name:
            self.layout_switch.value = name
        self._show_link()

    def apply_query(self, query: str) -> dict[str, str]:
        """Open what a link asks for: ``?scenario=KEY&tab=KEY&layout=present`` (any of them; other
        keys are left alone). Returns what was applied; what could not be (an unknown scenario, tab
        or layout) is said in a line above the tabs, and the rest of the link still applies.

        >>> d = Dashboard(tabs=("graph", "executor"))
        >>> d.apply_query("tab=Executor&scenario=nope")
        {'tab': 'executor'}
        >>> "no scenario" in d.link_message.value
        True
        """
        from urllib.parse import parse_qs

        q = {k: v[-1].strip() for k, v in parse_qs(query.lstrip("?")).items() if v}
        applied: dict[str, str] = {}
        problems: list[str] = []
        steps = (("layout", self.set_page_layout), ("scenario", self.apply_scenario), ("tab", self.show))
        for key, apply in steps:
            value = q.get(key)
            if not value:
                continue
            if key == "tab":  # a tab by its key or its title, in any case
                value = next((k for k in self.panels if value.lower() in (k, PANELS[k][0].lower())), value)
            try:
                apply(value)
            except hs.errors.HetschedError as e:
                problems.append(str(e).strip("'\""))
            else:
                applied[key] = value
        self.link_message.value = (error_html(hs.errors.HetschedError("this link asked for what is not here: "
                                                                      + "; ".join(problems))) if problems else "")
        return applied

    def _on_page(self, change: dict) -> None:
        # the page is up (it sent its address): open what its link asks for. The hidden tabs' panels
        # are not built now: thirty pages building ~1250 widgets each at once sent ~37k messages
        # through the server while the class clicked (step p95 1.8 s, a scenario pick 15.7 s in the
        # class benchmark); each is built when its tab is first shown. What a first show would
        # otherwise wait for without any widget (the panels' code, the shipped measurement) is read
        # once the page is idle: no message leaves the kernel for it
        self.apply_query(change["new"])
        try:
            asyncio.get_running_loop().call_later(WARM_UP_DELAY_S, warm_up)
        except RuntimeError:  # no kernel loop (a test, a script): the first show reads them itself
            pass

    def link_query(self) -> str:
        """The query string of a link to what is shown now (scenario, tab, layout)."""
        from urllib.parse import urlencode

        keys = list(self.panels)
        tab = keys[self.tabs.selected_index] if self.tabs.selected_index is not None and keys else None
        parts = {"scenario": self.scenario.value or None, "tab": tab,
                 "layout": self.page_layout if self.page_layout != "full" else None}
        return "?" + urlencode({k: v for k, v in parts.items() if v})

    def _show_link(self) -> None:
        q = self.link_query()
        if self.address.link != q:
            self.address.link = q
        html = (f"<a href='{q}' title='a link that opens the dashboard on this scenario, tab and layout: "
                "copy it (or the address bar)'>link to this view</a>")
        if self.link.value != html:
            self.link.value = html


#: the presentation layout's page style: in a Voila page (body[data-voila]; JupyterLab is left alone),
#: the notebook cells other than the dashboard's are hidden and the page's margins made small
_PRESENT_CSS = """<style>
body[data-voila] .jp-Cell:not(:has(.hetsched-dashboard)) { display: none; }
body[data-voila] #rendered_cells, body[data-voila] .jp-Notebook { padding-top: 4px; }
body[data-voila] .jp-Cell:has(.hetsched-dashboard) { padding-top: 0; margin-top: 0; }
</style>"""

#: dashboards built ahead of demand by :func:`prepare` (with their arguments), taken by :meth:`Dashboard.prepared`
_PREPARED: list[tuple[dict[str, Any], Dashboard]] = []

#: seconds after the page is up before :func:`warm_up` runs (its first messages go out first)
WARM_UP_DELAY_S = 1.0


def warm_up() -> None:
    """Import every panel's code and read the shipped measurement (the Calibration tab's), with no
    widget: what a tab's first show would otherwise wait for (~0.1 s of imports for the Pipeline
    tab, ~0.2 s of reading for the Calibration tab in a fresh kernel). Run by :func:`prepare` and,
    in a kernel that was not prepared, once the page is up and idle; a second call costs nothing.

    >>> warm_up(); warm_up()
    """
    for _title, mod, _cls in PANELS.values():
        importlib.import_module(f".{mod}", __package__)
    from .calibration_panel import bundled_measurement

    try:
        bundled_measurement()
    except Exception:  # noqa: BLE001 - a missing or broken measurement is the tab's to report, when shown
        pass


def prepare(**kw: Any) -> Dashboard:
    """Build a dashboard now and keep it for the next :meth:`Dashboard.prepared` with the same
    arguments: what a warm kernel of ``hetsched app``'s pool runs before any student arrives (the
    imports, the panels, the first tab's result).

    >>> d = prepare(tabs=("graph",)); Dashboard.prepared(tabs=("graph",)) is d
    True
    >>> Dashboard.prepared(tabs=("graph",)) is d          # taken: the next page gets a new one
    False
    """
    from .figure import PLOTLY_URL_ENV, plotly_js_gz

    d = Dashboard(**kw)
    warm_up()  # the hidden tabs' code and data, so that a first show only builds
    if not os.environ.get(PLOTLY_URL_ENV):  # else the page takes plotly.js from the server, not the kernel
        plotly_js_gz()  # what the page's first figure asks for, compressed now rather than while a student waits
    _PREPARED.append((dict(kw), d))
    return d
