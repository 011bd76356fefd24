"""What every figure shares: units, hover templates, and the figure shown for no data."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import plotly.graph_objects as go

# SI prefixes with a unit suffix: 1.2MB, 350ms. Plotly's "~s" drops trailing zeros.
BYTES_TICKS = {"tickformat": "~s", "ticksuffix": "B"}
KIND_COLORS = {
    "delta": "#4C78A8",
    "snapshot": "#F58518",
    "zip": "#E45756",
    "changelog": "#72B7B2",
    "sst": "#54A24B",
}


# The x axis of a figure over state versions: drawn as Spark's UI speaks, in batch ids.
VERSION_AXIS = "state version (batch id + 1)"
BATCH_AXIS = "batch id"
# How a builder's hover names a point's state version and batch; the batch moves to the axis.
_VERSION_HOVERS = (
    ("version %{x} (batch %{customdata})", "batch %{x} (state version %{customdata})"),
    ("version %{x} (batch %{customdata[0]})", "batch %{x} (state version %{customdata[0]})"),
    ("version %{x}<br>", "batch %{x} (state version %{customdata})<br>"),
)


def versions_as_batches(fig: go.Figure) -> go.Figure:
    """Move every trace drawn over state versions onto batch ids (version − 1), with the
    version on hover; the axis titled :data:`VERSION_AXIS` becomes :data:`BATCH_AXIS`.

    Builders draw over versions (the files' numbering); Spark's UI and its state reader name
    batches. The batch a hover named is the new x, so the hover now names the version.
    """
    for trace in fig.data:
        template = getattr(trace, "hovertemplate", None) or ""
        found = next(((old, new) for old, new in _VERSION_HOVERS if old in template), None)
        if found is None or trace.x is None:
            continue
        old, new = found
        versions = np.asarray(trace.x, dtype="float64")
        if "[0]" in old:
            custom = np.array(trace.customdata, dtype=object)
            custom[:, 0] = versions.astype("int64")
            trace.customdata = custom
        elif np.ndim(trace.customdata) == 2:
            # A heatmap's batch per cell: the version is one more.
            trace.customdata = np.asarray(trace.customdata, dtype="int64") + 1
        else:
            trace.customdata = versions.astype("int64")
        trace.x = (versions - 1).astype("int64")
        trace.hovertemplate = template.replace(old, new)
    fig.for_each_xaxis(
        lambda axis: axis.update(title_text=BATCH_AXIS) if axis.title.text == VERSION_AXIS else None
    )
    return fig


def empty_figure(title: str, message: str = "No data yet for this chart.") -> go.Figure:
    """A titled figure with a centred note: pages and reports never special-case empty data."""
    fig = go.Figure()
    fig.add_annotation(
        text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False, font={"size": 14}
    )
    fig.update_layout(title=title, height=260)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def is_empty(df: pd.DataFrame | None, columns: Iterable[str] = ()) -> bool:
    """No rows, or one of ``columns`` missing or all null."""
    if df is None or df.empty:
        return True
    return any(c not in df.columns or df[c].isna().all() for c in columns)


def finish(fig: go.Figure, title: str, x_title: str, y_title: str, height: int = 360) -> go.Figure:
    """Title, axis titles (with units), compact margins and a unified look."""
    fig.update_layout(
        title=title,
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        legend={"orientation": "h", "y": -0.25},
        hoverlabel={"namelength": -1},
    )
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    return versions_as_batches(fig) if x_title == VERSION_AXIS else fig


def numeric(df: pd.DataFrame, column: str) -> pd.Series:
    """``column`` as floats with NaN for nulls (DuckDB gives nullable Int64)."""
    return pd.to_numeric(df[column], errors="coerce").astype("float64")


def time_unit(max_ms: float) -> tuple[float, str]:
    """The divisor and unit that keep a millisecond series readable (ms, s, min, h or d)."""
    if max_ms >= 3 * 86_400_000:
        return 86_400_000.0, "d"
    if max_ms >= 3 * 3_600_000:
        return 3_600_000.0, "h"
    if max_ms >= 3 * 60_000:
        return 60_000.0, "min"
    if max_ms >= 3_000:
        return 1_000.0, "s"
    return 1.0, "ms"
