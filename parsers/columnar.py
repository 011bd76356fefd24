"""Many UnsafeRows at once → one Arrow struct array, decoded a column at a time with numpy.

The rows of a partition sit back to back in one Arrow binary array. A row's fixed region
(null bitset, then one 8-byte slot per field) is gathered for every row at once into an
``(rows, slots)`` matrix of little-endian words; fixed-width fields are then columns of that
matrix, viewed as their Arrow type without any Python value in between, and variable-length
fields (``(offset << 32) | size`` slots) are gathered byte by byte into Arrow's
offsets-and-data layout. Nested structs recurse on the rows where they are not null.

The result is exactly what :func:`stateglass.parsers.unsaferow.row_decoder` gives, turned
into Arrow by :func:`stateglass.parsers.state_arrow.arrow_value`, with the one type mapping of
:func:`~stateglass.parsers.arrow_types.arrow_type` (``tests/parsers/test_columnar.py`` checks
that with hypothesis). Where the generated decoder would do something other than read a clean value
(an offset past the row, malformed UTF-8 it repairs, a decimal wider than its type), this
module does not guess: :func:`decode_struct` returns None and the caller decodes those rows
with the Python decoder, which repairs or raises as it always has.

Types decoded here: every type but calendar intervals and variants (whose Parquet column is
Spark's JSON text); a schema holding one of those is decoded by the Python decoder
(:func:`supported` says so up front).

Example::

    rows = pa.array([value_bytes, ...], type=pa.large_binary())
    column = decode_struct(value_schema, rows)  # None: use row_decoder for these rows
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from stateglass.parsers.arrow_types import arrow_type, unique_names
from stateglass.parsers.sparktypes import (
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
from stateglass.parsers.unsaferow import MAX_LONG_DIGITS

try:
    from stateglass.parsers import _speedups
except ImportError:  # not built, or STATEGLASS_PURE: every struct takes the numpy path
    _speedups = None  # type: ignore[assignment]

__all__ = ["arrow_type", "decode_struct", "supported", "unique_names"]

# Spark atomic type -> numpy dtype of its first bytes in the slot (Arrow's type: arrow_type).
_FIXED: dict[str, str] = {
    "byte": "<i1",
    "short": "<i2",
    "integer": "<i4",
    "long": "<i8",
    "float": "<f4",
    "double": "<f8",
    "date": "<i4",
    "timestamp": "<i8",
    "timestamp_ntz": "<i8",
}
_BYTES = np.arange(16, dtype=np.int64)


class _Fallback(Exception):
    """These rows need the Python decoder (it repairs them, or names what is wrong)."""


def supported(dt: DataType) -> bool:
    """Whether rows of ``dt`` (a struct) can be decoded here."""
    if isinstance(dt, StructType):
        return all(supported(f.data_type) for f in dt.fields)
    if isinstance(dt, ArrayType):
        return supported(dt.element_type)
    if isinstance(dt, MapType):
        return supported(dt.key_type) and supported(dt.value_type)
    if isinstance(dt, DecimalType):
        return 0 <= dt.scale <= dt.precision <= 38
    if isinstance(dt, (StringLikeType, YearMonthIntervalType, DayTimeIntervalType)):
        return True
    return isinstance(dt, AtomicType) and (
        dt.name in _FIXED or dt.name in ("boolean", "string", "binary", "void")
    )


def decode_struct(schema: StructType, rows: pa.Array) -> pa.StructArray | None:
    """Every row of ``rows`` (binary, one UnsafeRow each) as one struct array of ``schema``.

    None when some row is not clean (see the module docstring): decode those rows with
    :func:`stateglass.parsers.unsaferow.row_decoder` instead.
    """
    if not supported(schema):
        raise ValueError(f"not a columnar schema: {schema.simple_string()}")
    if rows.null_count:
        raise ValueError("rows must not be null")
    rows = rows.cast(pa.large_binary())
    _, offsets_buf, data_buf = rows.buffers()
    n = len(rows)
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[rows.offset : rows.offset + n + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else _EMPTY
    flat = _flat_fields(schema, offsets_buf, data_buf, rows.offset, n)
    if flat is not None:
        return _struct_array(schema, n, flat, None)
    start, stop = offsets[:-1], offsets[1:]
    try:
        children = _struct_fields(schema, data, start, stop, stop)
    except _Fallback:
        return None
    return _struct_array(schema, n, children, None)


def _flat_fields(
    schema: StructType, offsets: pa.Buffer, data: pa.Buffer | None, first: int, n: int
) -> list[pa.Array] | None:
    """The columns of a struct whose every field is fixed-width or a string or binary (an
    aggregate's counts and sums, a key of names), each row's slots copied in C without the
    GIL; None where that does not apply (no compiled module, another field type, a row not
    clean: the numpy path decides)."""
    compiled = getattr(_speedups, "flat_struct", None)
    kinds = _flat_kinds(schema)
    if compiled is None or data is None or kinds is None:
        return None
    made = compiled(offsets, data, first, n, tuple(size for _, size in kinds))
    return None if made is None else _flat_columns(kinds, n, made)


def fixed_field_sizes(schema: StructType) -> tuple[int, ...] | None:
    """Each field's size in the compiled loops' terms when every field of ``schema`` is
    fixed-width (an aggregate's value): the compiled merges then decode such rows as they
    take them (:func:`struct_of_fields` makes the struct). None otherwise."""
    kinds = _flat_kinds(schema)
    if kinds is None or any(size == 0 for _, size in kinds):
        return None
    return tuple(size for _, size in kinds)


def struct_of_fields(
    schema: StructType, n: int, made: list[tuple[Any, Any, int, Any]]
) -> pa.StructArray:
    """The struct array of ``n`` rows of ``schema`` from the fields a compiled loop decoded
    (per field: values, validity or None, null count, offsets or None)."""
    kinds = _flat_kinds(schema)
    columns = None if kinds is None else _flat_columns(kinds, n, made)
    # Only a string can fail its check, and a merge decodes fixed-width fields alone.
    assert columns is not None, "not a struct of fixed-width fields"
    return _struct_array(schema, n, columns, None)


def _flat_kinds(schema: StructType) -> list[tuple[Any, int]] | None:
    found = [_flat(f.data_type) for f in schema.fields]
    if not found or len(found) > 64 or None in found:
        return None
    return [kind for kind in found if kind is not None]


def _flat_columns(
    kinds: list[tuple[Any, int]], n: int, made: list[tuple[Any, Any, int, Any]]
) -> list[pa.Array] | None:
    """Arrow arrays over the compiled loop's buffers, not copied; None where a string is
    not UTF-8 (the Python decoder repairs it as Java does)."""
    columns = []
    for (typ, size), (values, bits, nulls, ends) in zip(kinds, made, strict=True):
        mask = None if bits is None else pa.py_buffer(bits)
        if size:
            columns.append(pa.Array.from_buffers(typ, n, [mask, pa.py_buffer(values)], nulls))
            continue
        binary = pa.Array.from_buffers(
            pa.binary(), n, [mask, pa.py_buffer(ends), pa.py_buffer(values)], nulls
        )
        if typ == pa.binary():
            columns.append(binary)
            continue
        try:
            # Arrow's check is as strict as Python's decode().
            columns.append(binary.cast(typ))
        except pa.ArrowInvalid:
            return None
    return columns


def _flat(dt: DataType) -> tuple[Any, int] | None:
    """A field's Arrow type and its size in the compiled loop's terms (0: a string or
    binary); None for a type it does not take."""
    fixed = _fixed(dt)
    if fixed is not None:
        typ, dtype = fixed
        return typ, np.dtype(dtype).itemsize
    if _is_string(dt) or (isinstance(dt, AtomicType) and dt.name == "binary"):
        return arrow_type(dt), 0
    return None


_EMPTY = np.zeros(0, dtype=np.uint8)


def _struct_array(
    schema: StructType, n: int, children: list[pa.Array], valid: np.ndarray | None
) -> pa.StructArray:
    validity = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    null_count = 0 if valid is None else n - int(np.count_nonzero(valid))
    return pa.StructArray.from_buffers(
        arrow_type(schema), n, [validity], null_count=null_count, children=children
    )


def _scatter(array: pa.Array, where: np.ndarray, n: int) -> pa.Array:
    """``array`` (a value per set position of ``where``) over ``n`` rows, null elsewhere."""
    if len(array) == n:
        return array
    positions = np.full(n, -1, dtype=np.int64)
    positions[where] = np.arange(len(array), dtype=np.int64)
    mask = positions < 0
    positions[mask] = 0
    if len(array) == 0:
        return pa.nulls(n, type=array.type)
    return array.take(pa.array(positions, mask=mask))


def _struct_fields(
    schema: StructType,
    data: np.ndarray,
    base: np.ndarray,
    end: np.ndarray,
    row_end: np.ndarray,
) -> list[pa.Array]:
    """The child arrays of structs starting at ``base`` (each within ``end``; the slots may
    run up to ``row_end``, the end of the whole row, as the generated decoder allows)."""
    fields = schema.fields
    if not fields:
        return []
    words = (len(fields) + 63) >> 6
    width = 8 * (words + len(fields))
    if not len(base):
        region = np.zeros((0, width), dtype=np.uint8)
    elif np.any(base + width > row_end):
        raise _Fallback
    else:
        # One gather for every row's fixed region, from a strided view of every width-byte
        # window of the data: the copy touches only the bytes wanted, no index matrix.
        region = np.lib.stride_tricks.sliding_window_view(data, width)[base]
    words_of = np.ascontiguousarray(region[:, : 8 * words]).view("<u8")
    out: list[pa.Array] = []
    for i, field in enumerate(fields):
        nulls = ((words_of[:, i >> 6] >> np.uint64(i & 63)) & np.uint64(1)).astype(bool)
        at = 8 * (words + i)
        raw = region[:, at : at + 8]
        out.append(_field(field.data_type, data, raw, nulls, base, end, row_end))
    return out


def _field(
    dt: DataType,
    data: np.ndarray,
    raw: np.ndarray,
    nulls: np.ndarray,
    base: np.ndarray,
    end: np.ndarray,
    row_end: np.ndarray,
) -> pa.Array:
    """One field's column from its slot bytes ``raw`` (rows, 8)."""
    m = len(raw)
    mask = pa.py_buffer(np.packbits(~nulls, bitorder="little")) if nulls.any() else None
    null_count = int(np.count_nonzero(nulls))
    if isinstance(dt, AtomicType) and dt.name == "void":
        return pa.nulls(m)
    if isinstance(dt, AtomicType) and dt.name == "boolean":
        values = raw[:, 0] != 0
        bits = pa.py_buffer(np.packbits(values, bitorder="little"))
        return pa.Array.from_buffers(pa.bool_(), m, [mask, bits], null_count=null_count)
    fixed = _fixed(dt)
    if fixed is not None:
        typ, dtype = fixed
        size = np.dtype(dtype).itemsize
        values = np.ascontiguousarray(raw[:, :size]).view(dtype).reshape(m)
        return pa.Array.from_buffers(typ, m, [mask, pa.py_buffer(values)], null_count=null_count)
    slot = np.ascontiguousarray(raw).view("<u8").reshape(m)
    if isinstance(dt, DecimalType) and dt.precision <= MAX_LONG_DIGITS:
        return _decimal(dt, slot.view("<i8"), nulls, mask, null_count)
    # Variable length: (offset << 32) | size, the offset relative to the struct's start.
    sizes = (slot & np.uint64(0xFFFFFFFF)).astype(np.int64)
    starts = (slot >> np.uint64(32)).astype(np.int64) + base
    valid = ~nulls
    if np.any((starts + sizes > end) & valid):
        raise _Fallback
    if isinstance(dt, StructType):
        where = np.flatnonzero(valid)
        children = _struct_fields(dt, data, starts[where], (starts + sizes)[where], row_end[where])
        if len(where) < m:
            children = [_scatter(c, where, m) for c in children]
        return _struct_array(dt, m, children, None if not null_count else valid)
    if isinstance(dt, (ArrayType, MapType)):
        where = np.flatnonzero(valid)
        stops = (starts + sizes)[where]
        if isinstance(dt, ArrayType):
            found = _array(dt.element_type, data, starts[where], stops, row_end[where])
        else:
            found = _map(dt, data, starts[where], stops, row_end[where])
        return _scatter(found, where, m)
    if isinstance(dt, DecimalType):
        return _large_decimal(dt, data, starts, sizes, nulls, mask, null_count)
    sizes[nulls] = 0
    binary = _gather_bytes(data, starts, sizes, mask, null_count)
    if _is_string(dt):
        try:
            # Arrow's check is as strict as Python's decode(): malformed text goes to the
            # Python decoder, which repairs it as Java does.
            return binary.cast(pa.string())
        except pa.ArrowInvalid as exc:
            raise _Fallback from exc
    return binary


def _fixed(dt: DataType) -> tuple[Any, str] | None:
    if isinstance(dt, AtomicType):
        dtype = _FIXED.get(dt.name)
    elif isinstance(dt, YearMonthIntervalType):
        dtype = "<i4"
    elif isinstance(dt, DayTimeIntervalType):
        dtype = "<i8"
    else:
        return None
    return None if dtype is None else (arrow_type(dt), dtype)


def _is_string(dt: DataType) -> bool:
    return isinstance(dt, StringLikeType) or (isinstance(dt, AtomicType) and dt.name == "string")


def _gather_bytes(
    data: np.ndarray, starts: np.ndarray, sizes: np.ndarray, mask: Any, null_count: int
) -> pa.Array:
    """The bytes ``data[starts[i] : starts[i] + sizes[i]]`` of each row, as a binary array."""
    m = len(starts)
    compiled = getattr(_speedups, "gather_bytes", None)
    gathered = None
    if compiled is not None:
        gathered = compiled(
            data, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(sizes, np.int64)
        )
    if gathered is not None:
        # One copy a row in C, without the GIL; numpy's index of every byte was most of a
        # string column's decoding (a count(*) reads the key column).
        return pa.Array.from_buffers(
            pa.large_binary(),
            m,
            [mask, pa.py_buffer(gathered[0]), pa.py_buffer(gathered[1])],
            null_count=null_count,
        ).cast(pa.binary())
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    if total:
        # Each output byte's source: its value's start, plus its place inside the value.
        index = np.repeat(starts - offsets[:-1], sizes) + np.arange(total, dtype=np.int64)
        payload = data[index]
    else:
        payload = _EMPTY
    return pa.Array.from_buffers(
        pa.large_binary(),
        m,
        [mask, pa.py_buffer(offsets), pa.py_buffer(payload)],
        null_count=null_count,
    ).cast(pa.binary())


def _checked_decimal(dt: DecimalType, words: np.ndarray, mask: Any, null_count: int) -> pa.Array:
    """(rows, 2) little-endian int64 words of 128-bit unscaled values -> ``decimal(p, s)``.

    Values with more digits than ``p`` are refused (full validation), as Arrow refuses the
    Python decoder's ``Decimal`` for them.
    """
    column = pa.Array.from_buffers(
        pa.decimal128(dt.precision, dt.scale),
        len(words),
        [mask, pa.py_buffer(np.ascontiguousarray(words))],
        null_count=null_count,
    )
    try:
        column.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise _Fallback from exc
    return column


def _decimal(
    dt: DecimalType, unscaled: np.ndarray, nulls: np.ndarray, mask: Any, null_count: int
) -> pa.Array:
    low = np.where(nulls, 0, unscaled)
    words = np.empty((len(low), 2), dtype="<i8")
    words[:, 0] = low
    words[:, 1] = low >> 63  # sign extension
    return _checked_decimal(dt, words, mask, null_count)


def _large_decimal(
    dt: DecimalType,
    data: np.ndarray,
    starts: np.ndarray,
    sizes: np.ndarray,
    nulls: np.ndarray,
    mask: Any,
    null_count: int,
) -> pa.Array:
    """Big-endian two's complement unscaled values (Java's ``BigInteger.toByteArray``)."""
    sizes = np.where(nulls, 0, sizes)
    if np.any(sizes > 16):
        raise _Fallback  # wider than any decimal(38) value: the Python decoder says so
    m = len(starts)
    # Byte j of a 16-byte big-endian word comes from start + size - 16 + j, when j is inside
    # the value; the bytes before it repeat the sign.
    index = (starts + sizes - 16)[:, None] + _BYTES
    inside = (16 - sizes)[:, None] <= _BYTES
    safe = np.where(inside, index, 0)
    big = data[safe] if len(data) else np.zeros((m, 16), dtype=np.uint8)
    first = data[np.where(sizes > 0, starts, 0)] if len(data) else np.zeros(m, dtype=np.uint8)
    sign = np.where((sizes > 0) & (first >= 0x80), 0xFF, 0).astype(np.uint8)
    big = np.where(inside, big, sign[:, None])
    words = np.ascontiguousarray(big[:, ::-1]).view("<i8")
    return _checked_decimal(dt, words, mask, null_count)


# UnsafeArrayData element sizes: fixed kinds packed at their natural size, others 8-byte slots.
_ELEMENT_SIZE = {"boolean": 1, "byte": 1, "short": 2, "integer": 4, "date": 4, "float": 4}


def _element_size(dt: DataType) -> int:
    if isinstance(dt, AtomicType):
        return _ELEMENT_SIZE.get(dt.name, 8)
    return 4 if isinstance(dt, YearMonthIntervalType) else 8


def _array(
    element: DataType, data: np.ndarray, base: np.ndarray, end: np.ndarray, row_end: np.ndarray
) -> pa.Array:
    """Arrays ``[n][null bits][elements][variable part]`` at ``base``, each within ``end``."""
    m = len(base)
    if m and np.any(base + 8 > end):
        raise _Fallback
    n = _int64_at(data, base)
    if np.any((n < 0) | (n > end - base)):
        raise _Fallback  # (and no overflow below: n is at most the array's bytes)
    size = _element_size(element)
    first = base + 8 + 8 * ((n + 63) >> 6)
    if np.any(first + n * size > end):
        raise _Fallback
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(n, out=offsets[1:])
    total = int(offsets[-1])
    row = np.repeat(np.arange(m, dtype=np.int64), n)
    index = np.arange(total, dtype=np.int64) - offsets[:-1][row]
    if isinstance(element, AtomicType) and element.name == "void":
        values: pa.Array = pa.nulls(total)
    else:
        bits = data[base[row] + 8 + (index >> 3)] if total else _EMPTY
        nulls = ((bits >> (index & 7).astype(np.uint8)) & 1).astype(bool)
        raw = np.zeros((total, 8), dtype=np.uint8)
        if total:
            at = first[row] + index * size
            raw[:, :size] = np.lib.stride_tricks.sliding_window_view(data, size)[at]
        # Variable elements: offsets are relative to the array, and stay within it.
        values = _field(element, data, raw, nulls, base[row], end[row], row_end[row])
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values)


def _map(
    dt: MapType, data: np.ndarray, base: np.ndarray, end: np.ndarray, row_end: np.ndarray
) -> pa.Array:
    """Maps ``[key array bytes][key array][value array]``: no null keys, as many values."""
    if len(base) and np.any(base + 8 > end):
        raise _Fallback
    key_bytes = _int64_at(data, base)
    if np.any((key_bytes < 0) | (key_bytes > end - base)):
        raise _Fallback
    split = base + 8 + key_bytes
    if np.any(split > end):
        raise _Fallback
    keys = _array(dt.key_type, data, base + 8, split, row_end)
    values = _array(dt.value_type, data, split, end, row_end)
    if not keys.offsets.equals(values.offsets) or keys.values.null_count:
        raise _Fallback  # the Python decoder names the damage
    return pa.MapArray.from_arrays(keys.offsets, keys.values, values.values)


def _int64_at(data: np.ndarray, at: np.ndarray) -> np.ndarray:
    if not len(at):
        return np.zeros(0, dtype=np.int64)
    return (
        np.ascontiguousarray(np.lib.stride_tricks.sliding_window_view(data, 8)[at])
        .view("<i8")
        .reshape(len(at))
    )
