"""Figure builders: pure functions of tidy frames that return a ``plotly.graph_objects.Figure``.

They never mutate their input and never import widgets (Plotly Express / Mesa style). One colour
per device/backend across every view comes from :func:`color_map`, given the same names in the
same order.

Every builder assembles plain trace and layout dicts and hands them to :func:`figure_from_dicts`,
which skips Plotly's per-property validation while building (validating a 2k-bar Gantt and
deep-copying the ``plotly_white`` template cost more than computing the schedule it shows). The
figures are still checked: ``tests/test_plot_validation.py`` re-validates the output of every
builder and requires it to equal its validated copy, and edits made after construction
(``fig.update_layout(...)``) are validated as usual.

Examples
--------
>>> from hetsched.timeline import make_timeline
>>> tl = make_timeline([dict(lane="gpu0", group="gpu0", name="a", kind="compute", start_s=0, end_s=2e-3, device="gpu0")])
>>> fig = gantt(tl)
>>> fig.data[0].type, fig.layout.xaxis.title.text
('bar', 'time (ms)')
"""

from __future__ import annotations

import html
import numbers
import re
import zlib
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import networkx as nx
import numpy as np
import pandas as pd
import plotly.graph_objects as go

__all__ = [
    "figure_from_dicts",
    "PALETTE",
    "KIND_COLORS",
    "NEUTRAL",
    "IDLE",
    "NEUTRAL_NAMES",
    "GROUP_PALETTE",
    "group_colors",
    "METRIC_LABELS",
    "metric_label",
    "format_value",
    "color_map",
    "time_unit",
    "bytes_unit",
    "gantt",
    "memory_curve",
    "graph_view",
    "block_view",
    "BlockLayout",
    "block_layout",
    "block_colors",
    "compare",
    "MAX_BARS",
    "TITLE_CHARS",
    "wrap_title",
    "legend_below",
    "legend_height_px",
]

# Colour-blind-safe qualitative palette (Okabe & Ito 2008), then Plotly's default cycle.
PALETTE = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
    "#636EFA", "#EF553B", "#00CC96", "#AB63FA", "#FFA15A", "#19D3F3", "#FF6692", "#B6E880",
]
#: Neutral greys: "nothing here" never borrows a device's colour (issue 22: colours that lie).
NEUTRAL = "#BDBDBD"
IDLE = "#E4E4E4"
#: Labels that mean "not assigned / not running"; every view draws them neutral.
NEUTRAL_NAMES = {"(unassigned)": NEUTRAL, "(none)": NEUTRAL, "unassigned": NEUTRAL, "(unsupported)": "#9E9E9E",
                 "idle": IDLE, "bubble": IDLE}
#: Colours of kinds of work. One colour means one thing (issue 22): F/B/I/W are four distinct hues,
#: waits and transfers do not reuse the compute colour, and no kind wears a device's colour
#: (:data:`PALETTE`, what :func:`color_map` hands out) or a group's (:data:`GROUP_PALETTE`): a blue
#: compute bar beside a graph coloured by device used to read as "runs on the first device". Every
#: kind is at least 20 CIELAB units from every device and group colour (more than those palettes
#: keep between their own colours; ``tests/test_plot_colors.py``); F/B/I/W are dark enough for the
#: white cell labels of a pipeline Gantt.
KIND_COLORS = {
    "compute": "#1C326E",   # navy (the forward pass's colour: compute is the work itself)
    "transfer": "#8B5723",  # brown: data on a link
    "send": "#8B5723",
    "recv": "#C9A26B",      # tan: the receiving end of the same move
    "bubble": IDLE,
    "idle": IDLE,
    "wait": "#D13CCB",      # orchid
    "blocked": "#5C0A14",   # dark maroon
    "launch": "#2FA0B5",    # teal
    "copy": "#9ACD32",      # yellow-green: a copy engine's work
    "F": "#1C326E",         # navy
    "B": "#A3122A",         # crimson
    "I": "#6B1FBF",         # violet
    "W": "#0A8F00",         # green
    **NEUTRAL_NAMES,
}
#: Groups (merged ops, stages, clusters) take this palette (Tol's "muted"), never a device colour.
GROUP_PALETTE = ["#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677", "#882255", "#AA4499"]
MAX_BARS = 2000
#: The text size of every figure unless its builder sets one: legible on a projector at 1280x720.
BASE_FONT_PX = 14


def figure_from_dicts(data: Iterable[Mapping[str, Any]], layout: Mapping[str, Any], *,
                      template: str | None = "plotly_white") -> go.Figure:
    """A ``go.Figure`` from plain trace dicts (each with its ``type``) and a plain layout dict.

    Plotly's validation, which copies and checks every property and deep-copies the template
    object, is skipped while building: the builders of this package are tested to produce only
    valid properties (their output re-validated, see the module notes). Afterwards the figure
    validates edits as any figure does.

    Parameters
    ----------
    data : iterable of dict
        Traces, e.g. ``dict(type="bar", x=[...], y=[...])``; arrays may be numpy arrays.
    layout : dict
        The layout in Plotly's normal form (``title=dict(text=...)``, nested axis dicts).
    template : str or None
        A registered template, used unless ``layout`` has one; ``None`` leaves Plotly's default.

    >>> fig = figure_from_dicts([dict(type="bar", x=[1], y=[2])], dict(title=dict(text="t")))
    >>> fig.data[0].type, fig.layout.title.text, fig.layout.template.layout.plot_bgcolor, fig.layout.font.size
    ('bar', 't', 'white', 14)
    >>> try:
    ...     fig.update_layout(titel="typo")      # later edits are validated again
    ... except ValueError:
    ...     print("rejected")
    rejected
    """
    lay = dict(layout)
    fit_title(lay)  # Plotly does not wrap titles: a long one would run off a 1280 px screen
    # projector-friendly text (issue 22): 14 px unless the builder chose a size
    font = lay.get("font")
    if not (isinstance(font, Mapping) and "size" in font):
        lay["font"] = {**(font if isinstance(font, Mapping) else {}), "size": BASE_FONT_PX}
    if template is not None and "template" not in lay:
        import plotly.io as pio

        lay["template"] = pio.templates[template].to_plotly_json()
    fig = go.Figure({"data": list(data), "layout": lay}, _validate=False)
    validate_edits(fig)
    return fig


def validate_edits(fig: go.Figure) -> go.Figure:
    """Turn Plotly's validation back on for a figure built with ``_validate=False`` (returns it).

    Sub-objects (axes, markers...) are created on access and validate by default; the figure, its
    layout and its traces keep the flag they were built with, so it is reset here.
    """
    fig._validate = True
    fig.layout._validate = True
    for t in fig.data:
        t._validate = True
    return fig


def esc(x: Any) -> str:
    """A name from a user's file as Plotly text: Plotly draws ``<b>``, ``<br>``, ``<a>``... in hover
    texts, legends and titles, so a name such as ``<img src=x>`` is escaped (Plotly shows ``&lt;``
    as ``<``; quotes stay as they are: Plotly does not decode ``&quot;``). Issue 20.

    >>> esc("<b>a</b> & 'b'")
    "&lt;b&gt;a&lt;/b&gt; &amp; 'b'"
    """
    return html.escape(str(x), quote=False)


def title_text(t: Any) -> dict:
    """A title in Plotly's normal form: a string validates to ``{"text": ...}``, ``None`` to ``{}``."""
    return {} if t is None else {"text": t}


#: Characters per title line. Plotly never wraps a title: it runs off the right edge. The title font
#: is about 17 px (1.2 x the 14 px base), ~9 px a character, so 100 characters fill a full-width
#: figure at 1280 px (a projector); a figure in half the width wants :func:`wrap_title` at ~55.
TITLE_CHARS = 100
#: height of one title line, and the room kept under the title above the plot
_TITLE_LINE_PX, _TITLE_GAP_PX = 24, 22
_TAG = re.compile(r"<[^>]*>")


