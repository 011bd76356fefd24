"""Zstandard: zstd-jni's ``ZstdOutputStream`` streams (codec ``zstd``) and raw zstd blocks.

A stream is one or more standard zstd frames back to back; every frame of a whole file must be
complete. An event log is many small frames (zstd-jni ends a frame at every flush, and Spark's
event logger flushes after each event), so a growing log restarts at any frame. RocksDB stores
one frame per block (type 7) and declares its size itself.

Example::

    >>> import zstandard
    >>> from stateglass.parsers.compression import zstd
    >>> zstd.decompress(zstandard.ZstdCompressor().compress(b"ab") * 2)
    b'abab'
"""

from __future__ import annotations

from collections.abc import Iterator

import zstandard

from stateglass.parsers.compression.codec import Block, Data
from stateglass.parsers.errors import CorruptData, Truncated
from stateglass.parsers.limits import DEFAULT_LIMITS, Allowance, DecodeLimits

NAME = "zstd"
# A zstd block can expand one byte of input to ~32 KiB of output (RLE blocks), and frames
# written by zstd-jni do not declare their size: feed the decoder pieces small enough that one
# piece cannot overshoot what the allowance has left by much.
_MAX_EXPANSION = 1 << 15
_MIN_PIECE = 256
_FIRST_PIECE = 4096
_MAX_PIECE = 1 << 20


class _Frame:
    """One frame decoded from ``start``, in pieces of output the allowance can afford."""

    def __init__(
        self,
        dctx: zstandard.ZstdDecompressor,
        view: memoryview,
        start: int,
        allowance: Allowance,
    ) -> None:
        self.view = view
        self.start = start
        self.fed = start  # where the frame's input ends, once :attr:`eof`
        self.allowance = allowance
        self.obj = dctx.decompressobj()

    @property
    def eof(self) -> bool:
        return bool(self.obj.eof)

    def pieces(self) -> Iterator[bytes]:
        # Fed in growing slices: handing the decoder the whole rest of the file for each of
        # thousands of small frames would copy it each time (quadratic).
        step = _FIRST_PIECE
        size = len(self.view)
        while not self.obj.eof and self.fed < size:
            afford = max(_MIN_PIECE, self.allowance.piece // _MAX_EXPANSION)
            chunk = self.view[self.fed : self.fed + min(step, afford)]
            try:
                out = self.obj.decompress(chunk)
            except zstandard.ZstdError as exc:
                raise CorruptData(f"zstd: cannot decode frame: {exc}", self.start) from exc
            self.fed += len(chunk) - (len(self.obj.unused_data) if self.obj.eof else 0)
            self.allowance.claim(NAME, len(out), self.start)
            yield out
            step = min(step * 2, _MAX_PIECE)


def decompress(data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> bytes:
    """Decode every zstd frame in ``data`` within ``limits``; a frame cut short raises
    ``Truncated``, output past the budget ``LimitExceeded``."""
    view = memoryview(data)
    size = len(view)
    if size == 0:
        raise Truncated("zstd: empty stream (no frame)", 0)
    allowance = Allowance(limits, size)
    dctx = zstandard.ZstdDecompressor()
    chunks: list[bytes] = []
    pos = 0
    while pos < size:
        frame = _Frame(dctx, view, pos, allowance)
        chunks.extend(frame.pieces())
        if not frame.eof:
            raise Truncated("zstd: frame ends before its last block (file cut short?)", pos)
        if frame.fed <= pos:
            raise CorruptData("zstd: decoder made no progress", pos)
        pos = frame.fed
    return b"".join(chunks)


def iter_blocks(data: Data, start: int, allowance: Allowance) -> Iterator[Block]:
    """See :meth:`Codec.iter_blocks`: a frame is a restart point; a long frame comes in
    several pieces (only its first a restart point), a frame still being written as far as
    its complete blocks go."""
    view = memoryview(data)
    size = len(view)
    dctx = zstandard.ZstdDecompressor()
    pos = start
    while pos < size:
        frame = _Frame(dctx, view, pos, allowance)
        first = True
        for text in frame.pieces():
            if text:
                yield Block(pos, text, restart=first)
                first = False
        if not frame.eof:
            yield Block(pos, b"", restart=False, ended=False)
            return
        if frame.fed <= pos:
            raise CorruptData("zstd: decoder made no progress", pos)
        pos = frame.fed
    yield Block(pos, b"", ended=True)


def _declared(block: Data, offset: int) -> int:
    """The content size the frame header declares, -1 when it declares none."""
    try:
        return int(zstandard.frame_content_size(block))
    except zstandard.ZstdError as exc:
        raise CorruptData(f"zstd: not a frame header: {exc}", offset) from exc


def block_size(block: Data) -> int | None:
    """The content size the frame header declares (None: it declares none)."""
    declared = _declared(block, 0)
    return None if declared < 0 else declared


def decompress_block(block: Data, size: int | None, offset: int = 0) -> bytes:
    """One raw zstd frame of ``size`` bytes; a frame header declaring another size is
    corrupt (the decoder would allocate what the header says, whatever ``size`` is)."""
    declared = _declared(block, offset)
    if size is None:
        if declared < 0:
            raise CorruptData("zstd: a raw block without a declared size", offset)
        size = declared
    elif declared >= 0 and declared != size:
        raise CorruptData(f"zstd: frame declares {declared} bytes, its container {size}", offset)
    if size == 0 and declared != 0:
        # max_output_size=0 means "no limit" to python-zstandard.
        raise CorruptData("zstd: a block declared empty holds a frame of unknown size", offset)
    try:
        out = zstandard.ZstdDecompressor().decompress(block, max_output_size=size)
    except zstandard.ZstdError as exc:
        raise CorruptData(f"zstd: cannot decode block: {exc}", offset) from exc
    if len(out) != size:
        raise CorruptData(f"zstd: block decoded to {len(out)} bytes, declared {size}", offset)
    return out
