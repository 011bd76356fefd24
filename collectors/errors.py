"""Errors the collectors raise, one branch per kind of problem.

Hierarchy::

    CollectorError               one-line, user-facing: "<path or URL>: <what is wrong>"
    ├── CheckpointError          something about the checkpoint itself
    │   ├── NotACheckpoint       the path is missing or has no checkpoint layout
    │   ├── CorruptFile          a file's bytes do not decode (wraps parsers.errors.ParseError)
    │   ├── UnsupportedCheckpoint  a format version, codec or feature we do not read yet
    │   ├── MissingVersion       a state version cannot be rebuilt from the files present
    │   ├── NotFound             an operator, store, partition or batch that is not there
    │   └── UnsafeArchive        a zip whose entries would escape their directory (zip-slip)
    ├── StorageError             the storage behind a URL failed us; says nothing of the checkpoint
    │   ├── BackendMissing       no client for the scheme (s3fs, adlfs, gcsfs, a Hadoop client)
    │   ├── BadCredentials       credentials missing or rejected
    │   ├── AccessDenied         credentials accepted, permission refused
    │   ├── NoSuchBucket         the bucket or container does not exist
    │   └── StorageUnavailable   unreachable, connection lost, or still throttled after retries
    ├── DatabaseError            StateGlass's own DuckDB file cannot be used
    │   ├── DatabaseBusy         it stayed locked by another process past the timeout
    │   ├── NoDatabase           there is no file at the path: nothing collected there yet
    │   ├── NotAStateGlassDatabase  a DuckDB file StateGlass did not write
    │   └── OlderDatabase        written by an older StateGlass, it lacks what a read needs
    │                            until a writer upgrades it (collectors/db/schema_versions.py)
    ├── BadConfig                a config file or environment variable that cannot be used
    ├── EngineError              the engine, not the checkpoint, failed (no pyspark or Java,
    │                            Spark master unreachable, executors missing a dependency)
    ├── BadProgressPath          a ``--progress`` PATH that is missing or not a directory
    ├── SqlError                 a query of the SQL catalog did not run (path: ``sql``)
    │   ├── QueryRefused         the session's safety switches refused it (files, network,
    │   │                        extensions, configuration, writes into the history)
    │   ├── QueryTimeLimit       stopped at the session's time limit
    │   ├── QueryMemoryLimit     stopped at the session's memory (or spill) limit
    │   └── QueryFailed          DuckDB rejected it: syntax, unknown table or column, types
    ├── InsideCheckpoint         a path given for StateGlass's own files (``--db``, ``-o``) or
    │                            for event logs (``--progress``) lies inside a checkpoint
    └── RewriteError             ``rewrite`` wrote no destination (path: the destination)
        ├── RewriteRefused       refused before writing: destination not empty, a batch in
        │                        flight, a store no writer can write, an unwritable codec
        └── SelfCheckFailed      the destination read back differs from the rows meant

Parser errors are wrapped here with the file's path, so a user always learns which file.

Only a ``CheckpointError`` is the checkpoint's fault: a scan records it as a problem row and
goes on. Every other branch stops the scan before anything is written, so that a half-read
checkpoint is never recorded as scanned and the next scan starts clean. A caller that shows
errors to a user catches :class:`CollectorError`, the one line a user sees (the CLI exits with
status 2 on it). Messages never carry secrets: URLs are canonical (no ``user:password@``, no
query) and option values are redacted.
"""

from __future__ import annotations

from stateglass.parsers.errors import ParseError, UnsupportedFormat


