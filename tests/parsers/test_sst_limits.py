"""SSTs under the decompression budget: real tables written by RocksDB whose blocks declare far
more than their file's budget are refused by every reader before a data block is decoded, and
every real SST of the samples and the corpus is within the default budget."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zstandard

from stateglass.parsers.compression import zstd
from stateglass.parsers.errors import CorruptData, LimitExceeded
from stateglass.parsers.limits import DecodeLimits
from stateglass.parsers.sst import (
    sst_blocks,
    sst_entries,
    sst_expanded_size,
    sst_keys,
    verify_sst,
)
from tests.conftest import SAMPLES
from tests.damage.hostile import peak_allocation, sst_bomb

MIB = 1 << 20
# (blocks, bytes a block, compression): each over the default budget of its file (the 16 MiB
# floor, or 64 times a file of 1 MiB or more).
BOMBS = {
    "lz4-one-block": (1, 64 * MIB, "lz4"),
    "zstd-one-block": (1, 64 * MIB, "zstd"),
    "lz4-many-blocks": (256, MIB, "lz4"),
}
READERS: list[Callable[..., Any]] = [sst_keys, sst_entries, sst_expanded_size]


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("sst-bombs")
    return {
        name: sst_bomb(folder / f"{name}.sst", *shape).read_bytes() for name, shape in BOMBS.items()
    }


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.__name__)
@pytest.mark.parametrize("name", sorted(BOMBS))
def test_a_bomb_is_refused_before_its_blocks_are_decoded(
    bombs: dict[str, bytes], name: str, reader: Callable[..., Any]
) -> None:
    data = bombs[name]
    assert len(data) < 2 * MIB

    def read() -> None:
        with pytest.raises(LimitExceeded, match="decompression limit"):
            reader(data)

    assert peak_allocation(read) < 4 * MIB


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_within_raised_limits_the_same_table_reads(bombs: dict[str, bytes], name: str) -> None:
    """The budget is a setting: raised, the table decodes, and its blocks say their size."""
    blocks, size, _ = BOMBS[name]
    roomy = DecodeLimits(min_bytes=2 * blocks * size)
    assert sst_keys(bombs[name], roomy) == [b"bomb%08d" % n for n in range(blocks)]
    assert blocks * size <= sst_expanded_size(bombs[name], roomy) < blocks * size + MIB


def test_a_bomb_still_verifies(bombs: dict[str, bytes]) -> None:
    """Checking checksums decodes no data block, so a bomb is a sound table to it."""
    for data in bombs.values():
        verify_sst(data)
        assert {b.kind for b in sst_blocks(data)} >= {"data", "index", "metaindex"}


def test_a_tighter_budget_refuses_a_snappy_table(tmp_path: Path) -> None:
    """Snappy expands at most ~22x, within the default ratio: a lower one refuses it."""
    data = sst_bomb(tmp_path / "snappy.sst", 16, MIB, "snappy").read_bytes()
    assert len(sst_keys(data)) == 16
    with pytest.raises(LimitExceeded, match="max_ratio 4"):
        sst_keys(data, DecodeLimits(max_ratio=4, min_bytes=0))


def test_every_real_sst_is_within_the_default_budget(fixture_corpus: Path) -> None:
    """Far within: Spark's tables expand 2.5x at most (their blocks are small)."""
    paths = sorted(SAMPLES.glob("spark-*/**/SSTs/*.sst"))
    paths += sorted(fixture_corpus.glob("*/*/checkpoint/state/**/SSTs/*.sst"))
    assert len(paths) > 100
    for path in paths:
        data = path.read_bytes()
        assert 0 < sst_expanded_size(data) < 4 * len(data), path


def test_a_zstd_frame_header_cannot_outbid_its_container() -> None:
    """python-zstandard allocates what a frame header declares, whatever it is told: a frame
    declaring more than its container's size is corrupt, refused before it is decoded."""
    frame = zstandard.ZstdCompressor().compress(bytes(64 * MIB))
    assert zstd.block_size(frame) == 64 * MIB
    with pytest.raises(CorruptData, match="frame declares"):
        zstd.decompress_block(frame, 1000)
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(bytes(MIB))
    with pytest.raises(CorruptData, match="without a declared size"):
        zstd.decompress_block(unsized, None)
    with pytest.raises(CorruptData, match="declared empty"):
        zstd.decompress_block(unsized, 0)
    assert zstd.decompress_block(unsized, MIB) == bytes(MIB)
