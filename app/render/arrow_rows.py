"""Arrow rows (a SQL result) as the values :mod:`stateglass.parsers.unsaferow` decodes, so that
the renderers of decoded rows (Spark's JSON, the text table) print them: the way back of
:mod:`stateglass.app.render.arrow_values`.

Example::

    decoded = decoded_batch(batch, "UTC")
    render = render_row(StructType(...decoded.columns...), "UTC")
    lines = [render(row) for row in decoded.rows]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from stateglass.app.errors import UnprintableValue
from stateglass.app.render.rows_to_json import to_python
from stateglass.parsers.arrow_types import spark_type
from stateglass.parsers.sparktypes import AtomicType, StructField, StructType
from stateglass.parsers.state_rows import Column

_STRING = AtomicType("string")
# Microseconds in one unit of an Arrow timestamp or duration (nanoseconds divide).
_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1}
_MS_PER_DAY = 86_400_000
# DuckDB's infinite timestamps and dates as Arrow holds them: the storage's largest integer
# and its negation. Spark's types have no such value, so they print as DuckDB writes them.
_INFINITE_TIMESTAMPS = {2**63 - 1: "infinity", -(2**63 - 1): "-infinity"}
_INFINITE_DATES = {2**31 - 1: "infinity", -(2**31 - 1): "-infinity"}


class _Infinite(Exception):
    """An infinite timestamp or date met while decoding: DuckDB's text of it."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


def _as_micros(unit: str, infinite: dict[int, str]) -> Callable[[int], int]:
    def micros(n: int) -> int:
        if n in infinite:
            raise _Infinite(infinite[n])
        # Spark keeps microseconds: nanoseconds below one are dropped, floored as Spark
        # floors a finer instant.
        return n // 1000 if unit == "ns" else n * _MICROS[unit]

    return micros


# Digits of a second's fraction in each unit of an Arrow time of day.
_FRACTION_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _time_text(unit: str) -> Callable[[int], str]:
    """DuckDB's text of a time of day held as ``unit``s since midnight (``24:00:00`` and
    nanoseconds included, which Python's ``time`` has not): the fraction's trailing zeros
    dropped, as DuckDB drops them."""
    digits = _FRACTION_DIGITS[unit]
    per_second = 10**digits

    def text(n: int) -> str:
        seconds, fraction = divmod(n, per_second)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        clock = f"{hour:02d}:{minute:02d}:{second:02d}"
        return f"{clock}.{fraction:0{digits}d}".rstrip("0") if fraction else clock

    return text


def _as_days(n: int) -> int:
    if n in _INFINITE_DATES:
        raise _Infinite(_INFINITE_DATES[n])
    return n


