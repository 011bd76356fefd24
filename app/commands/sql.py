"""``stateglass sql``: ask the state of every checkpoint under the roots in SQL (DuckDB).

Examples::

    stateglass sql sample_checkpoints --tables
    stateglass sql sample_checkpoints -e "SELECT count(*) FROM agg_hdfs.op0_default"
    stateglass sql /data/checkpoints -f question.sql --format parquet -o answer.parquet
    echo "SELECT * FROM orders.op0_default LIMIT 5" | stateglass sql /data/checkpoints
    stateglass sql /data/checkpoints            # an interactive prompt
    stateglass sql s3://bucket/jobs --engine spark --master spark://m:7077 \
        --scratch s3://bucket/tmp -e "SELECT count(*) FROM orders.op0_default"
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from stateglass.app import discovery
from stateglass.app.args import add_master_arg, add_output_args
from stateglass.app.errors import AppError
from stateglass.collectors.locations import DEFAULT_DB

if TYPE_CHECKING:
    from stateglass.collectors.catalog.spark_decoding import SparkDecoding

FORMATS = ("table", "csv", "jsonl", "parquet")
DEFAULT_MAX_ROWS = 1000  # rows a text table holds: it is printed whole, so it is kept in memory

BATCH_HELP = """\
Every checkpoint is a schema, named for its folder (orders-v2 -> orders_v2; where two
folders share a name, their parents join in: orders_checkpoint, clicks_checkpoint; so a
name depends on the other checkpoints found), every store a table:
SCHEMA.op<operator>_<store> (op0_default, op0_left_keytonumvalues; transformWithState:
op0_<variable>, op0_timers), SCHEMA.<table>_changes its change feed,
SCHEMA.state_metadata, .batches, .offsets, .commits; the history database is `history`.
--tables lists them all.

A state table reads the last committed batch. To read another retained batch, pick it
with its batch_id column and a constant (=, IN, BETWEEN): the one way.
    SELECT * FROM orders.op0_default WHERE batch_id = 41
The constant must be an integer: batch_id compared with a subquery, a join, a cast of
batch_id or a decimal (= 41.0) picks no batch, so the table reads the last one (a note on
stderr says so) and the filter keeps rows only if that is the batch it names. A predicate
on partition_id reads only those partitions:
    SELECT count(*) FROM orders.op0_default WHERE partition_id = 3

