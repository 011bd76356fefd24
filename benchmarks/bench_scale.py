"""Production scale: a 10M-key aggregation over 64 partitions and 21 versions, both providers.

Usage::

    .venv/bin/python benchmarks/bench_scale.py [--workdir /work/bench-data/scale]
        [--keys 10000000] [--partitions 64] [--batches 20] [--touch 0.01]
        [--provider hdfs --provider rocksdb] [--only state,spark,collect,browse,report]

1. Writes (once; a re-run finds it and only times) with PySpark, under ``--workdir`` (never
   the repository; default a fresh temporary directory): parquet sources, one file per
   micro-batch, and per provider the checkpoint of
   ``groupBy(k).agg(count, max(ts))`` read with ``maxFilesPerTrigger=1``: batch 0 inserts
   ``--keys`` keys, each of the ``--batches`` later batches updates ``--touch`` of them (and
   adds a few new ones), so there are ``batches + 1`` versions. Before the last batch the
   query stops, so that the last batch can be the incremental ``collect``'s new batch.
2. Times, whole processes, in one run:
   * ``stateglass state CP --format jsonl > ours.jsonl``: wall time and peak RSS of the whole
     process tree (sampled from /proc), and the per-row breakdown of the same read in this
     process (decompression, record walk, rendering, write);
   * Spark writing the same JSON lines in parallel:
     ``spark.read.format("statestore").load(cp).toJSON().saveAsTextFile(dir)``; rows are
     compared (sorted) with ours;
   * ``stateglass collect`` into a fresh database (full), then Spark commits the last batch
     and ``collect`` runs again (incremental);
   * in one warm process, as the dashboard's server is: the Browse page's first page
     (``app.browse.table.iter_page``), one key's history across every retained version
     (``app.browse.history.key_history``), the diff of the last two versions
     (``app.browse.diff.compute_diff``), each with an empty cache;
   * ``stateglass report`` on the collected database.
The figures go to stdout as Markdown, with the machine, date and load averages, ready for
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
sys.path[:0] = [ROOT, HERE]

from bench_state_read import _tree_rss_kib, load_average, same_rows  # noqa: E402

RUN_QUERY = r"""
import os, sys
from pyspark.sql import SparkSession, functions as F
src, cp, partitions, provider = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
b = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
     .config("spark.ui.showConsoleProgress", "false")
     .config("spark.sql.shuffle.partitions", str(partitions))
     .config("spark.driver.memory", "6g").config("spark.sql.session.timeZone", "UTC")
     # One version of each partition's map in the JVM (10M keys twice would not fit).
     .config("spark.sql.streaming.maxBatchesToRetainInMemory", "1")
     .config("spark.sql.streaming.stateStore.maintenanceInterval", "20s"))
if provider == "rocksdb":
    b = b.config("spark.sql.streaming.stateStore.providerClass",
                 "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
spark = b.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
schema = spark.read.parquet(os.path.join(src, "batch000")).schema
stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
          .parquet(os.path.join(src, "*")))
q = (stream.groupBy("k").agg(F.count("*").alias("n"), F.max("ts").alias("last_ts"))
     .writeStream.format("noop").outputMode("update").option("checkpointLocation", cp)
     .trigger(availableNow=True).start())
