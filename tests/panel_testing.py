"""What the headless widget tests share."""

from __future__ import annotations


def prepared_downloads(p) -> str:
    """Click the panel's "prepare downloads" button (the links are built on demand) and return them."""
    stack, seen = [p], []
    while stack:
        w = stack.pop()
        seen.append(w)
        stack.extend(getattr(w, "children", ()))
    assert p.download_area in seen and p.download_button in seen  # shown in the panel
    assert p.downloads.value == ""  # nothing is built before the click
    p.download_button.click()
    return p.downloads.value


def graph_traces(p) -> list[str]:
    """Names of the traces of a walker's graph figure."""
    return [t.name for t in p.figures["graph"].data]


def check_auto_blocks(small, big, monkeypatch) -> None:
    """A walker's "draw" choice (issue 22): "auto" draws ``big`` (above the Graph tab's threshold) by
    blocks and ``small`` op by op; the threshold is the one constant the Graph tab uses too (patched,
    both follow); "blocks" and "every op" override the size both ways. Leaves both panels on "auto"."""
    from hetsched.widgets import GraphPanel
    from hetsched.widgets.blocks import BlockDrawing

    small.state.view = big.state.view = "auto"
    assert GraphPanel.BLOCKS_ABOVE == BlockDrawing.BLOCKS_ABOVE
    assert big.drawn_graph().n_ops > GraphPanel.BLOCKS_ABOVE >= small.drawn_graph().n_ops
    assert "blocks" in graph_traces(big) and "ops" not in graph_traces(big)
    assert all(c.startswith("block:") for c in next(t for t in big.figures["graph"].data if t.name == "blocks").customdata)
    assert "ops" in graph_traces(small) and "blocks" not in graph_traces(small)
    monkeypatch.setattr(BlockDrawing, "BLOCKS_ABOVE", small.drawn_graph().n_ops - 1)  # one constant for every tab
    assert GraphPanel.BLOCKS_ABOVE == small.drawn_graph().n_ops - 1
    small.redraw()
    assert "blocks" in graph_traces(small)
    monkeypatch.undo()
    small.redraw()
    assert "ops" in graph_traces(small)
    small.state.view = "blocks"
    assert "blocks" in graph_traces(small) and "click a block" in small.figures["graph"].layout.title.text.replace("<br>", " ")
    big.state.view = "ops"
    assert "ops" in graph_traces(big)
    small.state.view = big.state.view = "auto"
    assert [v for _l, v in big.control_widgets["view"].options] == ["auto", "blocks", "ops"]
