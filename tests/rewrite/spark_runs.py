"""The streaming runs the rewrite oracles make Spark do, and how they read state back.

A query reads one JSON file a batch (``maxFilesPerTrigger=1``) until its input is read
(``availableNow``) into a ``foreachBatch`` sink that keeps ``(batch id, *row)``. Several runs
may go at once (:func:`run_queries`): each query takes its confs when it starts, and a batch
costs mostly driver round trips, which concurrent queries share. Runs on checkpoints of the
same query id (a rewrite and its source's copy) go one after the other: Spark stops a running
query when another starts with its id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import spark_conf

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
SHUFFLE = "spark.sql.shuffle.partitions"
# The two providers the edit oracles run on.
PROVIDERS = {
    "hdfs": {PROVIDER: HDFS},
    "rocksdb-changelog": {PROVIDER: ROCKSDB, CHANGELOG: "true"},
}

Output = list[tuple[Any, ...]]
# (store name, key, value, partition id) as Spark's state reader renders them
StateRow = tuple[str, str, str, int]


@dataclass(frozen=True)
class Run:
    """One query run: ``build(source)`` is the streaming frame, written to ``cp``."""

    build: Callable[[Path], Any]
    source: Path
    cp: Path
    conf: dict[str, str]
    mode: str = "update"
    out: Output = field(default_factory=list, compare=False)


def run_queries(spark: Any, runs: Sequence[Run]) -> list[Output]:
    """Every run, at once but for those of one query id; each one's sink output, sorted."""
    waves: list[list[Run]] = []
    for run in runs:
        query_id = _query_id(run.cp)
        wave = next((w for w in waves if query_id not in {_query_id(r.cp) for r in w}), None)
        if wave is None:
            waves.append([run])
        else:
            wave.append(run)
    for wave in waves:
        _run_together(spark, wave)
    return [sorted(run.out) for run in runs]


def _query_id(cp: Path) -> str:
    """The query id of a checkpoint (a new one: its path, unique)."""
    metadata = cp / "metadata"
    return json.loads(metadata.read_text())["id"] if metadata.exists() else str(cp)


def _run_together(spark: Any, runs: Sequence[Run]) -> None:
    started = []
    for run in runs:

        def sink(frame: Any, batch_id: int, out: Output = run.out) -> None:
            out.extend((batch_id, *row) for row in frame.collect())

        with spark_conf(spark, run.conf):
            started.append(
                run.build(run.source)
                .writeStream.outputMode(run.mode)
                .foreachBatch(sink)
                .option("checkpointLocation", str(run.cp))
                .trigger(availableNow=True)
                .start()
            )
    for query in started:
        query.awaitTermination()


def run_query(spark: Any, run: Run) -> Output:
    """One run until its input is read; its sink output, sorted."""
    return run_queries(spark, [run])[0]


def state_frame(spark: Any, cp: Path, store: str = "default") -> Any:
    return spark.read.format("statestore").option("storeName", store).load(str(cp))


def state_rows(spark: Any, cp: Path, stores: Sequence[str] = ("default",)) -> list[StateRow]:
    """Spark's reader: ``(store, key, value, partition_id)`` of every row, sorted."""
    return sorted(
        (store, str(r["key"]), str(r["value"]), r["partition_id"])
        for store in stores
        for r in state_frame(spark, cp, store).collect()
    )


def multiset(rows: Sequence[StateRow]) -> list[tuple[str, str, str]]:
    """The rows without their partition, sorted."""
    return sorted((s, k, v) for s, k, v, _ in rows)


def spark_partitions(
    spark: Any,
    cp: Path,
    n: int,
    stores: Sequence[str] = ("default",),
    hashed: Callable[[list[str]], list[str]] = lambda names: names,
) -> list[tuple[int, int]]:
    """``(partition_id, pmod(hash(partition key), n))`` of every row, Spark hashing the key
    fields ``hashed`` keeps of the key's field names."""
    from pyspark.sql import functions as F

    out: list[tuple[int, int]] = []
    for store in stores:
        frame = state_frame(spark, cp, store)
        names = hashed([f.name for f in frame.schema["key"].dataType.fields])
        key_hash = F.pmod(F.hash(*[F.col(f"key.`{name}`") for name in names]), F.lit(n))
        out += [(r[0], r[1]) for r in frame.select("partition_id", key_hash).collect()]
    return out
