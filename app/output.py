"""Where rows go: JSON lines (Spark's toJSON shape), a text table, or Parquet.

Sinks take the raw stored items and decode them with the store's :class:`RowCodec`, so that
JSON lines can go from bytes to text in one generated step.

Example::

    with open_sink("jsonl", None, source.row_codec, "UTC") as sink:
        for partition in source.partitions:
            sink.write_state_partition(source, partition, version)
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Self

from stateglass.app.atomic import AtomicText, put_in_place, temp_name
from stateglass.app.errors import AppError, OutputError
from stateglass.app.render.arrow_values import arrow_value
from stateglass.app.render.bytes_to_json import (
    ChainEncoder,
    row_json_encoder,
    state_blob_encoder,
    state_chain_encoder,
    state_line_encoder,
    state_lines_encoder,
    state_prefixed_blob_encoder,
)
from stateglass.app.render.rows_to_json import json_text, render_row, to_python
from stateglass.app.render.spark_text import EPOCH_MS_FIELDS, TimeZoneSpec, epoch_ms_text
from stateglass.parsers.arrow_types import arrow_type, unique_names
from stateglass.parsers.errors import ParseError
from stateglass.parsers.sparktypes import DataType, StructField, StructType
from stateglass.parsers.state_arrow import change_columns, state_columns
from stateglass.parsers.state_rows import Column, Row, RowCodec

if TYPE_CHECKING:
    from stateglass.collectors.checkpoints.state_reader import StateSource

TABLE_CELL = 40  # characters; wider cells are cut with an ellipsis
FLUSH_EVERY = 20_000  # lines buffered before one write: fewer syscalls, bounded memory


def as_struct(columns: Sequence[Column]) -> StructType:
    return StructType(tuple(StructField(name, dt) for name, dt in columns))


def _open_text(path: str) -> AtomicText:
    try:
        return AtomicText(path)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write output ({exc.strerror})") from exc


class TextOut:
    """Text for ``path``, put in place whole by :meth:`commit` (``stateglass.app.atomic``), or
    for ``stream`` (stdout when None) when ``path`` is None."""

    def __init__(self, path: str | None, stream: IO[str] | None = None) -> None:
        self.target = _open_text(path) if path is not None else None
        self.file: IO[str] = self.target.file if self.target is not None else stream or sys.stdout

    def commit(self) -> None:
        self.file.flush()
        if self.target is not None:
            self.target.commit()

    def discard(self) -> None:
        if self.target is not None:
            self.target.discard()


class Output:
    """An output used in ``with``: closed when the block ends well, aborted when it fails."""

    def close(self) -> None:
        """Finish the output; a file appears at its path only now (``stateglass.app.atomic``)."""

    def abort(self) -> None:
        """The command failed: leave no output file (an existing one stays as it was)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if et is None:
            self.close()
        else:
            self.abort()


