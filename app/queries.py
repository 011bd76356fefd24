"""Read-only queries for the dashboard and the reports: database path in, DataFrame out.

All the SQL the pages need lives here, on top of the views of ``collectors/db.py`` where they
exist. Each call opens a read-only connection for one query (``collectors.db.reader``), which
waits while a collector holds the write lock. Times are naive UTC timestamps.

Example::

    from stateglass.app import queries
    df = queries.state_versions("~/.stateglass/stateglass.duckdb", "/data/cp", 0, "default")
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import pandas as pd

from stateglass.collectors.db import reader

if TYPE_CHECKING:
    import duckdb

# What the pages show for a store: one frame, filtered in SQL by these three columns.
STORE_WHERE = "checkpoint = ? AND operator_id = ? AND store_name = ?"


class _Session:
    """One read-only connection shared by the queries of a :func:`session`, opened lazily."""

    def __init__(self, db: str) -> None:
        self.db = os.path.abspath(os.path.expanduser(db))
        self.stack = ExitStack()
        self.conn: duckdb.DuckDBPyConnection | None = None

    def connection(self) -> duckdb.DuckDBPyConnection:
        if self.conn is None:
            self.conn = self.stack.enter_context(reader(self.db))
        return self.conn


_SESSION: ContextVar[_Session | None] = ContextVar("stateglass_query_session", default=None)


@contextmanager
def session(db: str) -> Iterator[None]:
    """Run the queries inside on one read-only connection: a page's loads open it once.

    Opening costs tens of milliseconds on a big database; a page runs half a dozen queries.
    The connection opens at the first query (none when every load is cached) and closes at
    the end of the block, so a collector waits at most that long for its write lock.
    """
    shared = _Session(db)
    token = _SESSION.set(shared)
    try:
        with shared.stack:
            yield
    finally:
        _SESSION.reset(token)


def _frame(db: str, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
    shared = _SESSION.get()
    if shared is not None and shared.db == os.path.abspath(os.path.expanduser(db)):
        return shared.connection().execute(sql, list(params)).df()
    with reader(db) as conn:
        return conn.execute(sql, list(params)).df()


def data_version(db: str) -> float:
    """Changes whenever a writer commits (the file or its WAL is touched): a cache key.

    0.0 when the database does not exist yet.
    """
    db = os.path.expanduser(db)
    stamps = [os.stat(p).st_mtime for p in (db, db + ".wal") if os.path.exists(p)]
    return max(stamps, default=0.0)


def last_updated(db: str) -> pd.Timestamp | None:
    """When the last scan of any checkpoint finished (naive UTC), or ``None``."""
    if not os.path.exists(os.path.expanduser(db)):
        return None
    value = _frame(db, "SELECT max(last_scan) AS t FROM checkpoints")["t"].iloc[0]
    return None if pd.isna(value) else pd.Timestamp(value)


def checkpoint_overview(db: str) -> pd.DataFrame:
    """One row per collected checkpoint, for the Overview table.

    Columns: checkpoint, query_id, last_scan, last_offset_batch, last_committed_batch,
    lag_batches, uncommitted_batches, last_commit_at (file time), last_trigger_at (the last
    committed batch's batchTimestampMs, Spark's clock), operators (text), total_keys (keys at
    each partition's newest version, all stores), total_bytes and files (state files on disk
    now, purged ones excluded), problems.
    """
    return _frame(
        db,
        """
        WITH newest AS (
            SELECT checkpoint, num_keys FROM state_versions
            QUALIFY row_number() OVER (
                PARTITION BY checkpoint, operator_id, store_name, partition_id
                ORDER BY version DESC) = 1
        ),
        keys AS (SELECT checkpoint, sum(num_keys) AS total_keys FROM newest GROUP BY 1),
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


