"""The panel pattern every hetsched widget follows (see ARCHITECTURE.md, Widgets).

* One state object per panel (a ``traitlets.HasTraits``) holds the inputs; controls are
  ``link()``-ed to it; one observer recomputes the core result and updates the figures inside
  ``batch_update()``. Tests drive a panel headlessly by setting ``panel.state`` traits.
* Every ``go.FigureWidget`` is built with its data at construction (Voila shows empty axes
  otherwise) and updated in place afterwards.
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
import html
import json
from typing import Any, Iterable, Mapping

import ipywidgets as W
import pandas as pd
import plotly.graph_objects as go
import traitlets

from hetsched.errors import HetschedError

__all__ = ["Panel", "figure_widget", "update_figure", "download_link", "error_html", "ok_html"]


def figure_widget(fig: go.Figure) -> go.FigureWidget:
    """A FigureWidget holding ``fig``'s data from construction on."""
    return go.FigureWidget(fig)


def update_figure(fw: go.FigureWidget, fig: go.Figure) -> None:
    """Replace a FigureWidget's traces and layout with ``fig``'s, as one front-end update."""
    with fw.batch_update():
        fw.data = []
        fw.add_traces(list(fig.data))
        fw.layout = fig.layout


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


class Panel(W.VBox):
    """Base of every panel: ``state`` -> ``compute()`` -> ``render(result)``, errors in ``message``.

    Subclasses implement ``compute()`` (call the core; return a result) and ``render(result)``
    (update figures/HTML in place), and build their controls in ``__init__`` before calling
    ``self._start()`` (or pass them as ``children``).

    Attributes
    ----------
    state : HasTraits
        The inputs; any trait change recomputes.
    result : Any
        The last good result.
    figures : dict
        Named ``FigureWidget`` objects (what tests and Voila look at).
    message : ipywidgets.HTML
        The error/status line.
    """

    def __init__(self, state: traitlets.HasTraits, children: Iterable[W.Widget] = (), *, autostart: bool = True, **kw: Any):
        self.state = state
        self.result: Any = None
        self.figures: dict[str, go.FigureWidget] = {}
        self.message = W.HTML("", layout=W.Layout(min_height="1.5em"))
        self.n_updates = 0
        super().__init__(children=list(children), **kw)
        self.add_class("hetsched-panel")
        if autostart:
            self._start()

    def _start(self) -> None:
        self.state.observe(self._on_change, names=traitlets.All)
        self.refresh()

    def _on_change(self, change: Mapping[str, Any]) -> None:
        self.refresh()

    # -- to implement ---------------------------------------------------------
    def compute(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def render(self, result: Any) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the loop ----------------------------------------------------------------
    def refresh(self) -> bool:
        """Recompute and redraw; on a hetsched error show it and keep the last good result."""
        try:
            result = self.compute()
        except HetschedError as e:
            self.message.value = error_html(e)
            return False
        except Exception as e:  # a bug must not kill the panel either; show it plainly
            self.message.value = error_html(HetschedError(f"{type(e).__name__}: {e}"))
            return False
        self.result = result
        try:
            self.render(result)
        except HetschedError as e:
            self.message.value = error_html(e)
            return False
        self.message.value = ""
        self.n_updates += 1
        return True

    def show_error(self, err: BaseException) -> None:
        self.message.value = error_html(err)


class Session(traitlets.HasTraits):
    """What every panel of a dashboard shares: the loaded graph and system.

    >>> from hetsched.io.generators import chain
    >>> s = Session(); s.graph = chain(2); s.graph.n_ops
    2
    """

    graph = traitlets.Any(None, allow_none=True)
    system = traitlets.Any(None, allow_none=True)
