"""What Spark does when it loads one state version of one store partition (pure).

Mirrors ``AutoSnapshotLoader`` and the providers' ``loadMap``/``load`` (Spark 4.1+): Spark lists
the snapshots (HDFS ``.snapshot``, RocksDB ``.zip``) at or below the version, plus version 0
(the empty store), and loads the newest. When that load fails and automatic snapshot repair is
on (``spark.sql.streaming.stateStore.autoSnapshotRepair.enabled``, true by default since 4.1;
RocksDB only with changelog checkpointing, since it rebuilds from changelogs) it tries the
older ones, newest first, that are at most ``maxChangeFileReplay`` versions below the target.
Then it replays every delta or changelog after the snapshot it loaded; a missing or unreadable
one fails the load: the repair covers the snapshot, not the replay.

A snapshot that is not on disk is not a candidate (Spark lists the directory), so a missing
snapshot only costs a longer replay.
"""

from __future__ import annotations

from dataclasses import dataclass

from stateglass.app.analysis.health.versions import ChainFiles


@dataclass(frozen=True)
class RepairSettings:
    """Spark's automatic snapshot repair as the restarting cluster runs it."""

    enabled: bool = True
    max_change_file_replay: int = 500


@dataclass(frozen=True)
class Load:
    """The outcome of loading one version: from which snapshot, and why it fails if it does."""

    version: int
    ok: bool
    snapshot: int | None = None  # the snapshot the load starts from (0: the empty store)
    skipped: tuple[int, ...] = ()  # bad snapshots the automatic repair skipped
    failure: str = ""

    @property
    def repaired(self) -> bool:
        return self.ok and bool(self.skipped)


def load_version(
    files: ChainFiles, version: int, repair: RepairSettings, changelog_provider: bool = False
) -> Load:
    """How Spark loads ``version`` from ``files``; ``changelog_provider``: RocksDB, whose
    repair needs changelog checkpointing (a partition with changelog files has it on)."""
    if version <= 0:
        return Load(version, True, 0)
    snapshots = sorted({v for v in files.full if v <= version} | {0}, reverse=True)
    first = snapshots[0]
    if first in files.failing_reads:
        why = (
            f"snapshot {first} opens, but an SST it references has a damaged data block: "
            "RocksDB fails the first read of that block (block checksum mismatch), by a "
            "changelog replayed onto it or the next batch's reads and writes, and automatic "
            "snapshot repair does not apply"
        )
        return Load(version, False, first, failure=why)
    can_repair = repair.enabled and (not changelog_provider or bool(files.change))
    if first not in files.bad_full:
        return _replay(files, version, first, ())
    if not can_repair:
        why = (
            "automatic snapshot repair is off"
            if not repair.enabled
            else ("RocksDB repairs only with changelog checkpointing")
        )
        return Load(version, False, first, failure=f"snapshot {first} cannot be read ({why})")
    skipped = [first]
    for older in snapshots[1:]:
        if version - older > repair.max_change_file_replay:
            break
        if older in files.bad_full:
            skipped.append(older)
            continue
        return _replay(files, version, older, tuple(skipped))
    return Load(
        version,
        False,
        None,
        tuple(skipped),
        f"snapshot {first} cannot be read and automatic repair found no readable older snapshot "
        f"within maxChangeFileReplay ({repair.max_change_file_replay}) versions",
    )


def _replay(files: ChainFiles, version: int, base: int, skipped: tuple[int, ...]) -> Load:
    for v in range(base + 1, version + 1):
        if v not in files.change:
            why = f"no delta/changelog for version {v} (replay from snapshot {base})"
            return Load(version, False, base, skipped, why)
        if v in files.bad_change:
            why = f"the delta/changelog of version {v} cannot be read (replay from snapshot {base})"
            return Load(version, False, base, skipped, why)
    return Load(version, True, base, skipped)
