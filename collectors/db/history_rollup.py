"""The history tables that keep a month cheap to read: kept by every scan, and retention.

Every scan (:func:`record_history`, in the scan's own transaction) keeps, for the versions it
wrote, the per-store totals (``store_versions``), each partition's newest version
(``partition_newest``) and the bucket rows of the partition rows kept (``partition_buckets``,
``bucket_marks``). Retention (:func:`maintain_checkpoint`, the ``[history]`` settings of
:mod:`stateglass.collectors.db.history_settings`) rolls partition rows older than the
full-resolution window into ``state_rollups`` and compacts purged state files' rows into
``file_summaries``. Only the writer's transactions call these.

Example (the writer, inside its transaction)::

    record_history(conn, write, settings.rollup_versions)  # after a scan's rows
    result = maintain_checkpoint(conn, "/cp", settings, now)  # every so many versions
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from stateglass.collectors.db.history_settings import HistorySettings
from stateglass.collectors.db.upsert import upsert
from stateglass.collectors.db.writes import MaintainResult, ScanWrite

if TYPE_CHECKING:
    import duckdb

# Per-store totals of the versions in {source} (a relation with state_versions' columns),
# replacing the rows of those versions.
STORE_VERSIONS = """
    INSERT OR REPLACE INTO store_versions BY NAME
    SELECT checkpoint, operator_id, store_name, version,
           count(num_keys) AS known_partitions,
           sum(num_keys) AS num_keys, sum(keys_added) AS keys_added,
           sum(keys_updated) AS keys_updated, sum(keys_removed) AS keys_removed,
           sum(delta_bytes) AS delta_bytes,
           sum(coalesce(delta_bytes, 0) + coalesce(snapshot_bytes, 0)) AS bytes,
           min(num_keys) AS min_keys, max(num_keys) AS max_keys, median(num_keys) AS median_keys,
           count(sst_bytes_live) AS sst_versions,
           sum(sst_bytes_uploaded) FILTER (WHERE sst_bytes_live IS NOT NULL)
               AS sst_bytes_uploaded,
           sum(sst_bytes_live - sst_bytes_uploaded) AS sst_bytes_reused,
           sum(sst_files_reused) FILTER (WHERE sst_bytes_live IS NOT NULL) AS sst_files_reused
    FROM {source} GROUP BY checkpoint, operator_id, store_name, version
"""

# Each partition's newest row among {source}, merged with what the table knew: the newer
# version wins, the first version collected is the older one.
PARTITION_NEWEST = """
    INSERT INTO partition_newest BY NAME
    SELECT checkpoint, operator_id, store_name, partition_id,
           min(version) AS first_version, max(version) AS version,
           arg_max_null(num_keys, version) AS num_keys,
           arg_max_null(versions_since_snapshot, version) AS versions_since_snapshot,
           arg_max_null(replay_bytes, version) AS replay_bytes
    FROM {source} GROUP BY checkpoint, operator_id, store_name, partition_id
    ON CONFLICT (checkpoint, operator_id, store_name, partition_id) DO UPDATE SET
        first_version = least(partition_newest.first_version, excluded.first_version),
        num_keys = CASE WHEN excluded.version >= partition_newest.version
                        THEN excluded.num_keys ELSE partition_newest.num_keys END,
        versions_since_snapshot = CASE WHEN excluded.version >= partition_newest.version
                        THEN excluded.versions_since_snapshot
                        ELSE partition_newest.versions_since_snapshot END,
        replay_bytes = CASE WHEN excluded.version >= partition_newest.version
                        THEN excluded.replay_bytes ELSE partition_newest.replay_bytes END,
        version = greatest(partition_newest.version, excluded.version)
