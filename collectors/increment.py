"""What a commit adds, looked up by name: the listing of a scan that lists no store directory.

A batch N writes version N + 1 of every store partition under names Spark derives from the
version alone (``N+1.delta``, ``N+1.snapshot``, ``N+1.zip``, ``N+1.changelog``, and under
checkpoint format v2 ``N+1_<uid>.zip`` / ``.changelog`` with the unique id its commit names).
So the files of new commits can be ``stat``-ed by name in each known store directory, and the
rest of the listing is what the database already knows: a 10,000-directory checkpoint costs a
few thousand ``stat`` calls per commit instead of 320,000 listed files.

What a lookup by name cannot see — files purged by Spark's maintenance, a snapshot written
for an older version, new partitions, leftovers — waits for the next full listing, which
:class:`~collectors.reconcile.ReconcilePolicy` schedules. New RocksDB SSTs are named in the
new zip's metadata, which only the chain reader opens: :func:`sst_files` stats those. Only
Spark's HDFS and RocksDB providers are looked up by name: a provider plugin's stores are
listed in full at every scan.

Example::

    versions = new_versions(logs, known.log_files)
    found = lookup_listing(cp, stores, known.state_files, logs, versions, commits, memo)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from stateglass.collectors.chains import ChainResult
from stateglass.collectors.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.db import Chain
from stateglass.collectors.fs import FileInfo
from stateglass.collectors.listing import FileStat, Listing, StateFile, classify
from stateglass.collectors.scan_plan import unique_ids
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


# path -> (its state file, its store directory, what a chain reader is handed of it); kept
# between scans of one checkpoint by the scanner, so that a known file is built once.
Memo = dict[str, tuple[StateFile, str, FileInfo | None]]


def _known_file(
    dirs: Mapping[str, tuple[StoreInfo, int]], path: str, size: int, mtime: float
) -> tuple[StateFile, str, FileInfo | None] | None:
    directory, name = path.rsplit("/", 1)
    if directory.endswith("/SSTs"):
        directory = directory[: -len("/SSTs")]
        owner = dirs.get(directory)
        if owner is None:
            return None
        return _state_file(FileStat(path, size, mtime), *owner, (None, "sst")), directory, None
    owner, kind = dirs.get(directory), classify(name)
    if owner is None or kind is None:
        return None
    info = FileInfo(name, False, size, mtime)
    return _state_file(FileStat(path, size, mtime), *owner, kind), directory, info


def _known_files(
    dirs: Mapping[str, tuple[StoreInfo, int]], known: Mapping[str, tuple[int, float]], memo: Memo
) -> tuple[dict[str, StateFile], dict[str, dict[str, FileInfo]], Memo]:
    """The known state files as the listing would give them, per store directory its
    versioned files by name (what a chain reader is handed), and the memo of this scan."""
    files: dict[str, StateFile] = {}
    by_dir: dict[str, dict[str, FileInfo]] = {d: {} for d in dirs}
    kept: Memo = {}
    for path, (size, mtime) in known.items():
        hit = memo.get(path)
        if hit is None or (hit[0].stat.size, hit[0].stat.mtime) != (size, mtime):
            hit = _known_file(dirs, path, size, mtime)
            if hit is None:
                continue
        f, directory, info = hit
        owner = dirs.get(directory)
        # The metadata may have changed since the memo was built (a store renamed, say).
        if owner is None or (owner[0].operator_id, owner[0].store_name, owner[1]) != f.chain:
            continue
        kept[path] = hit
        files[path] = f
        if info is not None:
            by_dir[directory][info.name] = info
    return files, by_dir, kept


def lookup_listing(
    cp: Checkpoint,
    stores: Iterable[StoreInfo],
    known: Mapping[str, tuple[int, float]],
    logs: dict[str, FileStat],
    versions: Iterable[int],
    commits: Mapping[int, CommitMetadata],
    memo: Memo,
) -> tuple[Listing, dict[str, tuple[int, float]], Memo] | None:
    """The known state files plus those of ``versions`` found by name, as a :class:`Listing`;
    ``path -> (size, mtime)`` of the files looked up and found (what the scan diffs); and
    the memo to pass to the next call.

    None when a store directory has no known file: a new partition, or a store never listed,
    whose earlier versions only a full listing finds; and when a store's provider names its
    files otherwise than Spark's two (a plugin, or a store kept elsewhere such as DynamoDB,
    whose versions only its reader's listing finds).
    """
    if any(s.provider not in _NAMES for s in stores):
        return None
    dirs = {
        cp.store_dir(s.operator_id, p, s.store_name): (s, p) for s in stores for p in s.partitions
    }
    files, by_dir, memo = _known_files(dirs, known, memo)
    if not all(by_dir.values()):
        return None
    current: dict[str, tuple[int, float]] = {}
    wanted = sorted(versions)
    for directory, (store, partition) in dirs.items():
        for version in wanted:
            for name in _candidates(store, partition, version, commits):
                path = f"{directory}/{name}"
                info, kind = cp.fs.stat(path), classify(name)
                if info is None or kind is None:
                    continue
                stat = FileStat(path, info.size, info.mtime)
                files[path] = _state_file(stat, store, partition, kind)
                by_dir[directory][name] = FileInfo(name, False, info.size, info.mtime)
                current[path] = (info.size, info.mtime)
    listing = Listing(logs, files, {d: tuple(f.values()) for d, f in by_dir.items()})
    return listing, current, memo


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
                listing.state_files[path] = StateFile(stat, op, store, partition, None, "sst")
                found[path] = (info.size, info.mtime)
    return found
