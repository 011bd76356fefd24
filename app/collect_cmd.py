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
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from stateglass.app import discovery
from stateglass.app.args import add_db_arg
from stateglass.app.memory import keep_freed_memory
from stateglass.collectors.engines import ENGINES, get_engine

if TYPE_CHECKING:
    from stateglass.app.watchers import ControlFile
    from stateglass.collectors.db import Database
    from stateglass.collectors.scan import Scanner, ScanSummary


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "checkpoints",
        nargs="*",
        metavar="PATH",
        help="checkpoint directories or URLs, or folders of them (searched, see below); "
        "none: only the --progress paths",
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
    p.add_argument(
        "--no-eviction-audit",
        dest="eviction_audit",
        action="store_false",
        help="skip the eviction audit (it decodes the event time of every key at every new "
        "version of a store Spark evicts by event time; default: audit)",
    )
    discovery.add_arguments(p)
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
    add_jobs_arg(p_collect)
    p_watch = subparsers.add_parser(
        "watch", help="collect, then collect again whenever the checkpoints change"
    )
    _add_common(p_watch)
    add_watch_arguments(p_watch)


def add_jobs_arg(p: argparse.ArgumentParser) -> None:
    """``collect --jobs N`` (issue 14). ``watch`` has none: its re-scans count one new version
    per partition, too little to repay worker processes, and it runs threads, which a fork
    does not copy (docs/architecture.md, "Collect on every core")."""
    p.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="--engine local: partitions counted in N worker processes (default: one per CPU "
        "core, none for a small checkpoint; 1 = no worker processes)",
    )


