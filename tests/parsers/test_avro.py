"""Tests for stateglass.parsers.avro (Avro-encoded state rows) and RowCodec's Avro path.

* golden: the corpus' ``tws-rocks-cl-avro`` checkpoints decode to the same rows as their
  ``tws-rocks-cl`` (UnsafeRow) twins, and ``data/avro_golden.json`` (a Spark 4.3 run with
  every type Spark's Avro state encoder accepts) renders to exactly the JSON Spark printed;
* properties: a test-only encoder following ``SchemaConverters.toAvroTypeWithDefaults`` and
  Avro's binary encoding round-trips random schemas and values;
* fuzz: cut or bit-flipped datums raise only ParseError subclasses.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import re
import struct
import zipfile
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.app.render.rows_to_json import render_row
from stateglass.parsers.avro import avro_row_decoder, java_hash_map_order, min_bytes_for_precision
from stateglass.parsers.changelog import parse_changelog
from stateglass.parsers.compression import decompress
from stateglass.parsers.errors import CorruptData, ParseError, Truncated, UnsupportedFormat
from stateglass.parsers.logs import OffsetSeq, batch_id_of, is_batch_file_name
from stateglass.parsers.operator_metadata import OperatorMetadata
from stateglass.parsers.rocksdb_encoding import split_cf_prefix
from stateglass.parsers.rocksdb_zip import METADATA_ENTRY, RocksDBCheckpointMetadata
from stateglass.parsers.schema_file import ColumnFamilySchema, StateSchemaFile
from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DayTimeIntervalType,
    DecimalType,
    MapType,
    StringLikeType,
    StructField,
    StructType,
    YearMonthIntervalType,
    parse_datatype,
)
from stateglass.parsers.state_rows import RowCodec, StoreSpec
from stateglass.parsers.unsaferow import make_decimal
from stateglass.parsers.unsafewriter import unscaled
from tests.parsers.corpus_files import member_names
from tests.parsers.rocksdb_restore import open_read_only, restore

FAST = settings(max_examples=150, deadline=None, database=None)
DATA = Path(__file__).with_name("data")

# ---------------------------------------------------------------------------------------------
# Test-only encoder: Spark's AvroSerializer + Avro's GenericDatumWriter, binary encoding


def zigzag(n: int) -> bytes:
    """Avro ``long``/``int``: zig-zag, then little-endian base-128."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if not z:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


def _complex(data_type: DataType) -> bool:
    return isinstance(data_type, (StructType, ArrayType, MapType))


def _void(data_type: DataType) -> bool:
    return data_type == AtomicType("void")


def encode_value(data_type: DataType, value: Any, wrapped: bool) -> bytes:
    """One value; ``wrapped`` means the Avro type is ``["null", T]``."""
    if _void(data_type):
        assert value is None
        return b""
    if wrapped:
        return b"\x00" if value is None else b"\x02" + encode_value(data_type, value, False)
    assert value is not None, f"{data_type.simple_string()} cannot hold null here"
    if isinstance(data_type, StructType):
        return encode_row(data_type, value)
    if isinstance(data_type, ArrayType):
        element = data_type.element_type
        items = b"".join(encode_value(element, v, _complex(element)) for v in value)
        return (zigzag(len(value)) + items if value else b"") + b"\x00"
    if isinstance(data_type, MapType):
        inner = data_type.value_type
        pairs = b"".join(
            encode_value(AtomicType("string"), k, False) + encode_value(inner, v, _complex(inner))
            for k, v in value
        )
        return (zigzag(len(value)) + pairs if value else b"") + b"\x00"
    if isinstance(data_type, DecimalType):
        size = min_bytes_for_precision(data_type.precision)
        return unscaled(value, data_type.scale).to_bytes(size, "big", signed=True)
    assert isinstance(data_type, AtomicType)
    name = data_type.name
    if name == "boolean":
        return b"\x01" if value else b"\x00"
    if name in ("integer", "date", "long", "timestamp", "timestamp_ntz"):
        return zigzag(value)
    if name == "float":
        return struct.pack("<f", value)
    if name == "double":
        return struct.pack("<d", value)
    raw = value.encode() if name == "string" else value
    return zigzag(len(raw)) + raw


def encode_row(schema: StructType, row: Sequence[Any]) -> bytes:
    """An Avro datum of ``toAvroTypeWithDefaults(schema)``: every non-void field nullable."""
    return b"".join(
        encode_value(f.data_type, v, not _void(f.data_type))
        for f, v in zip(schema.fields, row, strict=True)
    )


