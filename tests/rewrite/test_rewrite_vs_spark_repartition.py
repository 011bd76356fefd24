"""``stateglass rewrite`` against Spark's own offline repartition (Spark 4.2+, RocksDB).

Each query (a streaming aggregation, dropDuplicates with a watermark, a stream-stream join
and its four stores) runs three batches on RocksDB with 2 partitions, changelog
checkpointing on. One copy is repartitioned to 3 by Spark
(``spark._streamingCheckpointManager.repartition``, which writes one more batch holding the
state); StateGlass rewrites the untouched original to 3 partitions. Spark's state reader
must return the same rows, each in the same partition, per store, from both.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from stateglass.app.cli import main
from tests.conftest import spark_conf, write_batch_files
from tests.rewrite.test_rewrite_spark import QUERIES, _batches, _rows, _run

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
ON_ROCKSDB = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
PARTITIONS = 3


@pytest.fixture(scope="module", params=list(QUERIES))
def both(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, request: Any
) -> tuple[list[Any], list[Any]]:
    """Spark's reader on Spark's repartition and on StateGlass's rewrite of the same SRC."""
    name = request.param
    tmp = tmp_path_factory.mktemp(f"vs-repartition-{name}")
    source = write_batch_files(tmp / "in", _batches(3))
    src, by_spark, by_us = tmp / "src", tmp / "by-spark", tmp / "by-stateglass"
    with spark_conf(spark, ON_ROCKSDB):
        _run(spark, name, source, src, 2)
    shutil.copytree(src, by_spark)
    spark._streamingCheckpointManager.repartition(str(by_spark), PARTITIONS)
    args = ["rewrite", str(src), str(by_us), "--partitions", str(PARTITIONS), "--apply"]
    assert main(args) == 0
    return _rows(spark, name, by_spark), _rows(spark, name, by_us)


def test_the_rewrite_holds_the_rows_of_sparks_repartition_in_its_partitions(
    both: tuple[list[Any], list[Any]],
) -> None:
    by_spark, by_us = both
    assert by_spark and {p for *_, p in by_spark} == set(range(PARTITIONS))
    assert by_us == by_spark
