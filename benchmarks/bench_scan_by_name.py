"""One watcher scan of one commit on 10,000 store directories: listed in full, or by name.

Usage::

    .venv/bin/python benchmarks/bench_scan_by_name.py [--partitions 2500] [--commits 8]
        [--workdir DIR] [--by-name-only] [--rows] [--watch-process]

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

``--watch-process`` runs the real ``stateglass watch`` command (its defaults, or the
``--watch-arg`` flags given) on the tiled
checkpoint instead of a scanner built here: after its first scan, each held batch's files are
renamed into place, and the time runs from the rename of ``commits/N`` to the batch's row
being readable in the database (polled read-only every 50 ms, as the dashboard reads it),
beside the CPU seconds the watcher process used meanwhile. The state files go in first (store
directories are not watched), then ``offsets/N`` and ``commits/N`` back to back, so that the
commit's scan is the batch's one scan, as above: ``offsets/N`` alone starts a scan after the
debounce (1 s without an event in the watched directories), and renaming 40,000 files on a
loaded machine takes longer than that. Each commit waits for the previous one's health
verdicts to be stored and the process to be idle. Which commits the watcher's reconcile
policy listed in full (by default every 20th scan, or the first one 5 minutes after the last
full listing) is worked out with that policy, on the times this benchmark saw.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def timed_verdicts() -> tuple[Any, list[float]]:
    """A watcher's after-write hook (storing the health verdicts), timed apart from the scans:
    the hook, and the list its CPU and wall seconds add up in (the caller zeroes it before
    each scan)."""
    from stateglass.app.analysis.health.stored import storing_verdicts

    store = storing_verdicts()
    judge_cpu = [0.0, 0.0]  # CPU, wall

    def timed_store(db: Any, root: str, scan_at: Any) -> None:
        t, c = time.monotonic(), time.process_time()
        store(db, root, scan_at)
        judge_cpu[0] += time.process_time() - c
        judge_cpu[1] += time.monotonic() - t

    return timed_store, judge_cpu


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
    from stateglass.app.collecting import new_scanner
    from stateglass.collectors.scan.reconcile import ReconcilePolicy
    from tests.collectors.test_watch_scale import JOIN_SAMPLE, tile_join

    base = workdir / ("by-name" if by_name else "full")
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    cp, held = base / "cp", base / "held"
    batches = tile_join(JOIN_SAMPLE, cp, held, partitions, replayed)
    policy = ReconcilePolicy(every_scans=1000, every_s=1e9) if by_name else None
    store, judge_cpu = timed_verdicts()
    scanner = new_scanner(
        str(base / "sg.duckdb"), watcher=policy, after_write=store if by_name else None
    )
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


POLL_S = 0.05
LOGS = ("offsets", "commits")


def _wait(done: Callable[[], bool], watcher: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``done`` every :data:`POLL_S` while the watcher runs (an hour at most)."""
    deadline = time.monotonic() + 3600
    while not done():
        if watcher.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"watch ended or hung: {log.read_text()[-2000:]}")
        time.sleep(POLL_S)


def _mirrored_policy(flags: tuple[str, ...]) -> tuple[Any, list[float]]:
    """The ``ReconcilePolicy`` the watcher builds from ``flags``, on a clock this benchmark
    sets: which of the watcher's scans list every directory again (by default every 20th, or
    the first 5 minutes after the last full one)."""
    import dataclasses

    from stateglass.app.args import reconcile_policy
    from stateglass.app.cli import build_parser

    clock = [0.0]
    policy = reconcile_policy(build_parser().parse_args(["watch", *flags]))
    return dataclasses.replace(policy, clock=lambda: clock[0]), clock


