"""The progress tables and the map from Spark's progress fields to their columns.

Spark's ``StreamingQueryProgress`` has open-ended maps (``durationMs``, ``customMetrics``). The
parts every Spark 3.5–4.3 emits get a typed column each (listed once here, used both for the
``CREATE TABLE`` and by the collector); the whole map is kept as JSON beside them, so a key a
newer Spark adds is never lost.
"""

from __future__ import annotations

# durationMs key -> column. Keys from MicroBatchExecution's ``reportTimeTaken`` calls:
# getOffset is V1 sources, latestOffset V2 (Spark 3.0+), commitOffsets Spark 3.4+ (source
# commit after the batch), setOffsetRange/getEndOffset older V2 readers.
DURATION_COLUMNS: dict[str, str] = {
    "addBatch": "duration_add_batch_ms",
    "getBatch": "duration_get_batch_ms",
    "latestOffset": "duration_latest_offset_ms",
    "getOffset": "duration_get_offset_ms",
    "queryPlanning": "duration_query_planning_ms",
    "triggerExecution": "duration_trigger_execution_ms",
    "walCommit": "duration_wal_commit_ms",
    "commitOffsets": "duration_commit_offsets_ms",
    "setOffsetRange": "duration_set_offset_range_ms",
    "getEndOffset": "duration_get_end_offset_ms",
}

# RocksDB state store custom metrics (RocksDBStateStoreProvider.ALL_CUSTOM_METRICS, 3.5–4.3)
# -> column. Latencies are milliseconds; Spark sums them over the store instances of the batch.
# rocksdbTotalBytesRead/Written were renamed ...ByGet/...ByPut by some distributions: both
# land in one column.
ROCKSDB_COLUMNS: dict[str, str] = {
    "rocksdbBytesCopied": "rocksdb_bytes_copied",
    "rocksdbFilesCopied": "rocksdb_files_copied",
    "rocksdbFilesReused": "rocksdb_files_reused",
    "rocksdbCommitFlushLatency": "rocksdb_flush_latency_ms",
    "rocksdbCommitCompactLatency": "rocksdb_compact_latency_ms",
    "rocksdbCommitWriteBatchLatency": "rocksdb_write_batch_latency_ms",
    "rocksdbCommitPauseLatency": "rocksdb_pause_latency_ms",
    "rocksdbCommitCheckpointLatency": "rocksdb_checkpoint_latency_ms",
    "rocksdbCommitFileSyncLatencyMs": "rocksdb_file_sync_latency_ms",
    "rocksdbWriterStallLatencyMs": "rocksdb_write_stall_latency_ms",
    "rocksdbReadBlockCacheHitCount": "rocksdb_block_cache_hits",
    "rocksdbReadBlockCacheMissCount": "rocksdb_block_cache_misses",
    "rocksdbZipFileBytesUncompressed": "rocksdb_zip_file_bytes_uncompressed",
    "rocksdbSstFileSize": "rocksdb_sst_file_size_bytes",
    "rocksdbGetLatency": "rocksdb_get_latency_ms",
    "rocksdbPutLatency": "rocksdb_put_latency_ms",
    "rocksdbGetCount": "rocksdb_get_count",
    "rocksdbPutCount": "rocksdb_put_count",
    "rocksdbTotalBytesRead": "rocksdb_bytes_read_by_get",
    "rocksdbTotalBytesReadByGet": "rocksdb_bytes_read_by_get",
    "rocksdbTotalBytesWritten": "rocksdb_bytes_written_by_put",
    "rocksdbTotalBytesWrittenByPut": "rocksdb_bytes_written_by_put",
    "rocksdbTotalBytesReadThroughIterator": "rocksdb_bytes_read_by_iterator",
    "rocksdbTotalBytesReadByCompaction": "rocksdb_bytes_read_by_compaction",
    "rocksdbTotalBytesWrittenByCompaction": "rocksdb_bytes_written_by_compaction",
    "rocksdbTotalCompactionLatencyMs": "rocksdb_total_compaction_latency_ms",
    "rocksdbTotalBytesWrittenByFlush": "rocksdb_bytes_written_by_flush",
    "rocksdbPinnedBlocksMemoryUsage": "rocksdb_pinned_blocks_memory_bytes",
    "rocksdbNumInternalColFamiliesKeys": "rocksdb_internal_col_families_keys",
    "rocksdbNumExternalColumnFamilies": "rocksdb_external_column_families",
    "rocksdbNumInternalColumnFamilies": "rocksdb_internal_column_families",
    "rocksdbChangeLogWriterCommitLatencyMs": "rocksdb_changelog_commit_latency_ms",
    "rocksdbSaveZipFilesLatencyMs": "rocksdb_save_zip_files_latency_ms",
    "rocksdbLoadFromSnapshotLatencyMs": "rocksdb_load_from_snapshot_latency_ms",
    "rocksdbLoadLatencyMs": "rocksdb_load_latency_ms",
    "rocksdbReplayChangeLogLatencyMs": "rocksdb_replay_changelog_latency_ms",
    "rocksdbNumReplayChangelogFiles": "rocksdb_replay_changelog_files",
    "rocksdbNumSnapshotsAutoRepaired": "rocksdb_snapshots_auto_repaired",
}

# HDFSBackedStateStoreProvider's custom metrics.
HDFS_COLUMNS: dict[str, str] = {
    "loadedMapCacheHitCount": "hdfs_loaded_map_cache_hits",
    "loadedMapCacheMissCount": "hdfs_loaded_map_cache_misses",
    "stateOnCurrentVersionSizeBytes": "hdfs_state_on_current_version_bytes",
}

