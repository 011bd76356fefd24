"""DuckDB's errors, and a source's, as the one line a user sees (``collectors.errors``).

DuckDB flattens an exception raised in a Python source into its own multi-line text; the
source's exception is kept on the query's scope and raised as it is, so a purged batch says
what ``stateglass state`` says.
"""

from __future__ import annotations

import re

import duckdb

from stateglass.collectors.catalog.scope import QueryScope
from stateglass.collectors.errors import (
    CollectorError,
    QueryFailed,
    QueryMemoryLimit,
    QueryRefused,
    QueryTimeLimit,
    SqlError,
)

# InvalidInputException texts of a refusal rather than of a bad query.
_REFUSED = ("configuration has been locked", "attached in read-only mode", "disabled by")
# An error DuckDB raised while the rows were being read reaches Python through Arrow's
# stream reader as an OSError whose text is DuckDB's: "<Kind> Error: <message>".
_STREAMED = re.compile(r"(?P<kind>[A-Za-z][A-Za-z ]*?) Error: ")
_STREAMED_KINDS: dict[str, type[duckdb.Error]] = {
    "INTERRUPT": duckdb.InterruptException,
    "Out of Memory": duckdb.OutOfMemoryException,
    "Permission": duckdb.PermissionException,
    "Invalid Input": duckdb.InvalidInputException,
}
# DuckDB's hint on a misspelt name, on the line after its error.
_DID_YOU_MEAN = re.compile(r"^Did you mean .*", re.MULTILINE)


def first_line(exc: BaseException) -> str:
    """The message's first line, without DuckDB's Python traceback detail."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return line.split(". Detail:", 1)[0]


def streamed_error(exc: BaseException) -> duckdb.Error | None:
    """DuckDB's error inside an ``OSError`` raised by a result's Arrow stream (a query that
    failed after its first rows: a time limit, a cast of a value); None for any other."""
    if not isinstance(exc, OSError) or exc.errno is not None:
        return None
    found = _STREAMED.match(str(exc).strip())
    if found is None:
        return None
    kind = _STREAMED_KINDS.get(found.group("kind"), duckdb.Error)
    return kind(str(exc).strip())


def sql_error(
    exc: BaseException, scope: QueryScope | None = None, time_s: float | None = None
) -> BaseException:
    """The exception to raise for ``exc``: a :class:`CollectorError` for anything the query
    or its sources did, ``exc`` itself for anything else (a bug is not hidden)."""
    failure = scope.failure if scope is not None else None
    if isinstance(failure, CollectorError):
        return failure
    if isinstance(exc, CollectorError):
        return exc
    exc = streamed_error(exc) or exc
    if not isinstance(exc, duckdb.Error):
        return exc
    line = first_line(exc)
    if isinstance(exc, duckdb.CatalogException) and (hint := _DID_YOU_MEAN.search(str(exc))):
        line = f"{line} {hint.group().strip()}"
    if isinstance(exc, duckdb.InterruptException):
        limit = f" of {time_s:g}s" if time_s else ""
        return QueryTimeLimit(f"stopped at the time limit{limit}")
    if isinstance(exc, duckdb.OutOfMemoryException):
        return QueryMemoryLimit(f"stopped at the memory limit: {line}")
    if isinstance(exc, duckdb.PermissionException) or (
        # ATTACH of the history file again (read-write) while it is attached read-only.
        isinstance(exc, duckdb.ResourceInUseException) and "already attached" in line
    ):
        return QueryRefused(f"refused: {line}")
    if isinstance(exc, duckdb.InvalidInputException) and any(s in line for s in _REFUSED):
        return QueryRefused(f"refused: {line}")
    if failure is not None:
        return QueryFailed(f"reading a table failed: {first_line(failure)}")
    return QueryFailed(line)


__all__ = ["SqlError", "first_line", "sql_error", "streamed_error"]
