"""A month of history for one store of 200 partitions: database size and cold page/step costs.

Usage::

    .venv/bin/python benchmarks/bench_history.py build --days 1 [--partitions 200]
    .venv/bin/python benchmarks/bench_history.py measure --days 1      # builds first if needed
    .venv/bin/python benchmarks/bench_history.py all                   # a day, a week, a month
    .venv/bin/python benchmarks/bench_history.py state-pages --days 30 # Browse, Diff, Key history
    .venv/bin/python benchmarks/bench_history.py measure --days 30 --db /tmp/copy.duckdb \
        --only state --only overview       # a copy of a built database, some steps
    .venv/bin/python benchmarks/bench_history.py measure --days 30 --db /tmp/copy.duckdb \
        --verdicts                         # the health verdicts stored first, as by `watch`

The history is what a watcher writes for a query with a batch every 10 s (8,640 versions a
day): it goes through the project's own write path, ``Database.record_scan`` (one
:class:`ScanWrite` per chunk of versions, as a watcher that fell behind would write) with the
default ``[history]`` settings, so ``Database.maintain`` runs on its own every
``maintain_every`` versions, exactly as in ``watch``. The numbers per partition and version
are shaped like the 200-partition HDFS aggregation of ``bench_collect.py`` (a few thousand
keys a partition, growing; a delta of a few KB each batch; a snapshot every 10 versions).
Each state file is written live by the chunk that creates it and marked purged by the next
chunk (Spark's maintenance keeps the newest ~100 versions), so ``maintain`` compacts them.

Each step is then measured as its own cold process (``/usr/bin/time``-style peak RSS from
``resource.getrusage`` of the child): the Overview, Query, State and Health pages in
Streamlit's ``AppTest`` with every chart's JSON size, ``check --no-collect``,
``report --no-collect``, and one ``/metrics`` scrape (the collector the server runs).
Databases are cached in ``benchmarks/out/history-<days>d.duckdb``.

The history has no state files behind it, so ``state-pages`` measures the pages that read
them (Browse, Diff, Key history) on a real checkpoint instead: PySpark writes one once with
the same partition count (:func:`real_checkpoint`, ~110 batches; Spark's maintenance keeps
the newest ~100 versions), a scanner collects it into a copy of the history's
database (``…-real.duckdb``), and each page runs as its own cold process on that checkpoint,
with the history's rows beside it in the same file. The real checkpoint's versions start at
1: Spark cannot start a query at batch 259,200 short of running that many batches, so its
rows sit beside the month's, not after them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import pathlib
import platform
import subprocess
import sys
import time
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
OUT = HERE / "out"
PY = sys.executable
TRIGGER_S = 10
PER_DAY = 86_400 // TRIGGER_S
SNAPSHOT_EVERY = 10
KEPT_VERSIONS = 100  # Spark's minBatchesToRetain: the files still on disk
CHUNK = 1440  # versions per write (four hours)
T0_MS = 1_760_000_000_000


def paths(days: float, partitions: int) -> tuple[pathlib.Path, pathlib.Path]:
    """The database of ``days`` and the (empty) checkpoint directory its rows are under."""
    return OUT / f"history-{partitions}p-{days:g}d.duckdb", paths_all(partitions)[1]


def _store_dir(cp: str, partition: int) -> str:
    return f"{cp}/state/0/{partition}"


def _chunk(cp: str, first: int, last: int, partitions: int) -> dict[str, list[dict[str, Any]]]:
    """Rows of versions ``first..last``: state versions, their files, and their batches."""
    versions: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    batches: list[dict[str, Any]] = []
    now = dt.datetime(2026, 1, 1)
    for v in range(first, last + 1):
        ts = T0_MS + (v - 1) * TRIGGER_S * 1000
        at = dt.datetime.fromtimestamp(ts / 1000, dt.UTC).replace(tzinfo=None)
        batches.append(
            {
                "checkpoint": cp,
                "batch_id": v - 1,
                "batch_timestamp_ms": ts,
                "watermark_ms": 0,
                "offsets_written_at": at,
                "committed": True,
                "committed_at": at + dt.timedelta(seconds=2),
                "source_offsets": json.dumps({"0": {"logOffset": v - 1}}),
                "provider": "hdfs",
                "codec": None,
                "shuffle_partitions": partitions,
                "state_format_versions": None,
                "next_watermark_ms": 0,
            }
        )
        since = v % SNAPSHOT_EVERY
        for p in range(partitions):
            keys = 4000 + 37 * p + v // 20 + (v * 7919 + p * 104729) % 251
            delta = 5000 + (v * 31 + p * 17) % 2000
            snap = keys * 60 if since == 0 else None
            versions.append(
                {
                    "checkpoint": cp,
                    "operator_id": 0,
                    "store_name": "default",
                    "partition_id": p,
                    "version": v,
                    "num_keys": keys,
                    "keys_added": 20 + (v + p) % 9,
                    "keys_updated": 80 + (v * p) % 13,
                    "keys_removed": 15 + (v + 2 * p) % 7,
                    "delta_bytes": delta,
                    "snapshot_bytes": snap,
                    "versions_since_snapshot": since,
                    "replay_bytes": keys * 60 + since * delta,
                }
            )
            for kind, size in (("delta", delta), ("snapshot", snap)):
                if size is not None:
                    files.append(
                        {
                            "checkpoint": cp,
                            "operator_id": 0,
                            "store_name": "default",
                            "partition_id": p,
                            "version": v,
                            "kind": kind,
                            "path": f"{_store_dir(cp, p)}/{v}.{kind}",
                            "size_bytes": size,
                            "modified_at": ts / 1000,
                            "purged": False,
                            "first_seen": now,
                            "purged_at": None,
                        }
                    )
    return {"versions": versions, "files": files, "batches": batches}


def paths_all(partitions: int) -> tuple[pathlib.Path, pathlib.Path]:
    """The one checkpoint directory every size's rows are recorded under, and its parent."""
    base = OUT / f"history-{partitions}p"
    return base, base / "checkpoint"