class Sink(Output):
    """Receives stored (key, value) bytes and writes rows; closed when the command ends."""

    def __init__(self, codec: RowCodec, time_zone: str) -> None:
        self.codec = codec
        self.time_zone = time_zone
        self.rows_written = 0

    def write_state(self, partition: int, key: bytes, value: bytes) -> None:
        """One stored item: the rows of :meth:`RowCodec.rows`."""
        self.write_rows(partition, self.codec.rows(key, value))

    def write_rows(self, partition: int, rows: Iterable[Row]) -> None:
        """State rows (``codec.columns`` order, without ``partition_id``) of one partition."""
        raise NotImplementedError

    def write_partition(self, partition: int, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Every stored item of one partition (the whole partition, in store order)."""
        if self.codec.grouped:
            self.write_rows(partition, self.codec.partition_rows(items))
            return
        for key, value in items:
            self.write_state(partition, key, value)

    def write_state_partition(self, source: StateSource, partition: int, version: int) -> None:
        """Every row of ``partition`` of ``source`` at ``version``."""
        self.write_partition(partition, source.load(partition, version))

    def write_change(
        self, batch: int, change_type: str, partition: int, key: bytes, value: bytes | None
    ) -> None:
        """One change record: the rows of :meth:`RowCodec.change_rows`."""
        for kind, row in self.codec.change_rows(change_type, key, value):
            self.write_change_row((batch, kind, *row, partition))

    def write_change_row(self, row: Row) -> None:
        """A whole change-feed row, in :func:`change_columns` order."""
        raise NotImplementedError


class JsonLinesSink(Sink):
    """One JSON object per row, exactly as ``spark.read.format("statestore")…toJSON()``.

    Plain key/value rows whose bytes are UnsafeRows go from bytes to text in one generated
    step; every other shape (transformWithState list, map and timer rows, Avro) renders the
    codec's output rows, leaving null columns out as Spark does.
    """

    def __init__(self, codec: RowCodec, time_zone: str, path: str | None) -> None:
        super().__init__(codec, time_zone)
        self.text = TextOut(path)
        self.out: IO[str] = self.text.file
        self.buf: list[str] = []
        self.fast = codec.raw_capable
        self.chain: ChainEncoder | None = None
        if self.fast:
            self.line = state_line_encoder(codec.key_schema, codec.value_schema, time_zone)
            self.lines = state_lines_encoder(codec.key_schema, codec.value_schema, time_zone)
            self.blob = state_blob_encoder(codec.key_schema, codec.value_schema, time_zone)
            self.prefixed_blob = state_prefixed_blob_encoder(
                codec.key_schema, codec.value_schema, time_zone
            )
            # An HDFS store's whole chain merged and rendered in C (None: not compiled).
            self.chain = (
                state_chain_encoder(codec.key_schema, codec.value_schema, time_zone)
                if codec.spec.provider == "hdfs"
                else None
            )
            self.key_bytes_json = row_json_encoder(codec.key_schema, time_zone)
            self.value_bytes_json = row_json_encoder(codec.value_schema, time_zone)

    @cached_property
    def state_json(self) -> Callable[[Row], str]:
        return render_row(as_struct(state_columns(self.codec)), self.time_zone)

    @cached_property
    def change_json(self) -> Callable[[Row], str]:
        return render_row(as_struct(change_columns(self.codec)), self.time_zone)

    def _emit(self, text: str) -> None:
        self.buf.append(text)
        self.rows_written += 1
        if len(self.buf) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.buf.append("")
            self.out.write("\n".join(self.buf))
            self.buf.clear()

    def write_state(self, partition: int, key: bytes, value: bytes) -> None:
        if self.fast:
            payloads = self.codec.payloads(key, value)
            if payloads is not None:
                self._emit(self.line(payloads[0], payloads[1], partition))
            return
        self.write_rows(partition, self.codec.rows(key, value))

    def write_rows(self, partition: int, rows: Iterable[Row]) -> None:
        render = self.state_json
        for row in rows:
            self._emit(render((*row, partition)))

    def render_partition(self, partition: int, items: Iterable[tuple[bytes, bytes]]) -> list[str]:
        """The JSON lines of one partition, from bytes in one comprehension (the hot loop)."""
        if self.codec.spec.provider == "hdfs":
            return self.lines(items, partition)
        line = self.line
        payloads = self.codec.payloads
        return [line(p[0], p[1], partition) for p in (payloads(k, v) for k, v in items) if p]

    def render_partition_blob(
        self, partition: int, items: Iterable[tuple[bytes, bytes]]
    ) -> tuple[bytes, int]:
        """:meth:`render_partition` as UTF-8 bytes (newline after each line) and a row count.

        The path of ``stateglass state``: compiled when ``stateglass.parsers._speedups`` is built.
        """
        if self.codec.spec.provider == "hdfs":
            return self.blob(items, partition)
        spec = self.codec.spec
        if spec.cf_id is None and not spec.row_checksum:
            # One column family, no checksums: the version bytes are skipped in C.
            return self.prefixed_blob(items, partition, self.codec.payloads)
        # payloads() is None for another column family's keys: filter drops those.
        return self.blob(filter(None, itertools.starmap(self.codec.payloads, items)), partition)

    def render_state_partition(
        self, source: StateSource, partition: int, version: int
    ) -> tuple[bytes, int]:
        """One partition of ``source`` at ``version`` as :meth:`render_partition_blob` gives it.

        An HDFS store goes from its decompressed files to text in one compiled step; anything
        that step refuses (row checksums, a damaged stream) takes the record-by-record path,
        which names the problem.
        """
        if self.chain is not None:
            files = source.chain_data(partition, version)
            if files is not None:
                done = self.chain(files[0], files[1], partition)
                if done is not None:
                    return done
        # The reader's own iterator, without StateSource.load's generator around each row.
        with source.explaining(version):
            return self.render_partition_blob(partition, source.reader(partition).load(version))

    def write_blob(self, blob: bytes, rows: int) -> None:
        """Lines already rendered and encoded, in order."""
        self.flush()
        raw = getattr(self.out, "buffer", None)
        if raw is not None:
            self.out.flush()
            raw.write(blob)
        else:
            self.out.write(blob.decode("utf-8"))
        self.rows_written += rows

    def write_lines(self, lines: list[str]) -> None:
        """Lines already rendered, in order."""
        self.flush()
        if lines:
            lines.append("")
            self.out.write("\n".join(lines))
            self.rows_written += len(lines) - 1

    def write_file(self, path: str, rows: int) -> None:
        """Append a file of newline-terminated lines rendered by another process."""
        self.flush()
        self.out.flush()
        with open(path, "rb") as src:
            size = os.fstat(src.fileno()).st_size
            sent = 0
            try:
                fd = self.out.fileno()
                while sent < size:
                    n = os.sendfile(fd, src.fileno(), sent, size - sent)
                    if n == 0:
                        break
                    sent += n
            except (OSError, AttributeError, io.UnsupportedOperation):
                # No zero-copy here (not Linux, or a stream without a descriptor).
                src.seek(sent)
                self.out.write(src.read().decode("utf-8"))
        self.rows_written += rows

    def write_partition(self, partition: int, items: Iterable[tuple[bytes, bytes]]) -> None:
        if not self.fast:
            super().write_partition(partition, items)
            return
        self.write_blob(*self.render_partition_blob(partition, items))

    def write_state_partition(self, source: StateSource, partition: int, version: int) -> None:
        if not self.fast:
            super().write_state_partition(source, partition, version)
            return
        self.write_blob(*self.render_state_partition(source, partition, version))

    def write_change(
        self, batch: int, change_type: str, partition: int, key: bytes, value: bytes | None
    ) -> None:
        if self.fast:
            payloads = self.codec.payloads(key, value)
            if payloads is None:
                return
            k, v = payloads
            head = f'{{"batch_id":{batch},"change_type":"{change_type}","key":'
            val = "" if v is None else f',"value":{self.value_bytes_json(v)}'
            self._emit(f'{head}{self.key_bytes_json(k)}{val},"partition_id":{partition}}}')
            return
        super().write_change(batch, change_type, partition, key, value)

    def write_change_row(self, row: Row) -> None:
        self._emit(self.change_json(row))

    def close(self) -> None:
        self.flush()
        self.text.commit()

    def abort(self) -> None:
        self.text.discard()


class FlatColumns:
    """Output columns as flat cells: a struct column becomes one cell per field."""

    def __init__(self, columns: Sequence[Column], time_zone: str) -> None:
        self.names: list[str] = []
        self.convert: list[Callable[[Any], list[Any]]] = []
        for name, dt in columns:
            if isinstance(dt, StructType):
                # Nested structs as leaves too (key.window.start, key.window.end): one JSON
                # cell for key.window would be cut at TABLE_CELL, losing the window's end.
                paths = _leaf_paths(dt)
                self.names.extend(".".join((name, *p)) for p in paths)
                self.convert.append(_struct_cells(to_python(dt, time_zone), paths))
            else:
                self.names.append(name)
                self.convert.append(_single_cell(name, dt, time_zone))
        # Epoch-millisecond fields by Spark's contract, shown as Spark shows a timestamp.
        self.epoch_ms = [
            i for i, n in enumerate(self.names) if n.rsplit(".", 1)[-1] in EPOCH_MS_FIELDS
        ]
        self.ms_text = epoch_ms_text(TimeZoneSpec(time_zone))

    def cells(self, row: Row) -> list[Any]:
        out: list[Any] = []
        for convert, value in zip(self.convert, row, strict=True):
            out.extend(convert(value))
        for i in self.epoch_ms:
            if isinstance(out[i], int) and not isinstance(out[i], bool):
                out[i] = self.ms_text(out[i])
        return out


def _leaf_paths(dt: StructType) -> list[tuple[str, ...]]:
    """Field names down to each non-struct leaf, repeated names suffixed as to_python does."""
    out: list[tuple[str, ...]] = []
    for f, name in zip(dt.fields, unique_names(dt.names), strict=True):
        if isinstance(f.data_type, StructType) and f.data_type.fields:
            out.extend((name, *p) for p in _leaf_paths(f.data_type))
        else:
            out.append((name,))
    return out


def _struct_cells(
    py: Callable[[Any], dict[str, Any]], paths: list[tuple[str, ...]]
) -> Callable[[Any], list[Any]]:
    def leaf(found: Any, path: tuple[str, ...]) -> Any:
        for name in path:
            if not isinstance(found, dict):
                return None
            found = found.get(name)
        return found

    def cells(value: Any) -> list[Any]:
        # to_python leaves null fields out; line cells up with the schema's leaves.
        found = py(value) if value is not None else {}
        return [leaf(found, p) for p in paths]

    return cells


def _single_cell(name: str, dt: DataType, time_zone: str) -> Callable[[Any], list[Any]]:
    py = to_python(StructType((StructField(name, dt),)), time_zone)
    return lambda value: [None if value is None else py((value,)).get(name)]


def cell_text(v: Any) -> str:
    """One cell of a flat column (:class:`FlatColumns`) as text: strings as they are, numbers,
    lists and maps as Spark's JSON text of them (``to_json``); empty for null."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    return json_text(v)


def write_text_table(header: Sequence[str], rows: Sequence[Sequence[str]], out: IO[str]) -> None:
    """Cells already cut to width as a fixed-width table, with a row count under it."""
    if not rows:
        out.write("(no rows)\n")
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    out.write("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() + "\n")
    out.write(f"({len(rows)} rows)\n")


class TableSink(Sink):
    """A fixed-width text table, one column per top-level key and value field."""

    def __init__(self, codec: RowCodec, time_zone: str, path: str | None) -> None:
        super().__init__(codec, time_zone)
        self.path = path
        self.header: list[str] = []
        self.rows: list[list[str]] = []

    @cached_property
    def state_cells(self) -> FlatColumns:
        return FlatColumns(self.codec.columns, self.time_zone)

    @cached_property
    def change_cells(self) -> FlatColumns:
        return FlatColumns(self.codec.change_columns, self.time_zone)

    @staticmethod
    def _cell(v: Any) -> str:
        text = cell_text(v)
        return text if len(text) <= TABLE_CELL else text[: TABLE_CELL - 1] + "…"

    def write_rows(self, partition: int, rows: Iterable[Row]) -> None:
        columns = self.state_cells
        self.header = self.header or ["partition_id", *columns.names]
        for row in rows:
            self.rows.append([str(partition), *map(self._cell, columns.cells(row))])
            self.rows_written += 1

    def write_change_row(self, row: Row) -> None:
        columns = self.change_cells
        self.header = self.header or ["batch_id", "change_type", "partition_id", *columns.names]
        batch, change_type, *rest, partition = row
        cells = map(self._cell, columns.cells(tuple(rest)))
        self.rows.append([str(batch), str(change_type), str(partition), *cells])
        self.rows_written += 1

    def close(self) -> None:
        target = _open_text(self.path) if self.path is not None else None
        out = target.file if target is not None else sys.stdout
        try:
            self._render(out)
        except BaseException:
            if target is not None:
                target.discard()
            raise
        if target is not None:
            target.commit()

    def _render(self, out: IO[str]) -> None:
        write_text_table(self.header, self.rows, out)


# A Parquet row group gathers whole pieces up to this many rows, or until they hold this many
# bytes. DuckDB hands a result over in batches of some 120,000 rows: a row group each is small
# for Parquet's readers, and costs the writer a third more.
ROW_GROUP_ROWS = 1 << 20
ROW_GROUP_BYTES = 64 << 20


class ParquetRowGroups:
    """A Parquet file under a temporary name, written a row group at a time as Arrow pieces
    (tables or record batches) arrive: memory holds one row group, not the output. The file
    is renamed into place at :meth:`close`; :meth:`abort` leaves none."""

    def __init__(self, path: str, schema: Any) -> None:
        self.path = path
        self.schema = schema
        self.tmp = temp_name(path)
        self.held: list[Any] = []
        self.held_rows = 0
        self.held_bytes = 0
        # Opened with the first row group: what the pieces before it fail on (a damaged
        # row) is said before a type Parquet has no column for.
        self.writer: Any = None

    def _open(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            self.writer = pq.ParquetWriter(self.tmp, self.schema)
        except (OSError, pa.ArrowException) as exc:
            # The writer may have made the file before it refused the schema.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)
            if isinstance(exc, OSError):
                raise OutputError(f"{self.path}: cannot write parquet ({exc.strerror})") from exc
            # A type Parquet has no column for (an INTERVAL): the user can cast it.
            why = str(exc).splitlines()[0]
            raise OutputError(f"{self.path}: cannot write parquet ({why}; cast it)") from exc

    def write(self, piece: Any) -> None:
        if self.held_rows + piece.num_rows > ROW_GROUP_ROWS:
            self._write_held()
        self.held.append(piece)
        self.held_rows += piece.num_rows
        self.held_bytes += piece.nbytes
        if self.held_bytes >= ROW_GROUP_BYTES:
            self._write_held()

    def _write_held(self) -> None:
        import pyarrow as pa

        if not self.held:
            return
        if self.writer is None:
            self._open()
        held = self.held
        self.held, self.held_rows, self.held_bytes = [], 0, 0
        try:
            if isinstance(held[0], pa.RecordBatch):
                table = pa.Table.from_batches(held)
            else:
                table = pa.concat_tables(held)
            self.writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        except (pa.ArrowException, ValueError) as exc:  # ValueError: a piece of another schema
            why = str(exc).splitlines()[0]
            raise OutputError(f"{self.path}: cannot write parquet ({why})") from exc

    def close(self) -> None:
        try:
            self._write_held()
            if self.writer is None:
                self._open()  # no piece at all: a file of the schema and no rows
            self.writer.close()
            put_in_place(self.tmp, self.path)
        except OutputError:
            self.abort()
            raise
        except OSError as exc:
            self.abort()
            raise OutputError(f"{self.path}: cannot write parquet ({exc.strerror})") from exc

    def abort(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):
                self.writer.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)


class ParquetSink(Sink):
    """Parquet with one typed column per output column (nested structs, lists, maps).

    Plain key/value stores of UnsafeRows go from bytes to Arrow a partition at a time
    (:mod:`parsers.columnar`); other shapes, and partitions with rows that only the Python
    decoder handles, go through the decoded rows. Both give the same table.
    """

    def __init__(self, codec: RowCodec, time_zone: str, path: str | None) -> None:
        super().__init__(codec, time_zone)
        if path is None:
            raise AppError("--format parquet needs -o FILE")
        self.path = path
        self.columns: Sequence[Column] = ()
        self.values: list[list[Any]] = []
        self.convert: list[Callable[[Any], Any]] = []
        # Opened at the first piece, with its schema (every piece of one output has it).
        self.file: ParquetRowGroups | None = None
        # numpy and pyarrow load only for Parquet: JSON lines start faster without them.
        from stateglass.parsers.state_arrow import columnar_supported

        self.columnar = columnar_supported(codec)

    def _start(self, columns: Sequence[Column]) -> None:
        if self.columns:
            return
        self.columns = columns
        self.values = [[] for _ in columns]
        self.convert = [arrow_value(dt, self.time_zone) for _, dt in columns]

    def _add(self, row: Row) -> None:
        for column, convert, value in zip(self.values, self.convert, row, strict=True):
            column.append(None if value is None else convert(value))
        self.rows_written += 1

    def write_rows(self, partition: int, rows: Iterable[Row]) -> None:
        self._start(state_columns(self.codec))
        for row in rows:
            self._add((*row, partition))

    def write_partition(self, partition: int, items: Iterable[tuple[bytes, bytes]]) -> None:
        if not self.columnar:
            super().write_partition(partition, items)
            return
        from stateglass.parsers.state_arrow import columnar_partition

        self._start(state_columns(self.codec))
        items = items if isinstance(items, list) else list(items)
        table = columnar_partition(self.codec, partition, items)
        if table is None:
            # A row only the Python decoder reads (it repairs or names what is wrong).
            super().write_partition(partition, items)
            return
        self._flush_values()
        self._write(table)
        self.rows_written += table.num_rows

    def write_state_partition(self, source: StateSource, partition: int, version: int) -> None:
        # An HDFS chain or RocksDB's tables go from their files to Arrow in C; what that
        # refuses, item by item.
        tables = source.merged_tables(partition, version) if self.columnar else None
        if tables is None:
            super().write_state_partition(source, partition, version)
            return
        self._start(state_columns(self.codec))
        self._flush_values()
        for table in tables:
            self._write(table)
            self.rows_written += table.num_rows

    def write_change_row(self, row: Row) -> None:
        self._start(change_columns(self.codec))
        self._add(row)

    def _flush_values(self) -> None:
        """Rows added one by one so far, as one more chunk (keeps the output's order)."""
        import pyarrow as pa

        if not self.values or not self.values[0]:
            return
        try:
            arrays = [
                pa.array(values, type=arrow_type(dt))
                for (_, dt), values in zip(self.columns, self.values, strict=True)
            ]
        except pa.ArrowException as exc:
            raise OutputError(f"{self.path}: cannot write parquet ({exc})") from exc
        self._write(pa.table(arrays, names=[name for name, _ in self.columns]))
        self.values = [[] for _ in self.columns]

    def _write(self, table: Any) -> None:
        if self.file is None:
            self.file = ParquetRowGroups(self.path, table.schema)
        self.file.write(table)

    def close(self) -> None:
        import pyarrow as pa

        self._start(state_columns(self.codec))
        self._flush_values()
        if self.file is None:
            schema = pa.schema([(name, arrow_type(dt)) for name, dt in self.columns])
            self._write(schema.empty_table())
        assert self.file is not None
        self.file.close()

    def abort(self) -> None:
        if self.file is not None:
            self.file.abort()


SINKS: dict[str, Callable[[RowCodec, str, str | None], Sink]] = {
    "jsonl": JsonLinesSink,
    "table": TableSink,
    "parquet": ParquetSink,
}


def open_sink(fmt: str, path: str | None, codec: RowCodec, time_zone: str) -> Sink:
    """The sink for ``--format fmt``, writing to ``path`` (stdout when None)."""
    try:
        TimeZoneSpec(time_zone)
    except ParseError as exc:
        # Checked before any output: a bad --time-zone is the user's, not the checkpoint's.
        raise AppError(f"--time-zone: {exc.why}") from exc
    return SINKS[fmt](codec, time_zone, path)
