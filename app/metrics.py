"""Prometheus gauges read from the history database at scrape time.

:class:`HistoryCollector` is a ``prometheus_client`` custom collector: every scrape opens one
read-only connection (``collectors.db.read.reader``), reads the newest facts of every collected
checkpoint, closes it, then runs the health rules. Nothing is cached between scrapes, so a
gauge is as fresh as the last ``collect`` / ``watch`` commit. ``docs/metrics.md`` lists the
metrics and their labels.

Label cardinality is bounded by what the database holds: one series per checkpoint, per
(checkpoint, operator, store), per (checkpoint, rule) or per (checkpoint, operator). There are
no per-key and no per-partition series.

Example::

    from prometheus_client import CollectorRegistry, generate_latest
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HistoryCollector("~/.stateglass/stateglass.duckdb"))
    print(generate_latest(registry).decode())
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from stateglass.app.analysis.clock import file_times
from stateglass.app.queries.variables import newest_rows_sql
from stateglass.collectors.db.read import reader
from stateglass.collectors.db.schema_versions import schema_of
from stateglass.collectors.errors import CheckpointError, DatabaseError

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from stateglass.app.analysis.health import HealthConfig

# How long a scrape waits for a collector's write lock: Prometheus gives up after 10 s.
SCRAPE_LOCK_TIMEOUT_S = 5.0
# The health rules take a few hundred milliseconds per checkpoint: their verdict is kept until
# the checkpoint's next scan, or this long (time-based rules turn without a scan).
HEALTH_TTL_S = 60.0
# Not judged (SKIP) apart from OK, below it: an alert on "> 0" is unchanged.
STATUS_VALUES = {"SKIP": -1, "OK": 0, "WARN": 1, "ERR": 2}
STORE_LABELS = ("checkpoint", "operator", "store")


@dataclass(frozen=True)
class Gauge:
    """One gauge: its name, help text, labels, and the SQL that gives ``(*labels, value)``."""

    name: str
    help: str
    labels: tuple[str, ...]
    sql: str
    needs: tuple[str, ...] = ()  # tables an older database may lack: the gauge is absent then
    age: bool = False  # the SQL gives a Unix time; serve the seconds since then
    # The SQL gives a second Unix time after the file time, Spark's batchTimestampMs: served
    # instead where the checkpoint's file times look copied (app.analysis.clock).
    spark_clock: bool = False


# Keys are summed at the newest version where every partition of the store has a count: a
# partition whose scan failed, or history collected from a partial copy, must not make the
# total drop. The store_totals view knows how many partitions each version has (a repartition
# changes it).
_STATE_KEYS_SQL = """
    SELECT checkpoint, CAST(operator_id AS VARCHAR) AS operator_id, store_name,
           arg_max(num_keys, version) AS keys, max(version) AS version
    FROM store_totals WHERE complete GROUP BY ALL
"""

# The newest progress event of each checkpoint's query (joined by the metadata query id).
_LAST_PROGRESS = """
    SELECT c.checkpoint, p.*
    FROM checkpoints c JOIN progress p ON p.query_id = c.query_id
    QUALIFY row_number() OVER (
        PARTITION BY c.checkpoint ORDER BY p.timestamp DESC, p.batch_id DESC) = 1
