"""num_keys per (partition, version) == the rows Spark's own reader returns at batch version − 1.

For every sample checkpoint, store, committed batch and partition. One Spark job per store:
the reads of all batches are unioned and grouped by (batch, partition_id).
transformWithState stores are left out: Spark reads them one state variable at a time, and
their raw key count spans every column family (``docs/architecture.md``).
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import pytest

from stateglass.collectors.checkpoints.checkpoint import Checkpoint
from stateglass.collectors.db.read import read_query
from tests.collectors.helpers import sample_id
from tests.e2e.oracle import format_samples

pytestmark = pytest.mark.spark


def _cases() -> list[Any]:
    cases = []
    for path in format_samples():
        cp = Checkpoint.open(path)
        for store in cp.stores():
            if store.uses_column_families:
                continue
            cases.append(
                pytest.param(
                    path,
                    store.operator_id,
                    store.store_name,
                    id=f"{sample_id(path)}-op{store.operator_id}-{store.store_name}",
                )
            )
    return cases


@pytest.mark.parametrize(("path", "operator", "store"), _cases())
def test_num_keys_equals_spark_row_count(
    spark: Any, samples_db: str, path: str, operator: int, store: str
) -> None:
    from pyspark.sql import functions as F

    cp = Checkpoint.open(path)
    info = cp.store(operator, store)
    ours = {
        (version - 1, partition): n
        for partition, version, n in read_query(
            samples_db,
            "SELECT partition_id, version, num_keys FROM state_versions "
            "WHERE checkpoint = ? AND operator_id = ? AND store_name = ?",
            [cp.root, operator, store],
        )
    }
    # A repartition changes the partitions from one batch to the next: each batch has its own.
    held = {b: cp.partitions_at(operator, b) for b in cp.commit_batch_ids}
    batches = [b for b in cp.commit_batch_ids if any((b, p) in ours for p in info.partitions)]
    assert batches, "nothing collected"
    frames = [
        spark.read.format("statestore")
        .option("batchId", b)
        .option("operatorId", operator)
        .option("storeName", store)
        .load(path)
        .select(F.lit(b).alias("batch"), "partition_id")
        for b in batches
    ]
    # A few dozen rows per batch: counting them here spares Spark a shuffle stage.
    rows = functools.reduce(lambda a, b: a.unionAll(b), frames).collect()
    theirs = Counter((r["batch"], r["partition_id"]) for r in rows)
    expected = {(b, p): theirs.get((b, p), 0) for b in batches for p in held[b]}
    assert {k: ours.get(k) for k in expected} == expected
