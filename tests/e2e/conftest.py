"""The session-wide ``spark`` fixture lives in ``tests/conftest.py`` (shared with collectors)."""
