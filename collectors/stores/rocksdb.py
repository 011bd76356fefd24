"""RocksDBStateStoreProvider: ``N.zip`` + ``SSTs/``, plus ``N.changelog`` when enabled.

Version V = ``V.zip`` restored into a private temporary directory and read with rocksdict,
read-only; or, when V has no zip, the newest zip below it plus the changelogs after it
(``RocksDB.loadCheckpointFromDfs`` + ``replayChangelog``). Checkpoint format v2 names files
``V_<uniqueId>``, with the committed id taken from the commit log.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import ClassVar

from stateglass.collectors.errors import (
    CheckpointError,
    CorruptFile,
    MissingVersion,
    UnsafeArchive,
    wrap_parse_error,
)
from stateglass.collectors.fs import LOCAL, FileInfo
from stateglass.collectors.stores.base import Change, ChangeType, StoreContext
from stateglass.collectors.stores.keysets import apply_changes
from stateglass.parsers.changelog import (
    Changelog,
    changelog_pairs,
    parse_changelog,
    unwrap_delete_key,
)
from stateglass.parsers.compression import decompress
from stateglass.parsers.errors import ParseError, UnsupportedFormat
from stateglass.parsers.limits import DecodeLimits
from stateglass.parsers.rocksdb_zip import RocksDBCheckpointMetadata, check_zip_entries
from stateglass.parsers.sst import (
    TYPE_DELETION,
    TYPE_SINGLE_DELETION,
    TYPE_VALUE,
    sst_entries,
    sst_expanded_size,
    sst_keys,
    sst_sorted_run,
)

_CHANGE_TYPES: dict[str, ChangeType] = {"put": "update", "delete": "delete", "merge": "append"}
# SST entry types a flush's state can be read from without RocksDB's merge operator.
_FLUSHED_TYPES = frozenset({TYPE_VALUE, TYPE_DELETION, TYPE_SINGLE_DELETION})
# Share of a version's SST bytes beyond which its unshared SSTs are not worth reading for
# keys (decoding them costs more than reading the two versions whole).
UNSHARED_MAX = 0.25
UNSHARED_MIN_BYTES = 1 << 20  # below it, any share is cheap to decode


def parse_rocksdb_name(name: str) -> tuple[int, str | None, str] | None:
    """``(version, unique_id or None, "zip"|"changelog")`` for Spark's file names, else None."""
    stem, dot, ext = name.rpartition(".")
    if not dot or ext not in ("zip", "changelog"):
        return None
    version, _, unique_id = stem.partition("_")
    if not version.isdigit():
        return None
    return int(version), (unique_id or None), ext


def names_unique_id(name: str) -> bool:
    """Whether ``name`` is a version's file of checkpoint format v2 (``V_<uniqueId>.zip``)."""
    parsed = parse_rocksdb_name(name)
    return parsed is not None and parsed[1] is not None


def classify_rocksdb_name(name: str) -> tuple[int, str] | None:
    """``(version, "zip"|"changelog")`` for Spark's file names, else None."""
    parsed = parse_rocksdb_name(name)
    return None if parsed is None else (parsed[0], parsed[2])


