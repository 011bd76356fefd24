"""Real checkpoints written by PySpark, each built to trip one or more health rules, made once
per test session with the shared ``spark`` fixture, plus helpers to collect and judge them.

Every query reads small JSON files with ``maxFilesPerTrigger=1`` and ``availableNow``, so batch
N is file N (deterministic, no rate source timing).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.analysis.health import Finding, HealthConfig, evaluate
from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import ROOT, SAMPLES, copy_checkpoint, spark_conf, write_batch_files

__all__ = ["ROOT", "SAMPLES", "copy_checkpoint"]
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
BATCH_CONF = {
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    "spark.sql.streaming.stateStore.providerClass": HDFS,
}


@dataclass(frozen=True)
class Built:
    """The checkpoints of the session, by role."""

    unbounded: Path  # groupBy(k).count(), no watermark, new keys every batch, HDFS
    skew: Path  # one hot key whose collect_list holds most rows (4 partitions)
    # minBatchesToRetain=2, frequent maintenance; same types as ``unbounded``, other names
    retention: Path


def _start(spark: Any, src: Path, schema: str, build: Any, cp: Path, conf: dict[str, str]) -> Any:
    """Start one query with ``conf``: a query copies the session's confs when it starts, so
    the next one may start with others while it runs."""
    with spark_conf(spark, {**BATCH_CONF, **conf}):
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(src))
        return (
            build(stream)
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
            .start()
        )


@pytest.fixture(scope="session")
def built(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Built:
    from pyspark.sql import functions as F

    base = tmp_path_factory.mktemp("health")
    # 6 batches of 200 new keys: 1,200 keys, never one removed.
    keys = [[{"k": b * 200 + i, "v": i} for i in range(200)] for b in range(6)]
    write_batch_files(base / "src-keys", keys)
    write_batch_files(base / "src-keys-5", keys[:5])
    # The three run at once: a batch costs mostly driver round trips, which they then share.
    unbounded = _start(
        spark,
        base / "src-keys",
        "k BIGINT, v BIGINT",
        lambda df: df.groupBy("k").count(),
        base / "unbounded",
        {
            "spark.sql.shuffle.partitions": "2",
            # Snapshots held back: none is written in 6 versions.
            "spark.sql.streaming.stateStore.minDeltasForSnapshot": "100",
        },
    )
    retention = _start(
        spark,
        base / "src-keys-5",
        "k BIGINT, v BIGINT",
        lambda df: df.groupBy("k").agg(F.sum("v")),
        base / "retention",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.streaming.minBatchesToRetain": "2",
            "spark.sql.streaming.stateStore.minDeltasForSnapshot": "1",
            "spark.sql.streaming.stateStore.maintenanceInterval": "100ms",
        },
    )
    # A hot key: 2,500 rows a batch append 128-byte payloads to one list; 20 cold keys a batch.
    skew = []
    for b in range(4):
        rows = [
            {"k": "hot", "p": hashlib.sha512(f"{b}-{i}".encode()).hexdigest()} for i in range(2500)
        ]
        rows += [{"k": f"user-{b}-{i}", "p": "x"} for i in range(20)]
        skew.append(rows)
    write_batch_files(base / "src-skew", skew)
    skewed = _start(
        spark,
        base / "src-skew",
        "k STRING, p STRING",
        lambda df: df.groupBy("k").agg(F.collect_list("p").alias("ps")),
        base / "skew",
        {"spark.sql.shuffle.partitions": "4"},
    )
    for query in (unbounded, retention, skewed):
        query.awaitTermination()
    return Built(base / "unbounded", base / "skew", base / "retention")


def collect(db_path: Path | str, checkpoint: Path | str) -> str:
    """Scan ``checkpoint`` into ``db_path``; the absolute path it is recorded under."""
    summary = scan_checkpoint(Database(str(db_path)), str(checkpoint))
    return summary.checkpoint


def last_commit(db_path: Path | str, root: str) -> datetime:
    rows = read_query(
        str(db_path), "SELECT max(committed_at) FROM batches WHERE checkpoint = ?", [root]
    )
    assert rows[0][0] is not None
    value: datetime = rows[0][0]
    return value


def judge(
    db_path: Path | str,
    root: str,
    after: timedelta = timedelta(seconds=5),
    config: HealthConfig | None = None,
) -> dict[str, list[Finding]]:
    """Findings by rule, judged ``after`` the last commit."""
    now = last_commit(db_path, root) + after
    out: dict[str, list[Finding]] = {}
    for f in evaluate(str(db_path), root, now=now, config=config):
        out.setdefault(f.rule, []).append(f)
    return out


def statuses(findings: dict[str, list[Finding]], rule: str) -> set[str]:
    return {f.status for f in findings[rule]}


def age(path: Path, seconds: float) -> None:
    """Make ``path`` look ``seconds`` old (relative to its own mtime now)."""
    st = os.stat(path)
    os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds))
