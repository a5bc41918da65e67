"""The panel pattern every hetsched widget follows (see ARCHITECTURE.md, Widgets).

* One state object per panel (a ``traitlets.HasTraits``) holds the inputs; controls are
  ``link()``-ed to it; one observer recomputes the core result and updates the figures inside
  ``batch_update()``. Tests drive a panel headlessly by setting ``panel.state`` traits.
* Every ``go.FigureWidget`` is built with its data at construction (Voila shows empty axes
  otherwise); a redraw swaps in a new one (:meth:`Panel.show_figure` says why).
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
import time
from typing import Any, Iterable, Mapping

import ipywidgets as W
import pandas as pd
import plotly.graph_objects as go
import traitlets

from hetsched.errors import HetschedError

__all__ = [
    "Panel", "Session", "StepWalker", "figure_widget", "download_link", "error_html", "ok_html",
    "controls_from_spec", "state_from_spec", "downloads_html", "link_clamped",
]


class _Source:
    """Front-end code held as text; ``str()`` gives it (what anywidget sends to the browser)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def _leak_free_class() -> type:
    """``go.FigureWidget`` with its front-end code inlined, so closed widgets can be freed.

    anywidget (0.11; manzt/anywidget#929, open) connects every widget whose ``_esm``/``_css`` is a
    file (Plotly ships its bundle as one) to that file's change signal for hot reloading, through
    a closure over the widget that the signal holds strongly: every FigureWidget ever made stays
    alive, with its data. Panels make a new widget per redraw, so a long session leaked every
    figure it showed. Holding the same code as a non-path object skips that connection; the
    browser receives the same text.
    """
    attrs: dict[str, Any] = {}
    for key in ("_esm", "_css"):
        v = go.FigureWidget.__dict__.get(key, getattr(go.FigureWidget, key, None))
        if v is not None and not isinstance(v, str):
            attrs[key] = _Source(str(v))
    if not attrs:
        return go.FigureWidget
    return type("FigureWidget", (go.FigureWidget,), {"__module__": __name__, "__doc__": go.FigureWidget.__doc__, **attrs})


_FigureWidget = _leak_free_class()


def figure_widget(fig: go.Figure) -> go.FigureWidget:
    """A FigureWidget holding ``fig``'s data from construction on.

    ``fig`` comes from a :mod:`hetsched.plot` builder, whose output is tested to be valid; the
    widget is built from plain copies of its traces and layout without validating them again.
    Passing the figure itself would re-validate its layout and rebuild the template object
    (tens of ms per figure, most of a panel's redraw).

    >>> import plotly.graph_objects as go
    >>> fw = figure_widget(go.Figure(go.Bar(x=[1], y=[2]), layout=dict(title="t")))
    >>> fw.data[0].type, fw.layout.title.text
    ('bar', 't')
    """
    from hetsched.plot.core import validate_edits

    # the traces' properties are copied by the constructor; the layout goes in as a plain dict
    # (a Layout object would be copied with validation)
    spec = {"data": list(fig.data), "layout": fig.layout.to_plotly_json()}
    return validate_edits(_FigureWidget(spec, _validate=False))


