"""The one writer of the history database: every change to its rows goes through here.

Writes go through one method per kind of write, each taking a frozen dataclass of rows
(:mod:`stateglass.collectors.db.writes`) and writing it in one transaction:
:meth:`Database.record_scan` (:class:`ScanWrite`, one scan of a checkpoint) and
:meth:`Database.write_progress` (:class:`ProgressWrite`, one read of progress files).
:meth:`Database.known` and :meth:`Database.progress_files` tell a collector what earlier runs
recorded, so that it reads only what changed. The writer hands out no connection; readers open
their own (:mod:`stateglass.collectors.db.read`). Opening a ``Database`` upgrades a database an
older StateGlass wrote (:mod:`stateglass.collectors.db.schema_versions`).

Example::

    db = Database("stateglass.duckdb")
    known = db.known("/cp")  # what earlier scans of /cp recorded
    db.record_scan(ScanWrite(root="/cp", now=now, checkpoint={...}, batch_offsets=[...]))
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from stateglass.collectors.db import connection
from stateglass.collectors.db.history_rollup import maintain_checkpoint, record_history
from stateglass.collectors.db.history_settings import HistorySettings
from stateglass.collectors.db.schema_versions import upgrade
from stateglass.collectors.db.upsert import delete_where, upsert
from stateglass.collectors.db.writes import (
    Chain,
    KnownScan,
    MaintainResult,
    ProgressWrite,
    ScanWrite,
)

if TYPE_CHECKING:
    import duckdb

_OFFSET_COLUMNS = (
    "batch_timestamp_ms,watermark_ms,offsets_written_at,source_offsets,provider,codec,"
    "shuffle_partitions,state_format_versions"
)
_COMMIT_COLUMNS = "committed,committed_at,next_watermark_ms"
# A checkpoint's first_seen, a schema digest's first_seen and first_batch: when it appeared.
_CHECKPOINT_COLUMNS = "query_id,last_scan,pinned_conf,rewritten_at_batch"
_SCHEMA_FILE_COLUMNS = "size_bytes,modified_at,last_seen"
_RUN_COLUMNS = (
    "query_id",
    "run_id",
    "name",
    "app_id",
    "started_at",
    "terminated_at",
    "exception",
    "source",
    "source_path",
)


def _watermarks(rows: Callable[..., list[tuple[Any, ...]]], oldest: int) -> dict[int, int | None]:
    """batch -> watermark of the batches that wrote version ``oldest`` and later; and of the
    newest older batch with a watermark, if any: whether the query ever had a watermark
    decides how its eviction rules read."""
    out = dict(
        rows(
            "SELECT batch_id, watermark_ms FROM batches WHERE checkpoint = ? AND batch_id >= ?",
            oldest - 1,
        )
    )
    out.update(
        rows(
            "SELECT batch_id, watermark_ms FROM batches WHERE checkpoint = ? AND batch_id < ? "
            "AND watermark_ms > 0 ORDER BY batch_id DESC LIMIT 1",
            oldest - 1,
        )
    )
    return out


def _rows_by_chain(
    rows: Sequence[tuple[Any, ...]],
) -> dict[Chain, dict[int, Any]]:
    """``(operator, store, partition, version, value)`` rows as chain -> version -> value."""
    out: dict[Chain, dict[int, Any]] = {}
    for op, store, part, version, value in rows:
        out.setdefault((op, store, part), {})[version] = value
    return out


class Database:
    """The writer. One instance per process; transactions are short and serialized."""

    def __init__(
        self,
        path: str,
        lock_timeout_s: float | None = None,
        history: HistorySettings | None = None,
    ) -> None:
        self.path = connection.database_path(path)
        self.lock_timeout_s = (
            connection.DEFAULT_LOCK_TIMEOUT_S if lock_timeout_s is None else lock_timeout_s
        )
        self.history = history or HistorySettings()
        self._lock = threading.Lock()
        # checkpoint -> versions written since this writer last maintained its history
        self._since_maintained: dict[str, int] = {}
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        with self._transaction() as conn:
            upgrade(conn, self.history.rollup_versions)

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A read-write connection inside BEGIN … COMMIT, closed afterwards (releasing the lock)."""
        with self._lock:
            conn = connection.connect(self.path, read_only=False, timeout_s=self.lock_timeout_s)
            try:
                conn.execute("BEGIN TRANSACTION")
                try:
                    yield conn
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            finally:
                conn.close()

    # -- checkpoint scans ------------------------------------------------------------------

    def known(self, root: str) -> KnownScan:
        """What earlier scans of the checkpoint ``root`` recorded (empty for a new one).

        Only what a scan can meet again is read: the versions, and the batches' watermarks,
        from the oldest state file still on disk on. A month of history keeps a week of
        partition rows (millions) beside a hundred versions of files; a scan only ever
        counts versions it finds files of, and audits those."""
        with self._transaction() as conn:

            def rows(sql: str, *more: Any) -> list[tuple[Any, ...]]:
                return conn.execute(sql, [root, *more]).fetchall()

            state_files = rows(
                "SELECT path, size_bytes, modified_at, version FROM state_files "
                "WHERE checkpoint = ? AND NOT purged"
            )
            # No live file (a new checkpoint, or every file purged): nothing to bound by.
            oldest = min((v for *_, v in state_files if v is not None), default=0)
            versions = rows(
                "SELECT operator_id, store_name, partition_id, version, sst_bytes_live "
                "FROM state_versions WHERE checkpoint = ? AND version >= ?",
                oldest,
            )
            return KnownScan(
                log_files={
                    p: (s, m)
                    for p, s, m in rows(
                        "SELECT path, size_bytes, modified_at FROM log_files WHERE checkpoint = ?"
                    )
                },
                state_files={p: (s, m) for p, s, m, _ in state_files},
                versions={c: set(v) for c, v in _rows_by_chain(versions).items()},
                sst_bytes_live=_rows_by_chain([r for r in versions if r[4] is not None]),
                watermarks=_watermarks(rows, oldest),
                problem_paths=frozenset(
                    p for (p,) in rows("SELECT path FROM problems WHERE checkpoint = ?")
                ),
            )

    def record_scan(self, write: ScanWrite) -> None:
        """Write one scan of one checkpoint in one transaction: a scan is recorded whole or not
        at all, so a failed write is scanned again next time."""
        with self._transaction() as conn:
            _record_checkpoint(conn, write)
            _record_files(conn, write)
            _record_problems(conn, write)
            _record_facts(conn, write)
            record_history(conn, write, self.history.rollup_versions)
        # Retention runs in a transaction of its own after the scan's, every so many versions:
        # the scan's rows are committed (and readable) first, whatever maintaining costs.
        versions = len({r["version"] for r in write.state_versions})
        written = self._since_maintained.get(write.root, 0) + versions
        self._since_maintained[write.root] = written
        if self.history.enabled and written >= self.history.maintain_every:
            self.maintain(write.root)

    def record_problems(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Add problem rows found after their scan was written (a watcher's checksum checks,
        :mod:`collectors.scan.late_checks`), in one transaction."""
        with self._transaction() as conn:
            upsert(conn, "problems", rows)

    # -- history ---------------------------------------------------------------------------

    def maintain(self, root: str | None = None) -> list[MaintainResult]:
        """Apply retention, roll-ups and file compaction
        (:mod:`stateglass.collectors.db.history_settings`)
        to the checkpoint ``root``, or to every checkpoint; one transaction per checkpoint."""
        with self._transaction() as conn:
            roots = (
                [root]
                if root is not None
                else [r for (r,) in conn.execute("SELECT checkpoint FROM checkpoints").fetchall()]
            )
        out = []
        for one in roots:
            with self._transaction() as conn:
                out.append(
                    maintain_checkpoint(
                        conn, one, self.history, datetime.now(UTC).replace(tzinfo=None)
                    )
                )
            self._since_maintained[one] = 0
        return out

    def record_verdicts(
        self, judged: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]
    ) -> None:
        """Replace one checkpoint's stored health verdicts (``health_judged`` row ``judged``,
        its ``health_findings`` rows) in one transaction."""
        with self._transaction() as conn:
            root = judged["checkpoint"]
            delete_where(conn, "health_findings", {"checkpoint": root})
            upsert(conn, "health_judged", [judged])
            upsert(conn, "health_findings", findings)

    # -- progress --------------------------------------------------------------------------

    def progress_files(self, root: str) -> dict[str, dict[str, Any]]:
        """What is known of the files under one ``--progress`` root: path -> its
        ``progress_files`` row (size, mtime, where to resume, complete)."""
        with self._transaction() as conn:
            cur = conn.execute("SELECT * FROM progress_files WHERE root = ?", [root])
            names = [d[0] for d in cur.description]
            return {row[0]: dict(zip(names, row, strict=True)) for row in cur.fetchall()}

    def write_progress(self, batch: ProgressWrite) -> None:
        """Upsert one read of progress files in one transaction: the rows, the runs, and how
        far each file was read (so a failed write is re-read next time, never half-kept)."""
        with self._transaction() as conn:
            upsert(conn, "progress", batch.progress)
            upsert(conn, "progress_state", batch.progress_state)
            upsert(conn, "progress_snapshot_uploads", batch.snapshot_uploads)
            for run in batch.runs:
                _upsert_run(conn, run)
            upsert(conn, "progress_files", batch.files)


def _record_checkpoint(conn: duckdb.DuckDBPyConnection, write: ScanWrite) -> None:
    """The checkpoint's own row, its operators and its batches."""
    upsert(conn, "checkpoints", [write.checkpoint], on_conflict=_CHECKPOINT_COLUMNS)
    if write.operators:
        delete_where(conn, "operators", {"checkpoint": write.root})
        upsert(conn, "operators", write.operators)
    upsert(conn, "batches", write.batch_offsets, on_conflict=_OFFSET_COLUMNS)
    upsert(conn, "batches", write.batch_commits, on_conflict=_COMMIT_COLUMNS)


