"""A watcher hands freed memory back after a full listing; name caches stay small."""

from __future__ import annotations

import ctypes

import pytest

from stateglass.collectors.checkpoints.listing import classify
from stateglass.collectors.stores.base import NAMES_CACHED
from stateglass.collectors.stores.hdfs import parse_hdfs_name
from stateglass.collectors.watch.heap_trim import GLIBC, give_back


def _glibc() -> bool:
    try:
        ctypes.CDLL(GLIBC).malloc_trim  # noqa: B018 - the lookup is the question
    except (OSError, AttributeError):
        return False
    return True


def _rss_anon_mib() -> float:
    with open("/proc/self/status") as fh:
        row = next(r for r in fh if r.startswith("RssAnon:"))
    return int(row.split()[1]) / 1024


@pytest.mark.skipif(not _glibc(), reason="malloc_trim is glibc's")
def test_freed_blocks_below_a_live_one_go_back_to_the_system() -> None:
    # 48 MiB of 64 KiB blocks (below glibc's mmap threshold: in the heap, pages touched),
    # then one block above them that stays: glibc cannot shrink the heap's top by itself.
    blocks = [b"\x01" * (64 << 10) for _ in range(768)]
    pinned = b"\x02" * (64 << 10)
    del blocks
    kept = _rss_anon_mib()
    assert give_back() is True
    assert kept - _rss_anon_mib() >= 24, "the freed pages stayed resident"
    assert pinned[0] == 2


def test_without_glibc_nothing_happens() -> None:
    assert give_back("libstateglass-no-such-library.so") is False


@pytest.mark.parametrize("cache", [classify, parse_hdfs_name])
def test_name_caches_keep_a_listings_names_not_every_name_ever_seen(cache: object) -> None:
    info = cache.cache_info()  # type: ignore[attr-defined]
    assert info.maxsize == NAMES_CACHED
    # A soak's checkpoint at Spark's retention: 100 versions of deltas, snapshots, zips
    # and changelogs fit with room for every partition's SST names of a few versions.
    assert 4 * 100 < NAMES_CACHED <= 4096
    for version in range(NAMES_CACHED + 500):
        cache(f"{version}.delta")  # type: ignore[operator]
    assert cache.cache_info().currsize == NAMES_CACHED  # type: ignore[attr-defined]
