"""Hypothesis strategies for Spark types and UnsafeRows of them, shared by the tests that
hold a fast path to the Python decoder (the compiled renderer, the columnar decoder)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

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
)
from stateglass.parsers.unsafewriter import encode_row

SIMPLE = {
    "boolean": st.booleans(),
    "byte": st.integers(-(2**7), 2**7 - 1),
    "short": st.integers(-(2**15), 2**15 - 1),
    "integer": st.integers(-(2**31), 2**31 - 1),
    "long": st.integers(-(2**63), 2**63 - 1),
    "string": st.one_of(
        st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
        st.sampled_from(["", '"', "\\", "\\u001f", "\\\\u0010", "\x00\x1f\x7f", "é€😀", "/"]),
    ),
    "void": st.none(),
}
# Values whose text the compiled loop hands back to Python: Java's own digits (powers of two,
# 2**53 and above, subnormals), years outside 1600-9999, the days of the 1582 gap.
_HARD_DOUBLES = [2.0, 0.5, -0.25, 2.0**60, 9007199254740993.0, 5e-324, 2.2250738585072014e-308,
                 1e-3, 9.999999e-4, 1e7, 9999999.999, 1e21, 1.0e-5, float("nan"),
                 float("inf"), -float("inf"), -0.0, 0.0, 100.0, 0.1, 123456.789]  # fmt: skip
_EDGE_DAYS = [-135141, -135140, 2932896, 2932897, -141438, -141437, -141428, -141427, -719162,
              -800000, 0, -1, 19723]  # fmt: skip
_US_DAY = 86_400_000_000
_MICROS = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(10**12) * 1000, 10**12 * 1000),  # the seconds around our era
    st.builds(
        lambda d, us: d * _US_DAY + us,
        st.sampled_from(_EDGE_DAYS),
        st.integers(-_US_DAY, _US_DAY),
    ),
)
RICH = {
    "double": st.one_of(st.floats(), st.sampled_from(_HARD_DOUBLES)),
    "float": st.floats(width=32),
    "date": st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from(_EDGE_DAYS)),
    "timestamp": _MICROS,
    "timestamp_ntz": _MICROS,
    "binary": st.binary(max_size=10),
}
DECIMALS = [DecimalType(10, 3), DecimalType(18, 0), DecimalType(18, 18), DecimalType(4, 2),
            DecimalType(30, 5)]  # fmt: skip
OTHER_TYPES: list[DataType] = [
    *DECIMALS,
    ArrayType(AtomicType("double")),
    ArrayType(AtomicType("string")),
    ArrayType(StructType((StructField("t", AtomicType("timestamp")),))),
    MapType(AtomicType("string"), AtomicType("long")),
    MapType(AtomicType("date"), ArrayType(AtomicType("float"))),
    YearMonthIntervalType(0, 1),
    DayTimeIntervalType(0, 3),
    AtomicType("interval"),
]


def _decimal_values(dt: DecimalType) -> st.SearchStrategy[Decimal]:
    top = Decimal(10) ** (dt.precision - dt.scale) - Decimal(1).scaleb(-dt.scale)
    return st.decimals(-top, top, places=dt.scale, allow_nan=False, allow_infinity=False)


def draw_value(draw: st.DrawFn, dt: DataType) -> Any:
    """One non-null value of ``dt`` (elements, map values and fields may be None)."""
    if isinstance(dt, StructType):
        return draw_row(draw, dt)
    if isinstance(dt, AtomicType):
        if dt.name == "interval":
            return draw(
                st.tuples(*[st.integers(-(2**31), 2**31 - 1)] * 2, st.integers(-(2**63), 2**63 - 1))
            )
        return draw(SIMPLE[dt.name] if dt.name in SIMPLE else RICH[dt.name])
    if isinstance(dt, DecimalType):
        return draw(_decimal_values(dt))
    if isinstance(dt, YearMonthIntervalType):
        return draw(st.integers(-(2**31), 2**31 - 1))
    if isinstance(dt, DayTimeIntervalType):
        return draw(st.integers(-(2**63), 2**63 - 1))
    if isinstance(dt, ArrayType):
        n = draw(st.integers(0, 3))
        return [None if draw(NULLS) else draw_value(draw, dt.element_type) for _ in range(n)]
    assert isinstance(dt, MapType)
    n = draw(st.integers(0, 3))
    return [
        (draw_value(draw, dt.key_type), None if draw(NULLS) else draw_value(draw, dt.value_type))
        for _ in range(n)
    ]


names = st.one_of(
    st.sampled_from(["k", "count", "sum", 'a"b', "back\\slash", "\x01", "ü"]),
    st.text(st.characters(exclude_categories=("Cs",)), max_size=6),
)


def struct_types(depth: int = 2, rich: bool = False) -> st.SearchStrategy[StructType]:
    leaf: st.SearchStrategy[DataType] = st.sampled_from(sorted(SIMPLE)).map(AtomicType)
    if rich:
        leaf = st.one_of(leaf, st.sampled_from(sorted(RICH)).map(AtomicType))
        leaf = st.one_of(leaf, st.sampled_from(OTHER_TYPES))
    field_type = leaf if depth == 0 else st.one_of(leaf, leaf, struct_types(depth - 1, rich))
    return st.lists(st.tuples(names, field_type), max_size=5).map(
        lambda fields: StructType(tuple(StructField(n, t) for n, t in fields))
    )


def draw_row(draw: st.DrawFn, schema: StructType) -> tuple[Any, ...]:
    """Values for a row of ``schema``, any of them None (drawn directly: building a strategy
    per schema costs hypothesis more than the test itself)."""
    out: list[Any] = []
    for field in schema.fields:
        dt = field.data_type
        out.append(None if draw(NULLS) else draw_value(draw, dt))
    return tuple(out)


NULLS = st.integers(0, 4).map(lambda n: n == 0)


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType(tuple(StructField(n, t) for n, t in fields))


_ALL_SIMPLE = _struct(*((name, AtomicType(name)) for name in sorted(SIMPLE)))
_ALL_RICH = _struct(*((name, AtomicType(name)) for name in sorted(RICH)))
_ALL_OTHER = _struct(*((f"o{i}", dt) for i, dt in enumerate(OTHER_TYPES)))
# A fixed set keeps the generated Python encoders cached (building one costs milliseconds);
# test_rendering_agrees_on_random_schemas draws schemas freely, with fewer examples.
SCHEMAS = [
    _struct(("k", AtomicType("string"))),
    _struct(("count", AtomicType("long")), ("sum", AtomicType("long"))),
    _ALL_SIMPLE,
    _struct(('a"b\x01ü', AtomicType("integer")), ("in", _ALL_SIMPLE), ("e", _struct())),
    _struct(("w", _struct(("x", _struct(("s", AtomicType("string")), ("b", AtomicType("byte"))))))),
    _struct(),
    # More than 64 fields: a null bitset of two words.
    _struct(*((f"f{i}", AtomicType("short" if i % 2 else "string")) for i in range(70))),
    # Every other type, alone and nested as a window aggregation keeps them.
    _ALL_RICH,
    _ALL_OTHER,
    _struct(
        ("window", _struct(("start", AtomicType("timestamp")), ("end", AtomicType("timestamp")))),
        ("k", AtomicType("string")),
    ),
    _struct(("sum", AtomicType("double")), ("count", AtomicType("long"))),
    _struct(("in", _ALL_RICH), ("d", DecimalType(38, 10))),
]
ZONES = st.sampled_from(["UTC", "+05:30", "-07:52:58", "Europe/Paris", "America/Los_Angeles"])


@st.composite
def state_rows(
    draw: st.DrawFn, schemas: st.SearchStrategy[StructType] | None = None
) -> tuple[StructType, StructType, list[tuple[bytes, Any]]]:
    if schemas is None:
        schemas = st.sampled_from(SCHEMAS)
    key_schema, value_schema = draw(schemas), draw(schemas)
    pairs = []
    for _ in range(draw(st.integers(0, 6))):
        kb = encode_row(key_schema, draw_row(draw, key_schema))
        removed = draw(NULLS)
        vb = None if removed else encode_row(value_schema, draw_row(draw, value_schema))
        pairs.append((kb, vb))
    return key_schema, value_schema, pairs
