"""The ``stateglass`` command line.

Examples::

    stateglass info /data/checkpoints/orders
    stateglass state /data/checkpoints/orders --batch-id 41 --format jsonl -o state.jsonl
    stateglass changes /data/checkpoints/orders --from 30 --to 41
    stateglass state /data/checkpoints/sessions --state-var counts     # transformWithState
    stateglass state /data/checkpoints/sessions --read-timers
    stateglass dashboard sample_checkpoints
    stateglass report /data/checkpoints/orders -o orders.html   # or .md, .pdf
    stateglass check /data/checkpoints/orders      # health rules; exit 0/1/2 = OK/WARN/ERR
    stateglass export --table state_versions -o versions.parquet
    stateglass metrics --db ~/.stateglass/stateglass.duckdb   # /metrics on 127.0.0.1:9108
    stateglass compat /data/checkpoints/orders /tmp/orders-staging   # exit 0 restarts, 1 refused

Errors print one line on stderr and exit with status 2 (``check`` also exits 2 for ERR).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence

from stateglass.app.errors import AppError
from stateglass.collectors.errors import CollectorError
from stateglass.collectors.locations import DEFAULT_DB

EXIT_OK = 0
EXIT_ERROR = 2


def _add_store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "checkpoint",
        help="checkpoint directory or URL (s3://, gs://, abfss://, hdfs://): the query's "
        "checkpointLocation",
    )
    p.add_argument("--operator", type=int, default=0, metavar="ID", help="operator id (default 0)")
    p.add_argument(
        "--store",
        default="default",
        metavar="NAME",
        help="store name as Spark names it: default, left-keyToNumValues, … (default: default)",
    )
    p.add_argument(
        "--state-var",
        default=None,
        metavar="NAME",
        help="transformWithState: the state variable to read (Spark's stateVarName)",
    )
    p.add_argument(
        "--read-timers",
        action="store_true",
        help="transformWithState: read the registered timers (Spark's readRegisteredTimers)",
    )
    p.add_argument(
        "--partition",
        type=int,
        action="append",
        metavar="P",
        help="only this partition (repeatable)",
    )
    p.add_argument(
        "--format",
        choices=("jsonl", "table", "parquet"),
        default="jsonl",
        help="jsonl: one JSON object per row, as Spark's toJSON (default); table; "
        "parquet (needs -o)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument(
        "--time-zone",
        default="UTC",
        metavar="TZ",
        help="session time zone used to print timestamps, as spark.sql.session.timeZone "
        "(default UTC)",
    )


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stateglass")
    except PackageNotFoundError:
        return "unknown (not installed: run make install)"


class _VersionAction(argparse.Action):
    """``--version``, asking the package metadata only when given: ``importlib.metadata``
    costs every other command tens of milliseconds (issue 14, collect session 5)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(f"stateglass {_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stateglass",
        description="Read Spark Structured Streaming state stores without a JVM.",
    )
    # --version: the installed package's version, the one pyproject.toml declares.
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p_info = sub.add_parser("info", help="query id, batches, operators, stores and schemas")
    p_info.add_argument(
        "checkpoint",
        help="checkpoint directory or URL (s3://, gs://, abfss://, hdfs://): the query's "
        "checkpointLocation",
    )
    p_info.add_argument("--json", action="store_true", help="print JSON instead of text")

    p_state = sub.add_parser("state", help="the state of one store at a batch")
    _add_store_args(p_state)
    p_state.add_argument(
        "--batch-id",
        type=int,
        default=None,
        metavar="B",
        help="read the state committed by batch B (state version B+1); default: last committed",
    )
    p_state.add_argument(
        "--no-flatten",
        action="store_true",
        help="transformWithState: one row per key with the whole list (list_value) or map "
        "(map_value), as Spark's flattenCollectionTypes=false",
    )

    p_state.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="partitions read in parallel (default: one per CPU core; 1 = no worker processes)",
    )

    p_changes = sub.add_parser("changes", help="change feed between two batches")
    _add_store_args(p_changes)
    p_changes.add_argument(
        "--from",
        dest="from_batch",
        type=int,
        required=True,
        metavar="B1",
        help="first batch whose changes to print (required)",
    )
    p_changes.add_argument(
        "--to",
        dest="to_batch",
        type=int,
        default=None,
        metavar="B2",
        help="last batch whose changes to print (default: last committed)",
    )

    p_dash = sub.add_parser(
        "dashboard", help="collect and watch checkpoints, and serve the web dashboard on them"
    )
    p_dash.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="checkpoints, or folders of checkpoints, to collect and watch (none: just serve "
        "the database)",
    )
    p_dash.add_argument(
        "--db",
        default=DEFAULT_DB,
        metavar="DB",
        help=f"DuckDB history database (default: {DEFAULT_DB})",
    )
    p_dash.add_argument("--port", type=int, default=8501, help="HTTP port (default 8501)")
    p_dash.add_argument("--headless", action="store_true", help="do not open a browser")
    # --- watch & discovery (branch `watch`) ---
    p_dash.add_argument(
        "--allow-path",
        action="append",
        default=[],
        metavar="PATH",
        help="a folder (or URL prefix) visitors may also watch from the Overview, besides the "
        "PATHs given (repeatable)",
    )
    from stateglass.app import collect_cmd as _collect_cmd
    from stateglass.app import discovery

    discovery.add_arguments(p_dash)
    _collect_cmd.add_watch_arguments(p_dash)
    # --- end watch & discovery ---
    # --- safety: bind address (issue 9) ---
    p_dash.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on (default 127.0.0.1: this machine only); another address "
        "exposes the dashboard, which has no login of its own (see docs/security.md)",
    )
    # --- end safety ---
    from stateglass.app.collect_cmd import add_progress_arg

    add_progress_arg(p_dash)

    from stateglass.app import collect_cmd

    collect_cmd.add_parser(sub)
    from stateglass.app import report_cmd

    report_cmd.add_parser(sub)
    from stateglass.app import check_cmd, export_cmd

    check_cmd.add_parser(sub)
    export_cmd.add_parser(sub)
    # ---- metrics (issue 12) ----
    from stateglass.app import metrics_cmd

    metrics_cmd.add_parser(sub)
    # ---- compat (issue 11) ----
    from stateglass.app import compat_cmd

    compat_cmd.add_parser(sub)
    # ---- end compat ----
    _add_remote_storage(sub.choices)
    return parser


