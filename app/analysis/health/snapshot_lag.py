"""Snapshot lag: versions since the last snapshot, against Spark's own lagging-store rule.

How old a snapshot is comes from the state files' times; on a checkpoint whose file times look
copied (:mod:`~stateglass.app.analysis.clock`) those are the copy's, so it comes from Spark's
``batchTimestampMs`` of the batches that wrote the two versions (version N is batch N-1's).
"""

from __future__ import annotations

import math
from typing import Any

from stateglass.app.analysis.clock import file_times
from stateglass.app.analysis.health.base import (
    ERR,
    OK,
    WARN,
    Context,
    Finding,
)
from stateglass.app.analysis.rewrite_command import rocksdb_move_hint
from stateglass.parsers.units import fmt_bytes, fmt_duration

MIN_DELTAS_CONF = "spark.sql.streaming.stateStore.minDeltasForSnapshot"


_SQL = """
    SELECT l.partition_id, l.latest_version, l.versions_since_snapshot, l.replay_bytes,
           (SELECT max(f.modified_at) FROM state_files f
             WHERE f.checkpoint = l.checkpoint AND f.operator_id = l.operator_id
               AND f.store_name = l.store_name AND f.partition_id = l.partition_id
               AND f.version = l.latest_version) AS latest_mtime,
           (SELECT max(f.modified_at) FROM state_files f
             WHERE f.checkpoint = l.checkpoint AND f.operator_id = l.operator_id
               AND f.store_name = l.store_name AND f.partition_id = l.partition_id
               AND f.version = l.latest_version - l.versions_since_snapshot
               AND f.kind IN ('snapshot', 'zip')) AS snapshot_mtime,
           (SELECT b.batch_timestamp_ms / 1000 FROM batches b
             WHERE b.checkpoint = l.checkpoint AND b.batch_id = l.latest_version - 1)
             AS latest_ran,
           (SELECT b.batch_timestamp_ms / 1000 FROM batches b
             WHERE b.checkpoint = l.checkpoint
               AND b.batch_id = l.latest_version - l.versions_since_snapshot - 1) AS snapshot_ran
    FROM snapshot_lag l
    WHERE l.checkpoint = ? AND l.operator_id = ? AND l.store_name = ?
      AND l.versions_since_snapshot IS NOT NULL
    ORDER BY l.versions_since_snapshot DESC, l.replay_bytes DESC
"""


def _seconds_behind(row: tuple[Any, ...], spark_clock: bool) -> float:
    """Latest version's time minus the snapshot's (infinite without a snapshot): file times,
    or on a copy the batches' ``batchTimestampMs``. A snapshot whose batch is gone from the
    offsets log is older than every batch the checkpoint keeps: infinite too."""
    latest, snapshot = (row[6], row[7]) if spark_clock else (row[4], row[5])
    if snapshot is None:
        return math.inf
    return float((latest or snapshot) - snapshot)


def _age(row: tuple[Any, ...], spark_clock: bool) -> str:
    behind = _seconds_behind(row, spark_clock)
    if spark_clock:
        if math.isinf(behind):
            return "its batch is gone from the offsets log"
        return f"{fmt_duration(behind)} older (Spark's batchTimestampMs)"
    return "its file is gone" if math.isinf(behind) else f"{fmt_duration(behind)} older"


class SnapshotLag:
    id = "snapshot_lag"
    title = "Snapshot lag"
    hint = (
        "Snapshots (HDFS .snapshot, RocksDB .zip with changelog checkpointing) are written by "
        "the executors' maintenance task every spark.sql.streaming.stateStore."
        "maintenanceInterval once minDeltasForSnapshot versions piled up. A long lag means a "
        "slow restart: check that maintenance keeps up (executor logs, "
        "spark.sql.streaming.stateStore.numStateStoreMaintenanceThreads) or lower "
        "minDeltasForSnapshot; if the cluster runs a higher value on purpose, set "
        "[spark] min_deltas_for_snapshot."
    )

    def check(self, ctx: Context) -> list[Finding]:
        cfg = ctx.config.snapshot_lag
        min_deltas, source = ctx.spark_conf(MIN_DELTAS_CONF, "min_deltas_for_snapshot")
        warn_at = cfg.warn_factor * min_deltas
        err_at = cfg.err_factor * min_deltas
        limits = (
            f"WARN above {warn_at:g} = {cfg.warn_factor:g} x minDeltasForSnapshot {min_deltas} "
            f"({source})"
        )
        copied = not file_times(ctx.conn, ctx.checkpoint).trusted
        out: list[Finding] = []
        worst_ok: tuple[int, int, str, tuple[Any, ...]] | None = None
        for store in ctx.stores:
            rows = ctx.rows(_SQL, [store.operator_id, store.store_name])
            if not rows:
                continue
            # Maintenance runs every maintenanceInterval: a fast trigger piles up versions
            # between two runs. Like Spark, a store lags only if behind in versions and time.
            behind = [
                r for r in rows if r[2] > warn_at and _seconds_behind(r, copied) > cfg.min_seconds
            ]
            top = (behind or rows)[0]
            part, latest, lag, replay = top[:4]
            snapshot = (
                f"snapshot at version {latest - lag}, {_age(top, copied)}"
                if lag < latest
                else "none yet"
            )
            text = (
                f"partition {part} is {lag} versions past its last snapshot ({snapshot}; latest "
                f"version {latest}): a restart replays {lag} deltas/changelogs, "
                f"{fmt_bytes(replay)}"
            )
            if behind and lag > err_at:
                status = ERR
            elif behind:
                status = WARN
            else:
                if worst_ok is None or lag > worst_ok[0]:
                    where = f"{store.operator_id}/{store.store_name} p{part}"
                    worst_ok = (lag, latest, where, top)
                continue
            text += (
                f"; {len(behind)} of {len(rows)} partitions lag ({limits}, ERR above {err_at:g}; "
                f"and a snapshot older than {fmt_duration(cfg.min_seconds)})"
            )
            hint = self.hint
            if store.provider == "hdfs":
                hint += " " + rocksdb_move_hint(ctx.checkpoint)
            out.append(ctx.finding(self, status, text, hint, store, part))
        if not out:
            if worst_ok is None:
                text = "no state versions collected"
            else:
                lag, latest, where, top = worst_ok
                text = f"at most {lag} versions since a snapshot ({where}, version {latest})"
                if lag > warn_at:
                    # Past the version limit but not the time one: say why this is still OK.
                    text += (
                        f", but its snapshot is only {_age(top, copied)} than the latest version: "
                        f"maintenance may not have run yet"
                    )
            limits += f", and a snapshot older than {fmt_duration(cfg.min_seconds)}"
            out.append(ctx.finding(self, OK, f"{text}; {limits}"))
        return out
