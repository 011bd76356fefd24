"""Key counts of one state store partition, version after version: the unit of work of a scan.

A *chain* is one (operator, store, partition). :func:`compute_chain` walks its versions in
order keeping only the set of key bytes of the previous version, and applies each delta or
changelog to it with Spark's set semantics, so ``num_keys`` is exactly the number of rows
Spark's reader returns at batch = version − 1. Tasks and results are frozen, picklable
dataclasses: the local engine calls :func:`compute_chain` in-process, the Spark engine calls the
very same function inside one Spark task per chain.

Example::

    result = compute_chain(ChainTask(checkpoint="/cp", operator_id=0, store_name="default",
                                     partition_id=0, store_dir="/cp/state/0/0",
                                     provider="hdfs"))
    for v in result.versions:
        print(v.version, v.num_keys, v.keys_added)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.fs import LOCAL, FileInfo, FileSystem
from stateglass.collectors.limits import active
from stateglass.collectors.stores import StoreContext, StoreReader, open_store
from stateglass.collectors.stores.base import Change
from stateglass.collectors.stores.hdfs import HdfsStoreReader
from stateglass.collectors.stores.rocksdb import RocksDBStoreReader
from stateglass.parsers.limits import DecodeLimits


@dataclass(frozen=True)
class ChainTask:
    """What one engine task needs to count the keys of one store partition."""

    checkpoint: str
    operator_id: int
    store_name: str
    partition_id: int
    store_dir: str
    provider: str
    # The store directory's files as the scan listed them (None: the reader lists it).
    files: tuple[FileInfo, ...] | None = None
    codec: str = "lz4"
    row_checksum: bool = False
    merge_delimiter: bytes = b","
    unique_ids: tuple[tuple[int, str], ...] = ()
    # Versions below this one are already in the database and unchanged.
    from_version: int = 1
    # RocksDB zips record numKeys; it equals the row count only without column families.
    trust_zip_num_keys: bool = True
    # Decompression limits of the driver, carried to Spark executors (docs/limits.md).
    limits: DecodeLimits = field(default_factory=active)

    @property
    def chain(self) -> tuple[int, str, int]:
        return self.operator_id, self.store_name, self.partition_id


@dataclass(frozen=True)
class VersionCount:
    """Key counts of one version; the change counts are None when no delta/changelog exists."""

    version: int
    num_keys: int
    keys_added: int | None = None
    keys_updated: int | None = None
    keys_removed: int | None = None
    # RocksDB zips only: bytes of the SSTs the zip references, those new since the previous
    # zip (uploaded by this version), and how many SSTs it shares with the previous zip.
    sst_bytes_live: int | None = None
    sst_bytes_uploaded: int | None = None
    sst_files_reused: int | None = None
    # … and the names (in ``SSTs/``) of the SSTs it references: the orphan check needs them.
    sst_files: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ChainProblem:
    """A file that could not be read; the chain goes on from the next version it can rebuild."""

    path: str
    kind: str
    message: str


@dataclass(frozen=True)
class ChainResult:
    task: ChainTask
    versions: tuple[VersionCount, ...] = ()
    problems: tuple[ChainProblem, ...] = field(default=())


def _hdfs_files(reader: StoreReader) -> tuple[set[int], set[int]]:
    assert isinstance(reader, HdfsStoreReader)
    return set(reader.deltas), set(reader.snapshots)


def _rocksdb_files(reader: StoreReader) -> tuple[set[int], set[int]]:
    assert isinstance(reader, RocksDBStoreReader)
    return set(reader.changelogs), set(reader.zips)


# provider -> (versions with change data, versions with a full snapshot)
VERSION_FILES: dict[str, Callable[[StoreReader], tuple[set[int], set[int]]]] = {
    "hdfs": _hdfs_files,
    "rocksdb": _rocksdb_files,
}


def apply_changes(keys: set[bytes], changes: Iterable[Change]) -> tuple[int, int, int]:
    """Apply delta/changelog records to ``keys`` in place; ``(added, updated, removed)``.

    Set semantics, as Spark's loaders: a put of a present key is an update, a delete of an
    absent key changes nothing, and a list-state merge adds the key if it is absent.
    """
    added = updated = removed = 0
    for change_type, key, _ in changes:
        if change_type == "delete":
            if key in keys:
                keys.discard(key)
                removed += 1
        elif key in keys:
            updated += 1
        else:
            keys.add(key)
            added += 1
    return added, updated, removed


def apply_records(
    keys: set[bytes], records: list[tuple[bytes, bytes | None]]
) -> tuple[int, int, int]:
    """:func:`apply_changes` for a whole delta file of ``(key, value or None)`` records.

    Same result, at C speed: when no key is both put and deleted in the file, the order of
    its records does not matter, so the file is applied as two set operations. Otherwise
    (rare: a key removed and re-added within one batch) it falls back to record order.
    """
    puts = [k for k, v in records if v is not None]
    if len(puts) == len(records):
        before = len(keys)
        keys.update(puts)
        added = len(keys) - before
        return added, len(puts) - added, 0
    deletes = {k for k, v in records if v is None}
    put_set = set(puts)
    if not deletes.isdisjoint(put_set):
        return apply_changes(
            keys, (("delete", k, None) if v is None else ("update", k, v) for k, v in records)
        )
    removed = len(keys)
    keys.difference_update(deletes)
    removed -= len(keys)
    before = len(keys)
    keys.update(put_set)
    added = len(keys) - before
    return added, len(puts) - added, removed


def apply_key_sets(
    keys: set[bytes], puts: list[bytes], deletes: list[bytes]
) -> tuple[int, int, int]:
    """Apply a delta whose removed keys are never also put in it: order does not matter."""
    removed = len(keys)
    if deletes:
        keys.difference_update(deletes)
    removed -= len(keys)
    before = len(keys)
    keys.update(puts)
    added = len(keys) - before
    return added, len(puts) - added, removed


def _change_counts(reader: StoreReader, keys: set[bytes], version: int) -> tuple[int, int, int]:
    if isinstance(reader, HdfsStoreReader):
        # The hot loop of a scan: a delta's keys, values never sliced out, applied in bulk.
        puts, deletes, ordered = reader.delta_keys(version)
        if ordered:
            return apply_key_sets(keys, puts, deletes)
        return apply_records(keys, reader._records(reader.deltas[version], allow_deletes=True))
    return apply_changes(keys, reader.changes(version))


def compute_chain(task: ChainTask, fs: FileSystem = LOCAL) -> ChainResult:
    """Count keys of every version >= ``task.from_version`` the files of the chain can rebuild."""
    ctx = StoreContext(
        fs=fs,
        store_dir=task.store_dir,
        files=task.files,
        codec=task.codec,
        row_checksum=task.row_checksum,
        merge_delimiter=task.merge_delimiter,
        unique_ids=dict(task.unique_ids),
        limits=task.limits,
    )
    problems: dict[tuple[str, str], ChainProblem] = {}

    def problem(exc: CheckpointError) -> None:
        problems.setdefault(
            (exc.path, type(exc).__name__), ChainProblem(exc.path, type(exc).__name__, exc.why)
        )

    try:
        reader = open_store(ctx, task.provider)
        versions = reader.versions()
    except CheckpointError as exc:
        problem(exc)
        return ChainResult(task, (), tuple(problems.values()))
    change_versions, full_versions = VERSION_FILES[task.provider](reader)
    rebuildable = set(versions)

    def load_keys(version: int) -> set[bytes]:
        if isinstance(reader, HdfsStoreReader):
            return reader.load_keys(version)
        return set() if version == 0 else {k for k, _ in reader.load(version)}

    out: list[VersionCount] = []
    keys: set[bytes] | None = None
    keys_version: int | None = None
    zip_ssts: dict[int, dict[str, int]] = {}

    def ssts_of(version: int) -> dict[str, int]:
        if version not in zip_ssts:
            assert isinstance(reader, RocksDBStoreReader)
            meta = reader.zip_metadata(version)
            zip_ssts[version] = (
                {s.dfs_sst_file_name: s.size_bytes for s in meta.sst_files} if meta else {}
            )
        return zip_ssts[version]

    for version in versions:
        if version < task.from_version:
            continue
        try:
            added = updated = removed = None
            num_keys: int | None = None
            if version in change_versions:
                if keys_version != version - 1:
                    prev = version - 1
                    try:
                        keys = load_keys(prev) if prev == 0 or prev in rebuildable else None
                    except CheckpointError as exc:
                        # Fall back to this version's own snapshot, if it has one.
                        problem(exc)
                        keys = None
                if keys is not None:
                    added, updated, removed = _change_counts(reader, keys, version)
                else:
                    keys = load_keys(version)
            elif (
                task.provider == "rocksdb" and task.trust_zip_num_keys and version in full_versions
            ):
                assert isinstance(reader, RocksDBStoreReader)
                meta = reader.zip_metadata(version)
                keys, num_keys = None, meta.num_keys if meta else 0
            else:
                keys = load_keys(version)
            if num_keys is None:
                assert keys is not None
                num_keys = len(keys)
            keys_version = version if keys is not None else None
            live = uploaded = reused = None
            names: tuple[str, ...] | None = None
            if task.provider == "rocksdb" and version in full_versions:
                ssts = ssts_of(version)
                earlier = [z for z in full_versions if z < version]
                before = ssts_of(max(earlier)) if earlier else {}
                live = sum(ssts.values())
                uploaded = sum(size for name, size in ssts.items() if name not in before)
                reused = sum(1 for name in ssts if name in before)
                names = tuple(sorted(ssts))
            out.append(
                VersionCount(
                    version, num_keys, added, updated, removed, live, uploaded, reused, names
                )
            )
        except CheckpointError as exc:
            problem(exc)
            keys, keys_version = None, None
    return ChainResult(task, tuple(out), tuple(problems.values()))
