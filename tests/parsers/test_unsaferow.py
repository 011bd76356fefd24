"""UnsafeRow decoding: real rows of the corpus, round trips, and corrupt bytes."""

from __future__ import annotations

import contextlib
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers.compression import decompress
from stateglass.parsers.errors import CorruptData, UnsupportedFormat
from stateglass.parsers.hdfs_files import iter_records
from stateglass.parsers.java_bytes import decode_utf8
from stateglass.parsers.schema_file import StateSchemaFile
from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DecimalType,
    MapType,
    StructField,
    StructType,
)
from stateglass.parsers.unsaferow import CalendarInterval, VariantVal, row_decoder
from stateglass.parsers.unsafewriter import encode_row
from tests.parsers.spark_values import schema_and_row


def struct_of(*fields: tuple[str, DataType]) -> StructType:
    return StructType(tuple(StructField(name, dt) for name, dt in fields))


STRING = AtomicType("string")
LONG = AtomicType("long")
KEY_K = struct_of(("k", STRING))


def latest_rows(store: Path) -> dict[bytes, bytes]:
    """The rows of the newest version of an HDFS store: last snapshot, then later deltas."""
    files: dict[int, dict[str, Path]] = {}
    for f in store.iterdir():
        version, _, ext = f.name.partition(".")
        if version.isdigit() and ext in ("delta", "snapshot"):
            files.setdefault(int(version), {})[ext] = f
    newest = max(files)
    snapshots = [v for v in files if "snapshot" in files[v]]
    start = max(snapshots) if snapshots else 0
    rows: dict[bytes, bytes] = {}
    if snapshots:
        for key, value in iter_records(decompress("lz4", files[start]["snapshot"].read_bytes())):
            assert value is not None
            rows[key] = value
    for version in range(start + 1, newest + 1):
        for key, value in iter_records(decompress("lz4", files[version]["delta"].read_bytes())):
            if value is None:
                rows.pop(key, None)
            else:
                rows[key] = value
    return rows


def corpus_store_rows(corpus: Path, scenario: str) -> tuple[StructType, StructType, list[Any]]:
    """Schemas (from the schema file) and decoded (key, value) rows of both partitions."""
    state = corpus / scenario / "checkpoint" / "state" / "0"
    cf = StateSchemaFile.from_bytes((state / "0" / "_metadata" / "schema").read_bytes())
    key_schema = cf.column_families[0].key_schema
    value_schema = cf.column_families[0].value_schema
    decode_key, decode_value = row_decoder(key_schema), row_decoder(value_schema)
    rows = []
    for partition in sorted(p for p in state.iterdir() if p.name.isdigit()):
        for key, value in latest_rows(partition).items():
            rows.append((decode_key(key), decode_value(value)))
    return key_schema, value_schema, sorted(rows, key=repr)


# --- golden: rows written by real Spark ------------------------------------------------------


def test_worked_example_of_the_format_doc() -> None:
    """checkpoint-format.md §6.4: key ``struct<k:string>`` with k = "a"."""
    row = bytes.fromhex("000000000000000001000000100000006100000000000000")
    assert row_decoder(KEY_K)(row) == ("a",)


@pytest.mark.parametrize("version", ["3.5.9c", "4.3.0"])
def test_flatmapgroupswithstate_rich_state(fixture_corpus: Path, version: str) -> None:
    """Every type of the fmgws state class decodes to what the query put in it."""
    key_schema, value_schema, rows = corpus_store_rows(fixture_corpus, f"{version}/fmgws-hdfs")
    assert key_schema.simple_string() == "struct<value:string>"
    assert value_schema.simple_string() == (
        "struct<groupState:struct<cnt:bigint,names:array<string>,m:map<string,int>,"
        "inner:struct<a:int,b:string>,dec:decimal(38,18),ts:timestamp,dt:date,bin:binary,"
        "dbl:double,flag:boolean,opt:string,i:int,sh:smallint,by:tinyint,f:float>,"
        "timeoutTimestamp:bigint>"
    )
    by_key = dict(rows)
    assert by_key[("a",)] == (
        (
            4,
            ["x2", "x3", "x4"],
            [("x1", 1), ("x2", 10), ("x3", 7), ("x4", 100)],
            (4, "aa"),
            Decimal("18.000000000000000000"),
            60_123_000,  # µs: 1970-01-01T00:01:00.123Z
            19782,  # 2024-02-29
            b"a\x00\xff",
            9.0,
            False,
            "seen",
            -4,
            8,
            12,
            2.0,
        ),
        75_000,
    )
    state, _ = by_key[("h",)]
    assert state[4] == Decimal("1.000000000000000000") and str(state[4]) == "1.000000000000000000"
    assert state[10] is None  # opt: a null string


