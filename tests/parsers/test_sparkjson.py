"""Spark-compatible JSON: our text must equal what Spark 4.3.0's ``toJSON()`` printed.

Expected strings were captured from Spark 4.3.0 (PySpark, Java 17,
``spark.sql.session.timeZone=UTC`` unless a test says otherwise), either by hand with
``spark.sql("select <expr> as c").toJSON()`` (the literal tables below) or by
``tests/parsers/data/make_json_golden.py`` (the JSON files in ``data/``). No test starts
Spark.
"""

from __future__ import annotations

import contextlib
import json
import re
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stateglass.app.render.bytes_to_json import (
    row_json_encoder,
    state_line,
    state_line_encoder,
    state_lines_encoder,
)
from stateglass.app.render.java_text import (
    bigdecimal_to_string,
    java_double_to_string,
    java_float_to_string,
    json_quote,
)
from stateglass.app.render.rows_to_json import render_row, to_python
from stateglass.app.render.spark_text import TimeZoneSpec
from stateglass.parsers.errors import CorruptData, UnsupportedFormat
from stateglass.parsers.java_bytes import murmur3_hash_bytes
from stateglass.parsers.sparktypes import (
    ArrayType,
    AtomicType,
    DataType,
    DayTimeIntervalType,
    DecimalType,
    MapType,
    StructField,
    StructType,
    YearMonthIntervalType,
    parse_datatype,
)
from stateglass.parsers.unsaferow import CalendarInterval, row_decoder
from stateglass.parsers.unsafewriter import encode_row
from tests.parsers.spark_values import schema_and_row
from tests.parsers.test_unsaferow import latest_rows

DATA = Path(__file__).with_name("data")


def struct_of(*fields: tuple[str, DataType]) -> StructType:
    return StructType(tuple(StructField(name, dt) for name, dt in fields))


def one_field_json(dt: DataType, value: Any, zone: str = "UTC") -> str:
    """Our text of ``select <value> as c`` (a one-column row named ``c``)."""
    schema = struct_of(("c", dt))
    return row_json_encoder(schema, zone)(encode_row(schema, (value,)))


class Pairs(list):  # type: ignore[type-arg]
    """A JSON object as the list of its (name, value) pairs: repeated names are kept."""


def spark_object(text: str) -> Any:
    """Spark's line parsed with exact numbers and every (repeated) name kept."""
    return json.loads(text, object_pairs_hook=Pairs, parse_float=Decimal)


def assert_same(ours: Any, theirs: Any, path: str = "") -> None:
    """``ours`` (from ``to_python``) is the value of ``theirs`` (:func:`spark_object`).

    A float must be the double Spark's text parses to; a Decimal must equal it exactly.
    ``to_python`` renames the later of repeated names ``name_1``, ``name_2``… (test names
    never end in ``_<digits>`` themselves).
    """
    if isinstance(ours, dict):
        assert isinstance(theirs, Pairs), path
        assert [re.sub(r"_\d+$", "", k) for k in ours] == [k for k, _ in theirs], path
        for (key, a), (_, b) in zip(ours.items(), theirs, strict=True):
            assert_same(a, b, f"{path}.{key}")
    elif isinstance(ours, list):
        assert isinstance(theirs, list) and not isinstance(theirs, Pairs), path
        assert len(ours) == len(theirs), path
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(ours, float):
        assert isinstance(theirs, (Decimal, int)) and float(theirs) == ours, path
    elif isinstance(ours, Decimal):
        assert isinstance(theirs, (Decimal, int)) and ours == theirs, path
    else:
        assert type(ours) is type(theirs) and ours == theirs, path


# --- golden files ----------------------------------------------------------------------------

RICH = json.loads((DATA / "json_golden.json").read_text())
RICH_KEY = parse_datatype(RICH["key_schema"])
RICH_VALUE = parse_datatype(RICH["value_schema"])
RICH_ROWS = [
    (bytes.fromhex(r["key"]), bytes.fromhex(r["value"]), r["partition_id"]) for r in RICH["rows"]
]