With --engine spark the stores a query reads are decoded by the Spark engine of
collect (executors run StateGlass's decoders) into Parquet under --scratch, which the
session reads: same rows, same columns and types. A second query over the same batches
reuses the files; they are removed at exit unless --keep-scratch.
    stateglass sql /data/checkpoints --engine spark --master spark://HOST:7077 -e "..."

The session is read-only and confined to the roots: no file reads outside them, no
COPY … TO, ATTACH of a file, INSTALL or LOAD, no SET that loosens a limit; each query has
a time and a memory limit (tables a query creates live in the session's memory, under the
same limit). A refused or stopped query prints one line and exits with status 2.
"""


def add_parser(subparsers: Any) -> None:
    """Register ``sql`` on the CLI's subparsers."""
    from stateglass.collectors.catalog.limits import SqlLimits

    limits = SqlLimits()
    p = subparsers.add_parser(
        "sql",
        help="ask the state in SQL: every checkpoint a schema, every store a table",
        description="Ask the state of every checkpoint under the roots in SQL (DuckDB). "
        "With no -e, -f or piped SQL: an interactive prompt.",
        epilog=BATCH_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "roots",
        nargs="+",
        metavar="ROOT",
        help="checkpoint directories or URLs, or folders of them (searched as collect does)",
    )
    query = p.add_mutually_exclusive_group()
    query.add_argument(
        "-e",
        "--execute",
        metavar="SQL",
        help="run SQL (statements end with ;, each runs, the last one's rows are printed)",
    )
    query.add_argument("-f", "--file", metavar="FILE", help="run the SQL in FILE")
    query.add_argument(
        "--tables",
        action="store_true",
        help="list the catalog: schema, table, checkpoint, operator_id, store_name, "
        "state_var, kind (state, changes, timers, metadata, history)",
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table (default; cells cut at 40 characters); csv; jsonl: one JSON object per "
        "row, state columns as Spark's toJSON; parquet (needs -o)",
    )
    add_output_args(p)
    p.add_argument(
        "--db",
        default=None,
        metavar="PATH",
        help=f"history database, attached read-only as `history` (default: {DEFAULT_DB} "
        "when it exists)",
    )
    p.add_argument(
        "--time-limit",
        type=float,
        default=limits.time_s,
        metavar="SECONDS",
        help=f"stop a query after this long (default {limits.time_s:g})",
    )
    p.add_argument(
        "--memory-limit",
        default=f"{limits.memory_bytes >> 20}MiB",
        metavar="SIZE",
        help=f"DuckDB's memory for a query: 256MiB, 2GiB (default {limits.memory_bytes >> 20}MiB)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="store partitions a query decodes at once, in threads (default: a core each, at "
        f"most 4; {limits.remote_decoders} on an object store; 1 = one after the other)",
    )
    p.add_argument(
        "--max-rows",
        type=int,
        default=DEFAULT_MAX_ROWS,
        metavar="N",
        help=f"--format table prints at most N rows (default {DEFAULT_MAX_ROWS}); "
        "the other formats stream every row",
    )
    add_engine_args(p)
    discovery.add_arguments(p)


def add_engine_args(p: argparse.ArgumentParser) -> None:
    """``--engine``, ``--master``, ``--scratch``, ``--keep-scratch``."""
    p.add_argument(
        "--engine",
        choices=("local", "spark"),
        default="local",
        help="who decodes the stores a query reads: local, this process (default); spark, "
        "the Spark engine of collect, on a cluster, into Parquet this session reads",
    )
    add_master_arg(p)
    p.add_argument(
        "--scratch",
        default=None,
        metavar="DIR",
        help="--engine spark: where executors write the decoded Parquet, a folder or URL "
        "(s3://, gs://, hdfs://) the driver and every executor reach, outside every "
        "checkpoint (default: a temporary folder here)",
    )
    p.add_argument(
        "--keep-scratch",
        action="store_true",
        help="--engine spark: keep the decoded Parquet when the session ends (default: removed)",
    )


def spark_decoding(args: argparse.Namespace) -> SparkDecoding | None:
    """The Spark decoding ``--engine spark`` asks for (None: decode here), its scratch
    folder refused when it lies in a checkpoint."""
    if args.engine != "spark":
        for flag, given in (("--master", args.master), ("--scratch", args.scratch)):
            if given is not None:
                raise AppError(f"{flag} is for --engine spark")
        if args.keep_scratch:
            raise AppError("--keep-scratch is for --engine spark")
        return None
    from stateglass.collectors.catalog.spark_decoding import SparkDecoding
    from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint

    if args.scratch is not None:
        refuse_inside_checkpoint(args.scratch, "--scratch", args.roots)
    return SparkDecoding(args.master, args.scratch, args.keep_scratch)


def history_path(db: str | None) -> str | None:
    """The history database to attach: ``--db`` (which must exist), else the default if it
    exists."""
    if db is None:
        default = os.path.expanduser(DEFAULT_DB)
        return default if os.path.exists(default) else None
    from stateglass.collectors.db.connection import existing_database

    return existing_database(db)


def query_text(args: argparse.Namespace) -> str | None:
    """The SQL of ``-e``, ``-f`` or a pipe on stdin; None: open the prompt."""
    if args.execute is not None:
        return str(args.execute)
    if args.file is not None:
        try:
            with open(args.file, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise AppError(f"{args.file}: cannot read the SQL ({exc})") from exc
    if not sys.stdin.isatty():
        return sys.stdin.read()
    return None


def run(args: argparse.Namespace) -> int:
    """``stateglass sql``: list the catalog, run the query, or open the prompt."""
    from stateglass.app.memory import keep_freed_memory
    from stateglass.app.notebook import sql_limits
    from stateglass.app.render.arrow_values import spark_text
    from stateglass.app.sql_output import (
        CATALOG_LISTING,
        check_output,
        open_result,
        unpicked_batch_note,
    )
    from stateglass.collectors.catalog import SqlSession
    from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint

    history = history_path(args.db)
    text = None if args.tables else query_text(args)
    # Only the prompt runs a next query that decoded partitions could serve.
    prompting = text is None and not args.tables
    limits = sql_limits(args.time_limit, args.memory_limit, args.jobs, keep_decoded=prompting)
    if text is not None and not text.strip():
        raise AppError("no SQL to run (give -e SQL, -f FILE or SQL on stdin)")
    check_output(args.format, args.output, args.time_zone)
    if args.max_rows < 1:
        raise AppError(f"--max-rows: must be 1 or more, got {args.max_rows}")
    spark = spark_decoding(args)
    keep_freed_memory()
    with SqlSession(
        args.roots,
        history=history,
        # The prompt stays open: a copy, so that the collector can go on writing the file.
        copy_history=prompting,
        limits=limits,
        discovery=discovery.limits(args),
        text_form=spark_text(args.time_zone),
        warn=discovery.warn,
        spark=spark,
    ) as session:
        found = list(session.schemas().values())
        if args.output is not None:
            refuse_inside_checkpoint(args.output, "-o", found)
        if spark is not None:
            refuse_inside_checkpoint(spark.folder, "--scratch", found)
        if prompting:
            from stateglass.app.sql_prompt import prompt

            return prompt(session, args)
        query = CATALOG_LISTING if args.tables else str(text)
        fmt, path, zone = args.format, args.output, args.time_zone
        with (
            open_result(
                fmt, path, zone, args.max_rows, listing=args.tables, names=session.repeated_names
            ) as out,
            session.stream(query) as reader,
        ):
            out.write(reader)
        note = unpicked_batch_note(query, session.last_batch_read)
        if note is not None:
            print(f"stateglass: note: {note}", file=sys.stderr)
        if spark is not None and spark.keep and spark.jobs:
            print(f"stateglass: the decoded Parquet is kept in {spark.folder}", file=sys.stderr)
    return 0
