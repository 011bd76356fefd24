"""The ``.delta``/``.snapshot`` record stream, row checksums and CRC32C, on synthetic bytes."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers.compression import decompress
from stateglass.parsers.errors import ChecksumMismatch, CorruptData, ParseError, Truncated
from stateglass.parsers.hdfs_files import (
    Record,
    iter_records,
    strip_hdfs_key_checksum,
    strip_hdfs_row_checksum,
)
from stateglass.parsers.rowchecksum import CRC32C_IMPLEMENTATION, crc32c, crc32c_python
from tests.parsers.state_encoders import (
    encode_lz4,
    encode_records,
    with_key_checksum,
    with_single_checksum,
)

FAST = settings(max_examples=80, deadline=None, database=None)

keys = st.binary(max_size=40)
rows = st.integers(0, 12).flatmap(lambda n: st.binary(min_size=8 * n, max_size=8 * n))
puts = st.lists(st.tuples(keys, rows), max_size=30)
changes = st.lists(st.tuples(keys, st.one_of(st.none(), rows)), max_size=30)


@FAST
@given(records=changes)
def test_round_trip(records: list[tuple[bytes, bytes | None]]) -> None:
    assert list(iter_records(encode_records(records))) == records


@FAST
@given(records=puts)
def test_round_trip_through_lz4(records: list[tuple[bytes, bytes]]) -> None:
    stream = decompress("lz4", encode_lz4(encode_records(records), 256))
    assert list(iter_records(stream, allow_deletes=False)) == records


@FAST
@given(records=changes)
def test_every_cut_is_truncated(records: list[tuple[bytes, bytes | None]]) -> None:
    stream = encode_records(records)
    for cut in range(len(stream)):
        with pytest.raises(Truncated):
            list(iter_records(stream[:cut]))


@FAST
@given(key=keys, row=st.binary(max_size=60))
def test_value_cut_to_multiple_of_eight(key: bytes, row: bytes) -> None:
    # Pre-2.3 Spark appended 4 junk bytes; readers floor value sizes to a multiple of 8.
    [(_, value)] = iter_records(encode_records([(key, row)]))
    assert value == row[: len(row) // 8 * 8]


def test_empty_stream_is_just_the_marker() -> None:
    assert list(iter_records(b"\xff\xff\xff\xff")) == []


def test_accepts_buffers() -> None:
    stream = encode_records([(b"k", bytes(8))])
    assert list(iter_records(memoryview(stream))) == list(iter_records(bytearray(stream)))


def test_bytes_after_end_marker() -> None:
    with pytest.raises(CorruptData, match="follow the -1") as info:
        list(iter_records(encode_records([(b"k", bytes(8))]) + b"\x00"))
    assert info.value.offset == 4 + 1 + 4 + 8 + 4


def test_missing_end_marker() -> None:
    with pytest.raises(Truncated, match="end marker"):
        list(iter_records(encode_records([(b"k", bytes(8))])[:-4]))


def test_negative_key_size() -> None:
    with pytest.raises(CorruptData, match="key size -2") as info:
        list(iter_records(struct.pack(">i", -2)))
    assert info.value.offset == 0


def test_negative_value_size_other_than_minus_one() -> None:
    stream = struct.pack(">i", 1) + b"k" + struct.pack(">i", -7) + struct.pack(">i", -1)
    with pytest.raises(CorruptData, match="value size -7"):
        list(iter_records(stream))


def test_snapshot_refuses_deletes() -> None:
    stream = encode_records([(b"a", bytes(8)), (b"b", None)])
    assert list(iter_records(stream)) == [(b"a", bytes(8)), (b"b", None)]
    with pytest.raises(CorruptData, match="snapshot"):
        list(iter_records(stream, allow_deletes=False))


def test_later_records_for_the_same_key_are_kept_in_order() -> None:
    stream = encode_records([(b"k", bytes(8)), (b"k", b"\x01" * 8), (b"k", None)])
    assert [v for _, v in iter_records(stream)] == [bytes(8), b"\x01" * 8, None]


def test_record_dataclass() -> None:
    put, delete = (Record(*pair) for pair in [(b"k", b"v" * 8), (b"k", None)])
    assert not put.is_delete and delete.is_delete
    with pytest.raises(AttributeError):
        put.key = b"x"  # type: ignore[misc]


# ---------------------------------------------------------------- row checksums (§2.5)


@FAST
@given(records=changes)
def test_row_checksum_round_trip(records: list[tuple[bytes, bytes | None]]) -> None:
    wrapped = [(k, None) if v is None else (k, with_single_checksum(k, v)) for k, v in records]
    deletes_wrapped = [(with_key_checksum(k) if v is None else k, v) for k, v in wrapped]
    assert list(iter_records(encode_records(deletes_wrapped), row_checksum=True)) == records


def test_row_checksum_cut_happens_after_stripping() -> None:
    # 4 + 128 bytes: cutting first (to 128) would lose 4 row bytes and break the CRC.
    key, row = b"k" * 24, bytes(range(128))
    stream = encode_records([(key, with_single_checksum(key, row))])
    assert list(iter_records(stream, row_checksum=True)) == [(key, row)]
    [(_, cut)] = iter_records(stream)
    assert len(cut) == 128
    with pytest.raises(ChecksumMismatch):
        strip_hdfs_row_checksum(key, cut)


def test_row_checksum_mismatch_offset_is_in_the_stream() -> None:
    key, row = b"key", bytes(16)
    value = bytearray(with_single_checksum(key, row))
    value[-1] ^= 1
    stream = encode_records([(with_key_checksum(b"other"), None), (key, bytes(value))])
    with pytest.raises(ChecksumMismatch) as info:
        list(iter_records(stream, row_checksum=True))
    assert info.value.offset == (4 + 9 + 4) + (4 + 3 + 4)


def test_row_checksum_on_wrong_key() -> None:
    with pytest.raises(ChecksumMismatch, match="stored 0x"):
        strip_hdfs_row_checksum(b"b", with_single_checksum(b"a", bytes(8)))


def test_row_checksum_value_too_short() -> None:
    with pytest.raises(Truncated):
        strip_hdfs_row_checksum(b"k", b"\x00\x01")
    with pytest.raises(Truncated):
        list(iter_records(encode_records([(b"k", b"\x00")]), row_checksum=True))


def test_removed_key_checksum() -> None:
    assert strip_hdfs_key_checksum(with_key_checksum(b"key")) == b"key"
    broken = bytearray(with_key_checksum(b"key"))
    broken[0] ^= 1
    with pytest.raises(ChecksumMismatch):
        strip_hdfs_key_checksum(bytes(broken))


# ---------------------------------------------------------------- CRC32C


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b"", 0, id="empty"),
        pytest.param(b"123456789", 0xE3069283, id="check-value"),
        pytest.param(bytes(32), 0x8A9136AA, id="rfc3720-zeros"),
        pytest.param(b"\xff" * 32, 0x62A8AB43, id="rfc3720-ones"),
        pytest.param(bytes(range(32)), 0x46DD794E, id="rfc3720-incrementing"),
    ],
)
def test_crc32c_vectors(data: bytes, expected: int) -> None:
    assert crc32c(data) == expected
    assert crc32c_python(data) == expected


@FAST
@given(a=st.binary(max_size=100), b=st.binary(max_size=100))
def test_crc32c_continues(a: bytes, b: bytes) -> None:
    assert crc32c(b, crc32c(a)) == crc32c(a + b) == crc32c_python(b, crc32c_python(a))


def test_crc32c_implementation_is_named() -> None:
    assert CRC32C_IMPLEMENTATION in {"python", "google-crc32c", "crc32c"}


@FAST
@given(stream=st.binary(max_size=200))
def test_random_bytes_raise_only_parse_errors(stream: bytes) -> None:
    for row_checksum in (False, True):
        with contextlib.suppress(ParseError):
            list(iter_records(stream, row_checksum=row_checksum))


@given(
    st.lists(
        st.tuples(st.binary(max_size=24), st.one_of(st.none(), st.binary(max_size=40))),
        max_size=40,
    )
)
def test_read_record_keys_agrees_with_read_records(
    records: list[tuple[bytes, bytes | None]],
) -> None:
    from stateglass.parsers.hdfs_files import read_record_keys, read_records

    data = encode_records(records)
    full = read_records(data)
    puts, deletes, ordered = read_record_keys(data)
    assert puts == [k for k, v in full if v is not None]
    assert deletes == [k for k, v in full if v is None]
    assert ordered == (not deletes or set(deletes).isdisjoint(puts))


def test_read_record_keys_reports_damage_like_iter_records() -> None:
    from stateglass.parsers.hdfs_files import read_record_keys

    data = encode_records([(b"k" * 8, b"v" * 16), (b"x" * 8, None)])
    for cut in range(len(data) - 1):
        with pytest.raises(ParseError):
            read_record_keys(data[:cut])
