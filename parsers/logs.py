"""Text logs at the checkpoint root: ``metadata``, ``offsets/``, ``commits/``, ``sources/``.

Every log file except ``metadata`` starts with a version line ``v<N>`` checked like Spark's
``MetadataVersionUtil.validateVersion``: a malformed line is :class:`CorruptData`, a version
newer than we know is :class:`UnsupportedFormat`.

Example::

    >>> seq = OffsetSeq.from_bytes(b'v1\\n{"batchWatermarkMs":0,"conf":{}}\\n-')
    >>> seq.sources
    (SourceOffset(source_id='0', offset_json=None),)
    >>> seq.provider, seq.codec, seq.aggregation_state_format
    ('hdfs', 'lz4', 1)
    >>> batch_id_of("9.compact"), batch_id_of(".9.crc")
    (9, None)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stateglass.parsers.errors import CorruptData, Truncated, UnsupportedFormat

# Newest log versions Spark 4.3 writes; a newer file needs a newer StateGlass.
OFFSET_LOG_MAX_VERSION = 2
COMMIT_LOG_MAX_VERSION = 2
FILE_SOURCE_LOG_MAX_VERSION = 1

COMPACT_SUFFIX = ".compact"
VOID_OFFSET = "-"  # SERIALIZED_VOID_OFFSET: the source had no offset in this batch

# Offset-log conf keys that decide how the state files are decoded.
CONF_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CONF_CODEC = "spark.sql.streaming.stateStore.compression.codec"
CONF_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
CONF_ENCODING_FORMAT = "spark.sql.streaming.stateStore.encodingFormat"
CONF_ROW_CHECKSUM = "spark.sql.streaming.stateStore.rowChecksum.enabled"
CONF_MERGE_OPERATOR_VERSION = "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion"
CONF_AGGREGATION_FORMAT = "spark.sql.streaming.aggregation.stateFormatVersion"
CONF_JOIN_FORMAT = "spark.sql.streaming.join.stateFormatVersion"
CONF_FMGWS_FORMAT = "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion"

# Provider class → short name; anything else is reported by its class name.
PROVIDERS: dict[str, str] = {
    "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider": "hdfs",
    "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider": "rocksdb",
}
DEFAULT_PROVIDER = "hdfs"  # Spark's default providerClass in every version

# A missing key means the checkpoint predates the conf; Spark then assumes these
# (OffsetSeqMetadata.relevantSQLConfDefaultValues: the operators' `legacyVersion`s).
LEGACY_STATE_FORMAT = 1

_VERSION_LINE = re.compile(r"v([+-]?[0-9]+)")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_BATCH_NAME = re.compile(r"[0-9]+")
_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


# ---------------------------------------------------------------------------------------------
# Shared helpers (also used by operator_metadata and rocksdb_checkpoint)


def decode_text(data: bytes, what: str) -> str:
    """Decode a checkpoint text file as strict UTF-8, as Spark's readers do."""
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptData(f"{what} is not UTF-8 text: {exc.reason}", exc.start) from exc


def split_lines(text: str) -> list[str]:
    """Split like Java's ``BufferedReader.readLine``: no empty line after a final newline."""
    lines = _LINE_BREAK.split(text)
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return lines


def parse_version_line(line: str, max_version: int, what: str) -> int:
    """Return N for a ``vN`` line; reject malformed lines and versions newer than we read."""
    text = line.strip()
    match = _VERSION_LINE.fullmatch(text)
    if match is None:
        raise CorruptData(f"{what} is malformed: expected a version line like 'v1', got {text!r}")
    digits = match.group(1).lstrip("+-").lstrip("0")
    version = int(match.group(1)) if len(digits) <= 10 else _INT32_MAX + 1
    if version <= 0 or version > _INT32_MAX:
        raise CorruptData(f"{what} is malformed: invalid log version {text!r}")
    if version > max_version:
        raise UnsupportedFormat(
            f"{what} has format version v{version}, but StateGlass reads up to v{max_version}; "
            "it was produced by a newer version of Spark"
        )
    return version


def versioned_lines(data: bytes, max_version: int, what: str) -> tuple[int, list[str]]:
    """Decode ``data``, check its version line and return ``(version, remaining lines)``."""
    lines = split_lines(decode_text(data, what))
    if not lines or lines == [""]:
        raise Truncated(f"{what} is empty (expected a version line)", 0)
    return parse_version_line(lines[0], max_version, what), lines[1:]


