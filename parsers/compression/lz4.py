"""LZ4: lz4-java's ``LZ4BlockOutputStream`` (Spark's default codec) and raw LZ4 blocks.

Decoded in every framing; encoded (:func:`compress`) as a whole stream, for the state files a
rewrite writes.

A stream is a run of blocks, each ``"LZ4Block" token clen olen xxh32 payload`` (ints
little-endian), closed by an empty *end block*. Spark reads with ``stopOnEmptyBlock=false``,
so several streams may follow one another in one file; we read them all until EOF. RocksDB
stores raw LZ4 blocks (type 4, and LZ4HC's type 5) and declares their size itself.

Example::

    >>> from stateglass.parsers.compression import lz4
    >>> lz4.decompress(b"LZ4Block\\x15" + bytes(12))
    b''
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import lz4.block
import xxhash

from stateglass.parsers.compression.codec import Block, Data
from stateglass.parsers.errors import ChecksumMismatch, CorruptData, Truncated
from stateglass.parsers.limits import DEFAULT_LIMITS, Allowance, DecodeLimits

try:
    from stateglass.parsers import _speedups
except ImportError:  # not built, or STATEGLASS_PURE: every block is decoded here
    _speedups = None  # type: ignore[assignment]

NAME = "lz4"
MAGIC = b"LZ4Block"
HEADER = struct.Struct("<8sBiiI")  # magic, token, compressed length, original length, checksum
HEADER_LENGTH = HEADER.size  # 21
METHOD_RAW = 0x10
METHOD_LZ4 = 0x20
LEVEL_BASE = 10  # block size = 1 << (LEVEL_BASE + token & 0x0F)
XXH32_SEED = 0x9747B28C
# lz4-java's StreamingXXHash32.asChecksum() keeps only the low 28 bits.
CHECKSUM_MASK = 0x0FFFFFFF


def _header(view: memoryview, pos: int) -> tuple[int, int, int]:
    """``(method, compressed length, original length)`` of the block header at ``pos``, checked
    as lz4-java's ``LZ4BlockInputStream.refill()`` checks it (``olen`` 0: an end block)."""
    magic, token, clen, olen, check = HEADER.unpack_from(view, pos)
    if magic != MAGIC:
        raise CorruptData(f"lz4: bad block magic {bytes(magic)!r}, expected b'LZ4Block'", pos)
    method = token & 0xF0
    if method != METHOD_RAW and method != METHOD_LZ4:
        raise CorruptData(f"lz4: unknown compression method 0x{method:02x}", pos + 8)
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
    if olen == 0 and check != 0:
        raise CorruptData("lz4: end block with a non-zero checksum", pos)
    return method, clen, olen


def _blocks(view: memoryview) -> list[tuple[int, int, int, int]]:
    """``(header offset, method, payload end, original length)`` of each data
    block, every header checked; reads no payload, so a bomb is refused before decoding."""
    size = len(view)
    if size == 0:
        raise Truncated("lz4: empty stream (no LZ4Block header)", 0)
    blocks: list[tuple[int, int, int, int]] = []
    pos = 0
    ended = False
    while pos < size:
        if size - pos < HEADER_LENGTH:
            raise Truncated(f"lz4: block header cut short ({size - pos} of 21 bytes)", pos)
        method, clen, olen = _header(view, pos)
        if olen == 0:
            ended = True
            pos += HEADER_LENGTH
            continue
        ended = False
        start = pos + HEADER_LENGTH
        end = start + clen
        if end > size:
            raise Truncated(f"lz4: block payload cut short ({size - start} of {clen} bytes)", pos)
        blocks.append((pos, method, end, olen))
        pos = end
    if not ended:
        raise Truncated("lz4: stream has no end block (file cut short?)", size)
    return blocks


def _decode(view: memoryview, pos: int, method: int, end: int, olen: int) -> bytes | memoryview:
    """The block whose header is at ``pos`` and payload ends at ``end``, decoded and its
    checksum checked."""
    payload = view[pos + HEADER_LENGTH : end]
    block = payload if method == METHOD_RAW else decompress_block(payload, olen, pos)
    check = HEADER.unpack_from(view, pos)[4]
    computed = xxhash.xxh32_intdigest(block, XXH32_SEED) & CHECKSUM_MASK
    if computed != check:
        raise ChecksumMismatch(
            f"lz4: block checksum 0x{check:07x} != computed 0x{computed:07x}", pos
        )
    return block


