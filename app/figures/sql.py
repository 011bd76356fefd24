"""The SQL page's chart: one numeric column of a query's result against another column."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from stateglass.app.escape import plot_text
from stateglass.app.figures._common import empty_figure, finish, is_empty, numeric


def numeric_columns(df: pd.DataFrame) -> list[str]:
    """The columns a chart can draw as heights: numbers (booleans excluded)."""
    return [
        str(c)
        for c in df.columns
        if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
    ]


def result_chart(df: pd.DataFrame, x: str | None, y: str, kind: str = "bar") -> go.Figure:
    """``y`` per row (``kind`` "bar" or "line"), against column ``x`` or the row number.

    Column names and values come from the user's query and the checkpoint, so every text
    Plotly renders as HTML (titles, hover) goes through :func:`plot_text`.
    """
    title = f"{plot_text(y)} by {plot_text(x) if x else 'row'}"
    if is_empty(df, [y]):
        return empty_figure(title, "No numeric value to draw.")
    xs = (
        df[x].astype(str)
        if x and not pd.api.types.is_numeric_dtype(df[x])
        else df[x]
        if x
        else None
    )
    xs = xs if xs is not None else pd.RangeIndex(1, len(df) + 1)
    ys = numeric(df, y)
    fig = go.Figure()
    trace = go.Bar if kind == "bar" else go.Scatter
    fig.add_trace(
        trace(
            x=[plot_text(v) if isinstance(v, str) else v for v in xs],
            y=ys,
            name=plot_text(y),
            hovertemplate="%{x}: %{y}<extra></extra>",
        )
    )
    return finish(fig, title, plot_text(x) if x else "row", plot_text(y))
