"""Which columns a catalog scan decodes: those DuckDB reads and those its pushed filter names."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.dataset as ds

from stateglass.collectors.catalog.sources import columns_needed

SCHEMA = pa.schema(
    [
        ("key", pa.struct([("k", pa.string())])),
        ("value", pa.struct([("count", pa.int64()), ("sum", pa.int64())])),
        ("partition_id", pa.int32()),
        ("batch_id", pa.int64()),
    ]
)


def test_an_aggregate_over_value_does_not_need_the_key() -> None:
    flt = (ds.field("value", "count") > 0) & (ds.field("partition_id") == 3)
    assert columns_needed(SCHEMA, [], flt) == {"value", "partition_id"}


def test_a_filter_on_the_key_needs_it_though_not_selected() -> None:
    assert columns_needed(SCHEMA, ["value"], ds.field("key", "k") == "a") == {"key", "value"}


def test_no_projection_needs_every_column() -> None:
    assert columns_needed(SCHEMA, None, None) is None
    assert columns_needed(SCHEMA, ["batch_id"], None) == {"batch_id"}