def build(days: float, partitions: int, milestones: tuple[float, ...] = ()) -> pathlib.Path:
    """Write ``days`` of history through ``Database.record_scan``; cached by file name. On the
    way, a copy of the database is kept at each of ``milestones`` (days) as that size's file,
    so one pass builds a day, a week and a month."""
    import shutil

    from stateglass.collectors.db.writer import Database
    from stateglass.collectors.db.writes import ScanWrite

    db_file, _ = paths(days, partitions)
    if db_file.is_file():
        return db_file
    _, cp_dir = paths_all(partitions)
    cp_dir.mkdir(parents=True, exist_ok=True)
    cp = str(cp_dir)
    part = db_file.with_suffix(".part")
    for stale in (part, pathlib.Path(f"{part}.wal")):
        stale.unlink(missing_ok=True)
    db = Database(str(part))
    total = int(days * PER_DAY)
    marks = {int(m * PER_DAY): m for m in milestones if m < days}
    start = time.perf_counter()
    live: list[dict[str, Any]] = []
    for first in range(1, total + 1, CHUNK):
        last = min(total, first + CHUNK - 1)
        rows = _chunk(cp, first, last, partitions)
        now = dt.datetime.fromtimestamp(T0_MS / 1000 + last * TRIGGER_S, dt.UTC).replace(
            tzinfo=None
        )
        # The previous chunk's files are gone from disk now, its newest few with them or not.
        keep_from = last - KEPT_VERSIONS
        gone = [{**f, "purged": True, "purged_at": now} for f in live]
        for f in rows["files"]:
            if f["version"] <= keep_from:
                f["purged"], f["purged_at"] = True, now
                gone.append(f)
        live = [f for f in rows["files"] if f["version"] > keep_from]
        db.record_scan(
            ScanWrite(
                root=cp,
                now=now,
                metadata_path=f"{cp}/metadata",
                checkpoint={
                    "checkpoint": cp,
                    "query_id": "bench-history",
                    "first_seen": now,
                    "last_scan": now,
                    "pinned_conf": None,
                },
                operators=[
                    {
                        "checkpoint": cp,
                        "operator_id": 0,
                        "operator_name": "stateStoreSave",
                        "store_name": "default",
                        "num_partitions": partitions,
                        "provider": "hdfs",
                    }
                ]
                if first == 1
                else [],
                batch_offsets=rows["batches"],
                batch_commits=rows["batches"],
                state_files=gone + live,
                state_versions=rows["versions"],
            )
        )
        print(
            f"  {last:,}/{total:,} versions ({time.perf_counter() - start:.0f} s)",
            file=sys.stderr,
            flush=True,
        )
        for at, m in marks.items():
            if first <= at <= last:
                db.maintain(cp)
                copy, _ = paths(m, partitions)
                shutil.copyfile(part, copy.with_suffix(".copy"))
                os.replace(copy.with_suffix(".copy"), copy)
    db.maintain(cp)
    os.replace(part, db_file)
    pathlib.Path(f"{part}.wal").unlink(missing_ok=True)
    return db_file


