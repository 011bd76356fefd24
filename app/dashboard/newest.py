"""A cache that keeps one result per question: the one for the database's newest version.

The dashboard caches frames and figures until the checkpoint they read changes. Keyed by
(question, version) in an LRU of a few hundred entries, every commit added one entry per
question and the stale ones stayed until they were pushed out or expired: a live Overview
over 20 checkpoints re-ran on every scan and kept some eighty superseded copies of each of its
loads. Here a new version replaces its question's old result at once, so what the cache holds
is what the pages can still be asked, at most ``max_entries`` questions, each kept until unused
for ``ttl_s``.

Example::

    cache = NewestOnly(max_entries=256, ttl_s=600)
    frame = cache.get("queries.batches|/cp", version, lambda: queries.batches(db, "/cp"))
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any


class NewestOnly:
    """``key -> (version, value, last used)``, least recently used first."""

    def __init__(
        self, max_entries: int, ttl_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self.clock = clock
        self._entries: OrderedDict[Hashable, tuple[str, Any, float]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def versions(self) -> dict[Hashable, str]:
        """Each kept question's version (one per question)."""
        with self._lock:
            return {k: v for k, (v, _, _) in self._entries.items()}

    def get(self, key: Hashable, version: str, build: Callable[[], Any]) -> Any:
        """The result for ``key`` at ``version``, built (outside the lock: two sessions may
        build the same one) when the kept one is of another version or none is kept."""
        now = self.clock()
        with self._lock:
            kept = self._entries.get(key)
            if kept is not None and kept[0] == version and now - kept[2] < self.ttl_s:
                self._entries[key] = (version, kept[1], now)
                self._entries.move_to_end(key)
                return kept[1]
        value = build()
        with self._lock:
            self._entries[key] = (version, value, now)
            self._entries.move_to_end(key)
            self._forget(now)
        return value

    def _forget(self, now: float) -> None:
        """Forget what has not been used for ``ttl_s``, then the least recent over the limit."""
        while self._entries:
            key, (_, _, used) = next(iter(self._entries.items()))
            if now - used < self.ttl_s and len(self._entries) <= self.max_entries:
                return
            del self._entries[key]
