"""The ``stateglass`` command line: assembles the commands and maps errors to exit statuses.

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
    stateglass maintain --db ~/.stateglass/stateglass.duckdb  # roll up old history now
    stateglass compat /data/checkpoints/orders /tmp/orders-staging   # exit 0 restarts, 1 refused
    stateglass plan-partitions /data/checkpoints/orders --partitions 16   # before a repartition
    stateglass rewrite /data/checkpoints/orders /data/orders-16 --partitions 16 --apply

Each command is a module of :mod:`stateglass.app.commands`, listed in its table.
Errors print one line on stderr and exit with status 2 (``check`` also exits 2 for ERR).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import faulthandler
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from stateglass.app.commands import COMMANDS, COMMANDS_BY_NAME, Reads

EXIT_OK = 0
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("stateglass")
    except PackageNotFoundError:
        return "unknown (not installed: run make install)"


class _VersionAction(argparse.Action):
    """``--version``, asking the package metadata only when given: ``importlib.metadata``
    costs every other command tens of milliseconds."""

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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's subparser, or ``only`` that command's; those that read checkpoints also
    take the storage options."""
    from stateglass.app.args import add_storage_args

    parser = argparse.ArgumentParser(
        prog="stateglass",
        description="Read Spark Structured Streaming state stores without a JVM.",
    )
    # --version: the installed package's version, the one pyproject.toml declares.
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        if only is not None and command.name != only:
            continue
        command.module().add_parser(sub)
        if Reads.CHECKPOINTS in command.reads:
            add_storage_args(sub.choices[command.name])
    return parser


def _named_command(argv: Sequence[str] | None) -> str | None:
    """The command the arguments start with, if they do (``stateglass sql …``): argparse then
    hands every later argument to that command's subparser, so the others need not be built,
    nor their modules imported (tens of milliseconds of a short command's start-up). Anything
    else (``--help``, ``--version``, a misspelt command) gets every subparser."""
    given = sys.argv[1:] if argv is None else argv
    if given and given[0] in COMMANDS_BY_NAME:
        return given[0]
    return None


def exit_status(exc: BaseException) -> int | None:
    """The exit status for what ended a command, its one line printed; None: not ours."""
    from stateglass.app.analysis.errors import AnalysisError
    from stateglass.app.atomic import Terminated, interrupted_query
    from stateglass.app.errors import AppError
    from stateglass.collectors.errors import CollectorError

    if isinstance(exc, CollectorError | AppError | AnalysisError):
        print(f"stateglass: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if isinstance(exc, BrokenPipeError):
        # `stateglass state … | head` closed the pipe: not an error for the user.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    if isinstance(exc, Terminated):
        print(f"stateglass: stopped by {signal.Signals(exc.signum).name}", file=sys.stderr)
        return exc.exit_status
    if isinstance(exc, KeyboardInterrupt) or interrupted_query(exc):
        print("stateglass: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return None


def _ignore_unraisable(_: Any) -> None:
    return None


# Commands that run until stopped: the ones a soak traces (see app/memory_trace.py).
_LONG_RUNNING = frozenset({"watch", "dashboard", "metrics"})


def main(argv: Sequence[str] | None = None) -> int:
    from stateglass.app.args import apply_storage_args, print_counts
    from stateglass.app.atomic import interrupted_query, signals_unwind

    args = build_parser(_named_command(argv)).parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        # Long-running commands (watch, dashboard, metrics) run for months: `kill -USR1 PID`
        # prints every thread's stack to stderr, without stopping the process.
        with contextlib.suppress(ValueError, OSError):
            # (a stderr with no file descriptor, as under a test's capture, has nowhere to go)
            faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
    command = COMMANDS_BY_NAME[args.command]
    if args.command in _LONG_RUNNING:
        from stateglass.app.memory_trace import start_from_env

        start_from_env(args.command)
    reads_checkpoints = Reads.CHECKPOINTS in command.reads
    if argv is None:
        # NumPy's OpenBLAS starts a thread per core as it loads, which spins for a while
        # after each use; nothing here does linear algebra, and the decoders want the cores
        # (it was a seventh of `state --format parquet`'s CPU on two cores).
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if argv is None and args.command == "sql" and args.engine != "spark":
        from stateglass.app.lean_arrow import load_datasets_without_pandas

        load_datasets_without_pandas()
    try:
        if reads_checkpoints:
            apply_storage_args(args)
        # SIGTERM/SIGHUP clean up (temporary directories, half-written output) as Ctrl+C does.
        with signals_unwind():
            return command.module().run(args)
    except BaseException as exc:
        status = exit_status(exc)
        if status is None:
            raise
        if argv is None and (isinstance(exc, KeyboardInterrupt) or interrupted_query(exc)):
            # Object-store requests the stop abandoned mid-flight are closed as the
            # interpreter ends, and their clients raise there (aiobotocore's context
            # variables): the user asked to stop, so those are not worth a traceback.
            sys.unraisablehook = _ignore_unraisable
        return status
    finally:
        if reads_checkpoints:
            print_counts(args)


def console() -> None:
    """The installed ``stateglass`` command: :func:`main`, then, for a command that leaves
    nothing open (:attr:`Command.quick_exit`), the process ends at once.

    Tearing down pyarrow's, NumPy's and DuckDB's modules object by object costs such a
    command 60-70 ms of CPU as it exits, a tenth of a query over a million keys, and
    achieves nothing: by the time it returns, its output is closed and renamed into place
    and its temporary folders removed. So what an exit must still do is done here (the
    ``atexit`` handlers, flushing the streams) and the rest is skipped. A thread still
    running gets the ordinary exit, which waits for it.
    """
    status = main()
    name = _named_command(None)
    if name is None or not COMMANDS_BY_NAME[name].quick_exit or _threads_running():
        sys.exit(status)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # A reader gone (`| head`) or a stream closed: nothing is left to say to it.
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(status)


def _threads_running() -> bool:
    main_thread = threading.main_thread()
    return any(
        t is not main_thread and t.is_alive() and not t.daemon for t in threading.enumerate()
    )


if __name__ == "__main__":
    console()
