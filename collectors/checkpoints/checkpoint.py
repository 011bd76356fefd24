"""A checkpoint directory as StateGlass sees it: batches, operators, stores and their schemas.

Example::

    cp = Checkpoint.open("/data/checkpoints/orders")
    print(cp.query_id, cp.last_committed_batch)
    for store in cp.stores():
        print(store.operator_id, store.store_name, store.provider, store.num_partitions)
"""

from __future__ import annotations

import os
import posixpath
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

from stateglass.collectors.checkpoints.operator_names import INFERRED, INFERRED_HELP
from stateglass.collectors.errors import CheckpointError, NotACheckpoint, NotFound, wrap_parse_error
from stateglass.collectors.fs import LOCAL, FileInfo, FileSystem
from stateglass.collectors.stores import READERS, reader_class
from stateglass.parsers.errors import ParseError
from stateglass.parsers.logs import (
    REWRITE_MARK,
    CommitMetadata,
    OffsetSeq,
    RewriteMark,
    StreamMetadata,
    batch_id_of,
)
from stateglass.parsers.operator_metadata import OperatorMetadata
from stateglass.parsers.repartition import Repartition, find_repartitions, partitions_at
from stateglass.parsers.schema_file import ColumnFamilySchema, StateSchemaFile
from stateglass.parsers.sparktypes import StructType

T = TypeVar("T")

DEFAULT_STORE = "default"
# Directories inside a partition directory that are not named stores.
_NOT_STORES = frozenset({"_metadata", "SSTs", "logs", "archive"})
HDFS = "hdfs"
ROCKSDB = "rocksdb"
# Operators whose state Spark's reader reads one state variable at a time (``twsShortNameSeq``).
TWS_OPERATORS = frozenset(
    {"transformWithStateExec", "transformWithStateInPandasExec", "transformWithStateInPySparkExec"}
)


@dataclass(frozen=True)
class StateVariable:
    """A transformWithState state variable, from operator metadata v2's ``stateVariables``.

    ``kind`` is ``ValueState``, ``ListState``, ``MapState`` or ``TimerState`` (the timers'
    ``$eventTimers_keyToTimestamp`` / ``$procTimers_keyToTimestamp`` column family).
    """

    name: str
    kind: str
    ttl_enabled: bool = False


@dataclass(frozen=True)
class StoreInfo:
    """One state store of one operator (it exists once per partition)."""

    operator_id: int
    operator_name: str
    store_name: str
    num_partitions: int
    partitions: tuple[int, ...]
    provider: str
    column_families: tuple[ColumnFamilySchema, ...] = field(default=(), compare=False)
    num_cols_prefix_key: int = 0
    uses_column_families: bool = False
    # transformWithState: its time mode and state variables (operator metadata v2).
    time_mode: str | None = None
    state_variables: tuple[StateVariable, ...] = field(default=(), compare=False)

    @property
    def is_transform_with_state(self) -> bool:
        return self.operator_name in TWS_OPERATORS

    def state_variable(self, name: str) -> StateVariable | None:
        for var in self.state_variables:
            if var.name == name:
                return var
        return None

    @property
    def key_schema(self) -> StructType | None:
        cf = self.column_family(DEFAULT_STORE if not self.uses_column_families else None)
        return cf.key_schema if cf else None

    @property
    def value_schema(self) -> StructType | None:
        cf = self.column_family(DEFAULT_STORE if not self.uses_column_families else None)
        return cf.value_schema if cf else None

    def column_family(self, name: str | None) -> ColumnFamilySchema | None:
        """The schema entry named ``name`` (``None``: the only one, if there is just one)."""
        if name is None:
            return self.column_families[0] if len(self.column_families) == 1 else None
        for cf in self.column_families:
            if cf.name == name:
                return cf
        return None


@dataclass(frozen=True)
class OperatorInfo:
    operator_id: int
    operator_name: str
    stores: tuple[StoreInfo, ...]


