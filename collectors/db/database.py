"""The one owner of StateGlass's DuckDB database: its schema, its views and its only writer.

Concurrency (see ``docs/architecture.md``): DuckDB lets one process hold a database file
read-write, or any number of processes hold it read-only, never both. So nobody keeps the file
open: the writer opens it for one short transaction and closes it, readers open it read-only
for one query and close it, and both retry with backoff while the other side holds the lock.

Writes go through one method per kind of write, each taking a frozen dataclass of rows and
writing it in one transaction: :meth:`Database.record_scan` (:class:`ScanWrite`, one scan of a
checkpoint) and :meth:`Database.write_progress` (:class:`ProgressWrite`, one read of progress
files). :meth:`Database.known` and :meth:`Database.progress_files` tell a collector what earlier
runs recorded, so that it reads only what changed. SQL that changes data lives in this module.

Example::

    db = Database("stateglass.duckdb")
    known = db.known("/cp")  # what earlier scans of /cp recorded
    db.record_scan(ScanWrite(root="/cp", now=now, checkpoint={...}, batch_offsets=[...]))
    rows = read_query("stateglass.duckdb", "SELECT * FROM batch_durations")
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# The engine alone, without the `duckdb` package's Python layer (its relational API and a
# version look-up through importlib.metadata): 0.12 CPU s at every start, a tenth of a whole
# `collect` process on 2M keys. The classes are the package's own
# (`duckdb.IOException is _duckdb.IOException`), so callers may catch either. A DuckDB that
# no longer ships `_duckdb` gets the package.
try:
    import _duckdb as duckdb
except ImportError:  # pragma: no cover - duckdb is pinned in requirements.txt
    import duckdb  # type: ignore[no-redef]

from stateglass.collectors.db.history_settings import HistorySettings
from stateglass.collectors.db.progress_tables import PROGRESS_TABLES
from stateglass.collectors.errors import DatabaseBusy, DatabaseError

SCHEMA_VERSION = 7


@dataclass(frozen=True)
class ProgressWrite:
    """Rows of one ``--progress`` read, each a mapping of column -> value (see
    ``collectors/db/progress_tables.py``), written together by :meth:`Database.write_progress`."""

    progress: list[dict[str, Any]] = field(default_factory=list)
    progress_state: list[dict[str, Any]] = field(default_factory=list)
    snapshot_uploads: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    files: list[dict[str, Any]] = field(default_factory=list)


# (operator_id, store_name, partition_id): one store partition, the unit a chain reads.
Chain = tuple[int, str, int]


@dataclass(frozen=True)
class KnownScan:
    """What earlier scans recorded of one checkpoint, read by :meth:`Database.known`."""

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
    """Rows of one scan of one checkpoint, written together by :meth:`Database.record_scan`.

    Rows are mappings of column -> value (see :data:`TABLES`). Besides rows it names what the
    scan found gone (``logs_removed``, ``state_files_purged``) and which files it judged again
    (``rejudged``): their old problem rows give way to ``problems``.
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


@dataclass(frozen=True)
class MaintainResult:
    """What one :meth:`Database.maintain` of one checkpoint did."""

    checkpoint: str
    # partition rows before this version are kept as roll-ups (None: all at full resolution)
    full_from_version: int | None
    versions_rolled_up: int
    rollup_rows: int
    files_compacted: int


_OFFSET_COLUMNS = (
    "batch_timestamp_ms,watermark_ms,offsets_written_at,source_offsets,provider,codec,"
    "shuffle_partitions,state_format_versions"
)
_COMMIT_COLUMNS = "committed,committed_at,next_watermark_ms"
# A checkpoint's first_seen, a schema digest's first_seen and first_batch: when it appeared.
_CHECKPOINT_COLUMNS = "query_id,last_scan,pinned_conf"
_SCHEMA_FILE_COLUMNS = "size_bytes,modified_at,last_seen"
_RUN_COLUMNS = (
    "query_id",
    "run_id",
    "name",
    "app_id",
    "started_at",
    "terminated_at",
    "exception",
    "source",
    "source_path",
)


# How long a writer or reader waits for the other side's lock before giving up.
DEFAULT_LOCK_TIMEOUT_S = 60.0

