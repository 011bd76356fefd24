"""One watcher scan of one commit on 10,000 store directories: listed in full, or by name.

Usage::

    .venv/bin/python benchmarks/bench_scan_by_name.py [--partitions 2500] [--commits 8]
        [--workdir DIR] [--by-name-only]

Tiles ``sample_checkpoints/spark-4.3/join-hdfs`` out to ``--partitions`` × 4 stores as
``tests/collectors/test_watch_scale.py`` does, with the last ``--commits`` batches held back
(the sample has 12: 8 holds back batches 4-11), scans it once in full, then renames each held
batch's files into place and scans, one commit at a time. Once with a scanner
that lists every directory (``collect``'s, and the watcher's before scans by name), once with a
watcher's ``ReconcilePolicy`` (which also carries key sets between scans and judges health
after each, timed apart). Prints each scan's wall and CPU time, the median and 95th percentile
over the commits, and the load average: on a shared machine the CPU time is the steadier
figure. ``--rows`` times each commit up to the moment its rows are committed (the end of
``Database.record_scan``: commit-to-row) beside the whole scan (a watcher checks the new
files' checksums after that, ``collectors/scan/late_checks.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def time_judging(scanner: Any) -> list[float]:
    """Time the scanner's judging of health apart from its scans: returns the list its CPU and
    wall seconds add up in (the caller zeroes it before each scan)."""
    judging = scanner._judge
    judge_cpu = [0.0, 0.0]  # CPU, wall

    def timed_judge(root: str, scan_at: Any) -> None:
        t, c = time.monotonic(), time.process_time()
        judging(root, scan_at)
        judge_cpu[0] += time.process_time() - c
        judge_cpu[1] += time.monotonic() - t

    scanner._judge = timed_judge
    return judge_cpu


def time_rows(db: Any) -> list[float]:
    """Note the monotonic and CPU clocks as each scan's rows are committed."""
    record = db.record_scan
    at = [0.0, 0.0]

    def timed_record(write: Any) -> None:
        record(write)
        at[:] = [time.monotonic(), time.process_time()]

    db.record_scan = timed_record
    return at


def run(
    partitions: int, workdir: Path, by_name: bool, replayed: tuple[int, ...]
) -> list[tuple[float, float, float, float]]:
    from stateglass.collectors.db.writer import Database
    from stateglass.collectors.scan.reconcile import ReconcilePolicy
    from stateglass.collectors.scan.scanner import Scanner
    from tests.collectors.test_watch_scale import JOIN_SAMPLE, tile_join

    base = workdir / ("by-name" if by_name else "full")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    cp, held = base / "cp", base / "held"
    batches = tile_join(JOIN_SAMPLE, cp, held, partitions, replayed)
    policy = ReconcilePolicy(every_scans=1000, every_s=1e9) if by_name else None
    scanner = Scanner(Database(str(base / "sg.duckdb")), reconcile=policy, judge=by_name)
    judge_cpu = time_judging(scanner)
    rows_at = time_rows(scanner.db)
    times = []
    for batch in (None, *replayed):
        for rel in batches[batch] if batch is not None else ():
            os.rename(held / rel, cp / rel)
        judge_cpu[:] = [0.0, 0.0]
        t, c = time.monotonic(), time.process_time()
        scanner.scan(str(cp))
        wall, cpu = time.monotonic() - t - judge_cpu[1], time.process_time() - c - judge_cpu[0]
        times.append((wall, cpu, rows_at[0] - t, rows_at[1] - c))
    if by_name:
        print(
            f"  judging health after the last scan: {judge_cpu[1]:.1f} s, {judge_cpu[0]:.1f} s CPU",
            file=sys.stderr,
        )
    shutil.rmtree(base)
    return times


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile, nearest rank: of 8 commits the 95th is the slowest."""
    ranked = sorted(values)
    return ranked[max(0, math.ceil(q / 100 * len(ranked)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2500)
    parser.add_argument("--commits", type=int, default=8, choices=range(1, 11))
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--by-name-only", action="store_true")
    parser.add_argument("--rows", action="store_true", help="also time commit-to-row")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sg-by-name-"))
    replayed = tuple(range(12 - args.commits, 12))
    print(
        "| scanner (wall / CPU) | first scan | each commit (batches "
        f"{replayed[0]}-{replayed[-1]}) | p50 | p95 | load before → after |"
    )
    print("|---|---:|---|---:|---:|---|")
    for by_name in (True,) if args.by_name_only else (False, True):
        before = os.getloadavg()[0]
        first, *commits = run(args.partitions, workdir, by_name, replayed)
        label = "by name" if by_name else "full listing"
        for what, at in (("", 0), (", commit-to-row", 2))[: 2 if args.rows else 1]:
            each = ", ".join(f"{t[at]:.1f}/{t[at + 1]:.1f}" for t in commits)
            walls, cpus = [t[at] for t in commits], [t[at + 1] for t in commits]
            stats = " | ".join(
                f"{percentile(walls, q):.1f} s / {percentile(cpus, q):.2f} s" for q in (50, 95)
            )
            print(
                f"| {label}{what} | {first[at]:.1f} s / {first[at + 1]:.1f} s | {each} | "
                f"{stats} | {before:.1f} → {os.getloadavg()[0]:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