# Spark 4.x: ``SnapshotLastUploaded.partition_<partition>_<store>`` = last snapshot version
# uploaded by that store instance (-1: none yet).
SNAPSHOT_LAST_UPLOADED_PREFIX = "SnapshotLastUploaded.partition_"


def _columns(specs: list[tuple[str, str]]) -> str:
    return ",\n            ".join(f"{name} {sql_type}" for name, sql_type in specs)


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))


PROGRESS_COLUMNS: list[tuple[str, str]] = [
    ("query_id", "VARCHAR NOT NULL"),
    ("run_id", "VARCHAR NOT NULL"),
    ("batch_id", "BIGINT NOT NULL"),
    ("name", "VARCHAR"),
    ("timestamp", "TIMESTAMP"),
    ("batch_duration_ms", "BIGINT"),
    ("num_input_rows", "BIGINT"),
    ("input_rows_per_second", "DOUBLE"),
    ("processed_rows_per_second", "DOUBLE"),
    *[(c, "BIGINT") for c in _unique(list(DURATION_COLUMNS.values()))],
    ("duration_ms", "VARCHAR"),
    ("event_time_watermark", "TIMESTAMP"),
    ("event_time", "VARCHAR"),
    ("num_sources", "INTEGER"),
    ("sources", "VARCHAR"),
    ("kafka_avg_offsets_behind_latest", "DOUBLE"),
    ("kafka_max_offsets_behind_latest", "DOUBLE"),
    ("kafka_min_offsets_behind_latest", "DOUBLE"),
    ("sink", "VARCHAR"),
    ("observed_metrics", "VARCHAR"),
    ("source", "VARCHAR NOT NULL"),
    ("source_path", "VARCHAR NOT NULL"),
    ("app_id", "VARCHAR"),
]

PROGRESS_STATE_COLUMNS: list[tuple[str, str]] = [
    ("query_id", "VARCHAR NOT NULL"),
    ("run_id", "VARCHAR NOT NULL"),
    ("batch_id", "BIGINT NOT NULL"),
    ("operator_index", "INTEGER NOT NULL"),
    ("operator_name", "VARCHAR"),
    ("num_rows_total", "BIGINT"),
    ("num_rows_updated", "BIGINT"),
    ("num_rows_removed", "BIGINT"),
    ("num_rows_dropped_by_watermark", "BIGINT"),
    ("memory_used_bytes", "BIGINT"),
    ("commit_time_ms", "BIGINT"),
    ("all_updates_time_ms", "BIGINT"),
    ("all_removals_time_ms", "BIGINT"),
    ("num_shuffle_partitions", "BIGINT"),
    ("num_state_store_instances", "BIGINT"),
    ("custom_metrics", "VARCHAR"),
    *[(c, "BIGINT") for c in _unique(list(ROCKSDB_COLUMNS.values()))],
    *[(c, "BIGINT") for c in HDFS_COLUMNS.values()],
    ("snapshot_last_uploaded", "VARCHAR"),
]

PROGRESS_TABLES: dict[str, str] = {
    "progress": f"""
        CREATE TABLE IF NOT EXISTS progress (
            {_columns(PROGRESS_COLUMNS)},
            PRIMARY KEY (query_id, run_id, batch_id)
        )
    """,
    "progress_state": f"""
        CREATE TABLE IF NOT EXISTS progress_state (
            {_columns(PROGRESS_STATE_COLUMNS)},
            PRIMARY KEY (query_id, run_id, batch_id, operator_index)
        )
    """,
    # The long form of snapshot_last_uploaded, to join with the snapshot_lag view by
    # (partition_id, store_name).
    "progress_snapshot_uploads": """
        CREATE TABLE IF NOT EXISTS progress_snapshot_uploads (
            query_id VARCHAR NOT NULL,
            run_id VARCHAR NOT NULL,
            batch_id BIGINT NOT NULL,
            operator_index INTEGER NOT NULL,
            partition_id INTEGER NOT NULL,
            store_name VARCHAR NOT NULL,
            last_uploaded_version BIGINT,
            PRIMARY KEY (query_id, run_id, batch_id, operator_index, partition_id, store_name)
        )
    """,
    "progress_runs": """
        CREATE TABLE IF NOT EXISTS progress_runs (
            query_id VARCHAR NOT NULL,
            run_id VARCHAR NOT NULL,
            name VARCHAR,
            app_id VARCHAR,
            started_at TIMESTAMP,
            terminated_at TIMESTAMP,
            exception VARCHAR,
            source VARCHAR NOT NULL,
            source_path VARCHAR NOT NULL,
            PRIMARY KEY (query_id, run_id)
        )
    """,
    # Internal: how far each event-log or listener file has been read. Decoding resumes at
    # raw_offset (a byte of the file where the codec can restart: a block boundary, or 0 for
    # zstd's single frame) and skips text_offset decoded bytes (the complete lines read).
    "progress_files": """
        CREATE TABLE IF NOT EXISTS progress_files (
            path VARCHAR PRIMARY KEY,
            root VARCHAR NOT NULL,
            size_bytes BIGINT NOT NULL,
            modified_at DOUBLE NOT NULL,
            raw_offset BIGINT NOT NULL,
            text_offset BIGINT NOT NULL,
            events_read BIGINT NOT NULL,
            complete BOOLEAN NOT NULL,
            last_read TIMESTAMP NOT NULL
        )
    """,
}