def download_link(payload: bytes | str | pd.DataFrame | Mapping, filename: str, label: str | None = None) -> str:
    """An HTML link that downloads ``payload`` (a data: URI, so it works in Voila with no server code).

    >>> download_link({"a": 1}, "x.json").startswith('<a download="x.json"')
    True
    """
    if isinstance(payload, pd.DataFrame):
        data, mime = payload.to_csv(index=False).encode(), "text/csv"
    elif isinstance(payload, Mapping):
        data, mime = json.dumps(payload).encode(), "application/json"
    elif isinstance(payload, str):
        data, mime = payload.encode(), "text/plain"
    else:
        data, mime = payload, "application/octet-stream"
    b64 = base64.b64encode(data).decode()
    return (
        f'<a download="{html.escape(filename)}" href="data:{mime};base64,{b64}" '
        f'style="margin-right:1em">⬇ {html.escape(label or filename)}</a>'
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


def ok_html(text: str) -> str:
    return f'<div class="hetsched-ok" style="color:#1B5E20">{html.escape(text)}</div>'


_PREPARE = "prepare downloads (Chrome trace, tables)"
_READY = "downloads ready (click a link)"


_GC_FROZEN = False


def _freeze_startup_objects() -> bool:
    """Move every object alive now out of the garbage collector's reach (once per process).

    Why: a kernel that shows panels holds ~300k long-lived objects from imports (about 140k of them
    come with Plotly's FigureWidget: the grammar ``jsonschema`` builds when Plotly imports
    ``nbformat``). Each full collection scans them all and adds 0.1-0.25 s to whichever interaction
    it lands in (measured in ``bench/bench_widgets.py``, long-session table). These objects live as
    long as the kernel, so freezing them (``gc.freeze``, Python >= 3.7) loses nothing; objects
    made afterwards (results, figures) are collected as usual. Set ``HETSCHED_GC_FREEZE=0`` to
    opt out. Returns whether it froze (False after the first call or when opted out).
    """
    global _GC_FROZEN
    if _GC_FROZEN or os.environ.get("HETSCHED_GC_FREEZE", "1") == "0":
        return False
    _GC_FROZEN = True
    # the first FigureWidget pulls in the rest of the front-end stack (anywidget, the nbformat /
    # jsonschema grammar): make one now so that those objects are frozen too
    _FigureWidget().close()
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
    (``follow_session``), so every tab of a dashboard shows the same graph.

    Attributes
    ----------
    state : HasTraits
        The inputs; any trait change recomputes (or redraws, for ``VIEW_TRAITS``).
    result : Any
        The last good result.
    figures : dict
        Named ``FigureWidget`` objects (what tests and Voila look at).
    message : ipywidgets.HTML
        The error/status line.
    downloads : ipywidgets.HTML
        Download links (Chrome trace, result tables) of the current result, built on demand by
        :meth:`prepare_downloads` (the ``download_button``) and cleared by every new result.
    download_area : ipywidgets.HBox
        The button and the links, where a panel shows them.
    last_refresh_s : float
        Wall time of the last ``refresh()`` (compute + render), for benchmarks.
    last_downloads_s : float
        Wall time of the last :meth:`prepare_downloads`.

    Notes
    -----
    The downloads are not rebuilt on every recompute: serialising a Chrome trace and the tables
    of a 1k-op result (then base64 for a ``data:`` link) took about as long as the recompute and
    redraw together, for links most interactions never use. One click on "prepare downloads"
    builds them for the result on screen.
    """

    VIEW_TRAITS: tuple[str, ...] = ()

    def __init__(self, state: traitlets.HasTraits, children: Iterable[W.Widget] = (), *, autostart: bool = True,
                 session: "Session | None" = None, follow_session: bool = False, **kw: Any):
        _freeze_startup_objects()
        self.state = state
        self.session = session if session is not None else Session()
        self.result: Any = None
        self.figures: dict[str, go.FigureWidget] = {}
        self.message = W.HTML("", layout=W.Layout(min_height="1.5em"))
        self.downloads = W.HTML("")
        self.download_button = W.Button(description=_PREPARE, icon="download", layout=W.Layout(width="auto"),
                                        tooltip="build download links for the Chrome trace and the result tables "
                                                "of the result shown")
        self.download_button.on_click(lambda _b: self.prepare_downloads())
        self.download_area = W.HBox([self.download_button, self.downloads], layout=W.Layout(align_items="center"))
        self.download_area.add_class("hetsched-download-area")
        self.n_updates = 0
        self.last_refresh_s = 0.0
        self.last_downloads_s = 0.0
        self._follow = follow_session
        self._held: set[str] = set()
        self._holding = False
        self._in_refresh = False
        super().__init__(children=list(children), **kw)
        self.add_class("hetsched-panel")
        if autostart:
            self._start()

    def _start(self) -> None:
        self.state.observe(self._on_change, names=traitlets.All)
        if self._follow:
            self.session.observe(self._on_session, names=["graph", "system"])
        self.refresh()

    def _on_change(self, change: Mapping[str, Any]) -> None:
        if self._in_refresh and change["name"] in self.VIEW_TRAITS:
            return  # on_result() is adjusting the view; the refresh renders once afterwards
        if self._held:
            self._held.add("view" if change["name"] in self.VIEW_TRAITS else "compute")
            return
        if change["name"] in self.VIEW_TRAITS:
            self.redraw()
        else:
            self.refresh()

    def _on_session(self, change: Mapping[str, Any]) -> None:
        if change["new"] is not None:
            self.refresh()

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
                self.refresh()
            elif "view" in held:
                self.redraw()

    # -- public API ------------------------------------------------------------
    def load(self, graph: Any = None, system: Any = None) -> bool:
        """Show ``graph`` (and/or ``system``) built elsewhere: stored in the session, then recomputed.

        Returns whether the recompute succeeded (on failure the message says why).
        """
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
            self.downloads.value = error_html(HetschedError(f"download not available: {e}"))
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
        """Recompute and redraw; on a hetsched error show it and keep the last good result."""
        t0 = time.perf_counter()
        try:
            result = self.compute()
        except HetschedError as e:
            self.message.value = error_html(e)
            return False
        except Exception as e:  # a bug must not kill the panel either; show it plainly
            self.message.value = error_html(HetschedError(f"{type(e).__name__}: {e}"))
            return False
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
        self.last_refresh_s = time.perf_counter() - t0
        return ok

    def redraw(self) -> bool:
        """Render the current result again (a view trait changed); no recompute."""
        if self.result is None:
            return self.refresh()
        return self._render_guarded(self.result)

    def _render_guarded(self, result: Any) -> bool:
        try:
            self.render(result)
        except HetschedError as e:
            self.message.value = error_html(e)
            return False
        except Exception as e:
            self.message.value = error_html(HetschedError(f"{type(e).__name__}: {e}"))
            return False
        self.message.value = ""
        self.n_updates += 1
        return True

    # -- shared inputs -------------------------------------------------------------
    _fixed_graph: Any = None
    _fixed_system: Any = None

    def _session_graph(self, default: Any) -> Any:
        """The graph this panel works on: one pinned at construction, else the session's.

        A session without a graph gets ``default()`` (so a panel shown alone has something to draw).
        """
        if self._fixed_graph is not None:
            return self._fixed_graph
        if self.session.graph is None:
            self.session.graph = default()
        return self.session.graph

    def _session_system(self) -> Any:
        """The system: one pinned at construction, else the session's (the toy system when unset)."""
        if self._fixed_system is not None:
            return self._fixed_system
        if self.session.system is None:
            import hetsched as hs

            self.session.system = hs.toy_system()
        return self.session.system

    def show_error(self, err: BaseException) -> None:
        self.message.value = error_html(err)

    def show_figure(self, name: str, fig: go.Figure) -> go.FigureWidget:
        """Show ``fig`` as ``self.figures[name]``: a new ``FigureWidget`` takes the old one's place.

        Why not update in place: plotly's widget front-end applies ``data = []``, ``add_traces``
        and the relayout as separate asynchronous plotly.js calls, and in a busy page (a long
        notebook in Voila) one of them was seen to overtake another and leave a stale figure;
        its single-message ``Plotly.update`` path fails in the front-end of plotly 6/7 ("Error
        setting state"). A fresh widget is drawn by one ``newPlot``: always consistent.
        """
        fw = self.figures.get(name)
        new = figure_widget(fig)
        if fw is not None:
            _swap_child(self, fw, new)
            fw.close()
        self.figures[name] = new
        return new

_PLACEHOLDER: list[W.Widget] = []


def _swap_child(box: W.Box, old: W.Widget, new: W.Widget) -> bool:
    """Replace ``old`` by ``new`` wherever it sits in ``box``'s tree of containers.

    Assigning new children makes traitlets compare the old and new tuples element by element, and
    ``FigureWidget.__eq__`` serialises both figures when two figures meet (25 ms for a 2k-bar
    Gantt; tuples, unlike lists, do not stop early on a length mismatch). Passing through a
    tuple with a plain placeholder widget at that position keeps every comparison an identity
    test; ``hold_sync`` sends the front-end one update, with the final children only.

    >>> a, b, c = W.HTML("a"), W.HTML("b"), W.HTML("c")
    >>> box = W.VBox([a, W.HBox([b])])
    >>> _swap_child(box, b, c), box.children[1].children[0] is c
    (True, True)
    """
    kids = list(box.children)
    for i, c in enumerate(kids):
        if c is old:
            if not _PLACEHOLDER:
                _PLACEHOLDER.append(W.Box())
            kids[i] = _PLACEHOLDER[0]
            with box.hold_sync():
                box.children = kids
                kids[i] = new
                box.children = kids
            return True
        if isinstance(c, W.Box) and _swap_child(c, old, new):
            return True
    return False


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
        self.prev = W.Button(description="◀ prev", layout=W.Layout(width="80px"), tooltip="previous step")
        self.next = W.Button(description="next ▶", layout=W.Layout(width="80px"), tooltip="next step")
        W.link((state, name), (self.slider, "value"))
        self.prev.on_click(lambda _b: self._move(-1))
        self.next.on_click(lambda _b: self._move(+1))
        super().__init__([self.prev, self.slider, self.next])

    def _move(self, d: int) -> None:
        v = getattr(self._state, self._name) + d
        setattr(self._state, self._name, max(self.slider.min, min(self.slider.max, v)))

    def set_count(self, n: int) -> None:
        n = max(0, int(n))
        self.slider.max = n
        if getattr(self._state, self._name) > n:
            setattr(self._state, self._name, n)


def state_from_spec(spec: Iterable[Mapping[str, Any]], name: str = "SpecState", **extra: traitlets.TraitType) -> traitlets.HasTraits:
    """A ``HasTraits`` instance with one trait per entry of a parameter spec (UI parameters as data).

    Each entry has ``name``, ``kind`` (``choice``, ``int``, ``float``, ``bool``) and ``default``
    (``options`` for choices). ``extra`` adds more traits.

    >>> st = state_from_spec([{"name": "k", "kind": "int", "default": 2}])
    >>> st.k
    2
    """
    traits: dict[str, traitlets.TraitType] = {}
    for p in spec:
        kind, d = p["kind"], p.get("default")
        if kind == "choice":
            traits[p["name"]] = traitlets.Enum(list(p["options"]), default_value=d)
        elif kind == "int":
            traits[p["name"]] = traitlets.Int(int(d))
        elif kind == "float":
            traits[p["name"]] = traitlets.Float(float(d))
        elif kind == "bool":
            traits[p["name"]] = traitlets.Bool(bool(d))
        else:
            traits[p["name"]] = traitlets.Any(d)
    traits.update(extra)
    return type(name, (traitlets.HasTraits,), traits)()


def controls_from_spec(state: traitlets.HasTraits, spec: Iterable[Mapping[str, Any]], *, scale: Mapping[str, tuple[float, str]] | None = None) -> dict[str, W.Widget]:
    """One control per spec entry, ``link()``-ed to ``state`` (state first: it holds the values).

    ``scale`` shows a float in friendlier units, e.g. ``{"dispatch_s": (1e6, "us")}``; the trait
    keeps SI units.

    >>> st = state_from_spec([{"name": "p", "kind": "choice", "options": ["a", "b"], "default": "a"}])
    >>> c = controls_from_spec(st, [{"name": "p", "kind": "choice", "options": ["a", "b"], "default": "a"}])
    >>> c["p"].value = "b"; st.p
    'b'
    """
    scale = dict(scale or {})
    out: dict[str, W.Widget] = {}
    style = {"description_width": "initial"}
    for p in spec:
        n, kind = p["name"], p["kind"]
        label = n.replace("_", " ")
        tip = p.get("help", "")
        if kind == "choice":
            ctl = W.Dropdown(options=list(p["options"]), description=label, tooltip=tip, style=style)
            W.link((state, n), (ctl, "value"))
        elif kind == "int":
            ctl = W.BoundedIntText(min=p.get("min", 0), max=p.get("max", 10**9), step=p.get("step", 1),
                                   description=label + (f" ({p['unit']})" if p.get("unit") else ""), tooltip=tip,
                                   style=style, layout=W.Layout(width="220px"))
            W.link((state, n), (ctl, "value"))
        elif kind == "float":
            f, unit = scale.get(n, (1.0, p.get("unit", "")))
            ctl = W.BoundedFloatText(min=p.get("min", 0.0) * f, max=p.get("max", 1e30) * f, step=p.get("step", 0.1) * f,
                                     description=label + (f" ({unit})" if unit else ""), tooltip=tip, style=style,
                                     layout=W.Layout(width="220px"))
            _scaled_link(state, n, ctl, f)
        elif kind == "bool":
            ctl = W.Checkbox(description=label, tooltip=tip, indent=False)
            W.link((state, n), (ctl, "value"))
        else:
            continue
        out[n] = ctl
    return out


def link_clamped(state: traitlets.HasTraits, name: str, ctl: W.Widget) -> None:
    """Link a bounded control (slider) to a trait without letting the control's clamping write back.

    With a plain ``link``, setting the trait outside the control's range makes the control clamp
    and write the clamped value back, hiding a bad input instead of reporting it. Here the trait
    wins: only the user's edits of the control flow back.

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
        syncing[0] = True
        try:
            ctl.value = change["new"]
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
        if not math.isclose(ctl.value, change["new"] * f, rel_tol=1e-12, abs_tol=1e-300):
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
    """What every panel of a dashboard shares: the loaded graph and system.

    >>> from hetsched.io.generators import chain
    >>> s = Session(); s.graph = chain(2); s.graph.n_ops
    2
    """

    graph = traitlets.Any(None, allow_none=True)
    system = traitlets.Any(None, allow_none=True)
