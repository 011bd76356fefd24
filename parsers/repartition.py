"""Where Spark's offline repartition (Spark 4.2+) changed a query's state partition count.

``spark._streamingCheckpointManager.repartition(checkpoint, n)`` writes one extra batch: its
``offsets/N`` copies ``offsets/N-1`` (same source offsets, same batch timestamp) except
``spark.sql.shuffle.partitions``, which becomes ``n``. A normal batch never changes that conf
(Spark pins it for the query's lifetime), so a batch that reads nothing new and changes it is
a repartition.

Example::

    entries = {b: OffsetSeq.from_bytes(read(f"offsets/{b}")) for b in batches}
    for r in find_repartitions(entries):
        print(f"partitions {r.partitions_before} -> {r.partitions_after} at batch {r.batch_id}")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from stateglass.parsers.logs import OffsetSeq


@dataclass(frozen=True)
class Repartition:
    """One repartition batch: the state went from ``partitions_before`` to ``partitions_after``."""

    batch_id: int
    partitions_before: int
    partitions_after: int

    @property
    def version(self) -> int:
        """The state version the repartition wrote (version = batch id + 1)."""
        return self.batch_id + 1


def is_repartition(previous: OffsetSeq, entry: OffsetSeq) -> bool:
    """Whether ``entry`` (the batch after ``previous``) is a repartition batch."""
    before, after = previous.shuffle_partitions, entry.shuffle_partitions
    return (
        before is not None
        and after is not None
        and before != after
        and entry.sources == previous.sources
    )


def find_repartitions(entries: Mapping[int, OffsetSeq]) -> list[Repartition]:
    """Every repartition batch among consecutive offset-log ``entries`` (batch id -> entry).

    A batch whose predecessor is missing (purged, unreadable) cannot be judged and is skipped.
    """
    found = []
    for batch in sorted(entries):
        previous = entries.get(batch - 1)
        entry = entries[batch]
        if previous is not None and is_repartition(previous, entry):
            assert previous.shuffle_partitions is not None and entry.shuffle_partitions is not None
            found.append(Repartition(batch, previous.shuffle_partitions, entry.shuffle_partitions))
    return found


def partitions_at(
    batch_id: int, repartitions: Sequence[Repartition], newest: int | None
) -> int | None:
    """The partition count of the state batch ``batch_id`` wrote: ``newest`` (the newest offset
    entry's count) unless a later repartition changed it, then that repartition's "before".
    """
    for r in sorted(repartitions, key=lambda r: r.batch_id):
        if batch_id < r.batch_id:
            return r.partitions_before
    return newest
