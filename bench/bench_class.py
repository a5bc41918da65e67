"""Class benchmark: N students on one ``hetsched app`` server at once (issue 32).

Starts ``hetsched app`` (the classroom Voila: a pool of warm kernels, a bounded class) on a copy of the
dashboard notebook, waits until its pool is warm, then lets N students in at the same moment. Each
student, as a lightweight client that speaks Jupyter's kernel websocket and the widget protocol
exactly as the page's JavaScript does (it is checked against a real browser on N = 1, below):

1. opens the dashboard: GET the page, connect to its kernel, fetch every widget's state
   (``request_states``), send the page's address (``PageAddress``) and fetch plotly.js as the first
   figure's view does (from ``hetsched app``'s cacheable URL, a first visit: the whole file):
   **time to first plot** is from the GET to the moment the first tab's figure and plotly.js are
   both in the client (the browser then compiles plotly.js and draws: ``--browser`` measures that);
2. picks a scenario in the picker (students take the scenarios of the tabs with a decision walker in
   turn, so a class spreads over them);
3. steps that tab's decision walker 20 times (one click, then a think time, ...): **click latency**
   is from the click's message to the kernel's "done" (the figures' updates have all arrived);
4. switches to two other tabs (each computes when first shown): **tab switch** latency;
5. stays connected until every student is done, while the kernels' memory (RSS, PSS, USS) is read.

Then one student reloads (a new page: a warm kernel from the pool when it has refilled). Errors:
HTTP answers other than 200, kernel error replies, a panel's error line, a page whose first tab has
no figure. The machine's load (``/proc/loadavg``) is sampled throughout: the seconds mean something
only on a quiet machine; other work on the machine shows up as load.

Run (the quiet verdict run; ~6 minutes on this 2-core machine, most of it warming 30 kernels)::

    .venv/bin/python bench/bench_class.py                  # N = 1, 10, 30; writes bench/results/class.md
    .venv/bin/python bench/bench_class.py --students 1,3   # quick, while developing
    .venv/bin/python bench/bench_class.py --browser        # also N = 1 in Chromium, the client's check

Targets (issue 32, this 2-core machine, quiet): 30 at once: every first plot within 15 s, median
within 5 s; a student arriving to a warm pool: first plot within 2 s; with 30 connected, step click
median < 400 ms, p95 < 1 s; no errors; memory per kernel within what ``hetsched app --help`` states
(:data:`hetsched.launch.KERNEL_MB`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "e2e"))

import benchlib  # noqa: E402
from e2e_helpers import start_app  # noqa: E402

from hetsched.launch import KERNEL_MB  # noqa: E402
from hetsched.scenarios import SCENARIOS  # noqa: E402

TARGETS = dict(first_max_s=15.0, first_median_s=5.0, warm_first_s=2.0, click_median_s=0.400, click_p95_s=1.0)
TABS = ["graph", "backends", "mapping", "pipeline", "memory", "executor"]


# ------------------------------------------------------------------------------------ the protocol
def _pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


#: the kernel websocket protocol the page's JavaScript speaks (@jupyterlab/services): messages pass through
#: the server as raw ZMQ parts, without being decoded and re-encoded there
WS_PROTOCOL = "v1.kernel.websocket.jupyter.org"


def _decode(frame: bytes) -> dict:
    """A kernel message from a websocket frame of the v1 protocol (channel, header, parent header,
    metadata, content, buffers)."""
    from jupyter_server.services.kernels.connection.base import deserialize_msg_from_ws_v1

    channel, parts = deserialize_msg_from_ws_v1(frame)
    header, parent, metadata, content = (json.loads(p) for p in parts[:4])
    return {"channel": channel, "header": header, "msg_type": header.get("msg_type"), "parent_header": parent,
            "metadata": metadata, "content": content, "buffers": parts[4:]}


def _encode(msg: dict) -> bytes:
    from jupyter_server.services.kernels.connection.base import serialize_msg_to_ws_v1

    parts = [json.dumps(msg[k]).encode() for k in ("header", "parent_header", "metadata", "content")]
    return serialize_msg_to_ws_v1(parts, msg["channel"])


@dataclass
class Student:
    """One student's page: a kernel websocket, the widgets' states, and what was measured."""

    index: int
    base_url: str
    scenario: str
    think_s: tuple[float, float]
    session: str = field(default_factory=lambda: uuid.uuid4().hex)
    models: dict[str, dict] = field(default_factory=dict)
    waiting: dict[str, asyncio.Future] = field(default_factory=dict)
    idle: dict[str, asyncio.Future] = field(default_factory=dict)
    custom: list[tuple[str, dict]] = field(default_factory=list)
    custom_waiters: list[tuple[str, str, asyncio.Future]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    first_plot_s: float | None = None
    html_s: float | None = None
    clicks_s: list[float] = field(default_factory=list)
    pick_s: float | None = None
    tabs_s: list[float] = field(default_factory=list)
    bytes_in: int = 0
    kernel_id: str | None = None
    ws: Any = None

    # -- messages ---------------------------------------------------------------------------
    def _msg(self, msg_type: str, content: dict, channel: str = "shell", metadata: dict | None = None) -> dict:
        return {"header": {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "username": "student",
                           "session": self.session, "date": "", "version": "5.3"},
                "parent_header": {}, "metadata": metadata or {}, "content": content, "channel": channel,
                "buffers": []}

    async def send(self, msg_type: str, content: dict, **kw: Any) -> str:
        m = self._msg(msg_type, content, **kw)
        loop = asyncio.get_running_loop()
        self.idle[m["header"]["msg_id"]] = loop.create_future()
        if msg_type.endswith("_request"):
            self.waiting[m["header"]["msg_id"]] = loop.create_future()
        await self.ws.write_message(_encode(m), binary=True)
        return m["header"]["msg_id"]

    async def comm(self, comm_id: str, data: dict) -> str:
        return await self.send("comm_msg", {"comm_id": comm_id, "data": data}, metadata={"version": "2.1.0"})

    async def until_idle(self, msg_id: str, timeout_s: float = 120.0) -> None:
        await asyncio.wait_for(self.idle[msg_id], timeout_s)
        del self.idle[msg_id]

    async def reader(self) -> None:
        while True:
            frame = await self.ws.read_message()
            if frame is None:
                return
            self.bytes_in += len(frame)
            try:
                self.on_message(_decode(frame))
            except Exception as e:  # noqa: BLE001 - recorded; the reader goes on
                self.errors.append(f"client: a message it could not read: {type(e).__name__}: {e}")

    def on_message(self, msg: dict) -> None:
        kind = msg.get("msg_type") or msg["header"]["msg_type"]
        parent = (msg.get("parent_header") or {}).get("msg_id")
        content = msg.get("content") or {}
        if kind == "status" and content.get("execution_state") == "idle" and parent in self.idle:
            if not self.idle[parent].done():
                self.idle[parent].set_result(True)
        if parent in self.waiting and kind.endswith("_reply") and not self.waiting[parent].done():
            self.waiting[parent].set_result(msg)
        if kind == "error":
            self.errors.append(f"kernel error: {content.get('ename')}: {content.get('evalue')}")
        if kind == "comm_open" and content.get("target_name") == "jupyter.widget":
            self.models[content["comm_id"]] = dict((content.get("data") or {}).get("state") or {})
        if kind == "comm_msg":
            cid, data = content.get("comm_id"), content.get("data") or {}
            method = data.get("method")
            if method in ("update", "echo_update") and cid in self.models:
                self.models[cid].update(data.get("state") or {})
            elif method == "update_states":
                for k, st in (data.get("states") or {}).items():
                    self.models.setdefault(k, {}).update(st.get("state") or {})
            elif method == "custom":
                body = data.get("content") or {}
                for w in list(self.custom_waiters):
                    if w[0] == cid and body.get("type") == w[1] and not w[2].done():
                        w[2].set_result(body)
                        self.custom_waiters.remove(w)

    def wait_custom(self, comm_id: str, kind: str) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.custom_waiters.append((comm_id, kind, fut))
        return fut

    # -- the widget tree --------------------------------------------------------------------
    def find(self, test, root: str | None = None) -> list[str]:
        """Model ids under ``root`` (all models when ``None``), depth first, that pass ``test(state)``."""
        if root is None:
            return [k for k, st in self.models.items() if test(st)]
        out, stack, seen = [], [root], set()
        while stack:
            k = stack.pop(0)
            if k in seen or k not in self.models:
                continue
            seen.add(k)
            st = self.models[k]
            if test(st):
                out.append(k)
            kids = [c[len("IPY_MODEL_"):] for c in st.get("children") or () if isinstance(c, str)]
            stack[0:0] = kids
        return out

    def tab_model(self) -> str:
        tabs = self.find(lambda s: s.get("_model_name") == "TabModel")
        if not tabs:
            raise RuntimeError("no dashboard tabs in the page")
        return tabs[0]

    def visible_panel(self) -> str:
        tab = self.models[self.tab_model()]
        return tab["children"][tab.get("selected_index") or 0][len("IPY_MODEL_"):]

    def figures(self, root: str) -> list[str]:
        return self.find(lambda s: "spec" in s and "edits" in s, root)

    def panel_errors(self) -> list[str]:
        out = []
        for k in self.find(lambda s: "hetsched-error" in str(s.get("value", ""))):
            out.append(re.sub(r"<[^>]+>", "", self.models[k]["value"])[:200])
        return out

    # -- what a student does ------------------------------------------------------------------
    async def think(self) -> None:
        await asyncio.sleep(random.uniform(*self.think_s))

    async def open_page(self, path: str = "/") -> None:
        from tornado.httpclient import AsyncHTTPClient, HTTPClientError
        from tornado.websocket import websocket_connect

        t0 = time.monotonic()
        try:
            resp = await AsyncHTTPClient().fetch(self.base_url + path, request_timeout=300)
        except HTTPClientError as e:
            self.errors.append(f"page: HTTP {e.code}" + (" (the class is full)" if e.code == 503 else ""))
            return
        html = resp.body.decode()
        self.html_s = time.monotonic() - t0
        m = re.search(r'"kernelId":\s*"([0-9a-f-]+)"', html)
        if not m:
            self.errors.append("page: no kernel id in the page")
            return
        self.kernel_id = m.group(1)
        ws_url = self.base_url.replace("http", "ws", 1) + f"/api/kernels/{self.kernel_id}/channels?session_id={self.session}"
        self.ws = await websocket_connect(ws_url, max_message_size=64 * 2**20, subprotocols=[WS_PROTOCOL])
        asyncio.ensure_future(self.reader())
        info = await self.send("kernel_info_request", {})
        await asyncio.wait_for(self.waiting[info], 120)
        # the widget manager's first question: every widget's state at once, over the control comm
        control = uuid.uuid4().hex
        await self.send("comm_open", {"comm_id": control, "target_name": "jupyter.widget.control", "data": {}},
                        metadata={"version": "1.0.0"})
        req = await self.comm(control, {"method": "request_states"})
        await self.until_idle(req)
        if not self.models:
            self.errors.append("page: no widget states")
            return
        # what the page's views send when drawn: the address (PageAddress) and the first figure's plotly.js
        addr = self.find(lambda s: "query" in s and "link" in s)
        if addr:
            await self.comm(addr[0], {"method": "update", "state": {"query": "?"}, "buffer_paths": []})
        figs = self.figures(self.visible_panel())
        if not figs:
            self.errors.append("page: the first tab has no figure (an empty page)")
            return
        url = self.models[figs[0]].get("plotly_url")
        if url:  # hetsched app serves it as a cacheable script: a first visit downloads it
            js = await AsyncHTTPClient().fetch(self.base_url + url, request_timeout=120, decompress_response=False,
                                               headers={"Accept-Encoding": "gzip"})
            self.bytes_in += len(js.body)
        else:
            plotly = self.wait_custom(figs[0], "plotly-js")
            await self.comm(figs[0], {"method": "custom", "content": {"type": "need-plotly", "gzip": True}})
            await asyncio.wait_for(plotly, 120)
        deadline = time.monotonic() + 60
        while not self.models[figs[0]].get("spec") and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if not self.models[figs[0]].get("spec"):
            self.errors.append("page: the first tab's figure stayed empty")
            return
        self.first_plot_s = time.monotonic() - t0

    async def pick_scenario(self) -> None:
        dd = self.find(lambda s: s.get("_model_name") == "DropdownModel" and s.get("description") == "scenario")
        if not dd:
            self.errors.append("no scenario picker")
            return
        labels = self.models[dd[0]].get("_options_labels") or []
        title = SCENARIOS[self.scenario].title
        idx = next((i for i, lab in enumerate(labels) if lab.replace("\xa0", " ").startswith(title)), None)
        if idx is None:
            self.errors.append(f"scenario {self.scenario} is not in the picker")
            return
        t0 = time.monotonic()
        mid = await self.comm(dd[0], {"method": "update", "state": {"index": idx}, "buffer_paths": []})
        await self.until_idle(mid)
        self.pick_s = time.monotonic() - t0

    async def step(self, n: int) -> None:
        panel = self.visible_panel()
        sliders = self.find(lambda s: s.get("_model_name") == "IntSliderModel", panel)
        buttons = {self.models[k].get("description"): k
                   for k in self.find(lambda s: s.get("description") in ("◀ prev", "next ▶") and "width" in s, panel)}
        if not sliders or len(buttons) < 2:
            self.errors.append(f"tab {self.visible_panel()}: no decision walker to step")
            return
        sl = self.models[sliders[0]]
        # towards the far end, so that every click moves
        direction = "◀ prev" if (sl.get("value") or 0) * 2 >= (sl.get("max") or 0) else "next ▶"
        for _ in range(n):
            await self.think()
            b = buttons[direction]
            done = self.wait_custom(b, "done")
            t0 = time.monotonic()
            await self.comm(b, {"method": "custom", "content": {"type": "move", "n": 1}})
            await asyncio.wait_for(done, 120)
            self.clicks_s.append(time.monotonic() - t0)

    async def switch_tabs(self, k: int) -> None:
        tab = self.tab_model()
        current = self.models[tab].get("selected_index") or 0
        for j in range(1, k + 1):
            await self.think()
            t0 = time.monotonic()
            mid = await self.comm(tab, {"method": "update", "state": {"selected_index": (current + j) % len(TABS)},
                                        "buffer_paths": []})
            await self.until_idle(mid)
            self.tabs_s.append(time.monotonic() - t0)

    async def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
            self.ws = None


# ------------------------------------------------------------------------------------- a class
class LoadSampler(threading.Thread):
    """Samples the 1-minute load average every second while a run lasts."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            self.samples.append(os.getloadavg()[0])
            self.stop_flag.wait(1.0)


