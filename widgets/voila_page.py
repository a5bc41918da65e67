"""What a Voila server of hetsched's notebooks needs so that its pages ask nothing of other hosts (issue 33).

Voila's "lab" page links two Font Awesome stylesheets from ``cdn.jsdelivr.net``: on a closed network
(a classroom, CI) every page then logs two failed requests. hetsched ships a Voila template,
``hetsched`` (``share/jupyter/voila/templates/hetsched``: the lab page without those links; Voila's
own bundle carries Font Awesome already). Whoever starts Voila (``hetsched app``, ``make app``, the
browser tests, the benchmark, ``scripts/screenshots.py``) passes :func:`voila_options` on its
command line and runs it in :func:`voila_env`, which puts the template where Voila looks when
hetsched runs from a checkout (a wheel installs it under ``share/jupyter`` already).

The other half of a quiet page is in ``pyproject.toml``: a widget front end built against the same
JupyterLab core as Voila's page (no "Unsatisfied version" warning per shared module).

>>> voila_options()
['--template=hetsched']
>>> (template_root() / "voila" / "templates" / TEMPLATE / "index.html.j2").is_file()
True
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Mapping

__all__ = ["TEMPLATE", "template_root", "voila_options", "voila_env"]

#: the template's name (what ``--template`` names)
TEMPLATE = "hetsched"


def template_root() -> Path:
    """The ``share/jupyter`` directory holding ``voila/templates/hetsched``: the installed one (a wheel's
    data files) or the checkout's."""
    for root in (Path(sys.prefix) / "share" / "jupyter", Path(__file__).resolve().parents[1] / "share" / "jupyter"):
        if (root / "voila" / "templates" / TEMPLATE / "index.html.j2").is_file():
            return root
    from hetsched.errors import HetschedError

    raise HetschedError("hetsched's Voila template is missing: reinstall hetsched (pip install hetsched[lab])",
                        field="template")


def voila_options() -> list[str]:
    """Voila command-line options of every hetsched page (run Voila in :func:`voila_env`)."""
    return [f"--template={TEMPLATE}"]


def voila_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default ``os.environ``) with ``JUPYTER_PATH`` leading to hetsched's template."""
    env = dict(os.environ if base is None else base)
    root = str(template_root())
    paths = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    if root not in paths:
        env["JUPYTER_PATH"] = os.pathsep.join([root, *paths])
    return env
