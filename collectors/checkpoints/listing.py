"""A snapshot of a checkpoint's files (I/O), and the pure logic that diffs two of them.

Like watchdog's ``DirectorySnapshot``: :func:`list_checkpoint` walks the directory once through
the read-only :class:`~collectors.fs.FileSystem`; :func:`diff_files` compares what the database
already knows with what is there now by path, size and mtime; :func:`version_file_stats` turns a
store partition's files into per-version byte counts. Nothing here reads a file's contents.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.load_rule import load_start
from stateglass.collectors.errors import NotACheckpoint
from stateglass.collectors.fs import FileInfo

# Kinds of state files, from the providers' readers; ``sst`` files are shared by versions and
# have no version of their own.
from stateglass.collectors.stores import (
    CHANGE_KINDS,
    FULL_KINDS,
    StoreContext,
    classify_name,
    reader_class,
)
from stateglass.collectors.stores.base import NAMES_CACHED


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


Chain = tuple[int, str, int]


@dataclass
class ChainIndex:
    """The state files of a listing per chain, and the versions they hold: what planning and
    the version rows ask of every chain. A watcher keeps it between scans and adds each
    commit's files, instead of grouping every known file again."""

    files: dict[Chain, dict[str, StateFile]] = field(default_factory=dict)
    versions: dict[Chain, set[int]] = field(default_factory=dict)

    @classmethod
    def of(cls, files: Iterable[StateFile]) -> ChainIndex:
        index = cls()
        for f in files:
            index.add(f)
        return index

    def add(self, f: StateFile) -> None:
        chain = f.chain
        by_path = self.files.get(chain)
        if by_path is None:
            by_path = self.files[chain] = {}
            self.versions[chain] = set()
        by_path[f.stat.path] = f
        if f.version is not None:
            self.versions[chain].add(f.version)


@dataclass(frozen=True)
class Listing:
    """Every log file (offsets/, commits/) and state file of one checkpoint."""

    log_files: dict[str, FileStat]
    state_files: dict[str, StateFile]
    # store directory -> its state files, handed to the chain readers so they don't list again
    store_dirs: dict[str, tuple[FileInfo, ...]] = field(default_factory=dict)
    # Spark's temporary files (kind "temp", no version) in store and SSTs/ directories.
    temp_files: dict[str, StateFile] = field(default_factory=dict)
    # ``state_files`` per chain: kept up to date by whoever built the listing, or built here
    # on first use (see :meth:`chains`).
    index: ChainIndex | None = field(default=None, compare=False, repr=False)

    def chains(self) -> ChainIndex:
        """``state_files`` per chain (grouped once per listing)."""
        if self.index is None:
            # Frozen for its callers; the index is a cache of state_files, not a field of it.
            object.__setattr__(self, "index", ChainIndex.of(self.state_files.values()))
        assert self.index is not None
        return self.index

    def add(self, f: StateFile) -> None:
        """One more state file (an SST a counted zip named), in the index as well."""
        self.state_files[f.stat.path] = f
        if self.index is not None:
            self.index.add(f)


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


@lru_cache(maxsize=NAMES_CACHED)  # the same names recur in every partition directory
def classify(name: str) -> tuple[int | None, str] | None:
    """``(version, kind)`` of a file in a store directory; None when it is not a state file."""
    if is_temporary(name):
        return None
    return classify_name(name)


def is_leftover(name: str) -> bool:
    """A temporary file of Spark's atomic writes (``.N.delta.<uuid>.tmp``); once its batch is
    over, one still there was left by a task that died before renaming it."""
    return name.endswith(".tmp")


def diff_files(
    known: Mapping[str, tuple[int, float]], current: Mapping[str, tuple[int, float]]
) -> FileDiff:
    """Compare ``path -> (size, mtime)`` maps: what appeared, what changed, what disappeared."""
    added = frozenset(p for p in current if p not in known)
    changed = frozenset(p for p in current if p in known and known[p] != current[p])
    removed = frozenset(p for p in known if p not in current)
    return FileDiff(added, changed, removed)


def _names(cp: Checkpoint, path: str) -> list[tuple[str, bool]]:
    try:
        return cp.fs.names(path)
    except NotACheckpoint:
        return []  # not there (yet, or any more): nothing to list


def list_checkpoint(
    cp: Checkpoint,
    stores: Iterable[StoreInfo],
    known: Mapping[str, tuple[int, float]] | None = None,
) -> Listing:
    """List offsets/, commits/ and every store partition directory (with its ``SSTs/``).

    ``known`` (path -> size, mtime from the last scan) saves a ``stat`` per file: Spark writes
    a state file once under a temporary name and renames it, so a known delta, snapshot or
    SST keeps its size. Only the newest version of each directory is looked at again, since a
    retried batch may rewrite it.
    """
    # Logs first: a commits/N listed before the state files means they were all there.
    logs = log_files(cp)
    lister = _Lister(cp, known or {})
    for store in stores:
        for partition in store.partitions:
            lister.partition(store, partition)
    return Listing(logs, lister.files, lister.dirs, lister.temps)


