"""Figures of the State page's forensics: growth attribution and restart cost.

Key field values come from a checkpoint: every one reaches Plotly through ``plot_text``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from stateglass.app.escape import plot_text
from stateglass.app.figures._common import (
    BYTES_TICKS,
    VERSION_AXIS,
    empty_figure,
    finish,
    is_empty,
    numeric,
)

if TYPE_CHECKING:
    from stateglass.app.browse.growth import GrowthAttribution

COLORS = ("#E45756", "#4C78A8", "#F58518", "#54A24B", "#B279A2", "#72B7B2", "#9D755D")
# Plotly labels longer than this are cut (the hover keeps the whole text).
MAX_LABEL = 48


def _short(text: str) -> str:
    return text if len(text) <= MAX_LABEL else text[: MAX_LABEL - 1] + "…"


def _text(value: object) -> str:
    """``plot_text``, with quotes as numeric entities: Plotly's tick labels decode ``&#34;``
    but print ``&quot;`` as it is (string values of a key are quoted)."""
    return plot_text(value).replace("&quot;", "&#34;").replace("&#x27;", "&#39;")


def growth_contributors(result: GrowthAttribution | None) -> go.Figure:
    """Keys added per version by the top contributors, beside all keys added.

    One line per (field, value) of ``result.contributors``: keys added at each version of
    the window that carry that value; the grey bars are every key added at the version.
    """
    title = "Keys added per version, by the top contributors"
    if result is None or not result.steps:
        return empty_figure(title, "No versions in the window.")
    steps = list(result.steps)
    batches = [v - 1 for v in steps]
    fig = go.Figure()
    fig.add_bar(
        x=steps,
        y=list(result.added),
        customdata=batches,
        name="all keys added",
        marker_color="rgba(150,150,150,0.45)",
        hovertemplate="version %{x} (batch %{customdata})<br>%{y:,} keys added, all values"
        "<extra></extra>",
    )
    for i, c in enumerate(result.contributors):
        label = _text(_short(c.label))
        full = _text(c.label)
        fig.add_scatter(
            x=steps,
            y=list(c.added),
            customdata=batches,
            mode="lines+markers",
            name=label,
            line={"color": COLORS[i % len(COLORS)], "width": 2},
            hovertemplate=f"{full}<br>version %{{x}} (batch %{{customdata}})"
            "<br>%{y:,} keys added<extra></extra>",
        )
    return finish(fig, title, VERSION_AXIS, "keys added at the version")


def growth_shares(result: GrowthAttribution | None) -> go.Figure:
    """Horizontal bars: the share of new keys each top contributor accounts for."""
    title = "Who brings the new keys"
    if result is None or not result.contributors:
        return empty_figure(title, "No keys were added in the window.")
    items = list(reversed(result.contributors))
    fig = go.Figure(
        go.Bar(
            x=[c.share * 100 for c in items],
            y=[_text(_short(c.label)) for c in items],
            orientation="h",
            marker_color="#E45756",
            customdata=np.column_stack([[c.keys for c in items], [_text(c.label) for c in items]]),
            hovertemplate="%{customdata[1]}<br>%{customdata[0]:,} new keys (%{x:.1f} %)"
            "<extra></extra>",
        )
    )
    fig.update_xaxes(range=[0, 100], ticksuffix=" %")
    height = int(min(480, 140 + 34 * len(items)))
    return finish(
        fig, f"{title} since version {result.base}", "share of the new keys", "", height=height
    )


def restart_cost(
    now: pd.DataFrame, alt: pd.DataFrame | None = None, alt_label: str = ""
) -> go.Figure:
    """Per partition: bytes a restart reads (snapshot part + replay part) and replays.

    ``now``/``alt``: ``app.analysis.restart_cost.costs_frame`` frames; ``alt`` is the what-if, drawn
    beside the current figures.
    """
    title = "Restart cost per partition"
    if is_empty(now, ["partition_id", "bytes"]):
        return empty_figure(title)
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1)
    frames = [("now", now, 0)]
    if alt is not None and not alt.empty:
        frames.append((alt_label or "what if", alt, 1))
    for label, frame, n in frames:
        frame = frame.sort_values("partition_id")
        name = _text(label)
        custom = np.column_stack(
            [
                frame["version"],
                frame["base_version"],
                frame["files"],
                numeric(frame, "snapshot_bytes"),
                numeric(frame, "replay_bytes"),
            ]
        )
        fig.add_bar(
            x=frame["partition_id"],
            y=numeric(frame, "bytes"),
            customdata=custom,
            name=f"{name}: bytes read",
            marker={"color": "#4C78A8" if n == 0 else "#F58518"},
            hovertemplate=f"{name}<br>partition %{{x}} at version %{{customdata[0]}}"
            "<br>%{y:,} bytes in %{customdata[2]} files: snapshot of version "
            "%{customdata[1]} (%{customdata[3]:,} B with its SSTs) + deltas/changelogs "
            "(%{customdata[4]:,} B)<extra></extra>",
            row=1,
            col=1,
        )
        fig.add_bar(
            x=frame["partition_id"],
            y=numeric(frame, "replays"),
            name=f"{name}: replays",
            marker={"color": "#4C78A8" if n == 0 else "#F58518", "opacity": 0.6},
            hovertemplate=f"{name}<br>partition %{{x}}<br>%{{y}} deltas or changelogs replayed"
            "<extra></extra>",
            row=2,
            col=1,
        )
    fig.update_layout(barmode="group")
    finish(fig, title, "", "", height=480)
    fig.update_xaxes(title_text="partition", row=2, col=1)
    fig.update_yaxes(title_text="bytes read", row=1, col=1, **BYTES_TICKS)
    fig.update_yaxes(title_text="replays", row=2, col=1)
    return fig
