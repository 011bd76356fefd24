"""Avro-encoded state rows (``spark.sql.streaming.stateStore.encodingFormat=avro``, 4.0+).

With Avro encoding every RocksDB key part and value of a transformWithState store holds one
Avro **binary** datum (no container, no fingerprint; the framing around it is in
:mod:`stateglass.parsers.rocksdb_encoding`). Spark writes it with the schema
``SchemaConverters.toAvroTypeWithDefaults(sparkSchema)`` as released in 4.0–4.3, which ignores
Spark's nullability:

* the row is a record; **every field** is the union ``["null", T]`` (branch index as a
  zig-zag varint: ``00`` null, ``02`` a value follows), except a ``void`` field, which is
  plain ``null`` and takes no bytes;
* a nested struct is ``["null", record]``, an array ``["null", array]``, a map
  ``["null", map]`` — never wrapped twice;
* array items and map values are wrapped in ``["null", …]`` only when they are structs,
  arrays or maps themselves;
* int/date → ``int``, long/timestamp/timestamp_ntz → ``long`` (zig-zag varints);
  float/double → 4/8 bytes little-endian; boolean → 1 byte; string/binary → long length ‖
  bytes; decimal(p, s) → ``fixed(minBytesForPrecision(p))``, big-endian two's complement;
  arrays and maps → blocks of ``long count`` (negative: ``-count`` items preceded by a long
  byte size) ending with a 0 count; map keys are strings.

Spark 4.3 cannot run a query whose state holds tinyint, smallint, char/varchar, intervals,
variant or maps with non-string keys in Avro encoding (no Avro schema, or one its
``AvroDeserializer`` refuses), so those types are :class:`UnsupportedFormat` here.

Decoded values follow the conventions of :mod:`stateglass.parsers.unsaferow`, so one renderer serves
both encodings. One difference in what Spark returns: it reads an Avro map into a
``java.util.HashMap`` and builds its MapData from that, so map entries come back in hash
order (:func:`java_hash_map_order`), not in the order they are stored.

Example::

    >>> from stateglass.parsers.sparktypes import parse_datatype
    >>> schema = parse_datatype('{"type":"struct","fields":['
    ...     '{"name":"cnt","type":"long","nullable":false,"metadata":{}},'
    ...     '{"name":"lastS","type":"string","nullable":true,"metadata":{}}]}')
    >>> avro_row_decoder(schema)(bytes.fromhex("02 02 02 04 78 31"))
    (1, 'x1')
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from stateglass.parsers.errors import CorruptData, Truncated, UnsupportedFormat
from stateglass.parsers.java_bytes import decode_utf8
from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DecimalType,
    MapType,
    StructType,
)
from stateglass.parsers.unsaferow import make_decimal
from stateglass.parsers.varint import uvarint

Reader = Callable[[bytes, int], tuple[Any, int]]
"""``read(buf, pos) -> (value, new_pos)``: decode one Avro value starting at ``pos``."""

RowDecoder = Callable[[bytes], tuple[Any, ...]]

_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1
# Spark's largest array (ByteArrayMethods.MAX_ROUNDED_ARRAY_LENGTH); longer is corruption.
MAX_ITEMS = (1 << 31) - 16
# Items of type void take no bytes, so only this sanity limit stops a corrupt count from
# building a list of billions of Nones.
MAX_VOID_ITEMS = 1 << 20


@lru_cache(maxsize=256)
def avro_row_decoder(schema: StructType) -> RowDecoder:
    """A function decoding one Avro datum written for ``schema`` to a tuple of column values.

    The whole datum must be consumed. Raises :class:`UnsupportedFormat` for types Spark's
    Avro state encoding does not support (see the module doc); decoding raises
    :class:`CorruptData` or :class:`Truncated` with the byte offset in the datum.
    """
    read = _record(schema, "row")

    def decode(data: bytes) -> tuple[Any, ...]:
        buf = bytes(data)
        try:
            row, pos = read(buf, 0)
        except RecursionError as exc:  # pragma: no cover - needs a pathologically deep schema
            raise CorruptData("Avro datum nests too deeply") from exc
        if pos != len(buf):
            raise CorruptData(f"{len(buf) - pos} unexpected bytes after the Avro record", pos)
        return row

    return decode


# ---------------------------------------------------------------------------------------------
# Primitive readers. Each checks its bounds, so no IndexError or struct.error escapes.


def _varint(buf: bytes, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    """Unsigned LEB128 of at most ``max_bytes`` bytes (Avro Java rejects longer ones)."""
    return uvarint(buf, pos, max_bytes, what)


def _read_int(buf: bytes, pos: int, what: str = "int") -> tuple[int, int]:
    if pos < len(buf) and buf[pos] < 0x80:
        b = buf[pos]
        return (b >> 1) ^ -(b & 1), pos + 1
    n, pos = _varint(buf, pos, 5, what)
    # Java keeps the low 32 bits of the fifth byte's shift.
    n &= _MASK32
    return (n >> 1) ^ -(n & 1), pos


def _read_long(buf: bytes, pos: int, what: str = "long") -> tuple[int, int]:
    if pos < len(buf) and buf[pos] < 0x80:
        b = buf[pos]
        return (b >> 1) ^ -(b & 1), pos + 1
    n, pos = _varint(buf, pos, 10, what)
    n &= _MASK64
    return (n >> 1) ^ -(n & 1), pos


def _read_bytes(buf: bytes, pos: int, what: str) -> tuple[bytes, int]:
    length, start = _read_long(buf, pos, f"{what} length")
    if length < 0:
        raise CorruptData(f"{what} has negative length {length}", pos)
    end = start + length
    if end > len(buf):
        raise Truncated(f"{what} of {length} bytes runs past the datum's end", pos)
    return buf[start:end], end


def _fixed_width(size: int, what: str, unpack: Callable[[bytes, int], Any]) -> Reader:
    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        end = pos + size
        if end > len(buf):
            raise Truncated(f"{what} needs {size} bytes", pos)
        return unpack(buf, pos), end

    return read


def _read_int_value(buf: bytes, pos: int) -> tuple[Any, int]:
    return _read_int(buf, pos)


def _read_long_value(buf: bytes, pos: int) -> tuple[Any, int]:
    return _read_long(buf, pos)


def _read_boolean(buf: bytes, pos: int) -> tuple[Any, int]:
    if pos >= len(buf):
        raise Truncated("boolean cut short", pos)
    # Avro Java: any byte other than 1 reads as false.
    return buf[pos] == 1, pos + 1


def _read_string(buf: bytes, pos: int) -> tuple[Any, int]:
    raw, pos = _read_bytes(buf, pos, "string")
    return _string_value(raw), pos


def _read_binary(buf: bytes, pos: int) -> tuple[Any, int]:
    return _read_bytes(buf, pos, "binary")


def _read_null(buf: bytes, pos: int) -> tuple[Any, int]:
    return None, pos


# ---------------------------------------------------------------------------------------------
# Value conventions shared with stateglass.parsers.unsaferow


def _string_value(raw: bytes) -> Any:
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return decode_utf8(raw)


# ---------------------------------------------------------------------------------------------
# Building readers from a Spark type


def _decimal_reader(data_type: DecimalType) -> Reader:
    size = min_bytes_for_precision(data_type.precision)
    limit = 10**data_type.precision
    scale = data_type.scale
    what = data_type.simple_string()

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        end = pos + size
        if end > len(buf):
            raise Truncated(f"{what} needs {size} bytes", pos)
        unscaled = int.from_bytes(buf[pos:end], "big", signed=True)
        if not -limit < unscaled < limit:
            # Spark's Decimal.set refuses it too (unscaled value too large for precision).
            raise CorruptData(f"{unscaled} does not fit {what}", pos)
        return make_decimal(unscaled, scale), end

    return read


def min_bytes_for_precision(precision: int) -> int:
    """Bytes Spark gives a decimal's ``fixed`` (``SchemaConverters.minBytesForPrecision``)."""
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


