"""Tests for parsers.logs: metadata, offsets, commits, file-source logs, batch file names."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers.errors import CorruptData, ParseError, Truncated, UnsupportedFormat
from stateglass.parsers.logs import (
    CommitMetadata,
    FileEntry,
    OffsetSeq,
    RewriteMark,
    SourceOffset,
    StreamMetadata,
    batch_id_of,
    is_batch_file_name,
    is_compact_file_name,
    is_compaction_batch,
    parse_file_source_log,
    valid_batches,
)
from tests.parsers.corpus_files import checkpoints

CONF_V1 = (
    '{"spark.sql.streaming.stateStore.providerClass":'
    '"org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",'
    '"spark.sql.shuffle.partitions":"4","spark.sql.streaming.stateStore.compression.codec":"zstd"}'
)
OFFSETS_V1 = (
    'v1\n{"batchWatermarkMs":7,"batchTimestampMs":1795285216526,"conf":' + CONF_V1 + "}\n"
    '{"logOffset":0}\n-'
).encode()


def _batch_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(directory / n for n in os.listdir(directory) if is_batch_file_name(n))


# ---------------------------------------------------------------------------------------------
# Golden: every log file of every checkpoint in the corpus


@pytest.mark.parametrize("checkpoint", checkpoints())
def test_corpus_logs_parse(fixture_corpus: Path, checkpoint: str) -> None:
    root = fixture_corpus / checkpoint
    meta = StreamMetadata.from_bytes((root / "metadata").read_bytes())
    assert len(meta.query_id) == 36

    offsets = [OffsetSeq.from_bytes(p.read_bytes()) for p in _batch_files(root / "offsets")]
    assert offsets, "every corpus checkpoint ran at least one batch"
    for seq in offsets:
        assert seq.batch_timestamp_ms and seq.batch_timestamp_ms > 1_700_000_000_000
        assert seq.provider in ("hdfs", "rocksdb")
        assert seq.shuffle_partitions == 2
        assert all(s.offset_json is None or s.offset_json.startswith("{") for s in seq.sources)

    commits = [CommitMetadata.from_bytes(p.read_bytes()) for p in _batch_files(root / "commits")]
    assert len(commits) <= len(offsets)
    for commit in commits:
        assert commit.next_batch_watermark_ms >= 0

    for source_dir in sorted((root / "sources").glob("*")):
        for path in _batch_files(source_dir):
            entries = parse_file_source_log(path.read_bytes())
            assert all(e.path.startswith("file:") for e in entries)
            assert all(e.batch_id == batch_id_of(path.name) for e in entries)


def test_offsets_v1_values(fixture_corpus: Path) -> None:
    root = fixture_corpus / "3.5.9/agg-hdfs/checkpoint"
    seq = OffsetSeq.from_bytes((root / "offsets/0").read_bytes())
    assert seq.format_version == 1
    assert seq.batch_watermark_ms == 0
    assert seq.batch_timestamp_ms == 1795285216526
    assert seq.sources == (SourceOffset("0", '{"logOffset":0}'),)
    assert seq.provider == "hdfs"
    assert seq.codec == "lz4"
    assert seq.shuffle_partitions == 2
    assert seq.encoding_format == "unsaferow"  # not pinned before 4.0
    assert seq.row_checksum is False
    assert seq.merge_operator_version is None
    assert (seq.aggregation_state_format, seq.join_state_format, seq.fmgws_state_format) == (
        2,
        2,
        2,
    )
    assert seq.source_metadata_info is None


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        pytest.param("4.3.0-offv2/agg-hdfs", {"format_version": 2}, id="offset-log-v2"),
        pytest.param("4.3.0-rowck/agg-rocks-cl", {"row_checksum": True}, id="row-checksum"),
        pytest.param("4.3.0/tws-rocks-cl-avro", {"encoding_format": "avro"}, id="avro"),
        pytest.param("4.3.0-joinv3/join-rocks-cl", {"join_state_format": 3}, id="join-v3"),
        pytest.param("4.3.0-joinv4/join-rocks-cl", {"join_state_format": 4}, id="join-v4"),
        pytest.param("4.0.5/agg-hdfs-v1", {"aggregation_state_format": 1}, id="agg-v1"),
        pytest.param("4.0.5/fmgws-hdfs-v1", {"fmgws_state_format": 1}, id="fmgws-v1"),
        pytest.param("4.0.5/agg-hdfs-zstd", {"codec": "zstd"}, id="zstd"),
        pytest.param("4.3.0/agg-rocks", {"provider": "rocksdb", "merge_operator_version": 2}),
    ],
)
def test_offsets_pinned_confs(fixture_corpus: Path, scenario: str, expected: dict) -> None:
    seq = OffsetSeq.from_bytes((fixture_corpus / scenario / "checkpoint/offsets/0").read_bytes())
    for name, value in expected.items():
        assert getattr(seq, name) == value, name


def test_offsets_v2_sources(fixture_corpus: Path) -> None:
    path = fixture_corpus / "4.3.0-offv2/agg-hdfs/checkpoint/offsets/1"
    seq = OffsetSeq.from_bytes(path.read_bytes())
    assert seq.sources == (SourceOffset("0", '{"logOffset":1}'),)
    assert seq.source_metadata_info == {}
    assert seq.control_batch_info is None


def test_commit_v2_ids_name_state_files(fixture_corpus: Path) -> None:
    root = fixture_corpus / "4.3.0/tws-rocks-cl-ckv2/checkpoint"
    for path in _batch_files(root / "commits"):
        commit = CommitMetadata.from_bytes(path.read_bytes())
        assert commit.format_version == 2
        assert commit.state_unique_ids is not None
        version = int(path.name) + 1  # batch N commits state version N+1
        for partition, ids in enumerate(commit.state_unique_ids[0]):
            (unique_id,) = ids
            names = os.listdir(root / f"state/0/{partition}")
            assert any(n.startswith(f"{version}_{unique_id}.") for n in names), (version, ids)


def test_commit_v1(fixture_corpus: Path) -> None:
    commit = CommitMetadata.from_bytes(
        (fixture_corpus / "3.5.9/agg-hdfs/checkpoint/commits/0").read_bytes()
    )
    assert commit == CommitMetadata(1, 0, None)


def test_file_source_log_values(fixture_corpus: Path) -> None:
    path = fixture_corpus / "4.3.0/tws-rocks-cl/checkpoint/sources/0/0"
    (entry,) = parse_file_source_log(path.read_bytes())
    assert entry.path.endswith("/tws-rocks-cl/input_0/part00049.json")
    assert entry.timestamp == 1795286458596
    assert entry.batch_id == 0


# ---------------------------------------------------------------------------------------------
# Synthetic inputs


def test_offsets_synthetic_v1() -> None:
    seq = OffsetSeq.from_bytes(OFFSETS_V1)
    assert seq.batch_watermark_ms == 7
    assert seq.sources == (SourceOffset("0", '{"logOffset":0}'), SourceOffset("1", None))
    assert seq.provider == "rocksdb"
    assert seq.codec == "zstd"
    assert seq.shuffle_partitions == 4


def test_offsets_without_metadata_use_legacy_defaults() -> None:
    seq = OffsetSeq.from_bytes(b"v1\n\n{}")
    assert seq.batch_watermark_ms is None and seq.batch_timestamp_ms is None
    assert seq.conf == {}
    assert seq.provider == "hdfs"
    assert seq.codec == "lz4"
    assert seq.encoding_format == "unsaferow"
    assert seq.shuffle_partitions is None
    assert seq.merge_operator_version is None
    assert seq.row_checksum is False
    assert (seq.aggregation_state_format, seq.join_state_format, seq.fmgws_state_format) == (
        1,
        1,
        1,
    )


def test_offsets_metadata_defaults_and_crlf() -> None:
    seq = OffsetSeq.from_bytes(b'v1\r\n{"conf":{}}\r\n{"a":1}\r\n')
    assert (seq.batch_watermark_ms, seq.batch_timestamp_ms) == (0, 0)
    assert seq.sources == (SourceOffset("0", '{"a":1}'),)


def test_offsets_unknown_provider_is_reported_by_class() -> None:
    conf = '{"spark.sql.streaming.stateStore.providerClass":"com.example.MyProvider"}'
    seq = OffsetSeq.from_bytes(f'v1\n{{"conf":{conf}}}'.encode())
    assert seq.provider == "com.example.MyProvider"


def test_offsets_v2_named_sources_split_on_first_colon() -> None:
    data = b'v2\n{"conf":{},"sourceMetadataInfo":{"k":{"sourceId":"k"}}}\nk:{"a":"b:c"}\nx:-'
    seq = OffsetSeq.from_bytes(data)
    assert seq.sources == (SourceOffset("k", '{"a":"b:c"}'), SourceOffset("x", None))
    assert seq.source_metadata_info == {"k": {"sourceId": "k"}}


def test_commit_without_json_line() -> None:
    assert CommitMetadata.from_bytes(b"v1") == CommitMetadata(1, 0, None)


def test_commit_v2_ids() -> None:
    data = b'v2\n{"nextBatchWatermarkMs":5,"stateUniqueIds":{"0":[["a"],["b"]],"3":[["c","d"]]}}'
    commit = CommitMetadata.from_bytes(data)
    assert commit.next_batch_watermark_ms == 5
    assert commit.state_unique_ids == {0: (("a",), ("b",)), 3: (("c", "d"),)}


@pytest.mark.parametrize(
    ("name", "batch_id"),
    [
        ("0", 0),
        ("12", 12),
        ("9.compact", 9),
        ("007", 7),
        ("9223372036854775807", 2**63 - 1),
        ("9223372036854775808", None),
        ("1" * 5000, None),
        (".0.crc", None),
        ("0.crc", None),
        (".12.a1b2.tmp", None),
        ("1.delta", None),
        ("", None),
        ("-1", None),
        ("+1", None),
        (" 1", None),
        ("\u0661", None),  # Arabic-Indic digit one: int() accepts it, Spark's name filter does not
        (".compact", None),
        ("_metadata", None),
    ],
    ids=lambda v: repr(v)[:24] if isinstance(v, str) else str(v),
)
def test_batch_file_names(name: str, batch_id: int | None) -> None:
    assert batch_id_of(name) == batch_id
    assert is_batch_file_name(name) is (batch_id is not None)


def test_compaction_helpers() -> None:
    assert is_compact_file_name("19.compact") and not is_compact_file_name("19")
    assert is_compaction_batch(9, 10) and not is_compaction_batch(10, 10)
    assert valid_batches(25, 10) == range(19, 26)
    assert valid_batches(5, 10) == range(0, 6)
    assert valid_batches(9, 10) == range(9, 10)


def test_compact_file_source_log() -> None:
    lines = [f'{{"path":"file:///in/{i}.json","timestamp":{i},"batchId":{i}}}' for i in range(3)]
    entries = parse_file_source_log(("v1\n" + "\n".join(lines)).encode())
    assert entries == tuple(FileEntry(f"file:///in/{i}.json", i, i) for i in range(3))
    assert parse_file_source_log(b"v1") == ()


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    "parse",
    [OffsetSeq.from_bytes, CommitMetadata.from_bytes, parse_file_source_log],
    ids=["offsets", "commits", "file-source"],
)
@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(b"v99\n{}", UnsupportedFormat, id="newer-version"),
        pytest.param(b"", Truncated, id="empty"),
        pytest.param(b"x1\n{}", CorruptData, id="no-v"),
        pytest.param(b"v\n{}", CorruptData, id="no-number"),
        pytest.param(b"v0\n{}", CorruptData, id="v0"),
        pytest.param(b"v-1\n{}", CorruptData, id="negative"),
        pytest.param(b"v" + b"9" * 5000 + b"\n{}", CorruptData, id="huge-version"),
        pytest.param(b"v1\n\xff\xfe", CorruptData, id="not-utf8"),
        pytest.param(b"v1\n{not json", CorruptData, id="bad-json"),
        pytest.param(b"v1\n[1,2]", CorruptData, id="json-array"),
    ],
)
def test_bad_log_files(parse: object, data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse(data)  # type: ignore[operator]


def test_newer_version_names_the_version() -> None:
    with pytest.raises(UnsupportedFormat, match=r"v99.*newer version of Spark"):
        OffsetSeq.from_bytes(b"v99\n{}")


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"v1", Truncated),  # no metadata line at all
        (b"v2\n\n0:-", CorruptData),  # v2 requires metadata
        (b'v2\n{"conf":{}}\nno-colon', CorruptData),
        (b'v1\n{"batchWatermarkMs":"7"}', CorruptData),
        (b'v1\n{"batchWatermarkMs":true}', CorruptData),
        (b'v1\n{"conf":{"a":1}}', CorruptData),
        (b'v1\n{"conf":[]}', CorruptData),
    ],
)
def test_bad_offsets(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        OffsetSeq.from_bytes(data)


@pytest.mark.parametrize(
    "prop", ["shuffle_partitions", "merge_operator_version", "join_state_format", "row_checksum"]
)
def test_bad_conf_values_raise_corrupt_data(prop: str) -> None:
    keys = {
        "shuffle_partitions": "spark.sql.shuffle.partitions",
        "merge_operator_version": "spark.sql.streaming.stateStore.rocksdb.mergeOperatorVersion",
        "join_state_format": "spark.sql.streaming.join.stateFormatVersion",
        "row_checksum": "spark.sql.streaming.stateStore.rowChecksum.enabled",
    }
    seq = OffsetSeq.from_bytes(f'v1\n{{"conf":{{"{keys[prop]}":"two"}}}}'.encode())
    with pytest.raises(CorruptData):
        getattr(seq, prop)


@pytest.mark.parametrize(
    "data",
    [
        b'v2\n{"stateUniqueIds":{"x":[["a"]]}}',
        b'v2\n{"stateUniqueIds":{"0":[[1]]}}',
        b'v2\n{"stateUniqueIds":{"0":"a"}}',
        b'v2\n{"stateUniqueIds":[]}',
        b'v1\n{"nextBatchWatermarkMs":1.5}',
    ],
)
def test_bad_commits(data: bytes) -> None:
    with pytest.raises(CorruptData):
        CommitMetadata.from_bytes(data)


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_a_rewrite_mark_reads_back_its_batch(batch: int) -> None:
    assert RewriteMark.from_bytes(RewriteMark(batch).to_bytes()) == RewriteMark(batch)


@pytest.mark.parametrize("data", [b"", b"{}", b'{"batchId":"3"}', b"[]", b'{"batchId":1'], ids=repr)
def test_bad_rewrite_mark(data: bytes) -> None:
    with pytest.raises(CorruptData):
        RewriteMark.from_bytes(data)


@pytest.mark.parametrize("data", [b"", b"{}", b'{"id":3}', b"[]", b"\xff", b'{"id":"a"'], ids=repr)
def test_bad_stream_metadata(data: bytes) -> None:
    with pytest.raises(CorruptData):
        StreamMetadata.from_bytes(data)


@pytest.mark.parametrize(
    "data",
    [b'v1\n{"path":1,"timestamp":1,"batchId":1}', b'v1\n{"path":"p"}', b"v1\n\n", b"v2\n{}"],
)
def test_bad_file_source_log(data: bytes) -> None:
    with pytest.raises(ParseError):
        parse_file_source_log(data)


# ---------------------------------------------------------------------------------------------
# Fuzz: whatever the bytes, only ParseError escapes

SAMPLES = [
    (OffsetSeq.from_bytes, OFFSETS_V1),
    (OffsetSeq.from_bytes, b'v2\n{"conf":{},"sourceMetadataInfo":{}}\n0:{"logOffset":0}'),
    (CommitMetadata.from_bytes, b'v2\n{"nextBatchWatermarkMs":0,"stateUniqueIds":{"0":[["a"]]}}'),
    (StreamMetadata.from_bytes, b'{"id":"d04a423b-572b-43ca-a1cb-1c4a4cbe7a59"}'),
    (parse_file_source_log, b'v1\n{"path":"file:///x","timestamp":1,"batchId":0}'),
]


@settings(max_examples=300, deadline=None)
@given(
    sample=st.sampled_from(SAMPLES),
    cut=st.integers(min_value=0, max_value=400),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 7)), max_size=4),
)
def test_fuzz_only_parse_errors_escape(sample: tuple, cut: int, flips: list) -> None:
    parse, data = sample
    mutated = bytearray(data[:cut] if cut < len(data) else data)
    for position, bit in flips:
        if mutated:
            mutated[position % len(mutated)] ^= 1 << bit
    with contextlib.suppress(ParseError):
        parse(bytes(mutated))
