"""No import cycles in the hetsched core (issue 21).

A cycle between two modules means code in the wrong place: one of them holds something both need.
Every import statement counts, also one inside a function (a deferred import hides a cycle from the
interpreter, not from the design), except those under ``if TYPE_CHECKING:``. The failure lists
every strongly connected group of modules with the import lines that tie it together.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1] / "hetsched"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _type_checking_lines(tree: ast.AST) -> set[int]:
    """Line numbers of imports guarded by ``if TYPE_CHECKING:`` (they never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            t = node.test
            name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                for sub in node.body:
                    for n in ast.walk(sub):
                        if isinstance(n, (ast.Import, ast.ImportFrom)):
                            out.add(n.lineno)
    return out


def import_graph() -> nx.DiGraph:
    """Module -> module edges for every import of a hetsched module, with the line that makes it."""
    mods = _modules()
    G = nx.DiGraph()
    G.add_nodes_from(mods)
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        skip = _type_checking_lines(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                for a in node.names:
                    sub = f"{src}.{a.name}"
                    targets.append(sub if sub in mods else src)
            for t in targets:
                # "import hetsched.x.y" imports hetsched.x.y; a name inside a module is that module
                while t and t not in mods and "." in t:
                    t = t.rpartition(".")[0]
                if t in mods and t != name:
                    G.add_edge(name, t)
                    G.edges[name, t].setdefault("lines", []).append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    return G


def cycles(G: nx.DiGraph) -> list[str]:
    """One line per strongly connected group of modules: its modules and the imports inside it."""
    out = []
    for comp in nx.strongly_connected_components(G):
        if len(comp) < 2:
            continue
        sub = G.subgraph(comp)
        ties = "; ".join(f"{u} -> {v} ({', '.join(dict.fromkeys(sub.edges[u, v]['lines']))})" for u, v in sorted(sub.edges))
        out.append(f"{{{', '.join(sorted(comp))}}}: {ties}")
    return sorted(out)


def test_the_walker_sees_deferred_imports_and_finds_a_cycle():
    G = import_graph()
    assert G.has_edge("hetsched.evaluate", "hetsched.clock")
    assert G.has_edge("hetsched.partition.result", "hetsched.evaluate")  # a deferred (in-function) import
    G2 = G.copy()
    G2.add_edge("hetsched.clock", "hetsched.evaluate", lines=["made up:1"])
    assert any("hetsched.clock" in c and "hetsched.evaluate" in c for c in cycles(G2))


def test_no_import_cycles_in_the_core():
    found = cycles(import_graph())
    assert not found, "import cycles in hetsched:\n" + "\n".join(found)
