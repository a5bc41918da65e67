"""MemoryPanel: which operator runs first, and what that does to the peak memory (operator ordering).

The panel calls :func:`hetsched.memory.optimize_order`: the patent's flow (an integer programme
under the user's time limit; if it does not prove an order optimal in time, a tensor-lifetime-aware
BFS and a memory-aware DFS, the lower one fine-tuned at its peak step), the programmes alone, our
methods, the exact search and the compiler baselines. It draws the memory curve of the order next
to the ILP's status, bound and gap, overlays other orders and the lower bound, and lists the
tensors live at the peak.

A :class:`~hetsched.widgets.walker.DecisionWalker` walks ``result.steps`` (the ILP attempt, each
BFS pick, each DFS push and pop, the pick of the lower order, each fine-tune move) without
re-running anything: :func:`hetsched.memory.walk_state` replays the log to the step, and each step
is told in plain words with the patent claim that decided it, beside a small table of its numbers
(ASAP/ALAP and priority of a pick, the DFS window and stack, a move's peak before and after).

>>> from hetsched.io.generators import randwire_ws
>>> p = MemoryPanel(graph=randwire_ws(20, seed=0), method="patent-heuristic")
>>> p.result.peak_bytes >= p.result.lower_bound_bytes
True
>>> p.state.time_limit_s = -1; "refused" in p.message.value, p.state.time_limit_s
(True, 2.0)
"""

from __future__ import annotations

import html
import math
import re
from typing import Any, Mapping

import ipywidgets as W
import pandas as pd
import traitlets

import hetsched as hs
import hetsched.memory as mem
from hetsched.errors import HetschedError
from hetsched.io import csv_safe
from hetsched.plot import format_value, group_colors
from hetsched.plot.memory import live_bars, walk_curves
from hetsched.registry import describe, label
from hetsched.results import SolverRun, Step

from .base import Panel, Session, link_clamped, small_terms, term
from .walker import DecisionWalker

__all__ = ["MemoryPanel", "MemoryState", "PHASES", "method_name", "describe_step", "step_table", "list_label"]

#: the methods offered: the core's table (its names and descriptions: hetsched.registry.label/describe);
#: "ilp" is "ilp-cumulative" under another name
_METHOD_KEYS = [k for k in mem.METHODS if k != "ilp"]


def method_name(key: str) -> str:
    """The plain name of an ordering method, from the core (:func:`hetsched.registry.label`).

    >>> method_name("kahn")
    "Kahn's order"
    """
    return label(mem.METHODS[key])

#: orders that may be overlaid: never one that spends the time limit (it would run on every recompute)
_OVERLAY_KEYS = [k for k in _METHOD_KEYS if k not in mem.SOLVER_METHODS]
_DEFAULT_OVERLAY = ("kahn", "bfs", "dfs", "heuristic")
#: one colour per overlay order, whichever are shown (the group palette: never a device colour)
_OVERLAY_COLORS = group_colors(method_name(k) for k in _OVERLAY_KEYS)

#: step phases (``step.data["phase"]``) in plain words: the jump buttons and the step list
PHASES = {"S2": "ILP", "S31": "BFS", "S32": "DFS", "S4-pick": "pick the lower", "S4": "fine-tune",
          "portfolio": "candidates", "polish": "polish", "exact": "exact search", "stop": "stop at the bound",
          "start": "start", "final": "end"}
#: the claim of the patent that decides each phase (cited in each step's explanation)
_CLAIMS = {"S2": "claims 1-5", "S31": "claim 7", "S32": "claim 8", "S4-pick": "claim 1", "S4": "claim 9"}

#: how many tensors live at the peak the bars may list (a view choice: the bars stay readable)
_TOP_MIN, _TOP_MAX = 1, 200


class MemoryState(traitlets.HasTraits):
    method = traitlets.Enum(_METHOD_KEYS, default_value=mem.PARAMS["method"].default)
    time_limit_s = traitlets.Float(mem.PARAMS["time_limit_s"].default)
    overlay = traitlets.Tuple(default_value=_DEFAULT_OVERLAY)  # other orders drawn for comparison
    step = traitlets.Int(0)  # view: decisions done (0 = before the first)
    top = traitlets.Int(20)  # view: tensors listed at the peak


# ----------------------------------------------------------------------------- words
def _b(x: Any) -> str:
    return format_value(x, "peak_bytes")


