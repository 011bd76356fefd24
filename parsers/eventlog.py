"""Spark's streaming progress events, from event logs and StateGlass listener files.

An event log (``spark.eventLog.dir``) is one JSON event per line, compressed as a whole by a
Spark codec. Two layouts:

* a single file ``<appId>[_<attempt>][.<codec>][.inprogress]``;
* Spark 4's rolling directory ``eventlog_v2_<appId>[_<attempt>]/`` holding
  ``events_<N>_<appId>[.<codec>]`` (each its own compressed stream) and an empty
  ``appstatus_<appId>[.inprogress]`` marker: while it ends in ``.inprogress``, the
  highest-numbered events file is still growing.

Only the streaming listener events are decoded: ``...StreamingQueryListener$QueryProgressEvent``
(its ``progress`` as Jackson writes ``StreamingQueryProgress``: offsets as JSON *strings*, no
top-level ``numInputRows``/rates), ``QueryStartedEvent`` and ``QueryTerminatedEvent``. Listener
files (``app/listener/stateglass_listener.py``) hold ``StreamingQueryProgress.json`` lines
(offsets as JSON values, rates rounded to 0.1) and ``{"stateglassEvent": ...}`` lines.

Example::

    >>> line = b'{"Event":"SparkListenerLogStart","Spark Version":"4.3.0"}\\n{"Ev'
    >>> result = read_events(line, "none")
    >>> result.events, result.text_offset
    ((), 58)
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from stateglass.parsers.compression import iter_blocks
from stateglass.parsers.errors import CorruptData
from stateglass.parsers.limits import DEFAULT_LIMITS, DecodeLimits

_EVENT_PREFIX = "org.apache.spark.sql.streaming.StreamingQueryListener$"
PROGRESS_EVENT = _EVENT_PREFIX + "QueryProgressEvent"
STARTED_EVENT = _EVENT_PREFIX + "QueryStartedEvent"
TERMINATED_EVENT = _EVENT_PREFIX + "QueryTerminatedEvent"
# A cheap test on the raw line before json.loads: most of an event log is task and SQL events.
_INTERESTING = (b"StreamingQueryListener$Query", b'"stateglassEvent"', b'"runId"')

CODEC_SUFFIXES = ("zstd", "lz4", "snappy", "lzf")
INPROGRESS = ".inprogress"
ROLLING_DIR_PREFIX = "eventlog_v2_"
_EVENTS_FILE = re.compile(r"^events_(\d+)_(.+?)(?:\.(zstd|lz4|snappy|lzf))?$")
_APPSTATUS = re.compile(r"^appstatus_(.+?)(\.inprogress)?$")
LISTENER_FILE = re.compile(r"^progress-.*\.jsonl$")
SNAPSHOT_LAST_UPLOADED = re.compile(r"^SnapshotLastUploaded\.partition_(\d+)_(.+)$")


# -- file names ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LogFileName:
    """What an event-log file's name says."""

    app_id: str
    codec: str  # a short name of compression.CODECS, or compression.UNCOMPRESSED
    in_progress: bool
    index: int | None = None  # N of a rolling ``events_N_`` file


def single_file_name(name: str) -> LogFileName | None:
    """Parse a single-file event log name (None for what Spark would not have written)."""
    if name.startswith((".", "_")) or name.endswith(".crc"):
        return None
    in_progress = name.endswith(INPROGRESS)
    base = name[: -len(INPROGRESS)] if in_progress else name
    codec = "none"
    stem, _, suffix = base.rpartition(".")
    if stem and suffix in CODEC_SUFFIXES:
        base, codec = stem, suffix
    if not base or "." in base or base.startswith(("events_", "appstatus_")):
        return None
    return LogFileName(base, codec, in_progress)


def rolling_file_name(name: str) -> LogFileName | None:
    """Parse ``events_<N>_<appId>[.<codec>]`` inside a rolling directory."""
    match = _EVENTS_FILE.match(name)
    if match is None:
        return None
    return LogFileName(match.group(2), match.group(3) or "none", False, int(match.group(1)))


