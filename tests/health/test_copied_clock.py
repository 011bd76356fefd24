"""A checkpoint copied with new file times is judged on Spark's clock: the snapshot-lag rule's
time condition and the ``stateglass_last_commit_age_seconds`` gauge use the batches'
``batchTimestampMs``, while a checkpoint with Spark's own file times keeps the file times."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from stateglass.app.analysis.health import HealthConfig
from stateglass.app.analysis.thresholds import SnapshotLagConfig, SparkConfig
from stateglass.app.metrics import HistoryCollector
from tests.conftest import with_spark_file_times
from tests.health.conftest import SAMPLES, age, collect, copy_checkpoint, judge, statuses

AGG = SAMPLES / "spark-4.3" / "agg-hdfs"
# Batch 8 (state version 9, the snapshot) ran 6 s before batch 11 (version 12, the latest).
CONFIG = HealthConfig(
    spark=SparkConfig(min_deltas_for_snapshot=1),
    snapshot_lag=SnapshotLagConfig(min_seconds=3),
)


def _lagging_copy(tmp_path: Path, spark_times: bool) -> Path:
    """agg-hdfs, 3 versions past snapshot 9; every file time the copy's, or Spark's."""
    cp = copy_checkpoint(AGG, tmp_path / "agg-hdfs")
    for partition in (p for p in (cp / "state" / "0").iterdir() if p.name.isdigit()):
        (partition / "12.snapshot").unlink()
    if spark_times:
        return with_spark_file_times(cp)
    now = time.time()
    for f in [cp, *cp.rglob("*")]:
        os.utime(f, (now, now))
    return cp


def _batch_ms(cp: Path, batch: int) -> int:
    ms: int = json.loads((cp / "offsets" / str(batch)).read_text().split("\n")[1])[
        "batchTimestampMs"
    ]
    return ms


def _commit_age(db: Path) -> float:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HistoryCollector(str(db)))
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        if family.name == "stateglass_last_commit_age_seconds":
            [sample] = family.samples
            return float(sample.value)
    raise AssertionError("no stateglass_last_commit_age_seconds")


def test_snapshot_lag_on_a_copy_is_timed_by_spark(tmp_path: Path) -> None:
    cp = _lagging_copy(tmp_path, spark_times=False)
    db = tmp_path / "db.duckdb"
    found = judge(db, collect(db, cp), config=CONFIG)["snapshot_lag"]
    # The copy wrote snapshot 9 and version 12 in the same second; Spark ran them 6 s apart.
    assert statuses({"snapshot_lag": found}, "snapshot_lag") == {"WARN"}
    assert "snapshot at version 9, 6.0s older (Spark's batchTimestampMs)" in found[0].finding


def test_snapshot_lag_with_spark_file_times_uses_the_files(tmp_path: Path) -> None:
    cp = _lagging_copy(tmp_path, spark_times=True)
    for partition in (p for p in (cp / "state" / "0").iterdir() if p.name.isdigit()):
        for name in os.listdir(partition):
            if name.startswith("9."):
                age(partition / name, 3600)
    db = tmp_path / "db.duckdb"
    found = judge(db, collect(db, cp), config=CONFIG)["snapshot_lag"]
    assert statuses({"snapshot_lag": found}, "snapshot_lag") == {"WARN"}
    assert "Spark's batchTimestampMs" not in found[0].finding
    assert "snapshot at version 9, 1.0h older;" in found[0].finding


def test_commit_age_gauge_on_a_copy_is_since_spark_ran_the_batch(tmp_path: Path) -> None:
    cp = _lagging_copy(tmp_path, spark_times=False)
    db = tmp_path / "db.duckdb"
    collect(db, cp)
    ran = _batch_ms(cp, 11) / 1000
    # The copy's commit files are seconds old; Spark ran the last batch long before.
    assert time.time() - ran > 3600
    assert abs(_commit_age(db) - (time.time() - ran)) < 60


def test_commit_age_gauge_with_spark_file_times_is_since_the_commit_file(
    tmp_path: Path,
) -> None:
    cp = _lagging_copy(tmp_path, spark_times=True)
    committed = os.stat(cp / "commits" / "11").st_mtime
    os.utime(cp / "commits" / "11", (committed + 30, committed + 30))
    db = tmp_path / "db.duckdb"
    collect(db, cp)
    assert abs(_commit_age(db) - (time.time() - committed - 30)) < 5
