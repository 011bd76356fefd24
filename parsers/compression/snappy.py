"""xerial ``SnappyOutputStream`` streams (codec ``snappy``).

Layout: ``\\x82SNAPPY\\0``, int32 BE version, int32 BE compatible version, then
``[int32 BE length][raw snappy block]`` until EOF. snappy-java also reads a second header
in place of a chunk length (concatenated streams), so we do too. The framing has no end
marker: a file cut exactly at a chunk boundary is only caught by the record layer.

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

import cramjam

from stateglass.parsers.errors import CorruptData, Truncated
from stateglass.parsers.limits import DEFAULT_LIMITS, DecodeLimits

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


def decompress(data: bytes, limits: DecodeLimits = DEFAULT_LIMITS) -> bytes:
    """Decode a snappy-java stream into the bytes Spark wrote, within ``limits``."""
    view = memoryview(data)
    size = len(view)
    _check_header(view, 0)
    decompress_raw = cramjam.snappy.decompress_raw
    raw_len = cramjam.snappy.decompress_raw_len
    chunks: list[bytes] = []
    total = 0
    pos = HEADER_LENGTH
    while pos < size:
        if size - pos < 4:
            raise Truncated("snappy: chunk length cut short", pos)
        length = _INT.unpack_from(view, pos)[0]
        if length == _MAGIC_HEAD:
            _check_header(view, pos)
            pos += HEADER_LENGTH
            continue
        if length < 0:
            raise CorruptData(f"snappy: negative chunk length {length}", pos)
        start = pos + 4
        end = start + length
        if end > size:
            raise Truncated(f"snappy: chunk cut short ({size - start} of {length} bytes)", pos)
        block = view[start:end]
        try:
            declared = raw_len(block)
            if declared > _MAX_RATIO * length + 64:
                raise CorruptData(
                    f"snappy: chunk claims {declared} bytes from {length} compressed", pos
                )
            total += declared
            limits.check("snappy", total, size, pos)
            chunks.append(bytes(decompress_raw(block)))
        except cramjam.DecompressionError as exc:
            raise CorruptData(f"snappy: cannot decode chunk: {exc}", pos) from exc
        pos = end
    return b"".join(chunks)
