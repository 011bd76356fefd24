"""Tests for stateglass.parsers.rocksdb_encoding: RocksDB key layouts and value framing.

Golden tests restore every RocksDB checkpoint zip of the corpus with ``rocksdict`` and frame
every key and value; unit and property tests use test-only encoders that follow Spark's
``RocksDBStateEncoder``.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers.errors import (
    ChecksumMismatch,
    CorruptData,
    ParseError,
    Truncated,
    UnsupportedFormat,
)
from stateglass.parsers.logs import OffsetSeq, batch_id_of, is_batch_file_name
from stateglass.parsers.operator_metadata import OperatorMetadata
from stateglass.parsers.rocksdb_encoding import (
    KEY_LAYOUTS,
    NoPrefixLayout,
    PrefixKeyScanLayout,
    RangeKeyScanLayout,
    TimestampAsPostfixLayout,
    TimestampAsPrefixLayout,
    cf_prefix,
    decode_range_values,
    decode_timestamp,
    decode_value,
    decode_values,
    key_layout,
    split_cf_prefix,
    split_schema_id,
)
from stateglass.parsers.rowchecksum import crc32c
from stateglass.parsers.schema_file import ColumnFamilySchema, StateSchemaFile
from stateglass.parsers.sparktypes import AtomicType, StructField, StructType
from tests.parsers.corpus_files import member_names, readable_id
from tests.parsers.rocksdb_restore import open_read_only, restore
from tests.parsers.unsaferow_lite import decode_row, row_size_ok

# ---------------------------------------------------------------------------------------------
# Test-only encoders (Spark's side of the format)


def enc(row: bytes) -> bytes:
    """``encodeUnsafeRow``: version byte 0, then the row."""
    return b"\x00" + row


def framed_key(first: bytes, rest: bytes | None) -> bytes:
    """Prefix/range-scan key: ``LE32 len(first) ‖ first ‖ rest``."""
    return struct.pack("<i", len(first)) + first + (rest or b"")


_RANGE_FORMATS = {"byte": "b", "short": "h", "integer": "i", "long": "q"}


def encode_range_value(value: Any, type_name: str) -> bytes:
    """One binary field of the range row, as ``encodePrefixKeyForRangeScan`` writes it."""
    width = {"byte": 1, "short": 2, "integer": 4, "long": 8, "float": 4, "double": 8}[type_name]
    if value is None:
        return b"\x02" + bytes(width)
    if type_name in ("float", "double"):
        raw = struct.pack(">f" if width == 4 else ">d", value)
        if raw[0] & 0x80:
            return b"\x00" + bytes(b ^ 0xFF for b in raw)
        return b"\x01" + raw
    return (b"\x00" if value < 0 else b"\x01") + struct.pack(">" + _RANGE_FORMATS[type_name], value)


def encode_timestamp(ts: int) -> bytes:
    return ((ts ^ (1 << 63)) & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big")


def list_element(row: bytes) -> bytes:
    return struct.pack("<i", len(row) + 1) + enc(row)


def checksummed(full_key: bytes, payload: bytes) -> bytes:
    crc = crc32c(payload, crc32c(full_key))
    return struct.pack("<Ii", crc, len(payload)) + payload


def join_list(elements: Sequence[bytes], commas: Sequence[bool]) -> bytes:
    out = elements[0] if elements else b""
    for element, comma in zip(elements[1:], commas, strict=False):
        out += (b"," if comma else b"") + element
    return out


def schema(*fields: tuple[str, str]) -> StructType:
    return StructType(tuple(StructField(n, AtomicType(t)) for n, t in fields))


def fake_decoder(payload: bytes, row_schema: StructType) -> tuple[Any, ...]:
    """Stands in for the UnsafeRow decoder: tags each column with its payload and name."""
    if row_schema.fields and all(f.data_type == AtomicType("binary") for f in row_schema.fields):
        # A range row: the payload is the binaries joined with '|'.
        return tuple(payload.split(b"|"))
    return tuple(f"{payload.decode()}.{f.name}" for f in row_schema.fields)


# ---------------------------------------------------------------------------------------------
# Column family prefix


def test_split_cf_prefix() -> None:
    assert split_cf_prefix(b"\x0f\x00\x00rest") == (15, b"\x00rest")
    assert split_cf_prefix(cf_prefix(258) + b"x") == (258, b"x")
    with pytest.raises(Truncated):
        split_cf_prefix(b"\x01")


# ---------------------------------------------------------------------------------------------
# Key layouts


def test_no_prefix_layout() -> None:
    layout = key_layout(
        {"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"}, schema(("k", "string"))
    )
    assert isinstance(layout, NoPrefixLayout)
    (part,) = layout.parts
    assert (part.role, part.ordinals, part.row_schema) == ("key", (0,), part.schema)
    assert layout.split(enc(b"ROW")).rows == (b"ROW",)
    assert layout.decode(enc(b"R"), fake_decoder) == ("R.k",)


def test_prefix_scan_layout_projects_and_reassembles() -> None:
    key_schema = schema(("a", "string"), ("b", "long"), ("c", "integer"))
    spec = {"keyStateEncoderType": "PrefixKeyScanStateEncoderSpec", "numColsPrefixKey": 2}
    layout = key_layout(spec, key_schema)
    assert isinstance(layout, PrefixKeyScanLayout)
    prefix, remaining = layout.parts
    assert prefix.ordinals == (0, 1) and prefix.schema.names == ["a", "b"]
    assert remaining.ordinals == (2,) and remaining.schema.names == ["c"]
    key = framed_key(enc(b"P"), enc(b"Q"))
    assert layout.split(key).rows == (b"P", b"Q")
    assert layout.decode(key, fake_decoder) == ("P.a", "P.b", "Q.c")


def test_v1_v2_schema_layout_from_operator_metadata() -> None:
    key_schema = schema(("k", "string"), ("sessionStartTime", "timestamp"))
    assert isinstance(key_layout(None, key_schema), NoPrefixLayout)
    layout = key_layout(None, key_schema, num_cols_prefix_key=1)
    assert isinstance(layout, PrefixKeyScanLayout) and layout.num_cols_prefix_key == 1


def test_range_scan_layout_reorders_columns() -> None:
    key_schema = schema(("foo", "string"), ("bar", "long"), ("baz", "string"), ("buzz", "integer"))
    spec = {"keyStateEncoderType": "RangeKeyScanStateEncoderSpec", "orderingOrdinals": [3, 1]}
    layout = key_layout(spec, key_schema)
    assert isinstance(layout, RangeKeyScanLayout)
    range_part, remaining = layout.parts
    assert range_part.ordinals == (3, 1)
    assert range_part.schema.names == ["buzz", "bar"]
    assert range_part.row_schema == schema(("buzz", "binary"), ("bar", "binary"))
    assert remaining.ordinals == (0, 2)
    range_row = encode_range_value(-5, "integer") + b"|" + encode_range_value(7, "long")
    key = framed_key(enc(range_row), enc(b"R"))
    assert layout.decode(key, fake_decoder) == ("R.foo", 7, "R.baz", -5)


def test_range_scan_without_remaining_columns() -> None:
    spec = {"keyStateEncoderType": "RangeKeyScanStateEncoderSpec", "orderingOrdinals": [0]}
    layout = key_layout(spec, schema(("t", "long")))
    assert [p.role for p in layout.parts] == ["range"]
    key = framed_key(enc(encode_range_value(9, "long")), None)
    assert layout.decode(key, fake_decoder) == (9,)
    with pytest.raises(CorruptData):
        layout.split(key + b"\x00")


def test_range_scan_real_bytes() -> None:
    # From 4.0.5 tws-rocks $procTimers_timestampToKey: expiry 1795289841022 ms.
    value = bytes.fromhex("01000001a1ff6f90d6")
    assert decode_range_values([value], [AtomicType("long")]) == (0x1A1FF6F90D6,)


def test_timestamp_layouts() -> None:
    key_schema = schema(("field0", "string"), ("__event_time", "long"))
    postfix = key_layout(
        {"keyStateEncoderType": "TimestampAsPostfixKeyStateEncoderSpec"}, key_schema
    )
    prefix = key_layout({"keyStateEncoderType": "TimestampAsPrefixKeyStateEncoderSpec"}, key_schema)
    assert isinstance(postfix, TimestampAsPostfixLayout)
    assert isinstance(prefix, TimestampAsPrefixLayout)
    assert [p.role for p in prefix.parts] == ["timestamp", "key"]
    ts = encode_timestamp(60_000_000)
    assert ts == bytes.fromhex("8000000003938700")
    assert postfix.decode(enc(b"K") + ts, fake_decoder) == ("K.field0", 60_000_000)
    assert prefix.decode(ts + enc(b"K"), fake_decoder) == ("K.field0", 60_000_000)
    assert decode_timestamp(encode_timestamp(-1)) == -1
    assert decode_timestamp(bytes.fromhex("8000000004c4b400")) == 80_000_000


def test_avro_key_parts_carry_schema_ids() -> None:
    key_schema = StructType(
        (
            StructField("key", schema(("value", "string"))),
            StructField("userKey", schema(("value", "string"))),
        )
    )
    spec = {"keyStateEncoderType": "PrefixKeyScanStateEncoderSpec", "numColsPrefixKey": 1}
    layout = key_layout(spec, key_schema, encoding_format="avro")
    # 4.0.5 tws-rocks-cl-avro mapState key (CF prefix removed).
    key = bytes.fromhex("0500000000020202610000000202047831")
    split = layout.split(key)
    assert split.rows == (bytes.fromhex("02020261"), bytes.fromhex("0202047831"))
    assert split.schema_id == 0
    no_prefix = key_layout(None, schema(("value", "string")), encoding_format="avro")
    assert no_prefix.split(bytes.fromhex("000700020261")).schema_id == 7


def test_avro_range_record_has_marker_and_value_fields() -> None:
    key_schema = StructType(
        (StructField("expirationMs", AtomicType("long")), StructField("k", schema(("v", "string"))))
    )
    spec = {"keyStateEncoderType": "RangeKeyScanStateEncoderSpec", "orderingOrdinals": [0]}
    layout = key_layout(spec, key_schema, encoding_format="avro")
    assert layout.parts[0].row_schema is not None
    assert len(layout.parts[0].row_schema.fields) == 2
    assert layout.range_values([b"\x01", (12345).to_bytes(8, "big")]) == (12345,)
    assert layout.range_values([b"\x02", None]) == (None,)


def test_registry_lists_every_spec() -> None:
    assert set(KEY_LAYOUTS) == {
        "NoPrefixKeyStateEncoderSpec",
        "PrefixKeyScanStateEncoderSpec",
        "RangeKeyScanStateEncoderSpec",
        "TimestampAsPrefixKeyStateEncoderSpec",
        "TimestampAsPostfixKeyStateEncoderSpec",
    }


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        pytest.param({"keyStateEncoderType": "FancySpec"}, UnsupportedFormat, id="unknown-spec"),
        pytest.param({}, UnsupportedFormat, id="no-type"),
        pytest.param(
            {"keyStateEncoderType": "PrefixKeyScanStateEncoderSpec"},
            CorruptData,
            id="prefix-without-count",
        ),
        pytest.param(
            {"keyStateEncoderType": "PrefixKeyScanStateEncoderSpec", "numColsPrefixKey": 3},
            CorruptData,
            id="prefix-too-wide",
        ),
        pytest.param(
            {"keyStateEncoderType": "RangeKeyScanStateEncoderSpec", "orderingOrdinals": [5]},
            CorruptData,
            id="ordinal-out-of-range",
        ),
        pytest.param(
            {"keyStateEncoderType": "RangeKeyScanStateEncoderSpec", "orderingOrdinals": [0]},
            UnsupportedFormat,
            id="variable-size-ordering-column",
        ),
        pytest.param(
            {"keyStateEncoderType": "RangeKeyScanStateEncoderSpec", "orderingOrdinals": "0"},
            CorruptData,
            id="ordinals-not-list",
        ),
        pytest.param(
            {"keyStateEncoderType": "TimestampAsPrefixKeyStateEncoderSpec"},
            CorruptData,
            id="timestamp-key-without-long",
        ),
    ],
)
def test_bad_specs(spec: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        key_layout(spec, schema(("a", "string"), ("b", "string")))


def test_timestamp_layout_refuses_avro() -> None:
    with pytest.raises(UnsupportedFormat):
        key_layout(
            {"keyStateEncoderType": "TimestampAsPostfixKeyStateEncoderSpec"},
            schema(("k", "string"), ("__event_time", "long")),
            encoding_format="avro",
        )


def test_unknown_encoding_format() -> None:
    with pytest.raises(UnsupportedFormat):
        key_layout(None, schema(("k", "string")), encoding_format="protobuf")


@pytest.mark.parametrize(
    ("layout", "key", "error"),
    [
        pytest.param(NoPrefixLayout(schema(("k", "long"))), b"", Truncated, id="empty"),
        pytest.param(
            NoPrefixLayout(schema(("k", "long"))),
            b"\x01" + bytes(16),
            UnsupportedFormat,
            id="version-1",
        ),
        pytest.param(
            PrefixKeyScanLayout(schema(("a", "long"), ("b", "long")), 1),
            b"\x05\x00",
            Truncated,
            id="short-length",
        ),
        pytest.param(
            PrefixKeyScanLayout(schema(("a", "long"), ("b", "long")), 1),
            framed_key(enc(b"P"), b"")[:-1],
            CorruptData,
            id="length-past-end",
        ),
        pytest.param(
            PrefixKeyScanLayout(schema(("a", "long"), ("b", "long")), 1),
            framed_key(enc(b"P"), b""),
            Truncated,
            id="no-remainder",
        ),
        pytest.param(
            PrefixKeyScanLayout(schema(("a", "long"), ("b", "long")), 1),
            struct.pack("<i", -1) + b"\x00",
            CorruptData,
            id="negative-length",
        ),
        pytest.param(
            NoPrefixLayout(schema(("k", "long")), "avro"),
            b"\x00\x01",
            Truncated,
            id="avro-no-schema-id",
        ),
        pytest.param(
            TimestampAsPostfixLayout(schema(("k", "long"), ("t", "long"))),
            bytes(8),
            Truncated,
            id="timestamp-short",
        ),
    ],
)
def test_bad_keys(layout: Any, key: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        layout.split(key)


def test_decoder_returning_wrong_width_is_corrupt() -> None:
    layout = NoPrefixLayout(schema(("a", "long"), ("b", "long")))
    with pytest.raises(CorruptData):
        layout.decode(enc(b"x"), lambda payload, s: (1,))


# ---------------------------------------------------------------------------------------------
# Range values


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (0, "long"),
        (-1, "long"),
        (2**63 - 1, "long"),
        (-(2**63), "long"),
        (-128, "byte"),
        (300, "short"),
        (-(2**31), "integer"),
        (1.5, "double"),
        (-1.5, "double"),
        (-0.0, "double"),
        (-2.5, "float"),
        (None, "long"),
        (None, "double"),
    ],
)
def test_range_value_round_trip(value: Any, type_name: str) -> None:
    (decoded,) = decode_range_values(
        [encode_range_value(value, type_name)], [AtomicType(type_name)]
    )
    assert decoded == value
    if isinstance(value, float):
        assert math.copysign(1, decoded) == math.copysign(1, value)


@settings(max_examples=200, deadline=None)
@given(
    a=st.one_of(st.none(), st.floats(allow_nan=False)),
    b=st.one_of(st.none(), st.floats(allow_nan=False)),
)
def test_range_encoding_sorts_like_numbers(a: float | None, b: float | None) -> None:
    ea, eb = encode_range_value(a, "double"), encode_range_value(b, "double")
    assert decode_range_values([ea], [AtomicType("double")]) == (a,)
    if a is not None and b is not None and a < b:
        assert ea < eb
    if a is not None and b is None:
        assert ea < eb  # nulls sort last


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_range_long_and_timestamp_round_trip(value: int) -> None:
    assert decode_range_values([encode_range_value(value, "long")], [AtomicType("long")]) == (
        value,
    )
    assert decode_timestamp(encode_timestamp(value)) == value


@pytest.mark.parametrize(
    ("encoded", "type_name", "error"),
    [
        (b"\x03" + bytes(8), "long", CorruptData),
        (b"\x01" + bytes(4), "long", CorruptData),
        (b"", "long", Truncated),
        (b"", "boolean", UnsupportedFormat),  # Spark 4.0 writes nothing for booleans
        (b"\x01\x00", "string", UnsupportedFormat),
        ("x", "long", CorruptData),
    ],
)
def test_bad_range_values(encoded: Any, type_name: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_range_values([encoded], [AtomicType(type_name)])


# ---------------------------------------------------------------------------------------------
# Values


def test_single_value() -> None:
    assert decode_value(enc(b"ROW")) == b"ROW"
    with pytest.raises(UnsupportedFormat, match="version 1"):
        decode_value(b"\x01ROW")
    with pytest.raises(Truncated):
        decode_value(b"")


def test_single_value_with_checksum() -> None:
    full_key = b"\x02\x00" + enc(b"KEY")
    value = checksummed(full_key, enc(b"ROW"))
    assert decode_value(value, row_checksum=True, full_key=full_key) == b"ROW"
    with pytest.raises(ChecksumMismatch):
        decode_value(value, row_checksum=True, full_key=full_key + b"x")
    with pytest.raises(CorruptData):
        decode_value(value + b"\x00", row_checksum=True, full_key=full_key)
    with pytest.raises(CorruptData):
        decode_value(value[:-1], row_checksum=True, full_key=full_key)
    with pytest.raises(ValueError):
        decode_value(value, row_checksum=True)


def test_real_checksummed_value() -> None:
    # 4.3.0-rowck tws-rocks-cl, countState of key "a".
    full_key = bytes.fromhex("020000000000000000000001000000100000006100000000000000")
    value = bytes.fromhex(
        "b0430ef521000000000000000000000000040000000000000002000000180000007834000000000000"
    )
    row = decode_value(value, row_checksum=True, full_key=full_key)
    assert len(row) == 32 and row.endswith(b"x4\x00\x00\x00\x00\x00\x00")


def test_list_values_with_and_without_delimiters() -> None:
    rows = [bytes([i]) * 8 for i in range(1, 5)]
    elements = [list_element(r) for r in rows]
    for commas in ([True] * 3, [False] * 3, [False, False, True], [True, False, True]):
        assert decode_values(join_list(elements, commas)) == tuple(rows)
    assert decode_values(b"") == ()


def test_list_value_comma_ambiguity_is_resolved_by_exact_parse() -> None:
    # An element of length 0x2C (44) directly after another: its first byte looks like ','.
    first = list_element(bytes(8))
    second = list_element(b"\x11" * 43)
    assert second[0] == 0x2C
    assert decode_values(first + second) == (bytes(8), b"\x11" * 43)
    assert decode_values(first + b"," + second) == (bytes(8), b"\x11" * 43)


def test_list_values_with_checksums() -> None:
    full_key = b"\x04\x00" + enc(b"K" * 8)
    rows = [bytes([i]) * 16 for i in range(3)]
    elements = [checksummed(full_key, list_element(r)) for r in rows]
    for commas in ([True, True], [False, False], [False, True]):
        value = join_list(elements, commas)
        assert decode_values(value, row_checksum=True, full_key=full_key) == tuple(rows)
    with pytest.raises(ChecksumMismatch):
        decode_values(join_list(elements, [True, True]), row_checksum=True, full_key=b"other")


@pytest.mark.parametrize(
    ("value", "error"),
    [
        pytest.param(list_element(bytes(8))[:-1], CorruptData, id="cut-element"),
        pytest.param(list_element(bytes(8)) + b",", CorruptData, id="trailing-comma"),
        pytest.param(list_element(bytes(8)) + b"\x00", CorruptData, id="trailing-byte"),
        pytest.param(b",", CorruptData, id="lone-comma"),
        pytest.param(struct.pack("<i", 0), CorruptData, id="zero-length"),
        pytest.param(
            struct.pack("<i", 9) + b"\x01" + bytes(8), CorruptData, id="element-version-1"
        ),
        pytest.param(b"\x01\x00", CorruptData, id="short-header"),
    ],
)
def test_bad_list_values(value: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_values(value)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.binary(max_size=40), min_size=1, max_size=8),
    commas=st.lists(st.booleans(), min_size=7, max_size=7),
    with_checksum=st.booleans(),
    full_key=st.binary(min_size=1, max_size=20),
)
def test_list_value_round_trip(
    rows: list[bytes], commas: list[bool], with_checksum: bool, full_key: bytes
) -> None:
    elements = [list_element(r) for r in rows]
    if with_checksum:
        elements = [checksummed(full_key, e) for e in elements]
    value = join_list(elements, commas)
    assert decode_values(value, row_checksum=with_checksum, full_key=full_key) == tuple(rows)


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(st.binary(max_size=24), min_size=1, max_size=4),
    commas=st.lists(st.booleans(), min_size=3, max_size=3),
    with_checksum=st.booleans(),
    cut=st.integers(0, 200),
    flips=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 7)), max_size=3),
)
def test_fuzz_values_only_parse_errors_escape(
    rows: list[bytes], commas: list[bool], with_checksum: bool, cut: int, flips: list
) -> None:
    key = b"\x03\x00\x00key"
    elements = [list_element(r) for r in rows]
    if with_checksum:
        elements = [checksummed(key, e) for e in elements]
    mutated = bytearray(join_list(elements, commas)[:cut])
    for position, bit in flips:
        if mutated:
            mutated[position % len(mutated)] ^= 1 << bit
    for decode in (decode_values, decode_value):
        with contextlib.suppress(ParseError):
            decode(bytes(mutated), row_checksum=with_checksum, full_key=key)


FUZZ_LAYOUTS = [
    NoPrefixLayout(schema(("k", "string"))),
    NoPrefixLayout(schema(("k", "string")), "avro"),
    PrefixKeyScanLayout(schema(("a", "string"), ("b", "long")), 1),
    PrefixKeyScanLayout(schema(("a", "string"), ("b", "long")), 1, "avro"),
    RangeKeyScanLayout(schema(("t", "long"), ("k", "string")), [0]),
    RangeKeyScanLayout(schema(("t", "long"), ("k", "string")), [0], "avro"),
    TimestampAsPrefixLayout(schema(("k", "string"), ("__event_time", "long"))),
    TimestampAsPostfixLayout(schema(("k", "string"), ("__event_time", "long"))),
]


@settings(max_examples=400, deadline=None)
@given(layout=st.sampled_from(FUZZ_LAYOUTS), key=st.binary(max_size=40))
def test_fuzz_keys_only_parse_errors_escape(layout: Any, key: bytes) -> None:
    try:
        split = layout.split(key)
    except ParseError:
        return
    assert len(split.rows) == len(layout.parts)


@settings(max_examples=200, deadline=None)
@given(
    first=st.binary(max_size=30),
    rest=st.binary(max_size=30),
    schema_id=st.integers(-(2**15), 2**15 - 1),
)
def test_avro_prefix_key_round_trip(first: bytes, rest: bytes, schema_id: int) -> None:
    layout = FUZZ_LAYOUTS[3]
    key = framed_key(enc(first), b"\x00" + struct.pack("<h", schema_id) + rest)
    split = layout.split(key)
    assert split.rows == (first, rest)
    assert split.schema_id == schema_id
    assert split_schema_id(struct.pack("<h", schema_id) + rest) == (schema_id, rest)


# ---------------------------------------------------------------------------------------------
# Golden: every RocksDB checkpoint zip of the corpus, restored and read with rocksdict

STORE_DIR = re.compile(r"(.*/checkpoint)/state/(\d+)/(\d+)(?:/([a-z-]+[A-Za-z]+))?/[^/]+\.zip")


def _store_dirs() -> list[Any]:
    found: dict[str, None] = {}
    for name in member_names():
        match = STORE_DIR.fullmatch(name)
        if match:
            found[name.rsplit("/", 1)[0]] = None
    params = [pytest.param(d, id=readable_id(d)) for d in found]
    return params or [pytest.param(None, id="no-corpus", marks=pytest.mark.skip("no corpus"))]


def _batch_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(
        (directory / n for n in os.listdir(directory) if is_batch_file_name(n)),
        key=lambda p: batch_id_of(p.name) or 0,
    )


class StoreContext:
    """Everything needed to frame one store's keys and values, read from its checkpoint."""

    def __init__(self, store_dir: Path) -> None:
        parts = store_dir.parts
        state = len(parts) - 1 - parts[::-1].index("state")
        self.checkpoint = Path(*parts[:state])
        self.operator_dir = Path(*parts[: state + 2])
        # <checkpoint>/state/<op>/<partition>[/<store>]
        self.store_name = parts[state + 3] if len(parts) > state + 3 else "default"
        self.offsets = OffsetSeq.from_bytes(
            _batch_files(self.checkpoint / "offsets")[-1].read_bytes()
        )
        self.operator: OperatorMetadata | None = None
        v2 = _batch_files(self.operator_dir / "_metadata" / "v2")
        v1 = self.operator_dir / "_metadata" / "metadata"
        if v2:
            self.operator = OperatorMetadata.from_bytes(v2[-1].read_bytes())
        elif v1.exists():
            self.operator = OperatorMetadata.from_bytes(v1.read_bytes())
        self.multi_valued: set[str] = set()
        properties = self.operator.operator_properties if self.operator else None
        for variable in (properties or {}).get("stateVariables", []):
            if variable["stateVariableType"] == "ListState":
                self.multi_valued.add(variable["stateName"])

    def v3_schema(self) -> StateSchemaFile:
        assert self.operator is not None, "stores with column families have operator metadata v2"
        (path,) = self.operator.stores[0].state_schema_file_paths[-1:]
        name = path.rsplit("/", 1)[1]
        return StateSchemaFile.from_bytes(
            (self.operator_dir / "_stateSchema" / "default" / name).read_bytes()
        )

    def v2_schema(self) -> ColumnFamilySchema:
        store = "" if self.store_name == "default" else self.store_name
        path = self.operator_dir / "0" / store / "_metadata" / "schema"
        return StateSchemaFile.from_bytes(path.read_bytes()).column_families[0]

    def prefix_columns(self) -> int:
        if self.operator is not None:
            return self.operator.store(self.store_name).num_cols_prefix_key
        # Spark 3.5 writes no operator metadata; its session window keys by one column here.
        return 1 if "session" in str(self.checkpoint) else 0

    def is_multi_valued(self, cf_name: str) -> bool:
        # Join state format 4 keeps lists in both of its column families.
        return cf_name in self.multi_valued or cf_name.endswith(("keyWithTsToValues", "tsWithKey"))


