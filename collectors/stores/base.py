"""The interface every provider's reader implements, and what it needs to know.

A provider is one module here with one :class:`StoreReader` class, and one entry in
``READERS`` (:mod:`stateglass.collectors.stores`). Callers (the key-count chain, ``state``,
the eviction audit) only ever hold a ``StoreReader``; they never ask which one. A reader
answers, for one store partition directory:

=============================== ===========================================================
question                        methods
=============================== ===========================================================
which versions exist            :meth:`versions` (rebuildable), :meth:`change_versions`
                                (a delta or changelog), :meth:`full_versions` (a snapshot
                                or zip)
the state at a version          :meth:`load`, :meth:`load_keys`, :meth:`lookup`,
                                :meth:`chain_data`, :meth:`sorted_runs` (files for a
                                compiled merge, or None)
the changes of a version        :meth:`changes`, :meth:`apply_keys` (counts, set semantics)
keys that may differ            :meth:`differing_keys` (from the files two full versions
                                do not share)
counts without reading rows     :meth:`recorded_num_keys` (None: rows must be read)
what it stores where            :meth:`classify` (a file name's version and kind),
                                :meth:`list_entries` (a store kept outside the
                                checkpoint: one entry per version, as if files),
                                :meth:`shared_files` (files a full version references
                                outside its own, e.g. RocksDB's ``SSTs/``),
                                :meth:`column_family_id`
=============================== ===========================================================

The tests every reader passes, for a plugin author's pytest too, are in :mod:`.conformance`.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, Protocol, TypeVar

from stateglass.collectors.errors import wrap_parse_error
from stateglass.collectors.fs import FileInfo, FileSystem
from stateglass.collectors.limits import active
from stateglass.parsers.errors import ParseError
from stateglass.parsers.limits import DecodeLimits

T = TypeVar("T")

# File names the name parsers remember (``listing.classify``, ``hdfs.parse_hdfs_name``): every
# partition directory repeats the names of the versions it keeps (``7.delta``, ``7.zip``), so a
# listing meets a few hundred distinct ones. Names of purged versions (and RocksDB's unique SST
# names) never come back; a bound near what a listing meets keeps a watcher's cache from
# filling with them for its first hours (16,384 names held 4.5 MiB).
NAMES_CACHED = 4096
ChangeType = Literal["update", "delete", "append"]
Change = tuple[ChangeType, bytes, "bytes | None"]


@dataclass(frozen=True)
class StoreContext:
    """Everything a reader needs about one store of one partition."""

    fs: FileSystem
    store_dir: str
    # The directory's files when the caller listed them already (a scan does).
    files: tuple[FileInfo, ...] | None = None
    codec: str = "lz4"
    row_checksum: bool = False
    # RocksDB list-state merges: "," before Spark 4.3's mergeOperatorVersion 2, empty after.
    merge_delimiter: bytes = b","
    # Checkpoint format v2: the committed unique id of each version (from commits/).
    unique_ids: dict[int, str] = field(default_factory=dict)
    # How far a compressed file may expand (docs/limits.md).
    limits: DecodeLimits = field(default_factory=active)

    def join(self, *parts: str) -> str:
        if self.store_dir.startswith("/") and os.sep == "/":
            return os.path.join(self.store_dir, *parts)
        return posixpath.join(self.store_dir, *parts)

    def listing(self) -> list[FileInfo]:
        if self.files is not None:
            return list(self.files)
        if not self.fs.is_dir(self.store_dir):
            return []
        return [f for f in self.fs.list(self.store_dir) if not f.name.startswith(".")]

    def decode_file(self, name: str, parser: Callable[[bytes], T]) -> T:
        path = self.join(name)
        data = self.fs.read(path)
        try:
            return parser(data)
        except ParseError as exc:
            raise wrap_parse_error(path, exc) from exc


class StoreReader(Protocol):
    """Rebuilds raw (key, value) bytes of one store partition at a state version."""

    # File kinds (:meth:`classify`) holding one version's changes, and a whole version.
    CHANGE_KIND: ClassVar[str]
    FULL_KIND: ClassVar[str]
    # A subdirectory of files shared by many versions (RocksDB's ``SSTs``), or None.
    SHARED_DIR: ClassVar[str | None]
    # How rows are laid out: "hdfs" (plain UnsafeRows) or "rocksdb" (RocksDB's encoders).
    ROW_LAYOUT: ClassVar[str]

    def __init__(self, ctx: StoreContext) -> None: ...

    @classmethod
    def list_entries(cls, ctx: StoreContext) -> list[FileInfo] | None:
        """For a store kept outside the checkpoint's file system: its versions as entries
        named as :meth:`classify` reads them, with bytes and commit time; None when the store
        directory's own files are the store."""
        ...

    @staticmethod
    def classify(name: str) -> tuple[int, str] | None:
        """``(version, kind)`` of a file name of this provider's; None for any other name."""
        ...

    def versions(self) -> list[int]:
        """Versions whose state can be rebuilt from the files present."""
        ...

    def change_versions(self) -> set[int]:
        """Versions with change data of their own (a delta or changelog file)."""
        ...

    def full_versions(self) -> set[int]:
        """Versions with a whole copy of the state (a snapshot or zip file)."""
        ...

    def load_keys(self, version: int) -> set[bytes]:
        """The keys of ``version`` (what counting keys needs; values may stay unread)."""
        ...

    def apply_keys(self, keys: set[bytes], version: int) -> tuple[int, int, int]:
        """Apply ``version``'s change data to ``keys`` (those of ``version - 1``) in place,
        with Spark's set semantics (:mod:`.keysets`); ``(added, updated, removed)``."""
        ...

    def recorded_num_keys(self, version: int) -> int | None:
        """The key count a full version records about itself; None when the rows must be
        counted (no such record, or no full version)."""
        ...

    def shared_files(self, version: int) -> dict[str, int] | None:
        """Name -> bytes of the files in :attr:`SHARED_DIR` that full ``version``
        references; None for a provider that shares no file between versions."""
        ...

    def column_family_id(self, name: str) -> int | None:
        """The id of virtual column family ``name``, from the newest full version that
        records it; None when none does."""
        ...

    def chain_data(self, version: int) -> tuple[bytes | None, list[bytes]] | None:
        """The decompressed snapshot (or None) and deltas that make ``version``, for a
        compiled merge of record streams; None when it does not apply."""
        ...

    def sorted_runs(self, version: int) -> list[list[bytes]] | None:
        """The decoded data blocks of every sorted table that makes full ``version``
        (RocksDB's SSTs), for a compiled merge by key and sequence number; None when it
        does not apply."""
        ...

    def load(self, version: int) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) of the store at ``version``."""
        ...

    def changes(self, version: int) -> Iterator[Change]:
        """The records written by ``version`` (its delta or changelog), in file order."""
        ...

    def lookup(
        self, keys: Collection[bytes], versions: Sequence[int]
    ) -> Iterator[tuple[int, dict[bytes, bytes]]]:
        """``(version, {key: value})`` of the ``keys`` present, for each of ``versions`` in
        ascending order: one replay of the chain that never builds the whole store."""
        ...

    def differing_keys(self, before: int, after: int) -> list[bytes] | None:
        """Every stored key whose value may differ between full versions ``before`` and
        ``after`` (a superset, sorted), read from the files one references and the other
        does not; None when the provider's files cannot say (then both are read whole)."""
        ...

    def flushed_changes(self, before: int, after: int) -> dict[bytes, bytes | None] | None:
        """When full version ``after`` only adds files to ``before``'s, and those files hold
        the batch's writes, newer than every other entry: the state at ``after`` of every
        key they name (its value, or None when removed). Keys they do not name are as at
        ``before``. None when the files cannot say (a compaction, say)."""
        ...