def _record_files(conn: duckdb.DuckDBPyConnection, write: ScanWrite) -> None:
    """Log and state files as listed now, and the versions counted; history is never deleted:
    a state file that went away is marked purged."""
    upsert(conn, "log_files", write.log_files)
    if write.logs_removed:
        conn.execute(
            "DELETE FROM log_files WHERE checkpoint = ? AND path IN (SELECT unnest(?::VARCHAR[]))",
            [write.root, list(write.logs_removed)],
        )
    upsert(conn, "state_files", write.state_files)
    if write.state_files_purged:
        # One statement joined against the list: a commit that lets Spark's maintenance purge
        # thousands of files would otherwise pay one indexed UPDATE per file.
        conn.execute(
            "UPDATE state_files SET purged = TRUE, purged_at = ? "
            "WHERE checkpoint = ? AND path IN (SELECT unnest(?::VARCHAR[]))",
            [write.now, write.root, list(write.state_files_purged)],
        )
    upsert(conn, "state_versions", write.state_versions)


def _record_problems(conn: duckdb.DuckDBPyConnection, write: ScanWrite) -> None:
    """This scan's verdicts replace the old ones on the files it judged again."""
    if write.rejudged:
        conn.execute(
            "DELETE FROM problems WHERE checkpoint = ? AND list_contains(?::VARCHAR[], path)",
            [write.root, list(write.rejudged)],
        )
    # `metadata`, schema files and operator metadata are read at every scan: this scan's
    # problems with them replace the old ones (a repaired file loses its row).
    conn.execute(
        "DELETE FROM problems WHERE checkpoint = ? AND (path = ? "
        "OR contains(path, '/_metadata/') OR contains(path, '/_stateSchema/'))",
        [write.root, write.metadata_path],
    )
    upsert(conn, "problems", write.problems)


