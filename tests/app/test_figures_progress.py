"""The progress figures: a note on how to add a progress source when there is none, and axis
titles and hovers on real queries' events."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest

from stateglass.app import figures, queries
from stateglass.app.figures.progress import NO_PROGRESS
from tests import progress_queries as pq
from tests.progress_fixtures import collect_run

BUILDERS: list[Callable[[pd.DataFrame], go.Figure]] = [
    figures.progress_rates,
    lambda df: figures.duration_breakdown(df, queries.DURATION_PARTS),
    figures.watermark_and_late_rows,
    figures.memory_vs_keys,
    figures.commit_time,
    figures.rocksdb_internals,
    figures.snapshot_uploads,
    figures.rate_sparkline,
]


@pytest.mark.parametrize("build", BUILDERS)
def test_an_empty_frame_says_how_to_add_progress(build: Callable[..., go.Figure]) -> None:
    fig = build(pd.DataFrame())
    assert not fig.data
    note = fig.layout.annotations[0].text
    assert note == "no progress" or NO_PROGRESS in note


@pytest.mark.spark
def test_figures_on_a_real_rocksdb_query(tmp_path: Path, compacting_run: pq.Ran) -> None:
    db = str(tmp_path / "f.duckdb")
    root = collect_run(db, compacting_run)
    events = queries.progress(db, root)
    state = queries.progress_state(db, root, 0)
    uploads = queries.snapshot_uploads(db, root, 0, "default")
    assert len(events) == len(state) == len(compacting_run.events)
    # Spark 4.3 reports SnapshotLastUploaded for both partitions of the store.
    assert sorted(uploads["partition_id"]) == [0, 1]
    for fig in (
        figures.progress_rates(events),
        figures.duration_breakdown(events, queries.DURATION_PARTS),
        figures.memory_vs_keys(state),
        figures.commit_time(state),
        figures.rocksdb_internals(state),
        figures.snapshot_uploads(uploads),
    ):
        assert fig.data, fig.layout.title.text
        assert all("batch" in t.hovertemplate or "partition" in t.hovertemplate for t in fig.data)
    stacked = figures.duration_breakdown(events, queries.DURATION_PARTS)
    total = sum(pd.Series(t.y).fillna(0).sum() for t in stacked.data)
    assert total == pytest.approx(
        events["duration_trigger_execution_ms"].sum() / _divisor(stacked), rel=0.01
    )


def _divisor(fig: go.Figure) -> float:
    unit = fig.layout.yaxis.title.text.split("(")[1].rstrip(")")
    return {"ms": 1.0, "s": 1000.0, "min": 60_000.0}[unit]


@pytest.mark.spark
def test_rates_mark_the_batches_that_fell_behind(tmp_path: Path, behind_run: pq.Ran) -> None:
    db = str(tmp_path / "f.duckdb")
    root = collect_run(db, behind_run)
    fig = figures.progress_rates(queries.progress(db, root))
    marked = [t for t in fig.data if t.name == "fell behind (processed < input)"]
    want = [
        e["batchId"]
        for e in behind_run.events
        if e["numInputRows"] > 0 and e["processedRowsPerSecond"] < e["inputRowsPerSecond"]
    ]
    assert want and list(marked[0].x) == want