def appstatus_in_progress(name: str) -> bool | None:
    """For an ``appstatus_<appId>[.inprogress]`` marker: is the application still running?
    None when ``name`` is not a marker."""
    match = _APPSTATUS.match(name)
    return None if match is None else match.group(2) is not None


# -- records ------------------------------------------------------------------------------


def parse_time(value: Any) -> datetime | None:
    """Spark's ``2024-01-01T00:00:07.000Z`` as a naive UTC datetime (None when absent)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise CorruptData(f"progress: bad timestamp {value!r}") from exc
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def _json_value(value: Any) -> Any:
    """Offsets are JSON strings in event logs and JSON values in ``.json``: one shape."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value == value else None
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if value == value else None  # NaN means "no rate"
    if isinstance(value, str):
        try:
            parsed = float(value)
        except ValueError:
            return None
        return parsed if parsed == parsed else None
    return None


@dataclass(frozen=True)
class SourceProgress:
    """One entry of ``sources``; offsets are decoded JSON values (None when absent)."""

    description: str | None
    start_offset: Any
    end_offset: Any
    latest_offset: Any
    num_input_rows: int | None
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    metrics: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> SourceProgress:
        return cls(
            description=obj.get("description"),
            start_offset=_json_value(obj.get("startOffset")),
            end_offset=_json_value(obj.get("endOffset")),
            latest_offset=_json_value(obj.get("latestOffset")),
            num_input_rows=_int(obj.get("numInputRows")),
            input_rows_per_second=_float(obj.get("inputRowsPerSecond")),
            processed_rows_per_second=_float(obj.get("processedRowsPerSecond")),
            metrics=dict(obj.get("metrics") or {}),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "description": self.description,
            "startOffset": self.start_offset,
            "endOffset": self.end_offset,
            "latestOffset": self.latest_offset,
            "numInputRows": self.num_input_rows,
            "inputRowsPerSecond": self.input_rows_per_second,
            "processedRowsPerSecond": self.processed_rows_per_second,
            "metrics": dict(self.metrics),
        }


@dataclass(frozen=True)
class StateOperatorProgress:
    """One entry of ``stateOperators``."""

    operator_name: str | None
    num_rows_total: int | None
    num_rows_updated: int | None
    num_rows_removed: int | None
    num_rows_dropped_by_watermark: int | None
    memory_used_bytes: int | None
    commit_time_ms: int | None
    all_updates_time_ms: int | None
    all_removals_time_ms: int | None
    num_shuffle_partitions: int | None
    num_state_store_instances: int | None
    custom_metrics: Mapping[str, int | None] = field(default_factory=dict)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> StateOperatorProgress:
        return cls(
            operator_name=obj.get("operatorName"),
            num_rows_total=_int(obj.get("numRowsTotal")),
            num_rows_updated=_int(obj.get("numRowsUpdated")),
            num_rows_removed=_int(obj.get("numRowsRemoved")),
            num_rows_dropped_by_watermark=_int(obj.get("numRowsDroppedByWatermark")),
            memory_used_bytes=_int(obj.get("memoryUsedBytes")),
            commit_time_ms=_int(obj.get("commitTimeMs")),
            all_updates_time_ms=_int(obj.get("allUpdatesTimeMs")),
            all_removals_time_ms=_int(obj.get("allRemovalsTimeMs")),
            num_shuffle_partitions=_int(obj.get("numShufflePartitions")),
            num_state_store_instances=_int(obj.get("numStateStoreInstances")),
            custom_metrics={str(k): _int(v) for k, v in (obj.get("customMetrics") or {}).items()},
        )

    @property
    def snapshot_last_uploaded(self) -> dict[tuple[int, str], int | None]:
        """Spark 4.x: (partition, store name) -> last snapshot version uploaded (-1: none)."""
        out: dict[tuple[int, str], int | None] = {}
        for key, value in self.custom_metrics.items():
            match = SNAPSHOT_LAST_UPLOADED.match(key)
            if match is not None:
                out[(int(match.group(1)), match.group(2))] = value
        return out


