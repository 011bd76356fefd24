"""The collected checkpoints as a whole: the Overview's table and sparklines, their stores and
the files a scan could not read."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pandas as pd

from stateglass.app.queries.connection import read_frame
from stateglass.app.queries.downsample import downsampled


def last_updated(db: str) -> pd.Timestamp | None:
    """When the last scan of any checkpoint finished (naive UTC), or ``None``."""
    if not os.path.exists(os.path.expanduser(db)):
        return None
    value = read_frame(db, "SELECT max(last_scan) AS t FROM checkpoints")["t"].iloc[0]
    return None if pd.isna(value) else pd.Timestamp(value)


def checkpoint_overview(db: str) -> pd.DataFrame:
    """One row per collected checkpoint, for the Overview table.

    Columns: checkpoint, query_id, last_scan, last_offset_batch, last_committed_batch,
    lag_batches, uncommitted_batches, last_commit_at (file time), last_trigger_at (the last
    committed batch's batchTimestampMs, Spark's clock), operators (text), total_keys (keys at
    each partition's newest version, all stores, of the partitions each store has now),
    total_bytes and files (state files on disk now, purged ones excluded), problems.
    """
    return read_frame(
        db,
        """
        -- The partitions each store has now (snapshot_lag's): a repartition to fewer
        -- leaves the dropped partitions' last counts in partition_newest.
        WITH keys AS (
            SELECT checkpoint, sum(n.num_keys) AS total_keys
            FROM snapshot_lag JOIN partition_newest n
                USING (checkpoint, operator_id, store_name, partition_id)
            GROUP BY 1
        ),
        disk AS (
            SELECT checkpoint, sum(size_bytes) AS total_bytes, count(*) AS files
            FROM state_files WHERE NOT purged GROUP BY 1
        ),
        ops AS (
            SELECT checkpoint,
                   string_agg(operator_id || ':' || coalesce(operator_name, 'unknown') || '/'
                              || store_name || ' (' || coalesce(provider, '?') || ')', ', '
                              ORDER BY operator_id, store_name) AS operators
            FROM operators GROUP BY 1
        ),
        last_commit AS (
            SELECT checkpoint, max(committed_at) AS last_commit_at,
                   epoch_ms(max(batch_timestamp_ms)) AS last_trigger_at
            FROM batches WHERE committed GROUP BY 1
        ),
        probs AS (SELECT checkpoint, count(*) AS problems FROM problems GROUP BY 1)
        SELECT c.checkpoint, c.query_id, c.last_scan,
               l.last_offset_batch, l.last_committed_batch, l.lag_batches,
               l.uncommitted_batches, lc.last_commit_at, lc.last_trigger_at, o.operators,
               k.total_keys, d.total_bytes, coalesce(d.files, 0) AS files,
               coalesce(p.problems, 0) AS problems
        FROM checkpoints c
        LEFT JOIN batch_lag l USING (checkpoint)
        LEFT JOIN last_commit lc USING (checkpoint)
        LEFT JOIN ops o USING (checkpoint)
        LEFT JOIN keys k USING (checkpoint)
        LEFT JOIN disk d USING (checkpoint)
        LEFT JOIN probs p USING (checkpoint)
        ORDER BY c.checkpoint
        """,
    )


# Points per sparkline on the Overview's cards.
SPARKLINE_POINTS = 300


def size_history(db: str, checkpoints: Sequence[str] | None = None) -> pd.DataFrame:
    """Keys and bytes written per (checkpoint, version), summed over stores and partitions;
    downsampled per checkpoint to :data:`SPARKLINE_POINTS` (:mod:`.downsample`). Only the
    ``checkpoints`` named (a page of the Overview's cards), when given.

    Columns: checkpoint, version, num_keys, bytes (delta + snapshot bytes at the version).
    Both are NULL at a version where some store lacks a partition (``store_totals``), so the
    sparkline shows a gap there rather than a drop.
    """
    where = "" if checkpoints is None else "WHERE checkpoint IN (SELECT unnest(?::VARCHAR[]))"
    # store_totals read once: counting each checkpoint's stores from the view a second time
    # joined a month of batches twice.
    source = f"""
        WITH t AS MATERIALIZED (
            SELECT checkpoint, operator_id, store_name, version, num_keys, bytes, complete
            FROM store_totals {where}
        ),
        n AS (
            SELECT checkpoint, count(DISTINCT (operator_id, store_name)) AS stores
            FROM t GROUP BY checkpoint
        )
        -- One store: a version's row is its total (grouping a month by version costs more
        -- than the rest of the query).
        SELECT t.checkpoint, t.version, t.num_keys, t.bytes
        FROM t JOIN n USING (checkpoint) WHERE n.stores = 1
        UNION ALL
        SELECT t.checkpoint, t.version,
               CASE WHEN count(*) FILTER (WHERE t.complete) = any_value(n.stores)
                    THEN sum(t.num_keys) END AS num_keys,
               CASE WHEN count(*) FILTER (WHERE t.complete) = any_value(n.stores)
                    THEN sum(t.bytes) END AS bytes
        FROM t JOIN n USING (checkpoint) WHERE n.stores > 1
        GROUP BY t.checkpoint, t.version
    """
    return read_frame(
        db,
        downsampled(source, ["num_keys", "bytes"], SPARKLINE_POINTS, series="checkpoint"),
        [] if checkpoints is None else [list(checkpoints)],
    )


def stores(db: str, checkpoint: str) -> pd.DataFrame:
    """The checkpoint's (operator, store) pairs as the ``operators`` table has them."""
    return read_frame(
        db,
        "SELECT operator_id, operator_name, store_name, num_partitions, provider, key_schema, "
        "value_schema FROM operators WHERE checkpoint = ? ORDER BY operator_id, store_name",
        [checkpoint],
    )


def problems(db: str, checkpoint: str) -> pd.DataFrame:
    """Files a scan could not read: path, kind, message, seen_at."""
    return read_frame(
        db,
        "SELECT path, kind, message, seen_at FROM problems WHERE checkpoint = ? ORDER BY path",
        [checkpoint],
    )


def stored_health(db: str) -> dict[str, str]:
    """Each checkpoint's worst health status as the watcher last stored it (``health_judged``);
    checkpoints never judged, or a database from before verdicts were stored, have none."""
    import duckdb

    try:
        frame = read_frame(db, "SELECT checkpoint, worst FROM health_judged")
    except duckdb.CatalogException:
        return {}
    return dict(zip(frame["checkpoint"].astype(str), frame["worst"].astype(str), strict=True))
