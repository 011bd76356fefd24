"""The diff of two RocksDB versions read from the SSTs they do not share equals the diff of
both versions read whole, on Spark-written stores with and without changelogs.

Two zips of one partition reference mostly the same immutable SSTs; only keys of the SSTs
one references and the other does not can differ. The narrowed diff reads those keys' values
by point reads; the reference reads every key of both versions (two whole scans).
"""

from __future__ import annotations

from itertools import pairwise

import pytest

from stateglass.app.browse.diff import KINDS, changed_keys, compute_diff, diff_partition
from stateglass.app.browse.store import read_partition
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import StateView, open_source, versions
from stateglass.collectors.errors import CorruptFile
from stateglass.parsers.errors import ChecksumMismatch, CorruptData, Truncated
from stateglass.parsers.sst import sst_keys
from tests.collectors.helpers import SAMPLES

Rows = dict[str, set[tuple[int, bytes, bytes]]]


def _keyed(view: StateView) -> tuple[StateView, StateSource]:
    keyed = view.keyed(open_source(view).row_codec)
    return keyed, open_source(keyed)


def _whole(source: StateSource, before: int, after: int) -> Rows:
    """Both versions of every partition read whole, matched on key bytes."""
    out: Rows = {k: set() for k in KINDS}
    for p in source.partitions:
        old, new = read_partition(source, before, p), read_partition(source, after, p)
        _collect(out, diff_partition(old, new), p)
    return out


def _collect(out: Rows, part: object, p: int) -> None:
    def rows(data: object, items: object) -> set[tuple[int, bytes, bytes]]:
        return {(p, data.keys[int(i)].as_py(), data.values[int(i)].as_py()) for i in items}  # type: ignore[attr-defined]

    out["added"] |= rows(part.after, part.added)  # type: ignore[attr-defined]
    out["removed"] |= rows(part.before, part.removed)  # type: ignore[attr-defined]
    out["changed"] |= rows(part.after, part.changed_after)  # type: ignore[attr-defined]


def _computed(view: StateView, before: int, after: int) -> Rows:
    out: Rows = {k: set() for k in KINDS}
    for part in compute_diff(view, before, after).parts:
        _collect(out, part, part.after.partition)
    return out


@pytest.mark.parametrize(
    "name", ["spark-4.3/agg-rocks", "spark-3.5/agg-rocks"], ids=["lz4-4.3", "snappy-3.5"]
)
def test_sst_narrowed_diff_equals_two_whole_scans(name: str) -> None:
    view = StateView(str(SAMPLES / name))
    keyed, source = _keyed(view)
    found = versions(keyed)
    pairs = [*pairwise(found), (found[1], found[-1])]
    for before, after in pairs:
        # No changelogs: the candidates come from the unshared SSTs, a small part.
        keys = changed_keys(source, 0, before, after)
        assert keys is not None and keys == sorted(keys)
        ours, theirs = _computed(view, before, after), _whole(source, before, after)
        assert ours == theirs, (before, after)
    assert any(theirs.values())


def test_with_changelogs_both_narrowings_equal_two_whole_scans() -> None:
    """A changelog store: the diff from the changelogs, and the SST difference of its zipped
    versions, both equal reading the versions whole."""
    view = StateView(str(SAMPLES / "spark-4.3/agg-rocks-cl"))
    keyed, source = _keyed(view)
    found = versions(keyed)
    for before, after in pairwise(found):
        assert _computed(view, before, after) == _whole(source, before, after)
    zipped = sorted(source.reader(0).full_versions())
    assert len(zipped) >= 2
    for before, after in pairwise(zipped):
        for p in source.partitions:
            keys = source.differing_keys(p, before, after)
            assert keys is not None
            old, new = read_partition(source, before, p), read_partition(source, after, p)
            part = diff_partition(old, new)
            moved = {new.keys[int(i)].as_py() for i in (*part.added, *part.changed_after)}
            moved |= {old.keys[int(i)].as_py() for i in part.removed}
            assert moved <= set(keys), (p, before, after)


def test_sst_keys_are_every_key_the_store_holds() -> None:
    """Each zip's SSTs together hold every key RocksDB reads from it (and tombstones)."""
    view = StateView(str(SAMPLES / "spark-4.3/agg-rocks"))
    _, source = _keyed(view)
    reader = source.reader(0)
    store = SAMPLES / "spark-4.3/agg-rocks/state/0/0"
    version = max(reader.full_versions())
    names = reader.shared_files(version) or {}
    held = {k for n in names for k in sst_keys((store / "SSTs" / n).read_bytes())}
    assert {k for k, _ in reader.load(version)} <= held


def test_damaged_sst_says_what_is_wrong(tmp_path: object) -> None:
    store = SAMPLES / "spark-4.3/agg-rocks/state/0/0/SSTs"
    data = sorted(store.glob("*.sst"))[0].read_bytes()
    with pytest.raises(Truncated):
        sst_keys(data[:20])
    with pytest.raises(CorruptData, match="magic"):
        sst_keys(data[:-1] + b"\x00")
    flipped = bytearray(data)
    flipped[10] ^= 0xFF  # inside the first data block
    with pytest.raises(ChecksumMismatch):
        sst_keys(bytes(flipped))
    assert CorruptFile  # the reader wraps these with the file's path
