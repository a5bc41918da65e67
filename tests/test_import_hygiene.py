"""The core imports without Jupyter: importing hetsched and every core submodule pulls in no
ipywidgets / IPython / jupyter / voila / anywidget / comm / traitlets (issue 2, ARCHITECTURE.md).

Run in a fresh interpreter: the test process itself has Jupyter modules loaded by nbmake and the
widget doctests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

# Top-level module names that only the Jupyter / widget layer may bring in.
FORBIDDEN = ("ipywidgets", "IPython", "ipykernel", "jupyter", "voila", "anywidget", "comm", "traitlets", "nbformat")

_PROBE = textwrap.dedent(
    """
    import importlib, json, pkgutil, sys
    import hetsched
    imported, failed = [], {}
    for info in pkgutil.walk_packages(hetsched.__path__, "hetsched."):
        name = info.name
        if name == "hetsched.widgets" or name.startswith("hetsched.widgets.") or name.endswith(".__main__"):
            continue  # the widget layer may use Jupyter; __main__ would run the CLI
        try:
            importlib.import_module(name)
            imported.append(name)
        except ImportError as e:  # an optional extra (onnx, torch) may be absent: record, judge outside
            failed[name] = repr(e)
    print(json.dumps({"imported": imported, "failed": failed, "modules": sorted(sys.modules)}))
    """
)


def _probe() -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"importing the core failed:\n{out.stderr[-3000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def _offenders(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in FORBIDDEN or m.split(".")[0].startswith("jupyter")]


def test_core_imports_no_jupyter_modules():
    res = _probe()
    assert "hetsched.graph" in res["imported"] and "hetsched.evaluate" in res["imported"]
    # Every core module imports; the only acceptable failure is an absent optional third-party
    # extra (named in the error), never a hetsched module that is broken.
    for name, err in res["failed"].items():
        assert "No module named 'hetsched" not in err and "cannot import name" not in err, f"{name}: {err}"
        assert any(x in err for x in ("onnx", "torch", "dask", "distributed")), f"{name} failed to import: {err}"
    bad = _offenders(res["modules"])
    assert bad == [], f"the core pulled in Jupyter-layer modules: {bad[:20]}"


def test_probe_would_catch_a_widget_import():
    # The check is live: importing the widget layer does bring those modules in.
    code = "import sys, json; from hetsched.widgets import Panel; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ipywidgets" in {m.split(".")[0] for m in _offenders(json.loads(out.stdout.strip().splitlines()[-1]))}


# -- privacy is real: no module reads another module's underscore names (issue 29) ---------------
ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _underscore_uses(source: str, module: str, is_package: bool = False) -> list[str]:
    """``from m import _x`` (or through a private module) and ``m._x`` on a name bound to anything
    imported from the package, in one module's source; ``module`` is its dotted name. A base class's
    hook called on ``self`` (``Result._replay(self, k)`` in a subclass) is the subclass protocol,
    not a use of another module's privates."""
    import ast

    tree = ast.parse(source)
    bound: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            if src.split(".")[0] != "hetsched":
                continue
            for a in node.names:
                if _private(a.name) or any(map(_private, src.split("."))):
                    found.append(f"line {node.lineno}: from {src} import {a.name}")
                bound.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "hetsched":
                    if any(map(_private, a.name.split("."))):
                        found.append(f"line {node.lineno}: import {a.name}")
                    bound.add(a.asname or a.name.split(".")[0])
    on_self = {id(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call) and c.args
               and isinstance(c.args[0], ast.Name) and c.args[0].id == "self"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            if id(node) in on_self:
                continue
            v = node.value
            while isinstance(v, ast.Attribute):
                v = v.value
            if isinstance(v, ast.Name) and v.id in bound:
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_imports_another_modules_underscore_names():
    bad = {}
    for top, dotted in (("hetsched", "hetsched"), ("widgets", "hetsched.widgets")):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = [dotted, *path.relative_to(ROOT / top).with_suffix("").parts]
            pkg = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if pkg else parts)
            uses = _underscore_uses(path.read_text(encoding="utf-8"), name, pkg)
            if uses:
                bad[str(path.relative_to(ROOT))] = uses
    assert not bad, f"underscore names used across modules (make them public, or keep them in one module): {bad}"


def test_the_underscore_scan_would_catch_each_form():
    src = ("from .engine import _x\nfrom . import engine\nimport hetsched.mapping.engine as e\nengine._y\ne._z\n"
           "from ..results import (Step,\n    _w)\nfrom ._hidden import f\nfrom .engine import __all__\nimport os\nos._exit\n"
           "from ..results import Result\nclass R(Result):\n    def _replay(self, k):\n        return Result._replay(self, k)\n"
           "Result._replay(other, 0)\n")
    found = _underscore_uses(src, "hetsched.mapping.h2h")
    assert [f.split(": ", 1)[1] for f in found] == [
        "from hetsched.mapping.engine import _x", "from hetsched.results import _w", "from hetsched.mapping._hidden import f",
        "engine._y", "e._z", "Result._replay"]
