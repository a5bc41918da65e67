"""A prev/next button whose quick clicks are coalesced in the browser.

A plain ``ipywidgets.Button`` sends one message per click and the kernel redraws for each, so five
quick clicks on a 1k-op graph cost five redraws, one after the other, while the page shows each
intermediate step (issue 14: "clicks queue up behind it"). This button sends a click at once, then,
until the kernel says it is done with it and the page's plots have drawn, counts further clicks and
sends them as one move: a burst of clicks costs two or three redraws and lands on the same step.
"""

from __future__ import annotations

from typing import Any, Callable

import anywidget
import traitlets

__all__ = ["StepButton"]

_ESM = r"""
function render({ model, el }) {
  let pending = 0, inflight = false, timer = null;
  const flush = () => {
    if (inflight || pending === 0) return;
    const n = pending;
    pending = 0;
    inflight = true;
    model.send({ type: "move", n });
    clearTimeout(timer);
    // an answer lost (a kernel restart) must never leave the button dead
    timer = setTimeout(() => { inflight = false; flush(); }, 5000);
  };
  // the kernel is done with a move: once the plots it patched have drawn, send what was clicked since
  const settled = (t0) => {
    if ((globalThis.__hetschedDrawing || 0) > 0 && performance.now() - t0 < 3000) {
      setTimeout(() => settled(t0), 16);
      return;
    }
    inflight = false;
    clearTimeout(timer);
    flush();
  };
  model.on("msg:custom", (msg) => {
    if (msg && msg.type === "done") settled(performance.now());
  });
  const b = document.createElement("button");
  b.className = "jupyter-button widget-button hetsched-step-button";
  const sync = () => {
    b.textContent = model.get("description");
    b.title = model.get("tooltip");
    b.disabled = model.get("disabled");
  };
  sync();
  model.on("change:description", sync);
  model.on("change:tooltip", sync);
  model.on("change:disabled", sync);
  b.style.width = model.get("width");
  b.addEventListener("click", () => { pending += 1; flush(); });
  el.appendChild(b);
}
export default { render };
"""


class StepButton(anywidget.AnyWidget):
    """A button that moves a walker by ``delta`` per click; quick clicks reach the kernel as one
    move of several (see the module).

    Parameters
    ----------
    description, tooltip : str
        The label and the hover text.
    delta : int
        The move of one click (``-1`` for prev, ``+1`` for next).
    on_move : callable
        ``on_move(steps)``: called in the kernel with the total move of the clicks it received.

    >>> moves = []
    >>> b = StepButton("next ▶", +1, on_move=moves.append)
    >>> b.click(); b._on_front_end({"type": "move", "n": 3}); moves
    [1, 3]
    """

    _esm = _ESM
    description = traitlets.Unicode("").tag(sync=True)
    tooltip = traitlets.Unicode("").tag(sync=True)
    disabled = traitlets.Bool(False).tag(sync=True)
    width = traitlets.Unicode("80px").tag(sync=True)

    def __init__(self, description: str, delta: int, *, on_move: Callable[[int], Any], tooltip: str = "",
                 width: str = "80px") -> None:
        super().__init__(description=description, tooltip=tooltip, width=width)
        self.delta = int(delta)
        self._on_move = on_move
        self.on_msg(lambda _w, content, _buffers: self._on_front_end(content))

    def click(self) -> None:
        """What one click does (for notebooks and tests)."""
        self._on_move(self.delta)

    def _on_front_end(self, content: Any) -> None:
        if not isinstance(content, dict) or content.get("type") != "move":
            return
        try:
            n = int(content.get("n", 1))
            if n > 0:
                self._on_move(self.delta * n)
        finally:
            # always answered, even when the move failed: the button sends the clicks it held
            self.send({"type": "done"})