def schema_of(*fields: tuple[str, DataType | str]) -> StructType:
    return StructType(
        tuple(StructField(name, AtomicType(t) if isinstance(t, str) else t) for name, t in fields)
    )


# ---------------------------------------------------------------------------------------------
# Known bytes


def test_doc_example_count_state_value() -> None:
    # 4.0.5 tws-rocks-cl-avro countState value, after `00 | 00 00` (version, schema id).
    schema = schema_of(("cnt", "long"), ("lastS", "string"))
    assert avro_row_decoder(schema)(bytes.fromhex("02 02 02 04 78 31")) == (1, "x1")


def test_every_field_is_a_union_whatever_spark_nullability_says() -> None:
    # $ttl_ttlMap elementKey.userKey.value is `int` with nullable=false in the schema file,
    # and Spark still wrote a union branch for it (4.0.5 and 4.3.0).
    user_key = StructType((StructField("value", AtomicType("integer"), nullable=False),))
    schema = StructType((StructField("userKey", user_key, nullable=False),))
    assert avro_row_decoder(schema)(bytes.fromhex("02 02 02")) == ((1,),)


def test_void_fields_take_no_bytes() -> None:
    assert avro_row_decoder(schema_of(("__dummy__", "void")))(b"") == (None,)
    schema = schema_of(("a", "void"), ("b", "integer"), ("c", "void"))
    assert avro_row_decoder(schema)(b"\x02\x54") == (None, 42, None)


def test_arrays_wrap_only_complex_items() -> None:
    ints = schema_of(("a", ArrayType(AtomicType("integer"))))
    assert avro_row_decoder(ints)(bytes.fromhex("02 06 02 04 06 00")) == ([1, 2, 3],)
    structs = schema_of(("a", ArrayType(schema_of(("x", "integer")))))
    assert avro_row_decoder(structs)(bytes.fromhex("02 04 00 02 02 0e 00")) == ([None, (7,)],)
    nested = schema_of(("a", ArrayType(ArrayType(AtomicType("string")))))
    data = bytes.fromhex("02 04 00 02 02 02 78 00 00")
    assert avro_row_decoder(nested)(data) == ([None, ["x"]],)
    voids = schema_of(("a", ArrayType(AtomicType("void"))))
    assert avro_row_decoder(voids)(bytes.fromhex("02 06 00")) == ([None, None, None],)


def test_negative_block_counts_carry_a_byte_size() -> None:
    ints = schema_of(("a", ArrayType(AtomicType("integer"))))
    # A block of -2 items (then its byte size, 2), a block of 1 item, the end.
    data = b"\x02" + zigzag(-2) + zigzag(2) + zigzag(5) + zigzag(6) + zigzag(1) + zigzag(7)
    assert avro_row_decoder(ints)(data + b"\x00") == ([5, 6, 7],)
    maps = schema_of(("m", MapType(AtomicType("string"), AtomicType("long"))))
    data = b"\x02" + zigzag(-1) + zigzag(3) + b"\x02k" + zigzag(9) + b"\x00"
    assert avro_row_decoder(maps)(data) == ([("k", 9)],)


def test_decimals_are_fixed_big_endian_and_keep_their_scale() -> None:
    assert [min_bytes_for_precision(p) for p in (1, 2, 9, 10, 18, 19, 38)] == [
        1,
        1,
        4,
        5,
        8,
        9,
        16,
    ]
    schema = schema_of(("d", DecimalType(10, 2)), ("e", DecimalType(38, 10)))
    data = b"\x02" + (-25914).to_bytes(5, "big", signed=True) + b"\x02" + bytes(16)
    (d, e) = avro_row_decoder(schema)(data)
    assert (str(d), str(e)) == ("-259.14", "0E-10")


def test_decimal_beyond_its_precision_is_corrupt() -> None:
    schema = schema_of(("d", DecimalType(2, 0)))
    with pytest.raises(CorruptData, match="does not fit decimal"):
        avro_row_decoder(schema)(b"\x02" + (100).to_bytes(1, "big"))


def test_boolean_reads_like_avro_java() -> None:
    schema = schema_of(("b", "boolean"))
    decode = avro_row_decoder(schema)
    assert [decode(bytes([2, b]))[0] for b in (0, 1, 2, 255)] == [False, True, False, False]