class CollectorError(Exception):
    """Base of every collector error; ``str()`` is the one line shown to a user."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why

    def __str__(self) -> str:
        return f"{self.path}: {self.why}"

    def __reduce__(self) -> tuple[type[CollectorError], tuple[str, str]]:
        # Errors cross process boundaries when partitions are read in parallel.
        return (type(self), (self.path, self.why))


class CheckpointError(CollectorError):
    """Something about the checkpoint itself; a scan records it as a problem and goes on."""


class NotACheckpoint(CheckpointError):
    """The path does not exist or is not a Structured Streaming checkpoint."""


class CorruptFile(CheckpointError):
    """A file inside the checkpoint could not be decoded."""


class UnsupportedCheckpoint(CheckpointError):
    """The checkpoint uses a format or feature this release does not read."""


class MissingVersion(CheckpointError):
    """A state version cannot be rebuilt: a delta or changelog is missing, nothing bridges it."""


class NotFound(CheckpointError):
    """The operator, store, partition or batch asked for is not in the checkpoint."""


class UnsafeArchive(CheckpointError):
    """A zip entry would be written outside its directory."""


class StorageError(CollectorError):
    """The storage behind a URL failed; a scan stops and writes nothing."""


class BackendMissing(StorageError):
    """The scheme's client library (or a Hadoop client for hdfs://) is not installed."""


class BadCredentials(StorageError):
    """No credentials were found, or the storage rejected them."""


class AccessDenied(StorageError):
    """The credentials are valid but may not read this bucket, container or path."""


class NoSuchBucket(StorageError):
    """The bucket or container named in the URL does not exist."""


class StorageUnavailable(StorageError):
    """The endpoint cannot be reached, the connection dropped, or throttling outlasted retries."""


class DatabaseError(CollectorError):
    """StateGlass's own DuckDB file cannot be used (not a DuckDB file, not readable)."""


class DatabaseBusy(DatabaseError):
    """The DuckDB database stayed locked by another process longer than the timeout."""


class NoDatabase(DatabaseError):
    """No database at the path: nothing has been collected into it yet."""


class NotAStateGlassDatabase(DatabaseError):
    """A DuckDB file that StateGlass did not write (it has no ``schema_info``)."""


class OlderDatabase(DatabaseError):
    """Written by an older StateGlass, the database lacks a table, view or column a read
    needs; the first writer to open it upgrades it in place."""


class BadConfig(CollectorError):
    """A config file is missing, not TOML, or has an unknown key or a bad value; or a
    ``STATEGLASS_*`` environment variable has a bad value."""


class EngineError(CollectorError):
    """The Spark engine could not run: ``path`` is the master (or the option) at fault."""


class BadProgressPath(CollectorError):
    """A ``--progress`` path that cannot be an event-log or listener directory."""


class SqlError(CollectorError):
    """A query of the SQL catalog did not run; ``path`` is ``sql``, ``why`` one line."""

    def __init__(self, path: str, why: str = "") -> None:
        # One argument is the usual call (``QueryFailed("no such table")``); two keep
        # ``CollectorError``'s pickling.
        if not why:
            path, why = SQL, path
        super().__init__(path, why)


class QueryRefused(SqlError):
    """The session's safety switches refused the statement (nothing was read or written)."""


class QueryTimeLimit(SqlError):
    """The query ran past the session's time limit and was stopped."""


class QueryMemoryLimit(SqlError):
    """The query needed more memory (or spill space) than the session allows."""


class QueryFailed(SqlError):
    """DuckDB rejected the query: a syntax error, an unknown name, a type mismatch."""


SQL = "sql"


class InsideCheckpoint(CollectorError):
    """A path StateGlass would write (the database, an output file) or read event logs from
    is a checkpoint or lies inside one (:func:`~stateglass.collectors.checkpoints.enclosing.
    refuse_inside_checkpoint`)."""


class RewriteError(CollectorError):
    """``stateglass rewrite`` left no destination; the reason names the path."""


class RewriteRefused(RewriteError):
    """A rewrite refused before writing anything."""


class SelfCheckFailed(RewriteError):
    """The destination, read back, is not the state meant; it was removed."""


def wrap_parse_error(path: str, exc: ParseError) -> CheckpointError:
    """Turn a parser error into the collector error that names ``path``."""
    why = exc.why + (f" (at byte {exc.offset})" if exc.offset is not None else "")
    if isinstance(exc, UnsupportedFormat):
        return UnsupportedCheckpoint(path, why)
    return CorruptFile(path, why)
