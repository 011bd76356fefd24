"""Compression codecs, one module each, and the one registry from Spark's names to them.

Each module (``lz4``, ``lzf``, ``snappy``, ``zstd``) is a :class:`~.codec.Codec`: it decodes
its codec as a whole stream (state files), as the complete prefix of a stream still being
written (event logs) and as a raw block (RocksDB's SSTs), always within the decompression
budget (:mod:`stateglass.parsers.limits`).

* State files: the codec of every ``.delta``/``.snapshot``/``.changelog`` file of a query is
  the offset-log conf ``spark.sql.streaming.stateStore.compression.codec`` (default ``lz4``),
  a short name (matched case-insensitively, like Spark) or a fully-qualified class name.
* Event logs: the codec is the short name their file name ends with; a log without one is
  :data:`UNCOMPRESSED`. A log is read while Spark writes it, so its tail may stop mid-block:
  :func:`iter_blocks` decodes every complete block from a restart point instead of raising
  ``Truncated``, and says where decoding may restart later.
* SSTs: ``parsers/sst.py`` maps RocksDB's compression type byte to a codec of this registry.

Example::

    >>> from stateglass.parsers.compression import CODECS, decompress
    >>> decompress("lz4", b"LZ4Block\\x15" + bytes(12))
    b''
    >>> sorted(name for name in CODECS if "." not in name)
    ['lz4', 'lzf', 'snappy', 'zstd']
    >>> decoded = decode_prefix("none", b"line 1\\nhalf")
    >>> decoded.text, decoded.restarts
    (b'line 1\\nhalf', ((0, 0),))
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from stateglass.parsers.compression import lz4, lzf, snappy, zstd
from stateglass.parsers.compression.codec import Block, Codec, Data
from stateglass.parsers.errors import UnsupportedFormat
from stateglass.parsers.limits import DEFAULT_LIMITS, Allowance, DecodeLimits

# Short names and class names as in org.apache.spark.io.CompressionCodec.
CODECS: dict[str, Codec] = {
    lz4.NAME: lz4,
    lzf.NAME: lzf,
    snappy.NAME: snappy,
    zstd.NAME: zstd,
    "org.apache.spark.io.LZ4CompressionCodec": lz4,
    "org.apache.spark.io.LZFCompressionCodec": lzf,
    "org.apache.spark.io.SnappyCompressionCodec": snappy,
    "org.apache.spark.io.ZStdCompressionCodec": zstd,
}

DEFAULT_CODEC = "lz4"
# What StateGlass calls an event log whose file name names no codec.
UNCOMPRESSED = "none"


def get_codec(codec: str) -> Codec:
    """The codec a Spark name stands for; ``UnsupportedFormat`` if none."""
    found = CODECS.get(codec) or CODECS.get(codec.lower())
    if found is None:
        known = ", ".join(name for name in CODECS if "." not in name)
        raise UnsupportedFormat(f"unknown compression codec {codec!r} (known: {known})")
    return found


def decompress(codec: str, data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> bytes:
    """Decompress a whole state file written with ``codec``, refusing to expand it past
    ``limits`` (``LimitExceeded``: a decompression bomb, or a store too big for the limits)."""
    return get_codec(codec).decompress(data, limits)


# Codecs StateGlass can also write (a rewrite's state files), by Spark's short name.
WRITABLE = frozenset({lz4.NAME})


def compress(codec: str, data: Data) -> bytes:
    """``data`` as Spark's ``CompressionCodec`` ``codec`` writes a whole state file;
    ``UnsupportedFormat`` for a codec StateGlass reads but does not write."""
    found = get_codec(codec)
    if found.NAME not in WRITABLE:
        raise UnsupportedFormat(
            f"compression codec {codec!r} is read but not written (written: "
            f"{', '.join(sorted(WRITABLE))})"
        )
    return lz4.compress(data)


def iter_blocks(
    codec: str, data: Data, start: int = 0, limits: DecodeLimits = DEFAULT_LIMITS
) -> Iterator[Block]:
    """Decode ``data[start:]`` (``start`` a restart point) block by block, up to its last
    complete block; memory stays one block, whatever the file's size. What is decoded from
    ``start`` is held to ``limits`` as a streamed file (``docs/limits.md``)."""
    if codec == UNCOMPRESSED:
        return _uncompressed(data, start)
    allowance = Allowance(limits, len(data) - start, streamed=True)
    return get_codec(codec).iter_blocks(data, start, allowance)


def _uncompressed(data: Data, start: int) -> Iterator[Block]:
    yield Block(start, bytes(data[start:]))
    yield Block(len(data), b"", ended=True)


@dataclass(frozen=True)
class Decoded:
    """Everything :func:`iter_blocks` yields, joined (for tests and small files).

    ``restarts`` lists ``(raw offset, text offset)`` pairs, ascending, the first ``(start, 0)``.
    """

    text: bytes
    restarts: tuple[tuple[int, int], ...]
    ended: bool


def decode_prefix(
    codec: str, data: Data, start: int = 0, limits: DecodeLimits = DEFAULT_LIMITS
) -> Decoded:
    """All of :func:`iter_blocks` at once."""
    chunks: list[bytes] = []
    restarts: list[tuple[int, int]] = [(start, 0)]
    size = 0
    ended = False
    for block in iter_blocks(codec, data, start, limits):
        if block.restart and block.text and (block.raw_offset, size) != restarts[-1]:
            restarts.append((block.raw_offset, size))
        chunks.append(block.text)
        size += len(block.text)
        ended = block.ended
    return Decoded(b"".join(chunks), tuple(restarts), ended)


__all__ = [
    "CODECS",
    "DEFAULT_CODEC",
    "UNCOMPRESSED",
    "WRITABLE",
    "Block",
    "Codec",
    "Decoded",
    "compress",
    "decode_prefix",
    "decompress",
    "get_codec",
    "iter_blocks",
]