def test_varints_keep_java_widths() -> None:
    ints, longs = schema_of(("i", "integer")), schema_of(("l", "long"))
    # A 5-byte int whose top bits overflow: Java keeps the low 32 bits.
    assert avro_row_decoder(ints)(b"\x02\xfe\xff\xff\xff\x7f") == (2**31 - 1,)
    assert avro_row_decoder(ints)(b"\x02\xff\xff\xff\xff\x7f") == (-(2**31),)
    assert avro_row_decoder(longs)(b"\x02" + zigzag(-(2**63))) == (-(2**63),)
    # A union branch written in two bytes is still branch 1.
    assert avro_row_decoder(longs)(b"\x82\x00\x04") == (2,)
    with pytest.raises(CorruptData, match="over 5 bytes"):
        avro_row_decoder(ints)(b"\x02\x80\x80\x80\x80\x80\x01")
    with pytest.raises(CorruptData, match="over 10 bytes"):
        avro_row_decoder(longs)(b"\x02" + b"\x80" * 10 + b"\x01")


def test_strings_replace_malformed_utf8_like_java() -> None:
    schema = schema_of(("s", "string"))
    assert avro_row_decoder(schema)(b"\x02\x06\xed\xa0\x80") == ("\ufffd",)
    assert avro_row_decoder(schema)(b"\x02\x04\xc3\xa9") == ("é",)


@pytest.mark.parametrize(
    ("data", "error", "match", "offset"),
    [
        pytest.param(b"", Truncated, "union branch", 0, id="empty"),
        pytest.param(b"\x04\x02", CorruptData, "union branch 2", 0, id="branch-2"),
        pytest.param(b"\x01\x02", CorruptData, "union branch -1", 0, id="branch-minus-1"),
        pytest.param(b"\x02\x02", Truncated, "string of 1 bytes", 1, id="string-cut"),
        pytest.param(b"\x02\x01", CorruptData, "negative length", 1, id="negative-length"),
        pytest.param(b"\x02\x02a\x00\x00", CorruptData, "unexpected bytes", 4, id="trailing"),
        pytest.param(b"\x02\x02a\x02", Truncated, "long cut short", 4, id="long-cut"),
        pytest.param(b"\x02\x02a\x02\xff", Truncated, "long cut short", 4, id="varint-cut"),
    ],
)
def test_bad_datums(data: bytes, error: type[Exception], match: str, offset: int) -> None:
    schema = schema_of(("s", "string"), ("n", "long"))
    with pytest.raises(error, match=match) as info:
        avro_row_decoder(schema)(data)
    assert isinstance(info.value, ParseError)
    assert info.value.offset == offset


def test_item_counts_must_fit_the_datum() -> None:
    ints = schema_of(("a", ArrayType(AtomicType("double"))))
    with pytest.raises(CorruptData, match="does not fit"):
        avro_row_decoder(ints)(b"\x02" + zigzag(2) + bytes(15))
    voids = schema_of(("a", ArrayType(AtomicType("void"))))
    with pytest.raises(CorruptData, match="does not fit"):
        avro_row_decoder(voids)(b"\x02" + zigzag(2**40) + b"\x00")
    with pytest.raises(CorruptData, match="over 1048576 items"):
        avro_row_decoder(voids)(b"\x02" + (zigzag(2**19) + b"\x00" * 0) * 3 + b"\x00")


@pytest.mark.parametrize(
    "data_type",
    [
        pytest.param(AtomicType("byte"), id="tinyint"),
        pytest.param(AtomicType("short"), id="smallint"),
        pytest.param(AtomicType("interval"), id="calendar-interval"),
        pytest.param(AtomicType("variant"), id="variant"),
        pytest.param(StringLikeType("char", 3), id="char"),
        pytest.param(YearMonthIntervalType(0, 1), id="year-month"),
        pytest.param(DayTimeIntervalType(0, 3), id="day-time"),
        pytest.param(MapType(AtomicType("integer"), AtomicType("integer")), id="int-keyed-map"),
        pytest.param(ArrayType(AtomicType("short")), id="nested-smallint"),
    ],
)
def test_types_spark_cannot_encode_are_unsupported(data_type: DataType) -> None:
    with pytest.raises(UnsupportedFormat, match=r"Avro state encod(ing|er)"):
        avro_row_decoder(schema_of(("c", data_type)))


# ---------------------------------------------------------------------------------------------
# Map order: Spark reads a map into a java.util.HashMap and iterates that


