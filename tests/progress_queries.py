"""Real PySpark queries whose progress events trip (or do not trip) the progress health rules.

Each returns its checkpoint and the ``StreamingQueryProgress`` JSON of every batch
(``query.recentProgress``). The file-source queries read one small JSON file per batch
(``maxFilesPerTrigger=1``, ``availableNow``) whose modification times fix the batch order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.conftest import spark_conf, write_batch_files

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# 2023-11-14 22:13:20 UTC: event times of the file-source queries start here.
T0 = 1_700_000_000
KEYS = 500


@dataclass(frozen=True)
class Ran:
    """A finished query: its checkpoint and its progress events, oldest first."""

    checkpoint: Path
    events: list[dict[str, Any]]


@dataclass(frozen=True)
class Running:
    """A started query that stops by itself (``availableNow``): :meth:`finish` waits for it."""

    checkpoint: Path
    query: Any

    def finish(self) -> Ran:
        self.query.awaitTermination()
        return Ran(self.checkpoint, events_of(self.query))


def events_of(query: Any) -> list[dict[str, Any]]:
    return [json.loads(p.json) for p in query.recentProgress]


def steady_rows(batch: int, late: int = 0) -> list[dict[str, Any]]:
    """2,000 rows over the same 500 keys, event times inside one hour; ``late`` more rows two
    hours before the first batch (behind any watermark by then)."""
    rows = [
        {"ts": T0 + batch * 60 + i % 60, "k": i % KEYS, "p": f"{batch}-{i:04d}" + "x" * 64}
        for i in range(2000)
    ]
    rows += [{"ts": T0 - 7200 + i, "k": i % KEYS, "p": "late"} for i in range(late)]
    return rows


def windowed(
    spark: Any,
    base: Path,
    name: str,
    batches: list[list[dict[str, Any]]],
    agg: Callable[[Any], Any],
    extra: dict[str, str] | None = None,
) -> Running:
    """``groupBy(window(ts, 1 hour), k).agg(...)`` with a 10-minute watermark, HDFS state."""
    from pyspark.sql import functions as F

    write_batch_files(base / f"src-{name}", batches)
    settings = {
        "spark.sql.streaming.stateStore.providerClass": HDFS,
        "spark.sql.shuffle.partitions": "2",
        **(extra or {}),
    }
    with spark_conf(spark, settings):
        stream = (
            spark.readStream.schema("ts LONG, k INT, p STRING")
            .option("maxFilesPerTrigger", 1)
            .json(str(base / f"src-{name}"))
        )
        query = (
            stream.withColumn("t", F.col("ts").cast("timestamp"))
            .withWatermark("t", "10 minutes")
            .groupBy(F.window("t", "1 hour"), "k")
            .agg(agg(F.col("p")).alias("v"))
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(base / name))
            .trigger(availableNow=True)
            .start()
        )
    return Running(base / name, query)


def steady(spark: Any, base: Path) -> Running:
    """Healthy: the same 500 keys every batch, one value each (max), no late rows."""
    from pyspark.sql import functions as F

    return windowed(spark, base, "steady", [steady_rows(b) for b in range(6)], F.max)


def late(spark: Any, base: Path) -> Running:
    """As :func:`steady`, but batches 2 and 3 also carry rows two hours late: dropped."""
    from pyspark.sql import functions as F

    batches = [steady_rows(b, late=40 if b in (2, 3) else 0) for b in range(5)]
    return windowed(spark, base, "late", batches, F.max)


def growing_values(spark: Any, base: Path) -> Running:
    """As :func:`steady`, but each key collects every value it sees: values grow per key."""
    from pyspark.sql import functions as F

    return windowed(spark, base, "growing", [steady_rows(b) for b in range(6)], F.collect_list)


def compacting(spark: Any, base: Path) -> Running:
    """RocksDB with ``compactOnCommit``: each commit compacts the whole store, which grows by
    more keys every batch, so commit time grows with it."""
    src = base / "src-compacting"
    first = 0
    batches = []
    for b in range(7):
        n = 2000 * (b + 1)
        batches.append([{"k": first + i} for i in range(n)])
        first += n
    write_batch_files(src, batches)
    settings = {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
        "spark.sql.streaming.stateStore.rocksdb.compactOnCommit": "true",
        "spark.sql.shuffle.partitions": "2",
    }
    with spark_conf(spark, settings):
        stream = spark.readStream.schema("k LONG").option("maxFilesPerTrigger", 1).json(str(src))
        query = (
            stream.groupBy("k")
            .count()
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", str(base / "compacting"))
            .trigger(availableNow=True)
            .start()
        )
    return Running(base / "compacting", query)


def file_source_runs(spark: Any, base: Path) -> dict[str, Ran]:
    """:func:`steady`, :func:`late`, :func:`growing_values` and :func:`compacting`, by name,
    run side by side: a batch of these small queries costs mostly driver round trips, which
    they then share. (Each query copies the session's confs when it starts.) What the rules
    read of them is counts and sizes, and commit times only of ``compacting`` against
    itself."""
    starts = {
        "steady": steady,
        "late": late,
        "growing": growing_values,
        "compacting": compacting,
    }
    running = {name: start(spark, base) for name, start in starts.items()}
    return {name: query.finish() for name, query in running.items()}


def _start_rate(spark: Any, base: Path, name: str, start: Callable[[Any, list[Any]], Any]) -> Any:
    """Start a rate source (50 rows/s) query: ``start(writer, holder)`` starts it; ``holder``
    then holds it (a sink can ask it for its last progress)."""
    stream = spark.readStream.format("rate").option("rowsPerSecond", 50).load()
    holder: list[Any] = []
    query = start(stream.writeStream.option("checkpointLocation", str(base / name)), holder)
    holder.append(query)
    return query


def _stop_each(running: dict[str, tuple[Any, int]], base: Path) -> dict[str, Ran]:
    """Stop each running query (by checkpoint name) once ``batches`` batches read input; the
    queries run side by side, so the wait is the longest one's, not their sum."""
    done: dict[str, Ran] = {}
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            for name, (query, batches) in running.items():
                if name in done:
                    continue
                if sum(1 for p in query.recentProgress if p.numInputRows > 0) >= batches:
                    query.stop()
                    done[name] = Ran(base / name, events_of(query))
            if len(done) == len(running):
                break
            time.sleep(0.2)
    finally:
        for name, (query, _) in running.items():
            if name not in done:
                query.stop()
                done[name] = Ran(base / name, events_of(query))
    return done


def _epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def _behind_sink(slower: float) -> Callable[[Any, list[Any]], Any]:
    """A sink that cannot keep up: it needs ``slower`` × the time the batch's input took to
    arrive.

    Spark's input rate is rows ÷ (this trigger's start − the previous trigger's start); its
    processing rate is rows ÷ this batch's duration. The sink reads the previous trigger's
    start from the query's last progress and sleeps ``slower`` × the time since then, so the
    batch outlasts its input time and processing stays below input whatever the machine's
    load: the query falls behind, each batch a little longer than the last. (The first batch
    with input does not sleep: it follows batch 0, which is slow to start.)
    """

    def slow_sink(frame: Any, batch_id: int, holder: list[Any]) -> None:
        frame.count()
        last = holder[0].lastProgress if holder else None
        if last is None:
            return
        last = json.loads(last.json) if not isinstance(last, dict) else last
        # After a batch without input (the first, slow to start): no sleep, so the growth
        # starts from a short batch.
        if last["numInputRows"] > 0:
            time.sleep(slower * (time.time() - _epoch(last["timestamp"])))

    return lambda w, holder: w.foreachBatch(lambda f, b: slow_sink(f, b, holder)).start()


def _keeping_up(writer: Any, _: list[Any]) -> Any:
    """A light query on a 3-second trigger: each batch takes a fraction of the interval (a
    noop batch of 150 rows, well under a second even on a loaded 2-core machine), and the
    run waits for about five triggers, so a short interval keeps the test short."""
    return writer.format("noop").trigger(processingTime="3 seconds").start()


def falling_behind_and_keeping_up(
    spark: Any, base: Path, batches: int = 4, slower: float = 1.05
) -> tuple[Ran, Ran]:
    """Two rate-source queries, ``behind`` (:func:`_behind_sink`) and ``keeping-up``
    (:func:`_keeping_up`), each stopped once ``batches`` batches read input. Both wait on the
    clock (a sleeping sink, a trigger interval), not on the CPU: they run side by side."""
    running = {
        "behind": (_start_rate(spark, base, "behind", _behind_sink(slower)), batches),
        "keeping-up": (_start_rate(spark, base, "keeping-up", _keeping_up), batches),
    }
    done = _stop_each(running, base)
    return done["behind"], done["keeping-up"]