def decompress(data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> bytes:
    """Decode every block of every concatenated LZ4Block stream in ``data``.

    Raises ``Truncated`` if the bytes stop mid-block or without an end block,
    ``ChecksumMismatch`` if a block's XXH32 disagrees, ``LimitExceeded`` when the blocks'
    declared lengths add up to more than ``limits`` allow for a file of this size (checked
    before anything is decoded), ``CorruptData`` otherwise.
    """
    compiled = getattr(_speedups, "lz4_stream", None)
    if compiled is not None:
        # The same checks and result in C, a block at a time without the GIL; None: what is
        # wrong is named by the Python reader.
        whole = compiled(data, limits.budget(len(data)))
        if whole is not None:
            return whole
    return decompress_here(data, limits)


def decompress_here(data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> bytes:
    """:func:`decompress` in Python, block by block: the specification the compiled reader
    agrees with, and what names a damaged stream."""
    view = memoryview(data)
    blocks = _blocks(view)
    limits.check(NAME, sum(b[3] for b in blocks), len(view))
    chunks = [_decode(view, *block) for block in blocks]
    if len(chunks) == 1 and isinstance(chunks[0], bytes):
        return chunks[0]  # one block: no second copy
    return b"".join(chunks)


def iter_blocks(data: Data, start: int, allowance: Allowance) -> Iterator[Block]:
    """See :meth:`Codec.iter_blocks`: every block is a restart point."""
    view = memoryview(data)
    size = len(view)
    pos = start
    ended = start > 0  # resuming after a block: the stream is as complete as we know
    while size - pos >= HEADER_LENGTH:
        method, clen, olen = _header(view, pos)
        if olen == 0:
            pos += HEADER_LENGTH
            ended = True
            continue
        end = pos + HEADER_LENGTH + clen
        if end > size:
            ended = False
            break
        allowance.claim(NAME, olen, pos)
        yield Block(pos, bytes(_decode(view, pos, method, end, olen)))
        pos = end
        ended = False
    yield Block(pos, b"", ended=ended and pos == size)


BLOCK_SIZE = 32 * 1024  # spark.io.compression.lz4.blockSize's default


def _level(block_size: int) -> int:
    # lz4-java: the token's level is ceil(log2(blockSize)) - 10, at least 0.
    return max(0, (block_size - 1).bit_length() - LEVEL_BASE)


def compress(data: Data, block_size: int = BLOCK_SIZE) -> bytes:
    """``data`` as lz4-java's ``LZ4BlockOutputStream`` writes it for Spark's
    ``LZ4CompressionCodec``: blocks of at most ``block_size`` bytes, each stored raw when
    compressing does not shrink it, then the end block (``finish()``)."""
    level = _level(block_size)
    view = memoryview(data)
    out: list[bytes] = []
    for start in range(0, len(view), block_size):
        chunk = bytes(view[start : start + block_size])
        check = xxhash.xxh32_intdigest(chunk, XXH32_SEED) & CHECKSUM_MASK
        packed = lz4.block.compress(chunk, store_size=False)
        if len(packed) >= len(chunk):
            method, payload = METHOD_RAW, chunk
        else:
            method, payload = METHOD_LZ4, packed
        out.append(HEADER.pack(MAGIC, method | level, len(payload), len(chunk), check))
        out.append(payload)
    out.append(HEADER.pack(MAGIC, METHOD_RAW | level, 0, 0, 0))
    return b"".join(out)


def block_size(block: Data) -> int | None:
    """A raw LZ4 block does not record its size: its container does."""
    return None


def decompress_block(block: Data, size: int | None, offset: int = 0) -> bytes:
    """One raw LZ4 block of ``size`` bytes (the container's word for it)."""
    if size is None:
        raise CorruptData("lz4: a raw block without a declared size", offset)
    try:
        out = lz4.block.decompress(block, uncompressed_size=size)
    except lz4.block.LZ4BlockError as exc:
        raise CorruptData(f"lz4: cannot decode block: {exc}", offset) from exc
    if len(out) != size:
        # python-lz4 accepts a shorter result than uncompressed_size; lz4-java does not.
        raise CorruptData(f"lz4: block decoded to {len(out)} bytes, header says {size}", offset)
    return out
