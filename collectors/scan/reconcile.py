"""When a watcher's scan lists every store directory again: the periodic full reconcile.

Between full listings a watcher's scan looks the new commits' files up by name
(:mod:`collectors.scan.by_name`), which cannot see what Spark's maintenance purged, snapshots of
older versions, new partitions or leftovers. A full listing every few scans, or every few
minutes, catches those; this module holds no I/O so the CLI can import it cheaply.

Example::

    policy = ReconcilePolicy(every_scans=20, every_s=300)
    Scanner(db, reconcile=policy).scan(root)   # first scan of a root: a full listing
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

# A full listing at least every this many watcher scans of a checkpoint, or this often.
DEFAULT_RECONCILE_SCANS = 20
DEFAULT_RECONCILE_S = 300.0


@dataclass
class ReconcilePolicy:
    """When a watcher's scan must list everything again instead of looking up by name.

    A checkpoint is listed in full at its first scan, then after ``every_scans`` scans by
    name or ``every_s`` seconds, whichever comes first. ``clock`` is passed in for tests.
    """

    every_scans: int = DEFAULT_RECONCILE_SCANS
    every_s: float = DEFAULT_RECONCILE_S
    clock: Callable[[], float] = time.monotonic
    # root -> (scans by name since the last full one, when that full one ran)
    _since: dict[str, tuple[int, float]] = field(default_factory=dict)

    def _now(self) -> float:
        return self.clock()

    def full_due(self, root: str) -> bool:
        since = self._since.get(root)
        if since is None:
            return True
        scans, at = since
        return scans >= self.every_scans or self._now() - at >= self.every_s

    def listed(self, root: str) -> None:
        """A full listing of ``root`` was recorded."""
        self._since[root] = (0, self._now())

    def looked_up(self, root: str) -> None:
        """A scan by name of ``root`` was recorded."""
        scans, at = self._since.get(root, (0, self._now()))
        self._since[root] = (scans + 1, at)
