"""A watcher's scan of one new commit when the database holds a month of the checkpoint's history.

Usage::

    .venv/bin/python benchmarks/bench_watch_month.py [--db benchmarks/out/history-200p-30d.duckdb]
        [--workdir DIR] [--commits 4]

The month (``bench_history.py build --days 30``: 259,200 versions of one store of 200
partitions, a week of them at full resolution) has no checkpoint files behind it. This script
gives it one: ``sample_checkpoints/spark-4.3/agg-hdfs`` (one HDFS store, operator 0, like the
month's) tiled out to 200 partitions by hard links, with its batches renumbered to follow the
month's last (version V of the sample becomes 259,198 + V, from its snapshot 3 on, as if
Spark's maintenance had purged what came before; the offsets say 200 shuffle partitions).
The database is a copy of the month's, its rows moved to the new checkpoint's path; the
original is only read.

A watcher's scanner (``ReconcilePolicy``, carried key sets, verdicts judged after each scan)
then scans once in full — the first scan of a ``watch`` process — and scans each of the last
``--commits`` batches by name as it is renamed into place. Judging health is timed apart.
``Database.known`` of the month is also timed alone, beside the query it replaced (every
version row of the checkpoint). Prints wall and CPU seconds and the load average.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SAMPLE = ROOT / "sample_checkpoints" / "spark-4.3" / "agg-hdfs"
MONTH = ROOT / "benchmarks" / "out" / "history-200p-30d.duckdb"
PARTITIONS = 200
FIRST_KEPT = 3  # the sample's oldest snapshot: what came before it is purged
BATCHES = 12  # the sample's


def _stem(name: str) -> int | None:
    stem = name.lstrip(".").split(".")[0]
    return int(stem) if stem.isdigit() else None


def _renamed(name: str, shift: int) -> str:
    """``N…`` or ``.N….crc`` with N shifted."""
    stem = _stem(name)
    assert stem is not None, name
    dot = "." if name.startswith(".") else ""
    return f"{dot}{stem + shift}{name.lstrip('.')[len(str(stem)) :]}"


def build_checkpoint(cp: Path, held: Path, shift: int, replayed: range) -> dict[int, list[Path]]:
    """The sample tiled to ``PARTITIONS`` with batch N as N + ``shift``; the files of the
    ``replayed`` (sample) batches under ``held``. Returns those files per batch, relative,
    in Spark's order (offsets and state files first, ``commits/N`` last)."""
    from tests.collectors.test_watch_scale import rewrite

    out: dict[int, list[Path]] = {b: [] for b in replayed}

    def place(src: Path, rel_dir: str, name: str, batch: int) -> None:
        rel = Path(rel_dir) / _renamed(name, shift)
        dst = (held if batch in out else cp) / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.link(src, dst)
        if batch in out:
            out[batch].append(rel)

    shutil.copytree(SAMPLE / "sources", cp / "sources")
    shutil.copy(SAMPLE / "metadata", cp / "metadata")
    shutil.copytree(SAMPLE / "state" / "0" / "_metadata", cp / "state" / "0" / "_metadata")
    rewrite(cp / "state/0/_metadata/metadata", b'"numPartitions":4}', b'"numPartitions":200}')
    for log in ("offsets", "commits"):
        (cp / log).mkdir()
        for src in sorted((SAMPLE / log).iterdir()):
            batch = _stem(src.name)
            if batch is not None and batch + 1 >= FIRST_KEPT:
                place(src, log, src.name, batch)
    for p in range(PARTITIONS):
        for src in sorted((SAMPLE / "state" / "0" / str(p % 4)).iterdir()):
            version = _stem(src.name)
            if version is not None and version >= FIRST_KEPT:
                place(src, f"state/0/{p}", src.name, version - 1)
    # offsets/N are linked: a private copy of each and of its .crc (never the sample's)
    # says 200 partitions.
    for base in (cp, held):
        for log in (base / "offsets").glob("[0-9]*"):
            for linked in (log, log.with_name(f".{log.name}.crc")):
                data = linked.read_bytes()
                linked.unlink()
                linked.write_bytes(data)
            rewrite(
                log,
                b'"spark.sql.shuffle.partitions":"4"',
                b'"spark.sql.shuffle.partitions":"200"',
            )
    rank = {"offsets": 0, "state": 1, "commits": 2}
    for rels in out.values():
        rels.sort(key=lambda r: (rank[r.parts[0]], not r.name.startswith("."), str(r)))
    return out


