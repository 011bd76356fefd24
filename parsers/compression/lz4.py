"""lz4-java ``LZ4BlockOutputStream`` streams: Spark's default state-store codec.

A stream is a run of blocks, each ``"LZ4Block" token clen olen xxh32 payload`` (ints
little-endian), closed by an empty *end block*. Spark reads with ``stopOnEmptyBlock=false``,
so several streams may follow one another in one file; we read them all until EOF.

Example::

    >>> from stateglass.parsers.compression import lz4
    >>> lz4.decompress(b"LZ4Block\\x15" + bytes(12))
    b''
"""

from __future__ import annotations

import struct

import lz4.block
import xxhash

from stateglass.parsers.errors import ChecksumMismatch, CorruptData, Truncated
from stateglass.parsers.limits import DEFAULT_LIMITS, DecodeLimits

MAGIC = b"LZ4Block"
HEADER = struct.Struct("<8sBiiI")  # magic, token, compressed length, original length, checksum
HEADER_LENGTH = HEADER.size  # 21
METHOD_RAW = 0x10
METHOD_LZ4 = 0x20
LEVEL_BASE = 10  # block size = 1 << (LEVEL_BASE + token & 0x0F)
XXH32_SEED = 0x9747B28C
# lz4-java's StreamingXXHash32.asChecksum() keeps only the low 28 bits.
CHECKSUM_MASK = 0x0FFFFFFF


def _blocks(view: memoryview) -> list[tuple[int, int, int, int, int]]:
    """``(header offset, method, payload start, payload end, original length)`` of each data
    block, every header checked; reads no payload, so a bomb is refused before decoding."""
    size = len(view)
    if size == 0:
        raise Truncated("lz4: empty stream (no LZ4Block header)", 0)
    unpack_header = HEADER.unpack_from
    blocks: list[tuple[int, int, int, int, int]] = []
    pos = 0
    ended = False
    while pos < size:
        if size - pos < HEADER_LENGTH:
            raise Truncated(f"lz4: block header cut short ({size - pos} of 21 bytes)", pos)
        magic, token, clen, olen, check = unpack_header(view, pos)
        if magic != MAGIC:
            raise CorruptData(f"lz4: bad block magic {bytes(magic)!r}, expected b'LZ4Block'", pos)
        method = token & 0xF0
        if method != METHOD_RAW and method != METHOD_LZ4:
            raise CorruptData(f"lz4: unknown compression method 0x{method:02x}", pos + 8)
        # The same sanity checks as lz4-java's LZ4BlockInputStream.refill().
        if (
            olen > 1 << (LEVEL_BASE + (token & 0x0F))
            or olen < 0
            or clen < 0
            or (olen == 0) != (clen == 0)
            or (method == METHOD_RAW and olen != clen)
        ):
            raise CorruptData(
                f"lz4: impossible block lengths (token 0x{token:02x}, "
                f"compressed {clen}, original {olen})",
                pos,
            )
        if olen == 0:
            if check != 0:
                raise CorruptData("lz4: end block with a non-zero checksum", pos)
            ended = True
            pos += HEADER_LENGTH
            continue
        ended = False
        start = pos + HEADER_LENGTH
        end = start + clen
        if end > size:
            raise Truncated(f"lz4: block payload cut short ({size - start} of {clen} bytes)", pos)
        blocks.append((pos, method, start, end, olen))
        pos = end
    if not ended:
        raise Truncated("lz4: stream has no end block (file cut short?)", size)
    return blocks


def decompress(data: bytes, limits: DecodeLimits = DEFAULT_LIMITS) -> bytes:
    """Decode every block of every concatenated LZ4Block stream in ``data``.

    Raises ``Truncated`` if the bytes stop mid-block or without an end block,
    ``ChecksumMismatch`` if a block's XXH32 disagrees, ``LimitExceeded`` when the blocks'
    declared lengths add up to more than ``limits`` allow for a file of this size (checked
    before anything is decoded), ``CorruptData`` otherwise.
    """
    view = memoryview(data)
    blocks = _blocks(view)
    limits.check("lz4", sum(b[4] for b in blocks), len(view))
    block_decompress = lz4.block.decompress
    xxh32 = xxhash.xxh32_intdigest
    chunks: list[bytes | memoryview] = []
    for pos, method, start, end, olen in blocks:
        block: bytes | memoryview
        if method == METHOD_RAW:
            block = view[start:end]
        else:
            try:
                block = block_decompress(view[start:end], uncompressed_size=olen)
            except lz4.block.LZ4BlockError as exc:
                raise CorruptData(f"lz4: cannot decode block: {exc}", pos) from exc
            if len(block) != olen:
                # python-lz4 accepts a shorter result than uncompressed_size; lz4-java does not.
                raise CorruptData(
                    f"lz4: block decoded to {len(block)} bytes, header says {olen}", pos
                )
        check = HEADER.unpack_from(view, pos)[4]
        computed = xxh32(block, XXH32_SEED) & CHECKSUM_MASK
        if computed != check:
            raise ChecksumMismatch(
                f"lz4: block checksum 0x{check:07x} != computed 0x{computed:07x}", pos
            )
        chunks.append(block)
    if len(chunks) == 1 and isinstance(chunks[0], bytes):
        return chunks[0]  # one block: no second copy
    return b"".join(chunks)
