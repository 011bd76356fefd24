"""The streaming aggregation the RocksDB rewrite tests run on Spark, and its input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.rewrite.spark_runs import Output, Run, run_query

SCHEMA = "k STRING, id BIGINT"


def batches(count: int, keys: int) -> list[list[dict[str, Any]]]:
    """``count`` batches of 20-25 rows over ``keys`` keys, later batches adding new ones."""
    return [
        [{"k": f"k{(b * 7 + i) % keys}", "id": b * 100 + i} for i in range(25)]
        for b in range(count)
    ]


def aggregation(spark: Any) -> Any:
    """``source`` → the streaming aggregation over it (sum and count by key)."""
    from pyspark.sql import functions as F

    def build(source: Path) -> Any:
        stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))
        return stream.groupBy("k").agg(F.sum("id").alias("s"), F.count("*").alias("c"))

    return build


def run_aggregation(spark: Any, source: Path, cp: Path, conf: dict[str, str]) -> Output:
    """Run the aggregation under ``conf`` until its input is read; its sink output, sorted."""
    return run_query(spark, Run(aggregation(spark), source, cp, conf))
