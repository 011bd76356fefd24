"""Collect Spark's streaming progress (``--progress PATH``) into the progress tables.

PATH is an event-log directory (``spark.eventLog.dir``: single files and rolling
``eventlog_v2_*`` directories, possibly mixed), one rolling directory, or a directory the
StateGlass listener writes (``progress-*.jsonl``). Everything is read through a
:class:`~collectors.fs.FileSystem`. Reads are incremental: ``progress_files`` remembers, per
file, its size and mtime and where decoding resumes, so a growing log costs only its new
events; a file known complete and unchanged is not read at all.

Example::

    collector = ProgressCollector(Database("sg.duckdb"))
    summary = collector.collect("/var/log/spark-events")
    print(summary.line())
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint
from stateglass.collectors.db.progress_tables import (
    DURATION_COLUMNS,
    HDFS_COLUMNS,
    ROCKSDB_COLUMNS,
)
from stateglass.collectors.db.writer import Database
from stateglass.collectors.db.writes import ProgressWrite
from stateglass.collectors.errors import BadProgressPath, CheckpointError, wrap_parse_error
from stateglass.collectors.fs import LOCAL, FileSystem
from stateglass.collectors.limits import active
from stateglass.parsers import eventlog
from stateglass.parsers.errors import ParseError
from stateglass.parsers.limits import DecodeLimits

SOURCE_EVENTLOG = "eventlog"
SOURCE_LISTENER = "listener"


@dataclass(frozen=True)
class ProgressFile:
    """One file to read under a ``--progress`` root."""

    path: str
    codec: str
    source: str  # SOURCE_EVENTLOG or SOURCE_LISTENER
    complete: bool  # will not grow any more
    app_id: str | None
    size: int
    mtime: float
    # An earlier name of the same file (Spark renames ``X.inprogress`` to ``X`` at the end).
    previous_path: str | None = None


@dataclass(frozen=True)
class ProgressSummary:
    root: str
    files_read: int
    progress_events: int
    runs: int

    def line(self) -> str:
        return (
            f"{self.root}: {self.progress_events} progress events from "
            f"{self.files_read} file(s) read, {self.runs} run(s)"
        )


def _join(root: str, name: str) -> str:
    return posixpath.join(root, name) if "://" in root else os.path.join(root, name)


def check_path(fs: FileSystem, root: str) -> str:
    """Validate a ``--progress`` PATH before anything is written; return its normal form.
    Raises ``BadProgressPath`` (one line) when it is missing or a file, ``InsideCheckpoint``
    when it is inside a checkpoint: event logs and listener files never belong there, and
    StateGlass never reads foreign files as state."""
    if "://" not in root:
        root = os.path.abspath(os.path.expanduser(root))
    refuse_inside_checkpoint(root, "--progress", fs=fs)
    list_progress_files(fs, root)
    return root


def check_location(path: str) -> str:
    """:func:`check_path` for a local path or a URL, on the file system its scheme names."""
    from stateglass.collectors.remote import open_location

    fs, root = open_location(path)
    return check_path(fs, root)


def list_progress_files(fs: FileSystem, root: str) -> list[ProgressFile]:
    """Every event-log or listener file under ``root`` (pure listing, no reads)."""
    info = fs.stat(root)
    if info is None:
        raise BadProgressPath(root, "no such directory")
    if not info.is_dir:
        raise BadProgressPath(root, "not a directory (give spark.eventLog.dir or a listener dir)")
    base = posixpath.basename(root.rstrip("/")) if "://" in root else os.path.basename(root)
    if base.startswith(eventlog.ROLLING_DIR_PREFIX):
        return _rolling(fs, root)
    out: list[ProgressFile] = []
    for entry in fs.list(root):
        path = _join(root, entry.name)
        if entry.is_dir:
            if entry.name.startswith(eventlog.ROLLING_DIR_PREFIX):
                out.extend(_rolling(fs, path))
            continue
        if eventlog.LISTENER_FILE.match(entry.name):
            # The listener appends to its newest file only; older ones are complete, but a
            # cheap size check covers both.
            out.append(
                ProgressFile(path, "none", SOURCE_LISTENER, False, None, entry.size, entry.mtime)
            )
            continue
        name = eventlog.single_file_name(entry.name)
        if name is not None:
            previous = path + eventlog.INPROGRESS if not name.in_progress else None
            out.append(
                ProgressFile(
                    path,
                    name.codec,
                    SOURCE_EVENTLOG,
                    not name.in_progress,
                    name.app_id,
                    entry.size,
                    entry.mtime,
                    previous,
                )
            )
    return sorted(out, key=lambda f: f.path)


def _rolling(fs: FileSystem, directory: str) -> list[ProgressFile]:
    entries = fs.list(directory)
    running = any(eventlog.appstatus_in_progress(e.name) for e in entries)
    files = []
    for entry in entries:
        name = eventlog.rolling_file_name(entry.name)
        if name is not None and not entry.is_dir:
            files.append((name.index or 0, name, entry))
    files.sort(key=lambda item: item[0])
    out = []
    for position, (_, name, entry) in enumerate(files):
        # Only the newest file of a running application may still grow.
        complete = not (running and position == len(files) - 1)
        out.append(
            ProgressFile(
                _join(directory, entry.name),
                name.codec,
                SOURCE_EVENTLOG,
                complete,
                name.app_id,
                entry.size,
                entry.mtime,
            )
        )
    return out


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, sort_keys=True, default=str)


def _kafka_lag(progress: eventlog.QueryProgress) -> dict[str, float | None]:
    """The largest ``{avg,max,min}OffsetsBehindLatest`` over the sources (Kafka's only)."""
    kafka: dict[str, list[float]] = {"avg": [], "max": [], "min": []}
    for src in progress.sources:
        for stat in kafka:
            value = src.metrics.get(f"{stat}OffsetsBehindLatest")
            if value is not None:
                with contextlib.suppress(TypeError, ValueError):
                    kafka[stat].append(float(value))
    return {
        f"kafka_{stat}_offsets_behind_latest": max(values, default=None)
        for stat, values in kafka.items()
    }


def _progress_row(
    progress: eventlog.QueryProgress, key: dict[str, Any], source: str, source_path: str
) -> dict[str, Any]:
    row: dict[str, Any] = {
        **key,
        "name": progress.name,
        "timestamp": progress.timestamp,
        "batch_duration_ms": progress.batch_duration_ms,
        "num_input_rows": progress.num_input_rows,
        "input_rows_per_second": progress.input_rows_per_second,
        "processed_rows_per_second": progress.processed_rows_per_second,
    }
    for column in dict.fromkeys(DURATION_COLUMNS.values()):
        row[column] = None
    for part, value in progress.duration_ms.items():
        if part in DURATION_COLUMNS:
            row[DURATION_COLUMNS[part]] = value
    row.update(
        {
            "duration_ms": _json(dict(progress.duration_ms)),
            "event_time_watermark": progress.event_time_watermark,
            "event_time": _json(dict(progress.event_time)) if progress.event_time else None,
            "num_sources": len(progress.sources),
            "sources": _json([s.to_json() for s in progress.sources]),
            **_kafka_lag(progress),
            "sink": _json(progress.sink),
            "observed_metrics": _json(progress.observed_metrics),
            "source": source,
            "source_path": source_path,
        }
    )
    return row


def _state_row(op: eventlog.StateOperatorProgress, key: dict[str, Any]) -> dict[str, Any]:
    """One stateful operator's ``progress_state`` row, its known custom metrics as columns."""
    state: dict[str, Any] = {
        **key,
        "operator_name": op.operator_name,
        "num_rows_total": op.num_rows_total,
        "num_rows_updated": op.num_rows_updated,
        "num_rows_removed": op.num_rows_removed,
        "num_rows_dropped_by_watermark": op.num_rows_dropped_by_watermark,
        "memory_used_bytes": op.memory_used_bytes,
        "commit_time_ms": op.commit_time_ms,
        "all_updates_time_ms": op.all_updates_time_ms,
        "all_removals_time_ms": op.all_removals_time_ms,
        "num_shuffle_partitions": op.num_shuffle_partitions,
        "num_state_store_instances": op.num_state_store_instances,
        "custom_metrics": _json(dict(op.custom_metrics)),
    }
    for column in (*dict.fromkeys(ROCKSDB_COLUMNS.values()), *HDFS_COLUMNS.values()):
        state[column] = None
    for metric, value in op.custom_metrics.items():
        target = ROCKSDB_COLUMNS.get(metric) or HDFS_COLUMNS.get(metric)
        if target is not None:
            state[target] = value
    uploaded = op.snapshot_last_uploaded
    state["snapshot_last_uploaded"] = (
        _json(
            {
                (str(p) if store == "default" else f"{p}/{store}"): version
                for (p, store), version in sorted(uploaded.items())
            }
        )
        if uploaded
        else None
    )
    return state


def progress_rows(
    progress: eventlog.QueryProgress, source: str, source_path: str, app_id: str | None
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``progress`` row, ``progress_state`` rows and ``progress_snapshot_uploads`` rows of
    one progress event."""
    key = {"query_id": progress.query_id, "run_id": progress.run_id, "batch_id": progress.batch_id}
    row = _progress_row(progress, key, source, source_path)
    row["app_id"] = app_id
    states: list[dict[str, Any]] = []
    uploads: list[dict[str, Any]] = []
    for index, op in enumerate(progress.state_operators):
        operator_key = {**key, "operator_index": index}
        states.append(_state_row(op, operator_key))
        for (partition, store), version in sorted(op.snapshot_last_uploaded.items()):
            uploads.append(
                {
                    **operator_key,
                    "partition_id": partition,
                    "store_name": store,
                    "last_uploaded_version": version,
                }
            )
    return row, states, uploads


def _resume_point(before: dict[str, Any] | None, pf: ProgressFile) -> tuple[int, int, int] | None:
    """Where reading ``pf`` resumes: (raw offset, text offset, events read so far); None when
    it need not be read at all."""
    if (
        before is not None
        and before["path"] == pf.path
        and before["complete"]
        and before["size_bytes"] == pf.size
        and before["modified_at"] == pf.mtime
    ):
        return None
    if before is not None and before["size_bytes"] == pf.size and not pf.complete:
        return None  # a growing file that has not grown
    if before is not None and before["size_bytes"] <= pf.size:
        return before["raw_offset"], before["text_offset"], before["events_read"]
    return 0, 0, 0


def _file_row(
    pf: ProgressFile, root: str, result: eventlog.ReadResult, events_read: int
) -> dict[str, Any]:
    """How far ``pf`` was read, so the next read resumes there."""
    return {
        "path": pf.path,
        "root": root,
        "size_bytes": pf.size,
        "modified_at": pf.mtime,
        "raw_offset": result.raw_offset,
        "text_offset": result.text_offset,
        "events_read": events_read + len(result.events),
        # Complete only once every byte was decoded: a cut tail is read again.
        "complete": pf.complete and result.ended,
        "last_read": datetime.now(UTC).replace(tzinfo=None),
    }


class _Reading:
    """The rows of one ``collect``: progress events as rows, and runs from start/end events."""

    def __init__(self) -> None:
        self.write = ProgressWrite()
        self.runs: dict[tuple[str, str], dict[str, Any]] = {}
        self.files_read = 0
        self.events = 0

    def add(self, pf: ProgressFile, events: Iterable[eventlog.StreamingEvent]) -> None:
        for event in events:
            if isinstance(event, eventlog.QueryProgress):
                row, states, uploads = progress_rows(event, pf.source, pf.path, pf.app_id)
                self.write.progress.append(row)
                self.write.progress_state.extend(states)
                self.write.snapshot_uploads.extend(uploads)
                self.events += 1
                continue
            run = self.runs.setdefault(
                (event.query_id, event.run_id),
                {
                    "query_id": event.query_id,
                    "run_id": event.run_id,
                    "app_id": pf.app_id,
                    "source": pf.source,
                    "source_path": pf.path,
                },
            )
            if isinstance(event, eventlog.QueryStarted):
                run.update(name=event.name, started_at=event.timestamp)
            else:
                run.update(
                    terminated_at=event.timestamp or _file_time(pf.mtime),
                    exception=event.exception,
                )

    def finished(self) -> ProgressWrite:
        """The write, rows of one key kept once: progress rows repeat a run's key, and in one
        write the last one counts."""
        write = self.write
        write.progress[:] = list({_key(r): r for r in write.progress}.values())
        write.progress_state[:] = list(
            {(*_key(r), r["operator_index"]): r for r in write.progress_state}.values()
        )
        write.snapshot_uploads[:] = list(
            {
                (*_key(r), r["operator_index"], r["partition_id"], r["store_name"]): r
                for r in write.snapshot_uploads
            }.values()
        )
        write.runs.extend(self.runs.values())
        return write


class ProgressCollector:
    """Reads ``--progress`` roots into the database, incrementally."""

    def __init__(
        self, db: Database, fs: FileSystem = LOCAL, limits: DecodeLimits | None = None
    ) -> None:
        self.db = db
        self.fs = fs
        # How far a compressed log may expand (docs/limits.md): the limits in force.
        self.limits = active() if limits is None else limits

    def check(self, root: str) -> str:
        return check_path(self.fs, root)

    def collect(self, root: str) -> ProgressSummary:
        """Read what is new under ``root`` and write it in one transaction."""
        root = self.check(root)
        known = self.db.progress_files(root)
        reading = _Reading()
        for pf in list_progress_files(self.fs, root):
            before = known.get(pf.path) or (
                known.get(pf.previous_path) if pf.previous_path else None
            )
            resume = _resume_point(before, pf)
            if resume is None:
                continue
            raw_offset, text_offset, events_read = resume
            result = self._read(pf, raw_offset, text_offset)
            reading.files_read += 1
            reading.add(pf, result.events)
            reading.write.files.append(_file_row(pf, root, result, events_read))
        write = reading.finished()
        if write.files:
            self.db.write_progress(write)
        return ProgressSummary(root, reading.files_read, reading.events, len(reading.runs))

    def _read(self, pf: ProgressFile, raw_offset: int, text_offset: int) -> eventlog.ReadResult:
        data = self.fs.read(pf.path)
        try:
            return eventlog.read_events(data, pf.codec, raw_offset, text_offset, self.limits)
        except ParseError as exc:
            raise wrap_parse_error(pf.path, exc) from exc


def _key(row: dict[str, Any]) -> tuple[str, str, int]:
    return (row["query_id"], row["run_id"], row["batch_id"])


def _file_time(mtime: float) -> datetime:
    return datetime.fromtimestamp(mtime, UTC).replace(tzinfo=None)


def collect_all(
    db: Database, roots: Iterable[str], fs: FileSystem | None = None
) -> list[ProgressSummary]:
    """Collect every root (each validated first, so a typo fails before anything is written).

    Without ``fs`` each root's scheme picks its file system (a local path, ``s3://``, …).
    """
    from stateglass.collectors.remote import open_location

    collectors = []
    for root in roots:
        root_fs, canonical = (fs, root) if fs is not None else open_location(root)
        collector = ProgressCollector(db, root_fs)
        collectors.append((collector, collector.check(canonical)))
    return [collector.collect(root) for collector, root in collectors]


__all__ = [
    "CheckpointError",
    "ProgressCollector",
    "ProgressFile",
    "ProgressSummary",
    "check_location",
    "check_path",
    "collect_all",
    "list_progress_files",
    "progress_rows",
]
