"""zstd streams written by zstd-jni's ``ZstdOutputStream`` (codec ``zstd``).

The file is one or more standard zstd frames back to back; every frame must be complete.

Example::

    >>> import zstandard
    >>> from parsers.compression import zstd
    >>> zstd.decompress(zstandard.ZstdCompressor().compress(b"ab") * 2)
    b'abab'
"""

from __future__ import annotations

import zstandard

from parsers.errors import CorruptData, Truncated


def decompress(data: bytes) -> bytes:
    """Decode every zstd frame in ``data``; a frame cut short raises ``Truncated``."""
    view = memoryview(data)
    size = len(view)
    if size == 0:
        raise Truncated("zstd: empty stream (no frame)", 0)
    dctx = zstandard.ZstdDecompressor()
    chunks: list[bytes] = []
    pos = 0
    while pos < size:
        # One decompressobj per frame: it stops at the frame end and hands back the rest.
        frame = dctx.decompressobj()
        try:
            chunks.append(frame.decompress(view[pos:]))
        except zstandard.ZstdError as exc:
            raise CorruptData(f"zstd: cannot decode frame: {exc}", pos) from exc
        if not frame.eof:
            raise Truncated("zstd: frame ends before its last block (file cut short?)", pos)
        consumed = size - pos - len(frame.unused_data)
        if consumed <= 0:
            raise CorruptData("zstd: decoder made no progress", pos)
        pos += consumed
    return b"".join(chunks)
