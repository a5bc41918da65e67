"""The panel pattern every hetsched widget follows (see ARCHITECTURE.md, Widgets).

* One state object per panel (a ``traitlets.HasTraits``) holds the inputs; controls are
  ``link()``-ed to it; one observer recomputes the core result and updates the figures inside
  ``batch_update()``. Tests drive a panel headlessly by setting ``panel.state`` traits.
* Figures are :class:`~hetsched.widgets.figure.PlotlyView` s made once per panel; a redraw
  (:meth:`Panel.show_figure`) sends the browser only the properties that changed.
* A panel computes only while it is shown (``active``): a hidden dashboard tab whose inputs
  changed is marked stale and recomputes when it is next shown.
* A busy badge shows while the kernel computes; figures are greyed while they show a result that
  no longer matches the inputs (hidden and stale, or the last recompute failed).
* Errors from the core land in the panel's message line; the panel keeps its last good result and
  keeps working.
* Panels hold no algorithm logic: they call ``hetsched`` functions and replay ``result.steps``.

>>> import traitlets
>>> class S(traitlets.HasTraits):
...     n = traitlets.Int(1)
>>> class P(Panel):
...     def compute(self):
...         if self.state.n < 0:
...             from hetsched.errors import HetschedError
...             raise HetschedError("n must be >= 0", field="n")
...         return self.state.n * 2
...     def render(self, result):
...         self.last = result
>>> p = P(S()); p.result
2
>>> p.state.n = -1; p.result, "n must be" in p.message.value
(2, True)
>>> p.state.n = 4; p.result, p.message.value
(8, '')
"""

from __future__ import annotations

import base64
import contextlib
import gc
import html
import json
import os
import re
import time
from typing import Any, Callable, Iterable, Mapping

import ipywidgets as W
import pandas as pd
import traitlets

from hetsched.errors import HetschedError
from hetsched.params import Param, ParamSpec

from .figure import PlotlyView

__all__ = [
    "Panel", "Session", "StepWalker", "PlotlyView", "figure_widget", "download_link", "error_html", "ok_html",
    "controls_from_spec", "state_from_spec", "downloads_html", "link_clamped", "internal_error", "term", "PATENT_TERMS",
    "busy_html", "small_terms", "PAGE_LAYOUTS",
]

#: the ways a panel lays itself out (:meth:`Panel.set_page_layout`): ``full`` (every control and
#: explanation, as built) and ``present`` (for a projector: the main figure first, full width)
PAGE_LAYOUTS = ("full", "present")


def figure_widget(fig: Any) -> PlotlyView:
    """A :class:`~hetsched.widgets.figure.PlotlyView` showing ``fig`` (a figure from :mod:`hetsched.plot`).

    >>> import plotly.graph_objects as go
    >>> fw = figure_widget(go.Figure(go.Bar(x=[1], y=[2]), layout=dict(title="t")))
    >>> fw.data[0].type, fw.layout.title.text
    ('bar', 't')
    """
    return PlotlyView(fig)


def download_link(payload: bytes | str | pd.DataFrame | Mapping, filename: str, label: str | None = None) -> str:
    """An HTML link that downloads ``payload`` (a data: URI, so it works in Voila with no server code).

    >>> download_link({"a": 1}, "x.json").startswith('<a download="x.json"')
    True
    """
    if isinstance(payload, pd.DataFrame):
        from hetsched.io import to_csv_safe

        # cells starting with =, +, -, @ would run as formulas in a spreadsheet (issue 20)
        data, mime = to_csv_safe(payload).encode(), "text/csv"
    elif isinstance(payload, Mapping):
        data, mime = json.dumps(payload).encode(), "application/json"
    elif isinstance(payload, str):
        data, mime = payload.encode(), "text/plain"
    else:
        data, mime = payload, "application/octet-stream"
    b64 = base64.b64encode(data).decode()
    return (
        f'<a download="{html.escape(filename)}" href="data:{mime};base64,{b64}" '
        f'style="margin-right:1em">↓ {html.escape(label or filename)}</a>'
    )


def error_html(err: BaseException) -> str:
    culprit = ", ".join(
        f"{k} <code>{html.escape(str(v))}</code>" for k in ("op", "tensor", "device", "field") if (v := getattr(err, k, None))
    )
    return (
        '<div class="hetsched-error" style="color:#B00020;font-weight:600">⚠ '
        + html.escape(str(err))
        + (f" <span style='font-weight:400'>({culprit})</span>" if culprit else "")
        + "</div>"
    )


def internal_error(err: BaseException) -> HetschedError:
    """What a panel shows for an exception that is not a hetsched error: a bug, said plainly (as the
    CLI's catch-all says it), with the exception's type, never passed off as a problem with the input.

    >>> str(internal_error(ZeroDivisionError("division by zero")))  # doctest: +NORMALIZE_WHITESPACE
    'internal error: ZeroDivisionError: division by zero (a bug in hetsched, not in your input;
     please report it; the last good result stays on screen)'
    """
    return HetschedError(f"internal error: {type(err).__name__}: {err} (a bug in hetsched, not in your input; "
                         f"please report it; the last good result stays on screen)")


#: the patent's vocabulary: on screen only in small type beside plain words, or in a tooltip (issue 33)
PATENT_TERMS = r"\bclaims? \d+|\bA/P\b|system total latency|\bparagraphs? \d+"


def term(words: str) -> str:
    """The patent's term (or claim) for what was just said in plain words: small grey type (HTML).

    >>> term("the patent's system total latency, claim 5")
    "<small class='hetsched-term' style='color:#666'>(the patent&#x27;s system total latency, claim 5)</small>"
    """
    return f"<small class='hetsched-term' style='color:#666'>({html.escape(words)})</small>"


_CLAIM = r"(?:the patent's )?(?:claims?|paragraphs?) \d+(?:(?:[-–,;]| and | to )\s*\d+)*"
_PAREN_TERM = re.compile(r"\(([^()<>]*?\b(?:claims?|paragraphs?) \d[^()<>]*)\)")
_PREFIX_TERM = re.compile(rf"^({_CLAIM})(?: decided it)?: (.+)$", re.S)


def small_terms(text: str) -> str:
    """A core message (already HTML-escaped) with the patent's claim references in small type: a
    parenthesis citing claims or paragraphs, and a leading "claim 3: ..." moved after the words.

    >>> small_terms("sync kernels on the second stream (claim 3)")
    "sync kernels on the second stream <small class='hetsched-term' style='color:#666'>(claim 3)</small>"
    >>> small_terms("claim 3: sync kernels on the second stream")
    "sync kernels on the second stream <small class='hetsched-term' style='color:#666'>(claim 3)</small>"
    """
    m = _PREFIX_TERM.match(text.strip())
    if m:
        text = f"{m.group(2)} ({m.group(1)})"
    return _PAREN_TERM.sub(lambda g: f"<small class='hetsched-term' style='color:#666'>({g.group(1)})</small>", text)


def ok_html(text: str) -> str:
    return f'<div class="hetsched-ok" style="color:#1B5E20">{html.escape(text)}</div>'


_PREPARE = "prepare downloads (Chrome trace, tables)"
_READY = "downloads ready (click a link)"