@dataclass(frozen=True)
class QueryProgress:
    """One ``StreamingQueryProgress``: a finished trigger of one run of a query."""

    query_id: str
    run_id: str
    name: str | None
    batch_id: int
    timestamp: datetime | None
    batch_duration_ms: int | None
    num_input_rows: int | None
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    duration_ms: Mapping[str, int | None]
    event_time: Mapping[str, str]
    event_time_watermark: datetime | None
    state_operators: tuple[StateOperatorProgress, ...]
    sources: tuple[SourceProgress, ...]
    sink: Mapping[str, Any] | None
    observed_metrics: Mapping[str, Any] | None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> QueryProgress:
        """From ``StreamingQueryProgress.json`` or the event log's Jackson form."""
        try:
            query_id, run_id, batch_id = str(obj["id"]), str(obj["runId"]), obj["batchId"]
        except KeyError as exc:
            raise CorruptData(f"progress: no {exc.args[0]!r} field") from exc
        if not isinstance(batch_id, int):
            raise CorruptData(f"progress: batchId {batch_id!r} is not an integer")
        sources = tuple(SourceProgress.from_json(s) for s in obj.get("sources") or ())
        event_time = {str(k): str(v) for k, v in (obj.get("eventTime") or {}).items()}

        # The event log has no top-level totals (Jackson skips Scala defs): Spark defines
        # them as sums over the sources.
        def total(key: str, per_source: list[float | None]) -> float | None:
            if key in obj:
                return _float(obj[key])
            known = [v for v in per_source if v is not None]
            return sum(known) if known else None

        num_rows = total("numInputRows", [s.num_input_rows for s in sources])
        observed = obj.get("observedMetrics")
        return cls(
            query_id=query_id,
            run_id=run_id,
            name=obj.get("name"),
            batch_id=batch_id,
            timestamp=parse_time(obj.get("timestamp")),
            batch_duration_ms=_int(obj.get("batchDuration")),
            num_input_rows=None if num_rows is None else int(num_rows),
            input_rows_per_second=total(
                "inputRowsPerSecond", [s.input_rows_per_second for s in sources]
            ),
            processed_rows_per_second=total(
                "processedRowsPerSecond", [s.processed_rows_per_second for s in sources]
            ),
            duration_ms={str(k): _int(v) for k, v in (obj.get("durationMs") or {}).items()},
            event_time=event_time,
            event_time_watermark=parse_time(event_time.get("watermark")),
            state_operators=tuple(
                StateOperatorProgress.from_json(op) for op in obj.get("stateOperators") or ()
            ),
            sources=sources,
            sink=_sink(obj.get("sink")),
            observed_metrics=dict(observed) if observed else None,
        )


def _sink(obj: Any) -> dict[str, Any] | None:
    """One shape from both writers: ``.json`` leaves out an empty ``metrics``, Jackson not."""
    if not isinstance(obj, dict):
        return None
    return {**obj, "metrics": dict(obj.get("metrics") or {})}


@dataclass(frozen=True)
class QueryStarted:
    """A run of a query started (``QueryStartedEvent``)."""

    query_id: str
    run_id: str
    name: str | None
    timestamp: datetime | None


@dataclass(frozen=True)
class QueryTerminated:
    """A run ended; ``exception`` is None when it stopped cleanly."""

    query_id: str
    run_id: str
    exception: str | None
    timestamp: datetime | None


StreamingEvent = QueryProgress | QueryStarted | QueryTerminated