def wrap_title(text: str, chars: int = TITLE_CHARS) -> str:
    """``text`` broken into lines of at most ``chars`` visible characters at spaces (``<br>``).

    Breaks already in the text are kept; HTML tags count as no characters; a word longer than a
    line stays whole.

    >>> wrap_title("A simulated: sender's cache queue (the patent's) depth per rank over time", 40)
    "A simulated: sender's cache queue (the<br>patent's) depth per rank over time"
    >>> wrap_title("short<br>and <b>bold</b>", 9)
    'short<br>and <b>bold</b>'
    """
    out = []
    for line in re.split(r"<br\s*/?>", text):
        cur, n = [], 0
        for word in line.split(" "):
            w = len(_TAG.sub("", word))
            if cur and n + 1 + w > chars:
                out.append(" ".join(cur))
                cur, n = [], 0
            n += w + (1 if cur else 0)
            cur.append(word)
        out.append(" ".join(cur))
    return "<br>".join(out)


def title_margin_px(lines: int) -> int:
    """Top margin (px) that holds a title of ``lines`` lines."""
    return _TITLE_LINE_PX * lines + _TITLE_GAP_PX


def fit_title(layout: dict, chars: int = TITLE_CHARS) -> dict:
    """Wrap ``layout``'s title at ``chars`` (:func:`wrap_title`) and make the top margin tall enough
    for its lines, so that a long title neither runs off the figure nor sits on the plot. Returns
    ``layout`` (changed in place).

    >>> lay = fit_title(dict(title=dict(text="x " * 80), margin=dict(t=40)))
    >>> lay["title"]["text"].count("<br>"), lay["margin"]["t"]
    (1, 70)
    """
    t = layout.get("title")
    if not isinstance(t, Mapping) or not isinstance(t.get("text"), str):
        return layout
    text = wrap_title(t["text"], chars)
    layout["title"] = {**t, "text": text}
    lines = text.count("<br>") + 1
    if lines > 1:
        need = title_margin_px(lines)
        margin = dict(layout.get("margin") or {})
        if margin.get("t", 100) < need:  # Plotly's default top margin is 100 px
            margin["t"] = need
            layout["margin"] = margin
    return layout


def legend_below(title: str | None = None) -> dict:
    """A legend laid out across the bottom of the figure, under the axis titles.

    Beside a short chart a vertical legend scrolls and hides entries; at the top right it covers a
    long title; and two charts compared on one time axis only line up when neither has a legend
    beside it. Plotly moves the plot up to make room (``yref="container"``); give the figure
    :func:`legend_height_px` more height so that the plot keeps its own.

    >>> legend_below("action")["orientation"], legend_below()["yref"]
    ('h', 'container')
    """
    return dict(orientation="h", x=0, xanchor="left", yref="container", y=0, yanchor="bottom", title=title_text(title))


def legend_height_px(names: Iterable[Any], *, title: str | None = None, width_px: int = 1000,
                     groups: Sequence[Any] | None = None) -> int:
    """The height a :func:`legend_below` of entries ``names`` takes in a figure ``width_px`` wide
    (a legend row is ~26 px; an entry ~8 px a character plus its symbol).

    ``groups`` (one key per name, the traces' ``legendgroup``): Plotly stacks a group's entries in
    one column, so a row of columns is as tall as its largest group.

    >>> legend_height_px(["F", "B", "idle"]), legend_height_px([f"buffer {i}" for i in range(40)])
    (34, 138)
    >>> legend_height_px(["F chunk 0", "F chunk 1", "B chunk 0", "B chunk 1"], groups="FFBB")
    60
    """
    names = [str(n) for n in names]
    if not names:
        return 0
    if groups is None:
        columns = [(40 + 8 * len(n), 1) for n in names]
    else:
        members: dict[Any, list[str]] = {}
        for n, g in zip(names, groups):
            members.setdefault(g, []).append(n)
        columns = [(40 + 8 * max(len(n) for n in ms), len(ms)) for ms in members.values()]
    rows, line, used = 0, 0, 8 * len(title or "") + (10 if title else 0)
    for w, h in columns:
        if line and used + w > width_px:
            rows, line, used = rows + line, 0, 0
        used += w
        line = max(line, h)
    return 26 * (rows + line) + 8


def hline(y: float, line: Mapping[str, Any], text: str) -> tuple[dict, dict]:
    """The shape and the annotation ``fig.add_hline(y, line=..., annotation_text=text)`` makes."""
    return (dict(type="line", xref="x domain", x0=0, x1=1, yref="y", y0=y, y1=y, line=dict(line)),
            dict(showarrow=False, text=text, x=1, xanchor="right", xref="x domain", y=y, yanchor="bottom", yref="y"))


