"""Event logs Spark really wrote, one per codec (``data/eventlogs/``, made by its
``generate.py``): every progress event decodes to the query's own ``recentProgress``, and a
log cut anywhere (a file still being written) yields a prefix of the events and resumes to
the rest."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from stateglass.parsers import eventlog
from stateglass.parsers.compression import decode_prefix
from stateglass.parsers.errors import CorruptData, ParseError

DATA = Path(__file__).resolve().parent / "data" / "eventlogs"
CODECS = ("zstd", "lz4", "snappy", "lzf", "none")


def _log(codec: str) -> tuple[bytes, str, list[dict[str, Any]]]:
    """The event log's bytes as Spark wrote them, its codec, and the recentProgress oracle."""
    folder = DATA / codec
    if not folder.exists():
        pytest.fail(f"{folder} missing: run {DATA / 'generate.py'}")
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != "recent_progress.json"]
    logs = [p for p in files if not p.name.startswith("appstatus_")]
    assert len(logs) == 1, logs
    path = logs[0]
    data = path.read_bytes()
    if path.suffix == ".gz":  # the uncompressed log, stored gzipped to stay small
        data = gzip.decompress(data)
        name = path.name[:-3]
    else:
        name = path.name
    parsed = eventlog.rolling_file_name(name) or eventlog.single_file_name(name)
    assert parsed is not None, name
    oracle = json.loads((folder / "recent_progress.json").read_text())
    return data, parsed.codec, oracle


def _progress(events: tuple[eventlog.StreamingEvent, ...]) -> list[eventlog.QueryProgress]:
    return [e for e in events if isinstance(e, eventlog.QueryProgress)]


@pytest.mark.parametrize("codec", CODECS)
def test_codec_decodes_every_progress_like_recent_progress(codec: str) -> None:
    data, found_codec, oracle = _log(codec)
    assert found_codec == codec
    result = eventlog.read_events(data, codec)
    assert result.ended
    progress = _progress(result.events)
    assert [p.batch_id for p in progress] == [o["batchId"] for o in oracle]
    for got, want in zip(progress, oracle, strict=True):
        assert (got.query_id, got.run_id, got.name) == (want["id"], want["runId"], want["name"])
        assert got.num_input_rows == want["numInputRows"]
        assert dict(got.duration_ms) == want["durationMs"]
        assert got.event_time_watermark == eventlog.parse_time(want["eventTime"].get("watermark"))
        ops = [
            (o.operator_name, o.num_rows_total, o.memory_used_bytes, dict(o.custom_metrics))
            for o in got.state_operators
        ]
        assert ops == [
            (o["operatorName"], o["numRowsTotal"], o["memoryUsedBytes"], o["customMetrics"])
            for o in want["stateOperators"]
        ]
        assert [s.end_offset for s in got.sources] == [s["endOffset"] for s in want["sources"]]
    kinds = {type(e).__name__ for e in result.events}
    assert kinds == {"QueryStarted", "QueryProgress", "QueryTerminated"}


def _cuts(size: int, count: int = 60) -> list[int]:
    step = max(1, size // count)
    return sorted({*range(0, size, step), size - 1, size - 2, 1})


@pytest.mark.parametrize("codec", CODECS)
def test_a_log_cut_anywhere_gives_a_prefix_and_resumes(codec: str) -> None:
    data, _, _ = _log(codec)
    whole = eventlog.read_events(data, codec).events
    for cut in _cuts(len(data)):
        first = eventlog.read_events(data[:cut], codec)
        assert first.events == whole[: len(first.events)], cut
        # Grow in two steps, as an in-progress log does between collects.
        middle = min(len(data), cut + len(data) // 7)
        second = eventlog.read_events(data[:middle], codec, first.raw_offset, first.text_offset)
        rest = eventlog.read_events(data, codec, second.raw_offset, second.text_offset)
        assert first.events + second.events + rest.events == whole, cut


def test_spark_zstd_logs_are_many_frames_so_tails_resume_mid_file() -> None:
    data, _, _ = _log("zstd")
    decoded = decode_prefix("zstd", data)
    # zstd-jni ends a frame at each flush: resuming never re-decodes the whole file.
    assert len(decoded.restarts) > 10
    resumed = eventlog.read_events(data[: len(data) // 2], "zstd")
    assert resumed.raw_offset > 0


def test_lz4_checksum_mismatch_is_corrupt_data() -> None:
    data, _, _ = _log("lz4")
    broken = bytearray(data)
    broken[len(data) // 2] ^= 0xFF
    with pytest.raises(ParseError):
        eventlog.read_events(bytes(broken), "lz4")


def test_a_complete_line_that_is_not_json_is_corrupt() -> None:
    text = b'{"Event":"org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEv\n'
    with pytest.raises(CorruptData, match="line 1 is not JSON"):
        eventlog.read_events(text, "none")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("local-1700000000000", ("local-1700000000000", "none", False), id="plain"),
        pytest.param(
            "app-20240101000000-0001.zstd.inprogress",
            ("app-20240101000000-0001", "zstd", True),
            id="zstd-inprogress",
        ),
        pytest.param(
            "application_1_0001_1.lz4", ("application_1_0001_1", "lz4", False), id="yarn-attempt"
        ),
        pytest.param("local-1.inprogress", ("local-1", "none", True), id="inprogress"),
        pytest.param(".local-1.crc", None, id="crc"),
        pytest.param("local-1.gz", None, id="not-spark"),
    ],
)
def test_single_file_names(name: str, expected: tuple[str, str, bool] | None) -> None:
    parsed = eventlog.single_file_name(name)
    assert (None if parsed is None else (parsed.app_id, parsed.codec, parsed.in_progress)) == (
        expected
    )


def test_rolling_names() -> None:
    parsed = eventlog.rolling_file_name("events_12_local-1700.snappy")
    assert parsed is not None and (parsed.index, parsed.app_id, parsed.codec) == (
        12,
        "local-1700",
        "snappy",
    )
    assert eventlog.rolling_file_name("appstatus_local-1700.inprogress") is None
    assert eventlog.appstatus_in_progress("appstatus_local-1700.inprogress") is True
    assert eventlog.appstatus_in_progress("appstatus_local-1700") is False
    assert eventlog.appstatus_in_progress("events_1_local-1700") is None
