"""What a commit adds, looked up by name: the listing of a scan that lists no store directory.

A batch N writes version N + 1 of every store partition under names Spark derives from the
version alone (``N+1.delta``, ``N+1.snapshot``, ``N+1.zip``, ``N+1.changelog``, and under
checkpoint format v2 ``N+1_<uid>.zip`` / ``.changelog`` with the unique id its commit names).
So the files of new commits can be ``stat``-ed by name in each known store directory, and the
rest of the listing is what the database already knows: a 10,000-directory checkpoint costs a
few thousand ``stat`` calls per commit instead of 320,000 listed files.

What a lookup by name cannot see — files purged by Spark's maintenance, a snapshot written
for an older version, new partitions, leftovers — waits for the next full listing, which
:class:`~collectors.scan.reconcile.ReconcilePolicy` schedules. New RocksDB SSTs are named in the
new zip's metadata, which only the chain reader opens: :func:`sst_files` stats those. Only
Spark's HDFS and RocksDB providers are looked up by name: a provider plugin's stores are
listed in full at every scan.

Example::

    versions = new_versions(logs, known.log_files)
    remembered = KnownListing.build(cp, stores, known.state_files)
    found = lookup_listing(cp, stores, remembered, logs, versions, commits)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.listing import (
    ChainIndex,
    FileStat,
    Listing,
    StateFile,
    classify,
)
from stateglass.collectors.db.writes import Chain
from stateglass.collectors.fs import FileInfo
from stateglass.collectors.scan.chains import ChainResult
from stateglass.collectors.scan.plan import unique_ids
from stateglass.parsers.logs import CommitMetadata, batch_id_of

_NAMES = {"hdfs": ("delta", "snapshot"), "rocksdb": ("zip", "changelog")}


def new_versions(
    logs: Mapping[str, FileStat], known_logs: Mapping[str, tuple[int, float]]
) -> set[int]:
    """Versions whose files new or changed ``offsets/N`` and ``commits/N`` announce: N + 1."""
    out = set()
    for path, stat in logs.items():
        if known_logs.get(path) == (stat.size, stat.mtime):
            continue
        batch = batch_id_of(path.rsplit("/", 1)[-1])
        if batch is not None:
            out.add(batch + 1)
    return out


def _state_file(
    stat: FileStat, store: StoreInfo, partition: int, kind: tuple[int | None, str]
) -> StateFile:
    return StateFile(stat, store.operator_id, store.store_name, partition, kind[0], kind[1])


def _candidates(
    store: StoreInfo, partition: int, version: int, commits: Mapping[int, CommitMetadata]
) -> list[str]:
    names = [f"{version}.{ext}" for ext in _NAMES.get(store.provider, ())]
    if store.provider == "rocksdb" and commits:
        uid = dict(unique_ids(commits, store, partition)).get(version)
        if uid is not None:
            names += [f"{version}_{uid}.zip", f"{version}_{uid}.changelog"]
    return names


def _stores_key(stores: Iterable[StoreInfo]) -> tuple[tuple[int, str, str, tuple[int, ...]], ...]:
    return tuple((s.operator_id, s.store_name, s.provider, tuple(s.partitions)) for s in stores)


@dataclass
class KnownListing:
    """The known state files of one checkpoint as a listing gives them, kept by a watcher
    between its scans by name: each scan adds the files it found and hands the same dicts on,
    so that a scan costs what its commits add, not what the checkpoint holds."""

    stores: tuple[tuple[int, str, str, tuple[int, ...]], ...]
    # store directory -> (store, partition)
    dirs: dict[str, tuple[StoreInfo, int]]
    files: dict[str, StateFile]
    # per store directory its versioned files by name (what a chain reader is handed)
    by_dir: dict[str, dict[str, FileInfo]]
    index: ChainIndex

    @classmethod
    def build(
        cls, cp: Checkpoint, stores: list[StoreInfo], known: Mapping[str, tuple[int, float]]
    ) -> KnownListing:
        """The known files (path -> size, mtime) of the stores' directories."""
        dirs = {
            cp.store_dir(s.operator_id, p, s.store_name): (s, p)
            for s in stores
            for p in s.partitions
        }
        found = cls(_stores_key(stores), dirs, {}, {d: {} for d in dirs}, ChainIndex())
        for path, (size, mtime) in known.items():
            found.add(path, size, mtime)
        return found

    def fits(self, stores: Iterable[StoreInfo]) -> bool:
        """Whether it was built for these stores (the metadata may have changed since)."""
        return self.stores == _stores_key(stores)

    def add(self, path: str, size: int, mtime: float) -> None:
        """A state file of a known store directory (anything else is left out)."""
        directory, name = path.rsplit("/", 1)
        sst = directory.endswith("/SSTs")
        if sst:
            directory = directory[: -len("/SSTs")]
        owner = self.dirs.get(directory)
        kind = (None, "sst") if sst else classify(name)
        if owner is None or kind is None:
            return
        store, partition = owner
        f = _state_file(FileStat(path, size, mtime), store, partition, kind)
        self.files[path] = f
        self.index.add(f)
        if not sst:
            self.by_dir[directory][name] = FileInfo(name, False, size, mtime)

    def listing(self, logs: dict[str, FileStat]) -> Listing:
        """A :class:`Listing` sharing this one's dicts: what the scan adds, this keeps."""
        store_dirs = {d: tuple(f.values()) for d, f in self.by_dir.items()}
        return Listing(logs, self.files, store_dirs, index=self.index)