TABLES: dict[str, str] = {
    "schema_info": """
        CREATE TABLE IF NOT EXISTS schema_info (version INTEGER NOT NULL)
    """,
    "checkpoints": """
        CREATE TABLE IF NOT EXISTS checkpoints (
            checkpoint VARCHAR PRIMARY KEY,
            query_id VARCHAR,
            first_seen TIMESTAMP NOT NULL,
            last_scan TIMESTAMP NOT NULL,
            pinned_conf VARCHAR
        )
    """,
    "batches": """
        CREATE TABLE IF NOT EXISTS batches (
            checkpoint VARCHAR NOT NULL,
            batch_id BIGINT NOT NULL,
            batch_timestamp_ms BIGINT,
            watermark_ms BIGINT,
            offsets_written_at TIMESTAMP,
            committed BOOLEAN NOT NULL,
            committed_at TIMESTAMP,
            next_watermark_ms BIGINT,
            source_offsets VARCHAR,
            provider VARCHAR,
            codec VARCHAR,
            shuffle_partitions INTEGER,
            state_format_versions VARCHAR,
            PRIMARY KEY (checkpoint, batch_id)
        )
    """,
    "operators": """
        CREATE TABLE IF NOT EXISTS operators (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            operator_name VARCHAR,
            store_name VARCHAR NOT NULL,
            num_partitions INTEGER,
            provider VARCHAR,
            key_schema VARCHAR,
            value_schema VARCHAR,
            PRIMARY KEY (checkpoint, operator_id, store_name)
        )
    """,
    "log_files": """
        CREATE TABLE IF NOT EXISTS log_files (
            checkpoint VARCHAR NOT NULL,
            path VARCHAR NOT NULL,
            size_bytes BIGINT NOT NULL,
            modified_at DOUBLE NOT NULL,
            PRIMARY KEY (checkpoint, path)
        )
    """,
    "state_files": """
        CREATE TABLE IF NOT EXISTS state_files (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            partition_id INTEGER NOT NULL,
            version BIGINT,
            kind VARCHAR NOT NULL,
            path VARCHAR NOT NULL,
            size_bytes BIGINT NOT NULL,
            modified_at DOUBLE NOT NULL,
            purged BOOLEAN NOT NULL,
            first_seen TIMESTAMP NOT NULL,
            purged_at TIMESTAMP,
            PRIMARY KEY (checkpoint, path)
        )
    """,
    "state_versions": """
        CREATE TABLE IF NOT EXISTS state_versions (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            partition_id INTEGER NOT NULL,
            version BIGINT NOT NULL,
            num_keys BIGINT,
            keys_added BIGINT,
            keys_updated BIGINT,
            keys_removed BIGINT,
            delta_bytes BIGINT,
            snapshot_bytes BIGINT,
            sst_bytes_live BIGINT,
            sst_bytes_uploaded BIGINT,
            sst_files_reused INTEGER,
            versions_since_snapshot INTEGER,
            replay_bytes BIGINT,
            sst_files_live INTEGER,
            PRIMARY KEY (checkpoint, operator_id, store_name, partition_id, version)
        )
    """,
    # -- history that scales in time: maintained by every scan (see _record_history) -------
    # Per version of a store, summed over its partitions: what store-level charts, rules and
    # scrapes read (a month is 259,200 rows here against 52M partition rows), kept for good.
    # Sums are HUGEINT, as DuckDB's sum() gives: readers get the types the views always had.
    "store_versions": """
        CREATE TABLE IF NOT EXISTS store_versions (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            version BIGINT NOT NULL,
            known_partitions INTEGER NOT NULL,
            num_keys HUGEINT,
            keys_added HUGEINT,
            keys_updated HUGEINT,
            keys_removed HUGEINT,
            delta_bytes HUGEINT,
            bytes HUGEINT,
            min_keys BIGINT,
            max_keys BIGINT,
            median_keys DOUBLE,
            sst_versions INTEGER,
            sst_bytes_uploaded HUGEINT,
            sst_bytes_reused HUGEINT,
            sst_files_reused HUGEINT,
            PRIMARY KEY (checkpoint, operator_id, store_name, version)
        )
    """,
    # Each partition's newest version (and its first ever collected): "newest per partition"
    # without sorting a history.
    "partition_newest": """
        CREATE TABLE IF NOT EXISTS partition_newest (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            partition_id INTEGER NOT NULL,
            first_version BIGINT NOT NULL,
            version BIGINT NOT NULL,
            num_keys BIGINT,
            versions_since_snapshot INTEGER,
            replay_bytes BIGINT,
            PRIMARY KEY (checkpoint, operator_id, store_name, partition_id)
        )
    """,
    # Partition rows older than the full-resolution window, one row per bucket of versions
    # (``maintain``): min/max/last keys, summed changes and bytes, the worst replay. Kept for good.
    "state_rollups": """
        CREATE TABLE IF NOT EXISTS state_rollups (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            partition_id INTEGER NOT NULL,
            bucket BIGINT NOT NULL,
            first_version BIGINT NOT NULL,
            last_version BIGINT NOT NULL,
            versions INTEGER NOT NULL,
            min_keys BIGINT,
            max_keys BIGINT,
            last_keys BIGINT,
            keys_added BIGINT,
            keys_updated BIGINT,
            keys_removed BIGINT,
            delta_bytes BIGINT,
            snapshot_bytes BIGINT,
            max_replay_bytes BIGINT,
            max_versions_since_snapshot INTEGER,
            PRIMARY KEY (checkpoint, operator_id, store_name, partition_id, bucket)
        )
    """,
    # Partition rows still kept at full resolution, one row per partition and complete bucket
    # of ``bucket_marks.width`` versions (kept by every scan): the State page's cells read
    # these instead of the window's partition rows, and partition rows only after
    # ``bucket_marks.through_version`` (the newest bucket, not complete yet).
    "partition_buckets": """
        CREATE TABLE IF NOT EXISTS partition_buckets (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            partition_id INTEGER NOT NULL,
            bucket BIGINT NOT NULL,
            last_version BIGINT NOT NULL,
            min_keys BIGINT,
            max_keys BIGINT,
            last_keys BIGINT,
            bytes HUGEINT,
            PRIMARY KEY (checkpoint, operator_id, store_name, partition_id, bucket)
        )
    """,
    # Per store: the bucket width of ``partition_buckets`` and the version through which every
    # partition row kept is counted there.
    "bucket_marks": """
        CREATE TABLE IF NOT EXISTS bucket_marks (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            width INTEGER NOT NULL,
            through_version BIGINT NOT NULL,
            PRIMARY KEY (checkpoint, operator_id, store_name)
        )
    """,
    # Purged state files, compacted per (version, kind) by ``maintain``: what each version
    # wrote stays countable after the per-file rows go.
    "file_summaries": """
        CREATE TABLE IF NOT EXISTS file_summaries (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            version BIGINT NOT NULL,
            kind VARCHAR NOT NULL,
            files BIGINT NOT NULL,
            bytes BIGINT NOT NULL,
            PRIMARY KEY (checkpoint, operator_id, store_name, version, kind)
        )
    """,
    # What the last ``maintain`` kept, per checkpoint: the page that says so reads it.
    "history_maintenance": """
        CREATE TABLE IF NOT EXISTS history_maintenance (
            checkpoint VARCHAR PRIMARY KEY,
            maintained_at TIMESTAMP NOT NULL,
            full_from_version BIGINT,
            full_days DOUBLE NOT NULL,
            rollup_versions INTEGER NOT NULL
        )
    """,
    "sst_refs": """
        CREATE TABLE IF NOT EXISTS sst_refs (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            partition_id INTEGER NOT NULL,
            sst_file VARCHAR NOT NULL,
            first_version BIGINT NOT NULL,
            last_version BIGINT NOT NULL,
            PRIMARY KEY (checkpoint, operator_id, store_name, partition_id, sst_file)
        )
    """,
    "temp_files": """
        CREATE TABLE IF NOT EXISTS temp_files (
            checkpoint VARCHAR NOT NULL,
            path VARCHAR NOT NULL,
            operator_id INTEGER,
            store_name VARCHAR,
            partition_id INTEGER,
            size_bytes BIGINT NOT NULL,
            modified_at DOUBLE NOT NULL,
            first_seen TIMESTAMP NOT NULL,
            PRIMARY KEY (checkpoint, path)
        )
    """,
    "schema_files": """
        CREATE TABLE IF NOT EXISTS schema_files (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            path VARCHAR NOT NULL,
            sha256 VARCHAR NOT NULL,
            format_version INTEGER,
            key_schema VARCHAR,
            value_schema VARCHAR,
            size_bytes BIGINT NOT NULL,
            modified_at DOUBLE NOT NULL,
            first_seen TIMESTAMP NOT NULL,
            last_seen TIMESTAMP NOT NULL,
            first_batch BIGINT,
            PRIMARY KEY (checkpoint, path, sha256)
        )
    """,
    "problems": """
        CREATE TABLE IF NOT EXISTS problems (
            checkpoint VARCHAR NOT NULL,
            path VARCHAR NOT NULL,
            kind VARCHAR NOT NULL,
            message VARCHAR NOT NULL,
            seen_at TIMESTAMP NOT NULL,
            PRIMARY KEY (checkpoint, path, kind)
        )
    """,
    # Streaming progress: generated from the column lists in progress_schema.py, which also
    # map each Spark field (durationMs part, RocksDB metric) to its column.
    **PROGRESS_TABLES,
    # -- eviction audit: collectors/scan/eviction_audit.py
    # ---------------------------------------------
    "eviction_rules": """
        CREATE TABLE IF NOT EXISTS eviction_rules (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            state_var VARCHAR NOT NULL,
            operator_name VARCHAR,
            kind VARCHAR NOT NULL,
            audited BOOLEAN NOT NULL,
            predicate VARCHAR,
            event_time_field VARCHAR,
            cause VARCHAR,
            fix VARCHAR,
            PRIMARY KEY (checkpoint, operator_id, store_name, state_var)
        )
    """,
    "eviction_audit": """
        CREATE TABLE IF NOT EXISTS eviction_audit (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            state_var VARCHAR NOT NULL,
            partition_id INTEGER NOT NULL,
            version BIGINT NOT NULL,
            watermark_ms BIGINT,
            keys BIGINT,
            overdue_keys BIGINT,
            oldest_event_ms BIGINT,
            PRIMARY KEY (checkpoint, operator_id, store_name, state_var, partition_id, version)
        )
    """,
    # The health rules' verdicts as the watcher judged them right after it wrote a scan
    # (app/analysis/health/stored.py): the Overview and a scrape read them instead of judging.
    "health_judged": """
        CREATE TABLE IF NOT EXISTS health_judged (
            checkpoint VARCHAR PRIMARY KEY,
            scan_at TIMESTAMP NOT NULL,
            judged_at TIMESTAMP NOT NULL,
            config_key VARCHAR NOT NULL,
            worst VARCHAR NOT NULL,
            -- JSON: what each clock rule read, and from when it holds (stored.py)
            clock_facts VARCHAR
        )
    """,
    "health_findings": """
        CREATE TABLE IF NOT EXISTS health_findings (
            checkpoint VARCHAR NOT NULL,
            seq INTEGER NOT NULL,
            rule VARCHAR NOT NULL,
            title VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            finding VARCHAR NOT NULL,
            hint VARCHAR NOT NULL,
            operator_id INTEGER,
            store_name VARCHAR,
            partition_id INTEGER,
            PRIMARY KEY (checkpoint, seq)
        )
    """,
}

