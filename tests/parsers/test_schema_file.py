"""Tests for parsers.schema_file: state schema files v1, v2, v3 and Java modified UTF-8."""

from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.parsers.errors import CorruptData, ParseError, Truncated, UnsupportedFormat
from stateglass.parsers.schema_file import StateSchemaFile, decode_modified_utf8
from stateglass.parsers.sparktypes import StructType, parse_datatype
from tests.parsers.corpus_files import files

# ---------------------------------------------------------------------------------------------
# A test-only writer with DataOutputStream conventions, to build inputs and round-trip them.

MAX_CHUNK = 65535


def write_utf(text: str) -> bytes:
    """``DataOutputStream.writeUTF``: uint16 length + Java modified UTF-8."""
    body = bytearray()
    raw = text.encode("utf-16-le", "surrogatepass")
    for (unit,) in struct.iter_unpack("<H", raw):
        if 0 < unit < 0x80:
            body.append(unit)
        elif unit < 0x800:  # includes NUL, written as C0 80
            body += bytes([0xC0 | unit >> 6, 0x80 | unit & 0x3F])
        else:
            body += bytes([0xE0 | unit >> 12, 0x80 | (unit >> 6) & 0x3F, 0x80 | unit & 0x3F])
    assert len(body) <= 0xFFFF
    return struct.pack(">H", len(body)) + bytes(body)


def write_chunks(text: str, chunk: int = MAX_CHUNK) -> bytes:
    """SchemaWriter's ``writeJsonSchema``: the text split by UTF-16 units into writeUTF pieces."""
    raw = text.encode("utf-16-le", "surrogatepass")
    units = len(raw) // 2
    count = (units - 1) // chunk + 1 if units else 1
    out = struct.pack(">i", count)
    for i in range(count):
        piece = raw[2 * i * chunk : 2 * (i + 1) * chunk].decode("utf-16-le", "surrogatepass")
        out += write_utf(piece)
    return out


