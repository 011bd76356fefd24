"""The dashboard's one watcher child: ``stateglass watch`` over a growing set of paths.

The dashboard never writes the database: it starts one watcher child that does, and hands it
every path to watch (those given at start, those a visitor adds in the Watch box) through a
control file. The child ends with the process that started it: it reads its stdin (a pipe
from us) and stops when it closes, which happens however we exit, even on SIGKILL.

Example::

    registry = WatcherRegistry("/tmp/sg.duckdb")
    registry.start(["/data/checkpoints/orders"])   # collect, then re-collect on every commit
    registry.stop_all()

The child runs ``python -m stateglass.app.dashboard.watcher_child --db DB --control FILE``.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Sequence

from stateglass.app.args import add_watch_args

# Paths a parent (``stateglass dashboard``) already watches, so the server does not add a
# second watcher for them: os.pathsep-separated absolute paths.
WATCHED_ENV = "STATEGLASS_WATCHED"
# The control file of the watcher child that ``stateglass dashboard`` started: the server hands
# new paths to that child instead of starting its own.
CONTROL_ENV = "STATEGLASS_WATCH_CONTROL"
# How often the child looks for new lines in the control file.
CONTROL_POLL_S = 0.5


def checkpoints_at(path: str, within: Sequence[str] = ()) -> list[str]:
    """The checkpoint at ``path``, or the checkpoints under it (a folder of them), found with
    the default discovery bounds and staying inside ``within`` when given.

    Raises the checkpoint's one-line ``NotACheckpoint`` when there are neither.
    """
    from stateglass.collectors.checkpoints.discover import Limits
    from stateglass.collectors.checkpoints.discover import checkpoints_at as find
    from stateglass.collectors.remote import canonical, fs_for

    path = path.strip()
    if "://" not in path:
        path = os.path.expanduser(path)
    path = canonical(path)  # a URL without user:password@ or query before anything sees it
    return find(fs_for(path), path, Limits(within=tuple(within)))


class WatcherRegistry:
    """The one watcher child of this process (or of the CLI that started us), and its paths.

    Every path goes to the same child through a control file (one JSON path per line, in a
    private temporary folder, never inside a checkpoint): however many paths visitors add,
    there is one watcher process. When :data:`CONTROL_ENV` names a control file, the child is
    our parent's (``stateglass dashboard``) and we only append to it.
    """

    def __init__(
        self,
        db: str,
        log_path: str | None = None,
        control: str | None = None,
        options: Sequence[str] = (),
    ) -> None:
        self.db = db
        self.log_path = log_path
        self.options = list(options)  # watch flags for the child: --poll-interval, --verbose
        self._lock = threading.Lock()
        self._child: subprocess.Popen[bytes] | None = None
        self._control = control or os.environ.get(CONTROL_ENV) or None
        self._own_control = self._control is None
        self._external = {p for p in os.environ.get(WATCHED_ENV, "").split(os.pathsep) if p}
        self._watched = set(self._external)
        atexit.register(self.stop_all)

    @property
    def control(self) -> str | None:
        """The control file the watcher child reads (None until one is needed)."""
        return self._control

    @property
    def child(self) -> subprocess.Popen[bytes] | None:
        """Our watcher child, when we started one."""
        return self._child

    def watched(self) -> set[str]:
        """Paths handed to the watcher, by us or by the parent that started us."""
        with self._lock:
            return set(self._watched)

    def start(self, paths: Iterable[str]) -> list[str]:
        """Hand the ``paths`` not watched yet to the one watcher child; returns those paths."""
        # Checked here, not at import: the Overview page imports this module, not the remote layer.
        from stateglass.collectors.checkpoints.enclosing import refuse_inside_checkpoint

        paths = list(paths)
        refuse_inside_checkpoint(self.db, "--db", paths)
        with self._lock:
            new = sorted({_canonical(p) for p in paths} - self._watched)
            if not new:
                return []
            self._ensure_child()
            if self._control is None:  # pragma: no cover - _ensure_child always sets it
                raise RuntimeError("no watcher control file")
            with open(self._control, "a", encoding="utf-8") as fh:
                fh.writelines(json.dumps(p) + "\n" for p in new)
            self._watched.update(new)
            return new

    def ensure(self) -> str | None:
        """Start the watcher child now (if it is ours to start); returns its control file."""
        with self._lock:
            self._ensure_child()
            return self._control

    def _ensure_child(self) -> None:
        if not self._own_control:
            return
        if self._child is not None and self._child.poll() is None:
            return
        if self._control is None:
            folder = tempfile.mkdtemp(prefix="stateglass-watch-")  # 0700: only we write it
            self._control = os.path.join(folder, "paths.jsonl")
        # Paths sent to a child that died are sent again to the new one.
        with open(self._control, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(p) + "\n" for p in sorted(self._watched))
        # No log file: the child writes to our stdout/stderr (the terminal of the CLI).
        log = open(self.log_path, "ab") if self.log_path else None  # noqa: SIM115
        try:
            self._child = subprocess.Popen(
                [
                    *(
                        sys.executable,
                        "-m",
                        "stateglass.app.dashboard.watcher_child",
                        "--db",
                        self.db,
                    ),
                    *("--control", self._control, *self.options),
                ],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            )
        finally:
            if log is not None:
                log.close()

    def stop_all(self, timeout_s: float = 5.0) -> None:
        """Stop our child: close its stdin, then terminate it if it lingers."""
        with self._lock:
            child, self._child = self._child, None
            if self._own_control:
                self._watched = set(self._external)
        if child is None:
            return
        if child.stdin:
            child.stdin.close()
        try:
            child.wait(timeout_s)
        except subprocess.TimeoutExpired:
            child.terminate()
            child.wait(timeout_s)
        if self._own_control and self._control:
            shutil.rmtree(os.path.dirname(self._control), ignore_errors=True)
            self._control = None


def _canonical(path: str) -> str:
    from stateglass.collectors.remote import canonical

    return canonical(path)


class ControlFile:
    """Reads the paths appended to a control file since the last read (whole lines only)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._offset = 0

    def read_new(self) -> list[str]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return []
        whole = data[: data.rfind(b"\n") + 1]
        self._offset += len(whole)
        out = []
        for line in whole.decode("utf-8", "replace").splitlines():
            try:
                path = json.loads(line)
            except ValueError:
                continue
            if isinstance(path, str):
                out.append(path)
        return out


