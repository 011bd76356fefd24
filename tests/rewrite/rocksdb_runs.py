"""The streaming aggregation the RocksDB rewrite tests run on Spark, and its input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import spark_conf

SCHEMA = "k STRING, id BIGINT"


def batches(count: int, keys: int) -> list[list[dict[str, Any]]]:
    """``count`` batches of 20-25 rows over ``keys`` keys, later batches adding new ones."""
    return [
        [{"k": f"k{(b * 7 + i) % keys}", "id": b * 100 + i} for i in range(25)]
        for b in range(count)
    ]


def run_aggregation(
    spark: Any, source: Path, cp: Path, conf: dict[str, str]
) -> list[tuple[Any, ...]]:
    """Run the aggregation under ``conf`` until its input is read; its sink output, sorted."""
    from pyspark.sql import functions as F

    with spark_conf(spark, conf):
        frame = (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .groupBy("k")
            .agg(F.sum("id").alias("s"), F.count("*").alias("c"))
        )
        return run_until_read(frame, cp)


def run_until_read(frame: Any, cp: Path) -> list[tuple[Any, ...]]:
    """Run the streaming ``frame`` (update mode) on checkpoint ``cp`` until its input is
    read; its sink output, ``(batch id, *row)`` sorted."""
    out: list[tuple[Any, ...]] = []

    def sink(batch: Any, batch_id: int) -> None:
        out.extend((batch_id, *row) for row in batch.collect())

    query = (
        frame.writeStream.outputMode("update")
        .foreachBatch(sink)
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return sorted(out)
