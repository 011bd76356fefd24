"""RocksDB block-based table files (``SSTs/*.sst``): their entries, for reads that need no RocksDB.

What the diff of two RocksDB versions needs from an SST: which keys it holds (puts, deletes
and merge operands alike). Growth attribution also reads whole entries (:func:`sst_entries`:
key, sequence number and type, value) of the SSTs a flush added, which are that batch's
writes. A whole version is read from its tables' decoded data blocks (:func:`sst_sorted_run`),
merged in C by key and sequence number as RocksDB's iterator reads them, where each table's
properties allow (the default column family, the bytewise comparator, no merge operands or
range deletions); otherwise, through RocksDB itself. Layout (RocksDB's
``table/format.h``, ``table/block_based/block.h``; Spark writes ``format_version=5``):

* a footer in the last 53 bytes: checksum type (1 byte), the metaindex and index block
  handles (varint64 offset and size each, zero-padded to 40 bytes), ``format_version``
  (uint32) and the magic number ``0x88e241b785f4cff7`` (both little-endian);
* every block is followed by a 5-byte trailer: its compression type and a checksum of the
  block and that byte;
* the index block has one entry per data block; from ``format_version`` 4 its values are
  block handles, whole at restart points and as a size delta between them;
* a data block's entries are ``shared, non_shared, value_length`` (varint32 each), the key's
  unshared bytes and the value; keys are internal keys: the user key plus 8 bytes of
  sequence number and type. Restart offsets (uint32) and their count end the block.

Compressed blocks: LZ4 (Spark 4's default) and ZSTD start with their uncompressed size as a
varint32 (``format_version`` ≥ 2), Snappy (Spark 3.5's) records its own; each is decoded by its
module of :mod:`stateglass.parsers.compression`. Other codecs are refused as
:class:`UnsupportedFormat`.

The table is held to the decompression budget of its file (:mod:`stateglass.parsers.limits`):
the sizes every block declares are summed and checked (:func:`sst_expanded_size`) before any
data block is decoded, which is also what RocksDB allocates when it reads them, so a collector
checks a table this way before it lets RocksDB open it.

:func:`verify_sst` re-computes RocksDB's own block checksums, as its ``VerifyChecksum`` does:
every data block, the meta blocks the metaindex names (properties, filter, …), the metaindex
and the index, without decompressing data blocks. The blocks and their trailers must also
tile the file from byte 0 to the footer, so a flipped bit in a block handle is caught too.

Example::

    keys = sst_keys(open("000012-….sst", "rb").read())   # user keys, in file order
    verify_sst(data)   # None, or ChecksumMismatch / Truncated / CorruptData at a block
    sst_expanded_size(data, limits)   # bytes its blocks decode to, or LimitExceeded
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import xxhash

from stateglass.parsers.compression import CODECS, Codec
from stateglass.parsers.compression.codec import Data
from stateglass.parsers.errors import ChecksumMismatch, CorruptData, Truncated, UnsupportedFormat
from stateglass.parsers.limits import DEFAULT_LIMITS, Allowance, DecodeLimits
from stateglass.parsers.rowchecksum import crc32c
from stateglass.parsers.varint import uvarint

try:
    from stateglass.parsers import _speedups
except ImportError:  # not built, or STATEGLASS_PURE: every block is read here
    _speedups = None  # type: ignore[assignment]

MAGIC = 0x88E241B785F4CFF7
FOOTER_SIZE = 53  # 1 + 2 * 20 (two padded handles) + 4 + 8
TRAILER_SIZE = 5
INTERNAL_SUFFIX = 8  # sequence number << 8 | value type
_NO_COMPRESSION, _SNAPPY, _LZ4, _LZ4HC, _ZSTD = 0, 1, 4, 5, 7
# RocksDB's CompressionType byte -> codec; Snappy's block records its own size, the others
# follow a varint32 of it (compression format version 2, every format_version from 2).
_CODECS: dict[int, Codec] = {
    _SNAPPY: CODECS["snappy"],
    _LZ4: CODECS["lz4"],
    _LZ4HC: CODECS["lz4"],
    _ZSTD: CODECS["zstd"],
}
_U32 = struct.Struct("<I")
# Entry types of an internal key's last byte (RocksDB's ``ValueType``) a reader may act on.
TYPE_DELETION, TYPE_VALUE, TYPE_MERGE, TYPE_SINGLE_DELETION = 0x0, 0x1, 0x2, 0x7
_XXH3_PRIME = 0x6B9083D9  # RocksDB's ModifyChecksumForLastByte
_CRC_MASK_DELTA = 0xA282EAD8


def _varint(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    return uvarint(data, pos, 10, "varint", end)


def _checksum(kind: int, block: bytes | memoryview, type_byte: int) -> int | None:
    """RocksDB's block checksum of ``block`` and its compression type byte; None: not kept."""
    if kind == 0:
        return None
    # Hashed where they lie (no copy of the block): verification reads every byte of a table.
    if kind == 1:  # crc32c, masked
        crc = crc32c(bytes([type_byte]), crc32c(bytes(block)))
        return (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF
    if kind in (2, 3):
        hasher = xxhash.xxh32() if kind == 2 else xxhash.xxh64()
        hasher.update(block)
        hasher.update(bytes([type_byte]))
        return hasher.intdigest() & 0xFFFFFFFF
    if kind == 4:
        v = xxhash.xxh3_64_intdigest(block) & 0xFFFFFFFF
        return v ^ ((type_byte * _XXH3_PRIME) & 0xFFFFFFFF)
    raise UnsupportedFormat(f"SST checksum type {kind} is not supported")


class _Table:
    def __init__(self, data: Data, limits: DecodeLimits) -> None:
        if len(data) < FOOTER_SIZE:
            raise Truncated(f"{len(data)} bytes: shorter than an SST footer", 0)
        self.data = data
        footer = memoryview(data)[-FOOTER_SIZE:]
        magic = struct.unpack_from("<Q", footer, FOOTER_SIZE - 8)[0]
        if magic != MAGIC:
            raise CorruptData(f"not a block-based table (magic {magic:#x})", len(data) - 8)
        self.version = _U32.unpack_from(footer, FOOTER_SIZE - 12)[0]
        if not 2 <= self.version <= 5:
            raise UnsupportedFormat(f"SST format_version {self.version} is not supported")
        self.checksum = footer[0]
        if self.checksum > 4:  # kNoChecksum, kCRC32c, kxxHash, kxxHash64, kXXH3: no other
            raise CorruptData(
                f"checksum type {self.checksum} is none of RocksDB's (0-4)", len(data) - FOOTER_SIZE
            )
        meta_offset, pos = _varint(footer, 1, 41)
        meta_size, pos = _varint(footer, pos, 41)
        index_offset, pos = _varint(footer, pos, 41)
        index_size, _ = _varint(footer, pos, 41)
        self.index = (index_offset, index_size)
        self.metaindex = (meta_offset, meta_size)
        self.allowance = Allowance(limits, len(data))

    def _span(self, offset: int, size: int, name: str) -> tuple[memoryview, int]:
        """The raw bytes of the block at ``offset`` and its compression type, unchecked."""
        end = offset + size
        if offset < 0 or end + TRAILER_SIZE > len(self.data) - FOOTER_SIZE:
            raise Truncated(f"{name} at {offset} ({size} bytes) runs past the table", offset)
        return memoryview(self.data)[offset:end], self.data[end]

    def checked(self, offset: int, size: int, name: str = "block") -> tuple[memoryview, int]:
        """The raw bytes of the block at ``offset`` and its compression type, checksum checked;
        ``name`` says which block in a message."""
        raw, kind = self._span(offset, size, name)
        want = _checksum(self.checksum, raw, kind)
        if want is not None and want != _U32.unpack_from(self.data, offset + size + 1)[0]:
            raise ChecksumMismatch(f"{name} at {offset}: checksum mismatch", offset)
        return raw, kind

    def _framed(self, raw: memoryview, kind: int) -> tuple[Codec | None, Data, int]:
        """(codec, its compressed bytes, the size they decode to) of a block: a header read."""
        if kind == _NO_COMPRESSION:
            return None, raw, len(raw)
        codec = _CODECS.get(kind)
        if codec is None:
            raise UnsupportedFormat(f"SST block compression type {kind} is not supported")
        if kind == _SNAPPY:
            size = codec.block_size(raw)
            return codec, raw, 0 if size is None else size
        length, start = _varint(raw, 0, len(raw))
        return codec, raw[start:], length

    def declared(self, offset: int, size: int, name: str = "block") -> int:
        """The size the block at ``offset`` decodes to, read from its header (no checksum)."""
        raw, kind = self._span(offset, size, name)
        return self._framed(raw, kind)[2]

    def block(self, offset: int, size: int, name: str = "block", claim: bool = True) -> bytes:
        """The contents of the block at ``offset``, checked and uncompressed; its size is
        claimed from the table's allowance first, unless ``claim`` is False (claimed already).
        """
        raw, kind = self.checked(offset, size, name)
        codec, payload, length = self._framed(raw, kind)
        if claim:
            self.allowance.claim(f"SST {name}", length, offset)
        if codec is None:
            return bytes(raw)
        try:
            return codec.decompress_block(payload, length, offset)
        except CorruptData as exc:
            raise CorruptData(
                f"{name} at {offset}: compressed data is damaged ({exc.why})", offset
            ) from exc

    @cached_property
    def data_handles(self) -> list[tuple[int, int]]:
        """(offset, size) of every data block, from the index block."""
        return list(_data_handles(self))

    @cached_property
    def meta_handles(self) -> list[tuple[bytes, int, int]]:
        """(name, offset, size) of every block the metaindex names."""
        return list(_meta_handles(self))

    def claim_all(self) -> None:
        """Claim the declared size of every block but the index and metaindex (decoded, so
        claimed, to find them): a table over its budget is refused before any data block is
        decoded."""
        left = self.allowance.left
        total = offset = 0
        blocks = [(o, s, n.decode("latin-1")) for n, o, s in self.meta_handles]
        blocks += [(o, s, "data block") for o, s in self.data_handles]
        for offset, size, name in blocks:
            total += self.declared(offset, size, name)
            if total > left:
                break  # claimed below, where it passed the budget
        self.allowance.claim("SST", total, offset)

    def data_blocks(self) -> Iterator[bytes]:
        """Every data block, decoded, in file order, after :meth:`claim_all`."""
        self.claim_all()
        for offset, size in self.data_handles:
            yield self.block(offset, size, "data block", claim=False)


def _restarts(block: bytes) -> tuple[int, set[int]]:
    """(where the entries end, the offsets of restart points)."""
    if len(block) < 4:
        raise Truncated("block shorter than its restart count", 0)
    count = _U32.unpack_from(block, len(block) - 4)[0] & 0x7FFFFFFF  # top bit: hash index
    end = len(block) - 4 - 4 * count
    if count == 0 or end < 0:
        raise CorruptData(f"block with {count} restart points in {len(block)} bytes", 0)
    return end, {_U32.unpack_from(block, end + 4 * i)[0] for i in range(count)}


def _data_handles(table: _Table) -> Iterator[tuple[int, int]]:
    """(offset, size) of every data block, from the index block (value delta encoding)."""
    block = table.block(*table.index, "index block")
    end, restarts = _restarts(block)
    pos = 0
    offset = size = -1
    while pos < end:
        at = pos
        _shared, pos = _varint(block, pos, end)
        non_shared, pos = _varint(block, pos, end)
        if table.version < 4:
            value_len, pos = _varint(block, pos, end)
            pos += non_shared
            offset, p = _varint(block, pos, end)
            size, _ = _varint(block, p, end)
            pos += value_len
        else:
            pos += non_shared
            if at in restarts or offset < 0:
                offset, pos = _varint(block, pos, end)
                size, pos = _varint(block, pos, end)
            else:
                delta, pos = _varint(block, pos, end)
                offset += size + TRAILER_SIZE
                size += (delta >> 1) ^ -(delta & 1)  # zigzag
        yield offset, size


def _entries(block: bytes, what: str, at: int | None = None) -> Iterator[tuple[bytes, int, int]]:
    """``(key, value start, value end)`` of every entry of a block, each key made whole from
    the prefix it shares with the one before; a damaged entry is ``CorruptData`` naming
    ``what``, at ``at`` (default: where the entry is)."""
    compiled = getattr(_speedups, "block_entries", None)
    found = None if compiled is None else compiled(block)
    if found is not None:
        return iter(found)
    return _walked_entries(block, what, at)


def _walked_entries(
    block: bytes, what: str, at: int | None = None
) -> Iterator[tuple[bytes, int, int]]:
    """:func:`_entries` in Python: the specification, and what names a damaged entry."""
    end, _ = _restarts(block)
    pos = 0
    key = b""
    while pos < end:
        shared, pos = _varint(block, pos, end)
        non_shared, pos = _varint(block, pos, end)
        value_len, pos = _varint(block, pos, end)
        if shared > len(key) or pos + non_shared + value_len > end:
            raise CorruptData(f"{what} entry runs past its block", pos if at is None else at)
        key = key[:shared] + block[pos : pos + non_shared]
        pos += non_shared
        yield key, pos, pos + value_len
        pos += value_len


def _internal_keys(block: bytes) -> Iterator[tuple[bytes, int, int]]:
    """:func:`_entries` of a data block, whose keys end in 8 bytes of sequence and type."""
    for key, start, stop in _entries(block, "data block"):
        if len(key) < INTERNAL_SUFFIX:
            raise CorruptData("internal key shorter than its 8-byte suffix", start)
        yield key, start, stop


def _block_keys(block: bytes, out: list[bytes]) -> None:
    out.extend(key[:-INTERNAL_SUFFIX] for key, _, _ in _internal_keys(block))


def _block_entries(block: bytes, out: list[tuple[bytes, int, bytes]]) -> None:
    for key, start, stop in _internal_keys(block):
        tag = int.from_bytes(key[-INTERNAL_SUFFIX:], "little")
        out.append((key[:-INTERNAL_SUFFIX], tag, block[start:stop]))


def sst_entries(
    data: Data, limits: DecodeLimits = DEFAULT_LIMITS
) -> list[tuple[bytes, int, bytes]]:
    """``(user key, tag, value)`` of every entry, in file order; the tag is RocksDB's
    ``sequence << 8 | type`` (:data:`TYPE_VALUE`, :data:`TYPE_DELETION`, …). A table with
    range deletions (a ``rocksdb.range_del`` block) is refused: its entries do not say
    every key it removes. ``LimitExceeded`` when its blocks expand past ``limits``."""
    table = _Table(data, limits)
    if any(name == b"rocksdb.range_del" for name, _, _ in table.meta_handles):
        raise UnsupportedFormat("SST with range deletions")
    out: list[tuple[bytes, int, bytes]] = []
    for block in table.data_blocks():
        _block_entries(block, out)
    return out


# What a table's properties must say for a plain merge of its entries to read it as RocksDB
# does: the default column family, keys in bytewise order (no user timestamps), no merge
# operands (whose combination is RocksDB's merge operator's business).
_PLAIN_PROPERTIES = {
    b"rocksdb.column.family.id": b"\x00",
    b"rocksdb.comparator": b"leveldb.BytewiseComparator",
    b"rocksdb.merge.operands": b"\x00",
}


def sst_sorted_run(data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> list[bytes] | None:
    """The data blocks of a table, decoded and in file order, for a compiled merge of
    tables by key and sequence number (``_speedups.runs_columns``); None for a table that
    merge does not read as RocksDB would (another column family or comparator, merge
    operands or range deletions, per its properties). ``LimitExceeded`` when its blocks
    expand past ``limits``; a damaged block raises as :func:`sst_entries` does.

    Example::

        blocks = sst_sorted_run(data, limits)   # [b"...", ...] or None
    """
    table = _Table(data, limits)
    handles = {name: (offset, size) for name, offset, size in table.meta_handles}
    if b"rocksdb.range_del" in handles or b"rocksdb.properties" not in handles:
        return None
    found = _properties(table.block(*handles[b"rocksdb.properties"], "properties block"))
    if any(found.get(name) != want for name, want in _PLAIN_PROPERTIES.items()):
        return None
    compiled = getattr(_speedups, "sst_data_blocks", None)
    if compiled is not None:
        # RocksDB checks the blocks it opens a table with (filter, properties) even where a
        # scan then never reads them; so does this path, as Python's claims them all.
        for name, offset, size in table.meta_handles:
            table.checked(offset, size, f"{name.decode('latin-1')} block")
        index = table.block(*table.index, "index block")
        blocks = compiled(data, index, table.version, table.checksum, table.allowance.left)
        if blocks is not None:
            table.allowance.claim("SST", blocks[1], 0)
            return blocks[0]
    # Another codec, or something to name: block by block, each checked here.
    return list(table.data_blocks())


def _properties(block: bytes) -> dict[bytes, bytes]:
    """The name -> raw value of every entry of a properties block (numbers are varints)."""
    return {name: block[start:stop] for name, start, stop in _entries(block, "properties")}


def sst_keys(data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> list[bytes]:
    """The user key of every entry of the table, in file order (a key may repeat);
    ``LimitExceeded`` when its blocks expand past ``limits``."""
    table = _Table(data, limits)
    out: list[bytes] = []
    for block in table.data_blocks():
        _block_keys(block, out)
    return out


def sst_expanded_size(data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> int:
    """The bytes the table's blocks decode to, as their headers declare them (what RocksDB
    allocates to read them); ``LimitExceeded`` past ``limits``. Decodes only the index and
    the metaindex, and hashes nothing: a collector runs it before RocksDB opens the table.

    Example::

        sst_expanded_size(mmap_of_the_sst, limits)   # 61_442, or LimitExceeded
    """
    table = _Table(data, limits)
    table.claim_all()
    return table.allowance.claimed


def _meta_handles(table: _Table) -> Iterator[tuple[bytes, int, int]]:
    """(name, offset, size) of every block the metaindex names (its keys are whole: restart
    interval 1, values are block handles)."""
    block = table.block(*table.metaindex, "metaindex block")
    for name, start, stop in _entries(block, "metaindex", table.metaindex[0]):
        offset, p = _varint(block, start, stop)
        size, _ = _varint(block, p, stop)
        yield name, offset, size


@dataclass(frozen=True)
class SstBlock:
    """One block of a table: ``data``, ``index``, ``metaindex`` or the name the metaindex gives
    it (``rocksdb.properties``, ``fullfilter.…``); ``size`` leaves out its 5-byte trailer."""

    kind: str
    offset: int
    size: int


def sst_blocks(data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> list[SstBlock]:
    """Every block of the table, in file order (the metaindex and index are read, and so
    checked, to find the others)."""
    return _blocks(_Table(data, limits))


def _blocks(table: _Table) -> list[SstBlock]:
    blocks = [SstBlock("metaindex", *table.metaindex), SstBlock("index", *table.index)]
    blocks += [SstBlock(n.decode("latin-1"), o, s) for n, o, s in table.meta_handles]
    blocks += [SstBlock("data", o, s) for o, s in table.data_handles]
    return sorted(blocks, key=lambda b: b.offset)


def verify_sst(data: Data, limits: DecodeLimits = DEFAULT_LIMITS) -> None:
    """Check every block's checksum and that the blocks tile the table; raise
    :class:`ChecksumMismatch`, :class:`Truncated` or :class:`CorruptData` naming the first bad
    block's offset. A table that keeps no checksums (type 0) is only checked for its layout.
    Only the index and metaindex are decoded (within ``limits``)."""
    table = _Table(data, limits)
    at = 0
    for block in _blocks(table):
        table.checked(block.offset, block.size, f"{block.kind} block")
        if block.offset != at:
            why = "bytes between blocks" if block.offset > at else "blocks overlap"
            raise CorruptData(f"{why} at {min(at, block.offset)}: a block handle is damaged", at)
        at = block.offset + block.size + TRAILER_SIZE
    if at != len(data) - FOOTER_SIZE:
        raise CorruptData(f"blocks end at {at}, the footer starts at {len(data) - FOOTER_SIZE}", at)


__all__ = [
    "SstBlock",
    "sst_blocks",
    "sst_entries",
    "sst_expanded_size",
    "sst_keys",
    "sst_sorted_run",
    "verify_sst",
]
