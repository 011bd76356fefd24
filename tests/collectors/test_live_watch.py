"""``stateglass watch`` following a live PySpark query: every batch lands, promptly, and purges
keep their history.

The watcher runs as the real CLI in a child process; this test polls the database read-only
every 50 ms, as the dashboard would, and times each committed batch from its ``commits/N``
mtime to the moment its row is readable.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stateglass.collectors.db.read import read_query
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint

POLL_S = 0.05
# Generous on purpose: a functional bound below the debounce's 10 s cap (see below), on the
# median, which a loaded machine's few slow batches do not move.
MAX_MEDIAN_S = 8.0
# The test watches until the watcher has recorded ENOUGH_BATCHES batches and a file Spark
# purged (what the checks below are about); on a machine too slow for both, for RUN_S once
# MIN_BATCHES have landed, and never past MAX_RUN_S. Twelve: enough that the p95 below is
# not simply the slowest batch.
ENOUGH_BATCHES = 12
MIN_BATCHES = 4
RUN_S = 20.0
MAX_RUN_S = 90.0
# Small enough that Spark snapshots and purges old files while the test watches.
LIVE_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.minBatchesToRetain": "3",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "500ms",
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
    ),
}


@pytest.fixture
def live_conf(spark: Any) -> Iterator[None]:
    old = {k: spark.conf.get(k, None) for k in LIVE_CONF}
    for k, v in LIVE_CONF.items():
        spark.conf.set(k, v)
    yield
    for k, v in old.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def _committed(commits: Path) -> list[int]:
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())


def _db_batches(db_path: str) -> set[int]:
    if not os.path.exists(db_path):
        return set()
    rows = read_query(db_path, "SELECT batch_id FROM batches WHERE committed")
    return {r[0] for r in rows}


def _db_purged(db_path: str) -> int:
    return int(read_query(db_path, "SELECT count(*) FROM state_files WHERE purged")[0][0])


@pytest.mark.slow
@pytest.mark.spark
def test_watch_follows_a_live_query(
    spark: Any, live_conf: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyspark.sql import functions as F

    cp, db_path = tmp_path / "checkpoint", str(tmp_path / "sg.duckdb")
    commits = cp / "commits"
    query = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", 200)
        .load()
        .groupBy((F.col("value") % 500).alias("k"))
        .count()
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(cp))
        # Two batches a second: ENOUGH_BATCHES land in half the time, and a watcher that
        # waited for its debounce's cap would fall further behind, not less.
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    watcher: subprocess.Popen[bytes] | None = None
    log = tmp_path / "watch.log"
    seen_at: dict[int, float] = {}  # batch -> when this test first saw commits/N
    mtime: dict[int, float] = {}
    landed_at: dict[int, float] = {}  # batch -> when its row was first readable
    try:
        deadline = time.monotonic() + 30
        while not (commits.is_dir() and _committed(commits)) and time.monotonic() < deadline:
            time.sleep(POLL_S)
        assert commits.is_dir(), "the query committed no batch in 30 s"
        with open(log, "wb") as fh:
            watcher = subprocess.Popen(
                [sys.executable, "-m", "stateglass.app.cli", "watch", str(cp), "--db", db_path],
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=Path(__file__).resolve().parents[2],
            )
        while b"watching" not in log.read_bytes() and time.monotonic() < deadline:
            assert watcher.poll() is None, log.read_text()
            time.sleep(POLL_S)
        # Batches committed before the watcher listened were collected by its first scan.
        first = set(_committed(commits))
        start = time.monotonic()
        while time.monotonic() - start < MAX_RUN_S:
            now = time.time()
            for n in _committed(commits):
                if n not in seen_at and n not in first:
                    seen_at[n] = now
                    mtime[n] = (commits / str(n)).stat().st_mtime
            for n in _db_batches(db_path) - set(landed_at):
                landed_at[n] = time.time()
            landed = len(set(seen_at) & set(landed_at))
            if landed >= ENOUGH_BATCHES and _db_purged(db_path):
                break
            if landed >= MIN_BATCHES and time.monotonic() - start >= RUN_S:
                break
            time.sleep(POLL_S)
    finally:
        query.stop()
    try:
        # The last commit may land as the query stops: let the watcher catch up.
        final = set(_committed(commits))
        deadline = time.monotonic() + 15
        while not final <= set(landed_at) and time.monotonic() < deadline:
            for n in _db_batches(db_path) - set(landed_at):
                landed_at[n] = time.time()
            time.sleep(POLL_S)
        assert final <= set(landed_at)
        # Spark's maintenance may still delete files just after stop: one quiet period.
        time.sleep(2.0)
    finally:
        assert watcher is not None
        watcher.terminate()
        watcher.wait(timeout=10)

    measured = sorted(seen_at)
    # ENOUGH_BATCHES on an idle machine; a loaded one runs fewer, and every one must land.
    assert len(measured) >= MIN_BATCHES, f"only {len(measured)} batches while watching"
    # Spark keeps 3 batches: a watcher a loaded machine holds back more than that finds a
    # batch's files purged, and has nothing left to record. Every batch still there at the
    # end landed (above); one that did not must be gone, and they must stay few.
    missed = [n for n in measured if n not in landed_at]
    assert not [n for n in missed if (commits / str(n)).exists()], f"never appeared: {missed}"
    assert len(missed) * 4 <= len(measured), f"batches {missed} purged before they were seen"
    latencies = [landed_at[n] - mtime[n] for n in measured if n in landed_at]
    latencies.sort()
    p50 = statistics.median(latencies)
    p95 = latencies[min(len(latencies) - 1, round(0.95 * (len(latencies) - 1)))]
    # How late this test's own 50 ms poll of commits/ saw the file: the machine's load.
    seen_lag = statistics.median(seen_at[n] - mtime[n] for n in measured)
    with capsys.disabled():
        print(
            f"\nwatch latency over {len(latencies)} batches: p50 {p50 * 1000:.0f} ms, "
            f"p95 {p95 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms "
            f"(commits/N seen by the test's poll after {seen_lag * 1000:.0f} ms, median)"
        )
    # The 1 s p95 target is measured and recorded by benchmarks (docs/benchmarks.md), not
    # asserted here: a shared CI machine must not fail the build on timing. What this guards
    # is behaviour: a watcher that waited for its debounce's 10 s cap, as an earlier one did
    # with a batch every second, would take 10 s or more for most batches: the median.
    assert p50 < MAX_MEDIAN_S, f"watch reacts to commits too late: median {p50:.2f} s"

    # Files Spark purged keep their rows, marked purged, and their versions' history stays.
    # The watcher marks a purge at the next commit's scan (store directories are not watched);
    # Spark's maintenance runs on its own timer and may delete files only after the last
    # commit, so one more scan, as the next commit would run, settles what was deleted.
    known = [r[0] for r in read_query(db_path, "SELECT path FROM state_files")]
    gone = {path for path in known if not os.path.exists(path)}
    scan_checkpoint(Database(db_path), str(cp))
    rows = read_query(
        db_path,
        "SELECT path, partition_id, version, kind, purged FROM state_files ORDER BY path",
    )
    purged = [r for r in rows if r[4]]
    # Every file Spark deleted before that scan is marked. Spark's maintenance runs on its
    # own timer: on a slow machine it may not have deleted anything yet.
    assert gone <= {r[0] for r in purged}
    if not purged:
        with capsys.disabled():
            print("\nSpark's maintenance purged nothing during this run: purge checks idle")
    # A purge is seen by the scan of the next commit (store directories are not watched, see
    # docs/architecture.md): what Spark deletes after the last commit is not marked yet.
    for path, _, _, _, is_purged in rows:
        if is_purged:
            assert not os.path.exists(path), path
    versions = {
        (p, v) for p, v in read_query(db_path, "SELECT partition_id, version FROM state_versions")
    }
    for _, partition, version, kind, _ in purged:
        if kind == "delta":
            assert (partition, version) in versions
    # Every committed batch is a row; the store's history reaches back past the purge.
    assert set(_committed(commits)) <= _db_batches(db_path)
    assert min(v for _, v in versions) == 1
