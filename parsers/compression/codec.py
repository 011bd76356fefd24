"""What every codec module provides: one codec, in each framing StateGlass reads it in.

A codec module (``lz4``, ``lzf``, ``snappy``, ``zstd``) is a :class:`Codec`; the registry in
:mod:`stateglass.parsers.compression` maps Spark's names to them. The framings:

* a **whole stream**, as Spark's ``CompressionCodec`` writes a ``.delta``, ``.snapshot`` or
  ``.changelog`` file (:meth:`Codec.decompress`; a cut stream is ``Truncated``);
* the **complete prefix of a stream still being written**, as an event log is read while it
  grows (:meth:`Codec.iter_blocks`; a cut tail waits for the next read);
* one **raw block** inside a container that frames it, as a RocksDB SST does
  (:meth:`Codec.block_size`, :meth:`Codec.decompress_block`).

Every framing is bounded by the decompression budget (:mod:`stateglass.parsers.limits`): a
whole stream by its ``DecodeLimits``, a growing stream by an :class:`Allowance`, a raw block by
the size its container declared, which the container checks against its own allowance before
it asks for the block.

Restart points of a growing stream are where the codec keeps no state from earlier bytes:
every block of lz4-java's ``LZ4BlockOutputStream``, xerial snappy's chunks and LZF's chunks;
for zstd, the start of a frame (a block inside a frame may refer to earlier ones).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from stateglass.parsers.limits import Allowance, DecodeLimits

Data = bytes | memoryview


@dataclass(frozen=True)
class Block:
    """One decoded piece of a growing stream. ``restart``: decoding may restart at
    ``raw_offset`` (the file byte where this piece's compressed data begins) and yields this
    piece first. The last block yielded is an empty one whose ``ended`` says whether the stream
    reached a proper end (lz4's end block, a complete zstd frame, the last byte for codecs
    without an end marker) rather than a cut block."""

    raw_offset: int
    text: bytes
    restart: bool = True
    ended: bool = False


class Codec(Protocol):
    """One compression codec (a module of this package)."""

    NAME: str  # Spark's short name

    def decompress(self, data: Data, limits: DecodeLimits = ...) -> bytes:
        """A whole stream, within ``limits``: ``Truncated`` if it is cut short,
        ``LimitExceeded`` past the budget, ``CorruptData`` for any other damage."""
        ...

    def iter_blocks(self, data: Data, start: int, allowance: Allowance) -> Iterator[Block]:
        """``data[start:]`` (``start`` a restart point) block by block, up to its last complete
        block, each claimed from ``allowance`` before it is decoded."""
        ...

    def block_size(self, block: Data) -> int | None:
        """The size a raw block says it decodes to (None: the format leaves it to the
        container). Reads no more than a header."""
        ...

    def decompress_block(self, block: Data, size: int | None, offset: int = 0) -> bytes:
        """One raw block, decoded to exactly ``size`` bytes (None: :meth:`block_size`), never
        more; ``offset`` places the block in its file for error messages."""
        ...


__all__ = ["Block", "Codec", "Data"]
