"""``stateglass maintain``: apply the history database's retention, roll-ups and compaction.

Examples::

    stateglass maintain --db ~/.stateglass/stateglass.duckdb
    stateglass maintain --db ./sg.duckdb --config stateglass.toml --checkpoint /data/cp

``watch`` and the dashboard's watcher do the same on their own every so many versions; this
runs it by hand (after changing ``[history]``, say). What is kept at what resolution is in
:mod:`stateglass.collectors.db.history_settings`; nothing a page, rule or report shows is lost.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from stateglass.app.args import add_db_arg


def add_parser(subparsers: Any) -> None:
    """Register ``maintain`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "maintain", help="roll up old history and compact purged files' rows in the database"
    )
    add_db_arg(p)
    p.add_argument(
        "--config", default=None, metavar="FILE", help="TOML config file; its [history] table"
    )
    p.add_argument(
        "--checkpoint", default=None, metavar="CP", help="only this checkpoint (as collected)"
    )


def run(args: argparse.Namespace) -> int:
    """``stateglass maintain``: one line per checkpoint maintained."""
    from stateglass.app.collecting import open_writer
    from stateglass.app.settings import settings_of
    from stateglass.collectors.db.connection import existing_database

    # The writer would make a new database: maintaining one that is not there is a typo.
    db_path = existing_database(args.db)
    settings = settings_of(args)
    results = open_writer(db_path, settings).maintain(args.checkpoint)
    for r in results:
        kept = (
            "all versions at full resolution"
            if r.full_from_version is None
            else f"full resolution from version {r.full_from_version}"
        )
        print(
            f"{r.checkpoint}: {kept}; {r.versions_rolled_up:,} partition rows rolled up, "
            f"{r.files_compacted:,} purged files' rows compacted",
            file=sys.stderr,
        )
    print(settings.history.describe(), file=sys.stderr)
    return 0
