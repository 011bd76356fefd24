"""`stateglass state` against Spark's State Data Source on a 1M-key aggregation checkpoint.

Usage::

    .venv/bin/python benchmarks/bench_state_read.py [--keys 1000000] [--runs 3]
        [--provider hdfs|rocksdb]... [--schema counter|maxts|window|dedup|join|all]...
        [--workdir /work/bench-data] [--generate-only] [--format jsonl|parquet]

1. Writes (once, cached under ``--workdir``, outside the repository) a checkpoint per
   ``--schema`` case and provider with PySpark: ``--keys`` distinct keys (the join: at most
   100,000 a side), 4 shuffle partitions, two micro-batches (see SCHEMAS).
2. Times, as whole processes in the same run and alternating:
   * ``stateglass state CP --format jsonl > ours.jsonl``
   * a Python process that starts Spark and writes
     ``spark.read.format("statestore").load(CP).toJSON().collect()`` to ``spark.jsonl``
     (with ``storeName`` for each of a join's four stores, and ``--store`` for ours).
3. Checks that both files hold the same rows, and reports wall time and peak RSS of each,
   best and median, with the load average before each run. A join also gets a row of its
   four stores summed (run by run), the whole join as one figure.
The figures go to stdout as a Markdown table, ready for docs/benchmarks.md; each row is
also printed as soon as its case is done.

``--format parquet`` times ``stateglass state CP --format parquet -o ours.parquet`` against
Spark's ``….load(CP).write.parquet(dir)`` (timestamps as TIMESTAMP_MICROS, what ours
writes), and compares the rows of both files read back with pyarrow. Spark's Parquet writer
refuses ``void`` columns, so the dedup case (``value struct<__dummy__: void>``) has no Spark
side there.

Python bytecode: an installed package has its ``.pyc`` files, but a shell with
``PYTHONDONTWRITEBYTECODE=1`` and an editable install would recompile every StateGlass module
in every run (≈0.15 s). So the ``stateglass`` processes cache bytecode under
``WORKDIR/pycache`` (``PYTHONPYCACHEPREFIX``, filled by one untimed warm-up run);
``--no-pycache`` runs them with the environment as it is. pyspark's own modules come with
their ``.pyc`` from pip.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
SETTLE_S = 5.0

WRITE_CHECKPOINT = r"""
import os, sys, shutil, tempfile
from pyspark.sql import SparkSession, functions as F
keys, cp, provider, schema_name = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
partitions = sys.argv[5]
b = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
     .config("spark.sql.shuffle.partitions", partitions).config("spark.driver.memory", "6g")
     .config("spark.sql.session.timeZone", "UTC"))
if provider == "rocksdb":
    b = b.config("spark.sql.streaming.stateStore.providerClass",
                 "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
spark = b.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
src = tempfile.mkdtemp(prefix="sg-bench-src-")


def rows(lo, hi):
    # Millisecond timestamps over 30 days and doubles with long decimal expansions, so the
    # renderers meet real digits, not round numbers.
    return spark.range(lo, hi).select(
        F.format_string("key-%08d", "id").alias("k"),
        (F.col("id") % 97).alias("v"),
        F.timestamp_millis(F.lit(1_700_000_000_000) + (F.col("id") * 7919) % 2_592_000_000)
        .alias("ts"),
        (F.col("id") * 0.37 + F.col("id") % 7 / 3.0).alias("x"),
    )


def source(name):
    for i in range(2):
        rows(i * keys // 2, (i + 1) * keys // 2).write.mode("overwrite").parquet(
            os.path.join(src, name, f"part{i}"))
    schema = spark.read.parquet(os.path.join(src, name, "part0")).schema
    return (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
            .parquet(os.path.join(src, name, "*")))


shutil.rmtree(cp, ignore_errors=True)
stream = source("a")
if schema_name == "counter":
    out = stream.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
elif schema_name == "maxts":
    out = stream.groupBy("k").agg(F.count("*").alias("n"), F.max("ts").alias("last"))
elif schema_name == "window":
    out = stream.groupBy(F.window("ts", "1 hour"), "k").agg(
        F.count("*").alias("n"), F.avg("x").alias("mean"))
elif schema_name == "dedup":
    out = stream.dropDuplicates(["k", "ts"])
elif schema_name == "join":
    right = source("b").select(F.col("k").alias("rk"), F.col("ts").alias("rts"),
                               F.col("x").alias("rx"))
    out = stream.join(right, F.expr("k = rk"))
else:
    raise SystemExit(f"unknown schema {schema_name}")
mode = "append" if schema_name in ("dedup", "join") else "update"
q = (out.writeStream.format("noop").outputMode(mode).option("checkpointLocation", cp)
     .trigger(availableNow=True).start())
q.awaitTermination()
spark.stop()
shutil.rmtree(src, ignore_errors=True)
"""

SPARK_READ = r"""
import sys
from pyspark.sql import SparkSession
cp, out, store = sys.argv[1], sys.argv[2], sys.argv[3]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "6g").config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
reader = spark.read.format("statestore")
if store != "default":
    reader = reader.option("storeName", store)
