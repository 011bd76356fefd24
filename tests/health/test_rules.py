"""Each health rule trips on a real checkpoint built to trip it, and stays OK on healthy ones."""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from stateglass.app.analysis.health import PROGRESS_RULES, RULES, HealthConfig, worst
from stateglass.app.analysis.thresholds import SnapshotLagConfig, SparkConfig, StalledQueryConfig
from tests.conftest import SamplesDb
from tests.health.conftest import (
    SAMPLES,
    Built,
    age,
    collect,
    copy_checkpoint,
    judge,
    statuses,
)

pytestmark = pytest.mark.spark

SAMPLE_NAMES = sorted(os.path.relpath(p.parent, SAMPLES) for p in SAMPLES.glob("spark-*/*/commits"))
# The repartitioned samples' queries keep every key on purpose (no watermark, so a key's
# partition can be followed across the repartition): state_leak says so, rightly.
KEEPS_EVERY_KEY = {n for n in SAMPLE_NAMES if os.path.basename(n).startswith("repart-")}


@pytest.fixture(scope="module")
def built_db(built: Built, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Built]:
    db = tmp_path_factory.mktemp("db") / "built.duckdb"
    for cp in (built.unbounded, built.skew, built.retention):
        collect(db, cp)
    return db, built


@pytest.fixture(scope="module")
def samples_db(all_samples_db: SamplesDb) -> Path:
    """The session's database of every sample (collected once; the rules only read it)."""
    return Path(all_samples_db.path)


# ---- healthy: every rule OK ------------------------------------------------------------------


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_every_rule_is_ok_on_a_healthy_sample(samples_db: Path, name: str) -> None:
    found = judge(samples_db, str(SAMPLES / name))
    assert set(found) == set(RULES)
    bad = [
        (f.rule, f.status, f.finding)
        for fs in found.values()
        for f in fs
        if f.status not in ("OK", "SKIP")
    ]
    # Not judged: the rules on progress events where there are none, and the stall on a
    # sample cloned from git (its file times are the clone's, not Spark's).
    skipped = {f.rule for fs in found.values() for f in fs if f.status == "SKIP"}
    assert "stalled_query" in skipped
    assert skipped <= {"stalled_query", "stuck_batch", *PROGRESS_RULES}
    if name in KEEPS_EVERY_KEY:
        assert {(rule, status) for rule, status, _ in bad} == {("state_leak", "WARN")}
        return
    assert bad == []


def test_rules_about_files_are_ok_on_a_fresh_spark_checkpoint(built_db: tuple[Path, Built]) -> None:
    db, built = built_db
    found = judge(db, str(built.unbounded))
    for rule in ("stalled_query", "stuck_batch", "retention", "holes", "orphans", "schema_drift"):
        assert statuses(found, rule) == {"OK"}, found[rule]
    # Spark purged old versions (minBatchesToRetain=2): a purged prefix is not a hole.
    assert statuses(judge(db, str(built.retention)), "holes") == {"OK"}


# ---- one trip per rule -------------------------------------------------------------------------


def test_stalled_query(built_db: tuple[Path, Built]) -> None:
    db, built = built_db
    root = str(built.unbounded)
    assert statuses(judge(db, root, timedelta(seconds=30)), "stalled_query") == {"OK"}
    late = judge(db, root, timedelta(hours=2))["stalled_query"]
    assert [f.status for f in late] == ["WARN"]
    assert "no commit for 2.0h since batch 5" in late[0].finding
    assert "median trigger interval" in late[0].finding and late[0].hint
    # err_factor is off by default (a stopped query looks the same); a config turns it on.
    config = HealthConfig(stalled_query=StalledQueryConfig(err_factor=100.0))
    assert statuses(judge(db, root, timedelta(hours=2), config), "stalled_query") == {"ERR"}


def test_stuck_batch(built: Built, tmp_path: Path) -> None:
    cp = copy_checkpoint(built.unbounded, tmp_path / "cp")
    # The query died in batch 5: its offsets are written, its commit is not.
    os.remove(cp / "commits" / "5")
    os.remove(cp / "commits" / ".5.crc")
    db = tmp_path / "h.duckdb"
    root = collect(db, cp)
    started = os.stat(cp / "offsets" / "5").st_mtime - os.stat(cp / "commits" / "4").st_mtime
    soon = judge(db, root, timedelta(seconds=started + 30))["stuck_batch"]
    assert [f.status for f in soon] == ["OK"]
    assert "batch 5 started 30s ago" in soon[0].finding
    assert statuses(judge(db, root, timedelta(minutes=20)), "stuck_batch") == {"WARN"}
    hung = judge(db, root, timedelta(hours=2))["stuck_batch"]
    assert [f.status for f in hung] == ["ERR"]
    assert "batch 5 started 2.0h ago" in hung[0].finding


def test_unbounded_state_without_watermark(built_db: tuple[Path, Built]) -> None:
    db, built = built_db
    found = judge(db, str(built.unbounded))["unbounded_state"]
    assert [(f.status, f.operator_id, f.store_name) for f in found] == [("WARN", 0, "default")]
    assert "keys 200 -> 1,200 over versions 1..6, grew in 5 of 5 steps" in found[0].finding
    assert "0 removed vs 1,000 added" in found[0].finding
    assert "watermark" in found[0].hint


def test_partition_skew_on_a_hot_key(built_db: tuple[Path, Built]) -> None:
    db, built = built_db
    found = judge(db, str(built.skew))["partition_skew"]
    assert [f.status for f in found] == ["WARN"]
    assert "bytes to load" in found[0].finding and "the median" in found[0].finding
    # The balanced query of the same session is not skewed.
    assert statuses(judge(db, str(built.unbounded)), "partition_skew") == {"OK"}


