"""Write checkpoints whose state Spark repartitioned offline (Spark 4.2+), with real queries.

Each scenario runs a stateful query for ``BATCHES_BEFORE`` batches with one
``spark.sql.shuffle.partitions``, stops it, calls
``spark._streamingCheckpointManager.repartition(checkpoint, n)`` (which writes one more batch
holding the state in ``n`` partitions), then runs the query again for ``BATCHES_AFTER`` batches.
Input is JSON files written one per batch (``maxFilesPerTrigger=1``, ``availableNow``), seeded.

The test suite imports :func:`write_scenario` and drives it with its shared session; run as a
script it writes the golden checkpoints with whatever PySpark the interpreter has::

    /tmp/ps42/bin/python sample_checkpoints/make_repartitioned.py   # -> spark-4.2/repart-*
    .venv/bin/python sample_checkpoints/make_repartitioned.py --tag spark-4.3 --only agg-up-cl
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

HERE = Path(__file__).resolve().parent
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
BATCHES_BEFORE = 3
BATCHES_AFTER = 2
BASE_EPOCH = 1_704_067_200  # 2024-01-01T00:00:00Z
# File sources read files in modification-time order; a second apart keeps batch N = file N.
FILE_MTIME = 1_700_000_000


@dataclass(frozen=True)
class Scenario:
    """One repartitioned checkpoint: which query, which provider, partitions before -> after."""

    name: str
    query: str  # agg | dedup | window | join | tws
    before: int
    after: int
    changelog: bool = True
    provider: str = ROCKSDB


SCENARIOS = {
    s.name: s
    for s in (
        Scenario("agg-up-cl", "agg", 3, 5),
        Scenario("agg-down", "agg", 4, 2, changelog=False),
        Scenario("dedup-down-cl", "dedup", 5, 3),
        Scenario("window-up", "window", 2, 4, changelog=False),
        Scenario("join-down-cl", "join", 4, 3),
        Scenario("tws-up-cl", "tws", 2, 3),
    )
}
# The golden set written with PySpark 4.2 (small: KBs each).
GOLDEN = ("agg-up-cl", "agg-down", "dedup-down-cl")


def _rows(batch: int, side: str = "") -> list[dict[str, Any]]:
    rng = random.Random(f"{side}{batch}")
    base = BASE_EPOCH + batch * 60
    return [
        {"k": f"k{rng.randrange(12)}", "v": rng.randrange(100), "ts": base + rng.randrange(60)}
        for _ in range(8)
    ]


def _write_input(src: Path, batch: int, side: str = "") -> None:
    src.mkdir(parents=True, exist_ok=True)
    path = src / f"{batch:03d}.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(batch, side)))
    os.utime(path, (FILE_MTIME + batch, FILE_MTIME + batch))


def _stream(spark: SparkSession, src: Path) -> DataFrame:
    from pyspark.sql import functions as F

    return (
        spark.readStream.schema("k STRING, v INT, ts LONG")
        .option("maxFilesPerTrigger", 1)
        .json(str(src))
        .withColumn("ts", F.col("ts").cast("timestamp"))
    )


def _query(spark: SparkSession, scenario: Scenario, inputs: Path) -> tuple[DataFrame, str]:
    """The streaming DataFrame of a scenario and its output mode."""
    from pyspark.sql import functions as F

    df = _stream(spark, inputs / "a")
    if scenario.query == "agg":
        return df.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total")), "update"
    if scenario.query == "dedup":
        return df.dropDuplicates(["k"]), "append"
    if scenario.query == "window":
        windowed = df.withWatermark("ts", "2 minutes").groupBy(F.window("ts", "1 minute"), "k")
        return windowed.count(), "update"
    if scenario.query == "join":
        right = (
            _stream(spark, inputs / "b").withColumnRenamed("v", "w").withColumnRenamed("ts", "t2")
        )
        return df.join(right, "k"), "append"
    if scenario.query == "tws":
        return _tws(df), "update"
    raise ValueError(f"unknown query {scenario.query!r}")


def _tws(df: DataFrame) -> DataFrame:
    """transformWithStateInPandas keeping a running count per key (a ValueState)."""
    import pandas as pd
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import LongType, StructField, StructType

    class Count(StatefulProcessor):
        def init(self, handle: Any) -> None:
            schema = StructType([StructField("n", LongType())])
            self.count = handle.getValueState("count", schema)

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            n = self.count.get()[0] if self.count.exists() else 0
            n += sum(len(batch) for batch in rows)
            self.count.update((n,))
            yield pd.DataFrame({"k": [key[0]], "n": [n]})

        def close(self) -> None:
            pass

    return df.groupBy("k").transformWithStateInPandas(
        statefulProcessor=Count(),
        outputStructType="k STRING, n LONG",
        outputMode="Update",
        timeMode="None",
    )


def _conf(spark: SparkSession, conf: dict[str, str]) -> dict[str, str | None]:
    old = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    return old


def _restore(spark: SparkSession, old: dict[str, str | None]) -> None:
    for k, v in old.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def _run(spark: SparkSession, scenario: Scenario, inputs: Path, checkpoint: Path) -> None:
    df, mode = _query(spark, scenario, inputs)
    query = (
        df.writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))


def _feed(scenario: Scenario, inputs: Path, batches: range) -> None:
    for batch in batches:
        _write_input(inputs / "a", batch)
        if scenario.query == "join":
            _write_input(inputs / "b", batch, side="b")


def write_scenario(
    spark: SparkSession,
    scenario: Scenario,
    checkpoint: Path,
    batches_before: int = BATCHES_BEFORE,
    batches_after: int = BATCHES_AFTER,
) -> Path:
    """Run, repartition and run again: batches ``0..batches_before-1``, the repartition
    batch, then ``batches_after`` more. Returns ``checkpoint``."""
    conf = {
        "spark.sql.streaming.stateStore.providerClass": scenario.provider,
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": str(
            scenario.changelog
        ).lower(),
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
        "spark.sql.shuffle.partitions": str(scenario.before),
    }
    if scenario.query == "tws":
        conf["spark.sql.streaming.stateStore.providerClass"] = ROCKSDB
    inputs = Path(tempfile.mkdtemp(prefix="repart-input-"))
    old = _conf(spark, conf)
    try:
        _feed(scenario, inputs, range(batches_before))
        _run(spark, scenario, inputs, checkpoint)
        manager = spark._streamingCheckpointManager  # type: ignore[attr-defined]
        manager.repartition(str(checkpoint), scenario.after)
        _feed(scenario, inputs, range(batches_before, batches_before + batches_after))
        _run(spark, scenario, inputs, checkpoint)
    finally:
        _restore(spark, old)
        shutil.rmtree(inputs, ignore_errors=True)
    return checkpoint


def _session() -> SparkSession:
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("stateglass-repartitioned-samples")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> int:
    import pyspark

    default_tag = "spark-" + ".".join(pyspark.__version__.split(".")[:2])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tag", default=default_tag)
    parser.add_argument("--only", nargs="*", default=list(GOLDEN), choices=sorted(SCENARIOS))
    parser.add_argument("--out", type=Path, default=HERE)
    args = parser.parse_args(argv)
    spark = _session()
    for name in args.only:
        target = args.out / args.tag / f"repart-{name}"
        shutil.rmtree(target, ignore_errors=True)
        write_scenario(spark, SCENARIOS[name], target)
        print(f"wrote {target}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
