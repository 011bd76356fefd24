"""The SQL catalog over the state: every checkpoint under some roots as a DuckDB schema,
every store, state variable, change feed and log as a lazily decoded table, and the history
database beside them, in one read-only session with per-query limits.

Example::

    from stateglass.collectors.catalog import SqlSession

    with SqlSession(["sample_checkpoints"]) as session:
        print(session.execute("SELECT * FROM stateglass.tables").table)

Importing this package (or :mod:`.names`, :mod:`.limits`) loads neither DuckDB nor pyarrow:
``--help`` and the dashboard's links name tables without opening a session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from stateglass.collectors.catalog.catalog import KINDS, TableEntry
    from stateglass.collectors.catalog.limits import SqlLimits
    from stateglass.collectors.catalog.session import QueryResult, SqlSession

_HOMES = {
    "KINDS": "catalog",
    "TableEntry": "catalog",
    "SqlLimits": "limits",
    "QueryResult": "session",
    "SqlSession": "session",
}

__all__ = ["KINDS", "QueryResult", "SqlLimits", "SqlSession", "TableEntry"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
