"""Is the newest batch a repartition that never finished? (pure; Spark's own test on restart).

Spark 4.2+ repartitions a stopped query's state (``spark._streamingCheckpointManager.
repartition``) by writing one extra batch: ``offsets/N`` copies ``offsets/N-1`` with a new
``spark.sql.shuffle.partitions``, then the state in the new partition count, then
``commits/N``. On restart (``spark.sql.streaming.checkUnfinishedRepartitionOnRestart``, on by
default) ``MicroBatchExecution`` refuses a checkpoint whose newest ``offsets/`` entry is past the
last commit (and a commit exists) when that entry is a repartition batch, i.e. its shuffle
partitions differ from the batch before's (``OfflineStateRepartitionUtils.isRepartitionBatch``):
error class ``STREAMING_UNFINISHED_REPARTITION_DETECTED``.

A repartition attempted on an HDFS-provider checkpoint fails (``STATE_REPARTITION_INVALID_
CHECKPOINT.UNSUPPORTED_PROVIDER``) after writing ``offsets/N``, and leaves exactly that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

ERROR_CLASS = "STREAMING_UNFINISHED_REPARTITION_DETECTED"


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
            f"[{ERROR_CLASS}] The latest batch {self.batch} is for an unfinished state "
            f"repartitioning i.e. last committed batch is: {self.last_committed})."
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
