"""Hypothesis strategies: random Spark schemas and Python values that fit them.

Values follow the conventions of :mod:`parsers.unsaferow` (ints for dates and times, a list
of pairs for a map, ``Decimal`` with the type's scale…), so that
``row_decoder(s)(encode_row(s, v)) == v``.
"""

from __future__ import annotations

import struct
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
    StringLikeType,
    StructField,
    StructType,
    YearMonthIntervalType,
)
from stateglass.parsers.unsaferow import CalendarInterval

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

ATOMIC_NAMES = [
    "boolean",
    "byte",
    "short",
    "integer",
    "long",
    "float",
    "double",
    "string",
    "binary",
    "date",
    "timestamp",
    "timestamp_ntz",
    "interval",
    "void",
]

# Types a map key may have (Spark refuses maps, and null keys never occur).
KEY_TYPES = st.one_of(
    st.sampled_from([AtomicType(n) for n in ATOMIC_NAMES if n not in ("void",)]),
    st.builds(DecimalType, st.sampled_from([5, 18, 38]), st.sampled_from([0, 2])),
)


def _float32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def atomic_types() -> st.SearchStrategy[DataType]:
    """Every type without children, with a few parameters for decimals and intervals."""
    return st.one_of(
        st.sampled_from([AtomicType(n) for n in ATOMIC_NAMES]),
        st.builds(
            lambda p, s: DecimalType(p, min(s, p)),
            st.integers(1, 38),
            st.integers(0, 38),
        ),
        st.builds(StringLikeType, st.sampled_from(["char", "varchar"]), st.integers(1, 10)),
        st.sampled_from([YearMonthIntervalType(0, 1), YearMonthIntervalType(1, 1)]),
        st.sampled_from([DayTimeIntervalType(0, 3), DayTimeIntervalType(1, 2)]),
    )


NAMES = st.sampled_from(["a", "b", "a", "k", 'q"uote', "é", "count", "x{y}"])


def structs(
    children: st.SearchStrategy[DataType], max_fields: int = 5
) -> st.SearchStrategy[StructType]:
    """Structs of ``children`` (names repeat on purpose, as in state value schemas)."""
    return st.lists(st.tuples(NAMES, children), max_size=max_fields).map(
        lambda fs: StructType(tuple(StructField(n, t) for n, t in fs))
    )


def data_types() -> st.SearchStrategy[DataType]:
    """Any type, nested up to a few levels."""
    return st.recursive(
        atomic_types(),
        lambda children: st.one_of(
            structs(children),
            st.builds(ArrayType, children, st.booleans()),
            st.builds(MapType, KEY_TYPES, children, st.booleans()),
        ),
        max_leaves=8,
    )


def schemas() -> st.SearchStrategy[StructType]:
    """A row schema: a struct of any types, 0 to 6 fields."""
    return structs(data_types(), max_fields=6)


def values(dt: DataType, nullable: bool = True) -> st.SearchStrategy[Any]:
    """Decoded Python values of type ``dt`` (``None`` included when ``nullable``)."""
    strategy = _non_null(dt)
    if isinstance(dt, AtomicType) and dt.name == "void":
        return st.none()
    return st.one_of(st.none(), strategy) if nullable else strategy


def _non_null(dt: DataType) -> st.SearchStrategy[Any]:
    if isinstance(dt, AtomicType):
        name = dt.name
        simple: dict[str, st.SearchStrategy[Any]] = {
            "boolean": st.booleans(),
            "byte": st.integers(-128, 127),
            "short": st.integers(-(2**15), 2**15 - 1),
            "integer": INT32,
            "long": INT64,
            "float": st.floats(width=32, allow_nan=False).map(_float32),
            "double": st.floats(allow_nan=False),
            "string": st.text(),
            "binary": st.binary(),
            "date": INT32,
            "timestamp": INT64,
            "timestamp_ntz": INT64,
            "interval": st.builds(CalendarInterval, INT32, INT32, INT64),
            "void": st.none(),
        }
        return simple[name]
    if isinstance(dt, StringLikeType):
        return st.text(max_size=dt.length)
    if isinstance(dt, DecimalType):
        bound = 10**dt.precision - 1
        return st.integers(-bound, bound).map(lambda u: Decimal(f"{u}E{-dt.scale}"))
    if isinstance(dt, YearMonthIntervalType):
        return INT32
    if isinstance(dt, DayTimeIntervalType):
        return INT64
    if isinstance(dt, StructType):
        return st.tuples(*(values(f.data_type) for f in dt.fields))
    if isinstance(dt, ArrayType):
        return st.lists(values(dt.element_type, dt.contains_null), max_size=5)
    if isinstance(dt, MapType):
        pair = st.tuples(values(dt.key_type, False), values(dt.value_type, dt.value_contains_null))
        # Spark's map builders drop duplicate keys (spark.sql.mapKeyDedupPolicy).
        return st.lists(pair, max_size=4, unique_by=lambda p: repr(p[0]))
    raise AssertionError(dt)


@st.composite
def schema_and_row(draw: st.DrawFn) -> tuple[StructType, tuple[Any, ...]]:
    """A schema and one row of it."""
    schema = draw(schemas())
    return schema, draw(_non_null(schema))
