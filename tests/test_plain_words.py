"""What a user of the package reads names each patent by what it does (issue 22).

The five patent texts live outside the package (a pip user does not have them), and their file
numbers mean nothing to a class: docstrings that ``help()`` shows, CLI help, the bundled graphs'
``meta``, the benchmark pages and the notebooks must say "the compute-first mapping patent", not
"seed 000" or a path to the text. Notebook links to ``docs/patents.md`` break under Voila and for a
pip user, so each one also names the document in words.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: a patent's seed number or file, in any of the spellings that were used
SEED = re.compile(r"\bseed[ -]?00\d\b|shared/seeds|\b00[0-4]_[0-9a-f]{16}\b", re.IGNORECASE)
DOC_NAME = "The five patents behind hetsched"


def _hits(paths) -> list[str]:
    out = []
    for p in paths:
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            if SEED.search(line):
                out.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    return out


def test_the_detector_catches_every_spelling():
    for s in ("seed 004", "Seed-000 claims", "seed002", "../shared/seeds/x.txt", "patent ``000_023dd0683ad424ca.txt``"):
        assert SEED.search(s), s
    for s in ("random seed 0", "seed=1", "topcuoglu(n, seed=1)", "seeded (seed 0, stage s uses seed 1000*seed+s)"):
        assert not SEED.search(s), s


@pytest.mark.parametrize("where", ["hetsched", "widgets"])
def test_package_source_has_no_seed_numbers(where):
    # source text, not only docstrings: CLI help strings and comments a reader of help() may follow too
    assert _hits(sorted((ROOT / where).rglob("*.py"))) == []


def test_bundled_data_and_benchmark_pages_have_no_seed_numbers():
    paths = [*sorted((ROOT / "data" / "graphs").glob("*.json")), ROOT / "data" / "README.md",
             *sorted((ROOT / "bench").glob("*.py")), *sorted((ROOT / "bench" / "results").glob("*.md")),
             ROOT / "docs" / "benchmarks.md"]
    assert _hits(paths) == []


def test_executor_graphs_say_their_purpose_in_words():
    from hetsched.executor.graphs import BUNDLED

    for name in BUNDLED:
        meta = json.loads((ROOT / "data" / "graphs" / f"{name}.json").read_text())["meta"]
        assert meta["purpose"].startswith("the executor patent: "), (name, meta["purpose"])


def test_notebooks_name_the_patent_page_where_they_link_it():
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 8
    linked = 0
    for nb in notebooks:
        for cell in json.loads(nb.read_text(encoding="utf-8"))["cells"]:
            text = "".join(cell["source"])
            assert not SEED.search(text), (nb.name, SEED.search(text).group(0))
            if "patents.md" in text:
                linked += 1
                assert DOC_NAME in text, (nb.name, text[:200])
    assert linked >= 7  # notebooks 00-06 and the dashboard cite the patents


def test_the_named_page_is_that_document():
    assert (ROOT / "docs" / "patents.md").read_text(encoding="utf-8").startswith(f"# {DOC_NAME}")