def size_history(db: str) -> pd.DataFrame:
    """Keys and bytes written per (checkpoint, version), summed over stores and partitions.

    Columns: checkpoint, version, num_keys, bytes (delta + snapshot bytes at the version).
    Both are NULL at a version where some store lacks a partition (``store_totals``), so the
    sparkline shows a gap there rather than a drop.
    """
    return _frame(
        db,
        """
        WITH n AS (
            SELECT checkpoint, count(DISTINCT (operator_id, store_name)) AS stores
            FROM store_totals GROUP BY checkpoint
        )
        SELECT t.checkpoint, t.version,
               CASE WHEN count(*) FILTER (WHERE t.complete) = any_value(n.stores)
                    THEN sum(t.num_keys) END AS num_keys,
               CASE WHEN count(*) FILTER (WHERE t.complete) = any_value(n.stores)
                    THEN sum(t.bytes) END AS bytes
        FROM store_totals t JOIN n USING (checkpoint)
        GROUP BY t.checkpoint, t.version ORDER BY t.checkpoint, t.version
        """,
    )


def store_history(db: str, checkpoint: str, operator_id: int, store_name: str) -> dict[str, Any]:
    """Where one store's collected history starts, and why; ``{}`` without any version.

    Keys: ``first`` / ``last`` (any partition), ``first_complete`` / ``last_complete``
    (every partition known, the range totals are drawn over; ``None`` if no such version),
    ``partitions`` (expected), ``earliest`` (partition -> its first collected version).
    """
    rows = _frame(
        db,
        f"""
        SELECT partition_id, min(version) AS first, max(version) AS last
        FROM state_versions WHERE {STORE_WHERE} GROUP BY partition_id ORDER BY partition_id
        """,
        [checkpoint, operator_id, store_name],
    )
    if rows.empty:
        return {}
    span = _frame(
        db,
        f"""
        SELECT min(version) FILTER (WHERE complete) AS first_complete,
               max(version) FILTER (WHERE complete) AS last_complete,
               max(partitions) AS partitions
        FROM store_totals WHERE {STORE_WHERE}
        """,
        [checkpoint, operator_id, store_name],
    ).iloc[0]

    def _int(value: Any) -> int | None:
        return None if pd.isna(value) else int(value)

    return {
        "first": int(rows["first"].min()),
        "last": int(rows["last"].max()),
        "first_complete": _int(span["first_complete"]),
        "last_complete": _int(span["last_complete"]),
        "partitions": _int(span["partitions"]),
        "earliest": dict(
            zip(rows["partition_id"].astype(int), rows["first"].astype(int), strict=True)
        ),
    }


def history_note(history: dict[str, Any]) -> str:
    """One line saying where a store's history starts and why (plain text, no markup).

    Version 1 is the first a query writes, so a later start means Spark had purged the
    earlier files before StateGlass first collected them.
    """
    if not history:
        return "no state versions collected yet"
    first_complete = history["first_complete"]
    if first_complete is None:
        return (
            f"no version has every one of the {history['partitions']} partitions collected "
            f"(versions {history['first']}..{history['last']}), so no total over partitions "
            "is drawn"
        )
    if first_complete <= 1:
        text = f"history from version 1 (the query's first batch) to {history['last_complete']}"
    else:
        text = (
            f"history from version {first_complete}: earlier versions were purged by Spark "
            "before the first collect"
        )
    ahead = {p: v for p, v in history["earliest"].items() if v < first_complete}
    if ahead:
        parts = ", ".join(f"partition {p} from {v}" for p, v in sorted(ahead.items())[:4])
        more = "" if len(ahead) <= 4 else f" and {len(ahead) - 4} more"
        verb = "reaches" if len(ahead) == 1 else "reach"
        text += (
            f"; {parts}{more} {verb} further back, but totals over partitions start at "
            f"{first_complete}, the first version where all {history['partitions']} are known"
        )
    return text


def stores(db: str, checkpoint: str) -> pd.DataFrame:
    """The checkpoint's (operator, store) pairs as the ``operators`` table has them."""
    return _frame(
        db,
        "SELECT operator_id, operator_name, store_name, num_partitions, provider, key_schema, "
        "value_schema FROM operators WHERE checkpoint = ? ORDER BY operator_id, store_name",
        [checkpoint],
    )


def problems(db: str, checkpoint: str) -> pd.DataFrame:
    """Files a scan could not read: path, kind, message, seen_at."""
    return _frame(
        db,
        "SELECT path, kind, message, seen_at FROM problems WHERE checkpoint = ? ORDER BY path",
        [checkpoint],
    )


