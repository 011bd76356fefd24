"""Command-line arguments several commands share: how they are declared, read and checked.

Example::

    p = subparsers.add_parser("state", help="the state of one store at a batch")
    add_store_args(p)                 # CHECKPOINT, --operator, --store, … -o, --time-zone
    request = store_request(args, args.batch_id)

The remote storage options (``--storage-option``, ``--cache-dir``, …) go on every command the
command table says reads checkpoints. Values given there win over the ``[storage]`` table of
``--config``, which wins over defaults::

    stateglass state s3://bucket/cp --storage-option profile=prod --verbose
    stateglass collect abfss://cps@acct.dfs.core.windows.net/orders --config stateglass.toml
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from stateglass.app.errors import AppError
from stateglass.collectors.locations import DEFAULT_DB
from stateglass.collectors.scan.reconcile import (
    DEFAULT_RECONCILE_S,
    DEFAULT_RECONCILE_SCANS,
    ReconcilePolicy,
)

if TYPE_CHECKING:
    from stateglass.collectors.checkpoints.state_reader import StateRequest


def utc_time(text: str, option: str) -> datetime:
    """An ISO-8601 time given as ``option``, UTC where it names no zone; one line when bad."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise AppError(f"{option} {text!r}: not an ISO-8601 time like 2024-01-31T12:00:00") from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


CHECKPOINT_HELP = (
    "checkpoint directory or URL (s3://, gs://, abfss://, hdfs://): the query's checkpointLocation"
)


def add_db_arg(
    p: argparse.ArgumentParser, what: str = "DuckDB history database", metavar: str = "PATH"
) -> None:
    """``--db PATH``, defaulting to :data:`stateglass.collectors.locations.DEFAULT_DB`."""
    p.add_argument(
        "--db", default=DEFAULT_DB, metavar=metavar, help=f"{what} (default: {DEFAULT_DB})"
    )


def add_store_args(p: argparse.ArgumentParser) -> None:
    """Which store to read and how to print it: what ``state`` and ``changes`` share."""
    p.add_argument("checkpoint", help=CHECKPOINT_HELP)
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
    add_output_args(p)


def add_output_args(p: argparse.ArgumentParser) -> None:
    """``-o FILE`` and ``--time-zone``: where rows go and the zone their timestamps print in."""
    p.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    p.add_argument(
        "--time-zone",
        default="UTC",
        metavar="TZ",
        help="session time zone used to print timestamps, as spark.sql.session.timeZone "
        "(default UTC)",
    )


def store_request(args: argparse.Namespace, batch_id: int | None = None) -> StateRequest:
    """The :class:`StateRequest` that :func:`add_store_args`' arguments describe."""
    from stateglass.collectors.checkpoints.state_reader import StateRequest

    return StateRequest(
        operator_id=args.operator,
        store_name=args.store,
        batch_id=batch_id,
        partitions=args.partition,
        state_var=args.state_var,
        read_timers=args.read_timers,
        flatten=not getattr(args, "no_flatten", False),
    )


def add_collect_args(p: argparse.ArgumentParser) -> None:
    """What ``collect`` and ``watch`` share: the paths, the database, the engine, discovery."""
    from stateglass.app import discovery
    from stateglass.collectors.engines import ENGINES

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
    add_master_arg(p)
    p.add_argument(
        "--no-eviction-audit",
        dest="eviction_audit",
        action="store_false",
        help="skip the eviction audit (it decodes the event time of every key at every new "
        "version of a store Spark evicts by event time; default: audit)",
    )
    discovery.add_arguments(p)
    add_progress_arg(p)


def add_master_arg(p: argparse.ArgumentParser) -> None:
    """``--master``: where ``--engine spark`` runs (``collect``, ``watch``, ``sql``)."""
    p.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="Spark master for --engine spark: local[N] (default local[*]), spark://HOST:PORT, "
        "yarn or k8s://URL (see docs/spark-engine.md)",
    )


def add_progress_arg(p: argparse.ArgumentParser) -> None:
    """``--progress PATH`` (repeatable): Spark's progress events."""
    p.add_argument(
        "--progress",
        action="append",
        default=[],
        metavar="PATH",
        help="also read streaming progress from PATH: a Spark event-log directory "
        "(spark.eventLog.dir) or a StateGlassListener directory (repeatable)",
    )


