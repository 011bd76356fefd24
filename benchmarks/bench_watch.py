"""`stateglass watch` on a 2,000-partition stream-stream join (4 stores: ~10,000 directories).

Usage::

    .venv/bin/python benchmarks/bench_watch.py [--partitions 2000] [--batches 2]
    .venv/bin/python benchmarks/bench_watch.py --checkpoint CP --attach   # a query already running

1. Writes (cached under benchmarks/out/) the source files of ``--batches`` batches and starts a
   PySpark inner join of two JSON file streams on ``k``, ``--partitions`` shuffle partitions,
   HDFS provider, one file per side per batch (``maxFilesPerTrigger=1``, ``availableNow``).
   With ``--attach`` the query is already running (started by an earlier run of this script or
   by hand with the same code) and nothing is started.
2. Once ``commits/0`` exists, starts ``stateglass watch`` (this branch: root, commits/ and
   offsets/ only) and, for comparison, a plain watchdog recursive observer on the checkpoint
   (what ``watch`` did before), each in its own process.
3. While Spark writes the later batches: CPU of both processes, second by second; for each
   commit, the time from ``commits/N``'s mtime to its row being readable in the database.
4. When the query has ended: idle CPU of both over ``--idle`` seconds, and their inotify
   watches.
The figures go to stdout as Markdown, ready for docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
PY = sys.executable
sys.path.insert(0, ROOT)

RUN_JOIN = r"""
import os, sys
from pyspark.sql import SparkSession, functions as F
src, cp, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", str(partitions))
         .config("spark.driver.memory", "2g").config("spark.sql.session.timeZone", "UTC")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
def side(name):
    return (spark.readStream.schema("k LONG, v LONG").option("maxFilesPerTrigger", 1)
            .json(os.path.join(src, name)))
l = side("left").select(F.col("k").alias("lk"), F.col("v").alias("lv"))
r = side("right").select(F.col("k").alias("rk"), F.col("v").alias("rv"))
q = (l.join(r, F.col("lk") == F.col("rk")).writeStream.format("noop")
     .option("checkpointLocation", cp).trigger(availableNow=True).start())
q.awaitTermination()
spark.stop()
"""

# What `watch` did before: one recursive watchdog observer on the whole checkpoint.
RECURSIVE = r"""
import sys, time
from watchdog.events import FileSystemEventHandler
from watchdog.observers import Observer
observer = Observer()
observer.schedule(FileSystemEventHandler(), sys.argv[1], recursive=True)
observer.start()
print("watching", flush=True)
while True:
    time.sleep(1)
