"""`stateglass collect` on real checkpoints: full collect, key counting, memory, incremental.

Usage::

    .venv/bin/python benchmarks/bench_collect.py [--runs 3] [--partitions 200] [--batches 110]

1. Writes (once, cached under benchmarks/out/) a checkpoint with PySpark: a streaming count
   per key over a JSON file source, ``--partitions`` shuffle partitions (HDFS provider), one
   file per micro-batch (``maxFilesPerTrigger=1``, ``availableNow``), ``--batches`` batches.
2. Full collect: a fresh database, ``stateglass collect`` in-process on a copy of it, timed.
   Spark: a process that counts the rows of the same store at the last batch with
   ``spark.read.format("statestore")`` (start-up included, and the count alone).
3. Key counting: :func:`collectors.scan.chains.compute_chain` over every partition of the 1M-key
   checkpoint of ``bench_state_read.py`` (written if missing); records/s = delta records
   applied / seconds. Spark: counting the same store's rows.
4. Memory per live key: a child process rebuilds the largest partition's chain; (peak RSS −
   RSS before) / keys that partition holds.
5. Incremental: after the full collect, Spark commits one more batch (one more file, the same
   query restarted with ``availableNow``), then ``stateglass collect`` runs again, timed (as
   a whole process too, with Python start-up).
6. ``--only jobs`` (issue 14): ``stateglass collect --jobs 1`` against ``--jobs N`` as whole
   processes, alternating, each into a fresh database, on a store PySpark writes once into
   ``--workdir`` (never into the repository): ``--jobs-keys`` keys (2M) over
   ``--jobs-partitions`` partitions (16) in ``--jobs-batches`` versions (16; each batch adds
   new keys and updates every key of the previous batch); ``--jobs-provider rocksdb-cl``
   writes it with RocksDB and changelog checkpointing. Every table of the two databases
   must be identical; the load average is printed before each run. ``--checkpoint PATH``
   times an existing checkpoint instead (read only: the databases go to a temporary
   directory), e.g. the 10M-key store of ``bench_scale.py``; ``--no-warmup`` skips the
   first, untimed pair of runs on a store too big to run four times.
The figures go to stdout as Markdown, ready for docs/benchmarks.md.

Example (issue 14)::

    .venv/bin/python benchmarks/bench_collect.py --only jobs --workdir /work/bench-data/collect
    .venv/bin/python benchmarks/bench_collect.py --only jobs --runs 1 --no-warmup \
        --checkpoint /work/bench-data/scale/hdfs/checkpoint
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
PY = sys.executable
ROWS_PER_FILE = 5000
KEY_SPACE = 200_000

sys.path.insert(0, ROOT)

RUN_QUERY = r"""
import sys, time
from pyspark.sql import SparkSession, functions as F
src, cp, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(partitions))
         .config("spark.driver.memory", "2g").config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
stream = (spark.readStream.schema("k STRING, v LONG").option("maxFilesPerTrigger", 1)
          .json(src))
q = (stream.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
     .writeStream.format("noop").outputMode("update").option("checkpointLocation", cp)
     .trigger(availableNow=True).start())
q.awaitTermination()
spark.stop()
"""

SPARK_COUNT = r"""
import sys, time
from pyspark.sql import SparkSession
cp = sys.argv[1]
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.driver.memory", "2g").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
best = None
for _ in range(3):
    start = time.perf_counter()
    n = spark.read.format("statestore").load(cp).count()
    took = time.perf_counter() - start
    best = took if best is None else min(best, took)
