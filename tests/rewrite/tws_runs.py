"""The transformWithState query the rewrite tests run on Spark, and its input.

Per key: a ValueState with TTL (``stats``), a ListState (``recent``), a MapState
(``by_kind``) and a processing-time timer (Spark allows TTL in processing time only). The TTL
and the timer are an hour away: their index entries are written, and nothing expires or fires
while a test runs, so that a restart's output does not depend on the clock.
"""

from __future__ import annotations

import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from tests.rewrite.spark_runs import Run, run_queries

SCHEMA = "k STRING, kind STRING, amount BIGINT, ts TIMESTAMP"
OUTPUT = "k STRING, events BIGINT, total BIGINT, status STRING"
TTL_MS = 3_600_000
# RocksDB with changelog checkpointing, two partitions.
CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    "spark.sql.shuffle.partitions": "2",
    # Processing-time queries otherwise run empty batches forever: availableNow never ends.
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
}
STATE_VARIABLES = ("stats", "recent", "by_kind")
TIMERS = "timers"
VIEWS = (*STATE_VARIABLES, TIMERS)


def batches(first: int, count: int, keys: int) -> list[list[dict[str, Any]]]:
    """Batches ``first..first+count-1``: 12 rows each over ``keys`` keys."""
    out = []
    for b in range(first, first + count):
        out.append(
            [
                {
                    "k": f"k{(b * 5 + i) % keys}",
                    "kind": "ab"[i % 2],
                    "amount": b * 10 + i,
                    "ts": f"2024-01-01T00:{b:02d}:{i:02d}",
                }
                for i in range(12)
            ]
        )
    return out


def _processor() -> Any:
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Tracker(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.handle = handle
            self.stats = handle.getValueState("stats", "events BIGINT, total BIGINT", TTL_MS)
            self.recent = handle.getListState("recent", "amount BIGINT")
            self.by_kind = handle.getMapState("by_kind", "kind STRING", "n BIGINT")

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Any:
            import pandas as pd

            (k,) = key
            events, total = self.stats.get() if self.stats.exists() else (0, 0)
            for pdf in rows:
                events += len(pdf)
                total += int(pdf["amount"].sum())
                self.recent.appendList([(int(a),) for a in pdf["amount"]])
                for kind, group in pdf.groupby("kind"):
                    (n,) = self.by_kind.getValue((kind,)) or (0,)
                    self.by_kind.updateValue((kind,), (n + len(group),))
            self.stats.update((events, total))
            for timer in self.handle.listTimers():
                self.handle.deleteTimer(timer)
            self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + TTL_MS)
            yield pd.DataFrame([(k, events, total, "active")], columns=OUTPUT_COLUMNS)

        def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Any:
            import pandas as pd

            (k,) = key
            events, total = self.stats.get() if self.stats.exists() else (0, 0)
            self.stats.clear()
            self.recent.clear()
            self.by_kind.clear()
            yield pd.DataFrame([(k, events, total, "expired")], columns=OUTPUT_COLUMNS)

        def close(self) -> None:
            pass

    return Tracker()


OUTPUT_COLUMNS = ["k", "events", "total", "status"]


def tws_run(spark: Any, source: Path, cp: Path, conf: dict[str, str]) -> Run:
    """A run of the query on ``cp`` under ``conf``, reading ``source``."""

    def build(src: Path) -> Any:
        return (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(src))
            .groupBy("k")
            .transformWithStateInPandas(_processor(), OUTPUT, "Update", "ProcessingTime")
        )

    return Run(build, source, cp, conf)


def run_tws_queries(spark: Any, runs: list[Run]) -> list[list[tuple[Any, ...]]]:
    """Every run (:func:`tws_run`) until its input is read; each one's sink output, sorted."""
    with warnings.catch_warnings():
        # PySpark 4.3 warns about pandas 3 on every pandas UDF; the pinned pandas is 3.x.
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas")
        return run_queries(spark, runs)


def run_tws(spark: Any, source: Path, cp: Path, conf: dict[str, str]) -> list[tuple[Any, ...]]:
    """Run the query under ``conf`` until its input is read; its sink output, sorted."""
    return run_tws_queries(spark, [tws_run(spark, source, cp, conf)])[0]


def tws_frame(spark: Any, cp: Path, view: str) -> Any:
    """Spark's reader of one state variable, or of the registered timers (:data:`TIMERS`)."""
    reader = spark.read.format("statestore")
    if view == TIMERS:
        reader = reader.option("readRegisteredTimers", True)
    else:
        reader = reader.option("stateVarName", view)
    return reader.load(str(cp))


def tws_rows(spark: Any, cp: Path, view: str, clock_free: bool = False) -> Counter[tuple[str, ...]]:
    """The view's rows as JSON (partition left out); ``clock_free`` drops the processing
    times (timers' expiry, the TTL's expiration) a restart sets anew."""
    from pyspark.sql import functions as F

    frame = tws_frame(spark, cp, view)
    columns = [c for c in frame.columns if c != "partition_id"]
    if clock_free and view == TIMERS:
        columns = ["key"]
    if clock_free and view == "stats":
        frame = frame.withColumn("value", F.col("value").withField("ttlExpirationMs", F.lit(0)))
    texts = [F.to_json(F.struct(c)) for c in columns]
    return Counter(tuple(r) for r in frame.select(*texts).collect())
