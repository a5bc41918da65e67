"""The "draw: auto / blocks / every op" choice of a walk's graph figure, and click-to-expand (issue 22).

A 1k-op graph drawn op by op is a hairball a class cannot read, and its first draw costs a
software-WebGL browser most of a second. The Graph tab and the walkers (Mapping, Backends) draw
graphs above :attr:`BlockDrawing.BLOCKS_ABOVE` ops as blocks (layers, stages), with one threshold
and one gesture, through :class:`BlockDrawing`: their state has ``view`` (``auto``/``blocks``/``ops``)
and ``expanded`` (the blocks shown op by op) traits, both view traits (a redraw, never a recompute).

>>> import traitlets
>>> class S(traitlets.HasTraits):
...     view = traitlets.Unicode("auto"); expanded = traitlets.Tuple()
>>> class P(BlockDrawing):
...     def __init__(self): self.state = S()
...     def drawn_graph(self): return None
>>> p = P(); p.toggle_block("conv3"); p.state.expanded
('conv3',)
>>> p._on_block_click(0, 0, "block:conv3"); p.state.expanded      # no graph drawn: clicks do nothing
('conv3',)
"""

from __future__ import annotations

from typing import Any

import ipywidgets as W

from hetsched.plot.core import BlockLayout, block_layout

__all__ = ["BlockDrawing", "VIEW_OPTIONS"]

#: the choice as the Graph tab offers it (value, label)
VIEW_OPTIONS = [("auto", "auto"), ("blocks", "blocks"), ("every op", "ops")]


class BlockDrawing:
    """Mixin of a panel whose graph figure may be drawn by blocks (the Graph tab, the walkers).

    The panel provides ``state.view``, ``state.expanded`` and :meth:`drawn_graph`; it calls
    :meth:`view_control` once to lay out the toggle, :meth:`watch_clicks` on its graph figure, and
    :meth:`forget_blocks` from ``on_result`` (a new graph starts with every block closed).
    """

    #: "auto" draws graphs with more ops than this by blocks, in every tab (one constant)
    BLOCKS_ABOVE = 150

    def drawn_graph(self) -> Any:  # pragma: no cover - abstract
        """The graph the walk draws (``None`` before the first result)."""
        raise NotImplementedError

    def view_control(self, state: Any = None) -> W.ToggleButtons:
        """The "draw" toggle, linked to ``state.view`` (default: the panel's state)."""
        ctl = W.ToggleButtons(options=VIEW_OPTIONS, description="draw", style={"button_width": "auto"},
                              tooltips=[f"blocks above {BlockDrawing.BLOCKS_ABOVE} ops",
                                        "layers/stages; click one to expand it", "one marker per op"])
        W.link((self.state if state is None else state, "view"), (ctl, "value"))  # the state holds the default
        return ctl

    def watch_clicks(self, view: Any) -> None:
        view.on_click(self._on_block_click)

    def blocks_shown(self, g: Any = None) -> bool:
        """Whether the graph is drawn as blocks: the ``view`` choice, or under "auto" its size
        against :attr:`BLOCKS_ABOVE` (one constant for every tab)."""
        g = self.drawn_graph() if g is None else g
        v = self.state.view
        return g is not None and (v == "blocks" or (v == "auto" and g.n_ops > BlockDrawing.BLOCKS_ABOVE))

    def toggle_block(self, block: str) -> None:
        """Expand a block into its ops, or collapse it again (what a click on it does)."""
        ex = list(self.state.expanded)
        self.state.expanded = tuple(b for b in ex if b != block) if block in ex else tuple(ex + [block])

    def _on_block_click(self, _trace: int, _point: int, customdata: Any) -> None:
        g = self.drawn_graph()
        if not isinstance(customdata, str) or g is None or not self.blocks_shown(g):
            return
        if customdata.startswith("block:"):
            self.toggle_block(customdata[len("block:"):])
        elif customdata.startswith("op:"):
            blocks = self.op_blocks_of(g)
            op = customdata[len("op:"):]
            if op in blocks:
                self.toggle_block(blocks[op])

    def op_blocks_of(self, g: Any) -> dict[str, str]:
        """:func:`hetsched.blocks.op_blocks` of ``g``, computed once per graph."""
        cache = self.__dict__.setdefault("_block_layouts", {})
        blocks = cache.get("blocks")
        if blocks is None or blocks[0] is not g or blocks[1] != g.version:
            from hetsched.blocks import op_blocks

            cache.clear()  # the layouts were of the old graph (or of its old version)
            blocks = cache["blocks"] = (g, g.version, op_blocks(g))
        return blocks[2]

    def open_blocks(self, g: Any) -> tuple[str, ...]:
        """The blocks of ``g`` shown op by op (``state.expanded`` without names ``g`` lacks)."""
        names = set(self.op_blocks_of(g).values())
        return tuple(b for b in self.state.expanded if b in names)

    def block_layout(self, g: Any) -> BlockLayout:
        """The layout for ``g`` with the open blocks, computed once per graph and set of open blocks."""
        blocks = self.op_blocks_of(g)
        cache = self.__dict__["_block_layouts"]
        open_ = self.open_blocks(g)
        key = (id(g), open_)
        if key not in cache:
            if len(cache) > 12:  # a class clicking blocks open and shut: keep the few latest layouts
                for k in [k for k in cache if k != "blocks"][:6]:
                    del cache[k]
            cache[key] = block_layout(g, blocks, open_)
        return cache[key]

    def forget_blocks(self, g: Any) -> None:
        """A new graph starts with every block closed (the Graph tab's rule)."""
        if self.__dict__.get("_blocks_graph") is not g:
            self.state.expanded = ()
        self.__dict__["_blocks_graph"] = g