def _check_rows(rows: Sequence[bytes], value_schema: StructType, cf_name: str, fmt: str) -> None:
    for row in rows:
        if fmt == "avro":
            split_schema_id(row)
        elif cf_name.endswith("tsWithKey"):
            # Join v4's index stores a count where its schema says __dummy__:void.
            assert row_size_ok(row, 1)
        else:
            decode_row(row, value_schema)


@pytest.mark.parametrize("store", _store_dirs())
def test_corpus_rocksdb_stores(fixture_corpus: Path, store: str, tmp_path: Path) -> None:
    pytest.importorskip("rocksdict")
    store_dir = fixture_corpus / store
    context = StoreContext(store_dir)
    fmt = context.offsets.encoding_format
    checksums = context.offsets.row_checksum
    zips = sorted(p.name for p in store_dir.glob("*.zip"))
    assert zips
    for zip_name in zips:
        target = tmp_path / zip_name
        meta = restore(store_dir, zip_name, target)
        names = meta.column_family_names()
        schema_file = context.v3_schema() if meta.uses_column_families else None
        db = open_read_only(target)
        try:
            count = 0
            for raw_key, raw_value in db.items():
                count += 1
                if schema_file is not None:
                    cf_id, key = split_cf_prefix(raw_key)
                    cf = schema_file.column_family(names[cf_id])
                    layout = key_layout(
                        cf.key_state_encoder_spec, cf.key_schema, encoding_format=fmt
                    )
                else:
                    key, cf = raw_key, context.v2_schema()
                    layout = key_layout(
                        None, cf.key_schema, num_cols_prefix_key=context.prefix_columns()
                    )
                split = layout.split(key)
                if fmt == "unsaferow":
                    values = layout.decode(key, decode_row)
                    assert len(values) == len(cf.key_schema.fields)
                elif split.schema_id is not None:
                    assert split.schema_id == cf.key_schema_id
                if context.is_multi_valued(cf.name):
                    rows = decode_values(raw_value, row_checksum=checksums, full_key=raw_key)
                    assert rows
                else:
                    rows = (decode_value(raw_value, row_checksum=checksums, full_key=raw_key),)
                _check_rows(rows, cf.value_schema, cf.name, fmt)
            assert count == meta.num_keys + (meta.num_internal_keys or 0)
        finally:
            db.close()


