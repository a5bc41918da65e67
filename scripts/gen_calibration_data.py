"""Measure this machine with torch and keep the result in data/calibration/ (the Calibration tab's data).

Run with the project venv (torch's CPU build)::

    .venv/bin/python scripts/gen_calibration_data.py            # writes data/calibration/
    .venv/bin/python scripts/gen_calibration_data.py --out DIR  # somewhere else

It runs :func:`hetsched.calibrate` on the default workloads (ResNet-50 at batch 1, BERT-base at
sequence length 64) with the quick size sweep, two threads and three runs (each op's time is the
median over the runs), then :func:`hetsched.io.measured.save_measurement`: the measured machine,
its cost file, each workload's graph and every measured sample, the fit's points and a
``meta.json`` saying where and when. The dashboard's Calibration tab opens on what it writes, so a
browser without torch behind it still shows measured against predicted; with torch it can measure
the machine it runs on too. About five minutes on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    import hetsched
    from hetsched.calibrate import DEFAULT_WORKLOADS
    from hetsched.io.measured import bundled_measurement_dir, save_measurement

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(bundled_measurement_dir()), help="directory to write (default data/calibration)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    cal = hetsched.calibrate(DEFAULT_WORKLOADS, repeats=5, runs=a.runs, threads=a.threads, sweep="quick",
                             system_name="measured_cpu", progress=lambda m: print(m, flush=True))
    out = save_measurement(cal, a.out, command="python scripts/gen_calibration_data.py"
                                                + (f" --runs {a.runs}" if a.runs != 3 else "")
                                                + (f" --threads {a.threads}" if a.threads != 2 else ""))
    print(f"wrote {out} in {time.perf_counter() - t0:.0f} s: "
          + ", ".join(f"{p.name} ({p.stat().st_size / 1e3:.0f} kB)" for p in sorted(out.iterdir())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
