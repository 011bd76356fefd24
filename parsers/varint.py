"""Unsigned LEB128 varints, as Avro and RocksDB write them (7 bits a byte, low bits first)."""

from __future__ import annotations

from stateglass.parsers.errors import CorruptData, Truncated


def uvarint(
    buf: bytes | memoryview, pos: int, max_bytes: int, what: str, end: int | None = None
) -> tuple[int, int]:
    """``(value, position after it)`` of the varint at ``pos``, read no further than ``end``
    (default: the buffer's end) and at most ``max_bytes`` bytes long."""
    start = pos
    result = 0
    shift = 0
    size = len(buf) if end is None else end
    while True:
        if pos >= size:
            raise Truncated(f"{what} cut short", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 7 * max_bytes:
            raise CorruptData(f"invalid {what} encoding (over {max_bytes} bytes)", start)