def kernel_memory(server) -> list[dict[str, float]]:
    import psutil

    out = []
    for pid in server.kernel_pids():
        try:
            m = psutil.Process(pid).memory_full_info()
            out.append({"pid": pid, "rss": m.rss / 1e6, "pss": getattr(m, "pss", m.rss) / 1e6, "uss": m.uss / 1e6})
        except psutil.Error:
            pass
    return out


async def run_class(server, n: int, args) -> dict[str, Any]:
    # the scenarios of tabs with a decision walker to step (the Graph tab has none)
    keys = [k for k, sc in SCENARIOS.items() if sc.tab != "graph"] if args.scenario == "all" else [args.scenario]
    students = [Student(i, server.base_url, keys[i % len(keys)], (args.think_min_s, args.think_max_s)) for i in range(n)]
    done = asyncio.Event()
    finished = 0
    mem: list[dict[str, float]] = []

    async def one(s: Student) -> None:
        nonlocal finished
        try:
            await s.open_page()
            if s.first_plot_s is not None:
                await s.think()
                await s.pick_scenario()
                await s.step(args.clicks)
                await s.switch_tabs(args.tab_switches)
                s.errors.extend(s.panel_errors())
        except Exception as e:  # noqa: BLE001 - a student's failure is a finding, not a crash
            s.errors.append(f"{type(e).__name__}: {e}")
        finally:
            finished += 1
            if finished == n:
                done.set()
            await done.wait()  # everyone stays connected until the class is done

    async def watch_memory() -> None:
        await done.wait()
        mem.extend(kernel_memory(server))

    from tornado.httpclient import AsyncHTTPClient

    AsyncHTTPClient.configure(None, max_clients=max(10, 2 * n))  # a class's pages at once, not 10 at a time
    t0 = time.monotonic()
    await asyncio.gather(watch_memory(), *(one(s) for s in students))
    status = server.status()
    wall = time.monotonic() - t0
    # a reload: one student leaves and comes back, a page from the pool if it has refilled
    reload = Student(n, server.base_url, keys[0], (args.think_min_s, args.think_max_s))
    await students[0].close()
    await asyncio.sleep(args.reload_after_s)
    pool_before = server.status()["pool_ready"]
    await reload.open_page()
    for s in students[1:]:
        await s.close()
    await reload.close()
    return {"students": students, "memory": mem, "status": status, "wall_s": wall, "reload": reload,
            "reload_pool": pool_before}


