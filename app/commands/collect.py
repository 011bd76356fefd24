"""``stateglass collect``: checkpoints into the DuckDB database, once.

Examples::

    stateglass collect /data/checkpoints/orders /data/checkpoints/sessions
    stateglass collect sample_checkpoints/spark-4.3/agg-hdfs --db ./sg.duckdb --engine spark
    stateglass collect /data/checkpoints/orders --progress /var/log/spark-events

The default database is ``~/.stateglass/stateglass.duckdb``. A path that is not a checkpoint
is a one-line error with exit status 2; a bad file inside a checkpoint is recorded in the
``problems`` table and the collect goes on (exit status 0).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stateglass.app.args import add_collect_args


def add_parser(subparsers: Any) -> None:
    """Register ``collect`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "collect", help="scan checkpoints into the DuckDB database (incremental)"
    )
    add_collect_args(p)
    add_jobs_arg(p)


def add_jobs_arg(p: argparse.ArgumentParser) -> None:
    """``collect --jobs N``. ``watch`` has none: its re-scans count one new version per
    partition, too little to repay worker processes, and it runs threads, which a fork does
    not copy (docs/architecture.md, "Collect on every core")."""
    p.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="--engine local: partitions counted in N worker processes (default: one per CPU "
        "core, none for a small checkpoint; 1 = no worker processes)",
    )


def run(args: argparse.Namespace) -> int:
    """``stateglass collect``: scan each checkpoint once and print a one-line summary."""
    from stateglass.app.collecting import collect_progress, scan_all, scanner_for, summary_line
    from stateglass.app.memory import keep_freed_memory

    keep_freed_memory()
    scanner, roots = scanner_for(args)
    summaries, workers = scan_all(scanner, roots)
    print(summary_line(summaries, scanner.db.path, workers), file=sys.stderr)
    collect_progress(scanner.db, args.progress)
    return 0
