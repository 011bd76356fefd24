"""``watch`` scales with the number of store directories: a handful of inotify watches per
checkpoint, an idle process between batches, and every commit recorded.

The checkpoint is a real stream-stream join (four stores per partition) written by PySpark
with many shuffle partitions. The issue's 2,000 partitions (10,000 directories) take Spark
minutes per batch on a 2-core CI machine, so the test uses ``PARTITIONS`` and asserts what
makes the size irrelevant — the watcher's inotify watches do not grow with the directories —
while ``benchmarks/bench_watch.py`` measures the full 2,000 × 4 checkpoint
(docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collectors.db import read_query

PARTITIONS = 32
IDLE_S = 3.0
MAX_IDLE_CPU = 0.05
ROOT = Path(__file__).resolve().parents[2]


def write_side(src: Path, side: str, batch: int) -> None:
    rng = random.Random(f"{side}-{batch}")
    folder = src / side
    folder.mkdir(parents=True, exist_ok=True)
    rows = "".join(
        json.dumps({"k": rng.randrange(5000), "v": i}) + "\n" for i in range(PARTITIONS * 4)
    )
    staging = folder / f".part-{batch}.tmp"
    staging.write_text(rows)
    staging.rename(folder / f"part-{batch:03d}.json")


def run_join(spark: Any, src: Path, cp: Path) -> None:
    """One run of the join over every new file (one batch per file), then stop."""
    from pyspark.sql import functions as F

    def side(name: str) -> Any:
        return (
            spark.readStream.schema("k LONG, v LONG")
            .option("maxFilesPerTrigger", 1)
            .json(str(src / name))
        )

    left = side("left").select(F.col("k").alias("lk"), F.col("v").alias("lv"))
    right = side("right").select(F.col("k").alias("rk"), F.col("v").alias("rv"))
    query = (
        left.join(right, F.col("lk") == F.col("rk"))
        .writeStream.format("noop")
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    query.stop()


@pytest.fixture
def join_conf(spark: Any) -> Iterator[None]:
    conf = {
        "spark.sql.shuffle.partitions": str(PARTITIONS),
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        ),
    }
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    yield
    for k, v in old.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(pid: int, seconds: float = IDLE_S) -> float:
    """Share of one core the process used over ``seconds``."""
    before, start = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - start)


def inotify_watches(pid: int) -> int:
    """inotify watches the process holds (one ``inotify wd:`` line each in its fdinfo)."""
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
                total += sum(line.startswith("inotify wd:") for line in fh)
        except OSError:
            continue
    return total


def committed(db: str) -> set[int]:
    try:
        return {r[0] for r in read_query(db, "SELECT batch_id FROM batches WHERE committed")}
    except Exception:
        return set()  # not created yet, or the writer holds it for a moment


@pytest.mark.slow
@pytest.mark.spark
def test_watch_stays_idle_and_records_every_commit(
    spark: Any, join_conf: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, cp, db = tmp_path / "src", tmp_path / "cp", str(tmp_path / "sg.duckdb")
    for side in ("left", "right"):
        write_side(src, side, 0)
    run_join(spark, src, cp)
    dirs = sum(1 for _ in os.walk(cp))
    assert dirs > PARTITIONS * 5  # a partition directory and four store directories each
    log = tmp_path / "watch.log"
    with open(log, "wb") as fh:
        watcher = subprocess.Popen(
            [sys.executable, "-m", "app.cli", "watch", str(cp), "--db", db, "--debounce", "0.2"],
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        deadline = time.monotonic() + 120
        while b"watching" not in log.read_bytes() and time.monotonic() < deadline:
            assert watcher.poll() is None, log.read_text()
            time.sleep(0.05)
        assert committed(db) == {0}
        # The root, commits/ and offsets/: not one per store directory.
        assert inotify_watches(watcher.pid) == 3
        first_idle = idle_cpu(watcher.pid)
        for batch in (1, 2):
            for side in ("left", "right"):
                write_side(src, side, batch)
        run_join(spark, src, cp)
        while committed(db) != {0, 1, 2} and time.monotonic() < deadline + 120:
            time.sleep(0.1)
        assert committed(db) == {0, 1, 2}
        time.sleep(1.0)  # the scan of the last commit ends
        second_idle = idle_cpu(watcher.pid)
        assert inotify_watches(watcher.pid) == 3
    finally:
        watcher.terminate()
        watcher.wait(10)
    with capsys.disabled():
        print(
            f"\nwatch on a {PARTITIONS}-partition join ({dirs} directories): idle CPU "
            f"{first_idle:.1%} after the first scan, {second_idle:.1%} after two batches"
        )
    assert first_idle < MAX_IDLE_CPU and second_idle < MAX_IDLE_CPU
    # Quiet by default: the first collect's lines, no line per batch.
    lines = [ln for ln in log.read_text().splitlines() if ln.strip()]
    assert len(lines) <= 3, lines