_RAW_BYTES = re.compile(r"\b(\d{3,})(?:\.\d+)? ?(?:B|bytes)\b")
_CODES = {"S2": "ILP", "S31": "BFS", "S32": "DFS", "S3": "BFS/DFS", "S4": "fine-tune"}


def plain(text: str) -> str:
    """A core message in plain words: byte counts in readable units, the patent's step codes named.

    >>> plain("S3: BFS peak 10445072 B, DFS peak 8883777 B")
    'BFS/DFS: BFS peak 9.96 MiB, DFS peak 8.47 MiB'
    >>> plain("S2 skipped: the ILP would have 3760646 variables")
    'ILP skipped: the ILP would have 3,760,646 variables'
    """
    text = _RAW_BYTES.sub(lambda m: _b(int(m.group(1))), str(text)).replace("incumbent", "best order")
    text = re.sub(r"\b\d{5,}\b", lambda m: f"{int(m.group(0)):,}", text)  # 3760646 variables -> 3,760,646
    return re.sub(r"\b(S2|S31|S32|S3|S4)\b", lambda m: _CODES[m.group(1)], text)


def _bound(x: Any) -> str:
    """A solver's proven bound; HiGHS reports -inf until it has proved one."""
    return "none yet" if x is None or not math.isfinite(float(x)) else _b(x)


def _solver_gap(x: Any) -> str:
    return "–" if x is None else f"{x:.1%}" if math.isfinite(float(x)) else "unknown (no bound yet)"


def _verdict(ok: bool, yes: str = "kept", no: str = "refused") -> str:
    return (f"<span style='color:#1B5E20;font-weight:600'>{yes}</span>" if ok
            else f"<span style='color:#B00020;font-weight:600'>{no}</span>")


def _code(x: Any) -> str:
    return f"<code>{html.escape(str(x))}</code>"


def _names(xs: Any, limit: int = 8) -> str:
    xs = list(xs or ())
    more = f" … (+{len(xs) - limit})" if len(xs) > limit else ""
    return ", ".join(html.escape(str(x)) for x in xs[:limit]) + more


#: a solver run's status (:class:`hetsched.results.SolverRun`) in plain words
_ILP_STATUS = {"optimal": "finished: order proven optimal", "skipped": "not built (too large)",
               "feasible": "time limit reached: best order not proven", "killed": "time limit reached: solver stopped",
               "no solution": "no order found", "failed": "the solver failed"}


def _ilp_status(status: str) -> str:
    return _ILP_STATUS.get(status, status)


def list_label(step: Step) -> str:
    """One line of the decision list (plain text: the list shows it verbatim).

    >>> from hetsched.results import Step
    >>> list_label(Step(4, "free_earlier", "t1", before=2**21, after=2**20, data={"phase": "S4"}))
    '✓ fine-tune: free t1 earlier: peak 2 MiB → 1 MiB'
    """
    d = step.data or {}
    ph = d.get("phase")
    head = "✓" if step.accepted else "✗"
    if ph == "S2":
        return f"{head} ILP ({d['ilp'].model}): {_ilp_status(d['ilp'].status)}"
    if ph == "S31":
        return f"{head} BFS runs {step.subject} (live {_b(d.get('live_bytes'))})"
    if ph == "S32":
        return (f"{head} DFS {step.action} {step.subject} (priority {_b(d.get('priority'))})" if step.action == "push"
                else f"{head} DFS pop {step.subject}: {len(d.get('ops', ()))} op(s) into the order")
    if ph == "S4":
        verb = "free" if step.action == "free_earlier" else "create"
        when = "earlier" if step.action == "free_earlier" else "later"
        return f"{head} fine-tune: {verb} {step.subject} {when}: peak {_b(step.before)} → {_b(step.after)}"
    if ph == "S4-pick":
        return f"{head} pick {str(step.subject).upper() if step.subject in ('bfs', 'dfs') else step.subject} ({_b(step.after)})"
    cost = f": {_b(step.before)} → {_b(step.after)}" if step.before is not None and step.after is not None else ""
    return f"{head} {PHASES.get(ph, ph or '')} {step.action} {step.subject}{cost}"


