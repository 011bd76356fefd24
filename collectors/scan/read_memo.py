"""Files a scan reads twice, read once: the chain counting's bytes handed to the eviction audit.

A watcher's scan of one commit counts each chain's new delta, then the audit replays the very
same delta for event times. :class:`ReadMemo` wraps the scan's file system: while it
remembers, every file read is kept (up to a byte budget); a later read of a kept file is
served from memory and forgets it. The bytes are the ones the counting saw, so the audit
judges the same file contents, and nothing else in the scan changes.

Example::

    reads = ReadMemo(cp.fs)
    results = engine.run(tasks, reads)  # remembered
    reads.stop()                        # the audit only takes
    audit(..., reads)
"""

from __future__ import annotations

import builtins

from stateglass.collectors.fs import FileInfo, FileSystem

# A commit of 10,000 chains reads about 10,000 small deltas; a first scan of a big store reads
# far more than the audit could use before it is done: past the budget, files are read again.
BUDGET_BYTES = 64 << 20


class ReadMemo:
    """A :class:`FileSystem` that keeps the bytes it reads until they are read again."""

    def __init__(self, fs: FileSystem, budget: int = BUDGET_BYTES) -> None:
        self.fs = fs
        self.budget = budget
        self.kept: dict[str, bytes] = {}
        self.remembering = True

    def stop(self) -> None:
        """Remember nothing more: what is kept is served once more, then forgotten."""
        self.remembering = False

    def clear(self) -> None:
        self.kept.clear()
        self.budget = 0

    def read(self, path: str) -> bytes:
        data = self.kept.pop(path, None)
        if data is not None:
            self.budget += len(data)
            return data
        data = self.fs.read(path)
        if self.remembering and len(data) <= self.budget:
            self.kept[path] = data
            self.budget -= len(data)
        return data

    def list(self, path: str) -> builtins.list[FileInfo]:
        return self.fs.list(path)

    def names(self, path: str) -> builtins.list[tuple[str, bool]]:
        return self.fs.names(path)

    def stat(self, path: str) -> FileInfo | None:
        return self.fs.stat(path)

    def exists(self, path: str) -> bool:
        return self.fs.exists(path)

    def is_dir(self, path: str) -> bool:
        return self.fs.is_dir(path)
