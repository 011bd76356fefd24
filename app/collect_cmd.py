"""``stateglass collect`` and ``stateglass watch``: checkpoints into the DuckDB database.

Examples::

    stateglass collect /data/checkpoints/orders /data/checkpoints/sessions
    stateglass collect sample_checkpoints/spark-4.3/agg-hdfs --db ./sg.duckdb --engine spark
    stateglass watch /data/checkpoints/orders          # collect, then again after each batch

The default database is ``~/.stateglass/stateglass.duckdb``. A path that is not a checkpoint
is a one-line error with exit status 2; a bad file inside a checkpoint is recorded in the
``problems`` table and the collect goes on (exit status 0).
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from app import discovery
from app.args import add_db_arg
from collectors.engines import ENGINES, get_engine

if TYPE_CHECKING:
    from app.watchers import ControlFile
    from collectors.scan import Scanner, ScanSummary


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "checkpoints",
        nargs="+",
        metavar="PATH",
        help="checkpoint directories, or folders of them (searched, see below)",
    )
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
        help="Spark master for --engine spark: local[N] (default local[*]), spark://HOST:PORT, "
        "yarn or k8s://URL (see docs/spark-engine.md)",
    )
    discovery.add_arguments(p)


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
    add_watch_arguments(p_watch)


def add_watch_arguments(p: argparse.ArgumentParser) -> None:
    """How ``watch`` (and the dashboard's watcher) notices new batches."""
    p.add_argument(
        "--debounce", type=float, default=1.0, metavar="SECONDS", help="quiet time before a re-scan"
    )
    p.add_argument(
        "--poll-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often URLs (and --poll paths) are checked for a new commit (default 10)",
    )
    p.add_argument(
        "--poll",
        action="store_true",
        help="poll local paths too, instead of file system events (network mounts)",
    )
    p.add_argument("--verbose", action="store_true", help="print a line for every re-scan")


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
    roots = discovery.find(args.checkpoints, args)
    from app.watchers import refuse_db_inside

    refuse_db_inside(args.db, roots)  # the database never goes into a checkpoint
    return _new_scanner(args), roots


def _new_scanner(args: argparse.Namespace) -> Scanner:
    # DuckDB takes a tenth of a second to import: only commands that use it pay for it.
    from collectors.db import Database
    from collectors.scan import Scanner

    engine = get_engine(getattr(args, "engine", "local"), getattr(args, "master", None))
    return Scanner(Database(args.db), engine)


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
    return 0


def _watcher_options(args: argparse.Namespace) -> dict[str, Any]:
    from collectors.poll import DEFAULT_INTERVAL_S

    return {
        "poll": getattr(args, "poll", False),
        "poll_interval_s": getattr(args, "poll_interval", None) or DEFAULT_INTERVAL_S,
        "warn": discovery.warn,
    }


def watch(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    """``stateglass watch``: collect, then re-collect each checkpoint after its writes settle.

    Quiet by default: one line per checkpoint collected at start, then only scans that found
    problems; ``--verbose`` prints every scan.
    """
    from collectors.errors import CollectorError
    from collectors.watch import CheckpointWatcher, Debouncer

    scanner, roots = _scanner(args)
    verbose = getattr(args, "verbose", False)
    summaries: list[ScanSummary] = []

    def first(root: str) -> None:
        summaries.append(scanner.scan(root, ProgressBar(root)))
        if len(summaries) == len(roots):
            print(_summary(summaries, scanner.db.path), file=sys.stderr)
            print(f"watching {len(roots)} checkpoint(s); Ctrl-C to stop", file=sys.stderr)

    def rescan(root: str) -> None:
        try:
            summary = scanner.scan(root)
        except CollectorError as exc:
            # One line, and the watch goes on: the next commit scans again.
            print(f"stateglass: error: {exc}", file=sys.stderr, flush=True)
            return
        if verbose or summary.problems:
            print(summary.line(), file=sys.stderr, flush=True)

    watcher = CheckpointWatcher(
        roots,
        rescan,
        Debouncer(delay_s=args.debounce),
        on_added=first,
        **_watcher_options(args),
    )
    watcher.run(stop or threading.Event())
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
    from collectors.errors import CollectorError
    from collectors.watch import CheckpointWatcher, Debouncer

    scanner = _new_scanner(args)
    verbose = getattr(args, "verbose", False)

    def first(root: str) -> None:
        try:
            summary = scanner.scan(root)
        except CollectorError as exc:
            print(f"stateglass: error: {exc}", file=sys.stderr, flush=True)
            return
        print(f"collected {summary.line()}", file=sys.stderr, flush=True)

    def rescan(root: str) -> None:
        try:
            summary = scanner.scan(root)
        except CollectorError as exc:
            print(f"stateglass: error: {exc}", file=sys.stderr, flush=True)
            return
        if verbose or summary.problems:
            print(summary.line(), file=sys.stderr, flush=True)

    watcher = CheckpointWatcher(
        [], rescan, Debouncer(delay_s=args.debounce), on_added=first, **_watcher_options(args)
    )
    reader = threading.Thread(target=follow, args=(control, watcher.add, stop), daemon=True)
    reader.start()
    watcher.run(stop)
    reader.join(timeout=5)
    return 0
