"""Benchmark of hetsched.io: loading bundled graphs and building zoo graphs (issue 3 targets).

Run: ``.venv/bin/python bench/bench_io.py`` -> writes ``bench/results/io.md``.

Targets: loading the largest bundled graph JSON under 1 s; building the GPT-2 small training graph
under 2 s. No peer is named for these targets; as a floor, the table shows what ``json.loads``
alone costs on the same file (the rest is building and validating the OpGraph).

Issue 28 (models users bring): a Llama-3-8B-shaped model (32 layers, hidden 4096, GQA with 8 KV
heads, vocabulary 128256, intermediate 14336; sequence 2048) built on the meta device, its joint
training graph imported in < 60 s and < 8 GB peak RSS (measured in a child process of its own);
h2h, HEFT, the memory ordering (``optimize_order`` at its defaults), a pipeline split over 8
heterogeneous ranks and the executor simulation each < 10 s on it; every model of the corpus
(``tests/torch_corpus.py``) imported (export included) in < 10 s. ``--llm-only`` runs just these.
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


LLAMA3_8B = dict(num_hidden_layers=32, hidden_size=4096, num_attention_heads=32, num_key_value_heads=8,
                 intermediate_size=14336, vocab_size=128256, max_position_embeddings=8192)
LLM_SEQ = 2048
EIGHT_RANKS = ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "fpga0", "fpga1"]


def _llm_child(out: str) -> None:
    """In a process of its own (its peak RSS is the import's): build on meta, import the joint graph."""
    import resource
    import warnings

    from hetsched.io import save_graph
    from hetsched.io import torch_models as tm
    from hetsched.io.torch_import import load_torch

    warnings.simplefilter("ignore")
    t0 = time.perf_counter()
    m = tm.transformers_model("llama", device="meta", **LLAMA3_8B)
    _, kw = tm.example_inputs(m, seq_len=LLM_SEQ)
    g = load_torch(m, kwargs={**kw, "labels": kw["input_ids"]}, training=True, name="llama3_8b_train")
    t = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    save_graph(g, out)
    print(json.dumps({"import_s": t, "rss_bytes": rss, "n_ops": g.n_ops, "params": g.meta["params"],
                      "weight_bytes": g.total_weight_bytes, "flops": g.total_flops}))


def _llm_rows() -> tuple[list[str], bool]:
    """The issue-28 table: the 8B import in a child process, then each family on its graph."""
    import subprocess
    import tempfile

    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return ["torch or transformers not installed: not measured", ""], True
    from hetsched import executor, mapping, memory, pipeline
    from hetsched.io.resolve import resolve_system

    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "llama8b.json")
        r = subprocess.run([sys.executable, __file__, "--llm-child", path], capture_output=True, text=True,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=900)
        if r.returncode:
            raise SystemExit(f"the 8B import failed:\n{r.stderr[-3000:]}")
        info = json.loads(r.stdout.strip().splitlines()[-1])
        g = load_graph(path)
    s = resolve_system("pipeline_a100_v100_u280")
    algos = [
        ("h2h (defaults)", lambda: mapping.h2h(g, s)),
        ("HEFT (defaults)", lambda: mapping.heft(g, s)),
        ("memory: optimize_order (defaults)", lambda: memory.optimize_order(g)),
        ("pipeline: split_stages over 8 heterogeneous ranks", lambda: pipeline.split_stages(g, s, devices=EIGHT_RANKS, p=8)),
        ("executor: simulate (defaults)", lambda: executor.simulate(g)),
    ]
    rows = [f"| import (meta build + torch.export + joint program + load_torch) | {info['import_s']:.1f} s "
            f"| peak RSS {info['rss_bytes'] / 2**30:.2f} GiB | 60 s, 8 GiB | "
            f"{'PASS' if info['import_s'] < 60 and info['rss_bytes'] < 8 * 2**30 else 'FAIL'} |"]
    ok = info["import_s"] < 60 and info["rss_bytes"] < 8 * 2**30
    for label, fn in algos:
        t0 = time.perf_counter()
        res = fn()
        t = time.perf_counter() - t0
        ok &= t < 10
        key = next(iter(res.metrics))
        rows.append(f"| {label} | {t:.2f} s | {key} = {res.metrics[key]:.4g} | 10 s | {'PASS' if t < 10 else 'FAIL'} |")
    head = [f"Graph: {info['n_ops']} ops, {info['params'] / 1e9:.2f} B parameters ({info['weight_bytes'] / 2**30:.1f} GiB "
            f"of weights, counted once), {info['flops'] / 1e12:.1f} TFLOP per step, sequence {LLM_SEQ}; system "
            f"`pipeline_a100_v100_u280`. 1-min load {load:.2f} when the section started (the machine is shared: "
            f"figures under load are pessimistic).", "",
            "| step | time | result | limit | verdict |", "|---|---|---|---|---|", *rows]
    return head, ok


def _corpus_rows() -> tuple[list[str], bool]:
    """Every corpus model: build + torch.export + load_torch, once each (inference; joint for five)."""
    try:
        import warnings

        import torch  # noqa: F401
        sys.path.insert(0, str(ROOT / "tests"))
        from torch_corpus import CORPUS
    except ImportError:
        return ["torch, transformers or timm not installed: not measured"], True
    from hetsched.io.torch_import import load_torch

    rows, ok, worst = [], True, 0.0
    for name, (family, build) in CORPUS.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            m, args, kwargs = build()
            g = load_torch(m, args, kwargs=kwargs)
            t = time.perf_counter() - t0
        worst = max(worst, t)
        ok &= t < 10
        rows.append(f"| {name} | {family} | {g.n_ops} | {g.meta['params']:,} | {t:.2f} | {'PASS' if t < 10 else 'FAIL'} |")
    return [f"Slowest: {worst:.2f} s (limit 10 s); 1-min load {os.getloadavg()[0]:.2f} at the end.", "",
            "| model | family | ops | parameters | build + import s | verdict |", "|---|---|---|---|---|---|", *rows], ok


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
    llm, ok_llm = _llm_rows()
    corpus, ok_corpus = _corpus_rows()
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
        "## Models users bring, up to LLM scale (issue 28)",
        "",
        "### Llama-3-8B-shaped training graph (joint forward + backward, built on the meta device)",
        "",
        *llm,
        "",
        "The dashboard-in-Chromium target (every tab of this graph within 5 s) is a later phase's; not measured here.",
        "",
        "### Every corpus model: build + export + import (inference graph, once each)",
        "",
        *corpus,
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
    if not (ok_load and ok_gpt2 and ok_llm and ok_corpus):
        raise SystemExit(1)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--llm-child":
        _llm_child(sys.argv[2])
    else:
        main()
