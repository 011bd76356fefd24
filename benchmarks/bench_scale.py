"""Production scale: a 10M-key aggregation over 64 partitions and 21 versions, both providers.

Usage::

    .venv/bin/python benchmarks/bench_scale.py [--workdir /work/bench-data/scale]
        [--keys 10000000] [--partitions 64] [--batches 20] [--touch 0.01]
        [--provider hdfs --provider rocksdb] [--only state,spark,collect,browse,report]

1. Writes (once; a re-run finds it and only times) with PySpark, under ``--workdir`` (never
   the repository; default a fresh temporary directory): parquet sources, one file per
   micro-batch, and per provider the checkpoint of
   ``groupBy(k).agg(count, max(ts))`` read with ``maxFilesPerTrigger=1``: batch 0 inserts
   ``--keys`` keys, each later batch (``--batches`` in all) updates ``--touch`` of them (and
   adds a few new ones). The incremental ``collect`` has Spark commit one more batch.
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
     (``stateglass.app.browse.table.iter_page``), one key's history across every retained version
     (``stateglass.app.browse.key_history.key_history``), the diff of the last two versions
     (``stateglass.app.browse.diff.compute_diff``), each with an empty cache;
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
import resource
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

from bench_state_read import _tree_rss_kib, load_average  # noqa: E402

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
cp, out, batch = sys.argv[1], sys.argv[2], sys.argv[3]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.memory", "2g").config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
reader = spark.read.format("statestore")
if batch != "last":
    reader = reader.option("batchId", int(batch))
reader.load(cp).toJSON().saveAsTextFile(out)
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
    """The checkpoint of ``provider`` with ``--batches`` batches or more (written if missing)."""
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


CPU: dict[str, float] = {}  # command label -> CPU seconds of its last run (user + system)


def timed_tree(
    cmd: list[str], stdout_path: str | None = None, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of a whole process tree, sampled every 20 ms.

    The tree's CPU seconds (children reaped, so workers too) go to ``CPU[cmd[1]]``: on a
    loaded machine they say what the wall time would be on an idle one.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
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
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU["last"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, peak / 1024


def tree_line(label: str, wall: float, peak: float) -> str:
    return f"{label}: {wall:.1f} s (CPU {CPU['last']:.1f} s), peak RSS {peak:.0f} MiB"


def timed(fn: Callable[[], Any]) -> tuple[str, Any]:
    """``"wall s (CPU s)"`` of ``fn()`` in this process, and its result."""
    start, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return f"{time.perf_counter() - start:.2f} s (CPU {time.process_time() - cpu:.2f} s)", result


def same_rows_sorted(ours: str, spark_dir: str, scratch: str) -> tuple[bool, int, int]:
    """(identical, our rows, Spark's rows): both sorted by GNU sort (bounded memory), compared."""
    env = {**os.environ, "LC_ALL": "C"}
    a, b = os.path.join(scratch, "ours.sorted"), os.path.join(scratch, "spark.sorted")
    subprocess.run(["sort", "-S", "512M", "-T", scratch, "-o", a, ours], check=True, env=env)
    parts = sorted(glob.glob(os.path.join(spark_dir, "part-*")))
    with open(b, "w") as out:
        subprocess.run(
            ["sort", "-S", "512M", "-T", scratch, *parts], check=True, env=env, stdout=out
        )
    counts = []
    for path in (a, b):
        with open(path, "rb") as fh:
            counts.append(sum(1 for _ in fh))
    same = subprocess.run(["cmp", "-s", a, b]).returncode == 0
    for path in (a, b):
        os.remove(path)
    return same, counts[0], counts[1]


def breakdown(cp: str, scratch: str) -> dict[str, float]:
    """Seconds per phase of reading the last version as ``state`` does, in this process.

    HDFS: file read + decompression, then the chain merged and rendered in one compiled step
    (``state_chain_encoder``), write. RocksDB: restore and iteration (rocksdict), rendering
    with the version bytes skipped (``state_prefixed_blob_encoder``), write.
    """
    from stateglass.app.output import JsonLinesSink
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint
    from stateglass.collectors.checkpoints.state_reader import StateRequest, StateSource

    checkpoint = Checkpoint.open(cp)
    source = StateSource(checkpoint, StateRequest())
    codec = source.row_codec
    version = checkpoint.resolve_batch(None) + 1
    sink = JsonLinesSink(codec, "UTC", None)
    phases = dict.fromkeys(("read+decompress", "merge+render", "iterate", "render"), 0.0)
    phases["write"] = 0.0
    rows = 0
    with open(os.path.join(scratch, f"breakdown-{os.getpid()}.jsonl"), "wb") as out:
        for partition in source.partitions:
            t0 = time.perf_counter()
            files = source.chain_data(partition, version)
            if files is not None and sink.chain is not None:
                t1 = time.perf_counter()
                done = sink.chain(files[0], files[1], partition)
                assert done is not None, f"partition {partition}: a stream is not clean"
                text, n = done
                phases["read+decompress"] += t1 - t0
                phases["merge+render"] += time.perf_counter() - t1
            else:
                items = list(source.load(partition, version))
                t1 = time.perf_counter()
                text, n = sink.render_partition_blob(partition, items)
                phases["iterate"] += t1 - t0
                phases["render"] += time.perf_counter() - t1
            t2 = time.perf_counter()
            out.write(text)
            phases["write"] += time.perf_counter() - t2
            rows += n
    os.remove(os.path.join(scratch, f"breakdown-{os.getpid()}.jsonl"))
    phases["rows"] = rows
    return phases


def browse(cp: str) -> dict[str, Any]:
    """The Browse, Key history and Diff pages' functions, each with an empty cache."""
    from stateglass.app.browse import store
    from stateglass.app.browse.diff import _RECENT, compute_diff
    from stateglass.app.browse.key_history import find_key_json, key_history
    from stateglass.app.browse.table import PageRequest, iter_page
    from stateglass.collectors.checkpoints.state_views import SOURCES, StateView, versions

    def cold() -> None:
        store.CACHE.clear()
        SOURCES._sources.clear()
        _RECENT.clear()

    view = StateView(cp)
    out: dict[str, Any] = {}
    cold()
    out["versions (list)"], found = timed(lambda: versions(view))
    out["retained versions"] = f"{found[0]}..{found[-1]} ({len(found)})"
    cold()
    start, cpu = time.perf_counter(), time.process_time()
    for update in iter_page(PageRequest(view, found[-1], page_size=50)):
        if update.table is not None:
            out["first page (50 rows)"] = (
                f"{time.perf_counter() - start:.2f} s (CPU {time.process_time() - cpu:.2f} s)"
            )
            break
    cold()
    out["pasted key found (its partition, newest version)"], ref = timed(
        lambda: find_key_json(view, found, '{"k":"key-00000042"}')
    )
    cold()
    out[f"key history, {len(found)} versions"], table = timed(lambda: key_history(view, ref, found))
    out["history statuses"] = ",".join(sorted(set(table.column("status").to_pylist())))
    cold()
    out["diff of the last two versions"], result = timed(
        lambda: compute_diff(view, found[-2], found[-1])
    )
    out["diff counts"] = result.counts
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default=None, help="default: a new temporary directory")
    ap.add_argument("--keys", type=int, default=10_000_000)
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--batches", type=int, default=20, help="batches written before timing")
    ap.add_argument("--touch", type=float, default=0.01, help="share of keys each batch updates")
    ap.add_argument("--provider", action="append", choices=("hdfs", "rocksdb"))
    ap.add_argument("--only", default="state,breakdown,spark,collect,browse,report")
    ap.add_argument("--write-only", action="store_true", help="write the data, time nothing")
    ap.add_argument(
        "--batch-id", default="last", help="batch both readers read (while a query still runs)"
    )
    args = ap.parse_args()
    args.workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="sg-bench-scale-"))
    if os.path.commonpath([args.workdir, ROOT]) == ROOT:
        raise SystemExit(f"--workdir {args.workdir} is inside the repository: pick another")
    os.makedirs(args.workdir, exist_ok=True)
    only = set(args.only.split(","))
    stateglass = shutil.which("stateglass", path=os.path.dirname(PY)) or "stateglass"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(args.workdir, "pycache")
    print(
        f"date {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.machine()} "
        f"{os.cpu_count()} cores, python {platform.python_version()}, load {load_average()}"
    )
    for provider in args.provider or ["hdfs", "rocksdb"]:
        cp = write_data(args, provider)
        if args.write_only:
            continue
        scratch = os.path.join(args.workdir, provider, "out")
        os.makedirs(scratch, exist_ok=True)
        found = commits(cp)
        print(f"\n### {provider}: {cp}, batches {found[0]}..{found[-1]}", flush=True)
        ours = os.path.join(scratch, "ours.jsonl")
        if "state" in only or "spark" in only:
            pin = [] if args.batch_id == "last" else ["--batch-id", args.batch_id]
            timed_tree([stateglass, "state", cp, "--jobs", "1", *pin], None, env)  # warm-up
            print(f"load before state: {load_average()}", flush=True)
            wall, peak = timed_tree([stateglass, "state", cp, "-o", ours, *pin], None, env)
            with open(ours, "rb") as fh:
                rows = sum(1 for _ in fh)
            print(
                f"stateglass state (default --jobs): {wall:.1f} s (CPU {CPU['last']:.1f} s), "
                f"peak RSS {peak:.0f} MiB, "
                f"{rows:,} rows, {wall / rows * 1e6:.2f} µs/row",
                flush=True,
            )
            print(f"load before state --jobs 1: {load_average()}", flush=True)
            wall1, peak1 = timed_tree(
                [stateglass, "state", cp, "--jobs", "1", "-o", ours, *pin], None, env
            )
            print(
                f"stateglass state --jobs 1: {wall1:.1f} s (CPU {CPU['last']:.1f} s), "
                f"peak RSS {peak1:.0f} MiB",
                flush=True,
            )
        if "breakdown" in only:
            print(f"load before breakdown: {load_average()}", flush=True)
            phases = breakdown(cp, scratch)
            n = phases.pop("rows")
            total = sum(phases.values())
            print(
                f"breakdown (one process, {n:,} rows): "
                + ", ".join(
                    f"{k} {v:.1f} s ({v / n * 1e6:.2f} µs/row)" for k, v in phases.items() if v
                )
                + f"; total {total:.1f} s ({total / n * 1e6:.2f} µs/row)",
                flush=True,
            )
        if "spark" in only:
            spark_dir = os.path.join(scratch, "spark-json")
            shutil.rmtree(spark_dir, ignore_errors=True)
            time.sleep(5)
            print(f"load before Spark: {load_average()}", flush=True)
            wall_s, peak_s = timed_tree([PY, "-c", SPARK_WRITE_JSON, cp, spark_dir, args.batch_id])
            print(
                f"Spark toJSON().saveAsTextFile: {wall_s:.1f} s (CPU {CPU['last']:.1f} s), "
                f"peak RSS {peak_s:.0f} MiB"
            )
            same, ours_n, spark_n = same_rows_sorted(ours, spark_dir, scratch)
            print(
                f"rows identical (sorted): {same} ({ours_n:,} vs {spark_n:,}); speed-up "
                f"{wall_s / wall:.1f}x (default --jobs), {wall_s / wall1:.1f}x (--jobs 1)",
                flush=True,
            )
            shutil.rmtree(spark_dir, ignore_errors=True)
        if os.path.exists(ours):
            os.remove(ours)
        db = os.path.join(scratch, "scale.duckdb")
        if "collect" in only:
            for path in glob.glob(db + "*"):
                os.remove(path)
            print(f"load before collect: {load_average()}", flush=True)
            wall, peak = timed_tree([stateglass, "collect", cp, "--db", db], None, env)
            print(tree_line("collect (full, new database)", wall, peak))
            batch = add_batch(args, cp, provider)
            print(f"load before incremental collect: {load_average()}", flush=True)
            wall, peak = timed_tree([stateglass, "collect", cp, "--db", db], None, env)
            print(tree_line(f"collect (incremental, batch {batch})", wall, peak))
        if "browse" in only:
            print(f"load before Browse: {load_average()}", flush=True)
            import pandas  # noqa: F401  # the dashboard's server has it loaded already

            for label, value in browse(cp).items():
                print(f"{label}: {value}", flush=True)
        if "report" in only and os.path.exists(db):
            print(f"load before report: {load_average()}", flush=True)
            html = os.path.join(scratch, "report.html")
            wall, peak = timed_tree(
                [stateglass, "report", cp, "--db", db, "--no-collect", "-o", html], None, env
            )
            print(tree_line("report --no-collect (HTML)", wall, peak))
            wall, peak = timed_tree([stateglass, "report", cp, "--db", db, "-o", html], None, env)
            print(tree_line("report (collects first, nothing new)", wall, peak))
        print(f"load at the end: {load_average()}", flush=True)


if __name__ == "__main__":
    main()
