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