def test_snapshot_lag_when_snapshots_are_held_back(built_db: tuple[Path, Built]) -> None:
    db, built = built_db
    root = str(built.unbounded)
    # Spark's default minDeltasForSnapshot (10): 6 versions without a snapshot are fine.
    assert statuses(judge(db, root), "snapshot_lag") == {"OK"}
    # The cluster normally runs 2; this query ran with 100, so no snapshot was ever written.
    config = HealthConfig(spark=SparkConfig(min_deltas_for_snapshot=2))
    found = judge(db, root, config=config)["snapshot_lag"]
    assert {f.status for f in found} == {"WARN"}
    assert "6 versions past its last snapshot" in found[0].finding
    assert "WARN above 4 = 2 x minDeltasForSnapshot 2 (config)" in found[0].finding
    assert "a restart replays 6 deltas" in found[0].finding
    strict = HealthConfig(
        spark=SparkConfig(min_deltas_for_snapshot=2), snapshot_lag=SnapshotLagConfig(err_factor=2.5)
    )
    assert "ERR" in statuses(judge(db, root, config=strict), "snapshot_lag")


def test_retention_with_few_batches_kept(built_db: tuple[Path, Built]) -> None:
    db, built = built_db
    found = judge(db, str(built.retention))["retention"]
    assert [f.status for f in found] == ["WARN"]
    assert "3 of the newest 5 committed batches can be read back" in found[0].finding
    assert "(minBatchesToRetain 100, Spark's default); readable: batches 2..4" in found[0].finding
    config = HealthConfig(spark=SparkConfig(min_batches_to_retain=2))
    assert statuses(judge(db, str(built.retention), config=config), "retention") == {"OK"}


def test_holes_err_when_a_delta_is_deleted(built: Built, tmp_path: Path) -> None:
    cp = copy_checkpoint(built.unbounded, tmp_path / "cp")
    os.remove(cp / "state" / "0" / "1" / "4.delta")
    db = tmp_path / "h.duckdb"
    found = judge(db, collect(db, cp))
    holes = found["holes"]
    assert [(f.status, f.partition_id) for f in holes] == [("ERR", 1)]
    assert "no file for versions 4" in holes[0].finding
    assert "versions 4..6 cannot be rebuilt" in holes[0].finding
    assert worst(f for fs in found.values() for f in fs) == "ERR"


def test_holes_warn_when_a_snapshot_bridges_them(tmp_path: Path) -> None:
    cp = copy_checkpoint(SAMPLES / "spark-4.3" / "agg-hdfs", tmp_path / "cp")
    os.remove(cp / "state" / "0" / "2" / "5.delta")  # 6.snapshot bridges the gap
    db = tmp_path / "h.duckdb"
    holes = judge(db, collect(db, cp))["holes"]
    assert [(f.status, f.partition_id) for f in holes] == [("WARN", 2)]
    assert "versions 5 cannot be rebuilt" in holes[0].finding
    assert "snapshot at 6 bridges it" in holes[0].finding


def test_orphans_temporary_file(built: Built, tmp_path: Path) -> None:
    cp = copy_checkpoint(built.unbounded, tmp_path / "cp")
    leftover = cp / "state" / "0" / "1" / ".7.delta.0b8e5c1e-2f7a-4b4e-9d43-3c1c2b0f8a11.tmp"
    shutil.copyfile(cp / "state" / "0" / "1" / "6.delta", leftover)
    db = tmp_path / "h.duckdb"
    root = collect(db, cp)
    # Just written: it may belong to a running batch.
    assert statuses(judge(db, root), "orphans") == {"OK"}
    age(leftover, 7200)
    collect(db, cp)
    found = judge(db, root)["orphans"]
    assert [f.status for f in found] == ["WARN"]
    assert "1 temporary files" in found[0].finding
    assert "state/0/1/.7.delta." in found[0].finding


def test_orphans_unreferenced_sst(tmp_path: Path) -> None:
    cp = copy_checkpoint(SAMPLES / "spark-4.3" / "agg-rocks", tmp_path / "cp")
    ssts = cp / "state" / "0" / "0" / "SSTs"
    stray = ssts / "000999-6f1c8a52-8a8e-4d43-a1de-3b3c71f1f0a4.sst"
    shutil.copyfile(next(ssts.glob("*.sst")), stray)
    # Older than the newest zip (not an upload in flight) and than the minimum age.
    age(
        stray, os.stat(stray).st_mtime - os.stat(cp / "state" / "0" / "0" / "1.zip").st_mtime + 3600
    )
    db = tmp_path / "h.duckdb"
    found = judge(db, collect(db, cp))["orphans"]
    assert [f.status for f in found] == ["WARN"]
    assert "1 unreferenced SSTs" in found[0].finding and stray.name in found[0].finding


def test_schema_drift(built_db: tuple[Path, Built], tmp_path: Path) -> None:
    _, built = built_db
    schema = Path("state", "0", "0", "_metadata", "schema")
    # Same types, other names (sum instead of count); then a string key instead of a bigint.
    cases = (
        (built.retention, "WARN", "value struct<count:bigint> -> struct<sum:bigint>"),
        (built.skew, "ERR", "key struct<k:bigint> -> struct<k:string>"),
    )
    for other, expected, change in cases:
        cp = copy_checkpoint(built.unbounded, tmp_path / expected)
        db = tmp_path / f"{expected}.duckdb"
        root = collect(db, cp)
        assert statuses(judge(db, root), "schema_drift") == {"OK"}
        shutil.copyfile(other / schema, cp / schema)  # another query's schema file
        collect(db, cp)
        found = judge(db, root)["schema_drift"]
        assert [f.status for f in found] == [expected]
        assert f"2 schemas seen: {change}" in found[0].finding
        assert "first seen after batch 5" in found[0].finding
