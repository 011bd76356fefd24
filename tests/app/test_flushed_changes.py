"""What a RocksDB flush added, read from its SSTs alone, equals the two versions read whole.

When a zip references every SST of the version before and more, the SSTs it adds are the
batch's flush: their newest entry per key is that key's state. Checked on Spark-written
stores (LZ4 SSTs of 4.3, Snappy of 3.5) against every neighbouring pair read whole; steps
where a compaction removed SSTs must say None, and so must a store with changelogs'
versions that have no zip of their own.
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from stateglass.collectors.checkpoints.state_views import StateView, open_source, versions
from tests.collectors.helpers import SAMPLES


@pytest.mark.parametrize(
    "name", ["spark-4.3/agg-rocks", "spark-3.5/agg-rocks"], ids=["lz4-4.3", "snappy-3.5"]
)
def test_flushed_entries_equal_the_versions_read_whole(name: str) -> None:
    source = open_source(StateView(str(SAMPLES / name)))
    flushed = compacted = 0
    for p in source.partitions:
        for before, after in pairwise(versions(StateView(str(SAMPLES / name)))):
            changes = source.flushed_changes(p, before, after)
            old, new = dict(source.load_items(p, before)), dict(source.load_items(p, after))
            reader = source.reader(p)
            ssts = [set(reader.shared_files(v) or {}) for v in (before, after)]
            if changes is None:
                assert not ssts[0] <= ssts[1]  # only a compaction refuses here
                compacted += 1
                continue
            flushed += 1
            # Every key it names has its state at ``after``; every other key is unchanged.
            assert changes == {k: new.get(k) for k in changes}
            assert {k: v for k, v in old.items() if k not in changes} == {
                k: v for k, v in new.items() if k not in changes
            }
    assert flushed and compacted


def test_versions_without_a_zip_of_their_own_say_none() -> None:
    view = StateView(str(SAMPLES / "spark-4.3/agg-rocks-cl"))
    source = open_source(view)
    reader = source.reader(0)
    found = versions(view)
    pairs = [(a, b) for a, b in pairwise(found) if b not in reader.full_versions()]
    assert pairs
    assert all(source.flushed_changes(0, a, b) is None for a, b in pairs)
