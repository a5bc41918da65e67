"""Generate golden HEFT and CPOP schedules from SAGA (the peer oracle for hetsched.mapping.listsched).

Run with the project venv::

    .venv/bin/python scripts/gen_saga_golden.py --saga-git DIR   # writes tests/data/mapping_saga_golden.json

``DIR`` is a git directory of https://github.com/ANRGUSC/saga holding :data:`SAGA_COMMIT` (a clone,
or the mirror the project's ``fetch`` tool makes). SAGA's source at that commit is exported to a
temporary directory and run there, in its own venv (``scripts/.venv-saga``, created on first use
with Python >= 3.12, as SAGA requires, and numpy, networkx and pydantic); nothing of SAGA is copied
into this repository. Only SAGA's core (``saga/__init__.py``) and its ``heft``/``cpop`` modules are
loaded: the schedulers package's ``__init__`` imports every scheduler and their heavy extras (z3,
pysmt, wfcommons).

Instances: Topcuoglu DAGs from ``hetsched.io.generators.topcuoglu`` (sizes and seeds below) with an
explicit zero-cost source and sink (so SAGA adds none of its own), on related machines (speeds drawn
from the instance seed) joined by a full mesh of links without latency. Each instance is stored whole
(tasks, edges, speeds, bandwidths), so the test rebuilds it without the generator. SAGA's HEFT and
CPOP are run on each, with ``PYTHONHASHSEED=0`` (SAGA keeps its nodes in frozensets).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "mapping_saga_golden.json"
VENV = ROOT / "scripts" / ".venv-saga"
SAGA_REPO = "https://github.com/ANRGUSC/saga"
SAGA_COMMIT = "29defc0f2ef3532c89b8d29de38385ac9e026db6"  # "Bump version to 2.1.0", 2026-07-22
SIZES = (8, 16, 30, 60)
SEEDS = (0, 1, 2)
NODES = ("m0", "m1", "m2", "m3")


def instance(n: int, seed: int) -> dict:
    from hetsched.io.generators import UNIT_S, topcuoglu

    g = topcuoglu(n, seed=seed)
    rng = random.Random(1000 + seed)
    speeds = [(m, round(rng.uniform(0.5, 3.0), 3)) for m in NODES]
    links = [(a, b, round(rng.uniform(0.5e10, 1.5e10), -6)) for i, a in enumerate(NODES) for b in NODES[i + 1:]]
    tasks = [("src", 0.0)] + [(o.name, float(o.attrs["w_bar"]) * UNIT_S) for o in g.ops.values()] + [("snk", 0.0)]
    edges = []
    for t in g.tensors.values():
        if t.producer is not None:
            edges += [(t.producer, c, float(t.size_bytes)) for c in t.consumers]
    nx_g = g.nx
    edges += [("src", o, 0.0) for o in g.ops if nx_g.in_degree(o) == 0]
    edges += [(o, "snk", 0.0) for o in g.ops if nx_g.out_degree(o) == 0]
    return {"name": f"topcuoglu{n}-s{seed}", "n": n, "seed": seed, "nodes": speeds, "links": links,
            "tasks": tasks, "edges": edges}


# Runs inside the SAGA venv: instances on stdin, schedules on stdout.
RUNNER = r'''
import importlib.util, json, logging, sys, types
logging.disable(logging.WARNING)
src = sys.argv[1]
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
saga = load("saga", f"{src}/saga/__init__.py")
pkg = types.ModuleType("saga.schedulers"); pkg.__path__ = [f"{src}/saga/schedulers"]; sys.modules["saga.schedulers"] = pkg
cpop = load("saga.schedulers.cpop", f"{src}/saga/schedulers/cpop.py")
heft = load("saga.schedulers.heft", f"{src}/saga/schedulers/heft.py")
out = []
for inst in json.load(sys.stdin):
    net = saga.Network.create(nodes=[tuple(x) for x in inst["nodes"]], edges=[tuple(x) for x in inst["links"]])
    tg = saga.TaskGraph.create(tasks=[tuple(x) for x in inst["tasks"]], dependencies=[tuple(x) for x in inst["edges"]])
    assert {t.name for t in tg.tasks} == {t for t, _ in inst["tasks"]}, "SAGA added tasks"
    res = {}
    for key, sched in (("heft", heft.HeftScheduler()), ("cpop", cpop.CpopScheduler())):
        s = sched.schedule(net, tg)
        res[key] = {"makespan": max(t.end for ts in s.mapping.values() for t in ts),
                    "placement": {t.name: t.node for ts in s.mapping.values() for t in ts}}
    out.append(res)
json.dump(out, sys.stdout)
'''


def ensure_venv() -> Path:
    py = VENV / "bin" / "python"
    if not py.exists():
        cands = [os.environ.get("SAGA_PYTHON"), shutil.which("python3.13"), shutil.which("python3.12"),
                 *sorted(str(p) for p in Path.home().glob(".pyenv/versions/3.1[2-9]*/bin/python3"))]
        base = next((p for p in cands if p and subprocess.run(
            [p, "-c", "import sys; assert sys.version_info >= (3, 12)"], capture_output=True).returncode == 0), None)
        if base is None:
            raise SystemExit("SAGA needs Python >= 3.12: none found (set SAGA_PYTHON)")
        subprocess.run([base, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "numpy", "networkx", "pydantic>=2"], check=True)
    return py


def export_saga(git_dir: str, dest: Path) -> Path:
    """``git archive`` of SAGA's ``src/`` at the pinned commit into ``dest``."""
    tar = dest / "saga.tar"
    with open(tar, "wb") as f:
        subprocess.run(["git", "--git-dir", git_dir, "archive", SAGA_COMMIT, "src/saga"], stdout=f, check=True)
    with tarfile.open(tar) as tf:
        tf.extractall(dest, filter="data")
    return dest / "src"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--saga-git", default=os.environ.get("SAGA_GIT_DIR", "/work/.mirror/ANRGUSC+saga/repo"),
                    help="git directory of a SAGA clone holding the pinned commit")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    insts = [instance(n, seed) for n in SIZES for seed in SEEDS]
    py = ensure_venv()
    with tempfile.TemporaryDirectory() as tmp:
        src = export_saga(a.saga_git, Path(tmp))
        env = dict(os.environ, PYTHONHASHSEED="0")
        p = subprocess.run([str(py), "-c", RUNNER, str(src)], input=json.dumps(insts), capture_output=True, text=True,
                           env=env, check=False)
        if p.returncode:
            sys.stderr.write(p.stderr)
            return 1
    for inst, res in zip(insts, json.loads(p.stdout)):
        inst.update(res)
    data = {"saga_repo": SAGA_REPO, "saga_commit": SAGA_COMMIT, "generator": "scripts/gen_saga_golden.py",
            "python": subprocess.run([str(py), "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                                     text=True, check=True).stdout.strip(),
            "model": "related machines: task cost / node speed; edge size / link speed; full mesh, no latency",
            "instances": insts}
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(insts)} instances")
    return 0


if __name__ == "__main__":
    sys.exit(main())