def add_watch_args(p: argparse.ArgumentParser) -> None:
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
    p.add_argument(
        "--reconcile-scans",
        type=int,
        default=DEFAULT_RECONCILE_SCANS,
        metavar="N",
        help="re-scans look up a new commit's files by name; every Nth lists every store "
        f"directory again, to see purges and new partitions (default {DEFAULT_RECONCILE_SCANS})",
    )
    p.add_argument(
        "--reconcile-minutes",
        type=float,
        default=DEFAULT_RECONCILE_S / 60,
        metavar="MINUTES",
        help="list every store directory again at least this often "
        f"(default {DEFAULT_RECONCILE_S / 60:g})",
    )
    p.add_argument("--verbose", action="store_true", help="print a line for every re-scan")


def reconcile_policy(args: argparse.Namespace) -> ReconcilePolicy:
    """How often a watcher's re-scans list every store directory again (``--reconcile-*``)."""
    return ReconcilePolicy(
        every_scans=max(0, getattr(args, "reconcile_scans", DEFAULT_RECONCILE_SCANS)),
        every_s=60 * getattr(args, "reconcile_minutes", DEFAULT_RECONCILE_S / 60),
    )


def add_storage_args(p: argparse.ArgumentParser) -> None:
    """``--storage-option``, ``--cache-dir``, ``--cache-size``, ``--config`` and ``--verbose``."""
    from stateglass.collectors.remote.cache import DEFAULT_CACHE_DIR

    g = p.add_argument_group("remote storage (s3://, gs://, abfss://, hdfs://)")
    g.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend option (s3fs, adlfs, gcsfs), repeatable; a.b=v nests, JSON values parse "
        "(e.g. endpoint_url=http://minio:9000, anon=true)",
    )
    g.add_argument(
        "--cache-dir",
        default=None,
        metavar="DIR",
        help=f"cache of immutable state files read remotely (default {DEFAULT_CACHE_DIR})",
    )
    g.add_argument(
        "--cache-size",
        default=None,
        metavar="SIZE",
        help="cache limit, least recently used out first: 2GiB (default), 500MB, 0 = off",
    )
    opts = {a for action in p._actions for a in action.option_strings}
    if "--config" not in opts:
        g.add_argument(
            "--config",
            default=None,
            metavar="FILE",
            help="TOML config file; its [storage] table sets the options above (the dashboard "
            "also judges health with its rule sections, docs/health.md)",
        )
    if "--verbose" not in opts:
        g.add_argument(
            "--verbose",
            action="store_true",
            help="print the storage requests made (LIST/GET/HEAD) and cache hits on stderr",
        )


def apply_storage_args(args: argparse.Namespace) -> None:
    """Configure this process's storage settings from :func:`add_storage_args`' arguments."""
    from stateglass.collectors.config_file import ConfigFile
    from stateglass.collectors.remote.settings import (
        SECTION,
        StorageSettings,
        configure,
        merge,
        parse_options,
        parse_size,
    )

    if getattr(args, "config", None) is None and getattr(args, "settings", None) is None:
        # No --config: [storage] is its default, read without the health rules' sections
        # (a short command such as one `sql` query never judges health; they cost 12 ms).
        stored = ConfigFile().parse(SECTION)
    else:
        from stateglass.app.settings import settings_of

        stored = settings_of(args).storage  # the [storage] table of --config
    base = StorageSettings()
    try:
        options = merge(base.options, stored.options)
        options = merge(options, parse_options(args.storage_option))
        if args.cache_size is not None:
            cache_bytes = parse_size(args.cache_size)
        else:
            cache_bytes = stored.cache_bytes if stored.cache_bytes is not None else base.cache_bytes
    except ValueError as exc:
        raise AppError(str(exc)) from exc
    cache_dir = args.cache_dir or stored.cache_dir or base.cache_dir  # base: $STATEGLASS_CACHE_DIR
    configure(StorageSettings(options, str(cache_dir), cache_bytes))


def print_counts(args: argparse.Namespace) -> None:
    """``--verbose``: the storage requests this command made, on stderr."""
    if getattr(args, "verbose", False):
        from stateglass.collectors.remote import COUNTS

        print(f"stateglass: {COUNTS.line()}", file=sys.stderr)
