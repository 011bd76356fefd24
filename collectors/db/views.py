"""The history database's views: each metric defined once, in SQL, over the tables of
:mod:`stateglass.collectors.db.schema`; the dashboard, the CLI and ``/metrics`` only SELECT
from them. A writer creates them at every open; a reader of an older database gets them as
temporary views (:mod:`stateglass.collectors.db.schema_versions`).

Example::

    read_query(db, "SELECT batch_id, duration_ms FROM batch_durations WHERE checkpoint = ?", [cp])
"""

from __future__ import annotations

import re

from stateglass.collectors.db.schema import TABLES

VIEWS: dict[str, str] = {
    "batch_lag": """
        CREATE OR REPLACE VIEW batch_lag AS
        SELECT checkpoint,
               max(batch_id) AS last_offset_batch,
               max(batch_id) FILTER (WHERE committed) AS last_committed_batch,
               count(*) FILTER (WHERE NOT committed) AS uncommitted_batches,
               max(batch_id) - coalesce(max(batch_id) FILTER (WHERE committed), -1)
                   AS lag_batches
        FROM batches GROUP BY checkpoint
    """,
    "batch_durations": """
        CREATE OR REPLACE VIEW batch_durations AS
        -- File mtimes: a copied or git-cloned checkpoint has meaningless ones, and a commit
        -- older than its offsets says so; no duration then rather than a negative one.
        SELECT checkpoint, batch_id,
               CASE WHEN committed_at >= offsets_written_at
                    THEN CAST(epoch_ms(committed_at) - epoch_ms(offsets_written_at) AS BIGINT)
               END AS duration_ms
        FROM batches WHERE committed AND committed_at IS NOT NULL
                       AND offsets_written_at IS NOT NULL
    """,
    "trigger_intervals": """
        CREATE OR REPLACE VIEW trigger_intervals AS
        SELECT checkpoint, batch_id,
               batch_timestamp_ms - lag(batch_timestamp_ms)
                   OVER (PARTITION BY checkpoint ORDER BY batch_id) AS interval_ms
        FROM batches
    """,
    "watermark_delays": """
        CREATE OR REPLACE VIEW watermark_delays AS
        SELECT checkpoint, batch_id, batch_timestamp_ms, watermark_ms,
               batch_timestamp_ms - watermark_ms AS delay_ms
        FROM batches WHERE watermark_ms IS NOT NULL AND watermark_ms > 0
    """,
    # A batch that only moved the state into another partition count: Spark 4.2+'s offline
    # repartition copies the previous offsets entry and changes spark.sql.shuffle.partitions
    # (the same test as parsers/repartition.py, on the recorded offsets).
    "repartitions": """
        CREATE OR REPLACE VIEW repartitions AS
        SELECT checkpoint, batch_id, partitions_before, shuffle_partitions AS partitions_after
        FROM (
            SELECT checkpoint, batch_id, shuffle_partitions, source_offsets,
                   lag(batch_id) OVER w AS previous_batch,
                   lag(shuffle_partitions) OVER w AS partitions_before,
                   lag(source_offsets) OVER w AS previous_offsets
            FROM batches WINDOW w AS (PARTITION BY checkpoint ORDER BY batch_id)
        )
        WHERE previous_batch = batch_id - 1 AND partitions_before <> shuffle_partitions
          AND source_offsets IS NOT DISTINCT FROM previous_offsets
    """,
    # Each partition at its newest version, among the partitions the store has now: those a
    # repartition dropped keep their last version but are never loaded again.
    "snapshot_lag": """
        CREATE OR REPLACE VIEW snapshot_lag AS
        WITH newest AS (
            SELECT checkpoint, operator_id, store_name, max(version) AS newest_version
            FROM partition_newest GROUP BY ALL
        )
        SELECT p.checkpoint, p.operator_id, p.store_name, p.partition_id,
               p.version AS latest_version, p.versions_since_snapshot, p.replay_bytes
        FROM partition_newest p
        JOIN newest n USING (checkpoint, operator_id, store_name)
        LEFT JOIN batches b ON b.checkpoint = p.checkpoint AND b.batch_id = n.newest_version - 1
        WHERE b.shuffle_partitions IS NULL OR p.partition_id < b.shuffle_partitions
    """,
    # Partial history: Spark purges each partition's old files on its own
    # schedule, so partitions of one store can start at different versions. A total (or a
    # skew) over partitions exists only at versions where every partition is known; elsewhere
    # it is NULL, drawn as a gap, never as a drop. A version has the partition count of the
    # batch that wrote it (a repartition changes it); without that batch's offsets, the store
    # has the larger of the partitions the operators table names and the partitions ever seen
    # (app/metrics.py does the same).
    "store_totals": """
        CREATE OR REPLACE VIEW store_totals AS
        WITH expected AS (
            SELECT n.checkpoint, n.operator_id, n.store_name,
                   greatest(count(*), coalesce(any_value(o.num_partitions), 0)) AS partitions
            FROM partition_newest n
            LEFT JOIN operators o USING (checkpoint, operator_id, store_name)
            GROUP BY n.checkpoint, n.operator_id, n.store_name
        ),
        at_version AS (
            SELECT p.*, coalesce(b.shuffle_partitions, e.partitions) AS partitions
            FROM store_versions p JOIN expected e USING (checkpoint, operator_id, store_name)
            LEFT JOIN batches b ON b.checkpoint = p.checkpoint AND b.batch_id = p.version - 1
        )
        SELECT p.checkpoint, p.operator_id, p.store_name, p.version,
               p.version - 1 AS batch_id, p.known_partitions, p.partitions,
               p.known_partitions >= p.partitions AS complete,
               CASE WHEN p.known_partitions >= p.partitions THEN p.num_keys END AS num_keys,
               CASE WHEN p.known_partitions >= p.partitions THEN p.keys_added END AS keys_added,
               CASE WHEN p.known_partitions >= p.partitions THEN p.keys_updated END
                   AS keys_updated,
               CASE WHEN p.known_partitions >= p.partitions THEN p.keys_removed END
                   AS keys_removed,
               CASE WHEN p.known_partitions >= p.partitions THEN p.delta_bytes END
                   AS delta_bytes,
               CASE WHEN p.known_partitions >= p.partitions THEN p.bytes END AS bytes,
               CASE WHEN p.known_partitions >= p.partitions THEN p.max_keys END AS max_keys,
               CASE WHEN p.known_partitions >= p.partitions THEN p.median_keys END
                   AS median_keys
        FROM at_version p
    """,
    "partition_skew": """
        CREATE OR REPLACE VIEW partition_skew AS
        SELECT checkpoint, operator_id, store_name, version, batch_id, max_keys, median_keys,
               CASE WHEN median_keys > 0 THEN max_keys / median_keys END AS skew
        FROM store_totals
    """,
    "state_growth": """
        CREATE OR REPLACE VIEW state_growth AS
        SELECT checkpoint, operator_id, store_name, version, num_keys, keys_added,
               keys_updated, keys_removed, delta_bytes, batch_id,
               num_keys - lag(num_keys) OVER (
                   PARTITION BY checkpoint, operator_id, store_name ORDER BY version)
                   AS keys_growth
        FROM store_totals
    """,
}

_READ = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)", re.IGNORECASE)
# view -> the tables and views its SQL reads (read from the SQL, not kept by hand).
READS: dict[str, frozenset[str]] = {
    name: frozenset(_READ.findall(sql)) & (set(TABLES) | set(VIEWS)) - {name}
    for name, sql in VIEWS.items()
}
