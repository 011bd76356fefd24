"""Watcher child processes: ``stateglass watch`` for the dashboard, one per set of paths.

The dashboard never writes the database: it starts a watcher child that does. Children are
kept in a registry so that a path is watched once, and they end with the process that started
them: each child reads its stdin (a pipe from us) and stops when it closes, which happens
however we exit, even on SIGKILL.

Example::

    registry = WatcherRegistry("/tmp/sg.duckdb")
    registry.start(["/data/checkpoints/orders"])   # collect, then re-collect on every commit
    registry.stop_all()

Run as ``python -m app.watchers --db DB PATH...`` (what :meth:`WatcherRegistry.start` does).
"""

from __future__ import annotations

import argparse
import atexit
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence

# Paths a parent (``stateglass dashboard``) already watches, so the server does not add a
# second watcher for them: os.pathsep-separated absolute paths.
WATCHED_ENV = "STATEGLASS_WATCHED"


def checkpoints_at(path: str) -> list[str]:
    """The checkpoint at ``path``, or the checkpoints under it (a folder of them).

    Raises the checkpoint's one-line ``NotACheckpoint`` when there are neither.
    """
    from app.catalog import find_checkpoints
    from collectors.checkpoint import Checkpoint
    from collectors.errors import NotACheckpoint

    path = os.path.abspath(os.path.expanduser(path.strip()))
    try:
        return [Checkpoint.open(path).root]
    except NotACheckpoint:
        found = find_checkpoints(path) if os.path.isdir(path) else []
        if found:
            return found
        raise


def refuse_db_inside(db: str, roots: Iterable[str]) -> None:
    """A one-line ``AppError`` when the database would be written inside one of ``roots``.

    The collector writes the database (and its WAL and log) next to ``db``; StateGlass never
    writes into a checkpoint.
    """
    from app.errors import AppError

    target = os.path.realpath(db)
    for root in roots:
        real = os.path.realpath(root)
        if os.path.commonpath([real, target]) == real:
            raise AppError(
                f"{db}: the database is inside the checkpoint {root}; put it elsewhere (--db)"
            )


class WatcherRegistry:
    """The watcher children of this process, at most one per checkpoint path."""

    def __init__(self, db: str, log_path: str | None = None) -> None:
        self.db = db
        self.log_path = log_path
        self._lock = threading.Lock()
        self._children: dict[str, subprocess.Popen[bytes]] = {}
        self._external = {p for p in os.environ.get(WATCHED_ENV, "").split(os.pathsep) if p}
        atexit.register(self.stop_all)

    def watched(self) -> set[str]:
        """Paths watched now, by our live children or by the parent that started us."""
        with self._lock:
            alive = {p for p, c in self._children.items() if c.poll() is None}
        return alive | self._external

    def start(self, paths: Iterable[str], progress: Sequence[str] = ()) -> list[str]:
        """Start one child watching the ``paths`` not watched yet; returns those paths.
        ``progress``: ``--progress`` paths the child polls too (given on the first start)."""
        paths = list(paths)
        refuse_db_inside(self.db, paths)
        with self._lock:
            live = {p for p, c in self._children.items() if c.poll() is None}
            new = sorted({os.path.abspath(p) for p in paths} - live - self._external)
            if not new and not progress:
                return []
            # No log file: the child writes to our stdout/stderr (the terminal of the CLI).
            log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115
            try:
                child = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "app.watchers",
                        "--db",
                        self.db,
                        *(f"--progress={p}" for p in progress),
                        *new,
                    ],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=log,
                    cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                )
            finally:
                if log is not None:
                    log.close()
            for path in new:
                self._children[path] = child
            return new

    def stop_all(self, timeout_s: float = 5.0) -> None:
        """Stop every child: close its stdin, then terminate it if it lingers."""
        with self._lock:
            children = {id(c): c for c in self._children.values()}.values()
            self._children.clear()
        for child in children:
            if child.stdin:
                child.stdin.close()
        for child in children:
            try:
                child.wait(timeout_s)
            except subprocess.TimeoutExpired:
                child.terminate()
                child.wait(timeout_s)


def _stop_on_eof(stop: threading.Event) -> None:
    """Set ``stop`` when stdin closes: the process that started us is gone."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        stop.set()


def main(argv: Sequence[str] | None = None) -> int:
    from app import collect_cmd
    from collectors.errors import CheckpointError

    parser = argparse.ArgumentParser(prog="python -m app.watchers")
    parser.add_argument("--db", required=True)
    parser.add_argument("--debounce", type=float, default=1.0)
    parser.add_argument("--progress", action="append", default=[])
    parser.add_argument("checkpoints", nargs="*")
    args = parser.parse_args(argv)
    args.engine, args.master = "local", None
    stop = threading.Event()
    threading.Thread(target=_stop_on_eof, args=(stop,), daemon=True).start()
    try:
        return collect_cmd.watch(args, stop)
    except CheckpointError as exc:
        print(f"stateglass: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