class RocksDBStoreReader:
    """Reads one RocksDB store partition directory."""

    CHANGE_KIND: ClassVar[str] = "changelog"
    FULL_KIND: ClassVar[str] = "zip"
    SHARED_DIR: ClassVar[str | None] = "SSTs"
    ROW_LAYOUT: ClassVar[str] = "rocksdb"

    @classmethod
    def list_entries(cls, ctx: StoreContext) -> list[FileInfo] | None:
        return None  # the store directory's files are the store

    @staticmethod
    def classify(name: str) -> tuple[int, str] | None:
        return classify_rocksdb_name(name)

    def __init__(self, ctx: StoreContext) -> None:
        self.ctx = ctx
        # Zip metadata by version: a scan asks for a zip's key count and its SSTs.
        self._metadata: dict[int, RocksDBCheckpointMetadata | None] = {}
        # version -> {unique_id or None: file name}
        self.zips: dict[int, dict[str | None, str]] = {}
        self.changelogs: dict[int, dict[str | None, str]] = {}
        for f in ctx.listing():
            parsed = parse_rocksdb_name(f.name)
            if parsed is None or f.is_dir:
                continue
            version, uid, ext = parsed
            (self.zips if ext == "zip" else self.changelogs).setdefault(version, {})[uid] = f.name

    # ---- choosing files -------------------------------------------------------------------

    def _pick(
        self, files: dict[int, dict[str | None, str]], version: int, uid: str | None = None
    ) -> str | None:
        """The file of ``version`` with the committed unique id (format v2) or none (v1)."""
        by_id = files.get(version)
        if not by_id:
            return None
        want = uid if uid is not None else self.ctx.unique_ids.get(version)
        if want is not None:
            return by_id.get(want)
        if None in by_id:
            return by_id[None]
        # Format v2 without a commit entry (batch not committed): ambiguous, refuse to guess.
        return by_id[next(iter(by_id))] if len(by_id) == 1 else None

    def versions(self) -> list[int]:
        out = []
        for v in sorted(set(self.zips) | set(self.changelogs)):
            try:
                self._plan(v)
            except (MissingVersion, CorruptFile):
                continue
            out.append(v)
        return out

    def _plan(self, version: int) -> tuple[str | None, list[str]]:
        """The zip to restore (None: empty store) and the changelogs to replay after it."""
        direct = self._pick(self.zips, version)
        if direct is not None:
            return direct, []
        if self.ctx.unique_ids or any(None not in ids for ids in self.changelogs.values()):
            return self._plan_from_lineage(version)
        base = max((v for v in self.zips if v < version and None in self.zips[v]), default=0)
        missing = [
            v for v in range(base + 1, version + 1) if self._pick(self.changelogs, v) is None
        ]
        if missing:
            where = f"{base}.zip" if base else "an empty store"
            raise MissingVersion(
                self.ctx.join(f"{missing[0]}.changelog"),
                f"missing, and no snapshot bridges it: version {version} needs changelogs "
                f"{base + 1}..{version} on top of {where}",
            )
        zip_name = self.zips[base][None] if base else None
        return zip_name, [self.changelogs[v][None] for v in range(base + 1, version + 1)]

    def _plan_from_lineage(self, version: int) -> tuple[str | None, list[str]]:
        """Checkpoint format v2: V's changelog names the versions and ids since its snapshot."""
        name = self._pick(self.changelogs, version)
        if name is None:
            raise MissingVersion(
                self.ctx.join(f"{version}_<id>.changelog"),
                f"no zip or changelog with the committed id of version {version}",
            )
        changelog = self._changelog(name)
        chain = [(item.version, item.checkpoint_unique_id) for item in changelog.lineage]
        replay = [name]
        for v, uid in reversed(chain):
            zip_name = self._pick(self.zips, v, uid)
            if zip_name is not None:
                return zip_name, replay
            log_name = self._pick(self.changelogs, v, uid)
            if log_name is None:
                raise MissingVersion(
                    self.ctx.join(f"{v}_{uid}.changelog"),
                    f"missing, and no snapshot bridges it (needed for version {version})",
                )
            replay.insert(0, log_name)
        first = chain[0][0] if chain else version
        if first != 1:
            raise MissingVersion(
                self.ctx.join(f"{first}_<id>.zip"),
                f"lineage of version {version} starts at {first} but no snapshot is present",
            )
        return None, replay

    # ---- reading ----------------------------------------------------------------------------

    def _changelog(self, name: str) -> Changelog:
        return self.ctx.decode_file(
            name, lambda d: parse_changelog(decompress(self.ctx.codec, d, self.ctx.limits))
        )

    def _changes(self, name: str) -> Changelog | list[tuple[bytes, bytes | None]]:
        """A changelog to replay: ``(key, value)`` pairs from the compiled loop when the file
        has puts and deletes only (v1, v3), else the parsed file."""

        def parse(data: bytes) -> Changelog | list[tuple[bytes, bytes | None]]:
            plain = decompress(self.ctx.codec, data, self.ctx.limits)
            pairs = changelog_pairs(plain)
            return parse_changelog(plain) if pairs is None else pairs

        return self.ctx.decode_file(name, parse)

    def _zip_items(self, name: str) -> Iterator[tuple[bytes, bytes]]:
        # One generator between rocksdict and the reader (a layer costs ~0.05 µs a row).
        with restored_db(self.ctx, name) as db:
            try:
                yield from db.db.items(read_opt=db.scan_options())  # type: ignore[attr-defined]
            except Exception as exc:  # rocksdict raises plain Exception subclasses
                raise CorruptFile(db.path, f"RocksDB read failed: {exc}") from exc

    def load(self, version: int) -> Iterator[tuple[bytes, bytes]]:
        if version == 0:
            return iter(())
        zip_name, replay = self._plan(version)
        if not replay:
            assert zip_name is not None
            return self._zip_items(zip_name)
        state: dict[bytes, bytes] = dict(self._zip_items(zip_name)) if zip_name else {}
        delim = self.ctx.merge_delimiter
        for name in replay:
            found = self._changes(name)
            if not isinstance(found, Changelog):
                for key, value in found:
                    if value is None:
                        state.pop(self._delete_key(name, key), None)
                    else:
                        state[key] = value
                continue
            for rec in found.records:
                if rec.kind == "put":
                    assert rec.value is not None
                    state[rec.key] = rec.value
                elif rec.kind == "delete":
                    state.pop(self._delete_key(name, rec.key), None)
                else:
                    assert rec.value is not None
                    old = state.get(rec.key)
                    state[rec.key] = rec.value if old is None else old + delim + rec.value
        return iter(state.items())

    def lookup(
        self, keys: Collection[bytes], versions: Sequence[int]
    ) -> Iterator[tuple[int, dict[bytes, bytes]]]:
        """See :meth:`StoreReader.lookup`: point reads in each version's restored zip, or
        the changelogs after the previous version, keeping only ``keys``."""
        wanted = sorted(set(versions))
        if not wanted:
            return
        emit = set(wanted)
        keys = keys if isinstance(keys, (set, frozenset)) else set(keys)
        state: dict[bytes, bytes] = {}
        current = 0  # the version ``state`` holds
        # Format v2 chains follow the committed lineage: plan every version on its own.
        lineage = bool(self.ctx.unique_ids) or any(
            None not in ids for ids in self.changelogs.values()
        )
        for version in range(wanted[0], wanted[-1] + 1):
            log = None if lineage else self._pick(self.changelogs, version)
            if current and current == version - 1 and log is not None:
                self._replay_into(state, log, keys)
            else:
                zip_name, replay = self._plan(version)
                state = {}
                if zip_name is not None:
                    with restored_db(self.ctx, zip_name) as db:
                        state = db.get_many(keys)
                for name in replay:
                    self._replay_into(state, name, keys)
            current = version
            if version in emit:
                yield version, dict(state)

    def _replay_into(self, state: dict[bytes, bytes], name: str, keys: Collection[bytes]) -> None:
        delim = self.ctx.merge_delimiter
        for rec in self._changelog(name).records:
            if rec.kind == "delete":
                key = self._delete_key(name, rec.key)
                if key in keys:
                    state.pop(key, None)
            elif rec.key in keys:
                assert rec.value is not None
                old = state.get(rec.key) if rec.kind == "merge" else None
                state[rec.key] = rec.value if old is None else old + delim + rec.value

    def _delete_key(self, name: str, key: bytes) -> bytes:
        if not self.ctx.row_checksum:
            return key
        try:
            return unwrap_delete_key(key)
        except ParseError as exc:
            raise CorruptFile(self.ctx.join(name), exc.why) from exc

    def changes(self, version: int) -> Iterator[Change]:
        name = self._pick(self.changelogs, version)
        if name is None:
            raise MissingVersion(
                self.ctx.join(f"{version}.changelog"),
                "missing: change data needs RocksDB changelog checkpointing "
                "(spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled)",
            )
        for rec in self._changelog(name).records:
            key = self._delete_key(name, rec.key) if rec.kind == "delete" else rec.key
            yield _CHANGE_TYPES[rec.kind], key, rec.value

    def differing_keys(self, before: int, after: int) -> list[bytes] | None:
        """See :meth:`StoreReader.differing_keys`: the keys of the SSTs that one zip
        references and the other does not. An SST is immutable and named uniquely, so the
        files both reference hold the same entries in both versions; a key only they hold
        resolves to the same value in both. None when a version has no zip of its own (it
        is replayed from changelogs), when a zip carries a non-empty write-ahead log (its
        records are in no SST), when the unshared SSTs are over :data:`UNSHARED_MAX` of the
        newer version's bytes past 1 MiB (a compaction: their keys are most of the store),
        or when an SST is in a codec we do not decode."""
        files = self._sst_sizes(before, after)
        if files is None:
            return None
        unshared = set(files[0]) ^ set(files[1])
        total = sum(files[1].values())
        if total > UNSHARED_MIN_BYTES and (
            sum(files[1].get(n, 0) for n in unshared) > UNSHARED_MAX * total
        ):
            return None  # a compaction rewrote the store: reading it whole costs less
        keys: set[bytes] = set()
        for sst in sorted(unshared):
            path = self.ctx.join(self.SHARED_DIR or "SSTs", sst)
            try:
                keys.update(sst_keys(self.ctx.fs.read(path), self.ctx.limits))
            except UnsupportedFormat:
                return None
            except ParseError as exc:
                raise wrap_parse_error(path, exc) from exc
        return sorted(keys)  # RocksDB's bytewise order: the order a whole scan gives

    def _sst_sizes(self, *versions: int) -> list[dict[str, int]] | None:
        """Per version, its zip's SSTs and their sizes; None when a version has no zip of
        its own or its zip carries a non-empty write-ahead log (records in no SST)."""
        files = []
        for version in versions:
            name = self._pick(self.zips, version)
            if name is None:
                return None
            archive = _Zip(self.ctx, name)
            archive.close()
            if archive.has_wal:
                return None
            files.append({f.dfs_sst_file_name: f.size_bytes for f in archive.meta.sst_files})
        return files

    def flushed_changes(self, before: int, after: int) -> dict[bytes, bytes | None] | None:
        """See :meth:`StoreReader.flushed_changes`: when ``after``'s zip references every SST
        of ``before``'s and more, nothing was compacted away, so the SSTs it adds are
        flushes of the batch's writes, newer than every other entry: per key, the entry
        with the highest sequence number is its state at ``after``. None when a version
        has no zip or a WAL, when SSTs were removed (a compaction), or when an entry is
        not a put or a delete (merge operands, blobs) or ties on its sequence number."""
        files = self._sst_sizes(before, after)
        if files is None or not set(files[0]) <= set(files[1]):
            return None
        newest: dict[bytes, int] = {}
        out: dict[bytes, bytes | None] = {}
        for sst in sorted(set(files[1]) - set(files[0])):
            path = self.ctx.join(self.SHARED_DIR or "SSTs", sst)
            try:
                entries = sst_entries(self.ctx.fs.read(path), self.ctx.limits)
            except UnsupportedFormat:
                return None
            except ParseError as exc:
                raise wrap_parse_error(path, exc) from exc
            for key, tag, value in entries:
                kind, seen = tag & 0xFF, newest.get(key, -1)
                if kind not in _FLUSHED_TYPES or (tag >> 8) == seen:
                    return None
                if (tag >> 8) > seen:
                    newest[key] = tag >> 8
                    out[key] = value if kind == TYPE_VALUE else None
        return out

    def zip_metadata(self, version: int) -> RocksDBCheckpointMetadata | None:
        """The metadata of ``version``'s zip; None without a zip of the committed id."""
        if version not in self._metadata:
            name = self._pick(self.zips, version)
            self._metadata[version] = None if name is None else _read_zip_metadata(self.ctx, name)
        return self._metadata[version]

    # ---- what the protocol asks beyond rows -------------------------------------------------

    def change_versions(self) -> set[int]:
        return set(self.changelogs)

    def full_versions(self) -> set[int]:
        return set(self.zips)

    def load_keys(self, version: int) -> set[bytes]:
        if version == 0:
            return set()
        zip_name, replay = self._plan(version)
        if replay or zip_name is None:
            return {k for k, _ in self.load(version)}
        with restored_db(self.ctx, zip_name) as db:
            return db.key_set()

    def apply_keys(self, keys: set[bytes], version: int) -> tuple[int, int, int]:
        return apply_changes(keys, self.changes(version))

    def recorded_num_keys(self, version: int) -> int | None:
        # numKeys counts the rows of every column family: the caller knows whether it has any.
        if version not in self.zips:
            return None
        meta = self.zip_metadata(version)
        return meta.num_keys if meta else 0

    def shared_files(self, version: int) -> dict[str, int] | None:
        meta = self.zip_metadata(version) if version in self.zips else None
        return {s.dfs_sst_file_name: s.size_bytes for s in meta.sst_files} if meta else {}

    def column_family_id(self, name: str) -> int | None:
        # Virtual column family ids live only in the zips' metadata: ask the newest first.
        for version in sorted(self.zips, reverse=True):
            meta = self.zip_metadata(version)
            mapping = meta.column_family_mapping if meta is not None else None
            if mapping and name in mapping:
                return int(mapping[name])
        return None

    def chain_data(self, version: int) -> tuple[bytes | None, list[bytes]] | None:
        return None  # zips and SSTs are no record stream for the compiled merge

    def sorted_runs(self, version: int) -> list[list[bytes]] | None:
        """See :meth:`StoreReader.sorted_runs`: the data blocks of every SST ``version``'s
        zip references, when the zip alone makes the version (no changelog to replay) and
        holds no write-ahead log, and every SST is one a plain merge reads as RocksDB does
        (:func:`sst_sorted_run`). A table the parser finds damaged or over its budget is
        None too: RocksDB's own read then says what is wrong, as it always has."""
        if version == 0:
            return []
        zip_name, replay = self._plan(version)
        if zip_name is None or replay:
            return None
        archive = _Zip(self.ctx, zip_name)
        archive.close()
        if archive.has_wal:
            return None
        runs = []
        for src, _info, _local in referenced_ssts(self.ctx, archive):
            try:
                run = sst_sorted_run(self.ctx.fs.read(src), self.ctx.limits)
            except ParseError:
                return None
            if run is None:
                return None
            runs.append(run)
        return runs


