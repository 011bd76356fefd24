"""Run one real streaming query with Spark's event log on, for the progress tests and samples.

A windowed count with a watermark reads JSON files written here one batch at a time; later
batches carry rows older than the watermark, which Spark drops (``numRowsDroppedByWatermark``).
The query writes, under ``--out``:

* ``checkpoint/``: its checkpoint;
* ``eventlog/``: ``spark.eventLog.dir`` (rolling ``eventlog_v2_*`` or a single file, codec as
  asked; the defaults are Spark 4's: rolling, zstd);
* ``listener/``: what ``StateGlassListener`` wrote (``--listener``);
* ``recent_progress.json``: the query's own ``recentProgress``, as ``StreamingQueryProgress.json``
  dicts, the oracle the tests compare with.

Usage::

    python sample_checkpoints/progress_query.py --out /tmp/run --codec zstd --listener
    python sample_checkpoints/progress_query.py --out /tmp/run --codec none --single-file

Runs in its own process because event logging is a SparkContext setting.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

# (event-time second, key) rows per batch; the window is 10 s, the watermark delay 5 s.
BASE_EPOCH = 1_704_067_200  # 2024-01-01T00:00:00Z
BATCHES: list[list[tuple[int, str]]] = [
    [(0, "a"), (1, "b"), (3, "a"), (12, "c")],
    [(21, "a"), (22, "b"), (25, "c"), (31, "a")],
    # 2, 5 and 9 s are far behind the watermark (31 - 5 = 26 s): dropped as late.
    [(2, "a"), (5, "b"), (9, "c"), (41, "a"), (44, "b")],
    [(52, "a"), (55, "c"), (1, "b"), (61, "a"), (63, "b"), (64, "c")],
    [(71, "a"), (3, "a"), (75, "b")],
]


def write_batch(directory: Path, batch: int, rows: list[tuple[int, str]]) -> None:
    tmp = directory / f".batch-{batch:03d}.json.tmp"
    with tmp.open("w") as fh:
        for second, key in rows:
            ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(BASE_EPOCH + second))
            fh.write(json.dumps({"ts": ts, "key": key}) + "\n")
    tmp.rename(directory / f"batch-{batch:03d}.json")


def session(args: argparse.Namespace, eventlog: Path) -> Any:
    from pyspark.sql import SparkSession

    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",
        "spark.log.level": "ERROR",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": eventlog.as_uri(),
        "spark.eventLog.rolling.enabled": "false" if args.single_file else "true",
        "spark.eventLog.compress": "false" if args.codec == "none" else "true",
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
            if args.provider == "rocksdb"
            else "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        ),
    }
    if args.codec != "none":
        conf["spark.eventLog.compression.codec"] = args.codec
    if args.rolling_max_size:
        conf["spark.eventLog.rolling.maxFileSize"] = args.rolling_max_size
    builder = SparkSession.builder.master("local[2]").appName("stateglass-progress")
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run(args: argparse.Namespace) -> None:
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    inputs, eventlog = out / "input", out / "eventlog"
    for directory in (inputs, eventlog):
        directory.mkdir(parents=True)
    spark = session(args, eventlog)
    from pyspark.sql import functions as F

    if args.listener:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app" / "listener"))
        from stateglass_listener import StateGlassListener

        listener = StateGlassListener(str(out / "listener"))
        spark.streams.addListener(listener)
    counts = (
        spark.readStream.schema("ts TIMESTAMP, key STRING")
        .option("maxFilesPerTrigger", 1)
        .json(str(inputs))
        .withWatermark("ts", "5 seconds")
        .groupBy(F.window("ts", "10 seconds"), "key")
        .count()
    )
    query = (
        counts.writeStream.format("noop")
        .outputMode("append")
        .queryName("windowed_counts")
        .option("checkpointLocation", str(out / "checkpoint"))
        .start()
    )
    for batch, rows in enumerate(BATCHES[: args.batches]):
        write_batch(inputs, batch, rows)
        query.processAllAvailable()
    progress = [json.loads(p.json) for p in query.recentProgress]
    query.stop()
    if args.listener:
        # QueryStarted + every progress + QueryTerminated.
        listener.wait_written(len(progress) + 2)
        spark.streams.removeListener(listener)
        listener.close()
        if listener.dropped:
            raise SystemExit(f"listener dropped {listener.dropped}: {listener.last_error}")
    (out / "recent_progress.json").write_text(json.dumps(progress, indent=1))
    spark.stop()
    shutil.rmtree(inputs)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--codec", default="zstd", choices=["zstd", "lz4", "snappy", "lzf", "none"])
    parser.add_argument("--single-file", action="store_true", help="no rolling event log")
    parser.add_argument("--rolling-max-size", default="", help="spark.eventLog.rolling.maxFileSize")
    parser.add_argument("--provider", default="rocksdb", choices=["rocksdb", "hdfs"])
    parser.add_argument("--listener", action="store_true", help="attach StateGlassListener")
    parser.add_argument("--batches", type=int, default=len(BATCHES))
    return parser.parse_args(argv)


if __name__ == "__main__":
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    run(parse_args(sys.argv[1:]))
