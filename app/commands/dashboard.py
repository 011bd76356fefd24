"""``stateglass dashboard``: collect and watch checkpoints, and serve the web dashboard on them.

Example::

    stateglass dashboard /data/checkpoints --db ./sg.duckdb --port 8502
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from stateglass.app import discovery
from stateglass.app.args import add_db_arg, add_progress_arg, add_watch_args


def add_parser(subparsers: Any) -> None:
    """Register ``dashboard`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "dashboard", help="collect and watch checkpoints, and serve the web dashboard on them"
    )
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="checkpoints, or folders of checkpoints, to collect and watch (none: just serve "
        "the database)",
    )
    add_db_arg(p, metavar="DB")
    p.add_argument("--port", type=int, default=8501, help="HTTP port (default 8501)")
    p.add_argument("--headless", action="store_true", help="do not open a browser")
    p.add_argument(
        "--allow-path",
        action="append",
        default=[],
        metavar="PATH",
        help="a folder (or URL prefix) visitors may also watch from the Overview, besides the "
        "PATHs given (repeatable)",
    )
    discovery.add_arguments(p)
    add_watch_args(p)
    p.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on (default 127.0.0.1: this machine only); another address "
        "exposes the dashboard, which has no login of its own (see docs/security.md)",
    )
    add_progress_arg(p)


def _collect_for_dashboard(
    paths: list[str], db_path: str, args: argparse.Namespace | None = None
) -> list[str]:
    """Collect every checkpoint at ``paths`` into ``db_path``, one progress line each
    (folders searched with the discovery bounds in ``args``)."""
    from stateglass.app.collecting import ProgressBar, new_scanner
    from stateglass.app.settings import settings_of
    from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint
    from stateglass.collectors.engines import LocalEngine

    args = args or argparse.Namespace()
    # Resolve every path first: a typo fails before anything is written.
    roots = sorted(discovery.find(paths, args))
    refuse_inside_checkpoint(db_path, "--db", roots)
    # The start-up collect is a full one, before any thread starts: one worker per core.
    # The watcher's re-scans stay in-process (app/commands/collect.py, add_jobs_arg).
    scanner = new_scanner(db_path, settings_of(args), LocalEngine(jobs=0))
    for n, root in enumerate(roots, 1):
        label = f"[{n}/{len(roots)}] {root}"
        print(f"collecting {label}", file=sys.stderr, flush=True)
        summary = scanner.scan(root, ProgressBar(label))
        print(
            f"  {summary.versions} state versions, {summary.batches} batches, "
            f"{summary.problems} problems",
            file=sys.stderr,
            flush=True,
        )
    return roots


def _watch_options(args: argparse.Namespace, progress: Sequence[str] = ()) -> list[str]:
    """The dashboard's ``watch`` flags, for its watcher child (which polls ``progress`` too)."""
    out = ["--debounce", str(args.debounce), "--poll-interval", str(args.poll_interval)]
    out += ["--reconcile-scans", str(args.reconcile_scans)]
    out += ["--reconcile-minutes", str(args.reconcile_minutes)]
    out += [f"--progress={p}" for p in progress]
    if getattr(args, "config", None):
        # The watcher stores health verdicts judged with the thresholds the pages use.
        out += ["--config", os.path.abspath(os.path.expanduser(args.config))]
    return out + ["--poll"] * args.poll + ["--verbose"] * args.verbose


def _health_config_env(args: argparse.Namespace) -> dict[str, str]:
    """The health rules' ``--config`` file for the server (checked here, before anything runs).

    The Overview cards and the Health page judge with its thresholds, e.g. ``make run`` turns
    the stalled-query rule off for the finished sample runs (``sample_checkpoints/demo.toml``).
    """
    from stateglass.app.dashboard.context import HEALTH_CONFIG_ENV
    from stateglass.app.settings import settings_of

    path = getattr(args, "config", None)
    if not path:
        return {}
    settings_of(args)  # a bad file is one line and exit status 2, before the server starts
    return {HEALTH_CONFIG_ENV: os.path.abspath(os.path.expanduser(path))}


def run(args: argparse.Namespace) -> int:
    """``stateglass dashboard``: collect the paths into the database, watch them, and serve
    the dashboard on it until interrupted."""
    from stateglass.app import allowed
    from stateglass.app.dashboard.server import (
        check_port_free,
        local_url,
        start_server,
        stop_server,
    )
    from stateglass.app.dashboard.watcher_child import CONTROL_ENV, WATCHED_ENV, WatcherRegistry
    from stateglass.collectors.progress import check_location

    db_path = os.path.abspath(os.path.expanduser(args.db))
    # Every --progress path is checked before anything is written.
    progress = [check_location(p) for p in args.progress]
    health_config = _health_config_env(args)
    # A busy port fails before anything is collected (start_server checks again).
    check_port_free(args.host, args.port)
    roots = _collect_for_dashboard(args.paths, db_path, args) if args.paths else []
    if progress:
        from stateglass.app.collecting import collect_progress, open_writer
        from stateglass.app.settings import settings_of

        collect_progress(open_writer(db_path, settings_of(args)), progress)
    # Open a browser only where there is a screen to show it on.
    headless = args.headless or not (os.environ.get("DISPLAY") or sys.platform == "darwin")
    # Our watcher writes the database while the server only reads it; it stops with us.
    # One watcher child for the paths given here and every one a visitor adds: the server
    # hands it new paths through its control file instead of starting processes of its own.
    watchers = WatcherRegistry(db_path, options=_watch_options(args, progress))
    watchers.start(roots)
    control = watchers.ensure() or ""
    env = dict(
        os.environ,
        **{
            WATCHED_ENV: os.pathsep.join(roots),
            CONTROL_ENV: control,
            # The Watch box accepts paths under these only.
            allowed.ALLOWED_ENV: allowed.encode([*getattr(args, "paths", []), *args.allow_path]),
            **health_config,
        },
    )
    # SIGTERM would end us without the cleanup below, leaving the server running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    server = None
    try:
        server = start_server(db_path, args.port, args.host, headless, env)
        print(
            f"StateGlass dashboard on {local_url(args.host, args.port)} over {db_path}; "
            f"watching {len(roots)} checkpoint(s) (Ctrl+C to stop)",
            file=sys.stderr,
            flush=True,
        )
        return server.wait()
    finally:
        if server is not None:
            stop_server(server)
        watchers.stop_all()
