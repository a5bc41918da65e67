"""Screenshots of the explorer for docs/screenshots/: every dashboard tab at 1600x1000, every scenario
at 1280x720 (a projector's size), and the what-if of issue 33 (the Mapping tab on another machine,
beside the previous one; the machine editor open), taken in Chromium against Voila as a user sees them.

    .venv/bin/python scripts/screenshots.py          # writes docs/screenshots/*.png and index.md

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

from e2e_helpers import CHROMIUM, CHROMIUM_ARGS, external_requests, start_voila  # noqa: E402

from hetsched.scenarios import SCENARIOS  # noqa: E402

OUT = ROOT / "docs" / "screenshots"
TABS = ["Graph", "Backends", "Mapping", "Pipeline", "Memory", "Executor", "Calibration"]
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


def main() -> int:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="hetsched-shots-"))
    srv = start_voila(work, page_timeout_s=300)
    rows: list[str] = []
    try:
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(str(work / "profile"), executable_path=str(CHROMIUM),
                                                        headless=True, args=CHROMIUM_ARGS,
                                                        viewport={"width": 1600, "height": 1000})
            ctx.set_default_timeout(180_000)
            page = ctx.new_page()
            page.requested_urls = []
            page.on("request", lambda r: page.requested_urls.append(r.url))
            page.goto(srv.url("dashboard"), wait_until="load")
            page.wait_for_function("() => (window.__hetschedDraws || 0) >= 1", timeout=300_000)
            quiet(page)
            # each tab as it opens: its own scenario
            for tab in TABS:
                page.locator(".lm-TabBar-tab", has_text=tab).first.click()
                quiet(page)
                p = shot(page, f"tab_{tab.lower()}_1600x1000")
                rows.append(f"| {tab} tab, as it opens (1600x1000) | [{p.name}]({p.name}) |")
            # every scenario from the picker, at a projector's size
            page.set_viewport_size({"width": 1280, "height": 720})
            picker = page.locator(".widget-dropdown", has_text="scenario").locator("select").first
            for key, sc in SCENARIOS.items():
                label = next(o for o in picker.locator("option").all_inner_texts()
                             if o.replace("\xa0", " ").startswith(sc.title))
                picker.select_option(label=label)
                page.wait_for_timeout(500)
                quiet(page)
                p = shot(page, f"scenario_{key}_1280x720")
                rows.append(f"| scenario *{sc.title}* (1280x720) | [{p.name}]({p.name}) |")
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
            rows.append(f"| Mapping tab's example on another machine, beside the previous one (1600x1000) | [{p.name}]({p.name}) |")
            bar.get_by_role("button", name="edit machine").click()
            bar.get_by_role("button", name="add").click()  # one more device of the first bundled model
            page.wait_for_timeout(500)
            quiet(page)
            p = shot(page, "whatif_machine_editor_1600x1000")
            rows.append(f"| the machine editor open, a device added (1600x1000) | [{p.name}]({p.name}) |")
            outside = external_requests(page)
            if outside:
                raise SystemExit(f"the page asked other hosts for {outside[:3]}")
            ctx.close()
    finally:
        srv.stop()
    (OUT / "index.md").write_text(
        "# Screenshots\n\nThe explorer in Chromium against Voila (`make app`), taken by "
        "`.venv/bin/python scripts/screenshots.py`: each dashboard tab as it opens at 1600x1000, each "
        "scenario of the picker at 1280x720, and the what-if of another machine (the machine bar, the comparison "
        "with the previous machine, the editor).\n\n| what | file |\n| --- | --- |\n" + "\n".join(rows) + "\n")
    print("\n".join(re.sub(r"\(.*?\)", "", r) for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
