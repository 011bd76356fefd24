"""Which state versions the files still on disk can rebuild (pure; shared by holes and retention).

Version V loads from the newest snapshot (HDFS ``.snapshot``, RocksDB ``.zip``) at or below V
plus every delta or changelog after it; version 0 is the empty store, so a chain whose change
files start at version 1 needs no snapshot.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from collectors.health.base import Context
from collectors.listing import CHANGE_KINDS, FULL_KINDS


@dataclass
class ChainFiles:
    """The versions of one store partition that have a live (not purged) file, by kind."""

    change: set[int] = field(default_factory=set)
    full: set[int] = field(default_factory=set)


def rebuildable(change: Collection[int], full: Collection[int]) -> set[int]:
    """Versions that a load can rebuild from these files; linear in the versions present."""
    present = set(change) | set(full)
    if not present:
        return set()
    out = set()
    lo, hi = min(present), max(present)
    ok = lo == 1  # version 0 (the empty store) is always there
    for v in range(lo, hi + 1):
        ok = v in full or (v in change and ok)
        if ok:
            out.add(v)
    return out


def live_chain_files(ctx: Context) -> dict[tuple[int, str, int], ChainFiles]:
    """``(operator, store, partition) -> ChainFiles`` from the ``state_files`` table."""
    out: dict[tuple[int, str, int], ChainFiles] = {}
    for op, store, part, version, kind in ctx.rows(
        "SELECT operator_id, store_name, partition_id, version, kind FROM state_files "
        "WHERE checkpoint = ? AND NOT purged AND version IS NOT NULL"
    ):
        files = out.setdefault((op, store, part), ChainFiles())
        if kind in CHANGE_KINDS:
            files.change.add(version)
        elif kind in FULL_KINDS:
            files.full.add(version)
    return out


def gaps(versions: Iterable[int], lo: int, hi: int) -> list[int]:
    """Versions in ``lo..hi`` missing from ``versions``."""
    have = set(versions)
    return [v for v in range(lo, hi + 1) if v not in have]