# zipfile's ways of saying an archive is damaged: a bad directory or CRC (BadZipFile), a
# damaged deflate stream (zlib.error), an unknown method (NotImplementedError), an encrypted
# entry (RuntimeError), a short read (EOFError).
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    EOFError,
    ValueError,
    zlib.error,
    NotImplementedError,
    RuntimeError,
)
_COPY_CHUNK = 1 << 20


class _Zip:
    """One checkpoint zip, its directory read and checked; entries are read on demand.

    The archive's bytes stay in memory (they are small: the SSTs live beside the zip), but no
    entry is inflated whole: :meth:`extract_to` streams them to disk, after checking their
    declared sizes (which zipfile enforces while inflating) against the budget.
    """

    def __init__(self, ctx: StoreContext, name: str) -> None:
        self.name = name
        self.path = ctx.join(name)
        self.limits = ctx.limits
        raw = ctx.fs.read(self.path)
        self.size = len(raw)
        if not raw:
            raise CorruptFile(self.path, "empty file (0 bytes): not a zip archive")
        try:
            self.zf = zipfile.ZipFile(io.BytesIO(raw))
            self.infos = self.zf.infolist()
        except _ZIP_ERRORS as exc:
            raise CorruptFile(self.path, f"not a valid zip archive ({exc})") from exc
        try:
            check_zip_entries(i.filename for i in self.infos)
        except ParseError as exc:
            raise UnsafeArchive(self.path, exc.why) from exc
        try:
            self.limits.check("zip", sum(i.file_size for i in self.infos), self.size)
        except ParseError as exc:
            raise CorruptFile(self.path, exc.why) from exc
        self.names = [i.filename for i in self.infos if i.filename != "metadata"]
        if len(self.names) == len(self.infos):
            raise CorruptFile(
                self.path, "zip has no 'metadata' entry: not a Spark RocksDB checkpoint"
            )
        self.meta = self._metadata()

    @property
    def has_wal(self) -> bool:
        """Whether the archive holds a write-ahead log with entries (RocksDB replays it on
        open, so its SSTs alone are not the version). Spark flushes before it checkpoints:
        the ``.log`` it zips is empty."""
        return any(i.filename.endswith(".log") and i.file_size for i in self.infos) or any(
            f.size_bytes for f in self.meta.log_files
        )

    def _metadata(self) -> RocksDBCheckpointMetadata:
        try:
            data = self.zf.read("metadata")
        except _ZIP_ERRORS as exc:
            raise CorruptFile(self.path, f"not a valid zip archive ({exc})") from exc
        try:
            return RocksDBCheckpointMetadata.from_bytes(data)
        except ParseError as exc:
            raise CorruptFile(f"{self.path}!metadata", exc.why) from exc

    def check_against_metadata(self) -> None:
        """Entries the metadata describes (SSTs, archived logs) must have its sizes."""
        recorded = {f.local_file_name: f.size_bytes for f in self.meta.sst_files}
        recorded.update({f.local_file_name: f.size_bytes for f in self.meta.log_files})
        for info in self.infos:
            want = recorded.get(info.filename.rpartition("/")[2])
            if want is not None and info.file_size != want:
                raise CorruptFile(
                    self.path,
                    f"zip entry {info.filename!r} declares {info.file_size} bytes, the "
                    f"metadata records {want}",
                )

    def extract_to(self, directory: str, rewrite: dict[str, Callable[[bytes], bytes]]) -> None:
        """Write every entry but ``metadata`` into ``directory``, streaming; ``rewrite`` maps a
        name prefix to a function applied to that (small) entry's bytes."""
        for name in self.names:
            target = os.path.join(directory, name)
            try:
                with self.zf.open(name) as src, open(target, "wb") as dst:
                    fix = next((f for p, f in rewrite.items() if name.startswith(p)), None)
                    if fix is not None:
                        dst.write(fix(src.read()))
                    else:
                        shutil.copyfileobj(src, dst, _COPY_CHUNK)
            except _ZIP_ERRORS as exc:
                raise CorruptFile(self.path, f"not a valid zip archive ({exc})") from exc

    def close(self) -> None:
        self.zf.close()