# Each metric is defined once, here, in SQL; the dashboard and the CLI only SELECT from them.
VIEWS: dict[str, str] = {
    "batch_lag": """
        CREATE OR REPLACE VIEW batch_lag AS
        SELECT checkpoint,
               max(batch_id) AS last_offset_batch,
               max(batch_id) FILTER (WHERE committed) AS last_committed_batch,
               count(*) FILTER (WHERE NOT committed) AS uncommitted_batches,
               max(batch_id) - coalesce(max(batch_id) FILTER (WHERE committed), -1)
                   AS lag_batches
        FROM batches GROUP BY checkpoint
    """,
    "batch_durations": """
        CREATE OR REPLACE VIEW batch_durations AS
        -- File mtimes: a copied or git-cloned checkpoint has meaningless ones, and a commit
        -- older than its offsets says so; no duration then rather than a negative one.
        SELECT checkpoint, batch_id,
               CASE WHEN committed_at >= offsets_written_at
                    THEN CAST(epoch_ms(committed_at) - epoch_ms(offsets_written_at) AS BIGINT)
               END AS duration_ms
        FROM batches WHERE committed AND committed_at IS NOT NULL
                       AND offsets_written_at IS NOT NULL
    """,
    "trigger_intervals": """
        CREATE OR REPLACE VIEW trigger_intervals AS
        SELECT checkpoint, batch_id,
               batch_timestamp_ms - lag(batch_timestamp_ms)
                   OVER (PARTITION BY checkpoint ORDER BY batch_id) AS interval_ms
        FROM batches
    """,
    "watermark_delays": """
        CREATE OR REPLACE VIEW watermark_delays AS
        SELECT checkpoint, batch_id, batch_timestamp_ms, watermark_ms,
               batch_timestamp_ms - watermark_ms AS delay_ms
        FROM batches WHERE watermark_ms IS NOT NULL AND watermark_ms > 0
    """,
    # A batch that only moved the state into another partition count: Spark 4.2+'s offline
    # repartition copies the previous offsets entry and changes spark.sql.shuffle.partitions
    # (the same test as parsers/repartition.py, on the recorded offsets).
    "repartitions": """
        CREATE OR REPLACE VIEW repartitions AS
        SELECT checkpoint, batch_id, partitions_before, shuffle_partitions AS partitions_after
        FROM (
            SELECT checkpoint, batch_id, shuffle_partitions, source_offsets,
                   lag(batch_id) OVER w AS previous_batch,
                   lag(shuffle_partitions) OVER w AS partitions_before,
                   lag(source_offsets) OVER w AS previous_offsets
            FROM batches WINDOW w AS (PARTITION BY checkpoint ORDER BY batch_id)
        )
        WHERE previous_batch = batch_id - 1 AND partitions_before <> shuffle_partitions
          AND source_offsets IS NOT DISTINCT FROM previous_offsets
    """,
    # Each partition at its newest version, among the partitions the store has now: those a
    # repartition dropped keep their last version but are never loaded again.
    "snapshot_lag": """
        CREATE OR REPLACE VIEW snapshot_lag AS
        WITH newest AS (
            SELECT checkpoint, operator_id, store_name, max(version) AS newest_version
            FROM partition_newest GROUP BY ALL
        )
        SELECT p.checkpoint, p.operator_id, p.store_name, p.partition_id,
               p.version AS latest_version, p.versions_since_snapshot, p.replay_bytes
        FROM partition_newest p
        JOIN newest n USING (checkpoint, operator_id, store_name)
        LEFT JOIN batches b ON b.checkpoint = p.checkpoint AND b.batch_id = n.newest_version - 1
        WHERE b.shuffle_partitions IS NULL OR p.partition_id < b.shuffle_partitions
    """,
    # Partial history: Spark purges each partition's old files on its own
    # schedule, so partitions of one store can start at different versions. A total (or a
    # skew) over partitions exists only at versions where every partition is known; elsewhere
    # it is NULL, drawn as a gap, never as a drop. A version has the partition count of the
    # batch that wrote it (a repartition changes it); without that batch's offsets, the store
    # has the larger of the partitions the operators table names and the partitions ever seen
    # (app/metrics.py does the same).
    "store_totals": """
        CREATE OR REPLACE VIEW store_totals AS
        WITH expected AS (
            SELECT n.checkpoint, n.operator_id, n.store_name,
                   greatest(count(*), coalesce(any_value(o.num_partitions), 0)) AS partitions
            FROM partition_newest n
            LEFT JOIN operators o USING (checkpoint, operator_id, store_name)
            GROUP BY n.checkpoint, n.operator_id, n.store_name
        ),
        at_version AS (
            SELECT p.*, coalesce(b.shuffle_partitions, e.partitions) AS partitions
            FROM store_versions p JOIN expected e USING (checkpoint, operator_id, store_name)
            LEFT JOIN batches b ON b.checkpoint = p.checkpoint AND b.batch_id = p.version - 1
        )
        SELECT p.checkpoint, p.operator_id, p.store_name, p.version,
               p.version - 1 AS batch_id, p.known_partitions, p.partitions,
               p.known_partitions >= p.partitions AS complete,
               CASE WHEN p.known_partitions >= p.partitions THEN p.num_keys END AS num_keys,
               CASE WHEN p.known_partitions >= p.partitions THEN p.keys_added END AS keys_added,
               CASE WHEN p.known_partitions >= p.partitions THEN p.keys_updated END
                   AS keys_updated,
               CASE WHEN p.known_partitions >= p.partitions THEN p.keys_removed END
                   AS keys_removed,
               CASE WHEN p.known_partitions >= p.partitions THEN p.delta_bytes END
                   AS delta_bytes,
               CASE WHEN p.known_partitions >= p.partitions THEN p.bytes END AS bytes,
               CASE WHEN p.known_partitions >= p.partitions THEN p.max_keys END AS max_keys,
               CASE WHEN p.known_partitions >= p.partitions THEN p.median_keys END
                   AS median_keys
        FROM at_version p
    """,
    "partition_skew": """
        CREATE OR REPLACE VIEW partition_skew AS
        SELECT checkpoint, operator_id, store_name, version, batch_id, max_keys, median_keys,
               CASE WHEN median_keys > 0 THEN max_keys / median_keys END AS skew
        FROM store_totals
    """,
    "state_growth": """
        CREATE OR REPLACE VIEW state_growth AS
        SELECT checkpoint, operator_id, store_name, version, num_keys, keys_added,
               keys_updated, keys_removed, delta_bytes, batch_id,
               num_keys - lag(num_keys) OVER (
                   PARTITION BY checkpoint, operator_id, store_name ORDER BY version)
                   AS keys_growth
        FROM store_totals
    """,
}

