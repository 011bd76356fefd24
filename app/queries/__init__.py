"""Read-only queries for the dashboard and the reports: database path in, DataFrame out.

All the SQL the pages need lives in this package, on top of the views of
``collectors/db/views.py`` where they exist, one module per concept:

* :mod:`.connection`: the read-only connection, shared by a page's loads (:func:`session`);
* :mod:`.checkpoints`: the collected checkpoints as a whole (the Overview), their stores and
  problems;
* :mod:`.store`: one state store over its versions and partitions (the State page);
* :mod:`.batches`: the query's batches and the input each took from each source;
* :mod:`.progress`: Spark's progress events, joined by the query id;
* :mod:`.eviction`: the eviction audit;
* :mod:`.restart`: what the restart-cost model reads.

Pages and reports import the package and call what it names here. Times are naive UTC
timestamps.

Example::

    from stateglass.app import queries
    df = queries.state_versions("~/.stateglass/stateglass.duckdb", "/data/cp", 0, "default")
"""

from __future__ import annotations

from stateglass.app.queries.batches import (
    BARE_NUMBER,
    RATE_SECONDS,
    batch_chart,
    batch_summary,
    batches,
    file_times,
    input_from_offsets,
    input_per_batch,
    rate_rows,
    repartitions,
)
from stateglass.app.queries.checkpoints import (
    checkpoint_overview,
    last_updated,
    problems,
    size_history,
    stored_health,
    stores,
)
from stateglass.app.queries.connection import STORE_WHERE, change_key, data_version, session
from stateglass.app.queries.downsample import MAX_POINTS
from stateglass.app.queries.downsample import note as downsample_note
from stateglass.app.queries.eviction import eviction_audit, eviction_rules, newest_watermarks
from stateglass.app.queries.progress import (
    DURATION_PARTS,
    NO_PROGRESS,
    ROCKSDB_METRICS,
    progress,
    progress_overview,
    progress_sources,
    progress_state,
    snapshot_uploads,
)
from stateglass.app.queries.restart import live_state_files, restart_facts
from stateglass.app.queries.store import (
    HEATMAP_COLUMNS,
    CellGrid,
    bytes_by_kind,
    cell_grid,
    disk_usage,
    history_kept,
    history_note,
    keys_at_version,
    partition_cells,
    partition_skew,
    snapshot_lag,
    sst_reuse,
    state_growth,
    state_versions,
    store_history,
    version_span,
)
from stateglass.app.queries.variables import rows_line, rows_lines, variable_rows

__all__ = [
    "BARE_NUMBER",
    "DURATION_PARTS",
    "HEATMAP_COLUMNS",
    "MAX_POINTS",
    "NO_PROGRESS",
    "RATE_SECONDS",
    "ROCKSDB_METRICS",
    "STORE_WHERE",
    "CellGrid",
    "batch_chart",
    "batch_summary",
    "batches",
    "bytes_by_kind",
    "cell_grid",
    "change_key",
    "checkpoint_overview",
    "data_version",
    "disk_usage",
    "downsample_note",
    "eviction_audit",
    "eviction_rules",
    "file_times",
    "history_kept",
    "history_note",
    "input_from_offsets",
    "input_per_batch",
    "keys_at_version",
    "last_updated",
    "live_state_files",
    "newest_watermarks",
    "partition_cells",
    "partition_skew",
    "problems",
    "progress",
    "progress_overview",
    "progress_sources",
    "progress_state",
    "rate_rows",
    "repartitions",
    "restart_facts",
    "rows_line",
    "rows_lines",
    "session",
    "size_history",
    "snapshot_lag",
    "snapshot_uploads",
    "sst_reuse",
    "state_growth",
    "state_versions",
    "store_history",
    "stored_health",
    "stores",
    "variable_rows",
    "version_span",
]