def struct_json(*fields: tuple[str, str]) -> str:
    return json.dumps(
        {
            "type": "struct",
            "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields],
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )


KEY = struct_json(("k", "string"))
VALUE = struct_json(("count", "long"))
NO_PREFIX = '{"keyStateEncoderType":"NoPrefixKeyStateEncoderSpec"}'


def v3_entry(
    name: str,
    key: str = KEY,
    value: str = VALUE,
    spec: str = NO_PREFIX,
    user_key: str = "{    }",
    key_id: int = 0,
    value_id: int = 0,
) -> bytes:
    return (
        write_utf(name)
        + struct.pack(">h", key_id)
        + write_chunks(key)
        + struct.pack(">h", value_id)
        + write_chunks(value)
        + write_chunks(spec)
        + write_chunks(user_key)
    )


def v3_file(*entries: bytes) -> bytes:
    return write_utf("v3") + struct.pack(">i", len(entries)) + b"".join(entries)


# ---------------------------------------------------------------------------------------------
# Golden: every schema file of the corpus parses to its last byte


@pytest.mark.parametrize("path", files(r".*/_metadata/schema"))
def test_corpus_schema_v2(fixture_corpus: Path, path: str) -> None:
    schema = StateSchemaFile.from_bytes((fixture_corpus / path).read_bytes())
    assert schema.format_version == 2
    (cf,) = schema.column_families
    assert cf.name == "default"
    assert cf.key_state_encoder_spec is None
    assert cf.key_schema.fields and cf.value_schema.fields


@pytest.mark.parametrize("path", files(r".*/_stateSchema/default/[^./][^/]*"))
def test_corpus_schema_v3(fixture_corpus: Path, path: str) -> None:
    schema = StateSchemaFile.from_bytes((fixture_corpus / path).read_bytes())
    assert schema.format_version == 3
    names = [cf.name for cf in schema.column_families]
    assert names == sorted(names), "Spark writes column families sorted by name"
    for cf in schema.column_families:
        assert cf.key_state_encoder_spec is not None
        assert cf.key_state_encoder_spec["keyStateEncoderType"].endswith("StateEncoderSpec")


def test_aggregation_schema_values(fixture_corpus: Path) -> None:
    path = fixture_corpus / "3.5.9/agg-hdfs/checkpoint/state/0/0/_metadata/schema"
    (cf,) = StateSchemaFile.from_bytes(path.read_bytes()).column_families
    assert cf.key_schema.simple_string() == "struct<k:string>"
    assert cf.value_schema.simple_string() == (
        "struct<count:bigint,sum:bigint,max:string,sum:double,count:bigint,sum:bigint,"
        "max:date,buf:binary>"
    )


def test_transform_with_state_schema_values(fixture_corpus: Path) -> None:
    directory = fixture_corpus / "4.0.5b/tws-rocks/checkpoint/state/0/_stateSchema/default"
    (path,) = [p for p in directory.iterdir() if not p.name.startswith(".")]
    schema = StateSchemaFile.from_bytes(path.read_bytes())
    timers = schema.column_family("$procTimers_timestampToKey")
    assert timers.key_state_encoder_spec == {
        "keyStateEncoderType": "RangeKeyScanStateEncoderSpec",
        "orderingOrdinals": [0],
    }
    assert timers.key_schema.simple_string() == (
        "struct<expiryTimestampMs:bigint,key:struct<value:string>>"
    )
    map_state = schema.column_family("mapState")
    assert map_state.key_state_encoder_spec == {
        "keyStateEncoderType": "PrefixKeyScanStateEncoderSpec",
        "numColsPrefixKey": 1,
    }
    assert map_state.user_key_encoder_schema == parse_datatype(struct_json(("value", "string")))
    assert schema.column_family("countState").user_key_encoder_schema is None
    assert {cf.key_schema_id for cf in schema.column_families} == {0}
    with pytest.raises(KeyError):
        schema.column_family("nope")


def test_join_v4_schema_specs(fixture_corpus: Path) -> None:
    directory = (
        fixture_corpus / "4.3.0-joinv4/join-rocks-cl/checkpoint/state/0/_stateSchema/default"
    )
    (path,) = [p for p in directory.iterdir() if not p.name.startswith(".")]
    schema = StateSchemaFile.from_bytes(path.read_bytes())
    specs = {cf.name: cf.key_state_encoder_spec for cf in schema.column_families}
    assert specs == {
        "left-keyWithTsToValues": {"keyStateEncoderType": "TimestampAsPostfixKeyStateEncoderSpec"},
        "left-tsWithKey": {"keyStateEncoderType": "TimestampAsPrefixKeyStateEncoderSpec"},
        "right-keyWithTsToValues": {"keyStateEncoderType": "TimestampAsPostfixKeyStateEncoderSpec"},
        "right-tsWithKey": {"keyStateEncoderType": "TimestampAsPrefixKeyStateEncoderSpec"},
    }
    key = schema.column_family("left-tsWithKey").key_schema
    assert key.simple_string() == "struct<field0:string,__event_time:bigint>"


# ---------------------------------------------------------------------------------------------
# Synthetic files


def test_v1_file() -> None:
    schema = StateSchemaFile.from_bytes(write_utf("v1") + write_utf(KEY) + write_utf(VALUE))
    assert schema.format_version == 1
    assert schema.column_families[0].key_schema.simple_string() == "struct<k:string>"


def test_v2_multi_chunk_json_with_split_surrogate_pair() -> None:
    # A field name longer than one chunk whose astral character straddles a chunk boundary.
    name = "a" * 40 + "\U0001f600" + "b" * 10
    key = struct_json((name, "long"))
    split_at = key.encode("utf-16-le", "surrogatepass").index("\U0001f600".encode("utf-16-le"))
    chunk = split_at // 2 + 1  # the pair's high surrogate ends the first chunk
    data = write_utf("v2") + write_chunks(key, chunk) + write_chunks(VALUE)
    (cf,) = StateSchemaFile.from_bytes(data).column_families
    assert cf.key_schema.fields[0].name == name


def test_v2_json_longer_than_one_chunk() -> None:
    key = struct_json(*((f"column_{i:05d}", "long") for i in range(2000)))
    assert len(key) > MAX_CHUNK
    data = write_utf("v2") + write_chunks(key) + write_chunks(VALUE)
    assert len(StateSchemaFile.from_bytes(data).column_families[0].key_schema.fields) == 2000


def test_v3_ids_and_user_key_schema() -> None:
    spec = '{"keyStateEncoderType":"PrefixKeyScanStateEncoderSpec","numColsPrefixKey":1}'
    user_key = struct_json(("value", "integer"))
    data = v3_file(
        v3_entry("a", key_id=3, value_id=-2),
        v3_entry("b", spec=spec, user_key=user_key),
    )
    a, b = StateSchemaFile.from_bytes(data).column_families
    assert (a.name, a.key_schema_id, a.value_schema_id) == ("a", 3, -2)
    assert a.user_key_encoder_schema is None
    assert b.key_state_encoder_spec == {
        "keyStateEncoderType": "PrefixKeyScanStateEncoderSpec",
        "numColsPrefixKey": 1,
    }
    assert isinstance(b.user_key_encoder_schema, StructType)
    assert StateSchemaFile.from_bytes(v3_file()).column_families == ()


@pytest.mark.parametrize(
    ("encoded", "text"),
    [
        (b"abc", "abc"),
        (b"\xc0\x80", "\x00"),  # Java's NUL
        (b"\x00", "\x00"),  # readUTF also accepts a raw NUL byte
        (b"\xc3\xa9", "é"),
        (b"\xe2\x82\xac", "€"),
        (b"\xed\xa0\xbd\xed\xb8\x80", "\U0001f600"),  # surrogate pair of 3-byte sequences
        (b"\xed\xa0\xbd", "\ud83d"),  # a lone surrogate survives, as in a Java String
    ],
    ids=lambda v: v.hex() if isinstance(v, bytes) else None,
)
def test_modified_utf8(encoded: bytes, text: str) -> None:
    assert decode_modified_utf8(encoded) == text


@pytest.mark.parametrize(
    "encoded",
    [b"\x80", b"\xc3", b"\xc3\x28", b"\xe2\x82", b"\xe2\x28\xa1", b"\xf0\x9f\x98\x80", b"\xff"],
    ids=lambda v: v.hex(),
)
def test_malformed_modified_utf8(encoded: bytes) -> None:
    with pytest.raises(CorruptData):
        decode_modified_utf8(encoded)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=200))