def test_aggregation_with_duplicate_field_names(fixture_corpus: Path) -> None:
    """Aggregation buffers repeat names (count, sum, max); values stay positional."""
    key_schema, value_schema, rows = corpus_store_rows(fixture_corpus, "3.5.9/agg-hdfs")
    assert key_schema == KEY_K
    assert value_schema.names == ["count", "sum", "max", "sum", "count", "sum", "max", "buf"]
    by_key = dict(rows)
    count, total, biggest, dsum, dcount, lsum, day, buf = by_key[("c",)]
    assert (count, total, biggest, dsum, dcount, lsum, day) == (2, 33, "z2", 6.25, 2, 625, 0)
    # collect_list keeps its buffer as an UnsafeRow with one array<string> field.
    assert row_decoder(struct_of(("list", ArrayType(STRING))))(buf) == (["z1", "z2"],)


# --- round trips ----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(schema_and_row())
def test_decode_inverts_encode(case: tuple[StructType, tuple[Any, ...]]) -> None:
    schema, row = case
    assert row_decoder(schema)(encode_row(schema, row)) == row


@settings(max_examples=100, deadline=None)
@given(schema_and_row(), st.integers(0, 64))
def test_memoryview_and_offset(case: tuple[StructType, tuple[Any, ...]], pad: int) -> None:
    schema, row = case
    data = encode_row(schema, row)
    assert row_decoder(schema)(memoryview(b"\xee" * pad + data), pad) == row


def test_every_value_convention() -> None:
    schema = struct_of(
        ("b", AtomicType("boolean")),
        ("f", AtomicType("float")),
        ("dc", DecimalType(18, 3)),
        ("dl", DecimalType(38, 0)),
        ("dn", DecimalType(38, 10)),
        ("ci", AtomicType("interval")),
        ("v", AtomicType("void")),
        ("var", AtomicType("variant")),
        ("m", MapType(ArrayType(LONG), STRING)),
    )
    row = (
        True,
        0.10000000149011612,
        Decimal("-123456789012345.678"),
        Decimal("-99999999999999999999999999999999999999"),
        None,
        CalendarInterval(-13, 4, -5),
        None,
        VariantVal(b"\x0c\x01", b"\x01\x00\x00"),
        [([1, None], "x")],
    )
    assert row_decoder(schema)(encode_row(schema, row)) == row


def test_large_decimal_keeps_its_16_bytes_when_null() -> None:
    """A null decimal(38,s) still has 16 reserved bytes and its offset in the slot."""
    schema = struct_of(("d", DecimalType(38, 18)), ("s", STRING))
    data = encode_row(schema, (None, "x"))
    assert len(data) == 8 + 16 + 16 + 8
    assert struct.unpack_from("<Q", data, 8)[0] == 24 << 32
    assert row_decoder(schema)(data) == (None, "x")


def test_decoders_are_cached_per_schema() -> None:
    assert row_decoder(struct_of(("k", STRING))) is row_decoder(KEY_K)


# --- strings as Java decodes them -------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        # Captured from Spark 4.3.0: select cast(X'..' as string) ... toJSON
        pytest.param("ff61", "\ufffda", id="bad-lead"),
        pytest.param("61c3", "a\ufffd", id="cut-2-byte"),
        pytest.param("eda080", "\ufffd", id="encoded-surrogate-is-one-char"),
        pytest.param("f0908080", "\U00010000", id="4-byte"),
        pytest.param("e282", "\ufffd", id="cut-3-byte"),
        pytest.param("c0af", "\ufffd\ufffd", id="overlong"),
        pytest.param("f4908080", "\ufffd" * 4, id="above-10ffff"),
    ],
)
def test_malformed_utf8_like_java(raw: str, text: str) -> None:
    assert decode_utf8(bytes.fromhex(raw)) == text
    data = encode_row(struct_of(("b", AtomicType("binary"))), (bytes.fromhex(raw),))
    assert row_decoder(KEY_K)(data) == (text,)  # same bytes read as a string


