"""``stateglass export``: one table or view of the history database to Parquet or CSV.

Examples::

    stateglass export --table state_versions -o versions.parquet
    stateglass export --db ./sg.duckdb --table batch_durations -o durations.csv \\
        --checkpoint /data/checkpoints/orders

The file is written by DuckDB's ``COPY`` from a read-only connection, so an export runs beside
a collector. Every column is described in ``docs/architecture.md``. StateGlass never writes
inside a checkpoint directory, so an output path inside one is refused.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from stateglass.app.args import add_db_arg
from stateglass.app.atomic import replacing
from stateglass.app.errors import AppError, OutputError

FORMATS = {".parquet": "PARQUET", ".csv": "CSV"}


def exportable() -> list[str]:
    """Tables and views of the database a user may export (not the internal schema_info)."""
    from stateglass.collectors.db.schema import TABLES
    from stateglass.collectors.db.views import VIEWS

    return sorted(n for n in (*TABLES, *VIEWS) if n != "schema_info")


def add_parser(subparsers: Any) -> None:
    """Register ``export`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "export", help="write one table or view of the history database to Parquet or CSV"
    )
    add_db_arg(p)
    p.add_argument(
        "--table", required=True, metavar="NAME", help="table or view, e.g. state_versions"
    )
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="FILE.parquet or FILE.csv")
    p.add_argument(
        "--checkpoint",
        default=None,
        metavar="CP",
        help="only the rows of this checkpoint (as it was collected)",
    )


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def run(args: argparse.Namespace) -> int:
    """``stateglass export``: COPY one table or view (optionally one checkpoint's rows)."""
    import duckdb

    from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint
    from stateglass.collectors.db.connection import existing_database
    from stateglass.collectors.db.read import reader
    from stateglass.collectors.db.schema_versions import schema_of

    names = exportable()
    if args.table not in names:
        raise AppError(f"unknown table {args.table!r}; choose one of: {', '.join(names)}")
    out = os.path.abspath(os.path.expanduser(args.output))
    suffix = os.path.splitext(out)[1].lower()
    if suffix not in FORMATS:
        raise AppError(f"{out}: the output must end in .parquet or .csv")
    db_path = existing_database(args.db)
    if not os.path.isdir(os.path.dirname(out)):
        raise OutputError(f"{out}: cannot write output (no such directory)")
    with reader(db_path) as conn:
        # What a reader shows of an older database as empty would be an empty file here.
        schema_of(conn, db_path).require(args.table)
        known = [r[0] for r in conn.execute("SELECT checkpoint FROM checkpoints").fetchall()]
        refuse_inside_checkpoint(out, "-o", known)
        query = f"SELECT * FROM {args.table}"
        if args.checkpoint is not None:
            from stateglass.collectors.remote import canonical

            root = canonical(args.checkpoint)  # a URL as the database keeps it
            if root not in known:
                raise AppError(f"{root}: not in the database {db_path}; collect it first")
            query += f" WHERE checkpoint = {_sql_string(root)} ORDER BY ALL"
        else:
            query += " ORDER BY ALL"
        options = "FORMAT PARQUET" if FORMATS[suffix] == "PARQUET" else "FORMAT CSV, HEADER"
        try:
            with replacing(out) as tmp:
                conn.execute(f"COPY ({query}) TO {_sql_string(tmp)} ({options})")
            count = conn.execute(f"SELECT count(*) FROM ({query})").fetchall()[0][0]
        except duckdb.Error as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise OutputError(f"{out}: cannot write {suffix[1:]} ({why})") from exc
    print(f"wrote {count} rows of {args.table} to {out}", file=sys.stderr)
    return 0
