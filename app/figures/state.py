"""The State page's figures: one operator's store, over its versions and partitions.

State version V is written by batch V − 1; every hover names both (and the partition, where
the point belongs to one). Builders take the frames of ``stateglass.app.queries``; an empty
frame gives a titled "no data" figure.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from stateglass.app.figures._common import (
    BYTES_TICKS,
    KIND_COLORS,
    VERSION_AXIS,
    empty_figure,
    finish,
    is_empty,
    numeric,
    versions_as_batches,
)

# Beyond this many partitions, per-partition lines become the top ones plus a min–max band:
# 200 lines are unreadable and slow to draw.
MAX_PARTITION_LINES = 10
# A downsampled frame's extremes per bucket (queries.partition_cells).
BAND_COLUMNS = ("min_keys", "max_keys")

METRICS = {
    "num_keys": ("keys", "keys"),
    "max_keys": ("keys (the most in each bucket of versions)", "keys"),
    "bytes": ("bytes written (delta + snapshot)", "bytes"),
    "replay_bytes": ("replay bytes", "bytes"),
    "versions_since_snapshot": ("versions since snapshot", "versions"),
}


def _batch(versions: pd.Series) -> pd.Series:
    return versions.astype("int64") - 1


def _grid(frame: pd.DataFrame, value: str, index: str, columns: str) -> pd.DataFrame:
    """``value`` summed into an ``index`` × ``columns`` grid of floats, NaN where no row is.

    Plain numpy: ``DataFrame.pivot`` takes a quarter of a second on 200 × 1,000 cells.
    """
    rows = frame[[index, columns, value]].dropna(subset=[index, columns])
    row_keys, row_at = np.unique(rows[index].to_numpy(), return_inverse=True)
    col_keys, col_at = np.unique(rows[columns].to_numpy(), return_inverse=True)
    values = pd.to_numeric(rows[value], errors="coerce").to_numpy(dtype="float64", na_value=np.nan)
    present = ~np.isnan(values)
    grid = np.zeros((len(row_keys), len(col_keys)))
    np.add.at(grid, (row_at[present], col_at[present]), values[present])
    seen = np.zeros(grid.shape, dtype=bool)
    seen[row_at[present], col_at[present]] = True
    grid[~seen] = np.nan
    return pd.DataFrame(grid, index=pd.Index(row_keys, name=index), columns=col_keys)


# The partitions a store has: one count, or (version, count) pairs where a repartition
# changed it (``store_history``'s ``partitions_by_version``).
Partitions = int | tuple[tuple[int, int], ...] | None


def complete_total(grid: pd.DataFrame, partitions: Partitions = None) -> np.ndarray:
    """Row sums of a version × partition grid, NaN where any partition is unknown.

    The ``store_totals`` rule in figure form: a total over some partitions would draw as a
    drop (or, once they all appear, a jump) that never happened; NaN breaks the line instead.
    With a count per version, a version needs its own partitions only.
    """
    cells = grid.to_numpy(dtype="float64")
    known = (~np.isnan(cells)).sum(axis=1)
    if isinstance(partitions, tuple):
        counts = dict(partitions)
        widest = max(grid.shape[1], *counts.values())
        needed = np.array([counts.get(int(v), widest) for v in grid.index], dtype="int64")
    else:
        needed = np.full(len(grid), max(grid.shape[1], partitions or 0), dtype="int64")
    total = np.nansum(cells, axis=1)
    return np.where(known >= needed, total, np.nan)


def keys_over_versions(
    versions: pd.DataFrame,
    max_lines: int = MAX_PARTITION_LINES,
    partitions: Partitions = None,
) -> go.Figure:
    """Keys in the store per version: the total on top, per partition below.

    Columns: ``partition_id``, ``version``, ``num_keys``. With more than ``max_lines``
    partitions the lower panel draws the ``max_lines`` largest (at their last version) and a
    min–max band over all of them. The total is drawn only where every partition (at least
    ``partitions``, and all seen) is known, a gap elsewhere.
    """
    title = "Keys over versions"
    if is_empty(versions, ["partition_id", "version", "num_keys"]):
        return empty_figure(title)
    # One version × partition grid: every line, the total and the band come from it at once.
    grid = _grid(versions, "num_keys", index="version", columns="partition_id")
    steps = grid.index.to_numpy()
    batches = steps - 1
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=("all partitions", "per partition"),
    )
    fig.add_scatter(
        x=steps,
        y=complete_total(grid, partitions),
        customdata=batches,
        name="total",
        connectgaps=False,
        mode="lines+markers" if len(steps) <= 200 else "lines",
        line={"color": "#4C78A8", "width": 2},
        hovertemplate="version %{x} (batch %{customdata})<br>%{y:,} keys in all partitions"
        "<extra></extra>",
        row=1,
        col=1,
    )
    shown = list(grid.columns)
    if len(shown) > max_lines:
        # Downsampled cells carry each bucket's extremes: the band spans those, not the last
        # counts, so a partition's spike inside a bucket stays in it.
        low, high = (
            (_grid(versions, c, index="version", columns="partition_id") for c in BAND_COLUMNS)
            if set(BAND_COLUMNS) <= set(versions.columns)
            else (grid, grid)
        )
        _add_band(fig, low, high, steps, batches)
        last = grid.ffill().iloc[-1]
        shown = sorted(last.nlargest(max_lines).index)
    for partition in shown:
        fig.add_scatter(
            x=steps,
            y=grid[partition].to_numpy(),
            customdata=batches,
            name=f"partition {partition}",
            mode="lines",
            connectgaps=True,
            hovertemplate=f"partition {partition}<br>version %{{x}} (batch %{{customdata}})"
            "<br>%{y:,} keys<extra></extra>",
            row=2,
            col=1,
        )
    finish(fig, title, "", "", height=520)
    fig.update_xaxes(title_text=VERSION_AXIS, row=2, col=1)
    versions_as_batches(fig)
    fig.update_yaxes(title_text="keys", row=1, col=1)
    fig.update_yaxes(title_text="keys", row=2, col=1)
    return fig


def _add_band(
    fig: go.Figure,
    low: pd.DataFrame,
    high: pd.DataFrame,
    steps: np.ndarray,
    batches: np.ndarray,
) -> None:
    """The min–max band over every partition of version × partition grids (the lowest of
    ``low``, the highest of ``high``), lower panel."""
    for bound, fill in (("max", None), ("min", "tonexty")):
        grid = high if bound == "max" else low
        cells = grid.to_numpy(dtype="float64")
        values = grid.max(axis=1) if bound == "max" else grid.min(axis=1)
        # Which partition holds the bound, so the hover can name it (NaN cells never do).
        if bound == "max":
            at = np.where(np.isnan(cells), -np.inf, cells).argmax(axis=1)
        else:
            at = np.where(np.isnan(cells), np.inf, cells).argmin(axis=1)
        fig.add_scatter(
            x=steps,
            y=values.to_numpy(),
            mode="lines",
            fill=fill,
            line={"width": 0},
            fillcolor="rgba(76,120,168,0.2)",
            name=f"min–max of {grid.shape[1]} partitions",
            showlegend=bound == "min",
            customdata=np.column_stack([batches, grid.columns.to_numpy()[at]]),
            hovertemplate="version %{x} (batch %{customdata[0]})<br>"
            f"{bound} %{{y:,}} keys, in partition %{{customdata[1]}}<extra></extra>",
            row=2,
            col=1,
        )


def bytes_by_kind(files: pd.DataFrame) -> go.Figure:
    """Bytes of state files per version, stacked by kind (delta, snapshot, zip, changelog, sst).

    Columns: ``version``, ``kind``, ``bytes`` (summed over partitions).
    """
    # Purged files count too: this is what each version wrote, not what is on disk now.
    title = "Bytes written per version, by file kind"
    if is_empty(files, ["version", "kind", "bytes"]):
        return empty_figure(title)
    fig = go.Figure()
    for kind in [k for k in KIND_COLORS if k in set(files["kind"])] + sorted(
        set(files["kind"]) - set(KIND_COLORS)
    ):
        part = files[files["kind"] == kind].sort_values("version")
        fig.add_bar(
            x=part["version"],
            y=numeric(part, "bytes"),
            customdata=_batch(part["version"]),
            name=kind,
            marker_color=KIND_COLORS.get(kind),
            hovertemplate=f"{kind}<br>version %{{x}} (batch %{{customdata}})"
            "<br>%{y:,} bytes, all partitions<extra></extra>",
        )
    fig.update_layout(barmode="stack", bargap=0.1)
    fig.update_yaxes(**BYTES_TICKS)
    return finish(fig, title, VERSION_AXIS, "bytes written at the version")


def partition_heatmap(cells: pd.DataFrame, metric: str = "num_keys") -> go.Figure:
    """Partition × version heatmap of ``metric`` (``num_keys``, ``bytes``, …).

    Columns: ``partition_id``, ``version``, and ``metric``.
    """
    label, unit = METRICS.get(metric, (metric, ""))
    title = f"{label.capitalize()} per partition and version"
    if is_empty(cells, ["partition_id", "version", metric]):
        return empty_figure(title)
    grid = _grid(cells, metric, index="partition_id", columns="version")
    versions = grid.columns.to_numpy()
    # Plotly ships int64 arrays as the smallest int type that holds them: the per-cell batch
    # ids (for the hover) cost 2 bytes a cell. A contiguous copy, not a broadcast view.
    batches = np.tile((versions - 1).astype("int64"), (len(grid.index), 1))
    z = grid.to_numpy(dtype="float64")
    # float32 halves the page for 200 × 1,000 cells, and is exact below 2**24.
    if np.nanmax(np.abs(z), initial=0.0) < 2**24:
        z = z.astype("float32")
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=versions,
            y=grid.index.to_numpy(),
            customdata=batches,
            colorscale="Viridis",
            colorbar={"title": {"text": unit}},
            hovertemplate="partition %{y}<br>version %{x} (batch %{customdata})"
            f"<br>%{{z:,}} {unit}<extra></extra>",
        )
    )
    height = int(min(700, max(300, 120 + 6 * len(grid.index))))
    return finish(fig, title, VERSION_AXIS, "partition", height=height)


def skew_over_time(skew: pd.DataFrame) -> go.Figure:
    """Largest partition over the median one, per version.

    Columns: ``version``, ``max_keys``, ``median_keys``, ``skew`` (as the ``partition_skew``
    view).
    """
    title = "Partition skew (max / median keys)"
    if is_empty(skew, ["version", "skew"]):
        return empty_figure(title, "No skew yet: the median partition is empty.")
    frame = skew.sort_values("version")
    fig = go.Figure()
    fig.add_scatter(
        x=frame["version"],
        y=numeric(frame, "skew"),
        customdata=np.column_stack(
            [_batch(frame["version"]), numeric(frame, "max_keys"), numeric(frame, "median_keys")]
        ),
        mode="lines+markers" if len(frame) <= 200 else "lines",
        name="max / median",
        line={"color": "#E45756"},
        hovertemplate="version %{x} (batch %{customdata[0]})<br>skew %{y:.2f}×"
        "<br>largest partition %{customdata[1]:,} keys, median %{customdata[2]:,}"
        "<extra></extra>",
    )
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888", annotation_text="even")
    return finish(fig, title, VERSION_AXIS, "skew (×, max / median keys)")


def snapshot_lag(lag: pd.DataFrame) -> go.Figure:
    """Per partition at its newest version: versions since a snapshot, bytes a restart replays.

    Columns: ``partition_id``, ``latest_version``, ``versions_since_snapshot``,
    ``replay_bytes`` (as the ``snapshot_lag`` view).
    """
    title = "Snapshot lag and replay bytes per partition"
    if is_empty(lag, ["partition_id", "versions_since_snapshot"]):
        return empty_figure(title)
    frame = lag.sort_values("partition_id")
    custom = np.column_stack([frame["latest_version"], _batch(frame["latest_version"])])
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    fig.add_bar(
        x=frame["partition_id"],
        y=numeric(frame, "versions_since_snapshot"),
        customdata=custom,
        name="versions since snapshot",
        marker_color="#F58518",
        hovertemplate="partition %{x}<br>version %{customdata[0]} (batch %{customdata[1]})"
        "<br>%{y} versions since the last snapshot<extra></extra>",
        row=1,
        col=1,
    )
    fig.add_bar(
        x=frame["partition_id"],
        y=numeric(frame, "replay_bytes"),
        customdata=custom,
        name="replay bytes",
        marker_color="#4C78A8",
        hovertemplate="partition %{x}<br>version %{customdata[0]} (batch %{customdata[1]})"
        "<br>a restart reads %{y:,} bytes<extra></extra>",
        row=2,
        col=1,
    )
    finish(fig, title, "", "", height=460)
    fig.update_xaxes(title_text="partition", row=2, col=1)
    fig.update_yaxes(title_text="versions since snapshot", row=1, col=1)
    fig.update_yaxes(title_text="replay (bytes)", row=2, col=1, **BYTES_TICKS)
    return fig


def key_changes(growth: pd.DataFrame) -> go.Figure:
    """Keys added, updated and removed per version (summed over partitions).

    Columns: ``version``, ``keys_added``, ``keys_updated``, ``keys_removed`` (as the
    ``state_growth`` view). Removed keys are drawn below zero.
    """
    title = "Keys added, updated and removed per version"
    columns = ["keys_added", "keys_updated", "keys_removed"]
    if is_empty(growth, ["version"]) or all(
        c not in growth.columns or growth[c].isna().all() for c in columns
    ):
        return empty_figure(
            title, "No deltas or changelogs: this store writes only snapshots (zips)."
        )
    frame = growth.sort_values("version")
    fig = go.Figure()
    for column, sign, color, verb in (
        ("keys_added", 1, "#54A24B", "added"),
        ("keys_updated", 1, "#4C78A8", "updated"),
        ("keys_removed", -1, "#E45756", "removed"),
    ):
        values = numeric(frame, column)
        fig.add_bar(
            x=frame["version"],
            y=sign * values,
            customdata=np.column_stack([_batch(frame["version"]), values]),
            name=verb,
            marker_color=color,
            hovertemplate=f"version %{{x}} (batch %{{customdata[0]}})<br>%{{customdata[1]:,}} "
            f"keys {verb}, all partitions<extra></extra>",
        )
    fig.update_layout(barmode="relative")
    return finish(fig, title, VERSION_AXIS, "keys (removed below zero)")


def sst_upload_reuse(sst: pd.DataFrame) -> go.Figure:
    """RocksDB: SST bytes uploaded with each version against those reused from the previous.

    Columns: ``version``, ``sst_bytes_uploaded``, ``sst_bytes_reused``, ``sst_files_reused``
    (summed over partitions).
    """
    title = "RocksDB SST bytes: uploaded vs reused"
    if is_empty(sst, ["version", "sst_bytes_uploaded"]):
        return empty_figure(title, "No RocksDB snapshots (zips with SST files) for this store.")
    frame = sst.sort_values("version")
    custom = np.column_stack([_batch(frame["version"]), numeric(frame, "sst_files_reused")])
    fig = go.Figure()
    fig.add_bar(
        x=frame["version"],
        y=numeric(frame, "sst_bytes_uploaded"),
        customdata=custom,
        name="uploaded (new SSTs)",
        marker_color="#E45756",
        hovertemplate="version %{x} (batch %{customdata[0]})<br>%{y:,} bytes uploaded"
        "<extra></extra>",
    )
    fig.add_bar(
        x=frame["version"],
        y=numeric(frame, "sst_bytes_reused"),
        customdata=custom,
        name="reused (shared with the previous zip)",
        marker_color="#54A24B",
        hovertemplate="version %{x} (batch %{customdata[0]})<br>%{y:,} bytes reused in "
        "%{customdata[1]} SST files<extra></extra>",
    )
    fig.update_layout(barmode="stack")
    fig.update_yaxes(**BYTES_TICKS)
    return finish(fig, title, VERSION_AXIS, "SST bytes, all partitions")


def partition_plan(keys: pd.DataFrame) -> go.Figure:
    """Keys per partition now and under a planned partition count, side by side.

    Columns: ``layout`` (``now (3)``, ``planned (8)``), ``partition_id``, ``keys``.
    """
    title = "Keys per partition: now and planned"
    if is_empty(keys, ["layout", "partition_id", "keys"]):
        return empty_figure(title)
    fig = go.Figure()
    for layout in dict.fromkeys(keys["layout"]):
        part = keys[keys["layout"] == layout].sort_values("partition_id")
        fig.add_bar(
            x=part["partition_id"],
            y=numeric(part, "keys"),
            name=layout,
            hovertemplate=f"{layout}<br>partition %{{x}}<br>%{{y:,}} keys<extra></extra>",
        )
    fig.update_layout(barmode="group", bargap=0.15)
    return finish(fig, title, "partition", "keys")
