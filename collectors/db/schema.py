"""The history database's tables: every ``CREATE TABLE``, and what is read from them.

Each table is written once, here, as DDL. Its columns, their types and its primary key are read
from that DDL (:data:`COLUMNS`, :data:`KEYS`), never kept by hand beside it: the writer's upserts
take the types and the conflict keys from there. A change here is a new schema version
(``SCHEMA_VERSION`` and a migration in :mod:`stateglass.collectors.db.schema_versions`).
The views over these tables are in :mod:`stateglass.collectors.db.views`.

Example::

    KEYS["batches"]               # ("checkpoint", "batch_id")
    COLUMNS["batches"]["committed"]  # "BOOLEAN"
"""

from __future__ import annotations

import re

from stateglass.collectors.db.progress_tables import PROGRESS_TABLES

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
            pinned_conf VARCHAR,
            -- the batch whose state `stateglass rewrite` wrote (its stateglass-rewrite.json):
            -- the checkpoint's state history starts there; NULL for one Spark wrote
            rewritten_at_batch BIGINT
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
    # -- history that scales in time: kept by every scan (history_rollup.record_history) ---
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
    # Streaming progress: generated from the column lists in progress_tables.py, which also
    # map each Spark field (durationMs part, RocksDB metric) to its column.
    **PROGRESS_TABLES,
    # -- eviction audit: collectors/scan/eviction_audit.py ------------------------------
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
    # -- rows per transformWithState column family: collectors/scan/variable_counts.py -----
    # Counted at the newest version of each partition a scan read: the rows Spark's reader
    # returns per state variable (row_count; NULL for an index no reader option returns) beside
    # the raw RocksDB keys, which num_keys sums over every column family.
    "variable_rows": """
        CREATE TABLE IF NOT EXISTS variable_rows (
            checkpoint VARCHAR NOT NULL,
            operator_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            partition_id INTEGER NOT NULL,
            version BIGINT NOT NULL,
            column_family VARCHAR NOT NULL,
            role VARCHAR NOT NULL,
            kind VARCHAR,
            row_count BIGINT,
            raw_keys BIGINT NOT NULL,
            PRIMARY KEY (checkpoint, operator_id, store_name, partition_id, column_family, version)
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


def _parts(ddl: str) -> list[str]:
    """The comma-separated parts between a ``CREATE TABLE``'s outer parentheses, comments
    dropped."""
    body = "\n".join(line.split("--", 1)[0] for line in ddl.splitlines())
    body = body[body.index("(") + 1 : body.rindex(")")]
    parts, depth, start = [], 0, 0
    for i, char in enumerate(body):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [" ".join(p.split()) for p in parts if p.strip()]


_PRIMARY_KEY = re.compile(r"PRIMARY KEY \((?P<names>[^)]*)\)", re.IGNORECASE)


def _columns(ddl: str) -> dict[str, str]:
    """column -> SQL type, in the DDL's order."""
    return {
        part.split()[0]: part.split()[1] for part in _parts(ddl) if not _PRIMARY_KEY.fullmatch(part)
    }


def _key(ddl: str) -> tuple[str, ...]:
    """The primary key: a ``PRIMARY KEY (...)`` part, or the column declared ``PRIMARY KEY``."""
    for part in _parts(ddl):
        whole = _PRIMARY_KEY.fullmatch(part)
        if whole:
            return tuple(n.strip() for n in whole["names"].split(","))
        if "PRIMARY KEY" in part.upper():
            return (part.split()[0],)
    return ()


# table -> column -> SQL type (as DuckDB's catalog names it).
COLUMNS: dict[str, dict[str, str]] = {name: _columns(ddl) for name, ddl in TABLES.items()}
# table -> its primary key's columns (the conflict target of an upsert).
KEYS: dict[str, tuple[str, ...]] = {name: key for name, ddl in TABLES.items() if (key := _key(ddl))}
