"""PageAddress: the page's address (its query string) in the kernel, and back.

A link such as ``http://server:8866/?scenario=memory&tab=memory&layout=present`` must open the
dashboard on that scenario, tab and layout. The kernel cannot read the address itself: a kernel
taken from a warm pool (``hetsched app --pool``) was started and ran the notebook before the
student's request existed, so the request's query string is not in its environment. This hidden
widget sends ``location.search`` from the browser when it is drawn, which works the same way for a
pooled kernel, a fresh one and JupyterLab; the dashboard applies it (:meth:`Dashboard.apply_query`).

The other way round, the dashboard writes ``link`` (the query of what is on screen: scenario, tab,
layout) and a Voila page shows it in its address bar (``history.replaceState``), so copying the
address copies a link to the view. Inside JupyterLab the address bar is JupyterLab's and is left alone.

>>> a = PageAddress(); a.query, a.link
('', '')
"""

from __future__ import annotations

import anywidget
import traitlets

__all__ = ["PageAddress"]

_ESM = r"""
function render({ model, el }) {
  el.style.display = "none";
  // the page's own query, once per page (a kernel from the pool never saw the request)
  model.set("query", globalThis.location ? (location.search || "?") : "?");
  model.save_changes();
  // in a Voila page (its body says data-voila), the address bar follows what is on screen; JupyterLab's is its own
  const own = !!(document.body && document.body.dataset && document.body.dataset.voila);
  model.on("change:link", () => {
    if (!own || !globalThis.history) return;
    try {
      const url = new URL(model.get("link") || "?", location.href);
      history.replaceState(history.state, "", url.pathname + url.search + url.hash);
    } catch (e) { /* an address the page may not take: leave the bar as it is */ }
  });
}
export default { render };
"""


class PageAddress(anywidget.AnyWidget):
    """The page's query string (``query``, set by the browser) and the link to what is shown (``link``)."""

    _esm = _ESM
    #: ``location.search`` of the page that drew this widget ("?" for none; "" until a page drew it)
    query = traitlets.Unicode("").tag(sync=True)
    #: the query string of what the dashboard shows now, written to a Voila page's address bar
    link = traitlets.Unicode("").tag(sync=True)
