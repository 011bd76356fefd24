"""Decode the complete prefix of an event log that Spark may still be writing.

Spark compresses event logs with the same codecs as state files (``CompressionCodec``), but a
log is read while it grows: its tail may stop mid-block. Each decoder here decodes every
complete block from a restart point and says where decoding may restart later, instead of
raising ``Truncated`` like the whole-file decoders in ``stateglass.parsers.compression``.

Restart points are where the codec keeps no state from earlier bytes: every block of lz4-java's
``LZ4BlockOutputStream``, xerial snappy's chunks and LZF's chunks; for zstd, the start of a
frame (zstd-jni's stream as Spark uses it ends a frame at every flush, so an event log is many
small frames; a block inside a frame may refer to earlier ones).

Example::

    >>> decoded = decode_prefix("none", b"line 1\\nhalf", 0)
    >>> decoded.text, decoded.restarts
    (b'line 1\\nhalf', ((0, 0),))
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import cramjam
import lz4.block
import xxhash
import zstandard

from stateglass.parsers.compression import lz4 as lz4_stream
from stateglass.parsers.compression import lzf as lzf_stream
from stateglass.parsers.compression import snappy as snappy_stream
from stateglass.parsers.errors import ChecksumMismatch, CorruptData, UnsupportedFormat


@dataclass(frozen=True)
class Block:
    """One decoded piece of the stream. ``restart``: decoding may restart at ``raw_offset``
    (the file byte where this piece's compressed data begins) and yields this piece first.
    The last block yielded is an empty one whose ``ended`` says whether the stream reached a
    proper end (lz4's end block, a complete zstd frame, the last byte for codecs without an
    end marker) rather than a cut block."""

    raw_offset: int
    text: bytes
    restart: bool = True
    ended: bool = False


@dataclass(frozen=True)
class Decoded:
    """Everything :func:`iter_blocks` yields, joined (for tests and small files).

    ``restarts`` lists ``(raw offset, text offset)`` pairs, ascending, the first ``(start, 0)``.
    """

    text: bytes
    restarts: tuple[tuple[int, int], ...]
    ended: bool


def _none(data: bytes, start: int) -> Iterator[Block]:
    yield Block(start, bytes(data[start:]))
    yield Block(len(data), b"", ended=True)


def _zstd(data: bytes, start: int) -> Iterator[Block]:
    view = memoryview(data)
    size = len(view)
    dctx = zstandard.ZstdDecompressor()
    pos = start
    while pos < size:
        frame = dctx.decompressobj()
        parts: list[bytes] = []
        # Fed in growing slices: handing the decoder the whole rest of the file for each of
        # thousands of small frames would copy it each time (quadratic).
        fed = pos
        step = 4096
        while not frame.eof and fed < size:
            piece = view[fed : fed + step]
            try:
                parts.append(frame.decompress(piece))
            except zstandard.ZstdError as exc:
                raise CorruptData(f"zstd: cannot decode frame: {exc}", pos) from exc
            fed += len(piece) - (len(frame.unused_data) if frame.eof else 0)
            step = min(step * 2, 1 << 22)
        yield Block(pos, b"".join(parts))
        if not frame.eof:
            # A frame still being written: what it gave so far is whole blocks.
            yield Block(pos, b"", restart=False, ended=False)
            return
        if fed <= pos:
            raise CorruptData("zstd: decoder made no progress", pos)
        pos = fed
    yield Block(pos, b"", ended=True)


def _lz4(data: bytes, start: int) -> Iterator[Block]:
    view = memoryview(data)
    size = len(view)
    pos = start
    ended = start > 0  # resuming after a block: the stream is as complete as we know
    while pos < size:
        if size - pos < lz4_stream.HEADER_LENGTH:
            break
        magic, token, clen, olen, check = lz4_stream.HEADER.unpack_from(view, pos)
        if magic != lz4_stream.MAGIC:
            raise CorruptData(f"lz4: bad block magic {bytes(magic)!r}", pos)
        method = token & 0xF0
        if olen == 0:
            pos += lz4_stream.HEADER_LENGTH
            ended = True
            continue
        end = pos + lz4_stream.HEADER_LENGTH + clen
        if end > size:
            ended = False
            break
        payload = view[pos + lz4_stream.HEADER_LENGTH : end]
        if method == lz4_stream.METHOD_RAW:
            block = bytes(payload)
        elif method == lz4_stream.METHOD_LZ4:
            try:
                block = lz4.block.decompress(payload, uncompressed_size=olen)
            except lz4.block.LZ4BlockError as exc:
                raise CorruptData(f"lz4: cannot decode block: {exc}", pos) from exc
        else:
            raise CorruptData(f"lz4: unknown compression method 0x{method:02x}", pos + 8)
        computed = xxhash.xxh32_intdigest(block, lz4_stream.XXH32_SEED) & lz4_stream.CHECKSUM_MASK
        if computed != check:
            raise ChecksumMismatch(f"lz4: block checksum 0x{check:07x} != 0x{computed:07x}", pos)
        yield Block(pos, block)
        pos = end
        ended = False
    yield Block(pos, b"", ended=ended and pos == size)


_INT = struct.Struct(">i")


def _snappy(data: bytes, start: int) -> Iterator[Block]:
    view = memoryview(data)
    size = len(view)
    pos = start
    if start == 0:
        if size < snappy_stream.HEADER_LENGTH:
            yield Block(0, b"", ended=False)
            return
        if bytes(view[:8]) != snappy_stream.MAGIC:
            raise CorruptData(f"snappy: bad magic {bytes(view[:8])!r}", 0)
        pos = snappy_stream.HEADER_LENGTH
    while pos + 4 <= size:
        length = _INT.unpack_from(view, pos)[0]
        if length < 0:
            raise CorruptData(f"snappy: negative chunk length {length}", pos)
        end = pos + 4 + length
        if end > size:
            break
        try:
            block = bytes(cramjam.snappy.decompress_raw(view[pos + 4 : end]))
        except cramjam.DecompressionError as exc:
            raise CorruptData(f"snappy: cannot decode chunk: {exc}", pos) from exc
        yield Block(pos, block)
        pos = end
    yield Block(pos, b"", ended=pos == size)


def _lzf(data: bytes, start: int) -> Iterator[Block]:
    src = bytes(data)
    size = len(src)
    pos = start
    while pos + 5 <= size:
        if src[pos : pos + 2] != lzf_stream.MAGIC:
            raise CorruptData(f"lzf: bad chunk magic {src[pos : pos + 2]!r}", pos)
        kind = src[pos + 2]
        out = bytearray()
        if kind == lzf_stream.TYPE_STORED:
            length = struct.unpack_from(">H", src, pos + 3)[0]
            end = pos + 5 + length
            if end > size:
                break
            out += src[pos + 5 : end]
        elif kind == lzf_stream.TYPE_COMPRESSED:
            if pos + 7 > size:
                break
            clen, ulen = struct.unpack_from(">HH", src, pos + 3)
            end = pos + 7 + clen
            if end > size:
                break
            lzf_stream._decode_block(src, pos + 7, end, out, ulen, pos)
        else:
            raise CorruptData(f"lzf: unknown chunk type {kind}", pos + 2)
        yield Block(pos, bytes(out))
        pos = end
    yield Block(pos, b"", ended=pos == size)


PrefixDecoder = Callable[[bytes, int], Iterator[Block]]

# Spark's short codec names as they appear in event-log file names ("none": not compressed).
PREFIX_DECODERS: dict[str, PrefixDecoder] = {
    "none": _none,
    "zstd": _zstd,
    "lz4": _lz4,
    "snappy": _snappy,
    "lzf": _lzf,
}


def iter_blocks(codec: str, data: bytes, start: int = 0) -> Iterator[Block]:
    """Decode ``data[start:]`` (``start`` a restart point) block by block, up to its last
    complete block; memory stays one block, whatever the file's size."""
    decoder = PREFIX_DECODERS.get(codec)
    if decoder is None:
        known = ", ".join(PREFIX_DECODERS)
        raise UnsupportedFormat(f"unknown event-log codec {codec!r} (known: {known})")
    return decoder(data, start)


def decode_prefix(codec: str, data: bytes, start: int = 0) -> Decoded:
    """All of :func:`iter_blocks` at once."""
    chunks: list[bytes] = []
    restarts: list[tuple[int, int]] = [(start, 0)]
    size = 0
    ended = False
    for block in iter_blocks(codec, data, start):
        if block.restart and block.text and (block.raw_offset, size) != restarts[-1]:
            restarts.append((block.raw_offset, size))
        chunks.append(block.text)
        size += len(block.text)
        ended = block.ended
    return Decoded(b"".join(chunks), tuple(restarts), ended)
