"""What every figure shares: units, hover templates, and the figure shown for no data."""

from __future__ import annotations

from collections.abc import Iterable

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
    return fig


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
