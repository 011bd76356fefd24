"""Where a SQL result goes: a text table, CSV, JSON lines or Parquet, a record batch at a time.

State columns print as ``stateglass state`` prints them: each Arrow column gets the Spark type
it stands for (:func:`stateglass.parsers.arrow_types.spark_type`) and its values go through the
same renderers as decoded state rows, so JSON lines compare with Spark's ``toJSON()`` and the
table and CSV split structs into one column per leaf (``key.user``, ``value.count``).

Example::

    with open_result("jsonl", None, "UTC", max_rows=1000) as out:
        out.write(reader)          # a pyarrow.RecordBatchReader
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Sequence
from typing import IO, Any

from stateglass.app.errors import AppError
from stateglass.app.output import (
    TABLE_CELL,
    FlatColumns,
    Output,
    ParquetRowGroups,
    TextOut,
    as_struct,
    cell_text,
    write_text_table,
)
from stateglass.app.render.arrow_rows import decoded_batch
from stateglass.app.render.rows_to_json import render_row
from stateglass.app.render.spark_text import TimeZoneSpec
from stateglass.collectors.catalog.names import CATALOG_SCHEMA
from stateglass.parsers.arrow_types import RepeatedNames, spark_names, spark_type
from stateglass.parsers.errors import ParseError
from stateglass.parsers.state_rows import Column

# The catalog's own listing of its tables (``--tables``, the prompt's ``.tables``).
CATALOG_LISTING = f"SELECT * FROM {CATALOG_SCHEMA}.tables"


def result_columns(schema: Any) -> tuple[Column, ...]:
    """A result's columns, each with the Spark type its Arrow type stands for."""
    return tuple((field.name, spark_type(field.type)) for field in schema)


class ResultWriter(Output):
    """Writes a result's record batches; the file appears at its path only when all went well."""

    def __init__(self, path: str | None, time_zone: str) -> None:
        self.path = path
        self.time_zone = time_zone
        self.rows_written = 0

    def write(self, reader: Any) -> None:
        """Every batch of ``reader`` (a ``pyarrow.RecordBatchReader``)."""
        self.start(reader.schema)
        for batch in reader:
            self.write_batch(batch)
            self.rows_written += batch.num_rows

    def start(self, schema: Any) -> None:
        """The result's schema, before its first batch."""

    def write_batch(self, batch: Any) -> None:
        raise NotImplementedError


class _TextWriter(ResultWriter):
    """A writer of text: stdout (or ``stream``), or a file replaced whole at the end."""

    def __init__(self, path: str | None, time_zone: str, stream: IO[str] | None = None) -> None:
        super().__init__(path, time_zone)
        self.text = TextOut(path, stream)
        self.out: IO[str] = self.text.file
        self.made: dict[tuple[Column, ...], Any] = {}

    def made_for(self, columns: tuple[Column, ...], make: Callable[[], Any]) -> Any:
        """What ``make`` builds for ``columns``, built once: a batch holding one of DuckDB's
        infinities gives its column another type (:func:`decoded_batch`)."""
        found = self.made.get(columns)
        if found is None:
            found = self.made[columns] = make()
        return found

    def close(self) -> None:
        self.text.commit()

    def abort(self) -> None:
        self.text.discard()


class JsonLinesWriter(_TextWriter):
    """One JSON object per row, as Spark's ``toJSON()`` writes it (null columns left out).
    ``names``: the state tables' structs whose field names repeat (``SqlSession.
    repeated_names``), printed with Spark's names (``"sum":…,"sum":…``) as ``stateglass
    state`` prints them."""

    def __init__(
        self, path: str | None, time_zone: str, names: RepeatedNames | None = None
    ) -> None:
        super().__init__(path, time_zone)
        self.names: RepeatedNames = names if names is not None else {}

    def write_batch(self, batch: Any) -> None:
        columns, rows = decoded_batch(batch, self.time_zone)
        render = self.made_for(columns, lambda: self._render(columns))
        lines = [render(row) for row in rows]
        if lines:
            lines.append("")
            self.out.write("\n".join(lines))

    def _render(self, columns: tuple[Column, ...]) -> Callable[[Any], str]:
        shown = [(name, spark_names(dt, self.names)) for name, dt in columns]
        return render_row(as_struct(shown), self.time_zone)


class ListingJsonLines(_TextWriter):
    """One JSON object per row with every column, nulls included: the catalog's listing,
    whose fields a script reads by name (not state, so not Spark's rendering)."""

    def write_batch(self, batch: Any) -> None:
        lines = [
            json.dumps(row, ensure_ascii=False, separators=(",", ":")) for row in batch.to_pylist()
        ]
        if lines:
            lines.append("")
            self.out.write("\n".join(lines))


class CsvWriter(_TextWriter):
    """A header and one line per row; structs split into one column per leaf, lists and
    maps as JSON, timestamps as Spark's text in the session time zone."""

    def start(self, schema: Any) -> None:
        columns = result_columns(schema)
        self.made[columns] = FlatColumns(columns, self.time_zone)
        self.csv = csv.writer(self.out, lineterminator="\n")
        self.csv.writerow(self.made[columns].names)

    def write_batch(self, batch: Any) -> None:
        columns, rows = decoded_batch(batch, self.time_zone)
        cells = self.made_for(columns, lambda: FlatColumns(columns, self.time_zone)).cells
        self.csv.writerows([cell_text(c) for c in cells(row)] for row in rows)