KEYS: dict[str, tuple[str, ...]] = {
    "checkpoints": ("checkpoint",),
    "batches": ("checkpoint", "batch_id"),
    "operators": ("checkpoint", "operator_id", "store_name"),
    "log_files": ("checkpoint", "path"),
    "state_files": ("checkpoint", "path"),
    "state_versions": ("checkpoint", "operator_id", "store_name", "partition_id", "version"),
    "problems": ("checkpoint", "path", "kind"),
    "sst_refs": ("checkpoint", "operator_id", "store_name", "partition_id", "sst_file"),
    "temp_files": ("checkpoint", "path"),
    "schema_files": ("checkpoint", "path", "sha256"),
    "store_versions": ("checkpoint", "operator_id", "store_name", "version"),
    "partition_newest": ("checkpoint", "operator_id", "store_name", "partition_id"),
    "state_rollups": ("checkpoint", "operator_id", "store_name", "partition_id", "bucket"),
    "file_summaries": ("checkpoint", "operator_id", "store_name", "version", "kind"),
    "partition_buckets": ("checkpoint", "operator_id", "store_name", "partition_id", "bucket"),
    "bucket_marks": ("checkpoint", "operator_id", "store_name"),
    "history_maintenance": ("checkpoint",),
    # Progress: keyed by the query, not the checkpoint path, so an event log and a
    # listener directory of one query land on the same rows; both runs of a restart stay.
    "progress": ("query_id", "run_id", "batch_id"),
    "progress_state": ("query_id", "run_id", "batch_id", "operator_index"),
    "progress_snapshot_uploads": (
        "query_id",
        "run_id",
        "batch_id",
        "operator_index",
        "partition_id",
        "store_name",
    ),
    "progress_runs": ("query_id", "run_id"),
    "progress_files": ("path",),
    # Eviction audit.
    "eviction_rules": ("checkpoint", "operator_id", "store_name", "state_var"),
    "eviction_audit": (
        "checkpoint",
        "operator_id",
        "store_name",
        "state_var",
        "partition_id",
        "version",
    ),
}

# Per-store totals of the versions in {source} (a relation with state_versions' columns),
# replacing the rows of those versions.
_STORE_VERSIONS = """
    INSERT OR REPLACE INTO store_versions BY NAME
    SELECT checkpoint, operator_id, store_name, version,
           count(num_keys) AS known_partitions,
           sum(num_keys) AS num_keys, sum(keys_added) AS keys_added,
           sum(keys_updated) AS keys_updated, sum(keys_removed) AS keys_removed,
           sum(delta_bytes) AS delta_bytes,
           sum(coalesce(delta_bytes, 0) + coalesce(snapshot_bytes, 0)) AS bytes,
           min(num_keys) AS min_keys, max(num_keys) AS max_keys, median(num_keys) AS median_keys,
           count(sst_bytes_live) AS sst_versions,
           sum(sst_bytes_uploaded) FILTER (WHERE sst_bytes_live IS NOT NULL)
               AS sst_bytes_uploaded,
           sum(sst_bytes_live - sst_bytes_uploaded) AS sst_bytes_reused,
           sum(sst_files_reused) FILTER (WHERE sst_bytes_live IS NOT NULL) AS sst_files_reused
    FROM {source} GROUP BY checkpoint, operator_id, store_name, version
"""

# Each partition's newest row among {source}, merged with what the table knew: the newer
# version wins, the first version collected is the older one.
_PARTITION_NEWEST = """
    INSERT INTO partition_newest BY NAME
    SELECT checkpoint, operator_id, store_name, partition_id,
           min(version) AS first_version, max(version) AS version,
           arg_max_null(num_keys, version) AS num_keys,
           arg_max_null(versions_since_snapshot, version) AS versions_since_snapshot,
           arg_max_null(replay_bytes, version) AS replay_bytes
    FROM {source} GROUP BY checkpoint, operator_id, store_name, partition_id
    ON CONFLICT (checkpoint, operator_id, store_name, partition_id) DO UPDATE SET
        first_version = least(partition_newest.first_version, excluded.first_version),
        num_keys = CASE WHEN excluded.version >= partition_newest.version
                        THEN excluded.num_keys ELSE partition_newest.num_keys END,
        versions_since_snapshot = CASE WHEN excluded.version >= partition_newest.version
                        THEN excluded.versions_since_snapshot
                        ELSE partition_newest.versions_since_snapshot END,
        replay_bytes = CASE WHEN excluded.version >= partition_newest.version
                        THEN excluded.replay_bytes ELSE partition_newest.replay_bytes END,
        version = greatest(partition_newest.version, excluded.version)
"""

# The rows of one checkpoint's versions a scan just wrote (``$cp``, ``$lo``..``$hi``, and the
# (operator, store, version) triples as three lists).
_TOUCHED = """(
    SELECT s.* FROM state_versions s
    SEMI JOIN (SELECT unnest($ops::INTEGER[]) AS operator_id,
                      unnest($stores::VARCHAR[]) AS store_name,
                      unnest($versions::BIGINT[]) AS version) t
        USING (operator_id, store_name, version)
    WHERE s.checkpoint = $cp AND s.version BETWEEN $lo AND $hi
)"""

# Partition rows of one checkpoint older than ``$below``, one row per partition and bucket of
# ``$n`` versions; a bucket rolled up before (a late row) merges with what it has.
_ROLL_UP = """
    INSERT INTO state_rollups BY NAME
    SELECT checkpoint, operator_id, store_name, partition_id, (version - 1) // $n AS bucket,
           min(version) AS first_version, max(version) AS last_version,
           count(*) AS versions, min(num_keys) AS min_keys, max(num_keys) AS max_keys,
           arg_max_null(num_keys, version) AS last_keys,
           sum(keys_added) AS keys_added, sum(keys_updated) AS keys_updated,
           sum(keys_removed) AS keys_removed, sum(delta_bytes) AS delta_bytes,
           sum(snapshot_bytes) AS snapshot_bytes, max(replay_bytes) AS max_replay_bytes,
           max(versions_since_snapshot) AS max_versions_since_snapshot
    FROM state_versions WHERE checkpoint = $cp AND version < $below
    GROUP BY ALL
    ON CONFLICT (checkpoint, operator_id, store_name, partition_id, bucket) DO UPDATE SET
        last_keys = CASE WHEN excluded.last_version > state_rollups.last_version
                         THEN excluded.last_keys ELSE state_rollups.last_keys END,
        first_version = least(state_rollups.first_version, excluded.first_version),
        last_version = greatest(state_rollups.last_version, excluded.last_version),
        versions = state_rollups.versions + excluded.versions,
        min_keys = least(state_rollups.min_keys, excluded.min_keys),
        max_keys = greatest(state_rollups.max_keys, excluded.max_keys),
        keys_added = state_rollups.keys_added + excluded.keys_added,
        keys_updated = state_rollups.keys_updated + excluded.keys_updated,
        keys_removed = state_rollups.keys_removed + excluded.keys_removed,
        delta_bytes = state_rollups.delta_bytes + excluded.delta_bytes,
        snapshot_bytes = state_rollups.snapshot_bytes + excluded.snapshot_bytes,
        max_replay_bytes = greatest(state_rollups.max_replay_bytes, excluded.max_replay_bytes),
        max_versions_since_snapshot = greatest(state_rollups.max_versions_since_snapshot,
                                               excluded.max_versions_since_snapshot)
"""

