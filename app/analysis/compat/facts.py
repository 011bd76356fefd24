"""What a restart check needs from one checkpoint (I/O): operators, stores, every schema file
Spark would compare against, the pinned confs and the log formats.

Example::

    facts = read_facts(Checkpoint.open("/cp/orders"))
    for op in facts.operators:
        print(op.operator_id, op.name, [s.name for s in op.stores])
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from stateglass.collectors.checkpoints.checkpoint import Checkpoint, OperatorInfo
from stateglass.collectors.errors import NotACheckpoint, NotFound
from stateglass.parsers.errors import ParseError
from stateglass.parsers.logs import batch_id_of, parse_file_source_log
from stateglass.parsers.operator_metadata import OperatorMetadata
from stateglass.parsers.schema_file import ColumnFamilySchema, StateSchemaFile


@dataclass(frozen=True)
class SchemaVersion:
    """One schema file: its path, format and column families."""

    path: str
    format_version: int
    families: tuple[ColumnFamilySchema, ...]


@dataclass(frozen=True)
class StoreFacts:
    """One store of one operator; ``schemas`` oldest first, the last one is current."""

    name: str
    num_partitions: int
    schemas: tuple[SchemaVersion, ...] = ()
    provider: str = ""

    @property
    def current(self) -> SchemaVersion | None:
        return self.schemas[-1] if self.schemas else None


@dataclass(frozen=True)
class OperatorFacts:
    operator_id: int
    name: str
    metadata_version: int | None  # None: no operator metadata (Spark 3.x), name inferred
    stores: tuple[StoreFacts, ...]
    properties: Mapping[str, Any] | None = field(default=None, compare=False)

    def store(self, name: str) -> StoreFacts | None:
        return next((s for s in self.stores if s.name == name), None)


@dataclass(frozen=True)
class FileSourceFacts:
    """A file source (``sources/<id>/`` holds a FileStreamSourceLog): the files of its newest
    batch, which a restart lists again under the source's (possibly new) path."""

    source_id: str
    batch_id: int
    files: tuple[str, ...]


@dataclass(frozen=True)
class CheckpointFacts:
    root: str
    last_committed_batch: int | None
    offset_log_version: int | None
    commit_log_version: int | None
    num_sources: int | None
    conf: Mapping[str, str]
    operators: tuple[OperatorFacts, ...]
    file_sources: tuple[FileSourceFacts, ...] = ()

    def operator(self, operator_id: int) -> OperatorFacts | None:
        return next((o for o in self.operators if o.operator_id == operator_id), None)

    @property
    def has_operator_metadata(self) -> bool:
        return any(o.metadata_version is not None for o in self.operators)


def read_facts(cp: Checkpoint) -> CheckpointFacts:
    """Read ``cp``; a file that cannot be read raises its :class:`CheckpointError`."""
    last = cp.last_committed_batch
    if not cp.offset_batch_ids:
        raise NotACheckpoint(cp.path("offsets"), "no batch was ever planned (offsets/ is empty)")
    offsets = cp.conf
    commit = cp.commit(last) if last is not None else None
    return CheckpointFacts(
        root=cp.root,
        last_committed_batch=last,
        offset_log_version=offsets.format_version if offsets else None,
        commit_log_version=commit.format_version if commit else None,
        num_sources=len(offsets.sources) if offsets else None,
        conf=dict(offsets.conf) if offsets else {},
        operators=tuple(_operator(cp, op) for op in cp.operators),
        file_sources=_file_sources(cp, cp.offset_batch_ids[-1]),
    )


def _file_sources(cp: Checkpoint, batch: int) -> tuple[FileSourceFacts, ...]:
    """The file sources' entries of ``batch`` (the newest planned batch)."""
    out = []
    for entry in cp.list_dir("sources"):
        if not entry.is_dir:
            continue
        names = {f.name: f for f in cp.list_dir("sources", entry.name) if not f.is_dir}
        logs = sorted((b, n) for n in names if (b := batch_id_of(n)) is not None and b >= batch)
        if not logs:
            continue
        data = cp.fs.read(cp.path("sources", entry.name, logs[0][1]))
        try:
            entries = parse_file_source_log(data)
        except ParseError:
            continue  # not a file source (Kafka keeps its initial offsets here)
        files = tuple(e.path for e in entries if e.batch_id == batch)
        if files:
            out.append(FileSourceFacts(entry.name, batch, files))
    return tuple(out)


def _operator(cp: Checkpoint, op: OperatorInfo) -> OperatorFacts:
    meta = cp.operator_metadata(op.operator_id)
    stores = tuple(
        StoreFacts(
            s.store_name,
            s.num_partitions,
            _schemas(cp, op.operator_id, s.store_name, meta),
            s.provider,
        )
        for s in op.stores
    )
    return OperatorFacts(
        operator_id=op.operator_id,
        name=op.operator_name,
        metadata_version=meta.format_version if meta else None,
        stores=stores,
        properties=meta.operator_properties if meta else None,
    )


def _schemas(
    cp: Checkpoint, operator_id: int, store: str, meta: OperatorMetadata | None
) -> tuple[SchemaVersion, ...]:
    """The schema files Spark compares against, oldest first.

    Formats v1/v2 live at ``<partition 0>/[store/]_metadata/schema`` (one file, rewritten);
    format v3 files are the ``stateSchemaFilePaths`` of operator metadata v2 — Spark's
    ``oldSchemaFilePaths`` — or, without them, the newest file of ``_stateSchema/<store>/``.
    """
    v12 = cp.path(cp.store_dir(operator_id, 0, store), "_metadata", "schema")
    if cp.fs.exists(v12):
        return (_read(cp, v12),)
    paths: list[str] = []
    if meta is not None:
        for info in meta.stores:
            if info.store_name == store:
                paths = [cp.schema_file_path(p) for p in info.state_schema_file_paths]
    if not paths:
        parts = ("state", str(operator_id), "_stateSchema", store)
        listed = sorted((f for f in cp.list_dir(*parts) if not f.is_dir), key=lambda f: f.mtime)
        paths = [posixpath.join(cp.path(*parts), f.name) for f in listed[-1:]]
    return tuple(_read(cp, p) for p in paths)


def _read(cp: Checkpoint, path: str) -> SchemaVersion:
    if not cp.fs.exists(path):
        raise NotFound(path, "schema file named in operator metadata is missing")
    parsed = cp.parse(path, StateSchemaFile.from_bytes)
    return SchemaVersion(path, parsed.format_version, parsed.column_families)