def event_from_json(obj: Mapping[str, Any]) -> StreamingEvent | None:
    """The streaming event a decoded line holds, or None for any other Spark event."""
    kind = obj.get("Event") or obj.get("stateglassEvent")
    if kind == PROGRESS_EVENT:
        progress = obj.get("progress")
        if not isinstance(progress, dict):
            raise CorruptData("QueryProgressEvent without a progress object")
        return QueryProgress.from_json(progress)
    if kind in (STARTED_EVENT, "QueryStarted"):
        return QueryStarted(
            str(obj.get("id")),
            str(obj.get("runId")),
            obj.get("name"),
            parse_time(obj.get("timestamp")),
        )
    if kind in (TERMINATED_EVENT, "QueryTerminated"):
        exception = obj.get("exception")
        return QueryTerminated(
            str(obj.get("id")),
            str(obj.get("runId")),
            None if exception is None else str(exception),
            parse_time(obj.get("timestamp")),
        )
    if kind is None and "runId" in obj and "batchId" in obj:
        return QueryProgress.from_json(obj)  # a listener's progress line
    return None


# -- reading a (growing) file -------------------------------------------------------------


@dataclass(frozen=True)
class ReadResult:
    """The events of the complete lines read, and where the next read resumes.

    ``raw_offset``/``text_offset``: restart decoding at that byte of the file and skip that
    many decoded bytes. ``ended``: the compressed stream had nothing cut at its end.
    """

    events: tuple[StreamingEvent, ...]
    raw_offset: int
    text_offset: int
    lines_read: int
    ended: bool


def parse_lines(text: bytes, base: int = 0) -> tuple[list[StreamingEvent], int, int]:
    """Events of the complete (newline-ended) lines of ``text``; a cut last line waits.

    Returns the events, the bytes of complete lines, and their number. ``base`` is the
    position of ``text`` in the decoded stream, for error offsets.
    """
    end = text.rfind(b"\n") + 1
    events: list[StreamingEvent] = []
    pos = 0
    lines = 0
    while pos < end:
        nl = text.index(b"\n", pos)
        line = text[pos:nl]
        lines += 1
        if any(marker in line for marker in _INTERESTING):
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise CorruptData(
                    f"event log: line {lines} is not JSON ({exc})", base + pos
                ) from exc
            if isinstance(obj, dict):
                try:
                    event = event_from_json(obj)
                except CorruptData as exc:
                    raise CorruptData(exc.why, base + pos) from exc
                if event is not None:
                    events.append(event)
        pos = nl + 1
    return events, end, lines


def read_events(
    data: bytes,
    codec: str,
    raw_offset: int = 0,
    text_offset: int = 0,
    limits: DecodeLimits = DEFAULT_LIMITS,
) -> ReadResult:
    """Decode ``data`` (a whole event-log or listener file, as far as it is written) from a
    previous read's ``raw_offset``/``text_offset`` and return the new events.

    Decoding goes block by block, parsing lines as they complete: memory holds one block and
    one partial line, not the decoded file (a day of events decodes to gigabytes). ``limits``
    bounds it as a streamed file: what it decodes in all by the ratio, a block and the
    partial line by ``max_file_bytes``.
    """
    events: list[StreamingEvent] = []
    decoded = 0  # bytes decoded since raw_offset
    consumed = text_offset  # ... of them, up to the end of the last complete line
    anchors: deque[tuple[int, int]] = deque([(raw_offset, 0)])  # (raw, decoded) restarts
    carry = bytearray()
    lines = 0
    ended = False
    for block in iter_blocks(codec, data, raw_offset, limits):
        ended = block.ended
        text = block.text
        if block.restart and text and decoded > anchors[-1][1]:
            anchors.append((block.raw_offset, decoded))
        start = decoded
        decoded += len(text)
        if decoded <= consumed:
            continue
        carry += text[max(0, consumed - start) :] if start < consumed else text
        found, used, count = parse_lines(bytes(carry), consumed)
        events.extend(found)
        lines += count
        consumed += used
        del carry[:used]
        limits.check_piece("event log: a line not ended", len(carry), block.raw_offset)
        while len(anchors) > 1 and anchors[1][1] <= consumed:
            anchors.popleft()
    if consumed > decoded:
        raise CorruptData(
            f"event log: shorter than when last read ({decoded} < {consumed} decoded bytes "
            "from the resume point): rewritten?",
            raw_offset,
        )
    next_raw, anchor_at = anchors[0]
    return ReadResult(tuple(events), next_raw, consumed - anchor_at, lines, ended)
