"""Where rows go: JSON lines (Spark's toJSON shape), a text table, or Parquet.

Example::

    with open_sink("jsonl", None, codec, "UTC") as sink:
        for row in read_state(cp, request):
            sink.write_state(row)
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any

from app.errors import AppError, OutputError
from collectors.state import ChangeRow, StateRow
from parsers.sparkjson import struct_json, struct_python
from parsers.sparktypes import StructType
from parsers.state_rows import RowCodec

TABLE_CELL = 40  # characters; wider cells are cut with an ellipsis


class Sink:
    """Base class: receives rows, and is closed when the command ends."""

    def __init__(self, codec: RowCodec, time_zone: str) -> None:
        self.codec = codec
        self.time_zone = time_zone

    def write_state(self, row: StateRow) -> None:
        raise NotImplementedError

    def write_change(self, row: ChangeRow) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Sink:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _open_text(path: str | None) -> IO[str]:
    if path is None:
        return sys.stdout
    try:
        return open(path, "w", encoding="utf-8", newline="\n")
    except OSError as exc:
        raise OutputError(f"{path}: cannot write output ({exc.strerror})") from exc


class JsonLinesSink(Sink):
    """One JSON object per row, exactly as ``spark.read.format("statestore")…toJSON()``."""

    def __init__(self, codec: RowCodec, time_zone: str, path: str | None) -> None:
        super().__init__(codec, time_zone)
        self.out = _open_text(path)
        self.key_json = struct_json(codec.key_schema, time_zone)
        self.value_json = struct_json(codec.value_schema, time_zone)

    def write_state(self, row: StateRow) -> None:
        value = "" if row.value is None else f',"value":{self.value_json(row.value)}'
        self.out.write(
            f'{{"key":{self.key_json(row.key)}{value},"partition_id":{row.partition_id}}}\n'
        )

    def write_change(self, row: ChangeRow) -> None:
        value = "" if row.value is None else f',"value":{self.value_json(row.value)}'
        self.out.write(
            f'{{"batch_id":{row.batch_id},"change_type":"{row.change_type}",'
            f'"key":{self.key_json(row.key)}{value},"partition_id":{row.partition_id}}}\n'
        )

    def close(self) -> None:
        if self.out is not sys.stdout:
            self.out.close()
        else:
            self.out.flush()


def _flat_names(prefix: str, schema: StructType) -> list[str]:
    return [f"{prefix}.{f.name}" for f in schema.fields]


class TableSink(Sink):
    """A fixed-width text table, one column per top-level key and value field."""

    def __init__(self, codec: RowCodec, time_zone: str, path: str | None) -> None:
        super().__init__(codec, time_zone)
        self.path = path
        self.key_py = struct_python(codec.key_schema, time_zone)
        self.value_py = struct_python(codec.value_schema, time_zone)
        self.rows: list[list[str]] = []
        self.header: list[str] = []

    @staticmethod
    def _cell(v: Any) -> str:
        text = "null" if v is None else v if isinstance(v, str) else json.dumps(v, default=str)
        return text if len(text) <= TABLE_CELL else text[: TABLE_CELL - 1] + "…"

    def _fields(self, key: tuple[Any, ...], value: tuple[Any, ...] | None) -> list[str]:
        k = self.key_py(key)
        v = self.value_py(value) if value is not None else [None] * len(self.codec.value_schema.fields)
        return [self._cell(x) for x in list(k.values()) + list(v.values() if isinstance(v, dict) else v)]

    def write_state(self, row: StateRow) -> None:
        if not self.header:
            self.header = [
                "partition_id",
                *_flat_names("key", self.codec.key_schema),
                *_flat_names("value", self.codec.value_schema),
            ]
        self.rows.append([str(row.partition_id), *self._fields(row.key, row.value)])

    def write_change(self, row: ChangeRow) -> None:
        if not self.header:
            self.header = [
                "batch_id",
                "change_type",
                "partition_id",
                *_flat_names("key", self.codec.key_schema),
                *_flat_names("value", self.codec.value_schema),
            ]
        self.rows.append(
            [str(row.batch_id), row.change_type, str(row.partition_id), *self._fields(row.key, row.value)]
        )

    def close(self) -> None:
        out = _open_text(self.path)
        if not self.header:
            out.write("(no rows)\n")
        else:
            widths = [max(len(h), *(len(r[i]) for r in self.rows)) if self.rows else len(h)
                      for i, h in enumerate(self.header)]
            out.write("  ".join(h.ljust(w) for h, w in zip(self.header, widths)).rstrip() + "\n")
            out.write("  ".join("-" * w for w in widths) + "\n")
            for r in self.rows:
                out.write("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n")
            out.write(f"({len(self.rows)} rows)\n")
        if out is not sys.stdout:
            out.close()


class ParquetSink(Sink):
    """Parquet with ``key`` and ``value`` struct columns, written when the command ends."""

    def __init__(self, codec: RowCodec, time_zone: str, path: str | None) -> None:
        super().__init__(codec, time_zone)
        if path is None:
            raise AppError("--format parquet needs -o FILE")
        self.path = path
        self.key_py = struct_python(codec.key_schema, time_zone, arrow=True)
        self.value_py = struct_python(codec.value_schema, time_zone, arrow=True)
        self.columns: dict[str, list[Any]] = {}

    def _add(self, **cols: Any) -> None:
        for name, v in cols.items():
            self.columns.setdefault(name, []).append(v)

    def write_state(self, row: StateRow) -> None:
        value = None if row.value is None else self.value_py(row.value)
        self._add(key=self.key_py(row.key), value=value, partition_id=row.partition_id)

    def write_change(self, row: ChangeRow) -> None:
        value = None if row.value is None else self.value_py(row.value)
        self._add(
            batch_id=row.batch_id,
            change_type=row.change_type,
            key=self.key_py(row.key),
            value=value,
            partition_id=row.partition_id,
        )

    def close(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from app.arrow_schema import arrow_type

        types: dict[str, Any] = {
            "batch_id": pa.int64(),
            "change_type": pa.string(),
            "key": arrow_type(self.codec.key_schema, dedupe=True),
            "value": arrow_type(self.codec.value_schema, dedupe=True),
            "partition_id": pa.int32(),
        }
        names = list(self.columns) or ["key", "value", "partition_id"]
        arrays = [pa.array(self.columns.get(n, []), type=types[n]) for n in names]
        try:
            pq.write_table(pa.table(arrays, names=names), self.path)
        except OSError as exc:
            raise OutputError(f"{self.path}: cannot write parquet ({exc})") from exc


SINKS: dict[str, Callable[[RowCodec, str, str | None], Sink]] = {
    "jsonl": JsonLinesSink,
    "table": TableSink,
    "parquet": ParquetSink,
}


def open_sink(fmt: str, path: str | None, codec: RowCodec, time_zone: str) -> Sink:
    return SINKS[fmt](codec, time_zone, path)