# One store's partition rows of versions ``$lo``..``$hi`` as bucket rows of ``$n`` versions,
# replacing those buckets' rows: the range is whole buckets, so each is counted from all its rows.
_BUCKETS = """
    INSERT OR REPLACE INTO partition_buckets BY NAME
    SELECT checkpoint, operator_id, store_name, partition_id, (version - 1) // $n AS bucket,
           max(version) AS last_version, min(num_keys) AS min_keys, max(num_keys) AS max_keys,
           arg_max_null(num_keys, version) AS last_keys,
           sum(coalesce(delta_bytes, 0) + coalesce(snapshot_bytes, 0)) AS bytes
    FROM state_versions
    WHERE checkpoint = $cp AND operator_id = $op AND store_name = $store
      AND version BETWEEN $lo AND $hi
    GROUP BY ALL
"""

# Purged state files with a version, summed per (version, kind): files and bytes add up.
_COMPACT_FILES = """
    INSERT INTO file_summaries BY NAME
    SELECT checkpoint, operator_id, store_name, version, kind,
           count(*) AS files, sum(size_bytes) AS bytes
    FROM state_files WHERE checkpoint = $cp AND purged AND version IS NOT NULL
    GROUP BY ALL
    ON CONFLICT (checkpoint, operator_id, store_name, version, kind) DO UPDATE SET
        files = file_summaries.files + excluded.files,
        bytes = file_summaries.bytes + excluded.bytes
"""


# Statements that bring a database written by schema version N - 1 up to N (new tables come
# from TABLES). Version 2 records which SSTs each zip references: the live zips of an older
# database are forgotten so that the next scan reads them again (their purged history stays).
MIGRATIONS: dict[int, tuple[str, ...]] = {
    2: (
        "ALTER TABLE checkpoints ADD COLUMN IF NOT EXISTS pinned_conf VARCHAR",
        "ALTER TABLE state_versions ADD COLUMN IF NOT EXISTS sst_files_live INTEGER",
        "DELETE FROM state_files WHERE kind = 'zip' AND NOT purged",
    ),
    # Version 3 only adds the progress tables (created from TABLES).
    3: (),
    # Version 4 keeps per-store and newest-per-partition tables beside the partition rows:
    # filled here from the history so far, then by every scan.
    4: (
        "DELETE FROM store_versions",
        "DELETE FROM partition_newest",
        _STORE_VERSIONS.format(source="state_versions"),
        _PARTITION_NEWEST.format(source="state_versions"),
    ),
    # Version 5 only adds the stored health verdicts (created from TABLES).
    5: (),
    # Version 6 adds the bucket rows of the partition rows kept (created from TABLES, filled
    # by Database() from the history so far: see _fill_buckets).
    6: (),
    # Version 7 keeps with each stored verdict the facts its clock rules read, so that readers
    # apply the clock to them rather than judge those rules again (NULL: judged again).
    7: ("ALTER TABLE health_judged ADD COLUMN IF NOT EXISTS clock_facts VARCHAR",),
}


# DuckDB 2 names a connection of the other mode in this process a resource conflict.
_OPEN_ERRORS = (duckdb.IOException, duckdb.ConnectionException, duckdb.ResourceInUseException)


def _is_lock_conflict(exc: Exception) -> bool:
    """A lock held by another process, or a connection of the other mode in this process."""
    if isinstance(exc, duckdb.ResourceInUseException):
        return True
    text = str(exc)
    return isinstance(exc, duckdb.IOException | duckdb.ConnectionException) and (
        "lock" in text or "different configuration" in text
    )


def _connect(path: str, read_only: bool, timeout_s: float) -> duckdb.DuckDBPyConnection:
    """Open ``path``, retrying with backoff while the other side holds it."""
    deadline = time.monotonic() + timeout_s
    delay = 0.005
    while True:
        try:
            conn = duckdb.connect(path, read_only=read_only)
        except _OPEN_ERRORS as exc:
            if not _is_lock_conflict(exc):
                # Not a DuckDB file, or not readable: one line naming it, not a traceback.
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise DatabaseError(path, f"cannot open the database ({first})") from exc
            if time.monotonic() >= deadline:
                mode = "read" if read_only else "write"
                raise DatabaseBusy(
                    path, f"still locked after {timeout_s:.0f}s, cannot {mode}"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
            continue
        # DuckDB draws its own progress bar on stderr for a query over 2 s, in the middle of
        # the CLI's progress and the servers' logs; it is a per-connection setting.
        conn.execute("SET enable_progress_bar = false")
        return conn


# table -> column -> SQL type, read from the catalog once per process: every database this
# code opens has been brought to TABLES' schema by Database() (a catalog query costs a scan
# 2-25 ms of CPU, and a scan writes a dozen tables).
_TYPES: dict[str, dict[str, str]] = {}


def _column_types(conn: duckdb.DuckDBPyConnection, table: str) -> dict[str, str]:
    if table not in _TYPES:
        for name, column, sql_type in conn.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() "
            "WHERE schema_name = 'main' AND NOT internal"
        ).fetchall():
            if name in TABLES:
                _TYPES.setdefault(name, {})[column] = sql_type
    return _TYPES.get(table, {})


def _upsert(
    conn: duckdb.DuckDBPyConnection,
    table: str,
    rows: Sequence[Mapping[str, Any]],
    on_conflict: str | None = None,
) -> None:
    """Insert ``rows`` into ``table``, replacing rows with the same primary key.

    ``on_conflict`` instead names the columns to update when the key exists (the others
    keep their values). Rows go in as one statement, each column one list parameter
    cast to the table's type and unnested side by side: ``executemany`` is 100x slower,
    and registering numpy arrays or an Arrow table would import numpy (0.1 s) or pandas
    (0.7 s), which a short ``collect`` process pays for nothing. The cast to the column's
    own type keeps DuckDB from guessing a type from the first values.
    """
    if not rows:
        return
    names = list(rows[0])
    types = _column_types(conn, table)
    unknown = [n for n in names if n not in types]
    if unknown:
        raise ValueError(f"{table} has no column {', '.join(unknown)}")
    select = ", ".join(f"unnest(?::{types[n]}[]) AS {n}" for n in names)
    values = [[r.get(n) for r in rows] for n in names]
    if on_conflict is None:
        conn.execute(f"INSERT OR REPLACE INTO {table} BY NAME SELECT {select}", values)
    else:
        keys = ", ".join(KEYS[table])
        sets = ", ".join(f"{c} = excluded.{c}" for c in on_conflict.split(","))
        conn.execute(
            f"INSERT INTO {table} BY NAME SELECT {select} "
            f"ON CONFLICT ({keys}) DO UPDATE SET {sets}",
            values,
        )


def _delete_where(conn: duckdb.DuckDBPyConnection, table: str, where: Mapping[str, Any]) -> None:
    clause = " AND ".join(f"{c} = ?" for c in where)
    conn.execute(f"DELETE FROM {table} WHERE {clause}", list(where.values()))


