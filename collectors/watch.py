"""Watch checkpoints and re-scan them after bursts of writes settle.

Spark writes a micro-batch as a burst: ``offsets/N``, then a delta or changelog per partition,
maybe snapshots, then ``commits/N``. :class:`Debouncer` turns the burst into one scan. Files
still being written (``.N.delta.<uuid>.tmp``, ``*.crc`` sidecars, ``_temporary/``) are skipped;
the rename that makes them whole arrives as a move event whose destination counts.

Example::

    watcher = CheckpointWatcher(["/data/checkpoints/orders"], on_change=scanner.scan)
    watcher.run(stop_event)
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from collectors.listing import is_temporary


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


def is_commit(path: str, root: str) -> bool:
    """Whether ``path`` is ``ROOT/commits/N``: the last file Spark writes for batch N."""
    parts = os.path.relpath(path, root).split(os.sep)
    return len(parts) == 2 and parts[0] == "commits" and parts[1].isdigit()


def checkpoint_of(path: str, roots: Iterable[str]) -> str | None:
    """The watched checkpoint root that contains ``path``."""
    for root in roots:
        if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
            return root
    return None


class CheckpointWatcher:
    """watchdog events → :class:`Debouncer` → ``on_change(root)`` on this thread."""

    def __init__(
        self,
        roots: Sequence[str],
        on_change: Callable[[str], object],
        debouncer: Debouncer | None = None,
        tick_s: float = 0.05,
    ) -> None:
        self.roots = [os.path.abspath(r) for r in roots]
        self.on_change = on_change
        self.debouncer = debouncer or Debouncer()
        self.tick_s = tick_s

    def event(self, src_path: str, dest_path: str | None = None) -> None:
        """Record one filesystem event (a move counts by its destination)."""
        path = dest_path or src_path
        if not is_whole(os.path.relpath(path, "/")):
            return
        root = checkpoint_of(path, self.roots)
        if root is not None:
            # A batch's commit ends its burst: scan now rather than after the quiet period,
            # which a query triggering every second or faster may never leave.
            self.debouncer.add(root, time.monotonic(), settled=is_commit(path, root))

    def run(self, stop: threading.Event) -> None:
        """Watch until ``stop`` is set, scanning each root after its writes settle."""
        from watchdog.events import FileSystemEvent, FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: FileSystemEvent) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                dest = getattr(event, "dest_path", "") or None
                watcher.event(os.fsdecode(event.src_path), dest and os.fsdecode(dest))

        observer = Observer()
        for root in self.roots:
            observer.schedule(Handler(), root, recursive=True)
        observer.start()
        try:
            while not stop.wait(self.tick_s):
                for root in self.debouncer.pop_due(time.monotonic()):
                    self.on_change(root)
        finally:
            observer.stop()
            observer.join()