def decoded_value(at: Any) -> Callable[[Any], Any]:
    """Turn a non-null Python value of Arrow type ``at`` (``to_pylist`` of the column cast to
    :func:`integer_type`) into what :mod:`stateglass.parsers.unsaferow` decodes for its Spark
    type (:func:`stateglass.parsers.arrow_types.spark_type`): the inverse of
    :func:`arrow_value`, so that the renderers of decoded rows (Spark's JSON, the text table)
    take Arrow rows."""
    import pyarrow as pa

    t = pa.types
    if t.is_struct(at):
        convs = [decoded_value(at.field(i).type) for i in range(at.num_fields)]
        return lambda d: tuple(
            None if v is None else c(v) for c, v in zip(convs, d.values(), strict=True)
        )
    if t.is_map(at):
        key, item = decoded_value(at.key_type), decoded_value(at.item_type)
        return lambda pairs: [(key(k), None if v is None else item(v)) for k, v in pairs]
    if t.is_list(at) or t.is_large_list(at) or t.is_fixed_size_list(at) or t.is_list_view(at):
        elem = decoded_value(at.value_type)
        return lambda xs: [None if x is None else elem(x) for x in xs]
    if t.is_dictionary(at):
        return decoded_value(at.value_type)
    if t.is_timestamp(at):
        return _as_micros(at.unit, _INFINITE_TIMESTAMPS)
    if t.is_date32(at):
        return _as_days
    if t.is_date64(at):
        return lambda ms: ms // _MS_PER_DAY
    if t.is_duration(at):
        return _as_micros(at.unit, {})
    if t.is_interval(at):
        return lambda iv: (iv.months, iv.days, iv.nanoseconds // 1000)
    if t.is_time(at):
        return _time_text(at.unit)
    if spark_type(at) == _STRING and not (
        t.is_string(at) or t.is_large_string(at) or t.is_string_view(at)
    ):
        return str  # a type Spark has no JSON for (a UUID): its text
    return lambda v: v


def integer_type(at: Any) -> Any:
    """``at`` with every timestamp, date, duration and time of day in it (nested ones too)
    as the integer Arrow stores it in: Python's ``datetime`` holds no nanoseconds, no year
    past 9999, no infinity and no ``24:00:00``, and the renderers take the integers anyway."""
    import pyarrow as pa

    t = pa.types
    if t.is_timestamp(at) or t.is_duration(at) or t.is_date64(at) or t.is_time64(at):
        return pa.int64()
    if t.is_date32(at) or t.is_time32(at):
        return pa.int32()
    if t.is_dictionary(at):
        return integer_type(at.value_type)
    if t.is_struct(at):
        return pa.struct([f.with_type(integer_type(f.type)) for f in at])
    if t.is_map(at):
        key, item = at.key_field, at.item_field
        return pa.map_(
            key.with_type(integer_type(key.type)),
            item.with_type(integer_type(item.type)),
            keys_sorted=at.keys_sorted,
        )
    if t.is_list(at) or t.is_large_list(at) or t.is_fixed_size_list(at):
        item = at.value_field.with_type(integer_type(at.value_type))
        if t.is_large_list(at):
            return pa.large_list(item)
        return pa.list_(item, at.list_size if t.is_fixed_size_list(at) else -1)
    return at


def _values(column: Any) -> list[Any]:
    wanted = integer_type(column.type)
    held = column if wanted == column.type else column.cast(wanted)
    convert = decoded_value(column.type)
    return [None if v is None else convert(v) for v in held.to_pylist()]


def _texts(column: Any, dt: Any, time_zone: str) -> list[Any]:
    """A timestamp or date column holding an infinity, as text: Spark's for the finite
    values (what the column's type prints), DuckDB's for the infinite ones."""
    spark_text = to_python(StructType((StructField("v", dt),)), time_zone)
    convert = decoded_value(column.type)
    out: list[Any] = []
    for v in column.cast(integer_type(column.type)).to_pylist():
        try:
            out.append(None if v is None else spark_text((convert(v),))["v"])
        except _Infinite as infinite:
            out.append(infinite.text)
    return out


class DecodedBatch(NamedTuple):
    """A record batch's columns with their Spark types, and its decoded rows."""

    columns: tuple[Column, ...]
    rows: Iterator[tuple[Any, ...]]


def decoded_batch(batch: Any, time_zone: str) -> DecodedBatch:
    """The rows of an Arrow record batch as :func:`decoded_value` gives each column's values,
    and each column's Spark type: a string for a timestamp or date column holding one of
    DuckDB's infinities (in this batch), printed as :func:`_texts` says.

    Raises :class:`~stateglass.app.errors.UnprintableValue`, naming the column, for a value
    nothing prints (an infinity inside a struct, list or map)."""
    import pyarrow as pa

    columns: list[Column] = []
    values: list[list[Any]] = []
    for field, column in zip(batch.schema, batch.columns, strict=True):
        dt = spark_type(field.type)
        try:
            values.append(_values(column))
        except _Infinite as infinite:
            if not (pa.types.is_timestamp(field.type) or pa.types.is_date(field.type)):
                raise UnprintableValue(
                    field.name, f"{infinite.text} inside a {field.type} has no Spark text"
                ) from None
            values.append(_texts(column, dt, time_zone))
            dt = _STRING
        except (ValueError, OverflowError, pa.ArrowException) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise UnprintableValue(field.name, f"cannot print its {field.type} ({why})") from exc
        columns.append((field.name, dt))
    return DecodedBatch(tuple(columns), zip(*values, strict=True))
