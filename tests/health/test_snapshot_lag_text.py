"""Snapshot lag's text agrees with its status: past the version limit but OK says why."""

from __future__ import annotations

import os
from pathlib import Path

from stateglass.app.analysis.health import HealthConfig
from stateglass.app.analysis.thresholds import SparkConfig
from tests.conftest import with_spark_file_times
from tests.health.conftest import SAMPLES, age, collect, copy_checkpoint, judge, statuses


def test_versions_past_the_limit_with_a_fresh_snapshot_explain_the_ok(tmp_path: Path) -> None:
    # Spark's own file times: on a clone's times the rule would time snapshots on Spark's clock.
    cp = with_spark_file_times(
        copy_checkpoint(SAMPLES / "spark-4.3" / "agg-hdfs", tmp_path / "agg-hdfs")
    )
    # Maintenance has not written the newest snapshot yet: 3 versions past snapshot 9.
    for partition in (p for p in (cp / "state" / "0").iterdir() if p.name.isdigit()):
        (partition / "12.snapshot").unlink()
    db = tmp_path / "db.duckdb"
    root = collect(db, cp)
    config = HealthConfig(spark=SparkConfig(min_deltas_for_snapshot=1))
    found = judge(db, root, config=config)["snapshot_lag"]
    assert statuses({"snapshot_lag": found}, "snapshot_lag") == {"OK"}
    text = found[0].finding
    assert "at most 3 versions since a snapshot" in text and "WARN above 2" in text
    assert "but its snapshot is only" in text and "a snapshot older than 5m 0s" in text
    # Once the snapshot is old enough, the same lag is a WARN.
    for partition in (p for p in (cp / "state" / "0").iterdir() if p.name.isdigit()):
        for name in os.listdir(partition):
            if name.startswith("9."):
                age(partition / name, 3600)
    db2 = tmp_path / "db2.duckdb"
    root = collect(db2, cp)
    assert statuses(judge(db2, root, config=config), "snapshot_lag") == {"WARN"}
    # HDFS-backed state: the finding names the rewrite onto RocksDB, with this checkpoint.
    (warn,) = judge(db2, root, config=config)["snapshot_lag"]
    assert f"stateglass rewrite {root} {root}-rocksdb --provider rocksdb" in warn.hint