# --- corrupt input ----------------------------------------------------------------------------


def test_short_fixed_region_is_corrupt() -> None:
    with pytest.raises(CorruptData):
        row_decoder(struct_of(("a", LONG), ("b", LONG)))(bytes(16))


@pytest.mark.parametrize(
    ("schema", "data"),
    [
        pytest.param(
            KEY_K, bytes(8) + ((16 << 32) | 9).to_bytes(8, "little") + b"a" * 8, id="string-size"
        ),
        pytest.param(
            KEY_K, bytes(8) + ((4096 << 32) | 1).to_bytes(8, "little"), id="string-offset"
        ),
        pytest.param(
            struct_of(("a", ArrayType(LONG))),
            bytes(8)
            + ((16 << 32) | 16).to_bytes(8, "little")
            + (10**9).to_bytes(8, "little")
            + bytes(8),
            id="array-count",
        ),
        pytest.param(
            struct_of(("a", ArrayType(LONG))),
            bytes(8)
            + ((16 << 32) | 8).to_bytes(8, "little")
            + (-1).to_bytes(8, "little", signed=True),
            id="array-negative-count",
        ),
        pytest.param(
            struct_of(("m", MapType(STRING, LONG))),
            bytes(8)
            + ((16 << 32) | 8).to_bytes(8, "little")
            + (-8).to_bytes(8, "little", signed=True),
            id="map-negative-key-size",
        ),
        pytest.param(
            struct_of(("m", MapType(STRING, LONG))),
            bytes(8) + ((16 << 32) | 8).to_bytes(8, "little") + (99).to_bytes(8, "little"),
            id="map-key-size",
        ),
        pytest.param(
            struct_of(("c", AtomicType("interval"))),
            bytes(8) + ((16 << 32) | 8).to_bytes(8, "little") + bytes(8),
            id="calendar-size",
        ),
    ],
)
def test_offsets_out_of_range_are_corrupt(schema: StructType, data: bytes) -> None:
    with pytest.raises(CorruptData) as info:
        row_decoder(schema)(data)
    assert info.value.offset is not None


def test_map_with_unequal_arrays_is_corrupt() -> None:
    schema = struct_of(("m", MapType(LONG, LONG)))
    good = encode_row(schema, ([(1, 2)],))
    keys = struct.pack("<qQqq", 2, 0, 1, 3)  # two keys, one value below
    values = struct.pack("<qQq", 1, 0, 5)
    body = struct.pack("<q", len(keys)) + keys + values
    bad = good[:8] + ((16 << 32) | len(body)).to_bytes(8, "little") + body
    with pytest.raises(CorruptData, match="2 keys but 1 values"):
        row_decoder(schema)(bad)


@settings(max_examples=200, deadline=None)
@given(schema_and_row(), st.data())
def test_damaged_rows_raise_only_corrupt_data(
    case: tuple[StructType, tuple[Any, ...]], data: st.DataObject
) -> None:
    """Flip, cut or extend a valid row: the decoder returns or raises CorruptData, nothing else."""
    schema, row = case
    raw = bytearray(encode_row(schema, row))
    action = data.draw(st.sampled_from(["flip", "cut", "garbage"]))
    if action == "flip" and raw:
        for _ in range(data.draw(st.integers(1, 4))):
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] = data.draw(st.integers(0, 255))
    elif action == "cut":
        del raw[data.draw(st.integers(0, len(raw))) :]
    else:
        raw += data.draw(st.binary(max_size=16))
    with contextlib.suppress(CorruptData):
        row_decoder(schema)(bytes(raw))


def test_unknown_type_is_unsupported() -> None:
    with pytest.raises(UnsupportedFormat):
        row_decoder(struct_of(("x", AtomicType("geometry"))))


def test_a_nul_in_a_field_name_decodes() -> None:
    """Field names come from the checkpoint; the generated decoder must not choke on any."""
    schema = StructType((StructField("a\x00b", AtomicType("long")),))
    assert row_decoder(schema)(encode_row(schema, (5,))) == (5,)
