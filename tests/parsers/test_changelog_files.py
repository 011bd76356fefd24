"""RocksDB changelog files v1–v4 and the §5.5 row-checksum helpers, on synthetic bytes."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers import changelog
from stateglass.parsers.changelog import (
    Changelog,
    ChangelogRecord,
    LineageItem,
    changelog_pairs,
    iter_changelog_records,
    parse_changelog,
    read_changelog_header,
    unwrap_delete_key,
    unwrap_value_checksum,
)
from stateglass.parsers.errors import (
    ChecksumMismatch,
    CorruptData,
    ParseError,
    Truncated,
    UnsupportedFormat,
)
from tests.parsers.state_encoders import (
    encode_changelog,
    with_key_checksum,
    with_value_checksum,
    write_utf,
)

FAST = settings(max_examples=80, deadline=None, database=None)

blobs = st.binary(max_size=40)
v1_records = st.lists(
    st.one_of(
        st.tuples(st.just("put"), blobs, blobs),
        st.tuples(st.just("delete"), blobs, st.none()),
    ),
    max_size=20,
)
v2_records = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["put", "merge"]), blobs, blobs),
        st.tuples(st.just("delete"), blobs, st.none()),
    ),
    max_size=20,
)
lineages = st.lists(
    st.tuples(st.integers(0, 2**62), st.one_of(st.uuids().map(str), st.text(max_size=8))),
    max_size=5,
)


@FAST
@given(records=v1_records)
def test_v1_round_trip(records: list[tuple[str, bytes, bytes | None]]) -> None:
    log = parse_changelog(encode_changelog(1, records))
    assert log == Changelog(1, (), tuple(ChangelogRecord(*r) for r in records))  # type: ignore[arg-type]


@FAST
@given(records=v2_records)
def test_v2_round_trip(records: list[tuple[str, bytes, bytes | None]]) -> None:
    log = parse_changelog(encode_changelog(2, records))
    assert log.format_version == 2 and log.lineage == ()
    assert [(r.kind, r.key, r.value) for r in log.records] == records


@FAST
@given(version=st.sampled_from([3, 4]), records=v1_records, lineage=lineages)
def test_v3_v4_round_trip(
    version: int, records: list[tuple[str, bytes, bytes | None]], lineage: list[tuple[int, str]]
) -> None:
    log = parse_changelog(encode_changelog(version, records, lineage))
    assert log.format_version == version
    assert log.lineage == tuple(LineageItem(v, uid) for v, uid in lineage)
    assert [(r.kind, r.key, r.value) for r in log.records] == records


@FAST
@given(version=st.sampled_from([1, 2, 3, 4]), records=v1_records, lineage=lineages)
def test_every_cut_is_truncated(
    version: int, records: list[tuple[str, bytes, bytes | None]], lineage: list[tuple[int, str]]
) -> None:
    stream = encode_changelog(version, records, lineage)
    for cut in range(len(stream)):
        with pytest.raises(Truncated):
            parse_changelog(stream[:cut])


@pytest.mark.skipif(changelog._speedups is None, reason="the compiled loop is not built")
@FAST
@given(version=st.sampled_from([1, 2, 3, 4]), records=v2_records, lineage=lineages)
def test_the_compiled_pairs_are_the_records_or_nothing(
    version: int, records: list[tuple[str, bytes, bytes | None]], lineage: list[tuple[int, str]]
) -> None:
    """v1/v3 (no merges): the parsed records as (key, value), values whole (not cut to 8
    bytes as an HDFS delta's); v2/v4, and every cut file: None, for parse_changelog."""
    if version in (1, 3):
        records = [r for r in records if r[0] != "merge"]
    stream = encode_changelog(version, records, lineage if version > 2 else [])
    pairs = changelog_pairs(stream)
    if version in (2, 4):
        assert pairs is None
    else:
        assert pairs == [(key, value) for _, key, value in records]
        for cut in range(len(stream) - 4, len(stream)):
            with contextlib.suppress(Truncated):
                assert changelog_pairs(stream[:cut]) is None


def test_iterator_matches_parse() -> None:
    stream = encode_changelog(4, [("put", b"k", b"v"), ("delete", b"k", None)], [(3, "id")])
    assert list(iter_changelog_records(stream)) == [("put", b"k", b"v"), ("delete", b"k", None)]
    version, lineage, body = read_changelog_header(stream)
    assert (version, lineage) == (4, (LineageItem(3, "id"),))
    assert stream[body:] == encode_changelog(2, [("put", b"k", b"v"), ("delete", b"k", None)])[4:]
    assert Changelog.from_bytes(stream) == parse_changelog(stream)


# ---------------------------------------------------------------- version detection


def test_v1_with_only_the_end_marker() -> None:
    # readUTF sees length 0xFFFF and hits EOF, so Spark falls back to v1.
    assert parse_changelog(b"\xff\xff\xff\xff") == Changelog(1, (), ())


def test_v2_empty_batch() -> None:
    assert parse_changelog(write_utf("v2") + b"\x00") == Changelog(2, (), ())


def test_header_not_starting_with_v_means_v1() -> None:
    # A v1 file whose first key is 0x0001xxxx bytes long reads as a 1-char UTF string.
    key = b"k" * 0x10000
    stream = encode_changelog(1, [("put", key, b"v")])
    assert stream[:3] == b"\x00\x01\x00"
    assert parse_changelog(stream).records == (ChangelogRecord("put", key, b"v"),)


@pytest.mark.parametrize("label", ["v9", "v0", "v", "vx", "v2a", "v99999999"])
def test_unknown_version_is_unsupported(label: str) -> None:
    with pytest.raises(UnsupportedFormat, match=label):
        parse_changelog(write_utf(label) + b"\x00")


def test_explicit_v1_header_is_read_like_spark() -> None:
    # Spark's V1 reader restarts at byte 0, so a "v1" header is taken as a key size.
    with pytest.raises(Truncated):
        parse_changelog(write_utf("v1") + b"\xff\xff\xff\xff")


def test_lineage_in_modified_utf8() -> None:
    stream = encode_changelog(3, [], [(1, "é-\U0001f600")])
    assert b"\xed\xa0\xbd\xed\xb8\x80" in stream  # a surrogate pair, as Java writes it
    assert parse_changelog(stream).lineage == (LineageItem(1, "é-\U0001f600"),)


def test_modified_utf8_nul_in_header() -> None:
    with pytest.raises(UnsupportedFormat, match="x00"):
        parse_changelog(write_utf("v\x00") + b"\x00")


@pytest.mark.parametrize(
    "lineage",
    [
        pytest.param("not json", id="not-json"),
        pytest.param('{"version":1}', id="object"),
        pytest.param('[{"version":"1","checkpointUniqueId":"x"}]', id="string-version"),
        pytest.param('[{"version":true,"checkpointUniqueId":"x"}]', id="bool-version"),
        pytest.param('[{"version":1}]', id="missing-id"),
        pytest.param("[1]", id="not-an-item"),
    ],
)
def test_bad_lineage(lineage: str) -> None:
    with pytest.raises(CorruptData, match="lineage"):
        parse_changelog(write_utf("v4") + write_utf(lineage) + b"\x00")


def test_bad_modified_utf8_header() -> None:
    with pytest.raises(CorruptData, match="UTF-8"):
        parse_changelog(struct.pack(">H", 2) + b"v\xff" + b"\x00")


# ---------------------------------------------------------------- record refusals


@pytest.mark.parametrize(
    ("body", "error", "match"),
    [
        pytest.param(b"\x02", CorruptData, "record type 0x02", id="unknown-type"),
        pytest.param(
            b"\x10\x00\x00\x00\x01k\x00\x00\x00\x00\x00",
            CorruptData,
            "value size 0",
            id="delete-without-minus-one",
        ),
        pytest.param(b"\x01\xff\xff\xff\xfek", CorruptData, "negative", id="negative-key"),
        pytest.param(
            b"\x01\x00\x00\x00\x01k\xff\xff\xff\xff\x00",
            CorruptData,
            "negative",
            id="put-with-minus-one",
        ),
        pytest.param(b"\x00\x00", CorruptData, "follow", id="bytes-after-eof"),
        pytest.param(b"", Truncated, "EOF record", id="no-eof"),
    ],
)
def test_v2_refusals(body: bytes, error: type[ParseError], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_changelog(write_utf("v2") + body)


@pytest.mark.parametrize(
    ("body", "error", "match"),
    [
        pytest.param(b"\xff\xff\xff\xfe", CorruptData, "key size -2", id="negative-key"),
        pytest.param(
            b"\x00\x00\x00\x01k\xff\xff\xff\xf0\xff\xff\xff\xff",
            CorruptData,
            "value size -16",
            id="negative-value",
        ),
        pytest.param(b"\xff\xff\xff\xff\x00", CorruptData, "follow", id="bytes-after-eof"),
    ],
)
def test_v1_v3_refusals(body: bytes, error: type[ParseError], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_changelog(body)
    with pytest.raises(error, match=match):
        parse_changelog(write_utf("v3") + write_utf("[]") + body)


@FAST
@given(stream=st.binary(max_size=120), header=st.sampled_from([b"", b"\x00\x02v2", b"\x00\x02v4"]))
def test_random_bytes_raise_only_parse_errors(stream: bytes, header: bytes) -> None:
    with contextlib.suppress(ParseError):
        parse_changelog(header + stream)


# ---------------------------------------------------------------- row checksums (§5.5)


@FAST
@given(
    key=blobs,
    elements=st.lists(blobs, min_size=1, max_size=5),
    delimiter=st.sampled_from([b"", b","]),
)
def test_unwrap_value_checksum_round_trip(
    key: bytes, elements: list[bytes], delimiter: bytes
) -> None:
    value = delimiter.join(with_value_checksum(key, e) for e in elements)
    assert unwrap_value_checksum(key, value, delimiter=delimiter) == delimiter.join(elements)


def test_unwrap_value_checksum_refusals() -> None:
    key = b"\x02\x00key"
    good = with_value_checksum(key, b"\x00row")
    with pytest.raises(ChecksumMismatch):
        unwrap_value_checksum(b"\x03\x00key", good)  # the CF prefix is part of the CRC
    with pytest.raises(CorruptData, match="delimiter"):
        unwrap_value_checksum(key, good + b";" + good, delimiter=b",")
    with pytest.raises(CorruptData, match="delimiter"):
        unwrap_value_checksum(key, good + b",", delimiter=b",")
    with pytest.raises(Truncated):
        unwrap_value_checksum(key, good[:-1])
    with pytest.raises(Truncated):
        unwrap_value_checksum(key, good[:7])
    with pytest.raises(CorruptData, match="negative"):
        unwrap_value_checksum(key, good[:4] + struct.pack("<i", -1))


def test_unwrap_delete_key() -> None:
    assert unwrap_delete_key(with_key_checksum(b"\x01\x00k")) == b"\x01\x00k"
    with pytest.raises(ChecksumMismatch):
        unwrap_delete_key(with_key_checksum(b"k")[:-1] + b"j")
    with pytest.raises(Truncated):
        unwrap_delete_key(b"\x00")
