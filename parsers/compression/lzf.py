"""LZF: ning compress-lzf ``LZFOutputStream`` streams (codec ``lzf``) and raw LZF blocks.

The stream is a run of chunks, each ``'Z' 'V' type``: type 0 (stored) is followed by a
uint16 BE length and the bytes; type 1 (compressed) by uint16 BE compressed and uncompressed
lengths and standard LZF data. There is no end marker, so a file cut exactly at a chunk
boundary is only caught by the record layer.

Example::

    >>> from stateglass.parsers.compression import lzf
    >>> lzf.decompress(b"ZV\\x00\\x00\\x02hi")
    b'hi'
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from stateglass.parsers.compression.codec import Block, Data
from stateglass.parsers.errors import CorruptData, Truncated
from stateglass.parsers.limits import DEFAULT_LIMITS, Allowance, DecodeLimits

NAME = "lzf"
MAGIC = b"ZV"
TYPE_STORED = 0
TYPE_COMPRESSED = 1
_U16 = struct.Struct(">H")
_U16x2 = struct.Struct(">HH")


def _decode_block(src: bytes, ip: int, end: int, out: bytearray, expected: int, at: int) -> None:
    """Append the LZF block ``src[ip:end]`` to ``out``; ``at`` is the chunk offset for errors."""
    base = len(out)  # back-references never reach into earlier chunks
    while ip < end:
        ctrl = src[ip]
        ip += 1
        if ctrl < 32:
            run = ctrl + 1
            if ip + run > end:
                raise CorruptData("lzf: literal run overruns its chunk", at)
            out += src[ip : ip + run]
            ip += run
            continue
        length = ctrl >> 5
        if length == 7:
            if ip >= end:
                raise CorruptData("lzf: back-reference overruns its chunk", at)
            length += src[ip]
            ip += 1
        if ip >= end:
            raise CorruptData("lzf: back-reference overruns its chunk", at)
        distance = (((ctrl & 0x1F) << 8) | src[ip]) + 1
        ip += 1
        length += 2
        ref = len(out) - distance
        if ref < base:
            raise CorruptData("lzf: back-reference before the start of its chunk", at)
        if length <= distance:
            out += out[ref : ref + length]
        else:
            # Overlapping copy: byte-by-byte semantics repeat the last `distance` bytes.
            pattern = out[ref:]
            reps, rest = divmod(length, distance)
            out += pattern * reps + pattern[:rest]
    if len(out) - base != expected:
        raise CorruptData(
            f"lzf: chunk decoded to {len(out) - base} bytes, header says {expected}", at
        )


def _chunk(src: bytes, pos: int) -> tuple[int, int, int, int]:
    """``(type, data start, data end, decoded length)`` of the chunk at ``pos``; ``Truncated``
    when the bytes stop inside it."""
    size = len(src)
    if size - pos < 5:
        raise Truncated("lzf: chunk header cut short", pos)
    if src[pos : pos + 2] != MAGIC:
        raise CorruptData(f"lzf: bad chunk magic {src[pos : pos + 2]!r}, expected b'ZV'", pos)
    kind = src[pos + 2]
    if kind == TYPE_STORED:
        length = _U16.unpack_from(src, pos + 3)[0]
        if pos + 5 + length > size:
            raise Truncated("lzf: stored chunk cut short", pos)
        return kind, pos + 5, pos + 5 + length, length
    if kind == TYPE_COMPRESSED:
        if size - pos < 7:
            raise Truncated("lzf: chunk header cut short", pos)
        clen, ulen = _U16x2.unpack_from(src, pos + 3)
        if pos + 7 + clen > size:
            raise Truncated("lzf: compressed chunk cut short", pos)
        return kind, pos + 7, pos + 7 + clen, ulen
    raise CorruptData(f"lzf: unknown chunk type {kind}", pos + 2)


def decompress(data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> bytes:
    """Decode every LZF chunk in ``data``, within ``limits``."""
    src = data if isinstance(data, bytes) else bytes(data)
    size = len(src)
    if size == 0:
        raise Truncated("lzf: empty stream (no chunk)", 0)
    out = bytearray()
    pos = 0
    while pos < size:
        kind, start, end, length = _chunk(src, pos)
        if kind == TYPE_STORED:
            out += src[start:end]
        else:
            limits.check(NAME, len(out) + length, size, pos)
            _decode_block(src, start, end, out, length, pos)
        pos = end
    return bytes(out)


def iter_blocks(data: Data, start: int, allowance: Allowance) -> Iterator[Block]:
    """See :meth:`Codec.iter_blocks`: every chunk is a restart point."""
    src = data if isinstance(data, bytes) else bytes(data)
    size = len(src)
    pos = start
    while pos < size:
        try:
            kind, begin, end, length = _chunk(src, pos)
        except Truncated:
            break  # the tail is still being written
        allowance.claim(NAME, length, pos)
        out = bytearray()
        if kind == TYPE_STORED:
            out += src[begin:end]
        else:
            _decode_block(src, begin, end, out, length, pos)
        yield Block(pos, bytes(out))
        pos = end
    yield Block(pos, b"", ended=pos == size)


def block_size(block: Data) -> int | None:
    """A raw LZF block does not record its size: its container does."""
    return None


def decompress_block(block: Data, size: int | None, offset: int = 0) -> bytes:
    """One raw LZF block of ``size`` bytes (the container's word for it)."""
    if size is None:
        raise CorruptData("lzf: a raw block without a declared size", offset)
    src = bytes(block)
    out = bytearray()
    _decode_block(src, 0, len(src), out, size, offset)
    return bytes(out)
