"""``rewrite --verify-with-spark``: Spark's own state reader judges the destination.

Before the destination is renamed into place, Spark's ``statestore`` source reads every store
of it and of the source at the batch the rewrite ends at. The rows must be equal as multisets
(key and value, as Spark renders them), and each destination row must sit in the partition
Spark's ``pmod(hash(partition key), N)`` gives: the key columns, without the last one in the
stores the caller names (a join's ``index``, a session window's session: Spark's shuffle
leaves them out). pyspark and Java are needed; without them it is a one-line error.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from typing import Any

from stateglass.collectors.errors import SelfCheckFailed


def _frame(spark: Any, root: str, operator_id: int, store: str, batch: int) -> Any:
    return (
        spark.read.format("statestore")
        .option("operatorId", operator_id)
        .option("storeName", store)
        .option("batchId", batch)
        .load(root)
    )


def verify_with_spark(
    src: str,
    dst: str,
    batch: int,
    stores: Sequence[tuple[int, str]],
    partitions: int,
    last_field_unhashed: Collection[tuple[int, str]] = (),
) -> None:
    """Raise :class:`SelfCheckFailed` unless Spark reads ``dst`` as ``src`` at ``batch``;
    ``last_field_unhashed`` names the ``(operator id, store)`` whose key's last field is not
    part of the partition key."""
    from pyspark.sql import functions as F

    from stateglass.collectors.engines.spark import spark_session

    spark = spark_session()
    for operator_id, store in stores:
        before = _frame(spark, src, operator_id, store, batch)
        after = _frame(spark, dst, operator_id, store, batch)
        as_text = [F.to_json(F.struct("key")).alias("k"), F.to_json(F.struct("value")).alias("v")]
        want = Counter(tuple(r) for r in before.select(*as_text).collect())
        found = Counter(tuple(r) for r in after.select(*as_text).collect())
        if want != found:
            raise SelfCheckFailed(
                dst,
                f"Spark's reader finds {sum(found.values())} rows in operator {operator_id} "
                f"store {store}, not the source's {sum(want.values())}, or different ones",
            )
        names = [f.name for f in after.schema["key"].dataType.fields]
        if (operator_id, store) in last_field_unhashed:
            names = names[:-1]
        key_hash = F.pmod(F.hash(*[F.col(f"key.`{n}`") for n in names]), F.lit(partitions))
        misplaced = after.where(F.col("partition_id") != key_hash).count()
        if misplaced:
            raise SelfCheckFailed(
                dst,
                f"{misplaced} rows of operator {operator_id} store {store} are not in the "
                "partition Spark's hash gives",
            )
