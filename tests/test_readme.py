"""The README's promises hold: its two commands are exactly `make lab` and `make test`, they exist
in the Makefile, and its Python quick start runs as written."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_the_two_commands_are_exactly_make_lab_and_make_test():
    assert [b.split() for b in _blocks("bash")][0] == ["make", "lab", "make", "test"]
    makefile = (ROOT / "Makefile").read_text()
    for target in ("lab", "test", "app", "bench", "data"):
        assert re.search(rf"^{target}:", makefile, flags=re.M), f"Makefile has no `{target}` target"


def test_quick_start_runs(tmp_path, monkeypatch):
    (code,) = _blocks("python")
    assert 5 <= len(code.strip().splitlines()) <= 15, "the quick start should stay about ten lines"
    monkeypatch.chdir(tmp_path)  # it writes a trace file into the current directory
    ns: dict = {}
    exec(compile(code, "README.md:quick-start", "exec"), ns)  # noqa: S102 - the point of the test
    ev, fig = ns["ev"], ns["fig"]
    assert ev.metrics["makespan_s"] > 0
    assert (tmp_path / "resnet50_gpu.json").stat().st_size > 1000
    assert len(fig.data) > 0


def test_readme_lists_every_notebook():
    for nb in sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb")):
        assert f"`{nb}`" in README, f"README does not list notebooks/{nb}.ipynb"