print(n, best)
spark.stop()
"""

CHAIN_MEMORY = r"""
import resource, sys
sys.path.insert(0, sys.argv[1])
from stateglass.collectors.scan.chains import ChainTask, compute_chain
from stateglass.collectors.stores import StoreContext, open_store
from stateglass.collectors.fs import LOCAL
cp, partition = sys.argv[2], int(sys.argv[3])
store_dir = f"{cp}/state/0/{partition}"
open_store(StoreContext(LOCAL, store_dir), "hdfs").versions()
def rss_kib():
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
before = rss_kib()
# VmHWM is the peak so far; reset it so it measures the chain alone (Linux >= 4.0).
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")
result = compute_chain(ChainTask(cp, 0, "default", partition, store_dir, "hdfs"))
with open("/proc/self/status") as fh:
    peak = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
print(before, peak, max(v.num_keys for v in result.versions))
"""


WRITE_JOBS_STORE = r"""
import os, sys, shutil
from pyspark.sql import SparkSession, functions as F
keys, cp, src, partitions, batches, provider = (
    int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
b = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
     .config("spark.ui.showConsoleProgress", "false")
     .config("spark.sql.shuffle.partitions", str(partitions))
     .config("spark.driver.memory", "3g").config("spark.sql.session.timeZone", "UTC"))
if provider == "rocksdb-cl":
    b = (b.config("spark.sql.streaming.stateStore.providerClass",
                  "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
         .config("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled", "true"))
spark = b.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
step = keys // batches
for i in range(batches):
    # New keys of this batch, plus the previous batch's keys again (updates).
    lo = max(0, (i - 1) * step)
    spark.range(lo, (i + 1) * step).select(
        F.format_string("key-%08d", "id").alias("k"), (F.col("id") % 97).alias("v")
    ).coalesce(1).write.mode("overwrite").parquet(os.path.join(src, f"batch{i:03d}"))
schema = spark.read.parquet(os.path.join(src, "batch000")).schema
stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
          .parquet(os.path.join(src, "*")))
q = (stream.groupBy("k").agg(F.count("*").alias("n"), F.sum("v").alias("total"))
     .writeStream.format("noop").outputMode("update").option("checkpointLocation", cp)
     .trigger(availableNow=True).start())
q.awaitTermination()
spark.stop()
"""


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if "model name" in line)
    except (OSError, StopIteration):
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def write_source_file(src: str, index: int, name: str | None = None) -> str:
    rnd = random.Random(index)
    path = os.path.join(src, name or f"part-{index:05d}.json")
    with open(path + ".tmp", "w") as fh:
        for _ in range(ROWS_PER_FILE):
            key = rnd.randrange(KEY_SPACE)
            fh.write(json.dumps({"k": f"key-{key:07d}", "v": key % 97}) + "\n")
    os.rename(path + ".tmp", path)
    return path


def run_query(src: str, cp: str, partitions: int) -> float:
    start = time.perf_counter()
    subprocess.run([PY, "-c", RUN_QUERY, src, cp, str(partitions)], check=True)
    return time.perf_counter() - start


def ensure_checkpoint(partitions: int, batches: int) -> tuple[str, str]:
    """The cached checkpoint and its source directory (written once with PySpark)."""
    base = os.path.join(OUT, f"collect-{partitions}x{batches}")
    cp, src = os.path.join(base, "checkpoint"), os.path.join(base, "src")
    done = os.path.join(base, "written")
    if os.path.isfile(done):
        return cp, src
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(src)
    for i in range(batches):
        write_source_file(src, i)
    print(f"writing {cp}: {partitions} partitions, {batches} batches …", flush=True)
    took = run_query(src, cp, partitions)
    print(f"  written in {took:.0f} s", flush=True)
    with open(done, "w") as fh:
        fh.write(f"{took:.0f} s\n")
    return cp, src


def collect(cp: str, db_path: str) -> tuple[float, Any]:
    from stateglass.app.collecting import new_scanner

    start = time.perf_counter()
    summary = new_scanner(db_path).scan(cp)
    return time.perf_counter() - start, summary


def spark_count(cp: str) -> tuple[int, float, float]:
    """Rows Spark's reader returns at the last batch, best in-session seconds, process wall."""
    start = time.perf_counter()
    out = subprocess.run(
        [PY, "-c", SPARK_COUNT, cp], check=True, capture_output=True, text=True
    ).stdout.split()
    return int(out[0]), float(out[1]), time.perf_counter() - start