def lookup_listing(
    cp: Checkpoint,
    stores: list[StoreInfo],
    known: KnownListing,
    logs: dict[str, FileStat],
    versions: Iterable[int],
    commits: Mapping[int, CommitMetadata],
) -> tuple[Listing, dict[str, tuple[int, float]]] | None:
    """The ``known`` state files plus those of ``versions`` found by name (added to
    ``known``), as a :class:`Listing`; and ``path -> (size, mtime)`` of the files looked up
    and found (what the scan diffs).

    None when a store directory has no known file: a new partition, or a store never listed,
    whose earlier versions only a full listing finds; and when a store's provider names its
    files otherwise than Spark's two (a plugin, or a store kept elsewhere such as DynamoDB,
    whose versions only its reader's listing finds).
    """
    if any(s.provider not in _NAMES for s in stores) or not all(known.by_dir.values()):
        return None
    current: dict[str, tuple[int, float]] = {}
    wanted = sorted(versions)
    for directory, (store, partition) in known.dirs.items():
        for version in wanted:
            for name in _candidates(store, partition, version, commits):
                path = f"{directory}/{name}"
                info = cp.fs.stat(path) if classify(name) is not None else None
                if info is None:
                    continue
                known.add(path, info.size, info.mtime)
                current[path] = (info.size, info.mtime)
    return known.listing(logs), current


def sst_files(
    cp: Checkpoint,
    listing: Listing,
    known: Mapping[str, tuple[int, float]],
    results: Iterable[ChainResult],
) -> dict[str, tuple[int, float]]:
    """The SSTs the counted zips name that no earlier scan recorded, ``stat``-ed and added to
    ``listing``; returns their ``path -> (size, mtime)``."""
    found: dict[str, tuple[int, float]] = {}
    for result in results:
        task = result.task
        chain: Chain = task.chain
        for count in result.versions:
            for name in count.sst_files or ():
                path = f"{task.store_dir}/SSTs/{name}"
                if path in known or path in found:
                    continue
                info = cp.fs.stat(path)
                if info is None:
                    continue  # named but not there: the chain reader filed the problem
                stat = FileStat(path, info.size, info.mtime)
                op, store, partition = chain
                listing.add(StateFile(stat, op, store, partition, None, "sst"))
                found[path] = (info.size, info.mtime)
    return found
