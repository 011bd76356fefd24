"""RocksDB's own block checksums, re-computed: every SST of the samples and of the corpus
(Spark 3.5 to 4.3: Snappy with CRC32C, LZ4 with XXH3) verifies, and a flipped bit anywhere
inside a block or its trailer is caught at that block. ZSTD tables are checked on a
Spark-written store in ``tests/health/test_restart_verdict.py``."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers.errors import ChecksumMismatch, CorruptData, Truncated, UnsupportedFormat
from stateglass.parsers.sst import FOOTER_SIZE, TRAILER_SIZE, sst_blocks, verify_sst
from tests.conftest import SAMPLES

_SNAPPY, _LZ4 = 1, 4


def _sample_ssts() -> list[Path]:
    found = sorted(SAMPLES.glob("spark-*/**/SSTs/*.sst"))
    assert len(found) > 100, "the samples hold RocksDB stores"
    return found


@pytest.fixture(scope="module")
def tables(fixture_corpus: Path) -> list[tuple[str, bytes]]:
    """Every SST of the samples and the corpus, by name."""
    paths = _sample_ssts() + sorted(fixture_corpus.glob("*/*/checkpoint/state/**/SSTs/*.sst"))
    return [(str(p), p.read_bytes()) for p in paths]


def codecs(data: bytes) -> set[int]:
    """The compression types of a table's data blocks (the byte after each block)."""
    return {data[b.offset + b.size] for b in sst_blocks(data) if b.kind == "data"}


def test_every_real_sst_verifies(tables: list[tuple[str, bytes]]) -> None:
    seen: set[int] = set()
    for name, data in tables:
        assert verify_sst(data) is None, name
        seen |= codecs(data)
    assert len(tables) > 500
    # Spark 3.5 writes Snappy, 4.x LZ4: the check above covered both.
    assert {_SNAPPY, _LZ4} <= seen, seen


def test_a_table_has_the_blocks_spark_writes(tables: list[tuple[str, bytes]]) -> None:
    kinds = [b.kind for b in sst_blocks(tables[0][1])]
    assert {"data", "index", "metaindex", "rocksdb.properties"} <= set(kinds)
    assert any(k.startswith("fullfilter.") for k in kinds)


def assert_every_flip_caught(data: bytes, block: int, at: int, bit: int) -> None:
    """Flip ``bit`` of byte ``at`` of block ``block`` (its trailer included): the block at
    that offset is named."""
    target = sst_blocks(data)[block]
    pos = target.offset + at % (target.size + TRAILER_SIZE)
    flipped = bytearray(data)
    flipped[pos] ^= 1 << bit
    with pytest.raises(ChecksumMismatch) as caught:
        verify_sst(bytes(flipped))
    assert caught.value.offset == target.offset, (target, pos)
    assert f"at {target.offset}" in str(caught.value)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_bit_flipped_inside_any_block_is_caught(
    tables: list[tuple[str, bytes]], data: st.DataObject
) -> None:
    _, table = data.draw(st.sampled_from(tables), label="table")
    block = data.draw(st.integers(0, len(sst_blocks(table)) - 1), label="block")
    at = data.draw(st.integers(0, 1 << 20), label="byte")
    assert_every_flip_caught(table, block, at, data.draw(st.integers(0, 7), label="bit"))


def test_every_bit_of_one_table_is_caught_or_harmless(tables: list[tuple[str, bytes]]) -> None:
    """Exhaustive on one small table: every flip inside a block is caught; in the footer, only
    its zero padding, a varint's redundant continuation bit or a checksum type turned to
    "none" goes unseen, and RocksDB reads those files alike."""
    name, table = min(tables, key=lambda t: len(t[1]))
    footer = len(table) - FOOTER_SIZE
    for pos in range(len(table)):
        for bit in range(8):
            flipped = bytearray(table)
            flipped[pos] ^= 1 << bit
            try:
                verify_sst(bytes(flipped))
            except CorruptData:
                continue
            except UnsupportedFormat:  # a footer's format_version we do not read
                assert pos >= footer, (name, pos, bit)
                continue
            assert pos >= footer, (name, pos, bit)
            assert flipped[footer] == 0 or pos > footer, (name, pos, bit)


def test_a_cut_table_is_truncated_or_corrupt(tables: list[tuple[str, bytes]]) -> None:
    _, table = tables[0]
    with pytest.raises(Truncated):
        verify_sst(table[:20])
    with pytest.raises(CorruptData):
        verify_sst(table[: len(table) // 2] + table[-FOOTER_SIZE:])
    with pytest.raises(CorruptData, match="none of RocksDB's"):
        verify_sst(table[:-FOOTER_SIZE] + b"\x09" + table[-FOOTER_SIZE + 1 :])
