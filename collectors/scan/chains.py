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

from dataclasses import dataclass, field

from stateglass.collectors.errors import CheckpointError
from stateglass.collectors.fs import LOCAL, FileInfo, FileSystem
from stateglass.collectors.limits import active
from stateglass.collectors.stores import StoreContext, StoreReader, open_store
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
    # A full version's recorded key count (RocksDB's zip numKeys) equals the row count only
    # without column families.
    trust_zip_num_keys: bool = True
    # Decompression limits of the driver, carried to Spark executors (docs/limits.md).
    limits: DecodeLimits = field(default_factory=active)
    # The key set of ``from_version - 1`` as the previous scan left it (see :class:`KeyCarry`):
    # the walk applies the new delta to it instead of rebuilding that version from its files.
    seed: tuple[int, set[bytes]] | None = field(default=None, compare=False, repr=False)
    # Hand the key set of the last version counted back in the result (``ChainResult.tail``).
    keep_tail: bool = False

    @property
    def chain(self) -> tuple[int, str, int]:
        return self.operator_id, self.store_name, self.partition_id

    def open_reader(self, fs: FileSystem) -> StoreReader:
        """The store reader of this chain: the scan's listing, codec, unique ids and limits."""
        ctx = StoreContext(
            fs=fs,
            store_dir=self.store_dir,
            files=self.files,
            codec=self.codec,
            row_checksum=self.row_checksum,
            merge_delimiter=self.merge_delimiter,
            unique_ids=dict(self.unique_ids),
            limits=self.limits,
        )
        return open_store(ctx, self.provider)


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
    # (version, its key set) of the last version counted, when the task asked to keep it.
    tail: tuple[int, set[bytes]] | None = field(default=None, compare=False, repr=False)


class _Problems:
    """A chain's unreadable files, one per (path, kind): the chain goes on past them."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str], ChainProblem] = {}

    def add(self, exc: CheckpointError) -> None:
        kind = type(exc).__name__
        self.found.setdefault((exc.path, kind), ChainProblem(exc.path, kind, exc.why))

    def all(self) -> tuple[ChainProblem, ...]:
        return tuple(self.found.values())


class _ChainWalk:
    """Counts versions in ascending order, keeping only the key set of the last one counted."""

    def __init__(
        self, reader: StoreReader, versions: list[int], trust_num_keys: bool, problems: _Problems
    ) -> None:
        self.reader = reader
        self.rebuildable = set(versions)
        self.change_versions = reader.change_versions()
        self.full_versions = sorted(reader.full_versions())
        self.trust_num_keys = trust_num_keys
        self.problems = problems
        self.keys: set[bytes] | None = None
        self.keys_version: int | None = None

    def forget(self) -> None:
        self.keys, self.keys_version = None, None

    def count(self, version: int) -> VersionCount:
        """Key counts of ``version``, the key set then kept for ``version + 1``."""
        added = updated = removed = None
        num_keys: int | None = None
        if version in self.change_versions:
            keys = self._keys_before(version)
            if keys is not None:
                added, updated, removed = self.reader.apply_keys(keys, version)
            else:
                keys = self.reader.load_keys(version)
        elif self.trust_num_keys and version in self.full_versions:
            num_keys = self.reader.recorded_num_keys(version)
            keys = None if num_keys is not None else self.reader.load_keys(version)
        else:
            keys = self.reader.load_keys(version)
        if num_keys is None:
            assert keys is not None
            num_keys = len(keys)
        self.keys, self.keys_version = keys, (version if keys is not None else None)
        return VersionCount(version, num_keys, added, updated, removed, *self._files(version))

    def _keys_before(self, version: int) -> set[bytes] | None:
        """The key set of ``version - 1``, or None when it cannot be rebuilt."""
        if self.keys_version == version - 1:
            return self.keys
        prev = version - 1
        try:
            return self.reader.load_keys(prev) if prev == 0 or prev in self.rebuildable else None
        except CheckpointError as exc:
            # Fall back to this version's own snapshot, if it has one.
            self.problems.add(exc)
            return None

    def _files(
        self, version: int
    ) -> tuple[int | None, int | None, int | None, tuple[str, ...] | None]:
        """Bytes of the shared files a full version references, those new since the previous
        full version, how many it shares with it, and their names; all None otherwise."""
        if version not in self.full_versions:
            return None, None, None, None
        shared = self.reader.shared_files(version)
        if shared is None:
            return None, None, None, None
        earlier = [v for v in self.full_versions if v < version]
        before = (self.reader.shared_files(earlier[-1]) or {}) if earlier else {}
        uploaded = sum(size for name, size in shared.items() if name not in before)
        reused = sum(1 for name in shared if name in before)
        return sum(shared.values()), uploaded, reused, tuple(sorted(shared))


def compute_chain(task: ChainTask, fs: FileSystem = LOCAL) -> ChainResult:
    """Count keys of every version >= ``task.from_version`` the files of the chain can rebuild."""
    problems = _Problems()
    try:
        reader = task.open_reader(fs)
        versions = reader.versions()
    except CheckpointError as exc:
        problems.add(exc)
        return ChainResult(task, (), problems.all())
    walk = _ChainWalk(reader, versions, task.trust_zip_num_keys, problems)
    if task.seed is not None:
        walk.keys_version, walk.keys = task.seed
    out: list[VersionCount] = []
    for version in versions:
        if version < task.from_version:
            continue
        try:
            out.append(walk.count(version))
        except CheckpointError as exc:
            problems.add(exc)
            walk.forget()
    tail = None
    if task.keep_tail and walk.keys is not None and walk.keys_version is not None:
        tail = (walk.keys_version, walk.keys)
    return ChainResult(task, tuple(out), problems.all(), tail)
