"""The one writer's bulk insert: DuckDB infers an object column's type from a sample, so a
column that starts with NULLs and small numbers must still take 64-bit values further down
(the eviction audit of 10,000 partitions: event times in ms after thousands of NULLs)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.db.writes import ScanWrite


def test_upsert_takes_big_numbers_after_a_sample_of_nulls(tmp_path: Path) -> None:
    db = Database(str(tmp_path / "t.duckdb"))
    rows = [
        {
            "checkpoint": "/cp",
            "operator_id": 0,
            "store_name": "default",
            "state_var": "",
            "partition_id": p,
            "version": 1,
            "watermark_ms": None,
            "keys": 1,
            "overdue_keys": None,
            "oldest_event_ms": None if p < 5000 else (5 if p == 5000 else 1_704_067_500_000),
        }
        for p in range(5002)
    ]
    now = datetime(2024, 1, 1)
    db.record_scan(
        ScanWrite(
            root="/cp",
            now=now,
            metadata_path="/cp/metadata",
            checkpoint={
                "checkpoint": "/cp",
                "query_id": None,
                "first_seen": now,
                "last_scan": now,
                "pinned_conf": None,
            },
            eviction_audit=rows,
        )
    )
    assert read_query(db.path, "SELECT count(*), max(oldest_event_ms) FROM eviction_audit")[0] == (
        5002,
        1_704_067_500_000,
    )
