"""Watch checkpoints and re-scan them after bursts of writes settle, or after each new commit.

Spark writes a micro-batch as a burst: ``offsets/N``, then a delta or changelog per partition,
maybe snapshots, then ``commits/N``. :class:`Debouncer` turns the burst into one scan. Files
still being written (``.N.delta.<uuid>.tmp``, ``*.crc`` sidecars, ``_temporary/``) are skipped;
the rename that makes them whole arrives as a move event whose destination counts.

Only the directories whose changes matter are watched: the checkpoint root, ``commits/`` and
``offsets/`` — a handful of inotify watches per checkpoint, however many thousand store
directories it has. The state files of batch N are complete once ``commits/N`` appears, and the
scan it triggers lists and reads them; what Spark's maintenance writes or purges between batches
is picked up by the next one. URLs (object stores send no events), ``poll=True`` and checkpoints
beyond the inotify watch limit are polled instead (:mod:`collectors.watch.poll`). When the kernel's
inotify queue overflows, every checkpoint watched by events is scanned once, and watching goes on.

Example::

    watcher = CheckpointWatcher(["/data/checkpoints/orders"], on_change=scanner.scan)
    watcher.run(stop_event)
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from stateglass.collectors.checkpoints.listing import is_temporary
from stateglass.collectors.fs import FileSystem
from stateglass.collectors.remote import fs_for as remote_fs_for
from stateglass.collectors.watch.poll import DEFAULT_INTERVAL_S, CommitPoller

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent
    from watchdog.observers.api import BaseObserver

# Subdirectories whose entries say a batch started or ended.
WATCHED_DIRS = ("commits", "offsets")
# watchdog logs this (and nothing else) when the kernel drops events.
OVERFLOW_LOGGER = "watchdog.observers.inotify_c"


# How long an ending watch waits for watchdog's threads.
OBSERVER_STOP_S = 5.0


class Debouncer:
    """Collects keys and releases each once it has been quiet for ``delay_s``.

    A key that keeps changing is still released after ``max_wait_s``, so a busy query is not
    starved. Time is passed in, so tests need no sleeping.
    """

    def __init__(self, delay_s: float = 1.0, max_wait_s: float = 10.0) -> None:
        self.delay_s = delay_s
        self.max_wait_s = max_wait_s
        self._first: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._settled: set[str] = set()
        self._lock = threading.Lock()

    def add(self, key: str, now: float, settled: bool = False) -> None:
        """Record a write; ``settled`` marks the write that ends a burst: due at once."""
        with self._lock:
            self._first.setdefault(key, now)
            self._last[key] = now
            if settled:
                self._settled.add(key)

    def pop_due(self, now: float) -> list[str]:
        """Keys settled, quiet for ``delay_s`` or pending for ``max_wait_s``; removed."""
        with self._lock:
            due = sorted(
                k
                for k, last in self._last.items()
                if k in self._settled
                or now - last >= self.delay_s
                or now - self._first[k] >= self.max_wait_s
            )
            for k in due:
                del self._first[k], self._last[k]
                self._settled.discard(k)
            return due

    def __len__(self) -> int:
        return len(self._last)


def is_whole(path: str) -> bool:
    """Whether an event path names a finished file (no part of it is a Spark temp name)."""
    return not any(is_temporary(part) for part in path.split(os.sep) if part)


def event_paths(event: FileSystemEvent) -> tuple[str, str | None] | None:
    """``(path, moved-to path)`` of a watchdog event that may mean new state; None for noise.

    A directory's "modified" event only says that an entry in it changed, and that entry has
    its own event. Spark renames ``commits/N`` into place and then its ``.N.crc``, so the
    directory's event arrives after the commit's: kept, it would scan the checkpoint a
    second time for each batch, for nothing.
    """
    if event.event_type in ("opened", "closed_no_write"):
        return None
    if event.is_directory and event.event_type == "modified":
        return None
    dest = getattr(event, "dest_path", "") or None
    return os.fsdecode(event.src_path), dest and os.fsdecode(dest)


def is_commit(path: str, root: str) -> bool:
    """Whether ``path`` is ``ROOT/commits/N``: the last file Spark writes for batch N."""
    parts = os.path.relpath(path, root).split(os.sep)
    return len(parts) == 2 and parts[0] == "commits" and parts[1].isdigit()


def is_remote(root: str) -> bool:
    """A URL of an object store or HDFS: no file system events, so it is polled."""
    return "://" in root and not root.startswith("file://")


def checkpoint_of(path: str, roots: Iterable[str]) -> str | None:
    """The watched checkpoint root that contains ``path``."""
    for root in roots:
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return root
    return None


class _OverflowHandler(logging.Handler):
    """Turns watchdog's "queue overflowed" warning into one rescan, instead of a log line."""

    def __init__(self, on_overflow: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self.on_overflow = on_overflow

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self.on_overflow()


class CheckpointWatcher:
    """Events (or polls) → :class:`Debouncer` → ``on_change(root)``, all scans on one thread.

    Roots can be added while it runs (:meth:`add`, from any thread): each is watched first,
    then handed to ``on_added`` (default ``on_change``) for its first scan, so no commit falls
    between the two.
    """

    def __init__(
        self,
        roots: Sequence[str],
        on_change: Callable[[str], object],
        debouncer: Debouncer | None = None,
        tick_s: float = 0.05,
        *,
        on_added: Callable[[str], object] | None = None,
        poll: bool = False,
        poll_interval_s: float = DEFAULT_INTERVAL_S,
        fs_for: Callable[[str], FileSystem] | None = None,
        warn: Callable[[str], object] | None = None,
    ) -> None:
        self.roots: list[str] = []
        self.on_change = on_change
        self.on_added = on_added or on_change
        self.debouncer = debouncer or Debouncer()
        self.tick_s = tick_s
        self.poll = poll
        self.warn = warn or (lambda _line: None)
        self.poller = CommitPoller(
            fs_for or remote_fs_for,
            lambda root: self.debouncer.add(root, time.monotonic(), settled=True),
            poll_interval_s,
            on_error=lambda root, exc: self.warn(f"cannot poll {root}: {exc}"),
        )
        self.overflows = 0
        self._event_roots: list[str] = []
        self._watched_dirs: set[str] = set()
        self._pending: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._observer: BaseObserver | None = None
        self._handler: Any = None
        for root in roots:
            self.add(root)

    def add(self, root: str) -> None:
        """Watch ``root`` too (thread-safe; takes effect on :meth:`run`'s thread)."""
        root = root.rstrip("/") if is_remote(root) else os.path.abspath(root)
        with self._lock:
            if root in self.roots:
                return
            self.roots.append(root)
        self._pending.put(root)

    def event(self, src_path: str, dest_path: str | None = None) -> None:
        """Record one filesystem event (a move counts by its destination)."""
        path = dest_path or src_path
        if not is_whole(os.path.relpath(path, "/")):
            return
        root = checkpoint_of(path, list(self.roots))
        if root is None:
            return
        if os.path.dirname(path) == root and os.path.basename(path) in WATCHED_DIRS:
            self._watch_dir(path)  # commits/ or offsets/ created after we started
        # A batch's commit ends its burst: scan now rather than after the quiet period,
        # which a query triggering every second or faster may never leave.
        self.debouncer.add(root, time.monotonic(), settled=is_commit(path, root))

    @property
    def watched_dirs(self) -> set[str]:
        """Directories watched for events now (a few per checkpoint)."""
        with self._lock:
            return set(self._watched_dirs)

    @property
    def event_roots(self) -> list[str]:
        """Checkpoints watched by events (the others are polled)."""
        return list(self._event_roots)

    def overflowed(self) -> None:
        """The kernel dropped events: scan every event-watched checkpoint once."""
        self.overflows += 1
        now = time.monotonic()
        for root in list(self._event_roots):
            self.debouncer.add(root, now, settled=True)

    def _watch_dir(self, path: str) -> None:
        # Called from the run thread and from watchdog's (a commits/ created later).
        with self._lock:
            if self._observer is None or path in self._watched_dirs or not os.path.isdir(path):
                return
            self._observer.schedule(self._handler, path, recursive=False)
            self._watched_dirs.add(path)

    def _start_watching(self, root: str) -> None:
        if self.poll or is_remote(root) or self._observer is None:
            self.poller.add(root)
            return
        try:
            self._watch_dir(root)
            for name in WATCHED_DIRS:
                self._watch_dir(os.path.join(root, name))
        except OSError as exc:
            # ENOSPC: fs.inotify.max_user_watches reached; polling costs one listing a poll.
            self.warn(f"{root}: cannot watch for events ({exc.strerror or exc}); polling it")
            self.poller.add(root)
            return
        self._event_roots.append(root)

    def _add_pending(self, stop: threading.Event) -> None:
        # A stop asked during the first collect of a fleet ends it after the root being read.
        while not stop.is_set():
            try:
                root = self._pending.get_nowait()
            except queue.Empty:
                return
            self._start_watching(root)
            self.on_added(root)

    def run(self, stop: threading.Event) -> None:
        """Watch until ``stop`` is set, scanning each root after its writes settle."""
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                paths = event_paths(event)
                if paths is not None:
                    watcher.event(*paths)

        overflow = _OverflowHandler(self.overflowed)
        logging.getLogger(OVERFLOW_LOGGER).addHandler(overflow)
        self._handler = Handler()
        self._observer = Observer()
        self._observer.start()
        next_poll = time.monotonic() + self.poller.interval_s
        try:
            self._add_pending(stop)
            while not stop.wait(self.tick_s):
                self._add_pending(stop)
                now = time.monotonic()
                if now >= next_poll:
                    next_poll = now + self.poller.interval_s
                    self.poller.poll_once()
                for root in self.debouncer.pop_due(now):
                    self.on_change(root)
        finally:
            logging.getLogger(OVERFLOW_LOGGER).removeHandler(overflow)
            self._observer.stop()
            # watchdog's threads are daemons: a stop that does not finish (an inotify reader
            # that never wakes) must not keep the watch from ending, or from reporting why.
            self._observer.join(timeout=OBSERVER_STOP_S)
            self._observer = None