"""


def machine() -> str:
    import platform

    cpu = platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if "model name" in line)
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Linux {platform.release()}"


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as fh:
        fields = fh.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def inotify_watches(pid: int) -> int:
    total = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as fh:
                total += sum(line.startswith("inotify wd:") for line in fh)
        except OSError:
            continue
    return total


def write_sources(src: str, batches: int, rows: int) -> None:
    for side in ("left", "right"):
        os.makedirs(os.path.join(src, side), exist_ok=True)
        for batch in range(batches):
            path = os.path.join(src, side, f"part-{batch:03d}.json")
            if os.path.exists(path):
                continue
            rng = random.Random(f"{side}-{batch}")
            with open(path + ".tmp", "w") as fh:
                for i in range(rows):
                    fh.write(json.dumps({"k": rng.randrange(100_000), "v": i}) + "\n")
            os.rename(path + ".tmp", path)


def committed(cp: str) -> list[int]:
    folder = os.path.join(cp, "commits")
    if not os.path.isdir(folder):
        return []
    return sorted(int(n) for n in os.listdir(folder) if n.isdigit())


def db_committed(db: str) -> set[int]:
    from collectors.db import read_query

    if not os.path.exists(db):
        return set()
    try:
        return {r[0] for r in read_query(db, "SELECT batch_id FROM batches WHERE committed")}
    except Exception:
        return set()


def wait_for(log: str, proc: subprocess.Popen[bytes], word: bytes, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        with open(log, "rb") as fh:
            if word in fh.read():
                return time.monotonic() - start
        if proc.poll() is not None:
            with open(log, errors="replace") as fh:
                raise SystemExit(f"{proc.args} ended: {fh.read()[-2000:]}")
        time.sleep(0.1)
    raise SystemExit(f"no {word!r} in {log} after {timeout} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--rows", type=int, default=4000, help="rows per side per batch")
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--attach", action="store_true", help="the query is already running")
    ap.add_argument("--idle", type=float, default=15.0, help="seconds of idle measurement")
    args = ap.parse_args()
    work = os.path.join(OUT, f"watch-join-{args.partitions}")
    cp = args.checkpoint or os.path.join(work, "cp")
    query: subprocess.Popen[bytes] | None = None
    started = time.monotonic()
    if not args.attach:
        src = os.path.join(work, "src")
        write_sources(src, args.batches, args.rows)
        query = subprocess.Popen([PY, "-c", RUN_JOIN, src, cp, str(args.partitions)])
    while not committed(cp):
        if query is not None and query.poll() is not None:
            break
        time.sleep(1.0)
    first_batch_s = time.monotonic() - started
    dirs = sum(1 for _ in os.walk(cp))
    tmp = tempfile.mkdtemp(prefix="bench-watch-")
    db, log, rlog = f"{tmp}/sg.duckdb", f"{tmp}/watch.log", f"{tmp}/recursive.log"
    with open(log, "wb") as fh:
        ours = subprocess.Popen(
            [PY, "-m", "app.cli", "watch", cp, "--db", db], stdout=fh, stderr=fh, cwd=ROOT
        )
    with open(rlog, "wb") as fh:
        recursive = subprocess.Popen([PY, "-c", RECURSIVE, cp], stdout=fh, stderr=fh)
    procs = {"stateglass watch (this branch)": ours, "watchdog recursive (before)": recursive}
    try:
        first_scan_s = wait_for(log, ours, b"watching", 3600)
        setup_recursive_s = wait_for(rlog, recursive, b"watching", 3600)
        seen: dict[int, float] = {}
        landed: dict[int, float] = {}
        busy: dict[str, list[float]] = {name: [] for name in procs}
        last = {name: cpu_seconds(p.pid) for name, p in procs.items()}
        first = set(db_committed(db))
        while query is None or query.poll() is None:
            time.sleep(1.0)
            for name, p in procs.items():
                now = cpu_seconds(p.pid)
                busy[name].append(now - last[name])
                last[name] = now
            for n in committed(cp):
                if n not in seen and n not in first:
                    seen[n] = os.stat(os.path.join(cp, "commits", str(n))).st_mtime
            for n in db_committed(db) - set(landed) - first:
                landed[n] = time.time()
            if args.attach and len(committed(cp)) >= args.batches and set(seen) <= set(landed):
                break
        deadline = time.monotonic() + 600
        while not set(seen) <= set(landed) and time.monotonic() < deadline:
            for n in db_committed(db) - set(landed) - first:
                landed[n] = time.time()
            time.sleep(0.2)
        time.sleep(3.0)
        idle = {}
        for name, p in procs.items():
            before, t0 = cpu_seconds(p.pid), time.monotonic()
            time.sleep(args.idle)
            idle[name] = (cpu_seconds(p.pid) - before) / (time.monotonic() - t0)
        watches = {name: inotify_watches(p.pid) for name, p in procs.items()}
        with open(rlog, errors="replace") as fh:
            overflows = fh.read().count("overflow")
        with open(log, errors="replace") as fh:
            our_lines = len([ln for ln in fh.read().splitlines() if ln.strip()])
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(30)
        if query is not None and query.poll() is None:
            query.terminate()
            query.wait(60)
    latencies = {n: landed[n] - seen[n] for n in sorted(seen) if n in landed}
    print(f"### watch on a {args.partitions}-partition × 4-store join ({dirs:,} directories)\n")
    print(f"{dt.date.today()}, {machine()}, load average (1/5/15 min) at the end: {load()}\n")
    if not args.attach:
        print(f"- Spark wrote batch 0 in {first_batch_s:.0f} s")
    print(f"- first scan (collect) by `stateglass watch`: {first_scan_s:.1f} s")
    print(f"- watchdog recursive observer set up in {setup_recursive_s:.1f} s\n")
    print("| process | inotify watches | CPU while Spark writes (mean / max of 1 s) | idle CPU |")
    print("|---|---:|---:|---:|")
    for name in procs:
        samples = busy[name] or [0.0]
        print(
            f"| {name} | {watches[name]:,} | {sum(samples) / len(samples):.0%} / "
            f"{max(samples):.0%} | {idle[name]:.1%} |"
        )
    print(f"\nwatchdog logged {overflows} queue-overflow warnings; `watch` wrote {our_lines} lines")
    for n, lat in latencies.items():
        print(f"- batch {n}: commit to row readable in {lat:.2f} s")
    missing = sorted(set(seen) - set(landed))
    print(f"- commits not recorded: {missing or 'none'}")


if __name__ == "__main__":
    main()