def test_golden_covers_the_rich_types() -> None:
    assert RICH["spark_version"] == "4.3.0"
    assert isinstance(RICH_VALUE, StructType)
    # first() keeps (first: T, valueSet: boolean) per column: names repeat 41 times.
    assert RICH_VALUE.names == ["first", "valueSet"] * 41
    kinds = {f.data_type.simple_string() for f in RICH_VALUE.fields}
    for expected in ("float", "decimal(38,18)", "timestamp_ntz", "interval day to second",
                     "interval", "void", "map<struct<a:int,b:string>,string>",
                     "map<array<int>,string>", "struct<a:int,a:string>", "struct<>"):  # fmt: skip
        assert expected in kinds


@pytest.mark.parametrize("zone", sorted(RICH["lines"]))
def test_state_lines_equal_spark_byte_for_byte(zone: str) -> None:
    assert isinstance(RICH_KEY, StructType) and isinstance(RICH_VALUE, StructType)
    line = state_line_encoder(RICH_KEY, RICH_VALUE, zone)
    assert sorted(line(k, v, p) for k, v, p in RICH_ROWS) == RICH["lines"][zone]


def test_many_lines_at_once() -> None:
    assert isinstance(RICH_KEY, StructType) and isinstance(RICH_VALUE, StructType)
    lines = state_lines_encoder(RICH_KEY, RICH_VALUE, "UTC")
    by_partition: dict[int, list[tuple[bytes, bytes]]] = {}
    for k, v, p in RICH_ROWS:
        by_partition.setdefault(p, []).append((k, v))
    ours = sorted(text for p, pairs in by_partition.items() for text in lines(pairs, p))
    assert ours == RICH["lines"]["UTC"]


@pytest.mark.parametrize("zone", sorted(RICH["lines"]))
def test_decoded_rows_render_the_same(zone: str) -> None:
    assert isinstance(RICH_KEY, StructType) and isinstance(RICH_VALUE, StructType)
    key, value = row_decoder(RICH_KEY), row_decoder(RICH_VALUE)
    render_key, render_value = render_row(RICH_KEY, zone), render_row(RICH_VALUE, zone)
    ours = sorted(
        state_line(render_key(key(k)), render_value(value(v)), p) for k, v, p in RICH_ROWS
    )
    assert ours == RICH["lines"][zone]


def test_to_python_is_the_parsed_spark_line() -> None:
    assert isinstance(RICH_KEY, StructType) and isinstance(RICH_VALUE, StructType)
    key, value = row_decoder(RICH_KEY), row_decoder(RICH_VALUE)
    key_py, value_py = to_python(RICH_KEY), to_python(RICH_VALUE)
    line = state_line_encoder(RICH_KEY, RICH_VALUE)
    ours = {
        line(k, v, p): {"key": key_py(key(k)), "value": value_py(value(v)), "partition_id": p}
        for k, v, p in RICH_ROWS
    }
    for text in RICH["lines"]["UTC"]:
        assert_same(ours[text], spark_object(text))


CORPUS = json.loads((DATA / "corpus_json_golden.json").read_text())


@pytest.mark.parametrize("scenario", sorted(CORPUS))
def test_corpus_checkpoints_print_as_spark_reads_them(fixture_corpus: Path, scenario: str) -> None:
    """Checkpoints written by Spark 3.5.9 and 4.3.0; lines from Spark 4.3.0's reader."""
    golden = CORPUS[scenario]
    key_schema, value_schema = (
        parse_datatype(golden["key_schema"]),
        parse_datatype(golden["value_schema"]),
    )
    assert isinstance(key_schema, StructType) and isinstance(value_schema, StructType)
    line = state_line_encoder(key_schema, value_schema)
    state = fixture_corpus / scenario / "checkpoint" / "state" / "0"
    ours = sorted(
        line(key, value, int(partition.name))
        for partition in state.iterdir()
        if partition.name.isdigit()
        for key, value in latest_rows(partition).items()
    )
    assert ours == golden["lines"]


