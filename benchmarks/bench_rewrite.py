"""``stateglass rewrite --apply`` against Spark's own offline repartition, same run.

Usage::

    .venv/bin/python benchmarks/bench_rewrite.py --cache /work/bench-data/rewrite
    .venv/bin/python benchmarks/bench_rewrite.py --cache /tmp/bench-rewrite --keys 1000000

A real PySpark 4.3 query (RocksDB provider, changelog checkpointing on, 64 shuffle
partitions) aggregates ``--keys`` distinct keys (``key-%08d``; ``groupBy(k).agg(count,
sum)``) in one batch from a parquet source. The checkpoint is kept under ``--cache`` and
reused by later runs with the same ``--keys`` and ``--from``. Then, alternating, each after
a settle pause:

* Spark: a fresh copy of the checkpoint, and ``spark._streamingCheckpointManager
  .repartition(copy, --to)`` timed in a warm session (the call returns when the repartition
  batch is committed; the session's start is not counted, which favours Spark);
* StateGlass: ``stateglass rewrite CP DST --partitions --to --apply`` as its own process,
  timed whole (interpreter start, plan, write, self-check, rename), with its peak RSS
  (``wait4``).

Prints a Markdown table ready for docs/benchmarks.md, with the load average at each run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
SETTLE_S = 5.0


def _session(partitions: int) -> Any:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("stateglass-bench-rewrite")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.streaming.stateStore.providerClass", ROCKSDB)
        .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true")
        .config("spark.log.level", "ERROR")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def cached_checkpoint(spark: Any, cache: Path, keys: int, partitions: int) -> Path:
    """The aggregation's checkpoint for ``keys`` keys over ``partitions``, written once."""
    from pyspark.sql import functions as F

    home = cache / f"agg-{keys}-keys-{partitions}-partitions"
    cp = home / "checkpoint"
    if (cp / "commits" / "0").exists():
        return cp
    shutil.rmtree(home, ignore_errors=True)
    source = home / "input"
    rows = spark.range(keys).select(
        F.format_string("key-%08d", F.col("id")).alias("k"), F.col("id").alias("v")
    )
    rows.repartition(8).write.parquet(str(source))
    started = time.perf_counter()
    query = (
        spark.readStream.schema("k STRING, v BIGINT")
        .parquet(str(source))
        .groupBy("k")
        .agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    print(f"# wrote {cp} in {time.perf_counter() - started:.0f} s", flush=True)
    return cp


def time_spark(spark: Any, cp: Path, work: Path, partitions: int) -> float:
    """Seconds of Spark's repartition of a fresh copy of ``cp``."""
    copy = work / "by-spark"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(cp, copy)
    time.sleep(SETTLE_S)
    started = time.perf_counter()
    spark._streamingCheckpointManager.repartition(str(copy), partitions)
    seconds = time.perf_counter() - started
    shutil.rmtree(copy, ignore_errors=True)
    return seconds


def time_stateglass(cp: Path, work: Path, partitions: int) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of ``stateglass rewrite --apply``."""
    dst = work / "by-stateglass"
    shutil.rmtree(dst, ignore_errors=True)
    stateglass = Path(sys.executable).with_name("stateglass")
    args = [str(stateglass), "rewrite", str(cp), str(dst), "--partitions", str(partitions)]
    time.sleep(SETTLE_S)
    started = time.perf_counter()
    proc = subprocess.Popen([*args, "--apply"], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"stateglass rewrite exited {proc.returncode}")
    shutil.rmtree(dst, ignore_errors=True)
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, required=True, help="where checkpoints are kept")
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--from", dest="before", type=int, default=64)
    parser.add_argument("--to", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    print(
        f"# {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, python {platform.python_version()}, "
        f"load before {os.getloadavg()}",
        flush=True,
    )
    spark = _session(args.before)
    work = Path(tempfile.mkdtemp(prefix="bench-rewrite-", dir=args.cache))
    try:
        cp = cached_checkpoint(spark, args.cache, args.keys, args.before)
        print(
            "| run | keys | partitions | Spark repartition | stateglass rewrite (CPU) | "
            "peak RSS | load |"
        )
        print("|---|---|---|---|---|---|---|")
        for run in range(1, args.rounds + 1):
            spark_s = time_spark(spark, cp, work, args.to)
            ours_s, cpu_s, rss = time_stateglass(cp, work, args.to)
            print(
                f"| {run} | {args.keys:,} | {args.before} → {args.to} | {spark_s:.1f} s | "
                f"{ours_s:.1f} s ({cpu_s:.1f} s) | {rss:.0f} MiB | "
                f"{os.getloadavg()[0]:.1f} |",
                flush=True,
            )
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"# load after {os.getloadavg()}")


if __name__ == "__main__":
    main()