def _words(text: str) -> list[str]:
    return text.split()


# (stored keys, the order Avro's GenericDatumReader/Spark's AvroDeserializer gave on Java 17)
JAVA_ORDERS = [
    (["k3", "k0", "k1", "k2"], ["k0", "k1", "k2", "k3"]),
    (["b", "a", "c"], ["a", "b", "c"]),
    (["zz", "a", "mm", "b", "k"], ["a", "zz", "mm", "b", "k"]),
    (
        [f"key{i}" for i in range(11, -1, -1)],
        _words("key0 key1 key2 key10 key3 key11 key4 key5 key6 key7 key8 key9"),
    ),
    (
        _words("k0 k1 k2 k3 k4 k5 k11 k6 k10 k13 k7 k12 k8 k9 k15 k14 k16"),
        _words("k0 k1 k2 k11 k3 k12 k4 k5 k10 k6 k15 k7 k16 k13 k8 k9 k14"),
    ),
]


@pytest.mark.parametrize(("stored", "java"), JAVA_ORDERS, ids=lambda v: "-".join(v)[:30])
def test_maps_come_back_in_java_hash_map_order(stored: list[str], java: list[str]) -> None:
    schema = schema_of(("m", MapType(AtomicType("string"), AtomicType("long"))))
    data = encode_row(schema, [[(k, i) for i, k in enumerate(stored)]])
    (pairs,) = avro_row_decoder(schema)(data)
    assert [k for k, _ in pairs] == java
    assert dict(pairs) == {k: i for i, k in enumerate(stored)}


def test_repeated_map_key_keeps_first_place_and_last_value() -> None:
    schema = schema_of(("m", MapType(AtomicType("string"), AtomicType("long"))))
    data = encode_row(schema, [[("b", 1), ("a", 2), ("b", 3)]])
    assert avro_row_decoder(schema)(data) == ([("a", 2), ("b", 3)],)


def test_long_bucket_chains_grow_small_tables() -> None:
    # Keys that share a bucket of the 16- and 32-slot tables: the ninth makes the HashMap
    # double instead of building a tree, and so does the tenth (chain of ten in 32 slots).
    pool = (f"x{i}".encode() for i in range(20000))
    chain = [k for k in pool if _spread(k) & 31 == 7]
    nine = [k for k in chain if _spread(k) & 63 == 7][:4] + [
        k for k in chain if _spread(k) & 63 == 39
    ][:5]
    assert [nine[i] for i in java_hash_map_order(nine)] == nine  # one bucket of 32
    ten = [*nine, next(k for k in chain if k not in nine)]
    by_bucket = sorted(ten, key=lambda k: (_spread(k) & 63, ten.index(k)))
    assert [ten[i] for i in java_hash_map_order(ten)] == by_bucket  # 64 slots


def _spread(raw: bytes) -> int:
    h = 1
    for b in raw:
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h ^ (h >> 16)


# ---------------------------------------------------------------------------------------------
# Round trip and fuzz with random schemas

ATOMIC_NAMES = [
    "boolean",
    "integer",
    "long",
    "float",
    "double",
    "string",
    "binary",
    "date",
    "timestamp",
    "timestamp_ntz",
    "void",
]
atomic_types = st.one_of(
    st.sampled_from(ATOMIC_NAMES).map(AtomicType),
    st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: DecimalType(p, s))),
)


def _fields(children: st.SearchStrategy[DataType]) -> st.SearchStrategy[StructType]:
    return st.lists(children, max_size=4).map(
        lambda ts: StructType(tuple(StructField(f"f{i}", t) for i, t in enumerate(ts)))
    )


data_types: st.SearchStrategy[DataType] = st.recursive(
    atomic_types,
    lambda children: st.one_of(
        _fields(children),
        children.map(ArrayType),
        children.map(lambda t: MapType(AtomicType("string"), t)),
    ),
    max_leaves=8,
)
schemas = _fields(data_types)

_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)
_PLAIN = {
    "boolean": st.booleans(),
    "integer": _INT32,
    "date": _INT32,
    "long": _INT64,
    "timestamp": _INT64,
    "timestamp_ntz": _INT64,
    "float": st.floats(width=32, allow_nan=False),
    "double": st.floats(allow_nan=False),
    "string": st.text(max_size=8),
    "binary": st.binary(max_size=8),
    "void": st.none(),
}


