"""Spark's load rule: the newest snapshot at or below the version, and its automatic repair
(the restart verdict's and restart cost's cases on real checkpoints are in tests/health and
tests/forensics)."""

from __future__ import annotations

from stateglass.collectors.checkpoints.load_rule import (
    NO_REPAIR,
    LoadStart,
    RepairSettings,
    load_start,
)

ON = RepairSettings()


def test_the_newest_snapshot_at_or_below_the_version() -> None:
    assert load_start(10, [4, 8, 12]) == LoadStart(8)
    assert load_start(8, [4, 8, 12]) == LoadStart(8)
    assert load_start(3, [4, 8, 12]) == LoadStart(0)  # the empty store, then deltas from 1
    assert load_start(5, []) == LoadStart(0)


def test_a_bad_snapshot_without_repair_does_not_open() -> None:
    start = load_start(10, [4, 8], unreadable={8})
    assert (start.opens, start.first) == (False, 8)


def test_repair_skips_bad_snapshots_for_an_older_one() -> None:
    start = load_start(10, [2, 4, 8], unreadable={4, 8}, repair=ON)
    assert start == LoadStart(2, (8, 4))
    assert load_start(10, [8], unreadable={8}, repair=ON) == LoadStart(0, (8,))


def test_repair_looks_back_at_most_max_change_file_replay_versions() -> None:
    start = load_start(10, [2, 8], unreadable={8}, repair=RepairSettings(True, 5))
    assert (start.opens, start.skipped, start.first) == (False, (8,), 8)


def test_rocksdb_repairs_only_with_changelog_checkpointing() -> None:
    assert ON.on(changelog_provider=True, has_changelogs=False) is NO_REPAIR
    assert ON.on(changelog_provider=True, has_changelogs=True) is ON
    assert ON.on(changelog_provider=False, has_changelogs=False) is ON
    assert NO_REPAIR.on(changelog_provider=False, has_changelogs=True) is NO_REPAIR