def run_watch_process(
    partitions: int, workdir: Path, replayed: tuple[int, ...], flags: tuple[str, ...]
) -> tuple[float, list[tuple[float, float, bool]]]:
    """The real ``stateglass watch FLAGS`` on the tiled checkpoint: its first scan's wall
    seconds, and each held commit's (wall, watcher CPU) seconds from the rename of
    ``commits/N`` to the batch's row readable, and whether its scan listed in full."""
    from tests.collectors.test_watch_scale import (
        JOIN_SAMPLE,
        committed,
        cpu_seconds,
        judged,
        quiet,
        start_watch,
        stop,
        tile_join,
    )

    base = workdir / "watch-process"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    cp, held, db, log = base / "cp", base / "held", str(base / "sg.duckdb"), base / "watch.log"
    batches = tile_join(JOIN_SAMPLE, cp, held, partitions, replayed)
    policy, clock = _mirrored_policy(flags)
    watcher = start_watch(cp, db, log, *flags)
    times = []
    try:
        t = time.monotonic()
        _wait(lambda: b"watching" in log.read_bytes(), watcher, log)
        first = time.monotonic() - t
        clock[0] = time.monotonic()
        policy.listed(str(cp))
        for batch in replayed:
            quiet(watcher.pid, within_s=600)
            # The state and source files, then offsets/N and commits/N (last): see above.
            for rel in sorted(batches[batch], key=lambda r: r.split(os.sep)[0] in LOGS):
                os.rename(held / rel, cp / rel)
            t, c = time.monotonic(), cpu_seconds(watcher.pid)
            clock[0] = t
            full = policy.full_due(str(cp))
            _wait(lambda b=batch: b in committed(db), watcher, log)
            times.append((time.monotonic() - t, cpu_seconds(watcher.pid) - c, full))
            print(
                f"  batch {batch}: {times[-1][0]:.2f} s, {times[-1][1]:.2f} s CPU"
                + (", listed in full" if full else ""),
                file=sys.stderr,
            )
            # The scan's work ends with its verdicts stored; then the watcher's policy counts
            # it (as the watcher does, at the end of the scan).
            _wait(lambda: judged(db), watcher, log)
            clock[0] = time.monotonic()
            (policy.listed if full else policy.looked_up)(str(cp))
    finally:
        stop(watcher)
    shutil.rmtree(base)
    return first, times


def watch_process_report(
    partitions: int, workdir: Path, replayed: tuple[int, ...], flags: tuple[str, ...]
) -> None:
    """Markdown: where and when, then the real watcher's commit-to-row figures."""
    import datetime as dt

    from bench_watch import machine

    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"{started}, commit {head}, {machine()}; at start: {uptime}\n")
    before = os.getloadavg()[0]
    first, commits = run_watch_process(partitions, workdir, replayed, flags)
    print(
        f"| `{' '.join(('stateglass watch', *flags))}` process (wall / watcher CPU) | first scan | "
        f"each commit (batches {replayed[0]}-{replayed[-1]}; * listed in full) | p50 | p95 | "
        "load before → after |"
    )
    print("|---|---:|---|---:|---:|---|")
    each = ", ".join(f"{w:.1f}/{c:.1f}" + "*" * full for w, c, full in commits)
    for label, chosen in (("every commit", commits), ("by name", [t for t in commits if not t[2]])):
        if not chosen or (label == "by name" and len(chosen) == len(commits)):
            continue
        walls, cpus = [t[0] for t in chosen], [t[1] for t in chosen]
        stats = " | ".join(
            f"{percentile(walls, q):.2f} s / {percentile(cpus, q):.2f} s" for q in (50, 95)
        )
        print(
            f"| commit to row readable, {label} | {first:.1f} s | {each} | {stats} | "
            f"{before:.1f} → {os.getloadavg()[0]:.1f} |"
        )
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"\nat the end: {uptime}")


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
    parser.add_argument(
        "--watch-process",
        action="store_true",
        help="time commit-to-row of the real `stateglass watch` process instead",
    )
    parser.add_argument(
        "--watch-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="with --watch-process: a flag for `stateglass watch` (--watch-arg=--verbose)",
    )
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sg-by-name-"))
    replayed = tuple(range(12 - args.commits, 12))
    if args.watch_process:
        watch_process_report(args.partitions, workdir, replayed, tuple(args.watch_arg))
        return
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