def _read_zip_metadata(ctx: StoreContext, name: str) -> RocksDBCheckpointMetadata:
    z = _Zip(ctx, name)
    z.close()
    return z.meta


_MERGE_OPERATOR = re.compile(rb"^(\s*merge_operator=).*$", re.M)


def _pin_merge_operator(options: bytes, delimiter: bytes) -> bytes:
    """Merge list-state operands with Spark's delimiter, whatever the OPTIONS file says.

    4.3 records a bare ``StringAppendOperator`` (which loaders give a "," delimiter) and 3.5
    records ``nullptr`` (which crashes RocksDB on merge entries); our private copy names it.
    """
    op = b"{id=StringAppendOperator;delimiter=" + delimiter + b";}"
    return _MERGE_OPERATOR.sub(lambda m: m.group(1) + op, options)


# SSTs found within their budget: (path, size, mtime, limits). An SST is immutable and shared
# by many versions, and checking one walks every block header it has.
_WITHIN_BUDGET: dict[tuple[str, int, float, DecodeLimits], None] = {}
_WITHIN_BUDGET_MAX = 1 << 16


def check_sst_budget(
    ctx: StoreContext, path: str, info: FileInfo, data: bytes | None = None
) -> None:
    """Refuse an SST whose blocks declare more than its decompression budget, before RocksDB
    reads it: RocksDB allocates whatever a block declares. ``data``: its bytes when read
    already. A table in a layout the parser does not read (``UnsupportedFormat``) is left to
    RocksDB."""
    key = (path, info.size, info.mtime, ctx.limits)
    if key in _WITHIN_BUDGET:
        return
    # Read whole rather than mapped: a file truncated under a map kills the process (SIGBUS).
    data = ctx.fs.read(path) if data is None else data
    try:
        sst_expanded_size(data, ctx.limits)
    except UnsupportedFormat:
        return
    except ParseError as exc:
        raise wrap_parse_error(path, exc) from exc
    if len(_WITHIN_BUDGET) >= _WITHIN_BUDGET_MAX:
        _WITHIN_BUDGET.clear()
    _WITHIN_BUDGET[key] = None


