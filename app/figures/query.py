"""The Query page's figures: the batch timeline from ``offsets/`` and ``commits/``.

Every builder takes the frame of ``stateglass.app.queries.batches`` (one row per batch id) or a
slice of it, and returns a Plotly figure; an empty frame gives a titled "no data" figure.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from stateglass.app.escape import plot_text
from stateglass.app.figures._common import empty_figure, finish, is_empty, numeric, time_unit


def batch_timeline(batches: pd.DataFrame) -> go.Figure:
    """Duration of each committed batch, and the pending ones (offsets written, no commit).

    Columns: ``batch_id``, ``committed``, ``duration_ms``, ``batch_time``.
    """
    title = "Batch duration (offsets written → commit)"
    if is_empty(batches, ["batch_id"]):
        return empty_figure(title)
    done = batches[batches["committed"].astype(bool)]
    pending = batches[~batches["committed"].astype(bool)]
    duration = numeric(done, "duration_ms")
    if not duration.notna().any():
        # Durations come from file times: none when no batch committed, or when the files'
        # times look copied (they do not follow Spark's batch times).
        why = (
            "No batch has committed yet."
            if done.empty
            else "No duration known: batch durations come from the files' times, which look "
            "copied (they do not follow Spark's batchTimestampMs)."
        )
        return empty_figure(
            title, f"{why} {len(pending)} batch(es) pending." if len(pending) else why
        )
    div, unit = time_unit(float(duration.max()))
    fig = go.Figure()
    fig.add_bar(
        x=done["batch_id"],
        y=duration / div,
        name="committed",
        marker_color="#4C78A8",
        customdata=done[["batch_time"]].astype(str),
        hovertemplate=f"batch %{{x}}<br>duration %{{y:.3~f}} {unit}"
        "<br>triggered %{customdata[0]}<extra></extra>",
    )
    if not pending.empty:
        fig.add_scatter(
            x=pending["batch_id"],
            y=[0] * len(pending),
            mode="markers",
            name="pending (not committed)",
            marker={"symbol": "x", "size": 12, "color": "#E45756"},
            customdata=pending[["batch_time"]].astype(str),
            hovertemplate="batch %{x}: pending, offsets written, no commit yet"
            "<br>triggered %{customdata[0]}<extra></extra>",
        )
    mark_repartitions(fig, batches)
    return finish(fig, title, "batch id", f"duration ({unit})")


def mark_repartitions(fig: go.Figure, batches: pd.DataFrame) -> None:
    """A dotted line at each repartition batch (Spark 4.2+), labelled with the counts.

    Columns: ``batch_id``, ``partitions_before``, ``shuffle_partitions`` (optional: a frame
    without them has no repartition to mark).
    """
    if "partitions_before" not in batches.columns:
        return
    moved = batches[batches["partitions_before"].notna()]
    for row in moved.itertuples(index=False):
        fig.add_vline(
            x=int(row.batch_id),
            line_dash="dot",
            line_color="#F58518",
            annotation_text=(
                f"repartition {int(row.partitions_before)} → {int(row.shuffle_partitions)}"
            ),
            annotation_position="top",
        )


def trigger_intervals(batches: pd.DataFrame) -> go.Figure:
    """Time between consecutive batch triggers. Columns: ``batch_id``, ``interval_ms``."""
    title = "Trigger interval (time since the previous batch)"
    if is_empty(batches, ["batch_id", "interval_ms"]):
        return empty_figure(title)
    frame = batches[batches["interval_ms"].notna()]
    interval = numeric(frame, "interval_ms")
    div, unit = time_unit(float(interval.max()))
    fig = go.Figure()
    fig.add_scatter(
        x=frame["batch_id"],
        y=interval / div,
        mode="lines+markers",
        name="interval",
        line={"color": "#72B7B2"},
        hovertemplate=f"batch %{{x}}<br>%{{y:.3~f}} {unit} after the previous trigger"
        "<extra></extra>",
    )
    return finish(fig, title, "batch id", f"interval ({unit})")


def watermark_delay(batches: pd.DataFrame) -> go.Figure:
    """Watermark against batch (trigger) time, and the gap between them.

    Columns: ``batch_id``, ``batch_time``, ``watermark``, ``delay_ms`` (batches with a
    watermark only; the others are dropped).
    """
    title = "Watermark against batch time"
    if is_empty(batches, ["batch_id", "watermark", "delay_ms"]):
        return empty_figure(title, "No watermark: the query has no event-time watermark.")
    frame = batches[batches["watermark"].notna()]
    delay = numeric(frame, "delay_ms")
    div, unit = time_unit(float(delay.max()))
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    fig.add_scatter(
        x=frame["batch_id"],
        y=frame["batch_time"],
        name="batch time",
        mode="lines+markers",
        line={"color": "#4C78A8"},
        hovertemplate="batch %{x}<br>batch time %{y}<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_scatter(
        x=frame["batch_id"],
        y=frame["watermark"],
        name="watermark",
        mode="lines+markers",
        line={"color": "#F58518"},
        hovertemplate="batch %{x}<br>watermark %{y}<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_bar(
        x=frame["batch_id"],
        y=delay / div,
        name="delay",
        marker_color="#BAB0AC",
        hovertemplate=f"batch %{{x}}<br>watermark is %{{y:.3~f}} {unit} behind batch time"
        "<extra></extra>",
        row=2,
        col=1,
    )
    finish(fig, title, "", "", height=460)
    fig.update_xaxes(title_text="batch id", row=2, col=1)
    fig.update_yaxes(title_text="time (UTC)", row=1, col=1)
    fig.update_yaxes(title_text=f"delay ({unit})", row=2, col=1)
    return fig


def input_per_batch(inputs: pd.DataFrame) -> go.Figure:
    """Input each batch read, per source, where the offsets tell it.

    Columns: ``batch_id``, ``source`` (label), ``amount``, ``unit`` (``records``, ``rows``,
    ``files``, ``seconds``…), as ``stateglass.app.queries.input_per_batch`` gives.
    """
    title = "Input per batch (from the source offsets)"
    if is_empty(inputs, ["batch_id", "amount"]):
        return empty_figure(title, "The offsets of these sources do not tell the input size.")
    fig = go.Figure()
    for (source, unit), group in inputs.groupby(["source", "unit"], sort=True):
        fig.add_bar(
            x=group["batch_id"],
            y=numeric(group, "amount"),
            # The source's description comes from the checkpoint: plain text, not markup.
            name=f"{plot_text(source)} ({unit})",
            hovertemplate=f"batch %{{x}}<br>%{{y:,}} {unit}<br>{plot_text(source)}<extra></extra>",
        )
    units = sorted(set(inputs["unit"]))
    y_title = f"input ({units[0]})" if len(units) == 1 else "input (" + " / ".join(units) + ")"
    fig.update_layout(barmode="group")
    amounts = numeric(inputs, "amount")
    if amounts.max() <= 10 and (amounts.dropna() % 1 == 0).all():
        # A file or two per batch: whole ticks, not 0.2 files.
        fig.update_yaxes(dtick=1)
    return finish(fig, title, "batch id", y_title)
