"""PlotlyView: a Plotly figure in a widget that is drawn once and then only patched.

Why not ``go.FigureWidget``: every new FigureWidget carries plotly's whole front-end bundle
(~5 MB, sent and evaluated again per widget), and its in-place updates arrive as several separate
front-end messages that were seen to overtake each other in a busy page. A panel that redraws
on each step click sent ~10 MB per click and kept the browser busy for seconds (issue 14).

How this view works instead:

* **plotly.js once per page.** The front-end module is a few KB. The first view drawn in a page
  asks the kernel for plotly.js (``msg: need-plotly``); the kernel answers with the library
  (gzip-compressed, 1.5 MB, decompressed by the browser's ``DecompressionStream``) as one binary
  buffer, and every later view of the page shares it (a page-global promise). A page reload asks
  once again; nothing is kept in the kernel per page.
* **State, not commands.** The widget's synced state is ``spec`` (a base figure, rebuilt only for
  new input) and ``edits`` (every leaf property that differs from the base: ``{"data": {"3":
  {"marker.color": ...}}, "layout": {"title.text": ...}}``). The browser always draws ``spec``
  with ``edits`` applied, through one ``Plotly.react`` (which itself restyles only what changed),
  so message order cannot leave a stale figure, a hidden tab draws the right state when first
  shown, and five quick clicks draw once with the last state.
* **Diffs computed here.** :meth:`PlotlyView.show` takes a whole new figure from a
  :mod:`hetsched.plot` builder and sends only the properties that differ from the base. A step
  click that changes marker colours and a cursor sends those arrays and that shape; a new input
  that changes the traces' structure sends a new base.
* **Binary arrays.** Numeric arrays travel as binary buffers (typed arrays in the browser), not
  JSON lists of numbers.
* **Hover text on demand.** Traces with many points keep their hover texts in the kernel; the
  browser asks for one point's text when the mouse is on it.

The Python-side figure stays complete: ``view.data``, ``view.layout`` and ``view.figure`` read
the figure as shown (hover texts included), which is what headless tests look at.

>>> import plotly.graph_objects as go
>>> v = PlotlyView(go.Figure(go.Bar(x=[1, 2], y=[3, 4]), layout=dict(title="t")))
>>> v.data[0].type, v.layout.title.text
('bar', 't')
>>> v.show(go.Figure(go.Bar(x=[1, 2], y=[3, 5]), layout=dict(title="u")))   # same structure
'edits'
>>> sorted(v.edits["data"]["0"]), v.edits["layout"]
(['y'], {'title.text': 'u'})
>>> v.show(go.Figure([go.Bar(x=[1], y=[1]), go.Scatter(x=[1], y=[1])]))     # other traces
'spec'
"""

from __future__ import annotations

import gzip
import json
import math
import os
from importlib import resources
from typing import Any, Callable, Mapping

import anywidget
import numpy as np
import traitlets

__all__ = ["PlotlyView", "encode_figure", "decode_wire", "figure_dicts", "HOVER_INLINE_MAX", "plotly_js_gz",
           "PLOTLY_URL_ENV", "FIGURE_URL_ENV", "figure_esm", "figure_js", "figure_js_version"]

#: environment variable naming the URL a page loads plotly.js from (set by ``hetsched app``'s kernel manager)
PLOTLY_URL_ENV = "HETSCHED_PLOTLY_URL"
#: where the page loads the figure's front-end module (``hetsched app`` sets it in its kernels; see figure_esm)
FIGURE_URL_ENV = "HETSCHED_FIGURE_URL"
#: Traces with more points than this keep their hover texts in the kernel (sent on hover).
HOVER_INLINE_MAX = 300
#: Lists of numbers shorter than this stay JSON (a buffer costs more than it saves).
_MIN_BINARY = 16
#: When the edits outweigh this share of the base, a new base is sent instead.
_REBASE_SHARE = 0.6

