"""Where rows go: JSON lines (Spark's toJSON shape), a text table, or Parquet.

Sinks take the raw stored items and decode them with the store's :class:`RowCodec`, so that
JSON lines can go from bytes to text in one generated step.

Example::

    with open_sink("jsonl", None, codec, "UTC") as sink:
        for partition, key, value in iter_raw_state(source, batch_id):
            sink.write_state(partition, key, value)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any

from app.errors import AppError, OutputError
from parsers.sparkjson import render_row, row_json_encoder, state_line_encoder, to_python
from parsers.state_rows import RowCodec

TABLE_CELL = 40  # characters; wider cells are cut with an ellipsis
FLUSH_EVERY = 20_000  # lines buffered before one write: fewer syscalls, bounded memory


def _open_text(path: str | None) -> IO[str]:
    if path is None:
        return sys.stdout
    try:
        return open(path, "w", encoding="utf-8", newline="\n")
    except OSError as exc:
        raise OutputError(f"{path}: cannot write output ({exc.strerror})") from exc


class Sink:
    """Receives stored (key, value) bytes and writes rows; closed when the command ends."""

    def __init__(self, codec: RowCodec, time_zone: str) -> None:
        self.codec = codec
        self.time_zone = time_zone
        self.rows_written = 0

    def write_state(self, partition: int, key: bytes, value: bytes | None) -> None:
        raise NotImplementedError

    def write_change(
        self, batch: int, change_type: str, partition: int, key: bytes, value: bytes | None
    ) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Sink:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _pairs(self, key: bytes, value: bytes | None) -> list[tuple[Any, Any]]:
        if value is None:
            return self.codec.decode_change("delete", key, None)
        return self.codec.decode(key, value)


class JsonLinesSink(Sink):
    """One JSON object per row, exactly as ``spark.read.format("statestore")…toJSON()``."""

    def __init__(self, codec: RowCodec, time_zone: str, path: str | None) -> None:
        super().__init__(codec, time_zone)
        self.out = _open_text(path)
        self.buf: list[str] = []
        self.fast = codec.raw_capable
        if self.fast:
            self.line = state_line_encoder(codec.key_schema, codec.value_schema, time_zone)
            self.key_bytes_json = row_json_encoder(codec.key_schema, time_zone)
            self.value_bytes_json = row_json_encoder(codec.value_schema, time_zone)
        self.key_json = render_row(codec.key_schema, time_zone)
        self.value_json = render_row(codec.value_schema, time_zone)

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

    def write_state(self, partition: int, key: bytes, value: bytes | None) -> None:
        if self.fast:
            payloads = self.codec.payloads(key, value)
            if payloads is not None:
                self._emit(self.line(payloads[0], payloads[1], partition))
            return
        for k, v in self._pairs(key, value):
            val = "" if v is None else f',"value":{self.value_json(v)}'
            self._emit(f'{{"key":{self.key_json(k)}{val},"partition_id":{partition}}}')

    def write_change(
        self, batch: int, change_type: str, partition: int, key: bytes, value: bytes | None
    ) -> None:
        head = f'{{"batch_id":{batch},"change_type":"{change_type}","key":'
        if self.fast:
            payloads = self.codec.payloads(key, value)
            if payloads is None:
                return
            k, v = payloads
            val = "" if v is None else f',"value":{self.value_bytes_json(v)}'
            self._emit(f'{head}{self.key_bytes_json(k)}{val},"partition_id":{partition}}}')
            return
        for dk, dv in self._pairs(key, value):
            val = "" if dv is None else f',"value":{self.value_json(dv)}'
            self._emit(f'{head}{self.key_json(dk)}{val},"partition_id":{partition}}}')

    def close(self) -> None:
        self.flush()
        if self.out is not sys.stdout:
            self.out.close()
        else:
            self.out.flush()


class TableSink(Sink):
    """A fixed-width text table, one column per top-level key and value field."""

    def __init__(self, codec: RowCodec, time_zone: str, path: str | None) -> None:
        super().__init__(codec, time_zone)
        self.path = path
        self.key_py = to_python(codec.key_schema, time_zone)
        self.value_py = to_python(codec.value_schema, time_zone)
        self.key_names = [f"key.{f.name}" for f in codec.key_schema.fields]
        self.value_names = [f"value.{f.name}" for f in codec.value_schema.fields]
        self.header: list[str] = []
        self.rows: list[list[str]] = []

    @staticmethod
    def _cell(v: Any) -> str:
        if v is None:
            return ""
        text = v if isinstance(v, str) else json.dumps(v, default=str, ensure_ascii=False)
        return text if len(text) <= TABLE_CELL else text[: TABLE_CELL - 1] + "…"

    def _cells(self, key: Any, value: Any) -> list[str]:
        k = list(self.key_py(key).values()) if key is not None else []
        kd = self.key_py(key)
        vd = self.value_py(value) if value is not None else {}
        # to_python leaves null fields out; line cells up with the schema's fields.
        return [self._cell(kd.get(n)) for n in _deduped(self.codec.key_schema.names)] + [
            self._cell(vd.get(n)) for n in _deduped(self.codec.value_schema.names)
        ] if k is not None else []

    def write_state(self, partition: int, key: bytes, value: bytes | None) -> None:
        self.header = self.header or ["partition_id", *self.key_names, *self.value_names]
        for k, v in self._pairs(key, value):
            self.rows.append([str(partition), *self._cells(k, v)])
            self.rows_written += 1

    def write_change(
        self, batch: int, change_type: str, partition: int, key: bytes, value: bytes | None
    ) -> None:
        self.header = self.header or [
            "batch_id", "change_type", "partition_id", *self.key_names, *self.value_names,
        ]
        for k, v in self._pairs(key, value):
            self.rows.append([str(batch), change_type, str(partition), *self._cells(k, v)])
            self.rows_written += 1

    def close(self) -> None:
        out = _open_text(self.path)
        try:
            if not self.rows:
                out.write("(no rows)\n")
                return
            widths = [max(len(h), *(len(r[i]) for r in self.rows)) for i, h in enumerate(self.header)]
            out.write("  ".join(h.ljust(w) for h, w in zip(self.header, widths)).rstrip() + "\n")
            out.write("  ".join("-" * w for w in widths) + "\n")
            for r in self.rows:
                out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")
            out.write(f"({len(self.rows)} rows)\n")
        finally:
            if out is not sys.stdout:
                out.close()


def _deduped(names: list[str]) -> list[str]:
    """The dict keys :func:`to_python` uses: a repeated name gets ``_1``, ``_2``…"""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        seen[n] = k + 1
        out.append(n if k == 0 else f"{n}_{k}")
    return out


class ParquetSink(Sink):
    """Parquet with ``key`` and ``value`` struct columns (values as Spark's JSON gives them)."""

    def __init__(self, codec: RowCodec, time_zone: str, path: str | None) -> None:
        super().__init__(codec, time_zone)
        if path is None:
            raise AppError("--format parquet needs -o FILE")
        self.path = path
        self.key_py = to_python(codec.key_schema, time_zone)
        self.value_py = to_python(codec.value_schema, time_zone)
        self.columns: dict[str, list[Any]] = {}

    def _add(self, **cols: Any) -> None:
        for name, v in cols.items():
            self.columns.setdefault(name, []).append(v)
        self.rows_written += 1

    def write_state(self, partition: int, key: bytes, value: bytes | None) -> None:
        for k, v in self._pairs(key, value):
            self._add(
                key=json.dumps(self.key_py(k), default=str, ensure_ascii=False),
                value=None if v is None else json.dumps(self.value_py(v), default=str, ensure_ascii=False),
                partition_id=partition,
            )

    def write_change(
        self, batch: int, change_type: str, partition: int, key: bytes, value: bytes | None
    ) -> None:
        for k, v in self._pairs(key, value):
            self._add(
                batch_id=batch,
                change_type=change_type,
                key=json.dumps(self.key_py(k), default=str, ensure_ascii=False),
                value=None if v is None else json.dumps(self.value_py(v), default=str, ensure_ascii=False),
                partition_id=partition,
            )

    def close(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        types: dict[str, Any] = {
            "batch_id": pa.int64(),
            "change_type": pa.string(),
            "key": pa.string(),
            "value": pa.string(),
            "partition_id": pa.int32(),
        }
        names = list(self.columns) or ["key", "value", "partition_id"]
        table = pa.table([pa.array(self.columns.get(n, []), type=types[n]) for n in names], names=names)
        try:
            pq.write_table(table, self.path)
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot write parquet ({exc})") from exc


SINKS: dict[str, Callable[[RowCodec, str, str | None], Sink]] = {
    "jsonl": JsonLinesSink,
    "table": TableSink,
    "parquet": ParquetSink,
}


def open_sink(fmt: str, path: str | None, codec: RowCodec, time_zone: str) -> Sink:
    return SINKS[fmt](codec, time_zone, path)
