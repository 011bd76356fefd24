"""What a watcher's scan keeps in memory for the next one: each chain's newest key set.

Counting version N + 1 of a chain needs the keys of version N. A scan that starts from its
files rebuilds N from the snapshot and every delta after it, which for one new commit on
10,000 store partitions is most of the work. A watcher scans the same checkpoint commit
after commit, so it keeps what the last scan ended with — the key set of each chain (and the
eviction audit's ``key -> event time`` of each audited partition) at the last version
counted — and the next scan applies only the new delta to it.

What is kept is only ever used for exactly the version it was built at: a chain whose
earlier file changed starts below it and is rebuilt from its files as before. The memory is
bounded by ``max_keys`` over all entries; beyond it the chains are rebuilt from disk.

Example::

    carry = KeyCarry()
    seed = carry.take(("/cp", "chain", 0, "default", 3))   # None at first
    carry.keep(("/cp", "chain", 0, "default", 3), 12, keys)
"""

from __future__ import annotations

from collections.abc import Hashable, Sized
from typing import Any

# About 100 MB of short keys: enough for 10,000 partitions of a few thousand keys each.
DEFAULT_MAX_KEYS = 2_000_000


class KeyCarry:
    """Per chain (any hashable name), the key collection of one version, until taken."""

    def __init__(self, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        self.max_keys = max_keys
        self._kept: dict[Hashable, tuple[int, Any]] = {}
        self._size = 0

    def __len__(self) -> int:
        return len(self._kept)

    def take(self, name: Hashable) -> tuple[int, Any] | None:
        """``(version, keys)`` kept for ``name``, removed: the caller applies deltas to it."""
        found = self._kept.pop(name, None)
        if found is not None:
            self._size -= len(found[1])
        return found

    def keep(self, name: Hashable, version: int, keys: Sized) -> None:
        """Keep ``keys`` of ``version`` for the next scan, when the budget allows."""
        self.take(name)
        if self._size + len(keys) <= self.max_keys:
            self._kept[name] = (version, keys)
            self._size += len(keys)