def describe_step(step: Step, *, n_steps: int | None = None, n_ops: int | None = None) -> str:
    """What one decision did, in plain words (HTML), citing the claim of the patent that decided it.

    >>> from hetsched.results import Step
    >>> s = Step(7, "free_earlier", "x:out", before=3 * 2**20, after=2 * 2**20, accepted=True,
    ...          data={"phase": "S4", "peak_step": 4, "moved": ["c"], "tensor_bytes": 2**20})
    >>> t = describe_step(s); "claim 9" in t and "3 MiB → 2 MiB" in t and "kept" in t
    True
    """
    d = step.data or {}
    ph = d.get("phase")
    claim = _CLAIMS.get(ph)
    where = f"<b>step {step.index + 1}{f' of {n_steps}' if n_steps else ''}</b> · {html.escape(PHASES.get(ph, str(ph or '')))}"
    where += f" {term(claim)}" if claim else " <i>(ours, not in the patent)</i>" if ph in ("portfolio", "polish", "stop") else ""
    if ph == "S2":
        run: SolverRun = d["ilp"]
        form = (f"the integer programme as the patent writes it {term('its A/P variables')}" if run.model == "patent"
                else f"the {html.escape(run.model)} integer programme")
        lim = run.time_limit_s
        if step.index > 0:  # ours ("auto"): the ILP runs after the fallback, started from its order
            what = (f"{form}, started from the fallback's order, ran for up to {lim:g} s: "
                    f"{html.escape(_ilp_status(run.status))} (proven bound {_bound(run.bound)}) — "
                    f"{_verdict(step.accepted, 'its lower order is taken', 'the fallback order stays')}.")
        elif run.status == "skipped":
            what = (f"{form} is not built: {small_terms(html.escape(plain(step.reason)))}. Without a solution within the time "
                    f"limit the patent goes on to the BFS and DFS traversals {term('claim 1')}.")
        elif step.accepted:
            what = (f"{form} finished within {lim:g} s and proved its order optimal "
                    f"(peak {_b(step.after)}): the patent outputs that order and nothing else runs {term('claim 1')}.")
        else:
            found = f"its best order so far peaks at {_b(step.after)} but is not proven optimal" if step.after else \
                "it found no order"
            what = (f"{form} ran for the {lim:g} s time limit: {html.escape(_ilp_status(run.status))}; "
                    f"{found} (proven bound {_bound(run.bound)}). The solve did not finish in time, so the patent "
                    f"drops it and goes on to the BFS and DFS traversals {term('claim 1')}.")
        return f"{where}: {what}"
    if ph == "S31":
        ru = d.get("runner_up")
        nxt = (f" The runner-up was {_code(ru['op'])} (must run by step {ru['priority'][0]})." if ru else
               " No other op was ready.")
        return (f"{where}: of the {d.get('frontier')} op(s) ready to run, the BFS runs {_code(step.subject)}: it has the "
                f"highest priority. It can run at step {d.get('asap')} at the earliest (ASAP) and must run by step "
                f"{d.get('alap')} (ALAP); its outputs are expected to stay allocated for "
                f"{_b(d.get('held_byte_steps'))}·steps. The op that must run soonest goes first, then the one whose "
                f"outputs are held least.{nxt} Live memory while it runs: {_b(d.get('live_bytes'))}.")
    if ph == "S32":
        w = d.get("window")
        stack = ", ".join(str(x) for x in d.get("stack", ()))
        if step.action == "push":
            return (f"{where}: the DFS pushes window {w} ({_names(d.get('ops'), 4)}) on its stack: among the "
                    f"unvisited windows it waits for, it has the highest priority, {_b(d.get('priority'))} = the "
                    f"memory its cone needs ({_b(d.get('cum_peak_bytes'))}) minus what it leaves live "
                    f"({_b(d.get('result_bytes'))}); the biggest need goes first. Stack (top last): {stack} "
                    f"(depth {d.get('stack_depth')}).")
        return (f"{where}: window {w} waits for nothing left unvisited, so it leaves the stack and its "
                f"{len(d.get('ops', ()))} op(s) ({_names(d.get('ops'), 4)}) join the order. Stack now (top last): "
                f"{stack or 'empty'}.")
    if ph == "S4-pick":
        if "bfs_peak_bytes" in d:
            b, f = d["bfs_peak_bytes"], d["dfs_peak_bytes"]
            return (f"{where}: BFS peaks at {_b(b)}, DFS at {_b(f)}: the {str(step.subject).upper()} order has the "
                    f"lower peak and goes on to the fine-tune.")
        return f"{where}: {small_terms(html.escape(plain(step.reason)))}; its order ({_b(step.after)}) goes on to the fine-tune."
    if ph == "S4":
        size = _b(d.get("tensor_bytes"))
        moved = _names(d.get("moved"), 5)
        if step.action == "free_earlier":
            tried = (f"free {_code(step.subject)} ({size}) earlier by running its remaining reader(s) and what they "
                     f"need ({moved}) before the peak op")
        else:
            tried = (f"create {_code(step.subject)} ({size}) later by running its producer and what depends on it "
                     f"({moved}) after the peak op")
        pk = (f"peak {_b(step.before)} → {_b(step.after)}")
        if step.accepted and (step.after or 0) < (step.before or 0):
            why = "the peak drops"
        elif step.accepted:
            why = (f"the peak stays but is reached at {d.get('peak_steps_after')} step(s) instead of "
                   f"{d.get('peak_steps_before')} (ours: it lets a later move lower it)")
        else:
            why = "the peak would not drop"
        return (f"{where}: at the peak step {d.get('peak_step')}, try to {tried}. Simulated: {pk} — "
                f"{_verdict(step.accepted)}: {why}.")
    cost = f" ({_b(step.before)} → {_b(step.after)})" if step.before is not None and step.after is not None else ""
    return (f"{where}: {html.escape(step.action)} {_code(step.subject)}{cost} — {_verdict(step.accepted)}: "
            f"{small_terms(html.escape(plain(step.reason)))}")