def log_files(cp: Checkpoint) -> dict[str, FileStat]:
    """``offsets/N`` and ``commits/N``, stat-ed."""
    logs: dict[str, FileStat] = {}
    for log in ("offsets", "commits"):
        for f in cp.list_dir(log):
            if not f.is_dir and f.name.isdigit():
                path = cp.path(log, f.name)
                logs[path] = FileStat(path, f.size, f.mtime)
    return logs


class _Lister:
    """The state files of one checkpoint, gathered one store partition at a time."""

    def __init__(self, cp: Checkpoint, known: Mapping[str, tuple[int, float]]) -> None:
        self.cp = cp
        self.known = known
        self.files: dict[str, StateFile] = {}
        self.dirs: dict[str, tuple[FileInfo, ...]] = {}
        self.temps: dict[str, StateFile] = {}

    def partition(self, store: StoreInfo, partition: int) -> None:
        """One store partition's directory: its state files, leftovers and ``SSTs/``."""
        store_dir = self.cp.store_dir(store.operator_id, partition, store.store_name)
        elsewhere = reader_class(store.provider, store_dir).list_entries(
            StoreContext(self.cp.fs, store_dir)
        )
        if elsewhere is not None:
            self._elsewhere(store_dir, elsewhere, store, partition)
            return
        entries = _names(self.cp, store_dir)
        parsed = {name: classify(name) for name, is_dir in entries if not is_dir}
        for name in parsed:
            if is_leftover(name):
                self._temp(f"{store_dir}/{name}", store, partition)
        newest = max((p[0] for p in parsed.values() if p and p[0] is not None), default=None)
        infos = []
        for name, kind in parsed.items():
            if kind is None:
                continue
            # Concatenation: os.path.join per file would cost as much as the stat saved.
            path = f"{store_dir}/{name}"
            info = self._stat(path, name, reuse=kind[0] != newest)
            if info is None:
                continue
            infos.append(info)
            self._add(path, info, store, partition, kind)
        self.dirs[store_dir] = tuple(infos)
        if ("SSTs", True) in entries:
            self._ssts(store_dir, store, partition)

    def _elsewhere(
        self, store_dir: str, infos: list[FileInfo], store: StoreInfo, partition: int
    ) -> None:
        """A store kept outside the checkpoint: its reader's entries stand for files."""
        for info in infos:
            kind = classify(info.name)
            if kind is not None:
                self._add(f"{store_dir}/{info.name}", info, store, partition, kind)
        self.dirs[store_dir] = tuple(infos)

    def _ssts(self, store_dir: str, store: StoreInfo, partition: int) -> None:
        for name, is_dir in _names(self.cp, self.cp.path(store_dir, "SSTs")):
            if not is_dir and is_leftover(name):
                self._temp(f"{store_dir}/SSTs/{name}", store, partition)
            if is_dir or is_temporary(name) or not name.endswith(".sst"):
                continue
            path = f"{store_dir}/SSTs/{name}"
            info = self._stat(path, name, reuse=True)  # SST names are unique: never rewritten
            if info is not None:
                self._add(path, info, store, partition, (None, "sst"))

    def _add(
        self,
        path: str,
        info: FileInfo,
        store: StoreInfo,
        partition: int,
        kind: tuple[int | None, str],
    ) -> None:
        stat = FileStat(path, info.size, info.mtime)
        self.files[path] = StateFile(
            stat, store.operator_id, store.store_name, partition, kind[0], kind[1]
        )

    def _stat(self, path: str, name: str, reuse: bool) -> FileInfo | None:
        if reuse and path in self.known:
            size, mtime = self.known[path]
            return FileInfo(name, False, size, mtime)
        return self.cp.fs.stat(path)

    def _temp(self, path: str, store: StoreInfo, partition: int) -> None:
        info = self.cp.fs.stat(path)  # rare: the stat costs nothing overall
        if info is not None:
            stat = FileStat(path, info.size, info.mtime)
            self.temps[path] = StateFile(
                stat, store.operator_id, store.store_name, partition, None, "temp"
            )


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

    ``replay_bytes`` is what a cold load reads (:func:`~stateglass.collectors.checkpoints.
    load_rule.load_start`): the newest snapshot (a zip plus the SSTs it references) at or
    below the version, plus every delta or changelog after it. Checkpoint format v2 may keep
    several attempts of a version; their sizes add up.
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
    # Sorted versions and prefix sums: linear in the chain, even with thousands of versions.
    full_versions = sorted(full)
    change_versions = sorted(change)
    prefix = [0]
    for x in change_versions:
        prefix.append(prefix[-1] + change[x])

    def change_bytes_upto(v: int) -> int:
        return prefix[bisect_right(change_versions, v)]

    out: dict[int, VersionFiles] = {}
    for v in versions:
        base = load_start(v, full_versions).snapshot
        base_bytes = (full[base] + sst_bytes_live.get(base, 0)) if base else 0
        replay = base_bytes + change_bytes_upto(v) - change_bytes_upto(base)
        out[v] = VersionFiles(change.get(v), full.get(v), v - base, replay)
    return out