# ---- a real checkpoint behind the history ------------------------------------------------------

REAL_BATCHES = 110  # Spark keeps the newest 100 (minBatchesToRetain) and purges the rest
REAL_ROWS = 25_000  # rows a batch: ~125 keys added or updated a partition, as in the history
REAL_KEY_SPACE = 1_500_000  # ~1.3M keys after 110 batches: 4,000-11,000 a partition
REAL_FILES_MTIME = 1_700_000_000


def real_checkpoint(partitions: int) -> pathlib.Path:
    """A checkpoint written by PySpark (cached): ``bench_collect.py``'s query, a streaming
    ``groupBy(k).agg(count, sum)`` over one JSON file a batch, with ``partitions`` shuffle
    partitions (HDFS provider) and :data:`REAL_BATCHES` batches of :data:`REAL_ROWS` rows over
    :data:`REAL_KEY_SPACE` keys; Spark's own maintenance leaves the newest ~100 versions."""
    import random

    sys.path.insert(0, str(HERE))
    import bench_collect

    base = OUT / f"history-{partitions}p-real"
    cp, src, done = base / "checkpoint", base / "src", base / "written"
    if done.is_file():
        return cp
    import shutil

    shutil.rmtree(base, ignore_errors=True)
    src.mkdir(parents=True)
    for n in range(REAL_BATCHES):
        rnd = random.Random(n)
        lines = []
        for _ in range(REAL_ROWS):
            key = rnd.randrange(REAL_KEY_SPACE)
            lines.append(json.dumps({"k": f"key-{key:07d}", "v": key % 97}) + "\n")
        path = src / f"{n:05d}.json"
        path.write_text("".join(lines))
        # One file a batch, in name order: the file source orders by modification time.
        os.utime(path, (REAL_FILES_MTIME + n, REAL_FILES_MTIME + n))
    print(f"writing {cp}: {partitions} partitions, {REAL_BATCHES} batches", file=sys.stderr)
    took = bench_collect.run_query(str(src), str(cp), partitions)
    done.write_text(f"{took:.0f} s\n")
    return cp


# ---- cold steps, each in a child process ------------------------------------------------------