def versioned_json(data: bytes, max_version: int, what: str) -> tuple[int, dict[str, Any]]:
    """A version line then one JSON object, which may span lines: ``(version, object)``."""
    version, lines = versioned_lines(data, max_version, what)
    body = "\n".join(lines).strip()
    if not body:
        raise Truncated(f"{what} has no JSON after its version line")
    return version, json_object(load_json(body, what), what)


def load_json(text: str, what: str) -> Any:
    """``json.loads`` that raises :class:`CorruptData` for malformed JSON."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CorruptData(f"{what} is not valid JSON: {exc}") from exc


def json_object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CorruptData(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def json_int(obj: Mapping[str, Any], key: str, what: str, default: int | None = None) -> int:
    """Fetch an integer member; a missing member takes ``default`` (or is an error)."""
    value = obj.get(key, default)
    if value is None:
        raise CorruptData(f"{what} has no {key!r}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptData(f"{what}: {key!r} must be an integer, got {value!r}")
    return value


def json_str(obj: Mapping[str, Any], key: str, what: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise CorruptData(f"{what}: {key!r} must be a string, got {value!r}")
    return value


# ---------------------------------------------------------------------------------------------
# metadata


@dataclass(frozen=True)
class StreamMetadata:
    """The checkpoint's ``metadata`` file: the query id (stable across restarts)."""

    query_id: str

    @classmethod
    def from_bytes(cls, data: bytes) -> StreamMetadata:
        """Parse ``{"id":"<uuid>"}`` (json4s, no version line)."""
        obj = json_object(
            load_json(decode_text(data, "stream metadata"), "stream metadata"), "stream metadata"
        )
        return cls(query_id=json_str(obj, "id", "stream metadata"))


# A checkpoint ``stateglass rewrite`` wrote names, beside ``metadata``, the batch whose state it
# wrote: the state history of that checkpoint starts there (earlier batches keep their logs,
# never their state). Spark never reads it.
REWRITE_MARK = "stateglass-rewrite.json"


@dataclass(frozen=True)
class RewriteMark:
    """``stateglass-rewrite.json``: the batch whose state ``stateglass rewrite`` wrote."""

    batch_id: int

    @classmethod
    def from_bytes(cls, data: bytes) -> RewriteMark:
        """Parse ``{"batchId": B, "writtenBy": "stateglass rewrite"}``."""
        what = REWRITE_MARK
        obj = json_object(load_json(decode_text(data, what), what), what)
        return cls(batch_id=json_int(obj, "batchId", what))

    def to_bytes(self) -> bytes:
        return json.dumps({"batchId": self.batch_id, "writtenBy": "stateglass rewrite"}).encode()


# ---------------------------------------------------------------------------------------------
# offsets/<batchId>


@dataclass(frozen=True)
class SourceOffset:
    """One source's offset in a batch; ``offset_json`` is None for ``-`` (no offset)."""

    source_id: str  # the ordinal ("0", "1", …) in v1 logs; the id written by Spark in v2
    offset_json: str | None