NUMBERS = json.loads((DATA / "java_number_text.json").read_text())


def test_float_text_matches_java_17() -> None:
    floats = [
        (struct.unpack("<f", struct.pack("<I", int(h, 16)))[0], text)
        for h, text in NUMBERS["float"]
    ]
    assert [java_float_to_string(x) for x, _ in floats] == [t for _, t in floats]


def test_double_text_matches_java_17() -> None:
    doubles = [
        (struct.unpack("<d", struct.pack("<Q", int(h, 16)))[0], text)
        for h, text in NUMBERS["double"]
    ]
    assert [java_double_to_string(x) for x, _ in doubles] == [t for _, t in doubles]
    assert all(float(t) == x for x, t in doubles)  # Java 17's doubles always round-trip


# --- the rules, one value at a time (captured from Spark 4.3.0) --------------------------------

FLOAT = AtomicType("float")
DOUBLE = AtomicType("double")
INF = float("inf")


@pytest.mark.parametrize(
    ("dt", "value", "expected"),
    [
        (DOUBLE, 1e-5, "1.0E-5"),
        (DOUBLE, 1e21, "1.0E21"),
        (DOUBLE, 1e7, "1.0E7"),
        (DOUBLE, 1e-3, "0.001"),
        (DOUBLE, 1e-4, "1.0E-4"),
        (DOUBLE, 123456789.0, "1.23456789E8"),
        (DOUBLE, 100.0, "100.0"),
        (DOUBLE, 0.5, "0.5"),
        (DOUBLE, -0.0, "-0.0"),
        (DOUBLE, 4.9e-324, "4.9E-324"),
        (DOUBLE, 1e300, "1.0E300"),
        (DOUBLE, 12345678912345.678, "1.2345678912345678E13"),
        (DOUBLE, 1.2345678901234568e17, "1.2345678901234568E17"),
        (DOUBLE, float("nan"), '"NaN"'),
        (DOUBLE, INF, '"Infinity"'),
        (FLOAT, -INF, '"-Infinity"'),
        (FLOAT, 0.10000000149011612, "0.1"),
        (FLOAT, 1234567.0, "1234567.0"),
        (FLOAT, 12345678.0, "1.2345678E7"),
        (FLOAT, 9.999999747378752e-06, "1.0E-5"),
        (FLOAT, 1.401298464324817e-45, "1.4E-45"),
        (FLOAT, 3.4028234663852886e38, "3.4028235E38"),
        (FLOAT, 495433023488.0, "4.95433023E11"),  # Java 17: not the shortest text
        (FLOAT, -0.0, "-0.0"),
        (DecimalType(10, 0), Decimal("1000"), "1000"),
        (DecimalType(38, 18), Decimal("1.500000000000000000"), "1.500000000000000000"),
        (DecimalType(38, 18), Decimal("-1.500000000000000000"), "-1.500000000000000000"),
        (DecimalType(20, 10), Decimal("0E-10"), "0E-10"),
        (DecimalType(18, 18), Decimal("1.0000000000E-8"), "1.0000000000E-8"),
        (DecimalType(5, 2), Decimal("123.00"), "123.00"),
        (DecimalType(10, 9), Decimal("1E-9"), "1E-9"),
        (DecimalType(10, 9), Decimal("-1.00E-7"), "-1.00E-7"),
        (DecimalType(10, 9), Decimal("0.000001000"), "0.000001000"),
        (DecimalType(38, 38), Decimal("1E-38"), "1E-38"),
        (DecimalType(38, 0), Decimal("9" * 38), "9" * 38),
        (DecimalType(38, 3), Decimal("12345678901234567890.123"), "12345678901234567890.123"),
        (DecimalType(18, 4), Decimal("-12345678901234.5678"), "-12345678901234.5678"),
        (AtomicType("long"), 2**63 - 1, "9223372036854775807"),
        (AtomicType("byte"), 1, "1"),
        (AtomicType("short"), -2, "-2"),
        (AtomicType("boolean"), True, "true"),
    ],
)
def test_numbers(dt: DataType, value: Any, expected: str) -> None:
    assert one_field_json(dt, value) == f'{{"c":{expected}}}'