def _watermarks(rows: Callable[..., list[tuple[Any, ...]]], oldest: int) -> dict[int, int | None]:
    """batch -> watermark of the batches that wrote version ``oldest`` and later; and of the
    newest older batch with a watermark, if any: whether the query ever had a watermark
    decides how its eviction rules read."""
    out = dict(
        rows(
            "SELECT batch_id, watermark_ms FROM batches WHERE checkpoint = ? AND batch_id >= ?",
            oldest - 1,
        )
    )
    out.update(
        rows(
            "SELECT batch_id, watermark_ms FROM batches WHERE checkpoint = ? AND batch_id < ? "
            "AND watermark_ms > 0 ORDER BY batch_id DESC LIMIT 1",
            oldest - 1,
        )
    )
    return out


def _rows_by_chain(
    rows: Sequence[tuple[Any, ...]],
) -> dict[Chain, dict[int, Any]]:
    """``(operator, store, partition, version, value)`` rows as chain -> version -> value."""
    out: dict[Chain, dict[int, Any]] = {}
    for op, store, part, version, value in rows:
        out.setdefault((op, store, part), {})[version] = value
    return out


class Database:
    """The writer. One instance per process; transactions are short and serialized."""

    def __init__(
        self,
        path: str,
        lock_timeout_s: float | None = None,
        history: HistorySettings | None = None,
    ) -> None:
        self.path = os.path.abspath(os.path.expanduser(path))
        self.lock_timeout_s = DEFAULT_LOCK_TIMEOUT_S if lock_timeout_s is None else lock_timeout_s
        self.history = history or HistorySettings()
        self._lock = threading.Lock()
        # checkpoint -> versions written since this writer last maintained its history
        self._since_maintained: dict[str, int] = {}
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with self._transaction() as conn:
            for ddl in TABLES.values():
                conn.execute(ddl)
            found = conn.execute("SELECT max(version) FROM schema_info").fetchall()[0][0]
            if found is None:
                conn.execute("INSERT INTO schema_info VALUES (?)", [SCHEMA_VERSION])
            elif found < SCHEMA_VERSION:
                for version in range(found + 1, SCHEMA_VERSION + 1):
                    for statement in MIGRATIONS.get(version, ()):
                        conn.execute(statement)
                if found < 6:
                    _fill_buckets(conn, self.history.rollup_versions)
                conn.execute("UPDATE schema_info SET version = ?", [SCHEMA_VERSION])
            for view in VIEWS.values():
                conn.execute(view)

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection inside BEGIN … COMMIT, closed afterwards (releasing the lock)."""
        with self._lock:
            conn = _connect(self.path, read_only=False, timeout_s=self.lock_timeout_s)
            try:
                conn.execute("BEGIN TRANSACTION")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            finally:
                conn.close()

    # -- checkpoint scans ------------------------------------------------------------------

    def known(self, root: str) -> KnownScan:
        """What earlier scans of the checkpoint ``root`` recorded (empty for a new one).

        Only what a scan can meet again is read: the versions, and the batches' watermarks,
        from the oldest state file still on disk on. A month of history keeps a week of
        partition rows (millions) beside a hundred versions of files; a scan only ever
        counts versions it finds files of, and audits those."""
        with self._transaction() as conn:

            def rows(sql: str, *more: Any) -> list[tuple[Any, ...]]:
                return conn.execute(sql, [root, *more]).fetchall()

            state_files = rows(
                "SELECT path, size_bytes, modified_at, version FROM state_files "
                "WHERE checkpoint = ? AND NOT purged"
            )
            # No live file (a new checkpoint, or every file purged): nothing to bound by.
            oldest = min((v for *_, v in state_files if v is not None), default=0)
            versions = rows(
                "SELECT operator_id, store_name, partition_id, version, sst_bytes_live "
                "FROM state_versions WHERE checkpoint = ? AND version >= ?",
                oldest,
            )
            return KnownScan(
                log_files={
                    p: (s, m)
                    for p, s, m in rows(
                        "SELECT path, size_bytes, modified_at FROM log_files WHERE checkpoint = ?"
                    )
                },
                state_files={p: (s, m) for p, s, m, _ in state_files},
                versions={c: set(v) for c, v in _rows_by_chain(versions).items()},
                sst_bytes_live=_rows_by_chain([r for r in versions if r[4] is not None]),
                watermarks=_watermarks(rows, oldest),
                problem_paths=frozenset(
                    p for (p,) in rows("SELECT path FROM problems WHERE checkpoint = ?")
                ),
            )

    def record_scan(self, write: ScanWrite) -> None:
        """Write one scan of one checkpoint in one transaction: a scan is recorded whole or not
        at all, so a failed write is scanned again next time."""
        with self._transaction() as conn:
            _record_checkpoint(conn, write)
            _record_files(conn, write)
            _record_problems(conn, write)
            _record_facts(conn, write)
            _record_history(conn, write, self.history.rollup_versions)
        # Retention runs in a transaction of its own after the scan's, every so many versions:
        # the scan's rows are committed (and readable) first, whatever maintaining costs.
        versions = len({r["version"] for r in write.state_versions})
        written = self._since_maintained.get(write.root, 0) + versions
        self._since_maintained[write.root] = written
        if self.history.enabled and written >= self.history.maintain_every:
            self.maintain(write.root)

    def record_problems(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Add problem rows found after their scan was written (a watcher's checksum checks,
        :mod:`collectors.scan.late_checks`), in one transaction."""
        with self._transaction() as conn:
            _upsert(conn, "problems", rows)

    # -- history ---------------------------------------------------------------------------

    def maintain(self, root: str | None = None) -> list[MaintainResult]:
        """Apply retention, roll-ups and file compaction
        (:mod:`stateglass.collectors.db.history_settings`)
        to the checkpoint ``root``, or to every checkpoint; one transaction per checkpoint."""
        with self._transaction() as conn:
            roots = (
                [root]
                if root is not None
                else [r for (r,) in conn.execute("SELECT checkpoint FROM checkpoints").fetchall()]
            )
        out = []
        for one in roots:
            with self._transaction() as conn:
                out.append(
                    _maintain(conn, one, self.history, datetime.now(UTC).replace(tzinfo=None))
                )
            self._since_maintained[one] = 0
        return out

    def record_verdicts(
        self, judged: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]
    ) -> None:
        """Replace one checkpoint's stored health verdicts (``health_judged`` row ``judged``,
        its ``health_findings`` rows) in one transaction."""
        with self._transaction() as conn:
            root = judged["checkpoint"]
            _delete_where(conn, "health_findings", {"checkpoint": root})
            _upsert(conn, "health_judged", [judged])
            _upsert(conn, "health_findings", findings)

    # -- progress --------------------------------------------------------------------------

    def progress_files(self, root: str) -> dict[str, dict[str, Any]]:
        """What is known of the files under one ``--progress`` root: path -> its
        ``progress_files`` row (size, mtime, where to resume, complete)."""
        with self._transaction() as conn:
            cur = conn.execute("SELECT * FROM progress_files WHERE root = ?", [root])
            names = [d[0] for d in cur.description]
            return {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}

    def write_progress(self, batch: ProgressWrite) -> None:
        """Upsert one read of progress files in one transaction: the rows, the runs, and how
        far each file was read (so a failed write is re-read next time, never half-kept)."""
        with self._transaction() as conn:
            _upsert(conn, "progress", batch.progress)
            _upsert(conn, "progress_state", batch.progress_state)
            _upsert(conn, "progress_snapshot_uploads", batch.snapshot_uploads)
            for run in batch.runs:
                _upsert_run(conn, run)
            _upsert(conn, "progress_files", batch.files)