def test_corpus_timer_and_join_keys(fixture_corpus: Path, tmp_path: Path) -> None:
    pytest.importorskip("rocksdict")
    store_dir = fixture_corpus / "4.3.0-joinv4/join-rocks-cl/checkpoint/state/0/0"
    zip_name = max((p.name for p in store_dir.glob("*.zip")), key=lambda n: int(n.split(".")[0]))
    meta = restore(store_dir, zip_name, tmp_path / "db")
    context = StoreContext(store_dir)
    schema_file = context.v3_schema()
    names = meta.column_family_names()
    db = open_read_only(tmp_path / "db")
    try:
        decoded = set()
        for raw_key, raw_value in db.items():
            cf_id, key = split_cf_prefix(raw_key)
            cf = schema_file.column_family(names[cf_id])
            values = key_layout(cf.key_state_encoder_spec, cf.key_schema).decode(key, decode_row)
            decoded.add((cf.name, values))
            if cf.name.endswith("keyWithTsToValues"):
                (row,) = decode_values(raw_value)
                assert decode_row(row, cf.value_schema)[-1] in (True, False)  # matched
    finally:
        db.close()
    assert decoded == {
        ("left-keyWithTsToValues", ("h", 80_000_000)),
        ("left-tsWithKey", ("h", 80_000_000)),
        ("right-keyWithTsToValues", ("h", 80_000_000)),
        ("right-tsWithKey", ("h", 80_000_000)),
    }


