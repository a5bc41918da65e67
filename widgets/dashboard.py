"""Dashboard: tabs over every panel, all sharing one :class:`~hetsched.widgets.Session`.

The Graph tab loads a graph (bundled, generated or uploaded) into the session; every other tab
follows the session and recomputes on its own inputs. ``make app`` serves
``notebooks/dashboard.ipynb`` (which shows one ``Dashboard()``) with Voila.

>>> d = Dashboard(tabs=("graph", "executor"))
>>> d.titles
['Graph', 'Executor']
>>> d.panels["executor"].session is d.session
True
>>> d.panels["executor"].result is None            # a hidden tab computes when first shown
True
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
    "backends": ("Backends (seed 003)", "backend_panel", "BackendPanel"),
    "mapping": ("Mapping (seed 000)", "mapping_panel", "MappingPanel"),
    "pipeline": ("Pipeline (seed 001)", "pipeline_panel", "PipelinePanel"),
    "memory": ("Memory (seed 002)", "memory_panel", "MemoryPanel"),
    "executor": ("Executor", "executor_panel", "ExecutorPanel"),
}


class Dashboard(W.VBox):
    """All panels in tabs over one session.

    Parameters
    ----------
    tabs : iterable of str, optional
        Keys of :data:`PANELS` to show (default: all).
    graph, system : optional
        Loaded into the session first (default: the Graph panel's default graph, the toy system).

    Attributes
    ----------
    session : Session
    panels : dict
        Key -> panel (a tab whose panel could not be built shows why instead).
    """

    def __init__(self, tabs: Iterable[str] | None = None, *, graph: Any = None, system: Any = None, **kw: Any) -> None:
        self.session = Session()
        self.session.system = system if system is not None else hs.toy_system()
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
            self.titles.append(title.split(" (")[0])
            children.append(panel)
        self.tabs = W.Tab(children=children)
        self.tabs.titles = tuple(PANELS[k][0] for k in keys)
        self.tabs.observe(self._on_tab, names="selected_index")
        intro = W.HTML("<div class='hetsched-intro'>Load a graph in the first tab; every other tab schedules it "
                       "on the loaded system. A tab computes when it is shown.</div>")
        super().__init__([intro, self.tabs], **kw)
        self.add_class("hetsched-dashboard")

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