_ESM = r"""
const CONFIG = {responsive: true, displaylogo: false, scrollZoom: false,
                modeBarButtonsToRemove: ["select2d", "lasso2d"]};
const TYPES = {f8: Float64Array, f4: Float32Array, i4: Int32Array, u4: Uint32Array, i2: Int16Array,
               u2: Uint16Array, i1: Int8Array, u1: Uint8Array};

// plotly.js once per page: the first view asks for it, every other view awaits the same promise. Served
// by `hetsched app`, it comes from the server as a cacheable script (a reload takes it from the browser's
// cache, compiled); elsewhere, or if that fails, from the kernel.
function plotlyFor(model) {
  const g = globalThis;
  if (g.__hetschedPlotly) return g.__hetschedPlotly;
  const url = model.get("plotly_url");
  const own = () => url ? plotlyFromUrl(url).catch(() => plotlyFromKernel(model)) : plotlyFromKernel(model);
  // `hetsched app`'s page asked for plotly.js in its head, before any widget existed
  const early = g.__hetschedPlotlyEarly;
  g.__hetschedPlotly = early ? early.catch(own) : own();
  return g.__hetschedPlotly;
}

function plotlyFromUrl(url) {
  const g = globalThis;
  return new Promise((resolve, reject) => {
    if (g.Plotly && g.Plotly.react) return resolve(g.Plotly);
    const s = document.createElement("script");
    // a UMD bundle: with an AMD loader on the page it would register itself there instead of as a global
    const define = g.define;
    g.define = undefined;
    const back = () => { if (g.define === undefined) g.define = define; };
    s.onload = () => { back(); g.Plotly && g.Plotly.react ? resolve(g.Plotly) : reject(new Error("no Plotly")); };
    s.onerror = () => { back(); reject(new Error("plotly.js did not load from " + url)); };
    s.src = url;
    document.head.appendChild(s);
  });
}

function plotlyFromKernel(model) {
  const g = globalThis;
  const gzip = typeof DecompressionStream !== "undefined";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { model.off("msg:custom", onMsg); g.__hetschedPlotly = undefined;
                                      reject(new Error("plotly.js did not arrive from the kernel")); }, 120000);
    async function onMsg(msg, buffers) {
      if (!msg || msg.type !== "plotly-js") return;
      model.off("msg:custom", onMsg);
      clearTimeout(timer);
      try {
        const b = buffers[0];
        let bytes = ArrayBuffer.isView(b) ? new Uint8Array(b.buffer, b.byteOffset, b.byteLength) : new Uint8Array(b);
        if (msg.gzip) {
          const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
          bytes = new Uint8Array(await new Response(stream).arrayBuffer());
        }
        const mod = {exports: {}};
        // plotly.min.js is a UMD bundle: given `module`, it exports itself there (and touches no globals)
        (new Function("module", "exports", "define", new TextDecoder().decode(bytes)))(mod, mod.exports, undefined);
        resolve(mod.exports);
      } catch (e) { g.__hetschedPlotly = undefined; reject(e); }
    }
    model.on("msg:custom", onMsg);
    model.send({type: "need-plotly", gzip});
  });
}

// A page's first WebGL plot pays for setting up WebGL (in a browser without a GPU, software GL: about
// 0.3-0.5 s on a 2-core machine, measured in headless Chromium). Pay it once while the page is idle, with
// a tiny off-screen plot of the trace kinds the Gantts and big graphs use, so the first tab that needs
// WebGL (e.g. the Mapping Gantt) draws at once. Once per page; skipped when the page already drew one.
// Only a figure whose panel expects WebGL asks for it (`warm_gl`): a page of small graphs never makes a
// WebGL context, which costs memory and, in a headless browser without a GPU, can stall the page.
function warmWebGL(Plotly) {
  const g = globalThis;
  if (g.__hetschedWarmGL || typeof document === "undefined") return;
  g.__hetschedWarmGL = "scheduled";
  const idle = g.requestIdleCallback || ((f) => setTimeout(f, 300));
  idle(async () => {
    if (document.querySelector(".hetsched-plot .gl-container canvas")) { g.__hetschedWarmGL = "not needed"; return; }
    const w = document.createElement("div");
    w.style.cssText = "position:fixed;left:-10000px;top:0;width:160px;height:120px;visibility:hidden";
    document.body.appendChild(w);
    const t0 = performance.now();
    try {
      await Plotly.newPlot(w, [{type: "scattergl", x: [0, 1, null, 1, 2], y: [0, 0, null, 1, 1], mode: "lines",
                                line: {width: 10}},
                               {type: "scattergl", x: [0.5, 1.5], y: [0, 1], mode: "markers"}],
                           {width: 160, height: 120, margin: {l: 0, r: 0, t: 0, b: 0}, showlegend: false},
                           {staticPlot: true});
      g.__hetschedWarmGL = `done in ${Math.round(performance.now() - t0)} ms`;
    } catch (e) {
      g.__hetschedWarmGL = "failed: " + e;  // no WebGL at all: the plots will say so themselves
    } finally {
      Plotly.purge(w);
      w.remove();
    }
  }, {timeout: 4000});
}

function typed(x) {
  const T = TYPES[x.dtype] || Float64Array;
  const b = x.bdata;
  const buf = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);  // aligned copy
  const flat = new T(buf);
  if (!x.shape || x.shape.length < 2) return flat;
  const [rows, cols] = x.shape, out = [];
  for (let r = 0; r < rows; r++) out.push(flat.subarray(r * cols, (r + 1) * cols));
  return out;
}

function decode(x) {
  if (Array.isArray(x)) return x.map(decode);
  if (x && typeof x === "object") {
    if (x.dtype && x.bdata && ArrayBuffer.isView(x.bdata)) return typed(x);
    const out = {};
    for (const k in x) out[k] = decode(x[k]);
    return out;
  }
  return x;
}

function setPath(obj, path, value) {
  const keys = path.split(".");
  let o = obj;
  for (let i = 0; i < keys.length - 1; i++) {
    const k = keys[i], v = o[k];
    o[k] = (v && typeof v === "object" && !Array.isArray(v) && !ArrayBuffer.isView(v)) ? Object.assign({}, v) : {};
    o = o[k];
  }
  const last = keys[keys.length - 1];
  if (value === null) delete o[last]; else o[last] = value;
}

const ALLOWED = /&lt;(\/?(?:b|i|br|sub|sup|em|strong)\s*\/?)&gt;/gi;
function safeHtml(s) {
  const esc = String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  return esc.replace(ALLOWED, "<$1>");
}

// a figure with nothing in it yet (the view before its panel's first result): no Plotly axes
function isEmpty(spec) {
  if (!spec || !spec.data) return true;
  const keys = Object.keys(spec.layout || {}).filter((k) => k !== "autosize");
  return spec.data.length === 0 && keys.length === 0;
}

function render({ model, el }) {
  const div = document.createElement("div");
  div.className = "hetsched-plot";
  const tip = document.createElement("div");
  tip.className = "hetsched-tip";
  // what stands in for a figure not drawn yet: words, never a frame of empty axes
  const holder = document.createElement("div");
  holder.className = "hetsched-placeholder";
  el.classList.add("hetsched-plot-host");
  el.appendChild(holder);
  el.appendChild(div);
  el.appendChild(tip);
  let Plotly = null, base = null, baseRev = null, busy = false, again = false, alive = true, hoverKey = null;

  const stale = () => el.classList.toggle("hetsched-stale", !!model.get("stale"));
  // while the kernel computes the next result: the figure on screen greyed with a spinner over it, or,
  // before the first result, "computing ..." in place of the figure
  const computing = () => {
    const on = !!model.get("busy");
    el.classList.toggle("hetsched-computing", on);
    holder.textContent = on ? "computing \u2026" : "not computed yet: shown when its tab is open";
  };
  const placeholder = () => {
    const empty = isEmpty(model.get("spec"));
    el.classList.toggle("hetsched-empty", empty);
    return empty;
  };

  async function draw() {
    if (busy) { again = true; return; }
    busy = true;
    // how many plots are drawing right now (a step button waits for zero before its next move)
    globalThis.__hetschedDrawing = (globalThis.__hetschedDrawing || 0) + 1;
    try {
      do {
        again = false;
        if (!Plotly) Plotly = await plotlyFor(model);
        if (!alive) return;
        const spec = model.get("spec") || {};
        if (placeholder()) { again = false; break; }
        if (spec.rev !== baseRev) { base = decode(spec); baseRev = spec.rev; }
        const edits = decode(model.get("edits") || {});
        const layout = JSON.parse(JSON.stringify(base.layout || {}));
        for (const p in (edits.layout || {})) setPath(layout, p, edits.layout[p]);
        // keep the user's zoom across patches of one base; a new base starts afresh
        layout.uirevision = baseRev;
        const data = (base.data || []).map((t, i) => {
          const out = Object.assign({}, t), e = (edits.data || {})[String(i)];
          if (e) for (const p in e) setPath(out, p, e[p]);
          return out;
        });
        // the figure's height as CSS too: a resize (Plots.resize deletes layout.height, then sizes the
        // plot from its div) must find it, or a plot patched since its first draw collapses to 0 px
        div.style.height = layout.height ? `${layout.height}px` : "";
        const t0 = performance.now();
        await Plotly.react(div, data, layout, CONFIG);
        const log = (globalThis.__hetschedDrawLog = globalThis.__hetschedDrawLog || []);
        log.push({ms: performance.now() - t0, traces: data.length, at: t0});
        if (log.length > 200) log.splice(0, log.length - 200);
        el.dataset.rev = String(baseRev) + "." + String(model.get("edits_rev"));
        // when the page last finished drawing a plot (what browser tests and benchmarks wait on)
        globalThis.__hetschedLastDraw = performance.now();
        globalThis.__hetschedDraws = (globalThis.__hetschedDraws || 0) + 1;
        if (model.get("warm_gl")) warmWebGL(Plotly);
      } while (again && alive);
    } catch (e) {
      div.textContent = "plot failed: " + e;
      console.error("hetsched plot", e);
    } finally {
      busy = false;
      globalThis.__hetschedDrawing -= 1;
    }
  }

  function onMsg(msg) {
    if (msg && msg.type === "hover-text" && msg.key === hoverKey && msg.text) {
      tip.innerHTML = safeHtml(msg.text);
      tip.style.display = "block";
    }
  }
  model.on("msg:custom", onMsg);
  model.on("change:spec", draw);
  model.on("change:edits", draw);
  model.on("change:stale", stale);
  model.on("change:busy", computing);
  stale();
  computing();
  placeholder();
  draw().then(() => {
    if (!div.on) return;
    div.on("plotly_hover", (ev) => {
      const p = ev.points && ev.points[0];
      if (!p) return;
      const trace = (div.data || [])[p.curveNumber] || {};
      if (!(trace.meta && trace.meta.hetschedHover)) return;
      hoverKey = `${baseRev}:${p.curveNumber}:${p.pointNumber}`;
      const r = el.getBoundingClientRect(), x = ev.event.clientX - r.left, y = ev.event.clientY - r.top;
      tip.style.left = `${Math.min(x + 14, Math.max(0, r.width - 260))}px`;
      tip.style.top = `${y + 14}px`;
      model.send({type: "hover", key: hoverKey, trace: p.curveNumber, point: p.pointNumber});
    });
    div.on("plotly_unhover", () => { hoverKey = null; tip.style.display = "none"; });
    div.on("plotly_click", (ev) => {
      const p = ev.points && ev.points[0];
      if (p) model.send({type: "click", trace: p.curveNumber, point: p.pointNumber});
    });
  });
  const ro = new ResizeObserver(() => { if (Plotly && div.data && el.offsetParent !== null) Plotly.Plots.resize(div); });
  ro.observe(el);
  return () => {
    alive = false;
    ro.disconnect();
    model.off("msg:custom", onMsg);
    model.off("change:spec", draw);
    model.off("change:edits", draw);
    model.off("change:stale", stale);
    model.off("change:busy", computing);
    if (Plotly) Plotly.purge(div);
  };
}

export default { render };
"""