def referenced_ssts(ctx: StoreContext, archive: _Zip) -> list[tuple[str, FileInfo, str]]:
    """``(path, listing, local name)`` of every SST ``archive`` references, each present in
    ``SSTs/`` with the size the zip's metadata records; the zip's entries checked against
    its metadata first (a flat directory, the sizes it records, no SST inside it)."""
    zip_path, zip_name = archive.path, archive.name
    entries = set(archive.names)
    for entry in entries:
        # Spark zips a flat directory; a nested name would not restore into one.
        if "/" in entry or entry == ".":
            raise CorruptFile(zip_path, f"zip entry {entry!r} is not a plain file name")
    archive.check_against_metadata()
    sst_dir = ctx.join("SSTs")
    present = {f.name: f for f in ctx.fs.list(sst_dir)} if ctx.fs.is_dir(sst_dir) else {}
    found = []
    for sst in archive.meta.sst_files:
        src = ctx.join("SSTs", sst.dfs_sst_file_name)
        if sst.dfs_sst_file_name not in present:
            raise MissingVersion(src, f"SST file referenced by {zip_name} is missing")
        info = present[sst.dfs_sst_file_name]
        if info.size != sst.size_bytes:
            raise CorruptFile(
                src,
                f"size {info.size} differs from {sst.size_bytes} "
                f"recorded in {zip_name} (half-written upload?)",
            )
        if sst.local_file_name in entries:
            raise CorruptFile(
                zip_path, f"SST {sst.local_file_name!r} is also a file inside the zip"
            )
        found.append((src, info, sst.local_file_name))
    return found


