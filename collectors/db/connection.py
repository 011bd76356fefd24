"""Opening the history database: one short connection at a time, read-write or read-only.

DuckDB lets one process hold a database file read-write, or any number of processes hold it
read-only, never both. So nobody keeps the file open: the writer opens it for one short
transaction and closes it, readers open it read-only for one query (or one page) and close it,
and both retry with backoff while the other side holds the lock.

Example::

    path = existing_database("~/.stateglass/stateglass.duckdb")  # NoDatabase when missing
    conn = connect(path, read_only=True, timeout_s=DEFAULT_LOCK_TIMEOUT_S)
"""

from __future__ import annotations

import os
import time

# The engine alone, without the `duckdb` package's Python layer (its relational API and a
# version look-up through importlib.metadata): 0.12 CPU s at every start, a tenth of a whole
# `collect` process on 2M keys. The classes are the package's own
# (`duckdb.IOException is _duckdb.IOException`), so callers may catch either. A DuckDB that
# no longer ships `_duckdb` gets the package.
try:
    import _duckdb as duckdb
except ImportError:  # pragma: no cover - duckdb is pinned in requirements.txt
    import duckdb  # type: ignore[no-redef]

from stateglass.collectors.errors import DatabaseBusy, DatabaseError, NoDatabase

# How long a writer or reader waits for the other side's lock before giving up.
DEFAULT_LOCK_TIMEOUT_S = 60.0

# DuckDB 2 names a connection of the other mode in this process a resource conflict.
_OPEN_ERRORS = (duckdb.IOException, duckdb.ConnectionException, duckdb.ResourceInUseException)


def database_path(path: str) -> str:
    """``path`` as every connection names it: absolute, ``~`` expanded."""
    return os.path.abspath(os.path.expanduser(path))


def existing_database(path: str) -> str:
    """The absolute path of the database at ``path``; :class:`NoDatabase` when there is no
    file there (a command that only reads has nothing to read before a collect)."""
    found = database_path(path)
    if not os.path.isfile(found):
        raise NoDatabase(found, "no such database; run `stateglass collect` first")
    return found


def _is_lock_conflict(exc: Exception) -> bool:
    """A lock held by another process, or a connection of the other mode in this process."""
    if isinstance(exc, duckdb.ResourceInUseException):
        return True
    text = str(exc)
    return isinstance(exc, duckdb.IOException | duckdb.ConnectionException) and (
        "lock" in text or "different configuration" in text
    )


def connect(path: str, read_only: bool, timeout_s: float) -> duckdb.DuckDBPyConnection:
    """Open ``path``, retrying with backoff while the other side holds it."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            conn = duckdb.connect(path, read_only=read_only)
        except _OPEN_ERRORS as exc:
            if not _is_lock_conflict(exc):
                # Not a DuckDB file, or not readable: one line naming it, not a traceback.
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise DatabaseError(path, f"cannot open the database ({first})") from exc
            if time.monotonic() >= deadline:
                mode = "read" if read_only else "write"
                raise DatabaseBusy(
                    path, f"still locked after {timeout_s:.0f}s, cannot {mode}"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
            continue
        # DuckDB draws its own progress bar on stderr for a query over 2 s, in the middle of
        # the CLI's progress and the servers' logs; it is a per-connection setting.
        conn.execute("SET enable_progress_bar = false")
        return conn
