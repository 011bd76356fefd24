"""``stateglass watch``: collect checkpoints, then again whenever they change.

Examples::

    stateglass watch /data/checkpoints/orders          # collect, then again after each batch
    stateglass watch s3://bucket/cps --poll-interval 30

The dashboard's watcher child runs :func:`serve`: the same watch over a growing set of paths.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from stateglass.app.args import add_collect_args, add_watch_args, reconcile_policy

if TYPE_CHECKING:
    from stateglass.app.dashboard.watcher_child import ControlFile
    from stateglass.collectors.db.writer import Database
    from stateglass.collectors.scan.scanner import Scanner, ScanSummary

PROGRESS_POLL_S = 2.0


def add_parser(subparsers: Any) -> None:
    """Register ``watch`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "watch", help="collect, then collect again whenever the checkpoints change"
    )
    add_collect_args(p)
    add_watch_args(p)


def run(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    """``stateglass watch``: collect, then re-collect each checkpoint after its writes settle,
    until ``stop`` (or Ctrl-C).

    Quiet by default: one line per checkpoint collected at start, then only scans that found
    problems; ``--verbose`` prints every scan.
    """
    from stateglass.app.collecting import ProgressBar, scanner_for, summary_line
    from stateglass.collectors.errors import DatabaseBusy
    from stateglass.collectors.watch.events import CheckpointWatcher, Debouncer

    scanner, roots = scanner_for(args)
    _as_watcher(scanner, args)
    verbose = getattr(args, "verbose", False)
    summaries: list[ScanSummary | None] = []
    halt = stop or threading.Event()
    _start_progress(scanner.db, args.progress, halt)

    def first(root: str) -> None:
        try:
            summaries.append(scanner.scan(root, ProgressBar(root)))
        except DatabaseBusy as exc:
            # A reader (a dashboard judging health, a report) held the database past the
            # timeout: the checkpoint stays watched and its next commit scans it again,
            # rather than one slow reader ending a watch over a fleet.
            print(f"stateglass: error: {exc}; scanned again at its next change", file=sys.stderr)
            summaries.append(None)
        if len(summaries) == len(roots):
            done = [s for s in summaries if s is not None]
            print(summary_line(done, scanner.db.path), file=sys.stderr)
            print(f"watching {len(roots)} checkpoint(s); Ctrl-C to stop", file=sys.stderr)

    watcher = CheckpointWatcher(
        roots,
        _rescanner(scanner, verbose),
        Debouncer(delay_s=args.debounce),
        on_added=first,
        **_watcher_options(args),
    )
    watcher.run(halt)
    return 0


def serve(
    args: argparse.Namespace,
    control: ControlFile,
    follow: Callable[[ControlFile, Callable[[str], None], threading.Event], None],
    stop: threading.Event,
) -> int:
    """The dashboard's watcher child: watch every path ``follow`` reads from ``control``.

    A path that turns out not to be a checkpoint is one line on stderr; the others go on.
    """
    from stateglass.app.collecting import new_scanner
    from stateglass.collectors.watch.events import CheckpointWatcher, Debouncer

    scanner = new_scanner(args)
    _as_watcher(scanner, args)
    verbose = getattr(args, "verbose", False)
    _start_progress(scanner.db, list(getattr(args, "progress", None) or []), stop)

    def first(root: str) -> None:
        summary = _scan_or_say(scanner, root)
        if summary is not None:
            print(f"collected {summary.line()}", file=sys.stderr, flush=True)

    watcher = CheckpointWatcher(
        [],
        _rescanner(scanner, verbose),
        Debouncer(delay_s=args.debounce),
        on_added=first,
        **_watcher_options(args),
    )
    reader = threading.Thread(target=follow, args=(control, watcher.add, stop), daemon=True)
    reader.start()
    watcher.run(stop)
    reader.join(timeout=5)
    return 0


def _as_watcher(scanner: Scanner, args: argparse.Namespace) -> None:
    """A watcher's scans: by name between full listings, and each followed by the health
    verdicts the Overview and scrapes read (judged with ``--config``'s thresholds)."""
    from stateglass.app.analysis.health import load_config

    scanner.reconcile = reconcile_policy(args)
    scanner.judge = True
    scanner.health = load_config(getattr(args, "config", None))
    _gauges(scanner)


def _gauges(scanner: Scanner) -> None:
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


def _watcher_options(args: argparse.Namespace) -> dict[str, Any]:
    from stateglass.app import discovery
    from stateglass.collectors.watch.poll import DEFAULT_INTERVAL_S

    return {
        "poll": getattr(args, "poll", False),
        "poll_interval_s": getattr(args, "poll_interval", None) or DEFAULT_INTERVAL_S,
        "warn": discovery.warn,
    }


def _scan_or_say(scanner: Scanner, root: str) -> ScanSummary | None:
    """Scan ``root``; an error is one line on stderr and None, and the watch goes on (the
    next commit scans again)."""
    from stateglass.collectors.errors import CollectorError

    try:
        return scanner.scan(root)
    except CollectorError as exc:
        print(f"stateglass: error: {exc}", file=sys.stderr, flush=True)
        return None


def _rescanner(scanner: Scanner, verbose: bool) -> Callable[[str], None]:
    """The scan a watcher runs after each commit: quiet unless ``verbose`` or problems."""

    def rescan(root: str) -> None:
        summary = _scan_or_say(scanner, root)
        if summary is not None and (verbose or summary.problems):
            print(summary.line(), file=sys.stderr, flush=True)

    return rescan


def _start_progress(db: Database, paths: list[str], stop: threading.Event) -> None:
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