def figure_esm(url: str | None = None) -> str:
    """The figure widget's front-end module as its widgets carry it.

    Each anywidget carries its module in its state: 14.6 KB of it per figure, 25 figures in a
    dashboard, sent in every page's first message and compiled once per figure. Served by
    ``hetsched app`` (``url``, default the :data:`FIGURE_URL_ENV` its kernels get), a widget carries
    a two-line module that imports the one the server serves, so a page fetches and compiles it once
    (and a reload takes it from the browser's cache). Elsewhere: the module itself.

    >>> len(figure_esm("/hetsched/figure.js?v=1")) < 300, figure_esm("") == _ESM
    (True, True)
    """
    url = os.environ.get(FIGURE_URL_ENV, "") if url is None else url
    if not url:
        return _ESM
    # anywidget imports a module given as text from a blob: URL, where a relative import has no base
    return (f"const m = await import(new URL({json.dumps(url)}, globalThis.location.href).href);\n"
            "export default m.default;\n")


def figure_js() -> bytes:
    """The figure widget's front-end module, as ``hetsched app`` serves it (see :func:`figure_esm`)."""
    return _ESM.encode()


def figure_js_version() -> str:
    """A short hash of :func:`figure_js` (its URL names it, so a browser never runs a stale copy)."""
    import hashlib

    return hashlib.sha1(figure_js()).hexdigest()[:12]