_ATOMIC: dict[str, Reader] = {
    "boolean": _read_boolean,
    "integer": _read_int_value,
    "date": _read_int_value,
    "long": _read_long_value,
    "timestamp": _read_long_value,
    "timestamp_ntz": _read_long_value,
    "float": _fixed_width(4, "float", lambda b, p: _FLOAT.unpack_from(b, p)[0]),
    "double": _fixed_width(8, "double", lambda b, p: _DOUBLE.unpack_from(b, p)[0]),
    "string": _read_string,
    "binary": _read_binary,
    "void": _read_null,
}

# Smallest encoding of a value, to refuse item counts the bytes cannot hold.
_MIN_SIZE = {"float": 4, "double": 8, "void": 0}


def _min_size(data_type: DataType, wrapped: bool) -> int:
    if wrapped:
        return 1
    if isinstance(data_type, AtomicType):
        return _MIN_SIZE.get(data_type.name, 1)
    if isinstance(data_type, DecimalType):
        return min_bytes_for_precision(data_type.precision)
    if isinstance(data_type, StructType):
        return sum(_min_size(f.data_type, not _is_void(f.data_type)) for f in data_type.fields)
    return 1


def _is_void(data_type: DataType) -> bool:
    return isinstance(data_type, AtomicType) and data_type.name == "void"