def bench_full(cp: str, runs: int) -> dict[str, Any]:
    from stateglass.collectors.db.read import read_query

    walls, summary, db_path, tmp = [], None, "", ""
    for _ in range(runs):
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
        tmp = tempfile.mkdtemp(prefix="sg-bench-db-")
        db_path = os.path.join(tmp, "sg.duckdb")
        wall, summary = collect(cp, db_path)
        walls.append(wall)
    assert summary is not None
    (keys,) = read_query(
        db_path,
        "SELECT sum(num_keys) FROM state_versions s WHERE version = "
        "(SELECT max(version) FROM state_versions t WHERE t.partition_id = s.partition_id)",
    )[0]
    n_files = read_query(db_path, "SELECT count(*) FROM state_files")[0][0]
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "walls": walls,
        "versions": summary.versions,
        "chains": summary.chains,
        "files": n_files,
        "keys": keys,
    }


def bench_chain(cp: str, runs: int) -> dict[str, Any]:
    from stateglass.collectors.scan.chains import ChainTask, compute_chain

    parts = sorted(int(p) for p in os.listdir(os.path.join(cp, "state", "0")) if p.isdigit())
    tasks = [
        ChainTask(cp, 0, "default", p, os.path.join(cp, "state", "0", str(p)), "hdfs")
        for p in parts
    ]
    walls, records, keys = [], 0, 0
    for _ in range(runs):
        start = time.perf_counter()
        results = [compute_chain(t) for t in tasks]
        walls.append(time.perf_counter() - start)
        records = sum(
            (v.keys_added or 0) + (v.keys_updated or 0) + (v.keys_removed or 0)
            for r in results
            for v in r.versions
        )
        keys = sum(r.versions[-1].num_keys for r in results)
    return {"walls": walls, "records": records, "keys": keys, "partitions": len(parts)}


def bench_memory(cp: str) -> dict[str, Any]:
    sizes = {
        p: sum(
            os.path.getsize(os.path.join(cp, "state", "0", p, f))
            for f in os.listdir(os.path.join(cp, "state", "0", p))
            if f.endswith((".delta", ".snapshot"))
        )
        for p in os.listdir(os.path.join(cp, "state", "0"))
        if p.isdigit()
    }
    largest = max(sizes, key=lambda p: sizes[p])
    out = subprocess.run(
        [PY, "-c", CHAIN_MEMORY, ROOT, cp, largest], check=True, capture_output=True, text=True
    ).stdout.split()
    before, peak, keys = (int(x) for x in out)
    return {"before_kib": before, "peak_kib": peak, "keys": keys}


def bench_incremental(cp: str, src: str, partitions: int, runs: int) -> dict[str, Any]:
    walls, process_walls, versions = [], [], 0
    stateglass = shutil.which("stateglass", path=os.path.dirname(PY)) or "stateglass"
    for run in range(runs):
        tmp = tempfile.mkdtemp(prefix="sg-bench-inc-")
        work = os.path.join(tmp, "checkpoint")
        # copytree keeps mtimes; the copy's source log names the files of src, so only the
        # extra file below is new to it.
        shutil.copytree(cp, work)
        db_path = os.path.join(tmp, "sg.duckdb")
        collect(work, db_path)
        extra = write_source_file(src, 10_000 + run, f"part-extra-{run}.json")
        try:
            run_query(src, work, partitions)
        finally:
            os.remove(extra)
        process_db = os.path.join(tmp, "process.duckdb")
        shutil.copy(db_path, process_db)
        wall, summary = collect(work, db_path)
        walls.append(wall)
        versions = summary.versions
        start = time.perf_counter()
        subprocess.run(
            [stateglass, "collect", work, "--db", process_db],
            check=True,
            capture_output=True,
        )
        process_walls.append(time.perf_counter() - start)
        shutil.rmtree(tmp, ignore_errors=True)
    return {"walls": walls, "process_walls": process_walls, "versions": versions}