TS = AtomicType("timestamp")
NTZ = AtomicType("timestamp_ntz")
DATE = AtomicType("date")


@pytest.mark.parametrize(
    ("dt", "value", "expected"),
    [
        (TS, -876544, "1969-12-31T23:59:59.123Z"),  # micros are cut to millis, toward -inf
        (TS, 1704164645000000, "2024-01-02T03:04:05.000Z"),
        (TS, 1704164645100000, "2024-01-02T03:04:05.100Z"),
        (TS, 1704164645000001, "2024-01-02T03:04:05.000Z"),
        (TS, -1, "1969-12-31T23:59:59.999Z"),
        (TS, -1000, "1969-12-31T23:59:59.999Z"),
        (TS, -1001, "1969-12-31T23:59:59.998Z"),
        (TS, 253402300800000000, "+10000-01-01T00:00:00.000Z"),
        (TS, -62135596800000000, "0001-01-01T00:00:00.000Z"),
        (TS, -62135596800000001, "0000-12-31T23:59:59.999Z"),
        (TS, -62198755200000000, "-0001-01-01T00:00:00.000Z"),
        (TS, -12219292800000000, "1582-10-15T00:00:00.000Z"),
        (TS, -12219292800000001, "1582-10-15T23:59:59.999Z"),  # the Julian gap, see module doc
        (TS, 2**63 - 1, "+294247-01-10T04:00:54.775Z"),
        (NTZ, 1704164645123456, "2024-01-02T03:04:05.123"),
        (NTZ, -1, "1969-12-31T23:59:59.999"),
        (NTZ, 253402300800000000, "+10000-01-01T00:00:00.000"),
        (NTZ, -12219292800000001, "1582-10-14T23:59:59.999"),  # no gap for timestamp_ntz
        (DATE, 19724, "2024-01-02"),
        (DATE, -719162, "0001-01-01"),
        (DATE, -719163, "0000-12-31"),
        (DATE, -719529, "-0001-12-31"),
        (DATE, 2932897, "+10000-01-01"),
        (DATE, 2147483647, "+5881580-07-11"),
        (DATE, -141427, "1582-10-15"),
        (DATE, -141428, "1582-10-15"),  # 1582-10-14
        (DATE, -141437, "1582-10-15"),  # 1582-10-05
        (DATE, -141438, "1582-10-04"),
    ],
)
def test_dates_and_times_utc(dt: DataType, value: int, expected: str) -> None:
    assert one_field_json(dt, value) == f'{{"c":"{expected}"}}'


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        # select timestamp_micros(0), timestamp_micros(-3000000000000000),
        #        timestamp_micros(1700000000123456) with the session zone set
        (
            "+05:30",
            [
                "1970-01-01T05:30:00.000+05:30",
                "1874-12-08T00:10:00.000+05:30",
                "2023-11-15T03:43:20.123+05:30",
            ],
        ),
        (
            "America/Los_Angeles",
            [
                "1969-12-31T16:00:00.000-08:00",
                "1874-12-07T10:47:02.000-07:52:58",
                "2023-11-14T14:13:20.123-08:00",
            ],
        ),
        (
            "Asia/Kolkata",
            [
                "1970-01-01T05:30:00.000+05:30",
                "1874-12-08T00:01:10.000+05:21:10",
                "2023-11-15T03:43:20.123+05:30",
            ],
        ),
        (
            "-00:30",
            [
                "1969-12-31T23:30:00.000-00:30",
                "1874-12-07T18:10:00.000-00:30",
                "2023-11-14T21:43:20.123-00:30",
            ],
        ),
        (
            "GMT+1",
            [
                "1970-01-01T01:00:00.000+01:00",
                "1874-12-07T19:40:00.000+01:00",
                "2023-11-14T23:13:20.123+01:00",
            ],
        ),
        (
            "Europe/London",
            [
                "1970-01-01T01:00:00.000+01:00",
                "1874-12-07T18:40:00.000Z",
                "2023-11-14T22:13:20.123Z",
            ],
        ),
    ],
)
def test_timestamps_in_session_zones(zone: str, expected: list[str]) -> None:
    schema = struct_of(("a", TS), ("b", TS), ("c", TS), ("d", DATE), ("e", NTZ))
    row = (0, -3000000000000000, 1700000000123456, 0, 0)
    text = row_json_encoder(schema, zone)(encode_row(schema, row))
    a, b, c = expected
    assert (
        text == f'{{"a":"{a}","b":"{b}","c":"{c}","d":"1970-01-01","e":"1970-01-01T00:00:00.000"}}'
    )


