"""Figure builders: axis titles with units, hovers naming partition/version/batch, empty frames."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from stateglass.app import figures, queries
from stateglass.app.figures._common import time_unit
from stateglass.app.figures.state import _grid
from tests.conftest import SAMPLES

ROCKS = str(SAMPLES / "spark-4.3" / "agg-rocks")
HDFS = str(SAMPLES / "spark-4.3" / "agg-hdfs")
STORE = (0, "default")

Builder = Callable[[str], go.Figure]

# builder name -> (figure from the samples database, words every hover must name)
CASES: dict[str, tuple[Builder, tuple[str, ...]]] = {
    "batch_timeline": (lambda db: figures.batch_timeline(queries.batches(db, HDFS)), ("batch",)),
    "trigger_intervals": (
        lambda db: figures.trigger_intervals(queries.batches(db, HDFS)),
        ("batch",),
    ),
    "watermark_delay": (
        lambda db: figures.watermark_delay(queries.batches(db, HDFS)),
        ("batch",),
    ),
    "input_per_batch": (
        lambda db: figures.input_per_batch(queries.input_per_batch(db, HDFS)),
        ("batch",),
    ),
    "keys_over_versions": (
        lambda db: figures.keys_over_versions(queries.state_versions(db, HDFS, *STORE)),
        ("version", "batch"),
    ),
    "bytes_by_kind": (
        lambda db: figures.bytes_by_kind(queries.bytes_by_kind(db, ROCKS, *STORE)),
        ("version", "batch"),
    ),
    "heatmap_keys": (
        lambda db: figures.partition_heatmap(queries.state_versions(db, HDFS, *STORE)),
        ("partition", "version", "batch"),
    ),
    "heatmap_bytes": (
        lambda db: figures.partition_heatmap(queries.state_versions(db, HDFS, *STORE), "bytes"),
        ("partition", "version", "batch"),
    ),
    "skew_over_time": (
        lambda db: figures.skew_over_time(queries.partition_skew(db, HDFS, *STORE)),
        ("version", "batch"),
    ),
    "snapshot_lag": (
        lambda db: figures.snapshot_lag(queries.snapshot_lag(db, HDFS, *STORE)),
        ("partition", "version", "batch"),
    ),
    "key_changes": (
        lambda db: figures.key_changes(queries.state_growth(db, HDFS, *STORE)),
        ("version", "batch"),
    ),
    "sst_upload_reuse": (
        lambda db: figures.sst_upload_reuse(queries.sst_reuse(db, ROCKS, *STORE)),
        ("version", "batch"),
    ),
    "size_sparkline": (
        lambda db: figures.size_sparkline(queries.size_history(db), "num_keys"),
        ("version", "batch"),
    ),
}

EMPTY_BUILDERS = [
    figures.batch_timeline,
    figures.trigger_intervals,
    figures.watermark_delay,
    figures.input_per_batch,
    figures.keys_over_versions,
    figures.bytes_by_kind,
    figures.partition_heatmap,
    figures.skew_over_time,
    figures.snapshot_lag,
    figures.key_changes,
    figures.sst_upload_reuse,
    figures.size_sparkline,
]

UNITS = ("(", "keys", "partition", "time", "bytes")


def _axis_titles(fig: go.Figure) -> list[str]:
    layout = fig.to_dict()["layout"]
    return [
        (axis.get("title") or {}).get("text") or ""
        for name, axis in layout.items()
        if name.startswith(("xaxis", "yaxis"))
    ]


@pytest.mark.parametrize("name", list(CASES))
def test_builder_has_axis_titles_and_hovers(samples_db: str, name: str) -> None:
    build, words = CASES[name]
    fig = build(samples_db)
    if name == "batch_timeline" and not fig.data:
        # A fresh clone's file times give no durations: a note replaces the chart (both
        # cases: tests/app/test_query_page.py).
        assert "No duration known" in fig.layout.annotations[0].text
        return
    assert fig.data, f"{name}: no traces on the samples"
    assert not fig.layout.annotations or name in ("keys_over_versions", "skew_over_time")
    titles = [t for t in _axis_titles(fig) if t]
    # Both axes of every panel are titled, and each y title carries a unit or what it counts.
    assert len(titles) >= 2, titles
    assert all(any(u in t for u in UNITS) or "id" in t or "version" in t for t in titles), titles
    for trace in fig.data:
        template = trace.hovertemplate or ""
        for word in words:
            assert word in template, f"{name}: hover {template!r} does not name {word}"


@pytest.mark.parametrize("build", EMPTY_BUILDERS, ids=lambda b: b.__name__)
def test_builder_on_an_empty_frame_says_no_data(build: Callable[..., go.Figure]) -> None:
    fig = build(pd.DataFrame())
    assert not fig.data
    assert fig.layout.annotations and fig.layout.annotations[0].text
    assert fig.layout.title.text


def test_keys_over_versions_totals_and_partitions() -> None:
    rows = pd.DataFrame(
        {
            "partition_id": [0, 0, 1, 1, 2],
            "version": [1, 2, 1, 2, 2],
            "num_keys": [3, 5, 10, 7, 1],
        }
    )
    fig = figures.keys_over_versions(rows)
    total = fig.data[0]
    # Partition 2 is unknown at version 1: no total there (a gap, not 13 then 13).
    # Drawn over batch ids, as Spark's UI has them; the state version (batch + 1) on hover.
    assert list(total.x) == [0, 1] and np.isnan(total.y[0]) and total.y[1] == 13
    assert list(total.customdata) == [1, 2]
    assert "batch %{x} (state version %{customdata})" in total.hovertemplate
    names = [t.name for t in fig.data[1:]]
    assert names == ["partition 0", "partition 1", "partition 2"]
    assert np.isnan(fig.data[3].y[0]) and fig.data[3].y[1] == 1


def test_keys_over_versions_many_partitions_draws_top_and_band() -> None:
    rows = pd.DataFrame(
        [(p, v, p * 10 + v) for p in range(30) for v in range(1, 6)],
        columns=["partition_id", "version", "num_keys"],
    )
    fig = figures.keys_over_versions(rows, max_lines=4)
    lines = [t.name for t in fig.data if (t.name or "").startswith("partition ")]
    assert lines == [f"partition {p}" for p in (26, 27, 28, 29)]
    band = [t for t in fig.data if "min–max" in (t.name or "")]
    assert len(band) == 2
    assert list(band[0].y) == [291, 292, 293, 294, 295]  # max: partition 29
    assert list(band[1].y) == [1, 2, 3, 4, 5]  # min: partition 0


def test_heatmap_cells_match_the_rows() -> None:
    rows = pd.DataFrame(
        {"partition_id": [0, 1, 1], "version": [5, 5, 7], "num_keys": [2, 4, 8]},
    )
    (heat,) = figures.partition_heatmap(rows).data
    assert list(heat.x) == [4, 6] and list(heat.y) == [0, 1]
    z = np.asarray(heat.z, dtype="float64")
    assert z[0, 0] == 2 and np.isnan(z[0, 1]) and z[1, 0] == 4 and z[1, 1] == 8
    assert np.asarray(heat.customdata).tolist() == [[5, 7], [5, 7]]


def test_grid_sums_duplicates_like_pandas() -> None:
    rng = np.random.default_rng(7)
    rows = pd.DataFrame(
        {
            "p": rng.integers(0, 5, 200),
            "v": rng.integers(0, 9, 200),
            "x": rng.integers(0, 100, 200).astype("float64"),
        }
    )
    ours = _grid(rows, "x", "p", "v")
    theirs = rows.pivot_table(index="p", columns="v", values="x", aggfunc="sum")
    assert np.allclose(ours.to_numpy(), theirs.to_numpy(), equal_nan=True)
    assert list(ours.index) == list(theirs.index) and list(ours.columns) == list(theirs.columns)


def test_batch_timeline_marks_pending_batches() -> None:
    rows = pd.DataFrame(
        {
            "batch_id": [0, 1, 2],
            "committed": [True, True, False],
            "duration_ms": [1500, 2500, None],
            "batch_time": pd.to_datetime(["2024-01-01", "2024-01-01", "2024-01-01"]),
        }
    )
    done, pending = figures.batch_timeline(rows).data
    assert list(done.x) == [0, 1] and list(done.y) == [1500, 2500]  # < 3 s: in ms
    assert list(pending.x) == [2] and "pending" in pending.name


@pytest.mark.parametrize(
    ("max_ms", "unit"),
    [(500, "ms"), (4_000, "s"), (600_000, "min"), (4 * 3_600_000, "h"), (4 * 86_400_000, "d")],
)
def test_time_unit(max_ms: float, unit: str) -> None:
    assert time_unit(max_ms)[1] == unit
