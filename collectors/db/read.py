"""Reading the history database: read-only connections, held only as long as a read.

A reader never writes and never holds the file long: the writer waits for it (and it for the
writer) while the other side has the lock. Every connection reads the schema this release
writes, whatever StateGlass wrote the file
(:func:`~stateglass.collectors.db.schema_versions.read_as_current`).

Example::

    rows = read_query("stateglass.duckdb", "SELECT * FROM batch_durations")
    with reader("stateglass.duckdb") as conn:  # several queries on one connection
        conn.execute("SELECT count(*) FROM checkpoints").fetchall()
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from stateglass.collectors.db.connection import DEFAULT_LOCK_TIMEOUT_S, connect, existing_database
from stateglass.collectors.db.schema_versions import read_as_current

if TYPE_CHECKING:
    import duckdb


@contextmanager
def reader(
    path: str, timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection for one short read, closed afterwards so the writer can go on;
    :class:`~stateglass.collectors.errors.NoDatabase` when there is no database at ``path``."""
    found = existing_database(path)
    conn = connect(found, read_only=True, timeout_s=timeout_s)
    try:
        read_as_current(conn, found)
        yield conn
    finally:
        conn.close()


def read_query(
    path: str, sql: str, params: Sequence[Any] = (), timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
) -> list[tuple[Any, ...]]:
    """Run one SELECT on a read-only connection and return all its rows."""
    with reader(path, timeout_s) as conn:
        return conn.execute(sql, list(params)).fetchall()