_CSS = """
.hetsched-plot-host { position: relative; width: 100%; min-width: 0; }
.hetsched-plot { width: 100%; }
.hetsched-plot-host.hetsched-stale .hetsched-plot { opacity: 0.35; filter: grayscale(0.6); transition: opacity 0.15s; }
.hetsched-placeholder { display: none; }
.hetsched-plot-host.hetsched-empty .hetsched-plot { display: none; }
.hetsched-plot-host.hetsched-empty .hetsched-placeholder { display: flex; align-items: center; justify-content: center;
  min-height: 120px; border: 1px dashed #BBBBBB; border-radius: 4px; color: #666; font: italic 15px sans-serif; }
.hetsched-plot-host.hetsched-computing .hetsched-plot { opacity: 0.35; filter: grayscale(0.6); transition: opacity 0.15s; }
.hetsched-plot-host.hetsched-computing:not(.hetsched-empty)::after { content: ""; position: absolute; top: 50%;
  left: 50%; width: 36px; height: 36px; margin: -18px 0 0 -18px; border: 4px solid #C8D4E0; border-top-color: #0072B2;
  border-radius: 50%; animation: hetsched-spin 0.9s linear infinite; pointer-events: none; z-index: 10; }
@keyframes hetsched-spin { to { transform: rotate(360deg); } }
.hetsched-refused input { border-color: #B00020 !important; background: #FFF0F0 !important; }
.hetsched-spinner { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.4em; vertical-align: -0.1em;
  border: 2px solid #E3C78A; border-top-color: #8A5A00; border-radius: 50%; animation: hetsched-spin 0.9s linear infinite; }
.hetsched-tip { display: none; position: absolute; z-index: 1000; pointer-events: none; max-width: 360px;
  background: rgba(255,255,255,0.96); border: 1px solid #888; border-radius: 3px; padding: 4px 6px;
  font: 13px/1.35 sans-serif; color: #111; box-shadow: 0 1px 4px rgba(0,0,0,0.25); }
"""