@dataclass(frozen=True)
class OffsetSeq:
    """An ``offsets/<batchId>`` file: what a batch planned to read, and the pinned confs.

    ``batch_watermark_ms``/``batch_timestamp_ms`` are None only when the file has no metadata
    line (very old checkpoints); a metadata object without them means 0, as in Spark.
    """

    format_version: int
    batch_watermark_ms: int | None
    batch_timestamp_ms: int | None
    conf: Mapping[str, str]
    sources: tuple[SourceOffset, ...]
    source_metadata_info: Mapping[str, Any] | None = None  # v2 only, as written
    control_batch_info: Mapping[str, Any] | None = None  # v2 only, absent unless set

    @classmethod
    def from_bytes(cls, data: bytes) -> OffsetSeq:
        """Parse an offset log file of format v1 or v2."""
        what = "offset log"
        version, lines = versioned_lines(data, OFFSET_LOG_MAX_VERSION, what)
        if not lines:
            raise Truncated(f"{what} is incomplete: no metadata line after the version")
        meta_line, source_lines = lines[0].strip(), lines[1:]
        watermark = timestamp = None
        conf: dict[str, str] = {}
        source_info = control = None
        if meta_line:
            meta = json_object(load_json(meta_line, f"{what} metadata"), f"{what} metadata")
            watermark = json_int(meta, "batchWatermarkMs", f"{what} metadata", default=0)
            timestamp = json_int(meta, "batchTimestampMs", f"{what} metadata", default=0)
            conf = _string_map(meta.get("conf", {}), f"{what} conf")
            if version >= 2:
                source_info = _optional_object(meta, "sourceMetadataInfo", f"{what} metadata")
                control = _optional_object(meta, "controlBatchInfo", f"{what} metadata")
        elif version >= 2:
            raise CorruptData(f"{what} v{version} has an empty metadata line")
        if version == 1:
            sources = tuple(
                SourceOffset(str(i), _offset_or_none(line)) for i, line in enumerate(source_lines)
            )
        else:
            sources = tuple(_v2_source(line, i + 2, what) for i, line in enumerate(source_lines))
        return cls(version, watermark, timestamp, conf, sources, source_info, control)

    # -- conf-derived settings ----------------------------------------------------------------

    @property
    def provider(self) -> str:
        """``"hdfs"``, ``"rocksdb"``, or the provider class name for a custom provider."""
        name = self.conf.get(CONF_PROVIDER)
        if name is None:
            return DEFAULT_PROVIDER
        return PROVIDERS.get(name.strip(), name.strip())

    @property
    def codec(self) -> str:
        """State file compression codec (short name or class name, as written); default lz4."""
        return self.conf.get(CONF_CODEC, "lz4").strip() or "lz4"

    @property
    def shuffle_partitions(self) -> int | None:
        """Number of state partitions, if pinned."""
        return self._conf_int(CONF_SHUFFLE_PARTITIONS)

    @property
    def encoding_format(self) -> str:
        """State row encoding of RocksDB stores: ``unsaferow`` (default) or ``avro``."""
        return self.conf.get(CONF_ENCODING_FORMAT, "unsaferow").strip().lower() or "unsaferow"

    @property
    def row_checksum(self) -> bool:
        """Whether state rows carry CRC32C checksums (Spark 4.3+, opt-in)."""
        raw = self.conf.get(CONF_ROW_CHECKSUM, "false").strip().lower()
        if raw not in ("true", "false"):
            raise CorruptData(f"offset log conf {CONF_ROW_CHECKSUM}={raw!r} is not a boolean")
        return raw == "true"

    @property
    def merge_operator_version(self) -> int | None:
        """RocksDB merge operator version (4.3+): 1 = ``,`` delimiter, 2 = none."""
        return self._conf_int(CONF_MERGE_OPERATOR_VERSION)

    @property
    def aggregation_state_format(self) -> int:
        """Streaming aggregation state format (1 if absent: the legacy default)."""
        return self._conf_int_or(CONF_AGGREGATION_FORMAT, LEGACY_STATE_FORMAT)

    @property
    def join_state_format(self) -> int:
        """Stream-stream join state format (1 if absent)."""
        return self._conf_int_or(CONF_JOIN_FORMAT, LEGACY_STATE_FORMAT)

    @property
    def fmgws_state_format(self) -> int:
        """(flat)MapGroupsWithState state format (1 if absent)."""
        return self._conf_int_or(CONF_FMGWS_FORMAT, LEGACY_STATE_FORMAT)

    def _conf_int_or(self, key: str, default: int) -> int:
        value = self._conf_int(key)
        return default if value is None else value

    def _conf_int(self, key: str) -> int | None:
        raw = self.conf.get(key)
        if raw is None:
            return None
        try:
            return int(raw.strip())
        except ValueError as exc:
            raise CorruptData(f"offset log conf {key}={raw!r} is not an integer") from exc


def _offset_or_none(line: str) -> str | None:
    return None if line == VOID_OFFSET else line


def _v2_source(line: str, line_no: int, what: str) -> SourceOffset:
    source_id, sep, offset = line.partition(":")
    if not sep:
        raise CorruptData(f"{what} line {line_no} is not '<sourceId>:<offset>': {line[:80]!r}")
    return SourceOffset(source_id, _offset_or_none(offset))


def _string_map(value: Any, what: str) -> dict[str, str]:
    obj = json_object(value, what)
    for key, item in obj.items():
        if not isinstance(item, str):
            raise CorruptData(f"{what}: value of {key!r} must be a string, got {item!r}")
    return obj


def _optional_object(obj: Mapping[str, Any], key: str, what: str) -> dict[str, Any] | None:
    value = obj.get(key)
    return None if value is None else json_object(value, f"{what} {key}")


# ---------------------------------------------------------------------------------------------
# commits/<batchId>


