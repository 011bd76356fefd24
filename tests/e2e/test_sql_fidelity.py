"""The SQL catalog's tables against Spark's own State Data Source, row for row, through Arrow.

For every version-tagged sample checkpoint (``oracle.format_samples``), every store, and every
transformWithState variable and its timers, at the last committed batch and up to two earlier
retained ones: ``SELECT * EXCLUDE (batch_id) FROM <table> WHERE batch_id = B`` and Spark's
``spark.read.format("statestore")`` at ``batchId`` B (``toArrow()``) hold the same multiset of
rows. Rows are compared by the position of their leaf values, because Spark repeats
aggregation buffer names where Arrow tables suffix them; instants are compared in UTC.
The batches of one read are unioned into one Spark job.
"""

from __future__ import annotations

import os
from collections import Counter
from functools import reduce
from typing import Any

import pyarrow as pa
import pytest

from stateglass.collectors.catalog import SqlSession, TableEntry
from stateglass.collectors.catalog.names import quoted
from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from tests.collectors.test_catalog_fidelity import canonical, retained_batches
from tests.e2e.oracle import SAMPLES, format_samples, leaf_columns

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def leaf_rows(table: pa.Table) -> Counter[Any]:
    """Rows as tuples of their leaf values, structs flattened by position."""
    columns = [leaf.to_pylist() for leaf in leaf_columns(table)]
    return Counter(canonical(row) for row in zip(*columns, strict=True))


def spark_options(entry: TableEntry) -> dict[str, str]:
    opts = {"operatorId": str(entry.operator_id), "storeName": str(entry.store_name)}
    if entry.kind == "timers":
        opts["readRegisteredTimers"] = "true"
    elif entry.state_var is not None:
        opts["stateVarName"] = entry.state_var
    return opts


def unique_names(dt: Any) -> Any:
    """A Spark type with repeated struct field names suffixed (``sum``, ``sum_1``), which
    Arrow conversion needs; a cast to it renames by position and keeps every value."""
    from pyspark.sql import types as T

    if isinstance(dt, T.StructType):
        seen: Counter[str] = Counter()
        fields = []
        for f in dt.fields:
            name = f.name if not seen[f.name] else f"{f.name}_{seen[f.name]}"
            seen[f.name] += 1
            fields.append(T.StructField(name, unique_names(f.dataType), f.nullable))
        return T.StructType(fields)
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(unique_names(dt.elementType), dt.containsNull)
    if isinstance(dt, T.MapType):
        return T.MapType(unique_names(dt.keyType), unique_names(dt.valueType), dt.valueContainsNull)
    return dt


def spark_batches(
    spark: Any, checkpoint: str, options: dict[str, str], batches: list[int]
) -> dict[int, pa.Table]:
    """Spark's rows at each batch, read in one job (a union tagged with the batch)."""
    from pyspark.sql import functions as F

    frames = []
    for batch in batches:
        reader = spark.read.format("statestore").option("batchId", batch)
        for name, value in options.items():
            reader = reader.option(name, value)
        df = reader.load(checkpoint)
        columns = [F.col(f.name).cast(unique_names(f.dataType)) for f in df.schema.fields]
        frames.append(df.select(F.lit(batch).alias("__batch"), *columns))
    both = reduce(lambda x, y: x.unionByName(y), frames).toArrow()
    out = {}
    for batch in batches:
        mask = pa.compute.equal(both.column("__batch"), batch)
        out[batch] = both.filter(mask).drop_columns(["__batch"])
    return out


@pytest.mark.parametrize("path", format_samples(), ids=lambda p: os.path.relpath(p, SAMPLES))
def test_every_table_is_sparks(spark: Any, path: str) -> None:
    cp = Checkpoint.open(path)
    if not cp.commit_batch_ids:
        pytest.skip("no committed batch")
    compared = 0
    with SqlSession([path]) as session:
        for entry in session.tables():
            if entry.kind not in ("state", "timers"):
                continue
            name = f"{quoted(entry.schema)}.{quoted(entry.table)}"
            batches = retained_batches(cp, entry)
            theirs = spark_batches(spark, path, spark_options(entry), batches)
            for batch in batches:
                ours = session.execute(
                    f"SELECT * EXCLUDE (batch_id) FROM {name} WHERE batch_id = {batch}"
                ).table
                assert ours.num_rows == theirs[batch].num_rows, f"{entry.table} at {batch}"
                assert leaf_rows(ours) == leaf_rows(theirs[batch]), f"{entry.table} at {batch}"
                compared += 1
    assert compared
