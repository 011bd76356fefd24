"""Spark's load rule: the snapshot a load of state version V starts from (pure).

Spark loads version V of a store partition from the newest snapshot (HDFS ``.snapshot``,
RocksDB ``.zip``) at or below V, version 0 being the empty store, then replays every delta
or changelog after it (``HDFSBackedStateStoreProvider.loadMap``, ``RocksDB.load``). A
snapshot that is not on disk is not a candidate: Spark lists the directory.

Since Spark 4.1 a snapshot that cannot be read no longer fails the load when automatic
snapshot repair is on (``spark.sql.streaming.stateStore.autoSnapshotRepair.enabled``, true by
default; ``AutoSnapshotLoader``): Spark tries the older snapshots, newest first, that are at
most ``maxChangeFileReplay`` versions below V, and replays the deltas or changelogs from the
one it reads. RocksDB repairs only with changelog checkpointing, since it rebuilds from
changelogs.

The listing's replay bytes, the restart verdict and the restart cost all start here.

Example::

    start = load_start(10, [4, 8], unreadable={8}, repair=RepairSettings())
    assert (start.snapshot, start.skipped) == (4, (8,))   # then replay 5..10
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RepairSettings:
    """Spark's automatic snapshot repair as the restarting cluster runs it."""

    enabled: bool = True
    max_change_file_replay: int = 500

    def on(self, changelog_provider: bool, has_changelogs: bool) -> RepairSettings:
        """The repair Spark runs on one partition: these settings, or :data:`NO_REPAIR`.
        ``changelog_provider``: RocksDB, which repairs only with changelog checkpointing
        (``has_changelogs``: a partition with changelog files has it on)."""
        if self.enabled and (not changelog_provider or has_changelogs):
            return self
        return NO_REPAIR


NO_REPAIR = RepairSettings(enabled=False)


@dataclass(frozen=True)
class LoadStart:
    """Where a load of one version starts."""

    snapshot: int  # the snapshot loaded (0: the empty store); see ``opens``
    skipped: tuple[int, ...] = ()  # unreadable snapshots the repair skipped, newest first
    # False: no snapshot Spark would read; ``snapshot`` is then the newest one, the one
    # Spark opens first and cannot read.
    opens: bool = True

    @property
    def first(self) -> int:
        """The snapshot Spark opens first: the newest at or below the version."""
        return self.skipped[0] if self.skipped else self.snapshot


def load_start(
    version: int,
    snapshots: Sequence[int],
    unreadable: Collection[int] = (),
    repair: RepairSettings = NO_REPAIR,
) -> LoadStart:
    """The snapshot a load of ``version`` starts from, as Spark picks it.

    ``snapshots``: the versions with a snapshot on disk, ascending; ``unreadable``: those of
    them that cannot be read; ``repair``: Spark's automatic snapshot repair (off by default:
    without damage it changes nothing).
    """
    at = bisect_right(snapshots, version)
    first = snapshots[at - 1] if at and snapshots[at - 1] > 0 else 0
    if first not in unreadable:
        return LoadStart(first)
    if not repair.enabled:
        return LoadStart(first, opens=False)
    skipped = [first]
    for older in _older(snapshots, at - 1):
        if version - older > repair.max_change_file_replay:
            break
        if older in unreadable:
            skipped.append(older)
            continue
        return LoadStart(older, tuple(skipped))
    return LoadStart(first, tuple(skipped), opens=False)


def _older(snapshots: Sequence[int], newest: int) -> list[int]:
    """The candidates below ``snapshots[newest]``, newest first, down to the empty store."""
    older = [v for v in reversed(snapshots[:newest]) if v > 0]
    return [*older, 0]
