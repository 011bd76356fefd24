"""The :class:`~collectors.fs.FileSystem` protocol over an fsspec file system (S3, ADLS, GCS, HDFS).

Paths in and out are URLs under the checkpoint's canonical URL. Three things keep a scan cheap
on an object store, where each request costs money and latency:

- every directory is listed at most once per opened checkpoint, and ``exists``/``is_dir``/
  ``stat`` are answered from the parent's listing whenever it was listed;
- immutable state files come from the local :class:`~collectors.remote.cache.FileCache`, keyed
  by the size, mtime and etag the listing gave;
- every request is counted in :data:`COUNTS` (``--verbose`` prints them).
"""

from __future__ import annotations

import builtins
import copy
import posixpath
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from stateglass.collectors.errors import CheckpointError, NotACheckpoint
from stateglass.collectors.fs import FileInfo
from stateglass.collectors.remote.cache import FileCache, cache_key
from stateglass.collectors.remote.failures import storage_error
from stateglass.collectors.remote.urls import Location, is_url, parse_location
from stateglass.parsers.units import fmt_bytes

T = TypeVar("T")
# Written once, renamed into place, never changed: safe to cache by (URL, size, mtime, etag).
_IMMUTABLE = (".delta", ".snapshot", ".zip", ".changelog", ".sst")
# S3 answers a listing in pages of at most this many keys.
_KEYS_PER_PAGE = 1000


@dataclass
class RequestCounts:
    """Requests sent to remote storage by this process."""

    list: int = 0
    get: int = 0
    head: int = 0
    bytes_read: int = 0
    cache_hits: int = 0
    # GETs of a state file this process had downloaded before: what the cache must prevent.
    refetched: int = 0
    fetched: set[str] = field(default_factory=set)

    def line(self) -> str:
        return (
            f"requests: {self.list} LIST, {self.get} GET, {self.head} HEAD "
            f"({fmt_bytes(self.bytes_read)} downloaded); cache: {self.cache_hits} hits"
        )

    def add(self, kind: str, n: int = 1) -> None:
        """Count ``n`` of ``kind`` (``list``, ``get``…): threads list at once (discovery)."""
        with _COUNTS_LOCK:
            setattr(self, kind, getattr(self, kind) + n)

    def fetching(self, url: str) -> None:
        """A state file's GET: a second one of the same file is what the cache must prevent."""
        with _COUNTS_LOCK:
            self.refetched += url in self.fetched
            self.fetched.add(url)

    def merge(self, other: RequestCounts) -> None:
        """Add ``other``'s counts (a worker process's) to these."""
        self.list += other.list
        self.get += other.get
        self.head += other.head
        self.bytes_read += other.bytes_read
        self.cache_hits += other.cache_hits
        self.refetched += other.refetched + len(self.fetched & other.fetched)
        self.fetched |= other.fetched

    def reset(self) -> None:
        self.list = self.get = self.head = self.bytes_read = self.cache_hits = 0
        self.refetched = 0
        self.fetched.clear()


# Not a field: the counts cross to and from worker processes by pickle, and a lock does not.
_COUNTS_LOCK = threading.Lock()
COUNTS = RequestCounts()


@dataclass(frozen=True)
class _Meta:
    size: int
    mtime: float
    etag: str