def _pool_quiet(server, timeout_s: float = 180.0) -> None:
    """Wait until the pool is full and nothing warms (what a student arriving to a warm pool finds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = server.status()
        if st["pool_ready"] >= st["pool_size"] and not st["pool_warming"] and not st["admitting"]:
            time.sleep(2.0)  # the last warm-up's tail (its kernel going idle, the server's bookkeeping)
            return
        time.sleep(0.5)
    raise RuntimeError(f"the pool did not fill within {timeout_s:.0f} s: {server.status()}")


BROWSER_RUNS = 3


def browser_check(server, args) -> dict[str, Any]:
    """N = 1 in Chromium: a student arriving to a warm pool (time to first plot, ``BROWSER_RUNS``
    fresh browsers, each once the pool is full again) and step clicks as a user sees them (the plot drawn)."""
    from e2e_helpers import CHROMIUM, CHROMIUM_ARGS, WsCounter, settle
    from playwright.sync_api import sync_playwright

    firsts = []
    with sync_playwright() as pw:
        # BROWSER_RUNS pages timed to their first plot, then one more for the clicks. Only that one counts
        # websocket bytes: Playwright's frame events copy every frame (the page's first is ~1.2 MB) out of
        # the browser, CPU a student's browser does not spend, taken from the page on this 2-core machine
        for run in range(BROWSER_RUNS + 1):
            _pool_quiet(server)
            ctx = pw.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="hetsched-class-prof-"),
                                                        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS,
                                                        viewport={"width": 1280, "height": 720})
            ctx.set_default_timeout(180_000)
            page = ctx.new_page()
            ws = WsCounter(page) if run == BROWSER_RUNS else None
            t0 = time.monotonic()
            page.goto(server.base_url + "/", wait_until="commit")
            page.wait_for_function("() => (window.__hetschedDraws || 0) >= 1", timeout=180_000)
            if run < BROWSER_RUNS:
                firsts.append(time.monotonic() - t0)
                ctx.close()
        key = args.scenario if args.scenario != "all" else next(k for k, sc in SCENARIOS.items() if sc.tab != "graph")
        picker = page.locator(".widget-dropdown", has_text="scenario").locator("select").first
        label = next(o for o in picker.locator("option").all_inner_texts()
                     if o.replace("\xa0", " ").startswith(SCENARIOS[key].title))
        picker.select_option(label=label)
        page.wait_for_timeout(3000)
        panel = page.locator(".hetsched-panel:visible").first
        value = panel.locator(".widget-slider .widget-readout").first.inner_text()
        direction = "◀ prev"
        try:
            if int(value) == 0:
                direction = "next ▶"
        except ValueError:
            pass
        clicks = []
        for _ in range(args.clicks):
            page.wait_for_timeout(int(1000 * random.uniform(args.think_min_s, args.think_max_s)))
            ws.mark()
            t = page.evaluate("() => performance.now()")
            panel.get_by_role("button", name=direction, exact=True).first.click()
            clicks.append(settle(page, ws, t, need_draw=False))
        ctx.close()
    return {"first_plot_s": statistics.median(firsts), "firsts_s": firsts, "clicks_s": clicks}


def fmt(x: float | None) -> str:
    return "—" if x is None or x != x else benchlib.fmt_s(x)


def summarise(n: int, r: dict[str, Any], warm_s: float, pool: int, load: list[float]) -> tuple[list[str], dict, bool]:
    st: list[Student] = r["students"]
    first = [s.first_plot_s for s in st if s.first_plot_s is not None]
    clicks = [c for s in st for c in s.clicks_s]
    tabs = [c for s in st for c in s.tabs_s]
    picks = [s.pick_s for s in st if s.pick_s is not None]
    errors = [f"student {s.index}: {e}" for s in st for e in s.errors] + [f"reload: {e}" for e in r["reload"].errors]
    empty = sum(1 for s in st if s.first_plot_s is None)
    mem = r["memory"]
    pss = [m["pss"] for m in mem]
    rss = [m["rss"] for m in mem]
    uss = [m["uss"] for m in mem]
    ok_first = bool(first) and len(first) == n and max(first) <= TARGETS["first_max_s"] and \
        statistics.median(first) <= TARGETS["first_median_s"]
    ok_clicks = bool(clicks) and statistics.median(clicks) < TARGETS["click_median_s"] and \
        _pct(clicks, 0.95) < TARGETS["click_p95_s"]
    ok_mem = bool(pss) and max(pss) <= KERNEL_MB
    ok = ok_first and ok_clicks and not errors and not empty and ok_mem
    row = [str(n), str(pool), f"{len(first)}/{n}", fmt(statistics.median(first) if first else None),
           fmt(max(first) if first else None), fmt(statistics.median(picks) if picks else None),
           f"{fmt(statistics.median(clicks) if clicks else None)} / {fmt(_pct(clicks, 0.95))} / "
           f"{fmt(max(clicks) if clicks else None)} ({len(clicks)})",
           f"{fmt(statistics.median(tabs) if tabs else None)} / {fmt(max(tabs) if tabs else None)}",
           f"{statistics.median(rss):.0f} / {statistics.median(pss):.0f} / {max(pss):.0f} / {statistics.median(uss):.0f}"
           if mem else "—",
           f"{sum(pss) / 1000:.2f} GB ({len(mem)} kernels)" if mem else "—",
           fmt(r["reload"].first_plot_s) + f" (pool {r['reload_pool']})",
           str(len(errors) + empty), f"{max(load):.2f}" if load else "—", benchlib.verdict(ok)]
    details = {"n": n, "first_plot_s": first, "clicks_s": clicks, "tabs_s": tabs, "picks_s": picks, "errors": errors,
               "memory": mem, "status": r["status"], "wall_s": r["wall_s"], "warm_s": warm_s}
    return row, details, ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--students", default="1,10,30", help="class sizes, one server each (default 1,10,30)")
    ap.add_argument("--pool", type=int, default=None, help="warm kernels (default: the class size)")
    ap.add_argument("--clicks", type=int, default=20, help="walker steps per student (default 20)")
    ap.add_argument("--tab-switches", type=int, default=2, help="tabs each student opens after stepping (default 2)")
    ap.add_argument("--scenario", default="all", help="the scenario every student picks (default: all, in turn)")
    ap.add_argument("--think-min-s", type=float, default=0.5, help="a student's pause between actions, from...")
    ap.add_argument("--think-max-s", type=float, default=1.5, help="... to (uniform; default 0.5 to 1.5 s)")
    ap.add_argument("--reload-after-s", type=float, default=10.0, help="when the reload happens after the class")
    ap.add_argument("--browser", action="store_true", help="also N = 1 in Chromium (checks the client)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not write bench/results/class.md")
    args = ap.parse_args(argv)
    random.seed(0)
    sizes = [int(x) for x in args.students.split(",") if x.strip()]
    machine = benchlib.machine_line()
    load0 = open("/proc/loadavg").read().split()[:3]
    rows, notes, all_ok, details = [], [], True, []
    for n in sizes:
        pool = n if args.pool is None else args.pool
        work = Path(tempfile.mkdtemp(prefix=f"hetsched-class-{n}-"))
        t = time.monotonic()
        server = start_app(work, pool=pool, max_students=n + 5, wait_pool_s=60 + 30 * pool)
        warm_s = time.monotonic() - t
        sampler = LoadSampler()
        try:
            load_at = open("/proc/loadavg").read().split()[:3]
            sampler.start()
            r = asyncio.run(run_class(server, n, args))
            sampler.stop_flag.set()
            row, det, ok = summarise(n, r, warm_s, pool, sampler.samples)
            det["load_at_start"] = load_at
            rows.append(row)
            details.append(det)
            all_ok &= ok
            print(row, flush=True)
            if det["errors"]:
                print("errors:", *det["errors"][:10], sep="\n  ", flush=True)
            notes.append(f"N = {n}: pool of {pool} warmed in {warm_s:.0f} s (a kernel's warm-up: median "
                         f"{fmt(det['status'].get('warm_s_median'))}); the class took {det['wall_s']:.0f} s; load at "
                         f"start {' '.join(load_at)}, 1-min load during {min(sampler.samples):.2f}-"
                         f"{max(sampler.samples):.2f}; after the class: {det['status']}")
            if args.browser and n == 1:
                b = browser_check(server, args)
                c = b["clicks_s"]
                ok_warm = b["first_plot_s"] <= TARGETS["warm_first_s"]
                all_ok &= ok_warm
                notes.append(f"Browser check, N = 1 (Chromium, same server, after the client): a student arriving to a warm "
                             f"pool (the pool full, nothing warming; {BROWSER_RUNS} fresh browsers, no websocket listener) sees the first plot drawn "
                             f"after {fmt(b['first_plot_s'])} (median; {', '.join(fmt(x) for x in b['firsts_s'])}; target "
                             f"{TARGETS['warm_first_s']:.0f} s: {benchlib.verdict(ok_warm)}; the client: "
                             f"{fmt(det['first_plot_s'][0] if det['first_plot_s'] else None)}); "
                             f"step clicks to the plot drawn: median {fmt(statistics.median(c))}, p95 {fmt(_pct(c, 0.95))} "
                             f"(the client, to the kernel's answer: median {fmt(statistics.median(det['clicks_s']) if det['clicks_s'] else None)}). "
                             "The browser adds plotly.js's evaluation and the drawing.")
        finally:
            sampler.stop_flag.set()
            server.stop()
    load1 = open("/proc/loadavg").read().split()[:3]
    body = "\n".join([
        "## class",
        "",
        "N students open the dashboard at once on one `hetsched app` server (a pool of N warm kernels), pick a",
        "scenario (in turn), step its decision walker 20 times with a 0.5-1.5 s pause between clicks, then open two",
        "other tabs, all connected until the last is done. Students are websocket clients that speak the widget",
        "protocol as the page does (`bench/bench_class.py`; `--browser` checks one against Chromium). First plot:",
        "from the page request to the first tab's figure and plotly.js in the client. Click: a step click to the",
        "kernel's answer (every figure update arrived). Memory per kernel (MB): RSS median / PSS median / PSS max / USS",
        "median, read while all N are connected; total PSS over every kernel (students and pool).",
        "",
        f"Command: `{benchlib.command_line()}`",
        "",
        f"Machine: {machine}; load average {' '.join(load0)} before, {' '.join(load1)} after.",
        "",
        f"Targets: first plot max {TARGETS['first_max_s']:.0f} s and median {TARGETS['first_median_s']:.0f} s; "
        f"a warm pool: {TARGETS['warm_first_s']:.0f} s; step click median < {TARGETS['click_median_s'] * 1e3:.0f} ms "
        f"and p95 < {TARGETS['click_p95_s']:.0f} s; no errors; PSS per kernel within {KERNEL_MB} MB "
        "(`hetsched.launch.KERNEL_MB`, what `hetsched app --help` states).",
        "",
        benchlib.table(["students", "pool", "pages up", "first plot median", "first plot max", "pick a scenario (median)",
                        "step click median / p95 / max (n)", "tab switch median / max", "kernel MB (RSS / PSS / PSS max / USS)",
                        "total PSS", "reload: first plot", "errors", "max load", "verdict"], rows),
        "",
        *[f"- {x}" for x in notes],
        "",
    ])
    errors = [e for d in details for e in d["errors"]]
    if errors:
        body += "\nErrors:\n\n" + "\n".join(f"- {e}" for e in errors[:20]) + "\n"
    if not args.no_write:
        benchlib.write_fragment("class", body)
    print(body)
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
