"""Plotly figure builders: DataFrame in, Figure out, no Streamlit (the HTML report uses them too).

Each builder documents the columns it reads; the frames come from ``stateglass.app.queries``. Every
figure has axis titles with units and hovers that name the partition, version and batch where
they apply; an empty frame gives a titled "no data" figure instead of an error.

Example::

    from stateglass.app import figures, queries
    fig = figures.keys_over_versions(queries.partition_cells(db, "/data/cp", 0, "default"))
"""

from __future__ import annotations

from stateglass.app.figures._common import empty_figure
from stateglass.app.figures.eviction import overdue_keys
from stateglass.app.figures.forensics import growth_contributors, growth_shares, restart_cost
from stateglass.app.figures.overview import size_sparkline
from stateglass.app.figures.progress import (
    commit_time,
    duration_breakdown,
    memory_vs_keys,
    rate_sparkline,
    rocksdb_internals,
    snapshot_uploads,
    watermark_and_late_rows,
)
from stateglass.app.figures.progress import rates as progress_rates
from stateglass.app.figures.query import (
    batch_timeline,
    input_per_batch,
    trigger_intervals,
    watermark_delay,
)
from stateglass.app.figures.state import (
    bytes_by_kind,
    key_changes,
    keys_over_versions,
    partition_heatmap,
    partition_plan,
    skew_over_time,
    snapshot_lag,
    sst_upload_reuse,
)

__all__ = [
    "batch_timeline",
    "bytes_by_kind",
    "commit_time",
    "duration_breakdown",
    "empty_figure",
    "growth_contributors",
    "growth_shares",
    "input_per_batch",
    "key_changes",
    "keys_over_versions",
    "memory_vs_keys",
    "overdue_keys",
    "partition_heatmap",
    "partition_plan",
    "progress_rates",
    "rate_sparkline",
    "restart_cost",
    "rocksdb_internals",
    "size_sparkline",
    "skew_over_time",
    "snapshot_lag",
    "snapshot_uploads",
    "sst_upload_reuse",
    "trigger_intervals",
    "watermark_and_late_rows",
    "watermark_delay",
]