@dataclass(frozen=True)
class CommitMetadata:
    """A ``commits/<batchId>`` file: the batch completed.

    ``state_unique_ids`` (v2, checkpoint format 2) maps operator id → per partition the
    checkpoint unique ids of its stores, i.e. the ``<uniqueId>`` in ``<v>_<uniqueId>.zip``.
    """

    format_version: int
    next_batch_watermark_ms: int
    state_unique_ids: Mapping[int, tuple[tuple[str, ...], ...]] | None = None

    @classmethod
    def from_bytes(cls, data: bytes) -> CommitMetadata:
        """Parse a commit log file of format v1 or v2."""
        what = "commit log"
        version, lines = versioned_lines(data, COMMIT_LOG_MAX_VERSION, what)
        # Spark reads a missing JSON line as "{}".
        obj = json_object(load_json(lines[0] if lines else "{}", what), what)
        watermark = json_int(obj, "nextBatchWatermarkMs", what, default=0)
        ids = None
        if version >= 2 and obj.get("stateUniqueIds") is not None:
            ids = _unique_ids(obj["stateUniqueIds"], f"{what} stateUniqueIds")
        return cls(version, watermark, ids)


def _unique_ids(value: Any, what: str) -> dict[int, tuple[tuple[str, ...], ...]]:
    result: dict[int, tuple[tuple[str, ...], ...]] = {}
    for op_key, partitions in json_object(value, what).items():
        if not _BATCH_NAME.fullmatch(op_key) or len(op_key) > 19:
            raise CorruptData(f"{what}: operator id {op_key!r} is not a number")
        if not isinstance(partitions, list) or not all(
            isinstance(p, list) and all(isinstance(i, str) for i in p) for p in partitions
        ):
            raise CorruptData(f"{what}: operator {op_key} must map to lists of id strings")
        result[int(op_key)] = tuple(tuple(p) for p in partitions)
    return result


# ---------------------------------------------------------------------------------------------
# Batch file names (HDFSMetadataLog / CompactibleFileStreamLog)


def batch_id_of(name: str) -> int | None:
    """Batch id of a log file name (``"12"``, ``"19.compact"``), or None if it is not one.

    Hidden names (temp files ``.12.<uuid>.tmp``, Hadoop ``.12.crc``) never match.
    """
    stem = name[: -len(COMPACT_SUFFIX)] if name.endswith(COMPACT_SUFFIX) else name
    # Long.parseLong's range; checking the digit count first keeps int() cheap.
    if not _BATCH_NAME.fullmatch(stem) or len(stem.lstrip("0")) > 19:
        return None
    batch_id = int(stem)
    return batch_id if batch_id <= _INT64_MAX else None


def is_batch_file_name(name: str) -> bool:
    """True for names of HDFSMetadataLog batch files (plain or ``.compact``)."""
    return batch_id_of(name) is not None


def is_compact_file_name(name: str) -> bool:
    """True for a compacted file-source/sink log file name such as ``"9.compact"``."""
    return name.endswith(COMPACT_SUFFIX) and batch_id_of(name) is not None


def is_compaction_batch(batch_id: int, compact_interval: int) -> bool:
    """Whether Spark writes batch ``batch_id`` as ``<batch_id>.compact``."""
    return (batch_id + 1) % compact_interval == 0


def valid_batches(batch_id: int, compact_interval: int) -> range:
    """Batch files to read for all entries up to ``batch_id`` (``getAllValidBatches``)."""
    if compact_interval <= 0:
        raise ValueError("compact_interval must be positive")
    start = max(0, (batch_id + 1) // compact_interval * compact_interval - 1)
    return range(start, batch_id + 1)


# ---------------------------------------------------------------------------------------------
# sources/<i>/<batchId>[.compact]


@dataclass(frozen=True)
class FileEntry:
    """One file seen by the file source: ``FileEntry(path, timestamp, batchId)``."""

    path: str
    timestamp: int
    batch_id: int

    @classmethod
    def from_json(cls, obj: Any) -> FileEntry:
        what = "file source log entry"
        entry = json_object(obj, what)
        return cls(
            path=json_str(entry, "path", what),
            timestamp=json_int(entry, "timestamp", what),
            batch_id=json_int(entry, "batchId", what),
        )


def parse_file_source_log(data: bytes) -> tuple[FileEntry, ...]:
    """Parse ``sources/<i>/<batchId>[.compact]``: a version line, then one JSON entry a line."""
    what = "file source log"
    _, lines = versioned_lines(data, FILE_SOURCE_LOG_MAX_VERSION, what)
    return tuple(
        FileEntry.from_json(load_json(line, f"{what} line {n}")) for n, line in enumerate(lines, 2)
    )
