"""Spark types as Arrow types.

The one mapping from Spark's types to Arrow's: Parquet export writes its columns with it, and
the columnar decoder (:mod:`stateglass.parsers.columnar`) builds its arrays with it. Every
column keeps its real type (nested structs, lists, maps, decimals, dates, timestamps) instead
of a JSON string. Struct fields whose names repeat (aggregation buffers: ``sum``, ``sum``) get
the suffixes ``_1``, ``_2``… that Spark's JSON of such a row uses
(``app.render.rows_to_json.to_python``), because Parquet needs unique names. pyarrow loads at
the first call: collecting never needs it.

Example::

    >>> from stateglass.parsers.sparktypes import parse_datatype
    >>> arrow_type(parse_datatype('{"type":"array","elementType":"long","containsNull":true}'))
    ListType(list<item: int64>)
"""

from __future__ import annotations

from typing import Any

from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DayTimeIntervalType,
    DecimalType,
    MapType,
    StringLikeType,
    StructField,
    StructType,
    YearMonthIntervalType,
)

# Spark name -> pyarrow factory name, for types whose decoded value Arrow takes as it is
# (dates are days and timestamps microseconds, which is what Arrow stores).
_ATOMIC = {
    "boolean": "bool_",
    "byte": "int8",
    "short": "int16",
    "integer": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "string": "string",
    "binary": "binary",
    "date": "date32",
    "void": "null",
}


def unique_names(names: list[str]) -> list[str]:
    """``sum, count, sum`` -> ``sum, count, sum_1`` (the keys Spark's JSON of the row uses)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0)
        seen[n] = k + 1
        out.append(n if k == 0 else f"{n}_{k}")
    return out


# The field names of a struct whose names repeat, as Arrow names it (``unique_names``) ->
# as Spark names it.
RepeatedNames = dict[tuple[str, ...], tuple[str, ...]]


def repeated_names(dt: DataType) -> RepeatedNames:
    """Every struct in ``dt`` (nested ones too) whose field names repeat, by the names Arrow
    gives its fields: what :func:`spark_names` puts back.

    Example::

        repeated_names(parse_datatype(value_of_an_aggregate))
        # {("count", "sum", "sum_1"): ("count", "sum", "sum")}
    """
    found: RepeatedNames = {}
    todo = [dt]
    while todo:
        at = todo.pop()
        if isinstance(at, StructType):
            names = [f.name for f in at.fields]
            if len(set(names)) < len(names):
                found[tuple(unique_names(names))] = tuple(names)
            todo.extend(f.data_type for f in at.fields)
        elif isinstance(at, ArrayType):
            todo.append(at.element_type)
        elif isinstance(at, MapType):
            todo.extend((at.key_type, at.value_type))
    return found


def spark_names(dt: DataType, names: RepeatedNames) -> DataType:
    """``dt`` with the field names Spark gives each struct in ``names`` (see
    :func:`repeated_names`): a SQL result's state column prints its repeated fields as
    ``stateglass state`` and Spark's ``toJSON()`` do (``"sum":…,"sum":…``)."""
    if not names:
        return dt
    if isinstance(dt, StructType):
        given = tuple(f.name for f in dt.fields)
        shown = names.get(given, given)
        return StructType(
            tuple(
                StructField(name, spark_names(f.data_type, names), f.nullable)
                for name, f in zip(shown, dt.fields, strict=True)
            )
        )
    if isinstance(dt, ArrayType):
        return ArrayType(spark_names(dt.element_type, names), dt.contains_null)
    if isinstance(dt, MapType):
        return MapType(
            spark_names(dt.key_type, names),
            spark_names(dt.value_type, names),
            dt.value_contains_null,
        )
    return dt


def has_text_form(dt: DataType) -> bool:
    """Types without an Arrow counterpart (calendar intervals, variants) go out as text."""
    return (
        isinstance(dt, AtomicType)
        and dt.name not in _ATOMIC
        and dt.name
        not in (
            "timestamp",
            "timestamp_ntz",
        )
    )


def arrow_type(dt: DataType) -> Any:
    """The Arrow type a column of ``dt`` is written as."""
    import pyarrow as pa

    if isinstance(dt, StructType):
        names = unique_names(dt.names)
        return pa.struct(
            [pa.field(n, arrow_type(f.data_type)) for n, f in zip(names, dt.fields, strict=True)]
        )
    if isinstance(dt, ArrayType):
        return pa.list_(arrow_type(dt.element_type))
    if isinstance(dt, MapType):
        return pa.map_(arrow_type(dt.key_type), arrow_type(dt.value_type))
    if isinstance(dt, DecimalType):
        return pa.decimal128(dt.precision, dt.scale)
    if isinstance(dt, StringLikeType):
        return pa.string()
    if isinstance(dt, YearMonthIntervalType):
        return pa.int32()  # months
    if isinstance(dt, DayTimeIntervalType):
        return pa.duration("us")
    if isinstance(dt, AtomicType):
        if dt.name == "timestamp":
            return pa.timestamp("us", tz="UTC")
        if dt.name == "timestamp_ntz":
            return pa.timestamp("us")
        if dt.name in _ATOMIC:
            return getattr(pa, _ATOMIC[dt.name])()
    return pa.string()  # calendar intervals, variants: Spark's JSON text


def spark_type(at: Any) -> DataType:
    """The Spark type whose JSON a column of Arrow type ``at`` is written as: the inverse of
    :func:`arrow_type` for every type it gives, and the nearest Spark type for the rest (a SQL
    result's unsigned, 64-bit-offset, dictionary or view types; durations as day-time
    intervals). Types Spark has no JSON for are written as their text (``string``)."""
    import pyarrow as pa

    t = pa.types
    if t.is_struct(at):
        fields = (at.field(i) for i in range(at.num_fields))
        return StructType(tuple(StructField(f.name, spark_type(f.type)) for f in fields))
    if t.is_map(at):
        return MapType(spark_type(at.key_type), spark_type(at.item_type))
    if t.is_list(at) or t.is_large_list(at) or t.is_fixed_size_list(at) or t.is_list_view(at):
        return ArrayType(spark_type(at.value_type))
    if t.is_dictionary(at):
        return spark_type(at.value_type)
    if t.is_decimal(at):
        return DecimalType(at.precision, at.scale)
    if t.is_timestamp(at):
        return AtomicType("timestamp" if at.tz is not None else "timestamp_ntz")
    if t.is_duration(at):
        return DayTimeIntervalType(0, 3)
    if t.is_interval(at):
        return AtomicType("interval")
    name = _SPARK_OF_ARROW.get(str(at))
    return AtomicType(name if name is not None else "string")


# Arrow type names (str(pa type)) -> Spark names, for what spark_type does not shape itself.
_SPARK_OF_ARROW = {
    "bool": "boolean",
    "int8": "byte",
    "int16": "short",
    "int32": "integer",
    "int64": "long",
    "uint8": "short",
    "uint16": "integer",
    "uint32": "long",
    "uint64": "long",
    "float": "float",
    "double": "double",
    "halffloat": "float",
    "string": "string",
    "large_string": "string",
    "string_view": "string",
    "binary": "binary",
    "large_binary": "binary",
    "binary_view": "binary",
    "date32[day]": "date",
    "null": "void",
}