class restored_db:
    """A zip plus its SSTs restored into a private temporary directory, opened read-only.

    SSTs are symlinked when the checkpoint is on the local disk (RocksDB opened read-only never
    writes to them) and copied otherwise; each is first checked against its decompression
    budget (:func:`check_sst_budget`).
    """

    def __init__(self, ctx: StoreContext, zip_name: str) -> None:
        self.ctx = ctx
        self.zip_name = zip_name
        self.tmp: str | None = None
        self.db: object | None = None

    def __enter__(self) -> _Items:
        try:
            return self._open()
        except BaseException:
            # A with-statement calls __exit__ only after __enter__ returns: clean up here.
            self.__exit__()
            raise

    def _open(self) -> _Items:
        import rocksdict

        zip_path = self.ctx.join(self.zip_name)
        archive = _Zip(self.ctx, self.zip_name)
        ssts = referenced_ssts(self.ctx, archive)
        self.tmp = tempfile.mkdtemp(prefix="stateglass-rocksdb-")
        try:
            delimiter = self.ctx.merge_delimiter
            archive.extract_to(
                self.tmp, {"OPTIONS-": lambda data: _pin_merge_operator(data, delimiter)}
            )
            archive.close()
            for src, info, local_name in ssts:
                dst = os.path.join(self.tmp, local_name)
                if self.ctx.fs is LOCAL:
                    check_sst_budget(self.ctx, src, info)
                    os.symlink(os.path.abspath(src), dst)
                else:
                    # Remote: our private copy (the file system serves it from its cache).
                    data = self.ctx.fs.read(src)
                    check_sst_budget(self.ctx, src, info, data)
                    with open(dst, "wb") as fh:
                        fh.write(data)
        except OSError as exc:
            # Our own temporary directory, not the checkpoint (disk full, say).
            raise CheckpointError(
                zip_path, f"cannot restore it into {self.tmp} ({exc.strerror or exc})"
            ) from exc
        try:
            opts = rocksdict.Options(raw_mode=True)
            self.db = rocksdict.Rdict(
                self.tmp, options=opts, access_type=rocksdict.AccessType.read_only()
            )
        except Exception as exc:  # rocksdict raises plain Exception subclasses
            raise CorruptFile(zip_path, f"RocksDB cannot open it: {exc}") from exc
        return _Items(self.db, zip_path)

    def __exit__(self, *exc: object) -> None:
        if self.db is not None:
            self.db.close()  # type: ignore[attr-defined]
            self.db = None
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


