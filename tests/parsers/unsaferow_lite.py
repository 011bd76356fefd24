"""A deliberately small UnsafeRow reader used only to check the RocksDB framing in tests.

It is strict about bounds and alignment so that a mis-framed row fails loudly; the real
decoder lives in ``parsers/unsaferow.py`` (written separately).
"""

from __future__ import annotations

import struct
from typing import Any

from stateglass.parsers.sparktypes import AtomicType, DataType, StructType

_FIXED = {
    "boolean": lambda b: b[0] != 0,
    "byte": lambda b: struct.unpack_from("<b", b)[0],
    "short": lambda b: struct.unpack_from("<h", b)[0],
    "integer": lambda b: struct.unpack_from("<i", b)[0],
    "date": lambda b: struct.unpack_from("<i", b)[0],
    "long": lambda b: struct.unpack_from("<q", b)[0],
    "timestamp": lambda b: struct.unpack_from("<q", b)[0],
    "timestamp_ntz": lambda b: struct.unpack_from("<q", b)[0],
    "float": lambda b: struct.unpack_from("<f", b)[0],
    "double": lambda b: struct.unpack_from("<d", b)[0],
}


def row_size_ok(data: bytes, num_fields: int) -> bool:
    """Whether ``data`` could be an UnsafeRow with ``num_fields`` fields."""
    fixed = (num_fields + 63) // 64 * 8 + 8 * num_fields
    return len(data) >= fixed and len(data) % 8 == 0


def decode_row(data: bytes, schema: StructType) -> tuple[Any, ...]:
    """Decode an UnsafeRow; variable-length values other than strings/structs stay bytes."""
    n = len(schema.fields)
    assert row_size_ok(data, n), f"{len(data)} bytes cannot be a {n}-field UnsafeRow"
    bitset = (n + 63) // 64 * 8
    values: list[Any] = []
    for i, field in enumerate(schema.fields):
        if data[i // 8] >> (i % 8) & 1:
            values.append(None)
            continue
        slot = data[bitset + 8 * i : bitset + 8 * i + 8]
        values.append(_value(data, slot, field.data_type))
    return tuple(values)


def _value(row: bytes, slot: bytes, data_type: DataType) -> Any:
    if isinstance(data_type, AtomicType) and data_type.name in _FIXED:
        return _FIXED[data_type.name](slot)
    if isinstance(data_type, AtomicType) and data_type.name == "void":
        return None
    (word,) = struct.unpack("<Q", slot)
    offset, size = word >> 32, word & 0xFFFFFFFF
    assert offset + size <= len(row), "variable-length field points past the row"
    chunk = row[offset : offset + size]
    if isinstance(data_type, StructType):
        return decode_row(chunk, data_type)
    if isinstance(data_type, AtomicType) and data_type.name == "string":
        return chunk.decode("utf-8")
    return chunk
