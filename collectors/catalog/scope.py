"""What the scans of one query share: the checkpoints as they were when it began, its deadline,
the error a source raised, and what it decoded.

DuckDB calls a source's ``scanner()`` once per scan, so two scans of one query (a self-join,
a table and its change feed) would each list the checkpoint; a commit landing between them
would make them disagree on "the last committed batch". A :class:`QueryScope` opens each
checkpoint once per query, so every scan of the query sees the same batches, and the next
query opens it afresh (a new commit is seen, never a stale last batch).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.checkpoints.state_reader import StateSource
from stateglass.collectors.checkpoints.state_views import StateView
from stateglass.collectors.errors import QueryTimeLimit
from stateglass.collectors.fs import FileSystem

_SOURCES_KEPT = 64


@dataclass(frozen=True)
class Decoded:
    """One unit of decoding a query did: a partition of a table at a batch."""

    schema: str
    table: str
    partition: int
    batch_id: int


class QueryScope:
    """One query's view of the checkpoints, its deadline, and what its sources did."""

    def __init__(self, deadline: float | None, time_s: float | None) -> None:
        self.deadline = deadline
        self.time_s = time_s
        self.failure: BaseException | None = None
        self.decoded: list[Decoded] = []
        self._checkpoints: dict[str, Checkpoint] = {}
        self._lock = threading.Lock()

    def checkpoint(self, root: str, fs: FileSystem) -> Checkpoint:
        """``root`` as this query sees it (opened at its first scan)."""
        with self._lock:
            found = self._checkpoints.get(root)
            if found is None:
                found = self._checkpoints[root] = Checkpoint(root, fs)
            return found

    def check_time(self, reading: str) -> None:
        """Stop between two pieces of decoding once the query is past its time limit.

        The session's timer interrupts DuckDB too, but an interrupt does not reach a
        Python source reliably while it decodes, so sources check as well.
        """
        if self.deadline is not None and time.monotonic() > self.deadline:
            limit = f" of {self.time_s:g}s" if self.time_s else ""
            raise QueryTimeLimit(f"stopped at the time limit{limit} while reading {reading}")


class SourceCache:
    """Opened state sources, reused while their checkpoint's committed batches stay the same.

    Opening one reads schema files and lists partitions; a new commit makes a new source, so
    its listings are never stale.
    """

    def __init__(self, kept: int = _SOURCES_KEPT) -> None:
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
