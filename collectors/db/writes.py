"""What a collector hands the writer, and what the writer hands back: frozen rows.

Each kind of write is one dataclass of rows, written in one transaction by one method of
:class:`~stateglass.collectors.db.writer.Database`: :class:`ScanWrite` (one scan of one
checkpoint, :meth:`~stateglass.collectors.db.writer.Database.record_scan`) and
:class:`ProgressWrite` (one read of progress files). :class:`KnownScan` is what earlier scans
recorded (``Database.known``), :class:`MaintainResult` what one ``maintain`` did.

Example::

    db.record_scan(ScanWrite(root="/cp", now=now, metadata_path="/cp/metadata",
                             checkpoint={...}, batch_offsets=[...]))
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class ProgressWrite:
    """Rows of one ``--progress`` read, each a mapping of column -> value (see
    ``collectors/db/progress_tables.py``), written together by ``Database.write_progress``."""

    progress: list[dict[str, Any]] = field(default_factory=list)
    progress_state: list[dict[str, Any]] = field(default_factory=list)
    snapshot_uploads: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)


# (operator_id, store_name, partition_id): one store partition, the unit a chain reads.
Chain = tuple[int, str, int]


@dataclass(frozen=True)
class KnownScan:
    """What earlier scans recorded of one checkpoint, read by ``Database.known``."""

    # path -> (size, mtime) of the offsets/ and commits/ files
    log_files: dict[str, tuple[int, float]]
    # path -> (size, mtime) of the state files not purged yet
    state_files: dict[str, tuple[int, float]]
    # the versions counted so far, per store partition
    versions: dict[Chain, set[int]]
    # version -> live SST bytes of RocksDB versions, per store partition
    sst_bytes_live: dict[Chain, dict[int, int]]
    # batch -> its watermark
    watermarks: dict[int, int | None]
    # the files with a problem row
    problem_paths: frozenset[str]


@dataclass(frozen=True)
class ScanWrite:
    """Rows of one scan of one checkpoint, written together by ``Database.record_scan``.

    Rows are mappings of column -> value (see :mod:`stateglass.collectors.db.schema`).
    Besides rows it names what the scan found gone (``logs_removed``,
    ``state_files_purged``) and which files it judged again (``rejudged``): their old problem
    rows give way to ``problems``.
    """

    root: str
    now: datetime
    # Read at every scan, like schema files and operator metadata: its old problems give way.
    metadata_path: str
    # The checkpoints row; a checkpoint seen before keeps its first_seen.
    checkpoint: dict[str, Any]
    # Replace the checkpoint's operators when given (an unreadable metadata gives none).
    operators: list[dict[str, Any]] = field(default_factory=list)
    # offsets/N and commits/N arrive at different scans: each updates only its own columns.
    batch_offsets: list[dict[str, Any]] = field(default_factory=list)
    batch_commits: list[dict[str, Any]] = field(default_factory=list)
    log_files: list[dict[str, Any]] = field(default_factory=list)
    logs_removed: tuple[str, ...] = ()
    state_files: list[dict[str, Any]] = field(default_factory=list)
    state_files_purged: tuple[str, ...] = ()
    state_versions: list[dict[str, Any]] = field(default_factory=list)
    rejudged: tuple[str, ...] = ()
    problems: list[dict[str, Any]] = field(default_factory=list)
    sst_refs: list[dict[str, Any]] = field(default_factory=list)
    # Spark's temporary files now; a path seen before keeps its first_seen. A scan that looked
    # files up by name saw none of them (False): the recorded ones stay until the next listing.
    temp_files: list[dict[str, Any]] = field(default_factory=list)
    temp_files_listed: bool = True
    schema_files: list[dict[str, Any]] = field(default_factory=list)
    eviction_rules: list[dict[str, Any]] = field(default_factory=list)
    eviction_audit: list[dict[str, Any]] = field(default_factory=list)
    variable_rows: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class MaintainResult:
    """What one ``Database.maintain`` of one checkpoint did."""

    checkpoint: str
    # partition rows before this version are kept as roll-ups (None: all at full resolution)
    full_from_version: int | None
    versions_rolled_up: int
    rollup_rows: int
    files_compacted: int
