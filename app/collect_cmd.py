"""``stateglass collect`` and ``stateglass watch``: checkpoints into the DuckDB database.

Examples::

    stateglass collect /data/checkpoints/orders /data/checkpoints/sessions
    stateglass collect sample_checkpoints/spark-4.3/agg-hdfs --db ./sg.duckdb --engine spark
    stateglass watch /data/checkpoints/orders          # collect, then again after each batch
    stateglass collect /data/checkpoints/orders --progress /var/log/spark-events

The default database is ``~/.stateglass/stateglass.duckdb``. A path that is not a checkpoint
is a one-line error with exit status 2; a bad file inside a checkpoint is recorded in the
``problems`` table and the collect goes on (exit status 0).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, TextIO

from app.args import add_db_arg
from collectors.checkpoint import Checkpoint
from collectors.engines import ENGINES, get_engine

if TYPE_CHECKING:
    from collectors.db import Database
    from collectors.scan import Scanner, ScanSummary


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoints", nargs="+", metavar="CHECKPOINT", help="checkpoint directories")
    add_db_arg(p, "DuckDB database to write")
    p.add_argument(
        "--engine",
        choices=sorted(ENGINES),
        default="local",
        help="local: this process (default); spark: one Spark task per store partition",
    )
    p.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="Spark master for --engine spark (default local[*])",
    )
    add_progress_arg(p)


def add_progress_arg(p: argparse.ArgumentParser) -> None:
    """``--progress PATH`` (repeatable): Spark's progress events (issue 12)."""
    p.add_argument(
        "--progress",
        action="append",
        default=[],
        metavar="PATH",
        help="also read streaming progress from PATH: a Spark event-log directory "
        "(spark.eventLog.dir) or a StateGlassListener directory (repeatable)",
    )


def add_parser(subparsers: Any) -> None:
    """Register ``collect`` and ``watch`` on the CLI's subparsers."""
    p_collect = subparsers.add_parser(
        "collect", help="scan checkpoints into the DuckDB database (incremental)"
    )
    _add_common(p_collect)
    p_watch = subparsers.add_parser(
        "watch", help="collect, then collect again whenever the checkpoints change"
    )
    _add_common(p_watch)
    p_watch.add_argument(
        "--debounce", type=float, default=1.0, metavar="SECONDS", help="quiet time before a re-scan"
    )


class ProgressBar:
    """A one-line progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.label = label
        self.enabled = self.stream.isatty()

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled or total == 0:
            return
        width = 30
        filled = width * done // total
        self.stream.write(
            f"\r{self.label[-40:]:<40} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
        )
        if done == total:
            self.stream.write("\r" + " " * (width + 56) + "\r")
        self.stream.flush()


def _scanner(args: argparse.Namespace) -> tuple[Scanner, list[str]]:
    # Validate every path first: a typo fails before anything is written.
    roots = [Checkpoint.open(path).root for path in args.checkpoints]
    from app.watchers import refuse_db_inside

    refuse_db_inside(args.db, roots)  # the database never goes into a checkpoint
    from collectors.fs import LOCAL
    from collectors.progress import refuse_inside_checkpoint

    for path in args.progress:
        refuse_inside_checkpoint(LOCAL, os.path.abspath(os.path.expanduser(path)))
    # DuckDB takes a tenth of a second to import: only commands that use it pay for it.
    from collectors.db import Database
    from collectors.scan import Scanner

    db = Database(args.db)
    return Scanner(db, get_engine(args.engine, args.master)), roots


def collect_progress(db: Database, paths: list[str], quiet_when_empty: bool = False) -> None:
    """Read the ``--progress`` paths into the database, one line each on stderr."""
    if not paths:
        return
    from collectors.progress import collect_all

    for summary in collect_all(db, paths):
        if summary.files_read or not quiet_when_empty:
            print(summary.line(), file=sys.stderr, flush=True)


def _collect(scanner: Scanner, roots: list[str]) -> list[ScanSummary]:
    return [scanner.scan(root, ProgressBar(root)) for root in roots]


def _summary(summaries: list[ScanSummary], db_path: str) -> str:
    return (
        f"collected {len(summaries)} checkpoint(s) into {db_path}: "
        f"{sum(s.files_added for s in summaries)} new files, "
        f"{sum(s.versions for s in summaries)} state versions, "
        f"{sum(s.batches for s in summaries)} batches, "
        f"{sum(s.problems for s in summaries)} problems"
    )


def run(args: argparse.Namespace) -> int:
    """``stateglass collect``: scan each checkpoint once and print a one-line summary."""
    scanner, roots = _scanner(args)
    summaries = _collect(scanner, roots)
    print(_summary(summaries, scanner.db.path), file=sys.stderr)
    collect_progress(scanner.db, args.progress)
    return 0


def watch(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    """``stateglass watch``: collect, then re-collect each checkpoint after its writes settle."""
    from collectors.watch import CheckpointWatcher, Debouncer

    scanner, roots = _scanner(args)
    print(_summary(_collect(scanner, roots), scanner.db.path), file=sys.stderr)
    collect_progress(scanner.db, args.progress)
    halt = stop or threading.Event()
    if args.progress:
        # Event logs and listener files are polled: a re-read of an unchanged file is one
        # listing and a stat, and a growing one costs only its new events.
        threading.Thread(
            target=_poll_progress,
            args=(scanner.db, args.progress, halt, PROGRESS_POLL_S),
            name="stateglass-progress",
            daemon=True,
        ).start()

    def rescan(root: str) -> None:
        print(scanner.scan(root).line(), file=sys.stderr)

    watcher = CheckpointWatcher(roots, rescan, Debouncer(delay_s=args.debounce))
    print(f"watching {len(roots)} checkpoint(s); Ctrl-C to stop", file=sys.stderr)
    watcher.run(halt)
    return 0


PROGRESS_POLL_S = 2.0


def _poll_progress(db: Database, paths: list[str], stop: threading.Event, every_s: float) -> None:
    from collectors.errors import CheckpointError

    while not stop.wait(every_s):
        try:
            collect_progress(db, paths, quiet_when_empty=True)
        except CheckpointError as exc:
            # A log being rotated or rewritten: say so and try again next time.
            print(f"stateglass: error: {exc}", file=sys.stderr, flush=True)
