"""Command-line arguments several subcommands share."""

from __future__ import annotations

import argparse

from stateglass.collectors.locations import DEFAULT_DB


def add_db_arg(p: argparse.ArgumentParser, what: str = "DuckDB history database") -> None:
    """``--db PATH``, defaulting to :data:`stateglass.collectors.locations.DEFAULT_DB`."""
    p.add_argument(
        "--db", default=DEFAULT_DB, metavar="PATH", help=f"{what} (default: {DEFAULT_DB})"
    )
