"""The files hetsched ships, found the same way wherever it is installed.

Bundled graphs and systems with the graph JSON Schema (``data/``) and the notebooks with the
dashboard (``notebooks/``) sit at the top of the source tree, as the design card has it, and install
inside the package as ``hetsched.data`` and ``hetsched.notebooks`` (setuptools ``package-dir``, as
``widgets/`` installs as ``hetsched.widgets``). Everything that reads them goes through this module,
which asks :mod:`importlib.resources`: a name loads the same from a wheel in site-packages, from an
editable install of a checkout (``make venv``), or from a zip.

>>> "resnet50_b1" in bundled("graphs"), "cpu_gpu_fpga" in bundled("systems")
(True, True)
>>> bundled_file("systems", "cpu_gpu_fpga").name
'cpu_gpu_fpga.yaml'
>>> bundled_file("graphs", "no_such_graph") is None
True
>>> notebooks()[:2]
['00_tour', '01_mapping']
>>> (data_root() / "graph.schema.json").is_file()  # the graph JSON Schema, for editors and validators
True
"""

from __future__ import annotations

import site
import sysconfig
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from .errors import HetschedError

__all__ = ["KINDS", "data_root", "bundled", "bundled_file", "notebooks_root", "notebooks", "notebook_file",
           "outside_site_packages", "source_dir"]

#: the kinds of bundled file: folder under ``data/`` -> file suffix
KINDS = {"graphs": ".json", "systems": ".yaml"}
DATA_PACKAGE, NOTEBOOKS_PACKAGE = "hetsched.data", "hetsched.notebooks"


def data_root() -> Traversable:
    """The bundled data folder (``data/`` of a checkout, ``hetsched/data`` of a wheel)."""
    return files(DATA_PACKAGE)


def _suffix(kind: str) -> str:
    if kind not in KINDS:
        raise HetschedError(f"unknown kind of bundled file {kind!r}: expected one of {sorted(KINDS)}", field="kind")
    return KINDS[kind]


def bundled(kind: str) -> list[str]:
    """Sorted names (file names without the suffix) of the bundled files of ``kind`` (``graphs``, ``systems``)."""
    suffix, folder = _suffix(kind), data_root() / kind
    if not folder.is_dir():
        return []
    return sorted(f.name[: -len(suffix)] for f in folder.iterdir() if f.name.endswith(suffix) and f.is_file())


def bundled_file(kind: str, name: str) -> Traversable | None:
    """The bundled file ``name`` of ``kind`` (``name`` without its suffix), or ``None`` when there is none.

    Read it with ``.read_text()``, or ``with importlib.resources.as_file(f) as path:`` where a path
    is needed.
    """
    suffix = _suffix(kind)
    if not name or "/" in name or "\\" in name or name.startswith("."):
        return None  # a bare name only: never a way out of the data folder
    f = data_root() / kind / f"{name}{suffix}"
    return f if f.is_file() else None


def notebooks_root() -> Traversable:
    """The folder of the tour notebooks and the dashboard."""
    return files(NOTEBOOKS_PACKAGE)


def notebooks() -> list[str]:
    """Sorted names (without ``.ipynb``) of the shipped notebooks, the dashboard among them."""
    return sorted(f.name[: -len(".ipynb")] for f in notebooks_root().iterdir() if f.name.endswith(".ipynb"))


def notebook_file(name: str) -> Traversable:
    """The shipped notebook ``name`` (with or without ``.ipynb``); an unknown name is a ``HetschedError``."""
    stem = name[: -len(".ipynb")] if name.endswith(".ipynb") else name
    if stem not in notebooks():
        raise HetschedError(f"no notebook {name!r} ships with hetsched: there are {notebooks()}", field="notebook")
    return notebooks_root() / f"{stem}.ipynb"


def _install_dirs() -> list[Path]:
    """Folders pip installs packages into (this interpreter's site-packages, the user's, the base's)."""
    dirs = {sysconfig.get_paths()[k] for k in ("purelib", "platlib")}
    dirs.update(getattr(site, "getsitepackages", lambda: [])())
    if site.ENABLE_USER_SITE and site.USER_SITE:
        dirs.add(site.USER_SITE)
    return [Path(d).resolve() for d in dirs if d]


def outside_site_packages(path: str | Path, what: str) -> Path:
    """``path`` resolved, checked not to lie in an installed package folder (site-packages).

    Whatever hetsched writes (regenerated data, copies of the notebooks) goes to a checkout or a
    folder the user chose, never into an installed package: that is a ``HetschedError`` naming ``what``.

    >>> import tempfile; outside_site_packages(tempfile.gettempdir(), "notebooks").is_dir()
    True
    """
    p = Path(path).resolve()
    if any(p.is_relative_to(d) for d in _install_dirs()):
        raise HetschedError(f"{what}: {p} lies in an installed package folder (site-packages); hetsched never "
                            "writes there: name another folder", field="folder")
    return p


def source_dir(root: Traversable | None = None) -> Path:
    """``root`` (default: the bundled data folder) as a folder of a source checkout that may be rewritten.

    What regenerates bundled files (``make data``) writes into the checkout; an installed copy in
    site-packages is never written to: that is a ``HetschedError`` asking for an output folder.

    >>> source_dir().name
    'data'
    """
    root = data_root() if root is None else root
    if not isinstance(root, Path) or not root.is_dir():
        raise HetschedError(f"the bundled files at {root} are not a folder on disk; give an output folder", field="out")
    return outside_site_packages(root, "bundled files of an installed hetsched (give an output folder)")
