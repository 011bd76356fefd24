"""Test-only encoders for the formats that ``parsers/`` decodes, written from the Java side.

They mirror lz4-java ``LZ4BlockOutputStream``, snappy-java ``SnappyOutputStream``, ning
``LZFOutputStream``, Spark's ``DataOutputStream`` record streams and ``StateStoreChangelog``
writers, so hypothesis can check ``decode(encode(x)) == x``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence

import cramjam
import lz4.block
import xxhash

from stateglass.parsers.rowchecksum import crc32c

LZ4_END_BLOCK = struct.pack("<8sBiiI", b"LZ4Block", 0x15, 0, 0, 0)


def lz4_level(block_size: int) -> int:
    """lz4-java's ``compressionLevel``: ceil(log2(blockSize)) - 10, at least 0."""
    return max(0, (block_size - 1).bit_length() - 10)


def encode_lz4(
    raw: bytes, block_size: int = 32 * 1024, *, end: bool = True, force_raw: bool = False
) -> bytes:
    """One ``LZ4BlockOutputStream`` stream of ``raw``; blocks of ``block_size`` bytes."""
    level = lz4_level(block_size)
    out = []
    for start in range(0, len(raw), block_size):
        block = raw[start : start + block_size]
        check = xxhash.xxh32_intdigest(block, 0x9747B28C) & 0x0FFFFFFF
        packed = lz4.block.compress(block, store_size=False)
        if force_raw or len(packed) >= len(block):
            out.append(
                struct.pack("<8sBiiI", b"LZ4Block", 0x10 | level, len(block), len(block), check)
            )
            out.append(block)
        else:
            out.append(
                struct.pack("<8sBiiI", b"LZ4Block", 0x20 | level, len(packed), len(block), check)
            )
            out.append(packed)
    if end:
        out.append(struct.pack("<8sBiiI", b"LZ4Block", 0x10 | level, 0, 0, 0))
    return b"".join(out)


SNAPPY_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)


def encode_snappy(raw: bytes, block_size: int = 32 * 1024) -> bytes:
    """A ``SnappyOutputStream`` stream of ``raw``."""
    out = [SNAPPY_HEADER]
    for start in range(0, len(raw), block_size):
        block = bytes(cramjam.snappy.compress_raw(raw[start : start + block_size]))
        out.append(struct.pack(">i", len(block)))
        out.append(block)
    return b"".join(out)


def _lzf_block(raw: bytes) -> bytes:
    """Greedy LZF compression (liblzf format): literal runs and back-references."""
    out = bytearray()
    literals = bytearray()
    last: dict[bytes, int] = {}
    i = 0

    def flush() -> None:
        for start in range(0, len(literals), 32):
            run = literals[start : start + 32]
            out.append(len(run) - 1)
            out.extend(run)
        literals.clear()

    while i < len(raw):
        key = raw[i : i + 3]
        ref = last.get(key) if len(key) == 3 else None
        last[key] = i
        if ref is not None and 0 < i - ref <= 8192:
            length = 3
            while i + length < len(raw) and length < 264 and raw[ref + length] == raw[i + length]:
                length += 1
            flush()
            distance = i - ref - 1
            code = length - 2
            if code < 7:
                out.append((code << 5) | (distance >> 8))
            else:
                out.append((7 << 5) | (distance >> 8))
                out.append(code - 7)
            out.append(distance & 0xFF)
            i += length
        else:
            literals.append(raw[i])
            i += 1
    flush()
    return bytes(out)


def encode_lzf(raw: bytes, chunk_size: int = 0xFFFF, *, compress: bool = True) -> bytes:
    """An ``LZFOutputStream`` stream: compressed chunks, or stored ones if not smaller."""
    out = []
    for start in range(0, len(raw), chunk_size):
        chunk = raw[start : start + chunk_size]
        packed = _lzf_block(chunk) if compress else chunk
        if compress and len(packed) < len(chunk):
            out.append(b"ZV\x01" + struct.pack(">HH", len(packed), len(chunk)) + packed)
        else:
            out.append(b"ZV\x00" + struct.pack(">H", len(chunk)) + chunk)
    return b"".join(out)


def encode_records(records: Iterable[tuple[bytes, bytes | None]]) -> bytes:
    """A ``.delta``/``.snapshot`` record stream (before compression)."""
    out = []
    for key, value in records:
        out.append(struct.pack(">i", len(key)) + key)
        out.append(
            struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
        )
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def write_utf(text: str) -> bytes:
    """``DataOutputStream.writeUTF``: modified UTF-8 (NUL as C0 80, non-BMP as surrogates)."""
    units = []
    for char in text:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            units += [chr(0xD800 + (code >> 10)), chr(0xDC00 + (code & 0x3FF))]
        else:
            units.append(char)
    body = "".join(units).encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")
    return struct.pack(">H", len(body)) + body


_TYPE_BYTES = {"put": 0x01, "delete": 0x10, "merge": 0x11}


def encode_changelog(
    version: int,
    records: Sequence[tuple[str, bytes, bytes | None]],
    lineage: Sequence[tuple[int, str]] = (),
) -> bytes:
    """A ``StateStoreChangelogWriterV<version>`` file (before compression)."""
    out = []
    if version >= 2:
        out.append(write_utf(f"v{version}"))
    if version >= 3:
        items = [{"version": v, "checkpointUniqueId": uid} for v, uid in lineage]
        # json4s writes non-ASCII characters as they are.
        out.append(write_utf(json.dumps(items, separators=(",", ":"), ensure_ascii=False)))
    typed = version in (2, 4)
    for kind, key, value in records:
        if typed:
            out.append(bytes([_TYPE_BYTES[kind]]))
        out.append(struct.pack(">i", len(key)) + key)
        out.append(
            struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value
        )
    out.append(b"\x00" if typed else struct.pack(">i", -1))
    return b"".join(out)


def with_single_checksum(key: bytes, value: bytes) -> bytes:
    """``encodeSingleValueRowWithChecksum``: LE32(CRC32C(key ‖ value)) ‖ value."""
    return struct.pack("<I", crc32c(key + value)) + value


def with_value_checksum(key: bytes, value: bytes) -> bytes:
    """``encodeValueRowWithChecksum``: LE32 crc ‖ LE32 len ‖ value."""
    return struct.pack("<Ii", crc32c(key + value), len(value)) + value


def with_key_checksum(key: bytes) -> bytes:
    """``encodeKeyRowWithChecksum``: LE32(CRC32C(key)) ‖ key."""
    return struct.pack("<I", crc32c(key)) + key
