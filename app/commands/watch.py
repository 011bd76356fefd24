"""``stateglass watch``: collect checkpoints, then again whenever they change.

Examples::

    stateglass watch /data/checkpoints/orders          # collect, then again after each batch
    stateglass watch s3://bucket/cps --poll-interval 30

The dashboard's watcher child (``app/dashboard/watcher_child.py``) runs the same watch over a
growing set of paths; what both share is in ``app/watching.py``.
"""

from __future__ import annotations

import argparse
import sys
import threading
from typing import TYPE_CHECKING, Any

from stateglass.app.args import add_collect_args, add_watch_args

if TYPE_CHECKING:
    from stateglass.collectors.scan.scanner import ScanSummary


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
    problems; ``--verbose`` prints every scan. SIGTERM or SIGHUP ends it after the scan in
    progress (a second one at once), with the exit status of a command they stop.
    """
    from stateglass.app.atomic import Terminated, signals_stop
    from stateglass.app.collecting import ProgressBar, scanner_for, summary_line
    from stateglass.app.watching import checkpoint_watcher, gauges, start_progress
    from stateglass.collectors.errors import DatabaseBusy

    scanner, roots = scanner_for(args, watcher=True)
    gauges(scanner)
    summaries: list[ScanSummary | None] = []
    halt = stop or threading.Event()
    start_progress(scanner.db, args.progress, halt)

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

    with signals_stop(halt) as received:
        checkpoint_watcher(args, scanner, roots, on_added=first).run(halt)
    if received:
        # Exit 128 + signal with its one line, as every command a signal stops.
        raise Terminated(received[0])
    return 0
