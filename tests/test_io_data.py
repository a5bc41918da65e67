"""Bundled zoo graphs: up to date with the builders, documented, small, loadable by name."""

from __future__ import annotations

import pytest

from hetsched.io import DATA_DIR, bundled_graphs, load_graph
from hetsched.io.make_data import BUNDLE, make_data

GRAPHS = DATA_DIR / "graphs"


def test_bundled_files_are_regenerated_byte_for_byte(tmp_path):
    rows = make_data(tmp_path / "graphs", readme=False)
    assert len(rows) == len(BUNDLE)
    for stem, _, _ in BUNDLE:
        fresh = (tmp_path / "graphs" / f"{stem}.json").read_bytes()
        shipped = GRAPHS / f"{stem}.json"
        assert shipped.exists(), f"{stem}.json missing: run `make data`"
        assert shipped.read_bytes() == fresh, f"{stem}.json is stale: run `make data`"


def test_make_data_is_deterministic(tmp_path):
    make_data(tmp_path / "a", readme=False)
    make_data(tmp_path / "b", readme=False)
    for p in sorted((tmp_path / "a").iterdir()):
        assert p.read_bytes() == (tmp_path / "b" / p.name).read_bytes()


@pytest.mark.parametrize("stem,model,kw", BUNDLE, ids=[b[0] for b in BUNDLE])
def test_bundled_graph_meta(stem, model, kw):
    g = load_graph(stem)  # bare name -> data/graphs/<name>.json
    assert stem in bundled_graphs()
    assert g.meta["model"] == model and g.meta["batch"] == kw["batch"]
    assert bool(g.meta.get("training")) == bool(kw.get("training"))
    assert f"b{kw['batch']}" in stem and ("_train_" in stem) == bool(kw.get("training"))
    if "seq_len" in kw:
        assert g.meta["seq_len"] == kw["seq_len"] and f"s{kw['seq_len']}" in stem
    assert g.meta["params"] > 0 and g.meta["source"]


def test_readme_documents_every_bundled_graph():
    text = (DATA_DIR / "README.md").read_text()
    for stem, model, _ in BUNDLE:
        assert f"| {stem}.json |" in text, stem
        assert f"| {model} |" in text
    assert "zoo-table:start" in text and "zoo-table:end" in text


def test_data_stays_small():
    total = sum(p.stat().st_size for p in GRAPHS.glob("*.json"))
    assert total < 30e6


def test_other_table_reads_foreign_meta(tmp_path):
    from hetsched.io.generators import chain
    from hetsched.io import save_graph
    from hetsched.io.make_data import other_table

    g = chain(3)
    g.meta.update(builder="mod.fn", purpose="a test graph")
    save_graph(g, tmp_path / "x_graph.json")
    save_graph(chain(2), tmp_path / "resnet50_b1.json")
    (tmp_path / "broken.json").write_text("{not json")
    lines = other_table(tmp_path, {"resnet50_b1.json"}).splitlines()
    assert lines[2:] == ["| x_graph.json | 3 | 4 | `mod.fn` | a test graph |"]
