"""The catalog applies a predicate DuckDB pushed into a scan as DuckDB would have: the rows
``Table.filter`` keeps, without copying a table every row of which passes."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from stateglass.collectors.catalog.sources import kept_rows

COUNTS = st.lists(st.one_of(st.none(), st.integers(-3, 3)), max_size=50)


def table_of(counts: list[int | None]) -> pa.Table:
    value = pa.StructArray.from_arrays(
        [pa.array(counts, type=pa.int64()), pa.array(range(len(counts)), type=pa.int64())],
        names=["count", "sum"],
    )
    return pa.table({"value": value, "partition_id": pa.array([7] * len(counts), pa.int32())})


@given(counts=COUNTS, bound=st.integers(-4, 4))
def test_the_kept_rows_are_those_table_filter_keeps(counts: list[int | None], bound: int) -> None:
    table = table_of(counts)
    flt = pc.field("value", "count") > bound
    assert kept_rows(table, flt).equals(table.filter(flt))


def test_a_table_every_row_of_which_passes_is_not_copied() -> None:
    table = table_of([1, 2, 3])
    assert kept_rows(table, pc.field("value", "count") > 0) is table


def test_a_null_verdict_drops_the_row() -> None:
    table = table_of([None, 2])
    kept = kept_rows(table, pc.field("value", "count") > 0)
    assert kept.column("value").to_pylist() == [{"count": 2, "sum": 1}]
