"""Real queries built to leak state, and healthy ones, run once per module on the shared
``spark`` fixture and collected into one database (the eviction audit).

Every query reads a few small JSON files, one per batch (``maxFilesPerTrigger=1``,
``availableNow``), with 4 shuffle partitions and no no-data batches: event time advances five
minutes per file, and the watermarks are one minute behind.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.db import Database
from stateglass.collectors.scan import scan_checkpoint

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
CONF = {
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    "spark.sql.streaming.stateStore.providerClass": HDFS,
    "spark.sql.shuffle.partitions": "4",
}
BATCHES = 4
SCHEMA = "k STRING, id BIGINT, ts TIMESTAMP"


@dataclass(frozen=True)
class Queries:
    """The database every query was collected into, and each checkpoint's recorded path."""

    db: str
    roots: dict[str, str]


@contextmanager
def _conf(spark: Any, conf: dict[str, str]) -> Iterator[None]:
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


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


def _write(src: Path, side: str = "") -> Path:
    src.mkdir(parents=True)
    for n in range(BATCHES):
        with open(src / f"{n:03d}.json", "w") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in _rows(n, side))
    return src


def _start(cp: Path, mode: str, build: Callable[[], Any]) -> Any:
    return (
        build()
        .writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )


@pytest.fixture(scope="module")
def queries(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Queries:
    from pyspark.sql import functions as F

    base = tmp_path_factory.mktemp("eviction")
    one = _write(base / "src")
    left_src, right_src = _write(base / "left", "l"), _write(base / "right", "l")

    def stream(src: Path = one) -> Any:
        return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))

    def watermarked(src: Path = one) -> Any:
        return stream(src).withWatermark("ts", "1 minute")

    def join(bounded: bool) -> Any:
        left = watermarked(left_src).select(
            F.col("k").alias("lk"), F.col("id").alias("lid"), F.col("ts").alias("lts")
        )
        right = watermarked(right_src).select(
            F.col("k").alias("rk"), F.col("id").alias("rid"), F.col("ts").alias("rts")
        )
        cond = F.col("lk") == F.col("rk")
        if bounded:
            cond = cond & F.expr("lts BETWEEN rts - INTERVAL 1 MINUTE AND rts + INTERVAL 1 MINUTE")
        return left.join(right, cond)

    built: dict[str, tuple[str, Callable[[], Any]]] = {
        # Built to leak.
        "agg_no_watermark": ("update", lambda: stream().groupBy("k").count()),
        "agg_watermark_not_in_key": ("update", lambda: watermarked().groupBy("k").count()),
        "dedup_no_watermark": ("append", lambda: stream().dropDuplicates(["id"])),
        "join_no_time_bound": ("append", lambda: join(bounded=False)),
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
        "join_time_bound": ("append", lambda: join(bounded=True)),
    }
    # All at once: a batch costs mostly driver round trips, which the queries then share.
    with _conf(spark, CONF):
        running = [_start(base / name, mode, build) for name, (mode, build) in built.items()]
    for query in running:
        query.awaitTermination()
    db = Database(str(base / "audit.duckdb"))
    roots = {name: scan_checkpoint(db, str(base / name)).checkpoint for name in built}
    return Queries(db.path, roots)
