"""The eviction audit's figure: keys Spark should already have evicted, per version."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from stateglass.app.figures._common import VERSION_AXIS, empty_figure, finish, is_empty, numeric


def overdue_keys(audit: pd.DataFrame) -> go.Figure:
    """Overdue keys and all keys per version (summed over partitions).

    Columns: ``version``, ``keys``, ``overdue_keys`` (as ``queries.eviction_audit``).
    """
    title = "Overdue keys per version"
    if is_empty(audit, ["version"]):
        return empty_figure(title, "No audited version yet.")
    frame = audit.sort_values("version")
    fig = go.Figure()
    fig.add_scatter(
        x=frame["version"],
        y=numeric(frame, "keys"),
        name="keys audited",
        mode="lines+markers",
        line={"color": "#4C78A8"},
        hovertemplate="version %{x}<br>%{y:,} keys<extra></extra>",
    )
    fig.add_bar(
        x=frame["version"],
        y=numeric(frame, "overdue_keys"),
        name="overdue (should have been evicted)",
        marker_color="#E45756",
        hovertemplate="version %{x}<br>%{y:,} overdue keys<extra></extra>",
    )
    return finish(fig, title, VERSION_AXIS, "keys")