def busy_html(what: str = "computing") -> str:
    """The busy badge: a spinner drawn by CSS (no glyph that needs an emoji font) and a word.

    >>> "hetsched-spinner" in busy_html("searching"), "searching" in busy_html("searching")
    (True, True)
    """
    return (f"<span class='hetsched-busy-badge' style='color:#8a5a00'><span class='hetsched-spinner'></span>"
            f"{html.escape(what)} …</span>")


_BUSY = busy_html()


_GC_FROZEN = False


def _freeze_startup_objects() -> bool:
    """Move every object alive now out of the garbage collector's reach (once per process).

    Why: a kernel that shows panels holds several hundred thousand long-lived objects from imports
    (Plotly's graph objects, pandas, the widget stack). Each full collection scans them all and adds 0.1-0.25 s to whichever interaction
    it lands in (measured in ``bench/bench_widgets.py``, long-session table). These objects live as
    long as the kernel, so freezing them (``gc.freeze``, Python >= 3.7) loses nothing; objects
    made afterwards (results, figures) are collected as usual. Set ``HETSCHED_GC_FREEZE=0`` to
    opt out. Returns whether it froze (False after the first call or when opted out).
    """
    global _GC_FROZEN
    if _GC_FROZEN or os.environ.get("HETSCHED_GC_FREEZE", "1") == "0":
        return False
    _GC_FROZEN = True
    # the first view pulls in the rest of the front-end stack (anywidget, comm): make one now so
    # that those objects are frozen too
    PlotlyView().close()
    gc.collect()  # garbage that exists now is freed first, not frozen
    gc.freeze()
    return True


