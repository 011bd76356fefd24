"""Which shuffle partition Spark puts a key in: ``HashPartitioning`` of the key's columns.

Stateful operators shuffle by ``pmod(Murmur3Hash(keys, seed 42), numPartitions)``, and each
shuffle partition has its own state store partition, so a key's partition follows from its
values (``Murmur3HashFunction.hash``: each column hashed with the previous result as seed,
structs field by field, nulls leave the seed as it was).

Example::

    >>> from stateglass.parsers.sparktypes import AtomicType, StructField, StructType
    >>> schema = StructType((StructField("k", AtomicType("string")),))
    >>> key_partition(schema, {"k": "a"}, 4) in range(4)
    True

Only the types whose hash is a plain function of the JSON value are covered (strings,
integers, booleans, timestamps, dates, structs of them): anything else gives None, and the
caller looks in every partition. :func:`row_partition` does the same for a decoded key row
(positional values, as :mod:`stateglass.parsers.unsaferow` gives them), and covers binary,
floating point and decimal columns too.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from stateglass.parsers.java_bytes import murmur3_fmix, murmur3_hash_bytes, murmur3_mix
from stateglass.parsers.sparktypes import AtomicType, DataType, DecimalType, StructType

SEED = 42
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_INTS = {"byte", "short", "integer"}
_LONGS = {"long"}
_MICROS = {"timestamp", "timestamp_ntz"}


class _Unsupported(Exception):
    pass


def hash_int(value: int, seed: int) -> int:
    """``Murmur3_x86_32.hashInt`` as an unsigned 32-bit int."""
    return murmur3_fmix(murmur3_mix(seed & 0xFFFFFFFF, value & 0xFFFFFFFF), 4)


def hash_long(value: int, seed: int) -> int:
    """``Murmur3_x86_32.hashLong`` as an unsigned 32-bit int."""
    h1 = murmur3_mix(seed & 0xFFFFFFFF, value & 0xFFFFFFFF)
    h1 = murmur3_mix(h1, (value >> 32) & 0xFFFFFFFF)
    return murmur3_fmix(h1, 8)


def _micros(text: str, ntz: bool) -> int:
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise _Unsupported from exc
    if when.tzinfo is None:
        if not ntz:
            raise _Unsupported  # a zone-less timestamp: the session zone is unknown here
        when = when.replace(tzinfo=dt.UTC)
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _hash(value: Any, data_type: DataType, seed: int) -> int:
    if value is None:
        return seed & 0xFFFFFFFF
    if isinstance(data_type, StructType):
        if not isinstance(value, dict):
            raise _Unsupported
        h = seed
        for f in data_type.fields:
            h = _hash(value.get(f.name), f.data_type, h)
        return h & 0xFFFFFFFF
    if not isinstance(data_type, AtomicType):
        raise _Unsupported
    name = data_type.name
    if name == "string" and isinstance(value, str):
        return murmur3_hash_bytes(value.encode("utf-8"), seed) & 0xFFFFFFFF
    if name == "boolean" and isinstance(value, bool):
        return hash_int(1 if value else 0, seed)
    if isinstance(value, bool):
        raise _Unsupported
    if name in _INTS | _LONGS and _integral(value):
        return (hash_int if name in _INTS else hash_long)(int(value), seed)
    if name in _MICROS and isinstance(value, str):
        return hash_long(_micros(value, name == "timestamp_ntz"), seed)
    if name == "date" and isinstance(value, str):
        try:
            day = dt.date.fromisoformat(value)
        except ValueError as exc:
            raise _Unsupported from exc
        return hash_int((day - _EPOCH.date()).days, seed)
    raise _Unsupported


def _integral(value: Any) -> bool:
    try:
        return int(value) == value
    except (TypeError, ValueError, ArithmeticError):
        return False


def key_partition(schema: StructType, key: dict[str, Any], num_partitions: int) -> int | None:
    """The partition of a key given as its JSON object (field name -> JSON value), or None
    when a type is not covered. Timestamps must carry their offset (``…Z``, ``…+01:00``)."""
    if num_partitions <= 0:
        return None
    try:
        h = _hash(key, schema, SEED)
    except _Unsupported:
        return None
    signed = h - (1 << 32) if h >> 31 else h
    return signed % num_partitions  # Python's % is Spark's pmod for a positive divisor


# Decimal.MAX_LONG_DIGITS: up to this precision Spark hashes the unscaled long.
_MAX_LONG_DIGITS = 18
_STRINGS = {"string", "binary"}


def _hash_decoded(value: Any, data_type: DataType, seed: int) -> int:
    """``Murmur3HashFunction.hash`` of one decoded value (``unsaferow``'s Python values)."""
    if value is None:
        return seed & 0xFFFFFFFF
    if isinstance(data_type, StructType):
        h = seed
        for f, v in zip(data_type.fields, value, strict=True):
            h = _hash_decoded(v, f.data_type, h)
        return h & 0xFFFFFFFF
    if isinstance(data_type, DecimalType) and isinstance(value, Decimal):
        unscaled = int(value.scaleb(data_type.scale))
        if data_type.precision <= _MAX_LONG_DIGITS:
            return hash_long(unscaled, seed)
        # BigInteger.toByteArray: minimal two's complement, big-endian.
        size = (unscaled + (unscaled < 0)).bit_length() // 8 + 1
        return murmur3_hash_bytes(unscaled.to_bytes(size, "big", signed=True), seed) & 0xFFFFFFFF
    if not isinstance(data_type, AtomicType):
        raise _Unsupported
    name = data_type.name
    if name in _STRINGS:
        data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
        return murmur3_hash_bytes(data, seed) & 0xFFFFFFFF
    if name == "boolean":
        return hash_int(1 if value else 0, seed)
    if name in _INTS or name == "date":
        return hash_int(int(value), seed)
    if name in _LONGS or name in _MICROS:
        return hash_long(int(value), seed)
    if name == "float":
        # Spark hashes -0.0 as 0.0 and every NaN as Java's canonical NaN.
        bits = 0 if value == 0 else struct.unpack("<i", struct.pack("<f", value))[0]
        return hash_int(0x7FC00000 if value != value else bits, seed)
    if name == "double":
        bits = 0 if value == 0 else struct.unpack("<q", struct.pack("<d", value))[0]
        return hash_long(0x7FF8000000000000 if value != value else bits, seed)
    raise _Unsupported


def row_partition(schema: StructType, row: Sequence[Any], num_partitions: int) -> int | None:
    """The partition of a decoded key row (one value per field of ``schema``), or None when
    a type is not covered (arrays, maps, intervals, variants)."""
    if num_partitions <= 0:
        return None
    try:
        h = _hash_decoded(tuple(row), schema, SEED)
    except (_Unsupported, TypeError, ValueError):
        return None
    signed = h - (1 << 32) if h >> 31 else h
    return signed % num_partitions


def covers(data_type: DataType) -> bool:
    """Whether :func:`row_partition` can hash every value of ``data_type``."""
    if isinstance(data_type, StructType):
        return all(covers(f.data_type) for f in data_type.fields)
    if isinstance(data_type, DecimalType):
        return True
    return isinstance(data_type, AtomicType) and data_type.name in (
        _STRINGS | _INTS | _LONGS | _MICROS | {"boolean", "date", "float", "double"}
    )


__all__ = ["covers", "hash_int", "hash_long", "key_partition", "row_partition"]