class ObjectFileSystem:
    """Read-only, counted, cached access to one checkpoint (or prefix) on remote storage."""

    def __init__(
        self,
        fs: Any,
        location: Location,
        cache: FileCache | None,
        secrets: Mapping[str, object],
    ) -> None:
        self._fs = fs
        self.location = location
        self._cache = cache
        self._secrets = secrets
        self._listings: dict[str, list[FileInfo]] = {}
        self._meta: dict[str, _Meta] = {}

    def for_worker(self) -> Callable[[], ObjectFileSystem] | None:
        """For ``collect --jobs``: a new client per forked worker, on the same location and
        options, with what this one listed already; None for ``hdfs://``, whose client is a
        JVM (libhdfs) that a fork cannot copy."""
        if self.location.backend == "hdfs":
            return None
        location, cache, secrets = self.location, self._cache, dict(self._secrets)
        listings, meta = dict(self._listings), dict(self._meta)

        def reopen() -> ObjectFileSystem:
            from stateglass.collectors.remote.backends import BACKENDS

            # fsspec's async file systems refuse to run in a forked child (their event loop
            # and sessions stay in the parent): a new instance, built the parent's way.
            client = BACKENDS[location.backend](location, copy.deepcopy(secrets))
            fs = ObjectFileSystem(client, location, cache, secrets)
            fs._listings, fs._meta = listings, meta
            return fs

        return reopen

    def fresh(self) -> ObjectFileSystem:
        """The same location, client and cache with nothing listed yet: what a reader that
        must see new commits takes (this one answers from its listings for good)."""
        return ObjectFileSystem(self._fs, self.location, self._cache, self._secrets)

    # ---- the FileSystem protocol ------------------------------------------------------------

    def list(self, path: str) -> builtins.list[FileInfo]:
        url = path.rstrip("/")
        if url not in self._listings:
            self._listings[url] = self._ls(url)
        return builtins.list(self._listings[url])

    def names(self, path: str) -> builtins.list[tuple[str, bool]]:
        return [(f.name, f.is_dir) for f in self.list(path)]

    def stat(self, path: str) -> FileInfo | None:
        url = path.rstrip("/")
        known = self._from_parent(url)
        if isinstance(known, FileInfo):
            return known
        if known is False:
            return None
        meta = self._head(url)
        if meta is None:
            return FileInfo(posixpath.basename(url), True, 0, 0.0) if self.is_dir(url) else None
        return FileInfo(posixpath.basename(url), False, meta.size, meta.mtime)

    def read(self, path: str) -> bytes:
        url = path.rstrip("/")
        cacheable = url.endswith(_IMMUTABLE)
        key = None
        if self._cache is not None and cacheable:
            meta = self._meta.get(url) or self._head(url)
            if meta is None:
                raise CheckpointError(url, "file disappeared (purged by Spark?)")
            key = cache_key(url, meta.size, meta.mtime, meta.etag)
            data = self._cache.get(key)
            if data is not None:
                COUNTS.add("cache_hits")
                return data
        COUNTS.add("get")
        try:
            data = self._call(url, lambda: self._fs.cat_file(self._key(url)))
        except FileNotFoundError as exc:
            raise CheckpointError(url, "file disappeared (purged by Spark?)") from exc
        except IsADirectoryError as exc:
            raise CheckpointError(url, "is a directory, expected a file") from exc
        COUNTS.add("bytes_read", len(data))
        if cacheable:
            COUNTS.fetching(url)
        if key is not None and self._cache is not None and len(data) == self._meta_size(url):
            self._cache.put(key, data)
        return bytes(data)

    def exists(self, path: str) -> bool:
        url = path.rstrip("/")
        known = self._from_parent(url)
        if known is not None:
            return bool(known)
        return self.is_dir(url) or self._head(url) is not None

    def is_dir(self, path: str) -> bool:
        url = path.rstrip("/")
        known = self._from_parent(url)
        if known is not None:
            return isinstance(known, FileInfo) and known.is_dir
        try:
            return bool(self.list(url))
        except NotACheckpoint:
            return False

    def list_below(self, path: str, max_keys: int) -> None:
        """List every folder below ``path`` at once, from one listing of at most ``max_keys``
        keys (S3 only; elsewhere nothing): a fleet of small checkpoints under one prefix is
        then a few LISTs rather than several per checkpoint.

        Object stores list keys in order, so a folder is known whole when the listing went
        past it; folders it did not reach are listed one by one, as before.
        """
        from fsspec.asyn import sync

        url = path.rstrip("/")
        lsdir = getattr(self._fs, "_lsdir", None)
        if self.location.backend != "s3" or lsdir is None:
            return
        key = self._key(url).rstrip("/")
        found = self._call(
            url, lambda: sync(self._fs.loop, lsdir, key, delimiter="", max_items=max_keys)
        )
        COUNTS.add("list", max(1, -(-len(found) // _KEYS_PER_PAGE)))
        names = sorted(str(e.get("name", "")) for e in found if e.get("type") != "directory")
        complete = len(names) < max_keys
        last = names[-1] if names else ""
        entries = {str(e.get("name", "")): e for e in found}
        folders: dict[str, dict[str, FileInfo]] = {}
        for name in names:
            parts = name[len(key) + 1 :].split("/")
            for depth in range(len(parts)):
                folder = "/".join([key, *parts[:depth]])
                child = parts[depth]
                if not child or child.startswith("."):
                    break
                listing = folders.setdefault(folder, {})
                if depth < len(parts) - 1:
                    listing.setdefault(child, FileInfo(child, True, 0, 0.0))
                    continue
                entry = entries[name]
                meta = _Meta(int(entry.get("size") or 0), _mtime(entry), _etag(entry))
                self._meta[url + name[len(key) :]] = meta
                listing[child] = FileInfo(child, False, meta.size, meta.mtime)
        for folder, listing in folders.items():
            if complete or (last > folder + "/" and not last.startswith(folder + "/")):
                shown = sorted(listing.values(), key=lambda f: f.name)
                self._listings.setdefault(url + folder[len(key) :], shown)

    # ---- requests --------------------------------------------------------------------------

    def _key(self, url: str) -> str:
        root = self.location.canonical
        if url == root:
            return self.location.key
        if url.startswith(root + "/"):
            return self.location.key + url[len(root) :]
        return parse_location(url).key if is_url(url) else url

    def _call(self, url: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            wrapped = storage_error(url, exc, self._secrets)
            if wrapped is not None:  # a missing bucket, not a missing file
                raise wrapped from exc
            raise
        except Exception as exc:
            wrapped = storage_error(url, exc, self._secrets)
            if wrapped is None:
                raise
            raise wrapped from exc

    def _ls(self, url: str) -> builtins.list[FileInfo]:
        COUNTS.add("list")
        try:
            entries = self._call(url, lambda: self._fs.ls(self._key(url), detail=True))
        except FileNotFoundError as exc:
            raise NotACheckpoint(url, "no such directory") from exc
        except NotADirectoryError as exc:
            raise NotACheckpoint(url, "not a directory") from exc
        key = self._key(url).rstrip("/")
        out = []
        for entry in entries:
            full = str(entry.get("name", "")).rstrip("/")
            name = posixpath.basename(full)
            if not name or full == key or name.startswith("."):
                # The directory itself (some stores list a marker object), or Spark's .crc
                # sidecars and temporary files, which every caller skips.
                continue
            is_dir = entry.get("type") == "directory"
            meta = _Meta(int(entry.get("size") or 0), _mtime(entry), _etag(entry))
            if not is_dir:
                self._meta[f"{url}/{name}"] = meta
            out.append(FileInfo(name, is_dir, meta.size, meta.mtime))
        return out

    def _head(self, url: str) -> _Meta | None:
        COUNTS.add("head")
        try:
            entry = self._call(url, lambda: self._fs.info(self._key(url)))
        except (FileNotFoundError, NotADirectoryError):
            return None
        if entry.get("type") == "directory":
            return None
        meta = _Meta(int(entry.get("size") or 0), _mtime(entry), _etag(entry))
        self._meta[url] = meta
        return meta

    def _meta_size(self, url: str) -> int:
        meta = self._meta.get(url)
        return meta.size if meta else -1

    def _from_parent(self, url: str) -> FileInfo | bool | None:
        """The entry from the parent's listing; False when it is not there; None: unknown.

        Inside the checkpoint the parent is listed (once) to answer: one LIST answers every
        sibling too, where a HEAD would answer one name and miss directories.
        """
        parent, _, name = url.rpartition("/")
        listing = self._listings.get(parent)
        if listing is None and parent.startswith(self.location.canonical):
            try:
                listing = self.list(parent)
            except NotACheckpoint:
                return False
        if listing is None:
            return None
        for f in listing:
            if f.name == name:
                return f
        return False


def _mtime(entry: Mapping[str, Any]) -> float:
    for name in ("LastModified", "last_modified", "mtime", "updated", "modificationTime"):
        value = entry.get(name)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, int | float):
            return float(value) / (1000.0 if name == "modificationTime" else 1.0)
        if isinstance(value, str) and value:
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return 0.0


def _etag(entry: Mapping[str, Any]) -> str:
    for name in ("ETag", "etag", "md5Hash", "generation"):
        value = entry.get(name)
        if value:
            return str(value).strip('"')
    return ""
