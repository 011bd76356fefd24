"""Which state versions the files still on disk can rebuild (shared by holes and retention).

Version V loads from the newest snapshot (HDFS ``.snapshot``, RocksDB ``.zip``) at or below V
plus every delta or changelog after it; version 0 is the empty store, so a chain whose change
files start at version 1 needs no snapshot.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from stateglass.app.analysis.chain_files import ChainFiles, chain_files
from stateglass.app.analysis.health.base import Context


def live_chain_files(ctx: Context) -> dict[tuple[int, str, int], ChainFiles]:
    """``(operator, store, partition) -> ChainFiles`` from ``state_files`` and ``problems``.

    Four rules read it: built once per evaluation (a month's live files are 22,000 rows), so
    callers only read what they get."""
    if "live_chain_files" not in ctx.shared:
        ctx.shared["live_chain_files"] = chain_files(ctx)
    found: dict[tuple[int, str, int], ChainFiles] = ctx.shared["live_chain_files"]
    return found


def gaps(versions: Iterable[int], lo: int, hi: int) -> list[int]:
    """Versions in ``lo..hi`` missing from ``versions``."""
    have = set(versions)
    return [v for v in range(lo, hi + 1) if v not in have]


@dataclass(frozen=True)
class CountRun:
    """Consecutive recorded batches ``first..last`` with one partition count ``count``."""

    first: int
    last: int
    count: int


# The runs of one partition count among a checkpoint's recorded batches: a month of batches is
# a handful of rows (one per repartition), so a rule never walks every batch per partition.
_COUNT_RUNS = """
    SELECT batch_id, shuffle_partitions,
           prev IS DISTINCT FROM shuffle_partitions AS starts,
           next IS DISTINCT FROM shuffle_partitions AS ends
    FROM (
        SELECT batch_id, shuffle_partitions,
               lag(shuffle_partitions) OVER (ORDER BY batch_id) AS prev,
               lead(shuffle_partitions) OVER (ORDER BY batch_id) AS next
        FROM batches WHERE checkpoint = ? AND shuffle_partitions IS NOT NULL
    )
    WHERE starts OR ends
    ORDER BY batch_id
"""


@dataclass(frozen=True)
class PartitionCounts:
    """State partitions per batch, from each batch's ``spark.sql.shuffle.partitions``: a
    repartition (Spark 4.2+) changes the count, so a partition can start or end at it."""

    runs: tuple[CountRun, ...]
    default: int

    @classmethod
    def of(cls, ctx: Context, default: int) -> PartitionCounts:
        runs, first = [], 0
        for batch, count, starts, ends in ctx.rows(_COUNT_RUNS):
            first = batch if starts else first
            if ends:
                runs.append(CountRun(int(first), int(batch), int(count)))
        return cls(tuple(runs), default)

    def at(self, batch: int) -> int:
        """The count at ``batch``; a batch whose offsets are gone takes the next known one's."""
        at = bisect.bisect_left([r.last for r in self.runs], batch)
        return self.runs[at].count if at < len(self.runs) else self.default

    def spans(self) -> Iterator[tuple[int | None, int | None, int]]:
        """(after, through, count): the batches after ``after`` up to ``through`` have
        ``count`` partitions, as :meth:`at` answers (``None``: no bound on that side)."""
        after: int | None = None
        for run in self.runs:
            yield after, run.last, run.count
            after = run.last
        yield after, None, self.default

    def most(self) -> int:
        """The largest count any batch had: every partition directory the store can have."""
        return max([self.default, *(r.count for r in self.runs)])

    def last_batch_of(self, partition: int, last: int) -> int | None:
        """The newest batch up to ``last`` whose state has ``partition`` (None: none has)."""
        for run in reversed(self.runs):
            if run.first <= last and partition < run.count:
                return min(run.last, last)
        return last if partition < self.default else None