def values_for(data_type: DataType, nullable: bool) -> st.SearchStrategy[Any]:
    """Values Spark could write for ``data_type`` (nulls only where Avro has a union)."""
    if isinstance(data_type, StructType):
        inner: st.SearchStrategy[Any] = st.tuples(
            *(values_for(f.data_type, True) for f in data_type.fields)
        )
    elif isinstance(data_type, ArrayType):
        element = data_type.element_type
        inner = st.lists(values_for(element, _complex(element)), max_size=4)
    elif isinstance(data_type, MapType):
        value_type = data_type.value_type
        inner = st.dictionaries(
            st.text(max_size=4), values_for(value_type, _complex(value_type)), max_size=4
        ).map(lambda d: list(d.items()))
    elif isinstance(data_type, DecimalType):
        limit = 10**data_type.precision - 1
        scale = data_type.scale
        inner = st.integers(-limit, limit).map(lambda u: make_decimal(u, scale))
    else:
        assert isinstance(data_type, AtomicType)
        inner = _PLAIN[data_type.name]
    return st.one_of(st.none(), inner) if nullable and not _void(data_type) else inner


@st.composite
def schema_and_row(draw: st.DrawFn) -> tuple[StructType, tuple[Any, ...]]:
    schema = draw(schemas)
    return schema, draw(values_for(schema, False))


def canonical(value: Any, data_type: DataType) -> Any:
    """Maps as sorted pairs (their order has its own tests); decimals as exact text."""
    if value is None:
        return None
    if isinstance(data_type, StructType):
        return tuple(
            canonical(v, f.data_type) for v, f in zip(value, data_type.fields, strict=True)
        )
    if isinstance(data_type, ArrayType):
        return [canonical(v, data_type.element_type) for v in value]
    if isinstance(data_type, MapType):
        return sorted((k, canonical(v, data_type.value_type)) for k, v in value)
    if isinstance(data_type, DecimalType):
        return str(value)
    if isinstance(value, float) and value == 0:
        return (value, math.copysign(1, value))
    return value


@FAST
@given(case=schema_and_row())
def test_round_trip(case: tuple[StructType, tuple[Any, ...]]) -> None:
    schema, row = case
    decoded = avro_row_decoder(schema)(encode_row(schema, row))
    assert canonical(decoded, schema) == canonical(row, schema)


@FAST
@given(case=schema_and_row())
def test_every_cut_raises_a_parse_error(case: tuple[StructType, tuple[Any, ...]]) -> None:
    schema, row = case
    data = encode_row(schema, row)
    decode = avro_row_decoder(schema)
    for cut in range(len(data)):
        with pytest.raises(ParseError):
            decode(data[:cut])


