"""Real queries built to leak state, and healthy ones, run once per test session on the shared
``spark`` fixture and collected into one database (the eviction audit).

Every query reads a few small JSON files, one per batch (``maxFilesPerTrigger=1``,
``availableNow``), with 4 shuffle partitions and no no-data batches: event time advances five
minutes per file, and the watermarks are one minute behind. Five batches: a join without a
time bound is judged by ``state_leak`` once the watermark has passed its oldest value by more
than the range the store held, at three versions. ``join_wide_bound`` is a healthy join early
in its life: a two-hour bound, four batches, nothing evicted yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import spark_conf, write_batch_files

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
CONF = {
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    "spark.sql.streaming.stateStore.providerClass": HDFS,
    "spark.sql.shuffle.partitions": "4",
}
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
FAMILIES_CONF = {"spark.sql.streaming.stateStore.providerClass": ROCKSDB}
JOIN_FORMAT = "spark.sql.streaming.join.stateFormatVersion"
BATCHES = 5
EARLY_BATCHES = 4
SCHEMA = "k STRING, id BIGINT, ts TIMESTAMP"


@dataclass(frozen=True)
class Queries:
    """The database every query was collected into, and each checkpoint's recorded path."""

    db: str
    roots: dict[str, str]


def _rows(batch: int, side: str = "") -> list[dict[str, Any]]:
    """Ten rows a batch: five keys, new ids, event times in this batch's five minutes."""
    base = batch * 300
    return [
        {
            "k": f"{side}k{i % 5}",
            "id": batch * 10 + i,
            "ts": f"2024-01-01T{(base + 25 * i) // 3600:02d}:"
            f"{(base + 25 * i) % 3600 // 60:02d}:{(base + 25 * i) % 60:02d}Z",
        }
        for i in range(10)
    ]


def _write(src: Path, side: str = "", batches: int = BATCHES) -> Path:
    return write_batch_files(src, [_rows(n, side) for n in range(batches)])


def _start(cp: Path, mode: str, build: Callable[[], Any]) -> Any:
    return (
        build()
        .writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )


@pytest.fixture(scope="session")
def queries(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Queries:
    from pyspark.sql import functions as F

    base = tmp_path_factory.mktemp("eviction")
    one = _write(base / "src")
    left_src, right_src = _write(base / "left", "l"), _write(base / "right", "l")
    early = (
        _write(base / "early-left", "l", EARLY_BATCHES),
        _write(base / "early-right", "l", EARLY_BATCHES),
    )

    def stream(src: Path = one) -> Any:
        return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))

    def watermarked(src: Path = one) -> Any:
        return stream(src).withWatermark("ts", "1 minute")

    def join(bound: str | None, sources: tuple[Path, Path] = (left_src, right_src)) -> Any:
        left = watermarked(sources[0]).select(
            F.col("k").alias("lk"), F.col("id").alias("lid"), F.col("ts").alias("lts")
        )
        right = watermarked(sources[1]).select(
            F.col("k").alias("rk"), F.col("id").alias("rid"), F.col("ts").alias("rts")
        )
        cond = F.col("lk") == F.col("rk")
        if bound:
            cond = cond & F.expr(f"lts BETWEEN rts - INTERVAL {bound} AND rts + INTERVAL {bound}")
        return left.join(right, cond)

    built: dict[str, tuple[str, Callable[[], Any]]] = {
        # Built to leak.
        "agg_no_watermark": ("update", lambda: stream().groupBy("k").count()),
        "agg_watermark_not_in_key": ("update", lambda: watermarked().groupBy("k").count()),
        "dedup_no_watermark": ("append", lambda: stream().dropDuplicates(["id"])),
        "join_no_time_bound": ("append", lambda: join(None)),
        # Session windows never close without a watermark (Spark allows only complete mode
        # then).
        "session_no_watermark_complete": (
            "complete",
            lambda: stream().groupBy(F.session_window("ts", "2 minutes"), "k").count(),
        ),
        # A watermark, but on another column: no session closes (complete mode again).
        "session_watermark_elsewhere": (
            "complete",
            lambda: (
                stream()
                .withColumn("seen", F.col("ts"))
                .withWatermark("seen", "1 minute")
                .groupBy(F.session_window("ts", "2 minutes"), "k")
                .count()
            ),
        ),
        # Complete output mode never evicts: the windows stay, overdue.
        "window_agg_complete": (
            "complete",
            lambda: watermarked().groupBy(F.window("ts", "5 minutes"), "k").count(),
        ),
        # Healthy.
        "window_agg": (
            "update",
            lambda: watermarked().groupBy(F.window("ts", "5 minutes"), "k").count(),
        ),
        "dedup_event_time": ("append", lambda: watermarked().dropDuplicates(["id", "ts"])),
        "dedup_within_watermark": (
            "append",
            lambda: watermarked().dropDuplicatesWithinWatermark(["id"]),
        ),
        "join_time_bound": ("append", lambda: join("1 MINUTE")),
        "join_wide_bound": ("append", lambda: join("2 HOURS", early)),
    }
    # Join state formats 3 and 4 keep both sides in one RocksDB store's column families.
    families: dict[str, tuple[str, Callable[[], Any]]] = {
        "join_v3_no_watermark": ("3", lambda: join_unwatermarked(False)),
        "join_v4_left_watermark": ("4", lambda: join_unwatermarked(True)),
    }

    def join_unwatermarked(left_watermark: bool) -> Any:
        left = (watermarked if left_watermark else stream)(left_src).select(
            F.col("k").alias("lk"), F.col("ts").alias("lts")
        )
        right = stream(right_src).select(F.col("k").alias("rk"), F.col("ts").alias("rts"))
        return left.join(right, F.col("lk") == F.col("rk"))

    # All at once: a batch costs mostly driver round trips, which the queries then share.
    with spark_conf(spark, CONF):
        running = [_start(base / name, mode, build) for name, (mode, build) in built.items()]
    for name, (version, build) in families.items():
        with spark_conf(spark, {**CONF, **FAMILIES_CONF, JOIN_FORMAT: version}):
            running.append(_start(base / name, "append", build))
    for query in running:
        query.awaitTermination()
    db = Database(str(base / "audit.duckdb"))
    roots = {name: scan_checkpoint(db, str(base / name)).checkpoint for name in [*built, *families]}
    return Queries(db.path, roots)
