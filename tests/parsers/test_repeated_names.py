"""Structs whose field names repeat (aggregation buffers): Arrow names the repeats apart, and
:func:`spark_names` gives a SQL result's columns back Spark's names, by what
:func:`repeated_names` found in the state's own schema."""

from __future__ import annotations

from hypothesis import given, settings

from stateglass.parsers.arrow_types import arrow_type, repeated_names, spark_names, spark_type
from stateglass.parsers.sparktypes import ArrayType, DataType, MapType, StructType
from tests.parsers.spark_values import schemas


def struct_names(dt: DataType) -> list[tuple[str, ...]]:
    """The field names of every struct in ``dt``, in a walk's order."""
    found: list[tuple[str, ...]] = []
    todo = [dt]
    while todo:
        at = todo.pop()
        if isinstance(at, StructType):
            found.append(tuple(f.name for f in at.fields))
            todo.extend(f.data_type for f in at.fields)
        elif isinstance(at, ArrayType):
            todo.append(at.element_type)
        elif isinstance(at, MapType):
            todo.extend((at.key_type, at.value_type))
    return found


@settings(max_examples=300, deadline=None)
@given(schemas())
def test_a_result_column_gets_sparks_names_back(schema: StructType) -> None:
    through_arrow = spark_type(arrow_type(schema))
    assert all(len(set(n)) == len(n) for n in struct_names(through_arrow))
    assert struct_names(spark_names(through_arrow, repeated_names(schema))) == struct_names(schema)


def test_an_aggregate_buffer() -> None:
    from stateglass.parsers.sparktypes import AtomicType, StructField

    long = AtomicType("long")
    buffer = StructType(tuple(StructField(n, long) for n in ("count", "sum", "sum", "count")))
    assert repeated_names(buffer) == {
        ("count", "sum", "sum_1", "count_1"): ("count", "sum", "sum", "count")
    }
    assert repeated_names(StructType((StructField("a", long),))) == {}
