"""A SQL session over every checkpoint under some roots, and the history database, in DuckDB.

The session is complete when constructed: it finds the checkpoints, connects an in-memory
DuckDB, attaches the history read-only, registers one lazy source per table and a view over
each, then switches off everything a query could reach the world with, sets the limits, and
locks the configuration last (the order matters: ``docs/design/sql-catalog.md``).

Example::

    with SqlSession(["/data/checkpoints"], history="~/.stateglass/stateglass.duckdb") as s:
        for entry in s.tables():
            print(entry.schema, entry.table, entry.kind)
        print(s.execute("SELECT count(*) FROM orders.op0_default").table)
        with s.stream("SELECT * FROM orders.op0_default WHERE partition_id = 3") as reader:
            for batch in reader:
                ...

One session is one DuckDB connection, used by one thread at a time and never through
``cursor()`` (a cursor sees no registered source, and ``interrupt()`` must reach the
connection that runs the query).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from stateglass.collectors.catalog.catalog import Catalog, TableEntry, build_catalog
from stateglass.collectors.catalog.failures import sql_error
from stateglass.collectors.catalog.limits import SqlLimits
from stateglass.collectors.catalog.names import HISTORY, quoted
from stateglass.collectors.catalog.scope import Decoded, DecodedCache, QueryScope
from stateglass.collectors.checkpoints.discover import Limits
from stateglass.collectors.db.connection import DEFAULT_LOCK_TIMEOUT_S, connect, existing_database
from stateglass.collectors.errors import DatabaseError
from stateglass.parsers.arrow_types import RepeatedNames
from stateglass.parsers.state_arrow import TextForm, plain_text

if TYPE_CHECKING:
    from stateglass.collectors.catalog.spark_decoding import SparkDecoding

Warn = Callable[[str], None]


@dataclass(frozen=True)
class QueryResult:
    """The rows of one query (at most ``max_rows``), and whether more were left unread."""

    table: pa.Table
    truncated: bool
    seconds: float


# Arrow has no time of day with an offset: DuckDB hands a TIMETZ over as its local time
# and the offset is lost. DuckDB's text of it (``10:00:00+02``) keeps both.
_TIMETZ = re.compile(r"\bTIME WITH TIME ZONE\b")


def with_offsets_kept(relation: duckdb.DuckDBPyRelation) -> duckdb.DuckDBPyRelation:
    """``relation`` with every TIMETZ in its columns (nested ones too) as DuckDB's text."""
    types = [str(t) for t in relation.types]
    if not any(_TIMETZ.search(t) for t in types):
        return relation
    # By position: a result may repeat a column's name.
    picks = [
        f"CAST(#{i} AS {_TIMETZ.sub('VARCHAR', t)}) AS {quoted(name)}"
        if _TIMETZ.search(t)
        else f"#{i}"
        for i, (name, t) in enumerate(zip(relation.columns, types, strict=True), start=1)
    ]
    return relation.project(", ".join(picks))