def _record_facts(conn: duckdb.DuckDBPyConnection, write: ScanWrite) -> None:
    """What the health rules need beyond key counts, and the eviction audit."""
    upsert(conn, "sst_refs", write.sst_refs, on_conflict="last_version")
    if write.temp_files_listed:
        _record_temp_files(conn, write)
    upsert(conn, "schema_files", write.schema_files, on_conflict=_SCHEMA_FILE_COLUMNS)
    # Eviction rules follow the schemas: replaced. Audit rows are of the versions just counted.
    delete_where(conn, "eviction_rules", {"checkpoint": write.root})
    upsert(conn, "eviction_rules", write.eviction_rules)
    upsert(conn, "eviction_audit", write.eviction_audit)
    upsert(conn, "variable_rows", write.variable_rows)


def _record_temp_files(conn: duckdb.DuckDBPyConnection, write: ScanWrite) -> None:
    """Temp files are a snapshot of now: those renamed or deleted since the last scan go."""
    first_seen = dict(
        conn.execute(
            "SELECT path, first_seen FROM temp_files WHERE checkpoint = ?", [write.root]
        ).fetchall()
    )
    delete_where(conn, "temp_files", {"checkpoint": write.root})
    upsert(
        conn,
        "temp_files",
        [{**r, "first_seen": first_seen.get(r["path"], r["first_seen"])} for r in write.temp_files],
    )


def _upsert_run(conn: duckdb.DuckDBPyConnection, run: Mapping[str, Any]) -> None:
    """A run's start and end come from different events, possibly different reads: keep what
    an earlier read knew when this one does not say."""
    keep = ", ".join(
        f"{c} = coalesce(excluded.{c}, {c})"
        for c in ("name", "app_id", "started_at", "terminated_at", "exception")
    )
    conn.execute(
        "INSERT INTO progress_runs BY NAME SELECT "
        + ", ".join(f"? AS {c}" for c in _RUN_COLUMNS)
        + f" ON CONFLICT (query_id, run_id) DO UPDATE SET {keep}, "
        "source = excluded.source, source_path = excluded.source_path",
        [run.get(c) for c in _RUN_COLUMNS],
    )