def add_watch_arguments(p: argparse.ArgumentParser) -> None:
    """How ``watch`` (and the dashboard's watcher) notices new batches."""
    p.add_argument(
        "--debounce",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="quiet time before a re-scan (default 1)",
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
    # Callers that build their own Namespace (the watcher child, tests) may leave it out.
    args.progress = list(getattr(args, "progress", None) or [])
    if getattr(args, "jobs", 1) < 0:
        from stateglass.app.errors import AppError

        raise AppError(f"--jobs {args.jobs}: give 0 (one per core), 1 (none) or more")
    # Validate every path first: a typo fails before anything is written.
    if not args.checkpoints and not args.progress:
        from stateglass.app.errors import AppError

        raise AppError("give at least one CHECKPOINT, or --progress PATH")
    roots = discovery.find(args.checkpoints, args) if args.checkpoints else []
    from stateglass.app.watchers import refuse_db_inside

    refuse_db_inside(args.db, roots)  # the database never goes into a checkpoint
    if args.progress:
        # Event-log parsing is imported only when asked for (issue 14: `collect`'s start-up).
        from stateglass.collectors.progress import check_location

        args.progress = [check_location(path) for path in args.progress]
    return _new_scanner(args), roots


def _new_scanner(args: argparse.Namespace) -> Scanner:
    # DuckDB takes a tenth of a second to import: only commands that use it pay for it.
    from stateglass.collectors.db import Database
    from stateglass.collectors.scan import Scanner

    # Without --jobs (watch, the dashboard's watcher): chains in-process, see add_jobs_arg.
    jobs = getattr(args, "jobs", 1)
    engine = get_engine(getattr(args, "engine", "local"), getattr(args, "master", None), jobs)
    return Scanner(Database(args.db), engine, audit=getattr(args, "eviction_audit", True))


def collect_progress(db: Database, paths: list[str], quiet_when_empty: bool = False) -> None:
    """Read the ``--progress`` paths into the database, one line each on stderr."""
    if not paths:
        return
    from stateglass.collectors.progress import collect_all

    for summary in collect_all(db, paths):
        if summary.files_read or not quiet_when_empty:
            print(summary.line(), file=sys.stderr, flush=True)


def _collect(scanner: Scanner, roots: list[str]) -> tuple[list[ScanSummary], int]:
    """Each checkpoint scanned once; and the most worker processes a scan used."""
    summaries, workers = [], 0
    for root in roots:
        summaries.append(scanner.scan(root, ProgressBar(root)))
        workers = max(workers, getattr(scanner.engine, "last_workers", 0))
    return summaries, workers


def _summary(summaries: list[ScanSummary], db_path: str, workers: int = 0) -> str:
    return (
        f"collected {len(summaries)} checkpoint(s) into {db_path}: "
        f"{sum(s.files_added for s in summaries)} new files, "
        f"{sum(s.versions for s in summaries)} state versions, "
        f"{sum(s.batches for s in summaries)} batches, "
        f"{sum(s.problems for s in summaries)} problems"
    ) + (f" (partitions counted in {workers} worker processes)" if workers else "")


def run(args: argparse.Namespace) -> int:
    """``stateglass collect``: scan each checkpoint once and print a one-line summary."""
    keep_freed_memory()
    scanner, roots = _scanner(args)
    summaries, workers = _collect(scanner, roots)
    print(_summary(summaries, scanner.db.path, workers), file=sys.stderr)
    collect_progress(scanner.db, args.progress)
    return 0


def _watcher_options(args: argparse.Namespace) -> dict[str, Any]:
    from stateglass.collectors.poll import DEFAULT_INTERVAL_S

    return {
        "poll": getattr(args, "poll", False),
        "poll_interval_s": getattr(args, "poll_interval", None) or DEFAULT_INTERVAL_S,
        "warn": discovery.warn,
    }


def _rescanner(scanner: Scanner, verbose: bool) -> Callable[[str], None]:
    """The scan a watcher runs after each commit: quiet unless ``verbose`` or problems."""
    from stateglass.collectors.errors import CollectorError

    def rescan(root: str) -> None:
        try:
            summary = scanner.scan(root)
        except CollectorError as exc:
            # One line, and the watch goes on: the next commit scans again.
            print(f"stateglass: error: {exc}", file=sys.stderr, flush=True)
            return
        if verbose or summary.problems:
            print(summary.line(), file=sys.stderr, flush=True)

    return rescan


def watch(args: argparse.Namespace, stop: threading.Event | None = None) -> int:
    """``stateglass watch``: collect, then re-collect each checkpoint after its writes settle.

    Quiet by default: one line per checkpoint collected at start, then only scans that found
    problems; ``--verbose`` prints every scan.
    """
    from stateglass.collectors.watch import CheckpointWatcher, Debouncer

    scanner, roots = _scanner(args)
    verbose = getattr(args, "verbose", False)
    summaries: list[ScanSummary] = []
    halt = stop or threading.Event()
    _start_progress(scanner.db, args.progress, halt)

    def first(root: str) -> None:
        summaries.append(scanner.scan(root, ProgressBar(root)))
        if len(summaries) == len(roots):
            print(_summary(summaries, scanner.db.path), file=sys.stderr)
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
    from stateglass.collectors.errors import CollectorError
    from stateglass.collectors.watch import CheckpointWatcher, Debouncer

    scanner = _new_scanner(args)
    verbose = getattr(args, "verbose", False)
    _start_progress(scanner.db, list(getattr(args, "progress", None) or []), stop)

    def first(root: str) -> None:
        try:
            summary = scanner.scan(root)
        except CollectorError as exc:
            print(f"stateglass: error: {exc}", file=sys.stderr, flush=True)
            return
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


PROGRESS_POLL_S = 2.0


def _start_progress(db: Database, paths: list[str], stop: threading.Event) -> None:
    """Collect the ``--progress`` paths once, then poll them in a thread until ``stop``.

    Event logs and listener files are polled: a re-read of an unchanged file is one listing
    and a stat, and a growing one costs only its new events.
    """
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
    from stateglass.collectors.errors import CollectorError

    while not stop.wait(every_s):
        try:
            collect_progress(db, paths, quiet_when_empty=True)
        except CollectorError as exc:
            # A log being rotated or rewritten: say so and try again next time.
            print(f"stateglass: error: {exc}", file=sys.stderr, flush=True)