_PLOTLY_GZ: bytes | None = None
_PLOTLY_RAW: bytes | None = None


def plotly_js_gz(compressed: bool = True) -> bytes:
    """plotly.js as bundled with the installed ``plotly`` package (gzip-compressed by default).

    Read (and compressed) once per process; what :class:`PlotlyView` sends a page once.
    """
    global _PLOTLY_GZ, _PLOTLY_RAW
    if compressed and _PLOTLY_GZ is not None:
        return _PLOTLY_GZ
    raw = _PLOTLY_RAW or resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    if not compressed:
        _PLOTLY_RAW = raw  # a browser without DecompressionStream: kept once asked for
        return raw
    # the 4.6 MB original is not kept: every kernel of a class would hold it for nothing
    _PLOTLY_GZ = gzip.compress(raw, compresslevel=6, mtime=0)
    return _PLOTLY_GZ


# ------------------------------------------------------------------ encoding
def figure_dicts(fig: Any) -> tuple[list[dict], dict]:
    """Plain ``(data, layout)`` dicts of a figure (``go.Figure`` or a ``{"data", "layout"}`` dict).

    The dicts are the figure's own (not copies): callers must not mutate them.
    """
    if isinstance(fig, Mapping):
        return [dict(t) for t in fig.get("data", [])], dict(fig.get("layout", {}))
    # go.Figure keeps its properties as plain dicts; reading them avoids the deep copy of to_dict()
    return [t._props for t in fig.data], fig.layout._props


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _binary(a: np.ndarray) -> dict | None:
    """``{"dtype", "bdata", "shape"}`` for a numeric array (plotly.js's typed-array spec, binary)."""
    k = a.dtype.kind
    if k == "f":
        a = a.astype(np.float32 if a.dtype == np.float32 else np.float64, copy=False)
        dt = "f4" if a.dtype == np.float32 else "f8"
    elif k in "iu":
        # plotly.js has no 64-bit integer arrays; int32 when the values fit, else float64
        if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
            a, dt = a.astype(np.float64), "f8"
        else:
            a, dt = a.astype(np.int32, copy=False), "i4"
    else:
        return None
    if a.ndim > 2:
        return None
    a = np.ascontiguousarray(a)
    return {"dtype": dt, "bdata": memoryview(a).cast("B"), "shape": list(a.shape)}


