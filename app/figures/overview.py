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
    versions = frame["version"].astype("int64").to_numpy()
    # One constructor, arrays rather than Series: an Overview page draws 24 of these, and
    # each update_* call or pandas column costs plotly another round of validation.
    line = go.Scatter(
        x=versions,
        y=numeric(frame, column).to_numpy(),
        customdata=versions - 1,
        mode="lines",
        # NaN where some partition is unknown (queries.size_history): a gap, not a drop.
        connectgaps=False,
        fill="tozeroy",
        line={"color": "#4C78A8", "width": 1.5},
        hovertemplate=f"version %{{x}} (batch %{{customdata}})<br>%{{y:,}} {unit}<extra></extra>",
    )
    return go.Figure(
        data=[line],
        layout={
            "height": 70,
            "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
            "showlegend": False,
            # No title: a sparkline sits beside its label; the axis titles stay for screen
            # readers.
            "meta": {"title": title},
            "xaxis": {"visible": False, "title": {"text": "state version (batch id + 1)"}},
            "yaxis": {
                "visible": False,
                "title": {"text": unit},
                **(BYTES_TICKS if unit == "bytes" else {}),
            },
        },
    )