# ---- remote storage (issue 13): every command that reads a checkpoint takes a URL ----------
_READS_CHECKPOINTS = (
    "info",
    "state",
    "changes",
    "dashboard",
    "collect",
    "watch",
    "check",
    "report",
    "compat",  # issue 11
)


def _add_remote_storage(parsers: dict[str, argparse.ArgumentParser]) -> None:
    from stateglass.app.storage_args import add_storage_args

    for name in _READS_CHECKPOINTS:
        if name in parsers:
            add_storage_args(parsers[name])


def _report(args: argparse.Namespace) -> int:
    from stateglass.app import report_cmd

    return report_cmd.run(args)


def _check(args: argparse.Namespace) -> int:
    from stateglass.app import check_cmd

    return check_cmd.run(args)


def _export(args: argparse.Namespace) -> int:
    from stateglass.app import export_cmd

    return export_cmd.run(args)


def _metrics(args: argparse.Namespace) -> int:
    from stateglass.app import metrics_cmd

    return metrics_cmd.run(args)


def _compat(args: argparse.Namespace) -> int:
    from stateglass.app import compat_cmd

    return compat_cmd.run(args)


def _info(args: argparse.Namespace) -> int:
    from stateglass.app import commands

    return commands.info(args)


def _state(args: argparse.Namespace) -> int:
    from stateglass.app import commands

    return commands.state(args)


def _changes(args: argparse.Namespace) -> int:
    from stateglass.app import commands

    return commands.changes(args)


def _dashboard(args: argparse.Namespace) -> int:
    from stateglass.app import commands

    return commands.dashboard(args)


def _collect(args: argparse.Namespace) -> int:
    from stateglass.app import collect_cmd

    return collect_cmd.run(args)


def _watch(args: argparse.Namespace) -> int:
    from stateglass.app import collect_cmd

    return collect_cmd.watch(args)


def _commands() -> dict[str, Callable[[argparse.Namespace], int]]:
    # Each command imports what it needs when it runs: `collect` never pays for the state
    # readers' output formats (stateglass.app.commands), nor `state` for DuckDB.
    return {
        "info": _info,
        "state": _state,
        "changes": _changes,
        "dashboard": _dashboard,
        "collect": _collect,
        "watch": _watch,
        "report": _report,
        "check": _check,
        "export": _export,
        "metrics": _metrics,
        "compat": _compat,  # issue 11
    }


def main(argv: Sequence[str] | None = None) -> int:
    from stateglass.app.storage_args import apply_storage_args, print_counts

    args = build_parser().parse_args(argv)
    from stateglass.app.atomic import Terminated, signals_unwind

    try:
        apply_storage_args(args)
        # SIGTERM/SIGHUP clean up (temporary directories, half-written output) as Ctrl+C does.
        with signals_unwind():
            return _commands()[args.command](args)
    except (CollectorError, AppError) as exc:
        print(f"stateglass: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        # `stateglass state … | head` closed the pipe: not an error for the user.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except Terminated as exc:
        print(f"stateglass: stopped by {signal.Signals(exc.signum).name}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("stateglass: interrupted", file=sys.stderr)
        return 130
    finally:
        print_counts(args)


if __name__ == "__main__":
    sys.exit(main())
