"""Spark's state-store compression codecs, each a ``decompress(bytes) -> bytes``.

The codec of every ``.delta``/``.snapshot``/``.changelog`` file of a query is the offset-log
conf ``spark.sql.streaming.stateStore.compression.codec`` (default ``lz4``), given either as
a short name (matched case-insensitively, like Spark) or as a fully-qualified class name.

Example::

    >>> from stateglass.parsers.compression import CODECS, decompress
    >>> decompress("lz4", b"LZ4Block\\x15" + bytes(12))
    b''
    >>> sorted(name for name in CODECS if "." not in name)
    ['lz4', 'lzf', 'snappy', 'zstd']
"""

from __future__ import annotations

from collections.abc import Callable

from stateglass.parsers.compression import lz4, lzf, snappy, zstd
from stateglass.parsers.errors import UnsupportedFormat
from stateglass.parsers.limits import DEFAULT_LIMITS, DecodeLimits

Decompress = Callable[[bytes, DecodeLimits], bytes]

# Short names and class names as in org.apache.spark.io.CompressionCodec.
CODECS: dict[str, Decompress] = {
    "lz4": lz4.decompress,
    "lzf": lzf.decompress,
    "snappy": snappy.decompress,
    "zstd": zstd.decompress,
    "org.apache.spark.io.LZ4CompressionCodec": lz4.decompress,
    "org.apache.spark.io.LZFCompressionCodec": lzf.decompress,
    "org.apache.spark.io.SnappyCompressionCodec": snappy.decompress,
    "org.apache.spark.io.ZStdCompressionCodec": zstd.decompress,
}

DEFAULT_CODEC = "lz4"


def get_codec(codec: str) -> Decompress:
    """Return the decoder for a Spark codec name; raise ``UnsupportedFormat`` if unknown."""
    found = CODECS.get(codec) or CODECS.get(codec.lower())
    if found is None:
        known = ", ".join(name for name in CODECS if "." not in name)
        raise UnsupportedFormat(f"unknown state-store compression codec {codec!r} (known: {known})")
    return found


def decompress(codec: str, data: bytes, limits: DecodeLimits = DEFAULT_LIMITS) -> bytes:
    """Decompress a whole state file written with ``codec``, refusing to expand it past
    ``limits`` (``LimitExceeded``: a decompression bomb, or a store too big for the limits)."""
    return get_codec(codec)(data, limits)


__all__ = ["CODECS", "DEFAULT_CODEC", "Decompress", "decompress", "get_codec"]