rows = reader.load(cp).toJSON().collect()
with open(out, "w") as fh:
    for r in rows:
        fh.write(r)
        fh.write("\n")
spark.stop()
"""

SPARK_WRITE_PARQUET = r"""
import sys
from pyspark.sql import SparkSession
cp, out, store = sys.argv[1], sys.argv[2], sys.argv[3]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "6g").config("spark.sql.session.timeZone", "UTC")
         .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
reader = spark.read.format("statestore")
if store != "default":
    reader = reader.option("storeName", store)
reader.load(cp).write.mode("overwrite").parquet(out)
spark.stop()
"""

# --schema cases: what each stores, and the stores read (a join has four).
SCHEMAS = {
    "counter": "groupBy(k).agg(count, sum(v)): key struct<k:string>, value struct<bigint,bigint>",
    "maxts": "groupBy(k).agg(count, max(ts)): value struct<n:bigint,last:timestamp>",
    "window": "groupBy(window(ts, '1 hour'), k).agg(count, avg(x)): key "
    "struct<window:struct<start,end:timestamp>,k:string>, value with avg's double sum",
    "dedup": "dropDuplicates(k, ts): key struct<k:string,ts:timestamp>, value void",
    "join": "inner stream-stream join on k, no watermark: the four stores of both sides",
}
JOIN_STORES = (
    "left-keyToNumValues",
    "left-keyWithIndexToValue",
    "right-keyToNumValues",
    "right-keyWithIndexToValue",
)
# Keys per side of the join: Spark keeps every input row of both sides in two stores each,
# and writing (and reading back) 4 stores of 1M rows takes the 2-core machine several minutes
# per provider; 100,000 rows a side still gives 400,000 rows over the four stores.
JOIN_KEYS = 100_000


def _tree_rss_kib(root: int) -> int:
    """Summed RSS of ``root`` and all its descendants, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        rss[pid] = int(fields[21]) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def load_average() -> str:
    try:
        with open("/proc/loadavg") as fh:
            return " ".join(fh.read().split()[:3])
    except OSError:
        return "n/a"


