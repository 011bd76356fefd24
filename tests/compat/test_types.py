"""Spark's schema rules for state (pure): positional compatibility and Avro's reader rules."""

from __future__ import annotations

import pytest

from stateglass.app.analysis.compat.types import avro_can_read, compatible, differences
from stateglass.parsers.sparktypes import ArrayType, AtomicType, MapType, StructField, StructType

INT, LONG, STR, DBL = (AtomicType(n) for n in ("integer", "long", "string", "double"))


def struct(*fields: tuple[str, object, bool]) -> StructType:
    return StructType(tuple(StructField(n, t, nullable) for n, t, nullable in fields))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("new", "stored", "ok"),
    [
        pytest.param(struct(("a", INT, True)), struct(("b", INT, True)), True, id="renamed"),
        pytest.param(struct(("a", INT, False)), struct(("a", INT, True)), True, id="tightened"),
        pytest.param(struct(("a", INT, True)), struct(("a", INT, False)), False, id="loosened"),
        pytest.param(struct(("a", LONG, True)), struct(("a", INT, True)), False, id="widened"),
        pytest.param(
            struct(("a", INT, True), ("b", INT, True)), struct(("a", INT, True)), False, id="added"
        ),
        pytest.param(
            struct(("a", ArrayType(INT, True), True)),
            struct(("a", ArrayType(INT, False), True)),
            False,
            id="array-may-now-hold-null",
        ),
        pytest.param(
            struct(("m", MapType(STR, INT, False), True)),
            struct(("m", MapType(STR, INT, True), True)),
            True,
            id="map-values-tightened",
        ),
    ],
)
def test_compatible_is_positional_and_nullability_narrowing(
    new: StructType, stored: StructType, ok: bool
) -> None:
    assert compatible(new, stored) is ok


@pytest.mark.parametrize(
    ("reader", "writer", "ok"),
    [
        pytest.param(struct(("a", LONG, True)), struct(("a", INT, True)), True, id="int-to-long"),
        pytest.param(struct(("a", INT, True)), struct(("a", LONG, True)), False, id="long-to-int"),
        pytest.param(
            struct(("a", DBL, True)), struct(("a", LONG, True)), True, id="long-to-double"
        ),
        pytest.param(struct(("a", STR, True)), struct(("a", INT, True)), False, id="int-to-string"),
        pytest.param(
            struct(("a", INT, True), ("b", STR, True)), struct(("a", INT, True)), True, id="added"
        ),
        pytest.param(
            struct(("a", INT, True)), struct(("a", INT, True), ("b", STR, True)), True, id="removed"
        ),
        pytest.param(
            struct(("s", struct(("x", STR, True)), True)),
            struct(("s", struct(("x", INT, True)), True)),
            False,
            id="nested-type-change",
        ),
    ],
)
def test_avro_reader_rules(reader: StructType, writer: StructType, ok: bool) -> None:
    assert avro_can_read(reader, writer) is ok


def test_differences_name_each_field() -> None:
    stored = struct(("k", INT, True))
    new = struct(("k", STR, True), ("extra", LONG, False))
    assert differences(new, stored, "value") == [
        "value: 1 field(s) stored, 2 in the new query",
        "value field 0: k int -> k string (type changed)",
        "value field 1: extra bigint not null added",
    ]
