"""A measured calibration kept as files: the machine, its cost file, the measured runs and the fit's points.

:func:`hetsched.calibrate` measures a machine with torch; :func:`save_measurement` keeps what it
measured so that it can be looked at without torch (the dashboard's Calibration tab ships one in
``data/calibration/``, written by ``scripts/gen_calibration_data.py``), and :func:`load_measurement`
reads it back. A directory holds

* ``system.yaml`` -- the measured machine (``hetsched.system``), ``cost.yaml`` -- its cost file
  (``hetsched.cost``, ``docs/formats.md``);
* per workload ``<name>.graph.json.gz`` (the graph imported from torch) and ``<name>.trace.json.gz``:
  every measured sample of every op as one Chrome-trace event named after the op (one per run), which
  :func:`hetsched.io.load_profile` matches by name: the per-op samples come back as measured;
* ``points.csv.gz`` -- the points the efficiency curves were fitted to (``Calibration.points``);
* ``meta.json`` -- when, where and how it was measured (machine, torch, the command).

>>> import tempfile
>>> from hetsched.io.generators import chain
>>> from hetsched.io.systems import toy_system
>>> from hetsched.io.profile import load_profile
>>> g = chain(3)
>>> prof = load_profile(profile_trace_of({"op0": (1e-3, 2e-3), "op1": (3e-3,), "op2": (1e-3, 1e-3)}), g)
>>> prof.samples["op0"], prof.latency_s["op1"]
((0.001, 0.002), 0.003)
"""

from __future__ import annotations

import datetime as _dt
import gzip
import json
import os
import platform
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from .. import resources
from ..errors import FormatError

__all__ = ["Measurement", "save_measurement", "load_measurement", "profile_trace_of", "bundled_measurement_dir"]



def bundled_measurement_dir() -> Path:
    """The folder of the measurement the dashboard's Calibration tab opens on (``data/calibration`` of a
    checkout, ``hetsched/data/calibration`` of a wheel; ``scripts/gen_calibration_data.py`` writes it)."""
    root = resources.data_root() / "calibration"
    if not isinstance(root, Path):  # a zipped install: the files are read one by one from a folder on disk
        raise FormatError(f"the bundled measurement {root} is not a folder on disk", field="path")
    return root


def profile_trace_of(samples: Mapping[str, Any], order: Any = None) -> dict:
    """A Chrome trace holding every sample of every op as one event named after the op (run after run)."""
    order = list(order) if order is not None else list(samples)
    events, t = [], 0.0
    n_runs = max((len(samples[o]) for o in order if o in samples), default=0)
    for k in range(n_runs):
        for o in order:
            s = samples.get(o, ())
            if k < len(s):
                dur = float(s[k]) * 1e6
                events.append({"name": o, "ph": "X", "ts": round(t, 3), "dur": round(dur, 3), "pid": 0, "tid": 0,
                               "cat": "user_annotation", "args": {"run": k}})
                t += dur
    return {"traceEvents": events, "displayTimeUnit": "ms"}


@dataclass(frozen=True, eq=False)
class Measurement:
    """What :func:`load_measurement` reads: the fields of a :class:`~hetsched.calibrate.Calibration` a
    look at a calibration needs, without torch.

    Attributes
    ----------
    system : System
    cost : CalibratedCost
        The cost file read against ``system``.
    cost_path : Path
    profiles : dict
        ``{workload: Profile}`` of the measured runs.
    points : DataFrame
        The points the curves were fitted to.
    meta : dict
    """

    system: Any
    cost: Any
    cost_path: Path
    profiles: Mapping[str, Any] = field(default_factory=dict)
    points: pd.DataFrame = field(default_factory=pd.DataFrame)
    meta: Mapping[str, Any] = field(default_factory=dict)


def _stem(label: str) -> str:
    """A file name for a workload's label (``resnet50(batch=1)`` -> ``resnet50_batch_1``).

    >>> _stem("bert_base(batch=1,seq_len=64)")
    'bert_base_batch_1_seq_len_64'
    """
    import re

    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_.-]", "_", label)).strip("_") or "run"


def _write_gz(path: Path, text: str) -> None:
    path.write_bytes(gzip.compress(text.encode(), mtime=0))


