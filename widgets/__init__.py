"""Interactive panels (hetsched.widgets)."""