def test_corpus_merge_delimiter_pitfall(fixture_corpus: Path, tmp_path: Path) -> None:
    """4.3.0 lists read through a ``,`` merge operator still frame like the true values."""
    pytest.importorskip("rocksdict")
    store_dir = fixture_corpus / "4.3.0/tws-rocks-cl/checkpoint/state/0/0"
    assert (
        OffsetSeq.from_bytes(
            (store_dir.parents[2] / "offsets/0").read_bytes()
        ).merge_operator_version
        == 2
    )
    seen_comma = False
    for zip_name in sorted(p.name for p in store_dir.glob("*.zip")):
        default = tmp_path / f"default-{zip_name}"
        fixed = tmp_path / f"fixed-{zip_name}"
        meta = restore(store_dir, zip_name, default)
        restore(store_dir, zip_name, fixed, merge_delimiter="")
        names = meta.column_family_names()
        db_default, db_fixed = open_read_only(default), open_read_only(fixed)
        try:
            for raw_key, raw_value in db_default.items():
                if names[split_cf_prefix(raw_key)[0]] not in ("listState", "ttlList"):
                    continue
                true_value = db_fixed[raw_key]
                seen_comma |= true_value != raw_value
                assert decode_values(raw_value) == decode_values(true_value)
                # With Spark's empty delimiter the elements are back to back.
                rows = decode_values(true_value)
                assert len(true_value) == sum(len(r) + 5 for r in rows)
        finally:
            db_default.close()
            db_fixed.close()
    assert seen_comma, "rocksdict's default ',' operator should show the pitfall here"