class _Items:
    def __init__(self, db: object, path: str) -> None:
        self.db = db
        self.path = path

    def get_many(self, keys: Collection[bytes]) -> dict[bytes, bytes]:
        """The present ones of ``keys``, by point reads."""
        try:
            found = {k: self.db.get(k) for k in keys}  # type: ignore[attr-defined]
        except Exception as exc:
            raise CorruptFile(self.path, f"RocksDB read failed: {exc}") from exc
        return {k: v for k, v in found.items() if v is not None}

    def key_set(self) -> set[bytes]:
        """Every key, values left inside RocksDB (built in one call: no generator step a key)."""
        try:
            return set(self.db.keys(read_opt=self.scan_options()))  # type: ignore[attr-defined]
        except Exception as exc:
            raise CorruptFile(self.path, f"RocksDB read failed: {exc}") from exc

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        try:
            yield from self.db.items(read_opt=self.scan_options())  # type: ignore[attr-defined]
        except Exception as exc:
            raise CorruptFile(self.path, f"RocksDB read failed: {exc}") from exc

    @staticmethod
    def scan_options() -> object:
        """Read options of a whole-store scan: its blocks are read once, so they stay out of
        the block cache."""
        import rocksdict

        options = rocksdict.ReadOptions()
        options.fill_cache(False)  # type: ignore[call-arg]  # the stub omits the argument
        return options
