"""One watcher scan of one commit on 10,000 store directories: listed in full, or by name.

Usage::

    .venv/bin/python benchmarks/bench_scan_by_name.py [--partitions 2500] [--workdir DIR]

Tiles ``sample_checkpoints/spark-4.3/join-hdfs`` out to ``--partitions`` × 4 stores as
``tests/collectors/test_watch_scale.py`` does (batches 10 and 11 held back), scans it once in
full, then renames batch 10's files into place and scans, then batch 11's. Once with a scanner
that lists every directory (``collect``'s, and the watcher's before scans by name), once with a
watcher's ``ReconcilePolicy`` (which also carries key sets between scans and judges health
after each, timed apart). Prints each scan's wall and CPU time and the load average: on a
shared machine the CPU time is the steadier figure.
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


def run(partitions: int, workdir: Path, by_name: bool) -> list[tuple[float, float]]:
    from stateglass.collectors.db import Database
    from stateglass.collectors.reconcile import ReconcilePolicy
    from stateglass.collectors.scan import Scanner
    from tests.collectors.test_watch_scale import JOIN_SAMPLE, REPLAYED, tile_join

    base = workdir / ("by-name" if by_name else "full")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    cp, held = base / "cp", base / "held"
    batches = tile_join(JOIN_SAMPLE, cp, held, partitions)
    policy = ReconcilePolicy(every_scans=1000, every_s=1e9) if by_name else None
    scanner = Scanner(Database(str(base / "sg.duckdb")), reconcile=policy, judge=by_name)
    judging = scanner._judge
    judge_cpu = [0.0, 0.0]  # CPU, wall

    def timed_judge(root: str, scan_at: Any) -> None:
        t, c = time.monotonic(), time.process_time()
        judging(root, scan_at)
        judge_cpu[0] += time.process_time() - c
        judge_cpu[1] += time.monotonic() - t

    scanner._judge = timed_judge  # type: ignore[method-assign]
    times = []
    for batch in (None, *REPLAYED):
        for rel in batches[batch] if batch is not None else ():
            os.rename(held / rel, cp / rel)
        judge_cpu[:] = [0.0, 0.0]
        t, c = time.monotonic(), time.process_time()
        scanner.scan(str(cp))
        wall, cpu = time.monotonic() - t - judge_cpu[1], time.process_time() - c - judge_cpu[0]
        times.append((wall, cpu))
    if by_name:
        print(
            f"  judging health after the last scan: {judge_cpu[1]:.1f} s, {judge_cpu[0]:.1f} s CPU",
            file=sys.stderr,
        )
    shutil.rmtree(base)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2500)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sg-by-name-"))
    print("| scanner (wall / CPU) | first scan | batch 10 | batch 11 | load before → after |")
    print("|---|---:|---:|---:|---|")
    for by_name in (False, True):
        before = os.getloadavg()[0]
        first, *commits = run(args.partitions, workdir, by_name)
        cells = " | ".join(f"{w:.1f} s / {c:.1f} s" for w, c in [first, *commits])
        label = "by name" if by_name else "full listing"
        print(f"| {label} | {cells} | {before:.1f} → {os.getloadavg()[0]:.1f} |")


if __name__ == "__main__":
    main()