def test_modified_utf8_round_trip(text: str) -> None:
    assert decode_modified_utf8(write_utf(text)[2:]) == text


@settings(max_examples=100, deadline=None)
@given(
    names=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=4, unique=True),
    field_names=st.lists(st.text(max_size=20), min_size=1, max_size=5),
    key_id=st.integers(-(2**15), 2**15 - 1),
    chunk=st.integers(1, 64),
)
def test_v3_round_trip(names: list[str], field_names: list[str], key_id: int, chunk: int) -> None:
    key = struct_json(*((n, "string") for n in field_names))
    entries = []
    for name in sorted(names):
        entries.append(
            write_utf(name)
            + struct.pack(">h", key_id)
            + write_chunks(key, chunk)
            + struct.pack(">h", 0)
            + write_chunks(VALUE, chunk)
            + write_chunks(NO_PREFIX, chunk)
            + write_chunks("{    }", chunk)
        )
    schema = StateSchemaFile.from_bytes(v3_file(*entries))
    assert [cf.name for cf in schema.column_families] == sorted(names)
    for cf in schema.column_families:
        assert cf.key_schema.names == field_names
        assert cf.key_schema_id == key_id


# ---------------------------------------------------------------------------------------------
# Bad input


@pytest.mark.parametrize(
    ("data", "error"),
    [
        pytest.param(write_utf("v99") + write_utf(KEY), UnsupportedFormat, id="newer-version"),
        pytest.param(write_utf("v4"), UnsupportedFormat, id="v4"),
        pytest.param(b"", Truncated, id="empty"),
        pytest.param(b"\x00", Truncated, id="one-byte"),
        pytest.param(write_utf("x2"), CorruptData, id="bad-version"),
        pytest.param(write_utf("v2") + write_chunks(KEY), Truncated, id="no-value-schema"),
        pytest.param(
            write_utf("v2") + write_chunks(KEY) + write_chunks(VALUE) + b"\x00",
            CorruptData,
            id="trailing-byte",
        ),
        pytest.param(write_utf("v2") + struct.pack(">i", -1), CorruptData, id="negative-chunks"),
        pytest.param(
            write_utf("v2") + struct.pack(">i", 2**31 - 1), Truncated, id="absurd-chunk-count"
        ),
        pytest.param(
            write_utf("v2") + write_chunks("{") + write_chunks(VALUE), CorruptData, id="bad-json"
        ),
        pytest.param(
            write_utf("v2") + write_chunks('"long"') + write_chunks(VALUE),
            CorruptData,
            id="not-a-struct",
        ),
        pytest.param(
            write_utf("v2") + write_chunks("{}") + write_chunks(VALUE),
            CorruptData,
            id="empty-object",
        ),
        pytest.param(
            write_utf("v2") + write_chunks('{"type":"struct","fields":[{}]}') + write_chunks(VALUE),
            CorruptData,
            id="field-without-name",
        ),
        pytest.param(write_utf("v3") + struct.pack(">i", -1), CorruptData, id="negative-cfs"),
        pytest.param(v3_file(v3_entry("a", spec="[]")), CorruptData, id="spec-not-object"),
        pytest.param(
            write_utf("v2") + write_chunks(struct_json(("x", "hyperloglog"))) + write_chunks(VALUE),
            UnsupportedFormat,
            id="unknown-type",
        ),
    ],
)
def test_bad_schema_files(data: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        StateSchemaFile.from_bytes(data)


def test_newer_version_names_the_version() -> None:
    with pytest.raises(UnsupportedFormat, match="v99"):
        StateSchemaFile.from_bytes(write_utf("v99"))


FUZZ_SAMPLES = [
    write_utf("v2") + write_chunks(KEY) + write_chunks(VALUE),
    v3_file(v3_entry("a"), v3_entry("$ttl_b", user_key=KEY)),
    write_utf("v1") + write_utf(KEY) + write_utf(VALUE),
]


@settings(max_examples=400, deadline=None)
@given(
    sample=st.sampled_from(FUZZ_SAMPLES),
    cut=st.integers(0, 600),
    flips=st.lists(st.tuples(st.integers(0, 600), st.integers(0, 7)), max_size=4),
)
def test_fuzz_only_parse_errors_escape(sample: bytes, cut: int, flips: list) -> None:
    mutated = bytearray(sample[:cut])
    for position, bit in flips:
        if mutated:
            mutated[position % len(mutated)] ^= 1 << bit
    with contextlib.suppress(ParseError):
        StateSchemaFile.from_bytes(bytes(mutated))


@pytest.mark.parametrize("path", files(r".*/_stateSchema/default/[^./][^/]*"))
def test_corpus_truncations_are_errors(fixture_corpus: Path, path: str) -> None:
    data = (fixture_corpus / path).read_bytes()
    for cut in range(0, len(data), max(1, len(data) // 97)):
        with pytest.raises(ParseError):
            StateSchemaFile.from_bytes(data[:cut])