def save_measurement(cal: Any, directory: str | Path, *, command: str = "") -> Path:
    """Write a :class:`~hetsched.calibrate.Calibration` (its system, cost file, runs and points) to ``directory``."""
    from .graph_json import graph_to_dict
    from .systems import save_system
    from ..cost import save_cost

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    save_system(cal.system, d / "system.yaml")
    save_cost(cal.cost, d / "cost.yaml")
    runs = {}
    for name, prof in cal.profiles.items():
        g = prof.graph
        stem = _stem(name)
        runs[stem] = name
        _write_gz(d / f"{stem}.graph.json.gz", json.dumps(graph_to_dict(g), separators=(",", ":")))
        order = [o for o in g.ops if o in prof.samples]
        _write_gz(d / f"{stem}.trace.json.gz", json.dumps(profile_trace_of(prof.samples, order), separators=(",", ":")))
    if len(cal.points):
        _write_gz(d / "points.csv.gz", cal.points.to_csv(index=False))
    import torch  # a Calibration exists only where torch ran

    meta = {"workloads": list(cal.profiles), "runs": runs, "device": list(cal.system.devices)[0],
            "measured_on": {"machine": platform.platform(), "processor": platform.processor() or platform.machine(),
                            "python": platform.python_version(), "torch": torch.__version__},
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "command": command,
            "metrics": {k: float(v) for k, v in cal.metrics.items() if isinstance(v, (int, float))},
            "params": {k: v for k, v in cal.params.items() if isinstance(v, (str, int, float, bool))}}
    (d / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return d


def load_measurement(directory: str | Path | None = None) -> Measurement:
    """Read a measurement written by :func:`save_measurement` (default: the bundled one, :func:`bundled_measurement_dir`).

    >>> m = load_measurement()
    >>> m.system.device_names, sorted(m.profiles)
    (['cpu0'], ['bert_base(batch=1,seq_len=64)', 'resnet50(batch=1)'])
    """
    from ..cost import load_cost
    from .graph_json import graph_from_dict
    from .files import read_json
    from .profile import load_profile
    from .systems import load_system

    if directory is not None and not isinstance(directory, (str, os.PathLike)):
        raise FormatError(f"a measurement folder must be a string or a path, got {type(directory).__name__}",
                          field="path")
    d = Path(directory) if directory is not None else bundled_measurement_dir()
    if not (d / "system.yaml").is_file():
        raise FormatError(f"{d}: no measurement here (system.yaml is missing; scripts/gen_calibration_data.py "
                          "writes one)", field="path")
    system = load_system(d / "system.yaml")
    cost_path = d / "cost.yaml"
    cost = load_cost(cost_path, system)
    meta = read_json(d / "meta.json") if (d / "meta.json").exists() else {}
    if not isinstance(meta, Mapping):
        raise FormatError(f"meta.json: expected an object at the top level, got {type(meta).__name__}", field="<root>")
    labels = meta.get("runs") or {}
    if not isinstance(labels, Mapping) or not all(isinstance(v, str) for v in labels.values()):
        raise FormatError("meta.json: runs must map file stems to workload labels", field="runs")
    workloads = meta.get("workloads") or []
    if not isinstance(workloads, list) or not all(isinstance(w, str) for w in workloads):
        raise FormatError("meta.json: workloads must be a list of workload labels", field="workloads")
    profiles = {}
    first = {label: i for i, label in enumerate(workloads)}  # in the order they were measured
    files = sorted(d.glob("*.graph.json.gz"), key=lambda f: (first.get(labels.get(f.name[: -len(".graph.json.gz")]), 1e9), f.name))
    for gpath in files:
        stem = gpath.name[: -len(".graph.json.gz")]
        g = graph_from_dict(read_json(gpath, gz=True), source=gpath.name)
        tpath = d / f"{stem}.trace.json.gz"
        if not tpath.is_file():
            raise FormatError(f"{d.name}: {gpath.name} has no trace {tpath.name}", field="path")
        profiles[labels.get(stem, stem)] = load_profile(tpath, g, device=system.device_names[0])
    pts = d / "points.csv.gz"
    try:
        points = pd.read_csv(pts) if pts.exists() else pd.DataFrame()
    except (OSError, EOFError, zlib.error, ValueError, pd.errors.ParserError) as e:
        # a directory, not gzip, truncated, empty (EmptyDataError is a ValueError), not CSV
        raise FormatError(f"{pts.name}: not a readable gzip CSV: {str(e)[:200]}", field="path") from None
    return Measurement(system, cost, cost_path, profiles, points, meta)