def _encode_value(v: Any) -> Any:
    """One property value on the wire: numeric arrays binary, NaN as null in JSON lists."""
    if isinstance(v, np.ndarray):
        if v.dtype.kind in "fiu" and v.size >= _MIN_BINARY:
            b = _binary(v)
            if b is not None:
                return b
        return _encode_value(v.tolist())
    if isinstance(v, (list, tuple)):
        if len(v) >= _MIN_BINARY and all(_is_number(x) for x in v):
            b = _binary(np.asarray(v, dtype=float))
            if b is not None:
                return b
        return [_encode_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _encode_value(x) for k, x in v.items()}
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def _n_points(t: Mapping[str, Any]) -> int:
    for k in ("x", "y", "base", "customdata"):
        v = t.get(k)
        if v is not None and hasattr(v, "__len__"):
            return len(v)
    return 0


def encode_figure(data: list[dict], layout: dict, *, hover_inline_max: int = HOVER_INLINE_MAX
                  ) -> tuple[list[dict], dict, dict[int, Any]]:
    """The wire form of a figure: ``(data, layout, hover)`` (``hover``: texts kept in the kernel).

    Traces with more than ``hover_inline_max`` points lose their ``hovertext`` on the wire; the
    browser asks for one point's text when hovered (``meta.hetschedHover``). The layout's fixed
    ``width`` is dropped: figures take the width of their panel.

    >>> d, l, h = encode_figure([dict(type="bar", x=list(range(20)), hovertext=["a"] * 20)], dict(width=400),
    ...                         hover_inline_max=10)
    >>> d[0]["x"]["dtype"], "hovertext" in d[0], sorted(h), l
    ('f8', False, [0], {'autosize': True})
    """
    hover: dict[int, Any] = {}
    out = []
    for i, t in enumerate(data):
        t2 = dict(t)
        ht = t2.get("hovertext")
        if ht is not None and not isinstance(ht, str) and len(ht) > hover_inline_max and t2.get("hoverinfo") != "skip":
            hover[i] = ht
            del t2["hovertext"]
            t2["hoverinfo"] = "none"  # plotly still emits hover events; the text comes on demand
            meta = t2.get("meta")
            t2["meta"] = {**(meta if isinstance(meta, dict) else {}), "hetschedHover": True}
        out.append({k: _encode_value(v) for k, v in t2.items()})
    lay = {k: _encode_value(v) for k, v in layout.items() if k != "width"}
    lay["autosize"] = True
    return out, lay, hover


# ------------------------------------------------------------------ diffing
def _flatten(d: Mapping[str, Any], prefix: str = "", out: dict | None = None) -> dict[str, Any]:
    """Leaf paths of nested dicts (lists, arrays and scalars are leaves): ``{"marker.color": ...}``."""
    out = {} if out is None else out
    for k, v in d.items():
        p = f"{prefix}{k}"
        if isinstance(v, dict) and v and "bdata" not in v:
            _flatten(v, p + ".", out)
        else:
            out[p] = v
    return out


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, dict) and isinstance(b, dict) and "bdata" in a and "bdata" in b:
        return a["dtype"] == b["dtype"] and a["shape"] == b["shape"] and a["bdata"] == b["bdata"]
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable values are different values
        return False


