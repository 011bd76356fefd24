"""``state --format parquet`` against Spark's own ``write.parquet`` of the State Data Source.

Both files are read back with pyarrow and compared row for row by the position of their leaf
values (Spark repeats aggregation buffer names, ours suffix them). Sample stores whose value
holds a ``void`` field (dedup) are left out: Spark's Parquet writer refuses that type; so are
the aggregation samples, whose value repeats a field name with two types (``first`` an array
and a map), which Spark's Parquet writer cannot write either (``InvalidRecordException``).
Arrays, maps and every other type are checked against the row-by-row path instead
(``tests/parsers/test_columnar.py``), which the JSON fidelity tests hold to Spark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stateglass.app.cli import main as cli_main
from tests.conftest import SAMPLES as ALL_SAMPLES
from tests.e2e.oracle import leaf_columns

pytestmark = pytest.mark.spark

SAMPLES = ALL_SAMPLES / "spark-4.3"


def _leaf_rows(table: pa.Table) -> list[str]:
    leaves = leaf_columns(table)
    return sorted(map(repr, zip(*(leaf.to_pylist() for leaf in leaves), strict=True)))


@pytest.mark.parametrize(
    ("name", "store"),
    [
        pytest.param("join-hdfs", "left-keyWithIndexToValue", id="join-hdfs"),
        pytest.param("join-hdfs", "right-keyToNumValues", id="join-hdfs-counts"),
        pytest.param("fmgws-hdfs", "default", id="fmgws-hdfs"),
        pytest.param("window-progress", "default", id="window"),
    ],
)
def test_parquet_rows_are_sparks(spark: Any, tmp_path: Path, name: str, store: str) -> None:
    cp = str(SAMPLES / name)
    ours = tmp_path / "ours.parquet"
    assert cli_main(["state", cp, "--store", store, "--format", "parquet", "-o", str(ours)]) == 0
    theirs = str(tmp_path / "spark")
    key = "spark.sql.parquet.outputTimestampType"
    before = spark.conf.get(key)
    spark.conf.set(key, "TIMESTAMP_MICROS")  # what ours writes (Spark's default is INT96)
    try:
        df = spark.read.format("statestore").option("storeName", store).load(cp)
        df.write.parquet(theirs)
    finally:
        spark.conf.set(key, before)
    a, b = pq.read_table(ours), pq.read_table(theirs)
    assert a.num_rows == b.num_rows > 0
    assert _leaf_rows(a) == _leaf_rows(b)