def test_julian_gap_is_decided_in_utc_not_the_session_zone() -> None:
    """1582-10-12T00:00Z and 1582-10-14T23:00Z with session zone +05:30 (JVM zone UTC)."""
    micros = [-12219292800000000 - 86400000000 * 3, -12219292800000000 - 3600000000]
    schema = struct_of(("t", TS), ("t2", TS))
    text = row_json_encoder(schema, "+05:30")(encode_row(schema, tuple(micros)))
    assert text == '{"t":"1582-10-15T05:30:00.000+05:30","t2":"1582-10-16T04:30:00.000+05:30"}'


@pytest.mark.parametrize(
    ("dt", "value", "expected"),
    [
        (YearMonthIntervalType(0, 1), 14, "INTERVAL '1-2' YEAR TO MONTH"),
        (YearMonthIntervalType(0, 0), 36, "INTERVAL '3-0' YEAR TO MONTH"),  # interval year
        (YearMonthIntervalType(1, 1), -3, "INTERVAL '-0-3' YEAR TO MONTH"),
        (YearMonthIntervalType(0, 1), -14, "INTERVAL '-1-2' YEAR TO MONTH"),
        (DayTimeIntervalType(1, 1), 93600000000, "INTERVAL '1 02:00:00' DAY TO SECOND"),  # hour
        (DayTimeIntervalType(3, 3), -90000000, "INTERVAL '-0 00:01:30' DAY TO SECOND"),
        (DayTimeIntervalType(3, 3), 1000001, "INTERVAL '0 00:00:01.000001' DAY TO SECOND"),
        (DayTimeIntervalType(0, 3), -93784123456, "INTERVAL '-1 02:03:04.123456' DAY TO SECOND"),
        (DayTimeIntervalType(2, 3), 6030000000, "INTERVAL '0 01:40:30' DAY TO SECOND"),
        (DayTimeIntervalType(0, 3), 93784500000, "INTERVAL '1 02:03:04.5' DAY TO SECOND"),
        (
            AtomicType("interval"),
            CalendarInterval(14, 25, 18367008009),
            "1 years 2 months 25 days 5 hours 6 minutes 7.008009 seconds",
        ),
        (
            AtomicType("interval"),
            CalendarInterval(-13, -1, -500000),
            "-1 years -1 months -1 days -0.5 seconds",
        ),
        (AtomicType("interval"), CalendarInterval(0, 0, 60000000), "1 minutes"),
        (
            AtomicType("interval"),
            CalendarInterval(0, 0, 93661500000),
            "26 hours 1 minutes 1.5 seconds",
        ),
        (AtomicType("interval"), CalendarInterval(0, 0, 0), "0 seconds"),
    ],
)
def test_intervals(dt: DataType, value: Any, expected: str) -> None:
    assert one_field_json(dt, value) == f'{{"c":"{expected}"}}'