def _diff(base: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """Leaf paths of ``new`` that differ from ``base`` (``None``: removed)."""
    fb, fn = _flatten(base), _flatten(new)
    out = {p: v for p, v in fn.items() if p not in fb or not _same(fb[p], v)}
    # a removed leaf; a path that became a dict (or stopped being one) is covered by its new leaves
    out.update({p: None for p in fb if p not in fn and not any(q.startswith(p + ".") for q in fn)})
    return out


def _weight(v: Any) -> int:
    """A rough wire size of a value in bytes (for the rebase decision)."""
    if isinstance(v, dict):
        if "bdata" in v:
            return v["bdata"].nbytes
        return sum(len(k) + _weight(x) for k, x in v.items())
    if isinstance(v, list):
        return 2 + sum(_weight(x) + 1 for x in v)
    if isinstance(v, str):
        return len(v) + 2
    return 8


class PlotlyView(anywidget.AnyWidget):
    """A Plotly figure drawn in the browser by plotly.js, updated by sending only what changed.

    Parameters
    ----------
    fig : go.Figure or dict, optional
        The first figure (an empty one if omitted).

    Attributes
    ----------
    figure : go.Figure
        The figure as shown (read-only: use :meth:`show` to change it).
    data, layout :
        ``figure.data`` and ``figure.layout`` (what tests inspect).
    n_sent_specs, n_sent_edits : int
        How many new bases and how many patches were sent (for tests and benchmarks).
    """

    _esm = figure_esm()
    _css = _CSS
    spec = traitlets.Dict().tag(sync=True)
    edits = traitlets.Dict().tag(sync=True)
    edits_rev = traitlets.Int(0).tag(sync=True)
    stale = traitlets.Bool(False).tag(sync=True)
    #: the kernel computes the next result (greyed, spinner; before the first result "computing ...")
    busy = traitlets.Bool(False).tag(sync=True)
    #: set up WebGL once the page is idle (see ``warmWebGL``): a panel sets it when a WebGL plot is to come
    warm_gl = traitlets.Bool(False).tag(sync=True)
    #: where the page loads plotly.js as a cacheable script (``hetsched app`` sets :data:`PLOTLY_URL_ENV` in
    #: its kernels); empty: from the kernel, once per page
    plotly_url = traitlets.Unicode("").tag(sync=True)

    @traitlets.default("plotly_url")
    def _default_plotly_url(self) -> str:
        return os.environ.get(PLOTLY_URL_ENV, "")

    def __init__(self, fig: Any = None, **kw: Any) -> None:
        super().__init__(**kw)
        self._rev = 0
        self._figure: Any = None
        self._base_data: list[dict] = []
        self._base_layout: dict = {}
        self._base_weight = 1
        self._top_margin: float | None = None
        self._hover: dict[int, Any] = {}
        self._click: list[Callable[[int, int, Any], None]] = []
        self.n_sent_specs = 0
        self.n_sent_edits = 0
        self.on_msg(self._on_front_end_msg)
        self.show(fig if fig is not None else {"data": [], "layout": {}}, force_spec=True)

    # -- reading ------------------------------------------------------------------
    @property
    def figure(self) -> Any:
        import plotly.graph_objects as go

        if not isinstance(self._figure, go.Figure):
            self._figure = go.Figure(self._figure, _validate=False)
        return self._figure

    @property
    def data(self):
        return self.figure.data

    @property
    def layout(self):
        return self.figure.layout

    # -- writing ------------------------------------------------------------------
    def show(self, fig: Any, *, force_spec: bool = False) -> str:
        """Show ``fig``: a patch of what changed when its traces match the shown ones, else a new base.

        Returns ``"edits"``, ``"spec"`` or ``"same"`` (nothing to send).
        """
        data, layout = figure_dicts(fig)
        wdata, wlayout, hover = encode_figure(data, layout)
        self._figure = fig
        self._hover = hover
        same_shape = (not force_spec and len(wdata) == len(self._base_data)
                      and all(a.get("type") == b.get("type") for a, b in zip(wdata, self._base_data)))
        if same_shape:
            wlayout = self._steady_top_margin(wlayout)
            dd = {}
            for i, (b, t) in enumerate(zip(self._base_data, wdata)):
                d = _diff(b, t)
                if d:
                    dd[str(i)] = d
            dl = _diff(self._base_layout, wlayout)
            edits = {"data": dd, "layout": dl}
            if _weight(edits) <= _REBASE_SHARE * self._base_weight:
                if _same_edits(edits, self.edits):
                    return "same"
                with self.hold_sync():
                    self.edits = edits
                    self.edits_rev += 1
                self.n_sent_edits += 1
                return "edits"
        self._rev += 1
        self._top_margin = (wlayout.get("margin") or {}).get("t")
        self._base_data, self._base_layout = wdata, wlayout
        self._base_weight = max(1, _weight({"data": wdata, "layout": wlayout}))
        with self.hold_sync():
            self.spec = {"rev": self._rev, "data": wdata, "layout": wlayout}
            self.edits = {}
            self.edits_rev += 1
        self.n_sent_specs += 1
        return "spec"

    def _steady_top_margin(self, layout: dict) -> dict:
        """Within one base, the top margin only grows: a step whose title wraps onto a second line
        widens it, and the next step's one-line title keeps it. A margin that changed back and forth
        would make the plot jump up and down and the browser lay the whole figure out again."""
        t = (layout.get("margin") or {}).get("t")
        if t is None or self._top_margin is None:
            return layout
        if t < self._top_margin:
            return {**layout, "margin": {**layout["margin"], "t": self._top_margin}}
        self._top_margin = t
        return layout

    def on_click(self, callback: Callable[[int, int, Any], None]) -> None:
        """Call ``callback(trace_index, point_index, customdata_or_None)`` when a point is clicked."""
        self._click.append(callback)

    # -- front-end requests -------------------------------------------------------------
    def _on_front_end_msg(self, _widget: Any, content: Mapping[str, Any], _buffers: Any) -> None:
        kind = content.get("type") if isinstance(content, Mapping) else None
        if kind == "need-plotly":
            gz = bool(content.get("gzip", True))
            self.send({"type": "plotly-js", "gzip": gz}, buffers=[plotly_js_gz(gz)])
        elif kind == "hover":
            text = self.hover_text(content.get("trace"), content.get("point"))
            self.send({"type": "hover-text", "key": content.get("key"), "text": text})
        elif kind == "click":
            i, j = content.get("trace"), content.get("point")
            cd = self._point_value(i, j, "customdata")
            for cb in list(self._click):
                cb(i, j, cd)

    def _point_value(self, i: Any, j: Any, prop: str) -> Any:
        try:
            data, _layout = figure_dicts(self._figure)
            v = data[int(i)].get(prop)
            return None if v is None else v[int(j)]
        except (IndexError, KeyError, TypeError, ValueError):
            return None

    def hover_text(self, trace: Any, point: Any) -> str | None:
        """The hover text of one point of a trace whose texts stay in the kernel."""
        try:
            texts = self._hover[int(trace)]
            return str(texts[int(point)])
        except (KeyError, IndexError, TypeError, ValueError):
            return None


def _same_edits(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    if set(a.get("data", {})) != set(b.get("data", {})) or not _same_flat(a.get("layout", {}), b.get("layout", {})):
        return False
    return all(_same_flat(v, b["data"][k]) for k, v in a.get("data", {}).items())


def _same_flat(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return set(a) == set(b) and all(_same(v, b[k]) for k, v in a.items())


def decode_wire(x: Any) -> Any:
    """What the browser makes of the wire form: binary arrays back to lists (for tests).

    >>> decode_wire(_encode_value(np.arange(20.0)))[:3]
    [0.0, 1.0, 2.0]
    """
    if isinstance(x, dict):
        if "bdata" in x and "dtype" in x and isinstance(x["bdata"], (memoryview, bytes)):
            a = np.frombuffer(bytes(x["bdata"]), dtype=np.dtype(x["dtype"]))
            return a.reshape(x["shape"]).tolist()
        return {k: decode_wire(v) for k, v in x.items()}
    if isinstance(x, list):
        return [decode_wire(v) for v in x]
    return x
