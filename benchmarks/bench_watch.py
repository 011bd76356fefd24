"""`stateglass watch` on a 2,000-partition stream-stream join (4 stores: ~10,000 directories).

Usage::

    .venv/bin/python benchmarks/bench_watch.py [--partitions 2000] [--checkpoint CP --src SRC]

1. Once (cached under benchmarks/out/): a PySpark inner join of two JSON file streams on
   ``k``, ``--partitions`` shuffle partitions (so 4 state stores × partitions directories),
   HDFS provider, one file per side per batch (``maxFilesPerTrigger=1``, ``availableNow``),
   writes batch 0.
2. Starts ``stateglass watch`` (root, commits/ and offsets/ only) and, for comparison, a
   plain watchdog recursive observer on the checkpoint (what ``watch`` did before), each in
   its own process. After the first scan: idle CPU of both over ``--idle`` seconds.
3. Writes one more source file per side and runs the query again: one more batch. While
   Spark writes it, the CPU of both, second by second; the time from ``commits/N``'s mtime
   to its row being readable in the database.
4. Idle CPU of both again, and their inotify watches.
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


def write_batch(src: str, batch: int, rows: int) -> None:
    """One new file per side: the next micro-batch of the join."""
    for side in ("left", "right"):
        os.makedirs(os.path.join(src, side), exist_ok=True)
        path = os.path.join(src, side, f"part-{batch:03d}.json")
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
    from stateglass.collectors.db.read import read_query

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


def cpu_of(procs: dict[str, subprocess.Popen[bytes]], seconds: float) -> dict[str, float]:
    """Share of one core each process used over ``seconds``."""
    before = {name: cpu_seconds(p.pid) for name, p in procs.items()}
    t0 = time.monotonic()
    time.sleep(seconds)
    took = time.monotonic() - t0
    return {name: (cpu_seconds(p.pid) - before[name]) / took for name, p in procs.items()}


def hold_back(cp: str, batch: int, held: str) -> list[tuple[str, str]]:
    """Move batch ``batch``'s files (and any later ones) out of a copy of a checkpoint.

    Returns the (held, original) pairs of the batch's own files, in the order Spark writes
    them: state files, then ``commits/N`` last. Later batches' files are dropped.
    """
    import shutil

    back: list[tuple[str, str]] = []
    for dirpath, _, files in os.walk(cp):
        for name in files:
            stem = name.lstrip(".").split(".")[0]
            if not stem.isdigit():
                continue
            rel = os.path.relpath(os.path.join(dirpath, name), cp)
            top = rel.split(os.sep)[0]
            # commits/N, offsets/N hold batch N; state files hold version N + 1.
            owner = int(stem) - 1 if top == "state" else int(stem)
            if owner < batch or top not in ("state", "commits", "offsets"):
                continue
            src = os.path.join(cp, rel)
            if owner > batch:
                os.remove(src)
                continue
            dst = os.path.join(held, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.move(src, dst)
            back.append((dst, src))
    # offsets/N first, state files, commits/N last: the order Spark writes them.
    back.sort(key=lambda pair: ("/offsets/" not in pair[1]) + ("/commits/" in pair[1]))
    return back


def replay(args: argparse.Namespace) -> None:
    """Measure on a copy of a written checkpoint whose last batch is held back, then put in
    place file by file (renames, as Spark does), its commit last: no Spark run needed."""
    import shutil

    tmp = tempfile.mkdtemp(prefix="bench-watch-")
    cp = os.path.join(tmp, "cp")
    shutil.copytree(args.checkpoint, cp, symlinks=True)
    batch = args.replay
    back = hold_back(cp, batch, os.path.join(tmp, "held"))
    dirs = sum(1 for _ in os.walk(cp))
    db, log, rlog = f"{tmp}/sg.duckdb", f"{tmp}/watch.log", f"{tmp}/recursive.log"
    with open(log, "wb") as fh:
        ours = subprocess.Popen(
            [PY, "-m", "stateglass.app.cli", "watch", cp, "--db", db],
            stdout=fh,
            stderr=fh,
            cwd=ROOT,
        )
    with open(rlog, "wb") as fh:
        recursive = subprocess.Popen([PY, "-c", RECURSIVE, cp], stdout=fh, stderr=fh)
    procs = {"stateglass watch (this branch)": ours, "watchdog recursive (before)": recursive}
    try:
        first_scan_s = wait_for(log, ours, b"watching", 3600)
        wait_for(rlog, recursive, b"watching", 3600)
        time.sleep(3.0)
        idle_before = cpu_of(procs, args.idle)
        cpu0 = {name: cpu_seconds(p.pid) for name, p in procs.items()}
        t0 = time.monotonic()
        for held, original in back[:-1]:
            os.rename(held, original)
        restore_s = time.monotonic() - t0
        held, original = back[-1]
        os.rename(held, original)
        committed_at = time.monotonic()
        while batch not in db_committed(db) and time.monotonic() - committed_at < 600:
            time.sleep(0.05)
        latency = time.monotonic() - committed_at
        during = {
            name: (cpu_seconds(p.pid) - cpu0[name]) / (time.monotonic() - t0)
            for name, p in procs.items()
        }
        time.sleep(3.0)
        idle_after = cpu_of(procs, args.idle)
        watches = {name: inotify_watches(p.pid) for name, p in procs.items()}
        with open(rlog, errors="replace") as fh:
            overflows = fh.read().count("overflow")
        with open(log, errors="replace") as fh:
            our_lines = len([ln for ln in fh.read().splitlines() if ln.strip()])
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"### watch on a copy of a written checkpoint ({dirs:,} directories), batch {batch}\n")
    print(f"{dt.date.today()}, {machine()}, load average (1/5/15 min) at the end: {load()}\n")
    print(f"- first scan (collect) by `stateglass watch`: {first_scan_s:.1f} s")
    print(f"- batch {batch}: {len(back) - 1} files renamed into place in {restore_s:.1f} s")
    print(f"- commit (rename of commits/{batch}) to row readable: **{latency:.2f} s**\n")
    print(
        "| process | inotify watches | idle CPU after the first scan | CPU from the batch's "
        "first file to its row | idle CPU after it |"
    )
    print("|---|---:|---:|---:|---:|")
    for name in procs:
        print(
            f"| {name} | {watches[name]:,} | {idle_before[name]:.1%} | {during[name]:.0%} | "
            f"{idle_after[name]:.1%} |"
        )
    print(f"\nwatchdog logged {overflows} queue-overflow warnings; `watch` wrote {our_lines} lines")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--replay",
        type=int,
        default=None,
        metavar="N",
        help="no Spark run: hold back batch N of a copy of --checkpoint, then put it in place",
    )
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--rows", type=int, default=4000, help="rows per side per batch")
    ap.add_argument("--checkpoint", default=None, help="default: benchmarks/out/…/cp")
    ap.add_argument("--src", default=None, help="the query's source folder (default beside)")
    ap.add_argument("--idle", type=float, default=15.0, help="seconds of idle measurement")
    args = ap.parse_args()
    if args.replay is not None:
        replay(args)
        return
    work = os.path.join(OUT, f"watch-join-{args.partitions}")
    cp = args.checkpoint or os.path.join(work, "cp")
    src = args.src or os.path.join(work, "src")
    spark_s = None
    if not committed(cp):  # written once, then reused
        write_batch(src, 0, args.rows)
        t0 = time.monotonic()
        subprocess.run([PY, "-c", RUN_JOIN, src, cp, str(args.partitions)], check=True)
        spark_s = time.monotonic() - t0
    dirs = sum(1 for _ in os.walk(cp))
    tmp = tempfile.mkdtemp(prefix="bench-watch-")
    db, log, rlog = f"{tmp}/sg.duckdb", f"{tmp}/watch.log", f"{tmp}/recursive.log"
    with open(log, "wb") as fh:
        ours = subprocess.Popen(
            [PY, "-m", "stateglass.app.cli", "watch", cp, "--db", db],
            stdout=fh,
            stderr=fh,
            cwd=ROOT,
        )
    with open(rlog, "wb") as fh:
        recursive = subprocess.Popen([PY, "-c", RECURSIVE, cp], stdout=fh, stderr=fh)
    procs = {"stateglass watch (this branch)": ours, "watchdog recursive (before)": recursive}
    query: subprocess.Popen[bytes] | None = None
    try:
        first_scan_s = wait_for(log, ours, b"watching", 3600)
        wait_for(rlog, recursive, b"watching", 3600)
        time.sleep(3.0)
        idle_before = cpu_of(procs, args.idle)
        first = set(db_committed(db))
        batch = max(committed(cp)) + 1
        write_batch(src, batch, args.rows)
        t0 = time.monotonic()
        query = subprocess.Popen([PY, "-c", RUN_JOIN, src, cp, str(args.partitions)])
        seen: dict[int, float] = {}
        landed: dict[int, float] = {}
        busy: dict[str, list[float]] = {name: [] for name in procs}
        while query.poll() is None or not set(seen) <= set(landed):
            for name, share in cpu_of(procs, 1.0).items():
                busy[name].append(share)
            for n in committed(cp):
                if n not in seen and n not in first:
                    seen[n] = os.stat(os.path.join(cp, "commits", str(n))).st_mtime
            for n in db_committed(db) - set(landed) - first:
                landed[n] = time.time()
            if time.monotonic() - t0 > 3 * 3600:
                break
        spark_batch_s = time.monotonic() - t0
        time.sleep(3.0)
        idle_after = cpu_of(procs, args.idle)
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
    print(f"### watch on a {args.partitions}-partition × 4-store join ({dirs:,} directories)\n")
    print(f"{dt.date.today()}, {machine()}, load average (1/5/15 min) at the end: {load()}\n")
    if spark_s is not None:
        print(f"- Spark wrote batch 0 in {spark_s:.0f} s")
    print(f"- Spark wrote batch {batch} (while both watched) in {spark_batch_s:.0f} s")
    print(f"- first scan (collect) by `stateglass watch`: {first_scan_s:.1f} s\n")
    print(
        "| process | inotify watches | idle CPU after the first scan | CPU while Spark writes "
        "a batch (mean / max of 1 s) | idle CPU after it |"
    )
    print("|---|---:|---:|---:|---:|")
    for name in procs:
        samples = busy[name] or [0.0]
        print(
            f"| {name} | {watches[name]:,} | {idle_before[name]:.1%} | "
            f"{sum(samples) / len(samples):.0%} / {max(samples):.0%} | {idle_after[name]:.1%} |"
        )
    print(f"\nwatchdog logged {overflows} queue-overflow warnings; `watch` wrote {our_lines} lines")
    for n in sorted(seen):
        lat = f"{landed[n] - seen[n]:.2f} s" if n in landed else "never"
        print(f"- batch {n}: commit (mtime of commits/{n}) to row readable: {lat}")


if __name__ == "__main__":
    main()
