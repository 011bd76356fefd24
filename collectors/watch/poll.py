"""Watch checkpoints by listing ``commits/`` every few seconds: for object stores (which send
no events), network mounts, and as the fallback when inotify runs out of watches.

A batch is over when Spark writes ``commits/N``, and a scan reads everything the batch wrote, so
one listing of ``commits/`` per checkpoint per poll is all it costs; the full (incremental) scan
runs only when a new commit appears. Works over any :class:`~collectors.fs.FileSystem`.

Example::

    poller = CommitPoller(fs, on_change=scanner.scan, interval_s=10)
    poller.add("s3://bucket/checkpoints/orders")
    poller.run(stop_event)
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from stateglass.collectors.checkpoints.discover import join
from stateglass.collectors.errors import CollectorError, NotACheckpoint
from stateglass.collectors.fs import FileSystem

DEFAULT_INTERVAL_S = 10.0


def newest_commit(fs: FileSystem, root: str) -> int | None:
    """The highest N of ``root/commits/N``; None when there is none (yet)."""
    try:
        names = fs.names(join(root, "commits"))
    except NotACheckpoint:
        return None  # no batch committed yet
    return max((int(n) for n, is_dir in names if not is_dir and n.isdigit()), default=None)


class CommitPoller:
    """Calls ``on_change(root)`` for each root whose newest commit moved since the last poll.

    ``on_error(root, exc)`` hears of a listing that failed (credentials, throttling, a lost
    connection); that root is polled again next time, nothing is scanned.
    """

    def __init__(
        self,
        fs_for: Callable[[str], FileSystem],
        on_change: Callable[[str], object],
        interval_s: float = DEFAULT_INTERVAL_S,
        on_error: Callable[[str, CollectorError], object] | None = None,
    ) -> None:
        self.fs_for = fs_for
        self.on_change = on_change
        self.interval_s = interval_s
        self.on_error = on_error
        self._newest: dict[str, int | None] = {}
        self._lock = threading.Lock()
        self.polls = 0

    def add(self, root: str) -> None:
        """Start polling ``root``; the commits present now count as seen (the caller scans it)."""
        newest = newest_commit(self.fs_for(root), root)
        with self._lock:
            self._newest[root] = newest

    @property
    def roots(self) -> list[str]:
        with self._lock:
            return list(self._newest)

    def poll_once(self) -> list[str]:
        """List each root's ``commits/`` once; scan (``on_change``) those with a new commit."""
        self.polls += 1
        changed = []
        for root in self.roots:
            try:
                newest = newest_commit(self.fs_for(root), root)
            except CollectorError as exc:
                if self.on_error is not None:
                    self.on_error(root, exc)
                continue
            with self._lock:
                before = self._newest.get(root)
                self._newest[root] = newest
            # A lower number too: the checkpoint was replaced or rolled back. None (commits/
            # gone) has nothing new to scan.
            if newest is not None and newest != before:
                changed.append(root)
                self.on_change(root)
        return changed

    def run(self, stop: threading.Event) -> None:
        """Poll every ``interval_s`` until ``stop`` is set."""
        while not stop.wait(self.interval_s):
            self.poll_once()