STRING = AtomicType("string")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('a"b\\c/d', '"a\\"b\\\\c/d"'),
        # createDataFrame([("\t\n\r\b\f\x00\x1f\x7f\u2028\u2029\u0085/\\\"<>&'",)])
        (
            "\t\n\r\b\f\x00\x1f\x7f\u2028\u2029\x85/\\\"<>&'",
            '"\\t\\n\\r\\b\\f\\u0000\\u001F\x7f\u2028\u2029\x85/\\\\\\"<>&\'"',
        ),
        ("\u2028x\x01\x1f\x7fé😀", '"\u2028x\\u0001\\u001F\x7fé😀"'),
    ],
)
def test_string_escapes_like_jackson(value: str, expected: str) -> None:
    assert one_field_json(STRING, value) == f'{{"c":{expected}}}'
    assert json_quote(value) == expected


def test_binary_is_base64() -> None:
    assert one_field_json(AtomicType("binary"), b"abc") == '{"c":"YWJj"}'
    assert one_field_json(AtomicType("binary"), b"") == '{"c":""}'


S_INT = struct_of(("a", AtomicType("integer")))


@pytest.mark.parametrize(
    ("dt", "value", "expected"),
    [
        (struct_of(("a", AtomicType("void")), ("b", AtomicType("integer"))), (None, 1), '{"b":1}'),
        (struct_of(("a", S_INT)), ((None,),), '{"a":{}}'),
        (ArrayType(AtomicType("integer")), [1, None, 3], "[1,null,3]"),
        (ArrayType(STRING), [None], "[null]"),
        (ArrayType(AtomicType("void")), [], "[]"),
        (ArrayType(AtomicType("void")), [None], "[null]"),
        (MapType(STRING, AtomicType("integer")), [("a", None), ("b", 1)], '{"a":null,"b":1}'),
        (MapType(AtomicType("integer"), STRING), [(1, "x"), (2, None)], '{"1":"x","2":null}'),
        (MapType(DOUBLE, STRING), [(1.5, "v")], '{"1.5":"v"}'),
        (MapType(DOUBLE, AtomicType("integer")), [(1e7, 1)], '{"1.0E7":1}'),
        (MapType(DOUBLE, AtomicType("integer")), [(float("nan"), 1)], '{"NaN":1}'),
        (MapType(FLOAT, AtomicType("integer")), [(0.10000000149011612, 1)], '{"0.1":1}'),
        (MapType(AtomicType("boolean"), AtomicType("integer")), [(True, 1)], '{"true":1}'),
        (MapType(DATE, AtomicType("integer")), [(19723, 1)], '{"19723":1}'),
        (MapType(TS, AtomicType("integer")), [(1704067200000000, 1)], '{"1704067200000000":1}'),
        (MapType(NTZ, AtomicType("integer")), [(1704067200000000, 1)], '{"1704067200000000":1}'),
        (MapType(DecimalType(5, 2), AtomicType("integer")), [(Decimal("1.50"), 1)], '{"1.50":1}'),
        (
            MapType(DecimalType(20, 10), AtomicType("integer")),
            [(Decimal("0E-10"), 1)],
            '{"0E-10":1}',
        ),
        (MapType(YearMonthIntervalType(0, 0), AtomicType("integer")), [(12, 1)], '{"12":1}'),
        (
            MapType(DayTimeIntervalType(0, 3), AtomicType("integer")),
            [(-93784500000, 1)],
            '{"-93784500000":1}',
        ),
        (
            MapType(AtomicType("interval"), AtomicType("integer")),
            [(CalendarInterval(1, 2, 3000000), 1)],
            '{"1 months 2 days 3 seconds":1}',
        ),
        (MapType(STRING, AtomicType("integer")), [('a"\x01', 1)], '{"a\\"\\u0001":1}'),
        (
            MapType(STRING, MapType(STRING, AtomicType("void"))),
            [("k", [("a", None)])],
            '{"k":{"a":null}}',
        ),
        # Struct keys print as UnsafeRow.toString, array keys as UnsafeArrayData@<murmur3>.
        (MapType(S_INT, STRING), [((1,), "v")], '{"[0,1]":"v"}'),
        (MapType(S_INT, STRING), [((-1,), "v")], '{"[0,ffffffff]":"v"}'),
        (
            MapType(struct_of(("a", AtomicType("integer")), ("b", STRING)), STRING),
            [((1, "xy"), "v")],
            '{"[0,1,1800000002,7978]":"v"}',
        ),
        (
            MapType(ArrayType(AtomicType("integer")), STRING),
            [([1, 2], "v")],
            '{"org.apache.spark.sql.catalyst.expressions.UnsafeArrayData@f37c2c84":"v"}',
        ),
        (
            MapType(ArrayType(STRING), STRING),
            [(["a"], "v")],
            '{"org.apache.spark.sql.catalyst.expressions.UnsafeArrayData@1c03cf45":"v"}',
        ),
        (
            MapType(
                ArrayType(
                    struct_of(("key", AtomicType("integer")), ("value", AtomicType("integer")))
                ),
                STRING,
            ),
            [([(1, 2)], "v")],
            '{"org.apache.spark.sql.catalyst.expressions.UnsafeArrayData@79039046":"v"}',
        ),
        (
            struct_of(("a", AtomicType("integer")), ("a", AtomicType("integer"))),
            (1, 2),
            '{"a":1,"a":2}',
        ),
        (struct_of(('x"y', AtomicType("integer"))), (1,), '{"x\\"y":1}'),
        (struct_of(), (), "{}"),
        (
            struct_of(("a", ArrayType(AtomicType("integer"))), ("b", AtomicType("integer"))),
            (None, 1),
            '{"b":1}',
        ),
        (
            ArrayType(struct_of(("a", AtomicType("integer")), ("b", STRING))),
            [(1, None)],
            '[{"a":1}]',
        ),
        (ArrayType(MapType(STRING, AtomicType("integer"))), [None], "[null]"),
        (MapType(STRING, ArrayType(AtomicType("integer"))), [("x", None)], '{"x":null}'),
    ],
)
def test_nesting_nulls_and_map_keys(dt: DataType, value: Any, expected: str) -> None:
    assert one_field_json(dt, value) == f'{{"c":{expected}}}'
    schema = struct_of(("c", dt))
    assert render_row(schema)((value,)) == f'{{"c":{expected}}}'