def _is_complex(data_type: DataType) -> bool:
    return isinstance(data_type, (StructType, ArrayType, MapType))


def _reader(data_type: DataType, what: str) -> Reader:
    """The reader of the *inner* Avro type of ``data_type`` (no null union around it)."""
    if isinstance(data_type, AtomicType) and data_type.name in _ATOMIC:
        return _ATOMIC[data_type.name]
    if isinstance(data_type, DecimalType):
        return _decimal_reader(data_type)
    if isinstance(data_type, StructType):
        return _record(data_type, what)
    if isinstance(data_type, ArrayType):
        return _array(data_type, what)
    if isinstance(data_type, MapType):
        return _map(data_type, what)
    # Spark 4.3 cannot build an Avro state encoder for these (checked with a live session):
    # intervals, char/varchar and variant have no Avro schema, and tinyint/smallint have
    # one that AvroDeserializer refuses, so a query with such state fails to start.
    raise UnsupportedFormat(
        f"{what} has type {data_type.simple_string()}, which Spark's Avro state encoding "
        "does not support"
    )


def _nullable(inner: Reader, what: str) -> Reader:
    """``["null", T]``: a branch index (0 or 1), then T for branch 1."""

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        if pos < len(buf):
            b = buf[pos]
            if b == 2:
                return inner(buf, pos + 1)
            if b == 0:
                return None, pos + 1
        branch, after = _read_int(buf, pos, f"union branch of {what}")
        if branch == 1:
            return inner(buf, after)
        if branch == 0:
            return None, after
        raise CorruptData(f"{what}: union branch {branch}, expected 0 (null) or 1", pos)

    return read


def _element(data_type: DataType, what: str) -> Reader:
    """Array items and map values: wrapped in a null union only if struct/array/map."""
    inner = _reader(data_type, what)
    return _nullable(inner, what) if _is_complex(data_type) else inner


def _record(schema: StructType, what: str) -> Reader:
    readers = tuple(
        _reader(f.data_type, f"{what}.{f.name}")
        if _is_void(f.data_type)
        else _nullable(_reader(f.data_type, f"{what}.{f.name}"), f"{what}.{f.name}")
        for f in schema.fields
    )

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        values: list[Any] = []
        append = values.append
        for field_reader in readers:
            value, pos = field_reader(buf, pos)
            append(value)
        return _struct_value(values), pos

    return read


def _block_count(
    buf: bytes, pos: int, min_size: int, what: str, max_items: int = MAX_ITEMS
) -> tuple[int, int]:
    """Read one block header: ``long count`` and, for a negative count, a byte size."""
    count, after = _read_long(buf, pos, f"{what} block count")
    if count < 0:
        count = -count
        size, after = _read_long(buf, after, f"{what} block size")
        if size < 0:
            raise CorruptData(f"{what} block has negative byte size {size}", pos)
    if count > max_items or count * min_size > len(buf) - after:
        raise CorruptData(f"{what} block of {count} items does not fit the datum", pos)
    return count, after


