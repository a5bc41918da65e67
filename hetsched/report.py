"""Self-contained HTML reports: figures, tables and text in one file that opens offline.

plotly.js is inlined once (no CDN: reports are read on trains and in air-gapped labs).

>>> import plotly.graph_objects as go, pandas as pd, tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "r.html")
>>> write_report(p, "demo", [("A figure", go.Figure(go.Bar(x=[1], y=[2]))), ("A table", pd.DataFrame({"a": [1]})),
...                          ("Words", "plain text")])
>>> html = open(p).read(); 'src="https://cdn' not in html and len(html) > 1_000_000 and "A table" in html
True
"""

from __future__ import annotations

import datetime as _dt
import html as _html
from pathlib import Path
from typing import Any, Iterable

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

__all__ = ["write_report", "render_report"]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.6em} h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.9em} td,th{border:1px solid #ddd;padding:.25em .6em;text-align:right}
th{background:#f4f4f4} .meta{color:#666;font-size:.85em} pre{background:#f7f7f7;padding:.8em;overflow:auto}
"""


def render_report(title: str, sections: Iterable[tuple[str, Any]], *, meta: dict[str, Any] | None = None) -> str:
    """The HTML text of a report; ``sections`` are ``(heading, figure | DataFrame | str)`` pairs.

    Text is escaped, so a name with ``<`` or ``&`` in it cannot break the page.

    >>> html = render_report("a <b> & c", [("Notes", "x < y")])
    >>> "<h1>a &lt;b&gt; &amp; c</h1>" in html and "<pre>x &lt; y</pre>" in html
    True
    """
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{_html.escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_html.escape(title)}</h1>",
    ]
    info = {"generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), **(meta or {})}
    parts.append("<p class='meta'>" + " · ".join(f"{_html.escape(str(k))}: {_html.escape(str(v))}" for k, v in info.items()) + "</p>")
    first_fig = True
    for heading, body in sections:
        parts.append(f"<h2>{_html.escape(str(heading))}</h2>")
        if isinstance(body, go.Figure):
            parts.append(pio.to_html(body, include_plotlyjs=True if first_fig else False, full_html=False,
                                     config={"displaylogo": False}))
            first_fig = False
        elif isinstance(body, pd.DataFrame):
            parts.append(body.to_html(index=False, float_format=lambda v: f"{v:.4g}", border=0))
        else:
            parts.append(f"<pre>{_html.escape(str(body))}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(path: str | Path, title: str, sections: Iterable[tuple[str, Any]], *, meta: dict[str, Any] | None = None) -> None:
    """Write :func:`render_report` to ``path``."""
    Path(path).write_text(render_report(title, sections, meta=meta), encoding="utf-8")