class Checkpoint:
    """Read-only view of a Structured Streaming checkpoint directory."""

    def __init__(self, root: str, fs: FileSystem = LOCAL) -> None:
        self.root = root
        self.fs = fs
        # Logs and listings read once per instance (a view of the directory as it was when
        # opened, as the batch id lists are): pages ask them again for every retained version.
        self._commits: dict[int, CommitMetadata] = {}
        self._offsets: dict[int, OffsetSeq] = {}
        # A query's partitions decode in threads that all ask for the same logs at once: one
        # reads, the others wait for it rather than each sending its own request.
        self._reading_logs = threading.Lock()
        self._partitions: dict[int, list[int]] = {}
        # Collecting sets this: an unreadable schema file or operator metadata becomes an entry
        # here (the store is still listed) instead of an error that hides every store.
        self.schema_problems: list[CheckpointError] | None = None

    @classmethod
    def open(cls, path: str, fs: FileSystem | None = None) -> Checkpoint:
        """Open ``path`` (a local path or a URL such as ``s3://bucket/cp``), or raise
        :class:`NotACheckpoint` with a one-line reason.

        Without ``fs`` the path's scheme picks the file system (:func:`open_location`) and the
        root is its canonical URL, the name the database keeps it under.
        """
        if fs is None:
            from stateglass.collectors.remote import open_location

            fs, root = open_location(path)
        else:
            root = os.path.abspath(path) if fs is LOCAL else path.rstrip("/")
        if not fs.exists(root):
            raise NotACheckpoint(root, "no such file or directory")
        if not fs.is_dir(root):
            raise NotACheckpoint(root, "is a file, not a checkpoint directory")
        names = {f.name for f in fs.list(root)}
        if not ({"offsets", "commits", "metadata"} & names):
            raise NotACheckpoint(
                root,
                "not a Structured Streaming checkpoint (no metadata, offsets/ or commits/ inside)",
            )
        return cls(root, fs)

    # ---- paths and parsing -------------------------------------------------------------

    def path(self, *parts: str) -> str:
        if self.fs is LOCAL:
            return os.path.join(self.root, *parts)
        if parts and parts[0].startswith(self.root):
            # Already a full URL (a store directory): posixpath.join restarts only at "/".
            return posixpath.join(*parts)
        return posixpath.join(self.root, *parts)

    def parse(self, path: str, parser: Callable[[bytes], T]) -> T:
        """Read ``path`` and decode it with ``parser``, naming the file in any error."""
        data = self.fs.read(path)
        try:
            return parser(data)
        except ParseError as exc:
            raise wrap_parse_error(path, exc) from exc

    def list_dir(self, *parts: str) -> list[FileInfo]:
        path = self.path(*parts)
        if not self.fs.is_dir(path):
            return []
        return [f for f in self.fs.list(path) if not f.name.startswith(".")]

    # ---- query-level logs -----------------------------------------------------------------

    @cached_property
    def query_id(self) -> str | None:
        if not self.fs.exists(self.path("metadata")):
            return None
        return self.parse(self.path("metadata"), StreamMetadata.from_bytes).query_id

    @cached_property
    def rewrite_mark(self) -> RewriteMark | None:
        """The batch whose state ``stateglass rewrite`` wrote, for a checkpoint it wrote."""
        path = self.path(REWRITE_MARK)
        if not self.fs.exists(path):
            return None
        return self.parse(path, RewriteMark.from_bytes)

    def _batch_ids(self, log: str) -> list[int]:
        ids = []
        for f in self.list_dir(log):
            b = batch_id_of(f.name)
            if b is not None and not f.is_dir:
                ids.append(b)
        return sorted(ids)

    @cached_property
    def offset_batch_ids(self) -> list[int]:
        return self._batch_ids("offsets")

    @cached_property
    def commit_batch_ids(self) -> list[int]:
        return self._batch_ids("commits")

    @property
    def last_committed_batch(self) -> int | None:
        return self.commit_batch_ids[-1] if self.commit_batch_ids else None

    def offsets(self, batch_id: int) -> OffsetSeq:
        if batch_id not in self.offset_batch_ids:
            raise NotFound(self.path("offsets", str(batch_id)), "no such batch in offsets/")
        with self._reading_logs:
            if batch_id not in self._offsets:
                path = self.path("offsets", str(batch_id))
                self._offsets[batch_id] = self.parse(path, OffsetSeq.from_bytes)
            return self._offsets[batch_id]

    def commit(self, batch_id: int) -> CommitMetadata:
        if batch_id not in self.commit_batch_ids:
            raise NotFound(self.path("commits", str(batch_id)), "batch not committed")
        # Read once: every partition's format-v2 unique ids come from the same commit files,
        # and on an object store each read is a request.
        with self._reading_logs:
            if batch_id not in self._commits:
                path = self.path("commits", str(batch_id))
                self._commits[batch_id] = self.parse(path, CommitMetadata.from_bytes)
            return self._commits[batch_id]

    @cached_property
    def conf(self) -> OffsetSeq | None:
        """The newest offset log entry: its ``conf`` is pinned for the query's lifetime."""
        if not self.offset_batch_ids:
            return None
        return self.offsets(self.offset_batch_ids[-1])

    @cached_property
    def readable_conf(self) -> OffsetSeq | None:
        """The newest offsets/N that can be read, for what Spark pins in every entry (codec,
        provider, partitions): a damaged or too-new last entry does not hide the state files.
        :attr:`conf` is the strict one (it raises); the damage is a problem of its own."""
        for batch in reversed(self.offset_batch_ids):
            try:
                return self.offsets(batch)
            except CheckpointError:
                continue
        return None

    # ---- partition counts: a property of a version, not of the store -----------------------

    @cached_property
    def repartitions(self) -> list[Repartition]:
        """Spark's offline repartitions (4.2+) among the retained offset-log entries."""
        entries = {}
        for batch in self.offset_batch_ids:
            try:
                entries[batch] = self.offsets(batch)
            except CheckpointError:
                continue  # a damaged entry is a problem of its own; its neighbours still tell
        return find_repartitions(entries)

    def partition_count_at(self, batch_id: int) -> int | None:
        """The state partition count of the version ``batch_id`` wrote: its own offsets
        entry's ``spark.sql.shuffle.partitions`` (Spark sizes every state store by it), or,
        when that entry is gone, the newest count unless a later repartition changed it."""
        if batch_id in self.offset_batch_ids:
            try:
                own = self.offsets(batch_id).shuffle_partitions
            except CheckpointError:
                own = None
            if own is not None:
                return own
        conf = self.readable_conf
        return partitions_at(batch_id, self.repartitions, conf.shuffle_partitions if conf else None)

    def partitions_at(self, operator_id: int, batch_id: int) -> list[int]:
        """The partitions holding ``operator_id``'s state at ``batch_id``: those below the
        batch's partition count (all on disk when it is unknown)."""
        on_disk = self.partitions(operator_id)
        count = self.partition_count_at(batch_id)
        return on_disk if count is None else [p for p in on_disk if p < count]

    # ---- operators and stores -----------------------------------------------------------

    def operator_ids(self) -> list[int]:
        return sorted(int(f.name) for f in self.list_dir("state") if f.is_dir and f.name.isdigit())

    def partitions(self, operator_id: int) -> list[int]:
        if operator_id not in self._partitions:
            self._partitions[operator_id] = sorted(
                int(f.name)
                for f in self.list_dir("state", str(operator_id))
                if f.is_dir and f.name.isdigit()
            )
        return list(self._partitions[operator_id])

    def store_dir(self, operator_id: int, partition: int, store_name: str) -> str:
        if store_name == DEFAULT_STORE:
            return self.path("state", str(operator_id), str(partition))
        return self.path("state", str(operator_id), str(partition), store_name)

    def _operator_metadata(self, operator_id: int) -> OperatorMetadata | None:
        v1 = self.path("state", str(operator_id), "_metadata", "metadata")
        if self.fs.exists(v1):
            return self.parse(v1, OperatorMetadata.from_bytes)
        v2_batches = sorted(
            b
            for f in self.list_dir("state", str(operator_id), "_metadata", "v2")
            if (b := batch_id_of(f.name)) is not None
        )
        last = self.last_committed_batch
        usable = [b for b in v2_batches if last is None or b <= last] or v2_batches
        if usable:
            path = self.path("state", str(operator_id), "_metadata", "v2", str(usable[-1]))
            return self.parse(path, OperatorMetadata.from_bytes)
        return None

    def _store_names_on_disk(self, operator_id: int, partitions: list[int]) -> list[str]:
        if not partitions:
            return []
        entries = self.list_dir("state", str(operator_id), str(partitions[0]))
        named = sorted(f.name for f in entries if f.is_dir and f.name not in _NOT_STORES)
        has_default = any(not f.is_dir for f in entries) or not named
        return ([DEFAULT_STORE] if has_default else []) + named

    def stores_from_folders(self) -> list[tuple[int, str]] | None:
        """``(operator id, store name)`` of every store, from the folders' names alone (no
        file read: on an object store, what a listing already holds). None where the names
        need the operator metadata: a store kept as column families (transformWithState, a
        join of state format 3) writes metadata v2 and a schema v3; an operator with no
        partition yet has no store folders to name."""
        found: list[tuple[int, str]] = []
        for op in self.operator_ids():
            if self.list_dir("state", str(op), "_stateSchema"):
                return None
            if any(f.name == "v2" for f in self.list_dir("state", str(op), "_metadata")):
                return None
            partitions = self.partitions(op)
            if not partitions:
                return None
            found.extend((op, name) for name in self._store_names_on_disk(op, partitions))
        return found

    def _schema(
        self, operator_id: int, store_name: str, meta: OperatorMetadata | None
    ) -> StateSchemaFile | None:
        v12 = self.path(self.store_dir(operator_id, 0, store_name), "_metadata", "schema")
        if self.fs.exists(v12):
            return self.parse(v12, StateSchemaFile.from_bytes)
        # Schema v3 (transformWithState, join formats 3/4): listed in operator metadata v2.
        paths: list[str] = []
        if meta is not None:
            for s in meta.stores:
                if s.store_name == store_name:
                    paths = [_strip_file_uri(p) for p in s.state_schema_file_paths]
        if not paths:
            v3_dir = self.path("state", str(operator_id), "_stateSchema", store_name)
            files = sorted(
                (f for f in self.list_dir("state", str(operator_id), "_stateSchema", store_name)),
                key=lambda f: (batch_id_of(f.name.split("_", 1)[0]) or 0, f.mtime),
            )
            paths = [posixpath.join(v3_dir, f.name) for f in files[-1:]]
        if not paths:
            return None
        local = [self._relocate(p) for p in paths]
        return self.parse(local[-1], StateSchemaFile.from_bytes)

    def _relocate(self, path: str) -> str:
        """Schema paths in operator metadata are absolute where Spark ran; map them here."""
        marker = "/state/"
        idx = path.rfind(marker)
        here = self.path(*path[idx + 1 :].split("/")) if idx >= 0 else None
        # This checkpoint's own copy first: a copied or uploaded checkpoint still names the
        # directory Spark wrote it in, which a remote file system cannot (and should not) read.
        if here is not None and self.fs.exists(here):
            return here
        if self.fs is LOCAL and self.fs.exists(path):
            return path
        return here or path

    def _provider(self, operator_id: int, partitions: list[int], store_name: str) -> str:
        """The registered provider whose files the store's first partition holds, else the
        offset log's (a short name, or the class name of a custom provider)."""
        if partitions:
            for f in self.list_dir(self.store_dir(operator_id, partitions[0], store_name)):
                for provider, reader in READERS.items():
                    if reader.classify(f.name) is not None or f.name == reader.SHARED_DIR:
                        return provider
        conf = self.readable_conf
        if conf is None:
            return HDFS
        reader_class(conf.provider, self.path("offsets"))  # an unknown one: a one-line error
        return conf.provider

    @cached_property
    def operators(self) -> list[OperatorInfo]:
        out = []
        for op in self.operator_ids():
            try:
                meta = self._operator_metadata(op)
            except CheckpointError as exc:
                if self.schema_problems is None:
                    raise
                # Collecting: name the stores from the disk, as for Spark 3.x (no metadata).
                self.schema_problems.append(exc)
                meta = None
            partitions = self.partitions(op)
            name = meta.operator_name if meta else _guess_operator_name(self, op, partitions)
            if meta is not None:
                store_names = [s.store_name for s in meta.stores]
            else:
                store_names = self._store_names_on_disk(op, partitions)
            stores = []
            for store_name in store_names:
                try:
                    schema = self._schema(op, store_name, meta)
                except CheckpointError as exc:
                    if self.schema_problems is None:
                        raise
                    self.schema_problems.append(exc)
                    schema = None
                info = (
                    next((s for s in meta.stores if s.store_name == store_name), None)
                    if meta
                    else None
                )
                num_partitions = self._num_partitions(
                    info.num_partitions if info else None, len(partitions)
                )
                cfs = schema.column_families if schema else ()
                time_mode, state_vars = _tws_properties(meta)
                stores.append(
                    StoreInfo(
                        operator_id=op,
                        operator_name=name,
                        store_name=store_name,
                        num_partitions=num_partitions,
                        partitions=tuple(partitions),
                        provider=self._provider(op, partitions, store_name),
                        column_families=cfs,
                        num_cols_prefix_key=info.num_cols_prefix_key if info else 0,
                        uses_column_families=bool(schema and schema.format_version >= 3),
                        time_mode=time_mode,
                        state_variables=state_vars,
                    )
                )
            out.append(OperatorInfo(op, name, tuple(stores)))
        return out

    def _num_partitions(self, from_metadata: int | None, on_disk: int) -> int:
        """The store's partition count now: the last committed batch's, which a repartition
        changes, before the operator metadata's ``numPartitions`` (v1 keeps the first count).
        An uncommitted entry does not count: a repartition that failed leaves one behind."""
        last = self.last_committed_batch
        count = self.partition_count_at(last) if last is not None else None
        if count is None and last is None and self.readable_conf is not None:
            count = self.readable_conf.shuffle_partitions
        if count:
            return count
        if from_metadata is not None:
            return from_metadata
        return on_disk

    # ---- restart compatibility: what `stateglass compat` needs beyond the store list ----------
    def operator_metadata(self, operator_id: int) -> OperatorMetadata | None:
        """The operator metadata Spark's restart check reads (v1, or the newest committed v2)."""
        return self._operator_metadata(operator_id)

    def schema_file_path(self, path: str) -> str:
        """A schema path named in operator metadata, mapped into this checkpoint."""
        return self._relocate(_strip_file_uri(path))

    # ---- end compat ------------------------------------------------------------------------

    def stores(self) -> list[StoreInfo]:
        return [s for op in self.operators for s in op.stores]

    def store(self, operator_id: int, store_name: str) -> StoreInfo:
        for s in self.stores():
            if s.operator_id == operator_id and s.store_name == store_name:
                return s
        known = ", ".join(f"{s.operator_id}/{s.store_name}" for s in self.stores()) or "none"
        raise NotFound(
            self.path("state", str(operator_id)),
            f"no store {store_name!r} for operator {operator_id} (stores: {known})",
        )

    def resolve_batch(self, batch_id: int | None) -> int:
        """``batch_id``, or the last committed batch when it is None; its commit file is read,
        so a damaged one is said (that one only: format v2 reads the others for their
        unique ids, v1 needs none of them)."""
        batch = self._resolved(batch_id)
        if batch in self.commit_batch_ids:
            self.commit(batch)
        return batch

    def _resolved(self, batch_id: int | None) -> int:
        if batch_id is None:
            if self.last_committed_batch is None:
                raise NotFound(self.path("commits"), "no committed batch yet")
            return self.last_committed_batch
        if batch_id < 0:
            raise NotFound(self.path("commits"), f"batch id must be >= 0, got {batch_id}")
        last = self.last_committed_batch
        if last is None:
            raise NotFound(
                self.path("commits"),
                f"batch {batch_id} is not committed; no batch is committed yet",
            )
        if batch_id > last:
            raise NotFound(
                self.path("commits"),
                f"batch {batch_id} is not committed; the last committed batch is {last}",
            )
        return batch_id