def csv_bytes(table: Any, time_zone: str = "UTC") -> bytes:
    """``table`` (a ``pyarrow.Table``) as ``stateglass sql --format csv`` writes it, in UTF-8.

    The dashboard's download is made here, so that a file saved from the page and one a
    script wrote hold the same text for the same query.

    Example::

        data = csv_bytes(session.execute("SELECT * FROM orders.op0_default").table)
    """
    text = io.StringIO()
    with CsvWriter(None, time_zone, stream=text) as out:
        out.write(table.to_reader())
    return text.getvalue().encode()


class TableWriter(_TextWriter):
    """A fixed-width table of the first ``max_rows`` rows, cells cut at ``TABLE_CELL``."""

    columns: FlatColumns

    def __init__(self, path: str | None, time_zone: str, max_rows: int) -> None:
        super().__init__(path, time_zone)
        self.max_rows = max_rows
        self.rows: list[list[str]] = []
        self.more = False

    def write(self, reader: Any) -> None:
        self.start(reader.schema)
        for batch in reader:
            room = self.max_rows - len(self.rows)
            if batch.num_rows > room:
                # The rest is never fetched: the query stops pulling here.
                self.more = True
                batch = batch.slice(0, room)
            self.write_batch(batch)
            self.rows_written += batch.num_rows
            if self.more:
                break

    def start(self, schema: Any) -> None:
        columns = result_columns(schema)
        self.columns = self.made[columns] = FlatColumns(columns, self.time_zone)

    def write_batch(self, batch: Any) -> None:
        columns, rows = decoded_batch(batch, self.time_zone)
        cells = self.made_for(columns, lambda: FlatColumns(columns, self.time_zone)).cells
        for row in rows:
            texts = (cell_text(c) for c in cells(row))
            self.rows.append(
                [t if len(t) <= TABLE_CELL else t[: TABLE_CELL - 1] + "…" for t in texts]
            )

    def close(self) -> None:
        write_text_table(self.columns.names, self.rows, self.out)
        if self.more:
            self.out.write(f"(stopped at {self.max_rows} rows: --max-rows, or -o FILE)\n")
        super().close()


class ParquetWriter(ResultWriter):
    """Parquet with the result's own Arrow types, written a row group at a time under a
    temporary name, renamed into place when the query ends well."""

    def __init__(self, path: str | None, time_zone: str) -> None:
        if path is None:
            raise AppError("--format parquet needs -o FILE")
        super().__init__(path, time_zone)
        self.final: str = path
        self.file: ParquetRowGroups | None = None

    def start(self, schema: Any) -> None:
        self.file = ParquetRowGroups(self.final, schema)

    def write_batch(self, batch: Any) -> None:
        assert self.file is not None
        self.file.write(batch)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()

    def abort(self) -> None:
        if self.file is not None:
            self.file.abort()


# A comparison of batch_id in the query's text: where a table still read its last batch,
# the comparison did not reach its scan (a cast, a decimal, a subquery), which is worth a note.
_BATCH_COMPARED = re.compile(r"\bbatch_id\b\s*(?:[=<>!]|\bIN\b|\bBETWEEN\b)", re.IGNORECASE)


def unpicked_batch_note(text: str, last_batch_read: Sequence[tuple[str, int]]) -> str | None:
    """A note when ``text`` compares ``batch_id`` yet a state table read its last committed
    batch (``SqlSession.last_batch_read``): the filter then keeps rows only if it names that
    batch, and an empty result would not say why. The command and its prompt print it on
    stderr (``stateglass: note: …``), the SQL page under the result."""
    if not last_batch_read or not _BATCH_COMPARED.search(text):
        return None
    tables = ", ".join(f"{table} (batch {batch})" for table, batch in last_batch_read)
    return (
        f"no batch was picked for {tables}: it read its last committed batch. "
        "batch_id picks another only compared with an integer constant (=, IN, BETWEEN)"
    )


def check_output(fmt: str, path: str | None, time_zone: str) -> None:
    """Refuse an output that cannot be written before any query runs."""
    try:
        TimeZoneSpec(time_zone)
    except ParseError as exc:
        raise AppError(f"--time-zone: {exc.why}") from exc
    if fmt == "parquet" and path is None:
        raise AppError("--format parquet needs -o FILE")


def open_result(
    fmt: str,
    path: str | None,
    time_zone: str,
    max_rows: int,
    listing: bool = False,
    names: RepeatedNames | None = None,
) -> ResultWriter:
    """The writer for ``--format fmt`` into ``path`` (stdout when None); ``listing``: the
    catalog's listing, whose JSON lines keep null fields; ``names``: the session's repeated
    field names, which JSON lines print as Spark does (:class:`JsonLinesWriter`)."""
    check_output(fmt, path, time_zone)
    if listing and fmt == "jsonl":
        return ListingJsonLines(path, time_zone)
    if fmt == "table":
        return TableWriter(path, time_zone, max_rows)
    if fmt == "jsonl":
        return JsonLinesWriter(path, time_zone, names)
    writers: dict[str, Callable[[str | None, str], ResultWriter]] = {
        "csv": CsvWriter,
        "parquet": ParquetWriter,
    }
    return writers[fmt](path, time_zone)
