"""Which process a rewrite's temporary tree belongs to, so a later run can clean up after a
killed one without touching anything that is not provably its own leftover.

Before a rewrite makes its hidden temporary tree ``.<name>.stateglass-rewrite-<id>`` beside the
destination, it writes ``.<name>.stateglass-rewrite-<id>.owner``: one line of JSON naming this
host, this process id and the process's start time. The tree is ours to remove only when its
owner file names a process of this host that is gone (no such pid, a zombie, or a pid reused by
a process that started at another time). A tree without an owner file, or whose owner lives on
another host or is still running, is left alone.

Example::

    mark = OwnerMark.of_this_process()
    mark.write(".orders-16.stateglass-rewrite-1a2b.owner")
    OwnerMark.read(".orders-16.stateglass-rewrite-1a2b.owner").gone()   # False while we run
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass

OWNER_SUFFIX = ".owner"


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux ``/proc``), '' for a zombie,
    None when there is no such process or no ``/proc`` to ask."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = stat[stat.rfind(")") + 2 :].split()
    if len(fields) < 20:
        return None
    return "" if fields[0] in ("Z", "X") else fields[19]


def _alive_without_proc(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


@dataclass(frozen=True)
class OwnerMark:
    """The process that writes a temporary tree."""

    host: str
    pid: int
    started: str | None  # start ticks from /proc; None where there is no /proc

    @classmethod
    def of_this_process(cls) -> OwnerMark:
        pid = os.getpid()
        return cls(socket.gethostname(), pid, _start_ticks(pid))

    @classmethod
    def from_bytes(cls, data: bytes) -> OwnerMark | None:
        """The mark in ``data``, or None when it is not one of ours."""
        try:
            doc = json.loads(data)
            return cls(str(doc["host"]), int(doc["pid"]), doc["started"])
        except (ValueError, KeyError, TypeError):
            return None

    @classmethod
    def read(cls, path: str) -> OwnerMark | None:
        """The mark in ``path``, or None when it is missing or not one of ours."""
        try:
            with open(path, "rb") as f:
                return cls.from_bytes(f.read(4096))
        except OSError:
            return None

    def to_bytes(self) -> bytes:
        doc = {"host": self.host, "pid": self.pid, "started": self.started}
        return (json.dumps(doc) + "\n").encode("utf-8")

    def write(self, path: str) -> None:
        """Make ``path`` hold this mark, whole or not at all; fails if it exists (ids are
        never reused). A file created and then written could be killed in between and left
        empty, naming no one: nothing could ever prove it a leftover. So the mark is written
        to an unnamed file (``O_TMPFILE``, Linux) and linked to ``path`` complete; where there
        is no such file, created and written in one small write."""
        data = self.to_bytes()
        try:
            fd = os.open(os.path.dirname(path) or ".", os.O_TMPFILE | os.O_WRONLY, 0o644)
        except (AttributeError, OSError):
            fd = None
        if fd is not None:
            fds = os.open("/proc/self/fd", os.O_RDONLY)
            try:
                os.write(fd, data)
                # linkat(2) with AT_SYMLINK_FOLLOW, which os.link uses only given a dir fd.
                os.link(str(fd), path, src_dir_fd=fds, follow_symlinks=True)
            finally:
                os.close(fds)
                os.close(fd)
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def gone(self) -> bool:
        """Whether this process has ended: only then may its leftovers be removed."""
        if self.host != socket.gethostname():
            return False  # a process on another machine sharing the directory: cannot tell
        started = _start_ticks(self.pid)
        if started is None and self.started is None:
            return not _alive_without_proc(self.pid)
        return started is None or started == "" or started != self.started
