"""Bundled graphs and systems; installed as ``hetsched.data`` (read them through ``hetsched.resources``)."""