_PAGE_CHILD = r"""
import json, logging, os, sys, time
os.environ["STATEGLASS_DB"] = sys.argv[1]
logging.getLogger("streamlit").setLevel(logging.ERROR)
from streamlit.testing.v1 import AppTest

SCRIPT = (
    "import importlib\n"
    "from stateglass.app.dashboard import context\n"
    "context.live_status()\n"
    f"importlib.import_module('stateglass.app.dashboard.views.{sys.argv[2]}').render()\n"
)
def run():
    start, cpu = time.perf_counter(), time.process_time()
    at = AppTest.from_string(SCRIPT, default_timeout=600)
    if len(sys.argv) > 3:  # the checkpoint to show (the sidebar's first one otherwise)
        at.session_state["sg_checkpoint"] = sys.argv[3]
    at.run()
    return at, time.perf_counter() - start, time.process_time() - cpu

# The first run is the cold process (imports included); the second clears the caches, so
# every query runs and every figure is built again with the modules loaded.
at, took, cpu = run()
import streamlit as st
st.cache_data.clear()
st.cache_resource.clear()
# The state pages' own caches: read partitions and opened checkpoints.
from stateglass.app.browse import diff, store
from stateglass.collectors.checkpoints import state_views as views
store.CACHE.clear()
views.SOURCES = views.Sources()
diff._RECENT.clear()
at2, again, cpu2 = run()
charts = at.get("plotly_chart")
print(json.dumps({
    "s": took, "cpu_s": cpu, "s_imports_done": again, "cpu_s_imports_done": cpu2,
    "chart_bytes": sum(len(c.proto.spec) for c in charts),
    "largest_chart_bytes": max((len(c.proto.spec) for c in charts), default=0),
    "charts": len(charts),
    "tables": len(at.dataframe),
    "errors": [str(e.value)[:300] for e in [*at.exception, *at2.exception]],
}))
"""

_METRICS_CHILD = """
import json, sys, time
start = time.perf_counter()
from stateglass.app.metrics import HistoryCollector
families = list(HistoryCollector(sys.argv[1]).collect())
print(json.dumps({"s": time.perf_counter() - start, "families": len(families)}))
"""


# Runs a command and reports its own peak RSS (``wait4``), as ``/usr/bin/time -v`` would.
_RSS_WRAPPER = (
    "import os, sys\n"
    "pid = os.spawnv(os.P_NOWAIT, sys.argv[1], sys.argv[1:])\n"
    "_, status, usage = os.wait4(pid, 0)\n"
    "cpu = usage.ru_utime + usage.ru_stime\n"
    "sys.stderr.write(f'\\nCPU_S {cpu}\\nPEAK_RSS_KIB {usage.ru_maxrss}\\n')\n"
    "sys.exit(os.waitstatus_to_exitcode(status))\n"
)


def _child(argv: list[str]) -> tuple[float, float, float, str]:
    """Wall seconds, peak RSS (GiB) and stdout of one child process (run under
    ``/usr/bin/time``-like accounting: its own peak, read from ``wait4``)."""
    start = time.perf_counter()
    done = subprocess.run([PY, "-c", _RSS_WRAPPER, *argv], capture_output=True, text=True, cwd=ROOT)
    took = time.perf_counter() - start
    rss_kib = int(done.stderr.rsplit("PEAK_RSS_KIB ", 1)[-1])
    cpu = float(done.stderr.rsplit("CPU_S ", 1)[-1].split()[0])
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{argv[:4]}: exit {done.returncode}: {done.stderr[-2000:]}")
    return took, cpu, rss_kib / 2**20, done.stdout


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


PAGES = ("overview", "query", "state", "health")
OTHER_STEPS = ("check", "report", "metrics")


