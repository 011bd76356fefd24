"""A bounded local cache of immutable state files read from object stores.

Spark writes a delta, snapshot, zip, SST or changelog once under a temporary name and renames
it, so its bytes never change under a given (URL, size, mtime, etag). That tuple is the key: a
rewritten object (a retried batch of format v1 writes the same name again) gets a new key and
is never served stale. Least recently used files go first once the cache is over its limit.

Example::

    cache = FileCache("~/.cache/stateglass", limit_bytes=2 << 30)
    data = cache.get(key)            # None on a miss
    cache.put(key, data)
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time

DEFAULT_CACHE_DIR = os.path.join("~", ".cache", "stateglass")
CACHE_DIR_ENV = "STATEGLASS_CACHE_DIR"


def default_cache_dir() -> str:
    """``$STATEGLASS_CACHE_DIR``, else ``~/.cache/stateglass``."""
    return os.environ.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR


DEFAULT_CACHE_BYTES = 2 << 30  # 2 GiB


def cache_key(url: str, size: int, mtime: float, etag: str) -> str:
    """Everything that changes when an object is rewritten, hashed to a file name."""
    return hashlib.sha256(f"{url}\0{size}\0{mtime!r}\0{etag}".encode()).hexdigest()


class FileCache:
    """Files under ``root/objects``; ``limit_bytes`` 0 disables the cache."""

    def __init__(self, root: str, limit_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.root = os.path.join(os.path.abspath(os.path.expanduser(root)), "objects")
        self.limit = limit_bytes
        self.hits = 0
        self.misses = 0
        self._total: int | None = None

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key[:2], key)

    def get(self, key: str) -> bytes | None:
        if self.limit <= 0:
            return None
        path = self._path(key)
        try:
            with open(path, "rb") as fh:
                data = fh.read()
            _touch(path)
        except OSError:
            self.misses += 1
            return None
        self.hits += 1
        return data

    def put(self, key: str, data: bytes) -> None:
        """Store ``data``; a cache that cannot be written (disk full, read-only) is skipped."""
        if self.limit <= 0 or len(data) > self.limit:
            return
        path = self._path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            # Write then rename: a reader in another process never sees half a file.
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
            _touch(path)
        except OSError:
            return
        self._total = self._size() if self._total is None else self._total + len(data)
        if self._total > self.limit:
            self._evict()

    def _entries(self) -> list[tuple[float, int, str]]:
        out = []
        for dirpath, _, names in os.walk(self.root):
            for name in names:
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                out.append((st.st_mtime, st.st_size, path))
        return out

    def _size(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _evict(self) -> None:
        """Oldest-used first, down to 90% of the limit so the next put does not walk again."""
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        target = self.limit * 9 // 10
        for _, size, path in entries:
            if total <= target:
                break
            try:
                os.unlink(path)
            except OSError:
                continue
            total -= size
        self._total = total


def _touch(path: str) -> None:
    """The mtime is the LRU clock. Set it from the precise clock: the file system's own stamps
    are coarse (a few ms), and files used in one burst would tie."""
    now = time.time_ns()
    os.utime(path, ns=(now, now))
