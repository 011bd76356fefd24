"""Spark's progress events, joined to the checkpoint by its query id.

Every query here gives an empty frame with its columns when no progress was collected.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from stateglass.app.queries.connection import read_frame

# How each page says it has no progress source (one line, the same everywhere).
NO_PROGRESS = (
    "No progress events for this query: add `--progress PATH` (a Spark event-log directory, "
    "or the StateGlass listener's) to `stateglass collect`, `watch` or `dashboard`."
)


# durationMs parts drawn in the breakdown, in stacking order; "other" is the rest of
# triggerExecution (Spark's whole batch).
DURATION_PARTS: dict[str, str] = {
    "duration_latest_offset_ms": "latestOffset",
    "duration_get_offset_ms": "getOffset",
    "duration_get_batch_ms": "getBatch",
    "duration_query_planning_ms": "queryPlanning",
    "duration_add_batch_ms": "addBatch",
    "duration_wal_commit_ms": "walCommit",
    "duration_commit_offsets_ms": "commitOffsets",
}


ROCKSDB_METRICS: tuple[str, ...] = (
    "rocksdb_bytes_copied",
    "rocksdb_files_copied",
    "rocksdb_files_reused",
    "rocksdb_flush_latency_ms",
    "rocksdb_compact_latency_ms",
    "rocksdb_checkpoint_latency_ms",
    "rocksdb_pause_latency_ms",
    "rocksdb_write_batch_latency_ms",
    "rocksdb_file_sync_latency_ms",
    "rocksdb_write_stall_latency_ms",
    "rocksdb_block_cache_hits",
    "rocksdb_block_cache_misses",
    "rocksdb_sst_file_size_bytes",
)


def progress(db: str, checkpoint: str) -> pd.DataFrame:
    """One row per progress event of the checkpoint's query (every run), oldest first.

    Columns: run_id, batch_id, timestamp, num_input_rows, input_rows_per_second,
    processed_rows_per_second, batch_duration_ms, duration_trigger_execution_ms, the
    :data:`DURATION_PARTS` columns, event_time_watermark, kafka_max_offsets_behind_latest,
    rows_dropped_by_watermark (summed over stateful operators). Empty without progress.
    """
    parts = ", ".join(f"p.{c}" for c in DURATION_PARTS)
    return read_frame(
        db,
        f"""
        WITH dropped AS (
            SELECT query_id, run_id, batch_id,
                   sum(num_rows_dropped_by_watermark) AS rows_dropped_by_watermark
            FROM progress_state GROUP BY ALL
        )
        SELECT p.run_id, p.batch_id, p.timestamp, p.num_input_rows, p.input_rows_per_second,
               p.processed_rows_per_second, p.batch_duration_ms,
               p.duration_trigger_execution_ms, {parts}, p.event_time_watermark,
               p.kafka_max_offsets_behind_latest, d.rows_dropped_by_watermark
        FROM checkpoints c
        JOIN progress p ON p.query_id = c.query_id
        LEFT JOIN dropped d
          ON d.query_id = p.query_id AND d.run_id = p.run_id AND d.batch_id = p.batch_id
        WHERE c.checkpoint = ?
        ORDER BY p.timestamp, p.batch_id
        """,
        [checkpoint],
    )


def progress_state(db: str, checkpoint: str, operator_id: int) -> pd.DataFrame:
    """One row per progress event for one stateful operator, oldest first.

    The operator is matched by its index in Spark's ``stateOperators`` list, which is the
    operator id for every plan we have seen (one stateful operator, or a join). Columns:
    run_id, batch_id, timestamp, operator_name, num_rows_total, num_rows_updated,
    num_rows_removed, num_rows_dropped_by_watermark, memory_used_bytes, commit_time_ms,
    all_updates_time_ms, all_removals_time_ms, and the :data:`ROCKSDB_METRICS` columns.
    """
    columns = [
        "run_id",
        "batch_id",
        "timestamp",
        "operator_name",
        "num_rows_total",
        "num_rows_updated",
        "num_rows_removed",
        "num_rows_dropped_by_watermark",
        "memory_used_bytes",
        "commit_time_ms",
        "all_updates_time_ms",
        "all_removals_time_ms",
        *ROCKSDB_METRICS,
    ]
    picked = ", ".join(f"s.{c}" for c in columns[3:])
    return read_frame(
        db,
        f"""
        SELECT s.run_id, s.batch_id, p.timestamp, {picked}
        FROM checkpoints c
        JOIN progress_state s ON s.query_id = c.query_id
        JOIN progress p
          ON p.query_id = s.query_id AND p.run_id = s.run_id AND p.batch_id = s.batch_id
        WHERE c.checkpoint = ? AND s.operator_index = ?
        ORDER BY p.timestamp, s.batch_id
        """,
        [checkpoint, operator_id],
    )


def snapshot_uploads(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Spark's ``SnapshotLastUploaded`` per partition beside the snapshot the files show.

    From the newest progress event that reports the store: ``reported_version`` is the last
    snapshot version Spark says that partition uploaded (-1: none yet); ``files_version`` is
    the newest snapshot (or zip) version at or below that batch's state version (batch id +
    1) as the collected files say (-1: none), NULL when that version was not collected. Columns:
    partition_id, batch_id, state_version, reported_version, files_version,
    versions_since_snapshot, agree.
    """
    return read_frame(
        db,
        """
        WITH reported AS (
            SELECT u.partition_id, u.batch_id, u.last_uploaded_version
            FROM checkpoints c
            JOIN progress_snapshot_uploads u ON u.query_id = c.query_id
            JOIN progress p
              ON p.query_id = u.query_id AND p.run_id = u.run_id AND p.batch_id = u.batch_id
            WHERE c.checkpoint = ? AND u.operator_index = ? AND u.store_name = ?
            QUALIFY row_number() OVER (
                PARTITION BY u.partition_id ORDER BY p.timestamp DESC, u.batch_id DESC) = 1
        )
        SELECT r.partition_id, r.batch_id, r.batch_id + 1 AS state_version,
               r.last_uploaded_version AS reported_version,
               -- versions_since_snapshot = version: no snapshot yet, which Spark says as -1
               CASE WHEN v.versions_since_snapshot >= v.version THEN -1
                    ELSE v.version - v.versions_since_snapshot END AS files_version,
               v.versions_since_snapshot,
               CASE WHEN v.version IS NOT NULL
                    THEN coalesce(r.last_uploaded_version, -1) = files_version END AS agree
        FROM reported r
        LEFT JOIN state_versions v
          ON v.checkpoint = ? AND v.operator_id = ? AND v.store_name = ?
         AND v.partition_id = r.partition_id AND v.version = r.batch_id + 1
        ORDER BY r.partition_id
        """,
        [checkpoint, operator_id, store_name] * 2,
    )