def _array(data_type: ArrayType, what: str) -> Reader:
    item = _element(data_type.element_type, f"{what}[]")
    min_size = _min_size(data_type.element_type, _is_complex(data_type.element_type))
    limit = MAX_ITEMS if min_size else MAX_VOID_ITEMS

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        items: list[Any] = []
        while True:
            count, pos = _block_count(buf, pos, min_size, what, limit)
            if not count:
                return _array_value(items), pos
            if len(items) + count > limit:
                raise CorruptData(f"{what} has over {limit} items", pos)
            for _ in range(count):
                value, pos = item(buf, pos)
                items.append(value)

    return read


def _map(data_type: MapType, what: str) -> Reader:
    if data_type.key_type != AtomicType("string"):
        raise UnsupportedFormat(
            f"{what} is {data_type.simple_string()}; Spark's Avro state encoder only writes "
            "maps with string keys"
        )
    value_reader = _element(data_type.value_type, f"{what}{{}}")
    min_size = 1 + _min_size(data_type.value_type, _is_complex(data_type.value_type))

    def read(buf: bytes, pos: int) -> tuple[Any, int]:
        raw_keys: list[bytes] = []
        values: list[Any] = []
        while True:
            count, pos = _block_count(buf, pos, min_size, what)
            if not count:
                return _map_value(raw_keys, values), pos
            for _ in range(count):
                key, pos = _read_bytes(buf, pos, "map key")
                value, pos = value_reader(buf, pos)
                raw_keys.append(key)
                values.append(value)

    return read


# ---------------------------------------------------------------------------------------------
# Map order. Spark reads an Avro map into a java.util.HashMap (Avro's fast reader:
# ``new HashMap<>()``, keys are ``Utf8``) and builds its MapData by iterating that, so the
# entries come back in hash order, not in stored order.

_TREEIFY_THRESHOLD = 8
_MIN_TREEIFY_CAPACITY = 64


def utf8_hash(raw: bytes) -> int:
    """``org.apache.avro.util.Utf8.hashCode()`` (``Arrays.hashCode`` of the signed bytes)."""
    h = 1
    for b in raw:
        h = (31 * h + (b - 256 if b > 127 else b)) & _MASK32
    return h


def java_hash_map_order(raw_keys: list[bytes]) -> list[int]:
    """Positions of the distinct keys in the order a default ``java.util.HashMap`` iterates.

    Within a bucket a HashMap keeps insertion order, and a resize keeps it too, so the order
    is (bucket in the final table, first insertion). The final capacity starts at 16 and
    doubles whenever the size passes 3/4 of it, or when a bucket reaches nine entries in a
    table smaller than 64. Not modelled: a bucket of nine or more entries in a table of 64 or
    more becomes a red-black tree, whose iteration order differs; that takes nine keys
    whose hashes agree in their low six or more bits (after ``h ^ h >>> 16``).
    """
    capacity, threshold = 16, 12
    spread: dict[bytes, int] = {}
    chains: dict[int, int] = {}
    for key in raw_keys:
        if key in spread:
            continue  # put() replaces the value in place
        h = utf8_hash(key)
        h ^= h >> 16
        spread[key] = h
        bucket = h & (capacity - 1)
        chains[bucket] = chains.get(bucket, 0) + 1
        grow = chains[bucket] > _TREEIFY_THRESHOLD and capacity < _MIN_TREEIFY_CAPACITY
        if grow:
            capacity, threshold = capacity * 2, threshold * 2
        if len(spread) > threshold:
            capacity, threshold = capacity * 2, threshold * 2
            grow = True
        if grow:
            chains = {}
            for value in spread.values():
                b = value & (capacity - 1)
                chains[b] = chains.get(b, 0) + 1
    first: dict[bytes, int] = {}
    for i, key in enumerate(raw_keys):
        first.setdefault(key, i)
    mask = capacity - 1
    return sorted(first.values(), key=lambda i: (spread[raw_keys[i]] & mask, i))


def _struct_value(values: list[Any]) -> Any:
    return tuple(values)


def _array_value(items: list[Any]) -> Any:
    return items


def _map_value(raw_keys: list[bytes], values: list[Any]) -> Any:
    if len(raw_keys) < 2:
        return [(_string_value(k), v) for k, v in zip(raw_keys, values, strict=True)]
    last = dict(zip(raw_keys, values, strict=True))  # a repeated key keeps its last value
    return [(_string_value(raw_keys[i]), last[raw_keys[i]]) for i in java_hash_map_order(raw_keys)]