@FAST
@given(case=schema_and_row(), flips=st.lists(st.integers(0, 2**16), min_size=1, max_size=3))
def test_bit_flips_raise_only_parse_errors(
    case: tuple[StructType, tuple[Any, ...]], flips: list[int]
) -> None:
    schema, row = case
    data = bytearray(encode_row(schema, row) + b"\x00")  # one trailing byte, so never empty
    for flip in flips:
        data[flip // 8 % len(data)] ^= 1 << (flip % 8)
    with contextlib.suppress(ParseError):
        avro_row_decoder(schema)(bytes(data))


# ---------------------------------------------------------------------------------------------
# RowCodec with encoding_format="avro"


def _codec(cf: ColumnFamilySchema, **kwargs: Any) -> RowCodec:
    return RowCodec(
        StoreSpec(
            "rocksdb",
            cf.key_schema,
            cf.value_schema,
            cf.key_state_encoder_spec,
            encoding_format="avro",
            **kwargs,
        )
    )


def _cf(key: str, value: str, spec: dict[str, Any]) -> ColumnFamilySchema:
    def struct_type(text: str) -> StructType:
        parsed = parse_datatype(text)
        assert isinstance(parsed, StructType)
        return parsed

    return ColumnFamilySchema("x", struct_type(key), struct_type(value), 0, 0, spec)


STRING_KEY = '{"type":"struct","fields":[{"name":"value","type":"string"}]}'
NO_PREFIX = {"keyStateEncoderType": "NoPrefixKeyStateEncoderSpec"}


def test_row_codec_no_prefix_key_and_value() -> None:
    value = '{"type":"struct","fields":[{"name":"cnt","type":"long"},{"name":"s","type":"string"}]}'
    codec = _codec(_cf(STRING_KEY, value, NO_PREFIX), cf_id=2)
    # 4.0.5 tws-rocks-cl-avro countState, CF id 2.
    key = bytes.fromhex("0200 00 0000 0202 61")
    assert codec.decode(key, bytes.fromhex("00 0000 0202 0204 7831")) == [(("a",), (1, "x1"))]
    assert codec.decode(bytes.fromhex("0300 00 0000 0202 61"), b"\x00\x00\x00\x00\x00") == []
    assert codec.decode_change("delete", key, None) == [(("a",), None)]
    assert not codec.raw_capable


def test_row_codec_range_and_prefix_keys() -> None:
    ttl_key = (
        '{"type":"struct","fields":[{"name":"expirationMs","type":"long"},'
        f'{{"name":"elementKey","type":{STRING_KEY}}}]}}'
    )
    empty = '{"type":"struct","fields":[{"name":"__empty__","type":"void"}]}'
    spec = {"keyStateEncoderType": "RangeKeyScanStateEncoderSpec", "orderingOrdinals": [0]}
    codec = _codec(_cf(ttl_key, empty, spec))
    # 4.0.5 tws-rocks-cl-avro $ttl_ttlValue (CF prefix removed).
    key = bytes.fromhex("0e000000 00 020201 0210 000001a1ff6feb21 00 0000 020202 61")
    assert codec.decode(key, b"\x00\x00\x00") == [((1795286887201, ("a",)), (None,))]
    map_key = (
        f'{{"type":"struct","fields":[{{"name":"key","type":{STRING_KEY}}},'
        f'{{"name":"userKey","type":{STRING_KEY}}}]}}'
    )
    long_value = '{"type":"struct","fields":[{"name":"value","type":"long"}]}'
    spec = {"keyStateEncoderType": "PrefixKeyScanStateEncoderSpec", "numColsPrefixKey": 1}
    codec = _codec(_cf(map_key, long_value, spec))
    # 4.0.5 tws-rocks-cl-avro mapState: prefix has no schema id, the remainder does.
    key = bytes.fromhex("05000000 00 02020261 00 0000 02020478 31")
    assert codec.decode(key, bytes.fromhex("00 0000 0202")) == [((("a",), ("x1",)), (1,))]


def test_row_codec_list_values() -> None:
    string_value = '{"type":"struct","fields":[{"name":"value","type":"string"}]}'
    codec = _codec(_cf(STRING_KEY, string_value, NO_PREFIX), multi_value=True)
    element = bytes.fromhex("07000000 00 0000 02 04 7831")
    value = element + b"," + element.replace(b"x1", b"y2")
    assert codec.decode(bytes.fromhex("00 0000 0202 61"), value) == [
        (("a",), ("x1",)),
        (("a",), ("y2",)),
    ]


def test_row_codec_refuses_avro_without_rocksdb_and_unknown_formats() -> None:
    schema = schema_of(("k", "string"))
    with pytest.raises(UnsupportedFormat, match="HDFS"):
        RowCodec(StoreSpec("hdfs", schema, schema, encoding_format="avro"))
    with pytest.raises(UnsupportedFormat, match="protobuf"):
        RowCodec(StoreSpec("rocksdb", schema, schema, encoding_format="protobuf"))


# ---------------------------------------------------------------------------------------------
# Golden: a Spark 4.3 run with every type the Avro state encoder takes


def _golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / "avro_golden.json").read_text())
    return data


def _layout(var: str, cf: ColumnFamilySchema) -> StructType:
    """The State Data Source's row: key, value (or list element / map key and value), id."""
    pid = StructField("partition_id", AtomicType("integer"))
    if var == "mp":
        key, user_key = cf.key_schema.fields
        return StructType(
            (
                StructField("key", key.data_type),
                StructField("user_map_key", user_key.data_type),
                StructField("user_map_value", cf.value_schema),
                pid,
            )
        )
    value = "list_element" if var == "lst" else "value"
    return StructType((StructField("key", cf.key_schema), StructField(value, cf.value_schema), pid))


