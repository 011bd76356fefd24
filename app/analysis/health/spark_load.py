"""What Spark does when it loads one state version of one store partition (pure).

Where the load starts is Spark's load rule with its automatic snapshot repair
(:mod:`stateglass.collectors.checkpoints.load_rule`); this module judges the rest: Spark
replays every delta or changelog after the snapshot it loaded, and a missing or unreadable
one fails the load (the repair covers the snapshot, not the replay). A snapshot that opens but
references an SST with a damaged data block fails at the first read of that block, where the
repair does not apply.
"""

from __future__ import annotations

from dataclasses import dataclass

from stateglass.app.analysis.chain_files import ChainFiles
from stateglass.collectors.checkpoints.load_rule import RepairSettings, load_start


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
    runs = repair.on(changelog_provider, bool(files.change))
    start = load_start(version, sorted(files.full), files.bad_full, runs)
    first = start.first
    if first in files.failing_reads:
        why = (
            f"snapshot {first} opens, but an SST it references has a damaged data block: "
            "RocksDB fails the first read of that block (block checksum mismatch), by a "
            "changelog replayed onto it or the next batch's reads and writes, and automatic "
            "snapshot repair does not apply"
        )
        return Load(version, False, first, failure=why)
    if start.opens:
        return _replay(files, version, start.snapshot, start.skipped)
    if not runs.enabled:
        why = (
            "automatic snapshot repair is off"
            if not repair.enabled
            else ("RocksDB repairs only with changelog checkpointing")
        )
        return Load(version, False, first, failure=f"snapshot {first} cannot be read ({why})")
    return Load(
        version,
        False,
        None,
        start.skipped,
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