def relabel(db: Path, old: str, new: str) -> None:
    """Move every row of checkpoint ``old`` to ``new`` (paths too), in one transaction."""
    import duckdb

    conn = duckdb.connect(str(db))
    tables = conn.execute(
        "SELECT DISTINCT c.table_name FROM duckdb_columns() c JOIN duckdb_tables() t "
        "USING (schema_name, table_name) "
        "WHERE c.schema_name = 'main' AND c.column_name = 'checkpoint'"
    ).fetchall()
    conn.execute("BEGIN")
    for (table,) in tables:
        cols = conn.execute(f"SELECT name FROM pragma_table_info('{table}')").fetchall()
        moved = "$new AS checkpoint"
        if ("path",) in cols:
            moved += ", replace(path, $old, $new) AS path"
        conn.execute(
            f"CREATE TEMP TABLE moved AS SELECT * REPLACE ({moved}) FROM {table} "
            "WHERE checkpoint = $old",
            {"old": old, "new": new},
        )
        conn.execute(f"DELETE FROM {table} WHERE checkpoint = $old", {"old": old})
        conn.execute(f"INSERT INTO {table} BY NAME SELECT * FROM moved")
        conn.execute("DROP TABLE moved")
    conn.execute("COMMIT")
    conn.execute("CHECKPOINT")
    conn.close()


def time_known(
    db_path: Path, root: str
) -> tuple[tuple[float, float, int], tuple[float, float, int]]:
    """``Database.known`` now, and the one query of every version row it replaced: (wall,
    CPU, rows) of each."""
    import duckdb

    from stateglass.collectors.db.writer import Database

    db = Database(str(db_path))
    t, c = time.monotonic(), time.process_time()
    known = db.known(root)
    new = (time.monotonic() - t, time.process_time() - c, sum(map(len, known.versions.values())))
    conn = duckdb.connect(str(db_path), read_only=True)
    t, c = time.monotonic(), time.process_time()
    rows = conn.execute(
        "SELECT operator_id, store_name, partition_id, version, NULL "
        "FROM state_versions WHERE checkpoint = ?",
        [root],
    ).fetchall()
    old = (time.monotonic() - t, time.process_time() - c, len(rows))
    conn.close()
    return new, old


def scan_commits(db_path: Path, cp: Path, held: Path, batches: dict[int, list[Path]]) -> list[Any]:
    """The first scan, then one scan by name per held batch: (wall, CPU, judge wall, judge CPU)."""
    from bench_scan_by_name import timed_verdicts

    from stateglass.app.collecting import new_scanner
    from stateglass.collectors.scan.reconcile import ReconcilePolicy

    policy = ReconcilePolicy(every_scans=1000, every_s=1e9)
    store, judged = timed_verdicts()  # CPU, wall
    scanner = new_scanner(str(db_path), watcher=policy, after_write=store)
    out = []
    for batch in (None, *batches):
        for rel in batches[batch] if batch is not None else ():
            os.rename(held / rel, cp / rel)
        judged[:] = [0.0, 0.0]
        t, c = time.monotonic(), time.process_time()
        summary = scanner.scan(str(cp))
        wall, cpu = time.monotonic() - t - judged[1], time.process_time() - c - judged[0]
        out.append((wall, cpu, judged[1], judged[0], summary.versions, summary.problems))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, default=MONTH)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--commits", type=int, default=4, choices=range(1, 10))
    args = parser.parse_args()
    import duckdb

    work = args.workdir or Path(tempfile.mkdtemp(prefix="sg-month-"))
    conn = duckdb.connect(str(args.db), read_only=True)
    old_root, last_batch = conn.execute(
        "SELECT checkpoint, max(batch_id) FROM batches GROUP BY checkpoint"
    ).fetchall()[0]
    conn.close()
    cp, held, db = work / "cp", work / "held", work / "month.duckdb"
    for stale in (cp, held):
        shutil.rmtree(stale, ignore_errors=True)
    # Sample batch N writes version N + 1; version FIRST_KEPT follows the month's last.
    shift = last_batch + 2 - FIRST_KEPT
    replayed = range(BATCHES - args.commits, BATCHES)
    batches = build_checkpoint(cp, held, shift, replayed)
    t = time.monotonic()
    shutil.copyfile(args.db, db)
    relabel(db, old_root, str(cp))
    print(f"copied and relabelled the month in {time.monotonic() - t:.0f} s", file=sys.stderr)
    load = os.getloadavg()[0]
    new, old = time_known(db, str(cp))
    print(
        f"Database.known of the month: {new[0]:.2f} s / {new[1]:.2f} s CPU ({new[2]:,} versions); "
        f"every version row as before: {old[0]:.2f} s / {old[1]:.2f} s CPU ({old[2]:,} rows); "
        f"load {load:.1f}"
    )
    print("| scan | versions | wall / CPU | judging health after it | load (1 min) |")
    print("|---|---:|---:|---:|---:|")
    labels = ["first (full listing)", *(f"batch {shift + b} by name" for b in replayed)]
    for label, (wall, cpu, jw, jc, versions, problems) in zip(
        labels, scan_commits(db, cp, held, batches), strict=True
    ):
        extra = f" ({problems} problems)" if problems else ""
        print(
            f"| {label} | {versions:,}{extra} | {wall:.2f} s / {cpu:.2f} s | "
            f"{jw:.2f} s / {jc:.2f} s | {os.getloadavg()[0]:.1f} |",
            flush=True,
        )
    if args.workdir is None:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