def _record_checkpoint(conn: duckdb.DuckDBPyConnection, write: ScanWrite) -> None:
    """The checkpoint's own row, its operators and its batches."""
    _upsert(conn, "checkpoints", [write.checkpoint], on_conflict=_CHECKPOINT_COLUMNS)
    if write.operators:
        _delete_where(conn, "operators", {"checkpoint": write.root})
        _upsert(conn, "operators", write.operators)
    _upsert(conn, "batches", write.batch_offsets, on_conflict=_OFFSET_COLUMNS)
    _upsert(conn, "batches", write.batch_commits, on_conflict=_COMMIT_COLUMNS)


def _record_files(conn: duckdb.DuckDBPyConnection, write: ScanWrite) -> None:
    """Log and state files as listed now, and the versions counted; history is never deleted:
    a state file that went away is marked purged."""
    _upsert(conn, "log_files", write.log_files)
    if write.logs_removed:
        conn.execute(
            "DELETE FROM log_files WHERE checkpoint = ? AND path IN (SELECT unnest(?::VARCHAR[]))",
            [write.root, list(write.logs_removed)],
        )
    _upsert(conn, "state_files", write.state_files)
    if write.state_files_purged:
        # One statement joined against the list: a commit that lets Spark's maintenance purge
        # thousands of files would otherwise pay one indexed UPDATE per file.
        conn.execute(
            "UPDATE state_files SET purged = TRUE, purged_at = ? "
            "WHERE checkpoint = ? AND path IN (SELECT unnest(?::VARCHAR[]))",
            [write.now, write.root, list(write.state_files_purged)],
        )
    _upsert(conn, "state_versions", write.state_versions)


def _record_problems(conn: duckdb.DuckDBPyConnection, write: ScanWrite) -> None:
    """This scan's verdicts replace the old ones on the files it judged again."""
    if write.rejudged:
        conn.execute(
            "DELETE FROM problems WHERE checkpoint = ? AND list_contains(?::VARCHAR[], path)",
            [write.root, list(write.rejudged)],
        )
    # `metadata`, schema files and operator metadata are read at every scan: this scan's
    # problems with them replace the old ones (a repaired file loses its row).
    conn.execute(
        "DELETE FROM problems WHERE checkpoint = ? AND (path = ? "
        "OR contains(path, '/_metadata/') OR contains(path, '/_stateSchema/'))",
        [write.root, write.metadata_path],
    )
    _upsert(conn, "problems", write.problems)


def _record_facts(conn: duckdb.DuckDBPyConnection, write: ScanWrite) -> None:
    """What the health rules need beyond key counts, and the eviction audit."""
    _upsert(conn, "sst_refs", write.sst_refs, on_conflict="last_version")
    if write.temp_files_listed:
        _record_temp_files(conn, write)
    _upsert(conn, "schema_files", write.schema_files, on_conflict=_SCHEMA_FILE_COLUMNS)
    # Eviction rules follow the schemas: replaced. Audit rows are of the versions just counted.
    _delete_where(conn, "eviction_rules", {"checkpoint": write.root})
    _upsert(conn, "eviction_rules", write.eviction_rules)
    _upsert(conn, "eviction_audit", write.eviction_audit)


def _record_temp_files(conn: duckdb.DuckDBPyConnection, write: ScanWrite) -> None:
    """Temp files are a snapshot of now: those renamed or deleted since the last scan go."""
    first_seen = dict(
        conn.execute(
            "SELECT path, first_seen FROM temp_files WHERE checkpoint = ?", [write.root]
        ).fetchall()
    )
    _delete_where(conn, "temp_files", {"checkpoint": write.root})
    _upsert(
        conn,
        "temp_files",
        [{**r, "first_seen": first_seen.get(r["path"], r["first_seen"])} for r in write.temp_files],
    )


def _record_history(conn: duckdb.DuckDBPyConnection, write: ScanWrite, width: int) -> None:
    """Store totals, each partition's newest version and the bucket rows, for the versions
    this scan wrote (buckets of ``width`` versions)."""
    if not write.state_versions:
        return
    touched = sorted(
        {(r["operator_id"], r["store_name"], r["version"]) for r in write.state_versions}
    )
    params = {
        "cp": write.root,
        "lo": touched[0][2] if len(touched) == 1 else min(t[2] for t in touched),
        "hi": max(t[2] for t in touched),
        "ops": [t[0] for t in touched],
        "stores": [t[1] for t in touched],
        "versions": [t[2] for t in touched],
    }
    conn.execute(_STORE_VERSIONS.format(source=_TOUCHED), params)
    conn.execute(_PARTITION_NEWEST.format(source=_TOUCHED), params)
    written: dict[tuple[int, str], list[int]] = {}
    for op, store, version in touched:
        written.setdefault((op, store), []).append(version)
    for (op, store), versions in written.items():
        _refresh_buckets(conn, (write.root, op, store), width, versions)


def _fill_buckets(conn: duckdb.DuckDBPyConnection, width: int) -> None:
    """Bucket rows for every store with partition rows (a database from before them)."""
    for store in conn.execute(
        "SELECT DISTINCT checkpoint, operator_id, store_name FROM partition_newest"
    ).fetchall():
        _refresh_buckets(conn, store, width, [])


