"""The Overview page's figure: a small sparkline of state size per checkpoint."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from stateglass.app.figures._common import BYTES_TICKS, empty_figure, is_empty, numeric


def size_sparkline(sizes: pd.DataFrame, column: str = "bytes") -> go.Figure:
    """A tiny line of state size over versions, no chrome.

    Columns: ``version`` and ``column`` (``bytes`` for bytes written per version, summed over
    operators and partitions, or ``num_keys``).
    """
    unit = "bytes" if column.endswith("bytes") else "keys"
    title = f"State size ({unit}) over versions"
    if is_empty(sizes, ["version", column]):
        return empty_figure(title, "no state")
    frame = sizes.sort_values("version")
    fig = go.Figure()
    fig.add_scatter(
        x=frame["version"],
        y=numeric(frame, column),
        customdata=frame["version"].astype("int64") - 1,
        mode="lines",
        # NaN where some partition is unknown (queries.size_history): a gap, not a drop.
        connectgaps=False,
        fill="tozeroy",
        line={"color": "#4C78A8", "width": 1.5},
        hovertemplate=f"version %{{x}} (batch %{{customdata}})<br>%{{y:,}} {unit}<extra></extra>",
    )
    fig.update_layout(
        height=70,
        margin={"l": 0, "r": 0, "t": 0, "b": 0},
        showlegend=False,
        # No title: a sparkline sits beside its label; the axis titles stay for screen readers.
        meta={"title": title},
    )
    fig.update_xaxes(visible=False, title_text="state version (batch id + 1)")
    fig.update_yaxes(visible=False, title_text=unit, **(BYTES_TICKS if unit == "bytes" else {}))
    return fig
