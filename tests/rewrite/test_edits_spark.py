"""Spark 4.3 judges ``stateglass rewrite --drop-keys``.

One SRC run per case: the query runs three batches on SRC. ``rewrite --drop-keys --apply``
writes DST without the matched keys; right after, Spark's state reader on DST returns SRC's
rows less the dropped keys'. Then the query restarts on DST and runs three more batches of
new input (which touches the dropped keys again).

The reference is what a query that never saw the dropped keys holds: the same query on a
fresh checkpoint, fed SRC's three batches without the rows of the dropped keys, then the
same three new batches. Its state must equal DST's after the restart (the kept keys carry
their state over; a dropped key starts from nothing, so its state is made of the new input
alone), and its sink output for the new batches must equal DST's.

Cases: an aggregation with null keys, a stream-stream join, a dropDuplicates and an
applyInPandasWithState (PySpark's flatMapGroupsWithState) whose processing-time timeout each
key stores with its value, each on HDFS and on RocksDB with changelog checkpointing. A
timeout is the clock's: the restarts' states are compared with it set aside, and right after
the rewrite every kept key still has its own.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from stateglass.app.cli import main
from tests.conftest import spark_conf, write_batch_files
from tests.rewrite.spark_runs import PROVIDERS

SCHEMA = "k STRING, id BIGINT"
JOIN_STORES = [
    f"{s}-{n}" for s in ("left", "right") for n in ("keyToNumValues", "keyWithIndexToValue")
]
OLD, NEW = 3, 3  # batches before the rewrite, and after it

Rows = list[dict[str, Any]]


def _rows(batch: int, keys: list[str | None], n: int = 12) -> Rows:
    return [{"k": keys[(batch * 5 + i) % len(keys)], "id": batch * 100 + i} for i in range(n)]


@dataclass(frozen=True)
class Case:
    """A query, its inputs (one list of batches per source), and the edit."""

    name: str
    sources: tuple[str, ...]
    stores: tuple[str, ...]
    mode: str
    drop: tuple[str, str]  # --drop-keys STORE PREDICATE
    dropped: Callable[[str, dict[str, Any]], bool]  # (source, row): a row of a dropped key
    inputs: dict[str, list[Rows]]  # source -> OLD + NEW batches
    conf: dict[str, str] = field(default_factory=dict)
    # A value field the clock sets (a processing-time timeout), set aside after a restart.
    clock: str | None = None


def _aggregation(spark: Any, read: Callable[[str], Any]) -> Any:
    from pyspark.sql import functions as F

    return read("in").groupBy("k").agg(F.sum("id").alias("s"), F.count("*").alias("c"))


def _join(spark: Any, read: Callable[[str], Any]) -> Any:
    from pyspark.sql import functions as F

    left = read("left").select(F.col("k").alias("lk"), F.col("id").alias("lid"))
    right = read("right").select(F.col("k").alias("rk"), F.col("id").alias("rid"))
    return left.join(right, F.col("lk") == F.col("rk"))


def _dedup(spark: Any, read: Callable[[str], Any]) -> Any:
    from pyspark.sql import functions as F

    # No watermark: a reference without some rows would otherwise see another watermark.
    return read("in").withColumn("g", F.col("id") % 4).dropDuplicates(["k", "g"])


def _count_with_timeout(key: Any, frames: Any, state: Any) -> Any:
    import pandas as pd

    (count,) = state.get if state.exists else (0,)
    for frame in frames:
        count += len(frame)
    state.update((count,))
    state.setTimeoutDuration(TIMEOUT_MS)
    yield pd.DataFrame({"k": [key[0]], "c": [count]})


def _fmgws(spark: Any, read: Callable[[str], Any]) -> Any:
    from pyspark.sql.streaming.state import GroupStateTimeout

    return (
        read("in")
        .groupBy("k")
        .applyInPandasWithState(
            _count_with_timeout,
            "k STRING, c BIGINT",
            "c BIGINT",
            "update",
            GroupStateTimeout.ProcessingTimeTimeout,
        )
    )


QUERIES = {"aggregation": _aggregation, "join": _join, "dedup": _dedup, "fmgws": _fmgws}
# An hour: every key's timeout is stored, and none fires while a test runs.
TIMEOUT_MS = 3_600_000
KEYS: list[str | None] = ["k0", "k1", None, "k2", "k3", "k4", None]
JOIN_KEYS: list[str | None] = ["k0", "k1", "k2", "k3", "k4", "k5"]
CASES = {
    "aggregation": Case(
        "aggregation",
        ("in",),
        ("default",),
        "update",
        ("0/default", "key.k IS NULL"),
        lambda _, row: row["k"] is None,
        {"in": [_rows(b, KEYS) for b in range(OLD + NEW)]},
    ),
    "join": Case(
        "join",
        ("left", "right"),
        tuple(JOIN_STORES),
        "append",
        ("0/left-keyToNumValues", "key.field0 = 'k3'"),
        lambda source, row: source == "left" and row["k"] == "k3",
        {
            "left": [_rows(b, JOIN_KEYS, 8) for b in range(OLD + NEW)],
            "right": [_rows(b, JOIN_KEYS[::-1], 5) for b in range(OLD + NEW)],
        },
    ),
    "dedup": Case(
        "dedup",
        ("in",),
        ("default",),
        "append",
        ("op0_default", "key.k = 'k3'"),
        lambda _, row: row["k"] == "k3",
        {"in": [_rows(b, JOIN_KEYS, 10) for b in range(OLD + NEW)]},
    ),
    "fmgws": Case(
        "fmgws",
        ("in",),
        ("default",),
        "update",
        ("0/default", "key.k = 'k3'"),
        lambda _, row: row["k"] == "k3",
        {"in": [_rows(b, JOIN_KEYS, 10) for b in range(OLD + NEW)]},
        # Processing-time timeouts otherwise run empty batches forever: availableNow never ends.
        {"spark.sql.streaming.noDataMicroBatches.enabled": "false"},
        clock="timeoutTimestamp",
    ),
}
RUNS = [(q, p) for q in CASES for p in PROVIDERS]


def _run(spark: Any, case: Case, inputs: Path, cp: Path, conf: dict[str, str]) -> list[Any]:
    """Run the case's query on ``cp`` until its input is read; its sink output, sorted."""
    out: list[tuple[Any, ...]] = []

    def sink(frame: Any, batch_id: int) -> None:
        out.extend((batch_id, *row) for row in frame.collect())

    def read(source: str) -> Any:
        reader = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
        return reader.json(str(inputs / source))

    with (
        spark_conf(spark, {**conf, **case.conf, "spark.sql.shuffle.partitions": "2"}),
        warnings.catch_warnings(),
    ):
        # PySpark 4.3 warns about pandas 3 on every pandas UDF; the pinned pandas is 3.x.
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas")
        query = (
            QUERIES[case.name](spark, read)
            .writeStream.outputMode(case.mode)
            .foreachBatch(sink)
            .option("checkpointLocation", str(cp))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
    return sorted(out, key=repr)


def _write(inputs: Path, case: Case, batches: int, without_dropped: bool = False) -> None:
    for source in case.sources:
        rows = [
            [r for r in batch if not (without_dropped and b < OLD and case.dropped(source, r))]
            for b, batch in enumerate(case.inputs[source][:batches])
        ]
        write_batch_files(inputs / source, rows)


def _state(
    spark: Any, case: Case, cp: Path, clock_free: bool = False
) -> list[tuple[str, str, str]]:
    """Spark's reader: ``(store, key, value)`` of every row, sorted (partition ignored);
    ``clock_free`` sets the case's clock field aside."""
    from pyspark.sql import functions as F

    frames = {
        store: spark.read.format("statestore").option("storeName", store).load(str(cp))
        for store in case.stores
    }
    if clock_free and case.clock:
        frames = {
            store: frame.withColumn("value", F.col("value").withField(case.clock, F.lit(None)))
            for store, frame in frames.items()
        }
    return sorted(
        (store, str(r["key"]), str(r["value"]))
        for store, frame in frames.items()
        for r in frame.collect()
    )


@dataclass(frozen=True)
class Runs:
    case: Case
    src_state: list[tuple[str, str, str]]
    after_rewrite: list[tuple[str, str, str]]
    dst_out: list[Any]
    dst_state: list[tuple[str, str, str]]
    ref_out: list[Any]
    ref_state: list[tuple[str, str, str]]


@pytest.fixture(
    scope="module",
    params=RUNS,
    ids=lambda qp: f"{qp[0]}-{qp[1]}",
)
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory, request: Any) -> Runs:
    query, provider = request.param
    case, conf = CASES[query], PROVIDERS[provider]
    tmp = tmp_path_factory.mktemp(f"edits-{query}-{provider}")
    src, dst, ref = tmp / "src", tmp / "dst", tmp / "ref"
    _write(tmp / "in", case, OLD)
    _run(spark, case, tmp / "in", src, conf)
    assert main(["rewrite", str(src), str(dst), "--drop-keys", *case.drop, "--apply"]) == 0
    after = _state(spark, case, dst)
    _write(tmp / "in", case, OLD + NEW)
    _write(tmp / "ref-in", case, OLD + NEW, without_dropped=True)
    dst_out = _run(spark, case, tmp / "in", dst, conf)
    ref_out = _run(spark, case, tmp / "ref-in", ref, conf)
    return Runs(
        case=case,
        src_state=_state(spark, case, src),
        after_rewrite=after,
        dst_out=dst_out,
        dst_state=_state(spark, case, dst, clock_free=True),
        ref_out=ref_out,
        ref_state=_state(spark, case, ref, clock_free=True),
    )


def test_the_rewrite_holds_the_source_state_less_the_dropped_keys(runs: Runs) -> None:
    assert runs.after_rewrite and len(runs.after_rewrite) < len(runs.src_state)
    assert set(runs.after_rewrite) < set(runs.src_state)
    if runs.case.clock:
        # Each kept key's clock field (its timeout) came over with it.
        assert all(f"{runs.case.clock}=None" not in v for *_, v in runs.after_rewrite)
        assert all(f"{runs.case.clock}=" in v for *_, v in runs.after_rewrite)


def test_a_restart_runs_as_a_query_that_never_saw_the_dropped_keys(runs: Runs) -> None:
    assert runs.dst_out and {row[0] for row in runs.dst_out} <= set(range(OLD, OLD + NEW))
    assert runs.dst_out == [row for row in runs.ref_out if row[0] >= OLD]
    assert runs.dst_state == runs.ref_state