def _strip_file_uri(path: str) -> str:
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:"):
        return path[len("file:") :]
    return path


def _tws_properties(meta: OperatorMetadata | None) -> tuple[str | None, tuple[StateVariable, ...]]:
    """Time mode and state variables of a transformWithState operator (v2 metadata only)."""
    props = meta.operator_properties if meta is not None else None
    if not props or meta is None or meta.operator_name not in TWS_OPERATORS:
        return None, ()
    time_mode = props.get("timeMode")
    found = []
    for var in props.get("stateVariables") or ():
        if not isinstance(var, dict):
            continue
        name, kind = var.get("stateName"), var.get("stateVariableType")
        if isinstance(name, str) and isinstance(kind, str):
            found.append(StateVariable(name, kind, bool(var.get("ttlEnabled", False))))
    return (time_mode if isinstance(time_mode, str) else None), tuple(found)


def _guess_operator_name(cp: Checkpoint, op: int, partitions: list[int]) -> str:
    """Spark 3.x writes no operator metadata: name the operator from its stores' schemas.

    Inferred names end with :data:`INFERRED` so that nobody mistakes them for Spark's own.
    """
    stores = cp._store_names_on_disk(op, partitions)
    if any(s.startswith(("left-", "right-")) for s in stores):
        return "symmetricHashJoin" + INFERRED
    schema = cp._schema(op, "default", None) if "default" in stores else None
    if schema is None or not schema.column_families:
        return "unknown"
    key, value = schema.column_families[0].key_schema, schema.column_families[0].value_schema
    if value.names == ["__dummy__"]:
        return "dedupe" + INFERRED
    if value.names == ["expiresAtMicros"]:
        return "dedupeWithinWatermark" + INFERRED
    if "groupState" in value.names or "timeoutTimestamp" in value.names:
        return "flatMapGroupsWithState" + INFERRED
    if key.names and key.names[-1] == "sessionStartTime":
        return "sessionWindowStateStoreSaveExec" + INFERRED
    return "stateStoreSave" + INFERRED


__all__ = [
    "DEFAULT_STORE",
    "HDFS",
    "INFERRED",
    "INFERRED_HELP",
    "ROCKSDB",
    "Checkpoint",
    "CheckpointError",
    "OperatorInfo",
    "StateVariable",
    "StoreInfo",
]
