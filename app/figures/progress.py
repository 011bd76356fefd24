"""Figures of Spark's progress events: rates, where a batch's time goes, the watermark and late
rows (Query page); memory, commit time, RocksDB internals and snapshot uploads (State page).

Every builder takes a frame of ``stateglass.app.queries.progress``, ``progress_state`` or
``snapshot_uploads`` and returns a Plotly figure; an empty frame gives a titled note that says
how to add a progress source.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from stateglass.app.figures._common import (
    BYTES_TICKS,
    empty_figure,
    finish,
    is_empty,
    numeric,
    time_unit,
)

NO_PROGRESS = "No progress events: add --progress PATH (an event-log or listener directory)."
PART_COLORS = {
    "latestOffset": "#72B7B2",
    "getOffset": "#72B7B2",
    "getBatch": "#54A24B",
    "queryPlanning": "#EECA3B",
    "addBatch": "#4C78A8",
    "walCommit": "#F58518",
    "commitOffsets": "#B279A2",
    "other": "#BAB0AC",
}


def rates(progress: pd.DataFrame) -> go.Figure:
    """Input rate against processing rate per batch; batches processed slower than their
    input arrived (the query fell behind) get a red marker.

    Columns: ``batch_id``, ``input_rows_per_second``, ``processed_rows_per_second``,
    ``num_input_rows``.
    """
    title = "Input rate against processing rate"
    cols = ["batch_id", "input_rows_per_second", "processed_rows_per_second"]
    if is_empty(progress, cols):
        return empty_figure(title, NO_PROGRESS)
    frame = progress.sort_values("batch_id")
    inp = numeric(frame, "input_rows_per_second")
    done = numeric(frame, "processed_rows_per_second")
    rows = numeric(frame, "num_input_rows")
    fig = go.Figure()
    fig.add_scatter(
        x=frame["batch_id"],
        y=inp,
        name="input rate",
        mode="lines+markers",
        line={"color": "#F58518"},
        customdata=rows,
        hovertemplate="batch %{x}<br>input %{y:,.1f} rows/s<br>%{customdata:,} rows<extra></extra>",
    )
    fig.add_scatter(
        x=frame["batch_id"],
        y=done,
        name="processing rate",
        mode="lines+markers",
        line={"color": "#4C78A8"},
        hovertemplate="batch %{x}<br>processed %{y:,.1f} rows/s<extra></extra>",
    )
    behind = (rows > 0) & (done < inp)
    if behind.any():
        fig.add_scatter(
            x=frame["batch_id"][behind],
            y=done[behind],
            name="fell behind (processed < input)",
            mode="markers",
            marker={"symbol": "x", "size": 11, "color": "#E45756"},
            customdata=(done[behind] / inp[behind]),
            hovertemplate="batch %{x}: processed at %{customdata:.2f}x the input rate"
            "<extra></extra>",
        )
    return finish(fig, title, "batch id", "rows per second")


def duration_breakdown(progress: pd.DataFrame, parts: dict[str, str]) -> go.Figure:
    """Where each batch's time goes: Spark's ``durationMs`` parts stacked per batch, and
    "other" for the rest of ``triggerExecution``.

    Columns: ``batch_id``, ``duration_trigger_execution_ms`` and the columns of ``parts``
    (column -> Spark's name, as ``stateglass.app.queries.DURATION_PARTS``).
    """
    title = "Batch duration breakdown (Spark's durationMs)"
    if is_empty(progress, ["batch_id", "duration_trigger_execution_ms"]):
        return empty_figure(title, NO_PROGRESS)
    frame = progress.sort_values("batch_id")
    total = numeric(frame, "duration_trigger_execution_ms")
    div, unit = time_unit(float(total.max()))
    fig = go.Figure()
    known = pd.Series(0.0, index=frame.index)
    for column, name in parts.items():
        if column not in frame or frame[column].isna().all():
            continue
        values = numeric(frame, column).fillna(0.0)
        known += values
        fig.add_bar(
            x=frame["batch_id"],
            y=values / div,
            name=name,
            marker_color=PART_COLORS.get(name),
            hovertemplate=f"batch %{{x}}<br>{name} %{{y:.3~f}} {unit}<extra></extra>",
        )
    fig.add_bar(
        x=frame["batch_id"],
        y=(total - known).clip(lower=0) / div,
        name="other",
        marker_color=PART_COLORS["other"],
        hovertemplate=f"batch %{{x}}<br>rest of triggerExecution %{{y:.3~f}} {unit}<extra></extra>",
    )
    fig.update_layout(barmode="stack")
    return finish(fig, title, "batch id", f"time ({unit})")


def watermark_and_late_rows(progress: pd.DataFrame) -> go.Figure:
    """The event-time watermark each batch reported, and the rows dropped as late.

    Columns: ``batch_id``, ``event_time_watermark``, ``rows_dropped_by_watermark``.
    """
    title = "Watermark and rows dropped as late"
    if is_empty(progress, ["batch_id"]):
        return empty_figure(title, NO_PROGRESS)
    frame = progress.sort_values("batch_id")
    marks = frame[frame["event_time_watermark"].notna()]
    marks = marks[pd.to_datetime(marks["event_time_watermark"]) > pd.Timestamp(0)]
    dropped = numeric(frame, "rows_dropped_by_watermark").fillna(0)
    if marks.empty and not (dropped > 0).any():
        return empty_figure(title, "No watermark in these progress events, and no late rows.")
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1)
    fig.add_scatter(
        x=marks["batch_id"],
        y=marks["event_time_watermark"],
        name="watermark",
        mode="lines+markers",
        line={"color": "#F58518"},
        hovertemplate="batch %{x}<br>watermark %{y}<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_bar(
        x=frame["batch_id"],
        y=dropped,
        name="rows dropped as late",
        marker_color="#E45756",
        hovertemplate="batch %{x}<br>%{y:,} rows dropped by the watermark<extra></extra>",
        row=2,
        col=1,
    )
    finish(fig, title, "", "", height=440)
    fig.update_xaxes(title_text="batch id", row=2, col=1)
    fig.update_yaxes(title_text="watermark (UTC)", rangemode="normal", row=1, col=1)
    fig.update_yaxes(title_text="rows dropped", row=2, col=1)
    return fig


def memory_vs_keys(state: pd.DataFrame) -> go.Figure:
    """State memory (Spark's ``memoryUsedBytes``) against keys (``numRowsTotal``) per batch.

    Columns: ``batch_id``, ``memory_used_bytes``, ``num_rows_total``.
    """
    title = "State memory against keys"
    if is_empty(state, ["batch_id", "memory_used_bytes"]):
        return empty_figure(title, NO_PROGRESS)
    frame = state.sort_values("batch_id")
    memory = numeric(frame, "memory_used_bytes")
    keys = numeric(frame, "num_rows_total")
    per_key = (memory / keys.where(keys > 0)).round(1)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_scatter(
        x=frame["batch_id"],
        y=memory,
        name="memory used",
        mode="lines+markers",
        line={"color": "#E45756"},
        customdata=per_key,
        hovertemplate="batch %{x}<br>%{y:,} bytes<br>%{customdata:,} bytes per key<extra></extra>",
        secondary_y=False,
    )
    fig.add_scatter(
        x=frame["batch_id"],
        y=keys,
        name="keys (numRowsTotal)",
        mode="lines+markers",
        line={"color": "#4C78A8", "dash": "dot"},
        hovertemplate="batch %{x}<br>%{y:,} keys<extra></extra>",
        secondary_y=True,
    )
    finish(fig, title, "batch id", "")
    fig.update_yaxes(title_text="memory used (bytes)", secondary_y=False, **BYTES_TICKS)
    fig.update_yaxes(title_text="keys", secondary_y=True, rangemode="tozero")
    return fig


def commit_time(state: pd.DataFrame) -> go.Figure:
    """Time the state store spent per batch: commit, and applying updates and removals
    (each summed over the store instances, as Spark reports it).

    Columns: ``batch_id``, ``commit_time_ms``, ``all_updates_time_ms``,
    ``all_removals_time_ms``.
    """
    title = "State store time per batch (summed over partitions)"
    if is_empty(state, ["batch_id", "commit_time_ms"]):
        return empty_figure(title, NO_PROGRESS)
    frame = state.sort_values("batch_id")
    series = {
        "commit": "commit_time_ms",
        "updates": "all_updates_time_ms",
        "removals": "all_removals_time_ms",
    }
    top = max(float(numeric(frame, c).max()) for c in series.values() if c in frame)
    div, unit = time_unit(top if top == top else 0.0)
    fig = go.Figure()
    for (name, column), color in zip(
        series.items(), ("#E45756", "#4C78A8", "#72B7B2"), strict=True
    ):
        if column not in frame or frame[column].isna().all():
            continue
        fig.add_scatter(
            x=frame["batch_id"],
            y=numeric(frame, column) / div,
            name=name,
            mode="lines+markers",
            line={"color": color, "width": 3 if name == "commit" else 1.5},
            hovertemplate=f"batch %{{x}}<br>{name} %{{y:.3~f}} {unit}<extra></extra>",
        )
    return finish(fig, title, "batch id", f"time ({unit})")


def rocksdb_internals(state: pd.DataFrame) -> go.Figure:
    """RocksDB's own counters per batch: files and bytes copied to the checkpoint against
    files reused; commit latencies (flush, compaction, checkpoint, pause, write stall); and
    the block-cache hit ratio.

    Columns: ``batch_id`` and the ``rocksdb_*`` columns of
    ``stateglass.app.queries.ROCKSDB_METRICS``.
    """
    title = "RocksDB internals"
    if is_empty(state, ["batch_id"]) or all(
        c not in state or state[c].isna().all()
        for c in ("rocksdb_files_copied", "rocksdb_flush_latency_ms", "rocksdb_block_cache_hits")
    ):
        return empty_figure(
            title, "No RocksDB metrics: this store is not RocksDB, or " + NO_PROGRESS
        )
    frame = state.sort_values("batch_id")
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.07,
        subplot_titles=("files to the checkpoint", "commit latencies", "block cache"),
    )
    x = frame["batch_id"]
    for column, name, color in (
        ("rocksdb_files_copied", "files copied", "#E45756"),
        ("rocksdb_files_reused", "files reused", "#54A24B"),
    ):
        fig.add_bar(
            x=x,
            y=numeric(frame, column),
            name=name,
            marker_color=color,
            customdata=numeric(frame, "rocksdb_bytes_copied"),
            hovertemplate=f"batch %{{x}}<br>{name} %{{y:,}}<br>%{{customdata:,}} bytes copied"
            "<extra></extra>",
            row=1,
            col=1,
        )
    _add_latencies(fig, frame)
    _add_block_cache(fig, frame)
    finish(fig, title, "", "", height=620)
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text="batch id", row=3, col=1)
    fig.update_yaxes(title_text="files", row=1, col=1)
    fig.update_yaxes(title_text="ms (summed over partitions)", row=2, col=1)
    fig.update_yaxes(title_text="hit ratio", tickformat=".0%", range=[0, 1.05], row=3, col=1)
    return fig


# The commit steps RocksDB times, drawn in this order when the events report them.
ROCKSDB_LATENCIES = (
    ("rocksdb_flush_latency_ms", "flush"),
    ("rocksdb_compact_latency_ms", "compaction"),
    ("rocksdb_checkpoint_latency_ms", "checkpoint"),
    ("rocksdb_pause_latency_ms", "pause"),
    ("rocksdb_file_sync_latency_ms", "file sync"),
    ("rocksdb_write_stall_latency_ms", "write stall"),
)


def _add_latencies(fig: go.Figure, frame: pd.DataFrame) -> None:
    """One line per commit step the events report, in the middle panel."""
    for column, name in ROCKSDB_LATENCIES:
        if column not in frame or frame[column].isna().all():
            continue
        fig.add_scatter(
            x=frame["batch_id"],
            y=numeric(frame, column),
            name=name,
            mode="lines+markers",
            hovertemplate=f"batch %{{x}}<br>{name} %{{y:,}} ms<extra></extra>",
            row=2,
            col=1,
        )


def _add_block_cache(fig: go.Figure, frame: pd.DataFrame) -> None:
    """The block-cache hit ratio, hits and misses in the hover, in the bottom panel."""
    hits = numeric(frame, "rocksdb_block_cache_hits")
    misses = numeric(frame, "rocksdb_block_cache_misses")
    ratio = hits / (hits + misses).where(hits + misses > 0)
    fig.add_scatter(
        x=frame["batch_id"],
        y=ratio,
        name="block-cache hit ratio",
        mode="lines+markers",
        line={"color": "#B279A2"},
        customdata=pd.concat([hits, misses], axis=1),
        hovertemplate="batch %{x}<br>hit ratio %{y:.1%}<br>%{customdata[0]:,} hits, "
        "%{customdata[1]:,} misses<extra></extra>",
        row=3,
        col=1,
    )


def snapshot_uploads(uploads: pd.DataFrame) -> go.Figure:
    """Per partition: the last snapshot version Spark reports uploaded (``SnapshotLastUploaded``)
    beside the newest snapshot the files show at the same state version; disagreements are red.

    Columns: ``partition_id``, ``reported_version``, ``files_version``, ``agree``,
    ``state_version``.
    """
    title = "Snapshot last uploaded (Spark) against the files"
    if is_empty(uploads, ["partition_id", "reported_version"]):
        return empty_figure(
            title, "No SnapshotLastUploaded metrics (Spark 4.x reports them), or " + NO_PROGRESS
        )
    frame = uploads.sort_values("partition_id")
    fig = go.Figure()
    fig.add_bar(
        x=frame["partition_id"],
        y=numeric(frame, "reported_version"),
        name="Spark: SnapshotLastUploaded",
        marker_color="#4C78A8",
        customdata=frame[["state_version"]],
        hovertemplate="partition %{x}<br>Spark reports version %{y} uploaded"
        "<br>as of state version %{customdata[0]}<extra></extra>",
    )
    fig.add_bar(
        x=frame["partition_id"],
        y=numeric(frame, "files_version"),
        name="files: newest snapshot",
        marker_color="#72B7B2",
        hovertemplate="partition %{x}<br>newest snapshot file: version %{y}<extra></extra>",
    )
    wrong = frame[frame["agree"].eq(False)]
    if not wrong.empty:
        fig.add_scatter(
            x=wrong["partition_id"],
            y=[
                max(float(a), float(b))
                for a, b in zip(wrong["reported_version"], wrong["files_version"], strict=True)
            ],
            name="disagree",
            mode="markers",
            marker={"symbol": "triangle-down", "size": 14, "color": "#E45756"},
            hovertemplate="partition %{x}: Spark and the files disagree<extra></extra>",
        )
    fig.update_layout(barmode="group")
    return finish(fig, title, "partition", "snapshot version (-1: none)")


def rate_sparkline(progress: pd.DataFrame) -> go.Figure:
    """A tiny line of input against processing rate over the newest batches, no chrome.

    Columns: ``batch_id``, ``input_rows_per_second``, ``processed_rows_per_second``.
    """
    title = "Input and processing rate"
    if is_empty(progress, ["batch_id", "input_rows_per_second"]):
        return empty_figure(title, "no progress")
    frame = progress.sort_values("batch_id")
    fig = go.Figure()
    for column, name, color in (
        ("input_rows_per_second", "input", "#F58518"),
        ("processed_rows_per_second", "processed", "#4C78A8"),
    ):
        fig.add_scatter(
            x=frame["batch_id"],
            y=numeric(frame, column),
            mode="lines",
            name=name,
            line={"color": color, "width": 1.5},
            hovertemplate=f"batch %{{x}}<br>{name} %{{y:,.1f}} rows/s<extra></extra>",
        )
    fig.update_layout(
        height=70, margin={"l": 0, "r": 0, "t": 0, "b": 0}, showlegend=False, meta={"title": title}
    )
    fig.update_xaxes(visible=False, title_text="batch id")
    fig.update_yaxes(visible=False, title_text="rows per second", rangemode="tozero")
    return fig