q.awaitTermination()
spark.stop()
"""

SPARK_WRITE_JSON = r"""
import sys
from pyspark.sql import SparkSession
cp, out = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", "2g").config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.read.format("statestore").load(cp).toJSON().saveAsTextFile(out)
spark.stop()
"""


def write_source(src: str, batch: int, keys: int, touch: float) -> None:
    """``src/batchNNN/part.parquet``: batch 0 inserts ``keys`` keys, later ones a slice.

    A stride coprime with the key space spreads a batch's keys over every partition; the
    top 5% of the space lies beyond batch 0's keys, so later batches also add keys.
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = os.path.join(src, f"batch{batch:03d}")
    if os.path.isdir(out):
        return
    space = keys + keys // 20
    if batch == 0:
        ids = np.arange(keys, dtype=np.int64)
    else:
        ids = (np.arange(int(keys * touch), dtype=np.int64) * 37 + batch * 102_947) % space
    text = pa.array(ids).cast(pa.string())
    pad = pc.utf8_lpad(text, 8, "0")
    k = pc.binary_join_element_wise("key-", pad, "")
    base = 1_767_225_600_000_000 + batch * 3_600_000_000  # 2026-01-01 UTC + batch hours
    ts = pa.array(base + (ids % 3600) * 1_000_000, type=pa.timestamp("us", tz="UTC"))
    os.makedirs(out + ".tmp", exist_ok=True)
    pq.write_table(pa.table({"k": k, "ts": ts}), os.path.join(out + ".tmp", "part.parquet"))
    os.rename(out + ".tmp", out)


def run_checked(cmd: list[str], what: str) -> None:
    started = time.perf_counter()
    print(f"{what} …", flush=True)
    subprocess.run(cmd, check=True)
    print(f"{what}: {time.perf_counter() - started:.0f} s", flush=True)


def write_data(args: argparse.Namespace, provider: str) -> str:
    """The checkpoint of ``provider``, with at least ``--batches`` batches (written when missing)."""
    src = os.path.join(args.workdir, "src")
    cp = os.path.join(args.workdir, provider, "checkpoint")
    if os.path.isdir(os.path.join(cp, "commits")) and len(commits(cp)) >= args.batches:
        return cp
    started = time.perf_counter()
    for batch in range(args.batches):
        write_source(src, batch, args.keys, args.touch)
    print(f"sources: {time.perf_counter() - started:.0f} s", flush=True)
    run_checked(
        [PY, "-c", RUN_QUERY, src, cp, str(args.partitions), provider],
        f"running the {provider} query over batches 0..{args.batches - 1} into {cp}",
    )
    return cp


def commits(cp: str) -> list[int]:
    return sorted(int(n) for n in os.listdir(os.path.join(cp, "commits")) if n.isdigit())


def add_batch(args: argparse.Namespace, cp: str, provider: str) -> int:
    """Spark commits one more batch (the incremental collect's new one); its batch id."""
    batch = commits(cp)[-1] + 1
    src = os.path.join(args.workdir, "src")
    write_source(src, batch, args.keys, args.touch)
    run_checked(
        [PY, "-c", RUN_QUERY, src, cp, str(args.partitions), provider],
        f"{provider}: Spark commits batch {batch}",
    )
    return batch


def timed_tree(
    cmd: list[str], stdout_path: str | None = None, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of a whole process tree, sampled every 20 ms."""
    with open(stdout_path or os.devnull, "w") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss_kib(proc.pid))
            time.sleep(0.02)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd)} failed:\n{err.read()[-3000:]}")
    return wall, peak / 1024


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default=None, help="default: a new temporary directory")
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--batches", type=int, default=20, help="batches after the first")
    ap.add_argument("--touch", type=float, default=0.01, help="share of keys each batch updates")
    ap.add_argument("--provider", action="append", choices=("hdfs", "rocksdb"))
    ap.add_argument("--only", default="state,spark,collect,browse,report")
    ap.add_argument("--write-only", action="store_true", help="write the data, time nothing")
    args = ap.parse_args()
    args.workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="sg-bench-scale-"))
    if os.path.commonpath([args.workdir, ROOT]) == ROOT:
        raise SystemExit(f"--workdir {args.workdir} is inside the repository: pick another")
    os.makedirs(args.workdir, exist_ok=True)
    for provider in args.provider or ["hdfs", "rocksdb"]:
        cp = write_data(args, provider)
        if args.write_only:
            continue
        print(f"{provider}: {cp}, batches {commits(cp)[0]}..{commits(cp)[-1]}")


if __name__ == "__main__":
    main()