def test_null_column_is_left_out() -> None:
    assert one_field_json(STRING, None) == "{}"


def test_helpers_against_java() -> None:
    """Values printed by Java 17 directly (``jshell``) or by Spark."""
    assert murmur3_hash_bytes(struct.pack("<qqii", 2, 0, 1, 2), 42) & 0xFFFFFFFF == 0xF37C2C84
    assert bigdecimal_to_string(1, -3) == "1E+3"
    assert bigdecimal_to_string(-5, 0) == "-5"
    assert java_double_to_string(2.842170943040401e-14) == "2.8421709430404007E-14"


# --- consistency and lines --------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(schema_and_row())
def test_bytes_and_tuple_renderers_agree(case: tuple[StructType, tuple[Any, ...]]) -> None:
    schema, row = case
    data = encode_row(schema, row)
    text = row_json_encoder(schema)(data)
    assert text == render_row(schema)(row_decoder(schema)(data))
    assert_same(to_python(schema)(row), spark_object(text))


def test_state_line_shapes() -> None:
    key = struct_of(("k", STRING))
    value = struct_of(("count", AtomicType("long")), ("sum", AtomicType("long")))
    line = state_line_encoder(key, value)
    kb = encode_row(key, ("a",))
    assert (
        line(kb, encode_row(value, (3, 7)), 0)
        == '{"key":{"k":"a"},"value":{"count":3,"sum":7},"partition_id":0}'
    )
    assert (
        line(kb, encode_row(value, (3, None)), 4)
        == '{"key":{"k":"a"},"value":{"count":3},"partition_id":4}'
    )
    assert line(memoryview(kb), bytearray(encode_row(value, (1, 2))), 1) == (
        '{"key":{"k":"a"},"value":{"count":1,"sum":2},"partition_id":1}'
    )
    assert line(kb, None, 2) == '{"key":{"k":"a"},"partition_id":2}'
    assert state_line('{"k":"a"}', None, 2) == '{"key":{"k":"a"},"partition_id":2}'
    assert state_line_encoder(key, value) is line
    pairs = [
        (kb, encode_row(value, (3, 7))),
        (kb, None),
        (memoryview(kb), encode_row(value, (None, 1))),
    ]
    assert state_lines_encoder(key, value)(pairs, 5) == [line(k, v, 5) for k, v in pairs]