@pytest.mark.parametrize("var", ["rich", "lst", "mp"])
def test_spark_golden_json(var: str) -> None:
    golden = _golden()
    schema_file = StateSchemaFile.from_bytes(base64.b64decode(golden["schema_file"]))
    cf = schema_file.column_family(var)
    render = render_row(_layout(var, cf))
    lines = []
    for row in golden["rows"]:
        partition = row["partition_id"]
        cf_id = golden["column_family_mappings"][str(partition)][var]
        codec = _codec(cf, cf_id=cf_id, multi_value=var == "lst")
        for key, value in codec.decode(bytes.fromhex(row["key"]), bytes.fromhex(row["value"])):
            parts = (*key, value) if var == "mp" else (key, value)
            lines.append(render((*parts, partition)))
    assert sorted(lines) == golden["lines"][var]


def test_spark_golden_covers_long_maps() -> None:
    maps = [json.loads(line)["value"].get("m") or {} for line in _golden()["lines"]["rich"]]
    assert max(map(len, maps)) > 12  # a resized HashMap
    assert any("AaAaAa" in m for m in maps)  # colliding hashes


# ---------------------------------------------------------------------------------------------
# Golden: the corpus' Avro checkpoints against their UnsafeRow twins

AVRO_ROOT = re.compile(r"(.*)/tws-rocks-cl-avro/checkpoint/metadata")


def _avro_scenarios() -> list[Any]:
    params = []
    for name in member_names():
        match = AVRO_ROOT.fullmatch(name)
        if match:
            version = match.group(1)
            params.append(pytest.param(version, id=f"{version}/tws-rocks-cl-avro"))
    return params or [pytest.param(None, id="no-corpus", marks=pytest.mark.skip("no corpus"))]


def _batch_files(directory: Path) -> list[Path]:
    names = [p for p in directory.iterdir() if is_batch_file_name(p.name)]
    return sorted(names, key=lambda p: batch_id_of(p.name) or 0)


def _version(path: Path) -> int:
    return int(path.name.split(".")[0].split("_")[0])


class Scenario:
    """One TWS checkpoint: its schema file, list-state variables and per-partition codecs."""

    def __init__(self, checkpoint: Path) -> None:
        self.offsets = OffsetSeq.from_bytes(_batch_files(checkpoint / "offsets")[-1].read_bytes())
        self.operator = checkpoint / "state" / "0"
        (schema_path,) = (self.operator / "_stateSchema" / "default").glob("[0-9]*")
        self.schema = StateSchemaFile.from_bytes(schema_path.read_bytes())
        meta = _batch_files(self.operator / "_metadata" / "v2")[-1].read_bytes()
        variables = (OperatorMetadata.from_bytes(meta).operator_properties or {}).get(
            "stateVariables", []
        )
        self.lists = {v["stateName"] for v in variables if v["stateVariableType"] == "ListState"}

    def partitions(self) -> list[Path]:
        return sorted(p for p in self.operator.iterdir() if p.name.isdigit())

    def codecs(self, partition: Path) -> dict[int, tuple[str, RowCodec]]:
        newest = max(partition.glob("*.zip"), key=_version)
        with zipfile.ZipFile(newest) as archive:
            names = RocksDBCheckpointMetadata.from_bytes(
                archive.read(METADATA_ENTRY)
            ).column_family_names()
        codecs = {}
        for cf_id, name in names.items():
            cf = self.schema.column_family(name)
            spec = StoreSpec(
                "rocksdb",
                cf.key_schema,
                cf.value_schema,
                cf.key_state_encoder_spec,
                cf_id=cf_id,
                multi_value=name in self.lists,
                encoding_format=self.offsets.encoding_format,
            )
            codecs[cf_id] = (name, RowCodec(spec))
        return codecs