"""

# The rows of one checkpoint's versions a scan just wrote (``$cp``, ``$lo``..``$hi``, and the
# (operator, store, version) triples as three lists).
_TOUCHED = """(
    SELECT s.* FROM state_versions s
    SEMI JOIN (SELECT unnest($ops::INTEGER[]) AS operator_id,
                      unnest($stores::VARCHAR[]) AS store_name,
                      unnest($versions::BIGINT[]) AS version) t
        USING (operator_id, store_name, version)
    WHERE s.checkpoint = $cp AND s.version BETWEEN $lo AND $hi
)"""

# Partition rows of one checkpoint older than ``$below``, one row per partition and bucket of
# ``$n`` versions; a bucket rolled up before (a late row) merges with what it has.
_ROLL_UP = """
    INSERT INTO state_rollups BY NAME
    SELECT checkpoint, operator_id, store_name, partition_id, (version - 1) // $n AS bucket,
           min(version) AS first_version, max(version) AS last_version,
           count(*) AS versions, min(num_keys) AS min_keys, max(num_keys) AS max_keys,
           arg_max_null(num_keys, version) AS last_keys,
           sum(keys_added) AS keys_added, sum(keys_updated) AS keys_updated,
           sum(keys_removed) AS keys_removed, sum(delta_bytes) AS delta_bytes,
           sum(snapshot_bytes) AS snapshot_bytes, max(replay_bytes) AS max_replay_bytes,
           max(versions_since_snapshot) AS max_versions_since_snapshot
    FROM state_versions WHERE checkpoint = $cp AND version < $below
    GROUP BY ALL
    ON CONFLICT (checkpoint, operator_id, store_name, partition_id, bucket) DO UPDATE SET
        last_keys = CASE WHEN excluded.last_version > state_rollups.last_version
                         THEN excluded.last_keys ELSE state_rollups.last_keys END,
        first_version = least(state_rollups.first_version, excluded.first_version),
        last_version = greatest(state_rollups.last_version, excluded.last_version),
        versions = state_rollups.versions + excluded.versions,
        min_keys = least(state_rollups.min_keys, excluded.min_keys),
        max_keys = greatest(state_rollups.max_keys, excluded.max_keys),
        keys_added = state_rollups.keys_added + excluded.keys_added,
        keys_updated = state_rollups.keys_updated + excluded.keys_updated,
        keys_removed = state_rollups.keys_removed + excluded.keys_removed,
        delta_bytes = state_rollups.delta_bytes + excluded.delta_bytes,
        snapshot_bytes = state_rollups.snapshot_bytes + excluded.snapshot_bytes,
        max_replay_bytes = greatest(state_rollups.max_replay_bytes, excluded.max_replay_bytes),
        max_versions_since_snapshot = greatest(state_rollups.max_versions_since_snapshot,
                                               excluded.max_versions_since_snapshot)
"""

# One store's partition rows of versions ``$lo``..``$hi`` as bucket rows of ``$n`` versions,
# replacing those buckets' rows: the range is whole buckets, so each is counted from all its rows.
_BUCKETS = """
    INSERT OR REPLACE INTO partition_buckets BY NAME
    SELECT checkpoint, operator_id, store_name, partition_id, (version - 1) // $n AS bucket,
           max(version) AS last_version, min(num_keys) AS min_keys, max(num_keys) AS max_keys,
           arg_max_null(num_keys, version) AS last_keys,
           sum(coalesce(delta_bytes, 0) + coalesce(snapshot_bytes, 0)) AS bytes
    FROM state_versions
    WHERE checkpoint = $cp AND operator_id = $op AND store_name = $store
      AND version BETWEEN $lo AND $hi
    GROUP BY ALL
"""

# Purged state files with a version, summed per (version, kind): files and bytes add up.
_COMPACT_FILES = """
    INSERT INTO file_summaries BY NAME
    SELECT checkpoint, operator_id, store_name, version, kind,
           count(*) AS files, sum(size_bytes) AS bytes
    FROM state_files WHERE checkpoint = $cp AND purged AND version IS NOT NULL
    GROUP BY ALL
    ON CONFLICT (checkpoint, operator_id, store_name, version, kind) DO UPDATE SET
        files = file_summaries.files + excluded.files,
        bytes = file_summaries.bytes + excluded.bytes
