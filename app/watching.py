"""What ``stateglass watch`` and the dashboard's watcher child share: a watcher's scanner, the
watcher that rescans a checkpoint after each commit, and the ``--progress`` polling.

Both build their scanner here (:func:`watcher_scanner`), through the one factory
(``app/collecting.py``): looking new commits' files up by name, checking their checksums after
writing their rows, and storing the health verdicts after each scan.

Example::

    scanner = watcher_scanner(args)
    watcher = checkpoint_watcher(args, scanner, roots, on_added=first_scan)
    watcher.run(stop)
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stateglass.collectors.db.writer import Database
    from stateglass.collectors.scan.scanner import Scanner, ScanSummary
    from stateglass.collectors.watch.events import CheckpointWatcher

PROGRESS_POLL_S = 2.0


def watcher_scanner(args: argparse.Namespace) -> Scanner:
    """A watcher's scanner for ``args`` (no path to check: the dashboard's child is handed its
    paths one by one), with the gauges a soak's memory report counts."""
    from stateglass.app.collecting import scanner_from_args

    scanner = scanner_from_args(args, watcher=True)
    gauges(scanner)
    return scanner


def gauges(scanner: Scanner) -> None:
    """What a soak's memory report counts of this watcher (app/memory_trace.py)."""
    from stateglass.app.memory_trace import gauge
    from stateglass.collectors.checkpoints.listing import classify
    from stateglass.collectors.scan.remembered import sizes
    from stateglass.collectors.stores.hdfs import parse_hdfs_name

    gauge("names_cached", lambda: classify.cache_info().currsize)
    gauge("hdfs_names_cached", lambda: parse_hdfs_name.cache_info().currsize)
    gauge("carried", lambda: len(scanner.carry))

    def remembered(kind: str) -> Callable[[], int]:
        return lambda: sizes(scanner.remembered())[kind]

    for kind in ("versions", "watermarks", "files", "listed_files"):
        gauge(f"remembered_{kind}", remembered(kind))


def checkpoint_watcher(
    args: argparse.Namespace,
    scanner: Scanner,
    roots: Iterable[str],
    on_added: Callable[[str], None],
) -> CheckpointWatcher:
    """The watcher of ``roots`` that rescans each after its commits with ``scanner``: quiet
    unless ``--verbose`` or problems. ``on_added`` runs the first scan of each root."""
    from stateglass.app import discovery
    from stateglass.collectors.watch.events import CheckpointWatcher, Debouncer
    from stateglass.collectors.watch.poll import DEFAULT_INTERVAL_S

    verbose = getattr(args, "verbose", False)

    def rescan(root: str) -> None:
        summary = scan_or_say(scanner, root)
        if summary is not None and (verbose or summary.problems):
            print(summary.line(), file=sys.stderr, flush=True)

    return CheckpointWatcher(
        list(roots),
        rescan,
        Debouncer(delay_s=args.debounce),
        on_added=on_added,
        poll=getattr(args, "poll", False),
        poll_interval_s=getattr(args, "poll_interval", None) or DEFAULT_INTERVAL_S,
        warn=discovery.warn,
    )


def scan_or_say(scanner: Scanner, root: str) -> ScanSummary | None:
    """Scan ``root``; an error is one line on stderr and None, and the watch goes on (the
    next commit scans again)."""
    from stateglass.collectors.errors import CollectorError

    try:
        return scanner.scan(root)
    except CollectorError as exc:
        print(f"stateglass: error: {exc}", file=sys.stderr, flush=True)
        return None


def start_progress(db: Database, paths: list[str], stop: threading.Event) -> None:
    """Collect the ``--progress`` paths once, then poll them in a thread until ``stop``.

    Event logs and listener files are polled: a re-read of an unchanged file is one listing
    and a stat, and a growing one costs only its new events.
    """
    from stateglass.app.collecting import collect_progress

    if not paths:
        return
    collect_progress(db, paths)
    threading.Thread(
        target=_poll_progress,
        args=(db, paths, stop, PROGRESS_POLL_S),
        name="stateglass-progress",
        daemon=True,
    ).start()


def _poll_progress(db: Database, paths: list[str], stop: threading.Event, every_s: float) -> None:
    from stateglass.app.collecting import collect_progress
    from stateglass.collectors.errors import CollectorError

    while not stop.wait(every_s):
        try:
            collect_progress(db, paths, quiet_when_empty=True)
        except CollectorError as exc:
            # A log being rotated or rewritten: say so and try again next time.
            print(f"stateglass: error: {exc}", file=sys.stderr, flush=True)
