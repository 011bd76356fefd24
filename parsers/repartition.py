"""Where Spark's offline repartition (Spark 4.2+) changed a query's state partition count.

``spark._streamingCheckpointManager.repartition(checkpoint, n)`` writes one extra batch: its
``offsets/N`` copies ``offsets/N-1`` (same source offsets, same batch timestamp) except
``spark.sql.shuffle.partitions``, which becomes ``n``. A normal batch never changes that conf
(Spark pins it for the query's lifetime), so a batch that reads nothing new and changes it is
a repartition.

A repartition that never finished (``offsets/N`` without ``commits/N``) is what Spark refuses to
restart on (SPARK-55111, ``spark.sql.streaming.checkUnfinishedRepartitionOnRestart``, on by
default): ``MicroBatchExecution`` judges only the partition counts
(``OfflineStateRepartitionUtils.isRepartitionBatch``), so :func:`unfinished_repartition` does
the same. A repartition attempted on an HDFS-provider checkpoint fails
(``STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER``) after writing ``offsets/N``, and
leaves exactly that.

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


UNFINISHED_REPARTITION_ERROR = "STREAMING_UNFINISHED_REPARTITION_DETECTED"


def is_repartition_batch(shuffle_partitions: Mapping[int, int | None], batch: int) -> bool:
    """Spark's test: batch > 0 whose pinned shuffle partitions differ from the batch before's
    (both known)."""
    if batch <= 0:
        return False
    now, before = shuffle_partitions.get(batch), shuffle_partitions.get(batch - 1)
    return now is not None and before is not None and now != before


@dataclass(frozen=True)
class UnfinishedRepartition:
    batch: int
    last_committed: int
    partitions_before: int
    partitions_after: int

    @property
    def spark_message(self) -> str:
        """Spark's own words (error-conditions.json)."""
        return (
            f"[{UNFINISHED_REPARTITION_ERROR}] The latest batch {self.batch} is for an "
            f"unfinished state repartitioning i.e. last committed batch is: {self.last_committed})."
        )


def unfinished_repartition(
    shuffle_partitions: Mapping[int, int | None], latest: int | None, last_committed: int | None
) -> UnfinishedRepartition | None:
    """The unfinished repartition Spark refuses to restart on, or None."""
    if latest is None or last_committed is None or last_committed < 0:
        return None
    if latest <= last_committed or not is_repartition_batch(shuffle_partitions, latest):
        return None
    return UnfinishedRepartition(
        latest,
        last_committed,
        int(shuffle_partitions[latest - 1] or 0),
        int(shuffle_partitions[latest] or 0),
    )
