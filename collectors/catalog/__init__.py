"""The SQL catalog over the state: every checkpoint under some roots as a DuckDB schema,
every store, state variable, change feed and log as a lazily decoded table, and the history
database beside them, in one read-only session with per-query limits.

Example::

    from stateglass.collectors.catalog import SqlSession

    with SqlSession(["sample_checkpoints"]) as session:
        print(session.execute("SELECT * FROM stateglass.tables").table)
"""

from stateglass.collectors.catalog.catalog import KINDS, TableEntry
from stateglass.collectors.catalog.limits import SqlLimits
from stateglass.collectors.catalog.session import QueryResult, SqlSession

__all__ = ["KINDS", "QueryResult", "SqlLimits", "SqlSession", "TableEntry"]