class SqlSession:
    """Read-only SQL over checkpoints and their history, each query under :class:`SqlLimits`.

    ``roots`` are checkpoints or folders (or URL prefixes) of them, searched as ``collect``
    searches (``discovery`` bounds it). ``history`` is the StateGlass database to attach as
    ``history`` (None: none). ``copy_history`` attaches a private copy instead of the file,
    for long-lived sessions (a notebook, the dashboard): a session holding the file would
    keep the collector from writing. ``text_form`` renders types Arrow has no counterpart for
    (calendar intervals, variants); the CLI passes Spark's JSON text. ``spark`` decodes the
    store partitions a query reads on a Spark cluster instead of here (``--engine spark``);
    the session closes it with itself.
    """

    def __init__(
        self,
        roots: Sequence[str],
        *,
        history: str | None = None,
        limits: SqlLimits | None = None,
        copy_history: bool = False,
        discovery: Limits | None = None,
        text_form: TextForm = plain_text,
        warn: Warn | None = None,
        spark: SparkDecoding | None = None,
    ) -> None:
        self.limits = limits or SqlLimits()
        self.spark = spark
        self._scope: QueryScope | None = None
        self._loose: QueryScope | None = None
        self.last_decoded: list[Decoded] = []
        # The last query's state tables read at their last batch, no scan of them picking one.
        self.last_batch_read: list[tuple[str, int]] = []
        self._tmp = tempfile.mkdtemp(prefix="stateglass-sql-")
        try:
            self._con = duckdb.connect(
                ":memory:",
                config={
                    "temp_directory": os.path.join(self._tmp, "spill"),
                    "threads": self.limits.threads,
                },
            )
            if history is not None:
                self._attach_history(history, copy_history)
            self.decoded = DecodedCache(self.limits.cache_bytes)
            self.catalog: Catalog = build_catalog(
                self._con,
                roots,
                discovery,
                text_form,
                self._current_scope,
                warn,
                self.decoded,
                spark,
                self.limits.decoders,
                self.limits.remote_decoders,
            )
            self._lock_down()
        except BaseException:
            self.close()
            raise

    # ---- set-up ---------------------------------------------------------------------------

    def _attach_history(self, path: str, copy: bool) -> None:
        found = existing_database(path)
        if copy:
            found = self._copy_history(found)
        deadline = time.monotonic() + DEFAULT_LOCK_TIMEOUT_S
        while True:
            try:
                self._con.execute(f"ATTACH {_literal(found)} AS {HISTORY} (READ_ONLY)")
                return
            except duckdb.IOException as exc:
                if "lock" not in str(exc) or time.monotonic() >= deadline:
                    why = str(exc).splitlines()[0]
                    raise DatabaseError(found, f"cannot attach ({why})") from exc
                time.sleep(0.1)

    def _copy_history(self, path: str) -> str:
        """A copy of the history taken while holding a read-only connection (so no writer
        is half-way through it), in the session's private folder."""
        held = connect(path, read_only=True, timeout_s=DEFAULT_LOCK_TIMEOUT_S)
        try:
            target = os.path.join(self._tmp, "history.duckdb")
            shutil.copyfile(path, target)
            if os.path.exists(path + ".wal"):
                shutil.copyfile(path + ".wal", target + ".wal")
            return target
        finally:
            held.close()

    def _lock_down(self) -> None:
        limits = self.limits
        # The backstop for a relation fetched outside this object's methods (a notebook's
        # ``.df()`` later): DuckDB's own limit, a little past the session's.
        execution_ms = int(limits.time_s * 1000) + 1000
        for statement in (
            "SET enable_external_access = false",
            "SET autoinstall_known_extensions = false",
            "SET autoload_known_extensions = false",
            f"SET memory_limit = '{limits.memory_bytes}B'",
            f"SET max_temp_directory_size = '{limits.temp_bytes}B'",
            f"SET max_execution_time = {execution_ms}",
            "SET enable_progress_bar = false",
            "SET lock_configuration = true",
        ):
            self._con.execute(statement)

    # ---- queries --------------------------------------------------------------------------

    def _current_scope(self) -> QueryScope:
        if self._scope is not None:
            return self._scope
        # A relation fetched outside this object's methods: a scope per scan, the last one
        # kept so that :meth:`error` can say what its source raised.
        self._loose = QueryScope(None, None)
        return self._loose

    def tables(self) -> list[TableEntry]:
        """Every table of the catalog, checkpoints' and history's; decodes nothing."""
        return list(self.catalog.entries)

    @property
    def repeated_names(self) -> RepeatedNames:
        """The state tables' structs whose field names repeat (aggregation buffers: ``sum``
        twice), by the unique names their columns have here (``sum``, ``sum_1``) -> Spark's;
        it grows as schemas register. JSON lines print state as Spark does with it."""
        return self.catalog.repeated_names

    def schemas(self) -> dict[str, str]:
        """Checkpoint schema name → the checkpoint's path as given."""
        return dict(self.catalog.schemas)

    def columns(self, schema: str, table: str) -> list[tuple[str, str]]:
        """``(name, DuckDB type)`` of each column of ``schema.table``."""
        self.catalog.lazy.open([schema])
        rows = self._con.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_catalog <> 'temp' AND table_schema = ? AND table_name = ? "
            "ORDER BY ordinal_position",
            [schema, table],
        ).fetchall()
        return [(str(n), str(t)) for n, t in rows]

    @contextmanager
    def _running(self) -> Iterator[QueryScope]:
        """One query's scope and timer; a failure inside leaves as its one-line error."""
        scope = QueryScope(time.monotonic() + self.limits.time_s, self.limits.time_s)
        self._scope = scope
        timer = threading.Timer(self.limits.time_s, self._con.interrupt)
        timer.daemon = True
        timer.start()
        try:
            try:
                yield scope
            except BaseException as exc:
                mapped = sql_error(exc, scope, self.limits.time_s)
                if mapped is exc:
                    raise
                raise mapped from None
        finally:
            timer.cancel()
            timer.join()
            self._scope = None
            self.last_decoded = scope.decoded
            # A table also read at a picked batch was read at its last one on purpose
            # (``… EXCEPT SELECT key FROM t WHERE batch_id = 3``): only the others are news.
            self.last_batch_read = list(
                dict.fromkeys(r for r in scope.last_batch_read if r[0] not in scope.batch_picked)
            )

    @contextmanager
    def stream(self, sql: str) -> Iterator[pa.RecordBatchReader]:
        """The rows of ``sql`` as a reader, under the time limit until the block ends.

        Raises a one-line :class:`~stateglass.collectors.errors.CollectorError`: a
        ``SqlError`` (refused, time or memory limit, a bad query) or the checkpoint's own
        error (a purged batch, a corrupt file) as ``stateglass state`` says it.
        """
        with self._running():
            self.catalog.lazy.open_named(sql)
            relation = self._con.sql(sql)
            if relation is None:
                yield pa.RecordBatchReader.from_batches(pa.schema([]), iter(()))
                return
            reader = with_offsets_kept(relation).to_arrow_reader()
            try:
                yield reader
            finally:
                # A result left open blocks the connection's next query ("drain or destroy
                # it"); a block that read only some rows ends the query here.
                reader.close()

    def sql(self, text: str) -> duckdb.DuckDBPyRelation | None:
        """A lazy relation over ``text``, for notebooks (``.df()``, ``.arrow()``, ``.pl()``);
        None for a statement without rows.

        Statements that act at once (``SET``, ``COPY``, ``ATTACH``…) and names that do not
        bind fail here, as one line. A relation runs again at every fetch, outside this
        session's timer (DuckDB's locked ``max_execution_time`` still bounds it): map an
        error raised by a fetch with :meth:`error`.
        """
        with self._running():
            self.catalog.lazy.open_named(text)
            return self._con.sql(text)

    def error(self, exc: BaseException) -> BaseException:
        """The one-line error for ``exc``, raised by a relation fetched outside this session's
        methods (``exc`` itself when it is not DuckDB's or a source's)."""
        return sql_error(exc, self._loose, self.limits.time_s)

    def execute(self, sql: str, max_rows: int | None = None) -> QueryResult:
        """The rows of ``sql``, at most ``max_rows`` (None: all), in one Arrow table.

        Rows in Python are outside DuckDB's memory limit: front ends pass ``max_rows``, or
        use :meth:`stream` to write them out a batch at a time.
        """
        started = time.monotonic()
        batches: list[pa.RecordBatch] = []
        truncated = False
        with self.stream(sql) as reader:
            schema = reader.schema
            count = 0
            for batch in reader:
                if max_rows is not None and count + batch.num_rows > max_rows:
                    batches.append(batch.slice(0, max_rows - count))
                    truncated = True
                    break
                batches.append(batch)
                count += batch.num_rows
        table = pa.Table.from_batches(batches, schema=schema)
        return QueryResult(table, truncated, time.monotonic() - started)

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        """The DuckDB connection, for the notebook API's relations. A relation runs again at
        every fetch, outside this session's timer: only DuckDB's ``max_execution_time``
        (set, and locked) bounds it. Every checkpoint is registered first: a statement run
        on it directly is not seen before it runs."""
        self.catalog.lazy.open(self.catalog.lazy.waiting)
        return self._con

    # ---- life -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection and remove the private folder (spill files, history copy)
        and the Spark decoding's scratch folder (unless it is kept)."""
        con = getattr(self, "_con", None)
        if con is not None:
            con.close()
        shutil.rmtree(self._tmp, ignore_errors=True)
        if self.spark is not None:
            self.spark.close()

    def __enter__(self) -> SqlSession:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


__all__ = ["QueryResult", "SqlSession", "TableEntry", "quoted"]
