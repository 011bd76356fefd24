"""What the commands that collect share: the one factory of scanners, the database writer
with the ``[history]`` of ``--config``, the progress bar, the one-line summaries, and the
``--progress`` event logs.

``collect``, ``watch``, ``dashboard``, ``report`` and ``check`` all collect checkpoints into
the DuckDB database before they do anything else, each with a scanner from
:func:`new_scanner` (the benchmarks too).

Example::

    scanner, roots = scanner_for(args)        # every path checked before anything is written
    summaries, workers = scan_all(scanner, roots)
    print(summary_line(summaries, scanner.db.path, workers), file=sys.stderr)
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, TextIO

from stateglass.app import discovery
from stateglass.app.args import reconcile_policy
from stateglass.app.errors import AppError
from stateglass.app.settings import Settings, settings_of
from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint
from stateglass.collectors.engines import Engine, get_engine

if TYPE_CHECKING:
    from stateglass.collectors.db.writer import Database
    from stateglass.collectors.scan.reconcile import ReconcilePolicy
    from stateglass.collectors.scan.scanner import AfterWrite, Scanner, ScanSummary


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


def scanner_for(args: argparse.Namespace, watcher: bool = False) -> tuple[Scanner, list[str]]:
    """The scanner ``args`` ask for (a watcher's with ``watcher``) and the checkpoints to scan,
    every path validated first: a typo fails before anything is written."""
    # Callers that build their own Namespace (the watcher child, tests) may leave it out.
    args.progress = list(getattr(args, "progress", None) or [])
    if getattr(args, "jobs", 1) < 0:
        raise AppError(f"--jobs {args.jobs}: give 0 (one per core), 1 (none) or more")
    if not args.checkpoints and not args.progress:
        raise AppError("give at least one CHECKPOINT, or --progress PATH")
    roots = discovery.find(args.checkpoints, args) if args.checkpoints else []
    refuse_inside_checkpoint(args.db, "--db", roots)
    if args.progress:
        # Event-log parsing is imported only when asked for: `collect` starts faster.
        from stateglass.collectors.progress import check_location

        args.progress = [check_location(path) for path in args.progress]
    return scanner_from_args(args, watcher), roots


def scanner_from_args(args: argparse.Namespace, watcher: bool = False) -> Scanner:
    """The scanner a command's arguments ask for, its paths not checked (see
    :func:`scanner_for`): ``--db``, ``--engine``, ``--master``, ``--jobs``,
    ``--no-eviction-audit``, ``--config``; with ``watcher``, ``--reconcile-*`` too."""
    # Without --jobs (watch, the dashboard's watcher) chains stay in-process: see add_jobs_arg
    # in commands/collect.py.
    jobs = getattr(args, "jobs", 1)
    engine = get_engine(getattr(args, "engine", "local"), getattr(args, "master", None), jobs)
    return new_scanner(
        args.db,
        settings_of(args),
        engine,
        audit=getattr(args, "eviction_audit", True),
        watcher=reconcile_policy(args) if watcher else None,
    )


def new_scanner(
    db_path: str,
    settings: Settings | None = None,
    engine: Engine | None = None,
    *,
    audit: bool = True,
    watcher: ReconcilePolicy | None = None,
    after_write: AfterWrite | None = None,
) -> Scanner:
    """The one way a scanner is built: writing ``db_path`` (with ``settings.history``) and
    counting with ``engine`` (default: local, in-process).

    A watcher's scanner (``watcher``: when it lists every store directory again) looks new
    commits' files up by name, checks their checksums right after writing their rows, and
    then stores the health verdicts judged with ``settings.health``; ``after_write`` runs
    instead of that (a benchmark times it so).

    Example::

        new_scanner("sg.duckdb", load_settings("sg.toml"), watcher=ReconcilePolicy()).scan(cp)
    """
    # DuckDB takes a tenth of a second to import: only commands that use it pay for it.
    from stateglass.collectors.scan.scanner import Scanner

    settings = settings or Settings()
    if watcher is not None and after_write is None:
        from stateglass.app.analysis.health.stored import storing_verdicts

        after_write = storing_verdicts(settings.health)
    return Scanner(
        open_writer(db_path, settings),
        engine,
        audit=audit,
        reconcile=watcher,
        after_write=after_write,
    )


def open_writer(db_path: str, settings: Settings) -> Database:
    """The database writer at ``db_path``, keeping the history ``settings.history`` says."""
    from stateglass.collectors.db.writer import Database

    return Database(db_path, history=settings.history)


def scan_all(scanner: Scanner, roots: list[str]) -> tuple[list[ScanSummary], int]:
    """Each checkpoint scanned once; and the most worker processes a scan used."""
    summaries, workers = [], 0
    for root in roots:
        summaries.append(scanner.scan(root, ProgressBar(root)))
        workers = max(workers, getattr(scanner.engine, "last_workers", 0))
    return summaries, workers


def summary_line(summaries: list[ScanSummary], db_path: str, workers: int = 0) -> str:
    """``collected N checkpoint(s) into DB: …``, the totals of ``summaries``."""
    return (
        f"collected {len(summaries)} checkpoint(s) into {db_path}: "
        f"{sum(s.files_added for s in summaries)} new files, "
        f"{sum(s.versions for s in summaries)} state versions, "
        f"{sum(s.batches for s in summaries)} batches, "
        f"{sum(s.problems for s in summaries)} problems"
    ) + (f" (partitions counted in {workers} worker processes)" if workers else "")


def collect_progress(db: Database, paths: list[str], quiet_when_empty: bool = False) -> None:
    """Read the ``--progress`` paths into the database, one line each on stderr."""
    if not paths:
        return
    from stateglass.collectors.progress import collect_all

    for summary in collect_all(db, paths):
        if summary.files_read or not quiet_when_empty:
            print(summary.line(), file=sys.stderr, flush=True)
