"""Snappy: xerial ``SnappyOutputStream`` streams (codec ``snappy``) and raw snappy blocks.

Layout: ``\\x82SNAPPY\\0``, int32 BE version, int32 BE compatible version, then
``[int32 BE length][raw snappy block]`` until EOF. snappy-java also reads a second header
in place of a chunk length (concatenated streams), so we do too. The framing has no end
marker: a file cut exactly at a chunk boundary is only caught by the record layer. A raw
block (RocksDB's type 1, Spark 3.5's) starts with its own uncompressed size (a varint).

Example::

    >>> import cramjam
    >>> from stateglass.parsers.compression import snappy
    >>> block = bytes(cramjam.snappy.compress_raw(b"abc"))
    >>> head = MAGIC + (1).to_bytes(4, "big") * 2
    >>> snappy.decompress(head + len(block).to_bytes(4, "big") + block)
    b'abc'
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import cramjam

from stateglass.parsers.compression.codec import Block, Data
from stateglass.parsers.errors import CorruptData, Truncated
from stateglass.parsers.limits import DEFAULT_LIMITS, Allowance, DecodeLimits

NAME = "snappy"
MAGIC = b"\x82SNAPPY\x00"
HEADER_LENGTH = 16  # magic + version + compatible version
MINIMUM_COMPATIBLE_VERSION = 1
_INT = struct.Struct(">i")
# A chunk length equal to the first four magic bytes announces a concatenated stream.
_MAGIC_HEAD = _INT.unpack(MAGIC[:4])[0]
# Snappy cannot expand input by more than ~22x (a 2-byte copy emits at most 64 bytes), so a
# larger declared length is a corrupt varint; refusing it avoids a huge allocation.
_MAX_RATIO = 32


def _check_header(view: memoryview, pos: int) -> None:
    if len(view) - pos < HEADER_LENGTH:
        raise Truncated("snappy: stream header cut short", pos)
    if bytes(view[pos : pos + 8]) != MAGIC:
        raise CorruptData(
            f"snappy: bad magic {bytes(view[pos : pos + 8])!r}, expected {MAGIC!r}", pos
        )
    # snappy-java checks the writer's version, not the "compatible version" field.
    version = _INT.unpack_from(view, pos + 8)[0]
    if version < MINIMUM_COMPATIBLE_VERSION:
        raise CorruptData(f"snappy: incompatible stream version {version}", pos + 8)


def _chunk(view: memoryview, pos: int) -> tuple[int, int] | None:
    """``(data start, data end)`` of the chunk whose length is at ``pos``; None when a second
    stream header stands there (skip it); ``Truncated`` when the bytes stop inside it."""
    size = len(view)
    if size - pos < 4:
        raise Truncated("snappy: chunk length cut short", pos)
    length = _INT.unpack_from(view, pos)[0]
    if length == _MAGIC_HEAD:
        _check_header(view, pos)
        return None
    if length < 0:
        raise CorruptData(f"snappy: negative chunk length {length}", pos)
    start = pos + 4
    if start + length > size:
        raise Truncated(f"snappy: chunk cut short ({size - start} of {length} bytes)", pos)
    return start, start + length


def decompress(data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> bytes:
    """Decode a snappy-java stream into the bytes Spark wrote, within ``limits``."""
    view = memoryview(data)
    _check_header(view, 0)
    allowance = Allowance(limits, len(view))
    chunks: list[bytes] = []
    pos = HEADER_LENGTH
    while pos < len(view):
        chunk = _chunk(view, pos)
        if chunk is None:
            pos += HEADER_LENGTH
            continue
        start, end = chunk
        chunks.append(_claimed(view[start:end], allowance, pos))
        pos = end
    return b"".join(chunks)


def _claimed(block: memoryview, allowance: Allowance, offset: int) -> bytes:
    """A chunk's raw block, its declared size claimed from ``allowance`` first."""
    allowance.claim(NAME, _declared(block, offset), offset)
    return decompress_block(block, None, offset)


def iter_blocks(data: Data, start: int, allowance: Allowance) -> Iterator[Block]:
    """See :meth:`Codec.iter_blocks`: every chunk is a restart point."""
    view = memoryview(data)
    size = len(view)
    pos = start
    if start == 0:
        if size < HEADER_LENGTH:
            yield Block(0, b"", ended=False)
            return
        _check_header(view, 0)
        pos = HEADER_LENGTH
    while pos < size:
        try:
            chunk = _chunk(view, pos)
        except Truncated:
            break  # the tail is still being written
        if chunk is None:
            pos += HEADER_LENGTH
            continue
        begin, end = chunk
        yield Block(pos, _claimed(view[begin:end], allowance, pos))
        pos = end
    yield Block(pos, b"", ended=pos == size)


def _declared(block: Data, offset: int) -> int:
    """The block's own uncompressed size, refused past what snappy can produce."""
    try:
        declared = int(cramjam.snappy.decompress_raw_len(block))
    except cramjam.DecompressionError as exc:
        raise CorruptData(f"snappy: cannot decode chunk: {exc}", offset) from exc
    if declared > _MAX_RATIO * len(block) + 64:
        raise CorruptData(
            f"snappy: chunk claims {declared} bytes from {len(block)} compressed", offset
        )
    return declared


def block_size(block: Data) -> int | None:
    """The uncompressed size the raw block starts with."""
    return _declared(block, 0)


def decompress_block(block: Data, size: int | None, offset: int = 0) -> bytes:
    """One raw snappy block; ``size``, when the container declares one, must be its own."""
    declared = _declared(block, offset)
    if size is not None and size != declared:
        raise CorruptData(f"snappy: block declares {declared} bytes, its container {size}", offset)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise CorruptData(f"snappy: cannot decode chunk: {exc}", offset) from exc
