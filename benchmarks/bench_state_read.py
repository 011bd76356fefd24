"""`stateglass state` against Spark's State Data Source on a 1M-key aggregation checkpoint.

Usage::

    .venv/bin/python benchmarks/bench_state_read.py [--keys 1000000] [--runs 3] [--provider hdfs]

1. Writes (once, cached under benchmarks/out/) a checkpoint with PySpark: a streaming
   aggregation over ``--keys`` distinct keys, 4 shuffle partitions.
2. Times, as whole processes in the same run and alternating:
   * ``stateglass state CP --format jsonl > ours.jsonl``
   * a Python process that starts Spark and writes
     ``spark.read.format("statestore").load(CP).toJSON().collect()`` to ``spark.jsonl``.
3. Checks that both files hold the same rows, and reports wall time and peak RSS of each,
   best and median, with the load average before each run.
The figures go to stdout as a Markdown table, ready for docs/benchmarks.md.

Python bytecode: an installed package has its ``.pyc`` files, but a shell with
``PYTHONDONTWRITEBYTECODE=1`` and an editable install would recompile every StateGlass module
in every run (≈0.15 s). So the ``stateglass`` processes cache bytecode under
``benchmarks/out/pycache`` (``PYTHONPYCACHEPREFIX``, filled by one untimed warm-up run);
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
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
PY = sys.executable
SETTLE_S = 5.0

WRITE_CHECKPOINT = r"""
import os, sys, shutil, tempfile
from pyspark.sql import SparkSession, functions as F
keys, cp, provider = int(sys.argv[1]), sys.argv[2], sys.argv[3]
b = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
     .config("spark.sql.shuffle.partitions", "4").config("spark.driver.memory", "6g")
     .config("spark.sql.session.timeZone", "UTC"))
if provider == "rocksdb":
    b = b.config("spark.sql.streaming.stateStore.providerClass",
                 "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
spark = b.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
src = tempfile.mkdtemp(prefix="sg-bench-src-")
for i in range(2):
    spark.range(i * keys // 2, (i + 1) * keys // 2).select(
        F.format_string("key-%08d", "id").alias("k"), (F.col("id") % 97).alias("v")
    ).write.mode("overwrite").parquet(os.path.join(src, f"part{i}"))
schema = spark.read.parquet(os.path.join(src, "part0")).schema
shutil.rmtree(cp, ignore_errors=True)
stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
          .parquet(os.path.join(src, "*")))
q = (stream.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
     .writeStream.format("noop").outputMode("update").option("checkpointLocation", cp)
     .trigger(availableNow=True).start())
q.awaitTermination()
spark.stop()
shutil.rmtree(src, ignore_errors=True)
"""

SPARK_READ = r"""
import sys
from pyspark.sql import SparkSession
cp, out = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "6g").config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
rows = spark.read.format("statestore").load(cp).toJSON().collect()
with open(out, "w") as fh:
    for r in rows:
        fh.write(r)
        fh.write("\n")
spark.stop()
"""


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
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss_kib(proc.pid))
            time.sleep(0.05)
        wall = time.perf_counter() - start
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--provider", choices=("hdfs", "rocksdb"), default="hdfs")
    ap.add_argument(
        "--no-pycache",
        action="store_true",
        help="do not give stateglass a bytecode cache (see the module docstring)",
    )
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    cp = os.path.join(OUT, f"agg-{args.provider}-{args.keys}")
    if not os.path.isdir(os.path.join(cp, "commits")):
        print(f"writing checkpoint {cp} with PySpark …", flush=True)
        subprocess.run([PY, "-c", WRITE_CHECKPOINT, str(args.keys), cp, args.provider], check=True)
    stateglass = shutil.which("stateglass", path=os.path.dirname(PY)) or "stateglass"
    ours_out, spark_out = os.path.join(OUT, "ours.jsonl"), os.path.join(OUT, "spark.jsonl")
    ours_cmd = [stateglass, "state", cp, "--format", "jsonl"]
    ours_env = None
    if not args.no_pycache:
        ours_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        ours_env["PYTHONPYCACHEPREFIX"] = os.path.join(OUT, "pycache")
    if args.runs:
        timed(ours_cmd, ours_out, ours_env)  # warm-up: bytecode, page cache
    results: dict[str, list[tuple[float, float]]] = {"stateglass": [], "spark": []}
    loads: list[str] = []
    for i in range(args.runs):
        # Let the previous process finish tearing down (JVM exit, page-cache writeback) so
        # that neither reader is timed against the other's leftovers.
        time.sleep(SETTLE_S)
        loads.append(load_average())
        results["spark"].append(timed([PY, "-c", SPARK_READ, cp, spark_out]))
        time.sleep(SETTLE_S)
        loads.append(load_average())
        results["stateglass"].append(timed(ours_cmd, ours_out, ours_env))
        print(
            f"run {i + 1}: spark {results['spark'][-1][0]:.2f}s (load before {loads[-2]}), "
            f"stateglass {results['stateglass'][-1][0]:.2f}s (load before {loads[-1]})",
            flush=True,
        )
    if not args.runs:
        return
    identical = same_rows(ours_out, spark_out)
    best = {k: min(v) for k, v in results.items()}
    peak = {k: max(r for _, r in v) for k, v in results.items()}
    median = {k: statistics.median(w for w, _ in v) for k, v in results.items()}
    ratio = best["spark"][0] / best["stateglass"][0]
    median_ratio = median["spark"] / median["stateglass"]
    with open(ours_out) as fh:
        rows = sum(1 for _ in fh)
    print()
    print(
        f"date {dt.date.today()}, machine {platform.machine()} {os.cpu_count()} cores, "
        f"python {platform.python_version()}, {args.provider}, {rows} rows, rows identical: "
        f"{identical}, bytecode cache: {'no' if args.no_pycache else 'yes'}"
    )
    print("| reader | best wall (s) | median (s) | all runs (s) | peak RSS (MiB) |")
    print("|---|---|---|---|---|")
    for k in ("spark", "stateglass"):
        runs = ", ".join(f"{w:.2f}" for w, _ in results[k])
        print(f"| {k} | {best[k][0]:.2f} | {median[k]:.2f} | {runs} | {peak[k]:.0f} |")
    print(
        f"\nspeed-up: {ratio:.1f}x best against best, {median_ratio:.1f}x median against median "
        f"(target 15x); stateglass peak RSS {peak['stateglass']:.0f} MiB (target < 1024); "
        f"load averages before each run: {'; '.join(loads)}"
    )
    if not identical:
        raise SystemExit("rows differ")


if __name__ == "__main__":
    main()
