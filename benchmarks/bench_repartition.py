"""Calibrates the planner's rewrite-time model on real repartitions timed on this machine.

Usage::

    .venv/bin/python benchmarks/bench_repartition.py [--keys 1000,30000,100000,300000]

For each size: a real PySpark 4.3 query (RocksDB provider, changelog checkpointing on, 3
shuffle partitions) aggregates that many distinct keys (``groupBy(k).agg(count, sum)``) in
two batches; copies of its checkpoint are repartitioned to 2 and to 6 partitions with
``spark._streamingCheckpointManager.repartition`` and timed (the call returns when the
repartition batch is committed). The stored bytes each rewrite moves come from
``stateglass plan-partitions`` on the checkpoint before. A least-squares line
``seconds = overhead + bytes / throughput`` through all runs gives the constants of
``stateglass.app.analysis.repartition.plan.REWRITE_MODEL``. Prints figures ready for
docs/benchmarks.md,
with the load average before and after.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE)]

from stateglass.app.analysis.repartition.plan import plan_partitions  # noqa: E402
from stateglass.collectors.checkpoints.checkpoint import Checkpoint  # noqa: E402

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def _session() -> Any:
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "3")
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.log.level", "ERROR")
        .getOrCreate()
    )


def _checkpoint(spark: Any, base: Path, keys: int) -> Path:
    """A query that aggregates ``keys`` distinct keys over two batches."""
    src = base / f"src-{keys}"
    src.mkdir()
    for batch in range(2):
        path = src / f"{batch}.json"
        with path.open("w") as fh:
            for i in range(keys):
                fh.write(json.dumps({"k": f"key-{i:09d}", "v": i + batch}) + "\n")
        os.utime(path, (1e9 + batch, 1e9 + batch))
    cp = base / f"cp-{keys}"
    from pyspark.sql import functions as F

    query = (
        spark.readStream.schema("k STRING, v BIGINT")
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .groupBy("k")
        .agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return cp


def _fit(runs: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares ``seconds = a + bytes * b``: (a, 1/b)."""
    n = len(runs)
    mx = sum(b for b, _ in runs) / n
    my = sum(s for _, s in runs) / n
    sxx = sum((b - mx) ** 2 for b, _ in runs)
    sxy = sum((b - mx) * (s - my) for b, s in runs)
    slope = sxy / sxx if sxx else 0.0
    return my - slope * mx, (1 / slope if slope > 0 else float("inf"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", default="1000,30000,100000,300000")
    args = parser.parse_args()
    sizes = [int(k) for k in args.keys.split(",")]
    print(
        f"# {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load before {os.getloadavg()}"
    )
    spark = _session()
    spark.sparkContext.setLogLevel("ERROR")
    runs: list[tuple[int, float]] = []
    base = Path(tempfile.mkdtemp(prefix="bench-repartition-"))
    try:
        # A first repartition pays for class loading: not part of any size's figure.
        warm = _checkpoint(spark, base, 10)
        spark._streamingCheckpointManager.repartition(str(warm), 2)
        for keys in sizes:
            cp = _checkpoint(spark, base, keys)
            for n in (2, 6):
                stored = plan_partitions(Checkpoint.open(str(cp)), n).total_bytes
                copy = base / f"cp-{keys}-to{n}"
                shutil.copytree(cp, copy)
                start = time.perf_counter()
                spark._streamingCheckpointManager.repartition(str(copy), n)
                seconds = time.perf_counter() - start
                runs.append((stored, seconds))
                print(
                    f"| {keys:,} | 3 → {n} | {stored / 1e6:.2f} MB | {seconds:.2f} s | "
                    f"load {os.getloadavg()[0]:.1f} |",
                    flush=True,
                )
    finally:
        spark.stop()
        shutil.rmtree(base, ignore_errors=True)
    overhead, throughput = _fit(runs)
    print(
        f"fit: overhead {overhead:.2f} s, throughput {throughput / 1e6:.2f} MB/s "
        f"(stored key+value bytes); load after {os.getloadavg()}"
    )


if __name__ == "__main__":
    main()