def progress_overview(db: str, checkpoints: Sequence[str] | None = None) -> pd.DataFrame:
    """The newest 30 progress events of every checkpoint's query (of ``checkpoints`` only,
    when given: a page of the Overview's cards), for the Overview cards.

    Columns: checkpoint, batch_id, timestamp, input_rows_per_second,
    processed_rows_per_second, kafka_max_offsets_behind_latest.
    """
    where = "" if checkpoints is None else "WHERE c.checkpoint IN (SELECT unnest(?::VARCHAR[]))"
    return read_frame(
        db,
        f"""
        SELECT c.checkpoint, p.batch_id, p.timestamp, p.input_rows_per_second,
               p.processed_rows_per_second, p.kafka_max_offsets_behind_latest
        FROM checkpoints c JOIN progress p ON p.query_id = c.query_id
        {where}
        QUALIFY row_number() OVER (
            PARTITION BY c.checkpoint ORDER BY p.timestamp DESC, p.batch_id DESC) <= 30
        ORDER BY c.checkpoint, p.timestamp, p.batch_id
        """,
        [] if checkpoints is None else [list(checkpoints)],
    )


def progress_sources(db: str, checkpoint: str) -> pd.DataFrame:
    """Per progress event: batch_id, num_input_rows and ``sources`` (Spark's per-source JSON
    list, each with its ``description`` and ``numInputRows``), oldest first."""
    return read_frame(
        db,
        """
        SELECT p.batch_id, p.num_input_rows, p.sources
        FROM checkpoints c JOIN progress p ON p.query_id = c.query_id
        WHERE c.checkpoint = ? ORDER BY p.timestamp, p.batch_id
        """,
        [checkpoint],
    )