def _stop_on_eof(stop: threading.Event) -> None:
    """Set ``stop`` when stdin closes: the process that started us is gone."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    finally:
        stop.set()


def _follow(control: ControlFile, add: Callable[[str], None], stop: threading.Event) -> None:
    """Hand every path appended to the control file to the watcher, until ``stop``."""
    while True:
        for path in control.read_new():
            add(path)
        if stop.wait(CONTROL_POLL_S):
            return


def serve(args: argparse.Namespace, control: ControlFile, stop: threading.Event) -> int:
    """The watcher child's watch over every path appended to ``control``, until ``stop``:
    the watch ``stateglass watch`` runs (app/watching.py), over a growing set of paths.

    A path that turns out not to be a checkpoint is one line on stderr; the others go on.
    """
    from stateglass.app.watching import (
        checkpoint_watcher,
        scan_or_say,
        start_progress,
        watcher_scanner,
    )

    scanner = watcher_scanner(args)
    start_progress(scanner.db, list(getattr(args, "progress", None) or []), stop)

    def first(root: str) -> None:
        summary = scan_or_say(scanner, root)
        if summary is not None:
            print(f"collected {summary.line()}", file=sys.stderr, flush=True)

    watcher = checkpoint_watcher(args, scanner, [], on_added=first)
    reader = threading.Thread(target=_follow, args=(control, watcher.add, stop), daemon=True)
    reader.start()
    watcher.run(stop)
    reader.join(timeout=5)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from stateglass.collectors.errors import CollectorError

    parser = argparse.ArgumentParser(prog="python -m stateglass.app.dashboard.watcher_child")
    parser.add_argument("--db", required=True)
    parser.add_argument("--control", required=True, help="file of paths to watch, one a line")
    add_watch_args(parser)
    parser.add_argument(
        "--progress", action="append", default=[], help="a --progress path to poll (repeatable)"
    )
    parser.add_argument(
        "--config",
        default=None,
        help="the dashboard's --config: its [history] and the thresholds of stored verdicts",
    )
    args = parser.parse_args(argv)
    stop = threading.Event()
    threading.Thread(target=_stop_on_eof, args=(stop,), daemon=True).start()
    try:
        return serve(args, ControlFile(args.control), stop)
    except CollectorError as exc:
        print(f"stateglass: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