def _refresh_buckets(
    conn: duckdb.DuckDBPyConnection, store: tuple[str, int, str], width: int, written: list[int]
) -> None:
    """Keep one store's ``partition_buckets`` whole: the buckets completed since its mark
    (the newest version collected of any partition closes every bucket before it), and the
    complete ones a scan wrote into again (a partition's row arriving late, a rewrite). A
    store without a mark, or marked with another width, is counted again from its rows."""
    cp, op, name = store
    where = {"cp": cp, "op": op, "store": name}
    # One statement: a scan pays this for every store it wrote, usually to find nothing to do.
    newest, marked, done = conn.execute(
        "SELECT (SELECT max(version) FROM partition_newest WHERE checkpoint = $cp "
        "        AND operator_id = $op AND store_name = $store), m.width, m.through_version "
        "FROM (SELECT 1) LEFT JOIN bucket_marks m ON m.checkpoint = $cp "
        "     AND m.operator_id = $op AND m.store_name = $store",
        where,
    ).fetchall()[0]
    through = (int(newest or 0) // width) * width
    if marked != width:
        conn.execute(
            "DELETE FROM partition_buckets "
            "WHERE checkpoint = $cp AND operator_id = $op AND store_name = $store",
            where,
        )
        ranges = [(1, through)]
    else:
        late = sorted({(v - 1) // width for v in written if v <= done})
        ranges = [(b * width + 1, (b + 1) * width) for b in late] + [(done + 1, through)]
    for lo, hi in ranges:
        if lo <= hi:
            conn.execute(_BUCKETS, {**where, "n": width, "lo": lo, "hi": hi})
    if (marked, done) == (width, through):
        return
    _upsert(
        conn,
        "bucket_marks",
        [
            {
                "checkpoint": cp,
                "operator_id": op,
                "store_name": name,
                "width": width,
                "through_version": through,
            }
        ],
    )


def _full_from(conn: duckdb.DuckDBPyConnection, root: str, history: HistorySettings) -> int | None:
    """The first version kept at full resolution: the first of the window's batches (by
    Spark's batch timestamps), never past a version whose files are still on disk (a scan may
    count it again), rounded down to a bucket boundary. ``None``: nothing to roll up."""
    newest_ms, live = conn.execute(
        "SELECT (SELECT max(batch_timestamp_ms) FROM batches WHERE checkpoint = $cp), "
        "(SELECT min(version) FROM state_files "
        " WHERE checkpoint = $cp AND NOT purged AND version IS NOT NULL)",
        {"cp": root},
    ).fetchall()[0]
    if newest_ms is None:
        return None
    window_ms = int(history.full_resolution_days * 86_400_000)
    first_batch = conn.execute(
        "SELECT min(batch_id) FROM batches WHERE checkpoint = ? AND batch_timestamp_ms >= ?",
        [root, newest_ms - window_ms],
    ).fetchall()[0][0]
    if first_batch is None:
        return None
    full_from = first_batch + 1 if live is None else min(first_batch + 1, live)
    n = history.rollup_versions
    below = ((full_from - 1) // n) * n + 1
    return below if below > 1 else None


def _maintain(
    conn: duckdb.DuckDBPyConnection, root: str, history: HistorySettings, now: datetime
) -> MaintainResult:
    """Roll up the partition rows before the window, compact the purged files' rows."""
    below = _full_from(conn, root, history) if history.enabled else None
    rolled = rows = 0
    # Bucket rows of this width first, so that none straddles ``below`` (a bucket boundary).
    for store in conn.execute(
        "SELECT DISTINCT operator_id, store_name FROM partition_newest WHERE checkpoint = ?",
        [root],
    ).fetchall():
        _refresh_buckets(conn, (root, *store), history.rollup_versions, [])
    if below is not None:
        params = {"cp": root, "below": below, "n": history.rollup_versions}
        rolled = conn.execute(
            "SELECT count(*) FROM state_versions WHERE checkpoint = $cp AND version < $below",
            {"cp": root, "below": below},
        ).fetchall()[0][0]
        if rolled:
            rows = conn.execute(_ROLL_UP, params).fetchall()[0][0]
            conn.execute(
                "DELETE FROM state_versions WHERE checkpoint = $cp AND version < $below",
                {"cp": root, "below": below},
            )
            # Their bucket rows go with them: the roll-ups count those versions now.
            conn.execute(
                "DELETE FROM partition_buckets WHERE checkpoint = $cp AND last_version < $below",
                {"cp": root, "below": below},
            )
    files = 0
    if history.enabled:
        files = conn.execute(
            "SELECT count(*) FROM state_files WHERE checkpoint = ? AND purged "
            "AND version IS NOT NULL",
            [root],
        ).fetchall()[0][0]
        if files:
            conn.execute(_COMPACT_FILES, {"cp": root})
            conn.execute(
                "DELETE FROM state_files WHERE checkpoint = ? AND purged AND version IS NOT NULL",
                [root],
            )
    _upsert(
        conn,
        "history_maintenance",
        [
            {
                "checkpoint": root,
                "maintained_at": now,
                "full_from_version": below,
                "full_days": history.full_resolution_days,
                "rollup_versions": history.rollup_versions,
            }
        ],
    )
    return MaintainResult(root, below, rolled, rows, files)


def _upsert_run(conn: duckdb.DuckDBPyConnection, run: Mapping[str, Any]) -> None:
    """A run's start and end come from different events, possibly different reads: keep what
    an earlier read knew when this one does not say."""
    keep = ", ".join(
        f"{c} = coalesce(excluded.{c}, {c})"
        for c in ("name", "app_id", "started_at", "terminated_at", "exception")
    )
    conn.execute(
        "INSERT INTO progress_runs BY NAME SELECT "
        + ", ".join(f"? AS {c}" for c in _RUN_COLUMNS)
        + f" ON CONFLICT (query_id, run_id) DO UPDATE SET {keep}, "
        "source = excluded.source, source_path = excluded.source_path",
        [run.get(c) for c in _RUN_COLUMNS],
    )


@contextmanager
def reader(
    path: str, timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A read-only connection for one short read, closed afterwards so the writer can go on."""
    conn = _connect(os.path.abspath(os.path.expanduser(path)), read_only=True, timeout_s=timeout_s)
    try:
        _views_for_an_older_database(conn)
        yield conn
    finally:
        conn.close()


# The partial-history views came (or changed) after the first databases were written: a database
# no writer of this version has opened yet (served with `dashboard --db`, say) lacks them; a
# read-only connection may still create them as temporary views, which shadow the stored ones
# for that connection only.
# ``repartitions`` came later still: a database written before it has the others, and the
# per-version partition counts of ``store_totals`` and ``snapshot_lag`` come with it.
_PARTIAL_HISTORY_VIEWS = ("store_totals", "partition_skew", "state_growth")
_REPARTITION_VIEWS = ("repartitions", "snapshot_lag", *_PARTIAL_HISTORY_VIEWS)


# A database from before the bucket rows reads as if it had none yet (empty, no marks): the
# State page's cells come from the partition rows, as they did.
_NO_BUCKETS = {
    "partition_buckets": "SELECT NULL::VARCHAR AS checkpoint, NULL::INTEGER AS operator_id, "
    "NULL::VARCHAR AS store_name, NULL::INTEGER AS partition_id, NULL::BIGINT AS bucket, "
    "NULL::BIGINT AS last_version, NULL::BIGINT AS min_keys, NULL::BIGINT AS max_keys, "
    "NULL::BIGINT AS last_keys, NULL::HUGEINT AS bytes WHERE false",
    "bucket_marks": "SELECT NULL::VARCHAR AS checkpoint, NULL::INTEGER AS operator_id, "
    "NULL::VARCHAR AS store_name, NULL::INTEGER AS width, NULL::BIGINT AS through_version "
    "WHERE false",
}


def _views_for_an_older_database(conn: duckdb.DuckDBPyConnection) -> None:
    found = {
        name
        for (name,) in conn.execute(
            "SELECT view_name FROM duckdb_views() WHERE view_name IN ('store_totals', "
            "'repartitions')"
        ).fetchall()
    }
    present = {
        name
        for (name,) in conn.execute(
            "SELECT table_name FROM duckdb_tables() WHERE table_name IN ('state_versions', "
            "'operators', 'batches', 'store_versions', 'partition_newest', 'bucket_marks')"
        ).fetchall()
    }
    if "bucket_marks" not in present:
        for name, select in _NO_BUCKETS.items():
            conn.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {select}")
    tables = len(present - {"bucket_marks"})
    # The views read the per-store tables a writer of this version keeps: without them the
    # database keeps what it has until a writer upgrades it.
    if found == {"store_totals", "repartitions"} or tables < 5:
        return
    for name in _REPARTITION_VIEWS:
        conn.execute(VIEWS[name].replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW"))


def read_query(
    path: str, sql: str, params: Sequence[Any] = (), timeout_s: float = DEFAULT_LOCK_TIMEOUT_S
) -> list[tuple[Any, ...]]:
    """Run one SELECT on a read-only connection and return all its rows."""
    with reader(path, timeout_s) as conn:
        return conn.execute(sql, list(params)).fetchall()