def batches(db: str, checkpoint: str) -> pd.DataFrame:
    """One row per batch of the checkpoint, with the metrics of the batch views.

    Columns: batch_id, committed, batch_time (trigger time), watermark (NULL without one),
    offsets_written_at, committed_at, duration_ms, interval_ms, delay_ms, source_offsets.
    """
    return _frame(
        db,
        """
        SELECT b.batch_id, b.committed,
               CASE WHEN b.batch_timestamp_ms IS NOT NULL
                    THEN epoch_ms(b.batch_timestamp_ms) END AS batch_time,
               CASE WHEN b.watermark_ms > 0 THEN epoch_ms(b.watermark_ms) END AS watermark,
               b.offsets_written_at, b.committed_at,
               d.duration_ms, t.interval_ms, w.delay_ms, b.source_offsets
        FROM batches b
        LEFT JOIN batch_durations d USING (checkpoint, batch_id)
        LEFT JOIN trigger_intervals t USING (checkpoint, batch_id)
        LEFT JOIN watermark_delays w USING (checkpoint, batch_id)
        WHERE b.checkpoint = ?
        ORDER BY b.batch_id
        """,
        [checkpoint],
    )


def partition_cells(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Keys and bytes written per (partition, version) of one store: the State page's grids.

    Columns: partition_id, version, num_keys, bytes (delta or changelog plus snapshot or zip).
    A lean :func:`state_versions` for 200 partitions × 1,000 versions.
    """
    return _frame(
        db,
        f"""
        SELECT partition_id, version, num_keys,
               coalesce(delta_bytes, 0) + coalesce(snapshot_bytes, 0) AS bytes
        FROM state_versions WHERE {STORE_WHERE}
        ORDER BY partition_id, version
        """,
        [checkpoint, operator_id, store_name],
    )


def state_versions(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Every (partition, version) row of one store, plus ``batch_id`` and ``bytes``.

    ``bytes`` is what the version wrote: its delta or changelog plus its snapshot or zip.
    """
    return _frame(
        db,
        f"""
        SELECT partition_id, version, version - 1 AS batch_id, num_keys,
               keys_added, keys_updated, keys_removed, delta_bytes, snapshot_bytes,
               coalesce(delta_bytes, 0) + coalesce(snapshot_bytes, 0) AS bytes,
               sst_bytes_live, sst_bytes_uploaded, sst_files_reused,
               versions_since_snapshot, replay_bytes
        FROM state_versions WHERE {STORE_WHERE}
        ORDER BY partition_id, version
        """,
        [checkpoint, operator_id, store_name],
    )


def bytes_by_kind(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Bytes of state files per (version, kind), purged files included, all partitions.

    SST files have no version: they count at the version whose zip first referenced them
    (``sst_bytes_uploaded``). Columns: version, kind, bytes.
    """
    return _frame(
        db,
        f"""
        SELECT version, kind, sum(size_bytes) AS bytes FROM state_files
        WHERE {STORE_WHERE} AND kind <> 'sst' AND version IS NOT NULL
        GROUP BY version, kind
        UNION ALL
        SELECT version, 'sst' AS kind, sum(sst_bytes_uploaded) AS bytes FROM state_versions
        WHERE {STORE_WHERE} AND sst_bytes_uploaded > 0
        GROUP BY version
        ORDER BY version, kind
        """,
        [checkpoint, operator_id, store_name] * 2,
    )


def disk_usage(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """State files on disk now, per kind. Columns: kind, files, bytes, purged_files."""
    return _frame(
        db,
        f"""
        SELECT kind, count(*) FILTER (WHERE NOT purged) AS files,
               coalesce(sum(size_bytes) FILTER (WHERE NOT purged), 0) AS bytes,
               count(*) FILTER (WHERE purged) AS purged_files
        FROM state_files WHERE {STORE_WHERE} GROUP BY kind ORDER BY kind
        """,
        [checkpoint, operator_id, store_name],
    )


def partition_skew(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """The ``partition_skew`` view for one store: version, batch_id, max/median keys, skew."""
    return _frame(
        db,
        f"SELECT version, batch_id, max_keys, median_keys, skew FROM partition_skew "
        f"WHERE {STORE_WHERE} ORDER BY version",
        [checkpoint, operator_id, store_name],
    )


def snapshot_lag(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """The ``snapshot_lag`` view for one store: per partition at its newest version."""
    return _frame(
        db,
        f"SELECT partition_id, latest_version, versions_since_snapshot, replay_bytes "
        f"FROM snapshot_lag WHERE {STORE_WHERE} ORDER BY partition_id",
        [checkpoint, operator_id, store_name],
    )


def state_growth(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """The ``state_growth`` view for one store: keys and key changes per version."""
    return _frame(
        db,
        f"SELECT version, batch_id, num_keys, keys_added, keys_updated, keys_removed, "
        f"delta_bytes, keys_growth FROM state_growth WHERE {STORE_WHERE} ORDER BY version",
        [checkpoint, operator_id, store_name],
    )


def sst_reuse(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """RocksDB versions with a zip: SST bytes uploaded and reused, summed over partitions."""
    return _frame(
        db,
        f"""
        SELECT version, version - 1 AS batch_id,
               sum(sst_bytes_uploaded) AS sst_bytes_uploaded,
               sum(sst_bytes_live - sst_bytes_uploaded) AS sst_bytes_reused,
               sum(sst_files_reused) AS sst_files_reused
        FROM state_versions WHERE {STORE_WHERE} AND sst_bytes_live IS NOT NULL
        GROUP BY version ORDER BY version
        """,
        [checkpoint, operator_id, store_name],
    )


# ---- input per batch, from the source offsets -----------------------------------------------


def _kafka_total(offset: Any) -> int | None:
    """Sum of every topic partition's offset: ``{"topic": {"0": 12, "1": 40}}``."""
    if not isinstance(offset, dict) or not offset:
        return None
    total = 0
    for partitions in offset.values():
        if not isinstance(partitions, dict) or not partitions:
            return None
        for value in partitions.values():
            if not isinstance(value, int) or isinstance(value, bool):
                return None
            # -1 / -2 stand for latest / earliest before a partition was first read.
            total += max(value, 0)
    return total


# The unit of a bare-number offset (the rate source): seconds of generated input, not rows.
RATE_SECONDS = "seconds of rate input (rows = rowsPerSecond × seconds)"


def offset_position(offset_json: str) -> tuple[float, str] | None:
    """Where a source stands, and in what unit, from the offset JSON Spark wrote.

    * Kafka ``{"topic": {"0": 12}}``: the sum of partition offsets, in records.
    * rate-micro-batch ``{"offset": N, "timestamp": T}``: rows generated so far.
    * rate ``N`` (a bare number): seconds since the query started (rows = rowsPerSecond × s).
    * file source ``{"logOffset": N}``: the file-source log batch; see :func:`input_per_batch`.

    ``None`` for any other source.
    """
    try:
        offset = json.loads(offset_json)
    except (TypeError, ValueError):
        return None
    if isinstance(offset, int) and not isinstance(offset, bool):
        # Rows need the source's rowsPerSecond, which the checkpoint does not keep.
        return float(offset), RATE_SECONDS
    if not isinstance(offset, dict):
        return None
    if set(offset) == {"logOffset"} and isinstance(offset["logOffset"], int):
        return float(offset["logOffset"]), "file log"
    if "offset" in offset and "timestamp" in offset and isinstance(offset["offset"], int):
        return float(offset["offset"]), "rows"
    kafka = _kafka_total(offset)
    return None if kafka is None else (float(kafka), "records")


def _file_counts(checkpoint: str, source_id: str) -> dict[int, int]:
    """Files the file source took in each of its log batches, from ``sources/<id>/``."""
    from stateglass.collectors.checkpoint import Checkpoint
    from stateglass.collectors.errors import CollectorError
    from stateglass.parsers.logs import parse_file_source_log

    try:
        cp = Checkpoint.open(checkpoint)
        seen: dict[str, int] = {}
        for info in cp.list_dir("sources", source_id):
            if not info.name.split(".")[0].isdigit() or info.name.endswith((".tmp", ".crc")):
                continue
            for entry in cp.parse(cp.path("sources", source_id, info.name), parse_file_source_log):
                seen[entry.path] = entry.batch_id
    except (CollectorError, OSError):
        return {}
    counts: dict[int, int] = {}
    for batch in seen.values():
        counts[batch] = counts.get(batch, 0) + 1
    return counts


def input_from_offsets(frame: pd.DataFrame, checkpoint: str | None = None) -> pd.DataFrame:
    """Input per batch and source from the ``source_offsets`` column of :func:`batches`.

    A batch's input is its offset minus the previous batch's. For a file source the files are
    counted in the checkpoint's ``sources/`` log when ``checkpoint`` is readable (else the
    batch is skipped). Columns: batch_id, source, amount, unit.
    """
    rows: list[dict[str, Any]] = []
    previous: dict[str, float] = {}
    file_counts: dict[str, dict[int, int]] = {}
    for batch_id, raw in zip(frame["batch_id"], frame["source_offsets"], strict=True):
        try:
            sources = json.loads(raw) if isinstance(raw, str) else []
        except ValueError:
            sources = []
        for source in sources if isinstance(sources, list) else []:
            sid, offset = str(source.get("source_id")), source.get("offset")
            position = offset_position(offset) if isinstance(offset, str) else None
            if position is None:
                continue
            value, unit = position
            before = previous.get(sid)
            previous[sid] = value
            if unit == "file log":
                if checkpoint is None:
                    continue
                # Read the source log once per source (setdefault would read it every batch).
                if sid not in file_counts:
                    file_counts[sid] = _file_counts(checkpoint, sid)
                counts = file_counts[sid]
                start = -1 if before is None else int(before)
                files = sum(counts.get(b, 0) for b in range(start + 1, int(value) + 1))
                if counts:
                    rows.append(_input_row(batch_id, sid, files, "files"))
            elif before is not None:
                rows.append(_input_row(batch_id, sid, value - before, unit))
    return pd.DataFrame(rows, columns=["batch_id", "source", "amount", "unit"])


def _input_row(batch_id: Any, source_id: str, amount: float, unit: str) -> dict[str, Any]:
    return {
        "batch_id": int(batch_id),
        "source": f"source {source_id}",
        "amount": amount,
        "unit": unit,
    }


def input_per_batch(db: str, checkpoint: str) -> pd.DataFrame:
    """:func:`input_from_offsets` on the checkpoint's batches; a lone rate source in rows
    where Spark's progress events give them (:func:`rate_rows`)."""
    frame = input_from_offsets(batches(db, checkpoint), checkpoint)
    if (frame["unit"] == RATE_SECONDS).any():
        frame = rate_rows(frame, progress_sources(db, checkpoint))
    return frame


def progress_sources(db: str, checkpoint: str) -> pd.DataFrame:
    """Per progress event: batch_id, num_input_rows and ``sources`` (Spark's per-source JSON
    list, each with its ``description`` and ``numInputRows``), oldest first."""
    columns = ["batch_id", "num_input_rows", "sources"]
    if not _has_tables(db, "progress"):
        return pd.DataFrame(columns=columns)
    return _frame(
        db,
        """
        SELECT p.batch_id, p.num_input_rows, p.sources
        FROM checkpoints c JOIN progress p ON p.query_id = c.query_id
        WHERE c.checkpoint = ? ORDER BY p.timestamp, p.batch_id
        """,
        [checkpoint],
    )


def _rate_source_rows(events: pd.DataFrame) -> dict[int, float]:
    """numInputRows of the one rate source in each event's ``sources`` list, by batch id.

    Spark describes it as ``RateStreamV2[rowsPerSecond=…]``; an event with no rate source, or
    with several (which of them is which source id is not said), gives nothing.
    """
    out: dict[int, float] = {}
    if "sources" not in events:
        return out
    for batch_id, raw in zip(events["batch_id"], events["sources"], strict=True):
        try:
            sources = json.loads(raw) if isinstance(raw, str) else []
        except ValueError:
            continue
        listed = sources if isinstance(sources, list) else []
        rates = [
            s
            for s in listed
            if isinstance(s, dict) and str(s.get("description", "")).startswith("RateStreamV2")
        ]
        rows = rates[0].get("numInputRows") if len(rates) == 1 else None
        if isinstance(rows, int | float) and not isinstance(rows, bool):
            out[int(batch_id)] = float(rows)  # a retried batch: the newest event wins
    return out


def rate_rows(inputs: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """The rate source's seconds as rows, from each batch's ``numInputRows``.

    The offsets count seconds; rows are rowsPerSecond × seconds, and the checkpoint does not
    keep rowsPerSecond. Progress events count rows per source (``sources``: taken when the
    query has one rate source, matched by its description) and for all sources together
    (``num_input_rows``: taken when the query has one source); only for the batches they cover.
    """
    if events.empty:
        return inputs
    rate_ids = inputs.loc[inputs["unit"] == RATE_SECONDS, "source"].unique()
    by_batch = _rate_source_rows(events) if len(rate_ids) == 1 else {}
    if not by_batch:
        if inputs["source"].nunique() != 1:
            return inputs
        rows = events.dropna(subset=["num_input_rows"]).drop_duplicates("batch_id", keep="last")
        by_batch = dict(zip(rows["batch_id"].astype(int), rows["num_input_rows"], strict=True))
    out = inputs.copy()
    known = (out["unit"] == RATE_SECONDS) & out["batch_id"].isin(by_batch)
    out.loc[known, "amount"] = out.loc[known, "batch_id"].map(by_batch).astype(float)
    out.loc[known, "unit"] = "rows"
    return out


# ---- Spark's progress events (issue 12), joined to the checkpoint by its query id ---------

# How each page says it has no progress source (one line, the same everywhere).
NO_PROGRESS = (
    "No progress events for this query: add `--progress PATH` (a Spark event-log directory, "
    "or the StateGlass listener's) to `stateglass collect`, `watch` or `dashboard`."
)
# durationMs parts drawn in the breakdown, in stacking order; "other" is the rest of
# triggerExecution (Spark's whole batch).
DURATION_PARTS: dict[str, str] = {
    "duration_latest_offset_ms": "latestOffset",
    "duration_get_offset_ms": "getOffset",
    "duration_get_batch_ms": "getBatch",
    "duration_query_planning_ms": "queryPlanning",
    "duration_add_batch_ms": "addBatch",
    "duration_wal_commit_ms": "walCommit",
    "duration_commit_offsets_ms": "commitOffsets",
}
ROCKSDB_METRICS: tuple[str, ...] = (
    "rocksdb_bytes_copied",
    "rocksdb_files_copied",
    "rocksdb_files_reused",
    "rocksdb_flush_latency_ms",
    "rocksdb_compact_latency_ms",
    "rocksdb_checkpoint_latency_ms",
    "rocksdb_pause_latency_ms",
    "rocksdb_write_batch_latency_ms",
    "rocksdb_file_sync_latency_ms",
    "rocksdb_write_stall_latency_ms",
    "rocksdb_block_cache_hits",
    "rocksdb_block_cache_misses",
    "rocksdb_sst_file_size_bytes",
)


def _has_tables(db: str, *names: str) -> bool:
    found = _frame(db, "SELECT table_name FROM duckdb_tables()")
    return set(names) <= set(found["table_name"])


def progress(db: str, checkpoint: str) -> pd.DataFrame:
    """One row per progress event of the checkpoint's query (every run), oldest first.

    Columns: run_id, batch_id, timestamp, num_input_rows, input_rows_per_second,
    processed_rows_per_second, batch_duration_ms, duration_trigger_execution_ms, the
    :data:`DURATION_PARTS` columns, event_time_watermark, kafka_max_offsets_behind_latest,
    rows_dropped_by_watermark (summed over stateful operators). Empty without progress.
    """
    parts = ", ".join(f"p.{c}" for c in DURATION_PARTS)
    columns = [
        "run_id",
        "batch_id",
        "timestamp",
        "num_input_rows",
        "input_rows_per_second",
        "processed_rows_per_second",
        "batch_duration_ms",
        "duration_trigger_execution_ms",
        *DURATION_PARTS,
        "event_time_watermark",
        "kafka_max_offsets_behind_latest",
        "rows_dropped_by_watermark",
    ]
    if not _has_tables(db, "progress", "progress_state"):
        return pd.DataFrame(columns=columns)
    return _frame(
        db,
        f"""
        WITH dropped AS (
            SELECT query_id, run_id, batch_id,
                   sum(num_rows_dropped_by_watermark) AS rows_dropped_by_watermark
            FROM progress_state GROUP BY ALL
        )
        SELECT p.run_id, p.batch_id, p.timestamp, p.num_input_rows, p.input_rows_per_second,
               p.processed_rows_per_second, p.batch_duration_ms,
               p.duration_trigger_execution_ms, {parts}, p.event_time_watermark,
               p.kafka_max_offsets_behind_latest, d.rows_dropped_by_watermark
        FROM checkpoints c
        JOIN progress p ON p.query_id = c.query_id
        LEFT JOIN dropped d
          ON d.query_id = p.query_id AND d.run_id = p.run_id AND d.batch_id = p.batch_id
        WHERE c.checkpoint = ?
        ORDER BY p.timestamp, p.batch_id
        """,
        [checkpoint],
    )


def progress_state(db: str, checkpoint: str, operator_id: int) -> pd.DataFrame:
    """One row per progress event for one stateful operator, oldest first.

    The operator is matched by its index in Spark's ``stateOperators`` list, which is the
    operator id for every plan we have seen (one stateful operator, or a join). Columns:
    run_id, batch_id, timestamp, operator_name, num_rows_total, num_rows_updated,
    num_rows_removed, num_rows_dropped_by_watermark, memory_used_bytes, commit_time_ms,
    all_updates_time_ms, all_removals_time_ms, and the :data:`ROCKSDB_METRICS` columns.
    """
    columns = [
        "run_id",
        "batch_id",
        "timestamp",
        "operator_name",
        "num_rows_total",
        "num_rows_updated",
        "num_rows_removed",
        "num_rows_dropped_by_watermark",
        "memory_used_bytes",
        "commit_time_ms",
        "all_updates_time_ms",
        "all_removals_time_ms",
        *ROCKSDB_METRICS,
    ]
    if not _has_tables(db, "progress", "progress_state"):
        return pd.DataFrame(columns=columns)
    picked = ", ".join(f"s.{c}" for c in columns[3:])
    return _frame(
        db,
        f"""
        SELECT s.run_id, s.batch_id, p.timestamp, {picked}
        FROM checkpoints c
        JOIN progress_state s ON s.query_id = c.query_id
        JOIN progress p
          ON p.query_id = s.query_id AND p.run_id = s.run_id AND p.batch_id = s.batch_id
        WHERE c.checkpoint = ? AND s.operator_index = ?
        ORDER BY p.timestamp, s.batch_id
        """,
        [checkpoint, operator_id],
    )


def snapshot_uploads(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Spark's ``SnapshotLastUploaded`` per partition beside the snapshot the files show.

    From the newest progress event that reports the store: ``reported_version`` is the last
    snapshot version Spark says that partition uploaded (-1: none yet); ``files_version`` is
    the newest snapshot (or zip) version at or below that batch's state version (batch id +
    1) as the collected files say (-1: none), NULL when that version was not collected. Columns:
    partition_id, batch_id, state_version, reported_version, files_version,
    versions_since_snapshot, agree.
    """
    columns = [
        "partition_id",
        "batch_id",
        "state_version",
        "reported_version",
        "files_version",
        "versions_since_snapshot",
        "agree",
    ]
    if not _has_tables(db, "progress", "progress_snapshot_uploads"):
        return pd.DataFrame(columns=columns)
    return _frame(
        db,
        """
        WITH reported AS (
            SELECT u.partition_id, u.batch_id, u.last_uploaded_version
            FROM checkpoints c
            JOIN progress_snapshot_uploads u ON u.query_id = c.query_id
            JOIN progress p
              ON p.query_id = u.query_id AND p.run_id = u.run_id AND p.batch_id = u.batch_id
            WHERE c.checkpoint = ? AND u.operator_index = ? AND u.store_name = ?
            QUALIFY row_number() OVER (
                PARTITION BY u.partition_id ORDER BY p.timestamp DESC, u.batch_id DESC) = 1
        )
        SELECT r.partition_id, r.batch_id, r.batch_id + 1 AS state_version,
               r.last_uploaded_version AS reported_version,
               -- versions_since_snapshot = version: no snapshot yet, which Spark says as -1
               CASE WHEN v.versions_since_snapshot >= v.version THEN -1
                    ELSE v.version - v.versions_since_snapshot END AS files_version,
               v.versions_since_snapshot,
               CASE WHEN v.version IS NOT NULL
                    THEN coalesce(r.last_uploaded_version, -1) = files_version END AS agree
        FROM reported r
        LEFT JOIN state_versions v
          ON v.checkpoint = ? AND v.operator_id = ? AND v.store_name = ?
         AND v.partition_id = r.partition_id AND v.version = r.batch_id + 1
        ORDER BY r.partition_id
        """,
        [checkpoint, operator_id, store_name] * 2,
    )


def progress_overview(db: str) -> pd.DataFrame:
    """The newest 30 progress events of every checkpoint's query, for the Overview cards.

    Columns: checkpoint, batch_id, timestamp, input_rows_per_second,
    processed_rows_per_second, kafka_max_offsets_behind_latest.
    """
    columns = [
        "checkpoint",
        "batch_id",
        "timestamp",
        "input_rows_per_second",
        "processed_rows_per_second",
        "kafka_max_offsets_behind_latest",
    ]
    if not _has_tables(db, "progress"):
        return pd.DataFrame(columns=columns)
    return _frame(
        db,
        """
        SELECT c.checkpoint, p.batch_id, p.timestamp, p.input_rows_per_second,
               p.processed_rows_per_second, p.kafka_max_offsets_behind_latest
        FROM checkpoints c JOIN progress p ON p.query_id = c.query_id
        QUALIFY row_number() OVER (
            PARTITION BY c.checkpoint ORDER BY p.timestamp DESC, p.batch_id DESC) <= 30
        ORDER BY c.checkpoint, p.timestamp, p.batch_id
        """,
    )


# ---- the eviction audit (issue 11, point 2) --------------------------------------------------


def eviction_rules(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """How Spark evicts the store (one row; transformWithState: one per audited variable)."""
    if not _has_tables(db, "eviction_rules"):
        return pd.DataFrame()
    return _frame(
        db,
        "SELECT state_var, operator_name, kind, audited, predicate, event_time_field, cause, "
        f"fix FROM eviction_rules WHERE {STORE_WHERE} ORDER BY state_var",
        [checkpoint, operator_id, store_name],
    )


def eviction_audit(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Per audited version: keys, overdue keys (summed over partitions), the watermark, the
    oldest event time and which partitions hold overdue keys."""
    if not _has_tables(db, "eviction_audit"):
        return pd.DataFrame()
    return _frame(
        db,
        "SELECT state_var, version, version - 1 AS batch_id, max(watermark_ms) AS watermark_ms, "
        "sum(keys) AS keys, sum(overdue_keys) AS overdue_keys, "
        "count(overdue_keys) AS audited_partitions, count(*) AS partitions, "
        "min(oldest_event_ms) AS oldest_event_ms, "
        "string_agg(partition_id::VARCHAR, ',' ORDER BY partition_id) "
        "FILTER (WHERE overdue_keys > 0) AS overdue_partitions "
        f"FROM eviction_audit WHERE {STORE_WHERE} GROUP BY state_var, version "
        "ORDER BY state_var, version",
        [checkpoint, operator_id, store_name],
    )


# ---- restart cost (issue 11, point 4) --------------------------------------------------------


def live_state_files(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """State files on disk now (not purged). Columns: partition_id, version, kind, size_bytes."""
    return _frame(
        db,
        f"""
        SELECT partition_id, version, kind, size_bytes FROM state_files
        WHERE {STORE_WHERE} AND NOT purged ORDER BY partition_id, version, kind
        """,
        [checkpoint, operator_id, store_name],
    )


def restart_facts(db: str, checkpoint: str, operator_id: int, store_name: str) -> pd.DataFrame:
    """Per (partition, version): the sizes and key counts the restart-cost model reads."""
    return _frame(
        db,
        f"""
        SELECT partition_id, version, num_keys, keys_added, keys_updated, keys_removed,
               delta_bytes, snapshot_bytes, sst_bytes_live, sst_files_live
        FROM state_versions WHERE {STORE_WHERE}
        ORDER BY partition_id, version
        """,
        [checkpoint, operator_id, store_name],
    )
