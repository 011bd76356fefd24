"""Decoded state rows as flat table cells: one column per leaf field, as Spark's JSON shows it.

``key.window.start``, ``value.count``, ``value.sum_1`` (repeated names get the suffixes of
:func:`stateglass.parsers.arrow_types.unique_names`). A cell holds what Spark's ``toJSON``
writes for that field: numbers as numbers (decimals exact), timestamps and dates as Spark's
text, binary as base64; arrays and maps stay whole, as their JSON text. Null fields are empty
cells.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from stateglass.app.render.rows_to_json import render_row, to_python
from stateglass.app.render.spark_text import EPOCH_MS_FIELDS, TimeZoneSpec, epoch_ms_text
from stateglass.parsers.arrow_types import unique_names
from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DecimalType,
    MapType,
    StructField,
    StructType,
)
from stateglass.parsers.state_rows import Column, Row

PARTITION_COLUMN = "partition_id"
_INTEGRAL = frozenset({"byte", "short", "integer", "long"})
Cell = Callable[[Any], Any]


def _leaf_type(dt: DataType) -> Any:
    """The Arrow type of a leaf column: numbers keep a numeric type, the rest is text."""
    if isinstance(dt, AtomicType):
        if dt.name in _INTEGRAL:
            return pa.int64()
        if dt.name in ("float", "double"):
            return pa.float64()
        if dt.name == "boolean":
            return pa.bool_()
    if isinstance(dt, DecimalType) and dt.precision <= 38:
        return pa.decimal128(dt.precision, max(dt.scale, 0))
    return pa.string()


def _leaf_cell(name: str, dt: DataType, zone: str) -> Cell:
    """Decoded value -> cell, for one leaf of type ``dt``."""
    if isinstance(dt, AtomicType) and dt.name in ("float", "double"):
        if dt.name == "float":
            # A float32 as Spark prints it (0.938), not its float64 expansion (0.93800002…).
            py = to_python(StructType((StructField(name, dt),)), zone)

            def float_cell(v: Any) -> Any:
                text = py((v,)).get(name)
                return float(text) if text is not None else None

            return float_cell
        return lambda v: v  # NaN and infinities stay floats (Spark writes them as strings)
    if isinstance(dt, (ArrayType, MapType)):
        # '{"v":[...]}' -> '[...]': the exact text Spark writes for the whole value.
        render = render_row(StructType((StructField("v", dt),)), zone)
        return lambda v: render((v,))[5:-1]
    if isinstance(dt, DecimalType) and dt.scale < 0:
        py_neg = to_python(StructType((StructField(name, dt),)), zone)
        return lambda v: str(py_neg((v,)).get(name))
    py = to_python(StructType((StructField(name, dt),)), zone)
    return lambda v: py((v,)).get(name)


RAW_MS = " (epoch ms)"


def epoch_ms_as_timestamps(df: pd.DataFrame) -> pd.DataFrame:
    """Epoch-millisecond fields by Spark's contract (a timer's expiration, a TTL'd value's)
    as the timestamps Spark shows (UTC, the dashboard's session time zone), the raw long
    Spark's reader gives beside each, in a column of its own."""
    text = epoch_ms_text(TimeZoneSpec("UTC"))
    for name in list(df.columns):
        if str(name).rsplit(".", 1)[-1] not in EPOCH_MS_FIELDS:
            continue
        if not pd.api.types.is_integer_dtype(df[name]):
            continue
        raw = df[name]
        at = df.columns.get_loc(name)
        df[name] = [None if pd.isna(v) else text(int(v)) for v in raw]
        df.insert(int(at) + 1, f"{name}{RAW_MS}", raw)
    return df


def display_number(value: float) -> float:
    """A float as the pages show it: 15 significant digits, so that a sum's binary noise
    (``1294.0079999999999``) reads as the decimal it stands for (``1294.008``), as in the
    browser's number columns."""
    return float(format(value, ".15g")) if math.isfinite(value) else value


def cell_text(cell: Any) -> str | None:
    """A cell as text (Diff's before/after columns), numbers as :func:`display_number`."""
    if cell is None:
        return None
    if isinstance(cell, float):
        return str(display_number(cell))
    return str(cell)


class Flattener:
    """Output columns (``codec.columns`` + partition) as flat, typed leaf cells.

    Example::

        flat = Flattener(codec.columns)
        table = flat.table([(partition, row) for row in codec.rows(key, value)])
    """

    def __init__(self, columns: Sequence[Column], zone: str = "UTC") -> None:
        self.names: list[str] = [PARTITION_COLUMN]
        self.types: list[Any] = [pa.int32()]
        self.groups: list[tuple[str, list[str]]] = []  # top-level column -> its leaf names
        self._leaves: list[tuple[int, Callable[[Any], list[Any]]]] = []
        for index, (name, dt) in enumerate(columns):
            start = len(self.names)
            self._leaves.append((index, self._walk(name, dt, zone)))
            self.groups.append((name, self.names[start:]))

    def _walk(self, prefix: str, dt: DataType, zone: str) -> Callable[[Any], list[Any]]:
        """Register ``prefix``'s leaves; return value -> its leaf cells."""
        if isinstance(dt, StructType):
            names = unique_names(dt.names)
            first = len(self.names)
            subs = [
                self._walk(f"{prefix}.{n}", f.data_type, zone)
                for n, f in zip(names, dt.fields, strict=True)
            ]
            nulls: list[Any] = [None] * (len(self.names) - first)

            def struct_cells(value: Any) -> list[Any]:
                if value is None:
                    return list(nulls)
                out: list[Any] = []
                for sub, v in zip(subs, value, strict=True):
                    out.extend(sub(v))
                return out

            return struct_cells
        self.names.append(prefix)
        self.types.append(_leaf_type(dt))
        void = isinstance(dt, AtomicType) and dt.name in ("void", "null")
        cell = _leaf_cell(prefix, dt, zone)
        return lambda v: [None if v is None or void else cell(v)]

    def cells(self, partition: int, row: Row) -> list[Any]:
        out: list[Any] = [partition]
        for index, leaves in self._leaves:
            out.extend(leaves(row[index]))
        return out

    def table(self, rows: Sequence[tuple[int, Row]]) -> pa.Table:
        """``(partition, row)`` pairs as an Arrow table with one column per leaf."""
        columns: list[list[Any]] = [[] for _ in self.names]
        for partition, row in rows:
            for column, cell in zip(columns, self.cells(partition, row), strict=True):
                column.append(cell)
        arrays = [pa.array(c, type=t) for c, t in zip(columns, self.types, strict=True)]
        return pa.table(arrays, names=self.names)

    def leaf_names(self, column: str) -> list[str]:
        """The leaf columns of one output column (``key`` -> ``key.a``, ``key.b.c``)."""
        for name, leaves in self.groups:
            if name == column:
                return leaves
        return []