"""


def record_history(conn: duckdb.DuckDBPyConnection, write: ScanWrite, width: int) -> None:
    """Store totals, each partition's newest version and the bucket rows, for the versions
    this scan wrote (buckets of ``width`` versions)."""
    if not write.state_versions:
        return
    touched = sorted(
        {(r["operator_id"], r["store_name"], r["version"]) for r in write.state_versions}
    )
    params = {
        "cp": write.root,
        "lo": touched[0][2] if len(touched) == 1 else min(t[2] for t in touched),
        "hi": max(t[2] for t in touched),
        "ops": [t[0] for t in touched],
        "stores": [t[1] for t in touched],
        "versions": [t[2] for t in touched],
    }
    conn.execute(STORE_VERSIONS.format(source=_TOUCHED), params)
    conn.execute(PARTITION_NEWEST.format(source=_TOUCHED), params)
    written: dict[tuple[int, str], list[int]] = {}
    for op, store, version in touched:
        written.setdefault((op, store), []).append(version)
    for (op, store), versions in written.items():
        _refresh_buckets(conn, (write.root, op, store), width, versions)


def fill_buckets(conn: duckdb.DuckDBPyConnection, width: int) -> None:
    """Bucket rows for every store with partition rows (a database from before them)."""
    for store in conn.execute(
        "SELECT DISTINCT checkpoint, operator_id, store_name FROM partition_newest"
    ).fetchall():
        _refresh_buckets(conn, store, width, [])


def _refresh_buckets(
    conn: duckdb.DuckDBPyConnection, store: tuple[str, int, str], width: int, written: list[int]
) -> None:
    """Keep one store's ``partition_buckets`` whole: the buckets completed since its mark
    (the newest version collected of any partition closes every bucket before it), and the
    complete ones a scan wrote into again (a partition's row arriving late, a rewrite). A
    store without a mark, or marked with another width, is counted again from its rows."""
    cp, op, name = store
    where = {"cp": cp, "op": op, "store": name}
    # One statement: a scan pays this for every store it wrote, usually to find nothing to do.
    newest, marked, done = conn.execute(
        "SELECT (SELECT max(version) FROM partition_newest WHERE checkpoint = $cp "
        "        AND operator_id = $op AND store_name = $store), m.width, m.through_version "
        "FROM (SELECT 1) LEFT JOIN bucket_marks m ON m.checkpoint = $cp "
        "     AND m.operator_id = $op AND m.store_name = $store",
        where,
    ).fetchall()[0]
    through = (int(newest or 0) // width) * width
    if marked != width:
        conn.execute(
            "DELETE FROM partition_buckets "
            "WHERE checkpoint = $cp AND operator_id = $op AND store_name = $store",
            where,
        )
        ranges = [(1, through)]
    else:
        late = sorted({(v - 1) // width for v in written if v <= done})
        ranges = [(b * width + 1, (b + 1) * width) for b in late] + [(done + 1, through)]
    for lo, hi in ranges:
        if lo <= hi:
            conn.execute(_BUCKETS, {**where, "n": width, "lo": lo, "hi": hi})
    if (marked, done) == (width, through):
        return
    upsert(
        conn,
        "bucket_marks",
        [
            {
                "checkpoint": cp,
                "operator_id": op,
                "store_name": name,
                "width": width,
                "through_version": through,
            }
        ],
    )


def _full_from(conn: duckdb.DuckDBPyConnection, root: str, history: HistorySettings) -> int | None:
    """The first version kept at full resolution: the first of the window's batches (by
    Spark's batch timestamps), never past a version whose files are still on disk (a scan may
    count it again), rounded down to a bucket boundary. ``None``: nothing to roll up."""
    newest_ms, live = conn.execute(
        "SELECT (SELECT max(batch_timestamp_ms) FROM batches WHERE checkpoint = $cp), "
        "(SELECT min(version) FROM state_files "
        " WHERE checkpoint = $cp AND NOT purged AND version IS NOT NULL)",
        {"cp": root},
    ).fetchall()[0]
    if newest_ms is None:
        return None
    window_ms = int(history.full_resolution_days * 86_400_000)
    first_batch = conn.execute(
        "SELECT min(batch_id) FROM batches WHERE checkpoint = ? AND batch_timestamp_ms >= ?",
        [root, newest_ms - window_ms],
    ).fetchall()[0][0]
    if first_batch is None:
        return None
    full_from = first_batch + 1 if live is None else min(first_batch + 1, live)
    n = history.rollup_versions
    below = ((full_from - 1) // n) * n + 1
    return below if below > 1 else None


def maintain_checkpoint(
    conn: duckdb.DuckDBPyConnection, root: str, history: HistorySettings, now: datetime
) -> MaintainResult:
    """Roll up the partition rows before the window, compact the purged files' rows."""
    below = _full_from(conn, root, history) if history.enabled else None
    rolled = rows = 0
    # Bucket rows of this width first, so that none straddles ``below`` (a bucket boundary).
    for store in conn.execute(
        "SELECT DISTINCT operator_id, store_name FROM partition_newest WHERE checkpoint = ?",
        [root],
    ).fetchall():
        _refresh_buckets(conn, (root, *store), history.rollup_versions, [])
    if below is not None:
        params = {"cp": root, "below": below, "n": history.rollup_versions}
        rolled = conn.execute(
            "SELECT count(*) FROM state_versions WHERE checkpoint = $cp AND version < $below",
            {"cp": root, "below": below},
        ).fetchall()[0][0]
        if rolled:
            rows = conn.execute(_ROLL_UP, params).fetchall()[0][0]
            conn.execute(
                "DELETE FROM state_versions WHERE checkpoint = $cp AND version < $below",
                {"cp": root, "below": below},
            )
            # Their bucket rows go with them: the roll-ups count those versions now.
            conn.execute(
                "DELETE FROM partition_buckets WHERE checkpoint = $cp AND last_version < $below",
                {"cp": root, "below": below},
            )
    files = 0
    if history.enabled:
        files = conn.execute(
            "SELECT count(*) FROM state_files WHERE checkpoint = ? AND purged "
            "AND version IS NOT NULL",
            [root],
        ).fetchall()[0][0]
        if files:
            conn.execute(_COMPACT_FILES, {"cp": root})
            conn.execute(
                "DELETE FROM state_files WHERE checkpoint = ? AND purged AND version IS NOT NULL",
                [root],
            )
    upsert(
        conn,
        "history_maintenance",
        [
            {
                "checkpoint": root,
                "maintained_at": now,
                "full_from_version": below,
                "full_days": history.full_resolution_days,
                "rollup_versions": history.rollup_versions,
            }
        ],
    )
    return MaintainResult(root, below, rolled, rows, files)