class Panel(W.VBox):
    """Base of every panel: ``state`` -> ``compute()`` -> ``render(result)``, errors in ``message``.

    Subclasses implement ``compute()`` (call the core; return a result) and ``render(result)``
    (update figures/HTML in place), and build their controls in ``__init__`` before calling
    ``self._start()`` (or pass them as ``children``).

    Traits named in ``VIEW_TRAITS`` (a step slider, a time step, a colour choice) only redraw:
    their observer calls ``render(self.result)`` again without recomputing, which is how a panel
    walks ``result.steps`` without re-running the algorithm.

    A panel given a :class:`Session` recomputes when the session's graph or system changes
    (``follow_session``), so every tab of a dashboard shows the same graph. A panel that is not
    ``active`` (a hidden dashboard tab) does not recompute: it is marked stale and recomputes on
    :meth:`activate`.

    Attributes
    ----------
    state : HasTraits
        The inputs; any trait change recomputes (or redraws, for ``VIEW_TRAITS``).
    result : Any
        The last good result.
    figures : dict
        Named :class:`~hetsched.widgets.figure.PlotlyView` objects, made once per panel and then
        updated in place (what tests and Voila look at).
    message : ipywidgets.HTML
        The error/status line, cleared by the next success.
    busy : ipywidgets.HTML
        A badge shown while the panel computes.
    active : bool
        Whether the panel is shown (it computes only then).
    stale : bool
        Whether the figures show a result that no longer matches the inputs.
    downloads : ipywidgets.HTML
        Download links (Chrome trace, result tables) of the current result, built on demand by
        :meth:`prepare_downloads` (the ``download_button``) and cleared by every new result.
    download_area : ipywidgets.HBox
        The button and the links, where a panel shows them.
    last_refresh_s : float
        Wall time of the last ``refresh()`` (compute + render), for benchmarks.
    last_downloads_s : float
        Wall time of the last :meth:`prepare_downloads`.
    last_internal_error : BaseException or None
        The last exception that was not a hetsched error (a bug), with its traceback, for whoever
        debugs it; the message line names its type (:func:`internal_error`).

    Notes
    -----
    The downloads are not rebuilt on every recompute: serialising a Chrome trace and the tables
    of a 1k-op result (then base64 for a ``data:`` link) took about as long as the recompute and
    redraw together, for links most interactions never use. One click on "prepare downloads"
    builds them for the result on screen.
    """

    VIEW_TRAITS: tuple[str, ...] = ()

    def __init__(self, state: traitlets.HasTraits, children: Iterable[W.Widget] = (), *, autostart: bool = True,
                 session: "Session | None" = None, follow_session: bool = False, active: bool = True, **kw: Any):
        _freeze_startup_objects()
        self.state = state
        self.session = session if session is not None else Session()
        self.result: Any = None
        self.figures: dict[str, PlotlyView] = {}
        self.message = W.HTML("", layout=W.Layout(min_height="1.5em"))
        self.busy = W.HTML("")
        self.busy.add_class("hetsched-busy")
        # what this tab shows when nothing was loaded (its scenario) and what to notice in it
        self.scenario_note = W.HTML("")
        self.scenario_note.add_class("hetsched-scenario")
        # the same, folded for the presentation layout: one "what to notice" line, the rest behind a disclosure
        self.notice_line = W.HTML("")
        self.notice_line.add_class("hetsched-notice-line")
        self.page_layout = "full"
        self._layouts: dict[str, tuple[W.Widget, ...]] = {}
        self._deferred = False
        # the lines under a panel's controls: the scenario, the busy badge, then the error (if any)
        self.status = W.VBox([self.scenario_note,
                              W.HBox([self.busy, self.message], layout=W.Layout(min_height="1.5em", align_items="center"))])
        self._own: tuple[Any, Any] | None = None  # (graph, system) of this tab's scenario, built once
        self.active = bool(active)
        self.stale = False
        self.downloads = W.HTML("")
        self.download_button = W.Button(description=_PREPARE, icon="download", layout=W.Layout(width="auto"),
                                        tooltip="build download links for the Chrome trace and the result tables "
                                                "of the result shown")
        self.download_button.on_click(lambda _b: self.prepare_downloads())
        self.download_area = W.HBox([self.download_button, self.downloads], layout=W.Layout(align_items="center"))
        self.download_area.add_class("hetsched-download-area")
        #: this tab's result beside the same run on the previous machine (tabs with ``COMPARES_MACHINES``)
        self.machine_compare = W.HTML()
        self.n_updates = 0
        self.last_refresh_s = 0.0
        self.last_downloads_s = 0.0
        self._follow = follow_session
        self._held: set[str] = set()
        self._holding = False
        self._in_refresh = False
        # values of the traits changed since the last check_inputs(), as they were before: a refused
        # change is taken back to them
        self._unchecked: dict[str, Any] = {}
        self._reverting = False
        self.last_internal_error: BaseException | None = None
        super().__init__(children=list(children), **kw)
        self.add_class("hetsched-panel")
        if autostart:
            self._start()

    def _start(self) -> None:
        self._watch_resubmits()
        self.state.observe(self._on_change, names=traitlets.All)
        if self._follow:
            self.session.observe(self._on_session, names=["graph", "system"])
        self.session.observe(self._on_session, names=["cost"])  # every panel prices with the session's cost
        if not self.active:
            self._defer_children()
        self._recompute_or_stale()

    def _defer_children(self) -> None:
        """A hidden panel shows nothing until it is first shown (:meth:`activate`): a page then draws
        only the tab in view, not every control of every tab (a dashboard is ~860 widgets; a page
        built views for all of them before its first plot, issue 32)."""
        self._layouts.setdefault("full", tuple(self.children))
        self._deferred = True
        self.children = ()

    def _on_change(self, change: Mapping[str, Any]) -> None:
        if self._reverting:
            return  # a refused value is being taken back: what is on screen already matches
        if self._in_refresh and change["name"] in self.VIEW_TRAITS:
            return  # on_result() is adjusting the view; the refresh renders once afterwards
        self._unchecked.setdefault(change["name"], change["old"])
        if self._held:
            self._held.add("view" if change["name"] in self.VIEW_TRAITS else "compute")
            return
        if change["name"] in self.VIEW_TRAITS:
            self.redraw()
        else:
            self._recompute_or_stale()

    @property
    def cost(self) -> Any:
        """The cost model (or cost file) this panel prices with: its session's (``None``: the roofline)."""
        return self.session.cost

    def _on_session(self, change: Mapping[str, Any]) -> None:
        # a graph or system loaded, or taken back (None: the tab returns to its own scenario), or a new cost
        self._recompute_or_stale()

    def _recompute_or_stale(self) -> None:
        """Recompute now if shown, else mark the panel stale (it recomputes when shown)."""
        if self.active:
            self.refresh()
        else:
            self._mark_stale()

    # -- shown or hidden -----------------------------------------------------------
    def activate(self) -> bool:
        """The panel is shown: recompute if its inputs changed while it was hidden (returns whether it did).

        >>> import traitlets
        >>> class S(traitlets.HasTraits):
        ...     n = traitlets.Int(1)
        >>> class P(Panel):
        ...     def compute(self): return self.state.n
        ...     def render(self, r): pass
        >>> p = P(S(), active=False); p.result is None, p.stale
        (True, True)
        >>> p.state.n = 3; p.result is None                  # hidden: nothing computed
        True
        >>> p.activate(), p.result, p.stale
        (True, 3, False)
        """
        self.active = True
        if self._deferred:
            self._deferred = False
            self.children = self._layout_children(self.page_layout)
        if self.stale or self.result is None:
            self.refresh()
            return True
        return False

    def deactivate(self) -> None:
        """The panel is hidden: later input changes only mark it stale."""
        self.active = False

    def _mark_stale(self) -> None:
        self.stale = True
        for v in self.figures.values():
            v.stale = True

    def _set_stale(self, stale: bool) -> None:
        self.stale = stale
        for v in self.figures.values():
            if v.stale != stale:
                v.stale = stale

    @contextlib.contextmanager
    def hold(self):
        """Change several traits, then recompute (or redraw) once at the end of the block.

        >>> import traitlets
        >>> class S(traitlets.HasTraits):
        ...     a = traitlets.Int(0); b = traitlets.Int(0)
        >>> class P(Panel):
        ...     def compute(self): return self.state.a + self.state.b
        ...     def render(self, r): pass
        >>> p = P(S()); n = p.n_updates
        >>> with p.hold():
        ...     p.state.a = 1; p.state.b = 2
        >>> p.result, p.n_updates - n
        (3, 1)
        """
        if self._holding:
            yield
            return
        self._holding = True
        self._held = {"_"}  # non-empty: collect instead of acting
        try:
            yield
        finally:
            held, self._held, self._holding = self._held, set(), False
            if "compute" in held:
                if self.active:
                    self.refresh()
                else:
                    self._mark_stale()
            elif "view" in held:
                self.redraw()

    # -- public API ------------------------------------------------------------
    def load(self, graph: Any = None, system: Any = None) -> bool:
        """Show ``graph`` (and/or ``system``) built elsewhere: stored in the session, then recomputed.

        Returns whether the recompute succeeded (on failure the message says why).
        """
        # a panel pinned to a graph or system at construction shows the one given now (it used to
        # store it in the session only, return True and keep showing the old one)
        if graph is not None and self._fixed_graph is not None:
            self._fixed_graph = graph
        if system is not None and self._fixed_system is not None:
            self._fixed_system = system
        with self.session.hold_trait_notifications():
            if system is not None:
                self.session.system = system
            if graph is not None:
                self.session.graph = graph
        if not self._follow:  # a panel that follows the session already refreshed
            return self.refresh()
        return not self.message.value

    # -- to implement ---------------------------------------------------------
    def compute(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def render(self, result: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_inputs(self) -> None:
        """Refuse input values this panel cannot use: raise a :class:`HetschedError` saying which value
        and why (out of range, NaN, an unknown name), with ``field`` the trait. Default: accept all.

        Called before every recompute and redraw. A refused value never sticks: every trait changed
        since the last check returns to its value before the change, the message line says what was
        refused and why, and the result on screen stays; the next valid action clears the message. A
        control set by code shows the value in effect again (never a clamped one); a box a person typed
        into keeps what they typed, marked refused, so that typing the good value again clears it. An error the core raises
        later (an infeasible graph, an op no backend runs) is shown without taking anything back: the
        user may be half-way through a change of several controls.

        >>> import traitlets
        >>> class S(traitlets.HasTraits):
        ...     n = traitlets.Int(1)
        >>> class P(Panel):
        ...     def check_inputs(self):
        ...         if self.state.n < 0:
        ...             raise HetschedError(f"n = {self.state.n} refused: it must be >= 0", field="n")
        ...     def compute(self): return self.state.n
        ...     def render(self, r): pass
        >>> p = P(S()); p.state.n = -3
        >>> p.state.n, p.result, "n = -3 refused" in p.message.value
        (1, 1, True)
        """

    def _check_step(self, n_steps: int | None, name: str = "step") -> None:
        """Refuse a walked step outside ``0..n_steps`` (for :meth:`check_inputs`; ``None``: no result yet)."""
        k = getattr(self.state, name)
        if n_steps is not None and not 0 <= k <= n_steps:
            raise HetschedError(f"step {k} refused: this result has decisions 0..{n_steps}", field=name)

    def check_params(self, spec: ParamSpec, values: Mapping[str, Any], *, fields: Mapping[str, str] | None = None) -> None:
        """The static part of :meth:`check_inputs`: refuse what the core's parameter spec refuses
        (:meth:`hetsched.params.ParamSpec.check`: out of range, NaN, not whole, not a choice), in the
        spec's words, saying that the last good state stays. ``values`` are keyed by the spec's names;
        ``fields`` maps a name to this panel's trait when they differ (``{"f_s": "f_ms"}``).

        >>> from hetsched.params import Param, ParamSpec
        >>> import traitlets
        >>> class S(traitlets.HasTraits):
        ...     n = traitlets.Int(1)
        >>> class P(Panel):
        ...     def check_inputs(self):
        ...         self.check_params(ParamSpec([Param("n", "int", 1, min=0, max=9)]), {"n": self.state.n})
        ...     def compute(self): return self.state.n
        ...     def render(self, r): pass
        >>> p = P(S()); p.state.n = 12; p.state.n, "n = 12 is out of range: allowed 0 to 9; refused" in p.message.value
        (1, True)
        """
        try:
            spec.check(values, fields=fields)
        except HetschedError as e:
            raise HetschedError(f"{e}; refused, the last good value and result stay on screen", field=e.field) from None

    def _checked(self) -> bool:
        """Run :meth:`check_inputs`; on a refusal take the changes back and say why (returns whether all passed)."""
        changed, self._unchecked = self._unchecked, {}
        try:
            self.check_inputs()
        except HetschedError as e:
            ctl = self._typed_into
            if ctl is None:
                self._take_back(changed)
            else:
                # typed in the browser: the state goes back, the box keeps what was typed (marked refused), so
                # that typing the good value again is a change the browser sends (issue 33)
                self.state._keep_typed = True  # the links leave the controls as they are (keep_typed)
                try:
                    self._take_back(changed)
                finally:
                    self.state._keep_typed = False
                ctl.add_class("hetsched-refused")
                self._refused_ctl = ctl
            self.message.value = self._refused_html = error_html(e)
            self._n_refusals += 1
            return False
        except Exception as e:  # a bug in a check must not kill the panel either
            self._failed(self._internal(e))
            return False
        return True

    def _take_back(self, old: Mapping[str, Any]) -> None:
        self._reverting = True
        try:
            for name, value in old.items():
                if getattr(self.state, name) is not value:
                    setattr(self.state, name, value)
        finally:
            self._reverting = False

    def _internal(self, err: BaseException) -> HetschedError:
        self.last_internal_error = err
        return internal_error(err)

    def on_result(self, result: Any) -> None:
        """Called with each new result before it is rendered: fit view traits to it (step ranges).

        Changes of ``VIEW_TRAITS`` made here do not trigger a redraw of their own.
        """

    def download_items(self, result: Any) -> list[tuple[Any, str]]:
        """``[(payload, filename), ...]`` offered for download (default none); see :meth:`prepare_downloads`."""
        return []

    def prepare_downloads(self) -> bool:
        """Build the download links of the current result (what the "prepare downloads" button does).

        Returns whether links were built; a failed export shows its message in place of the links.

        >>> import traitlets
        >>> class S(traitlets.HasTraits):
        ...     n = traitlets.Int(1)
        >>> class P(Panel):
        ...     def compute(self): return self.state.n
        ...     def render(self, r): pass
        ...     def download_items(self, r): return [({"n": r}, "n.json")]
        >>> p = P(S()); p.downloads.value
        ''
        >>> p.download_button.click(); 'download="n.json"' in p.downloads.value
        True
        >>> p.state.n = 2; p.downloads.value     # a new result clears links to the old one
        ''
        """
        t0 = time.perf_counter()
        if self.result is None:
            self.downloads.value = ""
            return False
        try:
            items = self.download_items(self.result)
        except Exception as e:  # a failed export must not break the panel
            why = e if isinstance(e, HetschedError) else self._internal(e)
            self.downloads.value = error_html(HetschedError(f"download not available: {why}"))
            self.last_downloads_s = time.perf_counter() - t0
            return False
        self.downloads.value = downloads_html(items) if items else "<i>nothing to download for this result</i>"
        self.download_button.description = _READY
        self.last_downloads_s = time.perf_counter() - t0
        return bool(items)

    def _clear_downloads(self) -> None:
        if self.downloads.value:
            self.downloads.value = ""
        if self.download_button.description != _PREPARE:
            self.download_button.description = _PREPARE

    # -- the loop ----------------------------------------------------------------
    def refresh(self) -> bool:
        """Check the inputs, recompute and redraw; on a hetsched error show it and keep the last good result.

        An exception that is not a hetsched error is a bug: the message line says so (an "internal
        error", naming the exception's type), the panel keeps its last good result and keeps working.
        """
        t0 = time.perf_counter()
        self.busy.value = _BUSY  # sent at once: the browser shows it while the kernel computes
        self._figures_busy(True)  # each figure greyed under a spinner (or "computing ..." before its first result)
        try:
            if not self._checked():
                return False  # refused: taken back, nothing to recompute
            try:
                result = self.compute()
            except HetschedError as e:
                self._failed(e)
                return False
            except Exception as e:  # a bug must not kill the panel either; say plainly that it is one
                self._failed(self._internal(e))
                return False
            self._compute_error = None
            previous, self.result = self.result, result
            self._in_refresh = True
            try:
                self.on_result(result)
                ok = self._render_guarded(result)
            finally:
                self._in_refresh = False
            if not ok and previous is not None:
                self.result = previous  # the new result could not be drawn: keep what is on screen coherent
            if ok:  # links to the previous result must not stay on screen; new ones are built on demand
                self._clear_downloads()
                self._set_stale(False)
            else:
                self._set_stale(True)
            return ok
        finally:
            self.busy.value = ""
            self._figures_busy(False)
            self.last_refresh_s = time.perf_counter() - t0

    def _figures_busy(self, on: bool) -> None:
        for v in self.figures.values():
            if v.busy != on:
                v.busy = on

    #: the message of the last failed recompute, until a recompute succeeds (a redraw of the old,
    #: greyed result for a view change must not clear it: the inputs on screen still fail)
    _compute_error: str | None = None
    #: the message of the last refused value while it is on screen, and how many refusals there were
    _refused_html: str | None = None
    _n_refusals = 0
    #: the control whose browser update is being handled (a refusal then leaves the typed value in it)
    _typed_into: Any = None
    #: the control that shows a refused value (marked until a good value arrives)
    _refused_ctl: Any = None

    def _watch_resubmits(self) -> None:
        """Let a control's value typed again clear a refusal (issue 33).

        A refused value is taken back, so the control holds the good value again; when the user then
        types that good value into it, the browser sends a value equal to the kernel's and traitlets
        drops it as no change: no observer runs, and the refusal stayed on screen for good. Each
        control of ``control_widgets`` is watched where the browser's update arrives (``set_state``):
        a value arriving that is not refused clears a refusal still on screen (a changed value
        recomputes as usual, which clears it too; a stale panel recomputes).
        """
        for ctl in list(getattr(self, "control_widgets", {}).values()):
            if not isinstance(ctl, W.Widget) or getattr(ctl, "_hetsched_watched", False):
                continue
            ctl._hetsched_watched = True
            orig = ctl.set_state

            def set_state(sync_data, _orig=orig, _ctl=ctl):
                n = self._n_refusals
                outer, self._typed_into = self._typed_into, _ctl
                try:
                    _orig(sync_data)
                finally:
                    self._typed_into = outer
                if "value" in sync_data and self._n_refusals == n:
                    self._resubmitted()

            ctl.set_state = set_state

    def _resubmitted(self) -> None:
        """A control got a value that was not refused: a refusal still on screen goes; a stale panel recomputes."""
        self._unmark_refused()
        if self._refused_html is not None and self.message.value == self._refused_html:
            self._refused_html = None
            self.message.value = self._compute_error or ""
            if self.stale and self.active:
                self.refresh()

    def _unmark_refused(self) -> None:
        ctl, self._refused_ctl = self._refused_ctl, None
        if ctl is not None:
            ctl.remove_class("hetsched-refused")

    def _failed(self, err: BaseException) -> None:
        """A recompute failed: say why; the figures still show the last good result, greyed."""
        self._compute_error = self.message.value = error_html(err)
        if self.result is not None:
            self._set_stale(True)

    def redraw(self) -> bool:
        """Render the current result again (a view trait changed); no recompute."""
        if self.result is None:
            return self.refresh()
        if not self._checked():
            return False
        return self._render_guarded(self.result)

    def _render_guarded(self, result: Any) -> bool:
        try:
            # every figure's update leaves in one burst at the end of render: the browser gets them
            # together and draws them back to back, not one per kernel computation
            with contextlib.ExitStack() as stack:
                for v in list(self.figures.values()):
                    stack.enter_context(v.hold_sync())
                self.render(result)
            # work that may follow the burst (the browser draws it while the kernel goes on)
            self.after_render(result)
        except HetschedError as e:
            self.message.value = error_html(e)
            return False
        except Exception as e:  # a bug: said plainly, the panel keeps working
            self.message.value = error_html(self._internal(e))
            return False
        self.message.value = self._compute_error or ""
        self._unmark_refused()
        self._update_scenario_note()
        try:
            self._render_machine_compare(result)
        except HetschedError as e:
            self.machine_compare.value = error_html(e)
        self.n_updates += 1
        return True

    def after_render(self, result: Any) -> None:
        """Called after :meth:`render`'s figures have left for the browser: slower, secondary views
        (a comparison that runs other algorithms) go here, so the browser draws the main figures
        while the kernel computes them. Errors are shown as :meth:`render`'s are. Default: nothing."""

    # -- the machine (issue 33) ---------------------------------------------------------
    #: whether the tab shows a machine bar (every tab that schedules on a machine)
    MACHINE_BAR = False
    #: whether the tab sets its result beside the same run on the previous machine (``machine_metrics``)
    COMPARES_MACHINES = False
    _machine_bar: Any = None
    _compare_machine = True
    _machine_compare_key: Any = None

    @property
    def machine_bar(self) -> Any:
        """The tab's :class:`~hetsched.widgets.machine.MachineBar` (made on first use, when the panel lays out)."""
        if self._machine_bar is None:
            from .machine import MachineBar

            self._machine_bar = MachineBar(self, compare=self.COMPARES_MACHINES)
        return self._machine_bar

    def machine(self) -> Any:
        """The machine this tab schedules on: the session's, else its own scenario's (what its bar shows)."""
        return self._session_system()

    def own_machine_name(self) -> str:
        """The name of the machine the tab uses when the session holds none (the picker's first entry)."""
        sc = self.own_scenario()
        return self._own_inputs()[1].name if sc is not None else ""

    def machine_metrics(self, system: Any, result: Any = None) -> dict[str, tuple[Any, str]]:
        """This tab's numbers on ``system``: ``{words: (value, metric key)}`` of ``result`` (the run on screen)
        when given, else of the same inputs run on ``system`` (a tab with ``COMPARES_MACHINES`` overrides it).
        The key formats the value (:func:`hetsched.plot.format_value`); ``""`` keeps it as text."""
        return {}

    def show_machine_compare(self, on: bool = True) -> None:
        """Show (or hide) the run on the previous machine beside this one (the bar's checkbox)."""
        self._compare_machine = bool(on)
        self._machine_compare_key = None
        if self.result is not None:
            self._render_machine_compare(self.result)

    def _render_machine_compare(self, result: Any) -> None:
        if not self.COMPARES_MACHINES:
            return
        prev = self.session.previous_system
        try:
            cur = self.machine()
        except HetschedError:
            cur = None
        if not self._compare_machine or prev is None or cur is None or prev is cur:
            if self.machine_compare.value:
                self.machine_compare.value = ""
            self._machine_compare_key = None
            return
        key = (id(result), id(prev), id(cur))
        if key == self._machine_compare_key:
            return
        from hetsched.plot import format_value

        now = self.machine_metrics(cur, result)
        try:
            before = self.machine_metrics(prev)
            why = ""
        except HetschedError as e:
            before, why = {}, str(e)
        rows = []
        for words, (v, k) in now.items():
            b = before.get(words, (None, k))[0]
            show = (lambda x: format_value(x, k) if k and x is not None else html.escape("–" if x is None else str(x)))
            change = ""
            if k and isinstance(v, (int, float)) and isinstance(b, (int, float)) and b:
                change = f"{(v / b - 1):+.0%}"
            rows.append(f"<tr><td>{html.escape(words)}</td><td><b>{show(v)}</b></td><td>{show(b)}</td><td>{change}</td></tr>")
        note = (f"<div style='color:#B00020'>On the previous machine: {html.escape(why)}</div>" if why else "")
        self.machine_compare.value = (
            "<div class='hetsched-machine-compare'><b>This machine against the previous one</b> "
            "<span style='color:#555'>(the same graph and settings on both)</span>"
            f"<table class='hetsched-table'><tr><th></th><th>now: {html.escape(cur.name)}</th>"
            f"<th>previous: {html.escape(prev.name)}</th><th>change</th></tr>{''.join(rows)}</table>{note}</div>")
        self._machine_compare_key = key

    # -- shared inputs -------------------------------------------------------------
    _fixed_graph: Any = None
    _fixed_system: Any = None
    #: the dashboard tab this panel is (its scenario in :data:`hetsched.scenarios.TAB_SCENARIO`)
    TAB: str | None = None

    def own_scenario(self) -> Any:
        """This tab's :class:`~hetsched.scenarios.Scenario` (``None`` for a panel without one)."""
        from hetsched.scenarios import SCENARIOS, TAB_SCENARIO

        key = TAB_SCENARIO.get(self.TAB or "")
        return SCENARIOS.get(key) if key else None

    def uses_own_scenario(self) -> bool:
        """Whether the panel shows its tab's scenario (nothing pinned or loaded into the session)."""
        return self._fixed_graph is None and self.session.graph is None and self.own_scenario() is not None

    def _own_inputs(self) -> tuple[Any, Any]:
        if self._own is None:
            self._own = self.own_scenario().load()
        return self._own

    def _session_graph(self, default: Any) -> Any:
        """The graph this panel works on: one pinned at construction, else the session's, else the
        tab's own scenario (or ``default()`` for a panel without one).

        Nothing is written into the session: each tab of a dashboard shows its own example until
        the user loads a graph (Graph tab, scenario picker, :meth:`load`), which every tab follows.
        """
        if self._fixed_graph is not None:
            return self._fixed_graph
        if self.session.graph is not None:
            return self.session.graph
        if self.own_scenario() is not None:
            return self._own_inputs()[0]
        if self._own is None:
            self._own = (default(), None)
        return self._own[0]

    def _session_system(self) -> Any:
        """The system: one pinned at construction, else the session's, else the tab's scenario's
        when the graph is the scenario's too, else the toy system."""
        if self._fixed_system is not None:
            return self._fixed_system
        if self.session.system is not None:
            return self.session.system
        if self.uses_own_scenario():
            return self._own_inputs()[1]
        # one object per panel: results and caches keyed by the system's identity (the mapping
        # comparison's baselines) must not be recomputed because a fresh copy was built
        toy = getattr(self, "_toy_system", None)
        if toy is None:
            import hetsched as hs

            toy = self._toy_system = hs.toy_system()
        return toy

    def _update_scenario_note(self) -> None:
        """Say which example the tab shows and what to notice in it (or the picked scenario's notice)."""
        import html as _html

        sc, own = None, False
        if self.uses_own_scenario():
            sc, own = self.own_scenario(), True
        elif getattr(self.session, "scenario", None):
            from hetsched.scenarios import SCENARIOS

            picked = SCENARIOS.get(self.session.scenario)
            sc = picked if picked is not None and picked.tab == self.TAB else None
        box = "<div style='padding:4px 8px;border-left:4px solid #0072B2;background:#F3F8FC'>"
        meant = _scenario_machine(sc) if sc is not None else None
        try:
            shown = self.machine().name if sc is not None else None
        except HetschedError:
            shown = meant
        where = (" This tab's own example: load a graph in the Graph tab (or pick a scenario) to schedule yours."
                 if own else "")
        if sc is None:
            text = ""
        elif shown != meant:
            # the notice was written for the scenario's machine: on another one it need not hold (issue 33)
            text = (f"{box}<b>{_html.escape(sc.title)}</b>: its graph on <b>{_html.escape(str(shown))}</b>, the machine "
                    f"picked in the machine bar. What this example points out was seen on "
                    f"<i>{_html.escape(str(meant))}</i>; compare the two, or pick that machine again.</div>")
        else:
            text = (f"{box}<b>{_html.escape(sc.title)}</b>. What to notice: {small_terms(_html.escape(sc.notice))}"
                    f"<i>{_html.escape(where)}</i></div>")
        if self.scenario_note.value != text:
            self.scenario_note.value = text
        line = "" if sc is None else notice_html(sc.title, sc.notice, where)
        if self.notice_line.value != line:
            self.notice_line.value = line

    # -- page layouts ----------------------------------------------------------------
    #: the figures the presentation layout puts first, full width (names in ``figures``); empty: the
    #: first figure the panel lays out
    MAIN_FIGURES: tuple[str, ...] = ()

    def main_figures(self) -> list[PlotlyView]:
        """The views the presentation layout shows first: ``MAIN_FIGURES``, else the first one laid out."""
        if self.MAIN_FIGURES:
            return [self.figure_view(n) for n in self.MAIN_FIGURES]
        first = next((w for w in _walk(self._layouts.get("full", self.children)) if isinstance(w, PlotlyView)), None)
        return [first] if first is not None else []

    def set_page_layout(self, name: str) -> None:
        """Lay the panel out for reading at a desk (``"full"``, as built) or for a projector (``"present"``).

        The presentation layout shows, top to bottom: one row of controls (the step buttons of the
        decision walker, a "settings" switch that unfolds every other control, the busy badge and
        the message line), the main figure(s) at full width (:meth:`main_figures`), the current
        decision in words, a one-line "what to notice" whose rest unfolds on a click, and a
        disclosure holding everything else the full layout shows. The same widgets are rearranged:
        the state, the result and what the controls say are kept.

        >>> import traitlets
        >>> class S(traitlets.HasTraits):
        ...     n = traitlets.Int(1)
        >>> class P(Panel):
        ...     def compute(self): return self.state.n
        ...     def render(self, r): self.show_figure("f", {"data": [{"type": "bar", "y": [r]}]})
        >>> p = P(S(), autostart=False)
        >>> p.controls = W.HBox([W.IntText()]); p.children = [p.controls, p.status, p.figure_view("f")]; p._start()
        >>> p.set_page_layout("present"); p.children.index(p.figures["f"]), p.page_layout   # below one row of controls
        (2, 'present')
        >>> p.set_page_layout("full"); p.children[0] is p.controls
        True
        """
        if name not in PAGE_LAYOUTS:
            raise HetschedError(f"no page layout {name!r}; choose from {list(PAGE_LAYOUTS)}", field="layout")
        self._layouts.setdefault("full", tuple(self.children))
        if name == self.page_layout:
            return
        if not self._deferred:  # a panel not shown yet is laid out when first shown
            self.children = self._layout_children(name)
        if name == "present":
            self.add_class("hetsched-present")
        else:
            self.remove_class("hetsched-present")
        self.page_layout = name

    def _layout_children(self, name: str) -> tuple[W.Widget, ...]:
        if name not in self._layouts:
            self._layouts[name] = self._present_children()
        return self._layouts[name]

    def _present_children(self) -> tuple[W.Widget, ...]:
        full = self._layouts["full"]
        main = self.main_figures()
        controls = getattr(self, "controls", None)
        walker = getattr(self, "walker", None)
        stepper = getattr(walker, "stepper", None)
        step_text = getattr(self, "step_text", None)
        shown = {id(w) for w in (*main, controls, self.status, stepper, step_text) if w is not None}
        settings = W.VBox([controls] if controls is not None else [])
        settings.add_class("hetsched-present-settings")
        settings.layout.display = "none"
        toggle = W.ToggleButton(value=False, description="settings", icon="sliders",
                                tooltip="show every control of this tab", layout=W.Layout(width="auto"))
        toggle.observe(lambda ch: setattr(settings.layout, "display", "flex" if ch["new"] else "none"), names="value")
        bar = W.HBox([*([stepper] if stepper is not None else []), *([toggle] if controls is not None else []),
                      self.busy, self.message], layout=W.Layout(flex_flow="row wrap", align_items="center"))
        bar.add_class("hetsched-present-bar")
        rest = [c for c in (_without(ch, shown) for ch in full) if c is not None]
        more = W.Accordion(children=[W.VBox(rest)], selected_index=None)
        more.set_title(0, "more: the full explanation, other figures, tables and downloads")
        more.add_class("hetsched-present-more")
        return (bar, settings, *main, *([step_text] if step_text is not None else []), self.notice_line, more)

    def show_error(self, err: BaseException) -> None:
        self.message.value = error_html(err)

    def run_busy(self, doing: str, fn: Callable[[], Any]) -> tuple[bool, Any]:
        """Run ``fn`` (work a button asked for) under the busy badge saying ``doing``; an error is shown
        in the panel, never raised. Returns ``(True, fn())``, or ``(False, None)`` after an error.

        >>> import traitlets
        >>> class S(traitlets.HasTraits):
        ...     n = traitlets.Int(1)
        >>> class P(Panel):
        ...     def compute(self): return self.state.n
        ...     def render(self, r): pass
        >>> p = P(S())
        >>> p.run_busy("adding", lambda: 1 + 1), p.busy.value
        ((True, 2), '')
        >>> p.run_busy("dividing", lambda: 1 / 0)[0], "hetsched-error" in p.message.value
        (False, True)
        """
        self.busy.value = busy_html(doing)
        try:
            return True, fn()
        except HetschedError as e:
            self.show_error(e)
        except Exception as e:  # a bug must not kill the panel; say plainly that it is one
            self.show_error(self._internal(e))
        finally:
            self.busy.value = ""
        return False, None

    def figure_view(self, name: str) -> PlotlyView:
        """The view named ``name``, made (empty) on first use: lay it out, then :meth:`show_figure` fills it."""
        v = self.figures.get(name)
        if v is None:
            v = self.figures[name] = PlotlyView()
            v.stale = self.stale
        return v

    def show_figure(self, name: str, fig: Any) -> PlotlyView:
        """Show ``fig`` (a figure from a :mod:`hetsched.plot` builder) in the view named ``name``.

        The view stays the same widget; only the properties that differ from what it shows travel
        to the browser (:meth:`PlotlyView.show`), so stepping through a log sends a few arrays and
        shapes, not a figure.
        """
        v = self.figure_view(name)
        v.warm_gl = self._expects_webgl()
        v.show(fig)
        return v

    def _expects_webgl(self) -> bool:
        """Whether the graph every tab follows is big enough for some tab to draw it with WebGL.

        Then the page sets up WebGL while idle (``warm_gl``), so that tab's first view does not pay for
        it; a page of small graphs never makes a WebGL context.
        """
        drawn = getattr(self, "drawn_graph", None)
        # the session's graph, and the one this panel draws
        return webgl_sized(self.session.graph) or webgl_sized(drawn() if drawn is not None else None)


_SCENARIO_MACHINES: dict[str, str] = {}


def _scenario_machine(sc: Any) -> str:
    """The name of a scenario's machine (built once per scenario)."""
    if sc.key not in _SCENARIO_MACHINES:
        _SCENARIO_MACHINES[sc.key] = sc.system().name
    return _SCENARIO_MACHINES[sc.key]


def notice_html(title: str, notice: str, where: str = "") -> str:
    """A scenario's "what to notice" folded to one line: its first sentence, the rest (and the
    scenario's title) behind a click (an HTML ``<details>``).

    >>> line = notice_html("T", "First this. Then that.")
    >>> "First this." in line.split("</summary>")[0], "Then that." in line.split("</summary>")[1]
    (True, True)
    """
    import html as _html
    import re

    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(])", notice.strip(), maxsplit=1)
    first, rest = parts[0], " ".join(t.strip() for t in (*parts[1:], where) if t.strip())
    return ("<details class='hetsched-notice' style='padding:2px 8px;border-left:4px solid #0072B2;background:#F3F8FC'>"
            f"<summary style='cursor:pointer'><b>What to notice:</b> {_html.escape(first)}</summary>"
            f"<div><b>{_html.escape(title)}</b>. {_html.escape(rest)}</div></details>")


def _walk(children: Iterable[Any]) -> Iterable[Any]:
    """Every widget under ``children``, depth first, in layout order."""
    for w in children:
        yield w
        yield from _walk(getattr(w, "children", ()) or ())


def _without(widget: Any, drop: set[int]) -> Any:
    """``widget`` with the widgets whose ids are in ``drop`` taken out: ``None`` for a dropped widget,
    a new box of the same kind and layout for a box that holds one somewhere, else ``widget`` itself
    (a widget shown twice would be drawn twice)."""
    if id(widget) in drop:
        return None
    kids = getattr(widget, "children", None)
    if not isinstance(widget, W.Box) or not kids or not any(id(w) in drop for w in _walk(kids)):
        return widget
    if isinstance(widget, W.widgets.widget_selectioncontainer._SelectionContainer):
        return widget  # an accordion or tabs: kept whole
    kind = W.HBox if isinstance(widget, W.HBox) else W.VBox if isinstance(widget, W.VBox) else W.Box
    box = kind(children=[c for c in (_without(k, drop) for k in kids) if c is not None],
                       layout=W.Layout(**{k: getattr(widget.layout, k) for k in ("flex_flow", "width", "align_items")
                                          if getattr(widget.layout, k, None)}))
    for name in widget._dom_classes:
        box.add_class(name)
    return box


def webgl_sized(graph: Any) -> bool:
    """Whether some tab draws ``graph`` with WebGL: the Mapping tab's placement graph turns to WebGL
    markers beyond :data:`~hetsched.plot.mapping.GRAPH_WEBGL_NODES` ops."""
    from hetsched.plot.mapping import GRAPH_WEBGL_NODES

    return graph is not None and getattr(graph, "n_ops", 0) > GRAPH_WEBGL_NODES


class StepWalker(W.HBox):
    """A step slider with prev/next buttons, linked to an ``Int`` trait ``name`` of ``state``.

    ``set_count(n)`` sets the range to ``0..n`` (step 0 = before the first decision).

    >>> class S(traitlets.HasTraits):
    ...     step = traitlets.Int(0)
    >>> s = S(); w = StepWalker(s, "step"); w.set_count(3)
    >>> w.next.click(); w.next.click(); s.step
    2
    >>> w.prev.click(); s.step
    1
    """

    def __init__(self, state: traitlets.HasTraits, name: str = "step", *, description: str = "step"):
        self._state, self._name = state, name
        self.slider = W.IntSlider(min=0, max=0, value=0, description=description, continuous_update=False,
                                  layout=W.Layout(width="420px"))
        from .stepbutton import StepButton

        # quick clicks are coalesced in the browser: one redraw for a burst, not one per click
        self.prev = StepButton("◀ prev", -1, on_move=self._move, tooltip="previous step")
        self.next = StepButton("next ▶", +1, on_move=self._move, tooltip="next step")
        W.link((state, name), (self.slider, "value"))
        super().__init__([self.prev, self.slider, self.next])

    def _move(self, d: int) -> None:
        v = getattr(self._state, self._name) + d
        setattr(self._state, self._name, max(self.slider.min, min(self.slider.max, v)))

    def set_count(self, n: int) -> None:
        n = max(0, int(n))
        self.slider.max = n
        if getattr(self._state, self._name) > n:
            setattr(self._state, self._name, n)


def state_from_spec(spec: Iterable[Param], name: str = "SpecState", **extra: traitlets.TraitType) -> traitlets.HasTraits:
    """A ``HasTraits`` instance with one trait per :class:`~hetsched.params.Param` of a spec (UI
    parameters as data, declared in the core), starting at its default. ``extra`` adds more traits.

    >>> from hetsched.params import Param
    >>> st = state_from_spec([Param("k", "int", 2)])
    >>> st.k
    2
    """
    traits: dict[str, traitlets.TraitType] = {}
    for p in spec:
        kind, d, none = p.kind, p.default, p.allow_none
        if kind == "choice":
            traits[p.name] = traitlets.Enum(list(p.options), default_value=d)
        elif kind == "int":
            traits[p.name] = traitlets.Int(None if d is None else int(d), allow_none=none)
        elif kind == "float":
            traits[p.name] = traitlets.Float(None if d is None else float(d), allow_none=none)
        elif kind == "bool":
            traits[p.name] = traitlets.Bool(bool(d))
        else:
            traits[p.name] = traitlets.Any(d)
    traits.update(extra)
    return type(name, (traitlets.HasTraits,), traits)()


def controls_from_spec(state: traitlets.HasTraits, spec: Iterable[Param]) -> dict[str, W.Widget]:
    """One control per :class:`~hetsched.params.Param`, linked to ``state`` (state first: it holds the
    values), labelled in the spec's words; numbers are shown as a person reads them (the ``display``
    factor and unit: seconds in microseconds) while the trait keeps SI units.

    Number boxes do not clamp: a value outside the spec's bounds reaches the state as typed, for the
    panel's :meth:`Panel.check_params` to refuse with a message (a clamping box would silently run
    with another value). A parameter that may be empty (``allow_none``) gets a text box: empty is
    ``None``.

    >>> from hetsched.params import Param
    >>> spec = [Param("p", "choice", "a", options=("a", "b")), Param("m", "int", 4, min=1, max=8),
    ...         Param("w_s", "float", None, min=0.0, allow_none=True, unit="s", display=(1e3, "ms"))]
    >>> st = state_from_spec(spec); c = controls_from_spec(st, spec)
    >>> c["p"].value = "b"; c["m"].value = 99; st.p, st.m         # 99: refused by the panel, not clamped
    ('b', 99)
    >>> c["w_s"].value = "2.5"; st.w_s; c["w_s"].value = ""; st.w_s is None
    0.0025
    True
    """
    out: dict[str, W.Widget] = {}
    style = {"description_width": "initial"}
    for p in spec:
        n, kind, tip = p.name, p.kind, p.help
        unit = p.shown_unit
        label = p.words + (f" ({unit})" if unit else "")
        box = {"description": label, "tooltip": tip, "style": style, "layout": W.Layout(width="220px")}
        if kind == "choice":
            ctl = W.Dropdown(options=list(p.options), description=p.words, tooltip=tip, style=style)
            link_clamped(state, n, ctl)
        elif kind in ("int", "float") and p.allow_none:
            ctl = W.Text(placeholder="empty: none", **box)
            _text_number_link(state, n, ctl, p.factor, kind == "int")
        elif kind == "int":
            ctl = W.IntText(**box)
            link_clamped(state, n, ctl)
        elif kind == "float":
            ctl = W.FloatText(step=p.display_bounds()[2] or 0.1, **box)
            _scaled_link(state, n, ctl, p.factor)
        elif kind == "bool":
            ctl = W.Checkbox(description=p.words, tooltip=tip, indent=False)
            link_clamped(state, n, ctl)
        else:
            continue
        out[n] = ctl
    return out


def _text_number_link(state: traitlets.HasTraits, name: str, ctl: W.Text, f: float, integer: bool) -> None:
    """A number that may be ``None`` in a text box: empty is ``None``, else ``text / f``; text that is
    no number is put back to the state's value."""

    def show(v: Any) -> str:
        return "" if v is None else format(v * f, "g") if not integer else str(int(v))

    ctl.value = show(getattr(state, name))

    def to_ctl(change):
        if keep_typed(state) or (ctl.value.strip() == "" and change["new"] is None):
            return
        ctl.value = show(change["new"])

    def to_state(change):
        text = change["new"].strip()
        try:
            v = None if text == "" else (int(text) if integer else float(text) / f)
        except ValueError:
            ctl.value = show(getattr(state, name))
            return
        if v != getattr(state, name):
            setattr(state, name, v)

    state.observe(to_ctl, names=name)
    ctl.observe(to_state, names="value")


def keep_typed(state: Any) -> bool:
    """Whether a refused value typed into a box is being taken back: the links then leave the boxes
    showing what was typed (the panel marks it refused), so that typing the good value again is a
    change the browser sends (issue 33)."""
    return bool(getattr(state, "_keep_typed", False))


def link_clamped(state: traitlets.HasTraits, name: str, ctl: W.Widget) -> None:
    """Link a control (slider, bounded box) to a trait without letting the control's clamping write back.

    With a plain ``link``, setting the trait outside the control's range makes the control clamp
    and write the clamped value back, hiding a bad input instead of reporting it, and a value the
    control rejects breaks the link ("TraitError: Broken link"). Here the trait wins: only the
    user's edits of the control flow back, and a value the control cannot show is left to the
    panel to refuse.

    >>> class S(traitlets.HasTraits):
    ...     m = traitlets.Int(5)
    >>> s = S(); sl = W.IntSlider(min=1, max=10); link_clamped(s, "m", sl)
    >>> s.m = 0; s.m, sl.value
    (0, 1)
    >>> sl.value = 7; s.m
    7
    """
    syncing = [False]

    def to_ctl(change):
        if keep_typed(state):
            return
        syncing[0] = True
        try:
            ctl.value = change["new"]
        except traitlets.TraitError:
            # a value the control cannot show (NaN in a bounded box, a choice it lacks): the panel
            # refuses it with a message and restores the last good one; a plain link would raise
            # "TraitError: Broken link" here and leave the bad value in place (issue 20)
            pass
        finally:
            syncing[0] = False

    def to_state(change):
        if not syncing[0]:
            setattr(state, name, change["new"])

    to_ctl({"new": getattr(state, name)})
    state.observe(to_ctl, names=name)
    ctl.observe(to_state, names="value")


def _scaled_link(state: traitlets.HasTraits, name: str, ctl: W.Widget, f: float) -> None:
    """Show ``state.name * f`` in ``ctl``; write back ``ctl.value / f`` only when it is a real edit.

    A plain pair of ``dlink`` s would round-trip every value through ``* f / f`` and nudge the
    trait by an ulp (3e-6 -> 3.0000000000000005e-06), which recomputes for nothing.
    """
    import math

    ctl.value = getattr(state, name) * f

    def to_ctl(change):
        if not keep_typed(state) and not math.isclose(ctl.value, change["new"] * f, rel_tol=1e-12, abs_tol=1e-300):
            ctl.value = change["new"] * f

    def to_state(change):
        if not math.isclose(getattr(state, name) * f, change["new"], rel_tol=1e-12, abs_tol=1e-300):
            setattr(state, name, change["new"] / f)

    state.observe(to_ctl, names=name)
    ctl.observe(to_state, names="value")


def downloads_html(items: Iterable[tuple[Any, str]]) -> str:
    """Several :func:`download_link` s on one line: ``[(payload, filename), ...]``.

    >>> downloads_html([({"a": 1}, "a.json")]).count("<a ")
    1
    """
    return "<div class='hetsched-downloads'>" + "".join(download_link(p, f) for p, f in items) + "</div>"


class Session(traitlets.HasTraits):
    """What every panel of a dashboard shares: the loaded graph and system, and the cost model.

    ``cost`` (a :class:`~hetsched.cost.CostModel` or a cost file, ``None``: the roofline) is what
    every panel passes as ``cost=`` to the algorithms it runs: setting it re-prices every tab (a
    notebook pointing the panels at a calibration). There is no process-wide default cost.

    >>> from hetsched.io.generators import chain
    >>> s = Session(); s.graph = chain(2); s.graph.n_ops
    2
    """

    graph = traitlets.Any(None, allow_none=True)
    #: the machine every tab schedules on (``None``: each tab its own scenario's); the one place it lives
    system = traitlets.Any(None, allow_none=True)
    cost = traitlets.Any(None, allow_none=True)
    #: the scenario the graph and system came from (``None``: loaded by the user, or nothing yet)
    scenario = traitlets.Unicode(None, allow_none=True)
    #: machines the user loaded (a YAML file) or edited in this session, by name: a machine picker lists
    #: them after the bundled ones
    machines = traitlets.Dict()
    #: the machine before the last change of machine (``None``: none yet), for "compare with the previous machine"
    previous_system = traitlets.Any(None, allow_none=True)

    def use_machine(self, system: Any, *, previous: Any = None) -> None:
        """Schedule every tab on ``system`` (``None``: each tab on its own scenario's machine again).

        ``previous`` (the machine a tab showed before) is kept for the tabs that compare with it; a
        machine that is not bundled is listed in :attr:`machines` under its name.

        >>> from hetsched.io.systems import toy_system
        >>> s = Session(); t = toy_system().renamed("mine")
        >>> s.use_machine(t, previous=toy_system()); s.system.name, list(s.machines), s.previous_system.name
        ('mine', ['mine'], 'toy')
        """
        from hetsched.io.systems import bundled_systems

        with self.hold_trait_notifications():
            if previous is not None and previous is not system:
                self.previous_system = previous
            if system is not None and system.name not in bundled_systems():
                self.machines = {**self.machines, system.name: system}
            self.system = system
