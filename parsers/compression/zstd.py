"""zstd streams written by zstd-jni's ``ZstdOutputStream`` (codec ``zstd``).

The file is one or more standard zstd frames back to back; every frame must be complete.

Example::

    >>> import zstandard
    >>> from stateglass.parsers.compression import zstd
    >>> zstd.decompress(zstandard.ZstdCompressor().compress(b"ab") * 2)
    b'abab'
"""

from __future__ import annotations

import zstandard

from stateglass.parsers.errors import CorruptData, Truncated
from stateglass.parsers.limits import DEFAULT_LIMITS, DecodeLimits

# A zstd block can expand one byte of input to ~32 KiB of output (RLE blocks), and frames
# written by zstd-jni do not declare their size: feed the decoder pieces small enough that one
# piece cannot overshoot the remaining budget by much.
_MAX_EXPANSION = 1 << 15
_MIN_PIECE = 256
_MAX_PIECE = 1 << 20


def decompress(data: bytes, limits: DecodeLimits = DEFAULT_LIMITS) -> bytes:
    """Decode every zstd frame in ``data`` within ``limits``; a frame cut short raises
    ``Truncated``, output past the budget ``LimitExceeded``."""
    view = memoryview(data)
    size = len(view)
    if size == 0:
        raise Truncated("zstd: empty stream (no frame)", 0)
    budget = limits.budget(size)
    dctx = zstandard.ZstdDecompressor()
    chunks: list[bytes] = []
    total = 0
    pos = 0
    while pos < size:
        # One decompressobj per frame: it stops at the frame end and hands back the rest.
        frame = dctx.decompressobj()
        start = pos
        try:
            while not frame.eof and pos < size:
                piece = min(max((budget - total) // _MAX_EXPANSION, _MIN_PIECE), _MAX_PIECE)
                out = frame.decompress(view[pos : pos + piece])
                total += len(out)
                limits.check("zstd", total, size, start)
                chunks.append(out)
                pos += piece
        except zstandard.ZstdError as exc:
            raise CorruptData(f"zstd: cannot decode frame: {exc}", start) from exc
        if not frame.eof:
            raise Truncated("zstd: frame ends before its last block (file cut short?)", start)
        pos = min(pos, size) - len(frame.unused_data)
        if pos <= start:
            raise CorruptData("zstd: decoder made no progress", start)
    return b"".join(chunks)
