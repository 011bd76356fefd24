"""A snapshot of a checkpoint's files (I/O), and the pure logic that diffs two of them.

Like watchdog's ``DirectorySnapshot``: :func:`list_checkpoint` walks the directory once through
the read-only :class:`~collectors.fs.FileSystem`; :func:`diff_files` compares what the database
already knows with what is there now by path, size and mtime; :func:`version_file_stats` turns a
store partition's files into per-version byte counts. Nothing here reads a file's contents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from collectors.checkpoint import Checkpoint, StoreInfo
from collectors.stores.hdfs import parse_hdfs_name
from collectors.stores.rocksdb import parse_rocksdb_name

# Kinds of state files; ``sst`` files are shared by versions and have no version of their own.
CHANGE_KINDS = frozenset({"delta", "changelog"})
FULL_KINDS = frozenset({"snapshot", "zip"})


@dataclass(frozen=True)
class FileStat:
    """Path, size and mtime: what decides whether a file changed since the last scan."""

    path: str
    size: int
    mtime: float


@dataclass(frozen=True)
class StateFile:
    """One file of a state store partition."""

    stat: FileStat
    operator_id: int
    store_name: str
    partition_id: int
    version: int | None
    kind: str

    @property
    def chain(self) -> tuple[int, str, int]:
        return self.operator_id, self.store_name, self.partition_id


@dataclass(frozen=True)
class Listing:
    """Every log file (offsets/, commits/) and state file of one checkpoint."""

    log_files: dict[str, FileStat]
    state_files: dict[str, StateFile]


@dataclass(frozen=True)
class FileDiff:
    added: frozenset[str]
    changed: frozenset[str]
    removed: frozenset[str]

    @property
    def touched(self) -> frozenset[str]:
        return self.added | self.changed


def is_temporary(name: str) -> bool:
    """Files Spark has not finished writing, or sidecars: ``.x.tmp``, ``*.crc``, ``_temporary``."""
    return name.startswith(".") or name.endswith((".crc", ".tmp")) or name == "_temporary"


def classify(name: str) -> tuple[int | None, str] | None:
    """``(version, kind)`` of a file in a store directory; None when it is not a state file."""
    if is_temporary(name):
        return None
    hdfs = parse_hdfs_name(name)
    if hdfs is not None:
        return hdfs
    rocks = parse_rocksdb_name(name)
    if rocks is not None:
        return rocks[0], rocks[2]
    return None


def diff_files(
    known: Mapping[str, tuple[int, float]], current: Mapping[str, tuple[int, float]]
) -> FileDiff:
    """Compare ``path -> (size, mtime)`` maps: what appeared, what changed, what disappeared."""
    added = frozenset(p for p in current if p not in known)
    changed = frozenset(p for p in current if p in known and known[p] != current[p])
    removed = frozenset(p for p in known if p not in current)
    return FileDiff(added, changed, removed)


def list_checkpoint(cp: Checkpoint, stores: Iterable[StoreInfo]) -> Listing:
    """List offsets/, commits/ and every store partition directory (with its ``SSTs/``)."""
    logs: dict[str, FileStat] = {}
    for log in ("offsets", "commits"):
        for f in cp.list_dir(log):
            if not f.is_dir and f.name.isdigit():
                path = cp.path(log, f.name)
                logs[path] = FileStat(path, f.size, f.mtime)
    files: dict[str, StateFile] = {}
    for store in stores:
        for partition in store.partitions:
            store_dir = cp.store_dir(store.operator_id, partition, store.store_name)
            for f in cp.list_dir(store_dir):
                if f.is_dir:
                    continue
                parsed = classify(f.name)
                if parsed is None:
                    continue
                path = cp.path(store_dir, f.name)
                files[path] = StateFile(
                    FileStat(path, f.size, f.mtime),
                    store.operator_id,
                    store.store_name,
                    partition,
                    parsed[0],
                    parsed[1],
                )
            for f in cp.list_dir(store_dir, "SSTs"):
                if f.is_dir or is_temporary(f.name) or not f.name.endswith(".sst"):
                    continue
                path = cp.path(store_dir, "SSTs", f.name)
                files[path] = StateFile(
                    FileStat(path, f.size, f.mtime),
                    store.operator_id,
                    store.store_name,
                    partition,
                    None,
                    "sst",
                )
    return Listing(logs, files)


@dataclass(frozen=True)
class VersionFiles:
    """Byte counts of one version, from file sizes alone."""

    delta_bytes: int | None
    snapshot_bytes: int | None
    versions_since_snapshot: int
    replay_bytes: int


def version_file_stats(
    files: Iterable[StateFile], versions: Iterable[int], sst_bytes_live: Mapping[int, int]
) -> dict[int, VersionFiles]:
    """Per version: its delta/changelog and snapshot/zip bytes, and what loading it costs.

    ``replay_bytes`` is what a cold load reads: the newest snapshot (a zip plus the SSTs it
    references) at or below the version, plus every delta or changelog after it. Checkpoint
    format v2 may keep several attempts of a version; their sizes add up.
    """
    change: dict[int, int] = {}
    full: dict[int, int] = {}
    for f in files:
        if f.version is None:
            continue
        if f.kind in CHANGE_KINDS:
            change[f.version] = change.get(f.version, 0) + f.stat.size
        elif f.kind in FULL_KINDS:
            full[f.version] = full.get(f.version, 0) + f.stat.size
    out: dict[int, VersionFiles] = {}
    for v in versions:
        base = max((s for s in full if s <= v), default=0)
        base_bytes = (full[base] + sst_bytes_live.get(base, 0)) if base else 0
        replay = base_bytes + sum(change.get(x, 0) for x in range(base + 1, v + 1))
        out[v] = VersionFiles(change.get(v), full.get(v), v - base, replay)
    return out