def _mask_times(value: Any) -> Any:
    """Processing-time TTLs and timers differ between two runs; everything else must not."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value > 10**12:
        return "<epoch ms>"
    if isinstance(value, (list, tuple)):
        return tuple(_mask_times(v) for v in value)
    return value


def _changelog_rows(checkpoint: Path) -> dict[tuple[str, str], list[Any]]:
    scenario = Scenario(checkpoint)
    out = {}
    for partition in scenario.partitions():
        codecs = scenario.codecs(partition)
        for log in sorted(partition.glob("*.changelog"), key=_version):
            data = decompress(scenario.offsets.codec, log.read_bytes())
            rows = []
            for record in parse_changelog(data).records:
                name, codec = codecs[split_cf_prefix(record.key)[0]]
                decoded = codec.decode_change(record.kind, record.key, record.value)
                assert decoded, f"{log}: {record.kind} of {name} decoded to nothing"
                rows.append((name, record.kind, _mask_times(decoded)))
            out[(partition.name, log.name)] = rows
    return out


@pytest.mark.parametrize("version", _avro_scenarios())
def test_corpus_changelogs_match_the_unsaferow_twin(fixture_corpus: Path, version: str) -> None:
    avro_checkpoint = fixture_corpus / version / "tws-rocks-cl-avro" / "checkpoint"
    twin = fixture_corpus / version / "tws-rocks-cl" / "checkpoint"
    assert Scenario(avro_checkpoint).offsets.encoding_format == "avro"
    avro_rows = _changelog_rows(avro_checkpoint)
    twin_rows = _changelog_rows(twin)
    common = sorted(set(avro_rows) & set(twin_rows))
    assert len(common) >= 40
    assert sum(len(avro_rows[k]) for k in common) > 150
    for key in common:
        assert avro_rows[key] == twin_rows[key], key
    # Every column family and record kind showed up.
    seen = {(name, kind) for key in common for name, kind, _ in avro_rows[key]}
    assert {name for name, _ in seen} >= {"countState", "listState", "mapState", "ttlMap"}
    assert {kind for _, kind in seen} == {"put", "merge", "delete"}


def _snapshot_rows(checkpoint: Path, version: int, tmp: Path) -> list[Any]:
    scenario = Scenario(checkpoint)
    merge_delimiter = "" if scenario.offsets.merge_operator_version == 2 else None
    rows = []
    for partition in scenario.partitions():
        zip_name = f"{version}.zip"
        if not (partition / zip_name).exists():
            continue
        codecs = scenario.codecs(partition)
        target = tmp / f"{checkpoint.parent.name}-{partition.name}-{version}"
        restore(partition, zip_name, target, merge_delimiter=merge_delimiter)
        db = open_read_only(target)
        try:
            for key, value in db.items():
                name, codec = codecs[split_cf_prefix(key)[0]]
                for row in codec.decode(key, value):
                    rows.append(repr((partition.name, name, _mask_times(row))))
        finally:
            db.close()
    return sorted(rows)


@pytest.mark.parametrize("version", _avro_scenarios())
def test_corpus_snapshots_match_the_unsaferow_twin(
    fixture_corpus: Path, version: str, tmp_path: Path
) -> None:
    pytest.importorskip("rocksdict")
    avro_checkpoint = fixture_corpus / version / "tws-rocks-cl-avro" / "checkpoint"
    twin = fixture_corpus / version / "tws-rocks-cl" / "checkpoint"

    def zip_versions(checkpoint: Path) -> set[int]:
        return {_version(p) for p in (checkpoint / "state" / "0").glob("*/*.zip")}

    versions = sorted(zip_versions(avro_checkpoint) & zip_versions(twin))
    assert versions
    for snapshot in versions:
        avro_rows = _snapshot_rows(avro_checkpoint, snapshot, tmp_path)
        assert avro_rows
        assert avro_rows == _snapshot_rows(twin, snapshot, tmp_path), snapshot


@pytest.mark.parametrize("version", _avro_scenarios())
def test_corpus_datums_fuzz(fixture_corpus: Path, version: str) -> None:
    """Every bit flip of real values raises nothing but ParseError."""
    checkpoint = fixture_corpus / version / "tws-rocks-cl-avro" / "checkpoint"
    scenario = Scenario(checkpoint)
    partition = scenario.partitions()[0]
    codecs = scenario.codecs(partition)
    log = min(partition.glob("*.changelog"), key=_version)
    records = parse_changelog(decompress(scenario.offsets.codec, log.read_bytes())).records
    for record in records:
        if record.value is None:
            continue
        _, codec = codecs[split_cf_prefix(record.key)[0]]
        key, value = record.key, record.value
        _fuzz(lambda v, key=key, codec=codec: codec.decode(key, v), value)
        _fuzz(lambda k, value=value, codec=codec: codec.decode(k, value), key)


def _fuzz(decode: Callable[[bytes], Any], data: bytes) -> None:
    for bit in range(len(data) * 8):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        with contextlib.suppress(ParseError):
            decode(bytes(flipped))
    for cut in range(len(data)):
        with contextlib.suppress(ParseError):
            decode(data[:cut])


def test_decimal_text_matches_unsaferow_convention() -> None:
    schema = schema_of(("d", DecimalType(5, 3)))
    (value,) = avro_row_decoder(schema)(b"\x02" + (1500).to_bytes(3, "big"))
    assert isinstance(value, Decimal) and str(value) == "1.500"
