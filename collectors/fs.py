"""Read-only access to the files of a checkpoint.

Everything in the collectors reads through a :class:`FileSystem`, which has no method that
writes: StateGlass never changes a byte of a checkpoint. Tests pass fakes.
"""

from __future__ import annotations

import builtins
import os
import stat as stat_mod
from dataclasses import dataclass
from typing import Protocol

from stateglass.collectors.errors import CheckpointError, NotACheckpoint


@dataclass(frozen=True)
class FileInfo:
    """What a directory listing says of one entry."""

    name: str
    is_dir: bool
    size: int
    mtime: float


class FileSystem(Protocol):
    """The read-only operations the collectors need."""

    def list(self, path: str) -> list[FileInfo]:
        """Entries of a directory; hidden ones (Spark's ``.N.delta.crc``, temp files) may be
        left out, since every caller skips them."""
        ...

    def names(self, path: str) -> builtins.list[tuple[str, bool]]:
        """``(name, is_dir)`` of each entry, without the cost of a ``stat`` per file (hidden
        ones may be left out, as in :meth:`list`)."""
        ...

    def stat(self, path: str) -> FileInfo | None:
        """Size and mtime of one file; None when it is gone."""
        ...

    def read(self, path: str) -> bytes: ...

    def exists(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...


class LocalFileSystem:
    """The local disk."""

    def _scandir(self, path: str) -> list[os.DirEntry[str]]:
        try:
            return list(os.scandir(path))
        except FileNotFoundError as exc:
            raise NotACheckpoint(path, "no such directory") from exc
        except NotADirectoryError as exc:
            raise NotACheckpoint(path, "not a directory") from exc
        except PermissionError as exc:
            raise CheckpointError(path, "permission denied") from exc
        except OSError as exc:
            raise CheckpointError(path, f"cannot list ({_reason(exc)})") from exc

    def names(self, path: str) -> list[tuple[str, bool]]:
        out = []
        for entry in self._scandir(path):
            if entry.name.startswith(".") and not entry.name.endswith(".tmp"):
                # .crc sidecars; temp files (``.N.delta.<uuid>.tmp``) stay for the orphan check.
                continue
            try:
                # d_type from the directory itself: no syscall per entry.
                out.append((entry.name, entry.is_dir()))
            except OSError:
                continue
        return out

    def stat(self, path: str) -> FileInfo | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(path, f"cannot stat ({_reason(exc)})") from exc
        name = os.path.basename(path)
        return FileInfo(name, stat_mod.S_ISDIR(st.st_mode), st.st_size, st.st_mtime)

    def list(self, path: str) -> list[FileInfo]:
        entries = self._scandir(path)
        out = []
        for entry in entries:
            if entry.name.startswith("."):
                # Spark's .crc sidecars and temp files: every caller skips them, and they are
                # half of a store directory, so not stat-ing them halves a scan's listing.
                continue
            try:
                st = entry.stat()
            except FileNotFoundError:
                # Spark renamed or purged it while we listed: it simply is not there.
                continue
            except OSError as exc:
                raise CheckpointError(entry.path, f"cannot stat ({_reason(exc)})") from exc
            out.append(FileInfo(entry.name, stat_mod.S_ISDIR(st.st_mode), st.st_size, st.st_mtime))
        return out

    def read(self, path: str) -> bytes:
        try:
            return _read_whole(path)
        except FileNotFoundError as exc:
            raise CheckpointError(path, "file disappeared (purged by Spark?)") from exc
        except IsADirectoryError as exc:
            raise CheckpointError(path, "is a directory, expected a file") from exc
        except PermissionError as exc:
            raise CheckpointError(path, "permission denied") from exc
        except OSError as exc:
            raise CheckpointError(path, f"cannot read ({_reason(exc)})") from exc

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)


def _read_whole(path: str) -> bytes:
    """A file's bytes through bare file descriptor calls: a scan reads thousands of small
    files, and ``open()``'s buffered file object costs as much as the reading itself."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        # Asking one byte past the size sees the end at once. Anything else (a file still
        # growing, or a read cut short: Linux returns at most 2 GiB a call) is read on.
        data = os.read(fd, size + 1)
        if len(data) == size:
            return data
        chunks = [data]
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _reason(exc: OSError) -> str:
    """The OS's words for an error, without the path it repeats (the message names it once)."""
    return exc.strerror or str(exc)


LOCAL = LocalFileSystem()