def measure(db: pathlib.Path, cp: str, only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Each step as its own cold process: its seconds, peak RSS and chart bytes (``only``:
    these pages or steps, by the names of ``PAGES`` and ``OTHER_STEPS``)."""
    exe = str(ROOT / ".venv" / "bin" / "stateglass")
    steps: list[dict[str, Any]] = []
    for page in PAGES:
        if only and page not in only:
            continue
        load = _load()
        took, cpu, rss, out = _child([PY, "-c", _PAGE_CHILD, str(db), page])
        info = json.loads(out.strip().splitlines()[-1])
        row = {"step": f"{page} page", "wall_s": took, "proc_cpu_s": cpu, "rss_gib": rss}
        steps.append({**row, "load": load, **info})
    for short, name, argv in (
        ("check", "check --no-collect", [exe, "check", cp, "--db", str(db), "--no-collect"]),
        (
            "report",
            "report --no-collect",
            [
                exe,
                "report",
                cp,
                "--db",
                str(db),
                "--no-collect",
                "-o",
                str(db.with_suffix(".report.html")),
            ],
        ),
        ("metrics", "/metrics scrape", [PY, "-c", _METRICS_CHILD, str(db)]),
    ):
        if only and short not in only:
            continue
        load = _load()
        took, cpu, rss, out = _child(argv)
        row = {"step": name, "wall_s": took, "cpu_s": cpu, "rss_gib": rss, "load": load}
        if short == "metrics":
            # A child that failed would otherwise pass for a fast scrape.
            row.update(json.loads(out.strip().splitlines()[-1]))
        steps.append(row)
    return steps


STATE_PAGES = ("browse", "diff", "key_history")


def with_real_checkpoint(days: float, partitions: int) -> tuple[pathlib.Path, str]:
    """A copy of ``days``' database with :func:`real_checkpoint` collected into it by
    a scanner (the collector's own write path); the copy and the checkpoint's root.
    The month's file is only read (copied), never written."""
    import shutil

    from stateglass.app.collecting import new_scanner

    cp = real_checkpoint(partitions)
    db = build(days, partitions)
    out = db.with_name(f"{db.stem}-real.duckdb")
    root = os.path.abspath(cp)
    if not out.is_file():
        part = out.with_suffix(".part")
        shutil.copyfile(db, part)
        start = time.perf_counter()
        root = new_scanner(str(part)).scan(str(cp)).checkpoint
        print(f"  collected {root} in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        os.replace(part, out)
    return out, root


def measure_state_pages(
    db: pathlib.Path, checkpoint: str, baseline: str | None = None, runs: int = 1
) -> list[dict[str, Any]]:
    """Browse, Diff and Key history on ``checkpoint``, each its own cold process, as
    :func:`measure`'s pages (each page's defaults: the newest version, the newest two, the
    first key of the newest version's first partition). With ``baseline`` (another
    installation's Python, e.g. main's), each run of a page goes there first, then here."""
    steps: list[dict[str, Any]] = []
    pythons = [("baseline", baseline), ("this", PY)] if baseline else [("this", PY)]
    for page in STATE_PAGES:
        for _ in range(runs):
            for code, python in pythons:
                load = _load()
                took, cpu, rss, out = _child([python, "-c", _PAGE_CHILD, str(db), page, checkpoint])
                info = json.loads(out.strip().splitlines()[-1])
                row = {"step": f"{page} page", "code": code, "wall_s": took, "proc_cpu_s": cpu}
                steps.append({**row, "rss_gib": rss, "load": load, **info})
    return steps


def held(db: pathlib.Path) -> list[dict[str, Any]]:
    """Each checkpoint's store versions (first, last, how many) and batches in ``db``."""
    from stateglass.collectors.db.read import read_query

    rows = read_query(
        str(db),
        "SELECT checkpoint, min(version), max(version), count(*), "
        "(SELECT count(*) FROM batches b WHERE b.checkpoint = s.checkpoint) "
        "FROM store_versions s GROUP BY checkpoint ORDER BY checkpoint",
    )
    names = ("checkpoint", "first_version", "last_version", "versions", "batches")
    return [dict(zip(names, row, strict=True)) for row in rows]


def size(db: pathlib.Path) -> dict[str, Any]:
    """File size and bytes per partition-version; rows per table."""
    from stateglass.collectors.db.read import read_query

    versions, partitions = (
        read_query(str(db), "SELECT count(*), count(DISTINCT partition_id) FROM partition_newest")[
            0
        ][0],
        0,
    )
    hi = read_query(str(db), "SELECT max(version) FROM partition_newest")[0][0]
    partitions = versions
    total = os.path.getsize(db)
    counts = {
        t: read_query(str(db), f"SELECT count(*) FROM {t}")[0][0]
        for t in (
            "state_versions",
            "state_rollups",
            "store_versions",
            "state_files",
            "file_summaries",
            "batches",
        )
    }
    return {
        "bytes": total,
        "partition_versions": hi * partitions,
        "bytes_per_pv": total / max(1, hi * partitions),
        "rows": counts,
    }


def _recorded_checkpoint(db: pathlib.Path) -> str:
    """The checkpoint a database's history is recorded under (it was built elsewhere)."""
    from stateglass.collectors.db.read import read_query

    return str(read_query(str(db), "SELECT min(checkpoint) FROM checkpoints")[0][0])


def store_verdicts(db: pathlib.Path) -> float:
    """Judge each checkpoint and store its verdicts, as a watcher does after every scan (the
    history is written without one); CPU seconds it took."""
    from stateglass.app.analysis.health.stored import judge_and_store
    from stateglass.collectors.db.read import read_query
    from stateglass.collectors.db.writer import Database

    cpu = time.process_time()
    writer = Database(str(db))
    for cp, scanned in read_query(str(db), "SELECT checkpoint, last_scan FROM checkpoints"):
        judge_and_store(writer, cp, scanned)
    return time.process_time() - cpu


def report(
    days: float,
    partitions: int,
    db_file: pathlib.Path | None = None,
    only: tuple[str, ...] = (),
    verdicts: bool = False,
) -> None:
    start = time.perf_counter()
    if db_file is not None:
        # A copy made elsewhere (``--db``): its rows name the checkpoint they were built under.
        db, built = db_file, True
        cp: pathlib.Path | str = _recorded_checkpoint(db)
    else:
        db, cp = paths(days, partitions)
        built = db.is_file()
        db = build(days, partitions)
    print(
        f"# {days:g} days, {partitions} partitions: {db} "
        f"({'cached' if built else f'built in {time.perf_counter() - start:.0f} s'})"
    )
    print(json.dumps(size(db)))
    if verdicts:
        print(f"verdicts stored as a watcher would ({store_verdicts(db):.2f} CPU s)")
    print(
        f"machine: {platform.machine()} {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, {dt.date.today()}"
    )
    for step in measure(db, str(cp), only):
        print(json.dumps(step))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("what", choices=("build", "measure", "state-pages", "all"))
    ap.add_argument("--days", type=float, default=1.0)
    ap.add_argument("--partitions", type=int, default=200)
    ap.add_argument(
        "--baseline", help="state-pages: also run each page with this Python (another install)"
    )
    ap.add_argument("--runs", type=int, default=1, help="state-pages: runs of each page")
    ap.add_argument(
        "--db",
        type=pathlib.Path,
        help="measure this database (a copy of a built one) instead of benchmarks/out's; the "
        "report is written beside it",
    )
    ap.add_argument(
        "--only",
        action="append",
        choices=PAGES + OTHER_STEPS,
        default=[],
        help="measure only this page or step (repeatable)",
    )
    ap.add_argument(
        "--verdicts",
        action="store_true",
        help="store the health verdicts first, as a watcher does after each scan (the pages "
        "and the scrape then read them rather than judging the history afresh)",
    )
    args = ap.parse_args()
    if args.what == "build":
        start = time.perf_counter()
        db = build(args.days, args.partitions, (1, 7))
        print(f"{db}: {os.path.getsize(db) / 2**20:.1f} MiB ({time.perf_counter() - start:.0f} s)")
    elif args.what == "measure":
        report(args.days, args.partitions, args.db, tuple(args.only), args.verdicts)
    elif args.what == "state-pages":
        db, root = with_real_checkpoint(args.days, args.partitions)
        print(f"# {args.days:g} days, {args.partitions} partitions: {db}, {root}")
        print(f"{os.path.getsize(db) / 2**20:.0f} MiB; versions per checkpoint:")
        for row in held(db):
            print(json.dumps(row))
        for step in measure_state_pages(db, root, args.baseline, args.runs):
            print(json.dumps(step))
    else:
        for days in (1, 7, 30):
            report(days, args.partitions)


if __name__ == "__main__":
    main()
