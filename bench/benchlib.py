"""Small shared helpers for ``bench/bench_<family>.py`` scripts (import as ``import benchlib``).

Convention (BRIEF.md): ``.venv/bin/python bench/bench_<family>.py`` writes the markdown fragment
``bench/results/<family>.md`` with the exact command, the machine, the inputs, medians of several
runs (and a peer's figures from the same run where there is a peer), and PASS/FAIL per target.
``bench/run_all.py`` (``make bench``) runs every script and concatenates the fragments into
``docs/benchmarks.md``.
"""

from __future__ import annotations

import datetime as _dt
import gc
import os
import platform
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"

__all__ = ["ROOT", "RESULTS", "Timing", "timeit", "machine", "machine_line", "command_line", "verdict",
           "fmt_s", "table", "write_fragment"]


@dataclass
class Timing:
    """Wall-clock and CPU seconds of ``repeat`` runs; the medians are what fragments report."""

    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    result: Any = None

    @property
    def median_s(self) -> float:
        return statistics.median(self.wall_s)

    @property
    def median_cpu_s(self) -> float:
        return statistics.median(self.cpu_s)

    @property
    def min_s(self) -> float:
        return min(self.wall_s)


def timeit(fn: Callable[[], Any], *, repeat: int = 5, warmup: int = 1) -> Timing:
    """Run ``fn`` ``warmup`` times untimed, then ``repeat`` times timed (GC collected before each)."""
    t = Timing()
    for _ in range(warmup):
        t.result = fn()
    for _ in range(repeat):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        t.result = fn()
        t.cpu_s.append(time.process_time() - c0)
        t.wall_s.append(time.perf_counter() - w0)
    return t


def machine() -> dict[str, Any]:
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover - not on every platform
        load = float("nan")
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "kernel_sched": kernel_sched(),
        "cpu": cpu or platform.machine(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "load_1min": load,
        "date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def kernel_sched() -> str:
    """The kernel settings that decide what a thread woken on a busy machine waits for (the boot
    options on scheduling and idle polling, and the cpuidle driver), '' where none is set: on the
    VM of these pages, woken threads are packed onto busy virtual CPUs and idle ones halt at once,
    which moves every wall-clock number with more than one thread or process."""
    keep = ("sched", "haltpoll", "idle=", "isolcpus", "nohz", "cpuidle", "threadirqs")
    try:
        opts = [t for t in Path("/proc/cmdline").read_text().split() if t.startswith(keep)]
    except OSError:
        opts = []
    try:
        drv = Path("/sys/devices/system/cpu/cpuidle/current_driver").read_text().strip()
    except OSError:
        drv = ""
    return " ".join(opts + ([f"cpuidle={drv}"] if drv else []))


def machine_line() -> str:
    m = machine()
    sched = f", kernel: {m['kernel_sched']}" if m["kernel_sched"] else ""
    return (f"{m['platform']}, {m['cpu']}, {m['cpu_count']} CPUs, Python {m['python']}, "
            f"1-min load {m['load_1min']:.1f} at start, {m['date_utc']}{sched}")


def command_line() -> str:
    """The command that ran this script, as typed from the repo root."""
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(ROOT)
    except ValueError:
        pass
    return shlex.join([".venv/bin/python", str(script), *sys.argv[1:]])


def verdict(ok: bool) -> str:
    return "**PASS**" if ok else "**FAIL**"


def fmt_s(s: float) -> str:
    """Seconds in a readable unit."""
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


def table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def write_fragment(family: str, body: str) -> Path:
    """Write ``bench/results/<family>.md`` (a ``## <family>`` section for docs/benchmarks.md)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{family}.md"
    path.write_text(body.rstrip() + "\n")
    return path
