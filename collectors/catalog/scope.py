"""What the scans of one query share: the checkpoints as they were when it began, its deadline,
the error a source raised, and what it decoded.

DuckDB calls a source's ``scanner()`` once per scan, so two scans of one query (a self-join,
a table and its change feed) would each list the checkpoint; a commit landing between them
would make them disagree on "the last committed batch". A :class:`QueryScope` opens each
checkpoint once per query, so every scan of the query sees the same batches, and the next
query opens it afresh (a new commit is seen, never a stale last batch).
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stateglass.collectors.checkpoints.checkpoint import Checkpoint, StoreInfo
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import StateView
from stateglass.collectors.errors import QueryTimeLimit
from stateglass.collectors.fs import FileSystem

if TYPE_CHECKING:
    import pyarrow as pa

_SOURCES_KEPT = 64
_LEADING_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True)
class Decoded:
    """One unit of decoding a query did: a partition of a table at a batch (``cached``: its
    rows came from the session's :class:`DecodedCache`, nothing was decoded)."""

    schema: str
    table: str
    partition: int
    batch_id: int
    cached: bool = False


class QueryScope:
    """One query's view of the checkpoints, its deadline, and what its sources did."""

    def __init__(self, deadline: float | None, time_s: float | None) -> None:
        self.deadline = deadline
        self.time_s = time_s
        self.failure: BaseException | None = None
        self.decoded: list[Decoded] = []
        # State tables read at their last committed batch because no batch predicate
        # reached their scan: (schema.table, that batch).
        self.last_batch_read: list[tuple[str, int]] = []
        # State tables a scan of which a batch predicate reached (schema.table).
        self.batch_picked: set[str] = set()
        self._checkpoints: dict[str, Checkpoint] = {}
        self._lock = threading.Lock()

    def checkpoint(self, root: str, fs: FileSystem) -> Checkpoint:
        """``root`` as this query sees it (opened at its first scan). A remote file system
        keeps its listings, so each query takes a fresh one: a new commit is seen."""
        with self._lock:
            found = self._checkpoints.get(root)
            if found is None:
                fresh = getattr(fs, "fresh", None)
                listed: FileSystem = fresh() if fresh is not None else fs
                found = self._checkpoints[root] = Checkpoint(root, listed)
            return found

    def check_time(self, reading: str) -> None:
        """Stop between two pieces of decoding once the query is past its time limit.

        The session's timer interrupts DuckDB too, but an interrupt does not reach a
        Python source reliably while it decodes, so sources check as well.
        """
        if self.deadline is not None and time.monotonic() > self.deadline:
            limit = f" of {self.time_s:g}s" if self.time_s else ""
            raise QueryTimeLimit(f"stopped at the time limit{limit} while reading {reading}")


@dataclass(frozen=True)
class DecodedKey:
    """What a partition's decoded rows at a batch depend on: the view, the columns decoded
    (None: all), and the identity (name, size, mtime) of every file of the partition up to
    that batch's version. A file Spark rewrote, or purged, makes another key; a new commit
    makes another last batch."""

    view: StateView
    partition: int
    batch_id: int
    columns: frozenset[str] | None
    files: tuple[tuple[str, int, float], ...]


class DecodedCache:
    """Decoded partitions of a session's queries, the least recently used dropped first so
    that they hold at most ``max_bytes`` (Arrow's bytes; 0: nothing is kept). A partition
    bigger than that, or one a query stopped reading part-way, is not kept."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.held = 0
        self._lock = threading.Lock()
        self._tables: OrderedDict[DecodedKey, tuple[list[pa.Table], int]] = OrderedDict()

    # The key of a partition at a batch decoded to some columns (see :func:`decoded_key`).
    key = staticmethod(lambda *args: decoded_key(*args))

    def get(self, key: DecodedKey) -> list[pa.Table] | None:
        with self._lock:
            found = self._tables.get(key)
            if found is None:
                return None
            self._tables.move_to_end(key)
            return found[0]

    def keep(self, key: DecodedKey, pieces: Iterator[pa.Table]) -> Iterator[pa.Table]:
        """``pieces`` as they come, kept under ``key`` once the last one has come."""
        kept: list[pa.Table] | None = [] if self.max_bytes > 0 else None
        size = 0
        for piece in pieces:
            if kept is not None:
                size += piece.nbytes
                kept.append(piece)
                if size > self.max_bytes:
                    kept = None
            yield piece
        if kept is not None:
            self._put(key, kept, size)

    def _put(self, key: DecodedKey, tables: list[pa.Table], size: int) -> None:
        with self._lock:
            old = self._tables.pop(key, None)
            self.held -= old[1] if old else 0
            self._tables[key] = (tables, size)
            self.held += size
            while self.held > self.max_bytes:
                _, (_, dropped) = self._tables.popitem(last=False)
                self.held -= dropped


def decoded_key(
    view: StateView,
    cp: Checkpoint,
    store: StoreInfo,
    partition: int,
    batch_id: int,
    columns: frozenset[str] | None,
) -> DecodedKey:
    """The key of ``partition`` at ``batch_id`` decoded to ``columns``, from a listing of
    its directory in ``cp`` (the query's view of the checkpoint)."""
    listed = cp.fs.list(cp.store_dir(store.operator_id, partition, store.store_name))
    version = batch_id + 1
    files = sorted(
        (f.name, f.size, f.mtime) for f in listed if not f.is_dir and _version_of(f.name) <= version
    )
    return DecodedKey(view, partition, batch_id, columns, tuple(files))


def _version_of(name: str) -> int:
    """The state version a store file is of (``12.delta``, ``12_<id>.zip``); a file of no
    version (RocksDB's shared SSTs are named uniquely) is part of every one."""
    found = _LEADING_DIGITS.match(name)
    return int(found.group()) if found else -1


class SourceCache:
    """Opened state sources, reused while their checkpoint's committed batches stay the same,
    and the session's :class:`DecodedCache`.

    Opening one reads schema files and lists partitions; a new commit makes a new source, so
    its listings are never stale.
    """

    def __init__(self, decoded: DecodedCache, kept: int = _SOURCES_KEPT) -> None:
        self.decoded = decoded
        self.kept = kept
        self._lock = threading.Lock()
        self._sources: OrderedDict[tuple[StateView, tuple[int, ...]], StateSource] = OrderedDict()

    def get(self, view: StateView, cp: Checkpoint) -> StateSource:
        stamp = (view, tuple(cp.commit_batch_ids))
        with self._lock:
            found = self._sources.get(stamp)
            if found is not None:
                self._sources.move_to_end(stamp)
                return found
        source = StateSource(cp, view.request())
        with self._lock:
            self._sources[stamp] = source
            while len(self._sources) > self.kept:
                self._sources.popitem(last=False)
        return source
