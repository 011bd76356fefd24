"""The Query page's batch-duration chart on a checkpoint whose file times mean nothing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd

from stateglass.app import figures, queries
from stateglass.collectors.db.writer import Database
from stateglass.collectors.scan.scanner import scan_checkpoint
from tests.conftest import SAMPLES, with_spark_file_times


def test_batch_duration_without_durations_says_why(tmp_path: Path) -> None:
    cp = tmp_path / "agg-hdfs"
    shutil.copytree(SAMPLES / "spark-4.3" / "agg-hdfs", cp)
    # A clone's times: every commit older than its offsets, so no duration is known.
    for name in os.listdir(cp / "commits"):
        os.utime(cp / "commits" / name, (1_000_000, 1_000_000))
    db = str(tmp_path / "db.duckdb")
    root = scan_checkpoint(Database(db), str(cp)).checkpoint
    batches = queries.batches(db, root)
    assert len(batches) == 12 and batches["duration_ms"].isna().all()
    fig = figures.batch_timeline(batches)
    notes = [a.text for a in fig.layout.annotations]
    assert len(notes) == 1 and "No duration known" in notes[0]
    assert not fig.data  # no empty axes: the note replaces the chart
    # Offsets at Spark's batch times and commits a second later, as a running query writes
    # them: drawn.
    with_spark_file_times(cp)
    fresh = str(tmp_path / "fresh.duckdb")
    root = scan_checkpoint(Database(fresh), str(cp)).checkpoint
    batches = queries.batches(fresh, root)
    assert list(batches["duration_ms"]) == [1000] * 12
    drawn = figures.batch_timeline(batches)
    assert drawn.data and not drawn.layout.annotations


def test_overview_times_the_last_batch_by_spark_clock(tmp_path: Path) -> None:
    cp = tmp_path / "agg-hdfs"
    shutil.copytree(SAMPLES / "spark-4.3" / "agg-hdfs", cp)
    for name in os.listdir(cp / "commits"):
        os.utime(cp / "commits" / name, (1_000_000, 1_000_000))  # a clone's meaningless times
    db = str(tmp_path / "db.duckdb")
    root = scan_checkpoint(Database(db), str(cp)).checkpoint
    row = queries.checkpoint_overview(db).set_index("checkpoint").loc[root]
    # offsets/11, second line: {"batchWatermarkMs":…,"batchTimestampMs":…,"conf":…}
    meta = json.loads((cp / "offsets" / "11").read_text().splitlines()[1])
    expected = pd.Timestamp(meta["batchTimestampMs"], unit="ms")
    assert row["last_trigger_at"] == expected
    assert row["last_commit_at"] != expected
