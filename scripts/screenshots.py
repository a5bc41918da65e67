"""Screenshots of the explorer for docs/screenshots/: every dashboard tab at 1600x1000, every
scenario at 1280x720 (a projector's size), every tab in both page layouts as a 1280x720 screen
shows it (the full layout, and the presentation layout: ``?layout=present``), and the what-if of
issue 33 (the Mapping tab on another machine, beside the previous one; the machine editor open),
taken in Chromium against ``hetsched app`` as a user sees them.

    .venv/bin/python scripts/screenshots.py                  # writes docs/screenshots/*.png and index.md
    .venv/bin/python scripts/screenshots.py --only layouts   # just the two layouts of every tab

Needs Debian's Chromium (``apt-get install -y chromium``) and Playwright's Python package (both
come with ``make test``'s set-up). Takes about two minutes.
"""

from __future__ import annotations

import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from e2e_helpers import CHROMIUM, CHROMIUM_ARGS, external_requests, start_app  # noqa: E402

from hetsched.scenarios import SCENARIOS  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
TABS = ["Graph", "Backends", "Mapping", "Experts", "Pipeline", "Memory", "Executor", "Calibration"]
PANEL = ".hetsched-panel:visible"


def quiet(page, quiet_ms: int = 1200, timeout_s: float = 180.0) -> None:
    """Wait until no plot has been drawn for ``quiet_ms`` and no panel shows its busy badge."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        now = page.evaluate("() => [window.__hetschedLastDraw || 0, window.__hetschedDraws || 0,"
                            " Array.from(document.querySelectorAll('.hetsched-busy-badge')).some(e => e.offsetParent !== null)]")
        if now == last and not now[2] and not page.locator(".hetsched-computing").count():
            return
        last = now
        page.wait_for_timeout(quiet_ms)


def shot(page, name: str) -> Path:
    """The visible panel, whole: the viewport is stretched to the content (Voila scrolls inside a
    container, and what lies below its fold is not painted), then put back."""
    size = page.viewport_size
    height = page.evaluate("() => Math.max(document.documentElement.scrollHeight,"
                           " ...Array.from(document.querySelectorAll('#rendered_cells'), e => e.scrollHeight))")
    path = OUT / f"{name}.png"
    try:
        if height > size["height"]:
            page.set_viewport_size({"width": size["width"], "height": min(int(height) + 40, 9000)})
            page.wait_for_timeout(800)
            quiet(page, 600)
        page.locator(PANEL).first.screenshot(path=str(path))
    finally:
        page.set_viewport_size(size)
    return path


def screen(page, name: str) -> Path:
    """What the screen shows (the viewport, not the whole page): where the figure starts matters."""
    path = OUT / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def main(argv: list[str] | None = None) -> int:
    import argparse

    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description="screenshots for docs/screenshots/")
    ap.add_argument("--only", choices=["tabs", "scenarios", "whatif", "layouts"], action="append",
                    help="take only these (repeatable; default all)")
    only = set(ap.parse_args(argv).only or ["tabs", "scenarios", "whatif", "layouts"])
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hetsched-shots-"))
    srv = start_app(work, pool=1)
    rows: dict[str, list[str]] = {"tabs": [], "scenarios": [], "whatif": [], "layouts": []}
    try:
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(str(work / "profile"), executable_path=str(CHROMIUM),
                                                        headless=True, args=CHROMIUM_ARGS,
                                                        viewport={"width": 1600, "height": 1000})
            ctx.set_default_timeout(180_000)
            page = ctx.new_page()
            page.requested_urls = []
            page.on("request", lambda r: page.requested_urls.append(r.url))
            page.goto(srv.base_url + "/", wait_until="load")
            page.wait_for_function("() => (window.__hetschedDraws || 0) >= 1", timeout=300_000)
            quiet(page)
            # each tab as it opens: its own scenario
            for tab in TABS if "tabs" in only else []:
                page.locator(".lm-TabBar-tab", has_text=tab).first.click()
                quiet(page)
                p = shot(page, f"tab_{tab.lower()}_1600x1000")
                rows["tabs"].append(f"| {tab} tab, as it opens (1600x1000) | [{p.name}]({p.name}) |")
            # every scenario from the picker, at a projector's size
            page.set_viewport_size({"width": 1280, "height": 720})
            picker = page.locator(".widget-dropdown", has_text="scenario").locator("select").first
            for key, sc in SCENARIOS.items() if "scenarios" in only else []:
                label = next(o for o in picker.locator("option").all_inner_texts()
                             if o.replace("\xa0", " ").startswith(sc.title))
                picker.select_option(label=label)
                page.wait_for_timeout(500)
                quiet(page)
                p = shot(page, f"scenario_{key}_1280x720")
                rows["scenarios"].append(f"| scenario *{sc.title}* (1280x720) | [{p.name}]({p.name}) |")
            if "whatif" in only:
                # the what-if: the Mapping tab's own example on another machine, beside the previous one; the editor
                page.set_viewport_size({"width": 1600, "height": 1000})
                picker.select_option(index=0)  # each tab's own example again
                quiet(page)
                page.locator(".lm-TabBar-tab", has_text="Mapping").first.click()
                quiet(page)
                bar = page.locator(PANEL).first.locator(".hetsched-machine-bar")
                bar.locator(".widget-dropdown", has_text="use").locator("select").select_option(label="gpu_tpu")
                page.wait_for_timeout(500)
                quiet(page)
                p = shot(page, "whatif_mapping_other_machine_1600x1000")
                rows["whatif"].append(f"| Mapping tab's example on another machine, beside the previous one (1600x1000) | [{p.name}]({p.name}) |")
                bar.get_by_role("button", name="edit machine").click()
                bar.get_by_role("button", name="add").click()  # one more device of the first bundled model
                page.wait_for_timeout(500)
                quiet(page)
                p = shot(page, "whatif_machine_editor_1600x1000")
                rows["whatif"].append(f"| the machine editor open, a device added (1600x1000) | [{p.name}]({p.name}) |")
                bar.locator(".widget-dropdown", has_text="use").locator("select").select_option(index=0)  # each tab's own machine again
                page.wait_for_timeout(500)
                quiet(page)
            # both layouts of every tab, as a projector's screen shows them
            if "layouts" in only:
                page.set_viewport_size({"width": 1280, "height": 720})
                picker.select_option(index=0)  # each tab's own example
                page.wait_for_timeout(500)
                for layout, button in (("full", "full layout"), ("present", "presentation")):
                    page.get_by_role("button", name=button, exact=True).click()
                    for tab in TABS:
                        page.locator(".lm-TabBar-tab", has_text=tab).first.click()
                        quiet(page)
                        page.evaluate("() => document.querySelectorAll('#rendered_cells, .jp-Notebook, html')"
                                      ".forEach(e => { e.scrollTop = 0; })")
                        p = screen(page, f"{layout}_{tab.lower()}_1280x720")
                        what = "presentation layout (`?layout=present`)" if layout == "present" else "full layout"
                        rows["layouts"].append(f"| {tab} tab, {what}, the screen at 1280x720 | [{p.name}]({p.name}) |")
            outside = external_requests(page)
            if outside:
                raise SystemExit(f"the page asked other hosts for {outside[:3]}")
            ctx.close()
    finally:
        srv.stop()
    index = OUT / "index.md"
    old_rows = [r for r in (index.read_text().splitlines() if index.exists() else []) if r.startswith("| ") and
                not r.startswith("| what") and "---" not in r]
    kinds = {"tabs": "tab_", "scenarios": "scenario_", "whatif": "whatif_", "layouts": ("full_", "present_")}
    for kind in ("tabs", "scenarios", "whatif", "layouts"):
        if kind not in only:  # keep the rows of the shots not taken this time
            rows[kind] = [r for r in old_rows if re.search(r"\]\((%s)" % "|".join(
                [kinds[kind]] if isinstance(kinds[kind], str) else kinds[kind]), r)]
    index.write_text(
        "# Screenshots\n\nThe explorer in Chromium against `hetsched app` (`make app`), taken by "
        "`.venv/bin/python scripts/screenshots.py`: each dashboard tab as it opens at 1600x1000, each "
        "scenario of the picker at 1280x720, and each tab in the full and the presentation layout as a "
        "1280x720 screen (a projector) shows it, and the what-if of another machine (the machine bar, the "
        "comparison with the previous machine, the editor).\n\n| what | file |\n| --- | --- |\n"
        + "\n".join(rows["tabs"] + rows["scenarios"] + rows["whatif"] + rows["layouts"]) + "\n")
    print("\n".join(re.sub(r"\(.*?\)", "", r) for k in ("tabs", "scenarios", "whatif", "layouts") for r in rows[k]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
