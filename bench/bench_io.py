"""Benchmark of hetsched.io: loading bundled graphs and building zoo graphs (issue 3 targets).

Run: ``.venv/bin/python bench/bench_io.py`` -> writes ``bench/results/io.md``.

Targets: loading the largest bundled graph JSON under 1 s; building the GPT-2 small training graph
under 2 s. No peer is named for these targets; as a floor, the table shows what ``json.loads``
alone costs on the same file (the rest is building and validating the OpGraph).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hetsched.io import DATA_DIR, load_graph  # noqa: E402
from hetsched.io.graph_json import load_graph_json  # noqa: E402
from hetsched.io.zoo import ZOO  # noqa: E402

REPEATS = 7


def median_s(fn, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _importer_rows() -> list[tuple[str, str, float]]:
    """ONNX and torch.export import of ResNet-50 (needs torch to make the model; skipped without)."""
    try:
        import io
        import warnings

        import torch
    except ImportError:
        return [("load_onnx / load_torch", "torch not installed: not measured", float("nan"))]
    sys.path.insert(0, str(ROOT / "tests"))
    from test_io_torch import ResNet50  # the torchvision layout, written out

    from hetsched.io.onnx import load_onnx
    from hetsched.io.torch_import import load_torch

    m = ResNet50().eval()
    x = (torch.randn(1, 3, 224, 224),)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, x, buf, dynamo=False, input_names=["image"], dynamic_axes={"image": {0: "batch"}})
    data = buf.getvalue()
    ep = torch.export.export(m, x)
    return [
        ("load_onnx (shape inference + folding)", f"ResNet-50, torch-exported ONNX, {len(data) / 1e6:.0f} MB, batch 8",
         median_s(lambda: load_onnx(data, dims={"batch": 8}), 3)),
        ("load_torch from an ExportedProgram", "ResNet-50 (export itself not timed)", median_s(lambda: load_torch(ep), 3)),
        ("load_torch including torch.export", "ResNet-50", median_s(lambda: load_torch(m, x), 3)),
    ]


def main() -> None:
    graphs = sorted((DATA_DIR / "graphs").glob("*.json"), key=lambda p: p.stat().st_size, reverse=True)
    if not graphs:
        raise SystemExit("no bundled graphs: run `make data` first")
    largest = graphs[0]
    g = load_graph(largest)
    t_load = median_s(lambda: load_graph_json(largest))
    t_json = median_s(lambda: json.loads(largest.read_text()))
    t_gpt2 = median_s(lambda: ZOO["gpt2_small"](training=True))
    gpt2 = ZOO["gpt2_small"](training=True)
    builds = []
    for name in ["resnet50", "inception_v3", "mobilenet_v2", "vgg16", "bert_base", "gpt2_small", "randwire_ws"]:
        for training in (False, True):
            gg = ZOO[name](training=training)
            builds.append((name, training, gg.n_ops, median_s(lambda: ZOO[name](training=training), 3)))
    loads = [(p.name, p.stat().st_size, median_s(lambda: load_graph_json(p), 3)) for p in graphs]

    importers = _importer_rows()
    ok_load = t_load < 1.0
    ok_gpt2 = t_gpt2 < 2.0
    lines = [
        "# hetsched.io benchmark",
        "",
        f"Command: `.venv/bin/python bench/bench_io.py` (medians of {REPEATS} runs unless said otherwise)",
        f"Machine: {platform.platform()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "",
        "## Targets",
        "",
        "No peer is named for these targets (issue 3); `json.loads` of the same file is shown as the floor.",
        "",
        "| target | input | ours | floor: json.loads alone | limit | result |",
        "|---|---|---|---|---|---|",
        f"| load largest bundled graph | `{largest.name}` ({largest.stat().st_size / 1e6:.2f} MB, {g.n_ops} ops, "
        f"{g.n_tensors} tensors) | {t_load * 1e3:.1f} ms | {t_json * 1e3:.1f} ms ({t_load / t_json:.1f}x) | 1 s | "
        f"{'PASS' if ok_load else 'FAIL'} |",
        f"| build GPT-2 small training graph | batch 1, seq 1024, 12 layers ({gpt2.n_ops} ops, {gpt2.n_tensors} tensors) "
        f"| {t_gpt2 * 1e3:.1f} ms | - | 2 s | {'PASS' if ok_gpt2 else 'FAIL'} |",
        "",
        "## Every bundled graph (load, median of 3)",
        "",
        "| file | MB | load ms |",
        "|---|---|---|",
        *[f"| {n} | {s / 1e6:.2f} | {t * 1e3:.1f} |" for n, s, t in loads],
        "",
        "## Importers (informational, median of 3)",
        "",
        "| what | input | ms |",
        "|---|---|---|",
        *[f"| {w} | {i} | {t * 1e3:.0f} |" for w, i, t in importers],
        "",
        "## Zoo build times (median of 3)",
        "",
        "| model | training | ops | build ms |",
        "|---|---|---|---|",
        *[f"| {n} | {'yes' if tr else 'no'} | {k} | {t * 1e3:.1f} |" for n, tr, k, t in builds],
        "",
    ]
    out = ROOT / "bench" / "results" / "io.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print("\n".join(lines))
    if not (ok_load and ok_gpt2):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