"""

GAUGES: tuple[Gauge, ...] = (
    Gauge(
        "stateglass_state_keys",
        "Keys in the store at its newest version where every partition is known, summed over "
        "partitions. For a transformWithState store these are raw RocksDB keys of every column "
        "family (timers and TTL indexes included): its rows are "
        "stateglass_state_variable_rows.",
        STORE_LABELS,
        f"SELECT checkpoint, operator_id, store_name, keys FROM ({_STATE_KEYS_SQL})",
    ),
    Gauge(
        "stateglass_state_variable_rows",
        "transformWithState: rows of each state variable as Spark's reader returns them "
        "(stateVarName; a ListState one row per element), the registered timers "
        "(role=timers) and TTL index entries (role=ttl index), at each partition's newest "
        "counted version, summed over partitions.",
        (*STORE_LABELS, "state_var", "role"),
        "SELECT checkpoint, CAST(operator_id AS VARCHAR), store_name, column_family, role, rows "
        f"FROM ({newest_rows_sql()})",
        needs=("variable_rows",),
    ),
    Gauge(
        "stateglass_state_variable_raw_keys",
        "transformWithState: raw RocksDB keys of each column family (state variables, timers "
        "and their indexes), at each partition's newest counted version, summed.",
        (*STORE_LABELS, "column_family"),
        "SELECT checkpoint, CAST(operator_id AS VARCHAR), store_name, column_family, raw_keys "
        f"FROM ({newest_rows_sql()})",
        needs=("variable_rows",),
    ),
    Gauge(
        "stateglass_state_version",
        "The state version stateglass_state_keys was counted at (batch id + 1).",
        STORE_LABELS,
        f"SELECT checkpoint, operator_id, store_name, version FROM ({_STATE_KEYS_SQL})",
    ),
    Gauge(
        "stateglass_state_bytes",
        "Bytes of the store's state files on disk at the last scan (purged files excluded).",
        STORE_LABELS,
        "SELECT checkpoint, CAST(operator_id AS VARCHAR), store_name, sum(size_bytes) "
        "FROM state_files WHERE NOT purged GROUP BY ALL",
    ),
    Gauge(
        "stateglass_snapshot_lag_versions_max",
        "The most versions any partition of the store is past its last snapshot (or zip).",
        STORE_LABELS,
        "SELECT checkpoint, CAST(operator_id AS VARCHAR), store_name, "
        "max(versions_since_snapshot) FROM snapshot_lag "
        "WHERE versions_since_snapshot IS NOT NULL GROUP BY ALL",
    ),
    Gauge(
        "stateglass_replay_bytes_max",
        "The most bytes a cold load of any partition's newest version reads (snapshot plus "
        "deltas/changelogs).",
        STORE_LABELS,
        "SELECT checkpoint, CAST(operator_id AS VARCHAR), store_name, max(replay_bytes) "
        "FROM snapshot_lag WHERE replay_bytes IS NOT NULL GROUP BY ALL",
    ),
    Gauge(
        "stateglass_last_commit_age_seconds",
        "Seconds since the newest commits/N file was written (at scrape time). On a "
        "checkpoint whose file times look copied, seconds since the newest committed batch "
        "ran on Spark's clock (its batchTimestampMs).",
        ("checkpoint",),
        "SELECT checkpoint, epoch(max(committed_at)), "
        "arg_max(batch_timestamp_ms, batch_id) / 1000 FROM batches "
        "WHERE committed GROUP BY ALL",
        age=True,
        spark_clock=True,
    ),
    Gauge(
        "stateglass_batch_lag",
        "Batches with offsets written but no commit yet (newest offsets batch minus newest "
        "committed).",
        ("checkpoint",),
        "SELECT checkpoint, lag_batches FROM batch_lag",
    ),
    Gauge(
        "stateglass_last_committed_batch",
        "The newest committed batch id.",
        ("checkpoint",),
        "SELECT checkpoint, last_committed_batch FROM batch_lag "
        "WHERE last_committed_batch IS NOT NULL",
    ),
    Gauge(
        "stateglass_input_rows_per_second",
        "inputRowsPerSecond of the query's newest progress event.",
        ("checkpoint",),
        f"SELECT checkpoint, input_rows_per_second FROM ({_LAST_PROGRESS})",
        needs=("progress",),
    ),
    Gauge(
        "stateglass_processed_rows_per_second",
        "processedRowsPerSecond of the query's newest progress event.",
        ("checkpoint",),
        f"SELECT checkpoint, processed_rows_per_second FROM ({_LAST_PROGRESS})",
        needs=("progress",),
    ),
    Gauge(
        "stateglass_progress_batch",
        "The batch id of the query's newest progress event.",
        ("checkpoint",),
        f"SELECT checkpoint, batch_id FROM ({_LAST_PROGRESS})",
        needs=("progress",),
    ),
    Gauge(
        "stateglass_progress_timestamp_seconds",
        "When the query's newest progress event was reported (Unix time).",
        ("checkpoint",),
        f"SELECT checkpoint, epoch(timestamp) FROM ({_LAST_PROGRESS})",
        needs=("progress",),
    ),
    Gauge(
        "stateglass_rows_dropped_by_watermark",
        "numRowsDroppedByWatermark of each stateful operator in the query's newest progress "
        "event (rows that arrived later than the watermark in that batch). operator is the "
        "operator's index in the progress event's stateOperators.",
        ("checkpoint", "operator"),
        f"""
        SELECT l.checkpoint, CAST(s.operator_index AS VARCHAR), s.num_rows_dropped_by_watermark
        FROM ({_LAST_PROGRESS}) l
        JOIN progress_state s ON s.query_id = l.query_id AND s.run_id = l.run_id
                             AND s.batch_id = l.batch_id
        WHERE s.num_rows_dropped_by_watermark IS NOT NULL
        """,
        needs=("progress", "progress_state"),
    ),
)
HEALTH_GAUGE = "stateglass_health_status"
UP_GAUGE = "stateglass_database_up"
# Every metric name served (for docs and the Grafana test).
METRIC_NAMES: tuple[str, ...] = (*(g.name for g in GAUGES), HEALTH_GAUGE, UP_GAUGE)


class HistoryCollector(Collector):
    """The gauges of ``docs/metrics.md``, read from the database at every scrape."""

    def __init__(
        self,
        db: str,
        config: HealthConfig | None = None,
        clock: Callable[[], float] = time.time,
        lock_timeout_s: float = SCRAPE_LOCK_TIMEOUT_S,
        health_ttl_s: float = HEALTH_TTL_S,
    ) -> None:
        self.db = os.path.abspath(os.path.expanduser(db))
        self.config = config
        self.clock = clock
        self.lock_timeout_s = lock_timeout_s
        self.health_ttl_s = health_ttl_s
        # checkpoint -> (its last_scan, when judged, worst status per rule)
        self._verdicts: dict[str, tuple[Any, float, dict[str, int]]] = {}
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            UP_GAUGE, "1 when the last scrape could read the history database, else 0."
        )
        try:
            families, checkpoints = self._read()
        except (CheckpointError, DatabaseError):
            # A locked or unreadable database: say so in a gauge rather than a 500 page.
            up.add_metric([], 0)
            yield up
            return
        yield from families
        yield self._health(checkpoints)
        up.add_metric([], 1)
        yield up

    def _read(self) -> tuple[list[GaugeMetricFamily], dict[str, Any]]:
        now = self.clock()
        families: list[GaugeMetricFamily] = []
        with reader(self.db, self.lock_timeout_s) as conn:
            schema = schema_of(conn, self.db)
            checkpoints = dict(
                conn.execute("SELECT checkpoint, last_scan FROM checkpoints").fetchall()
            )
            for gauge in GAUGES:
                if schema.lacks(*gauge.needs):
                    continue  # an older database: these gauges are absent, not zero
                family = GaugeMetricFamily(gauge.name, gauge.help, labels=list(gauge.labels))
                for row in conn.execute(gauge.sql).fetchall():
                    value = row[len(gauge.labels)]
                    if gauge.spark_clock and not file_times(conn, row[0]).trusted:
                        value = row[len(gauge.labels) + 1]
                    if value is None:
                        continue
                    if gauge.age:
                        value = now - float(value)
                    family.add_metric([str(v) for v in row[: len(gauge.labels)]], float(value))
                families.append(family)
        return families, checkpoints

    def _health(self, checkpoints: dict[str, Any]) -> GaugeMetricFamily:
        from stateglass.app.analysis.health import RULES

        family = GaugeMetricFamily(
            HEALTH_GAUGE,
            "Worst status of each health rule for the checkpoint: 0 OK, 1 WARN, 2 ERR, -1 not "
            "judged (no progress events, or a stall on a copy no query writes to).",
            labels=["checkpoint", "rule"],
        )
        verdicts = self._verdicts_of(checkpoints)
        for checkpoint in sorted(checkpoints):
            worst = verdicts.get(checkpoint, {})
            for rule in RULES:
                if rule in worst:
                    family.add_metric([checkpoint, rule], worst[rule])
        return family

    def _verdicts_of(self, checkpoints: dict[str, Any]) -> dict[str, dict[str, int]]:
        """Worst status per rule of each checkpoint: kept ones, and after a new scan or
        ``health_ttl_s`` those the watcher stored (judged here only when it has not)."""
        from stateglass.app.analysis.health.stored import stored_many

        with self._lock:  # concurrent scrapes judge once
            now = self.clock()
            out: dict[str, dict[str, int]] = {}
            stale = []
            for checkpoint, last_scan in checkpoints.items():
                kept = self._verdicts.get(checkpoint)
                if kept and kept[0] == last_scan and now - kept[1] < self.health_ttl_s:
                    out[checkpoint] = kept[2]
                else:
                    stale.append(checkpoint)
            if not stale:
                return out
            try:
                found = stored_many(self.db, stale, config=self.config)
            except (CheckpointError, DatabaseError):
                return out  # e.g. a locked database: no health series this scrape
            for checkpoint in stale:
                findings = found.get(checkpoint)
                if findings is None or isinstance(findings, CheckpointError):
                    continue  # e.g. removed between the two reads
                worst: dict[str, int] = {}
                for f in findings:
                    worst[f.rule] = max(worst.get(f.rule, -1), STATUS_VALUES.get(f.status, 0))
                self._verdicts[checkpoint] = (checkpoints[checkpoint], now, worst)
                out[checkpoint] = worst
            return out