def color_map(names: Iterable[Any], *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A stable colour per name: known kinds keep their colour, the rest take the palette in order.

    >>> color_map(["gpu0", "cpu0"])
    {'gpu0': '#0072B2', 'cpu0': '#E69F00'}
    """
    out: dict[str, str] = {}
    base = {**NEUTRAL_NAMES, **dict(base or {})}
    i = 0
    for n in names:
        key = str(n)
        if key in out:
            continue
        if key in base:
            out[key] = base[key]
            continue
        out[key] = PALETTE[i % len(PALETTE)] if i < len(PALETTE) else _hash_color(key)
        i += 1
    return out


def group_colors(names: Iterable[Any]) -> dict[str, str]:
    """Colours for groups (merged ops, stages): their own palette, so a group never looks like a device.

    >>> group_colors(["g0", "g1"])
    {'g0': '#332288', 'g1': '#88CCEE'}
    """
    out: dict[str, str] = {}
    for n in names:
        key = str(n)
        if key not in out:
            out[key] = NEUTRAL_NAMES.get(key) or (GROUP_PALETTE[len(out) % len(GROUP_PALETTE)]
                                                if len(out) < len(GROUP_PALETTE) else _hash_color(key))
    return out


#: Plain words for the metrics every family reports (axis titles, tables, summaries).
METRIC_LABELS = {
    "makespan_s": "makespan",
    "total_latency_s": "system total latency",
    "energy_J": "energy",
    "bytes_moved": "data moved",
    "peak_bytes": "peak memory",
    "peak_memory_bytes": "peak memory",
    "lower_bound_bytes": "lower bound",
    "bubble_fraction": "bubble (idle share of rank time)",
    "host_blocked_s": "host time blocked",
    "throughput_per_s": "throughput",
    "n_launches": "kernel launches",
    "gap": "gap to the lower bound",
}


def metric_label(key: str, unit: str | None = None) -> str:
    """A metric key in plain words, with its unit: ``makespan_s`` -> ``makespan (ms)``.

    >>> metric_label("makespan_s", "ms"), metric_label("energy_J"), metric_label("bytes_moved", "MiB")
    ('makespan (ms)', 'energy (J)', 'data moved (MiB)')
    >>> metric_label("host_pcie_Bps")
    'host pcie (B/s)'
    """
    base = METRIC_LABELS.get(key)
    suffix = {"_s": "s", "_J": "J", "_bytes": "B", "_Bps": "B/s", "_flops": "FLOP", "_W": "W"}
    if base is None:
        base = key
        for sfx in suffix:
            if key.endswith(sfx):
                base = key[: -len(sfx)]
                break
        base = base.replace("_", " ")
    if unit is None:
        unit = next((u for sfx, u in suffix.items() if key.endswith(sfx)), None)
        if key == "bytes_moved":
            unit = "B"
    return f"{base} ({unit})" if unit else base


def format_value(value: Any, key: str = "") -> str:
    """A value in readable units chosen from its key: seconds, bytes, fractions, counts.

    >>> format_value(0.0023, "makespan_s"), format_value(3 * 2**30, "peak_bytes"), format_value(0.153, "gap")
    ('2.3 ms', '3 GiB', '15.3%')
    >>> format_value(2.4e9, "pcie_Bps"), format_value(None)
    ('2.4 GB/s', '–')
    """
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return str(value)
    if key.endswith("_s"):
        u, f = time_unit(v)
        return f"{v * f:.3g} {u}"
    if key.endswith("_bytes") or key == "bytes_moved":
        u, f = bytes_unit(v)
        return f"{v * f:.3g} {u}"
    if key.endswith("_Bps"):
        for u, p in (("TB/s", 12), ("GB/s", 9), ("MB/s", 6), ("kB/s", 3)):
            if abs(v) >= 10**p:
                return f"{v / 10**p:.3g} {u}"
        return f"{v:.3g} B/s"
    if key in ("gap", "bubble_fraction") or key.endswith("_fraction") or key.endswith("_share"):
        return f"{v:.1%}"
    return f"{v:.4g}"


def _hash_color(key: str) -> str:
    h = zlib.crc32(key.encode())
    return f"#{(h >> 16) & 0xFF:02x}{(h >> 8) & 0xFF:02x}{h & 0xFF:02x}"


def time_unit(span_s: float) -> tuple[str, float]:
    """A readable unit for a time span: ``('ms', 1e3)`` means multiply seconds by 1e3.

    >>> time_unit(0.002), time_unit(3e-6), time_unit(12.0)
    (('ms', 1000.0), ('us', 1000000.0), ('s', 1.0))
    """
    span_s = abs(float(span_s or 0.0))
    if span_s >= 1.0:
        return "s", 1.0
    if span_s >= 1e-3:
        return "ms", 1e3
    if span_s >= 1e-6 or span_s == 0:
        return "us", 1e6
    return "ns", 1e9


def bytes_unit(nbytes: float) -> tuple[str, float]:
    """A readable binary unit: ``('MiB', 2**-20)`` means multiply bytes by 2**-20.

    >>> bytes_unit(3 * 2**20)[0], bytes_unit(10)[0]
    ('MiB', 'B')
    """
    n = abs(float(nbytes or 0.0))
    for unit, p in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 2**p:
            return unit, 2.0**-p
    return "B", 1.0


def fmt_bytes(b: Any) -> str:
    if b is None or (isinstance(b, float) and np.isnan(b)):
        return ""
    u, f = bytes_unit(b)
    return f"{b * f:.3g} {u}"


def gantt(
    timeline: pd.DataFrame,
    *,
    color_by: str = "kind",
    colors: Mapping[str, str] | None = None,
    lanes: Sequence[str] | None = None,
    title: str | None = None,
    max_bars: int = MAX_BARS,
    highlight: Iterable[str] | None = None,
    height: int | None = None,
    cursor_s: float | None = None,
    label_by: str | Sequence[str] | None = None,
    shade_by: str | None = None,
) -> go.Figure:
    """A Gantt chart of a timeline: one row per lane, one bar per interval (``alloc`` rows skipped).

    Parameters
    ----------
    timeline : DataFrame
        The shared timeline format.
    color_by : str
        A column (``kind``, ``device``, ``op``, ``microbatch``...) to colour and group the legend by.
    colors : dict, optional
        Colours per value (e.g. from :func:`color_map` over the system's devices).
    lanes : sequence, optional
        Lane order top to bottom (default: first appearance).
    max_bars : int
        Above this many bars, bars of one colour on one lane less than a pixel or a few apart
        (1/1500 to 1/500 of the axis, :data:`MERGE_PX`) are merged first; if more remain, draw
        ``Scattergl`` line segments (one trace per colour) with hover markers at bar middles
        instead of ``go.Bar`` — thousands of SVG bars freeze a browser.
    highlight : iterable of str, optional
        Names (``name`` or ``op`` values) drawn with a thick outline.
    cursor_s : float, optional
        A time (seconds) marked by a red dotted vertical line (a time-step cursor).
    label_by : str or sequence of str, optional
        Column(s) written inside each bar where it fits, joined without a separator (a pipeline's
        ``["stage", "action", "microbatch"]`` writes ``0F3`` as torch's visualiser does).
    shade_by : str, optional
        A column whose values lighten the bar colour in turn (the chunks of an interleaved
        schedule: chunk 0 in full colour, later chunks lighter), as the Zero Bubble visualiser does.

    Notes
    -----
    Numeric times are kept numeric (``px.timeline`` would turn them into dates); the axis unit is
    chosen from the span (s, ms, us, ns).

    >>> from hetsched.timeline import make_timeline
    >>> rows = [dict(lane="l", group="g", name=str(i), kind="compute", start_s=2 * i, end_s=2 * i + 1) for i in range(3)]
    >>> gantt(make_timeline(rows), max_bars=2).data[0].type
    'scattergl'
    >>> rows = [dict(lane="l", group="g", name=str(i), kind="compute", start_s=i, end_s=i + 1) for i in range(3)]
    >>> fig = gantt(make_timeline(rows), max_bars=2)      # back to back: one bar, drawn in SVG
    >>> fig.data[0].type, len(fig.data[0].x)
    ('bar', 1)
    >>> gantt(make_timeline(rows), cursor_s=1.5).layout.shapes[0].x0
    1.5
    >>> rows = [dict(lane="r0", group="g", name="F", kind="compute", start_s=i, end_s=i + 1, microbatch=i, chunk=i % 2)
    ...         for i in range(3)]
    >>> fig = gantt(make_timeline(rows), label_by=["name", "microbatch"], shade_by="chunk")
    >>> list(fig.data[0].text), fig.data[0].marker.color
    (['F0', 'F1', 'F2'], ('#1C326E', '#8d98b6', '#1C326E'))
    """
    data, layout = gantt_parts(timeline, color_by=color_by, colors=colors, lanes=lanes, title=title,
                                max_bars=max_bars, highlight=highlight, height=height, cursor_s=cursor_s,
                                label_by=label_by, shade_by=shade_by)
    return figure_from_dicts(data, layout)


#: Beyond ``max_bars`` bars, gaps narrower than 1/N of the time axis between same-coloured bars of
#: a lane are closed (:func:`_merge_close`), N the first of these that brings the count under
#: ``max_bars``: 1500 is about a pixel of a full-width plot, 500 about three.
MERGE_PX = (1500, 1000, 500)


def _merge_close(keys: Sequence[str], lanes: np.ndarray, s: np.ndarray, e: np.ndarray, keep: Sequence[bool],
                 shade: Sequence[float] | None, tol: float) -> tuple[list[int], np.ndarray, np.ndarray, list[int]]:
    """Merge bars of one colour (and shade) on one lane whose gap is at most ``tol``; highlighted
    bars (``keep``) stay alone. Returns ``(representative row, start, end, bars merged)`` per bar.

    >>> rep, s, e, c = _merge_close(["a"] * 4, np.array(["l"] * 4), np.array([0., 1., 5., 6.]),
    ...                             np.array([1., 2., 6., 7.]), [False, False, False, True], None, 0.5)
    >>> rep, s.tolist(), e.tolist(), c
    ([0, 2, 3], [0.0, 5.0, 6.0], [2.0, 6.0, 7.0], [2, 1, 1])
    """
    n = len(s)
    if n == 0:
        return [], np.asarray(s, float), np.asarray(e, float), []
    key_code = pd.factorize(pd.Series(list(keys), dtype=object))[0]
    lane_code = pd.factorize(pd.Series(lanes.tolist() if isinstance(lanes, np.ndarray) else list(lanes), dtype=object))[0]
    shade_arr = np.zeros(n) if shade is None else np.asarray(shade, float)
    s = np.asarray(s, float)
    e = np.asarray(e, float)
    order = np.lexsort((s, shade_arr, lane_code, key_code))
    grp = (key_code[order].astype(np.int64) * (lane_code.max() + 1) + lane_code[order])
    shd = shade_arr[order]
    so, eo, kp = s[order], e[order], np.asarray(keep, bool)[order]
    first = np.ones(n, bool)
    first[1:] = (grp[1:] != grp[:-1]) | (shd[1:] != shd[:-1])
    # a highlighted bar is a segment of its own and the next bar starts a new one; sorted by start
    # within a segment, a bar opens a new run when it starts after every earlier bar of the segment
    # has ended (plus the tolerance): the segment's running maximum of the ends
    seg = first | kp | np.r_[True, kp[:-1]]
    gid = np.cumsum(seg)
    run_max = pd.Series(eo).groupby(gid).cummax().to_numpy()
    prev_max = np.empty(n)
    prev_max[0] = -np.inf
    prev_max[1:] = run_max[:-1]
    new = seg | (so > prev_max + tol)
    starts = np.flatnonzero(new)
    rep = order[starts].tolist()
    st = so[starts]
    en = np.maximum.reduceat(eo, starts)
    cnt = np.diff(np.r_[starts, n]).tolist()
    return rep, st, en, cnt


#: how much each later value of ``shade_by`` is mixed with white
_SHADES = (0.0, 0.5, 0.7, 0.35, 0.8, 0.2)


def lighten(color: str, share: float) -> str:
    """``color`` (``#rrggbb``) mixed with white: ``share`` 0 keeps it, 1 is white.

    >>> lighten("#000000", 0.5)
    '#7f7f7f'
    """
    if not (isinstance(color, str) and color.startswith("#") and len(color) == 7) or share <= 0:
        return color
    rgb = [int(color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{int(c + (255 - c) * share):02x}" for c in rgb)


def _cell_text(v: Any) -> str:
    """A label piece: integral floats without ``.0`` (pandas stores integer columns with NaN as floats)."""
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def gantt_parts(timeline: pd.DataFrame, *, color_by: str = "kind", colors: Mapping[str, str] | None = None,
                 lanes: Sequence[str] | None = None, title: str | None = None, max_bars: int = MAX_BARS,
                 highlight: Iterable[str] | None = None, height: int | None = None,
                 cursor_s: float | None = None, label_by: str | Sequence[str] | None = None,
                 shade_by: str | None = None) -> tuple[list[dict], dict]:
    """The traces and layout of :func:`gantt` as plain dicts (for builders that add to them)."""
    tl = timeline[timeline["kind"] != "alloc"] if "kind" in timeline.columns else timeline
    n = len(tl)
    span = float(tl["end_s"].max()) if n else 0.0
    unit, f = time_unit(span)
    lane_arr = np.asarray(tl["lane"].astype(str).tolist(), dtype=str)  # fixed-width: copied in one go
    lane_order = list(lanes) if lanes is not None else list(dict.fromkeys(lane_arr.tolist()))
    if color_by not in tl.columns:
        color_by = "kind"
    keys = (tl[color_by].astype(str).where(tl[color_by].notna(), "(none)").tolist() if n else [])
    cmap = color_map(list(dict.fromkeys(keys)), base={**KIND_COLORS, **(colors or {})})
    hl = set(highlight or ())
    use_gl = n > max_bars
    # plain Python lists once (iterating pandas columns row by row is several times slower)
    names = tl["name"].astype(str).tolist()
    kinds = tl["kind"].astype(str).tolist()
    s_all = tl["start_s"].to_numpy(float) * f
    e_all = tl["end_s"].to_numpy(float) * f
    none = [None] * n
    ops = tl["op"].tolist() if "op" in tl.columns else none
    nbytes = tl["bytes"].tolist() if "bytes" in tl.columns else none
    mbs = tl["microbatch"].tolist() if "microbatch" in tl.columns else none
    hover_all = np.array([
        f"<b>{esc(nm)}</b><br>lane {esc(ln)}<br>{esc(k)}: {a:.4g}–{b:.4g} {unit} ({b - a:.4g} {unit})"
        + (f"<br>op {esc(op)}" if isinstance(op, str) and op != nm else "")
        + (f"<br>{fmt_bytes(by)}" if by == by and by is not None else "")
        + (f"<br>micro-batch {mb}" if mb is not None and mb == mb else "")
        for nm, ln, k, a, b, op, by, mb in zip(names, lane_arr.tolist(), kinds, s_all.tolist(), e_all.tolist(), ops,
                                               nbytes, mbs)
    ], dtype=object)
    ref = ops if "op" in tl.columns else names  # what ``highlight`` matches besides the name
    labels = None
    if label_by is not None and n:
        cols = [label_by] if isinstance(label_by, str) else list(label_by)
        parts = [tl[c].tolist() for c in cols if c in tl.columns]
        labels = [esc("".join(_cell_text(v) for v in vals)) for vals in zip(*parts)] if parts else None
    shade = None
    if shade_by is not None and shade_by in tl.columns and n:
        sv = tl[shade_by].tolist()
        order = {v: i for i, v in enumerate(sorted({v for v in sv if v == v and v is not None}, key=str))}
        shade = [_SHADES[order[v] % len(_SHADES)] if v in order else 0.0 for v in sv]
    merged_note = ""
    if n > max_bars:
        # Close gaps narrower than a pixel between same-coloured bars of one lane before falling
        # back to WebGL: the picture is the same at full view, and SVG bars stay cheap where WebGL
        # is not (a software-rendered WebGL context costs seconds per redraw in a GPU-less browser).
        keep = [names[i] in hl or ref[i] in hl for i in range(n)]
        width = float(e_all.max()) - float(s_all.min())
        for px in MERGE_PX:  # the finest merge that brings the bars under max_bars
            rep, s_m, e_m, cnt = _merge_close(keys, lane_arr, s_all, e_all, keep, shade, width / px)
            if len(rep) <= max_bars:
                break
        if len(rep) < n:
            merged_note = f" (gaps under 1/{px} of the axis closed)"
            hover_all = np.array([
                hover_all[i] if c == 1 else
                f"<b>{c} intervals</b> of {esc(keys[i])}<br>lane {esc(lane_arr[i])}<br>{a:.4g}–{b:.4g} {unit}<br>"
                f"gaps under 1/{px} of the axis closed: a smaller timeline shows each one"
                for i, c, a, b in zip(rep, cnt, s_m.tolist(), e_m.tolist())], dtype=object)
            lane_arr, s_all, e_all = lane_arr[rep], s_m, e_m
            keys = [keys[i] for i in rep]
            names = [names[i] if c == 1 else f"{c} intervals" for i, c in zip(rep, cnt)]
            ref = [ref[i] for i in rep]
            if labels is not None:
                labels = [labels[i] if c == 1 else "" for i, c in zip(rep, cnt)]
            if shade is not None:
                shade = [shade[i] for i in rep]
            n = len(rep)
            use_gl = n > max_bars
    rows_of: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        rows_of.setdefault(key, []).append(i)
    data: list[dict] = []
    for key, idx_list in rows_of.items():
        idx = np.asarray(idx_list, dtype=np.intp)
        s, e, lanes_ = s_all[idx], e_all[idx], lane_arr[idx]
        hover = hover_all[idx].tolist()
        if use_gl:
            xs = np.column_stack([s, e, np.full(len(s), np.nan)]).ravel()
            ys = np.column_stack([lanes_, lanes_, np.full(len(s), None)]).ravel()
            data.append(dict(type="scattergl", x=xs, y=ys, mode="lines", line=dict(color=cmap[key], width=10), name=esc(key),
                             legendgroup=key, hoverinfo="skip"))
            data.append(dict(type="scattergl", x=(s + e) / 2, y=lanes_, mode="markers",
                             marker=dict(color=cmap[key], size=4), name=esc(key), legendgroup=key, showlegend=False,
                             hovertext=hover, hoverinfo="text"))
        else:
            nm = [names[i] for i in idx_list]
            outline = [3 if (names[i] in hl or ref[i] in hl) else 0.5 for i in idx_list]
            color: Any = cmap[key] if shade is None else [lighten(cmap[key], shade[i]) for i in idx_list]
            # ``base`` validates to a list (it accepts any values), so it is given as one
            bar = dict(type="bar", y=lanes_, x=e - s, base=s.tolist(), orientation="h", name=esc(key), legendgroup=key,
                       marker=dict(color=color, line=dict(color="#222222", width=outline)),
                       hovertext=hover, hoverinfo="text", textposition="inside", insidetextanchor="middle")
            if labels is not None:
                bar["text"] = [labels[i] for i in idx_list]
                bar["textangle"] = 0
            elif n <= 60:
                bar["text"] = [esc(x) for x in nm]
            data.append(bar)
    layout = dict(
        barmode="overlay",
        xaxis=dict(title=title_text(f"time ({unit}){merged_note}")),
        yaxis=dict(categoryorder="array", categoryarray=list(reversed(lane_order)), type="category"),
        legend=dict(title=title_text(color_by)),
        height=height or max(250, 60 + 28 * len(lane_order)),
        margin=dict(l=10, r=10, t=40 if title else 20, b=40),
    )
    layout["title"] = title_text(title)
    if labels is not None:  # labels that do not fit their bar are hidden, never shrunk to dust
        layout["uniformtext"] = dict(minsize=9, mode="hide")
    if shade is not None:
        layout["legend"]["title"] = title_text(f"{color_by} (lighter: later {shade_by})")
    if cursor_s is not None:
        layout["shapes"] = [dict(type="line", xref="x", x0=float(cursor_s) * f, x1=float(cursor_s) * f,
                                 yref="y domain", y0=0, y1=1, line=dict(color="#D00000", width=2, dash="dot"))]
    return data, layout


def memory_curve(
    curve: pd.DataFrame,
    capacity: float | Mapping[str, float] | None = None,
    *,
    x: str | None = None,
    by: str | None = None,
    lower_bound: float | None = None,
    title: str | None = None,
) -> go.Figure:
    """Live memory over time (or over steps) as a step line, one line per device / order.

    Parameters
    ----------
    curve : DataFrame
        Columns ``time_s`` (or ``step``) and either ``bytes`` (the level from that x on) or
        ``delta_bytes`` (allocation/free events), optionally a grouping column (``device``,
        ``method``...). Events at one x are summed before accumulating, so a free and an allocation
        at the same instant never draw a spike; with levels, the last level at an x wins.
    capacity : float or dict, optional
        A horizontal line (per group when a dict).
    lower_bound : float, optional
        A dashed horizontal line (e.g. the memory-ordering lower bound).

    >>> import pandas as pd
    >>> ev = pd.DataFrame({"time_s": [0, 1e-3, 1e-3], "delta_bytes": [10, -5, 7]})
    >>> memory_curve(ev, capacity=20).data[0].y.tolist()
    [10.0, 12.0]
    >>> import numpy as np; len(memory_curve(ev, capacity=np.int64(20)).layout.shapes)  # numpy numbers work too
    1
    >>> memory_curve(pd.DataFrame({"time_s": [0.0]}))
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: a memory curve needs a 'bytes' or 'delta_bytes' column; have ['time_s']
    """
    if "bytes" not in curve.columns and "delta_bytes" not in curve.columns:
        from ..errors import HetschedError

        raise HetschedError(f"a memory curve needs a 'bytes' or 'delta_bytes' column; have {list(curve.columns)}",
                            field="bytes")
    if x is None:
        x = "time_s" if "time_s" in curve.columns else ("step" if "step" in curve.columns else curve.columns[0])
    if by is None:
        by = next((c for c in ("device", "method", "order", "label") if c in curve.columns), None)
    if "bytes" not in curve.columns and "delta_bytes" in curve.columns:
        keys = [by, x] if by else [x]
        curve = curve.groupby(keys, sort=True, as_index=False)["delta_bytes"].sum()
        curve["bytes"] = curve.groupby(by)["delta_bytes"].cumsum() if by else curve["delta_bytes"].cumsum()
    groups = [(None, curve)] if by is None else list(curve.groupby(by, sort=False))
    ymax = float(curve["bytes"].max()) if len(curve) else 0.0
    if isinstance(capacity, numbers.Real):
        ymax = max(ymax, float(capacity))
    bunit, bf = bytes_unit(ymax)
    if x == "time_s":
        tunit, tf = time_unit(float(curve[x].max()) if len(curve) else 0.0)
        xtitle = f"time ({tunit})"
    else:
        tunit, tf, xtitle = "", 1.0, x
    cmap = color_map([str(k) for k, _ in groups])
    data = []
    for key, sub in groups:
        agg = sub.sort_values(x, kind="stable").drop_duplicates(x, keep="last")
        name = "memory" if key is None else str(key)
        data.append(dict(
            type="scatter", x=agg[x].to_numpy(float) * tf, y=agg["bytes"].to_numpy(float) * bf, mode="lines",
            name=name, line=dict(color=cmap.get(str(key), PALETTE[0]) if key is not None else PALETTE[0], shape="hv"),
            hovertemplate=f"%{{x:.4g}} {tunit}<br>%{{y:.4g}} {bunit}<extra>{name}</extra>",
        ))
    caps = {} if capacity is None else ({"capacity": capacity} if isinstance(capacity, numbers.Real) else dict(capacity))
    lines = [hline(float(v) * bf, dict(color="#D55E00", dash="dot"), f"{k} {v * bf:.3g} {bunit}") for k, v in caps.items()]
    if lower_bound is not None:
        lines.append(hline(float(lower_bound) * bf, dict(color="#009E73", dash="dash"),
                            f"lower bound {lower_bound * bf:.3g} {bunit}"))
    layout = dict(xaxis=dict(title=title_text(xtitle)), yaxis=dict(title=title_text(f"live memory ({bunit})")),
                  margin=dict(l=10, r=10, t=40 if title else 20, b=40), height=320)
    layout["title"] = title_text(title)
    if lines:
        layout["shapes"] = [sh for sh, _ in lines]
        layout["annotations"] = [an for _, an in lines]
    return figure_from_dicts(data, layout)


def layered_layout(graph) -> dict[str, tuple[float, float]]:
    """Layered layout: x = topological generation, y = position in it (centred)."""
    pos = {}
    for gi, gen in enumerate(graph.generations()):
        k = len(gen)
        for j, n in enumerate(gen):
            pos[n] = (float(gi), (j - (k - 1) / 2.0))
    return pos


def edge_xy(edges: Sequence[tuple[Any, Any]], pos: Mapping[Any, tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """x and y of every edge as one line trace: ``start, end, NaN`` per edge.

    Float arrays, binary on the wire: they copy and serialise far faster than lists of floats and
    ``None`` (a 1k-op graph has thousands of edge points).

    >>> edge_xy([("a", "b")], {"a": (0.0, 1.0), "b": (2.0, 3.0)})[0].tolist()
    [0.0, 2.0, nan]
    """
    ex = np.full(3 * len(edges), np.nan)
    ey = np.full(3 * len(edges), np.nan)
    if len(edges):
        ex[0::3] = [pos[u][0] for u, _ in edges]
        ex[1::3] = [pos[v][0] for _, v in edges]
        ey[0::3] = [pos[u][1] for u, _ in edges]
        ey[1::3] = [pos[v][1] for _, v in edges]
    return ex, ey


def graph_view(
    graph,
    *,
    color_by: str | Mapping[str, str] = "op_type",
    colors: Mapping[str, str] | None = None,
    highlight: Iterable[str] | None = None,
    edge_highlight: Iterable[tuple[str, str]] | None = None,
    title: str | None = None,
    height: int | None = None,
    legend_title: str | None = None,
) -> go.Figure:
    """The graph drawn left to right by topological generation.

    Parameters
    ----------
    graph : OpGraph
    color_by : ``"op_type"`` or a mapping op -> label (e.g. a placement op -> device)
    colors : dict, optional
        Colour per label (use :func:`color_map` over the system's devices for a consistent look).
    highlight : iterable of str, optional
        Ops drawn larger with a red outline (the layer a remap step moves).
    edge_highlight : iterable of (src, dst), optional
        Edges drawn thick (e.g. cross-backend edges).
    legend_title : str, optional
        Default: ``color_by`` when it is a name, else ``"device"``.

    >>> from hetsched.io.generators import chain
    >>> fig = graph_view(chain(3))
    >>> sorted(t.name for t in fig.data if t.mode == "markers")
    ['Conv', 'Relu']
    """
    pos = layered_layout(graph)
    if isinstance(color_by, str):
        label = {n: str(getattr(graph.op(n), color_by, graph.op(n).attrs.get(color_by, "?"))) for n in graph}
        legend = color_by
    else:
        label = {n: str(color_by.get(n, "(unassigned)")) for n in graph}
        legend = "device"
    legend = legend_title or legend
    cmap = color_map(list(dict.fromkeys(label.values())), base=colors)
    edges = list(graph.nx.edges)
    ex, ey = edge_xy(edges, pos)
    n = graph.n_ops
    # thousands of SVG markers make every redraw slow; WebGL draws them at once. A small graph stays SVG
    # throughout: one WebGL trace would make the page set up WebGL (a context, and in a browser without
    # a GPU a few hundred ms of software GL) for a handful of lines
    marker_type = "scatter" if n <= MAX_BARS else "scattergl"
    data = [dict(type=marker_type, x=ex, y=ey, mode="lines", line=dict(color="#BBBBBB", width=1 if n > 200 else 1.5),
                 hoverinfo="skip", showlegend=False, name="edges")]
    if edge_highlight:
        hx, hy = [], []
        for u, v in edge_highlight:
            if u in pos and v in pos:
                hx += [pos[u][0], pos[v][0], None]
                hy += [pos[u][1], pos[v][1], None]
        data.append(dict(type="scatter", x=hx, y=hy, mode="lines", line=dict(color="#D55E00", width=3),
                         name="highlighted edges", hoverinfo="skip"))
    hl = set(highlight or ())
    size = 12 if n <= 60 else (7 if n <= 600 else 4)
    ops_of: dict[str, list[str]] = {}
    for o in graph:
        ops_of.setdefault(label[o], []).append(o)
    for lab, ops in ops_of.items():
        ops_objs = [graph.op(o) for o in ops]
        data.append(dict(
            type=marker_type, x=np.array([pos[o][0] for o in ops]), y=np.array([pos[o][1] for o in ops]), mode="markers",
            name=esc(lab),
            marker=dict(
                color=cmap[lab], size=[size * 1.8 if o in hl else size for o in ops],
                line=dict(color=["#D00000" if o in hl else "#333333" for o in ops], width=[3 if o in hl else 0.5 for o in ops]),
            ),
            hovertext=[f"<b>{esc(o.name)}</b><br>{esc(o.op_type)}<br>{o.flops:.3g} FLOPs<br>weights {fmt_bytes(o.weight_bytes)}"
                       for o in ops_objs],
            hoverinfo="text", customdata=ops,
        ))
    n_gen = len(graph.generations())
    layout = dict(
        showlegend=True, legend=dict(title=title_text(legend)),
        xaxis=dict(title=title_text("topological generation"), showgrid=False, zeroline=False,
                   range=[-0.5, max(0.5, n_gen - 0.5)]),
        yaxis=dict(showgrid=False, zeroline=False, showticklabels=False),
        height=height or 420, margin=dict(l=10, r=10, t=40 if title else 20, b=40),
    )
    layout["title"] = title_text(title)
    return figure_from_dicts(data, layout)


@dataclass(frozen=True)
class BlockLayout:
    """Where a block drawing puts its nodes: the collapsed blocks and the ops of the expanded ones.

    Attributes
    ----------
    blocks : dict
        ``op -> block`` (:func:`hetsched.blocks.op_blocks` unless given).
    nodes : list of str
        ``"block:<name>"`` or ``"op:<name>"`` in the order of their first op (the drawing order).
    members : dict
        ``node -> ops`` in topological order; ``node_of`` the reverse.
    pos : dict
        ``node -> (x, y)``: columns of the node graph's topological generations, or one left-to-right
        line when blocks interleave (the node graph then has cycles).
    edges : list of (node, node)
        Where an op of one node feeds an op of another; ``ex``/``ey`` their line trace (NaN-separated).
    head : list of str
        The first lines of each node's hover text (name, op count, FLOPs, weights; names escaped).
    """

    blocks: dict[str, str]
    nodes: list[str]
    members: dict[str, list[str]]
    node_of: dict[str, str]
    pos: dict[str, tuple[float, float]]
    edges: list[tuple[str, str]]
    ex: np.ndarray
    ey: np.ndarray
    head: list[str]

    @property
    def n_cols(self) -> int:
        return 1 + int(max((p[0] for p in self.pos.values()), default=0))


def block_layout(graph, blocks: Mapping[str, str] | None = None, expanded: Iterable[str] = ()) -> BlockLayout:
    """The nodes, positions and edges of a block drawing of ``graph`` with ``expanded`` blocks open.

    Computed once per graph and set of open blocks: a walker redraws its steps over one layout, so
    the traces keep their points and a step changes colours only.

    >>> from hetsched.io.generators import resnet_like
    >>> lay = block_layout(resnet_like(n_stages=2, blocks_per_stage=2), expanded=["s0b0"])
    >>> "block:s0b1" in lay.nodes, "block:s0b0" in lay.nodes, lay.node_of["s0b1.conv1"]
    (True, False, 'block:s0b1')
    """
    from ..blocks import block_graph, op_blocks

    blocks = dict(blocks) if blocks is not None else op_blocks(graph)
    open_ = set(expanded)
    node_of = {o: (f"op:{o}" if blocks[o] in open_ else f"block:{blocks[o]}") for o in graph.ops}
    dg = block_graph(graph, node_of)  # nodes in the order of their first op, each with its ops
    members: dict[str, list[str]] = {n: d["ops"] for n, d in dg.nodes(data=True)}
    if nx.is_directed_acyclic_graph(dg):
        gens = list(nx.topological_generations(dg))
        first = {n: d["first"] for n, d in dg.nodes(data=True)}  # within a column: in op order
        pos = {}
        for gi, gen in enumerate(gens):
            gen = sorted(gen, key=first.__getitem__)
            for j, n in enumerate(gen):
                pos[n] = (float(gi), j - (len(gen) - 1) / 2.0)
    else:  # interleaved blocks: a left-to-right line in the order of their first op
        pos = {n: (float(i), 0.0) for i, n in enumerate(members)}
    edges = list(dg.edges)
    ex, ey = edge_xy(edges, pos)
    ops = graph.ops
    head = []
    for n, mem in members.items():
        if n.startswith("block:"):
            fl = sum(float(ops[o].flops) for o in mem)
            wb = sum(int(ops[o].weight_bytes) for o in mem)
            head.append(f"<b>{html.escape(n[6:])}</b> ({len(mem)} ops; click to expand)<br>{fl / 1e9:.3g} GFLOPs, "
                        f"weights {fmt_bytes(wb) or '0 B'}")
        else:
            op = ops[mem[0]]
            head.append(f"<b>{html.escape(op.name)}</b> (in {html.escape(blocks[op.name])}; click to collapse)<br>"
                        f"{html.escape(op.op_type)}, {op.flops:.3g} FLOPs")
    return BlockLayout(blocks, list(members), members, node_of, pos, edges, ex, ey, head)


def block_marker_size(n_ops: int) -> float:
    """A collapsed block's marker size: it grows with the square root of its op count (its area with the count)."""
    return 10 + 4 * float(np.sqrt(n_ops))


def block_axes(lay: BlockLayout, legend: str, *, title: str | None = None, height: int | None = None) -> dict:
    """The layout dict of a block drawing (no ticks: columns are dependency order, not a quantity)."""
    layout = dict(
        showlegend=True, legend=dict(title=title_text(legend)),
        xaxis=dict(title=title_text("blocks in dependency order (click one to expand or collapse it)"), showgrid=False,
                   zeroline=False, showticklabels=False, range=[-0.5, max(0.5, lay.n_cols - 0.5)]),
        yaxis=dict(showgrid=False, zeroline=False, showticklabels=False),
        height=height or 420, margin=dict(l=10, r=10, t=40 if title else 20, b=40),
    )
    layout["title"] = title_text(title)
    return layout


#: the outline of a block whose ops carry several labels (devices, backends): thick, in the runner-up's colour
MIXED_WIDTH = 4.0
#: how much lighter a block is drawn while only part of its ops has a label (mapped, marked)
PARTLY_LIGHTER = 0.55


def block_colors(graph, lay: BlockLayout, label: Mapping[str, Any], colors: Mapping[str, str], *,
                 on: str = "on", missing: str = "not yet") -> dict[str, list]:
    """Per node of a block drawing: fill, outline and hover lines from a (partial) ``op -> label``.

    A node takes the colour of the label holding most of its FLOPs (op count breaks ties; zero-FLOP
    ops count by number); lighter (:data:`PARTLY_LIGHTER`) while some of its ops have no label yet,
    :data:`NEUTRAL` while none has. A node whose ops carry several labels is *mixed*: a thick outline
    (:data:`MIXED_WIDTH`) in the runner-up label's colour. Labels are looked up in ``colors``
    (unknown ones: :func:`color_map`'s hash colour).

    Returns ``{"color", "line_color", "line_width", "mixed", "label", "hover"}``, lists in
    ``lay.nodes`` order; ``hover`` is the label breakdown in words (``on gpu0: 30 ops, 80% of the FLOPs``).

    >>> from hetsched.io.generators import chain
    >>> g = chain(4)
    >>> lay = block_layout(g, {o: "b" for o in g.ops})
    >>> ops = list(g.topological_order())
    >>> c = block_colors(g, lay, {ops[0]: "gpu0", ops[1]: "cpu0"}, {"gpu0": "#0072B2", "cpu0": "#E69F00"})
    >>> c["mixed"], c["line_color"], c["color"] != ["#0072B2"]
    ([True], ['#E69F00'], True)
    """
    out: dict[str, list] = {"color": [], "line_color": [], "line_width": [], "mixed": [], "label": [], "hover": []}
    ops = graph.ops
    for n in lay.nodes:
        mem = lay.members[n]
        tally: dict[str, list[float]] = {}
        total = 0.0
        for o in mem:
            f = float(ops[o].flops)
            total += f
            lab = label.get(o)
            if lab is None:
                continue
            t = tally.setdefault(str(lab), [0.0, 0.0])
            t[0] += f
            t[1] += 1
        ranked = sorted(tally, key=lambda k: (tally[k][0], tally[k][1], k), reverse=True)
        n_lab = int(sum(t[1] for t in tally.values()))
        if not ranked:
            fill = NEUTRAL
        else:
            fill = colors.get(ranked[0]) or _hash_color(ranked[0])
            if n_lab < len(mem):
                fill = lighten(fill, PARTLY_LIGHTER)
        mixed = len(ranked) > 1
        out["color"].append(fill)
        out["line_color"].append((colors.get(ranked[1]) or _hash_color(ranked[1])) if mixed else "#333333")
        out["line_width"].append(MIXED_WIDTH if mixed else 0.8)
        out["mixed"].append(mixed)
        out["label"].append(ranked[0] if ranked else None)
        if len(mem) == 1:
            out["hover"].append(f"{on} {html.escape(ranked[0])}" if ranked else missing)
            continue
        parts = [f"{on} {html.escape(k)}: {int(tally[k][1])} op(s)"
                 + (f", {tally[k][0] / total:.0%} of the FLOPs" if total > 0 else "") for k in ranked[:4]]
        if len(ranked) > 4:
            parts.append(f"and {len(ranked) - 4} more")
        if n_lab < len(mem):
            parts.append(f"{missing}: {len(mem) - n_lab} op(s)")
        out["hover"].append("<br>".join(parts))
    return out


def block_legend(labels: Sequence[str], colors: Mapping[str, str], *, partly: str, mixed: str,
                 none: str | None = None) -> list[dict]:
    """Legend-only traces of a block drawing: one per label, then the lighter, the outlined and the grey kinds."""
    data = []
    for lab in labels:
        data.append(dict(type="scatter", x=[None], y=[None], mode="markers", name=html.escape(str(lab)), showlegend=True,
                         marker=dict(color=colors[lab], size=12, symbol="square"), hoverinfo="skip"))
    data.append(dict(type="scatter", x=[None], y=[None], mode="markers", name=partly, showlegend=True, hoverinfo="skip",
                     marker=dict(color=lighten(PALETTE[0], PARTLY_LIGHTER), size=12, symbol="square")))
    data.append(dict(type="scatter", x=[None], y=[None], mode="markers", name=mixed, showlegend=True, hoverinfo="skip",
                     marker=dict(color="#FFFFFF", size=12, symbol="square", line=dict(color=PALETTE[1], width=MIXED_WIDTH))))
    if none is not None:
        data.append(dict(type="scatter", x=[None], y=[None], mode="markers", name=none, showlegend=True, hoverinfo="skip",
                         marker=dict(color=NEUTRAL, size=12, symbol="square")))
    return data


def block_sizes(lay: BlockLayout) -> list[float]:
    """Marker sizes: collapsed blocks by their op count, the ops of open blocks small."""
    return [block_marker_size(len(lay.members[n])) if n.startswith("block:") else 9.0 for n in lay.nodes]


def block_node_trace(lay: BlockLayout, col: Mapping[str, list], *, name: str = "blocks", kind: str = "scatter") -> dict:
    """The one marker trace of a block drawing: every node, per-point fill and outline from :func:`block_colors`.

    Its points (and ``customdata``: ``block:<name>`` / ``op:<name>``, what a click toggles) depend on
    the layout only; a walker's step changes the colour, outline and hover arrays.
    """
    return dict(type=kind, x=np.array([lay.pos[n][0] for n in lay.nodes]), y=np.array([lay.pos[n][1] for n in lay.nodes]),
                mode="markers", name=name, showlegend=False, customdata=list(lay.nodes),
                marker=dict(color=list(col["color"]), size=block_sizes(lay),
                            symbol=["square" if n.startswith("block:") else "circle" for n in lay.nodes],
                            line=dict(color=list(col["line_color"]), width=list(col["line_width"]))),
                hovertext=[f"{h}<br>{b}" for h, b in zip(lay.head, col["hover"])], hoverinfo="text")


def block_ring_trace(lay: BlockLayout, nodes: Iterable[str], *, name: str, color: str = "#D00000",
                     symbol: str = "square-open", hover: str = "") -> dict:
    """Rings around some nodes of a block drawing (what a decision is about), a fixed SVG trace."""
    ns = [n for n in dict.fromkeys(nodes) if n in lay.pos]
    sizes = [(block_marker_size(len(lay.members[n])) if n.startswith("block:") else 9.0) + 12 for n in ns]
    t = dict(type="scatter", x=[lay.pos[n][0] for n in ns], y=[lay.pos[n][1] for n in ns], mode="markers", name=name,
             customdata=ns, showlegend=True, hoverinfo="text" if hover else "skip",
             marker=dict(symbol=[symbol if n.startswith("block:") else symbol.replace("square", "circle") for n in ns],
                         size=sizes, color=color, line=dict(color=color, width=3)))
    if hover:
        t["hovertext"] = [f"<b>{html.escape(n.split(':', 1)[1])}</b>: {hover}" for n in ns]
    return t


def block_view(
    graph,
    blocks: Mapping[str, str] | None = None,
    *,
    expanded: Iterable[str] = (),
    color_by: str | Mapping[str, str] = "op_type",
    colors: Mapping[str, str] | None = None,
    title: str | None = None,
    height: int | None = None,
    legend_title: str | None = None,
) -> go.Figure:
    """A big graph drawn as its blocks (layers, stages), some of them expanded into their ops.

    Each collapsed block is one marker (its size grows with its op count) coloured by the label most
    of its ops have (``color_by`` as in :func:`graph_view`); an expanded block shows its ops. Every
    marker's ``customdata`` is ``"block:<name>"`` or ``"op:<name>"``, so a click can expand or
    collapse it. Blocks come from :func:`hetsched.blocks.op_blocks` unless given.

    >>> from hetsched.io.generators import resnet_like
    >>> g = resnet_like(n_stages=2, blocks_per_stage=2)
    >>> fig = block_view(g, expanded=["s0b0"])
    >>> cds = [c for t in fig.data if t.customdata is not None for c in t.customdata]
    >>> "block:s0b1" in cds, "block:s0b0" in cds, any(c.startswith("op:s0b0") for c in cds)
    (True, False, True)
    """
    lay = block_layout(graph, blocks, expanded)
    blocks, members, pos = lay.blocks, lay.members, lay.pos
    if isinstance(color_by, str):
        lab = {o: str(getattr(graph.op(o), color_by, graph.op(o).attrs.get(color_by, "?"))) for o in graph.ops}
        legend = color_by
    else:
        lab = {o: str(color_by.get(o, "(unassigned)")) for o in graph.ops}
        legend = "device"
    legend = legend_title or legend

    def node_label(n: str) -> str:
        counts: dict[str, int] = {}
        for o in members[n]:
            counts[lab[o]] = counts.get(lab[o], 0) + 1
        return max(counts, key=lambda k: (counts[k], k))

    labels = {n: node_label(n) for n in members}
    cmap = color_map(list(dict.fromkeys(labels.values())), base=colors)
    data = [dict(type="scatter", x=lay.ex, y=lay.ey, mode="lines", line=dict(color="#BBBBBB", width=1.5),
                 hoverinfo="skip", showlegend=False, name="edges")]
    by_label: dict[str, list[str]] = {}
    for n in members:
        by_label.setdefault(labels[n], []).append(n)
    for key, nodes in by_label.items():
        hover, sizes, symbols = [], [], []
        for n in nodes:
            ops = members[n]
            fl = sum(float(graph.op(o).flops) for o in ops)
            wb = sum(int(graph.op(o).weight_bytes) for o in ops)
            mix = {}
            for o in ops:
                mix[lab[o]] = mix.get(lab[o], 0) + 1
            if n.startswith("block:"):
                parts = ", ".join(f"{esc(k)}: {v}" for k, v in sorted(mix.items(), key=lambda kv: -kv[1])[:4])
                hover.append(f"<b>{esc(n[6:])}</b> ({len(ops)} ops; click to expand)<br>{fl / 1e9:.3g} GFLOPs, "
                             f"weights {fmt_bytes(wb)}<br>{parts}")
                sizes.append(block_marker_size(len(ops)))
                symbols.append("square")
            else:
                op = graph.op(ops[0])
                hover.append(f"<b>{esc(op.name)}</b> ({esc(blocks[op.name])}; click to collapse)<br>{esc(op.op_type)}<br>"
                             f"{op.flops:.3g} FLOPs")
                sizes.append(9)
                symbols.append("circle")
        data.append(dict(type="scatter", x=np.array([pos[n][0] for n in nodes]), y=np.array([pos[n][1] for n in nodes]),
                         mode="markers", name=esc(key), customdata=nodes, hovertext=hover, hoverinfo="text",
                         marker=dict(color=cmap[key], size=sizes, symbol=symbols, line=dict(color="#333333", width=0.8))))
    layout = block_axes(lay, legend, title=title, height=height)
    return figure_from_dicts(data, layout)


def compare(
    frame: pd.DataFrame,
    metric: str,
    *,
    by: str | None = None,
    color: str | None = None,
    title: str | None = None,
    highlight: str | None = None,
) -> go.Figure:
    """Bars of one metric per label of a compare table (or per ``by`` column), grouped by ``color`` if given.

    >>> import pandas as pd
    >>> f = pd.DataFrame({"label": ["heft", "h2h"], "makespan_s": [2e-3, 1e-3]})
    >>> list(compare(f, "makespan_s").data[0].x)
    ['heft', 'h2h']
    >>> compare(f.assign(status=["ok", "ok"]), "status")
    Traceback (most recent call last):
    ...
    hetsched.errors.HetschedError: column 'status' is not numeric, cannot draw it as bars
    """
    if metric not in frame.columns:
        from ..errors import HetschedError

        raise HetschedError(f"no column {metric!r} to compare; have {list(frame.columns)}", field=metric)
    by = by or ("label" if "label" in frame.columns else frame.columns[0])
    try:
        vals = frame[metric].astype(float)
    except (TypeError, ValueError):
        from ..errors import HetschedError

        raise HetschedError(f"column {metric!r} is not numeric, cannot draw it as bars", field=metric) from None
    if metric.endswith("_s"):
        unit, f = time_unit(float(vals.abs().max()) if len(vals) else 0.0)
        ytitle = metric_label(metric, unit)
    elif metric.endswith("_bytes") or metric == "bytes_moved":
        unit, f = bytes_unit(float(vals.abs().max()) if len(vals) else 0.0)
        ytitle = metric_label(metric, unit)
    else:
        f, ytitle = 1.0, metric_label(metric)
    groups = [(None, frame)] if color is None else list(frame.groupby(color, sort=False))
    cmap = color_map([str(k) for k, _ in groups])
    data = []
    for key, sub in groups:
        cols = [
            "#D55E00" if (highlight is not None and str(m) == highlight) else cmap.get(str(key), PALETTE[0])
            for m in sub[by]
        ]
        data.append(dict(type="bar", x=sub[by].astype(str).tolist(), y=(vals.loc[sub.index] * f).tolist(),
                         name=str(key) if key is not None else metric, marker=dict(color=cols),
                         hovertemplate="%{x}: %{y:.4g}<extra></extra>"))
    layout = dict(yaxis=dict(title=title_text(ytitle)), barmode="group", showlegend=color is not None,
                  margin=dict(l=10, r=10, t=40 if title else 20, b=40), height=320)
    layout["title"] = title_text(title)
    return figure_from_dicts(data, layout)
