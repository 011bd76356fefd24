"""Real queries' ``StreamingQueryProgress`` JSON into the progress tables, for the tests of the
health rules, the metrics endpoint and the pages.

The JSON comes from ``query.recentProgress`` of queries the tests run on the shared ``spark``
fixture; rows go in through the one writer's ``Database.write_progress``. The mapping of
Spark's fields to columns is the schema's own (``collectors/progress_schema.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from collectors.db import Database, ProgressWrite
from collectors.progress_schema import (
    DURATION_COLUMNS,
    HDFS_COLUMNS,
    ROCKSDB_COLUMNS,
    SNAPSHOT_LAST_UPLOADED_PREFIX,
)


def _time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


def _kafka(sources: list[dict[str, Any]], key: str) -> float | None:
    values = [float(s["metrics"][key]) for s in sources if key in (s.get("metrics") or {})]
    return max(values) if values else None


def rows_of(event: dict[str, Any], source_path: str) -> ProgressWrite:
    """The rows of one progress event (a ``StreamingQueryProgress.json`` object)."""
    durations = event.get("durationMs") or {}
    sources = event.get("sources") or []
    key = {"query_id": event["id"], "run_id": event["runId"], "batch_id": event["batchId"]}
    progress = {
        **key,
        "name": event.get("name"),
        "timestamp": _time(event.get("timestamp")),
        "batch_duration_ms": event.get("batchDuration"),
        "num_input_rows": event.get("numInputRows"),
        "input_rows_per_second": event.get("inputRowsPerSecond"),
        "processed_rows_per_second": event.get("processedRowsPerSecond"),
        **{column: durations.get(name) for name, column in DURATION_COLUMNS.items()},
        "duration_ms": json.dumps(durations),
        "event_time_watermark": _time((event.get("eventTime") or {}).get("watermark")),
        "event_time": json.dumps(event.get("eventTime") or {}),
        "num_sources": len(sources),
        "sources": json.dumps(sources),
        "kafka_avg_offsets_behind_latest": _kafka(sources, "avgOffsetsBehindLatest"),
        "kafka_max_offsets_behind_latest": _kafka(sources, "maxOffsetsBehindLatest"),
        "kafka_min_offsets_behind_latest": _kafka(sources, "minOffsetsBehindLatest"),
        "sink": json.dumps(event.get("sink")),
        "observed_metrics": json.dumps(event.get("observedMetrics")),
        "source": "test",
        "source_path": source_path,
    }
    states = []
    uploads = []
    for index, op in enumerate(event.get("stateOperators") or []):
        custom = op.get("customMetrics") or {}
        state = {
            **key,
            "operator_index": index,
            "operator_name": op.get("operatorName"),
            "num_rows_total": op.get("numRowsTotal"),
            "num_rows_updated": op.get("numRowsUpdated"),
            "num_rows_removed": op.get("numRowsRemoved"),
            "num_rows_dropped_by_watermark": op.get("numRowsDroppedByWatermark"),
            "memory_used_bytes": op.get("memoryUsedBytes"),
            "commit_time_ms": op.get("commitTimeMs"),
            "all_updates_time_ms": op.get("allUpdatesTimeMs"),
            "all_removals_time_ms": op.get("allRemovalsTimeMs"),
            "num_shuffle_partitions": op.get("numShufflePartitions"),
            "num_state_store_instances": op.get("numStateStoreInstances"),
            "custom_metrics": json.dumps(custom),
            "snapshot_last_uploaded": json.dumps(
                {k: v for k, v in custom.items() if k.startswith(SNAPSHOT_LAST_UPLOADED_PREFIX)}
            ),
        }
        for name, column in {**ROCKSDB_COLUMNS, **HDFS_COLUMNS}.items():
            if name in custom:
                state[column] = custom[name]
            else:
                state.setdefault(column, None)
        states.append(state)
        for name, value in custom.items():
            if not name.startswith(SNAPSHOT_LAST_UPLOADED_PREFIX):
                continue
            partition, _, store = name[len(SNAPSHOT_LAST_UPLOADED_PREFIX) :].partition("_")
            uploads.append(
                {
                    **key,
                    "operator_index": index,
                    "partition_id": int(partition),
                    "store_name": store,
                    "last_uploaded_version": value,
                }
            )
    return ProgressWrite(progress=[progress], progress_state=states, snapshot_uploads=uploads)


def write_events(db_path: str, events: Iterable[dict[str, Any]], source_path: str) -> int:
    """Write every event's rows; the number of events written."""
    batch = ProgressWrite()
    n = 0
    for event in events:
        rows = rows_of(event, source_path)
        batch.progress.extend(rows.progress)
        batch.progress_state.extend(rows.progress_state)
        batch.snapshot_uploads.extend(rows.snapshot_uploads)
        n += 1
    Database(db_path).write_progress(batch)
    return n
