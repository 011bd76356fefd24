"""Run by a Spark 3.5 interpreter (not by pytest): ``stateglass rewrite`` judged by Spark 3.5.

Usage::

    $SPARK35_PYTHON tests/rewrite/spark35_driver.py WORKDIR STATEGLASS [JVM_OPTIONS] > result.json

For each query (aggregation, dropDuplicates with a watermark, a stream-stream join) on each
provider (HDFS, RocksDB): the query runs two batches on SRC (2 partitions); SRC is copied to
REF; ``STATEGLASS rewrite SRC DST --partitions 3 --provider <the other one> --apply`` (our
code, in our interpreter) writes DST, copied to REWRITTEN; then the query restarts on DST and
on REF with three more batches of new input. Prints, per case, the sink outputs and where the
checkpoints are, as JSON; Spark 3.5 has no state reader, so the test reads their state with
Spark 4.3's. Only pyspark is imported: this interpreter has no StateGlass.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

PROVIDERS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}
SCHEMA = "k STRING, id BIGINT"
BATCHES_BEFORE, BATCHES_AFTER = 2, 3
MTIME = 1_700_000_000


def write_batches(source: Path, count: int) -> None:
    """Batch files ``0..count-1`` (kept ones unchanged), each a second newer than the last."""
    source.mkdir(parents=True, exist_ok=True)
    for b in range(count):
        path = source / f"{b:03d}.json"
        if path.exists():
            continue
        rows = [{"k": f"k{(b * 7 + i) % 17}", "id": b * 100 + i} for i in range(15)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (MTIME + b, MTIME + b))


def query(spark: Any, name: str, source: Path) -> tuple[Any, str]:
    from pyspark.sql import functions as F

    def read() -> Any:
        return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(source))

    if name == "aggregation":
        return read().groupBy("k").agg(F.sum("id").alias("s"), F.count("*").alias("c")), "update"
    if name == "dedup":
        events = read().withColumn("ts", F.timestamp_seconds(F.floor(F.col("id") / 4)))
        return events.withWatermark("ts", "30 seconds").dropDuplicates(["k", "ts"]), "append"
    left = read().select(F.col("k").alias("lk"), F.col("id").alias("lid"))
    right = (
        read().where(F.col("id") % 3 == 0).select(F.col("k").alias("rk"), F.col("id").alias("rid"))
    )
    return left.join(right, F.col("lk") == F.col("rk")), "append"


def run(spark: Any, name: str, source: Path, cp: Path) -> list[list[Any]]:
    """Run until the input is read; the sink's rows (batch id first), sorted."""
    out: list[list[Any]] = []

    def sink(frame: Any, batch_id: int) -> None:
        out.extend([batch_id, *map(str, row)] for row in frame.collect())

    frame, mode = query(spark, name, source)
    started = (
        frame.writeStream.outputMode(mode)
        .foreachBatch(sink)
        .option("checkpointLocation", str(cp))
        .trigger(availableNow=True)
        .start()
    )
    started.awaitTermination()
    return sorted(out)


def case(spark: Any, work: Path, stateglass: str, name: str, provider: str) -> dict[str, Any]:
    other = "rocksdb" if provider == "hdfs" else "hdfs"
    home = work / f"{name}-{provider}"
    source, src, ref, dst = (home / d for d in ("in", "src", "ref", "dst"))
    write_batches(source, BATCHES_BEFORE)
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", PROVIDERS[provider])
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    run(spark, name, source, src)
    shutil.copytree(src, ref)
    rewrite = [stateglass, "rewrite", str(src), str(dst), "--partitions", "3"]
    done = subprocess.run(
        [*rewrite, "--provider", other, "--apply"], capture_output=True, text=True
    )
    result: dict[str, Any] = {"rewrite": [done.returncode, done.stderr.strip()[-2000:]]}
    if done.returncode != 0:
        return result
    # Spark 3.5 has no state reader: the test reads these with Spark 4.3's.
    shutil.copytree(dst, home / "rewritten")
    write_batches(source, BATCHES_BEFORE + BATCHES_AFTER)
    result["ref_out"] = run(spark, name, source, ref)
    result["dst_out"] = run(spark, name, source, dst)
    result["home"] = str(home)
    return result


def main() -> None:
    from pyspark.sql import SparkSession

    work, stateglass = Path(sys.argv[1]), sys.argv[2]
    jvm_options = sys.argv[3] if len(sys.argv) > 3 else ""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("stateglass-rewrite-spark35")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", jvm_options)
        # As the suite's Spark 4.3 session (tests/conftest.py, SPARK_CONF): Hadoop's FileContext
        # forks a child process for most files it writes; this class is Spark 3.5's name for
        # the manager that writes the same files through Hadoop's FileSystem.
        .config(
            "spark.sql.streaming.checkpointFileManagerClass",
            "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
        )
        .config("spark.sql.codegen.wholeStage", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    results = {
        f"{name}-{provider}": case(spark, work, stateglass, name, provider)
        for name in ("aggregation", "dedup", "join")
        for provider in PROVIDERS
    }
    version = spark.version
    spark.stop()
    json.dump({"version": version, "cases": results}, sys.stdout)


if __name__ == "__main__":
    main()