def test_dedup_value_is_an_empty_object() -> None:
    """dropDuplicates keeps ``struct<__dummy__:void>`` rows with the null bit set."""
    key = struct_of(("k", STRING))
    value = struct_of(("__dummy__", AtomicType("void")))
    line = state_line_encoder(key, value)
    assert line(encode_row(key, ("h",)), bytes.fromhex("01000000000000000000000000000000"), 1) == (
        '{"key":{"k":"h"},"value":{},"partition_id":1}'
    )


def test_corrupt_rows_name_the_side() -> None:
    key = struct_of(("k", STRING))
    value = struct_of(("s", STRING))
    line = state_line_encoder(key, value)
    good = encode_row(key, ("a",))
    bad = bytes(8) + ((16 << 32) | 99).to_bytes(8, "little") + b"a" * 8
    with pytest.raises(CorruptData, match=r"^key row: "):
        line(bad, good, 0)
    with pytest.raises(CorruptData, match=r"^value row: "):
        line(good, bad, 0)
    with pytest.raises(CorruptData, match="value row: "):
        line(good, b"\x00", 0)  # shorter than the fixed region
    with pytest.raises(CorruptData):
        row_json_encoder(value)(bad)


@settings(max_examples=150, deadline=None)
@given(schema_and_row(), st.data())
def test_damaged_rows_raise_only_corrupt_data(
    case: tuple[StructType, tuple[Any, ...]], data: st.DataObject
) -> None:
    schema, row = case
    raw = bytearray(encode_row(schema, row))
    for _ in range(data.draw(st.integers(1, 4))):
        if raw:
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    with contextlib.suppress(CorruptData):
        state_line_encoder(schema, schema)(bytes(raw), bytes(raw[:cut]), 0)


def test_variant_is_not_rendered_yet() -> None:
    with pytest.raises(UnsupportedFormat, match="variant"):
        row_json_encoder(struct_of(("v", AtomicType("variant"))))


@pytest.mark.parametrize(
    ("zone", "offset"),
    [
        ("UTC", 0),
        ("Etc/UTC", 0),
        ("Z", 0),
        ("+05:30", 19800),
        ("-08:00", -28800),
        ("GMT+1", 3600),
        ("UTC-3", -10800),
        ("EST", -18000),
    ],
)
def test_fixed_zones(zone: str, offset: int) -> None:
    assert TimeZoneSpec(zone).fixed == offset


def test_short_zone_ids_are_javas() -> None:
    assert TimeZoneSpec("PST").offset_at(0) == -28800
    assert TimeZoneSpec("IST").offset_at(0) == 19800


def test_unknown_zone() -> None:
    with pytest.raises(UnsupportedFormat, match="Mars/Olympus"):
        TimeZoneSpec("Mars/Olympus")