def timed(
    cmd: list[str], stdout_path: str | None = None, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of a whole process tree (JVM included), sampled."""
    # stderr goes to a file: a pipe nobody reads while we poll could fill up and hang Spark.
    with (
        open(stdout_path or os.devnull, "w") as out,
        tempfile.TemporaryFile("w+") as err,
    ):
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        # The end is taken as the process ends, by a thread waiting for it: the sampling
        # loop's sleep would add up to its interval to every wall time (a tenth of a
        # half-second process).
        ended: list[float] = []
        done = threading.Event()

        def wait() -> None:
            proc.wait()
            ended.append(time.perf_counter())
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        peak = 0
        while not done.is_set():
            peak = max(peak, _tree_rss_kib(proc.pid))
            done.wait(0.05)
        wall = ended[0] - start
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd)} failed:\n{err.read()[-3000:]}")
    return wall, peak / 1024


def same_rows(a: str, b: str) -> bool:
    sys.path.insert(0, ROOT)
    from tests.e2e.oracle import multiset

    with open(a) as fa, open(b) as fb:
        la, lb = fa.read().splitlines(), fb.read().splitlines()
    if len(la) != len(lb):
        print(f"row counts differ: {len(la)} vs {len(lb)}")
        return False
    if sorted(la) == sorted(lb):
        return True
    return multiset(la) == multiset(lb)


def same_parquet_rows(a: str, b: str) -> bool:
    """Both Parquet outputs (a file, or Spark's directory of parts) hold the same rows."""
    import pyarrow.parquet as pq

    ta, tb = pq.read_table(a), pq.read_table(b)
    if ta.num_rows != tb.num_rows:
        print(f"row counts differ: {ta.num_rows} vs {tb.num_rows}")
        return False
    # Spark's parts come in any order, and its structs may repeat a field name (ours add
    # suffixes): compare the rows as sorted tuples of their leaf values, by position.
    return _leaf_rows(ta) == _leaf_rows(tb)


def _leaf_rows(table: object) -> list[str]:
    from tests.e2e.oracle import leaf_columns

    leaves = leaf_columns(table)
    return sorted(map(repr, zip(*(leaf.to_pylist() for leaf in leaves), strict=True)))


def checkpoint(workdir: str, schema: str, provider: str, keys: int, partitions: int = 4) -> str:
    """The cached checkpoint of one case, written with PySpark the first time."""
    n = min(keys, JOIN_KEYS) if schema == "join" else keys
    # The counter case keeps its old name, so an earlier cache is reused.
    name = f"agg-{provider}-{n}" if schema == "counter" else f"{schema}-{provider}-{n}"
    if partitions != 4:
        name += f"-p{partitions}"
    cp = os.path.join(workdir, name)
    if not os.path.isdir(os.path.join(cp, "commits")) or not os.listdir(
        os.path.join(cp, "commits")
    ):
        print(f"writing checkpoint {cp} with PySpark …", flush=True)
        subprocess.run(
            [PY, "-c", WRITE_CHECKPOINT, str(n), cp, provider, schema, str(partitions)],
            check=True,
            cwd=workdir,
        )
    return cp


def measure(
    cp: str, store: str, args: argparse.Namespace, label: str
) -> tuple[dict[str, list[tuple[float, float]]], list[str], bool, int]:
    """Time both readers on one store, alternating; check the rows are identical."""
    stateglass = shutil.which("stateglass", path=os.path.dirname(PY)) or "stateglass"
    ours_out = os.path.join(args.workdir, "ours.jsonl")
    spark_out = os.path.join(args.workdir, "spark.jsonl")
    ours_cmd = [stateglass, "state", cp, "--format", "jsonl", "--store", store]
    spark_script = SPARK_READ
    if args.format == "parquet":
        ours_out = os.path.join(args.workdir, "ours.parquet")
        spark_out = os.path.join(args.workdir, "spark.parquet")
        ours_cmd = [stateglass, "state", cp, "--format", "parquet", "--store", store]
        ours_cmd += ["-o", ours_out]
        spark_script = SPARK_WRITE_PARQUET
    ours_env = None
    if not args.no_pycache:
        ours_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        ours_env["PYTHONPYCACHEPREFIX"] = os.path.join(args.workdir, "pycache")
    stdout = None if args.format == "parquet" else ours_out
    timed(ours_cmd, stdout, ours_env)  # warm-up: bytecode, page cache
    results: dict[str, list[tuple[float, float]]] = {"stateglass": [], "spark": []}
    loads: list[str] = []
    for i in range(args.runs):
        # Let the previous process finish tearing down (JVM exit, page-cache writeback) so
        # that neither reader is timed against the other's leftovers.
        time.sleep(SETTLE_S)
        loads.append(load_average())
        results["spark"].append(timed([PY, "-c", spark_script, cp, spark_out, store]))
        time.sleep(SETTLE_S)
        loads.append(load_average())
        results["stateglass"].append(timed(ours_cmd, stdout, ours_env))
        print(
            f"{label} run {i + 1}: spark {results['spark'][-1][0]:.2f}s (load before "
            f"{loads[-2]}), stateglass {results['stateglass'][-1][0]:.2f}s (load before "
            f"{loads[-1]})",
            flush=True,
        )
    if args.format == "parquet":
        import pyarrow.parquet as pq

        identical = same_parquet_rows(ours_out, spark_out)
        return results, loads, identical, pq.read_metadata(ours_out).num_rows
    identical = same_rows(ours_out, spark_out)
    with open(ours_out) as fh:
        rows = sum(1 for _ in fh)
    return results, loads, identical, rows


def table_row(
    label: str,
    results: dict[str, list[tuple[float, float]]],
    loads: list[str],
    identical: bool,
    rows: int,
) -> str:
    """One Markdown row: best and median of both readers, peak RSS, rows identical, load."""
    best = {k: min(w for w, _ in v) for k, v in results.items()}
    median = {k: statistics.median(w for w, _ in v) for k, v in results.items()}
    peak = {k: max(r for _, r in v) for k, v in results.items()}
    runs = {k: ", ".join(f"{w:.2f}" for w, _ in v) for k, v in results.items()}
    return (
        f"| {label} | {rows:,} | {best['spark']:.2f} ({runs['spark']}) | "
        f"{best['stateglass']:.2f} ({runs['stateglass']}) | "
        f"**{best['spark'] / best['stateglass']:.1f}×** | "
        f"{median['spark'] / median['stateglass']:.1f}× | {peak['stateglass']:.0f} | "
        f"{'yes' if identical else 'NO'} | {loads[0]} … {loads[-1]} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--provider",
        choices=("hdfs", "rocksdb"),
        action="append",
        help="repeatable (default: hdfs)",
    )
    ap.add_argument(
        "--schema",
        choices=(*SCHEMAS, "all"),
        action="append",
        help="repeatable; all = every case (default: counter). "
        + "; ".join(f"{k}: {v}" for k, v in SCHEMAS.items()),
    )
    ap.add_argument(
        "--workdir",
        default=os.path.join(tempfile.gettempdir(), "stateglass-bench"),
        help="where checkpoints are written once and cached, and outputs go; keep it outside "
        "the repository (default: %(default)s)",
    )
    ap.add_argument(
        "--format",
        choices=("jsonl", "parquet"),
        default="jsonl",
        help="what both sides write (see the module docstring; default: %(default)s)",
    )
    ap.add_argument(
        "--generate-only", action="store_true", help="write the checkpoints, time nothing"
    )
    ap.add_argument(
        "--no-pycache",
        action="store_true",
        help="do not give stateglass a bytecode cache (see the module docstring)",
    )
    args = ap.parse_args()
    args.workdir = os.path.abspath(args.workdir)
    if os.path.commonpath([args.workdir, ROOT]) == ROOT:
        raise SystemExit(f"--workdir {args.workdir} is inside the repository; pick one outside")
    os.makedirs(args.workdir, exist_ok=True)
    schemas = args.schema or ["counter"]
    if "all" in schemas:
        schemas = list(SCHEMAS)
    providers = args.provider or ["hdfs"]
    cases = [(s, p, checkpoint(args.workdir, s, p, args.keys)) for p in providers for s in schemas]
    if args.generate_only or not args.runs:
        return
    summary: list[str] = []
    failed = False
    for schema, provider, cp in cases:
        stores = JOIN_STORES if schema == "join" else ("default",)
        per_store: list[tuple[dict[str, list[tuple[float, float]]], list[str], bool, int]] = []
        for store in stores:
            label = f"{schema}/{provider}" + (f"/{store}" if store != "default" else "")
            per_store.append(measure(cp, store, args, label))
            summary.append(table_row(label, *per_store[-1]))
            # Each row as soon as it is known: a long --schema all run that fails late (or
            # is stopped) still leaves the figures of the cases it finished.
            print(summary[-1], flush=True)
        if len(stores) > 1:
            # The whole join: run i of every store summed, as if one process read all four.
            total = {
                k: [
                    (sum(r[0][k][i][0] for r in per_store), max(r[0][k][i][1] for r in per_store))
                    for i in range(args.runs)
                ]
                for k in ("stateglass", "spark")
            }
            summary.append(
                table_row(
                    f"{schema}/{provider} (all {len(stores)} stores, summed)",
                    total,
                    [per_store[0][1][0], per_store[-1][1][-1]],
                    all(r[2] for r in per_store),
                    sum(r[3] for r in per_store),
                )
            )
            print(summary[-1], flush=True)
        failed |= not all(r[2] for r in per_store)
    print()
    print(
        f"date {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, machine "
        f"{platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}, "
        f"bytecode cache: {'no' if args.no_pycache else 'yes'}, runs {args.runs}, "
        f"format {args.format}, "
        f"load average now {load_average()}"
    )
    print(
        "| case | rows | Spark best (runs) s | stateglass best (runs) s | speed-up best | "
        "median | stateglass peak RSS MiB | rows identical | load before first … last |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(summary))
    if failed:
        raise SystemExit("rows differ")


if __name__ == "__main__":
    main()