def _table(head: list[str], rows: list[list[Any]]) -> str:
    th = "".join(f"<th style='text-align:left;padding:2px 10px 2px 0'>{html.escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td style='padding:2px 10px 2px 0'>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table class='hetsched-step-table' style='border-collapse:collapse'><tr>{th}</tr>{body}</table>"


def step_table(step: Step | None) -> str:
    """The numbers of one decision as a small HTML table (names escaped).

    >>> from hetsched.results import Step
    >>> s = Step(0, "pick", "a<b>", data={"phase": "S31", "asap": 0, "alap": 2, "held_byte_steps": 10.0,
    ...          "priority": [2, 10.0, 0], "frontier": 2, "live_bytes": 5,
    ...          "runner_up": {"op": "c", "priority": [3, 4.0, 1]}})
    >>> t = step_table(s); "a&lt;b&gt;" in t and "runner-up" in t
    True
    """
    if step is None:
        return ""
    d = step.data or {}
    ph = d.get("phase")
    if ph == "S31":
        rows = [["runs now", _code(step.subject), d.get("asap"), d.get("alap"), f"{_b(d.get('held_byte_steps'))}·steps"]]
        ru = d.get("runner_up")
        if ru:
            p = ru.get("priority", [None, None, None])
            rows.append(["runner-up", _code(ru.get("op")), p[2], p[0], f"{_b(p[1])}·steps"])
        return _table(["", "op", "earliest step (ASAP)", "latest step (ALAP)", "outputs held (estimate)"], rows) + \
            f"<div style='color:#555'>{d.get('frontier')} op(s) were ready; priority = earliest ALAP first, then " \
            f"fewest byte-steps held, then earliest ASAP.</div>"
    if ph == "S32":
        rows = [[f"window {d.get('window')}", _names(d.get("ops"), 6), _b(d.get("cum_peak_bytes")),
                 _b(d.get("result_bytes")), _b(d.get("priority"))]]
        stack = " ▸ ".join(str(x) for x in d.get("stack", ())) or "empty"
        return _table(["", "ops", "cone needs", "leaves live", "priority"], rows) + (
            f"<div>stack (top last): {html.escape(stack)} · reads {_names(d.get('tensors_in'), 6) or '–'} · "
            f"writes {_names(d.get('tensors_out'), 6) or '–'}</div>")
    if ph == "S4":
        ch = d.get("curve_changed")
        rows = [[_code(step.subject), _b(d.get("tensor_bytes")),
                 "free earlier" if step.action == "free_earlier" else "create later", _names(d.get("moved"), 6),
                 f"{_b(step.before)} → {_b(step.after)}", f"{d.get('peak_steps_before')} → {d.get('peak_steps_after')}",
                 f"{ch[0]}–{ch[1]}" if ch else "none", _verdict(step.accepted)]]
        return _table(["tensor", "size", "move", "ops moved", "peak", "steps at the peak", "steps changed", ""], rows)
    if ph == "S2":
        run = d["ilp"]
        rows = [[html.escape(run.model), html.escape(_ilp_status(run.status)),
                 _b(step.after) if step.after else "–", _bound(run.bound),
                 _solver_gap(run.gap), f"{int(run.n_vars):,}" if run.n_vars else "–",
                 format_value(run.solve_s, "solve_s")]]
        return _table(["formulation", "status", "best order found", "proven bound", "solver gap", "variables",
                       "solve time"], rows)
    if step.before is None and step.after is None:
        return ""
    return _table(["decision", "on", "before", "after", ""],
                  [[html.escape(step.action), _code(step.subject), _b(step.before), _b(step.after),
                    _verdict(step.accepted)]])


# ----------------------------------------------------------------------------- the panel
class MemoryPanel(Panel):
    """Operator ordering for peak memory on the session's graph, one decision at a time.

    Parameters
    ----------
    session : Session, optional
    graph : OpGraph, optional
        Fix the panel to this graph instead of following the session (a session without a graph
        gets the memory scenario's graph, :data:`hetsched.scenarios.SCENARIOS` ``["memory"]``).
    method, time_limit_s, overlay : optional
        Start values of the controls (default: the patent's flow, 2 s, Kahn/BFS/DFS/portfolio).
    """

    TAB = "memory"
    VIEW_TRAITS = ("step", "top")
    MACHINE_BAR = True  # which of the machine's devices can hold the order's peak
    COMPARES_MACHINES = True

    def __init__(self, session: Session | None = None, *, graph=None, method: str | None = None,
                 time_limit_s: float | None = None, overlay: tuple[str, ...] | None = None, **kw: Any) -> None:
        state = MemoryState()
        if method is not None:
            state.method = method
        if time_limit_s is not None:
            state.time_limit_s = time_limit_s
        if overlay is not None:
            state.overlay = tuple(overlay)
        style = {"description_width": "initial"}
        method_ctl = W.Dropdown(options=[(method_name(k), k) for k in _METHOD_KEYS], description="method",
                                style=style, layout=W.Layout(width="420px"))
        limit = W.FloatText(description="ILP time limit (s)", style=style, layout=W.Layout(width="220px"),
                            step=mem.PARAMS["time_limit_s"].step,
                            tooltip=f"how long the integer programme (and the exact search) may run: "
                                    f"{mem.PARAMS['time_limit_s'].bounds_text()}")
        over = W.SelectMultiple(options=[(method_name(k), k) for k in _OVERLAY_KEYS], description="compare with",
                                style=style, rows=4, layout=W.Layout(width="330px"))
        top = W.IntText(description="tensors listed", style=style, layout=W.Layout(width="170px"),
                        tooltip=f"how many of the tensors live at the peak the bars list: {_TOP_MIN} to {_TOP_MAX}")
        for ctl, name in ((method_ctl, "method"), (limit, "time_limit_s"), (over, "overlay"), (top, "top")):
            link_clamped(state, name, ctl)
        self.method_help = W.HTML()
        self.walker = DecisionWalker(state, "step", description="step", label=list_label, phase_labels=PHASES)
        self.step_text = W.HTML(layout=W.Layout(min_height="2.8em"))
        self.step_table = W.HTML()
        self.summary = W.HTML()
        self.ilp_box = W.HTML(layout=W.Layout(flex="0 1 320px", min_width="260px", padding="0 0 0 12px"))
        self.ilp_box.add_class("hetsched-ilp")
        self.controls = W.VBox([W.HBox([W.VBox([method_ctl, W.HBox([limit, top])]), over],
                                      layout=W.Layout(flex_flow="row wrap", align_items="flex-start")),
                                self.method_help])
        self.control_widgets = {"method": method_ctl, "time_limit_s": limit, "overlay": over, "top": top}
        self._fixed_graph = graph
        self._overlay_cache: dict[tuple, mem.OrderResult] = {}
        self._overlay_graph: Any = None
        self._pending: tuple[Any, dict] | None = None
        self._shown_graph: Any = None
        self._overlays: dict[str, mem.OrderResult] = {}
        super().__init__(state, session=session, follow_session=graph is None, autostart=False, **kw)
        # the curve takes the width the ILP card leaves (both wrap under each other on a narrow screen)
        curves = W.Box([self.figure_view("curves")], layout=W.Layout(flex="1 1 600px", min_width="0"))
        self.children = [self.machine_bar, self.controls, self.status, self.summary, self.machine_compare, self.walker,
                         self.step_text, self.step_table,
                         W.HBox([curves, self.ilp_box], layout=W.Layout(flex_flow="row wrap", width="100%")),
                         self.figure_view("live"), self.download_area]
        self._start()

    @property
    def graph(self) -> hs.OpGraph:
        return self._session_graph(lambda: None)

    def _on_session(self, change) -> None:
        # an order does not depend on the machine: another machine redraws which devices hold its peak
        if change["name"] == "system" and self.result is not None and self._shown_graph is self.graph:
            if self.active:
                self.redraw()
            else:
                self._mark_stale()
            return
        super()._on_session(change)

    def fits(self, system, peak_bytes: float) -> tuple[list, list]:
        """``(devices whose memory holds peak_bytes, devices too small)`` of ``system``, as (name, memory) pairs."""
        devs = [(n, d.memory_bytes) for n, d in system.devices.items()]
        return [x for x in devs if x[1] >= peak_bytes], [x for x in devs if x[1] < peak_bytes]

    def machine_metrics(self, system, result=None) -> dict:
        """Where the order's peak fits on ``system`` (the order itself is the same on any machine)."""
        r = result if result is not None else self.result
        ok, small = self.fits(system, r.peak_bytes)
        names = lambda xs: ", ".join(f"{n} ({_b(m)})" for n, m in xs) or "none"  # noqa: E731
        return {"peak of the order (the same on any machine)": (r.peak_bytes, "peak_bytes"),
                "devices whose memory holds it": (names(ok), ""), "devices too small for it": (names(small), "")}

    def _fits_html(self, r: mem.OrderResult) -> str:
        try:
            m = self.machine()
        except HetschedError:
            return ""
        ok, small = self.fits(m, r.peak_bytes)
        names = lambda xs: ", ".join(f"{html.escape(n)} ({_b(b)})" for n, b in xs)  # noqa: E731
        return (f"<div>On <b>{html.escape(m.name)}</b> the peak fits in the memory of {names(ok) or '<b>no device</b>'}"
                + (f"; not in {names(small)}" if small else "") + ".</div>")

    def _dropped_html(self, r: mem.OrderResult) -> str:
        """Why the patent's flow can end above an order its own ILP found (its claim 1), with both numbers."""
        run = r.ilp
        if self.state.method != "patent" or run is None or run.proven or not run.incumbent or run.incumbent >= r.peak_bytes:
            return ""
        more = r.peak_bytes - run.incumbent
        return ("<div style='padding:4px 8px;border-left:4px solid #E69F00;background:#FFF8EC;margin:4px 0'>"
                f"<b>Why the patent's order is not the best one found.</b> Its integer programme found an order peaking at "
                f"<b>{_b(run.incumbent)}</b> but did not prove it optimal within the "
                f"{format_value(self.state.time_limit_s, 'time_limit_s')} time limit. The patent outputs an ILP order "
                "only when the solve finishes in time; otherwise it drops it and runs its BFS and DFS traversals "
                f"and the fine-tuning, which end at <b>{_b(r.peak_bytes)}</b>: {_b(more)} "
                f"({more / run.incumbent:.0%}) above the order it dropped. "
                + term("the patent's claim 1: the ILP result is used when solved within the time limit")
                + " Raise the time limit, or pick the method "
                f"<i>{html.escape(method_name('auto'))}</i>, which keeps the solver's best order.</div>")

    # -- refusing bad values ---------------------------------------------------------
    def _refusal(self, name: str, new: Any) -> HetschedError | None:
        """Why a new value of ``name`` cannot be used (``None``: it can)."""
        if name == "overlay":
            bad = [x for x in new if x not in _OVERLAY_KEYS]
            if bad:
                solver = [x for x in bad if x in mem.SOLVER_METHODS]
                why = (f"{solver[0]!r} runs a solver for the whole time limit on every recompute; choose it as the "
                       f"method instead" if solver else f"{bad[0]!r} is not an order this panel can draw; choose "
                       f"from {', '.join(_OVERLAY_KEYS)}")
                return HetschedError(f"overlay refused: {why}; the previous overlays are kept", field="overlay")
        elif name == "step" and self.result is not None:
            n = self.result.n_steps
            if not 0 <= new <= n:
                return HetschedError(f"step {new} refused: this result has decisions 0..{n}", field="step")
        elif name == "top" and not _TOP_MIN <= new <= _TOP_MAX:
            return HetschedError(f"tensors listed = {new} refused: list {_TOP_MIN} to {_TOP_MAX}", field="top")
        return None

    def check_inputs(self) -> None:
        # a refused value is taken back (Panel.check_inputs): a bad overlay must not stick and break
        # every later recompute
        st = self.state
        self.check_params(mem.PARAMS, {"method": st.method, "time_limit_s": st.time_limit_s})
        for name in ("overlay", "step", "top"):
            err = self._refusal(name, getattr(self.state, name))
            if err is not None:
                raise err

    # -- Panel -------------------------------------------------------------------
    def compute(self) -> mem.OrderResult:
        st = self.state
        g = self.graph
        r = mem.optimize_order(g, method=st.method, time_limit_s=st.time_limit_s)
        self._pending = (g, self._overlay_results(g))
        return r

    def _overlay_results(self, g: hs.OpGraph) -> dict[str, mem.OrderResult]:
        """The overlay orders' results, cached per graph (and time limit, for the portfolio's budget)."""
        if self._overlay_graph is not g:
            self._overlay_cache, self._overlay_graph = {}, g
        out = {}
        for m in self.state.overlay:
            key = (m, self.state.time_limit_s if m in ("heuristic", "patent-heuristic") else None)
            if key not in self._overlay_cache:
                self._overlay_cache[key] = mem.optimize_order(g, method=m, time_limit_s=self.state.time_limit_s)
            out[m] = self._overlay_cache[key]
        return out

    def on_result(self, r: mem.OrderResult) -> None:
        if self._pending is not None:
            self._shown_graph, self._overlays = self._pending
            self._pending = None
        self.method_help.value = f"<i>{small_terms(html.escape(plain(describe(mem.METHODS[self.state.method]))))}</i>"
        self.walker.set_steps(r.steps)
        # view traits set here do not redraw on their own (Panel.on_result)
        self.state.step = r.n_steps

    def walk(self, k: int | None = None) -> dict[str, Any]:
        """What is drawn after ``k`` decisions (default: the walker's step): :func:`hetsched.memory.walk_state`."""
        k = self.state.step if k is None else k
        return mem.walk_state(self._shown_graph, self.result, k - 1)

    def order_at(self, k: int | None = None) -> tuple[str, ...]:
        """The order after ``k`` decisions (a traversal's prefix while it is being built)."""
        return tuple(self.walk(k)["order"])

    def _current_label(self, r: mem.OrderResult, w: Mapping[str, Any], k: int) -> str:
        if k >= r.n_steps:
            return method_name(self.state.method)
        s = w["step"]
        ph = (s.data or {}).get("phase") if s is not None else None
        if s is None or (ph == "S2" and not s.accepted):
            return "given order"
        return {"S2": "ILP order", "S31": "BFS order", "S32": "DFS order",
                "S4-pick": f"{str(s.subject).upper()} order (picked)", "S4": "order being fine-tuned",
                "portfolio": "best candidate", "polish": "polished order", "stop": "order at the lower bound"}.get(ph, "order")

    def _curves_fig(self, r: mem.OrderResult, w: Mapping[str, Any], k: int):
        overlays = {method_name(m): res for m, res in self._overlays.items()}
        return walk_curves(w, overlays=overlays, lower_bound=r.lower_bound_bytes, label=self._current_label(r, w, k),
                           colors=_OVERLAY_COLORS, title="live memory at each step of the order")

    def _live_fig(self, w: Mapping[str, Any]):
        s = w["step"]
        hl = [s.subject] if s is not None and (s.data or {}).get("phase") == "S4" else []
        live = w["live"]
        what = "so far " if w["partial"] else ""
        title = (f"tensors live at the peak {what}(step {w['peak_step']}: {len(live)} tensors, "
                 f"{_b(int(live['bytes'].sum()) if len(live) else 0)})")
        return live_bars(live, top=self.state.top, highlight=hl, title=title)

    def _summary_html(self, r: mem.OrderResult) -> str:
        g = self._shown_graph
        gap = (f"gap <b>{r.gap:.1%}</b>" if r.gap > 0 else "gap <b>0%</b>: no order can be lower (optimal)")
        return (
            f"<div><b>{html.escape(g.name or 'graph')}</b> ({g.n_ops} ops) · <b>{html.escape(method_name(self.state.method))}</b>: "
            f"peak <b>{_b(r.peak_bytes)}</b> · lower bound {_b(r.lower_bound_bytes)} · {gap} · "
            f"{format_value(r.runtime_s, 'runtime_s')}</div>"
            f"<div style='color:#555;font-size:0.92em'>How: {small_terms(html.escape(plain(r.why)))}</div>")

    def _ilp_html(self, r: mem.OrderResult) -> str:
        run = r.ilp  # what the solver said: one typed field, whichever method ran it
        rows = []
        if run is None:
            rows.append("<b>ILP</b>: this method runs none (pick the patent's flow or one of the ILPs).")
        else:
            form = "as the patent writes it" if run.model == "patent" else "cumulative formulation"
            warm = ("the fallback's order" if self.state.method == "auto" else
                    "our portfolio's order" if run.warm_start else "")
            rows.append(f"<b>Integer programme</b> ({html.escape(form)}" + (f", started from {warm}" if warm else "") + ")"
                        + (f" {term('the patent: A/P variables')}" if run.model == "patent" else ""))
            rows.append(f"status: <b>{html.escape(_ilp_status(run.status))}</b>")
            if r.status == "fallback":
                rows.append("<i>no better order from the solver: the starting order is kept</i>")
            if run.status != "skipped":
                rows.append(f"best order it found: {_b(run.incumbent) if run.incumbent else 'none'}")
                rows.append(f"bound it proved: {_bound(run.bound)}")
                if run.gap is not None:
                    rows.append(f"solver gap: {_solver_gap(run.gap)} <span style='color:#555'>(best found − bound) "
                                f"÷ best found</span>")
                size = ", ".join(x for x in (f"{int(run.n_vars):,} variables" if run.n_vars else "",
                                             f"{int(run.n_constraints):,} constraints" if run.n_constraints else "") if x)
                if size:
                    rows.append(size)
                if run.solve_s is not None:
                    rows.append(f"solve time: {format_value(run.solve_s, 'solve_s')} of "
                                f"{format_value(self.state.time_limit_s, 'time_limit_s')}")
                if self.state.method == "patent" and not run.proven and run.incumbent:
                    rows.append("<i>not proven in time, so the patent's flow drops this order and falls back to "
                                "BFS/DFS</i>")
        rows.append("<hr style='margin:4px 0'><b>This order</b>")
        rows.append(f"peak: <b>{_b(r.peak_bytes)}</b>")
        rows.append(f"lower bound: {_b(r.lower_bound_bytes)}")
        rows.append(f"gap: <b>{r.gap:.1%}</b>" + (" (proven optimal)" if r.gap <= 0 or r.status == "optimal" else ""))
        rows.append("<span style='color:#555;font-size:0.92em'>gap = (peak − best bound) ÷ best bound; the best "
                    "bound is the larger of the lower bound (no order of this graph can go below it) and a bound a "
                    "solver proved</span>")
        return "<div style='line-height:1.5'>" + "<br>".join(rows) + "</div>"

    def _step_html(self, r: mem.OrderResult, k: int) -> tuple[str, str]:
        if r.n_steps == 0:
            return ("this method makes its order in one go: there are no decisions to step through", "")
        if k == 0:
            return (f"<b>before the first decision</b> ({r.n_steps} follow): the graph's given order is drawn. "
                    f"Use ▶, the jump buttons or the list.", "")
        s = r.steps[k - 1]
        return describe_step(s, n_steps=r.n_steps), step_table(s)

    def render(self, r: mem.OrderResult) -> None:
        k = self.state.step
        w = self.walk(k)
        self.show_figure("curves", self._curves_fig(r, w, k))
        self.show_figure("live", self._live_fig(w))
        self.summary.value = self._summary_html(r) + self._fits_html(r) + self._dropped_html(r)
        self.ilp_box.value = self._ilp_html(r)
        self.step_text.value, self.step_table.value = self._step_html(r, k)

    def download_items(self, r: mem.OrderResult):
        g = self._shown_graph
        _step, live = mem.live_at_peak(g, r.order)
        # names come from user files: formula-safe cells (issue 20)
        return [(csv_safe(pd.DataFrame({"step": range(len(r.order)), "op": list(r.order)})), "memory_order.csv"),
                (csv_safe(r.curve), "memory_curve.csv"), (csv_safe(live), "memory_live_at_peak.csv"),
                (csv_safe(r.steps_frame()), "memory_moves.csv"),
                (hs.timeline.to_chrome_trace(r.timeline), "memory_trace.json")]
