"""Charts stay small however long the history, and a spike is never downsampled away.

A history of 6,000 versions × 20 partitions (the shape of a long one, small enough for the
suite) written through the one writer, with one partition's keys jumping at one version.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from stateglass.app import figures, queries
from stateglass.app.queries.checkpoints import SPARKLINE_POINTS
from stateglass.collectors.db.writer import Database
from stateglass.collectors.db.writes import ScanWrite

CP = "/cps/long"
PARTITIONS, VERSIONS = 10, 6000
SPIKE_PARTITION, SPIKE_VERSION, SPIKE = 7, 3333, 10_000_000
STORE = (CP, 0, "default")
# Well under Streamlit's message limit, and the 5 MB a page.
MAX_FIGURE_BYTES = 1_000_000


def _keys(p: int, v: int) -> int:
    return SPIKE if (p, v) == (SPIKE_PARTITION, SPIKE_VERSION) else 1000 + 10 * p + v // 10


@pytest.fixture(scope="module")
def long_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("long") / "long.duckdb")
    now = dt.datetime(2026, 1, 1)
    # File times follow Spark's batch times, as on a live checkpoint (copied times hide durations).
    start = dt.datetime.fromtimestamp(1_700_000_000, dt.UTC).replace(tzinfo=None)
    batches = [
        {
            "checkpoint": CP,
            "batch_id": v - 1,
            "batch_timestamp_ms": 1_700_000_000_000 + v * 10_000,
            "watermark_ms": 0,
            "offsets_written_at": start + dt.timedelta(seconds=10 * v),
            "committed": True,
            "committed_at": start + dt.timedelta(seconds=10 * v + 1 + (v == SPIKE_VERSION) * 500),
            "next_watermark_ms": 0,
            "source_offsets": None,
            "provider": None,
            "codec": None,
            "shuffle_partitions": PARTITIONS,
            "state_format_versions": None,
        }
        for v in range(1, VERSIONS + 1)
    ]
    Database(path).record_scan(
        ScanWrite(
            root=CP,
            now=now,
            metadata_path=f"{CP}/metadata",
            checkpoint={"checkpoint": CP, "query_id": "q", "first_seen": now, "last_scan": now,
                        "pinned_conf": None},
            operators=[{"checkpoint": CP, "operator_id": 0, "store_name": "default",
                        "num_partitions": PARTITIONS, "provider": "hdfs"}],
            batch_offsets=batches,
            batch_commits=batches,
            state_versions=[
                {"checkpoint": CP, "operator_id": 0, "store_name": "default", "partition_id": p,
                 "version": v, "num_keys": _keys(p, v), "keys_added": 5, "keys_updated": 1,
                 "keys_removed": 2, "delta_bytes": 100 + p, "versions_since_snapshot": v % 10,
                 "replay_bytes": 1000}
                for v in range(1, VERSIONS + 1)
                for p in range(PARTITIONS)
            ],
        )
    )  # fmt: skip
    return path


def test_heatmap_cells_are_bucketed_and_keep_the_spike(long_db: str) -> None:
    cells = queries.partition_cells(long_db, *STORE)
    assert len(cells) <= PARTITIONS * queries.HEATMAP_COLUMNS
    assert cells.groupby("version")["partition_id"].nunique().eq(PARTITIONS).all()
    spiked = cells[cells["max_keys"] == SPIKE]
    assert spiked["partition_id"].tolist() == [SPIKE_PARTITION]
    # The newest bucket ends at the newest version, with its counts.
    assert cells["version"].max() == VERSIONS
    fig = figures.partition_heatmap(cells, metric="max_keys")
    assert len(fig.to_json()) < MAX_FIGURE_BYTES
    assert len(figures.keys_over_versions(cells).to_json()) < MAX_FIGURE_BYTES


def test_columns_of_whole_buckets_come_from_bucket_rows_and_keep_the_spike(long_db: str) -> None:
    # 6,000 versions in 10 columns: 720 versions each, two buckets of 360 (the default).
    grid = queries.cell_grid(long_db, *STORE, columns=10)
    assert (grid.width, grid.bucket, grid.buckets) == (720, 360, (0, VERSIONS // 360 - 1))
    cells = queries.partition_cells(long_db, *STORE, columns=10)
    whole = queries.partition_cells(long_db, *STORE, columns=10, bucket_rows=False)
    pd.testing.assert_frame_equal(cells, whole)
    assert cells[cells["max_keys"] == SPIKE]["partition_id"].tolist() == [SPIKE_PARTITION]
    assert cells["version"].max() == VERSIONS


def test_a_zoomed_range_comes_at_full_resolution(long_db: str) -> None:
    cells = queries.partition_cells(long_db, *STORE, SPIKE_VERSION - 50, SPIKE_VERSION + 50)
    assert len(cells) == 101 * PARTITIONS
    at = cells[(cells["version"] == SPIKE_VERSION) & (cells["partition_id"] == SPIKE_PARTITION)]
    assert at["num_keys"].tolist() == [SPIKE]


def test_store_series_are_downsampled_with_their_extremes(long_db: str) -> None:
    skew = queries.partition_skew(long_db, *STORE)
    growth = queries.state_growth(long_db, *STORE)
    for frame in (skew, growth):
        assert len(frame) <= queries.MAX_POINTS
        assert frame["version"].is_monotonic_increasing
        assert frame["version"].iloc[-1] == VERSIONS  # the newest version as it is
    assert skew["max_keys"].max() == SPIKE
    assert growth["num_keys"].max() == sum(_keys(p, SPIKE_VERSION) for p in range(PARTITIONS))
    assert "Downsampled" in queries.downsample_note(VERSIONS)
    assert queries.downsample_note(100) == ""


def test_overview_sparkline_and_query_charts_are_bounded(long_db: str) -> None:
    sizes = queries.size_history(long_db)
    assert len(sizes) <= SPARKLINE_POINTS
    chart = queries.batch_chart(long_db, CP)
    assert len(chart) <= queries.MAX_POINTS
    assert chart["duration_ms"].max() == 501_000  # the slow batch survives
    summary = queries.batch_summary(long_db, CP)
    assert (summary["batches"], summary["last_committed"], summary["pending"]) == (
        VERSIONS,
        VERSIONS - 1,
        0,
    )
    assert len(figures.batch_timeline(chart).to_json()) < MAX_FIGURE_BYTES