def ensure_jobs_store(
    workdir: str, keys: int, partitions: int, batches: int, provider: str = "hdfs"
) -> str:
    """The checkpoint of the ``--jobs`` comparison, written once by PySpark under ``workdir``."""
    base = os.path.join(os.path.abspath(workdir), f"{provider}-{keys}-{partitions}x{batches}")
    if os.path.commonpath([base, ROOT]) == ROOT:
        raise SystemExit(f"--workdir {workdir} is inside the repository: give one outside it")
    cp, src, done = (os.path.join(base, n) for n in ("checkpoint", "src", "written"))
    if os.path.isfile(done):
        return cp
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    print(f"writing {cp}: {keys} keys, {partitions} partitions, {batches} batches …", flush=True)
    start = time.perf_counter()
    args = [str(keys), cp, src, str(partitions), str(batches), provider]
    subprocess.run([PY, "-c", WRITE_JOBS_STORE, *args], check=True)
    shutil.rmtree(src, ignore_errors=True)
    with open(done, "w") as fh:
        fh.write(f"{time.perf_counter() - start:.0f} s\n")
    return cp


def load_average() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def all_tables(db_path: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every table of the database, every row, ordered; the columns a clock fills left out."""
    from stateglass.collectors.db.read import read_query

    clock = {"first_seen", "last_scan", "seen_at", "last_seen", "purged_at"}
    out = {}
    for (name,) in read_query(
        db_path,
        "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
        "ORDER BY table_name",
    ):
        cols = [r[0] for r in read_query(db_path, f"DESCRIBE {name}") if r[0] not in clock]
        rows = read_query(db_path, f"SELECT {', '.join(cols)} FROM {name}")
        out[name] = sorted(rows, key=repr)
    return out


def bench_jobs(cp: str, jobs: int, runs: int, warmup: bool = True) -> dict[str, Any]:
    """``stateglass collect --jobs 1`` and ``--jobs N`` as processes, alternating."""
    stateglass = shutil.which("stateglass", path=os.path.dirname(PY)) or "stateglass"
    walls: dict[int, list[float]] = {1: [], jobs: []}
    cpus: dict[int, list[float]] = {1: [], jobs: []}
    # Bytecode cached (outside the repository), as an installed package has it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    loads: list[str] = []
    tables: dict[int, dict[str, list[tuple[Any, ...]]]] = {}
    tmp = tempfile.mkdtemp(prefix="sg-bench-jobs-")
    # Never beside the checkpoint: it may be someone else's (--checkpoint), read only.
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "sg-bench-pycache")
    try:
        if not warmup:
            # The bytecode at least: compiling it would be counted in the first run.
            subprocess.run([stateglass, "--help"], stdout=subprocess.DEVNULL, env=env, check=True)
        for run in range(0 if warmup else 1, runs + 1):  # run 0 warms the caches
            for n in (1, jobs):
                db_path = os.path.join(tmp, f"jobs{n}-{run}.duckdb")
                time.sleep(2)  # let the previous run's processes go
                load = load_average()
                start = time.perf_counter()
                proc = subprocess.Popen(
                    [stateglass, "collect", cp, "--db", db_path, "--jobs", str(n)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env=env,
                )
                # The process's rusage includes the workers it waited for: CPU of the tree.
                _, status, usage = os.wait4(proc.pid, 0)
                wall = time.perf_counter() - start
                if status != 0:
                    raise SystemExit(f"stateglass collect --jobs {n} failed ({status})")
                if run:
                    cpu_s = usage.ru_utime + usage.ru_stime
                    walls[n].append(wall)
                    cpus[n].append(cpu_s)
                    loads.append(load)
                    print(
                        f"run {run}: --jobs {n}: {wall:.2f} s wall, {cpu_s:.2f} s CPU "
                        f"(load before {load})",
                        flush=True,
                    )
                tables[n] = all_tables(db_path)
                os.remove(db_path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    versions = len(tables[1]["state_versions"])
    return {
        "walls": walls,
        "cpus": cpus,
        "loads": loads,
        "identical": tables[1] == tables[jobs],
        "tables": len(tables[1]),
        "rows": sum(len(r) for r in tables[1].values()),
        "versions": versions,
    }


def fmt(walls: list[float]) -> str:
    return f"best {min(walls):.2f} s (median {statistics.median(walls):.2f}; runs " + (
        ", ".join(f"{w:.2f}" for w in walls) + ")"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument("--batches", type=int, default=110)
    ap.add_argument(
        "--only", choices=("full", "chain", "memory", "incremental", "jobs"), default=None
    )
    ap.add_argument("--workdir", default=None, help="--only jobs: where PySpark writes its store")
    ap.add_argument(
        "--checkpoint",
        default=None,
        help="--only jobs: time this existing checkpoint (read only) instead of writing one",
    )
    ap.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="--only jobs: no untimed first pair of runs (big stores)",
    )
    ap.add_argument("--jobs", type=int, default=2, help="--only jobs: compared with --jobs 1")
    ap.add_argument("--jobs-keys", type=int, default=2_000_000)
    ap.add_argument("--jobs-partitions", type=int, default=16)
    ap.add_argument("--jobs-batches", type=int, default=16)
    ap.add_argument("--jobs-provider", choices=("hdfs", "rocksdb-cl"), default="hdfs")
    args = ap.parse_args()
    if args.only == "jobs":
        main_jobs(args)
        return
    os.makedirs(OUT, exist_ok=True)
    cp = src = ""
    if args.only in (None, "full", "incremental"):
        cp, src = ensure_checkpoint(args.partitions, args.batches)
    big = os.path.join(OUT, "agg-hdfs-1000000")
    if not os.path.isdir(os.path.join(big, "commits")):
        subprocess.run([PY, os.path.join(HERE, "bench_state_read.py"), "--runs", "0"], check=True)
    print(f"\ndate {dt.date.today()}, machine: {machine()}\n")

    if args.only in (None, "full"):
        full = bench_full(cp, args.runs)
        rows, spark_s, spark_wall = spark_count(cp)
        print(
            f"full collect of {cp}: {full['chains']} partitions, {full['versions']} state "
            f"versions, {full['files']} state files: {fmt(full['walls'])}; "
            f"{full['versions'] / min(full['walls']):.0f} versions/s. Keys at the last "
            f"version: ours {full['keys']}, Spark's reader {rows} (one version: "
            f"{spark_s:.2f} s in session, {spark_wall:.1f} s as a process)"
        )
    if args.only in (None, "chain"):
        chain = bench_chain(big, args.runs)
        rows, spark_s, spark_wall = spark_count(big)
        best = min(chain["walls"])
        print(
            f"key counting, {big}: {chain['partitions']} partitions, {chain['records']} delta "
            f"records, {chain['keys']} keys (Spark: {rows}): {fmt(chain['walls'])}; "
            f"{chain['records'] / best / 1e6:.2f} M records/s. Spark counting the same "
            f"store: {spark_s:.2f} s in session ({rows / spark_s / 1e6:.2f} M rows/s), "
            f"{spark_wall:.1f} s as a process"
        )
    if args.only in (None, "memory"):
        mem = bench_memory(big)
        delta = mem["peak_kib"] - mem["before_kib"]
        print(
            f"memory: largest partition of {big}, {mem['keys']} live keys: RSS "
            f"{mem['before_kib'] / 1024:.0f} MiB before, peak {mem['peak_kib'] / 1024:.0f} MiB; "
            f"{delta * 1024 / mem['keys']:.0f} bytes per key"
        )
    if args.only in (None, "incremental"):
        inc = bench_incremental(cp, src, args.partitions, args.runs)
        print(
            f"incremental collect of one new batch ({inc['versions']} new versions): "
            f"in-process {fmt(inc['walls'])}; `stateglass collect` process "
            f"{fmt(inc['process_walls'])}"
        )


def chain_cpu(cp: str) -> tuple[float, float]:
    """CPU seconds of counting every chain (the part that workers share) and of the whole scan
    (no interpreter start-up), in this process with ``--jobs 1``."""
    from stateglass.app.collecting import new_scanner
    from stateglass.collectors.checkpoints.checkpoint import Checkpoint

    class Timed:
        name = "timed"
        cpu = 0.0

        def run(self, tasks: Any, fs: Any) -> Any:
            from stateglass.collectors.scan.chains import compute_chain

            for task in tasks:
                start = time.process_time()
                result = compute_chain(task, fs)
                Timed.cpu += time.process_time() - start
                yield result

    tmp = tempfile.mkdtemp(prefix="sg-bench-cpu-")
    Timed.cpu = 0.0
    try:
        start = time.process_time()
        new_scanner(os.path.join(tmp, "sg.duckdb"), engine=Timed()).scan(Checkpoint.open(cp).root)
        scan = time.process_time() - start
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return Timed.cpu, scan


def main_jobs(args: argparse.Namespace) -> None:
    if args.checkpoint:
        cp = os.path.abspath(args.checkpoint)
        if not os.path.isdir(os.path.join(cp, "commits")):
            raise SystemExit(f"--checkpoint {cp}: not a checkpoint (no commits/)")
    elif not args.workdir:
        raise SystemExit("--only jobs needs --workdir DIR (outside the repository) or --checkpoint")
    else:
        cp = ensure_jobs_store(
            args.workdir,
            args.jobs_keys,
            args.jobs_partitions,
            args.jobs_batches,
            args.jobs_provider,
        )
    print(f"\ndate {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, machine: {machine()}\n")
    res = bench_jobs(cp, args.jobs, args.runs, args.warmup)
    one, many = res["walls"][1], res["walls"][args.jobs]
    # On a loaded machine the walls say little: CPU seconds give what an idle one would do.
    parallel, scan = min(chain_cpu(cp) for _ in range(max(1, args.runs)))
    total = statistics.median(res["cpus"][1])
    bound = total / (total - parallel + parallel / args.jobs)
    scan_bound = scan / (scan - parallel + parallel / args.jobs)
    store = (
        "an existing checkpoint"
        if args.checkpoint
        else f"{args.jobs_provider}, {args.jobs_keys} keys, {args.jobs_partitions} partitions"
    )
    print(
        f"\ncollect of {cp} ({store}, "
        f"{res['versions']} state versions): --jobs 1 {fmt(one)}; --jobs {args.jobs} "
        f"{fmt(many)}; speed-up {min(one) / min(many):.2f}x best against best, "
        f"{statistics.median(one) / statistics.median(many):.2f}x median against median "
        f"(target 1.6x). CPU of the process tree, median: --jobs 1 "
        f"{statistics.median(res['cpus'][1]):.2f} s, --jobs {args.jobs} "
        f"{statistics.median(res['cpus'][args.jobs]):.2f} s. Counting the chains takes "
        f"{parallel:.2f} CPU s of the {total:.2f} s a --jobs 1 process uses: on {args.jobs} "
        f"idle cores --jobs {args.jobs} can be at most {bound:.2f}x faster (Amdahl); the scan "
        f"alone (in-process, {scan:.2f} CPU s, no interpreter start-up) at most "
        f"{scan_bound:.2f}x. Every "
        f"table identical ({res['tables']} tables, {res['rows']} rows): "
        f"{res['identical']}. Load averages before each run: {'; '.join(res['loads'])}"
    )
    if not res["identical"]:
        raise SystemExit("tables differ")


if __name__ == "__main__":
    main()
