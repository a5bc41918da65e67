"""The tour notebooks and the dashboard; installed as ``hetsched.notebooks`` (``hetsched lab`` and ``hetsched app`` use them)."""
