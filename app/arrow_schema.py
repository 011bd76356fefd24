"""Spark types as Arrow types, for Parquet export."""

from __future__ import annotations

from typing import Any

from parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DayTimeIntervalType,
    DecimalType,
    MapType,
    StringLikeType,
    StructType,
    YearMonthIntervalType,
)


def dedupe_names(names: list[str]) -> list[str]:
    """State value schemas may repeat a name (``sum``, ``sum``): the second becomes ``sum_2``."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}_{seen[n]}")
    return out


def arrow_type(t: DataType, dedupe: bool = True) -> Any:
    import pyarrow as pa

    if isinstance(t, StructType):
        names = dedupe_names(t.names) if dedupe else t.names
        return pa.struct(
            [pa.field(n, arrow_type(f.data_type, dedupe), f.nullable) for n, f in zip(names, t.fields)]
        )
    if isinstance(t, ArrayType):
        return pa.list_(arrow_type(t.element_type, dedupe))
    if isinstance(t, MapType):
        return pa.map_(arrow_type(t.key_type, dedupe), arrow_type(t.value_type, dedupe))
    if isinstance(t, DecimalType):
        return pa.decimal128(t.precision, t.scale) if t.precision <= 38 else pa.string()
    if isinstance(t, StringLikeType):
        return pa.string()
    if isinstance(t, YearMonthIntervalType):
        return pa.int32()
    if isinstance(t, DayTimeIntervalType):
        return pa.duration("us")
    assert isinstance(t, AtomicType)
    simple = {
        "void": pa.null(),
        "boolean": pa.bool_(),
        "byte": pa.int8(),
        "short": pa.int16(),
        "integer": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "string": pa.string(),
        "binary": pa.binary(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "timestamp_ntz": pa.timestamp("us"),
    }
    return simple.get(t.name, pa.string())
