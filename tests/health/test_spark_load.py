"""Spark's state load as the restart verdict models it (pure): the newest snapshot, automatic
snapshot repair over bad ones within maxChangeFileReplay, then the replay that must be whole;
and Spark's test for an unfinished repartition."""

from __future__ import annotations

from stateglass.app.analysis.chain_files import ChainFiles
from stateglass.app.analysis.health.spark_load import load_version
from stateglass.collectors.checkpoints.load_rule import RepairSettings
from stateglass.parsers.repartition import (
    is_repartition_batch,
    unfinished_repartition,
)

ON = RepairSettings()
OFF = RepairSettings(enabled=False)


def _files(
    change: range,
    full: set[int],
    bad_full: frozenset[int] = frozenset(),
    bad_change: frozenset[int] = frozenset(),
) -> ChainFiles:
    return ChainFiles(set(change), set(full), set(bad_change), set(bad_full))


def test_a_whole_chain_loads_from_the_newest_snapshot() -> None:
    load = load_version(_files(range(1, 11), {4, 8}), 10, ON)
    assert load.ok and load.snapshot == 8 and not load.repaired


def test_a_bad_snapshot_is_repaired_from_an_older_one_only_when_repair_is_on() -> None:
    files = _files(range(1, 11), {4, 8}, bad_full={8})
    repaired = load_version(files, 10, ON)
    assert repaired.ok and repaired.snapshot == 4 and repaired.skipped == (8,)
    off = load_version(files, 10, OFF)
    assert not off.ok and "repair is off" in off.failure


def test_repair_falls_back_to_the_empty_store_but_needs_every_delta() -> None:
    assert load_version(_files(range(1, 11), {8}, bad_full={8}), 10, ON).snapshot == 0
    purged = load_version(_files(range(8, 11), {8}, bad_full={8}), 10, ON)
    assert not purged.ok and "no delta/changelog for version 1" in purged.failure


def test_repair_stays_within_max_change_file_replay() -> None:
    files = _files(range(1, 11), {2, 8}, bad_full={8})
    load = load_version(files, 10, RepairSettings(True, 5))
    assert not load.ok and "maxChangeFileReplay (5)" in load.failure


def test_rocksdb_repairs_only_with_changelogs() -> None:
    zips_only = _files(range(0), {1, 2, 3}, bad_full={3})
    assert not load_version(zips_only, 3, ON, changelog_provider=True).ok
    with_changelogs = _files(range(1, 4), {1, 3}, bad_full={3})
    assert load_version(with_changelogs, 3, ON, changelog_provider=True).ok


def test_the_repair_covers_the_snapshot_not_the_replay() -> None:
    load = load_version(_files(range(1, 11), {4}, bad_change={6}), 10, ON)
    assert not load.ok and "version 6 cannot be read" in load.failure
    assert not load_version(_files(range(1, 10), {4}), 10, ON).ok


def test_a_missing_snapshot_only_lengthens_the_replay() -> None:
    assert load_version(_files(range(1, 11), set()), 10, ON).ok


def test_spark_names_a_repartition_batch_by_its_changed_shuffle_partitions() -> None:
    parts = {0: 3, 1: 3, 2: 3, 3: 5}
    assert is_repartition_batch(parts, 3) and not is_repartition_batch(parts, 2)
    assert not is_repartition_batch(parts, 0) and not is_repartition_batch({1: 3}, 1)
    found = unfinished_repartition(parts, latest=3, last_committed=2)
    assert found is not None and (found.partitions_before, found.partitions_after) == (3, 5)
    assert "STREAMING_UNFINISHED_REPARTITION_DETECTED" in found.spark_message
    # A finished one, or none committed before it, is not refused.
    assert unfinished_repartition(parts, latest=3, last_committed=3) is None
    assert unfinished_repartition(parts, latest=3, last_committed=None) is None
